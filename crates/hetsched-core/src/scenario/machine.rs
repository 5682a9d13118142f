//! Building and validating the machine and the cpusets of a scenario.

use super::*;

/// The most CPUs a machine may have (the limit docs/scenarios.md states).
pub(crate) const MAX_CPUS: u64 = 1 << 16;

pub(crate) fn build_machine(
    ms: &MachineSpec,
    classes: Vec<String>,
    features: Vec<String>,
) -> Result<Machine, SimError> {
    finite_in("machine.tick_hz", ms.tick_hz, 1.0, 100_000.0, "1 to 100000")?;
    finite_in(
        "machine.platform_base_w",
        ms.platform_base_w,
        0.0,
        1e6,
        "0 to 1e6 W",
    )?;
    let names: Vec<&String> = ms.types.keys().collect();
    let known = || {
        names
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut types = Vec::new();
    for (name, t) in &ms.types {
        let p = format!("machine.types.{name}");
        if t.capacity == 0 || t.capacity > 1024 {
            return Err(at(
                format!("{p}.capacity"),
                format!("{} is out of range; allowed 1 to 1024", t.capacity),
            ));
        }
        if t.pstates.is_empty() {
            return Err(at(format!("{p}.pstates"), "at least one P-state is needed"));
        }
        let mut ps: Vec<PState> = Vec::new();
        for (i, s) in t.pstates.iter().enumerate() {
            if s.mhz == 0 {
                return Err(at(
                    format!("{p}.pstates[{i}].mhz"),
                    "0 MHz is not allowed; must be > 0",
                ));
            }
            finite_in(
                &format!("{p}.pstates[{i}].volt"),
                s.volt,
                0.01,
                10.0,
                "0.01 to 10 V",
            )?;
            if ps.iter().any(|x| x.mhz == s.mhz) {
                return Err(at(
                    format!("{p}.pstates[{i}].mhz"),
                    format!("{} MHz is listed twice", s.mhz),
                ));
            }
            ps.push(PState {
                mhz: s.mhz,
                volt: s.volt,
            });
        }
        ps.sort_by_key(|s| s.mhz);
        let mut speed = vec![1.0; classes.len()];
        for (c, v) in &t.class_speedup {
            positive(&format!("{p}.class_speedup.{c}"), *v)?;
            let idx = classes.iter().position(|x| x == c).expect("interned");
            speed[idx] = *v;
        }
        if !(t.smt_factor > 0.0 && t.smt_factor <= 1.0) {
            return Err(at(
                format!("{p}.smt_factor"),
                format!("{} is out of range; allowed (0, 1]", t.smt_factor),
            ));
        }
        let pw = &t.power;
        finite_in(
            &format!("{p}.power.dyn_w_per_v2ghz"),
            pw.dyn_w_per_v2ghz,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.power.static_w_per_v"),
            pw.static_w_per_v,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.power.idle_w"),
            pw.idle_w,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.power.stall_activity"),
            pw.stall_activity,
            0.0,
            1.0,
            "0 to 1",
        )?;
        finite_in(
            &format!("{p}.power.idle_leak_w_per_v3"),
            pw.idle_leak_w_per_v3,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.power.idle_clock_w_per_v2ghz"),
            pw.idle_clock_w_per_v2ghz,
            0.0,
            1e4,
            "0 to 1e4",
        )?;
        finite_in(
            &format!("{p}.freq_transition_us"),
            t.freq_transition_us,
            0.0,
            1e6,
            "0 to 1e6 µs",
        )?;
        let mut mask = 0u64;
        for f in &t.features {
            mask |= 1u64 << features.iter().position(|x| x == f).expect("interned");
        }
        types.push(CpuType {
            name: name.clone(),
            capacity: t.capacity,
            pstates: ps,
            class_speedup: speed,
            features: mask,
            smt_factor: t.smt_factor,
            power: PowerModel {
                dyn_w_per_v2ghz: pw.dyn_w_per_v2ghz,
                static_w_per_v: pw.static_w_per_v,
                idle_w: pw.idle_w,
                stall_activity: pw.stall_activity,
                idle_leak_w_per_v3: pw.idle_leak_w_per_v3,
                idle_clock_w_per_v2ghz: pw.idle_clock_w_per_v2ghz,
            },
            freq_transition: SimTime::from_ns_f64(t.freq_transition_us * 1e3),
            rating: match t.rating {
                Some(r) => {
                    positive(&format!("{p}.rating"), r)?;
                    Some(r)
                }
                None => None,
            },
        });
    }
    let type_idx = |path: &str, name: &str| -> Result<usize, SimError> {
        ms.types.keys().position(|k| k == name).ok_or_else(|| {
            if names.is_empty() {
                at(path, format!("unknown cpu type \"{name}\"; no types are defined (add [machine.types.{name}])"))
            } else {
                at(path, format!("unknown cpu type \"{name}\"; known: {}", known()))
            }
        })
    };
    // (type, node, core, llc, domain key, duty)
    let mut raw: Vec<(usize, u32, u32, u32, u64, f64, String)> = Vec::new();
    if !ms.clusters.is_empty() && !ms.cpus.is_empty() {
        return Err(at(
            "machine",
            "give either machine.clusters or machine.cpus, not both",
        ));
    }
    // The CPU count is checked before any CPU is built: `cores = 1e9` must be
    // refused, not allocated.
    let total: u128 = ms
        .clusters
        .iter()
        .map(|c| u128::from(c.count) * u128::from(c.cores) * u128::from(c.smt))
        .sum::<u128>()
        + ms.cpus.len() as u128;
    if total > u128::from(MAX_CPUS) {
        return Err(at(
            "machine",
            format!("{total} CPUs; at most {MAX_CPUS} (count × cores × smt summed over machine.clusters, plus machine.cpus)"),
        ));
    }
    let (mut core_id, mut llc_id, mut dom_id) = (0u32, 0u32, 0u64);
    for (i, c) in ms.clusters.iter().enumerate() {
        let p = format!("machine.clusters[{i}]");
        let ty = type_idx(&format!("{p}.type"), &c.ty)?;
        if c.cores == 0 {
            return Err(at(
                format!("{p}.cores"),
                "0 is not allowed; a cluster has at least one core",
            ));
        }
        if c.smt == 0 || c.smt > 8 {
            return Err(at(
                format!("{p}.smt"),
                format!("{} is out of range; allowed 1 to 8", c.smt),
            ));
        }
        if c.count == 0 {
            return Err(at(format!("{p}.count"), "0 is not allowed; at least 1"));
        }
        finite_in(
            &format!("{p}.duty_cycle"),
            c.duty_cycle,
            1e-6,
            1.0,
            "(0, 1]",
        )?;
        for _ in 0..c.count {
            for _ in 0..c.cores {
                for _ in 0..c.smt {
                    raw.push((ty, c.node, core_id, llc_id, dom_id, c.duty_cycle, p.clone()));
                }
                core_id += 1;
                if c.dvfs == DvfsScope::Core {
                    dom_id += 1;
                }
            }
            llc_id += 1;
            if c.dvfs == DvfsScope::Cluster {
                dom_id += 1;
            }
        }
    }
    for (i, c) in ms.cpus.iter().enumerate() {
        let p = format!("machine.cpus[{i}]");
        let ty = type_idx(&format!("{p}.type"), &c.ty)?;
        finite_in(
            &format!("{p}.duty_cycle"),
            c.duty_cycle,
            1e-6,
            1.0,
            "(0, 1]",
        )?;
        let core = c.core.unwrap_or(1_000_000 + i as u32);
        let llc = c.llc.unwrap_or(c.node);
        let dom = c
            .freq_domain
            .map(|d| d as u64)
            .unwrap_or(1 << 40 | core as u64);
        raw.push((ty, c.node, core, llc, dom, c.duty_cycle, p));
    }
    if raw.is_empty() {
        return Err(at(
            "machine",
            "the machine has no CPUs; give machine.clusters, machine.cpus or machine.preset",
        ));
    }

    // Dense ids for domains, in order of first appearance.
    let mut dom_map: BTreeMap<u64, usize> = BTreeMap::new();
    let mut domains: Vec<FreqDomain> = Vec::new();
    let mut cpus = Vec::new();
    for (id, (ty, node, core, llc, dk, duty, path)) in raw.iter().enumerate() {
        let d = *dom_map.entry(*dk).or_insert_with(|| {
            domains.push(FreqDomain {
                id: domains.len(),
                cpus: vec![],
                ty: *ty,
            });
            domains.len() - 1
        });
        if domains[d].ty != *ty {
            return Err(at(
                format!("{path}.freq_domain"),
                format!(
                    "frequency domain mixes cpu types \"{}\" and \"{}\"; a domain's CPUs share one type",
                    types[domains[d].ty].name, types[*ty].name
                ),
            ));
        }
        domains[d].cpus.push(id);
        cpus.push(Cpu {
            id,
            ty: *ty,
            node: *node,
            core: *core,
            llc: *llc,
            domain: d,
            duty_cycle: *duty,
            siblings: vec![],
        });
    }
    // Renumber cores densely and find SMT siblings.
    let mut core_map: BTreeMap<(u32, u32), u32> = BTreeMap::new();
    for c in &mut cpus {
        let n = core_map.len() as u32;
        c.core = *core_map.entry((c.node, c.core)).or_insert(n);
    }
    let mut by_core: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for c in &cpus {
        by_core.entry(c.core).or_default().push(c.id);
    }
    for sibs in by_core.values() {
        let t0 = cpus[sibs[0]].ty;
        for &s in sibs {
            if cpus[s].ty != t0 {
                return Err(at(
                    format!("machine.cpus[{s}].core"),
                    "SMT siblings (CPUs sharing a core) must be of one type",
                ));
            }
            cpus[s].siblings = sibs.iter().copied().filter(|&x| x != s).collect();
        }
    }
    let fmax_ghz = types.iter().map(|t| t.fmax()).max().unwrap_or(1000) as f64 / 1000.0;
    let ref_ghz = match ms.ref_ghz {
        Some(g) => {
            positive("machine.ref_ghz", g)?;
            g
        }
        None => fmax_ghz,
    };
    let mg = &ms.migration;
    finite_in(
        "machine.migration.line_bytes",
        mg.line_bytes,
        1.0,
        4096.0,
        "1 to 4096",
    )?;
    finite_in(
        "machine.migration.private_kb",
        mg.private_kb,
        0.0,
        1e9,
        "0 or more KiB",
    )?;
    finite_in(
        "machine.migration.llc_kb",
        mg.llc_kb,
        0.0,
        1e9,
        "0 or more KiB",
    )?;
    finite_in(
        "machine.migration.mem_line_ns",
        mg.mem_line_ns,
        0.0,
        1e6,
        "0 to 1e6 ns",
    )?;
    finite_in(
        "machine.migration.llc_line_ns",
        mg.llc_line_ns,
        0.0,
        1e6,
        "0 to 1e6 ns",
    )?;
    finite_in(
        "machine.fault_trap_us",
        ms.fault_trap_us,
        0.0,
        1e6,
        "0 to 1e6 µs",
    )?;
    let uncore = match &ms.uncore {
        None => crate::hw::UncorePower::default(),
        Some(u) => {
            for (name, v) in [
                ("idle_w", u.idle_w),
                ("busy_w", u.busy_w),
                ("stall_w", u.stall_w),
            ] {
                finite_in(&format!("machine.uncore.{name}"), v, 0.0, 1e4, "0 to 1e4 W")?;
            }
            crate::hw::UncorePower {
                idle_w: u.idle_w,
                busy_w: u.busy_w,
                stall_w: u.stall_w,
            }
        }
    };
    let node_ids: std::collections::BTreeSet<u32> = cpus.iter().map(|c| c.node).collect();
    let voltage_plane = voltage_planes(ms.voltage_planes, &cpus, &domains)?;
    Ok(Machine {
        migration: crate::hw::MigrationModel {
            enabled: mg.enabled,
            line_bytes: mg.line_bytes,
            private_kb: mg.private_kb,
            llc_kb: mg.llc_kb,
            mem_line_ns: mg.mem_line_ns,
            llc_line_ns: mg.llc_line_ns,
        },
        fault_trap: SimTime::from_ns_f64(ms.fault_trap_us * 1e3),
        types,
        cpus,
        domains,
        tick: SimTime::from_ns_f64(1e9 / ms.tick_hz),
        platform_base_w: ms.platform_base_w,
        voltage_plane,
        uncore,
        nodes: node_ids.len(),
        ref_ghz,
        classes,
        features,
    })
}

/// The voltage plane of each frequency domain (empty: one plane per
/// domain). With `node`, the domains of one node share a plane; a domain
/// whose CPUs lie on more than one node cannot be placed.
fn voltage_planes(
    how: VoltagePlanes,
    cpus: &[Cpu],
    domains: &[FreqDomain],
) -> Result<Vec<usize>, SimError> {
    if how == VoltagePlanes::Domain {
        return Ok(Vec::new());
    }
    let mut plane_of_node: BTreeMap<u32, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(domains.len());
    for d in domains {
        let node = cpus[d.cpus[0]].node;
        if let Some(&c) = d.cpus.iter().find(|&&c| cpus[c].node != node) {
            return Err(at(
                "machine.voltage_planes",
                format!(
                    "\"node\" puts each node's CPUs on one voltage plane, but frequency domain {} \
                     spans nodes {node} and {} (cpu {c}); give each domain CPUs of one node, or use \"domain\"",
                    d.id, cpus[c].node
                ),
            ));
        }
        let n = plane_of_node.len();
        out.push(*plane_of_node.entry(node).or_insert(n));
    }
    Ok(out)
}

/// Validate the scenario's cpusets against the machine.
pub fn build_cpusets(specs: &[CpusetSpec], m: &Machine) -> Result<Vec<Cpuset>, SimError> {
    let n = m.ncpus();
    let mut owner: Vec<Option<usize>> = vec![None; n];
    let mut out: Vec<Cpuset> = Vec::new();
    for (i, c) in specs.iter().enumerate() {
        let p = format!("cpusets[{i}]");
        if c.name.trim().is_empty() {
            return Err(at(format!("{p}.name"), "empty name"));
        }
        if let Some(j) = out.iter().position(|o| o.name == c.name) {
            return Err(at(
                format!("{p}.name"),
                format!("\"{}\" is already the name of cpusets[{j}]", c.name),
            ));
        }
        if c.cpus.is_empty() {
            return Err(at(
                format!("{p}.cpus"),
                "empty list; a cpuset has at least one cpu",
            ));
        }
        let mut cpus = Vec::new();
        for (k, &cpu) in c.cpus.iter().enumerate() {
            let cpu = cpu as usize;
            if cpu >= n {
                return Err(at(
                    format!("{p}.cpus[{k}]"),
                    format!(
                        "cpu {cpu} does not exist (machine has {n} cpus: 0-{})",
                        n - 1
                    ),
                ));
            }
            if cpus.contains(&cpu) {
                return Err(at(
                    format!("{p}.cpus[{k}]"),
                    format!("cpu {cpu} is named twice"),
                ));
            }
            if let Some(o) = owner[cpu] {
                return Err(at(
                    format!("{p}.cpus[{k}]"),
                    format!("cpu {cpu} is already in cpuset \"{}\"", specs[o].name),
                ));
            }
            owner[cpu] = Some(i);
            cpus.push(cpu);
        }
        cpus.sort_unstable();
        if let Some(mhz) = c.mhz {
            for &cpu in &cpus {
                let d = &m.domains[m.cpus[cpu].domain];
                if let Some(&other) = d.cpus.iter().find(|x| !cpus.contains(x)) {
                    return Err(at(
                        format!("{p}.mhz"),
                        format!(
                            "cpu {cpu} shares its frequency domain with cpu {other}, which is not in this cpuset; \
                             a cpuset with its own frequency needs whole domains (use dvfs = \"core\")"
                        ),
                    ));
                }
                let t = &m.types[d.ty];
                if t.pstate_index(mhz).is_none() {
                    let below = t.pstates.iter().rev().find(|s| s.mhz < mhz).map(|s| s.mhz);
                    let above = t.pstates.iter().find(|s| s.mhz > mhz).map(|s| s.mhz);
                    let near: Vec<String> = [below, above]
                        .iter()
                        .flatten()
                        .map(|v| format!("{v} MHz"))
                        .collect();
                    return Err(at(
                        format!("{p}.mhz"),
                        format!(
                            "{mhz} MHz is not a P-state of cpu type \"{}\" (cpu {cpu}); nearest: {}",
                            t.name,
                            near.join(" or ")
                        ),
                    ));
                }
            }
        }
        out.push(Cpuset {
            name: c.name.clone(),
            cpus,
            mhz: c.mhz,
        });
    }
    Ok(out)
}
