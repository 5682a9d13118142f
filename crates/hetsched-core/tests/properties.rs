//! Property tests: over randomly generated machines and workloads, every run
//! passes the invariant checker (one task per CPU, affinity, work
//! conservation, monotonic time and energy) and is deterministic.

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
    let mut s = format!(
        "duration_s = 0.5\nseed = {seed}\nscheduler = \"{}\"\n",
        ["cfs", "pinned", "global-edf"][sched as usize % 3]
    );
    s += "[machine.types.big]\ncapacity = 1024\nsmt_factor = 0.7\n[machine.types.little]\ncapacity = 400\n";
    for (i, (cap, cores, smt)) in ncpus.iter().enumerate() {
        let ty = if cap % 2 == 0 { "big" } else { "little" };
        s += &format!(
            "[[machine.clusters]]\ntype = \"{ty}\"\ncores = {cores}\nsmt = {smt}\nnode = {}\n",
            i % 2
        );
    }
    let total: u32 = ncpus.iter().map(|c| c.1 * c.2).sum();
    for (kind, threads, work, sleep, nice, pin) in progs {
        s += "[[workload.programs]]\n";
        match kind % 5 {
            0 => s += &format!("kind = \"sequential\"\nwork_ms = {work}\n"),
            1 => s += &format!("kind = \"parallel\"\nthreads = {threads}\nwork_ms = {work}\niterations = 3\n"),
            2 => s += &format!("kind = \"dynamic\"\nthreads = {threads}\nwork_ms = {work}\nchunks = 17\n"),
            3 => s += &format!("kind = \"fork_join\"\nthreads = {threads}\nwork_ms = {work}\nseq_fraction = 0.3\niterations = 2\n"),
            _ => s += &format!("kind = \"phases\"\nthreads = {threads}\nloops = 5\njitter = 0.3\nphases = [{{ compute_ms = {} }}, {{ sleep_ms = {sleep} }}, {{ barrier = true }}]\n", work / 10 + 1),
        }
        s += &format!("nice = {nice}\n");
        if pin {
            s += &format!("affinity = [0, {}]\n", total - 1);
        }
    }
    s
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
