"""How ``make bench`` measures: CPU time of the process running the engine,
instruction counts by callgrind, and the arithmetic over them.

- **Events per CPU-second.** A scenario is parsed once, then run ``n`` times
  in this process; each run's cost is the process's user + system CPU time
  around ``hetsched.run`` (``time.process_time``: the time other processes
  take on a shared machine is not counted, only the CPU this process got).
  The result is the median of the runs' events/CPU-s with its spread (the
  minimum, maximum and the quartiles).
- **Instructions per event.** A scenario runs under ``valgrind
  --tool=callgrind`` in a child interpreter twice, to two simulated lengths;
  the difference of the instruction counts over the difference of the event
  counts cancels what both runs share (interpreter start-up, imports,
  parsing, building the machine and the threads, their first placement) and
  leaves the steady-state cost of an event. Instruction counts do not depend
  on how busy the machine is.

The arithmetic (:func:`spread`, :func:`difference_ratio`) is separate from
the measuring so that tests can check it with made-up measurements.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The child interpreter run under callgrind: a scenario (JSON file) in, its
#: event count out.
CALLGRIND_CHILD = r"""
import json, sys
import hetsched
scn = hetsched.loads(open(sys.argv[1], encoding="utf-8").read(), fmt="json")
res = hetsched.run(scn)
print(json.dumps({"events": res.summary["events"]}))
"""

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def spread(values: Sequence[float]) -> dict[str, float | int]:
    """Median, minimum, maximum and quartiles (``statistics.quantiles``,
    inclusive method) of ``values``; ``n`` is how many there were."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("spread: no values")
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return {
        "median": statistics.median(xs),
        "min": min(xs),
        "max": max(xs),
        "q1": q1,
        "q3": q3,
        "n": len(xs),
    }


def difference_ratio(short: tuple[int, int], long: tuple[int, int]) -> float:
    """Instructions per event from two runs ``(instructions, events)`` of
    different lengths: (I_long − I_short) / (E_long − E_short). What the two
    runs share (start-up) cancels out."""
    (i1, e1), (i2, e2) = short, long
    if e2 <= e1:
        raise ValueError(
            f"difference_ratio: the longer run must have more events ({e1} then {e2}); lengthen it"
        )
    if i2 < i1:
        raise ValueError(
            f"difference_ratio: the longer run counted fewer instructions ({i1} then {i2})"
        )
    return (i2 - i1) / (e2 - e1)


def cpu_timed(
    run: Callable[[], int], clock: Callable[[], float] = time.process_time
) -> tuple[int, float]:
    """``(events, CPU seconds)`` of one call of ``run`` (which returns its
    event count), timed by ``clock``."""
    c0 = clock()
    events = run()
    return events, clock() - c0


def child_cpu_run(cmd: Sequence[str]) -> tuple[str, float]:
    """Run ``cmd`` as a child process: its standard output and its CPU
    seconds (user + system, from ``RUSAGE_CHILDREN`` around it). A failed
    command raises ``RuntimeError`` with the end of what it printed."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"bench: {cmd[0]} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return proc.stdout, cpu


def events_per_cpu_sec(samples: Sequence[tuple[int, float]]) -> dict[str, Any]:
    """The spread of events/CPU-s over ``samples`` of ``(events, cpu_s)``."""
    rates = []
    for events, cpu in samples:
        if not cpu > 0:
            raise ValueError(f"events_per_cpu_sec: a run took {cpu!r} CPU seconds")
        rates.append(events / cpu)
    out: dict[str, Any] = dict(spread(rates))
    out["events"] = samples[0][0]
    out["cpu_s"] = [cpu for _, cpu in samples]
    return out


def engine_rate(scn_json: str, runs: int) -> dict[str, Any]:
    """Parse the scenario once, run it ``runs`` times in this process; the
    spread of events per CPU-second (see the module doc)."""
    import hetsched

    scn = hetsched.loads(scn_json, fmt="json")

    def one() -> int:
        return int(hetsched.run(scn).summary["events"])

    samples = [cpu_timed(one) for _ in range(runs)]
    events = {e for e, _ in samples}
    if len(events) != 1:
        raise RuntimeError(f"bench: the same scenario gave different event counts: {events}")
    return events_per_cpu_sec(samples)


def valgrind_missing() -> str | None:
    """Why instructions cannot be counted here, or None when they can."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed"
    return None


def callgrind_count(scn: dict[str, Any]) -> tuple[int, int]:
    """Run ``scn`` under callgrind in a child interpreter: ``(instructions, events)``."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise RuntimeError("bench: valgrind is not installed")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    with tempfile.TemporaryDirectory(prefix="hetsched-bench-") as tmp:
        path = Path(tmp) / "scenario.json"
        path.write_text(json.dumps(scn), encoding="utf-8")
        proc = subprocess.run(
            [
                valgrind,
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/callgrind.out",
                sys.executable,
                "-c",
                CALLGRIND_CHILD,
                str(path),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"bench: {scn.get('name')} under callgrind failed: {proc.stderr[-800:]}")
    found = _COLLECTED.findall(proc.stderr)
    if not found:
        raise RuntimeError(
            f"bench: no instruction count in callgrind's output for {scn.get('name')}"
        )
    events = json.loads(proc.stdout.strip().splitlines()[-1])["events"]
    return int(found[-1]), int(events)


def instructions_per_event(
    scn: dict[str, Any],
    short_s: float,
    long_s: float,
    count: Callable[[dict[str, Any]], tuple[int, int]] = callgrind_count,
) -> dict[str, Any]:
    """Steady-state instructions per event of ``scn``: runs to ``short_s``
    and ``long_s`` simulated seconds, differenced."""
    if not 0 < short_s < long_s:
        raise ValueError(f"instructions_per_event: need 0 < short < long, got {short_s}, {long_s}")
    a = count({**scn, "duration_s": short_s})
    b = count({**scn, "duration_s": long_s})
    return {
        "instructions_per_event": difference_ratio(a, b),
        "short": {"duration_s": short_s, "instructions": a[0], "events": a[1]},
        "long": {"duration_s": long_s, "instructions": b[0], "events": b[1]},
    }
