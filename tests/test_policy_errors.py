"""Python policies cannot lie: bools are not CPU ids, Ctrl-C is not a policy
error, and a policy that never runs anything is named with its victims."""

from __future__ import annotations

import pytest

import hetsched

SCN = """
duration_s = 0.05
machine.preset = "big-little-4+4"
[[workload.programs]]
name = "work"
kind = "parallel"
threads = 2
work_ms = 10
"""


class BoolCpu(hetsched.Scheduler):
    def select_cpu(self, cx, task, prev_cpu, flags):  # type: ignore[no-untyped-def]
        return True


class Interrupts(hetsched.Scheduler):
    def select_cpu(self, cx, task, prev_cpu, flags):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt


class Exits(hetsched.Scheduler):
    def select_cpu(self, cx, task, prev_cpu, flags):  # type: ignore[no-untyped-def]
        raise SystemExit(3)


class Starves(hetsched.Scheduler):
    def enqueue(self, cx, task, cpu, flags):  # type: ignore[no-untyped-def]
        pass

    def pick_next(self, cx, cpu):  # type: ignore[no-untyped-def]
        return None


def test_bool_cpu_is_refused() -> None:
    with pytest.raises(hetsched.PolicyError, match=r"select_cpu\(\) returned True \(a bool\)"):
        hetsched.run(hetsched.loads(SCN), scheduler=BoolCpu())


def test_keyboard_interrupt_propagates_as_itself() -> None:
    with pytest.raises(KeyboardInterrupt):
        hetsched.run(hetsched.loads(SCN), scheduler=Interrupts())


def test_system_exit_propagates_as_itself() -> None:
    with pytest.raises(SystemExit) as info:
        hetsched.run(hetsched.loads(SCN), scheduler=Exits())
    assert info.value.code == 3


def test_starving_policy_names_the_tasks() -> None:
    res = hetsched.run(hetsched.loads(SCN), scheduler=Starves())
    text = " ".join(res.warnings)
    assert "never ran" in text and "work[0]" in text and "work[1]" in text
