"""``hetsched linux agent`` on real processes: placement, emulated asymmetry,
clean-up (also after SIGTERM and after a managed program crashes) and bad
input. Needs Linux, root and the cgroup cpu and cpuset controllers; skipped
otherwise."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hetsched import cli
from hetsched.linux import LinuxError, cgroups
from hetsched.linux.agents import EqualShareAgent, FasterFirstAgent
from hetsched.linux.runner import Runner
from hetsched.linux.workload import from_dict
from hetsched.policy import Agent
from linux_support import needs_cgroups

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")
PROFILE = "cpu0=100%, cpu1=50%"


def _ours() -> list[Path]:
    """cgroups made by agents of this process tree (hetsched-<pid> anywhere)."""
    out = []
    for mnt in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        base = Path(mnt)
        if base.is_dir():
            out += [p for p in base.rglob("hetsched-*") if p.is_dir()]
    return out


@pytest.fixture(autouse=True)
def no_leftovers() -> Any:
    before = set(_ours())
    yield
    left = set(_ours()) - before
    assert not left, f"cgroups left behind: {left}"


class Pin(Agent):
    """Pins task i to CPU ``cpus[i]`` at every sample."""

    name = "pin"
    period_ms = 20.0

    def __init__(self, cpus: list[int]) -> None:
        self.cpus = cpus

    def sample(self, cx: Any) -> None:
        for p in cx.processes():
            want = [self.cpus[p["task"]]]
            if p["affinity"] != want:
                cx.set_affinity(p["task"], want)


def _spinners(n: int, units: int = 100000) -> dict[str, Any]:
    return {
        "name": "spinners",
        "programs": [{"name": f"s{i}", "command": ["spin", str(units)]} for i in range(n)],
    }


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@needs_cgroups
def test_half_duty_cpu_delivers_about_half_the_work() -> None:
    wl = from_dict(_spinners(2))
    r = Runner(
        wl,
        Pin([0, 1]),
        profile=cgroups.parse_profile(PROFILE),
        duration_s=2.0,
        high_weight=True,
        log=lambda m: None,
    )
    doc = r.run()
    run = {t["program"]: t["run_s"] for t in doc["tasks"]}
    ratio = run["s1"] / run["s0"]
    # Both spun for the same wall time; the 50% CPU gave its spinner half
    # as much CPU time (generous bounds: the machine is shared).
    assert 0.3 < ratio < 0.7, run
    cpus = {c["cpu"]: c for c in doc["cpus"]}
    assert cpus[1]["throttled_s"] > 0.0 and cpus[1]["duty_cycle"] == 0.5
    # The launched programs were stopped at the end.
    assert all(not _alive(p["pid"]) for p in doc["programs"])


@needs_cgroups
def test_high_weight_control_loop_is_real_time_and_its_programs_are_not() -> None:
    # The programs' high-weight groups would otherwise leave the loop a few
    # thousandths of a CPU: on a loaded machine it ran seconds late.
    seen: list[tuple[int, list[int]]] = []

    class Watch(Pin):
        runner: Runner

        def sample(self, cx: Any) -> None:
            super().sample(cx)
            pids = [self.runner.pid_of(p["task"]) for p in cx.processes()]
            seen.append((os.sched_getscheduler(0), [os.sched_getscheduler(x or 0) for x in pids]))

    before = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
    watch = Watch([0, 1])
    r = Runner(
        from_dict(_spinners(2)),
        watch,
        profile=cgroups.parse_profile(PROFILE),
        duration_s=0.3,
        high_weight=True,
        log=lambda m: None,
    )
    watch.runner = r
    r.run()
    assert seen
    assert all(me == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK for me, _ in seen)
    assert all(theirs == [os.SCHED_OTHER] * 2 for _, theirs in seen)
    # Restored afterwards.
    assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == before


@needs_cgroups
def test_agent_places_processes_in_the_emulated_cpus() -> None:
    placements: list[dict[int, list[int]]] = []

    class Watch(FasterFirstAgent):
        def sample(self, cx: Any) -> None:
            super().sample(cx)
            placements.append({p["task"]: p["affinity"] for p in cx.processes()})

    sets: list[list[dict[str, Any]]] = []

    class Sets(Watch):
        def init(self, cx: Any) -> None:
            sets.append(cx.cpusets())

    wl = from_dict(_spinners(2))
    r = Runner(wl, Sets(period_ms=30), profile=cgroups.parse_profile(PROFILE), duration_s=0.5)
    r.log = lambda m: None
    doc = r.run()
    assert [s["cpus"] for s in sets[0]] == [[0], [1]]
    assert (
        sets[0][0]["mhz"] == 2 * sets[0][1]["mhz"]
        or abs(sets[0][0]["mhz"] - 2 * sets[0][1]["mhz"]) <= 1
    )
    # After the first sample each spinner has one emulated CPU of its own.
    later = placements[-1]
    assert sorted(tuple(v) for v in later.values()) == [(0,), (1,)]
    assert doc["summary"]["cgroups"] in ("v1", "v2")
    assert doc["summary"]["agent"] == "faster-first"


@needs_cgroups
def test_given_pids_are_restored_and_left_running() -> None:
    p = subprocess.Popen(["sleep", "30"])
    try:
        os.sched_setaffinity(p.pid, {0, 1})
        # The test runner may itself run niced (nice make test): restoring
        # means going back to this value, not to 0.
        nice0 = os.getpriority(os.PRIO_PROCESS, p.pid)

        class Move(Agent):
            name = "move"
            period_ms = 20.0

            def sample(self, cx: Any) -> None:
                cx.set_affinity(0, [1])
                cx.set_nice(0, 7)

        seen: dict[str, Any] = {}

        class Look(Move):
            def sample(self, cx: Any) -> None:
                super().sample(cx)
                seen.update(os.sched_getaffinity(p.pid) and {"aff": os.sched_getaffinity(p.pid)})
                seen["nice"] = os.getpriority(os.PRIO_PROCESS, p.pid)
                seen["cg"] = Path(f"/proc/{p.pid}/cgroup").read_text()

        r = Runner(
            None, Look(), pids=[p.pid], profile=cgroups.parse_profile(PROFILE), duration_s=0.3
        )
        r.log = lambda m: None
        r.run()
        assert seen["aff"] == {1} and seen["nice"] == 7 and "hetsched-" in seen["cg"]
        # Given processes are never stopped; what the agent changed is undone.
        assert _alive(p.pid)
        assert os.sched_getaffinity(p.pid) == {0, 1}
        assert os.getpriority(os.PRIO_PROCESS, p.pid) == nice0
        assert "hetsched-" not in Path(f"/proc/{p.pid}/cgroup").read_text()
    finally:
        p.kill()
        p.wait()


@needs_cgroups
def test_a_crashing_program_does_not_stop_the_others() -> None:
    wl = from_dict(
        {
            "name": "crash",
            "programs": [
                {"name": "crasher", "command": ["sh", "-c", "kill -SEGV $$"]},
                {"name": "worker", "command": ["spin", "20"]},
                {"name": "missing", "command": ["/no/such/program"]},
            ],
        }
    )
    r = Runner(wl, EqualShareAgent(period_ms=20), profile=cgroups.parse_profile(PROFILE))
    msgs: list[str] = []
    r.log = msgs.append
    doc = r.run()
    progs = {p["program"]: p for p in doc["programs"]}
    assert progs["crasher"]["exit_status"] == -signal.SIGSEGV
    assert progs["crasher"]["completion_s"] is None
    assert progs["worker"]["exit_status"] == 0 and progs["worker"]["completion_s"] > 0
    assert "missing" not in progs
    assert doc["summary"]["failed"] == ["missing"]
    assert any("/no/such/program: cannot start" in m for m in msgs)
    assert any("crasher instance 0 ended with signal 11" in m for m in msgs)


@needs_cgroups
def test_sigterm_stops_programs_and_removes_cgroups(tmp_path: Path) -> None:
    wl = tmp_path / "w.toml"
    wl.write_text(
        'name = "term"\n'
        '[[programs]]\nname = "a"\ncommand = ["spin", "1000000"]\n'
        '[[programs]]\nname = "b"\ncommand = ["spin", "1000000"]\n'
    )
    out = tmp_path / "out"
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hetsched",
            "linux",
            "agent",
            str(wl),
            "--agent",
            "equal-share",
            "--profile",
            PROFILE,
            "--out",
            str(out),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    mine = None
    deadline = time.monotonic() + 30
    members: list[int] = []
    while time.monotonic() < deadline:
        groups = [p for p in _ours() if p.name == f"hetsched-{agent.pid}"]
        if groups:
            mine = groups
            members = [
                int(x)
                for g in groups
                for f in g.rglob("cgroup.procs")
                for x in f.read_text().split()
            ]
            if len(set(members)) >= 2:
                break
        time.sleep(0.05)
    assert mine, "the agent made no cgroups"
    agent.send_signal(signal.SIGTERM)
    stdout, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 1, stderr
    assert "stopped by SIGTERM" in stderr
    assert not any(g.exists() for g in mine)
    assert members and not any(_alive(pid) for pid in set(members))
    summary = json.loads(stdout)
    assert summary["stopped_by"] == signal.SIGTERM
    assert (out / "tasks.csv").exists() and (out / "summary.json").exists()


# -- bad input -------------------------------------------------------------


@needs_cgroups
@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("cpu0=100%, cpu1=0%", "cpu1: duty cycle 0% is outside (0, 100]"),
        ("cpu0=120", "cpu0: duty cycle 120% is outside (0, 100]"),
        ("cpu0=100%, cpu4095=50%", "cpu4095 is absent; online CPUs: cpu0"),
        ("cpu0 100", "is not of the form cpuN=P%"),
    ],
)
def test_bad_profiles_are_refused(
    profile: str, message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    wl = tmp_path / "w.toml"
    wl.write_text('[[programs]]\nname = "a"\ncommand = "spin 1"\n')
    assert cli.main(["linux", "agent", str(wl), "--profile", profile]) == 1
    assert message in capsys.readouterr().err


def test_offline_cpu_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LinuxError, match="cpu1 is offline"):
        cgroups.parse_profile("cpu0=100%, cpu1=50%", online={0})


def test_profile_without_root_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LinuxError, match="needs root: creating cgroups needs CAP_SYS_ADMIN"):
        cgroups.Groups.open(cgroups.parse_profile(PROFILE))


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"programs": []}, "programs: give at least one"),
        ({"programs": [{"name": "a"}]}, "programs[0].command: required"),
        ({"programs": [{"name": "a", "command": "spin 1", "nice": 30}]}, "programs[0].nice: 30"),
        ({"programs": [{"name": "a", "command": "x", "repeat": 0}]}, "programs[0].repeat: 0"),
        ({"programs": [{"name": "a", "command": "x", "speed": 1}]}, "programs[0].speed: unknown"),
        ({"programs": [{"name": "a", "command": "x", "cpus": []}]}, "programs[0].cpus: []"),
    ],
)
def test_bad_workloads_name_the_field(workload: dict[str, Any], message: str) -> None:
    with pytest.raises(LinuxError) as e:
        from_dict(workload)
    assert message in str(e.value)


def test_agent_names_are_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    wl = tmp_path / "w.toml"
    wl.write_text('[[programs]]\nname = "a"\ncommand = "spin 1"\n')
    assert cli.main(["linux", "agent", str(wl), "--agent", "patel-cpu"]) == 1
    assert "patel-cpu needs cpusets" in capsys.readouterr().err
    assert cli.main(["linux", "agent", str(wl), "--agent", "patel-cpu[speed=2]"]) == 1
    assert "patel-cpu" in capsys.readouterr().err
    assert cli.main(["linux", "agent", str(wl), "--agent", "fastest"]) == 1
    assert "unknown agent; allowed: none, faster-first, equal-share" in capsys.readouterr().err
    assert cli.main(["linux", "agent"]) == 1
    assert "give a workload file or at least one --pid" in capsys.readouterr().err


@needs_cgroups
def test_patel_agent_moves_real_processes_between_emulated_cpus(tmp_path: Path) -> None:
    from hetsched.linux.agents import PatelAgent

    seen: list[list[list[int]]] = []

    class Watch(PatelAgent):
        def sample(self, cx: Any) -> None:
            super().sample(cx)
            seen.append([p["affinity"] for p in cx.processes()])

    wl = from_dict(_spinners(3))
    r = Runner(
        wl,
        Watch("patel-cpu[interval_ms=40]"),
        profile=cgroups.parse_profile(PROFILE),
        duration_s=0.6,
        log=lambda m: None,
    )
    doc = r.run()
    assert doc["summary"]["agent"].startswith("patel-cpu")
    # Arrivals go to the cpuset of least throughput estimate a: every process
    # is confined to one emulated CPU from the second sample on.
    assert seen and all(a in ([0], [1]) for a in seen[-1])


def test_plain_cfs_run_writes_simulator_style_results(tmp_path: Path) -> None:
    from hetsched.results import Results

    wl = tmp_path / "w.toml"
    wl.write_text(
        'name = "plain"\n[[programs]]\nname = "a"\ncommand = "spin 5"\nrepeat = 2\n'
        '[[programs]]\nname = "b"\ncommand = "phases 1 10 3"\nstart_s = 0.05\n'
    )
    out = tmp_path / "out"
    assert cli.main(["linux", "agent", str(wl), "--out", str(out), "-q"]) == 0
    for f in ("summary.json", "tasks.csv", "programs.csv", "cpus.csv", "scenario.json"):
        assert (out / f).exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["agent"] == "none" and summary["programs_completed"] == 3
    import pandas as pd

    programs = pd.read_csv(out / "programs.csv")
    assert list(programs["program"]) == ["a", "a", "b"]
    assert (programs["completion_s"] > 0).all()
    tasks = pd.read_csv(out / "tasks.csv")
    assert (tasks["run_s"] > 0).all()
    # The folder reads back like a simulated run's.
    res = Results(json.dumps({"summary": summary, "programs": programs.to_dict("records")}))
    assert "plain" in res.summary_table()


def test_cgroup_v2_layout_on_a_fake_hierarchy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The v2 code path, on a directory that stands in for a cgroup2 mount
    (the development machine binds cpu and cpuset to v1)."""
    import shutil

    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.subtree_control").write_text("memory\n")
    monkeypatch.setattr(cgroups, "detect", lambda prefer="auto": ("v2", {"": root}))
    monkeypatch.setattr(cgroups, "_cgroup_of", lambda pid, ctrl: "/")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    # Directories of a real cgroup fs are removed with rmdir although they
    # list files; here they hold plain files.
    monkeypatch.setattr(Path, "rmdir", lambda self: shutil.rmtree(self))
    written: dict[str, list[str]] = {}
    real_write = cgroups._write

    def record(path: Path, value: str) -> None:
        written.setdefault(str(path.relative_to(root)), []).append(value)
        real_write(path, value)

    monkeypatch.setattr(cgroups, "_write", record)
    g = cgroups.Groups.open(
        cgroups.parse_profile("cpu0=100%, cpu1=50%", online={0, 1}), high_weight=True
    )
    parent = f"hetsched-{os.getpid()}"
    assert written["cgroup.subtree_control"] == ["+cpu", "+cpuset"]
    assert written[f"{parent}/cpuset.cpus"] == ["0,1"]
    assert written[f"{parent}/cgroup.subtree_control"] == ["+cpu +cpuset"]
    assert written[f"{parent}/cpu0/cpu.max"] == ["max"]
    assert written[f"{parent}/cpu1/cpu.max"] == ["10000 20000"]
    assert written[f"{parent}/cpu0-1/cpu.max"] == ["30000 20000"]
    assert written[f"{parent}/cpu1/cpu.weight"] == ["10000"]
    g.place(4242, [1])
    assert written[f"{parent}/cpu1/cgroup.procs"] == ["4242"]
    # An emulated fused object on v2: cpu0 takes cpu1's quota (capped at
    # 100%), cpu1 keeps the smallest quota, the group of both drops cpu1.
    g.fuse([0, 1])
    assert written[f"{parent}/cpu0/cpu.max"][-1] == "max"
    assert written[f"{parent}/cpu1/cpu.max"][-1] == "1000 20000"
    assert written[f"{parent}/cpu0-1/cpuset.cpus"][-1] == "0"
    assert written[f"{parent}/cpu0-1/cpu.max"][-1] == "20000 20000"
    g.split(0)
    assert written[f"{parent}/cpu1/cpu.max"][-1] == "10000 20000"
    assert written[f"{parent}/cpu0-1/cpuset.cpus"][-1] == "0,1"
    assert g.close() == []
    assert not (root / parent).exists()
    # The controllers it enabled at the root are given back.
    assert written["cgroup.subtree_control"][-2:] == ["-cpuset", "-cpu"]
