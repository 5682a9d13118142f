//! rt-app's synchronisation and phase operations (`sim/sync.rs`), with
//! hand-worked schedules.

mod common;

use common::{close, cpus, end_ms, err, go, phases, run_intervals};
use hetsched_core::metrics::RunResults;
use hetsched_core::trace::TraceEvent;

/// `n` CPUs of capacity 1024 at 2 GHz (1 reference ms per ms), migrations
/// free, no stop when done unless the programs all finish.
fn machine(n: usize) -> String {
    format!(
        "duration_s = 1\n[machine.migration]\nenabled = false\n{}",
        cpus(n)
    )
}

/// The run intervals of a task, ms (zero-length ones dropped).
fn runs(r: &RunResults, task: usize) -> Vec<(f64, f64)> {
    run_intervals(r, task)
        .into_iter()
        .map(|(_, s, e)| (s as f64 / 1e6, e as f64 / 1e6))
        .collect()
}

#[test]
fn a_post_before_the_pend_is_kept() {
    // A posts at 5 ms; B pends at 10 ms and finds the post: it goes on at
    // once and computes 10..13.
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        phases("a", "{ compute_ms = 5 }, { post = \"s\" }"),
        phases(
            "b",
            "{ sleep_ms = 10 }, { pend = \"s\" }, { compute_ms = 3 }"
        )
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
        phases(
            "a",
            "{ compute_ms = 4 }, { post = \"s\" }, { compute_ms = 1 }"
        ),
        phases("b", "{ pend = \"s\" }, { compute_ms = 2 }")
    ));
    assert_eq!(runs(&r, 0), vec![(0.0, 5.0)]);
    assert_eq!(runs(&r, 1), vec![(4.0, 6.0)]);
    assert!(
        close(r.tasks[1].sleep_s * 1e3, 4.0),
        "{}",
        r.tasks[1].sleep_s
    );
}

#[test]
fn a_mutex_makes_the_second_locker_wait_for_the_unlock() {
    // Two CPUs: A locks at 0 and holds the mutex while computing 0..4; B
    // wakes at 1, runs, finds it held and blocks; A's unlock at 4 hands it
    // to B, which computes 4..6 while A computes its last 1 ms (4..5).
    let two = format!(
        "{}{}{}",
        machine(2),
        phases(
            "a",
            "{ lock = \"m\" }, { compute_ms = 4 }, { unlock = \"m\" }, { compute_ms = 1 }"
        ),
        phases(
            "b",
            "{ sleep_ms = 1 }, { lock = \"m\" }, { compute_ms = 2 }, { unlock = \"m\" }"
        )
    );
    let r = go(&two);
    assert_eq!(runs(&r, 0), vec![(0.0, 5.0)]);
    assert_eq!(runs(&r, 1), vec![(4.0, 6.0)]);
    // One CPU: whatever the scheduler does with the CPU, B computes only
    // after A's unlock at 4 ms of A's computing, and the CPU is busy 7 ms.
    let one = two.replacen("[[machine.cpus]]\ntype = \"c\"\n", "", 1);
    let r = go(&one);
    let b = runs(&r, 1);
    let a_until_unlock: f64 = {
        let mut done = 0.0;
        let mut at = 0.0;
        for (s, e) in runs(&r, 0) {
            if done + (e - s) >= 4.0 - 1e-9 {
                at = s + (4.0 - done);
                break;
            }
            done += e - s;
        }
        at
    };
    assert!(close(a_until_unlock, 4.0) || a_until_unlock > 4.0);
    assert!(b.iter().all(|&(s, _)| s >= a_until_unlock - 1e-9), "{b:?}");
    let total: f64 = b.iter().map(|(s, e)| e - s).sum();
    assert!(close(total, 2.0), "{b:?}");
    assert!(close(end_ms(&r, 0).max(end_ms(&r, 1)), 7.0));
}

#[test]
fn an_unlock_hands_the_mutex_to_the_longest_waiter() {
    // C waits from 1 ms, B from 2 ms: at A's unlock (10 ms) C goes first.
    let r = go(&format!(
        "{}{}{}{}",
        machine(3),
        phases(
            "a",
            "{ lock = \"m\" }, { compute_ms = 10 }, { unlock = \"m\" }"
        ),
        phases(
            "b",
            "{ sleep_ms = 2 }, { lock = \"m\" }, { compute_ms = 1 }, { unlock = \"m\" }"
        ),
        phases(
            "c",
            "{ sleep_ms = 1 }, { lock = \"m\" }, { compute_ms = 1 }, { unlock = \"m\" }"
        )
    ));
    assert_eq!(runs(&r, 2), vec![(10.0, 11.0)]);
    assert_eq!(runs(&r, 1), vec![(11.0, 12.0)]);
}

#[test]
fn a_signalled_waiter_takes_the_mutex_back_before_it_goes_on() {
    // W locks and waits (releasing m) at 0. S locks at 3, signals (W now
    // waits for m), computes 3..5 holding m and unlocks: W goes on at 5.
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        phases(
            "w",
            "{ lock = \"m\" }, { wait = \"c\", mutex = \"m\" }, { unlock = \"m\" }, { compute_ms = 1 }"
        ),
        phases(
            "s",
            "{ sleep_ms = 3 }, { lock = \"m\" }, { signal = \"c\" }, { compute_ms = 2 }, { unlock = \"m\" }"
        )
    ));
    assert_eq!(runs(&r, 0), vec![(5.0, 6.0)]);
    assert!(close(end_ms(&r, 1), 5.0));
    // broad wakes every waiter; sync signals then waits.
    let r = go(&format!(
        "{}{}{}",
        machine(3),
        phases(
            "w",
            "{ lock = \"m\" }, { wait = \"c\", mutex = \"m\" }, { unlock = \"m\" }, { compute_ms = 1 }"
        )
        .replace("kind = \"phases\"", "kind = \"phases\"\nthreads = 2"),
        phases(
            "s",
            "{ sleep_ms = 3 }, { lock = \"m\" }, { broad = \"c\" }, { unlock = \"m\" }, { compute_ms = 2 }"
        )
    ));
    // Both waiters take m in turn at 3 and compute 3..4 on the free CPUs.
    assert_eq!(runs(&r, 0), vec![(3.0, 4.0)]);
    assert_eq!(runs(&r, 1), vec![(3.0, 4.0)]);
}

#[test]
fn a_resume_with_nobody_suspended_is_lost() {
    // R resumes at 1 ms (S still sleeping: lost) and at 2 ms (S suspended
    // since 1.5 ms: it runs 2..3).
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        phases(
            "r",
            "{ compute_ms = 1 }, { resume = \"x\" }, { compute_ms = 1 }, { resume = \"x\" }"
        ),
        phases(
            "s",
            "{ sleep_ms = 1.5 }, { suspend = \"x\" }, { compute_ms = 1 }"
        )
    ));
    assert_eq!(runs(&r, 1), vec![(2.0, 3.0)]);
    // Without the second resume nothing wakes S: a deadlock, named.
    let e = err(&format!(
        "{}{}{}",
        machine(2),
        phases("r", "{ compute_ms = 1 }, { resume = \"x\" }"),
        phases(
            "s",
            "{ sleep_ms = 1.5 }, { suspend = \"x\" }, { compute_ms = 1 }"
        )
    ));
    assert!(
        e.contains("deadlock at 0.001500000 s")
            && e.contains("s[0] waits on condition \"x\" (mutex \"x\")"),
        "{e}"
    );
}

#[test]
fn suspend_and_resume_are_the_condition_variable_and_mutex_of_their_name() {
    // rt-app names the condition variable and the mutex of a suspend point
    // after it: a resume waits while another thread holds the mutex "x"
    // (here until 5 ms), and a signal on "x" wakes a suspended thread.
    let r = go(&format!(
        "{}{}{}{}",
        machine(3),
        phases(
            "h",
            "{ lock = \"x\" }, { compute_ms = 5 }, { unlock = \"x\" }"
        ),
        phases("s", "{ suspend = \"x\" }, { compute_ms = 1 }"),
        phases(
            "r",
            "{ sleep_ms = 1 }, { resume = \"x\" }, { compute_ms = 1 }"
        )
    ));
    // S suspends only once H's unlock at 5 ms gives it the mutex (it waited
    // first); R's resume then takes the mutex after S released it in its
    // wait, wakes S, and both compute 5..6.
    assert_eq!(runs(&r, 1), vec![(5.0, 6.0)]);
    assert_eq!(runs(&r, 2), vec![(5.0, 6.0)]);
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        phases("s", "{ suspend = \"x\" }, { compute_ms = 1 }"),
        phases(
            "g",
            "{ compute_ms = 2 }, { lock = \"x\" }, { signal = \"x\" }, { unlock = \"x\" }"
        )
    ));
    assert_eq!(runs(&r, 0), vec![(2.0, 3.0)]);
}

#[test]
fn a_shared_barrier_waits_for_every_thread_that_names_it() {
    // A computes 2 ms and B 5 ms before the barrier, then 1 ms each.
    let ab = format!(
        "{}{}",
        phases(
            "a",
            "{ compute_ms = 2 }, { shared_barrier = \"b\" }, { compute_ms = 1 }"
        ),
        phases(
            "b",
            "{ compute_ms = 5 }, { shared_barrier = \"b\" }, { compute_ms = 1 }"
        )
    );
    let r = go(&format!("{}{ab}", machine(2)));
    assert_eq!(runs(&r, 0), vec![(0.0, 2.0), (5.0, 6.0)]);
    assert_eq!(runs(&r, 1), vec![(0.0, 6.0)]);
    // A member that exited no longer counts: C leaves at 1 ms without
    // arriving, so A and B meet at 5 ms.
    let r = go(&format!(
        "{}{ab}{}",
        machine(3),
        phases("c", "{ compute_ms = 1 }, { shared_barrier = \"b\" }")
            .replace("kind = \"phases\"", "kind = \"phases\"\nloops = 1")
    ));
    // C arrives at 1 and waits with A; B's arrival at 5 opens it for all.
    assert!(close(end_ms(&r, 2), 5.0));
    assert_eq!(runs(&r, 0), vec![(0.0, 2.0), (5.0, 6.0)]);
}

#[test]
fn a_timer_ticks_absolutely_and_is_shared() {
    // T1 arrives first at 1 ms: t0 = 1, ticks 11, 21, 31. T2 arrives at 6
    // and 17 and waits for ticks 11 and 21.
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        phases(
            "t1",
            "{ compute_ms = 1 }, { timer = \"tick\", timer_ms = 10 }"
        )
        .replace("kind = \"phases\"", "kind = \"phases\"\nloops = 3"),
        phases(
            "t2",
            "{ sleep_ms = 5 }, { compute_ms = 1 }, { timer = \"tick\", timer_ms = 10 }"
        )
        .replace("kind = \"phases\"", "kind = \"phases\"\nloops = 2")
    ));
    assert_eq!(runs(&r, 0), vec![(0.0, 1.0), (11.0, 12.0), (21.0, 22.0)]);
    assert!(close(end_ms(&r, 0), 31.0));
    assert_eq!(runs(&r, 1), vec![(5.0, 6.0), (16.0, 17.0)]);
    assert!(close(end_ms(&r, 1), 21.0));
    // A tick already past is not waited for: arrivals at 12 (t0), 34 and
    // 46 ms; ticks 22, 32, 42: only the first is waited for.
    let r = go(&format!(
        "{}{}",
        machine(1),
        phases(
            "late",
            "{ compute_ms = 12 }, { timer = \"tk\", timer_ms = 10 }"
        )
        .replace("kind = \"phases\"", "kind = \"phases\"\nloops = 3")
    ));
    assert_eq!(runs(&r, 0), vec![(0.0, 12.0), (22.0, 46.0)]);
}

#[test]
fn yield_lets_the_scheduler_pick_again() {
    // Alone on its CPU a yielding thread is picked again at once: its run
    // is cut at the yield, and the schedule is otherwise the same.
    let r = go(&format!(
        "{}{}",
        machine(1),
        phases(
            "y",
            "{ compute_ms = 1 }, { yield = true }, { compute_ms = 1 }"
        )
    ));
    assert_eq!(runs(&r, 0), vec![(0.0, 1.0), (1.0, 2.0)]);
}

#[test]
fn cpus_moves_the_thread() {
    let r = go(&format!(
        "{}{}",
        machine(2),
        phases(
            "m",
            "{ cpus = [0] }, { compute_ms = 1 }, { cpus = [1] }, { compute_ms = 1 }, { cpus = [0] }, { compute_ms = 1 }"
        )
    ));
    let on: Vec<(f64, f64, usize)> = r
        .trace
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Run {
                t_ns, end_ns, cpu, ..
            } if end_ns > t_ns => Some((*t_ns as f64 / 1e6, *end_ns as f64 / 1e6, *cpu)),
            _ => None,
        })
        .collect();
    assert_eq!(on, vec![(0.0, 1.0, 0), (1.0, 2.0, 1), (2.0, 3.0, 0)]);
    assert_eq!(r.tasks[0].migrations, 2);
}

#[test]
fn fork_starts_an_instance_now_or_after_the_running_one() {
    // P forks C at 1 ms: C computes 1..3 on the other CPU.
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        phases(
            "p",
            "{ compute_ms = 1 }, { fork = \"c\" }, { compute_ms = 1 }"
        ),
        phases("c", "{ compute_ms = 2 }")
            .replace("kind = \"phases\"", "kind = \"phases\"\nforked = true")
    ));
    assert_eq!(runs(&r, 1), vec![(1.0, 3.0)]);
    // Two forks at 0: the second instance starts when the first ends (2).
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        phases(
            "p",
            "{ fork = \"c\" }, { fork = \"c\" }, { compute_ms = 0.5 }"
        ),
        phases("c", "{ compute_ms = 2 }")
            .replace("kind = \"phases\"", "kind = \"phases\"\nforked = true")
    ));
    assert_eq!(runs(&r, 1), vec![(0.0, 2.0), (2.0, 4.0)]);
    assert!(close(end_ms(&r, 1), 4.0));
    // A forked program nobody forks never runs, and the run still ends
    // when the others are done.
    let r = go(&format!(
        "{}{}{}",
        machine(2),
        phases("p", "{ compute_ms = 1 }"),
        phases("c", "{ compute_ms = 2 }")
            .replace("kind = \"phases\"", "kind = \"phases\"\nforked = true")
    ));
    assert!(r.tasks[1].start_s.is_none());
    assert!(
        close(r.summary.sim_end_s * 1e3, 1.0),
        "{}",
        r.summary.sim_end_s
    );
}

#[test]
fn run_for_is_wall_time_whatever_the_speed_and_sharing() {
    // On a capacity-512 CPU 4 ms of compute takes 8 ms, run_for 4 ms takes
    // 4 ms; 20 ms shared with a busy thread still end at 20 ms, having run
    // only part of them.
    let slow = machine(1).replace("capacity = 1024", "capacity = 512");
    let r = go(&format!("{slow}{}", phases("r", "{ run_for_ms = 4 }")));
    assert!(close(end_ms(&r, 0), 4.0));
    assert!(close(r.tasks[0].work_ms, 2.0), "{}", r.tasks[0].work_ms);
    let r = go(&format!(
        "{slow}{}{}",
        phases("r", "{ run_for_ms = 20 }"),
        phases("busy", "{ compute_ms = 50 }")
    ));
    assert!(close(end_ms(&r, 0), 20.0), "{}", end_ms(&r, 0));
    assert!(r.tasks[0].run_s * 1e3 < 15.0, "{}", r.tasks[0].run_s);
}

#[test]
fn a_lock_cycle_is_a_deadlock_naming_threads_and_mutexes() {
    let e = err(&format!(
        "{}{}{}",
        machine(2),
        phases(
            "a",
            "{ lock = \"x\" }, { compute_ms = 1 }, { lock = \"y\" }, { unlock = \"y\" }, { unlock = \"x\" }"
        ),
        phases(
            "b",
            "{ lock = \"y\" }, { compute_ms = 1 }, { lock = \"x\" }, { unlock = \"x\" }, { unlock = \"y\" }"
        )
    ));
    assert!(e.contains("deadlock at 0.001000000 s"), "{e}");
    assert!(
        e.contains("a[0] waits for mutex \"y\" (held by b[0])"),
        "{e}"
    );
    assert!(
        e.contains("b[0] waits for mutex \"x\" (held by a[0])"),
        "{e}"
    );
}

#[test]
fn misuse_and_bad_phases_name_the_field() {
    let cases = [
        (
            "{ wait = \"c\" }",
            "workload.programs[0].phases[0].mutex: required with wait",
        ),
        (
            "{ lock = \"m\", mutex = \"m\" }",
            "phases[0].mutex: applies to wait and sync phases only",
        ),
        ("{ cpus = [] }", "phases[0].cpus: empty list"),
        (
            "{ cpus = [0, 7] }",
            "phases[0].cpus[1]: cpu 7 does not exist (machine has 2 cpus: 0-1)",
        ),
        (
            "{ fork = \"nope\" }",
            "phases[0].fork: no program is named \"nope\"",
        ),
        (
            "{ timer_ms = 5 }",
            "phases[0].timer: required with timer_ms",
        ),
        (
            "{ timer = \"t\" }",
            "phases[0].timer_ms: required with timer",
        ),
        ("{ post = \"\" }", "phases[0].post: empty name"),
        (
            "{ post = \"s\", pend = \"s\" }",
            "phases[0]: give exactly one of",
        ),
        ("{ yield = false }", "phases[0].yield: false is not a phase"),
        ("{ run_for_ms = -1 }", "phases[0].run_for_ms"),
    ];
    for (ph, want) in cases {
        let e = err(&format!("{}{}", machine(2), phases("p", ph)));
        assert!(e.contains(want), "{ph}: {e}");
    }
    let e = err(&format!(
        "{}{}{}",
        machine(2),
        phases("a", "{ timer = \"t\", timer_ms = 5 }"),
        phases("b", "{ timer = \"t\", timer_ms = 6 }")
    ));
    assert!(
        e.contains("workload.programs[1].phases[0].timer_ms: timer \"t\" has period 5 ms"),
        "{e}"
    );
    let e = err(&format!(
        "{}{}",
        machine(2),
        phases("a", "{ unlock = \"m\" }")
    ));
    assert!(
        e.contains("a[0] unlocks mutex \"m\", which nobody holds"),
        "{e}"
    );
    let e = err(&format!(
        "{}{}",
        machine(2),
        phases("c", "{ compute_ms = 1 }").replace(
            "kind = \"phases\"",
            "kind = \"phases\"\nforked = true\nstart_ms = 3"
        )
    ));
    assert!(
        e.contains("workload.programs[0].start_ms: a forked program starts when"),
        "{e}"
    );
}
