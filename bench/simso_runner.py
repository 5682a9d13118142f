"""Run one periodic task set in SimSo with its global EDF and print JSON.

This file runs in SimSo's own virtual environment (made by
``compare_simso.py``), not in hetsched's: it imports nothing of hetsched.
Input (stdin, JSON): ``{"m": CPUs, "duration_ms": T, "tasks": [{"period_ms",
"wcet_ms"}, ...]}``. Output (stdout, last line, JSON): the wall time of the
simulation proper and per-task counts in the definitions ``compare_simso``
compares (see its docstring).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

from simso.configuration import Configuration
from simso.core import Model


def main() -> None:
    spec = json.load(sys.stdin)
    conf = Configuration()
    conf.cycles_per_ms = 1_000_000  # one cycle per nanosecond
    conf.duration = int(spec["duration_ms"] * conf.cycles_per_ms)
    for i, t in enumerate(spec["tasks"]):
        conf.add_task(
            name=f"T{i}",
            identifier=i + 1,
            period=t["period_ms"],
            activation_date=0,
            wcet=t["wcet_ms"],
            deadline=t["period_ms"],
            # hetsched lets a late job finish and starts the next one after
            # it; SimSo's default would abort the late job.
            abort_on_miss=False,
        )
    for c in range(spec["m"]):
        conf.add_processor(name=f"CPU{c}", identifier=c + 1)
    conf.scheduler_info.clas = "simso.schedulers.EDF"
    conf.check_all()
    model = Model(conf)
    # SimSo's EDF prints every decision; keep that off the terminal but in
    # the timed region, since it is part of how SimSo runs.
    sink = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sink):
        model.run_model()
    wall = time.perf_counter() - t0
    tasks = []
    cpms = conf.cycles_per_ms
    for task in model.task_list:
        r = model.results.tasks[task]
        done = [j for j in r.jobs if j.end_date is not None]
        tasks.append(
            {
                "jobs": len(done),
                "misses": sum(1 for j in done if j.exceeded_deadline),
                # SimSo records a PREEMPTED/EXECUTE pair at one instant when a
                # reschedule hands a running job its own CPU back; its
                # *_delta_count fields count only resumptions after a real
                # gap (more than 100 cycles = 100 ns), i.e. real preemptions.
                "preemptions": sum(
                    j.preemption_delta_count + j.migration_delta_count for j in r.jobs
                ),
                "preemptions_raw": sum(j.preemption_count + j.migration_count for j in r.jobs),
                "migrations": sum(j.migration_count for j in r.jobs) + r.task_migration_count,
                # JobR.response_time is in cycles.
                "max_response_ms": max((j.response_time for j in done), default=0) / cpms,
                "sum_response_ms": sum(j.response_time for j in done) / cpms,
            }
        )
    print(json.dumps({"wall_s": wall, "tasks": tasks}))


if __name__ == "__main__":
    main()
