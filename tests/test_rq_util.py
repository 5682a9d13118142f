"""A runqueue's utilisation (`cfs_rq->avg.util_avg`) keeps the utilisation of
its tasks while they sleep, decaying, and loses it when they move or exit:
seen through a new task's initial utilisation
(`post_init_entity_util_avg`: half of what the runqueue leaves of the CPU's
capacity)."""

from __future__ import annotations

import hetsched
from eevdf_scenarios import machine

#: A PELT period, ms (1024 × 1024 ns) and the signal's half-life in periods.
PERIOD_MS = 1.048576
HALF_LIFE = 32


def _new_task_after(first: str) -> tuple[int, int]:
    """`a` computes 100 ms on CPU 0, then does `first`; `b` starts on CPU 0
    10 ms after `a` stopped and runs 10 µs. Their util_avg at the end."""
    text = (
        machine("blocked-util", 0.3, "eevdf", 2)
        + f"""
[[workload.programs]]
name = "a"
kind = "phases"
affinity = [0]
phases = [{{compute_ms = 100.0}}{first}]
[[workload.programs]]
name = "b"
kind = "phases"
affinity = [0]
start_ms = 110.0
phases = [{{compute_ms = 0.01}}, {{sleep_ms = 1000.0}}]
"""
    )
    rows = hetsched.run(hetsched.loads(text)).tasks.set_index("program")
    return int(rows.loc["a", "util_avg"]), int(rows.loc["b", "util_avg"])


def test_a_sleeping_tasks_utilisation_stays_on_its_runqueue() -> None:
    a, b = _new_task_after(", {sleep_ms = 1000.0}")
    assert 900 < a < 1024
    # a's 10 ms asleep decay its share of the runqueue; b gets half of the rest.
    left = a * 2 ** (-(10.0 / PERIOD_MS) / HALF_LIFE)
    assert abs(b - (1024 - left) / 2) <= 5, (a, b)


def test_an_exited_tasks_utilisation_leaves_its_runqueue() -> None:
    _, b = _new_task_after("")
    # Nothing left on the runqueue: half of the whole capacity.
    assert b in (511, 512), b
