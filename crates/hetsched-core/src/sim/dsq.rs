//! sched_ext's dispatch queues, kept by the engine for a scheduler whose
//! [`Scheduler::uses_dsqs`](crate::policy::Scheduler::uses_dsqs) is true.
//!
//! The model follows `kernel/sched/ext.c`:
//! * a task that becomes runnable: `select_cpu` (an insert there is a direct
//!   dispatch, done as it returns, and the task skips `enqueue`), then
//!   `enqueue`; the CPU chosen is rescheduled if idle (the kernel's wake-up
//!   preemption of the idle task); an insert into the local DSQ of another
//!   idle CPU reschedules that CPU too;
//! * a CPU that reschedules (`balance_one` + `pick_task`): keep running the
//!   current task if it has slice left; else its local DSQ, else the head of
//!   the global DSQ that may run there, else `dispatch(cpu, prev)` and the
//!   local and global DSQs again, repeated while `dispatch` queued
//!   something (at most [`DISPATCH_MAX_LOOPS`] times); with nothing found,
//!   the current task runs on with a fresh slice unless `enq_last` is set;
//! * the task that stops with its slice used goes through `enqueue` again
//!   (the kernel's `put_prev_task_scx`);
//! * a running task's slice shrinks while it runs; at zero the CPU
//!   reschedules;
//! * idle tracking: a CPU's idle bit is set when it goes idle and cleared
//!   when it runs a task or is claimed (`select_cpu_dfl`, `pick_idle_cpu`,
//!   `test_and_clear_cpu_idle`); a claimed CPU is not found idle again until
//!   it has gone idle anew.

use super::Res;
use super::{Engine, Ev, Setup};
use crate::error::SimError;
use crate::hw::CpuId;
use crate::os::{TaskId, TaskState};
use crate::policy::scx::{
    dsq_name, DsqOps, View, DSQ_FLAG_BUILTIN, DSQ_GLOBAL, DSQ_LOCAL, DSQ_LOCAL_CPU_MASK,
    DSQ_LOCAL_ON, SLICE_DFL_NS, SLICE_INF,
};
use crate::policy::EnqFlags;
use crate::time::SimTime;
use std::collections::{BTreeMap, VecDeque};

/// How many times `dispatch` is called in a row while it keeps queueing
/// tasks that do not reach the CPU's local DSQ. The kernel's
/// `balance_one` uses `SCX_DSP_MAX_LOOPS` = 32 (kernel/sched/ext.c).
pub const DISPATCH_MAX_LOOPS: u32 = 32;

/// Which callback is running, for the meaning of `DSQ_LOCAL` and the
/// calls each allows.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Outside `select_cpu`, `enqueue` and `dispatch`.
    Other,
    /// `select_cpu` of this task: inserts are deferred until it returns.
    Select(TaskId),
    /// `enqueue` of a task whose CPU is this one.
    Enqueue(CpuId),
    /// `dispatch` on this CPU.
    Dispatch(CpuId),
}

/// A policy-created DSQ: FIFO or ordered by vtime, never both at once.
#[derive(Default)]
struct UserDsq {
    fifo: VecDeque<TaskId>,
    /// `(vtime, insertion sequence) → task`.
    vt: BTreeMap<(u64, u64), TaskId>,
}

impl UserDsq {
    fn len(&self) -> usize {
        self.fifo.len() + self.vt.len()
    }
}

/// Where a task is queued.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Loc {
    None,
    Local(CpuId),
    Global,
    User(u64, Option<(u64, u64)>),
}

/// The dispatch queues and idle bits of one run.
pub struct DsqState {
    local: Vec<VecDeque<TaskId>>,
    global: VecDeque<TaskId>,
    user: BTreeMap<u64, UserDsq>,
    loc: Vec<Loc>,
    slice: Vec<u64>,
    /// `p->scx.dsq_vtime` per task: read and written by the scheduler,
    /// set by `dsq_insert_vtime`.
    vtime: Vec<u64>,
    idle: Vec<bool>,
    /// The same idle bits as a bit mask (bit `c % 64` of word `c / 64`), so
    /// that claiming an idle CPU visits only idle CPUs.
    idle_bits: Vec<u64>,
    /// Whether some CPU has SMT siblings (the machine's topology does not
    /// change during a run); computed on first use.
    smt: Option<bool>,
    /// Per CPU: a kick with preempt ended the running task's slice.
    preempt: Vec<bool>,
    /// Per CPU: generation of its slice-expiry event.
    slice_gen: Vec<u32>,
    /// Per CPU: when the slice of its task began.
    started: Vec<SimTime>,
    seq: u64,
    pub(crate) mode: Mode,
    /// Inserts made in `select_cpu`, applied when it returns.
    deferred: Vec<(TaskId, u64, Option<u64>, u64)>,
    /// Tasks queued by the current `dispatch` call.
    dispatched: u32,
}

impl DsqState {
    /// Empty queues for `ncpus` CPUs and `ntasks` tasks; every CPU idle.
    pub fn new(ncpus: usize, ntasks: usize) -> DsqState {
        DsqState {
            local: vec![VecDeque::new(); ncpus],
            global: VecDeque::new(),
            user: BTreeMap::new(),
            loc: vec![Loc::None; ntasks],
            slice: vec![SLICE_DFL_NS; ntasks],
            vtime: vec![0; ntasks],
            idle: vec![true; ncpus],
            idle_bits: {
                let mut w = vec![u64::MAX; ncpus.div_ceil(64)];
                if !ncpus.is_multiple_of(64) {
                    if let Some(last) = w.last_mut() {
                        *last = (1u64 << (ncpus % 64)) - 1;
                    }
                }
                w
            },
            smt: None,
            preempt: vec![false; ncpus],
            slice_gen: vec![0; ncpus],
            started: vec![SimTime::ZERO; ncpus],
            seq: 0,
            mode: Mode::Other,
            deferred: Vec::new(),
            dispatched: 0,
        }
    }

    /// Set or clear `cpu`'s idle bit (in both forms).
    #[inline]
    fn set_idle(&mut self, cpu: CpuId, idle: bool) {
        self.idle[cpu] = idle;
        let bit = 1u64 << (cpu % 64);
        if idle {
            self.idle_bits[cpu / 64] |= bit;
        } else {
            self.idle_bits[cpu / 64] &= !bit;
        }
    }

    /// Whether `t` is queued on some DSQ.
    pub fn is_queued(&self, t: TaskId) -> bool {
        self.loc[t] != Loc::None
    }

    /// Tasks on `cpu`'s local DSQ.
    pub fn local_len(&self, cpu: CpuId) -> usize {
        self.local[cpu].len()
    }

    /// Take the head of `cpu`'s local DSQ.
    fn pop_local(&mut self, cpu: CpuId) -> Option<TaskId> {
        let t = self.local[cpu].pop_front()?;
        self.loc[t] = Loc::None;
        Some(t)
    }

    /// The slice left to `t`, running on `cpu` since `started[cpu]`, at
    /// `now` (0 once a preempting kick ended it).
    fn slice_left(&self, cpu: CpuId, t: TaskId, now: SimTime) -> u64 {
        match self.slice[t] {
            _ if self.preempt[cpu] => 0,
            SLICE_INF => SLICE_INF,
            s => s.saturating_sub(now.since(self.started[cpu]).0),
        }
    }

    /// Whether every hardware thread of `cpu`'s core is idle and online.
    fn core_idle(&self, v: &View, cpu: CpuId) -> bool {
        v.machine.cpus[cpu]
            .siblings
            .iter()
            .all(|&x| self.idle[x] && v.online[x])
    }

    /// A user DSQ by id.
    fn user_dsq(&mut self, id: u64) -> Result<&mut UserDsq, String> {
        self.user
            .get_mut(&id)
            .ok_or_else(|| UNKNOWN_USER_DSQ.to_string())
    }

    /// Remove `t` from whatever DSQ holds it (its affinity changed).
    fn remove(&mut self, t: TaskId) {
        match std::mem::replace(&mut self.loc[t], Loc::None) {
            Loc::None => {}
            Loc::Local(c) => self.local[c].retain(|&x| x != t),
            Loc::Global => self.global.retain(|&x| x != t),
            Loc::User(id, key) => {
                if let Some(q) = self.user.get_mut(&id) {
                    match key {
                        Some(k) => {
                            q.vt.remove(&k);
                        }
                        None => q.fifo.retain(|&x| x != t),
                    }
                }
            }
        }
    }

    /// The CPU `DSQ_LOCAL` means now.
    fn here(&self, v: &View, what: &str) -> Result<CpuId, String> {
        match self.mode {
            Mode::Enqueue(c) | Mode::Dispatch(c) => Ok(c),
            Mode::Select(t) => Ok(v.tasks[t].cpu),
            Mode::Other => Err(format!(
                "{what} is allowed only in select_cpu, enqueue and dispatch"
            )),
        }
    }

    /// Move the first task of `q` (FIFO or vtime order) allowed on `cpu`.
    fn pop_for(q: &mut UserDsq, v: &View, cpu: CpuId) -> Option<TaskId> {
        if !q.fifo.is_empty() {
            let i = q
                .fifo
                .iter()
                .position(|&t| v.tasks[t].affinity.contains(cpu))?;
            return q.fifo.remove(i);
        }
        let k =
            q.vt.iter()
                .find(|(_, &t)| v.tasks[t].affinity.contains(cpu))
                .map(|(k, _)| *k)?;
        q.vt.remove(&k)
    }

    /// Take the head of the global DSQ that may run on `cpu` onto `cpu`'s
    /// local DSQ (`consume_global_dsq`). Returns whether one moved.
    fn consume_global(&mut self, v: &View, cpu: CpuId) -> bool {
        let Some(i) = self
            .global
            .iter()
            .position(|&t| v.tasks[t].affinity.contains(cpu))
        else {
            return false;
        };
        let t = self.global.remove(i).expect("index found above");
        self.loc[t] = Loc::Local(cpu);
        self.local[cpu].push_back(t);
        true
    }

    /// The lowest idle CPU of `t`'s affinity, preferring wholly idle SMT
    /// cores; claimed.
    fn claim_idle(&mut self, v: &View, t: TaskId) -> Option<CpuId> {
        let aff = &v.tasks[t].affinity;
        let smt = *self
            .smt
            .get_or_insert_with(|| v.machine.cpus.iter().any(|c| !c.siblings.is_empty()));
        // The idle CPUs in ascending order, as a walk over every CPU would
        // meet them.
        let idle = || crate::os::set_bits(&self.idle_bits);
        let ok = |c: CpuId| v.online[c] && aff.contains(c);
        let found = if smt {
            idle()
                .find(|&c| ok(c) && self.core_idle(v, c))
                .or_else(|| idle().find(|&c| ok(c)))
        } else {
            idle().find(|&c| ok(c))
        };
        if let Some(c) = found {
            self.set_idle(c, false);
        }
        found
    }
}

impl DsqOps for DsqState {
    fn create(&mut self, id: u64) -> Result<(), String> {
        if id & DSQ_FLAG_BUILTIN != 0 {
            return Err(format!(
                "{} has bit 63 set, which is reserved for built-in DSQs; user DSQ ids are 0 to 2^63-1",
                dsq_name(id)
            ));
        }
        if self.user.contains_key(&id) {
            return Err(format!("{} already exists", dsq_name(id)));
        }
        self.user.insert(id, UserDsq::default());
        Ok(())
    }

    fn insert(
        &mut self,
        v: &View,
        t: TaskId,
        dsq: u64,
        vtime: Option<u64>,
        slice_ns: u64,
    ) -> Result<Option<CpuId>, String> {
        let task = &v.tasks[t];
        if let Loc::Local(_) | Loc::Global | Loc::User(..) = self.loc[t] {
            return Err(format!("task {t} is already queued on a DSQ"));
        }
        match task.state {
            TaskState::Runnable => {}
            TaskState::Running => return Err(format!("task {t} is running")),
            s => return Err(format!("task {t} is {} (not runnable)", s.name())),
        }
        if let Mode::Select(s) = self.mode {
            if s != t {
                return Err(format!(
                    "select_cpu of task {s} may insert only task {s}, not task {t}"
                ));
            }
            if self.deferred.iter().any(|d| d.0 == t) {
                return Err(format!("task {t} is already queued on a DSQ"));
            }
            // Checked now, applied when select_cpu returns (DSQ_LOCAL is
            // then the CPU it returned).
            if dsq != DSQ_LOCAL {
                self.check_target(v, t, dsq, vtime)?;
            } else if vtime.is_some() {
                return Err(VTIME_BUILTIN.into());
            }
            self.deferred.push((t, dsq, vtime, slice_ns));
            return Ok(None);
        }
        let dsq = if dsq == DSQ_LOCAL {
            self.here(v, "DSQ_LOCAL")? as u64 | DSQ_LOCAL_ON
        } else {
            dsq
        };
        if self.mode == Mode::Other {
            return Err("dsq_insert is allowed only in select_cpu, enqueue and dispatch".into());
        }
        self.check_and_place(v, t, dsq, vtime, slice_ns)
    }

    fn move_to_local(&mut self, v: &View, dsq: u64) -> Result<bool, String> {
        let Mode::Dispatch(cpu) = self.mode else {
            return Err("allowed only in dispatch".into());
        };
        if dsq & DSQ_FLAG_BUILTIN != 0 {
            return Err(
                "only user DSQs can be moved from (the global DSQ is consumed by the engine)"
                    .into(),
            );
        }
        let Some(t) = Self::pop_for(self.user_dsq(dsq)?, v, cpu) else {
            return Ok(false);
        };
        self.loc[t] = Loc::Local(cpu);
        self.local[cpu].push_back(t);
        self.dispatched += 1;
        Ok(true)
    }

    fn nr_queued(&self, v: &View, dsq: u64) -> Result<usize, String> {
        match dsq {
            DSQ_GLOBAL => Ok(self.global.len()),
            DSQ_LOCAL => Ok(self.local[self.here(v, "DSQ_LOCAL")?].len()),
            _ => match local_cpu(dsq) {
                Some(c) => self
                    .local
                    .get(c)
                    .map(|q| q.len())
                    .ok_or_else(|| unknown_cpu(c, self.local.len())),
                None if dsq & DSQ_FLAG_BUILTIN != 0 => Err("unknown built-in DSQ".into()),
                None => self
                    .user
                    .get(&dsq)
                    .map(|q| q.len())
                    .ok_or_else(|| UNKNOWN_USER_DSQ.to_string()),
            },
        }
    }

    fn kick(&mut self, v: &View, cpu: CpuId, preempt: bool) -> Result<bool, String> {
        if cpu >= self.local.len() {
            return Err(unknown_cpu(cpu, self.local.len()));
        }
        if !v.online[cpu] {
            return Ok(false);
        }
        if v.current[cpu].is_none() {
            return Ok(true);
        }
        if preempt {
            // As the kernel's kick_one_cpu: the current task's slice ends.
            self.preempt[cpu] = true;
            if let Some(t) = v.current[cpu] {
                self.slice[t] = 0;
            }
        }
        Ok(preempt)
    }

    fn select_cpu_dfl(
        &mut self,
        v: &View,
        t: TaskId,
        prev: CpuId,
    ) -> Result<(CpuId, bool), String> {
        let n = self.idle.len();
        if prev >= n {
            return Err(unknown_cpu(prev, n));
        }
        let aff = &v.tasks[t].affinity;
        let prev_ok = aff.contains(prev) && v.online[prev];
        if prev_ok && self.idle[prev] && self.core_idle(v, prev) {
            self.set_idle(prev, false);
            return Ok((prev, true));
        }
        if let Some(c) = self.claim_idle(v, t) {
            return Ok((c, true));
        }
        if prev_ok {
            return Ok((prev, false));
        }
        let c = (0..n)
            .find(|&c| aff.contains(c) && v.online[c])
            .ok_or_else(|| format!("task {t} may run on no online cpu"))?;
        Ok((c, false))
    }

    fn pick_idle_cpu(&mut self, v: &View, t: TaskId) -> Option<CpuId> {
        self.claim_idle(v, t)
    }

    fn test_and_clear_cpu_idle(&mut self, v: &View, cpu: CpuId) -> bool {
        if !v.online[cpu] || !self.idle[cpu] {
            return false;
        }
        self.set_idle(cpu, false);
        true
    }

    fn task_slice(&self, v: &View, t: TaskId) -> u64 {
        let cpu = v.tasks[t].cpu;
        if v.current.get(cpu) == Some(&Some(t)) {
            self.slice_left(cpu, t, v.now)
        } else {
            self.slice[t]
        }
    }

    fn task_vtime(&self, t: TaskId) -> u64 {
        self.vtime[t]
    }

    fn set_task_vtime(&mut self, t: TaskId, vtime: u64) {
        self.vtime[t] = vtime;
    }
}

fn unknown_cpu(c: CpuId, n: usize) -> String {
    format!("cpu {c} does not exist (machine has {n} cpus)")
}

/// The CPU of a `dsq_local_on(cpu)` id (`None` for any other id).
fn local_cpu(dsq: u64) -> Option<CpuId> {
    (dsq & DSQ_LOCAL_ON == DSQ_LOCAL_ON).then_some((dsq & DSQ_LOCAL_CPU_MASK) as CpuId)
}

/// A user DSQ id that was never created.
const UNKNOWN_USER_DSQ: &str = "unknown DSQ (create it with create_dsq first)";

/// `vtime` ordering asked of a built-in DSQ.
const VTIME_BUILTIN: &str = "vtime ordering is not allowed on built-in DSQs";

impl DsqState {
    /// Check that `dsq` (not `DSQ_LOCAL`) can take task `t`.
    fn check_target(
        &self,
        v: &View,
        t: TaskId,
        dsq: u64,
        vtime: Option<u64>,
    ) -> Result<(), String> {
        let n = self.local.len();
        let local = local_cpu(dsq);
        if vtime.is_some() && (dsq == DSQ_GLOBAL || local.is_some()) {
            return Err(VTIME_BUILTIN.into());
        }
        if dsq == DSQ_GLOBAL {
            return Ok(());
        }
        if let Some(c) = local {
            if c >= n || dsq & !(DSQ_LOCAL_ON | DSQ_LOCAL_CPU_MASK) != 0 {
                return Err(format!("unknown DSQ: {}", unknown_cpu(c, n)));
            }
            if !v.online[c] {
                return Err(format!("cpu {c} is offline"));
            }
            if !v.tasks[t].affinity.contains(c) {
                return Err(format!(
                    "cpu {c} is outside the task's affinity {:?}",
                    v.tasks[t].affinity.to_vec(n)
                ));
            }
            return Ok(());
        }
        if dsq & DSQ_FLAG_BUILTIN != 0 {
            return Err("unknown built-in DSQ".into());
        }
        let q = self
            .user
            .get(&dsq)
            .ok_or_else(|| UNKNOWN_USER_DSQ.to_string())?;
        match vtime {
            Some(_) if !q.fifo.is_empty() => Err(
                "the DSQ holds FIFO-inserted tasks; a DSQ is FIFO or vtime-ordered, not both"
                    .into(),
            ),
            None if !q.vt.is_empty() => Err(
                "the DSQ holds vtime-inserted tasks; a DSQ is FIFO or vtime-ordered, not both"
                    .into(),
            ),
            _ => Ok(()),
        }
    }

    /// [`DsqState::check_target`], then [`DsqState::place`].
    fn check_and_place(
        &mut self,
        v: &View,
        t: TaskId,
        dsq: u64,
        vtime: Option<u64>,
        slice: u64,
    ) -> Result<Option<CpuId>, String> {
        self.check_target(v, t, dsq, vtime)?;
        Ok(self.place(v, t, dsq, vtime, slice))
    }

    /// Queue `t` on checked `dsq` (`DSQ_LOCAL` resolved). Returns an idle
    /// CPU whose local DSQ got the task and that is not the one dispatching.
    fn place(
        &mut self,
        v: &View,
        t: TaskId,
        dsq: u64,
        vtime: Option<u64>,
        slice: u64,
    ) -> Option<CpuId> {
        if slice > 0 {
            self.slice[t] = slice;
        } else if self.slice[t] == 0 {
            self.slice[t] = SLICE_DFL_NS;
        }
        if matches!(self.mode, Mode::Dispatch(_)) {
            self.dispatched += 1;
        }
        if dsq == DSQ_GLOBAL {
            self.loc[t] = Loc::Global;
            self.global.push_back(t);
            return None;
        }
        if let Some(c) = local_cpu(dsq) {
            self.loc[t] = Loc::Local(c);
            self.local[c].push_back(t);
            let busy_here = matches!(self.mode, Mode::Dispatch(d) | Mode::Enqueue(d) if d == c);
            return (v.current[c].is_none() && !busy_here).then_some(c);
        }
        let q = self.user.get_mut(&dsq).expect("checked");
        match vtime {
            Some(vt) => {
                // scx_bpf_dsq_insert_vtime sets p->scx.dsq_vtime.
                self.vtime[t] = vt;
                self.seq += 1;
                let k = (vt, self.seq);
                q.vt.insert(k, t);
                self.loc[t] = Loc::User(dsq, Some(k));
            }
            None => {
                q.fifo.push_back(t);
                self.loc[t] = Loc::User(dsq, None);
            }
        }
        None
    }
}

/// Refuse, before the run is built, a scenario the DSQ model does not
/// cover: a scheduler that uses dispatch queues (host or guest) with
/// virtual machines (vCPUs run as host tasks and guest schedulers have no
/// DSQs of their own), or with a `[dynamic]` section that has fusion levels
/// (a fused object borrows CPUs whose local DSQs are not modelled). Hotplug
/// (`offline`/`online` events) is covered.
pub fn check_supported(s: &Setup) -> Result<(), SimError> {
    let refuse = |name: &str, what: String| {
        Err(SimError::Policy {
            policy: format!("scheduler \"{name}\""),
            time: SimTime::ZERO,
            message: format!(
                "it uses sched_ext dispatch queues, which do not cover {what}; allowed with dispatch queues: scenarios without [[vm]] sections and without [dynamic] fusion levels"
            ),
        })
    };
    let guest = s.vms.iter().find(|v| v.scheduler.uses_dsqs());
    if let Some(g) = guest {
        return refuse(
            g.scheduler.name(),
            format!(
                "virtual machines (it is the guest scheduler of [[vm]] \"{}\")",
                g.name
            ),
        );
    }
    if !s.scheduler.uses_dsqs() {
        return Ok(());
    }
    if !s.vms.is_empty() {
        let names: Vec<&str> = s.vms.iter().map(|v| v.name.as_str()).collect();
        return refuse(
            s.scheduler.name(),
            format!(
                "virtual machines (the scenario has [[vm]] {})",
                names.join(", ")
            ),
        );
    }
    if let Some(d) = s.dynamic.as_ref().filter(|d| !d.fusion.is_empty()) {
        let levels: Vec<String> = d.fusion.iter().map(|f| f.0.to_string()).collect();
        return refuse(
            s.scheduler.name(),
            format!(
                "dynamic processors that fuse CPUs (the [dynamic] section has fusion levels {})",
                levels.join(", ")
            ),
        );
    }
    Ok(())
}

macro_rules! view {
    ($s:ident) => {
        View {
            now: $s.now,
            machine: &$s.m,
            tasks: &$s.tasks,
            current: &$s.hv.current,
            online: &$s.hv.online,
        }
    };
}

impl Engine {
    /// The dispatch queues (a scheduler that uses them).
    #[inline]
    fn dq(&mut self) -> &mut DsqState {
        self.dsq.as_deref_mut().expect("a DSQ scheduler")
    }

    /// Set the callback mode (no-op without DSQs).
    #[inline]
    pub(super) fn dsq_mode(&mut self, mode: Mode) {
        if let Some(d) = self.dsq.as_deref_mut() {
            d.mode = mode;
        }
    }

    /// `select_cpu` of `t` returned `cpu`: apply its deferred inserts.
    #[cold]
    #[inline(never)]
    pub(super) fn dsq_after_select(&mut self, t: TaskId, cpu: CpuId) -> Res<()> {
        let d = self.dq();
        d.mode = Mode::Other;
        if d.deferred.is_empty() {
            return Ok(());
        }
        let deferred = std::mem::take(&mut d.deferred);
        // The task is placed on `cpu` before its direct dispatch.
        self.tasks[t].cpu = cpu;
        for (task, dsq, vtime, slice) in deferred {
            let dsq = if dsq == DSQ_LOCAL {
                cpu as u64 | DSQ_LOCAL_ON
            } else {
                dsq
            };
            let v = view!(self);
            let d = self.dsq.as_deref_mut().expect("a DSQ scheduler");
            d.mode = Mode::Enqueue(cpu);
            let r = d.check_and_place(&v, task, dsq, vtime, slice);
            d.mode = Mode::Other;
            match r {
                Ok(Some(c)) => self.flag_resched(c),
                Ok(None) => {}
                Err(e) => {
                    return Err(self.policy_err(format!(
                        "dsq_insert(task {task}, {}) in select_cpu: {e}",
                        dsq_name(dsq)
                    )))
                }
            }
        }
        Ok(())
    }

    /// Whether `t` was queued directly (in `select_cpu`) and so skips
    /// `enqueue`.
    #[inline]
    pub(super) fn dsq_queued(&self, t: TaskId) -> bool {
        self.dsq.as_deref().is_some_and(|d| d.is_queued(t))
    }

    /// Remove a queued task from its DSQ (its affinity changed).
    #[cold]
    #[inline(never)]
    pub(super) fn dsq_remove(&mut self, t: TaskId) {
        if let Some(d) = self.dsq.as_deref_mut() {
            d.remove(t);
        }
    }

    /// Assign the tasks on `cpu`'s local DSQ to `cpu` (before it goes
    /// offline, so that they are moved with the others assigned there).
    #[cold]
    #[inline(never)]
    pub(super) fn dsq_retarget(&mut self, cpu: CpuId) {
        let Some(d) = self.dsq.as_deref() else {
            return;
        };
        for i in 0..d.local[cpu].len() {
            let t = self.dsq.as_deref().expect("dsq").local[cpu][i];
            self.tasks[t].cpu = cpu;
        }
    }

    /// `t` stops running on `cpu`: charge the time it ran to its slice.
    #[cold]
    #[inline(never)]
    pub(super) fn dsq_charge(&mut self, cpu: CpuId, t: TaskId) {
        let now = self.now;
        let d = self.dq();
        d.slice_gen[cpu] = d.slice_gen[cpu].wrapping_add(1);
        d.slice[t] = d.slice_left(cpu, t, now);
        d.preempt[cpu] = false;
    }

    /// Arm the slice-expiry event of the task that runs on `cpu` now.
    fn dsq_arm_slice(&mut self, cpu: CpuId, t: TaskId) {
        let now = self.now;
        let d = self.dq();
        d.slice_gen[cpu] = d.slice_gen[cpu].wrapping_add(1);
        d.started[cpu] = now;
        let (gen, slice) = (d.slice_gen[cpu], d.slice[t]);
        if slice == SLICE_INF {
            return;
        }
        self.q.push(
            now + SimTime(slice),
            super::queue::EventClass::Tick,
            Ev::Slice {
                cpu: cpu as u32,
                gen,
            },
        );
    }

    /// A slice-expiry event. Returns false if stale.
    #[cold]
    #[inline(never)]
    pub(super) fn dsq_slice_expired(&mut self, cpu: CpuId, gen: u32) -> bool {
        let Some(d) = self.dsq.as_deref_mut() else {
            return false;
        };
        if d.slice_gen[cpu] != gen || self.hv.current[cpu].is_none() {
            return false;
        }
        self.flag_resched(cpu);
        true
    }

    /// The slice left to the task running on `cpu`, as of now.
    fn dsq_slice_left(&mut self, cpu: CpuId, t: TaskId) -> u64 {
        let now = self.now;
        self.dq().slice_left(cpu, t, now)
    }

    /// What `balance_one` checks before and after each `dispatch`:
    /// `Some(true)` if `prev` keeps the CPU (slice left), `Some(false)` if
    /// `cpu`'s local DSQ holds a task (possibly just taken from the global
    /// DSQ), `None` if neither.
    fn dsq_ready(&mut self, cpu: CpuId, prev: Option<TaskId>) -> Option<bool> {
        if prev.is_some_and(|p| self.dsq_slice_left(cpu, p) > 0) {
            return Some(true);
        }
        if self.dq().local_len(cpu) > 0 {
            return Some(false);
        }
        let v = view!(self);
        let d = self.dsq.as_deref_mut().expect("dsq");
        d.consume_global(&v, cpu).then_some(false)
    }

    /// `balance_one`: fill `cpu`'s local DSQ. Returns whether `prev` (the
    /// task running there, still runnable) keeps the CPU.
    fn dsq_balance(&mut self, cpu: CpuId, prev: Option<TaskId>) -> Res<bool> {
        if let Some(keep) = self.dsq_ready(cpu, prev) {
            return Ok(keep);
        }
        for _ in 0..DISPATCH_MAX_LOOPS {
            let d = self.dq();
            d.mode = Mode::Dispatch(cpu);
            d.dispatched = 0;
            self.src = super::Src::Sched;
            self.with_sched(|s, cx| s.dispatch(cx, cpu, prev));
            self.dsq_mode(Mode::Other);
            self.apply()?;
            if let Some(keep) = self.dsq_ready(cpu, prev) {
                return Ok(keep);
            }
            if self.dq().dispatched == 0 {
                break;
            }
        }
        Ok(prev.is_some() && !self.sched.enq_last())
    }

    /// Reschedule `cpu` under the DSQ model (see the module doc).
    #[cold]
    #[inline(never)]
    pub(super) fn dsq_resched(&mut self, cpu: CpuId) -> Res<()> {
        self.flags.need_resched[cpu] = false;
        let mut prev = self.hv.current[cpu];
        if let Some(t) = prev {
            if self.tasks[t].state != TaskState::Running {
                return Ok(());
            }
        }
        // A task that may no longer run here (affinity, a migrate request)
        // leaves whatever happens.
        let movable = prev.filter(|&t| {
            !self.tasks[t].affinity.contains(cpu)
                || self.tasks[t].cpu != cpu
                || !self.hv.online[cpu]
        });
        if let Some(t) = movable {
            self.dsq_stop_requeue(cpu, t)?;
            prev = None;
        }
        if !self.hv.online[cpu] {
            self.dq().set_idle(cpu, false);
            return Ok(());
        }
        self.picking = Some(cpu);
        let keep = self.dsq_balance(cpu, prev);
        self.picking = None;
        if keep? {
            let p = prev.expect("keep implies a task");
            if self.dsq_slice_left(cpu, p) == 0 {
                // Runs on with a fresh slice (pick_task_scx refills it).
                self.dsq_charge(cpu, p);
                self.dq().slice[p] = SLICE_DFL_NS;
                self.dsq_arm_slice(cpu, p);
            }
            return Ok(());
        }
        let next = self.dq().pop_local(cpu);
        if let Some(p) = prev {
            if next.is_some() {
                self.tasks[p].c.csw_involuntary += 1;
            }
            self.dsq_stop_requeue(cpu, p)?;
        }
        // The task stopped may have been queued right here (enq_last).
        let next = match next {
            Some(n) => Some(n),
            None if self.hv.current[cpu].is_none() => self.dq().pop_local(cpu),
            None => None,
        };
        match next {
            Some(n) if self.hv.current[cpu].is_none() => {
                self.start_running(cpu, n)?;
                if self.hv.current[cpu] == Some(n) {
                    self.dq().set_idle(cpu, false);
                    self.dsq_arm_slice(cpu, n);
                }
            }
            Some(n) => {
                return Err(self.policy_err(format!(
                    "cpu {cpu} became busy while task {n} was picked from its local DSQ"
                )))
            }
            None => {}
        }
        if self.hv.current[cpu].is_none() {
            self.dq().set_idle(cpu, true);
        }
        Ok(())
    }

    /// Stop `t` (preempted, still runnable) on `cpu` and hand it back to the
    /// scheduler: `enqueue` on its CPU, or `select_cpu` and `enqueue` if it
    /// may no longer run there.
    fn dsq_stop_requeue(&mut self, cpu: CpuId, t: TaskId) -> Res<()> {
        self.stop_running(cpu, true)?;
        let mut dst = self.tasks[t].cpu;
        let mut flags = EnqFlags::Preempted;
        if !self.tasks[t].affinity.contains(dst) || !self.hv.online[dst] {
            dst = self.sched_select(t, Some(cpu), EnqFlags::Affinity)?;
            flags = EnqFlags::Affinity;
        } else if dst != cpu {
            flags = EnqFlags::Migrated;
        }
        self.tasks[t].cpu = dst;
        self.sched_enqueue(t, dst, flags)
    }
}
