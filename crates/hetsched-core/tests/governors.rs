//! The sampling cpufreq governors (`ondemand`, `conservative`, `schedutil`)
//! against hand-computed frequency decisions, read from the trace.
//!
//! Conventions of these scenarios: one CPU of capacity 1024, so `compute_ms`
//! is wall time at the highest P-state and scales with `f_max / f` below it;
//! `freq_transition_us = 0`, so a decision lands at the sample that makes it;
//! samples fall on multiples of the sampling period, after the wake-ups and
//! completions of the same instant. The engine starts every domain at its
//! highest P-state.

mod common;

use common::{err, freqs, go, scn, MS};
use hetsched_core::trace::TraceEvent;

/// One CPU with the P-states of the papers' AMD Opteron: 800, 1400, 2300 MHz.
const OPTERON: &str = r#"
[machine.types.opteron]
pstates = [{ mhz = 800, volt = 0.9 }, { mhz = 1400, volt = 1.1 }, { mhz = 2300, volt = 1.3 }]
[[machine.cpus]]
type = "opteron"
"#;

/// One CPU with eleven P-states 1000, 1100, ..., 2000 MHz.
const FINE: &str = r#"
[machine.types.fine]
pstates = [
  { mhz = 1000, volt = 0.80 }, { mhz = 1100, volt = 0.85 }, { mhz = 1200, volt = 0.90 },
  { mhz = 1300, volt = 0.95 }, { mhz = 1400, volt = 1.00 }, { mhz = 1500, volt = 1.05 },
  { mhz = 1600, volt = 1.10 }, { mhz = 1700, volt = 1.15 }, { mhz = 1800, volt = 1.20 },
  { mhz = 1900, volt = 1.25 }, { mhz = 2000, volt = 1.30 },
]
[[machine.cpus]]
type = "fine"
"#;

/// A `phases` program starting at 50 ms: 10 × (compute 9 ms, sleep 1 ms),
/// then 10 × (compute 2 ms, sleep 8 ms).
fn ondemand_trace(governor: &str) -> String {
    let heavy = ["{ compute_ms = 9 }, { sleep_ms = 1 }"; 10].join(", ");
    let light = ["{ compute_ms = 2 }, { sleep_ms = 8 }"; 10].join(", ");
    format!(
        "duration_s = 0.3\nstop_when_done = false\ngovernor = \"{governor}\"\n{OPTERON}\n\
         [[workload.programs]]\nkind = \"phases\"\nstart_ms = 50\nphases = [{heavy}, {light}]\n"
    )
}

#[test]
fn ondemand_follows_a_utilisation_trace() {
    // ondemand: load = floor(100 × busy / 10 ms) per window (t − 10, t];
    // load > 80 → 2300; else f = 800 + load × (2300 − 800) / 100 MHz and the
    // lowest P-state ≥ f: load 0 → 800, 1..40 → 1400, 41..100 → 2300.
    //
    // *   0– 50 ms idle. t = 10: load 0 → f = 800 → 800 MHz.
    // *  50 ms: 9 ms compute at 800 MHz takes 9 × 2300/800 = 25.9 ms, so
    //    (50, 60] is all busy. t = 60: load 100 > 80 → 2300.
    //    The first compute has done 10 × 800/2300 = 3.478 ms of its 9 ms by
    //    60 and ends at 60 + 5.522 = 65.522; then the 10 ms loops (9 busy,
    //    1 asleep) are not aligned with the windows, but any window as long
    //    as the loop holds exactly 9 ms of busy time: load 90 > 80, stay.
    // *  The heavy part ends at 66.522 + 9 × 10 = 156.522. (150, 160] holds
    //    150–155.522 (heavy) and 156.522–158.522 (the first 2 ms compute):
    //    7.522 ms, load 75 → f = 1925 → 2300, no change.
    // *  (160, 170] holds one 2 ms compute (166.522–168.522): load 20 →
    //    f = 800 + 20 × 15 = 1100 → 1400 at t = 170.
    // *  At 1400 MHz a 2 ms compute takes 2 × 2300/1400 = 3.286 ms; the loop
    //    is 11.286 ms with 8 ms asleep, so a 10 ms window holds between 2
    //    and 3.286 ms busy: load 20..32 → f ≤ 1293 → 1400, no change.
    // *  The last compute (8 loops at 1400 from 176.522) ends at
    //    176.522 + 7 × 11.286 + 3.286 = 258.81; (260, 270] is idle:
    //    load 0 → 800 at t = 270.
    let r = go(&ondemand_trace("ondemand"));
    assert_eq!(
        freqs(&r),
        vec![
            (10 * MS, 800),
            (60 * MS, 2300),
            (170 * MS, 1400),
            (270 * MS, 800)
        ]
    );
    assert_eq!(r.summary.programs_completed, 1);
    assert_eq!(r.cpus[0].final_mhz, 800);
}

#[test]
fn ondemand_sampling_down_factor_holds_the_top_speed() {
    // sampling_down_factor = 3: after the jump to 2300 at t = 60 the next
    // evaluation is 3 periods later, over 30 ms windows: (60, 90], (90, 120]
    // and (120, 150] each hold 27 ms busy (load 90): stay, and rate_mult
    // stays 3 (it is set only when jumping from below the top).
    // (150, 180] holds 5.522 (heavy) + 3 × 2 ms (computes at 156.522,
    // 166.522, 176.522) = 11.522 ms: load 38 → f = 800 + 38 × 15 = 1370 →
    // 1400 at t = 180 (10 ms later than with factor 1), and rate_mult = 1.
    // The 7 loops left at 1400 MHz start at 186.522 and the last compute ends
    // at 186.522 + 6 × 11.286 + 3.286 = 257.53: (260, 270] idle → 800.
    let r = go(&ondemand_trace("ondemand[sampling_down_factor=3]"));
    assert_eq!(
        freqs(&r),
        vec![
            (10 * MS, 800),
            (60 * MS, 2300),
            (180 * MS, 1400),
            (270 * MS, 800)
        ]
    );
}

#[test]
fn ondemand_powersave_bias_alternates_around_the_reduced_target() {
    // Always busy: load 100 > 80 → target 2300 MHz. powersave_bias = 100‰:
    // f_avg = 2300 − 230 = 2070 MHz, between f_lo = 1400 and f_hi = 2300.
    // Time at f_hi per 10 ms period: (2070 − 1400) / (2300 − 1400) × 10 ms,
    // rounded = 7 444 444 ns; then 2 555 556 ns at 1400. Mean frequency
    // (2300 × 7.444444 + 1400 × 2.555556) / 10 = 2070 MHz.
    // The first sample (t = 10) keeps 2300 (already there); the low part
    // starts at 17.444444 ms, the next sample at 20 ms goes back to 2300.
    let r = go(&format!(
        "duration_s = 0.045\ngovernor = \"ondemand[powersave_bias=100]\"\n{OPTERON}\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1000\n"
    ));
    let hi = 7_444_444;
    assert_eq!(
        freqs(&r),
        vec![
            (10 * MS + hi, 1400),
            (20 * MS, 2300),
            (20 * MS + hi, 1400),
            (30 * MS, 2300),
            (30 * MS + hi, 1400),
            (40 * MS, 2300),
        ]
    );
}

#[test]
fn conservative_steps_one_freq_step_at_a_time() {
    // P-states every 100 MHz up to 2000; freq_step 5 % of 2000 = 100 MHz.
    // Idle until 150 ms: load 0 < 20, the requested frequency (starting at
    // the current 2000) falls 100 MHz per 10 ms sample: 1900 at 10 ms, ...,
    // 1000 at 100 ms; then it is at fmin and stays.
    // Always busy from 150 ms: load 100 > 80, up 100 MHz per sample from the
    // first all-busy window (150, 160]: 1100 at 160, ..., 2000 at 250.
    let r = go(&format!(
        "duration_s = 0.3\nstop_when_done = false\ngovernor = \"conservative\"\n{FINE}\n\
         [[workload.programs]]\nkind = \"sequential\"\nstart_ms = 150\nwork_ms = 10000\n"
    ));
    let mut want = Vec::new();
    for k in 1..=10u64 {
        want.push((10 * k * MS, 2000 - 100 * k as u32));
    }
    for j in 0..10u64 {
        want.push(((160 + 10 * j) * MS, 1100 + 100 * j as u32));
    }
    assert_eq!(freqs(&r), want);
}

#[test]
fn conservative_accumulates_steps_between_distant_pstates() {
    // Opteron P-states, step 5 % of 2300 = 115 MHz. The requested frequency
    // moves one step per sample; going down the P-state is the lowest one at
    // or above it (RELATION_L), going up the highest at or below
    // (RELATION_H).
    // Idle from 0: requested = 2300 − 115 k at t = 10 k ms:
    //   k = 8: 1380 → 1400 at 80 ms; k = 13: 805 → still 1400;
    //   k = 14: 690 → 800 at 140 ms. (At k = 15 the request, below fmin,
    //   falls back to the current 800, already the minimum.)
    // Busy from 200 ms: requested = 800 + 115 j at t = 200 + 10 j ms:
    //   j = 6: 1490 → 1400 at 260 ms; j = 13: 2295 → still 1400;
    //   j = 14: 2410, capped at 2300 → 2300 at 340 ms.
    let r = go(&format!(
        "duration_s = 0.4\nstop_when_done = false\ngovernor = \"conservative\"\n{OPTERON}\n\
         [[workload.programs]]\nkind = \"sequential\"\nstart_ms = 200\nwork_ms = 10000\n"
    ));
    assert_eq!(
        freqs(&r),
        vec![
            (80 * MS, 1400),
            (140 * MS, 800),
            (260 * MS, 1400),
            (340 * MS, 2300)
        ]
    );
}

#[test]
fn schedutil_reaches_fmax_under_full_load() {
    // Samples every 1 ms; y = 2^(−1/32) per sample; always busy, so
    // util ← y·util + (1 − y)·f/2300. next_f = 1.25 × 2300 × util, lowest
    // P-state ≥ next_f: 800 while util ≤ 800/2875 = 0.27826, 1400 while
    // util ≤ 1400/2875 = 0.48696, else 2300.
    // * t = 1: util = 1 − y = 0.0214 (busy at 2300) → 800.
    // * at 800 util → 0.3478: 0.3478 − (0.3478 − 0.0214)·y^(t−1) > 0.27826
    //   once t − 1 > 32·log2(0.3264/0.0696) = 71.4 → t = 73 → 1400
    //   (util 0.2792).
    // * at 1400 util → 0.6087: 0.6087 − (0.6087 − 0.2792)·y^(t−73) > 0.48696
    //   once t − 73 > 32·log2(0.3295/0.1217) = 45.97 → t = 119 → 2300,
    //   where util → 1 and stays above 0.487.
    let r = go(&format!(
        "duration_s = 0.5\ngovernor = \"schedutil\"\n{OPTERON}\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 10000\n"
    ));
    assert_eq!(
        freqs(&r),
        vec![(MS, 800), (73 * MS, 1400), (119 * MS, 2300)]
    );
    assert_eq!(r.cpus[0].final_mhz, 2300);
}

#[test]
fn schedutil_falls_under_a_light_load() {
    // 300 ms of compute (the frequency climbs as above, reaching 2300 at
    // 119 ms; 1 + 72 × 800/2300 + 46 × 1400/2300 = 54.05 ms of work by then,
    // so the compute ends at 119 + 245.95 = 364.95 ms), then 1 ms computes
    // every ~10 ms. util decays from ~1 towards the light load's ~0.1:
    // (util − 0.1) = 0.9·2^(−t/32) ≤ 0.487 − 0.1 after 39 ms → 1400, and the
    // decay goes on to below 0.278 → 800, where the light load keeps it
    // (util ≈ 1 × 800/2300 × 2.9/11.9 ≈ 0.085 → next_f ≈ 240 → 800).
    let light = ["{ compute_ms = 1 }, { sleep_ms = 9 }"; 40].join(", ");
    let r = go(&format!(
        "duration_s = 0.8\nstop_when_done = false\ngovernor = \"schedutil\"\n{OPTERON}\n\
         [[workload.programs]]\nkind = \"phases\"\nphases = [{{ compute_ms = 300 }}, {light}]\n"
    ));
    let f = freqs(&r);
    let heavy_end = 365 * MS;
    assert_eq!(
        f.iter()
            .filter(|e| e.0 < heavy_end)
            .copied()
            .collect::<Vec<_>>(),
        vec![(MS, 800), (73 * MS, 1400), (119 * MS, 2300)]
    );
    let after: Vec<u32> = f.iter().filter(|e| e.0 >= heavy_end).map(|e| e.1).collect();
    assert_eq!(after, vec![1400, 800], "{f:?}");
    // 1400 after about 39 ms of decay, 800 well before 150 ms.
    let t1400 = f.iter().find(|e| e.0 >= heavy_end).unwrap().0;
    assert!(
        (heavy_end + 35 * MS..=heavy_end + 45 * MS).contains(&t1400),
        "{f:?}"
    );
    assert!(f.last().unwrap().0 < heavy_end + 150 * MS, "{f:?}");
    assert_eq!(r.cpus[0].final_mhz, 800);
}

#[test]
fn schedutil_half_load_converges_to_the_pstate_above_five_eighths_fmax() {
    // A job of 1 ms (at 2000 MHz) every 2 ms: frequency-invariant util 0.5 at
    // any P-state that keeps up (busy 1 × 2000/f ms of 2 ms, scaled by
    // f/2000). next_f = 1.25 × 0.5 × 2000 = 1250 → lowest P-state ≥ 1250 of
    // 1000, 1200, ..., 2000 = 1400. The 1 ms samples see the ripple of the
    // 2 ms period: at 1400 util alternates between (0.3y + 0.7)/(1 + y) =
    // 0.5022 and (0.7y + 0.3)/(1 + y) = 0.4978 (y = 2^(−1/32)), next_f
    // 1244.6..1255.4 → 1400 every time.
    // From 2000 at t = 0: t = 1 → util 0.0214 → 1000; at 1000 the CPU is
    // saturated and util → 0.5 as 0.5 − 0.479·y^(t−1): past 0.4 (1200) at
    // about 75 ms, past 0.48 (1400) at about 147 ms, where the ripple dithers
    // 1200/1400 for a few samples before util settles above 0.482.
    let r = go(r#"
duration_s = 1
stop_when_done = false
governor = "schedutil"
[machine.types.c]
pstates = [
  { mhz = 1000, volt = 0.8 }, { mhz = 1200, volt = 0.9 }, { mhz = 1400, volt = 1.0 },
  { mhz = 1600, volt = 1.1 }, { mhz = 1800, volt = 1.2 }, { mhz = 2000, volt = 1.3 },
]
[[machine.cpus]]
type = "c"
[[workload.programs]]
kind = "periodic"
period_ms = 2
wcet_ms = 1
"#);
    let f = freqs(&r);
    assert_eq!(f[0], (MS, 1000));
    assert_eq!(f[1].1, 1200);
    assert!((70 * MS..=80 * MS).contains(&f[1].0), "{f:?}");
    let last = *f.last().unwrap();
    assert_eq!(last.1, 1400, "{f:?}");
    assert!(last.0 < 200 * MS, "{f:?}");
    assert_eq!(r.cpus[0].final_mhz, 1400);
    assert_eq!(r.summary.deadline_misses, 0);
}

#[test]
fn ondemand_saves_energy_on_a_mostly_idle_cpu() {
    // A 1 ms job every 10 ms for 1 s (100 jobs), default power model
    // (static 0.3 W/V, dynamic 1.0 W/(V²·GHz), idle 0.1 W).
    // performance: busy 100 ms at 2300 MHz / 1.3 V:
    //   P = 0.3 × 1.3 + 1.69 × 2.3 = 4.277 W → 0.4277 J; idle 900 ms →
    //   0.09 J; total 0.5177 J.
    // ondemand: the first job runs at 2300 (1 ms, 0.004277 J); at t = 10
    //   load 10 → f = 800 + 10 × 15 = 950 → 1400 MHz / 1.1 V, where a job
    //   takes 2300/1400 = 1.642857 ms (load 16 → 1040 → stays at 1400):
    //   P = 0.33 + 1.21 × 1.4 = 2.024 W × 99 × 1.642857 ms = 0.329187 J;
    //   idle 1000 − 1 − 162.643 = 836.357 ms → 0.083636 J; total 0.417100 J.
    let text = |g: &str| {
        format!(
            "duration_s = 1\nstop_when_done = false\ngovernor = \"{g}\"\n{OPTERON}\n\
             [[workload.programs]]\nkind = \"periodic\"\nperiod_ms = 10\nwcet_ms = 1\n"
        )
    };
    let perf = go(&text("performance")).cpus[0].energy_j;
    let od = go(&text("ondemand"));
    assert!((perf - 0.5177).abs() < 1e-6, "performance {perf}");
    let want =
        0.004277 + 2.024 * 99.0 * 2.3 / 1.4 * 1e-3 + (1.0 - 0.001 - 99.0 * 0.0023 / 1.4) * 0.1;
    let e = od.cpus[0].energy_j;
    assert!((e - want).abs() < 1e-6, "ondemand {e} want {want}");
    assert!(e < 0.81 * perf, "ondemand {e} vs performance {perf}");
    assert_eq!(freqs(&od), vec![(10 * MS, 1400)]);
    assert_eq!(od.summary.deadline_misses, 0);
}

#[test]
fn governor_parameters_are_checked() {
    let base = format!("duration_s = 1\n{OPTERON}");
    let cases = [
        ("ondemand[up_threshold=120]", "governor: ondemand[up_threshold]: 120 is out of range; allowed 1 to 100"),
        ("ondemand[up_threshold=0]", "ondemand[up_threshold]: 0 is out of range; allowed 1 to 100"),
        ("ondemand[up_threshold=85.5]", "ondemand[up_threshold]: 85.5 is not a whole number; allowed 1 to 100"),
        ("ondemand[sampling_ms=0]", "ondemand[sampling_ms]: 0 is out of range; allowed 0.1 to 10000"),
        ("ondemand[sampling_down_factor=0]", "ondemand[sampling_down_factor]: 0 is out of range; allowed 1 to 100000"),
        ("ondemand[powersave_bias=1001]", "ondemand[powersave_bias]: 1001 is out of range; allowed 0 to 1000"),
        ("ondemand[up_threshold=high]", "ondemand[up_threshold]: \"high\" is not a number"),
        ("ondemand[down_threshold=20]", "policy \"ondemand\" has no parameter \"down_threshold\"; known: sampling_ms, up_threshold, sampling_down_factor, powersave_bias"),
        ("conservative[down_threshold=80]", "conservative[down_threshold]: 80 must be below up_threshold (80)"),
        ("conservative[up_threshold=30, down_threshold=40]", "conservative[down_threshold]: 40 must be below up_threshold (30)"),
        ("conservative[freq_step=101]", "conservative[freq_step]: 101 is out of range; allowed 0 to 100"),
        ("conservative[down_threshold=0]", "conservative[down_threshold]: 0 is out of range; allowed 1 to 100"),
        ("schedutil[rate_limit_us=0]", "schedutil[rate_limit_us]: 0 is out of range; allowed 1 to 10000000"),
        ("schedutil[pelt_halflife_ms=-8]", "schedutil[pelt_halflife_ms]: -8 is out of range; allowed 0.1 to 10000"),
        ("schedutil[halflife=8]", "policy \"schedutil\" has no parameter \"halflife\"; known: rate_limit_us, pelt_halflife_ms"),
        ("ondemnd", "governor: unknown governor \"ondemnd\"; known: performance, powersave, userspace, ondemand, conservative, schedutil"),
    ];
    for (gov, want) in cases {
        let got = err(&format!("governor = \"{gov}\"\n{base}"));
        assert!(
            got.contains(want),
            "\ngovernor {gov}\nwant: {want}\ngot:  {got}"
        );
    }
}

#[test]
fn governors_are_registered_with_their_parameters() {
    let reg = hetsched_core::policy::registry();
    let params = |name: &str| -> Vec<(&'static str, &'static str)> {
        let p = reg.iter().find(|p| p.name == name).unwrap();
        assert_eq!(p.kind, hetsched_core::policy::Kind::Governor);
        p.params.iter().map(|d| (d.name, d.default)).collect()
    };
    assert_eq!(
        params("ondemand"),
        vec![
            ("sampling_ms", "10"),
            ("up_threshold", "80"),
            ("sampling_down_factor", "1"),
            ("powersave_bias", "0"),
            ("target", "linear"),
            ("down_differential", "10")
        ]
    );
    assert_eq!(
        params("conservative"),
        vec![
            ("sampling_ms", "10"),
            ("up_threshold", "80"),
            ("down_threshold", "20"),
            ("freq_step", "5")
        ]
    );
    assert_eq!(
        params("schedutil"),
        vec![("rate_limit_us", "1000"), ("pelt_halflife_ms", "32")]
    );
    // The name carries the parameters given.
    let s = scn(&format!(
        "duration_s = 1\ngovernor = \"conservative[freq_step=10]\"\n{OPTERON}"
    ));
    let setup = s.build(None, vec![]).unwrap();
    assert_eq!(setup.governor.name(), "conservative[freq_step=10]");
}

#[test]
fn governors_are_deterministic_on_many_domains() {
    // Two clusters (two domains) under each governor: same trace twice.
    for g in ["ondemand[powersave_bias=50]", "conservative", "schedutil"] {
        let text = format!(
            r#"
duration_s = 0.5
seed = 3
governor = "{g}"
machine.preset = "big-little-4+4"
[[workload.programs]]
kind = "phases"
threads = 6
loops = 40
jitter = 0.5
phases = [{{ compute_ms = 3 }}, {{ sleep_ms = 4 }}]
"#
        );
        let a = go(&text);
        let b = go(&text);
        assert_eq!(a.summary.trace_hash, b.summary.trace_hash, "{g}");
        assert!(
            a.trace.iter().any(|e| matches!(e, TraceEvent::Freq { .. })),
            "{g}: no frequency change at all"
        );
    }
}
