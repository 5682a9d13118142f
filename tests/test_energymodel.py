"""Energy models from device trees and LISA platform files: the RK3399 files
and LISA's platforms of ../shared/realinputs (used in place), and small
device trees written here for the parser's edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetsched
from hetsched import cli, energymodel, sysfs
from rk3399_sys import write_rk3399_sys

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realinputs"
DT = REAL / "devicetree"
RK3399 = [DT / "rk3399-cpus-excerpt.dtsi", DT / "rk3399-opp.dtsi"]

needs_real = pytest.mark.skipif(
    not REAL.is_dir(), reason=f"{REAL} (the real inputs) is not present in this checkout"
)

#: rk3399-opp.dtsi, written out by hand: (MHz, mV) per cluster; the A53s have
#: dynamic-power-coefficient 100, the A72s 436 (rk3399.dtsi).
A53 = [(408, 800), (600, 800), (816, 850), (1008, 925), (1200, 1000), (1416, 1125)]
A72 = [(408, 800), (600, 800), (816, 825), (1008, 875), (1200, 950), (1416, 1025),
       (1608, 1100), (1800, 1200)]  # fmt: skip


def _formula_uw(c: int, mhz: int, mv: int) -> float:
    """P = C·V²·f with C in µW/MHz/V², V in V, f in MHz (the binding's units)."""
    return c * (mv / 1000) ** 2 * mhz


def _model_uw(ty: dict, mhz: int) -> float:
    """hetsched's busy power at full activity for the type at ``mhz``, µW."""
    (ps,) = [p for p in ty["pstates"] if p["mhz"] == mhz]
    pw = ty["power"]
    return 1e6 * (pw["static_w_per_v"] * ps["volt"] + pw["dyn_w_per_v2ghz"] * ps["volt"] ** 2
                  * mhz / 1000)  # fmt: skip


@needs_real
def test_rk3399_gives_a_4_plus_2_machine_with_the_kernels_power_at_every_opp() -> None:
    m = energymodel.load_devicetree(RK3399).machine()
    types = m.machine["types"]
    rows = m.machine["cpus"]
    assert [r["type"] for r in rows] == ["cluster0"] * 4 + ["cluster1"] * 2
    # Capacity as arch_topology.c: 485 * 1416000 * 1024 // (1024 * 1800000) = 381.
    assert types["cluster0"]["capacity"] == 381 and types["cluster1"]["capacity"] == 1024
    for name, c, opps in (("cluster0", 100, A53), ("cluster1", 436, A72)):
        ty = types[name]
        assert [(p["mhz"], round(p["volt"] * 1000)) for p in ty["pstates"]] == opps
        for mhz, mv in opps:
            model = _model_uw(ty, mhz)
            assert model == pytest.approx(_formula_uw(c, mhz, mv), rel=1e-12)
            # The kernel's integer µW (drivers/opp/of.c) is the formula truncated.
            kernel = energymodel.kernel_power_uw(c, mhz, mv * 1000)
            assert kernel - 1e-6 <= model < kernel + 1
    # One frequency domain and one LLC per cluster (opp-shared; cpu-map clusters).
    assert [r["freq_domain"] for r in rows] == [0, 0, 0, 0, 1, 1]
    assert [r["llc"] for r in rows] == [0, 0, 0, 0, 1, 1]
    assert len({r["core"] for r in rows}) == 6
    assert types["cluster1"]["freq_transition_us"] == 40.0


@needs_real
def test_rk3399_matches_the_plain_json_where_they_overlap() -> None:
    em = json.loads((DT / "rk3399-em.json").read_text())
    types = energymodel.load_devicetree(RK3399).machine().machine["types"]
    for key, name in (("cluster0_a53", "cluster0"), ("cluster1_a72", "cluster1")):
        ref = em[key]
        ty = types[name]
        ours = {p["mhz"]: p for p in ty["pstates"]}
        overlap = [(mhz, mv) for mhz, mv in ref["opp_mhz_mv"] if mhz in ours]
        # cluster1's 408-816 MHz OPPs are commented out in the JSON's source tree.
        assert len(overlap) == len(ref["opp_mhz_mv"]) >= 5
        c = ref["dynamic_power_coefficient_uW_per_MHz_V2"]
        assert ty["power"]["dyn_w_per_v2ghz"] == c / 1000
        for mhz, mv in overlap:
            assert round(ours[mhz]["volt"] * 1000) == mv
            assert _model_uw(ty, mhz) == pytest.approx(_formula_uw(c, mhz, mv), rel=1e-12)
    assert sorted(em["cluster0_a53"]["cpus"] + em["cluster1_a72"]["cpus"]) == list(range(6))


@needs_real
def test_written_machine_validates_and_runs(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rk3399.toml"
    assert cli.main(["machine", "from-devicetree", *map(str, RK3399), "--out", str(out)]) == 0
    text = out.read_text()
    assert "1800 MHz 1200 mV 1130112 uW" in text  # the kernel's table, in the header
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'name = "rk"\nduration_s = 0.05\n' + text + '\n[[workload.programs]]\nname = "p"\n'
        'kind = "parallel"\nthreads = 6\nwork_ms = 10\n'
    )
    assert cli.main(["validate", str(scenario)]) == 0
    assert "ok: rk (6 cpus, 1 programs)" in capsys.readouterr().out
    res = hetsched.run(scenario)
    # A busy A72 at 1800 MHz draws the kernel's 1.130112 W: energy = P × busy time.
    big = res.cpus[res.cpus["type"] == "cluster1"].iloc[0]
    busy_s = big["utilization"] * res.summary["sim_end_s"]
    assert big["energy_j"] == pytest.approx(1.130112 * busy_s, rel=1e-6)


@needs_real
def test_lisa_platforms() -> None:
    juno = energymodel.load_lisa(REAL / "lisa" / "juno.json").machine()
    rows = juno.machine["cpus"]
    # Juno's clusters are not contiguous: little 0, 3, 4, 5; big 1, 2.
    assert [r["type"] for r in rows] == ["little", "big", "big", "little", "little", "little"]
    assert [r["freq_domain"] for r in rows] == [0, 1, 1, 0, 0, 0]
    types = juno.machine["types"]
    assert (types["big"]["capacity"], types["little"]["capacity"]) == (1024, 447)
    # A busy CPU at its one P-state draws cpu.nrg_max mW.
    assert _model_uw(types["big"], 1000) == pytest.approx(616_000)
    assert _model_uw(types["little"], 1000) == pytest.approx(93_000)
    assert any("cluster.nrg_max (57) left out" in w for w in juno.warnings)
    hikey = energymodel.load_lisa(REAL / "lisa" / "hikey960.json").machine()
    assert [r["type"] for r in hikey.machine["cpus"]] == ["little"] * 4 + ["big"] * 4
    assert hikey.machine["types"]["big"]["capacity"] == 1023
    for m in (juno, hikey):
        hetsched.loads('name = "l"\nduration_s = 0.01\n' + m.toml())


@needs_real
def test_sysfs_with_a_device_tree_energy_model(tmp_path: Path) -> None:
    root = write_rk3399_sys(tmp_path / "rk")
    em = energymodel.load_devicetree(RK3399)
    m = sysfs.machine_from_sysfs(root, energy_model=em)
    types = m.machine["types"]
    rows = m.machine["cpus"]
    # core_id 0 on cpu0 and cpu4 (arm64 numbers it per cluster): still 6 cores.
    assert len({r["core"] for r in rows}) == 6
    assert any("thread_siblings_list used" in w for w in m.warnings)
    assert [r["type"] for r in rows] == ["little"] * 4 + ["big"] * 2
    assert [r["llc"] for r in rows] == [0, 0, 0, 0, 1, 1]  # the L2 of each cluster
    assert types["big"]["power"]["dyn_w_per_v2ghz"] == 0.436
    assert [(p["mhz"], p["volt"]) for p in types["big"]["pstates"]][-1] == (1800, 1.2)
    assert not any("P-states from the energy model" in w for w in m.warnings)
    # A LISA model on the same /sys: power fitted at the highest sysfs P-state.
    lisa = tmp_path / "rk-lisa.json"
    lisa.write_text(json.dumps({
        "nrg_model": {"big": {"cpu": {"cap_max": 1024, "nrg_max": 1130}},
                      "little": {"cpu": {"cap_max": 381, "nrg_max": 179}}},
        "clusters": {"big": [4, 5], "little": [0, 1, 2, 3]},
    }))  # fmt: skip
    m2 = sysfs.machine_from_sysfs(root, energy_model=energymodel.load_lisa(lisa))
    assert _model_uw(m2.machine["types"]["big"], 1800) == pytest.approx(1_130_000)
    assert _model_uw(m2.machine["types"]["little"], 1416) == pytest.approx(179_000)


def test_energy_model_must_cover_every_cpu(tmp_path: Path, capsys) -> None:
    root = write_rk3399_sys(tmp_path / "rk")
    lisa = tmp_path / "little-only.json"
    lisa.write_text(json.dumps({
        "nrg_model": {"little": {"cpu": {"cap_max": 381, "nrg_max": 179}}},
        "clusters": {"little": [0, 1, 2, 3]},
    }))  # fmt: skip
    assert cli.main(["machine", "from-sysfs", str(root), "--energy-model", str(lisa)]) == 2
    err = capsys.readouterr().err
    assert "the energy model covers cpu{0-3} but" in err and "also has cpu{4-5}" in err
    assert "Traceback" not in err


def test_device_tree_parser_edge_cases(tmp_path: Path) -> None:
    dts = tmp_path / "soc.dts"
    dts.write_text(
        """/dts-v1/;
#include <dt-bindings/clock/foo.h>
/ {
    #address-cells = <2>;
    cpus {
        #address-cells = <1>;
        cpu-map { cluster0 { core0 { thread0 { cpu = <&c0>; }; thread1 { cpu = <&c1>; }; }; }; };
        c0: cpu@0 { device_type = "cpu"; reg = <0x0>; operating-points-v2 = <&t>;
                    clocks = <&cru ARMCLKL>; #cooling-cells = <2>; enable-method = "psci";
                    dynamic-power-coefficient = <200>; capacity-dmips-mhz = <1024>; };
        c1: cpu@1 { device_type = "cpu"; reg = <0x1>; operating-points-v2 = <&t>;
                    dynamic-power-coefficient = <200>; capacity-dmips-mhz = <1024>; };
    };
    t: opp-table { compatible = "operating-points-v2"; /* not shared */
        opp-1 { opp-hz = /bits/ 64 <1000000000>; opp-microvolt = <900000>; };
        opp-0 { opp-hz = /bits/ 64 <500000000>; opp-microvolt = <700000 650000 950000>; };
    };
};
"""
    )
    m = energymodel.load_devicetree([dts]).machine()
    rows = m.machine["cpus"]
    assert rows[0]["core"] == rows[1]["core"]  # two threads of one core
    assert rows[0]["freq_domain"] != rows[1]["freq_domain"]  # no opp-shared
    (ty,) = m.machine["types"].values()
    assert ty["pstates"] == [{"mhz": 500, "volt": 0.7}, {"mhz": 1000, "volt": 0.9}]
    assert any("includes not followed" in w and "soc.dts:2" in w for w in m.warnings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cpus { };", "/cpus has no cpu@N nodes"),
        ("cpus { cpu@0 { capacity-dmips-mhz = <5>; }; };", "no operating-points-v2"),
        (
            "cpus { cpu@0 { operating-points-v2 = <&t>; capacity-dmips-mhz = <DMIPS>; }; };"
            ' t: opp { compatible = "operating-points-v2"; };',
            "capacity-dmips-mhz: expected one number",
        ),
        ("cpus { cpu@0 { operating-points-v2 = <&nope>; }; };", "&nope: no such node"),
        ("cpus { cpu@0 { x = <1>;", "never closed"),
        ("cpus { cpu@0 { x", "never closed"),
        ("&missing { x; };", "&missing: no node has this label"),
        (
            "cpus { cpu@0 { operating-points-v2 = <&t>; }; }; t: opp { compatible = "
            '"operating-points-v2"; o { opp-hz = /bits/ 64 <1000>; }; };',
            "no opp-microvolt",
        ),
    ],
)
def test_bad_device_trees_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.dtsi"
    f.write_text(text)
    with pytest.raises(energymodel.EnergyModelError, match=message):
        energymodel.load_devicetree([f])


def test_bad_lisa_files_are_clear_errors(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text('{"nrg_model": {"big": {"cpu": {"cap_max": 2000, "nrg_max": 5}}}, '
                 '"clusters": {"big": [0]}}')  # fmt: skip
    with pytest.raises(
        energymodel.EnergyModelError, match=r"big\.cpu\.cap_max: expected 1\.\.1024"
    ):
        energymodel.load_lisa(f)
    f.write_text('{"nrg_model": {"big": {"cpu": {"cap_max": 100, "nrg_max": 5}}}}')
    with pytest.raises(energymodel.EnergyModelError, match='no "clusters"'):
        energymodel.load_lisa(f)
    assert cli.main(["machine", "from-lisa", str(f)]) == 2
