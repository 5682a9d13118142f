"""Workloads from rt-app JSON files.

rt-app describes threads as sequences of events (``run``, ``sleep``,
``timer`` ...), grouped in ``phases``, repeated ``loop`` times, with
``instance`` copies of each task. :func:`load_rtapp` turns such a file (or
the fragments of rt-app's ``merge/`` format) into hetsched programs:

======================================  =========================================
rt-app                                  hetsched
======================================  =========================================
task                                    a program (its name is the task's)
``instance``                            ``threads`` (``0``: no thread, left out)
``run``: µs of calibrated work          a ``compute_ms`` phase: the work the
                                        calibration CPU does at its highest
                                        P-state in that time, as reference work
``sleep``: µs                           a ``sleep_ms`` phase
``barrier``: name                       a ``barrier`` phase (the task's threads)
``loop`` (task), ``-1`` = until the end ``loops``; for ``-1`` enough loops to fill
                                        ``global.duration`` (the run stops there)
``phases`` with their own ``loop``      the phase's events, repeated ``loop`` times
``run`` then ``timer`` (``period``)     a ``periodic`` program: ``wcet_ms`` of work
                                        released every ``period_ms``
``priority`` with ``SCHED_OTHER``       ``nice``
``cpus`` (task, or the same in every    ``affinity``
phase)
``delay``: µs                           ``start_ms``
``global.duration``: s                  ``duration_s``
``global.calibration``: ``"CPUn"``      ``run`` µs are work of CPU n at its
                                        highest P-state (rt-app's default: CPU0)
======================================  =========================================

The file may use rt-app's JSON dialect: ``//`` and ``/* */`` comments,
trailing commas, repeated keys and suffixed event keys (``run0``,
``sleep1``); syntax errors give the line and column in the file as written.
Zero-length ``run`` and ``sleep`` events do nothing and are left out.

What the simulator cannot reproduce faithfully is refused, every case in one
:class:`RtAppError` naming the file, the task or phase and the feature
(:data:`REFUSED` says why for each feature).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from . import _core

__all__ = [
    "REFUSED",
    "RtAppError",
    "RtAppWorkload",
    "load_machine_file",
    "load_rtapp",
    "parse_rtapp",
    "scenario_toml",
]

#: Event types rt-app knows, longest first so that ``runtime`` is not read as ``run``.
EVENTS = (
    "runtime", "unlock", "suspend", "resume", "signal", "barrier", "iorun", "sleep",
    "timer", "broad", "yield", "lock", "wait", "sync", "fork", "mem", "run",
)  # fmt: skip

#: rt-app features hetsched refuses, and why (what the engine would need).
REFUSED: dict[str, str] = {
    "runtime": "a busy loop of a fixed wall time whatever the CPU's speed; the engine's "
    "compute phases are amounts of work (needs a fixed-time compute operation)",
    "suspend": "a thread blocked until another resumes it; the engine has no "
    "suspend/resume wake-up chains between threads",
    "resume": "wakes a thread blocked in suspend; the engine has no suspend/resume "
    "wake-up chains between threads",
    "lock": "a mutex; the engine has no locks (blocking on a held lock, handing it over)",
    "unlock": "a mutex; the engine has no locks",
    "wait": "a condition variable; the engine has no wait queues",
    "signal": "wakes a thread waiting on a condition variable; the engine has no wait queues",
    "broad": "wakes every thread waiting on a condition variable; the engine has no wait queues",
    "sync": "signal-and-wait on a condition variable; the engine has no wait queues",
    "mem": "writes a number of bytes to memory; no memory-bandwidth model turns bytes into time",
    "iorun": "writes a number of bytes to a device; no device model turns bytes into time",
    "yield": "sched_yield; the engine's threads cannot give up the CPU while runnable",
    "fork": "creates a task at run time when another reaches this event; the engine "
    "starts programs at fixed times only",
    "shared-barrier": "a barrier shared by several tasks; a hetsched barrier joins the "
    "threads of one program",
    "timer-in-sequence": "a timer anywhere but at the end of a loop of run events (a "
    "periodic task); the engine's wait-for-next-period exists only in periodic programs",
    "shared-timer": "a timer shared by the instances of a task (its ref does not start "
    "with 'unique'): each instance's wake-up moves the others' period; hetsched gives "
    "each thread its own period",
    "SCHED_FIFO": "needs the real-time scheduling class (priorities 1-99, run to "
    "completion, push/pull between CPUs, RT throttling) in the engine",
    "SCHED_RR": "needs the real-time scheduling class (priorities 1-99, 100 ms timeslice, "
    "push/pull, RT throttling) in the engine",
    "SCHED_DEADLINE": "needs the deadline scheduling class (EDF with CBS budgets, "
    "admission control) in the engine",
    "SCHED_IDLE": "needs SCHED_IDLE (a fair weight of 3, below nice 19) in the engine",
    "custom-slice": "dl-runtime on a SCHED_OTHER task sets EEVDF's per-task slice; "
    "needs per-task slices in an EEVDF scheduler",
    "taskgroup": "needs group scheduling (the cgroup cpu controller's hierarchical shares)",
    "util-clamp": "util_min/util_max need utilization clamping (uclamp) in the engine",
    "phase-cpus": "phases with different cpus need affinity changes during a program",
    "phase-policy": "phases with different policy or priority need scheduling-parameter "
    "changes during a program",
    "old-grammar": "exec/period/deadline/lock_order/resources is the grammar of rt-app "
    "before version 1 (the merge/ examples); its lock_order takes mutexes, which the "
    "engine does not have",
}

_POLICIES = ("SCHED_OTHER", "SCHED_IDLE", "SCHED_RR", "SCHED_FIFO", "SCHED_DEADLINE")
_DL_KEYS = ("dl-runtime", "dl-period", "dl-deadline")
_SCHED_KEYS = ("policy", "priority", *_DL_KEYS)
_MEMBIND = ("membind_nodes", "nodes_membind")
TASK_KEYS = (
    "instance", "loop", "phases", "delay", "cpus", "taskgroup", "util_min", "util_max",
    *_SCHED_KEYS, *_MEMBIND,
)  # fmt: skip
PHASE_KEYS = ("loop", "cpus", "taskgroup", "util_min", "util_max", *_SCHED_KEYS, *_MEMBIND)
_OLD_KEYS = ("exec", "period", "deadline", "lock_order", "resources")
#: Global keys that only steer rt-app's own logging and memory handling.
_GLOBAL_IGNORED = (
    "pi_enabled", "lock_pages", "logdir", "log_basename", "log_size", "ftrace", "gnuplot",
    "io_device", "mem_buffer_size", "cumulative_slack", "frag",
)  # fmt: skip
#: Cap on the phases a program gets after expanding phase loops.
MAX_PHASES = 100_000
#: Duration of a run whose ``global.duration`` is absent or -1 (rt-app runs until
#: every thread ends or it is stopped; a simulation needs an end).
DEFAULT_DURATION_S = 10.0


class RtAppError(_core.ScenarioError):
    """An rt-app file that cannot be translated; the message lists every
    problem. ``refused`` holds ``(where, feature)`` for each refused feature
    (the keys of :data:`REFUSED`)."""

    def __init__(self, message: str, refused: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.refused = list(refused)


@dataclass
class RtAppWorkload:
    """The programs of an rt-app file, its duration and the notes on how it
    was translated. ``programs`` hold ``run`` times as rt-app states them
    (work of the calibration CPU); :meth:`scenario` converts them to reference
    work for the machine it is given."""

    programs: list[dict[str, Any]]
    duration_s: float
    notes: list[str] = field(default_factory=list)
    source: str = "<rt-app>"
    #: The CPU whose speed at its highest P-state calibrates ``run`` (rt-app's
    #: ``global.calibration``).
    calibration_cpu: int = 0
    #: Programs whose rt-app loop is -1 (repeat until the end of the run).
    endless: list[str] = field(default_factory=list)

    def scenario(
        self,
        *,
        machine: str | Mapping[str, Any] = "big-little-4+4",
        scheduler: str = "cfs",
        name: str | None = None,
        seed: int = 1,
        duration_s: float | None = None,
    ) -> dict[str, Any]:
        """A complete scenario (as a dict of the scenario schema) running the
        programs on ``machine`` (a preset name or a machine table), with
        ``run`` work converted by the calibration CPU's speed on it."""
        mach = {"preset": machine} if isinstance(machine, str) else dict(machine)
        duration = float(duration_s if duration_s is not None else self.duration_s)
        speeds = _cpu_speeds(mach)
        cal = self.calibration_cpu
        if cal >= len(speeds):
            raise RtAppError(
                f"{self.source}: global.calibration names CPU{cal} but the machine has "
                f"{len(speeds)} CPUs (CPU0-CPU{len(speeds) - 1})"
            )
        factor = speeds[cal]
        fastest = max(speeds)
        programs = copy.deepcopy(self.programs)
        for prog in programs:
            if "wcet_ms" in prog:
                prog["wcet_ms"] = _round(prog["wcet_ms"] * factor)
            for ph in prog.get("phases") or []:
                if "compute_ms" in ph:
                    ph["compute_ms"] = _round(ph["compute_ms"] * factor)
            if prog.get("name") in self.endless and prog.get("kind") == "phases":
                prog["loops"] = _endless_loops(prog["phases"], duration, fastest)
        return {
            "name": name or Path(self.source.split(" + ")[0]).stem or "rt-app",
            "description": f"translated from the rt-app file {self.source}; run times are "
            f"work of CPU{cal} at its highest P-state ({factor:.4g} x reference speed)",
            "seed": seed,
            "duration_s": duration,
            "scheduler": scheduler,
            "machine": mach,
            "workload": {"programs": programs},
        }


def load_rtapp(*paths: str | Path) -> RtAppWorkload:
    """Read and translate an rt-app JSON file, or the fragments of rt-app's
    ``merge/`` format (``global.json resources.json thread0.json ...``), merged
    as rt-app's ``merge.py`` does: top-level objects of later files update
    those of earlier ones."""
    if not paths:
        raise RtAppError("no rt-app file given")
    docs = []
    for path in paths:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RtAppError(f"{p}: no such rt-app file") from None
        except UnicodeDecodeError as e:
            raise RtAppError(f"{p}: not UTF-8 text ({e.reason})") from None
        docs.append((str(p), _parse_json(text, str(p))))
    if len(docs) == 1:
        return _translate(docs[0][1], docs[0][0])
    return _translate(_merge(docs), " + ".join(src for src, _ in docs))


def parse_rtapp(text: str, *, source: str = "<rt-app>") -> RtAppWorkload:
    """Translate rt-app JSON text; raises :class:`RtAppError` listing every
    refused feature (with the task and event that use it)."""
    return _translate(_parse_json(text, source), source)


def load_machine_file(path: str | Path) -> dict[str, Any]:
    """The ``[machine]`` table of a TOML or JSON file (what ``hetsched machine
    from-sysfs/from-devicetree/from-lisa`` write, or any scenario)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _core.ScenarioError(f"{p}: no such machine file") from None
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise _core.ScenarioError(f"{p}: not a valid machine file: {e}") from None
    else:
        try:
            import tomllib  # type: ignore[import-not-found,unused-ignore]
        except ImportError:  # Python 3.10
            raise _core.ScenarioError(
                f"{p}: reading a TOML machine file needs Python 3.11 or newer (tomllib); "
                "give a .json machine file on 3.10"
            ) from None
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise _core.ScenarioError(f"{p}: not a valid machine file: {e}") from None
    mach = doc.get("machine") if isinstance(doc, dict) else None
    if not isinstance(mach, dict):
        raise _core.ScenarioError(
            f"{p}: no [machine] table (write one with `hetsched machine from-sysfs`, "
            "`from-devicetree` or `from-lisa`)"
        )
    return mach


# --------------------------------------------------------------- the dialect


class _Pairs:
    """A JSON object that keeps repeated keys and their order (rt-app allows both)."""

    def __init__(self, items: list[tuple[str, Any]]) -> None:
        self.items = items

    def dict(self) -> dict[str, Any]:
        return dict(self.items)

    def get(self, key: str, default: Any = None) -> Any:
        return self.dict().get(key, default)


_COMMENT = r"/\*(?:[^*]|\*(?!/))*\*/|//[^\n]*"
_DIALECT = re.compile(
    r'"(?:\\.|[^"\\\n])*"'  # a string: kept
    rf"|{_COMMENT}"  # a comment: blanked
    rf"|,(?=(?:\s|{_COMMENT})*[}}\]])",  # a trailing comma: blanked
)


def _to_strict_json(text: str) -> str:
    """rt-app's dialect as strict JSON of the same layout: comments and
    trailing commas become spaces (newlines kept), so that line:column of a
    syntax error is that of the file. A bare ``"suspend"`` key (workgen fills
    in the thread's own name) gets the value ``""``."""

    def blank(m: re.Match[str]) -> str:
        s = m.group(0)
        if not s.startswith('"'):
            return re.sub(r"[^\n]", " ", s)
        if s.startswith('"suspend') and _bare_key(m.string, m.start(), m.end()):
            return s + ':""'
        return s

    return _DIALECT.sub(blank, text)


def _bare_key(text: str, start: int, end: int) -> bool:
    i = start - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    j = end
    while j < len(text) and text[j].isspace():
        j += 1
    return i >= 0 and text[i] in "{," and j < len(text) and text[j] in ",}"


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(_to_strict_json(text), object_pairs_hook=_Pairs)
    except json.JSONDecodeError as e:
        raise RtAppError(f"{source}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None


def _merge(docs: list[tuple[str, Any]]) -> _Pairs:
    merged: list[tuple[str, Any]] = []
    for src, doc in docs:
        if not isinstance(doc, _Pairs):
            raise RtAppError(f"{src}: expected a JSON object")
        for key, value in doc.items:
            at = next((i for i, (k, _) in enumerate(merged) if k == key), None)
            if at is None:
                merged.append((key, value))
            elif isinstance(value, _Pairs) and isinstance(merged[at][1], _Pairs):
                old = dict(merged[at][1].items)
                old.update(value.items)
                merged[at] = (key, _Pairs(list(old.items())))
            else:
                raise RtAppError(f"{src}: {key!r} is given again and is not an object to merge")
    return _Pairs(merged)


# ---------------------------------------------------------------- translation


class _Collect:
    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []
        self.refused: list[tuple[str, str]] = []
        self.notes: list[str] = []

    def refuse(self, where: str, feature: str, what: str | None = None) -> None:
        if (where, feature) in self.refused:
            return  # the same event in a repeated phase or loop: said once
        self.refused.append((where, feature))
        self.problems.append(f"{where}: {what or feature} is not supported: {REFUSED[feature]}")

    def bad(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")


def _translate(doc: Any, source: str) -> RtAppWorkload:
    if not isinstance(doc, _Pairs):
        raise RtAppError(f'{source}: expected a JSON object with "tasks"')
    top = doc.dict()
    tasks = top.get("tasks")
    if tasks is None and set(top) & {"global", "resources"}:
        raise RtAppError(
            f'{source}: no "tasks": this is a fragment of rt-app\'s merge/ format (global, '
            "resources and each task in its own file); give all the fragments together, "
            "e.g. `hetsched workload from-rt-app global.json resources.json thread0.json ...`",
            [(source, "fragment")],
        )
    if not isinstance(tasks, _Pairs) or not tasks.items:
        raise RtAppError(f'{source}: "tasks" must be an object with at least one task')
    c = _Collect(source)
    for key in top:
        if key not in ("tasks", "global", "resources"):
            c.notes.append(f"top-level {key!r} ignored (rt-app reads tasks, global, resources)")
    glob = top.get("global")
    glob_d = glob.dict() if isinstance(glob, _Pairs) else {}
    for key in glob_d:
        if key not in ("duration", "calibration", "default_policy", *_GLOBAL_IGNORED):
            c.notes.append(f"global.{key} ignored: not an rt-app global option")
    duration = glob_d.get("duration", -1)
    if not _is_num(duration):
        raise RtAppError(f"{source}: global.duration: expected seconds, got {duration!r}")
    if duration <= 0:
        duration_s = DEFAULT_DURATION_S
        c.notes.append(
            f"global.duration is {duration}: the run lasts {DEFAULT_DURATION_S:g} s "
            "(set duration_s to change it)"
        )
    else:
        duration_s = float(duration)
    cal_cpu = _calibration(glob_d, c)
    default_policy = glob_d.get("default_policy", "SCHED_OTHER")
    if default_policy not in _POLICIES:
        c.bad("global.default_policy", f"{default_policy!r} is not one of {', '.join(_POLICIES)}")
        default_policy = "SCHED_OTHER"

    barrier_users: dict[str, set[str]] = {}
    programs = []
    endless = []
    for name, task in tasks.items:
        where = f"tasks.{name}"
        if not isinstance(task, _Pairs):
            c.bad(where, "expected an object")
            continue
        prog = _task(name, task, where, duration_s, str(default_policy), c, barrier_users)
        if prog is not None:
            if prog.pop("_endless", False):
                endless.append(name)
            programs.append(prog)
    for barrier, users in sorted(barrier_users.items()):
        if len(users) > 1:
            c.refuse(
                f"tasks.{{{','.join(sorted(users))}}}", "shared-barrier", f"barrier {barrier!r}"
            )
    if c.problems:
        listed = "\n  - ".join(c.problems)
        if len(c.refused) == len(c.problems):
            head = "rt-app features hetsched cannot simulate"
        else:
            head = "invalid rt-app file" if not c.refused else "cannot translate"
        raise RtAppError(f"{source}: {head}:\n  - {listed}", c.refused)
    if not programs:
        raise RtAppError(f"{source}: no task creates a thread (every instance is 0)")
    return RtAppWorkload(programs, duration_s, c.notes, source, cal_cpu, endless)


def _calibration(glob: dict[str, Any], c: _Collect) -> int:
    cal = glob.get("calibration")
    if cal is None:
        c.notes.append("global.calibration absent: run times are work of CPU0 (rt-app's default)")
        return 0
    if isinstance(cal, str):
        m = re.fullmatch(r"CPU(\d+)", cal.strip())
        if m:
            return int(m.group(1))
        c.bad("global.calibration", f'expected "CPUn" or ns per loop, got {cal!r}')
        return 0
    if _is_int(cal) and cal > 0:
        c.notes.append(
            f"global.calibration is {cal} ns per loop, measured on a CPU the file does not "
            "name: run times are taken as work of CPU0"
        )
        return 0
    c.bad("global.calibration", f'expected "CPUn" or ns per loop > 0, got {cal!r}')
    return 0


def _sched(
    d: dict[str, Any], where: str, default_policy: str, c: _Collect
) -> tuple[str, int | None, dict[str, Any]]:
    """Policy, priority and deadline parameters of a task or phase object."""
    policy = d.get("policy", default_policy)
    if policy not in _POLICIES:
        c.bad(f"{where}.policy", f"{policy!r} is not one of {', '.join(_POLICIES)}")
        policy = "SCHED_OTHER"
    prio = d.get("priority")
    if prio is not None and not _is_int(prio):
        c.bad(f"{where}.priority", f"expected an integer, got {prio!r}")
        prio = None
    dl = {k: d[k] for k in _DL_KEYS if k in d}
    return str(policy), prio, dl


def _task(
    name: str,
    task: _Pairs,
    where: str,
    duration_s: float,
    default_policy: str,
    c: _Collect,
    barrier_users: dict[str, set[str]],
) -> dict[str, Any] | None:
    props: dict[str, Any] = {}
    events: list[tuple[str, str, Any, str]] = []  # (type, key, value, where) of the task body
    old = [k for k, _ in task.items if k in _OLD_KEYS]
    if any(k in old for k in ("exec", "lock_order", "resources")):
        c.refuse(f"{where}.{old[0]}", "old-grammar", "the pre-1.0 rt-app grammar")
        return None
    for key, value in task.items:
        if key in TASK_KEYS:
            props[key] = value
        elif key in ("period", "deadline"):  # rt-app's old spellings of dl-period/-deadline
            props[f"dl-{key}"] = value
        elif (ev := _event_type(key)) is not None:
            events.append((ev, key, value, where))
        else:
            c.bad(f"{where}.{key}", f"unknown task key (rt-app's are: {', '.join(TASK_KEYS)})")
    prog: dict[str, Any] = {"name": name}
    n0 = len(c.problems)

    instance = props.get("instance", 1)
    if not _is_int(instance) or instance < 0:
        c.bad(f"{where}.instance", f"expected an integer >= 0, got {instance!r}")
        instance = 1
    for key in _MEMBIND:
        if key in props:
            c.notes.append(f"{where}.{key} ignored: memory placement is not modelled")
    if "delay" in props:
        delay = props["delay"]
        if not _is_num(delay) or delay < 0:
            c.bad(f"{where}.delay", "expected microseconds >= 0")
        else:
            prog["start_ms"] = delay / 1000.0
    task_cpus = _cpus(props["cpus"], f"{where}.cpus", c) if "cpus" in props else None
    _groups_and_clamps(props, where, c)
    task_sched = _sched(props, where, default_policy, c)

    # The body: the task's own events, or its phases (each looped).
    phases_spec = props.get("phases")
    body: list[tuple[str, str, Any, str]] = []
    phase_count = 0
    phase_cpus: list[tuple[str, list[int] | None]] = []
    if phases_spec is not None:
        if events:
            c.bad(where, "give events either in the task or in its phases, not both")
        if not isinstance(phases_spec, _Pairs) or not phases_spec.items:
            c.bad(f"{where}.phases", "expected an object of phases")
        else:
            for pname, phase in phases_spec.items:
                pwhere = f"{where}.phases.{pname}"
                if not isinstance(phase, _Pairs):
                    c.bad(pwhere, "expected an object")
                    continue
                phase_count += 1
                pprops: dict[str, Any] = {}
                pevents = []
                for key, value in phase.items:
                    if key in PHASE_KEYS:
                        pprops[key] = value
                    elif (ev := _event_type(key)) is not None:
                        pevents.append((ev, key, value, pwhere))
                    else:
                        c.bad(f"{pwhere}.{key}", "unknown phase key")
                loop = pprops.get("loop", 1)
                if not _is_int(loop) or loop < 1:
                    c.bad(f"{pwhere}.loop", "expected an integer >= 1 in a phase")
                    loop = 1
                _groups_and_clamps(pprops, pwhere, c)
                if set(pprops) & set(_SCHED_KEYS):
                    merged = {**{k: v for k, v in props.items() if k in _SCHED_KEYS}, **pprops}
                    if _sched(merged, pwhere, default_policy, c) != task_sched:
                        c.refuse(pwhere, "phase-policy", "a policy or priority of its own")
                pc = _cpus(pprops["cpus"], f"{pwhere}.cpus", c) if "cpus" in pprops else None
                phase_cpus.append((pwhere, pc if pc is not None else task_cpus))
                if len(pevents) * loop > MAX_PHASES:
                    c.bad(pwhere, f"{loop} loops of {len(pevents)} events is too many")
                    loop = 1
                body += pevents * int(loop)
    else:
        body = events
    if phase_cpus:
        distinct = {tuple(cs) if cs is not None else None for _, cs in phase_cpus}
        if len(distinct) > 1:
            c.refuse(f"{where}.phases", "phase-cpus", "cpus that change from phase to phase")
        else:
            task_cpus = phase_cpus[0][1]
    if task_cpus is not None:
        prog["affinity"] = task_cpus

    policy, prio, dl = task_sched
    pwhere = f"{where}.policy" if "policy" in props else f"{where} (global.default_policy)"
    if policy != "SCHED_OTHER":
        c.refuse(pwhere, policy)
    elif dl.get("dl-runtime"):
        c.refuse(f"{where}.dl-runtime", "custom-slice", "dl-runtime on SCHED_OTHER")
    else:
        if dl:
            c.notes.append(f"{where}: {', '.join(dl)} ignored: the kernel ignores them for "
                           "SCHED_OTHER without dl-runtime")  # fmt: skip
        if prio is not None:
            if not -20 <= prio <= 19:
                c.bad(f"{where}.priority", "a SCHED_OTHER priority is a nice value -20..19")
            else:
                prog["nice"] = int(prio)

    for ev, key, value, w in body:
        if ev == "barrier" and isinstance(value, str):
            barrier_users.setdefault(value, set()).add(name)
        if ev not in ("run", "sleep", "barrier", "timer"):
            c.refuse(f"{w}.{key}", ev, f"event {ev!r}")
    if not body:
        c.bad(where, "no events (give run, sleep, barrier or timer events)")
    if len(body) > MAX_PHASES:
        c.bad(where, f"{len(body)} events after expanding phase loops is too many")
    loop = props.get("loop", -1)
    if not _is_int(loop) or loop == 0 or loop < -1:
        c.bad(f"{where}.loop", "expected -1 (until the end) or an integer >= 1")
        loop = 1
    if len(c.problems) > n0:
        return None
    if instance == 0:
        c.notes.append(f"{where}.instance is 0: rt-app creates no thread; left out")
        return None
    # Zero-length runs and sleeps do nothing.
    body = [e for e in body if not (e[0] in ("run", "sleep") and _is_num(e[2]) and e[2] == 0)]

    timers = [i for i, (ev, *_rest) in enumerate(body) if ev == "timer"]
    if timers:
        return _periodic(prog, body, timers, int(instance), int(loop), phase_count, where, c)

    phases: list[dict[str, Any]] = []
    for ev, key, value, w in body:
        if ev in ("run", "sleep"):
            if not _is_num(value) or value < 0:
                c.bad(f"{w}.{key}", "expected microseconds >= 0")
                continue
            phases.append({"compute_ms" if ev == "run" else "sleep_ms": value / 1000.0})
        elif ev == "barrier":
            if not isinstance(value, str):
                c.bad(f"{w}.{key}", "expected the barrier's name")
                continue
            phases.append({"barrier": True})
    if len(c.problems) > n0:
        return None
    if not phases:
        c.bad(where, "only zero-length events: the task does nothing")
        return None
    prog.update(kind="phases", threads=int(instance), phases=phases)
    if loop == -1:
        prog["loops"] = _endless_loops(phases, duration_s, 1.0)
        prog["_endless"] = True
        c.notes.append(f"{where}.loop = -1: repeated until the end of the run")
    else:
        prog["loops"] = int(loop)
    return prog


def _groups_and_clamps(d: dict[str, Any], where: str, c: _Collect) -> None:
    tg = d.get("taskgroup")
    if tg is not None and tg != "":
        c.refuse(f"{where}.taskgroup", "taskgroup", f"taskgroup {tg!r}")
    for key in ("util_min", "util_max"):
        if key in d:
            c.refuse(f"{where}.{key}", "util-clamp", key)


def _cpus(value: Any, where: str, c: _Collect) -> list[int] | None:
    cpus = [value] if _is_int(value) else value
    if not isinstance(cpus, list) or not cpus or not all(_is_int(x) and x >= 0 for x in cpus):
        c.bad(where, "expected a CPU id or a list of CPU ids")
        return None
    return sorted(set(cpus))


def _periodic(
    prog: dict[str, Any],
    body: list[tuple[str, str, Any, str]],
    timers: list[int],
    instance: int,
    loop: int,
    phase_count: int,
    where: str,
    c: _Collect,
) -> dict[str, Any] | None:
    """A timer is supported in the periodic shape: run events, then one timer
    at the end of the loop, in the task or in its only phase."""
    unit = body[: timers[0] + 1]  # one job: its runs, then the timer
    runs = unit[:-1]
    repeats = len(body) // len(unit)
    shape_ok = (
        body == unit * repeats and runs and all(ev == "run" for ev, *_ in runs)
        and phase_count <= 1
    )  # fmt: skip
    _, key, timer, w = body[timers[0]]
    if not shape_ok:
        kinds = " ".join(ev for ev, *_ in body[:12]) + (" ..." if len(body) > 12 else "")
        c.refuse(f"{w}.{key}", "timer-in-sequence", f"a timer in the sequence {kinds!r}")
        return None
    t = timer.dict() if isinstance(timer, _Pairs) else {}
    period = t.get("period")
    if not _is_num(period) or period <= 0:
        c.bad(f"{w}.{key}.period", "expected microseconds > 0")
        return None
    ref = t.get("ref", "unique")
    if instance > 1 and not str(ref).startswith("unique"):
        c.refuse(f"{w}.{key}.ref", "shared-timer", f"timer {ref!r} shared by {instance} instances")
        return None
    mode = t.get("mode", "relative")
    if mode not in ("relative", "absolute"):
        c.bad(f"{w}.{key}.mode", f"expected 'relative' or 'absolute', got {mode!r}")
        return None
    if mode == "relative":
        c.notes.append(
            f"{w}.{key}: relative timer: after a job overruns its period rt-app counts the "
            "next period from the late wake-up; hetsched releases jobs every period_ms from "
            "the start (the same while no job overruns)"
        )
    work_us = 0.0
    for _ev, rkey, value, rw in runs:
        if not _is_num(value) or value <= 0:
            c.bad(f"{rw}.{rkey}", "expected microseconds > 0")
            return None
        work_us += float(value)
    prog.update(
        kind="periodic", threads=instance, wcet_ms=work_us / 1000.0, period_ms=period / 1000.0
    )
    if loop > 0:
        prog["jobs"] = loop * repeats
    return prog


def _endless_loops(phases: list[dict[str, Any]], duration_s: float, fastest: float) -> int:
    """Loops of a ``loop = -1`` task: more than fit in the run on the fastest
    CPU (speed ``fastest`` × reference), so that the run's end stops it."""
    compute = sum(p.get("compute_ms", 0.0) for p in phases)
    sleep = sum(p.get("sleep_ms", 0.0) for p in phases)
    per_loop_ms = compute / max(fastest, 1e-9) + sleep
    if per_loop_ms <= 0:
        return 1
    return min(MAX_PHASES, math.ceil(duration_s * 1000.0 / per_loop_ms) + 1)


def _cpu_speeds(machine: Mapping[str, Any]) -> list[float]:
    """Each CPU's speed at its highest P-state (capacity / 1024 × the type's
    ``default`` class speedup), in CPU order, for the machine table."""
    from . import api  # late: api imports the core this module's callers need first

    probe = {
        "name": "machine-probe",
        "duration_s": 0.001,
        "machine": dict(machine),
        "workload": {"programs": [{"name": "probe", "kind": "sequential", "work_ms": 0.001}]},
    }
    scen = api.loads(json.dumps(probe), fmt="json", source="the machine")
    types = json.loads(scen.to_json())["machine"]["types"]
    res = api.run(scen)
    speeds = []
    for t in res.cpus.sort_values("cpu")["type"]:
        ty = types[t]
        speeds.append(ty.get("capacity", 1024) / 1024 * ty.get("class_speedup", {}).get(
            "default", 1.0))  # fmt: skip
    return speeds


def _round(x: float) -> float:
    return float(f"{x:.9g}")


def _event_type(key: str) -> str | None:
    for ev in EVENTS:
        if key.startswith(ev):
            return ev
    return None


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
