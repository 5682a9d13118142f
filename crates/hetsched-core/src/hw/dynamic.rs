//! Dynamic processors at run time: the reconfiguration operations policies
//! and scripts ask for, what a policy is told when one completes, and the
//! validated `[dynamic]` configuration the engine runs with.
//!
//! CPUs can be taken offline and brought back (`offline` / `online`) and
//! contiguous blocks of CPUs can be fused into one faster execution context
//! (`fuse`, undone by `split`), each through a mechanism whose cost model is
//! [`super::reconfig`]. The scenario's `[dynamic]` section is parsed and
//! validated by `scenario::dynamic`; the engine side is `sim::dynamic`;
//! `docs/dynamic.md` describes the semantics.

use super::reconfig::{Mechanism, ReconfigCosts};
use super::{CpuId, Machine};
use crate::time::SimTime;

/// Which CPUs may fuse.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FusionRule {
    /// Consecutive ids within one node.
    Contiguous,
    /// Consecutive, starting at a multiple of the level.
    Aligned,
    /// Any CPUs of one node.
    Any,
    /// SMT siblings of one physical core (any order; the first represents).
    Siblings,
}

impl FusionRule {
    /// Name used in scenarios.
    pub fn name(self) -> &'static str {
        match self {
            FusionRule::Contiguous => "contiguous",
            FusionRule::Aligned => "aligned",
            FusionRule::Any => "any",
            FusionRule::Siblings => "siblings",
        }
    }
}

/// A reconfiguration operation.
#[derive(Clone, Debug, PartialEq)]
pub enum ReconfigOp {
    /// Take CPUs out of service.
    Offline(Vec<CpuId>),
    /// Bring CPUs back.
    Online(Vec<CpuId>),
    /// Fuse CPUs into one context represented by the first (lowest) one.
    Fuse(Vec<CpuId>),
    /// Split the fused object represented by this CPU.
    Split(CpuId),
}

impl ReconfigOp {
    /// `offline`, `online`, `fuse` or `split`.
    pub fn name(&self) -> &'static str {
        match self {
            ReconfigOp::Offline(_) => "offline",
            ReconfigOp::Online(_) => "online",
            ReconfigOp::Fuse(_) => "fuse",
            ReconfigOp::Split(_) => "split",
        }
    }
    /// The CPUs named by the operation.
    pub fn cpus(&self) -> Vec<CpuId> {
        match self {
            ReconfigOp::Offline(c) | ReconfigOp::Online(c) | ReconfigOp::Fuse(c) => c.clone(),
            ReconfigOp::Split(r) => vec![*r],
        }
    }
}

/// What [`crate::policy::Scheduler::on_reconfigured`] is told.
#[derive(Clone, Debug, PartialEq)]
pub struct Reconfigured {
    /// Index of the operation in the run's reconfiguration records.
    pub id: usize,
    /// The operation.
    pub op: ReconfigOp,
    /// Its mechanism.
    pub mechanism: Mechanism,
    /// When it was requested.
    pub start: SimTime,
}

/// The validated `[dynamic]` section.
#[derive(Clone, Debug)]
pub struct DynConfig {
    /// Step costs.
    pub costs: ReconfigCosts,
    /// Default mechanism.
    pub mechanism: Mechanism,
    /// IPIs per second per CPU.
    pub ipi_per_s: f64,
    /// Share of TLB shootdowns among them.
    pub tlb_share: f64,
    /// Lazy-TLB mode (see [`DynamicSpec::lazy_tlb`]).
    pub lazy_tlb: bool,
    /// RCU callbacks per second per CPU.
    pub rcu_per_s: f64,
    /// Proxy handling cost per IPI.
    pub proxy_ipi: SimTime,
    /// Fusion rule.
    pub rule: FusionRule,
    /// `(level, speedup per interned class id)`.
    pub fusion: Vec<(usize, Vec<f64>)>,
    /// Scripted operations: time, operation, mechanism.
    pub events: Vec<(SimTime, ReconfigOp, Option<Mechanism>)>,
}

impl DynConfig {
    /// Expected TLB shootdowns an idle (proxied or halted) CPU receives over
    /// `dur` seconds: the shootdown rate times `dur`, or with lazy TLB at
    /// most one, `1 − exp(−rate × dur)`.
    pub fn shootdowns(&self, dur: f64) -> f64 {
        let rate = self.ipi_per_s * self.tlb_share;
        if self.lazy_tlb {
            1.0 - (-rate * dur).exp()
        } else {
            rate * dur
        }
    }
    /// The speedup of class `class` on a fused object of `level` CPUs.
    pub fn fused_speedup(&self, level: usize, class: usize) -> f64 {
        self.fusion
            .iter()
            .find(|(l, _)| *l == level)
            .and_then(|(_, s)| s.get(class).copied())
            .unwrap_or(1.0)
    }
    /// The highest fused speedup of any class and level (1.0 if none).
    pub fn max_speedup(&self) -> f64 {
        self.fusion
            .iter()
            .flat_map(|(_, s)| s.iter().copied())
            .fold(1.0, f64::max)
    }
    /// Check that `cpus` may form a fused object on machine `m`.
    pub fn check_fusion(&self, cpus: &[CpuId], m: &Machine) -> Result<(), String> {
        let level = cpus.len();
        if level < 2 {
            return Err(format!(
                "a fused object needs at least 2 cpus, got {cpus:?}"
            ));
        }
        if !self.fusion.iter().any(|(l, _)| *l == level) {
            let levels: Vec<String> = self.fusion.iter().map(|(l, _)| l.to_string()).collect();
            return Err(if levels.is_empty() {
                "no fusion levels are configured (dynamic.fusion is empty)".to_string()
            } else {
                format!(
                    "{level} cpus is not a fusion level; configured levels: {}",
                    levels.join(", ")
                )
            });
        }
        let node = m.cpus[cpus[0]].node;
        if let Some(&c) = cpus.iter().find(|&&c| m.cpus[c].node != node) {
            return Err(format!(
                "cpus {cpus:?} span nodes: cpu {c} is on node {} but cpu {} on node {node}",
                m.cpus[c].node, cpus[0]
            ));
        }
        let contiguous = cpus.windows(2).all(|w| w[1] == w[0] + 1);
        match self.rule {
            FusionRule::Any => {}
            FusionRule::Siblings => {
                let core = m.cpus[cpus[0]].core;
                if let Some(&c) = cpus.iter().find(|&&c| m.cpus[c].core != core) {
                    return Err(format!(
                        "cpus {cpus:?} are not SMT siblings of one core (fusion_rule = \"siblings\"): cpu {c} is on core {} but cpu {} on core {core}",
                        m.cpus[c].core, cpus[0]
                    ));
                }
            }
            FusionRule::Contiguous if !contiguous => {
                return Err(format!(
                    "cpus {cpus:?} are not contiguous (fusion_rule = \"contiguous\": consecutive ids, lowest first)"
                ));
            }
            FusionRule::Aligned if !contiguous || !cpus[0].is_multiple_of(level) => {
                return Err(format!(
                    "cpus {cpus:?} are not an aligned block (fusion_rule = \"aligned\": consecutive ids starting at a multiple of {level})"
                ));
            }
            _ => {}
        }
        Ok(())
    }
}
