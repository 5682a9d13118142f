//! Load tracking and what it drives, shared by `cfs` (and its
//! `capacity-aware` and `eas` entries) and `eevdf`:
//!
//! * PELT utilisation per task (`util_avg`): a geometric average with a
//!   32 ms half-life of the capacity the task used, 1024 = the biggest CPU
//!   at its highest P-state (capacity and frequency invariant);
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
use crate::hw::{CpuId, Machine};
use crate::os::TaskId;
use crate::time::SimTime;

/// A CPU is over-utilised above this fraction of its capacity; EAS is off
/// while any CPU is (the kernel's `cpu_overutilized`, 80%).
pub(in crate::policy) const OVERUTIL: f64 = 0.8;
/// PELT half-life (ms): a contribution loses half its weight every 32 ms
/// (the kernel's `LOAD_AVG_PERIOD`).
pub(in crate::policy) const PELT_HALFLIFE_MS: f64 = 32.0;
/// A task fits a CPU when its utilisation × 1.25 is below the capacity
/// (the kernel's `fits_capacity`, a 20% margin).
pub(in crate::policy) const FIT_MARGIN: f64 = 1.25;
/// `UTIL_EST_MARGIN` = `SCHED_CAPACITY_SCALE / 100`: an EWMA within this of
/// the dequeued utilisation is not updated.
pub(in crate::policy) const UTIL_EST_MARGIN: u32 = 1024 / 100;
/// `UTIL_EST_WEIGHT_SHIFT`: new samples weigh 1/4 in the EWMA.
pub(in crate::policy) const UTIL_EST_WEIGHT_SHIFT: u32 = 2;
/// A new task's utilisation: half the scale (`post_init_entity_util_avg` on
/// an idle system).
pub(in crate::policy) const NEW_TASK_UTIL: f64 = 512.0;

/// Decay factor of PELT over `dt`.
pub(in crate::policy) fn pelt_decay(dt: SimTime) -> f64 {
    0.5f64.powf(dt.0 as f64 * 1e-6 / PELT_HALFLIFE_MS)
}

/// One step of `util_est_update`: the EWMA after a dequeue for sleep with
/// utilisation `dequeued`. Raised to `dequeued` when that is higher; kept
/// within `UTIL_EST_MARGIN`; otherwise `ewma − (ewma − dequeued) / 4` in the
/// kernel's integer arithmetic (`((ewma << 2) − diff) >> 2`).
pub(in crate::policy) fn util_est_ewma(ewma: u32, dequeued: u32) -> u32 {
    if ewma <= dequeued {
        return dequeued;
    }
    let diff = ewma - dequeued;
    if diff < UTIL_EST_MARGIN {
        return ewma;
    }
    ((ewma << UTIL_EST_WEIGHT_SHIFT) - diff) >> UTIL_EST_WEIGHT_SHIFT
}

// ------------------------------------------------------------- the state

/// Per-task load tracking.
#[derive(Clone, Debug, Default)]
struct Load {
    /// PELT utilisation, 0..1024.
    util: f64,
    /// When `util` was last brought up to date.
    util_at: SimTime,
    seen: bool,
    /// util_est's EWMA.
    ewma: u32,
    /// The runqueue whose util_est sum holds this task, and what it added.
    on: Option<(CpuId, u32)>,
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
    /// Publish the sums for `schedutil` (util_est on and the governor is
    /// `schedutil`).
    publish: bool,
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
            publish: false,
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
    }

    fn at(&mut self, t: TaskId) -> &mut Load {
        if t >= self.load.len() {
            self.load.resize(t + 1, Load::default());
        }
        &mut self.load[t]
    }

    /// First enqueue of `t`: a new task starts at half the scale. Whether it
    /// was the first.
    pub(in crate::policy) fn first_seen(&mut self, t: TaskId, now: SimTime) -> bool {
        let l = self.at(t);
        if l.seen {
            return false;
        }
        l.seen = true;
        l.util = NEW_TASK_UTIL;
        l.util_at = now;
        true
    }

    /// Bring `t`'s utilisation up to `now`; `running_on` is the CPU it ran on
    /// since the last update, if it ran.
    pub(in crate::policy) fn update(&mut self, cx: &Ctx, t: TaskId, running_on: Option<CpuId>) {
        let now = cx.now;
        let contrib = running_on.map(|c| cx.capacity(c) as f64).unwrap_or(0.0);
        let l = self.at(t);
        let decay = pelt_decay(now.since(l.util_at));
        l.util = l.util * decay + contrib * (1.0 - decay);
        l.util_at = now;
    }

    /// `t`'s utilisation decayed to now (no update): `task_util`.
    pub(in crate::policy) fn util_now(&self, cx: &Ctx, t: TaskId) -> f64 {
        match self.load.get(t) {
            Some(l) if l.seen => l.util * pelt_decay(cx.now.since(l.util_at)),
            _ => NEW_TASK_UTIL, // a new task (see `first_seen`)
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

    /// `t`'s util_est EWMA.
    pub(in crate::policy) fn ewma(&self, t: TaskId) -> u32 {
        self.load.get(t).map_or(0, |l| l.ewma)
    }

    fn publish(&self, cx: &mut Ctx, cpu: CpuId) {
        if self.publish {
            cx.set_cpu_util_est(cpu, self.rq_est[cpu]);
        }
    }

    /// `util_est_enqueue`: `t` counts on `cpu` (moved from another CPU if it
    /// counted there).
    pub(in crate::policy) fn est_enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
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

    /// `t` ran on `cpu` and goes to sleep (or exits): its utilisation up to
    /// now, `util_est_update` with it, and `util_est_dequeue`.
    pub(in crate::policy) fn sleep(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        if !self.track {
            return;
        }
        self.update(cx, t, Some(cpu));
        if self.util_est {
            let l = self.at(t);
            // The kernel's util_avg is an integer.
            l.ewma = util_est_ewma(l.ewma, l.util as u32);
            self.est_dequeue(cx, t);
        }
    }

    /// `cpu_util`: the utilisation of a CPU whose queued tasks are `queued`
    /// and whose running task is `curr`: the sum of their `util_avg`, or the
    /// runqueue's util_est sum when that is higher.
    pub(in crate::policy) fn cpu_util(
        &self,
        cx: &Ctx,
        cpu: CpuId,
        queued: impl Iterator<Item = TaskId>,
        curr: Option<TaskId>,
    ) -> f64 {
        let q: f64 = queued.map(|t| self.util_now(cx, t)).sum();
        let u = q + curr.map(|t| self.util_now(cx, t)).unwrap_or(0.0);
        if self.util_est {
            u.max(self.rq_est[cpu] as f64)
        } else {
            u
        }
    }

    /// Capacity-aware wake-up placement (`select_idle_capacity`): the first
    /// idle CPU, scanning from `start`, where the task fits; else the idle
    /// CPU with the most capacity; else none.
    pub(in crate::policy) fn select_idle_capacity(
        &self,
        cx: &Ctx,
        t: TaskId,
        start: CpuId,
        is_idle: impl Fn(CpuId) -> bool,
    ) -> Option<CpuId> {
        let util = self.task_util(cx, t);
        let aff = &cx.task(t).affinity;
        let n = cx.ncpus();
        let mut biggest: Option<(u32, CpuId)> = None;
        for i in 0..n {
            let c = (start + i) % n;
            if !aff.contains(c) || !is_idle(c) {
                continue;
            }
            let cap = self.fit_capacity(cx, c);
            if util * FIT_MARGIN < cap as f64 {
                return Some(c);
            }
            if biggest.is_none_or(|(bc, _)| cap > bc) {
                biggest = Some((cap, c));
            }
        }
        biggest.map(|b| b.1)
    }

    /// Misfit (the kernel's `update_misfit_status`), on the tick of `cpu`
    /// running `t` (its utilisation just updated): if it no longer fits, the
    /// idle CPU with more capacity to move it to, the biggest first (active
    /// balancing of a misfit task).
    pub(in crate::policy) fn misfit_target(
        &self,
        cx: &Ctx,
        t: TaskId,
        cpu: CpuId,
        is_idle: impl Fn(CpuId) -> bool,
    ) -> Option<CpuId> {
        let cap = self.fit_capacity(cx, cpu);
        let util = if self.util_est {
            self.task_util(cx, t)
        } else {
            self.load[t].util
        };
        if util * FIT_MARGIN <= cap as f64 {
            return None;
        }
        let aff = &cx.task(t).affinity;
        (0..cx.ncpus())
            .filter(|&c| aff.contains(c) && is_idle(c) && self.fit_capacity(cx, c) > cap)
            .max_by_key(|&c| (self.fit_capacity(cx, c), std::cmp::Reverse(c)))
    }

    /// Estimated power of frequency domain `d` with the given per-CPU
    /// utilisations (the kernel's `em_cpu_energy`): at the lowest P-state
    /// whose capacity covers 1.25 × the highest utilisation (what schedutil
    /// picks), each CPU draws that P-state's busy power for the fraction of
    /// time its utilisation keeps it busy.
    fn domain_power(cx: &Ctx, d: usize, util: &dyn Fn(CpuId) -> f64) -> f64 {
        let m = cx.machine;
        let dom = &m.domains[d];
        let ty = &m.types[dom.ty];
        let max_util = dom.cpus.iter().map(|&c| util(c)).fold(0.0, f64::max);
        let need = FIT_MARGIN * max_util;
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

    /// `find_energy_efficient_cpu`: for each frequency domain, the allowed
    /// CPU with the most spare capacity where the task fits (and the previous
    /// CPU); the one that adds the least estimated power wins. `None` when
    /// EAS does not apply (over-utilised system, or nothing fits). `utils`
    /// holds every CPU's [`CapAware::cpu_util`].
    pub(in crate::policy) fn find_energy_efficient_cpu(
        &self,
        cx: &Ctx,
        t: TaskId,
        prev: Option<CpuId>,
        utils: &[f64],
    ) -> Option<CpuId> {
        let n = cx.ncpus();
        let caps: Vec<f64> = (0..n).map(|c| self.fit_capacity(cx, c) as f64).collect();
        if (0..n).any(|c| utils[c] > OVERUTIL * caps[c]) {
            return None;
        }
        let tu = self.task_util(cx, t);
        let aff = &cx.task(t).affinity;
        let fits =
            |c: CpuId| aff.contains(c) && cx.online(c) && (utils[c] + tu) * FIT_MARGIN < caps[c];
        let mut best: Option<(f64, bool, CpuId)> = None;
        for d in 0..cx.machine.domains.len() {
            let cpus = &cx.machine.domains[d].cpus;
            let mut cands: Vec<CpuId> = Vec::new();
            if let Some(c) = cpus.iter().copied().filter(|&c| fits(c)).max_by(|&a, &b| {
                let sa = caps[a] - utils[a];
                let sb = caps[b] - utils[b];
                sa.partial_cmp(&sb)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(b.cmp(&a))
            }) {
                cands.push(c);
            }
            if let Some(p) = prev.filter(|p| cpus.contains(p) && fits(*p) && !cands.contains(p)) {
                cands.push(p);
            }
            if cands.is_empty() {
                continue;
            }
            let base = Self::domain_power(cx, d, &|c| utils[c]);
            for c in cands {
                let with = Self::domain_power(cx, d, &|x| utils[x] + if x == c { tu } else { 0.0 });
                // Ties favour the previous CPU (cache), then the lowest id.
                let key = (with - base, Some(c) != prev, c);
                if best.is_none_or(|b| {
                    key.0 < b.0 - 1e-12 || (key.0 <= b.0 + 1e-12 && (key.1, key.2) < (b.1, b.2))
                }) {
                    best = Some(key);
                }
            }
        }
        best.map(|b| b.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn util_est_ewma_follows_util_est_update() {
        // Rising: set to the dequeued value.
        assert_eq!(util_est_ewma(100, 300), 300);
        assert_eq!(util_est_ewma(300, 300), 300);
        // Within the margin (10): kept.
        assert_eq!(util_est_ewma(300, 291), 300);
        // diff = 300 − 100 = 200: (1200 − 200) >> 2 = 250.
        assert_eq!(util_est_ewma(300, 100), 250);
        // diff = 250 − 0 = 250: (1000 − 250) >> 2 = 187 (187.5 truncated).
        assert_eq!(util_est_ewma(250, 0), 187);
        // diff exactly the margin: updated, (40 − 10) >> 2 = 7.
        assert_eq!(util_est_ewma(10, 0), 7);
        // Four samples of 0 from 400: 300, 225, 168 (168.75), 126.
        let mut e = 400;
        for want in [300, 225, 168, 126] {
            e = util_est_ewma(e, 0);
            assert_eq!(e, want);
        }
    }

    #[test]
    fn pelt_halves_every_32_ms() {
        assert!((pelt_decay(SimTime::ms(32)) - 0.5).abs() < 1e-12);
        assert!((pelt_decay(SimTime::ms(64)) - 0.25).abs() < 1e-12);
        assert_eq!(pelt_decay(SimTime::ZERO), 1.0);
    }
}
