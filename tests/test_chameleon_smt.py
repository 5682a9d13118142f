"""Chameleon on SMT (§5.5, Figure 9) through the Python API: the halt
mechanism, ``chameleon[smt=on]`` and the ``chameleon-f9`` rows at quick scale;
bad input names its path."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import hetsched
from hetsched.reproduce import chameleon
from hetsched.reproduce.framework import VERDICTS


def test_f9_rows_are_computed_and_prioritise_the_largest_alone_speedups(tmp_path: Path) -> None:
    out = chameleon.chameleon_f9("quick")
    assert len(out.rows) == 4
    assert all(r.verdict in VERDICTS for r in out.rows)
    # The two programs Chameleon prioritises come from the assumed SMT
    # factors (the lowest factors are the largest alone-on-core speedups).
    weights = chameleon.f9_weights()
    want = sorted(chameleon.F9_SMT_FACTOR, key=lambda p: chameleon.F9_SMT_FACTOR[p])[:2]
    assert sorted(out.data["top"]) == sorted(want)
    assert all(weights[p] > weights[q] for p in want for q in weights if q not in want)
    for p in want:
        assert out.data["alone"]["chameleon"][p] >= 0.95
        assert out.data["perf"]["chameleon"][p] > out.data["perf"]["cfs"][p]
    # Under Chameleon the other four shared their cores while all six ran.
    for p in chameleon.F9_PROGRAMS:
        if p not in want:
            assert out.data["alone"]["chameleon"][p] < 0.1
    chameleon.plot_f9(out.data, tmp_path / "f9.png")
    assert (tmp_path / "f9.png").stat().st_size > 0


def test_f9_chameleon_run_halts_siblings_without_proxies() -> None:
    res = hetsched.run(chameleon.f9_scenario("chameleon"))
    recs = res.reconfigs
    assert len(recs) > 0 and set(recs["mechanism"]) == {"halt"}
    px = res.proxies
    assert float(px["ipis_handled"].sum()) == 0.0
    assert float(px["proxied_s"].sum()) == 0.0
    assert float(px["halted_s"].sum()) > 0.0
    # Deterministic: the same scenario gives the same results.
    again = hetsched.run(chameleon.f9_scenario("chameleon"))
    assert list(again.programs["completion_s"]) == list(res.programs["completion_s"])


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        (
            lambda s: s["workload"]["programs"][1].update(smt_factor=0.0),
            "workload.programs[1].smt_factor",
        ),
        (lambda s: s["dynamic"].update(halt_exit_us=-5.0), "dynamic.halt_exit_us"),
        (lambda s: s["dynamic"]["fusion"][0].update(level=4), "dynamic.fusion[0].level"),
        (lambda s: s["dynamic"].update(mechanism="nap"), "dynamic.mechanism"),
    ],
)
def test_bad_smt_input_names_its_path(patch, path: str) -> None:
    scn = copy.deepcopy(chameleon.f9_scenario("cfs"))
    patch(scn)
    with pytest.raises(hetsched.ScenarioError) as e:
        hetsched.run(scn)
    assert str(e.value).startswith(path), str(e.value)


def test_smt_mode_needs_hyperthreads() -> None:
    scn = chameleon.f9_scenario("chameleon")
    scn["machine"]["clusters"][0]["smt"] = 1
    scn.pop("dynamic")
    with pytest.raises(hetsched.HetschedError, match=r"chameleon\[smt\].*no SMT siblings"):
        hetsched.run(scn)
