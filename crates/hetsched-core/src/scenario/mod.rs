//! Scenario files: the serde schema (the one source of truth; `hetsched
//! schema` exports it as JSON Schema), parsing with exact error locations,
//! `--set` overrides, preset resolution, validation, and building a run.
//!
//! Input never panics the engine: a TOML syntax error names
//! `file:line:column`; a bad value names its path
//! (`machine.cpus[3].type: unknown cpu type "fastt"; known: big, little`).

pub mod dynamic;
mod machine;
pub mod presets;
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
use std::sync::Arc;

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
    let vms = crate::scenario::vm::build_vms(&spec.vms, &machine, &mut tasks, &mut programs)?;
    Ok(Parts {
        machine,
        tasks,
        programs,
        cpusets,
        vms,
    })
}
