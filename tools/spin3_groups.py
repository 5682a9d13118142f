"""How group scheduling changes the kernel's balancing of three spinners on
two CPUs (the suite's ``spin3`` experiment, docs/real-linux.md, "spin3
outside the shielding cgroup").

Three ``schedprobe spin`` processes, allowed on CPUs 0 and 1, run under each
condition in turn; their moves between CPUs are counted from
``se.nr_migrations`` of ``/proc/PID/task/*/sched`` (``CONFIG_SCHED_DEBUG``)
between 1.3 s after their start and the end of the run:

* ``flat``: the root cgroup with autogroup off (``kernel.sched_autogroup_enabled``
  = 0 for the run, restored afterwards): tasks balanced as tasks;
* ``autogroup``: the root cgroup with autogroup as the machine has it (the
  caller's session group);
* ``shares=N``: a v1 ``cpu`` cgroup of ``cpu.shares`` N (262144 is the
  suite's shielding group).

Needs root and cgroup v1's ``cpu`` controller::

    python tools/spin3_groups.py [--seconds 20] [--repeats 1] [--shares 1024 262144]

It prints one line per run: the condition, moves per second and each
spinner's moves.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from hetsched.linux import procfs
from hetsched.linux.suite import schedprobe

AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")
CPU_V1 = Path("/sys/fs/cgroup/cpu")


def _moves(pid: int) -> int:
    """The process's moves between CPUs so far (Σ ``se.nr_migrations`` of its
    threads, :func:`hetsched.linux.procfs.read`)."""
    m = procfs.read(pid).migrations
    if math.isnan(m):
        sys.exit("spin3_groups: no se.nr_migrations in /proc/PID/task/*/sched (no SCHED_DEBUG)")
    return int(m)


def run(exe: Path, seconds: int, group: Path | None) -> tuple[float, list[int]]:
    """Three spinners for ``seconds`` (in ``group`` when given): moves per
    second over the measured part and each one's moves."""

    def child() -> None:
        os.sched_setaffinity(0, [0, 1])
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    start = time.monotonic() + 0.3
    argv = [str(exe), "-t", f"{start:.6f}", "spin", str(seconds + 2)]
    procs = [subprocess.Popen(argv, preexec_fn=child) for _ in range(3)]
    try:
        time.sleep(1.3)
        before = [_moves(p.pid) for p in procs]
        t0 = time.monotonic()
        time.sleep(seconds - 1)
        after = [_moves(p.pid) for p in procs]
        t1 = time.monotonic()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    each = [b - a for a, b in zip(before, after, strict=True)]
    return sum(each) / (t1 - t0), each


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=20, help="length of each run (s, ≥ 3)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per condition")
    ap.add_argument(
        "--shares", type=int, nargs="*", default=[1024, 262144], help="cpu.shares of the groups"
    )
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("spin3_groups: needs root (autogroup and cgroups)")
    if a.seconds < 3 or a.repeats < 1:
        sys.exit("spin3_groups: --seconds must be ≥ 3 and --repeats ≥ 1")
    if not (CPU_V1 / "cpu.shares").exists():
        sys.exit(f"spin3_groups: no cgroup v1 cpu controller at {CPU_V1}")
    if bad := [s for s in a.shares if not 2 <= s <= 262144]:
        sys.exit(f"spin3_groups: --shares {bad}: cpu.shares goes from 2 to 262144")
    exe = schedprobe()
    was = AUTOGROUP.read_text().strip()
    conditions: list[tuple[str, int | None, str]] = [("flat", None, "0"), ("autogroup", None, was)]
    conditions += [(f"shares={s}", s, was) for s in a.shares]
    group = CPU_V1 / f"hetsched-spin3-{os.getpid()}"
    try:
        for _ in range(a.repeats):
            for name, shares, autogroup in conditions:
                AUTOGROUP.write_text(autogroup)
                if shares is not None:
                    group.mkdir(exist_ok=True)
                    (group / "cpu.shares").write_text(str(shares))
                rate, each = run(exe, a.seconds, group if shares is not None else None)
                print(f"{name:14s} {rate:5.2f} moves/s  {each}", flush=True)
    finally:
        AUTOGROUP.write_text(was)
        if group.exists():
            group.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
