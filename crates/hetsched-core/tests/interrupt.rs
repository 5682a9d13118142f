//! A run stopped by its progress callback (Ctrl-C in the front ends) ends at
//! that instant with its results so far, marked partial.

mod common;

use common::scn;
use hetsched_core::run;
use hetsched_core::sim::RunOptions;

const PERIODIC: &str = r#"
duration_s = 1.0
machine.preset = "big-little-4+4"
[[workload.programs]]
name = "tick"
kind = "periodic"
threads = 8
period_ms = 1.0
wcet_ms = 0.2
"#;

#[test]
fn an_interrupted_run_keeps_its_results_up_to_the_interrupt() {
    let s = scn(PERIODIC);
    let opts = RunOptions {
        trace: false,
        check: true,
    };
    let mut stop = |now: f64, _end: f64| -> Result<(), String> {
        if now >= 0.3 {
            Err("Ctrl-C".into())
        } else {
            Ok(())
        }
    };
    let r = run(&s, opts.clone(), None, vec![], Some(&mut stop)).unwrap();
    let sum = &r.summary;
    assert!(sum.partial);
    // The callback runs at least every 1 % of the simulated time (10 ms).
    let at = sum.interrupted_at_s.unwrap();
    assert!((0.3..0.31).contains(&at), "interrupted at {at}");
    assert_eq!(sum.sim_end_s, at);
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("interrupted") && w.contains("Ctrl-C")));
    // 8 threads × 0.2 ms every 1 ms for ~0.3 s: about 2400 jobs' worth of
    // busy time (0.48 cpu-s), and none of it after the interrupt.
    let busy: f64 = r.tasks.iter().map(|t| t.run_s).sum();
    assert!(busy > 0.4 && busy <= 8.0 * at, "busy {busy}");
    assert!(r.cpus.iter().all(|c| c.utilization <= 1.0));

    let full = run(&s, opts, None, vec![], None).unwrap();
    assert!(!full.summary.partial);
    assert_eq!(full.summary.interrupted_at_s, None);
    assert!(full.summary.events > sum.events);
}
