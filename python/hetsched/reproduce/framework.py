"""The machinery of reproductions: registry, result rows, verdicts, runner, scorecard.

A reproduction re-creates one published experiment in simulation and returns
one :class:`Row` per published claim, with the published value beside the
simulated one. Its verdict is computed, never typed in:

- ``match``: the simulated value is within the stated tolerance;
- ``trend``: it is not, but the ordering or sign the paper reports holds
  (the reproduction computes that and passes ``trend_ok``);
- ``differs``: neither; the row's ``note`` says what the model lacks;
- ``error``: the reproduction itself failed (set by the runner).

Each row also has a *kind*, computed from metadata given where the row is
defined, never typed in as a label:

- ``prediction``: no metadata; nothing in the model was set from this
  number or from one that fixes it;
- ``calibration``: ``calibrated_by=("parameter", "why")`` names the model
  parameter that was fitted to this published number (or to one that fixes it);
- ``consistency``: ``follows_from="..."`` says which input or construction
  the simulated value follows from, so it cannot test the model.

Only predictions count in the scorecard's headline; the other two kinds are
reported in their own sections.

Register one with the :func:`reproduction` decorator::

    @reproduction("li-f9", paper="Li et al., ...", title="...", plot=plot_fn)
    def li_f9(scale: str) -> list[Row] | Outcome: ...

``scale`` is ``"full"`` (the paper's durations) or ``"quick"`` (shorter runs
for tests). A reproduction that wants a figure returns :class:`Outcome` with
the data its ``plot(data, path)`` function draws.
"""

from __future__ import annotations

import dataclasses
import math
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._text import number, table

__all__ = [
    "KINDS",
    "SCALES",
    "TREND_FLOOR",
    "VERDICTS",
    "Outcome",
    "Reproduction",
    "Row",
    "UnknownReproductionError",
    "bound_row",
    "by_paper",
    "check_band",
    "headline",
    "registry",
    "reproduction",
    "resolve_ids",
    "row_kind",
    "rows_table",
    "run_reproductions",
    "scorecard_markdown",
    "tolerance_text",
    "trend_margin",
    "verdict_trend",
    "verdict_within",
    "within_row",
]

SCALES = ("full", "quick")
VERDICTS = ("match", "trend", "differs", "error")
KINDS = ("prediction", "calibration", "consistency")


def row_kind(calibrated_by: tuple[str, str] | None, follows_from: str | None) -> str:
    """The kind of a row from its metadata (see the module doc).

    ``calibrated_by`` must be a (parameter, why) pair of non-empty strings and
    ``follows_from`` a non-empty string; a row cannot be both.
    """
    if calibrated_by is not None:
        if (
            not isinstance(calibrated_by, tuple)
            or len(calibrated_by) != 2
            or not all(isinstance(x, str) and x.strip() for x in calibrated_by)
        ):
            raise ValueError(
                f"calibrated_by must be a (parameter, why) pair of non-empty strings, "
                f"got {calibrated_by!r}"
            )
        if follows_from is not None:
            raise ValueError(
                "a row is either a calibration (calibrated_by) or a consistency check "
                "(follows_from), not both"
            )
        return "calibration"
    if follows_from is not None:
        if not isinstance(follows_from, str) or not follows_from.strip():
            raise ValueError(f"follows_from must be a non-empty string, got {follows_from!r}")
        return "consistency"
    return "prediction"


@dataclass
class Row:
    """One published claim beside its simulated counterpart."""

    id: str
    claim: str
    published: float | str | None
    simulated: float | str | None
    tolerance: str
    verdict: str
    note: str = ""
    #: ``(parameter, why)``: a model parameter was fitted to this number.
    calibrated_by: tuple[str, str] | None = None
    #: The input or construction the simulated value follows from.
    follows_from: str | None = None

    @property
    def kind(self) -> str:
        """``prediction``, ``calibration`` or ``consistency``, from the metadata."""
        return row_kind(self.calibrated_by, self.follows_from)

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dict (a NaN value becomes None), with its
        ``kind``, the calibrated ``parameter`` (and why) or the input it
        ``follows_from``."""
        d = dataclasses.asdict(self)
        for key in ("published", "simulated"):
            if isinstance(d[key], float) and not math.isfinite(d[key]):
                d[key] = None
        d["kind"] = self.kind
        cal = d.pop("calibrated_by")
        d["calibrated_by"] = {"parameter": cal[0], "why": cal[1]} if cal is not None else None
        return d


@dataclass
class Outcome:
    """What a reproduction returns when it also has data to plot."""

    rows: list[Row]
    data: Any = None


PlotFn = Callable[[Any, Path], None]
ReproFn = Callable[[str], "list[Row] | Outcome"]


@dataclass
class Reproduction:
    """A registered reproduction."""

    id: str
    paper: str
    title: str
    fn: ReproFn
    plot: PlotFn | None = None


class UnknownReproductionError(ValueError):
    """An id that no reproduction is registered under."""


#: Every registered reproduction, by id, in registration order.
registry: dict[str, Reproduction] = {}


def reproduction(
    id: str, *, paper: str, title: str, plot: PlotFn | None = None
) -> Callable[[ReproFn], ReproFn]:
    """Register ``fn(scale) -> list[Row] | Outcome`` under ``id``."""

    def register(fn: ReproFn) -> ReproFn:
        if id in registry:
            raise ValueError(f"reproduction {id!r} is registered twice")
        registry[id] = Reproduction(id=id, paper=paper, title=title, fn=fn, plot=plot)
        return fn

    return register


def verdict_within(
    published: float,
    simulated: float,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    trend_ok: bool = False,
) -> str:
    """``"match"`` if ``simulated`` is within tolerance of ``published``,
    else ``"trend"`` if ``trend_ok``, else ``"differs"``.

    The allowed distance is the larger of ``abs_tol`` and
    ``rel_tol × |published|`` (give at least one). A NaN never matches.
    """
    if rel_tol is None and abs_tol is None:
        raise ValueError("verdict_within needs rel_tol or abs_tol")
    if (rel_tol is not None and rel_tol < 0) or (abs_tol is not None and abs_tol < 0):
        raise ValueError("tolerances must not be negative")
    allowed = max(abs_tol or 0.0, (rel_tol or 0.0) * abs(published))
    distance = abs(simulated - published)
    if not math.isnan(distance) and distance <= allowed:
        return "match"
    return "trend" if trend_ok else "differs"


def within_row(
    rid: str,
    claim: str,
    published: float,
    simulated: float,
    *,
    digits: int,
    rel_tol: float | None = None,
    abs_tol: float | None = None,
    trend_ok: bool = False,
    note: str = "",
    calibrated_by: tuple[str, str] | None = None,
    follows_from: str | None = None,
) -> Row:
    """A claim that is a number within a tolerance: the row's tolerance text
    and its :func:`verdict_within` verdict come from the same ``rel_tol`` /
    ``abs_tol``; the simulated value is shown rounded to ``digits``.

    An absolute band wider than a published non-zero value is refused
    (``ValueError``): it would let a result of the other sign, or zero, match.
    """
    check_band(published, abs_tol)
    return Row(
        id=rid,
        claim=claim,
        published=published,
        simulated=round(simulated, digits),
        tolerance=tolerance_text(rel_tol, abs_tol),
        verdict=verdict_within(published, simulated, rel_tol, abs_tol, trend_ok),
        note=note,
        calibrated_by=calibrated_by,
        follows_from=follows_from,
    )


def bound_row(
    rid: str,
    claim: str,
    bound: float,
    simulated: float,
    *,
    digits: int,
    trend_ok: bool = False,
    note: str = "",
    calibrated_by: tuple[str, str] | None = None,
    follows_from: str | None = None,
) -> Row:
    """A claim that is an upper bound the paper states ("differs at most by
    1%"): ``match`` when ``simulated ≤ bound``, else ``trend`` if
    ``trend_ok``, else ``differs``. Only for bounds the paper itself gives;
    a measured value is checked with :func:`within_row`."""
    ok = not math.isnan(simulated) and simulated <= bound
    return Row(
        id=rid,
        claim=claim,
        published=bound,
        simulated=round(simulated, digits),
        tolerance=f"≤ {bound:g}",
        verdict="match" if ok else ("trend" if trend_ok else "differs"),
        note=note,
        calibrated_by=calibrated_by,
        follows_from=follows_from,
    )


def check_band(published: float, abs_tol: float | None) -> None:
    """Refuse an absolute tolerance wider than a published non-zero value
    (``docs/reproducing.md``, Tolerances). A published zero needs an
    absolute band, and any width is allowed for it."""
    if abs_tol is not None and published != 0 and abs_tol >= abs(published):
        raise ValueError(
            f"abs_tol {abs_tol:g} is not narrower than the published value {published:g}; "
            "use rel_tol, or an absolute band narrower than the value"
        )


#: The smallest relative change reported as a trend when the seeds show no
#: noise (a deterministic model): the papers give their speedups to two
#: significant digits (1.2, 2.1, 5.3 %), so a change under 1 % of the value is
#: below what their figures resolve.
TREND_FLOOR = 0.01


def trend_margin(samples: Sequence[float], floor: float = 0.0, averaged: int = 1) -> float:
    """The margin a trend must clear: the run-to-run noise of the compared
    value, or ``floor`` if larger. The noise is the spread (max − min) of one
    quantity over a few seeds (``samples``, one run each); when the compared
    value is a mean over ``averaged`` runs, its noise is that spread over
    √averaged (the spread of 3 runs is about 1.7 standard deviations, so this
    is about 1.7 standard errors of the mean). A change no larger than the
    margin is not reported as an ordering."""
    if not samples:
        raise ValueError("trend_margin needs at least one sample")
    if averaged < 1:
        raise ValueError(f"averaged must be at least 1, got {averaged}")
    return max(floor, (max(samples) - min(samples)) / math.sqrt(averaged))


def verdict_trend(holds: bool) -> str:
    """Verdict of a claim that is only an ordering or a sign ("gets slower as
    T grows"): ``"match"`` when the computed ordering holds, else
    ``"differs"``."""
    return "match" if holds else "differs"


def tolerance_text(rel_tol: float | None = None, abs_tol: float | None = None) -> str:
    """The tolerance of :func:`verdict_within` for a table: ``±15%``, ``±0.1``."""
    parts = []
    if rel_tol is not None:
        parts.append(f"±{100 * rel_tol:g}%")
    if abs_tol is not None:
        parts.append(f"±{abs_tol:g}")
    return " or ".join(parts) or "-"


def resolve_ids(ids: Iterable[str]) -> list[str]:
    """Expand ``all`` and check every id, before anything runs."""
    out: list[str] = []
    for rid in ids:
        chosen = list(registry) if rid == "all" else [rid]
        for r in chosen:
            if r not in registry:
                known = ", ".join(registry) or "(none)"
                raise UnknownReproductionError(f"unknown reproduction {r!r}; known: {known}")
            if r not in out:
                out.append(r)
    return out


def run_reproductions(
    ids: Iterable[str],
    scale: str = "full",
    plots_dir: str | Path | None = None,
    on_done: Callable[[Reproduction, list[Row]], None] | None = None,
) -> list[Row]:
    """Run the reproductions ``ids`` (``"all"`` for every one) and collect their rows.

    A reproduction that raises yields a single row with verdict ``"error"`` and
    the exception in ``note``; the others still run. A plot that fails adds an
    ``"error"`` row after the reproduction's own rows. With ``plots_dir``, each
    reproduction that has a plot writes ``<plots_dir>/<id>.png``, its own
    figure above a panel of every numeric row's published and simulated
    values (:func:`hetsched.plot.with_published`).
    ``on_done(reproduction, rows)`` is called after each one.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    chosen = resolve_ids(ids)
    plots = Path(plots_dir) if plots_dir is not None else None
    if plots is not None:
        plots.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    for rid in chosen:
        repro = registry[rid]
        try:
            result = repro.fn(scale)
            outcome = result if isinstance(result, Outcome) else Outcome(rows=list(result))
            these = list(outcome.rows)
            _check_rows(rid, these)
        except Exception as e:
            these = [_error_row(repro, repro.title, e)]
        else:
            if plots is not None and repro.plot is not None:
                try:
                    data = outcome.data if outcome.data is not None else these
                    repro.plot(data, plots / f"{rid}.png")
                    # Every figure shows the published values beside the
                    # simulated ones: the rows' numbers, on one axis.
                    from ..plot import with_published

                    with_published(
                        plots / f"{rid}.png", outcome.rows,
                        title=f"{rid}: published and simulated values of each numeric row",
                    )  # fmt: skip
                except Exception as e:  # a broken figure must not hide the verdicts
                    these.append(_error_row(repro, "plot", e))
        rows.extend(these)
        if on_done is not None:
            on_done(repro, these)
    return rows


def rows_table(rows: Sequence[Row]) -> str:
    """The rows as an aligned plain-text table."""
    body = [
        [r.id, r.claim, _value(r.published), _value(r.simulated), r.tolerance, r.verdict,
         _kind(r)]
        for r in rows
    ]  # fmt: skip
    text = table(["id", "claim", "published", "simulated", "tolerance", "verdict", "kind"], body)
    notes = [f"  {r.id}: {r.note}" for r in rows if r.note and r.verdict in ("differs", "error")]
    if notes:
        text += "\n\nnotes\n" + "\n".join(notes)
    return text + "\n\n" + headline(rows)


def headline(rows: Sequence[Row]) -> str:
    """The scorecard's tally, counting predictions only: "N predictions: a
    match, b trend, c differ; plus k calibration points and m consistency
    checks, listed separately." A verdict no prediction has is left out
    (but for match); error rows, which have no kind, count as predictions: a
    reproduction that fails predicts nothing it can show."""
    kinds = [_kind(r) for r in rows]
    preds = [r for r, k in zip(rows, kinds, strict=True) if k == "prediction"]
    words = {"match": "match", "trend": "trend", "differs": "differ", "error": "error"}
    counts = [(words[v], sum(r.verdict == v for r in preds)) for v in VERDICTS]
    tally = ", ".join(f"{n} {w}" for w, n in counts if n or w == "match")
    ncal = kinds.count("calibration")
    ncon = kinds.count("consistency")
    return (
        f"{len(preds)} predictions: {tally}; plus {ncal} calibration "
        f"point{'' if ncal == 1 else 's'} and {ncon} consistency "
        f"check{'' if ncon == 1 else 's'}, listed separately."
    )


def by_paper(
    rows: Sequence[Row], papers: Mapping[str, str] | None = None
) -> list[tuple[str, dict[str, int]]]:
    """The prediction rows' verdicts counted per paper, papers in the order of
    their first row: ``[(paper, {"predictions": n, "match": a, "trend": b,
    "differs": c, "error": d})]``. ``papers`` maps a reproduction id to its
    paper (default: the registry's); an id it lacks counts under its own
    name."""
    if papers is None:
        papers = {rid: rep.paper for rid, rep in registry.items()}
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        if _kind(r) != "prediction":
            continue
        c = out.setdefault(papers.get(r.id, r.id), {"predictions": 0, **dict.fromkeys(VERDICTS, 0)})
        c["predictions"] += 1
        c[r.verdict] = c.get(r.verdict, 0) + 1
    return list(out.items())


def _by_paper_markdown(rows: Sequence[Row]) -> list[str]:
    lines = [
        "| paper | predictions | match | trend | differ | matching share |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for paper, c in by_paper(rows):
        share = c["match"] / c["predictions"] if c["predictions"] else 0.0
        lines.append(
            f"| {paper} | {c['predictions']} | {c['match']} | {c['trend']} | "
            f"{c['differs'] + c['error']} | {share:.0%} |"
        )
    return lines


def scorecard_markdown(rows: Sequence[Row], title: str = "Validation scorecard") -> str:
    """``docs/validation.md``: the prediction rows as a Markdown table under a
    headline that counts them only, then the calibration points (with the
    parameter fitted to each) and the consistency checks (with what each
    follows from) in their own sections."""
    preds = [r for r in rows if _kind(r) == "prediction"]
    cals = [r for r in rows if _kind(r) == "calibration"]
    cons = [r for r in rows if _kind(r) == "consistency"]
    lines = [
        f"# {title}",
        "",
        "<!-- Generated by `hetsched reproduce all --scorecard docs/validation.md`;"
        " do not edit by hand. -->",
        "",
        "Each row is a published result beside its simulated counterpart. Verdicts are",
        "computed: **match** within the tolerance, **trend** when the ordering or sign",
        "the paper reports holds but the magnitude does not, **differs** otherwise.",
        "Each row's kind is computed from the reproduction's metadata: a **prediction**",
        "is a number nothing in the model was set from; a **calibration** point is one",
        "a model parameter was fitted to; a **consistency** check follows from an input",
        "or by construction. Only predictions are counted.",
        "",
        headline(rows),
        "",
        "By paper (predictions only; errors count as differing):",
        "",
        *_by_paper_markdown(rows),
        "",
        "## Predictions",
        "",
        "| id | claim | published | simulated | tolerance | verdict | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in preds:
        lines.append(_md_row([*_cells(r), r.note]))
    lines += [
        "",
        "## Calibration points",
        "",
        "A model parameter was fitted to each of these published numbers (or to one",
        "that fixes it); the row shows that the fit holds in the engine, not that the",
        "model predicts the number.",
        "",
        "| id | claim | published | simulated | tolerance | verdict | parameter | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in cals:
        assert r.calibrated_by is not None
        param, why = r.calibrated_by
        lines.append(_md_row([*_cells(r), f"`{param}`: {why}", r.note]))
    if not cals:
        lines.append("| - | none | | | | | | |")
    lines += [
        "",
        "## Consistency checks",
        "",
        "Each of these results follows from an input of the experiment or holds by",
        "construction; it checks the engine's bookkeeping, not the model.",
        "",
        "| id | claim | published | simulated | tolerance | verdict | follows from | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in cons:
        lines.append(_md_row([*_cells(r), r.follows_from or "", r.note]))
    if not cons:
        lines.append("| - | none | | | | | | |")
    return "\n".join(lines) + "\n"


def _cells(r: Row) -> list[str]:
    return [
        r.id,
        r.claim,
        _value(r.published),
        _value(r.simulated),
        r.tolerance,
        f"**{r.verdict}**",
    ]


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(_md(c) for c in cells) + " |"


def _kind(r: Row) -> str:
    """A row's kind; an error row is counted as a prediction."""
    return "prediction" if r.verdict == "error" else r.kind


def _check_rows(rid: str, rows: list[Row]) -> None:
    for r in rows:
        if not isinstance(r, Row):
            raise TypeError(f"{rid} returned {type(r).__name__}, expected Row")
        if r.verdict not in VERDICTS:
            raise ValueError(f"{rid}: row {r.claim!r} has verdict {r.verdict!r}")
        r.kind  # noqa: B018  raises on malformed calibration/consistency metadata


def _error_row(repro: Reproduction, claim: str, e: Exception) -> Row:
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
    return Row(
        id=repro.id,
        claim=claim,
        published=None,
        simulated=None,
        tolerance="-",
        verdict="error",
        note=f"{type(e).__name__}: {e}{at}",
    )


def _value(v: object) -> str:
    return number(v, 3) if isinstance(v, float) else ("-" if v is None else str(v))


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
