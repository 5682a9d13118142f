//! Building and validating the programs and threads of a scenario.

use super::*;

/// Which program kinds use which optional fields.
const FIELD_KINDS: &[(&str, &[ProgramKind])] = {
    use ProgramKind::*;
    &[
        (
            "threads",
            &[
                Sequential, Parallel, Dynamic, ForkJoin, Pool, Periodic, Phases,
            ],
        ),
        ("work_ms", &[Sequential, Parallel, Dynamic, ForkJoin, Pool]),
        ("iterations", &[Parallel, ForkJoin]),
        ("seq_fraction", &[ForkJoin]),
        ("chunks", &[Dynamic, Pool]),
        ("io_ms", &[Pool]),
        ("period_ms", &[Periodic]),
        ("wcet_ms", &[Periodic]),
        ("deadline_ms", &[Periodic]),
        ("jobs", &[Periodic]),
        ("phases", &[Phases]),
        ("loops", &[Phases]),
        ("barrier_count", &[Phases]),
    ]
};

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
        let given: Vec<(&str, bool)> = vec![
            ("threads", p.threads.is_some()),
            ("work_ms", p.work_ms.is_some()),
            ("iterations", p.iterations.is_some()),
            ("seq_fraction", p.seq_fraction.is_some()),
            ("chunks", p.chunks.is_some()),
            ("io_ms", p.io_ms.is_some()),
            ("period_ms", p.period_ms.is_some()),
            ("wcet_ms", p.wcet_ms.is_some()),
            ("deadline_ms", p.deadline_ms.is_some()),
            ("jobs", p.jobs.is_some()),
            ("phases", p.phases.is_some()),
            ("loops", p.loops.is_some()),
            ("barrier_count", p.barrier_count.is_some()),
        ];
        for (field, is_given) in given {
            if !is_given {
                continue;
            }
            let kinds = FIELD_KINDS
                .iter()
                .find(|(f, _)| *f == field)
                .expect("listed")
                .1;
            if !kinds.contains(&p.kind) {
                let users: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                return Err(at(
                    format!("{base}.{field}"),
                    format!(
                        "not used by kind \"{}\" (used by: {})",
                        p.kind.name(),
                        users.join(", ")
                    ),
                ));
            }
        }
        let need = |field: &str, v: Option<f64>| -> Result<f64, SimError> {
            let v = v.ok_or_else(|| {
                at(
                    format!("{base}.{field}"),
                    format!("required for kind \"{}\"", p.kind.name()),
                )
            })?;
            positive(&format!("{base}.{field}"), v)?;
            Ok(v)
        };
        let threads = p.threads.unwrap_or(1);
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
        if p.kind == ProgramKind::Sequential && threads != 1 {
            return Err(at(
                format!("{base}.threads"),
                "a sequential program has exactly 1 thread",
            ));
        }
        finite_in(
            &format!("{base}.start_ms"),
            p.start_ms,
            0.0,
            1e10,
            "0 or more ms",
        )?;
        if p.repeat == 0 {
            return Err(at(format!("{base}.repeat"), "0 is not allowed; at least 1"));
        }
        if !(-20..=19).contains(&p.nice) {
            return Err(at(
                format!("{base}.nice"),
                format!("{} is out of range; allowed -20 to 19", p.nice),
            ));
        }
        if let Some(s) = p.slice_ms {
            finite_in(
                &format!("{base}.slice_ms"),
                s,
                0.1,
                100.0,
                "0.1 to 100 (ms)",
            )?;
        }
        let mut prev_after = 0;
        for (k, step) in p.nice_schedule.iter().enumerate() {
            let sp = format!("{base}.nice_schedule[{k}]");
            if step.after <= prev_after || step.after >= p.repeat {
                return Err(at(
                    format!("{sp}.after"),
                    format!(
                        "{} is not allowed; steps need increasing values from {} to repeat - 1 = {}",
                        step.after,
                        prev_after + 1,
                        p.repeat.saturating_sub(1)
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
            p.mem,
            0.0,
            0.999_999,
            "0 <= mem < 1",
        )?;
        positive(&format!("{base}.ipc"), p.ipc)?;
        finite_in(
            &format!("{base}.refs_per_instr"),
            p.refs_per_instr,
            0.0,
            10.0,
            "0 to 10",
        )?;
        finite_in(
            &format!("{base}.miss_ratio"),
            p.miss_ratio,
            0.0,
            1.0,
            "0 to 1",
        )?;
        finite_in(
            &format!("{base}.working_set_kb"),
            p.working_set_kb,
            0.0,
            1e9,
            "0 or more KiB",
        )?;
        finite_in(
            &format!("{base}.jitter"),
            p.jitter,
            0.0,
            0.999_999,
            "0 <= jitter < 1",
        )?;
        if let Some(f) = p.smt_factor {
            if !(f.is_finite() && f > 0.0 && f <= 1.0) {
                return Err(at(
                    format!("{base}.smt_factor"),
                    format!("{f} is out of range; allowed (0, 1]"),
                ));
            }
        }
        let affinity = match &p.affinity {
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
        let affinity = match (&p.cpuset, &p.affinity) {
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
        let class = m.class_id(&p.class).expect("interned");
        let feature = p
            .feature
            .as_ref()
            .map(|f| m.feature_id(f).expect("interned"));
        let base_params = ComputeParams {
            class,
            mem: p.mem,
            ipc: p.ipc,
            refs_per_instr: p.refs_per_instr,
            miss_ratio: p.miss_ratio,
            working_set_kb: p.working_set_kb,
            feature,
            smt_factor: p.smt_factor,
        };
        let mut params = vec![base_params.clone()];
        let name = p.name.clone().unwrap_or_else(|| format!("p{i}"));
        let mut prog = Program {
            id: i,
            name,
            kind: p.kind.name().to_string(),
            threads: vec![],
            start: SimTime::from_ms_f64(p.start_ms),
            repeat: p.repeat,
            instance: 0,
            instance_start: SimTime::ZERO,
            live: 0,
            params: vec![],
            barrier_size: threads,
            barrier_count: threads,
            barrier_waiting: vec![],
            chunks: 0,
            chunks_left: 0,
            chunk_work: 0.0,
            chunk_param: 0,
            chunk_io: SimTime::ZERO,
            period: SimTime::ZERO,
            rel_deadline: SimTime::ZERO,
            jitter: p.jitter,
            completions: vec![],
            nice_schedule: p.nice_schedule.iter().map(|n| (n.after, n.nice)).collect(),
        };
        // Per-thread (ops, loops); identical threads share one Arc.
        let mut per_thread: Vec<(Arc<[Op]>, u32)> = Vec::new();
        let cmp = |w: f64| Op::Compute { work: w, param: 0 };
        match p.kind {
            ProgramKind::Sequential => {
                let w = need("work_ms", p.work_ms)?;
                per_thread.push((vec![cmp(ms_ns(w))].into(), 1));
            }
            ProgramKind::Parallel => {
                let w = need("work_ms", p.work_ms)?;
                let k = p.iterations.unwrap_or(1);
                if k == 0 {
                    return Err(at(
                        format!("{base}.iterations"),
                        "0 is not allowed; at least 1",
                    ));
                }
                let each = ms_ns(w) / (threads as f64 * k as f64);
                let ops: Arc<[Op]> = if k > 1 {
                    vec![cmp(each), Op::Barrier].into()
                } else {
                    vec![cmp(each)].into()
                };
                for _ in 0..threads {
                    per_thread.push((ops.clone(), k));
                }
            }
            ProgramKind::Dynamic | ProgramKind::Pool => {
                let w = need("work_ms", p.work_ms)?;
                let chunks = p.chunks.ok_or_else(|| {
                    at(
                        format!("{base}.chunks"),
                        format!("required for kind \"{}\"", p.kind.name()),
                    )
                })?;
                if chunks == 0 {
                    return Err(at(format!("{base}.chunks"), "0 is not allowed; at least 1"));
                }
                let io = p.io_ms.unwrap_or(0.0);
                finite_in(&format!("{base}.io_ms"), io, 0.0, 1e9, "0 or more ms")?;
                prog.chunks = chunks as u64;
                prog.chunk_work = ms_ns(w) / chunks as f64;
                prog.chunk_io = SimTime::from_ms_f64(io);
                let ops: Arc<[Op]> = vec![Op::Pull].into();
                for _ in 0..threads {
                    per_thread.push((ops.clone(), 1));
                }
            }
            ProgramKind::ForkJoin => {
                let w = need("work_ms", p.work_ms)?;
                let k = p.iterations.unwrap_or(1);
                if k == 0 {
                    return Err(at(
                        format!("{base}.iterations"),
                        "0 is not allowed; at least 1",
                    ));
                }
                let f = p.seq_fraction.unwrap_or(0.0);
                finite_in(
                    &format!("{base}.seq_fraction"),
                    f,
                    0.0,
                    0.999_999,
                    "0 <= seq_fraction < 1",
                )?;
                let per_iter = ms_ns(w) / k as f64;
                let seq = per_iter * f;
                let par = per_iter * (1.0 - f) / threads as f64;
                let mut main = Vec::new();
                let mut other = Vec::new();
                if seq > 0.0 {
                    main.push(cmp(seq));
                    main.push(Op::Barrier);
                    other.push(Op::Barrier);
                }
                for ops in [&mut main, &mut other] {
                    ops.push(cmp(par));
                    ops.push(Op::Barrier);
                }
                let other: Arc<[Op]> = other.into();
                per_thread.push((main.into(), k));
                for _ in 1..threads {
                    per_thread.push((other.clone(), k));
                }
            }
            ProgramKind::Periodic => {
                let period = need("period_ms", p.period_ms)?;
                let wcet = need("wcet_ms", p.wcet_ms)?;
                let dl = p.deadline_ms.unwrap_or(period);
                positive(&format!("{base}.deadline_ms"), dl)?;
                let jobs = p.jobs.unwrap_or(u32::MAX);
                if jobs == 0 {
                    return Err(at(format!("{base}.jobs"), "0 is not allowed; at least 1"));
                }
                prog.period = SimTime::from_ms_f64(period);
                prog.rel_deadline = SimTime::from_ms_f64(dl);
                let ops: Arc<[Op]> = vec![cmp(ms_ns(wcet)), Op::WaitPeriod].into();
                for _ in 0..threads {
                    per_thread.push((ops.clone(), jobs));
                }
            }
            ProgramKind::Phases => {
                let phases = p
                    .phases
                    .as_ref()
                    .ok_or_else(|| at(format!("{base}.phases"), "required for kind \"phases\""))?;
                if phases.is_empty() {
                    return Err(at(
                        format!("{base}.phases"),
                        "empty list; give at least one phase",
                    ));
                }
                let loops = p.loops.unwrap_or(1);
                if loops == 0 {
                    return Err(at(format!("{base}.loops"), "0 is not allowed; at least 1"));
                }
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
                            work: ms_ns(c),
                            param: idx as u32,
                        });
                    } else {
                        if ph.class.is_some()
                            || ph.mem.is_some()
                            || ph.ipc.is_some()
                            || ph.miss_ratio.is_some()
                            || ph.feature.is_some()
                        {
                            return Err(at(&pp, "class, mem, ipc, miss_ratio and feature apply to compute phases only"));
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
                if let Some(bc) = p.barrier_count {
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
                    prog.barrier_size = bc;
                    prog.barrier_count = bc;
                }
                let ops: Arc<[Op]> = ops.into();
                for _ in 0..threads {
                    per_thread.push((ops.clone(), loops));
                }
            }
        }
        if p.kind == ProgramKind::Dynamic || p.kind == ProgramKind::Pool {
            prog.chunk_param = 0;
        }
        prog.params = params;
        let weight = nice_to_weight(p.nice);
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
                nice: p.nice,
                weight,
                slice_ns: p.slice_ms.map(|s| (s * 1e6).round() as u64),
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
