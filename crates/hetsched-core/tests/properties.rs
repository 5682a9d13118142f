//! Property tests: over randomly generated machines and workloads, every run
//! passes the invariant checker (one task per CPU, affinity, work
//! conservation, monotonic time and energy) and is deterministic.

mod common;

use hetsched_core::run;
use hetsched_core::scenario::{parse, Format};
use hetsched_core::sim::RunOptions;
use proptest::prelude::*;

fn scenario(
    ncpus: Vec<(u32, u32, u32)>,
    progs: Vec<(u8, u32, u32, u32, i32, bool)>,
    sched: u8,
    seed: u64,
) -> String {
    let head = format!(
        "duration_s = 0.5\nseed = {seed}\nscheduler = \"{}\"\n",
        ["cfs", "pinned", "global-edf"][sched as usize % 3]
    );
    common::random_scenario(&head, "", &ncpus, &progs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn random_runs_keep_invariants_and_are_deterministic(
        cpus in proptest::collection::vec((0u32..4, 1u32..4, 1u32..3), 1..4),
        progs in proptest::collection::vec((0u8..5, 1u32..13, 1u32..3000, 0u32..20, -5i32..6, any::<bool>()), 1..6),
        sched in 0u8..3,
        seed in 0u64..1000,
    ) {
        let text = scenario(cpus, progs, sched, seed);
        let s = parse(&text, "prop", Format::Toml, &[]).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let a = run(&s, RunOptions { trace: false, check: true }, None, vec![], None)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let b = run(&s, RunOptions::default(), None, vec![], None).unwrap();
        prop_assert!(a.summary.events > 0, "the run simulated nothing");
        prop_assert_eq!(&a.summary.trace_hash, &b.summary.trace_hash);
        // Work conservation at the end: no task did more work than assigned.
        for t in &a.tasks {
            prop_assert!(t.run_s <= a.summary.sim_end_s + 1e-9);
        }
    }
}
