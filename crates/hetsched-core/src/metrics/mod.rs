//! Results of a run: per-task, per-program and per-CPU rows and a summary,
//! serialisable as JSON (the Python layer turns them into DataFrames).

use crate::sim::Engine;
pub use crate::sim::VmRow;
use crate::trace::TraceEvent;
use serde::Serialize;

/// Version of hetsched, which every run's summary carries (the crate root
/// re-exports it).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Fraction of the CPU time (CPUs × run length) above which idle time
/// beside waiting work gets a run warning.
pub const IDLE_WHILE_RUNNABLE_WARN: f64 = 0.01;

/// Run-level summary.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Name of the scheduling policy.
    pub scheduler: String,
    /// Name of the frequency governor.
    pub governor: String,
    /// Names of the user-level agents, in order.
    pub agents: Vec<String>,
    /// Seed of the run's random number generator.
    pub seed: u64,
    /// hetsched version that produced the results.
    pub version: String,
    /// Simulated time at which the run ended.
    pub sim_end_s: f64,
    /// Time at which the last program instance finished (None if some did not).
    pub makespan_s: Option<f64>,
    /// Events handled (stale ones excluded).
    pub events: u64,
    /// Events pushed into the queue, including stale ones that were dropped.
    pub events_pushed: u64,
    /// Wall-clock time the simulation took, s.
    pub wall_s: f64,
    /// Events handled per wall-clock second (`events` / `wall_s`).
    pub events_per_sec: f64,
    /// CPUs plus platform base power, joules.
    pub energy_j: f64,
    /// Average power: `energy_j` / simulated end time, W.
    pub avg_power_w: f64,
    /// Highest total power (CPUs and platform) at the end of any event, W.
    pub peak_power_w: f64,
    /// Energy-delay product: energy × simulated end time, J·s.
    pub edp_js: f64,
    /// Patel's metric (a): the mean over programs of (instructions per second
    /// of execution) divided by the average power.
    pub ips_per_w: f64,
    /// Patel's metric (b): the mean completion time of the completed
    /// program instances × the average power, s·W.
    pub time_x_w: f64,
    /// Migrations summed over every task (vCPUs included), count.
    pub migrations: u64,
    /// Voluntary plus involuntary context switches of every task, count.
    pub context_switches: u64,
    /// Periodic jobs that finished after their deadline, over every task, count.
    pub deadline_misses: u64,
    /// Tasks in the run (vCPUs included), count.
    pub tasks: usize,
    /// Programs in the scenario, count.
    pub programs: usize,
    /// Programs that completed all `repeat` instances, count.
    pub programs_completed: usize,
    /// Tasks killed (with a kill reason, e.g. a SIGILL outcome), count.
    pub tasks_killed: usize,
    /// CPU-seconds during which an online CPU sat idle while a runnable
    /// task that may run there waited (work conservation; 0 for a
    /// work-conserving scheduler).
    pub idle_while_runnable_s: f64,
    /// Hex digest of every decision and state change of the run.
    pub trace_hash: String,
    /// Whether the run was interrupted (Ctrl-C) before its end: every
    /// number then covers the run up to `interrupted_at_s` only.
    pub partial: bool,
    /// Simulated time at which an interrupted run stopped, s (None if it
    /// was not interrupted).
    pub interrupted_at_s: Option<f64>,
}

/// A task's time on a CPU per CPU type name, s, in name order (a map in the
/// results). A few entries in one small array: a map per task cost about
/// 400 bytes, a fifth of a 100 000-task run's memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeSeconds(Vec<(String, f64)>);

impl TypeSeconds {
    /// The time on type `name`, if it ran there.
    pub fn get(&self, name: &str) -> Option<&f64> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
    /// How many types it ran on.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether it never ran.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// (type name, seconds), in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &f64)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl FromIterator<(String, f64)> for TypeSeconds {
    /// In name order (the last of equal names kept, as a map would).
    fn from_iter<I: IntoIterator<Item = (String, f64)>>(it: I) -> Self {
        let mut v: Vec<(String, f64)> = Vec::new();
        for (k, x) in it {
            match v.binary_search_by(|(n, _)| n.as_str().cmp(&k)) {
                Ok(i) => v[i].1 = x,
                Err(i) => v.insert(i, (k, x)),
            }
        }
        v.shrink_to_fit();
        TypeSeconds(v)
    }
}

impl std::ops::Index<&str> for TypeSeconds {
    type Output = f64;
    fn index(&self, name: &str) -> &f64 {
        self.get(name)
            .unwrap_or_else(|| panic!("no run time on CPU type {name:?}"))
    }
}

impl Serialize for TypeSeconds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One task.
#[derive(Clone, Debug, Serialize)]
pub struct TaskRow {
    /// Task id.
    pub task: usize,
    /// Name of its program.
    pub program: String,
    /// Index of its program.
    pub program_id: usize,
    /// Thread index within the program.
    pub thread: u32,
    /// Scheduling state at the end of the run (`exited`, `runnable`, `sleeping`, ...).
    pub state: &'static str,
    /// First time it became runnable, s (None if it never started).
    pub start_s: Option<f64>,
    /// Time it exited, s (None if it did not).
    pub end_s: Option<f64>,
    /// Time on a CPU, s.
    pub run_s: f64,
    /// Scaled CPU time: run time × rating (Li et al.'s STIME+), seconds.
    pub scaled_run_s: f64,
    /// Load weight (from nice).
    pub weight: u32,
    /// Time runnable but waiting for a CPU, s.
    pub wait_s: f64,
    /// Time sleeping or blocked, s.
    pub sleep_s: f64,
    /// Reference work completed, reference ms (ms on a capacity-1024 CPU at its top frequency).
    pub work_ms: f64,
    /// Instructions retired, count.
    pub instructions: f64,
    /// Core cycles while running, count.
    pub cycles: f64,
    /// Instructions per cycle: `instructions` / `cycles` (0 without cycles).
    pub ipc: f64,
    /// Last-level cache references, count.
    pub cache_refs: f64,
    /// Last-level cache misses, count.
    pub cache_misses: f64,
    /// Voluntary context switches (blocked, slept, exited), count.
    pub csw_voluntary: u64,
    /// Involuntary context switches (preempted), count.
    pub csw_involuntary: u64,
    /// Times it started running on a CPU other than the one it last ran on.
    pub migrations: u64,
    /// ISA faults taken, and per second of run time.
    pub faults: u64,
    /// ISA faults per second of run time (0 without run time).
    pub faults_per_s: f64,
    /// Migrations per second of run time.
    pub migrations_per_s: f64,
    /// Time lost refilling caches after migrations and in fault traps.
    pub stall_s: f64,
    /// Completed periodic jobs, count.
    pub jobs: u64,
    /// Periodic jobs that finished after their deadline, count.
    pub deadline_misses: u64,
    /// Worst response time of a periodic job (release to completion), ms.
    pub max_response_ms: f64,
    /// Scheduling policy (`other`, `batch`, `idle`, `fifo`, `rr`, `deadline`).
    pub policy: &'static str,
    /// rt priority 1-99 (0 for the other policies).
    pub rt_priority: u8,
    /// Time runnable but throttled, s: a SCHED_DEADLINE task out of budget
    /// until its replenishment, an rt task held off by the fair server.
    pub throttled_s: f64,
    /// SCHED_DEADLINE scheduling deadlines passed before the task got its
    /// runtime, count.
    pub dl_misses: u64,
    /// Wake-up latency (from becoming runnable after a wake-up, a new
    /// task's first one included, to running), median, ms ([`quantile`];
    /// None without a wake-up that was followed by running).
    pub wakeup_latency_p50_ms: Option<f64>,
    /// Wake-up latency, 99th percentile ([`quantile`]), ms.
    pub wakeup_latency_p99_ms: Option<f64>,
    /// Wake-up latency, largest, ms.
    pub wakeup_latency_max_ms: Option<f64>,
    /// Nice value at the end of the run, -20..=19.
    pub nice: i32,
    /// Why it was killed (e.g. a SIGILL outcome); None if it was not.
    pub killed: Option<String>,
    /// Time on a CPU per CPU type name, s (types it never ran on left out).
    pub run_s_by_type: TypeSeconds,
    /// PELT utilisation (`util_avg`, 0–1024) as of the task's last update,
    /// where the scheduler tracks it (`eevdf`, `linux`, `cfs`'s
    /// capacity-aware and EAS entries); None otherwise.
    pub util_avg: Option<u32>,
    /// PELT runnable average (`runnable_avg`, 0–1024: running or waiting)
    /// as of the task's last update, where `util_avg` is reported.
    pub runnable_avg: Option<u32>,
    /// util_est's EWMA at the end of the run, where the scheduler has
    /// util_est on; None otherwise.
    pub util_est: Option<u32>,
}

/// One completed program instance.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramRow {
    /// Program index.
    pub program_id: usize,
    /// Program name.
    pub program: String,
    /// Program kind (`sequential`, `parallel`, ...).
    pub kind: String,
    /// Instance number (0-based).
    pub instance: u32,
    /// When the instance started, s.
    pub start_s: f64,
    /// When its last thread exited, s.
    pub end_s: f64,
    /// Completion time: `end_s` - `start_s`, s.
    pub completion_s: f64,
    /// Threads of the program.
    pub threads: usize,
}

/// One CPU.
#[derive(Clone, Debug, Serialize)]
pub struct CpuRow {
    /// CPU id.
    pub cpu: usize,
    /// Name of its CPU type (serialised as `type`).
    #[serde(rename = "type")]
    pub ty: String,
    /// NUMA node / socket.
    pub node: u32,
    /// Global index of its physical core (shared by SMT siblings).
    pub core: u32,
    /// Global index of its last-level-cache domain.
    pub llc: u32,
    /// Index of its frequency domain.
    pub freq_domain: usize,
    /// Time it ran a task, s.
    pub busy_s: f64,
    /// Simulated end time minus `busy_s` (at least 0), s.
    pub idle_s: f64,
    /// `busy_s` / simulated end time, fraction 0..1.
    pub utilization: f64,
    /// Energy it consumed (platform base power excluded), J.
    pub energy_j: f64,
    /// Scheduler ticks it handled, count.
    pub ticks: u64,
    /// Frequency of its domain at the end of the run, MHz.
    pub final_mhz: u32,
    /// Time this CPU sat idle (and online) while a runnable task that may
    /// run on it waited, seconds.
    pub idle_while_runnable_s: f64,
}

/// Everything a run returns.
#[derive(Clone, Debug, Serialize)]
pub struct RunResults {
    /// Run-level summary.
    pub summary: Summary,
    /// One row per task (vCPUs excluded).
    pub tasks: Vec<TaskRow>,
    /// One row per completed program instance.
    pub programs: Vec<ProgramRow>,
    /// One row per CPU.
    pub cpus: Vec<CpuRow>,
    /// Warnings about the scenario and the run (e.g. a scheduler that is not work-conserving).
    pub warnings: Vec<String>,
    /// Recorded trace events (empty unless `RunOptions::trace`).
    pub trace: Vec<TraceEvent>,
    /// Per-VM results (absent without VMs); vCPUs are not in `tasks`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vms: Vec<crate::metrics::VmRow>,
    /// Reconfigurations and proxies (only for scenarios with `[dynamic]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<crate::sim::dynamic::DynResults>,
}

/// The `q`-quantile (0 ≤ q ≤ 1) of ascending `sorted` samples, linearly
/// interpolated between the two closest ranks: with `n` samples and
/// `h = (n − 1) q`, `x[⌊h⌋] + (h − ⌊h⌋)(x[⌊h⌋ + 1] − x[⌊h⌋])` (numpy's
/// default `percentile`, Hyndman and Fan's definition 7). None when empty.
pub fn quantile(sorted: &[u64], q: f64) -> Option<f64> {
    let (lo, frac) = rank(sorted.len(), q)?;
    let hi = (lo + 1).min(sorted.len() - 1);
    Some(between(sorted[lo], sorted[hi], frac))
}

/// Where the `q`-quantile of `n` samples falls: the lower rank `⌊h⌋` and
/// the fraction `h − ⌊h⌋` towards the next, `h = (n − 1) q`. None when
/// `n` is 0.
fn rank(n: usize, q: f64) -> Option<(usize, f64)> {
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    Some((lo, h - lo as f64))
}

/// `a + frac (b − a)`, as f64.
fn between(a: u64, b: u64, frac: f64) -> f64 {
    let (a, b) = (a as f64, b as f64);
    a + frac * (b - a)
}

/// The most samples at and above the 99th percentile's rank for which it
/// is found by keeping the largest samples in one pass (a task with at most
/// 801 wake-ups) rather than by a selection.
const TOP_KEPT: usize = 9;

/// Median, 99th percentile and largest wake-up latency, ms: [`quantile`]'s
/// values, found without sorting, reordering `v`. The 99th percentile is the
/// smallest of the `n − ⌊h⌋` largest samples and interpolates towards the
/// next; with few samples those are kept in one pass (along with the
/// largest), otherwise their rank is put in place by a selection. The median
/// is a selection of its rank.
fn wake_quantiles<T: Copy + Ord + Into<u64>>(
    v: &mut [T],
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let n = v.len();
    let (Some((lo50, f50)), Some((lo99, f99))) = (rank(n, 0.5), rank(n, 0.99)) else {
        return (None, None, None);
    };
    let kept = n - lo99;
    let (a99, next99, max) = if kept <= TOP_KEPT {
        // The `kept` largest so far, ascending.
        let mut top = [v[0]; TOP_KEPT];
        let mut len = 0;
        for &x in v.iter() {
            if len < kept {
                let mut k = len;
                while k > 0 && top[k - 1] > x {
                    top[k] = top[k - 1];
                    k -= 1;
                }
                top[k] = x;
                len += 1;
            } else if x > top[0] {
                let mut k = 0;
                while k + 1 < kept && top[k + 1] < x {
                    top[k] = top[k + 1];
                    k += 1;
                }
                top[k] = x;
            }
        }
        (top[0], top[1.min(kept - 1)], top[kept - 1])
    } else {
        let (_, &mut a, above) = v.select_nth_unstable(lo99);
        let (mut next, mut max) = (None, a);
        for &x in above.iter() {
            next = Some(next.map_or(x, |m: T| m.min(x)));
            max = max.max(x);
        }
        (a, next.unwrap_or(a), max)
    };
    let p99 = between(a99.into(), next99.into(), f99);
    let (_, &mut a50, rest) = v.select_nth_unstable(lo50);
    let next50 = rest.iter().copied().min().unwrap_or(a50);
    let p50 = between(a50.into(), next50.into(), f50);
    let ms = |ns: f64| Some(ns * 1e-6);
    (ms(p50), ms(p99), ms(Into::<u64>::into(max) as f64))
}

/// Collect the results of a finished run.
pub fn collect(e: &Engine, scenario: &str, wall_s: f64) -> RunResults {
    let m = &e.m;
    let end = e.end_time();
    let end_s = end.as_secs_f64();
    let mut wake_lat = e.wake_lat.per_task();
    let tasks: Vec<TaskRow> = e
        .tasks
        .iter()
        .filter(|t| !e.is_vcpu(t.id))
        .map(|t| {
            let p = &e.progs[t.program];
            let (wl50, wl99, wlmax) = if wake_lat.has_long(t.id) {
                wake_quantiles(&mut wake_lat.task(t.id))
            } else {
                wake_quantiles(wake_lat.logged_mut(t.id))
            };
            let by_type = m
                .types
                .iter()
                .enumerate()
                .filter_map(|(i, ty)| match t.c.run_ns_by_type.get(i) {
                    Some(ns) if ns > 0 => Some((ty.name.clone(), ns as f64 * 1e-9)),
                    _ => None,
                })
                .collect();
            let load = e.task_load(t.id);
            TaskRow {
                task: t.id,
                program: p.name.clone(),
                program_id: p.id,
                thread: t.thread,
                state: t.state.name(),
                start_s: t.start.map(|s| s.as_secs_f64()),
                end_s: t.end.map(|s| s.as_secs_f64()),
                run_s: t.c.run_ns as f64 * 1e-9,
                scaled_run_s: t.c.scaled_run_ns * 1e-9,
                weight: t.weight,
                wait_s: t.c.wait_ns as f64 * 1e-9,
                sleep_s: t.c.sleep_ns as f64 * 1e-9,
                work_ms: t.c.work_done * 1e-6,
                instructions: t.c.instructions,
                cycles: t.c.cycles,
                ipc: if t.c.cycles > 0.0 {
                    t.c.instructions / t.c.cycles
                } else {
                    0.0
                },
                cache_refs: t.c.cache_refs,
                cache_misses: t.c.cache_misses,
                csw_voluntary: t.c.csw_voluntary,
                csw_involuntary: t.c.csw_involuntary,
                migrations: t.c.migrations,
                faults: t.c.faults,
                faults_per_s: if t.c.run_ns > 0 {
                    t.c.faults as f64 / (t.c.run_ns as f64 * 1e-9)
                } else {
                    0.0
                },
                migrations_per_s: if t.c.run_ns > 0 {
                    t.c.migrations as f64 / (t.c.run_ns as f64 * 1e-9)
                } else {
                    0.0
                },
                stall_s: t.c.stall_ns as f64 * 1e-9,
                jobs: t.c.jobs,
                deadline_misses: t.c.deadline_misses,
                max_response_ms: t.c.max_response_ns as f64 * 1e-6,
                policy: t.sched.policy.name(),
                rt_priority: t.sched.rt_prio,
                throttled_s: t.c.throttled_ns as f64 * 1e-9,
                dl_misses: t.c.dl_misses,
                wakeup_latency_p50_ms: wl50,
                wakeup_latency_p99_ms: wl99,
                wakeup_latency_max_ms: wlmax,
                nice: t.nice,
                killed: t.kill_reason.clone(),
                run_s_by_type: by_type,
                util_avg: load.map(|l| l.util_avg),
                runnable_avg: load.map(|l| l.runnable_avg),
                util_est: load.and_then(|l| l.util_est),
            }
        })
        .collect();
    let mut programs = Vec::new();
    for p in &e.progs {
        for &(inst, s, f) in &p.completions {
            programs.push(ProgramRow {
                program_id: p.id,
                program: p.name.clone(),
                kind: p.kind.clone(),
                instance: inst,
                start_s: s.as_secs_f64(),
                end_s: f.as_secs_f64(),
                completion_s: (f - s).as_secs_f64(),
                threads: p.threads.len(),
            });
        }
    }
    let cpus: Vec<CpuRow> = m
        .cpus
        .iter()
        .map(|c| {
            let busy = e.cpu_busy_ns(c.id) as f64 * 1e-9;
            CpuRow {
                cpu: c.id,
                ty: m.types[c.ty].name.clone(),
                node: c.node,
                core: c.core,
                llc: c.llc,
                freq_domain: c.domain,
                busy_s: busy,
                idle_s: (end_s - busy).max(0.0),
                utilization: if end_s > 0.0 { busy / end_s } else { 0.0 },
                energy_j: e.cpu_energy(c.id),
                ticks: e.cpu_ticks(c.id),
                final_mhz: e.cpu_mhz(c.id),
                idle_while_runnable_s: e.idle_while_runnable_s(c.id),
            }
        })
        .collect();
    let all_done = e
        .progs
        .iter()
        .all(|p| p.completions.len() as u32 == p.repeat);
    let makespan = if all_done && !e.progs.is_empty() {
        e.progs
            .iter()
            .flat_map(|p| p.completions.iter().map(|c| c.2))
            .max()
            .map(|t| t.as_secs_f64())
    } else {
        None
    };
    let idle_waiting: f64 = cpus.iter().map(|c| c.idle_while_runnable_s).sum();
    let mut warnings = e.warnings.clone();
    let cpu_time = end_s * m.ncpus() as f64;
    // More than 1 % of the CPU time idle beside waiting work: the scheduler
    // is not work-conserving (the threshold is a judgement, see
    // docs/policies.md).
    if cpu_time > 0.0 && idle_waiting > IDLE_WHILE_RUNNABLE_WARN * cpu_time {
        warnings.push(format!(
            "cpus sat idle for {idle_waiting:.3} cpu-s ({:.1} % of the cpu time) while runnable tasks that could run there waited: the scheduler is not work-conserving (see idle_while_runnable_s per cpu)",
            100.0 * idle_waiting / cpu_time
        ));
    }
    let energy = e.total_energy();
    let avg_power = if end_s > 0.0 { energy / end_s } else { 0.0 };
    // Per program: instructions of all its threads over its total execution time.
    let mut ips = Vec::new();
    let mut times = Vec::new();
    for p in &e.progs {
        let exec: f64 = p
            .completions
            .iter()
            .map(|c| (c.2 - c.1).as_secs_f64())
            .sum();
        if p.completions.is_empty() || exec <= 0.0 {
            continue;
        }
        let instr: f64 = p.threads.iter().map(|&t| e.tasks[t].c.instructions).sum();
        ips.push(instr / exec);
        times.extend(p.completions.iter().map(|c| (c.2 - c.1).as_secs_f64()));
    }
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let summary = Summary {
        scenario: scenario.to_string(),
        scheduler: e.scheduler_name(),
        governor: e.governor_name(),
        agents: e.agent_names(),
        seed: e.seed(),
        version: VERSION.to_string(),
        sim_end_s: end_s,
        makespan_s: makespan,
        events: e.events,
        events_pushed: e.events_pushed(),
        wall_s,
        events_per_sec: if wall_s > 0.0 {
            e.events as f64 / wall_s
        } else {
            0.0
        },
        energy_j: energy,
        avg_power_w: avg_power,
        peak_power_w: e.peak_power_w,
        edp_js: energy * end_s,
        ips_per_w: if avg_power > 0.0 {
            mean(&ips) / avg_power
        } else {
            0.0
        },
        time_x_w: mean(&times) * avg_power,
        migrations: e.tasks.iter().map(|t| t.c.migrations).sum(),
        context_switches: e
            .tasks
            .iter()
            .map(|t| t.c.csw_voluntary + t.c.csw_involuntary)
            .sum(),
        deadline_misses: e.tasks.iter().map(|t| t.c.deadline_misses).sum(),
        tasks: e.tasks.len(),
        programs: e.progs.len(),
        programs_completed: e
            .progs
            .iter()
            .filter(|p| p.completions.len() as u32 == p.repeat)
            .count(),
        tasks_killed: e.tasks.iter().filter(|t| t.kill_reason.is_some()).count(),
        idle_while_runnable_s: idle_waiting,
        trace_hash: format!("{:016x}", e.trace_hash()),
        partial: e.interrupted().is_some(),
        interrupted_at_s: e.interrupted().map(|i| i.at.as_secs_f64()),
    };
    RunResults {
        summary,
        tasks,
        programs,
        cpus,
        warnings,
        trace: e.trace.clone(),
        vms: e.vm_rows(),
        dynamic: e.dynamic_results(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_time_by_type_reads_and_writes_as_a_map() {
        let pairs = [("little", 0.5), ("big", 1.25), ("mid", 0.0), ("big", 2.0)];
        let ts: TypeSeconds = pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        let map: std::collections::BTreeMap<String, f64> =
            pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        // Name order and the last of equal names, as a map; the same JSON.
        let names: Vec<&String> = ts.iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["big", "little", "mid"]);
        assert_eq!(
            (ts.get("big"), ts["little"], ts.get("huge")),
            (Some(&2.0), 0.5, None)
        );
        assert_eq!(ts.len(), 3);
        assert_eq!(
            serde_json::to_string(&ts).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert!(TypeSeconds::default().is_empty());
    }

    #[test]
    fn wake_quantiles_by_selection_equal_those_of_the_sorted_samples() {
        // A fixed pseudo-random sequence with repeats, of every length up to
        // 300 and a few longer ones (the 99th percentile found both ways).
        let mut x: u64 = 12345;
        let mut v = Vec::new();
        for n in (0..300).chain([800, 801, 802, 1000, 2500]) {
            while v.len() < n {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                v.push((x >> 33) % 50);
            }
            let mut sorted = v.clone();
            sorted.sort_unstable();
            let ms = |q: Option<f64>| q.map(|ns| ns * 1e-6);
            let want = (
                ms(quantile(&sorted, 0.5)),
                ms(quantile(&sorted, 0.99)),
                ms(sorted.last().map(|&m| m as f64)),
            );
            assert_eq!(wake_quantiles(&mut v.clone()), want, "n={n}");
        }
    }

    #[test]
    fn quantiles_interpolate_between_ranks() {
        // Samples 1, 2, 3, 4, 10 ns (given unsorted): n = 5.
        // p50: h = 4 × 0.5 = 2 → x[2] = 3.
        // p99: h = 4 × 0.99 = 3.96 → x[3] + 0.96 × (x[4] − x[3]) = 4 + 0.96 × 6 = 9.76.
        // max: 10.
        let (p50, p99, max) = wake_quantiles(&mut [4u64, 1, 10, 3, 2]);
        let close = |x: Option<f64>, want: f64| (x.unwrap() - want).abs() < 1e-15;
        assert!(close(p50, 3e-6), "{p50:?}");
        assert!(close(p99, 9.76e-6), "{p99:?}");
        assert!(close(max, 10e-6), "{max:?}");
        // Two samples 0 and 1000 ns: p50 = 500 ns; one sample: every quantile is it.
        assert_eq!(quantile(&[0, 1000], 0.5), Some(500.0));
        assert_eq!(quantile(&[7], 0.99), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
