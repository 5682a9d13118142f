"""``hetsched linux validate-sim --suite pelt``: the simulator's load tracking
checked against the kernel's own numbers.

A lone periodic task (``schedprobe periodic RUN_US PERIOD_US``) runs on one
CPU of the real machine while this process, on another CPU, reads its
``/proc/PID/sched`` every 1.5 ms: ``se.avg.util_avg``, ``se.avg.util_est``
and ``se.avg.last_update_time``. A sleeping task is not updated, so the value
read during a sleep is the one its dequeue left: per period, the largest
``util_avg`` is the utilisation at the end of the burst (the updates at the
ticks inside the burst are smaller) and the ``util_est`` read last in the
period is the EWMA after it. The simulator runs the same program alone on a
CPU of capacity 1024 under :data:`SIM_POLICY` and reports the task's
``util_avg`` and ``util_est`` at the end of the run, which falls in a
sleep (the task table's columns).

The cases span utilisations from about 100 to 750, long and short periods.
A row's target is the larger of 1 % and 3 units: the kernel's values in
steady state vary by a few units from period to period (where the burst
ends relative to the 1024-µs period grid), and a model off by the
difference between a 32 ms half-life and the kernel's 32 periods of
1.048576 ms (10 units at 20 ms every 100 ms) must fail. The verdict counts
the real spread as the trace suite does (``noise-limited`` when half the
range of the per-period values exceeds the target).

The real side can come from a recording (``--recorded FILE``, written with
``--save-traces FILE``): ``data/linux-pelt/pelt-6.18.json`` is this
project's recording on its development machine, which the tests replay.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import LinuxError

#: The simulator's policy: the suite's eevdf (the recorded kernel's rules).
SIM_POLICY = "eevdf[kernel=6.18,charge=continual]"
#: (burst µs of CPU time, period µs, copies) of each case: ``copies``
#: identical tasks released together on the one CPU (two share it, and
#: each waits for the other: its runnable average exceeds its utilisation).
CASES: tuple[tuple[int, int, int], ...] = (
    (20_000, 100_000, 1),
    (5_000, 100_000, 1),
    (50_000, 100_000, 1),
    (2_000, 10_000, 1),
    (8_000, 32_000, 1),
    (20_000, 100_000, 2),
)
#: Seconds each real case runs.
SECONDS = 5
#: The bursts compared: the second half of the run (util_est's EWMA comes
#: down from the new task's first bursts by a quarter of the difference per
#: burst, about 15 bursts here), without the last one.
#: The util_avg row's target: relative and absolute (units of 1024), the
#: larger.
TARGET_REL, TARGET_ABS = 0.01, 3.0
#: The util_est row's target: ``UTIL_EST_MARGIN`` (fair.c), within which the
#: EWMA keeps its value, so that histories ending at one utilisation leave
#: it anywhere up to 9 units above.
TARGET_EST = 10.0
#: The recorded kernel's tick (CONFIG_HZ = 250), ms; :func:`run_suite`
#: checks it against the recording.
TICK_MS = 4.0
#: How often the sampler reads /proc/PID/sched, s.
SAMPLE_S = 0.0015
#: The recording the tests replay.
DATA_FILE = Path(__file__).resolve().parents[3] / "data" / "linux-pelt" / "pelt-6.18.json"

_FIELDS = {
    "util_avg": "se.avg.util_avg",
    "runnable_avg": "se.avg.runnable_avg",
    "util_est": "se.avg.util_est",
    "last_update_ns": "se.avg.last_update_time",
}


def parse_sched(text: str) -> dict[str, int]:
    """The load-tracking fields of a ``/proc/PID/sched`` text."""
    out: dict[str, int] = {}
    for key, field in _FIELDS.items():
        m = re.search(re.escape(field) + r"\s*:\s*(-?\d+)", text)
        if m is None:
            raise LinuxError(
                f"/proc/PID/sched has no {field} line: this kernel does not show its "
                "load tracking (CONFIG_SCHED_DEBUG)"
            )
        out[key] = int(m.group(1))
    return out


def measure(
    run_us: int,
    period_us: int,
    copies: int = 1,
    seconds: int = SECONDS,
    cpus: tuple[int, int] = (1, 0),
) -> dict[str, Any]:
    """Run ``copies`` periodic tasks on ``cpus[0]``, released together, and
    sample them from ``cpus[1]``: per task, the distinct samples, one per
    kernel update seen."""
    from .suite import schedprobe

    if shutil.which("taskset") is None:
        raise LinuxError("taskset not found: install util-linux")
    if (os.cpu_count() or 1) < 2:
        raise LinuxError("the PELT suite needs 2 CPUs: the tasks on one, the sampler on the other")
    exe = schedprobe()
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpus[1]})
    start = time.monotonic() + 0.3
    procs = [
        subprocess.Popen(
            [
                *("taskset", "-c", str(cpus[0]), str(exe), "-t", f"{start:.6f}"),
                *("periodic", str(run_us), str(period_us), str(seconds)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(copies)
    ]
    seen: list[dict[int, list[int]]] = [{} for _ in procs]
    try:
        while any(p.poll() is None for p in procs):
            for p, got in zip(procs, seen, strict=True):
                try:
                    with open(f"/proc/{p.pid}/sched") as f:
                        s = parse_sched(f.read())
                except (FileNotFoundError, ProcessLookupError):
                    continue
                key = s["last_update_ns"]
                row = got.setdefault(key, [key, s["util_avg"], s["util_est"], s["runnable_avg"]])
                row[2] = s["util_est"]
            time.sleep(SAMPLE_S)
        errs = [p.communicate(timeout=seconds + 10)[1] for p in procs]
    except BaseException:
        for p in procs:
            p.kill()
            p.wait()
        raise
    finally:
        os.sched_setaffinity(0, old)
    for p, err in zip(procs, errs, strict=True):
        if p.returncode != 0:
            raise LinuxError(f"schedprobe periodic {run_us} {period_us} failed: {err.strip()}")
    return {
        "run_us": run_us,
        "period_us": period_us,
        "copies": copies,
        "samples": [sorted(got.values()) for got in seen],
    }


@dataclass
class Bursts:
    """What a recording shows of each burst of the second half of the run
    (the last one left out)."""

    #: ``util_avg`` the burst's dequeue left.
    util: list[int]
    #: ``util_est`` after the burst.
    est: list[int]
    #: ``runnable_avg`` the burst's dequeue left.
    runnable: list[int]
    #: The bursts' releases, ns: each dequeue (the burst's last update) less
    #: the CPU time of the tasks released with it (they ran at full speed).
    release_ns: list[int]
    #: Times of the bursts' ticks, ns: their updates but the last, without
    #: those within 0.5 ms of the burst's release (its wake-up).
    tick_ns: list[int]


def bursts(rec: dict[str, Any], task: int = 0) -> Bursts:
    """Split the updates of a recording's task ``task`` into bursts: updates
    closer together than a third of the period belong to one burst; its
    first is the wake-up, its last the dequeue, those between are ticks
    (and, for tasks that share the CPU, picks and preemptions)."""
    gap_ns = rec["period_us"] * 1000 / 3
    groups: list[list[list[int]]] = []
    for s in rec["samples"][task]:
        if groups and s[0] - groups[-1][-1][0] < gap_ns:
            groups[-1].append(s)
        else:
            groups.append([s])
    groups = groups[len(groups) // 2 : -1]
    if len(groups) < 3:
        raise LinuxError(
            f"periodic {rec['run_us']} {rec['period_us']}: only {len(groups)} bursts sampled"
        )
    busy_ns = rec["copies"] * rec["run_us"] * 1000
    releases = [g[-1][0] - busy_ns for g in groups]
    ticks = [
        s[0]
        for g, r in zip(groups, releases, strict=True)
        for s in g[:-1]
        if abs(s[0] - r) > 500_000
    ]
    return Bursts(
        [g[-1][1] for g in groups],
        [g[-1][2] for g in groups],
        [g[-1][3] for g in groups],
        releases,
        ticks,
    )


def _mode_residue(times: Sequence[float], tick_ns: float, bin_ns: float = 1e5) -> float:
    """The most common residue of ``times`` modulo ``tick_ns`` (in bins of
    ``bin_ns``, the mean of that bin's members)."""
    bins: dict[int, list[float]] = {}
    for t in times:
        r = t % tick_ns
        bins.setdefault(int(r // bin_ns), []).append(r)
    best = max(bins.values(), key=len)
    return statistics.fmean(best)


def start_offset_ms(per_task: Sequence[Bursts]) -> float:
    """Where to start the simulated tasks so that the ticks fall in their
    bursts where the recording shows them: the kernel's tick grid is the
    most common residue of the non-final updates (ticks) modulo the tick,
    the release grid the most common residue of the releases. Where the
    period is not a multiple of the tick, releases fall at more than one
    place relative to the ticks; the most common is taken."""
    tick_ns = TICK_MS * 1e6
    releases = [t for b in per_task for t in b.release_ns]
    ticks = [t for b in per_task for t in b.tick_ns]
    if not releases or not ticks:
        return 0.0
    release = _mode_residue(releases, tick_ns)
    tick = _mode_residue(ticks, tick_ns)
    return ((release - tick) % tick_ns) / 1e6


def simulate(
    run_us: int, period_us: int, copies: int = 1, start_ms: float = 0.0, periods: int = 40
) -> list[tuple[int, int, int]]:
    """Each task's ``util_avg``, ``util_est`` and ``runnable_avg`` in the
    simulator, read in the sleep after ``periods`` bursts; the tasks start
    at ``start_ms`` (the
    machine's ticks fall on multiples of :data:`TICK_MS`) on CPU 1 of two,
    as the real ones."""
    import hetsched

    gap = (period_us - copies * run_us) / 2
    scn = {
        "name": f"pelt-{run_us}-{period_us}-{copies}",
        "seed": 1,
        "duration_s": (start_ms * 1000 + periods * period_us - gap) * 1e-6,
        "stop_when_done": False,
        "scheduler": SIM_POLICY,
        "governor": "performance",
        "machine": {
            "tick_hz": 1000 / TICK_MS,
            "types": {"cpu": {"capacity": 1024, "pstates": [{"mhz": 1000, "volt": 1.0}]}},
            "cpus": [{"type": "cpu"}, {"type": "cpu"}],
        },
        "workload": {
            "programs": [
                {
                    "name": f"periodic-{i}",
                    "kind": "periodic",
                    "period_ms": period_us / 1000,
                    "wcet_ms": run_us / 1000,
                    "start_ms": start_ms,
                    "affinity": [1],
                }
                for i in range(copies)
            ]
        },
    }
    out = []
    for row in hetsched.run(scn).tasks.to_dict("records"):
        if row["util_avg"] is None or row["util_est"] is None:
            raise LinuxError(f"{SIM_POLICY} reported no util_avg/util_est")
        out.append((int(row["util_avg"]), int(row["util_est"]), int(row["runnable_avg"])))
    return out


@dataclass
class Row:
    case: str
    metric: str
    real: float
    noise: float
    sim: float
    target: float
    verdict: str


def _verdict(real: float, noise: float, sim: float, target: float) -> str:
    if noise > target:
        return "noise-limited"
    return "within" if abs(sim - real) <= target else "outside"


def run_suite(
    recorded: Path | None = None,
    save_to: Path | None = None,
    cases: Sequence[tuple[int, int, int]] = CASES,
    log: Callable[[str], None] = lambda _m: None,
) -> list[Row]:
    """Measure (or read ``recorded``) and simulate every case."""
    if recorded is not None:
        data = json.loads(Path(recorded).read_text())
        recs = {(r["run_us"], r["period_us"], r["copies"]): r for r in data["cases"]}
        missing = [c for c in cases if c not in recs]
        if missing:
            raise LinuxError(f"{recorded}: no recording of case(s) {missing}")
    else:
        recs = {}
        for run_us, period_us, copies in cases:
            log(
                f"{copies} × periodic {run_us} µs every {period_us} µs: "
                f"{SECONDS} s on the real machine"
            )
            recs[(run_us, period_us, copies)] = measure(run_us, period_us, copies)
        if save_to is not None:
            out = {
                "kernel": platform.release(),
                "machine": platform.machine(),
                "recorded": time.strftime("%Y-%m-%d"),
                "cases": [recs[c] for c in cases],
            }
            Path(save_to).parent.mkdir(parents=True, exist_ok=True)
            Path(save_to).write_text(json.dumps(out, separators=(",", ":")) + "\n")
    rows = []
    for run_us, period_us, copies in cases:
        rec = recs[(run_us, period_us, copies)]
        per_task = [bursts(rec, i) for i in range(copies)]
        start_ms = start_offset_ms(per_task)
        sims = simulate(run_us, period_us, copies, start_ms)
        name = f"{run_us / 1000:g} ms every {period_us / 1000:g} ms"
        if copies > 1:
            name = f"{copies} × {name}"
        metrics: list[tuple[int, str, float | None]] = [(0, "util_avg after the burst", None)]
        if copies == 1:
            metrics.append((1, "util_est after the burst", TARGET_EST))
        else:
            # Sharing the CPU, a task waits: its runnable average exceeds its
            # utilisation, and util_est keeps the EWMA its first bursts left
            # (a start-up value, not compared).
            metrics.append((2, "runnable_avg after the burst", None))
        for k, metric, tgt in metrics:
            # Tasks released together are alike: the mean of their medians,
            # the widest of their spreads.
            vals = [(b.util, b.est, b.runnable)[k] for b in per_task]
            real = statistics.mean(statistics.median(v) for v in vals)
            noise = max((max(v) - min(v)) / 2 for v in vals)
            sim = statistics.mean(x[k] for x in sims)
            target = tgt if tgt is not None else max(TARGET_REL * real, TARGET_ABS)
            rows.append(
                Row(
                    name,
                    metric,
                    real,
                    noise,
                    float(sim),
                    target,
                    _verdict(real, noise, sim, target),
                )
            )
    return rows


def table_text(rows: Sequence[Row]) -> str:
    """The rows as a plain-text table (the one in ``docs/real-linux.md``)."""
    from .._text import table
    from .suite import table_head

    body = [
        [
            r.case,
            r.metric,
            f"±{r.target:.1f}",
            f"{r.real:g}",
            f"{r.noise:g}",
            f"{r.sim:g}",
            r.verdict,
        ]
        for r in rows
    ]
    n = sum(r.verdict == "within" for r in rows)
    return table(table_head("case", SIM_POLICY), body) + f"\n{n} of {len(rows)} within"
