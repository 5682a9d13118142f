//! Patel's four feedback-driven power/energy CPU schedulers (R. Patel, *CPU
//! Scheduling for Power/Energy Management on Heterogeneous Multicore
//! Processors*, PhD thesis, UNLV, 2012) as user-level agents: `patel-cpu`
//! (Algorithm 1, *CPU Scheduler*, Chapter 5), `patel-priority` (Algorithm 2,
//! *Priority CPU Scheduler*, Chapter 6), `patel-cachemiss` (Algorithm 3,
//! *Cache Miss Priority CPU Scheduler*, Chapter 7) and `patel-ctxswitch`
//! (Algorithm 4, *Context Switch Priority CPU Scheduler*, Chapter 8).
//!
//! Line numbers ("l. 540") refer to the text of the thesis in the project's
//! seed file `shared/seeds/004_b5506a0137817ced.txt`.
//!
//! # The platform
//!
//! The machine is partitioned into cpusets whose cores run at one frequency
//! each (Patel: 4 × 800 MHz, 2 × 1.4 GHz, 2 × 2.3 GHz under the `userspace`
//! governor, l. 1254–1259). The agent moves a process between cpusets the way
//! Patel did, by changing its affinity mask (`sched_setaffinity`, l. 1265):
//! "context switch P_i to cpuset c" is `set_affinity(task, c.cpus)`. CFS (or
//! whatever scheduler the scenario names) keeps scheduling inside a cpuset. A
//! scenario without `[[cpusets]]` is refused at start with a policy error.
//!
//! # What every algorithm shares
//!
//! * **Throughput estimates** (l. 482–496, 522–538): with `avg` the average
//!   number of threads per ready queue of a cpuset and `f` its frequency,
//!   `estimate_a = avg / f` and `estimate_b = avg × f` when `avg ≥ 1`, else
//!   `estimate_a = 1 / f` and `estimate_b = 1 / f`. A tie goes to the cpuset
//!   with the fewer threads per ready queue (l. 530); remaining ties to the
//!   faster cpuset, then to the first one listed.
//! * **Arrival** (l. 540, 580–582): a process seen for the first time is
//!   assigned to the cpuset with the least `estimate_a`.
//! * **Performance index** (l. 512, 543): `IPC < 1.7` *or*
//!   `fraction_wait_time > 0.5` (see the ambiguities below).
//! * **CPU intensity** (l. 513, 545): the process's CPU utilisation over the
//!   interval; CPU intensive when it is above 50 %.
//! * **Re-evaluation** every interval, "approximately one-fifth of the
//!   process's total execution time" (l. 544): the parameter `interval_ms`,
//!   which is also the agent's sampling period. Estimate it as one fifth of
//!   the expected run time of the programs (if a benchmark's five cycles,
//!   l. 1261, make up its total execution, an interval is about one cycle);
//!   the default, 1000 ms, suits programs that run for about five seconds.
//! * **Empty ready queue** (l. 552, 613–617): every interval, a cpuset with
//!   fewer than one thread per ready queue receives a process, the fastest
//!   such cpuset first; the process moved is the most CPU-intensive one
//!   (Algorithm 1) or the one with the highest `CPU_intensity_priority_index`
//!   (Algorithms 2–4, l. 752).
//!
//! # Algorithm 1 (`patel-cpu`, §5.2, pseudocode l. 573–621)
//!
//! Every interval, for each process (nice values are ignored):
//! 1. non-executing rule: `fraction_wait_time == 1` → least `estimate_a`
//!    (l. 551, 584);
//! 2. CPU intensive and performance index true → least `estimate_a`
//!    (l. 545, 594);
//! 3. not CPU intensive and `load_average > num_cpus` → least `estimate_b`
//!    (l. 549, 598);
//! 4. not CPU intensive, `load_average < num_cpus` and performance index true
//!    → least `estimate_a` (l. 549, 602);
//! 5. the empty-ready-queue rule, ranked by CPU intensity.
//!
//! # Algorithm 2 (`patel-priority`, §6.2, pseudocode l. 772–834)
//!
//! As Algorithm 1 with the nice value as a criterion:
//! 1. non-executing rule: `fraction_wait_time ≥ 0.7` and `nice < −1`, or
//!    `fraction_wait_time > 0.9` → least `estimate_a` (l. 750, 784–790);
//! 2. CPU intensive, `nice < 9`, performance index → least `estimate_a`
//!    (l. 744, 798);
//! 3. not CPU intensive, `nice > −1`, `load > num_cpus` → least `estimate_b`
//!    (l. 748, 802);
//! 4. not CPU intensive, `nice ≤ −1`, `load > 2 × num_cpus` → least
//!    `estimate_b` (l. 748, 806–811);
//! 5. not CPU intensive, `nice ≤ −11`, `load ≤ num_cpus`, performance index →
//!    least `estimate_a` (l. 748, 815);
//! 6. not CPU intensive, `nice > −11`, `load < 0.15 × num_cpus`, performance
//!    index → least `estimate_a` (l. 748, 820);
//! 7. the empty-ready-queue rule ranked by
//!    `CPU_intensity_priority_index = 0.5 × CPU_intensity + 0.5 × (1 / nice)`
//!    (l. 705–710; see the ambiguities).
//!
//! Priorities may be static or dynamic (l. 1261, 1392): Patel's harness gave
//! each process its first nice value for its first three execution cycles
//! and a second one for the last two. `priorities=dynamic` reproduces that:
//! the scenario's `nice` is the first priority, `second_nice` maps program
//! names to the second, applied after `first_cycles` (3) intervals.
//!
//! # Algorithm 3 (`patel-cachemiss`, §7.2, pseudocode l. 998–1066)
//!
//! Algorithm 2 where the moves to the least `estimate_a` of steps 2, 5 and 6
//! also require the cache miss index to be false: `cache_miss /
//! cache_reference > 0.0014` (l. 926, 971, 973, 975).
//!
//! # Algorithm 4 (`patel-ctxswitch`, §8.2, pseudocode l. 1203–)
//!
//! Algorithm 2 where the same three moves require the context switch CPU
//! migration index to be false: `0.5 × context_switches / real_time + 0.5 ×
//! migrations / real_time > 17.0`, per second of execution time (l. 1127,
//! 1171–1175, 1179). (The pseudocode is cut off after step 2 in the seed;
//! §8.2 step 8 gives the rest, and it matches Algorithm 3's.)
//!
//! # Where the thesis is ambiguous, and what this module does
//!
//! * **Performance index, "and" or "or".** The variable definitions say
//!   "true iff IPC < 1.7 and fraction_wait_time > 0.5" (l. 512, 695, 916,
//!   1118); every description says "if IPC is lower than a threshold (< 1.7),
//!   *or* fraction_wait_time is higher than a threshold (> 0.5)" and explains
//!   either cause separately (l. 543, 742, 967, 1169). Default `or` (the
//!   prose, which gives the reasons); `index_rule=and` selects the other.
//!   A process that did not execute during the interval has no IPC; its IPC
//!   condition is false (only its wait can make the index true).
//! * **fraction_wait_time.** Defined as time "waiting in the ready queues and
//!   I/O queues" (l. 504), but the formula divides by `real_time = system +
//!   user` (l. 503–507) and is therefore always 0. The rationale of the
//!   non-executing rule speaks of "waiting in the ready queues" (l. 551).
//!   Default `wait=ready`: the observed fraction of the interval runnable but
//!   not running; `wait=ready_io` counts all time not running
//!   (`1 − cpu_util`), sleep and I/O included.
//! * **Non-executing process** (l. 551, 750). The pseudocode tests the wait
//!   fraction before the process's `do { execute }` loop (l. 583–587). Here
//!   the wait condition itself identifies a non-executing process: it is
//!   checked every interval, before the other rules, for every process
//!   (`== 1` means it did not run at all; ≥ 0.7 that it ran at most 30 %).
//!   `== 1` is compared with a 10⁻⁹ tolerance.
//! * **CPU intensity** is "the average CPU utilization of all cores upon
//!   which P_i is executing" (l. 513); the rationale (l. 545–547) classifies
//!   processes by their own utilisation, which is what is used. A process
//!   that waits in a ready queue half the time therefore reads as at most
//!   50 % CPU intensive. The pseudocode tests `> 50%` and `< 50%` (l. 594,
//!   598); the prose says "not CPU intensive" (l. 549), taken as the
//!   complement: at or below 50 %.
//! * **Load average** is "average system load over a period of time; number
//!   of processes using or waiting for all CPUs" (l. 515). Default
//!   `load=interval`: the mean number of running plus runnable processes over
//!   the interval (the sum of each process's utilisation and ready wait);
//!   `load=instant` counts them at the sample. Comparisons with `num_cpus`
//!   (the machine's CPUs) use a 10⁻⁹ tolerance, so 8 always-runnable
//!   processes on 8 CPUs are neither above nor below 8. Algorithm 1 does
//!   nothing when the load equals `num_cpus` exactly (l. 598, 602).
//! * **Average threads per ready queue.** Patel estimates it from `/proc`
//!   (l. 538); the simulator counts it: the cpuset's running plus runnable
//!   processes divided by its CPUs, updated as the agent moves processes
//!   within one interval (a moved process counts where it goes).
//! * **estimate_b below one thread per queue** is `1 / f` (l. 496, 536 and in
//!   every chapter), which makes an idle fast cpuset the *least* estimate_b,
//!   against the purpose of the rule ("context switched to a cpuset with
//!   lower frequency cores", l. 549) and discontinuous with `avg × f` at
//!   `avg = 1`. Default as written (`estimate_b_idle=inverse`);
//!   `estimate_b_idle=freq` uses `f`. Under Patel's heavily loaded tasks
//!   every cpuset has at least one thread per queue and the branch never
//!   matters.
//! * **Empty ready queue.** "A ready queue is empty" (l. 613) versus "fewer
//!   than 1 thread per ready queue" (l. 552): the latter is used. The process
//!   moved is "the process with highest CPU intensity of all executing
//!   processes" (l. 614); taken literally this would pull the only process
//!   of a fast cpuset into an empty slow one and empty the fast one. The
//!   candidates are therefore the running or runnable processes that no
//!   other rule moved this interval and that sit either in a slower cpuset
//!   or in one with more than one thread per ready queue (where they wait).
//!   One process per under-filled cpuset per interval ("a process is
//!   assigned to that cpuset", l. 552).
//! * **CPU_intensity_priority_index** `0.5 × CPU_intensity + 0.5 / nice`
//!   (l. 710) divides by zero at the default nice 0 and ranks nice 19 above
//!   nice −20, against "chosen according to both their CPU intensity and
//!   process priority" (l. 752). Default `cipi=shifted`: the priority term is
//!   `1 / (nice + 21)`, from 1 (nice −20) down to 1/40 (nice 19);
//!   `cipi=literal` uses `1 / nice` with IEEE semantics (nice 0 → +∞).
//! * **Cache miss index** is `cache_miss / cache_reference` (l. 926): the
//!   observation's `miss_ratio` (default `cache_metric=miss_ratio`). Patel's
//!   counters were perf's generic cache events (l. 1263), whose references
//!   number about as many as instructions in his data (49 billion references
//!   and 139 million misses per run, ratio 0.0028, Table 18, l. 1669–1673);
//!   the simulator's `miss_ratio` is a last-level-cache ratio (default
//!   0.05), far above 0.0014 for most programs. `cache_metric=misses_per_instr`
//!   compares misses per instruction with the same threshold instead.
//! * **Counts over what time.** Indices use the last interval's observables,
//!   not the totals since the process started.
//! * **Processes and threads.** Patel's processes are single-threaded
//!   benchmarks; every simulated task (thread) is treated as a process.
//! * **Arrivals are seen at the next sample.** The agent samples every
//!   interval; a process that starts in between runs where the scheduler
//!   put it (or in the scenario's `cpuset`) until then, for at most one
//!   interval.
//! * **No damping.** As written, nothing stops a process from being moved
//!   back and forth between intervals (a starving process, or a step (a)
//!   move that the empty-queue rule undoes); none is added.
//! * **Restarted programs.** A program with `repeat` restarts in the same
//!   task, so only its first instance is an arrival; later instances keep
//!   the cpuset the previous one ended in.

use super::{About, Agent, Ctx, Observation, ParamDef, Params, PolicySpec};
use crate::hw::{CpuId, Machine};
use crate::os::TaskId;
use crate::time::SimTime;

/// IPC below which a process has decreased performance (l. 512, 543).
pub const IPC_THRESHOLD: f64 = 1.7;
/// Fraction wait time above which a process has decreased performance
/// (l. 512, 543).
pub const WAIT_THRESHOLD: f64 = 0.5;
/// CPU utilisation above which a process is CPU intensive (l. 545).
pub const CPU_INTENSITY_THRESHOLD: f64 = 0.5;
/// Algorithms 2–4: a waiting process with `nice < -1` is moved at this wait
/// fraction (l. 750, 784).
pub const WAIT_HIGH_PRIORITY: f64 = 0.7;
/// Algorithms 2–4: any waiting process is moved above this wait fraction
/// (l. 750, 788).
pub const WAIT_ANY_PRIORITY: f64 = 0.9;
/// Algorithms 2–4: the nice value below which the 0.7 wait threshold
/// applies (l. 750, 784).
pub const NICE_WAIT: i32 = -1;
/// Algorithms 2–4: a CPU-intensive process is moved up only if its nice
/// value is below this (l. 744, 798).
pub const NICE_CPU_INTENSIVE: i32 = 9;
/// Algorithms 2–4: a process not CPU intensive with nice above this is moved
/// down when `load > num_cpus`, at or below it when `load > 2 × num_cpus`
/// (l. 748, 802–811).
pub const NICE_LOADED: i32 = -1;
/// Algorithms 2–4: a process not CPU intensive with nice at or below this is
/// moved up when `load ≤ num_cpus`, above it when `load < 0.15 × num_cpus`
/// (l. 748, 815–823).
pub const NICE_UNLOADED: i32 = -11;
/// The "heavily loaded" factor for high-priority processes (l. 748, 811).
pub const HEAVY_LOAD_FACTOR: f64 = 2.0;
/// The "lightly loaded" factor for low-priority processes (l. 748, 821).
pub const LIGHT_LOAD_FACTOR: f64 = 0.15;
/// Algorithm 3: cache misses per cache reference above which the cache miss
/// index is true (l. 926, 971).
pub const CACHE_MISS_THRESHOLD: f64 = 0.0014;
/// Algorithm 4: `0.5 × csw/s + 0.5 × migrations/s` above which the context
/// switch CPU migration index is true (l. 1127, 1173).
pub const CSW_MIGRATION_THRESHOLD: f64 = 17.0;

/// Tolerance of comparisons of measured quantities with thresholds.
const EPS: f64 = 1e-9;

/// Which of Patel's algorithms.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Algorithm 1, *CPU Scheduler* (Chapter 5).
    Cpu,
    /// Algorithm 2, *Priority CPU Scheduler* (Chapter 6).
    Priority,
    /// Algorithm 3, *Cache Miss Priority CPU Scheduler* (Chapter 7).
    CacheMiss,
    /// Algorithm 4, *Context Switch Priority CPU Scheduler* (Chapter 8).
    ContextSwitch,
}

impl Algorithm {
    /// Registry name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Cpu => "patel-cpu",
            Algorithm::Priority => "patel-priority",
            Algorithm::CacheMiss => "patel-cachemiss",
            Algorithm::ContextSwitch => "patel-ctxswitch",
        }
    }
    fn from_name(name: &str) -> Option<Algorithm> {
        [
            Algorithm::Cpu,
            Algorithm::Priority,
            Algorithm::CacheMiss,
            Algorithm::ContextSwitch,
        ]
        .into_iter()
        .find(|a| a.name() == name)
    }
    fn doc(self) -> &'static str {
        match self {
            Algorithm::Cpu => "Patel's Algorithm 1 (CPU Scheduler): moves processes between fixed-frequency cpusets by throughput estimates, IPC, wait fraction, CPU intensity and load average",
            Algorithm::Priority => "Patel's Algorithm 2 (Priority CPU Scheduler): Algorithm 1 with nice-value thresholds, static or dynamic priorities",
            Algorithm::CacheMiss => "Patel's Algorithm 3 (Cache Miss Priority CPU Scheduler): Algorithm 2 that does not move up processes whose cache miss ratio exceeds 0.0014",
            Algorithm::ContextSwitch => "Patel's Algorithm 4 (Context Switch Priority CPU Scheduler): Algorithm 2 that does not move up processes with more than 17 context switches and migrations per second",
        }
    }
}

/// How the performance index combines its two conditions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IndexRule {
    /// `IPC < 1.7 || wait > 0.5` (the descriptions).
    Or,
    /// `IPC < 1.7 && wait > 0.5` (the variable definitions).
    And,
}

/// What counts as waiting in `fraction_wait_time`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WaitDef {
    /// Runnable but not running (ready queues).
    Ready,
    /// Not running (ready and I/O queues): `1 − cpu_util`.
    ReadyIo,
}

/// How the load average is measured.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LoadDef {
    /// Mean running plus runnable processes over the interval.
    Interval,
    /// Running plus runnable processes at the sample.
    Instant,
}

/// `estimate_b` of a cpuset with fewer than one thread per ready queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EstimateBIdle {
    /// `1 / f`, as written.
    Inverse,
    /// `f`.
    Freq,
}

/// The quantity compared with the cache miss threshold.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CacheMetric {
    /// Misses per cache reference (as written).
    MissRatio,
    /// Misses per instruction.
    MissesPerInstr,
}

/// The priority term of `CPU_intensity_priority_index`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PriorityTerm {
    /// `1 / (nice + 21)`.
    Shifted,
    /// `1 / nice` (IEEE: nice 0 gives +∞).
    Literal,
}

/// Which throughput estimate a rule minimises.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Estimate {
    /// `throughput_estimate_a` (towards fast, lightly loaded cpusets).
    A,
    /// `throughput_estimate_b` (towards slow cpusets).
    B,
}

/// The rule that moved a process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Initial placement of a newly arriving process (least estimate a).
    Arrival,
    /// A non-executing process waited too long (least estimate a).
    Waiting,
    /// CPU intensive with decreased performance (least estimate a).
    CpuIntensive,
    /// Not CPU intensive on a loaded system (least estimate b).
    Loaded,
    /// Not CPU intensive on a lightly loaded system, with decreased
    /// performance (least estimate a).
    Unloaded,
    /// A cpuset has fewer than one thread per ready queue.
    EmptyQueue,
}

/// A decision of one sample.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Confine `task` to cpuset number `set`.
    Move {
        /// The task.
        task: TaskId,
        /// Index into the scenario's cpusets.
        set: usize,
        /// Why.
        rule: Rule,
    },
    /// Dynamic priorities: give `task` its second nice value.
    SetNice {
        /// The task.
        task: TaskId,
        /// Its new nice value.
        nice: i32,
    },
}

/// A cpuset as the agent sees it at a sample.
#[derive(Clone, Debug, PartialEq)]
pub struct SetView {
    /// Its CPUs, ascending.
    pub cpus: Vec<CpuId>,
    /// The frequency of its cores, MHz (their mean if they differ).
    pub mhz: f64,
    /// Running plus runnable processes on its CPUs.
    pub load: f64,
}

/// `throughput_estimate_a` of a cpuset with `avg` threads per ready queue at
/// `mhz` (l. 482–490).
pub fn estimate_a(avg: f64, mhz: f64) -> f64 {
    if avg >= 1.0 - EPS {
        avg / mhz
    } else {
        1.0 / mhz
    }
}

/// `throughput_estimate_b` of a cpuset with `avg` threads per ready queue at
/// `mhz` (l. 491–496).
pub fn estimate_b(avg: f64, mhz: f64, idle: EstimateBIdle) -> f64 {
    if avg >= 1.0 - EPS {
        avg * mhz
    } else {
        match idle {
            EstimateBIdle::Inverse => 1.0 / mhz,
            EstimateBIdle::Freq => mhz,
        }
    }
}

/// Dynamic priorities: the second nice value of some programs.
#[derive(Clone, Debug, PartialEq)]
struct Dynamic {
    first_cycles: u32,
    second: Vec<(String, i32)>,
}

/// What the agent remembers of a task.
#[derive(Clone, Debug, Default)]
struct Seen {
    seen: bool,
    /// Samples at which it was observed before this one.
    samples: u32,
    reniced: bool,
}

/// One of Patel's agents.
#[derive(Clone, Debug)]
pub struct Patel {
    name: String,
    alg: Algorithm,
    period: SimTime,
    first: SimTime,
    index_rule: IndexRule,
    wait: WaitDef,
    load: LoadDef,
    estimate_b_idle: EstimateBIdle,
    cache_metric: CacheMetric,
    priority_term: PriorityTerm,
    dynamic: Option<Dynamic>,
    tasks: Vec<Seen>,
}

fn params(alg: Algorithm) -> Vec<ParamDef> {
    let mut v = vec![
        ParamDef {
            name: "interval_ms",
            default: "1000",
            doc: "re-evaluation interval and sampling period; Patel: about one fifth of a process's total execution time, so set it to one fifth of the programs' expected run time",
        },
        ParamDef {
            name: "index_rule",
            default: "or",
            doc: "performance index: or = IPC < 1.7 or wait > 0.5 (the thesis's descriptions), and = both (its variable definitions)",
        },
        ParamDef {
            name: "wait",
            default: "ready",
            doc: "fraction wait time: ready = runnable but not running, ready_io = not running (sleep and I/O included)",
        },
        ParamDef {
            name: "load",
            default: "interval",
            doc: "load average: interval = mean running plus runnable processes over the interval, instant = at the sample",
        },
        ParamDef {
            name: "estimate_b_idle",
            default: "inverse",
            doc: "throughput estimate b of a cpuset with < 1 thread per ready queue: inverse = 1/frequency (as written), freq = frequency",
        },
        ParamDef {
            name: "first_sample_ms",
            default: "interval_ms",
            doc: "time of the first sample, where the processes already started are placed as arrivals; Patel places a process when it arrives, so set it short (e.g. 10)",
        },
    ];
    if alg != Algorithm::Cpu {
        v.extend([
            ParamDef {
                name: "priorities",
                default: "static",
                doc: "static: nice values are left alone; dynamic: each listed program gets its second nice value after first_cycles intervals",
            },
            ParamDef {
                name: "second_nice",
                default: "",
                doc: "dynamic priorities: program:nice pairs separated by ';' (e.g. gcc:-14;bzip2:-8)",
            },
            ParamDef {
                name: "first_cycles",
                default: "3",
                doc: "dynamic priorities: intervals with the first nice value (Patel: three of five cycles)",
            },
            ParamDef {
                name: "cipi",
                default: "shifted",
                doc: "priority term of CPU_intensity_priority_index: shifted = 1/(nice+21), literal = 1/nice",
            },
        ]);
    }
    if alg == Algorithm::CacheMiss {
        v.push(ParamDef {
            name: "cache_metric",
            default: "miss_ratio",
            doc: "cache miss index compares with 0.0014: miss_ratio = misses per reference (as written), misses_per_instr = misses per instruction",
        });
    }
    v
}

fn info(alg: Algorithm) -> About {
    About {
        name: alg.name(),
        doc: alg.doc(),
        params: params(alg),
    }
}

/// Registry entry of `patel-cpu`.
pub fn cpu_info() -> About {
    info(Algorithm::Cpu)
}
/// Registry entry of `patel-priority`.
pub fn priority_info() -> About {
    info(Algorithm::Priority)
}
/// Registry entry of `patel-cachemiss`.
pub fn cachemiss_info() -> About {
    info(Algorithm::CacheMiss)
}
/// Registry entry of `patel-ctxswitch`.
pub fn ctxswitch_info() -> About {
    info(Algorithm::ContextSwitch)
}

/// Parse `gcc:-14;bzip2:-8`.
fn parse_second_nice(policy: &str, raw: &str) -> Result<Vec<(String, i32)>, String> {
    let mut out: Vec<(String, i32)> = Vec::new();
    for item in raw
        .split(|c: char| c == ';' || c.is_whitespace())
        .filter(|s| !s.is_empty())
    {
        let Some((prog, nice)) = item.rsplit_once(':') else {
            return Err(format!(
                "{policy}[second_nice]: \"{item}\" is not of the form program:nice (e.g. gcc:-14)"
            ));
        };
        if prog.is_empty() {
            return Err(format!(
                "{policy}[second_nice]: \"{item}\" has no program name"
            ));
        }
        let nice: i32 = nice.parse().map_err(|_| {
            format!("{policy}[second_nice]: \"{nice}\" (in \"{item}\") is not a whole number")
        })?;
        if !(-20..=19).contains(&nice) {
            return Err(format!(
                "{policy}[second_nice]: nice {nice} of \"{prog}\" is out of range; allowed -20 to 19"
            ));
        }
        if out.iter().any(|(p, _)| p == prog) {
            return Err(format!(
                "{policy}[second_nice]: program \"{prog}\" is given twice"
            ));
        }
        out.push((prog.to_string(), nice));
    }
    Ok(out)
}

impl Patel {
    /// Build from a parsed spec; `ps.name` selects the algorithm. (The
    /// machine is not needed: the cpusets are only known at run time.)
    pub fn from_params(ps: &PolicySpec, _m: &Machine) -> Result<Patel, String> {
        Self::build(ps)
    }

    /// Build from a spec string such as `patel-priority[interval_ms=500]`.
    pub fn from_spec(spec: &str) -> Result<Patel, String> {
        Self::build(&super::parse_spec(spec)?)
    }

    fn build(ps: &PolicySpec) -> Result<Patel, String> {
        let alg = Algorithm::from_name(&ps.name)
            .ok_or_else(|| format!("not one of Patel's agents: \"{}\"", ps.name))?;
        let policy = alg.name();
        let defs = params(alg);
        let p = Params::new(policy, &ps.params, &defs)?;
        let interval = p.f64("interval_ms", 1.0, 86_400_000.0)?;
        let first = if p.given("first_sample_ms") {
            p.f64("first_sample_ms", 0.001, 86_400_000.0)?
        } else {
            interval
        };
        let index_rule = match p.choice("index_rule", &["or", "and"])?.as_str() {
            "or" => IndexRule::Or,
            _ => IndexRule::And,
        };
        let wait = match p.choice("wait", &["ready", "ready_io"])?.as_str() {
            "ready" => WaitDef::Ready,
            _ => WaitDef::ReadyIo,
        };
        let load = match p.choice("load", &["interval", "instant"])?.as_str() {
            "interval" => LoadDef::Interval,
            _ => LoadDef::Instant,
        };
        let estimate_b_idle = match p.choice("estimate_b_idle", &["inverse", "freq"])?.as_str() {
            "inverse" => EstimateBIdle::Inverse,
            _ => EstimateBIdle::Freq,
        };
        let mut priority_term = PriorityTerm::Shifted;
        let mut dynamic = None;
        if alg != Algorithm::Cpu {
            priority_term = match p.choice("cipi", &["shifted", "literal"])?.as_str() {
                "shifted" => PriorityTerm::Shifted,
                _ => PriorityTerm::Literal,
            };
            let cycles = p.f64("first_cycles", 1.0, 1000.0)?;
            if cycles.fract() != 0.0 {
                return Err(format!(
                    "{policy}[first_cycles]: {cycles} is not a whole number of intervals"
                ));
            }
            let raw = ps
                .params
                .get("second_nice")
                .map(String::as_str)
                .unwrap_or("");
            let second = parse_second_nice(policy, raw)?;
            match p.choice("priorities", &["static", "dynamic"])?.as_str() {
                "static" => {
                    for k in ["second_nice", "first_cycles"] {
                        if p.given(k) {
                            return Err(format!(
                                "{policy}[{k}]: only used with priorities=dynamic"
                            ));
                        }
                    }
                }
                _ => {
                    if second.is_empty() {
                        return Err(format!(
                            "{policy}[second_nice]: priorities=dynamic needs at least one program:nice pair (e.g. gcc:-14;bzip2:-8)"
                        ));
                    }
                    dynamic = Some(Dynamic {
                        first_cycles: cycles as u32,
                        second,
                    });
                }
            }
        }
        let cache_metric = if alg == Algorithm::CacheMiss {
            match p
                .choice("cache_metric", &["miss_ratio", "misses_per_instr"])?
                .as_str()
            {
                "miss_ratio" => CacheMetric::MissRatio,
                _ => CacheMetric::MissesPerInstr,
            }
        } else {
            CacheMetric::MissRatio
        };
        let mut name = policy.to_string();
        if !ps.params.is_empty() {
            let parts: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            name = format!("{name}[{}]", parts.join(","));
        }
        Ok(Patel {
            name,
            alg,
            period: SimTime::from_ms_f64(interval),
            first: SimTime::from_ms_f64(first),
            index_rule,
            wait,
            load,
            estimate_b_idle,
            cache_metric,
            priority_term,
            dynamic,
            tasks: Vec::new(),
        })
    }

    /// Which algorithm this agent runs.
    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    /// `fraction_wait_time` of a process over the interval.
    fn wait_frac(&self, o: &Observation) -> f64 {
        match self.wait {
            WaitDef::Ready => o.wait_frac,
            WaitDef::ReadyIo => (1.0 - o.cpu_util).clamp(0.0, 1.0),
        }
    }

    /// `performance_index` (l. 512, 543): decreased performance.
    fn performance_index(&self, o: &Observation) -> bool {
        // A process that did not execute has no IPC to be low.
        let ipc_low = o.cpu_util > 0.0 && o.ipc < IPC_THRESHOLD;
        let wait_high = self.wait_frac(o) > WAIT_THRESHOLD + EPS;
        match self.index_rule {
            IndexRule::Or => ipc_low || wait_high,
            IndexRule::And => ipc_low && wait_high,
        }
    }

    /// Algorithms 3 and 4: the index that forbids moves to faster cpusets
    /// (cache miss index, l. 926; context switch CPU migration index,
    /// l. 1127).
    fn veto(&self, o: &Observation) -> bool {
        match self.alg {
            Algorithm::CacheMiss => {
                let v = match self.cache_metric {
                    CacheMetric::MissRatio => o.miss_ratio,
                    CacheMetric::MissesPerInstr => o.misses_per_instr,
                };
                v > CACHE_MISS_THRESHOLD
            }
            Algorithm::ContextSwitch => {
                0.5 * o.csw_per_s + 0.5 * o.migrations_per_s > CSW_MIGRATION_THRESHOLD
            }
            _ => false,
        }
    }

    /// The non-executing rule (l. 551, 584; l. 750, 784–790).
    fn waiting_too_long(&self, o: &Observation, nice: i32) -> bool {
        let w = self.wait_frac(o);
        match self.alg {
            Algorithm::Cpu => w >= 1.0 - EPS,
            _ => (w >= WAIT_HIGH_PRIORITY - EPS && nice < NICE_WAIT) || w > WAIT_ANY_PRIORITY + EPS,
        }
    }

    /// The rules for an executing process (l. 594–606; l. 798–823 and the
    /// same chains in Chapters 7 and 8).
    fn executing_rule(
        &self,
        o: &Observation,
        nice: i32,
        load: f64,
        n: f64,
    ) -> Option<(Estimate, Rule)> {
        let intensive = o.cpu_util > CPU_INTENSITY_THRESHOLD + EPS;
        let perf = self.performance_index(o);
        let above = |x: f64| load > x + EPS;
        let below = |x: f64| load < x - EPS;
        if self.alg == Algorithm::Cpu {
            return if intensive && perf {
                Some((Estimate::A, Rule::CpuIntensive))
            } else if !intensive && above(n) {
                Some((Estimate::B, Rule::Loaded))
            } else if !intensive && below(n) && perf {
                Some((Estimate::A, Rule::Unloaded))
            } else {
                None
            };
        }
        let free = !self.veto(o);
        // Step (b), first half (l. 802–811): the higher the priority, the
        // more heavily loaded the system must be before the process moves
        // down.
        let loaded = if nice > NICE_LOADED {
            above(n)
        } else {
            above(HEAVY_LOAD_FACTOR * n)
        };
        // Step (b), second half (l. 815–823): the lower the priority, the
        // lighter the load must be before the process moves up.
        let unloaded = if nice <= NICE_UNLOADED {
            !above(n)
        } else {
            below(LIGHT_LOAD_FACTOR * n)
        };
        if intensive && nice < NICE_CPU_INTENSIVE && perf && free {
            Some((Estimate::A, Rule::CpuIntensive))
        } else if !intensive && loaded {
            Some((Estimate::B, Rule::Loaded))
        } else if !intensive && unloaded && perf && free {
            Some((Estimate::A, Rule::Unloaded))
        } else {
            None
        }
    }

    /// Rank of a process for the empty-ready-queue rule: CPU intensity
    /// (Algorithm 1, l. 552) or `CPU_intensity_priority_index` (l. 710).
    fn rank(&self, o: &Observation, nice: i32) -> f64 {
        if self.alg == Algorithm::Cpu {
            return o.cpu_util;
        }
        let prio = match self.priority_term {
            PriorityTerm::Shifted => 1.0 / (nice + 21) as f64,
            PriorityTerm::Literal => 1.0 / nice as f64,
        };
        0.5 * o.cpu_util + 0.5 * prio
    }

    /// The cpuset with the least estimate given the current loads; ties go
    /// to the fewer threads per ready queue (l. 530), then to the faster
    /// cpuset, then to the first listed.
    fn least(&self, sets: &[SetView], load: &[f64], est: Estimate) -> usize {
        // (index, estimate, threads per ready queue) of the best so far.
        let mut best: Option<(usize, f64, f64)> = None;
        for (i, s) in sets.iter().enumerate() {
            let avg = load[i] / s.cpus.len() as f64;
            let v = match est {
                Estimate::A => estimate_a(avg, s.mhz),
                Estimate::B => estimate_b(avg, s.mhz, self.estimate_b_idle),
            };
            let better = match best {
                None => true,
                Some((b, bv, bavg)) => {
                    let tol = 1e-12 * v.abs().max(bv.abs());
                    if v < bv - tol {
                        true
                    } else if v <= bv + tol {
                        avg < bavg - EPS || (avg <= bavg + EPS && s.mhz > sets[b].mhz + EPS)
                    } else {
                        false
                    }
                }
            };
            if better {
                best = Some((i, v, avg));
            }
        }
        best.map_or(0, |b| b.0)
    }

    /// Decide one sample: the moves (and nice changes) for the observed
    /// processes, given the cpusets (with their current running plus
    /// runnable counts), the machine's CPU count and the instantaneous load.
    /// Processes are taken in task order; a move updates the counts that
    /// the next decisions see.
    pub fn plan(
        &mut self,
        obs: &[Observation],
        sets: &[SetView],
        ncpus: usize,
        instant_load: f64,
    ) -> Vec<Action> {
        let mut acts = Vec::new();
        if sets.is_empty() {
            return acts;
        }
        let n = ncpus as f64;
        let mut load: Vec<f64> = sets.iter().map(|s| s.load).collect();
        let sys_load = match self.load {
            LoadDef::Interval => obs.iter().map(|o| o.cpu_util + o.wait_frac).sum(),
            LoadDef::Instant => instant_load,
        };
        let set_of_cpu = |cpu: CpuId| sets.iter().position(|s| s.cpus.binary_search(&cpu).is_ok());
        let confined = |o: &Observation| sets.iter().position(|s| s.cpus == o.affinity);
        // Only running and runnable processes occupy ready queues.
        let queued = |o: &Observation| o.state == "running" || o.state == "runnable";
        let avg = |load: &[f64], i: usize| load[i] / sets[i].cpus.len() as f64;
        let mut decided = vec![false; obs.len()];
        let mut nice_now: Vec<i32> = obs.iter().map(|o| o.nice).collect();
        for (k, o) in obs.iter().enumerate() {
            if self.tasks.len() <= o.task {
                self.tasks.resize(o.task + 1, Seen::default());
            }
            let st = &mut self.tasks[o.task];
            let arrived = !st.seen;
            st.seen = true;
            let age = st.samples;
            st.samples += 1;
            // Dynamic priorities (l. 1261): the second nice value after the
            // first cycles; the rules below already see it.
            if let Some(d) = &self.dynamic {
                if !st.reniced && age >= d.first_cycles {
                    st.reniced = true;
                    if let Some(&(_, second)) = d.second.iter().find(|(p, _)| *p == o.program) {
                        if second != o.nice {
                            acts.push(Action::SetNice {
                                task: o.task,
                                nice: second,
                            });
                        }
                        nice_now[k] = second;
                    }
                }
            }
            let nice = nice_now[k];
            let decision = if arrived {
                Some((Estimate::A, Rule::Arrival))
            } else if self.waiting_too_long(o, nice) {
                Some((Estimate::A, Rule::Waiting))
            } else {
                self.executing_rule(o, nice, sys_load, n)
            };
            let Some((est, rule)) = decision else {
                continue;
            };
            // A process a rule has placed is not a candidate for the
            // empty-queue rule in the same interval, even if it stays.
            decided[k] = true;
            let dst = self.least(sets, &load, est);
            if confined(o) != Some(dst) {
                acts.push(Action::Move {
                    task: o.task,
                    set: dst,
                    rule,
                });
                if queued(o) {
                    if let Some(src) = set_of_cpu(o.cpu) {
                        load[src] -= 1.0;
                    }
                    load[dst] += 1.0;
                }
            }
        }
        // The empty-ready-queue rule (l. 552, 613–617; l. 752, 826–830):
        // fastest under-filled cpuset first, one process each.
        let mut order: Vec<usize> = (0..sets.len()).collect();
        order.sort_by(|&a, &b| sets[b].mhz.total_cmp(&sets[a].mhz).then(a.cmp(&b)));
        for r in order {
            if avg(&load, r) >= 1.0 - EPS {
                continue;
            }
            let mut best: Option<(usize, f64)> = None;
            for (k, o) in obs.iter().enumerate() {
                if decided[k] || !queued(o) || confined(o) == Some(r) {
                    continue;
                }
                let eligible = match set_of_cpu(o.cpu) {
                    None => true,
                    Some(s) if s == r => false,
                    // It waits behind others, or its cpuset is slower.
                    Some(s) => avg(&load, s) > 1.0 + EPS || sets[s].mhz < sets[r].mhz - EPS,
                };
                if !eligible {
                    continue;
                }
                let key = self.rank(o, nice_now[k]);
                if best.is_none_or(|(_, b)| key > b) {
                    best = Some((k, key));
                }
            }
            if let Some((k, _)) = best {
                decided[k] = true;
                let o = &obs[k];
                acts.push(Action::Move {
                    task: o.task,
                    set: r,
                    rule: Rule::EmptyQueue,
                });
                if let Some(s) = set_of_cpu(o.cpu) {
                    load[s] -= 1.0;
                }
                load[r] += 1.0;
            }
        }
        acts
    }
}

impl Agent for Patel {
    fn name(&self) -> &str {
        &self.name
    }

    fn period(&self) -> SimTime {
        self.period
    }

    fn first_sample(&self) -> SimTime {
        self.first
    }

    fn init(&mut self, cx: &mut Ctx) {
        // The algorithms move processes between cpusets; without any there
        // is nothing to do, which would silently make a run the baseline.
        if cx.cpusets().is_empty() {
            cx.fail(format!(
                "{} needs cpusets: add [[cpusets]] to the scenario (e.g. Patel's 4 × 800 MHz, 2 × 1400 MHz, 2 × 2300 MHz)",
                self.alg.name()
            ));
        }
    }

    fn sample(&mut self, cx: &mut Ctx) {
        if cx.cpusets().is_empty() {
            return;
        }
        let sets: Vec<SetView> = cx
            .cpusets()
            .iter()
            .enumerate()
            .map(|(i, c)| SetView {
                cpus: c.cpus.clone(),
                mhz: c
                    .cpus
                    .iter()
                    .map(|&cpu| cx.cpu_mhz(cpu) as f64)
                    .sum::<f64>()
                    / c.cpus.len() as f64,
                load: cx.cpuset_load(i) as f64,
            })
            .collect();
        let actions = self.plan(cx.observations(), &sets, cx.ncpus(), cx.load_avg());
        for a in actions {
            match a {
                Action::Move { task, set, .. } => cx.set_affinity(task, sets[set].cpus.clone()),
                Action::SetNice { task, nice } => cx.set_nice(task, nice),
            }
        }
    }
}
