"""The heterogeneous and virtual-machine benchmark series: every point is a
valid scenario, and short versions of the smallest ones run and keep the
policy's own machinery busy (fusions for chameleon, vCPUs for the VMs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hetsched

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import series


def test_every_series_point_is_a_valid_scenario() -> None:
    points = series.points()
    assert {p[1] for p in points} == {
        "a-dwrr big.LITTLE",
        "chameleon [dynamic]",
        "xen-credit",
        "aash",
    }
    for _, _, cpus, scn in points:
        parsed = hetsched.loads(json.dumps(scn), fmt="json")
        assert parsed is not None
        # Sizes are stated in CPUs and each builder makes that many.
        ncpu = sum(c["cores"] for c in scn["machine"]["clusters"])
        assert ncpu == cpus


def test_small_series_points_run() -> None:
    for scn in (
        series.adwrr(8, 32, 0.3),
        series.chameleon(24, 48, 0.5),
        series.vms("xen-credit", 8, 2, 4, 4, 0.3),
        series.vms("aash", 8, 2, 4, 4, 0.3),
    ):
        res = hetsched.run(hetsched.loads(json.dumps(scn), fmt="json"))
        assert res.summary["events"] > 0
        assert res.summary["sim_end_s"] > 0
        if scn["scheduler"].startswith("chameleon"):
            assert len(res.reconfigs) > 0, "the policy fused no object"
