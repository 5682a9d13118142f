//! rt-app's synchronisation and phase operations (`sim/sync.rs`), with
//! hand-worked schedules.

mod common;

use common::go;
use hetsched_core::metrics::RunResults;
use hetsched_core::trace::TraceEvent;

/// `n` CPUs of capacity 1024 at 2 GHz (1 reference ms per ms), migrations
/// free, no stop when done unless the programs all finish.
fn machine(n: usize) -> String {
    let mut s = String::from(
        "duration_s = 1\n[machine.types.c]\ncapacity = 1024\n[machine.migration]\nenabled = false\n",
    );
    for _ in 0..n {
        s += "[[machine.cpus]]\ntype = \"c\"\n";
    }
    s
}

/// A `phases` program.
fn prog(name: &str, phases: &str) -> String {
    format!("[[workload.programs]]\nname = \"{name}\"\nkind = \"phases\"\nphases = [{phases}]\n")
}

/// The run intervals of a task, ms (zero-length ones dropped).
fn runs(r: &RunResults, task: usize) -> Vec<(f64, f64)> {
    r.trace
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Run {
                t_ns, end_ns, task: x, ..
            } if *x == task && end_ns > t_ns => Some((*t_ns as f64 / 1e6, *end_ns as f64 / 1e6)),
            _ => None,
        })
        .collect()
}

fn end_ms(r: &RunResults, task: usize) -> f64 {
    r.tasks[task].end_s.expect("task ended") * 1e3
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn a_post_before_the_pend_is_kept() {
    // A posts at 5 ms; B pends at 10 ms and finds the post: it goes on at
    // once and computes 10..13.
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        prog("a", "{ compute_ms = 5 }, { post = \"s\" }"),
        prog("b", "{ sleep_ms = 10 }, { pend = \"s\" }, { compute_ms = 3 }")
    ));
    assert!(close(end_ms(&r, 0), 5.0), "{}", end_ms(&r, 0));
    assert_eq!(runs(&r, 1), vec![(10.0, 13.0)]);
}

#[test]
fn a_pend_before_the_post_waits_for_it() {
    // B pends at 0 and sleeps (blocked) until A posts at 4 ms; it then
    // computes 4..6 on the other CPU. Its wait counts as sleep.
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        prog("a", "{ compute_ms = 4 }, { post = \"s\" }, { compute_ms = 1 }"),
        prog("b", "{ pend = \"s\" }, { compute_ms = 2 }")
    ));
    assert_eq!(runs(&r, 0), vec![(0.0, 5.0)]);
    assert_eq!(runs(&r, 1), vec![(4.0, 6.0)]);
    assert!(close(r.tasks[1].sleep_s * 1e3, 4.0), "{}", r.tasks[1].sleep_s);
}
