//! The deadline class (SCHED_DEADLINE): each task's CBS state and the rules
//! of the Constant Bandwidth Server, as kernel/sched/deadline.c applies them
//! (Documentation/scheduler/sched-deadline.rst, section 2), and the root
//! domain's EDF queue. The engine's class stack (`sim/classes.rs`) decides
//! when they apply.

use crate::os::{SchedAttr, TaskId};
use crate::time::SimTime;
use std::collections::BTreeSet;

/// A SCHED_DEADLINE task's scheduling entity (`struct sched_dl_entity`).
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct DlEntity {
    /// Budget left in the current period, ns (negative after an overrun).
    pub runtime: i64,
    /// Absolute scheduling deadline.
    pub deadline: SimTime,
    /// Out of budget until its replenishment (`dl_throttled`).
    pub throttled: bool,
    /// The deadline whose miss was counted (a miss is counted once).
    pub missed: Option<SimTime>,
}

/// What a wake-up does to a deadline entity (`update_dl_entity`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WakeRule {
    /// The current deadline and budget are kept.
    Keep,
    /// New deadline `now + dl_deadline` and a full budget.
    Renew,
    /// Constrained deadline, deadline not passed: budget cut to the
    /// density times the laxity (`update_dl_revised_wakeup`).
    Revised,
    /// Constrained deadline passed before its period ended: throttled
    /// until the next period (`dl_check_constrained_dl`).
    WaitPeriod,
}

impl DlEntity {
    /// The entity of a new task (`setup_new_dl_entity`).
    pub fn new_at(a: &SchedAttr, now: SimTime) -> DlEntity {
        DlEntity {
            runtime: a.dl_runtime as i64,
            deadline: now + SimTime(a.dl_deadline),
            throttled: false,
            missed: None,
        }
    }

    /// Start of the next period: `deadline - dl_deadline + dl_period`
    /// (`dl_next_period`), when a throttled entity is replenished.
    pub fn next_period(&self, a: &SchedAttr) -> SimTime {
        SimTime(self.deadline.0.saturating_sub(a.dl_deadline) + a.dl_period)
    }

    /// The CBS wake-up rule: whether using the remaining budget by the
    /// current deadline would exceed the reserved bandwidth
    /// (`dl_entity_overflow`: runtime / (deadline - now) > dl_runtime /
    /// dl_deadline), or the deadline passed.
    pub fn wake_rule(&self, a: &SchedAttr, now: SimTime) -> WakeRule {
        let implicit = a.dl_deadline == a.dl_period;
        if !implicit && self.deadline <= now && now < self.next_period(a) {
            return WakeRule::WaitPeriod;
        }
        if self.deadline <= now {
            return WakeRule::Renew;
        }
        let laxity = (self.deadline.0 - now.0) as u128;
        let left = self.runtime.max(0) as u128;
        // runtime / laxity > dl_runtime / dl_deadline, in integers.
        let overflow = left * a.dl_deadline as u128 > a.dl_runtime as u128 * laxity;
        match (overflow, implicit) {
            (false, _) => WakeRule::Keep,
            (true, true) => WakeRule::Renew,
            (true, false) => WakeRule::Revised,
        }
    }

    /// Apply a wake-up rule (not `WaitPeriod`, which throttles).
    pub fn apply_wake(&mut self, rule: WakeRule, a: &SchedAttr, now: SimTime) {
        match rule {
            WakeRule::Keep | WakeRule::WaitPeriod => {}
            WakeRule::Renew => {
                self.deadline = now + SimTime(a.dl_deadline);
                self.runtime = a.dl_runtime as i64;
            }
            WakeRule::Revised => {
                let laxity = (self.deadline.0 - now.0) as u128;
                self.runtime = (a.dl_runtime as u128 * laxity / a.dl_deadline as u128) as i64;
            }
        }
    }

    /// Replenish a throttled entity at `now` (`replenish_dl_entity`): add a
    /// budget and push the deadline a period on until the budget is
    /// positive; an entity that lags behind `now` restarts from `now`.
    pub fn replenish(&mut self, a: &SchedAttr, now: SimTime) {
        while self.runtime <= 0 {
            self.deadline += SimTime(a.dl_period);
            self.runtime += a.dl_runtime as i64;
        }
        if self.deadline < now {
            self.deadline = now + SimTime(a.dl_deadline);
            self.runtime = a.dl_runtime as i64;
        }
        self.throttled = false;
    }
}

/// The root domain's queue of runnable deadline tasks that are neither
/// running nor throttled, earliest deadline first (global EDF).
#[derive(Clone, Debug, Default)]
pub struct EdfQueue {
    q: BTreeSet<(SimTime, TaskId)>,
}

impl EdfQueue {
    /// Queue `t` with deadline `d`.
    pub fn insert(&mut self, d: SimTime, t: TaskId) {
        self.q.insert((d, t));
    }
    /// Remove `t` queued with deadline `d`; whether it was queued.
    pub fn remove(&mut self, d: SimTime, t: TaskId) -> bool {
        self.q.remove(&(d, t))
    }
    /// The earliest-deadline queued task.
    pub fn first(&self) -> Option<(SimTime, TaskId)> {
        self.q.first().copied()
    }
    /// Queued tasks, earliest deadline first.
    pub fn iter(&self) -> impl Iterator<Item = (SimTime, TaskId)> + '_ {
        self.q.iter().copied()
    }
    /// Number of queued tasks.
    pub fn len(&self) -> usize {
        self.q.len()
    }
    /// Whether none is queued.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::SchedPolicy;

    fn attr(r: u64, d: u64, p: u64) -> SchedAttr {
        SchedAttr {
            policy: SchedPolicy::Deadline,
            rt_prio: 0,
            dl_runtime: r,
            dl_deadline: d,
            dl_period: p,
        }
    }

    #[test]
    fn cbs_wakeup_rule() {
        let a = attr(10, 100, 100);
        let mut e = DlEntity::new_at(&a, SimTime(0));
        assert_eq!((e.runtime, e.deadline), (10, SimTime(100)));
        // 5 left with 50 to go: 5/50 = 0.1 = 10/100: kept.
        e.runtime = 5;
        assert_eq!(e.wake_rule(&a, SimTime(50)), WakeRule::Keep);
        // 5 left with 40 to go: 0.125 > 0.1: a new deadline and budget.
        assert_eq!(e.wake_rule(&a, SimTime(60)), WakeRule::Renew);
        e.apply_wake(WakeRule::Renew, &a, SimTime(60));
        assert_eq!((e.runtime, e.deadline), (10, SimTime(160)));
        assert_eq!(e.wake_rule(&a, SimTime(170)), WakeRule::Renew);
    }

    #[test]
    fn constrained_deadline_rules() {
        let a = attr(10, 50, 100);
        let mut e = DlEntity::new_at(&a, SimTime(0));
        e.runtime = 8;
        // 8 / 30 > 10 / 50: revised budget 10/50 × 30 = 6, deadline kept.
        assert_eq!(e.wake_rule(&a, SimTime(20)), WakeRule::Revised);
        e.apply_wake(WakeRule::Revised, &a, SimTime(20));
        assert_eq!((e.runtime, e.deadline), (6, SimTime(50)));
        // Deadline passed, period not over: wait for the next period.
        assert_eq!(e.wake_rule(&a, SimTime(70)), WakeRule::WaitPeriod);
        assert_eq!(e.next_period(&a), SimTime(100));
    }

    #[test]
    fn replenishment_moves_the_deadline_by_periods() {
        let a = attr(10, 100, 100);
        let mut e = DlEntity::new_at(&a, SimTime(0));
        e.runtime = -15;
        e.throttled = true;
        e.replenish(&a, SimTime(100));
        assert_eq!(
            (e.runtime, e.deadline, e.throttled),
            (5, SimTime(300), false)
        );
        let mut q = EdfQueue::default();
        q.insert(SimTime(300), 1);
        q.insert(SimTime(200), 2);
        assert_eq!(q.first(), Some((SimTime(200), 2)));
        assert!(q.remove(SimTime(200), 2) && !q.remove(SimTime(200), 2));
        assert_eq!(q.len(), 1);
    }
}
