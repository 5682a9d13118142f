//! Tickless idle: CPUs with nothing to do cost no events, so the number of
//! events a workload needs does not grow with the number of idle CPUs.

mod common;
use common::scn;
use hetsched_core::run;
use hetsched_core::sim::RunOptions;

fn events(cpus: usize, scheduler: &str) -> u64 {
    let text = format!(
        r#"
name = "tickless"
seed = 3
duration_s = 5.0
stop_when_done = false
scheduler = "{scheduler}"
[machine.types.core]
capacity = 1024
pstates = [{{ mhz = 2000, volt = 1.0 }}]
[[machine.clusters]]
type = "core"
cores = {cpus}
[[workload.programs]]
name = "a"
kind = "phases"
threads = 3
loops = 1000000
phases = [{{ compute_ms = 4 }}, {{ sleep_ms = 40 }}]
"#
    );
    let r = run(&scn(&text), RunOptions::default(), None, vec![], None).unwrap();
    r.summary.events
}

#[test]
fn idle_cpus_cost_no_events() {
    for sched in ["cfs", "global-edf", "pinned"] {
        let small = events(4, sched);
        let large = events(1024, sched);
        assert!(
            small > 500,
            "{sched}: the workload really ran ({small} events)"
        );
        assert_eq!(
            small, large,
            "{sched}: 1020 more idle CPUs changed the event count"
        );
    }
}
