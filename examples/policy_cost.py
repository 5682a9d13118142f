"""How much a policy written in Python costs compared with one in Rust.

Runs one workload under Rust schedulers and Python schedulers, several times
each, and reports the best wall time, the number of engine events and the
wall time per event. Also measures an agent's cost per sample (Python agent
that only reads ``cx.processes()``). The numbers in
docs/python-policies.md come from this script::

    python examples/policy_cost.py                   # under a minute
    python examples/policy_cost.py --repeat 1 --duration 2   # quicker

"engine s" is the engine's own wall time (``wall_s`` of the summary: the
event loop and the policy's callbacks); "total s" adds turning the results
into DataFrames. Scheduler decisions differ between policies, so the event
counts differ too: compare the time per event, which is what a Python
callback adds.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import hetsched
from hetsched import Agent
from hetsched.examples_policies import BigFirst, RoundRobin


def workload(duration_s: float) -> dict:
    return {
        "name": "policy-cost",
        "seed": 7,
        "duration_s": duration_s,
        "stop_when_done": False,
        "governor": "performance",
        "machine": {"preset": "big-little-4+4"},
        "workload": {
            "programs": [
                {"name": "par", "kind": "parallel", "threads": 8, "work_ms": 4000,
                 "iterations": 20},
                {"name": "ui", "kind": "phases", "threads": 6, "loops": 100000,
                 "phases": [{"compute_ms": 2}, {"sleep_ms": 6}]},
                {"name": "batch", "kind": "dynamic", "threads": 4, "work_ms": 3000, "chunks": 300},
            ]
        },
    }  # fmt: skip


class Watcher(Agent):
    """Reads every process's numbers each sample and does nothing else."""

    name = "watcher"

    def __init__(self, period_ms: float) -> None:
        self.period_ms = period_ms
        self.samples = 0

    def sample(self, cx) -> None:
        cx.processes()
        self.samples += 1


def best_of(repeat: int, make_run) -> tuple[float, float, hetsched.Results]:
    """Best total wall time (with results conversion) and best engine wall time."""
    best, engine, res = float("inf"), float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        res = make_run()
        best = min(best, time.perf_counter() - started)
        engine = min(engine, float(res.summary["wall_s"]))
    return best, engine, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="simulated seconds")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fast_cores_first import FastCoresFirst

    scenario = hetsched.loads(json.dumps(workload(args.duration)), fmt="json")
    policies = {
        "cfs (Rust)": lambda: hetsched.run(scenario, scheduler="cfs"),
        "faster-first (Rust)": lambda: hetsched.run(scenario, scheduler="faster-first"),
        "round-robin (Python)": lambda: hetsched.run(scenario, scheduler=RoundRobin(slice_ms=4)),
        "big-first (Python)": lambda: hetsched.run(scenario, scheduler=BigFirst(slice_ms=4)),
        "fast-cores-first (Python)": lambda: hetsched.run(scenario, scheduler=FastCoresFirst()),
    }
    hetsched.run(scenario)  # warm up
    print(f"{platform.machine()}, Python {platform.python_version()}, "
          f"{args.duration:g} simulated s, best of {args.repeat}")  # fmt: skip
    print(
        f"{'policy':27} {'engine s':>9} {'events':>8} {'µs/event':>9} {'vs cfs':>7} {'total s':>8}"
    )
    cfs_per_event = None
    for name, make in policies.items():
        total, engine, res = best_of(args.repeat, make)
        events = int(res.summary["events"])
        per = 1e6 * engine / max(events, 1)
        if cfs_per_event is None:
            cfs_per_event = per
        print(f"{name:27} {engine:9.4f} {events:8d} {per:9.2f} {per / cfs_per_event:6.1f}x "
              f"{total:8.3f}")  # fmt: skip

    _, base, _ = best_of(args.repeat, lambda: hetsched.run(scenario, scheduler="cfs"))
    for period in (100.0, 10.0, 1.0):
        agent = Watcher(period)
        _, engine, _ = best_of(args.repeat, lambda a=agent: hetsched.run(scenario, agents=[a]))
        samples = agent.samples // args.repeat
        cost = 1e6 * (engine - base) / max(samples, 1)
        print(f"python agent every {period:g} ms: {samples} samples, "
              f"{cost:.1f} µs per sample over cfs alone")  # fmt: skip


if __name__ == "__main__":
    main()
