//! Xen's Credit scheduler (Credit1) and AASH, the asymmetry-aware
//! hypervisor scheduler built on it (seed 003, Chapter 2).
//!
//! `xen-credit`, as Xen does it (and as §2 of the paper summarises it):
//! * one run queue per physical CPU, ordered by priority BOOST > UNDER >
//!   OVER, round-robin within a priority (a descheduled vCPU goes after all
//!   vCPUs of its priority);
//! * a tick (10 ms) on which the running vCPU burns credits (10 per ms of
//!   run time, as Xen's `CSCHED_CREDITS_PER_MSEC`), drops a wake-up BOOST
//!   after consuming a tick, becomes OVER when its credits are gone, and is
//!   preempted when its 30 ms slice is over or a higher priority waits;
//! * an accounting period (3 ticks) that hands out `10 × period_ms` credits
//!   per physical CPU, shared between active domains by weight (capped at
//!   what a domain's active vCPUs can burn, the excess going to the others)
//!   and within a domain equally between its active vCPUs; credit is capped
//!   at one slice's worth either way; credit > 0 is UNDER, else OVER;
//! * BOOST on wake-up for an UNDER vCPU, preempting a lower-priority vCPU;
//! * a CPU whose next candidate is OVER, or that would go idle, first steals
//!   a higher-priority queued vCPU from its peers (`csched_load_balance`);
//! * wake-up placement: the previous CPU if idle, else an idle CPU (a
//!   random one among the idle for a first start, Xen's arbitrary choice),
//!   else the previous CPU.
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
use std::collections::VecDeque;

/// Xen's credits per millisecond of run time.
const CREDITS_PER_MS: f64 = 10.0;

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
    normal: VecDeque<TaskId>,
    /// Served first: vCPUs of high-priority VMs and of VMs in a sequential
    /// phase.
    fastq: VecDeque<TaskId>,
    /// Tasks known to the queues.
    known: Vec<bool>,
    /// Fast credits left this period.
    fast_credit: Vec<f64>,
    /// Holders of fast credits this period (in grant order).
    holders: Vec<TaskId>,
    /// Grants in order, for tests and reports: (time, task).
    pub grants: Vec<(SimTime, TaskId)>,
}

/// The machine's last-level-cache domains: each CPU's domain (dense
/// index), each domain's CPUs as a bit mask, and a per-domain counter that
/// `xen_pick` fills with idle CPUs.
#[derive(Default)]
struct LlcMasks {
    idx: Vec<usize>,
    mask: Vec<Vec<u64>>,
    count: Vec<usize>,
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
    /// Priority transitions (time, task, from, to), kept when `log` is on.
    pub log: Option<Vec<(SimTime, TaskId, &'static str, &'static str)>>,
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
                normal: VecDeque::new(),
                fastq: VecDeque::new(),
                known: Vec::new(),
                fast_credit: Vec::new(),
                holders: Vec::new(),
                grants: Vec::new(),
            })
        } else {
            None
        };
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
            log: None,
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
            if let Some(a) = self.aash.as_mut() {
                a.known.resize(t + 1, false);
                a.fast_credit.resize(t + 1, 0.0);
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
    }

    fn remove(&mut self, t: TaskId) {
        for q in self.rq.iter_mut() {
            if let Some(i) = q.iter().position(|&x| x == t) {
                q.remove(i);
                return;
            }
        }
    }

    fn idle(&self, cx: &Ctx, cpu: CpuId) -> bool {
        cx.online(cpu) && cx.current(cpu).is_none() && self.rq[cpu].is_empty()
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
            Some(a) => a.fast[cpu] == a.holders.contains(&t),
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
        let mut doms: Vec<(usize, u32, Vec<TaskId>)> = Vec::new();
        for &t in tasks {
            let (d, w) = Self::domain(cx, t);
            match doms.iter_mut().find(|x| x.0 == d) {
                Some(x) => x.2.push(t),
                None => doms.push((d, w, vec![t])),
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
        for (i, (_, _, ts)) in doms.iter().enumerate() {
            let each = share[i] / ts.len() as f64;
            for &t in ts {
                self.grow(t);
                self.credit[t] = (self.credit[t] + each).clamp(-cap, cap);
            }
        }
    }

    /// Set priorities from credits after accounting and re-sort the queues.
    fn reprioritise(&mut self, cx: &mut Ctx) {
        let mut all: Vec<TaskId> = self.active_tasks(cx);
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
            let mut v: Vec<TaskId> = self.rq[cpu].drain(..).collect();
            v.sort_by_key(|&t| self.pri[t]); // stable: FIFO within a priority
            self.rq[cpu] = v.into();
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

    /// A queued task with a higher priority than `than` that `cpu` may
    /// steal from another CPU's queue (first in CPU order after `cpu`).
    fn steal(&mut self, cx: &Ctx, cpu: CpuId, than: u8) -> Option<TaskId> {
        let n = self.rq.len();
        for k in 1..n {
            let peer = (cpu + k) % n;
            if self.rq[peer].is_empty() {
                continue;
            }
            if let Some(a) = &self.aash {
                if a.fast[peer] != a.fast[cpu] {
                    continue; // AASH: no stealing across core types
                }
            }
            let found = self.rq[peer]
                .iter()
                .position(|&t| self.pri[t] < than && self.allowed(cx, t, cpu));
            if let Some(i) = found {
                return self.rq[peer].remove(i);
            }
        }
        None
    }

    // ------------------------------------------------------------- AASH

    fn aash_know(&mut self, cx: &Ctx, t: TaskId) {
        self.grow(t);
        let a = self.aash.as_mut().expect("aash");
        if !a.known[t] {
            a.known[t] = true;
            // A newcomer queues ahead of the vCPUs that hold fast credits
            // now: they have just been served and went to the tail.
            let pos = a
                .normal
                .iter()
                .position(|x| a.holders.contains(x))
                .unwrap_or(a.normal.len());
            a.normal.insert(pos, t);
        }
        let _ = cx;
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
    fn update_queues(&mut self, cx: &Ctx) {
        let a = self.aash.as_ref().expect("aash");
        let to_fast: Vec<TaskId> = a
            .normal
            .iter()
            .copied()
            .filter(|&t| self.wants_fastq(cx, t))
            .collect();
        let to_normal: Vec<TaskId> = a
            .fastq
            .iter()
            .copied()
            .filter(|&t| !self.wants_fastq(cx, t))
            .collect();
        let a = self.aash.as_mut().expect("aash");
        for t in to_fast {
            a.normal.retain(|&x| x != t);
            a.fastq.push_back(t);
        }
        for t in to_normal {
            a.fastq.retain(|&x| x != t);
            a.normal.push_back(t);
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
    /// one of its fast vCPUs (§2.2).
    fn take_from(cx: &Ctx, q: &mut VecDeque<TaskId>, skip: &[TaskId]) -> Option<TaskId> {
        for i in 0..q.len() {
            let t = q[i];
            if skip.contains(&t) || !Self::active(cx, t) {
                continue;
            }
            let pick = if Self::eligible(cx, t) {
                Some(i)
            } else if let Some(v) = cx.vcpu(t).filter(|v| v.aware) {
                // Swap with a fast vCPU of the same VM further down.
                let j = (0..q.len()).find(|&j| {
                    let u = q[j];
                    !skip.contains(&u)
                        && Self::eligible(cx, u)
                        && cx.vcpu(u).is_some_and(|w| w.vm == v.vm)
                });
                if let Some(j) = j {
                    q.swap(i, j);
                    Some(i)
                } else {
                    None
                }
            } else {
                None
            };
            if let Some(i) = pick {
                let t = q.remove(i).expect("in range");
                q.push_back(t);
                return Some(t);
            }
        }
        None
    }

    /// The next vCPU to receive fast credits: fast queue first.
    fn next_recipient(&mut self, cx: &Ctx, skip: &[TaskId]) -> Option<TaskId> {
        let a = self.aash.as_mut().expect("aash");
        Self::take_from(cx, &mut a.fastq, skip).or_else(|| Self::take_from(cx, &mut a.normal, skip))
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
            cx.current(c)
                .is_some_and(|u| u != t && a.holders.contains(&u))
                || self.rq[c].iter().any(|&u| u != t && a.holders.contains(&u))
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
            TaskState::Running if cx.task(t).cpu != cpu => cx.migrate(t, cpu),
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
        let nfast = self.aash.as_ref().expect("aash").nfast;
        let mut chosen = Vec::new();
        while chosen.len() < nfast {
            match self.next_recipient(cx, &chosen) {
                Some(t) => chosen.push(t),
                None => break,
            }
        }
        let period_credits = self.acct_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
        let old: Vec<TaskId> = std::mem::take(&mut self.aash.as_mut().expect("aash").holders);
        {
            let a = self.aash.as_mut().expect("aash");
            for &t in &old {
                a.fast_credit[t] = 0.0;
            }
            for &t in &chosen {
                a.fast_credit[t] = period_credits;
                a.grants.push((cx.now, t));
            }
            a.holders = chosen.clone();
        }
        // Slow credits: slow capacity over the active vCPUs not served by
        // fast cores, equally (§2.1).
        let nslow = (0..cx.ncpus())
            .filter(|&c| !self.is_fast(c) && cx.online(c))
            .count() as f64;
        let rest: Vec<TaskId> = active
            .iter()
            .copied()
            .filter(|t| !chosen.contains(t))
            .collect();
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
            if !chosen.contains(&t) {
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
        // A holder already on its way here serves this core.
        if a.holders
            .iter()
            .any(|&h| Self::active(cx, h) && cx.task(h).cpu == cpu)
        {
            return false;
        }
        let active = self.active_tasks(cx);
        for &t in &active {
            self.aash_know(cx, t);
        }
        self.update_queues(cx);
        // Holders that blocked give their fast credits up.
        let a = self.aash.as_mut().expect("aash");
        let (keep, gone): (Vec<TaskId>, Vec<TaskId>) =
            a.holders.iter().partition(|&&h| Self::active(cx, h));
        for h in gone {
            a.fast_credit[h] = 0.0;
        }
        a.holders = keep;
        let holders = a.holders.clone();
        let Some(t) = self.next_recipient(cx, &holders) else {
            return false;
        };
        let left_ticks = self.acct_ticks - self.ticks % self.acct_ticks;
        let credits = left_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
        let a = self.aash.as_mut().expect("aash");
        a.fast_credit[t] = credits;
        a.grants.push((cx.now, t));
        a.holders.push(t);
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
        _flags: EnqFlags,
    ) -> CpuId {
        self.grow(task);
        if self.aash.is_some() {
            self.aash_know(cx, task);
        }
        let n = cx.ncpus();
        // `allowed`, with the task's fast-credit status looked up once.
        let holder = self.aash.as_ref().map(|a| a.holders.contains(&task));
        let ok = |s: &Self, c: CpuId| {
            cx.online(c)
                && cx.task(task).affinity.contains(c)
                && match (&s.aash, holder) {
                    (Some(a), Some(h)) => a.fast[c] == h,
                    _ => true,
                }
        };
        if let Some(p) = prev {
            if let Some(c) = self.xen_pick(cx, task, p) {
                if self.idle(cx, c) {
                    return c;
                }
            }
        }
        // AASH: an idle fast core takes a waking vCPU at once.
        if let Some(a) = &self.aash {
            if !a.holders.contains(&task) && Self::eligible_wake(cx, task) {
                let fast_idle = (0..n).find(|&c| {
                    a.fast[c]
                        && cx.online(c)
                        && self.idle(cx, c)
                        && cx.task(task).affinity.contains(c)
                });
                if let Some(f) = fast_idle {
                    let left_ticks = self.acct_ticks - self.ticks % self.acct_ticks;
                    let credits = left_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
                    let a = self.aash.as_mut().expect("aash");
                    a.fast_credit[task] = credits;
                    a.grants.push((cx.now, task));
                    a.holders.push(task);
                    for q in [&mut a.fastq, &mut a.normal] {
                        if let Some(i) = q.iter().position(|&x| x == task) {
                            q.remove(i);
                            q.push_back(task);
                        }
                    }
                    return f;
                }
            }
        }
        if prev.is_none() {
            let idle: Vec<CpuId> = (0..n)
                .filter(|&c| ok(self, c) && self.idle(cx, c))
                .collect();
            if !idle.is_empty() {
                // A first start: Xen's choice among idle CPUs is arbitrary.
                return idle[(cx.random_u64() % idle.len() as u64) as usize];
            }
        }
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
        }
        if matches!(flags, EnqFlags::Wakeup | EnqFlags::New) && self.pri[task] == UNDER {
            self.set_pri(cx, task, BOOST);
        }
        self.insert(cpu, task);
        if let Some(cur) = cx.current(cpu) {
            if cur < self.pri.len() && self.pri[task] < self.pri[cur] {
                cx.resched(cpu);
            }
        } else if cx.online(cpu) {
            cx.resched(cpu);
        }
    }

    fn dequeue(&mut self, _cx: &mut Ctx, task: TaskId, _cpu: CpuId) {
        self.remove(task);
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        // Drop queued tasks this CPU may no longer run (AASH moved them).
        let head_pri = self.rq[cpu]
            .front()
            .map(|&t| self.pri[t])
            .unwrap_or(u8::MAX);
        let pick = if head_pri <= UNDER {
            self.rq[cpu].pop_front()
        } else {
            self.steal(cx, cpu, head_pri.min(OVER + 1))
                .or_else(|| self.rq[cpu].pop_front())
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

    fn running(&mut self, cx: &mut Ctx, _task: TaskId, cpu: CpuId) {
        self.slice_start[cpu] = cx.now;
        self.last_burn[cpu] = cx.now;
    }

    fn stopping(&mut self, cx: &mut Ctx, _task: TaskId, cpu: CpuId, _runnable: bool) {
        self.burn(cx, cpu);
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
            if self.credit[t] <= 0.0 && self.pri[t] != OVER && !self.is_fast(cpu) {
                self.set_pri(cx, t, OVER);
            }
            let head = self.rq[cpu].front().map(|&h| self.pri[h]);
            let slice_over = cx.now.since(self.slice_start[cpu]) >= self.slice;
            if head.is_some_and(|h| h < self.pri[t] || (slice_over && h <= self.pri[t])) {
                cx.resched(cpu);
            } else if slice_over {
                // Nothing local of its rank waits: a peer's queue may hold a
                // higher priority (Xen's balance on schedule).
                let n = cx.ncpus();
                let better = (1..n).map(|k| (cpu + k) % n).any(|p| {
                    self.rq[p]
                        .iter()
                        .any(|&u| self.pri[u] < self.pri[t] && self.allowed(cx, u, cpu))
                        && self.aash.as_ref().is_none_or(|a| a.fast[p] == a.fast[cpu])
                });
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
                let active = self.active_tasks(cx);
                let online = (0..cx.ncpus()).filter(|&c| cx.online(c)).count() as f64;
                let total =
                    online * self.acct_ticks as f64 * self.tick.0 as f64 * 1e-6 * CREDITS_PER_MS;
                self.distribute(cx, &active, total);
                self.reprioritise(cx);
                self.check_preempt(cx);
            }
        }
        // Idle CPUs look for work queued elsewhere.
        for cpu in 0..cx.ncpus() {
            if cx.online(cpu) && cx.current(cpu).is_none() {
                let work = (0..cx.ncpus()).any(|p| {
                    self.rq[p].iter().any(|&u| self.allowed(cx, u, cpu))
                        && self.aash.as_ref().is_none_or(|a| a.fast[p] == a.fast[cpu])
                });
                let fill = self.is_fast(cpu)
                    && (0..cx.ncpus()).any(|p| {
                        !self.is_fast(p) && (cx.current(p).is_some() || !self.rq[p].is_empty())
                    });
                if work || fill {
                    cx.resched(cpu);
                }
            }
        }
        cx.arm_timer(cx.now + self.tick, 0);
    }
}

impl Credit {
    /// Xen's `csched_cpu_pick`: start from the previous CPU; an idle CPU in
    /// a last-level-cache domain (socket) with more idle CPUs than the
    /// current choice's wins, cycling through that domain's idle CPUs from
    /// where the last such choice left off; within a domain an idle CPU
    /// beats a busy one.
    fn xen_pick(&mut self, cx: &Ctx, t: TaskId, prev: CpuId) -> Option<CpuId> {
        let n = cx.ncpus();
        if self.idle_bias.len() < n {
            self.idle_bias = (0..n).collect();
        }
        if self.llc.idx.len() != n {
            self.llc = LlcMasks::new(cx.machine, n);
        }
        let words = n.div_ceil(64);
        // One pass over the CPUs: who may take `t`, who of those is idle,
        // and how many idle ones each LLC domain has.
        let holder = self.aash.as_ref().map(|a| a.holders.contains(&t));
        let mut allowed = std::mem::take(&mut self.scratch_allowed);
        let mut idlers = std::mem::take(&mut self.scratch_idlers);
        allowed.clear();
        allowed.resize(words, 0);
        idlers.clear();
        idlers.resize(words, 0);
        let counts = &mut self.llc.count;
        counts.iter_mut().for_each(|k| *k = 0);
        let aff = &cx.task(t).affinity;
        for c in 0..n {
            let ok = cx.online(c)
                && aff.contains(c)
                && match (&self.aash, holder) {
                    (Some(a), Some(h)) => a.fast[c] == h,
                    _ => true,
                };
            if ok {
                allowed[c / 64] |= 1 << (c % 64);
                if cx.current(c).is_none() && self.rq[c].is_empty() {
                    idlers[c / 64] |= 1 << (c % 64);
                    counts[self.llc.idx[c]] += 1;
                }
            }
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
        while let Some(nxt) = next_cyclic(n, cpu, |w| cands[w]) {
            let (dc, dn) = (llc.idx[cpu], llc.idx[nxt]);
            if dc == dn {
                // Within a domain: an idle CPU beats a busy one; the group
                // is `nxt` alone, so the cycle from the bias finds it.
                if !has(&idlers, cpu) {
                    cpu = nxt;
                    self.idle_bias[nxt] = nxt;
                }
                cands[nxt / 64] &= !(1 << (nxt % 64));
            } else {
                let dom = &llc.mask[dn];
                if llc.count[dc] < llc.count[dn] {
                    let bias = self.idle_bias[nxt];
                    cpu = next_cyclic(n, bias, |w| cands[w] & dom[w]).unwrap_or(nxt);
                    self.idle_bias[nxt] = cpu;
                }
                for (w, d) in cands.iter_mut().zip(dom.iter()) {
                    *w &= !d;
                }
            }
            cands[cpu / 64] &= !(1 << (cpu % 64));
        }
        self.scratch_allowed = allowed;
        self.scratch_idlers = idlers;
        Some(cpu)
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
