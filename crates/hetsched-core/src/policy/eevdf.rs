//! `eevdf`: Linux's fair class since 6.6 (Earliest Eligible Virtual Deadline
//! First), as kernel/sched/fair.c and kernel/sched/features.h of Linux 6.12
//! schedule SCHED_OTHER tasks (the first release with delayed dequeue).
//!
//! Per runqueue:
//! * every entity has a vruntime, a weight (nice table), a request size
//!   (`slice`: the base slice, or the task's custom slice) and a virtual
//!   deadline `vruntime + slice × 1024 / weight`;
//! * `V`, the weighted average vruntime of the entities on the queue (the
//!   running one included), kept as exact 128-bit sums `Σ wᵢvᵢ` and `Σ wᵢ`:
//!   `V = ⌊Σ wᵢvᵢ / Σ wᵢ⌋`, and an entity is eligible when
//!   `Σ wᵢvᵢ ≥ v × Σ wᵢ`. The kernel keeps the same sums relative to
//!   `min_vruntime` in 64 bits (`avg_vruntime`, `vruntime_eligible`); both
//!   give the same answers, the floor division included;
//! * the pick (`pick_eevdf`): the eligible entity with the earliest deadline
//!   (ties: the one queued first, as the kernel's deadline-ordered tree
//!   does); RUN_TO_PARITY keeps the running entity while it is eligible and
//!   has not started a new slice since it was switched to (a task put back
//!   and picked again at once is not switched to: `set_next_entity` is
//!   skipped when `prev == p`);
//! * `update_curr`: vruntime advances by `delta × 1024 / weight`; past its
//!   deadline an entity gets a new slice and deadline and, with other
//!   entities queued, the CPU reschedules (PREEMPT_SHORT: also when the
//!   running entity lost its slice protection and is no longer eligible);
//! * lag `vlag = V − v`, clamped to `± calc_delta_fair(max(2 slice, tick))`,
//!   is saved when an entity leaves the queue and restored when it comes
//!   back (PLACE_LAG), scaled by `(W + w) / W` so that joining does not
//!   shift `V` by the lag; new tasks start at `V` with half a slice
//!   (PLACE_DEADLINE_INITIAL); a migrating entity keeps its relative
//!   deadline (PLACE_REL_DEADLINE);
//! * DELAY_DEQUEUE: an entity that sleeps while not eligible (negative lag)
//!   stays on the queue, still counted in `V`, until it is picked (that is,
//!   until it became eligible) or wakes up; DELAY_ZERO then clears the
//!   positive lag it earned meanwhile. This is 6.12's lag decay across
//!   sleeps: negative lag is burned off by competing, positive lag of a
//!   delayed entity is dropped; lag of a task that sleeps while eligible is
//!   kept as it is, whatever the sleep length;
//! * wake-up preemption (`check_preempt_wakeup_fair`): the waking entity
//!   preempts when it is what `pick_eevdf` would now pick; with
//!   PREEMPT_SHORT, a waking entity with a shorter slice that is eligible and
//!   has the earlier deadline (or the running one is no longer eligible)
//!   first removes the running entity's slice protection.
//!
//! The base slice is `sysctl_sched_base_slice`, 0.75 ms × (1 + log2(min(ncpus,
//! 8))) (SCHED_TUNABLESCALING_LOG); a program's `slice_ms` is a custom slice
//! as `sched_setattr()`'s `sched_runtime` sets on a SCHED_OTHER task.
//!
//! Pick complexity: the queue is a tree ordered by deadline whose nodes also
//! hold their subtree's minimum vruntime (`eevdf_tree.rs`, the idea of the
//! kernel's augmented rbtree), so the earliest eligible deadline is found in
//! O(log n), as are insertion and removal; the entity found is the one a scan
//! in deadline order would find.
//!
//! `kernel = 6.18` swaps in Linux 6.17+'s slice protection (commits
//! 74eec63661d4, 9de74a9850b9, 052c3d87c82e, 3a0baa8e6c57, 0b9ca2dcabc3):
//! the running entity is protected while its vruntime is below `vprot`
//! (its deadline, or sooner by the shortest slice queued beside it:
//! `set_protect_slice`); `update_curr` reschedules at every charge past the
//! deadline or the protection while others are queued; a woken entity with
//! a shorter slice is picked as if the running one were unprotected, which
//! loses its protection only if it is preempted, else has it cut to the
//! shortest queued slice (`update_protect_slice`); the base slice is 6.15's
//! 0.7 ms × (1 + log2(min(ncpus, 8))).
//!
//! `charge = continual` charges the running entity at every instant, as
//! the kernel does a task that reads its own CPU-time clock continually
//! (`task_sched_runtime` calls `update_curr`): a per-CPU timer at the first
//! instant at which `update_curr` would reschedule, computed from the sums;
//! a lone entity's deadline renewed by whole slices as it passes them.
//!
//! HRTICK (off by default, as in the kernel's features.h): a timer `slice`
//! after a switch to an entity (at least 10 µs ahead, `hrtick_start`) ends
//! its slice between ticks while others are queued: it charges the entity
//! and reschedules. Enqueue and dequeue re-arm it (`hrtick_update`), and
//! reschedule at once when the running entity already used its slice; every
//! schedule clears it and a switch to another entity arms it again.
//!
//! Ticks: the kernel ticks every busy CPU, and a running entity's deadline is
//! renewed at the first tick past it. This model asks the engine for ticks
//! only while two or more entities are queued on a CPU; with one, the ticks
//! it skipped are replayed when the entity's time is next charged (each
//! skipped tick boundary charges the time up to it and renews the deadline if
//! passed), so deadlines are where the kernel's ticks would have put them.
//!
//! Wake-up placement, newidle, nohz idle and periodic load balancing are the
//! code `cfs` uses (`fair.rs`). Simplifications, stated: no group scheduling
//! (every task is a top-level entity), no NEXT_BUDDY (off by default in the
//! kernel), weights are the nice table's (the kernel's fixed-point inverse
//! weights round slightly differently), delayed entities are neither
//! counted by balancing nor migrated by it (as Linux 6.13+'s
//! `h_nr_runnable`), and an exiting task that was delayed leaves the queue
//! at the CPU's next pick or enqueue (the kernel's `task_dead_fair`).

use super::fair::cap::{CapAware, Since};
use super::fair::{self, calc_delta_fair, Balancer, FairQueues};
#[path = "eevdf_tree.rs"]
pub mod tree;
use super::{About, Ctx, EnqFlags, ParamDef, Params, PolicySpec, Scheduler};
use crate::hw::{CpuId, Machine};
use crate::os::{TaskId, TaskState};
use crate::time::SimTime;
use tree::EligTree;

/// The kernel's default base slice before scaling, ns (`sysctl_sched_base_slice`
/// = 750 µs normalised, kernel/sched/fair.c of 6.12).
const BASE_SLICE_NS: u64 = 750_000;

/// The same since Linux 6.15 (700 µs normalised: "sched: Reduce the default
/// slice to avoid tasks getting an extra tick"), so in 6.18.
const BASE_SLICE_618_NS: u64 = 700_000;

/// Timer tokens of the per-CPU timers of continual charging: this base + the CPU.
const CHARGE_TOKEN: u64 = 0x4348_4152_4745_0000;

/// The kernel's shortest hrtick delay, ns (`hrtick_start` in
/// kernel/sched/core.c: "Don't schedule slices shorter than 10000ns").
const HRTICK_MIN_NS: u64 = 10_000;

/// Timer tokens of the per-CPU slice-end timers (HRTICK): this base + the CPU.
const HRTICK_TOKEN: u64 = 0x4852_5449_434b_0000;

/// The feature switches of kernel/sched/features.h that this model follows,
/// with the kernel's defaults (all on; HRTICK, off in the kernel, is separate).
const FEATURES: [(&str, &str); 8] = [
    ("place_lag", "PLACE_LAG: waking and migrating tasks keep their lag"),
    (
        "place_deadline_initial",
        "PLACE_DEADLINE_INITIAL: a new task's first deadline is half a slice away",
    ),
    (
        "place_rel_deadline",
        "PLACE_REL_DEADLINE: a migrating task keeps its deadline relative to its vruntime",
    ),
    (
        "run_to_parity",
        "RUN_TO_PARITY: the running task keeps the CPU while eligible until its slice ends",
    ),
    (
        "preempt_short",
        "PREEMPT_SHORT: a waking task with a shorter slice may cut the running task's protected slice",
    ),
    (
        "delay_dequeue",
        "DELAY_DEQUEUE: a task sleeping with negative lag stays queued until it is eligible",
    ),
    (
        "delay_zero",
        "DELAY_ZERO: a delayed task leaves (or wakes) with its positive lag cleared",
    ),
    (
        "wakeup_preemption",
        "WAKEUP_PREEMPTION: a waking task preempts when it is the one pick_eevdf would pick",
    ),
];

fn params() -> Vec<ParamDef> {
    let mut v = vec![
        ParamDef {
            name: "base_slice_ms",
            default: "auto",
            doc: "sysctl_sched_base_slice; auto = 0.75 ms × (1 + log2(min(ncpus, 8))), 0.7 ms × the same with kernel = 6.18",
        },
        ParamDef {
            name: "kernel",
            default: "6.12",
            doc: "whose slice protection and update_curr rules: 6.12, or 6.18 (since 6.17: protection up to the shortest queued slice, and every charge past it reschedules while others are queued)",
        },
        ParamDef {
            name: "charge",
            default: "events",
            doc: "when the running task is charged (update_curr): at ticks and scheduler events, or continual (every instant, as a task reading its own CPU-time clock is: its slice ends, and an unprotected one is preempted, the moment update_curr would say so)",
        },
    ];
    for (name, doc) in FEATURES {
        v.push(ParamDef {
            name,
            default: "true",
            doc,
        });
    }
    v.push(ParamDef {
        name: "hrtick",
        default: "false",
        doc: "HRTICK: a high-resolution timer ends the running task's slice between ticks (off in the kernel's features.h)",
    });
    v.push(ParamDef {
        name: "balance",
        default: "true",
        doc: "load balancing between CPUs (false: no balancing; wake-up placement still chooses CPUs)",
    });
    v.push(ParamDef {
        name: "busy_factor",
        default: "16",
        doc: "periodic-balance interval multiplier on busy CPUs",
    });
    v.push(ParamDef {
        name: "util_est",
        default: "true",
        doc: "UTIL_EST: tasks and runqueues count as max(util_avg, EWMA of the utilisation at each sleep) for placement, misfit, EAS and schedutil",
    });
    v.push(ParamDef {
        name: "capacity_aware",
        default: "false",
        doc: "capacity-aware wake-up placement and misfit migration (Linux sched-capacity), as on cfs",
    });
    v.push(ParamDef {
        name: "eas",
        default: "false",
        doc: "Energy Aware Scheduling of wake-ups (implies capacity_aware); on only with an energy model, asymmetric capacities and the schedutil governor, else off with a warning",
    });
    v.push(ParamDef {
        name: "fits_at_fmax",
        default: "true",
        doc: "fit, misfit and over-utilisation compare with a CPU's capacity at its highest P-state, as the kernel's capacity_of (false: at its present P-state, as cfs's entries by default)",
    });
    v
}

/// Registry entry of `eevdf`.
pub fn info() -> About {
    About {
        name: "eevdf",
        doc: "Linux 6.12's fair class (EEVDF): eligibility by lag, earliest virtual deadline first, lag-preserving placement, delayed dequeue, custom slices, util_est; wake-up placement and load balancing shared with cfs; capacity awareness and EAS as parameters",
        params: params(),
    }
}

/// Registry entry of `linux`.
pub fn linux_info() -> About {
    let params = super::switched_on(params(), &["capacity_aware", "eas"]);
    About {
        name: "linux",
        doc: "Today's Linux (6.12) fair class as distributions ship it: eevdf with util_est, capacity awareness and misfit migration, and EAS where the kernel enables it (an energy model and asymmetric capacities; use governor = \"schedutil\", which EAS needs)",
        params,
    }
}

/// The feature switches in use.
#[derive(Clone, Copy, Debug)]
pub struct Features {
    /// PLACE_LAG: waking and migrating tasks keep their lag (scaled by `(W + w) / W`).
    pub place_lag: bool,
    /// PLACE_DEADLINE_INITIAL: a new task's first deadline is half a slice away.
    pub place_deadline_initial: bool,
    /// PLACE_REL_DEADLINE: a migrating task keeps its deadline relative to its vruntime.
    pub place_rel_deadline: bool,
    /// RUN_TO_PARITY: the running task keeps the CPU while eligible until its slice ends.
    pub run_to_parity: bool,
    /// PREEMPT_SHORT: a waking task with a shorter slice may cut the running task's protected slice.
    pub preempt_short: bool,
    /// DELAY_DEQUEUE: a task sleeping with negative lag stays queued until it is eligible.
    pub delay_dequeue: bool,
    /// DELAY_ZERO: a delayed task leaves (or wakes) with its positive lag cleared.
    pub delay_zero: bool,
    /// WAKEUP_PREEMPTION: a waking task preempts when it is the one `pick_eevdf` would pick.
    pub wakeup_preemption: bool,
    /// HRTICK: a timer `slice` after the pick ends the running task's slice
    /// between ticks while others are queued (`hrtick_start_fair`).
    pub hrtick: bool,
    /// `kernel = 6.18`: Linux 6.17+'s slice protection (`vprot`, up to the
    /// shortest queued slice: `set_protect_slice`, `update_protect_slice`)
    /// and `update_curr`'s rule that, with others queued, every charge past
    /// the protection reschedules. Off: 6.12's (protected until the deadline
    /// is renewed; past it, PREEMPT_SHORT reschedules once not eligible).
    pub kernel618: bool,
    /// `charge = continual`: the running task is charged at every instant
    /// (each read of its CPU-time clock calls `update_curr`), so its
    /// deadline is renewed the moment it passes and the CPU reschedules the
    /// moment `update_curr` would.
    pub continual: bool,
}

/// Per-task scheduling entity.
#[derive(Clone, Debug, Default)]
struct Se {
    vruntime: i64,
    deadline: i64,
    /// `V − vruntime` saved when it left a queue (the kernel's `vlag`).
    vlag: i64,
    /// Request size, ns.
    slice: u64,
    custom_slice: bool,
    weight: u64,
    exec_start: SimTime,
    /// When it was last picked by a switch to it (`set_next_entity`; the
    /// kernel's `prev_sum_exec_runtime`): HRTICK counts the slice from here.
    picked_at: SimTime,
    last_run: SimTime,
    /// The runqueue it is on (meaningful while `on_rq`).
    cpu: CpuId,
    /// Counted in its runqueue's `V`: queued, running, or delayed.
    on_rq: bool,
    /// Asleep but still queued (DELAY_DEQUEUE).
    delayed: bool,
    /// Its place in its runqueue's `delayed` list (meaningful while `delayed`).
    didx: usize,
    /// `deadline` holds `deadline − vruntime` (a migration in progress).
    rel_deadline: bool,
    /// RUN_TO_PARITY: picked and not given a new slice since (the kernel
    /// stashes the deadline at pick time in `vlag` and compares).
    protected: bool,
    /// `kernel = 6.18`: the vruntime up to which the running entity is
    /// protected (the kernel's `vprot`): protected while `vruntime < vprot`.
    vprot: i64,
    /// Tie-break of the queue order: when it was queued.
    seq: u64,
    seen: bool,
}

/// Per-CPU runqueue.
#[derive(Clone, Debug, Default)]
struct Rq {
    /// Queued entities (not the running one), by `(deadline, seq, task)`.
    tree: EligTree,
    curr: Option<TaskId>,
    /// The entity that ran last and was put back (the kernel's `curr` at
    /// pick time): RUN_TO_PARITY and ties consider it.
    prev: Option<TaskId>,
    /// `Σ wᵢvᵢ` and `Σ wᵢ` over the tree's entities and the running one
    /// (kept up to date as it is charged, so that `V` and eligibility need
    /// no product of its own).
    sum_wv: i128,
    sum_w: u64,
    /// Entities on the queue: the tree's and the running one.
    nr_running: u32,
    next_seq: u64,
    /// `V` of the empty queue (the kernel's `min_vruntime` then): where the
    /// first entity of an empty queue is placed.
    vzero: i64,
    /// Delayed entities on this queue.
    delayed: Vec<TaskId>,
    /// Delayed entities of `delayed` that exited since the last purge (at
    /// most: some may have left meanwhile); the purge scans only when not 0.
    dead: u32,
    /// Whether this CPU asked the engine for ticks.
    ticking: bool,
    /// When this CPU's slice-end timer (HRTICK) is armed for.
    hrtick_at: Option<SimTime>,
    /// When this CPU's continual-charging timer is armed for.
    charge_at: Option<SimTime>,
    /// `kernel = 6.18`: how many of the tree's entities have each slice
    /// (the kernel's `min_slice` augmentation: `cfs_rq_min_slice`).
    slices: std::collections::BTreeMap<u64, u32>,
}

/// The EEVDF scheduler.
pub struct Eevdf {
    name: String,
    f: Features,
    base_slice: u64,
    /// The base slice before scaling (`normalized_sysctl_sched_base_slice`):
    /// `kernel = 6.18`'s least protection without RUN_TO_PARITY.
    normal_slice: u64,
    tick: u64,
    rqs: Vec<Rq>,
    se: Vec<Se>,
    bal: Balancer,
    /// Load tracking, util_est, capacity awareness and EAS (`fair::cap`).
    cap: CapAware,
    /// Built as `linux`: EAS is off without a word where the machine does
    /// not support it.
    linux: bool,
    /// Linux 6.x's periodic balancing state (`fair::Lb6`; with `balance`).
    lb6: Option<Box<fair::Lb6>>,
}

/// `⌊a / b⌋` for `b > 0` (the kernel's `avg -= load - 1` before `div_s64`).
/// In 64 bits when both fit (one machine division instead of the 128-bit
/// routine; the same quotient).
#[inline]
fn floor_div(a: i128, b: i128) -> i128 {
    if let (Ok(a), Ok(b)) = (i64::try_from(a), i64::try_from(b)) {
        let q = a / b;
        return if (a % b != 0) && (a < 0) { q - 1 } else { q } as i128;
    }
    let q = a / b;
    if (a % b != 0) && (a < 0) {
        q - 1
    } else {
        q
    }
}

/// `x × num / den` truncated toward zero (`div_s64`), `den > 0`: in 64 bits
/// when the operands and the product fit (the same result), else in 128.
#[inline]
fn trunc_scale(x: i64, num: i128, den: i128) -> i64 {
    if let (Ok(n), Ok(d)) = (i64::try_from(num), i64::try_from(den)) {
        if let Some(p) = x.checked_mul(n) {
            return p / d;
        }
    }
    (x as i128 * num / den) as i64
}

/// `calc_delta_fair` of a signed virtual amount.
#[inline]
fn vdelta(delta: u64, weight: u64) -> i64 {
    calc_delta_fair(delta, weight) as i64
}

/// A custom slice is clamped to 0.1–100 ms, as `sched_setattr()` does.
pub const SLICE_MIN_NS: u64 = 100_000;
/// See [`SLICE_MIN_NS`].
pub const SLICE_MAX_NS: u64 = 100_000_000;

impl Eevdf {
    /// Build from a parsed spec.
    pub fn from_params(ps: &PolicySpec, m: &Machine) -> Result<Eevdf, String> {
        let linux = ps.name == "linux";
        let (entry, defs) = if linux {
            ("linux", linux_info().params)
        } else {
            ("eevdf", params())
        };
        let p = Params::new(entry, &ps.params, &defs)?;
        let kernel618 = p.choice("kernel", &["6.12", "6.18"])? == "6.18";
        let continual = p.choice("charge", &["events", "continual"])? == "continual";
        let scale = fair::tunable_scale(m);
        let base_slice = if p.given("base_slice_ms") {
            (p.f64("base_slice_ms", 0.1, 100.0)? * 1e6).round() as u64
        } else if kernel618 {
            BASE_SLICE_618_NS * scale
        } else {
            BASE_SLICE_NS * scale
        };
        let f = Features {
            place_lag: p.bool("place_lag")?,
            place_deadline_initial: p.bool("place_deadline_initial")?,
            place_rel_deadline: p.bool("place_rel_deadline")?,
            run_to_parity: p.bool("run_to_parity")?,
            preempt_short: p.bool("preempt_short")?,
            delay_dequeue: p.bool("delay_dequeue")?,
            delay_zero: p.bool("delay_zero")?,
            wakeup_preemption: p.bool("wakeup_preemption")?,
            hrtick: p.bool("hrtick")?,
            kernel618,
            continual,
        };
        let balance = p.bool("balance")?;
        let busy_factor = p.f64("busy_factor", 1.0, 1024.0)? as u64;
        let mut name = String::from(entry);
        if !ps.params.is_empty() {
            let parts: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            name = format!("{entry}[{}]", parts.join(","));
        }
        let n = m.ncpus();
        let mut cap = CapAware::new(
            n,
            p.bool("capacity_aware")?,
            p.bool("eas")?,
            p.bool("util_est")?,
            p.bool("fits_at_fmax")?,
        );
        // A new task's utilisation as Linux 4.7+ sets it.
        cap.set_post_init_util();
        if kernel618 {
            cap.set_est_before_dequeue();
        }
        // 6.x's balancing classifies CPUs by their PELT utilisation.
        cap.track |= balance;
        let bal = Balancer::new(m, balance, busy_factor);
        let lb6 = balance.then(|| Box::new(fair::Lb6::new(&bal)));
        Ok(Eevdf {
            name,
            f,
            base_slice,
            normal_slice: (base_slice / scale).max(1),
            tick: m.tick.0.max(1),
            rqs: vec![Rq::default(); n],
            se: Vec::new(),
            bal,
            cap,
            linux,
            lb6,
        })
    }

    /// The base slice in use, ns.
    pub fn base_slice(&self) -> u64 {
        self.base_slice
    }

    /// The feature switches in use.
    pub fn features(&self) -> Features {
        self.f
    }

    fn se_mut(&mut self, t: TaskId) -> &mut Se {
        if t >= self.se.len() {
            self.se.resize(t + 1, Se::default());
        }
        &mut self.se[t]
    }

    /// `(Σ wᵢvᵢ, Σ wᵢ)` over the queue and the running entity.
    #[inline]
    fn sums(&self, cpu: CpuId) -> (i128, i128) {
        let rq = &self.rqs[cpu];
        (rq.sum_wv, rq.sum_w as i128)
    }

    /// `t` starts counting in `cpu`'s sums.
    #[inline]
    fn count_in(&mut self, cpu: CpuId, t: TaskId) {
        let rq = &mut self.rqs[cpu];
        let se = &self.se[t];
        rq.sum_wv += se.vruntime as i128 * se.weight as i128;
        rq.sum_w += se.weight;
    }

    /// `t` stops counting in `cpu`'s sums.
    #[inline]
    fn count_out(&mut self, cpu: CpuId, t: TaskId) {
        let rq = &mut self.rqs[cpu];
        let se = &self.se[t];
        rq.sum_wv -= se.vruntime as i128 * se.weight as i128;
        rq.sum_w -= se.weight;
    }

    /// `V`, the weighted average vruntime (`avg_vruntime`).
    fn avg_vruntime(&self, cpu: CpuId) -> i64 {
        let (s, w) = self.sums(cpu);
        if w == 0 {
            self.rqs[cpu].vzero
        } else {
            floor_div(s, w) as i64
        }
    }

    /// `vruntime_eligible`: `v ≤ V`, compared exactly as `Σ wᵢvᵢ ≥ v Σ wᵢ`.
    #[inline]
    fn vruntime_eligible(&self, cpu: CpuId, v: i64) -> bool {
        let (s, w) = self.sums(cpu);
        s >= v as i128 * w
    }

    #[inline]
    fn eligible(&self, cpu: CpuId, t: TaskId) -> bool {
        self.vruntime_eligible(cpu, self.se[t].vruntime)
    }

    /// `t` joins `cpu`'s queue and its sums.
    fn tree_insert(&mut self, cpu: CpuId, t: TaskId) {
        self.queue_put(cpu, t);
        self.count_in(cpu, t);
    }

    /// `t` leaves `cpu`'s queue and its sums.
    fn tree_remove(&mut self, cpu: CpuId, t: TaskId) {
        self.queue_take(cpu, t);
        self.count_out(cpu, t);
    }

    /// Put `t` in `cpu`'s tree with the next queued order (the sums are
    /// the caller's: the running entity put back already counts).
    #[inline]
    fn queue_put(&mut self, cpu: CpuId, t: TaskId) {
        let rq = &mut self.rqs[cpu];
        let seq = rq.next_seq;
        rq.next_seq += 1;
        let se = &mut self.se[t];
        se.seq = seq;
        rq.tree.insert((se.deadline, seq, t), se.vruntime);
        if self.f.kernel618 {
            *rq.slices.entry(se.slice).or_insert(0) += 1;
        }
    }

    /// Take `t` out of `cpu`'s tree (the sums are the caller's: the entity
    /// picked to run still counts).
    #[inline]
    fn queue_take(&mut self, cpu: CpuId, t: TaskId) {
        let rq = &mut self.rqs[cpu];
        let se = &self.se[t];
        let found = rq.tree.remove(&(se.deadline, se.seq, t));
        debug_assert!(found, "task {t} not in the queue of cpu {cpu}");
        if self.f.kernel618 {
            if let Some(n) = rq.slices.get_mut(&se.slice) {
                *n -= 1;
                if *n == 0 {
                    rq.slices.remove(&se.slice);
                }
            }
        }
    }

    /// `cfs_rq_min_slice`: the shortest slice among the tree's entities and
    /// `curr` (`u64::MAX` with none); `kernel = 6.18` only.
    fn min_slice(&self, cpu: CpuId, curr: Option<TaskId>) -> u64 {
        let rq = &self.rqs[cpu];
        let queued = rq.slices.keys().next().copied().unwrap_or(u64::MAX);
        curr.map_or(queued, |c| queued.min(self.se[c].slice))
    }

    /// Whether the running (or just put back) entity `t` is protected from
    /// a pick of another: 6.12, picked and its deadline not renewed since
    /// (nor its protection lifted by PREEMPT_SHORT); 6.18, `protect_slice`:
    /// its vruntime has not reached `vprot`.
    #[inline]
    fn is_protected(&self, t: TaskId) -> bool {
        let se = &self.se[t];
        if self.f.kernel618 {
            se.vruntime < se.vprot
        } else {
            se.protected
        }
    }

    /// `set_next_entity`'s protection of `t`, just picked on `cpu` (taken
    /// out of the tree): 6.12 stashes the deadline; 6.18
    /// (`set_protect_slice`) protects up to the deadline, or for the
    /// shortest slice among the others queued if that is shorter than its
    /// own (RUN_TO_PARITY; without it, for at most the unscaled base slice).
    fn set_protect(&mut self, cpu: CpuId, t: TaskId) {
        if !self.f.kernel618 {
            self.se[t].protected = true;
            return;
        }
        let mut slice = if self.f.run_to_parity {
            self.min_slice(cpu, None)
        } else {
            self.normal_slice
        };
        let se = &mut self.se[t];
        slice = slice.min(se.slice);
        se.vprot = se.deadline;
        if slice != se.slice {
            se.vprot = se.vprot.min(se.vruntime + vdelta(slice, se.weight));
        }
    }

    /// Lift `t`'s protection (`cancel_protect_slice`, or 6.12's stash of
    /// `deadline + 1`).
    fn cancel_protect(&mut self, t: TaskId) {
        let se = &mut self.se[t];
        se.protected = false;
        se.vprot = se.vprot.min(se.vruntime);
    }

    /// `update_entity_lag`: save `V − v`, clamped to the lag of twice the
    /// slice (at least a tick).
    fn update_entity_lag(&mut self, cpu: CpuId, t: TaskId) {
        let v = self.avg_vruntime(cpu);
        let se = &self.se[t];
        let limit = vdelta((2 * se.slice).max(self.tick), se.weight);
        let lag = (v - se.vruntime).clamp(-limit, limit);
        self.se[t].vlag = lag;
    }

    /// The slice an entity's next request gets.
    fn refresh_slice(&mut self, t: TaskId) {
        let base = self.base_slice;
        let se = &mut self.se[t];
        if !se.custom_slice {
            se.slice = base;
        }
    }

    /// `place_entity`: put `t` (not yet counted on `cpu`) at `V − lag`, the
    /// lag scaled by `(W + w) / W`, with its deadline.
    fn place_entity(&mut self, cpu: CpuId, t: TaskId, initial: bool) {
        let v_avg = self.avg_vruntime(cpu);
        self.refresh_slice(t);
        let (_, load) = self.sums(cpu);
        let nr = self.rqs[cpu].nr_running;
        let f = self.f;
        let se = &mut self.se[t];
        let mut vslice = vdelta(se.slice, se.weight);
        let mut lag: i64 = 0;
        if f.place_lag && nr > 0 && se.vlag != 0 {
            let load = load.max(1);
            // div_s64 truncates toward zero.
            lag = trunc_scale(se.vlag, load + se.weight as i128, load);
        }
        se.vruntime = v_avg - lag;
        if se.rel_deadline {
            se.deadline += se.vruntime;
            se.rel_deadline = false;
            return;
        }
        if f.place_deadline_initial && initial {
            vslice /= 2;
        }
        se.deadline = se.vruntime + vslice;
    }

    /// Put `t` (placed) on `cpu`'s queue, counted by balancing if `runnable`.
    fn attach(&mut self, cpu: CpuId, t: TaskId) {
        self.tree_insert(cpu, t);
        let se = &mut self.se[t];
        se.on_rq = true;
        se.cpu = cpu;
        let w = se.weight;
        self.rqs[cpu].nr_running += 1;
        self.bal.add(cpu, w);
    }

    /// Take queued `t` off `cpu` for good (not sleeping: an affinity change or
    /// a migration), saving its lag and its relative deadline.
    fn detach(&mut self, cpu: CpuId, t: TaskId) {
        self.update_entity_lag(cpu, t);
        self.tree_remove(cpu, t);
        if self.f.place_rel_deadline {
            let se = &mut self.se[t];
            se.deadline -= se.vruntime;
            se.rel_deadline = true;
        }
        self.leave(cpu, t);
        let w = self.se[t].weight;
        self.bal.sub(cpu, w);
    }

    /// [`Eevdf::detach`] as `dequeue_entity` does it: the running entity of
    /// `cpu` is charged first (and the CPU reschedules if that ends its
    /// slice), then the ticks follow the new count.
    fn detach_charged(&mut self, cx: &mut Ctx, cpu: CpuId, t: TaskId) {
        if self.update_curr(cpu, cx.now) {
            cx.resched(cpu);
        }
        self.detach(cpu, t);
        self.sync_tick(cx, cpu);
        self.hrtick_start(cx, cpu);
        self.charge_arm(cx, cpu);
    }

    /// Bookkeeping of an entity leaving `cpu`'s queue.
    fn leave(&mut self, cpu: CpuId, t: TaskId) {
        let rq = &mut self.rqs[cpu];
        rq.nr_running -= 1;
        if rq.prev == Some(t) {
            rq.prev = None;
        }
        if rq.nr_running == 0 {
            // It was alone: `V` was its vruntime.
            rq.vzero = self.se[t].vruntime;
        }
        self.se[t].on_rq = false;
    }

    /// A delayed entity leaves for good (picked, or it exited):
    /// `finish_delayed_dequeue_entity`.
    fn finish_delayed(&mut self, cpu: CpuId, t: TaskId) {
        self.update_entity_lag(cpu, t);
        self.tree_remove(cpu, t);
        self.leave(cpu, t);
        self.undelay(cpu, t);
        let se = &mut self.se[t];
        se.delayed = false;
        if self.f.delay_zero && se.vlag > 0 {
            se.vlag = 0;
        }
    }

    /// [`Eevdf::finish_delayed`] of a delayed entity that `pick_eevdf` just
    /// returned: it is eligible, so its lag `V − v` is not negative and
    /// DELAY_ZERO leaves it 0 — the same as computing `V` for it.
    fn finish_picked_delayed(&mut self, cpu: CpuId, t: TaskId) {
        if !self.f.delay_zero {
            return self.finish_delayed(cpu, t);
        }
        debug_assert!(self.eligible(cpu, t), "picked task {t} is not eligible");
        self.tree_remove(cpu, t);
        self.leave(cpu, t);
        self.undelay(cpu, t);
        let se = &mut self.se[t];
        se.delayed = false;
        se.vlag = 0;
    }

    /// Take `t` off `cpu`'s list of delayed entities, where
    /// [`Se::didx`] says it is (the list ends as a search and `swap_remove`
    /// would leave it).
    fn undelay(&mut self, cpu: CpuId, t: TaskId) {
        let rq = &mut self.rqs[cpu];
        let i = self.se[t].didx;
        if rq.delayed.get(i) == Some(&t) {
            rq.delayed.swap_remove(i);
            if let Some(&moved) = rq.delayed.get(i) {
                self.se[moved].didx = i;
            }
        }
    }

    /// Exited tasks that were delayed leave the queue. Only a queue that
    /// [`Scheduler::task_dead`] marked is scanned, so the same tasks leave,
    /// in the same order, as a scan at every call would make them.
    fn purge_exited(&mut self, cx: &Ctx, cpu: CpuId) {
        if self.rqs[cpu].dead == 0 {
            return;
        }
        self.rqs[cpu].dead = 0;
        let mut i = 0;
        while i < self.rqs[cpu].delayed.len() {
            let t = self.rqs[cpu].delayed[i];
            if cx.task(t).state == TaskState::Exited {
                self.finish_delayed(cpu, t); // removes it from `delayed`
            } else {
                i += 1;
            }
        }
    }

    /// `update_deadline`: past its deadline, the running entity gets a new
    /// slice and deadline. Whether it did.
    fn update_deadline(&mut self, t: TaskId) -> bool {
        if self.se[t].vruntime < self.se[t].deadline {
            return false;
        }
        self.refresh_slice(t);
        let se = &mut self.se[t];
        se.deadline = se.vruntime + vdelta(se.slice, se.weight);
        se.protected = false;
        true
    }

    /// Charge `t` (running on `cpu`) for `delta` ns.
    #[inline]
    fn charge(&mut self, cpu: CpuId, t: TaskId, delta: u64) -> bool {
        let se = &mut self.se[t];
        let dv = vdelta(delta, se.weight);
        se.vruntime += dv;
        self.rqs[cpu].sum_wv += dv as i128 * se.weight as i128;
        if self.f.continual {
            self.renew_continual(t)
        } else {
            self.update_deadline(t)
        }
    }

    /// `update_deadline` as continual charging calls it: at the instant the
    /// vruntime reaches the deadline, which so moves by whole slices
    /// (`v + vslice` with `v` the old deadline), as often as the charge
    /// passed one. Whether it did.
    fn renew_continual(&mut self, t: TaskId) -> bool {
        if self.se[t].vruntime < self.se[t].deadline {
            return false;
        }
        self.refresh_slice(t);
        let se = &mut self.se[t];
        let vslice = vdelta(se.slice, se.weight).max(1);
        se.deadline += ((se.vruntime - se.deadline) / vslice + 1) * vslice;
        se.protected = false;
        true
    }

    /// `update_curr`: charge the running entity up to `now`. Whether the CPU
    /// should reschedule (new slice or PREEMPT_SHORT with others queued).
    fn update_curr(&mut self, cpu: CpuId, now: SimTime) -> bool {
        let Some(t) = self.rqs[cpu].curr else {
            return false;
        };
        let start = self.se[t].exec_start;
        if now <= start {
            return false;
        }
        let mut at = start.0;
        let mut renewed = false;
        if !self.rqs[cpu].ticking && !self.f.continual {
            // Replay the ticks the engine did not deliver: each charges the
            // time up to it and renews a passed deadline.
            let tick = self.tick;
            let mut next = (at / tick + 1) * tick;
            while next < now.0 {
                renewed |= self.charge(cpu, t, next - at);
                at = next;
                next += tick;
            }
        }
        renewed |= self.charge(cpu, t, now.0 - at);
        self.se[t].exec_start = now;
        if self.rqs[cpu].nr_running == 1 {
            return false;
        }
        if self.f.kernel618 {
            // 6.17+ (`update_curr`, "Always trigger resched at the end of a
            // protected period"): past its protection, every charge
            // reschedules, and the pick decides.
            return renewed || !self.is_protected(t);
        }
        renewed || self.did_preempt_short(cpu, t)
    }

    /// PREEMPT_SHORT: a running entity whose slice protection was removed is
    /// preempted once it is no longer eligible.
    fn did_preempt_short(&self, cpu: CpuId, t: TaskId) -> bool {
        self.f.preempt_short && !self.se[t].protected && !self.eligible(cpu, t)
    }

    /// `pick_eevdf`: the eligible entity with the earliest deadline among the
    /// queue and `curr` (the running one, or the one just put back).
    fn pick_eevdf(&self, cpu: CpuId, curr: Option<TaskId>) -> Option<TaskId> {
        self.pick_eevdf_p(cpu, curr, true)
    }

    /// [`Eevdf::pick_eevdf`], with `curr`'s protection honoured or not
    /// (6.18's `__pick_eevdf(cfs_rq, protect)`).
    fn pick_eevdf_p(&self, cpu: CpuId, curr: Option<TaskId>, protect: bool) -> Option<TaskId> {
        let rq = &self.rqs[cpu];
        if rq.nr_running == 1 {
            return rq.curr.or_else(|| rq.tree.first().map(|e| e.2));
        }
        // Eligible: `Σ wᵢvᵢ ≥ v Σ wᵢ`, that is `v ≤ ⌊Σ wᵢvᵢ / Σ wᵢ⌋` for
        // integer `v` (every `v` when the queue is empty): one division,
        // then a comparison per entity.
        let (sum, load) = self.sums(cpu);
        let vmax = if load == 0 {
            i64::MAX
        } else {
            floor_div(sum, load) as i64
        };
        let eligible = |t: TaskId| self.se[t].vruntime <= vmax;
        let curr = curr.filter(|&c| eligible(c));
        if let Some(c) = curr {
            let kept = if self.f.kernel618 {
                // Without RUN_TO_PARITY 6.18 still protects a quantum.
                protect && self.is_protected(c)
            } else {
                self.f.run_to_parity && self.se[c].protected
            };
            if kept {
                return Some(c);
            }
        }
        let best = rq.tree.first_eligible(|v| v <= vmax).map(|e| e.2);
        match (best, curr) {
            // The running entity (not in the tree) wins only with a strictly
            // earlier deadline; one put back in the tree was ordered by the
            // scan (queued last, it loses ties, as the kernel's curr does).
            (Some(b), Some(c))
                if rq.curr == Some(c) && self.se[c].deadline < self.se[b].deadline =>
            {
                Some(c)
            }
            (None, c) => c,
            (b, _) => b,
        }
    }

    /// PREEMPT_SHORT's test (`do_preempt_short`): waking `p` has a shorter
    /// slice than running `c`, is eligible, and comes first.
    fn do_preempt_short(&self, cpu: CpuId, p: TaskId, c: TaskId) -> bool {
        if !self.f.preempt_short || self.se[p].slice >= self.se[c].slice {
            return false;
        }
        if !self.eligible(cpu, p) {
            return false;
        }
        self.se[p].deadline < self.se[c].deadline || !self.eligible(cpu, c)
    }

    /// `check_preempt_wakeup_fair` for `t`, just queued on `cpu`.
    fn wakeup_preempt(&mut self, cx: &mut Ctx, cpu: CpuId, t: TaskId) {
        let Some(c) = self.rqs[cpu].curr else { return };
        if c == t {
            return;
        }
        match crate::os::SchedPolicy::fair_wakeup_rule(
            cx.task(t).sched.policy,
            cx.task(c).sched.policy,
        ) {
            Some(true) => return cx.resched(cpu),
            Some(false) => return,
            None => {}
        }
        if !self.f.wakeup_preemption {
            return;
        }
        if self.f.kernel618 {
            // 6.17+: a waking task with a shorter slice is picked as if the
            // running one were unprotected, whose protection is then lifted
            // only if it does preempt; if it does not, the protection is
            // cut to the shortest slice queued (RUN_TO_PARITY,
            // `update_protect_slice`).
            let short = self.f.preempt_short && self.se[t].slice < self.se[c].slice;
            if self.pick_eevdf_p(cpu, Some(c), !short) == Some(t) {
                if short {
                    self.cancel_protect(c);
                }
                cx.resched(cpu);
            } else if short && self.f.run_to_parity {
                let slice = self.min_slice(cpu, Some(c));
                let se = &mut self.se[c];
                se.vprot = se.vprot.min(se.vruntime + vdelta(slice, se.weight));
            }
            return;
        }
        if self.do_preempt_short(cpu, t, c) && self.se[c].protected {
            self.se[c].protected = false;
        }
        if self.pick_eevdf(cpu, Some(c)) == Some(t) {
            cx.resched(cpu);
        }
    }

    /// `pick_next_entity` until a runnable one: a delayed entity picked
    /// leaves the queue; the one returned becomes the running entity
    /// (`set_next_entity`), its slice protected.
    fn pick_entity(&mut self, cpu: CpuId, now: SimTime) -> Option<TaskId> {
        let picked = loop {
            let prev = self.rqs[cpu].prev;
            let Some(t) = self.pick_eevdf(cpu, prev) else {
                break None;
            };
            if self.se[t].delayed {
                self.finish_picked_delayed(cpu, t);
                continue;
            }
            break Some(t);
        };
        let prev = self.rqs[cpu].prev.take();
        if let Some(t) = picked {
            // It runs, still counted.
            self.queue_take(cpu, t);
            self.rqs[cpu].curr = Some(t);
            self.se[t].exec_start = now;
            if prev != Some(t) {
                // A switch to another task (`set_next_entity`: its slice is
                // protected, HRTICK counts from here). The one put back and
                // picked again runs on without one (`pick_next_task_fair`
                // skips `set_next_entity` when `prev == p`): a slice renewed
                // since its switch stays unprotected.
                self.set_protect(cpu, t);
                self.se[t].picked_at = now;
            }
        }
        picked
    }

    /// `hrtick_start_fair`: with HRTICK and others queued, the slice-end
    /// timer of `cpu` is armed `slice` after the running entity was picked
    /// (at least 10 µs ahead); a slice already used up reschedules now.
    #[inline]
    fn hrtick_start(&mut self, cx: &mut Ctx, cpu: CpuId) {
        if self.f.hrtick {
            self.hrtick_arm(cx, cpu);
        }
    }

    /// [`Eevdf::hrtick_start`] with HRTICK on.
    #[inline(never)]
    fn hrtick_arm(&mut self, cx: &mut Ctx, cpu: CpuId) {
        let Some(t) = self.rqs[cpu].curr else { return };
        if self.rqs[cpu].nr_running < 2 {
            return;
        }
        let se = &self.se[t];
        let ran = cx.now.0.saturating_sub(se.picked_at.0);
        if ran > se.slice {
            cx.resched(cpu);
            return;
        }
        let at = SimTime(cx.now.0 + (se.slice - ran).max(HRTICK_MIN_NS));
        if self.rqs[cpu].hrtick_at != Some(at) {
            cx.arm_timer(at, HRTICK_TOKEN + cpu as u64);
            self.rqs[cpu].hrtick_at = Some(at);
        }
    }

    /// `hrtick_clear`: every schedule stops the slice-end timer.
    #[inline]
    fn hrtick_clear(&mut self, cx: &mut Ctx, cpu: CpuId) {
        if self.rqs[cpu].hrtick_at.take().is_some() {
            cx.cancel_timer(HRTICK_TOKEN + cpu as u64);
        }
    }

    /// Continual charging: after anything changed on `cpu`, a timer at the
    /// first instant at which `update_curr` of the running entity, charged
    /// continually, would reschedule (none while it is alone).
    #[inline]
    fn charge_arm(&mut self, cx: &mut Ctx, cpu: CpuId) {
        if self.f.continual {
            self.charge_arm_on(cx, cpu);
        }
    }

    /// [`Eevdf::charge_arm`] with continual charging on.
    #[inline(never)]
    fn charge_arm_on(&mut self, cx: &mut Ctx, cpu: CpuId) {
        let curr = self.rqs[cpu].curr;
        let at = match curr {
            Some(_) if self.update_curr(cpu, cx.now) => {
                cx.resched(cpu);
                None
            }
            Some(c) if self.rqs[cpu].nr_running >= 2 => {
                let dv = self.continual_dv(cpu, c);
                let w = self.se[c].weight as u128;
                // The least run whose charge (`calc_delta_fair`, rounded
                // down) reaches `dv`; at least 1 ns ahead.
                let dt = (dv as u128 * w).div_ceil(fair::NICE_0_LOAD as u128);
                Some(SimTime(
                    cx.now.0 + (dt.min(u64::MAX as u128 / 2) as u64).max(1),
                ))
            }
            _ => None,
        };
        if at == self.rqs[cpu].charge_at {
            return;
        }
        let token = CHARGE_TOKEN + cpu as u64;
        match at {
            Some(at) => cx.arm_timer(at, token),
            None => cx.cancel_timer(token),
        }
        self.rqs[cpu].charge_at = at;
    }

    /// The virtual time `c`, running on `cpu` (charged up to now, others
    /// queued), has to run until `update_curr` reschedules: until its
    /// deadline; with 6.18's rule, until its protection ends and, once
    /// unprotected, until the pick would be another (it is no longer
    /// eligible, or one queued with a deadline no later than its own becomes
    /// eligible); with 6.12's, once unprotected, until it is no longer
    /// eligible (PREEMPT_SHORT). 0: at once.
    fn continual_dv(&self, cpu: CpuId, c: TaskId) -> i64 {
        let se = &self.se[c];
        let v = se.vruntime;
        let mut dv = se.deadline - v;
        let (sum, load) = self.sums(cpu);
        let w = se.weight as i128;
        // Running `x` more: Σwv grows by w·x and c's vruntime by x; c is
        // no longer eligible once `sum + w·x < (v + x)·load`, that is
        // `x·(load − w) > sum − v·load`.
        let ineligible_in = || {
            let gap = sum - v as i128 * load;
            if gap < 0 {
                0
            } else {
                (gap / (load - w).max(1) + 1).min(i64::MAX as i128) as i64
            }
        };
        if self.f.kernel618 {
            if self.is_protected(c) {
                dv = dv.min(se.vprot - v);
            } else {
                dv = dv.min(ineligible_in());
                for (d, _, j) in self.rqs[cpu].tree.iter() {
                    if d > se.deadline || dv == 0 {
                        break;
                    }
                    // `j` becomes eligible once `sum + w·x ≥ v_j·load`.
                    let need = self.se[j].vruntime as i128 * load - sum;
                    let x = if need <= 0 { 0 } else { (need + w - 1) / w };
                    dv = dv.min(x.min(i64::MAX as i128) as i64);
                }
            }
        } else if self.f.preempt_short && !se.protected {
            dv = dv.min(ineligible_in());
        }
        dv.max(0)
    }

    /// The running entity `t` stops: put back (`runnable`), or asleep —
    /// delayed if not eligible (DELAY_DEQUEUE), else off the queue with its
    /// lag saved.
    fn stop_entity(&mut self, cpu: CpuId, t: TaskId, now: SimTime, runnable: bool) {
        let _ = self.update_curr(cpu, now);
        debug_assert_eq!(self.rqs[cpu].curr, Some(t));
        self.se[t].last_run = now;
        if runnable {
            // `put_prev_entity`: back on the queue.
            self.rqs[cpu].curr = None;
            self.queue_put(cpu, t);
            self.rqs[cpu].prev = Some(t);
        } else if self.f.delay_dequeue && !self.eligible(cpu, t) {
            // DELAY_DEQUEUE: it stays queued, competing, until eligible.
            self.rqs[cpu].curr = None;
            self.queue_put(cpu, t);
            self.se[t].delayed = true;
            self.se[t].didx = self.rqs[cpu].delayed.len();
            self.rqs[cpu].delayed.push(t);
            let w = self.se[t].weight;
            self.bal.sub(cpu, w);
        } else {
            self.update_entity_lag(cpu, t);
            self.rqs[cpu].curr = None;
            self.count_out(cpu, t);
            self.leave(cpu, t);
            let w = self.se[t].weight;
            self.bal.sub(cpu, w);
        }
    }

    #[inline]
    fn sync_tick(&mut self, cx: &mut Ctx, cpu: CpuId) {
        let rq = &self.rqs[cpu];
        // Capacity awareness checks for misfits on every busy CPU's tick,
        // and 6.x's balancing runs on it (`Lb6`).
        let watch = rq.curr.is_some() && (self.cap.capacity_aware || self.bal.balance);
        let on = rq.nr_running >= 2 || watch;
        if on != rq.ticking {
            self.ticks_turn(cx.now, cpu, on);
        }
        cx.want_tick(cpu, on);
    }

    /// Ticks stop or start on `cpu` now: charge the running entity so far
    /// under the old rule. (Callers charged it already where the kernel
    /// would act on the result; what is left is the skipped ticks'
    /// renewals.) Out of line: most calls of [`Eevdf::sync_tick`] change
    /// nothing.
    #[cold]
    #[inline(never)]
    fn ticks_turn(&mut self, now: SimTime, cpu: CpuId, on: bool) {
        let _ = self.update_curr(cpu, now);
        self.rqs[cpu].ticking = on;
    }

    /// Reweight `t` on its queue (`reweight_entity`): keep its lag and
    /// relative deadline in real time, scaled by old/new weight.
    fn reweight_queued(&mut self, cx: &mut Ctx, t: TaskId, new_w: u64) {
        let cpu = self.se[t].cpu;
        let now = cx.now;
        let running = self.rqs[cpu].curr == Some(t);
        if running {
            let _ = self.update_curr(cpu, now);
        }
        self.update_entity_lag(cpu, t);
        if running {
            self.rqs[cpu].curr = None;
            self.count_out(cpu, t);
        } else {
            self.tree_remove(cpu, t);
        }
        self.rqs[cpu].nr_running -= 1;
        let old_w = self.se[t].weight;
        {
            let se = &mut self.se[t];
            se.deadline -= se.vruntime;
            se.vlag = (se.vlag as i128 * old_w as i128 / new_w as i128) as i64;
            se.deadline = (se.deadline as i128 * old_w as i128 / new_w as i128) as i64;
            se.rel_deadline = true;
            se.weight = new_w;
            // The kernel's `update_entity_lag` overwrites the stashed
            // protection (6.12's deadline copy, 6.18's `vprot`).
            se.protected = false;
            se.vprot = i64::MIN;
        }
        if !self.se[t].delayed {
            self.bal.sub(cpu, old_w);
            self.bal.add(cpu, new_w);
        }
        self.place_entity(cpu, t, false);
        self.rqs[cpu].nr_running += 1;
        if running {
            self.rqs[cpu].curr = Some(t);
            self.count_in(cpu, t);
        } else {
            self.tree_insert(cpu, t);
        }
    }
}

impl Eevdf {
    /// Utilisation of `cpu` (`cpu_util`): its runqueue's average, the
    /// utilisation of the tasks attached to it whether they run, wait or
    /// sleep (see [`CapAware::cpu_util`]).
    fn cpu_util(&self, cx: &Ctx, cpu: CpuId) -> f64 {
        self.cap.cpu_util(cx, cpu, None)
    }
}

impl FairQueues for Eevdf {
    fn bal(&self) -> &Balancer {
        &self.bal
    }

    fn bal_mut(&mut self) -> &mut Balancer {
        &mut self.bal
    }

    fn for_each_movable(&self, cpu: CpuId, mut f: impl FnMut(TaskId)) {
        for (_, _, t) in self.rqs[cpu].tree.iter() {
            if !self.se[t].delayed {
                f(t);
            }
        }
    }

    fn weight(&self, t: TaskId) -> u64 {
        self.se[t].weight
    }

    fn last_run(&self, t: TaskId) -> SimTime {
        self.se[t].last_run
    }

    /// `detach_task` + `attach_task`: the task leaves `src` with its lag and
    /// relative deadline, is placed on `dst`, and may preempt there.
    fn move_queued(&mut self, cx: &mut Ctx, t: TaskId, src: CpuId, dst: CpuId) {
        let now = cx.now;
        self.detach_charged(cx, src, t);
        let resched = self.update_curr(dst, now);
        self.place_entity(dst, t, false);
        self.attach(dst, t);
        self.cap.est_enqueue(cx, t, dst);
        cx.migrate(t, dst);
        if resched {
            cx.resched(dst);
        } else {
            self.wakeup_preempt(cx, dst, t);
        }
        self.sync_tick(cx, dst);
        self.hrtick_start(cx, dst);
        self.charge_arm(cx, dst);
    }

    fn lb6(&mut self) -> Option<&mut Option<Box<fair::Lb6>>> {
        self.bal.balance.then_some(&mut self.lb6)
    }

    fn lb_cpu_util(&self, cx: &Ctx, cpu: CpuId) -> f64 {
        self.cpu_util(cx, cpu)
    }

    fn lb_task_util(&self, cx: &Ctx, t: TaskId) -> f64 {
        self.cap.task_util(cx, t)
    }
}

impl Scheduler for Eevdf {
    fn name(&self) -> &str {
        &self.name
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        t: TaskId,
        prev: Option<CpuId>,
        flags: EnqFlags,
    ) -> CpuId {
        if let Some(c) = self.se.get(t).filter(|s| s.delayed).map(|s| s.cpu) {
            // Still queued (delayed): it wakes where it is (`ttwu_runnable`).
            if flags == EnqFlags::Wakeup && cx.task(t).affinity.contains(c) && cx.online(c) {
                return c;
            }
            self.finish_delayed(c, t);
            self.sync_tick(cx, c);
            self.hrtick_start(cx, c);
            self.charge_arm(cx, c);
        }
        let aff = &cx.task(t).affinity;
        let prev_ok = prev.filter(|&p| aff.contains(p) && cx.online(p));
        if self.cap.eas && flags == EnqFlags::Wakeup {
            if let Some(c) = self.cap.find_energy_efficient_cpu(cx, t, prev_ok) {
                return c;
            }
        }
        if self.cap.capacity_aware && matches!(flags, EnqFlags::New | EnqFlags::Wakeup) {
            let start = prev_ok.unwrap_or(0);
            if let Some(c) = self
                .cap
                .select_idle_capacity(cx, t, start, &self.bal.idle, |c| self.bal.is_idle(cx, c))
            {
                return c;
            }
        }
        self.bal.place(cx, t, prev_ok, flags)
    }

    fn init(&mut self, cx: &mut Ctx) {
        let who = self.name.clone();
        self.cap.start(cx, &who, self.linux);
    }

    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, flags: EnqFlags) {
        let now = cx.now;
        self.purge_exited(cx, cpu);
        let weight = cx.task(t).weight as u64;
        let custom = cx.task(t).slice_ns;
        let base = self.base_slice;
        {
            let se = self.se_mut(t);
            if !se.seen {
                se.seen = true;
                se.weight = weight;
                se.custom_slice = custom.is_some();
                se.slice = custom.unwrap_or(base);
            } else if !se.on_rq && se.weight != weight {
                // Its weight changed while it was off the queue without a
                // reweight call (a new instance of a program with a nice
                // schedule): scale its lag as `reweight_entity` does.
                se.vlag = (se.vlag as i128 * se.weight as i128 / weight.max(1) as i128) as i64;
                se.weight = weight;
            }
        }
        let first = self.cap.first_seen(cx, t, cpu);
        if self.cap.track && !first {
            self.cap.update(cx, t, cpu, Since::at_enqueue(flags));
        }
        if first && self.cap.track {
            // `post_init_entity_util_avg` on the CPU it was placed on.
            self.cap.post_init(cx, t, cpu, weight, self.bal.load[cpu]);
        }
        self.cap.est_enqueue(cx, t, cpu);
        let resched = self.update_curr(cpu, now);
        let (delayed, on_rq, old) = {
            let se = &self.se[t];
            (se.delayed, se.on_rq, se.cpu)
        };
        if delayed {
            if old == cpu {
                // `requeue_delayed_entity`.
                if self.f.delay_zero {
                    self.update_entity_lag(cpu, t);
                    if self.se[t].vlag > 0 {
                        self.tree_remove(cpu, t);
                        self.rqs[cpu].nr_running -= 1;
                        self.se[t].vlag = 0;
                        self.place_entity(cpu, t, false);
                        self.tree_insert(cpu, t);
                        self.rqs[cpu].nr_running += 1;
                    }
                }
                self.undelay(cpu, t);
                self.se[t].delayed = false;
                let w = self.se[t].weight;
                self.bal.add(cpu, w);
            } else {
                self.finish_delayed(old, t);
                self.sync_tick(cx, old);
                self.place_entity(cpu, t, false);
                self.attach(cpu, t);
            }
        } else if on_rq {
            if old != cpu {
                // Moved while queued or preempted (a migration).
                self.detach_charged(cx, old, t);
                self.place_entity(cpu, t, false);
                self.attach(cpu, t);
            }
            // Else: put back by `stopping`, already queued.
        } else {
            self.place_entity(cpu, t, flags == EnqFlags::New);
            self.attach(cpu, t);
        }
        if delayed && old != cpu {
            self.hrtick_start(cx, old);
            self.charge_arm(cx, old);
        }
        // `hrtick_update` at the end of `enqueue_task_fair`, before the
        // wake-up preemption check.
        self.hrtick_start(cx, cpu);
        if resched {
            cx.resched(cpu);
        } else if matches!(flags, EnqFlags::New | EnqFlags::Wakeup) {
            self.wakeup_preempt(cx, cpu, t);
        }
        self.sync_tick(cx, cpu);
        self.charge_arm(cx, cpu);
    }

    fn dequeue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        let Some(se) = self.se.get(t) else { return };
        if se.on_rq && !se.delayed && self.rqs[se.cpu].curr != Some(t) {
            let c = se.cpu;
            self.detach_charged(cx, c, t);
        }
        self.sync_tick(cx, cpu);
        self.hrtick_start(cx, cpu);
        self.charge_arm(cx, cpu);
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        self.purge_exited(cx, cpu);
        let prev = self.rqs[cpu].prev;
        let picked = self.pick_entity(cpu, cx.now);
        match picked {
            Some(t) if self.cap.track => self.cap.update(cx, t, cpu, Since::Waited),
            Some(_) => {}
            None => self.cap.cpu_idle(cx, cpu),
        }
        self.sync_tick(cx, cpu);
        // `__schedule` clears the slice-end timer; a switch to another task
        // arms it again (`__set_next_task_fair`), a task picked again runs on
        // without one.
        self.hrtick_clear(cx, cpu);
        if picked.is_some() && picked != prev {
            self.hrtick_start(cx, cpu);
        }
        self.charge_arm(cx, cpu);
        picked
    }

    fn balance(&mut self, cx: &mut Ctx, cpu: CpuId) {
        fair::newidle_balance(self, cx, cpu);
    }

    fn read_ahead(&self, t: Option<TaskId>, _cpu: Option<CpuId>) -> Option<TaskId> {
        // The event's task: its entity and its load record. (Guessing the
        // CPU's next pick as well, by a scan like the pick's, cost the
        // standard scenario 4.6 % and gained 2 % on the large one.)
        if let Some(t) = t {
            if let Some(se) = self.se.get(t) {
                crate::prefetch::lines(se, std::mem::size_of::<Se>());
            }
            self.cap.read_ahead(t);
        }
        None
    }

    fn task_load(&self, t: TaskId) -> Option<super::TaskLoad> {
        self.cap.task_load(t)
    }

    fn running(&mut self, cx: &mut Ctx, _t: TaskId, cpu: CpuId) {
        self.bal.touch(cpu); // busy now: `idlest` re-keys it
        self.cap.cpu_run(cx, cpu);
    }

    fn stopping(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, runnable: bool) {
        self.bal.touch(cpu);
        if runnable {
            if self.cap.track {
                self.cap.update(cx, t, cpu, Since::Ran);
            }
        } else {
            self.cap.sleep(cx, t, cpu);
        }
        self.stop_entity(cpu, t, cx.now, runnable);
        self.sync_tick(cx, cpu);
        self.hrtick_clear(cx, cpu);
        self.charge_arm(cx, cpu);
    }

    /// The slice-end timer (HRTICK) fired: `hrtick` calls the class's tick
    /// with `queued` set, which charges the running entity and reschedules
    /// (`entity_tick`: "queued ticks are scheduled to match the slice").
    fn on_timer(&mut self, cx: &mut Ctx, token: u64) {
        if let Some(cpu) = token
            .checked_sub(CHARGE_TOKEN)
            .map(|c| c as usize)
            .filter(|&c| c < self.rqs.len())
        {
            // Continual charging: the moment `update_curr` reschedules.
            self.rqs[cpu].charge_at = None;
            self.charge_arm(cx, cpu);
            return;
        }
        let Some(cpu) = token
            .checked_sub(HRTICK_TOKEN)
            .map(|c| c as usize)
            .filter(|&c| c < self.rqs.len())
        else {
            return;
        };
        self.rqs[cpu].hrtick_at = None;
        if self.rqs[cpu].curr.is_none() {
            return;
        }
        let _ = self.update_curr(cpu, cx.now);
        // Alone on the CPU, the kernel's reschedule picks the same task.
        if self.rqs[cpu].nr_running > 1 {
            cx.resched(cpu);
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: CpuId, t: TaskId) {
        if self.rqs[cpu].curr != Some(t) {
            return;
        }
        if self.cap.track {
            self.cap.update(cx, t, cpu, Since::Ran);
        }
        if self.cap.capacity_aware {
            // Misfit: the task no longer fits this CPU.
            let dst = self
                .cap
                .misfit_target(cx, t, cpu, &self.bal.idle, |c| self.bal.is_idle(cx, c));
            if let Some(dst) = dst {
                cx.migrate(t, dst);
                return;
            }
        }
        if self.update_curr(cpu, cx.now) {
            cx.resched(cpu);
        }
        if self.bal.balance {
            fair::tick_balance(self, cx, cpu);
        }
        self.charge_arm(cx, cpu);
    }

    /// An exited task still delayed on a queue leaves it at that CPU's next
    /// pick or enqueue (`purge_exited`), as before this hook existed.
    fn task_dead(&mut self, cx: &mut Ctx, t: TaskId) {
        self.cap.task_dead(cx, t);
        if let Some(se) = self.se.get(t).filter(|se| se.delayed && se.on_rq) {
            let cpu = se.cpu;
            self.rqs[cpu].dead += 1;
        }
    }

    fn reweight(&mut self, cx: &mut Ctx, t: TaskId, _old: u32) {
        if t >= self.se.len() || !self.se[t].seen {
            return;
        }
        let new_w = (cx.task(t).weight as u64).max(1);
        let old_w = self.se[t].weight;
        if new_w == old_w {
            return;
        }
        if self.se[t].on_rq {
            self.reweight_queued(cx, t, new_w);
            let cpu = self.se[t].cpu;
            self.charge_arm(cx, cpu);
        } else {
            let se = &mut self.se[t];
            se.vlag = (se.vlag as i128 * old_w as i128 / new_w as i128) as i64;
            se.weight = new_w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bare scheduler on a uniform machine of `n` CPUs (for the arithmetic
    /// of one runqueue; the engine is not involved).
    fn bare(n: usize) -> Eevdf {
        let text = format!(
            "duration_s = 1\n[machine.types.c]\ncapacity = 1024\n[[machine.clusters]]\ntype = \"c\"\ncores = {n}\n"
        );
        let scn = crate::scenario::parse(&text, "t", crate::scenario::Format::Toml, &[]).unwrap();
        let m = scn.build(None, vec![]).unwrap().machine;
        Eevdf::from_params(&super::super::parse_spec("eevdf").unwrap(), &m).unwrap()
    }

    /// Queue an entity directly on cpu 0's tree.
    fn put(s: &mut Eevdf, t: TaskId, v: i64, w: u64, deadline: i64) {
        let base = s.base_slice;
        let se = s.se_mut(t);
        se.seen = true;
        se.vruntime = v;
        se.weight = w;
        se.deadline = deadline;
        se.slice = base;
        s.attach(0, t);
    }

    #[test]
    fn base_slice_scales_with_log2_of_the_cpus() {
        // 0.75 ms × (1 + ilog2(min(n, 8))): 1 → 0.75, 2 → 1.5, 4 → 2.25,
        // 8 and more → 3 ms.
        assert_eq!(bare(1).base_slice(), 750_000);
        assert_eq!(bare(2).base_slice(), 1_500_000);
        assert_eq!(bare(4).base_slice(), 2_250_000);
        assert_eq!(bare(16).base_slice(), 3_000_000);
    }

    #[test]
    fn average_vruntime_is_the_weighted_floor_and_eligibility_is_exact() {
        let mut s = bare(1);
        // v = 0 (w 1024) and v = 3000 (w 335, nice 5):
        // V = (0·1024 + 3000·335) / 1359 = 1_005_000 / 1359 = 739.51… → 739.
        put(&mut s, 0, 0, 1024, 10);
        put(&mut s, 1, 3000, 335, 20);
        assert_eq!(s.avg_vruntime(0), 739);
        // Eligible: v ≤ V exactly, Σwv ≥ v·Σw: 739·1359 = 1_004_301 ≤
        // 1_005_000, 740·1359 = 1_005_660 > 1_005_000.
        assert!(s.vruntime_eligible(0, 739));
        assert!(!s.vruntime_eligible(0, 740));
        assert!(s.eligible(0, 0));
        assert!(!s.eligible(0, 1));
        // Negative sums floor downwards, as the kernel's `avg -= load - 1`:
        // v = −1 (w 1024) and v = 0 (w 1024): V = ⌊−1024 / 2048⌋ = −1.
        let mut s = bare(1);
        put(&mut s, 0, -1, 1024, 0);
        put(&mut s, 1, 0, 1024, 0);
        assert_eq!(s.avg_vruntime(0), -1);
    }

    #[test]
    fn pick_is_the_eligible_entity_with_the_earliest_deadline() {
        let mut s = bare(1);
        // Three nice-0 entities, V = (0 + 600 + 1200) / 3 = 600.
        // Task 2 has the earliest deadline but v = 1200 > V: not eligible.
        // Tasks 0 (v 0, d 3000) and 1 (v 600, d 2000) are: 1 wins.
        put(&mut s, 0, 0, 1024, 3000);
        put(&mut s, 1, 600, 1024, 2000);
        put(&mut s, 2, 1200, 1024, 1500);
        assert_eq!(s.avg_vruntime(0), 600);
        assert_eq!(s.pick_eevdf(0, None), Some(1));
        // Equal deadlines: the one queued first.
        let mut s = bare(1);
        put(&mut s, 5, 0, 1024, 100);
        put(&mut s, 3, 0, 1024, 100);
        assert_eq!(s.pick_eevdf(0, None), Some(5));
    }

    #[test]
    fn run_to_parity_keeps_a_protected_eligible_entity() {
        let mut s = bare(1);
        // Entity 0 ran (was put back, protected) with v 0, d 5000; entity 1
        // has d 1000 and v 0: V = 0, both eligible. With RUN_TO_PARITY 0
        // keeps the CPU; without it 1's earlier deadline wins.
        put(&mut s, 0, 0, 1024, 5000);
        put(&mut s, 1, 0, 1024, 1000);
        s.se[0].protected = true;
        assert_eq!(s.pick_eevdf(0, Some(0)), Some(0));
        s.f.run_to_parity = false;
        assert_eq!(s.pick_eevdf(0, Some(0)), Some(1));
    }

    #[test]
    fn placement_scales_the_lag_by_the_load_it_joins() {
        // Base slice 0.75 ms.
        let mut s = bare(1);
        // A queue with one nice-0 entity at v = 10_000 (V = 10_000), and a
        // nice-0 task coming back with vlag = +300 (it was owed time):
        // lag = 300 × (1024 + 1024) / 1024 = 600, v = 10_000 − 600 = 9_400,
        // and then V = (10_000 + 9_400) / 2 = 9_700 = v + 300: its lag is
        // exactly what it was.
        put(&mut s, 0, 10_000, 1024, 20_000);
        let se = s.se_mut(1);
        se.seen = true;
        se.weight = 1024;
        se.vlag = 300;
        s.place_entity(0, 1, false);
        assert_eq!(s.se[1].vruntime, 9_400);
        // Deadline: v + 0.75 ms × 1024/1024.
        assert_eq!(s.se[1].deadline, 9_400 + 750_000);
        s.attach(0, 1);
        assert_eq!(s.avg_vruntime(0) - s.se[1].vruntime, 300);
        // Negative lag −300 for a nice-5 task (w 335) joining load 2048:
        // lag = −300 × (2048 + 335) / 2048 = −349.07… → −349 (truncated
        // toward zero), v = V − lag = 9_700 + 349 = 10_049; deadline
        // v + 750_000 × 1024 / 335 = 10_049 + 2_292_537.
        let se = s.se_mut(2);
        se.seen = true;
        se.weight = 335;
        se.vlag = -300;
        s.place_entity(0, 2, false);
        assert_eq!(s.se[2].vruntime, 10_049);
        assert_eq!(s.se[2].deadline, 10_049 + 2_292_537);
        // A new task: lag 0, half a slice (PLACE_DEADLINE_INITIAL).
        let se = s.se_mut(3);
        se.seen = true;
        se.weight = 1024;
        s.place_entity(0, 3, true);
        assert_eq!(s.se[3].vruntime, 9_700);
        assert_eq!(s.se[3].deadline, 9_700 + 375_000);
    }

    #[test]
    fn lag_is_clamped_to_twice_the_slice() {
        let mut s = bare(1);
        // One entity far behind V: lag limit = calc_delta_fair(max(2 ×
        // 0.75 ms, tick 4 ms)) = 4_000_000 for nice 0.
        put(&mut s, 0, 0, 1024, 0);
        put(&mut s, 1, 100_000_000, 1024, 0);
        s.update_entity_lag(0, 0);
        assert_eq!(s.se[0].vlag, 4_000_000);
        s.update_entity_lag(0, 1);
        assert_eq!(s.se[1].vlag, -4_000_000);
    }

    #[test]
    fn delayed_entity_leaves_with_its_positive_lag_cleared() {
        let mut s = bare(1);
        // A delayed entity (v 0) and a nice-0 one at 1000: V = 500, the
        // delayed one is eligible with lag +500; DELAY_ZERO drops it.
        put(&mut s, 0, 0, 1024, 10);
        put(&mut s, 1, 1000, 1024, 20);
        s.se[0].delayed = true;
        s.rqs[0].delayed.push(0);
        s.finish_delayed(0, 0);
        assert_eq!(s.se[0].vlag, 0);
        assert!(!s.se[0].on_rq);
        assert_eq!(s.rqs[0].nr_running, 1);
        // Without DELAY_ZERO the lag stays.
        let mut s = bare(1);
        s.f.delay_zero = false;
        put(&mut s, 0, 0, 1024, 10);
        put(&mut s, 1, 1000, 1024, 20);
        s.se[0].delayed = true;
        s.finish_delayed(0, 0);
        assert_eq!(s.se[0].vlag, 500);
    }

    #[test]
    fn a_sleeper_with_negative_lag_stays_queued_until_eligible() {
        // Slice 0.75 ms, tick 4 ms.
        let mut s = bare(1);
        // Spinner 0 queued at v = 0 (deadline 0.75 ms); task 1 running at
        // v = 1 ms (deadline 2 ms): V = 0.5 ms, task 1 is 0.5 ms past it.
        put(&mut s, 0, 0, 1024, 750_000);
        put(&mut s, 1, 1_000_000, 1024, 2_000_000);
        s.queue_take(0, 1);
        s.rqs[0].curr = Some(1);
        s.rqs[0].ticking = true;
        s.se[1].exec_start = SimTime(0);
        // It sleeps: not eligible, so it is delayed, still counted in V.
        s.stop_entity(0, 1, SimTime(0), false);
        assert!(s.se[1].delayed && s.se[1].on_rq);
        assert_eq!(s.rqs[0].nr_running, 2);
        assert_eq!(s.avg_vruntime(0), 500_000);
        // The pick: V = 0.5 ms, only 0 is eligible: it runs.
        assert_eq!(s.pick_entity(0, SimTime(0)), Some(0));
        // 0 runs 0.4 ms: V = (0.4 + 1) / 2 = 0.7 ms < 1 ms, 1 still not
        // eligible; 0 stops (preempted) and is picked again.
        s.stop_entity(0, 0, SimTime(400_000), true);
        assert_eq!(s.pick_entity(0, SimTime(400_000)), Some(0));
        assert!(s.se[1].delayed);
        // 0 runs to 1.2 ms: v0 = 1.2 ms is past its deadline, which becomes
        // 1.2 + 0.75 = 1.95 ms. V = (1.2 + 1) / 2 = 1.1 ms: 0 is no longer
        // eligible, 1 (v 1 ms) is, and it is the eligible one with the
        // earliest deadline (2 ms; 0's 1.95 ms does not count): it is
        // picked, and being asleep it leaves the queue, with lag
        // V − v = 0.1 ms cleared by DELAY_ZERO. 0 runs.
        s.stop_entity(0, 0, SimTime(1_200_000), true);
        assert_eq!(s.se[0].deadline, 1_950_000);
        assert_eq!(s.pick_entity(0, SimTime(1_200_000)), Some(0));
        assert!(!s.se[1].delayed && !s.se[1].on_rq);
        assert_eq!(s.se[1].vlag, 0);
        assert_eq!(s.rqs[0].nr_running, 1);
        assert!(s.rqs[0].delayed.is_empty());
    }

    /// [`bare`] with a policy spec (`eevdf[...]`).
    fn bare_with(n: usize, spec: &str) -> Eevdf {
        let text = format!(
            "duration_s = 1\n[machine.types.c]\ncapacity = 1024\n[[machine.clusters]]\ntype = \"c\"\ncores = {n}\n"
        );
        let scn = crate::scenario::parse(&text, "t", crate::scenario::Format::Toml, &[]).unwrap();
        let m = scn.build(None, vec![]).unwrap().machine;
        Eevdf::from_params(&super::super::parse_spec(spec).unwrap(), &m).unwrap()
    }

    /// Make queued `t` the running entity of cpu 0 since `at`.
    fn run(s: &mut Eevdf, t: TaskId, at: u64) {
        s.queue_take(0, t);
        s.rqs[0].curr = Some(t);
        s.se[t].exec_start = SimTime(at);
    }

    #[test]
    fn kernel_618_base_slice_is_0_7_ms_scaled() {
        // 0.7 ms × (1 + ilog2(min(n, 8))) since 6.15: 1 → 0.7, 2 → 1.4,
        // 16 → 2.8 ms; the unscaled 0.7 ms is the quantum without
        // RUN_TO_PARITY.
        assert_eq!(bare_with(1, "eevdf[kernel=6.18]").base_slice(), 700_000);
        let s = bare_with(2, "eevdf[kernel=6.18]");
        assert_eq!(s.base_slice(), 1_400_000);
        assert_eq!(s.normal_slice, 700_000);
        assert_eq!(bare_with(16, "eevdf[kernel=6.18]").base_slice(), 2_800_000);
        // An explicit base slice still wins.
        assert_eq!(
            bare_with(2, "eevdf[kernel=6.18,base_slice_ms=3]").base_slice(),
            3_000_000
        );
        for bad in ["eevdf[kernel=6.6]", "eevdf[charge=often]"] {
            let text = "duration_s = 1\n[machine.types.c]\ncapacity = 1024\n[[machine.clusters]]\ntype = \"c\"\ncores = 1\n";
            let scn =
                crate::scenario::parse(text, "t", crate::scenario::Format::Toml, &[]).unwrap();
            let m = scn.build(None, vec![]).unwrap().machine;
            let e = Eevdf::from_params(&super::super::parse_spec(bad).unwrap(), &m)
                .err()
                .unwrap();
            assert!(e.contains("is not allowed; allowed:"), "{e}");
        }
    }

    #[test]
    fn kernel_618_reschedules_at_every_charge_past_the_protection() {
        // Running 1 (v 0, d 1.4 ms) beside queued 0 (v 1 ms, d 2.4 ms), all
        // nice 0. Picked, 1 is protected up to its deadline (equal slices).
        for spec in ["eevdf[kernel=6.18]", "eevdf"] {
            let mut s = bare_with(1, spec);
            put(&mut s, 0, 1_000_000, 1024, 2_400_000);
            put(&mut s, 1, 0, 1024, 1_400_000);
            run(&mut s, 1, 0);
            s.set_protect(0, 1);
            // 0.3 ms later: v = 0.3 ms, V = 0.65 ms, still eligible and
            // protected: no reschedule under either rule.
            assert!(!s.update_curr(0, SimTime(300_000)));
            // Its protection lifted (a waking task with a shorter slice),
            // 0.1 ms more: v = 0.4 ms, V = 0.7 ms, still eligible. 6.18
            // reschedules (the pick decides: 1 again, as it is eligible with
            // the earlier deadline); 6.12 waits until it is not eligible.
            s.cancel_protect(1);
            assert!(s.se[1].vprot <= 300_000);
            let resched = s.update_curr(0, SimTime(400_000));
            assert_eq!(resched, spec == "eevdf[kernel=6.18]", "{spec}");
            assert_eq!(s.pick_eevdf(0, Some(1)), Some(1));
        }
    }

    #[test]
    fn kernel_618_protects_up_to_the_shortest_queued_slice() {
        let mut s = bare_with(1, "eevdf[kernel=6.18]");
        // Queued 0 with a custom slice of 0.1 ms; 1 (slice 0.7 ms, v 0,
        // d 0.7 ms) is picked: protected up to v + 0.1 ms, not its deadline.
        put(&mut s, 0, 0, 1024, 100_000);
        put(&mut s, 1, 0, 1024, 700_000);
        s.se[0].slice = 100_000;
        s.se[0].custom_slice = true;
        // (Requeue 0 so that the queue counts its slice.)
        s.queue_take(0, 0);
        s.queue_put(0, 0);
        assert_eq!(s.min_slice(0, None), 100_000);
        run(&mut s, 1, 0);
        s.set_protect(0, 1);
        assert_eq!(s.se[1].vprot, 100_000);
        assert!(s.is_protected(1));
        // 0.1 ms later its protection has ended.
        s.se[1].vruntime = 100_000;
        assert!(!s.is_protected(1));
        // Alone with equal slices, up to the deadline.
        let mut s = bare_with(1, "eevdf[kernel=6.18]");
        put(&mut s, 1, 0, 1024, 700_000);
        run(&mut s, 1, 0);
        s.set_protect(0, 1);
        assert_eq!(s.se[1].vprot, 700_000);
        // Without RUN_TO_PARITY, the unscaled base slice (0.7 ms on 1 CPU:
        // the same here) bounds a longer custom slice: 5 ms → 0.7 ms.
        let mut s = bare_with(1, "eevdf[kernel=6.18,run_to_parity=false]");
        put(&mut s, 1, 0, 1024, 5_000_000);
        s.se[1].slice = 5_000_000;
        run(&mut s, 1, 0);
        s.set_protect(0, 1);
        assert_eq!(s.se[1].vprot, 700_000);
    }

    #[test]
    fn kernel_618_pick_can_ignore_the_protection() {
        // Running 0 (v 0, d 1.4 ms, protected) and woken 1 (v 0, d 0.1 ms):
        // the protected pick keeps 0; the pick without protection (a
        // waking task with a shorter slice) takes 1.
        let mut s = bare_with(1, "eevdf[kernel=6.18]");
        put(&mut s, 0, 0, 1024, 1_400_000);
        run(&mut s, 0, 0);
        s.set_protect(0, 0);
        put(&mut s, 1, 0, 1024, 100_000);
        assert_eq!(s.pick_eevdf_p(0, Some(0), true), Some(0));
        assert_eq!(s.pick_eevdf_p(0, Some(0), false), Some(1));
    }

    #[test]
    fn continual_charging_renews_the_deadline_by_whole_slices() {
        // Alone, slice 0.7 ms, deadline 0.7 ms, charged at 2.5 ms in one
        // step: the deadline passed at 0.7, 1.4 and 2.1 ms and each time
        // moved by a slice: 2.8 ms (tick-driven renewal would give v + slice
        // at the tick that saw it).
        let mut s = bare_with(1, "eevdf[kernel=6.18,charge=continual]");
        put(&mut s, 0, 0, 1024, 700_000);
        run(&mut s, 0, 0);
        assert!(!s.update_curr(0, SimTime(2_500_000)));
        assert_eq!(s.se[0].vruntime, 2_500_000);
        assert_eq!(s.se[0].deadline, 2_800_000);
    }

    #[test]
    fn continual_charging_preempts_the_moment_the_woken_one_is_owed_the_cpu() {
        // The sleeper case: spinner 0 running at v = 10 ms with 0.5 ms of
        // its slice left (d 10.5 ms), unprotected (its protection ended
        // slices ago); sleeper 1 wakes with lag 0: v = V = 10 ms,
        // d = 11.4 ms. Both eligible, 0's deadline earlier: the wake-up
        // does not preempt, but 1 ns more makes 0 not eligible (V rises by
        // half of what 0 gains): update_curr reschedules then, under both
        // rules.
        for spec in [
            "eevdf[kernel=6.18,charge=continual]",
            "eevdf[charge=continual]",
        ] {
            let mut s = bare_with(2, spec);
            put(&mut s, 0, 10_000_000, 1024, 10_500_000);
            run(&mut s, 0, 0);
            s.se[0].vprot = 9_000_000;
            s.se[0].protected = false;
            put(&mut s, 1, 10_000_000, 1024, 11_400_000);
            assert_eq!(s.pick_eevdf(0, Some(0)), Some(0), "{spec}");
            assert_eq!(s.continual_dv(0, 0), 1, "{spec}");
            // Protected (picked since), it would run to its deadline: 0.5 ms.
            s.se[0].vprot = 10_500_000;
            s.se[0].protected = true;
            assert_eq!(s.continual_dv(0, 0), 500_000, "{spec}");
        }
    }

    #[test]
    fn continual_charging_under_618_also_waits_for_an_earlier_deadline_to_become_eligible() {
        // Running 0 (v 0, d 2 ms, unprotected) and queued 1 (v 0.6 ms,
        // d 1.5 ms), nice 0: V = 0.3 ms, 1 not eligible. After x more of
        // 0: Σwv = 1024 (0.6 ms + x), Σw = 2048. 1 becomes eligible once
        // 1024 (0.6 ms + x) ≥ 0.6 ms × 2048, x = 0.6 ms, and with the
        // earlier deadline it is then the pick: 6.18 reschedules at
        // 0.6 ms. 0 itself stops being eligible once x × 2048 >
        // 1024 (0.6 ms + x), x = 0.6 ms + 1 ns: 6.12's PREEMPT_SHORT rule.
        for (spec, want) in [
            ("eevdf[kernel=6.18,charge=continual]", 600_000),
            ("eevdf[charge=continual]", 600_001),
        ] {
            let mut s = bare_with(1, spec);
            put(&mut s, 0, 0, 1024, 2_000_000);
            run(&mut s, 0, 0);
            s.se[0].vprot = i64::MIN;
            s.se[0].protected = false;
            put(&mut s, 1, 600_000, 1024, 1_500_000);
            assert_eq!(s.continual_dv(0, 0), want, "{spec}");
        }
    }

    #[test]
    fn skipped_ticks_renew_the_deadline_where_ticks_would() {
        // Slice 0.75 ms, tick 4 ms.
        let mut s = bare(1);
        put(&mut s, 0, 0, 1024, 750_000);
        s.queue_take(0, 0);
        s.rqs[0].curr = Some(0);
        s.se[0].exec_start = SimTime(0);
        // Alone, no ticks asked for. Charged at 9 ms: the ticks at 4 and 8 ms
        // each find the deadline passed (4.75 ms, then 8.75 ms); the charge
        // at 9 ms is an update_curr too: v = 9 ms ≥ 8.75 ms renews it to
        // 9.75 ms.
        assert!(!s.update_curr(0, SimTime(9_000_000)));
        assert_eq!(s.se[0].vruntime, 9_000_000);
        assert_eq!(s.se[0].deadline, 9_750_000);
        // From 9 ms to 11.5 ms: no tick boundary (next at 12 ms), one
        // charge: v = 11.5 ms ≥ 9.75 ms, deadline 12.25 ms.
        assert!(!s.update_curr(0, SimTime(11_500_000)));
        assert_eq!(s.se[0].deadline, 12_250_000);
    }
}
