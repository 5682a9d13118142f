//! The sched_ext dispatch-queue (DSQ) interface a [`Scheduler`] may opt into
//! with [`Scheduler::uses_dsqs`]: the kernel's DSQ ids, and the calls of
//! `tools/sched_ext/include/scx/common.bpf.h` as methods on [`Ctx`]
//! (`scx_bpf_dsq_insert` → [`Ctx::dsq_insert`], and so on), so that an scx
//! scheduler ports line by line.
//!
//! The queues are engine state (`sim/dsq.rs`); a [`Ctx`] borrows them
//! through the [`DsqOps`] trait for the length of one callback. An insert
//! therefore takes effect at once (a later [`Ctx::dsq_nr_queued`] in the
//! same callback sees it), and claiming an idle CPU is atomic: a second
//! claim in the same instant fails, as `test_and_clear_cpu_idle` does in the
//! kernel. Recording the calls as requests instead would let two wake-ups
//! of one instant claim the same idle CPU, which is the bug this model
//! exists to prevent. A call that breaks a rule (unknown DSQ, a task
//! inserted twice, the local DSQ of an offline CPU ...) records a
//! [`Request::Fail`] naming the call, which ends the run with an error
//! naming the policy, like `scx_bpf_error()` aborts a BPF scheduler.
//!
//! [`Scheduler`]: super::Scheduler
//! [`Scheduler::uses_dsqs`]: super::Scheduler::uses_dsqs

use super::{Ctx, Request};
use crate::hw::{CpuId, Machine};
use crate::os::{Task, TaskId};
use crate::time::SimTime;

/// Bit 63 of a DSQ id: a built-in DSQ (`SCX_DSQ_FLAG_BUILTIN`).
pub const DSQ_FLAG_BUILTIN: u64 = 1 << 63;
/// Bit 62 of a built-in DSQ id: a CPU's local DSQ, the CPU in the low 32
/// bits (`SCX_DSQ_FLAG_LOCAL_ON`).
pub const DSQ_FLAG_LOCAL_ON: u64 = 1 << 62;
/// The invalid DSQ id (`SCX_DSQ_INVALID`).
pub const DSQ_INVALID: u64 = DSQ_FLAG_BUILTIN;
/// The global DSQ, FIFO, consumed by every CPU when its local DSQ is empty
/// (`SCX_DSQ_GLOBAL`).
pub const DSQ_GLOBAL: u64 = DSQ_FLAG_BUILTIN | 1;
/// The local DSQ of the CPU the call is about (`SCX_DSQ_LOCAL`): in
/// `select_cpu`, the CPU it returns; in `enqueue`, the task's CPU; in
/// `dispatch`, the dispatching CPU.
pub const DSQ_LOCAL: u64 = DSQ_FLAG_BUILTIN | 2;
/// `SCX_DSQ_LOCAL_ON`: OR a CPU id into it, see [`dsq_local_on`].
pub const DSQ_LOCAL_ON: u64 = DSQ_FLAG_BUILTIN | DSQ_FLAG_LOCAL_ON;
/// The CPU bits of a `LOCAL_ON` id (`SCX_DSQ_LOCAL_CPU_MASK`).
pub const DSQ_LOCAL_CPU_MASK: u64 = 0xffff_ffff;
/// The default slice, 20 ms (`SCX_SLICE_DFL`, include/linux/sched/ext.h).
pub const SLICE_DFL_NS: u64 = 20_000_000;
/// An infinite slice (`SCX_SLICE_INF`): the task runs until it blocks or
/// is kicked.
pub const SLICE_INF: u64 = u64::MAX;

/// The id of `cpu`'s local DSQ (`SCX_DSQ_LOCAL_ON | cpu`).
#[inline]
pub const fn dsq_local_on(cpu: CpuId) -> u64 {
    DSQ_LOCAL_ON | cpu as u64
}

/// A DSQ id as the kernel prints it, with names for the built-in ones.
pub fn dsq_name(id: u64) -> String {
    match id {
        DSQ_GLOBAL => "DSQ_GLOBAL".into(),
        DSQ_LOCAL => "DSQ_LOCAL".into(),
        DSQ_INVALID => "DSQ_INVALID".into(),
        _ if id & DSQ_LOCAL_ON == DSQ_LOCAL_ON => {
            format!("dsq_local_on({})", id & DSQ_LOCAL_CPU_MASK)
        }
        _ => format!("DSQ {id:#x}"),
    }
}

/// What the DSQ operations read of the engine during a call.
pub struct View<'b> {
    /// Current time.
    pub now: SimTime,
    /// The machine.
    pub machine: &'b Machine,
    /// All tasks.
    pub tasks: &'b [Task],
    /// The task running on each CPU.
    pub current: &'b [Option<TaskId>],
    /// Whether each CPU is online.
    pub online: &'b [bool],
}

/// The dispatch queues and idle-CPU tracking the engine lends to a [`Ctx`].
/// Each method returns an error text (without the call's name, which the
/// [`Ctx`] method adds) when the call breaks a rule.
pub trait DsqOps {
    /// `scx_bpf_create_dsq(id, -1)`.
    fn create(&mut self, id: u64) -> Result<(), String>;
    /// `scx_bpf_dsq_insert` (`vtime: None`) or `scx_bpf_dsq_insert_vtime`.
    /// Returns a CPU to reschedule (an idle CPU whose local DSQ got a task).
    fn insert(
        &mut self,
        v: &View,
        task: TaskId,
        dsq: u64,
        vtime: Option<u64>,
        slice_ns: u64,
    ) -> Result<Option<CpuId>, String>;
    /// `scx_bpf_dsq_move_to_local(dsq)`: move the first task of a user DSQ
    /// that may run on the dispatching CPU to that CPU's local DSQ.
    fn move_to_local(&mut self, v: &View, dsq: u64) -> Result<bool, String>;
    /// `scx_bpf_dsq_nr_queued(dsq)`.
    fn nr_queued(&self, v: &View, dsq: u64) -> Result<usize, String>;
    /// `scx_bpf_kick_cpu(cpu, preempt ? SCX_KICK_PREEMPT : 0)`. Returns
    /// whether the CPU must reschedule.
    fn kick(&mut self, v: &View, cpu: CpuId, preempt: bool) -> Result<bool, String>;
    /// `scx_bpf_select_cpu_dfl(task, prev_cpu, 0, &is_idle)`.
    fn select_cpu_dfl(
        &mut self,
        v: &View,
        task: TaskId,
        prev: CpuId,
    ) -> Result<(CpuId, bool), String>;
    /// `scx_bpf_pick_idle_cpu(task's cpus, 0)`.
    fn pick_idle_cpu(&mut self, v: &View, task: TaskId) -> Option<CpuId>;
    /// `scx_bpf_test_and_clear_cpu_idle(cpu)`.
    fn test_and_clear_cpu_idle(&mut self, v: &View, cpu: CpuId) -> bool;
    /// `p->scx.slice`: the slice left to a task, ns (for a running task,
    /// as of now).
    fn task_slice(&self, v: &View, task: TaskId) -> u64;
    /// `p->scx.dsq_vtime`.
    fn task_vtime(&self, task: TaskId) -> u64;
    /// Write `p->scx.dsq_vtime`.
    fn set_task_vtime(&mut self, task: TaskId, vtime: u64);
}

impl<'a> Ctx<'a> {
    /// Run one DSQ operation; a rule broken records a `Fail` naming `what`.
    fn dsq_op<R>(
        &mut self,
        what: impl FnOnce() -> String,
        fallback: R,
        op: impl FnOnce(&mut dyn DsqOps, &View) -> Result<R, String>,
    ) -> R {
        let v = View {
            now: self.now,
            machine: self.machine,
            tasks: self.tasks,
            current: &self.v.current,
            online: &self.v.online,
        };
        let res = match self.dsq.as_deref_mut() {
            Some(d) => op(d, &v),
            None => {
                Err("the scheduler does not use dispatch queues (its uses_dsqs() is false)".into())
            }
        };
        match res {
            Ok(r) => r,
            Err(e) => {
                self.reqs.push(Request::Fail(format!("{}: {e}", what())));
                fallback
            }
        }
    }

    /// [`Ctx::dsq_op`] about a task, which must exist.
    fn dsq_task_op<R>(
        &mut self,
        task: TaskId,
        what: impl FnOnce() -> String,
        fallback: R,
        op: impl FnOnce(&mut dyn DsqOps, &View) -> Result<R, String>,
    ) -> R {
        let n = self.tasks.len();
        if task >= n {
            self.reqs.push(Request::Fail(format!(
                "{}: task {task} does not exist ({n} tasks)",
                what()
            )));
            return fallback;
        }
        self.dsq_op(what, fallback, op)
    }

    /// `dsq_insert` (`vtime: None`) or `dsq_insert_vtime`.
    fn dsq_insert_with(&mut self, task: TaskId, dsq: u64, vtime: Option<u64>, slice_ns: u64) {
        let what = || match vtime {
            None => format!("dsq_insert(task {task}, {})", dsq_name(dsq)),
            Some(vt) => format!(
                "dsq_insert_vtime(task {task}, {}, vtime {vt})",
                dsq_name(dsq)
            ),
        };
        let kick = self.dsq_task_op(task, what, None, |d, v| {
            d.insert(v, task, dsq, vtime, slice_ns)
        });
        if let Some(c) = kick {
            self.reqs.push(Request::Resched(c));
        }
    }

    /// `scx_bpf_create_dsq(dsq, -1)`: create a FIFO-or-vtime user DSQ. Its
    /// id must be below 2^63 (built-in ids have bit 63 set) and new.
    pub fn create_dsq(&mut self, dsq: u64) {
        self.dsq_op(
            || format!("create_dsq({})", dsq_name(dsq)),
            (),
            |d, _| d.create(dsq),
        )
    }

    /// `scx_bpf_dsq_insert(task, dsq, slice_ns, 0)`: queue a runnable task
    /// at the tail of a DSQ and give it a slice (`0`: keep what it has left,
    /// or [`SLICE_DFL_NS`] if nothing). Allowed in `select_cpu` (for the
    /// task being placed; the insert then happens as it returns, and the
    /// task skips `enqueue`), `enqueue` and `dispatch`.
    pub fn dsq_insert(&mut self, task: TaskId, dsq: u64, slice_ns: u64) {
        self.dsq_insert_with(task, dsq, None, slice_ns)
    }

    /// `scx_bpf_dsq_insert_vtime(task, dsq, slice_ns, vtime, 0)`: queue a
    /// task on a user DSQ ordered by `vtime` (ties: insertion order), and
    /// set the task's `p->scx.dsq_vtime` to `vtime` (see
    /// [`Ctx::task_vtime`]).
    pub fn dsq_insert_vtime(&mut self, task: TaskId, dsq: u64, vtime: u64, slice_ns: u64) {
        self.dsq_insert_with(task, dsq, Some(vtime), slice_ns)
    }

    /// `scx_bpf_dsq_move_to_local(dsq)` (formerly `scx_bpf_consume`), only
    /// in `dispatch`: move the first task of user DSQ `dsq` that may run on
    /// the dispatching CPU to its local DSQ. Returns whether one moved.
    pub fn dsq_move_to_local(&mut self, dsq: u64) -> bool {
        self.dsq_op(
            || format!("dsq_move_to_local({})", dsq_name(dsq)),
            false,
            |d, v| d.move_to_local(v, dsq),
        )
    }

    /// `scx_bpf_dsq_nr_queued(dsq)`: tasks queued on a DSQ.
    pub fn dsq_nr_queued(&mut self, dsq: u64) -> usize {
        self.dsq_op(
            || format!("dsq_nr_queued({})", dsq_name(dsq)),
            0,
            |d, v| d.nr_queued(v, dsq),
        )
    }

    /// `scx_bpf_kick_cpu(cpu, preempt ? SCX_KICK_PREEMPT : 0)`: wake an idle
    /// CPU so that it dispatches; with `preempt`, also end the slice of the
    /// task running there.
    pub fn kick_cpu(&mut self, cpu: CpuId, preempt: bool) {
        let resched = self.dsq_op(
            || format!("kick_cpu({cpu}, preempt={preempt})"),
            false,
            |d, v| d.kick(v, cpu, preempt),
        );
        if resched {
            self.reqs.push(Request::Resched(cpu));
        }
    }

    /// `scx_bpf_select_cpu_dfl(task, prev_cpu, 0, &is_idle)`: the kernel's
    /// default CPU choice. Prefers `prev_cpu` if idle (on SMT machines: a
    /// wholly idle core first), then the lowest idle CPU of the task's
    /// affinity; the CPU found is claimed (its idle bit cleared), so the
    /// next task placed in the same instant does not get it. Returns
    /// `(cpu, true)`, or `(prev_cpu, false)` if no CPU is idle.
    pub fn select_cpu_dfl(&mut self, task: TaskId, prev_cpu: CpuId) -> (CpuId, bool) {
        self.dsq_task_op(
            task,
            || format!("select_cpu_dfl(task {task}, {prev_cpu})"),
            (prev_cpu, false),
            |d, v| d.select_cpu_dfl(v, task, prev_cpu),
        )
    }

    /// `scx_bpf_pick_idle_cpu(task's cpus, 0)`: claim the lowest idle CPU
    /// the task may use, if any.
    pub fn pick_idle_cpu(&mut self, task: TaskId) -> Option<CpuId> {
        self.dsq_task_op(
            task,
            || format!("pick_idle_cpu(task {task})"),
            None,
            |d, v| Ok(d.pick_idle_cpu(v, task)),
        )
    }

    /// `scx_bpf_test_and_clear_cpu_idle(cpu)`: claim `cpu` if it is idle and
    /// unclaimed. Returns whether this call claimed it.
    pub fn test_and_clear_cpu_idle(&mut self, cpu: CpuId) -> bool {
        let n = self.ncpus();
        self.dsq_op(
            || format!("test_and_clear_cpu_idle({cpu})"),
            false,
            |d, v| {
                if cpu >= n {
                    return Err(format!("cpu {cpu} does not exist (machine has {n} cpus)"));
                }
                Ok(d.test_and_clear_cpu_idle(v, cpu))
            },
        )
    }

    /// `p->scx.slice`: what is left of a task's slice, ns: for a running
    /// task as of now, else as of when it stopped (so `stopping` sees what
    /// it used). A task whose CPU was kicked with `preempt` has 0 left.
    pub fn task_slice_ns(&mut self, task: TaskId) -> u64 {
        self.dsq_task_op(
            task,
            || format!("task_slice_ns(task {task})"),
            0,
            |d, v| Ok(d.task_slice(v, task)),
        )
    }

    /// `p->scx.dsq_vtime`: the task's virtual time, engine state that the
    /// scheduler reads and writes (0 until written; `dsq_insert_vtime`
    /// sets it to the vtime inserted with, as the kernel does).
    pub fn task_vtime(&mut self, task: TaskId) -> u64 {
        self.dsq_task_op(
            task,
            || format!("task_vtime(task {task})"),
            0,
            |d, _| Ok(d.task_vtime(task)),
        )
    }

    /// Write `p->scx.dsq_vtime` (e.g. `ops.enable` starting a task at the
    /// current vtime, `ops.stopping` charging the slice used).
    pub fn set_task_vtime(&mut self, task: TaskId, vtime: u64) {
        self.dsq_task_op(
            task,
            || format!("set_task_vtime(task {task}, {vtime})"),
            (),
            |d, _| {
                d.set_task_vtime(task, vtime);
                Ok(())
            },
        )
    }

    /// Number of requests recorded so far in this callback (with
    /// [`Ctx::take_failure`], lets a binding turn a failed call into an
    /// exception at once).
    pub fn requests_len(&self) -> usize {
        self.reqs.len()
    }

    /// Remove and return the message of a `Fail` request recorded after the
    /// first `since` requests, if any.
    pub fn take_failure(&mut self, since: usize) -> Option<String> {
        let i = (since..self.reqs.len()).find(|&i| matches!(self.reqs[i], Request::Fail(_)))?;
        match self.reqs.remove(i) {
            Request::Fail(m) => Some(m),
            _ => None,
        }
    }
}
