//! Simulated time.
//!
//! All simulated time is integer nanoseconds (`SimTime(u64)`): no floating
//! point ever decides an event order, so two runs of the same scenario and
//! seed produce the same sequence of events on every machine. Durations use
//! the same type. 2^64 ns is about 584 years of simulated time.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in (or a span of) simulated time, in nanoseconds.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct SimTime(pub u64);

impl SimTime {
    /// Time zero, the start of every run.
    pub const ZERO: SimTime = SimTime(0);
    /// The end of time; used for "never".
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// Nanoseconds.
    #[inline]
    pub const fn ns(ns: u64) -> SimTime {
        SimTime(ns)
    }
    /// Microseconds.
    #[inline]
    pub const fn us(us: u64) -> SimTime {
        SimTime(us * 1_000)
    }
    /// Milliseconds.
    #[inline]
    pub const fn ms(ms: u64) -> SimTime {
        SimTime(ms * 1_000_000)
    }
    /// Seconds.
    #[inline]
    pub const fn secs(s: u64) -> SimTime {
        SimTime(s * 1_000_000_000)
    }
    /// From fractional milliseconds, rounded to the nearest nanosecond.
    /// Negative or non-finite inputs saturate to zero / MAX; callers that take
    /// user input validate before converting.
    pub fn from_ms_f64(ms: f64) -> SimTime {
        Self::from_ns_f64(ms * 1e6)
    }
    /// From fractional seconds, rounded to the nearest nanosecond.
    pub fn from_secs_f64(s: f64) -> SimTime {
        Self::from_ns_f64(s * 1e9)
    }
    /// From fractional nanoseconds, rounded to nearest (saturating).
    pub fn from_ns_f64(ns: f64) -> SimTime {
        if ns.is_nan() || ns <= 0.0 {
            SimTime(0)
        } else if ns >= u64::MAX as f64 {
            SimTime::MAX
        } else {
            SimTime(ns.round() as u64)
        }
    }
    /// As fractional seconds (for reporting only).
    #[inline]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    /// As fractional milliseconds (for reporting only).
    #[inline]
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }
    /// Saturating addition.
    #[inline]
    pub fn saturating_add(self, d: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
    /// `self - earlier`, or zero if `earlier` is later.
    #[inline]
    pub fn since(self, earlier: SimTime) -> SimTime {
        SimTime(self.0.saturating_sub(earlier.0))
    }
}

impl Add for SimTime {
    type Output = SimTime;
    #[inline]
    fn add(self, rhs: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for SimTime {
    #[inline]
    fn add_assign(&mut self, rhs: SimTime) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub for SimTime {
    type Output = SimTime;
    #[inline]
    fn sub(self, rhs: SimTime) -> SimTime {
        SimTime(self.0.saturating_sub(rhs.0))
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= 1_000_000_000 {
            write!(f, "{:.6} s", self.as_secs_f64())
        } else if ns >= 1_000_000 {
            write!(f, "{:.3} ms", self.as_ms_f64())
        } else if ns >= 1_000 {
            write!(f, "{:.3} us", ns as f64 / 1e3)
        } else {
            write!(f, "{} ns", ns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_to_nearest_ns() {
        assert_eq!(SimTime::from_ms_f64(1.5), SimTime(1_500_000));
        assert_eq!(SimTime::from_secs_f64(0.25), SimTime::ms(250));
        assert_eq!(SimTime::from_ns_f64(-3.0), SimTime::ZERO);
        assert_eq!(SimTime::from_ns_f64(f64::INFINITY), SimTime::MAX);
        assert_eq!(SimTime::ms(3) - SimTime::ms(5), SimTime::ZERO);
        assert_eq!(SimTime::MAX + SimTime::ms(1), SimTime::MAX);
    }

    #[test]
    fn display_picks_a_readable_unit() {
        assert_eq!(SimTime::ms(4).to_string(), "4.000 ms");
        assert_eq!(SimTime::ns(12).to_string(), "12 ns");
        assert_eq!(SimTime::secs(2).to_string(), "2.000000 s");
    }
}
