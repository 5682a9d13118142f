"""Figures of runs and sweeps, and small plotting helpers for reproductions.

Figures are drawn with matplotlib's object API on the Agg canvas, so they
never need a display and never change the caller's pyplot backend.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._runview import (
    _busy_per_bin,
    _cpu_labels,
    _domains,
    _end_s,
    _freq_steps,
    _ncpus,
    _task_programs,
    energy_from_trace,
)

__all__ = [
    "KINDS",
    "PlotError",
    "bars",
    "energy_estimate",
    "fairness",
    "formats_supported",
    "plot",
    "power",
    "published_panel",
    "save",
    "speedup",
    "speedup_table",
    "svg_text",
    "timeline",
    "utilization",
    "with_published",
]


def bars(
    labels: Sequence[str],
    panels: Mapping[str, Sequence[float]],
    path: str | Path,
    *,
    title: str = "",
    xlabel: str = "",
    reference: Mapping[str, float] | None = None,
    grouped: bool | None = None,
) -> Path:
    """Save a bar chart of ``panels`` over the x categories ``labels`` (the
    format follows the suffix of ``path``, as :func:`save`).

    Series that measure the same thing are compared on one axis: when every
    key of ``panels`` ends in the same unit in parentheses (``"cfs completion
    (s)"``, ``"faster-first completion (s)"``; ``"published (ms)"``,
    ``"simulated (ms)"``) the series are drawn as grouped bars side by side
    on one y axis, the legend naming each by the part of its key that
    differs. Otherwise (or with ``grouped=False``) each entry is its own panel,
    stacked vertically, its key the y-axis label. ``reference`` draws a dashed
    horizontal line for the series of the same key (an ideal or published
    value). Returns the path written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    for ylabel, values in panels.items():
        if len(values) != len(labels):
            raise ValueError(f"panel {ylabel!r} has {len(values)} values for {len(labels)} labels")
    if grouped is None:
        grouped = len(panels) > 1 and _common_unit(list(panels)) is not None
    positions = list(range(len(labels)))
    if grouped:
        names, ylabel = _split_common_suffix(list(panels))
        n = len(panels)
        width = min(0.8 / n, 0.35)
        fig = Figure(
            figsize=(max(6.0, (0.3 + 0.22 * n) * len(labels) + 2.5), 4.2), layout="constrained"
        )
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        ax.grid(axis="y", alpha=0.3)
        for j, (key, values) in enumerate(panels.items()):
            xs = [x + (j - (n - 1) / 2) * width for x in positions]
            colour = _PALETTE[j % len(_PALETTE)]
            ax.bar(xs, list(values), width, color=colour, label=names[j])
            if reference and key in reference:
                ax.axhline(reference[key], color=colour, linestyle="--", linewidth=1,
                           label=f"{names[j]}: reference")  # fmt: skip
        # Series over orders of magnitude (fast and slow mechanisms side by
        # side): a log axis, so the small bars stay readable.
        every = [float(v) for vs in panels.values() for v in vs if v == v]
        if every and min(every) > 0 and max(every) / min(every) > LOG_RANGE:
            ax.set_yscale("log")
            ylabel += " (log scale)"
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        axes = [ax]
    else:
        n = max(len(panels), 1)
        fig = Figure(
            figsize=(max(6.0, 0.45 * len(labels) + 2.0), 2.6 * n + 0.6), layout="constrained"
        )
        FigureCanvasAgg(fig)
        axes = list(fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0])
        for ax, (ylabel, values) in zip(axes, panels.items(), strict=False):
            ax.bar(positions, list(values), color="#4878a8")
            if reference and ylabel in reference:
                ax.axhline(reference[ylabel], color="#c44e52", linestyle="--", linewidth=1)
            ax.set_ylabel(ylabel)
            ax.grid(axis="y", alpha=0.3)
    # Labels that would overlap side by side are slanted.
    crowded = len(labels) > 16 or sum(len(str(x)) for x in labels) > 6 * len(labels) + 8
    axes[-1].set_xticks(
        positions, list(labels), rotation=40 if crowded else 0, ha="right" if crowded else "center"
    )
    if xlabel:
        axes[-1].set_xlabel(xlabel)
    if title:
        fig.suptitle(title)
    return save(fig, path)


def _number(v: Any) -> float | None:
    """``v`` as a finite float, or None (text, booleans, NaN)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if f == f and abs(f) != float("inf") else None


def published_panel(rows: Sequence[Any], *, title: str = "", width: float = 9.0) -> Any:
    """A figure of every row (``Row``-like: ``claim``, ``published``,
    ``simulated``, ``verdict``) whose published and simulated values are both
    numbers: one pair of horizontal bars per row on one axis, the series
    labelled ``published`` and ``simulated``, each value relative to the
    published magnitude (published = ±1; a published 0 is drawn as its
    simulated value), with both numbers written beside the bars. None when
    no row has two numbers."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pairs = []
    for r in rows:
        pub, sim = _number(getattr(r, "published", None)), _number(getattr(r, "simulated", None))
        if pub is None or sim is None:
            continue
        scale = abs(pub) if pub != 0 else 1.0
        claim = str(getattr(r, "claim", ""))
        label = claim if len(claim) <= 70 else claim[:67] + "..."
        pairs.append((label, pub / scale, sim / scale, pub, sim, str(getattr(r, "verdict", ""))))
    if not pairs:
        return None
    fig = Figure(figsize=(width, 0.9 + 0.32 * len(pairs)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ys = list(range(len(pairs)))[::-1]
    h = 0.38
    ax.barh([y + h / 2 for y in ys], [p[1] for p in pairs], h, color="#444444", label="published")
    ax.barh([y - h / 2 for y in ys], [p[2] for p in pairs], h, color=_PALETTE[0],
            label="simulated")  # fmt: skip
    for y, p in zip(ys, pairs, strict=True):
        ax.annotate(f"{p[3]:.4g} / {p[4]:.4g} ({p[5]})", (max(p[1], p[2], 0.0), y),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=6)  # fmt: skip
    ax.set_yticks(ys, [p[0] for p in pairs], fontsize=6)
    ax.axvline(0.0, color="black", linewidth=0.6)
    ax.set_xlabel("value relative to the published one (published = 1; labels: published / "
                  "simulated (verdict))", fontsize=7)  # fmt: skip
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    if title:
        ax.set_title(title, fontsize=9)
    return fig


def with_published(path: str | Path, rows: Sequence[Any], *, title: str = "") -> bool:
    """Append :func:`published_panel` of ``rows`` below the PNG figure at
    ``path`` (rewritten in place), so that a reproduction's figure always
    shows the published values beside the simulated ones. Returns whether a
    panel was added (False: no row with two numbers, or not a readable PNG)."""
    import io

    from PIL import Image

    path = Path(path)
    if path.suffix.lower() != ".png" or not path.exists():
        return False
    try:
        with Image.open(path) as img:
            top = img.convert("RGB")
    except (OSError, ValueError):  # not an image PIL can read: leave it as it is
        return False
    fig = published_panel(rows, title=title, width=max(6.0, top.width / 100.0))
    if fig is None:
        return False
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    buf.seek(0)
    with Image.open(buf) as img:
        panel = img.convert("RGB")
    out = Image.new("RGB", (max(top.width, panel.width), top.height + panel.height), "white")
    out.paste(top, (0, 0))
    out.paste(panel, (0, top.height))
    out.save(path)
    return True


#: Grouped bars whose values span more than this ratio use a log y axis.
LOG_RANGE = 100.0


def _common_unit(keys: Sequence[str]) -> str | None:
    """The unit in parentheses that every key ends with, or None."""
    import re

    units = {m.group(1) if (m := re.search(r"\(([^()]+)\)\s*$", k)) else None for k in keys}
    return units.pop() if len(units) == 1 and None not in units else None


def _split_common_suffix(keys: Sequence[str]) -> tuple[list[str], str]:
    """``(["cfs", "faster-first"], "completion (s)")`` from ``["cfs completion
    (s)", "faster-first completion (s)"]``: the differing part of each key,
    and the words they all end with (the y-axis label)."""
    words = [k.split() for k in keys]
    common = 0
    while all(len(w) > common + 1 for w in words):
        if len({tuple(w[-common - 1 :]) for w in words}) != 1:
            break
        common += 1
    suffix = " ".join(words[0][len(words[0]) - common :]) if common else ""
    names = [" ".join(w[: len(w) - common]) for w in words]
    if suffix.startswith("("):
        suffix = f"value {suffix}"
    return names, suffix


# --------------------------------------------------------------------------
# Figures of runs and sweeps: ``hetsched plot DIR --kind KIND``.

#: The figures :func:`plot` draws, and what each needs.
KINDS = {
    "timeline": "per-CPU Gantt chart coloured by program, migrations marked (traced run)",
    "utilization": "utilisation and frequency over time, per CPU (traced run)",
    "power": "estimated power over time and cumulative energy (traced run)",
    "fairness": "per-thread CPU time and scaled CPU time (any run)",
    "speedup": "speedup over a baseline policy with error bars across seeds (sweep folder)",
}

#: Trace event types that mark a change of the machine itself: drawn as
#: vertical lines on the timeline when a run has them.
RECONFIG_EVENTS = ("reconfig", "reconfigure", "cpu_online", "cpu_offline", "hotplug", "morph")

_PALETTE = [
    "#4878a8", "#e28743", "#59a14f", "#c44e52", "#8172b3",
    "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd",
]  # fmt: skip


#: Up to this many CPUs the timeline gives each a labelled row of full height.
TIMELINE_ROWS = 40


class PlotError(ValueError):
    """A figure that cannot be drawn from what a folder holds (no trace, not a sweep)."""


def plot(
    source: Any,
    kind: str,
    path: str | Path | None = None,
    *,
    metric: str = "makespan_s",
    by: str | None = None,
    baseline: str | None = None,
) -> Path:
    """Draw figure ``kind`` (one of :data:`KINDS`) of ``source`` and save it.

    ``source`` is a run folder (``hetsched run --out DIR``), a
    :class:`hetsched.Results`, or for ``speedup`` a sweep folder or table.
    ``path`` ends in a suffix matplotlib writes, ``.png``, ``.svg``, ``.pdf``
    ... (default: ``DIR/plots/KIND.png``).
    ``metric``, ``by`` and ``baseline`` are for ``speedup`` (see :func:`speedup`).
    Returns the path written; raises :class:`PlotError` when the source
    lacks what the figure needs.
    """
    if kind not in KINDS:
        raise PlotError(f"unknown plot kind {kind!r}; expected one of {', '.join(KINDS)}")
    if path is None:
        if not isinstance(source, str | Path):
            raise PlotError("give a path to save the figure to")
        path = Path(source) / "plots" / f"{kind}.png"
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in formats_supported():  # before the work of drawing
        raise PlotError(
            f"{path}: cannot write a figure as {Path(path).suffix or 'a file without a suffix'}; "
            f"use one of {', '.join('.' + f for f in formats_supported())}"
        )
    if kind == "speedup":
        fig = speedup(source, metric=metric, by=by, baseline=baseline)
    else:
        res = _results(source)
        fig = {
            "timeline": timeline,
            "utilization": utilization,
            "power": power,
            "fairness": fairness,
        }[kind](res)
    return save(fig, path)


def save(fig: Any, path: str | Path) -> Path:
    """Write a figure in the format of the suffix of ``path``: any format
    matplotlib writes (``.png``, ``.svg``, ``.pdf``, ``.eps``, ``.jpg`` ...)."""
    out = Path(path)
    formats = formats_supported(fig)
    suffix = out.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise PlotError(
            f"{out}: cannot write a figure as {out.suffix or 'a file without a suffix'}; "
            f"use one of {', '.join('.' + f for f in sorted(formats))}"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out


def formats_supported(fig: Any = None) -> list[str]:
    """The file suffixes (without the dot) figures can be saved as."""
    if fig is None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure()
        FigureCanvasAgg(fig)
    return sorted(fig.canvas.get_supported_filetypes())


def svg_text(fig: Any) -> str:
    """A figure as SVG markup, to embed in HTML."""
    import io

    import matplotlib

    buf = io.StringIO()
    # Text as <text>, not glyph outlines: smaller, and no ids shared between figures.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.find("<svg") :]


def timeline(res: Any) -> Any:
    """Per-CPU Gantt chart: one row per CPU, a bar per run interval coloured
    by program; migrations are triangles on the CPU a task moved to, faults
    crosses, machine reconfigurations (when the trace has them) dashed lines."""
    res = _results(res)
    trace = _need_trace(res, "timeline")
    programs = _task_programs(res)
    names = sorted(set(programs.values()), key=_program_order(res))
    colour = {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(names)}
    ncpus = _ncpus(res, trace)
    segs: dict[tuple[int, str], list[tuple[float, float]]] = {}
    migrations: list[tuple[float, int]] = []
    faults: list[tuple[float, int]] = []
    reconfigs: list[tuple[float, int | None, str]] = []
    for e in trace:
        t = e.get("type")
        if t == "run" and e["end_ns"] > e["t_ns"]:
            key = (int(e["cpu"]), programs.get(int(e["task"]), "?"))
            segs.setdefault(key, []).append((e["t_ns"] / 1e9, (e["end_ns"] - e["t_ns"]) / 1e9))
        elif t == "migrate":
            migrations.append((e["t_ns"] / 1e9, int(e["to"])))
        elif t == "fault":
            faults.append((e["t_ns"] / 1e9, int(e["cpu"])))
        elif isinstance(t, str) and any(r in t for r in RECONFIG_EVENTS):
            cpu = e.get("cpu")
            reconfigs.append((e["t_ns"] / 1e9, int(cpu) if cpu is not None else None, t))
    # Beyond TIMELINE_ROWS CPUs the rows get thinner and only every k-th is labelled.
    many = ncpus > TIMELINE_ROWS
    fig, ax = _figure(1, height=min(14.0, 0.09 * ncpus + 2.4) if many else 0.32 * ncpus + 1.6)
    ax = ax[0]
    for (cpu, prog), xs in segs.items():
        ax.broken_barh(xs, (cpu - 0.4, 0.8), facecolors=colour.get(prog, "#999999"))
    if migrations:
        ts, cs = zip(*migrations, strict=True)
        ax.scatter(
            ts,
            [c + 0.42 for c in cs],
            marker="v",
            s=14,
            color="black",
            zorder=3,
            label=f"migration ({len(migrations)})",
        )
    if faults:
        ts, cs = zip(*faults, strict=True)
        ax.scatter(ts, cs, marker="x", s=20, color="#c44e52", zorder=3, label="ISA fault")
    for i, (t, cpu, _kind) in enumerate(reconfigs):
        label = "reconfiguration" if i == 0 else None
        if cpu is None:
            ax.axvline(t, color="#333333", linestyle="--", linewidth=0.8, label=label)
        else:
            ax.plot([t, t], [cpu - 0.5, cpu + 0.5], color="#333333", linestyle="--", label=label)
    from matplotlib.patches import Patch

    handles = [Patch(color=colour[p], label=p) for p in names]
    handles += ax.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    labels = _cpu_labels(res, ncpus)
    step = -(-ncpus // TIMELINE_ROWS) if many else 1
    shown = range(0, ncpus, step)
    ax.set_yticks(list(shown), [labels[i] for i in shown], fontsize=7 if many else None)
    ax.set_ylim(ncpus - 0.5, -0.5)
    ax.set_xlabel("time (s)")
    ax.set_xlim(0, _end_s(res, trace))
    fig.suptitle(f"{_name(res)}: timeline")
    return fig


#: Up to this many CPUs the utilisation figure gives each frequency domain its
#: own panel with a row per CPU; beyond it one heat map of every CPU.
PANEL_CPUS = 16
#: Up to this many frequency domains each gets its own frequency panel (so no
#: line hides another); beyond it the frequencies are a heat map too.
PANEL_DOMAINS = 4
#: Beyond this many CPUs the heat map is labelled by domain, not by CPU.
LABELLED_CPUS = 32


def utilization(res: Any, bins: int = 100) -> Any:
    """Each CPU's utilisation per time bin (a heat map) and each frequency
    domain's frequency over time (from the trace's P-state changes; a domain
    starts at its highest P-state, as the engine does).

    Up to :data:`PANEL_CPUS` CPUs and :data:`PANEL_DOMAINS` domains, each
    domain has a pair of panels: its CPUs' utilisation above its frequency.
    Beyond, one heat map holds every CPU (domains separated by lines, labelled
    by domain beyond :data:`LABELLED_CPUS` CPUs) above one frequency panel per
    domain, or, beyond :data:`PANEL_DOMAINS` domains, a heat map of the
    domains' frequencies."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    res = _results(res)
    trace = _need_trace(res, "utilization")
    ncpus = _ncpus(res, trace)
    end = _end_s(res, trace)
    edges, busy = _busy_per_bin(trace, ncpus, end, bins)
    width = edges[1] - edges[0]
    util = [[100.0 * b / width for b in busy[cpu]] for cpu in range(ncpus)]
    labels = _cpu_labels(res, ncpus)
    domains = _domains(res, ncpus)
    members: dict[int, list[int]] = {}
    for cpu, d in enumerate(domains):
        members.setdefault(d, []).append(cpu)
    steps = _freq_steps(res, trace, ncpus, end)
    freq = {d: steps[cpus[0]] for d, cpus in members.items()}
    top = max((max(m) for _, m in freq.values()), default=1.0) * 1.08 or 1.0
    names = {d: _domain_name(res, d, cpus) for d, cpus in members.items()}
    per_domain = ncpus <= PANEL_CPUS and len(members) <= PANEL_DOMAINS
    freq_panels = len(members) <= PANEL_DOMAINS

    # Rows of panels, with their heights in inches.
    rows: list[tuple[str, Any, float]] = []
    if per_domain:
        for d, cpus in members.items():
            rows.append(("util", d, max(0.9, 0.3 * len(cpus) + 0.4)))
            rows.append(("freq", d, 1.0))
    else:
        rows.append(("util", None, min(9.0, max(3.0, 0.06 * ncpus + 2.0))))
        if freq_panels:
            rows += [("freq", d, 0.9) for d in members]
        else:
            rows.append(("freqmap", None, min(5.0, max(1.6, 0.12 * len(members) + 1.0))))
    fig = Figure(figsize=(10.0, sum(h for _, _, h in rows) + 1.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(
        len(rows), 1, sharex=True, squeeze=False, height_ratios=[h for _, _, h in rows]
    )[:, 0]
    image = None
    util_axes = []
    for ax, (kind, d, _) in zip(axes, rows, strict=True):
        if kind == "util":
            cpus = members[d] if d is not None else list(range(ncpus))
            image = ax.imshow(
                [util[c] for c in cpus],
                aspect="auto",
                interpolation="nearest",
                cmap="viridis",
                vmin=0.0,
                vmax=100.0,
                extent=(0.0, end, len(cpus) - 0.5, -0.5),
            )
            util_axes.append(ax)
            if d is not None:
                ax.set_yticks(range(len(cpus)), [labels[c] for c in cpus], fontsize=8)
                ax.set_title(f"{names[d]}: utilisation", fontsize=9, loc="left")
            else:
                _label_heat_rows(ax, members, names, labels, ncpus)
                ax.set_title("utilisation per CPU", fontsize=9, loc="left")
        elif kind == "freq":
            ts, mhz = freq[d]
            ax.step(ts, mhz, where="post", color="#c44e52", linewidth=1.2)
            ax.set_ylim(0, top)
            ax.set_ylabel("MHz", fontsize=8)
            ax.tick_params(labelsize=8)
            ax.grid(alpha=0.3)
            ax.set_title(f"{names[d]}: frequency", fontsize=9, loc="left")
        else:
            fimage = ax.imshow(
                [_resample(*freq[d], edges) for d in members],
                aspect="auto",
                interpolation="nearest",
                cmap="magma",
                vmin=0.0,
                extent=(0.0, end, len(members) - 0.5, -0.5),
            )
            step = max(1, len(members) // 16)
            ds = list(members)
            shown = range(0, len(ds), step)
            ax.set_yticks(list(shown), [f"domain {ds[i]}" for i in shown], fontsize=7)
            ax.set_title("frequency per domain", fontsize=9, loc="left")
            fig.colorbar(fimage, ax=ax, label="MHz")
    if image is not None:
        fig.colorbar(image, ax=util_axes, label="utilisation (%)")
    axes[-1].set_xlabel("time (s)")
    axes[-1].set_xlim(0, end)
    fig.suptitle(f"{_name(res)}: utilisation and frequency ({ncpus} CPUs)")
    return fig


def _domain_name(res: Any, d: int, cpus: list[int]) -> str:
    types = list(dict.fromkeys(str(t) for t in res.cpus["type"])) if "type" in res.cpus else []
    kinds = (
        list(dict.fromkeys(str(res.cpus["type"].iloc[c]) for c in cpus))
        if len(types) and len(res.cpus) > max(cpus)
        else []
    )
    return f"domain {d} ({_ranges(cpus)}{', ' + '/'.join(kinds) if kinds else ''})"


def _ranges(cpus: list[int]) -> str:
    """``cpu0-3,8`` from ``[0, 1, 2, 3, 8]``."""
    parts = []
    start = prev = cpus[0]
    for c in [*cpus[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev > start else f"{start}")
        if c is not None:
            start = prev = c
    return "cpu" + ",".join(parts)


def _label_heat_rows(
    ax: Any, members: dict[int, list[int]], names: dict[int, str], labels: list[str], ncpus: int
) -> None:
    """Label the rows of the all-CPU heat map: each CPU up to LABELLED_CPUS,
    else each domain at the middle of its rows; lines between domains."""
    for cpus in members.values():
        if cpus[0] > 0:
            ax.axhline(cpus[0] - 0.5, color="white", linewidth=0.8)
    if ncpus <= LABELLED_CPUS:
        ax.set_yticks(range(ncpus), labels, fontsize=7)
        return
    # Domains are contiguous CPU ranges in every preset; one that is not is
    # labelled at its first CPU.
    ticks = [(cpus[0] + cpus[-1]) / 2 if cpus == list(range(cpus[0], cpus[-1] + 1)) else cpus[0]
             for cpus in members.values()]  # fmt: skip
    if len(ticks) > 24:
        keep = max(1, len(ticks) // 24)
        pairs = list(zip(ticks, members, strict=True))[::keep]
        ax.set_yticks([t for t, _ in pairs], [names[d] for _, d in pairs], fontsize=7)
    else:
        ax.set_yticks(ticks, [names[d] for d in members], fontsize=7)
    ax.set_ylabel("CPU")


def _resample(ts: list[float], values: list[float], edges: list[float]) -> list[float]:
    """A step function's value at the middle of each bin of ``edges``."""
    import bisect

    out = []
    for i in range(len(edges) - 1):
        mid = (edges[i] + edges[i + 1]) / 2
        j = max(0, bisect.bisect_right(ts, mid) - 1)
        out.append(values[min(j, len(values) - 1)])
    return out


def power(res: Any, bins: int = 200) -> Any:
    """Power over time and cumulative energy, estimated from the trace.

    The trace holds run intervals and P-state changes but not each phase's
    compute fraction, so each interval is priced with its program's memory
    intensity (``mem``) and the model's busy-power formula (docs/power.md);
    idle CPUs draw ``idle_w``, plus the platform's base power. The engine's
    exact total (``energy_j`` in the summary) is drawn as a dashed line and
    the estimate's difference from it is given in the title.
    """
    res = _results(res)
    edges, energy = energy_estimate(res, bins)
    end = edges[-1]
    width = edges[1] - edges[0] if bins else 1.0
    watts = [x / width for x in energy]
    cumulative = []
    acc = 0.0
    for x in energy:
        acc += x
        cumulative.append(acc)
    fig, (ax_p, ax_e) = _figure(2, height=5.5, sharex=True)
    ax_p.step(edges[:-1], watts, where="post", color="#c44e52", linewidth=1)
    ax_p.set_ylabel("power (W)")
    ax_e.plot(edges[1:], cumulative, color="#4878a8", label="estimated from the trace")
    exact = res.summary.get("energy_j")
    title = f"{_name(res)}: power and energy"
    if isinstance(exact, int | float) and exact > 0:
        ax_e.axhline(
            exact, color="black", linestyle="--", linewidth=0.8, label=f"engine total {exact:.4g} J"
        )
        title += f" (estimate {100.0 * (acc - exact) / exact:+.1f} % vs engine)"
    ax_e.set_ylabel("cumulative energy (J)")
    ax_e.set_xlabel("time (s)")
    ax_e.legend(loc="upper left", fontsize=8)
    ax_e.set_xlim(0, end)
    fig.suptitle(title)
    return fig


def energy_estimate(res: Any, bins: int = 200) -> tuple[list[float], list[float]]:
    """``(edges, joules per bin)`` of a traced run, priced as :func:`power`
    describes: exact for compute-bound programs (``mem = 0``) at duty cycle 1
    without SMT slow-down, an estimate otherwise."""
    res = _results(res)
    return energy_from_trace(res, _need_trace(res, "power"), bins)


def fairness(res: Any) -> Any:
    """Per thread: CPU time and scaled CPU time (run time × CPU rating), side
    by side, grouped and coloured by program."""
    res = _results(res)
    t = res.tasks
    if t.empty or "run_s" not in t.columns:
        raise PlotError(f"{_name(res)}: the run has no tasks to draw")
    names = list(dict.fromkeys(t["program"]))
    colour = {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(names)}
    labels = [f"{p}/{th}" for p, th in zip(t["program"], t["thread"], strict=True)]
    x = list(range(len(t)))
    fig, (ax_r, ax_s) = _figure(2, height=5.5, width=max(6.0, 0.3 * len(t) + 2.5), sharex=True)
    colours = [colour[p] for p in t["program"]]
    ax_r.bar(x, t["run_s"], color=colours)
    ax_r.set_ylabel("CPU time (s)")
    scaled = t["scaled_run_s"] if "scaled_run_s" in t.columns else t["run_s"]
    ax_s.bar(x, scaled, color=colours)
    ax_s.set_ylabel("scaled CPU time (s)")
    crowded = len(t) > 8
    ax_s.set_xticks(
        x, labels, rotation=60 if crowded else 0, ha="right" if crowded else "center", fontsize=7
    )
    from matplotlib.patches import Patch

    ax_r.legend(
        handles=[Patch(color=colour[p], label=p) for p in names],
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    fig.suptitle(f"{_name(res)}: CPU time per thread")
    return fig


def speedup_table(
    source: Any, *, metric: str = "makespan_s", by: str | None = None, baseline: str | None = None
) -> Any:
    """Speedup of each value of axis ``by`` (default: ``scheduler`` if swept,
    else the first swept axis other than ``seed``) over ``baseline`` (default:
    its first value), per combination of the other axes: ``baseline metric /
    metric`` paired run by run on the same seed (and other values), then the
    mean and standard deviation across seeds. Returns a DataFrame with
    ``group``, ``by`` value, ``speedup``, ``std``, ``n``."""
    import pandas as pd

    table, axes = _sweep_table(source)
    if metric not in table.columns:
        raise PlotError(f"no column {metric!r} in the sweep table; e.g. makespan_s, energy_j")
    ok = table[table["status"] == "ok"].copy()
    if ok.empty:
        raise PlotError("the sweep has no finished runs")
    if by is None:
        by = "scheduler" if "scheduler" in axes else next((a for a in axes if a != "seed"), None)
    if by is None or by not in ok.columns:
        raise PlotError(f"cannot compare along {by!r}; swept axes: {', '.join(axes)}")
    values = list(dict.fromkeys(ok[by]))
    base = baseline if baseline is not None else values[0]
    if str(base) not in [str(v) for v in values]:
        raise PlotError(f"baseline {base!r} is not a value of {by}: {', '.join(map(str, values))}")
    base = next(v for v in values if str(v) == str(base))
    others = [a for a in axes if a not in (by, "seed")]
    pair_on = [a for a in axes if a != by]
    ref = ok[ok[by] == base].set_index(pair_on)[metric] if pair_on else None
    rows = []
    for v in values:
        sub = ok[ok[by] == v]
        if ref is not None:
            joined = sub.set_index(pair_on)[metric]
            ratio = (ref.reindex(joined.index) / joined).dropna()
            frame = ratio.reset_index()
            frame.columns = [*pair_on, "ratio"]
        else:
            frame = pd.DataFrame(
                {"ratio": [float(ok[ok[by] == base][metric].mean()) / float(sub[metric].mean())]}
            )
        groups = frame.groupby(others, sort=False) if others else [((), frame)]
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = "\n".join(f"{a}={k}" for a, k in zip(others, key, strict=True)) or "all"
            rows.append(
                {
                    "group": label,
                    by: v,
                    "speedup": float(g["ratio"].mean()),
                    "std": float(g["ratio"].std(ddof=1)) if len(g) > 1 else 0.0,
                    "n": len(g),
                }
            )
    out = pd.DataFrame(rows)
    if out.empty:
        # E.g. makespan_s of runs too short for their programs to finish.
        raise PlotError(
            f"no pair of runs has {metric} in both: it is empty in "
            f"{int(ok[metric].isna().sum())} of {len(ok)} finished runs; choose another "
            "--metric (e.g. energy_j) or runs long enough to finish their programs"
        )
    out.attrs.update(by=by, baseline=base, metric=metric)
    return out


def speedup(
    source: Any, *, metric: str = "makespan_s", by: str | None = None, baseline: str | None = None
) -> Any:
    """Grouped bars of :func:`speedup_table` with ±1 standard deviation error bars."""
    st = speedup_table(source, metric=metric, by=by, baseline=baseline)
    by = st.attrs["by"]
    groups = list(dict.fromkeys(st["group"]))
    values = list(dict.fromkeys(st[by]))
    fig, (ax,) = _figure(1, height=4.0, width=max(6.0, 1.1 * len(groups) * len(values) / 2 + 3))
    width = 0.8 / len(values)
    for j, v in enumerate(values):
        sub = st[st[by] == v].set_index("group").reindex(groups)
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(groups))]
        ax.bar(
            xs,
            sub["speedup"],
            width,
            yerr=sub["std"],
            capsize=3,
            color=_PALETTE[j % len(_PALETTE)],
            label=str(v),
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    kind = "higher is better" if st.attrs["metric"] in ("ips_per_w",) else "baseline ÷ value"
    ax.set_ylabel(f"speedup in {st.attrs['metric']} ({kind})")
    ax.legend(title=by, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    n = int(st["n"].max()) if len(st) else 0
    fig.suptitle(f"speedup over {by}={st.attrs['baseline']} (mean ± sd over {n} paired runs)")
    return fig


# ----------------------------------------------------------------- helpers


def _figure(rows: int, *, height: float, width: float = 9.0, sharex: bool = False) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, 1, sharex=sharex, squeeze=False)[:, 0]
    for ax in axes:
        ax.grid(alpha=0.3)
    return fig, list(axes)


def _results(source: Any) -> Any:
    from .results import Results

    if isinstance(source, Results):
        return source
    if isinstance(source, str | Path):
        d = Path(source)
        if (d / "results.csv").exists() and not (d / "summary.json").exists():
            raise PlotError(
                f"{d} is a sweep folder: plot one of its runs (runs/<id>) or --kind speedup"
            )
        return Results.load(d)
    raise PlotError(f"cannot plot a {type(source).__name__}; give a run folder or Results")


def _need_trace(res: Any, kind: str) -> list[dict[str, Any]]:
    if not res.trace:
        raise PlotError(
            f"{_name(res)}: the {kind} figure needs the run's trace; run it with --trace "
            "(hetsched run FILE --trace --out DIR, or trace=True)"
        )
    return list(res.trace)


def _name(res: Any) -> str:
    return str(res.summary.get("scenario") or res.scenario.get("name") or "run")


def _program_order(res: Any) -> Any:
    order = {p: i for i, p in enumerate(dict.fromkeys(res.tasks.get("program", [])))}
    return lambda p: (order.get(p, len(order)), p)


def _sweep_table(source: Any) -> tuple[Any, list[str]]:
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        axes = list(source.attrs.get("axes") or [])
        return source, axes
    d = Path(source)
    from .sweeps import read_table

    try:
        table = read_table(d)
    except Exception as e:
        raise PlotError(f"{d}: the speedup figure needs a sweep folder ({e})") from None
    spec = d / "sweep.json"
    axes = json.loads(spec.read_text("utf-8")).get("axes", []) if spec.exists() else []
    return table, axes
