"""Policies written in Python: they run, they see the engine through the
context, and their mistakes become clear PolicyErrors."""

from __future__ import annotations

import pytest

import hetsched
from hetsched import Agent, PolicyError, Scheduler
from hetsched.examples_policies import BigFirst, RoundRobin

MIXED = {
    "name": "mixed",
    "duration_s": 5.0,
    "seed": 3,
    "machine": {"preset": "big-little-4+4"},
    "workload": {
        "programs": [
            {"name": "par", "kind": "parallel", "threads": 6, "work_ms": 600, "iterations": 3},
            {
                "name": "io",
                "kind": "phases",
                "threads": 4,
                "loops": 10,
                "phases": [{"compute_ms": 3}, {"sleep_ms": 5}],
            },
            {"name": "seq", "kind": "sequential", "work_ms": 200},
        ]
    },
}


@pytest.mark.parametrize(
    "policy", [RoundRobin(slice_ms=4), BigFirst(slice_ms=4)], ids=["round-robin", "big-first"]
)
def test_example_policies_complete_every_program(policy: Scheduler) -> None:
    res = hetsched.run(MIXED, scheduler=policy, check=True)
    assert res.summary["programs_completed"] == 3
    assert res.summary["scheduler"] == f"python:{policy.name}"
    # All the work was done: 600 + 4 × 10 × 3 + 200 ms of reference work.
    assert res.tasks["work_ms"].sum() == pytest.approx(920.0)


def test_big_first_prefers_big_cores_over_round_robin() -> None:
    # A single sequential program: BigFirst puts it on a big core (capacity
    # 1024) and it finishes in its work time; RoundRobin takes the first idle
    # CPU, also a big one (CPUs 0-3 are big) — so compare on a machine whose
    # little cores come first.
    scn = {
        "duration_s": 5.0,
        "machine": {
            "types": {"big": {"capacity": 1024}, "little": {"capacity": 256}},
            "clusters": [{"type": "little", "cores": 2}, {"type": "big", "cores": 2}],
        },
        "workload": {"programs": [{"kind": "sequential", "work_ms": 100}]},
    }
    rr = hetsched.run(scn, scheduler=RoundRobin())
    bf = hetsched.run(scn, scheduler=BigFirst())
    # little: 100 ms × 1024/256 = 400 ms; big: 100 ms.
    assert rr.programs["completion_s"][0] == pytest.approx(0.4)
    assert bf.programs["completion_s"][0] == pytest.approx(0.1)


class Raises(RoundRobin):
    name = "raises"

    def pick_next(self, cx, cpu):  # type: ignore[no-untyped-def]
        if cx.now_ns > 50_000_000:
            raise ValueError("boom")
        return super().pick_next(cx, cpu)


def test_exception_in_callback_is_a_policy_error_naming_callback_and_time() -> None:
    with pytest.raises(PolicyError) as e:
        hetsched.run(MIXED, scheduler=Raises())
    msg = str(e.value)
    assert "pick_next()" in msg and "ValueError: boom" in msg and "t=" in msg
    assert 'scheduler "python:raises"' in msg


class BadCpu(RoundRobin):
    name = "bad-cpu"

    def select_cpu(self, cx, task, prev_cpu, flags):  # type: ignore[no-untyped-def]
        return 99


def test_invalid_request_is_reported_with_the_request() -> None:
    with pytest.raises(
        PolicyError, match="select_cpu returned cpu 99 for task 0, which does not exist"
    ):
        hetsched.run(MIXED, scheduler=BadCpu())


class KeepsContext(RoundRobin):
    name = "keeps-context"
    kept = None

    def init(self, cx):  # type: ignore[no-untyped-def]
        KeepsContext.kept = cx


def test_context_is_invalid_after_its_callback() -> None:
    hetsched.run(MIXED, scheduler=KeepsContext())
    assert KeepsContext.kept is not None
    with pytest.raises(PolicyError, match="outside the callback"):
        KeepsContext.kept.now_ns  # noqa: B018


class Renicer(Agent):
    """Renices the busiest task each sample; records what it observed."""

    name = "renicer"
    period_ms = 20.0

    def __init__(self) -> None:
        self.samples: list[list[dict]] = []

    def sample(self, cx):  # type: ignore[no-untyped-def]
        procs = cx.processes()
        self.samples.append(procs)
        busy = [p for p in procs if p["cpu_util"] > 0.5 and p["nice"] == 0]
        if busy:
            cx.set_nice(busy[0]["task"], 10)


def test_agent_observes_and_acts() -> None:
    agent = Renicer()
    res = hetsched.run(MIXED, agents=[agent])
    assert res.summary["agents"] == ["python:renicer"]
    assert len(agent.samples) >= 5
    first = agent.samples[0]
    keys = {"task", "program", "cpu_util", "ipc", "miss_ratio", "csw_per_s", "wait_frac"}
    assert keys <= set(first[0])
    assert all(0.0 <= p["cpu_util"] <= 1.0 + 1e-9 for s in agent.samples for p in s)
    assert (res.tasks["nice"] == 10).any(), "the agent's set_nice took effect"


def test_python_policy_runs_are_deterministic() -> None:
    a = hetsched.run(MIXED, scheduler=RoundRobin(slice_ms=4))
    b = hetsched.run(MIXED, scheduler=RoundRobin(slice_ms=4))
    assert a.summary["trace_hash"] == b.summary["trace_hash"]


class Meddler(Agent):
    """An agent that tries a scheduler-only request."""

    name = "meddler"
    period_ms = 10.0

    def sample(self, cx):  # type: ignore[no-untyped-def]
        cx.resched(0)


def test_agents_may_not_use_scheduler_requests() -> None:
    with pytest.raises(
        PolicyError, match="agents act only through set_affinity, set_nice and set_frequency"
    ):
        hetsched.run(MIXED, agents=[Meddler()])


FAULTING = {
    "duration_s": 2.0,
    "machine": {
        "types": {"plain": {}, "vector": {"features": ["avx"]}},
        "clusters": [{"type": "plain", "cores": 2}, {"type": "vector", "cores": 1}],
    },
    "workload": {"programs": [{"kind": "sequential", "work_ms": 50, "feature": "avx"}]},
}


class MovesOnFault(RoundRobin):
    """Fault-and-migrate in a few lines: restrict the task to capable CPUs."""

    name = "moves-on-fault"

    def on_fault(self, cx, task, cpu, feature):  # type: ignore[no-untyped-def]
        assert feature == "avx"
        capable = [c for c in range(cx.ncpus) if cx.cpu_type(c) == "vector"]
        cx.set_affinity(task, capable)
        return True


def test_python_scheduler_can_handle_isa_faults() -> None:
    killed = hetsched.run(FAULTING, scheduler=RoundRobin())
    assert killed.summary["tasks_killed"] == 1  # the Linux outcome: SIGILL
    moved = hetsched.run(FAULTING, scheduler=MovesOnFault(), check=True)
    assert moved.summary["tasks_killed"] == 0
    assert moved.summary["programs_completed"] == 1
    # 50 ms of work on the vector core, plus the 2 µs fault trap and the
    # cache refill after moving (256 KiB across LLCs: 4096 lines × 27.5 ns).
    assert moved.tasks["run_s_by_type"][0] == {
        "vector": pytest.approx(0.05 + 2e-6 + 112.5e-6, abs=1e-6)
    }
    assert moved.tasks["faults"][0] == 1
