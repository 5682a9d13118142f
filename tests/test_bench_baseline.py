"""bench/baseline.py (the engine's instructions per event at another
revision and at this tree), checked without building or running anything:
the scenario it measures, the table it prints, the errors it gives."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from hetsched._toml import toml_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import baseline
import run as bench_run


def test_scenario_text_is_the_standard_scenario_with_scheduler_and_length() -> None:
    toml = toml_module()
    doc = toml.loads(baseline.scenario_text("scx-simple", 1.5))
    std = toml.loads(baseline.STANDARD.read_text(encoding="utf-8"))
    assert doc["scheduler"] == "scx-simple"
    assert doc["duration_s"] == 1.5
    # Everything else is the standard scenario's.
    for key in ("machine", "workload", "seed", "governor"):
        assert doc[key] == std[key]


def _row(name: str, before: float | None, after: float, same: bool | None) -> dict[str, Any]:
    def side(v: float | None) -> dict[str, Any]:
        if v is None:
            return {"scheduler": name, "error": ["unknown scheduler"]}
        return {"scheduler": name, "instructions_per_event": v, "hash": "h"}

    row: dict[str, Any] = {"scheduler": name, "baseline": side(before), "this": side(after)}
    if same is not None:
        row["same_trace"] = same
    return row


def test_table_shows_both_columns_the_change_and_whether_traces_match() -> None:
    res = {
        "baseline_rev": "abc123",
        "rows": [
            _row("cfs", 2000.0, 1500.0, True),
            _row("eevdf", 3000.0, 3300.0, False),
            _row("scx-simple", None, 1200.0, None),
        ],
    }
    lines = baseline.table(res).splitlines()
    assert lines[0].startswith("| scheduler | at abc123 | this tree |")
    assert lines[2] == "| cfs | 2000 | 1500 | -25.0% | yes |"
    assert lines[3] == "| eevdf | 3000 | 3300 | +10.0% | **no** |"
    # A scheduler missing at the baseline has no baseline number and no change.
    assert lines[4] == "| scx-simple | — | 1200 | — | — |"


def test_an_unknown_revision_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="'no-such-rev-x' is not a commit"):
        baseline.ensure_worktree("no-such-rev-x", tmp_path / "wt")


def test_run_py_offers_the_baseline_option() -> None:
    with pytest.raises(SystemExit):
        bench_run.main(["--baseline"])  # the option needs a revision


def test_table_puts_each_further_revision_between_the_baseline_and_this_tree() -> None:
    cfs = _row("cfs", 1551.0, 1500.0, True)
    cfs["also"] = [{"scheduler": "cfs", "instructions_per_event": 1726.0, "hash": "h"}]
    res = {"baseline_rev": "e5f4704", "also_revs": ["397a708"], "rows": [cfs]}
    lines = baseline.table(res).splitlines()
    assert lines[0] == "| scheduler | at e5f4704 | at 397a708 | this tree | change | same trace |"
    assert lines[1] == "|---|---:|---:|---:|---:|---|"
    # The change is this tree's against the first revision.
    assert lines[2] == "| cfs | 1551 | 1726 | 1500 | -3.3% | yes |"


def test_more_also_worktrees_than_revisions_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = baseline.main(["e5f4704", "--also-worktree", "/tmp/x"])
    assert rc == 2
    assert "more worktrees than --also revisions" in capsys.readouterr().err


def test_cpu_time_runs_alternate_so_no_engine_always_goes_first() -> None:
    assert baseline.alternate(["a", "b", "c"], 3) == list("abccbaabc")
    assert baseline.alternate(["a"], 2) == ["a", "a"]
    assert baseline.alternate(["a", "b"], 0) == []


def test_cpu_rates_are_medians_per_engine_with_their_hashes() -> None:
    # A stand-in for the engines: base takes 2 s, then 1 s, then 3 s for 6 M
    # events (medians 3 M/s); new takes 1 s each time (6 M/s).
    times = {"base": [2.0, 1.0, 3.0], "new": [1.0, 1.0, 1.0]}
    calls: list[str] = []

    def run(exe: Path, text: str) -> tuple[int, float, str]:
        assert 'scheduler = "cfs"' in text
        name = exe.name
        calls.append(name)
        return 6_000_000, times[name][calls.count(name) - 1], f"hash-{name}"

    out = baseline.cpu_rates({"base": Path("base"), "new": Path("new")}, "cfs", 3, run=run)
    assert calls == ["base", "new", "new", "base", "base", "new"]
    assert out["base"]["median"] == 3_000_000
    assert (out["base"]["min"], out["base"]["max"]) == (2_000_000, 6_000_000)
    assert out["new"]["median"] == 6_000_000
    assert out["new"]["hash"] == "hash-new"


def test_cpu_rates_refuse_engines_whose_event_counts_change_between_runs() -> None:
    n = iter([100, 101])

    def run(exe: Path, text: str) -> tuple[int, float, str]:
        return next(n), 1.0, "h"

    with pytest.raises(RuntimeError, match="different event counts"):
        baseline.cpu_rates({"only": Path("only")}, "cfs", 2, run=run)


def test_table_adds_the_cpu_time_comparison_when_measured() -> None:
    row = _row("cfs", 1551.0, 1606.0, True)
    row["cpu"] = {
        "e5f4704": {"median": 8.0e6, "min": 7.5e6, "max": 8.5e6},
        "this tree": {"median": 7.6e6, "min": 7.0e6, "max": 8.0e6},
    }
    lines = baseline.table({"baseline_rev": "e5f4704", "rows": [row]}).splitlines()
    assert "| cfs | e5f4704 | 8.00 (7.50–8.50) | 1.000× |" in lines
    assert "| cfs | this tree | 7.60 (7.00–8.00) | 0.950× |" in lines


def test_engines_without_the_scheduler_are_left_out_of_the_cpu_time_runs() -> None:
    measured = [
        ("e5f4704", Path("old"), {"scheduler": "eevdf", "error": ['unknown scheduler "eevdf"']}),
        ("this tree", Path("new"), {"scheduler": "eevdf", "instructions_per_event": 2400.0}),
    ]
    assert baseline.runnable(measured) == {"this tree": Path("new")}


def test_table_marks_the_ratio_missing_when_the_baseline_did_not_run() -> None:
    row = _row("eevdf", None, 2400.0, None)
    row["cpu"] = {"this tree": {"median": 5.0e6, "min": 4.5e6, "max": 5.5e6}}
    lines = baseline.table({"baseline_rev": "e5f4704", "rows": [row]}).splitlines()
    assert "| eevdf | this tree | 5.00 (4.50–5.50) | — |" in lines
    assert "| eevdf | — | 2400 | — | — |" in lines


def test_a_negative_cpu_time_count_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert baseline.main(["HEAD", "--cpu-time", "-1"]) == 2
    assert "--cpu-time" in capsys.readouterr().err
