"""A run's trace in the formats other tools read: Perfetto JSON and ftrace text.

Both are built from the typed trace events of a traced run
(:attr:`hetsched.Results.trace`, ``trace.jsonl``):

- :func:`perfetto` — the Chrome trace-event JSON that https://ui.perfetto.dev
  and Perfetto's trace processor import (``trace.json``). Process
  ``machine`` has one track per CPU with a slice per run interval, markers for
  migrations, ISA faults and reconfigurations; process ``counters`` has the
  frequency of each frequency domain, the estimated power and each CPU's
  utilisation as counter tracks; each program is a process with one track per
  thread showing its states (running on a CPU, runnable, blocked with the
  reason), and flow arrows go from a waker to the thread it woke.
- :func:`write_ftrace` — the text of the kernel's ``tracefs`` ``trace`` file
  (``sched_switch``, ``sched_wakeup``, ``sched_migrate_task``,
  ``sched_process_exit`` and ``cpu_frequency`` events), as ``trace-cmd
  report`` prints them and LISA's text-trace parser reads them
  (``trace.txt``).

The engine's events do not name a waker. A thread woken from a barrier
(``block`` reason ``barrier``) was released by the thread of the same program
that reached the barrier last, which was running up to that instant: that
thread is taken as the waker (the lowest CPU if several run). Wake-ups by a timer
(sleep, I/O completion, a period) have no waker thread and get no arrow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import IO, Any

from . import _runview

__all__ = ["ftrace_lines", "perfetto", "write_ftrace"]

#: Process ids of the Perfetto document: the machine's CPU tracks, the counter
#: tracks, then one process per program (``PROGRAM_PID + program id``).
MACHINE_PID, COUNTER_PID, PROGRAM_PID = 0, 1, 100
#: Thread ids of task tracks start here, so they never collide with CPU tracks.
TASK_TID = 1_000_000
#: The program id under which tasks that belong to no program (vCPUs) are shown.
OTHER_PROGRAM = -1
#: Time bins of the power and utilisation counters over the run.
COUNTER_BINS = 200

# Order of events at one instant, per task: a run that ends, then a block or
# exit at that time, then a wake-up, then a run that starts.
_RUN_END, _BLOCK, _EXIT, _WAKE, _RUN_START = range(5)


def perfetto(res: Any, *, bins: int = COUNTER_BINS) -> dict[str, Any]:
    """The Perfetto/Chrome trace-event JSON document of traced run ``res``."""
    trace = list(res.trace)
    ncpus = _runview._ncpus(res, trace)
    end_s = _runview._end_s(res, trace)
    core_cpus = (getattr(res, "labels", None) or {}).get("cpus") or []
    labels = (
        [str(c) for c in core_cpus] if len(core_cpus) == ncpus else _runview._cpu_labels(res, ncpus)
    )
    names = _task_names(res)
    programs = _task_program_ids(res)
    program_names = _program_names(res)
    out: list[dict[str, Any]] = []

    def meta(pid: int, name: str, tid: int | None = None, sort: int | None = None) -> None:
        if tid is None:
            out.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}})
            out.append({"ph": "M", "pid": pid, "name": "process_sort_index",
                        "args": {"sort_index": pid}})  # fmt: skip
            return
        out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                    "args": {"name": name}})  # fmt: skip
        if sort is not None:
            out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                        "args": {"sort_index": sort}})  # fmt: skip

    # The machine: one track per CPU.
    meta(MACHINE_PID, "machine")
    for cpu in range(ncpus):
        meta(MACHINE_PID, labels[cpu], cpu, cpu)
    for e in trace:
        t = e.get("type")
        if t == "run" and e["end_ns"] > e["t_ns"]:
            task = int(e["task"])
            out.append({
                "ph": "X", "pid": MACHINE_PID, "tid": int(e["cpu"]), "ts": _us(e["t_ns"]),
                "dur": _us(e["end_ns"] - e["t_ns"]), "name": names.get(task, f"task {task}"),
                "cat": program_names.get(programs.get(task, OTHER_PROGRAM), "task"),
                "args": {"task": task},
            })  # fmt: skip
        elif t == "migrate":
            out.append({
                "ph": "i", "s": "t", "pid": MACHINE_PID, "tid": int(e["to"]), "ts": _us(e["t_ns"]),
                "name": "migrate",
                "args": {"task": int(e["task"]), "from": int(e["from"]), "to": int(e["to"])},
            })  # fmt: skip
        elif t == "fault":
            out.append({
                "ph": "i", "s": "t", "pid": MACHINE_PID, "tid": int(e["cpu"]), "ts": _us(e["t_ns"]),
                "name": "ISA fault", "args": {"task": int(e["task"]), "feature": e.get("feature")},
            })  # fmt: skip
        elif t in ("reconfig", "stop_machine"):
            cpus = [int(c) for c in e.get("cpus") or []] if t == "reconfig" else []
            name = f"{t}: {e.get('op')}"
            args = {k: v for k, v in e.items() if k not in ("type", "t_ns", "end_ns")}
            for cpu in cpus or range(ncpus):
                if cpu < ncpus:
                    out.append({
                        "ph": "X", "pid": MACHINE_PID, "tid": cpu, "ts": _us(e["t_ns"]),
                        "dur": _us(max(0, int(e.get("end_ns", e["t_ns"])) - int(e["t_ns"]))),
                        "name": name, "cat": "reconfiguration", "args": args,
                    })  # fmt: skip

    # Counter tracks: frequency per domain, estimated power, utilisation per CPU.
    meta(COUNTER_PID, "counters")
    out.extend(_freq_counters(res, trace, ncpus, end_s))
    if bins > 0 and end_s > 0:
        edges, joules = _runview.energy_from_trace(res, trace, bins)
        width = edges[1] - edges[0]
        for i, j in enumerate(joules):
            out.append(_counter("power (W, estimated)", edges[i], {"W": j / width}))
        out.append(_counter("power (W, estimated)", edges[-1], {"W": 0.0}))
        edges, busy = _runview._busy_per_bin(trace, ncpus, end_s, bins)
        for cpu in range(ncpus):
            name = f"utilisation cpu{cpu} (%)"
            for i, b in enumerate(busy[cpu]):
                out.append(_counter(name, edges[i], {"%": round(100.0 * b / width, 6)}))
            out.append(_counter(name, edges[-1], {"%": 0.0}))

    # One process per program, one track per thread with its states.
    for prog, pname in sorted(program_names.items()):
        meta(PROGRAM_PID + prog, pname)
    for task, name in sorted(names.items()):
        meta(PROGRAM_PID + programs.get(task, OTHER_PROGRAM), name, TASK_TID + task, task)
    for task, slices in sorted(thread_states(trace, end_s).items()):
        pid = PROGRAM_PID + programs.get(task, OTHER_PROGRAM)
        for a_ns, b_ns, state, args in slices:
            out.append({
                "ph": "X", "pid": pid, "tid": TASK_TID + task, "ts": _us(a_ns),
                "dur": _us(b_ns - a_ns), "name": state, "cat": "thread state", "args": args,
            })  # fmt: skip
    for n, (t_ns, waker, wakee) in enumerate(wakers(trace, programs)):
        # The arrow leaves the waker's running slice 1 ns before the wake-up
        # (inside it: the slice may end at that instant) and enters the slice
        # the wakee starts then (``bp: e``, the enclosing slice).
        for ph, task, at in (("s", waker, t_ns - 1), ("f", wakee, t_ns)):
            pid = PROGRAM_PID + programs.get(task, OTHER_PROGRAM)
            flow = {"ph": ph, "cat": "wakeup", "name": "wakeup", "id": n + 1, "ts": _us(at),
                    "pid": pid, "tid": TASK_TID + task}  # fmt: skip
            out.append({**flow, "bp": "e"} if ph == "f" else flow)
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def thread_states(
    trace: Iterable[dict[str, Any]], end_s: float
) -> dict[int, list[tuple[int, int, str, dict[str, Any]]]]:
    """Per task, its states as ``(start_ns, end_ns, name, args)``: ``running``
    (with the CPU), ``runnable`` (woken or preempted, waiting for a CPU) and
    ``blocked: REASON`` (``sleep``, ``io``, ``barrier``, ``period`` ...)."""
    per_task: dict[int, list[tuple[int, int, dict[str, Any]]]] = {}
    for e in trace:
        t = e.get("type")
        if t == "run":
            task = int(e["task"])
            per_task.setdefault(task, []).append((int(e["t_ns"]), _RUN_START, e))
            per_task[task].append((int(e["end_ns"]), _RUN_END, e))
        elif t in ("block", "exit", "wake"):
            order = {"block": _BLOCK, "exit": _EXIT, "wake": _WAKE}[t]
            per_task.setdefault(int(e["task"]), []).append((int(e["t_ns"]), order, e))
    end_ns = round(end_s * 1e9)
    out: dict[int, list[tuple[int, int, str, dict[str, Any]]]] = {}
    for task, events in per_task.items():
        events.sort(key=lambda x: (x[0], x[1]))
        slices: list[tuple[int, int, str, dict[str, Any]]] = []
        state: tuple[int, str, dict[str, Any]] | None = None
        for t, order, e in events:
            if state is not None and t > state[0]:
                slices.append((state[0], t, state[1], state[2]))
            if order == _RUN_START:
                state = (t, "running", {"cpu": int(e["cpu"])})
            elif order == _RUN_END:
                state = (t, "runnable", {"preempted": True})
            elif order == _BLOCK:
                state = (t, f"blocked: {e.get('reason', '?')}", {})
            elif order == _WAKE:
                state = (t, "runnable", {"cpu": int(e["cpu"])})
            else:
                state = None
        last = max(end_ns, events[-1][0])
        if state is not None and last > state[0]:
            slices.append((state[0], last, state[1], state[2]))
        out[task] = slices
    return out


def wakers(trace: Iterable[dict[str, Any]], programs: dict[int, int]) -> list[tuple[int, int, int]]:
    """``(t_ns, waker, wakee)`` of each wake-up from a barrier whose waker can be
    named (see the module doc), in trace order."""
    import bisect

    trace = list(trace)
    runs = sorted(
        (int(e["t_ns"]), int(e["end_ns"]), int(e["cpu"]), int(e["task"]))
        for e in trace
        if e.get("type") == "run"
    )
    starts = [r[0] for r in runs]
    longest = max((b - a for a, b, _, _ in runs), default=0)
    last_block: dict[int, str] = {}
    out = []
    for e in trace:
        t = e.get("type")
        if t == "block":
            last_block[int(e["task"])] = str(e.get("reason"))
        elif t == "wake":
            wakee = int(e["task"])
            if last_block.pop(wakee, None) != "barrier":
                continue
            at = int(e["t_ns"])
            prog = programs.get(wakee)
            # Runs that start after ``at - longest`` are the only ones that can cover ``at``.
            lo = bisect.bisect_left(starts, at - longest)
            hi = bisect.bisect_right(starts, at)
            candidates = sorted(
                (cpu, task)
                for a, b, cpu, task in runs[lo:hi]
                if a < at <= b and task != wakee and programs.get(task) == prog
            )
            if candidates:
                out.append((at, candidates[0][1], wakee))
    return out


def write_ftrace(res: Any, f: IO[str]) -> None:
    """Write traced run ``res`` as the text of tracefs's ``trace`` file to ``f``."""
    for line in ftrace_lines(res):
        f.write(line + "\n")


def ftrace_lines(res: Any) -> list[str]:
    """The lines of :func:`write_ftrace`: the tracefs header, then one line per
    event in time order. Task ``n`` is pid ``n + 1`` (pid 0 is each CPU's idle
    task ``swapper/N``); its comm is its program name and thread index,
    shortened to the kernel's 15 characters; prio is ``120 + nice``."""
    trace = list(res.trace)
    ncpus = _runview._ncpus(res, trace)
    comm, prio = _task_comms(res)
    blocks: dict[tuple[int, int], str] = {}
    exits: set[tuple[int, int]] = set()
    for e in trace:
        if e.get("type") == "block":
            blocks.setdefault((int(e["task"]), int(e["t_ns"])), str(e.get("reason")))
        elif e.get("type") == "exit":
            exits.add((int(e["task"]), int(e["t_ns"])))

    # (time, order, cpu, kind, payload): switches at the end of a run come
    # before those at the start of the next, wake-ups before both.
    items: list[tuple[int, int, int, str, dict[str, Any]]] = []
    per_cpu: dict[int, list[tuple[int, int, int]]] = {}
    for e in trace:
        t = e.get("type")
        if t == "run" and int(e["end_ns"]) > int(e["t_ns"]):
            per_cpu.setdefault(int(e["cpu"]), []).append(
                (int(e["t_ns"]), int(e["end_ns"]), int(e["task"]))
            )
        elif t == "wake":
            items.append((int(e["t_ns"]), 0, int(e["cpu"]), "wake", e))
        elif t == "migrate":
            items.append((int(e["t_ns"]), 1, int(e["to"]), "migrate", e))
        elif t == "exit":
            # While the task still runs: the kernel traces the exit before
            # the last switch away from it (prev_state=X).
            items.append((int(e["t_ns"]), 1, -1, "exit", e))
        elif t == "freq":
            items.append((int(e["t_ns"]), 4, -1, "freq", e))
    for cpu, runs in per_cpu.items():
        runs.sort()
        prev_end, prev_task = -1, -1
        for a, b, task in runs:
            if prev_task >= 0 and a != prev_end:
                items.append((prev_end, 2, cpu, "switch", {"prev": prev_task, "next": -1}))
            items.append((a, 2, cpu, "switch", {"prev": prev_task if a == prev_end else -1,
                                                 "next": task}))  # fmt: skip
            prev_end, prev_task = b, task
        if prev_task >= 0:
            items.append((prev_end, 2, cpu, "switch", {"prev": prev_task, "next": -1}))
    items.sort(key=lambda x: (x[0], x[1], x[2]))

    domains = _runview._domains(res, ncpus)
    current = [-1] * ncpus
    lines: list[str] = []

    def who(task: int, cpu: int) -> tuple[str, int]:
        return (f"swapper/{cpu}", 0) if task < 0 else (comm(task), task + 1)

    def line(t_ns: int, cpu: int, event: str, fields: str) -> str:
        task = current[cpu] if 0 <= cpu < ncpus else -1
        name, pid = ("<idle>", 0) if task < 0 else who(task, cpu)
        stamp = f"{t_ns // 1_000_000_000}.{(t_ns % 1_000_000_000) // 1000:06d}"
        return f"{f'{name}-{pid}':>22} [{max(cpu, 0):03d}] d..2. {stamp:>12}: {event}: {fields}"

    for t_ns, _, cpu, kind, e in items:
        if kind == "switch":
            prev, nxt = int(e["prev"]), int(e["next"])
            if prev < 0:
                state = "R"
            elif (prev, t_ns) in exits:
                state = "X"
            elif (prev, t_ns) in blocks:
                state = "D" if blocks[(prev, t_ns)] == "io" else "S"
            else:
                state = "R+"
            pn, pp = who(prev, cpu)
            nn, np_ = who(nxt, cpu)
            fields = (
                f"prev_comm={pn} prev_pid={pp} prev_prio={prio(prev)} prev_state={state} "
                f"==> next_comm={nn} next_pid={np_} next_prio={prio(nxt)}"
            )
            lines.append(line(t_ns, cpu, "sched_switch", fields))
            current[cpu] = nxt
        elif kind == "wake":
            task = int(e["task"])
            fields = f"comm={comm(task)} pid={task + 1} prio={prio(task)} target_cpu={cpu:03d}"
            lines.append(line(t_ns, cpu, "sched_wakeup", fields))
        elif kind == "migrate":
            task = int(e["task"])
            fields = (
                f"comm={comm(task)} pid={task + 1} prio={prio(task)} "
                f"orig_cpu={int(e['from'])} dest_cpu={int(e['to'])}"
            )
            lines.append(line(t_ns, cpu, "sched_migrate_task", fields))
        elif kind == "exit":
            task = int(e["task"])
            where = next((c for c in range(ncpus) if current[c] == task), 0)
            fields = f"comm={comm(task)} pid={task + 1} prio={prio(task)}"
            lines.append(line(t_ns, where, "sched_process_exit", fields))
        else:  # one cpu_frequency line per CPU of the domain, in kHz as the kernel prints
            for c in range(ncpus):
                if domains[c] == int(e["domain"]):
                    fields = f"state={int(e['mhz']) * 1000} cpu_id={c}"
                    lines.append(line(t_ns, c, "cpu_frequency", fields))
    return _ftrace_header(len(lines), ncpus) + lines


def _ftrace_header(entries: int, ncpus: int) -> list[str]:
    return [
        "# tracer: nop",
        "#",
        f"# entries-in-buffer/entries-written: {entries}/{entries}   #P:{ncpus}",
        "#",
        "#                                _-----=> irqs-off/BH-disabled",
        "#                               / _----=> need-resched",
        "#                              | / _---=> hardirq/softirq",
        "#                              || / _--=> preempt-depth",
        "#                              ||| / _-=> migrate-disable",
        "#                              |||| /     delay",
        "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
        "#              | |         |   |||||     |         |",
    ]


def _task_comms(res: Any) -> tuple[Any, Any]:
    names: dict[int, str] = {}
    nice: dict[int, int] = {}
    for task, (prog, th) in _task_labels(res).items():
        base = re.sub(r"[^A-Za-z0-9_.:+]", "_", prog) or "task"
        suffix = f"-{th}"
        names[task] = base[: 15 - len(suffix)] + suffix
    t = res.tasks
    if not t.empty and "nice" in t.columns:
        for task, n in zip(t["task"], t["nice"], strict=True):
            nice[int(task)] = int(n) if n == n else 0

    def comm(task: int) -> str:
        return names.get(task, f"task-{task}")

    def prio(task: int) -> int:
        return 120 if task < 0 else 120 + nice.get(task, 0)

    return comm, prio


def _freq_counters(
    res: Any, trace: list[dict[str, Any]], ncpus: int, end_s: float
) -> list[dict[str, Any]]:
    domains = _runview._domains(res, ncpus)
    fmax = _runview._fmax(res, ncpus)
    first: dict[int, float] = {}
    for cpu in range(ncpus):
        first.setdefault(domains[cpu], fmax[cpu])
    out = [_counter(f"frequency domain {d} (MHz)", 0.0, {"MHz": f}) for d, f in first.items()]
    for e in trace:
        if e.get("type") == "freq":
            out.append(
                _counter(
                    f"frequency domain {int(e['domain'])} (MHz)",
                    int(e["t_ns"]) / 1e9,
                    {"MHz": float(e["mhz"])},
                )
            )
    return out


def _counter(name: str, t_s: float, args: dict[str, float]) -> dict[str, Any]:
    return {"ph": "C", "pid": COUNTER_PID, "ts": round(t_s * 1e6, 3), "name": name, "args": args}


def _us(ns: int | float) -> float:
    return int(ns) / 1000.0


def _task_labels(res: Any) -> dict[int, tuple[str, int]]:
    """``(program, thread)`` per task id: the core's labels (which name vCPUs
    too) when the results have them, else the tasks table."""
    out: dict[int, tuple[str, int]] = {}
    t = res.tasks
    if not t.empty:
        threads = t["thread"] if "thread" in t.columns else t["task"]
        for k, p, th in zip(t["task"], t["program"], threads, strict=True):
            out[int(k)] = (str(p), int(th))
    for k, pair in enumerate((getattr(res, "labels", None) or {}).get("tasks") or []):
        if isinstance(pair, list | tuple) and len(pair) == 2:
            out.setdefault(k, (str(pair[0]), int(pair[1])))
    return out


def _task_names(res: Any) -> dict[int, str]:
    return {k: f"{p}#{th}" for k, (p, th) in _task_labels(res).items()}


def _task_program_ids(res: Any) -> dict[int, int]:
    t = res.tasks
    if t.empty:
        return {}
    if "program_id" in t.columns:
        return {int(k): int(v) for k, v in zip(t["task"], t["program_id"], strict=True)}
    order = {p: i for i, p in enumerate(dict.fromkeys(t["program"]))}
    return {int(k): order[p] for k, p in zip(t["task"], t["program"], strict=True)}


def _program_names(res: Any) -> dict[int, str]:
    t = res.tasks
    ids = _task_program_ids(res)
    out = (
        {}
        if t.empty
        else {ids[int(k)]: str(p) for k, p in zip(t["task"], t["program"], strict=True)}
    )
    if any(k not in ids for k in _task_labels(res)):
        out[OTHER_PROGRAM] = "virtual CPUs and other tasks"
    return out
