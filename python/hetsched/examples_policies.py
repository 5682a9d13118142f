"""Two small schedulers written in Python, to copy from.

Run one from a scenario file with
``scheduler = "python:hetsched.examples_policies:BigFirst"``, or from Python::

    hetsched.run("scenarios/demo.toml", scheduler=RoundRobin(slice_ms=4))
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .policy import Scheduler

if TYPE_CHECKING:
    from ._core import Context

__all__ = ["BigFirst", "RoundRobin"]


class RoundRobin(Scheduler):
    """One global FIFO queue; a task runs for at most ``slice_ms`` while others wait."""

    name = "round-robin"

    def __init__(self, slice_ms: float = 10.0) -> None:
        self.slice_ns = int(slice_ms * 1e6)
        self.queue: deque[int] = deque()
        self.slice_start: dict[int, int] = {}  # cpu -> when its current task started

    def pick_idle(self, cx: Context, idle: Sequence[int]) -> int:
        """Which of several idle CPUs a task should go to."""
        return idle[0]

    def idle_cpus(self, cx: Context, task: int) -> list[int]:
        return [c for c in cx.task_affinity(task) if cx.cpu_online(c) and cx.cpu_current(c) is None]

    def select_cpu(self, cx: Context, task: int, prev_cpu: int | None, flags: str) -> int:
        idle = self.idle_cpus(cx, task)
        if idle:
            return self.pick_idle(cx, idle)
        return super().select_cpu(cx, task, prev_cpu, flags)

    def enqueue(self, cx: Context, task: int, cpu: int, flags: str) -> None:
        self.queue.append(task)
        idle = self.idle_cpus(cx, task)
        if idle:  # wake an idle CPU so it comes to pick the task up
            cx.resched(cpu if cpu in idle else self.pick_idle(cx, idle))

    def dequeue(self, cx: Context, task: int, cpu: int) -> None:
        if task in self.queue:
            self.queue.remove(task)

    def pick_next(self, cx: Context, cpu: int) -> int | None:
        for task in self.queue:
            if cpu in cx.task_affinity(task):
                self.queue.remove(task)
                return task
        return None

    def running(self, cx: Context, task: int, cpu: int) -> None:
        self.slice_start[cpu] = cx.now_ns
        cx.want_tick(cpu, True)

    def tick(self, cx: Context, cpu: int, task: int) -> None:
        used = cx.now_ns - self.slice_start.get(cpu, cx.now_ns)
        if used >= self.slice_ns and any(cpu in cx.task_affinity(t) for t in self.queue):
            cx.resched(cpu)


class BigFirst(RoundRobin):
    """Round robin that sends a waking task to the fastest idle CPU it may use."""

    name = "big-first"

    def pick_idle(self, cx: Context, idle: Sequence[int]) -> int:
        return max(idle, key=lambda c: (cx.cpu_capacity(c), -c))
