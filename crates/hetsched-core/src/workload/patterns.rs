//! Program patterns: what each program kind means, as the operations its
//! threads run and the program's shared state (work queue, period, barrier).
//!
//! The patterns take plain values that the configuration layer has
//! validated and converted (reference work in ns, times as [`SimTime`]); the
//! arithmetic is the one the golden runs were recorded with, so it must not
//! be reordered.

use super::{Op, Program};
use crate::time::SimTime;
use std::sync::Arc;

/// A program's pattern with validated values. Reference work is in
/// reference ns (ns on a capacity-1024 CPU at its highest frequency).
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// One thread computing `work`.
    Sequential {
        /// Reference work, ns.
        work: f64,
    },
    /// Static data-parallel: the threads share `work` equally, with a
    /// barrier between `iterations` (≥ 1).
    Parallel {
        /// Total reference work, ns.
        work: f64,
        /// Barrier-separated iterations.
        iterations: u32,
    },
    /// Dynamic binding: the threads pull `chunks` (≥ 1) equal chunks of `work`.
    Dynamic {
        /// Total reference work, ns.
        work: f64,
        /// Chunks in the shared work queue.
        chunks: u32,
    },
    /// Fork-join: per iteration, thread 0 computes the sequential part
    /// (`seq_fraction` of the iteration's work) while the others wait at a
    /// barrier, then all share the parallel part.
    ForkJoin {
        /// Total reference work, ns.
        work: f64,
        /// Iterations (≥ 1).
        iterations: u32,
        /// Fraction of each iteration done by thread 0 alone, [0, 1).
        seq_fraction: f64,
    },
    /// Process pool: the workers take `chunks` (≥ 1) jobs of equal work,
    /// each followed by `io` of I/O.
    Pool {
        /// Total reference work, ns.
        work: f64,
        /// Jobs in the shared queue.
        chunks: u32,
        /// I/O after each job.
        io: SimTime,
    },
    /// Periodic real-time tasks: each thread releases a job of `wcet` every
    /// `period`, due `deadline` after its release, `jobs` (≥ 1) times.
    Periodic {
        /// Work of one job, reference ns.
        wcet: f64,
        /// Period.
        period: SimTime,
        /// Relative deadline.
        deadline: SimTime,
        /// Jobs per thread (`u32::MAX`: until the end of the run).
        jobs: u32,
    },
    /// Explicit operations run `loops` (≥ 1) times by every thread; a
    /// barrier waits for `barrier_count` threads (dividing the thread
    /// count; default all).
    Phases {
        /// The operations (compute phases index the program's parameters).
        ops: Vec<Op>,
        /// Times each thread runs them.
        loops: u32,
        /// Threads a barrier waits for.
        barrier_count: Option<u32>,
    },
}

/// Each thread's operations and the times it runs them; identical threads
/// share one list.
pub type ThreadOps = Vec<(Arc<[Op]>, u32)>;

/// Expand `pattern` for `threads` threads (≥ 1): set the shared state of
/// `prog` that the pattern uses and return each thread's operations.
/// Compute operations of the built-in patterns use parameter set 0.
pub fn expand(pattern: &Pattern, threads: u32, prog: &mut Program) -> ThreadOps {
    let mut per_thread: ThreadOps = Vec::with_capacity(threads as usize);
    let cmp = |w: f64| Op::Compute { work: w, param: 0 };
    let same = |ops: Arc<[Op]>, loops: u32, per_thread: &mut ThreadOps| {
        for _ in 0..threads {
            per_thread.push((ops.clone(), loops));
        }
    };
    match pattern {
        Pattern::Sequential { work } => {
            per_thread.push((vec![cmp(*work)].into(), 1));
        }
        &Pattern::Parallel {
            work,
            iterations: k,
        } => {
            let each = work / (threads as f64 * k as f64);
            let ops: Arc<[Op]> = if k > 1 {
                vec![cmp(each), Op::Barrier].into()
            } else {
                vec![cmp(each)].into()
            };
            same(ops, k, &mut per_thread);
        }
        &Pattern::Dynamic { work, chunks } => {
            set_queue(prog, work, chunks, SimTime::from_ms_f64(0.0));
            same(vec![Op::Pull].into(), 1, &mut per_thread);
        }
        &Pattern::Pool { work, chunks, io } => {
            set_queue(prog, work, chunks, io);
            same(vec![Op::Pull].into(), 1, &mut per_thread);
        }
        &Pattern::ForkJoin {
            work,
            iterations: k,
            seq_fraction: f,
        } => {
            let per_iter = work / k as f64;
            let seq = per_iter * f;
            let par = per_iter * (1.0 - f) / threads as f64;
            let mut main = Vec::new();
            let mut other = Vec::new();
            if seq > 0.0 {
                main.push(cmp(seq));
                main.push(Op::Barrier);
                other.push(Op::Barrier);
            }
            for ops in [&mut main, &mut other] {
                ops.push(cmp(par));
                ops.push(Op::Barrier);
            }
            let other: Arc<[Op]> = other.into();
            per_thread.push((main.into(), k));
            for _ in 1..threads {
                per_thread.push((other.clone(), k));
            }
        }
        &Pattern::Periodic {
            wcet,
            period,
            deadline,
            jobs,
        } => {
            prog.period = period;
            prog.rel_deadline = deadline;
            same(
                vec![cmp(wcet), Op::WaitPeriod].into(),
                jobs,
                &mut per_thread,
            );
        }
        Pattern::Phases {
            ops,
            loops,
            barrier_count,
        } => {
            if let Some(bc) = *barrier_count {
                prog.barrier_size = bc;
                prog.barrier_count = bc;
            }
            same(ops.clone().into(), *loops, &mut per_thread);
        }
    }
    per_thread
}

/// The shared work queue of a dynamic or pool program: `chunks` chunks of
/// equal work, each followed by `io`.
fn set_queue(prog: &mut Program, work: f64, chunks: u32, io: SimTime) {
    prog.chunks = chunks as u64;
    prog.chunk_work = work / chunks as f64;
    prog.chunk_io = io;
    prog.chunk_param = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(threads: u32) -> Program {
        Program::new(0, "p".into(), "test", threads, SimTime::ZERO)
    }

    #[test]
    fn parallel_shares_work_per_thread_and_iteration() {
        // 120 ms over 4 threads and 3 iterations: 10 ms per thread and
        // iteration, a barrier after each.
        let mut p = program(4);
        let t = expand(
            &Pattern::Parallel {
                work: 120e6,
                iterations: 3,
            },
            4,
            &mut p,
        );
        assert_eq!(t.len(), 4);
        for (ops, loops) in &t {
            assert_eq!(
                **ops,
                [
                    Op::Compute {
                        work: 10e6,
                        param: 0
                    },
                    Op::Barrier
                ]
            );
            assert_eq!(*loops, 3);
        }
        // One iteration needs no barrier.
        let t = expand(
            &Pattern::Parallel {
                work: 8e6,
                iterations: 1,
            },
            2,
            &mut p,
        );
        assert_eq!(
            *t[0].0,
            [Op::Compute {
                work: 4e6,
                param: 0
            }]
        );
    }

    #[test]
    fn fork_join_gives_thread_zero_the_sequential_part() {
        // 100 ms in 2 iterations = 50 ms each; 20 % sequential = 10 ms on
        // thread 0; the 40 ms parallel part over 4 threads = 10 ms each.
        let mut p = program(4);
        let t = expand(
            &Pattern::ForkJoin {
                work: 100e6,
                iterations: 2,
                seq_fraction: 0.2,
            },
            4,
            &mut p,
        );
        let c = |w: f64| Op::Compute { work: w, param: 0 };
        assert_eq!(*t[0].0, [c(10e6), Op::Barrier, c(10e6), Op::Barrier]);
        for (ops, loops) in &t[1..] {
            assert_eq!(**ops, [Op::Barrier, c(10e6), Op::Barrier]);
            assert_eq!(*loops, 2);
        }
    }

    #[test]
    fn queues_periods_and_barriers_go_to_the_program() {
        // Pool: 60 ms in 6 jobs = 10 ms each, 2 ms of I/O after each.
        let mut p = program(3);
        let io = SimTime::from_ms_f64(2.0);
        let t = expand(
            &Pattern::Pool {
                work: 60e6,
                chunks: 6,
                io,
            },
            3,
            &mut p,
        );
        assert_eq!((p.chunks, p.chunk_work, p.chunk_io), (6, 10e6, io));
        assert!(t.iter().all(|(ops, l)| **ops == [Op::Pull] && *l == 1));
        // Periodic: 5 jobs of 1 ms every 10 ms, due after 8 ms.
        let mut p = program(2);
        let (period, deadline) = (SimTime::from_ms_f64(10.0), SimTime::from_ms_f64(8.0));
        let t = expand(
            &Pattern::Periodic {
                wcet: 1e6,
                period,
                deadline,
                jobs: 5,
            },
            2,
            &mut p,
        );
        assert_eq!((p.period, p.rel_deadline), (period, deadline));
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].1, 5);
        assert_eq!(
            *t[1].0,
            [
                Op::Compute {
                    work: 1e6,
                    param: 0
                },
                Op::WaitPeriod
            ]
        );
        // Phases: barriers of 2 among 4 threads.
        let mut p = program(4);
        let ops = vec![Op::Sleep { ns: 5 }, Op::Barrier];
        let t = expand(
            &Pattern::Phases {
                ops: ops.clone(),
                loops: 7,
                barrier_count: Some(2),
            },
            4,
            &mut p,
        );
        assert_eq!((p.barrier_size, p.barrier_count), (2, 2));
        assert!(t.iter().all(|(o, l)| **o == *ops && *l == 7));
    }
}
