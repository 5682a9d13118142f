"""When the PELT suite's two periodic tasks really wake (docs/real-linux.md
§8, "The two tasks were not released together").

Runs ``copies`` ``schedprobe periodic RUN_US PERIOD_US`` processes on CPU 1,
all given one ``-t START``, under the kernel's scheduler trace
(:class:`hetsched.tracefs.KernelTrace`: ``sched_wakeup`` and ``sched_switch``),
and prints for each copy when it woke in each period, measured from the
release the suite means (``START + k × PERIOD``): the median, the range,
and the gap between the first and the last copy to wake. Copies released
together wake within microseconds of each other; a copy whose grid is off by
its wait for the CPU wakes that much later every period.

Needs root (tracefs)::

    python tools/pelt_release.py [--seconds 3] [--copies 2] [--run-us 20000] [--period-us 100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from hetsched import tracefs
from hetsched.linux.suite import schedprobe


def wake_offsets(
    events: list[tracefs.KEvent], pids: list[int], start_ns: int, period_ns: int
) -> dict[int, list[float]]:
    """Per pid, each wake-up's distance past the period's release, ms (the
    copies' wake-ups from their sleep; the first, at ``START``, included)."""
    out: dict[int, list[float]] = {p: [] for p in pids}
    for e in events:
        if e.name != "sched_wakeup" or e.fields.get("pid") not in out:
            continue
        since = e.t_ns - start_ns
        if since < 0:
            continue
        out[e.fields["pid"]].append((since % period_ns) / 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--run-us", type=int, default=20_000)
    ap.add_argument("--period-us", type=int, default=100_000)
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("pelt_release: the kernel's trace needs root")
    if args.copies < 1 or args.seconds < 1 or not 0 < args.run_us * args.copies < args.period_us:
        sys.exit("pelt_release: needs copies ≥ 1, seconds ≥ 1, copies × run-us < period-us")
    exe = schedprobe()
    with tracefs.KernelTrace(buffer_kb=16384, clock="mono") as kt:
        start = time.monotonic() + 0.3
        procs = [
            subprocess.Popen(
                [
                    *("taskset", "-c", "1", str(exe), "-t", f"{start:.6f}", "periodic"),
                    *(str(args.run_us), str(args.period_us), str(args.seconds)),
                ],
                stdout=subprocess.DEVNULL,
            )
            for _ in range(args.copies)
        ]
        for p in procs:
            p.wait()
    pids = [p.pid for p in procs]
    parsed = tracefs.parse(kt.text, "pelt_release")
    offsets = wake_offsets(parsed.events, pids, round(start * 1e9), args.period_us * 1000)
    for k, p in enumerate(pids):
        v = offsets[p]
        if not v:
            print(f"copy {k} (pid {p}): no wake-up traced")
            continue
        print(
            f"copy {k} (pid {p}): {len(v)} wake-ups, {statistics.median(v):.3f} ms past the"
            f" release (median; {min(v):.3f}–{max(v):.3f})"
        )
    firsts = [statistics.median(v) for v in offsets.values() if v]
    if len(firsts) > 1:
        print(f"gap between the first and the last copy: {max(firsts) - min(firsts):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
