"""Benchmark series beyond CFS scaling: heterogeneous (``a-dwrr`` on a
big.LITTLE machine, ``chameleon`` on a machine with dynamic processors) and
virtualised (``xen-credit`` and ``aash`` with virtual machines), each at a
few sizes.

Every point is a scenario built here and run in a child process of its own
(:func:`run_point`), so that its peak memory is its own. The child reports
its CPU time (user + system, around the run), its resident memory after
parsing the scenario and its peak after the run; the difference over the
number of tasks is the memory per task that the run itself needs (engine
state, result tables).

The workload is the standard scenario's shape (threads alternating compute
and sleep, with jitter), so that the rates are comparable with it and with
the CFS scaling series; sizes are kept small enough that the whole series
runs in well under a minute on two cores.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import hetsched
scn = json.loads(sys.stdin.read())
parsed = hetsched.loads(json.dumps(scn), fmt="json")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0, c0 = time.perf_counter(), time.process_time()
res = hetsched.run(parsed)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
s = res.summary
print(json.dumps({
    "events": s["events"], "tasks": s["tasks"], "sim_s": s["sim_end_s"],
    "engine_wall_s": s["wall_s"], "total_wall_s": wall, "cpu_s": cpu,
    "events_per_cpu_sec": s["events"] / max(cpu, 1e-9),
    "sim_s_per_cpu_s": s["sim_end_s"] / max(cpu, 1e-9),
    "rss_before_mib": before,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "trace_hash": s["trace_hash"],
}))
"""


def workers(threads: int, name: str = "workers") -> dict:
    """The standard scenario's thread shape: 2 ms of work, 30 ms of sleep."""
    return {
        "name": name,
        "kind": "phases",
        "threads": threads,
        "loops": 10**9,
        "jitter": 0.5,
        "phases": [{"compute_ms": 2}, {"sleep_ms": 30}],
    }


def big_little(cpus: int) -> dict:
    """Half big cores (capacity 1024, 2 GHz), half LITTLE ones (capacity
    430, 1 GHz), one LLC per cluster of 4."""
    half = cpus // 2
    return {
        "types": {
            "big": {"capacity": 1024, "pstates": [{"mhz": 2000, "volt": 1.0}]},
            "little": {"capacity": 430, "pstates": [{"mhz": 1000, "volt": 0.8}]},
        },
        "clusters": [{"type": "big", "cores": half}, {"type": "little", "cores": cpus - half}],
    }


def adwrr(cpus: int, threads: int, dur: float) -> dict:
    return {
        "name": f"adwrr-{cpus}x{threads}",
        "seed": 1,
        "duration_s": dur,
        "stop_when_done": False,
        "scheduler": "a-dwrr",
        "governor": "performance",
        "machine": big_little(cpus),
        "workload": {"programs": [workers(threads)]},
    }


def chameleon(cpus: int, threads: int, dur: float) -> dict:
    """Chameleon's machine (nodes of 12 CPUs at a 50 % duty cycle) with
    fusion levels 2 and 4; a repeated sequential program asks for a 4-CPU
    object, so the policy fuses and splits all run long, beside background
    workers. (One object request: with two, the policy currently stops with
    a policy error, "cpu … already belongs to the fused object", which is
    noted in docs/performance.md.)"""
    nodes = max(1, cpus // 12)
    programs = [
        workers(threads),
        {
            "name": "nqueen",
            "kind": "sequential",
            "class": "high",
            "work_ms": 150,
            "start_ms": 10,
            "repeat": 10**6,
        },
    ]
    return {
        "name": f"chameleon-{cpus}x{threads}",
        "seed": 1,
        "duration_s": dur,
        "stop_when_done": False,
        "scheduler": "chameleon[objects=nqueen:4:1, mechanism=proxy-apic]",
        "governor": "performance",
        "machine": {
            "tick_hz": 250,
            "migration": {"enabled": False},
            "types": {"base": {"capacity": 1024, "pstates": [{"mhz": 2000, "volt": 1.0}]}},
            "clusters": [
                {"type": "base", "cores": 12, "node": n, "duty_cycle": 0.5} for n in range(nodes)
            ],
        },
        "workload": {"programs": programs},
        "dynamic": {
            "mechanism": "proxy-apic",
            "fusion": [
                {"level": 2, "speedup": {"low": 1.25, "medium": 1.5, "high": 1.5}},
                {"level": 4, "speedup": {"low": 1.5, "medium": 1.75, "high": 2.0}},
            ],
        },
    }


def vms(scheduler: str, cpus: int, nvms: int, vcpus: int, threads: int, dur: float) -> dict:
    """A quarter fast cores (2 GHz), the rest slow (1 GHz); `nvms` virtual
    machines of `vcpus` vCPUs, each running `threads` workers under the
    guest's CFS."""
    fast = max(1, cpus // 4)
    return {
        "name": f"{scheduler}-{cpus}cpu-{nvms}x{vcpus}",
        "seed": 1,
        "duration_s": dur,
        "stop_when_done": False,
        "scheduler": scheduler,
        "governor": "performance",
        "machine": {
            "tick_hz": 250,
            "types": {
                "fast": {"capacity": 1024, "pstates": [{"mhz": 2000, "volt": 1.0}]},
                "slow": {"capacity": 512, "pstates": [{"mhz": 1000, "volt": 0.8}]},
            },
            "clusters": [
                {"type": "fast", "cores": fast},
                {"type": "slow", "cores": cpus - fast},
            ],
        },
        "vms": [
            {"name": f"vm{i}", "vcpus": vcpus, "programs": [workers(threads, f"vm{i}-workers")]}
            for i in range(nvms)
        ],
    }


#: (series, label, CPUs, scenario builder call); sizes grow by 4x.
def points() -> list[tuple[str, str, int, dict]]:
    out: list[tuple[str, str, int, dict]] = []
    for cpus, threads in ((8, 128), (32, 512), (128, 2048)):
        out.append(("heterogeneous", "a-dwrr big.LITTLE", cpus, adwrr(cpus, threads, 5.0)))
    for cpus, threads in ((24, 384), (96, 1536), (384, 6144)):
        out.append(("heterogeneous", "chameleon [dynamic]", cpus, chameleon(cpus, threads, 5.0)))
    for sched in ("xen-credit", "aash"):
        for cpus, nvms in ((8, 2), (32, 8), (64, 16)):
            out.append(("vm", sched, cpus, vms(sched, cpus, nvms, 4, 16, 5.0)))
    return out


def run_point(scn: dict) -> dict:
    """Run one scenario in a child process; its metrics, or an error."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], input=json.dumps(scn), capture_output=True, text=True
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-500:]}
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    grown = max(row["peak_rss_mib"] - row["rss_before_mib"], 0.0)
    row["kib_per_task"] = grown * 1024 / max(row["tasks"], 1)
    return row


def run_series() -> list[dict]:
    """Every point of :func:`points`, in order."""
    rows = []
    for series, label, cpus, scn in points():
        print(f"series: {series} {label} {cpus} CPUs ...", file=sys.stderr)
        row = {"series": series, "policy": label, "scenario": scn["name"], "cpus": cpus}
        row.update(run_point(scn))
        rows.append(row)
    return rows


def toml_value(v: object) -> str:
    """A value in TOML's inline syntax (tables inline, keys bare)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def to_toml(scn: dict) -> str:
    """A scenario as a TOML file, one top-level key a line, so that the
    engine's benchmark binary (and a profiler around it) can run a point."""
    return "".join(f"{k} = {toml_value(v)}\n" for k, v in scn.items())


if __name__ == "__main__":
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--toml", metavar="DIR", help="write each point as DIR/NAME.toml, run nothing")
    args = ap.parse_args()
    if args.toml:
        out = Path(args.toml)
        out.mkdir(parents=True, exist_ok=True)
        for _, _, _, scn in points():
            (out / f"{scn['name']}.toml").write_text(to_toml(scn))
            print(out / f"{scn['name']}.toml")
    else:
        for r in run_series():
            print(json.dumps(r))
