//! What a policy sees and acts through during one callback: the context
//! ([`Ctx`]) with its read-only view of the engine, the [`Request`]s a policy
//! records on it, why a task is being enqueued ([`EnqFlags`]), and the
//! observables agents sample ([`Observation`]).

use super::governors::UtilChannel;
use super::scx;
use crate::hw::{CpuId, Machine};
use crate::os::{SchedFlags, Task, TaskId};
use crate::time::SimTime;
use rand::RngCore;

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

/// The state of the CPUs a policy schedules that it reads through its
/// context: the host's CPUs, or a virtual machine's vCPUs for its guest
/// scheduler. The engine keeps one for the host and one per VM and lends it
/// whole, so that a context costs one pointer for all of it (a context is
/// built for every callback).
#[derive(Clone, Debug, Default)]
pub struct CpuView {
    /// The task running on each CPU.
    pub(crate) current: Vec<Option<TaskId>>,
    /// Whether each CPU is online.
    pub(crate) online: Vec<bool>,
    /// Current frequency of each frequency domain, MHz.
    pub(crate) domain_mhz: Vec<u32>,
    /// Each CPU's rating, kept by the engine (recomputed at P-state changes).
    pub(crate) ratings: Vec<f64>,
    /// The scenario's cpusets (none for a guest).
    pub(crate) cpusets: Vec<crate::os::Cpuset>,
    /// Per task: what a host scheduler sees of a vCPU (empty without VMs,
    /// and for a guest).
    pub(crate) vcpus: Vec<Option<crate::os::VcpuInfo>>,
    /// Fusion levels of the scenario's `[dynamic]` section (empty without,
    /// and for a guest).
    pub(crate) fusion_levels: Vec<usize>,
}

/// What a policy sees and acts through during one callback.
///
/// The engine builds one for every callback, so it is kept cheap to build:
/// the CPUs' state is lent as one [`CpuView`], and the engine's other
/// arrays as `&Vec` (one pointer each) rather than as slices (a pointer and
/// a length each, the length loaded from the vector), 13 words in all (see
/// docs/performance.md).
pub struct Ctx<'a> {
    /// Current simulated time.
    pub now: SimTime,
    /// The machine description.
    pub machine: &'a Machine,
    pub(crate) tasks: &'a Vec<Task>,
    /// The CPUs' state, lent whole (see [`CpuView`]).
    pub(crate) v: &'a CpuView,
    pub(crate) progs: &'a Vec<crate::workload::Program>,
    pub(crate) reqs: &'a mut Vec<Request>,
    pub(crate) rng: &'a mut rand_pcg::Pcg64Mcg,
    pub(crate) obs: &'a Vec<Observation>,
    /// The dispatch queues, for a scheduler that uses them (`scx.rs`).
    pub(crate) dsq: Option<&'a mut dyn scx::DsqOps>,
    /// The util_est channel of the host's scheduler and governor (`None`
    /// for agents and guest schedulers: a VM's guest sees no host governor).
    pub(crate) util: Option<&'a mut UtilChannel>,
    /// The host CPUs' tick wishes and reschedule flags, lent to the host
    /// scheduler only (`None` for every other context): see
    /// [`Ctx::want_tick`] and [`Ctx::resched`].
    pub(crate) flags: Option<&'a mut SchedFlags>,
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
        self.v.current[cpu]
    }
    /// Whether `cpu` is online.
    #[inline]
    pub fn online(&self, cpu: CpuId) -> bool {
        self.v.online[cpu]
    }
    /// Current frequency of `cpu`, MHz.
    #[inline]
    pub fn cpu_mhz(&self, cpu: CpuId) -> u32 {
        self.v.domain_mhz[self.machine.cpus[cpu].domain]
    }
    /// Current frequency of a domain, MHz.
    #[inline]
    pub fn domain_mhz(&self, domain: usize) -> u32 {
        self.v.domain_mhz[domain]
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
        self.v.ratings[cpu]
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
        self.v.vcpus.get(t).and_then(|v| v.as_ref())
    }
    /// The scenario's cpusets.
    pub fn cpusets(&self) -> &[crate::os::Cpuset] {
        &self.v.cpusets
    }
    /// Runnable plus running tasks assigned to the CPUs of cpuset `i` (its
    /// ready-queue length as `/proc` would let a daemon estimate it).
    pub fn cpuset_load(&self, i: usize) -> usize {
        let set = &self.v.cpusets[i].cpus;
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
    /// Whether the run's cpufreq governor is `schedutil` (Linux enables
    /// Energy Aware Scheduling only then). Always `false` for a guest
    /// scheduler or an agent.
    pub fn governor_is_schedutil(&self) -> bool {
        self.util.as_ref().is_some_and(|u| u.schedutil)
    }
    /// The util_est sum of `cpu`'s runqueue as the scheduler last published
    /// it (0 when it publishes none, or outside the host's scheduler and
    /// governor).
    pub fn cpu_util_est(&self, cpu: CpuId) -> u32 {
        self.util
            .as_ref()
            .and_then(|u| u.est.get(cpu).copied())
            .unwrap_or(0)
    }
    /// Publish the util_est sum of `cpu`'s runqueue for the governor (no
    /// effect outside the host's scheduler and governor).
    pub fn set_cpu_util_est(&mut self, cpu: CpuId, v: u32) {
        if let Some(e) = self.util.as_mut().and_then(|u| u.est.get_mut(cpu)) {
            *e = v;
        }
    }
    /// Publish the utilisation clamps (minimum, maximum) of `cpu`'s runqueue
    /// for the governor (no effect outside the host's scheduler and governor).
    pub fn set_cpu_uclamp(&mut self, cpu: CpuId, v: (u32, u32)) {
        if let Some(u) = self.util.as_mut() {
            if let Some(e) = u.uclamp.get_mut(cpu) {
                *e = Some(v);
                u.uclamp_on = true;
            }
        }
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
    ///
    /// For the host scheduler, a reschedule recorded before any other
    /// request of the callback flags the CPU in place, which is what
    /// applying it first after the callback would do (a wake-up that
    /// tickles every idle CPU of a large machine records hundreds).
    #[inline]
    pub fn resched(&mut self, cpu: CpuId) {
        if self.reqs.is_empty() {
            if let Some(f) = self.flags.as_deref_mut() {
                if f.flag_resched(cpu) {
                    return;
                }
            }
        }
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
    ///
    /// The host scheduler states its wish on almost every callback, and it
    /// usually arms nothing; such a wish, when it is the callback's first
    /// request, is set in place at once, which is what applying it first
    /// after the callback would do. Any other wish is recorded as a request.
    #[inline]
    pub fn want_tick(&mut self, cpu: CpuId, on: bool) {
        if self.reqs.is_empty() {
            if let Some(f) = self.flags.as_deref_mut() {
                let busy = self.v.current.get(cpu).is_some_and(Option::is_some);
                if f.wish_in_place(cpu, on, busy) {
                    return;
                }
            }
        }
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
        &self.v.fusion_levels
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
