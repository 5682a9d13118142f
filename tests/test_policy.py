"""Python policy base classes and the example schedulers, driven by a hand-made context."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from hetsched import Agent, Scheduler
from hetsched.examples_policies import BigFirst, RoundRobin


@dataclass
class Cx:
    """Just enough of ``hetsched._core.Context`` for the example policies."""

    capacity: list[int]
    current: dict[int, int] = field(default_factory=dict)  # cpu -> running task
    affinity: dict[int, list[int]] = field(default_factory=dict)
    now_ns: int = 0
    rescheds: list[int] = field(default_factory=list)
    ticks_wanted: dict[int, bool] = field(default_factory=dict)

    @property
    def ncpus(self) -> int:
        return len(self.capacity)

    def cpu_capacity(self, cpu: int) -> int:
        return self.capacity[cpu]

    def cpu_current(self, cpu: int) -> int | None:
        return self.current.get(cpu)

    def cpu_online(self, cpu: int) -> bool:
        return True

    def task_affinity(self, task: int) -> list[int]:
        return self.affinity.get(task, list(range(self.ncpus)))

    def resched(self, cpu: int) -> None:
        self.rescheds.append(cpu)

    def want_tick(self, cpu: int, on: bool) -> None:
        self.ticks_wanted[cpu] = on


@pytest.mark.parametrize(
    ("method", "args"),
    [("enqueue", (0, 0, "new")), ("dequeue", (0, 0)), ("pick_next", (0,))],
)
def test_scheduler_core_methods_must_be_written(method, args) -> None:
    with pytest.raises(NotImplementedError, match=f"must implement {method}"):
        getattr(Scheduler(), method)(Cx([1024]), *args)


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("init", ()),
        ("balance", (0,)),
        ("running", (0, 0)),
        ("stopping", (0, 0, True)),
        ("tick", (0, 0)),
        ("on_timer", (7,)),
        ("reweight", (0,)),
    ],
)
def test_scheduler_optional_methods_do_nothing(method, args) -> None:
    cx = Cx([1024])
    assert getattr(Scheduler(), method)(cx, *args) is None
    assert cx.rescheds == []


def test_default_select_cpu_keeps_the_task_in_place() -> None:
    cx = Cx([1024] * 4, affinity={5: [2, 3]})
    assert Scheduler().select_cpu(cx, 5, 1, "wakeup") == 1
    assert Scheduler().select_cpu(cx, 5, None, "new") == 2


def test_agent_must_sample() -> None:
    assert Agent.period_ms == 100.0 and Agent.name == "python-agent"
    with pytest.raises(NotImplementedError, match="sample"):
        Agent().sample(Cx([1024]))


# The examples. CPUs 0 and 2 are little (301), 1 and 3 are big (1024).
CAPS = [301, 1024, 301, 1024]


@pytest.mark.parametrize(("policy", "chosen"), [(RoundRobin, 0), (BigFirst, 1)])
def test_select_cpu_prefers_an_idle_cpu(policy, chosen) -> None:
    cx = Cx(CAPS, current={3: 9})
    assert policy().select_cpu(cx, 0, 3, "wakeup") == chosen


def test_big_first_respects_affinity() -> None:
    cx = Cx(CAPS, affinity={0: [0, 2]})
    assert BigFirst().select_cpu(cx, 0, None, "new") == 0


def test_select_cpu_without_idle_cpus_stays() -> None:
    cx = Cx(CAPS, current={0: 10, 1: 11, 2: 12, 3: 13})
    assert BigFirst().select_cpu(cx, 0, 2, "wakeup") == 2


def test_queue_is_fifo_and_respects_affinity() -> None:
    cx = Cx(CAPS, current={0: 10, 1: 11, 2: 12, 3: 13}, affinity={1: [3]})
    rr = RoundRobin()
    for task in (1, 2, 3):
        rr.enqueue(cx, task, 0, "wakeup")
    assert cx.rescheds == []  # nothing is idle: nobody to wake
    assert rr.pick_next(cx, 0) == 2  # task 1 may only run on CPU 3
    assert rr.pick_next(cx, 3) == 1
    rr.dequeue(cx, 3, 0)
    assert rr.pick_next(cx, 0) is None
    rr.dequeue(cx, 3, 0)  # dequeuing twice is harmless


def test_enqueue_wakes_an_idle_cpu() -> None:
    cx = Cx(CAPS, current={0: 10, 2: 12})
    BigFirst().enqueue(cx, 4, 0, "new")
    assert cx.rescheds == [1]  # the fastest idle CPU


def test_tick_preempts_after_the_slice_only_if_someone_waits() -> None:
    cx = Cx(CAPS, current={0: 10, 1: 11, 2: 12, 3: 13})
    rr = RoundRobin(slice_ms=4)
    rr.running(cx, 10, 0)
    assert cx.ticks_wanted == {0: True}
    cx.now_ns = 4_000_000
    rr.tick(cx, 0, 10)
    assert cx.rescheds == []  # slice used up, but nobody waits
    rr.enqueue(cx, 5, 0, "preempted")
    cx.now_ns = 3_999_999
    rr.tick(cx, 0, 10)
    assert cx.rescheds == []  # someone waits, slice not used up
    cx.now_ns = 4_000_000
    rr.tick(cx, 0, 10)
    assert cx.rescheds == [0]
