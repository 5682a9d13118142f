//! Validation of the scenario's `[os]` table (the rt and deadline classes'
//! settings; its schema, `OsSpec`, is in `spec.rs` with the rest of the
//! file format) and of the programs' scheduling policies: `policy`,
//! `priority` and the SCHED_DEADLINE parameters, and the deadline class's
//! admission control. See docs/classes.md.

use crate::error::{at, SimError};
use crate::hw::Machine;
use crate::os::{ClassConfig, SchedAttr, SchedPolicy, Task};
use crate::scenario::spec::{ProgramCommon, ScenarioSpec};

/// The low end of an allowed range of milliseconds.
#[derive(Clone, Copy)]
enum Low {
    /// The bound itself is allowed.
    From(f64),
    /// Only values above the bound are allowed.
    Above(f64),
}

/// `v` ms at `path`, checked to be finite and within `low` to `hi`
/// (inclusive); the error says which values are allowed.
fn ms_in(path: impl AsRef<str>, v: f64, low: Low, hi: f64) -> Result<f64, SimError> {
    let (fits, allowed) = match low {
        Low::From(lo) => (v >= lo, format!("{lo} to {hi}")),
        Low::Above(lo) => (v > lo, format!("more than {lo} up to {hi:e}")),
    };
    if !v.is_finite() || !fits || v > hi {
        return Err(at(
            path,
            format!("{v} is out of range; allowed {allowed} (ms)"),
        ));
    }
    Ok(v)
}

/// Milliseconds as whole nanoseconds.
fn ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

/// A runtime and its period from the `[os]` table, as (runtime, period) in
/// ns: `runtime` is (field, ms) and may be 0 to 1e6 ms; `period` is (field,
/// ms, least ms) and may be its least to 1e6 ms; the runtime may not exceed
/// the period. The period is checked first.
fn budget(runtime: (&str, f64), period: (&str, f64, f64)) -> Result<(u64, u64), SimError> {
    let (rf, r_ms) = runtime;
    let (pf, p_ms, p_least) = period;
    let p = ns(ms_in(format!("os.{pf}"), p_ms, Low::From(p_least), 1e6)?);
    let r = ns(ms_in(format!("os.{rf}"), r_ms, Low::From(0.0), 1e6)?);
    if r > p {
        return Err(at(
            format!("os.{rf}"),
            format!("{r_ms} ms is longer than os.{pf} = {p_ms} ms; allowed 0 to the period"),
        ));
    }
    Ok((r, p))
}

/// The validated `[os]` table.
pub(crate) fn build_os(spec: &ScenarioSpec) -> Result<ClassConfig, SimError> {
    let o = spec.os.clone().unwrap_or_default();
    let (rt_runtime, rt_period) = budget(
        ("rt_runtime_ms", o.rt_runtime_ms),
        ("rt_period_ms", o.rt_period_ms, 0.001),
    )?;
    let rr = ns(ms_in(
        "os.rr_timeslice_ms",
        o.rr_timeslice_ms,
        Low::From(0.001),
        1e6,
    )?);
    let (fs_runtime, fs_period) = budget(
        ("fair_server_runtime_ms", o.fair_server_runtime_ms),
        ("fair_server_period_ms", o.fair_server_period_ms, 0.1),
    )?;
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
        ms_in(format!("{base}.{f}"), v, Low::Above(0.0), 1e6)
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
    a.dl_runtime = ns(runtime);
    a.dl_deadline = ns(deadline);
    a.dl_period = ns(period);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(path: &str, v: f64, low: Low) -> String {
        ms_in(path, v, low, 1e6).unwrap_err().to_string()
    }

    #[test]
    fn ms_in_names_the_range_it_allows() {
        assert_eq!(
            msg("os.rt_period_ms", 0.0, Low::From(0.001)),
            "os.rt_period_ms: 0 is out of range; allowed 0.001 to 1000000 (ms)"
        );
        assert_eq!(
            msg("os.rt_runtime_ms", 2e6, Low::From(0.0)),
            "os.rt_runtime_ms: 2000000 is out of range; allowed 0 to 1000000 (ms)"
        );
        assert_eq!(
            msg("p.dl_period_ms", 0.0, Low::Above(0.0)),
            "p.dl_period_ms: 0 is out of range; allowed more than 0 up to 1e6 (ms)"
        );
        assert_eq!(
            msg("p.dl_runtime_ms", f64::NAN, Low::Above(0.0)),
            "p.dl_runtime_ms: NaN is out of range; allowed more than 0 up to 1e6 (ms)"
        );
        assert_eq!(ms_in("x", 0.0, Low::From(0.0), 1e6), Ok(0.0));
        assert_eq!(ms_in("x", 1e6, Low::Above(0.0), 1e6), Ok(1e6));
        assert_eq!(ns(0.0015), 1500);
    }

    #[test]
    fn budget_checks_the_period_then_the_runtime_then_both() {
        let b = |r: f64, p: f64| {
            budget(
                ("fair_server_runtime_ms", r),
                ("fair_server_period_ms", p, 0.1),
            )
            .map_err(|e| e.to_string())
        };
        assert_eq!(b(50.0, 1000.0), Ok((50_000_000, 1_000_000_000)));
        assert_eq!(b(0.0, 0.1), Ok((0, 100_000)));
        assert_eq!(
            b(-1.0, 0.05),
            Err(
                "os.fair_server_period_ms: 0.05 is out of range; allowed 0.1 to 1000000 (ms)"
                    .into()
            )
        );
        assert_eq!(
            b(-1.0, 10.0),
            Err("os.fair_server_runtime_ms: -1 is out of range; allowed 0 to 1000000 (ms)".into())
        );
        assert_eq!(
            b(20.0, 10.0),
            Err("os.fair_server_runtime_ms: 20 ms is longer than os.fair_server_period_ms = 10 ms; \
                 allowed 0 to the period"
                .into())
        );
    }
}
