//! Wake-up latency samples per task: the time from becoming runnable after
//! a wake-up (a sleep or block ending, or a new task's first wake-up) to
//! starting to run on a CPU. `metrics` turns them into quantiles.

use crate::os::TaskId;
use crate::time::SimTime;

/// Per task: when its pending wake-up happened, and every latency so far (ns).
#[derive(Clone, Debug, Default)]
pub struct WakeLat {
    since: Vec<Option<SimTime>>,
    samples: Vec<Vec<u64>>,
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
        if t >= self.samples.len() {
            self.samples.resize(t + 1, Vec::new());
        }
        self.samples[t].push(now.0.saturating_sub(w.0));
    }

    /// The latencies of `t`, ns, in the order they happened.
    pub fn samples(&self, t: TaskId) -> &[u64] {
        self.samples.get(t).map_or(&[], Vec::as_slice)
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
        assert_eq!(w.samples(3), &[2_000]);
        assert!(w.samples(0).is_empty());
        assert!(w.samples(99).is_empty());
    }
}
