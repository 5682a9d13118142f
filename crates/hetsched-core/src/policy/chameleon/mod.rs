//! `chameleon`: Chameleon's cluster scheduler on CFS (ASPLOS 2012 §4.3), for
//! threads that ask for a `sequential` execution object of a level.
//!
//! Every CPU keeps a CFS run queue ordered by virtual runtime (vruntime grows
//! by `Δt × 1024 / weight`). A thread that wants an object of `level` CPUs is
//! queued on the object's representative CPU (its own CPU; the object is the
//! block of `level` CPUs starting there) and records, for every CPU it would
//! borrow, the vruntime it would have there: `vruntimes[c]`, set from that run
//! queue's `min_vruntime` when the thread becomes runnable (§4.3.1).
//!
//! * **Activation.** When the thread runs on its representative (when picked,
//!   and at every tick while it runs natively, once it has run
//!   `min_granularity` natively), it fuses the object if on *every* borrowed
//!   CPU its `vruntimes[c]` is below the vruntime of the task running there
//!   (an idle CPU with an empty queue is free). Otherwise it tries the
//!   largest smaller configured level whose CPUs all qualify; otherwise it
//!   runs natively.
//! * **Preemption.** At each tick on a fused object, once the object has run
//!   `min_granularity`, it is split when the next thread of any borrowed CPU
//!   has become eligible (its vruntime is below the thread's `vruntimes[c]`),
//!   i.e. when that thread would have been dispatched had the borrowing
//!   thread been a real thread there (§4.3.2).
//! * **Taxation.** While fused, the vruntime delta charged on each borrowed
//!   CPU is multiplied by the thread's tax rate (§4.3.3): a high tax makes
//!   borrowing expensive (the thread stays native), a low one lets it preempt
//!   the borrowed CPUs' threads most of the time.
//!
//! Reconfiguration goes through the engine (`Ctx::reconfigure`) with the
//! policy's mechanism, so its latency and side effects are the cost model's.
//!
//! Which CPUs an object gets: without node managers (`nodes=off`, the
//! default) the block of `level` CPUs starting at the thread's CPU. With
//! `nodes=on`, one [`NodeManager`] per node of the machine builds each
//! thread's object when the thread first becomes runnable (on the node with
//! the most free CPUs), by the thread's weight; the thread is queued on the
//! object's representative, and every change the manager makes (reclaim,
//! split, redistribution, defragmentation) splits the thread's active object,
//! moves the thread to its new representative and re-records its borrowed
//! vruntimes from the new CPUs' run queues. A thread's exit releases its
//! object; `notify=off` keeps the freed CPUs idle (Figure 6's "3*").
//!
//! SMT mode (`smt=on`, Chameleon §5.5): every physical core is an execution
//! object of its hyperthreads; activating it (mechanism `halt`: no proxy,
//! the siblings run the idle thread and keep taking their interrupts) lets
//! the thread run un-shared. A thread asks for the object with its weight —
//! the speedup it gets alone on a core. Of the runnable threads of a node,
//! the `K` of highest weight are given a core of their own, where `K` is as
//! many as the node can spare while the others still get a hardware thread
//! each (`K ≤ (H·C − N) / (H − 1)` for `N` threads on `C` cores of `H`
//! hyperthreads); the others are placed on the remaining cores' hyperthreads.
//! A granted thread activates its core by the cluster scheduler's rule
//! above; a thread that loses its grant splits at its next tick after
//! `min_granularity`. See [`Chameleon::smt_rebalance`].

use super::{About, Ctx, EnqFlags, ParamDef, PolicySpec, Scheduler};
use crate::hw::dynamic::{ReconfigOp, Reconfigured};
use crate::hw::reconfig::Mechanism;
use crate::hw::{CpuId, Machine};
pub mod nodemgr;

use crate::os::{TaskId, TaskState};
use crate::time::SimTime;
use nodemgr::{EventKind, NodeManager};
use std::collections::{BTreeMap, BTreeSet};

/// Registry entry.
pub fn info() -> About {
    About {
        name: "chameleon",
        doc: "Chameleon's cluster scheduler on CFS: threads that ask for a sequential object of a level fuse the CPUs they borrow when their recorded vruntimes are below the running threads' there, split when a borrowed CPU's next thread becomes eligible, and pay a tax rate on borrowed vruntime (needs a [dynamic] section with fusion levels)",
        params: params(),
    }
}

fn params() -> Vec<ParamDef> {
    vec![
        ParamDef {
            name: "mechanism",
            default: "proxy-apic",
            doc: "reconfiguration mechanism: proxy-apic, proxy-logical, hotplug, parallel-hotplug, deferred-hotplug",
        },
        ParamDef {
            name: "objects",
            default: "",
            doc: "space-separated program:level:tax[:weight] requests, e.g. \"nqueen:4:0.01 gcc:2:1:1.25\" (tax > 0; 1 = borrowed time costs what native time does; weight > 0, default 1: the node managers' priority, e.g. the speedup)",
        },
        ParamDef {
            name: "nodes",
            default: "off",
            doc: "node managers (on/off): per node, build each thread's object from unallocated CPUs by weight, reclaim, split the largest, redistribute and defragment; off: the block starting at the thread's CPU",
        },
        ParamDef {
            name: "notify",
            default: "on",
            doc: "with nodes=on: a thread's exit notifies its node manager, which gives the freed CPUs to objects that got fewer than they asked for (off: they stay idle until the next request)",
        },
        ParamDef {
            name: "smt",
            default: "off",
            doc: "SMT mode (on/off): each physical core is an object of its hyperthreads (scenario: fusion_rule = \"siblings\"; mechanism halt by default); the runnable threads of highest weight (their alone-on-core speedup) get un-shared cores, as many as the node can spare",
        },
        ParamDef {
            name: "object_cpus",
            default: "",
            doc: "with nodes=on: the CPUs the node managers build objects from, as space-separated ids and ranges (\"16-23\"); empty: every CPU (the others are left to native threads)",
        },
        ParamDef {
            name: "min_granularity_ms",
            default: "16",
            doc: "least time a configuration runs before it may change (sysctl_sched_min_granularity; 16 ms in Chameleon's setup)",
        },
    ]
}

/// What a thread asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Want {
    level: usize,
    tax: f64,
    weight: f64,
}

/// Cluster-scheduling state of an object.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Obj {
    /// Running natively since the given time.
    Native(SimTime),
    /// A fuse was requested; `split` if the thread stopped meanwhile.
    Fusing { split: bool },
    /// Fused since the given time, over this many CPUs.
    Active { since: SimTime, level: usize },
    /// A split was requested.
    Splitting,
}

#[derive(Clone, Debug, Default)]
struct Rq {
    queue: BTreeSet<(u64, TaskId)>,
    min_vruntime: u64,
    curr: Option<TaskId>,
}

/// The policy.
pub struct Chameleon {
    name: String,
    mechanism: Mechanism,
    by_program: BTreeMap<String, Want>,
    min_gran: SimTime,
    rqs: Vec<Rq>,
    vruntime: Vec<u64>,
    exec_start: Vec<SimTime>,
    want: Vec<Option<Option<Want>>>,
    /// Per thread: recorded vruntime on each borrowed CPU.
    borrow_vr: Vec<BTreeMap<CpuId, f64>>,
    /// Per representative CPU: the object's state (for its current thread).
    obj: Vec<Option<Obj>>,
    levels: Vec<usize>,
    ncpus: usize,
    /// CPUs lent to this policy's objects (fusing or fused): their own
    /// threads still queue there.
    lent: Vec<bool>,
    /// Per representative: the CPUs its object borrows.
    objcpus: Vec<Vec<CpuId>>,
    /// Node managers (empty with `nodes=off`).
    nms: Vec<NodeManager>,
    notify: bool,
    nodes_on: bool,
    /// Per thread under a node manager: its node and its object's CPUs.
    managed: BTreeMap<TaskId, (usize, Vec<CpuId>)>,
    /// Threads to move to their object's new representative.
    pending_move: BTreeMap<TaskId, CpuId>,
    /// Threads whose exit the managers were told.
    released: BTreeSet<TaskId>,
    /// SMT mode: cores are the objects.
    smt: bool,
    /// SMT mode: threads granted a core of their own.
    smt_grant: BTreeSet<TaskId>,
    /// `object_cpus`: the CPUs the node managers may use (`None`: all).
    object_cpus: Option<BTreeSet<CpuId>>,
}

impl Chameleon {
    /// Build from `chameleon[...]`.
    pub fn from_params(ps: &PolicySpec, m: &Machine) -> Result<Chameleon, String> {
        let defs = params();
        let p = super::Params::new("chameleon", &ps.params, &defs)?;
        let smt = p.bool("smt")?;
        let mut mechanism = Mechanism::parse(&p.choice("mechanism", &Mechanism::names())?)?;
        if smt && !p.given("mechanism") {
            // Hyperthreads still take interrupts when idle: no proxy needed.
            mechanism = Mechanism::Halt;
        }
        let min_gran = p.f64("min_granularity_ms", 0.0, 1e4)?;
        let mut by_program = BTreeMap::new();
        let raw = ps.params.get("objects").cloned().unwrap_or_default();
        for item in raw.split_whitespace() {
            let parts: Vec<&str> = item.split(':').collect();
            if parts.len() != 3 && parts.len() != 4 {
                return Err(format!(
                    "chameleon[objects]: \"{item}\" is not program:level:tax[:weight]"
                ));
            }
            let level: usize = parts[1].parse().map_err(|_| {
                format!(
                    "chameleon[objects]: level \"{}\" of \"{}\" is not a whole number",
                    parts[1], parts[0]
                )
            })?;
            if level < 2 {
                return Err(format!(
                    "chameleon[objects]: level {level} of \"{}\" is not allowed; an object has at least 2 cpus",
                    parts[0]
                ));
            }
            let tax: f64 = parts[2].parse().unwrap_or(f64::NAN);
            if !tax.is_finite() || tax <= 0.0 {
                return Err(format!(
                    "chameleon[objects]: tax \"{}\" of \"{}\" must be a number > 0",
                    parts[2], parts[0]
                ));
            }
            let weight: f64 = match parts.get(3) {
                None => 1.0,
                Some(w) => w.parse().unwrap_or(f64::NAN),
            };
            if !weight.is_finite() || weight <= 0.0 {
                return Err(format!(
                    "chameleon[objects]: weight \"{}\" of \"{}\" must be a number > 0",
                    parts[3], parts[0]
                ));
            }
            by_program.insert(parts[0].to_string(), Want { level, tax, weight });
        }
        let n = m.ncpus();
        let nodes_on = p.bool("nodes")?;
        let notify = p.bool("notify")?;
        if p.given("notify") && !nodes_on {
            return Err("chameleon[notify]: only meaningful with nodes=on".to_string());
        }
        if smt && nodes_on {
            return Err(
                "chameleon[smt]: SMT mode allocates cores itself; it does not combine with nodes=on"
                    .to_string(),
            );
        }
        if smt && m.cpus.iter().all(|c| c.siblings.is_empty()) {
            return Err("chameleon[smt]: the machine has no SMT siblings (no core has more than one hardware thread)".to_string());
        }
        let object_cpus = match ps.params.get("object_cpus").map(|s| s.trim()) {
            None | Some("") => None,
            Some(text) => {
                if !nodes_on {
                    return Err("chameleon[object_cpus]: only meaningful with nodes=on".to_string());
                }
                Some(parse_cpu_list(text, n)?)
            }
        };
        Ok(Chameleon {
            name: if ps.params.is_empty() {
                "chameleon".into()
            } else {
                let kv: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("chameleon[{}]", kv.join(", "))
            },
            mechanism,
            by_program,
            min_gran: SimTime::from_secs_f64(min_gran * 1e-3),
            rqs: vec![Rq::default(); n],
            vruntime: Vec::new(),
            exec_start: Vec::new(),
            want: Vec::new(),
            borrow_vr: Vec::new(),
            obj: vec![None; n],
            levels: Vec::new(),
            ncpus: n,
            lent: vec![false; n],
            objcpus: vec![Vec::new(); n],
            nms: Vec::new(),
            notify,
            nodes_on,
            managed: BTreeMap::new(),
            pending_move: BTreeMap::new(),
            released: BTreeSet::new(),
            smt,
            smt_grant: BTreeSet::new(),
            object_cpus,
        })
    }

    fn grow(&mut self, n: usize) {
        if self.vruntime.len() < n {
            self.vruntime.resize(n, 0);
            self.exec_start.resize(n, SimTime::ZERO);
            self.want.resize(n, None);
            self.borrow_vr.resize(n, BTreeMap::new());
        }
    }

    fn want_of(&mut self, cx: &Ctx, t: TaskId) -> Option<Want> {
        if let Some(w) = self.want[t] {
            return w;
        }
        let prog = &cx.progs[cx.task(t).program].name;
        let w = self.by_program.get(prog).copied();
        self.want[t] = Some(w);
        w
    }

    /// The CPUs an object of `level` represented by `cpu` borrows.
    fn borrowed(&self, cx: &Ctx, cpu: CpuId, level: usize) -> Option<Vec<CpuId>> {
        if self.smt {
            return self.smt_borrowed(cx, cpu, level);
        }
        if self.nodes_on {
            return None;
        }
        let cpus: Vec<CpuId> = (cpu..cpu + level).collect();
        if cpu + level > self.ncpus || !self.levels.contains(&level) {
            return None;
        }
        let node = cx.machine.cpus[cpu].node;
        if cpus.iter().any(|&c| cx.machine.cpus[c].node != node) {
            return None;
        }
        Some(cpus[1..].to_vec())
    }

    /// Whether thread `t` may borrow `c` now: its recorded vruntime is below
    /// the running thread's there (or `c` is idle with nothing queued).
    fn may_borrow(&self, cx: &Ctx, t: TaskId, c: CpuId) -> bool {
        if !cx.online(c) {
            return false;
        }
        let Some(&mine) = self.borrow_vr[t].get(&c) else {
            return false;
        };
        match cx.current(c) {
            // The running thread's vruntime up to now (as `update_curr`).
            Some(o) => {
                let w = cx.task(o).weight.max(1) as f64;
                let run = cx.now.since(self.exec_start[o]).0 as f64 * 1024.0 / w;
                mine < self.vruntime[o] as f64 + run
            }
            None => self.rqs[c].queue.is_empty(),
        }
    }

    /// The largest configured level not above the requested one (0: none).
    fn effective_level(&self, w: Want) -> usize {
        self.levels
            .iter()
            .copied()
            .filter(|&l| l <= w.level)
            .max()
            .unwrap_or(0)
    }

    /// Try to fuse an object for `t` running on `cpu`.
    fn try_activate(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        let Some(w) = self.want_of(cx, t) else {
            return;
        };
        if self.nodes_on {
            self.try_activate_managed(cx, t, cpu);
            return;
        }
        if self.smt && !self.smt_grant.contains(&t) {
            return;
        }
        let mut level = if self.levels.contains(&w.level) {
            w.level
        } else {
            self.levels
                .iter()
                .copied()
                .filter(|&l| l < w.level)
                .max()
                .unwrap_or(0)
        };
        loop {
            if level < 2 {
                return;
            }
            if let Some(b) = self.borrowed(cx, cpu, level) {
                // A CPU lent to another object, or representing one, is not
                // free to borrow whatever the vruntimes say.
                if b.iter()
                    .all(|&c| !self.lent[c] && self.obj[c].is_none() && self.may_borrow(cx, t, c))
                {
                    let mut cpus = vec![cpu];
                    cpus.extend(&b);
                    for &c in &b {
                        self.lent[c] = true;
                    }
                    self.objcpus[cpu] = b.clone();
                    cx.reconfigure(ReconfigOp::Fuse(cpus), Some(self.mechanism));
                    self.obj[cpu] = Some(Obj::Fusing { split: false });
                    return;
                }
            }
            // A smaller configured level from the available CPUs.
            level = self
                .levels
                .iter()
                .copied()
                .filter(|&l| l < level)
                .max()
                .unwrap_or(0);
        }
    }

    /// Charge `t`'s run time since `exec_start` on `cpu`.
    fn account(&mut self, cx: &Ctx, t: TaskId, cpu: CpuId) {
        let now = cx.now;
        let dt = now.since(self.exec_start[t]).0;
        self.exec_start[t] = now;
        if dt == 0 {
            return;
        }
        let w = cx.task(t).weight.max(1) as f64;
        let dv = dt as f64 * 1024.0 / w;
        self.vruntime[t] += dv.round() as u64;
        if let Some(Obj::Active { .. }) = self.obj[cpu] {
            let tax = self.want_of_cached(t).map(|w| w.tax).unwrap_or(1.0);
            for v in self.borrow_vr[t].values_mut() {
                *v += dv * tax;
            }
        }
        let rq = &mut self.rqs[cpu];
        let left = rq.queue.first().map(|&(v, _)| v).unwrap_or(u64::MAX);
        let m = self.vruntime[t].min(left);
        if m > rq.min_vruntime {
            rq.min_vruntime = m;
        }
    }

    fn want_of_cached(&self, t: TaskId) -> Option<Want> {
        self.want.get(t).copied().flatten().flatten()
    }

    /// `nodes=on`: fuse the object the node manager gave `t` (or the largest
    /// configured prefix of it whose CPUs qualify), if `t` runs on its
    /// representative and no CPU of it is still lent to another object.
    fn try_activate_managed(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        let Some((_, obj)) = self.managed.get(&t) else {
            return;
        };
        if obj.first() != Some(&cpu) || self.pending_move.contains_key(&t) {
            return;
        }
        let obj = obj.clone();
        // CPUs of the object still being split off another object (or
        // otherwise out of service): wait for them rather than settle for
        // a smaller object; the next tick tries again.
        if obj[1..].iter().any(|&c| self.lent[c] || !cx.online(c)) {
            return;
        }
        let mut levels: Vec<usize> = self
            .levels
            .iter()
            .copied()
            .filter(|&l| l <= obj.len())
            .collect();
        levels.sort_unstable_by(|a, b| b.cmp(a));
        for level in levels {
            let b = &obj[1..level];
            if b.iter()
                .all(|&c| !self.lent[c] && self.obj[c].is_none() && self.may_borrow(cx, t, c))
            {
                for &c in b {
                    self.lent[c] = true;
                }
                self.objcpus[cpu] = b.to_vec();
                cx.reconfigure(
                    ReconfigOp::Fuse(obj[..level].to_vec()),
                    Some(self.mechanism),
                );
                self.obj[cpu] = Some(Obj::Fusing { split: false });
                return;
            }
        }
    }

    /// `nodes=on`: ask a node manager for `t`'s object.
    fn request_object(&mut self, cx: &mut Ctx, t: TaskId, w: Want) {
        if self.managed.contains_key(&t) || self.released.contains(&t) {
            return;
        }
        let aff = cx.task(t).affinity.clone();
        let node = (0..self.nms.len())
            .filter(|&i| self.nms[i].cpus().iter().any(|&c| aff.contains(c)))
            .max_by(|&a, &b| {
                self.nms[a]
                    .free_cpus()
                    .cmp(&self.nms[b].free_cpus())
                    .then(b.cmp(&a))
            });
        let Some(node) = node else {
            return;
        };
        match self.nms[node].request(t, "sequential", w.level, w.weight) {
            Ok(out) => {
                for msg in out.warnings {
                    let prog = &cx.progs[cx.task(t).program].name;
                    cx.warn(format!(
                        "scheduler chameleon: thread {t} of \"{prog}\": {msg}"
                    ));
                }
                self.managed.insert(t, (node, Vec::new()));
                self.apply_node(cx, node, &out.events);
            }
            Err(msg) => cx.fail(format!("scheduler chameleon: thread {t}: {msg}")),
        }
    }

    /// Carry out a node manager's changes: split the affected threads'
    /// active objects, move them to their new representatives and record
    /// their borrowed vruntimes on the new CPUs.
    fn apply_node(
        &mut self,
        cx: &mut Ctx,
        node: usize,
        events: &[crate::policy::chameleon::nodemgr::Event],
    ) {
        for e in events {
            if e.kind == EventKind::Release {
                continue;
            }
            let u = e.thread;
            let Some(entry) = self.managed.get_mut(&u) else {
                continue;
            };
            let new = self.nms[node].object_of(u);
            if entry.1 == new {
                continue;
            }
            entry.1 = new.clone();
            // Split the object the thread is using now.
            let here = cx.task(u).cpu;
            if cx.current(here) == Some(u) {
                match self.obj[here] {
                    Some(Obj::Active { .. }) => {
                        cx.reconfigure(ReconfigOp::Split(here), Some(self.mechanism));
                        self.obj[here] = Some(Obj::Splitting);
                    }
                    Some(Obj::Fusing { .. }) => self.obj[here] = Some(Obj::Fusing { split: true }),
                    _ => {}
                }
            }
            let mut m = BTreeMap::new();
            for &c in new.iter().skip(1) {
                m.insert(c, self.rqs[c].min_vruntime as f64);
            }
            self.borrow_vr[u] = m;
            if let Some(&r) = new.first() {
                if r != here {
                    self.pending_move.insert(u, r);
                }
            }
        }
        self.do_moves(cx);
    }

    /// Move threads whose representative changed, once it takes work.
    fn do_moves(&mut self, cx: &mut Ctx) {
        let pend: Vec<(TaskId, CpuId)> = self.pending_move.iter().map(|(&t, &c)| (t, c)).collect();
        for (t, r) in pend {
            if !cx.online(r) || self.lent[r] || !cx.task(t).affinity.contains(r) {
                continue;
            }
            let here = cx.task(t).cpu;
            // A thread whose object is still being fused or split waits.
            if cx.current(here) == Some(t)
                && matches!(
                    self.obj[here],
                    Some(Obj::Fusing { .. } | Obj::Splitting | Obj::Active { .. })
                )
            {
                continue;
            }
            match cx.task(t).state {
                TaskState::Exited => {}
                TaskState::Runnable => {
                    let key = (self.vruntime[t], t);
                    if self.rqs[here].queue.remove(&key) {
                        self.rqs[r].queue.insert(key);
                    }
                    cx.migrate(t, r);
                }
                _ => cx.migrate(t, r),
            }
            self.pending_move.remove(&t);
        }
    }

    /// `nodes=on`: the engine has no exit hook; exits are noticed at the next
    /// pick or tick on any CPU (within a tick of the exit).
    fn reap_exits(&mut self, cx: &mut Ctx) {
        if self.managed.is_empty() {
            return;
        }
        let gone: Vec<TaskId> = self
            .managed
            .keys()
            .copied()
            .filter(|&t| cx.task(t).state == TaskState::Exited)
            .collect();
        for t in gone {
            self.release_object(cx, t);
        }
        if !self.pending_move.is_empty() {
            self.do_moves(cx);
        }
    }

    /// `nodes=on`: tell the node manager that `t` exited.
    fn release_object(&mut self, cx: &mut Ctx, t: TaskId) {
        let Some((node, _)) = self.managed.remove(&t) else {
            return;
        };
        self.released.insert(t);
        self.pending_move.remove(&t);
        let out = self.nms[node].release(t);
        self.apply_node(cx, node, &out.events);
    }
}

impl Scheduler for Chameleon {
    fn name(&self) -> &str {
        &self.name
    }

    fn init(&mut self, cx: &mut Ctx) {
        self.grow(cx.ntasks());
        // The levels objects can have are the scenario's fusion levels. A
        // request no object offers is allowed (properties are optional,
        // §4.3.4): the thread gets the largest smaller level, or runs
        // natively; the run's warnings say so.
        let mut lv = cx.fusion_levels().to_vec();
        lv.sort_unstable();
        self.levels = lv;
        for (prog, w) in &self.by_program {
            if !self.levels.contains(&w.level) {
                let have: Vec<String> = self.levels.iter().map(|l| l.to_string()).collect();
                cx.warn(format!(
                    "scheduler chameleon[objects]: \"{prog}\" asks for a {}-cpu object, which no object offers (fusion levels: {}); it gets a smaller one or runs natively",
                    w.level,
                    if have.is_empty() { "none".to_string() } else { have.join(", ") }
                ));
            }
        }
        if !self.by_program.is_empty()
            && !cx
                .progs
                .iter()
                .any(|p| self.by_program.contains_key(&p.name))
        {
            cx.warn("scheduler chameleon[objects]: no program of the workload is named in objects; every thread runs natively".to_string());
        }
        if self.nodes_on {
            let mut per: BTreeMap<u32, Vec<CpuId>> = BTreeMap::new();
            for (c, cpu) in cx.machine.cpus.iter().enumerate() {
                if self.object_cpus.as_ref().is_none_or(|s| s.contains(&c)) {
                    per.entry(cpu.node).or_default().push(c);
                }
            }
            for (node, cpus) in per {
                let lv: Vec<usize> = self
                    .levels
                    .iter()
                    .copied()
                    .filter(|&l| l <= cpus.len())
                    .collect();
                match NodeManager::new(
                    cpus,
                    &lv,
                    crate::hw::dynamic::FusionRule::Contiguous,
                    self.notify,
                    &["sequential"],
                ) {
                    Ok(nm) => self.nms.push(nm),
                    Err(msg) => cx.fail(format!("scheduler chameleon[nodes]: node {node}: {msg}")),
                }
            }
        }
        for c in 0..cx.ncpus() {
            cx.want_tick(c, true);
        }
    }

    fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, prev: Option<CpuId>, _f: EnqFlags) -> CpuId {
        if self.smt {
            return self.smt_select(cx, t, prev);
        }
        if let Some(&r) = self.managed.get(&t).and_then(|(_, o)| o.first()) {
            if cx.online(r) && !self.lent[r] && cx.task(t).affinity.contains(r) {
                self.pending_move.remove(&t);
                return r;
            }
        }
        let task = cx.task(t);
        let aff = task.affinity.clone();
        if let Some(p) = prev.filter(|&p| aff.contains(p) && (cx.online(p) || self.lent[p])) {
            return p;
        }
        // With node managers, a native thread is placed on a CPU of no
        // execution object when loads tie (§4.2: an object's CPUs are
        // allocated to it), so that it does not queue behind an object's
        // thread on its representative or on a CPU the object borrows.
        let native = self.nodes_on && {
            self.grow(cx.ntasks());
            self.want_of(cx, t).is_none()
        };
        let mut in_object = vec![false; if native { cx.ncpus() } else { 0 }];
        if native {
            for (_, obj) in self.managed.values() {
                for &c in obj {
                    in_object[c] = true;
                }
            }
        }
        let mut best: Option<((usize, bool), CpuId)> = None;
        for c in 0..cx.ncpus() {
            if !aff.contains(c) || !(cx.online(c) || self.lent[c]) {
                continue;
            }
            let load = self.rqs[c].queue.len() + usize::from(cx.current(c).is_some());
            let key = (load, in_object.get(c).copied().unwrap_or(false));
            if best.is_none_or(|(l, _)| key < l) {
                best = Some((key, c));
            }
        }
        best.map(|(_, c)| c).unwrap_or(task.cpu)
    }

    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, f: EnqFlags) {
        self.grow(cx.ntasks());
        let mut cpu = cpu;
        if self.nodes_on && f == EnqFlags::New {
            if let Some(w) = self.want_of(cx, t) {
                self.request_object(cx, t, w);
                // Queue the new thread on its object's representative.
                if let Some(&r) = self.managed.get(&t).and_then(|(_, o)| o.first()) {
                    if r != cpu && cx.online(r) && !self.lent[r] && cx.task(t).affinity.contains(r)
                    {
                        if self.pending_move.remove(&t).is_some() {
                            cx.migrate(t, r);
                        }
                        cpu = r;
                    }
                }
            }
        }
        let rq_min = self.rqs[cpu].min_vruntime;
        if matches!(
            f,
            EnqFlags::New | EnqFlags::Wakeup | EnqFlags::Affinity | EnqFlags::Migrated
        ) {
            self.vruntime[t] = self.vruntime[t].max(rq_min);
        }
        if matches!(f, EnqFlags::New | EnqFlags::Wakeup) && self.nodes_on {
            if let Some((_, obj)) = self.managed.get(&t) {
                let m = obj
                    .iter()
                    .skip(1)
                    .map(|&c| (c, self.rqs[c].min_vruntime as f64))
                    .collect();
                self.borrow_vr[t] = m;
            }
        } else if matches!(f, EnqFlags::New | EnqFlags::Wakeup)
            || (self.smt && f != EnqFlags::Preempted)
        {
            if let Some(w) = self.want_of(cx, t) {
                let mut m = BTreeMap::new();
                if let Some(b) = self.borrowed(cx, cpu, self.effective_level(w)) {
                    for c in b {
                        m.insert(c, self.rqs[c].min_vruntime as f64);
                    }
                }
                self.borrow_vr[t] = m;
            }
        }
        self.rqs[cpu].queue.insert((self.vruntime[t], t));
        // Wake-up preemption of an idle CPU is the engine's kick; a busy CPU
        // is preempted when the newcomer is further behind by a granularity.
        if let Some(cur) = cx.current(cpu) {
            if self.vruntime[t] + self.min_gran.0 < self.vruntime[cur] {
                cx.resched(cpu);
            }
        }
        if self.smt && matches!(f, EnqFlags::New | EnqFlags::Wakeup) {
            self.smt_rebalance(cx, None);
        }
    }

    fn dequeue(&mut self, _cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        let key = (self.vruntime[t], t);
        self.rqs[cpu].queue.remove(&key);
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        self.reap_exits(cx);
        let &(v, t) = self.rqs[cpu].queue.first()?;
        self.rqs[cpu].queue.remove(&(v, t));
        if v > self.rqs[cpu].min_vruntime {
            self.rqs[cpu].min_vruntime = v;
        }
        let _ = cx;
        Some(t)
    }

    fn running(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        self.exec_start[t] = cx.now;
        self.rqs[cpu].curr = Some(t);
        if self.want_of(cx, t).is_some() {
            self.obj[cpu] = Some(Obj::Native(cx.now));
            self.try_activate(cx, t, cpu);
        }
    }

    fn stopping(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, runnable: bool) {
        self.account(cx, t, cpu);
        self.rqs[cpu].curr = None;
        if self.smt && !runnable {
            // It sleeps or exits: its core may go to another thread.
            self.smt_rebalance(cx, Some(t));
        }
        match self.obj[cpu] {
            Some(Obj::Active { .. }) => {
                cx.reconfigure(ReconfigOp::Split(cpu), Some(self.mechanism));
                self.obj[cpu] = Some(Obj::Splitting);
            }
            Some(Obj::Fusing { .. }) => self.obj[cpu] = Some(Obj::Fusing { split: true }),
            Some(Obj::Native(_)) => self.obj[cpu] = None,
            _ => {}
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: CpuId, t: TaskId) {
        self.reap_exits(cx);
        self.account(cx, t, cpu);
        match self.obj[cpu] {
            Some(Obj::Active { since, .. }) => {
                if cx.now.since(since) < self.min_gran {
                    return;
                }
                // SMT mode: a thread that lost its grant gives the core back.
                let revoked = self.smt && !self.smt_grant.contains(&t);
                let eligible = revoked
                    || self.objcpus[cpu].iter().any(|&c| {
                        self.rqs[c].queue.first().is_some_and(|&(v, _)| {
                            (v as f64) < self.borrow_vr[t].get(&c).copied().unwrap_or(f64::INFINITY)
                        })
                    });
                if eligible {
                    cx.reconfigure(ReconfigOp::Split(cpu), Some(self.mechanism));
                    self.obj[cpu] = Some(Obj::Splitting);
                }
            }
            Some(Obj::Native(since)) if cx.now.since(since) >= self.min_gran => {
                self.try_activate(cx, t, cpu);
            }
            _ => {}
        }
        // CFS tick preemption on the CPU itself.
        if let Some(&(v, _)) = self.rqs[cpu].queue.first() {
            if v + self.min_gran.0 < self.vruntime[t] {
                cx.resched(cpu);
            }
        }
    }

    fn on_reconfigured(&mut self, cx: &mut Ctx, info: &Reconfigured) {
        match &info.op {
            ReconfigOp::Fuse(cpus) => {
                let r = cpus[0];
                match self.obj[r] {
                    Some(Obj::Fusing { split: true }) => {
                        cx.reconfigure(ReconfigOp::Split(r), Some(self.mechanism));
                        self.obj[r] = Some(Obj::Splitting);
                    }
                    Some(Obj::Fusing { split: false }) => {
                        self.obj[r] = Some(Obj::Active {
                            since: cx.now,
                            level: cpus.len(),
                        });
                    }
                    _ => {}
                }
            }
            ReconfigOp::Split(r) => {
                let r = *r;
                for c in std::mem::take(&mut self.objcpus[r]) {
                    self.lent[c] = false;
                }
                if self.smt {
                    // The freed hyperthreads may take threads again.
                    self.smt_rebalance(cx, None);
                }
                self.obj[r] = match cx.current(r) {
                    Some(t) if self.want_of_cached(t).is_some() => Some(Obj::Native(cx.now)),
                    _ => None,
                };
                if !self.pending_move.is_empty() {
                    self.do_moves(cx);
                }
            }
            _ => {}
        }
    }
}

/// SMT mode (`smt=on`, Chameleon §5.5): cores as execution objects of their
/// hyperthreads, given to the threads that gain the most from running alone.
impl Chameleon {
    /// The other hyperthreads of `cpu`'s core, in id order, as many as an
    /// object of `level` borrows (None: not a configured level, or the core
    /// is narrower).
    fn smt_borrowed(&self, cx: &Ctx, cpu: CpuId, level: usize) -> Option<Vec<CpuId>> {
        if !self.levels.contains(&level) {
            return None;
        }
        let mut sib = cx.machine.cpus[cpu].siblings.clone();
        sib.sort_unstable();
        if sib.len() + 1 < level {
            return None;
        }
        sib.truncate(level - 1);
        Some(sib)
    }

    /// The hyperthreads of `cpu`'s core, `cpu` included, in id order.
    fn smt_core(cx: &Ctx, cpu: CpuId) -> Vec<CpuId> {
        let mut v = cx.machine.cpus[cpu].siblings.clone();
        v.push(cpu);
        v.sort_unstable();
        v
    }

    /// Threads on `c` (running or queued), `t` not counted.
    fn smt_load(&self, cx: &Ctx, c: CpuId, t: TaskId) -> usize {
        self.rqs[c].queue.iter().filter(|&&(_, u)| u != t).count()
            + usize::from(cx.current(c).is_some_and(|u| u != t))
    }

    /// Whether `c`'s core is kept for a granted thread other than `t` (or
    /// lent to an object).
    fn smt_reserved(&self, cx: &Ctx, c: CpuId, t: TaskId) -> bool {
        Self::smt_core(cx, c).into_iter().any(|x| {
            self.lent[x]
                || cx
                    .current(x)
                    .is_some_and(|u| u != t && self.smt_grant.contains(&u))
                || self.rqs[x]
                    .queue
                    .iter()
                    .any(|&(_, u)| u != t && self.smt_grant.contains(&u))
        })
    }

    /// Placement in SMT mode (as Linux's `select_idle_core` prefers idle
    /// cores): an allowed CPU whose core no granted thread keeps, with the
    /// fewest threads on its core, then on itself; ties: the previous CPU,
    /// then the lowest id. Cores kept for others come last.
    fn smt_select(&self, cx: &Ctx, t: TaskId, prev: Option<CpuId>) -> CpuId {
        let aff = cx.task(t).affinity.clone();
        // (kept for another, threads on the core, on the cpu, not prev, id)
        type Key = (bool, usize, usize, bool, CpuId);
        let mut best: Option<Key> = None;
        for c in 0..cx.ncpus() {
            if !aff.contains(c) || !(cx.online(c) || self.lent[c]) {
                continue;
            }
            let core_load: usize = Self::smt_core(cx, c)
                .into_iter()
                .map(|x| self.smt_load(cx, x, t))
                .sum();
            let key = (
                self.smt_reserved(cx, c, t),
                core_load,
                self.smt_load(cx, c, t),
                prev != Some(c),
                c,
            );
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        best.map(|k| k.4).unwrap_or(cx.task(t).cpu)
    }

    /// Recompute which threads get a core of their own and place the others.
    ///
    /// Per node, with `N` runnable threads (`gone`, a thread going to sleep
    /// or exiting, not counted) on `C` cores of `H` hyperthreads: `K =
    /// min(C, (H·C − N) / (H − 1))` threads can have a core alone while every
    /// other thread still has a hyperthread. The `K` threads with an object
    /// request of the highest weight (ties: the lower thread id) are granted
    /// a core: the one they are on unless a higher-ranked thread has it,
    /// else the free core with the fewest threads. Every other thread gets a
    /// hyperthread of the remaining cores: it stays where it is if that CPU
    /// is not yet taken, else it moves to the least loaded online one
    /// (fewest threads on the CPU, then on its core, lowest id).
    fn smt_rebalance(&mut self, cx: &mut Ctx, gone: Option<TaskId>) {
        use crate::os::TaskState as S;
        let ncpu = cx.ncpus();
        // node -> core -> cpus
        let mut nodes: BTreeMap<u32, BTreeMap<u32, Vec<CpuId>>> = BTreeMap::new();
        for (c, hw) in cx.machine.cpus.iter().enumerate() {
            nodes
                .entry(hw.node)
                .or_default()
                .entry(hw.core)
                .or_default()
                .push(c);
        }
        let live: Vec<TaskId> = (0..cx.ntasks())
            .filter(|&u| Some(u) != gone && matches!(cx.task(u).state, S::Runnable | S::Running))
            .collect();
        let mut grant = BTreeSet::new();
        let mut moves: Vec<(TaskId, CpuId)> = Vec::new();
        for (node, cores) in &nodes {
            let here: Vec<TaskId> = live
                .iter()
                .copied()
                .filter(|&u| cx.machine.cpus[cx.task(u).cpu].node == *node)
                .collect();
            let c = cores.len();
            let h = cores.values().map(|v| v.len()).max().unwrap_or(1);
            let k = if h < 2 {
                0
            } else {
                ((h * c).saturating_sub(here.len()) / (h - 1)).min(c)
            };
            let mut ranked: Vec<(f64, TaskId)> = here
                .iter()
                .filter_map(|&u| {
                    let w = self.want_of(cx, u)?;
                    (self.effective_level(w) >= 2).then_some((w.weight, u))
                })
                .collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            ranked.truncate(k);
            // Cores for the granted threads, highest weight first.
            let mut owner: BTreeMap<u32, TaskId> = BTreeMap::new();
            let mut homeless = Vec::new();
            for &(_, g) in &ranked {
                let core = cx.machine.cpus[cx.task(g).cpu].core;
                if let std::collections::btree_map::Entry::Vacant(e) = owner.entry(core) {
                    e.insert(g);
                } else {
                    homeless.push(g);
                }
                grant.insert(g);
            }
            let count = |core: u32| -> usize {
                here.iter()
                    .filter(|&&u| cx.machine.cpus[cx.task(u).cpu].core == core)
                    .count()
            };
            for g in homeless {
                let aff = cx.task(g).affinity.clone();
                let free = cores
                    .iter()
                    .filter(|(core, cpus)| {
                        !owner.contains_key(core) && cpus.iter().any(|&x| aff.contains(x))
                    })
                    .min_by_key(|(core, _)| (count(**core), **core))
                    .map(|(core, cpus)| (*core, cpus.clone()));
                if let Some((core, cpus)) = free {
                    owner.insert(core, g);
                    let dst = cpus.into_iter().find(|&x| aff.contains(x) && cx.online(x));
                    if let Some(dst) = dst {
                        moves.push((g, dst));
                    }
                }
            }
            // The others: one per hyperthread of the cores left, if they fit.
            let mut taken = vec![0usize; ncpu];
            let mut rest: Vec<TaskId> = here
                .iter()
                .copied()
                .filter(|u| !grant.contains(u))
                .collect();
            // Running threads keep their CPU first (no needless preemption).
            rest.sort_by_key(|&u| (cx.task(u).state != S::Running, u));
            let mut place = Vec::new();
            for u in rest {
                let cpu = cx.task(u).cpu;
                let core = cx.machine.cpus[cpu].core;
                if !owner.contains_key(&core) && taken[cpu] == 0 {
                    taken[cpu] += 1;
                } else {
                    place.push(u);
                }
            }
            for u in place {
                let aff = cx.task(u).affinity.clone();
                let mut best: Option<((usize, usize, CpuId), CpuId)> = None;
                for (core, cpus) in cores {
                    if owner.contains_key(core) {
                        continue;
                    }
                    let core_load: usize = cpus.iter().map(|&x| taken[x]).sum();
                    for &x in cpus {
                        // A CPU lent to an object takes no moved thread.
                        if !aff.contains(x) || !cx.online(x) {
                            continue;
                        }
                        let key = (taken[x], core_load, x);
                        if best.is_none_or(|(b, _)| key < b) {
                            best = Some((key, x));
                        }
                    }
                }
                match best {
                    Some((_, x)) => {
                        taken[x] += 1;
                        moves.push((u, x));
                    }
                    // No core left for it: it stays (and shares).
                    None => taken[cx.task(u).cpu] += 1,
                }
            }
        }
        self.smt_grant = grant;
        for (u, dst) in moves {
            self.smt_move(cx, u, dst);
        }
    }

    /// Move thread `u` to `dst` (a queued one at once; a running one is
    /// preempted by the engine and enqueued there).
    fn smt_move(&mut self, cx: &mut Ctx, u: TaskId, dst: CpuId) {
        let here = cx.task(u).cpu;
        if here == dst {
            return;
        }
        match cx.task(u).state {
            TaskState::Runnable => {
                let key = (self.vruntime[u], u);
                if self.rqs[here].queue.remove(&key) {
                    let v = self.vruntime[u].max(self.rqs[dst].min_vruntime);
                    self.vruntime[u] = v;
                    self.rqs[dst].queue.insert((v, u));
                }
                if let Some(w) = self.want_of(cx, u) {
                    let mut m = BTreeMap::new();
                    if let Some(b) = self.smt_borrowed(cx, dst, self.effective_level(w)) {
                        for c in b {
                            m.insert(c, self.rqs[c].min_vruntime as f64);
                        }
                    }
                    self.borrow_vr[u] = m;
                }
                cx.migrate(u, dst);
            }
            TaskState::Running => cx.migrate(u, dst),
            _ => {}
        }
    }
}

/// `object_cpus`: space-separated CPU ids and ranges `a-b` of a machine of
/// `n` CPUs.
fn parse_cpu_list(text: &str, n: usize) -> Result<BTreeSet<CpuId>, String> {
    let mut out = BTreeSet::new();
    for item in text.split_whitespace() {
        let bad = || {
            format!("chameleon[object_cpus]: \"{item}\" is not a cpu id or a range a-b (e.g. \"16-23\")")
        };
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (
                a.parse::<CpuId>().map_err(|_| bad())?,
                b.parse::<CpuId>().map_err(|_| bad())?,
            ),
            None => {
                let c = item.parse::<CpuId>().map_err(|_| bad())?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(bad());
        }
        if hi >= n {
            return Err(format!(
                "chameleon[object_cpus]: cpu {hi} does not exist (the machine has {n} cpus: 0-{})",
                n - 1
            ));
        }
        out.extend(lo..=hi);
    }
    Ok(out)
}
