"""EAS, capacity awareness and util_est on a real SoC's energy model: the
RK3399 (4 Cortex-A53 + 2 Cortex-A72) read from its device tree, running
rt-app's tutorial task (20 ms of CPU0's work, then 80 ms of sleep) for 4 s
with schedutil.

Today's `eas` (cfs, no util_est, fit checks against the capacity at the
present P-state): the task's utilisation decays over each 80 ms sleep, it
wakes on a LITTLE core running slowly and becomes a misfit part-way through
many bursts, moving to a big core; it costs more energy than `cfs`, which
keeps it on one LITTLE core.

With util_est (`eevdf[eas=true]`, `linux`) the task wakes with the
utilisation of its last burst: no misfit migrations, and schedutil raises
the frequency at the wake-up, so the bursts take a third less CPU time. That
speed costs energy on this SoC: its energy model has dynamic power only, so
the slowest P-state is always the cheapest, and `cfs` without util_est runs
most of each burst there. The issue's target, `eas` with util_est using no
more energy than `cfs`, does not hold in this model; the test states what
does (docs/eevdf.md has the numbers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import hetsched
from hetsched import energymodel, rtapp

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realinputs"
DT = REAL / "devicetree"
RK3399 = [DT / "rk3399-cpus-excerpt.dtsi", DT / "rk3399-opp.dtsi"]
TUTORIAL = REAL / "rtapp" / "tutorial__example1.json"

needs_real = pytest.mark.skipif(
    not all(p.exists() for p in [*RK3399, TUTORIAL]),
    reason="../shared/realinputs (RK3399 device tree, rt-app tutorial) is not there",
)


def _machine() -> dict[str, Any]:
    return energymodel.load_devicetree(RK3399).machine().machine


def _run(scheduler: str) -> hetsched.Results:
    wl = rtapp.load_rtapp(TUTORIAL)
    scn = wl.scenario(machine=_machine(), scheduler=scheduler, duration_s=4.0)
    scn["governor"] = "schedutil"
    scn["stop_when_done"] = False
    return hetsched.run(scn)


def _big_share(res: hetsched.Results) -> float:
    """Share of the task's CPU time on the big (highest-capacity) cores."""
    types = _machine()["types"]
    big = max(types, key=lambda n: types[n]["capacity"])
    tasks = json.loads(res.raw_json)["tasks"]
    run = sum(t["run_s"] for t in tasks)
    return sum(t["run_s_by_type"].get(big, 0.0) for t in tasks) / run


@needs_real
def test_rk3399_tutorial_misfits_without_util_est_and_not_with_it() -> None:
    cfs = _run("cfs")
    today = _run("eas")
    with_est = _run("eevdf[eas=true]")
    linux = _run("linux")
    runs = {"cfs": cfs, "eas": today, "eevdf_eas": with_est, "linux": linux}
    energy = {k: r.summary["energy_j"] for k, r in runs.items()}

    def cpu_s(r: hetsched.Results) -> float:
        return sum(t["run_s"] for t in json.loads(r.raw_json)["tasks"])

    # cfs: one LITTLE core, never moved.
    assert cfs.summary["migrations"] == 0 and _big_share(cfs) == 0.0
    # Today's eas: misfit migrations within the bursts (40 bursts in 4 s),
    # time on the big cores, more energy than cfs.
    assert today.summary["migrations"] >= 20, today.summary["migrations"]
    assert _big_share(today) > 0.0
    assert energy["eas"] > 1.05 * energy["cfs"], energy
    # With util_est: placed where it fits, no misfit migration after the
    # first placement; schedutil sees the estimate, so the bursts run
    # faster (a third less CPU time than cfs's).
    assert not with_est.warnings and not linux.warnings
    assert with_est.summary["migrations"] <= 1, with_est.summary["migrations"]
    assert cpu_s(with_est) < 0.75 * cpu_s(cfs), (cpu_s(with_est), cpu_s(cfs))
    # `linux` is that stack.
    assert energy["linux"] == energy["eevdf_eas"]
    # And the frequency costs energy here (see the module docstring).
    assert energy["eevdf_eas"] > energy["cfs"], energy


@needs_real
def test_rk3399_util_est_off_on_eevdf_gives_back_cfs_energy() -> None:
    # Without util_est and EAS, eevdf runs the lone task exactly as cfs does
    # (same CPU, same frequencies): what util_est changes is schedutil's view.
    plain = _run("eevdf[util_est=false]")
    cfs = _run("cfs")
    assert plain.summary["energy_j"] == pytest.approx(cfs.summary["energy_j"], rel=1e-9)
    assert _run("eevdf").summary["energy_j"] > 1.2 * cfs.summary["energy_j"]
