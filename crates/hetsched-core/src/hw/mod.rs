//! The machine: CPU types, CPUs, topology, frequency domains, and the speed and
//! power models.
//!
//! A CPU is a hardware context. It has a type, a node (socket), a physical
//! core (SMT siblings share one), a last-level-cache domain and a frequency
//! domain. A type gives a capacity out of 1024 (as Linux's `cpu_capacity`),
//! P-states, a speedup per workload class, ISA features and power parameters.
//!
//! The machine description is immutable during a run; the dynamic hardware
//! state (current P-state per domain, which CPUs are busy) lives in the engine.
//!
//! Speed model (`ARCHITECTURE.md`): a compute phase of class `c` running on CPU
//! `p` has compute speed
//! `s = capacity/1024 × f/f_max × duty_cycle × class_speedup[c] × smt_factor × fusion`
//! (the SMT factor applies only while the sibling context is busy; fusion is
//! the speedup of a fused dynamic processor), composed in one place,
//! [`speed`]. A phase
//! with memory intensity `m` (fraction of its reference time stalled on
//! memory) advances at `1 / ((1 − m)/s + m)` reference nanoseconds per
//! nanosecond: the compute part scales with the core, the stall part does not.

pub mod dynamic;
pub mod reconfig;
pub mod speed;

use crate::time::SimTime;

/// Index of a CPU (hardware context), 0-based as in Linux.
pub type CpuId = usize;

/// A performance state: frequency and voltage.
#[derive(Clone, Debug, PartialEq)]
pub struct PState {
    /// Clock frequency in MHz.
    pub mhz: u32,
    /// Supply voltage in volts.
    pub volt: f64,
}

/// Per-type power parameters. While a CPU runs a task its power is
/// `static_w_per_v × V + dyn_w_per_v2ghz × V² × f_GHz × activity`, where the
/// activity is the duty cycle times the fraction of time spent computing plus
/// `stall_activity` times the fraction stalled on memory. An idle CPU draws
/// `idle_w + idle_leak_w_per_v3 × V³ + idle_clock_w_per_v2ghz × V² × f_GHz`
/// at the P-state of its frequency domain (both voltage terms are 0 by
/// default, which leaves idle power independent of the P-state).
#[derive(Clone, Debug, PartialEq)]
pub struct PowerModel {
    /// Dynamic power coefficient, watts per (V² · GHz): the effective switched
    /// capacitance C_eff of `C·V²·f`.
    pub dyn_w_per_v2ghz: f64,
    /// Static (leakage) power per volt of supply while active.
    pub static_w_per_v: f64,
    /// Power of an idle CPU (clock-gated), watts.
    pub idle_w: f64,
    /// Relative switching activity while stalled on memory (0..1).
    pub stall_activity: f64,
    /// Leakage of an idle (halted, not power-gated) CPU, W per V³: leakage
    /// power is `V × I_leak` and the leakage current grows about as `V²`
    /// over a DVFS range, so a core parked at a lower voltage leaks less.
    pub idle_leak_w_per_v3: f64,
    /// Switching that goes on in an idle CPU (clock tree and what clock
    /// gating leaves running), W per (V² · GHz).
    pub idle_clock_w_per_v2ghz: f64,
}

impl Default for PowerModel {
    fn default() -> Self {
        PowerModel {
            dyn_w_per_v2ghz: 1.0,
            static_w_per_v: 0.3,
            idle_w: 0.1,
            stall_activity: 0.3,
            idle_leak_w_per_v3: 0.0,
            idle_clock_w_per_v2ghz: 0.0,
        }
    }
}

/// Power of a package's uncore (northbridge, shared cache, memory
/// controller and the memory behind it) that the CPU power terms do not
/// cover, per node (package). A busy CPU adds `busy_w` plus `stall_w` times
/// the share of its wall time stalled on memory (`1 − cf`, which is
/// `m × rate`: proportional to its memory traffic); every node draws
/// `idle_w` all the time. All 0 by default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UncorePower {
    /// Constant power of each node's uncore, W.
    pub idle_w: f64,
    /// Power per busy CPU (shared-cache and crossbar activity), W.
    pub busy_w: f64,
    /// Power of a busy CPU's memory traffic per unit of stall share, W.
    pub stall_w: f64,
}

impl UncorePower {
    /// The load-dependent uncore power of one busy CPU with compute
    /// fraction `cf`: `busy_w + stall_w × (1 − cf)`.
    #[inline]
    pub fn busy_power(&self, cf: f64) -> f64 {
        self.busy_w + self.stall_w * (1.0 - cf)
    }
}

/// A CPU type (a kind of core).
#[derive(Clone, Debug)]
pub struct CpuType {
    /// Name used in scenario files (`big`, `little`, ...).
    pub name: String,
    /// Capacity at the highest P-state, out of 1024.
    pub capacity: u32,
    /// P-states, sorted by ascending frequency.
    pub pstates: Vec<PState>,
    /// Speedup per workload class, indexed by interned class id (1.0 default).
    pub class_speedup: Vec<f64>,
    /// ISA features as a bit mask over the machine's feature names.
    pub features: u64,
    /// Per-thread throughput factor while both SMT siblings are busy.
    pub smt_factor: f64,
    /// Power model.
    pub power: PowerModel,
    /// Time a frequency change takes to apply.
    pub freq_transition: SimTime,
    /// Performance rating at the highest P-state (Li et al. §4.1), if given;
    /// otherwise the rating is measured from the capacity (the "boot
    /// benchmark": a reference program's speed on this type).
    pub rating: Option<f64>,
}

impl CpuType {
    /// Highest frequency, MHz.
    pub fn fmax(&self) -> u32 {
        self.pstates.last().map(|p| p.mhz).unwrap_or(1000)
    }
    /// Lowest frequency, MHz.
    pub fn fmin(&self) -> u32 {
        self.pstates.first().map(|p| p.mhz).unwrap_or(1000)
    }
    /// Index of the P-state with exactly `mhz`, if any.
    pub fn pstate_index(&self, mhz: u32) -> Option<usize> {
        self.pstates.iter().position(|p| p.mhz == mhz)
    }
    /// Speedup of class `class` on this type.
    #[inline]
    pub fn speedup(&self, class: usize) -> f64 {
        self.class_speedup.get(class).copied().unwrap_or(1.0)
    }
}

/// One CPU (hardware context) of the machine.
#[derive(Clone, Debug)]
pub struct Cpu {
    /// Its index.
    pub id: CpuId,
    /// Index into [`Machine::types`].
    pub ty: usize,
    /// NUMA node / socket.
    pub node: u32,
    /// Global index of the physical core.
    pub core: u32,
    /// Global index of the last-level-cache domain.
    pub llc: u32,
    /// Index into [`Machine::domains`].
    pub domain: usize,
    /// Clock-modulation duty cycle (0, 1], as the papers' emulation uses.
    pub duty_cycle: f64,
    /// Other hardware contexts of the same physical core.
    pub siblings: Vec<CpuId>,
}

/// A frequency domain: CPUs that always run at the same P-state.
#[derive(Clone, Debug)]
pub struct FreqDomain {
    /// Its index.
    pub id: usize,
    /// Its CPUs (all of one type).
    pub cpus: Vec<CpuId>,
    /// Type of its CPUs.
    pub ty: usize,
}

/// Cache-refill cost of a migration (Li et al. §6.1): after moving, a thread
/// refills the caches it does not share with its previous CPU. Between CPUs
/// of one core (SMT) nothing is refilled; within a shared LLC the private
/// cache is refilled from the LLC; across LLCs the working set (up to the LLC
/// size) is refilled from memory. Cost = lines × per-line time.
#[derive(Clone, Debug, PartialEq)]
pub struct MigrationModel {
    /// Whether migrations cost anything.
    pub enabled: bool,
    /// Cache line size, bytes.
    pub line_bytes: f64,
    /// Private (per-core) cache size, KiB.
    pub private_kb: f64,
    /// Last-level cache size, KiB.
    pub llc_kb: f64,
    /// Refill time per line from memory, ns.
    pub mem_line_ns: f64,
    /// Refill time per line from the shared LLC, ns.
    pub llc_line_ns: f64,
}

impl MigrationModel {
    /// Refill time of a working set of `ws_kb` KiB moving from CPU `a` to `b`.
    pub fn cost(&self, m: &Machine, a: CpuId, b: CpuId, ws_kb: f64) -> SimTime {
        if !self.enabled || a == b {
            return SimTime::ZERO;
        }
        let (ca, cb) = (&m.cpus[a], &m.cpus[b]);
        if ca.core == cb.core {
            return SimTime::ZERO;
        }
        let (kb, per_line) = if ca.llc == cb.llc {
            (ws_kb.min(self.private_kb), self.llc_line_ns)
        } else {
            (ws_kb.min(self.llc_kb), self.mem_line_ns)
        };
        SimTime::from_ns_f64(kb * 1024.0 / self.line_bytes * per_line)
    }
}

/// The whole machine.
#[derive(Clone, Debug)]
pub struct Machine {
    /// CPU types.
    pub types: Vec<CpuType>,
    /// CPUs, indexed by [`CpuId`].
    pub cpus: Vec<Cpu>,
    /// Frequency domains.
    pub domains: Vec<FreqDomain>,
    /// Scheduler tick period (1/HZ).
    pub tick: SimTime,
    /// Platform power that does not depend on the CPUs (memory, disks, fans,
    /// power-supply losses), so that watts are watts at the wall.
    pub platform_base_w: f64,
    /// Voltage plane of each frequency domain (indexed by domain). The CPUs
    /// of a plane share one supply voltage: the highest voltage the P-state
    /// of any of its domains asks for. Empty: every domain is its own plane.
    pub voltage_plane: Vec<usize>,
    /// Uncore power of each node.
    pub uncore: UncorePower,
    /// Number of nodes (packages) whose uncore draws `uncore.idle_w`.
    pub nodes: usize,
    /// Reference clock in GHz: one reference nanosecond of work is
    /// `ref_ghz × ipc` instructions.
    pub ref_ghz: f64,
    /// Interned workload class names (index 0 is `default`).
    pub classes: Vec<String>,
    /// Interned ISA feature names (bit i of a type's mask).
    pub features: Vec<String>,
    /// Cache-refill cost of migrations.
    pub migration: MigrationModel,
    /// CPU time a thread loses to the trap of an ISA fault (undefined-opcode
    /// fault, kernel entry, handler), charged when it next runs.
    pub fault_trap: SimTime,
}

impl Machine {
    /// Number of CPUs.
    #[inline]
    pub fn ncpus(&self) -> usize {
        self.cpus.len()
    }
    /// The type of CPU `cpu`.
    #[inline]
    pub fn ty(&self, cpu: CpuId) -> &CpuType {
        &self.types[self.cpus[cpu].ty]
    }
    /// Interned id of a class name.
    pub fn class_id(&self, name: &str) -> Option<usize> {
        self.classes.iter().position(|c| c == name)
    }
    /// Interned id of a feature name.
    pub fn feature_id(&self, name: &str) -> Option<usize> {
        self.features.iter().position(|c| c == name)
    }
    /// Compute speed `s` of CPU `cpu` for class `class` at frequency `mhz`
    /// with the SMT sibling busy or not, for a program without its own SMT
    /// factor and outside fused objects ([`Machine::speed`] composes them).
    #[inline]
    pub fn compute_speed(&self, cpu: CpuId, class: usize, mhz: u32, sibling_busy: bool) -> f64 {
        let w = speed::Work {
            class,
            mem: 0.0,
            smt_factor: None,
        };
        let at = speed::Moment {
            mhz,
            sibling_busy,
            fusion: 1.0,
        };
        self.speed(cpu, &w, &at)
    }

    /// Voltage plane of frequency domain `domain` (module doc of
    /// [`Machine::voltage_plane`]).
    #[inline]
    pub fn plane_of(&self, domain: usize) -> usize {
        self.voltage_plane.get(domain).copied().unwrap_or(domain)
    }

    /// Whether some voltage plane holds more than one frequency domain.
    pub fn has_shared_planes(&self) -> bool {
        let mut seen = std::collections::BTreeSet::new();
        (0..self.domains.len()).any(|d| !seen.insert(self.plane_of(d)))
    }

    /// Supply voltage of a plane whose domains `doms` run at `dom_mhz`
    /// (indexed by domain): the highest voltage any of their P-states asks
    /// for (a frequency that is not a P-state counts as the type's highest).
    pub fn plane_volt(&self, doms: &[usize], dom_mhz: &[u32]) -> f64 {
        doms.iter()
            .map(|&d| {
                let t = &self.types[self.domains[d].ty];
                let i = t.pstate_index(dom_mhz[d]).unwrap_or(t.pstates.len() - 1);
                t.pstates[i].volt
            })
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// Power drawn whatever the load: the platform's and every node's
    /// uncore idle power, W.
    pub fn constant_power_w(&self) -> f64 {
        self.platform_base_w + self.uncore.idle_w * self.nodes as f64
    }

    /// Performance of CPU `cpu` at `mhz` for ratings: the type's given rating
    /// or its capacity, scaled by frequency and duty cycle (so DVFS scales it).
    pub fn perf(&self, cpu: CpuId, mhz: u32) -> f64 {
        let c = &self.cpus[cpu];
        let t = &self.types[c.ty];
        let base = t.rating.unwrap_or(t.capacity as f64);
        base * (mhz as f64 / t.fmax() as f64) * c.duty_cycle
    }
}

/// Progress rate, in reference nanoseconds per nanosecond, of a phase with
/// memory intensity `mem` on a CPU of compute speed `speed`:
/// `1 / ((1 − m)/s + m)`.
#[inline]
pub fn progress_rate(speed: f64, mem: f64) -> f64 {
    if mem <= 0.0 {
        speed
    } else {
        1.0 / ((1.0 - mem) / speed + mem)
    }
}

/// Fraction of wall time spent computing (not stalled) for a phase with
/// memory intensity `mem` at compute speed `speed`.
#[inline]
pub fn compute_fraction(speed: f64, mem: f64) -> f64 {
    if mem <= 0.0 {
        1.0
    } else {
        let c = (1.0 - mem) / speed;
        c / (c + mem)
    }
}

/// Power of a busy CPU of type `t` at P-state `ps`, duty cycle `duty`, for a
/// phase whose compute fraction is `cf`.
#[inline]
pub fn busy_power(t: &CpuType, ps: &PState, duty: f64, cf: f64) -> f64 {
    busy_power_at(t, ps, ps.volt, duty, cf)
}

/// [`busy_power`] at the frequency of `ps` and supply voltage `v` (the
/// voltage of the CPU's plane, which may be above the P-state's own).
#[inline]
pub fn busy_power_at(t: &CpuType, ps: &PState, v: f64, duty: f64, cf: f64) -> f64 {
    let p = &t.power;
    let activity = duty * (cf + p.stall_activity * (1.0 - cf));
    p.static_w_per_v * v + p.dyn_w_per_v2ghz * v * v * (ps.mhz as f64 / 1000.0) * activity
}

/// Power of an idle CPU of type `t` whose frequency domain is at P-state `ps`:
/// `idle_w + idle_leak_w_per_v3 × V³ + idle_clock_w_per_v2ghz × V² × f_GHz`.
/// With both voltage terms 0 (the default) this is `idle_w` at every P-state.
#[inline]
pub fn idle_power(t: &CpuType, ps: &PState) -> f64 {
    idle_power_at(t, ps, ps.volt)
}

/// [`idle_power`] at the frequency of `ps` and supply voltage `v`.
#[inline]
pub fn idle_power_at(t: &CpuType, ps: &PState, v: f64) -> f64 {
    let p = &t.power;
    p.idle_w
        + p.idle_leak_w_per_v3 * v * v * v
        + p.idle_clock_w_per_v2ghz * v * v * (ps.mhz as f64 / 1000.0)
}

/// Number of host CPUs of the fastest type (the "fast cores").
pub fn fast_cores(host: &Machine) -> u32 {
    let perf: Vec<f64> = (0..host.ncpus())
        .map(|c| host.perf(c, host.ty(c).fmax()))
        .collect();
    let best = perf.iter().copied().fold(0.0f64, f64::max);
    let worst = perf.iter().copied().fold(f64::INFINITY, f64::min);
    if best <= worst * (1.0 + 1e-9) {
        return 0;
    }
    perf.iter().filter(|&&p| p >= best * (1.0 - 1e-9)).count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_formula_matches_hand_values() {
        // Pure compute: rate equals speed.
        assert_eq!(progress_rate(0.5, 0.0), 0.5);
        // m = 0.5, s = 2: 1 / (0.5/2 + 0.5) = 1 / 0.75.
        assert!((progress_rate(2.0, 0.5) - 1.0 / 0.75).abs() < 1e-12);
        // Fully memory-bound phases do not speed up at all.
        assert!((progress_rate(4.0, 1.0) - 1.0).abs() < 1e-12);
        // Compute fraction at m = 0.5, s = 2: 0.25 / 0.75 = 1/3.
        assert!((compute_fraction(2.0, 0.5) - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn busy_power_is_static_plus_cv2f() {
        let t = CpuType {
            name: "x".into(),
            capacity: 1024,
            pstates: vec![PState {
                mhz: 2000,
                volt: 1.2,
            }],
            class_speedup: vec![],
            features: 0,
            smt_factor: 1.0,
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
        // 0.5*1.2 + 2.0*1.44*2.0*1.0 = 0.6 + 5.76 = 6.36 W
        assert!((busy_power(&t, &t.pstates[0], 1.0, 1.0) - 6.36).abs() < 1e-12);
        // half stalled with zero stall activity: dynamic part halves
        assert!((busy_power(&t, &t.pstates[0], 1.0, 0.5) - (0.6 + 2.88)).abs() < 1e-12);
    }

    #[test]
    fn idle_power_is_constant_unless_the_voltage_terms_are_set() {
        let mut t = CpuType {
            name: "x".into(),
            capacity: 1024,
            pstates: vec![
                PState {
                    mhz: 800,
                    volt: 0.9,
                },
                PState {
                    mhz: 2000,
                    volt: 1.2,
                },
            ],
            class_speedup: vec![],
            features: 0,
            smt_factor: 1.0,
            power: PowerModel::default(),
            freq_transition: SimTime::ZERO,
            rating: None,
        };
        // Default: 0.1 W at both P-states.
        assert_eq!(idle_power(&t, &t.pstates[0]), 0.1);
        assert_eq!(idle_power(&t, &t.pstates[1]), 0.1);
        t.power.idle_leak_w_per_v3 = 2.0;
        t.power.idle_clock_w_per_v2ghz = 0.5;
        // 0.1 + 2×0.729 + 0.5×0.81×0.8 = 0.1 + 1.458 + 0.324 = 1.882 W
        assert!((idle_power(&t, &t.pstates[0]) - 1.882).abs() < 1e-12);
        // 0.1 + 2×1.728 + 0.5×1.44×2.0 = 0.1 + 3.456 + 1.44 = 4.996 W
        assert!((idle_power(&t, &t.pstates[1]) - 4.996).abs() < 1e-12);
    }

    #[test]
    fn a_plane_runs_at_the_highest_voltage_its_domains_ask_for() {
        let mut t = CpuType {
            name: "x".into(),
            capacity: 1024,
            pstates: vec![
                PState {
                    mhz: 800,
                    volt: 0.9,
                },
                PState {
                    mhz: 2000,
                    volt: 1.2,
                },
            ],
            class_speedup: vec![],
            features: 0,
            smt_factor: 1.0,
            power: PowerModel {
                dyn_w_per_v2ghz: 2.0,
                static_w_per_v: 0.5,
                idle_w: 0.1,
                stall_activity: 0.0,
                idle_leak_w_per_v3: 2.0,
                idle_clock_w_per_v2ghz: 0.5,
            },
            freq_transition: SimTime::ZERO,
            rating: None,
        };
        // Busy at 800 MHz on a 1.2 V plane: 0.5×1.2 + 2×1.44×0.8 = 0.6 + 2.304.
        let slow = &t.pstates[0];
        assert!((busy_power_at(&t, slow, 1.2, 1.0, 1.0) - 2.904).abs() < 1e-12);
        // At its own 0.9 V: 0.45 + 2×0.81×0.8 = 0.45 + 1.296 = 1.746.
        assert!((busy_power(&t, slow, 1.0, 1.0) - 1.746).abs() < 1e-12);
        // Idle at 800 MHz on a 1.2 V plane: 0.1 + 2×1.728 + 0.5×1.44×0.8 = 4.132.
        assert!((idle_power_at(&t, slow, 1.2) - 4.132).abs() < 1e-12);
        t.power.idle_leak_w_per_v3 = 0.0;
        let cpu = |id: usize| Cpu {
            id,
            ty: 0,
            node: 0,
            core: id as u32,
            llc: 0,
            domain: id,
            duty_cycle: 1.0,
            siblings: vec![],
        };
        let m = Machine {
            types: vec![t],
            cpus: vec![cpu(0), cpu(1), cpu(2)],
            domains: (0..3)
                .map(|d| FreqDomain {
                    id: d,
                    cpus: vec![d],
                    ty: 0,
                })
                .collect(),
            tick: SimTime(4_000_000),
            platform_base_w: 10.0,
            voltage_plane: vec![0, 0, 1],
            uncore: UncorePower {
                idle_w: 3.0,
                busy_w: 0.5,
                stall_w: 2.0,
            },
            nodes: 2,
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
        };
        assert!(m.has_shared_planes());
        assert_eq!((m.plane_of(1), m.plane_of(2), m.plane_of(7)), (0, 1, 7));
        // Domains 0 and 1 at 800 and 2000 MHz: the plane is at 1.2 V; both
        // at 800 MHz: 0.9 V.
        assert_eq!(m.plane_volt(&[0, 1], &[800, 2000, 800]), 1.2);
        assert_eq!(m.plane_volt(&[0, 1], &[800, 800, 2000]), 0.9);
        // Platform 10 W + 2 nodes × 3 W of uncore idle.
        assert_eq!(m.constant_power_w(), 16.0);
        // A busy CPU's uncore share: 0.5 + 2 × (1 − 0.25) = 2.0 W.
        assert_eq!(m.uncore.busy_power(0.25), 2.0);
        let own = Machine {
            voltage_plane: vec![],
            ..m
        };
        assert!(!own.has_shared_planes());
    }
}
