//! Wake-up latency samples per task: the time from becoming runnable after
//! a wake-up (a sleep or block ending, or a new task's first wake-up) to
//! starting to run on a CPU. `metrics` turns them into quantiles.

use crate::os::TaskId;
use crate::time::SimTime;

/// Per task: when its pending wake-up happened; and every latency so far
/// (ns) with its task, in one flat log (12 bytes a wake-up: appending to one
/// array is cheaper on the engine's hot path than to one array per task).
#[derive(Clone, Debug, Default)]
pub struct WakeLat {
    since: Vec<Option<SimTime>>,
    task: Vec<u32>,
    lat: Vec<u64>,
}

impl WakeLat {
    /// `t` became runnable by a wake-up at `now`.
    #[inline]
    pub fn woke(&mut self, t: TaskId, now: SimTime) {
        if t >= self.since.len() {
            self.since.resize(t + 1, None);
        }
        self.since[t] = Some(now);
    }

    /// `t` started running at `now`: closes its pending wake-up, if any.
    #[inline]
    pub fn ran(&mut self, t: TaskId, now: SimTime) {
        let Some(w) = self.since.get_mut(t).and_then(Option::take) else {
            return;
        };
        self.task.push(t as u32);
        self.lat.push(now.0.saturating_sub(w.0));
    }

    /// The latencies of each of tasks `0..ntasks`, ns, in the order they
    /// happened. Each task's vector is allocated once at its final size
    /// (counted first): growing 2 000 vectors by doubling cost about 20
    /// instructions per event of the run in reallocations and copies.
    pub fn per_task(&self, ntasks: usize) -> Vec<Vec<u64>> {
        let mut n = vec![0usize; ntasks];
        for &t in &self.task {
            if let Some(c) = n.get_mut(t as usize) {
                *c += 1;
            }
        }
        let mut out: Vec<Vec<u64>> = n.into_iter().map(Vec::with_capacity).collect();
        for (&t, &l) in self.task.iter().zip(&self.lat) {
            if let Some(v) = out.get_mut(t as usize) {
                v.push(l);
            }
        }
        out
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
        let per = w.per_task(4);
        assert_eq!(per[3], vec![2_000]);
        assert_eq!(per[0], vec![500]);
        assert!(per[1].is_empty());
    }
}
