"""Row kinds (prediction, calibration, consistency), the headline that counts
predictions only, tolerance bands and trend margins."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest

from hetsched import cli
from hetsched.reproduce import (
    KINDS,
    TREND_FLOOR,
    Row,
    bound_row,
    by_paper,
    check_band,
    headline,
    li_isa,
    registry,
    reproduction,
    row_kind,
    run_reproductions,
    scorecard_markdown,
    trend_margin,
    within_row,
)
from hetsched.reproduce import aash as A
from hetsched.reproduce import patel as P


@pytest.fixture
def isolated_registry() -> Iterator[dict]:
    saved = dict(registry)
    registry.clear()
    yield registry
    registry.clear()
    registry.update(saved)


def _row(verdict: str = "match", **kw: Any) -> Row:
    fields: dict[str, Any] = {
        "id": "x",
        "claim": "c",
        "published": 1.0,
        "simulated": 1.0,
        "tolerance": "±1%",
        "verdict": verdict,
    }
    fields.update(kw)
    return Row(**fields)


CAL = ("k", "fitted to this value")


def test_kind_comes_from_the_metadata() -> None:
    assert _row().kind == "prediction"
    assert _row(calibrated_by=CAL).kind == "calibration"
    assert _row(follows_from="the 250 Hz tick").kind == "consistency"
    assert row_kind(None, None) == "prediction"
    assert set(KINDS) == {"prediction", "calibration", "consistency"}


@pytest.mark.parametrize(
    ("calibrated_by", "follows_from", "match"),
    [
        (CAL, "the tick", "not both"),
        (("k",), None, "pair"),
        (("", "why"), None, "pair"),
        ("k", None, "pair"),
        (None, "  ", "non-empty"),
    ],
)
def test_malformed_metadata_is_refused(calibrated_by, follows_from, match) -> None:
    with pytest.raises(ValueError, match=match):
        row_kind(calibrated_by, follows_from)


def test_malformed_metadata_turns_the_reproduction_into_an_error(isolated_registry) -> None:
    @reproduction("bad", paper="P", title="t")
    def bad(scale: str) -> list[Row]:
        return [_row(calibrated_by=CAL, follows_from="both")]

    rows = run_reproductions(["bad"])
    assert [r.verdict for r in rows] == ["error"]
    assert "not both" in rows[0].note


def test_a_calibration_row_is_never_counted_as_a_prediction() -> None:
    rows = [
        _row("match"),
        _row("differs"),
        _row("match", calibrated_by=CAL),
        _row("differs", calibrated_by=CAL),
        _row("match", follows_from="an input"),
    ]
    assert headline(rows) == (
        "2 predictions: 1 match, 1 differ; plus 2 calibration points "
        "and 1 consistency check, listed separately."
    )
    # Turning a prediction into a calibration moves it out of the count.
    rows[0] = _row("match", calibrated_by=CAL)
    assert headline(rows).startswith("1 predictions: 0 match, 1 differ; plus 3")


def test_headline_arithmetic_and_errors() -> None:
    rows = [_row(v) for v in ("match", "match", "trend", "differs", "error")]
    rows.append(_row("trend", follows_from="construction"))
    text = headline(rows)
    assert text == (
        "5 predictions: 2 match, 1 trend, 1 differ, 1 error; plus 0 calibration points "
        "and 1 consistency check, listed separately."
    )
    assert headline([]) == (
        "0 predictions: 0 match; plus 0 calibration points "
        "and 0 consistency checks, listed separately."
    )


def test_scorecard_lists_calibrations_and_consistency_checks_in_their_own_sections() -> None:
    rows = [
        _row("match", claim="predicted"),
        _row("match", claim="fitted", calibrated_by=("ipc", "fitted to Table 2")),
        _row("match", claim="echoed", follows_from="Table 2's duty cycles"),
    ]
    md = scorecard_markdown(rows)
    head, rest = md.split("## Predictions", 1)
    preds, rest = rest.split("## Calibration points", 1)
    cals, cons = rest.split("## Consistency checks", 1)
    assert "1 predictions: 1 match" in head
    assert "predicted" in preds and "fitted" not in preds and "echoed" not in preds
    assert "| `ipc`: fitted to Table 2 |" in cals and "echoed" not in cals
    assert "| Table 2's duty cycles |" in cons


def test_the_scorecard_counts_each_papers_predictions_apart() -> None:
    rows = [
        _row("match", id="a-1"),
        _row("differs", id="a-1"),
        _row("match", id="b-1"),
        _row("trend", id="a-2"),
        _row("match", id="a-2", calibrated_by=CAL),
        _row("match", id="b-1", follows_from="an input"),
        _row("error", id="c-1"),
    ]
    papers = {"a-1": "Paper A", "a-2": "Paper A", "b-1": "Paper B"}
    counts = dict(by_paper(rows, papers))
    assert list(counts) == ["Paper A", "Paper B", "c-1"]
    assert counts["Paper A"] == {
        "predictions": 3, "match": 1, "trend": 1, "differs": 1, "error": 0,
    }  # fmt: skip
    assert counts["Paper B"]["predictions"] == 1 and counts["Paper B"]["match"] == 1
    assert counts["c-1"]["error"] == 1
    # The registry's papers by default; the page shows one line per paper.
    md = scorecard_markdown([_row("match", id="li-f9"), _row("differs", id="li-f9")])
    head = md.split("## Predictions", 1)[0]
    (line,) = [x for x in head.splitlines() if x.startswith("| Li")]
    assert line.endswith("| 2 | 1 | 0 | 1 | 50% |")


def test_json_rows_carry_kind_and_metadata() -> None:
    d = _row(calibrated_by=CAL).to_dict()
    assert d["kind"] == "calibration"
    assert d["calibrated_by"] == {"parameter": "k", "why": "fitted to this value"}
    assert d["follows_from"] is None
    d = _row(follows_from="the tick").to_dict()
    assert (d["kind"], d["follows_from"], d["calibrated_by"]) == ("consistency", "the tick", None)
    json.dumps(d, allow_nan=False)


def test_an_absolute_band_wider_than_the_published_value_is_refused() -> None:
    with pytest.raises(ValueError, match="not narrower than the published value"):
        within_row("x", "c", 0.037, 0.005, digits=3, abs_tol=0.1)
    with pytest.raises(ValueError, match="not narrower"):
        check_band(-5.0, 5.0)
    check_band(0.0, 0.02)  # a published zero needs an absolute band
    check_band(0.06, 0.05)
    row = within_row("x", "c", 4.0, 1.0, digits=2, rel_tol=0.15, calibrated_by=CAL)
    assert (row.verdict, row.kind) == ("differs", "calibration")


def test_bound_rows() -> None:
    assert bound_row("x", "c", 0.01, 0.004, digits=4).verdict == "match"
    assert bound_row("x", "c", 0.01, 0.02, digits=4).verdict == "differs"
    assert bound_row("x", "c", 0.01, 0.02, digits=4, trend_ok=True).verdict == "trend"
    assert bound_row("x", "c", 0.01, math.nan, digits=4).verdict == "differs"


def test_trend_margin() -> None:
    assert trend_margin([1.0, 1.2, 1.1]) == pytest.approx(0.2)
    assert trend_margin([1.0, 1.0, 1.0], floor=TREND_FLOOR) == TREND_FLOOR
    assert trend_margin([0.0, 3.0, 1.0], averaged=9) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least one sample"):
        trend_margin([])
    with pytest.raises(ValueError, match="averaged"):
        trend_margin([1.0], averaged=0)


def test_an_ordering_must_clear_the_noise_at_every_step() -> None:
    falling = {1: 0.15, 2: 0.08, 4: 0.04, 8: 0.02}
    flat_tail = {1: 0.15, 2: 0.036, 4: 0.036, 8: 0.036}
    assert li_isa.falls_beyond_noise([falling])[0]
    assert not li_isa.falls_beyond_noise([flat_tail])[0]  # ">=" on a flat curve is no fall
    noisy = [falling, {t: v + 0.05 for t, v in falling.items()}]
    holds, _mean, noise = li_isa.falls_beyond_noise(noisy)
    assert noise == pytest.approx(0.05) and not holds


def test_the_credit_spread_is_stated_where_measured_and_is_not_a_diagnosis() -> None:
    lottery = ([10.0, 20.0, 15.0], [10.0, 10.1, 10.0])
    steady = ([15.0, 15.1, 15.0], [10.0, 10.1, 10.0])
    assert A.credit_varies(*lottery)
    assert not A.credit_varies(*steady)  # Credit does not vary more than AASH
    # The spread and its reason are stated whichever way the gain misses,
    # and without a measured diagnosis the cause stays "not diagnosed".
    for sim in (-1.0, 40.0):
        row = A.speed_row("r", "c", 13.0, sim, credit=lottery[0], aash=lottery[1])
        assert A.CREDIT_PLACEMENT in row.note and "not diagnosed" in row.note
    row = A.speed_row("r", "c", 13.0, 40.0, credit=steady[0], aash=steady[1])
    assert A.CREDIT_PLACEMENT not in row.note and "not diagnosed" in row.note


def test_the_single_threaded_gain_is_diagnosed_from_the_fast_cores_idle_time(monkeypatch) -> None:
    # Two instances on 1 fast + 1 slow: under Credit the fast core's instance
    # finishes at half the time and the core then idles; AASH shares it.
    progs = [A.program("sixtrack", 1, "quick", f"s#{i}") for i in range(2)]
    vms = [{"name": "vm", "vcpus": 2, "programs": progs}]
    assert A.fast_idle_share(vms, "xen-credit", "quick", 1, 1) == pytest.approx(0.5, abs=0.02)
    assert A.fast_idle_share(vms, "aash", "quick", 1, 1) == pytest.approx(0.0, abs=1e-9)
    # The note states the measured shares, or no cause where they do not differ.
    shares = {"xen-credit": 0.49, "aash": 0.0}
    monkeypatch.setattr(A, "fast_idle_share", lambda _vms, sched, _scale: shares[sched])
    note = A.single_diagnosis({"sixtrack": vms, "mcf": vms}, "quick")
    assert "sixtrack 49% against 0%, mcf 49% against 0%" in note
    shares["xen-credit"] = 0.03
    assert A.single_diagnosis({"sixtrack": vms}, "quick") == (
        "the cause of the difference is not diagnosed"
    )


@pytest.mark.parametrize(
    ("published", "simulated", "margin", "verdict"),
    [
        (7.64, 0.17, 0.0, "trend"),  # the sign only: no longer a match
        (7.64, 5.0, 0.0, "match"),  # within half the published value
        (7.64, 0.17, 1.0, "differs"),  # the sign is inside the noise
        (19.67, 12.0, 0.0, "match"),  # 10 points
        (19.67, 9.0, 0.0, "trend"),
        (3.13, -48.3, 0.0, "differs"),
    ],
)
def test_patel_band_is_never_wider_than_half_the_value(published, simulated, margin, verdict):
    assert P._sign_row("patel-t4", "x", published, simulated, "", margin).verdict == verdict


def test_every_row_of_fast_reproductions_has_a_kind(capsys) -> None:
    ids = ["li-f9", "li-mig", "hotos-95", "chameleon-t4", "chameleon-f5"]
    assert cli.main(["reproduce", *ids, "--scale", "quick", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in rows} == set(ids)
    assert all(r["kind"] in KINDS for r in rows)
    kinds = {(r["id"], r["kind"]) for r in rows}
    # Known kinds: the 95 % cut is made of calibrated latencies; Figure 5's
    # speedups are Table 2's duty cycles; Table 4's 2-CPU proxy rows were fitted.
    assert ("hotos-95", "calibration") in kinds
    assert {r["kind"] for r in rows if r["id"] == "chameleon-f5"} == {"consistency"}
    t4 = [r for r in rows if r["id"] == "chameleon-t4"]
    assert sum(r["kind"] == "calibration" for r in t4) == 4
    assert all(r["calibrated_by"]["parameter"] for r in t4 if r["kind"] == "calibration")


def test_patel_best_savings_in_percent_is_the_platform_powers_calibration_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The rows' metadata, not the runs: every trial gets the same improvements.
    monkeypatch.setattr(P, "measure", lambda *a, **k: None)
    imp = {"savings": 20.0, "savings_w": 38.0, "performance": 5.0}
    monkeypatch.setattr(P, "improvements", lambda *a, **k: imp)
    rows = P.patel_best("quick")
    assert isinstance(rows, list)
    kinds = {r.claim.rsplit(", ", 1)[-1]: r for r in rows if "savings" in r.claim}
    # The preset's 98 W platform power was chosen from "41 W, about 22 %"; it
    # cancels in a difference of watts, not in a ratio to the control's power.
    assert kinds["%"].kind == "calibration"
    assert kinds["%"].calibrated_by is not None
    assert "platform_base_w" in kinds["%"].calibrated_by[0]
    assert kinds["W"].kind == "prediction"
