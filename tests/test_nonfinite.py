"""No silent defaults for non-finite numbers, and no huge allocation before a
size is checked.

A ``nan``, ``inf`` or ``-inf`` anywhere in a scenario (TOML, ``--set``, JSON
text or a Python dict) is a ScenarioError naming its exact field, never a run
with the field's default.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched
from hetsched import ScenarioError
from hetsched.linux import LinuxError
from hetsched.linux.workload import from_dict

NON_FINITE = [math.nan, math.inf, -math.inf]
TOP_FIELDS = ["duration_s", "seed", "warmup_s", "sample_ms"]
MACHINE_FIELDS = ["tick_hz", "platform_base_w", "ref_ghz", "mem_line_ns"]
PROGRAM_FIELDS = [
    "threads",
    "work_ms",
    "iterations",
    "seq_fraction",
    "chunks",
    "period_ms",
    "wcet_ms",
    "loops",
    "barrier_count",
    "start_ms",
    "repeat",
    "nice",
    "affinity",
    "mem",
    "ipc",
    "miss_ratio",
    "jitter",
    "slice_ms",
]
KINDS = ["sequential", "parallel", "dynamic", "fork_join", "pool", "periodic", "phases"]


def shown(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def expected(path: str, x: float) -> str:
    return f"{path}: {shown(x)} is not allowed; numbers must be finite"


def base() -> dict[str, Any]:
    return {
        "duration_s": 0.05,
        "machine": {"preset": "big-little-4+4"},
        "workload": {
            "programs": [
                {"name": "a", "kind": "parallel", "threads": 6, "work_ms": 10},
                {"name": "b", "kind": "sequential", "work_ms": 5, "affinity": [0, 1]},
            ]
        },
    }


def toml_value(v: Any) -> str:
    """A value as TOML (inline tables and arrays; floats in TOML's spelling)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return shown(v) if not math.isfinite(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"


def to_toml(scn: dict[str, Any]) -> str:
    return "\n".join(f"{k} = {toml_value(v)}" for k, v in scn.items()) + "\n"


def plant(scn: dict[str, Any], where: int, key: str, x: float, in_list: bool) -> str:
    """Put ``x`` (or ``[1, x]``) into ``scn`` at a place chosen by ``where``
    and ``key``; return the field path the error must name."""
    value: Any = [1, x] if in_list else x
    suffix = "[1]" if in_list else ""
    if where == 0:
        key = TOP_FIELDS[PROGRAM_FIELDS.index(key) % len(TOP_FIELDS)]
        scn[key] = value
        return key + suffix
    if where == 1:
        key = MACHINE_FIELDS[PROGRAM_FIELDS.index(key) % len(MACHINE_FIELDS)]
        scn["machine"][key] = value
        return f"machine.{key}" + suffix
    i = where - 2
    scn["workload"]["programs"][i][key] = value
    return f"workload.programs[{i}].{key}" + suffix


planted = st.tuples(
    st.integers(min_value=0, max_value=3),
    st.sampled_from(PROGRAM_FIELDS),
    st.sampled_from(NON_FINITE),
    st.booleans(),
    st.sampled_from(KINDS),
)


@settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(planted)
def test_fuzz_non_finite_is_an_error_naming_the_field(case: tuple[Any, ...]) -> None:
    where, key, x, in_list, kind = case
    scn = base()
    scn["workload"]["programs"][0]["kind"] = kind
    path = plant(scn, where, key, x, in_list)
    want = expected(path, x)
    attempts = {
        "dict": lambda: hetsched.run(scn),
        "toml": lambda: hetsched.loads(to_toml(scn), fmt="toml"),
        "json": lambda: hetsched.loads(json.dumps(scn), fmt="json"),
    }
    for how, attempt in attempts.items():
        with pytest.raises(ScenarioError) as e:
            attempt()
        msg = str(e.value)
        assert want in msg, f"{how}: {msg}"
        assert "null" not in msg and "column" not in msg, f"{how}: {msg}"
    # The same value as an override of a valid scenario (`--set path=nan`).
    clean = base()
    clean["workload"]["programs"][0]["kind"] = kind
    literal = f"[1, {shown(x)}]" if in_list else shown(x)
    with pytest.raises(ScenarioError) as e:
        hetsched.loads(to_toml(clean), fmt="toml", overrides=[(path.removesuffix("[1]"), literal)])
    assert want in str(e.value), str(e.value)


def test_issue_examples() -> None:
    demo = Path(__file__).resolve().parents[1] / "scenarios" / "demo.toml"
    with pytest.raises(ScenarioError, match=r"workload\.programs\[0\]\.threads: nan is not"):
        hetsched.load(demo, overrides=["workload.programs[0].threads=nan"])
    with pytest.raises(ScenarioError, match=r"workload\.programs\[1\]\.affinity: inf is not"):
        hetsched.load(demo, overrides={"workload.programs[1].affinity": math.inf})
    scn = base()
    scn["workload"]["programs"][0]["threads"] = math.nan
    with pytest.raises(ScenarioError, match=r"^workload\.programs\[0\]\.threads: nan is not"):
        hetsched.run(scn)


@pytest.mark.parametrize("x", NON_FINITE)
def test_linux_workload_refuses_non_finite(x: float) -> None:
    prog = {"name": "p", "command": "true"}
    with pytest.raises(LinuxError, match=r"duration_s: .* must be a finite number > 0"):
        from_dict({"duration_s": x, "programs": [prog]})
    with pytest.raises(LinuxError, match=r"programs\[0\]\.start_s: .* must be a finite number"):
        from_dict({"programs": [{**prog, "start_s": x}]})
    assert from_dict({"duration_s": 2.5, "programs": [prog]}).duration_s == 2.5


def test_huge_machine_is_refused_before_it_is_built() -> None:
    scn = base()
    scn["machine"] = {
        "types": {"b": {}},
        "clusters": [{"type": "b", "cores": 1_000_000_000, "count": 4}],
    }
    start = time.monotonic()
    with pytest.raises(ScenarioError, match="machine: 4000000000 CPUs; at most 65536"):
        hetsched.run(scn)
    assert time.monotonic() - start < 2.0


def test_threads_beyond_the_machine_memory_are_refused_with_the_estimate() -> None:
    scn = base()
    scn["workload"]["programs"] = [
        {"name": f"p{i}", "kind": "parallel", "threads": 10_000_000, "work_ms": 10}
        for i in range(2000)
    ]
    start = time.monotonic()
    with pytest.raises(ScenarioError) as e:
        hetsched.loads(json.dumps(scn), fmt="json")
    msg = str(e.value)
    assert "workload: 20000000000 threads would need about 47683.7 GiB" in msg, msg
    assert "this machine has" in msg, msg
    assert time.monotonic() - start < 3.0
