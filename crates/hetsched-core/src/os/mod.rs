//! Operating-system objects: tasks (threads), CPU sets, nice values and
//! weights, per-task counters.
//!
//! A task is a schedulable thread. The engine owns every task's state and
//! counters; policies read them through the context and never write them.

use crate::hw::CpuId;
use crate::time::SimTime;
use crate::workload::Op;
use std::sync::Arc;

pub mod dl;
pub mod rt;

/// Index of a task.
pub type TaskId = usize;

/// Linux's nice-to-weight table (`sched_prio_to_weight`, kernel/sched/core.c):
/// each nice step changes the CPU share by about 10% (factor 1.25).
pub const NICE_TO_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, // -20 .. -16
    29154, 23254, 18705, 14949, 11916, // -15 .. -11
    9548, 7620, 6100, 4904, 3906, // -10 .. -6
    3121, 2501, 1991, 1586, 1277, // -5 .. -1
    1024, 820, 655, 526, 423, // 0 .. 4
    335, 272, 215, 172, 137, // 5 .. 9
    110, 87, 70, 56, 45, // 10 .. 14
    36, 29, 23, 18, 15, // 15 .. 19
];

/// Weight of a nice value (clamped to -20..=19; inputs are validated earlier).
#[inline]
pub fn nice_to_weight(nice: i32) -> u32 {
    NICE_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// Fair-class weight of a SCHED_IDLE task, whatever its nice value
/// (`WEIGHT_IDLEPRIO`, kernel/sched/sched.h).
pub const WEIGHT_IDLEPRIO: u32 = 3;

/// A task's scheduling policy (`sched_setscheduler(2)`): which class runs it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum SchedPolicy {
    /// SCHED_OTHER (SCHED_NORMAL): the fair class.
    #[default]
    Other,
    /// SCHED_BATCH: the fair class, without wake-up preemption.
    Batch,
    /// SCHED_IDLE: the fair class at weight [`WEIGHT_IDLEPRIO`].
    Idle,
    /// SCHED_FIFO: the rt class, runs until it blocks or a higher priority
    /// preempts it.
    Fifo,
    /// SCHED_RR: the rt class with a round-robin timeslice.
    Rr,
    /// SCHED_DEADLINE: the deadline class (EDF with CBS).
    Deadline,
}

impl SchedPolicy {
    /// The name a scenario uses.
    pub fn name(self) -> &'static str {
        match self {
            SchedPolicy::Other => "other",
            SchedPolicy::Batch => "batch",
            SchedPolicy::Idle => "idle",
            SchedPolicy::Fifo => "fifo",
            SchedPolicy::Rr => "rr",
            SchedPolicy::Deadline => "deadline",
        }
    }
    /// Every policy, in the order of the names above.
    pub const ALL: [SchedPolicy; 6] = [
        SchedPolicy::Other,
        SchedPolicy::Batch,
        SchedPolicy::Idle,
        SchedPolicy::Fifo,
        SchedPolicy::Rr,
        SchedPolicy::Deadline,
    ];
    /// The policy of a name.
    pub fn from_name(s: &str) -> Option<SchedPolicy> {
        SchedPolicy::ALL.into_iter().find(|p| p.name() == s)
    }
    /// The policies' part of the fair class's wake-up preemption test
    /// (`check_preempt_wakeup_fair`, kernel/sched/fair.c) for `waking`
    /// queued where `curr` runs: `Some(true)` preempts at once (a SCHED_IDLE
    /// task is preempted by any other), `Some(false)` never (SCHED_BATCH
    /// and SCHED_IDLE tasks do not preempt at wake-up: the tick does), `None`
    /// leaves it to the scheduler's own test.
    #[inline]
    pub fn fair_wakeup_rule(waking: SchedPolicy, curr: SchedPolicy) -> Option<bool> {
        if curr == SchedPolicy::Idle && waking != SchedPolicy::Idle {
            Some(true)
        } else if waking != SchedPolicy::Other {
            Some(false)
        } else {
            None
        }
    }
    /// Whether the rt class runs it (SCHED_FIFO, SCHED_RR).
    #[inline]
    pub fn is_rt(self) -> bool {
        matches!(self, SchedPolicy::Fifo | SchedPolicy::Rr)
    }
    /// Whether a class above fair runs it (rt or deadline).
    #[inline]
    pub fn above_fair(self) -> bool {
        matches!(
            self,
            SchedPolicy::Fifo | SchedPolicy::Rr | SchedPolicy::Deadline
        )
    }
}

/// A task's scheduling attributes (what `sched_setattr(2)` sets).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedAttr {
    /// The policy.
    pub policy: SchedPolicy,
    /// rt priority, 1..=99 (higher runs first); 0 for the other policies.
    pub rt_prio: u8,
    /// SCHED_DEADLINE runtime (budget per period), ns.
    pub dl_runtime: u64,
    /// SCHED_DEADLINE relative deadline, ns.
    pub dl_deadline: u64,
    /// SCHED_DEADLINE period, ns.
    pub dl_period: u64,
}

/// Settings of the classes above fair (the scenario's `[os]` table), ns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassConfig {
    /// `sched_rt_runtime_us`: deadline admission limit per `rt_period`.
    pub rt_runtime: u64,
    /// `sched_rt_period_us`.
    pub rt_period: u64,
    /// `sched_rr_timeslice_ms`.
    pub rr_timeslice: u64,
    /// Whether each CPU has a fair server.
    pub fair_server: bool,
    /// Fair server runtime per period.
    pub fs_runtime: u64,
    /// Fair server period.
    pub fs_period: u64,
}

impl Default for ClassConfig {
    fn default() -> Self {
        ClassConfig {
            rt_runtime: 950_000_000,
            rt_period: 1_000_000_000,
            rr_timeslice: 100_000_000,
            fair_server: true,
            fs_runtime: 50_000_000,
            fs_period: 1_000_000_000,
        }
    }
}

/// A set of CPUs (an affinity mask or a cpuset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuSet {
    /// Every CPU of the machine.
    All,
    /// A bit mask over CPU ids.
    Mask(Arc<[u64]>),
}

impl CpuSet {
    /// A set from a list of CPU ids.
    pub fn from_cpus(cpus: &[CpuId], ncpus: usize) -> CpuSet {
        let mut words = vec![0u64; ncpus.div_ceil(64).max(1)];
        for &c in cpus {
            words[c / 64] |= 1u64 << (c % 64);
        }
        CpuSet::Mask(words.into())
    }
    /// Whether `cpu` is in the set. O(1).
    #[inline]
    pub fn contains(&self, cpu: CpuId) -> bool {
        match self {
            CpuSet::All => true,
            CpuSet::Mask(w) => w
                .get(cpu / 64)
                .is_some_and(|x| x & (1u64 << (cpu % 64)) != 0),
        }
    }
    /// The CPU ids in the set, ascending. O(ncpus).
    pub fn to_vec(&self, ncpus: usize) -> Vec<CpuId> {
        (0..ncpus).filter(|&c| self.contains(c)).collect()
    }
    /// Whether no CPU below `ncpus` is in the set.
    pub fn is_empty_within(&self, ncpus: usize) -> bool {
        !(0..ncpus).any(|c| self.contains(c))
    }
}

/// Scheduling state of a task.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// Its program has not started yet.
    NotStarted,
    /// Ready to run, queued in the scheduler.
    Runnable,
    /// On a CPU.
    Running,
    /// Sleeping (timed sleep or I/O).
    Sleeping,
    /// Blocked at a barrier.
    Blocked,
    /// Finished (or killed).
    Exited,
}

impl TaskState {
    /// Lower-case name used in results and in the Python API.
    pub fn name(self) -> &'static str {
        match self {
            TaskState::NotStarted => "not_started",
            TaskState::Runnable => "runnable",
            TaskState::Running => "running",
            TaskState::Sleeping => "sleeping",
            TaskState::Blocked => "blocked",
            TaskState::Exited => "exited",
        }
    }
}

/// Run time per CPU type, ns (index = type id): the first
/// [`TypeTimes::INLINE`] types in place, the others (machines with more
/// types) on the heap. In place, a task's run time by type is in its own
/// record's first cache lines: the engine adds to it at every event of a
/// running task, and at 100 000 tasks a separate allocation per task was a
/// cache miss per event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeTimes {
    first: [u64; TypeTimes::INLINE],
    rest: Vec<u64>,
    len: usize,
}

impl TypeTimes {
    /// Types kept in place.
    pub const INLINE: usize = 3;

    /// Zero for each of `types` CPU types.
    pub fn new(types: usize) -> TypeTimes {
        TypeTimes {
            first: [0; TypeTimes::INLINE],
            rest: vec![0; types.saturating_sub(TypeTimes::INLINE)],
            len: types,
        }
    }
    /// How many types.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are no types.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Run time on type `ty`; `None` beyond the types.
    #[inline]
    pub fn get(&self, ty: usize) -> Option<u64> {
        if ty >= self.len {
            None
        } else if ty < TypeTimes::INLINE {
            Some(self.first[ty])
        } else {
            self.rest.get(ty - TypeTimes::INLINE).copied()
        }
    }
    /// Add `ns` to type `ty`, one of the types (every CPU's type is one of
    /// the machine's).
    #[inline]
    pub fn add(&mut self, ty: usize, ns: u64) {
        debug_assert!(ty < self.len, "CPU type {ty} of {} types", self.len);
        if ty < TypeTimes::INLINE {
            self.first[ty] += ns;
        } else {
            self.rest[ty - TypeTimes::INLINE] += ns;
        }
    }
}

/// Counters the engine keeps per task, as `perf` and `/proc` would show them.
///
/// `repr(C)`, in declaration order: those the engine adds to at every event
/// of a running task come first, next to the task's other per-event fields
/// (see [`Task`]).
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct Counters {
    /// Time on a CPU.
    pub run_ns: u64,
    /// Time spent refilling caches after migrations (and in fault traps).
    pub stall_ns: u64,
    /// Reference work completed (reference nanoseconds).
    pub work_done: f64,
    /// Instructions retired.
    pub instructions: f64,
    /// Core cycles while running.
    pub cycles: f64,
    /// Last-level cache references.
    pub cache_refs: f64,
    /// Last-level cache misses.
    pub cache_misses: f64,
    /// Scaled CPU time (Li et al. §4.3.2): run time × the CPU's rating
    /// (normalised to the slowest CPU), ns.
    pub scaled_run_ns: f64,
    /// Time runnable but waiting for a CPU.
    pub wait_ns: u64,
    /// Time sleeping or blocked.
    pub sleep_ns: u64,
    /// Voluntary context switches (blocked, slept, exited).
    pub csw_voluntary: u64,
    /// Involuntary context switches (preempted).
    pub csw_involuntary: u64,
    /// Times it started running on a CPU other than the one it last ran on.
    pub migrations: u64,
    /// Run time per CPU type (index = type id).
    pub run_ns_by_type: TypeTimes,
    /// Reference work handed out by the program so far.
    pub work_assigned: f64,
    /// Completed periodic jobs.
    pub jobs: u64,
    /// Periodic jobs that finished after their deadline.
    pub deadline_misses: u64,
    /// Worst response time of a periodic job.
    pub max_response_ns: u64,
    /// ISA faults taken.
    pub faults: u64,
    /// rt/deadline classes: time runnable but throttled (a SCHED_DEADLINE
    /// task out of budget until its replenishment), ns.
    pub throttled_ns: u64,
    /// SCHED_DEADLINE: scheduling deadlines passed before the task received
    /// its runtime (CBS periods in which it was runnable and got less than
    /// its budget by its deadline).
    pub dl_misses: u64,
}

/// A thread.
///
/// `repr(C)`, in declaration order: the fields an event of the task reads or
/// writes (its state, placement, progress and counters) come first and span
/// about five cache lines; those read at a program's start and end, by the
/// periodic and deadline paths or only in the results follow. With 100 000
/// tasks almost every event finds its task's record out of the caches, and
/// the compiler's own order (by alignment) spread the per-event fields over
/// the whole 480-byte record.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Task {
    /// Scheduling state.
    pub state: TaskState,
    /// Generation of its wake-up event (stale ones are dropped).
    pub wake_gen: u32,
    /// Load weight from [`NICE_TO_WEIGHT`] ([`WEIGHT_IDLEPRIO`] for SCHED_IDLE).
    pub weight: u32,
    /// Next operation.
    pub pc: u32,
    /// Completed passes over `ops`.
    pub iter: u32,
    /// How many times `ops` runs.
    pub loops: u32,
    /// Index of the current compute parameters in the program's table.
    pub param: u32,
    /// Nice value, -20..=19.
    pub nice: i32,
    /// Since when it is in `state`.
    pub state_since: SimTime,
    /// The CPU it is assigned to: running on, queued for, or last ran on.
    pub cpu: CpuId,
    /// Index of its program.
    pub program: usize,
    /// Remaining reference work of the current compute phase.
    pub remaining: f64,
    /// No progress before this time (cache refill after a migration, trap).
    pub stall_until: SimTime,
    /// Stall owed at the next start on a CPU (a fault trap), ns.
    pub pending_stall: u64,
    /// I/O sleep owed after the current work-queue chunk.
    pub pending_io: u64,
    /// Workload class of the current phase (interned id).
    pub class: usize,
    /// The CPU it last ran on, if it has run.
    pub last_ran: Option<CpuId>,
    /// First time it became runnable.
    pub start: Option<SimTime>,
    /// Allowed CPUs.
    pub affinity: CpuSet,
    /// The thread's operations (shared between identical threads).
    pub ops: Arc<[Op]>,
    /// Scheduling policy and its parameters.
    pub sched: SchedAttr,
    /// Custom fair-class slice, ns (the program's `slice_ms`: what
    /// `sched_setattr()`'s `sched_runtime` sets on a SCHED_OTHER task);
    /// `None`: the scheduler's base slice. (`eevdf` reads it at every
    /// enqueue.)
    pub slice_ns: Option<u64>,
    /// Counters.
    pub c: Counters,
    /// Its index.
    pub id: TaskId,
    /// Thread index within the program.
    pub thread: u32,
    /// Utilisation clamps requested for it (the program's `uclamp_min` and
    /// `uclamp_max`, what `sched_setattr()` sets); `None`: none requested.
    pub uclamp: Option<Uclamp>,
    /// Release time of the current periodic job.
    pub release: SimTime,
    /// Absolute deadline of the current periodic job.
    pub deadline: Option<SimTime>,
    /// Time it exited.
    pub end: Option<SimTime>,
    /// Why it ended, if not normally (e.g. a SIGILL outcome).
    pub kill_reason: Option<String>,
}

/// A task's utilisation clamps (`uclamp_min`, `uclamp_max`), in capacity
/// units (0 to 1024, `min <= max`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Uclamp {
    /// Minimum: a performance request.
    pub min: u32,
    /// Maximum: a performance cap.
    pub max: u32,
}

impl Task {
    /// The fair-class weight of this task at nice `nice`: SCHED_IDLE tasks
    /// weigh [`WEIGHT_IDLEPRIO`] whatever their nice value (`set_load_weight`,
    /// kernel/sched/core.c).
    #[inline]
    pub fn weight_at(&self, nice: i32) -> u32 {
        if self.sched.policy == SchedPolicy::Idle {
            WEIGHT_IDLEPRIO
        } else {
            nice_to_weight(nice)
        }
    }
}

/// A validated cpuset.
#[derive(Clone, Debug, PartialEq)]
pub struct Cpuset {
    /// Name.
    pub name: String,
    /// CPUs, ascending.
    pub cpus: Vec<usize>,
    /// Fixed frequency, if any.
    pub mhz: Option<u32>,
}

/// What a host scheduler sees of a vCPU task ([`crate::policy::Ctx::vcpu`]).
#[derive(Clone, Debug, PartialEq)]
pub struct VcpuInfo {
    /// Index of its VM.
    pub vm: usize,
    /// Its index within the VM.
    pub index: u32,
    /// vCPUs of the VM.
    pub nvcpus: u32,
    /// Credit weight of the VM.
    pub weight: u32,
    /// Whether the VM is in the high priority class.
    pub high_priority: bool,
    /// Whether the guest is asymmetry-aware.
    pub aware: bool,
    /// vCPUs the aware guest treats as fast (its first ones).
    pub fast_vcpus: u32,
    /// Host task ids of the VM's vCPUs, by index.
    pub siblings: std::sync::Arc<[TaskId]>,
}

/// The set bits of a bit mask stored as 64-bit words, in ascending order
/// (bit `b` of word `i` is member `i × 64 + b`).
pub(crate) fn set_bits(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(i, &w)| word_bits(i, w))
}

/// The set bits of word `i` of a bit mask (members `i × 64 + b`), in
/// ascending order.
pub(crate) fn word_bits(i: usize, mut w: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if w == 0 {
            return None;
        }
        let b = w.trailing_zeros() as usize;
        w &= w - 1;
        Some(i * 64 + b)
    })
}

/// A CPU's scheduler-tick state: whether its host scheduler wants ticks
/// while it runs a task, and whether a tick is armed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TickState {
    /// Ticks wanted while busy.
    pub(crate) wanted: bool,
    /// A tick event is pending.
    pub(crate) armed: bool,
}

/// The engine's per-CPU scheduling flags that the host scheduler's context
/// may set in place, where applying a request after the callback would do
/// exactly the same (`Ctx::want_tick`, `Ctx::resched`): each CPU's tick
/// state, and the CPUs flagged for a reschedule, in the order they were
/// flagged (the order the engine serves them).
#[derive(Clone, Debug, Default)]
pub(crate) struct SchedFlags {
    /// Per CPU: its tick state.
    pub(crate) ticks: Vec<TickState>,
    /// Per CPU: flagged for a reschedule.
    pub(crate) need_resched: Vec<bool>,
    /// The flagged CPUs, in the order they were flagged.
    pub(crate) resched_list: Vec<CpuId>,
}

impl SchedFlags {
    /// Flags for `n` CPUs: no ticks, nothing to reschedule.
    pub(crate) fn new(n: usize) -> SchedFlags {
        SchedFlags {
            ticks: vec![TickState::default(); n],
            need_resched: vec![false; n],
            resched_list: Vec::new(),
        }
    }

    /// Set `cpu`'s tick wish to `on` if that arms no tick (`busy`: `cpu`
    /// runs a task): off, or the CPU idle, or a tick already armed. False,
    /// changing nothing, if it would arm one (or `cpu` does not exist).
    #[inline]
    pub(crate) fn wish_in_place(&mut self, cpu: CpuId, on: bool, busy: bool) -> bool {
        match self.ticks.get_mut(cpu) {
            Some(c) if !on || !busy || c.armed => {
                c.wanted = on;
                true
            }
            _ => false,
        }
    }

    /// Flag `cpu` for a reschedule (once until it is served). False,
    /// changing nothing, if `cpu` does not exist.
    #[inline]
    pub(crate) fn flag_resched(&mut self, cpu: CpuId) -> bool {
        match self.need_resched.get_mut(cpu) {
            Some(f) => {
                if !*f {
                    *f = true;
                    self.resched_list.push(cpu);
                }
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TypeTimes;

    #[test]
    fn run_time_by_type_is_kept_in_place_and_beyond() {
        // Two types: both in place.
        let mut two = TypeTimes::new(2);
        two.add(1, 5);
        two.add(1, 2);
        assert_eq!(
            (two.len(), two.get(0), two.get(1), two.get(2)),
            (2, Some(0), Some(7), None)
        );
        // Six types: three in place, three on the heap, each its own.
        let mut six = TypeTimes::new(6);
        for ty in 0..6 {
            six.add(ty, 10 * ty as u64 + 1);
        }
        six.add(4, 100);
        let got: Vec<_> = (0..7).map(|ty| six.get(ty)).collect();
        let want = [
            Some(1),
            Some(11),
            Some(21),
            Some(31),
            Some(141),
            Some(51),
            None,
        ];
        assert_eq!(got, want);
        assert!(TypeTimes::new(0).is_empty() && TypeTimes::new(0).get(0).is_none());
    }
}
