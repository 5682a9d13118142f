"""Typed surface of the compiled core, ``hetsched._core``.

The core is written in Rust; this module is the thin binding. Everything
crosses the boundary either as plain Python values or as JSON text, so the
Python layer (``hetsched``) owns DataFrames, plotting and the CLI.
"""

from typing import Any, Callable, Optional, Sequence, final

__all__ = [
    "DSQ_GLOBAL",
    "DSQ_LOCAL",
    "DSQ_LOCAL_ON",
    "SLICE_DFL_NS",
    "SLICE_INF",
    "Context",
    "HetschedError",
    "PatelPlanner",
    "PolicyError",
    "Scenario",
    "ScenarioError",
    "SimulationError",
    "__version__",
    "chrome_trace",
    "dsq_local_on",
    "list_policies",
    "list_presets",
    "parse_scenario",
    "run",
    "schema",
]

__version__: str

#: sched_ext's DSQ ids (``SCX_DSQ_GLOBAL``, ``SCX_DSQ_LOCAL``, ``SCX_DSQ_LOCAL_ON``).
DSQ_GLOBAL: int
DSQ_LOCAL: int
DSQ_LOCAL_ON: int
#: ``SCX_SLICE_DFL`` (20 ms) and ``SCX_SLICE_INF``.
SLICE_DFL_NS: int
SLICE_INF: int

def dsq_local_on(cpu: int) -> int:
    """The id of ``cpu``'s local DSQ (``SCX_DSQ_LOCAL_ON | cpu``)."""

class HetschedError(Exception):
    """Base class of every error raised by hetsched."""

class ScenarioError(HetschedError):
    """A scenario file or value is invalid. The message names the path of the
    offending field (``machine.cpus[3].type``) and what is allowed; a TOML
    syntax error names ``file:line:column``."""

class PolicyError(HetschedError):
    """A policy made an invalid request, or a Python-written policy raised.
    The message names the policy, the callback or request, and the simulated
    time."""

class SimulationError(HetschedError):
    """The engine detected a broken invariant (checked after every event with
    ``check=True``; time order is always checked)."""

@final
class Scenario:
    """A parsed, validated and fully resolved scenario (presets expanded)."""

    @property
    def name(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def scheduler(self) -> str: ...
    @property
    def warnings(self) -> list[str]: ...
    def to_json(self) -> str:
        """The resolved scenario as JSON (the same schema as the TOML file)."""
    def to_toml(self) -> str:
        """The resolved scenario as TOML."""

def parse_scenario(
    text: str,
    source: str = "<string>",
    overrides: Sequence[tuple[str, str]] = ...,
    fmt: str = "toml",
) -> Scenario:
    """Parse scenario text (``fmt`` = ``"toml"`` or ``"json"``), apply
    ``overrides`` (``("workload.programs[0].threads", "8")``; the value is a
    TOML literal, or a bare string) and validate. ``source`` names the file
    in error messages. Raises :class:`ScenarioError`."""

def run(
    scenario: Scenario,
    *,
    trace: bool = False,
    check: bool = False,
    scheduler: Optional[Any] = None,
    agents: Sequence[Any] = ...,
    progress: Optional[Callable[[float, float], None]] = None,
) -> bytes:
    """Run a scenario and return its results as JSON text, UTF-8 encoded.

    ``scheduler``: a :class:`hetsched.Scheduler` instance that replaces the
    scenario's scheduler (a policy written in Python). ``agents``: Python
    :class:`hetsched.Agent` instances added to the scenario's agents.
    ``progress(sim_now_s, sim_end_s)`` is called about a hundred times per run.

    The JSON object has the keys ``summary`` (dict), ``tasks``, ``programs``,
    ``cpus`` (lists of row dicts), ``warnings`` (list of str), ``scenario``
    (the resolved scenario as a dict), and ``trace`` (list of event dicts,
    empty unless ``trace=True``). A task row's ``wakeup_latency_p50_ms``,
    ``wakeup_latency_p99_ms`` and ``wakeup_latency_max_ms`` (float or None)
    summarise its latencies from each wake-up to running, quantiles
    interpolated linearly between ranks."""

def schema() -> str:
    """JSON Schema of scenario files, as JSON text."""

def list_policies() -> list[dict[str, Any]]:
    """Every registered policy: ``{"name", "kind" ("scheduler"|"governor"|"agent"),
    "doc", "params": [{"name", "default", "doc"}]}``."""

def list_presets() -> list[dict[str, str]]:
    """Every machine preset: ``{"name", "doc", "toml"}``."""

def chrome_trace(results_json: str) -> str:
    """Perfetto/Chrome trace JSON (one track per CPU, a slice per run interval,
    instant markers for migrations, ISA faults and frequency changes) built
    from a run's results JSON that was produced with ``trace=True``."""

@final
class Context:
    """What a Python policy sees and acts through during one callback. Valid
    only inside that callback; using it afterwards raises
    :class:`PolicyError`. Requests are recorded and validated by the engine
    after the callback returns."""

    @property
    def now_ns(self) -> int: ...
    @property
    def ncpus(self) -> int: ...
    @property
    def ntasks(self) -> int: ...
    def cpu_capacity(self, cpu: int) -> int:
        """Current compute capacity out of 1024 (type capacity × frequency × duty cycle)."""
    def cpu_type(self, cpu: int) -> str: ...
    def cpu_current(self, cpu: int) -> Optional[int]:
        """The task running on ``cpu``, or None when it is idle."""
    def cpu_online(self, cpu: int) -> bool: ...
    def task_cpu(self, task: int) -> int:
        """The CPU the task is assigned to (last ran on, or queued for)."""
    def task_state(self, task: int) -> str:
        """One of ``not_started``, ``runnable``, ``running``, ``sleeping``,
        ``blocked``, ``exited``."""
    def task_affinity(self, task: int) -> list[int]: ...
    def task_nice(self, task: int) -> int: ...
    def task_weight(self, task: int) -> int: ...
    def task_program(self, task: int) -> int:
        """Index of the task's program in the scenario's workload."""
    def task_class(self, task: int) -> str: ...
    def task_runtime_ns(self, task: int) -> int: ...
    def task_deadline_ns(self, task: int) -> Optional[int]: ...
    def resched(self, cpu: int) -> None:
        """Ask the engine to preempt ``cpu`` (or wake it if idle) and call pick_next."""
    def migrate(self, task: int, cpu: int) -> None:
        """Reassign a task to ``cpu``: bookkeeping for a queued task; a running
        task is preempted and enqueued on ``cpu``."""
    def set_affinity(self, task: int, cpus: Sequence[int]) -> None: ...
    def set_nice(self, task: int, nice: int) -> None: ...
    def want_tick(self, cpu: int, on: bool) -> None:
        """Ask for (or stop) scheduler ticks on ``cpu`` while it is busy."""
    def arm_timer(self, at_ns: int, token: int) -> None:
        """Call ``on_timer(cx, token)`` at ``at_ns``; re-arming a token replaces it."""
    def cancel_timer(self, token: int) -> None: ...
    def set_frequency(self, domain: int, mhz: int) -> None: ...
    def reconfigure(self, op: str, cpus: Sequence[int], mechanism: Optional[str] = None) -> None:
        """Ask for a reconfiguration of dynamic processors: ``op`` is
        ``offline``, ``online``, ``fuse`` (CPUs, lowest first: it represents
        the object) or ``split`` (one CPU, the representative); ``mechanism``
        one of ``docs/dynamic.md``'s (default: the scenario's). The engine
        validates it when applied (a bad request ends the run with an error
        naming the policy) and calls ``on_reconfigured`` when it completes."""
    def fusion_levels(self) -> list[int]:
        """CPUs per fused object of each configured fusion level (empty
        without a ``[dynamic]`` section)."""
    def warn(self, msg: str) -> None:
        """Add ``msg`` to the run's warnings (once per distinct message)."""
    # Agents only (valid inside Agent callbacks):
    def processes(self) -> list[dict[str, Any]]:
        """Per-process observables over the last sampling interval, as a daemon
        would read them on Linux: ``{"task", "program", "state", "cpu", "nice",
        "affinity", "cpu_util", "ipc", "miss_ratio", "misses_per_instr",
        "csw_per_s", "migrations_per_s", "wait_frac", "runtime_s"}``."""
    def cpusets(self) -> list[dict[str, Any]]:
        """The scenario's cpusets: ``{"name", "cpus", "mhz"}`` each."""
    def cpuset_load(self, index: int) -> int:
        """Runnable plus running tasks assigned to the CPUs of cpuset ``index``."""
    def cpu_rating(self, cpu: int) -> float:
        """Performance rating of ``cpu`` now, normalised to the slowest CPU (1.0)."""
    def cpu_mhz(self, cpu: int) -> int:
        """Current frequency of ``cpu``."""
    def cpu_domain(self, cpu: int) -> int:
        """Index of ``cpu``'s frequency domain (for ``set_frequency``)."""
    def load_avg(self) -> float:
        """Number of runnable + running tasks (instantaneous)."""
    # sched_ext dispatch queues (schedulers with ``uses_dsqs = True``; see
    # docs/python-policies.md). A call that breaks a rule raises PolicyError.
    def dsq_insert(self, task: int, dsq: int, slice_ns: Optional[int] = None) -> None:
        """``scx_bpf_dsq_insert``: queue a runnable task at the tail of ``dsq``
        with a slice of ``slice_ns`` (default ``SLICE_DFL_NS``, 20 ms). In
        ``select_cpu`` (for the task being placed: it then skips
        ``enqueue``), ``enqueue`` and ``dispatch`` only."""
    def dsq_insert_vtime(
        self, task: int, dsq: int, vtime: int, slice_ns: Optional[int] = None
    ) -> None:
        """``scx_bpf_dsq_insert_vtime``: queue on a user DSQ ordered by ``vtime``
        and set the task's ``dsq_vtime`` (``task_vtime``) to ``vtime``."""
    def dsq_move_to_local(self, dsq: int) -> bool:
        """``scx_bpf_dsq_move_to_local`` (in ``dispatch``): move the first task
        of user DSQ ``dsq`` that may run on the dispatching CPU to its local
        DSQ; returns whether one moved."""
    def create_dsq(self, dsq: int) -> None:
        """``scx_bpf_create_dsq``: a new user DSQ (id below 2**63)."""
    def dsq_nr_queued(self, dsq: int) -> int:
        """``scx_bpf_dsq_nr_queued``: tasks queued on ``dsq``."""
    def kick_cpu(self, cpu: int, preempt: bool = False) -> None:
        """``scx_bpf_kick_cpu``: wake idle ``cpu`` so it dispatches; with
        ``preempt``, end the slice of the task running there."""
    def select_cpu_dfl(self, task: int, prev_cpu: int) -> tuple[int, bool]:
        """``scx_bpf_select_cpu_dfl``: ``(cpu, True)`` with an idle CPU
        claimed for ``task`` (``prev_cpu`` first), or ``(prev_cpu, False)``."""
    def pick_idle_cpu(self, task: int) -> Optional[int]:
        """``scx_bpf_pick_idle_cpu``: claim the lowest idle CPU ``task`` may use."""
    def test_and_clear_cpu_idle(self, cpu: int) -> bool:
        """``scx_bpf_test_and_clear_cpu_idle``: claim ``cpu`` if idle and unclaimed."""
    def task_slice_ns(self, task: int) -> int:
        """``p->scx.slice``: what is left of the task's slice (as of its last stop)."""
    def task_vtime(self, task: int) -> int:
        """``p->scx.dsq_vtime``: the task's virtual time, kept by the engine
        (0 until written; ``dsq_insert_vtime`` sets it)."""
    def set_task_vtime(self, task: int, vtime: int) -> None:
        """Write ``p->scx.dsq_vtime`` (0 to 2**64-1)."""
    def task_scx_weight(self, task: int) -> int:
        """``p->scx.weight``: the task's weight on sched_ext's scale (100 at nice 0)."""

@final
class PatelPlanner:
    """The decision function of one of Patel's agents (by spec, e.g.
    ``"patel-priority[interval_ms=500]"``), for a daemon that observes real
    processes (``hetsched linux agent --agent patel-cpu``). Keeps the agent's
    memory (processes seen, samples) between calls."""

    def __new__(cls, spec: str) -> PatelPlanner: ...
    @property
    def name(self) -> str: ...
    @property
    def period_ms(self) -> float: ...
    def plan(
        self,
        processes: list[dict[str, Any]],
        cpusets: list[dict[str, Any]],
        ncpus: int,
        instant_load: float,
    ) -> list[dict[str, Any]]:
        """One sample: ``processes`` as ``Context.processes()`` gives them,
        ``cpusets`` as ``{"cpus", "mhz", "load"}``; returns
        ``{"action": "move", "task", "set", "rule"}`` and
        ``{"action": "nice", "task", "nice"}`` dicts."""
