"""hetsched.load / loads / run: files, formats, overrides and Python schedulers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hetsched
from hetsched import _core, api
from hetsched.examples_policies import BigFirst, RoundRobin

import fake_core
from stubs import Recorder, StubScenario


@pytest.fixture
def parse(monkeypatch) -> Recorder:
    rec = Recorder(result=StubScenario({"name": "stub", "scheduler": "cfs"}))
    monkeypatch.setattr(_core, "parse_scenario", rec)
    return rec


@pytest.fixture
def core_run(monkeypatch) -> Recorder:
    rec = Recorder(result=fake_core.results_json())
    monkeypatch.setattr(_core, "run", rec)
    return rec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("duration_s=5", ("duration_s", "5")),
        ("workload.programs[0].threads = 8", ("workload.programs[0].threads", "8")),
        ("scheduler=cfs[min_granularity_ms=4]", ("scheduler", "cfs[min_granularity_ms=4]")),
        ("name=", ("name", "")),
        ('description="a = b"', ("description", '"a = b"')),
    ],
)
def test_parse_override(text: str, expected: tuple[str, str]) -> None:
    assert api.parse_override(text) == expected


@pytest.mark.parametrize("text", ["duration_s", "=5", " = 5", ""])
def test_parse_override_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="PATH=VALUE"):
        api.parse_override(text)


@given(
    st.text(
        st.characters(blacklist_characters="=", blacklist_categories=["Cs"]), min_size=1
    ).filter(lambda s: s.strip()),
    st.text(st.characters(blacklist_categories=["Cs"])),
)
def test_parse_override_splits_at_the_first_equals(path: str, value: str) -> None:
    assert api.parse_override(f"{path}={value}") == (path.strip(), value.strip())


def test_load_missing_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "demo.toml"
    with pytest.raises(hetsched.ScenarioError, match=r"nowhere/demo\.toml"):
        hetsched.load(missing)


def test_load_unknown_suffix(tmp_path: Path) -> None:
    (tmp_path / "demo.yaml").write_text("x: 1")
    with pytest.raises(hetsched.ScenarioError, match=r"\.yaml"):
        hetsched.load(tmp_path / "demo.yaml")


@pytest.mark.parametrize(
    ("suffix", "fmt"), [(".toml", "toml"), (".json", "json"), (".TOML", "toml")]
)
def test_load_reads_the_file_with_its_format(tmp_path, parse, suffix, fmt) -> None:
    path = tmp_path / f"demo{suffix}"
    path.write_text("duration_s = 1\n")
    hetsched.load(path, overrides=["seed=3", ("duration_s", "2")])
    assert parse.args == ("duration_s = 1\n",)
    assert parse.kwargs == {
        "source": str(path),
        "overrides": [("seed", "3"), ("duration_s", "2")],
        "fmt": fmt,
    }


def test_overrides_from_a_mapping_become_toml_literals(parse) -> None:
    hetsched.loads(
        "",
        overrides={
            "duration_s": 5,
            "x": 0.5,
            "stop_when_done": False,
            "scheduler": "pinned",
            "machine.clusters[0].cpus": [1, "a"],
            "t": {"a": 1, "b c": True},
        },
    )
    assert parse.kwargs["overrides"] == [
        ("duration_s", "5"),
        ("x", "0.5"),
        ("stop_when_done", "false"),
        ("scheduler", "pinned"),
        ("machine.clusters[0].cpus", '[1, "a"]'),
        ("t", '{ a = 1, "b c" = true }'),
    ]


def test_run_a_dict_parses_it_as_json(parse, core_run) -> None:
    scenario = {"name": "d", "duration_s": 1.0, "machine": {"preset": "big-little-4+4"}}
    res = hetsched.run(scenario, trace=True, check=True)
    assert json.loads(parse.args[0]) == scenario
    assert parse.kwargs["fmt"] == "json"
    assert core_run.args == (parse.result,)
    assert core_run.kwargs == {
        "trace": True,
        "check": True,
        "scheduler": None,
        "agents": [],
        "progress": None,
    }
    assert isinstance(res, hetsched.Results) and res.summary["scenario"] == "fixture"


def test_run_a_path_loads_it(tmp_path, parse, core_run) -> None:
    path = tmp_path / "s.json"
    path.write_text("{}")
    hetsched.run(str(path), overrides={"duration_s": 2})
    assert parse.kwargs["source"] == str(path)
    assert parse.kwargs["overrides"] == [("duration_s", "2")]


def test_run_a_scenario_with_overrides_reparses_it(parse, core_run) -> None:
    original = StubScenario({"name": "orig", "duration_s": 1.0})
    hetsched.run(original, overrides=["duration_s=3"])  # type: ignore[arg-type]
    assert json.loads(parse.args[0]) == original.data
    assert parse.kwargs["overrides"] == [("duration_s", "3")]


def test_run_a_scheduler_name_is_an_override(parse, core_run) -> None:
    hetsched.run({"duration_s": 1.0}, scheduler="pinned")
    assert parse.kwargs["overrides"] == [("scheduler", "pinned")]
    assert core_run.kwargs["scheduler"] is None


def test_python_scheduler_named_in_the_scenario_is_instantiated(parse, core_run) -> None:
    parse.result = StubScenario(
        {"scheduler": "python:hetsched.examples_policies:BigFirst[slice_ms=4]"}
    )
    hetsched.run({"duration_s": 1.0})
    sched = core_run.kwargs["scheduler"]
    assert isinstance(sched, BigFirst) and sched.slice_ns == 4_000_000


def test_an_explicit_scheduler_instance_wins(parse, core_run) -> None:
    parse.result = StubScenario({"scheduler": "python:hetsched.examples_policies:BigFirst"})
    mine = RoundRobin()
    agent = hetsched.Agent()
    hetsched.run({"duration_s": 1.0}, scheduler=mine, agents=(agent,))
    assert core_run.kwargs["scheduler"] is mine
    assert core_run.kwargs["agents"] == [agent]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("python:no_such_module_xyz:Cls", "cannot import no_such_module_xyz"),
        ("python:hetsched.examples_policies:Nope", "has no class Nope"),
        ("python:hetsched.examples_policies", "expected python:package.module:ClassName"),
        ("python:hetsched.examples_policies:RoundRobin[slice_ms]", "bad parameter 'slice_ms'"),
        ("python:hetsched.examples_policies:RoundRobin[speed=2]", "unexpected keyword"),
    ],
)
def test_python_scheduler_errors_are_policy_errors(spec: str, message: str) -> None:
    with pytest.raises(hetsched.PolicyError, match=message.replace("[", r"\[")):
        api.resolve_python_policy(spec)


@pytest.mark.parametrize(
    ("params", "kwargs"),
    [("", {}), ("slice_ms=4", {"slice_ms": 4}), (" slice_ms = 2.5 ", {"slice_ms": 2.5})],
)
def test_python_scheduler_parameters(params: str, kwargs: dict) -> None:
    spec = "python:hetsched.examples_policies:RoundRobin" + (f"[{params}]" if params else "")
    sched = api.resolve_python_policy(spec)
    assert sched.slice_ns == int(kwargs.get("slice_ms", 10) * 1e6)


def test_progress_callable_is_passed_through(parse, core_run) -> None:
    def seen(now: float, end: float) -> None:
        pass

    hetsched.run({"duration_s": 1.0}, progress=seen)
    assert core_run.kwargs["progress"] is seen


def test_progress_bar_shows_simulated_seconds(capsys) -> None:
    bar = api._ProgressBar("demo", delay_s=0.0)
    bar(1.0, 4.0)
    bar(4.0, 4.0)
    bar.close()
    assert "sim-s" in capsys.readouterr().err


def test_progress_bar_stays_silent_for_short_runs(capsys) -> None:
    bar = api._ProgressBar("demo", delay_s=60.0)
    bar(4.0, 4.0)
    bar.close()
    assert capsys.readouterr().err == ""
