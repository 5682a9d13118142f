"""Plain-text formatting shared by the summary, the CLI listings and the scorecard."""

from __future__ import annotations

import math
import re
import textwrap
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


def fit_width(text: str, width: int) -> str:
    """``text`` with no line longer than ``width``: in each table drawn by
    :func:`table` (a header line over a line of dashes) the widest column is
    narrowed and its cells wrapped onto continuation lines; any other long
    line is wrapped under its own indentation."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and _is_rule(lines[i + 1]):
            end = i + 2
            while end < len(lines) and lines[end].strip():
                end += 1
            out.extend(_fit_table(lines[i:end], width))
            i = end
            continue
        out.extend(_wrap_line(lines[i], width))
        i += 1
    return "\n".join(out)


def _is_rule(line: str) -> bool:
    return "-" in line and set(line.strip()) <= {"-", " "} and "--" in line


def _fit_table(lines: list[str], width: int) -> list[str]:
    rule = lines[1]
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
    longest = max(len(x) for x in lines)
    if longest <= width or not spans:
        return lines
    lead = spans[0][0]  # the table's indentation
    full = [b - a for a, b in spans]
    starts = [0] + [a for a, _ in spans[1:]]

    def cells(line: str) -> list[str]:
        # A cell runs from its column's start to the next column's start.
        padded = line.ljust(spans[-1][1])
        ends = [*starts[1:], len(padded)]
        first = padded[lead : ends[0]] if not padded[:lead].strip() else padded[: ends[0]]
        return [first] + [padded[starts[k] : ends[k]] for k in range(1, len(spans))]

    rows = [cells(line) for n, line in enumerate(lines) if n != 1]
    # Narrow the column with the most room, one character at a time, until
    # the table fits; none gets narrower than its longest word or 12 characters.
    floor = [
        min(full[k], max(12, *(len(w) for r in rows for w in r[k].split())))
        for k in range(len(spans))
    ]
    widths = list(full)
    excess = longest - width
    # Then, if it must, below the longest word (words are cut), down to 8.
    for limits in (floor, [min(f, 8) for f in full]):
        while excess > 0:
            k = max(range(len(widths)), key=lambda j: widths[j] - limits[j])
            if widths[k] <= limits[k]:
                break
            widths[k] -= 1
            excess -= 1

    out = []
    for n, line in enumerate(lines):
        if n == 1:
            out.append(" " * lead + "  ".join("-" * w for w in widths))
            continue
        wrapped = [
            # A column kept at its width keeps its alignment (numbers flush right).
            [c[: full[k]]]
            if widths[k] == full[k]
            else textwrap.wrap(c.strip(), widths[k], break_on_hyphens=False) or [""]
            for k, c in enumerate(cells(line))
        ]
        for r in range(max(len(w) for w in wrapped)):
            parts = [(w[r] if r < len(w) else "").ljust(widths[k]) for k, w in enumerate(wrapped)]
            out.append((" " * lead + "  ".join(parts)).rstrip())
    return [w for line in out for w in _wrap_line(line, width)]


def _wrap_line(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    return textwrap.wrap(
        line.strip(),
        width,
        initial_indent=indent,
        subsequent_indent=indent + "    ",
        break_on_hyphens=False,
    ) or [line]
