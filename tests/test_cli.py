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
            "kind": "prediction",
            "calibrated_by": None,
            "follows_from": None,
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


def test_reproduce_ends_with_a_tally(two_reproductions, capsys) -> None:
    assert cli.main(["reproduce", "all"]) == 1
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "2 claims: 1 match, 1 error"
    assert cli.main(["reproduce", "good", "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # the tally stays out of the JSON
    assert captured.err.rstrip().endswith("1 claim: 1 match")


# One table of exit statuses over every command: a missing input is 2 everywhere.


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "{missing}.toml"],
        ["validate", "{missing}.toml"],
        ["sweep", "{missing}.toml"],
        ["plot", "{missing}"],
        ["report", "{missing}"],
        ["workload", "from-rt-app", "{missing}.json"],
        ["machine", "from-sysfs", "{missing}"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_missing_input_exits_2_in_every_command(tmp_path, capsys, argv) -> None:
    missing = str(tmp_path / "absent")
    assert cli.main([a.format(missing=missing) for a in argv]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line.startswith("hetsched: error:") and "absent" in line and "no such" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["run"],
        ["run", "x.toml", "--bogus"],
        ["validate"],
        ["list"],
        ["list", "colours"],
        ["schema", "--bogus"],
        ["reproduce"],
        ["reproduce", "all", "--scale", "huge"],
        ["sweep"],
        ["sweep", "x.toml", "--workers", "many"],
        ["plot"],
        ["plot", "d", "--kind", "pie"],
        ["report"],
        ["machine", "from-sysfs", "--bogus"],
        ["workload", "from-rt-app"],
        ["linux", "agent", "--bogus"],
        ["--bogus"],
    ],
    ids=" ".join,
)
def test_usage_errors_exit_2_in_every_command(capsys, argv) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert "usage: hetsched" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["machine"], ["workload"], ["linux"], []], ids=" ".join)
def test_a_command_group_without_its_command_prints_help_and_exits_2(capsys, argv) -> None:
    assert cli.main(argv) == 2
    assert "usage: hetsched" in capsys.readouterr().err


def test_a_failed_run_exits_1(scenario_file, parse, monkeypatch, capsys) -> None:
    monkeypatch.setattr(_core, "run", Recorder(raises=hetsched.SimulationError("livelock")))
    assert cli.main(["run", str(scenario_file)]) == 1
    assert _error_line(capsys.readouterr().err) == "hetsched: error: livelock"


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(capsys, flag) -> None:
    assert cli.main([flag]) == 0
    assert capsys.readouterr().out == f"hetsched {hetsched.__version__}\n"
    with pytest.raises(SystemExit) as exc:  # also where argparse sees it
        cli.main([flag, "list", "policies"])
    assert exc.value.code == 0


def test_version_imports_neither_pandas_nor_matplotlib() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hetsched", "--version"],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(hetsched.__file__).parents[1])},
    )
    assert done.stdout == f"hetsched {hetsched.__version__}\n"
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "pandas" not in imported and "matplotlib" not in imported and "numpy" not in imported


@pytest.mark.parametrize(
    ("value", "suggestion"),
    [
        ("scheduler=cfz", 'did you mean "cfs"?'),
        ("scheduler=faster_first", 'did you mean "faster-first"?'),
        ("governor=ondemnd", 'did you mean "ondemand"?'),
        ("scheduler=cfs[min_granularty_ms=3]", 'did you mean "min_granularity_ms"?'),
    ],
)
def test_misspelt_policy_names_get_a_suggestion(tmp_path, capsys, value, suggestion) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "s"\nduration_s = 0.1\n[machine]\npreset = "smp-4"\n'
        '[[workload.programs]]\nname = "a"\nkind = "sequential"\nwork_ms = 1\n'
    )
    assert cli.main(["validate", str(path), "--set", value]) == 2
    assert _error_line(capsys.readouterr().err).endswith(suggestion)


def test_no_suggestion_when_nothing_is_close() -> None:
    message = 'scheduler: unknown scheduler "zzzzzz"; known: cfs, eas'
    assert cli._with_suggestion(message) == message


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_listings_fit_the_terminal(monkeypatch, capsys, columns) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    for what in ("policies", "presets", "reproductions"):
        assert cli.main(["list", what]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert max(len(line) for line in lines) <= columns, what
    if columns < 80:
        return  # words longer than a narrow column are cut
    # Nothing is lost: every policy name and every word of a description is there.
    assert cli.main(["list", "policies"]) == 0
    words = capsys.readouterr().out.split()
    for p in _core.list_policies():
        assert p["name"] in words
        first = p["doc"].strip().splitlines()[0].split()
        assert all(w in words for w in first), p["name"]


def test_listings_are_80_columns_into_a_pipe(monkeypatch, capsys) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main(["list", "policies"]) == 0  # stdout is captured: not a terminal
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 80


def test_reproduce_rows_wrap_to_the_terminal(two_reproductions, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    long = "a claim long enough to need two lines or more at seventy-two columns"
    registry["good"].fn = lambda scale: [Row("good", long, 3.3, 3.2, "±15%", "match")]
    assert cli.main(["reproduce", "good"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 72
    # The claim is wrapped within its column; the other cells stay on the first line.
    first = lines[2].split()
    assert first[0] == "good" and first[-5:] == ["3.3", "3.2", "±15%", "match", "prediction"]
    start = lines[0].index("claim")
    claim = " ".join(line[start : start + 40].split("  ")[0].strip() for line in lines[2:5])
    assert claim.startswith("a claim long enough to need")
