"""Emulated asymmetry with cgroups: one group per CPU (a cpuset of that CPU
and a CPU bandwidth quota of its duty cycle), all under one parent group of
the agent's own.

A profile such as ``cpu0=100%, cpu1=50%`` makes CPU 1 deliver half of its
time to the processes placed on it, the way the papers throttled cores with
clock modulation: the CFS bandwidth controller lets the group run for
``duty × period`` of every ``period`` (20 ms by default). A process placed on several
CPUs goes to a group of that combination whose quota is the sum of their
duty cycles (so a set of CPUs delivers their total capacity, though not
per-CPU exactly: see ``docs/real-linux.md``).

cgroup v2 (a ``cgroup2`` mount whose ``cgroup.controllers`` lists ``cpu`` and
``cpuset``) is used when it can be; otherwise cgroup v1 (``cpu`` and
``cpuset`` hierarchies). :meth:`Groups.close` moves every process still in
the groups back to where it came from and removes the groups; it is
idempotent and runs on exit, error and signal.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from . import LinuxError


class Journal(Protocol):
    """What :class:`Groups` tells of its changes before making them, so that
    they can be undone after a crash (:class:`hetsched.linux.state.AgentState`
    is the one the agent uses)."""

    def cgroup(self, path: Path) -> None:
        """A group at ``path`` is about to be created."""

    def moved(self, pid: int, origin: dict[str, str], mounts: dict[str, Path]) -> None:
        """Process ``pid`` is about to leave its groups ``origin`` (controller
        -> path under ``mounts[controller]``)."""


#: Default bandwidth period: short, so that a duty cycle is delivered evenly
#: (a task finishes at most a fraction of a period late or early), not in
#: bursts of the kernel's default 100 ms.
PERIOD_US = 20_000
#: Group weight that lets the emulated CPUs win against other load on a
#: shared machine (v1 ``cpu.shares`` maximum, v2 ``cpu.weight`` maximum).
HIGH_SHARES_V1, HIGH_WEIGHT_V2 = 262_144, 10_000
SYS_CPU = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class Profile:
    """Duty cycle (0, 1] of each emulated CPU, by CPU id."""

    duty: dict[int, float]

    @property
    def cpus(self) -> list[int]:
        return sorted(self.duty)

    def text(self) -> str:
        return ", ".join(f"cpu{c}={100 * d:g}%" for c, d in sorted(self.duty.items()))


def online_cpus() -> set[int]:
    """CPUs that are present and online now."""
    text = (SYS_CPU / "online").read_text().strip()
    return set(parse_cpulist(text))


def parse_cpulist(text: str) -> list[int]:
    """``0-2,5`` → ``[0, 1, 2, 5]``."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


_ITEM = re.compile(r"^(?:cpu)?(\d+)\s*=\s*([^%\s]+)\s*(%?)$")


def parse_profile(text: str, online: set[int] | None = None) -> Profile:
    """Parse ``cpu0=100%, cpu1=50%`` (``%`` optional; a bare number is percent).
    Every CPU must be online and each duty cycle in (0, 100]."""
    if online is None:
        online = online_cpus()
    duty: dict[int, float] = {}
    items = [s.strip() for s in re.split(r"[,;]", text) if s.strip()]
    if not items:
        raise LinuxError("profile: empty; give e.g. 'cpu0=100%, cpu1=50%'")
    for item in items:
        m = _ITEM.match(item)
        if not m:
            raise LinuxError(
                f"profile: {item!r} is not of the form cpuN=P% (e.g. 'cpu0=100%, cpu1=50%')"
            )
        cpu = int(m.group(1))
        try:
            pct = float(m.group(2))
        except ValueError:
            raise LinuxError(
                f"profile: cpu{cpu}: duty cycle {m.group(2)!r} is not a number"
            ) from None
        if not (0.0 < pct <= 100.0) or pct != pct:
            raise LinuxError(f"profile: cpu{cpu}: duty cycle {m.group(2)}% is outside (0, 100]")
        if cpu in duty:
            raise LinuxError(f"profile: cpu{cpu} is given twice")
        if cpu not in online:
            present = (SYS_CPU / f"cpu{cpu}").exists()
            state = "offline" if present else "absent"
            raise LinuxError(
                f"profile: cpu{cpu} is {state}; online CPUs: "
                f"{', '.join(f'cpu{c}' for c in sorted(online))}"
            )
        duty[cpu] = pct / 100.0
    return Profile(duty)


def _mounts() -> list[tuple[str, str, str]]:
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append((parts[1], parts[2], parts[3]))
    return out


def detect(prefer: str = "auto") -> tuple[str, dict[str, Path]]:
    """Which cgroup version to use and its mount points: ``("v2", {"": path})``
    or ``("v1", {"cpu": path, "cpuset": path})``."""
    v2: Path | None = None
    v1: dict[str, Path] = {}
    for mnt, fstype, opts in _mounts():
        if fstype == "cgroup2":
            ctrl = Path(mnt) / "cgroup.controllers"
            try:
                names = ctrl.read_text().split()
            except OSError:
                continue
            if "cpu" in names and "cpuset" in names:
                v2 = Path(mnt)
        elif fstype == "cgroup":
            o = opts.split(",")
            for c in ("cpu", "cpuset"):
                if c in o and c not in v1:
                    v1[c] = Path(mnt)
    if prefer in ("auto", "v2") and v2 is not None:
        return "v2", {"": v2}
    if prefer in ("auto", "v1") and "cpu" in v1 and "cpuset" in v1:
        return "v1", v1
    want = {
        "auto": "cgroup v2 with cpu and cpuset, or cgroup v1 cpu and cpuset",
        "v1": "cgroup v1 cpu and cpuset",
        "v2": "cgroup v2 with the cpu and cpuset controllers",
    }[prefer]
    raise LinuxError(
        f"no usable cgroups: emulated asymmetry needs {want} mounted "
        "(see /proc/mounts; e.g. mount -t cgroup -o cpu,cpuacct none /sys/fs/cgroup/cpu)"
    )


def _write(path: Path, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except PermissionError:
        raise LinuxError(
            f"{path}: permission denied; emulated asymmetry needs root "
            "(CAP_SYS_ADMIN to create cgroups)"
        ) from None
    except OSError as e:
        raise LinuxError(f"{path}: cannot write {value!r}: {e.strerror or e}") from None


def _cgroup_of(pid: int, controller: str) -> str | None:
    """The path of ``pid``'s cgroup in the hierarchy of ``controller`` ('' = v2)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if (controller == "" and ctrls == "") or controller in ctrls.split(","):
            return path
    return None


class Groups:
    """The agent's cgroups (see the module doc). Create with :meth:`open`."""

    def __init__(
        self,
        profile: Profile,
        version: str,
        mounts: dict[str, Path],
        weight: bool,
        period_us: int = PERIOD_US,
        journal: Journal | None = None,
    ):
        self.profile = profile
        # Told of each group before it is made and of each process before it
        # is moved in, so that `hetsched linux cleanup` can undo both.
        self.journal = journal
        self.version = version
        self.mounts = mounts
        self.high_weight = weight
        if not 1000 <= period_us <= 1_000_000:
            raise LinuxError(f"quota period {period_us / 1000:g} ms is outside 1 to 1000 ms")
        self.period_us = period_us
        self.name = f"hetsched-{os.getpid()}"
        self.created: list[tuple[str, Path]] = []  # (controller, group) in creation order
        self.groups: dict[tuple[int, ...], dict[str, Path]] = {}
        self.origin: dict[int, dict[str, str]] = {}  # pid -> controller -> original path
        self.enabled_root_controllers: list[str] = []
        # Emulated fused objects: representative -> borrowed CPUs, and the
        # processes a fuse moved off each borrowed CPU (moved back on split).
        self.fused: dict[int, tuple[int, ...]] = {}
        self.borrowed: dict[int, int] = {}
        self.evicted: dict[int, list[int]] = {}
        # Where processes go back to by default: the agent's own groups.
        self.home = {c: _cgroup_of(os.getpid(), c) or "/" for c in self._controllers()}
        self.closed = False

    @classmethod
    def open(
        cls,
        profile: Profile,
        prefer: str = "auto",
        high_weight: bool = False,
        period_us: int = PERIOD_US,
        journal: Journal | None = None,
    ) -> Groups:
        if os.geteuid() != 0:
            raise LinuxError(
                "emulated asymmetry needs root: creating cgroups needs CAP_SYS_ADMIN "
                "(run as root, or leave out --profile)"
            )
        version, mounts = detect(prefer)
        g = cls(profile, version, mounts, high_weight, period_us, journal)
        try:
            g._make_parent()
            for cpu in profile.cpus:
                g.group_for([cpu])
            g.group_for(profile.cpus)
        except BaseException:
            g.close()
            raise
        return g

    # -- creation -------------------------------------------------------------

    def _controllers(self) -> list[str]:
        return [""] if self.version == "v2" else ["cpuset", "cpu"]

    def _mkdir(self, ctrl: str, path: Path) -> None:
        if self.journal is not None:
            self.journal.cgroup(path)
        try:
            path.mkdir()
        except PermissionError:
            raise LinuxError(
                f"{path}: permission denied; creating cgroups needs root (CAP_SYS_ADMIN)"
            ) from None
        except OSError as e:
            raise LinuxError(f"{path}: cannot create cgroup: {e.strerror}") from None
        self.created.append((ctrl, path))

    def _make_parent(self) -> None:
        cpus = ",".join(str(c) for c in self.profile.cpus)
        if self.version == "v2":
            root = self.mounts[""]
            base = root / (_cgroup_of(os.getpid(), "") or "/").lstrip("/")
            # A v2 group with processes cannot enable controllers for its
            # children ("no internal processes"), so the parent is made beside
            # the agent's own group, under the nearest ancestor.
            anchor = base.parent if base != root else root
            ctrl = (anchor / "cgroup.subtree_control").read_text().split()
            for c in ("cpu", "cpuset"):
                if c not in ctrl:
                    _write(anchor / "cgroup.subtree_control", f"+{c}")
                    if anchor == root:
                        self.enabled_root_controllers.append(c)
            parent = anchor / self.name
            self._mkdir("", parent)
            _write(parent / "cpuset.cpus", cpus)
            _write(parent / "cgroup.subtree_control", "+cpu +cpuset")
            if self.high_weight:
                _write(parent / "cpu.weight", str(HIGH_WEIGHT_V2))
            self.parent = {"": parent}
        else:
            self.parent = {}
            for c in ("cpuset", "cpu"):
                p = self.mounts[c] / self.name
                self._mkdir(c, p)
                self.parent[c] = p
            if self.high_weight:
                _write(self.parent["cpu"] / "cpu.shares", str(HIGH_SHARES_V1))
            cs = self.parent["cpuset"]
            _write(cs / "cpuset.cpus", cpus)
            mems = (self.mounts["cpuset"] / "cpuset.mems").read_text().strip()
            _write(cs / "cpuset.mems", mems)

    def duty(self, cpu: int) -> float:
        """The share of ``cpu`` its processes get now: the profile's duty
        cycle; for the representative of a fused object the sum of the
        object's duty cycles (at most 1: one CPU cannot run faster than
        flat out); 0 for a borrowed CPU."""
        if cpu in self.borrowed:
            return 0.0
        if cpu in self.fused:
            return min(1.0, sum(self.profile.duty[c] for c in (cpu, *self.fused[cpu])))
        return self.profile.duty[cpu]

    def quota_us(self, cpus: list[int]) -> int:
        return round(self.period_us * sum(self.duty(c) for c in cpus))

    def _limits(self, key: tuple[int, ...]) -> tuple[str, str | None]:
        """(cpuset, quota) of the group of ``key`` now: borrowed CPUs leave
        the cpuset (unless nothing else is left) and add nothing to the quota;
        quota None = unlimited. The kernel's smallest quota, 1 ms, stands in
        for zero."""
        live = [c for c in key if c not in self.borrowed] or list(key)
        full = all(self.duty(c) >= 1.0 for c in key)
        quota = None if full else max(1000, self.quota_us(list(key)))
        return ",".join(str(c) for c in live), (None if quota is None else str(quota))

    def _apply(self, key: tuple[int, ...]) -> None:
        cpus_text, quota = self._limits(key)
        paths = self.groups[key]
        if self.version == "v2":
            _write(paths[""] / "cpuset.cpus", cpus_text)
            _write(paths[""] / "cpu.max", f"{quota} {self.period_us}" if quota else "max")
        else:
            _write(paths["cpuset"] / "cpuset.cpus", cpus_text)
            _write(paths["cpu"] / "cpu.cfs_quota_us", quota or "-1")

    def _touching(self, cpus: set[int]) -> list[tuple[int, ...]]:
        return [k for k in self.groups if cpus & set(k)]

    def fuse(self, cpus: list[int]) -> None:
        """An emulated fused object: ``cpus[0]`` (the representative) gets the
        quota of all of them, the others are borrowed: their processes move to
        the representative's group (back on :meth:`split`), their own groups
        keep no quota and no process, and groups of several CPUs drop them
        from their cpusets."""
        if len(cpus) < 2 or len(set(cpus)) != len(cpus):
            raise LinuxError(f"fuse: {cpus}: a fused object needs 2 or more distinct cpus")
        unknown = [c for c in cpus if c not in self.profile.duty]
        if unknown:
            raise LinuxError(f"fuse: cpus {unknown} are not in the profile ({self.profile.text()})")
        busy = [c for c in cpus if c in self.fused or c in self.borrowed]
        if busy:
            raise LinuxError(f"fuse: cpus {busy} already belong to a fused object")
        rep, rest = cpus[0], tuple(cpus[1:])
        rep_group = self.group_for([rep])
        self.fused[rep] = rest
        for c in rest:
            self.borrowed[c] = rep
        for key in self._touching(set(cpus)):
            self._apply(key)
        for c in rest:
            own = self.group_for([c])
            moved = []
            for pid in self._members(next(iter(own.values()))):
                for path in rep_group.values():
                    with contextlib.suppress(LinuxError):
                        _write(path / "cgroup.procs", str(pid))
                moved.append(pid)
            self.evicted[c] = moved

    def split(self, rep: int) -> list[int]:
        """Undo the fused object represented by ``rep``; the processes the
        fuse moved go back to their CPUs. Returns the borrowed CPUs."""
        if rep not in self.fused:
            raise LinuxError(f"split: cpu{rep} represents no fused object")
        rest = self.fused.pop(rep)
        for c in rest:
            del self.borrowed[c]
        for key in self._touching({rep, *rest}):
            self._apply(key)
        rep_members = set(self._members(next(iter(self.group_for([rep]).values()))))
        for c in rest:
            for pid in self.evicted.pop(c, []):
                if pid in rep_members:
                    for path in self.group_for([c]).values():
                        with contextlib.suppress(LinuxError):
                            _write(path / "cgroup.procs", str(pid))
        return list(rest)

    def group_for(self, cpus: list[int]) -> dict[str, Path]:
        """The group of exactly these CPUs (created on first use)."""
        key = tuple(sorted(set(cpus)))
        unknown = [c for c in key if c not in self.profile.duty]
        if unknown or not key:
            raise LinuxError(f"cpus {list(key)} are not all in the profile ({self.profile.text()})")
        if key in self.groups:
            return self.groups[key]
        label = "cpu" + "-".join(str(c) for c in key)
        cpus_text, limit = self._limits(key)
        paths: dict[str, Path] = {}
        if self.version == "v2":
            g = self.parent[""] / label
            self._mkdir("", g)
            _write(g / "cpuset.cpus", cpus_text)
            _write(g / "cpu.max", f"{limit} {self.period_us}" if limit else "max")
            if self.high_weight:
                _write(g / "cpu.weight", str(HIGH_WEIGHT_V2))
            paths[""] = g
        else:
            cs = self.parent["cpuset"] / label
            self._mkdir("cpuset", cs)
            _write(cs / "cpuset.cpus", cpus_text)
            _write(cs / "cpuset.mems", (self.parent["cpuset"] / "cpuset.mems").read_text().strip())
            paths["cpuset"] = cs
            cg = self.parent["cpu"] / label
            self._mkdir("cpu", cg)
            _write(cg / "cpu.cfs_period_us", str(self.period_us))
            _write(cg / "cpu.cfs_quota_us", limit or "-1")
            if self.high_weight:
                _write(cg / "cpu.shares", str(HIGH_SHARES_V1))
            paths["cpu"] = cg
        self.groups[key] = paths
        return paths

    # -- placement ------------------------------------------------------------

    def place(self, pid: int, cpus: list[int]) -> None:
        """Move process ``pid`` (all its threads) into the group of ``cpus``."""
        paths = self.group_for(cpus)
        if pid not in self.origin:
            self.origin[pid] = {c: _cgroup_of(pid, c) or "/" for c in self._controllers()}
            if self.journal is not None:
                self.journal.moved(pid, self.origin[pid], self.mounts)
        for path in paths.values():
            _write(path / "cgroup.procs", str(pid))

    def placement(self, pid: int) -> tuple[int, ...] | None:
        """The CPU combination whose group ``pid`` is in now, if any."""
        ctrl = self._controllers()[0]
        now = _cgroup_of(pid, ctrl)
        if now is None:
            return None
        for key, paths in self.groups.items():
            base = self.mounts[ctrl]
            if "/" + str(paths[ctrl].relative_to(base)) == now:
                return key
        return None

    def throttled_s(self, cpus: list[int]) -> float:
        """Time the group of ``cpus`` was throttled by its quota, seconds."""
        paths = self.groups.get(tuple(sorted(cpus)))
        if not paths:
            return 0.0
        stat = (paths["" if self.version == "v2" else "cpu"] / "cpu.stat").read_text()
        for line in stat.splitlines():
            k, _, v = line.partition(" ")
            if k == "throttled_usec":
                return int(v) / 1e6
            if k == "throttled_time":
                return int(v) / 1e9
        return 0.0

    # -- clean-up -------------------------------------------------------------

    def _members(self, path: Path) -> list[int]:
        try:
            return [int(x) for x in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def members(self) -> set[int]:
        """Every process in any of the groups now."""
        return {pid for _, path in self.created for pid in self._members(path)}

    def close(self) -> list[str]:
        """Move remaining processes back and remove every group this object
        created; returns problems (empty when all went well)."""
        if self.closed:
            return []
        self.closed = True
        problems: list[str] = []
        for ctrl, path in reversed(self.created):
            for pid in self._members(path):
                back = self.origin.get(pid, self.home).get(ctrl, "/")
                target = self.mounts[ctrl] / back.lstrip("/") / "cgroup.procs"
                try:
                    with open(target, "w") as f:
                        f.write(str(pid))
                except OSError:
                    try:  # its original group may be gone: the hierarchy's root
                        with open(self.mounts[ctrl] / "cgroup.procs", "w") as f:
                            f.write(str(pid))
                    except OSError as e:
                        problems.append(f"cannot move pid {pid} out of {path}: {e}")
        for _, path in reversed(self.created):
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # exiting tasks may linger for a moment
                    time.sleep(0.02)
            else:
                problems.append(f"cannot remove cgroup {path}")
        if self.version == "v2":
            root = self.mounts[""]
            for c in reversed(self.enabled_root_controllers):
                with contextlib.suppress(LinuxError, OSError):
                    _write(root / "cgroup.subtree_control", f"-{c}")
        return problems


def leftover_groups() -> list[Path]:
    """Groups named ``hetsched-PID`` whose PID no longer exists (left by an
    agent that was killed with SIGKILL)."""
    out: list[Path] = []
    seen: set[Path] = set()
    for mnt, fstype, _ in _mounts():
        if fstype not in ("cgroup", "cgroup2") or Path(mnt) in seen:
            continue
        seen.add(Path(mnt))
        for p in Path(mnt).rglob("hetsched-*"):
            m = re.fullmatch(r"hetsched-(\d+)", p.name)
            if m and p.is_dir() and not Path(f"/proc/{m.group(1)}").exists():
                out.append(p)
    return out


def remove_tree(path: Path) -> None:
    """Remove a cgroup and its children (deepest first); processes in them are
    moved to the hierarchy's root first."""
    mount = path
    while (mount.parent / "cgroup.procs").exists() and mount.parent != mount:
        mount = mount.parent
    for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        _evacuate(sub, mount)
        sub.rmdir()
    _evacuate(path, mount)
    path.rmdir()


def _evacuate(path: Path, root: Path) -> None:
    try:
        pids = (path / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            with open(root / "cgroup.procs", "w") as f:
                f.write(pid)
        except OSError:
            pass
