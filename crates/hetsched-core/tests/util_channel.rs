//! The util_est channel between a fair scheduler and `schedutil` belongs to
//! its run: runs in parallel threads, one publishing util_est to
//! `schedutil` and one whose scheduler does not, give exactly the results
//! each gives alone.

mod common;
use common::go;
use hetsched_core::metrics::RunResults;

/// Light periodic threads and one heavy thread on big-little-4+4: util_est
/// decides where the periodic ones go and how fast `schedutil` runs.
fn scenario(sched: &str, gov: &str) -> String {
    format!(
        "duration_s = 1\nscheduler = \"{sched}\"\ngovernor = \"{gov}\"\n\
         machine.preset = \"big-little-4+4\"\n\
         [[workload.programs]]\nname = \"ui\"\nkind = \"phases\"\nthreads = 4\nloops = 100\n\
         phases = [{{ compute_ms = 2 }}, {{ sleep_ms = 14 }}]\n\
         [[workload.programs]]\nname = \"batch\"\nkind = \"phases\"\nloops = 40\n\
         phases = [{{ compute_ms = 12 }}, {{ sleep_ms = 8 }}]\n"
    )
}

/// Everything a run reports, trace hash included, as one comparable string
/// (less the wall-clock time and the speed derived from it).
fn all(r: &RunResults) -> String {
    let mut r = r.clone();
    r.summary.wall_s = 0.0;
    r.summary.events_per_sec = 0.0;
    format!("{r:?}")
}

#[test]
fn parallel_runs_match_runs_alone() {
    // With util_est and schedutil (the channel carries the sums, EAS on).
    let with = scenario("eevdf[eas=true]", "schedutil");
    // Without: the scheduler keeps no util_est and the governor is not
    // schedutil (EAS gated off, said in a warning).
    let without = scenario("eevdf[util_est=false,eas=true]", "ondemand");
    let alone_with = all(&go(&with));
    let alone_without = all(&go(&without));

    // The channel matters here: the same run without util_est differs.
    let no_est = all(&go(&scenario(
        "eevdf[util_est=false,eas=true]",
        "schedutil",
    )));
    assert_ne!(
        alone_with, no_est,
        "util_est changes nothing in this scenario"
    );
    assert!(
        alone_without.contains("the governor is not schedutil"),
        "{alone_without}"
    );
    assert!(
        !alone_with.contains("Energy Aware Scheduling is off"),
        "{alone_with}"
    );

    // Two of each at once, started together.
    let texts = [&with, &without, &with, &without];
    let got: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = texts.iter().map(|t| s.spawn(move || all(&go(t)))).collect();
        hs.into_iter().map(|h| h.join().expect("a run")).collect()
    });
    for (i, g) in got.iter().enumerate() {
        let want = if i % 2 == 0 {
            &alone_with
        } else {
            &alone_without
        };
        assert_eq!(
            g, want,
            "run {i} in parallel differs from the same run alone"
        );
    }
}

#[test]
fn schedutil_with_parameters_is_schedutil() {
    // The engine recognises `schedutil` by the name it was built under,
    // parameters included: EAS stays on and util_est reaches the governor.
    let r = go(&scenario(
        "eevdf[eas=true]",
        "schedutil[rate_limit_us=2000]",
    ));
    assert!(
        !r.warnings
            .iter()
            .any(|w| w.contains("Energy Aware Scheduling is off")),
        "{:?}",
        r.warnings
    );
    let no_est = go(&scenario(
        "eevdf[util_est=false,eas=true]",
        "schedutil[rate_limit_us=2000]",
    ));
    assert_ne!(r.summary.trace_hash, no_est.summary.trace_hash);
}
