"""How fault-and-migrate counts T (Li et al. §5.2: "migrates the thread back
after it has run for T timer ticks on the new core"), worked by hand.

The kernel counts the timer ticks the thread takes on the new core, and every
CPU's tick falls on the same 4 ms grid (250 Hz; Linux 2.6.24 starts each CPU's
tick timer at the same jiffy boundary). So a thread that faults between two
ticks comes back at the T-th tick after the fault: after (T - 1) whole ticks
plus the rest of the tick it faulted in. A thread that faults right at a tick
(as the streaming kernels do: they fault as soon as they are back) comes back
after exactly T ticks, which is the paper's one fault per tick at T = 1.
"""

from __future__ import annotations

from typing import Any

import pytest

from hetsched import api

TICK_MS = 4.0


def _scenario(t: int) -> dict[str, Any]:
    # One CPU without the feature (0), one with it (1), equally fast; no
    # refill or trap cost, so only the tick counting sets the times.
    return {
        "name": "fam-ticks",
        "seed": 1,
        "duration_s": 10.0,
        "scheduler": f"cfs[fam=true, fam_ticks={t}]",
        "machine": {
            "tick_hz": 250,
            "fault_trap_us": 0.0,
            "migration": {"enabled": False},
            "types": {
                "plain": {"capacity": 1024},
                "sse": {"capacity": 1024, "features": ["sse4.1"]},
            },
            "clusters": [{"type": "plain", "cores": 1}, {"type": "sse", "cores": 1}],
        },
        "workload": {
            "programs": [
                {
                    "name": "p",
                    "kind": "phases",
                    "loops": 1,
                    "affinity": [0, 1],
                    # 6 ms of plain code (a fault at 6 ms, 1.5 ticks), then
                    # 20 ms that need SSE4.1 (done at 26 ms: no time is lost
                    # on the plain CPU, where it faults at once).
                    "phases": [{"compute_ms": 6.0}, {"compute_ms": 20.0, "feature": "sse4.1"}],
                }
            ]
        },
    }


def _moves(t: int) -> tuple[list[float], list[float], float]:
    res = api.run(_scenario(t), trace=True)
    to_sse = [e["t_ns"] / 1e6 for e in res.trace if e["type"] == "migrate" and e["to"] == 1]
    back = [e["t_ns"] / 1e6 for e in res.trace if e["type"] == "migrate" and e["to"] == 0]
    return to_sse, back, float(res.programs["completion_s"].iloc[0]) * 1e3


@pytest.mark.parametrize(
    ("t", "back_ms"),
    [
        # T = 1: back at the first tick after the fault (8 ms, half a tick
        # later), then at every tick (it faults again at once).
        (1, [8.0, 12.0, 16.0, 20.0, 24.0]),
        # T = 2: the 6 ms fault returns at the second tick (12 ms), the
        # 12 ms one after two whole ticks (20 ms); the phase ends at 26 ms,
        # before the next return (28 ms).
        (2, [12.0, 20.0]),
        # T = 8: the first return would be at 36 ms; the phase ends first.
        (8, []),
    ],
)
def test_t_counts_the_ticks_taken_on_the_new_core(t: int, back_ms: list[float]) -> None:
    to_sse, back, done_ms = _moves(t)
    assert back == pytest.approx(back_ms)
    # A fault (a move to the SSE4.1 CPU) at 6 ms and at every return.
    assert to_sse == pytest.approx([6.0, *back_ms])
    assert done_ms == pytest.approx(26.0)


def test_a_fault_between_ticks_returns_before_t_whole_ticks() -> None:
    # Counting whole ticks from the move would return the 6 ms fault at
    # 12 ms (the first tick at least T = 1 tick after it); the kernel's
    # count returns it at 8 ms, after half a tick.
    _, back, _ = _moves(1)
    assert back[0] - 6.0 == pytest.approx(TICK_MS / 2)
