"""Scenarios the `eevdf` behaviour tests share: identical 1 GHz CPUs ticking
at 250 Hz (the development machine's `CONFIG_HZ`), spinners, and a traced,
checked run of them."""

from __future__ import annotations

import hetsched


def machine(name: str, duration_s: float, scheduler: str, cpus: int) -> str:
    """A scenario's head: `cpus` identical CPUs of capacity 1024 at 1 GHz,
    250 Hz ticks, the `performance` governor."""
    head = f"""
name = "{name}"
duration_s = {duration_s}
scheduler = "{scheduler}"
governor = "performance"
[machine]
tick_hz = 250
[machine.types.c]
capacity = 1024
pstates = [{{ mhz = 1000, volt = 1.0 }}]
"""
    return head + '[[machine.cpus]]\ntype = "c"\n' * cpus


def spinner(name: str, work_ms: float, *, nice: int | None = None, cpu: int | None = None) -> str:
    """A `sequential` program of `work_ms`, optionally reniced or pinned."""
    text = f'[[workload.programs]]\nname = "{name}"\nkind = "sequential"\nwork_ms = {work_ms}\n'
    if nice is not None:
        text += f"nice = {nice}\n"
    if cpu is not None:
        text += f"affinity = [{cpu}]\n"
    return text


def run_traced(text: str) -> hetsched.RunResult:
    """The scenario run with its trace and the invariant checker."""
    return hetsched.run(hetsched.loads(text), trace=True, check=True)
