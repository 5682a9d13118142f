"""An agent written in Python: a user-level daemon that moves the busiest
processes to the big cores, compared with CFS alone.

Every ``period_ms`` ``BusyToBig`` reads what a Linux daemon could read (each
process's CPU utilisation over the last interval), pins the busiest ones, as
many as there are big cores, to the big cores, and the others to the little
cores, with ``sched_setaffinity`` (``cx.set_affinity``). The class is under
50 lines; the rest runs the demo workload under ``cfs`` with and without it::

    python examples/busy_to_big_agent.py --out out/busy-to-big

writes ``compare.png`` (program completion times) and the two timelines.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import hetsched
from hetsched import Agent, plot


class BusyToBig(Agent):
    """The busiest processes on the big cores, the rest on the little ones."""

    name = "busy-to-big"
    period_ms = 50.0

    def __init__(self, min_util: float = 0.05) -> None:
        self.min_util = min_util  # processes below this utilisation are left alone
        self.placed: dict[int, tuple[int, ...]] = {}

    def sample(self, cx) -> None:
        top = max(cx.cpu_capacity(c) for c in range(cx.ncpus))
        big = [c for c in range(cx.ncpus) if cx.cpu_capacity(c) == top]
        little = [c for c in range(cx.ncpus) if c not in big] or big
        alive = [p for p in cx.processes() if p["state"] != "exited"]
        ranked = sorted(alive, key=lambda p: -p["cpu_util"])
        for rank, p in enumerate(ranked):
            if p["cpu_util"] < self.min_util:
                continue
            want = tuple(big if rank < len(big) else little)
            if self.placed.get(p["task"]) != want:
                cx.set_affinity(p["task"], list(want))
                self.placed[p["task"]] = want


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=Path(__file__).parents[1] / "scenarios" / "demo.toml")
    ap.add_argument("--out", type=Path, default=Path("out/busy-to-big"))
    args = ap.parse_args()
    runs = {
        "cfs": hetsched.run(args.scenario, trace=True),
        "cfs + busy-to-big": hetsched.run(args.scenario, agents=[BusyToBig()], trace=True),
    }
    for name, res in runs.items():
        print(f"== {name}\n{res.summary_table()}\n")
        plot.save(plot.timeline(res), args.out / f"timeline-{name.replace(' ', '')}.png")
    programs = list(runs["cfs"].programs["program"])
    panels = {
        f"{name} completion (s)": list(res.programs["completion_s"]) for name, res in runs.items()
    }
    path = plot.bars(
        programs, panels, args.out / "compare.png", title="cfs with and without the agent"
    )
    print(f"figures in {path.parent}/")


if __name__ == "__main__":
    main()
