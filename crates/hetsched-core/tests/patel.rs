//! Patel's four agents (`policy::patel`): each rule with a process that it
//! moves and one that it leaves alone, first end to end on the
//! `patel-opteron-8` preset with Patel's cpusets (`slow` = CPUs 0–3 at
//! 800 MHz, `medium` = 4–5 at 1400 MHz, `fast` = 6–7 at 2300 MHz, userspace
//! governor, CFS inside the cpusets, invariant checker on), then rule by
//! rule on crafted observations at the thresholds' edges.
//!
//! Placements are read from the trace: the CPUs a task ran on during a
//! window. The agents sample every 100 ms here, so a decision taken at
//! t = k × 0.1 s shows in the window (k × 0.1, (k + 1) × 0.1].
//!
//! Estimates used in the comments (f in MHz, avg = running plus runnable
//! processes per CPU of the cpuset):
//! `estimate_a = 1/f` below one process per CPU, `avg/f` from one up:
//! empty fast 1/2300 = 4.35e-4, empty medium 1/1400 = 7.14e-4, empty slow
//! 1/800 = 1.25e-3; fast with 3 processes 1.5/2300 = 6.52e-4, with 4
//! 2/2300 = 8.70e-4; medium with 3 1.5/1400 = 1.07e-3.

mod common;

use common::{err, go, run_intervals, PATEL_CPUSETS};
use hetsched_core::metrics::RunResults;
use hetsched_core::policy::patel::{
    estimate_a, estimate_b, Action, EstimateBIdle, Patel, Rule, SetView,
};
use hetsched_core::policy::{registry, Kind, Observation};
use std::collections::BTreeSet;

// ------------------------------------------------------------ helpers

/// A scenario on the Opteron-like preset with the given cpusets.
fn scenario_with(cpusets: &str, duration_s: f64, agent: &str, programs: &str) -> String {
    format!(
        "duration_s = {duration_s}\nstop_when_done = false\ngovernor = \"userspace\"\n\
         agents = [\"{agent}\"]\nmachine.preset = \"patel-opteron-8\"\n{cpusets}\n{programs}"
    )
}

/// A scenario with Patel's cpusets.
fn scenario(duration_s: f64, agent: &str, programs: &str) -> String {
    scenario_with(PATEL_CPUSETS, duration_s, agent, programs)
}

/// A CPU hog (runs for the whole test).
fn hog(name: &str, ipc: f64, extra: &str) -> String {
    format!(
        "[[workload.programs]]\nname = \"{name}\"\nkind = \"sequential\"\nwork_ms = 5000\nipc = {ipc}\n{extra}\n"
    )
}

/// A process that computes `compute` ms and sleeps `sleep` ms, over and over.
fn sleepy(name: &str, compute: f64, sleep: f64, ipc: f64, extra: &str) -> String {
    format!(
        "[[workload.programs]]\nname = \"{name}\"\nkind = \"phases\"\nloops = 100000\nipc = {ipc}\n\
         phases = [{{ compute_ms = {compute} }}, {{ sleep_ms = {sleep} }}]\n{extra}\n"
    )
}

/// The CPUs `task` ran on during (from_s, to_s].
fn ran_on(r: &RunResults, task: usize, from_s: f64, to_s: f64) -> BTreeSet<usize> {
    let (a, b) = ((from_s * 1e9).round() as u64, (to_s * 1e9).round() as u64);
    run_intervals(r, task)
        .into_iter()
        .filter(|&(_, t_ns, end_ns)| end_ns > a && t_ns < b)
        .map(|(cpu, _, _)| cpu)
        .collect()
}

/// The name of Patel's cpuset holding all of `cpus` ("-" if none ran).
fn set_name(cpus: &BTreeSet<usize>) -> &'static str {
    if cpus.is_empty() {
        "-"
    } else if cpus.iter().all(|&c| c <= 3) {
        "slow"
    } else if cpus.iter().all(|&c| c == 4 || c == 5) {
        "medium"
    } else if cpus.iter().all(|&c| c >= 6) {
        "fast"
    } else {
        "mixed"
    }
}

fn task_of(r: &RunResults, program: &str) -> usize {
    r.tasks
        .iter()
        .find(|t| t.program == program)
        .unwrap_or_else(|| panic!("no program {program}"))
        .task
}

/// Assert that `program` ran only in `set` during every 100 ms window
/// from `from_s` to `to_s`.
fn assert_in(r: &RunResults, program: &str, set: &str, from_s: f64, to_s: f64) {
    let t = task_of(r, program);
    let mut k = (from_s * 10.0).round() as usize;
    while (k as f64) < to_s * 10.0 - 1e-9 {
        let (a, b) = (k as f64 * 0.1, (k + 1) as f64 * 0.1);
        let got = set_name(&ran_on(r, t, a, b));
        assert_eq!(got, set, "{program} in ({a:.1}, {b:.1}]");
        k += 1;
    }
}

// ------------------------------------------------- end to end, Patel's cpusets

#[test]
fn t01_arrivals_go_to_the_least_estimate_a() {
    // Five hogs (IPC 2.0, so never "decreased performance") start at t = 0
    // wherever CFS puts them (CPUs 0-4: slow holds 4, medium 1). At the
    // first sample (0.1 s) all five are new and are placed in task order,
    // each seeing the moves before it:
    //   h0: slow 1/800 (avg 1), medium 1/1400, fast 1/2300 → fast
    //   h1: fast avg 0.5 → 1/2300 → fast;  h2: fast avg 1 → 1/2300 → fast
    //   h3: fast avg 1.5 → 6.52e-4 < medium 7.14e-4 → fast
    //   h4: fast avg 2 → 8.70e-4 > medium (h4 itself, avg 0.5) 7.14e-4 →
    //       medium, where it already runs (it stays on CPU 4).
    let mut p = String::new();
    for i in 0..5 {
        p.push_str(&hog(&format!("h{i}"), 2.0, ""));
    }
    let r = go(&scenario(0.3, "patel-cpu[interval_ms=100]", &p));
    for h in ["h0", "h1", "h2", "h3"] {
        assert_ne!(
            set_name(&ran_on(&r, task_of(&r, h), 0.0, 0.1)),
            "fast",
            "{h} before"
        );
        assert_in(&r, h, "fast", 0.1, 0.2);
    }
    assert_eq!(ran_on(&r, task_of(&r, "h4"), 0.0, 0.2), BTreeSet::from([4]));
}

#[test]
fn t02_a_tie_goes_to_the_cpuset_with_fewer_threads_per_queue() {
    // Two one-CPU cpusets at 2300 MHz. x: both empty, 1/2300 each, equal
    // threads per queue and frequency → the first listed, fast_a (CPU 6).
    // y: fast_a has x (avg 1 → 1/2300), fast_b is empty (1/2300): a tie,
    // broken by the fewer threads per ready queue → fast_b (CPU 7); without
    // the tie rule it would join x on CPU 6.
    let sets = "[[cpusets]]\nname = \"slow\"\ncpus = [0, 1, 2, 3]\nmhz = 800\n\
                [[cpusets]]\nname = \"fast_a\"\ncpus = [6]\nmhz = 2300\n\
                [[cpusets]]\nname = \"fast_b\"\ncpus = [7]\nmhz = 2300\n";
    let p = format!("{}{}", hog("x", 2.0, ""), hog("y", 2.0, ""));
    let r = go(&scenario_with(sets, 0.3, "patel-cpu[interval_ms=100]", &p));
    assert_eq!(ran_on(&r, task_of(&r, "x"), 0.1, 0.3), BTreeSet::from([6]));
    assert_eq!(ran_on(&r, task_of(&r, "y"), 0.1, 0.3), BTreeSet::from([7]));
}

/// g and three short f's start in `slow`, `a` and `b` in `medium`. At the
/// 0.1 s sample all six are new (slow 4, medium 2, fast 0):
///   g: fast 1/2300 → fast;  f0: fast avg 0.5 → fast;  f1: avg 1 → fast;
///   f2: fast avg 1.5 → 6.52e-4 < medium (avg 1) 7.14e-4 → fast;
///   a, b: fast avg 2 → 8.70e-4 > medium avg 1 → 7.14e-4 → medium (stay).
/// Each f has 40 ms of work, 100 × 800/2300 = 34.8 ms done at 800 MHz by
/// 0.1 s; the rest takes a few ms on fast, so at the 0.2 s sample fast holds
/// g alone (avg 0.5, estimate 1/2300) and a, b are alone on CPUs 4 and 5.
fn fast_frees_up(a: &str, b: &str) -> String {
    let mut p = hog("g", 2.0, "cpuset = \"slow\"");
    for i in 0..3 {
        p.push_str(&format!(
            "[[workload.programs]]\nname = \"f{i}\"\nkind = \"sequential\"\nwork_ms = 40\nipc = 2.0\ncpuset = \"slow\"\n"
        ));
    }
    p.push_str(a);
    p.push_str(b);
    p
}

#[test]
fn t03_a_cpu_intensive_process_with_low_ipc_moves_to_the_least_estimate_a() {
    // At 0.2 s (see fast_frees_up): a is CPU intensive (utilisation ≈ 1 >
    // 50 %) with IPC 0.8 < 1.7 → performance index true → least estimate_a
    // = fast (1/2300 < medium 1/1400) → a moves to fast, filling it (g, a).
    // b has IPC 2.0 and never waits → index false → stays in medium. The
    // empty-queue rule has nothing to move: medium (b alone, avg 0.5) and
    // slow (empty) could only take a process from a slower cpuset or one
    // with more than one per CPU, and fast has exactly one per CPU.
    let p = fast_frees_up(
        &hog("a", 0.8, "cpuset = \"medium\""),
        &hog("b", 2.0, "cpuset = \"medium\""),
    );
    let r = go(&scenario(1.0, "patel-cpu[interval_ms=100]", &p));
    assert_in(&r, "a", "medium", 0.1, 0.2);
    assert_in(&r, "a", "fast", 0.2, 1.0);
    assert_in(&r, "b", "medium", 0.0, 1.0);
    assert_in(&r, "g", "fast", 0.1, 1.0);
}

/// n (2 ms compute / 8 ms sleep, IPC 2.0, task 0, so it is decided first
/// at every sample) among `hogs` IPC-2.0 hogs.
fn loaded(agent: &str, hogs: usize, extra: &str) -> RunResults {
    let mut p = sleepy("n", 2.0, 8.0, 2.0, "");
    p.push_str(extra);
    for i in 0..hogs {
        p.push_str(&hog(&format!("h{i}"), 2.0, ""));
    }
    go(&scenario(1.5, agent, &p))
}

#[test]
fn t04_a_process_not_cpu_intensive_moves_to_the_least_estimate_b_under_load() {
    // n is placed in fast at 0.1 s (task 0: every cpuset is estimated
    // before the hogs are placed). With 8 hogs the load average over an
    // interval is 8 (they are always running or runnable) plus n's share,
    // > num_cpus = 8, and n's utilisation is ≈ 0.2-0.4 < 50 %: at 0.2 s it
    // moves to the least estimate_b. The hogs were packed into fast and
    // medium at 0.1 s (fast ≥ 2 per CPU → avg × 2300 ≥ 4600, medium 2 per
    // CPU → 2800) and slow was empty (as written, 1/800): slow.
    let r = loaded("patel-cpu[interval_ms=100]", 8, "");
    assert_in(&r, "n", "fast", 0.1, 0.2);
    assert_in(&r, "n", "slow", 0.2, 0.3);
    // As written, an under-filled cpuset has estimate_b = 1/f, so while
    // the empty-queue rule refills the cpusets n visits medium when medium
    // is the one below one process per CPU (1/1400 < 800 × avg); from
    // 0.5 s every cpuset is full and n stays in slow (800 × avg is least).
    assert_in(&r, "n", "slow", 0.5, 1.5);
    let visited = ran_on(&r, task_of(&r, "n"), 0.3, 0.5);
    assert_eq!(set_name(&visited), "medium");
    // estimate_b_idle=freq (f below one per CPU): slow stays the least.
    let r = loaded("patel-cpu[interval_ms=100,estimate_b_idle=freq]", 8, "");
    assert_in(&r, "n", "slow", 0.2, 1.5);
    // With 6 hogs the load is ≈ 6.3 < 8: the rule does not apply, and n's
    // performance index is false (IPC 2.0, little waiting): n stays.
    let r = loaded("patel-cpu[interval_ms=100]", 6, "");
    assert_in(&r, "n", "fast", 0.1, 1.5);
}

/// Two one-CPU cpusets a (CPU 6, 2300 MHz) and b (CPU 4, 1400 MHz), both
/// always full so that the empty-queue rule never acts; h1, w, h2 are
/// IPC-2.0 hogs and the performance index uses "and" (never true here).
/// At 0.1 s: h1 → a (1/2300); w → a (avg 1, 1/2300 < 1/1400); h2: a avg 2
/// → 8.70e-4 > b 7.14e-4 → b. w shares CPU 6 with h1.
fn waiting(agent: &str, h_nice: i32, w_nice: i32) -> RunResults {
    let sets = "[[cpusets]]\nname = \"a\"\ncpus = [6]\nmhz = 2300\n\
                [[cpusets]]\nname = \"b\"\ncpus = [4]\nmhz = 1400\n";
    let p = format!(
        "{}{}{}",
        hog("h1", 2.0, &format!("nice = {h_nice}")),
        hog("w", 2.0, &format!("nice = {w_nice}")),
        hog("h2", 2.0, &format!("nice = {h_nice}"))
    );
    go(&scenario_with(sets, 0.6, agent, &p))
}

#[test]
fn t05_a_process_waiting_the_whole_interval_moves_to_the_least_estimate_a() {
    // Algorithm 1: w (nice 19, weight 15) behind h1 (nice -20, weight
    // 88761) gets one slice after its move and then none: it waits all of
    // (0.2, 0.3], fraction_wait_time = 1 → least estimate_a: a avg 2 →
    // 8.70e-4, b avg 1 → 7.14e-4 → b (CPU 4).
    let r = waiting("patel-cpu[interval_ms=100,index_rule=and]", -20, 19);
    let w = task_of(&r, "w");
    assert_eq!(ran_on(&r, w, 0.1, 0.2), BTreeSet::from([6]));
    assert!(ran_on(&r, w, 0.2, 0.3).is_empty());
    assert_eq!(ran_on(&r, w, 0.3, 0.4), BTreeSet::from([4]));
    // Nice 0 against nice 0: w waits about half the time, not all of it:
    // it stays on CPU 6.
    let r = waiting("patel-cpu[interval_ms=100,index_rule=and]", 0, 0);
    assert_eq!(ran_on(&r, task_of(&r, "w"), 0.1, 0.6), BTreeSet::from([6]));
}

#[test]
fn t06_the_cache_miss_index_keeps_a_process_from_moving_up() {
    // As t03 with two IPC-0.8 hogs in medium. Algorithm 3: a1's cache miss
    // ratio 0.01 > 0.0014 → cache miss index true → not moved; a2's 0.001
    // → false → moves to fast (least estimate_a, 1/2300).
    let p = fast_frees_up(
        &hog("a1", 0.8, "cpuset = \"medium\"\nmiss_ratio = 0.01"),
        &hog("a2", 0.8, "cpuset = \"medium\"\nmiss_ratio = 0.001"),
    );
    let r = go(&scenario(1.0, "patel-cachemiss[interval_ms=100]", &p));
    assert_in(&r, "a1", "medium", 0.0, 1.0);
    assert_in(&r, "a2", "fast", 0.2, 1.0);
    // Algorithm 2 has no such index: both move (a1 first: fast avg 0.5 →
    // 1/2300; then a2: fast avg 1 → 1/2300 < medium avg 0.5 → 1/1400).
    let r = go(&scenario(1.0, "patel-priority[interval_ms=100]", &p));
    assert_in(&r, "a1", "fast", 0.2, 1.0);
    assert_in(&r, "a2", "fast", 0.2, 1.0);
    // cache_metric=misses_per_instr: a1 0.1 refs/instr × 0.05 = 0.005 >
    // 0.0014 stays; a2 0.01 × 0.05 = 0.0005 moves.
    let p = fast_frees_up(
        &hog(
            "a1",
            0.8,
            "cpuset = \"medium\"\nmiss_ratio = 0.05\nrefs_per_instr = 0.1",
        ),
        &hog(
            "a2",
            0.8,
            "cpuset = \"medium\"\nmiss_ratio = 0.05\nrefs_per_instr = 0.01",
        ),
    );
    let r = go(&scenario(
        1.0,
        "patel-cachemiss[interval_ms=100,cache_metric=misses_per_instr]",
        &p,
    ));
    assert_in(&r, "a1", "medium", 0.0, 1.0);
    assert_in(&r, "a2", "fast", 0.2, 1.0);
    // By miss ratio (0.05 for both) neither moves up by step (a); fast's
    // free CPU is then filled by the empty-queue rule, which has no cache
    // condition: one of the two (both at 100 %) goes, the other stays.
    let r = go(&scenario(1.0, "patel-cachemiss[interval_ms=100]", &p));
    let sets: Vec<_> = ["a1", "a2"]
        .iter()
        .map(|a| set_name(&ran_on(&r, task_of(&r, a), 0.2, 1.0)))
        .collect();
    assert!(
        sets.contains(&"fast") && sets.contains(&"medium"),
        "{sets:?}"
    );
}

#[test]
fn t07_the_context_switch_index_keeps_a_process_from_moving_up() {
    // Algorithm 4. a1 computes 1 ms and sleeps 0.1 ms: at 1400 MHz a
    // compute phase takes 1.64 ms, so a1 is CPU intensive (≈ 94 %) and
    // switches out about 610 times per second of run time: index ≈
    // 0.5 × 610 > 17 → not moved. a2, a hog alone on its CPU, hardly
    // switches: index < 17 → moves to fast.
    let p = fast_frees_up(
        &sleepy("a1", 1.0, 0.1, 0.8, "cpuset = \"medium\""),
        &hog("a2", 0.8, "cpuset = \"medium\""),
    );
    let r = go(&scenario(1.0, "patel-ctxswitch[interval_ms=100]", &p));
    assert_in(&r, "a1", "medium", 0.0, 1.0);
    assert_in(&r, "a2", "fast", 0.2, 1.0);
    // Algorithm 2 moves both.
    let r = go(&scenario(1.0, "patel-priority[interval_ms=100]", &p));
    assert_in(&r, "a1", "fast", 0.2, 1.0);
    assert_in(&r, "a2", "fast", 0.2, 1.0);
}

#[test]
fn t08_algorithm_2_nice_thresholds() {
    // (a) CPU intensive with decreased performance moves up only if
    // nice < 9: a8 moves to fast at 0.2 s, a9 stays in medium.
    let p = fast_frees_up(
        &hog("a9", 0.8, "cpuset = \"medium\"\nnice = 9"),
        &hog("a8", 0.8, "cpuset = \"medium\"\nnice = 8"),
    );
    let r = go(&scenario(1.0, "patel-priority[interval_ms=100]", &p));
    assert_in(&r, "a9", "medium", 0.0, 1.0);
    assert_in(&r, "a8", "fast", 0.2, 1.0);
    // The same under Algorithm 1, which ignores nice: both move (a9 first,
    // then a8: fast avg 1 → 1/2300 < medium avg 0.5 → 1/1400).
    let r = go(&scenario(1.0, "patel-cpu[interval_ms=100]", &p));
    assert_in(&r, "a9", "fast", 0.2, 1.0);
    assert_in(&r, "a8", "fast", 0.2, 1.0);

    // (b) Not CPU intensive, load between num_cpus and 2 × num_cpus (8
    // hogs plus two sleepy processes): n (nice 0 > -1) moves to the least
    // estimate_b (slow) at 0.2 s as in t04; n1 (nice -1) would need a load
    // above 16 and stays in fast.
    let r = loaded(
        "patel-priority[interval_ms=100]",
        8,
        &sleepy("n1", 2.0, 8.0, 2.0, "nice = -1"),
    );
    assert_in(&r, "n", "fast", 0.1, 0.2);
    assert_in(&r, "n", "slow", 0.2, 0.3);
    assert_in(&r, "n1", "fast", 0.1, 1.5);

    // (c) Not CPU intensive with decreased performance (IPC 0.8), load ≈
    // 1.6 (g ≈ 1 plus two sleepy processes ≈ 0.3 each): between 0.15 × 8 =
    // 1.2 and 8. n11 (nice -11 ≤ -11, load ≤ 8) moves to fast at 0.2 s;
    // n10 (nice -10 needs load < 1.2) stays in medium. (Later the
    // empty-queue rule pulls n10 into fast's free CPU when a sample finds
    // it runnable.)
    let p = fast_frees_up(
        &sleepy("n11", 2.0, 8.0, 0.8, "cpuset = \"medium\"\nnice = -11"),
        &sleepy("n10", 2.0, 8.0, 0.8, "cpuset = \"medium\"\nnice = -10"),
    );
    let r = go(&scenario(1.0, "patel-priority[interval_ms=100]", &p));
    assert_in(&r, "n11", "medium", 0.1, 0.2);
    assert_in(&r, "n11", "fast", 0.2, 1.0);
    assert_in(&r, "n10", "medium", 0.1, 0.5);
}

#[test]
fn t09_dynamic_priorities() {
    // Patel's dynamic priorities: the first nice value for three cycles,
    // the second for the rest. a starts at nice 9 (too low a priority to
    // move up) and gets nice 8 after three intervals: it arrives at the
    // 0.1 s sample, so the 0.4 s sample renices it and, with the new
    // value, moves it to fast (fast holds g and c, avg 1 → 1/2300 <
    // medium, a alone, 1/1400). c (nice 8) moved at 0.2 s as in t08.
    let p = fast_frees_up(
        &hog("a", 0.8, "cpuset = \"medium\"\nnice = 9"),
        &hog("c", 0.8, "cpuset = \"medium\"\nnice = 8"),
    );
    let r = go(&scenario(
        1.0,
        "patel-priority[interval_ms=100,priorities=dynamic,second_nice=a:8]",
        &p,
    ));
    assert_in(&r, "c", "fast", 0.2, 0.4);
    assert_in(&r, "a", "medium", 0.1, 0.4);
    assert_in(&r, "a", "fast", 0.4, 1.0);
    // Nice 8 has CFS weight 172, nice 9 137.
    assert_eq!(r.tasks[task_of(&r, "a")].weight, 172);
    // Static priorities: a keeps nice 9 and stays.
    let r = go(&scenario(1.0, "patel-priority[interval_ms=100]", &p));
    assert_in(&r, "a", "medium", 0.1, 1.0);
    assert_eq!(r.tasks[task_of(&r, "a")].weight, 137);
}

#[test]
fn t10_algorithm_2_waiting_rule() {
    // Wait fraction ≥ 0.7 with nice < -1, or > 0.9 → least estimate_a.
    // w nice -2 (weight 1586) behind h1 nice -8 (6100): share 0.21, waits
    // ≈ 0.79 → moves to b at the first sample after its placement, and
    // back (b then holds two).
    let r = waiting("patel-priority[interval_ms=100,index_rule=and]", -8, -2);
    let w = task_of(&r, "w");
    assert_eq!(ran_on(&r, w, 0.1, 0.2), BTreeSet::from([6]));
    assert_eq!(ran_on(&r, w, 0.2, 0.3), BTreeSet::from([4]));
    // nice -1 (1277) behind nice -7 (4904): also waits ≈ 0.79, but nice -1
    // is not < -1 and 0.79 is not > 0.9: stays.
    let r = waiting("patel-priority[interval_ms=100,index_rule=and]", -7, -1);
    assert_eq!(ran_on(&r, task_of(&r, "w"), 0.1, 0.6), BTreeSet::from([6]));
    // nice 5 (335) behind nice -10 (9548): waits ≈ 0.97 > 0.9 → moves
    // whatever its nice.
    let r = waiting("patel-priority[interval_ms=100,index_rule=and]", -10, 5);
    let w = task_of(&r, "w");
    assert_eq!(ran_on(&r, w, 0.2, 0.3), BTreeSet::from([4]));
}

#[test]
fn t11_an_under_filled_cpuset_receives_a_process() {
    // After t01's placement fast holds h0-h3 (avg 2), medium h4 (avg 0.5),
    // slow nothing. At 0.2 s the hogs sharing fast are at 50 % and not
    // "decreased performance" (IPC 2.0, wait ≈ 0.5 is not > 0.5 with the
    // "and" rule), so only the empty-queue rule acts: the fastest
    // under-filled cpuset, medium, takes the most CPU-intensive process of
    // a cpuset with more than one per CPU (fast); then slow takes the next
    // from fast (now avg 1.5). Fast keeps two, one per CPU, and those are
    // not moved to the empty slow cpuset below them at later samples.
    let mut p = String::new();
    for i in 0..5 {
        p.push_str(&hog(&format!("h{i}"), 2.0, ""));
    }
    let r = go(&scenario(
        1.0,
        "patel-cpu[interval_ms=100,index_rule=and]",
        &p,
    ));
    let at = |k: f64| -> Vec<&'static str> {
        (0..5)
            .map(|t| set_name(&ran_on(&r, t, k, k + 0.1)))
            .collect()
    };
    assert_eq!(at(0.1), ["fast", "fast", "fast", "fast", "medium"]);
    let after = at(0.2);
    let count = |s: &str| after.iter().filter(|x| **x == s).count();
    assert_eq!((count("fast"), count("medium"), count("slow")), (2, 2, 1));
    for k in 3..10 {
        assert_eq!(at(k as f64 / 10.0), after, "at {k}");
    }
}

#[test]
fn t12_a_scenario_without_cpusets_is_refused() {
    for agent in [
        "patel-cpu",
        "patel-priority",
        "patel-cachemiss",
        "patel-ctxswitch",
    ] {
        let e = err(&format!(
            "duration_s = 1\nagents = [\"{agent}\"]\nmachine.preset = \"patel-opteron-8\"\n{}",
            hog("x", 1.0, "")
        ));
        assert!(e.contains(&format!("agent \"{agent}\"")), "{e}");
        assert!(
            e.contains(&format!("{agent} needs cpusets: add [[cpusets]]")),
            "{e}"
        );
    }
}

#[test]
fn t13_bad_parameters_are_explained() {
    let bad = |spec: &str| match Patel::from_spec(spec) {
        Ok(_) => panic!("{spec} accepted"),
        Err(e) => e,
    };
    let e = bad("patel-cpu[foo=1]");
    assert!(
        e.contains(
            "has no parameter \"foo\"; known: interval_ms, index_rule, wait, load, estimate_b_idle"
        ),
        "{e}"
    );
    // Algorithm 1 has no priorities, Algorithm 2 no cache metric.
    assert!(bad("patel-cpu[second_nice=a:1]").contains("has no parameter \"second_nice\""));
    assert!(bad("patel-priority[cache_metric=miss_ratio]")
        .contains("has no parameter \"cache_metric\""));
    let e = bad("patel-cpu[interval_ms=0]");
    assert_eq!(
        e,
        "patel-cpu[interval_ms]: 0 is out of range; allowed 1 to 86400000"
    );
    let e = bad("patel-priority[index_rule=xor]");
    assert_eq!(
        e,
        "patel-priority[index_rule]: \"xor\" is not allowed; allowed: or, and"
    );
    assert!(bad("patel-cpu[wait=io]").contains("allowed: ready, ready_io"));
    assert!(bad("patel-cpu[load=avg]").contains("allowed: interval, instant"));
    assert!(bad("patel-cpu[estimate_b_idle=x]").contains("allowed: inverse, freq"));
    assert!(bad("patel-priority[cipi=x]").contains("allowed: shifted, literal"));
    assert!(
        bad("patel-cachemiss[cache_metric=x]").contains("allowed: miss_ratio, misses_per_instr")
    );
    assert_eq!(
        bad("patel-priority[priorities=dynamic]"),
        "patel-priority[second_nice]: priorities=dynamic needs at least one program:nice pair (e.g. gcc:-14;bzip2:-8)"
    );
    assert_eq!(
        bad("patel-priority[second_nice=gcc:-14]"),
        "patel-priority[second_nice]: only used with priorities=dynamic"
    );
    assert_eq!(
        bad("patel-priority[priorities=dynamic,second_nice=gcc-14]"),
        "patel-priority[second_nice]: \"gcc-14\" is not of the form program:nice (e.g. gcc:-14)"
    );
    assert_eq!(
        bad("patel-priority[priorities=dynamic,second_nice=gcc:-24]"),
        "patel-priority[second_nice]: nice -24 of \"gcc\" is out of range; allowed -20 to 19"
    );
    assert_eq!(
        bad("patel-priority[priorities=dynamic,second_nice=gcc:1;gcc:2]"),
        "patel-priority[second_nice]: program \"gcc\" is given twice"
    );
    assert_eq!(
        bad("patel-ctxswitch[priorities=dynamic,second_nice=gcc:1,first_cycles=2.5]"),
        "patel-ctxswitch[first_cycles]: 2.5 is not a whole number of intervals"
    );
    // Patel's Table 7 second priorities parse.
    assert!(Patel::from_spec(
        "patel-cachemiss[priorities=dynamic,second_nice=nonpuintensive:-6;mcf:0;gcc:-14;bzip2:-8;sjeng:-2]"
    )
    .is_ok());
    // In a scenario the error names the agent entry.
    let e = err(&scenario(
        1.0,
        "patel-cpu[interval_ms=0]",
        &hog("x", 1.0, ""),
    ));
    assert!(
        e.starts_with("agents[0]: patel-cpu[interval_ms]: 0 is out of range"),
        "{e}"
    );
    let e = err(&scenario(1.0, "patel", &hog("x", 1.0, "")));
    assert!(e.contains("unknown agent \"patel\"; known: patel-cpu, patel-priority, patel-cachemiss, patel-ctxswitch"), "{e}");
}

#[test]
fn t14_the_four_agents_are_registered() {
    let agents: Vec<_> = registry()
        .into_iter()
        .filter(|p| p.kind == Kind::Agent)
        .collect();
    let names: Vec<_> = agents.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "patel-cpu",
            "patel-priority",
            "patel-cachemiss",
            "patel-ctxswitch"
        ]
    );
    let interval = agents[0]
        .params
        .iter()
        .find(|p| p.name == "interval_ms")
        .unwrap();
    assert_eq!(interval.default, "1000");
    assert!(interval.doc.contains("one fifth"));
}

// ------------------------------------------- decisions on crafted observations

/// Patel's cpusets with the given running plus runnable counts.
fn sets(load: [f64; 3]) -> Vec<SetView> {
    vec![
        SetView {
            cpus: vec![0, 1, 2, 3],
            mhz: 800.0,
            load: load[0],
        },
        SetView {
            cpus: vec![4, 5],
            mhz: 1400.0,
            load: load[1],
        },
        SetView {
            cpus: vec![6, 7],
            mhz: 2300.0,
            load: load[2],
        },
    ]
}
const SLOW: usize = 0;
const MEDIUM: usize = 1;
const FAST: usize = 2;

/// A running process confined to cpuset `set`.
fn ob(task: usize, set: usize, util: f64, ipc: f64, wait: f64) -> Observation {
    let cpus = sets([0.0; 3])[set].cpus.clone();
    Observation {
        task,
        program: format!("p{task}"),
        state: "running",
        cpu: cpus[0],
        nice: 0,
        affinity: cpus,
        cpu_util: util,
        ipc,
        wait_frac: wait,
        runtime_s: 1.0,
        ..Observation::default()
    }
}

/// The actions of the second sample that sees `obs` (the first places the
/// arrivals); `load` is the instantaneous load average.
fn decide(spec: &str, obs: &[Observation], counts: [f64; 3], load: f64) -> Vec<Action> {
    let mut p = Patel::from_spec(spec).unwrap();
    p.plan(obs, &sets(counts), 8, load);
    p.plan(obs, &sets(counts), 8, load)
}

fn mv(task: usize, set: usize, rule: Rule) -> Action {
    Action::Move { task, set, rule }
}

#[test]
fn t15_throughput_estimates_as_written() {
    assert_eq!(estimate_a(0.0, 800.0), 1.0 / 800.0);
    assert_eq!(estimate_a(0.75, 2300.0), 1.0 / 2300.0);
    assert_eq!(estimate_a(1.0, 2300.0), 1.0 / 2300.0);
    assert_eq!(estimate_a(2.0, 1400.0), 2.0 / 1400.0);
    assert_eq!(estimate_b(2.0, 1400.0, EstimateBIdle::Inverse), 2800.0);
    assert_eq!(
        estimate_b(0.5, 1400.0, EstimateBIdle::Inverse),
        1.0 / 1400.0
    );
    assert_eq!(estimate_b(0.5, 1400.0, EstimateBIdle::Freq), 1400.0);
    // Arrival on an empty machine: the least estimate_a is fast's 1/2300.
    let mut p = Patel::from_spec("patel-cpu").unwrap();
    let mut o = ob(0, SLOW, 0.1, 2.0, 0.0);
    o.affinity = (0..8).collect();
    assert_eq!(
        p.plan(&[o.clone()], &sets([1.0, 0.0, 0.0]), 8, 1.0),
        [mv(0, FAST, Rule::Arrival)]
    );
    // Next sample, now in fast: not an arrival any more (and nothing else
    // applies).
    let o = ob(0, FAST, 0.1, 2.0, 0.0);
    assert_eq!(p.plan(&[o], &sets([0.0, 0.0, 1.0]), 8, 1.0), []);
}

#[test]
fn t16_performance_index_and_cpu_intensity_thresholds() {
    // A process in medium; fast holds one per CPU (estimate_a 1/2300, still
    // the least, and not under-filled, so the empty-queue rule does not
    // pull the process there by itself).
    let c = [0.0, 1.0, 2.0];
    let a = "patel-cpu[load=instant]";
    let m = |t| vec![mv(t, FAST, Rule::CpuIntensive)];
    assert_eq!(decide(a, &[ob(0, MEDIUM, 0.9, 1.69, 0.0)], c, 1.0), m(0));
    assert_eq!(decide(a, &[ob(0, MEDIUM, 0.9, 1.7, 0.0)], c, 1.0), []);
    // "or": waiting more than half the interval is enough...
    assert_eq!(
        decide(a, &[ob(0, MEDIUM, 0.51, 2.0, 0.49 + 0.02)], c, 1.0),
        m(0)
    );
    assert_eq!(decide(a, &[ob(0, MEDIUM, 0.51, 2.0, 0.5)], c, 1.0), []);
    // ...but with "and" both are needed.
    let and = "patel-cpu[load=instant,index_rule=and]";
    assert_eq!(decide(and, &[ob(0, MEDIUM, 0.9, 1.0, 0.0)], c, 1.0), []);
    assert_eq!(decide(and, &[ob(0, MEDIUM, 0.6, 1.0, 0.51)], c, 1.0), m(0));
    // CPU intensity: exactly 50 % is not CPU intensive: with a low IPC and a
    // load below num_cpus it moves by the other rule (step 5b, second half).
    assert_eq!(
        decide(a, &[ob(0, MEDIUM, 0.5, 1.0, 0.0)], c, 1.0),
        [mv(0, FAST, Rule::Unloaded)]
    );
    assert_eq!(
        decide(a, &[ob(0, MEDIUM, 0.500001, 1.0, 0.0)], c, 1.0),
        m(0)
    );
    // ready_io: time asleep counts as waiting (utilisation 0.2 → 0.8).
    let io = "patel-cpu[load=instant,wait=ready_io]";
    assert_eq!(decide(a, &[ob(0, MEDIUM, 0.2, 2.0, 0.0)], c, 1.0), []);
    assert_eq!(
        decide(io, &[ob(0, MEDIUM, 0.2, 2.0, 0.0)], c, 1.0),
        [mv(0, FAST, Rule::Unloaded)]
    );
}

#[test]
fn t17_algorithm_1_load_thresholds() {
    // Not CPU intensive (30 %) with a low IPC. In fast with every cpuset at
    // one per CPU: estimate_b slow 800 < medium 1400 < fast 2300.
    let full = [4.0, 2.0, 2.0];
    let a = "patel-cpu[load=instant]";
    let p = ob(0, FAST, 0.3, 1.0, 0.0);
    assert_eq!(
        decide(a, std::slice::from_ref(&p), full, 8.01),
        [mv(0, SLOW, Rule::Loaded)]
    );
    // load = num_cpus: neither "> num_cpus" nor "< num_cpus" (l. 598, 602).
    assert_eq!(decide(a, &[p], full, 8.0), []);
    // Below num_cpus the low IPC moves it to the least estimate_a: from
    // medium (fast avg 1 → 1/2300 < medium 1/1400).
    let q = ob(0, MEDIUM, 0.3, 1.0, 0.0);
    assert_eq!(decide(a, &[q], full, 7.99), [mv(0, FAST, Rule::Unloaded)]);
    // ...unless its IPC is fine.
    assert_eq!(decide(a, &[ob(0, MEDIUM, 0.3, 1.8, 0.0)], full, 7.99), []);
    // The default load is the interval's mean: nine processes running or
    // waiting all the time (0.3 + 0.7 each) make 9 > 8.
    let obs: Vec<_> = (0..9).map(|t| ob(t, FAST, 0.3, 1.0, 0.7)).collect();
    let acts = decide("patel-cpu", &obs, [4.0, 2.0, 9.0], 0.0);
    assert_eq!(acts[0], mv(0, SLOW, Rule::Loaded));
}

#[test]
fn t18_algorithm_2_nice_thresholds() {
    let a = "patel-priority[load=instant]";
    let nice = |mut o: Observation, n: i32| {
        o.nice = n;
        o
    };
    // Step (a): nice < 9.
    let hot = ob(0, MEDIUM, 0.9, 1.0, 0.0);
    let c = [0.0, 1.0, 2.0];
    assert_eq!(
        decide(a, &[nice(hot.clone(), 8)], c, 1.0),
        [mv(0, FAST, Rule::CpuIntensive)]
    );
    assert_eq!(decide(a, &[nice(hot, 9)], c, 1.0), []);
    // Step (b): nice > -1 and load > 8, or nice ≤ -1 and load > 16.
    let cold = ob(0, FAST, 0.3, 2.0, 0.0);
    let full = [4.0, 2.0, 2.0];
    assert_eq!(
        decide(a, &[nice(cold.clone(), 0)], full, 8.5),
        [mv(0, SLOW, Rule::Loaded)]
    );
    assert_eq!(decide(a, &[nice(cold.clone(), -1)], full, 8.5), []);
    assert_eq!(decide(a, &[nice(cold.clone(), -1)], full, 16.0), []);
    assert_eq!(
        decide(a, &[nice(cold, -1)], full, 16.5),
        [mv(0, SLOW, Rule::Loaded)]
    );
    // Step (b), second half: nice ≤ -11 and load ≤ 8, or nice > -11 and
    // load < 0.15 × 8 = 1.2, with decreased performance (IPC 1.0).
    let slow = ob(0, MEDIUM, 0.3, 1.0, 0.0);
    assert_eq!(
        decide(a, &[nice(slow.clone(), -11)], c, 8.0),
        [mv(0, FAST, Rule::Unloaded)]
    );
    assert_eq!(decide(a, &[nice(slow.clone(), -10)], c, 8.0), []);
    assert_eq!(decide(a, &[nice(slow.clone(), -10)], c, 1.2), []);
    assert_eq!(
        decide(a, &[nice(slow, -10)], c, 1.19),
        [mv(0, FAST, Rule::Unloaded)]
    );
}

#[test]
fn t19_waiting_rules() {
    // A runnable process in slow that hardly ran; fast is empty.
    let w = |wait: f64, n: i32| {
        let mut o = ob(0, SLOW, 0.0, 2.0, wait);
        o.state = "runnable";
        o.nice = n;
        o
    };
    // Medium and fast hold one per CPU, so the empty-queue rule leaves it.
    let c = [2.0, 2.0, 2.0];
    let moved = vec![mv(0, FAST, Rule::Waiting)];
    // Algorithm 1: a wait fraction of 1 (index "and" keeps step 5b out).
    let a1 = "patel-cpu[load=instant,index_rule=and]";
    assert_eq!(decide(a1, &[w(1.0, 0)], c, 2.0), moved);
    assert_eq!(decide(a1, &[w(0.999, 0)], c, 2.0), []);
    // Algorithms 2-4: ≥ 0.7 with nice < -1, or > 0.9.
    for alg in ["patel-priority", "patel-cachemiss", "patel-ctxswitch"] {
        let s = format!("{alg}[load=instant,index_rule=and]");
        assert_eq!(decide(&s, &[w(0.7, -2)], c, 2.0), moved, "{alg}");
        assert_eq!(decide(&s, &[w(0.69, -2)], c, 2.0), [], "{alg}");
        assert_eq!(decide(&s, &[w(0.8, -1)], c, 2.0), [], "{alg}");
        assert_eq!(decide(&s, &[w(0.9, 5)], c, 2.0), [], "{alg}");
        assert_eq!(decide(&s, &[w(0.91, 5)], c, 2.0), moved, "{alg}");
    }
}

#[test]
fn t20_cache_miss_and_context_switch_indices() {
    let c = [0.0, 1.0, 2.0];
    let hot = ob(0, MEDIUM, 0.9, 1.0, 0.0);
    let moved = vec![mv(0, FAST, Rule::CpuIntensive)];
    // Algorithm 3: miss ratio > 0.0014 blocks the move up.
    let with = |ratio: f64, per_instr: f64| {
        let mut o = hot.clone();
        o.miss_ratio = ratio;
        o.misses_per_instr = per_instr;
        o
    };
    let a3 = "patel-cachemiss[load=instant]";
    assert_eq!(decide(a3, &[with(0.0014, 0.0)], c, 1.0), moved);
    assert_eq!(decide(a3, &[with(0.0015, 0.0)], c, 1.0), []);
    let pi = "patel-cachemiss[load=instant,cache_metric=misses_per_instr]";
    assert_eq!(decide(pi, &[with(0.05, 0.0014)], c, 1.0), moved);
    assert_eq!(decide(pi, &[with(0.0, 0.0015)], c, 1.0), []);
    // ...and not the move down (step 5b, first half, l. 1770).
    let mut cold = with(0.5, 0.5);
    cold.cpu_util = 0.3;
    assert_eq!(
        decide(a3, &[cold], [4.0, 2.0, 2.0], 9.0),
        [mv(0, SLOW, Rule::Loaded)]
    );
    // Algorithm 4: 0.5 × csw/s + 0.5 × migrations/s > 17.
    let sw = |csw: f64, mig: f64| {
        let mut o = hot.clone();
        o.csw_per_s = csw;
        o.migrations_per_s = mig;
        o
    };
    let a4 = "patel-ctxswitch[load=instant]";
    assert_eq!(decide(a4, &[sw(34.0, 0.0)], c, 1.0), moved);
    assert_eq!(decide(a4, &[sw(30.0, 4.2)], c, 1.0), []);
    // Algorithm 2 has neither index.
    assert_eq!(
        decide(
            "patel-priority[load=instant]",
            &[sw(1000.0, 1000.0)],
            c,
            1.0
        ),
        moved
    );
}

#[test]
fn t21_empty_queue_rule_candidates_and_ranking() {
    // Fast empty, medium with three (avg 1.5), slow full. Processes with
    // IPC 2.0 and no waiting: no other rule applies.
    let c = [4.0, 3.0, 0.0];
    let obs = [
        ob(0, MEDIUM, 0.7, 2.0, 0.0),
        ob(1, MEDIUM, 0.9, 2.0, 0.0),
        ob(2, SLOW, 0.8, 2.0, 0.0),
    ];
    // Algorithm 1: fast receives the most CPU-intensive process (task 1);
    // one per interval per cpuset. Medium is still at 1 per CPU after that.
    assert_eq!(
        decide("patel-cpu", &obs, c, 7.0),
        [mv(1, FAST, Rule::EmptyQueue)]
    );
    // Processes alone on their CPUs in faster cpusets are not pulled down
    // into an empty slow cpuset (that would only move the empty queue).
    let obs = [
        ob(0, FAST, 1.0, 2.0, 0.0),
        ob(1, FAST, 1.0, 2.0, 0.0),
        ob(2, MEDIUM, 1.0, 2.0, 0.0),
        ob(3, MEDIUM, 1.0, 2.0, 0.0),
    ];
    assert_eq!(decide("patel-cpu", &obs, [0.0, 2.0, 2.0], 4.0), []);
    // Sleeping processes occupy no ready queue and are not candidates.
    let mut z = ob(0, SLOW, 0.9, 2.0, 0.0);
    z.state = "sleeping";
    assert_eq!(decide("patel-cpu", &[z], [3.0, 0.0, 0.0], 3.0), []);
    // Algorithms 2-4 rank by 0.5 × intensity + 0.5 × priority term; with
    // equal intensity the higher priority (nice -5: 1/16) beats nice 0
    // (1/21).
    let plain = ob(0, MEDIUM, 0.8, 2.0, 0.0);
    let mut urgent = ob(1, MEDIUM, 0.8, 2.0, 0.0);
    urgent.nice = -5;
    let pair = [plain, urgent.clone()];
    assert_eq!(
        decide("patel-priority", &pair, c, 7.0),
        [mv(1, FAST, Rule::EmptyQueue)]
    );
    // The literal 1/nice puts nice 0 (+∞) first, nice -5 (−0.2) last.
    assert_eq!(
        decide("patel-priority[cipi=literal]", &pair, c, 7.0),
        [mv(0, FAST, Rule::EmptyQueue)]
    );
    // Intensity still counts: 0.5 × 0.9 + 0.5/21 = 0.474 beats
    // 0.5 × 0.8 + 0.5/16 = 0.431.
    let busy = ob(0, MEDIUM, 0.9, 2.0, 0.0);
    assert_eq!(
        decide("patel-priority", &[busy, urgent], c, 7.0),
        [mv(0, FAST, Rule::EmptyQueue)]
    );
}

#[test]
fn t22_dynamic_priorities_renice_once_after_the_first_cycles() {
    let mut p =
        Patel::from_spec("patel-priority[priorities=dynamic,second_nice=p0:-14,first_cycles=2]")
            .unwrap();
    let mut o = ob(0, FAST, 1.0, 2.0, 0.0);
    o.nice = -4;
    let other = ob(1, FAST, 1.0, 2.0, 0.0);
    let s = sets([0.0, 0.0, 2.0]);
    let renices = |acts: Vec<Action>| -> Vec<Action> {
        acts.into_iter()
            .filter(|a| matches!(a, Action::SetNice { .. }))
            .collect()
    };
    // Samples 0 (arrival) and 1: first priority; sample 2: the second.
    assert_eq!(renices(p.plan(&[o.clone(), other.clone()], &s, 8, 2.0)), []);
    assert_eq!(renices(p.plan(&[o.clone(), other.clone()], &s, 8, 2.0)), []);
    assert_eq!(
        renices(p.plan(&[o.clone(), other.clone()], &s, 8, 2.0)),
        [Action::SetNice { task: 0, nice: -14 }]
    );
    o.nice = -14;
    assert_eq!(renices(p.plan(&[o, other], &s, 8, 2.0)), []);
}

#[test]
fn t23_first_sample_places_arrivals_early() {
    // Two hogs start on CPUs 0 and 1 (slow). With the default first sample
    // (one interval, 1 s) they run there until 1 s; with first_sample_ms=10
    // the arrival rule moves them (to fast, the least estimate_a) at 10 ms.
    let progs = format!("{}{}", hog("a", 2.0, ""), hog("b", 2.0, ""));
    let late = go(&scenario(3.0, "patel-cpu[interval_ms=1000]", &progs));
    let early = go(&scenario(
        3.0,
        "patel-cpu[interval_ms=1000,first_sample_ms=10]",
        &progs,
    ));
    for p in ["a", "b"] {
        assert_in(&late, p, "slow", 0.0, 0.99);
        assert_in(&early, p, "fast", 0.1, 0.99);
    }
    let e = match Patel::from_spec("patel-cpu[first_sample_ms=0]") {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    };
    assert!(
        e.contains("patel-cpu[first_sample_ms]: 0 is out of range; allowed 0.001 to 86400000"),
        "{e}"
    );
}
