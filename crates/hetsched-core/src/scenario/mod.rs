//! Scenario files: the serde schema (the one source of truth; `hetsched
//! schema` exports it as JSON Schema), parsing with exact error locations,
//! `--set` overrides, preset resolution, validation, and building a run.
//!
//! Input never panics the engine: a TOML syntax error names
//! `file:line:column`; a bad value names its path
//! (`machine.cpus[3].type: unknown cpu type "fastt"; known: big, little`).

pub mod dynamic;
mod machine;
pub mod os;
pub mod presets;
#[cfg(test)]
mod program_tests;
mod spec;
pub mod vm;
mod workload;

pub use machine::build_cpusets;
pub(crate) use machine::build_machine;
pub use spec::*;
pub(crate) use workload::build_workload;

use crate::error::{at, SimError};
use crate::hw::{Cpu, CpuType, FreqDomain, Machine, PState, PowerModel};
use crate::os::{nice_to_weight, Counters, CpuSet, Cpuset, Task, TaskState};
use crate::policy::{self, Agent, Governor, Scheduler};
use crate::sim::Setup;
use crate::time::SimTime;
use crate::workload::{ComputeParams, Op, Program};
use serde_json::Value;
use std::collections::BTreeMap;

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
    /// TOML (converted to a JSON value).
    Toml,
    /// JSON.
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
            toml_to_json(v, "", source)
        }
        Format::Json => serde_json::from_str(text).map_err(|e| {
            // `NaN`, `Infinity` and `-Infinity` (as Python's json writes them)
            // are no JSON: name the field that holds one.
            if let Some(err) = json_non_finite(text) {
                return err;
            }
            SimError::Scenario(format!(
                "{source}:{}:{}: JSON syntax error: {e}",
                e.line(),
                e.column()
            ))
        }),
    }
}

/// A string no scenario holds, as JSON text (`\u0000` escaped) and decoded.
const NON_FINITE_MARK_JSON: &str = "\\u0000non-finite:";
const NON_FINITE_MARK: &str = "\u{0}non-finite:";

/// For JSON text that fails to parse: if bare `NaN`/`Infinity`/`-Infinity`
/// tokens are the reason, the error naming the first field that holds one.
fn json_non_finite(text: &str) -> Option<SimError> {
    let mut out = String::with_capacity(text.len() + 32);
    let mut in_str = false;
    let mut escaped = false;
    let mut found = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if c == '"' {
            in_str = true;
        } else {
            let tok = ["-Infinity", "Infinity", "NaN"]
                .into_iter()
                .find(|t| rest.starts_with(t));
            if let Some(t) = tok {
                out.push('"');
                out.push_str(NON_FINITE_MARK_JSON);
                out.push_str(t);
                out.push('"');
                rest = &rest[t.len()..];
                found = true;
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !found {
        return None;
    }
    let v: Value = serde_json::from_str(&out).ok()?;
    find_mark(&v, "", NON_FINITE_MARK).map(|(path, tok)| {
        let x = match tok.as_str() {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            _ => f64::NEG_INFINITY,
        };
        non_finite(&path, x)
    })
}

/// The path and token of the first marked string in `v`.
fn find_mark(v: &Value, path: &str, mark: &str) -> Option<(String, String)> {
    match v {
        Value::String(s) => s
            .strip_prefix(mark)
            .map(|t| (path.to_string(), t.to_string())),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| find_mark(x, &format!("{path}[{i}]"), mark)),
        Value::Object(o) => o
            .iter()
            .find_map(|(k, x)| find_mark(x, &child_path(path, k), mark)),
        _ => None,
    }
}

/// `path` extended by a table key, as the scenario's error messages write it.
fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The error for a non-finite number at `path`: JSON has no such numbers, and
/// converting one would give `null`, which an optional field reads as "absent".
fn non_finite(path: &str, x: f64) -> SimError {
    let shown = if x.is_nan() {
        "nan".to_string()
    } else if x > 0.0 {
        "inf".to_string()
    } else {
        "-inf".to_string()
    };
    let at = if path.is_empty() { "value" } else { path };
    SimError::Scenario(format!(
        "{at}: {shown} is not allowed; numbers must be finite"
    ))
}

/// Convert parsed TOML to JSON, refusing non-finite numbers with their field
/// path (`serde_json` would turn them into `null` and the field's default
/// would be used silently).
pub fn toml_to_json(v: toml::Value, path: &str, source: &str) -> Result<Value, SimError> {
    Ok(match v {
        toml::Value::Float(x) => {
            if !x.is_finite() {
                return Err(non_finite(path, x));
            }
            Value::from(x)
        }
        toml::Value::Table(t) => {
            let mut out = serde_json::Map::with_capacity(t.len());
            for (k, item) in t {
                let p = child_path(path, &k);
                out.insert(k, toml_to_json(item, &p, source)?);
            }
            Value::Object(out)
        }
        toml::Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for (i, item) in a.into_iter().enumerate() {
                out.push(toml_to_json(item, &format!("{path}[{i}]"), source)?);
            }
            Value::Array(out)
        }
        other => {
            serde_json::to_value(other).map_err(|e| SimError::Scenario(format!("{source}: {e}")))?
        }
    })
}

/// One segment of a dotted path.
#[derive(Clone, Debug, PartialEq)]
pub enum Seg {
    /// A table field name (`workload`, `programs`).
    Key(String),
    /// A list index in brackets (`[0]`), 0-based.
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

/// Parse an override value for `path`: a TOML literal, or else a bare string.
/// A non-finite number (`nan`, `inf`, `-inf`, also inside a list or table) is
/// an error naming the field.
pub fn parse_literal(path: &str, v: &str) -> Result<Value, SimError> {
    match toml::from_str::<toml::Table>(&format!("v = {v}")) {
        Ok(mut t) => match t.remove("v") {
            Some(x) => toml_to_json(x, path, "--set"),
            None => Ok(Value::String(v.to_string())),
        },
        Err(_) => Ok(Value::String(v.to_string())),
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
    parse_interruptible(text, source, fmt, overrides, &mut || Ok(()))
}

/// [`parse`], asking `stop` whether to give up while the threads are built
/// for validation: a Ctrl-C stops the loading of a scenario of a million
/// threads too.
pub fn parse_interruptible(
    text: &str,
    source: &str,
    fmt: Format,
    overrides: &[(String, String)],
    stop: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Scenario, SimError> {
    let mut v = parse_value(text, source, fmt)?;
    if !v.is_object() {
        return Err(SimError::Scenario(format!(
            "{source}: a scenario is a table of fields"
        )));
    }
    for (path, val) in overrides {
        set_path(&mut v, path, parse_literal(path, val)?)?;
    }
    from_value_interruptible(v, stop)
}

/// Resolve presets in a JSON value and validate it.
pub fn from_value(v: Value) -> Result<Scenario, SimError> {
    from_value_interruptible(v, &mut || Ok(()))
}

/// [`from_value`], asking `stop` whether to give up while the threads are
/// built for validation (see [`Scenario::build_interruptible`]).
pub fn from_value_interruptible(
    mut v: Value,
    stop: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Scenario, SimError> {
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
        // A program's errors may name a field below the program.
        let (path, inner) = spec::join_subpath(&path, &e.into_inner().to_string());
        if path == "." || path.is_empty() {
            SimError::Scenario(inner)
        } else {
            SimError::Scenario(format!("{path}: {inner}"))
        }
    })?;
    let mut warnings = Vec::new();
    let parts = build_parts(&spec, &mut warnings, stop)?;
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
        self.build_interruptible(sched, extra_agents, &mut || Ok(()))
    }
    /// [`Scenario::build`], asking `stop` now and then while the threads are
    /// built (every few thousand) whether to give up: an error from it ends
    /// the build with [`SimError::Interrupted`] carrying its message. A
    /// million threads take seconds to build on a loaded machine; this is
    /// how a Ctrl-C stops them.
    pub fn build_interruptible(
        &self,
        sched: Option<Box<dyn Scheduler>>,
        extra_agents: Vec<Box<dyn Agent>>,
        stop: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<Setup, SimError> {
        let mut w = Vec::new();
        let Parts {
            machine,
            tasks,
            programs,
            cpusets,
            vms,
        } = build_parts(&self.spec, &mut w, stop)?;
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
        let classes = os::build_os(&self.spec)?;
        os::check_classes(
            &self.spec,
            &classes,
            &machine,
            &tasks,
            scheduler.uses_dsqs(),
        )?;
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
            classes,
        })
    }
}

/// The validated `[dynamic]` section, if any.
fn build_dynamic(
    spec: &ScenarioSpec,
    machine: &Machine,
) -> Result<Option<crate::hw::dynamic::DynConfig>, SimError> {
    spec.dynamic
        .as_ref()
        .map(|d| crate::scenario::dynamic::build(d, machine))
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
    vms: Vec<crate::sim::VmSetup>,
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

/// Memory one thread costs a run, bytes: the Python process grows by about
/// 2.5 KiB per thread (docs/performance.md, "Memory grows with tasks": the
/// engine's 1.24 KiB plus the result's rows).
pub const BYTES_PER_THREAD: u64 = 2560;

/// The memory this process may use, bytes: `MemTotal` of /proc/meminfo, or a
/// smaller cgroup v2 `memory.max`. `None` where neither can be read.
pub fn machine_memory_bytes() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb.saturating_mul(1024))
    });
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok());
    match (total, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Threads of all programs, the host's and the VMs' guests'.
fn total_threads(spec: &ScenarioSpec) -> u64 {
    spec.workload
        .programs
        .iter()
        .chain(spec.vms.iter().flat_map(|vm| vm.programs.iter()))
        .map(|p| u64::from(p.common.threads.unwrap_or(1)))
        .sum()
}

/// Refuse a scenario whose threads would need more memory than `available`
/// bytes, before anything is allocated.
fn check_memory(threads: u64, available: Option<u64>) -> Result<(), SimError> {
    let need = threads.saturating_mul(BYTES_PER_THREAD);
    match available {
        Some(have) if need > have => Err(at(
            "workload",
            format!(
                "{threads} threads would need about {:.1} GiB ({BYTES_PER_THREAD} bytes per thread); \
                 this machine has {:.1} GiB",
                need as f64 / GIB,
                have as f64 / GIB
            ),
        )),
        _ => Ok(()),
    }
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Build and validate the machine, cpusets, tasks and programs.
fn build_parts(
    spec: &ScenarioSpec,
    warnings: &mut Vec<String>,
    stop: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Parts, SimError> {
    positive("duration_s", spec.duration_s)?;
    if spec.duration_s > 1e7 {
        return Err(at(
            "duration_s",
            format!("{} s is too long; at most 1e7 s", spec.duration_s),
        ));
    }
    check_memory(total_threads(spec), machine_memory_bytes())?;
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
        let mut names = vec![(format!("{base}.class"), p.common.class.clone())];
        let mut feats = p
            .common
            .feature
            .iter()
            .map(|f| (format!("{base}.feature"), f.clone()))
            .collect::<Vec<_>>();
        let phases = match &p.pattern {
            ProgramPattern::Phases { phases, .. } => phases.as_slice(),
            _ => &[],
        };
        for (j, ph) in phases.iter().enumerate() {
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
    let (mut tasks, mut programs) = build_workload(&spec.workload, &machine, &cpusets, stop)?;
    let vms = crate::scenario::vm::build_vms(&spec.vms, &machine, &mut tasks, &mut programs, stop)?;
    Ok(Parts {
        machine,
        tasks,
        programs,
        cpusets,
        vms,
    })
}

#[cfg(test)]
mod nonfinite_tests {
    use super::*;

    const BASE: &str = r#"
duration_s = 1.0
[machine]
preset = "big-little-4+4"
[[workload.programs]]
name = "p"
kind = "parallel"
threads = 6
work_ms = 10
"#;

    fn err(text: &str, overrides: &[(&str, &str)]) -> String {
        let ov: Vec<(String, String)> = overrides
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        match parse(text, "t.toml", Format::Toml, &ov) {
            Ok(_) => panic!("accepted: {text} {overrides:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn base_is_valid() {
        parse(BASE, "t.toml", Format::Toml, &[]).expect("base scenario");
    }

    #[test]
    fn toml_nonfinite_names_the_field() {
        let text = BASE.replace("threads = 6", "threads = nan");
        let e = err(&text, &[]);
        assert!(
            e.contains("workload.programs[0].threads: nan is not allowed; numbers must be finite"),
            "{e}"
        );
        let text = format!("{BASE}affinity = [0, inf]\n");
        let e = err(&text, &[]);
        assert!(
            e.contains("workload.programs[0].affinity[1]: inf is not allowed"),
            "{e}"
        );
        let e = err(&BASE.replace("duration_s = 1.0", "duration_s = -inf"), &[]);
        assert!(e.contains("duration_s: -inf is not allowed"), "{e}");
    }

    #[test]
    fn override_nonfinite_names_the_field() {
        for (lit, shown) in [("nan", "nan"), ("+inf", "inf"), ("-inf", "-inf")] {
            let e = err(BASE, &[("workload.programs[0].threads", lit)]);
            assert!(
                e.contains(&format!(
                    "workload.programs[0].threads: {shown} is not allowed"
                )),
                "{e}"
            );
        }
        let e = err(BASE, &[("workload.programs[0].affinity", "[1, nan]")]);
        assert!(
            e.contains("workload.programs[0].affinity[1]: nan is not allowed"),
            "{e}"
        );
        let e = err(BASE, &[("machine", "{ x = { y = inf } }")]);
        assert!(e.contains("machine.x.y: inf is not allowed"), "{e}");
        // A bare word is still a string.
        assert_eq!(
            parse_literal("a", "cfs").unwrap(),
            Value::String("cfs".into())
        );
    }

    #[test]
    fn json_nonfinite_names_the_field() {
        let text = r#"{"duration_s": 1.0, "name": "NaN \" NaN",
            "machine": {"preset": "smp-4"},
            "workload": {"programs": [{"kind": "parallel", "work_ms": 10,
                                       "affinity": [0, -Infinity]}]}}"#;
        let e = match parse(text, "t.json", Format::Json, &[]) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("workload.programs[0].affinity[1]: -inf is not allowed"),
            "{e}"
        );
        // Other syntax errors keep their line and column.
        let e = match parse("{\"a\": NaX}", "t.json", Format::Json, &[]) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.starts_with("t.json:1:"), "{e}");
    }

    #[test]
    fn huge_machine_refused_before_building() {
        let text = BASE.replace(
            "preset = \"big-little-4+4\"",
            "[machine.types.b]\n[[machine.clusters]]\ntype = \"b\"\ncores = 1000000000\ncount = 4000000000\nsmt = 8",
        );
        let start = std::time::Instant::now();
        let e = err(&text, &[]);
        assert!(e.contains("CPUs; at most 65536"), "{e}");
        assert!(e.contains("32000000000000000000 CPUs"), "{e}");
        assert!(start.elapsed().as_secs_f64() < 1.0);
    }

    #[test]
    fn memory_estimate_refuses_what_the_machine_cannot_hold() {
        assert!(check_memory(1000, Some(1 << 30)).is_ok());
        assert!(check_memory(u64::MAX, None).is_ok());
        let e = check_memory(10_000_000, Some(1 << 30))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("10000000 threads would need about 23.8 GiB"),
            "{e}"
        );
        assert!(e.contains("this machine has 1.0 GiB"), "{e}");
        // 2 000 programs of 10⁷ threads need 51 TB: refused on any machine.
        let mut text = String::from("duration_s = 1.0\n[machine]\npreset = \"big-little-4+4\"\n");
        for i in 0..2000 {
            text.push_str(&format!(
                "[[workload.programs]]\nname = \"p{i}\"\nkind = \"parallel\"\nthreads = 10000000\nwork_ms = 10\n"
            ));
        }
        let e = err(&text, &[]);
        assert!(
            e.contains("workload: 20000000000 threads would need about"),
            "{e}"
        );
    }
}
