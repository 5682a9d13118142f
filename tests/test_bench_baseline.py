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
