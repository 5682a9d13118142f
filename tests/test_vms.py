"""Scenarios with virtual machines through the Python API: per-VM results,
saved files, trace labels, and errors with paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetsched

ROOT = Path(__file__).resolve().parents[1]


def test_vm_results_files_and_trace_labels(tmp_path: Path) -> None:
    res = hetsched.run(hetsched.load(ROOT / "scenarios" / "aash-blast-eon.toml"), trace=True)
    assert list(res.vms["name"]) == ["blast", "eon"]
    vcpus = {int(t) for ts in res.vms["vcpu_tasks"] for t in ts}
    assert len(vcpus) == 7
    # vCPUs are not task rows; guest threads are.
    assert not vcpus & set(res.tasks["task"])
    assert set(res.tasks["program"]) == {"blast", "eon"}
    eon = res.vms.set_index("name").loc["eon"]
    assert eon["fast_s"] > 0.5 * eon["run_s"]  # served first on the fast core
    text = res.summary_table()
    assert "virtual machines" in text and "on fastest" in text
    out = res.save(tmp_path)
    assert (out / "vms.csv").exists()
    doc = json.loads((out / "trace.json").read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {e["name"] for e in events if e.get("ph") == "X"}
    assert any(n.startswith("eon vCPU") for n in names), sorted(names)[:10]
    assert any(n.startswith("blast vCPU") for n in names)


def test_a_scenario_without_vms_has_no_vm_rows(tmp_path: Path) -> None:
    res = hetsched.run(hetsched.load(ROOT / "scenarios" / "demo.toml"))
    assert res.vms.empty
    assert "virtual machines" not in res.summary_table()
    assert not (res.save(tmp_path) / "vms.csv").exists()


@pytest.mark.parametrize(
    ("vm", "message"),
    [
        ({"vcpus": 0}, "vms[0].vcpus: 0 is not allowed"),
        ({"vcpus": 2, "priority": "urgent"}, 'vms[0].priority: "urgent" is not a priority class'),
        ({"vcpus": 2, "weight": -1}, "vms[0].weight: -1 is not allowed"),
        ({"vcpus": 1, "aware": True, "fast_vcpus": 2}, "vms[0].fast_vcpus: 2 is not allowed"),
    ],
)
def test_bad_vms_name_their_path(vm: dict, message: str) -> None:
    prog = {"kind": "sequential", "work_ms": 10}
    scn = {
        "duration_s": 1.0,
        "machine": {"preset": "smp-4"},
        "vms": [{**vm, "programs": [prog]}],
    }
    with pytest.raises(hetsched.ScenarioError, match=r".*") as e:
        hetsched.run(scn)
    assert message in str(e.value)


def test_guest_affinity_naming_a_missing_vcpu() -> None:
    scn = {
        "duration_s": 1.0,
        "machine": {"preset": "smp-4"},
        "vms": [{"vcpus": 2, "programs": [{"kind": "sequential", "work_ms": 10, "affinity": [3]}]}],
    }
    with pytest.raises(hetsched.ScenarioError) as e:
        hetsched.run(scn)
    assert "vms[0].programs[0].affinity[0]: vCPU 3 does not exist (the VM has 2 vCPUs: 0-1)" in str(
        e.value
    )
