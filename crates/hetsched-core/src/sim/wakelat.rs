//! Wake-up latency samples per task: the time from becoming runnable after
//! a wake-up (a sleep or block ending, or a new task's first wake-up) to
//! starting to run on a CPU. `metrics` turns them into quantiles.

use crate::os::TaskId;
use crate::time::SimTime;

/// Per task: when its pending wake-up happened; and every latency so far
/// (ns) with its task, in one log (12 bytes a wake-up: appending to one
/// log is cheaper on the engine's hot path than to one array per task).
/// The log is a list of fixed-size chunks, so that it never moves what it
/// holds as it grows (growing one array by doubling copied it, about 7
/// instructions per event of a long run).
#[derive(Clone, Debug, Default)]
pub struct WakeLat {
    since: Vec<Option<SimTime>>,
    /// Per task: its samples in the log so far (so that [`WakeLat::per_task`]
    /// sizes each task's vector without a counting pass over the log).
    count: Vec<u32>,
    /// Full chunks, then the one being filled (last).
    chunks: Vec<Chunk>,
}

/// Entries of one chunk of the log.
const CHUNK: usize = 1 << 14;

#[derive(Clone, Debug)]
struct Chunk {
    task: Vec<u32>,
    lat: Vec<u64>,
}

impl WakeLat {
    /// `t` became runnable by a wake-up at `now`.
    #[inline]
    pub fn woke(&mut self, t: TaskId, now: SimTime) {
        if t >= self.since.len() {
            self.since.resize(t + 1, None);
            self.count.resize(t + 1, 0);
        }
        self.since[t] = Some(now);
    }

    /// `t` started running at `now`: closes its pending wake-up, if any.
    #[inline]
    pub fn ran(&mut self, t: TaskId, now: SimTime) {
        let Some(w) = self.since.get_mut(t).and_then(Option::take) else {
            return;
        };
        let lat = now.0.saturating_sub(w.0);
        // `since` and `count` grow together: `t` has a count.
        if let Some(n) = self.count.get_mut(t) {
            *n += 1;
        }
        match self.chunks.last_mut() {
            Some(c) if c.task.len() < CHUNK => {
                c.task.push(t as u32);
                c.lat.push(lat);
            }
            _ => self.new_chunk(t, lat),
        }
    }

    #[cold]
    #[inline(never)]
    fn new_chunk(&mut self, t: TaskId, lat: u64) {
        let mut c = Chunk {
            task: Vec::with_capacity(CHUNK),
            lat: Vec::with_capacity(CHUNK),
        };
        c.task.push(t as u32);
        c.lat.push(lat);
        self.chunks.push(c);
    }

    /// (task, latency) of every sample, in the order they happened.
    fn samples(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.chunks
            .iter()
            .flat_map(|c| c.task.iter().copied().zip(c.lat.iter().copied()))
    }

    /// The latencies of each of tasks `0..ntasks`, ns, in the order they
    /// happened. Each task's vector is allocated once at its final size
    /// (counted as the samples came): growing 2 000 vectors by doubling cost
    /// about 20 instructions per event of the run in reallocations and
    /// copies, and a counting pass over the log about 6.
    pub fn per_task(&self, ntasks: usize) -> Vec<Vec<u64>> {
        let mut out: Vec<Vec<u64>> = (0..ntasks)
            .map(|t| Vec::with_capacity(self.count.get(t).map_or(0, |&n| n as usize)))
            .collect();
        for (t, l) in self.samples() {
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

    #[test]
    fn the_log_keeps_every_sample_in_order_across_chunks() {
        let mut w = WakeLat::default();
        let n = 2 * CHUNK + 5;
        for i in 0..n {
            let t = i % 3;
            w.woke(t, SimTime(10 * i as u64));
            w.ran(t, SimTime(10 * i as u64 + i as u64));
        }
        assert_eq!(w.chunks.len(), 3);
        let per = w.per_task(3);
        for (t, v) in per.iter().enumerate() {
            let want: Vec<u64> = (0..n).filter(|i| i % 3 == t).map(|i| i as u64).collect();
            assert_eq!(v, &want, "task {t}");
        }
    }
}
