"""Agent policies that run both in the simulator (``hetsched.run(agents=[...])``)
and on real Linux (``hetsched linux agent --agent NAME``).

They use only what :class:`hetsched.policy.Agent` promises: ``cx.processes()``,
``cx.cpusets()``, ``cx.cpu_rating``, ``cx.ncpus`` and ``cx.set_affinity``. The
places they assign are the cpusets (on real Linux with ``--profile``: one
per emulated CPU); without cpusets every CPU is a place of its own.

* :class:`FasterFirstAgent` (``faster-first``): the agent version of the
  faster-first rule: the fastest places are kept busy first; the most
  CPU-hungry processes (utilisation over the last interval, ties to the
  lower task id) get the fastest places, one process per CPU of a place,
  the rest share the slowest place.
* :class:`EqualShareAgent` (``equal-share``): AASH-style equal sharing of the
  fast places: every interval the processes that have had the least time on
  fast places so far get them, so over time every process gets about the
  same fast-core time (the asymmetry-aware fairness of the papers).
"""

from __future__ import annotations

from typing import Any

from ..policy import Agent

__all__ = ["AGENTS", "EqualShareAgent", "FasterFirstAgent", "PatelAgent", "places"]


def places(cx: Any) -> list[tuple[list[int], float]]:
    """``(cpus, speed)`` of every place, fastest first (ties: lower CPU id). The
    speed is ``cx.cpu_rating``: frequency, core type and duty cycle together."""
    sets = cx.cpusets()
    if sets:
        out = [
            (sorted(s["cpus"]), sum(cx.cpu_rating(c) for c in s["cpus"]) / len(s["cpus"]))
            for s in sets
        ]
    else:
        out = [([c], float(cx.cpu_rating(c))) for c in range(cx.ncpus)]
    return sorted(out, key=lambda p: (-p[1], p[0]))


def _slots(ps: list[tuple[list[int], float]]) -> list[list[int]]:
    """One slot per CPU, fastest place first."""
    return [cpus for cpus, _ in ps for _ in cpus]


def _active(cx: Any) -> list[dict[str, Any]]:
    return [p for p in cx.processes() if p["state"] in ("running", "runnable")]


class FasterFirstAgent(Agent):
    """Faster places first, to the most CPU-hungry processes (module doc)."""

    name = "faster-first"

    def __init__(self, period_ms: float = 100.0) -> None:
        self.period_ms = float(period_ms)

    def sample(self, cx: Any) -> None:
        ps = places(cx)
        slots = _slots(ps)
        procs = sorted(_active(cx), key=lambda p: (-p["cpu_util"], p["task"]))
        slowest = ps[-1][0]
        for i, p in enumerate(procs):
            want = slots[i] if i < len(slots) else slowest
            if sorted(p["affinity"]) != want:
                cx.set_affinity(p["task"], want)


class EqualShareAgent(Agent):
    """Equal shares of the fast places, by least fast time so far (module doc)."""

    name = "equal-share"

    def __init__(self, period_ms: float = 100.0) -> None:
        self.period_ms = float(period_ms)
        self.fast_s: dict[int, float] = {}
        self.placed: dict[int, float] = {}  # task -> mhz of its place last interval

    def sample(self, cx: Any) -> None:
        ps = places(cx)
        top = ps[0][1]
        slots = _slots(ps)
        procs = _active(cx)
        # Credit the interval just ended to processes that were on a fast place.
        for p in procs:
            if self.placed.get(p["task"], 0.0) >= top:
                self.fast_s[p["task"]] = (
                    self.fast_s.get(p["task"], 0.0) + p["cpu_util"] * self.period_ms / 1000.0
                )
        order = sorted(procs, key=lambda p: (self.fast_s.get(p["task"], 0.0), p["task"]))
        slowest = ps[-1][0]
        mhz_of = {tuple(c): m for c, m in ps}
        self.placed = {}
        for i, p in enumerate(order):
            want = slots[i] if i < len(slots) else slowest
            self.placed[p["task"]] = mhz_of[tuple(want)]
            if sorted(p["affinity"]) != want:
                cx.set_affinity(p["task"], want)


class PatelAgent(Agent):
    """One of Patel's four agents (``patel-cpu``, ``patel-priority``,
    ``patel-cachemiss``, ``patel-ctxswitch``, with parameters as in a scenario)
    driven through the Python ``Agent`` interface: the decisions are the Rust
    core's own (``hetsched._core.PatelPlanner``, the ``plan`` function of the
    built-in agents); this class only gathers what they observe and carries
    out the moves. It needs cpusets: the scenario's in the simulator, the
    emulated CPUs (``--profile``) on real Linux."""

    def __init__(self, spec: str) -> None:
        from .._core import PatelPlanner

        self.planner = PatelPlanner(spec)
        self.name = self.planner.name
        self.period_ms = self.planner.period_ms

    def init(self, cx: Any) -> None:
        if not cx.cpusets():
            raise ValueError(
                f"{self.name} needs cpusets: add [[cpusets]] to the scenario, or give "
                "--profile on real Linux"
            )

    def sample(self, cx: Any) -> None:
        sets = cx.cpusets()
        if not sets:
            return
        views = [
            {
                "cpus": sorted(s["cpus"]),
                "mhz": sum(float(cx.cpu_mhz(c)) for c in s["cpus"]) / len(s["cpus"]),
                "load": float(cx.cpuset_load(i)),
            }
            for i, s in enumerate(sets)
        ]
        for a in self.planner.plan(cx.processes(), views, cx.ncpus, cx.load_avg()):
            if a["action"] == "move":
                cx.set_affinity(a["task"], views[a["set"]]["cpus"])
            else:
                cx.set_nice(a["task"], a["nice"])


AGENTS: dict[str, type[Agent]] = {"faster-first": FasterFirstAgent, "equal-share": EqualShareAgent}
