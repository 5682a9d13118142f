//! Barrier waits that spin before they sleep (libgomp's `GOMP_SPINCOUNT`,
//! the `barrier_spin_ms` program field) — hand-worked.

mod common;

use common::{completion, err, go};
use hetsched_core::metrics::RunResults;

/// A fast CPU (0) and one at half its speed (1); a two-thread program with
/// two rounds of 10 ms of work per thread and a barrier after each round.
/// The `pinned` scheduler keeps each thread on the CPU it starts on.
fn scenario(spin: &str) -> String {
    format!(
        r#"
duration_s = 1
scheduler = "pinned"
[machine]
migration.enabled = false
[machine.types.fast]
capacity = 1024
[machine.types.slow]
capacity = 512
[[machine.clusters]]
type = "fast"
cores = 1
[[machine.clusters]]
type = "slow"
cores = 1
[[workload.programs]]
name = "omp"
kind = "parallel"
threads = 2
work_ms = 40
iterations = 2
{spin}
"#
    )
}

fn busy_ms(r: &RunResults, cpu: usize) -> f64 {
    r.cpus.iter().find(|c| c.cpu == cpu).expect("cpu").busy_s * 1e3
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn without_spin_the_early_thread_leaves_its_cpu_at_once() {
    // Fast thread: rounds at 0-10 and 20-30 ms; slow one: 0-20, 20-40 ms.
    let r = go(&scenario(""));
    assert!(close(completion(&r, "omp"), 0.040));
    assert!(close(busy_ms(&r, 0), 20.0), "{}", busy_ms(&r, 0));
    assert!(close(busy_ms(&r, 1), 40.0));
}

#[test]
fn a_short_spin_runs_out_and_the_thread_sleeps() {
    // 4 ms of spin (4 ms on the fast CPU): the fast thread spins 10-14 ms,
    // sleeps, is woken at 20 ms, computes 20-30 ms, spins 30-34 ms, sleeps,
    // and is released at 40 ms. CPU 0 is busy 10 + 4 + 10 + 4 = 28 ms.
    let r = go(&scenario("barrier_spin_ms = 4"));
    assert!(close(completion(&r, "omp"), 0.040));
    assert!(close(busy_ms(&r, 0), 28.0), "{}", busy_ms(&r, 0));
    assert!(close(busy_ms(&r, 1), 40.0));
}

#[test]
fn a_long_spin_keeps_the_cpu_busy_until_the_barrier_opens() {
    // 20 ms of spin: the barrier opens (20 and 40 ms) before it runs out;
    // the fast thread goes on at once and its CPU is never free.
    let r = go(&scenario("barrier_spin_ms = 20"));
    assert!(close(completion(&r, "omp"), 0.040));
    assert!(close(busy_ms(&r, 0), 40.0), "{}", busy_ms(&r, 0));
    // Work done (spinning is executing): the fast thread computed 2 x 10 ms
    // and spun 10 ms twice (each spin cut short after 10 of its 20 ms); the
    // slow one computed 2 x 10 ms and never spun (it is last each time).
    let mut work: Vec<f64> = r.tasks.iter().map(|t| t.work_ms).collect();
    work.sort_by(f64::total_cmp);
    assert!(close(work[0], 20.0) && close(work[1], 40.0), "{work:?}");
}

#[test]
fn a_negative_spin_is_refused_naming_the_field() {
    let e = err(&scenario("barrier_spin_ms = -1"));
    assert!(e.contains("workload.programs[0].barrier_spin_ms"), "{e}");
    assert!(e.contains("0 or more ms"), "{e}");
}
