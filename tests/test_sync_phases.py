"""The synchronisation phases (sim/sync.rs) through the Python API: an exact
one-CPU timeline of two threads contending for a mutex, and the deadlock
error. The hand-worked schedules of every operation are the Rust tests in
crates/hetsched-core/tests/sync.rs."""

from __future__ import annotations

import pytest

import hetsched

ONE_CPU = """
duration_s = 1
scheduler = "{sched}"
[machine.types.c]
capacity = 1024
[machine.migration]
enabled = false
[[machine.cpus]]
type = "c"
"""

MUTEX = """
[[workload.programs]]
name = "a"
kind = "phases"
phases = [{ lock = "m" }, { compute_ms = 4 }, { unlock = "m" }, { compute_ms = 1 }]
[[workload.programs]]
name = "b"
kind = "phases"
phases = [{ sleep_ms = 1 }, { lock = "m" }, { compute_ms = 2 }, { unlock = "m" }]
"""


@pytest.mark.parametrize("sched", ["cfs", "eevdf"])
def test_two_threads_on_one_cpu_contending_for_a_mutex(sched: str) -> None:
    # A locks at 0 and computes. B wakes at 1 ms and, having slept, preempts
    # A (wake-up preemption), runs and finds the mutex held: it blocks at
    # once. A computes on to 4 ms and unlocks: the mutex goes to B, whose
    # wake-up preempts A again; B computes 4..6 and exits, A ends its last
    # 1 ms at 7.
    res = hetsched.run(hetsched.loads(ONE_CPU.format(sched=sched) + MUTEX), trace=True)
    runs = [
        (e["task"], e["t_ns"] / 1e6, e["end_ns"] / 1e6)
        for e in res.trace
        if e["type"] == "run" and e["end_ns"] > e["t_ns"]
    ]
    assert sorted(runs, key=lambda r: r[1]) == [
        (0, 0.0, 1.0), (0, 1.0, 4.0), (1, 4.0, 6.0), (0, 6.0, 7.0)
    ]  # fmt: skip
    blocks = [(e["task"], e["t_ns"] / 1e6, e["reason"]) for e in res.trace if e["type"] == "block"]
    assert (1, 1.0, "lock") in blocks
    t = res.tasks.set_index("program")
    # B's wait for the mutex counts as sleep: 1 ms asleep + 3 ms blocked.
    assert t.loc["b", "sleep_s"] == pytest.approx(0.004)
    assert t.loc["a", "wait_s"] == pytest.approx(0.002)


def test_a_deadlock_is_an_error_naming_threads_and_objects() -> None:
    text = ONE_CPU.format(sched="cfs") + (
        '[[workload.programs]]\nname = "w"\nkind = "phases"\n'
        'phases = [{ pend = "never" }, { compute_ms = 1 }]\n'
    )
    with pytest.raises(hetsched.ScenarioError, match='w\\[0\\] pends on semaphore "never"'):
        hetsched.run(hetsched.loads(text))
