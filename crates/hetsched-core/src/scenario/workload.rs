//! Validating the programs of a scenario and converting them into the
//! patterns of [`crate::workload::patterns`] (which say what each kind
//! means) and the threads of a run.
//!
//! Which fields a kind takes is the type's business ([`ProgramPattern`]);
//! here each kind's values are checked and converted: ms to reference ns or
//! [`SimTime`], defaults filled in, the phases of a `phases` program
//! resolved to operations and parameter sets.

use super::*;
use crate::workload::patterns::{self, Pattern};

pub(crate) fn build_workload(
    ws: &WorkloadSpec,
    m: &Machine,
    cpusets: &[Cpuset],
) -> Result<(Vec<Task>, Vec<Program>), SimError> {
    let mut tasks: Vec<Task> = Vec::new();
    let mut programs = Vec::new();
    let n = m.ncpus();
    let ms_ns = |v: f64| v * 1e6;
    for (i, p) in ws.programs.iter().enumerate() {
        let base = format!("workload.programs[{i}]");
        let kind = p.pattern.kind();
        let c = &p.common;
        let need = |field: &str, v: f64| -> Result<f64, SimError> {
            positive(&format!("{base}.{field}"), v)?;
            Ok(v)
        };
        let threads = c.threads.unwrap_or(1);
        if threads == 0 {
            return Err(at(
                format!("{base}.threads"),
                "0 is not allowed; a program has at least one thread",
            ));
        }
        if threads > 10_000_000 {
            return Err(at(
                format!("{base}.threads"),
                format!("{threads} is too many; at most 10000000"),
            ));
        }
        if matches!(p.pattern, ProgramPattern::Sequential { .. }) && threads != 1 {
            return Err(at(
                format!("{base}.threads"),
                "a sequential program has exactly 1 thread",
            ));
        }
        finite_in(
            &format!("{base}.start_ms"),
            c.start_ms,
            0.0,
            1e10,
            "0 or more ms",
        )?;
        if c.repeat == 0 {
            return Err(at(format!("{base}.repeat"), "0 is not allowed; at least 1"));
        }
        if !(-20..=19).contains(&c.nice) {
            return Err(at(
                format!("{base}.nice"),
                format!("{} is out of range; allowed -20 to 19", c.nice),
            ));
        }
        if let Some(s) = c.slice_ms {
            finite_in(
                &format!("{base}.slice_ms"),
                s,
                0.1,
                100.0,
                "0.1 to 100 (ms)",
            )?;
        }
        let mut prev_after = 0;
        for (k, step) in c.nice_schedule.iter().enumerate() {
            let sp = format!("{base}.nice_schedule[{k}]");
            if step.after <= prev_after || step.after >= c.repeat {
                return Err(at(
                    format!("{sp}.after"),
                    format!(
                        "{} is not allowed; steps need increasing values from {} to repeat - 1 = {}",
                        step.after,
                        prev_after + 1,
                        c.repeat.saturating_sub(1)
                    ),
                ));
            }
            prev_after = step.after;
            if !(-20..=19).contains(&step.nice) {
                return Err(at(
                    format!("{sp}.nice"),
                    format!("{} is out of range; allowed -20 to 19", step.nice),
                ));
            }
        }
        finite_in(
            &format!("{base}.mem"),
            c.mem,
            0.0,
            0.999_999,
            "0 <= mem < 1",
        )?;
        positive(&format!("{base}.ipc"), c.ipc)?;
        finite_in(
            &format!("{base}.refs_per_instr"),
            c.refs_per_instr,
            0.0,
            10.0,
            "0 to 10",
        )?;
        finite_in(
            &format!("{base}.miss_ratio"),
            c.miss_ratio,
            0.0,
            1.0,
            "0 to 1",
        )?;
        finite_in(
            &format!("{base}.working_set_kb"),
            c.working_set_kb,
            0.0,
            1e9,
            "0 or more KiB",
        )?;
        finite_in(
            &format!("{base}.jitter"),
            c.jitter,
            0.0,
            0.999_999,
            "0 <= jitter < 1",
        )?;
        if let Some(f) = c.smt_factor {
            if !(f.is_finite() && f > 0.0 && f <= 1.0) {
                return Err(at(
                    format!("{base}.smt_factor"),
                    format!("{f} is out of range; allowed (0, 1]"),
                ));
            }
        }
        let affinity = match &c.affinity {
            None => CpuSet::All,
            Some(list) => {
                if list.is_empty() {
                    return Err(at(
                        format!("{base}.affinity"),
                        "empty list; give at least one cpu or omit the field",
                    ));
                }
                for (j, &c) in list.iter().enumerate() {
                    if c as usize >= n {
                        return Err(at(
                            format!("{base}.affinity[{j}]"),
                            format!("cpu {c} does not exist (machine has {n} cpus: 0-{})", n - 1),
                        ));
                    }
                }
                let v: Vec<usize> = list.iter().map(|&c| c as usize).collect();
                CpuSet::from_cpus(&v, n)
            }
        };
        let affinity = match (&c.cpuset, &c.affinity) {
            (Some(_), Some(_)) => {
                return Err(at(
                    format!("{base}.cpuset"),
                    "give either cpuset or affinity, not both",
                ));
            }
            (Some(name), None) => match cpusets.iter().find(|c| &c.name == name) {
                Some(c) => CpuSet::from_cpus(&c.cpus, n),
                None => {
                    let known: Vec<&str> = cpusets.iter().map(|c| c.name.as_str()).collect();
                    return Err(at(
                        format!("{base}.cpuset"),
                        if known.is_empty() {
                            format!("unknown cpuset \"{name}\"; the scenario defines no cpusets")
                        } else {
                            format!("unknown cpuset \"{name}\"; known: {}", known.join(", "))
                        },
                    ));
                }
            },
            _ => affinity,
        };
        let class = m.class_id(&c.class).expect("interned");
        let feature = c
            .feature
            .as_ref()
            .map(|f| m.feature_id(f).expect("interned"));
        let base_params = ComputeParams {
            class,
            mem: c.mem,
            ipc: c.ipc,
            refs_per_instr: c.refs_per_instr,
            miss_ratio: c.miss_ratio,
            working_set_kb: c.working_set_kb,
            feature,
            smt_factor: c.smt_factor,
        };
        let mut params = vec![base_params.clone()];
        let name = c.name.clone().unwrap_or_else(|| format!("p{i}"));
        let mut prog = Program::new(i, name, kind, threads, SimTime::from_ms_f64(c.start_ms));
        prog.repeat = c.repeat;
        prog.jitter = c.jitter;
        prog.nice_schedule = c.nice_schedule.iter().map(|n| (n.after, n.nice)).collect();
        let at_least_one = |field: &str, v: u32| -> Result<u32, SimError> {
            if v == 0 {
                return Err(at(
                    format!("{base}.{field}"),
                    "0 is not allowed; at least 1",
                ));
            }
            Ok(v)
        };
        let pattern = match &p.pattern {
            &ProgramPattern::Sequential { work_ms } => Pattern::Sequential {
                work: ms_ns(need("work_ms", work_ms)?),
            },
            &ProgramPattern::Parallel {
                work_ms,
                iterations,
            } => {
                let w = need("work_ms", work_ms)?;
                Pattern::Parallel {
                    work: ms_ns(w),
                    iterations: at_least_one("iterations", iterations.unwrap_or(1))?,
                }
            }
            &ProgramPattern::Dynamic { work_ms, chunks } => {
                let w = need("work_ms", work_ms)?;
                Pattern::Dynamic {
                    work: ms_ns(w),
                    chunks: at_least_one("chunks", chunks)?,
                }
            }
            &ProgramPattern::Pool {
                work_ms,
                chunks,
                io_ms,
            } => {
                let w = need("work_ms", work_ms)?;
                let chunks = at_least_one("chunks", chunks)?;
                let io = io_ms.unwrap_or(0.0);
                finite_in(&format!("{base}.io_ms"), io, 0.0, 1e9, "0 or more ms")?;
                Pattern::Pool {
                    work: ms_ns(w),
                    chunks,
                    io: SimTime::from_ms_f64(io),
                }
            }
            &ProgramPattern::ForkJoin {
                work_ms,
                iterations,
                seq_fraction,
            } => {
                let w = need("work_ms", work_ms)?;
                let k = at_least_one("iterations", iterations.unwrap_or(1))?;
                let f = seq_fraction.unwrap_or(0.0);
                finite_in(
                    &format!("{base}.seq_fraction"),
                    f,
                    0.0,
                    0.999_999,
                    "0 <= seq_fraction < 1",
                )?;
                Pattern::ForkJoin {
                    work: ms_ns(w),
                    iterations: k,
                    seq_fraction: f,
                }
            }
            &ProgramPattern::Periodic {
                period_ms,
                wcet_ms,
                deadline_ms,
                jobs,
            } => {
                let period = need("period_ms", period_ms)?;
                let wcet = need("wcet_ms", wcet_ms)?;
                let dl = deadline_ms.unwrap_or(period);
                positive(&format!("{base}.deadline_ms"), dl)?;
                Pattern::Periodic {
                    wcet: ms_ns(wcet),
                    period: SimTime::from_ms_f64(period),
                    deadline: SimTime::from_ms_f64(dl),
                    jobs: at_least_one("jobs", jobs.unwrap_or(u32::MAX))?,
                }
            }
            ProgramPattern::Phases {
                phases,
                loops,
                barrier_count,
            } => {
                if phases.is_empty() {
                    return Err(at(
                        format!("{base}.phases"),
                        "empty list; give at least one phase",
                    ));
                }
                let loops = at_least_one("loops", loops.unwrap_or(1))?;
                let ops = phase_ops(&base, phases, m, &base_params, &mut params)?;
                if let Some(bc) = *barrier_count {
                    if !ops.contains(&Op::Barrier) {
                        return Err(at(
                            format!("{base}.barrier_count"),
                            "the program has no barrier phase",
                        ));
                    }
                    if bc == 0 || bc > threads || threads % bc != 0 {
                        return Err(at(
                            format!("{base}.barrier_count"),
                            format!(
                                "{bc}: a barrier of {bc} threads can never be met by {threads} threads \
                                 (must divide the thread count)"
                            ),
                        ));
                    }
                }
                Pattern::Phases {
                    ops,
                    loops,
                    barrier_count: *barrier_count,
                }
            }
        };
        let per_thread = patterns::expand(&pattern, threads, &mut prog);
        prog.params = params;
        let sched = super::os::sched_attr(&base, c)?;
        let weight = if sched.policy == crate::os::SchedPolicy::Idle {
            crate::os::WEIGHT_IDLEPRIO
        } else {
            nice_to_weight(c.nice)
        };
        for (th, (ops, loops)) in per_thread.into_iter().enumerate() {
            let id = tasks.len();
            prog.threads.push(id);
            tasks.push(Task {
                id,
                program: i,
                thread: th as u32,
                ops,
                loops,
                pc: 0,
                iter: 0,
                state: TaskState::NotStarted,
                state_since: SimTime::ZERO,
                cpu: 0,
                last_ran: None,
                affinity: affinity.clone(),
                nice: c.nice,
                weight,
                sched,
                slice_ns: c.slice_ms.map(|s| (s * 1e6).round() as u64),
                remaining: 0.0,
                param: 0,
                pending_io: 0,
                release: SimTime::ZERO,
                deadline: None,
                wake_gen: 0,
                class,
                start: None,
                end: None,
                kill_reason: None,
                stall_until: SimTime::ZERO,
                pending_stall: 0,
                c: Counters {
                    run_ns_by_type: vec![0; m.types.len()],
                    ..Default::default()
                },
            });
        }
        programs.push(prog);
    }
    Ok((tasks, programs))
}

/// The operations of a `phases` program's phases, adding each compute
/// phase's parameter set to `params` (identical sets shared).
fn phase_ops(
    base: &str,
    phases: &[PhaseSpec],
    m: &Machine,
    base_params: &ComputeParams,
    params: &mut Vec<ComputeParams>,
) -> Result<Vec<Op>, SimError> {
    let mut ops = Vec::new();
    for (j, ph) in phases.iter().enumerate() {
        let pp = format!("{base}.phases[{j}]");
        let set = [
            ph.compute_ms.is_some(),
            ph.sleep_ms.is_some(),
            ph.barrier.is_some(),
        ];
        if set.iter().filter(|x| **x).count() != 1 {
            return Err(at(&pp, "give exactly one of compute_ms, sleep_ms, barrier"));
        }
        if let Some(c) = ph.compute_ms {
            positive(&format!("{pp}.compute_ms"), c)?;
            let mut cp = base_params.clone();
            if let Some(cl) = &ph.class {
                cp.class = m.class_id(cl).expect("interned");
            }
            if let Some(v) = ph.mem {
                finite_in(&format!("{pp}.mem"), v, 0.0, 0.999_999, "0 <= mem < 1")?;
                cp.mem = v;
            }
            if let Some(v) = ph.ipc {
                positive(&format!("{pp}.ipc"), v)?;
                cp.ipc = v;
            }
            if let Some(v) = ph.miss_ratio {
                finite_in(&format!("{pp}.miss_ratio"), v, 0.0, 1.0, "0 to 1")?;
                cp.miss_ratio = v;
            }
            if let Some(f) = &ph.feature {
                cp.feature = Some(m.feature_id(f).expect("interned"));
            }
            let idx = match params.iter().position(|x| *x == cp) {
                Some(ix) => ix,
                None => {
                    params.push(cp);
                    params.len() - 1
                }
            };
            ops.push(Op::Compute {
                work: c * 1e6,
                param: idx as u32,
            });
        } else {
            if ph.class.is_some()
                || ph.mem.is_some()
                || ph.ipc.is_some()
                || ph.miss_ratio.is_some()
                || ph.feature.is_some()
            {
                return Err(at(
                    &pp,
                    "class, mem, ipc, miss_ratio and feature apply to compute phases only",
                ));
            }
            if let Some(s) = ph.sleep_ms {
                finite_in(&format!("{pp}.sleep_ms"), s, 0.0, 1e10, "0 or more ms")?;
                ops.push(Op::Sleep {
                    ns: SimTime::from_ms_f64(s).0,
                });
            } else if ph.barrier == Some(true) {
                ops.push(Op::Barrier);
            } else {
                return Err(at(
                    format!("{pp}.barrier"),
                    "false is not a phase; use barrier = true or drop the phase",
                ));
            }
        }
    }
    Ok(ops)
}
