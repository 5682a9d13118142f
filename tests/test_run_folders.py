"""A run folder holds the files of one run: the manifest, stale files, and the
refusals of ``plot`` and ``report`` when a folder mixes runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import hetsched
from hetsched import cli
from hetsched.results import MixedRunError, verify_run_folder

SCENARIO = """
name = "folders"
duration_s = 0.3
scheduler = "{scheduler}"
[machine]
preset = "big-little-4+4"
[[workload.programs]]
name = "par"
kind = "parallel"
threads = 4
work_ms = 40
iterations = 2
"""


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(scheduler="cfs"))
    return path


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_run_without_trace_removes_the_earlier_runs_trace(scenario, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert cli.main(["run", str(scenario), "--trace", "-q", "--out", str(out)]) == 0
    assert (out / "trace.json").exists() and (out / "trace.txt").exists()
    assert cli.main(["plot", str(out), "--kind", "timeline"]) == 0
    (out / "notes.txt").write_text("mine")  # not hetsched's: must survive
    first = json.loads((out / "manifest.json").read_text())["run_id"]

    scenario.write_text(SCENARIO.format(scheduler="faster-first"))
    assert cli.main(["run", str(scenario), "-q", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run_id"] != first
    assert not any((out / n).exists() for n in ("trace.json", "trace.jsonl", "trace.txt"))
    assert not (out / "plots" / "timeline.png").exists()  # drawn from the old run
    assert (out / "notes.txt").read_text() == "mine"
    _err(capsys)
    # The timeline must not draw the CFS trace beside the faster-first summary.
    assert cli.main(["plot", str(out), "--kind", "timeline"]) == 2
    assert "needs the run's trace" in _err(capsys)


def test_manifest_lists_every_file_with_size_and_hash(scenario, tmp_path) -> None:
    out = hetsched.run(scenario, trace=True).save(tmp_path / "run")
    manifest = json.loads((out / "manifest.json").read_text())
    written = {p.name for p in out.iterdir()} - {"manifest.json"}
    assert set(manifest["files"]) == written
    for name, meta in manifest["files"].items():
        assert meta["bytes"] == (out / name).stat().st_size
        assert len(meta["sha256"]) == 64
    assert manifest["scenario"] == "folders" and manifest["seed"] is not None
    assert verify_run_folder(out) == manifest


@pytest.mark.parametrize("command", ["plot", "report"])
def test_plot_and_report_refuse_files_of_another_run(scenario, tmp_path, capsys, command) -> None:
    traced = hetsched.run(scenario, trace=True).save(tmp_path / "traced")
    out = hetsched.run(scenario).save(tmp_path / "plain")
    shutil.copy(traced / "trace.jsonl", out / "trace.jsonl")  # what a careless copy leaves
    assert cli.main([command, str(out)]) == 2
    err = _err(capsys)
    assert "trace.jsonl: not written by run" in err and "mixes runs" in err
    assert not (out / "report.html").exists() and not (out / "plots").exists()


def test_a_changed_file_is_refused_naming_it(scenario, tmp_path) -> None:
    out = hetsched.run(scenario).save(tmp_path / "run")
    with (out / "tasks.csv").open("a") as f:
        f.write("99,par,0,9,exited\n")
    with pytest.raises(MixedRunError, match=r"tasks.csv: changed since run [0-9a-f]{16}"):
        hetsched.Results.load(out)
    (out / "tasks.csv").unlink()
    with pytest.raises(MixedRunError, match=r"tasks.csv: listed in the manifest .* but missing"):
        hetsched.Results.load(out)


def test_a_folder_without_manifest_still_loads(scenario, tmp_path) -> None:
    out = hetsched.run(scenario).save(tmp_path / "run")
    (out / "manifest.json").unlink()  # as written before manifests existed
    assert verify_run_folder(out) is None
    assert hetsched.Results.load(out).summary["scenario"] == "folders"
