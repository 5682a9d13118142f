"""hetsched: a laboratory for OS scheduling on heterogeneous and dynamically
reconfigurable multicore processors.

A deterministic discrete-event simulator with a Rust core (``hetsched._core``)
and this Python front end::

    import hetsched

    res = hetsched.run("scenarios/demo.toml", overrides={"duration_s": 5})
    print(res)                       # summary: makespan, energy, per-program times
    res.tasks[["task", "run_s", "work_ms"]]
    res.save("out/demo")             # CSV/JSON files (+ Perfetto trace with trace=True)

Write a scheduler in Python by subclassing :class:`hetsched.Scheduler`
(see :mod:`hetsched.examples_policies`); reproduce the papers' results with
:mod:`hetsched.reproduce` or ``hetsched reproduce all``.
"""

from typing import TYPE_CHECKING

from . import _core as _core  # the compiled core, for monkeypatching and advanced use
from ._core import (
    DSQ_GLOBAL,
    DSQ_LOCAL,
    SLICE_DFL_NS,
    HetschedError,
    PolicyError,
    Scenario,
    ScenarioError,
    SimulationError,
    __version__,
    dsq_local_on,
)
from .api import load, loads, parse_override, run
from .policy import Agent, Scheduler
from .results import Results

if TYPE_CHECKING:
    from .sweeps import sweep

__all__ = [
    "DSQ_GLOBAL",
    "DSQ_LOCAL",
    "SLICE_DFL_NS",
    "Agent",
    "HetschedError",
    "PolicyError",
    "Results",
    "Scenario",
    "ScenarioError",
    "Scheduler",
    "SimulationError",
    "__version__",
    "dsq_local_on",
    "load",
    "loads",
    "parse_override",
    "reproduce",
    "run",
    "sweep",
]


def __getattr__(name: str) -> object:
    import importlib

    # The reproductions pull in every paper's model, and sweeps pandas: load
    # them on first use, so that ``hetsched --version`` answers at once.
    if name == "reproduce":
        return importlib.import_module(".reproduce", __name__)
    if name == "sweep":
        return importlib.import_module(".sweeps", __name__).sweep

    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
