//! End-to-end tests of the engine with hand-computed expectations.

mod common;

use common::{err, go, scn, PATEL_CPUSETS};
use hetsched_core::scenario::{parse, Format};

const ONE_CPU_512: &str = r#"
duration_s = 100
[machine.types.half]
capacity = 512
class_speedup = { fast = 4.0 }
[[machine.cpus]]
type = "half"
"#;

#[test]
fn capacity_512_takes_twice_the_work() {
    // W = 300 ms of reference work at speed 512/1024 = 0.5 takes 600 ms.
    let r = go(&format!(
        "{ONE_CPU_512}\n[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 300\n"
    ));
    let p = &r.programs[0];
    assert!(
        (p.completion_s - 0.6).abs() < 1e-9,
        "completion {}",
        p.completion_s
    );
    assert!((r.tasks[0].work_ms - 300.0).abs() < 1e-6);
}

#[test]
fn memory_intensity_follows_the_rate_formula() {
    // Class "fast" has speedup 4 on a capacity-512 CPU: s = 0.5 × 4 = 2.
    // With m = 0.5 the rate is 1 / ((1 − 0.5)/2 + 0.5) = 1 / 0.75, so
    // W = 300 ms takes 300 × 0.75 = 225 ms.
    let r = go(&format!(
        "{ONE_CPU_512}\n[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 300\nmem = 0.5\nclass = \"fast\"\n"
    ));
    assert!(
        (r.programs[0].completion_s - 0.225).abs() < 1e-9,
        "{}",
        r.programs[0].completion_s
    );
}

const ONE_CPU: &str = r#"
duration_s = 4
stop_when_done = false
[machine.types.c]
capacity = 1024
[[machine.cpus]]
type = "c"
"#;

#[test]
fn two_equal_tasks_share_one_cpu_evenly() {
    // With min_granularity = tick = 4 ms and latency 6 ms, two tasks get
    // slices of 4 ms: over 4 s each gets 2 s ± one min granularity (4 ms).
    let r = go(&format!(
        "scheduler = \"cfs[min_granularity_ms=4]\"\n{ONE_CPU}\n[[workload.programs]]\nkind = \"parallel\"\nthreads = 2\nwork_ms = 100000\n"
    ));
    let (a, b) = (r.tasks[0].run_s, r.tasks[1].run_s);
    assert!((a + b - 4.0).abs() < 1e-9, "cpu is always busy: {a} + {b}");
    assert!(
        (a - 2.0).abs() <= 0.004 + 1e-9 && (b - 2.0).abs() <= 0.004 + 1e-9,
        "a={a} b={b}"
    );
    // check_preempt_tick preempts when delta_exec > slice (strictly): at the
    // first tick delta_exec = 4 ms = slice, so a task runs two ticks (8 ms)
    // before it is preempted: 4 s / 8 ms = 500 switches, 250 per task.
    let csw = r.tasks[0].csw_involuntary;
    assert!((249..=251).contains(&csw), "involuntary switches {csw}");
}

#[test]
fn nice_5_gets_cpu_in_ratio_1024_to_335() {
    // Weights 1024 and 335: shares 1024/1359 = 75.35% and 24.65%.
    let r = go(&format!(
        "{ONE_CPU}\n[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 100000\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 100000\nnice = 5\n"
    ));
    let ratio = r.tasks[0].run_s / r.tasks[1].run_s;
    let want = 1024.0 / 335.0;
    assert!((ratio / want - 1.0).abs() < 0.02, "ratio {ratio} vs {want}");
}

#[test]
fn energy_is_power_times_time() {
    // One CPU at 2000 MHz, 1.0 V, dyn 1.0 W/(V²·GHz), static 0.3 W/V, idle 0.1 W,
    // base 2 W. Busy 1 s: 0.3 + 1.0 × 1 × 2.0 = 2.3 W → 2.3 J; then idle until
    // 3 s: 2 s × 0.1 W = 0.2 J; base 3 s × 2 W = 6 J. Total 8.5 J.
    let r = go(r#"
duration_s = 3
stop_when_done = false
[machine]
platform_base_w = 2.0
[machine.types.c]
pstates = [{ mhz = 2000, volt = 1.0 }]
[[machine.cpus]]
type = "c"
[[workload.programs]]
kind = "sequential"
work_ms = 1000
"#);
    assert!(
        (r.cpus[0].energy_j - 2.5).abs() < 1e-9,
        "cpu energy {}",
        r.cpus[0].energy_j
    );
    assert!(
        (r.summary.energy_j - 8.5).abs() < 1e-9,
        "total {}",
        r.summary.energy_j
    );
}

#[test]
fn powersave_runs_at_the_lowest_pstate() {
    // 1000 MHz of 2000: 500 ms of work takes 1 s; power 0.3×0.8 + 0.64×1.0 = 0.88 W.
    let r = go(r#"
duration_s = 5
governor = "powersave"
[machine.types.c]
pstates = [{ mhz = 2000, volt = 1.0 }, { mhz = 1000, volt = 0.8 }]
[[machine.cpus]]
type = "c"
[[workload.programs]]
kind = "sequential"
work_ms = 500
"#);
    assert!((r.programs[0].completion_s - 1.0).abs() < 1e-9);
    assert!(
        (r.cpus[0].energy_j - 0.88).abs() < 1e-9,
        "{}",
        r.cpus[0].energy_j
    );
}

#[test]
fn smt_sibling_slows_both_threads() {
    // Two threads on the two hyperthreads of one core, smt_factor 0.5: each
    // progresses at 0.5, so 100 ms of work each takes 200 ms.
    let r = go(r#"
duration_s = 5
[machine.types.c]
smt_factor = 0.5
[[machine.clusters]]
type = "c"
cores = 1
smt = 2
[[workload.programs]]
kind = "parallel"
threads = 2
work_ms = 200
"#);
    assert!(
        (r.programs[0].completion_s - 0.2).abs() < 1e-9,
        "{}",
        r.programs[0].completion_s
    );
}

#[test]
fn fork_join_runs_the_sequential_part_alone() {
    // 4 CPUs, 4 threads, 400 ms of work, 1 iteration, seq_fraction 0.5:
    // thread 0 computes 200 ms alone, then each thread computes 50 ms: 250 ms.
    let r = go(r#"
duration_s = 5
machine.preset = "smp-4"
[[workload.programs]]
kind = "fork_join"
threads = 4
work_ms = 400
seq_fraction = 0.5
"#);
    assert!(
        (r.programs[0].completion_s - 0.25).abs() < 1e-6,
        "{}",
        r.programs[0].completion_s
    );
    // The other threads slept during the sequential part.
    assert!(r.tasks[1].sleep_s > 0.19);
}

#[test]
fn dynamic_binding_balances_chunks() {
    // 4 threads, 4 CPUs, 40 chunks of 10 ms: 100 ms.
    let r = go(r#"
duration_s = 5
machine.preset = "smp-4"
[[workload.programs]]
kind = "dynamic"
threads = 4
work_ms = 400
chunks = 40
"#);
    assert!((r.programs[0].completion_s - 0.1).abs() < 1e-6);
    let total: f64 = r.tasks.iter().map(|t| t.work_ms).sum();
    assert!((total - 400.0).abs() < 1e-6);
}

#[test]
fn periodic_tasks_meet_deadlines_under_global_edf() {
    // Utilisation 3 × 0.5 = 1.5 on 2 CPUs: feasible; global EDF misses none
    // for these harmonic periods when migrations cost nothing (the textbook
    // zero-overhead model; with cache refills the 5 ms jobs overrun).
    let r = go(r#"
duration_s = 1
scheduler = "global-edf"
machine.preset = "smp-4"
machine.clusters = [{ type = "core", cores = 2 }]
machine.migration.enabled = false
[[workload.programs]]
kind = "periodic"
threads = 3
period_ms = 10
wcet_ms = 5
jobs = 100
"#);
    let jobs: u64 = r.tasks.iter().map(|t| t.jobs).sum();
    assert_eq!(jobs, 300);
    assert_eq!(r.summary.deadline_misses, 0);
}

#[test]
fn pinned_never_migrates() {
    let r = go(r#"
duration_s = 2
scheduler = "pinned"
machine.preset = "big-little-4+4"
[[workload.programs]]
kind = "phases"
threads = 12
loops = 20
phases = [{ compute_ms = 5 }, { sleep_ms = 2 }]
"#);
    assert_eq!(r.summary.migrations, 0);
}

#[test]
fn cfs_pulls_waiting_tasks_to_idle_cpus() {
    // 8 CPU-bound threads on 8 CPUs: after balancing each runs alone.
    let r = go(r#"
duration_s = 3
stop_when_done = false
machine.preset = "big-little-4+4"
[[workload.programs]]
kind = "parallel"
threads = 8
work_ms = 100000
"#);
    for c in &r.cpus {
        assert!(
            c.utilization > 0.99,
            "cpu {} utilisation {}",
            c.cpu,
            c.utilization
        );
    }
}

#[test]
fn cfs_rotates_a_one_task_imbalance() {
    // Three never-sleeping nice-0 threads on two CPUs: 2 vs 1 is an imbalance
    // of 512 and each task weighs 1024, so the first periodic balance fails
    // and the second moves the waiting task (nr_balance_failed); the threads
    // keep changing places and each gets two thirds of a CPU.
    let r = go(r#"
duration_s = 6
stop_when_done = false
[machine.types.a]
[[machine.clusters]]
type = "a"
cores = 2
[[workload.programs]]
kind = "parallel"
threads = 3
work_ms = 100000
"#);
    for t in &r.tasks {
        assert!(
            t.migrations >= 10,
            "task {} moved {} times",
            t.task,
            t.migrations
        );
        assert!(
            (t.run_s - 4.0).abs() < 0.1,
            "task {} ran {} s of 6 s on 2 CPUs (want 4 s)",
            t.task,
            t.run_s
        );
    }
}

#[test]
fn cfs_balances_clusters_by_load_per_cpu_not_speed() {
    // Twelve spinners on 4 big + 4 little cores (Li et al.'s Figure 9a): the
    // system level compares the two clusters (its groups) by load per CPU,
    // so they settle 6 and 6 and rotate within each cluster. CPU time is
    // even; the work done differs by the speed ratio of the two types.
    let r = go(r#"
duration_s = 6
stop_when_done = false
scheduler = "cfs"
machine.preset = "li-asym-4+4"
[[workload.programs]]
kind = "parallel"
threads = 12
work_ms = 1e7
"#);
    let on_big = |t: &hetsched_core::metrics::TaskRow| {
        t.run_s_by_type.get("big").copied().unwrap_or(0.0) / t.run_s
    };
    let big = r.tasks.iter().filter(|t| on_big(t) > 0.9).count();
    let little = r.tasks.iter().filter(|t| on_big(t) < 0.1).count();
    assert_eq!((big, little), (6, 6), "threads mostly on big / little");
    let run: Vec<f64> = r.tasks.iter().map(|t| t.run_s).collect();
    let (lo, hi) = run
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    assert!((hi - lo) / hi < 0.03, "CPU time spread {lo}..{hi}");
    let work: Vec<f64> = r.tasks.iter().map(|t| t.work_ms).collect();
    let (wl, wh) = work
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    assert!((wh / wl - 3.4).abs() < 0.2, "work ratio {}", wh / wl);
}

#[test]
fn cfs_spreads_new_threads_over_idle_cores_first() {
    // Four spinners on 4 cores x 2 hyperthreads: find_idlest_group puts one
    // on each core (cpus 0, 2, 4, 6), not on the first four hyperthreads, so
    // none shares its core.
    let r = go(r#"
duration_s = 1
stop_when_done = false
machine.preset = "smt-4x2"
[[workload.programs]]
kind = "parallel"
threads = 4
work_ms = 100000
"#);
    let busy: Vec<usize> = r
        .cpus
        .iter()
        .filter(|c| c.utilization > 0.9)
        .map(|c| c.cpu)
        .collect();
    assert_eq!(busy, vec![0, 2, 4, 6]);
}

#[test]
fn missing_feature_gives_sigill() {
    let r = go(r#"
duration_s = 1
[machine.types.a]
features = ["avx"]
[machine.types.b]
[[machine.cpus]]
type = "b"
[[workload.programs]]
kind = "sequential"
work_ms = 10
feature = "avx"
"#);
    assert_eq!(r.summary.tasks_killed, 1);
    assert!(r.tasks[0].killed.as_deref().unwrap().contains("SIGILL"));
}

#[test]
fn same_seed_same_trace_hash() {
    let text = r#"
duration_s = 2
seed = 7
machine.preset = "big-little-4+4"
[[workload.programs]]
kind = "phases"
threads = 20
loops = 30
jitter = 0.5
phases = [{ compute_ms = 3 }, { sleep_ms = 2 }]
"#;
    let a = go(text);
    let b = go(text);
    assert_eq!(a.summary.trace_hash, b.summary.trace_hash);
    assert_eq!(a.trace, b.trace);
    let c = go(&text.replace("seed = 7", "seed = 8"));
    assert_ne!(a.summary.trace_hash, c.summary.trace_hash);
}

// ------------------------------------------------------------ bad input

#[test]
fn bad_inputs_get_clear_messages() {
    let base = "duration_s = 1\n[machine.types.big]\n[machine.types.little]\n[[machine.cpus]]\ntype = \"big\"\n";
    let prog = "[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 10\n";
    let cases: Vec<(String, &str)> = vec![
        ("duration_s = = 1".into(), "bad.toml:1:14: TOML syntax error"),
        (
            "duration_s = 1\n[machine.types.big]\n[machine.types.little]\n[[machine.cpus]]\ntype=\"big\"\n[[machine.cpus]]\ntype=\"big\"\n[[machine.cpus]]\ntype=\"big\"\n[[machine.cpus]]\ntype = \"fastt\"\n".into(),
            "machine.cpus[3].type: unknown cpu type \"fastt\"; known: big, little",
        ),
        (format!("scheduler = \"cfz\"\n{base}{prog}"), "scheduler: unknown scheduler \"cfz\"; known: cfs, pinned, global-edf"),
        (format!("scheduler = \"cfs[granularity=3]\"\n{base}{prog}"), "has no parameter \"granularity\"; known: latency_ms"),
        (format!("{base}[[workload.programs]]\nkind = \"sequential\"\nwork_ms = -5\n"), "workload.programs[0].work_ms: -5 is not allowed; must be a number > 0"),
        (format!("{base}[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 0\n"), "workload.programs[0].work_ms: 0 is not allowed"),
        ("duration_s = 1\n[machine]\n".into(), "machine: the machine has no CPUs"),
        (format!("{base}[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 5\naffinity = [0, 3]\n"), "workload.programs[0].affinity[1]: cpu 3 does not exist (machine has 1 cpus: 0-0)"),
        (
            format!("{base}[[workload.programs]]\nkind = \"phases\"\nthreads = 2\nbarrier_count = 3\nphases = [{{compute_ms = 1}}, {{barrier = true}}]\n"),
            "workload.programs[0].barrier_count: 3: a barrier of 3 threads can never be met by 2 threads",
        ),
        (base.replace("duration_s = 1", "duration_s = 0"), "duration_s: 0 is not allowed; must be a number > 0"),
        (format!("{base}[[workload.programs]]\nkind = \"sequental\"\n"), "workload.programs[0].kind: unknown variant `sequental`"),
        (format!("{base}[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1\nchunks = 3\n"), "workload.programs[0].chunks: not used by kind \"sequential\" (used by: dynamic, pool)"),
        (format!("{base}[[workload.programs]]\nkind = \"sequential\"\n"), "workload.programs[0].work_ms: required for kind \"sequential\""),
        (format!("governor = \"userspace[mhz=1234]\"\n{base}{prog}"), "1234 MHz is not a P-state of cpu type"),
        (format!("{base}[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1\nnice = 25\n"), "workload.programs[0].nice: 25 is out of range; allowed -20 to 19"),
        ("duration_s = 1\nmachine.preset = \"nope\"\n".into(), "machine.preset: unknown preset \"nope\"; known: smp-4"),
        (format!("colour = 3\n{base}"), "unknown field `colour`"),
    ];
    for (text, want) in cases {
        let got = err(&text);
        assert!(
            got.contains(want),
            "\ninput:\n{text}\nwant substring: {want}\ngot: {got}"
        );
    }
}

#[test]
fn overrides_set_nested_paths() {
    let text = "duration_s = 1\nmachine.preset = \"smp-4\"\n[[workload.programs]]\nkind = \"parallel\"\nthreads = 2\nwork_ms = 10\n";
    let s = parse(
        text,
        "t",
        Format::Toml,
        &[
            ("workload.programs[0].threads".into(), "4".into()),
            ("scheduler".into(), "pinned".into()),
        ],
    )
    .unwrap();
    assert_eq!(s.spec.workload.programs[0].common.threads, Some(4));
    assert_eq!(s.spec.scheduler, "pinned");
    let e = parse(
        text,
        "t",
        Format::Toml,
        &[("workload.programs[3].threads".into(), "4".into())],
    )
    .unwrap_err();
    assert!(e.to_string().contains("index 3 is out of range"), "{e}");
}

#[test]
fn barrier_count_releases_groups_of_threads() {
    // 4 threads, barriers of 2: a barrier releases as soon as two threads
    // arrive, so the program finishes although the 4 never meet together.
    // Each thread computes 10 ms on its own CPU: 10 ms in all.
    let r = go(r#"
duration_s = 1
machine.preset = "smp-4"
[[workload.programs]]
kind = "phases"
threads = 4
barrier_count = 2
phases = [{ compute_ms = 10 }, { barrier = true }]
"#);
    assert_eq!(r.summary.programs_completed, 1);
    assert!((r.programs[0].completion_s - 0.010).abs() < 1e-9);
}

#[test]
fn more_bad_inputs() {
    let cases = [
        ("duration_s = 1\nmachine.preset = \"smp-4\"\n[[workload.programs]]\nkind = \"phases\"\n", "workload.programs[0].phases: required for kind \"phases\""),
        ("duration_s = 1\nagents = [\"python:x:Y\"]\nmachine.preset = \"smp-4\"\n", "agents[0]: \"python:x:Y\": agents written in Python are passed to hetsched.run"),
        ("duration_s = 1\n[machine.types.c]\nrating = 0\n[[machine.cpus]]\ntype = \"c\"\n", "machine.types.c.rating: 0 is not allowed; must be a number > 0"),
        ("duration_s = 1\nscheduler = \"a-dwrr[round_slice_ms=0]\"\nmachine.preset = \"smp-4\"\n", "a-dwrr[round_slice_ms]: 0 is out of range"),
        ("duration_s = 1\n[machine.migration]\nmem_line_ns = -1\n[machine.types.c]\n[[machine.cpus]]\ntype = \"c\"\n", "machine.migration.mem_line_ns: -1 is out of range"),
    ];
    for (text, want) in cases {
        let got = err(text);
        assert!(got.contains(want), "want {want}\ngot {got}");
    }
}

/// Two CPUs in separate LLCs (two clusters) or sharing one (one cluster).
fn two_cpus(shared_llc: bool) -> &'static str {
    if shared_llc {
        "[machine.types.c]\n[[machine.clusters]]\ntype = \"c\"\ncores = 2\n"
    } else {
        "[machine.types.c]\n[[machine.clusters]]\ntype = \"c\"\ncores = 1\ncount = 2\n"
    }
}

#[test]
fn migration_cost_follows_the_cache_model() {
    // Default model: across LLCs, min(ws, 4096 KiB) / 64 B lines × 27.466 ns;
    // within an LLC, min(ws, 32 KiB) / 64 B × 8.008 ns.
    let m = |shared: bool, ws: f64| {
        let s = scn(&format!("duration_s = 1\n{}", two_cpus(shared)));
        let setup = s.build(None, vec![]).unwrap();
        setup.machine.migration.cost(&setup.machine, 0, 1, ws).0
    };
    // 4 MiB across caches: 65 536 lines × 1.8e6/65 536 ns = 1.8 ms.
    assert_eq!(m(false, 4096.0), 1_800_000);
    // 512 KiB across caches: 8 192 lines × 27.466 ns = 225 µs.
    assert_eq!(m(false, 512.0), 225_000);
    // Shared LLC: only 32 KiB (512 lines × 8.008 ns = 4.1 µs), whatever the set.
    assert_eq!(m(true, 4096.0), 4_100);
    assert_eq!(m(true, 512.0), 4_100);
}

/// One big core without "sse4", one small core with it, and a thread whose
/// only phase needs it; `SCHED` is replaced by the scheduler under test.
const FAM_SCENARIO: &str = r#"
duration_s = 1
scheduler = "SCHED"
[machine.types.big]
[machine.types.small]
features = ["sse4"]
[[machine.clusters]]
type = "big"
[[machine.clusters]]
type = "small"
[[workload.programs]]
kind = "sequential"
work_ms = 200
feature = "sse4"
working_set_kb = 0
"#;

#[test]
fn fault_and_migrate_moves_and_returns_after_t_ticks() {
    // CPU 0 lacks "sse4" (the big core), CPU 1 has it. A thread whose only
    // phase needs sse4 starts on CPU 0 (lowest id), faults, runs on CPU 1;
    // with T = 2 it goes back after 2 ticks (8 ms), faults again, and so on:
    // about one fault per 8 ms of run time.
    let text = FAM_SCENARIO.replace("SCHED", "cfs[fam=true, fam_ticks=2]");
    let r = go(&text);
    let t = &r.tasks[0];
    assert!(t.killed.is_none(), "{:?}", t.killed);
    // 200 ms of work, all on the small core (the big one faults at once).
    assert!(
        (t.run_s_by_type["small"] - 0.2).abs() < 0.001,
        "{:?}",
        t.run_s_by_type
    );
    // One fault per 2 ticks: ~ 200 ms / 8 ms = 25 faults.
    assert!((24..=26).contains(&t.faults), "faults {}", t.faults);
    assert_eq!(
        t.migrations,
        2 * t.faults - 1,
        "there and back for each fault but the last"
    );
    // Without fault-and-migrate: SIGILL with its reason.
    let r = go(&FAM_SCENARIO.replace("SCHED", "cfs"));
    assert!(r.tasks[0]
        .killed
        .as_deref()
        .unwrap()
        .contains("does not migrate on faults"));
    // Pinned away from every capable CPU: SIGILL with that reason.
    let r = go(&text.replace("working_set_kb = 0", "working_set_kb = 0\naffinity = [0]"));
    assert!(r.tasks[0]
        .killed
        .as_deref()
        .unwrap()
        .contains("excludes every cpu that has it"));
}

#[test]
fn fam_ticks_zero_is_refused() {
    let e = err(
        "scheduler = \"cfs[fam=true, fam_ticks=0]\"\nduration_s = 1\nmachine.preset = \"smp-4\"\n",
    );
    assert!(
        e.contains("cfs[fam_ticks]: 0 is out of range") && e.contains("at least 1"),
        "{e}"
    );
}

#[test]
fn fault_and_migrate_under_faster_first() {
    // The same experiment under faster-first + A-DWRR (the paper's full
    // system): the thread starts on the fastest idle CPU (a tie, so CPU 0,
    // which lacks the feature), faults, and returns after T = 2 ticks to the
    // highest-round CPU of its original type.
    let r = go(&FAM_SCENARIO.replace("SCHED", "faster-first[fam=true, fam_ticks=2]"));
    let t = &r.tasks[0];
    assert!(t.killed.is_none(), "{:?}", t.killed);
    assert!(
        (t.run_s_by_type["small"] - 0.2).abs() < 0.001,
        "{:?}",
        t.run_s_by_type
    );
    assert!((20..=30).contains(&t.faults), "faults {}", t.faults);
}

#[test]
fn cpusets_run_at_their_own_frequency() {
    // Patel's partition on the Opteron-like preset: 4 × 800, 2 × 1400,
    // 2 × 2300 MHz. 230 ms of reference work (at 2.3 GHz) in the 800 MHz
    // cpuset takes 230 × 2300/800 = 661.25 ms; in the 2.3 GHz one 230 ms.
    let r = go(&format!(
        "duration_s = 5\ngovernor = \"userspace\"\nmachine.preset = \"patel-opteron-8\"\n{PATEL_CPUSETS}{}",
        r#"
[[workload.programs]]
kind = "sequential"
work_ms = 230
cpuset = "slow"
[[workload.programs]]
kind = "sequential"
work_ms = 230
cpuset = "fast"
"#
    ));
    assert!(
        (r.programs[0].completion_s - 0.66125).abs() < 1e-6,
        "{}",
        r.programs[0].completion_s
    );
    assert!((r.programs[1].completion_s - 0.230).abs() < 1e-6);
    assert_eq!(r.cpus[0].final_mhz, 800);
    assert_eq!(r.cpus[5].final_mhz, 1400);
    // Peak: platform 98 W + a busy core at 800 MHz
    // (0.8×0.95 + 2.8×0.9025×0.8 = 2.7816 W) + one at 2300 MHz
    // (0.8×1.25 + 2.8×1.5625×2.3 = 11.0625 W) + six idle cores, whose power
    // is 1.7 × V³ + 0.14 × V² × f_GHz at their cpuset's P-state:
    // three at 800 MHz (1.4575375 + 0.10108 = 1.5586175 W), two at 1400 MHz
    // (1.9679625 + 0.21609 = 2.1840525 W), one at 2300 MHz
    // (3.3203125 + 0.503125 = 3.8234375 W): 124.711495 W.
    assert!(
        (r.summary.peak_power_w - 124.711495).abs() < 1e-6,
        "{}",
        r.summary.peak_power_w
    );
}

#[test]
fn energy_at_two_pstates_is_hand_computable() {
    // One Opteron-like core busy for 1 s of wall time at 800 MHz, then (a
    // second run) at 2300 MHz, no platform power:
    //   800 MHz:  0.8×0.95 + 2.8×0.95²×0.8 = 0.76 + 2.0216 = 2.7816 W → 2.7816 J
    //   2300 MHz: 0.8×1.25 + 2.8×1.25²×2.3 = 1.0 + 10.0625 = 11.0625 W → 11.0625 J
    let one = |mhz: u32, work: f64| {
        go(&format!(
            "duration_s = 1\nstop_when_done = false\ngovernor = \"userspace[mhz={mhz}]\"\n\
             machine.preset = \"patel-opteron-8\"\nmachine.platform_base_w = 0.0\n\
             machine.clusters = [{{ type = \"opteron\", cores = 1 }}]\n\
             [[workload.programs]]\nkind = \"sequential\"\nwork_ms = {work}\n"
        ))
    };
    let slow = one(800, 1.0e6);
    let fast = one(2300, 1.0e6);
    assert!(
        (slow.cpus[0].energy_j - 2.7816).abs() < 1e-9,
        "{}",
        slow.cpus[0].energy_j
    );
    assert!(
        (fast.cpus[0].energy_j - 11.0625).abs() < 1e-9,
        "{}",
        fast.cpus[0].energy_j
    );
}

#[test]
fn bad_cpusets_are_refused() {
    let base = "duration_s = 1\nmachine.preset = \"patel-opteron-8\"\n";
    let cases = [
        ("[[cpusets]]\nname = \"a\"\ncpus = [1, 1]\n", "cpusets[0].cpus[1]: cpu 1 is named twice"),
        ("[[cpusets]]\nname = \"a\"\ncpus = [9]\n", "cpusets[0].cpus[0]: cpu 9 does not exist (machine has 8 cpus: 0-7)"),
        ("[[cpusets]]\nname = \"a\"\ncpus = [0]\n[[cpusets]]\nname = \"b\"\ncpus = [0]\n", "cpusets[1].cpus[0]: cpu 0 is already in cpuset \"a\""),
        ("[[cpusets]]\nname = \"a\"\ncpus = [0]\nmhz = 1000\n", "cpusets[0].mhz: 1000 MHz is not a P-state of cpu type \"opteron\" (cpu 0); nearest: 800 MHz or 1150 MHz"),
        ("[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1\ncpuset = \"nope\"\n", "workload.programs[0].cpuset: unknown cpuset \"nope\"; the scenario defines no cpusets"),
    ];
    for (extra, want) in cases {
        let got = err(&format!("{base}{extra}"));
        assert!(got.contains(want), "want {want}\ngot {got}");
    }
    // A cpuset with its own frequency needs whole frequency domains.
    let e = err("duration_s = 1\n[machine.types.c]\npstates = [{mhz = 1000, volt = 1.0}]\n[[machine.clusters]]\ntype = \"c\"\ncores = 2\n[[cpusets]]\nname = \"a\"\ncpus = [0]\nmhz = 1000\n");
    assert!(e.contains("shares its frequency domain with cpu 1"), "{e}");
}

#[test]
fn capacity_aware_moves_a_misfit_to_a_big_core() {
    // A 100 ms hog holds big CPU 3; a 1 s job starting at 1 ms may use CPU 3
    // or little CPU 4, so it wakes on CPU 4 (the only idle allowed CPU). When
    // the hog ends at 100 ms, CPU 3 is idle and the job is a misfit on CPU 4:
    // after ~99 ms at capacity 430 its utilisation is far past the fit limit
    // 430 / 1.25 = 344. capacity-aware moves it to CPU 3 at the next tick;
    // plain CFS does not (CPU 4 runs exactly one task: nothing to balance).
    let scenario = |sched: &str| {
        format!(
            "duration_s = 10\nscheduler = \"{sched}\"\nmachine.preset = \"big-little-4+4\"\n\
             [[workload.programs]]\nname = \"hog\"\nkind = \"sequential\"\nwork_ms = 100\naffinity = [3]\n\
             [[workload.programs]]\nname = \"job\"\nkind = \"sequential\"\nwork_ms = 1000\n\
             affinity = [3, 4]\nstart_ms = 1\n"
        )
    };
    let cap = go(&scenario("capacity-aware"));
    let cfs = go(&scenario("cfs"));
    let job = |r: &hetsched_core::metrics::RunResults| {
        r.tasks.iter().find(|t| t.program == "job").unwrap().clone()
    };
    let (jc, jf) = (job(&cap), job(&cfs));
    assert_eq!(jc.migrations, 1, "capacity-aware moved the misfit once");
    assert_eq!(jf.migrations, 0, "plain CFS leaves it on the little core");
    assert!(jc.end_s.unwrap() < jf.end_s.unwrap());
    // ~99 ms on the little core does ~41.6 ms of work; the rest (~958 ms)
    // runs on the big core.
    assert!(jc.run_s_by_type["big"] > 0.9, "{:?}", jc.run_s_by_type);
}

#[test]
fn eas_places_light_tasks_on_little_cores_and_saves_energy() {
    // Four light tasks (1 ms of work every ~20 ms: utilisation ~50 of 1024)
    // on 4 big + 4 little cores under schedutil. A big core at its lowest
    // P-state (800 MHz, 0.70 V) draws 0.15 × 0.7 + 0.9 × 0.49 × 0.8 = 0.458 W
    // busy for a capacity of 410; a little core at 600 MHz (0.70 V) draws
    // 0.04 × 0.7 + 0.25 × 0.49 × 0.6 = 0.1015 W for a capacity of 184: per
    // unit of work the little core costs 0.1015/184 = 0.00055 W against
    // 0.458/410 = 0.00112 W, so EAS puts the tasks on little cores, where
    // CFS and capacity-aware keep them on the big cores they start on.
    let text = |sched: &str| {
        format!(
            "duration_s = 3\nscheduler = \"{sched}\"\ngovernor = \"schedutil\"\n\
             machine.preset = \"big-little-4+4\"\nmachine.platform_base_w = 0.0\n\
             [[workload.programs]]\nkind = \"phases\"\nthreads = 4\nloops = 100\n\
             phases = [{{ compute_ms = 1 }}, {{ sleep_ms = 19 }}]\n"
        )
    };
    let eas = go(&text("eas"));
    let cfs = go(&text("cfs"));
    let little = |r: &hetsched_core::metrics::RunResults| -> f64 {
        r.tasks
            .iter()
            .map(|t| t.run_s_by_type.get("little").copied().unwrap_or(0.0))
            .sum::<f64>()
            / r.tasks.iter().map(|t| t.run_s).sum::<f64>()
    };
    assert!(
        little(&eas) > 0.9,
        "EAS ran {:.0}% on little cores",
        100.0 * little(&eas)
    );
    assert!(
        little(&cfs) < 0.5,
        "CFS ran {:.0}% on little cores",
        100.0 * little(&cfs)
    );
    assert!(
        eas.summary.energy_j < cfs.summary.energy_j,
        "{} vs {}",
        eas.summary.energy_j,
        cfs.summary.energy_j
    );
}

#[test]
fn peak_power_of_an_idle_machine_is_its_idle_power() {
    // No program at all: four idle cores at 0.1 W each plus 2 W of platform:
    // the peak is the power from the start, 2.4 W, and 1 s costs 2.4 J.
    let r = go("duration_s = 1\nstop_when_done = false\nmachine.preset = \"smp-4\"\nmachine.platform_base_w = 2.0\n");
    assert!(
        (r.summary.peak_power_w - 2.4).abs() < 1e-9,
        "{}",
        r.summary.peak_power_w
    );
    assert!(
        (r.summary.energy_j - 2.4).abs() < 1e-9,
        "{}",
        r.summary.energy_j
    );
}

#[test]
fn a_build_asks_whether_to_stop_every_few_thousand_threads() {
    let s = scn("duration_s = 1\nmachine.preset = \"big-little-4+4\"\n\
         [[workload.programs]]\nkind = \"parallel\"\nthreads = 10000\nwork_ms = 1\n\
         [[workload.programs]]\nkind = \"parallel\"\nthreads = 3\nwork_ms = 1\n");
    // Once before each program's threads, then every 4096 threads (ids
    // 4095 and 8191 of the first program): 2 + 2 calls.
    let mut calls = 0;
    let setup = s
        .build_interruptible(None, vec![], &mut || {
            calls += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!(setup.tasks.len(), 10003);
    assert_eq!(calls, 4);
    // An error from the check ends the build at once with its message.
    let mut calls = 0;
    let e = s
        .build_interruptible(None, vec![], &mut || {
            calls += 1;
            if calls == 2 {
                Err("Ctrl-C".into())
            } else {
                Ok(())
            }
        })
        .err()
        .expect("the build must stop");
    assert_eq!(e, hetsched_core::SimError::Interrupted("Ctrl-C".into()));
    assert_eq!(calls, 2);
}

#[test]
fn a_large_program_start_can_be_interrupted_between_chunks() {
    use hetsched_core::sim::{Engine, RunOptions};
    // A start of 200 000 threads at one instant goes in chunks of 4096
    // threads, with a look at the wall clock between chunks. How long a chunk
    // takes depends on the machine, so the callback is asked at every look
    // (no wall time between callbacks) and the first "stop" lands inside
    // the start.
    let s = scn("duration_s = 1\nmachine.preset = \"big-little-4+4\"\n\
         [[workload.programs]]\nkind = \"parallel\"\nthreads = 200000\nwork_ms = 1\n");
    let mut e = Engine::new(s.build(None, vec![]).unwrap(), RunOptions::default());
    e.set_check_wall(std::time::Duration::ZERO);
    let mut calls = 0;
    let mut cb = |_now: f64, _end: f64| -> Result<(), String> {
        calls += 1;
        Err("Ctrl-C".into())
    };
    e.run(Some(&mut cb)).unwrap();
    assert_eq!(calls, 1);
    let why = e.interrupted().expect("interrupted");
    assert_eq!(why.at, hetsched_core::SimTime::ZERO);
    let res = hetsched_core::metrics::collect(&e, "start", 0.0);
    let started = res.tasks.iter().filter(|t| t.start_s.is_some()).count();
    assert!(
        started > 0 && started < 200000 && started % 4096 == 0,
        "{started} threads started"
    );
}

#[test]
fn run_time_by_type_covers_machines_of_more_types_than_kept_in_place() {
    // Five CPU types, one CPU each, and five spinners pinned one per CPU:
    // each task's run time is all on its CPU's type, the fourth and fifth
    // types (kept outside the task's record) included.
    let mut text = String::from("duration_s = 0.5\nstop_when_done = false\nscheduler = \"cfs\"\n");
    for k in 0..5 {
        text += &format!("[machine.types.t{k}]\ncapacity = {}\n", 1024 - 100 * k);
    }
    for k in 0..5 {
        text += &format!("[[machine.clusters]]\ntype = \"t{k}\"\n");
    }
    for k in 0..5 {
        text += &format!(
            "[[workload.programs]]\nname = \"p{k}\"\nkind = \"sequential\"\nwork_ms = 1e6\naffinity = [{k}]\n"
        );
    }
    let r = go(&text);
    assert_eq!(r.tasks.len(), 5);
    for (k, t) in r.tasks.iter().enumerate() {
        let want = format!("t{k}");
        assert_eq!(t.run_s_by_type.len(), 1, "task {k}: {:?}", t.run_s_by_type);
        let on = t.run_s_by_type.get(&want).copied().unwrap_or(0.0);
        assert!(
            (on - t.run_s).abs() < 1e-9 && on > 0.45,
            "task {k}: {on} of {}",
            t.run_s
        );
    }
}
