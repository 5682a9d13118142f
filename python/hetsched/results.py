"""Results of one simulation run, as pandas DataFrames and plain dicts.

The compiled core returns a run's results as one JSON document (see
``hetsched._core.run``); :class:`Results` turns its row lists into DataFrames,
prints a summary a newcomer can read, and writes everything to a folder:

=================  =========================================================
``summary.json``   run summary (makespan, energy, migrations ...) + warnings
``tasks.csv``      one row per task (thread) with its counters
``programs.csv``   one row per program instance with its completion time
``cpus.csv``       one row per CPU: busy and idle time, energy, ticks
``vms.csv``        one row per virtual machine (only for scenarios with VMs)
``scenario.json``  the resolved scenario (presets expanded, seed included)
``reconfigs.csv``  one row per reconfiguration (scenarios with ``[dynamic]`` only)
``proxies.csv``    per CPU: time proxied/offline, IPIs handled as a proxy (idem)
``trace.json``     Perfetto/Chrome trace, open in https://ui.perfetto.dev
``trace.jsonl``    the typed trace events, one JSON object per line
``trace.txt``      the trace as ftrace text (``sched_switch``/``sched_wakeup``)
``manifest.json``  run id, and each file above with its size and SHA-256
=================  =========================================================

The three trace files are written only for runs made with ``trace=True``.
Saving into a folder removes the files of an earlier run first (only the
names above and the figures and report drawn from them); reading a folder
back checks every file against the manifest, so a folder never silently
mixes two runs (:func:`verify_run_folder`).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import gc
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _core
from ._text import number, seconds, table

if TYPE_CHECKING:  # pandas is imported on first use: ``hetsched --version`` must be quick
    import pandas as pd

__all__ = ["MANIFEST", "ConversionInterrupted", "MixedRunError", "Results", "verify_run_folder"]

#: The manifest of a run folder: run id and every file the run wrote.
MANIFEST = "manifest.json"

#: Files :meth:`Results.save` writes. A save removes those of an earlier run
#: (and the figures and report drawn from it, below) before writing, so a
#: folder never holds files of two runs; nothing else in the folder is touched.
RESULT_FILES = (
    "summary.json",
    "tasks.csv",
    "programs.csv",
    "cpus.csv",
    "vms.csv",
    "scenario.json",
    "reconfigs.csv",
    "proxies.csv",
    "trace.json",
    "trace.jsonl",
    "trace.txt",
)

#: Per-task wake-up latency columns (ms; NaN for a task that never woke and ran).
WAKEUP_LATENCY_COLUMNS = (
    "wakeup_latency_p50_ms",
    "wakeup_latency_p99_ms",
    "wakeup_latency_max_ms",
)

#: Files drawn from a run folder's data by ``hetsched plot`` and ``hetsched
#: report`` at their default places: stale once the folder holds another run.
DERIVED_FILES = ("report.html",)
DERIVED_PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff",
                         ".webp", ".pgf", ".raw", ".rgba")  # fmt: skip
DERIVED_PLOT_KINDS = ("timeline", "utilization", "power", "fairness", "speedup")


class MixedRunError(ValueError):
    """A run folder whose files do not all belong to the run of its manifest."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


class Results:
    """The outcome of :func:`hetsched.run`.

    Attributes:
        summary: run-level numbers (``makespan_s``, ``energy_j``, ``migrations`` ...).
        tasks: one row per task; ``run_s`` is CPU time, ``work_ms`` is work done in
            reference milliseconds, ``run_s_by_type`` splits CPU time by CPU type;
            ``wakeup_latency_p50_ms``, ``wakeup_latency_p99_ms`` and
            ``wakeup_latency_max_ms`` summarise the time from each wake-up (a
            new task's first one included) to running: quantiles interpolated
            linearly between ranks (numpy's default ``percentile``), NaN for a
            task that never woke and ran (and for tasks inside simulated VMs);
            ``util_avg`` and ``util_est`` are the task's load tracking at the
            end where the scheduler keeps it (None otherwise).
        programs: one row per completed program instance.
        cpus: one row per CPU (``utilization``, ``energy_j``, ``final_mhz`` ...).
        vms: one row per virtual machine: ``vcpu_tasks`` (host task ids of its
            vCPUs, as in trace events), ``run_s`` and ``fast_s`` (vCPU time in
            all and on the fastest CPU type), ``migrations`` of its vCPUs and
            ``active_vcpus`` (``(t_s, count)`` at each change). Empty without
            VMs; vCPUs are not rows of ``tasks``.
        trace: typed trace events (empty unless the run was traced).
        reconfigs: one row per reconfiguration of dynamic processors (offline,
            online, fuse, split, deferred hotplug): latency, stop-machine time,
            run time lost on halted CPUs; empty without a ``[dynamic]`` section.
        proxies: per CPU, time proxied or offline and the IPIs it handled as a
            proxy; empty without a ``[dynamic]`` section.
        warnings: what the core found questionable but ran anyway.
        scenario: the resolved scenario, as a dict of the scenario-file schema.
        labels: the core's labels, ``tasks`` (``[program, thread]`` per task id,
            vCPUs included) and ``cpus`` (``"cpu N (type)"``); empty for a
            folder read back.
        raw_json: the JSON text this object was built from (the core hands
            it over as UTF-8 bytes, which the results keep; ``raw_json``
            decodes them at each read).
    """

    summary: dict[str, Any]
    trace: list[dict[str, Any]]
    warnings: list[str]
    scenario: dict[str, Any]
    labels: dict[str, Any]

    def __init__(self, raw_json: str | bytes) -> None:
        # Read and kept as UTF-8 bytes, the form the core hands over.
        raw = raw_json.encode("utf-8") if isinstance(raw_json, str) else raw_json
        self._init(_parse_results(raw), raw)

    @property
    def raw_json(self) -> str:
        """The JSON text these results were built from."""
        return self._raw.decode("utf-8")

    @classmethod
    def _from_document(cls, data: dict[str, Any]) -> Results:
        res = cls.__new__(cls)
        # A long table still as text (`_Pieces`) is written out as its rows.
        text = json.dumps(data, separators=(",", ":"), default=_pieces_rows)
        res._init(data, text.encode("utf-8"))
        return res

    def _init(self, data: Any, raw_json: bytes) -> None:
        if not isinstance(data, dict):
            raise ValueError("results JSON must be an object")
        self._raw = raw_json
        self.summary = dict(data.get("summary") or {})
        if data.get("omitted"):
            # Partial results without their longest tables: which, with their rows.
            self.summary["omitted"] = dict(data["omitted"])
        # The tables are built on first use: most of a small run's cost is
        # pandas, and a sweep often reads only the summary.
        self._records = {k: data.get(k) for k in ("tasks", "programs", "cpus", "vms")}
        dynamic = data.get("dynamic") or {}
        self._records["reconfigs"] = dynamic.get("reconfigs")
        self._records["proxies"] = dynamic.get("proxies")
        self.trace = list(data.get("trace") or [])
        self.warnings = [str(w) for w in data.get("warnings") or []]
        self.scenario = dict(data.get("scenario") or {})
        # Task and CPU labels of the core (vCPUs included), for the trace exports.
        self.labels = dict(data.get("labels") or {})

    def _rows(self, name: str) -> Any:
        """The core's rows of table ``name``: a long table (tasks, programs)
        stays JSON text until first read (:class:`_Pieces`), so that a run
        whose tables nobody reads (a sweep's, most often) never builds them."""
        rows = self._records.get(name)
        if isinstance(rows, _Pieces):
            rows = self._records[name] = rows.rows()
        return rows

    @functools.cached_property
    def tasks(self) -> pd.DataFrame:
        """One row per task (see the class docstring)."""
        import pandas as pd

        frame = _frame(self._rows("tasks"))
        # A task without wake-ups has no latency: NaN, in float columns.
        for c in WAKEUP_LATENCY_COLUMNS:
            if c in frame.columns:
                frame[c] = pd.to_numeric(frame[c], errors="coerce").astype(float)
        return frame

    @functools.cached_property
    def programs(self) -> pd.DataFrame:
        """One row per completed program instance."""
        return _frame(self._rows("programs"))

    @functools.cached_property
    def cpus(self) -> pd.DataFrame:
        """One row per CPU."""
        return _frame(self._rows("cpus"))

    @functools.cached_property
    def reconfigs(self) -> pd.DataFrame:
        """One row per reconfiguration (empty without a ``[dynamic]`` section)."""
        return _frame(self._rows("reconfigs"))

    @functools.cached_property
    def proxies(self) -> pd.DataFrame:
        """One row per processor proxy (empty without a ``[dynamic]`` section)."""
        return _frame(self._rows("proxies"))

    @functools.cached_property
    def vms(self) -> pd.DataFrame:
        """One row per virtual machine (empty without VMs)."""
        return _frame(self._rows("vms"))

    @classmethod
    def load(cls, out_dir: str | Path) -> Results:
        """Read back a folder written by :meth:`save` (or ``hetsched run --out``).
        ``raw_json`` is rebuilt from the files; the trace is there when the run
        was traced. Raises :class:`FileNotFoundError` naming a missing file."""
        d = Path(out_dir)
        if not (d / "summary.json").exists():
            raise FileNotFoundError(
                2, "not a run folder (no summary.json; write one with hetsched run --out)", str(d)
            )
        verify_run_folder(d)
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
        warnings = summary.pop("warnings", [])
        doc: dict[str, Any] = {"summary": summary, "warnings": warnings}
        for name in ("tasks", "programs", "cpus", "vms"):
            path = d / f"{name}.csv"
            doc[name] = _read_rows(path) if path.exists() else []
        dynamic = {
            n: _read_rows(d / f"{n}.csv")
            for n in ("reconfigs", "proxies")
            if (d / f"{n}.csv").exists()
        }
        if dynamic:
            doc["dynamic"] = dynamic
        scenario = d / "scenario.json"
        doc["scenario"] = json.loads(scenario.read_text("utf-8")) if scenario.exists() else {}
        trace = d / "trace.jsonl"
        if trace.exists():
            with trace.open(encoding="utf-8") as f:
                doc["trace"] = [json.loads(line) for line in f if line.strip()]
        return cls(json.dumps(doc))

    def summary_table(self) -> str:
        """A plain-text account of the run: the headline numbers, then one line per
        program instance, one per virtual machine (if any) and one per CPU type."""
        s = self.summary
        name = s.get("scenario") or self.scenario.get("name") or "(unnamed)"
        lines = [f"hetsched run: {name}"]
        facts: list[tuple[str, str]] = [
            ("scheduler", str(s.get("scheduler", "-"))),
            ("governor", str(s.get("governor", "-"))),
            ("seed", str(s.get("seed", "-"))),
            ("simulated time", seconds(s.get("sim_end_s"))),
            ("makespan", seconds(s.get("makespan_s"))),
            ("energy", _unit(s.get("energy_j"), "J")),
            ("average power", _unit(s.get("avg_power_w"), "W")),
            ("migrations", number(s.get("migrations"))),
            ("context switches", number(s.get("context_switches"))),
        ]
        if s.get("deadline_misses"):
            facts.append(("deadline misses", number(s.get("deadline_misses"))))
        if s.get("idle_while_runnable_s"):
            facts.append(("idle beside waiting work", seconds(s.get("idle_while_runnable_s"))))
        if "events" in s:
            wall = f" in {seconds(s['wall_s'])} of wall time" if "wall_s" in s else ""
            facts.append(("events", number(s.get("events")) + wall))
        width = max(len(k) for k, _ in facts)
        lines += [f"  {k.ljust(width)}  {v}" for k, v in facts]

        if len(self.programs):
            lines += ["", "programs"]
            rows = [
                [
                    r.get("program", "-"),
                    r.get("instance", "-"),
                    r.get("threads", "-"),
                    seconds(r.get("completion_s"))
                    if _finite(r.get("completion_s"))
                    else "unfinished",
                ]
                for r in self.programs.to_dict("records")
            ]
            lines.append(table(["program", "instance", "threads", "completion"], rows, "  "))

        if len(self.vms):
            lines += ["", "virtual machines"]
            rows = [
                [
                    r.get("name", "-"),
                    r.get("vcpus", "-"),
                    r.get("priority", "-"),
                    "yes" if r.get("aware") else "no",
                    seconds(r.get("run_s")),
                    seconds(r.get("fast_s")),
                    number(r.get("migrations")),
                ]
                for r in self.vms.to_dict("records")
            ]
            head = ["vm", "vcpus", "priority", "aware", "vcpu time", "on fastest", "migrations"]
            lines.append(table(head, rows, "  "))

        by_type = self.cpu_types()
        if len(by_type):
            lines += ["", "cpu types"]
            rows = [
                [
                    r["type"],
                    r["cpus"],
                    f"{100.0 * r['utilization']:.1f} %",
                    seconds(r["busy_s"]),
                    _unit(r["energy_j"], "J"),
                ]
                for r in by_type.to_dict("records")
            ]
            lines.append(table(["type", "cpus", "utilisation", "busy", "energy"], rows, "  "))

        if self.warnings:
            lines += ["", "warnings"]
            lines += [f"  - {w}" for w in self.warnings]
        return "\n".join(lines)

    def cpu_types(self) -> pd.DataFrame:
        """Per CPU type: number of CPUs, mean utilisation, busy time and energy."""
        import pandas as pd

        if "type" not in self.cpus.columns:
            return pd.DataFrame()
        cpus = self.cpus.copy()
        for col in ("utilization", "busy_s", "energy_j"):
            if col not in cpus.columns:
                cpus[col] = float("nan")
        grouped = cpus.groupby("type", sort=False)
        return pd.DataFrame(
            {
                "cpus": grouped.size(),
                "utilization": grouped["utilization"].mean(),
                "busy_s": grouped["busy_s"].sum(),
                "energy_j": grouped["energy_j"].sum(),
            }
        ).reset_index()

    def fairness(self, program: str | None = None) -> pd.DataFrame:
        """Fair-share view of the tasks (of one program, or all): CPU time,
        scaled CPU time (run time × rating, Li et al.'s STIME+), work done,
        each task's ideal share of the scaled CPU time under weighted GPS
        (its weight's fraction of the total), and its lag = ideal − received.

        The GPS ideal assumes the tasks were runnable over the same interval
        (spinning or always-busy threads, as in Li et al.'s Figure 9); for
        tasks that sleep it is only indicative. ``spread`` in ``attrs`` is
        (max − min)/max of scaled CPU time, and ``work_spread`` of work.
        """
        t = self.tasks
        if program is not None:
            t = t[t["program"] == program]
        if t.empty:
            raise ValueError(f"no tasks{'' if program is None else f' of program {program!r}'}")
        out = t[["task", "program", "run_s", "scaled_run_s", "work_ms", "weight"]].copy()
        total = float(out["scaled_run_s"].sum())
        out["ideal_scaled_s"] = total * out["weight"] / float(out["weight"].sum())
        out["lag_s"] = out["ideal_scaled_s"] - out["scaled_run_s"]
        scaled, work = out["scaled_run_s"], out["work_ms"]
        out.attrs["spread"] = (
            float((scaled.max() - scaled.min()) / scaled.max()) if scaled.max() > 0 else 0.0
        )
        out.attrs["work_spread"] = (
            float((work.max() - work.min()) / work.max()) if work.max() > 0 else 0.0
        )
        return out.reset_index(drop=True)

    def save(self, out_dir: str | Path, *, announce: Any = None) -> Path:
        """Write the result files (see the module doc) into ``out_dir``, creating it,
        and last ``manifest.json``: the run id and each file's size and SHA-256.

        Files of an earlier run in ``out_dir`` (the names in the module doc,
        and ``report.html`` and ``plots/KIND.*`` drawn from them) are removed
        first; any other file is left alone. Returns the folder.

        Ctrl-C while the files are written keeps the folder consistent: the
        file being written is removed, ``summary.json`` is rewritten with
        ``"partial": true`` and the files not written named in its warnings,
        and the manifest lists the files that were; then the
        :class:`KeyboardInterrupt` propagates. ``announce(name)``, if given, is
        called before each file is written (``hetsched run`` shows it for large
        runs)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self._save_files(out, announce=announce)
        return out

    def _save_files(
        self, out: Path, *, announce: Any = None, clean: bool = True
    ) -> dict[str, dict[str, Any]]:
        """:meth:`save` into the existing folder ``out``; returns each file
        written, the manifest included, with its size and SHA-256, taken from
        the bytes as they were written (no file is read back). ``clean=False``
        is for a folder the caller knows holds no result files (just made, or
        emptied): nothing is looked for to remove."""
        # No manifest while the files are written: a save cut short by
        # anything but Ctrl-C leaves none to vouch for a half-written folder.
        if clean:
            _remove_earlier_run(out)
        summary = {**self.summary, "warnings": self.warnings}
        files: dict[str, dict[str, Any]] = {}
        writers = self._writers(summary)
        current: Path | None = None
        try:
            for name, write in writers:
                current = out / name
                if announce is not None:
                    announce(name)
                data = write(current)
                # A writer returns the file's bytes, or None when it wrote
                # a file too large to hold whole (a trace) itself.
                files[name] = _file_meta(current) if data is None else _put(current, data)
                current = None
        except KeyboardInterrupt:
            if current is not None:
                with contextlib.suppress(FileNotFoundError):
                    current.unlink()
            left = [name for name, _ in writers if name not in files and name != "summary.json"]
            note = (
                "interrupted while the results were written: "
                + (", ".join(left) if left else "nothing")
                + " not written; the results are partial"
            )
            marked = {**summary, "partial": True, "warnings": [*self.warnings, note]}
            files["summary.json"] = _put(out / "summary.json", _json_bytes(marked))
            _write_manifest(out, self, files)
            raise
        return {**files, MANIFEST: _write_manifest(out, self, files)}

    def _writers(self, summary: dict[str, Any]) -> list[tuple[str, Any]]:
        """(file name, function writing it at a path), in the order written:
        the summary first, then the tables, the scenario and the trace files."""
        out: list[tuple[str, Any]] = [("summary.json", lambda p: _json_bytes(summary))]

        def table(attr: str) -> Any:
            def write(p: Path) -> bytes | None:
                # A table read through its attribute is written from that
                # DataFrame (it may have been changed); otherwise straight
                # from the core's rows, without pandas, to the same bytes.
                if attr not in self.__dict__:
                    data = _rows_csv_bytes(self._rows(attr) or [], _FLOAT_COLUMNS.get(attr, ()))
                    if data is not None:
                        return data
                _csv_ready(getattr(self, attr)).to_csv(p, index=False)
                return None

            return write

        # A table left out of partial results gets no file (an empty one
        # would read as a run without rows).
        omitted = self.summary.get("omitted") or {}
        for name in ("tasks", "programs", "cpus"):
            if name not in omitted:
                out.append((f"{name}.csv", table(name)))
        if self._rows("vms"):
            out.append(("vms.csv", table("vms")))
        for name in ("reconfigs", "proxies"):
            if self._rows(name):
                out.append((f"{name}.csv", table(name)))
        out.append(("scenario.json", lambda p: _json_bytes(self.scenario)))
        if self.trace:
            from . import traces

            def perfetto(p: Path) -> None:
                with p.open("w", encoding="utf-8") as f:
                    json.dump(traces.perfetto(self), f, separators=(",", ":"))

            def jsonl(p: Path) -> None:
                with p.open("w", encoding="utf-8") as f:
                    for event in self.trace:
                        f.write(json.dumps(event, separators=(",", ":")) + "\n")

            def ftrace(p: Path) -> None:
                with p.open("w", encoding="utf-8") as f:
                    traces.write_ftrace(self, f)

            out += [("trace.json", perfetto), ("trace.jsonl", jsonl), ("trace.txt", ftrace)]
        return out

    def __repr__(self) -> str:
        return self.summary_table()

    __str__ = __repr__


def verify_run_folder(d: str | Path) -> dict[str, Any] | None:
    """Check that the result files in run folder ``d`` all belong to the run
    of its ``manifest.json``: each file it lists is there with its size and
    SHA-256, and no other result file is. Returns the manifest (None for a
    folder written before manifests existed); raises :class:`MixedRunError`
    naming the first file that does not belong."""
    d = Path(d)
    path = d / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"]
        run = str(manifest["run_id"])
        if not isinstance(files, dict):
            raise TypeError("files is not an object")
    except (ValueError, KeyError, TypeError) as e:
        raise MixedRunError(path, f"unreadable manifest ({e}); run the scenario again") from None
    advice = "the folder mixes runs; run the scenario again into an empty folder"
    for name, meta in sorted(files.items()):
        f = d / name
        if not f.is_file():
            raise MixedRunError(f, f"listed in the manifest of run {run} but missing; {advice}")
        if f.stat().st_size != meta.get("bytes") or _sha256(f) != meta.get("sha256"):
            raise MixedRunError(f, f"changed since run {run} wrote it; {advice}")
    for name in RESULT_FILES:
        if name not in files and (d / name).exists():
            raise MixedRunError(d / name, f"not written by run {run} (not in {MANIFEST}); {advice}")
    return dict(manifest)


def _remove_earlier_run(out: Path) -> None:
    # One listing of the folder instead of a removal tried for every name:
    # a sweep saves hundreds of runs, and each file-system call counts.
    present = set(os.listdir(out))
    for name in (MANIFEST, *RESULT_FILES, *DERIVED_FILES):
        if name in present:
            with contextlib.suppress(FileNotFoundError):
                (out / name).unlink()
    plots = out / "plots"
    if "plots" in present and plots.is_dir():
        for kind in DERIVED_PLOT_KINDS:
            for suffix in DERIVED_PLOT_SUFFIXES:
                with contextlib.suppress(FileNotFoundError):
                    (plots / f"{kind}{suffix}").unlink()
        with contextlib.suppress(OSError):
            plots.rmdir()  # only when empty


def _file_meta(path: Path) -> dict[str, Any]:
    return {"bytes": path.stat().st_size, "sha256": _sha256(path)}


def _put(path: Path, data: bytes) -> dict[str, Any]:
    """Write ``data`` to ``path``; its size and SHA-256 from the bytes written."""
    path.write_bytes(data)
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _write_manifest(out: Path, res: Results, files: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``out``'s manifest (under a temporary name, then renamed) listing
    ``files``; returns the manifest's own size and SHA-256."""
    files = {name: files[name] for name in RESULT_FILES if name in files}
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")
    # The id tells runs apart: the resolved scenario (seed included), what it
    # produced, and when it was saved (the same scenario saved twice is two runs).
    ident = json.dumps([res.scenario, res.summary, created], sort_keys=True, default=str)
    manifest = {
        "format": 1,
        "run_id": hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16],
        "created": created,
        "hetsched": _core.__version__,
        "scenario": res.summary.get("scenario") or res.scenario.get("name"),
        "seed": res.summary.get("seed", res.scenario.get("seed")),
        "files": files,
    }
    tmp = out / f".{MANIFEST}.{os.getpid()}.tmp"
    meta = _put(tmp, _json_bytes(manifest))
    tmp.replace(out / MANIFEST)
    return meta


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(functools.partial(f.read, 1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a CSV written by :meth:`Results.save`, with JSON text cells
    (``run_s_by_type``) parsed back and missing values as None."""
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return []
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    for row in rows:
        for k, v in row.items():
            if isinstance(v, str) and v[:1] in "{[":
                with contextlib.suppress(ValueError):
                    row[k] = json.loads(v)
    return rows


#: Rows converted to a DataFrame at once: pandas converts a list of dicts in
#: one call that Ctrl-C cannot stop (seconds for a million rows), so longer
#: tables are converted piece by piece and joined.
FRAME_ROWS = 16384


def _frame(rows: Sequence[Mapping[str, Any]] | None) -> pd.DataFrame:
    import pandas as pd

    if not rows:
        return pd.DataFrame()
    rows = list(rows)
    if len(rows) <= FRAME_ROWS:
        return pd.DataFrame.from_records(rows)
    # Columns in first-seen order and dtypes as one conversion would give them.
    pieces = [
        pd.DataFrame.from_records(rows[i : i + FRAME_ROWS]) for i in range(0, len(rows), FRAME_ROWS)
    ]
    columns = list(dict.fromkeys(c for p in pieces for c in p.columns))
    joined = pd.concat(pieces, ignore_index=True)[columns]
    return joined.infer_objects()


class ConversionInterrupted(KeyboardInterrupt):
    """Ctrl-C while a results document was converted: ``document`` holds its
    small part (summary, CPUs, scenario ...) marked partial, with the long
    tables left out and named in ``omitted``."""

    def __init__(self, document: dict[str, Any]) -> None:
        super().__init__("interrupted while the results were converted")
        self.document = document


def _parse_results(raw: str | bytes) -> Any:
    """The results document in ``raw`` (UTF-8 bytes as the core hands it
    over, or text, read as its UTF-8 bytes). The core writes each table of
    rows in pieces of a few thousand rows, each on a line of its own
    (compact JSON has no newline otherwise): the rest of the document is
    read first, then the pieces one by one, so that Ctrl-C is answered
    between pieces (:class:`ConversionInterrupted`), and the long tables
    stay text until read (:data:`LAZY_TABLES`)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if b"\n" not in raw:
        return json.loads(raw)
    # Millions of small containers: the cyclic garbage collector would walk
    # them again and again while they are made (they hold no cycles).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse_pieces(raw)
    finally:
        if collecting:
            gc.enable()


#: Long tables left as text until read (see :meth:`Results._rows`).
LAZY_TABLES = ("tasks", "programs")

#: The last line of a document's text before a table's pieces: its key.
_TABLE_KEY = re.compile(rb'"([^"\\]+)":\[$')


class _Pieces:
    """A long table of a results text, not parsed yet: where its pieces
    (each a line of comma-separated rows) lie in the text's UTF-8 bytes.
    Holds the bytes, which the results keep anyway (``raw_json``), not a
    copy of them."""

    __slots__ = ("raw", "spans")

    def __init__(self, raw: bytes, spans: list[tuple[int, int]]) -> None:
        self.raw = raw
        self.spans = spans

    def rows(self) -> list[Any]:
        collecting = gc.isenabled()
        gc.disable()  # millions of small containers without cycles
        try:
            rows: list[Any] = []
            for a, b in self.spans:
                rows.extend(json.loads(b"[" + self.raw[a:b] + b"]"))
            return rows
        finally:
            if collecting:
                gc.enable()


def _pieces_rows(obj: Any) -> Any:
    """``json.dumps``'s ``default`` for a document that holds `_Pieces`."""
    if isinstance(obj, _Pieces):
        return obj.rows()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _parse_pieces(raw: bytes) -> Any:
    # Line by line without splitting the text: a long table's pieces are
    # located, not copied.
    skeleton: list[bytes] = []
    tables: list[tuple[str, list[tuple[int, int]]]] = []
    pos, n = 0, len(raw)

    def next_line(at: int) -> tuple[int, int]:
        end = raw.find(b"\n", at)
        return (at, n) if end < 0 else (at, end)

    while pos <= n:
        a, b = next_line(pos)
        line = raw[a:b]
        skeleton.append(line)
        pos = b + 1
        key = _TABLE_KEY.search(line) if line.endswith(b"[") else None
        if key is None:
            continue
        spans: list[tuple[int, int]] = []
        while pos <= n and not raw.startswith(b"]", pos):
            a, b = next_line(pos)
            spans.append((a, b - 1 if raw[b - 1 : b] == b"," else b))
            pos = b + 1
        tables.append((key[1].decode("utf-8"), spans))
    doc = json.loads(b"".join(skeleton))
    if not isinstance(doc, dict):
        raise ValueError("results JSON must be an object")
    done: list[str] = []
    try:
        for name, spans in tables:
            pieces = _Pieces(raw, spans)
            doc[name] = pieces if name in LAZY_TABLES else pieces.rows()
            done.append(name)
    except KeyboardInterrupt:
        omitted = dict(doc.get("omitted") or {})
        for name, _ in tables:
            if name not in done:
                doc[name] = []
                omitted[name] = None
        doc["omitted"] = omitted
        summary = doc.setdefault("summary", {})
        summary["partial"] = True
        left = ", ".join(n for n, _ in tables if n not in done)
        doc.setdefault("warnings", []).append(
            "interrupted while the results were converted: the "
            f"{left} table(s) are left out; the results are partial"
        )
        raise ConversionInterrupted(doc) from None
    return doc


def _csv_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """Nested values (``run_s_by_type``) become JSON text so the CSV stays machine-readable."""
    nested = [c for c in frame.columns if frame[c].map(lambda v: isinstance(v, dict | list)).any()]
    if not nested:
        return frame
    frame = frame.copy()
    for c in nested:
        frame[c] = frame[c].map(
            lambda v: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v
        )
    return frame


#: Columns a table's DataFrame holds as floats whatever their values (see
#: :attr:`Results.tasks`).
_FLOAT_COLUMNS: dict[str, tuple[str, ...]] = {"tasks": WAKEUP_LATENCY_COLUMNS}

#: Integers pandas keeps in an ``int64`` column, and those a ``float64``
#: column holds exactly; others take the pandas path.
_INT64 = (-(2**63), 2**63 - 1)
_EXACT_FLOAT_INT = 2**53

_NESTED = (dict, list)
_SCALARS = frozenset((bool, int, float, str, dict, list, type(None)))


def _column_cells(values: list[Any], as_float: bool) -> tuple[str, list[str]] | None:
    """How pandas stores the column ``values`` (cells of a table's rows, None
    where missing) and its CSV cells as ``DataFrame.to_csv`` writes them after
    :func:`_csv_ready`: ``(kind, cells)``, kind one of ``"int"`` (``int64``),
    ``"float"`` (``float64``), ``"bool"``, ``"null"`` (no value) and
    ``"object"`` (mixed; each value as ``str``, nested ones as sorted JSON).
    None for values this does not model (other types, integers beyond what
    the column's dtype holds exactly): the caller then lets pandas write."""
    types = set(map(type, values))
    if not types <= _SCALARS:
        return None
    null = type(None) in types
    types.discard(type(None))
    numeric = types <= {int, float}
    if as_float and not numeric:
        return None  # pd.to_numeric would parse strings and booleans
    if float in types:
        # NaN is a missing value in every kind of column.
        null = null or any(v != v for v in values if type(v) is float)
    if not types:
        return "null", [""] * len(values)
    if numeric and (as_float or float in types or null):
        ints = [v for v in values if type(v) is int]
        if ints and max(abs(min(ints)), abs(max(ints))) > _EXACT_FLOAT_INT:
            return None
        # numpy writes a float64 as the shortest text that reads back as it,
        # as Python's repr does (tests/test_results_csv.py checks this and the
        # rest against the pandas installed); NaN and None are the empty cell.
        return "float", ["" if v is None or v != v else repr(float(v)) for v in values]
    if types == {int}:
        if min(values) < _INT64[0] or max(values) > _INT64[1]:
            return None
        return "int", [str(v) for v in values]
    kind = "bool" if types == {bool} and not null else "object"
    nested = bool(types & {dict, list})
    cells = [
        ""
        if v is None or (type(v) is float and v != v)
        else json.dumps(v, sort_keys=True)
        if nested and isinstance(v, _NESTED)
        else str(v)
        for v in values
    ]
    return kind, cells


def _write_rows_csv(path: Path, rows: Sequence[Mapping[str, Any]], floats: Sequence[str]) -> bool:
    """Write ``rows`` (a table of the core's results) to ``path`` as CSV, byte
    for byte what ``_csv_ready(_frame(rows)).to_csv(path, index=False)``
    writes, without pandas. Returns False, writing nothing, for a table whose
    values it does not model (see :func:`_column_cells`)."""
    data = _rows_csv_bytes(rows, floats)
    if data is None:
        return False
    path.write_bytes(data)
    return True


def _rows_csv_bytes(rows: Sequence[Mapping[str, Any]], floats: Sequence[str]) -> bytes | None:
    """The bytes :func:`_write_rows_csv` writes, or None for a table whose
    values it does not model."""
    import csv
    import io

    rows = list(rows)
    if not all(type(r) is dict for r in rows):
        return None
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if rows and not columns:
        return None
    # Longer tables become DataFrames piece by piece (:func:`_frame`): equal
    # to one conversion when every piece gives each column the same kind.
    size = FRAME_ROWS if len(rows) > FRAME_ROWS else max(len(rows), 1)
    cells: list[list[str]] = []
    for c in columns:
        values = [r.get(c) for r in rows]
        kinds = set()
        column: list[str] = []
        for i in range(0, len(values), size):
            got = _column_cells(values[i : i + size], c in floats)
            if got is None:
                return None
            kinds.add(got[0])
            column += got[1]
        if len(kinds) > 1:
            return None
        cells.append(column)
    text = io.StringIO(newline="")
    writer = csv.writer(text, lineterminator=os.linesep, quoting=csv.QUOTE_MINIMAL)
    writer.writerow(columns)
    writer.writerows(zip(*cells, strict=True))
    return text.getvalue().encode("utf-8")


def _json_bytes(value: object) -> bytes:
    """A result file's JSON: indented, keys sorted, a final newline."""
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and value == value and abs(value) != float("inf")


def _unit(value: object, unit: str) -> str:
    if not _finite(value):
        return "-"
    return f"{number(value)} {unit}"
