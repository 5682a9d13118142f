"""The examples in examples/ run, and do what their docstrings say."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import hetsched

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

WORKLOAD = {
    "name": "ex",
    "duration_s": 3.0,
    "seed": 2,
    "machine": {"preset": "big-little-4+4"},
    "workload": {
        "programs": [
            {"name": "heavy", "kind": "sequential", "work_ms": 400},
            {"name": "par", "kind": "parallel", "threads": 6, "work_ms": 600, "iterations": 3},
            {"name": "light", "kind": "phases", "threads": 3, "loops": 30,
             "phases": [{"compute_ms": 1}, {"sleep_ms": 9}]},
        ]
    },
}  # fmt: skip


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _class_lines(path: Path, cls: str) -> int:
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"class {cls}"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("def ", "class ")))
    return len([line for line in lines[start:end] if line.strip()])


def test_fast_cores_first_completes_and_prefers_big_cores() -> None:
    mod = _example("fast_cores_first")
    assert _class_lines(EXAMPLES / "fast_cores_first.py", "FastCoresFirst") < 50
    res = hetsched.run(WORKLOAD, scheduler=mod.FastCoresFirst(), check=True)
    assert res.summary["programs_completed"] == 3
    assert res.tasks["work_ms"].sum() == 400 + 600 + 3 * 30 * 1
    cfs = hetsched.run(WORKLOAD, scheduler="cfs")
    by_type = res.cpu_types().set_index("type")["busy_s"]
    cfs_by_type = cfs.cpu_types().set_index("type")["busy_s"]
    # Fast cores first: the big cores do a larger share of the work than under CFS.
    share = by_type["big"] / by_type.sum()
    assert share > cfs_by_type["big"] / cfs_by_type.sum()


def test_busy_to_big_agent_moves_busy_threads_off_the_little_cores() -> None:
    mod = _example("busy_to_big_agent")
    assert _class_lines(EXAMPLES / "busy_to_big_agent.py", "BusyToBig") < 50
    # Six light threads start first and take the big cores under CFS; two busy
    # threads land on little cores and stay there.
    scenario = {
        "name": "agent",
        "duration_s": 3.0,
        "seed": 2,
        "machine": {"preset": "big-little-4+4"},
        "workload": {
            "programs": [
                {"name": "light", "kind": "phases", "threads": 6, "loops": 100,
                 "phases": [{"compute_ms": 1}, {"sleep_ms": 9}]},
                {"name": "heavy", "kind": "parallel", "threads": 2, "work_ms": 3000},
            ]
        },
    }  # fmt: skip

    def heavy_on_big(res: hetsched.Results) -> float:
        heavy = res.tasks[res.tasks["program"] == "heavy"]
        big = sum(t.get("big", 0.0) for t in heavy["run_s_by_type"])
        return big / float(heavy["run_s"].sum())

    alone = hetsched.run(scenario)
    with_agent = hetsched.run(scenario, agents=[mod.BusyToBig()])
    assert heavy_on_big(alone) < 0.1
    assert heavy_on_big(with_agent) > 0.9
    assert with_agent.summary["programs_completed"] == 2
    assert with_agent.summary["makespan_s"] < alone.summary["sim_end_s"]
