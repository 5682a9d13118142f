//! Built-in machines. Each is a TOML machine table; a scenario uses one with
//! `machine.preset = "name"` and may override any field. The numbers are
//! illustrative round values unless a comment cites a source.

/// `(name, description, TOML)` of every preset.
pub const PRESETS: &[(&str, &str, &str)] = &[
    (
        "smp-4",
        "4 identical cores at 2 GHz, one LLC, one frequency domain",
        r#"
description = "4 identical cores at 2 GHz"
[types.core]
capacity = 1024
pstates = [{ mhz = 1000, volt = 0.8 }, { mhz = 1500, volt = 0.9 }, { mhz = 2000, volt = 1.0 }]
[[clusters]]
type = "core"
cores = 4
"#,
    ),
    (
        "smp-64",
        "64 identical cores in 2 nodes of 4 LLCs of 8 cores (the standard benchmark machine)",
        r#"
description = "64 identical cores: 2 nodes x 4 LLC domains x 8 cores"
[types.core]
capacity = 1024
pstates = [{ mhz = 1200, volt = 0.8 }, { mhz = 2400, volt = 1.0 }]
[[clusters]]
type = "core"
cores = 8
count = 4
node = 0
[[clusters]]
type = "core"
cores = 8
count = 4
node = 1
"#,
    ),
    (
        "big-little-4+4",
        "4 big + 4 little cores, one frequency domain per cluster (a generic big.LITTLE phone SoC)",
        r#"
description = "4 big (capacity 1024, up to 2.0 GHz) + 4 little (capacity 430, up to 1.4 GHz) cores"
platform_base_w = 0.5
[types.big]
capacity = 1024
pstates = [{ mhz = 800, volt = 0.70 }, { mhz = 1400, volt = 0.85 }, { mhz = 2000, volt = 1.00 }]
class_speedup = { low = 0.9, high = 1.2 }
power = { dyn_w_per_v2ghz = 0.9, static_w_per_v = 0.15, idle_w = 0.05, stall_activity = 0.3 }
freq_transition_us = 50
[types.little]
capacity = 430
pstates = [{ mhz = 600, volt = 0.70 }, { mhz = 1000, volt = 0.80 }, { mhz = 1400, volt = 0.90 }]
power = { dyn_w_per_v2ghz = 0.25, static_w_per_v = 0.04, idle_w = 0.01, stall_activity = 0.3 }
freq_transition_us = 50
[[clusters]]
type = "big"
cores = 4
[[clusters]]
type = "little"
cores = 4
"#,
    ),
    (
        "li-asym-4+4",
        "Li et al. §6.2 platform: 4 big + 4 small cores with a 3.4:1 performance rating, tick 4 ms",
        r#"
description = "4 big + 4 small cores, rating ratio 3.4:1 (Li et al., Section 6.2), HZ=250"
tick_hz = 250
[types.big]
capacity = 1024
pstates = [{ mhz = 2330, volt = 1.0 }]
[types.small]
# 1024 / 3.4 = 301: the paper's small cores deliver 1/3.4 of a big core's performance.
capacity = 301
pstates = [{ mhz = 2330, volt = 1.0 }]
[[clusters]]
type = "big"
cores = 4
[[clusters]]
type = "small"
cores = 4
"#,
    ),
    (
        "patel-opteron-8",
        "Patel's platform: 8 cores like a 2.3 GHz AMD Opteron with per-core DVFS (800 MHz - 2.3 GHz), power at the wall",
        r#"
description = "8 cores, 2.3 GHz Opteron-like, per-core DVFS 800-2300 MHz, wall power"
# Platform power (memory, disks, fans, supply losses): chosen so that the
# machine draws about 186 W at the wall with all 8 cores busy at 2.3 GHz,
# the baseline implied by Patel's "41 W, about 22%" of savings.
platform_base_w = 98.0
[types.opteron]
capacity = 1024
# P-states: the three frequencies of Patel's cpusets (800 MHz, 1.4 GHz,
# 2.3 GHz) plus two intermediate ones; voltages are typical of this class of
# part (not given by the thesis).
pstates = [
  { mhz = 800, volt = 0.95 },
  { mhz = 1150, volt = 1.00 },
  { mhz = 1400, volt = 1.05 },
  { mhz = 1800, volt = 1.15 },
  { mhz = 2300, volt = 1.25 },
]
# About 11 W per busy core at 2.3 GHz (2.8 × 1.25² × 2.3 + 0.8 × 1.25).
# Idle: these 45 nm Family 10h cores have no power gating (no C6), so a
# halted core keeps leaking at its supply voltage. Leakage is taken as about
# 30 % of a busy core's power at the top P-state (a typical share for 45 nm
# high-performance logic), 3.3 W at 1.25 V, cubic in V (V × I_leak, I_leak
# ~ V²): 1.7 W/V³. The halted core's clock tree keeps about 5 % of C_eff
# switching: 0.14 W/(V² GHz). Idle: 3.8 W at 2.3 GHz, 1.56 W at 800 MHz.
power = { dyn_w_per_v2ghz = 2.8, static_w_per_v = 0.8, idle_w = 0.0, idle_leak_w_per_v3 = 1.7, idle_clock_w_per_v2ghz = 0.14, stall_activity = 0.3 }
freq_transition_us = 100
[[clusters]]
type = "opteron"
cores = 8
dvfs = "core"
"#,
    ),
    (
        "smt-4x2",
        "4 cores x 2 hyperthreads; a busy sibling costs each thread 40% of its throughput",
        r#"
description = "4 cores x 2 SMT threads, smt_factor 0.6"
[types.core]
capacity = 1024
smt_factor = 0.6
pstates = [{ mhz = 2400, volt = 1.0 }]
[[clusters]]
type = "core"
cores = 4
smt = 2
"#,
    ),
];

/// TOML of a preset machine.
pub fn machine(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|p| p.0 == name).map(|p| p.2)
}

/// Names of all presets.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.0).collect()
}
