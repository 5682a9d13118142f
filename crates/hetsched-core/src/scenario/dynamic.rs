//! Dynamic processors in a scenario: the `[dynamic]` section, its
//! validation, and the reconfiguration operations policies and scripts ask
//! for.
//!
//! A scenario without `[dynamic]` runs exactly as before: no CPU ever goes
//! offline and nothing here is consulted. With it, CPUs can be taken offline
//! and brought back (`offline` / `online`) and contiguous blocks of CPUs can
//! be fused into one faster execution context (`fuse`, undone by `split`),
//! each through a mechanism whose cost model is [`crate::hw::reconfig`]. The
//! engine side is `sim::dynamic`; `docs/dynamic.md` describes the semantics.
//!
//! Hardware whose disabled contexts still take interrupts (Chameleon §4.1,
//! last paragraph) reconfigures with the `halt` mechanism instead of proxies:
//! a physical core as an object of its SMT siblings (`fusion_rule =
//! "siblings"`: activating it idles the other hyperthreads, so the thread runs
//! un-shared) or a Turbo-Boost-like group whose other CPUs sleep while the
//! representative runs at the level's speedup.

use crate::error::at;
use crate::error::SimError;
use crate::hw::dynamic::{DynConfig, FusionRule, ReconfigOp};
use crate::hw::reconfig::{Mechanism, ReconfigCosts};
use crate::hw::Machine;
use crate::time::SimTime;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn d_mech() -> String {
    "proxy-apic".into()
}
fn d_costs() -> String {
    "chameleon".into()
}
fn d_tlb() -> f64 {
    0.5
}
fn d_proxy_ipi() -> f64 {
    2.5
}
fn d_rule() -> String {
    "contiguous".into()
}

/// The `[dynamic]` section of a scenario.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DynamicSpec {
    /// Default reconfiguration mechanism: `proxy-apic`, `proxy-logical`,
    /// `hotplug`, `parallel-hotplug` or `deferred-hotplug`.
    #[serde(default = "d_mech")]
    pub mechanism: String,
    /// Step-cost calibration: `chameleon` (the default costs),
    /// `hotos-prototype` (the HotPar 2010 prototype's slower proxies) or
    /// `linux-6.1-tcg` (hotplug steps fitted to Linux 6.1 measured in a
    /// software-emulated VM, `data/hotplug/linux-6.1-tcg.json`).
    #[serde(default = "d_costs")]
    pub costs: String,
    /// Deferred hotplug: how long a configuration must last before the real
    /// hotplug runs, ms (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred_threshold_ms: Option<f64>,
    /// Background inter-processor interrupts per second per CPU while a
    /// workload runs (Chameleon §2.2: 40 for pmake). 0 turns the accounting off.
    #[serde(default)]
    pub ipi_per_s: f64,
    /// Share of those IPIs that are TLB shootdowns (the rest are rescheduling
    /// IPIs). The papers give no split; 0.5 is an assumption.
    #[serde(default = "d_tlb")]
    pub tlb_share: f64,
    /// Linux's lazy-TLB mode: a CPU that goes idle keeps the address space it
    /// last ran and leaves that space's CPU mask at the first TLB shootdown
    /// it receives (`leave_mm`), so a proxied CPU gets at most one shootdown
    /// per proxied stretch: `1 − exp(−ipi_per_s × tlb_share × d)` expected
    /// for a stretch of `d` seconds, instead of the rate times `d`. Off by
    /// default.
    #[serde(default)]
    pub lazy_tlb: bool,
    /// Background RCU callbacks per second per CPU (Chameleon §2.2: 140 for pmake).
    #[serde(default)]
    pub rcu_per_s: f64,
    /// CPU time a proxy spends handling one IPI in proxy context, µs
    /// (assumed equal to a context switch, 2.5 µs, Chameleon §5.3).
    #[serde(default = "d_proxy_ipi")]
    pub proxy_ipi_us: f64,
    /// Which CPUs may fuse: `contiguous` (consecutive ids within a node, as
    /// Chameleon's emulation), `aligned` (also starting at a multiple of the
    /// level), `any` (any CPUs of one node) or `siblings` (SMT siblings of
    /// one physical core, the first listed representing the object: a core
    /// as a dynamic processor, Chameleon §5.5).
    #[serde(default = "d_rule")]
    pub fusion_rule: String,
    /// Mechanism `halt`: time to wake a halted CPU, µs — the exit latency of
    /// the sleep state it waits in (default 3, Linux `intel_idle`'s C1 on
    /// Nehalem/Westmere; a core parked for a Turbo-Boost-like speedup sleeps
    /// deeper: C3 20, C6 200 in the same table).
    #[serde(default = "halt_exit_default")]
    pub halt_exit_us: f64,
    /// Fusion levels (number of CPUs fused) and the speedup of each workload
    /// class on a fused context of that level, over one native CPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fusion: Vec<FusionLevelSpec>,
    /// Reconfigurations at fixed times (as `echo 0 > .../online` from a shell).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<ReconfigEventSpec>,
}

/// One fusion level.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FusionLevelSpec {
    /// Number of CPUs fused (2 or more).
    pub level: u32,
    /// Speedup per workload class (`default` for the others) over one native
    /// CPU; Chameleon Table 2: duty cycle over the 50% baseline.
    pub speedup: BTreeMap<String, f64>,
}

/// A scripted reconfiguration.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReconfigEventSpec {
    /// When, ms after the start.
    pub at_ms: f64,
    /// `offline`, `online`, `fuse` (the first CPU represents the object) or
    /// `split` (give the representative CPU).
    pub op: String,
    /// The CPUs.
    pub cpus: Vec<u32>,
    /// Mechanism (default: the section's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<String>,
}

fn halt_exit_default() -> f64 {
    ReconfigCosts::default().halt_exit_us
}

/// Validate a `[dynamic]` section against the machine.
pub fn build(spec: &DynamicSpec, m: &Machine) -> Result<DynConfig, SimError> {
    let mechanism = Mechanism::parse(&spec.mechanism).map_err(|e| at("dynamic.mechanism", e))?;
    let mut costs = match spec.costs.as_str() {
        "chameleon" => ReconfigCosts::default(),
        "hotos-prototype" => ReconfigCosts::hotos_prototype(),
        "linux-6.1-tcg" => ReconfigCosts::linux_6_1_tcg(),
        other => {
            return Err(at(
                "dynamic.costs",
                format!(
                    "unknown cost calibration \"{other}\"; allowed: chameleon, hotos-prototype, linux-6.1-tcg"
                ),
            ))
        }
    };
    if let Some(ms) = spec.deferred_threshold_ms {
        if !ms.is_finite() || ms <= 0.0 || ms > 1e6 {
            return Err(at(
                "dynamic.deferred_threshold_ms",
                format!("{ms} is out of range; allowed > 0 to 1e6 ms"),
            ));
        }
        costs.deferred_threshold_us = ms * 1e3;
    }
    costs.check("dynamic.costs").map_err(SimError::Scenario)?;
    let rate = |path: &str, v: f64| -> Result<(), SimError> {
        if !v.is_finite() || !(0.0..=1e6).contains(&v) {
            return Err(at(path, format!("{v} is out of range; allowed 0 to 1e6")));
        }
        Ok(())
    };
    rate("dynamic.ipi_per_s", spec.ipi_per_s)?;
    rate("dynamic.rcu_per_s", spec.rcu_per_s)?;
    if !spec.tlb_share.is_finite() || !(0.0..=1.0).contains(&spec.tlb_share) {
        return Err(at(
            "dynamic.tlb_share",
            format!("{} is out of range; allowed 0 to 1", spec.tlb_share),
        ));
    }
    if !spec.proxy_ipi_us.is_finite() || !(0.0..=1e6).contains(&spec.proxy_ipi_us) {
        return Err(at(
            "dynamic.proxy_ipi_us",
            format!("{} is out of range; allowed 0 to 1e6 µs", spec.proxy_ipi_us),
        ));
    }
    let rule = match spec.fusion_rule.as_str() {
        "contiguous" => FusionRule::Contiguous,
        "aligned" => FusionRule::Aligned,
        "any" => FusionRule::Any,
        "siblings" => FusionRule::Siblings,
        other => {
            return Err(at(
                "dynamic.fusion_rule",
                format!(
                    "unknown fusion rule \"{other}\"; allowed: contiguous, aligned, any, siblings"
                ),
            ))
        }
    };
    // Hardware threads of the widest core (1 without SMT).
    let max_core = m
        .cpus
        .iter()
        .map(|c| c.siblings.len() + 1)
        .max()
        .unwrap_or(1);
    if rule == FusionRule::Siblings && max_core < 2 {
        return Err(at(
            "dynamic.fusion_rule",
            "\"siblings\" fuses the SMT siblings of a core, but no core of the machine has more than one hardware thread (give the clusters smt = 2, or cpus a shared core)",
        ));
    }
    if !spec.halt_exit_us.is_finite() || !(0.0..=1e6).contains(&spec.halt_exit_us) {
        return Err(at(
            "dynamic.halt_exit_us",
            format!("{} is out of range; allowed 0 to 1e6 µs", spec.halt_exit_us),
        ));
    }
    costs.halt_exit_us = spec.halt_exit_us;
    let max_node = {
        let mut per: BTreeMap<u32, usize> = BTreeMap::new();
        for c in &m.cpus {
            *per.entry(c.node).or_default() += 1;
        }
        per.values().copied().max().unwrap_or(0)
    };
    let mut fusion = Vec::new();
    for (i, f) in spec.fusion.iter().enumerate() {
        let p = format!("dynamic.fusion[{i}]");
        let level = f.level as usize;
        if level < 2 {
            return Err(at(
                format!("{p}.level"),
                format!("{level} is not allowed; a fused object has at least 2 cpus"),
            ));
        }
        if level > max_node {
            return Err(at(
                format!("{p}.level"),
                format!("{level} cpus is larger than any node of the machine (largest node: {max_node} cpus)"),
            ));
        }
        if rule == FusionRule::Siblings && level > max_core {
            return Err(at(
                format!("{p}.level"),
                format!("{level} cpus is more than any core's hardware threads (fusion_rule = \"siblings\"; the widest core has {max_core})"),
            ));
        }
        if fusion.iter().any(|(l, _)| *l == level) {
            return Err(at(
                format!("{p}.level"),
                format!("level {level} is given twice"),
            ));
        }
        let default = f.speedup.get("default").copied().unwrap_or(1.0);
        let mut per_class = vec![default; m.classes.len()];
        for (class, &s) in &f.speedup {
            if !s.is_finite() || s <= 0.0 || s > 100.0 {
                return Err(at(
                    format!("{p}.speedup.{class}"),
                    format!("{s} is out of range; allowed > 0 to 100"),
                ));
            }
            match m.class_id(class) {
                Some(id) => per_class[id] = s,
                None => {
                    return Err(at(
                        format!("{p}.speedup.{class}"),
                        format!(
                            "unknown workload class \"{class}\"; known: {}",
                            m.classes.join(", ")
                        ),
                    ))
                }
            }
        }
        fusion.push((level, per_class));
    }
    let mut cfg = DynConfig {
        costs,
        mechanism,
        ipi_per_s: spec.ipi_per_s,
        tlb_share: spec.tlb_share,
        lazy_tlb: spec.lazy_tlb,
        rcu_per_s: spec.rcu_per_s,
        proxy_ipi: SimTime::from_ns_f64(spec.proxy_ipi_us * 1e3),
        rule,
        fusion,
        events: Vec::new(),
    };
    for (i, e) in spec.events.iter().enumerate() {
        let p = format!("dynamic.events[{i}]");
        if !e.at_ms.is_finite() || e.at_ms < 0.0 || e.at_ms > 1e10 {
            return Err(at(
                format!("{p}.at_ms"),
                format!("{} is out of range; allowed 0 to 1e10 ms", e.at_ms),
            ));
        }
        let mut cpus = Vec::new();
        for (j, &c) in e.cpus.iter().enumerate() {
            let c = c as usize;
            if c >= m.ncpus() {
                return Err(at(
                    format!("{p}.cpus[{j}]"),
                    format!("cpu {c} does not exist (machine has {} cpus)", m.ncpus()),
                ));
            }
            if cpus.contains(&c) {
                return Err(at(
                    format!("{p}.cpus[{j}]"),
                    format!("cpu {c} is named twice"),
                ));
            }
            cpus.push(c);
        }
        if cpus.is_empty() {
            return Err(at(format!("{p}.cpus"), "empty cpu list"));
        }
        let op = match e.op.as_str() {
            "offline" => ReconfigOp::Offline(cpus),
            "online" => ReconfigOp::Online(cpus),
            "fuse" => {
                cfg.check_fusion(&cpus, m)
                    .map_err(|msg| at(format!("{p}.cpus"), msg))?;
                ReconfigOp::Fuse(cpus)
            }
            "split" => {
                if cpus.len() != 1 {
                    return Err(at(
                        format!("{p}.cpus"),
                        "split takes the representative cpu of the fused object only",
                    ));
                }
                ReconfigOp::Split(cpus[0])
            }
            other => {
                return Err(at(
                    format!("{p}.op"),
                    format!("unknown operation \"{other}\"; allowed: offline, online, fuse, split"),
                ))
            }
        };
        let mech = match &e.mechanism {
            None => None,
            Some(s) => Some(Mechanism::parse(s).map_err(|msg| at(format!("{p}.mechanism"), msg))?),
        };
        cfg.events
            .push((SimTime::from_secs_f64(e.at_ms * 1e-3), op, mech));
    }
    Ok(cfg)
}
