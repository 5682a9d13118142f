"""The Dask backend on a LocalCluster of two worker processes: the runs go
to other processes that share nothing with the sweep but the scenario (the
results come back over the network), and the table is the local one."""

from __future__ import annotations

import os

import pandas as pd
import pytest

import hetsched
from hetsched import sweeps

BASE = {
    "name": "tiny",
    "duration_s": 0.5,
    "scheduler": "cfs",
    "machine": {"preset": "smp-4"},
    "workload": {"programs": [{"name": "par", "kind": "parallel", "threads": 4, "work_ms": 20}]},
}
GRID = {"scheduler": ["cfs", "eevdf"], "seed": [1, 2, 3]}


def _deterministic(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=[c for c in sweeps.WALL_CLOCK_COLUMNS if c in table.columns])


def test_a_local_cluster_of_two_processes_gives_the_serial_table(tmp_path) -> None:
    distributed = pytest.importorskip(
        "distributed", reason="the Dask backend needs the 'distributed' package ([dask] extra)"
    )
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        pids = set(client.run(os.getpid).values())
        table = hetsched.sweep(
            BASE, GRID, backend=f"dask://{cluster.scheduler_address}", out=tmp_path / "d"
        )
    # Two worker processes, neither of them this one.
    assert len(pids) == 2 and os.getpid() not in pids
    serial = hetsched.sweep(BASE, GRID, backend="serial")
    pd.testing.assert_frame_equal(_deterministic(table), _deterministic(serial))
    # The folder was written here from the results that came back.
    assert len(list((tmp_path / "d" / "runs").glob("*/summary.json"))) == len(serial)
