"""sched_ext's dispatch queues for Python policies, and the work-conservation
measure (``idle_while_runnable_s``) that exposes a scheduler leaving CPUs
idle beside waiting work."""

from __future__ import annotations

import importlib.util
import sys
from collections import deque
from pathlib import Path
from typing import Any

import pytest

import hetsched
from hetsched import DSQ_GLOBAL, DSQ_LOCAL, PolicyError, Scheduler, dsq_local_on

ROOT = Path(__file__).resolve().parents[1]

WORK_MS = 100.0  # per thread
EIGHT_THREADS: dict[str, Any] = {
    "name": "eight",
    "duration_s": 3.0,
    "machine": {"preset": "big-little-4+4", "migration": {"enabled": False}},
    "workload": {
        "programs": [{"kind": "parallel", "threads": 8, "work_ms": 8 * WORK_MS}],
    },
}


def example_scx_simple() -> Any:
    spec = importlib.util.spec_from_file_location(
        "example_scx_simple", ROOT / "examples" / "scx_simple.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


class NaiveFifo(Scheduler):
    """A global FIFO written the naive way on the queue-owning protocol: each
    waking task picks the first idle CPU, and nothing records that an earlier
    task of the same instant picked it already."""

    name = "naive-fifo"

    def __init__(self) -> None:
        self.queue: deque[int] = deque()

    def select_cpu(self, cx, task, prev_cpu, flags):
        idle = [c for c in cx.task_affinity(task) if cx.cpu_current(c) is None]
        return idle[0] if idle else cx.task_affinity(task)[0]

    def enqueue(self, cx, task, cpu, flags):
        self.queue.append(task)

    def dequeue(self, cx, task, cpu):
        self.queue.remove(task)

    def pick_next(self, cx, cpu):
        return self.queue.popleft() if self.queue else None


class AllOnCpu0(Scheduler):
    """Every task into CPU 0's local DSQ."""

    name = "all-on-cpu0"
    uses_dsqs = True

    def enqueue(self, cx, task, cpu, flags):
        cx.dsq_insert(task, dsq_local_on(0))


def test_the_fifo_trap_shows_as_idle_while_runnable() -> None:
    # All 8 threads choose CPU 0 (idle when each looked); only CPU 0 is woken.
    # They run one after another on a big CPU (100 ms each): 800 ms, with 7
    # CPUs idle while at least one thread waits, until the last thread runs
    # alone from 700 ms: 7 × 0.7 = 4.9 cpu-s.
    res = hetsched.run(EIGHT_THREADS, scheduler=NaiveFifo(), check=True)
    assert res.summary["makespan_s"] == pytest.approx(0.8, rel=1e-6)
    assert res.summary["idle_while_runnable_s"] == pytest.approx(4.9, rel=1e-6)
    per_cpu = res.cpus.set_index("cpu")["idle_while_runnable_s"]
    assert per_cpu[0] == pytest.approx(0.0, abs=1e-12)
    assert per_cpu[1:].to_list() == pytest.approx([0.7] * 7, rel=1e-6)
    assert any("not work-conserving" in w for w in res.warnings)


def test_python_scx_simple_keeps_all_eight_cpus_busy() -> None:
    mod = example_scx_simple()
    res = hetsched.run(EIGHT_THREADS, scheduler=mod.ScxSimple(), check=True)
    assert res.summary["idle_while_runnable_s"] == pytest.approx(0.0, abs=1e-9)
    assert not any("not work-conserving" in w for w in res.warnings)
    # Ideal for 8 threads on 8 CPUs, one each: the slowest CPU's time for one
    # thread, work × 1024 / its capacity (the little cores' 430 at their
    # highest P-state, where the default governor keeps them).
    caps = [c["capacity"] for c in _capacities(res)]
    ideal = WORK_MS / 1000.0 * 1024 / min(caps)
    assert res.summary["makespan_s"] == pytest.approx(ideal, rel=0.05)
    assert (res.cpus["busy_s"] > 0).all()


def _capacities(res: Any) -> list[dict[str, Any]]:
    """Each CPU's type capacity, read from the big-little-4+4 preset."""
    tomllib = pytest.importorskip("tomllib")

    preset = next(p for p in hetsched._core.list_presets() if p["name"] == "big-little-4+4")
    types = tomllib.loads(preset["toml"])["types"]
    return [{"capacity": types[t]["capacity"]} for t in res.cpus["type"]]


def test_python_scx_simple_matches_the_builtin() -> None:
    mod = example_scx_simple()
    scn = ROOT / "scenarios" / "demo.toml"
    py = hetsched.run(scn, scheduler=mod.ScxSimple(), check=True)
    rust = hetsched.run(scn, scheduler="scx-simple", check=True)
    for k in ("makespan_s", "migrations", "context_switches", "idle_while_runnable_s"):
        assert py.summary[k] == pytest.approx(rust.summary[k], rel=1e-9, abs=1e-12), k
    pyv = hetsched.run(scn, scheduler=mod.ScxSimple(vtime=True), check=True)
    rustv = hetsched.run(scn, scheduler="scx-simple[vtime=true]", check=True)
    for k in ("makespan_s", "migrations", "context_switches"):
        assert pyv.summary[k] == pytest.approx(rustv.summary[k], rel=1e-9, abs=1e-12), k


def test_everything_on_one_local_dsq_idles_seven_cpus() -> None:
    res = hetsched.run(EIGHT_THREADS, scheduler=AllOnCpu0(), check=True)
    run = res.summary["sim_end_s"]
    # CPU 0 round-robins the 8 threads in 20 ms slices (800 ms of work);
    # the other 7 CPUs idle beside them until the last thread is alone.
    assert res.summary["makespan_s"] == pytest.approx(0.8, rel=1e-6)
    iwr = res.summary["idle_while_runnable_s"]
    assert 6.8 * run < iwr <= 7.0 * run
    assert (res.cpus.set_index("cpu")["busy_s"][1:] == 0).all()


# ------------------------------------------------------------- DSQ calls


def _run_policy(policy: Scheduler, scn: dict[str, Any] | None = None) -> hetsched.Results:
    return hetsched.run(scn or EIGHT_THREADS, scheduler=policy, check=True)


class Probe(Scheduler):
    """Records what the DSQ calls return, for checking."""

    name = "probe"
    uses_dsqs = True

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def init(self, cx):
        cx.create_dsq(7)
        cx.create_dsq(8)
        self.seen["claim_then_again"] = (
            cx.test_and_clear_cpu_idle(3),
            cx.test_and_clear_cpu_idle(3),
        )

    def select_cpu(self, cx, task, prev_cpu, flags):
        if task == 0:
            self.seen["dfl"] = cx.select_cpu_dfl(task, 2)
            self.seen["pick"] = cx.pick_idle_cpu(task)
            return self.seen["dfl"][0]
        return 0

    def enqueue(self, cx, task, cpu, flags):
        if flags == "new" and task in (1, 2, 3, 7):
            cx.dsq_insert(task, 7)  # FIFO
        elif flags == "new" and task in (4, 5, 6):
            cx.dsq_insert_vtime(task, 8, vtime=100 - task)  # 6, 5, 4
        else:
            cx.dsq_insert(task, DSQ_GLOBAL)
        self.seen.setdefault("nr", []).append((cx.dsq_nr_queued(7), cx.dsq_nr_queued(8)))

    def dispatch(self, cx, cpu, prev):
        order = self.seen.setdefault("order", [])
        if cx.dsq_move_to_local(8) or cx.dsq_move_to_local(7):
            order.append(cpu)

    def running(self, cx, task, cpu):
        self.seen.setdefault("ran", []).append(task)


def test_dsq_calls_do_what_the_kernel_does() -> None:
    # Eight 10 ms threads (shorter than a slice, so none is queued twice).
    scn = {
        **EIGHT_THREADS,
        "workload": {"programs": [{"kind": "parallel", "threads": 8, "work_ms": 80}]},
    }
    p = Probe()
    res = _run_policy(p, scn)
    assert res.summary["programs_completed"] == 1
    # The first claim of an idle CPU succeeds, the second finds it claimed.
    assert p.seen["claim_then_again"] == (True, False)
    # select_cpu_dfl claims prev (2) if idle; pick_idle_cpu then claims the
    # lowest idle CPU that is left (3 was claimed in init).
    assert p.seen["dfl"] == (2, True)
    assert p.seen["pick"] == 0
    # Queue lengths seen right after each insert (inserts act at once).
    assert p.seen["nr"][:8] == [(0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (3, 2), (3, 3), (4, 3)]
    # Only CPUs 2 (task 0's) and 0 (the others') were woken. Task 0, not
    # inserted in select_cpu, went through enqueue to the global DSQ, which
    # CPU 2 consumes before dispatching; then the dispatches drain DSQ 8 in
    # vtime order (6, 5, 4) before DSQ 7 in FIFO order (1, 2, 3, 7).
    ran = p.seen["ran"]
    assert ran[0] == 0
    assert [t for t in ran if t in (4, 5, 6)] == [6, 5, 4]
    assert [t for t in ran if t in (1, 2, 3, 7)] == [1, 2, 3, 7]
    assert set(ran[1:4]) == {4, 5, 6}
    assert p.seen["order"] and set(p.seen["order"]) == {0, 2}


class Bad(Scheduler):
    uses_dsqs = True

    def __init__(self, what: str) -> None:
        self.what = what
        self.name = f"bad-{what}"

    def init(self, cx):
        if self.what == "create-twice":
            cx.create_dsq(1)
            cx.create_dsq(1)
        if self.what == "create-builtin":
            cx.create_dsq(DSQ_GLOBAL)

    def enqueue(self, cx, task, cpu, flags):
        w = self.what
        if w == "unknown":
            cx.dsq_insert(task, 12345)
        elif w == "twice":
            cx.dsq_insert(task, DSQ_GLOBAL)
            cx.dsq_insert(task, DSQ_LOCAL)
        elif w == "vtime-global":
            cx.dsq_insert_vtime(task, DSQ_GLOBAL, 5)
        elif w == "no-such-cpu":
            cx.dsq_insert(task, dsq_local_on(99))
        elif w == "affinity":
            cx.dsq_insert(task, dsq_local_on(1))
        elif w == "move-outside-dispatch":
            cx.dsq_move_to_local(0)
        elif w == "nr-unknown":
            cx.dsq_nr_queued(42)
        elif w == "vtime-unknown-task":
            cx.set_task_vtime(99, 1)
        else:
            cx.dsq_insert(task, DSQ_GLOBAL)

    def running(self, cx, task, cpu):
        if self.what == "insert-running":
            cx.dsq_insert(task, DSQ_GLOBAL)


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("unknown", "dsq_insert(task 0, DSQ 0x3039): unknown DSQ"),
        ("twice", "dsq_insert(task 0, DSQ_LOCAL): task 0 is already queued on a DSQ"),
        ("vtime-global", "vtime ordering is not allowed on built-in DSQs"),
        ("no-such-cpu", "unknown DSQ: cpu 99 does not exist"),
        ("create-twice", "create_dsq(DSQ 0x1): DSQ 0x1 already exists"),
        ("create-builtin", "reserved for built-in DSQs"),
        ("move-outside-dispatch", "dsq_move_to_local(DSQ 0x0): allowed only in dispatch"),
        ("nr-unknown", "dsq_nr_queued(DSQ 0x2a): unknown DSQ"),
        ("insert-running", "task 0 is running"),
        ("vtime-unknown-task", "set_task_vtime(task 99, 1): task 99 does not exist (8 tasks)"),
    ],
)
def test_dsq_call_errors_name_the_policy_and_the_call(what: str, message: str) -> None:
    with pytest.raises(PolicyError) as e:
        _run_policy(Bad(what))
    text = str(e.value)
    assert message in text
    assert f"bad-{what}" in text


def test_local_dsq_outside_the_affinity_is_an_error() -> None:
    scn = {
        **EIGHT_THREADS,
        "workload": {"programs": [{"kind": "sequential", "work_ms": 10, "affinity": [0]}]},
    }
    with pytest.raises(
        PolicyError, match=r"dsq_local_on\(1\)\): cpu 1 is outside the task's affinity \[0\]"
    ):
        _run_policy(Bad("affinity"), scn)


def test_fifo_and_vtime_do_not_mix_in_one_dsq() -> None:
    class Mix(Scheduler):
        name = "mix"
        uses_dsqs = True

        def init(self, cx):
            cx.create_dsq(3)

        def enqueue(self, cx, task, cpu, flags):
            if task == 0:
                cx.dsq_insert(task, 3)
            else:
                cx.dsq_insert_vtime(task, 3, 1)

    with pytest.raises(PolicyError, match="holds FIFO-inserted tasks"):
        _run_policy(Mix())


class LateLocal(Scheduler):
    """Inserts waking tasks into CPU 1's local DSQ once CPU 1 is offline."""

    name = "late-local"
    uses_dsqs = True

    def enqueue(self, cx, task, cpu, flags):
        if cx.now_ns >= 60_000_000:
            cx.dsq_insert(task, dsq_local_on(1))
        else:
            cx.dsq_insert(task, DSQ_GLOBAL)


def test_local_dsq_of_an_offline_cpu_is_an_error() -> None:
    scn = {
        "name": "offline",
        "duration_s": 0.5,
        "machine": {"preset": "big-little-4+4"},
        "workload": {
            "programs": [
                {
                    "kind": "phases",
                    "threads": 2,
                    "loops": 40,
                    "phases": [{"compute_ms": 1}, {"sleep_ms": 9}],
                }
            ]
        },
        "dynamic": {
            "mechanism": "hotplug",
            "events": [{"at_ms": 10, "op": "offline", "cpus": [1]}],
        },
    }
    with pytest.raises(PolicyError, match=r"dsq_local_on\(1\)\): cpu 1 is offline"):
        _run_policy(LateLocal(), scn)


def test_hotplug_with_a_dsq_scheduler_moves_the_queued_tasks() -> None:
    scn = {
        "name": "hotplug",
        "duration_s": 2.0,
        "machine": {"preset": "big-little-4+4"},
        "workload": {"programs": [{"kind": "parallel", "threads": 12, "work_ms": 2400}]},
        "dynamic": {
            "mechanism": "hotplug",
            "events": [{"at_ms": 30, "op": "offline", "cpus": [0, 1]}],
        },
    }
    res = hetsched.run(scn, scheduler="scx-simple", check=True)
    assert res.summary["programs_completed"] == 1
    assert res.tasks["work_ms"].sum() == pytest.approx(2400.0)


def test_dsq_calls_need_uses_dsqs() -> None:
    class Old(NaiveFifo):
        name = "old"

        def enqueue(self, cx, task, cpu, flags):
            cx.dsq_insert(task, DSQ_GLOBAL)

    with pytest.raises(PolicyError, match=r"uses_dsqs\(\) is false"):
        _run_policy(Old())


def test_dsq_local_on_encodes_the_kernel_ids() -> None:
    # SCX_DSQ_FLAG_BUILTIN is bit 63, SCX_DSQ_FLAG_LOCAL_ON bit 62.
    assert DSQ_GLOBAL == (1 << 63) | 1
    assert DSQ_LOCAL == (1 << 63) | 2
    assert dsq_local_on(5) == (1 << 63) | (1 << 62) | 5


def test_every_builtin_policy_reports_work_conservation() -> None:
    res = hetsched.run(ROOT / "scenarios" / "demo.toml", scheduler="cfs")
    assert "idle_while_runnable_s" in res.summary
    assert res.summary["idle_while_runnable_s"] == pytest.approx(
        res.cpus["idle_while_runnable_s"].sum(), rel=1e-12, abs=1e-12
    )


def test_the_example_port_is_under_40_lines() -> None:
    lines = (ROOT / "examples" / "scx_simple.py").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("class ScxSimple"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("def "))
    assert len([line for line in lines[start:end] if line.strip()]) < 40


def test_scx_simple_scenario_keeps_cpus_busy() -> None:
    res = hetsched.run(ROOT / "scenarios" / "scx-simple.toml", check=True)
    assert res.summary["scheduler"] == "scx-simple"
    # The 8 batch threads claim the 8 CPUs at once; the interactive threads
    # wait only while every CPU is busy.
    assert res.summary["idle_while_runnable_s"] == pytest.approx(0.0, abs=1e-9)


def test_idle_while_runnable_counts_only_cpus_a_waiter_may_use() -> None:
    # Three equal CPUs. Threads A and B (allowed on CPUs 0 and 1) start
    # together; the naive FIFO puts both on CPU 0, so B waits while CPU 1 idles
    # (CPU 2 is not allowed to B and does not count). At 50 ms task C
    # (allowed everywhere) wakes, picks idle CPU 1, which takes B from the
    # queue; C then waits until A ends at 100 ms while CPU 2 idles.
    scn = {
        "name": "restricted",
        "duration_s": 1.0,
        "machine": {
            "types": {"c": {"capacity": 1024}},
            "cpus": [{"type": "c"}, {"type": "c"}, {"type": "c"}],
            "migration": {"enabled": False},
        },
        "workload": {
            "programs": [
                {
                    "name": "AB",
                    "kind": "parallel",
                    "threads": 2,
                    "work_ms": 200,
                    "affinity": [0, 1],
                },
                {"name": "C", "kind": "sequential", "work_ms": 100, "start_ms": 50},
            ]
        },
    }
    res = hetsched.run(scn, scheduler=NaiveFifo(), check=True)
    per_cpu = res.cpus.set_index("cpu")["idle_while_runnable_s"].to_list()
    assert per_cpu == pytest.approx([0.0, 0.05, 0.05], abs=1e-9)
    assert res.summary["idle_while_runnable_s"] == pytest.approx(0.1, abs=1e-9)


class Vtime(Scheduler):
    """Writes each new task's vtime, inserts by it, reads it back."""

    name = "vtime"
    uses_dsqs = True

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int]] = []

    def init(self, cx):
        cx.create_dsq(1)

    def select_cpu(self, cx, task, prev_cpu, flags):
        if flags == "new":
            before = cx.task_vtime(task)
            cx.set_task_vtime(task, 10 * task)
            self.seen.append((task, before, cx.task_vtime(task)))
        return cx.task_cpu(task)

    def enqueue(self, cx, task, cpu, flags):
        # dsq_insert_vtime sets the task's vtime, as in the kernel.
        cx.dsq_insert_vtime(task, 1, cx.task_vtime(task) + 1)

    def dispatch(self, cx, cpu, prev):
        cx.dsq_move_to_local(1)

    def stopping(self, cx, task, cpu, runnable):
        self.seen.append((task, -1, cx.task_vtime(task)))


def test_task_vtime_is_engine_state() -> None:
    scn = {
        **EIGHT_THREADS,
        "workload": {"programs": [{"kind": "parallel", "threads": 2, "work_ms": 20}]},
    }
    p = Vtime()
    _run_policy(p, scn)
    # New tasks start at 0; the write is read back; the insert adds 1; each
    # thread runs 10 ms once (shorter than a slice) and stops.
    assert sorted(p.seen) == [(0, -1, 1), (0, 0, 0), (1, -1, 11), (1, 0, 10)]


SCX_POLICIES = ["scx-simple", "scx-central", "global-edf"]


@pytest.mark.parametrize("sched", [*SCX_POLICIES, "python"])
def test_dsq_schedulers_are_refused_with_vms(sched: str) -> None:
    scn = {
        **EIGHT_THREADS,
        "vms": [{"name": "web", "vcpus": 2, "programs": [{"kind": "sequential", "work_ms": 10}]}],
    }
    policy: Any = Vtime() if sched == "python" else sched
    name = "python:vtime" if sched == "python" else sched
    with pytest.raises(PolicyError) as e:
        hetsched.run(scn, scheduler=policy)
    text = str(e.value)
    assert f'scheduler "{name}"' in text
    assert "do not cover virtual machines (the scenario has [[vm]] web)" in text


@pytest.mark.parametrize("sched", [*SCX_POLICIES, "python"])
def test_dsq_schedulers_are_refused_with_fusion(sched: str) -> None:
    scn = {
        **EIGHT_THREADS,
        "dynamic": {
            "mechanism": "proxy-apic",
            "fusion": [{"level": 2, "speedup": {"default": 1.5}}],
        },
    }
    policy: Any = Vtime() if sched == "python" else sched
    with pytest.raises(PolicyError, match=r"do not cover dynamic processors that fuse CPUs"):
        hetsched.run(scn, scheduler=policy)


def test_a_dsq_guest_scheduler_is_refused() -> None:
    scn = {
        **EIGHT_THREADS,
        "vms": [
            {
                "name": "db",
                "vcpus": 2,
                "scheduler": "scx-central",
                "programs": [{"kind": "sequential", "work_ms": 10}],
            }
        ],
    }
    with pytest.raises(PolicyError, match=r'guest scheduler of \[\[vm\]\] "db"'):
        hetsched.run(scn, scheduler="cfs")


def test_scx_central_decides_on_one_cpu() -> None:
    # 12 CPU-bound threads on 4 big + 4 little cores: after the first
    # timer (1 ms) every CPU has asked the central CPU for work, and from
    # then on the only idle time beside waiting work is the instant
    # between a preempted task's CPU asking and being served.
    scn = {
        **EIGHT_THREADS,
        "workload": {"programs": [{"kind": "parallel", "threads": 12, "work_ms": 2400}]},
    }
    res = hetsched.run(scn, scheduler="scx-central", check=True)
    assert res.summary["programs_completed"] == 1
    # 7 CPUs idle for the first millisecond, then none.
    assert res.summary["idle_while_runnable_s"] == pytest.approx(0.007, abs=1e-9)
    other = hetsched.run(scn, scheduler="scx-central[central_cpu=5]", check=True)
    assert other.summary["idle_while_runnable_s"] == pytest.approx(0.007, abs=1e-9)
