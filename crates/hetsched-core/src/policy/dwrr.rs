//! Distributed Weighted Round-Robin and its performance-asymmetric extension,
//! after Li et al., "OS Support for Overlapping-ISA Heterogeneous Multi-core
//! Architectures" (HPCA 2010). Three registered schedulers share one
//! implementation, [`Dwrr`]:
//!
//! * `dwrr` — DWRR as §4.3.3 specifies it: per-CPU *round-active* and
//!   *round-expired* queues, a round number per CPU and a global `highest`;
//!   round slicing (a thread that has used its round slice `w·B` in the
//!   current round is preempted and moved to round-expired) and round
//!   balancing (Steps 1 and 2, run whenever a CPU's round-active turns
//!   empty); wake-up placement on the least loaded CPU among those idle or in
//!   round `highest`.
//! * `a-dwrr` — A-DWRR (§4.3.4): every use of CPU time becomes *scaled* CPU
//!   time, run time × the CPU's rating (§4.1: normalised to the slowest CPU,
//!   so the slowest CPU has rating 1), plus the under-utilisation extension
//!   of Figure 6 (a thread swap between a fast CPU whose round-active emptied
//!   and a slow CPU that runs a single, lagging thread).
//! * `faster-first` — A-DWRR with faster-first scheduling (§4.2, §5.3):
//!   placement on the fastest idle CPU, and an idle faster CPU takes the
//!   thread running on the slowest CPU (preempting it), which is the
//!   combination the paper evaluates ("faster-first + A-DWRR").
//!
//! The three are presets of the same parameters (`rating`, `underutil`,
//! `faster_first`), so e.g. `a-dwrr[underutil=false]` is A-DWRR without the
//! Figure 6 extension and `dwrr[rating=capacity]` is the same policy.
//!
//! ## Choices where the paper is silent (each marked "CHOICE" below)
//! * Local scheduler (§4.3.3: "DWRR places no control over threads' dispatch
//!   order ... controlled by the underlying scheduler"): round-robin over
//!   round-active with a local time slice `local_slice_ms`. A thread keeps the
//!   unused part of its local slice when it is preempted for another reason
//!   and is then put back at the head of round-active.
//! * X (Step 1(ii)): one thread per round balancing. It goes straight to the
//!   CPU that balances (which is about to idle) and runs at once; the paper
//!   notes that Step 1 repeats when it finishes its round slice there.
//! * Which thread Step 1 moves: preferred in this order, because each later
//!   kind loses more of the thread's place in the rounds: (a) a thread in
//!   round-active of a round-`highest` CPU (same round, its usage carries
//!   over, as D's does in Figure 5); (b) a thread in round-expired of a
//!   round-`highest−1` CPU (it finished `highest−1` and starts `highest`);
//!   (c) a thread in round-active of a round-`highest−1` CPU. Within a kind,
//!   from the CPU with the largest queued weight per unit of rating (where
//!   threads wait longest), ties the lowest id; from round-active the last
//!   queued thread (the one that would wait longest), from round-expired the
//!   first.
//! * Step 1(i) treats the queued threads of a CPU that runs nothing as
//!   running: such a CPU is about to pick them (a thread that has just
//!   arrived there by a faster-first move or a swap, typically), and taking
//!   one away would undo that move at the same instant.
//! * A thread keeps its round usage when it moves or sleeps; a thread moved
//!   to round-expired carries the overrun of its slice into the next round
//!   (zero when the timer is exact, a tick's worth at most after DVFS).
//! * An idle CPU does not "turn" empty, so the paper never runs round
//!   balancing for it; Linux idle CPUs balance on nohz kicks. When a CPU
//!   starts running a task while it has queued threads that Step 1(i) may
//!   move and some CPU is idle, one idle CPU is kicked (rescheduled), and
//!   its pick runs round balancing. An idle CPU that receives a thread this
//!   way, by placement or by a faster-first move takes round `highest` (the
//!   wake-up rule of §4.3.3), except a faster-first move, which keeps the
//!   moved thread's round.
//! * Under-utilisation extension, condition (2) ("round(s) is the minimum
//!   among all slow CPUs"): taken over the slow CPUs that satisfy (1) and
//!   (3), because idle slow CPUs have round 0 after Step 2(ii) and would
//!   otherwise always block the swap. "Slow" means a lower rating than p's.
//!   T2 is the first thread of p's round-expired that may run on s.
//! * Load for placement is the sum of the weights of the CPU's threads
//!   (running, round-active, round-expired, arriving), as Linux's; ties go
//!   to the CPU the thread last ran on, then the lowest id (faster-first:
//!   the fastest idle CPU, then the lowest id).
//!   If affinity allows no CPU that is idle or in round `highest`, the
//!   highest-round allowed CPU is used (§5.2 picks "a CPU in the highest
//!   round" for fault migrations).
//!
//! ## Time accounting
//! Each CPU's running thread is charged `Δt × rating(cpu)` (exact
//! nanoseconds from `cx.now`) in `stopping`, at ticks and at a per-CPU timer
//! armed for the earlier of the round-slice expiry and the local-slice
//! expiry, so round slices end exactly, not at the next tick. Ticks stay on
//! while a CPU is busy so that a DVFS change of the rating is picked up
//! within one tick. The rating is `cx.capacity(cpu) / min capacity`
//! (`rating=capacity`, default for A-DWRR), the machine's rating as
//! [`Ctx::rating`] computes it (`rating=machine`: the types' given ratings,
//! else capacity, scaled by DVFS) or 1 (`rating=unit`, plain DWRR).

use super::{About, Ctx, EnqFlags, ParamDef, Params, PolicySpec, Scheduler};
use crate::hw::{CpuId, Machine};
use crate::os::TaskId;
use crate::time::SimTime;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Weight of a nice-0 thread: w = weight / 1024, so nice 0 has w = 1.
const NICE_0: f64 = 1024.0;
/// Slack when comparing scaled nanoseconds (f64) against a slice.
const EPS: f64 = 0.5;
/// At most this many round events are kept; later ones are only counted.
const LOG_CAP: usize = 1 << 20;

fn params(rating: &'static str, underutil: &'static str, ff: &'static str) -> Vec<ParamDef> {
    vec![
        ParamDef {
            name: "round_slice_ms",
            default: "30",
            doc: "B, the round slice unit: a thread of weight w runs w·B (scaled) ms per round",
        },
        ParamDef {
            name: "local_slice_ms",
            default: "10",
            doc: "time slice of the local round-robin among round-active threads",
        },
        ParamDef {
            name: "rating",
            default: rating,
            doc: "CPU rating for scaled time: unit (plain DWRR), capacity (capacity / slowest capacity, DVFS-scaled) or machine (the machine's rating table, else capacity)",
        },
        ParamDef {
            name: "underutil",
            default: underutil,
            doc: "the Figure 6 under-utilisation extension (swap with a lagging single-thread slow CPU)",
        },
        ParamDef {
            name: "faster_first",
            default: ff,
            doc: "faster-first placement and migration to an idle faster CPU (§4.2)",
        },
    ]
    .into_iter()
    .chain(super::fam::params())
    .collect()
}

/// Registry entry of `dwrr`.
pub fn dwrr_info() -> About {
    About {
        name: "dwrr",
        doc: "Distributed Weighted Round-Robin (Li et al. §4.3.3): per-CPU round-active/round-expired queues, round slices w·B of CPU time, round balancing to keep CPUs within one round",
        params: params("unit", "false", "false"),
    }
}

/// Registry entry of `a-dwrr`.
pub fn adwrr_info() -> About {
    About {
        name: "a-dwrr",
        doc: "A-DWRR (Li et al. §4.3.4): DWRR on scaled CPU time (run time × CPU rating) with the under-utilisation swap",
        params: params("machine", "true", "false"),
    }
}

/// Registry entry of `faster-first`.
pub fn faster_first_info() -> About {
    About {
        name: "faster-first",
        doc: "Faster-first scheduling + A-DWRR (Li et al. §4.2, §6.2): the fastest idle CPU first, idle faster CPUs take threads from slower ones",
        params: params("machine", "true", "true"),
    }
}

/// How a CPU's rating is obtained.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum RatingSrc {
    Unit,
    Capacity,
    Machine,
}

/// What happened, in a [`RoundEvent`].
#[derive(Clone, Debug, PartialEq)]
pub enum RoundWhat {
    /// A thread used its round slice and moved to round-expired.
    Expire {
        /// The thread.
        task: TaskId,
        /// CPU time it used in the round, scaled ns (run time × rating; plain ns for `dwrr`).
        used_ns: f64,
    },
    /// Step 2: the CPU swapped its queues and advanced to `round`.
    Advance {
        /// The CPU's new round number.
        round: u64,
    },
    /// Step 2(ii): nothing to run; the CPU is idle and its round is 0.
    Idle,
    /// An idle CPU received a thread and took round `round`.
    Join {
        /// Round the CPU joined.
        round: u64,
    },
    /// Step 1(ii): `task` moved here from `from` (its round-expired queue
    /// if `from_expired`).
    Pull {
        /// The thread moved.
        task: TaskId,
        /// CPU it was queued on.
        from: CpuId,
        /// Whether it came from `from`'s round-expired queue (else round-active).
        from_expired: bool,
    },
    /// Under-utilisation swap: `t1` (running on slow CPU `s`) comes here
    /// with round slice `t1_slice_ns`, `t2` goes to `s`, whose round becomes
    /// `round_s`.
    Swap {
        /// Thread that was running on `s` and moves here.
        t1: TaskId,
        /// The slow CPU.
        s: CpuId,
        /// Thread that moves from this CPU's round-expired to `s`'s round-active.
        t2: TaskId,
        /// New round of `s` (this CPU's round + 1).
        round_s: u64,
        /// Round slice `t1` gets here to catch up to this CPU's round, scaled ns.
        t1_slice_ns: f64,
    },
    /// Faster-first: this idle CPU takes `task`, running on slower `from`.
    FasterFirst {
        /// The thread taken.
        task: TaskId,
        /// Slower CPU it was running on.
        from: CpuId,
    },
}

/// One entry of the round log ([`Dwrr::trace`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RoundEvent {
    /// Simulated time, ns.
    pub t_ns: u64,
    /// The CPU concerned (for moves: the destination).
    pub cpu: CpuId,
    /// What happened.
    pub what: RoundWhat,
}

/// Per-CPU state.
#[derive(Clone, Debug, Default)]
struct Cpu {
    round: u64,
    /// Queued (not running) threads of round-active; the running thread is
    /// logically in round-active too.
    active: VecDeque<TaskId>,
    expired: VecDeque<TaskId>,
    curr: Option<TaskId>,
    /// When the running thread was last charged.
    exec_start: SimTime,
    /// Threads migrating here (running elsewhere until preempted there).
    incoming: u32,
    /// No threads at all (Step 2(ii)); the round is 0 then.
    idle: bool,
    /// Sum of the weights of the threads whose home this CPU is.
    load: u64,
    /// Sum of the weights of the queued threads (round-active and
    /// round-expired), kept with the queues.
    queued_w: u64,
    tick_on: bool,
    /// Deadline of the armed timer, if any.
    armed: Option<SimTime>,
}

/// Per-thread state.
#[derive(Clone, Debug, Default)]
struct Th {
    /// Scaled ns used in the current round.
    used: f64,
    /// Ns used of the current local slice.
    local: u64,
    /// Round slice override for the current round (the under-utilisation
    /// credit), scaled ns.
    slice: Option<f64>,
    weight: u64,
    /// The CPU whose load counts this thread.
    home: Option<CpuId>,
    /// Pending migration of the running thread to this CPU.
    dest: Option<CpuId>,
    /// Total scaled ns charged (for tests and diagnostics).
    scaled_total: f64,
}

/// DWRR / A-DWRR / faster-first (see the module doc).
pub struct Dwrr {
    name: String,
    /// B, scaled ns.
    unit: f64,
    /// Local round-robin slice, ns.
    local_slice: u64,
    rating: RatingSrc,
    underutil: bool,
    faster_first: bool,
    cpus: Vec<Cpu>,
    th: Vec<Th>,
    highest: u64,
    nidle: usize,
    /// CPUs with queued threads (round-active or round-expired not both
    /// empty), as a bit mask: round balancing looks only at these.
    queued: Vec<u64>,
    /// Idle CPUs (`Cpu::idle`) as a bit mask.
    idle_mask: Vec<u64>,
    /// Busy CPUs by round, each round's ordered by (load, id): wake-up
    /// placement looks only at round `highest`'s first entries.
    by_round: BTreeMap<u64, BTreeSet<(u64, CpuId)>>,
    /// Each CPU's entry in `by_round` (round, load), `None` while idle.
    indexed: Vec<Option<(u64, u64)>>,
    log: Vec<RoundEvent>,
    dropped: u64,
    /// For `rating=capacity`: domain frequencies and the slowest CPU's
    /// capacity at them.
    min_perf: Cell<(Vec<u32>, f64)>,
    /// Fault-and-migrate (§5.2).
    fam: super::fam::FaultMigrate,
}

impl Dwrr {
    /// Build from a parsed spec; `ps.name` selects the preset (`dwrr`,
    /// `a-dwrr` or `faster-first`).
    pub fn from_params(ps: &PolicySpec, m: &Machine) -> Result<Dwrr, String> {
        let info = match ps.name.as_str() {
            "dwrr" => dwrr_info(),
            "a-dwrr" => adwrr_info(),
            "faster-first" => faster_first_info(),
            other => return Err(format!("not a DWRR policy: \"{other}\"")),
        };
        let p = Params::new(info.name, &ps.params, &info.params)?;
        let unit = p.f64("round_slice_ms", 0.001, 100_000.0)? * 1e6;
        let local = p.f64("local_slice_ms", 0.001, 100_000.0)? * 1e6;
        let rating = match p
            .choice("rating", &["unit", "capacity", "machine"])?
            .as_str()
        {
            "unit" => RatingSrc::Unit,
            "capacity" => RatingSrc::Capacity,
            _ => RatingSrc::Machine,
        };
        let mut name = info.name.to_string();
        if !ps.params.is_empty() {
            let parts: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            name = format!("{name}[{}]", parts.join(","));
        }
        let n = m.ncpus();
        let cpus = (0..n)
            .map(|_| Cpu {
                idle: true,
                ..Cpu::default()
            })
            .collect();
        Ok(Dwrr {
            name,
            unit,
            local_slice: local.round().max(1.0) as u64,
            rating,
            underutil: p.bool("underutil")?,
            faster_first: p.bool("faster_first")?,
            cpus,
            th: Vec::new(),
            highest: 0,
            nidle: n,
            queued: vec![0; n.div_ceil(64)],
            idle_mask: (0..n.div_ceil(64))
                .map(|w| {
                    if (w + 1) * 64 <= n {
                        u64::MAX
                    } else {
                        (1u64 << (n % 64)) - 1
                    }
                })
                .collect(),
            by_round: BTreeMap::new(),
            indexed: vec![None; n],
            log: Vec::new(),
            dropped: 0,
            min_perf: Cell::new((Vec::new(), 1.0)),
            fam: super::fam::from_params(&p)?,
        })
    }

    /// Round number of `cpu` (0 while idle).
    pub fn round(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu].round
    }

    /// The global `highest` round.
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// Whether `cpu` is idle in the DWRR sense (no threads; Step 2(ii)).
    pub fn is_idle(&self, cpu: CpuId) -> bool {
        self.cpus[cpu].idle
    }

    /// Scaled CPU time charged to `task` so far, ns.
    pub fn scaled_ns(&self, task: TaskId) -> f64 {
        self.th.get(task).map_or(0.0, |t| t.scaled_total)
    }

    /// The round log: round advances, idling, thread expiries and moves.
    pub fn trace(&self) -> &[RoundEvent] {
        &self.log
    }

    /// Round events not kept because the log was full.
    pub fn trace_dropped(&self) -> u64 {
        self.dropped
    }

    /// Check the policy's own bookkeeping (for tests): every thread in at
    /// most one place, queued threads counted on their CPU, loads, pending
    /// migrations and idle CPUs consistent, no round above `highest`.
    pub fn audit(&self) -> Result<(), String> {
        let mut seen = vec![false; self.th.len()];
        let mut load = vec![0u64; self.cpus.len()];
        let mut incoming = vec![0u32; self.cpus.len()];
        for (t, th) in self.th.iter().enumerate() {
            if let Some(h) = th.home {
                load[h] += th.weight;
            }
            if let Some(d) = th.dest {
                incoming[d] += 1;
                if th.home != Some(d) {
                    return Err(format!(
                        "task {t} migrates to cpu {d} but is counted on {:?}",
                        th.home
                    ));
                }
            }
        }
        let mut nidle = 0;
        for (c, cpu) in self.cpus.iter().enumerate() {
            let queued = cpu.active.iter().chain(cpu.expired.iter());
            for &t in queued.chain(cpu.curr.iter()) {
                if std::mem::replace(&mut seen[t], true) {
                    return Err(format!("task {t} is in two places (one on cpu {c})"));
                }
                let th = &self.th[t];
                if th.home != Some(c) && th.dest.is_none() {
                    return Err(format!(
                        "task {t} is on cpu {c} but counted on {:?}",
                        th.home
                    ));
                }
            }
            if cpu.load != load[c] {
                return Err(format!(
                    "cpu {c}: load {} but its threads weigh {}",
                    cpu.load, load[c]
                ));
            }
            let qw: u64 = cpu
                .active
                .iter()
                .chain(cpu.expired.iter())
                .map(|&t| self.th[t].weight)
                .sum();
            if qw != cpu.queued_w {
                return Err(format!(
                    "cpu {c}: queued weight {} but its queued threads weigh {qw}",
                    cpu.queued_w
                ));
            }
            let has = !cpu.active.is_empty() || !cpu.expired.is_empty();
            if has != (self.queued[c / 64] & (1 << (c % 64)) != 0) {
                return Err(format!("cpu {c}: queued mask says {}", !has));
            }
            if cpu.idle != (self.idle_mask[c / 64] & (1 << (c % 64)) != 0) {
                return Err(format!("cpu {c}: idle mask says {}", !cpu.idle));
            }
            let entry = (!cpu.idle).then_some((cpu.round, cpu.load));
            let listed = entry.is_some_and(|(r, l)| {
                self.by_round
                    .get(&r)
                    .is_some_and(|set| set.contains(&(l, c)))
            });
            if self.indexed[c] != entry || entry.is_some() != listed {
                return Err(format!(
                    "cpu {c}: indexed as {:?}, is {entry:?} (listed: {listed})",
                    self.indexed[c]
                ));
            }
            if cpu.incoming != incoming[c] {
                return Err(format!(
                    "cpu {c}: {} incoming, {} threads on their way",
                    cpu.incoming, incoming[c]
                ));
            }
            if cpu.round > self.highest {
                return Err(format!(
                    "cpu {c}: round {} above highest {}",
                    cpu.round, self.highest
                ));
            }
            if cpu.idle {
                nidle += 1;
                if cpu.curr.is_some()
                    || !cpu.active.is_empty()
                    || !cpu.expired.is_empty()
                    || cpu.incoming > 0
                    || cpu.round != 0
                {
                    return Err(format!(
                        "cpu {c} is idle but has threads or round {}",
                        cpu.round
                    ));
                }
            }
        }
        let entries: usize = self.by_round.values().map(|s| s.len()).sum();
        if entries != self.cpus.len() - nidle {
            return Err(format!(
                "{entries} busy cpus indexed, {} busy",
                self.cpus.len() - nidle
            ));
        }
        if nidle != self.nidle {
            return Err(format!("{} idle cpus counted, {nidle} idle", self.nidle));
        }
        Ok(())
    }

    fn note(&mut self, now: SimTime, cpu: CpuId, what: RoundWhat) {
        if self.log.len() < LOG_CAP {
            self.log.push(RoundEvent {
                t_ns: now.0,
                cpu,
                what,
            });
        } else {
            self.dropped += 1;
        }
    }

    /// Bring `cpu`'s bit of the queued mask up to date after its queues
    /// changed.
    /// `t` joined (`add`) or left `cpu`'s queues: its weight and the
    /// queued mask follow.
    #[inline]
    fn queued_change(&mut self, cpu: CpuId, t: TaskId, add: bool) {
        let w = self.th[t].weight;
        let c = &mut self.cpus[cpu];
        if add {
            c.queued_w += w;
        } else {
            c.queued_w -= w;
        }
        self.mark(cpu);
    }

    #[inline]
    fn mark(&mut self, cpu: CpuId) {
        let c = &self.cpus[cpu];
        let bit = 1u64 << (cpu % 64);
        if c.active.is_empty() && c.expired.is_empty() {
            self.queued[cpu / 64] &= !bit;
        } else {
            self.queued[cpu / 64] |= bit;
        }
    }

    /// Bring `cpu`'s entries of `idle_mask` and `by_round` up to date after
    /// its idleness, round or load changed.
    fn reindex(&mut self, cpu: CpuId) {
        let c = &self.cpus[cpu];
        let want = (!c.idle).then_some((c.round, c.load));
        let had = self.indexed[cpu];
        if had == want {
            return;
        }
        if let Some((r, l)) = had {
            if let Some(set) = self.by_round.get_mut(&r) {
                set.remove(&(l, cpu));
                if set.is_empty() {
                    self.by_round.remove(&r);
                }
            }
        }
        let bit = 1u64 << (cpu % 64);
        match want {
            Some((r, l)) => {
                self.by_round.entry(r).or_default().insert((l, cpu));
                self.idle_mask[cpu / 64] &= !bit;
            }
            None => self.idle_mask[cpu / 64] |= bit,
        }
        self.indexed[cpu] = want;
    }

    /// Idle CPUs, ascending.
    fn idle_cpus(&self) -> impl Iterator<Item = CpuId> + '_ {
        crate::os::set_bits(&self.idle_mask)
    }

    fn th_mut(&mut self, t: TaskId) -> &mut Th {
        if t >= self.th.len() {
            self.th.resize(t + 1, Th::default());
        }
        &mut self.th[t]
    }

    /// Capacity of `cpu` now, for `rating=capacity`.
    fn cap(cx: &Ctx, cpu: CpuId) -> f64 {
        cx.capacity(cpu).max(1) as f64
    }

    /// Rating of `cpu` now (§4.1, normalised to the slowest CPU). The
    /// slowest CPU's performance depends only on the domains' frequencies
    /// (duty cycles are fixed), so it is cached against them: O(domains)
    /// per call instead of O(cpus).
    fn rating(&self, cx: &Ctx, cpu: CpuId) -> f64 {
        match self.rating {
            RatingSrc::Unit => return 1.0,
            // The engine keeps the machine's rating table up to date.
            RatingSrc::Machine => return cx.rating(cpu),
            RatingSrc::Capacity => {}
        }
        let mut cache = self.min_perf.take();
        let nd = cx.machine.domains.len();
        let fresh = cache.0.len() == nd && (0..nd).all(|d| cache.0[d] == cx.domain_mhz(d));
        if !fresh {
            cache.0 = (0..nd).map(|d| cx.domain_mhz(d)).collect();
            cache.1 = (0..cx.ncpus())
                .map(|c| Self::cap(cx, c))
                .fold(f64::INFINITY, f64::min);
        }
        let min = cache.1;
        self.min_perf.set(cache);
        Self::cap(cx, cpu) / min
    }

    /// The round slice of `t` in its current round, scaled ns.
    fn slice(&self, t: TaskId) -> f64 {
        let th = &self.th[t];
        th.slice.unwrap_or(th.weight as f64 / NICE_0 * self.unit)
    }

    fn round_done(&self, t: TaskId) -> bool {
        self.th[t].used >= self.slice(t) - EPS
    }

    /// Make `c` the CPU whose load counts `t`.
    fn set_home(&mut self, t: TaskId, c: Option<CpuId>) {
        let (old, w) = (self.th[t].home, self.th[t].weight);
        if old == c {
            return;
        }
        if let Some(o) = old {
            self.cpus[o].load -= w;
            self.reindex(o);
        }
        if let Some(n) = c {
            self.cpus[n].load += w;
            self.reindex(n);
        }
        self.th[t].home = c;
    }

    /// A thread arrives at `cpu`: an idle CPU leaves idleness in `round`.
    fn join(&mut self, now: SimTime, cpu: CpuId, round: u64) {
        if self.cpus[cpu].idle {
            self.cpus[cpu].idle = false;
            self.cpus[cpu].round = round;
            self.nidle -= 1;
            self.reindex(cpu);
            self.note(now, cpu, RoundWhat::Join { round });
        }
    }

    fn bump_highest(&mut self, r: u64) {
        self.highest = self.highest.max(r);
    }

    /// Charge the running thread of `cpu` up to now.
    fn account(&mut self, cx: &Ctx, cpu: CpuId) {
        let Some(t) = self.cpus[cpu].curr else { return };
        let dt = cx.now.since(self.cpus[cpu].exec_start).0;
        if dt == 0 {
            return;
        }
        let r = self.rating(cx, cpu);
        self.cpus[cpu].exec_start = cx.now;
        let th = &mut self.th[t];
        th.used += dt as f64 * r;
        th.scaled_total += dt as f64 * r;
        th.local += dt;
    }

    /// Preempt the running thread if its round or local slice is over,
    /// otherwise (re)arm the CPU's timer for the earlier of the two.
    fn check(&mut self, cx: &mut Ctx, cpu: CpuId) {
        let Some(t) = self.cpus[cpu].curr else { return };
        if self.cpus[cpu].active.is_empty() {
            // Alone, a thread starts a new local slice whenever one ends, so
            // a thread that wakes up later waits at most one slice.
            self.th[t].local %= self.local_slice;
        }
        let local_due = !self.cpus[cpu].active.is_empty() && self.th[t].local >= self.local_slice;
        if self.round_done(t) || local_due {
            cx.resched(cpu);
            return;
        }
        let left = (self.slice(t) - self.th[t].used).max(0.0);
        let mut dt = (left / self.rating(cx, cpu)).ceil().max(1.0) as u64;
        if !self.cpus[cpu].active.is_empty() {
            // Round-robin only matters when another thread waits.
            dt = dt.min(self.local_slice - self.th[t].local);
        }
        let at = cx.now + SimTime(dt);
        if self.cpus[cpu].armed != Some(at) {
            self.cpus[cpu].armed = Some(at);
            cx.arm_timer(at, cpu as u64);
        }
    }

    /// Put a runnable thread of `cpu` into round-active (tail, or head if
    /// it has local slice left) or, if its round slice is used, into
    /// round-expired.
    fn place(&mut self, now: SimTime, t: TaskId, cpu: CpuId, head_if_slice_left: bool) {
        if self.round_done(t) {
            let slice = self.slice(t);
            let th = &mut self.th[t];
            let used = th.used;
            th.used = (th.used - slice).max(0.0);
            th.slice = None;
            th.local = 0;
            self.cpus[cpu].expired.push_back(t);
            self.note(
                now,
                cpu,
                RoundWhat::Expire {
                    task: t,
                    used_ns: used,
                },
            );
        } else if head_if_slice_left && self.th[t].local < self.local_slice {
            self.cpus[cpu].active.push_front(t);
        } else {
            self.th[t].local = 0;
            self.cpus[cpu].active.push_back(t);
        }
        self.queued_change(cpu, t, true);
    }

    /// Whether `q`'s queued threads may be moved by Step 1(i), and from
    /// which queues: `(active, expired)`.
    fn movable_queues(&self, q: CpuId) -> (bool, bool) {
        let c = &self.cpus[q];
        if c.idle {
            (false, false)
        } else if c.round == self.highest {
            (true, false)
        } else if self.highest >= 1 && c.round == self.highest - 1 {
            (true, true)
        } else {
            (false, false)
        }
    }

    /// Step 1(i): the thread to move to `p`, as `(task, from, from_expired)`.
    fn find_candidate(&self, cx: &Ctx, p: CpuId) -> Option<(TaskId, CpuId, bool)> {
        // Key: (kind, -(queued weight / rating), cpu); lower is better.
        let mut best: Option<((u8, f64, CpuId), TaskId, bool)> = None;
        // Only CPUs with queued threads can give one (ascending order, as
        // a scan of all CPUs would meet them).
        let words = crate::os::set_bits(&self.queued);
        for q in words {
            // A CPU that runs nothing is about to pick its queued threads
            // (a thread that has just arrived there by faster-first or a
            // swap, say): they are as good as running, and taking them back
            // would undo that move at the same instant.
            if q == p || !cx.online(q) || cx.current(q).is_none() {
                continue;
            }
            let (act, exp) = self.movable_queues(q);
            if !act && !exp {
                continue;
            }
            let c = &self.cpus[q];
            let same_round = c.round == self.highest;
            // The last queued thread of round-active that may run on p, and
            // the first of round-expired; each with its key's first part.
            // (The end of each queue is tried first: it nearly always fits.)
            let fits = |t: &&TaskId| cx.task(**t).affinity.contains(p);
            let from_act = act
                .then(|| {
                    c.active
                        .back()
                        .filter(fits)
                        .or_else(|| c.active.iter().rev().find(fits))
                })
                .flatten()
                .map(|&t| (if same_round { 0 } else { 2 }, t, false));
            let from_exp = exp
                .then(|| {
                    c.expired
                        .front()
                        .filter(fits)
                        .or_else(|| c.expired.iter().find(fits))
                })
                .flatten()
                .map(|&t| (1, t, true));
            // The pressure (queued weight over rating) only decides among
            // equal first parts: skip it when neither can beat the best.
            let beats = |kind: u8| best.as_ref().is_none_or(|b| kind <= b.0 .0);
            let wanted =
                from_act.is_some_and(|x| beats(x.0)) || from_exp.is_some_and(|x| beats(x.0));
            if !wanted {
                continue;
            }
            let queued = c.queued_w;
            let pressure = -(queued as f64 / self.rating(cx, q));
            for (kind, t, e) in from_act.into_iter().chain(from_exp) {
                let key = (kind, pressure, q);
                if best.as_ref().is_none_or(|b| key < b.0) {
                    best = Some((key, t, e));
                }
            }
        }
        best.map(|(k, t, e)| (t, k.2, e))
    }

    /// The under-utilisation swap (§4.3.4, Figure 6) for `p`, whose
    /// round-active is empty and for which Step 1(i) found nothing. Returns
    /// whether it swapped.
    fn try_swap(&mut self, cx: &mut Ctx, p: CpuId) -> bool {
        if self.cpus[p].expired.is_empty() {
            return false;
        }
        let rp = self.rating(cx, p);
        let round_p = self.cpus[p].round;
        // (round(s), rating, s, t1, t2); lower is better.
        let mut best: Option<(u64, f64, CpuId, TaskId, TaskId)> = None;
        for s in 0..self.cpus.len() {
            let c = &self.cpus[s];
            if s == p || !cx.online(s) || c.idle || c.round >= round_p {
                continue;
            }
            // (3): exactly one thread on s, and it is running.
            let Some(t1) = c.curr else { continue };
            if !c.active.is_empty() || !c.expired.is_empty() || c.incoming > 0 {
                continue;
            }
            if self.th[t1].dest.is_some() || !cx.task(t1).affinity.contains(p) {
                continue;
            }
            let rs = self.rating(cx, s);
            if rs >= rp {
                continue;
            }
            let Some(&t2) = self.cpus[p]
                .expired
                .iter()
                .find(|&&t| cx.task(t).affinity.contains(s))
            else {
                continue;
            };
            let key = (c.round, rs, s, t1, t2);
            if best.is_none_or(|b| (key.0, key.1, key.2) < (b.0, b.1, b.2)) {
                best = Some(key);
            }
        }
        let Some((round_s, _, s, t1, t2)) = best else {
            return false;
        };
        let now = cx.now;
        // T1: credit so that it can catch up to round(p) (its usage in
        // round(s) is kept, so the credit is exact).
        let w1 = self.th[t1].weight as f64 / NICE_0;
        let t1_slice = (1 + round_p - round_s) as f64 * w1 * self.unit;
        self.th[t1].slice = Some(t1_slice);
        self.th[t1].dest = Some(p);
        self.cpus[p].incoming += 1;
        self.set_home(t1, Some(p));
        cx.migrate(t1, p);
        // T2: from p's round-expired to s's round-active, in round(p) + 1.
        let pos = self.cpus[p]
            .expired
            .iter()
            .position(|&t| t == t2)
            .expect("found above");
        self.cpus[p].expired.remove(pos);
        self.queued_change(p, t2, false);
        self.set_home(t2, Some(s));
        self.th[t2].local = 0;
        self.cpus[s].active.push_back(t2);
        self.queued_change(s, t2, true);
        cx.migrate(t2, s);
        self.cpus[s].round = round_p + 1;
        self.reindex(s);
        self.bump_highest(round_p + 1);
        self.note(
            now,
            p,
            RoundWhat::Swap {
                t1,
                s,
                t2,
                round_s: round_p + 1,
                t1_slice_ns: t1_slice,
            },
        );
        true
    }

    /// Round balancing for `p`, whose round-active is empty (§4.3.3).
    /// Returns whether round-active may have something now (pick again).
    fn round_balance(&mut self, cx: &mut Ctx, p: CpuId) -> bool {
        let now = cx.now;
        // Step 1.
        if self.cpus[p].round == self.highest || self.cpus[p].expired.is_empty() {
            if let Some((t, q, from_expired)) = self.find_candidate(cx, p) {
                let c = &mut self.cpus[q];
                let queue = if from_expired {
                    &mut c.expired
                } else {
                    &mut c.active
                };
                let pos = queue
                    .iter()
                    .position(|&x| x == t)
                    .expect("candidate is queued");
                queue.remove(pos);
                self.queued_change(q, t, false);
                let h = self.highest;
                self.join(now, p, h);
                self.set_home(t, Some(p));
                self.th[t].local = 0;
                self.cpus[p].active.push_back(t);
                self.queued_change(p, t, true);
                // No cx.migrate: pick_next returns t at once and the engine
                // assigns it to p; a migrate request would flag p (idle
                // during the callback) for a second, spurious resched.
                self.note(
                    now,
                    p,
                    RoundWhat::Pull {
                        task: t,
                        from: q,
                        from_expired,
                    },
                );
                return true;
            }
            if self.underutil && self.try_swap(cx, p) {
                return true;
            }
        }
        // Step 2.
        let c = &mut self.cpus[p];
        std::mem::swap(&mut c.active, &mut c.expired);
        if c.active.is_empty() {
            if !c.idle {
                c.idle = true;
                c.round = 0;
                self.nidle += 1;
                self.reindex(p);
                self.note(now, p, RoundWhat::Idle);
            }
            return false;
        }
        c.round += 1;
        let r = c.round;
        self.reindex(p);
        self.bump_highest(r);
        self.note(now, p, RoundWhat::Advance { round: r });
        true
    }

    /// An idle CPU (if any) should run round balancing because `q` has
    /// queued threads that Step 1(i) may move: kick one.
    fn maybe_kick(&mut self, cx: &mut Ctx, q: CpuId) {
        if self.nidle == 0 {
            return;
        }
        let (act, exp) = self.movable_queues(q);
        let c = &self.cpus[q];
        let queued = c
            .active
            .iter()
            .filter(|_| act)
            .chain(c.expired.iter().filter(|_| exp));
        for &t in queued {
            let mut best: Option<(f64, CpuId)> = None;
            // Idle CPUs only, ascending: without faster-first the first
            // that qualifies wins.
            for i in self.idle_cpus() {
                if best.is_some() && !self.faster_first {
                    break;
                }
                let ci = &self.cpus[i];
                if i == q
                    || !ci.idle
                    || ci.incoming > 0
                    || cx.current(i).is_some()
                    || !cx.online(i)
                    || !cx.task(t).affinity.contains(i)
                {
                    continue;
                }
                let r = if self.faster_first {
                    -self.rating(cx, i)
                } else {
                    0.0
                };
                if best.is_none_or(|b| (r, i) < b) {
                    best = Some((r, i));
                }
            }
            if let Some((_, i)) = best {
                cx.resched(i);
                return;
            }
        }
    }
}

impl Scheduler for Dwrr {
    fn name(&self) -> &str {
        &self.name
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        t: TaskId,
        prev: Option<CpuId>,
        flags: EnqFlags,
    ) -> CpuId {
        let aff = &cx.task(t).affinity;
        let ok = |c: CpuId| aff.contains(c) && cx.online(c);
        // Faster-first (§4.2): the fastest idle CPU, ties the lowest id.
        if self.faster_first && matches!(flags, EnqFlags::New | EnqFlags::Wakeup) {
            let mut best: Option<(f64, CpuId)> = None;
            for c in self.idle_cpus() {
                let s = &self.cpus[c];
                if ok(c) && s.idle && s.incoming == 0 && cx.current(c).is_none() {
                    let key = (-self.rating(cx, c), c);
                    if best.is_none_or(|b| key < b) {
                        best = Some(key);
                    }
                }
            }
            if let Some((_, c)) = best {
                return c;
            }
        }
        // §4.3.3: the least loaded CPU among those idle or in round highest;
        // CHOICE: ties go to the CPU it last ran on (its caches), then the
        // lowest id.
        // Idle CPUs count as load 0; the busy ones of round highest come
        // from the index ordered by (load, id): the first allowed idle CPU
        // and the first allowed entry decide the least load.
        let idle_first = self.idle_cpus().find(|&c| ok(c));
        let busy_first = self
            .by_round
            .get(&self.highest)
            .and_then(|set| set.iter().find(|&&(_, c)| ok(c)).copied());
        let least = match (idle_first, busy_first) {
            (Some(_), _) => Some(0),
            (None, Some((l, _))) => Some(l),
            (None, None) => None,
        };
        if let Some(least) = least {
            if let Some(p) = prev.filter(|&p| ok(p)) {
                let s = &self.cpus[p];
                if s.idle && least == 0 || !s.idle && s.round == self.highest && s.load == least {
                    return p;
                }
            }
            let busy = busy_first.filter(|&(l, _)| l == least).map(|(_, c)| c);
            let idle = idle_first.filter(|_| least == 0);
            if let Some(c) = [idle, busy].into_iter().flatten().min() {
                return c;
            }
        }
        // Affinity allows none of those: the highest-round allowed CPU.
        let mut fallback: Option<(std::cmp::Reverse<u64>, u64, CpuId)> = None;
        for c in 0..self.cpus.len() {
            if ok(c) {
                let key = (std::cmp::Reverse(self.cpus[c].round), self.cpus[c].load, c);
                if fallback.is_none_or(|b| key < b) {
                    fallback = Some(key);
                }
            }
        }
        fallback.map_or(cx.task(t).cpu, |f| f.2)
    }

    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, flags: EnqFlags) {
        let now = cx.now;
        let weight = cx.task(t).weight as u64;
        if self.th_mut(t).home.is_none() {
            self.th[t].weight = weight;
        }
        // A pending migration ends here (normally at its destination).
        if let Some(d) = self.th[t].dest.take() {
            self.cpus[d].incoming -= 1;
            if d != cpu {
                // Diverted (its affinity changed meanwhile): the CPU that
                // waited for it must balance again.
                cx.resched(d);
            }
        }
        let h = self.highest;
        self.join(now, cpu, h);
        self.set_home(t, Some(cpu));
        if flags == EnqFlags::Preempted {
            // Back to the queue it ran from; spurious preemptions keep the
            // rest of the local slice.
            self.place(now, t, cpu, true);
        } else {
            // New, woken, moved: a fresh local slice at the tail.
            self.th[t].local = 0;
            self.place(now, t, cpu, false);
        }
        if self.cpus[cpu].curr.is_some() {
            // The local slice matters now that a thread waits.
            self.account(cx, cpu);
            self.check(cx, cpu);
            self.maybe_kick(cx, cpu);
        }
    }

    fn dequeue(&mut self, _cx: &mut Ctx, t: TaskId, _cpu: CpuId) {
        let Some(home) = self.th.get(t).and_then(|x| x.home) else {
            return;
        };
        let c = &mut self.cpus[home];
        let found = if let Some(i) = c.active.iter().position(|&x| x == t) {
            c.active.remove(i).is_some()
        } else if let Some(i) = c.expired.iter().position(|&x| x == t) {
            c.expired.remove(i).is_some()
        } else {
            false
        };
        if found {
            self.queued_change(home, t, false);
        }
        self.set_home(t, None);
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        loop {
            if let Some(t) = self.cpus[cpu].active.pop_front() {
                self.queued_change(cpu, t, false);
                let c = &mut self.cpus[cpu];
                c.curr = Some(t);
                c.exec_start = cx.now;
                return Some(t);
            }
            if self.cpus[cpu].incoming > 0 {
                // A thread is on its way (under-utilisation swap or
                // faster-first); round-active is not empty.
                return None;
            }
            // Round-active turned empty: round balancing.
            if !self.round_balance(cx, cpu) {
                return None;
            }
        }
    }

    fn balance(&mut self, cx: &mut Ctx, p: CpuId) {
        // Faster-first dynamic migration (§4.2, §5.3): an idle CPU takes the
        // thread running on the slowest slower CPU.
        if !self.faster_first || !self.cpus[p].idle || self.cpus[p].incoming > 0 {
            return;
        }
        let rp = self.rating(cx, p);
        let mut best: Option<(f64, CpuId, TaskId)> = None;
        for s in 0..self.cpus.len() {
            let Some(t) = self.cpus[s].curr else { continue };
            if s == p || self.th[t].dest.is_some() || !cx.task(t).affinity.contains(p) {
                continue;
            }
            let rs = self.rating(cx, s);
            if rs < rp && best.is_none_or(|b| (rs, s) < (b.0, b.1)) {
                best = Some((rs, s, t));
            }
        }
        let Some((_, s, t)) = best else { return };
        let now = cx.now;
        let round_s = self.cpus[s].round;
        self.join(now, p, round_s);
        self.th[t].dest = Some(p);
        self.cpus[p].incoming += 1;
        self.set_home(t, Some(p));
        cx.migrate(t, p);
        self.note(now, p, RoundWhat::FasterFirst { task: t, from: s });
    }

    fn running(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        let c = &mut self.cpus[cpu];
        debug_assert_eq!(c.curr, Some(t));
        c.curr = Some(t);
        c.exec_start = cx.now;
        if !c.tick_on {
            c.tick_on = true;
            cx.want_tick(cpu, true);
        }
        self.check(cx, cpu);
        self.maybe_kick(cx, cpu);
    }

    fn stopping(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, runnable: bool) {
        self.account(cx, cpu);
        let c = &mut self.cpus[cpu];
        c.curr = None;
        if c.armed.take().is_some() {
            cx.cancel_timer(cpu as u64);
        }
        if !runnable {
            // Blocked or exited: it leaves the CPU. A swap or faster-first
            // move that expected it is off; wake its destination so that it
            // balances again.
            if let Some(d) = self.th[t].dest.take() {
                self.cpus[d].incoming -= 1;
                cx.resched(d);
            }
            self.th[t].local = 0;
            self.set_home(t, None);
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: CpuId, t: TaskId) {
        // Scaled time follows the current rating (DVFS) within a tick.
        self.account(cx, cpu);
        self.check(cx, cpu);
        if self.cpus[cpu].curr == Some(t) && self.fam.is_away(t) {
            if let Some((original, home)) = self.fam.tick(cx, t, cpu) {
                // §5.2: restore the mask and move to the highest-round CPU of
                // the original type (ties: fewest queued threads, lowest id).
                cx.set_affinity(t, original);
                let dst = home.iter().copied().max_by_key(|&c| {
                    let s = &self.cpus[c];
                    (
                        s.round,
                        std::cmp::Reverse(s.active.len() + s.expired.len()),
                        std::cmp::Reverse(c),
                    )
                });
                if let Some(dst) = dst {
                    cx.migrate(t, dst);
                }
            }
        }
    }

    fn on_fault(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, feature: usize) -> bool {
        // §5.2: the affinity change makes the engine ask select_cpu, which
        // prefers idle and highest-round CPUs.
        self.fam.on_fault(cx, t, cpu, feature)
    }

    fn on_timer(&mut self, cx: &mut Ctx, token: u64) {
        let cpu = token as CpuId;
        self.cpus[cpu].armed = None;
        self.account(cx, cpu);
        self.check(cx, cpu);
    }

    fn reweight(&mut self, cx: &mut Ctx, t: TaskId, _old: u32) {
        if t >= self.th.len() {
            return;
        }
        let home = self.th[t].home;
        // A queued thread's weight counts in its CPU's queued weight.
        let queued_on = home.filter(|&h| {
            let c = &self.cpus[h];
            c.active.contains(&t) || c.expired.contains(&t)
        });
        if let Some(h) = queued_on {
            self.queued_change(h, t, false);
        }
        self.set_home(t, None);
        self.th[t].weight = cx.task(t).weight as u64;
        self.set_home(t, home);
        if let Some(h) = queued_on {
            self.queued_change(h, t, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::parse_spec;

    fn machine() -> Machine {
        let text = r#"
duration_s = 1
[machine.types.c]
capacity = 1024
[[machine.cpus]]
type = "c"
"#;
        let scn = crate::scenario::parse(text, "t", crate::scenario::Format::Toml, &[]).unwrap();
        scn.build(None, vec![]).unwrap().machine
    }

    #[test]
    fn params_are_checked() {
        let m = machine();
        let e = Dwrr::from_params(&parse_spec("a-dwrr[round_slice_ms=0]").unwrap(), &m)
            .err()
            .unwrap();
        assert!(
            e.starts_with("a-dwrr[round_slice_ms]: 0 is out of range"),
            "{e}"
        );
        let e = Dwrr::from_params(&parse_spec("dwrr[bogus=1]").unwrap(), &m)
            .err()
            .unwrap();
        assert!(e.contains("known: round_slice_ms, local_slice_ms"), "{e}");
        let d = Dwrr::from_params(&parse_spec("faster-first").unwrap(), &m).unwrap();
        assert!(d.faster_first && d.underutil && d.rating == RatingSrc::Machine);
        let d = Dwrr::from_params(&parse_spec("dwrr").unwrap(), &m).unwrap();
        assert!(!d.faster_first && !d.underutil && d.rating == RatingSrc::Unit);
        assert_eq!(d.unit, 30e6);
        assert_eq!(d.local_slice, 10_000_000);
    }
}
