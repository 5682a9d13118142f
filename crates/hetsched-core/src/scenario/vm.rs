//! Virtual machines: the `[[vms]]` section of a scenario, its validation,
//! and what a host scheduler sees of a vCPU.
//!
//! A VM is a nested machine. Its CPUs are vCPUs, and each vCPU is a task of
//! the host: the host scheduler places and runs vCPUs on physical CPUs like
//! any other task. The guest runs its own [`Scheduler`] instance (CFS by
//! default) over its vCPUs, with the guest's programs as its tasks. When the
//! host runs vCPU v on CPU p, the guest task current on v progresses at p's
//! speed; a vCPU with nothing runnable blocks in the host and a guest
//! wake-up wakes it. The engine side of this lives in `sim/vm.rs`.

use crate::error::{at, SimError};
use crate::hw::{fast_cores, Cpu, FreqDomain, Machine};
use crate::os::{Counters, CpuSet, Task, TaskId, TaskState, VcpuInfo};
use crate::policy;
use crate::scenario::{ProgramSpec, WorkloadSpec};
use crate::sim::VmSetup;
use crate::time::SimTime;
use crate::workload::Program;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn d_weight() -> i64 {
    256
}
fn d_priority() -> String {
    "low".into()
}
fn d_guest_sched() -> String {
    "cfs".into()
}

/// A virtual machine of a scenario.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    /// Name (default `vm<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Number of vCPUs (≥ 1).
    pub vcpus: u32,
    /// Credit weight of the VM (Xen's domain weight, 1..65535; default 256).
    #[serde(default = "d_weight")]
    pub weight: i64,
    /// Priority class for AASH: `high` or `low` (default).
    #[serde(default = "d_priority")]
    pub priority: String,
    /// Whether the guest is asymmetry-aware: it assumes its first
    /// `fast_vcpus` vCPUs are fast and binds its threads accordingly.
    #[serde(default)]
    pub aware: bool,
    /// vCPUs an aware guest treats as fast (default: the number of fast
    /// cores of the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_vcpus: Option<u32>,
    /// The guest's scheduler (a registry name with parameters).
    #[serde(default = "d_guest_sched")]
    pub scheduler: String,
    /// The guest's programs; their `affinity` names vCPUs.
    #[serde(default)]
    pub programs: Vec<ProgramSpec>,
}

/// The machine a guest sees: `n` identical CPUs of the host's first CPU type,
/// one frequency domain, one cache.
fn guest_machine(host: &Machine, n: usize) -> Machine {
    let ty = host.cpus[0].ty;
    let mut m = host.clone();
    m.cpus = (0..n)
        .map(|v| Cpu {
            id: v,
            ty,
            node: 0,
            core: v as u32,
            llc: 0,
            domain: 0,
            duty_cycle: 1.0,
            siblings: Vec::new(),
        })
        .collect();
    m.domains = vec![FreqDomain {
        id: 0,
        cpus: (0..n).collect(),
        ty,
    }];
    m
}

/// Validate the VMs of a scenario and append their vCPU tasks, guest tasks
/// and guest programs to the run's.
pub fn build_vms(
    specs: &[VmSpec],
    host: &Machine,
    tasks: &mut Vec<Task>,
    programs: &mut Vec<Program>,
    stop: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Vec<VmSetup>, SimError> {
    let mut out = Vec::new();
    let nfast = fast_cores(host);
    let mut names: Vec<String> = Vec::new();
    for (k, vs) in specs.iter().enumerate() {
        let base = format!("vms[{k}]");
        let name = vs.name.clone().unwrap_or_else(|| format!("vm{k}"));
        if names.contains(&name) {
            return Err(at(
                format!("{base}.name"),
                format!("\"{name}\" is used by another VM; VM names must be unique"),
            ));
        }
        names.push(name.clone());
        if vs.vcpus == 0 {
            return Err(at(
                format!("{base}.vcpus"),
                "0 is not allowed; a VM has at least one vCPU",
            ));
        }
        if vs.vcpus > 4096 {
            return Err(at(
                format!("{base}.vcpus"),
                format!("{} is too many; at most 4096", vs.vcpus),
            ));
        }
        let nv = vs.vcpus as usize;
        if vs.weight <= 0 || vs.weight > 65535 {
            return Err(at(
                format!("{base}.weight"),
                format!("{} is not allowed; a weight is 1 to 65535", vs.weight),
            ));
        }
        let high = match vs.priority.as_str() {
            "high" => true,
            "low" => false,
            other => {
                return Err(at(
                    format!("{base}.priority"),
                    format!("\"{other}\" is not a priority class; allowed: high, low"),
                ))
            }
        };
        let fast_vcpus = match vs.fast_vcpus {
            Some(_) if !vs.aware => {
                return Err(at(
                    format!("{base}.fast_vcpus"),
                    "only an asymmetry-aware guest (aware = true) has fast vCPUs",
                ))
            }
            Some(f) if f == 0 || f > vs.vcpus => {
                return Err(at(
                    format!("{base}.fast_vcpus"),
                    format!(
                        "{f} is not allowed; the VM has {} vCPUs (allowed 1 to {})",
                        vs.vcpus, vs.vcpus
                    ),
                ))
            }
            Some(f) => f,
            None if vs.aware && nfast > vs.vcpus => {
                return Err(at(
                    format!("{base}.aware"),
                    format!(
                        "an aware guest treats one vCPU per fast core as fast: the host has {nfast} fast cores but the VM only {} vCPUs; give fast_vcpus",
                        vs.vcpus
                    ),
                ))
            }
            None => nfast.min(vs.vcpus),
        };
        if vs.programs.is_empty() {
            return Err(at(
                format!("{base}.programs"),
                "a VM runs at least one program",
            ));
        }
        for (i, p) in vs.programs.iter().enumerate() {
            if let Some(c) = &p.common.cpuset {
                return Err(at(
                    format!("{base}.programs[{i}].cpuset"),
                    format!("\"{c}\": cpusets are host objects; a guest program names vCPUs with affinity"),
                ));
            }
            for (j, &v) in p.common.affinity.iter().flatten().enumerate() {
                if v as usize >= nv {
                    return Err(at(
                        format!("{base}.programs[{i}].affinity[{j}]"),
                        format!(
                            "vCPU {v} does not exist (the VM has {nv} vCPUs: 0-{})",
                            nv - 1
                        ),
                    ));
                }
            }
        }
        let gm = guest_machine(host, nv);
        let ws = WorkloadSpec {
            programs: vs.programs.clone(),
        };
        let rename = |e: SimError| match e {
            SimError::Scenario(m) => {
                SimError::Scenario(m.replacen("workload.programs", &format!("{base}.programs"), 1))
            }
            other => other,
        };
        let (mut gtasks, mut gprogs) =
            crate::scenario::build_workload(&ws, &gm, &[], stop).map_err(rename)?;
        let scheduler = policy::make_scheduler(&vs.scheduler, &gm)
            .map_err(|e| at(format!("{base}.scheduler"), e))?;
        let (t0, p0) = (tasks.len(), programs.len());
        for t in gtasks.iter_mut() {
            t.id += t0;
            t.program += p0;
        }
        let mut prog_ids = Vec::new();
        for p in gprogs.iter_mut() {
            p.id += p0;
            if vs.programs[p.id - p0].common.name.is_none() {
                p.name = format!("{name}/p{}", p.id - p0);
            }
            for th in p.threads.iter_mut() {
                *th += t0;
            }
            prog_ids.push(p.id);
        }
        tasks.append(&mut gtasks);
        programs.append(&mut gprogs);
        // The vCPUs: host tasks. Their program is the VM's first (never
        // used for progress: a vCPU executes its guest's current task).
        let first = tasks.len();
        let siblings: std::sync::Arc<[TaskId]> = (first..first + nv).collect();
        let mut info = Vec::new();
        for v in 0..nv {
            let id = tasks.len();
            tasks.push(Task {
                id,
                program: p0,
                thread: v as u32,
                ops: Vec::new().into(),
                loops: 0,
                pc: 0,
                iter: 0,
                state: TaskState::NotStarted,
                state_since: SimTime::ZERO,
                cpu: 0,
                last_ran: None,
                affinity: CpuSet::All,
                nice: 0,
                weight: vs.weight as u32,
                sched: crate::os::SchedAttr::default(),
                slice_ns: None,
                uclamp: None,
                remaining: 0.0,
                param: 0,
                pending_io: 0,
                release: SimTime::ZERO,
                deadline: None,
                wake_gen: 0,
                class: 0,
                start: None,
                end: None,
                kill_reason: None,
                stall_until: SimTime::ZERO,
                pending_stall: 0,
                c: Counters {
                    run_ns_by_type: crate::os::TypeTimes::new(host.types.len()),
                    ..Default::default()
                },
            });
            info.push(VcpuInfo {
                vm: k,
                index: v as u32,
                nvcpus: nv as u32,
                weight: vs.weight as u32,
                high_priority: high,
                aware: vs.aware,
                fast_vcpus,
                siblings: siblings.clone(),
            });
        }
        out.push(VmSetup {
            name,
            vcpu_tasks: (first..first + nv).collect(),
            programs: prog_ids,
            machine: gm,
            scheduler,
            info,
            priority: vs.priority.clone(),
            aware: vs.aware,
        });
    }
    Ok(out)
}
