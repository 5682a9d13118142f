"""A worker process of a local sweep (see :mod:`hetsched.sweeps`).

The sweep starts each worker as a fresh interpreter
(``python -c BOOTSTRAP PARENT_PID``),
not through :mod:`multiprocessing`: a fresh interpreter does not import the
caller's ``__main__`` again, so a sweep works from a plain script without an
``if __name__ == "__main__":`` guard, and no resource tracker process is left
behind.

Protocol, on the worker's standard input and output: frames of a 4-byte
big-endian length and a pickle. The parent sends ``{"sys_path": [...]}``
first (so that ``python:module:Class`` policies import as in the parent),
the worker answers ``("ready", STARTUP_CPU_S)`` (the CPU time, user and
system, that its start-up cost, interpreter included); then each job
``(key, (base JSON, overrides, trace, run folder, head, tail))`` is answered
with ``(key, (row, results JSON, False))``, or, when a run folder is given,
the worker writes the run's files there (:func:`save_run`, the row being
``head | row | tail``) and answers ``(key, (row, None, True))``. Jobs are
answered in the order sent; the parent sends the next one before the answer
to the last, so that it waits in the input. End of input ends the worker.

A worker runs many runs (the pool lives as long as the sweep) and imports
only what a run needs: the core and :mod:`hetsched.api`, not pandas or
matplotlib. The sweep's table and figures are made in the sweep's process;
a run's CSV files are written here straight from the core's rows
(:meth:`Results.save <hetsched.results.Results.save>` writes the bytes
pandas would; only a table holding values that writer does not model, such
as an integer beyond 2**53 in a column with missing cells, is left to
pandas). This module therefore holds :func:`run_point` and
:func:`save_run`, so that importing it does not pull in
:mod:`hetsched.sweeps`.

The worker dies with its parent: on Linux the kernel sends it SIGKILL when
the parent goes (``prctl(PR_SET_PDEATHSIG)``); elsewhere a thread watches the
parent's PID. Ctrl-C is ignored here: it is for the sweep's process, which
stops the workers itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import pickle
import signal
import struct
import sys
import time
from pathlib import Path
from typing import IO, Any

#: prctl option that asks the kernel for a signal when the parent exits
#: (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: How often the portable parent watch looks at the parent's PID, s.
PARENT_POLL_S = 0.5

_HEADER = struct.Struct(">I")

#: The worker's command line (``python -c BOOTSTRAP PARENT_PID``). It asks for
#: the parent-death signal before importing anything heavy, so that a worker
#: whose parent is killed while the worker still starts does not live on.
BOOTSTRAP = (
    "import ctypes, os, sys\n"
    "try:\n"
    f"    ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}, 0, 0, 0)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "from hetsched._sweep_worker import main\n"
    "main()\n"
)


def send(stream: IO[bytes], obj: Any) -> None:
    """Write one frame."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_exact(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``, or None at end of file (a partial frame is an end too)."""
    parts: list[bytes] = []
    left = n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def recv(fd: int) -> Any | None:
    """Read one frame; None at end of file."""
    head = read_exact(fd, _HEADER.size)
    if head is None:
        return None
    body = read_exact(fd, _HEADER.unpack(head)[0])
    if body is None:
        return None
    return pickle.loads(body)


def die_with_parent(parent: int) -> None:
    """Arrange to end when process ``parent`` ends; exit now if it already has."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            # The running program's own symbols, libc's among them: no
            # ctypes.util.find_library, which imports subprocess and shutil
            # and runs ldconfig, at the cost of a worker's start-up.
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    # The parent may have gone before the signal was armed.
    if os.getppid() != parent:
        os._exit(1)
    if not armed:
        import threading  # only where the kernel does not watch the parent

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(PARENT_POLL_S)
            os._exit(1)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()


#: Columns every sweep table has, before the swept values and the summary.
BASE_COLUMNS = ("run", "run_id", "status", "error")


def run_point(
    base_json: str, overrides: list[tuple[str, str]], trace: bool
) -> tuple[dict[str, Any], str | None]:
    """Run one point of a sweep; return ``(row, results JSON)``. Never raises
    for a bad scenario or a failed run: the row says ``status="error"``.
    (Top level so process pools and Dask workers can pickle it by name.)"""
    from . import api

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


def tmp_name(path: Path) -> Path:
    """A temporary name beside ``path`` that no other process uses."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_run(run_dir: Path, row: dict[str, Any], raw: str | None) -> None:
    """Write one run's folder: the files of :meth:`Results.save` (when the
    run produced results) and, last, ``row.json`` with their checksums."""
    try:
        run_dir.mkdir(parents=True)
        fresh = True
    except FileExistsError:
        fresh = False
        # row.json goes first, then every other file of an earlier attempt,
        # so that the folder holds this run's files only.
        with contextlib.suppress(FileNotFoundError):
            (run_dir / "row.json").unlink()
        for old in run_dir.iterdir():
            if old.is_file():
                old.unlink()
    files: dict[str, str] = {}
    if raw is not None:
        from .results import Results

        # The checksums are taken from the bytes as the save wrote them (the
        # manifest's included): no file is read back.
        written = Results(raw)._save_files(run_dir, clean=not fresh)
        files = {name: written[name]["sha256"] for name in sorted(written)}
    # row.json last, written whole: its presence marks the run finished and
    # its checksums let a resumed sweep check the other files.
    tmp = tmp_name(run_dir / "row.json")
    tmp.write_text(json.dumps({**row, "files": files}, indent=2, default=str) + "\n", "utf-8")
    tmp.replace(run_dir / "row.json")


def main() -> None:
    parent = int(sys.argv[1])
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The protocol owns the real standard output; anything a policy prints
    # goes to standard error.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    hello = recv(0)
    if not isinstance(hello, dict):
        return
    sys.path[:] = list(hello.get("sys_path") or sys.path)
    from . import api  # noqa: F401  (loaded now, so that start-up cost is counted here)

    send(out, ("ready", time.process_time()))
    while True:
        msg = recv(0)
        if msg is None:
            return
        key, (base_json, overrides, trace, run_dir, head, tail) = msg
        row, raw = run_point(base_json, overrides, trace)
        if run_dir is None:
            send(out, (key, (row, raw, False)))
        else:
            row = {**head, **row, **tail}
            save_run(Path(run_dir), row, raw)
            send(out, (key, (row, None, True)))
