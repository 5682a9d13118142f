//! Shared voltage planes and load-dependent uncore power (docs/power.md §1),
//! checked against hand-computed energies, and the bad input around them.

mod common;
use common::{err, go};
use hetsched_core::trace::TraceEvent;

/// Two Opteron-like cores (preset powers, no platform power), CPU 0 in an
/// 800 MHz cpuset and CPU 1 in a 2.3 GHz one, running `work_ms` of
/// reference work on CPU 0; `planes` is the `voltage_planes` line.
fn two_cores(planes: &str) -> hetsched_core::metrics::RunResults {
    go(&format!(
        "duration_s = 5\ngovernor = \"userspace\"\n\
         machine.preset = \"patel-opteron-8\"\nmachine.platform_base_w = 0.0\n{planes}\n\
         machine.clusters = [{{ type = \"opteron\", cores = 2, dvfs = \"core\" }}]\n\
         [[cpusets]]\nname = \"slow\"\ncpus = [0]\nmhz = 800\n\
         [[cpusets]]\nname = \"fast\"\ncpus = [1]\nmhz = 2300\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 230\ncpuset = \"slow\"\n"
    ))
}

#[test]
fn a_slow_core_runs_at_the_voltage_its_plane_needs() {
    // 230 ms of work at 800 MHz takes 230 × 2300/800 = 661.25 ms.
    // Own planes: busy 0.8×0.95 + 2.8×0.95²×0.8 = 2.7816 W.
    // One plane per node: CPU 1 asks for 2.3 GHz, so the plane runs at
    // 1.25 V and CPU 0 draws 0.8×1.25 + 2.8×1.25²×0.8 = 1.0 + 3.5 = 4.5 W.
    // CPU 1 idles at 2.3 GHz, 1.25 V in both: 3.8234375 W.
    let own = two_cores("");
    let shared = two_cores("machine.voltage_planes = \"node\"");
    let t = 0.66125;
    assert!(
        (own.cpus[0].energy_j - 2.7816 * t).abs() < 1e-9,
        "{}",
        own.cpus[0].energy_j
    );
    assert!(
        (shared.cpus[0].energy_j - 4.5 * t).abs() < 1e-9,
        "{}",
        shared.cpus[0].energy_j
    );
    assert!((shared.cpus[1].energy_j - 3.8234375 * t).abs() < 1e-9);
    assert!((shared.summary.peak_power_w - (4.5 + 3.8234375)).abs() < 1e-9);
    // The frequency is the core's own: the same completion time.
    assert_eq!(
        own.programs[0].completion_s,
        shared.programs[0].completion_s
    );
}

#[test]
fn a_plane_lowers_its_voltage_when_its_last_fast_domain_slows_down() {
    // ondemand (no transition latency) on two cores sharing one plane: CPU 1
    // idles and drops to 800 MHz at t1, but the plane stays at 1.25 V while
    // CPU 0 runs its 100 ms of work at 2.3 GHz; CPU 0 drops at t0 > 100 ms,
    // and from then on both run at 0.95 V. CPU 1's idle power:
    //   [0, t1)   2.3 GHz, 1.25 V: 1.7×1.953125 + 0.14×1.5625×2.3 = 3.8234375 W
    //   [t1, t0)  0.8 GHz, 1.25 V: 3.3203125 + 0.14×1.5625×0.8 = 3.4953125 W
    //   [t0, 1 s) 0.8 GHz, 0.95 V: 1.4575375 + 0.10108 = 1.5586175 W
    let r = go(
        "duration_s = 1\nstop_when_done = false\ngovernor = \"ondemand\"\n\
         machine.preset = \"patel-opteron-8\"\nmachine.platform_base_w = 0.0\n\
         machine.voltage_planes = \"node\"\n\
         machine.types.opteron.freq_transition_us = 0\n\
         machine.clusters = [{ type = \"opteron\", cores = 2, dvfs = \"core\" }]\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 100\naffinity = [0]\n",
    );
    let changes: Vec<(usize, u64, u32)> = r
        .trace
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Freq { t_ns, domain, mhz } => Some((*domain, *t_ns, *mhz)),
            _ => None,
        })
        .collect();
    // Each domain changes once, to 800 MHz.
    let at = |d: usize| {
        let c: Vec<_> = changes.iter().filter(|c| c.0 == d).collect();
        assert_eq!(c.len(), 1, "{changes:?}");
        assert_eq!(c[0].2, 800);
        c[0].1 as f64 * 1e-9
    };
    let (t0, t1) = (at(0), at(1));
    assert!(t1 < 0.1 && t0 > 0.1, "{t1} {t0}");
    let want = 3.8234375 * t1 + 3.4953125 * (t0 - t1) + 1.5586175 * (1.0 - t0);
    assert!(
        (r.cpus[1].energy_j - want).abs() < 1e-9,
        "{} vs {want}",
        r.cpus[1].energy_j
    );
}

#[test]
fn uncore_power_follows_busy_cores_and_their_memory_stalls() {
    // One core at 2.3 GHz runs 100 ms of work with mem = 0.6: s = 1, so it
    // takes 100 ms; cf = 0.4 / (0.4 + 0.6) = 0.4; core power
    // 1.0 + 10.0625 × (0.4 + 0.3 × 0.6) = 6.83625 W; uncore share
    // 0.5 + 1.0 × (1 − 0.4) = 1.1 W; the node's uncore idles at 2 W.
    // Energy: (6.83625 + 1.1) × 0.1 + 2 × 0.1 = 0.993625 J.
    let r = go("duration_s = 1\ngovernor = \"userspace\"\n\
         machine.preset = \"patel-opteron-8\"\nmachine.platform_base_w = 0.0\n\
         machine.uncore = { idle_w = 2.0, busy_w = 0.5, stall_w = 1.0 }\n\
         machine.clusters = [{ type = \"opteron\", cores = 1 }]\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 100\nmem = 0.6\n");
    assert!(
        (r.cpus[0].energy_j - 7.93625 * 0.1).abs() < 1e-9,
        "{}",
        r.cpus[0].energy_j
    );
    assert!(
        (r.summary.energy_j - 0.993625).abs() < 1e-9,
        "{}",
        r.summary.energy_j
    );
    assert!((r.summary.peak_power_w - 9.93625).abs() < 1e-9);
}

#[test]
fn bad_planes_and_uncore_are_named() {
    let base = "duration_s = 1\nmachine.preset = \"patel-opteron-8\"\n";
    let e = err(&format!("{base}machine.voltage_planes = \"socket\"\n"));
    assert!(e.contains("voltage_planes") && e.contains("node"), "{e}");
    let e = err(&format!("{base}machine.uncore = {{ stall_w = -1.0 }}\n"));
    assert!(
        e.contains("machine.uncore.stall_w") && e.contains("0 to 1e4"),
        "{e}"
    );
    let e = err(&format!("{base}machine.uncore = {{ watts = 1.0 }}\n"));
    assert!(e.contains("watts"), "{e}");
    // A frequency domain across two nodes cannot be on one node's plane.
    let e = err(
        "duration_s = 1\nmachine.voltage_planes = \"node\"\n[machine.types.c]\ncapacity = 1024\n\
         [[machine.cpus]]\ntype = \"c\"\nnode = 0\nfreq_domain = 0\n\
         [[machine.cpus]]\ntype = \"c\"\nnode = 1\nfreq_domain = 0\n",
    );
    assert!(
        e.contains("machine.voltage_planes") && e.contains("spans nodes 0 and 1"),
        "{e}"
    );
}
