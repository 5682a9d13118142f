//! Speed and power of a CPU: the one place where the speed factors are
//! composed.
//!
//! A compute phase of class `c` on CPU `p` runs at
//! `s = capacity/1024 × f/f_max × duty_cycle × class_speedup[c] × smt × fusion`
//! where `smt` is the program's own SMT factor, else the CPU type's, and
//! applies only while an SMT sibling of `p` is busy, and `fusion` is the
//! speedup of a fused object `p` represents (1 otherwise). Its progress rate
//! and power follow from `s` ([`progress_rate`], [`compute_fraction`],
//! [`busy_power`]). The engine asks [`Machine::busy`] and
//! [`Machine::idle_power_at`] and multiplies nothing itself, so a new
//! hardware factor is a field of the machine and one factor here.

use super::{busy_power_at, compute_fraction, idle_power_at, progress_rate, CpuId, Machine};

/// What runs on a CPU, as far as its speed is concerned.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Work {
    /// Workload class (index into the types' `class_speedup`).
    pub class: usize,
    /// Memory intensity: fraction of the reference time stalled on memory.
    pub mem: f64,
    /// The program's own SMT factor, overriding the type's, if it has one.
    pub smt_factor: Option<f64>,
}

/// The state of the machine around a CPU at one moment.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Moment {
    /// Frequency of the CPU's domain, MHz.
    pub mhz: u32,
    /// Whether an SMT sibling of the CPU is busy.
    pub sibling_busy: bool,
    /// Speed factor of a fused object the CPU represents; 1 when none.
    pub fusion: f64,
}

/// Speed, progress rate and power of a busy CPU.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Busy {
    /// Compute speed `s`.
    pub speed: f64,
    /// Progress, reference nanoseconds per nanosecond.
    pub rate: f64,
    /// Power, W.
    pub power: f64,
}

impl Machine {
    /// The SMT factor of `cpu` while a sibling is busy: the running
    /// program's own factor, else its type's.
    #[inline]
    pub fn smt_factor(&self, cpu: CpuId, program: Option<f64>) -> f64 {
        program.unwrap_or_else(|| self.ty(cpu).smt_factor)
    }

    /// The factors that do not depend on the moment:
    /// `capacity/1024 × f/f_max × duty_cycle × class_speedup[class]`.
    #[inline]
    fn base_speed(&self, cpu: CpuId, class: usize, mhz: u32) -> f64 {
        let c = &self.cpus[cpu];
        let t = &self.types[c.ty];
        t.capacity as f64 / 1024.0
            * (mhz as f64 / t.fmax() as f64)
            * c.duty_cycle
            * t.speedup(class)
    }

    /// Compute speed `s` of `cpu` running `w` at moment `at` (module doc).
    #[inline]
    pub fn speed(&self, cpu: CpuId, w: &Work, at: &Moment) -> f64 {
        let mut s = self.base_speed(cpu, w.class, at.mhz);
        if at.sibling_busy {
            s *= self.smt_factor(cpu, w.smt_factor);
        }
        s * at.fusion
    }

    /// Speed, progress rate and power of `cpu` running `w` at moment `at`.
    /// Power is taken at the P-state of `at.mhz` (the highest if `mhz` is
    /// not one of the type's P-states).
    #[inline]
    pub fn busy(&self, cpu: CpuId, w: &Work, at: &Moment) -> Busy {
        self.busy_in_plane(cpu, w, at, None)
    }

    /// [`Machine::busy`] with the supply voltage of the CPU's voltage plane,
    /// `plane_volt` (`None`: its P-state's own voltage). The power is the
    /// core's ([`busy_power_at`]) plus its share of the uncore
    /// ([`super::UncorePower::busy_power`]).
    #[inline]
    pub fn busy_in_plane(
        &self,
        cpu: CpuId,
        w: &Work,
        at: &Moment,
        plane_volt: Option<f64>,
    ) -> Busy {
        let s = self.speed(cpu, w, at);
        let c = &self.cpus[cpu];
        let ty = &self.types[c.ty];
        let ps = &ty.pstates[ty.pstate_index(at.mhz).unwrap_or(ty.pstates.len() - 1)];
        let cf = compute_fraction(s, w.mem);
        let mut power = busy_power_at(ty, ps, plane_volt.unwrap_or(ps.volt), c.duty_cycle, cf);
        if self.uncore.busy_w != 0.0 || self.uncore.stall_w != 0.0 {
            power += self.uncore.busy_power(cf);
        }
        Busy {
            speed: s,
            rate: progress_rate(s, w.mem),
            power,
        }
    }

    /// Power of `cpu` idle while its domain runs at `mhz` (the highest
    /// P-state if `mhz` is not one of the type's).
    #[inline]
    pub fn idle_power_at(&self, cpu: CpuId, mhz: u32) -> f64 {
        self.idle_power_in_plane(cpu, mhz, None)
    }

    /// [`Machine::idle_power_at`] with the supply voltage of the CPU's
    /// voltage plane (`None`: its P-state's own voltage).
    #[inline]
    pub fn idle_power_in_plane(&self, cpu: CpuId, mhz: u32, plane_volt: Option<f64>) -> f64 {
        let ty = self.ty(cpu);
        let ps = &ty.pstates[ty.pstate_index(mhz).unwrap_or(ty.pstates.len() - 1)];
        idle_power_at(ty, ps, plane_volt.unwrap_or(ps.volt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::{Cpu, CpuType, FreqDomain, MigrationModel, PState, PowerModel};
    use crate::time::SimTime;

    /// One core of two SMT contexts, capacity 512 (s = 0.5 at f_max), SMT
    /// factor 0.6, P-states 1000 and 2000 MHz.
    fn smt_core() -> Machine {
        let t = CpuType {
            name: "x".into(),
            capacity: 512,
            pstates: vec![
                PState {
                    mhz: 1000,
                    volt: 0.9,
                },
                PState {
                    mhz: 2000,
                    volt: 1.2,
                },
            ],
            class_speedup: vec![],
            features: 0,
            smt_factor: 0.6,
            power: PowerModel {
                dyn_w_per_v2ghz: 2.0,
                static_w_per_v: 0.5,
                idle_w: 0.1,
                stall_activity: 0.0,
                idle_leak_w_per_v3: 0.0,
                idle_clock_w_per_v2ghz: 0.0,
            },
            freq_transition: SimTime::ZERO,
            rating: None,
        };
        let cpu = |id: usize| Cpu {
            id,
            ty: 0,
            node: 0,
            core: 0,
            llc: 0,
            domain: 0,
            duty_cycle: 1.0,
            siblings: vec![1 - id],
        };
        Machine {
            types: vec![t],
            cpus: vec![cpu(0), cpu(1)],
            domains: vec![FreqDomain {
                id: 0,
                cpus: vec![0, 1],
                ty: 0,
            }],
            tick: SimTime(4_000_000),
            platform_base_w: 0.0,
            voltage_plane: vec![],
            uncore: crate::hw::UncorePower::default(),
            nodes: 1,
            ref_ghz: 1.0,
            classes: vec!["default".into()],
            features: vec![],
            migration: MigrationModel {
                enabled: false,
                line_bytes: 64.0,
                private_kb: 0.0,
                llc_kb: 0.0,
                mem_line_ns: 0.0,
                llc_line_ns: 0.0,
            },
            fault_trap: SimTime::ZERO,
        }
    }

    #[test]
    fn every_factor_is_composed_once() {
        let m = smt_core();
        let w = Work {
            class: 0,
            mem: 0.0,
            smt_factor: None,
        };
        let alone = Moment {
            mhz: 2000,
            sibling_busy: false,
            fusion: 1.0,
        };
        // 512/1024 × 2000/2000 × duty 1 × class speedup 1 = 0.5.
        assert_eq!(m.speed(0, &w, &alone), 0.5);
        // Half the frequency and a fused object of speedup 2: 0.5 × 0.5 × 2.
        let half = Moment {
            mhz: 1000,
            fusion: 2.0,
            ..alone
        };
        assert_eq!(m.speed(0, &w, &half), 0.5);
        // A busy sibling: the type's factor, 0.5 × 0.6 = 0.3, or the
        // program's own, 0.5 × 0.25 = 0.125.
        let busy = Moment {
            sibling_busy: true,
            ..alone
        };
        assert!((m.speed(0, &w, &busy) - 0.3).abs() < 1e-15);
        let own = Work {
            smt_factor: Some(0.25),
            ..w
        };
        assert_eq!(m.speed(0, &own, &busy), 0.125);
        assert_eq!(m.compute_speed(0, 0, 2000, true), m.speed(0, &w, &busy));
        // Pure compute: rate = speed; power 0.5×1.2 + 2×1.44×2×1 = 6.36 W.
        let b = m.busy(0, &w, &alone);
        assert_eq!(b.rate, 0.5);
        assert!((b.power - 6.36).abs() < 1e-12);
        // Half memory-bound: rate 1/(0.5/0.5 + 0.5) = 2/3; compute fraction
        // 1/1.5 = 2/3, so the dynamic part is 2/3 of 5.76 W.
        let b = m.busy(0, &Work { mem: 0.5, ..w }, &alone);
        assert!((b.rate - 2.0 / 3.0).abs() < 1e-12);
        assert!((b.power - (0.6 + 5.76 * 2.0 / 3.0)).abs() < 1e-12);
        assert_eq!(m.idle_power_at(0, 1000), 0.1);
    }
}
