"""Every scenario file in scenarios/ runs, passes the invariant checker, and
matches its stored summary in scenarios/golden/ (regenerate on purpose with
``HETSCHED_UPDATE_GOLDEN=1 pytest tests/test_scenarios.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import hetsched

ROOT = Path(__file__).resolve().parents[1]
# sweep-*.toml are sweep files (a base scenario and a grid), tested in test_sweep.py.
SCENARIOS = sorted(
    p for p in (ROOT / "scenarios").glob("*.toml") if not p.name.startswith("sweep-")
)
GOLDEN = ROOT / "scenarios" / "golden"

# Fields compared exactly (integers, strings) and to a relative 1e-9 (floats).
EXACT = [
    "events",
    "migrations",
    "context_switches",
    "deadline_misses",
    "programs_completed",
    "tasks",
    "trace_hash",
]
CLOSE = ["sim_end_s", "energy_j"]


def summary_of(path: Path) -> dict:
    res = hetsched.run(hetsched.load(path), check=True)
    s = res.summary
    out = {k: s[k] for k in EXACT + CLOSE}
    completions = res.programs.get("completion_s", [])
    out["completion_s"] = [round(float(x), 9) for x in completions]
    return out


def test_there_are_scenarios() -> None:
    assert SCENARIOS, "scenarios/ has no .toml files"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_matches_stored_summary(path: Path) -> None:
    got = summary_of(path)
    golden = GOLDEN / f"{path.stem}.json"
    if os.environ.get("HETSCHED_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(json.dumps(got, indent=2) + "\n")
    assert golden.exists(), (
        f"no stored summary {golden.relative_to(ROOT)}; run with HETSCHED_UPDATE_GOLDEN=1"
    )
    want = json.loads(golden.read_text())
    for k in EXACT:
        assert got[k] == want[k], f"{path.name}: {k} {got[k]!r} != stored {want[k]!r}"
    for k in CLOSE:
        assert got[k] == pytest.approx(want[k], rel=1e-9), f"{path.name}: {k}"
    assert got["completion_s"] == pytest.approx(want["completion_s"], rel=1e-9)
