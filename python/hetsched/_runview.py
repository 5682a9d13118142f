"""Views of a traced run per CPU and per time bin: CPU count and labels,
frequency domains and their frequency over time, busy time per bin, and the
energy the trace implies. Plain data, no figures: the plots
(:mod:`hetsched.plot`) and the trace exports (:mod:`hetsched.traces`) both
draw on it."""

from __future__ import annotations

from typing import Any


def _end_s(res: Any, trace: list[dict[str, Any]]) -> float:
    end = res.summary.get("sim_end_s")
    if isinstance(end, int | float) and end > 0:
        return float(end)
    last = max((e.get("end_ns", e["t_ns"]) for e in trace), default=1)
    return max(last / 1e9, 1e-9)


def _ncpus(res: Any, trace: list[dict[str, Any]]) -> int:
    if len(res.cpus):
        return len(res.cpus)
    return 1 + max((int(e["cpu"]) for e in trace if "cpu" in e), default=0)


def _cpu_labels(res: Any, ncpus: int) -> list[str]:
    if "type" in res.cpus.columns and len(res.cpus) == ncpus:
        return [f"cpu{i} {t}" for i, t in enumerate(res.cpus["type"])]
    return [f"cpu{i}" for i in range(ncpus)]


def _task_programs(res: Any) -> dict[int, str]:
    t = res.tasks
    if t.empty:
        return {}
    return {int(k): str(v) for k, v in zip(t["task"], t["program"], strict=True)}


def _task_program_ids(res: Any) -> dict[int, int]:
    t = res.tasks
    if t.empty or "program_id" not in t.columns:
        return {}
    return {int(k): int(v) for k, v in zip(t["task"], t["program_id"], strict=True)}


def _busy_per_bin(
    trace: list[dict[str, Any]], ncpus: int, end: float, bins: int
) -> tuple[list[float], list[list[float]]]:
    edges = [end * i / bins for i in range(bins + 1)]
    busy = [[0.0] * bins for _ in range(ncpus)]
    for e in trace:
        if e.get("type") == "run" and e["end_ns"] > e["t_ns"] and int(e["cpu"]) < ncpus:
            _spread(busy[int(e["cpu"])], None, edges, e["t_ns"] / 1e9, e["end_ns"] / 1e9, 1.0)
    return edges, busy


def _spread(
    acc: list[float], other: list[float] | None, edges: list[float], lo: float, hi: float, w: float
) -> None:
    """Add ``w × overlap`` of [lo, hi) to each bin of ``acc``."""
    n = len(acc)
    if n == 0 or hi <= lo:
        return
    width = edges[1] - edges[0]
    first = max(0, min(n - 1, int(lo / width)))
    for i in range(first, n):
        a, b = edges[i], edges[i + 1]
        if a >= hi:
            break
        overlap = min(b, hi) - max(a, lo)
        if overlap > 0:
            acc[i] += w * overlap
            if other is not None:
                other[i] += overlap


def _domains(res: Any, ncpus: int) -> list[int]:
    if "freq_domain" in res.cpus.columns and len(res.cpus) == ncpus:
        return [int(d) for d in res.cpus["freq_domain"]]
    return list(range(ncpus))


def _fmax(res: Any, ncpus: int) -> list[float]:
    types = (res.scenario.get("machine") or {}).get("types") or {}
    out = []
    for cpu in range(ncpus):
        ty = res.cpus["type"].iloc[cpu] if "type" in res.cpus.columns else None
        ps = (types.get(ty) or {}).get("pstates") or []
        mhz = max((p["mhz"] for p in ps), default=None)
        if mhz is None and "final_mhz" in res.cpus.columns:
            mhz = res.cpus["final_mhz"].iloc[cpu]
        out.append(float(mhz or 0.0))
    return out


def _freq_steps(
    res: Any, trace: list[dict[str, Any]], ncpus: int, end: float
) -> list[tuple[list[float], list[float]]]:
    domains = _domains(res, ncpus)
    fmax = _fmax(res, ncpus)
    changes: dict[int, list[tuple[float, float]]] = {}
    for e in trace:
        if e.get("type") == "freq":
            changes.setdefault(int(e["domain"]), []).append((e["t_ns"] / 1e9, float(e["mhz"])))
    out = []
    for cpu in range(ncpus):
        ts, mhz = [0.0], [fmax[cpu]]
        for t, f in changes.get(domains[cpu], []):
            ts.append(t)
            mhz.append(f)
        ts.append(end)
        mhz.append(mhz[-1])
        out.append((ts, mhz))
    return out


def _freq_lookup(res: Any, trace: list[dict[str, Any]], ncpus: int, end: float) -> Any:
    """``f(cpu, a, b)`` → the [lo, hi, MHz] pieces of [a, b) at each frequency."""
    import bisect

    steps = _freq_steps(res, trace, ncpus, end)

    def pieces(cpu: int, a: float, b: float) -> list[tuple[float, float, float]]:
        ts, mhz = steps[cpu]
        i = max(0, bisect.bisect_right(ts, a) - 1)
        out = []
        while i < len(ts) - 1 and ts[i] < b:
            lo, hi = max(a, ts[i]), min(b, ts[i + 1])
            if hi > lo:
                out.append((lo, hi, mhz[i]))
            i += 1
        if not out:
            out.append((a, b, mhz[min(i, len(mhz) - 1)]))
        return out

    return pieces


class _PowerModel:
    """The busy-power formula of docs/power.md with each CPU type's parameters
    from the resolved scenario, and a program's ``mem`` for the compute fraction."""

    def __init__(self, res: Any, ncpus: int) -> None:
        machine = res.scenario.get("machine") or {}
        self.types = machine.get("types") or {}
        self.base_w = float(machine.get("platform_base_w") or 0.0)
        self.cpu_type = list(res.cpus["type"]) if "type" in res.cpus.columns else [None] * ncpus
        progs = (res.scenario.get("workload") or {}).get("programs") or []
        self.mem = [float(p.get("mem") or 0.0) for p in progs]
        self.cls = [p.get("class") for p in progs]

    def _type(self, cpu: int) -> dict[str, Any]:
        return self.types.get(self.cpu_type[cpu]) or {}

    def idle_w(self, cpu: int) -> float:
        return float((self._type(cpu).get("power") or {}).get("idle_w", 0.1))

    def busy_w(self, cpu: int, prog: int | None, mhz: float) -> float:
        ty = self._type(cpu)
        p = ty.get("power") or {}
        pstates = ty.get("pstates") or [{"mhz": mhz, "volt": 1.0}]
        ps = min(pstates, key=lambda s: abs(s["mhz"] - mhz))
        fmax = max(s["mhz"] for s in pstates)
        m = self.mem[prog] if prog is not None and prog < len(self.mem) else 0.0
        speedup = 1.0
        if prog is not None and prog < len(self.cls) and self.cls[prog]:
            speedup = float((ty.get("class_speedup") or {}).get(self.cls[prog], 1.0))
        s = float(ty.get("capacity", 1024)) / 1024.0 * (ps["mhz"] / fmax) * speedup
        cf = 1.0 if m <= 0 else ((1 - m) / s) / ((1 - m) / s + m)
        activity = cf + float(p.get("stall_activity", 0.3)) * (1 - cf)
        v = float(ps["volt"])
        return (
            float(p.get("static_w_per_v", 0.3)) * v
            + float(p.get("dyn_w_per_v2ghz", 1.0)) * v * v * (ps["mhz"] / 1000.0) * activity
        )


def energy_from_trace(
    res: Any, trace: list[dict[str, Any]], bins: int = 200
) -> tuple[list[float], list[float]]:
    """``(edges, joules per bin)`` of run ``res`` from its ``trace``, priced
    by the busy-power formula of docs/power.md: exact for compute-bound
    programs (``mem = 0``) at duty cycle 1 without SMT slow-down, an estimate
    otherwise."""
    ncpus = _ncpus(res, trace)
    end = _end_s(res, trace)
    model = _PowerModel(res, ncpus)
    edges = [end * i / bins for i in range(bins + 1)]
    energy = [model.base_w * (edges[i + 1] - edges[i]) for i in range(bins)]
    busy_s = [0.0] * bins
    freq = _freq_lookup(res, trace, ncpus, end)
    programs = _task_program_ids(res)
    for e in trace:
        if e.get("type") != "run" or e["end_ns"] <= e["t_ns"]:
            continue
        cpu, a, b = int(e["cpu"]), e["t_ns"] / 1e9, e["end_ns"] / 1e9
        prog = programs.get(int(e["task"]))
        for lo, hi, mhz in freq(cpu, a, b):
            w = model.busy_w(cpu, prog, mhz) - model.idle_w(cpu)
            _spread(energy, busy_s, edges, lo, hi, w)
    idle_total = sum(model.idle_w(c) for c in range(ncpus))
    for i in range(bins):
        energy[i] += idle_total * (edges[i + 1] - edges[i])
    return edges, energy
