"""AASH reproductions (seed 003) at quick scale: every row has a computed
verdict, the mechanism rows hold, and the figures draw."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.reproduce import aash, registry, run_reproductions

IDS = [
    "aash-migr",
    "aash-equal",
    "aash-1vm",
    "aash-aware",
    "aash-mixed-aware",
    "aash-seq-a",
    "aash-seq-b",
    "aash-seq-c",
    "aash-prio",
]


def test_all_aash_rows_run_with_computed_verdicts(tmp_path: Path) -> None:
    rows = run_reproductions(IDS, scale="quick", plots_dir=tmp_path)
    assert {r.id for r in rows} == set(IDS)
    assert all(r.verdict in ("match", "trend", "differs") for r in rows), [
        (r.id, r.note) for r in rows if r.verdict == "error"
    ]
    for rid in IDS:
        assert registry[rid].plot is not None
        assert (tmp_path / f"{rid}.png").stat().st_size > 1000


def test_equal_sharing_and_priorities_hold_at_quick_scale() -> None:
    rows = aash.aash_equal("quick").rows + aash.aash_prio("quick").rows
    assert [r.verdict for r in rows] == ["match"] * len(rows), [
        (r.claim, r.simulated) for r in rows
    ]


@pytest.mark.parametrize(("share", "threads", "fraction"), [(0.87, 8, 0.4555), (0.44, 6, 0.1158)])
def test_sequential_work_fraction_gives_the_papers_time_share(
    share: float, threads: int, fraction: float
) -> None:
    f = aash.seq_work_fraction(share, threads)
    assert f == pytest.approx(fraction, abs=1e-4)
    # At equal speeds the sequential part takes `share` of the time.
    assert f / (f + (1 - f) / threads) == pytest.approx(share)
