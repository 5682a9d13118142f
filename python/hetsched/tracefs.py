"""The kernel's own scheduler trace: read it, record it, and compare it with
the simulator's.

Three parts, one code path for real and simulated runs:

* :func:`parse` reads the text of a tracefs ``trace``/``trace_pipe`` file or of
  ``trace-cmd report`` (the scheduler events ``sched_switch``,
  ``sched_wakeup``, ``sched_wakeup_new``, ``sched_migrate_task``,
  ``sched_process_fork`` and ``sched_process_exit``; other events are counted
  and skipped) and :func:`convert` turns it into hetsched's own trace events
  (``run``, ``wake``, ``block``, ``migrate``, ``exit``: the typed events the
  simulator writes to ``trace.jsonl``).
* The table functions (:func:`run_intervals`, :func:`wakeups`, :func:`slices`,
  :func:`migrations`, :func:`task_summary`) take a list of hetsched trace
  events, so they read a simulated run's ``Results.trace`` exactly as they read
  a converted kernel trace.
* :class:`KernelTrace` records the kernel's trace while a real experiment
  runs (root only) and restores tracefs as it found it.

Definitions used by the tables (``docs/real-linux.md``, "The kernel's
scheduler trace"):

* a *run interval* is a stretch of time a task ran on one CPU without
  interruption; it ends by *preemption* (the task stayed runnable: the
  kernel's ``prev_state`` is ``R`` or ``R+``), by *blocking*, by *exit*, or
  at the end of the trace;
* a *slice* is a run interval ended by preemption;
* a *wake-up latency* is the time from a wake-up (``sched_wakeup`` of a
  sleeping task, or ``sched_wakeup_new`` of a new one) to the moment the task
  next starts running;
* a wake-up's *waker* (``waker`` in the converted ``wake`` events, a task
  index or None) is the task that was running when the kernel wrote the
  wake-up, unless it was written in interrupt context or by the idle task;
* a *migration* is a task starting to run on another CPU than the one it last
  ran on (as the simulator counts them). The kernel's own
  ``sched_migrate_task`` records, which also count moves of sleeping tasks,
  are kept apart (:attr:`KernelTraceData.kernel_migrations`).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import lzma
import math
import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = [
    "EVENTS",
    "KernelTrace",
    "KernelTraceData",
    "TraceError",
    "TraceFormatError",
    "convert",
    "import_trace",
    "migrations",
    "parse",
    "read_trace",
    "run_intervals",
    "slices",
    "task_summary",
    "wakeups",
]

#: The scheduler events the parser reads and the recorder enables.
EVENTS = (
    "sched_switch",
    "sched_wakeup",
    "sched_wakeup_new",
    "sched_migrate_task",
    "sched_process_fork",
    "sched_process_exit",
)


class TraceError(Exception):
    """A trace that cannot be read or recorded; the message says why."""


class TraceFormatError(TraceError):
    """A malformed line; the message names the line number."""

    def __init__(self, source: str, lineno: int, what: str, line: str) -> None:
        shown = line if len(line) <= 160 else line[:157] + "..."
        super().__init__(f"{source}:{lineno}: {what}: {shown.strip()!r}")
        self.lineno = lineno


# -- parsing -------------------------------------------------------------------

# "COMM-PID [CPU] FLAGS TIMESTAMP: EVENT: BODY" (trace-cmd report puts
# "INSTANCE: " before it for a trace of an instance), where COMM may hold spaces and
# dashes, a "(TGID)" column may follow the pid (option record-tgid), FLAGS
# (irqs-off, need-resched, ... : 4 or 5 characters) may be absent (older
# kernels, trace-cmd report without -l) and TIMESTAMP is seconds with µs or ns.
_EVENT_LINE = re.compile(
    r"^\s*(?:(?P<instance>[^\s:]+):\s+)?(?P<comm>.+?)-(?P<pid>\d+)\s+(?:\(\s*(?:\d+|-+)\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:(?P<flags>[^\s:]{4,6})\s+)?(?P<ts>\d+(?:\.\d+)?):\s+(?P<event>\w+):\s?(?P<body>.*)$"
)
_LOST = re.compile(r"^\s*CPU:?\s*(?P<cpu>\d+)\s*\[LOST (?P<n>\d+|\?\?\?) EVENTS\]\s*$")
_BUFFER_STARTED = re.compile(r"^\s*#+\s*CPU (?P<cpu>\d+) buffer started\s*#+\s*$")
# Lines trace-cmd report prints around the events.
_TRACE_CMD_HEADER = re.compile(
    r"^\s*(?:cpus=\d+|version\s*=\s*\d+.*|CPU \d+ is empty|trace-cmd:.*|"
    r"\[?\s*(?:\w+\s+)?(?:local|global|counter|uptime|perf|mono|mono_raw|boot|x86-tsc)\]?"
    r"|CPU\d+ data recorded at offset=.*|\s*\S+ bytes in size.*)\s*$"
)
_PREV_STATE = re.compile(r"^(?:[RSDTtXZPIxKWN](?:\|[RSDTtXZPIxKWN])*\+?|R\+|\d+|0x[0-9a-f]+)$")

# sched_switch as the kernel prints it, and as trace-cmd's sched plugin does.
_SWITCH_KERNEL = re.compile(
    r"^prev_comm=(?P<pc>.*) prev_pid=(?P<pp>-?\d+) prev_prio=(?P<ppr>-?\d+) "
    r"prev_state=(?P<ps>\S+) ==> next_comm=(?P<nc>.*) next_pid=(?P<np>-?\d+) "
    r"next_prio=(?P<npr>-?\d+)\s*$"
)
_SWITCH_COMPACT = re.compile(
    r"^(?P<pc>.*):(?P<pp>-?\d+) \[(?P<ppr>-?\d+)\] (?P<ps>\S+) ==> "
    r"(?P<nc>.*):(?P<np>-?\d+) \[(?P<npr>-?\d+)\]\s*$"
)
# "comm=NAME pid=N" followed by key=value fields (wakeup, migrate, exit, fork).
_COMM_PID = re.compile(r"^comm=(?P<comm>.*?) pid=(?P<pid>-?\d+)(?P<rest>(?: [\w]+=.*)?)\s*$")
_WAKE_COMPACT = re.compile(
    r"^(?P<comm>.*):(?P<pid>-?\d+) \[(?P<prio>-?\d+)\](?P<rest>(?: success=\d+)?"
    r"(?: CPU:(?P<cpu>\d+))?)\s*$"
)
_FORK = re.compile(
    r"^comm=(?P<comm>.*) pid=(?P<pid>-?\d+) child_comm=(?P<ccomm>.*) child_pid=(?P<cpid>-?\d+)"
    r"(?: \w+=\S*)*\s*$"
)


def _kv(rest: str) -> dict[str, str]:
    """``" prio=120 target_cpu=001"`` → ``{"prio": "120", "target_cpu": "001"}``."""
    out: dict[str, str] = {}
    for item in rest.split():
        k, eq, v = item.partition("=")
        if eq:
            out[k] = v
    return out


def _ns(ts: str) -> int:
    """Seconds as printed (``272.516162`` or ``272.516162345``) to integer ns."""
    sec, _, frac = ts.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


@dataclass
class KEvent:
    """One kernel scheduler event, fields as the kernel names them."""

    t_ns: int
    cpu: int
    name: str
    lineno: int
    fields: dict[str, Any]
    #: The task that was running when the event was written (the line's
    #: COMM-PID), and whether it was written in interrupt context (flags).
    current: tuple[str, int] = ("", 0)
    in_irq: bool = False


@dataclass
class ParsedTrace:
    """What :func:`parse` read: the events in time order and what it skipped."""

    source: str
    format: str  # "tracefs" or "trace-cmd"
    events: list[KEvent]
    lost: list[tuple[int, int, int | None]] = field(default_factory=list)  # (lineno, cpu, n)
    ignored: dict[str, int] = field(default_factory=dict)  # other events by name
    ncpus: int | None = None


def read_trace(path: str | Path) -> str:
    """The text of a trace file (``.gz`` and ``.xz`` read transparently)."""
    p = Path(path)
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "rt", encoding="utf-8", errors="replace") as f:
                return f.read()
        if p.suffix == ".xz":
            with lzma.open(p, "rt", encoding="utf-8", errors="replace") as f:
                return f.read()
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise TraceError(f"{p}: {e.strerror or e}") from None


def parse(text: str, source: str = "<trace>") -> ParsedTrace:
    """Read tracefs or ``trace-cmd report`` text (see the module doc).

    Raises :class:`TraceFormatError` naming the line for a line that is
    neither a header, a lost-events marker nor an event line, and for a
    scheduler event whose fields cannot be read."""
    events: list[KEvent] = []
    parsed = ParsedTrace(source, "tracefs", events)
    saw_trace_cmd = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\n\r\x00")
        if not line.strip():
            continue
        m = _EVENT_LINE.match(line)
        if m is None:
            s = line.strip()
            if s.startswith("#"):
                bs = _BUFFER_STARTED.match(line)
                if bs:
                    parsed.lost.append((lineno, int(bs["cpu"]), None))
                    events.append(KEvent(-1, int(bs["cpu"]), "lost", lineno, {}))
                pm = re.search(r"#P:(\d+)", s)
                if pm:
                    parsed.ncpus = int(pm.group(1))
                continue
            lm = _LOST.match(line)
            if lm:
                n = None if lm["n"] == "???" else int(lm["n"])
                parsed.lost.append((lineno, int(lm["cpu"]), n))
                events.append(KEvent(-1, int(lm["cpu"]), "lost", lineno, {}))
                continue
            if _TRACE_CMD_HEADER.match(line):
                saw_trace_cmd = True
                cm = re.match(r"^\s*cpus=(\d+)", line)
                if cm:
                    parsed.ncpus = int(cm.group(1))
                continue
            raise TraceFormatError(
                source,
                lineno,
                "not a trace line (expected 'COMM-PID [CPU] TIMESTAMP: EVENT: FIELDS', "
                "a '#' header or a lost-events marker)",
                line,
            )
        name = m["event"]
        if name not in EVENTS:
            parsed.ignored[name] = parsed.ignored.get(name, 0) + 1
            continue
        fields = _fields(name, m["body"], source, lineno, line)
        if fields.get("_compact"):
            saw_trace_cmd = True
        flags = m["flags"] or ""
        in_irq = len(flags) >= 3 and flags[2] in "hsHz"
        current = (m["comm"].strip(), int(m["pid"]))
        events.append(KEvent(_ns(m["ts"]), int(m["cpu"]), name, lineno, fields, current, in_irq))
    if saw_trace_cmd:
        parsed.format = "trace-cmd"
    # Lost markers take the time of the event before them on their line order,
    # so that sorting keeps them in place; then one stable sort by time (the
    # formats print CPUs merged in time order; this only mends small disorder).
    last = 0
    for e in events:
        if e.t_ns < 0:
            e.t_ns = last
        else:
            last = e.t_ns
    events.sort(key=lambda e: e.t_ns)
    return parsed


def _fields(name: str, body: str, source: str, lineno: int, line: str) -> dict[str, Any]:
    body = body.strip()
    if name == "sched_switch":
        m = _SWITCH_KERNEL.match(body)
        compact = False
        if m is None:
            m = _SWITCH_COMPACT.match(body)
            compact = True
        if m is None:
            raise TraceFormatError(
                source,
                lineno,
                "sched_switch: cannot read its fields (expected 'prev_comm=C prev_pid=N "
                "prev_prio=N prev_state=S ==> next_comm=C next_pid=N next_prio=N' or "
                "trace-cmd's 'C:N [P] S ==> C:N [P]')",
                line,
            )
        state = m["ps"]
        if not _PREV_STATE.match(state):
            raise TraceFormatError(
                source,
                lineno,
                f"sched_switch: prev_state {state!r} is not a task state (R, R+, S, D, "
                "D|W, T, t, X, Z, P, I or a number)",
                line,
            )
        return {
            "prev_comm": m["pc"],
            "prev_pid": int(m["pp"]),
            "prev_state": state,
            "next_comm": m["nc"],
            "next_pid": int(m["np"]),
            "_compact": compact,
        }
    if name == "sched_process_fork":
        f = _FORK.match(body)
        if f is None:
            raise TraceFormatError(
                source,
                lineno,
                "sched_process_fork: cannot read its fields (expected 'comm=C pid=N "
                "child_comm=C child_pid=N')",
                line,
            )
        return {
            "comm": f["comm"],
            "pid": int(f["pid"]),
            "child_comm": f["ccomm"],
            "child_pid": int(f["cpid"]),
        }
    m = _COMM_PID.match(body)
    compact = False
    if m is None and name in ("sched_wakeup", "sched_wakeup_new"):
        m = _WAKE_COMPACT.match(body)
        compact = True
    if m is None:
        raise TraceFormatError(
            source, lineno, f"{name}: cannot read its fields (expected 'comm=C pid=N ...')", line
        )
    kv = _kv(m["rest"] or "")
    out: dict[str, Any] = {"comm": m["comm"], "pid": int(m["pid"]), "_compact": compact}
    try:
        if name in ("sched_wakeup", "sched_wakeup_new"):
            cpu = m.groupdict().get("cpu") if compact else kv.get("target_cpu")
            out["target_cpu"] = int(cpu) if cpu is not None else None
        elif name == "sched_migrate_task":
            out["orig_cpu"] = int(kv["orig_cpu"])
            out["dest_cpu"] = int(kv["dest_cpu"])
    except (KeyError, ValueError):
        raise TraceFormatError(
            source,
            lineno,
            f"{name}: a CPU field is missing or not a number (orig_cpu, dest_cpu)",
            line,
        ) from None
    return out


# -- conversion to hetsched trace events -----------------------------------------


@dataclass
class KernelTraceData:
    """A kernel trace converted to hetsched's trace events.

    ``events`` are hetsched trace events (``t_ns`` from the first event of
    the trace, ``task`` an index into ``tasks``); ``tasks`` lists per task its
    ``pid``, last ``comm`` and ``parent`` pid (from ``sched_process_fork``, or
    None); ``t0_ns`` is the first event's timestamp as the kernel printed it
    (so ``t_ns + t0_ns`` is kernel time); ``end_ns`` the last event's time."""

    source: str
    format: str
    events: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    t0_ns: int
    end_ns: int
    ncpus: int
    kernel_migrations: list[dict[str, Any]]
    lost: list[dict[str, Any]]
    ignored: dict[str, int]
    warnings: list[str]

    def task_of(self, pid: int) -> int | None:
        """The task index of ``pid`` (None if it never appears)."""
        for i, t in enumerate(self.tasks):
            if t["pid"] == pid:
                return i
        return None

    def descendants(self, pids: Iterable[int]) -> set[int]:
        """``pids`` and every task forked from them (transitively) in the trace."""
        out = set(pids)
        changed = True
        while changed:
            changed = False
            for t in self.tasks:
                if t["parent"] in out and t["pid"] not in out:
                    out.add(t["pid"])
                    changed = True
        return out

    def labels(self) -> dict[str, Any]:
        return {
            "tasks": [[t["comm"], t["pid"]] for t in self.tasks],
            "cpus": [f"cpu {c}" for c in range(self.ncpus)],
        }


_DEAD = set("XZx")


def _block_reason(state: str) -> str:
    head = state.split("|")[0].rstrip("+")
    if head.isdigit() or head.startswith("0x"):
        return "sleep"
    return {"D": "io", "T": "stopped", "t": "stopped"}.get(head, "sleep")


def convert(parsed: ParsedTrace) -> KernelTraceData:
    """Turn parsed kernel events into hetsched trace events (module doc).

    The idle task (pid 0) is not a task. A task running when the trace starts
    (or when a CPU's events resume after lost events) is counted from that
    moment; intervals still open at the end are closed at the last event.

    A task switched out of a CPU without its switch-in there (the event is
    missing from the trace) ran from a moment the trace does not give. When
    the trace shows since when the task was waiting to run (its wake-up, its
    fork, or its preemption), its run is counted from the latest moment it
    can have begun: that one, the CPU's previous ``sched_switch`` or the
    start of the CPU's events, whichever is last; the ``run`` event has
    ``start_inferred`` set, and :func:`wakeups` gives the wake-up before it
    no latency. Otherwise (a task first seen as it is switched out) the
    interval is left out. Either way a warning counts them."""
    kev = [e for e in parsed.events if e.name != "lost"]
    t0 = kev[0].t_ns if kev else 0
    end = kev[-1].t_ns - t0 if kev else 0
    index: dict[int, int] = {}
    tasks: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    warnings: list[str] = []

    def task(pid: int, comm: str | None) -> int:
        i = index.get(pid)
        if i is None:
            i = index[pid] = len(tasks)
            tasks.append({"pid": pid, "comm": comm or str(pid), "parent": None})
        elif comm and comm != "<...>":
            tasks[i]["comm"] = comm
        return i

    ncpus = parsed.ncpus or 0
    running: dict[int, tuple[int, int]] = {}  # cpu -> (pid, start)
    known_cpu: dict[int, int] = {}  # cpu -> time from which its events are complete
    state: dict[int, str] = {}  # pid -> running | runnable | blocked | dead
    last_cpu: dict[int, int] = {}
    kmig: list[dict[str, Any]] = []
    exiting: dict[int, int] = {}  # pid -> time of its sched_process_exit
    lost: list[dict[str, Any]] = []
    ready: dict[int, int] = {}  # pid -> since when it waited to run (not running, not asleep)
    last_switch: dict[int, int] = {}  # cpu -> time of its last sched_switch
    inferred = 0
    unknown = 0

    def arrive(pid: int, i: int, cpu: int, at: int) -> None:
        """``pid`` (task ``i``) starts a run on ``cpu`` at ``at``: a migration
        when it last ran elsewhere."""
        was = last_cpu.get(pid)
        if was is not None and was != cpu:
            out.append({"type": "migrate", "t_ns": at, "task": i, "from": was, "to": cpu})
        last_cpu[pid] = cpu

    for e in parsed.events:
        t = e.t_ns - t0
        ncpus = max(ncpus, e.cpu + 1)
        f = e.fields
        if e.name == "lost":
            running.pop(e.cpu, None)
            known_cpu[e.cpu] = t
            lost.append({"t_ns": max(t, 0), "cpu": e.cpu, "line": e.lineno})
            continue
        if e.cpu not in known_cpu:
            known_cpu[e.cpu] = 0
        if e.name == "sched_switch":
            prev, nxt = f["prev_pid"], f["next_pid"]
            if prev != 0:
                pi = task(prev, f["prev_comm"])
                cur = running.get(e.cpu)
                since = known_cpu[e.cpu]
                switched = last_switch.get(e.cpu, -1) >= since
                waited = ready.get(prev, -1) >= since
                run: dict[str, Any] | None = None
                if cur is not None and cur[0] == prev:
                    run = {"t_ns": cur[1]}
                elif cur is None and not switched and not waited:
                    run = {"t_ns": since}  # running since the CPU's events began
                elif prev in ready:
                    # Its switch-in is missing: it began after it was ready and
                    # after whatever the CPU did before.
                    lo = max(since, ready[prev], last_switch.get(e.cpu, since))
                    if cur is not None:
                        lo = max(lo, cur[1])
                    run = {"t_ns": lo, "start_inferred": True}
                    inferred += 1
                else:
                    unknown += 1
                if run is not None and t > run["t_ns"]:
                    out.append({"type": "run", **run, "end_ns": t, "cpu": e.cpu, "task": pi})
                    if run.get("start_inferred"):
                        # The missing switch-in may have moved it, as a switch-in would.
                        arrive(prev, pi, e.cpu, run["t_ns"])
                ps = f["prev_state"]
                head = ps.split("|")[0]
                if head.startswith("R") or ps in ("0", "0x0"):
                    state[prev] = "runnable"
                    ready[prev] = t
                elif head[:1] in _DEAD:
                    if state.get(prev) != "dead":
                        out.append({"type": "exit", "t_ns": t, "task": pi})
                    state[prev] = "dead"
                    exiting.pop(prev, None)
                    ready.pop(prev, None)
                else:
                    out.append(
                        {"type": "block", "t_ns": t, "task": pi, "reason": _block_reason(ps)}
                    )
                    state[prev] = "blocked"
                    ready.pop(prev, None)
            running.pop(e.cpu, None)
            last_switch[e.cpu] = t
            if nxt != 0:
                ni = task(nxt, f["next_comm"])
                running[e.cpu] = (nxt, t)
                arrive(nxt, ni, e.cpu, t)
                state[nxt] = "running"
                ready.pop(nxt, None)
        elif e.name in ("sched_wakeup", "sched_wakeup_new"):
            pid = f["pid"]
            if pid == 0:
                continue
            i = task(pid, f["comm"])
            new = e.name == "sched_wakeup_new"
            if new or state.get(pid) in (None, "blocked"):
                cpu = f["target_cpu"] if f["target_cpu"] is not None else e.cpu
                ncpus = max(ncpus, cpu + 1)
                # Who woke it: the task that was running, unless the wake-up
                # came from an interrupt or the idle task.
                wpid = e.current[1]
                waker = None if e.in_irq or wpid == 0 else task(wpid, None)
                out.append(
                    {"type": "wake", "t_ns": t, "task": i, "cpu": cpu, "new": new, "waker": waker}
                )
                state[pid] = "runnable"
                ready[pid] = t
        elif e.name == "sched_migrate_task":
            i = task(f["pid"], f["comm"])
            kmig.append({"t_ns": t, "task": i, "from": f["orig_cpu"], "to": f["dest_cpu"]})
        elif e.name == "sched_process_fork":
            task(f["pid"], f["comm"])
            c = task(f["child_pid"], f["child_comm"])
            tasks[c]["parent"] = f["pid"]
            ready.setdefault(f["child_pid"], t)
        elif e.name == "sched_process_exit":
            # The task still runs until its last sched_switch (prev_state X
            # or Z), which is when its exit event is given; this time serves
            # only if the trace ends before that switch.
            pid = f["pid"]
            task(pid, f["comm"])
            if state.get(pid) != "dead":
                exiting[pid] = t
    for pid, t in exiting.items():
        out.append({"type": "exit", "t_ns": t, "task": index[pid]})
    for cpu, (pid, start) in sorted(running.items()):
        if end > start:
            out.append(
                {"type": "run", "t_ns": start, "end_ns": end, "cpu": cpu, "task": index[pid]}
            )
    if inferred or unknown:
        how = []
        if inferred:
            how.append(
                f"{inferred} counted from the latest moment they can have begun (the task's "
                "wake-up, fork or preemption, or the CPU's previous switch)"
            )
        if unknown:
            how.append(f"{unknown} left out (the task was not seen before)")
        warnings.append(
            f"{inferred + unknown} sched_switch event(s) switched out a task whose switch-in "
            "is not in the trace (events missing, or a trace trimmed to some tasks); of their "
            f"run intervals, {' and '.join(how)}"
        )
    if lost:
        warnings.append(
            f"events were lost on {len(lost)} occasion(s) (ring buffer full or overwritten): "
            "run intervals across the gap are left out; record with a larger buffer"
        )
    out.sort(key=lambda ev: ev["t_ns"])
    return KernelTraceData(
        parsed.source,
        parsed.format,
        out,
        tasks,
        t0,
        end,
        max(ncpus, 1),
        kmig,
        lost,
        dict(parsed.ignored),
        warnings,
    )


def load(path: str | Path) -> KernelTraceData:
    """Read and convert a trace file (``.gz`` and ``.xz`` allowed)."""
    return convert(parse(read_trace(path), str(path)))


# -- tables (simulated and real traces alike) -------------------------------------

Window = tuple[int, int] | None


def _trace_end(events: Sequence[Mapping[str, Any]]) -> int:
    return max((int(e.get("end_ns", e["t_ns"])) for e in events), default=0)


def run_intervals(events: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per run interval: ``task``, ``cpu``, ``start_ns``, ``end_ns``,
    ``dur_ms`` and ``end`` (``preempt``, ``block``, ``exit`` or ``trace_end``).
    Intervals of one task that touch on one CPU are merged first (the simulator
    splits a run where, for example, the clock changes)."""
    import pandas as pd
    runs = sorted(
        (
            (int(e["task"]), int(e["cpu"]), int(e["t_ns"]), int(e["end_ns"]))
            for e in events
            if e["type"] == "run"
        ),
        key=lambda r: (r[0], r[2]),
    )
    merged: list[list[int]] = []
    for task, cpu, start, end in runs:
        if merged and merged[-1][0] == task and merged[-1][1] == cpu and merged[-1][3] == start:
            merged[-1][3] = end
        else:
            merged.append([task, cpu, start, end])
    stops: dict[tuple[int, int], str] = {}
    for e in events:
        if e["type"] in ("block", "exit"):
            stops[(int(e["task"]), int(e["t_ns"]))] = str(e["type"])
    last = _trace_end(events)
    rows = []
    for task, cpu, start, end in merged:
        how = stops.get((task, end))
        if how is None:
            how = "trace_end" if end >= last else "preempt"
        rows.append((task, cpu, start, end, (end - start) / 1e6, how))
    return pd.DataFrame(rows, columns=["task", "cpu", "start_ns", "end_ns", "dur_ms", "end"])


def wakeups(events: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per wake-up that was followed by running: ``task``, ``t_ns``,
    ``cpu`` (where it was placed), ``new`` (a new task's first wake-up),
    ``run_ns`` (when it next started running) and ``latency_ms``. For a
    simulated run, each task's first wake-up is its ``new`` one. Where that
    start is not in the trace but inferred (:func:`convert`), the latency is
    not known: NaN."""
    import numpy as np
    import pandas as pd
    starts: dict[int, list[int]] = {}
    inferred: set[tuple[int, int]] = set()
    for e in events:
        if e["type"] == "run":
            starts.setdefault(int(e["task"]), []).append(int(e["t_ns"]))
            if e.get("start_inferred"):
                inferred.add((int(e["task"]), int(e["t_ns"])))
    for v in starts.values():
        v.sort()
    seen: set[int] = set()
    rows = []
    for e in sorted((e for e in events if e["type"] == "wake"), key=lambda e: int(e["t_ns"])):
        task, t = int(e["task"]), int(e["t_ns"])
        new = bool(e.get("new", task not in seen))
        seen.add(task)
        s = starts.get(task, [])
        k = int(np.searchsorted(s, t, side="left"))
        if k >= len(s):
            continue
        lat = math.nan if (task, s[k]) in inferred else (s[k] - t) / 1e6
        rows.append((task, t, int(e["cpu"]), new, s[k], lat))
    return pd.DataFrame(rows, columns=["task", "t_ns", "cpu", "new", "run_ns", "latency_ms"])


def slices(events: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The run intervals that ended by preemption (see :func:`run_intervals`)."""
    r = run_intervals(events)
    return r[r["end"] == "preempt"].reset_index(drop=True)


def migrations(events: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per migration: ``t_ns``, ``task``, ``from``, ``to``."""
    import pandas as pd
    rows = [
        (int(e["t_ns"]), int(e["task"]), int(e["from"]), int(e["to"]))
        for e in events
        if e["type"] == "migrate"
    ]
    rows.sort()
    return pd.DataFrame(rows, columns=["t_ns", "task", "from", "to"])


def _pct(values: np.ndarray, q: float) -> float:
    import numpy as np
    return float(np.percentile(values, q)) if len(values) else float("nan")


def task_summary(
    events: Sequence[Mapping[str, Any]],
    window: Window = None,
    tasks: Iterable[int] | None = None,
) -> pd.DataFrame:
    """Per task: ``cpu_s`` (CPU time), ``wakeups`` (not counting a new task's
    first), ``wakeup_latency_p50_ms``/``_p99_ms``/``_max_ms`` (over every
    wake-up, a new task's included), ``migrations``, ``slices`` and
    ``slice_mean_ms`` (latencies that are not known, :func:`wakeups`, are
    left out). ``window`` = ``(start_ns, end_ns)`` clips run intervals
    and keeps wake-ups, migrations and slices that begin inside it; ``tasks``
    limits the rows (default: every task that appears)."""
    import pandas as pd
    runs = run_intervals(events)
    wk = wakeups(events)
    mig = migrations(events)
    if window is not None:
        lo, hi = window
        runs = runs.assign(
            start_ns=runs["start_ns"].clip(lower=lo, upper=hi),
            end_ns=runs["end_ns"].clip(lower=lo, upper=hi),
        )
        wk = wk[(wk["t_ns"] >= lo) & (wk["t_ns"] < hi)]
        mig = mig[(mig["t_ns"] >= lo) & (mig["t_ns"] < hi)]
    ids = (
        sorted(set(tasks))
        if tasks is not None
        else sorted({int(e["task"]) for e in events if "task" in e})
    )
    rows = []
    for t in ids:
        r = runs[runs["task"] == t]
        cpu_ns = int((r["end_ns"] - r["start_ns"]).sum())
        sl = r[(r["end"] == "preempt") & (r["end_ns"] > r["start_ns"])]
        if window is not None:
            sl = sl[(sl["start_ns"] > window[0]) & (sl["end_ns"] < window[1])]
        w = wk[wk["task"] == t]
        lat = w["latency_ms"].dropna().to_numpy(dtype=float)
        rows.append(
            {
                "task": t,
                "cpu_s": cpu_ns / 1e9,
                "wakeups": int((~w["new"]).sum()),
                "wakeup_latency_p50_ms": _pct(lat, 50),
                "wakeup_latency_p99_ms": _pct(lat, 99),
                "wakeup_latency_max_ms": float(lat.max()) if len(lat) else float("nan"),
                "migrations": int((mig["task"] == t).sum()),
                "slices": len(sl),
                "slice_mean_ms": float(((sl["end_ns"] - sl["start_ns"]) / 1e6).mean())
                if len(sl)
                else float("nan"),
            }
        )
    cols = [
        "task",
        "cpu_s",
        "wakeups",
        "wakeup_latency_p50_ms",
        "wakeup_latency_p99_ms",
        "wakeup_latency_max_ms",
        "migrations",
        "slices",
        "slice_mean_ms",
    ]
    return pd.DataFrame(rows, columns=cols)


# -- hetsched trace import ----------------------------------------------------------


def import_trace(path: str | Path, out: str | Path) -> KernelTraceData:
    """Convert a kernel trace file into a folder: ``trace.jsonl`` (hetsched's
    trace events), ``trace.json`` (Perfetto), ``tasks.csv`` (per-task summary
    with pid and comm), ``runs.csv``, ``wakeups.csv``, ``slices.csv``,
    ``migrations.csv``, ``kernel_migrations.csv`` and ``summary.json`` (so
    :meth:`hetsched.Results.load` reads the folder)."""
    import pandas as pd

    from . import _core

    data = load(path)
    if not data.events:
        raise TraceError(
            f"{path}: no scheduler events in it (expected {', '.join(EVENTS)}; "
            "were they enabled when it was recorded?)"
        )
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    with (d / "trace.jsonl").open("w", encoding="utf-8") as f:
        for ev in data.events:
            f.write(json.dumps(ev, separators=(",", ":")) + "\n")
    doc = {"trace": data.events, "labels": data.labels()}
    (d / "trace.json").write_text(_core.chrome_trace(json.dumps(doc)), encoding="utf-8")
    summary = task_summary(data.events, tasks=range(len(data.tasks)))
    info = pd.DataFrame(data.tasks, columns=["pid", "comm", "parent"])
    info["parent"] = info["parent"].astype("Int64")
    info.insert(0, "task", range(len(data.tasks)))
    tasks_table = info.merge(summary, on="task")
    tasks_table = tasks_table.rename(columns={"cpu_s": "run_s", "comm": "program"})
    tasks_table.to_csv(d / "tasks.csv", index=False)
    run_intervals(data.events).to_csv(d / "runs.csv", index=False)
    wakeups(data.events).to_csv(d / "wakeups.csv", index=False)
    slices(data.events).to_csv(d / "slices.csv", index=False)
    migrations(data.events).to_csv(d / "migrations.csv", index=False)
    pd.DataFrame(data.kernel_migrations, columns=["t_ns", "task", "from", "to"]).to_csv(
        d / "kernel_migrations.csv", index=False
    )
    s = {
        "scenario": f"kernel trace {Path(path).name}",
        "scheduler": "linux (kernel trace)",
        "source": str(path),
        "format": data.format,
        "sim_end_s": data.end_ns / 1e9,
        "t0_kernel_s": data.t0_ns / 1e9,
        "cpus": data.ncpus,
        "tasks": len(data.tasks),
        "migrations": int(sum(1 for e in data.events if e["type"] == "migrate")),
        "context_switches": int(sum(1 for e in data.events if e["type"] == "run")),
        "lost_event_markers": len(data.lost),
        "ignored_events": data.ignored,
        "warnings": data.warnings,
    }
    (d / "summary.json").write_text(json.dumps(s, indent=2, sort_keys=True) + "\n", "utf-8")
    return data


# -- recording --------------------------------------------------------------------

_MOUNT_POINTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))


def find_tracefs() -> Path | None:
    """Where tracefs is mounted now (None if nowhere). Only ``/proc/mounts``
    is read: looking into ``/sys/kernel/debug/tracing`` would mount tracefs
    there by itself (an automount of debugfs) and leave it mounted."""
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "tracefs":
                return Path(parts[1].replace("\\040", " "))
    except OSError:
        for p in _MOUNT_POINTS:
            if (p / "trace").exists():
                return p
    return None


class KernelTrace:
    """Record the kernel's scheduler trace while a block runs::

        with KernelTrace() as kt:
            ...                      # the real experiment
        text = kt.text               # tracefs text, for parse()/load()

    On entry: mount tracefs if it is not mounted (and unmount it on exit),
    then in ``instance`` (a private trace buffer under ``instances/``, created
    and removed, so that other users of tracefs are not disturbed; ``None``
    uses the top-level buffer) enable exactly :data:`EVENTS`, set the per-CPU
    buffer to ``buffer_kb``, clear it and start tracing. On exit, even on an
    error, Ctrl-C or SIGTERM: stop, read the trace into :attr:`text`, and put
    back what was there before (``tracing_on``, the enabled events, the buffer
    size, the tracer, the trace clock). ``clock`` selects a trace clock
    (``mono`` gives timestamps on ``CLOCK_MONOTONIC``, as ``time.monotonic()``).
    ``root`` overrides where tracefs is (a directory with the same files, for
    tests). Without root it refuses with one line."""

    def __init__(
        self,
        *,
        buffer_kb: int = 16384,
        instance: str | None = "auto",
        root: str | Path | None = None,
        clock: str | None = None,
    ) -> None:
        if buffer_kb < 64:
            raise TraceError(f"buffer_kb: {buffer_kb} is too small; allowed: 64 or more")
        self.buffer_kb = buffer_kb
        self.clock = clock
        self.instance = f"hetsched-{os.getpid()}" if instance == "auto" else instance
        self.root = Path(root) if root is not None else None
        self.text = ""
        self._mounted: Path | None = None
        self._dir: Path | None = None
        self._made_instance = False
        self._saved: dict[str, Any] = {}
        self._old_term: Any = None

    # file helpers
    def _read(self, name: str) -> str:
        assert self._dir is not None
        return (self._dir / name).read_text()

    def _write(self, name: str, value: str) -> None:
        assert self._dir is not None
        with open(self._dir / name, "w") as f:
            f.write(value)

    def __enter__(self) -> KernelTrace:
        if self.root is None and os.geteuid() != 0:
            raise TraceError(
                "recording the kernel's scheduler trace needs root (tracefs); run as root, "
                "or record elsewhere and use 'hetsched trace import FILE'"
            )
        base = self.root or find_tracefs()
        if base is None:
            base = _MOUNT_POINTS[0]
            done = subprocess.run(
                ["mount", "-t", "tracefs", "nodev", str(base)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise TraceError(
                    f"tracefs is not mounted and mounting it on {base} failed: "
                    f"{done.stderr.strip() or done.returncode}"
                )
            self._mounted = base
        try:
            self._setup(base)
        except BaseException:
            self._restore()
            raise
        return self

    def _setup(self, base: Path) -> None:
        if self.instance is not None:
            inst = base / "instances" / self.instance
            if inst.exists():
                raise TraceError(f"{inst}: a trace instance of that name exists already")
            try:
                inst.mkdir()
            except OSError as e:
                raise TraceError(f"{inst}: cannot create a trace instance: {e.strerror}") from None
            self._made_instance = True
            self._dir = inst
        else:
            self._dir = base
        for ev in EVENTS:
            if not (self._dir / "events" / "sched" / ev / "enable").exists():
                raise TraceError(
                    f"{self._dir}/events/sched/{ev}: this kernel has no such trace event"
                )
        if self.instance is None:
            # Remember what the top-level buffer was doing, to put it back.
            self._saved["tracing_on"] = self._read("tracing_on").strip()
            self._saved["set_event"] = [
                ln.strip() for ln in self._read("set_event").splitlines() if ln.strip()
            ]
            self._saved["current_tracer"] = self._read("current_tracer").strip()
            cm = re.search(r"\[(\S+)\]", self._read("trace_clock")) if self.clock else None
            if cm:
                self._saved["trace_clock"] = cm.group(1)
        size = self._read("buffer_size_kb").strip()
        m = re.search(r"expanded:\s*(\d+)", size) or re.match(r"(\d+)", size)
        self._saved["buffer_size_kb"] = m.group(1) if m else None
        if threading_main():
            self._old_term = signal.getsignal(signal.SIGTERM)
            if self._old_term in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, _raise_stopped)
            else:
                self._old_term = None
        self._write("tracing_on", "0")
        if self.instance is None and self._saved["current_tracer"] != "nop":
            self._write("current_tracer", "nop")
        if self.clock is not None:
            offered = self._read("trace_clock").replace("[", " ").replace("]", " ").split()
            if self.clock not in offered:
                raise TraceError(
                    f"trace clock {self.clock!r} is not offered by this kernel; "
                    f"allowed: {', '.join(offered)}"
                )
            self._write("trace_clock", self.clock)
        self._write("set_event", "")  # every event off
        for ev in EVENTS:
            self._write(f"events/sched/{ev}/enable", "1")
        self._write("buffer_size_kb", str(self.buffer_kb))
        self._write("trace", "")  # clear
        self._write("tracing_on", "1")

    def __exit__(self, *exc: object) -> None:
        try:
            if self._dir is not None:
                with contextlib.suppress(OSError):
                    self._write("tracing_on", "0")
                with contextlib.suppress(OSError):
                    self.text = self._read("trace")
        finally:
            self._restore()

    def _restore(self) -> None:
        errors: list[str] = []

        def attempt(what: str, fn: Any) -> None:
            try:
                fn()
            except OSError as e:
                errors.append(f"{what}: {e.strerror or e}")

        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None
        if self._dir is not None and self._made_instance:
            d = self._dir

            # Gone already is fine (trace-cmd extract -B removes the instance).
            def remove() -> None:
                if d.exists():
                    d.rmdir()

            attempt("remove the trace instance", remove)
        elif self._dir is not None and self._saved:
            s = self._saved
            # One write: opening set_event for writing clears it, then every
            # event named is enabled again.
            saved = "".join(f"{ev}\n" for ev in s.get("set_event", []))
            attempt("set_event", lambda: self._write("set_event", saved))
            if s.get("buffer_size_kb"):
                attempt(
                    "buffer_size_kb", lambda: self._write("buffer_size_kb", s["buffer_size_kb"])
                )
            if s.get("current_tracer") and s["current_tracer"] != "nop":
                attempt(
                    "current_tracer", lambda: self._write("current_tracer", s["current_tracer"])
                )
            if s.get("trace_clock"):
                attempt("trace_clock", lambda: self._write("trace_clock", s["trace_clock"]))
            if "tracing_on" in s:
                attempt("tracing_on", lambda: self._write("tracing_on", s["tracing_on"]))
        self._dir = None
        self._saved = {}
        if self._mounted is not None:
            m = self._mounted
            self._mounted = None
            subprocess.run(["umount", str(m)], capture_output=True, check=False)
        if errors:
            raise TraceError("could not restore tracefs: " + "; ".join(errors))


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


# -- command line -------------------------------------------------------------------


def register(sub: Any) -> None:
    """Add ``trace`` and ``trace import`` to the top-level subparsers ``sub``."""
    import sys

    tr = sub.add_parser("trace", help="the kernel's own scheduler trace")
    tsub = tr.add_subparsers(title="trace commands", metavar="WHAT")
    tr.set_defaults(handler=lambda a: (tr.print_help(sys.stderr), 2)[1])
    im = tsub.add_parser(
        "import",
        help="convert tracefs or trace-cmd report text into hetsched trace events and tables",
    )
    im.add_argument("file", type=Path, help="tracefs 'trace' text or 'trace-cmd report' output")
    im.add_argument(
        "--out", type=Path, metavar="DIR", help="results folder (default: FILE's name + .import)"
    )
    im.set_defaults(handler=_cmd_import)


def _cmd_import(args: Any) -> int:
    import sys

    out = args.out if args.out is not None else args.file.with_name(args.file.name + ".import")
    try:
        data = import_trace(args.file, out)
    except TraceError as e:
        print(f"hetsched: error: {e}", file=sys.stderr)
        return 1
    n_run = sum(1 for e in data.events if e["type"] == "run")
    print(
        f"{data.source}: {data.format} text, {data.ncpus} CPUs, {len(data.tasks)} tasks, "
        f"{n_run} run intervals over {data.end_ns / 1e9:.3f} s"
    )
    for w in data.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"written to {out}/", file=sys.stderr)
    return 0
