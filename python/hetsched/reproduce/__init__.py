"""Reproductions of the seed papers' published results.

``hetsched reproduce <id>`` (or ``all``) runs them and prints each published
value beside the simulated one with a computed verdict; ``--scorecard`` writes
the table to ``docs/validation.md``. See :mod:`hetsched.reproduce.framework`
for how to add one; :mod:`hetsched.reproduce.li` is the worked example.
"""

from .framework import (
    KINDS,
    SCALES,
    TREND_FLOOR,
    VERDICTS,
    Outcome,
    Reproduction,
    Row,
    UnknownReproductionError,
    bound_row,
    by_paper,
    check_band,
    headline,
    registry,
    reproduction,
    resolve_ids,
    row_kind,
    rows_table,
    run_reproductions,
    scorecard_markdown,
    tolerance_text,
    trend_margin,
    verdict_trend,
    verdict_within,
    within_row,
)

# Importing a paper's module registers its reproductions.
from . import li, li_asym, li_isa, patel  # noqa: F401  isort: skip
from . import aash, chameleon, hotplug  # noqa: F401  isort: skip

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
