//! The engine side of dynamic processors: CPUs going offline and online
//! during a run, fused execution contexts, stop-machine, processor proxies
//! and the background OS activity they stand in for.
//!
//! Semantics (see `docs/dynamic.md`):
//! * A reconfiguration is requested by a policy ([`crate::policy::Ctx::reconfigure`])
//!   or scripted in the scenario. It is validated at once; a bad one (an
//!   offline CPU taken offline again, a CPU in two fused objects, the last
//!   CPU) ends the run with a clear error, never a panic.
//! * CPUs that leave stop taking work at the request: their running task is
//!   preempted and placed elsewhere, their queued tasks are re-placed. CPUs
//!   that come back take work when the operation completes.
//! * The operation walks its steps ([`crate::hw::reconfig`]) in simulated
//!   time. A stop-machine step halts every other online CPU for its duration:
//!   the tasks running there make no progress (counted as stall time), which
//!   is the lost work co-running programs see.
//! * Fusing and splitting is done by the representative CPU, so the task
//!   running there waits for the operation. A completed fuse runs the
//!   representative at the fused speedup of its level and class.
//! * While a CPU is proxied, the IPIs still addressed to it (TLB shootdowns;
//!   it gets no rescheduling IPIs, as it runs only the idle thread) are handled
//!   by its proxy at `proxy_ipi_us` each, charged to the proxy CPU, and
//!   counted. An idle proxied CPU is in an RCU quiescent state: the callbacks
//!   it would have run are counted as avoided.
//! * Deferred hotplug: the proxies of a configuration that lasts longer than
//!   the threshold are replaced by a real (parallel) hotplug, whose
//!   stop-machine again halts the other CPUs.
//! * Halting (`halt`): for hardware whose disabled CPUs still take
//!   interrupts. A halted CPU stays in the OS's online mask, runs the idle
//!   thread in a sleep state and handles its own IPIs (counted, not proxied).
//!   Fusing SMT siblings this way leaves the representative's core
//!   un-shared: its thread runs without the SMT factor (the engine's speed
//!   model sees an idle sibling) times the level's speedup (1 unless
//!   configured); a Turbo-Boost-like group runs its representative at the
//!   level's speedup while the others sleep.

use super::Res;
use super::{Engine, Ev};
use crate::error::SimError;
use crate::hw::dynamic::{DynConfig, ReconfigOp, Reconfigured};
use crate::hw::reconfig::{Direction, Mechanism, Step, StepKind};
use crate::hw::CpuId;
use crate::os::{CpuSet, TaskState};
use crate::policy::EnqFlags;
use crate::time::SimTime;
use crate::trace::TraceEvent;
use serde::Serialize;

use super::queue::EventClass;

/// A dynamic-processor event.
#[derive(Copy, Clone, Debug)]
pub(super) enum DynEv {
    /// A scripted operation is due.
    Scripted { idx: u32 },
    /// Stop-machine step `step` of operation `op` begins.
    Stop { op: u32, step: u32 },
    /// Operation `op` completes.
    Done { op: u32 },
    /// The deferred hotplug of operation `op` is due.
    Deferred { op: u32 },
}

/// What a CPU is doing, dynamically.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Mode {
    /// In service.
    Online,
    /// Being reconfigured by operation `op`.
    Transition { op: usize },
    /// Out of the OS's online mask (hotplugged away).
    Offline,
    /// Out of service, stood in for by a proxy on `by` since `since`.
    Proxied {
        by: CpuId,
        since: SimTime,
        op: usize,
    },
    /// Out of service, halted in the idle thread since `since` (mechanism
    /// `halt`): still in the online mask and still taking its interrupts.
    Halted { since: SimTime, op: usize },
}

/// A fused object.
#[derive(Clone, Debug)]
struct Fused {
    cpus: Vec<CpuId>,
    mech: Mechanism,
    active: bool,
}

/// Who asked for an operation (for error messages).
#[derive(Clone, Debug)]
pub(super) enum Origin {
    Policy,
    Script(usize),
}

/// One reconfiguration, as the results report it.
#[derive(Clone, Debug, Serialize)]
pub struct ReconfigRecord {
    /// Index.
    pub id: usize,
    /// `offline`, `online`, `fuse`, `split` or `deferred-hotplug`.
    pub op: &'static str,
    /// The CPUs reconfigured (for fuse and split: all of the object's CPUs).
    pub cpus: Vec<CpuId>,
    /// Mechanism name.
    pub mechanism: &'static str,
    /// When requested, s.
    pub start_s: f64,
    /// When completed, s (None if the run ended first).
    pub end_s: Option<f64>,
    /// Latency from the cost model, µs.
    pub latency_us: f64,
    /// Time spent in stop-machine, µs.
    pub stop_machine_us: f64,
    /// How many stop-machine steps it ran.
    pub stop_machines: u32,
    /// Run time lost by tasks on other CPUs halted by its stop-machines, ms.
    pub halted_busy_ms: f64,
    /// The steps, `name:µs` joined by spaces.
    pub steps: String,
}

/// Per-CPU counters of proxies and background activity.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProxyRow {
    /// The CPU.
    pub cpu: CpuId,
    /// Time it was proxied (out of service, stood in for), s.
    pub proxied_s: f64,
    /// Time it was hotplugged away, s.
    pub offline_s: f64,
    /// IPIs this CPU handled as a proxy for others.
    pub ipis_handled: f64,
    /// RCU callbacks this CPU did not have to run while proxied (idle is quiescent).
    pub rcu_avoided: f64,
    /// CPU time this CPU spent in proxy context, ms.
    pub proxy_ms: f64,
    /// Time it was halted (mechanism `halt`: idle thread, no proxy), s.
    pub halted_s: f64,
    /// IPIs it took itself while halted (it still receives interrupts).
    pub ipis_while_halted: f64,
}

/// Everything the results report about dynamic processors.
#[derive(Clone, Debug, Serialize)]
pub struct DynResults {
    /// Every reconfiguration.
    pub reconfigs: Vec<ReconfigRecord>,
    /// Per CPU.
    pub proxies: Vec<ProxyRow>,
}

/// An operation being carried out.
#[derive(Clone, Debug)]
struct OpState {
    op: ReconfigOp,
    /// For `Deferred`: the CPUs being hotplugged for real.
    deferred: bool,
    mech: Mechanism,
    targets: Vec<CpuId>,
    proxy: Option<CpuId>,
    steps: Vec<Step>,
    start: SimTime,
}

/// Dynamic state of the run.
pub(super) struct DynState {
    cfg: DynConfig,
    mode: Vec<Mode>,
    fused: Vec<Option<Fused>>,
    halt_until: Vec<SimTime>,
    ops: Vec<OpState>,
    records: Vec<ReconfigRecord>,
    proxies: Vec<ProxyRow>,
    offline_since: Vec<Option<SimTime>>,
}

impl DynState {
    pub(super) fn new(cfg: DynConfig, ncpus: usize) -> DynState {
        DynState {
            cfg,
            mode: vec![Mode::Online; ncpus],
            fused: vec![None; ncpus],
            halt_until: vec![SimTime::ZERO; ncpus],
            ops: Vec::new(),
            records: Vec::new(),
            proxies: (0..ncpus)
                .map(|cpu| ProxyRow {
                    cpu,
                    ..Default::default()
                })
                .collect(),
            offline_since: vec![None; ncpus],
        }
    }

    /// Speed factor of `cpu` for `class`: the fused speedup of an active
    /// object it represents, else 1.
    #[inline]
    pub(super) fn speed(&self, cpu: CpuId, class: usize) -> f64 {
        match &self.fused[cpu] {
            Some(f) if f.active => self.cfg.fused_speedup(f.cpus.len(), class),
            _ => 1.0,
        }
    }

    /// The configured fusion levels, in the scenario's order (the engine
    /// keeps them for `Ctx::fusion_levels`).
    pub(super) fn fusion_levels(&self) -> Vec<usize> {
        self.cfg.fusion.iter().map(|f| f.0).collect()
    }

    /// Until when `cpu` is halted by a stop-machine.
    #[inline]
    pub(super) fn halt_until(&self, cpu: CpuId) -> SimTime {
        self.halt_until[cpu]
    }

    /// Whether `cpu` is borrowed by a fused object (its run queue stays put).
    #[inline]
    pub(super) fn borrowed(&self, cpu: CpuId) -> bool {
        self.fused
            .iter()
            .flatten()
            .any(|f| f.cpus[1..].contains(&cpu))
    }

    /// Highest speed factor any CPU can reach.
    pub(super) fn max_speed(&self) -> f64 {
        self.cfg.max_speedup()
    }

    /// CPUs in the OS's online mask (proxied ones count: the OS still
    /// believes they are there).
    fn os_online(&self) -> usize {
        self.mode.iter().filter(|m| **m != Mode::Offline).count()
    }

    /// The fused object `cpu` belongs to (its representative).
    fn owner(&self, cpu: CpuId) -> Option<CpuId> {
        self.fused
            .iter()
            .enumerate()
            .find(|(_, f)| f.as_ref().is_some_and(|f| f.cpus.contains(&cpu)))
            .map(|(r, _)| r)
    }
}

fn steps_text(steps: &[Step]) -> String {
    steps
        .iter()
        .map(|s| format!("{}:{:.3}", s.name, s.us))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Engine {
    /// Speed factor of a fused object `cpu` represents, for `class` (1
    /// without dynamic processors).
    #[inline]
    pub(super) fn dyn_fusion(&self, cpu: CpuId, class: usize) -> f64 {
        self.dynm.as_ref().map_or(1.0, |d| d.speed(cpu, class))
    }

    /// Whether `cpu` is borrowed by a fused object (its run queue stays
    /// put); never without dynamic processors.
    #[inline]
    pub(super) fn dyn_borrowed(&self, cpu: CpuId) -> bool {
        self.dynm.as_ref().is_some_and(|d| d.borrowed(cpu))
    }

    /// Until when `cpu` is halted by a stop-machine (0 without dynamic
    /// processors).
    #[inline]
    pub(super) fn dyn_halt_until(&self, cpu: CpuId) -> SimTime {
        self.dynm
            .as_ref()
            .map_or(SimTime::ZERO, |d| d.halt_until(cpu))
    }

    /// Queue the scripted operations (called once at the start of a run).
    pub(super) fn dyn_start(&mut self) {
        let Some(d) = self.dynm.as_ref() else {
            return;
        };
        let times: Vec<SimTime> = d.cfg.events.iter().map(|e| e.0).collect();
        for (i, at) in times.into_iter().enumerate() {
            self.q.push(
                at,
                EventClass::Hardware,
                Ev::Dyn(DynEv::Scripted { idx: i as u32 }),
            );
        }
    }

    /// Handle a dynamic-processor event.
    pub(super) fn handle_dyn(&mut self, ev: DynEv) -> Res<()> {
        match ev {
            DynEv::Scripted { idx } => {
                let i = idx as usize;
                let (op, mech) = {
                    let d = self.dynm.as_ref().expect("dynamic state");
                    let e = &d.cfg.events[i];
                    (e.1.clone(), e.2)
                };
                self.reconfigure(op, mech, Origin::Script(i))
            }
            DynEv::Stop { op, step } => {
                self.stop_machine(op as usize, step as usize);
                Ok(())
            }
            DynEv::Done { op } => self.reconfig_done(op as usize),
            DynEv::Deferred { op } => self.deferred_due(op as usize),
        }
    }

    fn dyn_err(&self, origin: &Origin, op: &ReconfigOp, msg: String) -> Box<SimError> {
        let what = format!("reconfigure({} {:?})", op.name(), op.cpus());
        match origin {
            Origin::Policy => self.policy_err(format!("{what}: {msg}")),
            Origin::Script(i) => Box::new(SimError::Scenario(format!(
                "dynamic.events[{i}] at t={}: {what}: {msg}",
                self.now
            ))),
        }
    }

    /// Validate and start a reconfiguration.
    pub(super) fn reconfigure(
        &mut self,
        op: ReconfigOp,
        mech: Option<Mechanism>,
        origin: Origin,
    ) -> Res<()> {
        let Some(d) = self.dynm.as_ref() else {
            return Err(self.dyn_err(
                &origin,
                &op,
                "the scenario has no [dynamic] section, so its cpus cannot be reconfigured".into(),
            ));
        };
        let n = self.m.ncpus();
        let cpus = op.cpus();
        if cpus.is_empty() {
            return Err(self.dyn_err(&origin, &op, "empty cpu list".into()));
        }
        for (i, &c) in cpus.iter().enumerate() {
            if c >= n {
                return Err(self.dyn_err(
                    &origin,
                    &op,
                    format!("cpu {c} does not exist (machine has {n} cpus)"),
                ));
            }
            if cpus[..i].contains(&c) {
                return Err(self.dyn_err(&origin, &op, format!("cpu {c} is named twice")));
            }
        }
        let describe = |m: Mode| match m {
            Mode::Online => "online".to_string(),
            Mode::Transition { op } => format!("being reconfigured (operation {op})"),
            Mode::Offline => "offline (hotplugged)".to_string(),
            Mode::Proxied { by, .. } => format!("offline (proxied by cpu {by})"),
            Mode::Halted { .. } => "halted (mechanism halt)".to_string(),
        };
        let err = |s: &Self, msg: String| Err(s.dyn_err(&origin, &op, msg));
        // Decide the mechanism, targets and proxy; check the CPUs' states.
        let (dir, targets, proxy, mech) = match &op {
            ReconfigOp::Offline(c) => {
                for &x in c {
                    if d.mode[x] != Mode::Online {
                        return err(
                            self,
                            format!(
                                "cpu {x} is {}; only an online cpu can be taken offline",
                                describe(d.mode[x])
                            ),
                        );
                    }
                    if let Some(r) = d.owner(x) {
                        return err(
                            self,
                            format!(
                                "cpu {x} belongs to the fused object of cpu {r}; split it first"
                            ),
                        );
                    }
                }
                let mech = mech.unwrap_or(d.cfg.mechanism);
                let proxy = (0..n).find(|&p| d.mode[p] == Mode::Online && !c.contains(&p));
                if proxy.is_none() {
                    return err(self, "it would leave no cpu online".into());
                }
                (Direction::Offline, c.clone(), proxy, mech)
            }
            ReconfigOp::Fuse(c) => {
                if let Err(msg) = d.cfg.check_fusion(c, &self.m) {
                    return err(self, msg);
                }
                for &x in c {
                    if d.mode[x] != Mode::Online {
                        return err(
                            self,
                            format!(
                                "cpu {x} is {}; only online cpus can fuse",
                                describe(d.mode[x])
                            ),
                        );
                    }
                    if let Some(r) = d.owner(x) {
                        return err(self, format!("cpu {x} already belongs to the fused object of cpu {r}; a cpu is in at most one object"));
                    }
                }
                let mech = mech.unwrap_or(d.cfg.mechanism);
                (Direction::Offline, c[1..].to_vec(), Some(c[0]), mech)
            }
            ReconfigOp::Online(c) => {
                let mut family: Option<Mechanism> = None;
                for &x in c {
                    match d.mode[x] {
                        Mode::Offline | Mode::Proxied { .. } | Mode::Halted { .. } => {}
                        m => {
                            return err(
                                self,
                                format!(
                                    "cpu {x} is {}; only an offline cpu can be brought online",
                                    describe(m)
                                ),
                            );
                        }
                    }
                    if let Some(r) = d.owner(x) {
                        return err(self, format!("cpu {x} is borrowed by the fused object of cpu {r}; split it instead"));
                    }
                    let m = self.dyn_back_mech(x, mech);
                    if family.is_some_and(|f| f != m) {
                        return err(self, "the cpus went offline by different mechanisms; bring them back separately".into());
                    }
                    family = Some(m);
                }
                let m = family.expect("non-empty");
                if let Some(req) = mech {
                    if (m == Mechanism::Halt) != (req == Mechanism::Halt) {
                        return err(self, format!("the cpus went offline with {m}; they come back with the same mechanism, not {req}"));
                    }
                    if req.uses_proxies() != m.uses_proxies() && req != Mechanism::DeferredHotplug {
                        return err(self, format!("the cpus went offline with {}; they come back with the same kind of mechanism, not {req}", m));
                    }
                }
                (Direction::Online, c.clone(), None, m)
            }
            ReconfigOp::Split(r) => {
                let Some(f) = d.fused[*r].as_ref().filter(|f| f.active) else {
                    return err(
                        self,
                        format!("cpu {r} represents no (completed) fused object"),
                    );
                };
                if let Some(req) = mech {
                    if req != f.mech {
                        return err(self, format!("the object was fused with {}; it splits with the same mechanism, not {req}", f.mech));
                    }
                }
                let borrowed = f.cpus[1..].to_vec();
                let m = self.dyn_back_mech(borrowed[0], Some(f.mech));
                (Direction::Online, borrowed, Some(*r), m)
            }
        };
        // Plan the steps.
        let d = self.dynm.as_ref().expect("dynamic state");
        let online = match dir {
            Direction::Offline => d.os_online(),
            Direction::Online => d.os_online(),
        };
        // Proxied CPUs being split are still in the OS's online mask; a
        // proxy teardown does not walk it, a hotplug online does.
        let count = targets.len();
        let mut steps = d.cfg.costs.steps(mech, dir, count, online);
        if dir == Direction::Online
            && mech == Mechanism::DeferredHotplug
            && targets.iter().all(|&c| d.mode[c] == Mode::Offline)
        {
            steps = d
                .cfg
                .costs
                .steps(Mechanism::ParallelHotplug, dir, count, online);
        }
        let id = d.ops.len();
        self.dyn_begin(
            OpState {
                op,
                deferred: false,
                mech,
                targets,
                proxy,
                steps,
                start: self.now,
            },
            id,
        )
    }

    /// The mechanism that brings `cpu` back: the one it left with (a
    /// deferred-hotplug CPU that was really hotplugged comes back by
    /// parallel hotplug).
    fn dyn_back_mech(&self, cpu: CpuId, requested: Option<Mechanism>) -> Mechanism {
        let d = self.dynm.as_ref().expect("dynamic state");
        match d.mode[cpu] {
            Mode::Proxied { op, .. } | Mode::Halted { op, .. } => d.ops[op].mech,
            Mode::Offline => match requested {
                Some(Mechanism::ParallelHotplug) | Some(Mechanism::DeferredHotplug) => {
                    Mechanism::ParallelHotplug
                }
                _ => {
                    // The operation that took it offline decides.
                    d.ops
                        .iter()
                        .rev()
                        .find(|o| o.targets.contains(&cpu))
                        .map(|o| {
                            if o.deferred {
                                Mechanism::ParallelHotplug
                            } else {
                                o.mech
                            }
                        })
                        .unwrap_or(Mechanism::Hotplug)
                }
            },
            _ => requested.unwrap_or(d.cfg.mechanism),
        }
    }

    /// Start operation `id` now: take the leaving CPUs out of service,
    /// charge the initiating CPU, and queue its stop-machine steps and its
    /// completion.
    fn dyn_begin(&mut self, st: OpState, id: usize) -> Res<()> {
        let leaving = matches!(st.op, ReconfigOp::Offline(_) | ReconfigOp::Fuse(_));
        let latency_us: f64 = st.steps.iter().map(|s| s.us).sum();
        let latency = SimTime::from_ns_f64(latency_us * 1e3);
        let mut offsets = Vec::new();
        let mut t = 0.0;
        for (i, s) in st.steps.iter().enumerate() {
            if s.kind == StepKind::StopMachine {
                offsets.push((i, t));
            }
            t += s.us;
        }
        let record = ReconfigRecord {
            id,
            op: if st.deferred {
                "deferred-hotplug"
            } else {
                st.op.name()
            },
            cpus: match &st.op {
                ReconfigOp::Split(r) => {
                    let mut v = vec![*r];
                    v.extend(&st.targets);
                    v
                }
                o => o.cpus(),
            },
            mechanism: st.mech.name(),
            start_s: self.now.as_secs_f64(),
            end_s: None,
            latency_us,
            stop_machine_us: offsets.iter().fold(0.0, |a, &(i, _)| a + st.steps[i].us),
            stop_machines: offsets.len() as u32,
            halted_busy_ms: 0.0,
            steps: steps_text(&st.steps),
        };
        let targets = st.targets.clone();
        let st_deferred = st.deferred;
        let initiator = match &st.op {
            ReconfigOp::Fuse(c) => Some(c[0]),
            ReconfigOp::Split(r) => Some(*r),
            _ => None,
        };
        // A proxy stops standing in (a halted CPU stops idling) when the
        // operation that brings the CPU back starts: account the stretch now,
        // before the CPU's mode says "in transition".
        if !st.deferred {
            for &c in &st.targets {
                let d = self.dynm.as_ref().expect("dynamic state");
                if matches!(d.mode[c], Mode::Proxied { .. } | Mode::Halted { .. }) {
                    self.dyn_end_proxy(c);
                }
            }
        }
        {
            let d = self.dynm.as_mut().expect("dynamic state");
            if let ReconfigOp::Fuse(c) = &st.op {
                d.fused[c[0]] = Some(Fused {
                    cpus: c.clone(),
                    mech: st.mech,
                    active: false,
                });
            }
        }
        {
            let d = self.dynm.as_mut().expect("dynamic state");
            if !st_deferred {
                for &c in &targets {
                    d.mode[c] = Mode::Transition { op: id };
                }
            }
            d.ops.push(st);
            d.records.push(record);
        }
        // The representative does the work: its task waits for it.
        if let Some(r) = initiator {
            self.dyn_stall(r, self.now + latency);
        }
        if matches!(
            self.dynm.as_ref().expect("dynamic state").ops[id].op,
            ReconfigOp::Fuse(_)
        ) {
            // Borrowed CPUs keep their run queues (their threads wait for
            // the object to be split); only the running task is preempted.
            for &c in &targets {
                self.hv.online[c] = false;
                self.iw_cpu(c);
                if self.hv.current[c].is_some() {
                    self.flag_resched(c);
                }
            }
        } else if leaving {
            self.dyn_evacuate(&targets)?;
        }
        for (step, off) in offsets {
            self.q.push(
                self.now + SimTime::from_ns_f64(off * 1e3),
                EventClass::Hardware,
                Ev::Dyn(DynEv::Stop {
                    op: id as u32,
                    step: step as u32,
                }),
            );
        }
        self.q.push(
            self.now + latency,
            EventClass::Hardware,
            Ev::Dyn(DynEv::Done { op: id as u32 }),
        );
        Ok(())
    }

    /// The task running on `cpu` (if any) makes no progress until `until`.
    fn dyn_stall(&mut self, cpu: CpuId, until: SimTime) {
        let d = self.dynm.as_mut().expect("dynamic state");
        if d.halt_until[cpu] < until {
            d.halt_until[cpu] = until;
        }
        if let Some(t) = self.hv.current[cpu] {
            self.sync(cpu);
            if self.tasks[t].stall_until < until {
                self.tasks[t].stall_until = until;
            }
            self.refresh(cpu);
        }
    }

    /// Take `cpus` out of service: their tasks go elsewhere.
    fn dyn_evacuate(&mut self, cpus: &[CpuId]) -> Res<()> {
        let n = self.m.ncpus();
        for &c in cpus {
            self.hv.online[c] = false;
            self.iw_cpu(c);
        }
        // A task allowed only on CPUs that are all out of service gets its
        // affinity reset to every CPU, as Linux does when a CPU goes down.
        for t in 0..self.tasks.len() {
            if self.tasks[t].state == TaskState::Exited {
                continue;
            }
            let aff = &self.tasks[t].affinity;
            if !(0..n).any(|c| self.hv.online[c] && aff.contains(c)) {
                self.iw_affinity(t, true);
                self.tasks[t].affinity = CpuSet::All;
                self.iw_affinity(t, false);
                self.warnings.push(format!(
                    "t={}: task {t} was allowed only on cpus taken out of service; its affinity now covers every cpu",
                    self.now
                ));
            }
        }
        for &c in cpus {
            if self.hv.current[c].is_some() {
                self.flag_resched(c);
            }
            self.dsq_retarget(c);
            let queued: Vec<usize> = (0..self.tasks.len())
                .filter(|&t| self.tasks[t].state == TaskState::Runnable && self.tasks[t].cpu == c)
                .collect();
            for t in queued {
                self.dsq_remove(t);
                self.src = super::Src::Sched;
                self.with_sched(|s, cx| s.dequeue(cx, t, c));
                self.apply()?;
                let dst = self.sched_select(t, Some(c), EnqFlags::Affinity)?;
                self.tasks[t].cpu = dst;
                self.sched_enqueue(t, dst, EnqFlags::Affinity)?;
            }
        }
        Ok(())
    }

    /// Stop-machine step `step` of operation `id` begins: halt every other
    /// online CPU for its duration.
    fn stop_machine(&mut self, id: usize, step: usize) {
        let (dur, targets) = {
            let d = self.dynm.as_ref().expect("dynamic state");
            let o = &d.ops[id];
            (
                SimTime::from_ns_f64(o.steps[step].us * 1e3),
                o.targets.clone(),
            )
        };
        let until = self.now + dur;
        let mut lost = 0u64;
        for c in 0..self.m.ncpus() {
            if targets.contains(&c) || !self.hv.online[c] {
                continue;
            }
            if self.hv.current[c].is_some() {
                lost += dur.0;
            }
            self.dyn_stall(c, until);
        }
        let d = self.dynm.as_mut().expect("dynamic state");
        d.records[id].halted_busy_ms += lost as f64 * 1e-6;
        let (t_ns, end_ns) = (self.now.0, until.0);
        self.emit(10, id as u64, step as u64, dur.0, || {
            TraceEvent::StopMachine {
                t_ns,
                end_ns,
                op: id,
            }
        });
    }

    /// Operation `id` completes.
    fn reconfig_done(&mut self, id: usize) -> Res<()> {
        let (op, mech, targets, proxy, deferred, start) = {
            let d = self.dynm.as_ref().expect("dynamic state");
            let o = &d.ops[id];
            (
                o.op.clone(),
                o.mech,
                o.targets.clone(),
                o.proxy,
                o.deferred,
                o.start,
            )
        };
        let now = self.now;
        if deferred {
            // The proxies give way to a real hotplug.
            for &c in &targets {
                self.dyn_end_proxy(c);
                let d = self.dynm.as_mut().expect("dynamic state");
                d.mode[c] = Mode::Offline;
                d.offline_since[c] = Some(now);
            }
        } else {
            match &op {
                ReconfigOp::Offline(_) | ReconfigOp::Fuse(_) => {
                    let d = self.dynm.as_mut().expect("dynamic state");
                    for &c in &targets {
                        if mech == Mechanism::Halt {
                            d.mode[c] = Mode::Halted { since: now, op: id };
                        } else if mech.uses_proxies() {
                            d.mode[c] = Mode::Proxied {
                                by: proxy.expect("a proxy"),
                                since: now,
                                op: id,
                            };
                        } else {
                            d.mode[c] = Mode::Offline;
                            d.offline_since[c] = Some(now);
                        }
                    }
                    if let ReconfigOp::Fuse(c) = &op {
                        let r = c[0];
                        self.sync(r);
                        if let Some(f) =
                            self.dynm.as_mut().expect("dynamic state").fused[r].as_mut()
                        {
                            f.active = true;
                        }
                        self.refresh(r);
                    }
                    if mech == Mechanism::DeferredHotplug {
                        let at = now
                            + SimTime::from_ns_f64(
                                self.dynm
                                    .as_ref()
                                    .expect("dynamic state")
                                    .cfg
                                    .costs
                                    .deferred_threshold_us
                                    * 1e3,
                            );
                        self.q.push(
                            at,
                            EventClass::Hardware,
                            Ev::Dyn(DynEv::Deferred { op: id as u32 }),
                        );
                    }
                }
                ReconfigOp::Online(_) | ReconfigOp::Split(_) => {
                    for &c in &targets {
                        self.dyn_end_proxy(c);
                        let d = self.dynm.as_mut().expect("dynamic state");
                        d.mode[c] = Mode::Online;
                        self.hv.online[c] = true;
                        self.iw_cpu(c);
                        self.flag_resched(c);
                    }
                    if let ReconfigOp::Split(r) = &op {
                        let r = *r;
                        self.sync(r);
                        self.dynm.as_mut().expect("dynamic state").fused[r] = None;
                        self.refresh(r);
                    }
                }
            }
        }
        let d = self.dynm.as_mut().expect("dynamic state");
        d.records[id].end_s = Some(now.as_secs_f64());
        let cpus = d.records[id].cpus.clone();
        let name = d.records[id].op;
        let (t_ns, end_ns) = (start.0, now.0);
        self.emit(11, id as u64, cpus.len() as u64, 0, || {
            TraceEvent::Reconfig {
                t_ns,
                end_ns,
                op: name,
                cpus,
                mechanism: mech.name(),
            }
        });
        if !deferred {
            let info = Reconfigured {
                id,
                op,
                mechanism: mech,
                start,
            };
            self.src = super::Src::Sched;
            self.with_sched(|s, cx| s.on_reconfigured(cx, &info));
            self.apply()?;
        }
        Ok(())
    }

    /// Deferred hotplug: if the configuration of operation `id` still
    /// stands, hotplug its proxied CPUs for real.
    fn deferred_due(&mut self, id: usize) -> Res<()> {
        let d = self.dynm.as_ref().expect("dynamic state");
        let targets = d.ops[id].targets.clone();
        let stands = targets
            .iter()
            .all(|&c| matches!(d.mode[c], Mode::Proxied { op, .. } if op == id));
        if !stands || targets.is_empty() {
            return Ok(());
        }
        let steps = d
            .cfg
            .costs
            .deferred_hotplug_steps(targets.len(), d.os_online());
        let nid = d.ops.len();
        let st = OpState {
            op: ReconfigOp::Offline(targets.clone()),
            deferred: true,
            mech: Mechanism::DeferredHotplug,
            targets,
            proxy: None,
            steps,
            start: self.now,
        };
        self.dyn_begin(st, nid)
    }

    /// `cpu` stops being proxied (or offline) now: account its proxy time,
    /// the IPIs its proxy handled and the RCU work it avoided.
    fn dyn_end_proxy(&mut self, cpu: CpuId) {
        let now = self.now;
        let d = self.dynm.as_mut().expect("dynamic state");
        if let Some(s) = d.offline_since[cpu].take() {
            d.proxies[cpu].offline_s += now.since(s).as_secs_f64();
        }
        if let Mode::Halted { since, .. } = d.mode[cpu] {
            // No proxy: the halted CPU wakes for its own interrupts. Like a
            // proxied one it runs only the idle thread, so it gets TLB
            // shootdowns but no rescheduling IPIs, and is RCU-quiescent.
            let dur = now.since(since).as_secs_f64();
            d.proxies[cpu].halted_s += dur;
            d.proxies[cpu].ipis_while_halted += d.cfg.shootdowns(dur);
            d.proxies[cpu].rcu_avoided += d.cfg.rcu_per_s * dur;
            d.mode[cpu] = Mode::Online;
            return;
        }
        let Mode::Proxied { by, since, .. } = d.mode[cpu] else {
            return;
        };
        let dur = now.since(since).as_secs_f64();
        d.proxies[cpu].proxied_s += dur;
        // A proxied CPU runs the idle thread: no task is placed on it, so it
        // is sent no rescheduling IPIs; TLB shootdowns for the address space
        // it last ran still arrive and are handled by the proxy. In lazy-TLB
        // mode the first of them makes it leave that address space: at most
        // one per stretch (the expected count, so runs stay deterministic).
        let ipis = d.cfg.shootdowns(dur);
        d.proxies[cpu].rcu_avoided += d.cfg.rcu_per_s * dur;
        d.proxies[by].ipis_handled += ipis;
        let cost = SimTime::from_ns_f64(ipis * d.cfg.proxy_ipi.0 as f64);
        d.proxies[by].proxy_ms += cost.0 as f64 * 1e-6;
        d.mode[cpu] = Mode::Online;
        if cost > SimTime::ZERO {
            if let Some(t) = self.hv.current[by] {
                self.tasks[t].pending_stall += cost.0;
            }
        }
    }

    /// At the end of the run: account the proxies still in place.
    pub(super) fn dyn_finish(&mut self) {
        let Some(d) = self.dynm.as_ref() else {
            return;
        };
        let n = d.mode.len();
        for c in 0..n {
            let d = self.dynm.as_ref().expect("dynamic state");
            let m = d.mode[c];
            if matches!(m, Mode::Proxied { .. } | Mode::Halted { .. })
                || d.offline_since[c].is_some()
            {
                self.dyn_end_proxy(c);
                self.dynm.as_mut().expect("dynamic state").mode[c] = m;
            }
        }
    }

    /// The dynamic-processor results (None without a `[dynamic]` section).
    pub fn dynamic_results(&self) -> Option<DynResults> {
        self.dynm.as_ref().map(|d| DynResults {
            reconfigs: d.records.clone(),
            proxies: d.proxies.clone(),
        })
    }
}
