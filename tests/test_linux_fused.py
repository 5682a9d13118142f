"""The emulated fused object on real Linux: a representative CPU takes the
quota of the CPUs it borrows, which are left empty, and a split undoes it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hetsched.linux import LinuxError, cgroups
from hetsched.linux.runner import Runner
from hetsched.linux.workload import from_dict
from hetsched.policy import Agent
from linux_support import needs_cgroups

SPIN = ["/bin/sh", "-c", "while :; do :; done"]


def _ours() -> list[Path]:
    return cgroups.leftover_groups() + [
        p for p in Path("/sys/fs/cgroup/cpu").glob("hetsched-*") if p.is_dir()
    ]


@pytest.fixture(autouse=True)
def no_leftovers() -> Any:
    before = set(_ours())
    yield
    assert not set(_ours()) - before, "cgroups left behind"


def _cpu_s(pid: int) -> float:
    """Run time of ``pid`` so far, seconds (schedstat)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def _members(paths: dict[str, Path]) -> set[int]:
    path = next(iter(paths.values()))
    return {int(x) for x in (path / "cgroup.procs").read_text().split()}


def _spin_for(pid: int, seconds: float) -> float:
    a = _cpu_s(pid)
    time.sleep(seconds)
    return _cpu_s(pid) - a


@needs_cgroups
def test_fused_representative_delivers_the_work_of_both_cpus() -> None:
    g = cgroups.Groups.open(cgroups.parse_profile("cpu0=50%, cpu1=50%"), high_weight=True)
    spinner = subprocess.Popen(SPIN)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        g.place(spinner.pid, [0])
        g.place(sleeper.pid, [1])
        time.sleep(0.2)
        native = _spin_for(spinner.pid, 1.5)
        g.fuse([0, 1])
        # The borrowed CPU is empty and has no quota; its process waits on
        # the representative.
        assert _members(g.group_for([1])) == set()
        assert sleeper.pid in _members(g.group_for([0]))
        assert g.duty(0) == 1.0 and g.duty(1) == 0.0
        time.sleep(0.2)
        fused = _spin_for(spinner.pid, 1.5)
        # 2 × 50% fused: about the work of one CPU at 100%, twice the native
        # representative's (generous bounds: the machine is shared).
        assert 1.5 < fused / native < 2.6, (native, fused)
        with pytest.raises(LinuxError, match="already belong"):
            g.fuse([0, 1])
        assert g.split(0) == [1]
        assert sleeper.pid in _members(g.group_for([1]))
        assert g.duty(0) == 0.5 and g.duty(1) == 0.5
        time.sleep(0.2)
        again = _spin_for(spinner.pid, 1.5)
        assert 0.6 < again / native < 1.5, (native, again)
        with pytest.raises(LinuxError, match="represents no fused object"):
            g.split(0)
    finally:
        for p in (spinner, sleeper):
            p.kill()
            p.wait()
        assert g.close() == []


def test_bad_fuses_are_refused() -> None:
    g = cgroups.Groups(cgroups.parse_profile("cpu0=50%", {0}), "v1", {}, False)
    with pytest.raises(LinuxError, match="2 or more distinct"):
        g.fuse([0])
    with pytest.raises(LinuxError, match=r"cpus \[7\] are not in the profile"):
        g.fuse([0, 7])


class FuseOnce(Agent):
    """Pins both tasks to CPU 0 and fuses CPUs 0 and 1 at the first sample."""

    name = "fuse-once"
    period_ms = 20.0

    def __init__(self) -> None:
        self.done = False

    def sample(self, cx: Any) -> None:
        if self.done:
            return
        for p in cx.processes():
            cx.set_affinity(p["task"], [0])
        native_mhz = cx.cpu_mhz(0)
        cx.fuse([0, 1])
        assert cx.fused() == {0: [1]}
        assert cx.cpu_mhz(0) == pytest.approx(2 * native_mhz, abs=2)
        with pytest.raises(LinuxError, match="borrowed by the fused object"):
            cx.set_affinity(0, [1])
        self.done = True


@needs_cgroups
def test_an_agent_fuses_real_cpus_and_the_run_records_it() -> None:
    wl = from_dict(
        {
            "name": "fuse",
            "programs": [{"name": "s0", "command": ["spin", "100000"]}],
        }
    )
    r = Runner(
        wl,
        FuseOnce(),
        profile=cgroups.parse_profile("cpu0=50%, cpu1=50%"),
        duration_s=1.5,
        high_weight=True,
        log=lambda m: None,
    )
    doc = r.run()
    assert not r.agent_errors, r.agent_errors
    assert [f["op"] for f in doc["summary"]["fused_objects"]] == ["fuse"]
    run_s = doc["tasks"][0]["run_s"]
    # Fused at the first sample: the spinner ran at 100%, not the 50% of
    # its CPU (generous bounds: the machine is shared).
    assert run_s > 0.7 * 1.5 * 0.75, run_s
