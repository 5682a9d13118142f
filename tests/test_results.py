"""Results: DataFrames from the core's JSON, the summary text and the files on disk."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hetsched import Results

import fake_core


@pytest.fixture
def res() -> Results:
    return Results(fake_core.results_json())


def test_frames_have_one_row_per_entity(res: Results) -> None:
    assert (len(res.tasks), len(res.programs), len(res.cpus)) == (3, 2, 4)
    assert res.tasks["work_ms"].tolist() == [2000.0, 700.0, 300.0]
    assert res.tasks.loc[1, "run_s_by_type"] == {"big": 0.3, "little": 1.8}
    assert res.summary["makespan_s"] == 2.25
    assert res.scenario["seed"] == 7
    assert res.warnings == fake_core.RESULTS["warnings"]


def test_unknown_keys_are_kept_not_rejected(res: Results) -> None:
    assert res.summary["future_summary_key"] == 1
    assert "future_task_key" in res.tasks.columns


@pytest.mark.parametrize("key", ["tasks", "programs", "cpus"])
def test_empty_row_list_gives_empty_frame_without_columns(key: str) -> None:
    doc = json.loads(fake_core.results_json())
    doc[key] = []
    frame = getattr(Results(json.dumps(doc)), key)
    assert isinstance(frame, pd.DataFrame)
    assert frame.empty and list(frame.columns) == []


def test_minimal_document() -> None:
    res = Results('{"summary": {}}')
    assert res.trace == [] and res.warnings == [] and res.scenario == {}
    assert "hetsched run" in res.summary_table()


def test_cpu_types_aggregate_per_type(res: Results) -> None:
    by_type = res.cpu_types().set_index("type")
    assert by_type.loc["big", "cpus"] == 2
    # big: busy 2.3 + 0.0 of 2.5 s each -> mean utilisation (0.92 + 0) / 2 = 0.46
    assert by_type.loc["big", "utilization"] == pytest.approx(0.46)
    assert by_type.loc["little", "energy_j"] == pytest.approx(7.0)


def test_summary_table_reads_like_a_report(res: Results) -> None:
    text = res.summary_table()
    for expected in [
        "hetsched run: fixture",
        "scheduler",
        "cfs",
        "performance",
        "seed",
        "7",
        "2.500 s",  # simulated time
        "2.250 s",  # makespan
        "41.5 J",
        "16.6 W",
        "1,204",
        "spin",
        "idle-loop",
        "unfinished",
        "big",
        "little",
        "46.0 %",
        "tick_hz",  # the warning
    ]:
        assert expected in text, expected
    assert repr(res) == text == str(res)


def test_save_writes_every_file(tmp_path, res: Results) -> None:
    out = res.save(tmp_path / "run")
    assert sorted(p.name for p in out.iterdir()) == [
        "cpus.csv",
        "manifest.json",
        "programs.csv",
        "scenario.json",
        "summary.json",
        "tasks.csv",
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["makespan_s"] == 2.25 and summary["warnings"] == res.warnings
    assert json.loads((out / "scenario.json").read_text())["seed"] == 7
    tasks = pd.read_csv(out / "tasks.csv")
    assert len(tasks) == 3
    # Nested values are stored as JSON text, not as Python reprs.
    assert json.loads(tasks.loc[1, "run_s_by_type"]) == {"big": 0.3, "little": 1.8}
    assert len(pd.read_csv(out / "cpus.csv")) == 4


def test_save_writes_traces_when_traced(tmp_path) -> None:
    res = Results(fake_core.results_json(trace=True))
    out = res.save(tmp_path)
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    assert sum(e["ph"] == "X" and e["pid"] == 0 for e in events) == sum(
        e["type"] == "run" and e["end_ns"] > e["t_ns"] for e in fake_core.TRACE
    )
    assert (out / "trace.txt").read_text().startswith("# tracer: nop\n")
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"trace.json", "trace.jsonl", "trace.txt"} <= set(manifest["files"])
    lines = (out / "trace.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == fake_core.TRACE
