"""The kernel scheduler trace: parsing (tracefs and trace-cmd report text),
conversion to hetsched trace events, the tables, the recorder, and
``hetsched trace import``."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import time
from pathlib import Path

import pytest

import hetsched
from hetsched import tracefs
from hetsched.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "linux-traces"

# A tiny trace whose tables are worked out by hand below. Times are relative
# to the first event (100.000000 s). Tasks in order of appearance: spin (pid
# 10) = task 0, "Web Content" (pid 20, a comm with a space) = 1, spin's child
# (pid 30) = 2.
#
#   0.0  cpu0: idle -> spin                      spin runs on cpu0
#   1.0  wakeup Web Content on cpu0              it was never seen: a wake-up
#   1.5  cpu0: spin (R+, preempted) -> Web       spin's slice [0, 1.5] = 1.5 ms;
#                                                Web's latency 1.5 - 1.0 = 0.5 ms
#   2.0  cpu0: Web (S) -> spin                   Web ran [1.5, 2.0], blocked (sleep)
#   3.0  wakeup Web on cpu1                      a wake-up after blocking
#   3.2  cpu1: idle -> Web                       latency 0.2 ms; Web last ran on
#                                                cpu0: a migration 0 -> 1 at 3.2
#   3.7  cpu1: Web (D|W) -> idle                 ran [3.2, 3.7], blocked (io)
#   4.0  fork spin -> child 30
#   4.1  wakeup_new 30 on cpu1
#   4.4  cpu1: idle -> 30                        new-task latency 0.3 ms
#   5.0  exit 30
#   5.1  cpu1: 30 (X) -> idle                    ran [4.4, 5.1], exit
#   6.0  cpu0: spin (S) -> idle                  ran [2.0, 6.0], blocked
#
# Per task: spin cpu 1.5 + 4.0 = 5.5 ms, one slice (1.5 ms), no wake-up;
# Web cpu 0.5 + 0.5 = 1.0 ms, two wake-ups with latencies 0.5 and 0.2 ms
# (p50 = 0.35, p99 = 0.2 + 0.99 × 0.3 = 0.497, max 0.5), one migration;
# the child cpu 0.7 ms, no wake-up counted (its first is a new task's),
# latency 0.3 ms.
EVENTS = [
    # (t, cpu, name, fields)
    (0.0, 0, "switch", ("swapper/0", 0, "R", "spin", 10)),
    (1.0, 0, "wakeup", ("Web Content", 20, 0)),
    (1.5, 0, "switch", ("spin", 10, "R+", "Web Content", 20)),
    (2.0, 0, "switch", ("Web Content", 20, "S", "spin", 10)),
    (3.0, 0, "wakeup", ("Web Content", 20, 1)),
    (3.2, 1, "switch", ("swapper/1", 0, "R", "Web Content", 20)),
    (3.7, 1, "switch", ("Web Content", 20, "D|W", "swapper/1", 0)),
    (4.0, 0, "fork", ("spin", 10, "spin", 30)),
    (4.1, 0, "wakeup_new", ("spin", 30, 1)),
    (4.4, 1, "switch", ("swapper/1", 0, "R", "spin", 30)),
    (5.0, 1, "exit", ("spin", 30)),
    (5.1, 1, "switch", ("spin", 30, "X", "swapper/1", 0)),
    (6.0, 0, "switch", ("spin", 10, "S", "swapper/0", 0)),
]


def _who(cpu: int, name: str, f: tuple, running: dict[int, tuple[str, int]]) -> tuple[str, int]:
    if name == "switch":
        return (f[0], f[1]) if f[1] else ("<idle>", 0)
    return running.get(cpu, ("<idle>", 0))


def tracefs_text(flags: bool = True) -> str:
    """EVENTS as the kernel's tracefs 'trace' file prints them."""
    lines = [
        "# tracer: nop",
        "#",
        "# entries-in-buffer/entries-written: 13/13   #P:2",
        "#",
        "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
        "#              | |         |   |||||     |         |",
    ]
    running: dict[int, tuple[str, int]] = {}
    for t, cpu, name, f in EVENTS:
        comm, pid = _who(cpu, name, f, running)
        head = f"{comm:>16}-{pid:<7} [{cpu:03d}] " + ("d..2. " if flags else "")
        ts = f"{100 + t / 1000:.6f}"
        if name == "switch":
            body = (
                f"sched_switch: prev_comm={f[0]} prev_pid={f[1]} prev_prio=120 "
                f"prev_state={f[2]} ==> next_comm={f[3]} next_pid={f[4]} next_prio=120"
            )
            running[cpu] = (f[3], f[4])
        elif name in ("wakeup", "wakeup_new"):
            body = f"sched_{name}: comm={f[0]} pid={f[1]} prio=120 target_cpu={f[2]:03d}"
        elif name == "fork":
            body = f"sched_process_fork: comm={f[0]} pid={f[1]} child_comm={f[2]} child_pid={f[3]}"
        else:
            body = f"sched_process_exit: comm={f[0]} pid={f[1]} prio=120 group_dead=true"
        lines.append(f"{head}  {ts}: {body}")
    return "\n".join(lines) + "\n"


def trace_cmd_text() -> str:
    """EVENTS as ``trace-cmd report`` prints them (its sched plugin's compact
    sched_switch and sched_wakeup, nanosecond timestamps)."""
    lines = ["cpus=2"]
    running: dict[int, tuple[str, int]] = {}
    for t, cpu, name, f in EVENTS:
        comm, pid = _who(cpu, name, f, running)
        ts = f"{100 + t / 1000:.9f}"
        if name == "switch":
            body = f"sched_switch:         {f[0]}:{f[1]} [120] {f[2]} ==> {f[3]}:{f[4]} [120]"
            running[cpu] = (f[3], f[4])
        elif name in ("wakeup", "wakeup_new"):
            body = f"sched_{name}:         {f[0]}:{f[1]} [120] CPU:{f[2]:03d}"
        elif name == "fork":
            body = (
                f"sched_process_fork:   comm={f[0]} pid={f[1]} child_comm={f[2]} child_pid={f[3]}"
            )
        else:
            body = f"sched_process_exit:   comm={f[0]} pid={f[1]} prio=120"
        lines.append(f"{comm:>16}-{pid:<5} [{cpu:03d}] {ts}: {body}")
    return "\n".join(lines) + "\n"


MS = 1_000_000


def test_conversion_and_tables_match_the_hand_worked_values() -> None:
    data = tracefs.convert(tracefs.parse(tracefs_text()))
    assert data.format == "tracefs" and data.ncpus == 2
    assert [t["pid"] for t in data.tasks] == [10, 20, 30]
    assert data.tasks[1]["comm"] == "Web Content"
    assert data.tasks[2]["parent"] == 10
    assert data.t0_ns == 100 * 1_000_000_000 and data.end_ns == 6 * MS
    runs = tracefs.run_intervals(data.events)
    got = sorted(
        zip(
            runs["task"],
            runs["cpu"],
            runs["start_ns"] / MS,
            runs["end_ns"] / MS,
            runs["end"],
            strict=True,
        )
    )
    assert got == [
        (0, 0, 0.0, 1.5, "preempt"),
        (0, 0, 2.0, 6.0, "block"),
        (1, 0, 1.5, 2.0, "block"),
        (1, 1, 3.2, 3.7, "block"),
        (2, 1, 4.4, 5.1, "exit"),
    ]
    blocks = {(e["task"], e["t_ns"]): e["reason"] for e in data.events if e["type"] == "block"}
    assert blocks[(1, int(3.7 * MS))] == "io"
    assert blocks[(1, 2 * MS)] == "sleep"
    wk = tracefs.wakeups(data.events)
    assert list(zip(wk["task"], wk["latency_ms"].round(6), wk["new"], wk["cpu"], strict=True)) == [
        (1, 0.5, False, 0),
        (1, 0.2, False, 1),
        (2, 0.3, True, 1),
    ]
    mig = tracefs.migrations(data.events)
    assert mig.to_dict("records") == [{"t_ns": int(3.2 * MS), "task": 1, "from": 0, "to": 1}]
    sl = tracefs.slices(data.events)
    assert list(sl["task"]) == [0] and list(sl["dur_ms"]) == [1.5]
    s = tracefs.task_summary(data.events).set_index("task")
    assert s.loc[0, "cpu_s"] == pytest.approx(0.0055)
    assert s.loc[1, "cpu_s"] == pytest.approx(0.0010)
    assert s.loc[2, "cpu_s"] == pytest.approx(0.0007)
    assert list(s["wakeups"]) == [0, 2, 0]
    assert s.loc[1, "wakeup_latency_p50_ms"] == pytest.approx(0.35)
    assert s.loc[1, "wakeup_latency_p99_ms"] == pytest.approx(0.497)
    assert s.loc[1, "wakeup_latency_max_ms"] == pytest.approx(0.5)
    assert s.loc[2, "wakeup_latency_p50_ms"] == pytest.approx(0.3)
    assert math.isnan(s.loc[0, "wakeup_latency_p50_ms"])
    assert list(s["migrations"]) == [0, 1, 0]
    assert s.loc[0, "slices"] == 1 and s.loc[0, "slice_mean_ms"] == pytest.approx(1.5)


def test_window_clips_cpu_time_and_keeps_events_inside() -> None:
    data = tracefs.convert(tracefs.parse(tracefs_text()))
    # [1, 4] ms: spin runs [1, 1.5] and [2, 4] = 2.5 ms; Web [1.5, 2] and
    # [3.2, 3.7] = 1.0 ms, both wake-ups (1.0, 3.0) and the migration inside.
    s = tracefs.task_summary(data.events, window=(1 * MS, 4 * MS)).set_index("task")
    assert s.loc[0, "cpu_s"] == pytest.approx(0.0025)
    assert s.loc[1, "cpu_s"] == pytest.approx(0.0010)
    assert s.loc[1, "wakeups"] == 2 and s.loc[1, "migrations"] == 1
    assert s.loc[2, "cpu_s"] == 0.0


def test_trace_cmd_report_text_gives_the_same_events() -> None:
    a = tracefs.convert(tracefs.parse(tracefs_text()))
    b = tracefs.convert(tracefs.parse(trace_cmd_text()))
    assert b.format == "trace-cmd"
    assert b.events == a.events
    assert b.tasks == a.tasks


def test_older_line_forms_are_read() -> None:
    # No flags column (older kernels), a (TGID) column, wakeup with success=1
    # and no target_cpu (the event's CPU is used), a numeric prev_state.
    text = (
        "# tracer: nop\n"
        "   bash-7640  (  7640) [001]   272.516162: sched_wakeup: comm=cat pid=7641 prio=120 "
        "success=1\n"
        " <idle>-0     (-----) [001]   272.516200: sched_switch: prev_comm=swapper/1 prev_pid=0 "
        "prev_prio=120 prev_state=0 ==> next_comm=cat next_pid=7641 next_prio=120\n"
        "    cat-7641  (  7641) [001]   272.517200: sched_switch: prev_comm=cat prev_pid=7641 "
        "prev_prio=120 prev_state=1 ==> next_comm=swapper/1 next_pid=0 next_prio=120\n"
    )
    d = tracefs.convert(tracefs.parse(text))
    wake = [e for e in d.events if e["type"] == "wake"]
    # bash (pid 7640, task 1) was running when it woke cat: the waker.
    assert wake == [{"type": "wake", "t_ns": 0, "task": 0, "cpu": 1, "new": False, "waker": 1}]
    runs = tracefs.run_intervals(d.events)
    assert list(runs["dur_ms"].round(6)) == [1.0] and list(runs["end"]) == ["block"]


def test_wakers_are_the_running_task_unless_in_interrupt_context() -> None:
    data = tracefs.convert(tracefs.parse(tracefs_text()))
    # spin (task 0) was running on cpu0 at each wake-up of the hand-worked trace.
    assert [e["waker"] for e in data.events if e["type"] == "wake"] == [0, 0, 0]
    text = (
        "  spin-10 [000] dNh3. 1.000000: sched_wakeup: comm=a pid=3 prio=120 target_cpu=000\n"
        "  spin-10 [000] dNs3. 1.000001: sched_wakeup: comm=b pid=4 prio=120 target_cpu=000\n"
        "  spin-10 [000] d..3. 1.000002: sched_wakeup: comm=c pid=5 prio=120 target_cpu=000\n"
    )
    wakes = [e for e in tracefs.convert(tracefs.parse(text)).events if e["type"] == "wake"]
    assert [e["waker"] for e in wakes] == [None, None, 3]


# A fork onto an idle CPU whose switch-in is missing (as in the recorded
# churn traces: the child is next seen at its exit), a wake-up by an interrupt
# whose switch-in is missing too (the CPU was running a kernel worker), and a
# task first seen as it is switched out of a CPU that had switched already.
# Times are ms after 100 s.
MISSING_SWITCH_IN = """\
            spin-90      [001] d..2.   100.000000: sched_switch: prev_comm=spin prev_pid=90 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          parent-100     [000] .....   100.001000: sched_process_fork: comm=parent pid=100 child_comm=parent child_pid=101
          parent-100     [000] d..2.   100.001005: sched_wakeup_new: comm=parent pid=101 prio=120 target_cpu=001
          parent-100     [000] d..2.   100.001020: sched_switch: prev_comm=parent prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          parent-101     [001] .....   100.003100: sched_process_exit: comm=parent pid=101 prio=120 group_dead=true
          parent-101     [001] dN.6.   100.003150: sched_wakeup: comm=parent pid=100 prio=120 target_cpu=000
          parent-101     [001] d..2.   100.003200: sched_switch: prev_comm=parent prev_pid=101 prev_prio=120 prev_state=X ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [000] d..2.   100.003210: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=parent next_pid=100 next_prio=120
          parent-100     [000] d..2.   100.004000: sched_switch: prev_comm=parent prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       [001] d..2.   100.004100: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=kworker/1:0 next_pid=50 next_prio=120
     kworker/1:0-50      [001] dNh2.   100.004200: sched_wakeup: comm=parent pid=100 prio=120 target_cpu=001
          parent-100     [001] d..2.   100.005500: sched_switch: prev_comm=parent prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
           ghost-77      [001] d..2.   100.006000: sched_switch: prev_comm=ghost prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
"""  # noqa: E501


def test_a_missing_switch_in_counts_from_the_latest_moment_it_can_have_begun() -> None:
    d = tracefs.convert(tracefs.parse(MISSING_SWITCH_IN))
    assert [t["pid"] for t in d.tasks] == [90, 100, 101, 50, 77]
    runs = [(e["task"], e["cpu"], e["t_ns"], e["end_ns"], bool(e.get("start_inferred")))
            for e in d.events if e["type"] == "run"]  # fmt: skip
    assert runs == [
        # parent ran on cpu0 from the trace's start (no switch there before).
        (1, 0, 0, 1_020_000, False),
        # The child: not from the trace's start but from its wake-up (1.005),
        # after cpu1's switch to idle at 0: 2.195 ms, as it ran.
        (2, 1, 1_005_000, 3_200_000, True),
        (1, 0, 3_210_000, 4_000_000, False),
        # parent, woken at 4.2 on cpu1 while the kernel worker (since 4.1) ran.
        (1, 1, 4_200_000, 5_500_000, True),
    ]
    # ghost (first seen as cpu1, which had switched before, switches it out):
    # its interval is not known at all.
    assert not any(e["type"] == "run" and e["task"] == 4 for e in d.events)
    migrations = [
        (e["task"], e["from"], e["to"], e["t_ns"]) for e in d.events if e["type"] == "migrate"
    ]
    assert migrations == [(1, 0, 1, 4_200_000)]
    assert any(
        w.startswith("3 sched_switch event(s) switched out a task whose switch-in is not in")
        and "2 counted from the latest moment" in w
        and "1 left out" in w
        for w in d.warnings
    ), d.warnings
    # The wake-ups before an inferred start have no latency, but count.
    wk = tracefs.wakeups(d.events)
    assert list(zip(wk["task"], wk["new"], wk["latency_ms"].round(6), strict=True)) == [
        (2, True, pytest.approx(float("nan"), nan_ok=True)),
        (1, False, 0.06),
        (1, False, pytest.approx(float("nan"), nan_ok=True)),
    ]
    s = tracefs.task_summary(d.events).set_index("task")
    assert s.loc[2, "cpu_s"] == pytest.approx(0.002195)
    assert s.loc[1, "wakeups"] == 2
    assert s.loc[1, "wakeup_latency_p50_ms"] == pytest.approx(0.06)
    assert s.loc[1, "wakeup_latency_max_ms"] == pytest.approx(0.06)


def test_lost_events_drop_the_open_interval_and_warn() -> None:
    text = tracefs_text().replace(
        "\n" + tracefs_text().splitlines()[9] + "\n",  # the 2.0 ms switch on cpu0
        "\nCPU:0 [LOST 12 EVENTS]\n",
    )
    d = tracefs.convert(tracefs.parse(text))
    assert len(d.lost) == 1 and any("lost" in w for w in d.warnings)
    runs = tracefs.run_intervals(d.events)
    # Web's interval from 1.5 ms is not known to end anywhere: left out; spin's
    # last interval counts from the moment cpu0's events resume.
    assert (1, 0) not in set(zip(runs["task"], runs["cpu"], strict=True))


def test_buffer_started_marker_is_read_as_lost_events() -> None:
    text = "##### CPU 1 buffer started ####\n" + tracefs_text()
    p = tracefs.parse(text)
    assert p.lost and p.lost[0][1] == 1


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("this is not a trace", "not a trace line"),
        (
            "  spin-10 [000] d..2. 100.007000: sched_switch: prev_comm=spin prev_pid=10",
            "sched_switch: cannot read its fields",
        ),
        (
            "  spin-10 [000] d..2. 100.007000: sched_switch: prev_comm=spin prev_pid=10 "
            "prev_prio=120 prev_state=Q ==> next_comm=a next_pid=3 next_prio=120",
            "prev_state 'Q' is not a task state",
        ),
        (
            "  spin-10 [000] d..3. 100.007000: sched_migrate_task: comm=spin pid=10 prio=120 "
            "orig_cpu=x dest_cpu=1",
            "sched_migrate_task: a CPU field",
        ),
    ],
)
def test_malformed_lines_name_their_line_number(line: str, needle: str) -> None:
    text = tracefs_text() + line + "\n"
    n = len(text.splitlines())
    with pytest.raises(tracefs.TraceFormatError) as e:
        tracefs.parse(text, "t.txt")
    assert f"t.txt:{n}:" in str(e.value) and needle in str(e.value)
    assert e.value.lineno == n


def test_other_events_are_counted_not_refused() -> None:
    text = tracefs_text() + (
        "  spin-10 [000] d..2. 100.007000: sched_waking: comm=a pid=3 prio=120 target_cpu=000\n"
    )
    assert tracefs.parse(text).ignored == {"sched_waking": 1}


def test_tables_read_a_simulated_run_the_same_way() -> None:
    scen = {
        "name": "t",
        "seed": 1,
        "duration_s": 0.2,
        "scheduler": "cfs",
        "governor": "performance",
        "machine": {
            "types": {"c": {"capacity": 1024, "pstates": [{"mhz": 1000, "volt": 1.0}]}},
            "cpus": [{"type": "c"}],
        },
        "workload": {
            "programs": [
                {"name": "spin", "kind": "sequential", "work_ms": 1000.0},
                {"name": "per", "kind": "periodic", "period_ms": 10.0, "wcet_ms": 0.5},
            ]
        },
    }
    res = hetsched.run(scen, trace=True)
    s = tracefs.task_summary(res.trace).set_index("task")
    for r in res.tasks.to_dict("records"):
        assert s.loc[r["task"], "cpu_s"] == pytest.approx(r["run_s"], abs=1e-6)
    per = int(res.tasks.set_index("program").loc["per", "task"])
    # Releases at 0, 10, ..., 200 ms (the run's end): 21 wake-ups, the first
    # is the task's start (a new task's), so 20 count.
    assert s.loc[per, "wakeups"] == 20
    assert s.loc[per, "wakeup_latency_max_ms"] >= 0.0


def _fake_tracefs(root: Path) -> None:
    (root / "tracing_on").write_text("1\n")
    (root / "set_event").write_text("irq:irq_handler_entry\nirq:irq_handler_exit\n")
    (root / "current_tracer").write_text("nop\n")
    (root / "buffer_size_kb").write_text("7 (expanded: 1408)\n")
    (root / "trace").write_text("# tracer: nop\n")
    for ev in tracefs.EVENTS:
        d = root / "events" / "sched" / ev
        d.mkdir(parents=True)
        (d / "enable").write_text("0\n")


def test_recorder_sets_up_and_restores_even_on_error(tmp_path: Path) -> None:
    _fake_tracefs(tmp_path)
    kt = tracefs.KernelTrace(root=tmp_path, instance=None, buffer_kb=4096)
    seen: dict[str, str] = {}

    def experiment() -> None:
        with kt:
            for name in ("tracing_on", "buffer_size_kb", "set_event"):
                seen[name] = (tmp_path / name).read_text()
            for ev in tracefs.EVENTS:
                seen[ev] = (tmp_path / "events" / "sched" / ev / "enable").read_text()
            (tmp_path / "trace").write_text(tracefs_text())
            raise RuntimeError("the experiment failed")

    with pytest.raises(RuntimeError):
        experiment()
    assert seen.pop("tracing_on") == "1" and seen.pop("buffer_size_kb") == "4096"
    assert seen.pop("set_event") == ""
    assert seen == dict.fromkeys(tracefs.EVENTS, "1")
    assert kt.text == tracefs_text()
    assert (tmp_path / "tracing_on").read_text() == "1"
    assert (tmp_path / "buffer_size_kb").read_text() == "1408"
    assert (tmp_path / "set_event").read_text() == "irq:irq_handler_entry\nirq:irq_handler_exit\n"


def test_recorder_refuses_without_root_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(tracefs.TraceError) as e, tracefs.KernelTrace():
        pass
    assert "needs root" in str(e.value) and "\n" not in str(e.value)


def test_recorder_refuses_a_kernel_without_the_events(tmp_path: Path) -> None:
    _fake_tracefs(tmp_path)
    (tmp_path / "events" / "sched" / "sched_wakeup_new" / "enable").unlink()
    with pytest.raises(tracefs.TraceError, match="sched_wakeup_new"):
        tracefs.KernelTrace(root=tmp_path, instance=None).__enter__()
    assert (tmp_path / "tracing_on").read_text() == "1\n"


def _can_trace() -> str | None:
    if os.geteuid() != 0:
        return "recording the kernel trace needs root"
    if tracefs.find_tracefs() is None and not Path("/sys/kernel/tracing").is_dir():
        return "no tracefs on this system"
    return None


@pytest.mark.skipif(_can_trace() is not None, reason=str(_can_trace()))
def test_recording_a_real_process_sees_its_sleeps_and_wakeups() -> None:
    with tracefs.KernelTrace(buffer_kb=1024) as kt:
        p = subprocess.Popen(["sleep", "0.05"])
        p.wait()
        time.sleep(0.01)
    inst = kt.instance
    assert inst is not None
    base = tracefs.find_tracefs()
    assert base is None or not (base / "instances" / inst).exists()
    d = tracefs.convert(tracefs.parse(kt.text))
    i = d.task_of(p.pid)
    assert i is not None
    kinds = {e["type"] for e in d.events if e.get("task") == i}
    assert {"wake", "run", "exit"} <= kinds
    assert any(e["type"] == "wake" and e["new"] for e in d.events if e.get("task") == i)


def test_trace_import_command_writes_a_results_folder(tmp_path: Path) -> None:
    src = tmp_path / "t.txt.gz"
    with gzip.open(src, "wt") as f:
        f.write(tracefs_text())
    out = tmp_path / "out"
    assert main(["trace", "import", str(src), "--out", str(out)]) == 0
    for name in ("trace.jsonl", "trace.json", "tasks.csv", "runs.csv", "wakeups.csv"):
        assert (out / name).exists(), name
    res = hetsched.Results.load(out)
    assert len(res.trace) == len(tracefs.load(src).events)
    assert list(res.tasks["pid"]) == [10, 20, 30]
    assert res.tasks.set_index("pid").loc[20, "wakeups"] == 2
    assert json.loads((out / "trace.json").read_text())["traceEvents"]


def test_trace_import_command_reports_a_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "bad.txt"
    src.write_text(tracefs_text() + "oops\n")
    assert main(["trace", "import", str(src)]) == 1
    err = capsys.readouterr().err.strip()
    n = len(src.read_text().splitlines())
    assert err.startswith("hetsched: error: ") and f"bad.txt:{n}:" in err
    assert "\n" not in err


@pytest.mark.skipif(not (DATA / "manifest.json").exists(), reason="no recorded traces")
def test_every_recorded_trace_parses_with_our_tasks_in_it() -> None:
    manifest = json.loads((DATA / "manifest.json").read_text())
    assert manifest["experiments"]
    for items in manifest["experiments"].values():
        for it in items:
            d = tracefs.load(DATA / it["file"])
            assert d.format == "tracefs" and not d.lost
            for pid in it["pids"].values():
                i = d.task_of(int(pid))
                assert i is not None
                assert any(e["type"] == "run" and e["task"] == i for e in d.events)


@pytest.mark.skipif(
    not (DATA / "trace-cmd-periodic.json").exists(), reason="no recorded trace-cmd report"
)
def test_a_real_trace_cmd_report_parses() -> None:
    # trace-cmd 3.1.6's report of an instance: "INSTANCE: " before each line,
    # compact sched_switch/sched_wakeup, comms with spaces ("lto cgu.3").
    info = json.loads((DATA / "trace-cmd-periodic.json").read_text())
    d = tracefs.load(DATA / "trace-cmd-periodic.report.xz")
    assert d.format == "trace-cmd" and d.ncpus == 2
    i = d.task_of(info["pid"])
    assert i is not None and d.tasks[i]["comm"] == "schedprobe"
    assert d.tasks[i]["parent"] is not None
    assert not any(t["comm"].endswith(":") or ": " in t["comm"] for t in d.tasks)
    wk = tracefs.wakeups(d.events)
    # Pinned to cpu1 by taskset: after its first moves, it wakes up there.
    assert (wk[wk["task"] == i]["cpu"] == 1).sum() > 50


def test_trace_import_refuses_a_trace_without_scheduler_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "irq.txt"
    src.write_text(
        "# tracer: nop\n"
        "  bash-1 [000] d.h1. 5.000000: irq_handler_entry: irq=1 name=timer\n"
    )
    assert main(["trace", "import", str(src), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "no scheduler events" in err and "sched_switch" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(_can_trace() is not None, reason=str(_can_trace()))
def test_linux_agent_kernel_trace_writes_the_trace_and_its_import(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "5"])
    try:
        argv = ["linux", "agent", "--pid", str(sleeper.pid), "--duration", "0.3", "-q"]
        assert main([*argv, "--kernel-trace", "--out", str(tmp_path / "r")]) == 0
    finally:
        sleeper.kill()
        sleeper.wait()
    assert (tmp_path / "r" / "kernel-trace.txt").stat().st_size > 0
    res = hetsched.Results.load(tmp_path / "r" / "kernel-trace")
    assert res.summary["scheduler"] == "linux (kernel trace)" and len(res.trace) > 0
