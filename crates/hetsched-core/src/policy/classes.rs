//! The scheduling classes above the fair scheduler as the registry lists
//! them (`Kind::Class`). They are not built from a spec: programs choose
//! them with `policy`, and the scenario's `[os]` table sets them; the
//! classes themselves are `os/rt.rs`, `os/dl.rs` and the engine's
//! `sim/classes.rs` (docs/classes.md).

use super::{About, ParamDef};

/// The rt class as `hetsched list policies` shows it. Its settings are
/// keys of the scenario's `[os]` table, not bracket parameters.
pub fn rt_info() -> About {
    About {
        name: "rt",
        doc: "SCHED_FIFO and SCHED_RR above the fair scheduler (program policy = \"fifo\" or \"rr\" with priority 1-99): per-CPU priority arrays, preemption by higher priority at once, RR timeslice, push and pull between CPUs (kernel/sched/rt.c); docs/classes.md",
        params: vec![
            ParamDef {
                name: "rr_timeslice_ms",
                default: "100",
                doc: "[os] table: SCHED_RR timeslice, ms (sched_rr_timeslice_ms, RR_TIMESLICE = 100 ms)",
            },
            ParamDef {
                name: "rt_runtime_ms",
                default: "950",
                doc: "[os] table: sched_rt_runtime_us in ms; with rt_period_ms, the share of each CPU that deadline tasks may reserve (6.12+ has no RT throttling of the root rt_rq: the fair server keeps fair tasks from starving)",
            },
            ParamDef {
                name: "rt_period_ms",
                default: "1000",
                doc: "[os] table: sched_rt_period_us in ms",
            },
        ],
    }
}

/// The deadline class as `hetsched list policies` shows it. Its settings
/// are keys of the scenario's `[os]` table, not bracket parameters.
pub fn dl_info() -> About {
    About {
        name: "deadline",
        doc: "SCHED_DEADLINE above rt (program policy = \"deadline\" with dl_runtime_ms, dl_deadline_ms, dl_period_ms): global EDF with CBS budgets, throttling and replenishment, admission control, and the per-CPU fair server of Linux 6.12+ (kernel/sched/deadline.c); docs/classes.md",
        params: vec![
            ParamDef {
                name: "fair_server",
                default: "true",
                doc: "[os] table: whether each CPU has the fair server (a deferred deadline server running the fair class when rt/deadline tasks starve it)",
            },
            ParamDef {
                name: "fair_server_runtime_ms",
                default: "50",
                doc: "[os] table: fair server runtime per period, ms (kernel/sched/fair.c fair_server_init: 50 ms)",
            },
            ParamDef {
                name: "fair_server_period_ms",
                default: "1000",
                doc: "[os] table: fair server period, ms (fair_server_init: 1 s)",
            },
        ],
    }
}
