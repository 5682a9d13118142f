"""Global EDF written in Python, for the benchmark of a Python policy.

The same rules as the built-in ``global-edf`` (one queue ordered by absolute
deadline; a released job takes an idle CPU, else preempts the CPU running the
latest deadline if its own is earlier), so the two must produce the same
schedule; ``compare_simso.py`` checks that they do and times both.
"""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING

from hetsched import Scheduler

if TYPE_CHECKING:
    from hetsched._core import Context

NO_DEADLINE = 1 << 63


class PyGlobalEdf(Scheduler):
    """Global EDF over all CPUs; ties go to the job enqueued first."""

    name = "py-global-edf"

    def init(self, cx: Context) -> None:
        self.heap: list[tuple[int, int, int]] = []
        self.queued: dict[int, tuple[int, int, int]] = {}
        self.fifo = itertools.count()
        self.reserved = [False] * cx.ncpus

    def deadline(self, cx: Context, task: int) -> int:
        d = cx.task_deadline_ns(task)
        return NO_DEADLINE if d is None else d

    def running_deadline(self, cx: Context, cpu: int) -> int | None:
        cur = cx.cpu_current(cpu)
        return None if cur is None else self.deadline(cx, cur)

    def select_cpu(self, cx: Context, task: int, prev_cpu: int | None, flags: str) -> int:
        aff = cx.task_affinity(task)
        free = [c for c in aff if cx.cpu_current(c) is None and not self.reserved[c]]
        if free:
            return prev_cpu if prev_cpu in free else free[0]
        worst: tuple[int, int] | None = None
        for c in aff:
            d = self.running_deadline(cx, c)
            if d is not None and not self.reserved[c] and (worst is None or (d, c) > worst):
                worst = (d, c)
        if worst is not None:
            return worst[1]
        return prev_cpu if prev_cpu is not None else aff[0]

    def enqueue(self, cx: Context, task: int, cpu: int, flags: str) -> None:
        d = self.deadline(cx, task)
        entry = (d, next(self.fifo), task)
        self.queued[task] = entry
        heapq.heappush(self.heap, entry)
        if flags == "preempted":
            return
        rd = self.running_deadline(cx, cpu)
        if rd is None:
            self.reserved[cpu] = True
        elif d < rd and not self.reserved[cpu]:
            self.reserved[cpu] = True
            cx.resched(cpu)

    def dequeue(self, cx: Context, task: int, cpu: int) -> None:
        self.queued.pop(task, None)  # its heap entry is skipped when popped

    def pick_next(self, cx: Context, cpu: int) -> int | None:
        self.reserved[cpu] = False
        while self.heap:
            entry = heapq.heappop(self.heap)
            if self.queued.get(entry[2]) == entry:
                del self.queued[entry[2]]
                return entry[2]
        return None
