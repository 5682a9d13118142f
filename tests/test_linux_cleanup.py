"""``hetsched linux cleanup`` after the agent was killed with SIGKILL: the
agent's state file names what it launched and changed; clean-up stops those
programs (never a process that merely reuses a recorded PID), restores the
affinity of the processes it was given and removes its cgroups."""

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

from childenv import child_env
from hetsched import cli
from hetsched.linux import state as agent_state
from hetsched.linux.runner import Runner
from hetsched.linux.workload import from_dict
from linux_support import SKIP as CGROUPS_SKIP

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")
ROOT = Path(__file__).resolve().parents[1]
PROFILE = "cpu0=100%, cpu1=50%"


def _alive(pid: int) -> bool:
    return agent_state.start_time(pid) is not None


def _wait_until(cond: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


def _cgroups_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


@pytest.mark.parametrize(
    "profile",
    [
        None,
        pytest.param(
            PROFILE,
            marks=pytest.mark.skipif(CGROUPS_SKIP is not None, reason=CGROUPS_SKIP or ""),
        ),
    ],
)
def test_cleanup_after_sigkill_undoes_what_the_agent_did(
    profile: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to see an affinity change")
    states = tmp_path / "state"
    wl = tmp_path / "w.toml"
    wl.write_text(
        'name = "left"\n'
        '[[programs]]\nname = "a"\ncommand = ["sleep", "60"]\n'
        '[[programs]]\nname = "b"\ncommand = ["sleep", "60"]\n'
    )
    given = subprocess.Popen(["sleep", "60"])
    mask_before, groups_before = os.sched_getaffinity(given.pid), _cgroups_of(given.pid)
    env = {**child_env(ROOT / "tests"), agent_state.STATE_DIR_ENV: str(states)}
    cmd = [sys.executable, "-m", "hetsched", "linux", "agent", str(wl), "--pid", str(given.pid)]
    cmd += ["--agent", "python:linux_pin_agent:PinAll", "--out", str(tmp_path / "out"), "-q"]
    if profile:
        cmd += ["--profile", profile]
    err = tmp_path / "agent.err"
    with err.open("w") as f:
        agent = subprocess.Popen(cmd, env=env, stderr=f)
    launched: list[int] = []
    try:
        state_file = states / f"agent-{agent.pid}.json"

        def recorded() -> bool:
            try:
                doc = json.loads(state_file.read_text())
            except (OSError, ValueError):
                return False
            launched[:] = [e["pid"] for e in doc["launched"]]
            # Recorded before the change: wait for the change itself too.
            pinned = os.sched_getaffinity(given.pid) == {min(mask_before)}
            return len(launched) == 2 and len(doc["affinity"]) == 1 and pinned

        assert _wait_until(recorded, 30), f"no state recorded: {err.read_text()}"
        groups = [Path(e["path"]) for e in json.loads(state_file.read_text())["cgroups"]]
        assert bool(groups) == bool(profile)
        agent.kill()
        agent.wait()
        # What the agent leaves behind when it is killed.
        assert all(_alive(p) for p in launched)
        assert os.sched_getaffinity(given.pid) == {min(mask_before)}
        assert all(g.exists() for g in groups)

        monkeypatch.setenv(agent_state.STATE_DIR_ENV, str(states))
        assert cli.main(["linux", "cleanup"]) == 0
        out = capsys.readouterr().out
        assert _wait_until(lambda: not any(_alive(p) for p in launched), 3)
        for name, pid in zip(("a.0", "b.0"), launched, strict=True):
            assert f"stopped {name} (pid {pid}) (agent {agent.pid}) with SIGTERM" in out
        assert f"restored the CPU affinity of pid {given.pid}" in out
        assert _alive(given.pid) and os.sched_getaffinity(given.pid) == mask_before
        assert _cgroups_of(given.pid) == groups_before
        assert not any(g.exists() for g in groups)
        assert not state_file.exists()
        assert cli.main(["linux", "cleanup"]) == 0
        assert "nothing to clean up" in capsys.readouterr().out
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        for pid in [given.pid, *launched]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        given.wait()


def test_a_recorded_pid_now_held_by_another_program_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    victim = subprocess.Popen(["sleep", "60"])
    try:
        start = agent_state.start_time(victim.pid)
        assert start is not None
        mask = sorted(os.sched_getaffinity(victim.pid))
        doc = {
            "agent_pid": gone.pid,
            "agent_start": 1,
            # The recorded program had another start time: the PID was reused.
            "launched": [{"pid": victim.pid, "start": start + 1, "name": "x.0"}],
            "affinity": [{"pid": victim.pid, "start": start + 1, "old": mask[:1]}],
        }
        (tmp_path / f"agent-{gone.pid}.json").write_text(json.dumps(doc))
        monkeypatch.setenv(agent_state.STATE_DIR_ENV, str(tmp_path))
        assert cli.main(["linux", "cleanup"]) == 0
        out = capsys.readouterr().out
        assert f"x.0 (pid {victim.pid}) (agent {gone.pid}): no longer running" in out
        time.sleep(0.1)
        assert _alive(victim.pid) and sorted(os.sched_getaffinity(victim.pid)) == mask
        assert not list(tmp_path.glob("agent-*.json"))
    finally:
        victim.kill()
        victim.wait()


def test_the_state_of_a_running_agent_is_not_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    me = os.getpid()
    doc = {"agent_pid": me, "agent_start": agent_state.start_time(me), "launched": []}
    path = tmp_path / f"agent-{me}.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv(agent_state.STATE_DIR_ENV, str(tmp_path))
    assert cli.main(["linux", "cleanup"]) == 0
    assert f"agent {me} is still running" in capsys.readouterr().out
    assert path.exists()
    # An unreadable state file is reported, not a traceback.
    path.write_text("{")
    assert cli.main(["linux", "cleanup"]) == 1
    assert "unreadable state file" in capsys.readouterr().err


def test_an_agent_that_ends_normally_removes_its_state_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(agent_state.STATE_DIR_ENV, str(tmp_path))
    launched: list[list[int]] = []
    write = agent_state.AgentState.write

    def spy(self: agent_state.AgentState) -> None:
        launched.append([e["pid"] for e in self.doc["launched"]])
        write(self)

    monkeypatch.setattr(agent_state.AgentState, "write", spy)
    wl = from_dict({"name": "ok", "programs": [{"name": "t", "command": ["true"], "repeat": 2}]})
    runner = Runner(wl, None, log=lambda m: None)
    doc = runner.run()
    assert doc["summary"]["programs_completed"] == 2
    # Each instance was recorded when launched and dropped once it ended.
    pids = [p["pid"] for p in doc["programs"]]
    assert launched == [[], [pids[0]], [], [pids[1]], []]
    assert runner.state is not None and not runner.state.path.exists()
    assert not list(tmp_path.iterdir())
