//! What a virtual machine brings to a run once its scenario section is
//! validated: its vCPU tasks, guest programs, guest machine and scheduler;
//! and what a run reports of each VM.

use crate::hw::Machine;
use crate::os::{TaskId, VcpuInfo};
use crate::policy::Scheduler;
use serde::Serialize;

/// A VM ready to run: its host tasks (vCPUs), its guest programs and tasks,
/// and its guest scheduler.
pub struct VmSetup {
    /// Name.
    pub name: String,
    /// Host task id of each vCPU.
    pub vcpu_tasks: Vec<TaskId>,
    /// Its programs (indices into the run's programs).
    pub programs: Vec<usize>,
    /// What the guest sees: a machine of `vcpus` identical CPUs.
    pub machine: Machine,
    /// The guest scheduler.
    pub scheduler: Box<dyn Scheduler>,
    /// Per-vCPU information handed to host policies.
    pub info: Vec<VcpuInfo>,
    /// Priority class, for reports.
    pub priority: String,
    /// Asymmetry-aware guest, for reports.
    pub aware: bool,
}

/// Per-VM results of a run.
#[derive(Clone, Debug, Serialize)]
pub struct VmRow {
    /// Index of the VM.
    pub vm: usize,
    /// Its name.
    pub name: String,
    /// Number of vCPUs.
    pub vcpus: u32,
    /// Credit weight.
    pub weight: u32,
    /// Priority class (`high`/`low`).
    pub priority: String,
    /// Asymmetry-aware guest.
    pub aware: bool,
    /// Host task id of each vCPU (the `task` of their trace events).
    pub vcpu_tasks: Vec<TaskId>,
    /// Names of its programs.
    pub programs: Vec<String>,
    /// Time its vCPUs ran, summed, s.
    pub run_s: f64,
    /// Time its vCPUs ran on the fastest CPU type, summed, s.
    pub fast_s: f64,
    /// Migrations of its vCPUs between host CPUs.
    pub migrations: u64,
    /// Active (not blocked) vCPUs over time: `(t_s, count)` at each change.
    pub active_vcpus: Vec<(f64, u32)>,
}
