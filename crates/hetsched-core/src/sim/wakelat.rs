//! Wake-up latency samples per task: the time from becoming runnable after
//! a wake-up (a sleep or block ending, or a new task's first wake-up) to
//! starting to run on a CPU. `metrics` turns them into quantiles.

use crate::os::TaskId;
use crate::time::SimTime;

/// Per task: when its pending wake-up happened; and every latency so far
/// (ns) with its task, in one log (8 bytes a wake-up: appending to one
/// log is cheaper on the engine's hot path than to one array per task, and
/// a run's memory grows by its log, so it is kept small: a latency of 2^32
/// ns (4.3 s) or more, rare, is logged as `u32::MAX` with its value in
/// `long`).
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
    /// The latencies logged as `u32::MAX`, in the order they happened.
    long: Vec<u64>,
}

/// Entries of one chunk of the log.
const CHUNK: usize = 1 << 14;

#[derive(Clone, Debug)]
struct Chunk {
    task: Vec<u32>,
    lat: Vec<u32>,
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
        let ns = now.0.saturating_sub(w.0);
        // `since` and `count` grow together: `t` has a count.
        if let Some(n) = self.count.get_mut(t) {
            *n += 1;
        }
        let lat = match u32::try_from(ns) {
            Ok(l) if l < u32::MAX => l,
            _ => {
                self.long.push(ns);
                u32::MAX
            }
        };
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
    fn new_chunk(&mut self, t: TaskId, lat: u32) {
        let mut c = Chunk {
            task: Vec::with_capacity(CHUNK),
            lat: Vec::with_capacity(CHUNK),
        };
        c.task.push(t as u32);
        c.lat.push(lat);
        self.chunks.push(c);
    }

    /// The latencies of each of tasks `0..ntasks`, ns, in the order they
    /// happened, in one array: task `t`'s are `lat[start[t]..start[t + 1]]`
    /// (`start` has `ntasks + 1` entries). A counting sort of the log by
    /// task, with the counts kept as the samples came: one allocation, where
    /// a vector per task cost an allocation each and a copy for the
    /// quantiles.
    pub fn per_task(&self, ntasks: usize) -> PerTask {
        let mut start = Vec::with_capacity(ntasks + 1);
        let mut total = 0usize;
        start.push(0);
        for t in 0..ntasks {
            total += self.count.get(t).map_or(0, |&n| n as usize);
            start.push(total);
        }
        // Where the next sample of each task goes.
        let mut at: Vec<usize> = start[..ntasks].to_vec();
        let mut lat = vec![0u32; total];
        let mut long = Vec::new();
        let mut next_long = self.long.iter().copied();
        for c in &self.chunks {
            for (&t, &l) in c.task.iter().zip(&c.lat) {
                if l == u32::MAX {
                    long.push((t, next_long.next().unwrap_or(u64::from(l))));
                }
                if let Some(i) = at.get_mut(t as usize) {
                    lat[*i] = l;
                    *i += 1;
                }
            }
        }
        // Grouped by task, each task's in the order they happened (a stable
        // sort), so that a task's are found by a binary search.
        long.sort_by_key(|&(t, _)| t);
        PerTask { start, lat, long }
    }
}

/// Every task's wake-up latencies, grouped by task (see [`WakeLat::per_task`]).
#[derive(Clone, Debug, Default)]
pub struct PerTask {
    start: Vec<usize>,
    /// Latencies as logged: `u32::MAX` stands for one of the task's `long`.
    lat: Vec<u32>,
    /// (task, latency) of the latencies of 2^32 − 1 ns or more, by task and
    /// then in the order they happened.
    long: Vec<(u32, u64)>,
}

impl PerTask {
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

    /// Task `t`'s latencies as logged, to reorder in place (a selection
    /// for quantiles) when none is long (see [`PerTask::has_long`]).
    pub fn logged_mut(&mut self, t: TaskId) -> &mut [u32] {
        match (self.start.get(t), self.start.get(t + 1)) {
            (Some(&a), Some(&b)) => &mut self.lat[a..b],
            _ => &mut [],
        }
    }

    /// Whether a latency of task `t` was 2^32 − 1 ns or more, so that its
    /// logged values do not all hold their latency ([`PerTask::task`] does).
    pub fn has_long(&self, t: TaskId) -> bool {
        !self.long_of(t).is_empty()
    }

    fn logged(&self, t: TaskId) -> &[u32] {
        match (self.start.get(t), self.start.get(t + 1)) {
            (Some(&a), Some(&b)) => &self.lat[a..b],
            _ => &[],
        }
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
        let per = w.per_task(3);
        assert_eq!(per.task(0), [long[1], long[3], long[4]]);
        assert_eq!(per.task(1), [long[0], long[2]]);
        assert_eq!(per.task(2), [1_000]);
        // 2^32 − 2 ns fits the log; 2^32 − 1 ns and more do not.
        assert!(per.has_long(0) && per.has_long(1) && !per.has_long(2));
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
        for t in 0..3 {
            let want: Vec<u64> = (0..n).filter(|i| i % 3 == t).map(|i| i as u64).collect();
            assert_eq!(per.task(t), want, "task {t}");
        }
    }
}
