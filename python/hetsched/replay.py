"""A real scheduler trace replayed as a workload.

:func:`from_text` turns the text of a kernel scheduler trace (what
:mod:`hetsched.tracefs` reads: tracefs ``trace`` text or ``trace-cmd
report`` text) into one ``phases`` program per traced task (pid), so that the
same activity can be run again under any scheduler and on any machine:

=========================================  ===================================================
in the trace                               in the task's program
=========================================  ===================================================
a run burst (the CPU time between two      ``{ compute_ms = w }``: reference work, the burst's
blocking points, preemptions included)     time on each CPU × that CPU's capacity / 1024 × its
                                           frequency / its highest frequency (below)
a sleep ended by a timer, an interrupt,    ``{ sleep_ms = d }``: the traced length, from the
the idle task or a task that is not        block to the wake-up
replayed
a sleep ended by task A (A running when    ``{ pend = "wake-B-k" }`` in B's phases (the k-th
the kernel wrote B's ``sched_wakeup``)     such wake-up of B) and ``{ post = "wake-B-k" }`` in
                                           A's, at the point of A's work where it woke B
``sched_process_fork`` by a replayed task  ``{ fork = "child" }`` in the parent's phases at
                                           that point; the child's program is ``forked = true``
a task's priority (``prio`` 100-139)       ``nice`` = prio - 120 (the value it ran at longest)
its first ``sched_wakeup_new``, or its     ``start_ms`` (programs not started by a fork)
first appearance
=========================================  ===================================================

Posts and pends are counting semaphores: a post that comes before its
pend is kept, so no wake-up is lost whatever the simulated timing.

Frequency. Reference work is work at capacity 1024 and the highest
frequency. With ``cpu_frequency`` events (``power:cpu_frequency``, ``state``
in kHz) in the trace, a CPU runs at the last frequency reported for it; before
a CPU's first such event, and for every CPU of a trace without them, it is
assumed at its highest frequency (the machine's highest P-state of its type),
and :attr:`Replay.notes` says so.

Which tasks are replayed (:func:`select`): the idle task (pid 0, ``swapper``)
is never a task. Without ``pids`` or ``comm``, every task but the kernel's
threads and the tracer; a kernel thread is a task forked by ``kthreadd``
(pid 2) or one of its children in the trace, or whose name is one Linux gives
its threads (:data:`KERNEL_THREAD`); the tracer is a task named as a tracing
tool (:data:`TRACER`). With ``pids``, those tasks and every task they fork in
the trace; with ``comm``, the tasks whose name matches the regular expression
(any name the task had in the trace) and every task they fork. The others
are dropped (:attr:`Replay.dropped`, with their CPU time and why); a wake-up
by a dropped task becomes a ``sleep_ms`` of its traced length.

What the replay leaves out: affinity (``sched_setaffinity`` writes no
scheduler event), real-time and deadline classes (a task of ``prio`` below
100 is replayed as a fair task of nice 0, with a note), and whatever a task
did after the trace ended: sleeps and waits at the end of a task's trace are
dropped (they would end after the trace does).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import tracefs

__all__ = [
    "KERNEL_THREAD",
    "TRACER",
    "CpuSpeed",
    "DroppedTask",
    "Replay",
    "ReplayError",
    "ReplayTask",
    "compare",
    "cpu_speeds",
    "from_text",
    "load",
    "select",
]

#: Names Linux gives its own threads (``kthread_create`` names, as in
#: ``ps``): a task named so is a kernel thread even when its fork by
#: ``kthreadd`` is not in the trace.
KERNEL_THREAD = re.compile(
    r"^(?:kthreadd|kworker/.*|ksoftirqd/.*|migration/.*|rcu_.*|rcuo[gps]/.*|rcub/.*|"
    r"cpuhp/.*|idle_inject/.*|watchdog/.*|watchdogd|irq/.*|kcompactd.*|kswapd.*|"
    r"khugepaged|ksmd|kauditd|khungtaskd|oom_reaper|kdevtmpfs|kthrotld|kblockd|"
    r"writeback|kintegrityd|jbd2/.*|xfsaild/.*|scsi_eh_.*|napi/.*|psimon|hwrng|"
    r"pr/.*|kstrp|zswap.*|ipv6_addrconf|mm_percpu_wq|netns|inet_frag_wq|"
    r"kmpath_.*|ext4-rsv-conver|kswapd\d+|md|edac-poller|devfreq_wq|"
    r"card\d+-crtc\d+|ttm|nvme-.*|blkcg_punt_bio|tpm_dev_wq|ata_sff|"
    r"charger_manager|kaluad|kmpathd|acpi_thermal_pm|cryptd|"
    r"ecryptfs-kthread|khvcd|vfio-irqfd-clea|kvm-.*|kvm_.*|kdamond\.\d+)$"
)
#: Names of tracing tools (their own activity is not the experiment's).
TRACER = re.compile(r"^(?:trace-cmd|perf|bpftrace|lttng.*|sysdig|ftrace.*)$")
KTHREADD_PID = 2


class ReplayError(tracefs.TraceError):
    """A trace that cannot be replayed; the message says why."""


@dataclass(frozen=True)
class CpuSpeed:
    """A CPU of the machine the trace was recorded on: its ``capacity``
    (1024 = reference) and its highest frequency, kHz."""

    capacity: float
    max_khz: float


@dataclass
class ReplayTask:
    """A replayed task: its ``pid``, last ``comm``, the ``program`` name,
    what the trace shows of it (``cpu_s``, ``wakeups`` as
    :func:`tracefs.task_summary` counts them) and its reference work."""

    pid: int
    comm: str
    program: str
    cpu_s: float
    wakeups: int
    work_ms: float
    forked: bool


@dataclass
class DroppedTask:
    """A task left out: its ``pid``, ``comm``, CPU time in the trace and why."""

    pid: int
    comm: str
    cpu_s: float
    reason: str


@dataclass
class Replay:
    """A trace turned into programs (:func:`from_text`)."""

    source: str
    programs: list[dict[str, Any]]
    tasks: list[ReplayTask]
    dropped: list[DroppedTask]
    #: Length of the trace, s (first to last event).
    span_s: float
    notes: list[str] = field(default_factory=list)

    def scenario(
        self,
        machine: str | Mapping[str, Any],
        *,
        scheduler: str = "eevdf",
        name: str | None = None,
        seed: int = 1,
        duration_s: float | None = None,
    ) -> dict[str, Any]:
        """A complete scenario (a dict of the scenario schema) running the
        programs on ``machine`` (a preset name or a machine table). The run
        ends when every program has ended; ``duration_s`` (default ten times
        the trace's length plus 1 s) only bounds it."""
        mach = {"preset": machine} if isinstance(machine, str) else dict(machine)
        duration = duration_s if duration_s is not None else _round(10 * self.span_s + 1.0)
        return {
            "name": name or _safe(Path(self.source).name.split(".")[0]) or "trace",
            "description": f"replay of the scheduler trace {self.source}: {len(self.tasks)} "
            f"task(s), {self.span_s:.3f} s traced",
            "seed": seed,
            "duration_s": duration,
            "scheduler": scheduler,
            "machine": mach,
            "workload": {"programs": [dict(p) for p in self.programs]},
        }

    def dropped_cpu_s(self) -> float:
        return sum(d.cpu_s for d in self.dropped)


# -- machine ------------------------------------------------------------------------


def cpu_speeds(machine: str | Mapping[str, Any]) -> list[CpuSpeed]:
    """Each CPU of ``machine`` (a preset name or a machine table), in CPU
    order: its capacity and the highest frequency of its type's P-states."""
    from . import _core, api

    mach = {"preset": machine} if isinstance(machine, str) else dict(machine)
    probe = {
        "name": "machine-probe",
        "duration_s": 0.001,
        "machine": mach,
        "workload": {"programs": [{"name": "probe", "kind": "sequential", "work_ms": 0.001}]},
    }
    try:
        scen = api.loads(json.dumps(probe), fmt="json", source="the machine")
    except _core.ScenarioError as e:
        raise ReplayError(f"machine: {e}") from None
    types = json.loads(scen.to_json())["machine"]["types"]
    res = api.run(scen)
    out = []
    for t in res.cpus.sort_values("cpu")["type"]:
        ty = types[t]
        mhz = max((float(p["mhz"]) for p in ty.get("pstates") or []), default=0.0)
        out.append(CpuSpeed(float(ty.get("capacity", 1024)), mhz * 1000.0))
    return out


# -- reading what tracefs.convert does not keep -----------------------------------

_FREQ = re.compile(r"state=(?P<khz>\d+)\s+cpu_id=(?P<cpu>\d+)")
_SWITCH_PRIO = (
    re.compile(
        r"prev_pid=(?P<pp>-?\d+) prev_prio=(?P<ppr>-?\d+) .*next_pid=(?P<np>-?\d+) "
        r"next_prio=(?P<npr>-?\d+)"
    ),
    re.compile(r":(?P<pp>-?\d+) \[(?P<ppr>-?\d+)\] \S+ ==> .*:(?P<np>-?\d+) \[(?P<npr>-?\d+)\]"),
)


def _frequencies(text: str, t0: int) -> dict[int, list[tuple[int, float]]]:
    """``cpu_frequency`` events per CPU: (trace time ns, kHz), in time order."""
    out: dict[int, list[tuple[int, float]]] = {}
    if "cpu_frequency:" not in text:
        return out
    for line in text.splitlines():
        if "cpu_frequency:" not in line:
            continue
        m = tracefs._EVENT_LINE.match(line)
        if m is None or m["event"] != "cpu_frequency":
            continue
        f = _FREQ.search(m["body"])
        if f is None:
            continue
        out.setdefault(int(f["cpu"]), []).append((tracefs._ns(m["ts"]) - t0, float(f["khz"])))
    for v in out.values():
        v.sort()
    return out


def _switch_prios(
    parsed: tracefs.ParsedTrace, lines: Sequence[str], t0: int
) -> dict[tuple[int, int], int]:
    """(pid, trace time ns) → the task's prio at a ``sched_switch`` that
    switched it out or in at that moment."""
    out: dict[tuple[int, int], int] = {}
    for e in parsed.events:
        if e.name != "sched_switch" or not 0 < e.lineno <= len(lines):
            continue
        line = lines[e.lineno - 1]
        for rx in _SWITCH_PRIO:
            m = rx.search(line)
            if m is not None:
                t = e.t_ns - t0
                out[(int(m["pp"]), t)] = int(m["ppr"])
                out.setdefault((int(m["np"]), t), int(m["npr"]))
                break
    return out


# -- selection ----------------------------------------------------------------------


def select(
    data: tracefs.KernelTraceData,
    *,
    pids: Iterable[int] | None = None,
    comm: str | None = None,
    comms: Mapping[int, set[str]] | None = None,
) -> tuple[set[int], dict[int, str]]:
    """The pids to replay and, for every other task, why it is dropped (the
    rule of the module doc). ``comms`` maps a pid to every name it had
    (default: its last one)."""
    names = {t["pid"]: {t["comm"]} for t in data.tasks}
    if comms is not None:
        for pid, c in comms.items():
            names.setdefault(pid, set()).update(c)
    known = {t["pid"] for t in data.tasks}
    dropped: dict[int, str] = {}
    if pids is not None:
        want = sorted(set(pids))
        missing = [p for p in want if p not in known]
        if missing:
            raise ReplayError(
                f"--pids: {', '.join(map(str, missing))} not in the trace ({_some_tasks(data)})"
            )
        keep = data.descendants(want)
        for t in data.tasks:
            if t["pid"] not in keep:
                dropped[t["pid"]] = "not one of --pids or forked from them"
        return keep, dropped
    if comm is not None:
        try:
            rx = re.compile(comm)
        except re.error as e:
            raise ReplayError(f"--comm: {comm!r} is not a regular expression: {e}") from None
        roots = [p for p, ns in names.items() if any(rx.search(n) for n in ns)]
        if not roots:
            raise ReplayError(f"--comm: no task's name matches {comm!r} ({_some_tasks(data)})")
        keep = data.descendants(roots)
        for t in data.tasks:
            if t["pid"] not in keep:
                dropped[t["pid"]] = "its name does not match --comm and no match forked it"
        return keep, dropped
    kernel = data.descendants([KTHREADD_PID])
    keep = set()
    for t in data.tasks:
        pid = t["pid"]
        ns = names.get(pid, {t["comm"]})
        if pid in kernel or any(KERNEL_THREAD.match(n) for n in ns):
            dropped[pid] = "kernel thread"
        elif any(TRACER.match(n) for n in ns):
            dropped[pid] = "the tracer"
        else:
            keep.add(pid)
    return keep, dropped


def _some_tasks(data: tracefs.KernelTraceData) -> str:
    shown = [f"{t['comm']} ({t['pid']})" for t in data.tasks[:12]]
    more = len(data.tasks) - len(shown)
    tail = f" and {more} more" if more > 0 else ""
    return f"tasks in the trace: {', '.join(shown)}{tail}" if shown else "the trace has no tasks"


# -- the conversion -----------------------------------------------------------------


def _round(x: float) -> float:
    return float(f"{x:.9g}")


def _ms(ns: float) -> float:
    """ns to ms, rounded to the ns."""
    return round(ns / 1e6, 6)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")


class _Speed:
    """Work per ns on each CPU at each moment (module doc, "Frequency")."""

    def __init__(
        self, cpus: Sequence[CpuSpeed], freqs: Mapping[int, list[tuple[int, float]]]
    ) -> None:
        self.cpus = cpus
        self.freqs = freqs
        self.assumed_max: set[int] = set()

    def work(self, cpu: int, a: int, b: int) -> float:
        """Reference ns of work done on ``cpu`` from ``a`` to ``b`` (trace ns)."""
        if b <= a:
            return 0.0
        c = self.cpus[cpu]
        cap = c.capacity / 1024.0
        fs = self.freqs.get(cpu)
        if not fs or c.max_khz <= 0:
            self.assumed_max.add(cpu)
            return (b - a) * cap
        total = 0.0
        t = a
        # The frequency in force at t: the last change at or before t.
        k = _last_at_or_before(fs, t)
        while t < b:
            nxt = fs[k + 1][0] if k + 1 < len(fs) else b
            seg_end = min(b, max(nxt, t))
            if k < 0:
                self.assumed_max.add(cpu)
                ratio = 1.0
            else:
                ratio = fs[k][1] / c.max_khz
            total += (seg_end - t) * cap * ratio
            t = seg_end
            k += 1
        return total


def _last_at_or_before(fs: Sequence[tuple[int, float]], t: int) -> int:
    lo, hi = 0, len(fs)
    while lo < hi:
        mid = (lo + hi) // 2
        if fs[mid][0] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def from_text(
    text: str,
    cpus: Sequence[CpuSpeed],
    *,
    source: str = "<trace>",
    pids: Iterable[int] | None = None,
    comm: str | None = None,
) -> Replay:
    """Convert a trace's text into programs (module doc); ``cpus`` describes
    the machine the trace was recorded on (:func:`cpu_speeds`). Pure: reads
    nothing but its arguments."""
    parsed = tracefs.parse(text, source)
    data = tracefs.convert(parsed)
    if not data.events:
        raise ReplayError(
            f"{source}: no scheduler events in it (expected {', '.join(tracefs.EVENTS)}; "
            "were they enabled when it was recorded?)"
        )
    if data.ncpus > len(cpus):
        raise ReplayError(
            f"{source}: the trace has events of CPU {data.ncpus - 1} but the machine has "
            f"{len(cpus)} CPU(s) (0-{len(cpus) - 1}); give the machine the trace was recorded "
            "on (--traced-on FILE, e.g. from `hetsched machine from-sysfs` there)"
        )
    lines = text.splitlines()
    t0 = data.t0_ns
    comms: dict[int, set[str]] = {}
    forks: list[tuple[int, int, int]] = []  # (t, parent pid, child pid)
    for e in parsed.events:
        f = e.fields
        if e.name == "sched_switch":
            comms.setdefault(f["prev_pid"], set()).add(f["prev_comm"])
            comms.setdefault(f["next_pid"], set()).add(f["next_comm"])
        elif e.name == "sched_process_fork":
            forks.append((e.t_ns - t0, f["pid"], f["child_pid"]))
            comms.setdefault(f["child_pid"], set()).add(f["child_comm"])
        elif "comm" in f and "pid" in f:
            comms.setdefault(f["pid"], set()).add(f["comm"])
    keep, why = select(data, pids=pids, comm=comm, comms=comms)
    return _convert(data, parsed, lines, cpus, keep, why, forks, _frequencies(text, t0))


def traced_cpu_and_wakeups(
    events: Sequence[Mapping[str, Any]],
) -> tuple[dict[int, float], dict[int, int]]:
    """Per task of a converted trace: CPU time, s, and wake-ups as
    :func:`tracefs.task_summary` counts them (wake-ups of a sleeping task
    that were followed by running; a new task's first is not one)."""
    busy: dict[int, int] = {}
    for e in events:
        if e["type"] == "run":
            i = int(e["task"])
            busy[i] = busy.get(i, 0) + int(e["end_ns"]) - int(e["t_ns"])
    wk = tracefs.wakeups(events)
    counts = wk[~wk["new"]].groupby("task").size()
    return (
        {i: ns / 1e9 for i, ns in busy.items()},
        {int(i): int(n) for i, n in counts.items()},
    )


def _convert(
    data: tracefs.KernelTraceData,
    parsed: tracefs.ParsedTrace,
    lines: Sequence[str],
    cpus: Sequence[CpuSpeed],
    keep: set[int],
    why: Mapping[int, str],
    forks: Sequence[tuple[int, int, int]],
    freqs: Mapping[int, list[tuple[int, float]]],
) -> Replay:
    tasks = data.tasks
    pid_of = [t["pid"] for t in tasks]
    cpu_s, wakes = traced_cpu_and_wakeups(data.events)
    prog = {i: f"{_safe(t['comm']) or 'task'}-{t['pid']}" for i, t in enumerate(tasks)}
    kept = [i for i, t in enumerate(tasks) if t["pid"] in keep]
    kept_set = set(kept)
    notes: list[str] = [f"the trace: {w}" for w in data.warnings]

    # Per task: its run intervals and its points in time.
    runs: dict[int, list[tuple[int, int, int]]] = {i: [] for i in kept}
    # (t, order, kind, value): order puts a post/fork before a block at the same time.
    points: dict[int, list[tuple[int, int, str, Any]]] = {i: [] for i in kept}
    first_seen: dict[int, int] = {}
    for ev in data.events:
        i = ev.get("task")
        if i is None or i not in kept_set:
            continue
        t = int(ev["t_ns"])
        first_seen.setdefault(i, t)
        kind = ev["type"]
        if kind == "run":
            runs[i].append((t, int(ev["end_ns"]), int(ev["cpu"])))
        elif kind == "block":
            points[i].append((t, 2, "block", None))
        elif kind == "exit":
            points[i].append((t, 3, "exit", None))
        elif kind == "wake":
            if ev.get("new"):
                points[i].append((t, 0, "new", None))
                continue
            waker = ev.get("waker")
            if waker is not None and waker in kept_set and waker != i:
                points[i].append((t, 1, "pend", waker))
            else:
                points[i].append((t, 1, "sleep", waker))
    # Name the semaphores, and give each waker its post.
    counters: dict[int, int] = {}
    for i in kept:
        named = []
        for t, order, kind, value in points[i]:
            if kind == "pend":
                counters[i] = counters.get(i, 0) + 1
                sem = f"wake-{prog[i]}-{counters[i]}"
                points[value].append((t, 0, "post", sem))
                named.append((t, order, "pend", sem))
            else:
                named.append((t, order, kind, value))
        points[i] = named
    # Forks by replayed parents of replayed children.
    forked: set[int] = set()
    index = {p: i for i, p in enumerate(pid_of)}
    for t, ppid, cpid in forks:
        pi, ci = index.get(ppid), index.get(cpid)
        if pi in kept_set and ci in kept_set and pi is not None and ci is not None:
            points[pi].append((t, 0, "fork", prog[ci]))
            forked.add(ci)
            first_seen[ci] = min(first_seen.get(ci, t), t)
    prios = _switch_prios(parsed, lines, data.t0_ns)
    seen: dict[int, dict[int, int]] = {}
    for (pid, _t), pr in prios.items():
        seen.setdefault(pid, {})
        seen[pid][pr] = seen[pid].get(pr, 0) + 1
    speed = _Speed(cpus, freqs)
    rt_tasks: list[str] = []
    programs: list[dict[str, Any]] = []
    out_tasks: list[ReplayTask] = []
    for i in kept:
        pts = sorted(points[i], key=lambda p: (p[0], p[1]))
        rs = sorted(runs[i])
        start = first_seen.get(i, 0)
        # A task whose trace begins with a wake-up (not its first) was asleep
        # when the trace began: it starts at the trace's start, asleep.
        first_pt = pts[0] if pts else None
        if (
            i not in forked
            and first_pt is not None
            and first_pt[2] in ("sleep", "pend")
            and (not rs or rs[0][0] >= first_pt[0])
        ):
            start = 0
        phases, work = _phases(pts, rs, start, data.end_ns, speed)
        if not phases:
            notes.append(
                f"{prog[i]}: nothing to replay (no CPU time, no wake-up or fork by it in "
                "the trace); left out"
            )
            continue
        nice, is_rt = _nice(pid_of[i], rs, prios, seen.get(pid_of[i], {}))
        if is_rt:
            rt_tasks.append(prog[i])
        p: dict[str, Any] = {"name": prog[i], "kind": "phases", "nice": nice}
        if i in forked:
            p["forked"] = True
        else:
            p["start_ms"] = _ms(start)
        p["phases"] = phases
        programs.append(p)
        out_tasks.append(
            ReplayTask(
                pid_of[i],
                tasks[i]["comm"],
                prog[i],
                float(cpu_s.get(i, 0.0)),
                int(wakes.get(i, 0)),
                _round(work / 1e6),
                i in forked,
            )
        )
    # A fork of a program left out (nothing to replay) is dropped too.
    names = {p["name"] for p in programs}
    for p in programs:
        p["phases"] = [ph for ph in p["phases"] if "fork" not in ph or ph["fork"] in names]
    dropped = [
        DroppedTask(pid_of[i], tasks[i]["comm"], float(cpu_s.get(i, 0.0)), why[pid_of[i]])
        for i in range(len(tasks))
        if pid_of[i] not in keep
    ]
    if not freqs:
        notes.append(
            "the trace has no cpu_frequency events: every CPU is assumed to have run at its "
            "highest frequency throughout"
        )
    elif speed.assumed_max:
        cs = ", ".join(map(str, sorted(speed.assumed_max)))
        notes.append(
            f"CPU(s) {cs}: assumed at their highest frequency where the trace reports none yet"
        )
    if rt_tasks:
        notes.append(
            f"{len(rt_tasks)} task(s) ran in a real-time class ({', '.join(rt_tasks[:5])}"
            f"{' ...' if len(rt_tasks) > 5 else ''}); replayed as fair tasks of nice 0"
        )
    notes.append("affinity is not in a scheduler trace: replayed tasks may run on any CPU")
    return Replay(data.source, programs, out_tasks, dropped, data.end_ns / 1e9, notes)


def _phases(
    pts: Sequence[tuple[int, int, str, Any]],
    runs: Sequence[tuple[int, int, int]],
    start: int,
    end: int,
    speed: _Speed,
) -> tuple[list[dict[str, Any]], float]:
    """One task's phases from its points and run intervals (trace ns), and
    its total reference work (ns)."""
    phases: list[dict[str, Any]] = []
    pending = 0.0
    total = 0.0
    k = 0  # next run interval
    cursor = start
    blocked_at: int | None = start

    def work_until(t: int) -> None:
        nonlocal pending, total, k, cursor
        while k < len(runs) and runs[k][0] < t:
            s, e, cpu = runs[k]
            a, b = max(s, cursor), min(e, t)
            if b > a:
                w = speed.work(cpu, a, b)
                pending += w
                total += w
            if e <= t:
                k += 1
            else:
                break
        cursor = max(cursor, t)

    def flush() -> None:
        nonlocal pending
        ms = _ms(pending)
        if ms > 0:
            if phases and "compute_ms" in phases[-1]:
                phases[-1]["compute_ms"] = round(phases[-1]["compute_ms"] + ms, 6)
            else:
                phases.append({"compute_ms": ms})
        pending = 0.0

    for t, _order, kind, value in pts:
        if kind == "exit":
            work_until(t)
            break
        if kind == "new":
            blocked_at = None
            cursor = max(cursor, t)
            continue
        work_until(t)
        flush()
        if kind == "post":
            phases.append({"post": value})
        elif kind == "fork":
            phases.append({"fork": value})
        elif kind == "block":
            blocked_at = t
        elif kind == "pend":
            phases.append({"pend": value})
            blocked_at = None
        elif kind == "sleep":
            since = blocked_at if blocked_at is not None else t
            # A sleep shorter than the ns the trace resolves is still a wake-up.
            phases.append({"sleep_ms": max(_ms(t - since), 1e-6)})
            blocked_at = None
    else:
        work_until(end + 1)
    flush()
    # Waits at the end would end after the trace does: nothing of them is traced.
    while phases and ("sleep_ms" in phases[-1] or "pend" in phases[-1]):
        phases.pop()
    return phases, total


def _nice(
    pid: int,
    runs: Sequence[tuple[int, int, int]],
    prios: Mapping[tuple[int, int], int],
    seen: Mapping[int, int],
) -> tuple[int, bool]:
    """The nice value the task ran at longest (prio at the switch that ended,
    else began, each run interval; without any, the prio its switches show
    most often), and whether it ran in a real-time class."""
    spent: dict[int, int] = {}
    for s, e, _cpu in runs:
        p = prios.get((pid, e), prios.get((pid, s)))
        if p is not None:
            spent[p] = spent.get(p, 0) + (e - s)
    if not spent:
        spent = dict(seen)
    if not spent:
        return 0, False
    prio = max(sorted(spent), key=lambda p: spent[p])
    if prio < 100:
        return 0, True
    return max(-20, min(19, prio - 120)), False


def load(
    path: str | Path,
    machine: str | Mapping[str, Any],
    *,
    pids: Iterable[int] | None = None,
    comm: str | None = None,
) -> Replay:
    """Read a trace file (``.gz``/``.xz`` too) recorded on ``machine`` and
    convert it (:func:`from_text`)."""
    text = tracefs.read_trace(path)
    return from_text(text, cpu_speeds(machine), source=str(path), pids=pids, comm=comm)


# -- checking a replay ----------------------------------------------------------------


def sim_wakeups(events: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """Per task of a simulated run (its events in the order the simulator
    wrote them), its wake-ups from a block (a ``wake`` event that follows a
    ``block`` of the task): what the trace's
    ``task_summary`` counts as wake-ups (a new task's first is not one)."""
    blocked: dict[int, bool] = {}
    out: dict[int, int] = {}
    # The simulator writes blocks and wake-ups in the order they happen (a
    # task woken and blocking again at one instant has both at one time).
    for e in events:
        if e.get("type") not in ("block", "wake"):
            continue
        i = int(e["task"])
        if e["type"] == "block":
            blocked[i] = True
        elif blocked.get(i):
            out[i] = out.get(i, 0) + 1
            blocked[i] = False
    return out


def compare(replay: Replay, results: Any) -> list[dict[str, Any]]:
    """Per replayed task: CPU time and wake-ups in the trace and in a
    simulated run of :meth:`Replay.scenario` (``results`` of
    ``hetsched.run(..., trace=True)``), matched by program name.

    ``early_posts`` counts the task's ``pend`` phases that did not block in
    the simulated run: its waker posted before the task got there (the
    simulated timing put the two in the other order than the trace), so
    that wake-up was kept but woke nobody. ``trace_wakeups`` = ``sim_wakeups``
    + ``early_posts`` whenever every wake-up of the trace was replayed."""
    events = results.trace
    labels = results.labels["tasks"]
    by_name: dict[str, list[int]] = {}
    for i, (name, _thread) in enumerate(labels):
        by_name.setdefault(str(name), []).append(i)
    busy: dict[int, int] = {}
    pend_blocks: dict[int, int] = {}
    for e in events:
        if e.get("type") == "run":
            busy[int(e["task"])] = busy.get(int(e["task"]), 0) + int(e["end_ns"]) - int(e["t_ns"])
        elif e.get("type") == "block" and e.get("reason") == "pend":
            pend_blocks[int(e["task"])] = pend_blocks.get(int(e["task"]), 0) + 1
    pends = {p["name"]: sum(1 for ph in p["phases"] if "pend" in ph) for p in replay.programs}
    woke = sim_wakeups(events)
    rows = []
    for t in replay.tasks:
        ids = by_name.get(t.program, [])
        rows.append(
            {
                "program": t.program,
                "pid": t.pid,
                "trace_cpu_s": t.cpu_s,
                "sim_cpu_s": sum(busy.get(i, 0) for i in ids) / 1e9,
                "trace_wakeups": t.wakeups,
                "sim_wakeups": sum(woke.get(i, 0) for i in ids),
                "early_posts": pends.get(t.program, 0) - sum(pend_blocks.get(i, 0) for i in ids),
            }
        )
    return rows


def cpu_time_error(row: Mapping[str, Any]) -> float:
    """Relative difference of simulated to traced CPU time (0 when both are 0)."""
    a, b = float(row["trace_cpu_s"]), float(row["sim_cpu_s"])
    if a == 0.0:
        return 0.0 if b == 0.0 else math.inf
    return abs(b - a) / a


# -- command line -------------------------------------------------------------------


def scenario_toml(scenario: Mapping[str, Any]) -> str:
    """A scenario dict (:meth:`Replay.scenario`) as TOML text, one phase a line."""
    from . import rtapp

    programs = scenario.get("workload", {}).get("programs", [])
    head = rtapp.scenario_toml({k: v for k, v in scenario.items() if k != "workload"})
    lines = [head.rstrip("\n")]
    for prog in programs:
        lines += ["", "[[workload.programs]]"]
        for k, v in prog.items():
            if k == "phases":
                lines.append("phases = [")
                lines += [f"  {rtapp._value(ph)}," for ph in v]
                lines.append("]")
            else:
                lines.append(f"{rtapp._key(k)} = {rtapp._value(v)}")
    return "\n".join(lines) + "\n"


def _cpu_text(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s < 1.0 else f"{s:.3f} s"


def command(args: Any) -> int:
    """``hetsched workload from-trace`` (arguments as ``cli.py`` declares them)."""
    import sys

    from . import api, rtapp, sysfs

    def machine_of(arg: str | None) -> tuple[str | dict[str, Any], str]:
        if arg is None:
            here = sysfs.machine_from_sysfs("/")
            for w in here.warnings:
                print(f"note: this machine's /sys: {w}", file=sys.stderr)
            return here.machine, "this machine (read from /sys)"
        if Path(arg).suffix.lower() in (".toml", ".json") or Path(arg).is_file():
            return rtapp.load_machine_file(arg), arg
        return arg, f"the preset {arg}"

    machine, where = machine_of(args.machine)
    traced, traced_where = (
        machine_of(args.traced_on) if args.traced_on is not None else (machine, where)
    )
    try:
        rp = load(args.file, traced, pids=args.pids, comm=args.comm)
    except tracefs.TraceError as e:
        print(f"hetsched: error: {e}", file=sys.stderr)
        return 1
    scenario = rp.scenario(machine, scheduler=args.scheduler)
    text = (
        f"# Replay of the scheduler trace {args.file} (`hetsched workload from-trace`):\n"
        f"# one program per traced task; its work is reference work of {traced_where}, "
        f"the machine it was recorded on;\n# the scenario's machine is {where}.\n"
        + "".join(f"# note: {n}\n" for n in rp.notes)
        + scenario_toml(scenario)
    )
    api.loads(text, source=f"replay of {args.file}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    cpu = sum(t.cpu_s for t in rp.tasks)
    print(
        f"{args.file}: replayed {len(rp.tasks)} task(s) as programs ({_cpu_text(cpu)} of CPU "
        f"time) over {rp.span_s:.3f} s traced",
        file=sys.stderr,
    )
    if rp.dropped:
        why: dict[str, int] = {}
        for d in rp.dropped:
            why[d.reason] = why.get(d.reason, 0) + 1
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(why.items(), key=lambda x: -x[1]))
        print(
            f"dropped {len(rp.dropped)} task(s) ({_cpu_text(rp.dropped_cpu_s())} of CPU "
            f"time): {reasons}; the idle task (pid 0) is never replayed",
            file=sys.stderr,
        )
    for n in rp.notes:
        print(f"note: {n}", file=sys.stderr)
    return 0
