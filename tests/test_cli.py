"""The hetsched command line, with the core's functions replaced where a test needs to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetsched
from hetsched import _core, cli
from hetsched.reproduce import Row, registry, reproduction

import fake_core
from stubs import Recorder, StubScenario

DEMO = {
    "name": "demo",
    "duration_s": 1.0,
    "scheduler": "cfs",
    "machine": {
        "clusters": [{"type": "big", "cores": 4}, {"type": "little", "cores": 2, "smt": 2}]
    },
    "workload": {"programs": [{"name": "a"}, {"name": "b"}]},
}


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "demo.toml"
    path.write_text('name = "demo"\nduration_s = 1.0\n')
    return path


@pytest.fixture
def parse(monkeypatch) -> Recorder:
    rec = Recorder(result=StubScenario(dict(DEMO), warnings=["tick_hz is high"]))
    monkeypatch.setattr(_core, "parse_scenario", rec)
    return rec


@pytest.fixture
def core_run(monkeypatch) -> Recorder:
    rec = Recorder(result=fake_core.results_json(name="demo"))
    monkeypatch.setattr(_core, "run", rec)
    return rec


def _error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# Errors: one line, no traceback, exit status 2 for bad input and 1 otherwise.


@pytest.mark.parametrize("bad", ["duration_s", "=3"])
def test_set_without_path_and_value_is_a_usage_error(scenario_file, capsys, bad) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", str(scenario_file), "--set", bad])
    assert exc.value.code == 2
    assert "expected PATH=VALUE" in capsys.readouterr().err


def test_scenario_error_exits_2_with_one_line(scenario_file, monkeypatch, capsys) -> None:
    message = f'{scenario_file}: machine.cpus[3].type: unknown cpu type "fastt"; known: big, little'
    monkeypatch.setattr(_core, "parse_scenario", Recorder(raises=hetsched.ScenarioError(message)))
    assert cli.main(["run", str(scenario_file)]) == 2
    assert _error_line(capsys.readouterr().err) == f"hetsched: error: {message}"


@pytest.mark.parametrize("command", ["run", "validate"])
def test_missing_file_exits_2_naming_it(tmp_path, capsys, command) -> None:
    assert cli.main([command, str(tmp_path / "absent.toml")]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line.startswith("hetsched: error:") and "absent.toml" in line


@pytest.mark.parametrize(
    "error", [hetsched.PolicyError("cfs: pick_next at 1.5 ms"), hetsched.SimulationError("x")]
)
def test_other_core_errors_exit_1(scenario_file, parse, monkeypatch, capsys, error) -> None:
    monkeypatch.setattr(_core, "run", Recorder(raises=error))
    assert cli.main(["run", str(scenario_file)]) == 1
    assert _error_line(capsys.readouterr().err) == f"hetsched: error: {error}"


def test_os_error_exits_1(scenario_file, parse, core_run, tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli.main(["run", str(scenario_file), "--out", str(blocker / "sub")]) == 1
    line = _error_line(capsys.readouterr().err)
    assert line.startswith("hetsched: error:") and "file" in line


def test_no_command_prints_help(capsys) -> None:
    assert cli.main([]) == 2
    assert "usage: hetsched" in capsys.readouterr().err


# run


def test_run_prints_the_summary_and_writes_results(
    scenario_file, parse, core_run, tmp_path, capsys
) -> None:
    out = tmp_path / "out"
    status = cli.main(
        [
            "run",
            str(scenario_file),
            "--set",
            "duration_s=2",
            "--set",
            "workload.programs[0].threads=8",
            "--out",
            str(out),
            "--trace",
        ]
    )
    assert status == 0
    assert parse.kwargs["overrides"] == [("duration_s", "2"), ("workload.programs[0].threads", "8")]
    assert core_run.kwargs["trace"] is True and core_run.kwargs["check"] is False
    captured = capsys.readouterr()
    assert "hetsched run: demo" in captured.out and "makespan" in captured.out
    assert f"results written to {out}/" in captured.err
    assert {"summary.json", "tasks.csv", "programs.csv", "cpus.csv", "scenario.json"} <= {
        p.name for p in out.iterdir()
    }


def test_run_defaults_to_results_scenario_name(
    scenario_file, parse, core_run, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(scenario_file), "--quiet"]) == 0
    assert (tmp_path / "results" / "demo" / "summary.json").is_file()


def test_run_json_and_quiet(scenario_file, parse, core_run, tmp_path, capsys) -> None:
    assert cli.main(["run", str(scenario_file), "--json", "--out", str(tmp_path / "a")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["makespan_s"] == 2.25 and summary["warnings"]
    assert cli.main(["run", str(scenario_file), "-q", "--out", str(tmp_path / "b")]) == 0
    assert capsys.readouterr() == ("", "")


def test_run_does_not_draw_a_progress_bar_into_a_pipe(
    scenario_file, parse, core_run, tmp_path
) -> None:
    cli.main(["run", str(scenario_file), "--out", str(tmp_path)])
    assert core_run.kwargs["progress"] is None  # stderr is captured, not a terminal


# validate, list, schema


def test_validate_reports_counts_and_warnings(scenario_file, parse, capsys) -> None:
    assert cli.main(["validate", str(scenario_file), "--set", "seed=2"]) == 0
    out = capsys.readouterr().out.splitlines()
    # 4 big cores + 2 little cores x 2 SMT threads
    assert out == ["ok: demo (8 cpus, 2 programs)", "warning: tick_hz is high"]


def test_validate_checks_a_python_scheduler_imports(scenario_file, parse, capsys) -> None:
    parse.result = StubScenario({**DEMO, "scheduler": "python:no_such_mod_q:Sched"})
    assert cli.main(["validate", str(scenario_file)]) == 1
    assert "cannot import no_such_mod_q" in _error_line(capsys.readouterr().err)


def test_list_policies_shows_params_and_defaults(monkeypatch, capsys) -> None:
    monkeypatch.setattr(_core, "list_policies", fake_core.list_policies)
    assert cli.main(["list", "policies"]) == 0
    out = capsys.readouterr().out
    assert out.index("schedulers") < out.index("cfs") < out.index("governors")
    assert "min_granularity_ms = 0.75" in out and "shortest slice" in out
    assert "Longer text" not in out  # only the first line of a doc


def test_list_presets_and_reproductions(monkeypatch, capsys) -> None:
    monkeypatch.setattr(_core, "list_presets", fake_core.list_presets)
    assert cli.main(["list", "presets"]) == 0
    assert "big-little-4+4" in capsys.readouterr().out
    assert cli.main(["list", "reproductions"]) == 0
    assert "li-f9" in capsys.readouterr().out


def test_list_rejects_unknown_things(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["list", "colours"])
    assert exc.value.code == 2


def test_schema_prints_json(monkeypatch, capsys) -> None:
    monkeypatch.setattr(_core, "schema", fake_core.schema)
    assert cli.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "hetsched scenario"


# reproduce


@pytest.fixture
def two_reproductions():
    saved = dict(registry)
    registry.clear()

    @reproduction("good", paper="P", title="works")
    def good(scale: str) -> list[Row]:
        return [Row("good", f"claim at {scale} scale", 3.3, 3.2, "±15%", "match")]

    @reproduction("bad", paper="P", title="raises")
    def bad(scale: str) -> list[Row]:
        raise KeyError("run_s")

    yield
    registry.clear()
    registry.update(saved)


def test_reproduce_json(two_reproductions, capsys) -> None:
    assert cli.main(["reproduce", "good", "--json", "--scale", "quick"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [
        {
            "id": "good",
            "claim": "claim at quick scale",
            "published": 3.3,
            "simulated": 3.2,
            "tolerance": "±15%",
            "verdict": "match",
            "note": "",
        }
    ]
    assert "good: match" in captured.err


def test_reproduce_all_with_an_error_exits_1(two_reproductions, tmp_path, capsys) -> None:
    card = tmp_path / "docs" / "validation.md"
    assert cli.main(["reproduce", "all", "--scorecard", str(card)]) == 1
    out = capsys.readouterr().out
    assert "match" in out and "error" in out and "KeyError" in out
    assert "1 match, 1 error" in card.read_text()


def test_reproduce_unknown_id_exits_2(two_reproductions, capsys) -> None:
    assert cli.main(["reproduce", "good", "li-f99"]) == 2
    assert _error_line(capsys.readouterr().err).startswith(
        "hetsched: error: unknown reproduction 'li-f99'; known: good, bad"
    )
