"""Chameleon's Table 2 platforms as scenario presets and the rows that run
them (Figures 4, 6 and 7) at quick scale: the presets are the builder's
output, the verdicts are computed, and the numbers behind them come out of
the runs as the paper describes."""

from __future__ import annotations

from pathlib import Path

import pytest

import hetsched
from hetsched.reproduce import chameleon as C
from hetsched.reproduce import registry
from hetsched.reproduce.chameleon_programs import PARALLEL
from hetsched.reproduce.framework import VERDICTS

from conftest import ROOT


@pytest.mark.parametrize("config", C.CONFIGS)
def test_preset_files_are_the_builders(config: str) -> None:
    path = ROOT / "scenarios" / f"chameleon-{config}.toml"
    assert path.read_text() == C.preset_toml(config)
    from_file = hetsched.run(hetsched.load(path)).summary
    built = hetsched.run(C.preset_scenario(config)).summary
    assert from_file["trace_hash"] == built["trace_hash"]


def test_platforms_are_table_2() -> None:
    cmp_ = hetsched.run(C.f4_scenario("cmp", "blackscholes", "quick"))
    assert len(cmp_.cpus) == 24
    for config, fast in (("acmp3", 3), ("acmp6", 6)):
        m = C.platform_scenario(config, [], name="x")["machine"]
        types = {c["type"]: c["cores"] for c in m["clusters"]}
        assert types == {"fast": fast, "base": 12}
        assert m["types"]["fast"]["class_speedup"] == C.speedups(config)
    dyn = C.platform_scenario("dynamic", [], name="x")
    assert [f["level"] for f in dyn["dynamic"]["fusion"]] == [2, 4]
    assert dyn["scheduler"].startswith("chameleon[")
    with pytest.raises(ValueError, match="unknown configuration"):
        C.platform_scenario("acmp9", [], name="x")


def test_rows_are_registered() -> None:
    for rid in ("chameleon-f4", "chameleon-f6", "chameleon-f7"):
        assert rid in registry
        assert registry[rid].plot is not None


def test_f4_chameleon_equals_the_cmp_and_static_programs_lose_on_the_acmps(
    tmp_path: Path,
) -> None:
    out = C.chameleon_f4("quick")
    assert all(r.verdict in VERDICTS for r in out.rows)
    t = out.data
    for prog in PARALLEL:
        assert t[prog]["dynamic"] == pytest.approx(t[prog]["cmp"], rel=0.03)
    # A static split waits for the slow CPUs: blackscholes on ACMP-3 runs
    # 24/15 as long (one thread per CPU, the 12 slow ones set the time).
    assert t["blackscholes"]["acmp3"] / t["blackscholes"]["cmp"] == pytest.approx(24 / 15)
    # Dynamically balanced programs follow capacity (12 + 3 x 2 = 18 CPUs).
    assert t["fibonacci"]["acmp3"] / t["fibonacci"]["cmp"] == pytest.approx(24 / 18, rel=0.03)
    verdicts = {r.claim: r.verdict for r in out.rows}
    assert verdicts["blackscholes: ACMP-3 slower than the CMP"] == "match"
    C.plot_f4(out.data, tmp_path / "f4.png")
    assert (tmp_path / "f4.png").stat().st_size > 0


def test_f6_objects_and_notification(tmp_path: Path) -> None:
    out = C.chameleon_f6("quick")
    assert [r.verdict for r in out.rows] == ["match"] * 5
    d = out.data
    # Two N-Queens: a 4-CPU object each (2x); four: 2-CPU objects (1.5x).
    assert d["2"]["nqueen"] == pytest.approx(2.0, rel=0.01)
    assert d["4"]["nqueen"] == pytest.approx(1.5, rel=0.01)
    # The objects stay on the 8 CPUs the parallel program leaves free.
    for col in d.values():
        for iv in col["intervals"]:
            assert set(iv["cpus"]) <= set(range(16, 24))
    # Without notification the two 2-CPU objects do not grow when the 4-CPU
    # one's thread exits; with it, both do.
    star, three = d["3*"], d["3"]
    assert not [iv for iv in star["intervals"] if iv["from_s"] >= star["ends"][0]]
    grown = [iv for iv in three["intervals"] if iv["from_s"] >= three["ends"][0]]
    assert sorted(len(iv["cpus"]) for iv in grown) == [4, 4]
    C.plot_f6(d, tmp_path / "f6.png")
    assert (tmp_path / "f6.png").stat().st_size > 0


def test_f7_tax_orders_the_nqueens_and_the_parallel_program(tmp_path: Path) -> None:
    out = C.chameleon_f7("quick")
    assert all(r.verdict in VERDICTS for r in out.rows)
    for binding in C.F7_BINDINGS:
        d = out.data[binding]
        q = [d[f"tax {t:g}"]["nqueen"] for t in C.F7_TAXES]
        p = [d[f"tax {t:g}"]["parallel"] for t in C.F7_TAXES]
        # A lower tax: the N-Queens borrow more, the parallel program loses.
        assert q[0] > q[1] > q[2] - 1e-9
        assert p[0] < p[2]
    db = out.data["mandelbrot-db"]
    assert db["tax 0.01"]["nqueen"] == pytest.approx(1.97, rel=0.05)
    assert db["tax 100"]["nqueen"] == pytest.approx(1.0, rel=0.05)
    # ACMP-3: each N-Queen alone on a fast CPU (2x).
    assert db["ACMP-3"]["nqueen"] == pytest.approx(2.0, rel=1e-3)
    C.plot_f7(out.data, tmp_path / "f7.png")
    assert (tmp_path / "f7.png").stat().st_size > 0


def test_mix_bad_input() -> None:
    with pytest.raises(ValueError, match="3 fast CPUs for 4 N-Queens"):
        C.mix_scenario("acmp3", nqueens=4)
    scn = C.f6_scenario(2, scale="quick")
    scn["scheduler"] = scn["scheduler"].replace("16-23", "16-30")
    with pytest.raises(hetsched.ScenarioError, match=r"object_cpus\]: cpu 30 does not exist"):
        hetsched.run(scn)
