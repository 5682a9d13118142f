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
use std::sync::Arc;

/// Threads built between two calls of the caller's interrupt check: a
/// million threads take about a second to build, so a Ctrl-C is noticed
/// within a few milliseconds of it.
const STOP_CHECK_THREADS: usize = 4096;

/// Build the programs and their threads. `stop` is asked every
/// [`STOP_CHECK_THREADS`] threads whether to give up (Ctrl-C): its error
/// ends the build as [`SimError::Interrupted`].
pub(crate) fn build_workload(
    ws: &WorkloadSpec,
    m: &Machine,
    cpusets: &[Cpuset],
    stop: &mut dyn FnMut() -> Result<(), String>,
) -> Result<(Vec<Task>, Vec<Program>), SimError> {
    let mut tasks: Vec<Task> = Vec::new();
    let mut programs = Vec::new();
    let n = m.ncpus();
    let ms_ns = |v: f64| v * 1e6;
    // Program names, for `fork` phases; timer periods seen so far (one name
    // is one timer for the whole workload).
    let names: Vec<String> = ws
        .programs
        .iter()
        .enumerate()
        .map(|(i, p)| p.common.name.clone().unwrap_or_else(|| format!("p{i}")))
        .collect();
    let mut timers: BTreeMap<String, (f64, String)> = BTreeMap::new();
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
        for (field, v) in [("uclamp_min", c.uclamp_min), ("uclamp_max", c.uclamp_max)] {
            if let Some(v) = v.filter(|&v| v > 1024) {
                return Err(at(
                    format!("{base}.{field}"),
                    format!("{v} is out of range; allowed 0 to 1024"),
                ));
            }
        }
        if let (Some(lo), Some(hi)) = (c.uclamp_min, c.uclamp_max) {
            if lo > hi {
                return Err(at(
                    format!("{base}.uclamp_min"),
                    format!("{lo} is above uclamp_max ({hi}); allowed 0 to {hi}"),
                ));
            }
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
        if let Some(s) = c.barrier_spin_ms {
            finite_in(
                &format!("{base}.barrier_spin_ms"),
                s,
                0.0,
                1e9,
                "0 or more ms",
            )?;
        }
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
        prog.barrier_spin = ms_ns(c.barrier_spin_ms.unwrap_or(0.0));
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
                forked,
            } => {
                if *forked == Some(true) {
                    if c.start_ms != 0.0 {
                        return Err(at(
                            format!("{base}.start_ms"),
                            "a forked program starts when a fork phase starts it; drop start_ms",
                        ));
                    }
                    if c.repeat != 1 {
                        return Err(at(
                            format!("{base}.repeat"),
                            "a forked program runs one instance per fork; drop repeat",
                        ));
                    }
                    prog.forked = true;
                }
                if phases.is_empty() {
                    return Err(at(
                        format!("{base}.phases"),
                        "empty list; give at least one phase",
                    ));
                }
                let loops = at_least_one("loops", loops.unwrap_or(1))?;
                // A `cpus` phase may leave the program's affinity (as
                // sched_setaffinity may) but not its cpuset.
                let allowed = match &c.cpuset {
                    Some(_) => affinity.clone(),
                    None => CpuSet::All,
                };
                let cx = PhaseCx {
                    base: &base,
                    m,
                    names: &names,
                    allowed: &allowed,
                };
                let ops = phase_ops(&cx, phases, &base_params, &mut params, &mut timers)?;
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
        stop().map_err(SimError::Interrupted)?;
        for (th, (ops, loops)) in per_thread.into_iter().enumerate() {
            let id = tasks.len();
            if id % STOP_CHECK_THREADS == STOP_CHECK_THREADS - 1 {
                stop().map_err(SimError::Interrupted)?;
            }
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
                uclamp: (c.uclamp_min.is_some() || c.uclamp_max.is_some()).then(|| {
                    crate::os::Uclamp {
                        min: c.uclamp_min.unwrap_or(0),
                        max: c.uclamp_max.unwrap_or(1024),
                    }
                }),
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
                    run_ns_by_type: crate::os::TypeTimes::new(m.types.len()),
                    ..Default::default()
                },
            });
        }
        programs.push(prog);
    }
    Ok((tasks, programs))
}

/// What the phases of one program are checked against.
struct PhaseCx<'a> {
    /// Path of the program (`workload.programs[2]`).
    base: &'a str,
    m: &'a Machine,
    /// Names of the workload's programs (fork targets).
    names: &'a [String],
    /// The program's cpuset, if it has one: a `cpus` phase stays within it.
    allowed: &'a CpuSet,
}

/// The action keys of a phase, in the order the error messages list them.
const ACTIONS: &str = "compute_ms, sleep_ms, barrier, run_for_ms, shared_barrier, suspend, \
                       resume, lock, unlock, wait, signal, broad, sync, post, pend, timer, yield, \
                       cpus, fork";

/// A name of a synchronisation object or program: not empty.
fn name_of(path: String, v: &str) -> Result<Arc<str>, SimError> {
    if v.trim().is_empty() {
        return Err(at(path, "empty name; give the object's name"));
    }
    Ok(Arc::from(v))
}

/// The operations of a `phases` program's phases, adding each compute
/// phase's parameter set to `params` (identical sets shared) and each timer
/// to `timers` (name → period and where it was first given).
fn phase_ops(
    cx: &PhaseCx,
    phases: &[PhaseSpec],
    base_params: &ComputeParams,
    params: &mut Vec<ComputeParams>,
    timers: &mut BTreeMap<String, (f64, String)>,
) -> Result<Vec<Op>, SimError> {
    let m = cx.m;
    let mut ops = Vec::new();
    for (j, ph) in phases.iter().enumerate() {
        let pp = format!("{}.phases[{j}]", cx.base);
        let field = |f: &str| format!("{pp}.{f}");
        // A `timer_ms` without `timer` (or the reverse) names what is missing.
        match (&ph.timer, ph.timer_ms) {
            (Some(_), None) => return Err(at(field("timer_ms"), "required with timer")),
            (None, Some(_)) => return Err(at(field("timer"), "required with timer_ms")),
            _ => {}
        }
        let set = [
            ph.compute_ms.is_some(),
            ph.sleep_ms.is_some(),
            ph.barrier.is_some(),
            ph.run_for_ms.is_some(),
            ph.shared_barrier.is_some(),
            ph.suspend.is_some(),
            ph.resume.is_some(),
            ph.lock.is_some(),
            ph.unlock.is_some(),
            ph.wait.is_some(),
            ph.signal.is_some(),
            ph.broad.is_some(),
            ph.sync.is_some(),
            ph.post.is_some(),
            ph.pend.is_some(),
            ph.timer.is_some(),
            ph.yield_.is_some(),
            ph.cpus.is_some(),
            ph.fork.is_some(),
        ];
        if set.iter().filter(|x| **x).count() != 1 {
            return Err(at(&pp, format!("give exactly one of {ACTIONS}")));
        }
        let cond_with_mutex = ph.wait.is_some() || ph.sync.is_some();
        if ph.mutex.is_some() && !cond_with_mutex {
            return Err(at(field("mutex"), "applies to wait and sync phases only"));
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
            continue;
        }
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
        let mutex = || -> Result<Arc<str>, SimError> {
            match &ph.mutex {
                Some(mx) => name_of(field("mutex"), mx),
                None => Err(at(
                    field("mutex"),
                    if ph.wait.is_some() {
                        "required with wait"
                    } else {
                        "required with sync"
                    },
                )),
            }
        };
        let op = if let Some(s) = ph.sleep_ms {
            finite_in(&format!("{pp}.sleep_ms"), s, 0.0, 1e10, "0 or more ms")?;
            Op::Sleep {
                ns: SimTime::from_ms_f64(s).0,
            }
        } else if let Some(b) = ph.barrier {
            if !b {
                return Err(at(
                    format!("{pp}.barrier"),
                    "false is not a phase; use barrier = true or drop the phase",
                ));
            }
            Op::Barrier
        } else if let Some(r) = ph.run_for_ms {
            positive(&field("run_for_ms"), r)?;
            finite_in(&field("run_for_ms"), r, 0.0, 1e10, "0 to 1e10 ms")?;
            Op::RunFor {
                ns: SimTime::from_ms_f64(r).0,
            }
        } else if let Some(n) = &ph.shared_barrier {
            Op::SharedBarrier {
                name: name_of(field("shared_barrier"), n)?,
            }
        } else if let Some(n) = &ph.suspend {
            // rt-app's suspend: a wait on the condition variable of that
            // name, under the mutex of that name.
            let x = name_of(field("suspend"), n)?;
            ops.push(Op::Lock { mutex: x.clone() });
            ops.push(Op::Wait {
                cond: x.clone(),
                mutex: x.clone(),
            });
            Op::Unlock { mutex: x }
        } else if let Some(n) = &ph.resume {
            // rt-app's resume: a broadcast on that condition variable, under
            // the mutex of that name.
            let x = name_of(field("resume"), n)?;
            ops.push(Op::Lock { mutex: x.clone() });
            ops.push(Op::Broad { cond: x.clone() });
            Op::Unlock { mutex: x }
        } else if let Some(n) = &ph.lock {
            Op::Lock {
                mutex: name_of(field("lock"), n)?,
            }
        } else if let Some(n) = &ph.unlock {
            Op::Unlock {
                mutex: name_of(field("unlock"), n)?,
            }
        } else if let Some(n) = &ph.wait {
            Op::Wait {
                cond: name_of(field("wait"), n)?,
                mutex: mutex()?,
            }
        } else if let Some(n) = &ph.signal {
            Op::Signal {
                cond: name_of(field("signal"), n)?,
            }
        } else if let Some(n) = &ph.broad {
            Op::Broad {
                cond: name_of(field("broad"), n)?,
            }
        } else if let Some(n) = &ph.sync {
            Op::SyncWait {
                cond: name_of(field("sync"), n)?,
                mutex: mutex()?,
            }
        } else if let Some(n) = &ph.post {
            Op::Post {
                sem: name_of(field("post"), n)?,
            }
        } else if let Some(n) = &ph.pend {
            Op::Pend {
                sem: name_of(field("pend"), n)?,
            }
        } else if let (Some(n), Some(p)) = (&ph.timer, ph.timer_ms) {
            let name = name_of(field("timer"), n)?;
            positive(&field("timer_ms"), p)?;
            finite_in(&field("timer_ms"), p, 0.0, 1e10, "0 to 1e10 ms")?;
            let ns = SimTime::from_ms_f64(p).0;
            if ns == 0 {
                return Err(at(field("timer_ms"), format!("{p} ms is below 1 ns")));
            }
            match timers.get(n.as_str()) {
                Some((q, wh)) if *q != p => {
                    return Err(at(
                        field("timer_ms"),
                        format!(
                            "timer \"{n}\" has period {q} ms at {wh}; one timer has one period \
                             (give this one another name)"
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    timers.insert(n.clone(), (p, field("timer_ms")));
                }
            }
            Op::Timer {
                name,
                period_ns: ns,
            }
        } else if let Some(y) = ph.yield_ {
            if !y {
                return Err(at(
                    field("yield"),
                    "false is not a phase; use yield = true or drop the phase",
                ));
            }
            Op::Yield
        } else if let Some(list) = &ph.cpus {
            let n = m.ncpus();
            if list.is_empty() {
                return Err(at(field("cpus"), "empty list; give at least one cpu"));
            }
            for (k, &c) in list.iter().enumerate() {
                if c as usize >= n {
                    return Err(at(
                        format!("{pp}.cpus[{k}]"),
                        format!("cpu {c} does not exist (machine has {n} cpus: 0-{})", n - 1),
                    ));
                }
                if !cx.allowed.contains(c as usize) {
                    return Err(at(
                        format!("{pp}.cpus[{k}]"),
                        format!(
                            "cpu {c} is outside the program's cpuset {:?}",
                            cx.allowed.to_vec(n)
                        ),
                    ));
                }
            }
            let mut v: Vec<usize> = list.iter().map(|&c| c as usize).collect();
            v.sort_unstable();
            v.dedup();
            Op::Cpus { cpus: v.into() }
        } else if let Some(f) = &ph.fork {
            let name = name_of(field("fork"), f)?;
            let hits = cx.names.iter().filter(|x| x.as_str() == f.as_str()).count();
            if hits == 0 {
                return Err(at(
                    field("fork"),
                    format!(
                        "no program is named \"{f}\"; known: {}",
                        cx.names.join(", ")
                    ),
                ));
            }
            if hits > 1 {
                return Err(at(
                    field("fork"),
                    format!(
                        "{hits} programs are named \"{f}\"; a forked program needs a unique name"
                    ),
                ));
            }
            Op::Fork { program: name }
        } else {
            unreachable!("exactly one action is set")
        };
        ops.push(op);
    }
    Ok(ops)
}
