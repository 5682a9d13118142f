"""A scheduler written in Python, compared with Linux CFS.

``FastCoresFirst`` keeps one global round-robin queue, places a waking task
on the fastest idle CPU it may use, and moves a running task up to a faster
CPU as soon as one falls idle. The class is under 50 lines; the rest of this
file runs it and ``cfs`` on the demo workload (4 big + 4 little cores) and
draws both::

    python examples/fast_cores_first.py --out out/fast-cores-first

writes ``compare.png`` (program completion times), ``timeline-cfs.png`` and
``timeline-fast-cores-first.png``, and prints the two runs' numbers.
"""

from __future__ import annotations

import argparse
from collections import deque
from pathlib import Path

import hetsched
from hetsched import Scheduler, plot


class FastCoresFirst(Scheduler):
    """Round robin on one queue; the fastest idle CPU first; move up when one is free."""

    name = "fast-cores-first"

    def __init__(self, slice_ms: float = 4.0) -> None:
        self.slice_ns = int(slice_ms * 1e6)
        self.queue: deque[int] = deque()
        self.target: dict[int, int] = {}  # task -> CPU it was migrated to
        self.started: dict[int, int] = {}  # cpu -> when its task started

    def idle(self, cx, task):
        return [c for c in cx.task_affinity(task) if cx.cpu_online(c) and cx.cpu_current(c) is None]

    def select_cpu(self, cx, task, prev_cpu, flags):
        candidates = self.idle(cx, task) or cx.task_affinity(task)
        return max(candidates, key=lambda c: (cx.cpu_capacity(c), -c))

    def enqueue(self, cx, task, cpu, flags):
        self.queue.append(task)
        if flags == "migrated":
            self.target[task] = cpu
        if cx.cpu_current(cpu) is None:
            cx.resched(cpu)

    def dequeue(self, cx, task, cpu):
        if task in self.queue:
            self.queue.remove(task)

    def pick_next(self, cx, cpu):
        for task in self.queue:
            if cpu in cx.task_affinity(task) and self.target.get(task, cpu) == cpu:
                self.queue.remove(task)
                self.target.pop(task, None)
                return task
        return None

    def running(self, cx, task, cpu):
        self.started[cpu] = cx.now_ns
        cx.want_tick(cpu, True)

    def tick(self, cx, cpu, task):
        faster = [c for c in self.idle(cx, task) if cx.cpu_capacity(c) > cx.cpu_capacity(cpu)]
        if faster:  # a faster CPU is idle: move up now
            cx.migrate(task, max(faster, key=cx.cpu_capacity))
        elif cx.now_ns - self.started[cpu] >= self.slice_ns and self.queue:
            cx.resched(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=Path(__file__).parents[1] / "scenarios" / "demo.toml")
    ap.add_argument("--out", type=Path, default=Path("out/fast-cores-first"))
    args = ap.parse_args()
    runs = {
        "cfs": hetsched.run(args.scenario, scheduler="cfs", trace=True),
        FastCoresFirst.name: hetsched.run(args.scenario, scheduler=FastCoresFirst(), trace=True),
    }
    for name, res in runs.items():
        print(f"== {name}\n{res.summary_table()}\n")
        plot.save(plot.timeline(res), args.out / f"timeline-{name}.png")
    programs = list(runs["cfs"].programs["program"])
    panels = {
        f"{name} completion (s)": list(res.programs["completion_s"]) for name, res in runs.items()
    }
    path = plot.bars(programs, panels, args.out / "compare.png", title="cfs vs fast-cores-first")
    print(f"figures in {path.parent}/")


if __name__ == "__main__":
    main()
