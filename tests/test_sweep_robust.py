"""Sweeps that cannot lie: mixed-type axes refused up front, tables never
stale, dead workers replaced (real SIGKILLs), resumes that check each run's
files, one sweep per folder, workers that die with the sweep, and a sweep
saved as a plain script (no ``__main__`` guard)."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import hetsched
from childenv import child_env
from hetsched import cli, sweeps
from hetsched._toml import toml_module

ROOT = Path(__file__).resolve().parents[1]
BASE: dict[str, Any] = {
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
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _deterministic(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=[c for c in sweeps.WALL_CLOCK_COLUMNS if c in table.columns])


def _children(pid: int) -> dict[int, str]:
    """Processes whose parent is ``pid``, with their command lines."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out[int(d.name)] = cmd
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _workers(pid: int) -> list[int]:
    return [p for p, cmd in _children(pid).items() if "hetsched._sweep_worker" in cmd]


# -- item 4: types, tables ------------------------------------------------------


def test_an_axis_of_mixed_types_is_refused_before_any_run(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    with pytest.raises(sweeps.SweepError) as e:
        hetsched.sweep(
            BASE,
            {"workload.programs[0].threads": [6, "x"]},
            out=tmp_path,
            backend="serial",
            on_result=ran.append,
        )
    msg = str(e.value)
    assert "grid.workload.programs[0].threads" in msg
    assert "6 is a number" in msg and "'x' is a string" in msg
    assert not ran and not (tmp_path / "runs").exists()
    # In a zipped group too; ints and floats are one type.
    with pytest.raises(sweeps.SweepError, match=r"zip\[0\]\.seed: values of different types"):
        hetsched.sweep(BASE, {}, zipped=[{"seed": [1, True]}], backend="serial")
    ok = hetsched.sweep(BASE, {"duration_s": [0.5, 1]}, backend="serial")
    assert list(ok["status"]) == ["ok", "ok"]


def test_a_stale_table_never_survives_and_parquet_failures_are_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "results.parquet").write_bytes(b"an earlier sweep's table")
    (tmp_path / "results.csv").write_text("run\n99\n")

    def cannot_store(*_a: Any, **_k: Any) -> None:
        raise TypeError("a column Arrow does not take")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", cannot_store)
    table = hetsched.sweep(BASE, {"seed": [1, 2]}, out=tmp_path, backend="serial")
    assert not (tmp_path / "results.parquet").exists()
    assert json.loads((tmp_path / "sweep.json").read_text())["axes"] == ["seed"]
    assert list(pd.read_csv(tmp_path / "results.csv")["seed"]) == [1, 2]
    assert table.attrs["written"] == ["results.csv"]
    assert "Arrow cannot store the table" in table.attrs["parquet_skipped"]
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_without_pyarrow_the_cli_says_parquet_was_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "base.json").write_text(json.dumps(BASE))
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('base = "base.json"\n[grid]\nseed = [1, 2]\n')
    monkeypatch.setattr(sweeps, "_pyarrow_available", lambda: False)
    out = tmp_path / "out"
    assert cli.main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "table in" in err and "results.csv (results.parquet skipped: pyarrow" in err
    assert "results.parquet and" not in err
    assert not (out / "results.parquet").exists() and (out / "results.csv").exists()


# -- item 4: resume checks each run's files --------------------------------------


def test_resume_reruns_runs_whose_files_are_missing_or_changed(tmp_path: Path) -> None:
    grid = {"seed": [1, 2, 3, 4]}
    first = hetsched.sweep(BASE, grid, out=tmp_path, backend="serial")
    runs = [tmp_path / "runs" / r for r in first["run_id"]]
    row = json.loads((runs[0] / "row.json").read_text())
    assert {"summary.json", "tasks.csv", "cpus.csv"} <= set(row["files"])
    (runs[0] / "summary.json").unlink()
    (runs[1] / "tasks.csv").write_text("")
    # A row.json without checksums (an older sweep) is not trusted either.
    old = json.loads((runs[2] / "row.json").read_text())
    del old["files"]
    (runs[2] / "row.json").write_text(json.dumps(old))
    again = hetsched.sweep(BASE, grid, out=tmp_path, backend="serial")
    assert again.attrs["ran"] == 3 and again.attrs["skipped"] == 1
    assert (runs[0] / "summary.json").exists() and (runs[1] / "tasks.csv").stat().st_size > 0
    pd.testing.assert_frame_equal(_deterministic(again), _deterministic(first))
    assert "files" not in again.columns


# -- item 4: one sweep per folder, workers replaced, workers die with the sweep ----


def test_a_second_sweep_into_a_held_folder_is_refused_at_once(tmp_path: Path) -> None:
    with sweeps._FolderLock(tmp_path):
        ran: list[dict[str, Any]] = []
        with pytest.raises(sweeps.SweepError, match=rf"another sweep \(PID {os.getpid()}\)"):
            hetsched.sweep(
                BASE, {"seed": [1]}, out=tmp_path, backend="serial", on_result=ran.append
            )
        assert not ran
    # Released: the folder can be used again.
    assert len(hetsched.sweep(BASE, {"seed": [1]}, out=tmp_path, backend="serial")) == 1


@linux_only
def test_workers_killed_with_sigkill_are_replaced_and_their_runs_retried(
    tmp_path: Path,
) -> None:
    grid = {"seed": [1, 2, 3, 4, 5, 6]}
    killed: list[int] = []

    def kill_workers(row: dict[str, Any]) -> None:
        if not killed:
            for pid in _workers(os.getpid()):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    table = hetsched.sweep(
        BASE, grid, out=tmp_path, backend="local", workers=2, on_result=kill_workers
    )
    assert killed and table.attrs["workers_replaced"] >= 1
    assert (table["status"] == "ok").all() and len(table) == 6
    serial = hetsched.sweep(BASE, grid, backend="serial")
    pd.testing.assert_frame_equal(_deterministic(table), _deterministic(serial))
    assert not _workers(os.getpid())


@linux_only
def test_a_run_that_kills_its_worker_every_time_is_recorded_as_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweeps, "MAX_ATTEMPTS", 2)  # fewer worker starts: a faster test
    table = hetsched.sweep(
        BASE,
        {"scheduler": ["cfs", "python:sweep_killer:KillSelf", "dwrr"]},
        backend="local",
        workers=2,
    )
    assert list(table["status"]) == ["ok", "error", "ok"]
    assert table.loc[1, "error"] == (
        "the worker process running it died (killed by SIGKILL) 2 times; not tried again"
    )


@linux_only
def test_a_job_waiting_behind_a_run_that_kills_its_worker_is_not_counted_as_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker holds the run it runs and the next one (WORKER_DEPTH): when the
    # first kills it, only that one counts a try; the next goes back untried.
    assert sweeps.WORKER_DEPTH == 2
    monkeypatch.setattr(sweeps, "MAX_ATTEMPTS", 2)
    table = hetsched.sweep(
        BASE,
        {"scheduler": ["python:sweep_killer:KillSelf", "cfs", "dwrr", "faster-first"]},
        backend="local",
        workers=2,
    )
    assert list(table["status"]) == ["error", "ok", "ok", "ok"]
    assert table.attrs["workers_replaced"] == 2


SLOW_SWEEP = """
import hetsched
base = {BASE!r}
hetsched.sweep(base, {{"seed": list(range(1, 200))}}, fixed={{"duration_s": 60.0}},
               out={out!r}, workers=2)
"""


@linux_only
def test_killing_the_sweep_leaves_no_process_behind(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    out = tmp_path / "out"
    script.write_text(SLOW_SWEEP.format(BASE=BASE, out=str(out)))
    env = child_env()
    parent = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        deadline = time.monotonic() + 30
        while len(_workers(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_workers(parent.pid)) == 2, "the sweep started no workers"
        # While it runs, a second sweep into its folder is refused, naming it.
        with pytest.raises(sweeps.SweepError, match=rf"another sweep \(PID {parent.pid}\)"):
            hetsched.sweep(BASE, {"seed": [1]}, out=out, backend="serial")
        children = set(_children(parent.pid))
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in children if _alive(p)], "processes outlived the sweep"
    # The kernel dropped the lock with the process.
    with sweeps._FolderLock(out):
        pass


def _start_sweep(sweep_file: Path, out: Path, err: Path) -> subprocess.Popen[bytes]:
    """Start ``hetsched sweep SWEEP_FILE`` with two workers into ``out``,
    quietly, its stderr going to the file ``err``."""
    cmd = [sys.executable, "-m", "hetsched", "sweep", str(sweep_file), "--workers", "2"]
    cmd += ["--out", str(out), "-q"]
    with err.open("w") as f:
        return subprocess.Popen(cmd, env=child_env(), stderr=f)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` if it still runs, and wait for it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


#: Runs that last until their duration: a thread loop that never finishes.
ENDLESS: dict[str, Any] = {
    **BASE,
    "stop_when_done": False,
    "workload": {
        "programs": [
            {
                "name": "loop",
                "kind": "phases",
                "threads": 4,
                "loops": 10**9,
                "phases": [{"compute_ms": 1}, {"sleep_ms": 1}],
            }
        ]
    },
}


@linux_only
def test_ctrl_c_ends_a_local_sweep_at_once_and_stops_its_workers(tmp_path: Path) -> None:
    # Runs of 3000 simulated seconds (about a second each here): the sweep is
    # still running when both workers are seen. (BASE's programs end in
    # 0.1 s: its six runs could all be done before the workers were looked
    # for.)
    (tmp_path / "base.json").write_text(json.dumps(ENDLESS))
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text(
        'base = "base.json"\n[set]\nduration_s = 3000.0\n[grid]\nseed = [1, 2, 3, 4, 5, 6]\n'
    )
    sweep = _start_sweep(sweep_file, tmp_path / "out", tmp_path / "err")
    try:
        deadline = time.monotonic() + 30
        while len(_workers(sweep.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _workers(sweep.pid)
        assert len(workers) == 2, (tmp_path / "err").read_text()
        sweep.send_signal(signal.SIGINT)
        assert sweep.wait(timeout=5) == 130
    finally:
        _reap(sweep)
    assert "interrupted" in (tmp_path / "err").read_text()
    assert not [p for p in workers if _alive(p)]


@linux_only
def test_ctrl_c_keeps_the_runs_that_finished(tmp_path: Path) -> None:
    # Four short runs finish, then two long ones hold both workers when the
    # SIGINT comes: the four are kept (row.json and the table), exit 130.
    (tmp_path / "base.json").write_text(json.dumps(ENDLESS))
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text(
        'base = "base.json"\n[grid]\nduration_s = [0.2, 0.3, 0.4, 0.5, 600.0, 700.0]\n'
    )
    out = tmp_path / "out"
    sweep = _start_sweep(sweep_file, out, tmp_path / "err")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sweep.poll() is None:
            if len(list(out.glob("runs/*/row.json"))) == 4:
                break
            time.sleep(0.05)
        assert len(list(out.glob("runs/*/row.json"))) == 4, (tmp_path / "err").read_text()
        workers = _workers(sweep.pid)
        assert len(workers) == 2, "the long runs do not hold both workers"
        sweep.send_signal(signal.SIGINT)
        assert sweep.wait(timeout=5) == 130
    finally:
        _reap(sweep)
    assert not [p for p in workers if _alive(p)]
    table = pd.read_csv(out / "results.csv")
    assert sorted(table["duration_s"]) == [0.2, 0.3, 0.4, 0.5]
    assert (table["status"] == "ok").all()
    # Each kept run vouches for its files: a resume skips exactly these four.
    rows = [json.loads(r.read_text()) for r in out.glob("runs/*/row.json")]
    assert all(r["status"] == "ok" and "summary.json" in r["files"] for r in rows)


# -- item 8: a sweep in a plain script -------------------------------------------


def test_the_getting_started_sweep_runs_as_a_plain_script(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    code = next(b for b in blocks if "hetsched.sweep(" in b)
    assert "__main__" not in code
    # Shorter runs and a private folder; the rest as documented.
    short = code.replace('"duration_s": 5.0', '"duration_s": 1.5').replace(
        '"out/sweep2"', repr(str(tmp_path / "sweep2"))
    )
    assert short != code and "1.5" in short and "sweep2" in short
    script = tmp_path / "my_sweep.py"
    script.write_text(
        textwrap.dedent(
            """
            print("script body ran")
            {code}
            print(len(table), table.attrs["workers_replaced"])
            """
        ).format(code=short)
    )
    env = child_env()
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The script ran once: the workers did not import it again.
    assert done.stdout.count("script body ran") == 1
    assert done.stdout.strip().splitlines()[-1] == "20 0"
    assert (tmp_path / "sweep2" / "results.csv").exists()


# -- item 9: the declared Python is the one that reads TOML ------------------------


def test_declared_python_has_tomllib_and_no_fallback_is_declared() -> None:
    project = toml_module().loads((ROOT / "pyproject.toml").read_text())["project"]
    # tomllib arrived in 3.11: sweep and workload files need it.
    assert project["requires-python"] == ">=3.11"
    assert sys.version_info >= (3, 11)
    assert not any(d.lower().startswith("tomli") for d in project["dependencies"])
    assert toml_module().__name__ == "tomllib"


def test_every_imported_package_is_a_declared_dependency() -> None:
    project = toml_module().loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert extras["parquet"] == ["pyarrow"] and extras["dask"] == ["dask", "distributed"]
    declared = {
        re.split(r"[ ;<>=\[]", d)[0].lower()
        for d in [*project["dependencies"], *extras["parquet"], *extras["dask"]]
    }
    # Import names that differ from their distribution's name.
    distribution = {"pil": "pillow"}
    imported: dict[str, str] = {}
    for path in (ROOT / "python" / "hetsched").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "hetsched":
                    imported.setdefault(top, str(path.relative_to(ROOT)))
    assert imported, "the scan found no imports"
    undeclared = {
        m: where
        for m, where in imported.items()
        if distribution.get(m.lower(), m.lower()) not in declared
    }
    assert not undeclared, f"imported but not in pyproject.toml: {undeclared}"
