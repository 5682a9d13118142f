"""Benchmarks of the engine (``make bench``).

Runs the standard scenario (``bench/standard.toml``: 64 CPUs, 2000 threads
alternating compute and sleep under CFS, 60 simulated seconds) with the
engine alone (the Rust benchmark binary, median of several runs, peak memory
from the kernel's accounting of that process) and once through the Python
API, and writes ``bench/results.json``.

Then a policy series (one scenario each for the heterogeneous, dynamic,
virtualised and agent-driven policies, and the same scenario under ``cfs``
and under a Python-written policy), the heterogeneous and virtual-machine
series at several sizes (``series.py``: ``a-dwrr`` on big.LITTLE,
``chameleon`` with dynamic processors, ``xen-credit`` and ``aash`` with
virtual machines), a scaling series in CPUs and threads under CFS (engine
time, events per second, simulated seconds per wall second, peak memory of a
child process per point) and the side-by-side comparison with SimSo
(``compare_simso.py``).

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


#: (CPUs, threads, simulated seconds) of the scaling series.
SCALING = [
    (8, 100, 10.0),
    (64, 1_000, 10.0),
    (256, 10_000, 2.0),
    (1024, 10_000, 2.0),
    (1024, 100_000, 1.0),
]
#: The target point: 1024 CPUs, 100 000 threads, 10 virtual seconds.
BIG = (1024, 100_000, 10.0)

SCALING_CHILD = r"""
import json, resource, sys, time
import hetsched
cpus, threads, dur = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
scn = {
    "name": f"scale-{cpus}x{threads}", "seed": 1, "duration_s": dur,
    "stop_when_done": False, "scheduler": "cfs", "governor": "performance",
    "machine": {
        "types": {"core": {"capacity": 1024, "pstates": [{"mhz": 2000, "volt": 1.0}]}},
        "clusters": [{"type": "core", "cores": cpus}],
    },
    "workload": {"programs": [{
        "name": "workers", "kind": "phases", "threads": threads, "loops": 10**9,
        "jitter": 0.5, "phases": [{"compute_ms": 2}, {"sleep_ms": 30}],
    }]},
}
parsed = hetsched.loads(json.dumps(scn), fmt="json")
t0 = time.perf_counter()
res = hetsched.run(parsed)
wall = time.perf_counter() - t0
s = res.summary
print(json.dumps({
    "cpus": cpus, "threads": threads, "sim_s": dur, "events": s["events"],
    "engine_wall_s": s["wall_s"], "total_wall_s": wall,
    "events_per_sec": s["events"] / s["wall_s"],
    "sim_s_per_wall_s": dur / wall,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


#: Policy series: (label, scenario file, scheduler override or None). The
#: Python row runs the same scenario as the ``cfs`` row with a Python policy.
POLICY_SERIES = [
    ("cfs (demo)", "scenarios/demo.toml", None),
    ("Python round-robin (demo)", "scenarios/demo.toml", "python-rr"),
    ("a-dwrr", "scenarios/adwrr-spin.toml", None),
    ("chameleon (fusion via proxies)", "scenarios/chameleon-fuse.toml", None),
    ("aash (virtual machines)", "scenarios/aash-blast-eon.toml", None),
    ("patel-cpu agent + cpusets", "scenarios/patel-task2.toml", None),
]


def run_policy_series(runs: int) -> list[dict]:
    """Each scenario of :data:`POLICY_SERIES` through the Python API; the
    median engine time of ``runs`` runs."""
    import statistics

    import hetsched
    from hetsched.examples_policies import RoundRobin

    rows = []
    for label, path, override in POLICY_SERIES:
        print(f"policies: {label} ...", file=sys.stderr)
        scn = hetsched.load(ROOT / path)
        walls, res = [], None
        for _ in range(runs):
            sched = RoundRobin() if override == "python-rr" else None
            res = hetsched.run(scn, scheduler=sched)
            walls.append(res.summary["wall_s"])
        assert res is not None
        wall = statistics.median(walls)
        s = res.summary
        rows.append(
            {
                "policy": label,
                "scenario": path,
                "events": s["events"],
                "engine_wall_s": wall,
                "events_per_sec": s["events"] / wall,
                "sim_s_per_wall_s": s["sim_end_s"] / wall,
            }
        )
    return rows


def run_scaling(points: list[tuple[int, int, float]]) -> list[dict]:
    """One child process per point, so each peak RSS is that point's own."""
    rows = []
    for cpus, threads, dur in points:
        print(f"scaling: {cpus} CPUs, {threads} threads, {dur:g} s ...", file=sys.stderr)
        proc = subprocess.run(
            [sys.executable, "-c", SCALING_CHILD, str(cpus), str(threads), str(dur)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            rows.append(
                {"cpus": cpus, "threads": threads, "sim_s": dur, "error": proc.stderr[-500:]}
            )
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["kib_per_task"] = row["peak_rss_mib"] * 1024 / threads
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs", type=int, default=3, help="engine runs per scenario (median reported)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json")
    ap.add_argument("--no-simso", action="store_true", help="skip the SimSo comparison")
    ap.add_argument("--no-scaling", action="store_true", help="skip the scaling series")
    ap.add_argument("--no-policies", action="store_true", help="skip the policy series")
    ap.add_argument(
        "--no-series",
        action="store_true",
        help="skip the heterogeneous and virtual-machine series",
    )
    ap.add_argument(
        "--big", action="store_true", help="also run the 1024-CPU, 100 000-thread, 10 s point"
    )
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
    if not args.no_policies:
        results["policies"] = run_policy_series(args.runs)
    if not args.no_series:
        sys.path.insert(0, str(ROOT / "bench"))
        from series import run_series

        results["series"] = run_series()
    if not args.no_scaling:
        results["scaling"] = run_scaling(SCALING + ([BIG] if args.big else []))
    if not args.no_simso:
        sys.path.insert(0, str(ROOT / "bench"))
        from compare_simso import ROWS, compare

        results["simso"] = compare(ROWS)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    mev = eng["events_per_sec"] / 1e6
    print(
        f"standard: {eng['events']} events, {mev:.2f} M events/s (engine, median of {args.runs}), "
        f"peak RSS {eng['peak_rss_mib']:.1f} MiB; through Python "
        f"{py['events_per_sec'] / 1e6:.2f} M events/s, "
        f"{py['sim_s_per_wall_s']:.1f} simulated s per wall s"
    )
    for row in results.get("policies", []):
        print(
            f"policy {row['policy']:32s} {row['events']:9d} events, "
            f"{row['events_per_sec'] / 1e6:5.2f} M ev/s, "
            f"{row['sim_s_per_wall_s']:8.1f} sim s/wall s"
        )
    for row in results.get("series", []):
        if "error" in row:
            print(f"series {row['policy']} {row['cpus']} CPUs: failed: {row['error']}")
            continue
        print(
            f"series {row['policy']:22s} {row['cpus']:4d} CPUs {row['tasks']:6d} tasks: "
            f"{row['events']:8d} events, {row['events_per_sec'] / 1e6:5.2f} M ev/s, "
            f"{row['sim_s_per_wall_s']:7.2f} sim s/wall s, {row['peak_rss_mib']:6.0f} MiB, "
            f"{row['kib_per_task']:5.1f} KiB/task"
        )
    for row in results.get("scaling", []):
        if "error" in row:
            print(f"scaling {row['cpus']}x{row['threads']}: failed: {row['error']}")
            continue
        print(
            f"scaling {row['cpus']:5d} CPUs {row['threads']:7d} threads {row['sim_s']:4g} s: "
            f"engine {row['engine_wall_s']:7.2f} s, {row['events_per_sec'] / 1e6:5.2f} M ev/s, "
            f"{row['sim_s_per_wall_s']:7.2f} sim s/wall s, {row['peak_rss_mib']:6.0f} MiB"
        )
    for row in results.get("simso", []):
        print(
            f"simso N={row['n']} M={row['m']} T={row['t_s']:g}s: hetsched {row['speedup']:.0f}x "
            f"faster (Python policy {row['python_policy_speedup']:.0f}x), agree {row['agree']:.0%}"
        )
    out = args.out.resolve()
    print(f"written {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
