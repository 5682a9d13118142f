"""`eevdf[kernel=6.18,charge=continual]`: the running task charged at every
instant, as a task reading its own CPU-time clock is, under Linux 6.17+'s
`update_curr` rule (past its protected slice, every charge reschedules). A
sleeper woken beside a spinner then runs at once, as in the kernel's traces
(docs/real-linux.md, "The sleeper's tail"); with HRTICK ending the slices
instead, a third of its wake-ups wait for the spinner's next tick."""

from __future__ import annotations

import numpy as np

import hetsched
from eevdf_scenarios import machine, run_traced, spinner
from hetsched import tracefs

SLEEPER = """
[[workload.programs]]
name = "sleeper"
kind = "phases"
loops = 100000
affinity = [0]
phases = [{ compute_ms = 2.0 }, { sleep_ms = 8.0 }]
""" + spinner("spin", 100000, cpu=0)

PAIR = spinner("nice0", 100000, cpu=0) + spinner("nice5", 100000, nice=5, cpu=0)


def run(policy: str, body: str) -> hetsched.RunResult:
    return run_traced(machine("continual", 2.0, policy, 2) + body)


def task_ids(res: hetsched.RunResult, program: str) -> list[int]:
    return [int(r["task"]) for r in res.tasks.to_dict("records") if r["program"] == program]


def sleeper_latencies_ms(policy: str) -> np.ndarray:
    res = run(policy, SLEEPER)
    wk = tracefs.wakeups(res.trace)
    wk = wk[wk["task"].isin(task_ids(res, "sleeper")) & ~wk["new"]]
    return wk["latency_ms"].to_numpy(dtype=float)


def test_a_woken_sleeper_runs_at_once_when_charged_continually() -> None:
    # The sleeper wakes with lag 0 (it slept delayed, and DELAY_ZERO cleared
    # the lag it had when picked), level with the spinner: V = v. The
    # spinner's deadline, renewed continually, is at most a slice ahead, so
    # the wake-up itself does not preempt; but the spinner, past its
    # protection, is charged again 1 ns later, is then not eligible, and
    # update_curr reschedules: the sleeper runs.
    lat = sleeper_latencies_ms("eevdf[kernel=6.18,charge=continual]")
    assert len(lat) > 150
    assert lat.max() < 1e-5, np.unique(np.round(lat, 3))


def test_with_hrtick_in_its_stead_a_third_of_the_wake_ups_wait() -> None:
    # HRTICK ends each slice on time as continual charging does, but between
    # ticks nothing charges the lone spinner: its deadline is renewed at its
    # 4 ms ticks only. A wake-up that comes less than a slice (1.4 ms) after
    # such a renewal finds the spinner's deadline earlier than its own and
    # waits for the next tick, 2.6 to 4 ms; the others find it stale (the
    # wake-up's charge renews it to exactly the sleeper's) and win the tie.
    lat = sleeper_latencies_ms("eevdf[kernel=6.18,hrtick=true]")
    waited = lat[lat > 1e-5]
    assert 0.2 < len(waited) / len(lat) < 0.45
    assert waited.min() > 2.5 and waited.max() <= 4.0


def test_nice_pair_alternates_one_nice_5_slice_with_its_weight_of_nice_0() -> None:
    # Charged continually: nice 5 runs its slice of 1.4 ms, which moves its
    # vruntime by 1.4 × 1024 / 335 = 4.279 ms; nice 0 then runs until it is
    # level again, 4.279 ms (a run of several slices of its own: each time
    # its deadline is renewed it is still the pick). Shares 75.35 / 24.65 %.
    res = run("eevdf[kernel=6.18,charge=continual]", PAIR)
    sl = tracefs.slices(res.trace)
    n0 = sl[sl["task"].isin(task_ids(res, "nice0"))]["dur_ms"].to_numpy(dtype=float)
    n5 = sl[sl["task"].isin(task_ids(res, "nice5"))]["dur_ms"].to_numpy(dtype=float)
    assert len(n5) > 300
    assert np.allclose(n5[1:], 1.4, atol=1e-6), np.unique(np.round(n5, 4))
    assert np.allclose(np.median(n0), 1.4 * 1024 / 335, atol=0.01), np.median(n0)
