//! Scenario files: the serde schema (the one source of truth; `hetsched
//! schema` exports it as JSON Schema), parsing with exact error locations,
//! `--set` overrides, preset resolution, validation, and building a run.
//!
//! Input never panics the engine: a TOML syntax error names
//! `file:line:column`; a bad value names its path
//! (`machine.cpus[3].type: unknown cpu type "fastt"; known: big, little`).

use crate::error::{at, SimError};
use crate::hw::{Cpu, CpuType, FreqDomain, Machine, PState, PowerModel};
use crate::os::{nice_to_weight, Counters, CpuSet, Task, TaskState};
use crate::policy::{self, Agent, Governor, Scheduler};
use crate::presets;
use crate::sim::Setup;
use crate::time::SimTime;
use crate::workload::{ComputeParams, Op, Program};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

fn d_seed() -> u64 {
    1
}
fn d_sched() -> String {
    "cfs".into()
}
fn d_gov() -> String {
    "performance".into()
}
fn d_true() -> bool {
    true
}
fn d_tick_hz() -> f64 {
    250.0
}
fn d_one_f() -> f64 {
    1.0
}
fn d_one_u() -> u32 {
    1
}
fn d_cap() -> u32 {
    1024
}
fn d_pstates() -> Vec<PStateSpec> {
    vec![PStateSpec {
        mhz: 2000,
        volt: 1.0,
    }]
}
fn d_dyn() -> f64 {
    1.0
}
fn d_static() -> f64 {
    0.3
}
fn d_idle() -> f64 {
    0.1
}
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}
fn d_stall() -> f64 {
    0.3
}
fn d_class() -> String {
    "default".into()
}
fn d_ipc() -> f64 {
    1.0
}
fn d_refs() -> f64 {
    0.02
}
fn d_miss() -> f64 {
    0.05
}
fn d_ws() -> f64 {
    256.0
}

/// A whole scenario file.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Name used in reports and output folders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the scenario shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Seed of the run's random number generator.
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Simulated-time limit in seconds (> 0).
    pub duration_s: f64,
    /// End the run as soon as every program has finished.
    #[serde(default = "d_true")]
    pub stop_when_done: bool,
    /// Scheduler: a registry name with optional parameters (`cfs[min_granularity_ms=4]`),
    /// or `python:module:Class` for a policy written in Python.
    #[serde(default = "d_sched")]
    pub scheduler: String,
    /// cpufreq governor (`performance`, `powersave`, `userspace[mhz=1400]`).
    #[serde(default = "d_gov")]
    pub governor: String,
    /// User-level agents.
    #[serde(default)]
    pub agents: Vec<String>,
    /// The machine.
    pub machine: MachineSpec,
    /// The programs.
    #[serde(default)]
    pub workload: WorkloadSpec,
    /// Named groups of CPUs, each optionally at its own fixed frequency
    /// (Patel's 4 × 800 MHz, 2 × 1.4 GHz, 2 × 2.3 GHz partition).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpusets: Vec<CpusetSpec>,
    /// Virtual machines: nested machines whose vCPUs are host tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vms: Vec<crate::vm::VmSpec>,
    /// Dynamic processors: reconfiguration mechanisms, fusion levels,
    /// scripted reconfigurations (`docs/dynamic.md`). Absent: CPUs never change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<crate::dynamic::DynamicSpec>,
}

/// A cpuset: a named group of CPUs.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CpusetSpec {
    /// Its name (programs refer to it with `cpuset = "name"`).
    pub name: String,
    /// Its CPUs (each in at most one cpuset).
    pub cpus: Vec<u32>,
    /// Frequency its CPUs run at from the start, MHz (a P-state of their
    /// type; their frequency domains must lie inside the cpuset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mhz: Option<u32>,
}

/// The machine: CPU types and CPUs (by clusters or one by one), or a preset.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// Name of a built-in machine (`hetsched list presets`); other fields
    /// given here override the preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// What the machine is (documentation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Scheduler tick frequency (Linux HZ).
    #[serde(default = "d_tick_hz")]
    pub tick_hz: f64,
    /// Power of everything but the CPUs (memory, disks, fans, supply), W.
    #[serde(default)]
    pub platform_base_w: f64,
    /// Reference clock in GHz for instruction counts (default: the highest
    /// frequency of any type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_ghz: Option<f64>,
    /// CPU types by name.
    #[serde(default)]
    pub types: BTreeMap<String, CpuTypeSpec>,
    /// Cache-refill cost of migrations.
    #[serde(default)]
    pub migration: MigrationSpec,
    /// CPU time lost to the trap of an ISA fault, µs.
    #[serde(default = "d_trap")]
    pub fault_trap_us: f64,
    /// Groups of identical cores sharing an LLC (and, by default, a frequency domain).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterSpec>,
    /// CPUs one by one (instead of clusters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<CpuSpec>,
}

/// Cache-refill cost of migrations (Li et al. §6.1). The defaults are
/// calibrated on the paper's two 4 MB measurements only: 1.8 ms across
/// separate caches (65 536 lines from memory → 27.47 ns per line) and 4.1 µs
/// within a shared L2 (a 32 KiB L1 refilled from L2 → 8.0 ns per line); the
/// 512 KB figures are left for `hetsched reproduce li-mig` to check.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrationSpec {
    /// Whether migrations cost anything.
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// Cache line size, bytes.
    #[serde(default = "d_line")]
    pub line_bytes: f64,
    /// Private (per-core) cache refilled after a migration within an LLC, KiB.
    #[serde(default = "d_private")]
    pub private_kb: f64,
    /// LLC size: at most this much is refilled from memory after a migration
    /// across LLCs, KiB.
    #[serde(default = "d_llc")]
    pub llc_kb: f64,
    /// Refill time per line from memory, ns.
    #[serde(default = "d_mem_line")]
    pub mem_line_ns: f64,
    /// Refill time per line from the shared LLC, ns.
    #[serde(default = "d_llc_line")]
    pub llc_line_ns: f64,
}

impl Default for MigrationSpec {
    fn default() -> Self {
        MigrationSpec {
            enabled: true,
            line_bytes: d_line(),
            private_kb: d_private(),
            llc_kb: d_llc(),
            mem_line_ns: d_mem_line(),
            llc_line_ns: d_llc_line(),
        }
    }
}

fn d_line() -> f64 {
    64.0
}
fn d_private() -> f64 {
    32.0
}
fn d_llc() -> f64 {
    4096.0
}
fn d_mem_line() -> f64 {
    // 1.8 ms / (4 MiB / 64 B)
    1.8e6 / 65536.0
}
fn d_llc_line() -> f64 {
    // 4.1 µs / (32 KiB / 64 B)
    4100.0 / 512.0
}
fn d_trap() -> f64 {
    2.0
}

/// A CPU type.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CpuTypeSpec {
    /// Capacity at the highest P-state, out of 1024 (as Linux `cpu_capacity`).
    #[serde(default = "d_cap")]
    pub capacity: u32,
    /// P-states (any order; sorted by frequency).
    #[serde(default = "d_pstates")]
    pub pstates: Vec<PStateSpec>,
    /// Speedup per workload class (default 1.0 for classes not listed).
    #[serde(default)]
    pub class_speedup: BTreeMap<String, f64>,
    /// ISA features (e.g. `sse4.1`, `avx512`).
    #[serde(default)]
    pub features: Vec<String>,
    /// Per-thread throughput while both SMT siblings are busy (0, 1].
    #[serde(default = "d_one_f")]
    pub smt_factor: f64,
    /// Power parameters.
    #[serde(default)]
    pub power: PowerSpec,
    /// Time a frequency change takes, µs.
    #[serde(default)]
    pub freq_transition_us: f64,
    /// Performance rating (Li et al. §4.1, e.g. a SPEC score); default: the
    /// capacity, i.e. the speed of a reference program on this type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rating: Option<f64>,
}

/// A P-state.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PStateSpec {
    /// Frequency, MHz.
    pub mhz: u32,
    /// Voltage, V.
    pub volt: f64,
}

/// Power parameters of a CPU type (see the power model in `docs/model.md`).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PowerSpec {
    /// Dynamic power C_eff: watts per (V² · GHz) at full activity.
    #[serde(default = "d_dyn")]
    pub dyn_w_per_v2ghz: f64,
    /// Static power per volt while active, W/V.
    #[serde(default = "d_static")]
    pub static_w_per_v: f64,
    /// Power while idle, W.
    #[serde(default = "d_idle")]
    pub idle_w: f64,
    /// Relative switching activity while stalled on memory (0..1).
    #[serde(default = "d_stall")]
    pub stall_activity: f64,
    /// Idle leakage, W per V³, added to `idle_w` at the domain's voltage
    /// (default 0: idle power independent of the P-state).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_leak_w_per_v3: f64,
    /// Idle clock-tree switching, W per (V² · GHz), added to `idle_w`
    /// (default 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_clock_w_per_v2ghz: f64,
}

impl Default for PowerSpec {
    fn default() -> Self {
        PowerSpec {
            dyn_w_per_v2ghz: d_dyn(),
            static_w_per_v: d_static(),
            idle_w: d_idle(),
            stall_activity: d_stall(),
            idle_leak_w_per_v3: 0.0,
            idle_clock_w_per_v2ghz: 0.0,
        }
    }
}

/// Scope of a cluster's frequency domains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DvfsScope {
    /// One frequency domain for the whole cluster.
    #[default]
    Cluster,
    /// One frequency domain per physical core.
    Core,
}

/// A cluster: `count` groups of `cores` cores × `smt` hardware threads.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// CPU type name.
    #[serde(rename = "type")]
    pub ty: String,
    /// Physical cores.
    #[serde(default = "d_one_u")]
    pub cores: u32,
    /// Hardware threads per core.
    #[serde(default = "d_one_u")]
    pub smt: u32,
    /// Node (socket).
    #[serde(default)]
    pub node: u32,
    /// How many such clusters (each its own LLC and frequency domain).
    #[serde(default = "d_one_u")]
    pub count: u32,
    /// Clock-modulation duty cycle (0, 1].
    #[serde(default = "d_one_f")]
    pub duty_cycle: f64,
    /// Frequency-domain scope.
    #[serde(default)]
    pub dvfs: DvfsScope,
}

/// One CPU.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    /// CPU type name.
    #[serde(rename = "type")]
    pub ty: String,
    /// Node (socket).
    #[serde(default)]
    pub node: u32,
    /// Physical core id (CPUs sharing one are SMT siblings); default: its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<u32>,
    /// LLC domain id; default: its node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc: Option<u32>,
    /// Frequency domain id; default: its own core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_domain: Option<u32>,
    /// Clock-modulation duty cycle (0, 1].
    #[serde(default = "d_one_f")]
    pub duty_cycle: f64,
}

/// The workload: programs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Programs, each a group of threads.
    #[serde(default)]
    pub programs: Vec<ProgramSpec>,
}

/// Program patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProgramKind {
    /// One thread computing `work_ms`.
    Sequential,
    /// Static data-parallel: `threads` threads share `work_ms` equally, with a
    /// barrier between `iterations`.
    Parallel,
    /// Dynamic binding: `threads` threads pull `chunks` equal chunks of `work_ms`.
    Dynamic,
    /// Fork-join: per iteration, thread 0 computes the sequential part while
    /// the others sleep at a barrier, then all share the parallel part.
    ForkJoin,
    /// Process pool (e.g. pmake): `threads` workers take `chunks` jobs, each
    /// computing then doing `io_ms` of I/O.
    Pool,
    /// Periodic real-time tasks: `threads` tasks releasing a job of `wcet_ms`
    /// every `period_ms`, due `deadline_ms` after release.
    Periodic,
    /// Explicit phases run `loops` times by each of `threads` threads.
    Phases,
}

impl ProgramKind {
    fn name(self) -> &'static str {
        match self {
            ProgramKind::Sequential => "sequential",
            ProgramKind::Parallel => "parallel",
            ProgramKind::Dynamic => "dynamic",
            ProgramKind::ForkJoin => "fork_join",
            ProgramKind::Pool => "pool",
            ProgramKind::Periodic => "periodic",
            ProgramKind::Phases => "phases",
        }
    }
}

/// A program.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgramSpec {
    /// Name (default `p<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Pattern.
    pub kind: ProgramKind,
    /// Number of threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Total reference work of the program, ms (reference ms = ms on a
    /// capacity-1024 CPU at its highest frequency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_ms: Option<f64>,
    /// Barrier-separated iterations (parallel, fork_join).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// Fraction of the work done by thread 0 alone (fork_join).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_fraction: Option<f64>,
    /// Chunks in the shared work queue (dynamic, pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<u32>,
    /// I/O time after each job, ms (pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_ms: Option<f64>,
    /// Period, ms (periodic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ms: Option<f64>,
    /// Worst-case execution time of a job, reference ms (periodic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wcet_ms: Option<f64>,
    /// Relative deadline, ms (periodic; default the period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<f64>,
    /// Number of jobs (periodic; default: until the end of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u32>,
    /// Phases (phases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Vec<PhaseSpec>>,
    /// Times each thread runs its phases (phases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loops: Option<u32>,
    /// Threads that a barrier waits for (phases; default all threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier_count: Option<u32>,
    /// Start time, ms.
    #[serde(default)]
    pub start_ms: f64,
    /// Instances run one after another.
    #[serde(default = "d_one_u")]
    pub repeat: u32,
    /// Nice value, -20..19.
    #[serde(default)]
    pub nice: i32,
    /// Nice values of later instances of a repeated program: the step
    /// `{ after = k, nice = n }` gives the threads nice `n` from instance
    /// `k + 1` on (after `k` completed instances).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nice_schedule: Vec<NiceStep>,
    /// Custom scheduling slice of its threads, ms, 0.1 to 100: what
    /// `sched_setattr()`'s `sched_runtime` sets on a SCHED_OTHER task (used by
    /// `eevdf`; default: the scheduler's base slice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_ms: Option<f64>,
    /// Allowed CPUs (default all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Vec<u32>>,
    /// Start in this cpuset (its CPUs become the affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<String>,
    /// Workload class (selects the CPU types' class speedup).
    #[serde(default = "d_class")]
    pub class: String,
    /// Memory intensity: fraction of reference time stalled on memory, [0, 1).
    #[serde(default)]
    pub mem: f64,
    /// Instructions per cycle at reference speed (capacity 1024 at the
    /// reference clock), memory stalls included.
    #[serde(default = "d_ipc")]
    pub ipc: f64,
    /// Last-level cache references per instruction.
    #[serde(default = "d_refs")]
    pub refs_per_instr: f64,
    /// Fraction of cache references that miss, [0, 1].
    #[serde(default = "d_miss")]
    pub miss_ratio: f64,
    /// Working set, KiB.
    #[serde(default = "d_ws")]
    pub working_set_kb: f64,
    /// ISA feature the compute phases need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
    /// Uniform relative jitter of compute and sleep times, [0, 1).
    #[serde(default)]
    pub jitter: f64,
    /// This program's speed while the other hardware thread of its core is
    /// busy, relative to running alone on the core, (0, 1]; overrides the CPU
    /// type's `smt_factor` for its threads (programs differ in how much they
    /// lose to a sharing sibling). Default: the type's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt_factor: Option<f64>,
}

/// A step of a program's `nice_schedule`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NiceStep {
    /// Completed instances after which the step applies (1 ≤ after < repeat).
    pub after: u32,
    /// Nice value from then on, -20..19.
    pub nice: i32,
}

/// One phase of a `phases` program: exactly one of `compute_ms`,
/// `sleep_ms`, `barrier`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Compute this much reference work, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_ms: Option<f64>,
    /// Sleep (or I/O) this long, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep_ms: Option<f64>,
    /// Wait at the program's barrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier: Option<bool>,
    /// Class of this compute phase (default the program's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Memory intensity of this compute phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<f64>,
    /// IPC of this compute phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<f64>,
    /// Cache miss ratio of this compute phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_ratio: Option<f64>,
    /// ISA feature this compute phase needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
}

/// A parsed, resolved and validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The resolved spec (preset merged in).
    pub spec: ScenarioSpec,
    /// Warnings found while validating.
    pub warnings: Vec<String>,
}

/// Input format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map(|i| before.len() - i)
        .unwrap_or(before.len() + 1);
    (line, col)
}

/// Parse text into a JSON value, with `source:line:column` on syntax errors.
pub fn parse_value(text: &str, source: &str, fmt: Format) -> Result<Value, SimError> {
    match fmt {
        Format::Toml => {
            let v: toml::Value = toml::from_str(text).map_err(|e| {
                let (l, c) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
                SimError::Scenario(format!(
                    "{source}:{l}:{c}: TOML syntax error: {}",
                    e.message().trim()
                ))
            })?;
            serde_json::to_value(v).map_err(|e| SimError::Scenario(format!("{source}: {e}")))
        }
        Format::Json => serde_json::from_str(text).map_err(|e| {
            SimError::Scenario(format!(
                "{source}:{}:{}: JSON syntax error: {e}",
                e.line(),
                e.column()
            ))
        }),
    }
}

/// One segment of a dotted path.
#[derive(Clone, Debug, PartialEq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Parse `workload.programs[0].threads` into segments.
pub fn parse_path(path: &str) -> Result<Vec<Seg>, String> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() && out.is_empty() {
            return Err(format!("\"{path}\": a path starts with a field name"));
        }
        if !key.is_empty() {
            out.push(Seg::Key(key.to_string()));
        }
        while !rest.is_empty() {
            let close = rest
                .find(']')
                .ok_or_else(|| format!("\"{path}\": missing ']'"))?;
            let idx: usize = rest[1..close]
                .parse()
                .map_err(|_| format!("\"{path}\": \"{}\" is not an index", &rest[1..close]))?;
            out.push(Seg::Index(idx));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(format!("\"{path}\": unexpected \"{rest}\""));
            }
        }
    }
    Ok(out)
}

/// Parse an override value: a TOML literal, or else a bare string.
pub fn parse_literal(v: &str) -> Value {
    match toml::from_str::<toml::Value>(&format!("v = {v}")) {
        Ok(t) => t
            .get("v")
            .and_then(|x| serde_json::to_value(x).ok())
            .unwrap_or_else(|| Value::String(v.to_string())),
        Err(_) => Value::String(v.to_string()),
    }
}

/// Set `path` in `root` to `value`, creating missing tables on the way.
pub fn set_path(root: &mut Value, path: &str, value: Value) -> Result<(), SimError> {
    let segs = parse_path(path).map_err(|e| SimError::Scenario(format!("--set {e}")))?;
    let mut cur = root;
    let mut walked = String::new();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        match seg {
            Seg::Key(k) => {
                if !cur.is_object() {
                    return Err(SimError::Scenario(format!(
                        "--set {path}: \"{walked}\" is not a table"
                    )));
                }
                let obj = cur.as_object_mut().expect("checked");
                if last {
                    obj.insert(k.clone(), value);
                    return Ok(());
                }
                let next_is_index = matches!(segs[i + 1], Seg::Index(_));
                cur = obj.entry(k.clone()).or_insert_with(|| {
                    if next_is_index {
                        Value::Array(vec![])
                    } else {
                        Value::Object(Default::default())
                    }
                });
                walked = if walked.is_empty() {
                    k.clone()
                } else {
                    format!("{walked}.{k}")
                };
            }
            Seg::Index(ix) => {
                let Some(arr) = cur.as_array_mut() else {
                    return Err(SimError::Scenario(format!(
                        "--set {path}: \"{walked}\" is not a list"
                    )));
                };
                let len = arr.len();
                if *ix >= len {
                    return Err(SimError::Scenario(format!(
                        "--set {path}: index {ix} is out of range; \"{walked}\" has {len} element(s)"
                    )));
                }
                if last {
                    arr[*ix] = value;
                    return Ok(());
                }
                cur = &mut arr[*ix];
                walked = format!("{walked}[{ix}]");
            }
        }
    }
    Ok(())
}

fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Parse, override, resolve and validate a scenario.
pub fn parse(
    text: &str,
    source: &str,
    fmt: Format,
    overrides: &[(String, String)],
) -> Result<Scenario, SimError> {
    let mut v = parse_value(text, source, fmt)?;
    if !v.is_object() {
        return Err(SimError::Scenario(format!(
            "{source}: a scenario is a table of fields"
        )));
    }
    for (path, val) in overrides {
        set_path(&mut v, path, parse_literal(val))?;
    }
    from_value(v)
}

/// Resolve presets in a JSON value and validate it.
pub fn from_value(mut v: Value) -> Result<Scenario, SimError> {
    // Resolve the machine preset: the preset is the base, the file's own
    // machine fields override it.
    if let Some(machine) = v.get_mut("machine") {
        if let Some(name) = machine.get("preset").cloned() {
            let Some(name) = name.as_str() else {
                return Err(at("machine.preset", "expected a preset name (a string)"));
            };
            let text = presets::machine(name).ok_or_else(|| {
                at(
                    "machine.preset",
                    format!(
                        "unknown preset \"{name}\"; known: {}",
                        presets::names().join(", ")
                    ),
                )
            })?;
            let mut base = parse_value(text, &format!("<preset {name}>"), Format::Toml)?;
            let mut own = machine.clone();
            own.as_object_mut().map(|o| o.remove("preset"));
            merge(&mut base, own);
            *machine = base;
        }
    }
    let spec: ScenarioSpec = serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." || path.is_empty() {
            SimError::Scenario(inner)
        } else {
            SimError::Scenario(format!("{path}: {inner}"))
        }
    })?;
    let mut warnings = Vec::new();
    let parts = build_parts(&spec, &mut warnings)?;
    build_dynamic(&spec, &parts.machine)?;
    build_policies(&spec, &parts.machine, None)?;
    Ok(Scenario { spec, warnings })
}

impl Scenario {
    /// The resolved scenario as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.spec).expect("spec serialises")
    }
    /// The resolved scenario as TOML.
    pub fn to_toml(&self) -> Result<String, SimError> {
        toml::to_string_pretty(&self.spec)
            .map_err(|e| SimError::Scenario(format!("cannot write TOML: {e}")))
    }
    /// Name (or `scenario`).
    pub fn name(&self) -> String {
        self.spec.name.clone().unwrap_or_else(|| "scenario".into())
    }
    /// Build everything a run needs. `sched` replaces the scenario's scheduler
    /// (a Python policy); `extra_agents` are added to its agents.
    pub fn build(
        &self,
        sched: Option<Box<dyn Scheduler>>,
        extra_agents: Vec<Box<dyn Agent>>,
    ) -> Result<Setup, SimError> {
        let mut w = Vec::new();
        let Parts {
            machine,
            tasks,
            programs,
            cpusets,
            vms,
        } = build_parts(&self.spec, &mut w)?;
        let Policies {
            scheduler,
            governor,
            mut agents,
        } = build_policies(&self.spec, &machine, sched)?;
        let scheduler = match scheduler {
            Some(s) => s,
            // A `python:` scheduler that nobody resolved: the registry's error.
            None => policy::make_scheduler(&self.spec.scheduler, &machine)
                .map_err(|e| at("scheduler", e))?,
        };
        agents.extend(extra_agents);
        let dynamic = build_dynamic(&self.spec, &machine)?;
        Ok(Setup {
            machine,
            tasks,
            programs,
            scheduler,
            governor,
            agents,
            duration: SimTime::from_secs_f64(self.spec.duration_s),
            seed: self.spec.seed,
            stop_when_done: self.spec.stop_when_done,
            cpusets,
            vms,
            dynamic,
        })
    }
}

/// The validated `[dynamic]` section, if any.
fn build_dynamic(
    spec: &ScenarioSpec,
    machine: &Machine,
) -> Result<Option<crate::dynamic::DynConfig>, SimError> {
    spec.dynamic
        .as_ref()
        .map(|d| crate::dynamic::build(d, machine))
        .transpose()
}

fn finite_in(path: &str, v: f64, lo: f64, hi: f64, allowed: &str) -> Result<(), SimError> {
    if !v.is_finite() || v < lo || v > hi {
        return Err(at(path, format!("{v} is out of range; allowed {allowed}")));
    }
    Ok(())
}

fn positive(path: &str, v: f64) -> Result<(), SimError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(at(
            path,
            format!("{v} is not allowed; must be a number > 0"),
        ));
    }
    Ok(())
}

/// The hardware and workload of a scenario, built and validated.
struct Parts {
    machine: Machine,
    tasks: Vec<Task>,
    programs: Vec<Program>,
    cpusets: Vec<Cpuset>,
    vms: Vec<crate::vm::VmSetup>,
}

/// The built policies of a scenario.
struct Policies {
    scheduler: Option<Box<dyn Scheduler>>,
    governor: Box<dyn Governor>,
    agents: Vec<Box<dyn Agent>>,
}

/// The policies of a scenario: the scheduler (`None` for a `python:` name,
/// which the Python layer resolves, unless `sched` replaces it), the
/// governor and the agents. Building them is also their validation.
fn build_policies(
    spec: &ScenarioSpec,
    machine: &Machine,
    sched: Option<Box<dyn Scheduler>>,
) -> Result<Policies, SimError> {
    let scheduler = match sched {
        Some(s) => Some(s),
        None if spec.scheduler.starts_with("python:") => None,
        None => {
            Some(policy::make_scheduler(&spec.scheduler, machine).map_err(|e| at("scheduler", e))?)
        }
    };
    let governor = policy::make_governor(&spec.governor, machine).map_err(|e| at("governor", e))?;
    let mut agents = Vec::new();
    for (i, a) in spec.agents.iter().enumerate() {
        if a.starts_with("python:") {
            return Err(at(
                format!("agents[{i}]"),
                format!("\"{a}\": agents written in Python are passed to hetsched.run(agents=[...]), not named in the scenario"),
            ));
        }
        agents.push(policy::make_agent(a, machine).map_err(|e| at(format!("agents[{i}]"), e))?);
    }
    Ok(Policies {
        scheduler,
        governor,
        agents,
    })
}

/// Build and validate the machine, cpusets, tasks and programs.
fn build_parts(spec: &ScenarioSpec, warnings: &mut Vec<String>) -> Result<Parts, SimError> {
    positive("duration_s", spec.duration_s)?;
    if spec.duration_s > 1e7 {
        return Err(at(
            "duration_s",
            format!("{} s is too long; at most 1e7 s", spec.duration_s),
        ));
    }
    let ms = &spec.machine;
    // Classes and features are interned over the types and the programs.
    let mut classes = vec!["default".to_string()];
    let mut features: Vec<String> = Vec::new();
    for t in ms.types.values() {
        for c in t.class_speedup.keys() {
            if !classes.contains(c) {
                classes.push(c.clone());
            }
        }
        for f in &t.features {
            if !features.contains(f) {
                features.push(f.clone());
            }
        }
    }
    // Classes given fused speedups in `[dynamic]` are machine classes too.
    for f in spec.dynamic.iter().flat_map(|d| &d.fusion) {
        for c in f.speedup.keys() {
            if !classes.contains(c) {
                classes.push(c.clone());
            }
        }
    }
    // Guest programs of VMs are interned with the host's.
    let all_programs = spec
        .workload
        .programs
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("workload.programs[{i}]"), p))
        .chain(spec.vms.iter().enumerate().flat_map(|(k, vm)| {
            vm.programs
                .iter()
                .enumerate()
                .map(move |(i, p)| (format!("vms[{k}].programs[{i}]"), p))
        }));
    for (base, p) in all_programs {
        let mut names = vec![(format!("{base}.class"), p.class.clone())];
        let mut feats = p
            .feature
            .iter()
            .map(|f| (format!("{base}.feature"), f.clone()))
            .collect::<Vec<_>>();
        for (j, ph) in p.phases.iter().flatten().enumerate() {
            if let Some(c) = &ph.class {
                names.push((format!("{base}.phases[{j}].class"), c.clone()));
            }
            if let Some(f) = &ph.feature {
                feats.push((format!("{base}.phases[{j}].feature"), f.clone()));
            }
        }
        for (path, c) in names {
            if !classes.contains(&c) {
                warnings.push(format!(
                    "{path}: class \"{c}\" has no speedup on any cpu type; it runs at speedup 1.0 everywhere"
                ));
                classes.push(c);
            }
        }
        for (path, f) in feats {
            if !features.contains(&f) {
                warnings.push(format!(
                    "{path}: feature \"{f}\" is not offered by any cpu type; every use will fault (SIGILL)"
                ));
                features.push(f);
            }
        }
    }
    if features.len() > 64 {
        return Err(at(
            "machine.types",
            format!("{} distinct ISA features; at most 64", features.len()),
        ));
    }
    let machine = build_machine(ms, classes, features)?;
    let cpusets = build_cpusets(&spec.cpusets, &machine)?;
    if cpusets.iter().any(|c| c.mhz.is_some())
        && !(spec.governor.starts_with("userspace")
            || spec.governor.starts_with("performance")
            || spec.governor.starts_with("powersave"))
    {
        warnings.push(format!(
            "cpusets: governor \"{}\" will change the frequencies the cpusets set",
            spec.governor
        ));
    }
    let (mut tasks, mut programs) = build_workload(&spec.workload, &machine, &cpusets)?;
    let vms = crate::vm::build_vms(&spec.vms, &machine, &mut tasks, &mut programs)?;
    Ok(Parts {
        machine,
        tasks,
        programs,
        cpusets,
        vms,
    })
}

fn build_machine(
    ms: &MachineSpec,
    classes: Vec<String>,
    features: Vec<String>,
) -> Result<Machine, SimError> {
    finite_in("machine.tick_hz", ms.tick_hz, 1.0, 100_000.0, "1 to 100000")?;
    finite_in(
        "machine.platform_base_w",
        ms.platform_base_w,
        0.0,
        1e6,
        "0 to 1e6 W",
    )?;
    let names: Vec<&String> = ms.types.keys().collect();
    let known = || {
        names
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut types = Vec::new();
    for (name, t) in &ms.types {
        let p = format!("machine.types.{name}");
        if t.capacity == 0 || t.capacity > 1024 {
            return Err(at(
                format!("{p}.capacity"),
                format!("{} is out of range; allowed 1 to 1024", t.capacity),
            ));
        }
        if t.pstates.is_empty() {
            return Err(at(format!("{p}.pstates"), "at least one P-state is needed"));
        }
        let mut ps: Vec<PState> = Vec::new();
        for (i, s) in t.pstates.iter().enumerate() {
            if s.mhz == 0 {
                return Err(at(
                    format!("{p}.pstates[{i}].mhz"),
                    "0 MHz is not allowed; must be > 0",
                ));
            }
            finite_in(
                &format!("{p}.pstates[{i}].volt"),
                s.volt,
                0.01,
                10.0,
                "0.01 to 10 V",
            )?;
            if ps.iter().any(|x| x.mhz == s.mhz) {
                return Err(at(
                    format!("{p}.pstates[{i}].mhz"),
                    format!("{} MHz is listed twice", s.mhz),
                ));
            }
            ps.push(PState {
                mhz: s.mhz,
                volt: s.volt,
            });
        }
        ps.sort_by_key(|s| s.mhz);
        let mut speed = vec![1.0; classes.len()];
        for (c, v) in &t.class_speedup {
            positive(&format!("{p}.class_speedup.{c}"), *v)?;
            let idx = classes.iter().position(|x| x == c).expect("interned");
            speed[idx] = *v;
        }
        if !(t.smt_factor > 0.0 && t.smt_factor <= 1.0) {
            return Err(at(
                format!("{p}.smt_factor"),
                format!("{} is out of range; allowed (0, 1]", t.smt_factor),
            ));
        }
        let pw = &t.power;
        finite_in(
            &format!("{p}.power.dyn_w_per_v2ghz"),
            pw.dyn_w_per_v2ghz,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.power.static_w_per_v"),
            pw.static_w_per_v,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.power.idle_w"),
            pw.idle_w,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.power.stall_activity"),
            pw.stall_activity,
            0.0,
            1.0,
            "0 to 1",
        )?;
        finite_in(
            &format!("{p}.power.idle_leak_w_per_v3"),
            pw.idle_leak_w_per_v3,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.power.idle_clock_w_per_v2ghz"),
            pw.idle_clock_w_per_v2ghz,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.freq_transition_us"),
            t.freq_transition_us,
            0.0,
            1e6,
            "0 to 1e6 µs",
        )?;
        let mut mask = 0u64;
        for f in &t.features {
            mask |= 1u64 << features.iter().position(|x| x == f).expect("interned");
        }
        types.push(CpuType {
            name: name.clone(),
            capacity: t.capacity,
            pstates: ps,
            class_speedup: speed,
            features: mask,
            smt_factor: t.smt_factor,
            power: PowerModel {
                dyn_w_per_v2ghz: pw.dyn_w_per_v2ghz,
                static_w_per_v: pw.static_w_per_v,
                idle_w: pw.idle_w,
                stall_activity: pw.stall_activity,
                idle_leak_w_per_v3: pw.idle_leak_w_per_v3,
                idle_clock_w_per_v2ghz: pw.idle_clock_w_per_v2ghz,
            },
            freq_transition: SimTime::from_ns_f64(t.freq_transition_us * 1e3),
            rating: match t.rating {
                Some(r) => {
                    positive(&format!("{p}.rating"), r)?;
                    Some(r)
                }
                None => None,
            },
        });
    }
    let type_idx = |path: &str, name: &str| -> Result<usize, SimError> {
        ms.types.keys().position(|k| k == name).ok_or_else(|| {
            if names.is_empty() {
                at(path, format!("unknown cpu type \"{name}\"; no types are defined (add [machine.types.{name}])"))
            } else {
                at(path, format!("unknown cpu type \"{name}\"; known: {}", known()))
            }
        })
    };
    // (type, node, core, llc, domain key, duty)
    let mut raw: Vec<(usize, u32, u32, u32, u64, f64, String)> = Vec::new();
    if !ms.clusters.is_empty() && !ms.cpus.is_empty() {
        return Err(at(
            "machine",
            "give either machine.clusters or machine.cpus, not both",
        ));
    }
    let (mut core_id, mut llc_id, mut dom_id) = (0u32, 0u32, 0u64);
    for (i, c) in ms.clusters.iter().enumerate() {
        let p = format!("machine.clusters[{i}]");
        let ty = type_idx(&format!("{p}.type"), &c.ty)?;
        if c.cores == 0 {
            return Err(at(
                format!("{p}.cores"),
                "0 is not allowed; a cluster has at least one core",
            ));
        }
        if c.smt == 0 || c.smt > 8 {
            return Err(at(
                format!("{p}.smt"),
                format!("{} is out of range; allowed 1 to 8", c.smt),
            ));
        }
        if c.count == 0 {
            return Err(at(format!("{p}.count"), "0 is not allowed; at least 1"));
        }
        finite_in(
            &format!("{p}.duty_cycle"),
            c.duty_cycle,
            1e-6,
            1.0,
            "(0, 1]",
        )?;
        for _ in 0..c.count {
            for _ in 0..c.cores {
                for _ in 0..c.smt {
                    raw.push((ty, c.node, core_id, llc_id, dom_id, c.duty_cycle, p.clone()));
                }
                core_id += 1;
                if c.dvfs == DvfsScope::Core {
                    dom_id += 1;
                }
            }
            llc_id += 1;
            if c.dvfs == DvfsScope::Cluster {
                dom_id += 1;
            }
        }
    }
    for (i, c) in ms.cpus.iter().enumerate() {
        let p = format!("machine.cpus[{i}]");
        let ty = type_idx(&format!("{p}.type"), &c.ty)?;
        finite_in(
            &format!("{p}.duty_cycle"),
            c.duty_cycle,
            1e-6,
            1.0,
            "(0, 1]",
        )?;
        let core = c.core.unwrap_or(1_000_000 + i as u32);
        let llc = c.llc.unwrap_or(c.node);
        let dom = c
            .freq_domain
            .map(|d| d as u64)
            .unwrap_or(1 << 40 | core as u64);
        raw.push((ty, c.node, core, llc, dom, c.duty_cycle, p));
    }
    if raw.is_empty() {
        return Err(at(
            "machine",
            "the machine has no CPUs; give machine.clusters, machine.cpus or machine.preset",
        ));
    }
    if raw.len() > 1 << 16 {
        return Err(at("machine", format!("{} CPUs; at most 65536", raw.len())));
    }
    // Dense ids for domains, in order of first appearance.
    let mut dom_map: BTreeMap<u64, usize> = BTreeMap::new();
    let mut domains: Vec<FreqDomain> = Vec::new();
    let mut cpus = Vec::new();
    for (id, (ty, node, core, llc, dk, duty, path)) in raw.iter().enumerate() {
        let d = *dom_map.entry(*dk).or_insert_with(|| {
            domains.push(FreqDomain {
                id: domains.len(),
                cpus: vec![],
                ty: *ty,
            });
            domains.len() - 1
        });
        if domains[d].ty != *ty {
            return Err(at(
                format!("{path}.freq_domain"),
                format!(
                    "frequency domain mixes cpu types \"{}\" and \"{}\"; a domain's CPUs share one type",
                    types[domains[d].ty].name, types[*ty].name
                ),
            ));
        }
        domains[d].cpus.push(id);
        cpus.push(Cpu {
            id,
            ty: *ty,
            node: *node,
            core: *core,
            llc: *llc,
            domain: d,
            duty_cycle: *duty,
            siblings: vec![],
        });
    }
    // Renumber cores densely and find SMT siblings.
    let mut core_map: BTreeMap<(u32, u32), u32> = BTreeMap::new();
    for c in &mut cpus {
        let n = core_map.len() as u32;
        c.core = *core_map.entry((c.node, c.core)).or_insert(n);
    }
    let mut by_core: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for c in &cpus {
        by_core.entry(c.core).or_default().push(c.id);
    }
    for sibs in by_core.values() {
        let t0 = cpus[sibs[0]].ty;
        for &s in sibs {
            if cpus[s].ty != t0 {
                return Err(at(
                    format!("machine.cpus[{s}].core"),
                    "SMT siblings (CPUs sharing a core) must be of one type",
                ));
            }
            cpus[s].siblings = sibs.iter().copied().filter(|&x| x != s).collect();
        }
    }
    let fmax_ghz = types.iter().map(|t| t.fmax()).max().unwrap_or(1000) as f64 / 1000.0;
    let ref_ghz = match ms.ref_ghz {
        Some(g) => {
            positive("machine.ref_ghz", g)?;
            g
        }
        None => fmax_ghz,
    };
    let mg = &ms.migration;
    finite_in(
        "machine.migration.line_bytes",
        mg.line_bytes,
        1.0,
        4096.0,
        "1 to 4096",
    )?;
    finite_in(
        "machine.migration.private_kb",
        mg.private_kb,
        0.0,
        1e9,
        "0 or more KiB",
    )?;
    finite_in(
        "machine.migration.llc_kb",
        mg.llc_kb,
        0.0,
        1e9,
        "0 or more KiB",
    )?;
    finite_in(
        "machine.migration.mem_line_ns",
        mg.mem_line_ns,
        0.0,
        1e6,
        "0 to 1e6 ns",
    )?;
    finite_in(
        "machine.migration.llc_line_ns",
        mg.llc_line_ns,
        0.0,
        1e6,
        "0 to 1e6 ns",
    )?;
    finite_in(
        "machine.fault_trap_us",
        ms.fault_trap_us,
        0.0,
        1e6,
        "0 to 1e6 µs",
    )?;
    Ok(Machine {
        migration: crate::hw::MigrationModel {
            enabled: mg.enabled,
            line_bytes: mg.line_bytes,
            private_kb: mg.private_kb,
            llc_kb: mg.llc_kb,
            mem_line_ns: mg.mem_line_ns,
            llc_line_ns: mg.llc_line_ns,
        },
        fault_trap: SimTime::from_ns_f64(ms.fault_trap_us * 1e3),
        types,
        cpus,
        domains,
        tick: SimTime::from_ns_f64(1e9 / ms.tick_hz),
        platform_base_w: ms.platform_base_w,
        ref_ghz,
        classes,
        features,
    })
}

/// Which program kinds use which optional fields.
const FIELD_KINDS: &[(&str, &[ProgramKind])] = {
    use ProgramKind::*;
    &[
        (
            "threads",
            &[
                Sequential, Parallel, Dynamic, ForkJoin, Pool, Periodic, Phases,
            ],
        ),
        ("work_ms", &[Sequential, Parallel, Dynamic, ForkJoin, Pool]),
        ("iterations", &[Parallel, ForkJoin]),
        ("seq_fraction", &[ForkJoin]),
        ("chunks", &[Dynamic, Pool]),
        ("io_ms", &[Pool]),
        ("period_ms", &[Periodic]),
        ("wcet_ms", &[Periodic]),
        ("deadline_ms", &[Periodic]),
        ("jobs", &[Periodic]),
        ("phases", &[Phases]),
        ("loops", &[Phases]),
        ("barrier_count", &[Phases]),
    ]
};

pub(crate) fn build_workload(
    ws: &WorkloadSpec,
    m: &Machine,
    cpusets: &[Cpuset],
) -> Result<(Vec<Task>, Vec<Program>), SimError> {
    let mut tasks: Vec<Task> = Vec::new();
    let mut programs = Vec::new();
    let n = m.ncpus();
    let ms_ns = |v: f64| v * 1e6;
    for (i, p) in ws.programs.iter().enumerate() {
        let base = format!("workload.programs[{i}]");
        let given: Vec<(&str, bool)> = vec![
            ("threads", p.threads.is_some()),
            ("work_ms", p.work_ms.is_some()),
            ("iterations", p.iterations.is_some()),
            ("seq_fraction", p.seq_fraction.is_some()),
            ("chunks", p.chunks.is_some()),
            ("io_ms", p.io_ms.is_some()),
            ("period_ms", p.period_ms.is_some()),
            ("wcet_ms", p.wcet_ms.is_some()),
            ("deadline_ms", p.deadline_ms.is_some()),
            ("jobs", p.jobs.is_some()),
            ("phases", p.phases.is_some()),
            ("loops", p.loops.is_some()),
            ("barrier_count", p.barrier_count.is_some()),
        ];
        for (field, is_given) in given {
            if !is_given {
                continue;
            }
            let kinds = FIELD_KINDS
                .iter()
                .find(|(f, _)| *f == field)
                .expect("listed")
                .1;
            if !kinds.contains(&p.kind) {
                let users: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                return Err(at(
                    format!("{base}.{field}"),
                    format!(
                        "not used by kind \"{}\" (used by: {})",
                        p.kind.name(),
                        users.join(", ")
                    ),
                ));
            }
        }
        let need = |field: &str, v: Option<f64>| -> Result<f64, SimError> {
            let v = v.ok_or_else(|| {
                at(
                    format!("{base}.{field}"),
                    format!("required for kind \"{}\"", p.kind.name()),
                )
            })?;
            positive(&format!("{base}.{field}"), v)?;
            Ok(v)
        };
        let threads = p.threads.unwrap_or(1);
        if threads == 0 {
            return Err(at(
                format!("{base}.threads"),
                "0 is not allowed; a program has at least one thread",
            ));
        }
        if threads > 10_000_000 {
            return Err(at(
                format!("{base}.threads"),
                format!("{threads} is too many; at most 10000000"),
            ));
        }
        if p.kind == ProgramKind::Sequential && threads != 1 {
            return Err(at(
                format!("{base}.threads"),
                "a sequential program has exactly 1 thread",
            ));
        }
        finite_in(
            &format!("{base}.start_ms"),
            p.start_ms,
            0.0,
            1e10,
            "0 or more ms",
        )?;
        if p.repeat == 0 {
            return Err(at(format!("{base}.repeat"), "0 is not allowed; at least 1"));
        }
        if !(-20..=19).contains(&p.nice) {
            return Err(at(
                format!("{base}.nice"),
                format!("{} is out of range; allowed -20 to 19", p.nice),
            ));
        }
        if let Some(s) = p.slice_ms {
            finite_in(
                &format!("{base}.slice_ms"),
                s,
                0.1,
                100.0,
                "0.1 to 100 (ms)",
            )?;
        }
        let mut prev_after = 0;
        for (k, step) in p.nice_schedule.iter().enumerate() {
            let sp = format!("{base}.nice_schedule[{k}]");
            if step.after <= prev_after || step.after >= p.repeat {
                return Err(at(
                    format!("{sp}.after"),
                    format!(
                        "{} is not allowed; steps need increasing values from {} to repeat - 1 = {}",
                        step.after,
                        prev_after + 1,
                        p.repeat.saturating_sub(1)
                    ),
                ));
            }
            prev_after = step.after;
            if !(-20..=19).contains(&step.nice) {
                return Err(at(
                    format!("{sp}.nice"),
                    format!("{} is out of range; allowed -20 to 19", step.nice),
                ));
            }
        }
        finite_in(
            &format!("{base}.mem"),
            p.mem,
            0.0,
            0.999_999,
            "0 <= mem < 1",
        )?;
        positive(&format!("{base}.ipc"), p.ipc)?;
        finite_in(
            &format!("{base}.refs_per_instr"),
            p.refs_per_instr,
            0.0,
            10.0,
            "0 to 10",
        )?;
        finite_in(
            &format!("{base}.miss_ratio"),
            p.miss_ratio,
            0.0,
            1.0,
            "0 to 1",
        )?;
        finite_in(
            &format!("{base}.working_set_kb"),
            p.working_set_kb,
            0.0,
            1e9,
            "0 or more KiB",
        )?;
        finite_in(
            &format!("{base}.jitter"),
            p.jitter,
            0.0,
            0.999_999,
            "0 <= jitter < 1",
        )?;
        if let Some(f) = p.smt_factor {
            if !(f.is_finite() && f > 0.0 && f <= 1.0) {
                return Err(at(
                    format!("{base}.smt_factor"),
                    format!("{f} is out of range; allowed (0, 1]"),
                ));
            }
        }
        let affinity = match &p.affinity {
            None => CpuSet::All,
            Some(list) => {
                if list.is_empty() {
                    return Err(at(
                        format!("{base}.affinity"),
                        "empty list; give at least one cpu or omit the field",
                    ));
                }
                for (j, &c) in list.iter().enumerate() {
                    if c as usize >= n {
                        return Err(at(
                            format!("{base}.affinity[{j}]"),
                            format!("cpu {c} does not exist (machine has {n} cpus: 0-{})", n - 1),
                        ));
                    }
                }
                let v: Vec<usize> = list.iter().map(|&c| c as usize).collect();
                CpuSet::from_cpus(&v, n)
            }
        };
        let affinity = match (&p.cpuset, &p.affinity) {
            (Some(_), Some(_)) => {
                return Err(at(
                    format!("{base}.cpuset"),
                    "give either cpuset or affinity, not both",
                ));
            }
            (Some(name), None) => match cpusets.iter().find(|c| &c.name == name) {
                Some(c) => CpuSet::from_cpus(&c.cpus, n),
                None => {
                    let known: Vec<&str> = cpusets.iter().map(|c| c.name.as_str()).collect();
                    return Err(at(
                        format!("{base}.cpuset"),
                        if known.is_empty() {
                            format!("unknown cpuset \"{name}\"; the scenario defines no cpusets")
                        } else {
                            format!("unknown cpuset \"{name}\"; known: {}", known.join(", "))
                        },
                    ));
                }
            },
            _ => affinity,
        };
        let class = m.class_id(&p.class).expect("interned");
        let feature = p
            .feature
            .as_ref()
            .map(|f| m.feature_id(f).expect("interned"));
        let base_params = ComputeParams {
            class,
            mem: p.mem,
            ipc: p.ipc,
            refs_per_instr: p.refs_per_instr,
            miss_ratio: p.miss_ratio,
            working_set_kb: p.working_set_kb,
            feature,
            smt_factor: p.smt_factor,
        };
        let mut params = vec![base_params.clone()];
        let name = p.name.clone().unwrap_or_else(|| format!("p{i}"));
        let mut prog = Program {
            id: i,
            name,
            kind: p.kind.name().to_string(),
            threads: vec![],
            start: SimTime::from_ms_f64(p.start_ms),
            repeat: p.repeat,
            instance: 0,
            instance_start: SimTime::ZERO,
            live: 0,
            params: vec![],
            barrier_size: threads,
            barrier_count: threads,
            barrier_waiting: vec![],
            chunks: 0,
            chunks_left: 0,
            chunk_work: 0.0,
            chunk_param: 0,
            chunk_io: SimTime::ZERO,
            period: SimTime::ZERO,
            rel_deadline: SimTime::ZERO,
            jitter: p.jitter,
            completions: vec![],
            nice_schedule: p.nice_schedule.iter().map(|n| (n.after, n.nice)).collect(),
        };
        // Per-thread (ops, loops); identical threads share one Arc.
        let mut per_thread: Vec<(Arc<[Op]>, u32)> = Vec::new();
        let cmp = |w: f64| Op::Compute { work: w, param: 0 };
        match p.kind {
            ProgramKind::Sequential => {
                let w = need("work_ms", p.work_ms)?;
                per_thread.push((vec![cmp(ms_ns(w))].into(), 1));
            }
            ProgramKind::Parallel => {
                let w = need("work_ms", p.work_ms)?;
                let k = p.iterations.unwrap_or(1);
                if k == 0 {
                    return Err(at(
                        format!("{base}.iterations"),
                        "0 is not allowed; at least 1",
                    ));
                }
                let each = ms_ns(w) / (threads as f64 * k as f64);
                let ops: Arc<[Op]> = if k > 1 {
                    vec![cmp(each), Op::Barrier].into()
                } else {
                    vec![cmp(each)].into()
                };
                for _ in 0..threads {
                    per_thread.push((ops.clone(), k));
                }
            }
            ProgramKind::Dynamic | ProgramKind::Pool => {
                let w = need("work_ms", p.work_ms)?;
                let chunks = p.chunks.ok_or_else(|| {
                    at(
                        format!("{base}.chunks"),
                        format!("required for kind \"{}\"", p.kind.name()),
                    )
                })?;
                if chunks == 0 {
                    return Err(at(format!("{base}.chunks"), "0 is not allowed; at least 1"));
                }
                let io = p.io_ms.unwrap_or(0.0);
                finite_in(&format!("{base}.io_ms"), io, 0.0, 1e9, "0 or more ms")?;
                prog.chunks = chunks as u64;
                prog.chunk_work = ms_ns(w) / chunks as f64;
                prog.chunk_io = SimTime::from_ms_f64(io);
                let ops: Arc<[Op]> = vec![Op::Pull].into();
                for _ in 0..threads {
                    per_thread.push((ops.clone(), 1));
                }
            }
            ProgramKind::ForkJoin => {
                let w = need("work_ms", p.work_ms)?;
                let k = p.iterations.unwrap_or(1);
                if k == 0 {
                    return Err(at(
                        format!("{base}.iterations"),
                        "0 is not allowed; at least 1",
                    ));
                }
                let f = p.seq_fraction.unwrap_or(0.0);
                finite_in(
                    &format!("{base}.seq_fraction"),
                    f,
                    0.0,
                    0.999_999,
                    "0 <= seq_fraction < 1",
                )?;
                let per_iter = ms_ns(w) / k as f64;
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
            ProgramKind::Periodic => {
                let period = need("period_ms", p.period_ms)?;
                let wcet = need("wcet_ms", p.wcet_ms)?;
                let dl = p.deadline_ms.unwrap_or(period);
                positive(&format!("{base}.deadline_ms"), dl)?;
                let jobs = p.jobs.unwrap_or(u32::MAX);
                if jobs == 0 {
                    return Err(at(format!("{base}.jobs"), "0 is not allowed; at least 1"));
                }
                prog.period = SimTime::from_ms_f64(period);
                prog.rel_deadline = SimTime::from_ms_f64(dl);
                let ops: Arc<[Op]> = vec![cmp(ms_ns(wcet)), Op::WaitPeriod].into();
                for _ in 0..threads {
                    per_thread.push((ops.clone(), jobs));
                }
            }
            ProgramKind::Phases => {
                let phases = p
                    .phases
                    .as_ref()
                    .ok_or_else(|| at(format!("{base}.phases"), "required for kind \"phases\""))?;
                if phases.is_empty() {
                    return Err(at(
                        format!("{base}.phases"),
                        "empty list; give at least one phase",
                    ));
                }
                let loops = p.loops.unwrap_or(1);
                if loops == 0 {
                    return Err(at(format!("{base}.loops"), "0 is not allowed; at least 1"));
                }
                let mut ops = Vec::new();
                for (j, ph) in phases.iter().enumerate() {
                    let pp = format!("{base}.phases[{j}]");
                    let set = [
                        ph.compute_ms.is_some(),
                        ph.sleep_ms.is_some(),
                        ph.barrier.is_some(),
                    ];
                    if set.iter().filter(|x| **x).count() != 1 {
                        return Err(at(&pp, "give exactly one of compute_ms, sleep_ms, barrier"));
                    }
                    if let Some(c) = ph.compute_ms {
                        positive(&format!("{pp}.compute_ms"), c)?;
                        let mut cp = base_params.clone();
                        if let Some(cl) = &ph.class {
                            cp.class = m.class_id(cl).expect("interned");
                        }
                        if let Some(v) = ph.mem {
                            finite_in(&format!("{pp}.mem"), v, 0.0, 0.999_999, "0 <= mem < 1")?;
                            cp.mem = v;
                        }
                        if let Some(v) = ph.ipc {
                            positive(&format!("{pp}.ipc"), v)?;
                            cp.ipc = v;
                        }
                        if let Some(v) = ph.miss_ratio {
                            finite_in(&format!("{pp}.miss_ratio"), v, 0.0, 1.0, "0 to 1")?;
                            cp.miss_ratio = v;
                        }
                        if let Some(f) = &ph.feature {
                            cp.feature = Some(m.feature_id(f).expect("interned"));
                        }
                        let idx = match params.iter().position(|x| *x == cp) {
                            Some(ix) => ix,
                            None => {
                                params.push(cp);
                                params.len() - 1
                            }
                        };
                        ops.push(Op::Compute {
                            work: ms_ns(c),
                            param: idx as u32,
                        });
                    } else {
                        if ph.class.is_some()
                            || ph.mem.is_some()
                            || ph.ipc.is_some()
                            || ph.miss_ratio.is_some()
                            || ph.feature.is_some()
                        {
                            return Err(at(&pp, "class, mem, ipc, miss_ratio and feature apply to compute phases only"));
                        }
                        if let Some(s) = ph.sleep_ms {
                            finite_in(&format!("{pp}.sleep_ms"), s, 0.0, 1e10, "0 or more ms")?;
                            ops.push(Op::Sleep {
                                ns: SimTime::from_ms_f64(s).0,
                            });
                        } else if ph.barrier == Some(true) {
                            ops.push(Op::Barrier);
                        } else {
                            return Err(at(
                                format!("{pp}.barrier"),
                                "false is not a phase; use barrier = true or drop the phase",
                            ));
                        }
                    }
                }
                if let Some(bc) = p.barrier_count {
                    if !ops.contains(&Op::Barrier) {
                        return Err(at(
                            format!("{base}.barrier_count"),
                            "the program has no barrier phase",
                        ));
                    }
                    if bc == 0 || bc > threads || threads % bc != 0 {
                        return Err(at(
                            format!("{base}.barrier_count"),
                            format!(
                                "{bc}: a barrier of {bc} threads can never be met by {threads} threads \
                                 (must divide the thread count)"
                            ),
                        ));
                    }
                    prog.barrier_size = bc;
                    prog.barrier_count = bc;
                }
                let ops: Arc<[Op]> = ops.into();
                for _ in 0..threads {
                    per_thread.push((ops.clone(), loops));
                }
            }
        }
        if p.kind == ProgramKind::Dynamic || p.kind == ProgramKind::Pool {
            prog.chunk_param = 0;
        }
        prog.params = params;
        let weight = nice_to_weight(p.nice);
        for (th, (ops, loops)) in per_thread.into_iter().enumerate() {
            let id = tasks.len();
            prog.threads.push(id);
            tasks.push(Task {
                id,
                program: i,
                thread: th as u32,
                ops,
                loops,
                pc: 0,
                iter: 0,
                state: TaskState::NotStarted,
                state_since: SimTime::ZERO,
                cpu: 0,
                last_ran: None,
                affinity: affinity.clone(),
                nice: p.nice,
                weight,
                slice_ns: p.slice_ms.map(|s| (s * 1e6).round() as u64),
                remaining: 0.0,
                param: 0,
                pending_io: 0,
                release: SimTime::ZERO,
                deadline: None,
                wake_gen: 0,
                class,
                start: None,
                end: None,
                kill_reason: None,
                stall_until: SimTime::ZERO,
                pending_stall: 0,
                c: Counters {
                    run_ns_by_type: vec![0; m.types.len()],
                    ..Default::default()
                },
            });
        }
        programs.push(prog);
    }
    Ok((tasks, programs))
}

/// JSON Schema of scenario files.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(ScenarioSpec);
    serde_json::to_string_pretty(&schema).expect("schema serialises")
}

/// A validated cpuset.
#[derive(Clone, Debug, PartialEq)]
pub struct Cpuset {
    /// Name.
    pub name: String,
    /// CPUs, ascending.
    pub cpus: Vec<usize>,
    /// Fixed frequency, if any.
    pub mhz: Option<u32>,
}

/// Validate the scenario's cpusets against the machine.
pub fn build_cpusets(specs: &[CpusetSpec], m: &Machine) -> Result<Vec<Cpuset>, SimError> {
    let n = m.ncpus();
    let mut owner: Vec<Option<usize>> = vec![None; n];
    let mut out: Vec<Cpuset> = Vec::new();
    for (i, c) in specs.iter().enumerate() {
        let p = format!("cpusets[{i}]");
        if c.name.trim().is_empty() {
            return Err(at(format!("{p}.name"), "empty name"));
        }
        if let Some(j) = out.iter().position(|o| o.name == c.name) {
            return Err(at(
                format!("{p}.name"),
                format!("\"{}\" is already the name of cpusets[{j}]", c.name),
            ));
        }
        if c.cpus.is_empty() {
            return Err(at(
                format!("{p}.cpus"),
                "empty list; a cpuset has at least one cpu",
            ));
        }
        let mut cpus = Vec::new();
        for (k, &cpu) in c.cpus.iter().enumerate() {
            let cpu = cpu as usize;
            if cpu >= n {
                return Err(at(
                    format!("{p}.cpus[{k}]"),
                    format!(
                        "cpu {cpu} does not exist (machine has {n} cpus: 0-{})",
                        n - 1
                    ),
                ));
            }
            if cpus.contains(&cpu) {
                return Err(at(
                    format!("{p}.cpus[{k}]"),
                    format!("cpu {cpu} is named twice"),
                ));
            }
            if let Some(o) = owner[cpu] {
                return Err(at(
                    format!("{p}.cpus[{k}]"),
                    format!("cpu {cpu} is already in cpuset \"{}\"", specs[o].name),
                ));
            }
            owner[cpu] = Some(i);
            cpus.push(cpu);
        }
        cpus.sort_unstable();
        if let Some(mhz) = c.mhz {
            for &cpu in &cpus {
                let d = &m.domains[m.cpus[cpu].domain];
                if let Some(&other) = d.cpus.iter().find(|x| !cpus.contains(x)) {
                    return Err(at(
                        format!("{p}.mhz"),
                        format!(
                            "cpu {cpu} shares its frequency domain with cpu {other}, which is not in this cpuset; \
                             a cpuset with its own frequency needs whole domains (use dvfs = \"core\")"
                        ),
                    ));
                }
                let t = &m.types[d.ty];
                if t.pstate_index(mhz).is_none() {
                    let below = t.pstates.iter().rev().find(|s| s.mhz < mhz).map(|s| s.mhz);
                    let above = t.pstates.iter().find(|s| s.mhz > mhz).map(|s| s.mhz);
                    let near: Vec<String> = [below, above]
                        .iter()
                        .flatten()
                        .map(|v| format!("{v} MHz"))
                        .collect();
                    return Err(at(
                        format!("{p}.mhz"),
                        format!(
                            "{mhz} MHz is not a P-state of cpu type \"{}\" (cpu {cpu}); nearest: {}",
                            t.name,
                            near.join(" or ")
                        ),
                    ));
                }
            }
        }
        out.push(Cpuset {
            name: c.name.clone(),
            cpus,
            mhz: c.mhz,
        });
    }
    Ok(out)
}
