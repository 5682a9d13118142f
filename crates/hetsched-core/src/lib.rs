//! # hetsched-core
//!
//! A fast, deterministic discrete-event simulator of an operating-system
//! kernel scheduling threads on heterogeneous and dynamically reconfigurable
//! multicore processors: big and little cores, ISA-asymmetric cores, SMT,
//! DVFS and power. Scheduling systems are pluggable policies
//! ([`policy::Scheduler`], [`policy::Governor`], [`policy::Agent`]).
//!
//! ```
//! let text = r#"
//! duration_s = 1.0
//! machine.preset = "big-little-4+4"
//! [[workload.programs]]
//! kind = "parallel"
//! threads = 8
//! work_ms = 800
//! "#;
//! let scn = hetsched_core::scenario::parse(text, "doc", hetsched_core::scenario::Format::Toml, &[]).unwrap();
//! let res = hetsched_core::run(&scn, Default::default(), None, vec![], None).unwrap();
//! assert_eq!(res.summary.programs_completed, 1);
//! ```

#![warn(missing_docs)]
#![allow(clippy::too_many_arguments)]

pub mod error;
pub mod hw;
pub mod metrics;
pub mod os;
pub mod policy;
mod prefetch;
pub mod scenario;
pub mod sim;
pub mod time;
pub mod trace;
pub mod workload;

pub use error::SimError;
pub use metrics::VERSION;
pub use time::SimTime;

/// Run a scenario and collect its results.
pub fn run(
    scn: &scenario::Scenario,
    opts: sim::RunOptions,
    sched: Option<Box<dyn policy::Scheduler>>,
    agents: Vec<Box<dyn policy::Agent>>,
    progress: Option<sim::Progress>,
) -> Result<metrics::RunResults, SimError> {
    let setup = scn.build(sched, agents)?;
    sim::dsq::check_supported(&setup)?;
    let mut engine = sim::Engine::new(setup, opts);
    let t0 = std::time::Instant::now();
    engine.run(progress)?;
    let wall = t0.elapsed().as_secs_f64();
    let mut res = metrics::collect(&engine, &scn.name(), wall);
    let mut w = scn.warnings.clone();
    w.append(&mut res.warnings);
    res.warnings = w;
    Ok(res)
}
