//! Results of a run: per-task, per-program and per-CPU rows and a summary,
//! serialisable as JSON (the Python layer turns them into DataFrames).

pub use crate::sim::VmRow;
use crate::sim::Engine;
use crate::trace::TraceEvent;
use serde::Serialize;
use std::collections::BTreeMap;

/// Fraction of the CPU time (CPUs × run length) above which idle time
/// beside waiting work gets a run warning.
pub const IDLE_WHILE_RUNNABLE_WARN: f64 = 0.01;

/// Run-level summary.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub scenario: String,
    pub scheduler: String,
    pub governor: String,
    pub agents: Vec<String>,
    pub seed: u64,
    pub version: String,
    /// Simulated time at which the run ended.
    pub sim_end_s: f64,
    /// Time at which the last program instance finished (None if some did not).
    pub makespan_s: Option<f64>,
    pub events: u64,
    /// Events pushed into the queue, including stale ones that were dropped.
    pub events_pushed: u64,
    pub wall_s: f64,
    pub events_per_sec: f64,
    /// CPUs plus platform base power, joules.
    pub energy_j: f64,
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
    pub migrations: u64,
    pub context_switches: u64,
    pub deadline_misses: u64,
    pub tasks: usize,
    pub programs: usize,
    pub programs_completed: usize,
    pub tasks_killed: usize,
    /// CPU-seconds during which an online CPU sat idle while a runnable
    /// task that may run there waited (work conservation; 0 for a
    /// work-conserving scheduler).
    pub idle_while_runnable_s: f64,
    /// Hex digest of every decision and state change of the run.
    pub trace_hash: String,
}

/// One task.
#[derive(Clone, Debug, Serialize)]
pub struct TaskRow {
    pub task: usize,
    pub program: String,
    pub program_id: usize,
    pub thread: u32,
    pub state: &'static str,
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    pub run_s: f64,
    /// Scaled CPU time: run time × rating (Li et al.'s STIME+), seconds.
    pub scaled_run_s: f64,
    /// Load weight (from nice).
    pub weight: u32,
    pub wait_s: f64,
    pub sleep_s: f64,
    pub work_ms: f64,
    pub instructions: f64,
    pub cycles: f64,
    pub ipc: f64,
    pub cache_refs: f64,
    pub cache_misses: f64,
    pub csw_voluntary: u64,
    pub csw_involuntary: u64,
    pub migrations: u64,
    /// ISA faults taken, and per second of run time.
    pub faults: u64,
    pub faults_per_s: f64,
    /// Migrations per second of run time.
    pub migrations_per_s: f64,
    /// Time lost refilling caches after migrations and in fault traps.
    pub stall_s: f64,
    pub jobs: u64,
    pub deadline_misses: u64,
    pub max_response_ms: f64,
    pub nice: i32,
    pub killed: Option<String>,
    pub run_s_by_type: BTreeMap<String, f64>,
}

/// One completed program instance.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramRow {
    pub program_id: usize,
    pub program: String,
    pub kind: String,
    pub instance: u32,
    pub start_s: f64,
    pub end_s: f64,
    pub completion_s: f64,
    pub threads: usize,
}

/// One CPU.
#[derive(Clone, Debug, Serialize)]
pub struct CpuRow {
    pub cpu: usize,
    #[serde(rename = "type")]
    pub ty: String,
    pub node: u32,
    pub core: u32,
    pub llc: u32,
    pub freq_domain: usize,
    pub busy_s: f64,
    pub idle_s: f64,
    pub utilization: f64,
    pub energy_j: f64,
    pub ticks: u64,
    pub final_mhz: u32,
    /// Time this CPU sat idle (and online) while a runnable task that may
    /// run on it waited, seconds.
    pub idle_while_runnable_s: f64,
}

/// Everything a run returns.
#[derive(Clone, Debug, Serialize)]
pub struct RunResults {
    pub summary: Summary,
    pub tasks: Vec<TaskRow>,
    pub programs: Vec<ProgramRow>,
    pub cpus: Vec<CpuRow>,
    pub warnings: Vec<String>,
    pub trace: Vec<TraceEvent>,
    /// Per-VM results (absent without VMs); vCPUs are not in `tasks`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vms: Vec<crate::metrics::VmRow>,
    /// Reconfigurations and proxies (only for scenarios with `[dynamic]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<crate::sim::dynamic::DynResults>,
}

/// Collect the results of a finished run.
pub fn collect(e: &Engine, scenario: &str, wall_s: f64) -> RunResults {
    let m = &e.m;
    let end = e.end_time();
    let end_s = end.as_secs_f64();
    let tasks: Vec<TaskRow> = e
        .tasks
        .iter()
        .filter(|t| !e.is_vcpu(t.id))
        .map(|t| {
            let p = &e.progs[t.program];
            let by_type = m
                .types
                .iter()
                .enumerate()
                .filter(|(i, _)| t.c.run_ns_by_type.get(*i).copied().unwrap_or(0) > 0)
                .map(|(i, ty)| (ty.name.clone(), t.c.run_ns_by_type[i] as f64 * 1e-9))
                .collect();
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
                nice: t.nice,
                killed: t.kill_reason.clone(),
                run_s_by_type: by_type,
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
        version: crate::VERSION.to_string(),
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

