//! Xen's Credit scheduler (Credit1) and AASH, the asymmetry-aware
//! hypervisor scheduler built on it (seed 003, Chapter 2).
//!
//! `xen-credit`, as Xen does it (and as §2 of the paper summarises it):
//! * one run queue per physical CPU, ordered by priority BOOST > UNDER >
//!   OVER, round-robin within a priority (a descheduled vCPU goes after all
//!   vCPUs of its priority);
//! * a tick (10 ms) on which the running vCPU burns credits (10 per ms of
//!   run time, as Xen's `CSCHED_CREDITS_PER_MSEC`) and drops a wake-up BOOST
//!   after consuming a tick (`csched_vcpu_acct`); the tick changes no other
//!   priority and preempts nothing before the 30 ms slice is over (Xen 3.4's
//!   `csched_tick`; AASH keeps the thesis's tick, §2, which also turns a
//!   vCPU whose credits are gone OVER and preempts it for a higher
//!   priority);
//! * an accounting period (3 ticks) that hands out `10 × period_ms` credits
//!   per physical CPU, shared between active domains by weight (capped at
//!   what a domain's active vCPUs can burn, the excess going to the others)
//!   and within a domain equally between its active vCPUs; `csched_acct`
//!   makes every active vCPU, a BOOSTed one included, UNDER (credit >= 0) or
//!   OVER, bounds credit below by one slice's worth, takes a vCPU whose
//!   credit exceeds one slice off the active list with its credit reset to 0
//!   (a tick that finds it running puts it back), and preempts nothing.
//!   AASH serves the running and queued vCPUs, clamps credit to ± one slice,
//!   and keeps a BOOST (credit > 0 is UNDER);
//! * BOOST on wake-up for an UNDER vCPU, preempting a lower-priority vCPU;
//!   a vCPU that wakes on a busy CPU has every idle CPU in its affinity
//!   reschedule and steal (`__runq_tickle`);
//! * a CPU whose next candidate is OVER, or that would go idle, first steals
//!   a higher-priority queued vCPU from its peers (`csched_load_balance`):
//!   busy peers only, in CPU order from the next one, the first queued vCPU
//!   of a strictly higher priority that may run here — an UNDER vCPU
//!   preempted at the end of its slice included; never a running one
//!   (`csched_runq_steal`; Xen 3.4's migration delay, `vcpu_migration_delay`,
//!   defaults to 0, so no vCPU counts as cache-hot);
//! * on each tick a running vCPU checks whether it would be better off
//!   elsewhere (`csched_vcpu_acct` calling `csched_cpu_pick` with its own CPU
//!   counted as idle): if another last-level-cache domain has more idle CPUs
//!   it is migrated there (Credit only; AASH places vCPUs by fast credits);
//! * wake-up placement: none in Xen 3.4 (`vcpu_wake` → `csched_vcpu_wake`
//!   queues the vCPU on its own processor, and the tickled idlers steal it
//!   or the vCPU it preempted); a first start takes a random idle CPU
//!   (Xen's arbitrary choice). AASH: the previous CPU if idle, else an idle
//!   CPU of the speed its fast credits allow, else the previous CPU.
//!
//! Native threads are scheduled as single-vCPU domains of weight 256.
//!
//! `aash` adds, on top of the same queues, ticks and slices:
//! * fast cores (the fastest CPU type, or the first `fast_cpus` CPUs) and
//!   fast credits: every accounting period the first n vCPUs (n = fast
//!   cores) of the fast queue, then of the FIFO normal queue, get fast
//!   credits for the period and go to the tail of their queue; the other
//!   active vCPUs share the slow cores' credits equally (§2.1);
//! * a vCPU with fast credits is migrated to a fast core's run queue; one
//!   without is migrated back, to the slow CPU whose vCPU just moved to a
//!   fast core (the one that would go idle) (§2.1.1);
//! * no stealing across core types; a fast core about to idle while a
//!   vCPU waits or runs on a slow core grants the next vCPU in queue order
//!   fast credits for the rest of the period, so fast cores never idle
//!   before slow ones (§2.1.1);
//! * asymmetry-aware guests: only a VM's first `fast_vcpus` vCPUs receive
//!   fast credits; when another vCPU of an aware VM reaches the queue head
//!   it is swapped with one of its VM's fast vCPUs, so the VM still gets fast
//!   credits in proportion to its vCPU count (§2.2);
//! * phase awareness: a VM whose active vCPUs are no more than the fast
//!   cores (one active vCPU with one fast core: a sequential phase, §1) has
//!   its active vCPUs in the fast queue, served first (§2.3);
//! * priority classes: the vCPUs of a `high` VM sit in the fast queue (§2.4).

use super::{About, Ctx, EnqFlags, ParamDef, Params, PolicySpec, Scheduler};
use crate::hw::{CpuId, Machine};
use crate::os::{TaskId, TaskState};
use crate::time::SimTime;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

/// Xen's credits per millisecond of run time.
const CREDITS_PER_MS: f64 = 10.0;

/// No run queue (`Credit::rq_of`).
const NONE: usize = usize::MAX;

const BOOST: u8 = 0;
const UNDER: u8 = 1;
const OVER: u8 = 2;

fn pri_name(p: u8) -> &'static str {
    match p {
        BOOST => "boost",
        UNDER => "under",
        _ => "over",
    }
}

fn common_params() -> Vec<ParamDef> {
    vec![
        ParamDef {
            name: "tick_ms",
            default: "10",
            doc: "scheduler tick: credits are burnt and preemption checked every tick",
        },
        ParamDef {
            name: "slice_ticks",
            default: "3",
            doc: "time slice in ticks (30 ms with a 10 ms tick)",
        },
        ParamDef {
            name: "acct_ticks",
            default: "3",
            doc: "accounting period in ticks: credits are handed out every period",
        },
    ]
}

/// Registry entry of `xen-credit`.
pub fn credit_info() -> About {
    About {
        name: "xen-credit",
        doc: "Xen's Credit scheduler (Credit1): per-CPU BOOST/UNDER/OVER run queues, credits by weight each accounting period, 30 ms slices, work stealing",
        params: common_params(),
    }
}

/// Registry entry of `aash` (the Credit parameters plus AASH's own).
pub fn aash_info() -> About {
    let mut params = common_params();
    params.extend([
        ParamDef {
            name: "fast_cpus",
            default: "auto",
            doc: "CPUs deemed fast: auto = those of the fastest type; a number n = CPUs 0..n-1 (to measure migration overhead on a symmetric machine)",
        },
        ParamDef {
            name: "phase",
            default: "true",
            doc: "phase awareness: a VM with no more active vCPUs than fast cores is served first",
        },
        ParamDef {
            name: "priorities",
            default: "true",
            doc: "priority classes: the vCPUs of high-priority VMs are served first",
        },
    ]);
    About {
        name: "aash",
        doc: "AASH, the asymmetry-aware hypervisor scheduler: Credit plus fast/slow credits shared round-robin, asymmetry-aware guests, sequential-phase acceleration, two priority classes",
        params,
    }
}

/// AASH state on top of Credit.
struct Aash {
    fast: Vec<bool>,
    nfast: usize,
    phase: bool,
    priorities: bool,
    /// FIFO of vCPUs (and native threads) for fast credits.
    normal: SeqQueue,
    /// Served first: vCPUs of high-priority VMs and of VMs in a sequential
    /// phase.
    fastq: SeqQueue,
    /// Tasks known to the queues.
    known: Vec<bool>,
    /// Fast credits left this period.
    fast_credit: Vec<f64>,
    /// Holders of fast credits this period (in no particular order).
    holders: Vec<TaskId>,
    /// Per task: whether it is in `holders` (kept with it).
    is_holder: Vec<bool>,
    /// Per task: its index in `holders` while it holds credits.
    holder_at: Vec<usize>,
    /// Per CPU: tasks that `move_to` sent there while they ran elsewhere
    /// (the engine moves them when they stop); stale entries are dropped
    /// as they are found. With the CPU's queue and current task these are
    /// the only tasks whose CPU can be this one.
    inbound: Vec<Vec<TaskId>>,
    /// Tasks whose state may have changed since the fast-credit walks last
    /// looked (`touched`), once each: their entries in `normal` and
    /// `fastq` are marked active or not, and a holder among them that
    /// blocked gives its credits up.
    changed: Vec<TaskId>,
    /// Per task: whether it is in `changed`.
    is_changed: Vec<bool>,
    /// Per task: whether it sits in `fastq` (else in `normal`, if known).
    in_fastq: Vec<bool>,
    /// VMs whose vCPUs changed state since `update_queues` last looked
    /// (one vCPU task of each): only their vCPUs can change queue.
    dirty: Vec<TaskId>,
    /// Per VM: whether it is in `dirty`.
    vm_dirty: Vec<bool>,
    /// Grants in order, for tests and reports: (time, task).
    pub grants: Vec<(SimTime, TaskId)>,
}

/// The entries of one of a `SeqQueue`'s indexes in queue order, with their
/// keys.
fn keyed(m: &BTreeMap<u64, TaskId>) -> impl Iterator<Item = (u64, TaskId)> + '_ {
    m.iter().map(|(&k, &t)| (k, t))
}

/// The tasks of one of a `SeqQueue`'s indexes after key `k`, in queue order.
fn after(m: &BTreeMap<u64, TaskId>, k: u64) -> impl Iterator<Item = TaskId> + '_ {
    m.range((Bound::Excluded(k), Bound::Unbounded))
        .map(|(_, &t)| t)
}

/// Set task `t`'s mark in `flags` to `on` (growing it); whether it changed.
fn set_flag(flags: &mut Vec<bool>, t: TaskId, on: bool) -> bool {
    if flags.len() <= t {
        flags.resize(t + 1, false);
    }
    std::mem::replace(&mut flags[t], on) != on
}

/// Spacing of consecutive keys of a `SeqQueue` (room for insertions
/// between two entries before the keys must be spread again).
const SEQ_GAP: u64 = 1 << 20;

/// A FIFO of tasks that also removes or inserts in the middle in
/// O(log n): each entry's key is a sequence number, larger towards the
/// tail, so iterating the keys in order gives the queue order.
struct SeqQueue {
    by_seq: BTreeMap<u64, TaskId>,
    /// Per task: its key while it is queued (`u64::MAX` otherwise).
    seq: Vec<u64>,
    /// Key of the next entry pushed to the tail.
    next: u64,
    /// The entries whose task is marked active (`set_live`), by key: the
    /// same order without the sleeping tasks that a walk would step over.
    live: BTreeMap<u64, TaskId>,
    /// Per task: whether it is marked active (kept while it is out of the
    /// queue).
    is_live: Vec<bool>,
    /// The entries marked active whose task is not marked held
    /// (`set_held`: AASH's fast-credit holders), by key: what a walk that
    /// steps over the holders visits, without the holders.
    free: BTreeMap<u64, TaskId>,
    /// Per task: whether it is marked held (kept while it is out of the
    /// queue).
    is_held: Vec<bool>,
}

impl SeqQueue {
    fn new() -> Self {
        SeqQueue {
            by_seq: BTreeMap::new(),
            seq: Vec::new(),
            next: SEQ_GAP,
            live: BTreeMap::new(),
            is_live: Vec::new(),
            free: BTreeMap::new(),
            is_held: Vec::new(),
        }
    }

    fn key(&self, t: TaskId) -> Option<u64> {
        self.seq.get(t).copied().filter(|&k| k != u64::MAX)
    }

    fn contains(&self, t: TaskId) -> bool {
        self.key(t).is_some()
    }

    /// Tasks in queue order, with their keys.
    fn iter(&self) -> impl Iterator<Item = (u64, TaskId)> + '_ {
        keyed(&self.by_seq)
    }

    fn live(&self, t: TaskId) -> bool {
        self.is_live.get(t).copied().unwrap_or(false)
    }

    fn held(&self, t: TaskId) -> bool {
        self.is_held.get(t).copied().unwrap_or(false)
    }

    /// Mark `t` held or not.
    fn set_held(&mut self, t: TaskId, on: bool) {
        if !set_flag(&mut self.is_held, t, on) {
            return;
        }
        if let Some(k) = self.key(t).filter(|_| self.live(t)) {
            if on {
                self.free.remove(&k);
            } else {
                self.free.insert(k, t);
            }
        }
    }

    /// Mark `t` active or not.
    fn set_live(&mut self, t: TaskId, on: bool) {
        if !set_flag(&mut self.is_live, t, on) {
            return;
        }
        if let Some(k) = self.key(t) {
            let free = !self.held(t);
            if on {
                self.live.insert(k, t);
                if free {
                    self.free.insert(k, t);
                }
            } else {
                self.live.remove(&k);
                if free {
                    self.free.remove(&k);
                }
            }
        }
    }

    fn set_key(&mut self, t: TaskId, k: u64) {
        if self.seq.len() <= t {
            self.seq.resize(t + 1, u64::MAX);
        }
        self.seq[t] = k;
        self.by_seq.insert(k, t);
        if self.live(t) {
            self.live.insert(k, t);
            if !self.held(t) {
                self.free.insert(k, t);
            }
        }
    }

    /// Spread the keys again (same order): `SEQ_GAP`, 2 `SEQ_GAP`, ...
    fn renumber(&mut self) {
        let order: Vec<TaskId> = self.by_seq.values().copied().collect();
        self.by_seq.clear();
        self.live.clear();
        self.free.clear();
        self.next = SEQ_GAP;
        for t in order {
            let k = self.next;
            self.next += SEQ_GAP;
            self.set_key(t, k);
        }
    }

    fn push_back(&mut self, t: TaskId) {
        debug_assert!(!self.contains(t), "task {t} queued twice");
        if self.next.checked_add(SEQ_GAP).is_none() {
            self.renumber();
        }
        let k = self.next;
        self.next += SEQ_GAP;
        self.set_key(t, k);
    }

    /// Insert `t` just ahead of the queued task `before`.
    fn insert_before(&mut self, t: TaskId, before: TaskId) {
        debug_assert!(!self.contains(t), "task {t} queued twice");
        for _ in 0..2 {
            let kb = self.key(before).expect("queued");
            let prev = self.by_seq.range(..kb).next_back().map_or(0, |(&k, _)| k);
            if kb - prev >= 2 {
                self.set_key(t, prev + (kb - prev) / 2);
                return;
            }
            self.renumber();
        }
        unreachable!("keys are SEQ_GAP apart after renumbering");
    }

    /// Remove `t`; whether it was queued.
    fn remove(&mut self, t: TaskId) -> bool {
        match self.key(t) {
            Some(k) => {
                self.by_seq.remove(&k);
                self.live.remove(&k);
                self.free.remove(&k);
                self.seq[t] = u64::MAX;
                true
            }
            None => false,
        }
    }
}

/// The machine's last-level-cache domains: each CPU's domain (dense
/// index), each domain's CPUs as a bit mask, and a per-domain counter that
/// `xen_pick` fills with idle CPUs.
#[derive(Default)]
struct LlcMasks {
    idx: Vec<usize>,
    mask: Vec<Vec<u64>>,
    count: Vec<usize>,
    /// Each domain's words that hold any of its CPUs: `lo..hi`.
    span: Vec<(usize, usize)>,
}

impl LlcMasks {
    fn new(m: &Machine, n: usize) -> LlcMasks {
        let words = n.div_ceil(64);
        let mut ids: Vec<u32> = Vec::new();
        let mut out = LlcMasks::default();
        for c in 0..n {
            let l = m.cpus[c].llc;
            let d = match ids.iter().position(|&x| x == l) {
                Some(d) => d,
                None => {
                    ids.push(l);
                    out.mask.push(vec![0; words]);
                    ids.len() - 1
                }
            };
            out.idx.push(d);
            out.mask[d][c / 64] |= 1 << (c % 64);
        }
        out.count = vec![0; ids.len()];
        out.span = out
            .mask
            .iter()
            .map(|m| {
                let lo = m.iter().position(|&w| w != 0).unwrap_or(0);
                let hi = m.iter().rposition(|&w| w != 0).map_or(lo, |h| h + 1);
                (lo, hi)
            })
            .collect();
        out
    }
}

/// The first CPU after `from` in cyclic order (`from + 1`, …, `n - 1`, `0`,
/// …, `from`) whose bit is set in the mask given word by word by `word`.
#[inline]
fn next_cyclic(n: usize, from: CpuId, word: impl Fn(usize) -> u64) -> Option<CpuId> {
    let words = n.div_ceil(64);
    let start = from + 1;
    // From `start` to the end.
    if start < n {
        let (w0, b0) = (start / 64, start % 64);
        let first = word(w0) & (u64::MAX << b0);
        if first != 0 {
            return Some(w0 * 64 + first.trailing_zeros() as usize);
        }
        for w in w0 + 1..words {
            let x = word(w);
            if x != 0 {
                return Some(w * 64 + x.trailing_zeros() as usize);
            }
        }
    }
    // Wrapped: from 0 up to `from` itself.
    let last = from.min(n - 1);
    for w in 0..=last / 64 {
        let mut x = word(w);
        if w == last / 64 {
            let b = last % 64;
            if b < 63 {
                x &= (1u64 << (b + 1)) - 1;
            }
        }
        if x != 0 {
            return Some(w * 64 + x.trailing_zeros() as usize);
        }
    }
    None
}

/// The first set bit of `lo..hi` (ascending) in the mask given word by
/// word by `word` for which `f` holds.
#[inline]
fn scan_bits(
    lo: usize,
    hi: usize,
    word: &impl Fn(usize) -> u64,
    f: &mut impl FnMut(CpuId) -> bool,
) -> Option<CpuId> {
    if lo >= hi {
        return None;
    }
    for w in lo / 64..=(hi - 1) / 64 {
        let mut x = word(w);
        if w == lo / 64 {
            x &= u64::MAX << (lo % 64);
        }
        if w == (hi - 1) / 64 && (hi & 63) != 0 {
            x &= (1u64 << (hi % 64)) - 1;
        }
        while x != 0 {
            let c = w * 64 + x.trailing_zeros() as usize;
            if f(c) {
                return Some(c);
            }
            x &= x - 1;
        }
    }
    None
}

/// [`scan_bits`] over a mask whose non-zero words are marked in `sum` (bit
/// `w % 64` of `sum[w / 64]` set if word `w` may have set bits): only the
/// marked words are read, so a mask with few set bits is scanned in
/// O(words / 64 + marked words). Same bits, same order as [`scan_bits`].
#[inline]
fn scan_bits_sparse(
    lo: usize,
    hi: usize,
    sum: &[u64],
    word: &impl Fn(usize) -> u64,
    f: &mut impl FnMut(CpuId) -> bool,
) -> Option<CpuId> {
    if lo >= hi {
        return None;
    }
    let mut found = None;
    scan_bits(lo / 64, (hi - 1) / 64 + 1, &|s| sum[s], &mut |w| {
        found = scan_bits(lo.max(w * 64), hi.min(w * 64 + 64), word, f);
        found.is_some()
    });
    found
}

/// [`find_cyclic`] over a mask whose non-zero words are marked in `sum`
/// (see [`scan_bits_sparse`]).
#[inline]
fn find_cyclic_sparse(
    n: usize,
    from: CpuId,
    sum: &[u64],
    word: impl Fn(usize) -> u64,
    mut f: impl FnMut(CpuId) -> bool,
) -> Option<CpuId> {
    scan_bits_sparse(from + 1, n, sum, &word, &mut f)
        .or_else(|| scan_bits_sparse(0, from.min(n), sum, &word, &mut f))
}

/// The first CPU in cyclic order after `from` (`from + 1`, …, `n - 1`, `0`,
/// …, `from - 1`; `from` itself excluded) whose bit is set in `word` and for
/// which `f` holds: a scan of the peers of `from` that visits only the set
/// bits.
#[inline]
fn find_cyclic(
    n: usize,
    from: CpuId,
    word: impl Fn(usize) -> u64,
    mut f: impl FnMut(CpuId) -> bool,
) -> Option<CpuId> {
    scan_bits(from + 1, n, &word, &mut f).or_else(|| scan_bits(0, from.min(n), &word, &mut f))
}

/// Bits `0..n` of a mask of `words` words, the rest clear.
#[inline]
fn valid_word(n: usize, w: usize) -> u64 {
    let end = (w + 1) * 64;
    if end <= n {
        u64::MAX
    } else {
        (1u64 << (n % 64)) - 1
    }
}

/// Xen Credit, optionally with AASH.
pub struct Credit {
    name: String,
    tick: SimTime,
    slice: SimTime,
    acct_ticks: u64,
    ticks: u64,
    rq: Vec<VecDeque<TaskId>>,
    slice_start: Vec<SimTime>,
    last_burn: Vec<SimTime>,
    credit: Vec<f64>,
    pri: Vec<u8>,
    aash: Option<Aash>,
    /// Where `xen_pick` last chose within each CPU's domain.
    idle_bias: Vec<CpuId>,
    /// The machine's LLC domains as CPU masks, for `xen_pick`.
    llc: LlcMasks,
    /// Reused bit masks of `xen_pick` (allowed and idle CPUs).
    scratch_allowed: Vec<u64>,
    scratch_idlers: Vec<u64>,
    /// Reused list of `tickle_idlers`.
    scratch_tickle: Vec<CpuId>,
    /// Per task: the CPU whose run queue holds it (`NONE` if none).
    rq_of: Vec<usize>,
    /// Per CPU: queued tasks by priority (BOOST, UNDER, OVER).
    rq_count: Vec<[u32; 3]>,
    /// `le[k]`: CPUs whose queue holds a task of priority ≤ k (so `le[2]`:
    /// non-empty queues).
    le: [Vec<u64>; 3],
    /// CPUs running a task (set in `running`, cleared in `stopping`, as the
    /// engine sets and clears the current task just before them).
    run_mask: Vec<u64>,
    /// `steal_sum[k]`: bit `w` (of word `w / 64`) set iff word `w` of
    /// `le[k] & run_mask` is not zero, so that stealing, which looks only at
    /// busy CPUs with queued work, skips the empty words at once.
    steal_sum: [Vec<u64>; 3],
    /// `steal_words[k]`: how many bits of `steal_sum[k]` are set (0: no
    /// busy CPU has queued work of priority ≤ k, and a steal returns at
    /// once; an idle CPU told to schedule usually finds that).
    steal_words: [u32; 3],
    /// CPUs a running vCPU was sent to on this tick (`move_running`): no
    /// longer idle for the next checks.
    claimed: Vec<u64>,
    /// CPU masks by speed for AASH (fast, slow); every CPU in both without.
    fast_mask: Vec<u64>,
    slow_mask: Vec<u64>,
    /// Priority transitions (time, task, from, to), kept when `log` is on.
    pub log: Option<Vec<(SimTime, TaskId, &'static str, &'static str)>>,
    /// Credit only: Xen's active list (`active_vcpu_elem`), the vCPUs that
    /// accounting serves: a vCPU joins when a tick finds it running
    /// (`__csched_vcpu_acct_start`) and stays, blocked or not, until
    /// accounting finds its credit above one slice
    /// (`__csched_vcpu_acct_stop_locked`, credit reset to 0) or it exits.
    xen_active: Vec<bool>,
    /// The members of `xen_active`, ascending.
    xen_list: Vec<TaskId>,
}

impl Credit {
    /// Build `xen-credit` or `aash` from a parsed spec.
    pub fn from_params(ps: &PolicySpec, m: &Machine) -> Result<Credit, String> {
        let is_aash = ps.name == "aash";
        let defs = if is_aash {
            aash_info().params
        } else {
            credit_info().params
        };
        let p = Params::new(&ps.name, &ps.params, &defs)?;
        let tick_ms = p.f64("tick_ms", 0.1, 1000.0)?;
        let slice_ticks = p.f64("slice_ticks", 1.0, 1000.0)?.round() as u64;
        let acct_ticks = p.f64("acct_ticks", 1.0, 1000.0)?.round() as u64;
        let tick = SimTime::from_secs_f64(tick_ms * 1e-3);
        let n = m.ncpus();
        let aash = if is_aash {
            let fast: Vec<bool> = if p.given("fast_cpus") {
                let k = p.f64("fast_cpus", 1.0, (n.max(2) - 1) as f64)?.round() as usize;
                (0..n).map(|c| c < k).collect()
            } else {
                let perf: Vec<f64> = (0..n).map(|c| m.perf(c, m.ty(c).fmax())).collect();
                let best = perf.iter().copied().fold(0.0f64, f64::max);
                let worst = perf.iter().copied().fold(f64::INFINITY, f64::min);
                if best <= worst * (1.0 + 1e-9) {
                    return Err(format!(
                        "{}: the machine has no faster CPU type; give fast_cpus=N to deem CPUs 0..N-1 fast",
                        ps.name
                    ));
                }
                perf.iter().map(|&x| x >= best * (1.0 - 1e-9)).collect()
            };
            let nfast = fast.iter().filter(|&&f| f).count();
            Some(Aash {
                fast,
                nfast,
                phase: p.bool("phase")?,
                priorities: p.bool("priorities")?,
                normal: SeqQueue::new(),
                fastq: SeqQueue::new(),
                known: Vec::new(),
                fast_credit: Vec::new(),
                holders: Vec::new(),
                is_holder: Vec::new(),
                holder_at: Vec::new(),
                inbound: vec![Vec::new(); n],
                changed: Vec::new(),
                is_changed: Vec::new(),
                in_fastq: Vec::new(),
                dirty: Vec::new(),
                vm_dirty: Vec::new(),
                grants: Vec::new(),
            })
        } else {
            None
        };
        let words = n.div_ceil(64);
        let (mut fast_mask, mut slow_mask) = (vec![0u64; words], vec![0u64; words]);
        for c in 0..n {
            let fast = aash.as_ref().is_some_and(|a| a.fast[c]);
            if fast || aash.is_none() {
                fast_mask[c / 64] |= 1 << (c % 64);
            }
            if !fast {
                slow_mask[c / 64] |= 1 << (c % 64);
            }
        }
        let mut name = ps.name.clone();
        if !ps.params.is_empty() {
            let kv: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            name = format!("{name}[{}]", kv.join(", "));
        }
        Ok(Credit {
            name,
            tick,
            slice: SimTime(tick.0 * slice_ticks),
            acct_ticks,
            ticks: 0,
            rq: vec![VecDeque::new(); n],
            slice_start: vec![SimTime::ZERO; n],
            last_burn: vec![SimTime::ZERO; n],
            credit: Vec::new(),
            pri: Vec::new(),
            aash,
            idle_bias: Vec::new(),
            llc: LlcMasks::default(),
            scratch_allowed: Vec::new(),
            scratch_idlers: Vec::new(),
            scratch_tickle: Vec::new(),
            rq_of: Vec::new(),
            rq_count: vec![[0; 3]; n],
            le: std::array::from_fn(|_| vec![0; n.div_ceil(64)]),
            run_mask: vec![0; n.div_ceil(64)],
            steal_sum: std::array::from_fn(|_| vec![0; n.div_ceil(64).div_ceil(64)]),
            steal_words: [0; 3],
            claimed: vec![0; n.div_ceil(64)],
            fast_mask,
            slow_mask,
            log: None,
            xen_active: Vec::new(),
            xen_list: Vec::new(),
        })
    }

    /// Fast-credit grants so far (AASH): (time, task).
    pub fn grants(&self) -> &[(SimTime, TaskId)] {
        self.aash.as_ref().map(|a| &a.grants[..]).unwrap_or(&[])
    }

    fn grow(&mut self, t: TaskId) {
        if self.credit.len() <= t {
            self.credit.resize(t + 1, 0.0);
            self.pri.resize(t + 1, UNDER);
            self.rq_of.resize(t + 1, NONE);
            if let Some(a) = self.aash.as_mut() {
                a.known.resize(t + 1, false);
                a.fast_credit.resize(t + 1, 0.0);
                a.is_holder.resize(t + 1, false);
                a.holder_at.resize(t + 1, usize::MAX);
                a.is_changed.resize(t + 1, false);
                a.in_fastq.resize(t + 1, false);
            }
        }
    }

    fn set_pri(&mut self, cx: &Ctx, t: TaskId, p: u8) {
        if self.pri[t] != p {
            if let Some(log) = self.log.as_mut() {
                log.push((cx.now, t, pri_name(self.pri[t]), pri_name(p)));
            }
            self.pri[t] = p;
        }
    }

    /// Per-slice credit cap.
    fn cap(&self) -> f64 {
        self.slice.0 as f64 * 1e-6 * CREDITS_PER_MS
    }

    fn is_fast(&self, cpu: CpuId) -> bool {
        self.aash.as_ref().is_some_and(|a| a.fast[cpu])
    }

    /// Insert at the tail of its priority class.
    fn insert(&mut self, cpu: CpuId, t: TaskId) {
        let p = self.pri[t];
        let q = &mut self.rq[cpu];
        let pos = q.iter().position(|&x| self.pri[x] > p).unwrap_or(q.len());
        q.insert(pos, t);
        self.queued(cpu, t, true);
    }

    fn remove(&mut self, t: TaskId) {
        let Some(&cpu) = self.rq_of.get(t).filter(|&&c| c != NONE) else {
            return;
        };
        if let Some(i) = self.rq[cpu].iter().position(|&x| x == t) {
            self.rq[cpu].remove(i);
            self.queued(cpu, t, false);
        }
    }

    /// Remove the task at position `i` of `cpu`'s queue.
    fn remove_at(&mut self, cpu: CpuId, i: usize) -> Option<TaskId> {
        let t = self.rq[cpu].remove(i)?;
        self.queued(cpu, t, false);
        Some(t)
    }

    /// `t` joined (`add`) or left `cpu`'s queue: the indexes follow.
    #[inline]
    fn queued(&mut self, cpu: CpuId, t: TaskId, add: bool) {
        let p = self.pri[t] as usize;
        if add {
            self.rq_of[t] = cpu;
            self.rq_count[cpu][p] += 1;
        } else {
            self.rq_of[t] = NONE;
            self.rq_count[cpu][p] -= 1;
        }
        self.mark(cpu);
    }

    /// Bring `cpu`'s bits of the `le` masks up to date with its counts.
    #[inline]
    fn mark(&mut self, cpu: CpuId) {
        let k = &self.rq_count[cpu];
        let (w, bit) = (cpu / 64, 1u64 << (cpu % 64));
        let mut sum = 0;
        for (p, &cnt) in k.iter().enumerate() {
            sum += cnt;
            if sum > 0 {
                self.le[p][w] |= bit;
            } else {
                self.le[p][w] &= !bit;
            }
        }
        self.sync_steal_sum(w);
    }

    /// Bring word `w`'s bits of `steal_sum` up to date with `le` and
    /// `run_mask`.
    #[inline]
    fn sync_steal_sum(&mut self, w: usize) {
        let (sw, bit) = (w / 64, 1u64 << (w % 64));
        for p in 0..3 {
            let was = self.steal_sum[p][sw] & bit != 0;
            let now = self.le[p][w] & self.run_mask[w] != 0;
            if now && !was {
                self.steal_sum[p][sw] |= bit;
                self.steal_words[p] += 1;
            } else if was && !now {
                self.steal_sum[p][sw] &= !bit;
                self.steal_words[p] -= 1;
            }
        }
    }

    /// Recount `cpu`'s queue by priority (after priorities changed).
    fn recount(&mut self, cpu: CpuId) {
        let mut k = [0u32; 3];
        for &t in &self.rq[cpu] {
            k[self.pri[t] as usize] += 1;
        }
        self.rq_count[cpu] = k;
        self.mark(cpu);
    }

    fn idle(&self, cx: &Ctx, cpu: CpuId) -> bool {
        cx.online(cpu) && cx.current(cpu).is_none() && self.rq[cpu].is_empty()
    }

    /// CPUs of the same speed class as `cpu` (AASH steals only within it).
    fn same_type(&self, cpu: CpuId) -> &[u64] {
        if self.is_fast(cpu) || self.aash.is_none() {
            &self.fast_mask
        } else {
            &self.slow_mask
        }
    }

    /// The masks against the engine's state and the queues (debug builds).
    #[cfg(debug_assertions)]
    fn audit_masks(&self, cx: &Ctx) {
        for c in 0..cx.ncpus() {
            let bit = |m: &[u64]| m[c / 64] & (1 << (c % 64)) != 0;
            assert_eq!(
                bit(&self.run_mask),
                cx.current(c).is_some(),
                "run mask, cpu {c}"
            );
            assert_eq!(
                bit(&self.le[2]),
                !self.rq[c].is_empty(),
                "queued mask, cpu {c}"
            );
            for p in 0..3 {
                let want = self.rq[c].iter().any(|&t| self.pri[t] as usize <= p);
                assert_eq!(bit(&self.le[p]), want, "priority mask {p}, cpu {c}");
            }
            if c % 64 == 0 {
                let w = c / 64;
                for p in 0..3 {
                    let marked = self.steal_sum[p][w / 64] & (1 << (w % 64)) != 0;
                    let want = self.le[p][w] & self.run_mask[w] != 0;
                    assert_eq!(marked, want, "steal summary {p}, word {w}");
                }
            }
            for &t in &self.rq[c] {
                assert_eq!(self.rq_of[t], c, "queue of task {t}");
            }
        }
        for p in 0..3 {
            let marked: u32 = self.steal_sum[p].iter().map(|x| x.count_ones()).sum();
            assert_eq!(marked, self.steal_words[p], "steal summary count {p}");
        }
    }

    /// Burn the credits of the task running on `cpu` up to now.
    fn burn(&mut self, cx: &Ctx, cpu: CpuId) {
        let Some(t) = cx.current(cpu) else {
            self.last_burn[cpu] = cx.now;
            return;
        };
        self.grow(t);
        let ms = cx.now.since(self.last_burn[cpu]).0 as f64 * 1e-6;
        self.last_burn[cpu] = cx.now;
        let used = ms * CREDITS_PER_MS;
        if let Some(a) = self.aash.as_mut() {
            if a.fast[cpu] {
                a.fast_credit[t] -= used;
                return;
            }
        }
        self.credit[t] -= used;
    }

    /// The CPUs a task may use: AASH keeps vCPUs with fast credits on fast
    /// cores and the others on slow ones.
    fn allowed(&self, cx: &Ctx, t: TaskId, cpu: CpuId) -> bool {
        if !cx.online(cpu) || !cx.task(t).affinity.contains(cpu) {
            return false;
        }
        match &self.aash {
            None => true,
            Some(a) => a.fast[cpu] == a.is_holder[t],
        }
    }

    /// Domain of a task: its VM, or the task itself for a native thread.
    fn domain(cx: &Ctx, t: TaskId) -> (usize, u32) {
        match cx.vcpu(t) {
            Some(v) => (v.vm, v.weight),
            None => (usize::MAX - t, 256),
        }
    }

    fn active(cx: &Ctx, t: TaskId) -> bool {
        matches!(cx.task(t).state, TaskState::Runnable | TaskState::Running)
    }

    /// Active host tasks, ascending.
    fn active_tasks(&self, cx: &Ctx) -> Vec<TaskId> {
        // Sized once: collecting a flattened chain grows the vector step by
        // step otherwise.
        let queued: usize = self.rq.iter().map(|q| q.len()).sum();
        let mut v: Vec<TaskId> = Vec::with_capacity(queued + cx.ncpus());
        v.extend(self.rq.iter().flatten().copied());
        v.extend((0..cx.ncpus()).filter_map(|c| cx.current(c)));
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Credit accounting: hand out `total` credits to `tasks` by domain
    /// weight, capped per domain by what its active vCPUs can burn, the
    /// excess going to the other domains.
    fn distribute(&mut self, cx: &Ctx, tasks: &[TaskId], total: f64) {
        let per_task_cap = self.acct_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
        // Domains in order of first appearance.
        let mut doms: Vec<(usize, u32, Vec<TaskId>)> = Vec::new();
        let mut index: std::collections::HashMap<usize, usize> = Default::default();
        for &t in tasks {
            let (d, w) = Self::domain(cx, t);
            match index.get(&d) {
                Some(&i) => doms[i].2.push(t),
                None => {
                    index.insert(d, doms.len());
                    doms.push((d, w, vec![t]));
                }
            }
        }
        let mut left = total;
        let mut open: Vec<usize> = (0..doms.len()).collect();
        let mut share = vec![0.0; doms.len()];
        // Water-filling: domains whose fair share exceeds their peak are
        // capped; the rest share what is left by weight.
        loop {
            let wsum: f64 = open.iter().map(|&i| doms[i].1 as f64).sum();
            if open.is_empty() || wsum <= 0.0 {
                break;
            }
            let mut capped = Vec::new();
            for &i in &open {
                let fair = left * doms[i].1 as f64 / wsum;
                let peak = doms[i].2.len() as f64 * per_task_cap;
                if fair > peak {
                    capped.push(i);
                }
            }
            if capped.is_empty() {
                for &i in &open {
                    share[i] = left * doms[i].1 as f64 / wsum;
                }
                break;
            }
            for &i in &capped {
                let peak = doms[i].2.len() as f64 * per_task_cap;
                share[i] = peak;
                left -= peak;
            }
            open.retain(|i| !capped.contains(i));
        }
        let cap = self.cap();
        let xen = self.aash.is_none();
        for (i, (_, _, ts)) in doms.iter().enumerate() {
            let each = share[i] / ts.len() as f64;
            for &t in ts {
                self.grow(t);
                let c = self.credit[t] + each;
                if !xen {
                    self.credit[t] = c.clamp(-cap, cap);
                    continue;
                }
                // `csched_acct`: credit < 0 is OVER (bounded below by one
                // slice); otherwise UNDER, and above one slice the vCPU
                // leaves the active list with its credit reset to 0.
                if c < 0.0 {
                    self.credit[t] = c.max(-cap);
                    self.set_pri(cx, t, OVER);
                } else {
                    self.credit[t] = if c > cap { 0.0 } else { c };
                    self.set_pri(cx, t, UNDER);
                    if c > cap {
                        self.xen_active[t] = false;
                    }
                }
            }
        }
        if xen {
            let active = &self.xen_active;
            self.xen_list.retain(|&t| active[t]);
        }
    }

    /// Credit: `t`, found running on a tick, joins the active list if it is
    /// not on it (`__csched_vcpu_acct_start`); whether it joined now.
    fn xen_join(&mut self, t: TaskId) -> bool {
        if self.xen_active.len() <= t {
            self.xen_active.resize(t + 1, false);
        }
        if self.xen_active[t] {
            return false;
        }
        self.xen_active[t] = true;
        let at = self.xen_list.partition_point(|&u| u < t);
        self.xen_list.insert(at, t);
        true
    }

    /// Set priorities from credits after accounting and re-sort the queues.
    fn reprioritise(&mut self, cx: &mut Ctx) {
        // Credit: `distribute` has set the priorities of the active list's
        // vCPUs, as Xen's `csched_acct` does (a BOOST included); the others
        // keep theirs.
        let mut all: Vec<TaskId> = if self.aash.is_some() {
            self.active_tasks(cx)
        } else {
            Vec::new()
        };
        all.retain(|&t| t < self.credit.len());
        for t in all {
            let p = if self.credit[t] > 0.0 {
                if self.pri[t] == BOOST {
                    BOOST
                } else {
                    UNDER
                }
            } else {
                OVER
            };
            self.set_pri(cx, t, p);
        }
        for cpu in 0..self.rq.len() {
            if self.rq[cpu].len() > 1 {
                let mut v: Vec<TaskId> = self.rq[cpu].drain(..).collect();
                v.sort_by_key(|&t| self.pri[t]); // stable: FIFO within a priority
                self.rq[cpu] = v.into();
            }
            self.recount(cpu);
        }
    }

    /// Preempt CPUs whose queue head outranks what runs.
    fn check_preempt(&self, cx: &mut Ctx) {
        for cpu in 0..self.rq.len() {
            if let (Some(cur), Some(&h)) = (cx.current(cpu), self.rq[cpu].front()) {
                if cur < self.pri.len() && self.pri[h] < self.pri[cur] {
                    cx.resched(cpu);
                }
            }
        }
    }

    /// `pick_next`: the head of `cpu`'s queue if BOOST or UNDER, else a
    /// better task stolen from a busy peer, else the head; with AASH, an
    /// idle fast core is filled.
    #[inline(never)]
    fn pick_full(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        // Drop queued tasks this CPU may no longer run (AASH moved them).
        let head_pri = self.rq[cpu]
            .front()
            .map(|&t| self.pri[t])
            .unwrap_or(u8::MAX);
        let pick = if head_pri <= UNDER {
            self.remove_at(cpu, 0)
        } else {
            // (An empty queue: nothing to take after a failed steal.)
            self.steal(cx, cpu, head_pri.min(OVER + 1))
                .or_else(|| (head_pri != u8::MAX).then(|| self.remove_at(cpu, 0))?)
        };
        if pick.is_none() && self.aash.is_some() {
            self.aash_fill(cx, cpu);
        }
        if pick.is_some() {
            self.slice_start[cpu] = cx.now;
            self.last_burn[cpu] = cx.now;
        }
        pick
    }

    /// A queued task with a higher priority than `than` that `cpu` may
    /// steal from another CPU's queue (first in CPU order after `cpu`).
    fn steal(&mut self, cx: &Ctx, cpu: CpuId, than: u8) -> Option<TaskId> {
        if than == 0 {
            return None;
        }
        let level = (than - 1).min(2) as usize;
        if self.steal_words[level] == 0 {
            return None;
        }
        let n = self.rq.len();
        // Only queues that hold a task of a priority below `than`, of
        // `cpu`'s speed class (AASH: no stealing across core types), in the
        // order of a scan from `cpu + 1`.
        // Xen's `csched_runq_steal` skips a peer that runs nothing: it is
        // about to take its own queue's head.
        let le = &self.le[level];
        let (ty, run) = (self.same_type(cpu), &self.run_mask);
        let sum = &self.steal_sum[level];
        let mut at = None;
        let found = find_cyclic_sparse(
            n,
            cpu,
            sum,
            |w| le[w] & ty[w] & run[w],
            |peer| {
                at = self.rq[peer]
                    .iter()
                    .position(|&t| self.pri[t] < than && self.allowed(cx, t, cpu));
                at.is_some()
            },
        );
        let (peer, i) = (found?, at?);
        self.remove_at(peer, i)
    }

    // ------------------------------------------------------------- AASH

    fn aash_know(&mut self, cx: &Ctx, t: TaskId) {
        self.grow(t);
        let a = self.aash.as_mut().expect("aash");
        if !a.known[t] {
            a.known[t] = true;
            // A newcomer queues ahead of the vCPUs that hold fast credits
            // now: they have just been served and went to the tail.
            let first_holder = a.normal.iter().find(|&(_, x)| a.is_holder[x]);
            match first_holder {
                Some((_, h)) => a.normal.insert_before(t, h),
                None => a.normal.push_back(t),
            }
            Self::mark_vm(a, cx, t);
            Self::note_changed(a, t);
        }
    }

    /// `t` changed state: its VM's vCPUs may change queue (AASH).
    fn mark_vm(a: &mut Aash, cx: &Ctx, t: TaskId) {
        if let Some(v) = cx.vcpu(t) {
            if a.vm_dirty.len() <= v.vm {
                a.vm_dirty.resize(v.vm + 1, false);
            }
            if !a.vm_dirty[v.vm] {
                a.vm_dirty[v.vm] = true;
                a.dirty.push(t);
            }
        }
    }

    /// AASH: note a state change of `t`.
    fn touched(&mut self, cx: &Ctx, t: TaskId) {
        if let Some(a) = self.aash.as_mut() {
            Self::mark_vm(a, cx, t);
            Self::note_changed(a, t);
        }
    }

    /// Set whether `t` holds fast credits (AASH), in `holders` too.
    fn set_holder(a: &mut Aash, t: TaskId, on: bool) {
        if a.is_holder.len() <= t {
            a.is_holder.resize(t + 1, false);
            a.holder_at.resize(t + 1, usize::MAX);
        }
        if a.is_holder[t] == on {
            return;
        }
        a.is_holder[t] = on;
        a.normal.set_held(t, on);
        a.fastq.set_held(t, on);
        if on {
            a.holder_at[t] = a.holders.len();
            a.holders.push(t);
        } else {
            let i = a.holder_at[t];
            a.holders.swap_remove(i);
            if let Some(&moved) = a.holders.get(i) {
                a.holder_at[moved] = i;
            }
            a.holder_at[t] = usize::MAX;
        }
    }

    /// Note that `t` may have changed state (AASH): the next walk for a
    /// fast-credit recipient looks at it again.
    fn note_changed(a: &mut Aash, t: TaskId) {
        if a.is_changed.len() <= t {
            a.is_changed.resize(t + 1, false);
        }
        if !a.is_changed[t] {
            a.is_changed[t] = true;
            a.changed.push(t);
        }
    }

    /// Bring the queues' active marks up to date with the tasks noted since
    /// the last time, and take fast credits back from holders among them
    /// that blocked. Every change of a task between active (runnable or
    /// running) and not goes through `enqueue`, `dequeue` or a stop that
    /// does not leave it runnable, which note it.
    fn refresh_changed(a: &mut Aash, cx: &Ctx) {
        let mut changed = std::mem::take(&mut a.changed);
        for &t in &changed {
            a.is_changed[t] = false;
            let act = Self::active(cx, t);
            if !act && a.is_holder[t] {
                a.fast_credit[t] = 0.0;
                Self::set_holder(a, t, false);
            }
            a.normal.set_live(t, act);
            a.fastq.set_live(t, act);
        }
        changed.clear();
        a.changed = changed;
        #[cfg(debug_assertions)]
        {
            for q in [&a.normal, &a.fastq] {
                for (k, t) in q.iter() {
                    debug_assert_eq!(q.live(t), Self::active(cx, t), "task {t}: stale mark");
                    let holder = a.is_holder.get(t).copied().unwrap_or(false);
                    debug_assert_eq!(q.held(t), holder, "task {t}: stale holder mark");
                    debug_assert_eq!(
                        q.free.contains_key(&k),
                        q.live(t) && !holder,
                        "task {t}: free index out of date"
                    );
                }
            }
            for &h in &a.holders {
                debug_assert!(a.is_holder[h] && Self::active(cx, h), "holder {h} blocked");
            }
        }
    }

    /// Whether task `t` belongs in the fast queue now.
    fn wants_fastq(&self, cx: &Ctx, t: TaskId) -> bool {
        let a = self.aash.as_ref().expect("aash");
        let Some(v) = cx.vcpu(t) else {
            return false;
        };
        if a.priorities && v.high_priority {
            return true;
        }
        if a.phase {
            let active = v.siblings.iter().filter(|&&s| Self::active(cx, s)).count();
            return active > 0 && active <= a.nfast && Self::active(cx, t);
        }
        false
    }

    /// Move tasks between the normal and the fast queue as their VMs'
    /// phases and classes say.
    ///
    /// Whether a task belongs in the fast queue depends only on the states
    /// of its VM's vCPUs and on fixed VM attributes, and every state change
    /// marks the VM (`touched`): so only the vCPUs of marked VMs are looked
    /// at, and the moves are made in the order of a full pass (each queue's
    /// order).
    fn update_queues(&mut self, cx: &Ctx) {
        let a = self.aash.as_mut().expect("aash");
        if a.dirty.is_empty() {
            return;
        }
        let dirty = std::mem::take(&mut a.dirty);
        let mut to_fast: Vec<TaskId> = Vec::new();
        let mut to_normal: Vec<TaskId> = Vec::new();
        {
            let a = self.aash.as_ref().expect("aash");
            for &d in &dirty {
                let Some(v) = cx.vcpu(d) else {
                    continue;
                };
                for &t in v.siblings.iter() {
                    if t >= a.known.len() || !a.known[t] {
                        continue;
                    }
                    let want = self.wants_fastq(cx, t);
                    if want && !a.in_fastq[t] {
                        to_fast.push(t);
                    } else if !want && a.in_fastq[t] {
                        to_normal.push(t);
                    }
                }
            }
        }
        let a = self.aash.as_mut().expect("aash");
        for &d in &dirty {
            if let Some(v) = cx.vcpu(d) {
                a.vm_dirty[v.vm] = false;
            }
        }
        a.dirty = dirty;
        a.dirty.clear();
        // Queue order is key order.
        if to_fast.len() > 1 {
            to_fast.sort_by_key(|&t| a.normal.key(t));
        }
        if to_normal.len() > 1 {
            to_normal.sort_by_key(|&t| a.fastq.key(t));
        }
        for t in to_fast {
            a.normal.remove(t);
            a.fastq.push_back(t);
            a.in_fastq[t] = true;
        }
        for t in to_normal {
            a.fastq.remove(t);
            a.normal.push_back(t);
            a.in_fastq[t] = false;
        }
    }

    /// Whether `t` may receive fast credits: active, and for an aware
    /// guest one of its first `fast_vcpus` vCPUs.
    fn eligible(cx: &Ctx, t: TaskId) -> bool {
        if !Self::active(cx, t) {
            return false;
        }
        match cx.vcpu(t) {
            Some(v) if v.aware => v.index < v.fast_vcpus,
            _ => true,
        }
    }

    /// Take the next recipient of fast credits from the head of `q`
    /// (rotating it to the tail), swapping an aware guest's slow vCPU for
    /// one of its fast vCPUs (§2.2). `skip_holders`: `skip` is the holder
    /// marks (`Aash::is_holder`), which the queues mirror (`set_held`), so
    /// the walk visits only the entries that are not held: the same
    /// entries, less the ones it would step over. A task for which `fits`
    /// is false (its affinity holds no fast core it could be sent to) is
    /// stepped over and keeps its place.
    fn take_from(
        cx: &Ctx,
        q: &mut SeqQueue,
        skip: &[bool],
        skip_holders: bool,
        fits: impl Fn(TaskId) -> bool,
    ) -> Option<TaskId> {
        let skip = |t: TaskId| skip.get(t).copied().unwrap_or(false);
        // Only active tasks can be taken: walk the entries marked so (and,
        // skipping holders, not held).
        let index = if skip_holders { &q.free } else { &q.live };
        // (recipient, the slow vCPU whose place it takes)
        let mut pick: Option<(TaskId, Option<TaskId>)> = None;
        for (k, t) in keyed(index) {
            debug_assert!(
                !skip_holders || !q.held(t),
                "held task {t} in the free index"
            );
            if skip(t) || !Self::active(cx, t) || !fits(t) {
                continue;
            }
            if Self::eligible(cx, t) {
                pick = Some((t, None));
                break;
            }
            if let Some(v) = cx.vcpu(t).filter(|v| v.aware) {
                // Swap with a fast vCPU of the same VM further down (one
                // nearer the head would have been taken already).
                let u = after(index, k).find(|&u| {
                    !skip(u)
                        && Self::eligible(cx, u)
                        && fits(u)
                        && cx.vcpu(u).is_some_and(|w| w.vm == v.vm)
                });
                if let Some(u) = u {
                    pick = Some((u, Some(t)));
                    break;
                }
            }
        }
        let (u, swapped) = pick?;
        // The recipient goes to the tail; the slow vCPU it was swapped
        // with takes its place.
        let ku = q.key(u).expect("queued");
        q.remove(u);
        if let Some(t) = swapped {
            q.remove(t);
            q.set_key(t, ku);
        }
        q.push_back(u);
        Some(u)
    }

    /// The next vCPU to receive fast credits, `skip` (per task) aside: fast
    /// queue first. `skip_holders`: `skip` is the holder marks (see
    /// [`Credit::take_from`]).
    fn next_recipient(
        a: &mut Aash,
        cx: &Ctx,
        skip: &[bool],
        skip_holders: bool,
        fits: impl Fn(TaskId) -> bool + Copy,
    ) -> Option<TaskId> {
        Self::take_from(cx, &mut a.fastq, skip, skip_holders, fits)
            .or_else(|| Self::take_from(cx, &mut a.normal, skip, skip_holders, fits))
    }

    /// The slow CPU to send a vCPU to: the one whose current vCPU has just
    /// been given fast credits (it would go idle), else the least loaded.
    fn slow_target(&self, cx: &Ctx, t: TaskId, freed: &mut Vec<CpuId>) -> Option<CpuId> {
        let a = self.aash.as_ref().expect("aash");
        if let Some(i) = freed
            .iter()
            .position(|&c| cx.task(t).affinity.contains(c) && cx.online(c))
        {
            return Some(freed.remove(i));
        }
        (0..self.rq.len())
            .filter(|&c| !a.fast[c] && cx.online(c) && cx.task(t).affinity.contains(c))
            .min_by_key(|&c| (self.rq[c].len() + cx.current(c).is_some() as usize, c))
    }

    /// Fast CPU for a new holder: one not serving another holder.
    fn fast_target(&self, cx: &Ctx, t: TaskId) -> Option<CpuId> {
        let a = self.aash.as_ref().expect("aash");
        let busy = |c: CpuId| {
            cx.current(c).is_some_and(|u| u != t && a.is_holder[u])
                || self.rq[c].iter().any(|&u| u != t && a.is_holder[u])
        };
        let cands: Vec<CpuId> = (0..self.rq.len())
            .filter(|&c| a.fast[c] && cx.online(c) && cx.task(t).affinity.contains(c))
            .collect();
        cands
            .iter()
            .copied()
            .find(|&c| !busy(c))
            .or_else(|| cands.first().copied())
    }

    /// Move task `t` to `cpu`'s queue (or, running elsewhere, ask the engine
    /// to move it there).
    fn move_to(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        match cx.task(t).state {
            TaskState::Running if cx.task(t).cpu != cpu => {
                cx.migrate(t, cpu);
                if let Some(a) = self.aash.as_mut() {
                    a.inbound[cpu].push(t);
                }
            }
            TaskState::Runnable => {
                if self.rq[cpu].contains(&t) {
                    return;
                }
                self.remove(t);
                self.insert(cpu, t);
                cx.migrate(t, cpu);
                if cx.current(cpu).is_none() {
                    cx.resched(cpu);
                }
            }
            _ => {}
        }
    }

    /// AASH accounting: fast credits to n vCPUs in queue order, slow credits
    /// equally to the other active vCPUs, then the migrations.
    fn aash_account(&mut self, cx: &mut Ctx) {
        let active = self.active_tasks(cx);
        for &t in &active {
            self.aash_know(cx, t);
        }
        self.update_queues(cx);
        Self::refresh_changed(self.aash.as_mut().expect("aash"), cx);
        let nfast = self.aash.as_ref().expect("aash").nfast;
        let mut chosen = Vec::new();
        let mut is_chosen = vec![false; cx.ntasks()];
        let fast_cpus: Vec<CpuId> = (0..cx.ncpus())
            .filter(|&c| self.is_fast(c) && cx.online(c))
            .collect();
        {
            let a = self.aash.as_mut().expect("aash");
            while chosen.len() < nfast {
                // Only tasks that may run on a fast core (a native thread
                // pinned to slow ones may not).
                match Self::next_recipient(a, cx, &is_chosen, false, |t| {
                    fast_cpus.iter().any(|&c| cx.task(t).affinity.contains(c))
                }) {
                    Some(t) => {
                        chosen.push(t);
                        is_chosen[t] = true;
                    }
                    None => break,
                }
            }
        }
        let period_credits = self.acct_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
        let old: Vec<TaskId> = std::mem::take(&mut self.aash.as_mut().expect("aash").holders);
        {
            let a = self.aash.as_mut().expect("aash");
            for &t in &old {
                a.fast_credit[t] = 0.0;
                a.is_holder[t] = false;
                a.normal.set_held(t, false);
                a.fastq.set_held(t, false);
                a.holder_at[t] = usize::MAX;
            }
            for &t in &chosen {
                a.fast_credit[t] = period_credits;
                a.grants.push((cx.now, t));
                Self::set_holder(a, t, true);
            }
        }
        // Slow credits: slow capacity over the active vCPUs not served by
        // fast cores, equally (§2.1).
        let nslow = (0..cx.ncpus())
            .filter(|&c| !self.is_fast(c) && cx.online(c))
            .count() as f64;
        let rest: Vec<TaskId> = active.iter().copied().filter(|&t| !is_chosen[t]).collect();
        if !rest.is_empty() {
            let each = nslow * period_credits / rest.len() as f64;
            let cap = self.cap();
            for &t in &rest {
                self.credit[t] = (self.credit[t] + each).clamp(-cap, cap);
            }
        }
        self.reprioritise(cx);
        // Migrations: new holders to fast cores; the slow CPUs they leave
        // take the former holders.
        let mut freed: Vec<CpuId> = Vec::new();
        for &t in &chosen {
            let cpu = cx.task(t).cpu;
            if !self.is_fast(cpu) {
                freed.push(cpu);
            }
        }
        for &t in &chosen {
            if !self.is_fast(cx.task(t).cpu) {
                if let Some(f) = self.fast_target(cx, t) {
                    self.move_to(cx, t, f);
                }
            }
        }
        // Everything on fast cores without fast credits goes back to slow.
        let on_fast: Vec<TaskId> = (0..cx.ncpus())
            .filter(|&c| self.is_fast(c))
            .flat_map(|c| {
                self.rq[c]
                    .iter()
                    .copied()
                    .chain(cx.current(c))
                    .collect::<Vec<_>>()
            })
            .collect();
        for t in on_fast {
            if !is_chosen[t] {
                if let Some(s) = self.slow_target(cx, t, &mut freed) {
                    self.move_to(cx, t, s);
                }
            }
        }
        self.check_preempt(cx);
    }

    /// A fast core would go idle: grant fast credits now, for the rest of
    /// the period, to the next vCPU in queue order that runs or waits on a
    /// slow core, and pull it over.
    fn aash_fill(&mut self, cx: &mut Ctx, cpu: CpuId) -> bool {
        let Some(a) = self.aash.as_ref() else {
            return false;
        };
        if !a.fast[cpu] {
            return false;
        }
        // A holder already on its way here serves this core. A task whose
        // CPU is this one is queued here, runs here, or was sent here by
        // `move_to` while it ran elsewhere (`inbound`, pruned as it goes).
        let a = self.aash.as_mut().expect("aash");
        let mut inbound = std::mem::take(&mut a.inbound[cpu]);
        inbound.retain(|&h| cx.task(h).cpu == cpu && cx.task(h).state == TaskState::Running);
        let a = self.aash.as_ref().expect("aash");
        let here = |h: TaskId| {
            a.is_holder.get(h).copied().unwrap_or(false)
                && Self::active(cx, h)
                && cx.task(h).cpu == cpu
        };
        let served = self.rq[cpu].iter().copied().any(here)
            || cx.current(cpu).is_some_and(here)
            || inbound.iter().copied().any(here);
        debug_assert_eq!(
            served,
            a.holders
                .iter()
                .any(|&h| Self::active(cx, h) && cx.task(h).cpu == cpu),
            "holder index out of date"
        );
        self.aash.as_mut().expect("aash").inbound[cpu] = inbound;
        if served {
            return false;
        }
        // Every active task is known already: it was queued (`enqueue`
        // knows it) or picked from a queue.
        #[cfg(debug_assertions)]
        for t in self.active_tasks(cx) {
            let a = self.aash.as_ref().expect("aash");
            debug_assert!(a.known.get(t).copied().unwrap_or(false), "task {t} unknown");
        }
        self.update_queues(cx);
        // Holders that blocked give their fast credits up.
        let a = self.aash.as_mut().expect("aash");
        Self::refresh_changed(a, cx);
        let skip = std::mem::take(&mut a.is_holder);
        // Only a task that may run on this core (a native thread pinned
        // elsewhere may not).
        let next = Self::next_recipient(a, cx, &skip, true, |t| cx.task(t).affinity.contains(cpu));
        a.is_holder = skip;
        let Some(t) = next else {
            return false;
        };
        let left_ticks = self.acct_ticks - self.ticks % self.acct_ticks;
        let credits = left_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
        let a = self.aash.as_mut().expect("aash");
        a.fast_credit[t] = credits;
        a.grants.push((cx.now, t));
        Self::set_holder(a, t, true);
        self.move_to(cx, t, cpu);
        true
    }
}

impl Scheduler for Credit {
    fn name(&self) -> &str {
        &self.name
    }

    fn init(&mut self, cx: &mut Ctx) {
        cx.arm_timer(cx.now + self.tick, 0);
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        prev: Option<CpuId>,
        flags: EnqFlags,
    ) -> CpuId {
        self.grow(task);
        if self.aash.is_some() {
            self.aash_know(cx, task);
        }
        let n = cx.ncpus();
        // Xen 3.4 picks no CPU on a wake-up (`vcpu_wake` calls
        // `csched_vcpu_wake`, which queues the vCPU on its own processor);
        // idle CPUs are sent to steal it instead (`__runq_tickle`, in
        // `enqueue`). `csched_cpu_pick` runs only when a vCPU is migrated.
        if self.aash.is_none() && flags == EnqFlags::Wakeup {
            if let Some(p) = prev.filter(|&p| cx.online(p) && cx.task(task).affinity.contains(p)) {
                return p;
            }
        }
        // `allowed`, with the task's fast-credit status looked up once.
        let holder = self.aash.as_ref().map(|a| a.is_holder[task]);
        if let Some(p) = prev {
            if let Some(c) = self.xen_pick(cx, task, p, false, true) {
                if self.idle(cx, c) {
                    return c;
                }
            }
        }
        // AASH: an idle fast core takes a waking vCPU at once.
        if let Some(a) = &self.aash {
            if !a.is_holder[task] && Self::eligible_wake(cx, task) {
                // The first fast CPU that runs nothing and queues nothing.
                let (fm, run, q) = (&self.fast_mask, &self.run_mask, &self.le[2]);
                let fast_idle = scan_bits(0, n, &|w| fm[w] & !run[w] & !q[w], &mut |c| {
                    cx.online(c) && cx.task(task).affinity.contains(c)
                });
                if let Some(f) = fast_idle {
                    let left_ticks = self.acct_ticks - self.ticks % self.acct_ticks;
                    let credits = left_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
                    let a = self.aash.as_mut().expect("aash");
                    a.fast_credit[task] = credits;
                    a.grants.push((cx.now, task));
                    Self::set_holder(a, task, true);
                    for q in [&mut a.fastq, &mut a.normal] {
                        if q.remove(task) {
                            q.push_back(task);
                        }
                    }
                    return f;
                }
            }
        }
        if prev.is_none() {
            // The idle CPUs it may use, as a mask (ascending order).
            self.allowed_idle(cx, task);
            let idle = &self.scratch_idlers;
            let k: u32 = idle.iter().map(|w| w.count_ones()).sum();
            if k > 0 {
                // A first start: Xen's choice among idle CPUs is arbitrary.
                let mut r = (cx.random_u64() % k as u64) as u32;
                for (w, &x) in idle.iter().enumerate() {
                    let ones = x.count_ones();
                    if r < ones {
                        let mut x = x;
                        for _ in 0..r {
                            x &= x - 1;
                        }
                        return w * 64 + x.trailing_zeros() as usize;
                    }
                    r -= ones;
                }
            }
        }
        let ok = |s: &Self, c: CpuId| {
            cx.online(c)
                && cx.task(task).affinity.contains(c)
                && match (&s.aash, holder) {
                    (Some(a), Some(h)) => a.fast[c] == h,
                    _ => true,
                }
        };
        if let Some(p) = prev {
            if ok(self, p) {
                return p;
            }
        }
        (0..n)
            .filter(|&c| ok(self, c))
            .min_by_key(|&c| (self.rq[c].len() + cx.current(c).is_some() as usize, c))
            .or_else(|| (0..n).find(|&c| cx.online(c) && cx.task(task).affinity.contains(c)))
            .unwrap_or(0)
    }

    fn enqueue(&mut self, cx: &mut Ctx, task: TaskId, cpu: CpuId, flags: EnqFlags) {
        self.grow(task);
        if self.aash.is_some() {
            self.aash_know(cx, task);
            self.touched(cx, task);
        }
        if matches!(flags, EnqFlags::Wakeup | EnqFlags::New) && self.pri[task] == UNDER {
            self.set_pri(cx, task, BOOST);
        }
        self.insert(cpu, task);
        if let Some(cur) = cx.current(cpu) {
            if cur < self.pri.len() && self.pri[task] < self.pri[cur] {
                cx.resched(cpu);
            }
            if self.aash.is_none() && matches!(flags, EnqFlags::Wakeup | EnqFlags::New) {
                self.tickle_idlers(cx, task);
            }
        } else if cx.online(cpu) {
            cx.resched(cpu);
        }
    }

    fn dequeue(&mut self, cx: &mut Ctx, task: TaskId, _cpu: CpuId) {
        self.remove(task);
        self.touched(cx, task);
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        // Xen tells every idle CPU to schedule when a vCPU wakes on a busy
        // one (`tickle_idlers`), and most of them find nothing: an empty
        // queue and no busy CPU with queued work. The indexes say so
        // before the work of a full pick.
        if self.aash.is_none() && self.rq[cpu].is_empty() && self.steal_words[2] == 0 {
            return None;
        }
        self.pick_full(cx, cpu)
    }

    /// Credit has no `balance`, and a `pick_next` that finds nothing has
    /// changed nothing (an empty queue and a failed steal), except under
    /// AASH, whose `aash_fill` then moves vCPUs between its queues.
    fn pick_again_after_balance(&self) -> bool {
        self.aash.is_some()
    }

    fn running(&mut self, cx: &mut Ctx, _task: TaskId, cpu: CpuId) {
        self.run_mask[cpu / 64] |= 1 << (cpu % 64);
        self.sync_steal_sum(cpu / 64);
        self.slice_start[cpu] = cx.now;
        self.last_burn[cpu] = cx.now;
    }

    fn stopping(&mut self, cx: &mut Ctx, task: TaskId, cpu: CpuId, runnable: bool) {
        self.run_mask[cpu / 64] &= !(1 << (cpu % 64));
        self.sync_steal_sum(cpu / 64);
        self.burn(cx, cpu);
        if !runnable {
            self.touched(cx, task);
        }
    }

    fn on_timer(&mut self, cx: &mut Ctx, _token: u64) {
        self.ticks += 1;
        for cpu in 0..cx.ncpus() {
            let Some(t) = cx.current(cpu) else {
                continue;
            };
            self.burn(cx, cpu);
            if self.pri[t] == BOOST {
                self.set_pri(cx, t, UNDER); // boost lasts one tick
            }
            // Xen 3.4's tick (`csched_tick` → `csched_vcpu_acct`) burns
            // credits, drops BOOST and checks for a better CPU; priorities
            // change only in `csched_acct`, and a waiting vCPU of a higher
            // priority gets the CPU when it wakes (`__runq_tickle`) or when
            // the slice ends. AASH keeps the thesis's tick, which also marks
            // a vCPU whose credits are gone and preempts it for a higher
            // priority (§2).
            let xen = self.aash.is_none();
            if !xen && self.credit[t] <= 0.0 && self.pri[t] != OVER && !self.is_fast(cpu) {
                self.set_pri(cx, t, OVER);
            }
            // `csched_vcpu_acct`: a vCPU not on the active list joins it;
            // one on it checks for a better CPU.
            let joined = xen && self.xen_join(t);
            if !joined && self.move_running(cx, t, cpu) {
                continue;
            }
            let head = self.rq[cpu].front().map(|&h| self.pri[h]);
            let slice_over = cx.now.since(self.slice_start[cpu]) >= self.slice;
            let outranked = !xen && head.is_some_and(|h| h < self.pri[t]);
            if outranked || (slice_over && head.is_some_and(|h| h <= self.pri[t])) {
                cx.resched(cpu);
            } else if slice_over {
                // Nothing local of its rank waits: a peer's queue may hold a
                // higher priority (Xen's balance on schedule).
                // Only peers (of its speed class, for AASH) whose queue
                // holds a higher priority are looked at.
                let n = cx.ncpus();
                let pt = self.pri[t];
                let better = pt > BOOST && {
                    let (le, ty) = (&self.le[pt as usize - 1], self.same_type(cpu));
                    find_cyclic(
                        n,
                        cpu,
                        |w| le[w] & ty[w],
                        |p| {
                            self.rq[p]
                                .iter()
                                .any(|&u| self.pri[u] < pt && self.allowed(cx, u, cpu))
                        },
                    )
                    .is_some()
                };
                if better {
                    cx.resched(cpu);
                }
                self.slice_start[cpu] = cx.now;
            }
        }
        if self.ticks.is_multiple_of(self.acct_ticks) {
            if self.aash.is_some() {
                self.aash_account(cx);
            } else {
                // Exited vCPUs leave the list (`csched_vcpu_destroy`).
                for &t in &self.xen_list {
                    if cx.task(t).state == TaskState::Exited {
                        self.xen_active[t] = false;
                    }
                }
                let flags = &self.xen_active;
                self.xen_list.retain(|&t| flags[t]);
                let active = self.xen_list.clone();
                let online = (0..cx.ncpus()).filter(|&c| cx.online(c)).count() as f64;
                let total =
                    online * self.acct_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
                self.distribute(cx, &active, total);
                // `csched_acct` re-sorts the queues (`csched_runq_sort`) and
                // preempts nothing.
                self.reprioritise(cx);
            }
        }
        // AASH's idle CPUs look for work queued elsewhere at each tick
        // (non-empty queues of their speed class only); fast ones also fill
        // from busy slow ones. Xen 3.4's do not: `csched_tick` accounts for
        // the running vCPU only, and an idle CPU schedules (and steals) when
        // a waking vCPU tickles it (`__runq_tickle`).
        if self.aash.is_some() {
            self.idle_scan(cx);
        }
        for w in self.claimed.iter_mut() {
            *w = 0;
        }
        cx.arm_timer(cx.now + self.tick, 0);
    }
}

impl Credit {
    /// AASH's tick: every idle CPU with work queued where it may take it,
    /// or a fast one while slow ones are busy, is told to schedule.
    fn idle_scan(&mut self, cx: &mut Ctx) {
        let n = cx.ncpus();
        let slow_busy = (0..self.run_mask.len())
            .any(|w| (self.run_mask[w] | self.le[2][w]) & self.slow_mask[w] != 0);
        for cpu in 0..n {
            if cx.online(cpu) && cx.current(cpu).is_none() {
                let fill = slow_busy && self.is_fast(cpu);
                let work = !fill && {
                    let (le, ty) = (&self.le[2], self.same_type(cpu));
                    let any = |p: CpuId| self.rq[p].iter().any(|&u| self.allowed(cx, u, cpu));
                    (le[cpu / 64] & (1 << (cpu % 64)) != 0 && any(cpu))
                        || find_cyclic(n, cpu, |w| le[w] & ty[w], any).is_some()
                };
                if work || fill {
                    cx.resched(cpu);
                }
            }
        }
    }

    /// Xen's `csched_vcpu_acct` on a tick: a running vCPU checks whether it
    /// would be better off elsewhere (`csched_cpu_pick` with its own CPU
    /// counted as idle: another last-level-cache domain has more idle CPUs)
    /// and, if so, is migrated there. Credit only: AASH places vCPUs by
    /// their fast credits. Whether it moved.
    fn move_running(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) -> bool {
        if self.aash.is_some() {
            return false;
        }
        let n = cx.ncpus();
        if self.claimed.len() != n.div_ceil(64) {
            self.claimed = vec![0; n.div_ceil(64)];
        }
        // Without another idle CPU nothing can beat the current one.
        let (run, q, cl) = (&self.run_mask, &self.le[2], &self.claimed);
        let other_idle = (0..n.div_ceil(64)).any(|w| {
            let mut x = !run[w] & !q[w] & !cl[w] & valid_word(n, w);
            if w == cpu / 64 {
                x &= !(1 << (cpu % 64));
            }
            x != 0
        });
        if !other_idle {
            return false;
        }
        match self.xen_pick(cx, t, cpu, true, false) {
            Some(c) if c != cpu => {
                let c = self.xen_pick(cx, t, cpu, true, true).unwrap_or(c);
                // Later checks on this tick see the target as taken.
                self.claimed[c / 64] |= 1 << (c % 64);
                cx.migrate(t, c);
                true
            }
            _ => false,
        }
    }

    /// Xen's `csched_cpu_pick`: start from the previous CPU; an idle CPU in
    /// a last-level-cache domain (socket) with more idle CPUs than the
    /// current choice's wins, cycling through that domain's idle CPUs from
    /// where the last such choice left off; within a domain an idle CPU
    /// beats a busy one. `prev_idle`: count `prev` as idle, as Xen does
    /// (`cpu_set(cpu, idlers)`) when it checks whether a running vCPU would
    /// be better off elsewhere; `commit`: remember the choice in the
    /// domain's idle bias (Xen's `commit`; the running-vCPU check does not).
    fn xen_pick(
        &mut self,
        cx: &Ctx,
        t: TaskId,
        prev: CpuId,
        prev_idle: bool,
        commit: bool,
    ) -> Option<CpuId> {
        let n = cx.ncpus();
        if self.idle_bias.len() < n {
            // Xen's `csched_pcpu_init` starts every CPU's bias at the last
            // CPU (`NR_CPUS - 1`), so a domain's first choice cycles from
            // its lowest-numbered idle CPU.
            self.idle_bias = vec![n - 1; n];
        }
        if self.llc.idx.len() != n {
            self.llc = LlcMasks::new(cx.machine, n);
        }
        #[cfg(debug_assertions)]
        self.audit_masks(cx);
        // Who may take `t`, who of those is idle, and how many idle ones
        // each LLC domain has: word by word.
        self.allowed_idle(cx, t);
        let allowed = std::mem::take(&mut self.scratch_allowed);
        let mut idlers = std::mem::take(&mut self.scratch_idlers);
        if prev_idle && allowed[prev / 64] & (1 << (prev % 64)) != 0 {
            idlers[prev / 64] |= 1 << (prev % 64);
        }
        for (d, &(lo, hi)) in self.llc.span.iter().enumerate() {
            let m = &self.llc.mask[d];
            self.llc.count[d] = (lo..hi)
                .map(|w| (idlers[w] & m[w]).count_ones() as usize)
                .sum();
        }
        let has = |set: &[u64], c: CpuId| set[c / 64] & (1 << (c % 64)) != 0;
        let mut cpu = if has(&allowed, prev) {
            prev
        } else {
            match next_cyclic(n, prev, |w| allowed[w]) {
                Some(c) => c,
                None => {
                    self.scratch_allowed = allowed;
                    self.scratch_idlers = idlers;
                    return None;
                }
            }
        };
        let mut cands = idlers.clone();
        cands[cpu / 64] &= !(1 << (cpu % 64));
        let llc = &self.llc;
        let clear = |cands: &mut [u64], d: usize| {
            let (lo, hi) = llc.span[d];
            for (c, m) in cands[lo..hi].iter_mut().zip(&llc.mask[d][lo..hi]) {
                *c &= !m;
            }
        };
        // Once the choice is idle, the other idle CPUs of its domain can no
        // longer change it (an idle CPU beats only a busy one within a
        // domain, and a domain wins only with more idle CPUs than the
        // choice's): they leave the candidates at once instead of one by
        // one.
        let mut settled = usize::MAX;
        loop {
            if settled != llc.idx[cpu] && has(&idlers, cpu) {
                settled = llc.idx[cpu];
                clear(&mut cands, settled);
            }
            let Some(nxt) = next_cyclic(n, cpu, |w| cands[w]) else {
                break;
            };
            let (dc, dn) = (llc.idx[cpu], llc.idx[nxt]);
            if dc == dn {
                // Within a domain: an idle CPU beats a busy one; the group
                // is `nxt` alone, so the cycle from the bias finds it.
                if !has(&idlers, cpu) {
                    cpu = nxt;
                    if commit {
                        self.idle_bias[nxt] = nxt;
                    }
                }
                cands[nxt / 64] &= !(1 << (nxt % 64));
            } else {
                let dom = &llc.mask[dn];
                if llc.count[dc] < llc.count[dn] {
                    let bias = self.idle_bias[nxt];
                    cpu = next_cyclic(n, bias, |w| cands[w] & dom[w]).unwrap_or(nxt);
                    if commit {
                        self.idle_bias[nxt] = cpu;
                    }
                }
                clear(&mut cands, dn);
            }
            cands[cpu / 64] &= !(1 << (cpu % 64));
        }
        self.scratch_allowed = allowed;
        self.scratch_idlers = idlers;
        Some(cpu)
    }

    /// `scratch_allowed`: the CPUs `t` may use (online, in its affinity,
    /// and for AASH of the speed its fast credits say); `scratch_idlers`:
    /// those of them that run and queue nothing.
    fn allowed_idle(&mut self, cx: &Ctx, t: TaskId) {
        let n = cx.ncpus();
        let words = n.div_ceil(64);
        let ty: &[u64] = match self.aash.as_ref().map(|a| a.is_holder[t]) {
            Some(false) => &self.slow_mask,
            _ => &self.fast_mask,
        };
        // Offline CPUs are rare (reconfiguration): check them one by one
        // only when there are some.
        let all_online =
            cx.v.online
                .chunks(64)
                .all(|ch| ch.iter().fold(true, |a, &b| a & b));
        let aff = &cx.task(t).affinity;
        self.scratch_allowed.clear();
        self.scratch_idlers.clear();
        for (w, &tw) in ty.iter().enumerate().take(words) {
            let mut x = tw & valid_word(n, w);
            if let crate::os::CpuSet::Mask(m) = aff {
                x &= m.get(w).copied().unwrap_or(0);
            }
            if !all_online {
                let mut y = x;
                while y != 0 {
                    let c = w * 64 + y.trailing_zeros() as usize;
                    if !cx.online(c) {
                        x &= !(1 << (c % 64));
                    }
                    y &= y - 1;
                }
            }
            self.scratch_allowed.push(x);
            let claimed = self.claimed.get(w).copied().unwrap_or(0);
            self.scratch_idlers
                .push(x & !self.run_mask[w] & !self.le[2][w] & !claimed);
        }
    }

    /// Xen 3.4's `__runq_tickle` for a vCPU that woke on a busy CPU: every
    /// idle CPU in its affinity is told to schedule, and each, finding its
    /// own queue empty, steals from its busy peers (`csched_load_balance`):
    /// the woken vCPU, or the one it preempted. The local CPU's reschedule
    /// was asked first, so a preempted vCPU is queued by the time an idler
    /// looks. Which idler gets there first is a race in Xen: the idlers are
    /// asked in a cyclic order from a random one.
    fn tickle_idlers(&mut self, cx: &mut Ctx, t: TaskId) {
        let n = cx.ncpus();
        // CPUs that run and queue nothing, word by word; then online and in
        // the affinity.
        // (A vector kept between calls: at 1024 CPUs a wake-up tickles
        // dozens of idle CPUs.)
        let mut idle = std::mem::take(&mut self.scratch_tickle);
        idle.clear();
        for w in 0..n.div_ceil(64) {
            let mut x = valid_word(n, w) & !self.run_mask[w] & !self.le[2][w];
            while x != 0 {
                let c = w * 64 + x.trailing_zeros() as usize;
                x &= x - 1;
                if cx.online(c) && cx.task(t).affinity.contains(c) {
                    idle.push(c);
                }
            }
        }
        if !idle.is_empty() {
            let start = if idle.len() > 1 {
                (cx.random_u64() % idle.len() as u64) as usize
            } else {
                0
            };
            for k in 0..idle.len() {
                cx.resched(idle[(start + k) % idle.len()]);
            }
        }
        self.scratch_tickle = idle;
    }

    fn eligible_wake(cx: &Ctx, t: TaskId) -> bool {
        match cx.vcpu(t) {
            Some(v) if v.aware => v.index < v.fast_vcpus,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::next_cyclic;
    use super::{after, keyed, SeqQueue};
    use std::collections::VecDeque;

    /// `SeqQueue` against a `VecDeque` doing the same pushes, removals and
    /// insertions before an entry: same order throughout, including after
    /// the keys run out between two entries (dozens of insertions at one
    /// place) and near the end of the key range.
    #[test]
    fn seq_queue_keeps_fifo_order() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for start in [None, Some(u64::MAX - 40 * super::SEQ_GAP)] {
            let mut q = SeqQueue::new();
            if let Some(k) = start {
                q.next = k;
            }
            let mut model: VecDeque<usize> = VecDeque::new();
            let ntasks = 50u64;
            let mut live = vec![false; ntasks as usize];
            let mut held = vec![false; ntasks as usize];
            for step in 0..5000 {
                let t = rnd(ntasks) as usize;
                match (model.contains(&t), rnd(3)) {
                    (false, 0) | (false, 1) => {
                        q.push_back(t);
                        model.push_back(t);
                    }
                    (false, _) if !model.is_empty() => {
                        // Mostly before the head, to exhaust the gap there.
                        let i = if rnd(4) == 0 {
                            rnd(model.len() as u64) as usize
                        } else {
                            0
                        };
                        q.insert_before(t, model[i]);
                        model.insert(i, t);
                    }
                    (true, _) => {
                        assert!(q.remove(t));
                        model.retain(|&u| u != t);
                    }
                    _ => {}
                }
                // Tasks are marked active and not, queued or not: the
                // marked entries keep the queue order.
                if rnd(2) == 0 {
                    let u = rnd(ntasks) as usize;
                    live[u] = !live[u];
                    q.set_live(u, live[u]);
                }
                let got: Vec<usize> = q.iter().map(|(_, t)| t).collect();
                assert_eq!(got, Vec::from(model.clone()), "step {step}");
                // And held or not: the free index is the active entries
                // that are not held, in the same order.
                if rnd(3) == 0 {
                    let u = rnd(ntasks) as usize;
                    held[u] = !held[u];
                    q.set_held(u, held[u]);
                }
                let got_live: Vec<usize> = keyed(&q.live).map(|(_, t)| t).collect();
                let want_live: Vec<usize> = model.iter().copied().filter(|&t| live[t]).collect();
                assert_eq!(got_live, want_live, "step {step}: active entries");
                let got_free: Vec<usize> = keyed(&q.free).map(|(_, t)| t).collect();
                let want_free: Vec<usize> =
                    want_live.iter().copied().filter(|&t| !held[t]).collect();
                assert_eq!(got_free, want_free, "step {step}: active entries not held");
                if let Some(&(k, _)) = q.iter().collect::<Vec<_>>().get(model.len() / 2) {
                    let got_after: Vec<usize> = after(&q.live, k).collect();
                    let want: Vec<usize> = q
                        .iter()
                        .filter(|&(j, t)| j > k && live[t])
                        .map(|(_, t)| t)
                        .collect();
                    assert_eq!(got_after, want, "step {step}: active entries after {k}");
                }
                for t in 0..ntasks as usize {
                    assert_eq!(q.contains(t), model.contains(&t), "step {step}, task {t}");
                }
            }
        }
    }

    /// The cyclic search over bit masks against the plain scan it replaces
    /// (`from + 1`, …, `from + n` modulo `n`), on sizes around word
    /// boundaries and masks from a fixed generator.
    #[test]
    fn next_cyclic_matches_a_scan() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for n in [1usize, 2, 5, 63, 64, 65, 127, 128, 129, 200] {
            for density in [0u64, 1, 8, 32, 64] {
                let set: Vec<bool> = (0..n).map(|_| rnd() % 64 < density).collect();
                let mut words = vec![0u64; n.div_ceil(64)];
                for (c, &b) in set.iter().enumerate() {
                    if b {
                        words[c / 64] |= 1 << (c % 64);
                    }
                }
                for from in 0..n {
                    let want = (1..=n).map(|k| (from + k) % n).find(|&c| set[c]);
                    assert_eq!(
                        next_cyclic(n, from, |w| words[w]),
                        want,
                        "n {n} from {from}"
                    );
                }
            }
        }
    }
}
