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
    (
        "desktop-hybrid-8p+16e",
        "Hybrid desktop like an Intel Core i9-13900K: 8 P-cores with 2 threads each + 16 E-cores in 4 clusters of 4 (32 CPUs)",
        r#"
description = "8 P-cores x 2 threads (up to 5.4 GHz) + 16 E-cores (up to 4.3 GHz), like an i9-13900K"
# Public facts (Intel's product specifications of the Core i9-13900K): 24
# cores = 8 Performance-cores + 16 Efficient-cores, 32 threads (only P-cores
# have Hyper-Threading); P-core base 3.0 GHz, max turbo 5.4 GHz (5.8 GHz with
# Thermal Velocity Boost on at most two cores, not modelled); E-core base
# 2.2 GHz, max turbo 4.3 GHz; 36 MB shared L3; E-cores come in modules of 4
# that share an L2 and a clock. 125 W base power, 253 W maximum turbo power.
# Assumptions of this preset (not published figures): an E-core does 0.7 of a
# P-core's work per clock, so its capacity is 1024 x 4.3/5.4 x 0.7 = 571;
# voltages and power coefficients are illustrative, chosen so that the 32
# CPUs busy at their highest P-state draw about 250 W; SMT costs 40 %.
platform_base_w = 20.0
[types.pcore]
capacity = 1024
smt_factor = 0.6
pstates = [{ mhz = 800, volt = 0.70 }, { mhz = 3000, volt = 0.95 }, { mhz = 4200, volt = 1.10 }, { mhz = 5400, volt = 1.30 }]
power = { dyn_w_per_v2ghz = 0.74, static_w_per_v = 0.8, idle_w = 0.3, stall_activity = 0.3 }
freq_transition_us = 30
[types.ecore]
capacity = 571
pstates = [{ mhz = 800, volt = 0.70 }, { mhz = 2200, volt = 0.85 }, { mhz = 3300, volt = 1.00 }, { mhz = 4300, volt = 1.15 }]
power = { dyn_w_per_v2ghz = 1.1, static_w_per_v = 0.3, idle_w = 0.1, stall_activity = 0.3 }
freq_transition_us = 30
[migration]
llc_kb = 36864
private_kb = 2048
[[clusters]]
type = "pcore"
cores = 8
smt = 2
dvfs = "core"
[[clusters]]
type = "ecore"
cores = 4
count = 4
"#,
    ),
    (
        "phone-1+3+4",
        "Three-cluster phone SoC like a Snapdragon 888: 1 Cortex-X1 at 2.84 GHz + 3 Cortex-A78 at 2.42 GHz + 4 Cortex-A55 at 1.8 GHz",
        r#"
description = "1 prime (X1, 2.84 GHz) + 3 big (A78, 2.42 GHz) + 4 little (A55, 1.8 GHz) cores, like a Snapdragon 888"
# Public facts (Qualcomm's Snapdragon 888 specification): Kryo 680 CPU of one
# Cortex-X1 at up to 2.84 GHz, three Cortex-A78 at up to 2.42 GHz and four
# Cortex-A55 at up to 1.80 GHz; each cluster has its own clock (one cpufreq
# policy per cluster on Linux).
# Assumptions of this preset (not published figures): per-clock performance
# X1 : A78 : A55 = 1.2 : 1.0 : 0.45, so capacities (Linux cpu_capacity,
# 1024 for the fastest) are X1 1024, A78 1024 x 2.42/2.84 / 1.2 = 727, A55
# 1024 x 1.80/2.84 x 0.45/1.2 = 243. A real phone's numbers come from its
# own /sys (hetsched machine from-sysfs). Intermediate P-states, voltages
# and power coefficients are illustrative.
platform_base_w = 0.3
[types.prime]
capacity = 1024
pstates = [{ mhz = 844, volt = 0.60 }, { mhz = 1881, volt = 0.75 }, { mhz = 2841, volt = 1.00 }]
power = { dyn_w_per_v2ghz = 1.2, static_w_per_v = 0.2, idle_w = 0.03, stall_activity = 0.3 }
freq_transition_us = 50
[types.big]
capacity = 727
pstates = [{ mhz = 710, volt = 0.60 }, { mhz = 1670, volt = 0.75 }, { mhz = 2419, volt = 0.95 }]
power = { dyn_w_per_v2ghz = 0.7, static_w_per_v = 0.12, idle_w = 0.02, stall_activity = 0.3 }
freq_transition_us = 50
[types.little]
capacity = 243
pstates = [{ mhz = 300, volt = 0.55 }, { mhz = 1075, volt = 0.65 }, { mhz = 1804, volt = 0.80 }]
power = { dyn_w_per_v2ghz = 0.15, static_w_per_v = 0.03, idle_w = 0.005, stall_activity = 0.3 }
freq_transition_us = 50
[[clusters]]
type = "little"
cores = 4
[[clusters]]
type = "big"
cores = 3
[[clusters]]
type = "prime"
cores = 1
"#,
    ),
    (
        "server-40c-turbo",
        "One-socket server like an Intel Xeon Platinum 8380: 40 cores x 2 threads, per-core DVFS, 2.3 GHz base and 3.4 GHz turbo",
        r#"
description = "40 cores x 2 threads (80 CPUs), per-core DVFS 0.8-3.4 GHz with turbo P-states, like a Xeon Platinum 8380"
# Public facts (Intel's product specifications of the Xeon Platinum 8380):
# 40 cores, 80 threads, base 2.30 GHz, max turbo 3.40 GHz, 60 MB L3 cache,
# 270 W TDP. 3.0 GHz is the commonly reported all-core turbo.
# The two highest P-states are turbo: on the real part only a few cores reach
# 3.4 GHz at once within the power budget. The engine has no turbo or power
# budget, so here every core may run at 3.4 GHz; pin a governor at 3000 MHz
# (userspace[mhz=3000]) for the all-core case. Voltages and power coefficients
# are illustrative, chosen so that all 80 threads busy at base draw about
# 240 W.
platform_base_w = 60.0
[types.core]
capacity = 1024
smt_factor = 0.6
pstates = [{ mhz = 800, volt = 0.70 }, { mhz = 2300, volt = 0.85 }, { mhz = 3000, volt = 0.95 }, { mhz = 3400, volt = 1.05 }]
power = { dyn_w_per_v2ghz = 1.1, static_w_per_v = 0.5, idle_w = 0.2, stall_activity = 0.3 }
freq_transition_us = 20
[migration]
llc_kb = 61440
private_kb = 1280
[[clusters]]
type = "core"
cores = 40
smt = 2
dvfs = "core"
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
