"""The pieces of the SimSo comparison that do not need SimSo."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import compare_simso as cs
from edf_python import PyGlobalEdf


def test_uunifast_discard_sums_to_total_and_caps_each_task() -> None:
    rng = random.Random(7)
    for n, total in [(10, 1.4), (50, 5.6), (200, 22.4)]:
        u = cs.uunifast_discard(n, total, rng)
        assert len(u) == n
        assert sum(u) == pytest.approx(total)
        assert all(0.0 <= x <= 1.0 for x in u)


def test_uunifast_discard_refuses_the_impossible() -> None:
    with pytest.raises(SystemExit, match="no task set"):
        cs.uunifast_discard(2, 2.5, random.Random(1))


def test_task_sets_are_reproducible_and_in_range() -> None:
    a = cs.task_set(50, 8, seed=3)
    assert a == cs.task_set(50, 8, seed=3)
    assert a != cs.task_set(50, 8, seed=4)
    assert all(10.0 <= t["period_ms"] <= 100.0 for t in a)
    assert all(0 < t["wcet_ms"] <= t["period_ms"] for t in a)
    assert all(t["period_ms"].is_integer() for t in cs.task_set(20, 4, 3, integer_periods=True))


def test_trace_counts_follow_simso_definitions() -> None:
    trace = [
        # task 0: runs 0-1 ms on CPU 0, preempted, resumes at 2 ms on CPU 1
        # (a preemption and a migration), finishes its job at 3 ms.
        {"type": "run", "t_ns": 0, "end_ns": 1_000_000, "cpu": 0, "task": 0},
        {"type": "run", "t_ns": 2_000_000, "end_ns": 3_000_000, "cpu": 1, "task": 0},
        {"type": "block", "t_ns": 3_000_000, "task": 0, "reason": "period"},
        # task 1: picked and displaced at the same instant (not a run), then
        # a whole job on CPU 1, then the next job on CPU 0 (a migration
        # between jobs, no preemption).
        {"type": "run", "t_ns": 0, "end_ns": 0, "cpu": 0, "task": 1},
        {"type": "run", "t_ns": 1_000_000, "end_ns": 2_000_000, "cpu": 1, "task": 1},
        {"type": "block", "t_ns": 2_000_000, "task": 1, "reason": "period"},
        {"type": "run", "t_ns": 5_000_000, "end_ns": 6_000_000, "cpu": 0, "task": 1},
        {"type": "block", "t_ns": 6_000_000, "task": 1, "reason": "period"},
    ]
    assert cs.trace_counts(trace, 2) == [(1, 1), (0, 1)]


def test_python_edf_takes_the_same_decisions_as_the_rust_one() -> None:
    scn = cs.scenario(cs.task_set(12, 3, seed=5), 3, 0.5)
    rust = cs.run_hetsched(scn)
    py = cs.run_hetsched(scn, PyGlobalEdf)
    agree, mismatch = cs.agreement(rust["tasks"], py["tasks"])
    assert agree == 1.0, mismatch
    assert sum(t["jobs"] for t in rust["tasks"]) > 12 * 4  # it really ran
    assert any(t["preemptions"] for t in rust["tasks"])
