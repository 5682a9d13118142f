"""Sweep workers: what a worker imports, its start-up accounting, and the
pool that lives for the whole sweep (one process runs many runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hetsched
from childenv import child_env

ROOT = Path(__file__).resolve().parents[1]

BASE = {
    "name": "tiny",
    "duration_s": 0.5,
    "scheduler": "cfs",
    "machine": {"preset": "smp-4"},
    "workload": {"programs": [{"name": "par", "kind": "parallel", "threads": 4, "work_ms": 20}]},
}

#: Heavy packages a run does not need: only tables and figures use them.
HEAVY = ("pandas", "matplotlib", "pyarrow", "tqdm", "dask", "distributed")

PROBE = r"""
import json, sys
from hetsched import _sweep_worker as w
row, raw = w.run_point(sys.argv[1], [("seed", "3")], False)
assert row["status"] == "ok", row
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))
print(json.dumps({"heavy": heavy, "events": row["events"]}))
"""


def test_a_worker_runs_a_point_without_importing_tables_or_figures() -> None:
    env = child_env()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(BASE), ",".join(HEAVY)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["heavy"] == [], f"a sweep worker imported {out['heavy']}"
    assert out["events"] > 0


def test_the_sweeps_run_point_is_the_workers() -> None:
    # Dask pickles run_point by name: the name must be the light module's.
    from hetsched import _sweep_worker, sweeps

    assert sweeps.run_point is _sweep_worker.run_point
    assert sweeps.run_point.__module__ == "hetsched._sweep_worker"


def test_two_workers_start_once_and_share_the_runs(tmp_path: Path) -> None:
    grid = {"seed": list(range(1, 9))}
    table = hetsched.sweep(BASE, grid, workers=2, out=tmp_path / "s")
    assert len(table) == 8 and (table["status"] == "ok").all()
    startup = table.attrs["worker_startup_cpu_s"]
    # At most one start per worker for eight runs: the pool is reused, not
    # respawned. (A run takes a few ms: on a busy machine the first worker
    # can finish all eight before the second is ready, which then goes
    # without reporting a start.)
    assert 1 <= len(startup) <= 2
    assert all(0 < s < 5 for s in startup)
    assert table.attrs["workers_replaced"] == 0


def test_serial_sweeps_report_no_worker_starts() -> None:
    table = hetsched.sweep(BASE, {"seed": [1, 2]}, backend="serial")
    assert table.attrs["worker_startup_cpu_s"] == []


@pytest.mark.parametrize("module", ["hetsched", "hetsched._sweep_worker", "hetsched.sweeps"])
def test_light_modules_do_not_import_pandas(module: str) -> None:
    env = child_env()
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m == 'pandas'))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_command_line_starts_without_tables() -> None:
    """Every ``hetsched`` command builds the whole parser first (the ``trace``
    commands included): that must not import pandas or numpy, or each
    command, a sweep's among them, pays for them before it starts."""
    env = child_env()
    code = (
        "import sys; from hetsched import cli; cli._parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'numpy'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_folders_written_by_workers_match_those_written_by_the_sweep(tmp_path: Path) -> None:
    grid = {"seed": [1, 2, 3, 4]}
    hetsched.sweep(BASE, grid, backend="serial", out=tmp_path / "serial")
    hetsched.sweep(BASE, grid, workers=2, out=tmp_path / "local")
    serial = sorted((tmp_path / "serial" / "runs").iterdir())
    local = sorted((tmp_path / "local" / "runs").iterdir())
    assert [d.name for d in serial] == [d.name for d in local] and len(serial) == 4
    for a, b in zip(serial, local, strict=True):
        ra = json.loads((a / "row.json").read_text())
        rb = json.loads((b / "row.json").read_text())
        assert set(ra["files"]) == set(rb["files"]) >= {"summary.json", "tasks.csv"}
        # Byte for byte, but for what holds wall time or the time of saving.
        for name in set(ra["files"]) - {"summary.json", "manifest.json"}:
            assert ra["files"][name] == rb["files"][name], f"{a.name}/{name} differs"
        assert (a / "tasks.csv").read_bytes() == (b / "tasks.csv").read_bytes()


#: The worker's own command line, with a report of the heavy packages it
#: holds when it exits (after its input ends).
WATCHED_WORKER = (
    "import atexit, json, os, sys\n"
    "def report():\n"
    "    heavy = {m.split('.')[0] for m in sys.modules} & set(os.environ['HEAVY'].split(','))\n"
    "    os.write(2, ('HEAVY ' + json.dumps(sorted(heavy)) + '\\n').encode())\n"
    "atexit.register(report)\n"
)


def test_a_worker_writes_run_folders_without_pandas_or_matplotlib(tmp_path: Path) -> None:
    import os
    import tomllib

    from hetsched._sweep_worker import BOOTSTRAP, recv, send

    vm = tomllib.loads((ROOT / "scenarios" / "aash-aware-guest.toml").read_text("utf-8"))
    dyn = tomllib.loads((ROOT / "scenarios" / "hotplug-stop.toml").read_text("utf-8"))
    jobs = [
        (json.dumps(BASE), [("seed", "3")], False),
        (json.dumps(vm), [("duration_s", "2.0")], False),  # virtual machines
        (json.dumps(dyn), [], False),  # reconfigurations
    ]
    env = {**child_env(), "HEAVY": ",".join(HEAVY)}
    with subprocess.Popen(
        [sys.executable, "-c", WATCHED_WORKER + BOOTSTRAP, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            send(proc.stdin, {"sys_path": sys.path})
            ready = recv(proc.stdout.fileno())
            assert ready[0] == "ready" and 0 < ready[1] < 5
            for key, (base_json, overrides, trace) in enumerate(jobs):
                run_dir = tmp_path / f"run{key}"
                send(proc.stdin, (key, (base_json, overrides, trace, str(run_dir), {}, {})))
                got, (row, raw, saved) = recv(proc.stdout.fileno())
                assert got == key and saved and raw is None and row["status"] == "ok", row
                files = json.loads((run_dir / "row.json").read_text())["files"]
                assert {"tasks.csv", "programs.csv", "cpus.csv", "manifest.json"} <= set(files)
            proc.stdin.close()
            err = proc.stderr.read().decode()
            assert proc.wait(timeout=30) == 0, err
        finally:
            if proc.poll() is None:
                proc.kill()
    assert (tmp_path / "run1" / "vms.csv").exists()
    assert (tmp_path / "run2" / "reconfigs.csv").exists()
    heavy = [line for line in err.splitlines() if line.startswith("HEAVY ")]
    assert heavy == ["HEAVY []"], f"a worker that wrote run folders held: {err[-2000:]}"
