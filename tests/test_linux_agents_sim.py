"""The agents of ``hetsched.linux.agents`` in the simulator: the same code
that drives real processes (``hetsched linux agent``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import hetsched
from hetsched.linux.agents import EqualShareAgent, FasterFirstAgent, PatelAgent

TWO_SPEEDS = """
name = "two-speeds"
duration_s = 4.0
scheduler = "cfs"
[machine]
types.big = { capacity = 1024 }
types.little = { capacity = 512 }
cpus = [{ type = "big" }, { type = "little" }]
[[workload.programs]]
name = "a"
kind = "sequential"
work_ms = 600
[[workload.programs]]
name = "b"
kind = "sequential"
work_ms = 600
[[workload.programs]]
name = "c"
kind = "sequential"
work_ms = 600
"""


@pytest.mark.parametrize("name", ["patel-cpu", "patel-ctxswitch"])
def test_patel_agent_through_python_decides_as_the_built_in_one(name: str) -> None:
    scen = hetsched.load(f"scenarios/{name}.toml")
    built_in = hetsched.run(scen)
    d = json.loads(scen.to_json())
    (spec,) = d["agents"]
    d["agents"] = []
    wrapped = hetsched.run(d, agents=[PatelAgent(spec)])
    assert wrapped.programs["completion_s"].tolist() == built_in.programs["completion_s"].tolist()
    assert wrapped.summary["migrations"] == built_in.summary["migrations"]


def test_patel_agent_refuses_a_machine_without_cpusets() -> None:
    with pytest.raises(hetsched.PolicyError, match="patel-cpu needs cpusets"):
        hetsched.run(hetsched.loads(TWO_SPEEDS), agents=[PatelAgent("patel-cpu")])


def test_patel_spec_errors_name_the_parameter() -> None:
    with pytest.raises(hetsched.PolicyError, match="interval_ms"):
        PatelAgent("patel-cpu[interval_ms=-1]")


def _completions(agent: Any) -> list[float]:
    res = hetsched.run(hetsched.loads(TWO_SPEEDS), agents=[agent] if agent else [])
    return sorted(float(c) for c in res.programs["completion_s"])


def test_faster_first_gives_the_fast_cpu_to_one_process() -> None:
    cfs = _completions(None)
    ff = _completions(FasterFirstAgent(period_ms=50))
    # CFS shares both CPUs among the three: they end together, at 1.2 s
    # (1800 ms of work on 1.5 CPUs of capacity). Faster-first keeps one
    # process on the fast CPU, which finishes it in about 0.6 s; the other
    # two then share the slow CPU, and later the fast one.
    assert cfs[0] == pytest.approx(1.2, abs=0.05)
    assert ff[0] < 0.7
    assert ff[-1] >= 1.2 - 1e-6


def test_equal_share_evens_out_completion() -> None:
    ff = _completions(FasterFirstAgent(period_ms=50))
    eq = _completions(EqualShareAgent(period_ms=50))
    spread_ff, spread_eq = ff[-1] - ff[0], eq[-1] - eq[0]
    # Rotating the fast CPU among the three gives closer completion times
    # than handing it to the same processes.
    assert spread_eq < spread_ff
