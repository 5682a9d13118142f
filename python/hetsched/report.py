"""Self-contained HTML reports of a run folder or a sweep folder.

``hetsched report DIR`` (or :func:`write_report`) writes one HTML file with
the summary tables and every figure that the folder's data allows, drawn as
inline SVG: the page needs no other file and no network, so it can be mailed
or attached to an issue as it is.

- A run folder (``hetsched run --out DIR``): the headline numbers in one
  line, then the figures (for a traced run the timeline, utilisation and
  power, and always the CPU time per thread), then the summary, programs,
  CPU types, CPUs and tasks as tables, and the resolved scenario.
- A sweep folder (``hetsched sweep --out DIR``): the sweep's axes, the
  speedup figure, the mean of the main metrics per combination of swept
  values (over seeds), and the failed runs with their errors.

Numbers are printed for people: four significant digits, thousands
separators, no exponent between 0.001 and 10^15. The files of a run folder
are checked against its manifest first (:func:`hetsched.results.verify_run_folder`).
"""

from __future__ import annotations

import functools
import html
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from . import plot
from ._text import seconds
from .results import Results

__all__ = ["ReportError", "render_report", "write_report"]

#: Suffixes a report may be written to: it is an HTML page.
HTML_SUFFIXES = (".html", ".htm")


class ReportError(ValueError):
    """A report that cannot be written as asked (an output name that is not .html)."""


#: Summary columns a sweep report aggregates, when the table has them.
SWEEP_METRICS = (
    "makespan_s",
    "energy_j",
    "avg_power_w",
    "edp_js",
    "migrations",
    "context_switches",
    "deadline_misses",
)

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
.note { color: #666; font-size: 0.85em; } .error { color: #a00; }
.headline { font-size: 1.05em; } ul.warnings { color: #a60; }
div.wide { overflow-x: auto; }
"""


def write_report(source: str | Path, out: str | Path | None = None) -> Path:
    """Write the HTML report of folder ``source`` to ``out`` (default
    ``source/report.html``); return the path."""
    d = Path(source)
    path = Path(out) if out is not None else d / "report.html"
    if path.suffix.lower() not in HTML_SUFFIXES:
        raise ReportError(
            f"{path}: the report is an HTML page; name it .html (for a PDF, print the page "
            "from a browser; single figures: hetsched plot DIR --kind KIND --out FIG.pdf)"
        )
    text = render_report(d)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def render_report(source: str | Path) -> str:
    """The HTML text of the report of a run or sweep folder."""
    d = Path(source)
    if not d.is_dir():
        raise FileNotFoundError(2, "no such results folder", str(d))
    if (d / "summary.json").exists():
        title, body = _run_report(Results.load(d))
    elif (d / "results.csv").exists() or (d / "results.parquet").exists():
        title, body = _sweep_report(d)
    else:
        raise FileNotFoundError(
            2, "not a run folder (summary.json) nor a sweep folder (results.csv)", str(d)
        )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def _run_report(res: Results) -> tuple[str, str]:
    name = str(res.summary.get("scenario") or res.scenario.get("name") or "run")
    parts = []
    if res.scenario.get("description"):
        parts.append(f"<p>{html.escape(str(res.scenario['description']))}</p>")
    parts.append(f"<p class='headline'>{html.escape(_headline(res))}</p>")
    if res.warnings:
        items = "".join(f"<li>{html.escape(w)}</li>" for w in res.warnings)
        parts.append(f"<ul class='warnings'>{items}</ul>")

    # Figures first: they are what a reader comes for.
    parts.append("<h2>Figures</h2>")
    figures: list[tuple[str, Callable[[Any], Any]]] = []
    if res.trace:
        figures += [
            ("Timeline", plot.timeline),
            ("Utilisation and frequency", plot.utilization),
            ("Power and energy (estimated from the trace)", plot.power),
        ]
    else:
        parts.append(
            "<p class='note'>The run was not traced: run it with <code>--trace</code> for the "
            "timeline, utilisation and power figures.</p>"
        )
    figures.append(("CPU time per thread", plot.fairness))
    for caption, draw in figures:
        parts.append(_figure(caption, functools.partial(draw, res)))

    summary = pd.DataFrame(
        [{"field": k, "value": v} for k, v in sorted(res.summary.items()) if _scalar(v)]
    )
    parts += ["<h2>Summary</h2>", _table(summary)]
    if len(res.programs):
        parts += ["<h2>Programs</h2>", _table(res.programs)]
    by_type = res.cpu_types()
    if len(by_type):
        parts += ["<h2>CPU types</h2>", _table(by_type)]
    if len(res.cpus):
        parts += ["<h2>CPUs</h2>", _table(res.cpus)]
    if len(res.tasks):
        cols = [
            c
            for c in ("task", "program", "thread", "run_s", "scaled_run_s", "wait_s", "work_ms",
                      "migrations", "csw_voluntary", "csw_involuntary", "end_s")
            if c in res.tasks.columns
        ]  # fmt: skip
        parts += ["<h2>Tasks</h2>", _table(res.tasks[cols])]
    if res.scenario:
        scenario = json.dumps(res.scenario, indent=2, sort_keys=True)
        parts += ["<h2>Scenario (resolved)</h2>", f"<pre>{html.escape(scenario)}</pre>"]
    return f"hetsched run: {name}", "\n".join(parts)


def _headline(res: Results) -> str:
    """One sentence of the numbers a reader looks for first."""
    s = res.summary
    who = ", ".join(
        f"{k} {s[k]}" for k in ("scheduler", "governor", "seed") if s.get(k) is not None
    )
    facts = [
        f"makespan {seconds(s.get('makespan_s'))}" if "makespan_s" in s else "",
        f"energy {format_number(s['energy_j'])} J" if "energy_j" in s else "",
        f"average power {format_number(s['avg_power_w'])} W" if "avg_power_w" in s else "",
        f"{format_number(s['migrations'])} migrations" if "migrations" in s else "",
        f"{format_number(s['context_switches'])} context switches"
        if "context_switches" in s
        else "",
    ]
    text = "; ".join(f for f in facts if f)
    return f"{who}: {text}" if who and text else who or text or "no summary"


def _sweep_report(d: Path) -> tuple[str, str]:
    from .sweeps import read_table

    table = read_table(d)
    spec_path = d / "sweep.json"
    spec = json.loads(spec_path.read_text("utf-8")) if spec_path.exists() else {}
    axes = [a for a in spec.get("axes", []) if a in table.columns]
    table.attrs["axes"] = axes
    name = spec.get("name") or d.name
    ok = table[table["status"] == "ok"]
    parts = [
        f"<p>{len(table)} runs, {len(ok)} ok, {len(table) - len(ok)} failed. "
        f"Swept: {html.escape(', '.join(axes) or '-')}.</p>"
    ]
    values = pd.DataFrame(
        [{"path": a, "values": ", ".join(map(str, dict.fromkeys(table[a])))} for a in axes]
    )
    if len(values):
        parts += ["<h2>Axes</h2>", _table(values)]
    fixed = spec.get("set") or {}
    if fixed:
        parts += [
            "<h2>Fixed for every run</h2>",
            _table(pd.DataFrame([{"path": k, "value": v} for k, v in fixed.items()])),
        ]
    metrics = [m for m in SWEEP_METRICS if m in ok.columns]
    group = [a for a in axes if a != "seed"]
    if len(ok) and group:
        parts.append("<h2>Speedup</h2>")
        parts.append(_figure("Makespan speedup over the first value", lambda: plot.speedup(table)))
        try:
            st = plot.speedup_table(table)
            st["group"] = st["group"].str.replace("\n", ", ")
            parts.append(_table(st))
        except plot.PlotError as e:
            parts.append(f"<p class='note'>{html.escape(str(e))}</p>")
    if metrics and len(ok):
        if group:
            agg = ok.groupby(group, sort=False)[metrics].agg(["mean", "std"])
            agg.columns = [f"{m} {s}" for m, s in agg.columns]
            agg.insert(0, "runs", ok.groupby(group, sort=False).size())
            agg = agg.reset_index()
        else:
            agg = ok[metrics].agg(["mean", "std"]).reset_index(names="statistic")
        parts += ["<h2>Mean (and standard deviation) over seeds</h2>", _table(agg)]
    failed = table[table["status"] != "ok"]
    if len(failed):
        parts += ["<h2>Failed runs</h2>", _table(failed[["run", *axes, "error"]])]
    parts += ["<h2>All runs</h2>", _table(table)]
    return f"hetsched sweep: {name}", "\n".join(parts)


def _figure(caption: str, draw: Callable[[], Any]) -> str:
    try:
        svg = plot.svg_text(draw())
    except plot.PlotError as e:
        return f"<p class='note'>{html.escape(caption)}: {html.escape(str(e))}</p>"
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def _scalar(v: object) -> bool:
    return isinstance(v, str | int | float | bool)


def _table(frame: pd.DataFrame, limit: int = 500) -> str:
    rows = frame.head(limit)
    text_cols = {c for c in rows.columns if rows[c].dtype == object or str(rows[c].dtype) == "str"}
    head = "".join(
        f"<th class='{'text' if c in text_cols else ''}'>{html.escape(str(c))}</th>"
        for c in rows.columns
    )
    body = []
    for rec in rows.itertuples(index=False):
        cells = []
        for c, v in zip(rows.columns, rec, strict=True):
            cls = "text" if c in text_cols else ""
            cells.append(f"<td class='{cls}'>{html.escape(_cell(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = f"<p class='note'>first {limit} of {len(frame)} rows</p>" if len(frame) > limit else ""
    # Wide tables scroll sideways instead of running off the page.
    table = f"<table><tr>{head}</tr>{''.join(body)}</table>"
    return f"<div class='wide'>{table}</div>{more}"


def _cell(v: object) -> str:
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    return format_number(v)


def format_number(v: object) -> str:
    """A table cell for people: ``2,215,190``, ``0.7267``, ``12.35``, ``1.2e-05``;
    integers with thousands separators; NaN and None as an empty cell."""
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, int | float):
        # numpy scalars: their Python value
        item = getattr(v, "item", None)
        if callable(item) and not isinstance(v, str | bytes):
            value = item()
            if isinstance(value, int | float) and not isinstance(value, bool):
                return format_number(value)
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e15 or a < 1e-3:
        return f"{v:.3e}".replace("e-0", "e-").replace("e+0", "e+")
    if a >= 1000 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.4g}"  # no exponent between 0.001 and 1000
