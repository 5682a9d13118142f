//! `eevdf` through the engine: nice weights share one CPU as the weights
//! say, a custom slice cuts wake-up latency, runs are deterministic, and bad
//! parameters and slices give clear errors.

mod common;
use common::{err, go, on_type};
use hetsched_core::trace::TraceEvent;

/// Spinners with the given nice values on one CPU for `secs` seconds.
fn spinners(nices: &[i32], secs: f64) -> String {
    let mut text = format!(
        r#"
name = "nice"
seed = 1
duration_s = {secs}
stop_when_done = false
scheduler = "eevdf"
[machine.types.c]
capacity = 1024
pstates = [{{ mhz = 1000, volt = 1.0 }}]
[[machine.clusters]]
type = "c"
cores = 1
"#
    );
    for (i, n) in nices.iter().enumerate() {
        text.push_str(&format!(
            "[[workload.programs]]\nname = \"s{i}\"\nkind = \"sequential\"\nwork_ms = 1e9\nnice = {n}\n"
        ));
    }
    text
}

/// Each task's CPU share against its weight's share: the largest relative
/// error.
fn worst_share_error(nices: &[i32], secs: f64) -> f64 {
    let r = go(&spinners(nices, secs));
    let weights: Vec<f64> = nices
        .iter()
        .map(|&n| hetsched_core::os::nice_to_weight(n) as f64)
        .collect();
    let wsum: f64 = weights.iter().sum();
    let total: f64 = r.tasks.iter().map(|t| t.run_s).sum();
    assert!((total - secs).abs() < 1e-6, "the CPU was busy all along");
    r.tasks
        .iter()
        .zip(&weights)
        .map(|(t, w)| ((t.run_s / total) / (w / wsum) - 1.0).abs())
        .fold(0.0, f64::max)
}

#[test]
fn nice_0_and_5_share_one_cpu_as_their_weights() {
    // Weights 1024 and 335: shares 1024/1359 = 75.35 % and 24.65 %. The lag
    // of either is bounded by a slice (a tick here, 4 ms, as deadlines are
    // seen at ticks), so over 100 s the shares are within 0.1 % of these.
    let e = worst_share_error(&[0, 5], 100.0);
    assert!(e < 1e-3, "share error {e}");
}

#[test]
fn five_nice_values_share_one_cpu_as_their_weights() {
    // Weights 3121, 1024, 526, 335, 110 (nice −5, 0, 3, 5, 10): the smallest
    // share is 110/5116 = 2.15 %; 300 s keep a tick's worth of lag below
    // 0.1 % of it.
    let e = worst_share_error(&[-5, 0, 3, 5, 10], 300.0);
    assert!(e < 1e-3, "share error {e}");
}

/// A periodic task (0.5 ms every 10 ms) beside a spinner on one CPU: its
/// wake-up latencies (release to running), sorted, in ms.
fn periodic_latencies(slice: Option<f64>) -> Vec<f64> {
    let slice = slice
        .map(|s| format!("slice_ms = {s}\n"))
        .unwrap_or_default();
    let text = format!(
        r#"
name = "latency"
seed = 1
duration_s = 2.0
stop_when_done = false
scheduler = "eevdf[base_slice_ms=3]"
[machine]
tick_hz = 1000
[machine.types.c]
capacity = 1024
pstates = [{{ mhz = 1000, volt = 1.0 }}]
[[machine.clusters]]
type = "c"
cores = 1
[[workload.programs]]
name = "spin"
kind = "sequential"
work_ms = 1e9
[[workload.programs]]
name = "tick"
kind = "periodic"
period_ms = 10
wcet_ms = 0.5
{slice}"#
    );
    let r = go(&text);
    let p = 1; // the periodic task
    let mut woke: Option<u64> = None;
    let mut out = Vec::new();
    for ev in &r.trace {
        match ev {
            // Wake-ups after the program's start (its first release).
            TraceEvent::Wake { t_ns, task, .. } if *task == p && *t_ns > 0 => woke = Some(*t_ns),
            TraceEvent::Run { t_ns, task, .. } if *task == p => {
                if let Some(w) = woke.take() {
                    out.push((*t_ns - w) as f64 * 1e-6);
                }
            }
            _ => {}
        }
    }
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    out
}

#[test]
fn a_short_custom_slice_cuts_wake_up_latency() {
    // One CPU, HZ = 1000 (tick 1 ms), base slice 3 ms (the default of 8 or
    // more CPUs), a nice-0 spinner S and a nice-0 periodic task P (0.5 ms
    // every 10 ms; releases fall on ticks). Between P's runs S is alone and
    // its deadline d_S is renewed at ticks to v_S + 3 ms, so when P wakes
    // S's deadline lies ahead of v_S by up to 3 ms, and S, having had a new
    // slice since it was picked, is not protected by RUN_TO_PARITY.
    //
    // Default slice. P wakes with lag 0: v_P = V = v_S, d_P = v_S + 3 ms ≥
    // d_S, so S keeps the CPU; at the next tick (1 ms) S has run 1 ms past
    // V (V = v_S − 0.5 ms) and is no longer eligible: without protection it
    // is preempted (PREEMPT_SHORT's `did_preempt_short`) and P runs,
    // latency 1 ms. P runs 0.5 ms and sleeps 0.25 ms of virtual time ahead
    // of V (v_S − v_P = 0.5 ms, lag (v_S − v_P) / 2 = 0.25 ms); at the next
    // release it is placed with that lag scaled by (W + w) / W = 2: 0.5 ms
    // behind S, so S is not eligible and P preempts at once, latency 0, and
    // leaves with lag 0 again. Latencies alternate 1 ms and 0: mean 0.5 ms.
    //
    // Slice 0.1 ms. With lag 0, d_P = v_S + 0.1 ms, before d_S (unless S's
    // deadline is less than 0.1 ms away): PREEMPT_SHORT lifts S's
    // protection and P, eligible with the earliest deadline, preempts at
    // once; with positive lag it preempts at once as before. Latency 0.
    let default = periodic_latencies(None);
    let short = periodic_latencies(Some(0.1));
    assert!(default.len() >= 190 && short.len() >= 190);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(
        default.iter().all(|&l| l == 0.0 || l == 1.0),
        "default-slice latencies are 0 or one tick: {default:?}"
    );
    let m = mean(&default);
    assert!((m - 0.5).abs() < 0.02, "default mean {m} ms");
    assert!(short.iter().all(|&l| l == 0.0), "0.1 ms slice: {short:?}");
}

#[test]
fn same_scenario_same_trace_hash() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/eevdf-mix.toml"),
    )
    .unwrap();
    let a = go(&text);
    let b = go(&text);
    assert_eq!(a.summary.trace_hash, b.summary.trace_hash);
    assert!(a.summary.events > 1000);
}

#[test]
fn bad_parameters_and_slices_are_named() {
    let base = spinners(&[0], 1.0);
    let e = err(&base.replace("\"eevdf\"", "\"eevdf[base_slice_ms=0]\""));
    assert!(
        e.contains("eevdf[base_slice_ms]: 0 is out of range; allowed 0.1 to 100"),
        "{e}"
    );
    let e = err(&base.replace("\"eevdf\"", "\"eevdf[delay_dequeue=maybe]\""));
    assert!(
        e.contains("eevdf[delay_dequeue]: \"maybe\" is not a boolean"),
        "{e}"
    );
    let e = err(&base.replace("\"eevdf\"", "\"eevdf[next_buddy=true]\""));
    assert!(e.contains("has no parameter \"next_buddy\""), "{e}");
    let e = err(&format!("{base}slice_ms = 0.05\n"));
    assert!(e.contains("workload.programs[0].slice_ms"), "{e}");
    assert!(e.contains("0.1 to 100"), "{e}");
}

#[test]
fn features_off_still_run_fairly() {
    // Every feature switched off: plain EEVDF with lag dropped at sleep;
    // two nice-0 spinners still share the CPU evenly.
    let text = spinners(&[0, 0], 20.0).replace(
        "\"eevdf\"",
        "\"eevdf[place_lag=false,place_deadline_initial=false,place_rel_deadline=false,run_to_parity=false,preempt_short=false,delay_dequeue=false,delay_zero=false,wakeup_preemption=false]\"",
    );
    let r = go(&text);
    let (a, b) = (r.tasks[0].run_s, r.tasks[1].run_s);
    assert!((a - b).abs() < 0.01, "{a} vs {b}");
}

// ------------------------------------------------ capacity awareness and EAS

/// Light periodic threads and one heavy sequential thread on big-little-4+4.
fn big_little(sched: &str, gov: &str) -> String {
    format!(
        "duration_s = 2\nscheduler = \"{sched}\"\ngovernor = \"{gov}\"\n\
         machine.preset = \"big-little-4+4\"\nmachine.platform_base_w = 0.0\n\
         [[workload.programs]]\nname = \"ui\"\nkind = \"phases\"\nthreads = 4\nloops = 100\n\
         phases = [{{ compute_ms = 1 }}, {{ sleep_ms = 19 }}]\n"
    )
}

/// The share of the run time spent on little cores.
fn little_share(r: &hetsched_core::metrics::RunResults) -> f64 {
    (0..r.tasks.len())
        .map(|t| on_type(r, t, "little"))
        .sum::<f64>()
        / r.tasks.iter().map(|t| t.run_s).sum::<f64>()
}

fn eas_warning(r: &hetsched_core::metrics::RunResults) -> Option<&String> {
    r.warnings
        .iter()
        .find(|w| w.contains("Energy Aware Scheduling is off"))
}

#[test]
fn eevdf_eas_with_schedutil_puts_light_tasks_on_little_cores() {
    // As on cfs (tests/engine.rs): 1 ms every 20 ms is ~50 of 1024, which a
    // little core at its lowest P-state runs for half the energy per unit of
    // work of a big one. Plain eevdf keeps them on the big cores they start on.
    let eas = go(&big_little("eevdf[eas=true]", "schedutil"));
    let plain = go(&big_little("eevdf", "schedutil"));
    assert!(eas_warning(&eas).is_none(), "{:?}", eas.warnings);
    assert!(
        little_share(&eas) > 0.9,
        "EAS ran {:.2} on little",
        little_share(&eas)
    );
    assert!(
        little_share(&plain) < 0.5,
        "eevdf ran {:.2} on little",
        little_share(&plain)
    );
    assert!(eas.summary.energy_j < plain.summary.energy_j);
    // `linux` is the same stack.
    let linux = go(&big_little("linux", "schedutil"));
    assert!(linux.warnings.is_empty(), "{:?}", linux.warnings);
    assert_eq!(linux.summary.energy_j, eas.summary.energy_j);
}

#[test]
fn eas_is_gated_as_linux_gates_it_and_says_why() {
    // Not schedutil: off, with the reason.
    let r = go(&big_little("eevdf[eas=true]", "performance"));
    let w = eas_warning(&r).expect("a warning");
    assert!(w.contains("the governor is not schedutil"), "{w}");
    assert!(
        !w.contains("energy model") && !w.contains("asymmetric"),
        "{w}"
    );
    // The same on cfs's `eas`.
    let r = go(&big_little("eas", "ondemand"));
    assert!(eas_warning(&r)
        .expect("a warning")
        .contains("governor is not schedutil"));
    // Symmetric capacities: off, with the reason.
    let sym = |sched: &str, power: &str| {
        format!(
            "duration_s = 0.2\nscheduler = \"{sched}\"\ngovernor = \"schedutil\"\n\
             [machine.types.c]\ncapacity = 1024\n\
             pstates = [{{ mhz = 1000, volt = 0.8 }}, {{ mhz = 2000, volt = 1.0 }}]\n{power}\
             [[machine.clusters]]\ntype = \"c\"\ncores = 2\n\
             [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 10\n"
        )
    };
    let r = go(&sym("eevdf[eas=true]", ""));
    let w = eas_warning(&r).expect("a warning");
    assert!(
        w.contains("not asymmetric") && !w.contains("governor"),
        "{w}"
    );
    // No power at any P-state: no energy model.
    let none = "power = { dyn_w_per_v2ghz = 0.0, static_w_per_v = 0.0, idle_w = 0.0 }\n";
    let r = go(&sym("eevdf[eas=true]", none));
    let w = eas_warning(&r).expect("a warning");
    assert!(w.contains("no energy model"), "{w}");
    // `linux` on a machine without asymmetry or energy model: EAS is simply
    // not there, as on a Linux desktop; no warning.
    assert!(go(&sym("linux", none)).warnings.is_empty());
    // `linux` where EAS could run but the governor is not schedutil: said.
    let r = go(&big_little("linux", "performance"));
    assert!(eas_warning(&r)
        .expect("a warning")
        .contains("governor is not schedutil"));
}

#[test]
fn eevdf_capacity_aware_moves_a_misfit_to_the_big_core() {
    // A job that must start on a little core (its big core is busy for
    // 100 ms) grows past 80 % of the little core's capacity and moves to the
    // big core at a tick once the big core is free; plain eevdf leaves it.
    let text = |sched: &str| {
        format!(
            "duration_s = 5\nscheduler = \"{sched}\"\nmachine.preset = \"big-little-4+4\"\n\
             [[workload.programs]]\nname = \"hog\"\nkind = \"sequential\"\nwork_ms = 100\naffinity = [3]\n\
             [[workload.programs]]\nname = \"job\"\nkind = \"sequential\"\nwork_ms = 1000\n\
             affinity = [3, 4]\nstart_ms = 1\n"
        )
    };
    let job = |r: &hetsched_core::metrics::RunResults| -> (f64, f64) {
        let t = r.tasks.iter().find(|t| t.program == "job").expect("job");
        (
            t.run_s_by_type.get("big").copied().unwrap_or(0.0),
            t.run_s_by_type.get("little").copied().unwrap_or(0.0),
        )
    };
    let (big, little) = job(&go(&text("eevdf[capacity_aware=true]")));
    assert!(
        big > 0.0 && little > 0.0 && big > little,
        "big {big} little {little}"
    );
    let (big, _) = job(&go(&text("eevdf")));
    assert_eq!(big, 0.0);
}
