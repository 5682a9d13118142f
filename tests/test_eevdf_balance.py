"""`eevdf`'s periodic balancing follows Linux 6.x (`fair::Lb6`), `cfs`'s the
2.6-era rules: three spinners on two CPUs (docs/eevdf.md, "Periodic
balancing as Linux 6.x does it")."""

from __future__ import annotations

import numpy as np

from eevdf_scenarios import machine, run_traced, spinner
from hetsched import tracefs


def migration_intervals_ms(policy: str) -> np.ndarray:
    spinners = "".join(spinner(n, 10000) for n in "abc")
    res = run_traced(machine("spin3", 2.0, policy, 2) + spinners)
    t = tracefs.migrations(res.trace)["t_ns"].to_numpy(dtype=float) / 1e6
    return np.diff(t[t > 300.0])


def test_cfs_pushes_a_spinner_every_68_ms() -> None:
    # 2 ms × busy_factor 16 = 32 ms between balances of the busy CPU; the
    # first finds the task's load (1024) above the imbalance (512), the
    # second moves it: 68 ms with the tick phases.
    iv = migration_intervals_ms("cfs")
    assert len(iv) > 10
    assert np.allclose(iv, 68.0)


def test_eevdf_pulls_only_once_the_cpu_left_is_fully_busy() -> None:
    # The CPU a spinner left keeps one whose PELT utilisation is near 512:
    # it has spare capacity (below 1024 / 1.17) and, busy, pulls nothing
    # for about 57 ms; then two balances 28 ms apart (a failure, then the
    # move): never sooner than 57 + 28 ms, and far less often than cfs.
    iv = migration_intervals_ms("eevdf[base_slice_ms=1.4,hrtick=true]")
    assert 5 < len(iv) < 20
    assert iv.min() >= 85.0
    assert np.median(iv) > 1.5 * 68.0
    # Without balancing nothing moves after the start.
    assert len(migration_intervals_ms("eevdf[balance=false]")) == 0
