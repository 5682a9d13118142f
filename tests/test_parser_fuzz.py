"""The scenario parser never crashes: any value in any field gives either a
valid scenario or a ScenarioError — never a panic or another exception."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched
from hetsched import ScenarioError

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(min_value=-3, max_value=70), max_size=4),
)
PROGRAM_FIELDS = [
    "kind",
    "threads",
    "work_ms",
    "iterations",
    "seq_fraction",
    "chunks",
    "io_ms",
    "period_ms",
    "wcet_ms",
    "deadline_ms",
    "jobs",
    "loops",
    "barrier_count",
    "start_ms",
    "repeat",
    "nice",
    "affinity",
    "class",
    "mem",
    "ipc",
    "miss_ratio",
    "jitter",
    "feature",
]
KINDS = ["sequential", "parallel", "dynamic", "fork_join", "pool", "periodic", "phases"]


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    fields=st.dictionaries(st.sampled_from(PROGRAM_FIELDS), values, max_size=5),
    machine_field=st.sampled_from(["tick_hz", "platform_base_w", "ref_ghz"]),
    machine_value=values,
    duration=values,
)
def test_any_input_is_a_scenario_or_a_scenario_error(
    kind, fields, machine_field, machine_value, duration
) -> None:  # type: ignore[no-untyped-def]
    prog = {"kind": kind, "work_ms": 10, **fields}
    scn = {
        "duration_s": duration,
        "machine": {"preset": "smp-4", machine_field: machine_value},
        "workload": {"programs": [prog]},
    }
    try:
        text = json.dumps(scn)
    except ValueError:
        return
    try:
        parsed = hetsched.loads(text, fmt="json")
    except ScenarioError as e:
        message = str(e)
    else:
        message = None
    if message is not None:
        assert message, "an error message is never empty"
        return
    # A valid scenario must also run briefly without crashing.
    res = hetsched.run(parsed, overrides={"duration_s": 0.05})
    assert res.summary["sim_end_s"] <= 0.05 + 1e-9
