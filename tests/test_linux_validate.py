"""``hetsched linux validate-sim`` at small scale: the same 2-CPU description
run for real (with emulated asymmetry) and in the simulator."""

from __future__ import annotations

import json
import os

import pytest

from hetsched import cli
from hetsched.linux import LinuxError
from hetsched.linux.calibrate import Calibration
from hetsched.linux.validate import cases, run_validation, scenario_for
from linux_support import SKIP

CAL = Calibration(
    ms_per_unit=2.0,
    units=10,
    ns_per_access_small=1.0,
    ns_per_access_large=100.0,
    ws_small_kb=16,
    ws_large_kb=65536,
    mem_large=0.99,
    phases_cpu_share=0.1,
    repeats=1,
)


def test_scenarios_follow_the_case_descriptions() -> None:
    by_name = {c.name: c for c in cases(CAL, "quick")}
    scen = scenario_for(by_name["asym-pinned"], CAL, [0, 1])
    cpus = scen["machine"]["cpus"]
    assert [c["duty_cycle"] for c in cpus] == [1.0, 0.5]
    progs = scen["workload"]["programs"]
    # 500 ms of work at 2 ms per unit: 250 units, pinned as described.
    assert [p["work_ms"] for p in progs] == [500.0, 500.0]
    assert [p["affinity"] for p in progs] == [[0], [1]]
    chase = scenario_for(by_name["memory"], CAL, [0, 1])["workload"]["programs"][0]
    assert chase["mem"] == 0.99 and chase["working_set_kb"] == 65536
    # Every case is a valid scenario for the simulator.
    import hetsched

    for c in by_name.values():
        hetsched.loads(json.dumps(scenario_for(c, CAL, [0, 1])), "json")


@pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
def test_half_speed_cpu_real_and_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    nice = ["--nice", "-20"] if os.geteuid() == 0 else []
    argv = ["linux", "validate-sim", "--only", "asym-pinned", "--repeats", "1", "--json", *nice]
    assert cli.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["program"], r["kind"]) for r in rows] == [("fast", "cpu"), ("slow", "cpu")]
    by = {r["program"]: r for r in rows}
    for r in rows:
        assert r["measured_s"] > 0 and r["predicted_s"] > 0
        assert r["error"] == pytest.approx((r["measured_s"] - r["predicted_s"]) / r["predicted_s"])
        assert r["verdict"] in ("within", "outside")
    # The model: a 50 % duty cycle doubles the time of the same work.
    assert by["slow"]["predicted_s"] / by["fast"]["predicted_s"] == pytest.approx(2.0, rel=0.02)
    # The real machine (emulated by a bandwidth quota) does about the same.
    assert 1.4 < by["slow"]["measured_s"] / by["fast"]["measured_s"] < 2.8


def test_unknown_case_is_named() -> None:
    with pytest.raises(LinuxError, match="--only 'nope': unknown case; known: cfs-2spin"):
        run_validation(only=["nope"], cal=CAL)
    with pytest.raises(LinuxError, match="--nice: 40 is out of range"):
        run_validation(nice=40, cal=CAL)
