"""Verdicts of reproductions are computed from the numbers, never typed in."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetsched.reproduce import tolerance_text, verdict_within


@pytest.mark.parametrize(
    ("published", "simulated", "rel_tol", "abs_tol", "trend_ok", "expected"),
    [
        # published, simulated, rel, abs, trend -> verdict
        (3.3, 3.3, 0.15, None, False, "match"),
        (3.3, 3.79, 0.15, None, False, "match"),  # just inside +15 %
        (3.3, 2.81, 0.15, None, False, "match"),  # just inside -15 %
        (3.3, 3.9, 0.15, None, True, "trend"),  # +18 %, ordering holds
        (3.3, 3.9, 0.15, None, False, "differs"),
        (0.0, 0.08, None, 0.10, False, "match"),  # absolute tolerance around zero
        (0.0, 0.12, None, 0.10, False, "differs"),
        (0.0, 0.12, 0.5, None, False, "differs"),  # relative to zero allows nothing
        (10.0, 10.4, 0.01, 0.5, False, "match"),  # the looser of the two applies
        (-5.0, -5.5, 0.1, None, False, "match"),  # relative to |published|
        (1.0, math.nan, 0.5, 1.0, True, "trend"),  # NaN never matches
        (1.0, math.nan, 0.5, 1.0, False, "differs"),
    ],
)
def test_verdict_table(published, simulated, rel_tol, abs_tol, trend_ok, expected) -> None:
    got = verdict_within(published, simulated, rel_tol=rel_tol, abs_tol=abs_tol, trend_ok=trend_ok)
    assert got == expected


@pytest.mark.parametrize(("rel_tol", "abs_tol"), [(None, None), (-0.1, None), (None, -1.0)])
def test_tolerance_must_be_given_and_non_negative(rel_tol, abs_tol) -> None:
    with pytest.raises(ValueError, match="tol"):
        verdict_within(1.0, 1.0, rel_tol=rel_tol, abs_tol=abs_tol)


@pytest.mark.parametrize(
    ("rel_tol", "abs_tol", "text"),
    [(0.15, None, "±15%"), (None, 0.1, "±0.1"), (0.03, 0.5, "±3% or ±0.5"), (None, None, "-")],
)
def test_tolerance_text(rel_tol, abs_tol, text) -> None:
    assert tolerance_text(rel_tol, abs_tol) == text


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(finite, finite, st.floats(0, 10), st.floats(0, 10))
def test_a_looser_tolerance_never_turns_a_match_into_a_miss(pub, sim, tol, extra) -> None:
    if verdict_within(pub, sim, rel_tol=tol) == "match":
        assert verdict_within(pub, sim, rel_tol=tol + extra) == "match"
    if verdict_within(pub, sim, abs_tol=tol) == "match":
        assert verdict_within(pub, sim, abs_tol=tol + extra) == "match"


@given(finite, st.floats(0, 10), st.booleans())
def test_equal_values_always_match(value, tol, trend_ok) -> None:
    assert verdict_within(value, value, abs_tol=tol, trend_ok=trend_ok) == "match"
