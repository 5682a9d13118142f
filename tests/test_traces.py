"""The trace exports: Perfetto JSON checked against the trace-event format's
rules, and the ftrace text checked as LISA and trace-cmd would read it."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import hetsched
from hetsched import traces

SCENARIO = {
    "name": "traces",
    "duration_s": 1.0,
    "scheduler": "cfs",
    "governor": "schedutil",
    "machine": {"preset": "big-little-4+4"},
    "workload": {
        "programs": [
            {"name": "par", "kind": "parallel", "threads": 6, "work_ms": 60, "iterations": 3},
            {"name": "io", "kind": "pool", "threads": 2, "work_ms": 24, "chunks": 6, "io_ms": 4},
            {"name": "ui", "kind": "phases", "threads": 2, "loops": 8,
             "phases": [{"compute_ms": 3}, {"sleep_ms": 4}]},
        ]
    },
}  # fmt: skip

PHASES = {"X", "B", "E", "i", "I", "C", "M", "s", "t", "f"}
METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return hetsched.run(SCENARIO, trace=True).save(tmp_path_factory.mktemp("traced"))


@pytest.fixture(scope="module")
def res(run_dir: Path) -> hetsched.Results:
    return hetsched.Results.load(run_dir)


def check_trace_events(doc: dict) -> list[dict]:
    """The rules of the Chrome trace-event format that Perfetto's importer relies on."""
    events = doc["traceEvents"]
    assert isinstance(events, list) and events
    open_slices: dict[tuple[int, int], list[str]] = defaultdict(list)
    flows: dict[int, list[str]] = defaultdict(list)
    for e in events:
        ph = e["ph"]
        assert ph in PHASES, e
        assert isinstance(e["pid"], int), e
        if ph == "M":
            assert e["name"] in METADATA and isinstance(e["args"], dict), e
            continue
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0, e
        assert isinstance(e["name"], str) and e["name"], e
        if ph in "XBEisf":
            assert isinstance(e["tid"], int), e
        if ph == "X":
            assert isinstance(e["dur"], int | float) and e["dur"] >= 0, e
        elif ph == "B":
            open_slices[(e["pid"], e["tid"])].append(e["name"])
        elif ph == "E":
            assert open_slices[(e["pid"], e["tid"])], f"E without B: {e}"
            open_slices[(e["pid"], e["tid"])].pop()
        elif ph == "C":
            assert e["args"] and all(
                isinstance(v, int | float) and v == v for v in e["args"].values()
            ), e
        elif ph == "i":
            assert e.get("s", "t") in ("t", "p", "g"), e
        elif ph in "sf":
            assert isinstance(e["id"], int), e
            flows[e["id"]].append(ph)
            if ph == "f":
                assert e.get("bp") == "e", e
    assert not any(open_slices.values()), "B without E"
    assert all(sorted(v) == ["f", "s"] for v in flows.values()), "unpaired flow ids"
    return events


def test_perfetto_document_follows_the_format(run_dir: Path) -> None:
    events = check_trace_events(json.loads((run_dir / "trace.json").read_text()))
    counters = {e["name"] for e in events if e["ph"] == "C"}
    # Counter tracks: one frequency per domain (2 on big.LITTLE), power, utilisation per CPU.
    assert {"frequency domain 0 (MHz)", "frequency domain 1 (MHz)"} <= counters
    assert "power (W, estimated)" in counters
    assert {f"utilisation cpu{c} (%)" for c in range(8)} <= counters
    assert any(e["ph"] == "s" for e in events), "a parallel program's barriers have wakers"


def test_every_thread_has_a_track_with_its_states(res) -> None:
    doc = traces.perfetto(res)
    events = doc["traceEvents"]
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    rows = zip(res.tasks["task"], res.tasks["program"], res.tasks["thread"], strict=True)
    for task, program, thread in rows:
        key = (traces.PROGRAM_PID + int(res.tasks.loc[task, "program_id"]), traces.TASK_TID + task)
        assert names[key] == f"{program}#{thread}"
    states = [e for e in events if e.get("cat") == "thread state"]
    assert {e["name"] for e in states} >= {"running", "runnable", "blocked: barrier",
                                           "blocked: io", "blocked: sleep"}  # fmt: skip


def test_thread_states_do_not_overlap_and_running_matches_cpu_time(res) -> None:
    states = traces.thread_states(res.trace, res.summary["sim_end_s"])
    for task, slices in states.items():
        for (a0, b0, *_), (a1, _b1, *_) in itertools.pairwise(slices):
            assert a0 < b0 <= a1
        running = sum(b - a for a, b, name, _ in slices if name == "running") / 1e9
        assert running == pytest.approx(res.tasks.loc[task, "run_s"], abs=1e-6)


def test_wakers_are_running_threads_of_the_same_program(res) -> None:
    programs = dict(zip(res.tasks["task"], res.tasks["program_id"], strict=True))
    found = traces.wakers(res.trace, programs)
    assert found
    runs = [e for e in res.trace if e["type"] == "run"]
    for t, waker, wakee in found:
        assert waker != wakee and programs[waker] == programs[wakee]
        assert any(r["task"] == waker and r["t_ns"] < t <= r["end_ns"] for r in runs)


# ftrace text, parsed with the pattern of a tracefs `trace` line.

LINE = re.compile(
    r"^\s*(?P<comm>.+)-(?P<pid>\d+)\s+\[(?P<cpu>\d{3})\]\s+(?P<flags>\S{5})\s+"
    r"(?P<ts>\d+\.\d{6}): (?P<event>\w+): (?P<fields>.*)$"
)
SWITCH = re.compile(
    r"^prev_comm=(?P<pc>\S+) prev_pid=(?P<pp>\d+) prev_prio=(?P<ppr>\d+) "
    r"prev_state=(?P<ps>\S+) ==> next_comm=(?P<nc>\S+) next_pid=(?P<np>\d+) next_prio=(?P<npr>\d+)$"
)


def test_ftrace_text_is_what_trace_cmd_prints(run_dir: Path, res) -> None:
    text = (run_dir / "trace.txt").read_text()
    lines = text.splitlines()
    assert lines[0] == "# tracer: nop"
    body = [line for line in lines if not line.startswith("#")]
    assert f"entries-in-buffer/entries-written: {len(body)}/{len(body)}   #P:8" in text
    parsed = []
    for line in body:
        m = LINE.match(line)
        assert m, line
        parsed.append(m)
    stamps = [float(m["ts"]) for m in parsed]
    assert stamps == sorted(stamps)
    events = {m["event"] for m in parsed}
    assert {"sched_switch", "sched_wakeup", "sched_process_exit", "cpu_frequency"} <= events

    # Per CPU, each switch starts from the task the previous one switched to,
    # and the time between a switch to a pid and the next switch away from it
    # adds up to each task's CPU time.
    current: dict[int, tuple[int, float]] = {}
    ran: dict[int, float] = defaultdict(float)
    for m in parsed:
        if m["event"] != "sched_switch":
            continue
        f = SWITCH.match(m["fields"])
        assert f, m["fields"]
        cpu, t = int(m["cpu"]), float(m["ts"])
        prev = current.get(cpu, (0, 0.0))
        assert int(f["pp"]) == prev[0] == int(m["pid"]), m.string
        if prev[0]:
            ran[prev[0]] += t - prev[1]
        current[cpu] = (int(f["np"]), t)
        if int(f["pp"]) == 0:
            assert f["pc"] == f"swapper/{cpu}" and f["ps"] == "R"
        else:
            assert f["ps"] in ("R", "R+", "S", "D", "X")
    for task, run_s in zip(res.tasks["task"], res.tasks["run_s"], strict=True):
        # Timestamps are printed in microseconds: a rounding per switch.
        switches = int(
            res.tasks.loc[task, "csw_voluntary"] + res.tasks.loc[task, "csw_involuntary"]
        )
        assert ran[task + 1] == pytest.approx(run_s, abs=2e-6 * (switches + 2))


def test_ftrace_states_say_why_a_task_left_the_cpu(res) -> None:
    states = defaultdict(set)
    for line in traces.ftrace_lines(res):
        m = LINE.match(line)
        if m and m["event"] == "sched_switch":
            f = SWITCH.match(m["fields"])
            assert f
            states[f["pc"]].add(f["ps"])
    io = {s for comm, v in states.items() if comm.startswith("io-") for s in v}
    ui = {s for comm, v in states.items() if comm.startswith("ui-") for s in v}
    assert "D" in io and "D" not in ui  # waiting for I/O is uninterruptible
    assert "S" in ui  # sleeping
    assert any("X" in v for v in states.values())  # exits


def test_flow_arrows_leave_the_wakers_running_slice_and_enter_the_wakees(res) -> None:
    events = traces.perfetto(res)["traceEvents"]
    slices = defaultdict(list)
    for e in events:
        if e.get("cat") == "thread state":
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))

    def enclosing(e: dict) -> str:
        inside = [n for a, b, n in slices[(e["pid"], e["tid"])] if a <= e["ts"] < b]
        assert len(inside) == 1, e
        return inside[0]

    flows = [e for e in events if e["ph"] in "sf"]
    assert flows
    for e in flows:
        # A wakee dispatched at once has no runnable slice: its running one starts then.
        assert enclosing(e) in (("running",) if e["ph"] == "s" else ("runnable", "running"))
