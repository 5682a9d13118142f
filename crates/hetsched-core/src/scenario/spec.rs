//! The whole serde schema of a scenario file: the one source of truth
//! (`hetsched schema` exports it as JSON Schema). Validation and building
//! live beside it: `machine.rs`, `workload.rs`, `vm.rs`, `dynamic.rs`.

use schemars::gen::SchemaGenerator;
use schemars::schema::{InstanceType, Metadata, Schema, SchemaObject, SubschemaValidation};
use schemars::JsonSchema;
use serde::de::Error as _;
use serde::ser::{Error as _, SerializeMap};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

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
    pub vms: Vec<crate::scenario::vm::VmSpec>,
    /// Dynamic processors: reconfiguration mechanisms, fusion levels,
    /// scripted reconfigurations (`docs/dynamic.md`). Absent: CPUs never change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<crate::scenario::dynamic::DynamicSpec>,
    /// Operating-system settings: the rt and deadline classes' bandwidth and
    /// timeslice, the fair server (docs/classes.md). Absent: Linux 6.18's
    /// defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OsSpec>,
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
    /// How frequency domains share a supply voltage: `domain` (default,
    /// each domain its own plane) or `node` (one plane per node/package, at
    /// the highest voltage any of its domains' P-states asks for).
    #[serde(default, skip_serializing_if = "VoltagePlanes::is_default")]
    pub voltage_planes: VoltagePlanes,
    /// Uncore (northbridge, shared cache, memory) power per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncore: Option<UncoreSpec>,
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

/// Grouping of frequency domains into voltage planes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VoltagePlanes {
    /// Every frequency domain has its own supply voltage.
    #[default]
    Domain,
    /// The domains of one node (package) share one supply voltage.
    Node,
}

impl VoltagePlanes {
    fn is_default(&self) -> bool {
        *self == VoltagePlanes::Domain
    }
}

/// Uncore power of each node (docs/power.md): `idle_w` always, plus per
/// busy CPU `busy_w + stall_w × (1 − compute fraction)`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UncoreSpec {
    /// Constant power of each node's uncore, W (0 to 1e4).
    #[serde(default)]
    pub idle_w: f64,
    /// Power per busy CPU, W (0 to 1e4).
    #[serde(default)]
    pub busy_w: f64,
    /// Power of a busy CPU fully stalled on memory, W (0 to 1e4).
    #[serde(default)]
    pub stall_w: f64,
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

/// A program: the fields every kind takes and its pattern (`kind` with the
/// fields of that kind). A scenario file writes both as one flat table:
///
/// ```toml
/// [[workload.programs]]
/// kind = "periodic"   # the pattern ...
/// period_ms = 10      # ... and its fields
/// wcet_ms = 2
/// threads = 2         # fields every kind takes
/// nice = -5
/// ```
///
/// Reading it is a two-step parse (see [`ProgramSpec::from_map`]), so that a
/// field given to the wrong kind names the kinds that take it.
#[derive(Clone, Debug)]
pub struct ProgramSpec {
    /// The fields every kind takes.
    pub common: ProgramCommon,
    /// The kind and the fields that kind takes.
    pub pattern: ProgramPattern,
}

/// The fields of a program that every kind takes.
///
/// A new field that applies to every kind goes here (with its default and a
/// doc comment: the schema and the reference take both from here), and its
/// validation in `scenario/workload.rs`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgramCommon {
    /// Name (default `p<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Number of threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
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
    /// Utilisation clamp minimum of its threads, 0 to 1024 (at most
    /// `uclamp_max`): what `sched_setattr()`'s `sched_util_min` sets. A
    /// runqueue's minimum is the highest of its runnable tasks'; `schedutil`
    /// runs the CPU at least at the P-state that covers it, and fit checks
    /// take it as a performance request. Default: no clamp (0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uclamp_min: Option<u32>,
    /// Utilisation clamp maximum of its threads, 0 to 1024 (at least
    /// `uclamp_min`): what `sched_setattr()`'s `sched_util_max` sets. A
    /// runqueue's maximum is the highest of its runnable tasks'; `schedutil`
    /// asks for no more than it, and a task whose clamp fits a CPU's capacity
    /// fits that CPU. Default: no clamp (1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uclamp_max: Option<u32>,
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
    /// Spin before sleeping at the program's barrier (libgomp's
    /// `GOMP_SPINCOUNT`): a thread that arrives before the others stays on
    /// its CPU executing this much work (reference ms; a spin loop counts
    /// iterations, so a faster CPU spins it faster), goes on at once if the
    /// barrier opens meanwhile, and blocks when the spin runs out. Default:
    /// no spin (block at once). See docs/model.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier_spin_ms: Option<f64>,
    /// This program's speed while the other hardware thread of its core is
    /// busy, relative to running alone on the core, (0, 1]; overrides the CPU
    /// type's `smt_factor` for its threads (programs differ in how much they
    /// lose to a sharing sibling). Default: the type's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt_factor: Option<f64>,
    /// Scheduling policy of its threads (`sched_setscheduler(2)`): `other`
    /// (SCHED_OTHER), `batch`, `idle` (fair class, weight 3), `fifo`, `rr`
    /// (rt class, needs `priority`) or `deadline` (needs `dl_runtime_ms` and
    /// `dl_period_ms`). See docs/classes.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// rt priority 1-99 (higher runs first): required for `fifo` and `rr`,
    /// refused for the other policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// SCHED_DEADLINE runtime (budget per period), ms; `deadline` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dl_runtime_ms: Option<f64>,
    /// SCHED_DEADLINE relative deadline, ms (default: `dl_period_ms`);
    /// runtime <= deadline <= period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dl_deadline_ms: Option<f64>,
    /// SCHED_DEADLINE period, ms; `deadline` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dl_period_ms: Option<f64>,
}

/// Program patterns: one variant per `kind`, each holding exactly the fields
/// that kind takes (a field without a default is required for its kind).
///
/// Variant and field names are the file's (`fork_join`, `period_ms`); the
/// doc comments are the schema's descriptions. The field lists that the
/// parser checks ("not used by kind ... (used by: ...)", "required for kind
/// ...") are read from this type's schema, so a new kind or a new field of
/// one kind is added here only, then converted in `scenario/workload.rs` and
/// expanded in `workload/patterns.rs` (the compiler points at both matches).
///
/// The serde form of this enum alone is externally tagged (`{"periodic":
/// {...}}`); [`ProgramSpec`] reads and writes it as `kind` plus the fields.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ProgramPattern {
    /// One thread computing `work_ms`.
    Sequential {
        /// Total reference work of the program, ms (reference ms = ms on a
        /// capacity-1024 CPU at its highest frequency).
        work_ms: f64,
    },
    /// Static data-parallel: `threads` threads share `work_ms` equally, with a
    /// barrier between `iterations`.
    Parallel {
        /// Total reference work of the program, ms (reference ms = ms on a
        /// capacity-1024 CPU at its highest frequency).
        work_ms: f64,
        /// Barrier-separated iterations (parallel, fork_join).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        iterations: Option<u32>,
    },
    /// Dynamic binding: `threads` threads pull `chunks` equal chunks of `work_ms`.
    Dynamic {
        /// Total reference work of the program, ms (reference ms = ms on a
        /// capacity-1024 CPU at its highest frequency).
        work_ms: f64,
        /// Chunks in the shared work queue (dynamic, pool).
        chunks: u32,
    },
    /// Fork-join: per iteration, thread 0 computes the sequential part while
    /// the others sleep at a barrier, then all share the parallel part.
    ForkJoin {
        /// Total reference work of the program, ms (reference ms = ms on a
        /// capacity-1024 CPU at its highest frequency).
        work_ms: f64,
        /// Barrier-separated iterations (parallel, fork_join).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        iterations: Option<u32>,
        /// Fraction of the work done by thread 0 alone (fork_join).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq_fraction: Option<f64>,
    },
    /// Process pool (e.g. pmake): `threads` workers take `chunks` jobs, each
    /// computing then doing `io_ms` of I/O.
    Pool {
        /// Total reference work of the program, ms (reference ms = ms on a
        /// capacity-1024 CPU at its highest frequency).
        work_ms: f64,
        /// Chunks in the shared work queue (dynamic, pool).
        chunks: u32,
        /// I/O time after each job, ms (pool).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        io_ms: Option<f64>,
    },
    /// Periodic real-time tasks: `threads` tasks releasing a job of `wcet_ms`
    /// every `period_ms`, due `deadline_ms` after release.
    Periodic {
        /// Period, ms (periodic).
        period_ms: f64,
        /// Worst-case execution time of a job, reference ms (periodic).
        wcet_ms: f64,
        /// Relative deadline, ms (periodic; default the period).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_ms: Option<f64>,
        /// Number of jobs (periodic; default: until the end of the run).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        jobs: Option<u32>,
    },
    /// Explicit phases run `loops` times by each of `threads` threads.
    Phases {
        /// Phases (phases).
        phases: Vec<PhaseSpec>,
        /// Times each thread runs its phases (phases).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loops: Option<u32>,
        /// Threads that a barrier waits for (phases; default all threads).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        barrier_count: Option<u32>,
        /// Started only by other programs' `fork` phases, not at `start_ms`
        /// (phases; default false).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forked: Option<bool>,
    },
}

impl ProgramPattern {
    /// The kind's name, as scenario files write it (`fork_join`).
    pub fn kind(&self) -> &'static str {
        match self {
            ProgramPattern::Sequential { .. } => "sequential",
            ProgramPattern::Parallel { .. } => "parallel",
            ProgramPattern::Dynamic { .. } => "dynamic",
            ProgramPattern::ForkJoin { .. } => "fork_join",
            ProgramPattern::Pool { .. } => "pool",
            ProgramPattern::Periodic { .. } => "periodic",
            ProgramPattern::Phases { .. } => "phases",
        }
    }
}

/// One program kind as [`ProgramPattern`]'s schema describes it.
#[derive(Clone, Debug)]
pub(crate) struct KindInfo {
    /// Its name (`fork_join`).
    pub name: String,
    /// What it is (the variant's doc comment).
    pub description: Option<String>,
    /// Its fields and their schemas.
    pub fields: schemars::Map<String, Schema>,
    /// Its fields without a default.
    pub required: BTreeSet<String>,
}

/// The kinds of [`ProgramPattern`], in declaration order, read from its
/// schema (schemars follows the serde attributes: the names, defaults and
/// `Option`s that decide what deserialization accepts and requires).
fn kinds_from_schema(gen: &mut SchemaGenerator) -> Vec<KindInfo> {
    let Schema::Object(root) = ProgramPattern::json_schema(gen) else {
        unreachable!("an enum's schema is an object");
    };
    let variants = root
        .subschemas
        .and_then(|s| s.one_of)
        .expect("an enum of struct variants has one subschema per variant");
    variants
        .into_iter()
        .map(|v| {
            let Schema::Object(outer) = v else {
                unreachable!("a struct variant's schema is an object");
            };
            let description = outer.metadata.as_ref().and_then(|m| m.description.clone());
            let outer_obj = outer
                .object
                .expect("an externally tagged variant is an object");
            let (name, inner) = outer_obj
                .properties
                .into_iter()
                .next()
                .expect("an externally tagged variant has one property: its name");
            let Schema::Object(inner) = inner else {
                unreachable!("a struct variant's fields are an object");
            };
            let obj = inner.object.expect("a struct variant has fields");
            KindInfo {
                name,
                description,
                fields: obj.properties,
                required: obj.required.into_iter().collect(),
            }
        })
        .collect()
}

/// The program kinds (built once).
pub(crate) fn kinds() -> &'static [KindInfo] {
    static KINDS: OnceLock<Vec<KindInfo>> = OnceLock::new();
    KINDS.get_or_init(|| kinds_from_schema(&mut SchemaGenerator::default()))
}

/// Names of the fields every kind takes (built once).
fn common_fields() -> &'static BTreeSet<String> {
    static FIELDS: OnceLock<BTreeSet<String>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let Schema::Object(s) = ProgramCommon::json_schema(&mut SchemaGenerator::default()) else {
            unreachable!("a struct's schema is an object");
        };
        s.object
            .map(|o| o.properties.into_keys().collect())
            .unwrap_or_default()
    })
}

/// Start of an error message raised while reading a program that names a
/// place inside the program: `MARK sub-path MARK message`. The scenario
/// parser (`from_value`) joins the sub-path to the program's own path, so the
/// message reads `workload.programs[1].period_ms: ...`; serde itself only
/// knows the program's path.
pub(crate) const SUBPATH_MARK: char = '\u{1}';

/// A program error at `sub` (a path below the program; empty: the program).
#[derive(Debug)]
pub(crate) struct ProgramError {
    sub: String,
    msg: String,
}

impl ProgramError {
    fn new(sub: impl Into<String>, msg: impl Into<String>) -> Self {
        ProgramError {
            sub: sub.into(),
            msg: msg.into(),
        }
    }
    fn from_serde(e: serde_path_to_error::Error<serde_json::Error>, skip_variant: bool) -> Self {
        use serde_path_to_error::Segment;
        let mut sub = String::new();
        let mut skip = skip_variant;
        for seg in e.path().iter() {
            match seg {
                Segment::Enum { .. } if skip => skip = false,
                Segment::Seq { index } => sub.push_str(&format!("[{index}]")),
                Segment::Map { key } | Segment::Enum { variant: key } => {
                    if !sub.is_empty() {
                        sub.push('.');
                    }
                    sub.push_str(key);
                }
                Segment::Unknown => sub.push('?'),
            }
        }
        ProgramError::new(sub, e.into_inner().to_string())
    }
}

impl std::fmt::Display for ProgramError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SUBPATH_MARK}{}{SUBPATH_MARK}{}", self.sub, self.msg)
    }
}

/// `path` and `msg` of a deserialization error, with the sub-path of a
/// program error (see [`SUBPATH_MARK`]) joined to `path`.
pub(crate) fn join_subpath(path: &str, msg: &str) -> (String, String) {
    let Some(rest) = msg.strip_prefix(SUBPATH_MARK) else {
        return (path.to_string(), msg.to_string());
    };
    let Some((sub, msg)) = rest.split_once(SUBPATH_MARK) else {
        return (path.to_string(), rest.to_string());
    };
    let joined = if sub.is_empty() {
        path.to_string()
    } else if path.is_empty() || path == "." {
        sub.to_string()
    } else if sub.starts_with('[') {
        format!("{path}{sub}")
    } else {
        format!("{path}.{sub}")
    };
    (joined, msg.to_string())
}

fn backticked<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ProgramSpec {
    /// Read a program from its table.
    ///
    /// Two steps, because serde's own tagged enums report a field of another
    /// kind as an "unknown field" (without saying which kinds take it), lose
    /// the path of an error inside a variant (they buffer the table), and
    /// `flatten` cannot be combined with `deny_unknown_fields`:
    /// 1. take `kind`, then sort every other field into the fields every kind
    ///    takes, the fields of this kind, or an error of our own: a field of
    ///    other kinds names them, an unknown field lists the fields this kind
    ///    takes, a missing required field is named;
    /// 2. let the derived impls read each part, keeping their paths.
    ///
    /// A `null` field of another kind is absent, as a `null` optional field is.
    pub(crate) fn from_map(mut map: Map<String, Value>) -> Result<ProgramSpec, ProgramError> {
        let kinds = kinds();
        let known = || backticked(kinds.iter().map(|k| k.name.as_str()));
        let kind = match map.remove("kind") {
            None => return Err(ProgramError::new("", "missing field `kind`")),
            Some(Value::String(s)) => match kinds.iter().find(|k| k.name == s) {
                Some(k) => k,
                None => {
                    return Err(ProgramError::new(
                        "kind",
                        format!("unknown variant `{s}`, expected one of {}", known()),
                    ))
                }
            },
            Some(other) => {
                return Err(ProgramError::new(
                    "kind",
                    format!("{other} is not a kind; expected one of {}", known()),
                ))
            }
        };
        let common_names = common_fields();
        let mut common = Map::new();
        let mut own = Map::new();
        for (key, value) in map {
            if common_names.contains(&key) {
                common.insert(key, value);
            } else if kind.fields.contains_key(&key) {
                if !value.is_null() {
                    own.insert(key, value);
                }
            } else {
                let users: Vec<&str> = kinds
                    .iter()
                    .filter(|k| k.fields.contains_key(&key))
                    .map(|k| k.name.as_str())
                    .collect();
                if users.is_empty() {
                    let mut takes: Vec<&str> = common_names
                        .iter()
                        .chain(kind.fields.keys())
                        .map(String::as_str)
                        .chain(["kind"])
                        .collect();
                    takes.sort_unstable();
                    return Err(ProgramError::new(
                        "",
                        format!(
                            "unknown field `{key}`, expected one of {}",
                            backticked(takes)
                        ),
                    ));
                }
                if !value.is_null() {
                    return Err(ProgramError::new(
                        key,
                        format!(
                            "not used by kind \"{}\" (used by: {})",
                            kind.name,
                            users.join(", ")
                        ),
                    ));
                }
            }
        }
        if let Some(missing) = kind.required.iter().find(|f| !own.contains_key(*f)) {
            return Err(ProgramError::new(
                missing.as_str(),
                format!("required for kind \"{}\"", kind.name),
            ));
        }
        let common: ProgramCommon = serde_path_to_error::deserialize(Value::Object(common))
            .map_err(|e| ProgramError::from_serde(e, false))?;
        let mut tagged = Map::new();
        tagged.insert(kind.name.clone(), Value::Object(own));
        let pattern: ProgramPattern = serde_path_to_error::deserialize(Value::Object(tagged))
            .map_err(|e| ProgramError::from_serde(e, true))?;
        Ok(ProgramSpec { common, pattern })
    }
}

impl<'de> Deserialize<'de> for ProgramSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(d)?;
        ProgramSpec::from_map(map).map_err(D::Error::custom)
    }
}

impl Serialize for ProgramSpec {
    /// One flat table: `name`, `kind`, the kind's fields, the other fields.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(mut common) =
            serde_json::to_value(&self.common).map_err(S::Error::custom)?
        else {
            return Err(S::Error::custom("a program's common fields form a table"));
        };
        let Value::Object(tagged) =
            serde_json::to_value(&self.pattern).map_err(S::Error::custom)?
        else {
            return Err(S::Error::custom("a program's pattern is a table"));
        };
        let mut m = s.serialize_map(None)?;
        if let Some(name) = common.remove("name") {
            m.serialize_entry("name", &name)?;
        }
        for (kind, fields) in tagged {
            m.serialize_entry("kind", &kind)?;
            if let Value::Object(fields) = fields {
                for (k, v) in fields {
                    m.serialize_entry(&k, &v)?;
                }
            }
        }
        for (k, v) in common {
            m.serialize_entry(&k, &v)?;
        }
        m.end()
    }
}

impl JsonSchema for ProgramSpec {
    fn schema_name() -> String {
        "ProgramSpec".into()
    }

    /// One object with every field of every kind (each field's description
    /// says which kinds take it) and `kind` referring to `ProgramKind`, the
    /// list of kinds: the flat table a scenario file writes.
    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        let Schema::Object(mut obj) = ProgramCommon::json_schema(gen) else {
            unreachable!("a struct's schema is an object");
        };
        obj.metadata().description = Some("A program.".into());
        let kinds = kinds_from_schema(gen);
        let kind_schema = Schema::Object(SchemaObject {
            metadata: Some(Box::new(Metadata {
                description: Some("Program patterns.".into()),
                ..Default::default()
            })),
            subschemas: Some(Box::new(SubschemaValidation {
                one_of: Some(
                    kinds
                        .iter()
                        .map(|k| {
                            Schema::Object(SchemaObject {
                                metadata: Some(Box::new(Metadata {
                                    description: k.description.clone(),
                                    ..Default::default()
                                })),
                                instance_type: Some(InstanceType::String.into()),
                                enum_values: Some(vec![Value::String(k.name.clone())]),
                                ..Default::default()
                            })
                        })
                        .collect(),
                ),
                ..Default::default()
            })),
            ..Default::default()
        });
        gen.definitions_mut()
            .insert("ProgramKind".into(), kind_schema);
        let kind_ref = Schema::Object(SchemaObject {
            metadata: Some(Box::new(Metadata {
                description: Some("Pattern.".into()),
                ..Default::default()
            })),
            subschemas: Some(Box::new(SubschemaValidation {
                all_of: Some(vec![Schema::new_ref(format!(
                    "{}ProgramKind",
                    gen.settings().definitions_path
                ))]),
                ..Default::default()
            })),
            ..Default::default()
        });
        let o = obj.object();
        o.properties.insert("kind".into(), kind_ref);
        o.required.insert("kind".into());
        for k in kinds {
            for (field, schema) in k.fields {
                o.properties.entry(field).or_insert(schema);
            }
        }
        Schema::Object(obj)
    }
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

/// One phase of a `phases` program: exactly one action (`compute_ms`,
/// `sleep_ms`, `barrier`, `run_for_ms`, `shared_barrier`, `suspend`,
/// `resume`, `lock`, `unlock`, `wait`, `signal`, `broad`, `sync`, `post`,
/// `pend`, `timer`, `yield`, `cpus`, `fork`) with its parameters. Names of
/// synchronisation objects are shared by every program of the workload.
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
    /// Busy this many ms of wall time, whatever the CPU, its frequency and
    /// preemptions (rt-app `runtime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_for_ms: Option<f64>,
    /// Wait at this workload-wide barrier: it opens when every live thread
    /// whose phases name it has arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_barrier: Option<String>,
    /// Sleep until another thread resumes this name (rt-app `suspend`: a
    /// `wait` on the condition variable of this name under the mutex of this
    /// name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<String>,
    /// Wake every thread suspended on this name; nothing happens if none is
    /// (rt-app `resume`: a `broad` under the mutex of this name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    /// Take this mutex (sleeping while another thread holds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// Release this mutex (it goes to the longest waiter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlock: Option<String>,
    /// Wait on this condition variable, releasing `mutex` meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    /// The mutex of a `wait` or `sync` phase (held by the thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutex: Option<String>,
    /// Wake the longest waiter of this condition variable (lost if none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Wake every waiter of this condition variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broad: Option<String>,
    /// Signal this condition variable, then wait on it with `mutex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<String>,
    /// Post this counting semaphore (a post with nobody pending is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<String>,
    /// Pend on this counting semaphore (sleep while it is zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pend: Option<String>,
    /// Sleep until the next tick of this periodic timer (ticks at t0 + k ×
    /// `timer_ms`, t0 its first arrival; a tick already past is not waited
    /// for). One name is one timer for the whole workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<String>,
    /// Period of the `timer`, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_ms: Option<f64>,
    /// sched_yield (`true`).
    #[serde(default, rename = "yield", skip_serializing_if = "Option::is_none")]
    pub yield_: Option<bool>,
    /// Set the thread's affinity to these CPUs from here on
    /// (sched_setaffinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<u32>>,
    /// Start a new instance of the program of this name now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<String>,
}

/// JSON Schema of scenario files.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(ScenarioSpec);
    serde_json::to_string_pretty(&schema).expect("schema serialises")
}

fn d_os_rt_runtime() -> f64 {
    950.0
}
fn d_os_rt_period() -> f64 {
    1000.0
}
fn d_os_rr() -> f64 {
    100.0
}
fn d_os_fs_runtime() -> f64 {
    50.0
}
fn d_os_fs_period() -> f64 {
    1000.0
}

/// Operating-system settings of the classes above fair (Linux 6.18's
/// defaults; every value's source is in docs/classes.md).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OsSpec {
    /// `sched_rt_runtime_us` in ms (default 950): with `rt_period_ms`, the
    /// share of each CPU that SCHED_DEADLINE tasks may reserve (admission
    /// control).
    #[serde(default = "d_os_rt_runtime")]
    pub rt_runtime_ms: f64,
    /// `sched_rt_period_us` in ms (default 1000).
    #[serde(default = "d_os_rt_period")]
    pub rt_period_ms: f64,
    /// `sched_rr_timeslice_ms`: SCHED_RR timeslice, ms (default 100).
    #[serde(default = "d_os_rr")]
    pub rr_timeslice_ms: f64,
    /// Whether each CPU has the fair server (a deadline server that gives the
    /// fair class `fair_server_runtime_ms` every `fair_server_period_ms`
    /// when rt or deadline tasks would starve it; Linux 6.12+). Default true.
    #[serde(default = "d_true")]
    pub fair_server: bool,
    /// Fair server runtime, ms (default 50).
    #[serde(default = "d_os_fs_runtime")]
    pub fair_server_runtime_ms: f64,
    /// Fair server period, ms (default 1000).
    #[serde(default = "d_os_fs_period")]
    pub fair_server_period_ms: f64,
}

impl Default for OsSpec {
    fn default() -> Self {
        OsSpec {
            rt_runtime_ms: d_os_rt_runtime(),
            rt_period_ms: d_os_rt_period(),
            rr_timeslice_ms: d_os_rr(),
            fair_server: true,
            fair_server_runtime_ms: d_os_fs_runtime(),
            fair_server_period_ms: d_os_fs_period(),
        }
    }
}
