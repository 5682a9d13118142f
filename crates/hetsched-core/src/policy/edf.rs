//! Global EDF for periodic real-time tasks: one global queue ordered by
//! absolute deadline; a released job runs on an idle CPU if there is one,
//! otherwise it preempts the CPU whose running job has the latest deadline if
//! its own is earlier. Tasks without a deadline (not periodic) run in the
//! background, after every job with a deadline, FIFO.
//!
//! Ties are broken by task id, so the schedule is deterministic; this matches
//! the usual textbook global EDF (and SimSo's `G_EDF`) when overheads are zero.

use super::{Ctx, EnqFlags, Kind, Params, PolicyInfo, PolicySpec, Scheduler};
use crate::hw::{CpuId, Machine};
use crate::os::TaskId;
use std::collections::BTreeSet;

/// Registry entry.
pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "global-edf",
        kind: Kind::Scheduler,
        doc: "Global earliest-deadline-first for periodic tasks (one queue, preemptive, migrating)",
        params: vec![],
    }
}

/// The global EDF scheduler.
pub struct GlobalEdf {
    queue: BTreeSet<(u64, u64, TaskId)>,
    key: Vec<(u64, u64)>,
    fifo: u64,
    /// CPUs already chosen as targets and not yet rescheduled, so that jobs
    /// released at the same instant spread over distinct CPUs.
    reserved: Vec<bool>,
}

impl GlobalEdf {
    /// Build from a parsed spec.
    pub fn from_params(ps: &PolicySpec, m: &Machine) -> Result<GlobalEdf, String> {
        Params::new("global-edf", &ps.params, &[])?;
        Ok(GlobalEdf {
            queue: BTreeSet::new(),
            key: Vec::new(),
            fifo: 0,
            reserved: vec![false; m.ncpus()],
        })
    }

    fn deadline(cx: &Ctx, t: TaskId) -> u64 {
        cx.task(t).deadline.map(|d| d.0).unwrap_or(u64::MAX)
    }

    fn running_deadline(cx: &Ctx, cpu: CpuId) -> Option<u64> {
        cx.current(cpu).map(|t| Self::deadline(cx, t))
    }
}

impl Scheduler for GlobalEdf {
    fn name(&self) -> &str {
        "global-edf"
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        t: TaskId,
        prev: Option<CpuId>,
        _flags: EnqFlags,
    ) -> CpuId {
        let aff = cx.task(t).affinity.clone();
        let free = |c: CpuId, s: &Self, cx: &Ctx| {
            aff.contains(c) && cx.online(c) && cx.current(c).is_none() && !s.reserved[c]
        };
        if let Some(p) = prev.filter(|&p| free(p, self, cx)) {
            return p;
        }
        if let Some(c) = (0..cx.ncpus()).find(|&c| free(c, self, cx)) {
            return c;
        }
        // No idle CPU: the one running the latest deadline (ties: highest id).
        let mut worst: Option<(u64, CpuId)> = None;
        for c in 0..cx.ncpus() {
            if !aff.contains(c) || !cx.online(c) || self.reserved[c] {
                continue;
            }
            if let Some(d) = Self::running_deadline(cx, c) {
                if worst.is_none_or(|w| (d, c) > w) {
                    worst = Some((d, c));
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
        self.queue.insert((d, self.fifo, t));
        if matches!(flags, EnqFlags::Preempted) {
            return;
        }
        if cx.current(cpu).is_none() {
            self.reserved[cpu] = true;
        } else if Self::running_deadline(cx, cpu).is_some_and(|rd| d < rd) && !self.reserved[cpu] {
            self.reserved[cpu] = true;
            cx.resched(cpu);
        }
    }

    fn dequeue(&mut self, _cx: &mut Ctx, t: TaskId, _cpu: CpuId) {
        let (d, f) = self.key[t];
        self.queue.remove(&(d, f, t));
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        self.reserved[cpu] = false;
        let found = self
            .queue
            .iter()
            .find(|&&(_, _, t)| cx.task(t).affinity.contains(cpu))
            .copied();
        let (d, f, t) = found?;
        self.queue.remove(&(d, f, t));
        Some(t)
    }
}
