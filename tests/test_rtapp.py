"""rt-app JSON to hetsched programs, on examples shaped like rt-app's own
documentation (tests/data/rtapp, written for these tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hetsched
from hetsched import cli, rtapp

DATA = Path(__file__).resolve().parent / "data" / "rtapp"


def _run(name: str, **kw) -> tuple[rtapp.RtAppWorkload, hetsched.Results]:
    wl = rtapp.load_rtapp(DATA / f"{name}.json")
    return wl, hetsched.run(wl.scenario(**kw))


def test_periodic_task_becomes_a_periodic_program() -> None:
    wl, res = _run("periodic", scheduler="cfs")
    (prog,) = wl.programs
    assert prog == {
        "name": "thread0", "kind": "periodic", "threads": 1, "wcet_ms": 20.0, "period_ms": 100.0
    }  # fmt: skip
    assert wl.duration_s == 2.0
    task = res.tasks.iloc[0]
    # loop = -1: a job every 100 ms until the end of the 2 s run.
    assert task["jobs"] in (20, 21)
    assert task["work_ms"] == pytest.approx(20.0 * task["jobs"], rel=0.05)


def test_phases_with_loops_priorities_affinity_and_suffixed_keys() -> None:
    wl, res = _run("phases")
    changing, bursty = wl.programs
    assert changing["nice"] == 5 and changing["affinity"] == [0, 1, 2, 3]
    assert changing["loops"] == 2
    # Each rt-app phase's events, repeated its own loop count, in file order.
    assert changing["phases"][:2] == [{"compute_ms": 1.0}, {"sleep_ms": 9.0}]
    assert changing["phases"][20:22] == [{"compute_ms": 9.0}, {"sleep_ms": 1.0}]
    assert len(changing["phases"]) == 40
    assert bursty["threads"] == 2 and bursty["start_ms"] == 50.0 and bursty["loops"] == 3
    assert [next(iter(p)) for p in bursty["phases"]] == [
        "compute_ms", "sleep_ms", "compute_ms", "sleep_ms"
    ]  # fmt: skip
    work = res.tasks.groupby("program")["work_ms"].sum()
    assert work["changing"] == pytest.approx(2 * (10 * 1.0 + 10 * 9.0))
    assert work["bursty"] == pytest.approx(2 * 3 * (4.0 + 2.0))
    assert set(res.tasks[res.tasks["program"] == "changing"]["nice"]) == {5}
    assert res.summary["programs_completed"] == 2


def test_barrier_joins_the_instances_of_a_task() -> None:
    wl, res = _run("barrier")
    (prog,) = wl.programs
    assert prog["threads"] == 4 and prog["loops"] == 5
    assert prog["phases"] == [{"compute_ms": 5.0}, {"barrier": True}]
    assert res.summary["programs_completed"] == 1


def test_endless_loops_fill_the_duration() -> None:
    wl = rtapp.parse_rtapp(
        '{"tasks": {"t": {"run": 1000, "sleep": 9000}}, "global": {"duration": 1}}'
    )
    assert wl.programs[0]["loops"] > 100  # 10 ms per loop, 1 s
    res = hetsched.run(wl.scenario())
    assert res.summary["sim_end_s"] == pytest.approx(1.0)
    assert any("loop = -1" in n for n in wl.notes)


def test_unsupported_features_are_listed_together() -> None:
    with pytest.raises(rtapp.RtAppError) as e:
        rtapp.load_rtapp(DATA / "unsupported.json")
    msg = str(e.value)
    for needle in (
        "tasks.rt.policy: SCHED_FIFO is not supported",
        "tasks.rt.lock: event 'lock' is not supported",
        "tasks.rt.unlock: event 'unlock'",
        "tasks.waker.runtime: event 'runtime'",
        "tasks.waker.taskgroup: not supported",
        "barrier 'shared' is shared by tasks other, waker",
    ):
        assert needle in msg


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"tasks": {}}', "at least one task"),
        ('{"tasks": {"t": {"loop": 2}}}', "tasks.t: no events"),
        ('{"tasks": {"t": {"run": -5}}}', r"tasks\.t\.run: expected microseconds > 0"),
        (
            '{"tasks": {"t": {"run": 10, "timer": {"period": 100}, "sleep": 5}}}',
            "timer is supported only at the end of a loop of run events",
        ),
        ('{"tasks": {"t": {"instance": 0, "run": 10}}}', "instance: expected an integer >= 1"),
    ],
)
def test_bad_files_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(rtapp.RtAppError, match=message):
        rtapp.parse_rtapp(text)


def test_cli_writes_a_scenario_that_runs(tmp_path: Path, capsys) -> None:
    out = tmp_path / "s.toml"
    argv = ["workload", "from-rt-app", str(DATA / "phases.json"), "--machine", "smp-4"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    res = hetsched.run(out)
    assert res.summary["programs_completed"] == 2
    assert cli.main([*argv, "--out", str(tmp_path / "s.json")]) == 0
    assert hetsched.load(tmp_path / "s.json").name == "phases"
    assert cli.main(["workload", "from-rt-app", str(DATA / "unsupported.json")]) == 2
    err = capsys.readouterr().err
    assert "hetsched: error:" in err and "SCHED_FIFO" in err and "Traceback" not in err
