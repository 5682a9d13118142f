//! Wake-up latency samples per task: the time from becoming runnable after
//! a wake-up (a sleep or block ending, or a new task's first wake-up) to
//! starting to run on a CPU. `metrics` turns them into quantiles.

use crate::os::TaskId;
use crate::time::SimTime;

/// Per task: when its pending wake-up happened, and its latencies so far
/// (ns) in the order they happened, in an array of its own. A latency of
/// 2^32 ns (4.3 s) or more, rare, is stored as `u32::MAX` with its value in
/// `long`, so that a sample takes 4 bytes.
///
/// One array per task costs the hot path what appending to one log of
/// (task, latency) pairs did (a few loads and a store), and leaves nothing
/// to regroup by task at the end of the run: the quantiles are taken from
/// each task's array directly. A task's pending wake-up and its array's
/// header share a slot (32 bytes), so that with many tasks a wake-up and its
/// run find them in one cache line.
#[derive(Clone, Debug, Default)]
pub struct WakeLat {
    /// Per task: its pending wake-up and its latencies.
    slots: Vec<Slot>,
    /// (task, latency) of the latencies of 2^32 − 1 ns or more, in the order
    /// they happened.
    long: Vec<(u32, u64)>,
}

/// No pending wake-up.
const NONE: u64 = u64::MAX;

#[derive(Clone, Debug)]
struct Slot {
    /// The time of its pending wake-up ([`NONE`]: none).
    since: u64,
    /// Its latencies, ns.
    lat: Vec<u32>,
}

impl Default for Slot {
    fn default() -> Slot {
        Slot {
            since: NONE,
            lat: Vec::new(),
        }
    }
}

impl WakeLat {
    /// `t` became runnable by a wake-up at `now`.
    #[inline]
    pub fn woke(&mut self, t: TaskId, now: SimTime) {
        if t >= self.slots.len() {
            self.grow(t);
        }
        self.slots[t].since = now.0;
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, t: TaskId) {
        self.slots.resize_with(t + 1, Slot::default);
    }

    /// Prefetch `t`'s slot (see `crate::prefetch`).
    #[inline]
    pub fn read_ahead(&self, t: TaskId) {
        if let Some(slot) = self.slots.get(t) {
            crate::prefetch::lines(slot, 1);
        }
    }

    /// `t` started running at `now`: closes its pending wake-up, if any.
    #[inline]
    pub fn ran(&mut self, t: TaskId, now: SimTime) {
        let Some(slot) = self.slots.get_mut(t) else {
            return;
        };
        if slot.since == NONE {
            return;
        }
        let ns = now.0.saturating_sub(slot.since);
        slot.since = NONE;
        let lat = match u32::try_from(ns) {
            Ok(l) if l < u32::MAX => l,
            _ => {
                self.long.push((t as u32, ns));
                u32::MAX
            }
        };
        slot.lat.push(lat);
    }

    /// The latencies of each task, to read at the end of a run.
    pub fn per_task(&self) -> PerTask<'_> {
        let mut long = self.long.clone();
        // Grouped by task, each task's in the order they happened (a stable
        // sort), so that a task's are found by a binary search.
        long.sort_by_key(|&(t, _)| t);
        PerTask {
            w: self,
            long,
            scratch: Vec::new(),
        }
    }
}

/// Every task's wake-up latencies (see [`WakeLat::per_task`]).
#[derive(Clone, Debug)]
pub struct PerTask<'a> {
    w: &'a WakeLat,
    /// (task, latency) of the latencies of 2^32 − 1 ns or more, by task and
    /// then in the order they happened.
    long: Vec<(u32, u64)>,
    /// A task's latencies as stored, to reorder (see [`PerTask::logged_mut`]).
    scratch: Vec<u32>,
}

impl PerTask<'_> {
    /// Task `t`'s latencies, ns, in the order they happened (empty for a task
    /// out of range).
    pub fn task(&self, t: TaskId) -> Vec<u64> {
        let mut long = self.long_of(t).iter();
        self.logged(t)
            .iter()
            .map(|&l| match l {
                u32::MAX => long.next().map_or(u64::from(l), |&(_, v)| v),
                l => u64::from(l),
            })
            .collect()
    }

    /// Task `t`'s entries of `long`.
    fn long_of(&self, t: TaskId) -> &[(u32, u64)] {
        let from = self.long.partition_point(|&(u, _)| (u as usize) < t);
        let to = self.long.partition_point(|&(u, _)| (u as usize) <= t);
        &self.long[from..to]
    }

    /// A copy of task `t`'s latencies as stored, to reorder in place (a
    /// selection for quantiles) when none is long (see
    /// [`PerTask::has_long`]); valid until the next call.
    pub fn logged_mut(&mut self, t: TaskId) -> &mut [u32] {
        self.scratch.clear();
        self.scratch
            .extend_from_slice(self.w.slots.get(t).map_or(&[], |s| &s.lat));
        &mut self.scratch
    }

    /// Whether a latency of task `t` was 2^32 − 1 ns or more, so that its
    /// stored values do not all hold their latency ([`PerTask::task`] does).
    pub fn has_long(&self, t: TaskId) -> bool {
        !self.long_of(t).is_empty()
    }

    fn logged(&self, t: TaskId) -> &[u32] {
        self.w.slots.get(t).map_or(&[], |s| &s.lat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_runs_from_the_wake_up_to_the_first_run_after_it() {
        let mut w = WakeLat::default();
        // Running with no wake-up pending (a preempted task resuming) adds
        // nothing; a wake-up at 5 µs then runs at 7 µs and again at 9 µs:
        // one sample, 2 µs.
        w.ran(3, SimTime(1_000));
        w.woke(3, SimTime(5_000));
        w.ran(3, SimTime(7_000));
        w.ran(3, SimTime(9_000));
        w.woke(0, SimTime(9_000));
        w.ran(0, SimTime(9_500));
        let per = w.per_task();
        assert_eq!(per.task(3), [2_000]);
        assert_eq!(per.task(0), [500]);
        assert!(per.task(1).is_empty());
        assert!(per.task(4).is_empty());
    }

    #[test]
    fn latencies_of_four_seconds_and_more_are_kept_whole() {
        let mut w = WakeLat::default();
        let long = [
            u64::from(u32::MAX) - 1,
            u64::from(u32::MAX),
            5 << 32,
            7,
            6 << 32,
        ];
        for (i, &l) in long.iter().enumerate() {
            let t = [1, 0, 1, 0, 0][i];
            w.woke(t, SimTime(1_000));
            w.ran(t, SimTime(1_000 + l));
        }
        w.woke(2, SimTime(1_000));
        w.ran(2, SimTime(2_000));
        let per = w.per_task();
        assert_eq!(per.task(0), [long[1], long[3], long[4]]);
        assert_eq!(per.task(1), [long[0], long[2]]);
        assert_eq!(per.task(2), [1_000]);
        // 2^32 − 2 ns fits the log; 2^32 − 1 ns and more do not.
        assert!(per.has_long(0) && per.has_long(1) && !per.has_long(2));
    }

    #[test]
    fn every_sample_is_kept_in_order_per_task() {
        let mut w = WakeLat::default();
        // Three tasks interleaved, enough samples for each array to grow
        // many times; task 1's copy for a selection is taken twice, with
        // another task's in between.
        let n = 40_005;
        for i in 0..n {
            let t = i % 3;
            w.woke(t, SimTime(10 * i as u64));
            w.ran(t, SimTime(10 * i as u64 + i as u64));
        }
        let mut per = w.per_task();
        for t in 0..3 {
            let want: Vec<u64> = (0..n).filter(|i| i % 3 == t).map(|i| i as u64).collect();
            assert_eq!(per.task(t), want, "task {t}");
        }
        let want1: Vec<u32> = (0..n).filter(|i| i % 3 == 1).map(|i| i as u32).collect();
        assert_eq!(per.logged_mut(1), &want1[..]);
        assert_eq!(per.logged_mut(2).len(), n / 3);
        assert_eq!(per.logged_mut(1), &want1[..]);
        assert!(per.logged_mut(7).is_empty());
    }
}
