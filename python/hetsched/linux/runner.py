"""``hetsched linux agent``: run an :class:`~hetsched.policy.Agent` on real
processes.

The runner launches the programs of a :mod:`~hetsched.linux.workload` (or
adopts given PIDs), samples them every ``period_ms`` and calls the agent's
``sample(cx)`` with a :class:`RealContext`, which offers the agent the same
observations and actions as the simulator's ``Context`` does for agents:
``cx.processes()``, ``cx.load_avg()``, ``cx.now_ns``, ``cx.ncpus``,
``cx.cpusets()``, ``cx.cpuset_load(i)``, ``cx.cpu_mhz(cpu)`` and the actions
``cx.set_affinity``, ``cx.set_nice`` and ``cx.set_frequency``. A task id is
the index of a program of the workload (or of a given PID); every instance
of a repeated program is the same task, as in the simulator.

Safety: the runner only acts on processes it launched or was given; on exit,
error or SIGTERM/SIGINT/SIGHUP it stops what it launched, restores every
affinity and nice value it changed on given processes, moves them back to
their cgroups and removes its own cgroups. Before each change it records it
in a state file (:mod:`~hetsched.linux.state`), so that
``hetsched linux cleanup`` can undo it after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import LinuxError, procfs, progs
from .cgroups import Groups, Profile, online_cpus
from .state import STATE_DIR_ENV, AgentState
from .workload import RealProgram, RealWorkload

NAN = float("nan")
#: The real-time priority of the agent's control loop in high-weight runs
#: (the lowest: above every normal task, below every real-time one).
CONTROL_RT_PRIORITY = 1

_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


class Stop(Exception):
    """Raised inside the run loop when a termination signal arrives."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


@dataclass
class Instance:
    """One run of a program (or a given PID)."""

    program: int
    instance: int
    pid: int
    start_s: float
    popen: subprocess.Popen[bytes] | None = None
    out_path: Path | None = None
    end_s: float | None = None
    status: int | None = None  # exit code, or -signal
    output: dict[str, Any] = field(default_factory=dict)


@dataclass
class Task:
    """A task: one program of the workload (all its instances) or one given PID."""

    id: int
    name: str
    spec: RealProgram | None
    given: bool = False
    current: Instance | None = None
    instances: list[Instance] = field(default_factory=list)
    next_start_s: float = 0.0
    remaining: int = 1
    error: str | None = None
    last: procfs.Sample | None = None  # at the previous agent sample
    last_t: float = 0.0
    obs: dict[str, Any] | None = None
    # Cumulative totals over finished instances + the current one.
    totals: dict[str, float] = field(default_factory=dict)
    latest: procfs.Sample | None = None
    counters: dict[str, float] = field(default_factory=dict)
    c_prev: dict[str, float] = field(default_factory=dict)  # counters at the last sample


def _nominal_mhz(cpu: int) -> int:
    base = Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq")
    for name in ("cpuinfo_max_freq", "scaling_max_freq"):
        try:
            return int((base / name).read_text()) // 1000
        except (OSError, ValueError):
            continue
    try:
        n = -1
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("processor"):
                n = int(line.split(":")[1])
            elif line.startswith("cpu MHz") and n == cpu:
                return round(float(line.split(":")[1]))
    except OSError:
        pass
    return 1000


class RealContext:
    """The agent's view of the real machine during one ``sample`` call (see the
    module doc). Task ids are indices of :attr:`Runner.tasks`."""

    def __init__(self, runner: Runner) -> None:
        self._r = runner

    @property
    def now_ns(self) -> int:
        return int(self._r.elapsed() * 1e9)

    @property
    def ncpus(self) -> int:
        return len(self._r.cpus)

    @property
    def ntasks(self) -> int:
        return len(self._r.tasks)

    def processes(self) -> list[dict[str, Any]]:
        return [t.obs for t in self._r.tasks if t.obs is not None]

    def load_avg(self) -> float:
        return float(procfs.runnable_now())

    def cpusets(self) -> list[dict[str, Any]]:
        return [dict(c) for c in self._r.cpusets]

    def cpuset_load(self, index: int) -> int:
        sets = self._r.cpusets
        if not 0 <= index < len(sets):
            raise LinuxError(f"cpuset {index} does not exist ({len(sets)} cpusets)")
        cpus = set(sets[index]["cpus"])
        return sum(
            1
            for t in self._r.tasks
            if t.obs is not None and t.obs["state"] == "running" and t.obs["cpu"] in cpus
        )

    def cpu_mhz(self, cpu: int) -> int:
        return self._r.effective_mhz(cpu)

    def cpu_rating(self, cpu: int) -> float:
        lent = self._r.groups.borrowed if self._r.groups else {}
        slowest = min(self._r.effective_mhz(c) for c in self._r.cpus if c not in lent)
        return self._r.effective_mhz(cpu) / slowest

    def cpu_domain(self, cpu: int) -> int:
        return cpu

    def cpu_online(self, cpu: int) -> bool:
        return cpu in online_cpus()

    def task_affinity(self, task: int) -> list[int]:
        pid = self._r.pid_of(task)
        return sorted(os.sched_getaffinity(pid)) if pid else list(self._r.cpus)

    def task_nice(self, task: int) -> int:
        pid = self._r.pid_of(task)
        return os.getpriority(os.PRIO_PROCESS, pid) if pid else 0

    def set_affinity(self, task: int, cpus: list[int]) -> None:
        self._r.set_affinity(task, list(cpus))

    def set_nice(self, task: int, nice: int) -> None:
        self._r.set_nice(task, nice)

    def set_frequency(self, domain: int, mhz: int) -> None:
        self._r.set_frequency(domain, mhz)

    def fuse(self, cpus: list[int]) -> None:
        """Emulated fused object of ``cpus`` (``cpus[0]`` represents it)."""
        self._r.fuse(list(cpus))

    def split(self, cpu: int) -> None:
        """Split the emulated fused object represented by ``cpu``."""
        self._r.split(cpu)

    def fused(self) -> dict[int, list[int]]:
        """Emulated fused objects now: representative -> borrowed CPUs."""
        g = self._r.groups
        return {r: list(b) for r, b in g.fused.items()} if g else {}


class Runner:
    """Launches, observes, lets the agent act, cleans up. Use :meth:`run`."""

    def __init__(
        self,
        workload: RealWorkload | None,
        agent: Any | None,
        *,
        pids: list[int] = (),  # type: ignore[assignment]
        profile: Profile | None = None,
        period_ms: float | None = None,
        duration_s: float | None = None,
        cgroup_version: str = "auto",
        high_weight: bool = False,
        quota_period_ms: float = 20.0,
        poll_ms: float = 5.0,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.workload = workload
        self.agent = agent
        self.profile = profile
        self.period_s = (
            period_ms if period_ms is not None else getattr(agent, "period_ms", 100.0)
        ) / 1000.0
        if not self.period_s > 0:
            raise LinuxError(f"--period-ms: {period_ms} must be > 0")
        self.duration_s = (
            duration_s if duration_s is not None else (workload.duration_s if workload else None)
        )
        self.cgroup_version = cgroup_version
        self.high_weight = high_weight
        self.quota_period_ms = quota_period_ms
        self.poll_s = poll_ms / 1000.0
        self.log = log or (lambda m: print(f"hetsched: {m}", file=sys.stderr))
        self.warnings: list[str] = []
        self.cpus = sorted(profile.cpus) if profile else sorted(os.sched_getaffinity(0))
        self.groups: Groups | None = None
        self.counters: procfs.Counters | None = None
        self.tasks: list[Task] = []
        self.changed_affinity: dict[int, set[int]] = {}  # pid -> original mask (given PIDs)
        self.changed_nice: dict[int, int] = {}  # tid -> original nice (given PIDs)
        self.t0 = 0.0
        self.outdir = Path(tempfile.mkdtemp(prefix="hetsched-linux-"))
        self.cpusets: list[dict[str, Any]] = []
        self.cpu_t0: dict[int, tuple[float, float]] = {}
        self.samples = 0
        self.agent_errors: list[str] = []
        self._cpufreq_warned = False
        self.fuse_log: list[tuple[float, str, list[int]]] = []  # (s, fuse/split, cpus)
        # The control loop's scheduling policy and priority before the run
        # raised them (`_control_priority`), to restore after it.
        self._old_sched: tuple[int, int] | None = None
        # What this agent launched and changed, on disk before each change
        # (for `hetsched linux cleanup` after a SIGKILL); made by run().
        self.state: AgentState | None = None
        if workload:
            for i, p in enumerate(workload.programs):
                self.tasks.append(Task(i, p.name, p, next_start_s=p.start_s, remaining=p.repeat))
        for pid in pids:
            if not Path(f"/proc/{pid}").exists():
                raise LinuxError(f"--pid {pid}: no such process")
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                comm = str(pid)
            t = Task(len(self.tasks), f"{comm}-{pid}", None, given=True, remaining=0)
            inst = Instance(t.id, 0, pid, 0.0)
            t.current = inst
            t.instances.append(inst)
            self.tasks.append(t)
        if not self.tasks:
            raise LinuxError("nothing to run: give a workload file or --pid")

    # -- helpers --------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def pid_of(self, task: int) -> int | None:
        if not 0 <= task < len(self.tasks):
            raise LinuxError(f"task {task} does not exist ({len(self.tasks)} tasks)")
        cur = self.tasks[task].current
        return cur.pid if cur is not None and cur.end_s is None else None

    def effective_mhz(self, cpu: int) -> int:
        if self.groups is not None and cpu in self.profile.duty:  # type: ignore[union-attr]
            return max(1, round(_nominal_mhz(cpu) * self.groups.duty(cpu)))
        duty = self.profile.duty.get(cpu, 1.0) if self.profile else 1.0
        return max(1, round(_nominal_mhz(cpu) * duty))

    def _agent_name(self) -> str:
        return str(getattr(self.agent, "name", type(self.agent).__name__))

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)
            self.log(f"warning: {msg}")

    # -- actions ----------------------------------------------------------------

    def set_affinity(self, task: int, cpus: list[int]) -> None:
        pid = self.pid_of(task)
        if pid is None:
            return
        bad = [c for c in cpus if c not in self.cpus]
        if not cpus or bad:
            raise LinuxError(f"set_affinity: cpus {cpus} not all among {self.cpus}")
        lent = [c for c in cpus if self.groups is not None and c in self.groups.borrowed]
        if lent:
            raise LinuxError(
                f"set_affinity: cpu{lent[0]} is borrowed by the fused object of "
                f"cpu{self.groups.borrowed[lent[0]]}; split it first"  # type: ignore[union-attr]
            )
        t = self.tasks[task]
        if t.given and pid not in self.changed_affinity:
            self.changed_affinity[pid] = os.sched_getaffinity(pid)
            if self.state is not None:
                self.state.affinity(pid, self.changed_affinity[pid])
        if self.groups is not None:
            try:
                self.groups.place(pid, cpus)
            except LinuxError as e:
                if Path(f"/proc/{pid}").exists():
                    raise
                self.log(f"note: {t.name} exited while moving: {e}")
                return
        for tid in procfs.tids(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.sched_setaffinity(tid, cpus)

    def fuse(self, cpus: list[int]) -> None:
        """Emulated fused object (see ``Groups.fuse``); needs a profile."""
        if self.groups is None:
            raise LinuxError("fuse: an emulated fused object needs emulated CPUs (--profile)")
        self.groups.fuse(cpus)
        self.fuse_log.append((round(self.elapsed(), 4), "fuse", list(cpus)))

    def split(self, cpu: int) -> None:
        if self.groups is None:
            raise LinuxError("split: an emulated fused object needs emulated CPUs (--profile)")
        rest = self.groups.split(cpu)
        self.fuse_log.append((round(self.elapsed(), 4), "split", [cpu, *rest]))

    def set_nice(self, task: int, nice: int) -> None:
        if not -20 <= nice <= 19:
            raise LinuxError(f"set_nice: nice {nice} out of range -20..19")
        pid = self.pid_of(task)
        if pid is None:
            return
        t = self.tasks[task]
        for tid in procfs.tids(pid):
            try:
                if t.given and tid not in self.changed_nice:
                    self.changed_nice[tid] = os.getpriority(os.PRIO_PROCESS, tid)
                    if self.state is not None:
                        self.state.nice(tid, self.changed_nice[tid])
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except ProcessLookupError:
                pass
            except PermissionError:
                raise LinuxError(
                    f"set_nice: lowering the nice value of pid {tid} needs CAP_SYS_NICE (root)"
                ) from None

    def set_frequency(self, domain: int, mhz: int) -> None:
        base = Path(f"/sys/devices/system/cpu/cpu{domain}/cpufreq")
        try:
            gov = (base / "scaling_governor").read_text().strip()
        except OSError:
            gov = None
        if gov != "userspace":
            if not self._cpufreq_warned:
                self._cpufreq_warned = True
                why = "no cpufreq driver" if gov is None else f"its governor is {gov!r}"
                self.warn(
                    f"set_frequency ignored: cpu{domain} has {why}, not 'userspace' "
                    "(select it with cpupower frequency-set -g userspace to let agents set clocks)"
                )
            return
        if self.state is not None:
            with contextlib.suppress(OSError):
                old = (base / "scaling_setspeed").read_text().strip()
                self.state.frequency(domain, base / "scaling_setspeed", old)
        (base / "scaling_setspeed").write_text(str(int(mhz) * 1000))

    # -- launching --------------------------------------------------------------

    def _launch(self, t: Task) -> None:
        assert t.spec is not None
        idx = len(t.instances)
        out = self.outdir / f"{t.name}.{idx}.out"
        err = self.outdir / f"{t.name}.{idx}.err"
        try:
            cmd = progs.resolve_command(t.spec.command)
        except LinuxError as e:
            self._failed(t, str(e))
            return
        groups = self.groups
        all_cpus = sorted(t.spec.cpus) if t.spec.cpus else list(self.cpus)
        bad = [c for c in all_cpus if c not in self.cpus]
        if bad:
            self._failed(t, f"cpus {bad} are not among the CPUs in use {self.cpus}")
            return
        nice = t.spec.nice

        def in_child() -> None:
            # Runs in the child before exec: place it before it does any work.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            # A process group of its own (to stop it with its children), but
            # the agent's session: with autogroup scheduling a new session
            # would be a group of its own and nice values would not compare.
            os.setpgid(0, 0)
            if nice:
                os.setpriority(os.PRIO_PROCESS, 0, nice)
            os.sched_setaffinity(0, all_cpus)
            if groups is not None:
                for path in groups.group_for(all_cpus).values():
                    with open(path / "cgroup.procs", "w") as f:
                        f.write(str(os.getpid()))

        # A stop signal must not arrive between the fork and the moment the
        # new process is recorded, or it would be left running: hold the
        # signals until then (the child unblocks them before exec).
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        # Its start: just before the fork (Popen returns only after the exec,
        # and a busy machine may delay the agent's return from it).
        started = self.elapsed()
        try:
            try:
                with out.open("wb") as fo, err.open("wb") as fe:
                    p = subprocess.Popen(
                        cmd,
                        stdout=fo,
                        stderr=fe,
                        stdin=subprocess.DEVNULL,
                        preexec_fn=in_child,
                    )
            except (OSError, subprocess.SubprocessError) as e:
                why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                self._failed(t, f"{' '.join(t.spec.command)}: cannot start: {why}")
                return
            inst = Instance(t.id, idx, p.pid, started, popen=p, out_path=out)
            t.current = inst
            t.instances.append(inst)
            if self.state is not None:
                self.state.launched(p.pid, f"{t.name}.{idx}")
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        t.remaining -= 1
        t.last = None
        if self.counters is not None and self.counters.available:
            self.counters.attach(p.pid)

    def _failed(self, t: Task, msg: str) -> None:
        t.error = msg
        t.remaining = 0
        self.warn(f"{t.name}: {msg}; the other programs go on")

    def _reap(self, t: Task) -> None:
        inst = t.current
        if inst is None or inst.end_s is not None:
            return
        if inst.popen is not None:
            # wait4 rather than Popen.poll: its resource usage holds the final
            # CPU time and context switches, which /proc no longer shows.
            try:
                pid, status, ru = os.wait4(inst.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status, ru = inst.pid, 0, None
            if pid == 0:
                return
            rc = os.waitstatus_to_exitcode(status)
            inst.popen.returncode = rc
            inst.status = rc
            if ru is not None:
                final = t.latest or procfs.Sample(alive=False)
                cpu_ns = round((ru.ru_utime + ru.ru_stime) * 1e9)
                final.run_ns = max(final.run_ns, cpu_ns)
                final.csw_voluntary = max(final.csw_voluntary, ru.ru_nvcsw)
                final.csw_involuntary = max(final.csw_involuntary, ru.ru_nivcsw)
                t.latest = final
        elif Path(f"/proc/{inst.pid}").exists() and procfs.read(inst.pid).alive:
            return
        self._account(t)
        inst.end_s = self.elapsed()
        if self.state is not None and inst.popen is not None:
            self.state.ended(inst.pid)
        if inst.out_path is not None:
            try:
                lines = inst.out_path.read_text().strip().splitlines()
                if lines and lines[-1].startswith("{"):
                    inst.output = json.loads(lines[-1])
            except (OSError, ValueError):
                pass
        if inst.status is not None and inst.status != 0:
            how = f"signal {-inst.status}" if inst.status < 0 else f"status {inst.status}"
            self.warn(f"{t.name} instance {inst.instance} ended with {how}")
        if self.counters is not None:
            self.counters.detach(inst.pid)
        t.next_start_s = inst.end_s

    def _account(self, t: Task) -> None:
        """Fold the current instance's latest sample into the task totals."""
        s = t.latest
        if s is None:
            return
        for k, v in (
            ("run_ns", s.run_ns),
            ("wait_ns", s.wait_ns),
            ("csw_voluntary", s.csw_voluntary),
            ("csw_involuntary", s.csw_involuntary),
            ("migrations", s.migrations),
        ):
            t.totals[k] = t.totals.get(k, 0.0) + v
        for k, v in t.counters.items():
            t.totals[k] = t.totals.get(k, 0.0) + v
        t.latest = None
        t.counters = {}

    # -- observing --------------------------------------------------------------

    def _observe(self) -> None:
        now = self.elapsed()
        for t in self.tasks:
            inst = t.current
            if inst is None or inst.end_s is not None:
                t.obs = None
                continue
            s = procfs.read(inst.pid)
            if not s.alive:
                t.obs = None
                continue
            t.latest = s
            if self.counters is not None and self.counters.available:
                t.counters = self.counters.read(inst.pid)
            prev, prev_t = t.last, t.last_t
            if prev is None:
                prev, prev_t = procfs.Sample(alive=True), inst.start_s
            dt = max(now - prev_t, 1e-9)
            d_run = (s.run_ns - prev.run_ns) / 1e9
            d_wait = (s.wait_ns - prev.wait_ns) / 1e9
            d_csw = (s.csw_voluntary + s.csw_involuntary) - (
                prev.csw_voluntary + prev.csw_involuntary
            )
            d_mig = s.migrations - (prev.migrations if not math.isnan(prev.migrations) else 0.0)
            c_prev = t.c_prev if t.last is not None else {}
            c = t.counters or {}
            d = {
                k: c.get(k, NAN) - c_prev.get(k, 0.0)
                for k in ("instructions", "cycles", "cache_refs", "cache_misses")
            }
            ipc = (
                d["instructions"] / d["cycles"]
                if d["cycles"] and d["cycles"] == d["cycles"]
                else NAN
            )
            t.obs = {
                "task": t.id,
                "program": t.name,
                "state": s.state if s.state in ("running", "sleeping", "blocked") else "sleeping",
                "cpu": s.cpu,
                "nice": s.nice,
                "affinity": sorted(os.sched_getaffinity(inst.pid)) if s.alive else [],
                "cpu_util": max(0.0, d_run / dt),
                "ipc": ipc,
                "miss_ratio": d["cache_misses"] / d["cache_refs"] if d["cache_refs"] else NAN,
                "misses_per_instr": d["cache_misses"] / d["instructions"]
                if d["instructions"]
                else NAN,
                "csw_per_s": d_csw / d_run if d_run > 0 else 0.0,
                "migrations_per_s": d_mig / d_run
                if d_run > 0
                else (NAN if math.isnan(d_mig) else 0.0),
                "wait_frac": min(1.0, max(0.0, d_wait / dt)),
                "runtime_s": s.run_ns / 1e9,
            }
            t.last, t.last_t = s, now
            t.c_prev = dict(c)

    # -- the run --------------------------------------------------------------

    def _setup(self) -> None:
        if self.profile is not None:
            self.groups = Groups.open(
                self.profile,
                self.cgroup_version,
                self.high_weight,
                period_us=round(self.quota_period_ms * 1000),
                journal=self.state,
            )
            self.cpusets = [
                {"name": f"cpu{c}", "cpus": [c], "mhz": self.effective_mhz(c)}
                for c in self.profile.cpus
            ]
        self.counters = procfs.Counters()
        if not self.counters.available:
            self.warn(self.counters.reason)
        if self.groups is not None:
            for t in self.tasks:
                if t.given and t.current is not None:
                    self.groups.place(t.current.pid, list(self.cpus))
        for t in self.tasks:
            if t.given and t.current is not None:
                # A given process has run before: its first interval starts now.
                t.last, t.last_t = procfs.read(t.current.pid), self.elapsed()
                if self.counters.available:
                    self.counters.attach(t.current.pid)

    def run(self) -> dict[str, Any]:
        """Run to the end (all programs done, or ``duration_s``) and return the
        results document (the shape of the simulator's results JSON)."""
        handlers = {}

        def on_signal(signum: int, _frame: Any) -> None:
            raise Stop(signum)

        for sig in _STOP_SIGNALS:
            handlers[sig] = signal.signal(sig, on_signal)
        stopped: Stop | None = None
        self.t0 = time.monotonic()
        self.cpu_t0 = procfs.cpu_times()
        try:
            try:
                self.state = AgentState()
                try:
                    self.state.write()
                except OSError as e:
                    raise LinuxError(
                        f"{self.state.path}: cannot write the agent's state file "
                        f"({e.strerror or e}); set {STATE_DIR_ENV} to a writable folder"
                    ) from None
                self._setup()
                self._control_priority()
                if self.agent is not None and hasattr(self.agent, "init"):
                    try:
                        self.agent.init(RealContext(self))
                    except (LinuxError, Stop):
                        raise
                    except Exception as e:
                        raise LinuxError(f"agent {self._agent_name()}: {e}") from e
                self._loop()
            except Stop as e:
                stopped = e
                self.warn(f"{e}: stopping the programs and cleaning up")
            end = self.elapsed()
            doc = self._results(end, stopped)
        finally:
            self._restore_priority()
            # Clean-up runs to the end whatever arrives meanwhile: a further
            # stop signal is held, then dropped (this one is already stopping).
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                problems = self.cleanup()
                # The programs' captured output was read as they ended.
                shutil.rmtree(self.outdir, ignore_errors=True)
                if self.state is not None:
                    if problems:
                        problems.append(
                            f"what is left is recorded in {self.state.path}: "
                            "run hetsched linux cleanup"
                        )
                    else:
                        self.state.remove()
            finally:
                for sig in _STOP_SIGNALS:
                    signal.signal(sig, lambda *_: None)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                for sig, h in handlers.items():
                    signal.signal(sig, h)
        for p in problems:
            self.warn(p)
        doc["warnings"] = list(self.warnings)
        doc["summary"]["stopped_by"] = stopped.signum if stopped else None
        return doc

    def _control_priority(self) -> None:
        """With ``high_weight`` the programs' groups outweigh every other task
        on the machine 256 to 1, this agent included: when they keep the
        CPUs busy, the loop that samples, acts and stops them on time would
        get a few thousandths of a CPU, and on a loaded machine it ran
        seconds late, the duration overshot and processes ran outside the
        groups the agent had not yet placed them in. The loop's thread
        therefore runs as ``SCHED_FIFO`` priority 1 (it sleeps between polls,
        so it takes little CPU), with ``SCHED_RESET_ON_FORK`` so that the
        programs it launches start as normal tasks. It needs root (as the
        groups do); without it the run goes on with a warning."""
        self._old_sched = None
        if not self.high_weight or not hasattr(os, "SCHED_FIFO"):
            return
        try:
            old = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
            os.sched_setscheduler(
                0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(CONTROL_RT_PRIORITY)
            )
        except OSError as e:
            self.warn(
                f"cannot run the control loop as SCHED_FIFO ({e.strerror or e}): on a busy "
                "machine it may act late beside the high-weight groups"
            )
            return
        self._old_sched = old

    def _restore_priority(self) -> None:
        old = self._old_sched
        if old is None:
            return
        self._old_sched = None
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, old[0], os.sched_param(old[1]))

    def _loop(self) -> None:
        next_sample = self.period_s
        while True:
            now = self.elapsed()
            for t in self.tasks:
                self._reap(t)
                if (
                    not t.given
                    and t.remaining > 0
                    and (t.current is None or t.current.end_s is not None)
                    and now >= t.next_start_s
                ):
                    self._launch(t)
            active = any(
                (t.current is not None and t.current.end_s is None) or t.remaining > 0
                for t in self.tasks
            )
            if not active:
                return
            if self.duration_s is not None and now >= self.duration_s:
                self.warn(f"duration {self.duration_s:g} s reached: stopping the programs")
                return
            if now >= next_sample:
                self._observe()
                self.samples += 1
                if self.agent is not None:
                    try:
                        self.agent.sample(RealContext(self))
                    except LinuxError as e:
                        self.agent_errors.append(str(e))
                        self.warn(f"agent: {e}")
                    except Stop:
                        raise
                    except Exception as e:
                        raise LinuxError(
                            f"agent {self._agent_name()} failed: {type(e).__name__}: {e}"
                        ) from e
                next_sample += self.period_s
                if next_sample < now:
                    next_sample = now + self.period_s
            time.sleep(self.poll_s)

    def cleanup(self) -> list[str]:
        """Stop launched programs, restore given ones, remove cgroups. Idempotent."""
        problems: list[str] = []
        # Final counters of what still runs, so its work is accounted.
        for t in self.tasks:
            inst = t.current
            if inst is not None and inst.end_s is None:
                s = procfs.read(inst.pid)
                if s.alive:
                    t.latest = s
        launched = [
            t.current.popen
            for t in self.tasks
            if t.current is not None
            and t.current.popen is not None
            and t.current.popen.poll() is None
        ]
        # Each launched program leads a process group of its own: signal the
        # whole group, so children it started stop too.
        for p in launched:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 2.0
        for p in launched:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if self.groups is not None:
            # Anything else in our groups descends from what we launched
            # (given PIDs excepted): it goes too.
            given = {t.current.pid for t in self.tasks if t.given and t.current is not None}
            for pid in self.groups.members():
                if pid not in given:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
        for t in self.tasks:
            inst = t.current
            if inst is not None and inst.end_s is None and inst.popen is not None:
                inst.status = inst.popen.returncode
                self._account(t)
                inst.end_s = None  # did not finish: stays unfinished in the results
                t.current = None
            elif inst is not None and inst.end_s is None and t.given:
                self._account(t)
        for pid, mask in self.changed_affinity.items():
            try:
                os.sched_setaffinity(pid, mask)
                for tid in procfs.tids(pid):
                    os.sched_setaffinity(tid, mask)
            except OSError:
                pass
        for tid, nice in self.changed_nice.items():
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, tid, nice)
        if self.groups is not None:
            problems += self.groups.close()
            # Moving back to the original cpuset may have widened the masks.
            for pid, mask in self.changed_affinity.items():
                try:
                    for tid in procfs.tids(pid):
                        os.sched_setaffinity(tid, mask)
                except OSError:
                    pass
        if self.counters is not None:
            self.counters.close()
        return problems

    # -- results --------------------------------------------------------------

    def _results(self, end_s: float, stopped: Stop | None) -> dict[str, Any]:
        # Fold running instances' latest samples in at the end (cleanup does it
        # for programs it stops; given PIDs are read here).
        for t in self.tasks:
            inst = t.current
            if inst is not None and inst.end_s is None:
                s = procfs.read(inst.pid)
                if s.alive:
                    t.latest = s
        tasks: list[dict[str, Any]] = []
        programs: list[dict[str, Any]] = []
        completions = []
        for t in self.tasks:
            tot = dict(t.totals)
            if t.latest is not None:
                for k, v in (
                    ("run_ns", t.latest.run_ns),
                    ("wait_ns", t.latest.wait_ns),
                    ("csw_voluntary", t.latest.csw_voluntary),
                    ("csw_involuntary", t.latest.csw_involuntary),
                    ("migrations", t.latest.migrations),
                ):
                    tot[k] = tot.get(k, 0.0) + v
                for k, v in t.counters.items():
                    tot[k] = tot.get(k, 0.0) + v
            run_s = tot.get("run_ns", 0.0) / 1e9
            first = t.instances[0] if t.instances else None
            last = t.instances[-1] if t.instances else None
            instr, cyc = tot.get("instructions", NAN), tot.get("cycles", NAN)
            tasks.append(
                {
                    "task": t.id,
                    "program": t.name,
                    "program_id": t.id,
                    "thread": 0,
                    "pid": last.pid if last else None,
                    "state": "exited"
                    if last and last.end_s is not None
                    else ("failed" if t.error else "running"),
                    "start_s": first.start_s if first else None,
                    "end_s": last.end_s if last else None,
                    "run_s": run_s,
                    "wait_s": tot.get("wait_ns", 0.0) / 1e9,
                    "work_ms": 1000.0 * run_s,
                    "instructions": instr,
                    "cycles": cyc,
                    "ipc": instr / cyc if cyc and cyc == cyc else NAN,
                    "cache_refs": tot.get("cache_refs", NAN),
                    "cache_misses": tot.get("cache_misses", NAN),
                    "csw_voluntary": int(tot.get("csw_voluntary", 0)),
                    "csw_involuntary": int(tot.get("csw_involuntary", 0)),
                    "migrations": tot.get("migrations", NAN),
                    "error": t.error,
                }
            )
            for inst in t.instances:
                done = inst.end_s is not None and (inst.status in (0, None))
                completion = inst.end_s - inst.start_s if done and inst.end_s is not None else None
                if completion is not None and inst.end_s is not None:
                    completions.append(inst.end_s)
                programs.append(
                    {
                        "program_id": t.id,
                        "program": t.name,
                        "instance": inst.instance,
                        "pid": inst.pid,
                        "start_s": inst.start_s,
                        "end_s": inst.end_s,
                        "completion_s": completion,
                        "threads": int(inst.output.get("threads", 1)) if inst.output else 1,
                        "exit_status": inst.status,
                        "cpu_s": inst.output.get("cpu_s") if inst.output else None,
                        # The program's own account of its run (hetsched's real
                        # programs print it): free of the agent's delays.
                        "program_wall_s": inst.output.get("wall_s") if inst.output else None,
                        "work_start_s": inst.output["start_mono"] - self.t0
                        if inst.output and "start_mono" in inst.output
                        else None,
                    }
                )
        cpu_t1 = procfs.cpu_times()
        cpus = []
        for c in self.cpus:
            b0, i0 = self.cpu_t0.get(c, (0.0, 0.0))
            b1, i1 = cpu_t1.get(c, (0.0, 0.0))
            busy, idle = b1 - b0, i1 - i0
            duty = self.profile.duty.get(c, 1.0) if self.profile else 1.0
            cpus.append(
                {
                    "cpu": c,
                    "type": f"duty{round(100 * duty)}",
                    "duty_cycle": duty,
                    "busy_s": busy,
                    "idle_s": idle,
                    "utilization": busy / (busy + idle) if busy + idle > 0 else 0.0,
                    "throttled_s": self.groups.throttled_s([c]) if self.groups else 0.0,
                    "final_mhz": self.effective_mhz(c),
                }
            )
        agent_name = (
            getattr(self.agent, "name", type(self.agent).__name__) if self.agent else "none"
        )
        name = self.workload.name if self.workload else "attached"
        migr = [r["migrations"] for r in tasks if r["migrations"] == r["migrations"]]
        summary = {
            "scenario": name,
            "mode": "linux",
            "scheduler": "linux",
            "agent": agent_name,
            "governor": "-",
            "profile": self.profile.text() if self.profile else None,
            "cgroups": self.groups.version if self.groups else None,
            "perf_counters": bool(self.counters and self.counters.available),
            "sim_end_s": end_s,
            "makespan_s": max(completions) if completions else None,
            "migrations": sum(migr) if migr else None,
            "context_switches": sum(r["csw_voluntary"] + r["csw_involuntary"] for r in tasks),
            "samples": self.samples,
            "tasks": len(tasks),
            "programs_completed": sum(1 for p in programs if p["completion_s"] is not None),
            "failed": [t.name for t in self.tasks if t.error],
            "fused_objects": [{"at_s": t, "op": op, "cpus": c} for t, op, c in self.fuse_log],
        }
        scenario = {
            "name": name,
            "mode": "linux",
            "profile": self.profile.text() if self.profile else None,
            "agent": agent_name,
            "period_ms": self.period_s * 1000.0,
            "programs": [
                {
                    "name": t.name,
                    "command": t.spec.command if t.spec else None,
                    "start_s": t.spec.start_s if t.spec else None,
                    "nice": t.spec.nice if t.spec else None,
                    "repeat": t.spec.repeat if t.spec else None,
                    "pid": None if t.spec else (t.instances[0].pid if t.instances else None),
                }
                for t in self.tasks
            ],
        }
        return {
            "summary": summary,
            "tasks": tasks,
            "programs": programs,
            "cpus": cpus,
            "scenario": scenario,
            "warnings": [],
        }
