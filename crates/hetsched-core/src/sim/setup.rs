//! What a virtual machine brings to a run once its scenario section is
//! validated: its vCPU tasks, guest programs, guest machine and scheduler.

use crate::hw::Machine;
use crate::os::{TaskId, VcpuInfo};
use crate::policy::Scheduler;

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
