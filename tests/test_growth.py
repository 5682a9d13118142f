"""bench/growth.py's arithmetic on fake runs (no valgrind, nothing timed)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import growth


def fake_runner(costs: dict[tuple[str, int], float], startup: int = 10_000_000):
    """A run whose instructions are a start-up cost (growing with the
    threads) plus a fixed cost per event, with events proportional to the
    simulated time and the threads."""
    calls: list[dict] = []

    def run(scn: dict) -> tuple[int, int]:
        calls.append(scn)
        threads = sum(p["threads"] for p in scn.get("workload", {}).get("programs", []))
        threads += sum(p["threads"] for vm in scn.get("vms", []) for p in vm["programs"])
        cpus = sum(c["cores"] for c in scn["machine"]["clusters"])
        events = round(60 * threads * scn["duration_s"])
        ipe = costs[(scn["scheduler"], cpus)]
        return startup + 1000 * threads + int(ipe * events), events

    return run, calls


def test_start_up_cancels_and_the_ratio_is_large_over_small():
    run, calls = fake_runner({("cfs", 8): 2000.0, ("cfs", 1024): 3000.0,
                              ("aash", 8): 2500.0, ("aash", 1024): 10_000.0})
    res = growth.measure_growth(["cfs", "aash"], growth.CPU_SMALL, growth.CPU_LARGE, run=run)
    assert res["cfs"]["small"] == pytest.approx(2000.0, rel=1e-6)
    assert res["cfs"]["large"] == pytest.approx(3000.0, rel=1e-6)
    assert res["cfs"]["ratio"] == pytest.approx(1.5, rel=1e-6)
    assert res["aash"]["ratio"] == pytest.approx(4.0, rel=1e-6)
    # Two runs per point: to the warm-up, and to the warm-up plus a window.
    assert len(calls) == 8
    assert [c["duration_s"] for c in calls[:2]] == [
        growth.WARMUP_S, growth.WARMUP_S + growth.window_s(growth.Size(8, 128))]


def test_vm_points_have_one_vcpu_per_cpu_and_the_threads_asked_for():
    scn = growth.scenario("xen-credit", growth.Size.parse({"cpus": 64, "threads": 1000}), 0.5)
    assert sum(vm["vcpus"] for vm in scn["vms"]) == 64
    # A quarter of the threads, as guest threads (4 per vCPU at 16 per CPU).
    assert sum(p["threads"] for vm in scn["vms"] for p in vm["programs"]) == 16 * 15
    native = growth.scenario("dwrr", growth.Size.parse(growth.CPU_LARGE), 0.5)
    assert native["scheduler"] == "dwrr"
    assert native["workload"]["programs"][0]["threads"] == 1024 * 16


def test_no_events_in_the_window_is_an_error():
    def run(scn: dict) -> tuple[int, int]:
        return 100, 5

    with pytest.raises(RuntimeError, match="no events in the window"):
        growth.instructions_per_event("cfs", growth.Size(8, 128), run=run)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"cpus": 8}, "exactly one of"),
        ({"cpus": 8, "threads": 10, "threads_per_cpu": 2}, "exactly one of"),
        ({"cpus": 2, "threads": 10}, "size.cpus"),
        ({"cpus": 8, "threads": 0}, "size.threads"),
        ({"cpus": 8, "threads_per_cpu": 1.5}, "size.threads_per_cpu"),
        ({"cpus": 8, "threads": 10, "smt": 2}, "unknown field"),
    ],
)
def test_bad_sizes_name_the_field(spec, message):
    with pytest.raises(ValueError, match=message):
        growth.Size.parse(spec)


def test_unknown_policy_is_refused_with_the_allowed_ones():
    run, _ = fake_runner({})
    with pytest.raises(ValueError, match="allowed: cfs"):
        growth.measure_growth(["nope"], growth.CPU_SMALL, growth.CPU_LARGE, run=run)


def test_table_shows_each_policy_and_ratio():
    res = {"cfs": {"small": 2000.0, "large": 3100.0, "ratio": 1.55}}
    text = growth.table(res, growth.Size(8, 128), growth.Size(1024, 16384), markdown=True)
    assert "| cfs | 2,000 | 3,100 | 1.55 |" in text
    assert "8×128" in text and "1024×16384" in text


def test_engine_only_counts_the_event_loop_alone(monkeypatch):
    seen: list[list[str]] = []

    def fake_run(cmd, **kw):
        seen.append(cmd)
        return growth.subprocess.CompletedProcess(
            cmd, 0, stdout='{"events": 7, "cpus": 8}\n', stderr="==1== Collected : 1234\n")

    monkeypatch.setattr(growth.shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(growth.subprocess, "run", fake_run)
    scn = growth.scenario("cfs", growth.Size.parse(growth.CPU_SMALL), 0.1)
    assert growth.callgrind_run(scn) == (1234, 7)
    assert growth.callgrind_run(scn, engine_only=True) == (1234, 7)
    toggle = f"--toggle-collect={growth.ENGINE_LOOP}"
    assert toggle not in seen[0]
    assert toggle in seen[1]


def test_the_engine_loop_is_a_symbol_of_the_built_core():
    # --engine-only counts inside the function of this name: if it were
    # renamed or inlined away, callgrind would count nothing at all.
    import subprocess

    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    import hetsched._core as core

    out = subprocess.run([nm, "-C", core.__file__], capture_output=True, text=True, check=True)
    names = {line.split(" ", 2)[-1] for line in out.stdout.splitlines()}
    assert growth.ENGINE_LOOP in names


def test_every_built_in_scheduler_has_a_growth_point():
    import hetsched._core as core

    schedulers = {p["name"] for p in core.list_policies() if p["kind"] == "scheduler"}
    assert schedulers == set(growth.POLICIES)
