//! The policy registry: ONE table of every scheduler, governor and agent,
//! each entry its description (name, one-line doc, parameters) and its
//! constructor. `hetsched list policies`, the generated policy reference and
//! the "unknown …; known: …" errors all read this table, so adding a policy
//! is its file plus one line here.

use super::{
    cfs, chameleon, credit, dwrr, edf, eevdf, governors, parse_spec, patel, scx_simple, About,
    Agent, Governor, ParamDef, PolicySpec, Scheduler,
};
use crate::hw::Machine;

/// What kind of component a registry entry builds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A dispatch-level scheduler ([`Scheduler`]).
    Scheduler,
    /// A cpufreq governor ([`Governor`]).
    Governor,
    /// A user-level agent ([`Agent`]).
    Agent,
    /// A scheduling class above the fair scheduler (rt, deadline): chosen
    /// per program with `policy`, configured in the scenario's `[os]` table.
    Class,
}

impl Kind {
    /// The word used in messages.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Scheduler => "scheduler",
            Kind::Governor => "governor",
            Kind::Agent => "agent",
            Kind::Class => "scheduling class",
        }
    }
}

/// A registry entry as listed: [`About`] plus the kind of component.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PolicyInfo {
    /// Registry name.
    pub name: &'static str,
    /// Scheduler, governor or agent.
    pub kind: Kind,
    /// One-line description.
    pub doc: &'static str,
    /// Parameters with their defaults.
    pub params: Vec<ParamDef>,
}

type Ctor<T> = fn(&PolicySpec, &Machine) -> Result<Box<T>, String>;

/// How an entry builds its component.
#[derive(Clone, Copy)]
pub enum Build {
    /// A scheduling class (nothing to build: programs choose it with
    /// `policy`, the scenario's `[os]` table configures it).
    Class,
    /// A scheduler.
    Scheduler(Ctor<dyn Scheduler>),
    /// A governor.
    Governor(Ctor<dyn Governor>),
    /// An agent.
    Agent(Ctor<dyn Agent>),
}

impl Build {
    fn kind(&self) -> Kind {
        match self {
            Build::Scheduler(_) => Kind::Scheduler,
            Build::Governor(_) => Kind::Governor,
            Build::Agent(_) => Kind::Agent,
            Build::Class => Kind::Class,
        }
    }
}

/// One line of the table.
pub struct Entry {
    /// The policy's description (from its own file).
    pub about: fn() -> About,
    /// Its constructor.
    pub build: Build,
}

macro_rules! sched {
    ($about:path, $ctor:expr) => {
        Entry {
            about: $about,
            build: Build::Scheduler(|ps, m| Ok(Box::new($ctor(ps, m)?))),
        }
    };
}
macro_rules! gov {
    ($about:path, $ctor:expr) => {
        Entry {
            about: $about,
            build: Build::Governor($ctor),
        }
    };
}

/// Every registered policy, in the order `hetsched list policies` shows them.
pub const TABLE: &[Entry] = &[
    sched!(cfs::info, |ps, m| cfs::Cfs::from_params(ps, m, false)),
    sched!(cfs::pinned_info, |ps, m| cfs::Cfs::from_params(ps, m, true)),
    sched!(edf::info, edf::GlobalEdf::from_params),
    sched!(dwrr::dwrr_info, dwrr::Dwrr::from_params),
    sched!(dwrr::adwrr_info, dwrr::Dwrr::from_params),
    sched!(dwrr::faster_first_info, dwrr::Dwrr::from_params),
    sched!(cfs::capacity_aware_info, |ps, m| cfs::Cfs::from_params(
        ps, m, false
    )),
    sched!(cfs::eas_info, |ps, m| cfs::Cfs::from_params(ps, m, false)),
    sched!(eevdf::info, eevdf::Eevdf::from_params),
    sched!(eevdf::linux_info, eevdf::Eevdf::from_params),
    gov!(governors::performance_info, governors::make_static),
    gov!(governors::powersave_info, governors::make_static),
    gov!(governors::userspace_info, governors::make_static),
    gov!(governors::ondemand_info, |ps, _| Ok(Box::new(
        governors::Ondemand::from_params(ps)?
    ))),
    gov!(governors::conservative_info, |ps, _| Ok(Box::new(
        governors::Conservative::from_params(ps)?
    ))),
    gov!(governors::schedutil_info, |ps, _| Ok(Box::new(
        governors::Schedutil::from_params(ps)?
    ))),
    Entry {
        about: patel::cpu_info,
        build: Build::Agent(|ps, m| Ok(Box::new(patel::Patel::from_params(ps, m)?))),
    },
    Entry {
        about: patel::priority_info,
        build: Build::Agent(|ps, m| Ok(Box::new(patel::Patel::from_params(ps, m)?))),
    },
    Entry {
        about: patel::cachemiss_info,
        build: Build::Agent(|ps, m| Ok(Box::new(patel::Patel::from_params(ps, m)?))),
    },
    Entry {
        about: patel::ctxswitch_info,
        build: Build::Agent(|ps, m| Ok(Box::new(patel::Patel::from_params(ps, m)?))),
    },
    sched!(credit::credit_info, credit::Credit::from_params),
    sched!(credit::aash_info, credit::Credit::from_params),
    sched!(chameleon::info, chameleon::Chameleon::from_params),
    sched!(scx_simple::info, scx_simple::ScxSimple::from_params),
    sched!(
        super::scx_central::info,
        super::scx_central::ScxCentral::from_params
    ),
    Entry {
        about: super::classes::dl_info,
        build: Build::Class,
    },
    Entry {
        about: super::classes::rt_info,
        build: Build::Class,
    },
];

/// Every registered policy with its kind.
pub fn registry() -> Vec<PolicyInfo> {
    TABLE
        .iter()
        .map(|e| {
            let a = (e.about)();
            PolicyInfo {
                name: a.name,
                kind: e.build.kind(),
                doc: a.doc,
                params: a.params,
            }
        })
        .collect()
}

fn unknown(kind: Kind, name: &str) -> String {
    let known: Vec<_> = TABLE
        .iter()
        .filter(|e| e.build.kind() == kind)
        .map(|e| (e.about)().name)
        .collect();
    let k = kind.word();
    if known.is_empty() {
        format!("unknown {k} \"{name}\"; none are registered yet")
    } else {
        format!("unknown {k} \"{name}\"; known: {}", known.join(", "))
    }
}

/// The entry of kind `kind` named like `spec`, and the parsed spec.
fn find(kind: Kind, spec: &str) -> Result<(&'static Entry, PolicySpec), String> {
    let ps = parse_spec(spec)?;
    match TABLE
        .iter()
        .find(|e| e.build.kind() == kind && (e.about)().name == ps.name)
    {
        Some(e) => Ok((e, ps)),
        None => Err(unknown(kind, &ps.name)),
    }
}

/// Build a scheduler from its spec string (`"cfs[latency_ms=24]"`).
pub fn make_scheduler(spec: &str, m: &Machine) -> Result<Box<dyn Scheduler>, String> {
    match find(Kind::Scheduler, spec)? {
        (
            Entry {
                build: Build::Scheduler(f),
                ..
            },
            ps,
        ) => f(&ps, m),
        _ => unreachable!("find returns an entry of the kind asked for"),
    }
}

/// Build a governor from its spec string.
pub fn make_governor(spec: &str, m: &Machine) -> Result<Box<dyn Governor>, String> {
    match find(Kind::Governor, spec)? {
        (
            Entry {
                build: Build::Governor(f),
                ..
            },
            ps,
        ) => f(&ps, m),
        _ => unreachable!("find returns an entry of the kind asked for"),
    }
}

/// Build an agent from its spec string.
pub fn make_agent(spec: &str, m: &Machine) -> Result<Box<dyn Agent>, String> {
    match find(Kind::Agent, spec)? {
        (
            Entry {
                build: Build::Agent(f),
                ..
            },
            ps,
        ) => f(&ps, m),
        _ => unreachable!("find returns an entry of the kind asked for"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine from a preset.
    fn machine(preset: &str) -> Machine {
        let text = format!("duration_s = 1\nmachine.preset = \"{preset}\"\n");
        let scn = crate::scenario::parse(&text, "t", crate::scenario::Format::Toml, &[]).unwrap();
        scn.build(None, vec![]).unwrap().machine
    }

    #[test]
    fn names_are_unique_and_every_entry_builds_with_defaults() {
        let m = machine("big-little-4+4");
        let mut names: Vec<&str> = Vec::new();
        for e in TABLE {
            let a = (e.about)();
            assert!(!names.contains(&a.name), "{} registered twice", a.name);
            names.push(a.name);
            let built = match e.build {
                Build::Scheduler(f) => f(&parse_spec(a.name).unwrap(), &m).map(|_| ()),
                Build::Governor(f) => f(&parse_spec(a.name).unwrap(), &m).map(|_| ()),
                Build::Agent(f) => f(&parse_spec(a.name).unwrap(), &m).map(|_| ()),
                Build::Class => Ok(()),
            };
            // `userspace` needs its frequency; every other policy builds with
            // its defaults.
            if a.name != "userspace" {
                built.unwrap_or_else(|err| panic!("{}: {err}", a.name));
            }
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones_of_that_kind() {
        let m = machine("big-little-4+4");
        let err = make_scheduler("cfz", &m).err().unwrap();
        assert!(err.starts_with("unknown scheduler \"cfz\"; known: cfs, pinned"));
        assert!(!err.contains("ondemand"));
        let err = make_governor("cfs", &m).err().unwrap();
        assert!(err.starts_with("unknown governor \"cfs\"; known: performance"));
    }
}
