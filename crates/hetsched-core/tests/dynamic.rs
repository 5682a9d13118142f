//! Dynamic processors in the engine: hotplug, stop-machine, fusion,
//! proxies, deferred hotplug, and bad reconfigurations — hand-worked.

mod common;

use common::{completion, err, go, pinned, FOUR};
use hetsched_core::hw::dynamic::{ReconfigOp, Reconfigured};
use hetsched_core::hw::reconfig::Mechanism;
use hetsched_core::metrics::RunResults;
use hetsched_core::policy::{make_scheduler, Ctx, EnqFlags, Scheduler};
use hetsched_core::sim::RunOptions;

#[test]
fn native_offline_halts_every_other_cpu_for_stop_machine() {
    // Offline cpu 0 at 10 ms with native hotplug on 4 CPUs: latency 25 ms;
    // its stop-machine halts cpus 1-3 for 4 × 650 µs = 2.6 ms, so each
    // 100 ms program pinned there finishes at 102.6 ms.
    let text = format!(
        "{FOUR}{}{}{}\n[dynamic]\nmechanism = \"hotplug\"\n[[dynamic.events]]\nat_ms = 10\nop = \"offline\"\ncpus = [0]\n",
        pinned("a", 1, 100.0),
        pinned("b", 2, 100.0),
        pinned("c", 3, 100.0)
    );
    let r = go(&text);
    for p in ["a", "b", "c"] {
        let t = completion(&r, p);
        assert!((t - 0.1026).abs() < 1e-7, "{p} finished at {t}");
    }
    let d = r.dynamic.as_ref().expect("dynamic results");
    let rec = &d.reconfigs[0];
    assert_eq!(rec.op, "offline");
    assert!(
        (rec.latency_us - 25_000.0).abs() < 1e-6,
        "{}",
        rec.latency_us
    );
    assert_eq!(rec.stop_machines, 1);
    assert!((rec.halted_busy_ms - 3.0 * 2.6).abs() < 1e-6);
    assert!((rec.end_s.unwrap() - 0.035).abs() < 1e-9);
    // Offline from 35 ms to the end of the run (the programs' end).
    assert!(d.proxies[0].offline_s > 0.0);
}

#[test]
fn a_task_on_a_cpu_going_offline_moves_and_its_cpu_takes_no_work() {
    // Two 100 ms threads on cpus 0 and 1 (affinity 0-1); cpu 1 goes away at
    // 50 ms by proxy (µs), so the remaining 50 ms of its thread timeshare
    // cpu 0 with the other thread's remaining 50 ms: both end near 150 ms.
    let text = format!(
        "{FOUR}\n[[workload.programs]]\nname = \"p\"\nkind = \"parallel\"\nthreads = 2\nwork_ms = 200\naffinity = [0, 1]\n\n[dynamic]\nmechanism = \"proxy-logical\"\n[[dynamic.events]]\nat_ms = 50\nop = \"offline\"\ncpus = [1]\n"
    );
    let r = go(&text);
    let t = completion(&r, "p");
    assert!((t - 0.150).abs() < 0.002, "finished at {t}");
    // Nothing ran on cpu 1 after 50 ms.
    for e in &r.trace {
        if let hetsched_core::trace::TraceEvent::Run { end_ns, cpu: 1, .. } = e {
            assert!(*end_ns <= 50_000_000, "cpu 1 ran until {end_ns}");
        }
    }
}

#[test]
fn fused_object_runs_at_its_level_speedup_after_the_fuse_latency() {
    // Fuse cpus 0-1 (level 2, speedup 1.5) at t = 0 with proxy-apic
    // (250 µs). A 150 ms program on cpu 0 waits out the fuse, then runs at
    // 1.5×: 0.25 + 150 / 1.5 = 100.25 ms.
    let text = format!(
        "{FOUR}{}\n[dynamic]\nmechanism = \"proxy-apic\"\n[[dynamic.fusion]]\nlevel = 2\nspeedup = {{ default = 1.5 }}\n[[dynamic.events]]\nat_ms = 0\nop = \"fuse\"\ncpus = [0, 1]\n",
        pinned("s", 0, 150.0)
    );
    let r = go(&text);
    let t = completion(&r, "s");
    assert!((t - 0.10025).abs() < 1e-7, "finished at {t}");
}

#[test]
fn a_proxy_handles_the_tlb_shootdowns_of_the_cpus_it_stands_in_for() {
    // A level-4 object proxies 3 CPUs from 250 µs + 2 × 2 µs = 254 µs to the
    // end of a 1 s run; with 40 IPIs/s of which half are TLB shootdowns,
    // the proxy handles 3 × 20 × (1 − 0.000254) IPIs and avoids
    // 3 × 140 × (1 − 0.000254) RCU callbacks.
    let text = format!(
        "duration_s = 1\nstop_when_done = false\n{}\n[dynamic]\nipi_per_s = 40\ntlb_share = 0.5\nrcu_per_s = 140\n[[dynamic.fusion]]\nlevel = 4\nspeedup = {{ default = 2.0 }}\n[[dynamic.events]]\nat_ms = 0\nop = \"fuse\"\ncpus = [0, 1, 2, 3]\n",
        FOUR.replace("duration_s = 2\n", "")
    );
    let r = go(&text);
    let d = r.dynamic.as_ref().unwrap();
    let span = 1.0 - 0.000254;
    assert!((d.proxies[0].ipis_handled - 60.0 * span).abs() < 1e-6);
    let avoided: f64 = d.proxies.iter().map(|p| p.rcu_avoided).sum();
    assert!((avoided - 420.0 * span).abs() < 1e-6);
    assert!((d.reconfigs[0].latency_us - 254.0).abs() < 1e-9);
}

#[test]
fn a_split_object_accounts_its_proxied_stretch_and_lazy_tlb_caps_the_shootdowns() {
    // Fuse 0-3 at 0 (proxied from 254 µs), split at 100 ms: the proxied
    // stretch ends when the teardown starts, 99.746 ms per CPU. Shootdowns at
    // 20/s: 3 × 20 × 0.099746 without lazy TLB; with it each CPU gets at most
    // one, 3 × (1 − e^(−20 × 0.099746)).
    let text = |lazy: bool| {
        format!(
            "duration_s = 1\nstop_when_done = false\n{}\n[dynamic]\nipi_per_s = 40\ntlb_share = 0.5\nlazy_tlb = {lazy}\n[[dynamic.fusion]]\nlevel = 4\nspeedup = {{ default = 2.0 }}\n[[dynamic.events]]\nat_ms = 0\nop = \"fuse\"\ncpus = [0, 1, 2, 3]\n[[dynamic.events]]\nat_ms = 100\nop = \"split\"\ncpus = [0]\n",
            FOUR.replace("duration_s = 2\n", "")
        )
    };
    let stretch = 0.1 - 0.000254;
    let r = go(&text(false));
    let d = r.dynamic.as_ref().unwrap();
    for c in 1..4 {
        assert!((d.proxies[c].proxied_s - stretch).abs() < 1e-9, "cpu {c}");
    }
    assert!((d.proxies[0].ipis_handled - 60.0 * stretch).abs() < 1e-6);
    let r = go(&text(true));
    let d = r.dynamic.as_ref().unwrap();
    let lazy = 3.0 * (1.0 - (-20.0 * stretch).exp());
    assert!(
        (d.proxies[0].ipis_handled - lazy).abs() < 1e-9,
        "{}",
        d.proxies[0].ipis_handled
    );
}

#[test]
fn deferred_hotplug_proxies_first_then_hotplugs_a_lasting_configuration() {
    let text = format!(
        "{FOUR}{}\n[dynamic]\nmechanism = \"deferred-hotplug\"\ndeferred_threshold_ms = 50\n[[dynamic.fusion]]\nlevel = 2\nspeedup = {{ default = 1.5 }}\n[[dynamic.events]]\nat_ms = 0\nop = \"fuse\"\ncpus = [2, 3]\n",
        pinned("a", 0, 300.0)
    );
    let r = go(&text);
    let d = r.dynamic.as_ref().unwrap();
    assert_eq!(d.reconfigs.len(), 2, "{:?}", d.reconfigs);
    assert_eq!(d.reconfigs[0].op, "fuse");
    assert!(d.reconfigs[0].latency_us < 1000.0);
    assert_eq!(d.reconfigs[1].op, "deferred-hotplug");
    assert_eq!(d.reconfigs[1].stop_machines, 1);
    // The deferred hotplug's stop-machine halted program a (4 × 650 µs).
    assert!((d.reconfigs[1].halted_busy_ms - 2.6).abs() < 1e-6);
    assert!((completion(&r, "a") - 0.3026).abs() < 1e-7);
    // A configuration split before the threshold is never hotplugged.
    let text = format!(
        "{FOUR}{}\n[dynamic]\nmechanism = \"deferred-hotplug\"\ndeferred_threshold_ms = 50\n[[dynamic.fusion]]\nlevel = 2\nspeedup = {{ default = 1.5 }}\n[[dynamic.events]]\nat_ms = 0\nop = \"fuse\"\ncpus = [2, 3]\n[[dynamic.events]]\nat_ms = 20\nop = \"split\"\ncpus = [2]\n",
        pinned("a", 0, 300.0)
    );
    let r = go(&text);
    let d = r.dynamic.as_ref().unwrap();
    assert_eq!(d.reconfigs.len(), 2);
    assert_eq!(d.reconfigs[1].op, "split");
    assert!((completion(&r, "a") - 0.3).abs() < 1e-9);
}

#[test]
fn online_after_hotplug_takes_the_native_online_path() {
    let text = format!(
        "{FOUR}{}\n[dynamic]\nmechanism = \"hotplug\"\n[[dynamic.events]]\nat_ms = 0\nop = \"offline\"\ncpus = [3]\n[[dynamic.events]]\nat_ms = 100\nop = \"online\"\ncpus = [3]\n",
        pinned("a", 0, 400.0)
    );
    let r = go(&text);
    let d = r.dynamic.as_ref().unwrap();
    // Online of 1 CPU with 3 online before: the calibration point, 106 ms.
    assert!((d.reconfigs[1].latency_us - 106_000.0).abs() < 1e-6);
    assert_eq!(d.reconfigs[1].stop_machines, 0);
}

#[test]
fn no_reconfiguration_without_a_dynamic_section_is_identical_to_an_empty_one() {
    let base = format!("{FOUR}{}{}", pinned("a", 0, 50.0), pinned("b", 1, 70.0));
    let plain = go(&base);
    let with = go(&format!("{base}\n[dynamic]\n"));
    assert_eq!(plain.summary.trace_hash, with.summary.trace_hash);
    assert!(plain.dynamic.is_none());
    assert!(with.dynamic.unwrap().reconfigs.is_empty());
}

#[test]
fn bad_reconfigurations_are_refused_with_clear_messages() {
    let event = |op: &str, cpus: &str, extra: &str| {
        format!(
            "{FOUR}{}\n[dynamic]\nmechanism = \"proxy-apic\"\n{extra}\n[[dynamic.fusion]]\nlevel = 2\nspeedup = {{ default = 1.5 }}\n[[dynamic.events]]\nat_ms = 0\nop = \"{op}\"\ncpus = {cpus}\n",
            pinned("a", 0, 50.0)
        )
    };
    // Offline an offline CPU.
    let twice = format!(
        "{}[[dynamic.events]]\nat_ms = 1\nop = \"offline\"\ncpus = [2]\n",
        event("offline", "[2]", "")
    );
    let e = err(&twice);
    assert!(
        e.contains("dynamic.events[1]") && e.contains("cpu 2 is offline (proxied by cpu 0)"),
        "{e}"
    );
    // Fusion group that is not contiguous.
    let e = err(&event("fuse", "[0, 2]", ""));
    assert!(
        e.starts_with("dynamic.events[0].cpus:") && e.contains("not contiguous"),
        "{e}"
    );
    // A CPU in two fused objects.
    let two = format!(
        "{}[[dynamic.events]]\nat_ms = 1\nop = \"fuse\"\ncpus = [1, 2]\n",
        event("fuse", "[0, 1]", "")
    );
    let e = err(&two);
    assert!(
        e.contains("cpu 1 is offline") || e.contains("already belongs"),
        "{e}"
    );
    let two = format!(
        "{}[[dynamic.events]]\nat_ms = 1\nop = \"offline\"\ncpus = [0]\n",
        event("fuse", "[0, 1]", "")
    );
    let e = err(&two);
    assert!(e.contains("belongs to the fused object of cpu 0"), "{e}");
    // Unknown mechanism (section and event).
    let e = err(&event("offline", "[1]", "").replace("proxy-apic", "teleport"));
    assert!(
        e.starts_with("dynamic.mechanism:") && e.contains("allowed: proxy-apic"),
        "{e}"
    );
    // Level larger than the node.
    let e = err(&event("offline", "[1]", "").replace("level = 2", "level = 8"));
    assert!(
        e.starts_with("dynamic.fusion[0].level:") && e.contains("larger than any node"),
        "{e}"
    );
    // Level not configured.
    let e = err(&event("fuse", "[0, 1, 2, 3]", ""));
    assert!(e.contains("not a fusion level"), "{e}");
    // Every CPU offline.
    let e = err(&event("offline", "[0, 1, 2, 3]", ""));
    assert!(e.contains("no cpu online"), "{e}");
    // Split of nothing; CPU that does not exist.
    let e = err(&event("split", "[1]", ""));
    assert!(e.contains("represents no"), "{e}");
    let e = err(&event("offline", "[9]", ""));
    assert!(e.starts_with("dynamic.events[0].cpus[0]:"), "{e}");
    // Bad rates and costs.
    let e = err(&event("offline", "[1]", "tlb_share = nan"));
    assert!(e.starts_with("dynamic.tlb_share:"), "{e}");
    let e = err(&event("offline", "[1]", "costs = \"fast\""));
    assert!(e.starts_with("dynamic.costs:"), "{e}");
    let e = err(&event("offline", "[1]", "").replace("default = 1.5", "default = -1"));
    assert!(e.starts_with("dynamic.fusion[0].speedup.default:"), "{e}");
}

/// A scheduler that delegates to CFS and, at its first tick-free chance
/// (`init`), asks for reconfigurations; it records what completed.
struct Reconfiguring {
    inner: Box<dyn Scheduler>,
    ops: Vec<ReconfigOp>,
    done: std::rc::Rc<std::cell::RefCell<Vec<(usize, String)>>>,
}

impl Scheduler for Reconfiguring {
    fn name(&self) -> &str {
        "reconfiguring"
    }
    fn init(&mut self, cx: &mut Ctx) {
        for op in self.ops.drain(..) {
            cx.reconfigure(op, Some(Mechanism::ProxyLogical));
        }
        self.inner.init(cx)
    }
    fn select_cpu(&mut self, cx: &mut Ctx, t: usize, prev: Option<usize>, f: EnqFlags) -> usize {
        self.inner.select_cpu(cx, t, prev, f)
    }
    fn enqueue(&mut self, cx: &mut Ctx, t: usize, cpu: usize, f: EnqFlags) {
        self.inner.enqueue(cx, t, cpu, f)
    }
    fn dequeue(&mut self, cx: &mut Ctx, t: usize, cpu: usize) {
        self.inner.dequeue(cx, t, cpu)
    }
    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<usize> {
        self.inner.pick_next(cx, cpu)
    }
    fn balance(&mut self, cx: &mut Ctx, cpu: usize) {
        self.inner.balance(cx, cpu)
    }
    fn running(&mut self, cx: &mut Ctx, t: usize, cpu: usize) {
        self.inner.running(cx, t, cpu)
    }
    fn stopping(&mut self, cx: &mut Ctx, t: usize, cpu: usize, r: bool) {
        self.inner.stopping(cx, t, cpu, r)
    }
    fn tick(&mut self, cx: &mut Ctx, cpu: usize, t: usize) {
        self.inner.tick(cx, cpu, t)
    }
    fn on_reconfigured(&mut self, cx: &mut Ctx, info: &Reconfigured) {
        self.done.borrow_mut().push((
            info.id,
            format!(
                "{} {:?} online={}",
                info.op.name(),
                info.op.cpus(),
                cx.online(3)
            ),
        ));
    }
}

fn run_with(ops: Vec<ReconfigOp>) -> (Result<RunResults, String>, Vec<(usize, String)>) {
    let text = format!(
        "{FOUR}\n[[workload.programs]]\nname = \"p\"\nkind = \"parallel\"\nthreads = 4\nwork_ms = 400\n\n[dynamic]\n"
    );
    let s = common::scn(&text);
    let m = s.build(None, vec![]).unwrap().machine;
    let done = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let sched = Reconfiguring {
        inner: make_scheduler("cfs", &m).unwrap(),
        ops,
        done: done.clone(),
    };
    let r = hetsched_core::run(
        &s,
        RunOptions {
            trace: false,
            check: true,
        },
        Some(Box::new(sched)),
        vec![],
        None,
    )
    .map_err(|e| e.to_string());
    let d = done.borrow().clone();
    (r, d)
}

#[test]
fn a_policy_reconfigures_and_hears_back() {
    // CPU 3 proxied from the start: four 100 ms threads share three CPUs,
    // so they cannot finish before 400 / 3 ≈ 133 ms, nor later than 200 ms
    // (two threads on one CPU).
    let (r, done) = run_with(vec![ReconfigOp::Offline(vec![3])]);
    let r = r.unwrap();
    assert_eq!(done, vec![(0, "offline [3] online=false".to_string())]);
    let t = r.programs[0].completion_s;
    assert!(t > 0.1333 && t <= 0.2 + 1e-9, "finished at {t}");
    assert_eq!(r.cpus[3].busy_s, 0.0);
}

#[test]
fn a_policy_reconfiguring_an_offline_cpu_is_refused() {
    let (r, _) = run_with(vec![
        ReconfigOp::Offline(vec![3]),
        ReconfigOp::Offline(vec![3]),
    ]);
    let e = r.unwrap_err();
    assert!(
        e.contains("scheduler \"reconfiguring\"")
            && e.contains("reconfigure(offline [3])")
            && e.contains("cpu 3 is being reconfigured"),
        "{e}"
    );
    let (r, _) = run_with(vec![ReconfigOp::Online(vec![2])]);
    let e = r.unwrap_err();
    assert!(
        e.contains("cpu 2 is online; only an offline cpu can be brought online"),
        "{e}"
    );
}

/// Chameleon Figure 3's set-up: A (CPU 0) wants a 2-CPU object {0, 1}; B
/// lives on CPU 1. Tick 4 ms, min granularity 16 ms, proxy-APIC (fuse
/// 250 µs, split 20 µs), fused speedup 1.5.
fn f3(tax: &str) -> RunResults {
    go(&format!(
        r#"
duration_s = 10
scheduler = "chameleon[objects=A:2:{tax}, min_granularity_ms=16]"
[machine]
tick_hz = 250
migration.enabled = false
[machine.types.c]
capacity = 1024
[[machine.clusters]]
type = "c"
cores = 2
[[workload.programs]]
name = "A"
kind = "sequential"
work_ms = 1000
affinity = [0]
[[workload.programs]]
name = "B"
kind = "sequential"
work_ms = 1000
affinity = [1]
[dynamic]
[[dynamic.fusion]]
level = 2
speedup = {{ default = 1.5 }}
"#
    ))
}

fn ops(r: &RunResults) -> Vec<(&'static str, f64)> {
    r.dynamic
        .as_ref()
        .unwrap()
        .reconfigs
        .iter()
        .map(|x| (x.op, (x.start_s * 1e6).round() / 1e3))
        .collect()
}

#[test]
fn cluster_scheduler_activation_and_preemption_hand_worked() {
    // t = 0: A is picked on CPU 0; CPU 1 is idle with an empty queue, so A
    // may borrow it: fuse. B arrives on CPU 1's queue with vruntime 0 (its
    // min_vruntime); A's recorded vruntime there is 0 too.
    // While fused A is charged 4 ms × tax per tick on CPU 1. At the tick of
    // 20 ms (the first once the object has run 16 ms) B's vruntime 0 is
    // below A's recorded one (20 ms × tax > 0): B is eligible, split.
    // B runs from 20.02 ms. A re-checks at its ticks once native 16 ms:
    // * tax 1: A's recorded vruntime is 20 ms; B's reaches 19.98 ms at
    //   40 ms (not above) and 23.98 ms at 44 ms: fuse at 44 ms.
    // * tax 0.01: A's is 0.2 ms, below B's at 40 ms: fuse at 40 ms.
    // * tax 100: A's is 2 s; B never falls behind it: no more fuses.
    let r1 = f3("1");
    assert_eq!(
        ops(&r1)[..3],
        [("fuse", 0.0), ("split", 20.0), ("fuse", 44.0)],
        "{:?}",
        ops(&r1)
    );
    let r001 = f3("0.01");
    assert_eq!(
        ops(&r001)[..3],
        [("fuse", 0.0), ("split", 20.0), ("fuse", 40.0)]
    );
    let r100 = f3("100");
    assert_eq!(ops(&r100), [("fuse", 0.0), ("split", 20.0)]);
    // The borrowed CPU's thread waited on its own queue, never elsewhere.
    for r in [&r1, &r001, &r100] {
        assert_eq!(r.tasks[1].migrations, 0);
    }
    // Taxation orders A's completion: cheap borrowing finishes it sooner.
    let a = |r: &RunResults| {
        r.programs
            .iter()
            .find(|p| p.program == "A")
            .unwrap()
            .completion_s
    };
    assert!(
        a(&r001) < a(&r1) && a(&r1) < a(&r100),
        "{} {} {}",
        a(&r001),
        a(&r1),
        a(&r100)
    );
}

/// The error a one-second run on `big-little-4+4` under scheduler `sched` gives.
fn scheduler_error(sched: &str) -> String {
    err(&format!(
        "duration_s = 1\nmachine.preset = \"big-little-4+4\"\nscheduler = \"{sched}\"\n"
    ))
}

/// `sched` is refused with an error that names the `scheduler` field and says `want`.
fn assert_scheduler_error(sched: &str, want: &str) {
    let e = scheduler_error(sched);
    assert!(
        e.starts_with("scheduler:") && e.contains(want),
        "{sched}: {e}"
    );
}

#[test]
fn chameleon_parameters_are_checked() {
    for (sched, want) in [
        (
            "chameleon[objects=A:2:0]",
            "tax \"0\" of \"A\" must be a number > 0",
        ),
        ("chameleon[objects=A:2:nan]", "must be a number > 0"),
        ("chameleon[objects=A:1:1]", "at least 2 cpus"),
        ("chameleon[objects=A:2]", "is not program:level:tax"),
        ("chameleon[mechanism=warp]", "allowed: proxy-apic"),
    ] {
        assert_scheduler_error(sched, want);
    }
}

#[test]
fn cluster_scheduler_falls_back_to_a_smaller_object() {
    // Four CPUs, levels 2 and 4. A (CPU 0) wants the 4-CPU object with a
    // high tax; B lives on CPU 3. At 0 all CPUs are idle: fuse {0-3}. At the
    // 20 ms tick B is eligible (0 < 20 ms × 100): split. From 40 ms (16 ms
    // native) A re-checks: CPU 3 fails (A's recorded 2 s ≫ B's vruntime),
    // so the largest smaller level whose CPUs all qualify, {0, 1}, is fused.
    let r = go(r#"
duration_s = 10
scheduler = "chameleon[objects=A:4:100, min_granularity_ms=16]"
[machine]
tick_hz = 250
migration.enabled = false
[machine.types.c]
capacity = 1024
[[machine.clusters]]
type = "c"
cores = 4
[[workload.programs]]
name = "A"
kind = "sequential"
work_ms = 500
affinity = [0]
[[workload.programs]]
name = "B"
kind = "sequential"
work_ms = 500
affinity = [3]
[dynamic]
[[dynamic.fusion]]
level = 2
speedup = { default = 1.5 }
[[dynamic.fusion]]
level = 4
speedup = { default = 2.0 }
"#);
    let d = r.dynamic.as_ref().unwrap();
    let got: Vec<(&str, Vec<usize>, f64)> = d
        .reconfigs
        .iter()
        .take(3)
        .map(|x| (x.op, x.cpus.clone(), (x.start_s * 1e6).round() / 1e3))
        .collect();
    assert_eq!(
        got,
        vec![
            ("fuse", vec![0, 1, 2, 3], 0.0),
            ("split", vec![0, 1, 2, 3], 20.0),
            ("fuse", vec![0, 1], 40.0),
        ]
    );
}

#[test]
fn a_level_no_object_offers_is_a_warning_not_an_error() {
    // Only 2-CPU objects exist; A asks for 4: it gets {0, 1}, and the run
    // says why. A program name nobody has is also only a warning.
    let text = format!(
        "{FOUR}{}\n[dynamic]\n[[dynamic.fusion]]\nlevel = 2\nspeedup = {{ default = 1.5 }}\n",
        pinned("A", 0, 150.0)
    )
    .replace(
        "duration_s = 2\n",
        "duration_s = 2\nscheduler = \"chameleon[objects=A:4:1 ghost:2:1]\"\n",
    );
    let r = go(&text);
    let d = r.dynamic.as_ref().unwrap();
    assert_eq!(d.reconfigs[0].cpus, vec![0, 1]);
    assert!(
        r.warnings.iter().any(|w| w
            .contains("\"A\" asks for a 4-cpu object, which no object offers (fusion levels: 2)")),
        "{:?}",
        r.warnings
    );
    // 0.25 ms fuse, then 150 ms of work at 1.5×.
    assert!((completion(&r, "A") - 0.10025).abs() < 1e-7);
}

#[test]
fn dynamic_runs_are_deterministic() {
    let a = f3("1");
    let b = f3("1");
    assert_eq!(a.summary.trace_hash, b.summary.trace_hash);
    assert_eq!(ops(&a), ops(&b));
}

/// Figure 8 in the engine: a 10-CPU node, two astars (low), lbm (medium)
/// and sjeng (high) started 1 s apart with their 4-CPU speedups as weights.
fn f8(notify: &str) -> RunResults {
    go(&format!(
        r#"
duration_s = 60
scheduler = "chameleon[objects=astar:4:1:1.5 astar2:4:1:1.5 lbm:4:1:1.75 sjeng:4:1:2.0, nodes=on, notify={notify}]"
[machine]
tick_hz = 250
migration.enabled = false
[machine.types.c]
capacity = 1024
[[machine.clusters]]
type = "c"
cores = 10
[[workload.programs]]
name = "astar"
kind = "sequential"
class = "low"
work_ms = 6000
[[workload.programs]]
name = "astar2"
kind = "sequential"
class = "low"
work_ms = 6000
start_ms = 1000
[[workload.programs]]
name = "lbm"
kind = "sequential"
class = "medium"
work_ms = 2000
start_ms = 2000
[[workload.programs]]
name = "sjeng"
kind = "sequential"
class = "high"
work_ms = 4000
start_ms = 3000
[dynamic]
[[dynamic.fusion]]
level = 2
speedup = {{ low = 1.25, medium = 1.5, high = 1.5 }}
[[dynamic.fusion]]
level = 4
speedup = {{ low = 1.5, medium = 1.75, high = 2.0 }}
"#
    ))
}

fn fuses(r: &RunResults) -> Vec<(f64, Vec<usize>)> {
    r.dynamic
        .as_ref()
        .unwrap()
        .reconfigs
        .iter()
        .filter(|x| x.op == "fuse")
        .map(|x| ((x.start_s * 1e3).round(), x.cpus.clone()))
        .collect()
}

#[test]
fn node_managers_drive_the_objects_figure8() {
    // The node manager's decisions (tests/nodemgr.rs, figure8) carried out
    // by the cluster scheduler: each fuse is the object the manager built.
    // 0 s: astar 0-3. 1 s: astar2 4-7. 2 s: lbm reclaims from astar, which
    // moves to 8-9; lbm 0-3. 3 s: sjeng reclaims from astar2 (4-5, re-fused
    // at the first tick once native 16 ms: 3.02 s) and lbm (moved to 6-7);
    // sjeng 0-3. lbm exits at 3.167 s (2000 ms of work: 1000 at 1.75 +
    // 250 at 1.5): its CPUs go to astar, 6-9. astar exits at 4.195 s: astar2
    // grows into 4-7.
    let r = f8("on");
    let v: Vec<Vec<usize>> = fuses(&r).into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        v,
        vec![
            vec![0, 1, 2, 3],
            vec![4, 5, 6, 7],
            vec![0, 1, 2, 3],
            vec![8, 9],
            vec![0, 1, 2, 3],
            vec![6, 7],
            vec![4, 5],
            vec![6, 7, 8, 9],
            vec![4, 5, 6, 7],
        ],
        "{:?}",
        fuses(&r)
    );
    let t: Vec<f64> = fuses(&r).into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        &t[..7],
        &[0.0, 1000.0, 2000.0, 2000.0, 3000.0, 3000.0, 3020.0]
    );
    // Without notification the CPUs lbm frees stay idle: no 6-9 object.
    let off = f8("off");
    assert!(
        !fuses(&off).iter().any(|(_, c)| c.len() == 4 && c[0] == 6),
        "{:?}",
        fuses(&off)
    );
    // A thread that exited is released: the 6-9 object came after lbm's end.
    let lbm_end = 2.0
        + r.programs
            .iter()
            .find(|p| p.program == "lbm")
            .unwrap()
            .completion_s;
    // (start times are rounded to the ms here)
    assert!(fuses(&r)[7].0 / 1e3 >= lbm_end - 1e-3);
}

#[test]
fn node_manager_parameters_are_checked() {
    let e = scheduler_error("chameleon[objects=a:2:1:0]");
    assert!(
        e.contains("weight \"0\" of \"a\" must be a number > 0"),
        "{e}"
    );
    let e = scheduler_error("chameleon[objects=a:2:1:x]");
    assert!(e.contains("must be a number > 0"), "{e}");
    let e = scheduler_error("chameleon[notify=off]");
    assert!(e.contains("only meaningful with nodes=on"), "{e}");
    let e = scheduler_error("chameleon[nodes=maybe]");
    assert!(
        e.contains("chameleon[nodes]") && e.contains("not a boolean"),
        "{e}"
    );
}

/// One node of four CPUs, objects of 2 CPUs at twice the speed, proxy-APIC;
/// A asks for a 2-CPU object (tax 1) and B, C are native; all 400 ms of
/// work, started together in that order.
fn placed(extra: &str) -> RunResults {
    go(&format!(
        r#"
duration_s = 5
scheduler = "chameleon[objects=A:2:1, nodes=on{extra}]"
[machine]
tick_hz = 250
migration.enabled = false
[machine.types.c]
capacity = 1024
[[machine.clusters]]
type = "c"
cores = 4
[[workload.programs]]
name = "A"
kind = "sequential"
work_ms = 400
[[workload.programs]]
name = "B"
kind = "sequential"
work_ms = 400
[[workload.programs]]
name = "C"
kind = "sequential"
work_ms = 400
[dynamic]
mechanism = "proxy-apic"
[[dynamic.fusion]]
level = 2
speedup = {{ default = 2.0 }}
"#
    ))
}

#[test]
fn native_threads_are_placed_off_the_objects_cpus_when_loads_tie() {
    // The manager gives A the object {0, 1}; A queues on CPU 0. B then sees
    // CPU 0 loaded and CPUs 1-3 empty: CPU 1 belongs to A's object, so B
    // takes CPU 2 and C CPU 3. A fuses {0, 1} at 0 (CPU 1 idle with an
    // empty queue) and keeps it: after the 250 µs fuse its 400 ms run at
    // 2x, done at 200.25 ms; B and C run alone, done at 400 ms. (Placed
    // by lowest id alone, B would queue on CPU 1 and split A's object.)
    let r = placed("");
    assert_eq!(fuses(&r), vec![(0.0, vec![0, 1])]);
    assert!(
        (completion(&r, "A") - 0.20025).abs() < 1e-9,
        "{}",
        completion(&r, "A")
    );
    for p in ["B", "C"] {
        assert!(
            (completion(&r, p) - 0.4).abs() < 1e-9,
            "{p} {}",
            completion(&r, p)
        );
    }
}

#[test]
fn object_cpus_limits_the_cpus_node_managers_build_objects_from() {
    // object_cpus = 2-3: the manager's node is {2, 3}; A's object is {2, 3}
    // and A runs on CPU 2. B and C take the free CPUs 0 and 1 (CPU 3 is in
    // A's object). Same times as above.
    let r = placed(", object_cpus=2-3");
    assert_eq!(fuses(&r), vec![(0.0, vec![2, 3])]);
    assert!(
        (completion(&r, "A") - 0.20025).abs() < 1e-9,
        "{}",
        completion(&r, "A")
    );
    for p in ["B", "C"] {
        assert!(
            (completion(&r, p) - 0.4).abs() < 1e-9,
            "{p} {}",
            completion(&r, p)
        );
    }
    for (sched, want) in [
        (
            "chameleon[object_cpus=0-3]",
            "only meaningful with nodes=on",
        ),
        (
            "chameleon[nodes=on, object_cpus=4-9]",
            "cpu 9 does not exist (the machine has 8 cpus: 0-7)",
        ),
        (
            "chameleon[nodes=on, object_cpus=3-1]",
            "\"3-1\" is not a cpu id or a range a-b",
        ),
        (
            "chameleon[nodes=on, object_cpus=x]",
            "\"x\" is not a cpu id or a range a-b",
        ),
    ] {
        assert_scheduler_error(sched, want);
    }
}

#[test]
fn overlapping_object_requests_do_not_fuse_a_cpu_twice() {
    // B (CPU 1) asks for {1, 2} and starts first: the object fuses at 0. A
    // (CPU 0) starts at 10 ms and asks for {0, 1}; CPU 1 represents B's
    // object, so A must not borrow it while B holds it (the engine would
    // refuse the fuse and end the run). A fuses once B has finished.
    let r = go(r#"
duration_s = 2
scheduler = "chameleon[objects=A:2:1 B:2:1, min_granularity_ms=16]"
[machine]
tick_hz = 250
migration.enabled = false
[machine.types.c]
capacity = 1024
[[machine.clusters]]
type = "c"
cores = 3
[[workload.programs]]
name = "B"
kind = "sequential"
work_ms = 300
affinity = [1]
[[workload.programs]]
name = "A"
kind = "sequential"
work_ms = 300
start_ms = 10
affinity = [0]
[dynamic]
[[dynamic.fusion]]
level = 2
speedup = { default = 2.0 }
"#);
    let d = r.dynamic.as_ref().unwrap();
    let fuses: Vec<(Vec<usize>, f64)> = d
        .reconfigs
        .iter()
        .filter(|x| x.op == "fuse")
        .map(|x| (x.cpus.clone(), x.start_s))
        .collect();
    assert_eq!(fuses[0].0, vec![1, 2]);
    let b_end = completion(&r, "B");
    for (cpus, at) in &fuses[1..] {
        if cpus.contains(&1) && cpus[0] == 0 {
            assert!(
                *at >= b_end,
                "A fused {cpus:?} at {at} while B's object stood (B ended {b_end})"
            );
        }
    }
    assert!(
        fuses.iter().any(|(c, _)| c == &vec![0, 1]),
        "A never fused: {fuses:?}"
    );
}
