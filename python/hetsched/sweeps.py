"""Parameter sweeps: one base scenario, many runs, one table.

A sweep varies scenario fields over a grid. Each axis is a scenario path (the
same paths as ``hetsched run --set``: ``scheduler``, ``seed``,
``machine.preset``, ``workload.programs[0].threads`` ...) with a list of
values. Axes in ``grid`` are combined as a cartesian product; each group in
``zipped`` is a set of axes of equal length that vary together (one axis of
the product)::

    import hetsched

    table = hetsched.sweep(
        "scenarios/demo.toml",
        grid={"scheduler": ["cfs", "dwrr"], "seed": [1, 2, 3]},
        zipped=[{"machine.preset": ["big-little-4+4", "big-little-2+6"],
                 "workload.programs[0].threads": [6, 8]}],
        out="out/sweep",
    )

returns a DataFrame with one row per run: the swept values as columns (named
by their paths), ``status`` (``ok`` or ``error``), ``error`` (the message of a
failed run) and the run's summary numbers (``makespan_s``, ``energy_j`` ...).

With ``out`` the sweep is loss-free and resumable. Every finished run is
written to ``out/runs/<run id>/`` (the files of :meth:`Results.save` plus
``row.json``) the moment it finishes, and the table to ``out/results.parquet``
and ``out/results.csv``. Running the same sweep into the same folder again
skips the runs that finished (a run id is a hash of the base scenario and the
run's values) and re-runs only failed or missing ones, and those whose files
no longer match the checksums in their ``row.json``; a Ctrl-C keeps every
run that finished. One sweep at a time writes a folder (a lock on
``out/.sweep.lock``); the tables of an earlier sweep are removed when a sweep
starts, so they are never read as this one's.

Backends: ``"local"`` (default: a pool of worker processes, one per core,
each a fresh interpreter that dies with the sweep and is replaced if it
dies before; see :mod:`hetsched._sweep_worker`),
``"serial"`` (in this process; Python schedulers defined in a notebook work
here), or ``"dask://HOST:PORT"`` / a ``distributed.Client`` (the runs go to
an existing Dask cluster; its workers need hetsched installed, and results
come back to this process, so no shared file system is needed).

A sweep file (``hetsched sweep FILE``) is TOML::

    base = "demo.toml"              # relative to the sweep file; or a [base] table
    name = "demo-sweep"             # optional; default: the file's stem
    trace = false                   # record traces (for timeline plots)
    [set]                           # fields fixed for every run
    duration_s = 3
    [grid]                          # cartesian product
    scheduler = ["cfs", "dwrr"]
    seed = [1, 2, 3]
    [[zip]]                         # axes that vary together
    "machine.preset" = ["big-little-4+4", "big-little-2+6"]
    "workload.programs[0].threads" = [6, 8]
"""

from __future__ import annotations

import collections
import contextlib
import difflib
import hashlib
import itertools
import json
import math
import numbers
import os
import re
import signal
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _core, api
from ._sweep_worker import BASE_COLUMNS, run_point
from ._sweep_worker import save_run as _save_run
from ._sweep_worker import sha256 as _sha256
from ._sweep_worker import tmp_name as _tmp_name

if TYPE_CHECKING:  # loaded where tables are made: a local sweep loads it while its workers run
    import pandas as pd

__all__ = [
    "BASE_COLUMNS",
    "WALL_CLOCK_COLUMNS",
    "SweepError",
    "SweepSpec",
    "load_sweep",
    "read_table",
    "run_point",
    "sweep",
]

#: How long a Dask scheduler may take to answer before the sweep gives up.
DASK_CONNECT_TIMEOUT_S = 5.0


#: Columns that measure wall time: they differ between two runs of one sweep.
WALL_CLOCK_COLUMNS = ("wall_s", "events_per_sec", "run_wall_s")

Backend = Any  # "local" | "serial" | "dask://host:port" | distributed.Client


class SweepError(_core.HetschedError):
    """A sweep that cannot be carried out: a bad grid, a path the scenario does
    not have, an unreachable Dask cluster."""


@dataclass
class SweepSpec:
    """A parsed sweep: the base scenario (as the scenario-file dict), the fixed
    overrides, the product axes and the zipped groups."""

    base: dict[str, Any]
    grid: dict[str, list[Any]] = field(default_factory=dict)
    zipped: list[dict[str, list[Any]]] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)
    name: str = "sweep"
    trace: bool = False

    def axes(self) -> list[str]:
        """The swept paths, in column order."""
        out = list(self.grid)
        for group in self.zipped:
            out += list(group)
        return out

    def points(self) -> list[dict[str, Any]]:
        """Every run's values ``{path: value}``, in a stable order."""
        factors: list[list[dict[str, Any]]] = []
        for path, values in self.grid.items():
            factors.append([{path: v} for v in values])
        for group in self.zipped:
            keys = list(group)
            factors.append(
                [dict(zip(keys, vals, strict=True)) for vals in zip(*group.values(), strict=True)]
            )
        return [_merge(combo) for combo in itertools.product(*factors)]


def load_sweep(path: str | Path) -> SweepSpec:
    """Read a sweep file (see the module doc). Raises :class:`SweepError` or
    :class:`hetsched.ScenarioError` with the file and field named."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepError(f"{p}: no such sweep file") from None
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{p}: not valid TOML: {e}") from None
    known = {"base", "name", "trace", "set", "grid", "zip", "description"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise SweepError(
            f"{p}: unknown key(s) {', '.join(unknown)}; a sweep file has {', '.join(sorted(known))}"
        )
    base = doc.get("base")
    if isinstance(base, str):
        base_dict = scenario_document((p.parent / base).resolve())
    elif isinstance(base, dict):
        api.loads(json.dumps(base), fmt="json", source=f"{p}: base")  # validate it
        base_dict = base
    else:
        raise SweepError(
            f"{p}: base: expected the path of a scenario file or a [base] table, got "
            f"{type(base).__name__ if base is not None else 'nothing'}"
        )
    fixed = doc.get("set", {})
    grid = doc.get("grid", {})
    zipped = doc.get("zip", [])
    if not isinstance(fixed, dict):
        raise SweepError(f"{p}: set: expected a table of path = value")
    if not isinstance(grid, dict):
        raise SweepError(f"{p}: grid: expected a table of path = [values]")
    if isinstance(zipped, dict):
        zipped = [zipped]
    if not isinstance(zipped, list) or not all(isinstance(z, dict) for z in zipped):
        raise SweepError(f"{p}: zip: expected [[zip]] tables of path = [values]")
    trace = doc.get("trace", False)
    if not isinstance(trace, bool):
        raise SweepError(f"{p}: trace: expected true or false")
    return make_spec(
        base_dict,
        grid,
        zipped,
        fixed=fixed,
        name=str(doc.get("name") or p.stem),
        trace=trace,
        source=str(p),
    )


def scenario_document(path: str | Path) -> dict[str, Any]:
    """A scenario file as written (``.toml`` or ``.json``), as a dict, after
    checking that the core accepts it."""
    p = Path(path)
    api.load(p)  # a clear error for a missing or invalid file
    text = p.read_text(encoding="utf-8")
    doc = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    if not isinstance(doc, dict):
        raise SweepError(f"{p}: a scenario file is a table of fields")
    return doc


def make_spec(
    base: _core.Scenario | str | Path | Mapping[str, Any],
    grid: Mapping[str, Sequence[Any]],
    zipped: Sequence[Mapping[str, Sequence[Any]]] = (),
    *,
    fixed: Mapping[str, Any] | None = None,
    name: str | None = None,
    trace: bool = False,
    source: str = "hetsched.sweep",
) -> SweepSpec:
    """Check a grid against its base scenario and build a :class:`SweepSpec`.

    The base is kept as written (a file is read, not resolved), so that a
    swept ``machine.preset`` replaces the machine: the core expands presets
    after applying each run's values. A parsed :class:`Scenario` is already
    resolved, so it cannot have its preset swept."""
    if isinstance(base, str | Path):
        base_dict = scenario_document(base)
    elif isinstance(base, Mapping):
        base_dict = dict(base)
    else:
        base_dict = json.loads(base.to_json())
        for path in [*grid, *(k for z in zipped for k in z), *(fixed or {})]:
            if str(path).startswith("machine.preset"):
                raise SweepError(
                    f"{source}: {path} cannot be swept over a parsed Scenario, whose preset "
                    "is already expanded; pass the scenario's file or a dict instead"
                )
    g = {str(k): _values(source, f"grid.{k}", v) for k, v in grid.items()}
    zs: list[dict[str, list[Any]]] = []
    for i, group in enumerate(zipped):
        z = {str(k): _values(source, f"zip[{i}].{k}", v) for k, v in group.items()}
        if not z:
            raise SweepError(f"{source}: zip[{i}] is empty; give it path = [values] entries")
        lengths = {k: len(v) for k, v in z.items()}
        if len(set(lengths.values())) > 1:
            sizes = ", ".join(f"{k} has {n}" for k, n in lengths.items())
            raise SweepError(f"{source}: zip[{i}]: zipped lists must have equal lengths ({sizes})")
        zs.append(z)
    if not g and not zs:
        raise SweepError(
            f"{source}: the grid is empty; give at least one path with a list of values, "
            'e.g. grid = {"seed": [1, 2, 3]}'
        )
    paths = list(g) + [k for z in zs for k in z]
    dup = sorted({p for p in paths if paths.count(p) > 1})
    if dup:
        raise SweepError(f"{source}: path(s) swept twice: {', '.join(dup)}")
    spec = SweepSpec(
        base=base_dict,
        grid=g,
        zipped=zs,
        fixed=dict(fixed or {}),
        name=name or str(base_dict.get("name") or "sweep"),
        trace=trace,
    )
    _check_paths(spec, source)
    return spec


def sweep(
    base: _core.Scenario | str | Path | Mapping[str, Any] | SweepSpec,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    zipped: Sequence[Mapping[str, Sequence[Any]]] = (),
    fixed: Mapping[str, Any] | None = None,
    backend: Backend = "local",
    out: str | Path | None = None,
    workers: int | None = None,
    trace: bool = False,
    progress: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> pd.DataFrame:
    """Run every point of a sweep and return the table (see the module doc).

    ``base`` is a scenario (path, dict or parsed) or a :class:`SweepSpec` from
    :func:`load_sweep` (then ``grid``, ``zipped``, ``fixed`` and ``trace`` come
    from it). ``out`` makes the sweep resumable (finished runs are kept and
    skipped next time). ``workers`` bounds the local process pool.
    ``progress`` shows a bar (runs done/total and ETA) on stderr.
    ``on_result`` is called with each finished row.

    A failed run does not stop the sweep: its row has ``status="error"`` and
    the message. A worker process that dies is replaced and its run tried
    again (:data:`MAX_ATTEMPTS` times in all). ``KeyboardInterrupt`` stops the
    sweep after writing the table of the runs that finished, and is raised
    again. Only one sweep at a time writes into a folder (a second one gets
    :class:`SweepError` naming the first one's PID).

    The table's ``attrs`` hold ``ran``, ``skipped``, ``out``, ``written``
    (the table files written into ``out``), ``parquet_skipped`` (why there is
    no ``results.parquet``, or None), ``workers_replaced`` and
    ``worker_startup_cpu_s`` (the CPU time each local worker process took to
    start, interpreter included; empty for other backends).
    """
    if isinstance(base, SweepSpec):
        spec = base
    else:
        if grid is None and not zipped:
            raise SweepError("hetsched.sweep: the grid is empty; pass grid={path: [values], ...}")
        spec = make_spec(base, grid or {}, zipped, fixed=fixed, trace=trace)
    points = spec.points()
    base_json = json.dumps(spec.base, sort_keys=True)
    fixed_ov = api._overrides(spec.fixed)
    jobs: list[_Job] = []
    for i, point in enumerate(points):
        ov = fixed_ov + api._overrides(point)
        jobs.append(_Job(i, _run_id(base_json, ov), point, ov))
    ids = [j.run_id for j in jobs]
    if len(set(ids)) != len(ids):
        raise SweepError(
            "hetsched.sweep: two runs have the same values; remove repeated grid values"
        )

    out_dir = Path(out) if out is not None else None
    with contextlib.ExitStack() as stack:
        if out_dir is not None:
            stack.enter_context(_FolderLock(out_dir))
            # The tables of an earlier sweep must not be read as this one's
            # while it runs (or after it is killed): they go first, and the
            # description of this sweep is written before any table.
            _remove_tables(out_dir)
            _write_spec(out_dir, spec)
        return _sweep_locked(spec, base_json, jobs, out_dir, backend, workers, progress, on_result)


def _sweep_locked(
    spec: SweepSpec,
    base_json: str,
    jobs: list[_Job],
    out_dir: Path | None,
    backend: Backend,
    workers: int | None,
    progress: bool,
    on_result: Callable[[dict[str, Any]], None] | None,
) -> pd.DataFrame:
    rows: dict[int, dict[str, Any]] = {}
    todo: list[_Job] = []
    # The run folders there are, listed once: a new sweep has none to check.
    present = _run_folders(out_dir) if out_dir is not None else set()
    for job in jobs:
        done = (
            _finished_row(out_dir, job) if out_dir is not None and job.run_id in present else None
        )
        if done is not None:
            rows[job.index] = done
        else:
            todo.append(job)
    skipped = len(rows)

    bar = _Bar(len(jobs), skipped, spec.name) if progress else None

    def finished(job: _Job, row: dict[str, Any], raw: str | None, saved: bool = False) -> None:
        # ``saved``: a local worker already wrote the run's folder (and the row
        # has its columns); otherwise this process writes it.
        row = _row_of(job, row)
        if out_dir is not None and not saved:
            _save_run(out_dir / "runs" / job.run_id, row, raw)
        rows[job.index] = row
        if bar is not None:
            bar.update(row)
        if on_result is not None:
            on_result(row)

    replaced = 0
    stats: dict[str, Any] = {}
    try:
        if todo:
            replaced = _execute(
                backend, base_json, todo, spec.trace, workers, finished, stats, out_dir
            )
    except KeyboardInterrupt:
        if out_dir is not None:
            _write_table(out_dir, _table(rows, spec))
        raise
    finally:
        if bar is not None:
            bar.close()
    table = _table(rows, spec)
    written: list[str] = []
    parquet_skipped: str | None = None
    if out_dir is not None:
        written, parquet_skipped = _write_table(out_dir, table)
    table.attrs.update(
        ran=len(todo),
        skipped=skipped,
        out=str(out_dir) if out_dir else None,
        written=written,
        parquet_skipped=parquet_skipped,
        workers_replaced=replaced,
        worker_startup_cpu_s=list(stats.get("worker_startup_cpu_s", [])),
    )
    return table


def _row_of(job: _Job, row: Mapping[str, Any]) -> dict[str, Any]:
    """A run's table row: its index and id first, the swept values last (they
    win over summary fields of the same name: scheduler, seed)."""
    return {"run": job.index, "run_id": job.run_id, **row, **_point_columns(job.point)}


def tables_written(table: pd.DataFrame) -> str:
    """What a sweep wrote as its table, for a message: ``results.csv and
    results.parquet``, or ``results.csv (results.parquet skipped: why)``."""
    written = list(table.attrs.get("written") or [])
    text = " and ".join(written) or "no table"
    skipped = table.attrs.get("parquet_skipped")
    return f"{text} (results.parquet skipped: {skipped})" if skipped else text


def read_table(out_dir: str | Path) -> pd.DataFrame:
    """The table of a sweep folder (Parquet if there, else CSV)."""
    import pandas as pd

    d = Path(out_dir)
    if (d / "results.parquet").exists():
        return pd.read_parquet(d / "results.parquet")
    if (d / "results.csv").exists():
        return pd.read_csv(d / "results.csv")
    raise SweepError(f"{d}: no results.parquet or results.csv; is this a sweep folder?")


# --------------------------------------------------------------------------- runs


@dataclass
class _Job:
    index: int
    run_id: str
    point: dict[str, Any]
    overrides: list[tuple[str, str]]


def _execute(
    backend: Backend,
    base_json: str,
    jobs: list[_Job],
    trace: bool,
    workers: int | None,
    finished: Callable[..., None],
    stats: dict[str, Any],
    out_dir: Path | None = None,
) -> int:
    """Run ``jobs`` on ``backend``; returns how many worker processes were
    replaced (``stats`` collects the local pool's measurements). Local
    workers write each run's folder under ``out_dir`` themselves."""
    if backend == "serial":
        for job in jobs:
            row, raw = run_point(base_json, job.overrides, trace)
            finished(job, row, raw)
    elif backend == "local" or backend is None:
        return _execute_local(base_json, jobs, trace, workers, finished, stats, out_dir)
    elif isinstance(backend, str) and backend.startswith("dask://"):
        _execute_dask(backend[len("dask://") :], base_json, jobs, trace, finished)
    elif isinstance(backend, str):
        raise SweepError(
            f"hetsched.sweep: unknown backend {backend!r}; expected 'local', 'serial', "
            "'dask://HOST:PORT' or a distributed.Client"
        )
    else:
        _execute_dask(backend, base_json, jobs, trace, finished)
    return 0


def _execute_local(
    base_json: str,
    jobs: list[_Job],
    trace: bool,
    workers: int | None,
    finished: Callable[..., None],
    stats: dict[str, Any],
    out_dir: Path | None,
) -> int:
    """Run ``jobs`` on a pool of worker processes (:mod:`hetsched._sweep_worker`).

    A worker that dies (SIGKILL, the out-of-memory killer) is replaced and the
    run it held is tried again, up to :data:`MAX_ATTEMPTS` times in all, then
    recorded as failed with the reason. Returns how many workers were replaced;
    ``stats["worker_startup_cpu_s"]`` gets each worker's start-up CPU time.
    The workers live for the whole call: each runs job after job. With an
    ``out_dir`` each worker writes the folders of the runs it made (the files
    of a run are most of a sweep's work: written here, they would make this
    process the bottleneck), and sends back the row only."""
    import selectors

    from ._sweep_worker import recv, send

    n = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if n == 1:
        return _execute("serial", base_json, jobs, trace, None, finished, stats)
    # The table is made here at the end, with pandas: loaded while the
    # workers run (on a core of its own where there is one), not before them.
    _preload_tables()
    queue = collections.deque(jobs)
    attempts: dict[int, int] = {}
    pool: dict[int, _Worker] = {}
    sel = selectors.DefaultSelector()
    replaced = 0
    dead_at_start = 0
    startup_cpu = stats.setdefault("worker_startup_cpu_s", [])

    def start() -> None:
        w = _Worker(_start_worker())
        pool[w.fd] = w
        sel.register(w.fd, selectors.EVENT_READ, w)
        with contextlib.suppress(OSError):  # a death shows on its output
            send(w.stdin, {"sys_path": list(sys.path)})

    def dispatch(w: _Worker) -> None:
        # Up to WORKER_DEPTH jobs a worker: the next waits in its input while
        # it runs one, so that it does not idle while this process is busy.
        while queue and len(w.jobs) < WORKER_DEPTH:
            job = queue.popleft()
            w.jobs.append(job)
            send_job(w, job)

    def send_job(w: _Worker, job: _Job) -> None:
        with contextlib.suppress(OSError):
            run_dir = str(out_dir / "runs" / job.run_id) if out_dir is not None else None
            head = {"run": job.index, "run_id": job.run_id}
            tail = _point_columns(job.point)
            args = (base_json, job.overrides, trace, run_dir, head, tail)
            send(w.stdin, (job.index, args))

    clean = False
    try:
        for _ in range(n):
            start()
        while queue or any(w.jobs for w in pool.values()):
            for key, _ in sel.select():
                w = key.data
                msg = recv(w.fd)
                if msg is None:  # the worker died
                    sel.unregister(w.fd)
                    del pool[w.fd]
                    why = w.close()
                    replaced += 1
                    # The first job a worker holds is the one it ran; the
                    # others only waited in its input: they go back as they were.
                    job = w.jobs.popleft() if w.jobs else None
                    queue.extendleft(reversed(w.jobs))
                    w.jobs.clear()
                    if job is None and not w.ready:
                        dead_at_start += 1
                        if dead_at_start >= MAX_ATTEMPTS:
                            raise SweepError(
                                f"hetsched.sweep: the worker processes die as they start "
                                f"({why}); see the messages above, or use workers=1"
                            )
                    elif job is not None:
                        tries = attempts[job.index] = attempts.get(job.index, 0) + 1
                        if tries < MAX_ATTEMPTS:
                            queue.appendleft(job)
                        else:
                            finished(
                                job,
                                {
                                    "status": "error",
                                    "error": f"the worker process running it died ({why}) "
                                    f"{tries} times; not tried again",
                                },
                                None,
                            )
                    if queue:
                        start()
                    continue
                if isinstance(msg, tuple) and msg[0] == "ready":
                    w.ready = True
                    startup_cpu.append(float(msg[1]))
                    dispatch(w)
                    continue
                job = w.jobs.popleft()
                assert msg[0] == job.index, (msg[0], job.index)
                row, raw, saved = msg[1]
                dispatch(w)  # keep the worker busy while this process takes the row
                finished(job, row, raw, saved)
        clean = True
    finally:
        for w in list(pool.values()):
            # A worker still starting has nothing to finish: it goes at once.
            w.close(stop=not clean or not w.ready)
        sel.close()
    return replaced


#: How many times a run is tried when the worker process running it dies
#: (killed, out of memory) before the run is recorded as failed.
MAX_ATTEMPTS = 3
#: How long a worker may take to exit after its input ends, s, before it is killed.
WORKER_EXIT_S = 5.0
#: Jobs sent to a worker ahead of its results: the one it runs and one that
#: waits, so that a worker never waits for this process between two runs.
WORKER_DEPTH = 2


def _preload_tables() -> None:
    """Import pandas in a thread, beside the dispatch loop (the import takes
    about 0.5 CPU-s). While it holds the GIL the loop waits up to a switch
    interval (5 ms) at each message; the job waiting in each worker's input
    (:data:`WORKER_DEPTH`) keeps the workers busy meanwhile. A later
    ``import pandas`` waits for this one; a failure shows there."""
    import threading

    def load() -> None:
        with contextlib.suppress(ImportError):
            import pandas  # noqa: F401

    if "pandas" not in sys.modules:
        threading.Thread(target=load, name="load-pandas", daemon=True).start()


class _Worker:
    """One worker process and the job it holds."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin = proc.stdin
        self.fd = proc.stdout.fileno()
        #: Jobs sent and not answered, oldest (the one running) first.
        self.jobs: collections.deque[_Job] = collections.deque()
        self.ready = False

    def close(self, stop: bool = False) -> str:
        """End the process (at once with ``stop``; else by ending its input)
        and say how it ended."""
        if stop:
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(OSError):
            self.stdin.close()
        try:
            rc = self.proc.wait(timeout=WORKER_EXIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exit status {rc}"


def _start_worker() -> subprocess.Popen[bytes]:
    from ._sweep_worker import BOOTSTRAP

    # A fresh interpreter that imports this package from where this process
    # did; it does not import the caller's __main__ (no guard needed there).
    pkg_root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            BOOTSTRAP,
            str(os.getpid()),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )


def _execute_dask(
    backend: Any,
    base_json: str,
    jobs: list[_Job],
    trace: bool,
    finished: Callable[..., None],
) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError as e:
        raise SweepError(f"the dask backend needs the 'distributed' package: {e}") from None
    own = isinstance(backend, str)
    client = connect_dask(backend) if own else backend
    try:
        with client.as_current():
            _gather_dask(client, as_completed, base_json, jobs, trace, finished)
    finally:
        if own:
            client.close()
    del Client


def _gather_dask(
    client: Any,
    as_completed: Any,
    base_json: str,
    jobs: list[_Job],
    trace: bool,
    finished: Callable[..., None],
) -> None:
    futures = {}
    for job in jobs:
        fut = client.submit(
            run_point, base_json, job.overrides, trace, pure=False, key=f"hetsched-{job.run_id}"
        )
        futures[fut.key] = (fut, job)
    try:
        for fut in as_completed([f for f, _ in futures.values()]):
            job = futures[fut.key][1]
            try:
                row, raw = fut.result()
            except Exception as e:
                row, raw = {"status": "error", "error": f"dask task failed: {e!r}"}, None
            finished(job, row, raw)
    except BaseException:
        client.cancel([f for f, _ in futures.values()])
        raise


def connect_dask(address: str, timeout_s: float = DASK_CONNECT_TIMEOUT_S) -> Any:
    """A ``distributed.Client`` for the scheduler at ``address``
    (``tcp://host:8786`` or ``host:8786``); :class:`SweepError` if it does not
    answer within ``timeout_s``."""
    from distributed import Client

    addr = address if "://" in address else f"tcp://{address}"
    try:
        return Client(addr, timeout=f"{timeout_s}s", set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise SweepError(
            f"no Dask scheduler answered at {addr} within {timeout_s:g} s "
            f"({e.__class__.__name__}); "
            "start one with `dask scheduler` (and workers with `dask worker ADDRESS`), "
            "or run without --dask to use this machine"
        ) from None
    except ValueError as e:
        raise SweepError(f"bad Dask address {address!r}: {e}") from None


# ------------------------------------------------------------------ persistence


def _run_id(base_json: str, overrides: list[tuple[str, str]]) -> str:
    h = hashlib.sha256(base_json.encode())
    h.update(json.dumps(overrides).encode())
    return h.hexdigest()[:12]


#: The lock file of a sweep folder; it holds the PID of the sweep writing it.
LOCK_NAME = ".sweep.lock"


class _FolderLock:
    """An exclusive ``flock`` on ``DIR/.sweep.lock`` for the sweep's duration.
    The kernel drops it when the process ends, however it ends."""

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir
        self.fd: int | None = None

    def __enter__(self) -> _FolderLock:
        try:
            import fcntl
        except ImportError:  # no flock on this system: nothing to hold
            return self
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise SweepError(
                f"{self.dir}: another sweep (PID {holder}) is writing into this folder; "
                "wait for it to end or choose another output folder"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing the last descriptor releases the lock
            self.fd = None


def _run_folders(out_dir: Path) -> set[str]:
    """The names in the sweep folder's ``runs/`` (none when it is missing)."""
    try:
        return set(os.listdir(out_dir / "runs"))
    except FileNotFoundError:
        return set()


def _finished_row(out_dir: Path, job: _Job) -> dict[str, Any] | None:
    """The row of a run that finished and whose files are intact, else None
    (the run is done again): every file listed in its ``row.json`` must be
    there with the checksum recorded, and an ``ok`` run needs its
    ``summary.json`` and ``tasks.csv``."""
    run_dir = out_dir / "runs" / job.run_id
    try:
        row = json.loads((run_dir / "row.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(row, dict) or row.get("status") != "ok":
        return None  # failed runs are tried again
    files = row.pop("files", None)
    if not isinstance(files, dict) or not {"summary.json", "tasks.csv"} <= set(files):
        return None
    for name, digest in files.items():
        try:
            if _sha256(run_dir / name) != digest:
                return None
        except OSError:
            return None
    row["run"] = job.index
    return row


TABLES = ("results.parquet", "results.csv")


def _remove_tables(out_dir: Path) -> None:
    for name in TABLES:
        with contextlib.suppress(FileNotFoundError):
            (out_dir / name).unlink()


def _write_table(out_dir: Path, table: pd.DataFrame) -> tuple[list[str], str | None]:
    """Write ``results.csv`` and ``results.parquet`` (each under a temporary
    name, then renamed). Returns the names written and, when Parquet was not
    written, why (the old one is removed either way)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_tables(out_dir)
    written = []
    csv = out_dir / "results.csv"
    tmp = _tmp_name(csv)
    table.to_csv(tmp, index=False)
    tmp.replace(csv)
    written.append(csv.name)
    parquet = out_dir / "results.parquet"
    tmp = _tmp_name(parquet)
    if not _pyarrow_available():
        return written, "pyarrow is not installed (pip install 'hetsched[parquet]')"
    try:
        table.to_parquet(tmp, index=False)
    except Exception as e:  # a column Arrow cannot store: the CSV has it all
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        return written, f"Arrow cannot store the table: {type(e).__name__}: {e}"
    tmp.replace(parquet)
    written.append(parquet.name)
    return written, None


def _pyarrow_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


def _write_spec(out_dir: Path, spec: SweepSpec) -> None:
    doc = {
        "name": spec.name,
        "axes": spec.axes(),
        "grid": spec.grid,
        "zip": spec.zipped,
        "set": spec.fixed,
        "trace": spec.trace,
        "base": spec.base,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "sweep.json"
    tmp = _tmp_name(path)
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n", "utf-8")
    tmp.replace(path)


def _table(rows: Mapping[int, dict[str, Any]], spec: SweepSpec) -> pd.DataFrame:
    import pandas as pd

    axes = spec.axes()
    ordered = [rows[i] for i in sorted(rows)]
    table = pd.DataFrame.from_records(ordered) if ordered else pd.DataFrame()
    first = [c for c in (*BASE_COLUMNS[:2], *axes, *BASE_COLUMNS[2:]) if c in table.columns]
    missing = [c for c in (*BASE_COLUMNS, *axes) if c not in table.columns]
    for c in missing:
        table[c] = pd.Series(dtype=object)
        first.append(c)
    rest = [c for c in table.columns if c not in first]
    table = table[first + rest]
    if "error" in table.columns:
        table["error"] = table["error"].fillna("").astype(str)
    table.attrs["axes"] = axes
    return table.reset_index(drop=True)


def _point_columns(point: Mapping[str, Any]) -> dict[str, Any]:
    # Lists and tables become JSON text, so columns stay flat for Parquet and CSV.
    return {
        k: json.dumps(v, sort_keys=True) if isinstance(v, list | tuple | dict) else v
        for k, v in point.items()
    }


# ----------------------------------------------------------------------- checks


def _values(source: str, where: str, v: Any) -> list[Any]:
    if isinstance(v, str | bytes) or not isinstance(v, Sequence):
        raise SweepError(f"{source}: {where}: expected a list of values, got {v!r}")
    if not v:
        raise SweepError(f"{source}: {where}: the list of values is empty")
    for x in v:
        if isinstance(x, float) and not math.isfinite(x):
            raise SweepError(f"{source}: {where}: {x!r} is not a finite number")
    kinds: dict[str, Any] = {}
    for x in v:
        kinds.setdefault(_kind(x), x)
    if len(kinds) > 1:
        examples = ", ".join(f"{x!r} is {k}" for k, x in kinds.items())
        raise SweepError(
            f"{source}: {where}: values of different types ({examples}); "
            f"an axis takes values of one type: {list(v)!r}"
        )
    return list(v)


def _kind(x: Any) -> str:
    """The type of a swept value as the scenario sees it (int and float are one)."""
    if isinstance(x, bool):
        return "a boolean"
    if isinstance(x, numbers.Real):
        return "a number"
    if isinstance(x, str):
        return "a string"
    if isinstance(x, Mapping):
        return "a table"
    if isinstance(x, Sequence):
        return "a list"
    if x is None:
        return "nothing"
    return f"a {type(x).__name__}"


def _check_paths(spec: SweepSpec, source: str) -> None:
    """Each swept path must name a field of the scenario: try its first value
    on the base scenario, and on failure name the nearest valid paths."""
    base_json = json.dumps(spec.base)
    known = sorted(set(_paths(spec.base)) | _schema_paths())
    for path, value in [(k, v[0]) for k, v in spec.grid.items()] + [
        (k, v[0]) for z in spec.zipped for k, v in z.items()
    ]:
        if not _path_syntax_ok(path):
            raise SweepError(
                f"{source}: {path!r} is not a scenario path; write e.g. machine.preset or "
                "workload.programs[0].threads"
            )
        plain = re.sub(r"\[\d+\]", "[0]", path)
        if plain in known or path in known:
            continue
        try:
            api.loads(
                base_json, fmt="json", source="sweep", overrides=[(path, api._literal(value))]
            )
        except _core.HetschedError as e:
            near = difflib.get_close_matches(plain, known, n=3, cutoff=0.5)
            hint = f"; nearest valid paths: {', '.join(near)}" if near else ""
            raise SweepError(
                f"{source}: sweep path {path!r} does not fit the scenario{hint} ({e})"
            ) from None


def _path_syntax_ok(path: str) -> bool:
    return (
        re.fullmatch(r"[A-Za-z_][\w-]*(\[\d+\])?(\.[A-Za-z_][\w-]*(\[\d+\])?)*", path) is not None
    )


def _paths(value: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            yield p
            yield from _paths(v, p)
    elif isinstance(value, list):
        for i, v in enumerate(value[:1]):
            yield from _paths(v, f"{prefix}[{i}]")


def _schema_paths() -> set[str]:
    """Every object path the scenario JSON Schema describes (array items as ``[0]``)."""
    try:
        schema = json.loads(_core.schema())
    except Exception:
        return set()
    defs = schema.get("$defs") or schema.get("definitions") or {}
    out: set[str] = set()

    def walk(node: Any, prefix: str, depth: int) -> None:
        if depth > 8 or not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str):
            walk(defs.get(ref.rsplit("/", 1)[-1]), prefix, depth + 1)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key) or []:
                walk(sub, prefix, depth + 1)
        for k, sub in (node.get("properties") or {}).items():
            p = f"{prefix}.{k}" if prefix else k
            out.add(p)
            walk(sub, p, depth + 1)
        items = node.get("items")
        if isinstance(items, dict):
            walk(items, f"{prefix}[0]", depth + 1)

    walk(schema, "", 0)
    return out


def _merge(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in parts:
        out.update(p)
    return out


class _Bar:
    """Runs done / total with an ETA, on stderr."""

    def __init__(self, total: int, initial: int, label: str) -> None:
        from tqdm import tqdm

        self.errors = 0
        self.bar = tqdm(
            total=total,
            initial=initial,
            desc=label,
            unit="run",
            bar_format="{desc}: {n}/{total} runs |{bar}| [{elapsed}<{remaining}]{postfix}",
        )

    def update(self, row: Mapping[str, Any]) -> None:
        if row.get("status") != "ok":
            self.errors += 1
            self.bar.set_postfix_str(f"{self.errors} failed", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
