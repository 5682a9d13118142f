//! cpufreq governors with Linux semantics (kernel documentation
//! `Documentation/admin-guide/pm/cpufreq.rst` and `schedutil.rst`):
//!
//! * `performance` (highest P-state), `powersave` (lowest), `userspace` (a
//!   fixed frequency per domain, settable later by an agent);
//! * `ondemand` and `conservative`, the sampling governors built on the
//!   kernel's `dbs_update()` (`drivers/cpufreq/cpufreq_governor.c`): every
//!   sampling period the load of a frequency domain (a cpufreq *policy*) is
//!   the highest busy percentage among its CPUs since the last evaluation,
//!   `load = 100 × Δbusy / Δt` floored to an integer as in the kernel;
//! * `schedutil`, which sets the frequency from a PELT-like,
//!   frequency-invariant utilisation (`kernel/sched/cpufreq_schedutil.c`).
//!
//! Frequencies are computed in kHz, as cpufreq does, and resolved to a
//! P-state with the kernel's relations: `CPUFREQ_RELATION_L` (the lowest
//! P-state at or above the target) and `CPUFREQ_RELATION_H` (the highest at or
//! below it), after clamping the target to `[fmin, fmax]`.
//!
//! The governors only call `set_frequency`, and only when the target differs
//! from the current P-state (or from the one already in flight when the type
//! has a `freq_transition_us`), as `__cpufreq_driver_target` does. Their state
//! is kept in vectors indexed by CPU and domain, so decisions are
//! deterministic.
//!
//! Two `dbs_update()` heuristics never fire here and are left out: the reuse
//! of the previous load after an idle time longer than two sampling periods,
//! and conservative's `idle_periods` catch-up. Both exist because the kernel's
//! sampling is deferred while a CPU sleeps; the simulator samples exactly on
//! time, so the idle time of one evaluation never exceeds its interval.

use super::fair::cap::effective_perf;
use super::{About, Ctx, Governor, ParamDef, Params, PolicySpec};
use crate::hw::{CpuType, Machine};
use crate::time::SimTime;

/// Registry entry of `performance`.
pub fn performance_info() -> About {
    About {
        name: "performance",
        doc: "Every domain at its highest P-state",
        params: vec![],
    }
}
/// Registry entry of `powersave`.
pub fn powersave_info() -> About {
    About {
        name: "powersave",
        doc: "Every domain at its lowest P-state",
        params: vec![],
    }
}
/// Registry entry of `userspace`.
pub fn userspace_info() -> About {
    About {
        name: "userspace",
        doc: "A fixed frequency for every domain (must be one of each domain's P-states); agents may change it",
        params: vec![ParamDef { name: "mhz", default: "max", doc: "frequency in MHz, or max / min" }],
    }
}

/// A governor that sets each domain once at start.
pub struct Static {
    name: String,
    /// Target MHz per domain.
    targets: Vec<u32>,
}

/// Build `performance`, `powersave` or `userspace`.
pub fn make_static(ps: &PolicySpec, m: &Machine) -> Result<Box<dyn Governor>, String> {
    let name = ps.name.as_str();
    let defs = match name {
        "userspace" => userspace_info().params,
        _ => vec![],
    };
    let p = Params::new(name, &ps.params, &defs)?;
    let mut targets = Vec::with_capacity(m.domains.len());
    for d in &m.domains {
        let t = &m.types[d.ty];
        let mhz = match name {
            "performance" => t.fmax(),
            "powersave" => t.fmin(),
            _ => {
                let raw = ps.params.get("mhz").map(String::as_str).unwrap_or("max");
                match raw {
                    "max" => t.fmax(),
                    "min" => t.fmin(),
                    _ => {
                        let v = p.f64("mhz", 1.0, 1e6)? as u32;
                        if t.pstate_index(v).is_none() {
                            let avail: Vec<String> =
                                t.pstates.iter().map(|s| s.mhz.to_string()).collect();
                            let below = t.pstates.iter().rev().find(|s| s.mhz < v);
                            let above = t.pstates.iter().find(|s| s.mhz > v);
                            let near: Vec<String> = [below, above]
                                .iter()
                                .flatten()
                                .map(|s| format!("{} MHz", s.mhz))
                                .collect();
                            return Err(format!(
                                "userspace[mhz]: {v} MHz is not a P-state of cpu type \"{}\" (domain {}); nearest: {}; available: {}",
                                t.name,
                                d.id,
                                near.join(" or "),
                                avail.join(", ")
                            ));
                        }
                        v
                    }
                }
            }
        };
        targets.push(mhz);
    }
    Ok(Box::new(Static {
        name: full_name(ps),
        targets,
    }))
}

impl Governor for Static {
    fn name(&self) -> &str {
        &self.name
    }
    fn init(&mut self, cx: &mut Ctx) {
        for (d, &mhz) in self.targets.iter().enumerate() {
            if cx.domain_mhz(d) != mhz {
                cx.set_frequency(d, mhz);
            }
        }
    }
}

// ---------------------------------------------------------------- helpers

/// The spec as given, `name[k=v,...]`, for reports.
fn full_name(ps: &PolicySpec) -> String {
    if ps.params.is_empty() {
        ps.name.clone()
    } else {
        let parts: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{}[{}]", ps.name, parts.join(","))
    }
}

/// A whole-number parameter within `[lo, hi]` (the kernel's tunables are
/// `unsigned int`s).
fn int_param(p: &Params, policy: &str, name: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let v = p.f64(name, lo as f64, hi as f64)?;
    if v.fract() != 0.0 {
        return Err(format!(
            "{policy}[{name}]: {v} is not a whole number; allowed {lo} to {hi}"
        ));
    }
    Ok(v as u64)
}

/// Highest frequency of a type, kHz.
fn fmax_khz(t: &CpuType) -> u64 {
    t.fmax() as u64 * 1000
}

/// Lowest frequency of a type, kHz.
fn fmin_khz(t: &CpuType) -> u64 {
    t.fmin() as u64 * 1000
}

/// `CPUFREQ_RELATION_L`: the lowest P-state at or above `khz` (the highest
/// P-state when `khz` is above them all, i.e. after clamping to fmax).
fn relation_l(t: &CpuType, khz: u64) -> u32 {
    t.pstates
        .iter()
        .map(|p| p.mhz)
        .find(|&f| f as u64 * 1000 >= khz)
        .unwrap_or_else(|| t.fmax())
}

/// `CPUFREQ_RELATION_H`: the highest P-state at or below `khz` (the lowest
/// P-state when `khz` is below them all, i.e. after clamping to fmin).
fn relation_h(t: &CpuType, khz: u64) -> u32 {
    t.pstates
        .iter()
        .rev()
        .map(|p| p.mhz)
        .find(|&f| f as u64 * 1000 <= khz)
        .unwrap_or_else(|| t.fmin())
}

/// Busy percentage of an interval, floored: the kernel's
/// `100 * (time_elapsed - idle_time) / time_elapsed`.
fn load_pct(busy: u64, elapsed: u64) -> u32 {
    if elapsed == 0 {
        return 0;
    }
    (100 * busy.min(elapsed) as u128 / elapsed as u128) as u32
}

/// The last frequency a governor asked for in each domain, so that it asks
/// only for changes, and does not restart a transition in flight by asking
/// for its target again (`__cpufreq_driver_target` returns early when the
/// target is the current frequency).
struct Requested {
    mhz: Vec<u32>,
    at: Vec<SimTime>,
}

impl Requested {
    fn new(cx: &Ctx) -> Requested {
        let n = cx.machine.domains.len();
        Requested {
            mhz: (0..n).map(|d| cx.domain_mhz(d)).collect(),
            at: vec![cx.now; n],
        }
    }

    /// Ask for `mhz` (a P-state) in domain `d` unless it is already current,
    /// or already on its way.
    fn set(&mut self, cx: &mut Ctx, d: usize, mhz: u32) {
        let cur = cx.domain_mhz(d);
        let m = cx.machine;
        let transition = m.types[m.domains[d].ty].freq_transition;
        let in_flight = self.mhz[d] != cur && cx.now < self.at[d] + transition;
        let target = if in_flight { self.mhz[d] } else { cur };
        if target == mhz {
            return;
        }
        cx.set_frequency(d, mhz);
        self.mhz[d] = mhz;
        self.at[d] = cx.now;
    }
}

/// The load measurement of the sampling governors (`dbs_update()`): per
/// domain, the highest busy percentage of its CPUs since the domain's last
/// evaluation.
struct DbsLoad {
    prev_busy: Vec<u64>,
    last: Vec<SimTime>,
    prev_load: Vec<u32>,
}

impl DbsLoad {
    fn new(cx: &Ctx) -> DbsLoad {
        let n = cx.machine.domains.len();
        DbsLoad {
            prev_busy: vec![0; cx.ncpus()],
            last: vec![cx.now; n],
            prev_load: vec![0; n],
        }
    }

    /// Load of domain `d` since its last evaluation, which this one ends.
    fn update(&mut self, cx: &Ctx, d: usize, busy_ns: &[u64]) -> u32 {
        let elapsed = cx.now.since(self.last[d]).0;
        if elapsed == 0 {
            // Called twice at one instant: the kernel reuses the last load.
            return self.prev_load[d];
        }
        self.last[d] = cx.now;
        let mut load = 0;
        for &c in &cx.machine.domains[d].cpus {
            let busy = busy_ns[c].saturating_sub(self.prev_busy[c]);
            self.prev_busy[c] = busy_ns[c];
            load = load.max(load_pct(busy, elapsed));
        }
        self.prev_load[d] = load;
        load
    }
}

// --------------------------------------------------------------- ondemand

/// Registry entry of `ondemand`.
pub fn ondemand_info() -> About {
    About {
        name: "ondemand",
        doc: "Linux ondemand: every sampling period, load = highest busy % of a domain's CPUs; above up_threshold jump to the highest P-state, else f = fmin + load × (fmax − fmin) / 100, lowest P-state ≥ f",
        params: vec![
            ParamDef { name: "sampling_ms", default: "10", doc: "sampling period (sampling_rate), ms" },
            ParamDef { name: "up_threshold", default: "80", doc: "load % above which a domain jumps to its highest P-state (1 to 100)" },
            ParamDef { name: "sampling_down_factor", default: "1", doc: "after a jump to the highest P-state, evaluate only every this many periods (1 to 100000)" },
            ParamDef { name: "powersave_bias", default: "0", doc: "per-mille reduction of the target frequency, reached by alternating the P-states around it within a period (0 to 1000)" },
            ParamDef { name: "target", default: "linear", doc: "how a load at or below up_threshold sets the frequency: linear (Linux 3.12 on: fmin + load × (fmax − fmin) / 100) or proportional (Linux 2.6.x to 3.11: below up_threshold − down_differential, f = load × f_cur / (up_threshold − down_differential); between the two, keep)" },
            ParamDef { name: "down_differential", default: "10", doc: "with target = proportional, the margin below up_threshold under which the frequency falls (1 to up_threshold − 1; Linux 2.6.35: 10, or 3 with NO_HZ idle accounting)" },
        ],
    }
}

/// How `ondemand` sets the frequency of a domain whose load is at or below
/// `up_threshold`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum OdTarget {
    /// `fmin + load × (fmax − fmin) / 100`, `CPUFREQ_RELATION_L` (Linux
    /// 3.12 and later, `od_update()`).
    Linear,
    /// Linux 2.6.x to 3.11 (`dbs_check_cpu()`): with `load × f_cur` below
    /// `(up_threshold − down_differential) × f_cur`, the target is
    /// `load × f_cur / (up_threshold − down_differential)`, at least fmin,
    /// `CPUFREQ_RELATION_L`; between that and `up_threshold` the frequency
    /// stays; a domain already at fmin is left alone.
    Proportional { down_differential: u32 },
}

/// Per-domain state of `ondemand` (the kernel's `policy_dbs_info` and
/// `od_policy_dbs_info`).
#[derive(Clone, Debug)]
struct OdDomain {
    /// When the domain is next due (a normal sample or a sub-sample).
    next_due: SimTime,
    /// `rate_mult`: the next normal sample comes after this many periods.
    rate_mult: u32,
    /// powersave_bias: the next due time is a sub-sample that switches to
    /// this low P-state for `.1` (`freq_lo`, `freq_lo_delay_us`).
    sub: Option<(u32, SimTime)>,
}

/// The `ondemand` governor (`drivers/cpufreq/cpufreq_ondemand.c`).
///
/// Every `sampling_ms`, for each frequency domain (`od_update()`), with the
/// `dbs_update()` load (see the module documentation):
/// * `load > up_threshold`: go to the highest P-state; if the domain was
///   below it, set `rate_mult = sampling_down_factor`, so the next evaluation
///   comes `sampling_down_factor` periods later and measures the load over
///   that whole time;
/// * otherwise: `rate_mult = 1` and
///   `f_next = fmin + load × (fmax − fmin) / 100` (kHz, integer division, as
///   in the kernel), resolved with `CPUFREQ_RELATION_L`: the lowest P-state
///   at or above `f_next`. (Current mainline kernels resolve this target
///   with `CPUFREQ_RELATION_C`, the closest P-state; this simulator keeps
///   `RELATION_L`, which never undershoots the proportional target. The two
///   differ only when `f_next` is nearer the P-state below it.)
///
/// `powersave_bias` (per mille, `generic_powersave_bias_target()`): the
/// P-state chosen above, `f_req`, is lowered to `f_avg = f_req − f_req ×
/// bias / 1000`; if `f_avg` is not a P-state the domain runs at `f_hi` (the
/// lowest P-state above `f_avg`) for
/// `(f_avg − f_lo) × period / (f_hi − f_lo)` (rounded to the nanosecond;
/// the kernel rounds to the microsecond) and at `f_lo` (the
/// highest below) for the rest of the period, so that the mean is `f_avg`.
/// The governor then samples at those sub-period instants, so its samples
/// are not all on the period grid.
pub struct Ondemand {
    name: String,
    sampling: SimTime,
    up_threshold: u32,
    sampling_down_factor: u32,
    powersave_bias: u32,
    target: OdTarget,
    now: SimTime,
    dom: Vec<OdDomain>,
    load: Option<DbsLoad>,
    req: Option<Requested>,
}

impl Ondemand {
    /// Build from a spec such as `ondemand[up_threshold=95]`.
    pub fn from_params(ps: &PolicySpec) -> Result<Ondemand, String> {
        let defs = ondemand_info().params;
        let p = Params::new("ondemand", &ps.params, &defs)?;
        let sampling = SimTime::from_ms_f64(p.f64("sampling_ms", 0.1, 10_000.0)?);
        let up_threshold = int_param(&p, "ondemand", "up_threshold", 1, 100)? as u32;
        let target = match p.choice("target", &["linear", "proportional"])?.as_str() {
            "proportional" => {
                if up_threshold < 2 {
                    return Err(format!(
                        "ondemand[up_threshold]: {up_threshold} leaves no room for \
                         down_differential with target = proportional; allowed 2 to 100"
                    ));
                }
                let dd = int_param(&p, "ondemand", "down_differential", 1, 99)? as u32;
                if dd >= up_threshold {
                    return Err(format!(
                        "ondemand[down_differential]: {dd} must be below up_threshold \
                         ({up_threshold}); allowed 1 to {}",
                        up_threshold - 1
                    ));
                }
                OdTarget::Proportional {
                    down_differential: dd,
                }
            }
            _ => {
                if p.given("down_differential") {
                    return Err("ondemand[down_differential]: only used with \
                                target = proportional; set target=proportional or leave it out"
                        .to_string());
                }
                OdTarget::Linear
            }
        };
        Ok(Ondemand {
            name: full_name(ps),
            sampling,
            target,
            up_threshold,
            sampling_down_factor: int_param(&p, "ondemand", "sampling_down_factor", 1, 100_000)?
                as u32,
            powersave_bias: int_param(&p, "ondemand", "powersave_bias", 0, 1000)? as u32,
            now: SimTime::ZERO,
            dom: vec![],
            load: None,
            req: None,
        })
    }

    /// `generic_powersave_bias_target()`: the P-state to set now for target
    /// `khz` resolved with `relation`; records the sub-sample if the domain
    /// is to alternate.
    fn bias_target(
        &mut self,
        t: &CpuType,
        d: usize,
        khz: u64,
        relation: fn(&CpuType, u64) -> u32,
    ) -> u32 {
        let req = relation(t, khz.clamp(fmin_khz(t), fmax_khz(t))) as u64 * 1000;
        let avg = req - req * self.powersave_bias as u64 / 1000;
        let lo = relation_h(t, avg);
        let hi = relation_l(t, avg);
        self.dom[d].sub = None;
        if lo == hi {
            return lo;
        }
        let (lo_k, hi_k) = (lo as u64 * 1000, hi as u64 * 1000);
        let period = self.sampling.0 as u128;
        let delay_hi = (((avg - lo_k) as u128 * period + ((hi_k - lo_k) / 2) as u128)
            / (hi_k - lo_k) as u128) as u64;
        if delay_hi == 0 {
            // No time at f_hi: the whole period at f_lo.
            return lo;
        }
        let delay_lo = self.sampling.0 - delay_hi.min(self.sampling.0);
        if delay_lo == 0 {
            return hi;
        }
        self.dom[d].sub = Some((lo, SimTime(delay_lo)));
        self.dom[d].next_due = self.now + SimTime(delay_hi);
        hi
    }

    /// `od_update()` for domain `d` with load `load`.
    fn update(&mut self, cx: &mut Ctx, d: usize, load: u32) {
        let m = cx.machine;
        let t = &m.types[m.domains[d].ty];
        let cur = cx.domain_mhz(d);
        self.dom[d].sub = None;
        self.dom[d].next_due = self.now + self.sampling;
        let target = if load > self.up_threshold {
            // dbs_freq_increase(policy, policy->max)
            if cur < t.fmax() {
                self.dom[d].rate_mult = self.sampling_down_factor;
            }
            if self.powersave_bias > 0 {
                self.bias_target(t, d, fmax_khz(t), relation_h)
            } else {
                t.fmax()
            }
        } else {
            let (lo, hi) = (fmin_khz(t), fmax_khz(t));
            let next = match self.target {
                OdTarget::Linear => Some(lo + load as u64 * (hi - lo) / 100),
                OdTarget::Proportional { down_differential } => {
                    let cur_khz = cur as u64 * 1000;
                    let floor = (self.up_threshold - down_differential) as u64;
                    if cur_khz <= lo || (load as u64) >= floor {
                        // At fmin already, or within the differential: keep
                        // (rate_mult is left as it is, as in dbs_check_cpu()).
                        None
                    } else {
                        Some((load as u64 * cur_khz / floor).max(lo))
                    }
                }
            };
            match next {
                None => {
                    // Keep the current frequency: no request, as in the kernel.
                    self.dom[d].next_due =
                        self.now + SimTime(self.sampling.0 * self.dom[d].rate_mult as u64);
                    return;
                }
                Some(next) => {
                    self.dom[d].rate_mult = 1;
                    if self.powersave_bias > 0 {
                        self.bias_target(t, d, next, relation_l)
                    } else {
                        relation_l(t, next)
                    }
                }
            }
        };
        if self.dom[d].sub.is_none() {
            self.dom[d].next_due =
                self.now + SimTime(self.sampling.0 * self.dom[d].rate_mult as u64);
        }
        if let Some(r) = self.req.as_mut() {
            r.set(cx, d, target);
        }
    }
}

impl Governor for Ondemand {
    fn name(&self) -> &str {
        &self.name
    }
    fn init(&mut self, cx: &mut Ctx) {
        self.now = cx.now;
        let first = OdDomain {
            next_due: cx.now + self.sampling,
            rate_mult: 1,
            sub: None,
        };
        self.dom = vec![first; cx.machine.domains.len()];
        self.load = Some(DbsLoad::new(cx));
        self.req = Some(Requested::new(cx));
    }
    fn period(&self) -> Option<SimTime> {
        let next = self.dom.iter().map(|d| d.next_due).min()?;
        let p = next.since(self.now);
        Some(if p == SimTime::ZERO { self.sampling } else { p })
    }
    fn sample(&mut self, cx: &mut Ctx, busy_ns: &[u64]) {
        self.now = cx.now;
        for d in 0..self.dom.len() {
            if self.dom[d].next_due > cx.now {
                continue;
            }
            if let Some((lo, delay)) = self.dom[d].sub.take() {
                // OD_SUB_SAMPLE: the low part of the period.
                self.dom[d].next_due = cx.now + delay;
                if let Some(r) = self.req.as_mut() {
                    r.set(cx, d, lo);
                }
                continue;
            }
            let load = match self.load.as_mut() {
                Some(l) => l.update(cx, d, busy_ns),
                None => 0,
            };
            self.update(cx, d, load);
        }
    }
}

// ----------------------------------------------------------- conservative

/// Registry entry of `conservative`.
pub fn conservative_info() -> About {
    About {
        name: "conservative",
        doc: "Linux conservative: every sampling period, a requested frequency moves up by freq_step % of fmax when load > up_threshold (highest P-state ≤ it) and down when load < down_threshold (lowest P-state ≥ it)",
        params: vec![
            ParamDef { name: "sampling_ms", default: "10", doc: "sampling period (sampling_rate), ms" },
            ParamDef { name: "up_threshold", default: "80", doc: "load % above which the frequency steps up (above down_threshold, at most 100)" },
            ParamDef { name: "down_threshold", default: "20", doc: "load % below which the frequency steps down (at least 1, below up_threshold)" },
            ParamDef { name: "freq_step", default: "5", doc: "step, % of the highest frequency (0 to 100; 0 never changes the frequency)" },
        ],
    }
}

/// The `conservative` governor (`drivers/cpufreq/cpufreq_conservative.c`,
/// `cs_dbs_update()`).
///
/// Each domain keeps a *requested* frequency, starting at its current one.
/// Every `sampling_ms`, with the `dbs_update()` load (module documentation) and
/// `step = freq_step × fmax / 100` (kHz, integer division; 5 kHz if that is
/// 0, as the kernel's `get_freq_step()`):
/// * a requested frequency outside `[fmin, fmax]` is first reset to the
///   current one;
/// * `load > up_threshold`: unless it is already fmax,
///   `requested = min(requested + step, fmax)`, set with
///   `CPUFREQ_RELATION_H` (the highest P-state at or below it);
/// * `load < down_threshold`: unless it is already fmin,
///   `requested = requested − step` (fmin if `requested ≤ step`), set with
///   `CPUFREQ_RELATION_L` (the lowest P-state at or above it).
///
/// So each sample moves the requested frequency by one step, and the
/// P-state follows once the request crosses one: with P-states closer than
/// a step that is one P-state per sample; with P-states farther apart the
/// domain stays put for a few samples and then moves to the next one.
/// The kernel's `sampling_down_factor` for conservative (default 1) is not a
/// parameter here: it is always 1.
pub struct Conservative {
    name: String,
    sampling: SimTime,
    up_threshold: u32,
    down_threshold: u32,
    freq_step: u32,
    requested_khz: Vec<u64>,
    load: Option<DbsLoad>,
    req: Option<Requested>,
}

impl Conservative {
    /// Build from a spec such as `conservative[freq_step=10]`.
    pub fn from_params(ps: &PolicySpec) -> Result<Conservative, String> {
        let defs = conservative_info().params;
        let p = Params::new("conservative", &ps.params, &defs)?;
        let sampling = SimTime::from_ms_f64(p.f64("sampling_ms", 0.1, 10_000.0)?);
        let up = int_param(&p, "conservative", "up_threshold", 1, 100)? as u32;
        let down = int_param(&p, "conservative", "down_threshold", 1, 100)? as u32;
        if down >= up {
            return Err(format!(
                "conservative[down_threshold]: {down} must be below up_threshold ({up})"
            ));
        }
        Ok(Conservative {
            name: full_name(ps),
            sampling,
            up_threshold: up,
            down_threshold: down,
            freq_step: int_param(&p, "conservative", "freq_step", 0, 100)? as u32,
            requested_khz: vec![],
            load: None,
            req: None,
        })
    }

    /// `cs_dbs_update()` for domain `d` with load `load`.
    fn update(&mut self, cx: &mut Ctx, d: usize, load: u32) {
        if self.freq_step == 0 {
            return;
        }
        let m = cx.machine;
        let t = &m.types[m.domains[d].ty];
        let (min, max) = (fmin_khz(t), fmax_khz(t));
        let mut requested = self.requested_khz[d];
        if requested > max || requested < min {
            requested = cx.domain_mhz(d) as u64 * 1000;
            self.requested_khz[d] = requested;
        }
        let mut step = self.freq_step as u64 * max / 100;
        if step == 0 {
            step = 5;
        }
        let target = if load > self.up_threshold {
            if requested == max {
                return;
            }
            requested = (requested + step).min(max);
            relation_h(t, requested)
        } else if load < self.down_threshold {
            if requested == min {
                return;
            }
            requested = if requested > step {
                requested - step
            } else {
                min
            };
            relation_l(t, requested)
        } else {
            return;
        };
        self.requested_khz[d] = requested;
        if let Some(r) = self.req.as_mut() {
            r.set(cx, d, target);
        }
    }
}

impl Governor for Conservative {
    fn name(&self) -> &str {
        &self.name
    }
    fn init(&mut self, cx: &mut Ctx) {
        // cs_start(): requested_freq = policy->cur.
        self.requested_khz = (0..cx.machine.domains.len())
            .map(|d| cx.domain_mhz(d) as u64 * 1000)
            .collect();
        self.load = Some(DbsLoad::new(cx));
        self.req = Some(Requested::new(cx));
    }
    fn period(&self) -> Option<SimTime> {
        Some(self.sampling)
    }
    fn sample(&mut self, cx: &mut Ctx, busy_ns: &[u64]) {
        for d in 0..self.requested_khz.len() {
            let load = match self.load.as_mut() {
                Some(l) => l.update(cx, d, busy_ns),
                None => 0,
            };
            self.update(cx, d, load);
        }
    }
}

// -------------------------------------------------------------- schedutil

/// Registry entry of `schedutil`.
pub fn schedutil_info() -> About {
    About {
        name: "schedutil",
        doc: "Linux schedutil: per-CPU PELT-like frequency-invariant utilisation; every rate limit, next_f = 1.25 × fmax × (highest util of the domain), lowest P-state ≥ next_f",
        params: vec![
            ParamDef { name: "rate_limit_us", default: "1000", doc: "interval between frequency updates (and utilisation samples), µs" },
            ParamDef { name: "pelt_halflife_ms", default: "32", doc: "half-life of the utilisation's geometric decay, ms (PELT: 32)" },
        ],
    }
}

/// The engine-owned channel between a fair scheduler and the `schedutil`
/// governor (kernel: `cpu_util_cfs_boost()` reads the runqueue's
/// `util_est`): each CPU's util_est sum, written by the scheduler, read by
/// the governor, and whether the run's governor is `schedutil` (which the
/// scheduler needs for Energy Aware Scheduling's gating). One per run, so
/// runs in parallel threads never share it.
#[derive(Clone, Debug, Default)]
pub(crate) struct UtilChannel {
    /// Per CPU of the host machine: the util_est sum of its runqueue
    /// (capacity units, 1024 = the biggest CPU at its highest P-state).
    pub(crate) est: Vec<u32>,
    /// Whether the governor of the run is `schedutil`.
    pub(crate) schedutil: bool,
    /// Per CPU of the host machine: its runqueue's utilisation clamps
    /// (minimum, maximum; `uclamp_rq_get`) as the scheduler last published
    /// them; `None` where it published none.
    pub(crate) uclamp: Vec<Option<(u32, u32)>>,
    /// Whether any clamp was published (uclamp is in use).
    pub(crate) uclamp_on: bool,
}

impl UtilChannel {
    /// A channel for `ncpus` CPUs; `schedutil`: the run's governor is
    /// `schedutil`.
    pub(crate) fn new(ncpus: usize, schedutil: bool) -> UtilChannel {
        UtilChannel {
            est: vec![0; ncpus],
            schedutil,
            uclamp: vec![None; ncpus],
            uclamp_on: false,
        }
    }
}

/// The utilisation clamps of `cpu`'s runqueue as the scheduler last
/// published them: `None` while uclamp is not in use, (0, 1024) for a CPU
/// whose runqueue never held a clamped task.
fn cpu_uclamp(cx: &Ctx, cpu: usize) -> Option<(u32, u32)> {
    let u = cx.util.as_ref()?;
    if !u.uclamp_on {
        return None;
    }
    Some(u.uclamp.get(cpu).copied().flatten().unwrap_or((0, 1024)))
}

/// Whether a governor named `name` (its registry name, with its parameters
/// in brackets if any) is `schedutil`.
pub(crate) fn is_schedutil(name: &str) -> bool {
    name == "schedutil" || name.starts_with("schedutil[")
}

/// The `schedutil` governor (`kernel/sched/cpufreq_schedutil.c`).
///
/// Utilisation: every `rate_limit_us` (the interval `Δt` since the last
/// sample), each CPU's utilisation decays geometrically with PELT's
/// half-life and accumulates the busy fraction of the interval, scaled by
/// the CPU's current frequency relative to its highest (the kernel's
/// frequency invariance, `arch_scale_freq_capacity()`):
/// `y = 2^(−Δt / halflife)`,
/// `util ← y × util + (1 − y) × (busy / Δt) × f_cur / f_max`.
/// A CPU busy all the time at `f_max` converges to 1.0, one busy half the
/// time at `f_max` (or a fixed amount of work per period at any frequency
/// that keeps up with it) to 0.5. `f_cur` is the domain's frequency when
/// the sample is taken, which is the one of the whole interval when
/// frequency changes take no time (the governor changes it only at
/// samples). Utilisation starts at 0.
///
/// Frequency (`get_next_freq()` with frequency-invariant utilisation, and
/// `sugov_next_freq_shared()` for domains of several CPUs): per domain,
/// `next_f = 1.25 × f_max × max(util of its CPUs)` (kHz, truncated),
/// clamped to `[fmin, fmax]` and resolved with `CPUFREQ_RELATION_L`, the
/// lowest P-state at or above it (`cpufreq_driver_resolve_freq()`); it is
/// requested only when it differs from the last one (`sugov_update_next_freq()`).
/// The 1.25 puts the tipping point at 80 % utilisation.
///
/// util_est (`cpu_util_cfs_boost()` → `cpu_util()`): when the scheduler
/// keeps util_est (`eevdf` by default, `cfs`'s entries with `util_est=true`)
/// a CPU's utilisation is `max(util, Σ util_est of its runqueue / its
/// capacity)`, so a task that wakes up with a large estimate raises the
/// frequency at the next sample instead of after tens of milliseconds of
/// PELT ramp-up. The sums come through the run's channel
/// ([`Ctx::cpu_util_est`], see [`UtilChannel`]); a CPU whose sum is 0 (no
/// util_est, or nothing queued) uses its own utilisation.
///
/// uclamp (`effective_cpu_util()` and `sugov_effective_cpu_perf()`): when
/// the scheduler publishes its runqueues' clamps (a task with clamps has run,
/// see `policy/fair/cap.rs`), a CPU of capacity `C` with utilisation `u`
/// (capacity units) and runqueue clamps `(min, max)` asks for performance
/// `max(min, min(1.25 × min(u, C), min(C, max)))`, and the domain's
/// `next_f = f_max × (highest request) / C`: a minimum clamp raises the
/// frequency to the P-state that covers it (with no 1.25 headroom), a
/// maximum clamp caps it. Left out: iowait boost, RT/DL utilisation, and the
/// single-CPU rule that keeps the frequency while the CPU has not idled
/// since the last update.
pub struct Schedutil {
    name: String,
    rate_limit: SimTime,
    halflife_ns: f64,
    util: Vec<f64>,
    prev_busy: Vec<u64>,
    last: SimTime,
    req: Option<Requested>,
}

impl Schedutil {
    /// Build from a spec such as `schedutil[rate_limit_us=500]`.
    pub fn from_params(ps: &PolicySpec) -> Result<Schedutil, String> {
        let defs = schedutil_info().params;
        let p = Params::new("schedutil", &ps.params, &defs)?;
        let rate_us = p.f64("rate_limit_us", 1.0, 1e7)?;
        let halflife_ms = p.f64("pelt_halflife_ms", 0.1, 10_000.0)?;
        Ok(Schedutil {
            name: full_name(ps),
            rate_limit: SimTime::from_ns_f64(rate_us * 1e3),
            halflife_ns: halflife_ms * 1e6,
            util: vec![],
            prev_busy: vec![],
            last: SimTime::ZERO,
            req: None,
        })
    }

    /// The utilisation of every CPU (0 to 1), for tests and agents.
    pub fn util(&self) -> &[f64] {
        &self.util
    }
}

impl Governor for Schedutil {
    fn name(&self) -> &str {
        &self.name
    }
    fn init(&mut self, cx: &mut Ctx) {
        self.util = vec![0.0; cx.ncpus()];
        self.prev_busy = vec![0; cx.ncpus()];
        self.last = cx.now;
        self.req = Some(Requested::new(cx));
    }
    fn period(&self) -> Option<SimTime> {
        Some(self.rate_limit)
    }
    fn sample(&mut self, cx: &mut Ctx, busy_ns: &[u64]) {
        let dt = cx.now.since(self.last).0;
        if dt == 0 {
            return;
        }
        self.last = cx.now;
        let y = 0.5f64.powf(dt as f64 / self.halflife_ns);
        let m = cx.machine;
        for (c, &now_busy) in busy_ns.iter().enumerate().take(self.util.len()) {
            let busy = now_busy.saturating_sub(self.prev_busy[c]).min(dt);
            self.prev_busy[c] = now_busy;
            let scale = cx.cpu_mhz(c) as f64 / m.ty(c).fmax() as f64;
            let frac = busy as f64 / dt as f64;
            self.util[c] = y * self.util[c] + (1.0 - y) * frac * scale;
        }
        for (d, dom) in m.domains.iter().enumerate() {
            let t = &m.types[dom.ty];
            let cpu_util = |c: usize| match cx.cpu_util_est(c) {
                0 => self.util[c],
                est => {
                    let cap = m.ty(c).capacity.max(1) as f64;
                    self.util[c].max((est as f64 / cap).min(1.0))
                }
            };
            let next = if cpu_uclamp(cx, dom.cpus[0]).is_some() {
                // With the clamps: each CPU's performance request, as a
                // fraction of its capacity.
                let perf = dom
                    .cpus
                    .iter()
                    .map(|&c| {
                        let cap = m.ty(c).capacity.max(1);
                        let (lo, hi) = cpu_uclamp(cx, c).unwrap_or((0, 1024));
                        effective_perf(cpu_util(c) * cap as f64, lo, hi, cap) / cap as f64
                    })
                    .fold(0.0f64, f64::max);
                (fmax_khz(t) as f64 * perf) as u64
            } else {
                let util = dom.cpus.iter().map(|&c| cpu_util(c)).fold(0.0f64, f64::max);
                (1.25 * fmax_khz(t) as f64 * util) as u64
            };
            let mhz = relation_l(t, next.clamp(fmin_khz(t), fmax_khz(t)));
            if let Some(r) = self.req.as_mut() {
                r.set(cx, d, mhz);
            }
        }
    }
}
