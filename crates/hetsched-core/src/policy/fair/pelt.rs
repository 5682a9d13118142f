//! Per-entity load tracking (PELT) in the kernel's own arithmetic
//! (kernel/sched/pelt.c and sched-pelt.h of Linux 6.x): the utilisation of
//! a task is a sum of its running time per period of 1024 units of 1024 ns
//! (about 1 ms), each period weighed `y` times the next newer one, with
//! `y³² = ½` (`LOAD_AVG_PERIOD` = 32: a 32-period half-life), in integers:
//!
//! * time advances in whole 1024 ns units (`___update_load_sum`); a sum
//!   changes its average only when an update crosses a period boundary;
//! * `decay_load(v, n)` = `v · yⁿ` as `v` halved once per 32 periods, then
//!   multiplied by `⌊(2³² − 1) · yᵏ⌋ / 2³²` for the remaining `k` < 32;
//! * the time since the last update splits into the end of the period it
//!   began in (`d1`), whole periods (`d2`), and the start of the current
//!   one (`d3`); only `d1` and `d2` decay (`accumulate_sum`,
//!   `__accumulate_pelt_segments`);
//! * the average is the sum over `LOAD_AVG_MAX − 1024 + period_contrib`,
//!   the largest sum the elapsed part of the current period allows
//!   (`get_pelt_divider`), an integer division.
//!
//! Invariance is the kernel's (since Linux 5.1, `update_rq_clock_pelt`
//! and `update_idle_rq_clock_pelt` in pelt.h): a running entity adds 1024
//! per unit of its CPU's **PELT clock** ([`PeltClock`]), which runs at the
//! CPU's present capacity (its `arch_scale_cpu_capacity` × the frequency
//! scale, out of 1024) while a task runs and catches up with real time when
//! the CPU idles; the time it fell behind is then counted as idle (decay),
//! unless the CPU's utilisation had reached the maximum, in which case it
//! is lost (`lost_idle_time`). So a task that ran 60 ms on a CPU at a tenth
//! of the biggest CPU's speed counts as 6 ms of running and 54 ms of idle.
//!
//! What the model does its own way: the clock's rate between two of its
//! updates (the scheduler's updates of a task on that CPU: enqueue, pick,
//! stop, tick) is the CPU's capacity at the second (the kernel reads the
//! frequency scale at each rq clock update, which is more often), and a
//! CPU counts as saturated at idle
//! entry when the task that last ran there is (the kernel sums every task
//! attached to the runqueue, blocked ones included).

use super::mul_div;

/// `LOAD_AVG_PERIOD`: periods in a half-life.
pub(in crate::policy) const LOAD_AVG_PERIOD: u64 = 32;
/// `LOAD_AVG_MAX`: the largest sum of the series `1024 · Σ yⁿ` in the
/// kernel's integer steps (sched-pelt.h).
pub(in crate::policy) const LOAD_AVG_MAX: u64 = 47742;
/// `PELT_MIN_DIVIDER` = `LOAD_AVG_MAX − 1024`.
pub(in crate::policy) const PELT_MIN_DIVIDER: u64 = LOAD_AVG_MAX - 1024;
/// Units (of 1024 ns) in a period.
const PERIOD_UNITS: u64 = 1024;

/// `runnable_avg_yN_inv`: `⌊(2³² − 1) · yᵏ⌋` for `k` = 0..31, `y = ½^(1/32)`
/// (the values of sched-pelt.h; `y_inv_follows_its_formula` recomputes
/// them).
const Y_INV: [u32; 32] = [
    0xffff_ffff,
    0xfa83_b2da,
    0xf525_7d14,
    0xefe4_b99a,
    0xeac0_c6e6,
    0xe5b9_06e6,
    0xe0cc_deeb,
    0xdbfb_b796,
    0xd744_fcc9,
    0xd2a8_1d91,
    0xce24_8c14,
    0xc9b9_bd85,
    0xc567_2a10,
    0xc12c_4cc9,
    0xbd08_a39e,
    0xb8fb_af46,
    0xb504_f333,
    0xb123_f581,
    0xad58_3ee9,
    0xa9a1_5ab4,
    0xa5fe_d6a9,
    0xa270_4302,
    0x9ef5_325f,
    0x9b8d_39b9,
    0x9837_f050,
    0x94f4_efa8,
    0x91c3_d373,
    0x8ea4_398a,
    0x8b95_c1e3,
    0x8898_0e80,
    0x85aa_c367,
    0x82cd_8698,
];

/// `decay_load`: `val · yⁿ` in the kernel's steps (0 past 63 half-lives).
#[inline]
pub(in crate::policy) fn decay_load(val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let halvings = n / LOAD_AVG_PERIOD;
    let k = (n % LOAD_AVG_PERIOD) as usize;
    // `mul_u64_u32_shr(v, y_inv, 32)`.
    mul_div(val >> halvings, Y_INV[k] as u64, 1 << 32)
}

/// `__accumulate_pelt_segments`: the contribution of `d1` units at the end
/// of the first period, `periods − 1` whole periods, and `d3` units of the
/// current one, each decayed by its age in periods.
#[inline]
fn segments(periods: u64, d1: u64, d3: u64) -> u64 {
    let c1 = decay_load(d1, periods);
    let c2 = LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - PERIOD_UNITS;
    c1 + c2 + d3
}

/// Per `period_contrib` (0..1024), the reciprocal of its PELT divider
/// `PELT_MIN_DIVIDER + period_contrib` as `⌈2⁶⁴ / divider⌉`: the averages'
/// divisions become a multiplication (see [`div_by_divider`]).
const RECIPROCALS: [u64; PERIOD_UNITS as usize] = {
    let mut r = [0u64; PERIOD_UNITS as usize];
    let mut i = 0;
    while i < PERIOD_UNITS as usize {
        r[i] = u64::MAX / (PELT_MIN_DIVIDER + i as u64) + 1;
        i += 1;
    }
    r
};

/// Sums below this divide exactly by [`RECIPROCALS`]: with `m = ⌈2⁶⁴/d⌉ =
/// (2⁶⁴ + e)/d`, `0 < e < d`, the product `x·m / 2⁶⁴` exceeds `x/d` by
/// `x·e / (d·2⁶⁴)`, less than `1/d` (which cannot carry it past the next
/// integer) while `x·e < 2⁶⁴`, so for every `x < 2⁶⁴/d`: above 2⁴⁸ for
/// every divider (< 2¹⁶). A task's sums stay below 2²⁶; a runqueue's are
/// sums of its tasks'.
const EXACT_BELOW: u64 = 1 << 48;

/// `sum / (PELT_MIN_DIVIDER + period_contrib)`, the kernel's averages'
/// division, as a multiplication by the divider's reciprocal where that is
/// exact (always, in practice), else a division.
#[inline(always)]
fn div_by_divider(sum: u64, period_contrib: u64) -> u64 {
    let i = period_contrib as usize & (PERIOD_UNITS as usize - 1);
    debug_assert_eq!(i as u64, period_contrib);
    if sum < EXACT_BELOW {
        ((sum as u128 * RECIPROCALS[i] as u128) >> 64) as u64
    } else {
        sum / (PELT_MIN_DIVIDER + period_contrib)
    }
}

/// `util_sum` at or above which a runqueue counts as always running
/// (`update_idle_rq_clock_pelt`'s divider).
pub(in crate::policy) const SATURATED_SUM: u64 = (PELT_MIN_DIVIDER << 10) - LOAD_AVG_MAX;

/// One entity's utilisation and runnable signals (`struct sched_avg`'s
/// util and runnable parts), in the PELT clock of the CPU it is attached
/// to.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::policy) struct Pelt {
    /// `last_update_time`, ns of PELT clock: advanced by whole 1024 ns
    /// units only.
    last: u64,
    /// `util_sum`: running units × 1024, decayed per period.
    util_sum: u64,
    /// `runnable_sum`: runnable (running or waiting) units × 1024.
    runnable_sum: u64,
    /// `period_contrib`: units already elapsed in the current period.
    period_contrib: u64,
    /// `util_avg`, 0..=1024.
    util_avg: u32,
    /// `runnable_avg`, 0..=1024.
    runnable_avg: u32,
}

impl Pelt {
    /// A signal whose averages are `util` and `runnable` at PELT time `now`
    /// (ns), as `attach_entity_load_avg` sets them: the sums those averages
    /// stand for at the present point of the period.
    pub(in crate::policy) fn start(now: u64, util: u32, runnable: u32) -> Pelt {
        let units = now >> 10;
        let period_contrib = units % PERIOD_UNITS;
        let divider = PELT_MIN_DIVIDER + period_contrib;
        Pelt {
            last: units << 10,
            util_sum: util as u64 * divider,
            runnable_sum: runnable as u64 * divider,
            period_contrib,
            util_avg: util,
            runnable_avg: runnable,
        }
    }

    /// `runnable_avg`.
    #[inline]
    pub(in crate::policy) fn runnable(&self) -> u32 {
        self.runnable_avg
    }

    /// `util_avg`.
    #[inline]
    pub(in crate::policy) fn util(&self) -> u32 {
        self.util_avg
    }

    /// `util_sum`.
    #[inline]
    pub(in crate::policy) fn util_sum(&self) -> u64 {
        self.util_sum
    }

    /// `___update_load_sum` and `___update_load_avg`: bring the signals up
    /// to PELT time `now` (ns); since the last update the entity ran
    /// (`running`, which implies `runnable`), waited for a CPU (`runnable`
    /// only) or slept (neither).
    #[inline(always)]
    pub(in crate::policy) fn update(&mut self, now: u64, running: bool, runnable: bool) {
        let Some(elapsed) = now.checked_sub(self.last) else {
            return;
        };
        let delta = elapsed >> 10;
        if delta == 0 {
            return;
        }
        self.last += delta << 10;
        let total = delta + self.period_contrib;
        let periods = total / PERIOD_UNITS;
        let rem = total % PERIOD_UNITS;
        // Without a boundary crossed the new units count whole.
        let mut contrib = delta;
        let runnable = runnable || running;
        if periods > 0 {
            self.util_sum = decay_load(self.util_sum, periods);
            self.runnable_sum = decay_load(self.runnable_sum, periods);
            if runnable {
                contrib = segments(periods, PERIOD_UNITS - self.period_contrib, rem);
            }
        }
        self.period_contrib = rem;
        if runnable {
            self.runnable_sum += contrib << 10;
        }
        if running {
            self.util_sum += contrib << 10;
        }
        if periods > 0 {
            self.util_avg = div_by_divider(self.util_sum, rem) as u32;
            self.runnable_avg = div_by_divider(self.runnable_sum, rem) as u32;
        }
    }

    /// `attach_entity_load_avg`'s part for the runqueue's utilisation:
    /// `e`'s average and sum join this (runqueue's) signal; `e` was started
    /// at this signal's point in the period ([`Pelt::start`]).
    #[inline]
    pub(in crate::policy) fn add_util(&mut self, e: &Pelt) {
        self.util_avg += e.util_avg;
        self.util_sum += e.util_sum;
    }

    /// `detach_entity_load_avg`'s part for the runqueue's utilisation: `e`'s
    /// average and sum leave this signal, neither going below zero, and the
    /// sum not below what the remaining average needs (the kernel's
    /// `util_avg × PELT_MIN_DIVIDER` floor against rounding).
    #[inline]
    pub(in crate::policy) fn sub_util(&mut self, e: &Pelt) {
        self.util_avg = self.util_avg.saturating_sub(e.util_avg);
        self.util_sum = self
            .util_sum
            .saturating_sub(e.util_sum)
            .max(self.util_avg as u64 * PELT_MIN_DIVIDER);
    }

    /// The average the signal would have at PELT time `now` had it not
    /// run since its last update (`sync_entity_load_avg` for a task that is
    /// not running).
    #[inline]
    pub(in crate::policy) fn util_at(&self, now: u64) -> u32 {
        let mut p = *self;
        p.update(now, false, false);
        p.util_avg
    }
}

/// A CPU's PELT clock: `rq->clock_pelt` and `rq->lost_idle_time`.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::policy) struct PeltClock {
    /// Simulated time (ns) the clock was last brought up to.
    at: u64,
    /// `clock_pelt` then (ns).
    raw: u64,
    /// `lost_idle_time` (ns).
    lost: u64,
    /// A task ran from `at` on (else the CPU idled from `at` on).
    busy: bool,
    /// It went idle at `at` with its utilisation at the maximum.
    saturated: bool,
}

impl PeltClock {
    /// `clock_pelt` and `lost_idle_time` at simulated time `now`, the CPU
    /// at capacity `cap` (out of 1024) if it ran since `at`.
    #[inline]
    fn at_time(&self, now: u64, cap: u32) -> (u64, u64) {
        let dt = now.saturating_sub(self.at);
        if self.busy {
            // `update_rq_clock_pelt`: the elapsed time scaled to the work
            // the CPU could do.
            (self.raw + mul_div(dt, cap as u64, 1024), self.lost)
        } else if dt == 0 {
            (self.raw, self.lost)
        } else {
            // `update_idle_rq_clock_pelt` at idle entry, then synced with
            // real time while idle.
            let lost = if self.saturated {
                self.lost + (self.at - self.raw)
            } else {
                self.lost
            };
            (now, lost)
        }
    }

    /// `rq_clock_pelt` at simulated time `now` (ns).
    #[inline]
    pub(in crate::policy) fn now(&self, now: u64, cap: u32) -> u64 {
        let (raw, lost) = self.at_time(now, cap);
        raw - lost
    }

    /// Bring the clock up to `now` and read it (`update_rq_clock_pelt`
    /// at a scheduler event: the rate since the last one is `cap`).
    #[inline]
    pub(in crate::policy) fn advance_to(&mut self, now: u64, cap: u32) -> u64 {
        self.advance(now, cap);
        self.raw - self.lost
    }

    /// Whether a task runs on the CPU (as far as the clock knows).
    #[inline]
    pub(in crate::policy) fn busy(&self) -> bool {
        self.busy
    }

    /// Bring the clock up to `now`.
    #[inline]
    fn advance(&mut self, now: u64, cap: u32) {
        let (raw, lost) = self.at_time(now, cap);
        if now > self.at {
            self.saturated = self.saturated && self.busy;
        }
        (self.raw, self.lost, self.at) = (raw, lost, now.max(self.at));
    }

    /// A task starts running at `now` (the CPU ran at `cap` or idled
    /// until then).
    #[inline]
    pub(in crate::policy) fn run(&mut self, now: u64, cap: u32) {
        self.advance(now, cap);
        self.busy = true;
    }

    /// The CPU goes idle at `now`, its utilisation at the maximum when
    /// `saturated`.
    #[inline]
    pub(in crate::policy) fn idle(&mut self, now: u64, cap: u32, saturated: bool) {
        self.advance(now, cap);
        if self.busy {
            self.busy = false;
            self.saturated = saturated;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runqueue_takes_in_and_gives_up_an_entitys_utilisation() {
        let now = 5_000_000;
        let mut rq = Pelt::start(now, 300, 0);
        let before = rq;
        let e = Pelt::start(now, 200, 200);
        rq.add_util(&e);
        assert_eq!(
            (rq.util(), rq.util_sum()),
            (500, before.util_sum() + e.util_sum())
        );
        rq.sub_util(&e);
        assert_eq!(
            (rq.util(), rq.util_sum()),
            (before.util(), before.util_sum())
        );
        // More than it holds: nothing below zero.
        let big = Pelt::start(now, 900, 900);
        rq.sub_util(&big);
        assert_eq!((rq.util(), rq.util_sum()), (0, 0));
        // The sum never below what the average left needs.
        let mut rq = Pelt::start(now, 300, 0);
        let mut lopsided = Pelt::start(now, 100, 0);
        lopsided.util_sum = rq.util_sum();
        rq.sub_util(&lopsided);
        assert_eq!(rq.util(), 200);
        assert_eq!(rq.util_sum(), 200 * PELT_MIN_DIVIDER);
    }

    #[test]
    fn reciprocal_division_is_the_division() {
        // Every divider, at the ends of the exact range and at random sums
        // below it (a fixed generator: the test is the same every run).
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for pc in 0..PERIOD_UNITS {
            let d = PELT_MIN_DIVIDER + pc;
            for sum in [
                0,
                1,
                d - 1,
                d,
                d + 1,
                EXACT_BELOW - 1,
                EXACT_BELOW,
                u64::MAX,
            ] {
                assert_eq!(div_by_divider(sum, pc), sum / d, "{sum} / {d}");
            }
            // Just below a multiple of the divider is where a reciprocal
            // rounds up first; the largest multiples below the bound most.
            let top = (EXACT_BELOW - 1) / d;
            for k in (1..200).chain(top - 200..=top) {
                for sum in [k * d - 1, k * d] {
                    assert_eq!(div_by_divider(sum, pc), sum / d, "{sum} / {d}");
                }
            }
            for _ in 0..2_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let sum = x % EXACT_BELOW;
                assert_eq!(div_by_divider(sum, pc), sum / d, "{sum} / {d}");
            }
        }
    }

    #[test]
    fn y_inv_follows_its_formula() {
        let y = 0.5f64.powf(1.0 / 32.0);
        for (k, &v) in Y_INV.iter().enumerate() {
            let want = ((u32::MAX as f64) * y.powf(k as f64)) as u32;
            assert_eq!(v, want, "y_inv[{k}]");
        }
    }

    #[test]
    fn load_avg_max_is_the_fixed_point_of_one_period() {
        // LOAD_AVG_MAX · y + 1024 gives LOAD_AVG_MAX back, in the kernel's
        // integer steps, within the rounding of one multiplication.
        let next = decay_load(LOAD_AVG_MAX, 1) + 1024;
        assert!(next.abs_diff(LOAD_AVG_MAX) <= 1, "{next}");
    }

    #[test]
    fn decay_halves_every_32_periods() {
        assert_eq!(decay_load(1 << 20, 0), (1 << 20) - 1); // y⁰ = (2³² − 1)/2³²
        assert_eq!(decay_load(1 << 20, 32), (1 << 19) - 1);
        assert_eq!(decay_load(1 << 20, 64), (1 << 18) - 1);
        assert_eq!(decay_load(u64::MAX, 32 * 63 + 1), 0);
        // 100 · y³¹ = 51 (y_inv[31] / 2³² = 0.5109).
        assert_eq!(decay_load(100, 31), 51);
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn an_entity_that_always_runs_converges_to_1024() {
        let mut p = Pelt::start(0, 0, 0);
        for ms in 1..=1000 {
            p.update(ms * MS, true, true);
        }
        // 1024 · (1 − y^(≈954 periods)) in integer steps: the kernel's
        // util_avg of an always-running task tops out just below 1024.
        assert!((1000..=1024).contains(&p.util()), "{}", p.util());
        // 20 ms from 0: 1024 · (1 − y^19.07) = 346 (periods of 1.048576 ms).
        let mut q = Pelt::start(0, 0, 0);
        q.update(20 * MS, true, true);
        assert!(q.util().abs_diff(346) <= 2, "{}", q.util());
    }

    #[test]
    fn a_sleeping_entity_halves_every_32_periods() {
        // Start at a period boundary with util 800; 32 periods of sleep
        // (32 · 1024 · 1024 ns) halve it, up to integer rounding.
        let p0 = Pelt::start(0, 800, 800);
        let half = p0.util_at(32 * 1024 * 1024);
        assert!(half.abs_diff(400) <= 1, "{half}");
        // Inside the first period nothing changes (no boundary crossed).
        assert_eq!(p0.util_at(1023 * 1024), 800);
        // Less than a unit changes nothing at all.
        let mut p = p0;
        p.update(1023, true, true);
        assert_eq!((p.last, p.util_sum), (p0.last, p0.util_sum));
    }

    #[test]
    fn updates_in_steps_give_the_sum_of_one_update() {
        // The sum does not depend on where the updates fall, as long as the
        // entity did the same thing throughout (the decay is per period).
        let mut one = Pelt::start(300_000, 200, 200);
        let mut many = one;
        one.update(47_300_000, true, true);
        let mut t = 300_000;
        while t < 47_300_000 {
            t = (t + 1_337_000).min(47_300_000);
            many.update(t, true, true);
        }
        assert_eq!(one.period_contrib, many.period_contrib);
        // Integer truncation in each decay may lose a unit per step.
        let lost = one.util_sum.abs_diff(many.util_sum);
        assert!(lost <= 36 * 1024, "{} vs {}", one.util_sum, many.util_sum);
        assert!(one.util().abs_diff(many.util()) <= 1);
    }

    #[test]
    fn the_clock_runs_at_the_capacity_and_catches_up_when_idle() {
        let mut c = PeltClock::default();
        c.run(0, 512);
        assert_eq!(c.now(10 * MS, 512), 5 * MS);
        c.idle(10 * MS, 512, false);
        // Idle: synced with real time.
        assert_eq!(c.now(10 * MS, 512), 5 * MS); // not before time passes
        assert_eq!(c.now(20 * MS, 512), 20 * MS);
        c.run(20 * MS, 1024);
        assert_eq!(c.now(30 * MS, 1024), 30 * MS);
        // The rate changes at an update: what went before keeps its rate.
        assert_eq!(c.advance_to(30 * MS, 1024), 30 * MS);
        assert_eq!(c.advance_to(40 * MS, 256), 32500 * 1000);
        assert!(c.busy());
        // Saturated at idle entry: the time it fell behind is lost.
        let mut s = PeltClock::default();
        s.run(0, 512);
        s.idle(10 * MS, 512, true);
        assert_eq!(s.now(20 * MS, 512), 15 * MS);
        s.run(20 * MS, 512);
        assert_eq!(s.now(30 * MS, 512), 20 * MS);
        // An idle of no length (stop and run at one instant) syncs nothing.
        let mut z = PeltClock::default();
        z.run(0, 256);
        z.idle(8 * MS, 256, false);
        z.run(8 * MS, 256);
        assert_eq!(z.now(16 * MS, 256), 4 * MS);
    }

    #[test]
    fn running_slowly_counts_as_the_work_done() {
        // 60 ms at a tenth of the biggest CPU's speed, then idle, on the
        // CPU's clock: the same utilisation as 6 ms at full speed, at the
        // end of the run and 100 ms after its start.
        let track = |cap: u32, run_ms: u64| {
            let mut c = PeltClock::default();
            c.run(0, cap);
            let mut p = Pelt::start(0, 100, 100);
            p.update(c.now(run_ms * MS, cap), true, true);
            let after_run = p.util();
            c.idle(run_ms * MS, cap, false);
            p.update(c.now(100 * MS, cap), false, false);
            (after_run, p.util())
        };
        let slow = track(102, 60); // 102/1024 ≈ 0.1
        let fast = track(1024, 6);
        assert!(slow.0.abs_diff(fast.0) <= 2, "{slow:?} vs {fast:?}");
        assert!(slow.1.abs_diff(fast.1) <= 1, "{slow:?} vs {fast:?}");
        // Scaled in the contribution instead, the signal would fall toward
        // 102 while the task runs; on the clock it rises.
        assert!(slow.0 > 190, "{slow:?}");
    }

    #[test]
    fn waiting_counts_as_runnable_not_as_running() {
        // 10 ms waiting, then 10 ms running, from nothing: runnable_avg
        // holds both, util_avg the running part only (decayed alike).
        let mut p = Pelt::start(0, 0, 0);
        p.update(10 * MS, false, true);
        assert_eq!(p.util(), 0);
        let waited = p.runnable();
        assert!(waited > 150, "{waited}");
        p.update(20 * MS, true, true);
        let mut r = Pelt::start(0, 0, 0);
        r.update(20 * MS, true, true);
        // 20 ms runnable either way; 10 ms running is less than 20.
        assert!(
            p.runnable().abs_diff(r.runnable()) <= 1,
            "{} {}",
            p.runnable(),
            r.runnable()
        );
        assert!(p.util() < r.util() * 2 / 3, "{} {}", p.util(), r.util());
        // Asleep, both decay.
        let (u, rn) = (p.util(), p.runnable());
        p.update(60 * MS, false, false);
        assert!(p.util() < u / 2 && p.runnable() < rn / 2);
    }
}
