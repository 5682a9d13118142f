"""rt-app JSON to hetsched programs, on examples shaped like rt-app's own
documentation (tests/data/rtapp, written for these tests)."""

from __future__ import annotations

import re
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
    assert prog["phases"] == [{"compute_ms": 5.0}, {"shared_barrier": "step"}]
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
    # waker is in /tg, other in no group: the two groups compete.
    assert (
        "tasks.waker.taskgroup: task groups that compete (/tg: waker; (none: the group rt-app "
        "runs in): other) is not supported: fair threads in different task groups" in msg
    )
    # SCHED_FIFO, lock/unlock, runtime and the barrier shared by two tasks translate.
    assert "lock" not in msg and "runtime" not in msg and "barrier" not in msg
    assert "SCHED_FIFO" not in msg
    assert sorted(f for _, f in e.value.refused) == ["taskgroup"]


def test_rtapp_dialect_comments_trailing_commas_and_error_positions() -> None:
    text = """{
    /* a comment
       over three lines */
    "tasks": {
        "t": { "run": 1000, // a line comment
               "sleep": 9000, },
    },
    "global": { "duration": 1, },
}"""
    wl = rtapp.parse_rtapp(text)
    assert wl.programs[0]["phases"] == [{"compute_ms": 1.0}, {"sleep_ms": 9.0}]
    # A syntax error after the multi-line comment is reported where it is.
    bad = text.replace('"sleep": 9000, }', '"sleep": 9000 x }')
    with pytest.raises(rtapp.RtAppError, match=r"<rt-app>:6:30: not valid JSON"):
        rtapp.parse_rtapp(bad)
    # Comment markers inside strings are text; a comment with '*' inside ends at '*/'.
    text2 = '{"tasks": {"a//b": {"run": 5 /* x * y */, "sleep": 5}}}'
    assert rtapp.parse_rtapp(text2).programs[0]["name"] == "a//b"


def test_bare_suspend_key_is_read_as_workgen_does() -> None:
    # A bare "suspend" suspends the thread on its own name.
    wl = rtapp.parse_rtapp('{"tasks": {"t": {"suspend", "run": 10}}}')
    assert wl.programs[0]["phases"] == [{"suspend": "t"}, {"compute_ms": 0.01}]


def test_calibration_cpu_converts_run_times(tmp_path: Path) -> None:
    text = """{"tasks": {"t": {"loop": 1, "run": 10000}},
               "global": {"duration": 1, "calibration": "CPU%d"}}"""
    big = rtapp.parse_rtapp(text % 0).scenario(machine="big-little-4+4")
    little = rtapp.parse_rtapp(text % 5).scenario(machine="big-little-4+4")
    # CPU0 is a big core (capacity 1024): 10 ms of its work is 10 reference ms.
    assert big["workload"]["programs"][0]["phases"] == [{"compute_ms": 10.0}]
    # CPU5 is little (capacity 430): 10 ms of its work is 10 * 430/1024 reference ms.
    assert little["workload"]["programs"][0]["phases"] == [{"compute_ms": 10.0 * 430 / 1024}]
    res = hetsched.run(little)
    assert res.tasks["work_ms"].sum() == pytest.approx(10.0 * 430 / 1024)
    with pytest.raises(rtapp.RtAppError, match="calibration names CPU9 but the machine has 4"):
        rtapp.parse_rtapp(text % 9).scenario(machine="smp-4")


def test_merge_fragments_are_merged_like_rtapps_merge_py(tmp_path: Path) -> None:
    (tmp_path / "global.json").write_text('{"global": {"duration": 1, "frag": 1}}')
    (tmp_path / "t0.json").write_text('{"tasks": {"t0": {"run": 1000, "sleep": 1000}}}')
    (tmp_path / "t1.json").write_text('{"tasks": {"t1": {"run": 2000, "sleep": 1000,}}}')
    wl = rtapp.load_rtapp(*(tmp_path / f for f in ("global.json", "t0.json", "t1.json")))
    assert [p["name"] for p in wl.programs] == ["t0", "t1"] and wl.duration_s == 1.0
    with pytest.raises(rtapp.RtAppError, match="fragment of rt-app's merge/ format") as e:
        rtapp.load_rtapp(tmp_path / "global.json")
    assert e.value.refused[0][1] == "fragment"


@pytest.mark.parametrize(
    ("task", "feature"),
    [
        ('{"phases": {"a": {"priority": 5, "run": 10}, "b": {"run": 10}}}', "phase-policy"),
        ('{"phases": {"a": {"util_max": 5, "run": 10}, "b": {"run": 10}}}', "phase-policy"),
        ('{"run": 10, "taskgroup": "/a"}, "u": {"run": 10}', "taskgroup"),
    ],
)
def test_each_refusal_names_its_feature(task: str, feature: str) -> None:
    with pytest.raises(rtapp.RtAppError) as e:
        rtapp.parse_rtapp(f'{{"tasks": {{"t": {task}}}}}', source="f.json")
    assert [f for _, f in e.value.refused] == [feature]
    assert str(e.value).startswith("f.json: rt-app features hetsched cannot simulate:\n  - tasks.t")
    assert rtapp.REFUSED[feature] in str(e.value)


def test_faithful_variants_are_accepted() -> None:
    wl = rtapp.parse_rtapp(
        """{"tasks": {
            "same_cpus": {"cpus": [1], "phases": {"a": {"cpus": [1], "run": 10},
                                                  "b": {"run": 10, "sleep": 0}}},
            "none": {"instance": 0, "run": 10},
            "one_phase_periodic": {"loop": 3, "phases": {"p": {"loop": 4, "run": 100,
                                   "timer": {"ref": "unique", "period": 1000}}}},
            "empty_group": {"taskgroup": "", "priority": 3, "run": 10, "sleep": 10}
        }, "global": {"duration": 1, "calibration": "CPU0"}}"""
    )
    progs = {p["name"]: p for p in wl.programs}
    assert set(progs) == {"same_cpus", "one_phase_periodic", "empty_group"}
    assert progs["same_cpus"]["affinity"] == [1]
    assert progs["same_cpus"]["phases"] == [{"compute_ms": 0.01}, {"compute_ms": 0.01}]
    assert progs["one_phase_periodic"]["jobs"] == 12
    assert progs["empty_group"]["nice"] == 3
    assert any("instance is 0" in n for n in wl.notes)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"tasks": {}}', "at least one task"),
        ('{"tasks": {"t": {"loop": 2}}}', "tasks.t: no events"),
        (
            '{"tasks": {"t": {"run": -5}}}',
            r"invalid rt-app file:\n  - tasks\.t\.run: expected microseconds >= 0",
        ),
        (
            '{"tasks": {"t": {"run": 10, "wait": "c"}}}',
            r'tasks\.t\.wait: expected \{ "ref": condition, "mutex": mutex \}',
        ),
        ('{"tasks": {"t": {"run": 10, "fork": "nobody"}}}', "tasks.t.fork: no task is named"),
        ('{"tasks": {"t": {"run": 10, "lock": 5}}}', "tasks.t.lock: expected the mutex's name"),
        (
            '{"tasks": {"t": {"run": 10, "timer": {"period": -1}}}}',
            r"tasks\.t\.timer\.period: expected microseconds > 0",
        ),
        ('{"tasks": {"t": {"instance": -1, "run": 10}}}', "instance: expected an integer >= 0"),
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
    assert "hetsched: error:" in err and "taskgroup" in err and "Traceback" not in err


def test_cli_takes_a_machine_file(tmp_path: Path, capsys) -> None:
    machine = tmp_path / "m.toml"
    tree = Path(__file__).resolve().parent / "data" / "sysfs" / "phone"
    assert cli.main(["machine", "from-sysfs", str(tree), "--out", str(machine)]) == 0
    out = tmp_path / "s.toml"
    argv = ["workload", "from-rt-app", str(DATA / "periodic.json"), "--machine", str(machine)]
    assert cli.main([*argv, "--duration", "0.5", "--out", str(out)]) == 0
    scen = hetsched.load(out)
    res = hetsched.run(scen)
    assert len(res.cpus) == 8 and res.summary["sim_end_s"] == pytest.approx(0.5)
    # CPU0 of the phone is a little core (capacity 261): 20 ms of its work.
    assert f"wcet_ms = {20.0 * 261 / 1024!r}" in out.read_text()
    assert cli.main([*argv[:-1], str(tmp_path / "missing.toml")]) == 2
    assert "no such machine file" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[machine]\ntypes = 5\n")
    assert cli.main([*argv[:-1], str(bad)]) == 2
    assert f"--machine {bad}: machine.types:" in capsys.readouterr().err
    assert cli.main([*argv[:-1], "no-such-preset"]) == 2
    assert 'unknown preset "no-such-preset"' in capsys.readouterr().err


def test_synchronisation_events_become_workload_wide_phases() -> None:
    # mp3's shape: a timer thread resumes a worker that locks, signals and
    # waits on a queue shared with a third task.
    text = """{"tasks": {
        "tick": {"loop": -1, "cpus": [0], "resume": "out",
                 "timer": {"ref": "tick", "period": 6000}},
        "out": {"loop": -1, "suspend": "out", "run": 1000, "lock": "m",
                "signal": "q", "wait": {"ref": "q", "mutex": "m"}, "unlock": "m"},
        "peer": {"loop": -1, "lock": "m", "wait": {"ref": "q", "mutex": "m"},
                 "run": 300, "signal": "q", "unlock": "m"}
    }, "global": {"duration": 1, "calibration": "CPU0"}}"""
    wl = rtapp.parse_rtapp(text)
    tick, out, peer = wl.programs
    assert tick["affinity"] == [0]
    assert tick["phases"] == [{"resume": "out"}, {"timer": "tick", "timer_ms": 6.0}]
    assert out["phases"] == [
        {"suspend": "out"}, {"compute_ms": 1.0}, {"lock": "m"}, {"signal": "q"},
        {"wait": "q", "mutex": "m"}, {"unlock": "m"},
    ]  # fmt: skip
    assert peer["phases"][1] == {"wait": "q", "mutex": "m"}
    res = hetsched.run(wl.scenario(machine="smp-4", duration_s=0.1))
    runs = res.tasks.set_index("program")["work_ms"]
    # "out" is resumed every 6 ms from the tick's first wake-up at 6 ms, and
    # runs 1 ms each time: 16 times in 100 ms (the resume at 0 is lost).
    assert runs["out"] == pytest.approx(16.0, abs=1.0)
    assert runs["peer"] > 0


def test_runtime_custom_slice_phase_cpus_and_fork() -> None:
    text = """{"tasks": {
        "busy": {"loop": 2, "runtime": 4000, "policy": "SCHED_OTHER",
                 "dl-runtime": 3000},
        "mover": {"loop": 1, "cpus": [2], "phases": {
            "a": {"cpus": [0], "run": 1500}, "b": {"cpus": [1], "run": 1500},
            "c": {"run": 1500}}},
        "parent": {"loop": 1, "fork": "child", "run": 1000},
        "child": {"instance": 0, "loop": 1, "run": 2000}
    }, "global": {"duration": 1, "calibration": "CPU0"}}"""
    wl = rtapp.parse_rtapp(text)
    progs = {p["name"]: p for p in wl.programs}
    assert progs["busy"]["phases"] == [{"run_for_ms": 4.0}] and progs["busy"]["slice_ms"] == 3.0
    # The program starts on phase a's CPUs; each phase then sets its own,
    # the last one the task's [2].
    assert progs["mover"]["affinity"] == [0]
    assert progs["mover"]["phases"] == [
        {"cpus": [0]}, {"compute_ms": 1.5}, {"cpus": [1]}, {"compute_ms": 1.5},
        {"cpus": [2]}, {"compute_ms": 1.5},
    ]  # fmt: skip
    assert progs["child"]["forked"] is True and progs["child"]["threads"] == 1
    assert progs["parent"]["phases"][0] == {"fork": "child"}
    res = hetsched.run(wl.scenario(machine="smp-4"))
    t = res.tasks.set_index("program")
    assert t.loc["busy", "end_s"] == pytest.approx(0.008)
    assert t.loc["child", "work_ms"] == pytest.approx(2.0)
    assert t.loc["mover", "migrations"] == 2
    # A custom slice out of the kernel's range is clamped, and says so.
    clamped = rtapp.parse_rtapp('{"tasks": {"t": {"run": 10, "dl-runtime": 500000}}}')
    assert clamped.programs[0]["slice_ms"] == 100.0
    assert any("clamped to 100 ms" in n for n in clamped.notes)


def test_a_forked_task_with_threads_of_its_own_gets_a_forked_copy() -> None:
    wl = rtapp.parse_rtapp(
        """{"tasks": {"t1": {"loop": 1, "run": 1000},
                      "t3": {"loop": 1, "fork": "t1", "run": 1000}},
            "global": {"duration": 1}}"""
    )
    names = [p["name"] for p in wl.programs]
    assert names == ["t1", "t1+fork", "t3"]
    assert wl.programs[1]["forked"] is True
    assert wl.programs[2]["phases"][0] == {"fork": "t1+fork"}
    res = hetsched.run(wl.scenario(machine="smp-4"))
    assert res.tasks.set_index("program").loc["t1+fork", "work_ms"] == pytest.approx(1.0)


def test_a_timer_shared_by_instances_is_one_timer() -> None:
    wl = rtapp.parse_rtapp(
        """{"tasks": {"t": {"instance": 2, "loop": 3, "run": 1000,
                            "timer": {"ref": "tick", "period": 10000}}},
            "global": {"duration": 1}}"""
    )
    (prog,) = wl.programs
    assert prog["kind"] == "phases"
    assert prog["phases"] == [{"compute_ms": 1.0}, {"timer": "tick", "timer_ms": 10.0}]


@pytest.mark.parametrize(
    ("task", "fields"),
    [
        # rt-app's default priority of a FIFO/RR task is 10.
        ('"policy": "SCHED_FIFO"', {"policy": "fifo", "priority": 10}),
        ('"policy": "SCHED_RR", "priority": 42', {"policy": "rr", "priority": 42}),
        # dl-* are microseconds; the period defaults to the runtime, the deadline to the period.
        (
            '"policy": "SCHED_DEADLINE", "dl-runtime": 2000, "dl-period": 10000',
            {"policy": "deadline", "dl_runtime_ms": 2.0, "dl_period_ms": 10.0,
             "dl_deadline_ms": 10.0},
        ),
        (
            '"policy": "SCHED_DEADLINE", "dl-runtime": 3000',
            {"policy": "deadline", "dl_runtime_ms": 3.0, "dl_period_ms": 3.0,
             "dl_deadline_ms": 3.0},
        ),
        ('"policy": "SCHED_IDLE", "priority": 5', {"policy": "idle", "nice": 5}),
        ('"policy": "SCHED_OTHER", "dl-runtime": 3000', {"slice_ms": 3.0}),
        ('"util_min": 128, "util_max": 512', {"uclamp_min": 128, "uclamp_max": 512}),
        ('"util_min": -1, "util_max": 300', {"uclamp_max": 300}),
    ],
)
def test_scheduling_parameters_map_to_program_fields(task: str, fields: dict) -> None:
    wl = rtapp.parse_rtapp(f'{{"tasks": {{"t": {{"run": 1000, "sleep": 1000, {task}}}}}}}')
    prog = wl.programs[0]
    keys = ("policy", "priority", "nice", "slice_ms", "uclamp_min", "uclamp_max",
            "dl_runtime_ms", "dl_period_ms", "dl_deadline_ms")  # fmt: skip
    assert {k: prog[k] for k in keys if k in prog} == fields


@pytest.mark.parametrize(
    ("task", "where"),
    [
        ('"policy": "SCHED_FIFO", "priority": 0', "tasks.t.priority"),
        ('"policy": "SCHED_FIFO", "priority": 100', "tasks.t.priority"),
        ('"policy": "SCHED_DEADLINE"', "tasks.t.dl-runtime"),
        ('"util_min": 2000', "tasks.t.util_min"),
        ('"util_min": 600, "util_max": 500', "tasks.t.util_min"),
    ],
)
def test_bad_scheduling_parameters_name_their_field(task: str, where: str) -> None:
    with pytest.raises(rtapp.RtAppError, match=re.escape(where)):
        rtapp.parse_rtapp(f'{{"tasks": {{"t": {{"run": 1000, {task}}}}}}}')


def test_a_fifo_task_runs_in_the_rt_class_above_fair_tasks() -> None:
    # One CPU: the FIFO task's 5 ms bursts every 10 ms run at once, whatever the fair hog does.
    wl = rtapp.parse_rtapp(
        '{"tasks": {"rt": {"policy": "SCHED_FIFO", "priority": 50, "run": 5000, '
        '"timer": {"ref": "unique", "period": 10000}}, "hog": {"run": 100000}}, '
        '"global": {"duration": 1}}'
    )
    one_cpu = {"types": {"core": {"capacity": 1024}}, "cpus": [{"type": "core"}]}
    res = hetsched.run(wl.scenario(machine=one_cpu))
    tasks = res.tasks.set_index("program")
    assert tasks.loc["rt", "policy"] == "fifo" and tasks.loc["rt", "rt_priority"] == 50
    # The fair hog gets the other half of the CPU, so the fair server (charged
    # with that time) never holds the FIFO task off.
    assert tasks.loc["rt", "wait_s"] == pytest.approx(0.0, abs=1e-6)
    assert tasks.loc["rt", "throttled_s"] == 0.0
    assert tasks.loc["hog", "work_ms"] == pytest.approx(500.0, rel=0.02)


# ------------------------------------------------------------- task groups


def test_taskgroup_of_the_only_fair_thread_is_accepted_with_a_note() -> None:
    # One fair thread moving between groups, beside a FIFO thread in no group.
    text = """{"tasks": {
        "t": {"taskgroup": "/a", "phases": {
            "p0": {"run": 1000, "sleep": 1000},
            "p1": {"taskgroup": "/a/b", "run": 2000, "sleep": 1000},
            "p2": {"taskgroup": "/", "run": 3000, "sleep": 1000}}},
        "rt": {"policy": "SCHED_FIFO", "run": 500, "sleep": 5000}},
        "global": {"duration": 1}}"""
    wl = rtapp.parse_rtapp(text)
    (note,) = [n for n in wl.notes if "taskgroup" in n]
    assert note.startswith("tasks.t.taskgroup (/, /a, /a/b): the only fair thread")
    # Same programs as without the groups.
    plain = rtapp.parse_rtapp(text.replace('"taskgroup": "/a/b", ', "").replace(
        '"taskgroup": "/", ', "").replace('"taskgroup": "/a", ', ""))  # fmt: skip
    assert wl.programs == plain.programs
    assert hetsched.run(wl.scenario()).tasks["work_ms"].sum() > 0


def test_taskgroup_shared_by_every_fair_thread_is_accepted() -> None:
    wl = rtapp.parse_rtapp(
        """{"tasks": {
            "a": {"instance": 2, "taskgroup": "/g", "run": 1000, "sleep": 1000},
            "b": {"phases": {"x": {"taskgroup": "/g/", "run": 1000}, "y": {"sleep": 1000}}}}}"""
    )
    assert [p["threads"] for p in wl.programs] == [2, 1]
    assert any(n.startswith("every fair thread is in task group /g throughout") for n in wl.notes)


@pytest.mark.parametrize(
    ("tasks", "listed"),
    [
        # Two tasks, two groups.
        ('"a": {"taskgroup": "/x", "run": 10}, "b": {"taskgroup": "/y", "run": 10}',
         "/x: a; /y: b"),
        # Two instances of one task that changes groups: they may be apart at once.
        ('"a": {"instance": 2, "phases": {"p": {"taskgroup": "/x", "run": 10}, '
         '"q": {"taskgroup": "/y", "run": 10}}}', "/x: a; /y: a"),
    ],
)  # fmt: skip
def test_taskgroups_that_compete_are_refused_naming_them(tasks: str, listed: str) -> None:
    with pytest.raises(rtapp.RtAppError) as e:
        rtapp.parse_rtapp(f'{{"tasks": {{{tasks}}}}}', source="g.json")
    assert [f for _, f in e.value.refused] == ["taskgroup"]
    assert f"task groups that compete ({listed})" in str(e.value)


def test_taskgroup_on_a_non_fair_task_or_bad_path_is_an_error() -> None:
    with pytest.raises(rtapp.RtAppError, match="rt-app puts only SCHED_OTHER tasks in task groups"):
        rtapp.parse_rtapp('{"tasks": {"t": {"policy": "SCHED_FIFO", "taskgroup": "/g", "run": 9}}}')
    with pytest.raises(rtapp.RtAppError, match=r"tasks.t.taskgroup: expected a cgroup path"):
        rtapp.parse_rtapp('{"tasks": {"t": {"taskgroup": "g", "run": 9}}}')


# ------------------------------------------------------------- mem and iorun


def test_mem_and_iorun_are_cpu_work_of_bytes_over_a_rate() -> None:
    text = '{"tasks": {"t": {"loop": 1, "run": 1000, "mem": 5000000, "iorun": 8000000, "mem1": 0}}}'
    wl = rtapp.parse_rtapp(text)
    mem_ms = 5e6 / rtapp.MEM_BYTES_PER_S * 1000
    io_ms = 8e6 / rtapp.IO_BYTES_PER_S * 1000
    phases = wl.programs[0]["phases"]
    assert phases[0] == {"compute_ms": 1.0}
    assert phases[1]["compute_ms"] == pytest.approx(mem_ms, rel=1e-8)
    assert phases[2]["compute_ms"] == pytest.approx(io_ms, rel=1e-8)
    assert len(phases) == 3  # mem of 0 bytes does nothing
    assert sum("bytes are CPU work" in n for n in wl.notes) == 2
    # Rates of one's own, and the run does the work.
    wl2 = rtapp.parse_rtapp(text, mem_bytes_per_s=1e9, io_bytes_per_s=4e9)
    assert [p["compute_ms"] for p in wl2.programs[0]["phases"]] == [1.0, 5.0, 2.0]
    res = hetsched.run(wl2.scenario(machine="smp-4"))
    assert res.tasks["work_ms"].sum() == pytest.approx(8.0)


def test_iorun_to_a_device_needs_its_rate() -> None:
    text = '{"tasks": {"t": {"run": 10, "iorun": 1000}}, "global": {"io_device": "/dev/sdb"}}'
    with pytest.raises(rtapp.RtAppError) as e:
        rtapp.parse_rtapp(text, source="io.json")
    assert e.value.refused == [("tasks.t.iorun", "io-device")]
    assert "iorun to '/dev/sdb' is not supported" in str(e.value)
    wl = rtapp.parse_rtapp(text, io_bytes_per_s=1e6)
    assert wl.programs[0]["phases"][1] == {"compute_ms": 1.0}
    # A device without iorun events needs nothing.
    rtapp.parse_rtapp(text.replace('"iorun": 1000', '"sleep": 5'))


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ('{"tasks": {"t": {"mem": -1}}}', {}, "tasks.t.mem: expected a number of bytes >= 0"),
        ('{"tasks": {"t": {"mem": 1.5}}}', {}, "tasks.t.mem: expected a number of bytes"),
        ('{"tasks": {"t": {"run": 1}}, "global": {"mem_buffer_size": 0}}', {},
         "global.mem_buffer_size: expected bytes > 0"),
        ('{"tasks": {"t": {"run": 1}}, "global": {"io_device": 5}}', {},
         "global.io_device: expected a file or device path"),
        ('{"tasks": {"t": {"run": 1}}}', {"mem_bytes_per_s": 0},
         r"mem_bytes_per_s \(--mem-bytes-per-s\): expected bytes per second > 0"),
        ('{"tasks": {"t": {"run": 1}}}', {"io_bytes_per_s": float("nan")},
         r"io_bytes_per_s \(--io-bytes-per-s\): expected bytes per second > 0"),
    ],
)  # fmt: skip
def test_bad_mem_and_io_inputs_name_their_field(text: str, kwargs: dict, message: str) -> None:
    with pytest.raises(rtapp.RtAppError, match=message):
        rtapp.parse_rtapp(text, **kwargs)


def test_cli_takes_mem_and_io_rates(tmp_path: Path, capsys) -> None:
    f = tmp_path / "m.json"
    f.write_text('{"tasks": {"t": {"loop": 2, "mem": 3000000}}, "global": {"duration": 1}}')
    out = tmp_path / "m.json.toml"
    argv = ["workload", "from-rt-app", str(f), "--mem-bytes-per-s", "1e9", "--out", str(out)]
    assert cli.main(argv) == 0
    assert "compute_ms = 3.0" in out.read_text()
    assert "bytes / 1e+09 bytes/s" in capsys.readouterr().err
    assert cli.main([*argv[:3], "--io-bytes-per-s", "-5"]) != 0
    assert "--io-bytes-per-s" in capsys.readouterr().err


# ----------------------------------------------------- the pre-1.0 grammar

OLD = """{
    "resources": {
        "m": {"type": "mutex"}, "outer": {"type": "mutex"}, "inner": {"type": "mutex"},
        "cond": {"type": "wait"}, "kick": {"type": "signal", "target": "cond"},
        "all": {"type": "broadcast", "target": "cond"}, "nap": {"type": "sleep"}
    },
    "tasks": {
        "waiter": {"exec": 3000, "period": 10000, "deadline": 8000,
                   "lock_order": ["cond", "m"],
                   "resources": {"cond": {"duration": 0, "access": ["outer"]},
                                 "m": {"duration": 1000, "access": ["outer", "inner"]},
                                 "outer": {"access": ["inner"]}}},
        "kicker": {"exec": 1000, "period": 5000, "priority": 0, "lock_order": ["kick", "nap"],
                   "resources": {"kick": {"duration": 200, "access": ["m"]},
                                 "nap": {"duration": 300}}},
        "plain": {"exec": 2000, "period": 20000, "loop": 5, "policy": "SCHED_FIFO"}
    },
    "global": {"duration": 1}
}"""


def test_old_grammar_tasks_run_as_rtapp_0x_ran_them() -> None:
    wl = rtapp.parse_rtapp(OLD)
    waiter, kicker, plain = wl.programs
    # The access list is taken first (nested lists depth first, each resource
    # once), the resource itself last; a wait waits under the mutex just
    # before it; mutexes are unlocked in reverse; then the rest of exec runs
    # and an absolute timer ends the period.
    assert waiter["phases"] == [
        {"lock": "outer"}, {"lock": "inner"}, {"wait": "cond", "mutex": "inner"},
        {"unlock": "inner"}, {"unlock": "outer"},
        {"lock": "outer"}, {"lock": "inner"}, {"lock": "m"}, {"compute_ms": 1.0},
        {"unlock": "m"}, {"unlock": "inner"}, {"unlock": "outer"},
        {"compute_ms": 2.0}, {"timer": "waiter.unique.period", "timer_ms": 10.0},
    ]  # fmt: skip
    # rt-app 0.x sets a SCHED_OTHER thread's nice to its priority, 10 by default.
    assert waiter["nice"] == 10 and kicker["nice"] == 0
    # A signal targets its wait; a sleep resource sleeps its duration.
    assert kicker["phases"] == [
        {"lock": "m"}, {"signal": "cond"}, {"compute_ms": 0.2}, {"unlock": "m"},
        {"sleep_ms": 0.3}, {"compute_ms": 0.8},
        {"timer": "kicker.unique.period", "timer_ms": 5.0},
    ]  # fmt: skip
    # Without resources: a periodic program (exec every period).
    assert plain["kind"] == "periodic" and plain["wcet_ms"] == 2.0 and plain["period_ms"] == 20.0
    assert plain["jobs"] == 5 and plain["policy"] == "fifo" and plain["priority"] == 10
    assert any("deadline: rt-app 0.x uses it for its slack log only" in n for n in wl.notes)
    res = hetsched.run(wl.scenario(duration_s=0.2))
    assert res.summary["sim_end_s"] == pytest.approx(0.2)
    assert res.tasks.groupby("program")["work_ms"].sum()["plain"] == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('"lock_order": ["kick", "nap"]', '"lock_order": ["kick", "nope"]'),
         "tasks.kicker.lock_order: resource 'nope' is not declared"),
        (('"exec": 1000, "period": 5000', '"exec": 6000, "period": 5000'),
         "tasks.kicker.exec: 6000 us is longer than the period"),
        (('"access": ["outer"]}', '"access": []}'),
         "taking wait resource 'cond' needs a mutex just before it"),
        # A sleep resource's duration sleeps; the others run, within exec.
        (('"duration": 200,', '"duration": 2000,'),
         "tasks.kicker.resources: the durations run 2000 us, more than exec"),
        (('"type": "sleep"', '"type": "nap"'), "resources.nap.type: 'nap' is not one of"),
        (('"target": "cond"}', '"target": "m"}'), "resources.kick.target: 'm' is not a resource"),
        (('"loop": 5,', '"loop": 5, "colour": 1,'), "tasks.plain.colour: unknown key"),
    ],
)  # fmt: skip
def test_bad_old_grammar_names_its_field(edit: tuple[str, str], message: str) -> None:
    assert edit[0] in OLD
    with pytest.raises(rtapp.RtAppError, match=re.escape(message)):
        rtapp.parse_rtapp(OLD.replace(*edit))


def test_a_thread_fragment_alone_is_read_with_the_fragments_beside_it(tmp_path: Path) -> None:
    (tmp_path / "global.json").write_text('{"global": {"duration": 2}}')
    (tmp_path / "resources.json").write_text(
        '{"resources": {"m": {"type": "mutex"}, "c": {"type": "wait"},'
        ' "s": {"type": "signal", "target": "c"}}}'
    )
    (tmp_path / "t0.json").write_text(
        '{"tasks": {"t0": {"exec": 100, "period": 1000, "lock_order": ["c"],'
        ' "resources": {"c": {"access": ["m"]}}}}}'
    )
    (tmp_path / "t1.json").write_text(
        '{"tasks": {"t1": {"exec": 100, "period": 1000, "lock_order": ["s"]}}}'
    )
    # A whole workload and a file that is not JSON beside them are not fragments.
    (tmp_path / "other.json").write_text('{"tasks": {"x": {"run": 1}}, "global": {}}')
    (tmp_path / "broken.json").write_text("{ not json")
    wl = rtapp.load_rtapp(tmp_path / "t0.json")
    assert [p["name"] for p in wl.programs] == ["t0", "t1"] and wl.duration_s == 2.0
    assert wl.notes[0].startswith("t0.json is a thread of rt-app's merge/ format")
    assert "(global.json, resources.json, t1.json)" in wl.notes[0]
    # The same as giving the fragments.
    given = rtapp.load_rtapp(*(tmp_path / f for f in ("global.json", "resources.json",
                                                      "t0.json", "t1.json")))  # fmt: skip
    assert given.programs == wl.programs
    # With two resources fragments to choose from, the file alone says what is missing.
    (tmp_path / "resources2.json").write_text('{"resources": {"m": {"type": "mutex"}}}')
    with pytest.raises(rtapp.RtAppError, match="resource 'c' is not declared"):
        rtapp.load_rtapp(tmp_path / "t0.json")
