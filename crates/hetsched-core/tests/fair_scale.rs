//! The fair-class indexes on a machine wider than one 64-bit mask word, with
//! SMT, two LLCs, a late program start and restricted affinities: debug
//! builds compare every indexed answer (`find_idlest_cpu`'s ordered set,
//! newidle's busiest-CPU tree, the idle-mask scans) with the scan it
//! replaces, so these runs fail if an index falls out of date.

mod common;
use common::go;

/// `sched` on 2 clusters × 36 cores × 2 hyperthreads (144 CPUs, one LLC per
/// cluster): busy-and-sleeping threads at three nice levels, a program
/// pinned to CPUs 60–75 (across a word boundary and both LLCs) and one
/// that starts late, when the machine is busy.
fn wide(sched: &str) -> String {
    format!(
        r#"
name = "wide"
seed = 7
duration_s = 0.15
stop_when_done = false
scheduler = "{sched}"
[machine.types.c]
capacity = 1024
pstates = [{{ mhz = 1000, volt = 1.0 }}]
[[machine.clusters]]
type = "c"
cores = 36
smt = 2
count = 2
[[workload.programs]]
name = "w"
kind = "phases"
threads = 300
loops = 1000000000
jitter = 0.5
phases = [{{ compute_ms = 2 }}, {{ sleep_ms = 6 }}]
[[workload.programs]]
name = "nice"
kind = "phases"
threads = 40
nice = 5
loops = 1000000000
jitter = 0.5
phases = [{{ compute_ms = 3 }}, {{ sleep_ms = 2 }}]
[[workload.programs]]
name = "pinned"
kind = "phases"
threads = 24
nice = -3
affinity = [60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75]
loops = 1000000000
jitter = 0.5
phases = [{{ compute_ms = 4 }}, {{ sleep_ms = 1 }}]
[[workload.programs]]
name = "late"
kind = "phases"
threads = 100
start_ms = 60
loops = 1000000000
jitter = 0.5
phases = [{{ compute_ms = 1 }}, {{ sleep_ms = 3 }}]
"#
    )
}

#[test]
fn fair_indexes_agree_with_their_scans_on_a_wide_smt_machine() {
    for sched in ["cfs", "eevdf"] {
        let a = go(&wide(sched));
        let b = go(&wide(sched));
        assert_eq!(
            a.summary.trace_hash, b.summary.trace_hash,
            "{sched}: deterministic"
        );
        assert_eq!(a.summary.tasks, 464, "{sched}: every thread ran");
        // Balancing moved threads (newidle, nohz idle and periodic pulls all
        // went through the indexes).
        assert!(
            a.summary.migrations > 100,
            "{sched}: {} migrations",
            a.summary.migrations
        );
        // The pinned threads ran (only on their CPUs: the engine rejects a
        // placement outside a task's affinity).
        for t in a.tasks.iter().filter(|t| t.program == "pinned") {
            assert!(t.run_s > 0.0, "{sched}: pinned thread {} ran", t.task);
        }
    }
}
