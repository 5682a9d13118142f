//! The rt class's run queues (SCHED_FIFO and SCHED_RR): per-CPU priority
//! arrays, as kernel/sched/rt.c keeps them (`struct rt_prio_array`: one FIFO
//! list per priority, the highest priority first).
//!
//! A task that is running is not queued here (the engine holds it); a task
//! preempted by a higher class or priority goes back to the head of its
//! priority's list, a woken task and an RR task whose timeslice ran out go
//! to the tail. The push/pull rules that use these queues are in the
//! engine's class stack (`sim/classes.rs`).

use crate::hw::CpuId;
use crate::os::TaskId;
use std::collections::BTreeMap;

/// Queue key: (inverted priority, position). Lower sorts first: the
/// highest priority, then the head of its list.
type Key = (u8, i64);

/// One CPU's priority array.
#[derive(Clone, Debug, Default)]
struct RtRq {
    q: BTreeMap<Key, TaskId>,
    head: i64,
    tail: i64,
}

/// The rt run queues of every CPU, and each rt task's RR timeslice.
#[derive(Clone, Debug)]
pub struct RtQueues {
    rqs: Vec<RtRq>,
    /// Where each task is queued (CPU and key), if it is.
    at: Vec<Option<(CpuId, Key)>>,
    /// SCHED_RR: timeslice left, ns (`p->rt.time_slice`).
    pub slice_left: Vec<u64>,
}

impl RtQueues {
    /// Empty queues for `ncpus` CPUs and `ntasks` tasks; every RR timeslice
    /// starts full (`rr`).
    pub fn new(ncpus: usize, ntasks: usize, rr: u64) -> RtQueues {
        RtQueues {
            rqs: vec![RtRq::default(); ncpus],
            at: vec![None; ntasks],
            slice_left: vec![rr; ntasks],
        }
    }

    /// Queue `t` (priority `prio`, 1..=99) on `cpu`, at the head of its
    /// priority's list or at its tail.
    pub fn enqueue(&mut self, cpu: CpuId, t: TaskId, prio: u8, head: bool) {
        debug_assert!(self.at[t].is_none(), "task {t} queued twice");
        let rq = &mut self.rqs[cpu];
        let pos = if head {
            rq.head -= 1;
            rq.head
        } else {
            rq.tail += 1;
            rq.tail
        };
        let key = (u8::MAX - prio, pos);
        rq.q.insert(key, t);
        self.at[t] = Some((cpu, key));
    }

    /// Remove `t` from its queue; returns the CPU it was queued on.
    pub fn dequeue(&mut self, t: TaskId) -> Option<CpuId> {
        let (cpu, key) = self.at[t].take()?;
        self.rqs[cpu].q.remove(&key);
        Some(cpu)
    }

    /// Whether `t` is queued.
    #[inline]
    pub fn is_queued(&self, t: TaskId) -> bool {
        self.at[t].is_some()
    }

    /// The highest-priority queued task of `cpu` (the head of its highest
    /// non-empty list) and its priority.
    pub fn highest(&self, cpu: CpuId) -> Option<(u8, TaskId)> {
        self.rqs[cpu]
            .q
            .first_key_value()
            .map(|(&(inv, _), &t)| (u8::MAX - inv, t))
    }

    /// Queued tasks of `cpu`, highest priority first (list order within a
    /// priority).
    pub fn queued(&self, cpu: CpuId) -> impl Iterator<Item = (u8, TaskId)> + '_ {
        self.rqs[cpu]
            .q
            .iter()
            .map(|(&(inv, _), &t)| (u8::MAX - inv, t))
    }

    /// Whether `cpu` has a queued task of priority `prio`.
    pub fn has_prio(&self, cpu: CpuId, prio: u8) -> bool {
        let inv = u8::MAX - prio;
        self.rqs[cpu]
            .q
            .range((inv, i64::MIN)..=(inv, i64::MAX))
            .next()
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_fifo_order_and_head_insertion() {
        let mut q = RtQueues::new(2, 4, 100);
        q.enqueue(0, 0, 10, false);
        q.enqueue(0, 1, 50, false);
        q.enqueue(0, 2, 10, false);
        assert_eq!(q.highest(0), Some((50, 1)));
        assert_eq!(q.dequeue(1), Some(0));
        assert_eq!(q.highest(0), Some((10, 0)));
        // A preempted task goes back to the head of its list.
        q.enqueue(0, 3, 10, true);
        let order: Vec<TaskId> = q.queued(0).map(|(_, t)| t).collect();
        assert_eq!(order, vec![3, 0, 2]);
        assert!(q.has_prio(0, 10) && !q.has_prio(0, 50) && !q.has_prio(1, 10));
        assert_eq!(q.dequeue(1), None);
        assert!(q.is_queued(3) && !q.is_queued(1));
    }
}
