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
``barrier``: name                       a ``shared_barrier`` phase (every thread
                                        naming it, in any task)
``runtime``: µs of wall time            a ``run_for_ms`` phase (wall time, busy)
``timer`` (``ref``, ``period``)         a ``timer`` phase (``unique`` refs: one
                                        timer per task)
``suspend``/``resume``: name            ``suspend``/``resume`` phases
``lock``/``unlock``: mutex              ``lock``/``unlock`` phases
``wait``/``sync`` (``ref``, ``mutex``)  ``wait``/``sync`` phases with ``mutex``
``signal``/``broad``: name              ``signal``/``broad`` phases
``yield``                               a ``yield`` phase
``fork``: task                          a ``fork`` phase; the task is a
                                        ``forked`` program (``instance`` 0) or a
                                        forked copy of it (``<task>+fork``)
``cpus`` of phases that differ          ``cpus`` phases where the set changes
``loop`` (task), ``-1`` = until the end ``loops``; for ``-1`` enough loops to fill
                                        ``global.duration`` (the run stops there)
``phases`` with their own ``loop``      the phase's events, repeated ``loop`` times
only ``run`` then a ``timer`` of its own a ``periodic`` program: ``wcet_ms`` of work
                                        released every ``period_ms``
``priority`` with ``SCHED_OTHER``/IDLE  ``nice``
``dl-runtime`` with ``SCHED_OTHER``     ``slice_ms`` (EEVDF custom slice; rt-app
                                        reads µs; clamped to 0.1-100 ms as the
                                        kernel does)
``policy``: ``SCHED_FIFO``/``RR``/      ``policy`` ``fifo``/``rr``/``idle``/
``IDLE``/``DEADLINE`` (or               ``deadline`` (the rt and deadline
``global.default_policy``)              classes above the fair scheduler)
``priority`` with ``SCHED_FIFO``/``RR`` ``priority`` (rt-app's default: 10)
``dl-runtime``/``-period``/``-deadline`` ``dl_runtime_ms``/``dl_period_ms``/
with ``SCHED_DEADLINE``: µs             ``dl_deadline_ms`` (period defaults to
                                        the runtime, deadline to the period)
``util_min``/``util_max`` (task)        ``uclamp_min``/``uclamp_max``
``cpus`` (task, or the same in every    ``affinity``
phase)
``delay``: µs                           ``start_ms``
``global.duration``: s                  ``duration_s``
``global.calibration``: ``"CPUn"``      ``run`` µs are work of CPU n at its
                                        highest P-state (rt-app's default: CPU0)
``mem``/``iorun``: bytes                a ``compute_ms`` phase of bytes /
                                        :data:`MEM_BYTES_PER_S` or
                                        :data:`IO_BYTES_PER_S` (measured by
                                        tools/rtapp_rates.py; replaceable)
``taskgroup`` (task or phase)           nothing, where every fair thread is in
                                        one group at every instant (else
                                        refused)
pre-1.0 ``exec``/``period``/            per period: each resource of
``lock_order``/``resources``            ``lock_order`` taken after its access
                                        list, its duration run, mutexes
                                        unlocked; the rest of ``exec``; an
                                        absolute timer of the period
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
    "io-device": "iorun writes to a device other than /dev/null, whose write rate was not "
    "measured; give its rate (--io-bytes-per-s, io_bytes_per_s=)",
    "taskgroup": "fair threads in different task groups at once compete as groups (the cgroup "
    "cpu controller's hierarchical shares), which is not modelled; task groups are accepted "
    "when every fair thread is in one group at every instant",
    "phase-policy": "phases with a policy, priority or util clamp of their own need "
    "scheduling-parameter changes during a program (the engine sets them per program)",
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
#: Global keys the translation reads.
_GLOBAL_READ = ("duration", "calibration", "default_policy", "io_device", "mem_buffer_size")
#: Global keys that only steer rt-app's own logging and memory handling.
_GLOBAL_IGNORED = (
    "pi_enabled", "lock_pages", "logdir", "log_basename", "log_size", "ftrace", "gnuplot",
    "cumulative_slack", "frag",
)  # fmt: skip
#: rt-app's ``mem`` memsets, in bytes per second, on the machine of
#: docs/linux.md ("mem and iorun"), measured by ``tools/rtapp_rates.py`` with
#: rt-app's default 4 MiB buffer (the best of five runs).
MEM_BYTES_PER_S = 2.56e10
#: rt-app's ``iorun`` write()s to ``/dev/null``, in bytes per second (4 MiB per
#: write; the same measurement). /dev/null costs a system call per write, not per
#: byte: a rate per byte is exact for writes of the buffer's size only.
IO_BYTES_PER_S = 4.08e12
#: rt-app's default ``global.mem_buffer_size`` (doc/tutorial.txt).
MEM_BUFFER_SIZE = 4 * 1024 * 1024
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
                if ph.get("cpus") == "all":  # rt-app's default: every CPU
                    ph["cpus"] = list(range(len(speeds)))
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


def load_rtapp(
    *paths: str | Path,
    mem_bytes_per_s: float | None = None,
    io_bytes_per_s: float | None = None,
) -> RtAppWorkload:
    """Read and translate an rt-app JSON file, or the fragments of rt-app's
    ``merge/`` format (``global.json resources.json thread0.json ...``), merged
    as rt-app's ``merge.py`` does: top-level objects of later files update
    those of earlier ones. A thread fragment given alone is read with the
    fragments beside it. ``mem_bytes_per_s`` and ``io_bytes_per_s`` replace
    the rates that turn ``mem`` and ``iorun`` bytes into work
    (:data:`MEM_BYTES_PER_S`, :data:`IO_BYTES_PER_S`)."""
    rates = _Rates.of(mem_bytes_per_s, io_bytes_per_s)
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
    notes: list[str] = []
    if len(docs) == 1 and _is_thread_fragment(docs[0][1]):
        docs, notes = _complete_fragment(Path(paths[0]), docs[0])
    if len(docs) == 1:
        wl = _translate(docs[0][1], docs[0][0], rates)
    else:
        wl = _translate(_merge(docs), " + ".join(src for src, _ in docs), rates)
    wl.notes[:0] = notes
    return wl


def _is_thread_fragment(doc: Any) -> bool:
    """A file of rt-app's merge/ format holding tasks of the pre-1.0 grammar
    without the ``resources`` they take (rt-app 0.x requires ``global``,
    ``resources`` and ``tasks`` in one file)."""
    if not isinstance(doc, _Pairs):
        return False
    top = doc.dict()
    tasks = top.get("tasks")
    return (
        "resources" not in top and isinstance(tasks, _Pairs)
        and any(_is_old(t) for _, t in tasks.items)
    )  # fmt: skip


def _complete_fragment(path: Path, doc: tuple[str, Any]) -> tuple[list[tuple[str, Any]], list[str]]:
    """The merge/ fragments beside a thread fragment given alone: every JSON
    file of its folder with no ``tasks`` (global, resources) or that is a
    thread fragment itself, merged in file-name order as ``merge.py`` merges
    the files it is given. The thread's resources are declared there, and
    the other threads signal the conditions it waits for."""
    found: list[tuple[str, Any]] = []
    for sib in sorted(path.parent.glob("*.json")):
        if sib.resolve() == path.resolve():
            found.append(doc)
            continue
        try:
            other = _parse_json(sib.read_text(encoding="utf-8"), str(sib))
        except (OSError, UnicodeDecodeError, RtAppError):
            continue  # not an rt-app file: not a fragment of this workload
        if not isinstance(other, _Pairs):
            continue
        keys = set(other.dict())
        if (keys and keys <= {"global", "resources"}) or _is_thread_fragment(other):
            found.append((str(sib), other))
    with_res = [src for src, d in found if "resources" in d.dict()]
    if len(with_res) != 1:
        return [doc], []  # none, or several to choose from: the file alone says what is missing
    names = ", ".join(Path(src).name for src, _ in found if src != doc[0])
    note = (
        f"{path.name} is a thread of rt-app's merge/ format without the resources it takes: "
        f"read with the fragments beside it ({names}), the workload they make together "
        "(give the files explicitly to choose others)"
    )
    return found, [note]


def parse_rtapp(
    text: str,
    *,
    source: str = "<rt-app>",
    mem_bytes_per_s: float | None = None,
    io_bytes_per_s: float | None = None,
) -> RtAppWorkload:
    """Translate rt-app JSON text; raises :class:`RtAppError` listing every
    refused feature (with the task and event that use it)."""
    rates = _Rates.of(mem_bytes_per_s, io_bytes_per_s)
    return _translate(_parse_json(text, source), source, rates)


@dataclass(frozen=True)
class _Rates:
    """Bytes per second of rt-app's memset (``mem``) and write() (``iorun``);
    ``io_given``: the io rate is the caller's (any ``io_device`` then)."""

    mem: float = 0.0
    io: float = 0.0
    io_given: bool = False

    @classmethod
    def of(cls, mem: float | None, io: float | None) -> _Rates:
        for name, v in (("mem_bytes_per_s", mem), ("io_bytes_per_s", io)):
            if v is not None and not (_is_num(v) and v > 0):
                raise RtAppError(
                    f"{name} (--{name.replace('_', '-')}): expected bytes per second > 0, got {v!r}"
                )
        return cls(
            MEM_BYTES_PER_S if mem is None else float(mem),
            IO_BYTES_PER_S if io is None else float(io),
            io is not None,
        )


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


# ------------------------------------------------------ the pre-1.0 grammar

#: Resource types of rt-app's pre-1.0 ``resources`` object (its
#: ``string_to_resource``): what taking each one does in a task's lock order.
OLD_RESOURCE_TYPES = ("mutex", "wait", "signal", "broadcast", "sig_and_wait", "sleep", "run")


def _is_old(task: Any) -> bool:
    return isinstance(task, _Pairs) and any(k in ("exec", "lock_order") for k, _ in task.items)


def _old_resources(top: dict[str, Any], c: _Collect) -> dict[str, dict[str, Any]]:
    """The declared resources of a pre-1.0 file: name -> {type, target}. An
    integer N declares the mutexes "0".."N-1" (rt-app's legacy form)."""
    res = top.get("resources")
    out: dict[str, dict[str, Any]] = {}
    if res is None:
        return out
    if _is_int(res) and res >= 0:
        return {str(i): {"type": "mutex"} for i in range(res)}
    if not isinstance(res, _Pairs):
        c.bad("resources", "expected an object of resources (or a number of mutexes)")
        return out
    for name, spec in res.items:
        d = spec.dict() if isinstance(spec, _Pairs) else None
        if d is None:
            c.bad(f"resources.{name}", "expected an object")
            continue
        rtype = d.get("type", "mutex")
        if rtype not in OLD_RESOURCE_TYPES:
            allowed = ", ".join(OLD_RESOURCE_TYPES)
            c.bad(f"resources.{name}.type", f"{rtype!r} is not one of {allowed}")
            continue
        out[name] = {"type": rtype}
        if rtype in ("signal", "broadcast", "sig_and_wait"):
            target = d.get("target")
            if not isinstance(target, str) or not target:
                c.bad(f"resources.{name}.target", f"a {rtype} resource names its target (a wait)")
                continue
            out[name]["target"] = target
    for name, r in out.items():
        t = r.get("target")
        if t is not None and out.get(t, {}).get("type") != "wait":
            c.bad(f"resources.{name}.target", f"{t!r} is not a resource of type wait")
    return out


def _old_task(
    name: str,
    task: _Pairs,
    declared: dict[str, dict[str, Any]],
    default_policy: str,
    c: _Collect,
) -> _Pairs | None:
    """A task of rt-app's pre-1.0 grammar as the events of the current one,
    as rt-app 0.x ran it (``parse_thread_resources``, ``run`` and
    ``thread_body`` of its rt-app.c): every period, for each resource of
    ``lock_order`` in turn, take the resources of its ``access`` list (nested
    lists depth first, each once), then the resource itself (a mutex is
    locked, a wait waits on its condition under the mutex taken just before,
    a signal/broadcast signals/broadcasts its target, a sleep sleeps), run for
    its ``duration`` (a sleep sleeps it instead), and unlock the mutexes in
    reverse order; then run what is left of ``exec``, and wait for the end of
    the period (an absolute timer: a late loop starts the next at once)."""
    where = f"tasks.{name}"
    d = task.dict()
    n0 = len(c.problems)
    period, exec_ = d.get("period"), d.get("exec")
    if not _is_num(period) or period <= 0:
        c.bad(f"{where}.period", "expected microseconds > 0 (the pre-1.0 grammar requires it)")
    if not _is_num(exec_) or exec_ < 0:
        c.bad(f"{where}.exec", "expected microseconds >= 0 (the pre-1.0 grammar requires it)")
    elif _is_num(period) and exec_ > period:
        c.bad(f"{where}.exec", f"{exec_:g} us is longer than the period ({period:g} us)")
    deadline = d.get("deadline")
    if deadline is not None and (not _is_num(deadline) or (_is_num(exec_) and _is_num(period)
                                 and not exec_ <= deadline <= period)):  # fmt: skip
        c.bad(f"{where}.deadline", "expected microseconds from exec to period")
    locks = d.get("lock_order", [])
    task_res = d.get("resources")
    task_res_d = task_res.dict() if isinstance(task_res, _Pairs) else {}
    if task_res is not None and not isinstance(task_res, _Pairs):
        c.bad(f"{where}.resources", "expected an object (resource -> duration, access)")
    if not isinstance(locks, list) or not all(isinstance(x, str | int) for x in locks):
        c.bad(f"{where}.lock_order", "expected a list of resource names")
        locks = []
    if len(c.problems) > n0:
        return None

    def usage(res: str) -> tuple[float, list[Any]]:
        r = task_res_d.get(res)
        rd = r.dict() if isinstance(r, _Pairs) else {}
        dur = rd.get("duration", 0)
        if not _is_num(dur) or dur < 0:
            c.bad(f"{where}.resources.{res}.duration", "expected microseconds >= 0")
            dur = 0
        acc = rd.get("access", [])
        if not isinstance(acc, list):
            c.bad(f"{where}.resources.{res}.access", "expected a list of resource names")
            acc = []
        return float(dur), acc

    def acl(res: str, out: list[str], depth: int) -> None:
        if str(res) not in declared:
            c.bad(f"{where}.lock_order", f'resource {str(res)!r} is not declared in "resources"')
            return
        if str(res) not in out:
            out.append(str(res))
        if depth > len(declared):
            c.bad(f"{where}.resources.{res}.access", "the access lists form a cycle")
            return
        for nxt in usage(str(res))[1]:
            acl(str(nxt), out, depth + 1)

    items: list[tuple[str, Any]] = []
    busy = 0.0
    for res in locks:
        order: list[str] = []
        acl(str(res), order, 0)
        if len(c.problems) > n0:
            return None
        order = order[1:] + order[:1]  # the resource itself is taken last
        dur, _ = usage(str(res))
        held: list[str] = []
        kind = "run"
        for i, r in enumerate(order):
            rtype = declared[r]["type"]
            prev = order[i - 1] if i else None
            under = declared[prev]["type"] if prev is not None else None
            if rtype in ("wait", "sig_and_wait") and under != "mutex":
                c.bad(f"{where}.resources.{r}.access",
                      f"taking {rtype} resource {r!r} needs a mutex just before it in its access "
                      "list (rt-app waits under the previous resource)")  # fmt: skip
                return None
            if rtype == "mutex":
                items.append(("lock", r))
                held.append(r)
            elif rtype == "wait":
                items.append(("wait", _Pairs([("ref", r), ("mutex", prev)])))
            elif rtype == "signal":
                items.append(("signal", declared[r]["target"]))
            elif rtype == "broadcast":
                items.append(("broad", declared[r]["target"]))
            elif rtype == "sig_and_wait":
                items.append(("sync", _Pairs([("ref", declared[r]["target"]), ("mutex", prev)])))
            if r == str(res):
                kind = "sleep" if rtype == "sleep" else "run"
        if dur > 0:
            items.append((kind, dur))
            if kind == "run":
                busy += dur
        items += [("unlock", m) for m in reversed(held)]
    assert _is_num(exec_) and _is_num(period)
    if busy > exec_:
        c.bad(f"{where}.resources", f"the durations run {busy:g} us, more than exec ({exec_:g} us)")
        return None
    if exec_ - busy > 0:
        items.append(("run", float(exec_ - busy)))
    if d.get("sleep", True) is not False:
        items.append(("timer", _Pairs([("ref", "unique.period"), ("period", period),
                                       ("mode", "absolute")])))  # fmt: skip
    elif not items:
        c.bad(where, "no events")
        return None
    for key in ("loop", "delay", "cpus", "policy", "priority", "instance"):
        if key in d:
            items.append((key, d[key]))
    policy = d.get("policy", default_policy)
    if policy in ("SCHED_OTHER", "SCHED_IDLE") and "priority" not in d:
        # rt-app 0.x gives every thread priority 10 (DEFAULT_THREAD_PRIORITY)
        # and sets a SCHED_OTHER thread's nice value to it.
        items.append(("priority", RT_DEFAULT_PRIORITY))
        c.notes.append(f"{where}: no priority: nice {RT_DEFAULT_PRIORITY}, as rt-app 0.x sets a "
                       "SCHED_OTHER thread's nice value to its default priority 10")  # fmt: skip
    if policy == "SCHED_DEADLINE":
        # rt-app 0.x's SCHED_DEADLINE: the runtime is exec, the deadline and period its own.
        items += [("dl-runtime", exec_), ("dl-period", period), ("dl-deadline", deadline or period)]
    elif deadline is not None:
        c.notes.append(f"{where}.deadline: rt-app 0.x uses it for its slack log only "
                       f"(a {policy} thread)")  # fmt: skip
    for key in d:
        if key not in ("exec", "period", "deadline", "lock_order", "resources", "sleep", "loop",
                       "delay", "cpus", "policy", "priority", "instance"):  # fmt: skip
            c.bad(f"{where}.{key}", "unknown key of a pre-1.0 task")
    c.notes.append(f"{where}: rt-app's pre-1.0 grammar (exec/period/lock_order) translated: "
                   "each period takes its resources in lock order, runs, then waits for the "
                   "period's end")  # fmt: skip
    return _Pairs(items)


# ---------------------------------------------------------------- translation


class _Collect:
    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []
        self.refused: list[tuple[str, str]] = []
        self.notes: list[str] = []
        self.rates = _Rates()
        self.io_device = "/dev/null"
        #: The task groups each task's threads are in over their phases (None:
        #: no taskgroup, the group rt-app runs in).
        self.groups: dict[str, set[str | None]] = {}

    def refuse(self, where: str, feature: str, what: str | None = None) -> None:
        if (where, feature) in self.refused:
            return  # the same event in a repeated phase or loop: said once
        self.refused.append((where, feature))
        self.problems.append(f"{where}: {what or feature} is not supported: {REFUSED[feature]}")

    def bad(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")


def _translate(doc: Any, source: str, rates: _Rates | None = None) -> RtAppWorkload:
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
    c.rates = rates or _Rates.of(None, None)
    for key in top:
        if key not in ("tasks", "global", "resources"):
            c.notes.append(f"top-level {key!r} ignored (rt-app reads tasks, global, resources)")
    glob = top.get("global")
    glob_d = glob.dict() if isinstance(glob, _Pairs) else {}
    for key in glob_d:
        if key not in (*_GLOBAL_READ, *_GLOBAL_IGNORED):
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
    io_device = glob_d.get("io_device", "/dev/null")
    if not isinstance(io_device, str) or not io_device:
        c.bad("global.io_device", f"expected a file or device path, got {io_device!r}")
    else:
        c.io_device = io_device
    buf = glob_d.get("mem_buffer_size", MEM_BUFFER_SIZE)
    if not _is_int(buf) or buf <= 0:
        c.bad("global.mem_buffer_size", f"expected bytes > 0, got {buf!r}")
    default_policy = glob_d.get("default_policy", "SCHED_OTHER")
    if default_policy not in _POLICIES:
        c.bad("global.default_policy", f"{default_policy!r} is not one of {', '.join(_POLICIES)}")
        default_policy = "SCHED_OTHER"

    if any(_is_old(t) for _, t in tasks.items):
        declared = _old_resources(top, c)
        items = []
        for name, task in tasks.items:
            if _is_old(task):
                new = _old_task(name, task, declared, str(default_policy), c)
                if new is not None:
                    items.append((name, new))
            else:
                items.append((name, task))
        tasks = _Pairs(items)
    refs = _Refs.scan(tasks, c)
    programs = []
    endless = []
    for name, task in tasks.items:
        where = f"tasks.{name}"
        if not isinstance(task, _Pairs):
            c.bad(where, "expected an object")
            continue
        prog = _task(name, task, where, duration_s, str(default_policy), c, refs)
        if prog is not None:
            if prog.pop("_endless", False):
                endless.append(name)
            programs.append(prog)
            if name in refs.forked and prog.get("threads", 0) > 0 and not prog.get("forked"):
                # rt-app's fork creates one more thread of the task while its own
                # threads run: a forked copy of one thread.
                copy_ = copy.deepcopy(prog)
                copy_.update(name=f"{name}+fork", threads=1, forked=True)
                copy_.pop("start_ms", None)
                if name in endless:
                    endless.append(copy_["name"])
                programs.append(copy_)
                c.notes.append(
                    f"tasks.{name}: forked while its own threads run: the forks start "
                    f"'{name}+fork', one thread each; a fork while that copy still runs "
                    "starts it again when it ends (hetsched's instances do not overlap)"
                )
    # A fork names the task: its forked program, or the forked copy of a task
    # whose own threads start with the run.
    by_name = {p["name"]: p for p in programs}
    for prog in programs:
        for ph in prog.get("phases") or []:
            target = ph.get("fork")
            if target is None:
                continue
            if by_name.get(target, {}).get("forked"):
                continue
            if f"{target}+fork" in by_name:
                ph["fork"] = f"{target}+fork"
            else:
                c.bad(f"tasks.{prog['name']}", f"forks {target!r}, which creates no thread")
    if not c.problems:
        _check_groups(programs, c)
    c.notes = list(dict.fromkeys(c.notes))
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


class _Refs:
    """What the tasks name across the file: the tasks that are forked, the
    tasks that name each timer ref and its period."""

    def __init__(self) -> None:
        self.forked: set[str] = set()
        self.timer_users: dict[str, set[str]] = {}
        self.timer_period: dict[str, float] = {}

    @classmethod
    def scan(cls, tasks: _Pairs, c: _Collect) -> _Refs:
        r = cls()
        names = [n for n, _ in tasks.items]

        def walk(obj: _Pairs, task: str) -> None:
            for key, value in obj.items:
                ev = _event_type(key)
                if key == "phases" and isinstance(value, _Pairs):
                    for _, ph in value.items:
                        if isinstance(ph, _Pairs):
                            walk(ph, task)
                elif ev == "fork" and isinstance(value, str):
                    if value in names:
                        r.forked.add(value)
                elif ev == "timer" and isinstance(value, _Pairs):
                    ref = value.get("ref", "unique")
                    if isinstance(ref, str) and not ref.startswith("unique"):
                        r.timer_users.setdefault(ref, set()).add(task)

        for name, task in tasks.items:
            if isinstance(task, _Pairs):
                walk(task, name)
        return r


def _task(
    name: str,
    task: _Pairs,
    where: str,
    duration_s: float,
    default_policy: str,
    c: _Collect,
    refs: _Refs,
) -> dict[str, Any] | None:
    props: dict[str, Any] = {}
    events: list[tuple[str, str, Any, str]] = []  # (type, key, value, where) of the task body
    if any(k == "resources" for k, _ in task.items):
        c.bad(f"{where}.resources", "resources in a task are rt-app's pre-1.0 grammar, which "
              "needs exec, period and lock_order too")  # fmt: skip
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
    task_group = _taskgroup(props, where, c)
    group = task_group
    groups: set[str | None] = set()
    task_sched = _sched(props, where, default_policy, c)

    # The body: the task's own events, or its phases (each looped), each
    # phase opened by a ("cpus", ...) marker with the CPUs rt-app gives it.
    phases_spec = props.get("phases")
    body: list[tuple[str, str, Any, str]] = []
    phase_count = 0
    phase_cpus: list[list[int] | None] = []
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
                _groups_and_clamps(pprops, pwhere, c, phase=True)
                if "taskgroup" in pprops:
                    group = _taskgroup(pprops, pwhere, c)
                groups.add(group)
                if set(pprops) & set(_SCHED_KEYS):
                    merged = {**{k: v for k, v in props.items() if k in _SCHED_KEYS}, **pprops}
                    if _sched(merged, pwhere, default_policy, c) != task_sched:
                        c.refuse(pwhere, "phase-policy", "a policy or priority of its own")
                pc = _cpus(pprops["cpus"], f"{pwhere}.cpus", c) if "cpus" in pprops else None
                eff = pc if pc is not None else task_cpus
                phase_cpus.append(eff)
                if len(pevents) * loop > MAX_PHASES:
                    c.bad(pwhere, f"{loop} loops of {len(pevents)} events is too many")
                    loop = 1
                body.append(("cpus", "cpus", eff, pwhere))
                body += pevents * int(loop)
    else:
        body = events
    c.groups[name] = groups or {task_group}
    # rt-app sets each phase's CPUs as it begins (the phase's, else the
    # task's, else all): the program starts on the first phase's, and a
    # phase whose CPUs differ from the phase before it (the last one, for
    # the first) changes them.
    changing = len({tuple(cs) if cs is not None else None for cs in phase_cpus}) > 1
    if phase_cpus:
        task_cpus = phase_cpus[0]
        kept = []
        n = len(phase_cpus)
        k = 0
        for item in body:
            if item[0] == "cpus":
                if changing and phase_cpus[k] != phase_cpus[k - 1 if k else n - 1]:
                    kept.append(item)
                k += 1
            else:
                kept.append(item)
        body = kept
    if task_cpus is not None:
        prog["affinity"] = task_cpus

    policy, prio, dl = task_sched
    _sched_fields(prog, policy, prio, dl, where, c)
    _clamps(prog, props, where, c)

    for ev, key, _value, w in body:
        if ev in REFUSED:
            c.refuse(f"{w}.{key}", ev, f"event {ev!r}")
    if not [e for e in body if e[0] != "cpus"]:
        c.bad(where, "no events (give run, sleep, barrier or timer events)")
    if len(body) > MAX_PHASES:
        c.bad(where, f"{len(body)} events after expanding phase loops is too many")
    loop = props.get("loop", -1)
    if not _is_int(loop) or loop == 0 or loop < -1:
        c.bad(f"{where}.loop", "expected -1 (until the end) or an integer >= 1")
        loop = 1
    if len(c.problems) > n0:
        return None
    forked = name in refs.forked and instance == 0
    if instance == 0 and not forked:
        c.notes.append(f"{where}.instance is 0: rt-app creates no thread; left out")
        return None
    # Zero-length runs and sleeps do nothing.
    body = [
        e for e in body
        if not (e[0] in _ZERO_IS_NOTHING and _is_num(e[2]) and e[2] == 0)
    ]  # fmt: skip

    timers = [i for i, (ev, *_rest) in enumerate(body) if ev == "timer"]
    if timers and not forked:
        periodic = _periodic(prog, body, timers, int(instance), int(loop), phase_count, refs)
        if periodic is not None:
            return periodic

    phases: list[dict[str, Any]] = []
    for ev, key, value, w in body:
        ph = _phase(name, ev, key, value, w, c, refs)
        if ph is not None:
            phases.append(ph)
    if len(c.problems) > n0:
        return None
    if not any(k in ph for ph in phases for k in _TIMED):
        c.bad(where, "only zero-length events: the task does nothing")
        return None
    prog.update(kind="phases", threads=1 if forked else int(instance), phases=phases)
    if forked:
        prog["forked"] = True
        prog.pop("start_ms", None)
        c.notes.append(f"{where}.instance is 0: started by the tasks that fork it")
    if loop == -1:
        prog["loops"] = _endless_loops(phases, duration_s, 1.0)
        prog["_endless"] = True
        c.notes.append(f"{where}.loop = -1: repeated until the end of the run")
    else:
        prog["loops"] = int(loop)
    return prog


#: Events that do nothing when their value is 0.
_ZERO_IS_NOTHING = ("run", "sleep", "runtime", "mem", "iorun")

#: Phase keys that take time (a task with none of them does nothing).
_TIMED = ("compute_ms", "sleep_ms", "run_for_ms", "timer", "suspend", "pend", "wait", "sync",
          "lock", "shared_barrier")  # fmt: skip


def _phase(
    task: str, ev: str, key: str, value: Any, w: str, c: _Collect, refs: _Refs
) -> dict[str, Any] | None:
    """The hetsched phase of one rt-app event (None after a problem)."""
    at = f"{w}.{key}"

    def name_value(what: str) -> str | None:
        if not isinstance(value, str) or not value:
            c.bad(at, f"expected the {what}'s name")
            return None
        return value

    if ev in ("run", "sleep", "runtime"):
        if not _is_num(value) or value < 0:
            c.bad(at, "expected microseconds >= 0")
            return None
        phase_key = {"run": "compute_ms", "sleep": "sleep_ms", "runtime": "run_for_ms"}[ev]
        return {phase_key: value / 1000.0}
    if ev in ("mem", "iorun"):
        if not _is_int(value) or value < 0:
            c.bad(at, "expected a number of bytes >= 0")
            return None
        if ev == "iorun" and c.io_device != "/dev/null" and not c.rates.io_given:
            c.refuse(at, "io-device", f"iorun to {c.io_device!r}")
            return None
        rate = c.rates.mem if ev == "mem" else c.rates.io
        what = "memset" if ev == "mem" else f"write() to {c.io_device}"
        c.notes.append(
            f"{ev}: bytes are CPU work of the calibration CPU, bytes / {rate:.3g} bytes/s "
            f"({what}; set --{ev.replace('iorun', 'io')}-bytes-per-s to change it)"
        )
        return {"compute_ms": _round(value / rate * 1000.0)}
    if ev == "cpus":
        return {"cpus": value if value is not None else "all"}
    if ev == "barrier":
        n = name_value("barrier")
        return None if n is None else {"shared_barrier": n}
    if ev in ("suspend", "resume"):
        # A bare "suspend" (workgen's shorthand) suspends on the thread's own name.
        if ev == "suspend" and value == "":
            return {"suspend": task}
        n = name_value(ev)
        return None if n is None else {ev: n}
    if ev in ("lock", "unlock"):
        n = name_value("mutex")
        return None if n is None else {ev: n}
    if ev in ("signal", "broad"):
        n = name_value("condition")
        return None if n is None else {ev: n}
    if ev in ("wait", "sync"):
        d = value.dict() if isinstance(value, _Pairs) else {}
        ref, mutex = d.get("ref"), d.get("mutex")
        if not isinstance(ref, str) or not ref or not isinstance(mutex, str) or not mutex:
            c.bad(at, 'expected { "ref": condition, "mutex": mutex }')
            return None
        return {ev: ref, "mutex": mutex}
    if ev == "yield":
        return {"yield": True}
    if ev == "fork":
        n = name_value("task")
        if n is None:
            return None
        if n not in refs.forked:
            c.bad(at, f"no task is named {n!r}")
            return None
        return {"fork": n}
    if ev == "timer":
        d = value.dict() if isinstance(value, _Pairs) else {}
        period = d.get("period")
        if not _is_num(period) or period <= 0:
            c.bad(f"{at}.period", "expected microseconds > 0")
            return None
        ref = d.get("ref", "unique")
        if not isinstance(ref, str):
            c.bad(f"{at}.ref", "expected the timer's name")
            return None
        mode = d.get("mode", "relative")
        if mode not in ("relative", "absolute"):
            c.bad(f"{at}.mode", f"expected 'relative' or 'absolute', got {mode!r}")
            return None
        if mode == "relative":
            c.notes.append(
                f"{at}: relative timer: after an overrun rt-app counts the next period from "
                "the late wake-up; hetsched's timer ticks on from its start (the same while "
                "no period is overrun)"
            )
        # A "unique" timer is the task's own; any other ref is one timer for all.
        name = f"{task}.{ref}" if ref.startswith("unique") else ref
        first = refs.timer_period.setdefault(name, float(period))
        if first != period:
            name = f"{name}@{period:g}us"
            refs.timer_period.setdefault(name, float(period))
            c.notes.append(
                f"{at}: timer {ref!r} is used with periods {first:g} and {period:g} us: "
                f"this one is the timer {name!r}"
            )
        return {"timer": name, "timer_ms": period / 1000.0}
    c.bad(at, f"event {ev!r} cannot be translated")
    return None


def _taskgroup(d: dict[str, Any], where: str, c: _Collect) -> str | None:
    """The task group a task or phase names (None: none; rt-app reads "" so)."""
    tg = d.get("taskgroup")
    if tg is None or tg == "":
        return None
    if not isinstance(tg, str) or not tg.startswith("/"):
        c.bad(f"{where}.taskgroup", f"expected a cgroup path starting with '/', got {tg!r}")
        return None
    return tg.rstrip("/") or "/"


def _check_groups(programs: list[dict[str, Any]], c: _Collect) -> None:
    """Task groups are accepted where group scheduling cannot change the
    schedule: at every instant every fair thread of the workload is in one
    group (a single fair thread, or every fair thread in the same group
    through all its phases). That group's entity is then alone at the root:
    its picks are its threads' picks, its utilization theirs. Otherwise
    groups compete with shares of their own, which is not modelled."""
    by_task = {p["name"].removesuffix("+fork"): p for p in programs}
    named = {n: g for n, g in c.groups.items() if g != {None} and n in by_task}
    if not named:
        return
    for name in named:
        prog = by_task.get(name)
        if prog is not None and prog.get("policy") not in (None,):
            c.bad(
                f"tasks.{name}.taskgroup",
                f"rt-app puts only SCHED_OTHER tasks in task groups, this one is {prog['policy']}",
            )
    if c.problems:
        return
    fair = [p for p in programs if p.get("policy") in (None, "idle")]
    threads = sum(p.get("threads", 1) for p in fair)
    forked = any(p.get("forked") for p in fair)
    first = next(iter(named))
    if threads == 1 and not forked:
        where = ", ".join(sorted(g for g in named[first] if g is not None))
        c.notes.append(
            f"tasks.{first}.taskgroup ({where}): the only fair thread of the workload; its "
            "group competes with nothing at the root, so group scheduling leaves its schedule "
            "as it is"
        )
        return
    seen: dict[str | None, list[str]] = {}
    for p in fair:
        groups = c.groups.get(p["name"].removesuffix("+fork"), {None})
        for g in sorted(groups, key=lambda x: (x is not None, x or "")):
            seen.setdefault(g, []).append(p["name"])
    if len(seen) == 1:
        (g,) = seen
        c.notes.append(
            f"every fair thread is in task group {g} throughout: the group competes with "
            "nothing at the root, so group scheduling leaves the schedule as it is"
        )
        return
    listed = "; ".join(
        f"{g if g is not None else '(none: the group rt-app runs in)'}: {', '.join(ts)}"
        for g, ts in seen.items()
    )
    c.refuse(f"tasks.{first}.taskgroup", "taskgroup", f"task groups that compete ({listed})")


def _groups_and_clamps(d: dict[str, Any], where: str, c: _Collect, phase: bool = False) -> None:
    for key in ("util_min", "util_max"):
        if phase and key in d:
            c.refuse(f"{where}.{key}", "phase-policy", key)


#: rt-app's policy names and the scenario's.
_POLICY_FIELD = {
    "SCHED_OTHER": "other", "SCHED_IDLE": "idle", "SCHED_FIFO": "fifo",
    "SCHED_RR": "rr", "SCHED_DEADLINE": "deadline",
}  # fmt: skip

#: rt-app's priority of a SCHED_FIFO/RR task that gives none
#: (DEFAULT_THREAD_PRIORITY in rt-app's parser).
RT_DEFAULT_PRIORITY = 10


def _sched_fields(
    prog: dict[str, Any],
    policy: str,
    prio: int | None,
    dl: dict[str, Any],
    where: str,
    c: _Collect,
) -> None:
    """The program's `policy`, `priority`, nice, deadline parameters or custom
    slice, from a task's rt-app scheduling parameters. rt-app reads
    ``dl-runtime``/``dl-period``/``dl-deadline`` in microseconds; a missing
    period is the runtime and a missing deadline the period, as its parser
    does."""
    if policy != "SCHED_OTHER":
        prog["policy"] = _POLICY_FIELD[policy]
    us: dict[str, float] = {}
    for key, value in dl.items():
        if not _is_num(value) or value < 0:
            c.bad(f"{where}.{key}", "expected microseconds >= 0")
        else:
            us[key] = float(value)
    if policy in ("SCHED_FIFO", "SCHED_RR"):
        p = RT_DEFAULT_PRIORITY if prio is None else prio
        if not 1 <= p <= 99:
            c.bad(f"{where}.priority", f"a {policy} priority is 1..99, got {p}")
        else:
            prog["priority"] = int(p)
        if us:
            c.notes.append(f"{where}: {', '.join(us)} ignored: the kernel ignores them for "
                           f"{policy}")  # fmt: skip
    elif policy == "SCHED_DEADLINE":
        runtime = us.get("dl-runtime", 0.0)
        if runtime <= 0:
            c.bad(f"{where}.dl-runtime", "SCHED_DEADLINE needs a runtime > 0 (microseconds)")
            return
        period = us.get("dl-period") or runtime
        deadline = us.get("dl-deadline") or period
        prog["dl_runtime_ms"] = _round(runtime / 1000.0)
        prog["dl_deadline_ms"] = _round(deadline / 1000.0)
        prog["dl_period_ms"] = _round(period / 1000.0)
    else:  # SCHED_OTHER, SCHED_IDLE: priority is the nice value
        runtime = us.get("dl-runtime", 0.0)
        if runtime and policy == "SCHED_OTHER":
            # The kernel clamps a SCHED_OTHER custom slice to 0.1-100 ms.
            ms = runtime / 1000.0
            slice_ms = min(100.0, max(0.1, ms))
            if slice_ms != ms:
                c.notes.append(
                    f"{where}.dl-runtime: {runtime:g} us is clamped to {slice_ms:g} ms as "
                    "the kernel clamps a custom slice (0.1-100 ms)"
                )
            prog["slice_ms"] = _round(slice_ms)
        others = [k for k in us if k != "dl-runtime" or policy != "SCHED_OTHER"]
        if others:
            c.notes.append(f"{where}: {', '.join(others)} ignored: the kernel ignores them for "
                           f"{policy}")  # fmt: skip
        if prio is not None:
            if not -20 <= prio <= 19:
                c.bad(f"{where}.priority", f"a {policy} priority is a nice value -20..19")
            else:
                prog["nice"] = int(prio)


def _clamps(prog: dict[str, Any], props: dict[str, Any], where: str, c: _Collect) -> None:
    """A task's util_min/util_max as the program's uclamp_min/uclamp_max
    (rt-app: -1 leaves the clamp unset; above 1024 is invalid)."""
    for key, name in (("util_min", "uclamp_min"), ("util_max", "uclamp_max")):
        v = props.get(key)
        if v is None or v == -1:
            continue
        if not _is_int(v) or not 0 <= v <= 1024:
            c.bad(f"{where}.{key}", f"expected an integer 0..1024 (or -1: unset), got {v!r}")
        else:
            prog[name] = int(v)
    lo, hi = prog.get("uclamp_min"), prog.get("uclamp_max")
    if lo is not None and hi is not None and lo > hi:
        c.bad(f"{where}.util_min", f"{lo} is above util_max {hi}")


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
    refs: _Refs,
) -> dict[str, Any] | None:
    """The periodic shape (run events, then one timer of the task's own at
    the end of the loop, in the task or in its only phase) as a ``periodic``
    program; None when the body has another shape (it becomes phases)."""
    unit = body[: timers[0] + 1]  # one job: its runs, then the timer
    runs = unit[:-1]
    repeats = len(body) // len(unit)
    shape_ok = (
        body == unit * repeats and runs and all(ev == "run" for ev, *_ in runs)
        and phase_count <= 1
    )  # fmt: skip
    if not shape_ok:
        return None
    timer = body[timers[0]][2]
    t = timer.dict() if isinstance(timer, _Pairs) else {}
    period = t.get("period")
    ref = t.get("ref", "unique")
    mode = t.get("mode", "relative")
    if not _is_num(period) or period <= 0 or mode not in ("relative", "absolute"):
        return None  # the phases translation names the problem
    if not isinstance(ref, str) or (not ref.startswith("unique") and (
            instance > 1 or len(refs.timer_users.get(ref, ())) > 1)):  # fmt: skip
        return None  # a timer shared by several threads: timer phases
    if not all(_is_num(v) and v > 0 for _ev, _k, v, _w in runs):
        return None
    work_us = sum(float(v) for _ev, _k, v, _w in runs)
    prog.update(
        kind="periodic", threads=instance, wcet_ms=work_us / 1000.0, period_ms=period / 1000.0
    )
    if loop > 0:
        prog["jobs"] = loop * repeats
    return prog


def _endless_loops(phases: list[dict[str, Any]], duration_s: float, fastest: float) -> int:
    """Loops of a ``loop = -1`` task: more than fit in the run on the fastest
    CPU (speed ``fastest`` × reference), so that the run's end stops it: the
    loop's computing on that CPU, sleeps and busy wall time are a lower
    bound of its time (waits add to it)."""
    compute = sum(p.get("compute_ms", 0.0) for p in phases)
    sleep = sum(p.get("sleep_ms", 0.0) + p.get("run_for_ms", 0.0) for p in phases)
    per_loop_ms = compute / max(fastest, 1e-9) + sleep
    if per_loop_ms <= 0:
        # Only waits (timers, suspends ...): no lower bound on a loop's time.
        return MAX_PHASES
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
