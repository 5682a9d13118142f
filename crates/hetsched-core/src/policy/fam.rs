//! Fault-and-migrate (Li et al. §3, §5.2): ISA-asymmetric cores where only
//! some CPU types implement an extension. A thread that executes an
//! instruction its CPU lacks takes an undefined-opcode fault; instead of
//! SIGILL, the handler
//! 1. restricts the thread's affinity to the CPUs that have the feature and
//!    that its original affinity allows, so the scheduler moves it to one of
//!    them (the engine asks the scheduler's `select_cpu` for the destination:
//!    under CFS the least loaded such CPU, under A-DWRR one in the highest
//!    round), where the faulting phase re-executes;
//! 2. migrates it back after it has run `T` timer ticks on the new core
//!    (policy 1), or only after `T` ticks without touching the feature
//!    (policy 2): the original affinity is restored and the thread moves to
//!    the scheduler's preferred CPU of its original type.
//!
//! `T` counts the ticks the thread takes on the new core, as a 2.6.x kernel
//! counts a thread's ticks (a per-tick decrement, as `task_tick_rt` does
//! with `time_slice`), and the engine's ticks fall on one grid for every CPU
//! (2.6.24 starts each CPU's tick at the same jiffy boundary). A thread that
//! faults between two ticks therefore comes back at the `T`-th tick after
//! the fault, after `T - 1` whole ticks plus the rest of the tick it faulted
//! in; one that faults right after a tick comes back `T` ticks later, which
//! is the paper's one fault per tick for Conv3D and Mandelbrot at `T = 1`
//! (whole ticks counted from the move would give one per two ticks). See
//! docs/reproducing.md, "Li et al.: how fault-and-migrate counts T".
//!
//! A fault that no allowed CPU can serve keeps the Linux outcome: the engine
//! kills the thread with SIGILL and records why.

use super::{Ctx, ParamDef, Params};
use crate::hw::CpuId;
use crate::os::TaskId;

/// Per-thread state while migrated away from its home type.
#[derive(Clone, Debug)]
struct Away {
    original: Vec<CpuId>,
    home_type: usize,
    ticks: u32,
}

/// Which migrate-back policy.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BackPolicy {
    /// After T ticks on the new core.
    Ticks,
    /// After T ticks without executing the feature.
    TicksWithoutFeature,
}

/// The fault-and-migrate mechanism, embedded in a scheduler.
#[derive(Clone, Debug)]
pub struct FaultMigrate {
    /// Whether faults migrate (false: Linux SIGILL).
    pub enabled: bool,
    /// T, in ticks.
    pub ticks: u32,
    /// Migrate-back policy.
    pub policy: BackPolicy,
    away: Vec<Option<Away>>,
}

impl FaultMigrate {
    /// A new mechanism.
    pub fn new(enabled: bool, ticks: u32, policy: BackPolicy) -> Self {
        FaultMigrate {
            enabled,
            ticks,
            policy,
            away: Vec::new(),
        }
    }

    /// Whether `t` currently runs away from its home type (and so needs ticks).
    pub fn is_away(&self, t: TaskId) -> bool {
        self.away.get(t).is_some_and(|a| a.is_some())
    }

    /// Handle a fault of `t` on `cpu` for `feature`. Returns whether the
    /// fault was handled (the thread's affinity now excludes `cpu`).
    pub fn on_fault(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, feature: usize) -> bool {
        if !self.enabled {
            return false;
        }
        let n = cx.ncpus();
        // The original mask: if the thread is already away (a second fault on
        // a capable CPU cannot happen), keep the first one.
        let original = match self.away.get(t).and_then(|a| a.as_ref()) {
            Some(a) => a.original.clone(),
            None => cx.task(t).affinity.to_vec(n),
        };
        let capable: Vec<CpuId> = original
            .iter()
            .copied()
            .filter(|&c| cx.has_feature(c, feature) && cx.online(c))
            .collect();
        if capable.is_empty() {
            return false;
        }
        if t >= self.away.len() {
            self.away.resize(t + 1, None);
        }
        let home_type = cx.machine.cpus[cpu].ty;
        self.away[t] = Some(Away {
            original,
            home_type,
            ticks: 0,
        });
        cx.set_affinity(t, capable);
        true
    }

    /// A tick while `t` runs on `cpu`. When it is time to migrate back,
    /// returns the original affinity and the CPUs of the home type within it;
    /// the caller restores the affinity and picks the destination among those.
    pub fn tick(&mut self, cx: &Ctx, t: TaskId, cpu: CpuId) -> Option<(Vec<CpuId>, Vec<CpuId>)> {
        let feature = cx.task_feature(t);
        let a = self.away.get_mut(t)?.as_mut()?;
        if cx.machine.cpus[cpu].ty == a.home_type {
            return None;
        }
        if self.policy == BackPolicy::TicksWithoutFeature && feature.is_some() {
            a.ticks = 0;
            return None;
        }
        a.ticks += 1;
        if a.ticks < self.ticks {
            return None;
        }
        let a = self.away[t].take().expect("checked");
        let home: Vec<CpuId> = a
            .original
            .iter()
            .copied()
            .filter(|&c| cx.machine.cpus[c].ty == a.home_type && cx.online(c))
            .collect();
        Some((a.original, home))
    }
}

/// The parameters fault-and-migrate adds to a scheduler.
pub fn params() -> Vec<ParamDef> {
    vec![
        ParamDef {
            name: "fam",
            default: "false",
            doc: "fault-and-migrate (Li et al. §5.2): on an ISA fault move the thread to a capable CPU instead of SIGILL",
        },
        ParamDef { name: "fam_ticks", default: "1", doc: "T: ticks on the new core before migrating back" },
        ParamDef {
            name: "fam_policy",
            default: "1",
            doc: "migrate-back policy: 1 = after T ticks, 2 = after T ticks without the feature",
        },
    ]
}

/// Build the mechanism from a scheduler's checked parameters.
pub fn from_params(p: &Params) -> Result<FaultMigrate, String> {
    let ticks = p.f64("fam_ticks", 1.0, 1e6).map_err(|e| {
        if e.contains("out of range") {
            format!("{e} (T counts ticks and must be at least 1)")
        } else {
            e
        }
    })? as u32;
    let policy = match p.choice("fam_policy", &["1", "2"])?.as_str() {
        "2" => BackPolicy::TicksWithoutFeature,
        _ => BackPolicy::Ticks,
    };
    Ok(FaultMigrate::new(p.bool("fam")?, ticks, policy))
}
