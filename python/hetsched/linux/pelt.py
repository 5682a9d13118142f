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
#: (burst µs of CPU time, period µs) of each case.
CASES: tuple[tuple[int, int], ...] = (
    (20_000, 100_000),
    (5_000, 100_000),
    (50_000, 100_000),
    (2_000, 10_000),
    (8_000, 32_000),
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
    run_us: int, period_us: int, seconds: int = SECONDS, cpus: tuple[int, int] = (1, 0)
) -> dict[str, Any]:
    """Run the periodic task on ``cpus[0]`` and sample it from ``cpus[1]``:
    the distinct samples, one per kernel update seen."""
    from .suite import schedprobe

    if shutil.which("taskset") is None:
        raise LinuxError("taskset not found: install util-linux")
    if os.cpu_count() is None or os.cpu_count() < 2:  # type: ignore[operator]
        raise LinuxError("the PELT suite needs 2 CPUs: the task on one, the sampler on the other")
    exe = schedprobe()
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpus[1]})
    proc = subprocess.Popen(
        [
            "taskset",
            "-c",
            str(cpus[0]),
            str(exe),
            "periodic",
            str(run_us),
            str(period_us),
            str(seconds),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: dict[int, list[int]] = {}
    try:
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/sched") as f:
                    s = parse_sched(f.read())
            except (FileNotFoundError, ProcessLookupError):
                break
            seen.setdefault(
                s["last_update_ns"], [s["last_update_ns"], s["util_avg"], s["util_est"]]
            )
            seen[s["last_update_ns"]][2] = s["util_est"]
            time.sleep(SAMPLE_S)
        _, err = proc.communicate(timeout=seconds + 10)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        os.sched_setaffinity(0, old)
    if proc.returncode != 0:
        raise LinuxError(f"schedprobe periodic {run_us} {period_us} failed: {err.strip()}")
    return {"run_us": run_us, "period_us": period_us, "samples": sorted(seen.values())}


@dataclass
class Bursts:
    """What a recording shows of each burst of the second half of the run
    (the last one left out)."""

    #: ``util_avg`` the burst's dequeue left.
    util: list[int]
    #: ``util_est`` after the burst.
    est: list[int]
    #: Time from the burst's start (its wake-up's update) to the first
    #: tick's update in it, ns, for the bursts with a tick.
    tick_after_wake_ns: list[int]


def bursts(rec: dict[str, Any]) -> Bursts:
    """Split a recording's updates into bursts: updates closer together than
    half the sleep belong to one burst; its first is the wake-up, its last
    the dequeue, those between are ticks."""
    sleep_ns = (rec["period_us"] - rec["run_us"]) * 1000
    groups: list[list[list[int]]] = []
    for s in rec["samples"]:
        if groups and s[0] - groups[-1][-1][0] < sleep_ns / 2:
            groups[-1].append(s)
        else:
            groups.append([s])
    groups = groups[len(groups) // 2 : -1]
    if len(groups) < 3:
        raise LinuxError(
            f"periodic {rec['run_us']} {rec['period_us']}: only {len(groups)} bursts sampled"
        )
    ticks = [g[1][0] - g[0][0] for g in groups if len(g) > 2]
    return Bursts([g[-1][1] for g in groups], [g[-1][2] for g in groups], ticks)


def simulate(
    run_us: int, period_us: int, start_ms: float = 0.0, periods: int = 40
) -> tuple[int, int]:
    """The task's ``util_avg`` and ``util_est`` in the simulator, read in the
    sleep after ``periods`` bursts; the first starts at ``start_ms`` (the
    machine's ticks fall on multiples of :data:`TICK_MS`)."""
    import hetsched

    gap = (period_us - run_us) / 2
    scn = {
        "name": f"pelt-{run_us}-{period_us}",
        "seed": 1,
        "duration_s": (start_ms * 1000 + periods * period_us - gap) * 1e-6,
        "stop_when_done": False,
        "scheduler": SIM_POLICY,
        "governor": "performance",
        "machine": {
            "tick_hz": 1000 / TICK_MS,
            "types": {"cpu": {"capacity": 1024, "pstates": [{"mhz": 1000, "volt": 1.0}]}},
            "cpus": [{"type": "cpu"}],
        },
        "workload": {
            "programs": [
                {
                    "name": "periodic",
                    "kind": "periodic",
                    "period_ms": period_us / 1000,
                    "wcet_ms": run_us / 1000,
                    "start_ms": start_ms,
                }
            ]
        },
    }
    row = hetsched.run(scn).tasks.to_dict("records")[0]
    if row["util_avg"] is None or row["util_est"] is None:
        raise LinuxError(f"{SIM_POLICY} reported no util_avg/util_est")
    return int(row["util_avg"]), int(row["util_est"])


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
    cases: Sequence[tuple[int, int]] = CASES,
    log: Callable[[str], None] = lambda _m: None,
) -> list[Row]:
    """Measure (or read ``recorded``) and simulate every case."""
    if recorded is not None:
        data = json.loads(Path(recorded).read_text())
        recs = {(r["run_us"], r["period_us"]): r for r in data["cases"]}
        missing = [c for c in cases if c not in recs]
        if missing:
            raise LinuxError(f"{recorded}: no recording of case(s) {missing}")
    else:
        recs = {}
        for run_us, period_us in cases:
            log(f"periodic {run_us} µs every {period_us} µs: {SECONDS} s on the real machine")
            recs[(run_us, period_us)] = measure(run_us, period_us)
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
    for run_us, period_us in cases:
        b = bursts(recs[(run_us, period_us)])
        tick_ns = TICK_MS * 1e6
        if b.tick_after_wake_ns:
            after = statistics.median(t % tick_ns for t in b.tick_after_wake_ns)
            start_ms = ((tick_ns - after) % tick_ns) / 1e6
        else:
            start_ms = 0.0
        sim_u, sim_e = simulate(run_us, period_us, start_ms)
        name = f"{run_us / 1000:g} ms every {period_us / 1000:g} ms"
        for metric, vals, sim, tgt in (
            ("util_avg after the burst", b.util, sim_u, None),
            ("util_est after the burst", b.est, sim_e, TARGET_EST),
        ):
            real = statistics.median(vals)
            noise = (max(vals) - min(vals)) / 2
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
    from .._text import table

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
    head = [
        "case",
        "metric",
        "target",
        "real (median)",
        "real noise",
        f"sim ({SIM_POLICY})",
        "verdict",
    ]
    n = sum(r.verdict == "within" for r in rows)
    return table(head, body) + f"\n{n} of {len(rows)} within"
