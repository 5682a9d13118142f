"""The machinery of reproductions: registry, result rows, verdicts, runner, scorecard.

A reproduction re-creates one published experiment in simulation and returns
one :class:`Row` per published claim, with the published value beside the
simulated one. Its verdict is computed, never typed in:

- ``match``: the simulated value is within the stated tolerance;
- ``trend``: it is not, but the ordering or sign the paper reports holds
  (the reproduction computes that and passes ``trend_ok``);
- ``differs``: neither; the row's ``note`` says what the model lacks;
- ``error``: the reproduction itself failed (set by the runner).

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._text import number, table

__all__ = [
    "SCALES",
    "VERDICTS",
    "Outcome",
    "Reproduction",
    "Row",
    "UnknownReproductionError",
    "registry",
    "reproduction",
    "resolve_ids",
    "rows_table",
    "run_reproductions",
    "scorecard_markdown",
    "tolerance_text",
    "verdict_trend",
    "verdict_within",
    "within_row",
]

SCALES = ("full", "quick")
VERDICTS = ("match", "trend", "differs", "error")


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

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dict (a NaN value becomes None)."""
        d = dataclasses.asdict(self)
        for key in ("published", "simulated"):
            if isinstance(d[key], float) and not math.isfinite(d[key]):
                d[key] = None
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
) -> Row:
    """A claim that is a number within a tolerance: the row's tolerance text
    and its :func:`verdict_within` verdict come from the same ``rel_tol`` /
    ``abs_tol``; the simulated value is shown rounded to ``digits``."""
    return Row(
        id=rid,
        claim=claim,
        published=published,
        simulated=round(simulated, digits),
        tolerance=tolerance_text(rel_tol, abs_tol),
        verdict=verdict_within(published, simulated, rel_tol, abs_tol, trend_ok),
        note=note,
    )


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
    reproduction that has a plot writes ``<plots_dir>/<id>.png``.
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
                except Exception as e:  # a broken figure must not hide the verdicts
                    these.append(_error_row(repro, "plot", e))
        rows.extend(these)
        if on_done is not None:
            on_done(repro, these)
    return rows


def rows_table(rows: Sequence[Row]) -> str:
    """The rows as an aligned plain-text table."""
    body = [
        [r.id, r.claim, _value(r.published), _value(r.simulated), r.tolerance, r.verdict]
        for r in rows
    ]
    text = table(["id", "claim", "published", "simulated", "tolerance", "verdict"], body)
    notes = [f"  {r.id}: {r.note}" for r in rows if r.note and r.verdict in ("differs", "error")]
    if notes:
        text += "\n\nnotes\n" + "\n".join(notes)
    return text


def scorecard_markdown(rows: Sequence[Row], title: str = "Validation scorecard") -> str:
    """``docs/validation.md``: the rows as a Markdown table with verdict counts."""
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    tally = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    lines = [
        f"# {title}",
        "",
        "<!-- Generated by `hetsched reproduce all --scorecard docs/validation.md`;"
        " do not edit by hand. -->",
        "",
        "Each row is a published result beside its simulated counterpart. Verdicts are",
        "computed: **match** within the tolerance, **trend** when the ordering or sign",
        "the paper reports holds but the magnitude does not, **differs** otherwise.",
        "",
        f"{len(rows)} claims: {tally or 'none'}.",
        "",
        "| id | claim | published | simulated | tolerance | verdict | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            r.id,
            r.claim,
            _value(r.published),
            _value(r.simulated),
            r.tolerance,
            f"**{r.verdict}**",
            r.note,
        ]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _check_rows(rid: str, rows: list[Row]) -> None:
    for r in rows:
        if not isinstance(r, Row):
            raise TypeError(f"{rid} returned {type(r).__name__}, expected Row")
        if r.verdict not in VERDICTS:
            raise ValueError(f"{rid}: row {r.claim!r} has verdict {r.verdict!r}")


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
