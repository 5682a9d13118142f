"""`eevdf`'s HRTICK: with the slice-end timer on, two spinners sharing a CPU
run for exactly one slice each; with it off (the kernel's default), a slice
ends only at a tick, as on a kernel without HRTICK."""

from __future__ import annotations

import numpy as np

from eevdf_scenarios import machine, run_traced, spinner
from hetsched import tracefs


def slices_ms(extra: str) -> np.ndarray:
    policy = f"eevdf[base_slice_ms=1.4{extra}]"
    res = run_traced(machine("hrtick", 0.2, policy, 1) + spinner("a", 1000) + spinner("b", 1000))
    return tracefs.slices(res.trace)["dur_ms"].to_numpy(dtype=float)


def test_hrtick_ends_every_slice_on_time() -> None:
    # Each switch arms the timer 1.4 ms ahead; both spinners are nice 0, so
    # at each expiry the running one has used its slice and the other one
    # has the earlier deadline: every preempted interval lasts 1.4 ms.
    sl = slices_ms(",hrtick=true")
    assert len(sl) > 100
    assert np.allclose(sl[2:], 1.4, atol=1e-9), np.unique(np.round(sl, 6))


def test_without_hrtick_slices_end_at_ticks() -> None:
    # 250 Hz: a slice ends at the first 4 ms tick past the deadline.
    sl = slices_ms("")
    assert len(sl) > 10
    assert np.median(sl) >= 4.0 - 1e-9
    assert np.allclose(np.round(sl[1:] / 4.0), sl[1:] / 4.0, atol=1e-6)
