//! Dynamic processors whose disabled contexts still take interrupts
//! (Chameleon §4.1, last paragraph; §5.5): a physical core as an object of
//! its two hyperthreads, Turbo-Boost-like parking, the `halt` mechanism and
//! per-program SMT factors — hand-worked.

mod common;

use common::{completion, err, go, pinned, FOUR};
use hetsched_core::metrics::RunResults;

/// Two cores of two hyperthreads (cpus 0-1 on core 0, 2-3 on core 1); a
/// thread runs at half speed while its sibling is busy.
const SMT: &str = r#"
duration_s = 2
[machine]
migration.enabled = false
[machine.types.ht]
capacity = 1024
smt_factor = 0.5
[[machine.clusters]]
type = "ht"
cores = 2
smt = 2
"#;

fn smt_dynamic(events: &str) -> String {
    format!(
        "[dynamic]\nmechanism = \"halt\"\nfusion_rule = \"siblings\"\nipi_per_s = 40\ntlb_share = 0.5\n[[dynamic.fusion]]\nlevel = 2\nspeedup = {{ default = 1.0 }}\n{events}"
    )
}

fn event(at_ms: f64, op: &str, cpus: &str) -> String {
    format!("[[dynamic.events]]\nat_ms = {at_ms}\nop = \"{op}\"\ncpus = {cpus}\n")
}

#[test]
fn activating_a_core_idles_the_sibling_and_the_thread_runs_unshared() {
    // a (cpu 0) and b (cpu 1) share core 0 at half speed: 10 ms of work
    // each by 20 ms. At 20 ms the core is activated for a with `halt`: b is
    // preempted and waits on cpu 1's queue (no proxy: cpu 1 runs the idle
    // thread and takes its own interrupts); a waits out the 2 µs halt and
    // runs alone at full speed (no SMT factor): 20.002 + 90 = 110.002 ms.
    // At 200 ms the object is split (wake from C1: 3 µs); b runs its last
    // 90 ms alone: 200.003 + 90 = 290.003 ms.
    let text = format!(
        "{SMT}{}{}{}",
        pinned("a", 0, 100.0),
        pinned("b", 1, 100.0),
        smt_dynamic(&(event(20.0, "fuse", "[0, 1]") + &event(200.0, "split", "[0]")))
    );
    let r = go(&text);
    let a = completion(&r, "a");
    let b = completion(&r, "b");
    assert!((a - 0.110002).abs() < 1e-8, "a finished at {a}");
    assert!((b - 0.290003).abs() < 1e-8, "b finished at {b}");
    let d = r.dynamic.as_ref().expect("dynamic results");
    assert_eq!(d.reconfigs[0].mechanism, "halt");
    assert!((d.reconfigs[0].latency_us - 2.0).abs() < 1e-12);
    assert_eq!(d.reconfigs[0].steps, "halt:2.000");
    assert!((d.reconfigs[1].latency_us - 3.0).abs() < 1e-12);
    // cpu 1 was halted from 20.002 ms until its wake-up began at 200 ms and
    // took its own TLB shootdowns (40/s × 0.5); nobody proxied for it.
    let halted = 0.2 - 0.020002;
    assert!(
        (d.proxies[1].halted_s - halted).abs() < 1e-9,
        "{:?}",
        d.proxies
    );
    assert!((d.proxies[1].ipis_while_halted - 20.0 * halted).abs() < 1e-9);
    assert!(d
        .proxies
        .iter()
        .all(|p| p.ipis_handled == 0.0 && p.proxied_s == 0.0));
    // b never left its cpu: it waited there for the split.
    assert_eq!(r.tasks[1].migrations, 0);
}

#[test]
fn the_representative_of_a_core_may_be_its_upper_hyperthread() {
    // Same as above with the roles swapped: the object [1, 0] is
    // represented by cpu 1, where a runs.
    let text = format!(
        "{SMT}{}{}{}",
        pinned("a", 1, 100.0),
        pinned("b", 0, 100.0),
        smt_dynamic(&(event(20.0, "fuse", "[1, 0]") + &event(200.0, "split", "[1]")))
    );
    let r = go(&text);
    assert!((completion(&r, "a") - 0.110002).abs() < 1e-8);
    assert!((completion(&r, "b") - 0.290003).abs() < 1e-8);
}

#[test]
fn a_program_smt_factor_overrides_the_types() {
    // a loses a quarter of its speed to a busy sibling (0.75), b the type's
    // half. Both run 20 ms on core 0 together, then b's cpu goes away by
    // an SMT activation for a: a has done 15 ms, b 10 ms.
    let text = format!(
        "{SMT}{}smt_factor = 0.75\n{}{}",
        pinned("a", 0, 100.0),
        pinned("b", 1, 100.0),
        smt_dynamic(&(event(20.0, "fuse", "[0, 1]") + &event(200.0, "split", "[0]")))
    );
    let r = go(&text);
    // a: 20.002 + 85 ms; b: 200.003 + 90 ms.
    assert!((completion(&r, "a") - 0.105002).abs() < 1e-8);
    assert!((completion(&r, "b") - 0.290003).abs() < 1e-8);
    // Without the override both share at the type's factor.
    let plain = format!("{SMT}{}{}", pinned("a", 0, 100.0), pinned("b", 1, 100.0));
    let r = go(&plain);
    assert!((completion(&r, "a") - 0.2).abs() < 1e-8);
}

#[test]
fn turbo_like_parking_speeds_up_the_remaining_cpu_without_proxies() {
    // Four cores; a (cpu 0, 100 ms) and b (cpu 2, 50 ms). At 10 ms cpus 1-3
    // are parked (`halt`, 3 × 2 µs) and cpu 0 runs at the group's 1.25×;
    // b is preempted and waits on cpu 2. Parked cores sleep in C6: waking
    // them at 50 ms takes 3 × 200 µs, during which a waits (cpu 0 does the
    // work).
    // a: 10 ms by 10 ms; 39.994 ms × 1.25 = 49.9925 ms by 50 ms; stalled to
    //    50.6 ms; the last 40.0075 ms at 1×: 90.6075 ms.
    // b: 10 ms by 10 ms; back at 50.6 ms; 40 ms more: 90.6 ms.
    let text = format!(
        "{FOUR}{}{}[dynamic]\nmechanism = \"halt\"\nhalt_exit_us = 200\nipi_per_s = 40\n[[dynamic.fusion]]\nlevel = 4\nspeedup = {{ default = 1.25 }}\n{}{}",
        pinned("a", 0, 100.0),
        pinned("b", 2, 50.0),
        event(10.0, "fuse", "[0, 1, 2, 3]"),
        event(50.0, "split", "[0]")
    );
    let r = go(&text);
    let a = completion(&r, "a");
    let b = completion(&r, "b");
    assert!((a - 0.0906075).abs() < 1e-8, "a finished at {a}");
    assert!((b - 0.0906).abs() < 1e-8, "b finished at {b}");
    let d = r.dynamic.as_ref().unwrap();
    assert!((d.reconfigs[0].latency_us - 6.0).abs() < 1e-12);
    assert!((d.reconfigs[1].latency_us - 600.0).abs() < 1e-12);
    assert_eq!(
        d.reconfigs[1].steps,
        "wake:200.000 wake:200.000 wake:200.000"
    );
    // Parked from 10.006 ms until the wake-up began at 50 ms; each took its
    // own interrupts (40/s, half of them TLB shootdowns).
    for c in 1..4 {
        assert!((d.proxies[c].halted_s - 0.039994).abs() < 1e-9);
        assert!((d.proxies[c].ipis_while_halted - 0.039994 * 20.0).abs() < 1e-9);
    }
    assert_eq!(d.proxies[0].ipis_handled, 0.0);
    assert_eq!(d.proxies[0].proxy_ms, 0.0);
}

#[test]
fn halted_cpus_can_be_parked_and_woken_by_offline_and_online() {
    // A plain offline with `halt` parks cpu 3 (its thread moves away) and
    // an online wakes it again; a hotplug online of it is refused.
    let base = format!(
        "{FOUR}{}[dynamic]\nmechanism = \"halt\"\n{}",
        pinned("a", 0, 50.0),
        event(5.0, "offline", "[3]")
    );
    let r = go(&format!("{base}{}", event(20.0, "online", "[3]")));
    let d = r.dynamic.as_ref().unwrap();
    assert_eq!(d.reconfigs[1].op, "online");
    assert_eq!(d.reconfigs[1].mechanism, "halt");
    assert!((d.proxies[3].halted_s - (0.020 - 0.005002)).abs() < 1e-9);
    let e = err(&format!(
        "{base}[[dynamic.events]]\nat_ms = 20\nop = \"online\"\ncpus = [3]\nmechanism = \"hotplug\"\n"
    ));
    assert!(
        e.contains("dynamic.events[1]") && e.contains("went offline with halt"),
        "{e}"
    );
}

#[test]
fn bad_smt_configurations_name_their_path() {
    // Siblings on a machine without SMT.
    let e = err(&format!(
        "{FOUR}{}[dynamic]\nfusion_rule = \"siblings\"\n[[dynamic.fusion]]\nlevel = 2\nspeedup = {{ default = 1.0 }}\n",
        pinned("a", 0, 10.0)
    ));
    assert!(
        e.starts_with("dynamic.fusion_rule:") && e.contains("no core"),
        "{e}"
    );
    // A level wider than a core.
    let e = err(&format!(
        "{SMT}{}[dynamic]\nfusion_rule = \"siblings\"\n[[dynamic.fusion]]\nlevel = 4\nspeedup = {{ default = 1.0 }}\n",
        pinned("a", 0, 10.0)
    ));
    assert!(
        e.starts_with("dynamic.fusion[0].level:") && e.contains("widest core has 2"),
        "{e}"
    );
    // CPUs of two cores.
    let e = err(&format!(
        "{SMT}{}{}",
        pinned("a", 0, 10.0),
        smt_dynamic(&event(0.0, "fuse", "[1, 2]"))
    ));
    assert!(
        e.starts_with("dynamic.events[0].cpus:") && e.contains("not SMT siblings"),
        "{e}"
    );
    // Unknown rule lists siblings.
    let e = err(&format!(
        "{SMT}{}[dynamic]\nfusion_rule = \"cores\"\n",
        pinned("a", 0, 10.0)
    ));
    assert!(
        e.contains("dynamic.fusion_rule") && e.contains("siblings"),
        "{e}"
    );
    // A wake-up latency that is not a number of µs.
    let e = err(&format!(
        "{SMT}{}[dynamic]\nhalt_exit_us = -1\n",
        pinned("a", 0, 10.0)
    ));
    assert!(e.starts_with("dynamic.halt_exit_us:"), "{e}");
    // A program SMT factor out of range.
    let e = err(&format!("{SMT}{}smt_factor = 1.5\n", pinned("a", 0, 10.0)));
    assert!(
        e.starts_with("workload.programs[0].smt_factor:") && e.contains("(0, 1]"),
        "{e}"
    );
}

/// Three 100 ms threads asking for a core (level 2) with weights `wa`,
/// 1.5 and `wc` on two cores of two hyperthreads (SMT factor 0.5), tick
/// 4 ms, min granularity 16 ms, `chameleon[smt=on]` (mechanism halt).
fn smt_mode(wa: f64, wc: f64) -> RunResults {
    go(&format!(
        r#"
duration_s = 2
scheduler = "chameleon[smt=on, objects=A:2:1:{wa} B:2:1:1.5 C:2:1:{wc}]"
[machine]
tick_hz = 250
migration.enabled = false
[machine.types.ht]
capacity = 1024
smt_factor = 0.5
[[machine.clusters]]
type = "ht"
cores = 2
smt = 2
[[workload.programs]]
name = "A"
kind = "sequential"
work_ms = 100
[[workload.programs]]
name = "B"
kind = "sequential"
work_ms = 100
[[workload.programs]]
name = "C"
kind = "sequential"
work_ms = 100
[dynamic]
fusion_rule = "siblings"
[[dynamic.fusion]]
level = 2
speedup = {{ default = 1.0 }}
"#
    ))
}

fn smt_ops(r: &RunResults) -> Vec<(&'static str, Vec<usize>, f64)> {
    r.dynamic
        .as_ref()
        .unwrap()
        .reconfigs
        .iter()
        .map(|x| (x.op, x.cpus.clone(), (x.start_s * 1e6).round() / 1e3))
        .collect()
}

#[test]
fn smt_mode_gives_cores_to_the_threads_that_gain_most_hand_worked() {
    // The threads arrive one after another at t = 0 and each is placed and
    // granted as it comes. With N runnable threads on C = 2 cores of H = 2
    // hyperthreads, K = min(C, (H·C − N)/(H − 1)) threads may have a core.
    // * A (N = 1, K = 2): granted; placed on cpu 0; picked, its sibling is
    //   idle with an empty queue: fuse [0, 1] (halt, 2 µs).
    // * B (N = 2, K = 2): granted; core 0 is kept for A, so cpu 2; fuse
    //   [2, 3].
    // * C (N = 3, K = 1): only A (weight 2.0 > 1.5 > 1.2) keeps a grant.
    //   Core 1 is the one left; cpu 3 is lent to B's object, so C queues on
    //   cpu 2. B's object has lost its grant: it splits at its first tick
    //   once it has run 16 ms (fused at 2 µs: the tick of 20 ms).
    // * C's vruntime (0) is 16 ms behind B's at 20 ms: C runs on cpu 2; when
    //   the split completes (20.003 ms) B goes to the freed cpu 3. B and C
    //   share core 1 at half speed; A runs alone: 100 ms + 2 µs.
    // * A exits (N = 2, K = 2): B keeps core 1 and fuses [3, 2] at its next
    //   tick (104 ms); C moves to core 0 and fuses [0, 1] once it has run
    //   there 16 ms natively (120 ms). Both then run alone: B has 40 ms of
    //   work left and ends near 140 ms, C near 160 ms.
    let r = smt_mode(2.0, 1.2);
    assert_eq!(
        smt_ops(&r)[..6],
        [
            ("fuse", vec![0, 1], 0.0),
            ("fuse", vec![2, 3], 0.0),
            ("split", vec![2, 3], 20.0),
            ("split", vec![0, 1], 100.002),
            ("fuse", vec![3, 2], 104.0),
            ("fuse", vec![0, 1], 120.0),
        ],
        "{:?}",
        smt_ops(&r)
    );
    assert!(r
        .dynamic
        .as_ref()
        .unwrap()
        .reconfigs
        .iter()
        .all(|x| x.mechanism == "halt"));
    assert!((completion(&r, "A") - 0.100002).abs() < 1e-9);
    assert!(
        (completion(&r, "B") - 0.140).abs() < 2e-5,
        "{}",
        completion(&r, "B")
    );
    assert!(
        (completion(&r, "C") - 0.160).abs() < 2e-5,
        "{}",
        completion(&r, "C")
    );
}

#[test]
fn smt_mode_ranks_by_weight_not_by_arrival() {
    // Same threads, C now the heaviest (2.0 > 1.5 > 1.2 for A). When C
    // arrives it is the one granted: it is placed on cpu 1 (both cores are
    // kept, cpu 1 is the lowest of the least loaded), A — running on cpu 0,
    // C's core now — is moved to core 1 (its object splits as it leaves),
    // and C fuses [1, 0] as soon as A's split completes (5 µs). C ends
    // first, just after 100 ms; A moved twice (to core 1, then back to the
    // core C freed).
    let r = smt_mode(1.2, 2.0);
    let ops = smt_ops(&r);
    assert_eq!(
        ops[2..4],
        [("split", vec![0, 1], 0.002), ("fuse", vec![1, 0], 0.005)],
        "{ops:?}"
    );
    let c = completion(&r, "C");
    assert!((c - 0.100007).abs() < 1e-9, "{c}");
    assert!(completion(&r, "A") > c && completion(&r, "B") > c);
    assert_eq!(r.tasks[0].migrations, 2);
    assert_eq!(r.tasks[2].migrations, 0);
}

#[test]
fn smt_mode_parameters_are_checked() {
    let e = err(&format!(
        "scheduler = \"chameleon[smt=on, objects=a:2:1]\"\n{FOUR}{}",
        pinned("a", 0, 10.0)
    ));
    assert!(
        e.contains("chameleon[smt]") && e.contains("no SMT siblings"),
        "{e}"
    );
    let e = err(&format!(
        "scheduler = \"chameleon[smt=on, nodes=on, objects=a:2:1]\"\n{SMT}{}",
        pinned("a", 0, 10.0)
    ));
    assert!(
        e.contains("chameleon[smt]") && e.contains("nodes=on"),
        "{e}"
    );
    let e = err(&format!(
        "scheduler = \"chameleon[smt=maybe]\"\n{SMT}{}",
        pinned("a", 0, 10.0)
    ));
    assert!(e.contains("smt"), "{e}");
}
