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
run's values) and re-runs only failed or missing ones; a Ctrl-C keeps every
run that finished.

Backends: ``"local"`` (default: a pool of processes, one per core),
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

import contextlib
import difflib
import hashlib
import itertools
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import _core, api

__all__ = [
    "WALL_CLOCK_COLUMNS",
    "SweepError",
    "SweepSpec",
    "load_sweep",
    "read_table",
    "sweep",
]

#: How long a Dask scheduler may take to answer before the sweep gives up.
DASK_CONNECT_TIMEOUT_S = 5.0

#: Columns every sweep table has, before the swept values and the summary.
BASE_COLUMNS = ("run", "run_id", "status", "error")

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
    tomllib = _tomllib()
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


def _tomllib() -> Any:
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.10
        raise SweepError(
            "reading TOML sweep files needs Python 3.11 or newer (tomllib); "
            "on 3.10 pass the base scenario as a dict or a .json file"
        ) from None
    return tomllib


def scenario_document(path: str | Path) -> dict[str, Any]:
    """A scenario file as written (``.toml`` or ``.json``), as a dict, after
    checking that the core accepts it."""
    p = Path(path)
    api.load(p)  # a clear error for a missing or invalid file
    text = p.read_text(encoding="utf-8")
    doc = json.loads(text) if p.suffix.lower() == ".json" else _tomllib().loads(text)
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
    the message. ``KeyboardInterrupt`` stops the sweep after writing the table
    of the runs that finished, and is raised again.
    The table's ``attrs`` hold ``{"ran": n, "skipped": n, "out": path}``.
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
    rows: dict[int, dict[str, Any]] = {}
    todo: list[_Job] = []
    for job in jobs:
        done = _finished_row(out_dir, job) if out_dir is not None else None
        if done is not None:
            rows[job.index] = done
        else:
            todo.append(job)
    skipped = len(rows)

    bar = _Bar(len(jobs), skipped, spec.name) if progress else None

    def finished(job: _Job, row: dict[str, Any], raw: str | None) -> None:
        # The swept values win over summary fields of the same name (scheduler, seed).
        row = {"run": job.index, "run_id": job.run_id, **row, **_point_columns(job.point)}
        if out_dir is not None:
            _save_run(out_dir, job, row, raw)
        rows[job.index] = row
        if bar is not None:
            bar.update(row)
        if on_result is not None:
            on_result(row)

    try:
        if todo:
            _execute(backend, base_json, todo, spec.trace, workers, finished)
    except KeyboardInterrupt:
        if out_dir is not None:
            _write_table(out_dir, _table(rows, spec))
        raise
    finally:
        if bar is not None:
            bar.close()
    table = _table(rows, spec)
    if out_dir is not None:
        _write_table(out_dir, table)
        _write_spec(out_dir, spec)
    table.attrs.update(ran=len(todo), skipped=skipped, out=str(out_dir) if out_dir else None)
    return table


def read_table(out_dir: str | Path) -> pd.DataFrame:
    """The table of a sweep folder (Parquet if there, else CSV)."""
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


def run_point(
    base_json: str, overrides: list[tuple[str, str]], trace: bool
) -> tuple[dict[str, Any], str | None]:
    """Run one point of a sweep; return ``(row, results JSON)``. Never raises
    for a bad scenario or a failed run: the row says ``status="error"``.
    (Top level so process pools and Dask workers can pickle it.)"""
    started = time.monotonic()
    try:
        res = api.run(
            api.loads(base_json, fmt="json", source="sweep", overrides=overrides), trace=trace
        )
    except Exception as e:
        return {
            "status": "error",
            "error": f"{type(e).__name__}: {e}",
            "run_wall_s": time.monotonic() - started,
        }, None
    row: dict[str, Any] = {"status": "ok", "error": ""}
    for k, v in res.summary.items():
        if isinstance(v, bool | int | float | str) and k not in BASE_COLUMNS:
            row[k] = v
    row["warnings"] = len(res.warnings)
    row["run_wall_s"] = time.monotonic() - started
    return row, res.raw_json


def _execute(
    backend: Backend,
    base_json: str,
    jobs: list[_Job],
    trace: bool,
    workers: int | None,
    finished: Callable[[_Job, dict[str, Any], str | None], None],
) -> None:
    if backend == "serial":
        for job in jobs:
            row, raw = run_point(base_json, job.overrides, trace)
            finished(job, row, raw)
    elif backend == "local" or backend is None:
        _execute_local(base_json, jobs, trace, workers, finished)
    elif isinstance(backend, str) and backend.startswith("dask://"):
        _execute_dask(backend[len("dask://") :], base_json, jobs, trace, finished)
    elif isinstance(backend, str):
        raise SweepError(
            f"hetsched.sweep: unknown backend {backend!r}; expected 'local', 'serial', "
            "'dask://HOST:PORT' or a distributed.Client"
        )
    else:
        _execute_dask(backend, base_json, jobs, trace, finished)


def _execute_local(
    base_json: str,
    jobs: list[_Job],
    trace: bool,
    workers: int | None,
    finished: Callable[[_Job, dict[str, Any], str | None], None],
) -> None:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    n = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if n == 1:
        _execute("serial", base_json, jobs, trace, None, finished)
        return
    # spawn: workers start clean, whatever threads this process runs.
    pool = ProcessPoolExecutor(
        max_workers=n,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_ignore_interrupts,
    )
    pending = {}
    queue = iter(jobs)
    try:
        # Keep at most 2 runs per worker in flight, so an interrupt loses little.
        for job in itertools.islice(queue, 2 * n):
            pending[pool.submit(run_point, base_json, job.overrides, trace)] = job
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                job = pending.pop(fut)
                try:
                    row, raw = fut.result()
                except Exception as e:  # a worker that died (killed, out of memory)
                    row, raw = {"status": "error", "error": f"worker failed: {e!r}"}, None
                finished(job, row, raw)
                nxt = next(queue, None)
                if nxt is not None:
                    pending[pool.submit(run_point, base_json, nxt.overrides, trace)] = nxt
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _ignore_interrupts() -> None:
    """In a worker process: Ctrl-C is for the sweep's own process, which stops
    handing out runs; a worker finishes the run it has and exits quietly."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _execute_dask(
    backend: Any,
    base_json: str,
    jobs: list[_Job],
    trace: bool,
    finished: Callable[[_Job, dict[str, Any], str | None], None],
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
    finished: Callable[[_Job, dict[str, Any], str | None], None],
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


def _finished_row(out_dir: Path, job: _Job) -> dict[str, Any] | None:
    path = out_dir / "runs" / job.run_id / "row.json"
    try:
        row = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(row, dict) or row.get("status") != "ok":
        return None  # failed runs are tried again
    row["run"] = job.index
    return row


def _save_run(out_dir: Path, job: _Job, row: dict[str, Any], raw: str | None) -> None:
    from .results import Results

    run_dir = out_dir / "runs" / job.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    if raw is not None:
        Results(raw).save(run_dir)
    # row.json last, written whole: its presence marks the run finished.
    tmp = run_dir / "row.json.tmp"
    tmp.write_text(json.dumps(row, indent=2, default=str) + "\n", "utf-8")
    tmp.replace(run_dir / "row.json")


def _write_table(out_dir: Path, table: pd.DataFrame) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "results.csv", index=False)
    with contextlib.suppress(ImportError):  # pyarrow missing: the CSV is there
        table.to_parquet(out_dir / "results.parquet", index=False)


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
    (out_dir / "sweep.json").write_text(
        json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n", "utf-8"
    )


def _table(rows: Mapping[int, dict[str, Any]], spec: SweepSpec) -> pd.DataFrame:
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
    return list(v)


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
