"""End-to-end tests of the command line against the compiled core."""

from __future__ import annotations

import json
from pathlib import Path

from hetsched import cli

from conftest import ROOT

BAD_CPU_TYPE = """
name = "bad-cpu-type"
duration_s = 1.0
scheduler = "cfs"

[machine.types.big]
capacity = 1024
pstates = [{ mhz = 2000, volt = 1.0 }]

[[machine.cpus]]
type = "big"
node = 0
core = 0
llc = 0
freq_domain = 0

[[machine.cpus]]
type = "fastt"
node = 0
core = 1
llc = 0
freq_domain = 0

[[workload.programs]]
name = "spin"
kind = "sequential"
work_ms = 10.0
"""


def test_run_demo_writes_results(tmp_path: Path, capsys) -> None:
    out = tmp_path / "demo"
    assert cli.main(["run", str(ROOT / "scenarios" / "demo.toml"), "--out", str(out)]) == 0
    assert "hetsched run:" in capsys.readouterr().out
    for name in ("summary.json", "tasks.csv", "programs.csv", "cpus.csv", "scenario.json"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sim_end_s"] > 0


def test_run_demo_with_trace_writes_perfetto_json(tmp_path: Path) -> None:
    demo = str(ROOT / "scenarios" / "demo.toml")
    assert cli.main(["run", demo, "--trace", "--quiet", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "trace.json").read_text())
    assert (tmp_path / "trace.jsonl").read_text().count("\n") > 0


def test_validate_unknown_cpu_type_names_the_field(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BAD_CPU_TYPE)
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("hetsched: error:") and "machine.cpus[" in err


def test_schema_is_json(capsys) -> None:
    assert cli.main(["schema"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), dict)


def test_reproduce_li_f9_quick(capsys) -> None:
    status = cli.main(["reproduce", "li-f9", "--json", "--scale", "quick"])
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and rows
    assert {r["verdict"] for r in rows} <= {"match", "trend", "differs"}, rows
    assert status == 0
