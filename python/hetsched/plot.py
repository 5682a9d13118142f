"""Small plotting helpers for reproductions and notebooks.

Figures are drawn with matplotlib's object API on the Agg canvas, so they
never need a display and never change the caller's pyplot backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["bars"]


def bars(
    labels: Sequence[str],
    panels: Mapping[str, Sequence[float]],
    path: str | Path,
    *,
    title: str = "",
    xlabel: str = "",
    reference: Mapping[str, float] | None = None,
) -> Path:
    """Save a PNG with one bar chart per entry of ``panels`` (its key is the
    y-axis label), stacked vertically and sharing the x categories ``labels``.
    ``reference`` draws a dashed horizontal line in the panel of the same key
    (an ideal or published value). Returns the path written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = max(len(panels), 1)
    fig = Figure(figsize=(max(6.0, 0.45 * len(labels) + 2.0), 2.6 * n + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    positions = list(range(len(labels)))
    for ax, (ylabel, values) in zip(axes, panels.items(), strict=False):
        if len(values) != len(labels):
            raise ValueError(f"panel {ylabel!r} has {len(values)} values for {len(labels)} labels")
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
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out
