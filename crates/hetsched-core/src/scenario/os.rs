//! Validation of the scenario's `[os]` table (the rt and deadline classes'
//! settings; its schema, `OsSpec`, is in `spec.rs` with the rest of the
//! file format) and of the programs' scheduling policies: `policy`,
//! `priority` and the SCHED_DEADLINE parameters, and the deadline class's
//! admission control. See docs/classes.md.

use crate::error::{at, SimError};
use crate::hw::Machine;
use crate::os::{ClassConfig, SchedAttr, SchedPolicy, Task};
use crate::scenario::spec::{ProgramCommon, ScenarioSpec};

fn ms_in(path: &str, v: f64, lo: f64, hi: f64) -> Result<u64, SimError> {
    if !v.is_finite() || v < lo || v > hi {
        return Err(at(
            path,
            format!("{v} is out of range; allowed {lo} to {hi} (ms)"),
        ));
    }
    Ok((v * 1e6).round() as u64)
}

/// The validated `[os]` table.
pub(crate) fn build_os(spec: &ScenarioSpec) -> Result<ClassConfig, SimError> {
    let o = spec.os.clone().unwrap_or_default();
    let rt_period = ms_in("os.rt_period_ms", o.rt_period_ms, 0.001, 1e6)?;
    let rt_runtime = ms_in("os.rt_runtime_ms", o.rt_runtime_ms, 0.0, 1e6)?;
    if rt_runtime > rt_period {
        return Err(at(
            "os.rt_runtime_ms",
            format!(
                "{} ms is longer than os.rt_period_ms = {} ms; allowed 0 to the period",
                o.rt_runtime_ms, o.rt_period_ms
            ),
        ));
    }
    let rr = ms_in("os.rr_timeslice_ms", o.rr_timeslice_ms, 0.001, 1e6)?;
    let fs_period = ms_in(
        "os.fair_server_period_ms",
        o.fair_server_period_ms,
        0.1,
        1e6,
    )?;
    let fs_runtime = ms_in(
        "os.fair_server_runtime_ms",
        o.fair_server_runtime_ms,
        0.0,
        1e6,
    )?;
    if fs_runtime > fs_period {
        return Err(at(
            "os.fair_server_runtime_ms",
            format!(
                "{} ms is longer than os.fair_server_period_ms = {} ms; allowed 0 to the period",
                o.fair_server_runtime_ms, o.fair_server_period_ms
            ),
        ));
    }
    Ok(ClassConfig {
        rt_runtime,
        rt_period,
        rr_timeslice: rr,
        fair_server: o.fair_server && fs_runtime > 0,
        fs_runtime,
        fs_period,
    })
}

/// The scheduling attributes of a program's threads, validated (`base`:
/// the program's path).
pub(crate) fn sched_attr(base: &str, c: &ProgramCommon) -> Result<SchedAttr, SimError> {
    let policy = match c.policy.as_deref() {
        None => SchedPolicy::Other,
        Some(name) => SchedPolicy::from_name(name).ok_or_else(|| {
            at(
                format!("{base}.policy"),
                format!(
                    "\"{name}\" is not a policy; allowed: {}",
                    SchedPolicy::ALL.map(|p| p.name()).join(", ")
                ),
            )
        })?,
    };
    let mut a = SchedAttr {
        policy,
        ..SchedAttr::default()
    };
    match (policy.is_rt(), c.priority) {
        (true, None) => {
            return Err(at(
                format!("{base}.priority"),
                format!(
                    "required for policy \"{}\": an rt priority 1 to 99",
                    policy.name()
                ),
            ))
        }
        (true, Some(p)) if !(1..=99).contains(&p) => {
            return Err(at(
                format!("{base}.priority"),
                format!("{p} is out of range; allowed 1 to 99"),
            ))
        }
        (true, Some(p)) => a.rt_prio = p as u8,
        (false, Some(_)) => {
            return Err(at(
                format!("{base}.priority"),
                format!(
                    "not used by policy \"{}\" (used by: fifo, rr); the fair policies take nice",
                    policy.name()
                ),
            ))
        }
        (false, None) => {}
    }
    let dl_fields = [
        ("dl_runtime_ms", c.dl_runtime_ms),
        ("dl_deadline_ms", c.dl_deadline_ms),
        ("dl_period_ms", c.dl_period_ms),
    ];
    if policy != SchedPolicy::Deadline {
        if let Some((f, _)) = dl_fields.iter().find(|(_, v)| v.is_some()) {
            return Err(at(
                format!("{base}.{f}"),
                format!(
                    "not used by policy \"{}\" (used by: deadline)",
                    policy.name()
                ),
            ));
        }
        return Ok(a);
    }
    let need = |f: &str, v: Option<f64>| -> Result<f64, SimError> {
        let v = v.ok_or_else(|| at(format!("{base}.{f}"), "required for policy \"deadline\""))?;
        if !v.is_finite() || v <= 0.0 || v > 1e6 {
            return Err(at(
                format!("{base}.{f}"),
                format!("{v} is out of range; allowed more than 0 up to 1e6 (ms)"),
            ));
        }
        Ok(v)
    };
    let runtime = need("dl_runtime_ms", c.dl_runtime_ms)?;
    let period = need("dl_period_ms", c.dl_period_ms)?;
    let deadline = match c.dl_deadline_ms {
        Some(_) => need("dl_deadline_ms", c.dl_deadline_ms)?,
        None => period,
    };
    // sched_setattr(2): runtime <= deadline <= period (__checkparam_dl).
    if runtime > deadline {
        return Err(at(
            format!("{base}.dl_runtime_ms"),
            format!("{runtime} ms is longer than the deadline {deadline} ms; SCHED_DEADLINE needs runtime <= deadline <= period"),
        ));
    }
    if deadline > period {
        return Err(at(
            format!("{base}.dl_deadline_ms"),
            format!("{deadline} ms is longer than dl_period_ms = {period} ms; SCHED_DEADLINE needs runtime <= deadline <= period"),
        ));
    }
    if c.affinity.is_some() || c.cpuset.is_some() {
        let f = if c.affinity.is_some() {
            "affinity"
        } else {
            "cpuset"
        };
        return Err(at(
            format!("{base}.{f}"),
            "a SCHED_DEADLINE task may not have a restricted affinity (Linux refuses it with EPERM: \
             its bandwidth is admitted over the whole root domain)",
        ));
    }
    a.dl_runtime = (runtime * 1e6).round() as u64;
    a.dl_deadline = (deadline * 1e6).round() as u64;
    a.dl_period = (period * 1e6).round() as u64;
    Ok(a)
}

/// Refuse combinations the classes do not model, and apply admission
/// control: the deadline tasks' bandwidth `Σ runtime / period` may not
/// exceed `rt_runtime / rt_period` of the machine's capacity
/// (`__dl_overflow`, kernel/sched/deadline.c: the capacities of the root
/// domain's CPUs, 1024 per full CPU).
pub(crate) fn check_classes(
    spec: &ScenarioSpec,
    cfg: &ClassConfig,
    m: &Machine,
    tasks: &[Task],
    uses_dsqs: bool,
) -> Result<(), SimError> {
    let Some(first) = tasks.iter().find(|t| t.sched.policy.above_fair()) else {
        return Ok(());
    };
    let what = format!("workload.programs[{}].policy", first.program);
    if uses_dsqs {
        return Err(at(
            what,
            format!(
                "policy \"{}\" runs in a class above the fair class, which is not modelled with scheduler \"{}\" \
                 (it uses sched_ext dispatch queues); use a fair scheduler such as eevdf or cfs",
                first.sched.policy.name(),
                spec.scheduler
            ),
        ));
    }
    if !spec.vms.is_empty() {
        return Err(at(
            what,
            "rt and deadline tasks are not modelled in a scenario with vms",
        ));
    }
    if spec.dynamic.is_some() {
        return Err(at(
            what,
            "rt and deadline tasks are not modelled with dynamic processors ([dynamic])",
        ));
    }
    let mut bw = 0.0;
    let mut n = 0;
    for t in tasks
        .iter()
        .filter(|t| t.sched.policy == SchedPolicy::Deadline)
    {
        bw += t.sched.dl_runtime as f64 / t.sched.dl_period as f64;
        n += 1;
    }
    if n > 0 {
        let cap: f64 = (0..m.ncpus())
            .map(|c| m.ty(c).capacity as f64 / 1024.0)
            .sum();
        let share = cfg.rt_runtime as f64 / cfg.rt_period as f64;
        let limit = share * cap;
        if bw > limit * (1.0 + 1e-12) {
            return Err(at(
                "workload.programs",
                format!(
                    "deadline admission control: the {n} SCHED_DEADLINE threads reserve {bw:.4} CPUs \
                     (sum of dl_runtime_ms / dl_period_ms) but at most {limit:.4} may be reserved \
                     ({:.0}% (os.rt_runtime_ms / os.rt_period_ms) of the capacity of {} CPUs, {cap:.4}); \
                     Linux refuses sched_setattr() with EBUSY",
                    share * 100.0,
                    m.ncpus()
                ),
            ));
        }
    }
    Ok(())
}
