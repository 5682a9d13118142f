//! Policies: the three kinds of component and their registry.
//!
//! * [`Scheduler`] — the dispatch level, shaped like Linux `sched_ext` ops so
//!   kernel people recognise it (`select_cpu`, `enqueue`, `dequeue`,
//!   `pick_next` ≈ `dispatch`, `running`, `stopping`, `tick`, `balance`).
//! * [`Governor`] — the frequency-domain level (cpufreq governors).
//! * [`Agent`] — a user-level daemon that samples per-process observables
//!   and acts only through affinity, nice and userspace frequencies.
//!
//! A policy never mutates engine state. It reads the engine through a
//! [`Ctx`] and records [`Request`]s on it; the engine validates and applies
//! them after the callback returns, and reports an invalid one as an error
//! naming the policy and the request.
//!
//! Protocol of the scheduler callbacks (the engine guarantees it):
//! * a task becomes runnable (program start, wake-up): `select_cpu`, then
//!   `enqueue(cpu, New|Wakeup)`; an idle target CPU is then rescheduled;
//! * a CPU reschedules (its task blocked, or a [`Request::Resched`]): if a
//!   task was running and is still runnable, `stopping(runnable = true)` and
//!   `enqueue(task.cpu, Preempted|Migrated)`; then `pick_next(cpu)`, which
//!   removes the task it returns from the policy's queues; if it returns
//!   `None`, `balance(cpu)` and `pick_next(cpu)` once more;
//! * a running task blocks, sleeps or exits: `stopping(runnable = false)`;
//! * a task's affinity no longer contains its CPU: a queued task is
//!   `dequeue`d, then `select_cpu` and `enqueue(Affinity)`;
//! * ticks arrive only on busy CPUs that asked for them ([`Ctx::want_tick`]).

pub mod cfs;
pub mod chameleon;
pub mod classes;
pub mod credit;
mod ctx;
pub mod dwrr;
pub mod edf;
pub mod eevdf;
pub mod fair;
pub mod fam;
pub mod governors;
mod params;
pub mod patel;
pub mod registry;
pub mod scx;
pub mod scx_central;
pub mod scx_simple;

pub use ctx::{CpuView, Ctx, EnqFlags, Observation, Request};
pub use params::{parse_spec, switched_on, About, ParamDef, Params, PolicySpec};
pub use registry::{make_agent, make_governor, make_scheduler, registry, Kind, PolicyInfo};

use crate::hw::{CpuId, Machine};
use crate::os::{CpuSet, TaskId};
use crate::time::SimTime;

/// A task's load tracking as `/proc/PID/sched` shows the kernel's: its
/// PELT averages as of its last update and its util_est EWMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLoad {
    /// `se.avg.util_avg`, 0–1024.
    pub util_avg: u32,
    /// `se.avg.runnable_avg`, 0–1024.
    pub runnable_avg: u32,
    /// `se.avg.util_est` (`None` with util_est off).
    pub util_est: Option<u32>,
}

/// The dispatch-level scheduling policy (see the module doc for the protocol).
pub trait Scheduler {
    /// Registry name of the policy, with parameters if any.
    fn name(&self) -> &str;
    /// Called once before the first event.
    fn init(&mut self, _cx: &mut Ctx) {}
    /// Choose the CPU for a task that becomes runnable. Must be in its affinity
    /// and online.
    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: TaskId,
        prev: Option<CpuId>,
        flags: EnqFlags,
    ) -> CpuId;
    /// Queue a runnable task for `cpu`.
    fn enqueue(&mut self, cx: &mut Ctx, task: TaskId, cpu: CpuId, flags: EnqFlags);
    /// Remove a queued task (its affinity changed).
    fn dequeue(&mut self, cx: &mut Ctx, task: TaskId, cpu: CpuId);
    /// Choose the next task for an idle CPU and remove it from the queues.
    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId>;
    /// `cpu` is about to go idle: pull work if the policy balances.
    fn balance(&mut self, _cx: &mut Ctx, _cpu: CpuId) {}
    /// Whether the engine, when `pick_next` found nothing for an idle CPU,
    /// calls `balance` and then `pick_next` once more (the default). A
    /// policy answers `false` only if its `balance` does nothing and a
    /// `pick_next` that finds nothing changes nothing and requests nothing,
    /// so that asking again could only find nothing again: the engine then
    /// skips both calls. (When a wake-up sends every idle CPU of a large
    /// machine to schedule, as Xen's Credit does, those calls are most of
    /// the work.)
    fn pick_again_after_balance(&self) -> bool {
        true
    }
    /// A hint, before the engine handles an event: the next event will
    /// likely touch `task` (woken, or running on `cpu`) and, for an event on
    /// a CPU, what that CPU picks next. A policy may ask the processor to
    /// bring its own records of them into the caches (`crate::prefetch`),
    /// and may return the task `cpu` would pick next if it knows it cheaply,
    /// for the engine to read ahead too. It changes nothing; the default
    /// does nothing and returns `None`.
    fn read_ahead(&self, _task: Option<TaskId>, _cpu: Option<CpuId>) -> Option<TaskId> {
        None
    }
    /// `task` starts running on `cpu`.
    fn running(&mut self, _cx: &mut Ctx, _task: TaskId, _cpu: CpuId) {}
    /// `task` stops running on `cpu`; `runnable` if it was preempted.
    fn stopping(&mut self, _cx: &mut Ctx, _task: TaskId, _cpu: CpuId, _runnable: bool) {}
    /// A scheduler tick on a busy CPU that asked for ticks.
    fn tick(&mut self, _cx: &mut Ctx, _cpu: CpuId, _task: TaskId) {}
    /// A timer armed with [`Ctx::arm_timer`] fired.
    fn on_timer(&mut self, _cx: &mut Ctx, _token: u64) {}
    /// A task's weight changed (nice).
    fn reweight(&mut self, _cx: &mut Ctx, _task: TaskId, _old_weight: u32) {}
    /// `task` exited (after its `stopping`, if it was running): called once,
    /// as sched_ext's `ops.exit_task`, so that a policy can drop what it
    /// still keeps for it without scanning for exited tasks. It makes no
    /// requests (the engine applies none after it).
    fn task_dead(&mut self, _cx: &mut Ctx, _task: TaskId) {}
    /// A task needs ISA feature `feature` that `cpu` lacks. Return `true` if
    /// the policy handled the fault (e.g. by changing the task's affinity);
    /// `false` gives the Linux outcome, SIGILL: the task is killed.
    fn on_fault(&mut self, _cx: &mut Ctx, _task: TaskId, _cpu: CpuId, _feature: usize) -> bool {
        false
    }
    /// A reconfiguration (requested with [`Ctx::reconfigure`] or scripted)
    /// completed: its cpus are now in or out of service.
    fn on_reconfigured(&mut self, _cx: &mut Ctx, _info: &crate::hw::dynamic::Reconfigured) {}
    /// Whether the scheduler uses sched_ext's dispatch queues ([`scx`]):
    /// then the engine keeps the queues, runs a CPU's local DSQ, the global
    /// DSQ and [`Scheduler::dispatch`], and never calls `pick_next` or
    /// `balance`.
    fn uses_dsqs(&self) -> bool {
        false
    }
    /// `task`'s load tracking, where the policy keeps the kernel's
    /// ([`TaskLoad`]). Reported in the results' task table.
    fn task_load(&self, _task: TaskId) -> Option<TaskLoad> {
        None
    }
    /// `SCX_OPS_ENQ_LAST`: a task whose slice ended with nothing else to run
    /// goes through `enqueue` instead of running on (DSQ schedulers only).
    fn enq_last(&self) -> bool {
        false
    }
    /// `ops.dispatch(cpu, prev)`: `cpu`'s local DSQ and the global DSQ are
    /// empty; move or insert tasks to its local DSQ (DSQ schedulers only).
    fn dispatch(&mut self, _cx: &mut Ctx, _cpu: CpuId, _prev: Option<TaskId>) {}
}

/// A cpufreq governor: decides the P-state of each frequency domain.
pub trait Governor {
    /// Registry name.
    fn name(&self) -> &str;
    /// Called once at start; set initial frequencies here.
    fn init(&mut self, cx: &mut Ctx);
    /// Sampling period, if the governor samples.
    fn period(&self) -> Option<SimTime> {
        None
    }
    /// Periodic sample. `busy_ns[cpu]` is each CPU's cumulative busy time.
    fn sample(&mut self, _cx: &mut Ctx, _busy_ns: &[u64]) {}
}

/// A user-level agent: samples observables periodically and acts through
/// affinity, nice and userspace frequencies only.
pub trait Agent {
    /// Registry name.
    fn name(&self) -> &str;
    /// Sampling period.
    fn period(&self) -> SimTime;
    /// Time of the first sample (default: one period after the start).
    fn first_sample(&self) -> SimTime {
        self.period()
    }
    /// Called once at start.
    fn init(&mut self, _cx: &mut Ctx) {}
    /// Periodic sample; `cx.observations()` holds the observables.
    fn sample(&mut self, cx: &mut Ctx);
}

/// Validate every CPU id of a list against the machine.
pub fn check_cpus(cpus: &[CpuId], m: &Machine) -> Result<CpuSet, String> {
    for &c in cpus {
        if c >= m.ncpus() {
            return Err(format!(
                "cpu {c} does not exist (machine has {} cpus: 0-{})",
                m.ncpus(),
                m.ncpus() - 1
            ));
        }
    }
    if cpus.is_empty() {
        return Err("empty cpu list".into());
    }
    Ok(CpuSet::from_cpus(cpus, m.ncpus()))
}
