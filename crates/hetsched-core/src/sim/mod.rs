//! The discrete-event engine.
//!
//! The engine owns time, tasks, CPUs, progress, counters and hardware state;
//! policies own their queues and decisions and act only through requests
//! recorded on a [`Ctx`] (see [`crate::policy`]). Every request is validated
//! here, and an invalid one ends the run with an error naming the policy and
//! the request.
//!
//! Events are few and meaningful: a compute phase completes, a sleep ends, a
//! program starts, a policy timer fires, a scheduler tick arrives (only on busy
//! CPUs that asked for ticks: the kernel is tickless), a frequency transition
//! lands, a governor or agent samples. Progress is exact: whenever a running
//! task's speed changes (frequency, SMT sibling, phase), its completion event
//! is re-planned, and stale events are dropped by generation counters.
//! Energy is integrated exactly: power is constant between events.

mod classes;
pub mod queue;
mod setup;
pub mod wakelat;

pub use setup::{VmRow, VmSetup};

use crate::error::SimError;
use crate::hw::speed::{Moment, Work};
use crate::hw::{CpuId, Machine};
use crate::os::{CpuSet, Task, TaskId, TaskState};
use crate::policy::{Agent, Ctx, EnqFlags, Governor, Observation, Request, Scheduler};
use crate::time::SimTime;
use crate::trace::TraceEvent;
use crate::workload::{Op, Program};
use queue::{EventClass, EventQueue};
use rand::distributions::{Distribution, Uniform};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;

/// The engine's internal results: the error boxed, so that a result is one
/// word (or two) returned in registers on the hot paths, where the unboxed
/// error (about 56 bytes) made every call return its result through memory.
pub(crate) type Res<T> = Result<T, Box<SimError>>;

/// Payload of an event.
#[derive(Copy, Clone, Debug)]
enum Ev {
    Complete {
        cpu: u32,
        gen: u32,
    },
    Wake {
        task: u32,
        gen: u32,
    },
    ProgramStart {
        prog: u32,
    },
    Tick {
        cpu: u32,
        gen: u32,
    },
    Timer {
        token: u64,
        gen: u32,
    },
    FreqApply {
        domain: u32,
        gen: u32,
    },
    GovSample,
    AgentSample {
        idx: u32,
    },
    Dyn(dynamic::DynEv),
    Slice {
        cpu: u32,
        gen: u32,
    },
    /// The wall-time end of a `run_for` phase (`sync.rs`).
    RunEnd {
        task: u32,
        gen: u32,
    },
    Class {
        kind: u8,
        id: u32,
        gen: u32,
    },
    End,
}

/// Per-CPU dynamic state.
#[derive(Clone, Debug, Default)]
struct CpuRt {
    last_sync: SimTime,
    run_since: SimTime,
    rate: f64,
    power: f64,
    energy: f64,
    comp_gen: u32,
    tick_gen: u32,
    ticks: u64,
    busy_ns: u64,
    /// The last busy rate and power computed for this CPU, and what they were
    /// computed from: program and phase parameters, frequency and whether an
    /// SMT sibling was busy. The machine does not change during a run, so the
    /// same key gives the same numbers (used only without dynamic
    /// processors, whose speeds change).
    rate_key: Option<(usize, u32, u32, bool)>,
    rate_val: (f64, f64),
    /// Idle power at the frequency `idle_key` (MHz).
    idle_key: Option<u32>,
    idle_val: f64,
}

/// Who issued the requests being applied (for error messages).
#[derive(Copy, Clone, Debug)]
enum Src {
    Sched,
    Gov,
    Agent(usize),
}

/// Everything a run needs, built from a scenario by [`crate::scenario`].
pub struct Setup {
    /// The machine.
    pub machine: Machine,
    /// Every thread of every program.
    pub tasks: Vec<Task>,
    /// The programs.
    pub programs: Vec<Program>,
    /// The scheduler.
    pub scheduler: Box<dyn Scheduler>,
    /// The cpufreq governor.
    pub governor: Box<dyn Governor>,
    /// User-level agents.
    pub agents: Vec<Box<dyn Agent>>,
    /// Simulated-time limit.
    pub duration: SimTime,
    /// Seed of the run's random number generator.
    pub seed: u64,
    /// End as soon as every program finished.
    pub stop_when_done: bool,
    /// Cpusets.
    pub cpusets: Vec<crate::os::Cpuset>,
    /// Virtual machines.
    pub vms: Vec<crate::sim::VmSetup>,
    /// Dynamic processors (the scenario's `[dynamic]` section), if any.
    pub dynamic: Option<crate::hw::dynamic::DynConfig>,
    /// Settings of the rt and deadline classes (`classes.rs`).
    pub classes: crate::os::ClassConfig,
}

/// Options of one run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Keep every trace event (for Perfetto and JSONL output).
    pub trace: bool,
    /// Run the invariant checker after every event.
    pub check: bool,
}

/// Threads a program start steps between two looks at the wall clock (a
/// Ctrl-C check when `CHECK_WALL` has passed): waking a million threads at
/// one instant takes about a second.
const START_CHUNK: usize = 4096;
/// Events between two progress/interrupt callbacks at most.
const CHECK_EVENTS: u64 = 1 << 16;
/// Events between two reads of the wall clock.
const CLOCK_EVENTS: u64 = 1 << 8;
/// Wall time between two progress/interrupt callbacks at most.
const CHECK_WALL: std::time::Duration = std::time::Duration::from_millis(50);
/// Events at one simulated instant after which a run is declared stuck.
const STALL_EVENTS: u64 = 1_000_000;
/// The bytes of a task's record an event reads or writes: those before its
/// first cold field (see [`Task`]'s layout).
const HOT_TASK_BYTES: usize = std::mem::offset_of!(Task, id);

/// Progress callback: `(sim_now_s, sim_end_s)`; an `Err` stops the run at
/// that instant, which then ends normally with partial results
/// ([`Engine::interrupted`] says when and why). It
/// is called every 1 % of simulated time and also every `CHECK_EVENTS`
/// events or `CHECK_WALL` of wall time, so that an interrupt is noticed even
/// when simulated time does not advance.
pub type Progress<'p> = &'p mut dyn FnMut(f64, f64) -> Result<(), String>;

/// An interrupted run: the progress callback returned an error (Ctrl-C).
#[derive(Clone, Debug)]
pub struct Interrupt {
    /// Simulated time at which the run stopped.
    pub at: SimTime,
    /// What the progress callback said.
    pub why: String,
}

/// Agent snapshot of one task's counters.
#[derive(Clone, Copy, Debug, Default)]
struct Snap {
    run: u64,
    wait: u64,
    instr: f64,
    cycles: f64,
    refs: f64,
    misses: f64,
    csw: u64,
    mig: u64,
}

/// The simulator state for one run.
pub struct Engine {
    /// The machine.
    pub m: Machine,
    /// All tasks.
    pub tasks: Vec<Task>,
    /// All programs.
    pub progs: Vec<Program>,
    cpus: Vec<CpuRt>,
    /// Per CPU: the host scheduler's tick wish, whether a tick is armed,
    /// and whether a reschedule is flagged (with the flagged CPUs in order).
    flags: crate::os::SchedFlags,
    /// What the host's policies read of the CPUs: current tasks, online
    /// CPUs, domain frequencies, ratings, cpusets, vCPUs, fusion levels.
    hv: crate::policy::CpuView,
    dom_gen: Vec<u32>,
    q: EventQueue<Ev>,
    /// Current time.
    pub now: SimTime,
    end: SimTime,
    sched: Box<dyn Scheduler>,
    gov: Box<dyn Governor>,
    agents: Vec<Box<dyn Agent>>,
    agent_snap: Vec<Vec<Snap>>,
    agent_last: Vec<SimTime>,
    reqs: Vec<Request>,
    src: Src,
    rng: Pcg64Mcg,
    timers: BTreeMap<u64, u32>,
    timer_gen: u32,
    /// Wake-up latencies per task (metrics reads them).
    pub wake_lat: wakelat::WakeLat,
    opts: RunOptions,
    started: bool,
    /// Trace events (only with `RunOptions::trace`).
    pub trace: Vec<TraceEvent>,
    hash: u64,
    /// Events handled (stale ones excluded).
    pub events: u64,
    /// Warnings produced during the run.
    pub warnings: Vec<String>,
    programs_done: usize,
    stop_when_done: bool,
    last_energy: f64,
    max_rate: f64,
    seed: u64,
    pending_mhz: Vec<u32>,
    spare: Vec<Request>,
    /// The CPU whose `pick_next`/`balance` is running: work placed on it then
    /// is picked by that very call and needs no further reschedule.
    picking: Option<CpuId>,
    /// Sum of the CPUs' power now, W (kept incrementally).
    total_power: f64,
    /// Power drawn whatever the load (platform and uncore idle), W.
    base_w: f64,
    /// Shared voltage planes; `None` when each domain is its own plane.
    planes: Option<Box<planes::Planes>>,
    /// Highest total power (CPUs + platform) seen at the end of an event.
    pub peak_power_w: f64,
    /// Virtual machines (`vm.rs`); empty when the scenario has none.
    vm: vm::VmState,
    /// Dynamic processors: offline CPUs, fused objects, proxies (`dynamic.rs`).
    dynm: Option<Box<dynamic::DynState>>,
    /// Per CPU: whether its speed depends on its SMT siblings (a type with
    /// an SMT factor other than 1 or a program with one, and siblings), so
    /// that a change of its
    /// busy state must refresh them. The machine does not change in a run.
    smt_shared: Vec<bool>,
    /// Whether any compute phase of any program needs an ISA feature (if
    /// none does, no phase can fault).
    any_feature: bool,
    /// Dispatch queues, for a scheduler that uses them (`dsq.rs`).
    dsq: Option<Box<dsq::DsqState>>,
    /// Idle-while-runnable accounting (`idle_wait.rs`).
    iw: idle_wait::IdleWait,
    /// Set when the progress callback stopped the run.
    interrupted: Option<Interrupt>,
    /// Wall time between two progress/interrupt callbacks at most
    /// ([`CHECK_WALL`] unless [`Engine::set_check_wall`] changed it).
    check_wall: std::time::Duration,
    /// A program start still stepping its threads (program, next thread
    /// index): a start of more than [`START_CHUNK`] threads is done in
    /// chunks, between which the run loop may take a Ctrl-C.
    starting: Option<(usize, usize)>,
    /// The jitter sampler of the last jitter drawn, with its half-width:
    /// `gen_range(-j..=j)` on floats builds this same sampler
    /// (`Uniform::new_inclusive`, a division and a rounding loop) and draws
    /// from it once; keeping it while `j` stays the same draws the same
    /// values from the same random numbers, without building it per draw.
    jitter_dist: Option<(f64, Uniform<f64>)>,
    /// The util_est channel between the host scheduler and the governor.
    util: crate::policy::governors::UtilChannel,
    /// Synchronisation objects and fork state (`sync.rs`).
    sync: sync::SyncState,
    /// The rt and deadline classes (`classes.rs`); `None` when no task is
    /// rt or deadline, and then they cost nothing.
    cls: Option<Box<classes::Classes>>,
}

/// The observations lent to every context but an agent's sample.
const NO_OBS: &Vec<Observation> = &Vec::new();

/// Whose context [`Engine::ctx`] builds.
#[derive(Copy, Clone, Debug)]
enum CtxFor {
    /// The governor (or the host scheduler's `init`): the machine, with the
    /// dispatch queues if the scheduler uses them.
    Host,
    /// The host scheduler: as `Host`, and its tick wishes are set in place
    /// (`Ctx::want_tick`).
    Sched,
    /// An agent: the machine and the observations it samples.
    Agent,
    /// The guest scheduler of VM `k`: the VM's vCPUs.
    Guest(usize),
}

/// The policies of a run, borrowed beside a context (see [`Engine::ctx`]).
/// In a guest context `sched` is the VM's guest scheduler.
struct Policies<'a> {
    sched: &'a mut Box<dyn Scheduler>,
    gov: &'a mut Box<dyn Governor>,
    agents: &'a mut [Box<dyn Agent>],
}

pub mod dsq;
pub mod dynamic;
mod idle_wait;
mod planes;
mod sync;
mod vm;

const HASH_K: u64 = 0x517c_c1b7_2722_0a95;

/// `x.ceil() as u64`, without the library call that `ceil` is on a baseline
/// x86-64 target. Exact for every `f64`: below 2^53 the integer part is
/// exact and compared; from 2^53 on every `f64` is an integer; NaN and
/// negative values give 0 and infinity `u64::MAX`, as the cast does.
#[inline]
fn ceil_u64(x: f64) -> u64 {
    let q = x as u64;
    if (q as f64) < x {
        q.saturating_add(1)
    } else {
        q
    }
}

/// `x.round() as u64` (halves away from zero), without the library call.
/// Exact for every `f64`: the fraction `x - trunc(x)` is computed exactly,
/// and negative values and NaN give 0 as the cast does.
#[inline]
fn round_u64(x: f64) -> u64 {
    let q = x as u64;
    if x - q as f64 >= 0.5 {
        q.saturating_add(1)
    } else {
        q
    }
}

impl Engine {
    /// Prepare a run.
    pub fn new(s: Setup, opts: RunOptions) -> Engine {
        let n = s.machine.ncpus();
        let dom_mhz: Vec<u32> = s
            .machine
            .domains
            .iter()
            .map(|d| s.machine.types[d.ty].fmax())
            .collect();
        let mut max_rate: f64 = 0.0;
        for c in 0..n {
            let t = s.machine.ty(c);
            let best = t.class_speedup.iter().copied().fold(1.0f64, f64::max);
            max_rate =
                max_rate.max(s.machine.compute_speed(c, 0, t.fmax(), false) / t.speedup(0) * best);
        }
        let dynm = s.dynamic.map(|d| Box::new(dynamic::DynState::new(d, n)));
        if let Some(d) = &dynm {
            max_rate *= d.max_speed();
        }
        let nagents = s.agents.len();
        let nd = s.machine.domains.len();
        let (vm, vcpus) = vm::VmState::new(s.vms, &s.programs, s.tasks.len());
        let dsq = s
            .scheduler
            .uses_dsqs()
            .then(|| Box::new(dsq::DsqState::new(n, s.tasks.len())));
        let util = crate::policy::governors::UtilChannel::new(
            n,
            crate::policy::governors::is_schedutil(s.governor.name()),
        );
        let sync = sync::SyncState::new(&s.tasks, &s.programs);
        let cls = classes::Classes::build(s.classes, &s.tasks, &s.machine);
        let planes = planes::Planes::new(&s.machine, &dom_mhz);
        let base_w = s.machine.constant_power_w();
        let mut e = Engine {
            sync,
            cls,
            util,
            cpus: vec![CpuRt::default(); n],
            flags: crate::os::SchedFlags::new(n),
            hv: crate::policy::CpuView {
                current: vec![None; n],
                online: vec![true; n],
                domain_mhz: dom_mhz,
                ratings: vec![1.0; n],
                cpusets: s.cpusets,
                vcpus,
                fusion_levels: dynm.as_deref().map_or(Vec::new(), |d| d.fusion_levels()),
            },
            dom_gen: vec![0; nd],
            q: EventQueue::new(),
            now: SimTime::ZERO,
            end: s.duration,
            sched: s.scheduler,
            gov: s.governor,
            agents: s.agents,
            agent_snap: vec![Vec::new(); nagents],
            agent_last: vec![SimTime::ZERO; nagents],
            reqs: Vec::new(),
            src: Src::Sched,
            rng: Pcg64Mcg::seed_from_u64(s.seed),
            timers: BTreeMap::new(),
            timer_gen: 0,
            wake_lat: wakelat::WakeLat::default(),
            opts,
            started: false,
            trace: Vec::new(),
            hash: 0xcbf2_9ce4_8422_2325 ^ s.seed,
            events: 0,
            warnings: Vec::new(),
            programs_done: 0,
            stop_when_done: s.stop_when_done,
            last_energy: 0.0,
            max_rate,
            m: s.machine,
            tasks: s.tasks,
            progs: s.programs,
            seed: s.seed,
            pending_mhz: vec![0; nd],
            spare: Vec::new(),
            picking: None,
            total_power: 0.0,
            base_w,
            planes,
            peak_power_w: 0.0,
            vm,
            dynm,
            smt_shared: Vec::new(),
            any_feature: false,
            dsq,
            iw: idle_wait::IdleWait::new(n),
            interrupted: None,
            check_wall: CHECK_WALL,
            starting: None,
            jitter_dist: None,
        };
        e.any_feature = e
            .progs
            .iter()
            .any(|p| p.params.iter().any(|q| q.feature.is_some()));
        // A program's own SMT factor makes any core with siblings shared.
        let program_smt = e
            .progs
            .iter()
            .any(|p| p.params.iter().any(|q| q.smt_factor.is_some()));
        e.smt_shared = (0..n)
            .map(|c| {
                (program_smt || e.m.ty(c).smt_factor != 1.0) && !e.m.cpus[c].siblings.is_empty()
            })
            .collect();
        e.update_ratings();
        e
    }

    /// The one constructor of a policy context, for the host's policies
    /// (`obs`: an agent's observations) or a VM's guest scheduler. It
    /// returns the policies beside the context (a split borrow of the
    /// engine), so that one of them can be called with it.
    #[inline(always)]
    fn ctx<'a>(&'a mut self, who: CtxFor, obs: &'a Vec<Observation>) -> (Policies<'a>, Ctx<'a>) {
        let Engine {
            now,
            m,
            tasks,
            progs,
            hv,
            flags,
            reqs,
            rng,
            sched,
            gov,
            agents,
            vm,
            dsq,
            util,
            ..
        } = self;
        let vm::VmState {
            vms, reqs: vreqs, ..
        } = vm;
        let (sched, cx) = match who {
            CtxFor::Host | CtxFor::Sched | CtxFor::Agent => {
                let flags = match who {
                    CtxFor::Sched => Some(flags),
                    _ => None,
                };
                let (dsq, util) = match who {
                    CtxFor::Host | CtxFor::Sched => (
                        dsq.as_deref_mut()
                            .map(|d| d as &mut dyn crate::policy::scx::DsqOps),
                        Some(util),
                    ),
                    _ => (None, None),
                };
                let cx = Ctx {
                    now: *now,
                    machine: m,
                    tasks,
                    v: hv,
                    progs,
                    reqs,
                    rng,
                    obs,
                    dsq,
                    util,
                    flags,
                };
                (sched, cx)
            }
            CtxFor::Guest(k) => {
                // A guest sees its vCPUs, and no cpusets or vCPUs of its own.
                let g = &mut vms[k];
                let cx = Ctx {
                    now: *now,
                    machine: &g.machine,
                    tasks,
                    v: &g.v,
                    progs,
                    reqs: vreqs,
                    rng,
                    obs,
                    dsq: None,
                    util: None,
                    flags: None,
                };
                (&mut g.sched, cx)
            }
        };
        (Policies { sched, gov, agents }, cx)
    }

    /// Call the host scheduler with a host context.
    #[inline(always)]
    fn with_sched<R>(&mut self, f: impl FnOnce(&mut Box<dyn Scheduler>, &mut Ctx) -> R) -> R {
        let (p, mut cx) = self.ctx(CtxFor::Sched, NO_OBS);
        f(p.sched, &mut cx)
    }

    /// Call the guest scheduler of VM `k` with its guest context.
    #[inline(always)]
    fn with_guest<R>(
        &mut self,
        k: usize,
        f: impl FnOnce(&mut Box<dyn Scheduler>, &mut Ctx) -> R,
    ) -> R {
        let (p, mut cx) = self.ctx(CtxFor::Guest(k), NO_OBS);
        f(p.sched, &mut cx)
    }

    /// Recompute every CPU's rating (after a frequency change).
    fn update_ratings(&mut self) {
        let perf: Vec<f64> = (0..self.m.ncpus())
            .map(|c| self.m.perf(c, self.cpu_mhz(c)))
            .collect();
        let min = perf.iter().copied().fold(f64::INFINITY, f64::min);
        for (r, p) in self.hv.ratings.iter_mut().zip(perf) {
            *r = p / min;
        }
    }

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Name of the scheduler.
    pub fn scheduler_name(&self) -> String {
        self.sched.name().to_string()
    }
    /// Name of the governor.
    pub fn governor_name(&self) -> String {
        self.gov.name().to_string()
    }
    /// Names of the agents.
    pub fn agent_names(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.name().to_string()).collect()
    }
    /// Events pushed into the queue, stale ones included.
    pub fn events_pushed(&self) -> u64 {
        self.q.pushed()
    }
    /// Hash of every scheduling decision and state change of the run.
    pub fn trace_hash(&self) -> u64 {
        self.hash
    }
    /// Energy of each CPU so far, joules.
    pub fn cpu_energy(&self, cpu: CpuId) -> f64 {
        self.cpus[cpu].energy
    }
    /// Busy time of each CPU so far.
    pub fn cpu_busy_ns(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu].busy_ns
    }
    /// Ticks delivered to a CPU.
    pub fn cpu_ticks(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu].ticks
    }
    /// Current frequency of a CPU.
    pub fn cpu_mhz(&self, cpu: CpuId) -> u32 {
        self.hv.domain_mhz[self.m.cpus[cpu].domain]
    }
    /// Simulated end time of the run (after `run`).
    pub fn end_time(&self) -> SimTime {
        self.end
    }
    /// Total platform energy (CPUs + base power), joules.
    pub fn total_energy(&self) -> f64 {
        self.cpus.iter().map(|c| c.energy).sum::<f64>() + self.base_w * self.now.as_secs_f64()
    }

    // ----------------------------------------------------------------- trace

    #[inline]
    fn mix(&mut self, kind: u64, a: u64, b: u64, c: u64) {
        let mut h = self.hash;
        for x in [kind, self.now.0, a, b, c] {
            h = (h.rotate_left(5) ^ x).wrapping_mul(HASH_K);
        }
        self.hash = h;
    }

    #[inline]
    fn emit(&mut self, kind: u64, a: u64, b: u64, c: u64, ev: impl FnOnce() -> TraceEvent) {
        self.mix(kind, a, b, c);
        if self.opts.trace {
            self.trace.push(ev());
        }
    }

    // ------------------------------------------------------------- errors

    fn src_name(&self) -> String {
        match self.src {
            Src::Sched => format!("scheduler \"{}\"", self.sched.name()),
            Src::Gov => format!("governor \"{}\"", self.gov.name()),
            Src::Agent(i) => format!("agent \"{}\"", self.agents[i].name()),
        }
    }

    fn policy_err(&self, what: String) -> Box<SimError> {
        Box::new(SimError::Policy {
            policy: self.src_name(),
            time: self.now,
            message: what,
        })
    }

    // ------------------------------------------------------ hardware state

    /// Integrate energy and progress on `cpu` up to now.
    fn sync(&mut self, cpu: CpuId) {
        let dt = self.now.since(self.cpus[cpu].last_sync).0;
        if dt == 0 {
            return;
        }
        // With VMs, a vCPU's run time is its own and its progress its guest's.
        let cur = if !self.vm.any() {
            self.hv.current[cpu]
        } else {
            self.vm_sync(cpu, dt)
        };
        let c = &mut self.cpus[cpu];
        c.last_sync = self.now;
        c.energy += c.power * dt as f64 * 1e-9;
        if let Some(t) = cur {
            c.busy_ns += dt;
            let rate = c.rate;
            let hw = &self.m.cpus[cpu];
            let ghz = self.hv.domain_mhz[hw.domain] as f64 / 1000.0 * hw.duty_cycle;
            let task = &mut self.tasks[t];
            // A stalled task (refilling caches, in a trap) makes no progress.
            let from = self.now.0 - dt;
            let stalled = task.stall_until.0.clamp(from, self.now.0) - from;
            task.c.stall_ns += stalled;
            let done = (rate * (dt - stalled) as f64).min(task.remaining);
            task.remaining -= done;
            task.c.work_done += done;
            let p = &self.progs[task.program].params[task.param as usize];
            let instr = done * p.ipc * self.m.ref_ghz;
            task.c.instructions += instr;
            task.c.cycles += dt as f64 * ghz;
            task.c.cache_refs += instr * p.refs_per_instr;
            task.c.cache_misses += instr * p.refs_per_instr * p.miss_ratio;
            task.c.run_ns += dt;
            task.c.run_ns_by_type.add(hw.ty, dt);
            task.c.scaled_run_ns += dt as f64 * self.hv.ratings[cpu];
        }
    }

    /// Recompute `cpu`'s rate and power and re-plan its completion event.
    /// Call after `sync`.
    fn refresh(&mut self, cpu: CpuId) {
        let hw = &self.m.cpus[cpu];
        let gen = self.cpus[cpu].comp_gen.wrapping_add(1);
        self.cpus[cpu].comp_gen = gen;
        let old_power = self.cpus[cpu].power;
        let mhz = self.hv.domain_mhz[hw.domain];
        let volt = self.plane_volt(hw.domain);
        match self.exec_task(cpu) {
            None => {
                let c = &mut self.cpus[cpu];
                c.rate = 0.0;
                if c.idle_key != Some(mhz) {
                    c.idle_key = Some(mhz);
                    c.idle_val = self.m.idle_power_in_plane(cpu, mhz, volt);
                }
                c.power = c.idle_val;
            }
            Some(t) => {
                let task = &self.tasks[t];
                let p = &self.progs[task.program].params[task.param as usize];
                // A busy sibling matters only where the SMT factor is not 1.
                let sib_busy = self.m.smt_factor(cpu, p.smt_factor) != 1.0
                    && hw.siblings.iter().any(|&s| self.hv.current[s].is_some());
                let key = (task.program, task.param, mhz, sib_busy);
                let (rate, power) = match self.cpus[cpu].rate_key {
                    Some(k) if k == key && self.dynm.is_none() => self.cpus[cpu].rate_val,
                    _ => {
                        let w = Work {
                            class: p.class,
                            mem: p.mem,
                            smt_factor: p.smt_factor,
                        };
                        let at = Moment {
                            mhz,
                            sibling_busy: sib_busy,
                            fusion: self.dyn_fusion(cpu, p.class),
                        };
                        let b = self.m.busy_in_plane(cpu, &w, &at, volt);
                        let c = &mut self.cpus[cpu];
                        c.rate_key = Some(key);
                        c.rate_val = (b.rate, b.power);
                        (b.rate, b.power)
                    }
                };
                let dt = if task.remaining <= 0.0 {
                    0
                } else {
                    ceil_u64(task.remaining / rate)
                };
                let start = self.now.max(task.stall_until);
                let c = &mut self.cpus[cpu];
                c.rate = rate;
                c.power = power;
                self.q.push(
                    start + SimTime(dt),
                    EventClass::Completion,
                    Ev::Complete {
                        cpu: cpu as u32,
                        gen,
                    },
                );
            }
        }
        self.total_power += self.cpus[cpu].power - old_power;
    }

    /// The task executing on `cpu` (for a vCPU: its guest's current task).
    #[inline]
    fn exec_task(&self, cpu: CpuId) -> Option<TaskId> {
        match self.hv.current[cpu] {
            Some(t) if self.vm.any() => self.vm.exec(t),
            cur => cur,
        }
    }

    /// Whether `cpu` needs ticks: its scheduler asked, or its vCPU's guest.
    #[inline]
    fn wants_tick(&self, cpu: CpuId) -> bool {
        self.flags.ticks[cpu].wanted || self.hv.current[cpu].is_some_and(|t| self.vm.wants_tick(t))
    }

    /// A CPU's busy state changed: SMT siblings may change speed.
    #[inline(always)]
    fn refresh_siblings(&mut self, cpu: CpuId) {
        if self.smt_shared[cpu] {
            self.refresh_siblings_now(cpu);
        }
    }

    fn refresh_siblings_now(&mut self, cpu: CpuId) {
        for i in 0..self.m.cpus[cpu].siblings.len() {
            let s = self.m.cpus[cpu].siblings[i];
            if self.hv.current[s].is_some() {
                let program = self.exec_task(s).and_then(|t| {
                    let task = &self.tasks[t];
                    self.progs[task.program].params[task.param as usize].smt_factor
                });
                if self.m.smt_factor(s, program) == 1.0 {
                    continue;
                }
                self.sync(s);
                self.refresh(s);
            }
        }
    }

    fn arm_tick(&mut self, cpu: CpuId) {
        let tick = self.m.tick.0.max(1);
        let next = SimTime((self.now.0 / tick + 1) * tick);
        let c = &mut self.cpus[cpu];
        c.tick_gen = c.tick_gen.wrapping_add(1);
        self.flags.ticks[cpu].armed = true;
        let gen = c.tick_gen;
        self.q.push(
            next,
            EventClass::Tick,
            Ev::Tick {
                cpu: cpu as u32,
                gen,
            },
        );
    }

    /// Kick an idle CPU that has just been given work (not the CPU that is
    /// picking right now: its pick serves the request).
    fn kick_idle(&mut self, cpu: CpuId) {
        if self.hv.current[cpu].is_none() && self.picking != Some(cpu) {
            self.flag_resched(cpu);
        }
    }

    fn flag_resched(&mut self, cpu: CpuId) {
        self.flags.flag_resched(cpu);
    }

    // -------------------------------------------------------- task states

    fn set_state(&mut self, t: TaskId, s: TaskState) {
        let now = self.now;
        let task = &mut self.tasks[t];
        let dt = now.since(task.state_since).0;
        let old = task.state;
        match task.state {
            TaskState::Runnable => task.c.wait_ns += dt,
            TaskState::Sleeping | TaskState::Blocked => task.c.sleep_ns += dt,
            _ => {}
        }
        task.state = s;
        task.state_since = now;
        self.iw_state(t, old, s);
    }

    #[inline]
    fn jitter(&mut self, prog: usize, x: f64) -> f64 {
        let j = self.progs[prog].jitter;
        if j <= 0.0 {
            return x;
        }
        let u = match self.jitter_dist {
            Some((k, u)) if k == j => u,
            _ => {
                let u = Uniform::new_inclusive(-j, j);
                self.jitter_dist = Some((j, u));
                u
            }
        };
        x * (1.0 + u.sample(&mut self.rng))
    }

    // --------------------------------------------------------- callbacks

    /// Apply the requests the last callback recorded. Most callbacks record
    /// none, so the check is inlined and the work is out of line.
    #[inline(always)]
    fn apply(&mut self) -> Res<()> {
        if self.reqs.is_empty() {
            return Ok(());
        }
        self.apply_some()
    }

    #[inline(never)]
    fn apply_some(&mut self) -> Res<()> {
        // The commonest batch by far: one tick wish from the scheduler.
        if let [Request::WantTick { cpu, on }] = self.reqs[..] {
            if matches!(self.src, Src::Sched) && cpu < self.m.ncpus() {
                self.reqs.clear();
                self.want_tick(cpu, on);
                return Ok(());
            }
        }
        self.apply_pending()
    }

    fn apply_pending(&mut self) -> Res<()> {
        // The scheduler's frequent requests (tick wishes, reschedules) trigger
        // no callback, so a run of them at the front of the batch is applied
        // straight from `reqs`; usually that is the whole batch.
        if matches!(self.src, Src::Sched) {
            let n = self.m.ncpus();
            let mut i = 0;
            while i < self.reqs.len() {
                match self.reqs[i] {
                    Request::WantTick { cpu, on } if cpu < n => self.want_tick(cpu, on),
                    Request::Resched(cpu) if cpu < n => self.flag_resched(cpu),
                    _ => break,
                }
                i += 1;
            }
            if i == self.reqs.len() {
                self.reqs.clear();
                return Ok(());
            }
            self.reqs.drain(..i);
        }
        // Swap in a spare buffer so that the callbacks that applying a request
        // triggers can record into `reqs` without reallocating every time.
        while !self.reqs.is_empty() {
            let mut batch = std::mem::replace(&mut self.reqs, std::mem::take(&mut self.spare));
            let res = self.apply_batch(&batch);
            batch.clear();
            if self.spare.capacity() < batch.capacity() {
                self.spare = batch;
            }
            res?;
        }
        Ok(())
    }

    /// Apply a batch in order. The scheduler's frequent requests (tick
    /// wishes, reschedules) are applied in place; the others are applied by
    /// `apply_one` from a copy (they are rare).
    fn apply_batch(&mut self, batch: &[Request]) -> Res<()> {
        let n = self.m.ncpus();
        let sched = matches!(self.src, Src::Sched);
        for r in batch {
            match *r {
                Request::WantTick { cpu, on } if sched && cpu < n => self.want_tick(cpu, on),
                Request::Resched(cpu) if sched && cpu < n => self.flag_resched(cpu),
                _ => self.apply_one(r.clone())?,
            }
        }
        Ok(())
    }

    /// Turn ticks on `cpu` on or off (arming one if it is busy and has none).
    #[inline]
    fn want_tick(&mut self, cpu: CpuId, on: bool) {
        self.flags.ticks[cpu].wanted = on;
        if on && self.hv.current[cpu].is_some() && !self.flags.ticks[cpu].armed {
            self.arm_tick(cpu);
        }
    }

    fn sched_select(&mut self, t: TaskId, prev: Option<CpuId>, flags: EnqFlags) -> Res<CpuId> {
        self.src = Src::Sched;
        self.dsq_mode(dsq::Mode::Select(t));
        let cpu = self.with_sched(|s, cx| s.select_cpu(cx, t, prev, flags));
        self.dsq_mode(dsq::Mode::Other);
        self.apply()?;
        self.src = Src::Sched;
        if cpu >= self.m.ncpus() {
            return Err(self.policy_err(format!(
                "select_cpu returned cpu {cpu} for task {t}, which does not exist"
            )));
        }
        // A CPU borrowed by a fused object still queues its own threads.
        if !self.hv.online[cpu] && !self.dyn_borrowed(cpu) {
            return Err(self.policy_err(format!(
                "select_cpu returned cpu {cpu} for task {t}, which is offline"
            )));
        }
        if !self.tasks[t].affinity.contains(cpu) {
            return Err(self.policy_err(format!(
                "select_cpu returned cpu {cpu} for task {t}, outside its affinity {:?}",
                self.tasks[t].affinity.to_vec(self.m.ncpus())
            )));
        }
        if self.dsq.is_some() {
            self.dsq_after_select(t, cpu)?;
        }
        Ok(cpu)
    }

    fn sched_enqueue(&mut self, t: TaskId, cpu: CpuId, flags: EnqFlags) -> Res<()> {
        self.src = Src::Sched;
        // A task queued directly from select_cpu skips enqueue (sched_ext).
        if !self.dsq_queued(t) {
            self.dsq_mode(dsq::Mode::Enqueue(cpu));
            self.with_sched(|s, cx| s.enqueue(cx, t, cpu, flags));
            self.dsq_mode(dsq::Mode::Other);
        }
        self.apply()?;
        self.kick_idle(cpu);
        Ok(())
    }

    // ------------------------------------------------------------ requests

    fn apply_one(&mut self, r: Request) -> Res<()> {
        let n = self.m.ncpus();
        // Agents act like a user-space daemon (affinity, nice, frequency);
        // governors only set frequencies.
        let allowed = match self.src {
            Src::Sched => true,
            Src::Agent(_) => matches!(
                r,
                Request::SetAffinity { .. }
                    | Request::SetNice { .. }
                    | Request::SetFrequency { .. }
                    | Request::Fail(_)
            ),
            Src::Gov => matches!(r, Request::SetFrequency { .. } | Request::Fail(_)),
        };
        if !allowed {
            return Err(self.policy_err(format!(
                "{r:?} is not allowed: agents act only through set_affinity, set_nice and set_frequency, governors only through set_frequency"
            )));
        }
        let bad_cpu = |s: &Self, c: CpuId, what: &str| -> Option<Box<SimError>> {
            if c >= n {
                Some(s.policy_err(format!(
                    "{what}: cpu {c} does not exist (machine has {n} cpus)"
                )))
            } else {
                None
            }
        };
        let bad_task = |s: &Self, t: TaskId, what: &str| -> Option<Box<SimError>> {
            if t >= s.tasks.len() {
                Some(s.policy_err(format!(
                    "{what}: task {t} does not exist ({} tasks)",
                    s.tasks.len()
                )))
            } else {
                None
            }
        };
        match r {
            Request::Resched(cpu) => {
                if let Some(e) = bad_cpu(self, cpu, "resched") {
                    return Err(e);
                }
                self.flag_resched(cpu);
            }
            Request::Migrate { task, cpu } => {
                // The request's text is built only for an error message.
                let what = || format!("migrate(task {task}, cpu {cpu})");
                if task >= self.tasks.len() || cpu >= n {
                    let w = what();
                    let e = bad_task(self, task, &w).or_else(|| bad_cpu(self, cpu, &w));
                    return Err(e.expect("an invalid task or cpu"));
                }
                if !self.hv.online[cpu] {
                    return Err(self.policy_err(format!("{}: cpu {cpu} is offline", what())));
                }
                if !self.tasks[task].affinity.contains(cpu) {
                    return Err(self.policy_err(format!(
                        "{}: cpu {cpu} is outside the task's affinity {:?}",
                        what(),
                        self.tasks[task].affinity.to_vec(n)
                    )));
                }
                if self.is_class_task(task) {
                    return Err(self.class_refusal(task, &what()));
                }
                match self.tasks[task].state {
                    TaskState::Exited => {
                        return Err(self.policy_err(format!("{}: the task has exited", what())));
                    }
                    TaskState::Running => {
                        let src = self.tasks[task].cpu;
                        if src != cpu {
                            self.tasks[task].cpu = cpu;
                            self.flag_resched(src);
                        }
                    }
                    TaskState::Runnable => {
                        self.tasks[task].cpu = cpu;
                        self.kick_idle(cpu);
                    }
                    _ => self.tasks[task].cpu = cpu,
                }
            }
            Request::SetAffinity { task, cpus } => {
                let what = format!("set_affinity(task {task}, {cpus:?})");
                if let Some(e) = bad_task(self, task, &what) {
                    return Err(e);
                }
                if cpus.is_empty() {
                    return Err(self.policy_err(format!("{what}: empty cpu list")));
                }
                if self.is_class_task(task) {
                    return self.class_set_affinity(task, &cpus, &what);
                }
                if let Some(&c) = cpus.iter().find(|&&c| c >= n) {
                    return Err(self.policy_err(format!(
                        "{what}: cpu {c} does not exist (machine has {n} cpus)"
                    )));
                }
                self.iw_affinity(task, true);
                self.tasks[task].affinity = CpuSet::from_cpus(&cpus, n);
                self.iw_affinity(task, false);
                let cur = self.tasks[task].cpu;
                if !self.tasks[task].affinity.contains(cur) {
                    match self.tasks[task].state {
                        TaskState::Running => self.flag_resched(cur),
                        TaskState::Runnable => {
                            self.dsq_remove(task);
                            self.src = Src::Sched;
                            self.with_sched(|s, cx| s.dequeue(cx, task, cur));
                            self.apply()?;
                            let dst = self.sched_select(task, Some(cur), EnqFlags::Affinity)?;
                            self.tasks[task].cpu = dst;
                            self.sched_enqueue(task, dst, EnqFlags::Affinity)?;
                        }
                        _ => {}
                    }
                }
            }
            Request::SetNice { task, nice } => {
                let what = format!("set_nice(task {task}, {nice})");
                if let Some(e) = bad_task(self, task, &what) {
                    return Err(e);
                }
                if !(-20..=19).contains(&nice) {
                    return Err(self.policy_err(format!("{what}: nice must be within -20..19")));
                }
                let old = self.tasks[task].weight;
                self.tasks[task].nice = nice;
                self.tasks[task].weight = self.tasks[task].weight_at(nice);
                if old != self.tasks[task].weight && !self.is_class_task(task) {
                    let saved = self.src;
                    self.src = Src::Sched;
                    self.with_sched(|s, cx| s.reweight(cx, task, old));
                    self.apply()?;
                    self.src = saved;
                }
            }
            Request::WantTick { cpu, on } => {
                if let Some(e) = bad_cpu(self, cpu, "want_tick") {
                    return Err(e);
                }
                self.want_tick(cpu, on);
            }
            Request::ArmTimer { at, token } => {
                if at < self.now {
                    return Err(self.policy_err(format!(
                        "arm_timer(token {token}): time {at} is in the past (now {})",
                        self.now
                    )));
                }
                self.timer_gen = self.timer_gen.wrapping_add(1);
                self.timers.insert(token, self.timer_gen);
                self.q.push(
                    at,
                    EventClass::Timer,
                    Ev::Timer {
                        token,
                        gen: self.timer_gen,
                    },
                );
            }
            Request::CancelTimer { token } => {
                self.timers.remove(&token);
            }
            Request::SetFrequency { domain, mhz } => {
                let what = format!("set_frequency(domain {domain}, {mhz} MHz)");
                if domain >= self.m.domains.len() {
                    return Err(self.policy_err(format!(
                        "{what}: domain {domain} does not exist ({} domains)",
                        self.m.domains.len()
                    )));
                }
                let ty = &self.m.types[self.m.domains[domain].ty];
                if ty.pstate_index(mhz).is_none() {
                    let avail: Vec<String> = ty.pstates.iter().map(|p| p.mhz.to_string()).collect();
                    return Err(self.policy_err(format!(
                        "{what}: not a P-state of cpu type \"{}\"; available: {}",
                        ty.name,
                        avail.join(", ")
                    )));
                }
                self.dom_gen[domain] = self.dom_gen[domain].wrapping_add(1);
                let gen = self.dom_gen[domain];
                if !self.started || ty.freq_transition == SimTime::ZERO {
                    self.apply_freq(domain, mhz);
                } else {
                    self.pending_mhz[domain] = mhz;
                    self.q.push(
                        self.now + ty.freq_transition,
                        EventClass::Hardware,
                        Ev::FreqApply {
                            domain: domain as u32,
                            gen,
                        },
                    );
                }
            }
            Request::Reconfigure { op, mechanism } => {
                self.reconfigure(op, mechanism, dynamic::Origin::Policy)?;
            }
            Request::Warn(msg) => {
                if !self.warnings.contains(&msg) {
                    self.warnings.push(msg);
                }
            }
            Request::Fail(msg) => return Err(self.policy_err(msg)),
        }
        Ok(())
    }

    fn apply_freq(&mut self, domain: usize, mhz: u32) {
        if self.hv.domain_mhz[domain] == mhz {
            return;
        }
        let ncpus = self.m.domains[domain].cpus.len();
        for i in 0..ncpus {
            let c = self.m.domains[domain].cpus[i];
            self.sync(c);
        }
        self.hv.domain_mhz[domain] = mhz;
        let peers = self.plane_update(domain);
        self.update_ratings();
        for i in 0..ncpus {
            let c = self.m.domains[domain].cpus[i];
            self.refresh(c);
        }
        for c in peers {
            self.refresh(c);
        }
        let t_ns = self.now.0;
        self.emit(6, domain as u64, mhz as u64, 0, || TraceEvent::Freq {
            t_ns,
            domain,
            mhz,
        });
    }

    // ------------------------------------------------------------ running

    /// Put task `t` on idle CPU `cpu`.
    fn start_running(&mut self, cpu: CpuId, t: TaskId) -> Res<()> {
        if self.tasks[t].state != TaskState::Runnable {
            return Err(self.policy_err(format!(
                "pick_next on cpu {cpu} returned task {t}, which is {} (not runnable)",
                self.tasks[t].state.name()
            )));
        }
        if !self.tasks[t].affinity.contains(cpu) {
            return Err(self.policy_err(format!(
                "pick_next on cpu {cpu} returned task {t}, whose affinity {:?} excludes it",
                self.tasks[t].affinity.to_vec(self.m.ncpus())
            )));
        }
        self.sync(cpu);
        self.set_state(t, TaskState::Running);
        self.wake_lat.ran(t, self.now);
        let last = self.tasks[t].last_ran;
        let mut stall = std::mem::take(&mut self.tasks[t].pending_stall);
        if let Some(prev) = last {
            if prev != cpu {
                // A vCPU's cache refill is charged to the guest task it
                // executes (sim/vm.rs).
                if !self.vm.is_vcpu(t) {
                    let task = &self.tasks[t];
                    let ws = self.progs[task.program].params[task.param as usize].working_set_kb;
                    stall += self.m.migration.cost(&self.m, prev, cpu, ws).0;
                }
                self.tasks[t].c.migrations += 1;
                let t_ns = self.now.0;
                self.emit(2, t as u64, prev as u64, cpu as u64, || {
                    TraceEvent::Migrate {
                        t_ns,
                        task: t,
                        from: prev,
                        to: cpu,
                    }
                });
            }
        }
        self.tasks[t].last_ran = Some(cpu);
        self.tasks[t].cpu = cpu;
        if stall > 0 {
            self.tasks[t].stall_until = self.now + SimTime(stall);
        }
        // A CPU halted by stop-machine (or busy reconfiguring) runs nothing.
        let h = self.dyn_halt_until(cpu);
        if h > self.tasks[t].stall_until {
            self.tasks[t].stall_until = h;
        }
        self.hv.current[cpu] = Some(t);
        self.iw_cpu(cpu);
        self.cpus[cpu].run_since = self.now;
        self.vm_vcpu_started(cpu, t);
        if self.cls.is_none() || !self.class_started(cpu, t) {
            self.src = Src::Sched;
            self.with_sched(|s, cx| s.running(cx, t, cpu));
            self.apply()?;
        }
        if self.hv.current[cpu] != Some(t) {
            return Ok(());
        }
        if !self.feature_ok(t, cpu)? {
            return Ok(());
        }
        self.refresh(cpu);
        self.refresh_siblings(cpu);
        if self.wants_tick(cpu) && !self.flags.ticks[cpu].armed {
            self.arm_tick(cpu);
        }
        Ok(())
    }

    /// Check that `cpu` has the ISA feature the current phase of `t` needs.
    /// If not, the scheduler may handle the fault; otherwise the task gets the
    /// SIGILL outcome. Returns whether `t` may go on running on `cpu`.
    #[inline]
    fn feature_ok(&mut self, t: TaskId, cpu: CpuId) -> Res<bool> {
        if !self.any_feature {
            return Ok(true);
        }
        self.feature_ok_slow(t, cpu)
    }

    fn feature_ok_slow(&mut self, t: TaskId, cpu: CpuId) -> Res<bool> {
        if self.vm.is_vcpu(t) {
            return Ok(true); // ISA features are not modelled inside VMs
        }
        let task = &self.tasks[t];
        let Some(f) = self.progs[task.program].params[task.param as usize].feature else {
            return Ok(true);
        };
        if task.remaining <= 0.0 || self.m.ty(cpu).features & (1u64 << f) != 0 {
            return Ok(true);
        }
        self.tasks[t].c.faults += 1;
        self.tasks[t].pending_stall += self.m.fault_trap.0;
        self.src = Src::Sched;
        let handled = self.with_sched(|s, cx| s.on_fault(cx, t, cpu, f));
        self.apply()?;
        let t_ns = self.now.0;
        self.emit(8, t as u64, cpu as u64, f as u64, || TraceEvent::Fault {
            t_ns,
            task: t,
            cpu,
            feature: f,
        });
        if handled {
            if self.tasks[t].affinity.contains(cpu) {
                return Err(self.policy_err(format!(
                    "on_fault handled task {t}'s fault on cpu {cpu} but left cpu {cpu} in its affinity"
                )));
            }
            // The affinity change flagged a resched; the task is moved then.
            self.refresh(cpu);
            return Ok(false);
        }
        let fname = &self.m.features[f];
        let capable: Vec<CpuId> = (0..self.m.ncpus())
            .filter(|&c| self.m.ty(c).features & (1u64 << f) != 0)
            .collect();
        let reason = if capable.is_empty() {
            format!("SIGILL: needs ISA feature \"{fname}\", which no cpu of the machine has")
        } else if !capable.iter().any(|&c| self.tasks[t].affinity.contains(c)) {
            format!(
                "SIGILL: needs ISA feature \"{fname}\", but its affinity {:?} excludes every cpu that has it {capable:?}",
                self.tasks[t].affinity.to_vec(self.m.ncpus())
            )
        } else {
            format!(
                "SIGILL: needs ISA feature \"{fname}\" that cpu {cpu} ({}) lacks, and the scheduler does not migrate on faults",
                self.m.ty(cpu).name
            )
        };
        self.kill(t, reason)?;
        Ok(false)
    }

    /// Take the running task off `cpu`. `runnable`: preempted (not counted as
    /// a voluntary switch). The CPU is left idle; the caller decides about a
    /// resched.
    fn stop_running(&mut self, cpu: CpuId, runnable: bool) -> Res<TaskId> {
        let t = self.hv.current[cpu].expect("stop_running on idle cpu");
        self.sync(cpu);
        self.vm_vcpu_stopping(t);
        // A stall cut short by preemption is owed at the next start.
        let owed = self.tasks[t].stall_until.since(self.now).0;
        if owed > 0 {
            self.tasks[t].pending_stall += owed;
            self.tasks[t].stall_until = self.now;
        }
        let start = self.cpus[cpu].run_since;
        let t_ns = start.0;
        let end_ns = self.now.0;
        self.emit(1, cpu as u64, t as u64, start.0, || TraceEvent::Run {
            t_ns,
            end_ns,
            cpu,
            task: t,
        });
        self.hv.current[cpu] = None;
        self.iw_cpu(cpu);
        if runnable {
            self.set_state(t, TaskState::Runnable);
        } else {
            self.tasks[t].c.csw_voluntary += 1;
        }
        if self.dsq.is_some() {
            self.dsq_charge(cpu, t);
        }
        if self.cls.is_none() || !self.class_stopped(cpu, t) {
            self.src = Src::Sched;
            self.with_sched(|s, cx| s.stopping(cx, t, cpu, runnable));
            self.apply()?;
        }
        self.refresh(cpu);
        self.refresh_siblings(cpu);
        Ok(t)
    }

    /// Reschedule `cpu`: preempt its task if it is still runnable, then pick.
    fn resched(&mut self, cpu: CpuId) -> Res<()> {
        if self.dsq.is_some() {
            return self.dsq_resched(cpu);
        }
        self.flags.need_resched[cpu] = false;
        let prev = self.hv.current[cpu];
        if let Some(t) = prev {
            if self.tasks[t].state != TaskState::Running {
                return Ok(()); // already being handled
            }
            self.stop_running(cpu, true)?;
        }
        if let Some(t) = prev.filter(|&t| !(self.cls.is_some() && self.class_requeue(t, cpu))) {
            let mut flags = EnqFlags::Preempted;
            let mut dst = self.tasks[t].cpu;
            // A CPU borrowed by a fused object keeps its queue: a task
            // preempted there waits there for the split.
            let kept = !self.hv.online[dst] && self.dyn_borrowed(dst);
            if !self.tasks[t].affinity.contains(dst) || (!self.hv.online[dst] && !kept) {
                dst = self.sched_select(t, Some(cpu), EnqFlags::Affinity)?;
                flags = EnqFlags::Affinity;
            } else if dst != cpu {
                flags = EnqFlags::Migrated;
            }
            self.tasks[t].cpu = dst;
            self.sched_enqueue(t, dst, flags)?;
        }
        if self.hv.current[cpu].is_some() || !self.hv.online[cpu] {
            return Ok(());
        }
        // Re-enqueueing the preempted task on this (momentarily idle) CPU
        // flagged it again; this pick serves that request.
        self.flags.need_resched[cpu] = false;
        self.picking = Some(cpu);
        let next = self.pick(cpu);
        self.picking = None;
        if let Some(n) = next? {
            if n >= self.tasks.len() {
                return Err(self.policy_err(format!(
                    "pick_next on cpu {cpu} returned task {n}, which does not exist"
                )));
            }
            if self.hv.current[cpu].is_some() {
                return Err(self.policy_err(format!(
                    "pick_next on cpu {cpu} returned task {n} but the cpu became busy during the callback"
                )));
            }
            if let Some(p) = prev {
                if p != n && self.tasks[p].state == TaskState::Runnable {
                    self.tasks[p].c.csw_involuntary += 1;
                }
            }
            self.start_running(cpu, n)?;
        } else if let Some(p) = prev {
            if self.tasks[p].state == TaskState::Runnable {
                self.tasks[p].c.csw_involuntary += 1;
            }
        }
        Ok(())
    }

    /// The next task of idle `cpu`: over the class stack when there are rt
    /// or deadline tasks, else the scheduler's.
    #[inline]
    fn pick(&mut self, cpu: CpuId) -> Res<Option<TaskId>> {
        if self.cls.is_some() {
            return self.class_pick(cpu);
        }
        self.fair_pick(cpu)
    }

    /// Ask the scheduler for the next task of idle `cpu`: `pick_next`, and if
    /// it has none, `balance` then `pick_next` once more.
    #[inline]
    fn fair_pick(&mut self, cpu: CpuId) -> Res<Option<TaskId>> {
        self.src = Src::Sched;
        let next = self.with_sched(|s, cx| s.pick_next(cx, cpu));
        self.apply()?;
        if next.is_some() || !self.sched.pick_again_after_balance() {
            return Ok(next);
        }
        self.src = Src::Sched;
        self.with_sched(|s, cx| s.balance(cx, cpu));
        self.apply()?;
        self.src = Src::Sched;
        let next = self.with_sched(|s, cx| s.pick_next(cx, cpu));
        self.apply()?;
        Ok(next)
    }

    fn process_resched(&mut self) -> Res<()> {
        loop {
            let mut i = 0;
            while i < self.flags.resched_list.len() {
                let cpu = self.flags.resched_list[i];
                i += 1;
                if self.flags.need_resched[cpu] {
                    self.resched(cpu)?;
                }
            }
            self.flags.resched_list.clear();
            // Guest-level reschedules may block or wake vCPUs in the host.
            if !self.vm_process_resched()? {
                return Ok(());
            }
        }
    }

    // ------------------------------------------------------------ programs

    /// Make `t` runnable and place it.
    fn wake(&mut self, t: TaskId, flags: EnqFlags) -> Res<()> {
        if self.vm.is_guest(t) {
            return self.g_wake(t, flags);
        }
        self.set_state(t, TaskState::Runnable);
        self.wake_lat.woke(t, self.now);
        if self.tasks[t].start.is_none() {
            self.tasks[t].start = Some(self.now);
        }
        if self.is_class_task(t) {
            return self.class_wake(t, flags);
        }
        let prev = self.tasks[t].last_ran;
        let cpu = self.sched_select(t, prev, flags)?;
        self.tasks[t].cpu = cpu;
        let t_ns = self.now.0;
        self.emit(3, t as u64, cpu as u64, 0, || TraceEvent::Wake {
            t_ns,
            task: t,
            cpu,
        });
        self.sched_enqueue(t, cpu, flags)
    }

    fn block(&mut self, t: TaskId, state: TaskState, reason: &'static str) -> Res<()> {
        if self.tasks[t].state == TaskState::Running && self.vm.is_guest(t) {
            self.g_unrun(t)?;
        } else if self.tasks[t].state == TaskState::Running {
            let cpu = self.tasks[t].cpu;
            self.stop_running(cpu, false)?;
            self.flag_resched(cpu);
        }
        self.set_state(t, state);
        let t_ns = self.now.0;
        self.emit(4, t as u64, 0, 0, || TraceEvent::Block {
            t_ns,
            task: t,
            reason,
        });
        Ok(())
    }

    fn sleep_for(&mut self, t: TaskId, ns: u64, reason: &'static str) -> Res<()> {
        self.block(t, TaskState::Sleeping, reason)?;
        let task = &mut self.tasks[t];
        task.wake_gen = task.wake_gen.wrapping_add(1);
        let gen = task.wake_gen;
        self.q.push(
            self.now + SimTime(ns),
            EventClass::Wake,
            Ev::Wake {
                task: t as u32,
                gen,
            },
        );
        Ok(())
    }

    fn sleep_until(&mut self, t: TaskId, at: SimTime) -> Res<()> {
        let ns = at.since(self.now).0;
        self.sleep_for(t, ns, "period")
    }

    fn kill(&mut self, t: TaskId, reason: String) -> Res<()> {
        self.tasks[t].kill_reason = Some(reason);
        let p = self.tasks[t].program;
        // A killed thread no longer takes part in its program's barrier.
        if self.progs[p].barrier_count > 1 {
            self.progs[p].barrier_count -= 1;
        }
        if let Some(i) = self.progs[p].barrier_spinning.iter().position(|&x| x == t) {
            self.progs[p].barrier_spinning.swap_remove(i);
            self.progs[p].barrier_waiting.retain(|&x| x != t);
        }
        self.exit(t)?;
        self.try_release_barrier(p)
    }

    fn exit(&mut self, t: TaskId) -> Res<()> {
        if self.tasks[t].state == TaskState::Running && self.vm.is_guest(t) {
            self.g_unrun(t)?;
        } else if self.tasks[t].state == TaskState::Running {
            let cpu = self.tasks[t].cpu;
            self.stop_running(cpu, false)?;
            self.flag_resched(cpu);
        }
        self.set_state(t, TaskState::Exited);
        match self.vm.level_of(t) {
            vm::Level::Guest { vm } => self.with_guest(vm as usize, |s, cx| s.task_dead(cx, t)),
            _ => self.with_sched(|s, cx| s.task_dead(cx, t)),
        }
        self.tasks[t].end = Some(self.now);
        let t_ns = self.now.0;
        self.emit(5, t as u64, 0, 0, || TraceEvent::Exit { t_ns, task: t });
        let p = self.tasks[t].program;
        self.progs[p].live -= 1;
        if self.progs[p].live == 0 {
            self.program_done(p);
        }
        self.sync_exited(t)
    }

    fn program_done(&mut self, p: usize) {
        let prog = &mut self.progs[p];
        prog.completions
            .push((prog.instance, prog.instance_start, self.now));
        let (inst, t_ns) = (prog.instance, self.now.0);
        self.emit(7, p as u64, inst as u64, 0, || TraceEvent::ProgramDone {
            t_ns,
            program: p,
            instance: inst,
        });
        let prog = &mut self.progs[p];
        if prog.instance + 1 < prog.repeat {
            prog.instance += 1;
            self.q.push(
                self.now,
                EventClass::Wake,
                Ev::ProgramStart { prog: p as u32 },
            );
        } else if !self.sync_program_done(p) {
            self.programs_done += 1;
            if self.stop_when_done && self.programs_done == self.progs.len() {
                self.q.push(self.now, EventClass::End, Ev::End);
            }
        }
    }

    fn start_program(&mut self, p: usize) -> Res<()> {
        self.sync_instance_start(p);
        let now = self.now;
        let nthreads = self.progs[p].threads.len();
        {
            let prog = &mut self.progs[p];
            prog.instance_start = now;
            prog.live = nthreads as u32;
            prog.chunks_left = prog.chunks;
            prog.barrier_waiting.clear();
            prog.barrier_spinning.clear();
            prog.barrier_count = prog.barrier_size;
        }
        // A program's nice_schedule renices its threads as a later instance
        // starts (they are not queued now; the scheduler reads the weight at
        // the next enqueue).
        let inst = self.progs[p].instance;
        let renice = self.progs[p]
            .nice_schedule
            .iter()
            .find(|&&(after, _)| after == inst)
            .map(|&(_, nice)| nice);
        if let Some(nice) = renice {
            for i in 0..nthreads {
                let t = self.progs[p].threads[i];
                self.tasks[t].nice = nice;
                self.tasks[t].weight = self.tasks[t].weight_at(nice);
            }
        }
        let rel = self.progs[p].rel_deadline;
        let periodic = self.progs[p].period > SimTime::ZERO;
        for i in 0..nthreads {
            let t = self.progs[p].threads[i];
            let task = &mut self.tasks[t];
            task.pc = 0;
            task.iter = 0;
            task.pending_io = 0;
            task.remaining = 0.0;
            task.release = now;
            task.deadline = if periodic { Some(now + rel) } else { None };
            task.state = TaskState::NotStarted;
            task.state_since = now;
        }
        self.start_threads(p, 0)
    }

    /// Step the threads of program `p` that have not started, from index
    /// `from`, at most [`START_CHUNK`] of them; where more remain, note
    /// where to go on. The run loop finishes the start before anything else
    /// happens, so chunks change no decision, only where a Ctrl-C can land.
    fn start_threads(&mut self, p: usize, from: usize) -> Res<()> {
        let n = self.progs[p].threads.len();
        let to = n.min(from + START_CHUNK);
        for i in from..to {
            let t = self.progs[p].threads[i];
            if self.tasks[t].state == TaskState::NotStarted {
                self.step(t)?;
            }
        }
        self.starting = (to < n).then_some((p, to));
        Ok(())
    }

    /// Release the barrier of program `p` if enough threads wait at it.
    /// Returns whether it was released.
    fn try_release_barrier(&mut self, p: usize) -> Res<()> {
        let prog = &self.progs[p];
        if prog.barrier_waiting.is_empty()
            || (prog.barrier_waiting.len() as u32) < prog.barrier_count
        {
            return Ok(());
        }
        let waiters = std::mem::take(&mut self.progs[p].barrier_waiting);
        self.release_waiters(p, waiters)
    }

    /// The barrier of program `p` opened: blocked waiters go on; spinning
    /// ones stop spinning (the rest of their spin is not executed) and go on
    /// as soon as they are on a CPU.
    fn release_waiters(&mut self, p: usize, waiters: Vec<usize>) -> Res<()> {
        let spinning = std::mem::take(&mut self.progs[p].barrier_spinning);
        for w in waiters {
            if spinning.contains(&w) {
                let running = self.tasks[w].state == TaskState::Running;
                let cpu = self.tasks[w].cpu;
                if running {
                    self.sync(cpu);
                }
                let left = std::mem::take(&mut self.tasks[w].remaining);
                self.tasks[w].c.work_assigned -= left;
                if running {
                    self.refresh(cpu);
                }
            } else if self.tasks[w].state == TaskState::Blocked {
                self.step(w)?;
            }
        }
        Ok(())
    }

    /// If `t` was spinning at its program's barrier, its spin ran out before
    /// the barrier opened: it blocks (libgomp's futex wait). Returns whether
    /// it did.
    fn spin_ran_out(&mut self, t: TaskId) -> Res<bool> {
        let p = self.tasks[t].program;
        let spinning = &mut self.progs[p].barrier_spinning;
        let Some(i) = spinning.iter().position(|&x| x == t) else {
            return Ok(false);
        };
        spinning.swap_remove(i);
        self.block(t, TaskState::Blocked, "barrier")?;
        Ok(true)
    }

    /// Begin a compute phase of `work` reference ns.
    fn begin_compute(&mut self, t: TaskId, work: f64, param: u32) {
        let task = &mut self.tasks[t];
        task.remaining = work;
        task.param = param;
        task.class = self.progs[task.program].params[param as usize].class;
        task.c.work_assigned += work;
    }

    /// Run `t`'s program forward until it needs a CPU, sleeps, blocks or
    /// exits. Called when a phase completes (the task is running) and when a
    /// task starts or is woken.
    fn step(&mut self, t: TaskId) -> Res<()> {
        if !self.progs[self.tasks[t].program]
            .barrier_spinning
            .is_empty()
            && self.spin_ran_out(t)?
        {
            return Ok(());
        }
        // Operations stepped through without time passing (barriers, zero
        // sleeps): a loop of them never ends, so it is stopped as a stall.
        let mut zero_time_ops: u64 = 0;
        loop {
            zero_time_ops += 1;
            if zero_time_ops >= STALL_EVENTS {
                let name = self.progs[self.tasks[t].program].name.clone();
                return Err(Box::new(SimError::Invariant {
                    time: self.now,
                    message: format!(
                        "simulated time stopped advancing: thread {} of program \"{name}\" \
                         went through {zero_time_ops} operations at {:.9} s without computing \
                         or sleeping; a loop of barriers or zero-length sleeps repeats forever \
                         at one instant",
                        self.tasks[t].thread,
                        self.now.as_secs_f64()
                    ),
                }));
            }
            if self.tasks[t].pending_io > 0 {
                let io = std::mem::take(&mut self.tasks[t].pending_io);
                return self.sleep_for(t, io, "io");
            }
            let task = &mut self.tasks[t];
            if task.pc as usize >= task.ops.len() {
                task.iter += 1;
                task.pc = 0;
                if task.iter >= task.loops {
                    return self.exit(t);
                }
            }
            let pc = task.pc as usize;
            let p = task.program;
            // Matched in place: only an operation with shared names (the
            // last arm) is cloned, so the common ones touch no reference
            // count and leave nothing to drop.
            match task.ops[pc] {
                Op::Compute { work, param } => {
                    self.tasks[t].pc += 1;
                    let w = self.jitter(p, work);
                    self.begin_compute(t, w, param);
                    return self.need_cpu(t);
                }
                Op::Sleep { ns } => {
                    self.tasks[t].pc += 1;
                    let ns = round_u64(self.jitter(p, ns as f64));
                    if ns > 0 {
                        return self.sleep_for(t, ns, "sleep");
                    }
                }
                Op::Barrier => {
                    self.tasks[t].pc += 1;
                    let prog = &mut self.progs[p];
                    if prog.barrier_waiting.len() as u32 + 1 >= prog.barrier_count {
                        // Last to arrive: release the others and go on.
                        let waiters = std::mem::take(&mut prog.barrier_waiting);
                        self.release_waiters(p, waiters)?;
                    } else {
                        prog.barrier_waiting.push(t);
                        let spin = prog.barrier_spin;
                        if spin > 0.0 && !self.vm.is_guest(t) {
                            // Spin first (libgomp): busy on the CPU until
                            // the barrier opens or the spin runs out.
                            self.progs[p].barrier_spinning.push(t);
                            self.begin_compute(t, spin, 0);
                            return self.need_cpu(t);
                        }
                        return self.block(t, TaskState::Blocked, "barrier");
                    }
                }
                Op::Pull => {
                    let prog = &mut self.progs[p];
                    if prog.chunks_left > 0 {
                        prog.chunks_left -= 1;
                        let (work, param, io) = (prog.chunk_work, prog.chunk_param, prog.chunk_io);
                        let w = self.jitter(p, work);
                        self.begin_compute(t, w, param);
                        self.tasks[t].pending_io = io.0;
                        return self.need_cpu(t);
                    }
                    self.tasks[t].pc += 1;
                }
                Op::WaitPeriod => {
                    self.tasks[t].pc += 1;
                    let now = self.now;
                    let (period, rel) = (self.progs[p].period, self.progs[p].rel_deadline);
                    let task = &mut self.tasks[t];
                    let response = now.since(task.release).0;
                    task.c.jobs += 1;
                    task.c.max_response_ns = task.c.max_response_ns.max(response);
                    if now > task.release + rel {
                        task.c.deadline_misses += 1;
                    }
                    task.release += period;
                    task.deadline = Some(task.release + rel);
                    let last_job =
                        task.iter + 1 >= task.loops && task.pc as usize >= task.ops.len();
                    if !last_job && now < task.release {
                        let at = task.release;
                        return self.sleep_until(t, at);
                    }
                }
                ref other => {
                    let other = other.clone();
                    // rt-app's operations act when the thread runs: a woken
                    // or new thread first gets a CPU (`sync.rs`).
                    if self.tasks[t].state != TaskState::Running {
                        self.begin_compute(t, 0.0, 0);
                        return self.need_cpu(t);
                    }
                    self.tasks[t].pc += 1;
                    if self.sync_op(t, other)? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// `t` has work to do: keep running if it is on a CPU, else become
    /// runnable.
    fn need_cpu(&mut self, t: TaskId) -> Res<()> {
        match self.tasks[t].state {
            TaskState::Running if self.vm.is_guest(t) => {
                self.g_need_cpu_running(t);
                Ok(())
            }
            TaskState::Running => {
                let cpu = self.tasks[t].cpu;
                if self.feature_ok(t, cpu)? {
                    self.refresh(cpu);
                }
                Ok(())
            }
            TaskState::NotStarted => self.wake(t, EnqFlags::New),
            _ => self.wake(t, EnqFlags::Wakeup),
        }
    }

    // --------------------------------------------------------------- agents

    fn observations(&mut self, idx: usize) -> Vec<Observation> {
        for c in 0..self.m.ncpus() {
            self.sync(c);
        }
        let now = self.now;
        let dt = now.since(self.agent_last[idx]).0.max(1) as f64;
        self.agent_last[idx] = now;
        let snaps = &mut self.agent_snap[idx];
        if snaps.len() < self.tasks.len() {
            snaps.resize(self.tasks.len(), Snap::default());
        }
        let n = self.m.ncpus();
        let mut out = Vec::new();
        for (t, task) in self.tasks.iter().enumerate() {
            if matches!(task.state, TaskState::NotStarted | TaskState::Exited) {
                continue;
            }
            let wait_extra = if task.state == TaskState::Runnable {
                now.since(task.state_since).0
            } else {
                0
            };
            let cur = Snap {
                run: task.c.run_ns,
                wait: task.c.wait_ns + wait_extra,
                instr: task.c.instructions,
                cycles: task.c.cycles,
                refs: task.c.cache_refs,
                misses: task.c.cache_misses,
                csw: task.c.csw_voluntary + task.c.csw_involuntary,
                mig: task.c.migrations,
            };
            let old = snaps[t];
            snaps[t] = cur;
            let run = (cur.run - old.run) as f64;
            let instr = cur.instr - old.instr;
            let refs = cur.refs - old.refs;
            let misses = cur.misses - old.misses;
            let run_s = (run * 1e-9).max(1e-9);
            out.push(Observation {
                task: t,
                program: self.progs[task.program].name.clone(),
                state: task.state.name(),
                cpu: task.cpu,
                nice: task.nice,
                affinity: task.affinity.to_vec(n),
                cpu_util: run / dt,
                ipc: if cur.cycles > old.cycles {
                    instr / (cur.cycles - old.cycles)
                } else {
                    0.0
                },
                miss_ratio: if refs > 0.0 { misses / refs } else { 0.0 },
                misses_per_instr: if instr > 0.0 { misses / instr } else { 0.0 },
                csw_per_s: (cur.csw - old.csw) as f64 / run_s,
                migrations_per_s: (cur.mig - old.mig) as f64 / run_s,
                wait_frac: (cur.wait - old.wait) as f64 / dt,
                runtime_s: task.c.run_ns as f64 * 1e-9,
            });
        }
        out
    }

    // ------------------------------------------------------------ main loop

    /// Run to the end of the scenario (or until every program finished).
    pub fn run(&mut self, progress: Option<Progress>) -> Result<(), SimError> {
        self.run_events(progress).map_err(|e| *e)
    }

    /// Prefetch the record of the task the next event will touch (the
    /// woken task, or the CPU's running one), so that its cache misses
    /// overlap this event's work (`crate::prefetch`); the scheduler may read
    /// ahead its own records ([`Scheduler::read_ahead`]).
    #[inline]
    fn read_ahead(&self) {
        let (t, cpu) = match self.q.next_in_bucket() {
            Some(Ev::Wake { task, .. }) => (Some(*task as usize), None),
            Some(Ev::Complete { cpu, .. } | Ev::Slice { cpu, .. } | Ev::Tick { cpu, .. }) => {
                let cpu = *cpu as usize;
                (self.hv.current.get(cpu).copied().flatten(), Some(cpu))
            }
            _ => return,
        };
        if let Some(task) = t.and_then(|t| self.tasks.get(t)) {
            crate::prefetch::lines(task, HOT_TASK_BYTES);
        }
        if let Some(t) = t {
            self.wake_lat.read_ahead(t);
        }
        let next = self.sched.read_ahead(t, cpu);
        if let Some(n) = next {
            if let Some(task) = self.tasks.get(n) {
                crate::prefetch::lines(task, HOT_TASK_BYTES);
            }
            // The task the policy expects to run next closes its wake-up
            // latency as it starts (`WakeLat::ran`).
            self.wake_lat.read_ahead(n);
        }
    }

    /// The event loop of [`Engine::run`], never inlined: `bench/growth.py
    /// --engine-only` counts instructions inside it by its symbol.
    #[inline(never)]
    fn run_events(&mut self, mut progress: Option<Progress>) -> Res<()> {
        // Initial state: every CPU idle at its idle power.
        for c in 0..self.m.ncpus() {
            self.refresh(c);
        }
        self.src = Src::Gov;
        {
            let (p, mut cx) = self.ctx(CtxFor::Host, NO_OBS);
            p.gov.init(&mut cx);
        }
        self.apply()?;
        // Cpusets with a fixed frequency set their domains (validated whole).
        for i in 0..self.hv.cpusets.len() {
            if let Some(mhz) = self.hv.cpusets[i].mhz {
                let mut doms: Vec<usize> = self.hv.cpusets[i]
                    .cpus
                    .iter()
                    .map(|&c| self.m.cpus[c].domain)
                    .collect();
                doms.dedup();
                for d in doms {
                    self.apply_freq(d, mhz);
                }
            }
        }
        self.src = Src::Sched;
        self.with_sched(|s, cx| s.init(cx));
        self.apply()?;
        self.vm_init()?;
        for i in 0..self.agents.len() {
            self.src = Src::Agent(i);
            {
                let (p, mut cx) = self.ctx(CtxFor::Agent, NO_OBS);
                p.agents[i].init(&mut cx);
            }
            self.apply()?;
            let first = self.agents[i].first_sample();
            self.q
                .push(first, EventClass::Sample, Ev::AgentSample { idx: i as u32 });
        }
        self.dyn_start();
        self.started = true;
        // The power at the start counts towards the peak (a run may have no
        // event at all).
        self.peak_power_w = self.total_power + self.base_w;
        if let Some(p) = self.gov.period() {
            self.q.push(p, EventClass::Sample, Ev::GovSample);
        }
        for p in 0..self.progs.len() {
            if self.sync_forked_only(p) {
                continue;
            }
            let at = self.progs[p].start;
            self.q
                .push(at, EventClass::Wake, Ev::ProgramStart { prog: p as u32 });
        }
        self.q.push(self.end, EventClass::End, Ev::End);
        let step_progress = SimTime((self.end.0 / 100).max(1));
        let mut next_progress = step_progress;
        let end_s = self.end.as_secs_f64();
        // Interrupt checks do not wait for simulated time to advance (it may
        // not): the callback also runs every `CHECK_EVENTS` events or
        // `CHECK_WALL` of wall time, whichever comes first. The clock is read
        // only every `CLOCK_EVENTS` events, so the loop pays a counter and a
        // compare per event.
        let mut popped: u64 = 0;
        let mut next_clock = CLOCK_EVENTS;
        let mut last_cb_popped: u64 = 0;
        let mut last_cb_wall = std::time::Instant::now();
        let check_wall = self.check_wall;
        // A run whose simulated time stops advancing is stuck in a loop of
        // zero-length work; it is stopped after `stall_limit` events at one
        // instant (more when the scenario has many tasks, whose wake-ups at
        // one instant are legitimate).
        let stall_limit = STALL_EVENTS.max(16 * self.tasks.len() as u64);
        let mut stall_at = self.now;
        let mut stalled: u64 = 0;

        while let Some((time, _class, ev)) = self.q.pop() {
            if time > self.end {
                break;
            }
            popped += 1;
            if popped >= next_clock {
                next_clock = popped + CLOCK_EVENTS;
                if popped - last_cb_popped >= CHECK_EVENTS || last_cb_wall.elapsed() >= check_wall {
                    last_cb_popped = popped;
                    last_cb_wall = std::time::Instant::now();
                    if self.ask(&mut progress, end_s) {
                        break;
                    }
                }
            }
            if time == stall_at {
                stalled += 1;
                if stalled >= stall_limit {
                    return Err(self.stall_error(&ev, stalled));
                }
            } else {
                stall_at = time;
                stalled = 0;
            }
            debug_assert!(time >= self.now, "time went backwards");
            if time < self.now {
                return Err(Box::new(SimError::Invariant {
                    time: self.now,
                    message: format!("event at {time} is in the past"),
                }));
            }
            self.now = time;
            if let Ev::End = ev {
                self.end = time;
                break;
            }
            self.read_ahead();
            if !self.handle(ev)? {
                continue;
            }
            // A large program start goes on in chunks, with a Ctrl-C check
            // between them when `CHECK_WALL` has passed.
            if self.starting.is_some() {
                while let Some((p, from)) = self.starting.take() {
                    if last_cb_wall.elapsed() >= check_wall {
                        last_cb_wall = std::time::Instant::now();
                        if self.ask(&mut progress, end_s) {
                            break;
                        }
                    }
                    self.start_threads(p, from)?;
                }
                if self.interrupted.is_some() {
                    break;
                }
            }
            self.events += 1;
            self.process_resched()?;
            let p = self.total_power + self.base_w;
            if p > self.peak_power_w {
                self.peak_power_w = p;
            }
            if self.opts.check {
                self.check_invariants()?;
            }
            if self.now >= next_progress {
                next_progress = self.now + step_progress;
                if self.ask(&mut progress, end_s) {
                    break;
                }
            }
        }
        // The End event (always queued at the duration, or earlier when every
        // program finished) or an interrupt closed the loop: `now` is the end
        // of the run.
        self.end = self.now;
        let interrupted = self.interrupted.is_some();
        if !interrupted && self.q.is_empty() && self.programs_done < self.progs.len() {
            let stuck = self
                .tasks
                .iter()
                .filter(|t| t.state == TaskState::Blocked)
                .count();
            if stuck > 0 {
                self.warnings.push(format!(
                    "deadlock: {stuck} task(s) blocked at barriers with nothing left to wake them"
                ));
            }
        }
        if !interrupted {
            if let Some(w) = self.never_ran_warning() {
                self.warnings.push(w);
            }
        }
        for c in 0..self.m.ncpus() {
            self.sync(c);
            if self.hv.current[c].is_some() {
                let t = self.hv.current[c].unwrap();
                let start = self.cpus[c].run_since;
                let (t_ns, end_ns) = (start.0, self.now.0);
                self.emit(1, c as u64, t as u64, start.0, || TraceEvent::Run {
                    t_ns,
                    end_ns,
                    cpu: c,
                    task: t,
                });
            }
        }
        self.dyn_finish();
        for t in 0..self.tasks.len() {
            let s = self.tasks[t].state;
            self.set_state(t, s);
        }
        if let Some(cb) = progress.as_mut().filter(|_| !interrupted) {
            // The final 100% report: the run is complete, so an interrupt
            // arriving now has nothing left to stop.
            let _ = cb(self.now.as_secs_f64(), end_s);
        }
        Ok(())
    }

    /// Ask the progress callback at most `d` of wall time apart (default
    /// 50 ms) while events or a large program start keep the run busy; with
    /// zero, at every chunk of a program start and every clock read.
    pub fn set_check_wall(&mut self, d: std::time::Duration) {
        self.check_wall = d;
    }

    /// The progress callback asked to stop (Ctrl-C): the run ends at the
    /// current instant and its results so far are kept, marked partial.
    /// Report progress to the callback, if there is one; when it answers
    /// with an error (Ctrl-C), mark the run interrupted and return true.
    fn ask(&mut self, progress: &mut Option<Progress>, end_s: f64) -> bool {
        let Some(cb) = progress.as_mut() else {
            return false;
        };
        match cb(self.now.as_secs_f64(), end_s) {
            Ok(()) => false,
            Err(m) => {
                self.interrupt(m, end_s);
                true
            }
        }
    }

    fn interrupt(&mut self, why: String, end_s: f64) {
        let now_s = self.now.as_secs_f64();
        self.warnings.push(format!(
            "run interrupted at {now_s:.6} s of {end_s:.6} s simulated, after {} events ({why}): \
             the results are partial",
            self.events
        ));
        self.interrupted = Some(Interrupt { at: self.now, why });
    }

    /// Why and when the run was interrupted, if it was (its results are
    /// then partial: they end at that instant).
    pub fn interrupted(&self) -> Option<&Interrupt> {
        self.interrupted.as_ref()
    }

    /// The programs of the tasks an event concerns: the task it wakes, the
    /// program it starts, the task running on the CPU it fires on.
    fn ev_programs(&self, ev: &Ev) -> Vec<usize> {
        let task_prog = |t: usize| self.tasks.get(t).map(|t| t.program);
        let cpu_prog = |c: u32| {
            self.hv
                .current
                .get(c as usize)
                .copied()
                .flatten()
                .and_then(task_prog)
        };
        let one = match *ev {
            Ev::Wake { task, .. } | Ev::RunEnd { task, .. } => task_prog(task as usize),
            Ev::ProgramStart { prog } => Some(prog as usize),
            Ev::Complete { cpu, .. } | Ev::Tick { cpu, .. } | Ev::Slice { cpu, .. } => {
                cpu_prog(cpu)
            }
            _ => None,
        };
        one.into_iter().collect()
    }

    /// The error for a run whose simulated time stopped advancing: it names
    /// the programs whose events were being handled and those running.
    fn stall_error(&self, ev: &Ev, events: u64) -> Box<SimError> {
        let mut progs = self.ev_programs(ev);
        progs.extend(
            self.hv
                .current
                .iter()
                .flatten()
                .filter_map(|&t| self.tasks.get(t).map(|t| t.program)),
        );
        progs.sort_unstable();
        progs.dedup();
        let names: Vec<String> = progs
            .iter()
            .filter_map(|&p| self.progs.get(p).map(|p| format!("\"{}\"", p.name)))
            .collect();
        let who = if names.is_empty() {
            "no program (the policies' own events)".to_string()
        } else {
            format!("program(s) {}", names.join(", "))
        };
        Box::new(SimError::Invariant {
            time: self.now,
            message: format!(
                "simulated time stopped advancing: {events} events at {:.9} s without time \
                 moving, handling {who}; a program whose loop does no work (zero work_ms or \
                 sleep) repeats forever at one instant",
                self.now.as_secs_f64()
            ),
        })
    }

    /// A warning naming the tasks that never ran although they existed for
    /// the whole run, when no task ran at all (a policy that never picks).
    fn never_ran_warning(&self) -> Option<String> {
        let live: Vec<&Task> = self
            .tasks
            .iter()
            .filter(|t| t.state == TaskState::Runnable && self.progs.get(t.program).is_some())
            .collect();
        if live.is_empty() || self.tasks.iter().any(|t| t.c.run_ns > 0) {
            return None;
        }
        const SHOWN: usize = 10;
        let mut names: Vec<String> = live
            .iter()
            .take(SHOWN)
            .map(|t| format!("{}[{}]", self.progs[t.program].name, t.thread))
            .collect();
        if live.len() > SHOWN {
            names.push(format!("and {} more", live.len() - SHOWN));
        }
        Some(format!(
            "starvation: no task ever ran ({} task(s) never ran: {}); the scheduler \
             \"{}\" never picked a task to run",
            live.len(),
            names.join(", "),
            self.sched.name()
        ))
    }

    /// Handle one event. Returns false for a stale event.
    fn handle(&mut self, ev: Ev) -> Res<bool> {
        match ev {
            Ev::Complete { cpu, gen } => {
                let cpu = cpu as usize;
                if self.cpus[cpu].comp_gen != gen {
                    return Ok(false);
                }
                let Some(t) = self.exec_task(cpu) else {
                    return Ok(false);
                };
                self.sync(cpu);
                let left = std::mem::take(&mut self.tasks[t].remaining);
                self.tasks[t].c.work_done += left;
                self.step(t)?;
            }
            Ev::Wake { task, gen } => {
                let t = task as usize;
                if self.tasks[t].wake_gen != gen || self.tasks[t].state != TaskState::Sleeping {
                    return Ok(false);
                }
                self.step(t)?;
            }
            Ev::ProgramStart { prog } => self.start_program(prog as usize)?,
            Ev::Tick { cpu, gen } => {
                let cpu = cpu as usize;
                let c = &mut self.cpus[cpu];
                if c.tick_gen != gen {
                    return Ok(false);
                }
                self.flags.ticks[cpu].armed = false;
                let Some(t) = self.hv.current[cpu] else {
                    return Ok(false);
                };
                let host = self.flags.ticks[cpu].wanted && !self.is_class_task(t);
                let guest = self.vm.wants_tick(t);
                if !host && !guest {
                    return Ok(false);
                }
                self.sync(cpu);
                if host {
                    self.cpus[cpu].ticks += 1;
                    self.src = Src::Sched;
                    self.with_sched(|s, cx| s.tick(cx, cpu, t));
                    self.apply()?;
                }
                if guest {
                    self.vm_guest_tick(cpu)?;
                }
                if self.hv.current[cpu].is_some()
                    && self.wants_tick(cpu)
                    && !self.flags.ticks[cpu].armed
                {
                    self.arm_tick(cpu);
                }
            }
            Ev::Timer { token, gen } => {
                if self.timers.get(&token) != Some(&gen) {
                    return Ok(false);
                }
                self.timers.remove(&token);
                self.src = Src::Sched;
                self.with_sched(|s, cx| s.on_timer(cx, token));
                self.apply()?;
            }
            Ev::FreqApply { domain, gen } => {
                let d = domain as usize;
                if self.dom_gen[d] != gen {
                    return Ok(false);
                }
                let mhz = self.pending_mhz[d];
                self.apply_freq(d, mhz);
            }
            Ev::GovSample => {
                for c in 0..self.m.ncpus() {
                    self.sync(c);
                }
                let busy: Vec<u64> = self.cpus.iter().map(|c| c.busy_ns).collect();
                self.src = Src::Gov;
                {
                    let (p, mut cx) = self.ctx(CtxFor::Host, NO_OBS);
                    p.gov.sample(&mut cx, &busy);
                }
                self.apply()?;
                if let Some(p) = self.gov.period() {
                    self.q.push(self.now + p, EventClass::Sample, Ev::GovSample);
                }
            }
            Ev::AgentSample { idx } => {
                let i = idx as usize;
                let obs = self.observations(i);
                self.src = Src::Agent(i);
                {
                    let (p, mut cx) = self.ctx(CtxFor::Agent, &obs);
                    p.agents[i].sample(&mut cx);
                }
                self.apply()?;
                let p = self.agents[i].period();
                self.q
                    .push(self.now + p, EventClass::Sample, Ev::AgentSample { idx });
            }
            Ev::Dyn(d) => self.handle_dyn(d)?,
            Ev::Slice { cpu, gen } => {
                if !self.dsq_slice_expired(cpu as usize, gen) {
                    return Ok(false);
                }
            }
            Ev::RunEnd { task, gen } => {
                if !self.run_for_end(task as usize, gen)? {
                    return Ok(false);
                }
            }
            Ev::Class { kind, id, gen } => return self.class_event(kind, id, gen),
            Ev::End => {}
        }
        Ok(true)
    }

    // ----------------------------------------------------------- invariants

    /// Assert the engine's invariants (on in tests; `--check` on the CLI).
    pub fn check_invariants(&mut self) -> Result<(), SimError> {
        let fail = |s: &Self, m: String| {
            Err(SimError::Invariant {
                time: s.now,
                message: m,
            })
        };
        let mut seen = vec![false; self.tasks.len()];
        for c in 0..self.m.ncpus() {
            if let Some(t) = self.hv.current[c] {
                if seen[t] {
                    return fail(self, format!("task {t} runs on two cpus"));
                }
                seen[t] = true;
                let task = &self.tasks[t];
                if task.state != TaskState::Running {
                    return fail(
                        self,
                        format!("cpu {c} runs task {t} which is {}", task.state.name()),
                    );
                }
                if !self.hv.online[c] {
                    return fail(self, format!("task {t} runs on offline cpu {c}"));
                }
                if !task.affinity.contains(c) {
                    return fail(
                        self,
                        format!("task {t} runs on cpu {c} outside its affinity"),
                    );
                }
                if task.cpu != c {
                    return fail(
                        self,
                        format!(
                            "task {t} runs on cpu {c} but is assigned to cpu {}",
                            task.cpu
                        ),
                    );
                }
            }
        }
        if let Err(m) = self.vm_check() {
            return fail(self, m);
        }
        for (t, task) in self.tasks.iter().enumerate() {
            // A guest task is Running on its vCPU, not on a host CPU.
            if task.state == TaskState::Running && !seen[t] && !self.is_guest(t) {
                return fail(self, format!("task {t} is running but on no cpu"));
            }
            let c = &task.c;
            let lhs = c.work_done + task.remaining;
            if (lhs - c.work_assigned).abs() > 1e-6 * c.work_assigned.max(1.0) {
                return fail(
                    self,
                    format!(
                        "work not conserved for task {t}: done {} + remaining {} != assigned {}",
                        c.work_done, task.remaining, c.work_assigned
                    ),
                );
            }
            // Progress can never exceed the fastest CPU's rate.
            let bound = c.run_ns as f64 * self.max_rate * (1.0 + 1e-9) + 1.0;
            if c.work_done > bound {
                return fail(
                    self,
                    format!(
                        "task {t} did {} ns of work in {} ns of run time",
                        c.work_done, c.run_ns
                    ),
                );
            }
        }
        let e: f64 = self.cpus.iter().map(|c| c.energy).sum();
        if e + 1e-12 < self.last_energy {
            return fail(
                self,
                format!("energy decreased from {} to {e}", self.last_energy),
            );
        }
        self.last_energy = e;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{ceil_u64, round_u64};
    use proptest::prelude::*;

    #[test]
    fn rounding_helpers_match_std_on_edge_values() {
        let edges = [
            0.0,
            -0.0,
            0.5,
            0.49999999999999994,
            1.5,
            2.5,
            -0.3,
            -2.5,
            4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            1.8446744073709552e19,
            3e19,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            f64::MAX,
        ];
        for x in edges {
            assert_eq!(ceil_u64(x), x.ceil() as u64, "ceil {x}");
            assert_eq!(round_u64(x), x.round() as u64, "round {x}");
        }
    }

    proptest! {
        #[test]
        fn rounding_helpers_match_std(bits in any::<u64>(), small in 0.0f64..1e12) {
            for x in [f64::from_bits(bits), small] {
                prop_assert_eq!(ceil_u64(x), x.ceil() as u64);
                prop_assert_eq!(round_u64(x), x.round() as u64);
            }
        }
    }
}
