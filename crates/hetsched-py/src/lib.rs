//! Python binding of hetsched-core (module `hetsched._core`).
//!
//! This crate only converts values and maps errors: results cross the
//! boundary as JSON text, errors become a small exception hierarchy, and
//! policies written in Python are adapted to the core's traits.

// pyo3's #[pymethods] expansion converts PyErr into PyErr, which newer clippy
// flags on every method returning PyResult.
#![allow(clippy::useless_conversion)]

mod agent_plan;

use hetsched_core::hw::dynamic::{ReconfigOp, Reconfigured};
use hetsched_core::hw::reconfig::Mechanism;
use hetsched_core::metrics::RunResults;
use hetsched_core::policy::{scx, Agent, Ctx, EnqFlags, Scheduler};
use hetsched_core::scenario::{self, Format};
use hetsched_core::sim::RunOptions;
use hetsched_core::trace::{chrome_trace as build_chrome, Labels};
use hetsched_core::{SimError, SimTime};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::cell::Cell;

create_exception!(
    _core,
    HetschedError,
    PyException,
    "Base class of every error raised by hetsched."
);
create_exception!(
    _core,
    ScenarioError,
    HetschedError,
    "A scenario file or value is invalid."
);
create_exception!(
    _core,
    PolicyError,
    HetschedError,
    "A policy made an invalid request or raised."
);
create_exception!(
    _core,
    SimulationError,
    HetschedError,
    "The engine detected a broken invariant."
);

fn to_py(e: SimError) -> PyErr {
    match e {
        SimError::Scenario(m) => ScenarioError::new_err(m),
        e @ SimError::Policy { .. } => PolicyError::new_err(e.to_string()),
        e @ SimError::Invariant { .. } => SimulationError::new_err(e.to_string()),
        SimError::Interrupted(m) => {
            if m.contains("KeyboardInterrupt") {
                pyo3::exceptions::PyKeyboardInterrupt::new_err(m)
            } else {
                HetschedError::new_err(m)
            }
        }
    }
}

/// A parsed, validated and fully resolved scenario.
#[pyclass(module = "hetsched._core")]
struct Scenario {
    inner: scenario::Scenario,
}

#[pymethods]
impl Scenario {
    #[getter]
    fn name(&self) -> String {
        self.inner.name()
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.inner.spec.seed
    }
    #[getter]
    fn duration_s(&self) -> f64 {
        self.inner.spec.duration_s
    }
    #[getter]
    fn scheduler(&self) -> String {
        self.inner.spec.scheduler.clone()
    }
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }
    fn to_json(&self) -> String {
        self.inner.to_json()
    }
    fn to_toml(&self) -> PyResult<String> {
        self.inner.to_toml().map_err(to_py)
    }
    fn __repr__(&self) -> String {
        format!(
            "Scenario(name={:?}, scheduler={:?}, duration_s={}, seed={})",
            self.inner.name(),
            self.inner.spec.scheduler,
            self.inner.spec.duration_s,
            self.inner.spec.seed
        )
    }
}

/// The check a scenario's load or build calls every few thousand threads:
/// Python's pending signals, whose exception (Ctrl-C's KeyboardInterrupt)
/// is kept in `raised` for the caller to raise once the core has stopped.
fn signal_check<'a>(
    py: Python<'a>,
    raised: &'a mut Option<PyErr>,
    stage: &'static str,
) -> impl FnMut() -> Result<(), String> + 'a {
    move || {
        py.check_signals().map_err(|e| {
            *raised = Some(e);
            format!("interrupted while the scenario was {stage}")
        })
    }
}

#[pyfunction]
#[pyo3(signature = (text, source="<string>", overrides=Vec::new(), fmt="toml"))]
fn parse_scenario(
    py: Python<'_>,
    text: &str,
    source: &str,
    overrides: Vec<(String, String)>,
    fmt: &str,
) -> PyResult<Scenario> {
    let f = match fmt {
        "toml" => Format::Toml,
        "json" => Format::Json,
        other => {
            return Err(ScenarioError::new_err(format!(
                "fmt: \"{other}\" is not a format; allowed: toml, json"
            )))
        }
    };
    // A scenario of a million threads takes a second or more to validate:
    // signals are checked while its threads are built.
    let mut raised: Option<PyErr> = None;
    let parsed = scenario::parse_interruptible(
        text,
        source,
        f,
        &overrides,
        &mut signal_check(py, &mut raised, "loaded"),
    );
    if let Some(e) = raised {
        return Err(e);
    }
    let inner = parsed.map_err(to_py)?;
    Ok(Scenario { inner })
}

// ------------------------------------------------------------------ context

/// What a Python policy sees during one callback. Holds a pointer to the
/// engine's context that is valid only while the callback runs; `valid` is
/// cleared right after, and any later use raises PolicyError.
#[pyclass(module = "hetsched._core", unsendable)]
struct Context {
    ptr: *mut Ctx<'static>,
    valid: Cell<bool>,
}

impl Context {
    #[allow(clippy::mut_from_ref)] // see the SAFETY note: valid only during the callback
    fn cx(&self) -> PyResult<&mut Ctx<'static>> {
        if !self.valid.get() {
            return Err(PolicyError::new_err(
                "the context was used outside the callback it was given to",
            ));
        }
        // SAFETY: `valid` is true only while the callback that received this
        // object runs, during which the pointed-to Ctx is alive and not
        // otherwise borrowed.
        Ok(unsafe { &mut *self.ptr })
    }
    fn cpu(&self, cpu: usize) -> PyResult<usize> {
        let n = self.cx()?.ncpus();
        if cpu >= n {
            return Err(PolicyError::new_err(format!(
                "cpu {cpu} does not exist (machine has {n} cpus)"
            )));
        }
        Ok(cpu)
    }
    /// Run a DSQ call; a rule it broke raises PolicyError at once.
    fn dsq_call<R>(&self, f: impl FnOnce(&mut Ctx<'static>) -> R) -> PyResult<R> {
        let cx = self.cx()?;
        let n = cx.requests_len();
        let r = f(cx);
        match cx.take_failure(n) {
            Some(m) => Err(PolicyError::new_err(m)),
            None => Ok(r),
        }
    }
    fn task(&self, t: usize) -> PyResult<usize> {
        let n = self.cx()?.ntasks();
        if t >= n {
            return Err(PolicyError::new_err(format!(
                "task {t} does not exist ({n} tasks)"
            )));
        }
        Ok(t)
    }
}

#[pymethods]
impl Context {
    #[getter]
    fn now_ns(&self) -> PyResult<u64> {
        Ok(self.cx()?.now.0)
    }
    #[getter]
    fn ncpus(&self) -> PyResult<usize> {
        Ok(self.cx()?.ncpus())
    }
    #[getter]
    fn ntasks(&self) -> PyResult<usize> {
        Ok(self.cx()?.ntasks())
    }
    fn cpu_capacity(&self, cpu: usize) -> PyResult<u32> {
        let c = self.cpu(cpu)?;
        Ok(self.cx()?.capacity(c))
    }
    fn cpu_type(&self, cpu: usize) -> PyResult<String> {
        let c = self.cpu(cpu)?;
        Ok(self.cx()?.machine.ty(c).name.clone())
    }
    fn cpu_current(&self, cpu: usize) -> PyResult<Option<usize>> {
        let c = self.cpu(cpu)?;
        Ok(self.cx()?.current(c))
    }
    fn cpu_online(&self, cpu: usize) -> PyResult<bool> {
        let c = self.cpu(cpu)?;
        Ok(self.cx()?.online(c))
    }
    fn task_cpu(&self, task: usize) -> PyResult<usize> {
        let t = self.task(task)?;
        Ok(self.cx()?.task(t).cpu)
    }
    fn task_state(&self, task: usize) -> PyResult<&'static str> {
        let t = self.task(task)?;
        Ok(self.cx()?.task(t).state.name())
    }
    fn task_affinity(&self, task: usize) -> PyResult<Vec<usize>> {
        let t = self.task(task)?;
        let cx = self.cx()?;
        Ok(cx.task(t).affinity.to_vec(cx.ncpus()))
    }
    fn task_nice(&self, task: usize) -> PyResult<i32> {
        let t = self.task(task)?;
        Ok(self.cx()?.task(t).nice)
    }
    fn task_weight(&self, task: usize) -> PyResult<u32> {
        let t = self.task(task)?;
        Ok(self.cx()?.task(t).weight)
    }
    fn task_program(&self, task: usize) -> PyResult<usize> {
        let t = self.task(task)?;
        Ok(self.cx()?.task(t).program)
    }
    fn task_class(&self, task: usize) -> PyResult<String> {
        let t = self.task(task)?;
        let cx = self.cx()?;
        Ok(cx.machine.classes[cx.task(t).class].clone())
    }
    fn task_runtime_ns(&self, task: usize) -> PyResult<u64> {
        let t = self.task(task)?;
        Ok(self.cx()?.task(t).c.run_ns)
    }
    fn task_deadline_ns(&self, task: usize) -> PyResult<Option<u64>> {
        let t = self.task(task)?;
        Ok(self.cx()?.task(t).deadline.map(|d| d.0))
    }
    fn resched(&self, cpu: usize) -> PyResult<()> {
        self.cx()?.resched(cpu);
        Ok(())
    }
    fn migrate(&self, task: usize, cpu: usize) -> PyResult<()> {
        self.cx()?.migrate(task, cpu);
        Ok(())
    }
    fn set_affinity(&self, task: usize, cpus: Vec<usize>) -> PyResult<()> {
        self.cx()?.set_affinity(task, cpus);
        Ok(())
    }
    fn set_nice(&self, task: usize, nice: i32) -> PyResult<()> {
        self.cx()?.set_nice(task, nice);
        Ok(())
    }
    fn want_tick(&self, cpu: usize, on: bool) -> PyResult<()> {
        self.cx()?.want_tick(cpu, on);
        Ok(())
    }
    fn arm_timer(&self, at_ns: u64, token: u64) -> PyResult<()> {
        self.cx()?.arm_timer(SimTime(at_ns), token);
        Ok(())
    }
    fn cancel_timer(&self, token: u64) -> PyResult<()> {
        self.cx()?.cancel_timer(token);
        Ok(())
    }
    fn set_frequency(&self, domain: usize, mhz: u32) -> PyResult<()> {
        self.cx()?.set_frequency(domain, mhz);
        Ok(())
    }
    /// Request a reconfiguration of dynamic processors (needs a `[dynamic]`
    /// section): `op` is `offline`, `online`, `fuse` (CPUs lowest first) or
    /// `split` (one CPU: the object's representative).
    #[pyo3(signature = (op, cpus, mechanism=None))]
    fn reconfigure(&self, op: &str, cpus: Vec<usize>, mechanism: Option<&str>) -> PyResult<()> {
        for &c in &cpus {
            self.cpu(c)?;
        }
        if cpus.is_empty() {
            return Err(PolicyError::new_err(format!(
                "reconfigure({op}): cpus is empty; name at least one cpu"
            )));
        }
        let op = match op {
            "offline" => ReconfigOp::Offline(cpus),
            "online" => ReconfigOp::Online(cpus),
            "fuse" => ReconfigOp::Fuse(cpus),
            "split" => match cpus.as_slice() {
                [rep] => ReconfigOp::Split(*rep),
                _ => {
                    return Err(PolicyError::new_err(format!(
                        "reconfigure(split): name exactly one cpu, the object's representative \
                         (its lowest cpu); got {cpus:?}"
                    )))
                }
            },
            other => {
                return Err(PolicyError::new_err(format!(
                "reconfigure: unknown operation \"{other}\"; allowed: offline, online, fuse, split"
            )))
            }
        };
        let mechanism = mechanism
            .map(Mechanism::parse)
            .transpose()
            .map_err(PolicyError::new_err)?;
        self.cx()?.reconfigure(op, mechanism);
        Ok(())
    }
    /// The fusion levels (CPUs per fused object) of the scenario's `[dynamic]`
    /// section; empty without one.
    fn fusion_levels(&self) -> PyResult<Vec<usize>> {
        Ok(self.cx()?.fusion_levels().to_vec())
    }
    /// Add a warning to the run's warnings (each distinct message once).
    fn warn(&self, msg: String) -> PyResult<()> {
        self.cx()?.warn(msg);
        Ok(())
    }
    fn processes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let cx = self.cx()?;
        let out = PyList::empty_bound(py);
        for o in cx.observations() {
            let d = PyDict::new_bound(py);
            d.set_item("task", o.task)?;
            d.set_item("program", &o.program)?;
            d.set_item("state", o.state)?;
            d.set_item("cpu", o.cpu)?;
            d.set_item("nice", o.nice)?;
            d.set_item("affinity", o.affinity.clone())?;
            d.set_item("cpu_util", o.cpu_util)?;
            d.set_item("ipc", o.ipc)?;
            d.set_item("miss_ratio", o.miss_ratio)?;
            d.set_item("misses_per_instr", o.misses_per_instr)?;
            d.set_item("csw_per_s", o.csw_per_s)?;
            d.set_item("migrations_per_s", o.migrations_per_s)?;
            d.set_item("wait_frac", o.wait_frac)?;
            d.set_item("runtime_s", o.runtime_s)?;
            out.append(d)?;
        }
        Ok(out)
    }
    fn cpusets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let cx = self.cx()?;
        let out = PyList::empty_bound(py);
        for c in cx.cpusets() {
            let d = PyDict::new_bound(py);
            d.set_item("name", &c.name)?;
            d.set_item("cpus", c.cpus.clone())?;
            d.set_item("mhz", c.mhz)?;
            out.append(d)?;
        }
        Ok(out)
    }
    fn cpuset_load(&self, index: usize) -> PyResult<usize> {
        let cx = self.cx()?;
        if index >= cx.cpusets().len() {
            return Err(PolicyError::new_err(format!(
                "cpuset {index} does not exist ({} cpusets)",
                cx.cpusets().len()
            )));
        }
        Ok(cx.cpuset_load(index))
    }
    fn cpu_rating(&self, cpu: usize) -> PyResult<f64> {
        let c = self.cpu(cpu)?;
        Ok(self.cx()?.rating(c))
    }
    fn cpu_mhz(&self, cpu: usize) -> PyResult<u32> {
        let c = self.cpu(cpu)?;
        Ok(self.cx()?.cpu_mhz(c))
    }
    fn cpu_domain(&self, cpu: usize) -> PyResult<usize> {
        let c = self.cpu(cpu)?;
        Ok(self.cx()?.machine.cpus[c].domain)
    }
    // ----------------------------------------------- sched_ext dispatch queues

    #[pyo3(signature = (task, dsq, slice_ns=None))]
    fn dsq_insert(&self, task: usize, dsq: u64, slice_ns: Option<u64>) -> PyResult<()> {
        let slice = slice_ns.unwrap_or(scx::SLICE_DFL_NS);
        self.dsq_call(|cx| cx.dsq_insert(task, dsq, slice))
    }
    #[pyo3(signature = (task, dsq, vtime, slice_ns=None))]
    fn dsq_insert_vtime(
        &self,
        task: usize,
        dsq: u64,
        vtime: u64,
        slice_ns: Option<u64>,
    ) -> PyResult<()> {
        let slice = slice_ns.unwrap_or(scx::SLICE_DFL_NS);
        self.dsq_call(|cx| cx.dsq_insert_vtime(task, dsq, vtime, slice))
    }
    fn dsq_move_to_local(&self, dsq: u64) -> PyResult<bool> {
        self.dsq_call(|cx| cx.dsq_move_to_local(dsq))
    }
    fn create_dsq(&self, dsq: u64) -> PyResult<()> {
        self.dsq_call(|cx| cx.create_dsq(dsq))
    }
    fn dsq_nr_queued(&self, dsq: u64) -> PyResult<usize> {
        self.dsq_call(|cx| cx.dsq_nr_queued(dsq))
    }
    #[pyo3(signature = (cpu, preempt=false))]
    fn kick_cpu(&self, cpu: usize, preempt: bool) -> PyResult<()> {
        self.dsq_call(|cx| cx.kick_cpu(cpu, preempt))
    }
    fn select_cpu_dfl(&self, task: usize, prev_cpu: usize) -> PyResult<(usize, bool)> {
        self.dsq_call(|cx| cx.select_cpu_dfl(task, prev_cpu))
    }
    fn pick_idle_cpu(&self, task: usize) -> PyResult<Option<usize>> {
        self.dsq_call(|cx| cx.pick_idle_cpu(task))
    }
    fn test_and_clear_cpu_idle(&self, cpu: usize) -> PyResult<bool> {
        self.dsq_call(|cx| cx.test_and_clear_cpu_idle(cpu))
    }
    fn task_slice_ns(&self, task: usize) -> PyResult<u64> {
        let t = self.task(task)?;
        self.dsq_call(|cx| cx.task_slice_ns(t))
    }
    fn task_vtime(&self, task: usize) -> PyResult<u64> {
        self.dsq_call(|cx| cx.task_vtime(task))
    }
    fn set_task_vtime(&self, task: usize, vtime: u64) -> PyResult<()> {
        self.dsq_call(|cx| cx.set_task_vtime(task, vtime))
    }
    fn task_scx_weight(&self, task: usize) -> PyResult<u64> {
        let t = self.task(task)?;
        let w = self.cx()?.task(t).weight;
        Ok(hetsched_core::policy::scx_simple::scx_weight(w))
    }

    fn load_avg(&self) -> PyResult<f64> {
        Ok(self.cx()?.load_avg())
    }
}

thread_local! {
    /// A `SystemExit` raised inside a policy callback, re-raised by `run`
    /// once the engine has stopped.
    static PENDING: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
    /// A `KeyboardInterrupt` raised inside a policy callback (Ctrl-C landing
    /// in Python code), with the simulated time it was raised at, s. The run
    /// stops at its next interrupt check with partial results, as for a
    /// Ctrl-C between callbacks; until then the policy is called as before
    /// (the interrupted callback's answer is its fallback).
    static POLICY_INTERRUPT: std::cell::RefCell<Option<(PyErr, f64)>> =
        const { std::cell::RefCell::new(None) };
}

/// An int a callback returned, refusing bools (`True` is not CPU 1).
fn extract_id<'py, T: pyo3::FromPyObject<'py>>(method: &str, r: &Bound<'py, PyAny>) -> PyResult<T> {
    if r.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PolicyError::new_err(format!(
            "{method}() returned {} (a bool); return an int id",
            if r.is_truthy()? { "True" } else { "False" }
        )));
    }
    r.extract::<T>()
}

/// Call `obj.method(cx, *args)` with a context valid for the call only.
/// A Python exception becomes a `Fail` request naming the callback.
fn call_py<T>(
    obj: &Py<PyAny>,
    cx: &mut Ctx,
    method: &str,
    args: impl FnOnce(Python<'_>, Py<Context>) -> PyResult<Bound<'_, pyo3::types::PyTuple>>,
    convert: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<T>,
) -> Option<T> {
    Python::with_gil(|py| {
        let ptr: *mut Ctx<'static> = (cx as *mut Ctx<'_>).cast();
        let ctx = match Py::new(
            py,
            Context {
                ptr,
                valid: Cell::new(true),
            },
        ) {
            Ok(c) => c,
            Err(e) => {
                cx.fail(format!("{method}: {e}"));
                return None;
            }
        };
        let result = args(py, ctx.clone_ref(py))
            .and_then(|a| obj.bind(py).call_method1(method, a))
            .and_then(|r| convert(&r));
        ctx.borrow(py).valid.set(false);
        match result {
            Ok(v) => Some(v),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) => {
                // Ctrl-C is no policy error: the run ends as interrupted, with
                // partial results, and `run` raises the KeyboardInterrupt.
                let at = cx.now.as_secs_f64();
                POLICY_INTERRUPT.with(|p| {
                    // The first one counts; later ones are the same Ctrl-C.
                    p.borrow_mut().get_or_insert((e, at));
                });
                None
            }
            Err(e) if e.is_instance_of::<pyo3::exceptions::PySystemExit>(py) => {
                // sys.exit() is no policy error either: the run stops and
                // `run` raises it again as it was.
                PENDING.with(|p| *p.borrow_mut() = Some(e));
                cx.fail(format!("Python callback {method}() raised SystemExit"));
                None
            }
            Err(e) => {
                let tb = e
                    .traceback_bound(py)
                    .and_then(|t| t.format().ok())
                    .map(|s| format!("\n{s}"))
                    .unwrap_or_default();
                let ty = e
                    .get_type_bound(py)
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "Exception".into());
                cx.fail(format!(
                    "Python callback {method}() raised {ty}: {}{tb}",
                    e.value_bound(py)
                ));
                None
            }
        }
    })
}

/// A scheduler written in Python (a `hetsched.Scheduler` subclass).
struct PyScheduler {
    obj: Py<PyAny>,
    name: String,
    /// The class's `uses_dsqs` attribute: the sched_ext DSQ model.
    dsqs: bool,
}

fn tuple<'py>(py: Python<'py>, items: Vec<PyObject>) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    Ok(pyo3::types::PyTuple::new_bound(py, items))
}

impl Scheduler for PyScheduler {
    fn name(&self) -> &str {
        &self.name
    }
    fn init(&mut self, cx: &mut Ctx) {
        call_py(
            &self.obj,
            cx,
            "init",
            |py, c| tuple(py, vec![c.into_py(py)]),
            |_| Ok(()),
        );
    }
    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        task: usize,
        prev: Option<usize>,
        flags: EnqFlags,
    ) -> usize {
        let fallback = prev.unwrap_or(cx.task(task).cpu);
        call_py(
            &self.obj,
            cx,
            "select_cpu",
            |py, c| {
                tuple(
                    py,
                    vec![
                        c.into_py(py),
                        task.into_py(py),
                        prev.into_py(py),
                        flags.name().into_py(py),
                    ],
                )
            },
            |r| extract_id::<usize>("select_cpu", r),
        )
        .unwrap_or(fallback)
    }
    fn enqueue(&mut self, cx: &mut Ctx, task: usize, cpu: usize, flags: EnqFlags) {
        call_py(
            &self.obj,
            cx,
            "enqueue",
            |py, c| {
                tuple(
                    py,
                    vec![
                        c.into_py(py),
                        task.into_py(py),
                        cpu.into_py(py),
                        flags.name().into_py(py),
                    ],
                )
            },
            |_| Ok(()),
        );
    }
    fn dequeue(&mut self, cx: &mut Ctx, task: usize, cpu: usize) {
        call_py(
            &self.obj,
            cx,
            "dequeue",
            |py, c| tuple(py, vec![c.into_py(py), task.into_py(py), cpu.into_py(py)]),
            |_| Ok(()),
        );
    }
    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<usize> {
        call_py(
            &self.obj,
            cx,
            "pick_next",
            |py, c| tuple(py, vec![c.into_py(py), cpu.into_py(py)]),
            |r| {
                if r.is_none() {
                    Ok(None)
                } else {
                    extract_id::<usize>("pick_next", r).map(Some)
                }
            },
        )
        .flatten()
    }
    fn balance(&mut self, cx: &mut Ctx, cpu: usize) {
        call_py(
            &self.obj,
            cx,
            "balance",
            |py, c| tuple(py, vec![c.into_py(py), cpu.into_py(py)]),
            |_| Ok(()),
        );
    }
    fn running(&mut self, cx: &mut Ctx, task: usize, cpu: usize) {
        call_py(
            &self.obj,
            cx,
            "running",
            |py, c| tuple(py, vec![c.into_py(py), task.into_py(py), cpu.into_py(py)]),
            |_| Ok(()),
        );
    }
    fn stopping(&mut self, cx: &mut Ctx, task: usize, cpu: usize, runnable: bool) {
        call_py(
            &self.obj,
            cx,
            "stopping",
            |py, c| {
                tuple(
                    py,
                    vec![
                        c.into_py(py),
                        task.into_py(py),
                        cpu.into_py(py),
                        runnable.into_py(py),
                    ],
                )
            },
            |_| Ok(()),
        );
    }
    fn tick(&mut self, cx: &mut Ctx, cpu: usize, task: usize) {
        call_py(
            &self.obj,
            cx,
            "tick",
            |py, c| tuple(py, vec![c.into_py(py), cpu.into_py(py), task.into_py(py)]),
            |_| Ok(()),
        );
    }
    fn on_timer(&mut self, cx: &mut Ctx, token: u64) {
        call_py(
            &self.obj,
            cx,
            "on_timer",
            |py, c| tuple(py, vec![c.into_py(py), token.into_py(py)]),
            |_| Ok(()),
        );
    }
    fn on_fault(&mut self, cx: &mut Ctx, task: usize, cpu: usize, feature: usize) -> bool {
        let name = cx
            .machine
            .features
            .get(feature)
            .cloned()
            .unwrap_or_default();
        call_py(
            &self.obj,
            cx,
            "on_fault",
            |py, c| {
                tuple(
                    py,
                    vec![
                        c.into_py(py),
                        task.into_py(py),
                        cpu.into_py(py),
                        name.into_py(py),
                    ],
                )
            },
            |r| r.is_truthy(),
        )
        .unwrap_or(false)
    }
    fn on_reconfigured(&mut self, cx: &mut Ctx, info: &Reconfigured) {
        let has = Python::with_gil(|py| self.obj.bind(py).hasattr("on_reconfigured"));
        if !matches!(has, Ok(true)) {
            return;
        }
        let (id, op, cpus, mech, start) = (
            info.id,
            info.op.name(),
            info.op.cpus(),
            info.mechanism.name(),
            info.start.0,
        );
        call_py(
            &self.obj,
            cx,
            "on_reconfigured",
            |py, c| {
                let d = PyDict::new_bound(py);
                d.set_item("id", id)?;
                d.set_item("op", op)?;
                d.set_item("cpus", cpus)?;
                d.set_item("mechanism", mech)?;
                d.set_item("start_ns", start)?;
                tuple(py, vec![c.into_py(py), d.into_py(py)])
            },
            |_| Ok(()),
        );
    }
    fn reweight(&mut self, cx: &mut Ctx, task: usize, _old: u32) {
        call_py(
            &self.obj,
            cx,
            "reweight",
            |py, c| tuple(py, vec![c.into_py(py), task.into_py(py)]),
            |_| Ok(()),
        );
    }
    fn uses_dsqs(&self) -> bool {
        self.dsqs
    }
    fn dispatch(&mut self, cx: &mut Ctx, cpu: usize, prev: Option<usize>) {
        call_py(
            &self.obj,
            cx,
            "dispatch",
            |py, c| tuple(py, vec![c.into_py(py), cpu.into_py(py), prev.into_py(py)]),
            |_| Ok(()),
        );
    }
}

/// An agent written in Python (a `hetsched.Agent` subclass).
struct PyAgent {
    obj: Py<PyAny>,
    name: String,
    period: SimTime,
}

impl Agent for PyAgent {
    fn name(&self) -> &str {
        &self.name
    }
    fn period(&self) -> SimTime {
        self.period
    }
    fn init(&mut self, cx: &mut Ctx) {
        call_py(
            &self.obj,
            cx,
            "init",
            |py, c| tuple(py, vec![c.into_py(py)]),
            |_| Ok(()),
        );
    }
    fn sample(&mut self, cx: &mut Ctx) {
        call_py(
            &self.obj,
            cx,
            "sample",
            |py, c| tuple(py, vec![c.into_py(py)]),
            |_| Ok(()),
        );
    }
}

fn py_name(obj: &Bound<'_, PyAny>, default: &str) -> String {
    obj.getattr("name")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| {
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| default.to_string())
        })
}

#[pyfunction]
#[pyo3(signature = (scenario, *, trace=false, check=false, scheduler=None, agents=Vec::new(), progress=None))]
fn run(
    py: Python<'_>,
    scenario: &Scenario,
    trace: bool,
    check: bool,
    scheduler: Option<Bound<'_, PyAny>>,
    agents: Vec<Bound<'_, PyAny>>,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<PyObject> {
    let sched: Option<Box<dyn Scheduler>> = match scheduler {
        None => None,
        Some(s) => {
            let name = format!("python:{}", py_name(&s, "python"));
            let dsqs = match s.getattr("uses_dsqs") {
                Ok(v) => v.is_truthy()?,
                Err(_) => false,
            };
            Some(Box::new(PyScheduler {
                obj: s.unbind(),
                name,
                dsqs,
            }) as Box<dyn Scheduler>)
        }
    };
    let mut py_agents: Vec<Box<dyn Agent>> = Vec::new();
    for a in agents {
        let period_ms: f64 = a
            .getattr("period_ms")
            .and_then(|p| p.extract())
            .unwrap_or(100.0);
        if !(period_ms.is_finite() && period_ms > 0.0) {
            return Err(PolicyError::new_err(format!(
                "agent period_ms must be > 0, got {period_ms}"
            )));
        }
        let name = format!("python:{}", py_name(&a, "python-agent"));
        py_agents.push(Box::new(PyAgent {
            obj: a.unbind(),
            name,
            period: SimTime::from_ms_f64(period_ms),
        }));
    }
    // The exception that stopped the run (Ctrl-C, or one raised by the
    // progress callback); the engine then ends the run with partial results.
    let stop: std::cell::RefCell<Option<(&str, PyErr)>> = std::cell::RefCell::new(None);
    let mut cb = |now: f64, end: f64| -> Result<(), String> {
        let (what, e) = match POLICY_INTERRUPT.with(|p| p.borrow_mut().take()) {
            Some((e, _)) => ("a policy callback raised", e),
            None => match py.check_signals() {
                Err(e) => ("a signal handler raised", e),
                Ok(()) => match progress.as_ref().map(|p| p.call1((now, end))) {
                    Some(Err(e)) => ("the progress callback raised", e),
                    _ => return Ok(()),
                },
            },
        };
        let msg = if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
            "Ctrl-C".to_string()
        } else {
            format!("{what} {e}")
        };
        *stop.borrow_mut() = Some((what, e));
        Err(msg)
    };
    PENDING.with(|p| p.borrow_mut().take());
    POLICY_INTERRUPT.with(|p| p.borrow_mut().take());
    // `hetsched_core::run`, step by step, so that a Ctrl-C while the
    // scenario is built (seconds for a million threads) stops before the
    // simulation starts: nothing was simulated, so there are no results.
    // Signals are checked while the threads are built (every few thousand)
    // and once more after: the exception a handler raised is kept here.
    let mut raised: Option<PyErr> = None;
    let built = scenario
        .inner
        .build_interruptible(
            sched,
            py_agents,
            &mut signal_check(py, &mut raised, "built"),
        )
        .and_then(|setup| {
            hetsched_core::sim::dsq::check_supported(&setup)?;
            Ok(setup)
        });
    let setup = match (built, raised.take().map_or_else(|| py.check_signals(), Err)) {
        (Ok(setup), Ok(())) => setup,
        (Err(e), Ok(())) => return Err(to_py(e)),
        (built, Err(e)) => {
            // Free a large half-built scenario before the error goes up.
            drop(built);
            if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(
                    "interrupted while the scenario was built, before the simulation started: \
                     there are no results",
                ));
            }
            return Err(e);
        }
    };
    let mut engine = hetsched_core::sim::Engine::new(setup, RunOptions { trace, check });
    let t0 = std::time::Instant::now();
    let ran = engine.run(Some(&mut cb));
    let wall = t0.elapsed().as_secs_f64();
    let res = ran.map(|()| {
        let mut r = hetsched_core::metrics::collect(&engine, &scenario.inner.name(), wall);
        let mut w = scenario.inner.warnings.clone();
        w.append(&mut r.warnings);
        r.warnings = w;
        r
    });
    drop(engine);
    give_back_freed_memory();
    if let Some(e) = PENDING.with(|p| p.borrow_mut().take()) {
        POLICY_INTERRUPT.with(|p| p.borrow_mut().take());
        return Err(e);
    }
    // A KeyboardInterrupt from a policy callback after the last check (the
    // run's final events): the run is over, the interrupt still propagates.
    let late = POLICY_INTERRUPT.with(|p| p.borrow_mut().take());
    let late = match (res.is_err(), late) {
        (true, Some((e, _))) => return Err(e),
        (_, late) => late.map(|(_, at)| at),
    };
    let mut res: RunResults = res.map_err(to_py)?;
    let stopped = stop.borrow_mut().take();
    if let Some((what, e)) = &stopped {
        if !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
            // Only Ctrl-C keeps partial results; another exception is an
            // error of the caller's code.
            return Err(HetschedError::new_err(format!(
                "{what} {e}; the run was stopped at {:.6} s simulated",
                res.summary.sim_end_s
            )));
        }
    }
    // Ctrl-C after the run's last event: the results are complete but the
    // interrupt is kept (partial results, KeyboardInterrupt).
    let mut converting = stopped.is_none() && late.is_some();
    let scn = scenario.inner.to_json();
    let labels = labels_json(&res);
    let big = BigTables::take(&mut res);
    let err = |e: serde_json::Error| HetschedError::new_err(e.to_string());
    if stopped.is_none() && !converting {
        let head = serde_json::to_value(&res).map_err(err)?;
        match write_results(py, true, &head, &big, &scn, &labels, None) {
            Ok(text) => {
                // Written: the tables go before the text is handed over, so
                // that the two are never held together with a copy of it.
                drop((head, big, res, labels, scn));
                return bytes_of(py, text.into_bytes());
            }
            Err(Unwritten::Json(e)) => return Err(err(e)),
            Err(Unwritten::Raised(e)) => {
                if !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                    return Err(e);
                }
                // Ctrl-C while the results were being converted.
                converting = true;
            }
        }
    }
    // Ctrl-C: a KeyboardInterrupt carrying the results up to the interrupt
    // (`summary.partial`), wrapped by `hetsched.run`. They are kept small, so
    // that converting and writing them fits in the moment Ctrl-C allows: a
    // table longer than PARTIAL_MAX_ROWS is left out and named.
    res.summary.partial = true;
    if let (true, Some(at)) = (converting, late) {
        res.warnings.push(format!(
            "a policy callback raised KeyboardInterrupt at {at:.6} s simulated and the run \
             ended, at {:.6} s, before its next interrupt check: the results are partial",
            res.summary.sim_end_s
        ));
    } else if converting {
        res.warnings.push(format!(
            "interrupted after the run's last event, at {:.6} s simulated, while its results \
             were converted: the results are partial",
            res.summary.sim_end_s
        ));
    }
    let (big, omitted) = big.bounded(PARTIAL_MAX_ROWS);
    // Without the tasks table, the task labels (one per task, for the trace
    // exports) are left out too.
    let labels = if omitted.iter().any(|(n, _)| *n == "tasks") {
        serde_json::json!({ "tasks": [], "cpus": labels["cpus"] })
    } else {
        labels
    };
    for (name, rows) in &omitted {
        res.warnings.push(format!(
            "the {name} table ({rows} rows) is left out of these partial results: more than \
             {PARTIAL_MAX_ROWS} rows take longer to convert and write than an interrupted run may"
        ));
    }
    let head = serde_json::to_value(&res).map_err(err)?;
    let out = match write_results(py, false, &head, &big, &scn, &labels, Some(&omitted)) {
        Ok(text) => text,
        Err(Unwritten::Json(e)) => return Err(err(e)),
        Err(Unwritten::Raised(e)) => return Err(e),
    };
    let msg = if let (true, Some(at)) = (converting, late) {
        format!(
            "a policy callback raised KeyboardInterrupt at {at:.6} s simulated; the run ended \
             at {:.6} s before its next interrupt check; the partial results are in the \
             exception's `results`",
            res.summary.sim_end_s
        )
    } else if converting {
        format!(
            "interrupted while the results of the run ({:.6} s simulated, {} events) were \
             converted; the partial results are in the exception's `results`",
            res.summary.sim_end_s, res.summary.events
        )
    } else {
        format!(
            "run interrupted at {:.6} s of {:.6} s simulated, after {} events; \
             the partial results are in the exception's `results`",
            res.summary
                .interrupted_at_s
                .unwrap_or(res.summary.sim_end_s),
            scenario.inner.spec.duration_s,
            res.summary.events
        )
    };
    let e = pyo3::exceptions::PyKeyboardInterrupt::new_err(msg);
    e.value_bound(py).setattr("partial_results", out)?;
    Err(e)
}

/// Return the pages of the memory the engine freed to the system, so that
/// the results text (a new mapping of its own, 84 MB at 100 000 threads) is
/// not added on top of them: glibc keeps freed heap memory mapped (holes
/// below the top of the heap are not trimmed) until `malloc_trim` gives
/// their pages back. Elsewhere, nothing.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer and only releases free memory;
    // the allocator stays consistent for every live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How much of a results text [`bytes_of`] moves at a time.
const HANDOVER_BYTES: usize = 4 << 20;

/// `text` as a Python `bytes` object, without holding two whole copies of a
/// long text at any moment: the object is made uninitialised (its pages are
/// not touched yet), filled from its end a slice of [`HANDOVER_BYTES`] at a
/// time, and the text is cut after each slice (`shrink_to_fit`: a large
/// buffer gives the memory of its tail back as it shrinks, where the
/// allocator can, as glibc's `mremap` does). At 100 000 threads the text is
/// 84 MB; it and a `str` copy of it made the run's peak memory
/// (docs/performance.md). (`PyBytes::new_with` zeroes the object first,
/// which touches every page before the copy starts.)
fn bytes_of(py: Python<'_>, mut text: Vec<u8>) -> PyResult<PyObject> {
    let n = text.len();
    let len = pyo3::ffi::Py_ssize_t::try_from(n)
        .map_err(|_| HetschedError::new_err(format!("results of {n} bytes are too long")))?;
    // SAFETY: with a null pointer, `PyBytes_FromStringAndSize` returns a new
    // bytes object of `len` bytes whose contents are uninitialised, or null
    // with a Python exception set (`from_owned_ptr_or_err` turns that into
    // the error). We hold the only reference.
    let obj = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len),
        )?
    };
    // SAFETY: `obj` is a bytes object (made above), so `PyBytes_AsString`
    // returns its buffer of `n` bytes, which stays valid while `obj` lives.
    let dst = unsafe { pyo3::ffi::PyBytes_AsString(obj.as_ptr()) }.cast::<u8>();
    let mut end = n;
    while end > 0 {
        let start = end.saturating_sub(HANDOVER_BYTES);
        // SAFETY: `start..end` lies within both buffers (`text` still holds
        // `end` bytes; the object holds `n`), which do not overlap, and the
        // object is not visible to Python until it is returned filled.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().add(start), dst.add(start), end - start);
        }
        text.truncate(start);
        text.shrink_to_fit();
        end = start;
    }
    Ok(obj.unbind())
}

/// Rows of one piece of a table in the results text: pieces are separated
/// by a newline (compact JSON has none of its own), so that the Python side
/// converts a long table piece by piece and Ctrl-C is answered between
/// pieces, and leaves the tasks and programs tables as text until they are
/// read (`hetsched.results._Pieces`). A table of at most this many rows is
/// one piece.
const PIECE_ROWS: usize = 4096;

/// Rows a table of partial results (an interrupted run) may have: converting
/// and writing a task row costs the Python side about 90 µs (docs/cli.md,
/// "Interrupting a run"), so 4096 rows fit well within the second that
/// Ctrl-C allows.
const PARTIAL_MAX_ROWS: usize = 4096;

/// Bytes written between two checks for Ctrl-C while the results are
/// serialised (about 10 ms of serialisation).
const CHECK_BYTES: usize = 4 << 20;

/// Labels by task id; with VMs, vCPUs (not rows of `tasks`) are named after
/// their VM.
fn labels_json(res: &RunResults) -> serde_json::Value {
    let task_labels: Vec<(String, u32)> = if res.vms.is_empty() {
        res.tasks
            .iter()
            .map(|t| (t.program.clone(), t.thread))
            .collect()
    } else {
        let mut l = vec![(String::from("task"), 0u32); res.summary.tasks];
        for t in &res.tasks {
            l[t.task] = (t.program.clone(), t.thread);
        }
        for vm in &res.vms {
            for (i, &t) in vm.vcpu_tasks.iter().enumerate() {
                l[t] = (format!("{} vCPU", vm.name), i as u32);
            }
        }
        l
    };
    serde_json::json!({
        "tasks": task_labels,
        "cpus": res.cpus.iter().map(|c| format!("cpu {} ({})", c.cpu, c.ty)).collect::<Vec<_>>(),
    })
}

/// The tables of a run that grow with its threads, program instances and
/// events, taken out of the results to be written piece by piece.
struct BigTables {
    tasks: Vec<hetsched_core::metrics::TaskRow>,
    programs: Vec<hetsched_core::metrics::ProgramRow>,
    trace: Vec<hetsched_core::trace::TraceEvent>,
}

impl BigTables {
    fn take(res: &mut RunResults) -> Self {
        BigTables {
            tasks: std::mem::take(&mut res.tasks),
            programs: std::mem::take(&mut res.programs),
            trace: std::mem::take(&mut res.trace),
        }
    }
    /// These tables with every one longer than `max` rows emptied; the
    /// emptied ones named with their length.
    fn bounded(mut self, max: usize) -> (Self, Vec<(&'static str, usize)>) {
        let mut omitted = Vec::new();
        if self.tasks.len() > max {
            omitted.push(("tasks", self.tasks.len()));
            self.tasks = Vec::new();
        }
        if self.programs.len() > max {
            omitted.push(("programs", self.programs.len()));
            self.programs = Vec::new();
        }
        if self.trace.len() > max {
            omitted.push(("trace", self.trace.len()));
            self.trace = Vec::new();
        }
        (self, omitted)
    }
}

/// Why the results text could not be written.
enum Unwritten {
    Json(serde_json::Error),
    /// A signal handler raised (Ctrl-C: KeyboardInterrupt).
    Raised(PyErr),
}

/// A text buffer that checks for Ctrl-C every `CHECK_BYTES` written.
struct Checked<'py> {
    buf: Vec<u8>,
    py: Python<'py>,
    check: bool,
    next: usize,
    raised: Option<PyErr>,
}

impl std::io::Write for Checked<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.check && self.buf.len() >= self.next {
            self.next = self.buf.len() + CHECK_BYTES;
            if let Err(e) = self.py.check_signals() {
                self.raised = Some(e);
                return Err(std::io::Error::other("interrupted"));
            }
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Write `rows` as a JSON array of pieces of at most `PIECE_ROWS` rows, each
/// on a line of its own (`[`, newline, rows, newline, ..., `]`); `[]` when
/// there are none. Every table gets its own lines, not only the long ones:
/// a run of a few thousand tasks whose tables nobody reads (a sweep's, or a
/// caller's who wants the summary) then parses none of them (the tasks
/// table of `bench/standard.toml`'s 2 000 threads cost more to parse than a
/// simulated second).
fn write_rows<T: serde::Serialize>(
    w: &mut Checked<'_>,
    rows: &[T],
) -> Result<(), serde_json::Error> {
    use std::io::Write;
    if rows.is_empty() {
        return serde_json::to_writer(&mut *w, rows);
    }
    let io = serde_json::Error::io;
    w.write_all(b"[").map_err(io)?;
    for (i, piece) in rows.chunks(PIECE_ROWS).enumerate() {
        w.write_all(if i == 0 { b"\n" } else { b",\n" })
            .map_err(io)?;
        for (j, row) in piece.iter().enumerate() {
            if j > 0 {
                w.write_all(b",").map_err(io)?;
            }
            serde_json::to_writer(&mut *w, row)?;
        }
    }
    w.write_all(b"\n]").map_err(io)
}

/// The results text: `head` (the results without their big tables, in the
/// core's field order) with the big tables written in their places, then
/// the resolved scenario, the labels and, for partial results, the tables
/// left out.
fn write_results(
    py: Python<'_>,
    check: bool,
    head: &serde_json::Value,
    big: &BigTables,
    scenario_json: &str,
    labels: &serde_json::Value,
    omitted: Option<&[(&'static str, usize)]>,
) -> Result<String, Unwritten> {
    use std::io::Write;
    // Room for the whole text at once: a row of the long tables takes well
    // under these sizes, so the text never moves while it grows (a moving
    // buffer of 80 MB is briefly two). Capacity not written to costs no
    // memory.
    let room = 1024 * big.tasks.len()
        + 512 * big.programs.len()
        + 256 * big.trace.len()
        + 4 * scenario_json.len()
        + (1 << 20);
    let mut w = Checked {
        buf: Vec::with_capacity(room),
        py,
        check,
        next: CHECK_BYTES,
        raised: None,
    };
    let written = (|| -> Result<(), serde_json::Error> {
        let io = serde_json::Error::io;
        let map = head.as_object().ok_or_else(|| {
            <serde_json::Error as serde::ser::Error>::custom("results are no object")
        })?;
        w.write_all(b"{").map_err(io)?;
        for (i, (k, v)) in map.iter().enumerate() {
            if i > 0 {
                w.write_all(b",").map_err(io)?;
            }
            serde_json::to_writer(&mut w, k)?;
            w.write_all(b":").map_err(io)?;
            match k.as_str() {
                "tasks" => write_rows(&mut w, &big.tasks)?,
                "programs" => write_rows(&mut w, &big.programs)?,
                "trace" => write_rows(&mut w, &big.trace)?,
                _ => serde_json::to_writer(&mut w, v)?,
            }
        }
        w.write_all(b",\"scenario\":").map_err(io)?;
        // The resolved scenario, compact (as the results document had it).
        let scn: serde_json::Value = serde_json::from_str(scenario_json)?;
        serde_json::to_writer(&mut w, &scn)?;
        w.write_all(b",\"labels\":").map_err(io)?;
        serde_json::to_writer(&mut w, labels)?;
        if let Some(omitted) = omitted.filter(|o| !o.is_empty()) {
            w.write_all(b",\"omitted\":").map_err(io)?;
            let m: serde_json::Map<String, serde_json::Value> = omitted
                .iter()
                .map(|(n, rows)| (n.to_string(), serde_json::Value::from(*rows)))
                .collect();
            serde_json::to_writer(&mut w, &m)?;
        }
        w.write_all(b"}").map_err(io)
    })();
    match (written, w.raised.take()) {
        (_, Some(e)) => Err(Unwritten::Raised(e)),
        (Err(e), None) => Err(Unwritten::Json(e)),
        (Ok(()), None) => String::from_utf8(w.buf).map_err(|e| {
            Unwritten::Json(<serde_json::Error as serde::ser::Error>::custom(
                e.to_string(),
            ))
        }),
    }
}

/// The id of `cpu`'s local DSQ (`SCX_DSQ_LOCAL_ON | cpu`).
#[pyfunction]
fn dsq_local_on(cpu: usize) -> PyResult<u64> {
    if cpu > scx::DSQ_LOCAL_CPU_MASK as usize {
        return Err(PolicyError::new_err(format!(
            "dsq_local_on({cpu}): cpu ids go up to {}",
            scx::DSQ_LOCAL_CPU_MASK
        )));
    }
    Ok(scx::dsq_local_on(cpu))
}

#[pyfunction]
fn schema() -> String {
    scenario::json_schema()
}

#[pyfunction]
fn list_policies(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty_bound(py);
    for p in hetsched_core::policy::registry() {
        let d = PyDict::new_bound(py);
        d.set_item("name", p.name)?;
        d.set_item(
            "kind",
            serde_json::to_value(p.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from)),
        )?;
        d.set_item("doc", p.doc)?;
        let params = PyList::empty_bound(py);
        for q in &p.params {
            let pd = PyDict::new_bound(py);
            pd.set_item("name", q.name)?;
            pd.set_item("default", q.default)?;
            pd.set_item("doc", q.doc)?;
            params.append(pd)?;
        }
        d.set_item("params", params)?;
        out.append(d)?;
    }
    Ok(out)
}

#[pyfunction]
fn list_presets(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty_bound(py);
    for (name, doc, toml) in hetsched_core::scenario::presets::PRESETS {
        let d = PyDict::new_bound(py);
        d.set_item("name", *name)?;
        d.set_item("doc", *doc)?;
        d.set_item("toml", toml.trim())?;
        out.append(d)?;
    }
    Ok(out)
}

#[pyfunction]
fn chrome_trace(results_json: &str) -> PyResult<String> {
    let v: serde_json::Value = serde_json::from_str(results_json)
        .map_err(|e| HetschedError::new_err(format!("results JSON: {e}")))?;
    let events = v
        .get("trace")
        .and_then(|t| t.as_array())
        .cloned()
        .unwrap_or_default();
    let tasks: Vec<(String, u32)> = v
        .pointer("/labels/tasks")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .unwrap_or_default();
    let cpus: Vec<String> = v
        .pointer("/labels/cpus")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .unwrap_or_default();
    let doc = build_chrome(
        &events,
        &Labels {
            tasks: &tasks,
            cpus: &cpus,
        },
    );
    Ok(doc.to_string())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", hetsched_core::VERSION)?;
    m.add("HetschedError", py.get_type_bound::<HetschedError>())?;
    m.add("ScenarioError", py.get_type_bound::<ScenarioError>())?;
    m.add("PolicyError", py.get_type_bound::<PolicyError>())?;
    m.add("SimulationError", py.get_type_bound::<SimulationError>())?;
    m.add("DSQ_GLOBAL", scx::DSQ_GLOBAL)?;
    m.add("DSQ_LOCAL", scx::DSQ_LOCAL)?;
    m.add("DSQ_LOCAL_ON", scx::DSQ_LOCAL_ON)?;
    m.add("SLICE_DFL_NS", scx::SLICE_DFL_NS)?;
    m.add("SLICE_INF", scx::SLICE_INF)?;
    m.add_function(wrap_pyfunction!(dsq_local_on, m)?)?;
    m.add_class::<Scenario>()?;
    m.add_class::<Context>()?;
    m.add_class::<agent_plan::PatelPlanner>()?;
    m.add_function(wrap_pyfunction!(parse_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(list_policies, m)?)?;
    m.add_function(wrap_pyfunction!(list_presets, m)?)?;
    m.add_function(wrap_pyfunction!(chrome_trace, m)?)?;
    Ok(())
}
