//! DWRR, A-DWRR and faster-first (Li et al. §4.2–4.3.4) against the paper's
//! worked examples, with the arithmetic in the comments.

mod common;

use common::{on_type, run_intervals, scn, MS};
use hetsched_core::hw::CpuId;
use hetsched_core::metrics::RunResults;
use hetsched_core::os::TaskId;
use hetsched_core::policy::dwrr::{Dwrr, RoundEvent, RoundWhat};
use hetsched_core::policy::{parse_spec, Ctx, EnqFlags, Scheduler};
use hetsched_core::run;
use hetsched_core::scenario::{parse, Format};
use hetsched_core::sim::RunOptions;
use hetsched_core::trace::TraceEvent;
use std::cell::RefCell;
use std::rc::Rc;

fn opts() -> RunOptions {
    RunOptions {
        trace: true,
        check: true,
    }
}

/// Lends the scheduler to the engine while the test keeps a handle on it,
/// to read its round log after the run.
struct Probe(Rc<RefCell<Dwrr>>);

impl Probe {
    /// Call into the policy, then audit its bookkeeping.
    fn with<R>(&self, f: impl FnOnce(&mut Dwrr) -> R) -> R {
        let r = f(&mut self.0.borrow_mut());
        if let Err(e) = self.0.borrow().audit() {
            panic!("DWRR bookkeeping: {e}");
        }
        r
    }
}

impl Scheduler for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn init(&mut self, cx: &mut Ctx) {
        self.with(|d| d.init(cx))
    }
    fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, prev: Option<CpuId>, f: EnqFlags) -> CpuId {
        self.with(|d| d.select_cpu(cx, t, prev, f))
    }
    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, f: EnqFlags) {
        self.with(|d| d.enqueue(cx, t, cpu, f))
    }
    fn dequeue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        self.with(|d| d.dequeue(cx, t, cpu))
    }
    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        self.with(|d| d.pick_next(cx, cpu))
    }
    fn balance(&mut self, cx: &mut Ctx, cpu: CpuId) {
        self.with(|d| d.balance(cx, cpu))
    }
    fn running(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        self.with(|d| d.running(cx, t, cpu))
    }
    fn stopping(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, runnable: bool) {
        self.with(|d| d.stopping(cx, t, cpu, runnable))
    }
    fn tick(&mut self, cx: &mut Ctx, cpu: CpuId, t: TaskId) {
        self.with(|d| d.tick(cx, cpu, t))
    }
    fn on_timer(&mut self, cx: &mut Ctx, token: u64) {
        self.with(|d| d.on_timer(cx, token))
    }
    fn reweight(&mut self, cx: &mut Ctx, t: TaskId, old: u32) {
        self.with(|d| d.reweight(cx, t, old))
    }
    fn on_fault(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, feature: usize) -> bool {
        self.with(|d| d.on_fault(cx, t, cpu, feature))
    }
}

/// Run `text` under the DWRR-family policy `spec`; returns the results and
/// the policy (for its round log).
fn go(text: &str, spec: &str) -> (RunResults, Rc<RefCell<Dwrr>>) {
    let s = scn(text);
    let machine = s.build(None, vec![]).unwrap().machine;
    let d = Dwrr::from_params(&parse_spec(spec).unwrap(), &machine).unwrap();
    let rc = Rc::new(RefCell::new(d));
    let r = run(&s, opts(), Some(Box::new(Probe(rc.clone()))), vec![], None)
        .unwrap_or_else(|e| panic!("{e}"));
    (r, rc)
}

/// Run `text` with its own scheduler line.
fn go_plain(text: &str) -> RunResults {
    run(&scn(text), opts(), None, vec![], None).unwrap_or_else(|e| panic!("{e}"))
}

/// Scaled CPU time of every task (Definition 2): Σ run time × rating, with
/// the ratings of the CPU types given.
fn scaled(r: &RunResults, ratings: &[(&str, f64)]) -> Vec<f64> {
    r.tasks
        .iter()
        .map(|t| {
            t.run_s_by_type
                .iter()
                .map(|(ty, s)| s * ratings.iter().find(|x| x.0 == ty).unwrap().1)
                .sum()
        })
        .collect()
}

/// max / min − 1.
fn spread(v: &[f64]) -> f64 {
    let max = v.iter().cloned().fold(f64::MIN, f64::max);
    let min = v.iter().cloned().fold(f64::MAX, f64::min);
    max / min - 1.0
}

/// Time `task` ran on `cpu` within `[from_ns, to_ns)`, from the trace.
fn ran_on(r: &RunResults, task: usize, cpu: usize, from_ns: u64, to_ns: u64) -> u64 {
    run_intervals(r, task)
        .into_iter()
        .filter(|&(c, _, _)| c == cpu)
        .map(|(_, t_ns, end_ns)| end_ns.min(to_ns).saturating_sub(t_ns.max(from_ns)))
        .sum()
}

fn events(log: &[RoundEvent]) -> String {
    log.iter()
        .map(|e| format!("{:.3} ms cpu{} {:?}", e.t_ns as f64 / 1e6, e.cpu, e.what))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Two CPUs: 0 of capacity 1024 (rating 2), 1 of capacity 512 (rating 1).
const TWO_CPUS_2_TO_1: &str = r#"
stop_when_done = false
[machine.types.fast]
capacity = 1024
[machine.types.slow]
capacity = 512
[[machine.cpus]]
type = "fast"
[[machine.cpus]]
type = "slow"
"#;

fn ms(t_ns: u64) -> f64 {
    t_ns as f64 / 1e6
}

#[test]
fn figure_5_step_by_step() {
    // One time unit = B = 40 ms; local round-robin slice 3 ms (< unit/8), so
    // that the interleaving approximates the paper's fluid sharing to within
    // one local slice.
    //
    // Placement (least loaded among idle or round-highest CPUs, ties lowest
    // id): t0 → cpu0, t1 → cpu1 (cpu0 has load 1), t2 → cpu0 (tie), t3 →
    // cpu1. So A, B = t0, t2 on cpu0 (rating 2); t1, t3 on cpu1 (rating 1),
    // where t1 runs first.
    //
    // cpu0: A and B alternate 3 ms slices; each needs 40 scaled ms = 20 ms.
    // A runs [0,3), [6,9), …, [30,33) = 18 ms, then [36,38): A's round 0
    // ends at 38 ms. B ran 18 ms by 36 and runs 38–40: its round ends at
    // 40 ms = 1 unit. cpu0's round-active is empty. Step 1 (round(cpu0) = 0
    // = highest) finds on cpu1 (round 0 = highest) the queued thread: slot
    // [39,42) belongs to t3, so t1 waits; t1 is the paper's D, t3 its C.
    // D has run [0,3), [6,9), …, [36,39) = 7 × 3 = 21 ms, scaled 21 ms ≈
    // 0.5 units (the paper: 0.5).
    //
    // D alone on cpu0 needs (40 − 21) / 2 = 9.5 ms: its round ends at
    // 49.5 ms ≈ 1.25 units (the paper's fluid model: 0.25 units = 10 ms
    // after time 1). Step 1 finds nothing (C runs alone on cpu1); the
    // under-utilisation swap does not apply (round(cpu1) = 0 is not below
    // round(cpu0) = 0); Step 2 advances cpu0 to round 1 with A, B and D.
    //
    // C: 6 × 3 + 1 = 19 ms by 40 ms ([3,6), …, [33,36), [39,40)), then
    // alone: its round 0 ends at 40 + 21 = 61 ms; cpu1 (round 0 < highest
    // 1, round-expired non-empty) skips Step 1 and advances to round 1.
    // C's round 1 ends at 61 + 40 = 101 ms, when cpu0's three threads have
    // each run about (101 − 49.5) / 3 ≈ 17 < 20 ms of round 1: cpu1's
    // round-active is empty, round(cpu1) = 1 = highest, and Step 1 moves a
    // thread from cpu0 — "at some later time, CPU 1 will perform round
    // balancing and move threads from CPU 0".
    let text = format!(
        "duration_s = 0.12\n{TWO_CPUS_2_TO_1}\n[[workload.programs]]\nkind = \"parallel\"\nthreads = 4\nwork_ms = 1000000\n"
    );
    let (r, d) = go(&text, "a-dwrr[round_slice_ms=40, local_slice_ms=3]");
    let d = d.borrow();
    let log = d.trace();
    let all = events(log);
    let (a, b, c, dd) = (0usize, 2usize, 3usize, 1usize);
    let find = |pred: &dyn Fn(&RoundEvent) -> bool| -> RoundEvent {
        log.iter()
            .find(|e| pred(e))
            .cloned()
            .unwrap_or_else(|| panic!("event not found in\n{all}"))
    };
    let expiry =
        |task: usize| find(&|e| matches!(e.what, RoundWhat::Expire { task: t, .. } if t == task));
    // At ≈ 1 unit, A and B have finished round 0 on cpu0.
    let (ea, eb) = (expiry(a), expiry(b));
    assert_eq!((ea.cpu, eb.cpu), (0, 0));
    assert_eq!((ms(ea.t_ns), ms(eb.t_ns)), (38.0, 40.0), "{all}");
    // Then cpu0 moves D over from cpu1, with ≈ 0.5 units of scaled time.
    let pull = find(&|e| matches!(e.what, RoundWhat::Pull { .. }));
    assert_eq!(
        (ms(pull.t_ns), pull.cpu, pull.what.clone()),
        (
            40.0,
            0,
            RoundWhat::Pull {
                task: dd,
                from: 1,
                from_expired: false
            }
        )
    );
    assert_eq!(ran_on(&r, dd, 1, 0, 40 * MS), 21 * MS);
    assert_eq!(
        ran_on(&r, c, 1, 39 * MS, 40 * MS),
        MS,
        "C is the one running"
    );
    // At ≈ 1.25 units D finishes its round; cpu0 advances to round 1.
    let ed = expiry(dd);
    assert_eq!((ed.cpu, ms(ed.t_ns)), (0, 49.5));
    assert!((ms(ed.t_ns) - 50.0).abs() <= 3.0);
    let adv = find(&|e| e.cpu == 0 && matches!(e.what, RoundWhat::Advance { .. }));
    assert_eq!(
        (ms(adv.t_ns), adv.what),
        (49.5, RoundWhat::Advance { round: 1 })
    );
    // Round 1 on cpu0 holds A, B and D: all three share cpu0 until 101 ms,
    // about (101 − 49.5) / 3 = 17.2 ms each, ± one local slice.
    for t in [a, b, dd] {
        let got = ms(ran_on(&r, t, 0, 49_500_000, 101 * MS));
        assert!((got - 17.17).abs() <= 3.0, "task {t}: {got} ms");
    }
    // C keeps running on cpu1, alone from 40 ms on, and never on cpu0.
    assert_eq!(ran_on(&r, c, 1, 40 * MS, 101 * MS), 61 * MS);
    assert_eq!(ran_on(&r, c, 0, 0, 101 * MS), 0);
    let c_exp = find(&|e| e.cpu == 1 && matches!(e.what, RoundWhat::Advance { .. }));
    assert_eq!(
        (ms(c_exp.t_ns), c_exp.what),
        (61.0, RoundWhat::Advance { round: 1 })
    );
    // Later, cpu1 balances and takes a thread from cpu0.
    let back = find(&|e| e.cpu == 1 && matches!(e.what, RoundWhat::Pull { .. }));
    assert_eq!(ms(back.t_ns), 101.0, "{all}");
    assert!(matches!(back.what, RoundWhat::Pull { from: 0, .. }));
    assert_eq!(d.round(0), d.highest());
}

#[test]
fn figure_6a_only_a_dwrr_with_the_swap_lets_b_use_the_fast_cpu() {
    // A alone on cpu0 (rating 2), B alone on cpu1 (rating 1), B = 30 ms.
    // Plain DWRR counts real time: both finish a round every 30 ms, the
    // rounds stay equal, nothing ever moves. Over 10 s, A gets 2 × 10 = 20 s
    // of scaled time and B 10 s. A-DWRR without the extension: A finishes
    // every 15 ms, but B is always running so Step 1 can never move it.
    // With the swap, whenever cpu0 is a round ahead of cpu1 they exchange
    // threads and B gets the credit (1 + round(p) − round(s))·B; each then
    // gets (20 + 10) / 2 = 15 s.
    let text = format!(
        "duration_s = 10\n{TWO_CPUS_2_TO_1}\n[[workload.programs]]\nkind = \"parallel\"\nthreads = 2\nwork_ms = 100000000\n"
    );
    let ratings = [("fast", 2.0), ("slow", 1.0)];
    for spec in ["dwrr", "a-dwrr[underutil=false]"] {
        let (r, d) = go(&text, spec);
        assert_eq!(on_type(&r, 1, "fast"), 0.0, "{spec}: B ran on the fast cpu");
        let s = scaled(&r, &ratings);
        assert!(
            (s[0] - 20.0).abs() < 1e-6 && (s[1] - 10.0).abs() < 1e-6,
            "{spec}: {s:?}"
        );
        assert_eq!(r.summary.migrations, 0);
        assert!(!d
            .borrow()
            .trace()
            .iter()
            .any(|e| matches!(e.what, RoundWhat::Swap { .. })));
    }
    let (r, d) = go(&text, "a-dwrr");
    let s = scaled(&r, &ratings);
    assert!(spread(&s) < 0.01, "scaled times {s:?}");
    assert!((s[0] + s[1] - 30.0).abs() < 1e-6, "work-conserving: {s:?}");
    assert!(on_type(&r, 1, "fast") > 4.0, "B used the fast cpu");
    // The swaps follow the paper: T1 (running alone on the slow cpu, a round
    // behind) gets the credit, T2 goes to the slow cpu in round(p) + 1.
    let d = d.borrow();
    let swaps: Vec<_> = d
        .trace()
        .iter()
        .filter_map(|e| match e.what {
            RoundWhat::Swap {
                s,
                round_s,
                t1_slice_ns,
                ..
            } => Some((e.cpu, s, round_s, t1_slice_ns)),
            _ => None,
        })
        .collect();
    assert!(swaps.len() > 100, "{} swaps", swaps.len());
    for &(p, s, _, slice) in &swaps {
        assert_eq!((p, s), (0, 1));
        // Δ = round(p) − round(s) ≥ 1, so the slice is at least 2B.
        assert!(
            slice >= 60e6 - 1.0 && (slice / 30e6).fract() < 1e-9,
            "{slice}"
        );
    }
    // The first one, worked out: cpu0 finishes rounds at 15, 30, 45 ms
    // (round 2 done at 45); cpu1 finished round 0 at 30 ms and is in round 1
    // with B at 15 ms: round(s) = 1 < 2, so swap with slice (1+2−1)·30 = 60.
    let first = d
        .trace()
        .iter()
        .find(|e| matches!(e.what, RoundWhat::Swap { .. }))
        .unwrap();
    assert_eq!(first.t_ns, 45 * MS);
    assert_eq!(
        first.what,
        RoundWhat::Swap {
            t1: 1,
            s: 1,
            t2: 0,
            round_s: 3,
            t1_slice_ns: 60e6
        }
    );
}

#[test]
fn figure_6b_three_threads_on_3_to_1() {
    // cpu0 rating 3 (capacity 1023) with A and C, cpu1 rating 1 (341) with
    // B. A-DWRR without the swap: A and C finish their round slice at 2/3 of
    // B's round; B is always running, never moves: A, C get 1.5 s of scaled
    // time per second, B 1. With the swap every thread gets (3 + 1) / 3.
    let text = r#"
duration_s = 10
stop_when_done = false
[machine.types.fast]
capacity = 1023
[machine.types.slow]
capacity = 341
[[machine.cpus]]
type = "fast"
[[machine.cpus]]
type = "slow"
[[workload.programs]]
kind = "parallel"
threads = 3
work_ms = 100000000
"#;
    let ratings = [("fast", 3.0), ("slow", 1.0)];
    let (r, _) = go(text, "a-dwrr[underutil=false]");
    assert_eq!(on_type(&r, 1, "fast"), 0.0);
    let s = scaled(&r, &ratings);
    assert!(
        (s[0] - 15.0).abs() < 1e-6 && (s[1] - 10.0).abs() < 1e-6 && (s[2] - 15.0).abs() < 1e-6,
        "{s:?}"
    );
    // Plain DWRR equalises real CPU time instead: unfair in scaled time.
    let (r, _) = go(text, "dwrr");
    assert!(spread(&scaled(&r, &ratings)) > 0.5);
    let (r, _) = go(text, "a-dwrr");
    let s = scaled(&r, &ratings);
    assert!(spread(&s) < 0.01, "{s:?}");
    assert!((s.iter().sum::<f64>() - 40.0).abs() < 1e-6);
    assert!(on_type(&r, 1, "fast") > 2.0);
}

#[test]
fn a_dwrr_is_fair_on_li_asym_4_plus_4_and_cfs_is_not() {
    // 12 spinning threads, 4 big (rating 1024/301 = 3.40) + 4 small cores,
    // 10 s. Ideal: every thread gets (4 × 3.40 + 4) × 10 / 12 = 14.68 s of
    // scaled time and, as work ∝ capacity × time, the same work. A round
    // is 30 scaled ms, so a thread a round ahead of another is 0.2% ahead.
    let text = |sched: &str| {
        format!(
            "duration_s = 10\nstop_when_done = false\nscheduler = \"{sched}\"\nmachine.preset = \"li-asym-4+4\"\n[[workload.programs]]\nkind = \"parallel\"\nthreads = 12\nwork_ms = 100000000\n"
        )
    };
    let ratings = [("big", 1024.0 / 301.0), ("small", 1.0)];
    let (r, _) = go(&text("a-dwrr"), "a-dwrr");
    let s = scaled(&r, &ratings);
    let w: Vec<f64> = r.tasks.iter().map(|t| t.work_ms).collect();
    let ideal = (4.0 * 1024.0 / 301.0 + 4.0) * 10.0 / 12.0;
    assert!(spread(&s) < 0.05, "scaled {s:?}");
    assert!(spread(&w) < 0.05, "work {w:?}");
    for x in &s {
        assert!((x / ideal - 1.0).abs() < 0.01, "{x} vs {ideal}");
    }
    // CFS balances the number of threads: 1 or 2 per CPU whatever its
    // speed, so a thread on a shared small core gets 0.5 scaled s per s and
    // one alone on a big core 3.4.
    let cfs = go_plain(&text("cfs"));
    let sc = scaled(&cfs, &ratings);
    let wc: Vec<f64> = cfs.tasks.iter().map(|t| t.work_ms).collect();
    assert!(
        spread(&sc) > 10.0 * spread(&s),
        "cfs {} vs a-dwrr {}",
        spread(&sc),
        spread(&s)
    );
    assert!(spread(&wc) > 0.3, "cfs work spread {}", spread(&wc));
}

#[test]
fn round_slices_are_proportional_to_weight() {
    // One CPU, nice 0 (w = 1) and nice 5 (w = 335/1024): round slices 30 and
    // 9.81 ms, so CPU time splits 1024 : 335 (ratio 3.057).
    let text = r#"
duration_s = 6
stop_when_done = false
[machine.types.c]
capacity = 1024
[[machine.cpus]]
type = "c"
[[workload.programs]]
kind = "sequential"
work_ms = 100000
[[workload.programs]]
kind = "sequential"
work_ms = 100000
nice = 5
"#;
    let (r, _) = go(text, "dwrr");
    let ratio = r.tasks[0].run_s / r.tasks[1].run_s;
    assert!(
        (ratio / (1024.0 / 335.0) - 1.0).abs() < 0.01,
        "ratio {ratio}"
    );
}

#[test]
fn the_rating_follows_dvfs() {
    // Two CPUs of equal capacity 1024; under powersave cpu0 ("dvfs", fmax
    // 2000) runs at 1000 MHz, i.e. capacity 512, rating 1, while cpu1
    // ("fixed", its only P-state) keeps 1024, rating 2: the Figure 6(b)
    // situation made by frequency alone. With the rating from the current
    // capacity, each of 3 threads gets (1 + 2) / 3 scaled s per s, and the
    // same work; with unit ratings (plain DWRR) they do not.
    let text = r#"
duration_s = 10
stop_when_done = false
governor = "powersave"
[machine.types.dvfs]
capacity = 1024
pstates = [{ mhz = 2000, volt = 1.0 }, { mhz = 1000, volt = 0.8 }]
[machine.types.fixed]
capacity = 1024
pstates = [{ mhz = 1000, volt = 0.8 }]
[[machine.cpus]]
type = "dvfs"
[[machine.cpus]]
type = "fixed"
[[workload.programs]]
kind = "parallel"
threads = 3
work_ms = 100000000
"#;
    let work = |r: &RunResults| r.tasks.iter().map(|t| t.work_ms).collect::<Vec<_>>();
    let (r, _) = go(text, "a-dwrr");
    let w = work(&r);
    assert!(spread(&w) < 0.01, "{w:?}");
    assert!((w.iter().sum::<f64>() - 15_000.0).abs() < 1.0, "{w:?}");
    let (r, _) = go(text, "dwrr");
    assert!(spread(&work(&r)) > 0.3, "{:?}", work(&r));
}

/// Little cores first (cpus 0, 1: capacity 430), then big (cpus 2, 3).
const LITTLE_FIRST: &str = r#"
stop_when_done = true
[machine.types.big]
capacity = 1024
[machine.types.little]
capacity = 430
[[machine.clusters]]
type = "little"
cores = 2
[[machine.clusters]]
type = "big"
cores = 2
"#;

fn first_cpu(r: &RunResults, task: usize) -> usize {
    r.trace
        .iter()
        .find_map(|e| match *e {
            TraceEvent::Run { cpu, task: t, .. } if t == task => Some(cpu),
            _ => None,
        })
        .unwrap()
}

#[test]
fn faster_first_starts_on_a_big_core() {
    // 100 ms of work: on a big core 100 ms; A-DWRR's placement (least
    // loaded, ties lowest id) starts it on little cpu0: 100 / (430/1024) =
    // 238.1 ms, and it stays there (nothing else runs, nothing moves).
    let text = format!(
        "duration_s = 5\n{LITTLE_FIRST}\n[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 100\n"
    );
    let (r, _) = go(&text, "faster-first");
    assert_eq!(first_cpu(&r, 0), 2);
    assert_eq!(on_type(&r, 0, "little"), 0.0);
    assert!((r.programs[0].completion_s - 0.1).abs() < 1e-9);
    let (r, _) = go(&text, "a-dwrr");
    assert_eq!(first_cpu(&r, 0), 0);
    assert!((r.programs[0].completion_s - 0.1 * 1024.0 / 430.0).abs() < 1e-6);
}

#[test]
fn faster_first_moves_a_thread_to_an_idle_faster_cpu() {
    // Three programs start together: 5 ms (→ cpu2, big), 1000 ms (→ cpu3,
    // big) and 1000 ms (→ cpu0, the fastest idle CPU left, little). No round
    // ends before 5 ms (a round is 30 / (1024/430) = 12.6 ms on a big core),
    // so nothing but faster-first moves anything: at 5 ms cpu2 goes idle
    // while t2 runs on little cpu0, and faster-first preempts t2 and moves it
    // to cpu2. t2 did 5 × 430/1024 = 2.1 ms of work on cpu0 and then runs
    // alone on a big core (both long threads are on big cores, so A-DWRR's
    // swap, which needs a slower CPU, has nothing to do): it ends at
    // 5 + 1000 − 2.1 = 1002.9 ms plus the cache refill after its migration
    // (the engine's model, reported as stall_s).
    let text = format!(
        "duration_s = 5\n{LITTLE_FIRST}\n[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 5\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1000\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1000\n"
    );
    let (r, d) = go(&text, "faster-first");
    assert_eq!(
        (first_cpu(&r, 0), first_cpu(&r, 1), first_cpu(&r, 2)),
        (2, 3, 0)
    );
    let d = d.borrow();
    let all = events(d.trace());
    let ff: Vec<_> = d
        .trace()
        .iter()
        .filter(|e| matches!(e.what, RoundWhat::FasterFirst { .. }))
        .collect();
    assert_eq!(ff.len(), 1, "{all}");
    assert_eq!((ff[0].t_ns, ff[0].cpu), (5 * MS, 2), "{all}");
    assert_eq!(ff[0].what, RoundWhat::FasterFirst { task: 2, from: 0 });
    assert_eq!(r.summary.migrations, 1);
    assert_eq!(ran_on(&r, 2, 0, 0, u64::MAX), 5 * MS);
    let stall = r.tasks[2].stall_s;
    assert!(stall > 0.0 && stall < 0.002, "refill {stall} s");
    let want = 0.005 + (1000.0 - 5.0 * 430.0 / 1024.0) / 1000.0 + stall;
    assert!(
        (r.tasks[2].end_s.unwrap() - want).abs() < 1e-6,
        "{:?}",
        r.tasks[2].end_s
    );
    // The move keeps t2's round: cpu2 joins in cpu0's round (0).
    assert!(d
        .trace()
        .iter()
        .any(|e| e.cpu == 2 && e.t_ns == 5 * MS && e.what == RoundWhat::Join { round: 0 }));
}

#[test]
fn bad_parameters_get_clear_messages() {
    let err = |sched: &str| {
        let text = format!("duration_s = 1\nscheduler = \"{sched}\"\nmachine.preset = \"smp-4\"\n");
        match parse(&text, "bad.toml", Format::Toml, &[]) {
            Ok(s) => run(&s, RunOptions::default(), None, vec![], None)
                .expect_err("an error")
                .to_string(),
            Err(e) => e.to_string(),
        }
    };
    let e = err("a-dwrr[round_slice_ms=0]");
    assert!(
        e.contains("a-dwrr[round_slice_ms]: 0 is out of range; allowed 0.001 to 100000"),
        "{e}"
    );
    let e = err("dwrr[slice=3]");
    assert!(
        e.contains("policy \"dwrr\" has no parameter \"slice\"; known: round_slice_ms, local_slice_ms, rating, underutil, faster_first"),
        "{e}"
    );
    let e = err("faster-first[rating=spec]");
    assert!(
        e.contains(
            "faster-first[rating]: \"spec\" is not allowed; allowed: unit, capacity, machine"
        ),
        "{e}"
    );
    let e = err("a-dwrr[local_slice_ms=-1]");
    assert!(
        e.contains("a-dwrr[local_slice_ms]: -1 is out of range"),
        "{e}"
    );
}

fn random_scenario(
    clusters: &[(u32, u32, u32)],
    progs: &[(u8, u32, u32, u32, i32, bool)],
    seed: u64,
) -> String {
    common::random_scenario(
        &format!("duration_s = 0.5\nseed = {seed}\n"),
        "pstates = [{ mhz = 2000, volt = 1.0 }, { mhz = 1000, volt = 0.8 }]\n",
        clusters,
        progs,
    )
}

use proptest::prelude::*;

/// A user-level agent that every 7 ms changes a random thread's affinity
/// (to a random non-empty set) and nice value, to exercise `dequeue`,
/// placement after affinity changes, `reweight` and moves that an
/// affinity change diverts.
struct Meddler;

impl hetsched_core::policy::Agent for Meddler {
    fn name(&self) -> &str {
        "meddler"
    }
    fn period(&self) -> hetsched_core::SimTime {
        hetsched_core::SimTime::ms(7)
    }
    fn sample(&mut self, cx: &mut Ctx) {
        let (n, nt) = (cx.ncpus(), cx.ntasks());
        for _ in 0..2 {
            let t = cx.random_u64() as usize % nt;
            let mask = cx.random_u64();
            let mut cpus: Vec<usize> = (0..n).filter(|c| mask & (1 << (c % 64)) != 0).collect();
            if cpus.is_empty() {
                cpus.push(mask as usize % n);
            }
            cx.set_affinity(t, cpus);
            let nice = (cx.random_u64() % 11) as i32 - 5;
            cx.set_nice(t, nice);
        }
    }
}

/// Like [`go`], with the meddling agent.
fn go_meddled(text: &str, spec: &str) -> RunResults {
    let s = scn(text);
    let machine = s.build(None, vec![]).unwrap().machine;
    let d = Dwrr::from_params(&parse_spec(spec).unwrap(), &machine).unwrap();
    let probe = Box::new(Probe(Rc::new(RefCell::new(d))));
    run(&s, opts(), Some(probe), vec![Box::new(Meddler)], None)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, .. ProptestConfig::default() })]
    /// Random machines (big/little, SMT, DVFS under the default governor)
    /// and workloads (sleeps, barriers, nice, affinity), also with an agent
    /// that keeps changing affinities and nice values: the engine's
    /// invariant checker and the policy's own audit hold after every
    /// callback, and runs are deterministic.
    #[test]
    fn random_runs_keep_the_bookkeeping_consistent(
        clusters in proptest::collection::vec((0u32..4, 1u32..4, 1u32..3), 1..4),
        progs in proptest::collection::vec((0u8..5, 1u32..13, 1u32..3000, 0u32..20, -5i32..6, any::<bool>()), 1..6),
        which in 0usize..3,
        seed in 0u64..1000,
    ) {
        let spec = ["dwrr[round_slice_ms=7, local_slice_ms=2]", "a-dwrr", "faster-first[round_slice_ms=12]"][which];
        let text = random_scenario(&clusters, &progs, seed);
        let (a, _) = go(&text, spec);
        let (b, _) = go(&text, spec);
        prop_assert!(a.summary.events > 0);
        prop_assert_eq!(&a.summary.trace_hash, &b.summary.trace_hash);
        let c = go_meddled(&text, spec);
        prop_assert!(c.summary.events > 0);
    }
}
