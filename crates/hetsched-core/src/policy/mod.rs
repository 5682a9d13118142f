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
pub mod credit;
pub mod dwrr;
pub mod edf;
pub mod eevdf;
pub mod fair;
pub mod fam;
pub mod governors;
pub mod patel;
pub mod registry;
pub mod scx;
pub mod scx_simple;

pub use registry::{
    make_agent, make_governor, make_scheduler, registry, About, Kind, ParamDef, PolicyInfo,
};

use crate::hw::{CpuId, Machine};
use crate::os::{CpuSet, Task, TaskId};
use crate::time::SimTime;
use rand::RngCore;
use std::collections::BTreeMap;

/// Why a task is being enqueued (or placed).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EnqFlags {
    /// First time runnable (program start; Linux fork).
    New,
    /// Woken from sleep or a barrier.
    Wakeup,
    /// Preempted on its CPU, still runnable.
    Preempted,
    /// Preempted while running and moved to another CPU by a migrate request.
    Migrated,
    /// Moved because its affinity no longer allows its CPU.
    Affinity,
}

impl EnqFlags {
    /// Lower-case name (used by Python policies).
    pub fn name(self) -> &'static str {
        match self {
            EnqFlags::New => "new",
            EnqFlags::Wakeup => "wakeup",
            EnqFlags::Preempted => "preempted",
            EnqFlags::Migrated => "migrated",
            EnqFlags::Affinity => "affinity",
        }
    }
}

/// A request recorded by a policy, applied by the engine after the callback.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Preempt whatever runs on the CPU (or wake it if idle) and pick again.
    Resched(CpuId),
    /// Reassign a task to a CPU (queued: bookkeeping; running: preempt and
    /// enqueue there).
    Migrate {
        /// The task.
        task: TaskId,
        /// Its new CPU.
        cpu: CpuId,
    },
    /// Change a task's allowed CPUs.
    SetAffinity {
        /// The task.
        task: TaskId,
        /// Its allowed CPUs (not empty).
        cpus: Vec<CpuId>,
    },
    /// Change a task's nice value.
    SetNice {
        /// The task.
        task: TaskId,
        /// Nice value, -20..=19.
        nice: i32,
    },
    /// Start or stop scheduler ticks on a CPU while it is busy.
    WantTick {
        /// The CPU.
        cpu: CpuId,
        /// Ticks while busy (`true`) or none.
        on: bool,
    },
    /// Call `on_timer(token)` at the given time; re-arming replaces.
    ArmTimer {
        /// When it fires.
        at: SimTime,
        /// The policy's name for the timer, handed back to `on_timer`.
        token: u64,
    },
    /// Cancel a timer.
    CancelTimer {
        /// The timer's token.
        token: u64,
    },
    /// Set a frequency domain's P-state (MHz).
    SetFrequency {
        /// Index of the frequency domain.
        domain: usize,
        /// One of the domain's P-states, MHz.
        mhz: u32,
    },
    /// Reconfigure dynamic processors (offline, online, fuse, split) with a
    /// mechanism (`None`: the scenario's default). See `docs/dynamic.md`.
    Reconfigure {
        /// What to do, to which CPUs.
        op: crate::hw::dynamic::ReconfigOp,
        /// How (`None`: the scenario's default mechanism).
        mechanism: Option<crate::hw::reconfig::Mechanism>,
    },
    /// Add a warning to the run's warnings (repeats are dropped).
    Warn(String),
    /// Abort the run with this message (a Python policy raised, say).
    Fail(String),
}

/// Per-process observables over an agent's last sampling interval, as a
/// daemon reads them on Linux (`/proc`, `perf`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Observation {
    /// The task (a process of the program, as `/proc/PID` names it).
    pub task: TaskId,
    /// Its program's name (the process's `comm`).
    pub program: String,
    /// Its state now: `runnable`, `running`, `sleeping`, … (`TaskState::name`).
    pub state: &'static str,
    /// The CPU it runs or last ran on.
    pub cpu: CpuId,
    /// Its nice value.
    pub nice: i32,
    /// Its allowed CPUs.
    pub affinity: Vec<CpuId>,
    /// Fraction of the interval spent running.
    pub cpu_util: f64,
    /// Instructions per cycle over the interval.
    pub ipc: f64,
    /// Cache misses per cache reference.
    pub miss_ratio: f64,
    /// Cache misses per instruction.
    pub misses_per_instr: f64,
    /// Context switches per second of run time.
    pub csw_per_s: f64,
    /// Migrations per second of run time.
    pub migrations_per_s: f64,
    /// Fraction of the interval spent runnable but waiting.
    pub wait_frac: f64,
    /// Total run time so far, seconds.
    pub runtime_s: f64,
}

/// What a policy sees and acts through during one callback.
pub struct Ctx<'a> {
    /// Current simulated time.
    pub now: SimTime,
    /// The machine description.
    pub machine: &'a Machine,
    pub(crate) tasks: &'a [Task],
    pub(crate) current: &'a [Option<TaskId>],
    pub(crate) online: &'a [bool],
    pub(crate) domain_mhz: &'a [u32],
    pub(crate) progs: &'a [crate::workload::Program],
    pub(crate) cpusets: &'a [crate::os::Cpuset],
    /// Each CPU's rating, kept by the engine (recomputed at P-state changes).
    pub(crate) ratings: &'a [f64],
    pub(crate) reqs: &'a mut Vec<Request>,
    pub(crate) rng: &'a mut rand_pcg::Pcg64Mcg,
    pub(crate) obs: &'a [Observation],
    /// Per task: what a host scheduler sees of a vCPU (empty without VMs).
    pub(crate) vcpus: &'a [Option<crate::os::VcpuInfo>],
    /// Fusion levels of the scenario's `[dynamic]` section (empty without).
    pub(crate) fusion_levels: &'a [usize],
    /// The dispatch queues, for a scheduler that uses them (`scx.rs`).
    pub(crate) dsq: Option<&'a mut dyn scx::DsqOps>,
}

impl<'a> Ctx<'a> {
    /// Number of CPUs.
    #[inline]
    pub fn ncpus(&self) -> usize {
        self.machine.cpus.len()
    }
    /// Number of tasks.
    #[inline]
    pub fn ntasks(&self) -> usize {
        self.tasks.len()
    }
    /// A task, read-only.
    #[inline]
    pub fn task(&self, t: TaskId) -> &Task {
        &self.tasks[t]
    }
    /// The task running on `cpu`, if any.
    #[inline]
    pub fn current(&self, cpu: CpuId) -> Option<TaskId> {
        self.current[cpu]
    }
    /// Whether `cpu` is online.
    #[inline]
    pub fn online(&self, cpu: CpuId) -> bool {
        self.online[cpu]
    }
    /// Current frequency of `cpu`, MHz.
    #[inline]
    pub fn cpu_mhz(&self, cpu: CpuId) -> u32 {
        self.domain_mhz[self.machine.cpus[cpu].domain]
    }
    /// Current frequency of a domain, MHz.
    #[inline]
    pub fn domain_mhz(&self, domain: usize) -> u32 {
        self.domain_mhz[domain]
    }
    /// Current capacity of `cpu` out of 1024: the type's capacity scaled by
    /// the current frequency and the duty cycle (class-independent). Unlike
    /// the kernel's `capacity_of()`, which is frequency-invariant, this is the
    /// capacity the CPU delivers at its present P-state.
    pub fn capacity(&self, cpu: CpuId) -> u32 {
        let s = self.machine.compute_speed(cpu, 0, self.cpu_mhz(cpu), false);
        let t = self.machine.ty(cpu);
        // compute_speed includes the class-0 speedup; divide it out.
        (s / t.speedup(0) * 1024.0).round() as u32
    }
    /// Performance rating of `cpu` now (Li et al. §4.1): its type's rating
    /// (or capacity) scaled by its current frequency and duty cycle,
    /// normalised to the slowest CPU of the machine (rating 1.0).
    pub fn rating(&self, cpu: CpuId) -> f64 {
        self.ratings[cpu]
    }
    /// The ISA feature the task's current phase needs, if any.
    pub fn task_feature(&self, t: TaskId) -> Option<usize> {
        let task = &self.tasks[t];
        self.progs[task.program]
            .params
            .get(task.param as usize)
            .and_then(|p| p.feature)
    }
    /// If task `t` is a vCPU: its VM, index, weight and classes.
    #[inline]
    pub fn vcpu(&self, t: TaskId) -> Option<&crate::os::VcpuInfo> {
        self.vcpus.get(t).and_then(|v| v.as_ref())
    }
    /// The scenario's cpusets.
    pub fn cpusets(&self) -> &[crate::os::Cpuset] {
        self.cpusets
    }
    /// Runnable plus running tasks assigned to the CPUs of cpuset `i` (its
    /// ready-queue length as `/proc` would let a daemon estimate it).
    pub fn cpuset_load(&self, i: usize) -> usize {
        let set = &self.cpusets[i].cpus;
        self.tasks
            .iter()
            .filter(|t| {
                matches!(
                    t.state,
                    crate::os::TaskState::Runnable | crate::os::TaskState::Running
                )
            })
            .filter(|t| set.binary_search(&t.cpu).is_ok())
            .count()
    }
    /// Whether `cpu` has ISA feature `feature`.
    pub fn has_feature(&self, cpu: CpuId, feature: usize) -> bool {
        self.machine.ty(cpu).features & (1u64 << feature) != 0
    }
    /// A deterministic random number from the run's seeded generator.
    pub fn random_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }
    /// Observables (agents only; empty for other components).
    pub fn observations(&self) -> &[Observation] {
        self.obs
    }
    /// Runnable plus running tasks (instantaneous load average).
    pub fn load_avg(&self) -> f64 {
        self.tasks
            .iter()
            .filter(|t| {
                matches!(
                    t.state,
                    crate::os::TaskState::Runnable | crate::os::TaskState::Running
                )
            })
            .count() as f64
    }

    /// Request: preempt `cpu` (or wake it if idle) and pick again.
    #[inline]
    pub fn resched(&mut self, cpu: CpuId) {
        self.reqs.push(Request::Resched(cpu));
    }
    /// Request: reassign `task` to `cpu`.
    #[inline]
    pub fn migrate(&mut self, task: TaskId, cpu: CpuId) {
        self.reqs.push(Request::Migrate { task, cpu });
    }
    /// Request: change a task's allowed CPUs.
    pub fn set_affinity(&mut self, task: TaskId, cpus: Vec<CpuId>) {
        self.reqs.push(Request::SetAffinity { task, cpus });
    }
    /// Request: change a task's nice value.
    pub fn set_nice(&mut self, task: TaskId, nice: i32) {
        self.reqs.push(Request::SetNice { task, nice });
    }
    /// Request: ticks on `cpu` while busy (`on`), or none.
    #[inline]
    pub fn want_tick(&mut self, cpu: CpuId, on: bool) {
        self.reqs.push(Request::WantTick { cpu, on });
    }
    /// Request: a timer callback at `at` with `token`.
    pub fn arm_timer(&mut self, at: SimTime, token: u64) {
        self.reqs.push(Request::ArmTimer { at, token });
    }
    /// Request: cancel the timer `token`.
    pub fn cancel_timer(&mut self, token: u64) {
        self.reqs.push(Request::CancelTimer { token });
    }
    /// Request: set a frequency domain's P-state.
    pub fn set_frequency(&mut self, domain: usize, mhz: u32) {
        self.reqs.push(Request::SetFrequency { domain, mhz });
    }
    /// Request: abort the run with an error message.
    pub fn fail(&mut self, msg: String) {
        self.reqs.push(Request::Fail(msg));
    }
    /// The fusion levels (CPUs per fused object) the scenario configures;
    /// empty without a `[dynamic]` section.
    pub fn fusion_levels(&self) -> &[usize] {
        self.fusion_levels
    }
    /// Request: add a warning to the run's warnings (once per message).
    pub fn warn(&mut self, msg: String) {
        self.reqs.push(Request::Warn(msg));
    }
    /// Request: reconfigure dynamic processors; the engine validates it (an
    /// offline cpu cannot go offline again, ...) and reports completion
    /// through [`Scheduler::on_reconfigured`].
    pub fn reconfigure(
        &mut self,
        op: crate::hw::dynamic::ReconfigOp,
        mechanism: Option<crate::hw::reconfig::Mechanism>,
    ) {
        self.reqs.push(Request::Reconfigure { op, mechanism });
    }
}

/// The set bits of a bit mask stored as 64-bit words, in ascending order
/// (bit `b` of word `i` is member `i × 64 + b`).
pub(crate) fn set_bits(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(i, &w)| {
        let mut w = w;
        std::iter::from_fn(move || {
            if w == 0 {
                return None;
            }
            let b = w.trailing_zeros() as usize;
            w &= w - 1;
            Some(i * 64 + b)
        })
    })
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

/// A policy name with parameters, parsed from `"name[key=value, ...]"`.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySpec {
    /// The registry name.
    pub name: String,
    /// The parameters given, by name, as text.
    pub params: BTreeMap<String, String>,
}

/// Parse `"cfs[min_granularity_ms=4, latency_ms=24]"`.
pub fn parse_spec(s: &str) -> Result<PolicySpec, String> {
    let s = s.trim();
    let (name, rest) = match s.find('[') {
        None => (s, None),
        Some(i) => {
            if !s.ends_with(']') {
                return Err(format!("\"{s}\": missing closing ']' after the parameters"));
            }
            (&s[..i], Some(&s[i + 1..s.len() - 1]))
        }
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("\"{s}\": empty policy name"));
    }
    let mut params = BTreeMap::new();
    if let Some(rest) = rest {
        for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                return Err(format!(
                    "\"{s}\": parameter \"{part}\" is not of the form key=value"
                ));
            };
            let k = k.trim().to_string();
            if params.insert(k.clone(), v.trim().to_string()).is_some() {
                return Err(format!("\"{s}\": parameter \"{k}\" given twice"));
            }
        }
    }
    Ok(PolicySpec {
        name: name.to_string(),
        params,
    })
}

/// Parameters of one policy instance, checked against its definitions.
pub struct Params<'a> {
    policy: &'a str,
    given: &'a BTreeMap<String, String>,
    defs: &'a [ParamDef],
}

impl<'a> Params<'a> {
    /// Check that every given parameter is defined.
    pub fn new(
        policy: &'a str,
        given: &'a BTreeMap<String, String>,
        defs: &'a [ParamDef],
    ) -> Result<Self, String> {
        for k in given.keys() {
            if !defs.iter().any(|d| d.name == k) {
                let known: Vec<_> = defs.iter().map(|d| d.name).collect();
                return Err(if known.is_empty() {
                    format!("policy \"{policy}\" takes no parameters, got \"{k}\"")
                } else {
                    format!(
                        "policy \"{policy}\" has no parameter \"{k}\"; known: {}",
                        known.join(", ")
                    )
                });
            }
        }
        Ok(Params {
            policy,
            given,
            defs,
        })
    }
    fn raw(&self, name: &str) -> &str {
        match self.given.get(name) {
            Some(v) => v,
            None => self
                .defs
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.default)
                .unwrap_or(""),
        }
    }
    /// A number parameter within `[lo, hi]`.
    pub fn f64(&self, name: &str, lo: f64, hi: f64) -> Result<f64, String> {
        let raw = self.raw(name);
        let v: f64 = raw
            .parse()
            .map_err(|_| format!("{}[{name}]: \"{raw}\" is not a number", self.policy))?;
        if !(v.is_finite() && v >= lo && v <= hi) {
            return Err(format!(
                "{}[{name}]: {v} is out of range; allowed {lo} to {hi}",
                self.policy
            ));
        }
        Ok(v)
    }
    /// A boolean parameter (`true`/`false`/`1`/`0`).
    pub fn bool(&self, name: &str) -> Result<bool, String> {
        match self.raw(name) {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            other => Err(format!(
                "{}[{name}]: \"{other}\" is not a boolean; allowed true or false",
                self.policy
            )),
        }
    }
    /// A parameter from a fixed set of words.
    pub fn choice(&self, name: &str, allowed: &[&str]) -> Result<String, String> {
        let v = self.raw(name);
        if allowed.contains(&v) {
            Ok(v.to_string())
        } else {
            Err(format!(
                "{}[{name}]: \"{v}\" is not allowed; allowed: {}",
                self.policy,
                allowed.join(", ")
            ))
        }
    }
    /// Whether the parameter was given explicitly.
    pub fn given(&self, name: &str) -> bool {
        self.given.contains_key(name)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing() {
        let s = parse_spec("cfs[min_granularity_ms=4, latency_ms = 24]").unwrap();
        assert_eq!(s.name, "cfs");
        assert_eq!(s.params["min_granularity_ms"], "4");
        assert_eq!(s.params["latency_ms"], "24");
        assert_eq!(parse_spec("pinned").unwrap().params.len(), 0);
        assert!(parse_spec("cfs[x=1")
            .unwrap_err()
            .contains("missing closing"));
        assert!(parse_spec("cfs[x]").unwrap_err().contains("key=value"));
        assert!(parse_spec("cfs[x=1,x=2]").unwrap_err().contains("twice"));
    }
}
