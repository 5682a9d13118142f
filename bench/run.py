"""Benchmarks of the engine (``make bench``).

Runs the standard scenario (``bench/standard.toml``: 64 CPUs, 2000 threads
alternating compute and sleep under CFS, 60 simulated seconds) with the
engine alone (the Rust benchmark binary, median of several runs, peak memory
from the kernel's accounting of that process) and once through the Python
API, and writes ``bench/results.json``.

Timings are compared as medians of runs made in one invocation; nothing
here is asserted, since shared machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDARD = ROOT / "bench" / "standard.toml"


def engine_binary() -> Path:
    """Build the Rust benchmark binary and return its path."""
    out = subprocess.run(
        [
            "cargo",
            "bench",
            "--no-run",
            "--message-format=json",
            "-p",
            "hetsched-core",
            "--bench",
            "engine",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        is_exe = msg.get("reason") == "compiler-artifact" and msg.get("executable")
        if is_exe and msg["target"]["name"] == "engine":
            return Path(msg["executable"])
    raise SystemExit("bench: cannot find the engine benchmark binary in cargo's output")


def run_engine(binary: Path, scenario: Path, runs: int) -> dict:
    """Run the engine binary; return its JSON line (it reports its own peak RSS)."""
    proc = subprocess.run(
        [str(binary), str(scenario), str(runs)], cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: {binary.name} {scenario.name} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_python(scenario: Path) -> dict:
    """Run the scenario once through the Python API."""
    import hetsched

    t0 = time.perf_counter()
    res = hetsched.run(hetsched.load(scenario))
    wall = time.perf_counter() - t0
    s = res.summary
    return {
        "events": s["events"],
        "engine_wall_s": s["wall_s"],
        "total_wall_s": wall,
        "events_per_sec": s["events"] / wall,
        "sim_s_per_wall_s": s["sim_end_s"] / wall,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs", type=int, default=3, help="engine runs per scenario (median reported)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json")
    args = ap.parse_args(argv)

    import hetsched

    print("building the engine benchmark ...", file=sys.stderr)
    binary = engine_binary()
    print(f"standard scenario, {args.runs} engine runs ...", file=sys.stderr)
    eng = run_engine(binary, STANDARD, args.runs)
    print("standard scenario through the Python API ...", file=sys.stderr)
    py = run_python(STANDARD)
    results = {
        "version": hetsched.__version__,
        "machine": {
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "standard": {"scenario": str(STANDARD.relative_to(ROOT)), "engine": eng, "python": py},
        "events_per_sec": eng["events_per_sec"],
        "peak_rss_mib": eng["peak_rss_mib"],
        "target_events_per_sec": 10_000_000,
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    mev = eng["events_per_sec"] / 1e6
    print(
        f"standard: {eng['events']} events, {mev:.2f} M events/s (engine, median of {args.runs}), "
        f"peak RSS {eng['peak_rss_mib']:.1f} MiB; through Python "
        f"{py['events_per_sec'] / 1e6:.2f} M events/s, "
        f"{py['sim_s_per_wall_s']:.1f} simulated s per wall s"
    )
    print(f"written {args.out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
