//! Workloads: programs made of threads, threads made of operations.
//!
//! A thread runs a list of operations `loops` times: compute a given amount of
//! reference work (with a class, memory intensity, IPC, cache behaviour and
//! optionally an ISA feature), sleep, wait at the program's barrier, pull
//! chunks from the program's shared work queue until it is empty, or end a
//! periodic job and wait for the next release; and rt-app's operations:
//! busy for a wall time, workload-wide barriers, mutexes, condition
//! variables (rt-app's suspend/resume are built of these), semaphores,
//! periodic timers, yield, affinity changes and forks (their objects and logic are in `sim/sync.rs`). The program patterns of the
//! papers (sequential, static data-parallel, dynamic binding, fork-join,
//! process pools, periodic real-time tasks) are generated from these in
//! [`patterns`], from values the configuration layer has validated.

pub mod patterns;

use crate::time::SimTime;
use std::sync::Arc;

/// One operation of a thread.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Compute `work` reference nanoseconds with parameters `param`.
    Compute {
        /// Reference nanoseconds of work (at reference speed).
        work: f64,
        /// Index into the program's parameter table.
        param: u32,
    },
    /// Sleep (or wait for I/O) for a time.
    Sleep {
        /// How long, ns.
        ns: u64,
    },
    /// Wait at the program's barrier.
    Barrier,
    /// Take chunks from the program's shared queue and compute them (each
    /// followed by the program's I/O time) until the queue is empty.
    Pull,
    /// End of a periodic job: record its response time, then sleep until the
    /// next release.
    WaitPeriod,
    /// Busy for `ns` of wall time on whatever CPU and frequency, preempted
    /// or not (rt-app `runtime`).
    RunFor {
        /// Wall time, ns.
        ns: u64,
    },
    /// Wait at the workload-wide barrier `name`: it opens when every live
    /// thread whose operations name it has arrived.
    SharedBarrier {
        /// The barrier's name.
        name: Arc<str>,
    },
    /// Take `mutex`, sleeping while another thread holds it.
    Lock {
        /// The mutex's name.
        mutex: Arc<str>,
    },
    /// Release `mutex`, handing it to its longest waiter.
    Unlock {
        /// The mutex's name.
        mutex: Arc<str>,
    },
    /// Release `mutex`, wait for a signal on `cond`, take `mutex` again.
    Wait {
        /// The condition variable's name.
        cond: Arc<str>,
        /// The mutex's name.
        mutex: Arc<str>,
    },
    /// Wake the longest waiter of `cond`; lost if none waits.
    Signal {
        /// The condition variable's name.
        cond: Arc<str>,
    },
    /// Wake every waiter of `cond`.
    Broad {
        /// The condition variable's name.
        cond: Arc<str>,
    },
    /// Signal `cond`, then wait on it with `mutex` (rt-app `sync`).
    SyncWait {
        /// The condition variable's name.
        cond: Arc<str>,
        /// The mutex's name.
        mutex: Arc<str>,
    },
    /// Add one to the semaphore `sem`, or wake its longest waiter.
    Post {
        /// The semaphore's name.
        sem: Arc<str>,
    },
    /// Take one from the semaphore `sem`, sleeping while it is zero.
    Pend {
        /// The semaphore's name.
        sem: Arc<str>,
    },
    /// Sleep until the next tick of the workload-wide periodic timer `name`
    /// (absolute ticks from its first arrival).
    Timer {
        /// The timer's name.
        name: Arc<str>,
        /// Its period, ns.
        period_ns: u64,
    },
    /// sched_yield.
    Yield,
    /// Set the thread's affinity to these CPUs from here on.
    Cpus {
        /// The allowed CPUs.
        cpus: Arc<[usize]>,
    },
    /// Start a new instance of the program `program` (by name) now.
    Fork {
        /// The program's name.
        program: Arc<str>,
    },
}

/// Parameters of a compute phase.
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeParams {
    /// Interned workload class.
    pub class: usize,
    /// Memory intensity: fraction of reference time stalled on memory.
    pub mem: f64,
    /// Instructions per cycle at reference speed, memory stalls included.
    pub ipc: f64,
    /// Last-level cache references per instruction.
    pub refs_per_instr: f64,
    /// Fraction of cache references that miss.
    pub miss_ratio: f64,
    /// Working-set size, KiB (for the cache-refill model).
    pub working_set_kb: f64,
    /// Required ISA feature (interned id), if any.
    pub feature: Option<usize>,
    /// Speed while the core's other hardware thread is busy, relative to
    /// alone (overrides the CPU type's `smt_factor`), if given.
    pub smt_factor: Option<f64>,
}

/// Run-time state of a program (all its threads).
#[derive(Clone, Debug)]
pub struct Program {
    /// Its index.
    pub id: usize,
    /// Its name.
    pub name: String,
    /// Its kind (`sequential`, `parallel`, ...), for reports.
    pub kind: String,
    /// Its threads.
    pub threads: Vec<usize>,
    /// When the first instance starts.
    pub start: SimTime,
    /// How many instances run one after another.
    pub repeat: u32,
    /// Current instance (0-based).
    pub instance: u32,
    /// When the current instance started.
    pub instance_start: SimTime,
    /// Threads of the current instance not yet exited.
    pub live: u32,
    /// Compute parameter table.
    pub params: Vec<ComputeParams>,
    /// Barrier participants per instance, from the scenario.
    pub barrier_size: u32,
    /// Barrier participants now (killed threads leave the barrier).
    pub barrier_count: u32,
    /// Threads waiting at the barrier.
    pub barrier_waiting: Vec<usize>,
    /// Reference work a thread spins at the barrier before it blocks (0: it
    /// blocks at once).
    pub barrier_spin: f64,
    /// Waiting threads still spinning (a subset of `barrier_waiting`).
    pub barrier_spinning: Vec<usize>,
    /// Chunks per instance in the shared work queue.
    pub chunks: u64,
    /// Chunks left in the current instance.
    pub chunks_left: u64,
    /// Reference work of one chunk.
    pub chunk_work: f64,
    /// Parameters of chunk work.
    pub chunk_param: u32,
    /// I/O time after each chunk.
    pub chunk_io: SimTime,
    /// Period of periodic threads.
    pub period: SimTime,
    /// Relative deadline of periodic threads.
    pub rel_deadline: SimTime,
    /// Uniform relative jitter applied to compute work and sleeps (0..1).
    pub jitter: f64,
    /// Completed instances: (instance, start, end).
    pub completions: Vec<(u32, SimTime, SimTime)>,
    /// `(after, nice)`: from instance `after` (0-based) on, the threads run
    /// at this nice value (ascending `after`).
    pub nice_schedule: Vec<(u32, i32)>,
    /// Started only by `fork` operations (not at `start`).
    pub forked: bool,
}

impl Program {
    /// A program with no threads yet and nothing of its kind set (the
    /// pattern's expansion, `patterns.rs`, fills that in): `barrier`
    /// threads meet at each barrier; the first instance starts at `start`.
    pub fn new(id: usize, name: String, kind: &str, barrier: u32, start: SimTime) -> Program {
        Program {
            id,
            name,
            kind: kind.to_string(),
            threads: vec![],
            start,
            repeat: 1,
            instance: 0,
            instance_start: SimTime::ZERO,
            live: 0,
            params: vec![],
            barrier_size: barrier,
            barrier_count: barrier,
            barrier_waiting: vec![],
            barrier_spin: 0.0,
            barrier_spinning: vec![],
            chunks: 0,
            chunks_left: 0,
            chunk_work: 0.0,
            chunk_param: 0,
            chunk_io: SimTime::ZERO,
            period: SimTime::ZERO,
            rel_deadline: SimTime::ZERO,
            jitter: 0.0,
            completions: vec![],
            nice_schedule: vec![],
            forked: false,
        }
    }
}
