"""Plain-text formatting shared by the summary, the CLI listings and the scorecard."""

from __future__ import annotations

import math
from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "") -> str:
    """Align ``rows`` under ``headers``: numbers flush right, everything else flush left."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    numeric = [
        bool(rows) and all(_is_number(row[i]) for row in rows if row[i] is not None)
        for i in range(len(headers))
    ]

    def line(texts: Sequence[str]) -> str:
        parts = [
            t.rjust(w) if num else t.ljust(w)
            for t, w, num in zip(texts, widths, numeric, strict=True)
        ]
        return (indent + "  ".join(parts)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def seconds(value: object) -> str:
    """A duration for people: ``850 ms``, ``4.21 s``, ``-`` when unknown."""
    if not _is_number(value):
        return "-"
    s = float(value)  # type: ignore[arg-type]
    if math.isnan(s):
        return "-"
    if abs(s) < 1.0:
        return f"{s * 1e3:.3g} ms"
    return f"{s:,.3f} s"


def number(value: object, digits: int = 4) -> str:
    """A number with ``digits`` significant digits, integers with thousands separators."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.{digits}g}"
    return str(value)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return number(value)
    return str(value)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
