"""Parameter sweeps: grids, backends (serial, local processes, Dask), resuming,
failed runs and the errors for bad sweeps."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

import hetsched
from hetsched import cli, sweeps

BASE = {
    "name": "tiny",
    "duration_s": 1.0,
    "scheduler": "cfs",
    "machine": {"preset": "big-little-4+4"},
    "workload": {
        "programs": [
            {"name": "par", "kind": "parallel", "threads": 4, "work_ms": 40},
            {"name": "seq", "kind": "sequential", "work_ms": 30},
        ]
    },
}

GRID = {"scheduler": ["cfs", "faster-first"], "seed": [1, 2]}


def _deterministic(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=[c for c in sweeps.WALL_CLOCK_COLUMNS if c in table.columns])


def test_grid_is_a_product_of_axes_and_zipped_groups() -> None:
    table = hetsched.sweep(
        BASE,
        {"scheduler": ["cfs", "dwrr"]},
        zipped=[
            {"machine.preset": ["big-little-4+4", "smp-4"], "workload.programs[0].threads": [8, 4]}
        ],
        backend="serial",
    )
    assert len(table) == 4
    assert list(table.columns[:6]) == [
        "run",
        "run_id",
        "scheduler",
        "machine.preset",
        "workload.programs[0].threads",
        "status",
    ]
    pairs = set(zip(table["machine.preset"], table["workload.programs[0].threads"], strict=True))
    assert pairs == {("big-little-4+4", 8), ("smp-4", 4)}
    assert (table["status"] == "ok").all()
    assert set(table["scheduler"]) == {"cfs", "dwrr"}
    assert (table["makespan_s"] > 0).all()
    # Eight threads of parallel work take longer on 4 cores than 4 threads on 4.
    smp = table[table["machine.preset"] == "smp-4"]
    assert smp["tasks"].iloc[0] == 5


def test_local_processes_give_the_serial_table(tmp_path: Path) -> None:
    serial = hetsched.sweep(BASE, GRID, backend="serial")
    local = hetsched.sweep(BASE, GRID, backend="local", workers=2, out=tmp_path / "s")
    pd.testing.assert_frame_equal(_deterministic(serial), _deterministic(local))
    # Same scenario and seed, same run: the trace hashes differ only across seeds/policies.
    assert local["trace_hash"].nunique() == len(local)


def test_dask_local_cluster_gives_the_local_table() -> None:
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        on_dask = hetsched.sweep(BASE, GRID, backend=client)
        by_address = hetsched.sweep(
            BASE, {"seed": [1, 2]}, backend=f"dask://{cluster.scheduler_address}"
        )
    local = hetsched.sweep(BASE, GRID, backend="local", workers=2)
    pd.testing.assert_frame_equal(_deterministic(on_dask), _deterministic(local))
    assert len(by_address) == 2 and (by_address["status"] == "ok").all()


def test_unreachable_dask_scheduler_fails_quickly() -> None:
    pytest.importorskip("distributed")
    started = time.monotonic()
    with pytest.raises(
        sweeps.SweepError, match=r"no Dask scheduler answered at tcp://127\.0\.0\.1:9"
    ):
        sweeps.connect_dask("127.0.0.1:9", timeout_s=1.0)
    # Not a hang: bounded by the timeout plus the client's own shutdown.
    assert time.monotonic() - started < 60


def test_outputs_table_and_run_folders(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    table = hetsched.sweep(BASE, GRID, out=out, backend="serial")
    from_parquet = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(from_parquet, table, check_dtype=False)
    from_csv = pd.read_csv(out / "results.csv")
    assert list(from_csv["seed"]) == list(table["seed"])
    for row in table.to_dict("records"):
        run = out / "runs" / row["run_id"]
        assert json.loads((run / "row.json").read_text())["status"] == "ok"
        assert (run / "tasks.csv").exists()
        # The swept values reached the run: its own summary names them.
        summary = json.loads((run / "summary.json").read_text())
        assert (summary["scheduler"], summary["seed"]) == (row["scheduler"], row["seed"])
    spec = json.loads((out / "sweep.json").read_text())
    assert spec["axes"] == ["scheduler", "seed"]


def test_failed_runs_are_recorded_and_the_others_go_on(tmp_path: Path) -> None:
    table = hetsched.sweep(
        BASE, {"scheduler": ["cfs", "no-such-policy", "dwrr"]}, out=tmp_path, backend="serial"
    )
    assert list(table["status"]) == ["ok", "error", "ok"]
    assert "no-such-policy" in table.loc[1, "error"]
    assert table.loc[0, "error"] == ""
    # A re-run tries the failed run again and keeps the finished ones.
    again = hetsched.sweep(
        BASE, {"scheduler": ["cfs", "no-such-policy", "dwrr"]}, out=tmp_path, backend="serial"
    )
    assert again.attrs["skipped"] == 2 and again.attrs["ran"] == 1


def test_interrupted_sweep_resumes_where_it_stopped(tmp_path: Path) -> None:
    seen: list[int] = []

    def stop_after_three(row: dict) -> None:
        seen.append(row["run"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    grid = {"seed": [1, 2, 3, 4, 5, 6]}
    with pytest.raises(KeyboardInterrupt):
        hetsched.sweep(BASE, grid, out=tmp_path, backend="serial", on_result=stop_after_three)
    partial = sweeps.read_table(tmp_path)
    assert sorted(partial["run"]) == seen
    resumed = hetsched.sweep(BASE, grid, out=tmp_path, backend="serial")
    assert resumed.attrs == {**resumed.attrs, "skipped": 3, "ran": 3}
    fresh = hetsched.sweep(BASE, grid, backend="serial")
    pd.testing.assert_frame_equal(_deterministic(resumed), _deterministic(fresh))


def test_a_half_written_run_is_not_taken_as_finished(tmp_path: Path) -> None:
    table = hetsched.sweep(BASE, {"seed": [1, 2]}, out=tmp_path, backend="serial")
    (tmp_path / "runs" / table.loc[0, "run_id"] / "row.json").unlink()
    again = hetsched.sweep(BASE, {"seed": [1, 2]}, out=tmp_path, backend="serial")
    assert again.attrs["ran"] == 1


@pytest.mark.parametrize(
    ("grid", "zipped", "message"),
    [
        ({}, [], "grid is empty"),
        ({"seed": []}, [], "list of values is empty"),
        ({"seed": 3}, [], "expected a list of values"),
        ({"sheduler": ["cfs"]}, [], "nearest valid paths: scheduler"),
        (
            {"workload.programs[0].thread": [2]},
            [],
            r"nearest valid paths: workload\.programs\[0\]\.threads",
        ),
        ({}, [{"seed": [1, 2], "scheduler": ["cfs"]}], "equal lengths"),
        ({"seed": [1]}, [{"seed": [2]}], "swept twice"),
        ({"machine..preset": [1]}, [], "not a scenario path"),
    ],
)
def test_bad_sweeps_are_clear_errors(grid, zipped, message) -> None:
    with pytest.raises(sweeps.SweepError, match=message):
        hetsched.sweep(BASE, grid, zipped=zipped, backend="serial")


def test_sweep_file_and_cli(tmp_path: Path, capsys) -> None:
    (tmp_path / "base.json").write_text(json.dumps(BASE))
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text(
        'base = "base.json"\nname = "t"\n[set]\nduration_s = 0.5\n'
        '[grid]\nseed = [1, 2]\n[[zip]]\nscheduler = ["cfs", "dwrr"]\n'
        '"machine.preset" = ["smp-4", "big-little-4+4"]\n'
    )
    spec = sweeps.load_sweep(sweep_file)
    assert spec.axes() == ["seed", "scheduler", "machine.preset"] and len(spec.points()) == 4
    out = tmp_path / "out"
    assert cli.main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "4 of 4 runs ok" in err
    assert len(pd.read_csv(out / "results.csv")) == 4
    assert cli.main(["sweep", str(sweep_file), "--out", str(out), "-q"]) == 0


def test_sweep_file_errors_are_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('base = "missing.toml"\n[grid]\nseed = [1]\n')
    assert cli.main(["sweep", str(bad)]) == 2
    assert "missing.toml: no such scenario file" in capsys.readouterr().err
    bad.write_text("[grid]\nseed = [1]\n")
    assert cli.main(["sweep", str(bad)]) == 1
    assert "base: expected the path of a scenario file" in capsys.readouterr().err
    bad.write_text('base = {name = "x"}\ngird = 1\n')
    assert cli.main(["sweep", str(bad)]) == 1
    assert "unknown key(s) gird" in capsys.readouterr().err


def test_the_demo_sweep_file_is_valid() -> None:
    spec = sweeps.load_sweep(Path(__file__).resolve().parents[1] / "scenarios" / "sweep-demo.toml")
    assert 20 <= len(spec.points()) <= 60


def test_a_swept_preset_replaces_the_machine(tmp_path: Path) -> None:
    table = hetsched.sweep(
        BASE, {"machine.preset": ["smp-4", "phone-1+3+4"]}, out=tmp_path, backend="serial"
    )
    ncpus = [len(pd.read_csv(tmp_path / "runs" / r / "cpus.csv")) for r in table["run_id"]]
    assert ncpus == [4, 8]
    # A base file is kept as written, so its preset can be swept too.
    path = tmp_path / "base.json"
    path.write_text(json.dumps(BASE))
    from_file = hetsched.sweep(path, {"machine.preset": ["smp-4", "phone-1+3+4"]}, backend="serial")
    pd.testing.assert_frame_equal(_deterministic(from_file), _deterministic(table))
    with pytest.raises(sweeps.SweepError, match="preset is already expanded"):
        hetsched.sweep(hetsched.load(path), {"machine.preset": ["smp-4"]}, backend="serial")
