"""What a running ``hetsched linux agent`` has launched and changed, on disk,
so that ``hetsched linux cleanup`` can undo it after the agent was killed
with SIGKILL (which no clean-up handler survives).

The agent keeps one JSON file, ``agent-<PID>.json`` in :func:`state_dir`,
and rewrites it (whole, then renamed) **before** each change it makes:

- ``launched``: programs it started, with their PID, process group and start
  time (``/proc/PID/stat`` field 22, clock ticks since boot). A PID is only
  acted on while its start time is still the recorded one, so a PID the
  kernel has since given to another program is never signalled.
- ``affinity`` / ``nice``: given processes (``--pid``) whose CPU affinity or
  nice value it changed, with the value before its first change.
- ``frequency``: CPUs whose ``scaling_setspeed`` it wrote, with the value
  before.
- ``cgroups``: the groups it created; ``moved``: given processes it moved
  into them, with the groups they came from.

(A launched program is recorded right after ``fork``/``exec`` returns its
PID: a SIGKILL in between leaves that one program unrecorded; with emulated
CPUs it is still in the agent's groups, whose remaining processes
``cleanup`` stops.)

The file is removed when the agent ends and has cleaned up after itself.
:func:`cleanup` undoes the file of every agent that is no longer running
and says what it did.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

#: Environment variable that moves the state folder (tests, several users).
STATE_DIR_ENV = "HETSCHED_STATE_DIR"
#: How long stopped programs get to exit after SIGTERM before SIGKILL, s
#: (the same grace period as the agent's own clean-up).
STOP_GRACE_S = 2.0


def state_dir() -> Path:
    """Where agents keep their state files: ``$HETSCHED_STATE_DIR``, else
    ``/run/hetsched`` for root, else ``<tmp>/hetsched-<uid>``."""
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env)
    if os.geteuid() == 0 and Path("/run").is_dir():
        return Path("/run/hetsched")
    return Path(tempfile.gettempdir()) / f"hetsched-{os.geteuid()}"


def start_time(pid: int) -> int | None:
    """The start time of process (or thread) ``pid`` in clock ticks since
    boot, or None if there is no such process (or it is a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def same_process(pid: int, start: int | None) -> bool:
    """Whether ``pid`` is still the process that had start time ``start``."""
    return start is not None and start_time(pid) == start


class AgentState:
    """The state file of this agent (see the module doc)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.dir = directory or state_dir()
        self.pid = os.getpid()
        self.path = self.dir / f"agent-{self.pid}.json"
        self.doc: dict[str, Any] = {
            "agent_pid": self.pid,
            "agent_start": start_time(self.pid),
            "launched": [],
            "affinity": [],
            "nice": [],
            "frequency": [],
            "cgroups": [],
            "moved": [],
        }
        self._seen: set[tuple[str, Any]] = set()

    def write(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.doc, indent=1) + "\n", encoding="utf-8")
        tmp.replace(self.path)

    def _add(self, kind: str, key: Any, entry: dict[str, Any]) -> None:
        # Only the first change of a thing is kept: it has the original value.
        if (kind, key) in self._seen:
            return
        self._seen.add((kind, key))
        self.doc[kind].append(entry)
        self.write()

    def launched(self, pid: int, name: str) -> None:
        self._add("launched", pid, {"pid": pid, "start": start_time(pid), "name": name})

    def ended(self, pid: int) -> None:
        """A launched program has ended (and was reaped): nothing to stop."""
        if ("launched", pid) in self._seen:
            self._seen.discard(("launched", pid))
            self.doc["launched"] = [e for e in self.doc["launched"] if e["pid"] != pid]
            self.write()

    def affinity(self, pid: int, old: set[int] | list[int]) -> None:
        self._add("affinity", pid, {"pid": pid, "start": start_time(pid), "old": sorted(old)})

    def nice(self, tid: int, old: int) -> None:
        self._add("nice", tid, {"tid": tid, "start": start_time(tid), "old": old})

    def frequency(self, cpu: int, path: Path, old: str) -> None:
        self._add("frequency", cpu, {"cpu": cpu, "path": str(path), "old": old})

    def cgroup(self, path: Path) -> None:
        self._add("cgroups", str(path), {"path": str(path)})

    def moved(self, pid: int, origin: dict[str, str], mounts: dict[str, Path]) -> None:
        back = {str(mounts[c] / p.lstrip("/")): c for c, p in origin.items()}
        self._add("moved", pid, {"pid": pid, "start": start_time(pid), "back": sorted(back)})

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def cleanup(directory: Path | None = None) -> tuple[list[str], list[str]]:
    """Undo what every agent that is no longer running recorded (see the
    module doc). Returns ``(what was done, problems)``, one line each."""
    d = directory or state_dir()
    done: list[str] = []
    problems: list[str] = []
    for path in sorted(d.glob("agent-*.json")) if d.is_dir() else []:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            agent = int(doc["agent_pid"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            problems.append(f"{path}: unreadable state file ({e}); remove it by hand")
            continue
        if same_process(agent, doc.get("agent_start")):
            done.append(f"agent {agent} is still running: its changes are left to it")
            continue
        before = len(problems)
        _undo(doc, agent, done, problems)
        if len(problems) == before:
            path.unlink()
        else:
            problems.append(f"{path} is kept: run hetsched linux cleanup again once fixed")
    return done, problems


def _undo(doc: dict[str, Any], agent: int, done: list[str], problems: list[str]) -> None:
    of = f"(agent {agent})"
    # 1. Stop the programs it launched (each leads its own process group).
    stopping = []
    for e in doc.get("launched", []):
        pid, name = int(e["pid"]), e.get("name", "?")
        if not same_process(pid, e.get("start")):
            done.append(f"{name} (pid {pid}) {of}: no longer running")
            continue
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        except PermissionError:
            problems.append(f"{name} (pid {pid}) {of}: not allowed to stop it (needs root)")
            continue
        stopping.append((pid, e.get("start"), name))
    deadline = time.monotonic() + STOP_GRACE_S
    while any(same_process(p, s) for p, s, _ in stopping) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid, start, name in stopping:
        how = "SIGTERM"
        if same_process(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            how = "SIGKILL"
        done.append(f"stopped {name} (pid {pid}) {of} with {how}")
    # 2. Given processes: affinity and nice values back.
    for e in doc.get("affinity", []):
        pid, old = int(e["pid"]), [int(c) for c in e["old"]]
        if not same_process(pid, e.get("start")):
            continue
        try:
            for tid in _tids(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.sched_setaffinity(tid, old)
            done.append(f"restored the CPU affinity of pid {pid} to {_cpulist(old)} {of}")
        except OSError as err:
            problems.append(f"pid {pid}: cannot restore its CPU affinity: {err}")
    for e in doc.get("nice", []):
        tid, nice = int(e["tid"]), int(e["old"])
        if not same_process(tid, e.get("start")):
            continue
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
            done.append(f"restored the nice value of thread {tid} to {nice} {of}")
        except OSError as err:
            problems.append(f"thread {tid}: cannot restore its nice value: {err}")
    # 3. Clock frequencies.
    for e in doc.get("frequency", []):
        path = Path(e["path"])
        try:
            path.write_text(str(e["old"]))
            done.append(f"restored cpu{e['cpu']}'s {path.name} to {e['old']} {of}")
        except OSError as err:
            problems.append(f"{path}: cannot restore {e['old']}: {err}")
    # 4. cgroups: given processes back where they came from; anything else
    #    still in the groups descends from what the agent launched and stops.
    moved = {int(e["pid"]): e for e in doc.get("moved", []) if same_process(e["pid"], e["start"])}
    launched = {int(e["pid"]) for e in doc.get("launched", [])}
    for pid, e in moved.items():
        if pid in launched:
            continue
        for target in e.get("back", []):
            try:
                Path(target, "cgroup.procs").write_text(str(pid))
            except OSError as err:
                problems.append(f"pid {pid}: cannot move it back to {target}: {err}")
        done.append(f"moved pid {pid} back to its cgroups {of}")
    groups = sorted((Path(e["path"]) for e in doc.get("cgroups", [])), key=lambda p: -len(p.parts))
    for g in groups:
        if not g.is_dir():
            continue
        for pid in _members(g):
            if pid not in moved or pid in launched:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
    from .cgroups import remove_tree

    recorded = set(groups)
    for g in groups:
        # A group inside another recorded one goes with it.
        if not g.is_dir() or any(p in recorded for p in g.parents):
            continue
        last: OSError | None = None
        for _ in range(50):  # killed processes may linger in a group for a moment
            try:
                remove_tree(g)
                done.append(f"removed cgroup {g} {of}")
                break
            except OSError as err:
                last = err
                time.sleep(0.02)
        else:
            problems.append(f"cannot remove cgroup {g}: {last}")


def _members(group: Path) -> list[int]:
    out: list[int] = []
    for f in [group / "cgroup.procs", *group.rglob("*/cgroup.procs")]:
        with contextlib.suppress(OSError, ValueError):
            out += [int(x) for x in f.read_text().split()]
    return out


def _tids(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def _cpulist(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)
