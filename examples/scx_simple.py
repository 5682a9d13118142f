"""The kernel's scx_simple (tools/sched_ext/scx_simple.bpf.c) in Python, on
hetsched's sched_ext dispatch queues: a waking task claims an idle CPU with
``select_cpu_dfl`` and goes straight to its local DSQ; otherwise it waits in
one shared DSQ, FIFO or ordered by weighted vtime. Run it on the demo
workload (4 big + 4 little cores) next to the built-in ``scx-simple``::

    python examples/scx_simple.py
"""

from __future__ import annotations

from pathlib import Path

import hetsched
from hetsched import DSQ_LOCAL, SLICE_DFL_NS, Scheduler

SHARED_DSQ = 0


class ScxSimple(Scheduler):
    """scx_simple: idle CPU first, else one shared DSQ (FIFO or weighted vtime)."""

    name = "scx-simple-py"
    uses_dsqs = True

    def __init__(self, vtime: bool = False) -> None:
        self.vtime, self.vtime_now = vtime, 0

    def init(self, cx):
        cx.create_dsq(SHARED_DSQ)

    def select_cpu(self, cx, task, prev_cpu, flags):
        if self.vtime and flags == "new":  # simple_enable
            cx.set_task_vtime(task, self.vtime_now)
        cpu, is_idle = cx.select_cpu_dfl(task, cx.task_cpu(task) if prev_cpu is None else prev_cpu)
        if is_idle:
            cx.dsq_insert(task, DSQ_LOCAL, SLICE_DFL_NS)
        return cpu

    def enqueue(self, cx, task, cpu, flags):
        if not self.vtime:
            return cx.dsq_insert(task, SHARED_DSQ, SLICE_DFL_NS)
        vt = max(cx.task_vtime(task), self.vtime_now - SLICE_DFL_NS)
        cx.dsq_insert_vtime(task, SHARED_DSQ, vt, SLICE_DFL_NS)

    def dispatch(self, cx, cpu, prev):
        cx.dsq_move_to_local(SHARED_DSQ)

    def running(self, cx, task, cpu):
        if self.vtime:
            self.vtime_now = max(self.vtime_now, cx.task_vtime(task))

    def stopping(self, cx, task, cpu, runnable):
        if self.vtime:
            used = SLICE_DFL_NS - cx.task_slice_ns(task)
            vt = cx.task_vtime(task) + used * 100 // cx.task_scx_weight(task)
            cx.set_task_vtime(task, vt)


def main() -> None:
    scenario = Path(__file__).parents[1] / "scenarios" / "demo.toml"
    for name, sched in [("built-in", "scx-simple"), ("python", ScxSimple())]:
        res = hetsched.run(scenario, scheduler=sched)
        print(f"== {name}\n{res.summary_table()}\n")


if __name__ == "__main__":
    main()
