//! The rt and deadline classes above the fair scheduler: hand-worked
//! schedules with exact times (docs/classes.md).

mod common;

use common::{close, cpus, err, go, phases, run_intervals, sequential};
use hetsched_core::metrics::RunResults;

/// One CPU of capacity 1024 (runs at speed 1: 1 ms of work takes 1 ms).
fn one_cpu(sched: &str, dur: f64) -> String {
    format!("duration_s = {dur}\nscheduler = \"{sched}\"\n{}", cpus(1))
}

fn two_cpus(dur: f64) -> String {
    format!("duration_s = {dur}\n{}", cpus(2))
}

/// The run intervals of a task, (cpu, start ms, end ms), merged where one
/// interval ends as the next starts on the same CPU.
fn runs(r: &RunResults, task: usize) -> Vec<(usize, f64, f64)> {
    let mut v: Vec<(usize, f64, f64)> = Vec::new();
    for (cpu, t_ns, end_ns) in run_intervals(r, task) {
        let (s, f) = (t_ns as f64 / 1e6, end_ns as f64 / 1e6);
        match v.last_mut() {
            Some(l) if l.0 == cpu && (l.2 - s).abs() < 1e-9 => l.2 = f,
            _ => v.push((cpu, s, f)),
        }
    }
    v.sort_by(|a, b| a.1.total_cmp(&b.1));
    v
}

fn assert_runs(got: &[(usize, f64, f64)], want: &[(usize, f64, f64)]) {
    assert_eq!(got.len(), want.len(), "got {got:?}, want {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            g.0 == w.0 && close(g.1, w.1) && close(g.2, w.2),
            "got {got:?}, want {want:?}"
        );
    }
}

#[test]
fn fifo_wakeup_preempts_a_running_fair_task_at_once() {
    for sched in ["cfs", "eevdf"] {
        let r = go(&format!(
            "{}{}{}",
            one_cpu(sched, 1.0),
            sequential("fair", 100.0, ""),
            sequential(
                "fifo",
                10.0,
                "policy = \"fifo\"\npriority = 10\nstart_ms = 20"
            )
        ));
        assert_runs(&runs(&r, 1), &[(0, 20.0, 30.0)]);
        assert_runs(&runs(&r, 0), &[(0, 0.0, 20.0), (0, 30.0, 110.0)]);
        assert_eq!(r.tasks[0].csw_involuntary, 1, "{sched}");
        assert_eq!(r.tasks[1].policy, "fifo");
        assert_eq!(r.tasks[1].rt_priority, 10);
    }
}

#[test]
fn rr_tasks_of_equal_priority_rotate_every_100_ms() {
    let rr = "policy = \"rr\"\npriority = 5";
    let r = go(&format!(
        "{}{}{}",
        one_cpu("eevdf", 2.0),
        sequential("a", 300.0, rr),
        sequential("b", 300.0, rr)
    ));
    assert_runs(
        &runs(&r, 0),
        &[(0, 0.0, 100.0), (0, 200.0, 300.0), (0, 400.0, 500.0)],
    );
    assert_runs(
        &runs(&r, 1),
        &[(0, 100.0, 200.0), (0, 300.0, 400.0), (0, 500.0, 600.0)],
    );
}

#[test]
fn rr_timeslice_is_configurable() {
    let rr = "policy = \"rr\"\npriority = 5";
    let r = go(&format!(
        "{}[os]\nrr_timeslice_ms = 25\n{}{}",
        one_cpu("eevdf", 2.0),
        sequential("a", 50.0, rr),
        sequential("b", 50.0, rr)
    ));
    assert_runs(&runs(&r, 0), &[(0, 0.0, 25.0), (0, 50.0, 75.0)]);
}

#[test]
fn higher_priority_fifo_runs_to_completion() {
    // Low (10) runs from 0; high (20) arrives at 10 and runs its 50 ms at
    // once; an equal-priority FIFO task (10) arriving at 20 waits for low.
    let r = go(&format!(
        "{}{}{}{}",
        one_cpu("cfs", 1.0),
        sequential("low", 100.0, "policy = \"fifo\"\npriority = 10"),
        sequential(
            "high",
            50.0,
            "policy = \"fifo\"\npriority = 20\nstart_ms = 10"
        ),
        sequential(
            "same",
            5.0,
            "policy = \"fifo\"\npriority = 10\nstart_ms = 20"
        ),
    ));
    assert_runs(&runs(&r, 1), &[(0, 10.0, 60.0)]);
    // The preempted task goes back to the head of its list: it resumes
    // before the equal-priority task that arrived meanwhile.
    assert_runs(&runs(&r, 0), &[(0, 0.0, 10.0), (0, 60.0, 150.0)]);
    assert_runs(&runs(&r, 2), &[(0, 150.0, 155.0)]);
}

#[test]
fn cbs_task_is_throttled_at_its_budget_each_period() {
    // runtime 10 ms / period 100 ms, 30 ms of work: 10 ms per period; the
    // fair task runs in between.
    let r = go(&format!(
        "{}{}{}",
        one_cpu("eevdf", 2.0),
        sequential(
            "dl",
            30.0,
            "policy = \"deadline\"\ndl_runtime_ms = 10\ndl_period_ms = 100"
        ),
        sequential("fair", 1000.0, "")
    ));
    assert_runs(
        &runs(&r, 0),
        &[(0, 0.0, 10.0), (0, 100.0, 110.0), (0, 200.0, 210.0)],
    );
    assert!(
        close(r.tasks[0].throttled_s, 0.18),
        "{}",
        r.tasks[0].throttled_s
    );
    assert_eq!(r.tasks[0].dl_misses, 0);
    assert!(close(r.tasks[1].end_s.unwrap(), 1.03));
}

#[test]
fn earliest_deadline_runs_first_and_preempts() {
    // A: runtime 20 / deadline 100, from 0. B: runtime 5 / deadline 10 /
    // period 100, arriving at 5 with deadline 15 < 100: it preempts A.
    let r = go(&format!(
        "{}{}{}",
        one_cpu("eevdf", 1.0),
        sequential(
            "a",
            20.0,
            "policy = \"deadline\"\ndl_runtime_ms = 20\ndl_period_ms = 100"
        ),
        sequential(
            "b",
            5.0,
            "policy = \"deadline\"\ndl_runtime_ms = 5\ndl_deadline_ms = 10\ndl_period_ms = 100\nstart_ms = 5"
        ),
    ));
    assert_runs(&runs(&r, 1), &[(0, 5.0, 10.0)]);
    assert_runs(&runs(&r, 0), &[(0, 0.0, 5.0), (0, 10.0, 25.0)]);
}

#[test]
fn always_running_fifo_leaves_fair_tasks_50_ms_per_second() {
    // Linux 6.18: no RT throttling of the root rt_rq; the deferred fair
    // server runs the fair class for 50 ms at the end of each 1 s period.
    let r = go(&format!(
        "stop_when_done = false\n{}{}{}",
        one_cpu("eevdf", 3.0),
        sequential("hog", 10000.0, "policy = \"fifo\"\npriority = 50"),
        sequential("fair", 10000.0, "")
    ));
    assert_runs(
        &runs(&r, 1),
        &[(0, 950.0, 1000.0), (0, 1950.0, 2000.0), (0, 2950.0, 3000.0)],
    );
    assert!(close(r.tasks[1].run_s, 0.15), "{}", r.tasks[1].run_s);
    assert!(close(r.tasks[0].run_s, 2.85), "{}", r.tasks[0].run_s);
    assert!(
        close(r.tasks[0].throttled_s, 0.15),
        "{}",
        r.tasks[0].throttled_s
    );
    // Without the fair server the fair task starves.
    let r = go(&format!(
        "stop_when_done = false\n{}[os]\nfair_server = false\n{}{}",
        one_cpu("eevdf", 3.0),
        sequential("hog", 10000.0, "policy = \"fifo\"\npriority = 50"),
        sequential("fair", 10000.0, "")
    ));
    assert_eq!(r.tasks[1].run_s, 0.0);
}

#[test]
fn admission_control_refuses_three_cpus_of_bandwidth_on_two() {
    let dl = "policy = \"deadline\"\ndl_runtime_ms = 100\ndl_period_ms = 100";
    let e = err(&format!(
        "{}{}{}{}",
        two_cpus(1.0),
        sequential("a", 10.0, dl),
        sequential("b", 10.0, dl),
        sequential("c", 10.0, dl)
    ));
    assert!(
        e.contains("admission control") && e.contains("3.0000") && e.contains("1.9000"),
        "{e}"
    );
    // 1.9 CPUs is admitted.
    let ok = "policy = \"deadline\"\ndl_runtime_ms = 95\ndl_period_ms = 100";
    go(&format!(
        "{}{}{}",
        two_cpus(1.0),
        sequential("a", 10.0, ok),
        sequential("b", 10.0, ok)
    ));
}

#[test]
fn a_woken_fifo_task_is_pushed_to_an_idle_cpu() {
    // B runs first on cpu 0 and sleeps; A (same priority) takes cpu 0 at
    // 5 ms; B wakes at 10 ms: it cannot preempt A, so select_task_rq_rt
    // sends it to the lowest CPU, idle cpu 1, where it runs at once.
    let pinned_b = "[[workload.programs]]\nname = \"b\"\nkind = \"phases\"\npolicy = \"fifo\"\npriority = 10\nworking_set_kb = 0\nphases = [{ compute_ms = 2 }, { sleep_ms = 8 }, { compute_ms = 5 }]\n";
    let r = go(&format!(
        "{}{}{}",
        two_cpus(1.0),
        pinned_b,
        sequential(
            "a",
            100.0,
            "policy = \"fifo\"\npriority = 10\nstart_ms = 5\naffinity = [0]"
        )
    ));
    assert_runs(&runs(&r, 0), &[(0, 0.0, 2.0), (1, 10.0, 15.0)]);
    assert_runs(&runs(&r, 1), &[(0, 5.0, 105.0)]);
}

#[test]
fn a_cpu_whose_rt_task_ends_pulls_a_waiting_one() {
    // C (prio 50, cpu 1 only) and A (prio 10) run from 0; B (prio 10)
    // arrives at 10 and waits behind A on cpu 0; C ends at 100 and cpu 1
    // pulls B.
    let r = go(&format!(
        "{}{}{}{}",
        two_cpus(1.0),
        sequential(
            "c",
            100.0,
            "policy = \"fifo\"\npriority = 50\naffinity = [1]"
        ),
        sequential("a", 300.0, "policy = \"fifo\"\npriority = 10"),
        sequential("b", 20.0, "policy = \"fifo\"\npriority = 10\nstart_ms = 10"),
    ));
    assert_runs(&runs(&r, 1), &[(0, 0.0, 300.0)]);
    assert_runs(&runs(&r, 2), &[(1, 100.0, 120.0)]);
}

#[test]
fn policy_fields_are_validated() {
    let base = one_cpu("cfs", 1.0);
    for (extra, want) in [
        (
            "policy = \"fifo\"",
            "workload.programs[0].priority: required for policy \"fifo\"",
        ),
        (
            "policy = \"rr\"\npriority = 100",
            "priority: 100 is out of range; allowed 1 to 99",
        ),
        ("priority = 3", "priority: not used by policy \"other\""),
        (
            "policy = \"sporadic\"",
            "policy: \"sporadic\" is not a policy; allowed: other, batch, idle, fifo, rr, deadline",
        ),
        (
            "policy = \"deadline\"\ndl_period_ms = 10",
            "dl_runtime_ms: required for policy \"deadline\"",
        ),
        (
            "policy = \"deadline\"\ndl_runtime_ms = 10",
            "dl_period_ms: required for policy \"deadline\"",
        ),
        (
            "policy = \"deadline\"\ndl_runtime_ms = 20\ndl_period_ms = 10",
            "dl_runtime_ms: 20 ms is longer than the deadline 10 ms",
        ),
        (
            "policy = \"deadline\"\ndl_runtime_ms = 2\ndl_deadline_ms = 20\ndl_period_ms = 10",
            "dl_deadline_ms: 20 ms is longer than dl_period_ms = 10 ms",
        ),
        (
            "dl_runtime_ms = 2",
            "dl_runtime_ms: not used by policy \"other\" (used by: deadline)",
        ),
        (
            "policy = \"deadline\"\ndl_runtime_ms = 2\ndl_period_ms = 10\naffinity = [0]",
            "affinity: a SCHED_DEADLINE task may not have a restricted affinity",
        ),
    ] {
        let e = err(&format!("{base}{}", sequential("p", 1.0, extra)));
        assert!(e.contains(want), "{extra}: {e}");
    }
    let e = err(&format!(
        "{}{}",
        one_cpu("scx-simple", 1.0),
        sequential("p", 1.0, "policy = \"fifo\"\npriority = 1")
    ));
    assert!(
        e.contains("not modelled with scheduler \"scx-simple\""),
        "{e}"
    );
    let e = err(&format!(
        "{base}[os]\nrt_runtime_ms = 2000\n{}",
        sequential("p", 1.0, "")
    ));
    assert!(
        e.contains("os.rt_runtime_ms: 2000 ms is longer than os.rt_period_ms"),
        "{e}"
    );
}

#[test]
fn sched_idle_weighs_3_and_batch_does_not_preempt_at_wakeup() {
    let r = go(&format!(
        "{}{}",
        one_cpu("cfs", 1.0),
        sequential("i", 1.0, "policy = \"idle\"\nnice = -5")
    ));
    assert_eq!(r.tasks[0].weight, 3);
    assert_eq!(r.tasks[0].policy, "idle");
    // A batch task waking does not preempt the running fair task: it waits
    // for the tick (cfs: the slice end); an "other" task preempts.
    for sched in ["cfs", "eevdf"] {
        let wake = |pol: &str| {
            go(&format!(
                "{}{}[[workload.programs]]\nname = \"w\"\nkind = \"phases\"\npolicy = \"{pol}\"\nphases = [{{ sleep_ms = 50 }}, {{ compute_ms = 1 }}]\n",
                one_cpu(sched, 1.0),
                sequential("long", 100.0, ""),
            ))
        };
        let (b, o) = (wake("batch"), wake("other"));
        let first = |r: &RunResults| runs(r, 1)[0].1;
        assert!(
            first(&b) > first(&o),
            "{sched}: batch {} other {}",
            first(&b),
            first(&o)
        );
        assert!(close(first(&o), 50.0), "{sched}: {}", first(&o));
    }
}

#[test]
fn scenarios_without_rt_tasks_are_unchanged() {
    // The same fair workload with and without an idle [os] table: same
    // events, same trace hash.
    let w = format!(
        "{}{}",
        sequential("a", 30.0, ""),
        sequential("b", 20.0, "nice = 3")
    );
    let a = go(&format!("{}{w}", two_cpus(1.0)));
    let b = go(&format!("{}[os]\nrr_timeslice_ms = 5\n{w}", two_cpus(1.0)));
    assert_eq!(a.summary.trace_hash, b.summary.trace_hash);
    assert_eq!(a.summary.events, b.summary.events);
}

/// A phases program: `loops` times compute `c` ms then sleep `s` ms.
fn phased(name: &str, c: f64, s: f64, loops: u32, extra: &str) -> String {
    let p = phases(
        name,
        &format!("{{ compute_ms = {c} }}, {{ sleep_ms = {s} }}"),
    );
    format!("{p}loops = {loops}\n{extra}\n")
}

#[test]
fn a_deadline_task_that_blocks_is_charged_what_it_ran() {
    // runtime 10 ms / period 100 ms; 4 ms bursts with 1 ms sleeps: the first
    // two bursts use 8 ms of the budget, the third is throttled after 2 ms
    // (at 12 ms: 4 + 1 + 4 + 1 + 2) until the replenishment at 100 ms.
    let r = go(&format!(
        "{}{}",
        one_cpu("eevdf", 0.3),
        phased(
            "dl",
            4.0,
            1.0,
            3,
            "policy = \"deadline\"\ndl_runtime_ms = 10\ndl_period_ms = 100"
        )
    ));
    assert_runs(
        &runs(&r, 0),
        &[
            (0, 0.0, 4.0),
            (0, 5.0, 9.0),
            (0, 10.0, 12.0),
            (0, 100.0, 102.0),
        ],
    );
}

#[test]
fn the_fair_server_leaves_an_rt_task_alone_when_fair_tasks_get_their_share() {
    // A FIFO task runs 5 ms then sleeps 5 ms; the fair hog runs the other
    // half of the CPU, which is charged to the fair server's budget, so the
    // server never preempts the FIFO task (measured on Linux 6.18 here: a
    // 5-ms-in-10 FIFO task beside a fair spinner on one CPU waits 1.4 ms
    // in 3 s, its start-up included).
    let r = go(&format!(
        "stop_when_done = false\n{}{}{}",
        one_cpu("eevdf", 1.0),
        phased("rt", 5.0, 5.0, 1000, "policy = \"fifo\"\npriority = 50"),
        sequential("fair", 10000.0, "")
    ));
    assert_eq!(r.tasks[0].throttled_s, 0.0);
    assert!(close(r.tasks[0].run_s, 0.5), "{}", r.tasks[0].run_s);
    assert!(close(r.tasks[1].run_s, 0.5), "{}", r.tasks[1].run_s);
}
