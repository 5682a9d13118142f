//! cpufreq governors with Linux semantics: `performance` (highest P-state),
//! `powersave` (lowest), `userspace` (a fixed frequency per domain, settable
//! later by an agent).

use super::{Ctx, Governor, Kind, ParamDef, Params, PolicyInfo, PolicySpec};
use crate::hw::Machine;

/// Registry entry of `performance`.
pub fn performance_info() -> PolicyInfo {
    PolicyInfo {
        name: "performance",
        kind: Kind::Governor,
        doc: "Every domain at its highest P-state",
        params: vec![],
    }
}
/// Registry entry of `powersave`.
pub fn powersave_info() -> PolicyInfo {
    PolicyInfo {
        name: "powersave",
        kind: Kind::Governor,
        doc: "Every domain at its lowest P-state",
        params: vec![],
    }
}
/// Registry entry of `userspace`.
pub fn userspace_info() -> PolicyInfo {
    PolicyInfo {
        name: "userspace",
        kind: Kind::Governor,
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
                            return Err(format!(
                                "userspace[mhz]: {v} MHz is not a P-state of cpu type \"{}\" (domain {}); available: {}",
                                t.name,
                                d.id,
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
    let full = if ps.params.is_empty() {
        name.to_string()
    } else {
        let parts: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{name}[{}]", parts.join(","))
    };
    Ok(Box::new(Static {
        name: full,
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
