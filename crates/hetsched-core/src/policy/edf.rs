//! Global EDF for periodic real-time tasks, on sched_ext's dispatch queues:
//! one user DSQ ordered by absolute deadline (its vtime); a released job
//! runs on an idle CPU if there is one, otherwise it preempts the CPU whose
//! running job has the latest deadline if its own is earlier. Tasks without
//! a deadline (not periodic) run in the background, after every job with a
//! deadline, FIFO.
//!
//! Idle CPUs are claimed with `test_and_clear_cpu_idle` / `pick_idle_cpu`,
//! so jobs released at the same instant spread over distinct CPUs; a CPU
//! already kicked to preempt its job has a slice of 0 and is not chosen
//! again. Jobs run with an infinite slice: a job gives up its CPU only to an
//! earlier deadline. Ties are broken by insertion order, so the schedule is
//! deterministic; this matches the usual textbook global EDF (and SimSo's
//! `G_EDF`) when overheads are zero.

use super::scx::SLICE_INF;
use super::{About, Ctx, EnqFlags, Params, PolicySpec, Scheduler};
use crate::hw::{CpuId, Machine};
use crate::os::TaskId;
use std::collections::BTreeSet;

/// The deadline-ordered DSQ's id.
const EDF_DSQ: u64 = 0;

/// Registry entry.
pub fn info() -> About {
    About {
        name: "global-edf",
        doc: "Global earliest-deadline-first for periodic tasks (one queue, preemptive, migrating)",
        params: vec![],
    }
}

/// The global EDF scheduler.
pub struct GlobalEdf {
    /// What the deadline DSQ holds, `(deadline, insertion order, task)`:
    /// `dispatch` compares its head with the job still running (a BPF
    /// scheduler would iterate the DSQ).
    queued: BTreeSet<(u64, u64, TaskId)>,
    key: Vec<(u64, u64)>,
    fifo: u64,
}

impl GlobalEdf {
    /// Build from a parsed spec.
    pub fn from_params(ps: &PolicySpec, _m: &Machine) -> Result<GlobalEdf, String> {
        Params::new("global-edf", &ps.params, &[])?;
        Ok(GlobalEdf {
            queued: BTreeSet::new(),
            key: Vec::new(),
            fifo: 0,
        })
    }

    fn deadline(cx: &Ctx, t: TaskId) -> u64 {
        cx.task(t).deadline.map(|d| d.0).unwrap_or(u64::MAX)
    }

    /// The deadline of the job running on `cpu`, unless that CPU was already
    /// kicked to preempt it (its slice is then 0).
    fn running_deadline(cx: &mut Ctx, cpu: CpuId) -> Option<u64> {
        let t = cx.current(cpu)?;
        (cx.task_slice_ns(t) > 0).then(|| Self::deadline(cx, t))
    }

    fn unqueue(&mut self, t: TaskId) {
        if let Some(&(d, f)) = self.key.get(t) {
            self.queued.remove(&(d, f, t));
        }
    }
}

impl Scheduler for GlobalEdf {
    fn name(&self) -> &str {
        "global-edf"
    }

    fn uses_dsqs(&self) -> bool {
        true
    }

    fn init(&mut self, cx: &mut Ctx) {
        cx.create_dsq(EDF_DSQ);
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        t: TaskId,
        prev: Option<CpuId>,
        _flags: EnqFlags,
    ) -> CpuId {
        let aff = cx.task(t).affinity.clone();
        if let Some(p) = prev {
            if aff.contains(p) && cx.online(p) && cx.test_and_clear_cpu_idle(p) {
                return p;
            }
        }
        if let Some(c) = cx.pick_idle_cpu(t) {
            return c;
        }
        // No idle CPU: the one running the latest deadline (ties: highest id).
        // The CPUs are visited from the highest id down, so the first one
        // running a task without a deadline (`u64::MAX`, the latest there
        // is) is the answer and ends the walk: with background tasks this
        // costs a few CPUs, not the machine.
        let mut worst: Option<(u64, CpuId)> = None;
        for c in (0..cx.ncpus()).rev() {
            if !aff.contains(c) || !cx.online(c) {
                continue;
            }
            if let Some(d) = Self::running_deadline(cx, c) {
                if worst.is_none_or(|w| d > w.0) {
                    worst = Some((d, c));
                    if d == u64::MAX {
                        break;
                    }
                }
            }
        }
        worst
            .map(|w| w.1)
            .or(prev)
            .unwrap_or_else(|| aff.to_vec(cx.ncpus())[0])
    }

    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, flags: EnqFlags) {
        if t >= self.key.len() {
            self.key.resize(t + 1, (0, 0));
        }
        let d = Self::deadline(cx, t);
        self.fifo += 1;
        self.key[t] = (d, self.fifo);
        self.queued.insert((d, self.fifo, t));
        cx.dsq_insert_vtime(t, EDF_DSQ, d, SLICE_INF);
        if matches!(flags, EnqFlags::Preempted) || cx.current(cpu).is_none() {
            // An idle target was claimed in select_cpu; the engine wakes it.
            return;
        }
        if Self::running_deadline(cx, cpu).is_some_and(|rd| d < rd) {
            cx.kick_cpu(cpu, true);
        }
    }

    fn dequeue(&mut self, _cx: &mut Ctx, t: TaskId, _cpu: CpuId) {
        self.unqueue(t);
    }

    fn pick_next(&mut self, _cx: &mut Ctx, _cpu: CpuId) -> Option<TaskId> {
        None
    }

    fn dispatch(&mut self, cx: &mut Ctx, cpu: CpuId, prev: Option<TaskId>) {
        // The job still running keeps the CPU unless a queued one may run
        // here with an earlier or equal deadline (equal: queued first).
        if let Some(p) = prev {
            let pd = Self::deadline(cx, p);
            let head = self
                .queued
                .iter()
                .find(|&&(_, _, t)| cx.task(t).affinity.contains(cpu));
            if head.is_none_or(|&(d, _, _)| d > pd) {
                return;
            }
        }
        cx.dsq_move_to_local(EDF_DSQ);
    }

    fn running(&mut self, _cx: &mut Ctx, t: TaskId, _cpu: CpuId) {
        self.unqueue(t);
    }
}
