//! The voltage-dependent idle power term, a program's `nice_schedule`, and
//! the bad input around them.

mod common;
use common::{err, go};

/// One idle Opteron-like core (no platform power) held at `mhz` for 1 s.
fn idle_core(mhz: u32, power: &str) -> f64 {
    let r = go(&format!(
        "duration_s = 1\nstop_when_done = false\ngovernor = \"userspace[mhz={mhz}]\"\n\
         machine.preset = \"patel-opteron-8\"\nmachine.platform_base_w = 0.0\n\
         machine.clusters = [{{ type = \"opteron\", cores = 1 }}]\n{power}"
    ));
    r.cpus[0].energy_j
}

#[test]
fn an_idle_core_leaks_less_at_a_lower_voltage() {
    // Preset: idle = 1.7 × V³ + 0.14 × V² × f_GHz.
    //   800 MHz, 0.95 V:  1.7 × 0.857375 + 0.14 × 0.9025 × 0.8 = 1.4575375 + 0.10108 = 1.5586175 W
    //   2300 MHz, 1.25 V: 1.7 × 1.953125 + 0.14 × 1.5625 × 2.3 = 3.3203125 + 0.503125 = 3.8234375 W
    let slow = idle_core(800, "");
    let fast = idle_core(2300, "");
    assert!((slow - 1.5586175).abs() < 1e-9, "{slow}");
    assert!((fast - 3.8234375).abs() < 1e-9, "{fast}");
}

#[test]
fn without_the_voltage_terms_idle_power_is_the_same_at_every_pstate() {
    // Both terms 0 (the default of every type but the Opteron-like
    // preset's): idle_w at any P-state.
    let power = "machine.types.opteron.power = { idle_w = 2.0, idle_leak_w_per_v3 = 0, idle_clock_w_per_v2ghz = 0 }\n";
    let slow = idle_core(800, power);
    let fast = idle_core(2300, power);
    assert!((slow - 2.0).abs() < 1e-9, "{slow}");
    assert!((fast - 2.0).abs() < 1e-9, "{fast}");
}

#[test]
fn idle_power_follows_a_frequency_change() {
    // ondemand drops an idle core from 2.3 GHz to 800 MHz at its first
    // sample (10 ms, with no transition latency here): 10 ms at 3.8234375 W,
    // then 990 ms at 1.5586175 W.
    let r = go(
        "duration_s = 1\nstop_when_done = false\ngovernor = \"ondemand\"\n\
         machine.preset = \"patel-opteron-8\"\nmachine.platform_base_w = 0.0\n\
         machine.types.opteron.freq_transition_us = 0\n\
         machine.clusters = [{ type = \"opteron\", cores = 1 }]\n",
    );
    let want = 0.01 * 3.8234375 + 0.99 * 1.5586175;
    assert!(
        (r.cpus[0].energy_j - want).abs() < 1e-9,
        "{} vs {want}",
        r.cpus[0].energy_j
    );
}

/// A program that restarts three times on CPU 0 beside a hog; `schedule`
/// renices it for later instances.
fn shared(schedule: &str) -> (Vec<f64>, i32) {
    let r = go(&format!(
        "duration_s = 10\nmachine.preset = \"patel-opteron-8\"\n\
         [[workload.programs]]\nname = \"hog\"\nkind = \"sequential\"\nwork_ms = 2000\naffinity = [0]\n\
         [[workload.programs]]\nname = \"rep\"\nkind = \"sequential\"\nwork_ms = 50\nrepeat = 3\n\
         affinity = [0]\n{schedule}"
    ));
    let times = r
        .programs
        .iter()
        .filter(|p| p.program == "rep")
        .map(|p| p.completion_s)
        .collect();
    let nice = r
        .tasks
        .iter()
        .find(|t| t.program == "rep")
        .expect("rep")
        .nice;
    (times, nice)
}

#[test]
fn a_nice_schedule_renices_later_instances() {
    // Beside an equal-weight hog each 50 ms instance takes about 100 ms.
    let (plain, nice) = shared("");
    assert_eq!((plain.len(), nice), (3, 0));
    // From the third instance on, nice 10 (weight 110 vs 1024): that one
    // gets about a tenth of the CPU and takes several times longer.
    let (later, nice) = shared("nice_schedule = [{ after = 2, nice = 10 }]\n");
    assert_eq!((later.len(), nice), (3, 10));
    assert!((later[0] - plain[0]).abs() < 1e-3, "{later:?} {plain:?}");
    assert!((later[1] - plain[1]).abs() < 1e-3, "{later:?} {plain:?}");
    assert!(later[2] > 3.0 * plain[2], "{later:?} {plain:?}");
}

#[test]
fn bad_power_and_nice_schedules_are_explained() {
    let base = "duration_s = 1\nmachine.preset = \"patel-opteron-8\"\n";
    let prog = "[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1\n";
    let cases = [
        (
            format!("{base}machine.types.opteron.power.idle_leak_w_per_v3 = -1\n"),
            "machine.types.opteron.power.idle_leak_w_per_v3: -1 is out of range; allowed 0 to 1e4",
        ),
        (
            format!("{base}machine.types.opteron.power.idle_clock_w_per_v2ghz = 1e9\n"),
            "machine.types.opteron.power.idle_clock_w_per_v2ghz",
        ),
        (
            format!("{base}{prog}repeat = 5\nnice_schedule = [{{ after = 5, nice = 1 }}]\n"),
            "workload.programs[0].nice_schedule[0].after: 5 is not allowed; steps need increasing values from 1 to repeat - 1 = 4",
        ),
        (
            format!("{base}{prog}repeat = 5\nnice_schedule = [{{ after = 3, nice = 1 }}, {{ after = 2, nice = 0 }}]\n"),
            "workload.programs[0].nice_schedule[1].after: 2 is not allowed; steps need increasing values from 4",
        ),
        (
            format!("{base}{prog}repeat = 5\nnice_schedule = [{{ after = 3, nice = 20 }}]\n"),
            "workload.programs[0].nice_schedule[0].nice: 20 is out of range; allowed -20 to 19",
        ),
        (
            format!("{base}governor = \"userspace[mhz=1000]\"\n"),
            "userspace[mhz]: 1000 MHz is not a P-state of cpu type \"opteron\" (domain 0); nearest: 800 MHz or 1150 MHz",
        ),
    ];
    for (text, want) in cases {
        let got = err(&text);
        assert!(got.contains(want), "\nwant: {want}\ngot:  {got}");
    }
}
