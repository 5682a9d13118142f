"""`eevdf` from Python: listed with its feature parameters, and a program's
`slice_ms` is validated with an error naming the field."""

from __future__ import annotations

import pytest

import hetsched
from hetsched import _core, cli

FEATURES = [
    "place_lag",
    "place_deadline_initial",
    "place_rel_deadline",
    "run_to_parity",
    "preempt_short",
    "delay_dequeue",
    "delay_zero",
    "wakeup_preemption",
]


def test_list_policies_shows_eevdf_and_its_features(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one line per parameter
    assert cli.main(["list", "policies"]) == 0
    out = capsys.readouterr().out
    assert out.index("schedulers") < out.index("eevdf") < out.index("governors")
    for name in FEATURES:
        assert f"{name} = true" in out, name
    assert "base_slice_ms = auto" in out
    assert "hrtick = false" in out  # off in the kernel's features.h
    assert "kernel = 6.12" in out and "charge = events" in out
    info = next(p for p in _core.list_policies() if p["name"] == "eevdf")
    assert {q["name"] for q in info["params"]} == {
        *FEATURES,
        "hrtick",
        "base_slice_ms",
        "kernel",
        "charge",
        "balance",
        "busy_factor",
        "util_est",
        "capacity_aware",
        "eas",
        "fits_at_fmax",
    }


SCENARIO = """
name = "slice"
duration_s = 0.2
scheduler = "eevdf"
[machine]
preset = "smp-4"
[[workload.programs]]
name = "p"
kind = "sequential"
work_ms = 10
slice_ms = {slice}
"""


def test_slice_ms_runs_and_bad_values_name_the_field() -> None:
    res = hetsched.run(hetsched.loads(SCENARIO.format(slice=0.5)), check=True)
    assert res.summary["programs_completed"] == 1
    with pytest.raises(Exception, match=r"workload\.programs\[0\]\.slice_ms.*0\.1 to 100"):
        hetsched.run(hetsched.loads(SCENARIO.format(slice=500)))
