//! Load tracking and what it drives, shared by `cfs` (and its
//! `capacity-aware` and `eas` entries) and `eevdf`:
//!
//! * PELT utilisation per task (`util_avg`, [`super::pelt`]): a geometric
//!   average with a 32-period half-life (periods of 1024 × 1024 ns) of the
//!   capacity the task used, 1024 = the biggest CPU at its highest P-state
//!   (capacity and frequency invariant), in the kernel's integer steps;
//! * **util_est** (kernel/sched/fair.c of Linux 6.x, `util_est_update`,
//!   `util_est_enqueue`/`util_est_dequeue`, `task_util_est`, `cpu_util`): at
//!   each dequeue for sleep the task's EWMA is updated with its `util_avg`
//!   (weight 1/4, `UTIL_EST_WEIGHT_SHIFT` = 2; set to `util_avg` when that is
//!   higher; left alone within `UTIL_EST_MARGIN` = 1024/100); it is kept
//!   across sleeps, a runqueue sums the EWMAs of its enqueued tasks, a task
//!   counts as `max(util_avg, ewma)` and a CPU as `max(Σ util_avg, Σ ewma)`
//!   for placement, misfit, EAS and schedutil;
//! * capacity awareness (`fits_capacity`: utilisation × 1.25 < capacity,
//!   `select_idle_capacity`, misfit detection and migration);
//! * Energy Aware Scheduling (`find_energy_efficient_cpu`, `em_cpu_energy`,
//!   off while a CPU is over-utilised, 80 %), with the kernel's gating: an
//!   energy model, asymmetric CPU capacities and the `schedutil` governor
//!   (`sched_energy_enabled`, `build_perf_domains`).
//!
//! * **uclamp** (kernel/sched/core.c of Linux 6.x, `uclamp_rq_inc`,
//!   `uclamp_rq_dec`, `uclamp_rq_max_value`, `uclamp_idle_value`; fair.c's
//!   `util_fits_cpu`; `effective_cpu_util` and `sugov_effective_cpu_perf`):
//!   a task's clamps (its program's `uclamp_min`/`uclamp_max`) count on the
//!   runqueue it is enqueued on, in one of `UCLAMP_BUCKETS` = 5 buckets per
//!   clamp; a runqueue's clamp is the value of its highest non-empty bucket
//!   (a bucket keeps the highest value it saw until it empties), and with
//!   no runnable task the minimum falls to 0 while the maximum keeps the
//!   last task's (`UCLAMP_FLAG_IDLE`). The clamps reach `schedutil` through
//!   the run's channel and the fit checks of placement, misfit, EAS and
//!   over-utilisation through `util_fits_cpu`. As in the kernel, uclamp is
//!   off until a task with clamps is first enqueued (`sched_uclamp_used`).
//!
//! A scheduler keeps its own runqueues and calls this module's hooks at
//! enqueue, pick, stop and tick; see `cfs.rs` and `eevdf.rs`.
//!
//! The `schedutil` governor reads a runqueue's util_est sum through the
//! engine's per-run channel: with util_est and `schedutil`, the scheduler
//! publishes each CPU's sum whenever it changes
//! ([`Ctx::set_cpu_util_est`]) and the governor reads it at its samples
//! ([`Ctx::cpu_util_est`]). The scheduler learns that the governor is
//! `schedutil` from [`Ctx::governor_is_schedutil`]; a VM's guest scheduler
//! sees no host governor (as a Linux guest does not).

use super::super::Ctx;
use super::pelt::{Pelt, PeltClock, SATURATED_SUM};
use super::CpuBits;
use crate::hw::{CpuId, Machine};
use crate::os::TaskId;

/// A CPU is over-utilised above this fraction of its capacity; EAS is off
/// while any CPU is (the kernel's `cpu_overutilized`, 80%).
pub(in crate::policy) const OVERUTIL: f64 = 0.8;
/// A task fits a CPU when its utilisation × 1.25 is below the capacity
/// (the kernel's `fits_capacity`, a 20% margin).
pub(in crate::policy) const FIT_MARGIN: f64 = 1.25;
/// `UTIL_EST_MARGIN` = `SCHED_CAPACITY_SCALE / 100`: an EWMA within this of
/// the dequeued utilisation is not updated.
pub(in crate::policy) const UTIL_EST_MARGIN: u32 = 1024 / 100;
/// `UTIL_EST_WEIGHT_SHIFT`: new samples weigh 1/4 in the EWMA.
pub(in crate::policy) const UTIL_EST_WEIGHT_SHIFT: u32 = 2;
/// A new task's utilisation in `cfs`'s entries: half the scale
/// (`post_init_entity_util_avg` on an idle CPU of the full scale). `eevdf`
/// follows the kernel instead (see [`CapAware::post_init`]).
pub(in crate::policy) const NEW_TASK_UTIL: f64 = 512.0;

/// `UCLAMP_BUCKETS`: the default of `CONFIG_UCLAMP_BUCKETS_COUNT`.
pub(in crate::policy) const UCLAMP_BUCKETS: usize = 5;
/// `UCLAMP_BUCKET_DELTA` = `DIV_ROUND_CLOSEST(1024, UCLAMP_BUCKETS)` = 205.
pub(in crate::policy) const UCLAMP_BUCKET_DELTA: u32 =
    (1024 + UCLAMP_BUCKETS as u32 / 2) / UCLAMP_BUCKETS as u32;
/// `SCHED_CAPACITY_SCALE`: the capacity of the biggest CPU, and a clamp's
/// highest value.
pub(in crate::policy) const CAPACITY_SCALE: u32 = 1024;
/// Index of the minimum and the maximum clamp (`UCLAMP_MIN`, `UCLAMP_MAX`).
const UC_MIN: usize = 0;
const UC_MAX: usize = 1;

/// `uclamp_bucket_id`.
fn uclamp_bucket_id(v: u32) -> usize {
    ((v / UCLAMP_BUCKET_DELTA) as usize).min(UCLAMP_BUCKETS - 1)
}

/// One runqueue's clamp aggregation (`struct uclamp_rq` for both clamps and
/// `rq->uclamp_flags`).
#[derive(Clone, Debug)]
pub(in crate::policy) struct UclampRq {
    /// Per clamp, per bucket: (runnable tasks counted, the highest value).
    bucket: [[(u32, u32); UCLAMP_BUCKETS]; 2],
    /// Per clamp: the runqueue's value (`uclamp_rq_get`).
    value: [u32; 2],
    /// `UCLAMP_FLAG_IDLE`: no runnable task; the maximum is the last one's.
    idle: bool,
}

impl Default for UclampRq {
    /// `init_uclamp_rq`: minimum 0, maximum 1024, idle.
    fn default() -> Self {
        UclampRq {
            bucket: [[(0, 0); UCLAMP_BUCKETS]; 2],
            value: [0, CAPACITY_SCALE],
            idle: true,
        }
    }
}

impl UclampRq {
    /// `uclamp_rq_inc`: a task with effective clamps `v` becomes runnable.
    pub(in crate::policy) fn inc(&mut self, v: [u32; 2]) {
        for (id, &cv) in v.iter().enumerate() {
            let b = &mut self.bucket[id][uclamp_bucket_id(cv)];
            b.0 += 1;
            // `uclamp_idle_reset`: the first runnable task sets the value.
            if self.idle {
                self.value[id] = cv;
            }
            if b.0 == 1 || cv > b.1 {
                b.1 = cv;
            }
            if cv > self.value[id] {
                self.value[id] = cv;
            }
        }
        self.idle = false;
    }

    /// `uclamp_rq_dec`: a task counted with clamps `v` leaves.
    pub(in crate::policy) fn dec(&mut self, v: [u32; 2]) {
        for (id, &cv) in v.iter().enumerate() {
            let bid = uclamp_bucket_id(cv);
            let b = &mut self.bucket[id][bid];
            b.0 = b.0.saturating_sub(1);
            if b.0 > 0 {
                continue; // a bucket keeps its value while it has tasks
            }
            if b.1 >= self.value[id] {
                self.value[id] = self.max_value(id, cv);
            }
        }
    }

    /// `uclamp_rq_max_value`: the value of the highest non-empty bucket;
    /// with none, `uclamp_idle_value` (the maximum keeps `last`, the
    /// leaving task's value, and the runqueue becomes idle; the minimum is 0).
    fn max_value(&mut self, id: usize, last: u32) -> u32 {
        if let Some(b) = self.bucket[id].iter().rev().find(|b| b.0 > 0) {
            return b.1;
        }
        if id == UC_MAX {
            self.idle = true;
            last
        } else {
            0
        }
    }

    /// The runqueue's (minimum, maximum).
    pub(in crate::policy) fn get(&self) -> (u32, u32) {
        (self.value[UC_MIN], self.value[UC_MAX])
    }

    /// `uclamp_rq_is_idle`.
    pub(in crate::policy) fn is_idle(&self) -> bool {
        self.idle
    }
}

/// `util_fits_cpu` (fair.c): whether utilisation `util` with clamps
/// `(umin, umax)` fits a CPU whose capacity for the fit check is `cap`
/// (`capacity_of`) and whose original capacity is `orig`
/// (`arch_scale_cpu_capacity`, and `get_actual_cpu_capacity` without
/// thermal pressure). 1: fits; 0: does not; −1: fits but for the minimum
/// clamp, above `orig`. Without uclamp (`used` false) only the utilisation
/// counts (`fits_capacity`).
pub(in crate::policy) fn util_fits_cpu(
    util: f64,
    umin: u32,
    umax: u32,
    cap: f64,
    orig: u32,
    used: bool,
) -> i32 {
    let mut fits = util * FIT_MARGIN < cap;
    if !used {
        return fits as i32;
    }
    // A maximum clamp at or below the original capacity fits, except the
    // no-clamp case on a CPU of the full scale.
    let max_fits = !(orig == CAPACITY_SCALE && umax == CAPACITY_SCALE) && umax <= orig;
    fits = fits || max_fits;
    let umin = umin.min(umax);
    if fits && util < umin as f64 && umin > orig {
        return -1;
    }
    fits as i32
}

/// The performance a CPU asks for (`effective_cpu_util` with its clamps,
/// then `sugov_effective_cpu_perf`), in capacity units of a CPU of original
/// capacity `orig`: `max(umin, min(1.25 × min(util, orig), min(orig, umax)))`.
pub(in crate::policy) fn effective_perf(util: f64, umin: u32, umax: u32, orig: u32) -> f64 {
    let actual = FIT_MARGIN * util.min(orig as f64);
    let max = (orig.min(umax) as f64).min(actual);
    (umin as f64).max(max)
}

/// The set bits of `words` in cyclic order from bit `start`: `start`,
/// `start + 1`, ... to the last word's end, then from bit 0 up to `start`
/// (the order of `(start + i) % n` for `i` in `0..n` over the members).
fn cyclic_bits(words: &[u64], start: usize) -> impl Iterator<Item = usize> + '_ {
    let (sw, sb) = (start / 64, start % 64);
    let (head, tail) = if sw < words.len() {
        // Bits of word `sw` at or above `sb` come first; those below, last.
        let hi = words[sw] & (u64::MAX << sb);
        let lo = words[sw] & !(u64::MAX << sb);
        (Some((sw, hi)), Some((sw, lo)))
    } else {
        (None, None)
    };
    let after = words.iter().enumerate().skip(sw + 1).map(|(i, &w)| (i, w));
    let before = words
        .iter()
        .enumerate()
        .take(sw.min(words.len()))
        .map(|(i, &w)| (i, w));
    head.into_iter()
        .chain(after)
        .chain(before)
        .chain(tail)
        .flat_map(|(i, w)| crate::os::word_bits(i, w))
}

/// One step of `util_est_update`: the EWMA after a dequeue for sleep with
/// utilisation `dequeued` and runnable average `runnable`, on a CPU of
/// original capacity `cap`. Raised to `dequeued` when that is higher; kept
/// within `UTIL_EST_MARGIN`; kept when `dequeued` exceeds the CPU's
/// capacity (no idle time to vouch for it) or when the task waited for a
/// CPU (`dequeued + UTIL_EST_MARGIN < runnable`: it did not get all the
/// time it wanted); otherwise `ewma − (ewma − dequeued) / 4` in the
/// kernel's integer arithmetic (`((ewma << 2) − diff) >> 2`).
pub(in crate::policy) fn util_est_ewma(ewma: u32, dequeued: u32, runnable: u32, cap: u32) -> u32 {
    if ewma <= dequeued {
        return dequeued;
    }
    let diff = ewma - dequeued;
    if diff < UTIL_EST_MARGIN || dequeued > cap || dequeued + UTIL_EST_MARGIN < runnable {
        return ewma;
    }
    ((ewma << UTIL_EST_WEIGHT_SHIFT) - diff) >> UTIL_EST_WEIGHT_SHIFT
}

/// What a task did since its load tracking's last update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::policy) enum Since {
    /// Slept (or blocked): neither runnable nor running.
    Slept,
    /// Waited for a CPU: runnable, not running.
    Waited,
    /// Ran.
    Ran,
}

impl Since {
    /// How a task enqueued with `flags` spent the time since its last
    /// update: asleep if it woke up, else waiting (moved while runnable).
    pub(in crate::policy) fn at_enqueue(flags: super::super::EnqFlags) -> Since {
        match flags {
            super::super::EnqFlags::New | super::super::EnqFlags::Wakeup => Since::Slept,
            _ => Since::Waited,
        }
    }
}

// ------------------------------------------------------------- the state

/// Per-task load tracking.
#[derive(Clone, Debug, Default)]
struct Load {
    /// PELT utilisation (`se.avg`), in the kernel's arithmetic, on the
    /// PELT clock of `pelt_cpu`.
    pelt: Pelt,
    /// The CPU whose runqueue the signal is attached to; `None` until the
    /// task is first enqueued.
    pelt_cpu: Option<CpuId>,
    /// util_est's EWMA.
    ewma: u32,
    /// The runqueue whose util_est sum holds this task, and what it added.
    on: Option<(CpuId, u32)>,
    /// The runqueue whose clamps count this task, and its effective clamps
    /// then (`uclamp_se.active` and `.value`).
    uc_on: Option<(CpuId, [u32; 2])>,
    /// The runqueue whose utilisation average holds this task's
    /// (`pelt_cpu` until the task exits).
    att: Option<CpuId>,
}

/// Per-CPU state of load tracking.
#[derive(Clone, Copy, Debug, Default)]
struct CpuPelt {
    /// The CPU's PELT clock.
    clock: PeltClock,
    /// `util_sum` of the task that last ran there, when it stopped
    /// (whether the CPU is saturated when it goes idle).
    last_sum: u64,
    /// The frequency (MHz) at which its present capacity was last asked
    /// for, and that capacity (`Ctx::capacity` depends on the CPU and its
    /// frequency alone).
    cap_at: Option<(u32, u32)>,
    /// Its original capacity ([`CapAware::cap_orig`]), once computed.
    orig: Option<u32>,
    /// Its runqueue's utilisation (`cfs_rq->avg`, the utilisation part),
    /// on its PELT clock: it grows while the CPU runs a task, decays
    /// otherwise, and takes in and gives up a task's average and sum when
    /// the task is attached or detached. Brought up to date where that
    /// changes (the CPU starts or stops running, a task comes or goes) and
    /// when read.
    rq: Pelt,
}

impl CpuPelt {
    /// `cx.capacity(cpu)` as cached, or computed if the CPU's frequency
    /// changed since it was cached.
    #[inline]
    fn capacity_seen(&self, cx: &Ctx, cpu: CpuId) -> u32 {
        match self.cap_at {
            Some((mhz, cap)) if mhz == cx.cpu_mhz(cpu) => cap,
            _ => cx.capacity(cpu),
        }
    }

    /// `cx.capacity(cpu)`, computed again only when the CPU's frequency
    /// changed since the last call.
    #[inline(always)]
    fn capacity(&mut self, cx: &Ctx, cpu: CpuId) -> u32 {
        let mhz = cx.cpu_mhz(cpu);
        let cap = match self.cap_at {
            Some((at, cap)) if at == mhz => cap,
            _ => self.capacity_changed(cx, cpu, mhz),
        };
        debug_assert_eq!(cap, cx.capacity(cpu), "capacity of cpu {cpu} at {mhz} MHz");
        cap
    }

    /// The CPU's frequency changed: compute its capacity and cache it.
    #[cold]
    #[inline(never)]
    fn capacity_changed(&mut self, cx: &Ctx, cpu: CpuId, mhz: u32) -> u32 {
        let cap = cx.capacity(cpu);
        self.cap_at = Some((mhz, cap));
        cap
    }

    /// [`CapAware::cap_orig`], computed once.
    #[inline]
    fn orig_capacity(&mut self, cx: &Ctx, cpu: CpuId) -> u32 {
        *self.orig.get_or_insert_with(|| CapAware::cap_orig(cx, cpu))
    }

    /// [`CapAware::cap_orig`] as cached, or computed if it is not yet.
    #[inline]
    fn orig_seen(&self, cx: &Ctx, cpu: CpuId) -> u32 {
        self.orig.unwrap_or_else(|| CapAware::cap_orig(cx, cpu))
    }
}

/// Why EAS is off on a machine, if it is (the kernel's conditions).
pub(in crate::policy) fn eas_missing(m: &Machine, schedutil: bool) -> Vec<&'static str> {
    let mut out = Vec::new();
    if !has_energy_model(m) {
        out.push(
            "the machine has no energy model (a power above 0 at every P-state of every CPU type)",
        );
    }
    if !asymmetric(m) {
        out.push("the CPU capacities are not asymmetric (every CPU has the same capacity)");
    }
    if !schedutil {
        out.push("the governor is not schedutil");
    }
    out
}

/// Whether every CPU type draws a positive, finite busy power at each of its
/// P-states: Linux registers a performance domain only for CPUs with an
/// energy model (`em_cpu_get`).
pub(in crate::policy) fn has_energy_model(m: &Machine) -> bool {
    m.types.iter().all(|t| {
        !t.pstates.is_empty()
            && t.pstates.iter().all(|p| {
                let w = crate::hw::busy_power(t, p, 1.0, 1.0);
                w.is_finite() && w > 0.0
            })
    })
}

/// Whether the CPUs' capacities differ (`sched_asym_cpucap_active`).
pub(in crate::policy) fn asymmetric(m: &Machine) -> bool {
    let mut caps = m.cpus.iter().map(|c| m.types[c.ty].capacity);
    let first = caps.next();
    caps.any(|c| Some(c) != first)
}

/// Load tracking, capacity awareness and EAS of one fair-class scheduler.
#[derive(Debug)]
pub(in crate::policy) struct CapAware {
    /// Capacity-aware wake-up placement and misfit migration.
    pub(in crate::policy) capacity_aware: bool,
    /// EAS in use (after gating).
    pub(in crate::policy) eas: bool,
    /// util_est.
    pub(in crate::policy) util_est: bool,
    /// PELT utilisation tracked at all (capacity awareness, or util_est for
    /// schedutil).
    pub(in crate::policy) track: bool,
    /// Fit, misfit and over-utilisation compare with each CPU's capacity at
    /// its highest P-state (the kernel's `capacity_of`), not the capacity
    /// at its present P-state.
    pub(in crate::policy) fits_at_fmax: bool,
    load: Vec<Load>,
    /// Per CPU: sum of the util_est EWMAs of its enqueued tasks.
    rq_est: Vec<u32>,
    /// Per CPU: its PELT clock and what goes with it.
    cpus: Vec<CpuPelt>,
    /// Publish the sums for `schedutil` (util_est on and the governor is
    /// `schedutil`).
    publish: bool,
    /// `sched_uclamp_used`: a task with clamps has been enqueued.
    uc_used: bool,
    /// Some task of the run has clamps (computed once at the start; the
    /// clamps are a program's and never change). Without any, the clamp
    /// hooks return at once: `uc_used` could never turn on.
    uc_any: bool,
    /// Per CPU: its runqueue's clamp aggregation.
    uc_rq: Vec<UclampRq>,
    /// Publish the runqueues' clamps for `schedutil` (the governor is
    /// `schedutil`).
    uc_publish: bool,
    /// A new task's utilisation as the kernel sets it: 0 while its first CPU
    /// is chosen, then `post_init_entity_util_avg` on that CPU (`eevdf`);
    /// else [`NEW_TASK_UTIL`] from the start (`cfs`'s entries).
    post_init_util: bool,
    /// util_est's EWMA takes the task's `util_avg` as its last update left
    /// it, before the dequeue's own update (the 6.18 kernel's
    /// `dequeue_task_fair` calls `util_est_update` before
    /// `dequeue_entities`; 6.12 called it after).
    est_before_dequeue: bool,
}

impl CapAware {
    pub(in crate::policy) fn new(
        n: usize,
        capacity_aware: bool,
        eas: bool,
        util_est: bool,
        fits_at_fmax: bool,
    ) -> Self {
        CapAware {
            capacity_aware: capacity_aware || eas,
            eas,
            util_est,
            track: capacity_aware || eas,
            fits_at_fmax,
            load: Vec::new(),
            rq_est: vec![0; n],
            cpus: vec![CpuPelt::default(); n],
            publish: false,
            uc_used: false,
            uc_any: true,
            uc_rq: vec![UclampRq::default(); n],
            uc_publish: false,
            post_init_util: false,
            est_before_dequeue: false,
        }
    }

    /// At the scheduler's start: gate EAS as Linux does (warning with the
    /// reasons when it was asked for and is off, unless `quiet_gate` and the
    /// only reasons are the machine's: the `linux` entry enables EAS only
    /// where the machine supports it), and connect to `schedutil`.
    pub(in crate::policy) fn start(&mut self, cx: &mut Ctx, who: &str, quiet_gate: bool) {
        let schedutil = cx.governor_is_schedutil();
        if self.eas {
            let missing = eas_missing(cx.machine, schedutil);
            if !missing.is_empty() {
                self.eas = false;
                let machine_only = missing.iter().all(|r| !r.contains("governor"));
                if !(quiet_gate && machine_only) {
                    cx.warn(format!(
                        "{who}: Energy Aware Scheduling is off because {}",
                        missing.join(", and ")
                    ));
                }
            }
        }
        if self.util_est && schedutil {
            self.publish = true;
            self.track = true;
        }
        self.uc_publish = schedutil;
        self.uc_any = (0..cx.ntasks()).any(|t| cx.task(t).uclamp.is_some());
    }

    /// Prefetch `t`'s load record (a read-ahead hint, see
    /// `crate::prefetch`).
    #[inline]
    pub(in crate::policy) fn read_ahead(&self, t: TaskId) {
        if let Some(l) = self.load.get(t) {
            crate::prefetch::lines(l, 1);
        }
    }

    fn at(&mut self, t: TaskId) -> &mut Load {
        if t >= self.load.len() {
            self.load.resize(t + 1, Load::default());
        }
        &mut self.load[t]
    }

    /// Update util_est with the utilisation the task had before its
    /// dequeue (the 6.18 kernel's order; see [`CapAware::sleep`]).
    pub(in crate::policy) fn set_est_before_dequeue(&mut self) {
        self.est_before_dequeue = true;
    }

    /// Give new tasks the kernel's initial utilisation (see
    /// [`CapAware::post_init`]) instead of [`NEW_TASK_UTIL`].
    pub(in crate::policy) fn set_post_init_util(&mut self) {
        self.post_init_util = true;
    }

    /// A task not enqueued yet counts as this utilisation while its first CPU
    /// is chosen: 0 in the kernel (`init_entity_runnable_average` leaves
    /// `util_avg` at 0 until `post_init_entity_util_avg`, which runs after
    /// `select_task_rq` in `wake_up_new_task`), else [`NEW_TASK_UTIL`].
    fn unseen_util(&self) -> f64 {
        if self.post_init_util {
            0.0
        } else {
            NEW_TASK_UTIL
        }
    }

    /// First enqueue of `t`, on `cpu`: a new task starts at half the scale
    /// (with `post_init_util`, the scheduler then calls
    /// [`CapAware::post_init`]). Whether it was the first.
    #[inline]
    pub(in crate::policy) fn first_seen(&mut self, cx: &Ctx, t: TaskId, cpu: CpuId) -> bool {
        if self.load.get(t).is_some_and(|l| l.pelt_cpu.is_some()) {
            return false;
        }
        let now = self.clock_now(cx, cpu);
        let l = self.at(t);
        l.pelt = Pelt::start(now, NEW_TASK_UTIL as u32, NEW_TASK_UTIL as u32);
        l.pelt_cpu = Some(cpu);
        self.attach_rq(t, cpu, now);
        true
    }

    /// `cpu`'s runqueue utilisation brought up to `now` on its PELT clock,
    /// running or not as the CPU has been since its last update.
    #[inline]
    fn rq_sync(&mut self, cpu: CpuId, now: u64) {
        let c = &mut self.cpus[cpu];
        let busy = c.clock.busy();
        c.rq.update(now, busy, busy);
    }

    /// `t`'s utilisation joins `cpu`'s runqueue average
    /// (`attach_entity_load_avg`); `now` is that CPU's PELT clock, at which
    /// `t`'s signal was (re)started.
    fn attach_rq(&mut self, t: TaskId, cpu: CpuId, now: u64) {
        self.rq_sync(cpu, now);
        let e = self.load[t].pelt;
        self.cpus[cpu].rq.add_util(&e);
        self.load[t].att = Some(cpu);
    }

    /// `t`'s utilisation, as its signal now stands, leaves the runqueue
    /// average that holds it (`detach_entity_load_avg`), if any; `now`:
    /// that runqueue's PELT clock, if the caller has read it.
    fn detach_rq(&mut self, cx: &Ctx, t: TaskId, now: Option<u64>) {
        let Some(cpu) = self.load.get(t).and_then(|l| l.att) else {
            return;
        };
        let now = now.unwrap_or_else(|| self.clock_now(cx, cpu));
        self.rq_sync(cpu, now);
        let e = self.load[t].pelt;
        self.cpus[cpu].rq.sub_util(&e);
        self.load[t].att = None;
    }

    /// `t` exited: its utilisation leaves its runqueue's average
    /// (`remove_entity_load_avg`); what it had stays readable
    /// ([`CapAware::task_load`]).
    pub(in crate::policy) fn task_dead(&mut self, cx: &Ctx, t: TaskId) {
        if let Some(cpu) = self.load.get(t).and_then(|l| l.att) {
            // Brought up to the moment it leaves, as the kernel's
            // `sync_entity_load_avg` does.
            let now = self.clock_now(cx, cpu);
            self.load[t].pelt.update(now, false, false);
            self.detach_rq(cx, t, Some(now));
        }
    }

    /// `rq_clock_pelt` of `cpu` now.
    #[inline]
    fn clock_now(&self, cx: &Ctx, cpu: CpuId) -> u64 {
        let c = &self.cpus[cpu];
        c.clock.now(cx.now.0, c.capacity_seen(cx, cpu))
    }

    /// A task starts running on `cpu` (its PELT clock runs at the CPU's
    /// capacity from now on). Inlined test, out-of-line work (untracked,
    /// `cfs`'s default, it costs a flag test).
    #[inline(always)]
    pub(in crate::policy) fn cpu_run(&mut self, cx: &Ctx, cpu: CpuId) {
        if self.track {
            self.cpu_run_work(cx, cpu);
        }
    }

    #[inline(never)]
    fn cpu_run_work(&mut self, cx: &Ctx, cpu: CpuId) {
        // A switch between tasks changes nothing: the scheduler's updates
        // of the two tasks brought the clock up to now.
        let c = &mut self.cpus[cpu];
        if !c.clock.busy() {
            let cap = c.capacity(cx, cpu);
            // The runqueue's utilisation decayed while idle, up to now.
            let now = c.clock.advance_to(cx.now.0, cap);
            self.rq_sync(cpu, now);
            self.cpus[cpu].clock.run(cx.now.0, cap);
        }
    }

    /// `cpu` goes idle (`update_idle_rq_clock_pelt`): its PELT clock
    /// catches up with real time, unless the CPU was saturated.
    #[inline(always)]
    pub(in crate::policy) fn cpu_idle(&mut self, cx: &Ctx, cpu: CpuId) {
        if self.track {
            self.cpu_idle_work(cx, cpu);
        }
    }

    #[inline(never)]
    fn cpu_idle_work(&mut self, cx: &Ctx, cpu: CpuId) {
        let c = &mut self.cpus[cpu];
        let cap = c.capacity(cx, cpu);
        let saturated = c.last_sum >= SATURATED_SUM;
        // The runqueue's utilisation grew while the CPU ran, up to now.
        let now = c.clock.advance_to(cx.now.0, cap);
        self.rq_sync(cpu, now);
        self.cpus[cpu].clock.idle(cx.now.0, cap, saturated);
    }

    /// `post_init_entity_util_avg` for new task `t` of weight `weight`
    /// placed on `cpu`, whose runqueue has utilisation `rq_util` (its
    /// average without `t`, [`CapAware::rq_util`]) and whose runnable tasks'
    /// weights sum to `rq_load` (the model's stand-in for the runqueue's
    /// PELT `load_avg`): half the CPU's spare
    /// original capacity, `cap = (capacity − rq_util) / 2`; on a busy CPU
    /// the task's share of the runqueue's utilisation by weight,
    /// `rq_util × weight / (rq_load + 1)`, at most `cap`; 0 when `cap ≤ 0`.
    pub(in crate::policy) fn post_init(
        &mut self,
        cx: &Ctx,
        t: TaskId,
        cpu: CpuId,
        weight: u64,
        rq_load: u64,
    ) {
        let rq_util = self.rq_util(cx, cpu, Some(t));
        let half = (Self::cap_orig(cx, cpu) as f64 - rq_util) / 2.0;
        let util = if half <= 0.0 {
            0.0
        } else if rq_util > 0.0 {
            (rq_util * weight as f64 / (rq_load + 1) as f64).min(half)
        } else {
            half
        };
        let now = self.clock_now(cx, cpu);
        // Its first enqueue's signal leaves the runqueue; the kernel's value
        // joins it.
        self.detach_rq(cx, t, None);
        let l = self.at(t);
        // An integer, as the kernel's; `runnable_avg` starts equal.
        l.pelt = Pelt::start(now, util.floor() as u32, util.floor() as u32);
        l.pelt_cpu = Some(cpu);
        self.attach_rq(t, cpu, now);
    }

    /// Bring `t`'s utilisation up to now on `cpu`, its runqueue; `running`:
    /// it ran there since the last update (else it waited or slept). A
    /// task that comes to `cpu` from another runqueue is first brought up
    /// to date there (`remove_entity_load_avg`), then attached at `cpu`'s
    /// clock and point in the period (`attach_entity_load_avg`).
    #[inline]
    pub(in crate::policy) fn update(&mut self, cx: &Ctx, t: TaskId, cpu: CpuId, since: Since) {
        let running = since == Since::Ran;
        let runnable = since != Since::Slept;
        let c = &mut self.cpus[cpu];
        let cap = c.capacity(cx, cpu);
        let now = c.clock.advance_to(cx.now.0, cap);
        if self.load.get(t).is_none_or(|l| l.pelt_cpu != Some(cpu)) {
            self.attach(cx, t, cpu, now);
        }
        let l = &mut self.load[t];
        l.pelt.update(now, running, runnable);
        if running {
            self.cpus[cpu].last_sum = l.pelt.util_sum();
        }
    }

    /// `t` comes to `cpu`'s runqueue, whose PELT clock reads `now`: brought
    /// up to date on the runqueue it leaves, then attached at `cpu`'s point
    /// in the period.
    #[inline(never)]
    fn attach(&mut self, cx: &Ctx, t: TaskId, cpu: CpuId, now: u64) {
        let from = self.at(t).pelt_cpu;
        let old = from.map(|c| self.clock_now(cx, c));
        let l = self.at(t);
        if let Some(old) = old {
            l.pelt.update(old, false, false);
        }
        // Its runqueue average is `pelt_cpu`'s, whose clock reads `old`.
        self.detach_rq(cx, t, old);
        let l = self.at(t);
        l.pelt = Pelt::start(now, l.pelt.util(), l.pelt.runnable());
        l.pelt_cpu = Some(cpu);
        self.attach_rq(t, cpu, now);
    }

    /// `t`'s utilisation decayed to now (no update): `task_util`.
    pub(in crate::policy) fn util_now(&self, cx: &Ctx, t: TaskId) -> f64 {
        match self.load.get(t) {
            Some(Load {
                pelt,
                pelt_cpu: Some(c),
                ..
            }) => pelt.util_at(self.clock_now(cx, *c)) as f64,
            _ => self.unseen_util(), // a new task (see `first_seen`)
        }
    }

    /// `task_util_est`: `max(util_avg, ewma)` with util_est, else `util_avg`.
    pub(in crate::policy) fn task_util(&self, cx: &Ctx, t: TaskId) -> f64 {
        let u = self.util_now(cx, t);
        if self.util_est {
            u.max(self.ewma(t) as f64)
        } else {
            u
        }
    }

    /// The capacity that fit checks use: at the highest P-state
    /// (`capacity_of`) or at the present one.
    pub(in crate::policy) fn fit_capacity(&self, cx: &Ctx, c: CpuId) -> u32 {
        if self.fits_at_fmax {
            let m = cx.machine;
            let t = m.ty(c);
            (m.compute_speed(c, 0, t.fmax(), false) / t.speedup(0) * 1024.0).round() as u32
        } else {
            cx.capacity(c)
        }
    }

    /// `t`'s `util_avg` as of its last update and its util_est EWMA (with
    /// util_est on), if its load is tracked ([`super::super::Scheduler::task_load`]).
    pub(in crate::policy) fn task_load(&self, t: TaskId) -> Option<super::super::TaskLoad> {
        let l = self
            .load
            .get(t)
            .filter(|l| self.track && l.pelt_cpu.is_some())?;
        Some(super::super::TaskLoad {
            util_avg: l.pelt.util(),
            runnable_avg: l.pelt.runnable(),
            util_est: self.util_est.then_some(l.ewma),
        })
    }

    /// `t`'s util_est EWMA.
    pub(in crate::policy) fn ewma(&self, t: TaskId) -> u32 {
        self.load.get(t).map_or(0, |l| l.ewma)
    }

    fn publish(&self, cx: &mut Ctx, cpu: CpuId) {
        if self.publish {
            cx.set_cpu_util_est(cpu, self.rq_est[cpu]);
        }
    }

    /// `t`'s effective clamps (`uclamp_eff_value`): its request, else no
    /// clamp (0, 1024). Without cgroups the system defaults (1024, 1024)
    /// restrict nothing.
    pub(in crate::policy) fn uclamp_eff(cx: &Ctx, t: TaskId) -> [u32; 2] {
        cx.task(t)
            .uclamp
            .map_or([0, CAPACITY_SCALE], |u| [u.min, u.max])
    }

    fn uc_publish(&self, cx: &mut Ctx, cpu: CpuId) {
        if self.uc_publish {
            let (lo, hi) = self.uc_rq[cpu].get();
            cx.set_cpu_uclamp(cpu, (lo, hi));
        }
    }

    /// `uclamp_rq_inc`: `t` becomes runnable on `cpu` (moved from another
    /// CPU if it counted there). The first task with clamps turns uclamp on.
    #[inline]
    fn uc_inc(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        if !self.uc_any {
            return;
        }
        if cx.task(t).uclamp.is_some() {
            self.uc_used = true;
        }
        if !self.uc_used {
            return;
        }
        if self.at(t).uc_on.is_some_and(|(c, _)| c == cpu) {
            return;
        }
        self.uc_dec(cx, t);
        let v = Self::uclamp_eff(cx, t);
        self.uc_rq[cpu].inc(v);
        self.at(t).uc_on = Some((cpu, v));
        self.uc_publish(cx, cpu);
    }

    /// `uclamp_rq_dec`: `t` is no longer runnable where it counted.
    #[inline]
    fn uc_dec(&mut self, cx: &mut Ctx, t: TaskId) {
        if !self.uc_any {
            return;
        }
        if let Some((c, v)) = self.load.get_mut(t).and_then(|l| l.uc_on.take()) {
            self.uc_rq[c].dec(v);
            self.uc_publish(cx, c);
        }
    }

    /// `util_est_enqueue` and `uclamp_rq_inc`: `t` counts on `cpu` (moved
    /// from another CPU if it counted there). Inlined test, out-of-line
    /// work: with no clamp in the run and util_est off (`cfs`'s default)
    /// an enqueue pays two flag tests, not a call.
    #[inline(always)]
    pub(in crate::policy) fn est_enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        if self.uc_any || (self.util_est && self.track) {
            self.est_enqueue_work(cx, t, cpu);
        }
    }

    #[inline(never)]
    fn est_enqueue_work(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        self.uc_inc(cx, t, cpu);
        if !self.util_est || !self.track {
            return;
        }
        let ewma = self.ewma(t);
        let prev = self.at(t).on;
        if prev.is_some_and(|(c, _)| c == cpu) {
            return;
        }
        self.est_dequeue(cx, t);
        self.at(t).on = Some((cpu, ewma));
        self.rq_est[cpu] += ewma;
        self.publish(cx, cpu);
    }

    /// `util_est_dequeue`: `t` no longer counts on its CPU.
    pub(in crate::policy) fn est_dequeue(&mut self, cx: &mut Ctx, t: TaskId) {
        if let Some((c, v)) = self.load.get_mut(t).and_then(|l| l.on.take()) {
            self.rq_est[c] -= v;
            self.publish(cx, c);
        }
    }

    /// `t` ran on `cpu` and goes to sleep (or exits): `uclamp_rq_dec`, its
    /// utilisation up to now, `util_est_update` with it (with the 6.18
    /// kernel's order, with the utilisation its previous update left: the
    /// last tick's, or its pick's), and `util_est_dequeue`. Inlined test, out-of-line work (as
    /// [`CapAware::est_enqueue`]).
    #[inline(always)]
    pub(in crate::policy) fn sleep(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        if self.uc_any || self.track {
            self.sleep_work(cx, t, cpu);
        }
    }

    #[inline(never)]
    fn sleep_work(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        self.uc_dec(cx, t);
        if !self.track {
            return;
        }
        let before = self
            .load
            .get(t)
            .map_or((0, 0), |l| (l.pelt.util(), l.pelt.runnable()));
        self.update(cx, t, cpu, Since::Ran);
        if self.util_est {
            let est_before = self.est_before_dequeue;
            let cap = self.cpus[cpu].orig_capacity(cx, cpu);
            let l = self.at(t);
            let (dequeued, runnable) = if est_before {
                before
            } else {
                (l.pelt.util(), l.pelt.runnable())
            };
            l.ewma = util_est_ewma(l.ewma, dequeued, runnable, cap);
            self.est_dequeue(cx, t);
        }
    }

    /// `cpu_util`: the utilisation of `cpu`'s runqueue ([`CapAware::rq_util`]),
    /// without `without`'s (`cpu_util(cpu, p, -1)` for a waking task `p`,
    /// whose utilisation its previous CPU still holds); at least the
    /// runqueue's util_est sum with util_est; at most the CPU's original
    /// capacity.
    pub(in crate::policy) fn cpu_util(&self, cx: &Ctx, cpu: CpuId, without: Option<TaskId>) -> f64 {
        let mut u = self.rq_util(cx, cpu, without);
        if self.util_est {
            u = u.max(self.rq_est[cpu] as f64);
        }
        u.min(self.cpus[cpu].orig_seen(cx, cpu) as f64)
    }

    /// `cfs_rq->avg.util_avg` of `cpu` brought up to now: the utilisation
    /// of the tasks attached to its runqueue (running, queued or asleep),
    /// less `without`'s (its signal decayed to now) if it is one of them.
    pub(in crate::policy) fn rq_util(&self, cx: &Ctx, cpu: CpuId, without: Option<TaskId>) -> f64 {
        let now = self.clock_now(cx, cpu);
        let c = &self.cpus[cpu];
        let busy = c.clock.busy();
        let mut rq = c.rq;
        rq.update(now, busy, busy);
        let mut u = rq.util();
        if let Some(t) = without {
            if let Some(l) = self.load.get(t).filter(|l| l.att == Some(cpu)) {
                u = u.saturating_sub(l.pelt.util_at(now));
            }
        }
        u as f64
    }

    /// The CPU's original capacity (`arch_scale_cpu_capacity`): at its
    /// highest P-state, whatever `fits_at_fmax` says.
    pub(in crate::policy) fn cap_orig(cx: &Ctx, c: CpuId) -> u32 {
        let m = cx.machine;
        let t = m.ty(c);
        (m.compute_speed(c, 0, t.fmax(), false) / t.speedup(0) * 1024.0).round() as u32
    }

    /// Capacity-aware wake-up placement (`select_idle_capacity`): the first
    /// idle CPU, scanning from `start`, where the task fits
    /// (`util_fits_cpu` with its clamps); else the idle CPU that fits but
    /// for its minimum clamp with the most original capacity; else the idle
    /// CPU with the most capacity; else none.
    ///
    /// `idle` holds every CPU for which `is_idle` can be true (the
    /// balancer's CPUs with no task counted); only its members are visited,
    /// in the same cyclic order from `start` as a walk over every CPU.
    pub(in crate::policy) fn select_idle_capacity(
        &self,
        cx: &Ctx,
        t: TaskId,
        start: CpuId,
        idle: &CpuBits,
        is_idle: impl Fn(CpuId) -> bool,
    ) -> Option<CpuId> {
        if idle.is_empty() {
            return None;
        }
        let util = self.task_util(cx, t);
        let [umin, umax] = Self::uclamp_eff(cx, t);
        let aff = &cx.task(t).affinity;
        // (fits, capacity, cpu): −1 before 0, then the most capacity.
        let mut best: Option<(i32, u32, CpuId)> = None;
        for c in cyclic_bits(&idle.words, start) {
            if !aff.contains(c) || !is_idle(c) {
                continue;
            }
            let mut cap = self.fit_capacity(cx, c);
            let orig = Self::cap_orig(cx, c);
            let fits = util_fits_cpu(util, umin, umax, cap as f64, orig, self.uc_used);
            if fits > 0 {
                return Some(c);
            }
            if fits < 0 {
                cap = orig;
            }
            if best.is_none_or(|(bf, bc, _)| fits < bf || (fits == bf && cap > bc)) {
                best = Some((fits, cap, c));
            }
        }
        best.map(|b| b.2)
    }

    /// Misfit (the kernel's `update_misfit_status`), on the tick of `cpu`
    /// running `t` (its utilisation just updated): if it no longer fits
    /// (`task_fits_cpu`: `util_fits_cpu` with its clamps), the idle CPU with
    /// more capacity to move it to, the biggest first (active balancing of a
    /// misfit task).
    ///
    /// `idle` holds every CPU for which `is_idle` can be true; only its
    /// members are visited.
    pub(in crate::policy) fn misfit_target(
        &self,
        cx: &Ctx,
        t: TaskId,
        cpu: CpuId,
        idle: &CpuBits,
        is_idle: impl Fn(CpuId) -> bool,
    ) -> Option<CpuId> {
        let cap = self.fit_capacity(cx, cpu);
        let util = if self.util_est {
            self.task_util(cx, t)
        } else {
            self.load[t].pelt.util() as f64
        };
        let fits = if self.uc_used {
            let [umin, umax] = Self::uclamp_eff(cx, t);
            util_fits_cpu(util, umin, umax, cap as f64, Self::cap_orig(cx, cpu), true) > 0
        } else {
            util * FIT_MARGIN <= cap as f64
        };
        if fits || idle.is_empty() {
            return None;
        }
        let aff = &cx.task(t).affinity;
        idle.iter()
            .filter(|&c| aff.contains(c) && is_idle(c) && self.fit_capacity(cx, c) > cap)
            .max_by_key(|&c| (self.fit_capacity(cx, c), std::cmp::Reverse(c)))
    }

    /// Estimated power of frequency domain `d` (the kernel's
    /// `compute_energy` → `em_cpu_energy`): the domain runs at the lowest
    /// P-state whose capacity covers the highest performance request of its
    /// CPUs (`perf`: 1.25 × utilisation without uclamp, what schedutil
    /// picks), and each CPU draws that P-state's busy power for the fraction
    /// of time its utilisation (`util`) keeps it busy.
    fn domain_power(
        cx: &Ctx,
        d: usize,
        util: &dyn Fn(CpuId) -> f64,
        perf: &dyn Fn(CpuId) -> f64,
    ) -> f64 {
        let m = cx.machine;
        let dom = &m.domains[d];
        let ty = &m.types[dom.ty];
        let need = dom.cpus.iter().map(|&c| perf(c)).fold(0.0, f64::max);
        let fmax = ty.fmax() as f64;
        let ps = ty
            .pstates
            .iter()
            .find(|p| ty.capacity as f64 * p.mhz as f64 / fmax >= need)
            .unwrap_or_else(|| ty.pstates.last().expect("a type has P-states"));
        let cap = ty.capacity as f64 * ps.mhz as f64 / fmax;
        let power = crate::hw::busy_power(ty, ps, 1.0, 1.0);
        dom.cpus
            .iter()
            .map(|&c| power * (util(c).min(cap) / cap))
            .sum()
    }

    /// `cpu`'s performance request for EAS's estimate with utilisation
    /// `util` (`eenv_pd_max_util`): 1.25 × `util` without uclamp; with it,
    /// the runqueue's clamps (and, where the task goes, the task's merged in)
    /// applied as schedutil applies them.
    fn eas_perf(&self, cx: &Ctx, cpu: CpuId, util: f64, task: Option<[u32; 2]>) -> f64 {
        if !self.uc_used {
            return FIT_MARGIN * util;
        }
        let rq = &self.uc_rq[cpu];
        let (mut lo, mut hi) = rq.get();
        if let Some([pmin, pmax]) = task {
            lo = lo.max(pmin);
            hi = if rq.is_idle() { pmax } else { hi.max(pmax) };
        }
        effective_perf(util, lo, hi, Self::cap_orig(cx, cpu))
    }

    /// `find_energy_efficient_cpu`: for each frequency domain, the allowed
    /// CPU with the most spare capacity where the task fits (and the previous
    /// CPU); the one that adds the least estimated power wins. `None` when
    /// EAS does not apply (over-utilised system, or nothing fits). Each CPU
    /// counts without the waking task, whose utilisation its previous CPU
    /// still holds (`eenv_pd_busy_time`'s `cpu_util(cpu, p, -1)`).
    ///
    /// With uclamp, fitting is `util_fits_cpu` with the task's clamps merged
    /// with the runqueue's (unless that runqueue is idle), and
    /// over-utilisation `!util_fits_cpu` with the runqueue's clamps
    /// (`cpu_overutilized`); a candidate that fits fully beats one that fits
    /// but for its minimum clamp (−1), and among those the one with more
    /// original capacity wins.
    pub(in crate::policy) fn find_energy_efficient_cpu(
        &self,
        cx: &Ctx,
        t: TaskId,
        prev: Option<CpuId>,
    ) -> Option<CpuId> {
        let n = cx.ncpus();
        let utils: Vec<f64> = (0..n).map(|c| self.cpu_util(cx, c, Some(t))).collect();
        let used = self.uc_used;
        // Capacities are read where needed: the over-utilisation check stops
        // at the first over-utilised CPU.
        let cap = |c: CpuId| self.fit_capacity(cx, c) as f64;
        let orig = |c: CpuId| Self::cap_orig(cx, c);
        let over = |c: CpuId| {
            if used {
                let (lo, hi) = self.uc_rq[c].get();
                util_fits_cpu(utils[c], lo, hi, cap(c), orig(c), true) == 0
            } else {
                utils[c] > OVERUTIL * cap(c)
            }
        };
        if (0..n).any(over) {
            return None;
        }
        let tu = self.task_util(cx, t);
        let pclamp = Self::uclamp_eff(cx, t);
        let aff = &cx.task(t).affinity;
        let fits = |c: CpuId| -> i32 {
            if !(aff.contains(c) && cx.online(c)) {
                return 0;
            }
            let [mut lo, mut hi] = pclamp;
            if used && !self.uc_rq[c].is_idle() {
                let (rlo, rhi) = self.uc_rq[c].get();
                lo = lo.max(rlo);
                hi = hi.max(rhi);
            }
            util_fits_cpu(utils[c] + tu, lo, hi, cap(c), orig(c), used)
        };
        // (fits rank, delta, not prev, cpu); rank 1 (fits) beats 0 (fits but
        // for uclamp_min), which compares original capacity first.
        let mut best: Option<(u8, f64, bool, CpuId)> = None;
        for d in 0..cx.machine.domains.len() {
            let cpus = &cx.machine.domains[d].cpus;
            // (cpu, fits, spare capacity) of the CPUs that fit.
            let fit: Vec<(CpuId, i32, f64)> = cpus
                .iter()
                .map(|&c| (c, fits(c)))
                .filter(|&(_, f)| f != 0)
                .map(|(c, f)| (c, f, cap(c) - utils[c]))
                .collect();
            let mut cands: Vec<CpuId> = Vec::new();
            if let Some(&(c, _, _)) = fit.iter().max_by(|&&(a, fa, sa), &&(b, fb, sb)| {
                fa.cmp(&fb)
                    .then(sa.partial_cmp(&sb).unwrap_or(std::cmp::Ordering::Equal))
                    .then(b.cmp(&a))
            }) {
                cands.push(c);
            }
            if let Some(p) = prev.filter(|p| {
                cpus.contains(p) && fit.iter().any(|&(c, _, _)| c == *p) && !cands.contains(p)
            }) {
                cands.push(p);
            }
            if cands.is_empty() {
                continue;
            }
            let base = Self::domain_power(cx, d, &|c| utils[c], &|c| {
                self.eas_perf(cx, c, utils[c], None)
            });
            for c in cands {
                let with_t = |x: CpuId| utils[x] + if x == c { tu } else { 0.0 };
                let with = Self::domain_power(cx, d, &with_t, &|x| {
                    self.eas_perf(cx, x, with_t(x), (x == c).then_some(pclamp))
                });
                let rank = u8::from(fits(c) > 0);
                // Ties favour the previous CPU (cache), then the lowest id;
                // among CPUs that fit but for uclamp_min, more original
                // capacity first.
                let delta = if rank == 0 {
                    -(orig(c) as f64)
                } else {
                    with - base
                };
                let key = (rank, delta, Some(c) != prev, c);
                if best.is_none_or(|b| {
                    key.0 > b.0
                        || (key.0 == b.0
                            && (key.1 < b.1 - 1e-12
                                || (key.1 <= b.1 + 1e-12 && (key.2, key.3) < (b.2, b.3))))
                }) {
                    best = Some(key);
                }
            }
        }
        best.map(|b| b.3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn util_est_ewma_follows_util_est_update() {
        // Rising: set to the dequeued value.
        assert_eq!(util_est_ewma(100, 300, 0, 1024), 300);
        assert_eq!(util_est_ewma(300, 300, 0, 1024), 300);
        // Within the margin (10): kept.
        assert_eq!(util_est_ewma(300, 291, 0, 1024), 300);
        // diff = 300 − 100 = 200: (1200 − 200) >> 2 = 250.
        assert_eq!(util_est_ewma(300, 100, 0, 1024), 250);
        // diff = 250 − 0 = 250: (1000 − 250) >> 2 = 187 (187.5 truncated).
        assert_eq!(util_est_ewma(250, 0, 0, 1024), 187);
        // diff exactly the margin: updated, (40 − 10) >> 2 = 7.
        assert_eq!(util_est_ewma(10, 0, 0, 1024), 7);
        // Waited for a CPU (runnable above the sample by more than the
        // margin): kept; by the margin or less: updated.
        assert_eq!(util_est_ewma(300, 100, 111, 1024), 300);
        assert_eq!(util_est_ewma(300, 100, 110, 1024), 250);
        // A sample above the CPU's capacity: kept (no idle time).
        assert_eq!(util_est_ewma(900, 500, 0, 446), 900);
        // Four samples of 0 from 400: 300, 225, 168 (168.75), 126.
        let mut e = 400;
        for want in [300, 225, 168, 126] {
            e = util_est_ewma(e, 0, 0, 1024);
            assert_eq!(e, want);
        }
    }

    #[test]
    fn uclamp_buckets_are_205_wide() {
        assert_eq!(UCLAMP_BUCKET_DELTA, 205);
        assert_eq!(uclamp_bucket_id(0), 0);
        assert_eq!(uclamp_bucket_id(204), 0);
        assert_eq!(uclamp_bucket_id(205), 1);
        assert_eq!(uclamp_bucket_id(512), 2);
        assert_eq!(uclamp_bucket_id(1024), 4); // 1024 / 205 = 4
    }

    #[test]
    fn runqueue_clamps_are_max_aggregated_and_drop_when_tasks_leave() {
        let mut rq = UclampRq::default();
        assert_eq!(rq.get(), (0, 1024));
        assert!(rq.is_idle());
        // A task clamped to (512, 600), then an unclamped one (0, 1024).
        rq.inc([512, 600]);
        assert_eq!(rq.get(), (512, 600)); // idle reset: the first sets both
        assert!(!rq.is_idle());
        rq.inc([0, 1024]);
        assert_eq!(rq.get(), (512, 1024));
        // The clamped one sleeps: its min bucket (2) empties, the rq min
        // falls to the highest non-empty bucket's, 0.
        rq.dec([512, 600]);
        assert_eq!(rq.get(), (0, 1024));
        // The last one leaves: min 0, max retained (UCLAMP_FLAG_IDLE).
        rq.dec([0, 1024]);
        assert_eq!(rq.get(), (0, 1024));
        assert!(rq.is_idle());
        // A task with max 256 alone, then it sleeps: the max stays 256.
        rq.inc([0, 256]);
        assert_eq!(rq.get(), (0, 256));
        rq.dec([0, 256]);
        assert_eq!(rq.get(), (0, 256));
        assert!(rq.is_idle());
        // The next task resets it on idle exit.
        rq.inc([100, 300]);
        assert_eq!(rq.get(), (100, 300));
    }

    #[test]
    fn a_bucket_keeps_its_highest_value_until_it_empties() {
        // 420 and 600 share bucket 2 (410..614): after 600 leaves, the
        // bucket still reports 600 while 420 is in it (local max aggregation).
        let mut rq = UclampRq::default();
        rq.inc([420, 1024]);
        rq.inc([600, 1024]);
        assert_eq!(rq.get().0, 600);
        rq.dec([600, 1024]);
        assert_eq!(rq.get().0, 600);
        rq.dec([420, 1024]);
        assert_eq!(rq.get().0, 0);
        // Different buckets: the lower one's value comes back.
        rq.inc([300, 1024]);
        rq.inc([900, 1024]);
        assert_eq!(rq.get().0, 900);
        rq.dec([900, 1024]);
        assert_eq!(rq.get().0, 300);
    }

    #[test]
    fn util_fits_cpu_follows_the_kernel() {
        // Without uclamp: fits_capacity only (300 × 1.25 = 375 < 381).
        assert_eq!(util_fits_cpu(300.0, 0, 1024, 381.0, 381, false), 1);
        assert_eq!(util_fits_cpu(320.0, 0, 1024, 381.0, 381, false), 0);
        // A maximum clamp at or below the original capacity fits.
        assert_eq!(util_fits_cpu(900.0, 0, 256, 381.0, 381, true), 1);
        assert_eq!(util_fits_cpu(900.0, 0, 382, 381.0, 381, true), 0);
        // No clamp on the full-scale CPU: the utilisation decides.
        assert_eq!(util_fits_cpu(900.0, 0, 1024, 1024.0, 1024, true), 0);
        assert_eq!(util_fits_cpu(100.0, 0, 1024, 1024.0, 1024, true), 1);
        // A minimum clamp above the original capacity: fits but for it.
        assert_eq!(util_fits_cpu(100.0, 512, 1024, 381.0, 381, true), -1);
        assert_eq!(util_fits_cpu(100.0, 512, 1024, 1024.0, 1024, true), 1);
        // ... unless the utilisation is already above the clamp.
        assert_eq!(util_fits_cpu(600.0, 512, 1024, 1024.0, 1024, true), 1);
        // The minimum is capped by the maximum.
        assert_eq!(util_fits_cpu(100.0, 512, 256, 381.0, 381, true), 1);
    }

    #[test]
    fn effective_perf_applies_the_clamps_after_the_headroom() {
        // util 100: 125 without clamps; min 512 lifts it to 512 (no headroom
        // on the clamp); max 256 caps a busy CPU's 1024 at 256.
        assert_eq!(effective_perf(100.0, 0, 1024, 1024), 125.0);
        assert_eq!(effective_perf(100.0, 512, 1024, 1024), 512.0);
        assert_eq!(effective_perf(1024.0, 0, 256, 1024), 256.0);
        // The utilisation is capped at the CPU's capacity first.
        assert_eq!(effective_perf(500.0, 0, 1024, 381), 381.0);
        // Inverted clamps: the minimum wins.
        assert_eq!(effective_perf(10.0, 512, 256, 1024), 512.0);
    }

    #[test]
    fn cyclic_bits_follow_the_walk_from_start() {
        // Every (start, member set) over 130 bits (three words): the order is
        // that of `(start + i) % n` filtered to the members.
        let n = 130;
        let sets: [&[usize]; 5] = [
            &[],
            &[0],
            &[129],
            &[0, 5, 63, 64, 65, 127, 128, 129],
            &[3, 64, 100],
        ];
        for members in sets {
            let mut words = vec![0u64; 3];
            for &c in members {
                words[c / 64] |= 1 << (c % 64);
            }
            for start in 0..n {
                let want: Vec<usize> = (0..n)
                    .map(|i| (start + i) % n)
                    .filter(|c| members.contains(c))
                    .collect();
                let got: Vec<usize> = cyclic_bits(&words, start).collect();
                assert_eq!(got, want, "start {start}, members {members:?}");
            }
        }
    }
}
