"""The rt and deadline classes through the Python API (docs/classes.md): a
hand-worked schedule run with ``hetsched.run``, the per-task columns the
classes add, the refusal of over-admitted deadline bandwidth, and the
classes' entries in ``hetsched list policies``."""

from __future__ import annotations

import pytest

import hetsched
from hetsched import _core

MACHINE = """
duration_s = 2.0
stop_when_done = false
scheduler = "eevdf"
[machine.types.c]
capacity = 1024
[[machine.cpus]]
type = "c"
"""


def prog(name: str, work_ms: float, extra: str = "") -> str:
    return (
        f'[[workload.programs]]\nname = "{name}"\nkind = "sequential"\n'
        f"work_ms = {work_ms}\n{extra}\n"
    )


def test_fifo_hog_leaves_the_fair_task_50_ms_per_second_and_cbs_throttles() -> None:
    # One CPU, 2 s: a FIFO task that never blocks, a fair task, and a CBS
    # task of 10 ms per 100 ms that wants 30 ms, arriving at 1.2 s. The
    # deadline task preempts the FIFO task at 1200, 1300 and 1400 ms for
    # 10 ms each (throttled 2 × 90 ms); the fair server runs the fair task
    # 950-1000 and 1950-2000 ms (its period restarts at 1000 ms).
    text = (
        MACHINE
        + prog("hog", 1.0e7, 'policy = "fifo"\npriority = 50')
        + prog("fair", 1.0e7)
        + prog(
            "dl",
            30,
            'policy = "deadline"\ndl_runtime_ms = 10\ndl_period_ms = 100\nstart_ms = 1200',
        )
    )
    res = hetsched.run(hetsched.loads(text), check=True)
    t = res.tasks.set_index("program")
    assert t.loc["fair", "run_s"] == pytest.approx(0.1, abs=1e-9)
    assert t.loc["dl", "run_s"] == pytest.approx(0.03, abs=1e-9)
    assert t.loc["dl", "end_s"] == pytest.approx(1.41, abs=1e-9)
    assert t.loc["dl", "throttled_s"] == pytest.approx(0.18, abs=1e-9)
    assert t.loc["hog", "run_s"] == pytest.approx(2.0 - 0.1 - 0.03, abs=1e-9)
    assert t.loc["hog", "throttled_s"] == pytest.approx(0.1, abs=1e-9)
    assert list(t["policy"]) == ["fifo", "other", "deadline"]
    assert list(t["rt_priority"]) == [50, 0, 0]
    assert int(t.loc["dl", "dl_misses"]) == 0


def test_admission_control_names_the_numbers() -> None:
    dl = 'policy = "deadline"\ndl_runtime_ms = 60\ndl_period_ms = 100'
    text = MACHINE + prog("a", 1, dl) + prog("b", 1, dl)
    with pytest.raises(hetsched.ScenarioError, match=r"reserve 1\.2000 CPUs .* at most 0\.9500"):
        hetsched.run(hetsched.loads(text))


def test_classes_are_listed_with_their_settings() -> None:
    classes = {p["name"]: p for p in _core.list_policies() if p["kind"] == "class"}
    assert list(classes) == ["deadline", "rt"]
    rt = {q["name"]: q["default"] for q in classes["rt"]["params"]}
    assert rt == {"rr_timeslice_ms": "100", "rt_runtime_ms": "950", "rt_period_ms": "1000"}
    dl = {q["name"]: q["default"] for q in classes["deadline"]["params"]}
    assert dl["fair_server_runtime_ms"] == "50" and dl["fair_server_period_ms"] == "1000"
