"""Dynamic processors through the Python API and the HotOS / Chameleon
reproductions at quick scale: verdicts are computed, calibration points come
back exactly, predictions come out of the step model, and bad input names its
path."""

from __future__ import annotations

from pathlib import Path

import pytest

import hetsched
from hetsched.reproduce import chameleon, hotplug
from hetsched.reproduce.framework import VERDICTS


def test_hotos_t3_calibration_points_and_predictions() -> None:
    out = hotplug.hotos_t3("quick")
    assert all(r.verdict in VERDICTS for r in out.rows)
    by = {r.claim: r for r in out.rows}
    # Calibration points come back exactly.
    assert by["native offline of 1 CPU(s), ms"].simulated == pytest.approx(25.0)
    assert by["native online of 1 CPU(s), ms"].simulated == pytest.approx(106.0)
    # Parallel online of 3: one hardware start + init (83.6 ms) plus the
    # notifiers walking 2, 3 and 4 CPUs (70 callbacks × 79.9 µs × 9).
    k = (25_000 - 18 - 2600) / 280
    want = (10_003 + 106_000 - 10_003 - 70 * k * 4 + 70 * k * 9) / 1e3
    assert by["parallel online of 3 CPU(s), ms"].simulated == pytest.approx(want, rel=1e-3)
    # Parallel hotplug is never slower than native, and much faster online.
    for n in (2, 3):
        nat = by[f"native online of {n} CPU(s), ms"].simulated
        par = by[f"parallel online of {n} CPU(s), ms"].simulated
        assert isinstance(nat, float) and isinstance(par, float)
        assert par < 0.7 * nat


def test_hotos_stop_loss_shows_in_co_running_programs() -> None:
    (row,) = hotplug.hotos_stop("quick")
    assert row.verdict == "match"
    assert row.simulated == pytest.approx(2.6, rel=1e-3)


def test_hotos_95_and_chameleon_rows_are_computed() -> None:
    for fn in (hotplug.hotos_95, chameleon.chameleon_ipi):
        rows = fn("quick")
        assert rows and all(r.verdict in VERDICTS for r in rows)
    t4 = chameleon.chameleon_t4("quick")
    by = {r.claim: r for r in t4.rows}
    # Hotplug on 24 CPUs is a prediction from the 4-CPU calibration.
    assert by["hotplug: fuse 2 CPUs, µs"].simulated == pytest.approx(150_000, rel=0.01)
    # Split does not reprogram the IOAPIC: 3 teardowns at 20 µs.
    assert by["proxy-apic: split 4 CPUs, µs"].simulated == pytest.approx(60.0)


def test_chameleon_f5_fused_speedups_match_the_acmp() -> None:
    out = chameleon.chameleon_f5("quick")
    assert [r.verdict for r in out.rows] == ["match"] * 6
    for cls in chameleon.CLASSES:
        assert out.data["dyn4"][cls] == pytest.approx(out.data["acmp3"][cls], rel=0.01)
        assert out.data["dyn2"][cls] == pytest.approx(out.data["acmp6"][cls], rel=0.01)


def test_plots_write_pngs(tmp_path: Path) -> None:
    out = hotplug.hotos_t3("quick")
    hotplug.plot_t3(out.data, tmp_path / "t3.png")
    t4 = chameleon.chameleon_t4("quick")
    chameleon.plot_t4(t4.data, tmp_path / "t4.png")
    assert (tmp_path / "t3.png").stat().st_size > 0
    assert (tmp_path / "t4.png").stat().st_size > 0


def test_results_have_reconfigurations_and_save_them(tmp_path: Path) -> None:
    res = hetsched.run(hotplug.stop_scenario(True, 50.0))
    assert list(res.reconfigs["op"]) == ["offline"]
    assert float(res.reconfigs["latency_us"].iloc[0]) == pytest.approx(25_000.0)
    res.save(tmp_path)
    assert (tmp_path / "reconfigs.csv").exists()
    plain = hetsched.run({"duration_s": 1.0, "machine": hotplug.machine()})
    assert plain.reconfigs.empty


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"mechanism": "teleport"}, "dynamic.mechanism"),
        ({"tlb_share": 1.5}, "dynamic.tlb_share"),
        ({"fusion": [{"level": 16, "speedup": {"default": 2.0}}]}, "dynamic.fusion[0].level"),
        (
            {"fusion": [{"level": 2, "speedup": {"default": 0.0}}]},
            "dynamic.fusion[0].speedup.default",
        ),
        ({"events": [{"at_ms": 0, "op": "explode", "cpus": [1]}]}, "dynamic.events[0].op"),
        (
            {
                "fusion": [{"level": 2, "speedup": {"default": 1.5}}],
                "events": [{"at_ms": 0, "op": "fuse", "cpus": [1, 3]}],
            },
            "dynamic.events[0].cpus",
        ),
    ],
)
def test_bad_dynamic_input_names_its_path(patch: dict, path: str) -> None:
    scn = {"duration_s": 1.0, "machine": hotplug.machine(), "dynamic": patch}
    with pytest.raises(hetsched.ScenarioError) as e:
        hetsched.run(scn)
    assert str(e.value).startswith(path), str(e.value)


def test_offlining_an_offline_cpu_is_a_clear_error() -> None:
    scn = {
        "duration_s": 1.0,
        "stop_when_done": False,
        "machine": hotplug.machine(),
        "dynamic": {
            "events": [
                {"at_ms": 0, "op": "offline", "cpus": [2]},
                {"at_ms": 5, "op": "offline", "cpus": [2]},
            ]
        },
    }
    with pytest.raises(hetsched.ScenarioError) as e:
        hetsched.run(scn)
    assert "dynamic.events[1]" in str(e.value) and "cpu 2 is offline" in str(e.value)


def test_chameleon_f3_taxation_trend(tmp_path: Path) -> None:
    out = chameleon.chameleon_f3("quick")
    assert [r.verdict for r in out.rows] == ["match"] * 4
    data = out.data
    # B loses what A borrows: its relative time rises as the tax falls.
    assert data[100.0]["b_rel"] < data[1.0]["b_rel"] < data[0.01]["b_rel"]
    chameleon.plot_f3(data, tmp_path / "f3.png")
    assert (tmp_path / "f3.png").stat().st_size > 0


def test_chameleon_f8_allocation_sequence(tmp_path: Path) -> None:
    out = chameleon.chameleon_f8("quick")
    assert [r.verdict for r in out.rows] == ["match"] * 6
    # The intervals come from the run: every object is a block of 2 or 4 CPUs
    # and no CPU is in two objects at once.
    ivs = out.data["intervals"]
    assert {len(iv["cpus"]) for iv in ivs} == {2, 4}
    for a in ivs:
        for b in ivs:
            if a is not b and a["from_s"] < b["to_s"] and b["from_s"] < a["to_s"]:
                assert not set(a["cpus"]) & set(b["cpus"])
    chameleon.plot_f8(out.data, tmp_path / "f8.png")
    assert (tmp_path / "f8.png").stat().st_size > 0


def test_f8_without_notification_leaves_freed_cpus_idle() -> None:
    res = hetsched.run(chameleon.f8_scenario(notify=False), trace=True)
    ivs = chameleon.object_intervals(res)
    lbm = next(iv for iv in ivs if iv["program"] == "lbm" and len(iv["cpus"]) == 2)
    # After lbm's exit no object takes its CPUs.
    assert not any(iv["from_s"] >= lbm["to_s"] and set(iv["cpus"]) & set(lbm["cpus"]) for iv in ivs)


def test_model_programs_and_their_bad_input() -> None:
    from hetsched.reproduce.chameleon_programs import NAMES, model_program

    for name in NAMES:
        res = hetsched.run(
            {
                "duration_s": 100.0,
                "machine": chameleon.machine(),
                "workload": {"programs": [model_program(name, threads=4, work_ms=400.0)]},
            }
        )
        assert float(res.programs["completion_s"].iloc[0]) > 0
    assert model_program("lbm")["class"] == "medium"
    assert model_program("fibonacci")["kind"] == "dynamic"
    with pytest.raises(ValueError, match="unknown Chameleon model program 'spam'"):
        model_program("spam")
    with pytest.raises(ValueError, match="threads must be at least 1"):
        model_program("pmake", threads=0)
    with pytest.raises(ValueError, match="work_ms must be > 0"):
        model_program("gcc", work_ms=-1.0)
