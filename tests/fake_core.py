"""A stand-in for the compiled ``hetsched._core``, used only when it is not built.

It follows the binding's contract (``python/hetsched/_core.pyi``) closely
enough for the pure-Python layer to be exercised: TOML/JSON parsing with
dotted-path overrides, a fixed results document, listings and a schema. It
simulates nothing. ``conftest.py`` installs it; tests that need particular
core behaviour monkeypatch ``hetsched._core`` so they run unchanged against
the real core.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Callable, Sequence
from typing import Any

__version__ = "0.1.0+fake"


class HetschedError(Exception):
    pass


class ScenarioError(HetschedError):
    pass


class PolicyError(HetschedError):
    pass


class SimulationError(HetschedError):
    pass


#: A small results document with every key the core produces, plus one the
#: Python side does not know (``future_*``), to check it is tolerated.
RESULTS: dict[str, Any] = {
    "summary": {
        "scenario": "fixture",
        "scheduler": "cfs",
        "governor": "performance",
        "seed": 7,
        "version": __version__,
        "sim_end_s": 2.5,
        "makespan_s": 2.25,
        "events": 12345,
        "wall_s": 0.012,
        "energy_j": 41.5,
        "avg_power_w": 16.6,
        "migrations": 3,
        "context_switches": 1204,
        "deadline_misses": 0,
        "tasks": 3,
        "programs_completed": 1,
        "trace_hash": "0123456789abcdef",
        "future_summary_key": 1,
    },
    "tasks": [
        {
            "task": 0,
            "program": "spin",
            "program_id": 0,
            "thread": 0,
            "state": "exited",
            "start_s": 0.0,
            "end_s": 2.25,
            "run_s": 2.0,
            "wait_s": 0.25,
            "sleep_s": 0.0,
            "work_ms": 2000.0,
            "instructions": 4.0e9,
            "cycles": 4.0e9,
            "ipc": 1.0,
            "cache_refs": 1.0e7,
            "cache_misses": 1.0e5,
            "csw_voluntary": 0,
            "csw_involuntary": 12,
            "migrations": 1,
            "jobs": 0,
            "deadline_misses": 0,
            "max_response_ms": 0.0,
            "run_s_by_type": {"big": 2.0},
        },
        {
            "task": 1,
            "program": "spin",
            "program_id": 0,
            "thread": 1,
            "state": "exited",
            "start_s": 0.0,
            "end_s": 2.25,
            "run_s": 2.1,
            "wait_s": 0.15,
            "sleep_s": 0.0,
            "work_ms": 700.0,
            "instructions": 1.4e9,
            "cycles": 4.2e9,
            "ipc": 0.33,
            "cache_refs": 1.0e7,
            "cache_misses": 1.0e5,
            "csw_voluntary": 0,
            "csw_involuntary": 10,
            "migrations": 2,
            "jobs": 0,
            "deadline_misses": 0,
            "max_response_ms": 0.0,
            "run_s_by_type": {"big": 0.3, "little": 1.8},
        },
        {
            "task": 2,
            "program": "idle-loop",
            "program_id": 1,
            "thread": 0,
            "state": "running",
            "start_s": 0.5,
            "end_s": None,
            "run_s": 1.0,
            "wait_s": 0.0,
            "sleep_s": 1.0,
            "work_ms": 300.0,
            "instructions": 6.0e8,
            "cycles": 2.0e9,
            "ipc": 0.3,
            "cache_refs": 0.0,
            "cache_misses": 0.0,
            "csw_voluntary": 5,
            "csw_involuntary": 0,
            "migrations": 0,
            "jobs": 0,
            "deadline_misses": 0,
            "max_response_ms": 0.0,
            "run_s_by_type": {"little": 1.0},
            "future_task_key": "x",
        },
    ],
    "programs": [
        {
            "program_id": 0,
            "program": "spin",
            "instance": 0,
            "start_s": 0.0,
            "end_s": 2.25,
            "completion_s": 2.25,
            "threads": 2,
        },
        {
            "program_id": 1,
            "program": "idle-loop",
            "instance": 0,
            "start_s": 0.5,
            "end_s": None,
            "completion_s": None,
            "threads": 1,
        },
    ],
    "cpus": [
        {
            "cpu": i,
            "type": t,
            "node": 0,
            "core": i,
            "llc": i // 2,
            "freq_domain": i // 2,
            "busy_s": b,
            "idle_s": 2.5 - b,
            "utilization": b / 2.5,
            "energy_j": e,
            "ticks": 100,
            "final_mhz": 2000,
        }
        for i, (t, b, e) in enumerate(
            [("big", 2.3, 15.0), ("big", 0.0, 1.0), ("little", 2.2, 5.0), ("little", 0.6, 2.0)]
        )
    ],
    "warnings": ["machine.tick_hz: 1000 Hz ticks on 4 CPUs make the run slower"],
    "scenario": {"name": "fixture", "seed": 7, "duration_s": 2.5, "scheduler": "cfs"},
    "trace": [],
    "future_top_level_key": [],
}

TRACE = [
    {"t_ns": 0, "type": "switch", "cpu": 0, "prev": None, "next": 0},
    {"t_ns": 1000, "type": "migrate", "task": 1, "from": 2, "to": 0},
]


def results_json(trace: bool = False, name: str = "fixture") -> str:
    """The fixture document as the core's ``run`` would return it."""
    doc = copy.deepcopy(RESULTS)
    doc["summary"]["scenario"] = name
    doc["scenario"]["name"] = name
    if trace:
        doc["trace"] = copy.deepcopy(TRACE)
    return json.dumps(doc)


class Scenario:
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def name(self) -> str:
        return str(self._data.get("name", "scenario"))

    @property
    def seed(self) -> int:
        return int(self._data.get("seed", 0))

    @property
    def duration_s(self) -> float:
        return float(self._data["duration_s"])

    @property
    def scheduler(self) -> str:
        return str(self._data.get("scheduler", "cfs"))

    @property
    def warnings(self) -> list[str]:
        return []

    def to_json(self) -> str:
        return json.dumps(self._data)

    def to_toml(self) -> str:
        return "\n".join(
            f"{k} = {json.dumps(v)}"
            for k, v in self._data.items()
            if not isinstance(v, dict | list)
        )


def parse_scenario(
    text: str,
    source: str = "<string>",
    overrides: Sequence[tuple[str, str]] = (),
    fmt: str = "toml",
) -> Scenario:
    if fmt not in ("toml", "json"):
        raise ScenarioError(f"unknown format {fmt!r}")
    try:
        data = tomllib.loads(text) if fmt == "toml" else json.loads(text)
    except ValueError as e:  # TOMLDecodeError is a ValueError
        raise ScenarioError(f"{source}: {e}") from None
    for path, value in overrides:
        _set_path(data, path, _literal(value))
    duration = data.get("duration_s")
    if not isinstance(duration, int | float) or duration <= 0:
        raise ScenarioError(f"{source}: duration_s: must be a number > 0")
    return Scenario(data)


def run(
    scenario: Scenario,
    *,
    trace: bool = False,
    check: bool = False,
    scheduler: Any = None,
    agents: Sequence[Any] = (),
    progress: Callable[[float, float], None] | None = None,
) -> str:
    if not isinstance(scenario, Scenario):
        raise TypeError("run() needs a Scenario")
    if progress is not None:
        for i in range(1, 5):
            progress(scenario.duration_s * i / 4, scenario.duration_s)
    return results_json(trace=trace, name=scenario.name)


def schema() -> str:
    return json.dumps(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "hetsched scenario",
            "type": "object",
            "required": ["duration_s"],
        }
    )


def list_policies() -> list[dict[str, Any]]:
    return [
        {
            "name": "cfs",
            "kind": "scheduler",
            "doc": "Linux CFS.\nLonger text.",
            "params": [{"name": "min_granularity_ms", "default": "0.75", "doc": "shortest slice"}],
        },
        {"name": "pinned", "kind": "scheduler", "doc": "Each task stays on one CPU.", "params": []},
        {"name": "performance", "kind": "governor", "doc": "Highest P-state.", "params": []},
    ]


def list_presets() -> list[dict[str, str]]:
    return [{"name": "big-little-4+4", "doc": "4 big + 4 little cores", "toml": "[machine]\n"}]


def chrome_trace(results_json: str) -> str:
    events = json.loads(results_json)["trace"]
    return json.dumps(
        {
            "traceEvents": [
                {
                    "name": e["type"],
                    "ph": "i",
                    "ts": e["t_ns"] / 1e3,
                    "pid": 0,
                    "tid": e.get("cpu", 0),
                }
                for e in events
            ]
        }
    )


class Context:
    """Present for imports only; the fake core never calls policies."""


_SEGMENT = re.compile(r"([A-Za-z_][\w-]*)((?:\[\d+\])*)")


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    node: Any = data
    parts = path.split(".")
    for n, part in enumerate(parts):
        m = _SEGMENT.fullmatch(part)
        if m is None:
            raise ScenarioError(f"--set {path}: bad path segment {part!r}")
        key, indexes = m.group(1), [int(i) for i in re.findall(r"\d+", m.group(2))]
        last = n == len(parts) - 1
        if last and not indexes:
            node[key] = value
            return
        node = node.setdefault(key, {})
        for j, i in enumerate(indexes):
            if last and j == len(indexes) - 1:
                node[i] = value
                return
            node = node[i]


def _literal(value: str) -> Any:
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except ValueError:
        return value
