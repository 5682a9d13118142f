"""What a daemon can observe of a process on Linux.

* ``/proc/PID/stat``: state, nice, the CPU it last ran on, user+system time;
* ``/proc/PID/task/TID/schedstat``: time on the CPU and time waiting in a run
  queue, ns (summed over threads; needs ``CONFIG_SCHEDSTATS``-style
  accounting, present in every distribution kernel);
* ``/proc/PID/status``: voluntary and involuntary context switches;
* ``/proc/PID/task/TID/sched``: ``se.nr_migrations`` where the kernel exposes
  it (``CONFIG_SCHED_DEBUG``), else migrations are unknown (NaN);
* hardware counters (instructions, cycles, cache references and misses)
  through ``perf_event_open`` where the machine has a PMU and the
  ``perf_event_paranoid`` setting allows; without them IPC and miss ratios
  are NaN and policies that read them see every comparison false.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import platform
import struct
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
NAN = float("nan")


@dataclass
class Sample:
    """Cumulative counters of one process at one moment."""

    alive: bool
    state: str = "exited"
    cpu: int = 0
    nice: int = 0
    run_ns: int = 0
    wait_ns: int = 0
    csw_voluntary: int = 0
    csw_involuntary: int = 0
    migrations: float = NAN
    threads: int = 0
    counters: dict[str, float] = field(default_factory=dict)


_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "blocked",
    "I": "sleeping",
    "T": "stopped",
    "t": "stopped",
    "Z": "exited",
    "X": "exited",
}


def _stat_fields(text: str) -> list[str]:
    # The command name is in parentheses and may hold spaces.
    return text[text.rindex(")") + 2 :].split()


def tids(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def read(pid: int) -> Sample:
    """A :class:`Sample` of ``pid`` (``alive=False`` once it is gone or a zombie)."""
    try:
        f = _stat_fields(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError):
        return Sample(alive=False)
    state = _STATES.get(f[0], "sleeping")
    s = Sample(alive=state != "exited", state=state, nice=int(f[16]), cpu=int(f[36]))
    run = wait = 0
    migr = 0.0
    have_migr = True
    threads = tids(pid)
    any_running = False
    for tid in threads:
        try:
            r, w, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
            run += int(r)
            wait += int(w)
        except (OSError, ValueError):
            pass
        try:
            tf = _stat_fields(Path(f"/proc/{pid}/task/{tid}/stat").read_text())
            any_running |= tf[0] == "R"
        except (OSError, ValueError):
            pass
        if have_migr:
            m = _migrations(pid, tid)
            if m is None:
                have_migr = False
            else:
                migr += m
    if any_running and state != "exited":
        s.state = "running"
    s.run_ns, s.wait_ns, s.threads = run, wait, len(threads)
    s.migrations = migr if have_migr and threads else NAN
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                s.csw_voluntary = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                s.csw_involuntary = int(line.split()[1])
    except OSError:
        pass
    if not run and not wait:  # no schedstat: fall back to utime + stime
        s.run_ns = (int(f[11]) + int(f[12])) * 1_000_000_000 // CLK_TCK
    return s


def _migrations(pid: int, tid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/task/{tid}/sched").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("se.nr_migrations"):
            return float(line.split(":")[1])
    return None


def runnable_now() -> int:
    """Runnable + running scheduling entities on the machine now (the first
    number of the fourth field of ``/proc/loadavg``), less this reader."""
    fields = Path("/proc/loadavg").read_text().split()
    return max(0, int(fields[3].split("/")[0]) - 1)


def cpu_times() -> dict[int, tuple[float, float]]:
    """Per CPU: (busy seconds, idle seconds) since boot, from ``/proc/stat``."""
    out: dict[int, tuple[float, float]] = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            parts = line.split()
            vals = [int(x) for x in parts[1:]]
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            busy = sum(vals[:8]) - idle
            out[int(parts[0][3:])] = (busy / CLK_TCK, idle / CLK_TCK)
    return out


# -- perf_event_open -----------------------------------------------------------

_PERF_TYPE_HARDWARE = 0
_HW = {"cycles": 0, "instructions": 1, "cache_refs": 2, "cache_misses": 3}
_SYSCALL = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_ATTR_SIZE = 112
# Flags bitfield: disabled(0) inherit(1) ... exclude_kernel(5) exclude_hv(6).
_FLAGS = (1 << 1) | (1 << 5) | (1 << 6)


class Counters:
    """Hardware counters of processes through ``perf_event_open`` (one group of
    four counting events per process, inherited by threads created later)."""

    def __init__(self) -> None:
        self.available = False
        self.reason = ""
        self.fds: dict[int, dict[str, int]] = {}
        nr = _SYSCALL.get(platform.machine())
        if nr is None:
            self.reason = f"perf_event_open: unknown syscall number on {platform.machine()}"
            return
        self._nr = nr
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._open(os.getpid(), "instructions")
        if fd < 0:
            err = ctypes.get_errno()
            self.reason = (
                f"perf_event_open failed ({os.strerror(err)}): no hardware counters "
                "(a VM without a virtual PMU, or kernel.perf_event_paranoid too high "
                "without CAP_PERFMON); IPC, cache miss ratios are unknown (NaN)"
            )
            return
        os.close(fd)
        self.available = True

    def _open(self, pid: int, event: str) -> int:
        attr = bytearray(_ATTR_SIZE)
        struct.pack_into("IIQ", attr, 0, _PERF_TYPE_HARDWARE, _ATTR_SIZE, _HW[event])
        struct.pack_into("Q", attr, 40, _FLAGS)
        buf = ctypes.create_string_buffer(bytes(attr), _ATTR_SIZE)
        fd: int = self._libc.syscall(self._nr, buf, pid, -1, -1, 0)
        return fd

    def attach(self, pid: int) -> None:
        """Start counting ``pid`` (and threads it creates from now on)."""
        if not self.available or pid in self.fds:
            return
        fds: dict[str, int] = {}
        for tid in tids(pid) or [pid]:
            for ev in _HW:
                fd = self._open(tid, ev)
                if fd >= 0:
                    fds[f"{tid}:{ev}"] = fd
        self.fds[pid] = fds

    def read(self, pid: int) -> dict[str, float]:
        """Cumulative counts of ``pid``: ``instructions, cycles, cache_refs,
        cache_misses`` (NaN when not counted)."""
        out = {ev: NAN for ev in _HW}
        fds = self.fds.get(pid)
        if not fds:
            return out
        for key, fd in fds.items():
            ev = key.split(":")[1]
            try:
                (v,) = struct.unpack("Q", os.read(fd, 8))
            except OSError:
                continue
            out[ev] = v if math.isnan(out[ev]) else out[ev] + v
        return out

    def detach(self, pid: int) -> None:
        for fd in self.fds.pop(pid, {}).values():
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        for pid in list(self.fds):
            self.detach(pid)
