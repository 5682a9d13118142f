//! uclamp through the engine, against hand-worked expectations: a minimum
//! clamp raises schedutil's request to the P-state that covers it and falls
//! away when the clamped task sleeps; a maximum clamp keeps a busy task on a
//! little core under EAS; bad clamps are named.

mod common;
use common::{err, freqs, go, on_type, MS};
use hetsched_core::metrics::RunResults;

/// One CPU of capacity 1024 with P-states 200, 400, ..., 1000 MHz, and a
/// task of 1 ms (at 1000 MHz) every 10 ms: utilisation about 100 of 1024.
fn light_task(sched: &str, clamp: &str) -> String {
    format!(
        r#"
duration_s = 0.5
stop_when_done = false
scheduler = "{sched}"
governor = "schedutil"
[machine.types.c]
capacity = 1024
pstates = [{{ mhz = 200, volt = 0.7 }}, {{ mhz = 400, volt = 0.8 }}, {{ mhz = 600, volt = 0.9 }},
           {{ mhz = 800, volt = 1.0 }}, {{ mhz = 1000, volt = 1.1 }}]
[[machine.cpus]]
type = "c"
[[workload.programs]]
name = "light"
kind = "phases"
loops = 1000
phases = [{{ compute_ms = 1 }}, {{ sleep_ms = 9 }}]
{clamp}
"#
    )
}

#[test]
fn uclamp_min_raises_the_request_to_the_pstate_that_covers_it() {
    for sched in ["eevdf", "cfs"] {
        // Without a clamp: 1.25 × ~100 / 1024 of 1000 MHz is about 125 MHz;
        // after the start at 1000 MHz schedutil stays at 200 and 400 MHz.
        let plain = freqs(&go(&light_task(sched, "")));
        let late: Vec<u32> = plain
            .iter()
            .filter(|f| f.0 > 100 * MS)
            .map(|f| f.1)
            .collect();
        assert!(late.iter().all(|&f| f <= 400), "{sched}: {late:?}");
        // uclamp_min = 512: while the task is runnable its CPU asks for
        // max(512, 1.25 × ~100) = 512, f = 1000 × 512 / 1024 = 500 MHz, and
        // the lowest P-state at or above it is 600 MHz (no 1.25 headroom on a
        // clamp: not 800). While it sleeps the runqueue's minimum is 0 again
        // and the request falls back below 600 MHz.
        let r = go(&light_task(sched, "uclamp_min = 512"));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let clamped = freqs(&r);
        let late: Vec<u32> = clamped
            .iter()
            .filter(|f| f.0 > 100 * MS)
            .map(|f| f.1)
            .collect();
        assert_eq!(late.iter().max(), Some(&600), "{sched}: {late:?}");
        let ups = late.iter().filter(|&&f| f == 600).count();
        let downs = late.iter().filter(|&&f| f < 600).count();
        // One burst every ~10 ms over 400 ms: about 40 raises, each followed
        // by a drop when the clamped task sleeps.
        assert!(
            ups >= 35 && downs >= ups - 1,
            "{sched}: {ups} up, {downs} down"
        );
        // The bursts run at 600 MHz (1 ms of work in 1.67 ms) instead of
        // 200 or 400 MHz (5 or 2.5 ms): less CPU time for the same work.
        let run = |r: &RunResults| r.tasks[0].run_s;
        let plain_run = run(&go(&light_task(sched, "")));
        assert!(run(&r) < plain_run, "{} vs {plain_run}", run(&r));
    }
}

#[test]
fn uclamp_max_caps_the_request_of_a_busy_cpu() {
    // A spinner asks for 1000 MHz; with uclamp_max = 512 its CPU asks for
    // min(1.25 × 1024, 512) = 512, 500 MHz, P-state 600 MHz.
    let spin = |clamp: &str| {
        format!(
            "duration_s = 0.3\nscheduler = \"eevdf\"\ngovernor = \"schedutil\"\n\
             [machine.types.c]\ncapacity = 1024\n\
             pstates = [{{ mhz = 200, volt = 0.7 }}, {{ mhz = 600, volt = 0.9 }}, {{ mhz = 1000, volt = 1.1 }}]\n\
             [[machine.cpus]]\ntype = \"c\"\n\
             [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1e6\n{clamp}\n"
        )
    };
    let last = |r: &RunResults| freqs(r).last().map(|f| f.1);
    // A spinner keeps 1000 MHz.
    assert_eq!(last(&go(&spin(""))), Some(1000));
    assert_eq!(last(&go(&spin("uclamp_max = 512"))), Some(600));
}

/// A busy task (40 ms bursts with 1 ms sleeps) on big-little-4+4 (big 1024,
/// little 430) under `linux` with schedutil.
fn busy_big_little(clamp: &str) -> RunResults {
    go(&format!(
        "duration_s = 2\nscheduler = \"linux\"\ngovernor = \"schedutil\"\n\
         machine.preset = \"big-little-4+4\"\n\
         [[workload.programs]]\nname = \"busy\"\nkind = \"phases\"\nloops = 1000\n\
         phases = [{{ compute_ms = 40 }}, {{ sleep_ms = 1 }}]\n{clamp}\n"
    ))
}

fn little_share(r: &RunResults) -> f64 {
    on_type(r, 0, "little") / r.tasks[0].run_s
}

#[test]
fn uclamp_max_keeps_a_busy_task_on_a_little_cpu_under_eas() {
    // Unclamped, the task's utilisation does not fit a little core
    // (util × 1.25 ≥ 430): it runs on the big cores.
    let plain = busy_big_little("");
    assert!(plain.warnings.is_empty(), "{:?}", plain.warnings);
    assert!(little_share(&plain) < 0.05, "{}", little_share(&plain));
    // uclamp_max = 256 ≤ 430: it fits every little core whatever its
    // utilisation (util_fits_cpu), no little core is over-utilised, and EAS
    // compares the energy at the clamped request: a little core at the
    // P-state covering 256 (1000 MHz, capacity 307) against a big one
    // (800 MHz). The little core wins, and the task stays there: no misfit.
    let clamped = busy_big_little("uclamp_max = 256");
    assert!(clamped.warnings.is_empty(), "{:?}", clamped.warnings);
    assert!(little_share(&clamped) > 0.95, "{}", little_share(&clamped));
    assert!(clamped.summary.energy_j < plain.summary.energy_j);
}

#[test]
fn bad_clamps_are_named() {
    let text = |clamp: &str| {
        format!(
            "duration_s = 0.1\n[machine]\npreset = \"big-little-4+4\"\n\
             [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1\n{clamp}\n"
        )
    };
    let e = err(&text("uclamp_min = 1025"));
    assert!(e.contains("uclamp_min") && e.contains("0 to 1024"), "{e}");
    let e = err(&text("uclamp_max = 2000"));
    assert!(e.contains("uclamp_max") && e.contains("0 to 1024"), "{e}");
    let e = err(&text("uclamp_min = 600\nuclamp_max = 300"));
    assert!(
        e.contains("uclamp_min") && e.contains("uclamp_max (300)"),
        "{e}"
    );
    let e = err(&text("uclamp_min = -1"));
    assert!(e.contains("uclamp_min"), "{e}");
}

#[test]
fn without_clamps_nothing_changes_and_runs_are_deterministic() {
    // A clamp of (0, 1024) is the no-clamp value, but turns uclamp on: the
    // frequencies are those of the unclamped run.
    let a = go(&light_task("eevdf", ""));
    let b = go(&light_task("eevdf", "uclamp_min = 0\nuclamp_max = 1024"));
    assert_eq!(freqs(&a), freqs(&b));
    let c = go(&light_task("eevdf", "uclamp_min = 512"));
    let d = go(&light_task("eevdf", "uclamp_min = 512"));
    assert_eq!(c.summary.trace_hash, d.summary.trace_hash);
}
