"""Workloads from rt-app JSON files.

rt-app describes threads as sequences of events (``run``, ``sleep``,
``timer`` ...), grouped in ``phases``, repeated ``loop`` times, with
``instance`` copies of each task. :func:`load_rtapp` turns such a file into
hetsched programs:

======================================  =========================================
rt-app                                  hetsched
======================================  =========================================
task                                    a program (its name is the task's)
``instance``                            ``threads``
``run``: µs of calibrated work          a ``compute_ms`` phase (reference work)
``sleep``: µs                           a ``sleep_ms`` phase
``barrier``: name                       a ``barrier`` phase (the task's threads)
``loop`` (task), ``-1`` = until the end ``loops``; for ``-1`` enough loops to fill
                                        ``global.duration`` (the run stops there)
``phases`` with their own ``loop``      the phase's events, repeated ``loop`` times
``run`` then ``timer`` (``period``)     a ``periodic`` program: ``wcet_ms`` of work
                                        released every ``period_ms``
``priority`` with ``SCHED_OTHER``       ``nice``
``cpus``                                ``affinity``
``delay``: µs                           ``start_ms``
``global.duration``: s                  ``duration_s``
======================================  =========================================

Event keys may carry a suffix, as rt-app allows (``run0``, ``sleep1``), and
keys may repeat; the order of the file is kept. C-style comments are
accepted. Anything the simulator cannot express is collected and reported
together in one :class:`RtAppError`: the other event types (``runtime``,
``lock``/``unlock``, ``wait``/``signal``/``broad``/``sync``,
``suspend``/``resume``, ``mem``, ``iorun``, ``yield``, ``fork``), real-time
policies (``SCHED_FIFO``, ``SCHED_RR``, ``SCHED_DEADLINE``), a barrier
shared by several tasks, a ``timer`` anywhere but after the work of a
simple periodic task, and unknown task keys.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from . import _core

__all__ = ["RtAppError", "RtAppWorkload", "load_rtapp", "parse_rtapp", "scenario_toml"]

#: Event types rt-app knows, longest first so that ``runtime`` is not read as ``run``.
EVENTS = (
    "runtime", "unlock", "suspend", "resume", "signal", "barrier", "iorun", "sleep",
    "timer", "broad", "yield", "lock", "wait", "sync", "fork", "mem", "run",
)  # fmt: skip
SUPPORTED_EVENTS = ("run", "sleep", "barrier", "timer")
TASK_KEYS = ("instance", "loop", "priority", "policy", "cpus", "phases", "delay")
#: Task keys accepted and ignored, with why.
IGNORED_KEYS = {
    "nodes_membind": "memory placement is not modelled",
}
#: Cap on the phases a program gets after expanding phase loops.
MAX_PHASES = 100_000
#: Loops given to a ``loop = -1`` task whose loop takes no time (cannot happen
#: with run or sleep events; a guard).
DEFAULT_DURATION_S = 10.0


class RtAppError(_core.ScenarioError):
    """An rt-app file that cannot be translated; the message lists every problem."""


@dataclass
class RtAppWorkload:
    """The programs of an rt-app file, its duration and the notes on how it
    was translated."""

    programs: list[dict[str, Any]]
    duration_s: float
    notes: list[str] = field(default_factory=list)
    source: str = "<rt-app>"

    def scenario(
        self,
        *,
        machine: str | Mapping[str, Any] = "big-little-4+4",
        scheduler: str = "cfs",
        name: str | None = None,
        seed: int = 1,
    ) -> dict[str, Any]:
        """A complete scenario (as a dict of the scenario schema) running the
        programs on ``machine`` (a preset name or a machine table)."""
        mach = {"preset": machine} if isinstance(machine, str) else dict(machine)
        return {
            "name": name or Path(self.source).stem or "rt-app",
            "description": f"translated from the rt-app file {self.source}",
            "seed": seed,
            "duration_s": self.duration_s,
            "scheduler": scheduler,
            "machine": mach,
            "workload": {"programs": self.programs},
        }


def load_rtapp(path: str | Path) -> RtAppWorkload:
    """Read and translate an rt-app JSON file (see the module doc)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RtAppError(f"{p}: no such rt-app file") from None
    return parse_rtapp(text, source=str(p))


def parse_rtapp(text: str, *, source: str = "<rt-app>") -> RtAppWorkload:
    """Translate rt-app JSON text; raises :class:`RtAppError` listing every
    unsupported feature (with the task and event that use it)."""
    try:
        doc = json.loads(_strip_comments(text), object_pairs_hook=_Pairs)
    except json.JSONDecodeError as e:
        raise RtAppError(f"{source}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    if not isinstance(doc, _Pairs):
        raise RtAppError(f'{source}: expected a JSON object with "tasks"')
    top = doc.dict()
    tasks = top.get("tasks")
    if not isinstance(tasks, _Pairs) or not tasks.items:
        raise RtAppError(f'{source}: "tasks" must be an object with at least one task')
    glob = top.get("global")
    glob_d = glob.dict() if isinstance(glob, _Pairs) else {}
    duration = glob_d.get("duration", -1)
    if not isinstance(duration, int | float) or isinstance(duration, bool):
        raise RtAppError(f"{source}: global.duration: expected seconds, got {duration!r}")
    notes: list[str] = []
    if duration is None or duration <= 0:
        duration_s = DEFAULT_DURATION_S
        notes.append(
            f"global.duration is {duration}: the run lasts {DEFAULT_DURATION_S:g} s "
            "(set duration_s to change it)"
        )
    else:
        duration_s = float(duration)
    default_policy = str(glob_d.get("default_policy", "SCHED_OTHER"))

    problems: list[str] = []
    barrier_users: dict[str, set[str]] = {}
    programs = []
    for name, task in tasks.items:
        where = f"tasks.{name}"
        if not isinstance(task, _Pairs):
            problems.append(f"{where}: expected an object")
            continue
        prog = _task(name, task, where, duration_s, default_policy, problems, notes, barrier_users)
        if prog is not None:
            programs.append(prog)
    for barrier, users in sorted(barrier_users.items()):
        if len(users) > 1:
            problems.append(
                f"barrier {barrier!r} is shared by tasks {', '.join(sorted(users))}: "
                "a hetsched barrier joins the threads of one program"
            )
    if problems:
        listed = "\n  - ".join(problems)
        raise RtAppError(f"{source}: rt-app features hetsched cannot simulate:\n  - {listed}")
    return RtAppWorkload(programs, duration_s, notes, source)


# ---------------------------------------------------------------------------


class _Pairs:
    """A JSON object that keeps repeated keys and their order (rt-app allows both)."""

    def __init__(self, items: list[tuple[str, Any]]) -> None:
        self.items = items

    def dict(self) -> dict[str, Any]:
        return dict(self.items)


def _strip_comments(text: str) -> str:
    """Remove ``/* */`` and ``//`` comments outside strings."""
    pattern = re.compile(r'"(?:\\.|[^"\\])*"|/\*.*?\*/|//[^\n]*', re.DOTALL)
    return pattern.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)


def _event_type(key: str) -> str | None:
    for ev in EVENTS:
        if key.startswith(ev):
            return ev
    return None


def _task(
    name: str,
    task: _Pairs,
    where: str,
    duration_s: float,
    default_policy: str,
    problems: list[str],
    notes: list[str],
    barrier_users: dict[str, set[str]],
) -> dict[str, Any] | None:
    props: dict[str, Any] = {}
    events: list[tuple[str, str, Any]] = []  # (type, key, value) of the task body
    for key, value in task.items:
        if key in TASK_KEYS:
            props[key] = value
        elif key in IGNORED_KEYS:
            notes.append(f"{where}.{key} ignored: {IGNORED_KEYS[key]}")
        elif (ev := _event_type(key)) is not None:
            events.append((ev, key, value))
        else:
            problems.append(f"{where}.{key}: not supported (task keys: {', '.join(TASK_KEYS)})")
    prog: dict[str, Any] = {"name": name}
    n0 = len(problems)

    instance = props.get("instance", 1)
    if not _is_int(instance) or instance < 1:
        problems.append(f"{where}.instance: expected an integer >= 1, got {instance!r}")
        instance = 1
    policy = str(props.get("policy", default_policy))
    if policy != "SCHED_OTHER":
        problems.append(
            f"{where}.policy: {policy} is not supported: hetsched has no real-time "
            "scheduling class (only SCHED_OTHER tasks, with priority as nice)"
        )
    if "priority" in props and policy == "SCHED_OTHER":
        nice = props["priority"]
        if not _is_int(nice) or not -20 <= nice <= 19:
            problems.append(f"{where}.priority: a SCHED_OTHER priority is a nice value -20..19")
        else:
            prog["nice"] = int(nice)
    if "cpus" in props:
        cpus = props["cpus"]
        if isinstance(cpus, int) and not isinstance(cpus, bool):
            cpus = [cpus]
        if not isinstance(cpus, list) or not cpus or not all(_is_int(c) for c in cpus):
            problems.append(f"{where}.cpus: expected a CPU id or a list of CPU ids")
        else:
            prog["affinity"] = sorted(set(cpus))
    if "delay" in props:
        delay = props["delay"]
        if not _is_num(delay) or delay < 0:
            problems.append(f"{where}.delay: expected microseconds >= 0")
        else:
            prog["start_ms"] = delay / 1000.0

    # The body: the task's own events, or its phases (each looped).
    phases_spec = props.get("phases")
    body: list[tuple[str, str, Any, str]] = []
    if phases_spec is not None:
        if events:
            problems.append(f"{where}: give events either in the task or in its phases, not both")
        if not isinstance(phases_spec, _Pairs) or not phases_spec.items:
            problems.append(f"{where}.phases: expected an object of phases")
        else:
            for pname, phase in phases_spec.items:
                pwhere = f"{where}.phases.{pname}"
                if not isinstance(phase, _Pairs):
                    problems.append(f"{pwhere}: expected an object")
                    continue
                loop = 1
                pevents = []
                for key, value in phase.items:
                    if key == "loop":
                        loop = value
                    elif (ev := _event_type(key)) is not None:
                        pevents.append((ev, key, value, pwhere))
                    else:
                        problems.append(f"{pwhere}.{key}: not supported in a phase")
                if not _is_int(loop) or loop < 1:
                    problems.append(f"{pwhere}.loop: expected an integer >= 1 in a phase")
                    loop = 1
                if len(pevents) * loop > MAX_PHASES:
                    problems.append(f"{pwhere}: {loop} loops of {len(pevents)} events is too many")
                    loop = 1
                body += pevents * int(loop)
    else:
        body = [(ev, key, value, where) for ev, key, value in events]
    if not body:
        problems.append(f"{where}: no events (give run, sleep, barrier or timer events)")
        return None
    if len(body) > MAX_PHASES:
        problems.append(f"{where}: {len(body)} events after expanding phase loops is too many")
        return None

    for ev, key, value, w in body:
        if ev == "barrier" and isinstance(value, str):
            barrier_users.setdefault(value, set()).add(name)
        if ev not in SUPPORTED_EVENTS:
            problems.append(
                f"{w}.{key}: event {ev!r} is not supported "
                f"(supported: {', '.join(SUPPORTED_EVENTS)})"
            )
    loop = props.get("loop", -1)
    if not _is_int(loop) or loop == 0 or loop < -1:
        problems.append(f"{where}.loop: expected -1 (until the end) or an integer >= 1")
        loop = 1
    if len(problems) > n0:
        return None

    timers = [i for i, (ev, *_rest) in enumerate(body) if ev == "timer"]
    if timers:
        return _periodic(prog, body, timers, int(instance), int(loop), where, problems)

    phases: list[dict[str, Any]] = []
    for ev, key, value, w in body:
        if ev == "run":
            if not _is_num(value) or value <= 0:
                problems.append(f"{w}.{key}: expected microseconds > 0")
                continue
            phases.append({"compute_ms": value / 1000.0})
        elif ev == "sleep":
            if not _is_num(value) or value < 0:
                problems.append(f"{w}.{key}: expected microseconds >= 0")
                continue
            phases.append({"sleep_ms": value / 1000.0})
        elif ev == "barrier":
            if not isinstance(value, str):
                problems.append(f"{w}.{key}: expected the barrier's name")
                continue
            phases.append({"barrier": True})
    if len(problems) > n0:
        return None
    prog.update(kind="phases", threads=int(instance), phases=phases)
    if loop == -1:
        per_loop_ms = sum(p.get("compute_ms", 0.0) + p.get("sleep_ms", 0.0) for p in phases)
        # Each loop takes at least its sleeps; compute may go faster than reference
        # on a CPU with class speedup, so allow for twice the loops that fit.
        loops = math.ceil(2 * duration_s * 1000.0 / per_loop_ms) + 1 if per_loop_ms > 0 else 1
        prog["loops"] = loops
        notes.append(f"{where}.loop = -1: {loops} loops, more than fit in {duration_s:g} s")
    else:
        prog["loops"] = int(loop)
    return prog


def _periodic(
    prog: dict[str, Any],
    body: list[tuple[str, str, Any, str]],
    timers: list[int],
    instance: int,
    loop: int,
    where: str,
    problems: list[str],
) -> dict[str, Any] | None:
    """A timer is supported in the common periodic shape: run events, then
    one timer at the end of the loop (rt-app's periodic task)."""
    shape_ok = timers == [len(body) - 1] and all(ev == "run" for ev, *_ in body[:-1]) and body[:-1]
    if not shape_ok:
        kinds = " ".join(ev for ev, *_ in body)
        problems.append(
            f"{where}: a timer is supported only at the end of a loop of run events "
            f"(a periodic task); this task's loop is: {kinds}"
        )
        return None
    _, key, timer, w = body[-1]
    t = timer.dict() if isinstance(timer, _Pairs) else {}
    period = t.get("period")
    if not _is_num(period) or period <= 0:
        problems.append(f"{w}.{key}.period: expected microseconds > 0")
        return None
    work_us = 0.0
    for _ev, rkey, value, rw in body[:-1]:
        if not _is_num(value) or value <= 0:
            problems.append(f"{rw}.{rkey}: expected microseconds > 0")
            return None
        work_us += float(value)
    prog.update(
        kind="periodic",
        threads=instance,
        wcet_ms=work_us / 1000.0,
        period_ms=float(period) / 1000.0,
    )
    if loop > 0:
        prog["jobs"] = loop
    return prog


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: object) -> TypeGuard[float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def scenario_toml(scenario: Mapping[str, Any]) -> str:
    """A scenario dict (as :meth:`RtAppWorkload.scenario` makes) as TOML text."""
    lines: list[str] = []
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for k, v in scenario.items():
        if isinstance(v, Mapping):
            tables.append((k, v))
        else:
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, table in tables:
        if k == "workload":
            for prog in table.get("programs") or []:
                lines += ["", "[[workload.programs]]"]
                lines += [f"{_key(pk)} = {_value(pv)}" for pk, pv in prog.items()]
            continue
        lines += ["", f"[{_key(k)}]"]
        lines += [f"{_key(tk)} = {_value(tv)}" for tk, tv in table.items()]
    return "\n".join(lines) + "\n"


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")
