"""Speed-up of a local sweep with 2 worker processes against 1.

The sweep is ``scenarios/sweep-demo.toml`` with its seed axis lengthened
from 5 to 67 seeds: 3 schedulers × 67 seeds × 2 machines = 402 runs (the
"400 runs" of the benchmark). Each sweep runs as ``hetsched sweep FILE
--workers N --out DIR`` in a child process, into a fresh folder; the
measurements are its wall time and the CPU time (user + system) of that
process and its workers (``RUSAGE_CHILDREN``: descendants once reaped). The
configurations alternate (1, 2, 1, 2, ...) so that a change in the machine's
load affects both; the load average before and after each is recorded,
because on a shared machine the wall-time ratio is only as good as the idle
cores it got.

A worker's start-up is measured apart: workers started one after another as
a sweep starts them (the same command line and first message), each
reporting the CPU time, user and system, interpreter included, at which it
is ready for its first run.

Python's compiled bytecode matters to both: a process that finds no cached
bytecode compiles every hetsched module it imports (about 0.05 CPU-s at each
worker's start). ``--bytecode cached`` (the default) runs everything as an
installed package runs, with bytecode cached in a temporary folder
(``PYTHONPYCACHEPREFIX``, filled by one import first); ``--bytecode env``
keeps the environment as it is (with ``PYTHONDONTWRITEBYTECODE`` set and no
``__pycache__`` beside the sources, every process compiles).

    python bench/sweep_speedup.py [--repeats 2] [--startups 20] [--bytecode cached|env]
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "scenarios" / "sweep-demo.toml"
#: Seeds of the lengthened sweep: 3 × 67 × 2 = 402 runs.
SEEDS = 67


def sweep_file(folder: Path, seeds: int = SEEDS) -> Path:
    """``sweep-demo.toml`` with ``seeds`` seeds and its base by absolute path."""
    text = DEMO.read_text(encoding="utf-8")
    text, n_base = re.subn(
        r'^base = "demo.toml"$',
        f"base = {json.dumps(str(ROOT / 'scenarios' / 'demo.toml'))}",
        text,
        flags=re.M,
    )
    text, n_seed = re.subn(
        r"^seed = \[.*\]$", f"seed = {list(range(1, seeds + 1))}", text, flags=re.M
    )
    if n_base != 1 or n_seed != 1:
        raise RuntimeError(f"{DEMO}: expected one base line and one seed axis to lengthen")
    path = folder / "sweep-demo-400.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def bench_env(bytecode: str, folder: Path) -> dict[str, str]:
    """The environment of the sweeps and workers measured: this checkout's
    package, and bytecode cached in ``folder`` (``bytecode="cached"``) or
    as the environment has it (``"env"``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    if bytecode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        # Fill the cache: what a sweep and its workers import.
        code = "import hetsched.cli, hetsched.sweeps, hetsched._sweep_worker, hetsched.traces"
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
    elif bytecode != "env":
        raise ValueError(f"bytecode: 'cached' or 'env' is allowed, got {bytecode!r}")
    return env


def startup_cpu(env: Mapping[str, str], n: int) -> list[float]:
    """CPU seconds at which each of ``n`` workers, started one after another
    as a local sweep starts them, says it is ready."""
    sys.path.insert(0, str(ROOT / "python"))
    from hetsched._sweep_worker import BOOTSTRAP, recv, send

    out: list[float] = []
    for _ in range(n):
        with subprocess.Popen(
            [sys.executable, "-c", BOOTSTRAP, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(env),
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            send(proc.stdin, {"sys_path": sys.path})
            msg = recv(proc.stdout.fileno())
            proc.stdin.close()
            proc.wait()
        if not (isinstance(msg, tuple) and msg[0] == "ready"):
            raise RuntimeError(f"a worker did not start: {msg!r}")
        out.append(float(msg[1]))
    return out


def run_once(path: Path, workers: int, out: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """One sweep in a child process: wall and CPU seconds, loads, runs."""
    cmd = [sys.executable, "-m", "hetsched", "sweep", str(path), "--workers", str(workers)]
    cmd += ["--out", str(out), "-q"]
    load0 = os.getloadavg()[0]
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=dict(env), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    cpu = _children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"sweep with {workers} workers failed: {proc.stderr[-800:]}")
    rows = sum(1 for _ in (out / "results.csv").open(encoding="utf-8")) - 1
    return {
        "workers": workers,
        "wall_s": wall,
        "cpu_s": cpu,
        "runs": rows,
        "load_before": load0,
        "load_after": os.getloadavg()[0],
    }


def summarize(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Best (least disturbed) wall time of each worker count, the speed-up
    of 2 over 1 on it, and the CPU time per run of each."""
    by: dict[int, list[dict[str, Any]]] = {}
    for s in samples:
        by.setdefault(int(s["workers"]), []).append(s)
    if set(by) != {1, 2}:
        raise ValueError(f"summarize: need samples with 1 and 2 workers, got {sorted(by)}")
    best = {w: min(x["wall_s"] for x in xs) for w, xs in by.items()}
    cpu = {w: min(x["cpu_s"] for x in xs) for w, xs in by.items()}
    runs = by[1][0]["runs"]
    return {
        "runs": runs,
        "wall_s_1": best[1],
        "wall_s_2": best[2],
        "speedup": best[1] / best[2],
        "cpu_s_1": cpu[1],
        "cpu_s_2": cpu[2],
        # An upper bound of the speed-up on 2 idle cores: the 1-worker sweep
        # takes its CPU time, the 2-worker one at least half of its own.
        "cpu_bound_speedup": cpu[1] / (cpu[2] / 2),
        "load_avg": [round(s["load_before"], 2) for s in samples],
        "samples": list(samples),
    }


def filesystem(path: Path, mounts: str | None = None) -> str:
    """The type of the file system holding ``path`` (the longest mount point
    of ``/proc/mounts`` above it), or ``"unknown"`` where that cannot be read.
    A sweep writes about seven files a run, so what one costs depends on the
    file system as much as on the sweep: on the development machine a file
    created on its ext4 root costs about 570 µs of system time, on tmpfs a
    few µs (docs/performance.md, "Sweeps and the file system"). ``mounts``:
    the text of ``/proc/mounts`` (read when not given)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text(encoding="utf-8")
        except OSError:
            return "unknown"
    lines = mounts.splitlines()
    target = str(path.resolve())
    best, kind = "", "unknown"
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        # /proc/mounts escapes spaces and a few other characters as octal.
        mnt = parts[1].encode().decode("unicode_escape")
        inside = target == mnt or target.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= len(best):
            best, kind = mnt, parts[2]
    return kind


def measure(
    repeats: int = 2, startups: int = 20, bytecode: str = "cached", where: Path | None = None
) -> dict[str, Any]:
    """``where``: the folder in which the sweeps write (a temporary folder is
    made inside it; default the system's temporary folder)."""
    if where is not None and not where.is_dir():
        raise ValueError(f"{where}: not a folder (the sweeps write into a folder made inside it)")
    with tempfile.TemporaryDirectory(prefix="hetsched-sweep-bench-", dir=where) as tmp:
        folder = Path(tmp)
        fs = filesystem(folder)
        env = bench_env(bytecode, folder)
        path = sweep_file(folder)
        load0 = os.getloadavg()[0]
        starts = startup_cpu(env, startups) if startups else []
        load1 = os.getloadavg()[0]
        samples = []
        for i in range(repeats):
            for workers in (1, 2):
                print(f"sweep: {workers} worker(s), round {i + 1} ...", file=sys.stderr)
                samples.append(run_once(path, workers, folder / f"out-{workers}-{i}", env))
    res = summarize(samples)
    res["bytecode"] = bytecode
    res["dir"] = str(where if where is not None else Path(tempfile.gettempdir()))
    res["filesystem"] = fs
    if starts:
        res["worker_startup_cpu_s"] = {
            "n": len(starts),
            "min": min(starts),
            "median": statistics.median(starts),
            "max": max(starts),
            "load_avg": [round(load0, 2), round(load1, 2)],
        }
    return res


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="sweeps per worker count")
    ap.add_argument("--startups", type=int, default=20, help="worker starts measured apart")
    ap.add_argument(
        "--bytecode",
        choices=("cached", "env"),
        default="cached",
        help="cached: bytecode cached as for an installed package; env: as the environment has it",
    )
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="folder in which the sweeps write (default: the system's temporary folder); "
        "e.g. /dev/shm to leave the disk's file system out",
    )
    args = ap.parse_args(argv)
    if args.dir is not None and not args.dir.is_dir():
        ap.error(f"--dir: an existing folder is allowed, got {str(args.dir)!r}")
    if args.repeats < 1:
        ap.error(f"--repeats: a positive number is allowed, got {args.repeats}")
    if args.startups < 0:
        ap.error(f"--startups: zero or a positive number is allowed, got {args.startups}")
    res = measure(args.repeats, args.startups, args.bytecode, args.dir)
    print(json.dumps({k: v for k, v in res.items() if k != "samples"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
