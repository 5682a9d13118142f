"""Per-task wake-up latency (``wakeup_latency_p50_ms``, ``_p99_ms``,
``_max_ms``): from becoming runnable after a wake-up to running, worked by
hand on one CPU under a first-in-first-out policy written here."""

from __future__ import annotations

import math
from typing import Any

import pytest

import hetsched

SCN = """
name = "wakelat"
duration_s = 0.1
governor = "performance"
[machine.types.c]
capacity = 1024
pstates = [{ mhz = 1000, volt = 1.0 }]
[[machine.cpus]]
type = "c"
[[workload.programs]]
name = "spin"
kind = "sequential"
work_ms = 10
[[workload.programs]]
name = "sleeper"
kind = "phases"
start_ms = 1
loops = 3
phases = [{ compute_ms = 1 }, { sleep_ms = 2 }]
"""


class Fifo(hetsched.Scheduler):
    """One queue, first come first served, never preempts."""

    def __init__(self) -> None:
        self.q: list[int] = []

    def enqueue(self, cx: Any, task: int, cpu: int, flags: str) -> None:
        self.q.append(task)

    def dequeue(self, cx: Any, task: int, cpu: int) -> None:
        self.q.remove(task)

    def pick_next(self, cx: Any, cpu: int) -> int | None:
        return self.q.pop(0) if self.q else None


def test_latencies_worked_by_hand() -> None:
    res = hetsched.run(hetsched.loads(SCN), scheduler=Fifo(), check=True)
    rows = {r["program"]: r for r in res.tasks.to_dict("records")}
    # spin starts at 0 on the idle CPU: one wake-up, latency 0; it runs to 10 ms.
    assert rows["spin"]["wakeup_latency_p50_ms"] == 0.0
    assert rows["spin"]["wakeup_latency_max_ms"] == 0.0
    # sleeper: new at 1 ms, runs at 10 ms (9 ms); computes to 11, sleeps to
    # 13, wakes on the idle CPU (0); again 14 → 16 (0). Samples 0, 0, 9 ms:
    # p50 = x[1] = 0; p99: h = 2 × 0.99 = 1.98, x[1] + 0.98 (x[2] − x[1]) =
    # 8.82 ms; max 9 ms.
    s = rows["sleeper"]
    assert s["wakeup_latency_p50_ms"] == pytest.approx(0.0, abs=1e-9)
    assert s["wakeup_latency_p99_ms"] == pytest.approx(8.82, abs=1e-9)
    assert s["wakeup_latency_max_ms"] == pytest.approx(9.0, abs=1e-9)


def test_a_task_that_never_woke_has_nan_and_every_scheduler_fills_them() -> None:
    scn = SCN.replace("start_ms = 1", "start_ms = 200")  # after the run ends
    res = hetsched.run(hetsched.loads(scn), scheduler=Fifo())
    s = next(r for r in res.tasks.to_dict("records") if r["program"] == "sleeper")
    assert math.isnan(s["wakeup_latency_p50_ms"]) and math.isnan(s["wakeup_latency_max_ms"])
    for policy in ("cfs", "eevdf"):
        text = SCN.replace("governor =", f'scheduler = "{policy}"\ngovernor =')
        res = hetsched.run(hetsched.loads(text), check=True)
        assert res.tasks["wakeup_latency_max_ms"].notna().all(), policy
