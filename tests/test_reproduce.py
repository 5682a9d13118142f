"""The reproduction framework: registry, runner, error rows, scorecard, and li-f9's arithmetic."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hetsched import Results, api
from hetsched.reproduce import (
    Outcome,
    Row,
    UnknownReproductionError,
    li,
    registry,
    reproduction,
    rows_table,
    run_reproductions,
    scorecard_markdown,
)


@pytest.fixture
def isolated_registry() -> Iterator[dict]:
    """An empty registry for the test; the real one is restored afterwards."""
    saved = dict(registry)
    registry.clear()
    yield registry
    registry.clear()
    registry.update(saved)


def _row(rid: str, verdict: str = "match", **kw: Any) -> Row:
    fields = {
        "claim": f"claim of {rid}",
        "published": 1.0,
        "simulated": 1.0,
        "tolerance": "±1%",
        "verdict": verdict,
        "note": "",
    }
    fields.update(kw)
    return Row(id=rid, **fields)


def test_li_f9_is_registered() -> None:
    assert "li-f9" in registry
    assert registry["li-f9"].plot is not None


def test_a_failing_reproduction_becomes_an_error_row_and_the_others_run(isolated_registry):
    ran: list[str] = []

    @reproduction("a", paper="P", title="first")
    def a(scale: str) -> list[Row]:
        ran.append("a")
        return [_row("a")]

    @reproduction("b", paper="P", title="second, broken")
    def b(scale: str) -> list[Row]:
        ran.append("b")
        raise ZeroDivisionError("division by zero in the model")

    @reproduction("c", paper="P", title="third")
    def c(scale: str) -> list[Row]:
        ran.append("c")
        return [_row("c", "trend"), _row("c", "differs")]

    rows = run_reproductions(["all"], scale="quick")
    assert ran == ["a", "b", "c"]
    assert [(r.id, r.verdict) for r in rows] == [
        ("a", "match"),
        ("b", "error"),
        ("c", "trend"),
        ("c", "differs"),
    ]
    assert rows[1].claim == "second, broken"
    assert "ZeroDivisionError: division by zero in the model" in rows[1].note


def test_a_row_with_a_made_up_verdict_is_an_error(isolated_registry) -> None:
    @reproduction("x", paper="P", title="t")
    def x(scale: str) -> list[Row]:
        return [_row("x", verdict="good enough")]

    [row] = run_reproductions(["x"])
    assert row.verdict == "error" and "good enough" in row.note


def test_unknown_id_fails_before_anything_runs(isolated_registry) -> None:
    ran: list[str] = []

    @reproduction("a", paper="P", title="t")
    def a(scale: str) -> list[Row]:
        ran.append("a")
        return []

    with pytest.raises(UnknownReproductionError, match="'nope'; known: a"):
        run_reproductions(["a", "nope"])
    assert ran == []


def test_ids_are_deduplicated_and_scale_is_checked(isolated_registry) -> None:
    scales: list[str] = []

    @reproduction("a", paper="P", title="t")
    def a(scale: str) -> list[Row]:
        scales.append(scale)
        return [_row("a")]

    assert len(run_reproductions(["a", "all", "a"], scale="quick")) == 1
    assert scales == ["quick"]
    with pytest.raises(ValueError, match="scale"):
        run_reproductions(["a"], scale="huge")


def test_registering_an_id_twice_is_refused(isolated_registry) -> None:
    reproduction("a", paper="P", title="t")(lambda scale: [])
    with pytest.raises(ValueError, match="twice"):
        reproduction("a", paper="P", title="t")(lambda scale: [])


def test_plots_receive_the_outcome_data(isolated_registry, tmp_path: Path) -> None:
    seen: list[Any] = []

    def plot(data: Any, path: Path) -> None:
        seen.append(data)
        path.write_bytes(b"png")

    @reproduction("p", paper="P", title="t", plot=plot)
    def p(scale: str) -> Outcome:
        return Outcome(rows=[_row("p")], data={"x": [1, 2]})

    @reproduction("q", paper="P", title="t", plot=plot)
    def q(scale: str) -> list[Row]:
        return [_row("q")]

    run_reproductions(["p", "q"], plots_dir=tmp_path / "plots")
    assert seen[0] == {"x": [1, 2]}
    assert seen[1] == [_row("q")]  # without data the plot gets the rows
    assert sorted(f.name for f in (tmp_path / "plots").iterdir()) == ["p.png", "q.png"]


def test_a_broken_plot_keeps_the_rows(isolated_registry, tmp_path: Path) -> None:
    def plot(data: Any, path: Path) -> None:
        raise RuntimeError("no ink")

    @reproduction("p", paper="P", title="t", plot=plot)
    def p(scale: str) -> list[Row]:
        return [_row("p")]

    rows = run_reproductions(["p"], plots_dir=tmp_path)
    assert [r.verdict for r in rows] == ["match", "error"]
    assert "no ink" in rows[1].note


def test_tables_and_scorecard() -> None:
    rows = [
        _row("li-f9", claim="a | b", published=3.3, simulated=3.4123),
        _row("x", "differs", note="the model lacks SMT"),
    ]
    text = rows_table(rows)
    assert text.splitlines()[0].split() == [
        "id",
        "claim",
        "published",
        "simulated",
        "tolerance",
        "verdict",
        "kind",
    ]
    assert "3.41" in text and "the model lacks SMT" in text
    assert text.endswith("2 predictions: 1 match, 1 differ; plus 0 calibration points "
                         "and 0 consistency checks, listed separately.")  # fmt: skip
    md = scorecard_markdown(rows)
    assert md.startswith("# Validation scorecard")
    assert "2 predictions: 1 match, 1 differ; plus 0 calibration points" in md
    assert "| li-f9 | a \\| b | 3.3 | 3.41 | ±1% | **match** |  |" in md


def test_row_json_has_no_nan() -> None:
    d = _row("a", simulated=math.nan).to_dict()
    assert d["simulated"] is None
    json.dumps(d, allow_nan=False)


# li-f9: the measurement, with the simulator replaced by made-up per-thread numbers.


def _li_results(run_s: list[float], work_ms: list[float], big_share: list[float]) -> Results:
    tasks = [
        {
            "task": i,
            "program": "spin",
            "run_s": r,
            "scaled_run_s": r,
            "migrations": 0,
            "work_ms": w,
            "run_s_by_type": {"big": r * f, "small": r * (1 - f)},
        }
        for i, (r, w, f) in enumerate(zip(run_s, work_ms, big_share, strict=True))
    ]
    return Results(json.dumps({"summary": {}, "tasks": tasks}))


class FakeSimulator:
    """Stands in for ``api.run``: records the scenarios, returns preset results."""

    def __init__(self) -> None:
        self.scenarios: list[dict] = []
        self.results: Results | None = None

    def __call__(self, scenario: dict, **kw: Any) -> Results:
        self.scenarios.append(scenario)
        assert self.results is not None
        return self.results


@pytest.fixture
def sim(monkeypatch) -> FakeSimulator:
    fake = FakeSimulator()
    monkeypatch.setattr(api, "run", fake)
    return fake


def test_li_f9_scenario_is_the_papers_machine(sim: FakeSimulator) -> None:
    sim.results = _li_results([20.0] * 12, [20000.0] * 12, [1.0] * 12)
    li.li_f9("quick")
    sc, adwrr = sim.scenarios
    assert sc["duration_s"] == 6.0 and sc["scheduler"] == "cfs"
    assert adwrr["scheduler"] == "a-dwrr" and adwrr["machine"] == sc["machine"]
    types = sc["machine"]["types"]
    assert (types["big"]["capacity"], types["small"]["capacity"]) == (1024, 301)
    assert sc["machine"]["tick_hz"] == 250  # the paper's 4 ms tick
    assert sum(c["cores"] for c in sc["machine"]["clusters"]) == 8
    assert sc["workload"]["programs"][0]["threads"] == 12


@pytest.mark.parametrize(
    ("run_s", "work_ms", "big_share", "verdicts"),
    [
        # equal CPU time, work 20000 vs 5882 ms -> max/min 3.40, within 15 % of 3.28
        ([20.0] * 12, [20000.0] * 6 + [5882.0] * 6, [1.0] * 6 + [0.0] * 6, ["match", "match"]),
        # equal CPU time, work only 2x apart -> the ratio misses but unequal work still shows
        ([20.0] * 12, [20000.0] * 6 + [10000.0] * 6, [1.0] * 6 + [0.5] * 6, ["match", "trend"]),
        # equal work (what A-DWRR achieves) -> the stock-Linux effect is absent
        ([20.0] * 6 + [26.0] * 6, [20000.0] * 12, [1.0] * 6 + [0.2] * 6, ["differs", "differs"]),
    ],
)
def test_li_f9_verdicts(sim: FakeSimulator, run_s, work_ms, big_share, verdicts) -> None:
    sim.results = _li_results(run_s, work_ms, big_share)
    outcome = li.li_f9("quick")
    assert isinstance(outcome, Outcome)
    cpu_row, work_row, *adwrr_rows = outcome.rows
    assert [r.claim.startswith("A-DWRR") for r in adwrr_rows] == [True, True]
    # From the Figure 9a table: TIME+ 29.04..30.16 s, work 2360..7733.
    assert cpu_row.published == pytest.approx((30.16 - 29.04) / 30.16, abs=1e-4)
    assert work_row.published == pytest.approx(7733 / 2360, abs=1e-3)
    assert work_row.simulated == pytest.approx(max(work_ms) / min(work_ms))
    assert [cpu_row.verdict, work_row.verdict] == verdicts
    assert "paper, estimated from its work column: 5 / 6 / 1" in cpu_row.note
    assert outcome.data["run_s"] == run_s


def test_li_f9_with_missing_threads_is_an_error(sim: FakeSimulator) -> None:
    sim.results = _li_results([1.0] * 3, [1.0] * 3, [1.0] * 3)
    with pytest.raises(RuntimeError, match="expected 12"):
        li.li_f9("quick")


def test_li_f9_plot_writes_a_png(tmp_path: Path) -> None:
    data = {"thread": list(range(12)), "run_s": [1.0] * 12, "work_s": [float(i) for i in range(12)]}
    path = tmp_path / "li-f9.png"
    li.plot_li_f9(data, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
