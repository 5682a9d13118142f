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

    python bench/sweep_speedup.py [--repeats 2]
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
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


def run_once(path: Path, workers: int, out: Path) -> dict[str, Any]:
    """One sweep in a child process: wall and CPU seconds, loads, runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    cmd = [sys.executable, "-m", "hetsched", "sweep", str(path), "--workers", str(workers)]
    cmd += ["--out", str(out), "-q"]
    load0 = os.getloadavg()[0]
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
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


def measure(repeats: int = 2) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hetsched-sweep-bench-") as tmp:
        folder = Path(tmp)
        path = sweep_file(folder)
        samples = []
        for i in range(repeats):
            for workers in (1, 2):
                print(f"sweep: {workers} worker(s), round {i + 1} ...", file=sys.stderr)
                samples.append(run_once(path, workers, folder / f"out-{workers}-{i}"))
    return summarize(samples)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="sweeps per worker count")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats: a positive number is allowed, got {args.repeats}")
    res = measure(args.repeats)
    print(json.dumps({k: v for k, v in res.items() if k != "samples"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
