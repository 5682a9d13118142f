//! Patel's agents outside the simulator: `PatelPlanner` exposes the
//! decision function of an agent (`Patel::plan`) to a daemon that observes
//! real processes (`hetsched linux agent --agent patel-cpu`). The daemon
//! gives it what the engine's context would: the observations of the last
//! interval, the cpusets with their clocks and loads, the number of CPUs and
//! the instantaneous load; it returns the moves and nice changes to make.

use crate::PolicyError;
use hetsched_core::policy::patel::{Action, Patel, Rule, SetView};
use hetsched_core::policy::{Agent, Observation};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// One of Patel's agents, by spec (`patel-priority[interval_ms=500]`).
#[pyclass(module = "hetsched._core")]
pub struct PatelPlanner {
    inner: Patel,
}

/// The engine's task states, as `Observation::state` holds them.
fn state(s: &str) -> PyResult<&'static str> {
    Ok(match s {
        "not_started" => "not_started",
        "runnable" => "runnable",
        "running" => "running",
        "sleeping" => "sleeping",
        "blocked" => "blocked",
        "exited" => "exited",
        other => {
            return Err(PolicyError::new_err(format!(
                "state \"{other}\": expected one of not_started, runnable, running, sleeping, blocked, exited"
            )))
        }
    })
}

fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str, what: &str) -> PyResult<T> {
    match d.get_item(key)? {
        Some(v) => v
            .extract()
            .map_err(|e| PolicyError::new_err(format!("{what}.{key}: {e}"))),
        None => Err(PolicyError::new_err(format!("{what}: missing \"{key}\""))),
    }
}

fn rule_name(r: Rule) -> &'static str {
    match r {
        Rule::Arrival => "arrival",
        Rule::Waiting => "waiting",
        Rule::CpuIntensive => "cpu_intensive",
        Rule::Loaded => "loaded",
        Rule::Unloaded => "unloaded",
        Rule::EmptyQueue => "empty_queue",
    }
}

#[pymethods]
impl PatelPlanner {
    #[new]
    fn new(spec: &str) -> PyResult<Self> {
        Patel::from_spec(spec)
            .map(|inner| PatelPlanner { inner })
            .map_err(PolicyError::new_err)
    }

    /// The agent's name (`patel-cpu` ...).
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// Its sampling period (the `interval_ms` parameter).
    #[getter]
    fn period_ms(&self) -> f64 {
        self.inner.period().as_ms_f64()
    }

    /// Decide one sample. `processes` are dicts with the keys of
    /// `Context.processes()`; `cpusets` dicts `{"cpus", "mhz", "load"}`.
    /// Returns `{"action": "move", "task", "set", "rule"}` and
    /// `{"action": "nice", "task", "nice"}` dicts, in order.
    fn plan<'py>(
        &mut self,
        py: Python<'py>,
        processes: &Bound<'py, PyList>,
        cpusets: &Bound<'py, PyList>,
        ncpus: usize,
        instant_load: f64,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut obs = Vec::with_capacity(processes.len());
        for (i, item) in processes.iter().enumerate() {
            let what = format!("processes[{i}]");
            let d = item
                .downcast::<PyDict>()
                .map_err(|_| PolicyError::new_err(format!("{what}: not a dict")))?;
            let st: String = get(d, "state", &what)?;
            let f = |key: &str| -> PyResult<f64> { get::<f64>(d, key, &what) };
            obs.push(Observation {
                task: get(d, "task", &what)?,
                program: get(d, "program", &what)?,
                state: state(&st)?,
                cpu: get(d, "cpu", &what)?,
                nice: get(d, "nice", &what)?,
                affinity: get(d, "affinity", &what)?,
                cpu_util: f("cpu_util")?,
                ipc: f("ipc")?,
                miss_ratio: f("miss_ratio")?,
                misses_per_instr: f("misses_per_instr")?,
                csw_per_s: f("csw_per_s")?,
                migrations_per_s: f("migrations_per_s")?,
                wait_frac: f("wait_frac")?,
                runtime_s: f("runtime_s")?,
            });
        }
        let mut sets = Vec::with_capacity(cpusets.len());
        for (i, item) in cpusets.iter().enumerate() {
            let what = format!("cpusets[{i}]");
            let d = item
                .downcast::<PyDict>()
                .map_err(|_| PolicyError::new_err(format!("{what}: not a dict")))?;
            let mut cpus: Vec<usize> = get(d, "cpus", &what)?;
            cpus.sort_unstable();
            if cpus.is_empty() {
                return Err(PolicyError::new_err(format!("{what}.cpus: empty")));
            }
            sets.push(SetView {
                cpus,
                mhz: get(d, "mhz", &what)?,
                load: get(d, "load", &what)?,
            });
        }
        let out = PyList::empty_bound(py);
        for a in self.inner.plan(&obs, &sets, ncpus, instant_load) {
            let d = PyDict::new_bound(py);
            match a {
                Action::Move { task, set, rule } => {
                    d.set_item("action", "move")?;
                    d.set_item("task", task)?;
                    d.set_item("set", set)?;
                    d.set_item("rule", rule_name(rule))?;
                }
                Action::SetNice { task, nice } => {
                    d.set_item("action", "nice")?;
                    d.set_item("task", task)?;
                    d.set_item("nice", nice)?;
                }
            }
            out.append(d)?;
        }
        Ok(out)
    }
}
