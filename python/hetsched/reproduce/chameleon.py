"""Panneerselvam & Swift, "Chameleon: operating system support for dynamic
processors" (ASPLOS 2012).

Platform (§5.1): two sockets of six cores with two hyperthreads, 24 CPUs in
two nodes of 12; a baseline CPU runs at a 50% duty cycle; fused objects of 2
and 4 CPUs run at the duty cycles of Table 2 (62.5/75/75% and 75/87.5/100%
for low/medium/high programs), i.e. speedups of 1.25/1.5/1.5 and
1.5/1.75/2.0 over the baseline. Hyperthreads are modelled as 12 independent
CPUs per node here (nothing in these rows runs two threads on one core),
except in ``-f9``, which runs on 4 cores of 2 hyperthreads.

What is built so far: the reconfiguration mechanisms (per-step cost model,
``docs/dynamic.md``), fused execution contexts in the engine, processor
proxies with their IPI accounting, the cluster scheduler with taxation (the
``chameleon`` policy), node managers (``chameleon[nodes=on]``,
``hetsched_core::nodemgr``) and the model programs (``chameleon_programs``).
``chameleon-f3``, ``-f5``, ``-f8`` and ``-ipi`` run the policy; ``-t4``
fuses objects by the scenario's script.

Table 2's configurations (CMP, ACMP-3, ACMP-6, the dynamic processor) come
from one builder, :func:`platform_scenario`; ``scenarios/chameleon-*.toml``
are :func:`preset_toml`'s output. ``chameleon-f4`` runs the parallel model
programs on all four, ``-f6`` and ``-f7`` run §5.4's mixes of N-Queens and a
Mandelbrot on the dynamic processor with node managers (and ACMP-3).
``chameleon-f9`` runs ``chameleon[smt=on]`` (cores as objects of their
hyperthreads, mechanism ``halt``) against ``cfs`` on six SPEC-like programs
with per-program SMT factors (an assumption, ``F9_SMT_FACTOR``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .. import api
from .framework import Outcome, Row, reproduction, verdict_trend, within_row

PAPER = (
    "Panneerselvam & Swift, Chameleon: operating system support for dynamic processors, ASPLOS 2012"
)

NODES = 2
CPUS_PER_NODE = 12
BASE_DUTY = 0.5
CLASSES = ("low", "medium", "high")
#: Table 2, duty cycle % per class: the emulation's configuration (inputs).
DUTY = {
    "dyn2": (62.5, 75.0, 75.0),
    "dyn4": (75.0, 87.5, 100.0),
    "acmp6": (62.5, 75.0, 75.0),
    "acmp3": (75.0, 87.5, 100.0),
}

#: Table 4, µs: mechanism -> (fuse 2, fuse 4, split 2, split 4).
TABLE4 = {
    "hotplug": (150_000.0, 430_000.0, 220_000.0, 640_000.0),
    "proxy-apic": (250.0, 375.0, 20.0, 60.0),
    "proxy-logical": (2.0, 8.0, 1.5, 4.2),
}
#: Table 4 entries that calibrate a step cost of ``hw/reconfig.rs``
#: (``docs/dynamic.md``): (mechanism, op, CPUs) -> (parameter, why). The
#: rest are predictions.
T4_CALIBRATION: dict[tuple[str, str, int], tuple[str, str]] = {
    ("proxy-apic", "fuse", 2): (
        "IOAPIC reprogramming (248 µs per fuse)",
        "fitted so that a 2-CPU proxy-APIC fuse (one 2 µs proxy) takes 250 µs",
    ),
    ("proxy-apic", "split", 2): (
        "proxy-APIC teardown (20 µs per CPU)",
        "set to this published value (one proxy)",
    ),
    ("proxy-logical", "fuse", 2): (
        "proxy creation (2 µs per proxied CPU)",
        "set to this published value (one proxy)",
    ),
    ("proxy-logical", "split", 2): (
        "proxy-logical teardown (1.5 µs per CPU)",
        "set to this published value (one proxy)",
    ),
}
T4_REL_TOL = 0.15

#: §2.2 (pmake on 24 CPUs) and §5.3 (proxy for 3 CPUs).
IPI_PER_S = 40.0
RCU_PER_S = 140.0
PROXY_IPI_PUBLISHED = 10.0
IPI_REL_TOL = 0.30

F5_PUBLISHED = {"dyn2": (1.25, 1.5, 1.5), "dyn4": (1.5, 1.75, 2.0)}
F5_REL_TOL = 0.03


def speedups(config: str) -> dict[str, float]:
    """Speedup per class of a configuration over the 50% baseline (Table 2)."""
    return {c: d / (100.0 * BASE_DUTY) for c, d in zip(CLASSES, DUTY[config], strict=True)}


def machine(fast: int = 0, fast_config: str = "acmp3") -> dict[str, Any]:
    """24 CPUs in two nodes of 12 at a 50% duty cycle; with ``fast`` > 0, the
    first ``fast`` CPUs of node 0 are the ACMP's fast cores (the class
    speedups of ``fast_config``) — an ACMP with 12 slow + ``fast`` fast CPUs."""
    pstates = [{"mhz": 2000, "volt": 1.0}]
    types: dict[str, Any] = {"base": {"capacity": 1024, "pstates": pstates}}
    clusters: list[dict[str, Any]] = []
    if fast:
        types["fast"] = {
            "capacity": 1024,
            "pstates": pstates,
            "class_speedup": speedups(fast_config),
        }
        clusters.append({"type": "fast", "cores": fast, "node": 0, "duty_cycle": BASE_DUTY})
        clusters.append({"type": "base", "cores": 12, "node": 1, "duty_cycle": BASE_DUTY})
    else:
        for node in range(NODES):
            clusters.append(
                {"type": "base", "cores": CPUS_PER_NODE, "node": node, "duty_cycle": BASE_DUTY}
            )
    return {
        "tick_hz": 1000,
        "migration": {"enabled": False},
        "types": types,
        "clusters": clusters,
    }


def fusion_levels() -> list[dict[str, Any]]:
    """The two fusion levels of Table 2."""
    return [
        {"level": 2, "speedup": speedups("dyn2")},
        {"level": 4, "speedup": speedups("dyn4")},
    ]


# --------------------------------------------------------------- Table 4


def t4_scenario(mechanism: str, level: int) -> dict[str, Any]:
    """Fuse CPUs 0..level-1 at t = 0 and split them at t = 1 s, idle machine."""
    return {
        "name": f"chameleon-t4-{mechanism}-{level}",
        "duration_s": 2.5,
        "stop_when_done": False,
        "machine": machine(),
        "dynamic": {
            "mechanism": mechanism,
            "fusion": fusion_levels(),
            "events": [
                {"at_ms": 0.0, "op": "fuse", "cpus": list(range(level))},
                {"at_ms": 1000.0, "op": "split", "cpus": [0]},
            ],
        },
    }


def plot_t4(data: dict[str, Any], path: Path) -> None:
    """Table 4 as bars (log scale would hide nothing: one panel per mechanism)."""
    from ..plot import bars

    labels = ["fuse 2", "fuse 4", "split 2", "split 4"]
    panels: dict[str, list[float]] = {}
    for mech, values in data.items():
        panels[f"{mech} published (µs)"] = list(TABLE4[mech])
        panels[f"{mech} simulated (µs)"] = values
    bars(labels, panels, path, title="Chameleon Table 4 in simulation: reconfiguration latency")


@reproduction(
    "chameleon-t4",
    paper=PAPER,
    title="fuse/split latency of 2 and 4 CPUs: hotplug, proxy-APIC, proxy-logical (Table 4)",
    plot=plot_t4,
)
def chameleon_t4(scale: str) -> Outcome:
    rows: list[Row] = []
    data: dict[str, list[float]] = {}
    for mech, published in TABLE4.items():
        sim: dict[tuple[str, int], float] = {}
        for level in (2, 4):
            recs = api.run(t4_scenario(mech, level)).reconfigs.to_dict("records")
            for r in recs:
                sim[(str(r["op"]), level)] = float(r["latency_us"])
        order = [("fuse", 2), ("fuse", 4), ("split", 2), ("split", 4)]
        data[mech] = [sim[k] for k in order]
        for (op, level), pub in zip(order, published, strict=True):
            got = sim[(op, level)]
            calibrated_by = T4_CALIBRATION.get((mech, op, level))
            rows.append(
                within_row(
                    "chameleon-t4",
                    f"{mech}: {op} {level} CPUs, µs",
                    pub,
                    got,
                    digits=3,
                    rel_tol=T4_REL_TOL,
                    # The paper's ordering: 4 CPUs cost more than 2.
                    trend_ok=level == 4 and got > sim[(op, 2)],
                    note=_t4_note(mech, op, level, got, pub),
                    calibrated_by=calibrated_by,
                )
            )
    return Outcome(rows=rows, data=data)


def _t4_note(mech: str, op: str, level: int, got: float, pub: float) -> str:
    """What the row's value rests on; a diagnosis of a miss only when the
    simulated value is below the published one, which is what it explains."""
    if level == 2 and mech != "hotplug":
        return ""
    if mech == "hotplug":
        return (
            "from the HotOS 4-CPU calibration: the notifier callbacks and "
            "stop-machine walk the 24 online CPUs"
        )
    low = got < pub * (1.0 - T4_REL_TOL)
    if mech == "proxy-apic" and op == "fuse":
        text = (
            "the IOAPIC is reprogrammed once per fuse and 3 proxies are created one after another"
        )
        if low:
            text += (
                f"; the paper's {pub:g} µs lies between one reprogramming per fuse "
                "(this model) and one per proxied CPU: the model lacks a per-CPU part "
                "of the IOAPIC cost"
            )
        return text
    if mech == "proxy-logical" and op == "fuse":
        text = "3 proxies one after another at the 2-CPU cost each"
        if low:
            text += (
                f"; the paper's {pub:g} µs suggests a per-proxy cost that grows with the "
                "proxies already in place, which the model does not have"
            )
        return text
    return "3 proxies torn down one after another at the 2-CPU cost each"


# --------------------------------------------------------------- §5.3 IPIs


#: pmake's worker processes in the §5.3 run (assumption: one per CPU, as
#: ``make -j24``; the paper does not say).
IPI_PMAKE_JOBS = 24


def ipi_scenario(duration_s: float, *, lazy_tlb: bool = True) -> dict[str, Any]:
    """§5.3's run: pmake on the 24 CPUs beside a sequential program that asks
    the ``chameleon`` cluster scheduler for a 4-CPU object (proxy-APIC), with
    pmake's background IPI and RCU rates (§2.2). Lazy TLB (2.6.31's
    ``leave_mm`` on the first shootdown an idle CPU gets) is on by default."""
    from .chameleon_programs import model_program

    pmake = model_program(
        "pmake", threads=IPI_PMAKE_JOBS, work_ms=IPI_PMAKE_JOBS * 1000.0 * duration_s
    )
    seq = model_program("nqueen", program_name="seq", work_ms=1000.0 * 4 * duration_s)
    return {
        "name": "chameleon-ipi",
        "duration_s": duration_s,
        "stop_when_done": False,
        "machine": machine(),
        "scheduler": "chameleon[objects=seq:4:1, mechanism=proxy-apic]",
        "workload": {"programs": [pmake, seq]},
        "dynamic": {
            "mechanism": "proxy-apic",
            "ipi_per_s": IPI_PER_S,
            "rcu_per_s": RCU_PER_S,
            "lazy_tlb": lazy_tlb,
            "fusion": fusion_levels(),
        },
    }


@reproduction(
    "chameleon-ipi",
    paper=PAPER,
    title="IPIs handled by a proxy standing in for 3 CPUs during pmake (§5.3)",
)
def chameleon_ipi(scale: str) -> list[Row]:
    duration = {"full": 10.0, "quick": 2.0}[scale]
    rates = {}
    fused = 0.0
    fuses = 0
    for lazy in (True, False):
        res = api.run(ipi_scenario(duration, lazy_tlb=lazy))
        px = res.proxies
        if float(px["proxied_s"].sum()) <= 0.0:
            raise RuntimeError("the 4-CPU object never proxied its CPUs")
        rates[lazy] = float(px["ipis_handled"].sum()) / duration
        fused = float(px["proxied_s"].sum()) / 3.0
        fuses = int((res.reconfigs["op"] == "fuse").sum())
    rate = rates[True]
    per_cpu = rate / 3.0
    return [
        within_row(
            "chameleon-ipi",
            "IPIs per second handled by the proxy of a 4-CPU object (3 proxied CPUs)",
            PROXY_IPI_PUBLISHED,
            rate,
            digits=3,
            rel_tol=IPI_REL_TOL,
            note=(
                f"pmake with {IPI_PMAKE_JOBS} workers beside the object's thread: the "
                f"cluster scheduler fused the object {fuses} times in {duration:g} s "
                f"({fused / duration:.0%} of the time), splitting it whenever a pmake "
                "worker on a borrowed CPU became eligible; each time, a proxied CPU "
                "gets at most one TLB shootdown before lazy TLB drops its address space "
                f"(without lazy TLB: {rates[False]:.3g}/s). Rescheduling IPIs are gone "
                "(a proxied CPU runs the idle thread); tlb_share = 0.5 of the 40/s/CPU "
                "is an assumption, and so is the pmake size"
            ),
        ),
        Row(
            id="chameleon-ipi",
            claim="IPIs per proxied CPU fewer than the 40/s/CPU without proxies",
            published="< 40",
            simulated=round(per_cpu, 3),
            tolerance="ordering",
            verdict=verdict_trend(per_cpu < IPI_PER_S),
            follows_from=(
                f"the input: {IPI_PER_S:g} IPIs/s per CPU (dynamic.ipi_per_s), of which a "
                "proxy only ever receives a share, so no scheduler can exceed it"
            ),
        ),
    ]


# --------------------------------------------------------------- Figure 5


def f5_scenario(config: str, cls: str, work_ms: float) -> dict[str, Any]:
    """One sequential program of class ``cls`` alone: on a baseline CPU
    (``cmp``), on a fused object of 2 or 4 CPUs (``dyn2``/``dyn4``, proxy-APIC,
    with pmake's background IPIs handled by the proxy), or on an ACMP's fast
    core (``acmp6``/``acmp3``)."""
    program = {"name": "seq", "kind": "sequential", "class": cls, "work_ms": work_ms,
               "affinity": [0]}  # fmt: skip
    scn: dict[str, Any] = {
        "name": f"chameleon-f5-{config}-{cls}",
        "duration_s": 1000.0,
        "machine": machine(),
        "workload": {"programs": [program]},
    }
    if config.startswith("acmp"):
        scn["machine"] = machine(fast=3 if config == "acmp3" else 6, fast_config=config)
    elif config.startswith("dyn"):
        # The cluster scheduler fuses the object when the thread is picked:
        # its neighbours are idle, so it may borrow them.
        level = int(config[3:])
        scn["scheduler"] = f"chameleon[objects=seq:{level}:1, mechanism=proxy-apic]"
        scn["dynamic"] = {
            "mechanism": "proxy-apic",
            "ipi_per_s": IPI_PER_S,
            "rcu_per_s": RCU_PER_S,
            "fusion": fusion_levels(),
        }
    return scn


def plot_f5(data: dict[str, Any], path: Path) -> None:
    """Figure 5: speedup per program class and configuration."""
    from ..plot import bars

    configs = ("acmp6", "dyn2", "acmp3", "dyn4")
    labels = [f"{cfg} {cls}" for cfg in configs for cls in CLASSES]
    values = [data[cfg][cls] for cfg in configs for cls in CLASSES]
    bars(
        labels,
        {"speedup over baseline": values},
        path,
        title="Chameleon Fig. 5 in simulation: sequential programs alone",
    )


@reproduction(
    "chameleon-f5",
    paper=PAPER,
    title="sequential programs alone: DYN-2/DYN-4 speedups equal the ACMPs' (Fig. 5)",
    plot=plot_f5,
)
def chameleon_f5(scale: str) -> Outcome:
    work = {"full": 10_000.0, "quick": 1_000.0}[scale]
    speed: dict[str, dict[str, float]] = {}
    for cls in CLASSES:
        base = float(api.run(f5_scenario("cmp", cls, work)).programs["completion_s"].iloc[0])
        for cfg in ("dyn2", "dyn4", "acmp6", "acmp3"):
            t = float(api.run(f5_scenario(cfg, cls, work)).programs["completion_s"].iloc[0])
            speed.setdefault(cfg, {})[cls] = base / t
    rows: list[Row] = []
    for cfg, acmp in (("dyn2", "acmp6"), ("dyn4", "acmp3")):
        for cls, pub in zip(CLASSES, F5_PUBLISHED[cfg], strict=True):
            got = speed[cfg][cls]
            rows.append(
                within_row(
                    "chameleon-f5",
                    f"{cfg.upper()} speedup of a {cls} program over the baseline CPU",
                    pub,
                    got,
                    digits=4,
                    rel_tol=F5_REL_TOL,
                    note=(
                        f"{acmp.upper()} in the same model: {speed[acmp][cls]:.4f}; Table 2's duty "
                        "cycles are the emulation's inputs, so this checks that fusing through "
                        "proxies (fuse latency, IPIs handled by the proxy) costs next to nothing; "
                        "the object is fused by the chameleon policy"
                    ),
                    follows_from=(
                        f"Table 2's duty cycles, the emulation's inputs: {cfg.upper()} runs a "
                        f"{cls} program at {DUTY[cfg][CLASSES.index(cls)]:g} % against the "
                        f"baseline's {100 * BASE_DUTY:g} %"
                    ),
                )
            )
    return Outcome(rows=rows, data=speed)


# --------------------------------------------------------------- Figure 3

F3_TAXES = (100.0, 1.0, 0.01)
F3_WORK_MS = {"full": 10_000.0, "quick": 1_000.0}


def f3_scenario(tax: float, work_ms: float, with_b: bool = True) -> dict[str, Any]:
    """Two identical CPU-bound tasks on neighbouring CPUs: A (CPU 0) asks for
    a 2-CPU object {0, 1} with tax ``tax``; B lives on CPU 1. Baseline CPUs at
    the 50% duty cycle, a 2-CPU object at 75% (medium, Table 2), CFS's 16 ms
    minimum granularity, proxy-APIC."""
    programs = [{"name": "A", "kind": "sequential", "class": "medium", "work_ms": work_ms,
                 "affinity": [0]}]  # fmt: skip
    if with_b:
        programs.append({"name": "B", "kind": "sequential", "class": "medium",
                         "work_ms": work_ms, "affinity": [1]})  # fmt: skip
    return {
        "name": f"chameleon-f3-tax{tax:g}",
        "duration_s": 1000.0,
        "scheduler": f"chameleon[objects=A:2:{tax:g}, mechanism=proxy-apic, min_granularity_ms=16]",
        "machine": {
            "tick_hz": 250,
            "migration": {"enabled": False},
            "types": {"base": {"capacity": 1024}},
            "clusters": [{"type": "base", "cores": 2, "node": 0, "duty_cycle": BASE_DUTY}],
        },
        "workload": {"programs": programs},
        "dynamic": {"mechanism": "proxy-apic", "fusion": fusion_levels()[:1]},
    }


def _fused_share(reconfigs: Any, until_s: float) -> float:
    """Share of [0, until_s] during which the object was fused."""
    fused = 0.0
    since: float | None = None
    for r in reconfigs.to_dict("records"):
        if r["op"] == "fuse" and r["end_s"] is not None:
            since = float(r["end_s"])
        elif r["op"] == "split" and since is not None:
            fused += max(0.0, min(float(r["start_s"]), until_s) - min(since, until_s))
            since = None
    if since is not None:
        fused += max(0.0, until_s - since)
    return fused / until_s


def plot_f3(data: dict[float, Any], path: Path) -> None:
    """Figure 3: relative execution time of A and B per tax rate."""
    from ..plot import bars

    labels = [f"tax {t:g}" for t in F3_TAXES]
    bars(
        labels,
        {
            "A relative time": [data[t]["a_rel"] for t in F3_TAXES],
            "B relative time": [data[t]["b_rel"] for t in F3_TAXES],
        },
        path,
        title="Chameleon Fig. 3 in simulation: taxation of a borrowed CPU",
        reference={"A relative time": 1.0, "B relative time": 1.0},
    )


@reproduction(
    "chameleon-f3",
    paper=PAPER,
    title="taxation: two identical tasks, A borrows B's CPU (Fig. 3)",
    plot=plot_f3,
)
def chameleon_f3(scale: str) -> Outcome:
    work = F3_WORK_MS[scale]
    alone = float(api.run(f3_scenario(1.0, work, with_b=False)).programs["completion_s"].iloc[0])
    data: dict[float, dict[str, float]] = {}
    for tax in F3_TAXES:
        res = api.run(f3_scenario(tax, work))
        done = {
            str(p["program"]): float(p["completion_s"]) for p in res.programs.to_dict("records")
        }
        # Without B, A fuses for the whole run; its native time is the reference.
        native = work / BASE_DUTY / 1e3
        data[tax] = {
            "a_rel": done["A"] / native,
            "b_rel": done["B"] / native,
            "share": _fused_share(res.reconfigs, done["A"]),
        }
    hi, one, lo = (data[t] for t in F3_TAXES)
    rows = [
        Row(
            id="chameleon-f3",
            claim="tax >> 1 (100): A runs natively, relative execution time ~1.0",
            published=1.0,
            simulated=round(hi["a_rel"], 4),
            tolerance="trend (within 5%)",
            verdict=verdict_trend(abs(hi["a_rel"] - 1.0) <= 0.05),
            note=f"A fused {100 * hi['share']:.1f}% of its run (only while B had not yet run)",
        ),
        Row(
            id="chameleon-f3",
            claim="tax = 1: A gets its CPU plus about half of B's (share of A's run fused)",
            published=0.5,
            simulated=round(one["share"], 4),
            tolerance="trend (0.35-0.65)",
            verdict=verdict_trend(0.35 <= one["share"] <= 0.65),
            note=f"A relative time {one['a_rel']:.3f}, B {one['b_rel']:.3f}",
        ),
        Row(
            id="chameleon-f3",
            claim="tax << 1 (0.01): A preempts B most of the time (share of A's run fused)",
            published="most",
            simulated=round(lo["share"], 4),
            tolerance="trend (> 0.8)",
            verdict=verdict_trend(lo["share"] > 0.8),
            note=(
                f"A relative time {lo['a_rel']:.3f} (alone on the object: "
                f"{alone / (work / BASE_DUTY / 1e3):.3f}), B {lo['b_rel']:.3f}"
            ),
        ),
        Row(
            id="chameleon-f3",
            claim="A's relative time falls as the tax falls (100 > 1 > 0.01)",
            published="ordering",
            simulated=f"{hi['a_rel']:.3f} > {one['a_rel']:.3f} > {lo['a_rel']:.3f}",
            tolerance="ordering",
            verdict=verdict_trend(hi["a_rel"] > one["a_rel"] > lo["a_rel"]),
        ),
    ]
    return Outcome(rows=rows, data=data)


# --------------------------------------------------------------- Figure 8

#: Figure 8's programs: (scenario name, model program, start ms). The paper
#: staggers the starts (astar, astar, lbm, sjeng) without giving times; one
#: second apart is an assumption.
F8_PROGRAMS = (
    ("astar-1", "astar", 0.0),
    ("astar-2", "astar", 1000.0),
    ("lbm", "lbm", 2000.0),
    ("sjeng", "sjeng", 3000.0),
)
#: Work on a baseline CPU, ms (assumptions: the paper gives no run times; its
#: timeline ends lbm before sjeng and the astars last, which these amounts
#: reproduce given the fused speedups — the exit order is an input here, the
#: allocations are the node manager's).
F8_WORK_MS = {"astar": 20_000.0, "lbm": 3000.0, "sjeng": 6000.0}
F8_CPUS = 10
#: The paper's sequence (Figure 8 and §5.4): object sizes after each start and
#: exit, the two astars as a sorted pair.
F8_PUBLISHED: tuple[tuple[str, dict[str, Any]], ...] = (
    ("astar-1 starts", {"astar": (4,)}),
    ("astar-2 starts", {"astar": (4, 4)}),
    ("(a) lbm starts", {"astar": (2, 4), "lbm": 4}),
    ("(b) sjeng starts", {"astar": (2, 2), "lbm": 2, "sjeng": 4}),
    ("(c) lbm exits", {"astar": (2, 4), "sjeng": 4}),
    ("(d) sjeng exits", {"astar": (4, 4)}),
)
#: How long after a start or exit the allocation is read: the manager acts at
#: once, the cluster scheduler fuses within a tick or a min granularity.
F8_SETTLE_S = 0.1


def f8_scenario(notify: bool = True) -> dict[str, Any]:
    """Four sequential programs on one 10-CPU node, each asking for a 4-CPU
    ``sequential`` object weighted by its 4-CPU speedup (Table 2)."""
    from .chameleon_programs import model_program

    sp = speedups("dyn4")
    objects = []
    programs = []
    for name, prog, start in F8_PROGRAMS:
        p = model_program(prog, program_name=name, work_ms=F8_WORK_MS[prog], start_ms=start)
        programs.append(p)
        objects.append(f"{name}:4:1:{sp[p['class']]:g}")
    notify_s = "on" if notify else "off"
    return {
        "name": "chameleon-f8",
        "duration_s": 200.0,
        "machine": {
            "tick_hz": 250,
            "migration": {"enabled": False},
            "types": {"base": {"capacity": 1024, "pstates": [{"mhz": 2000, "volt": 1.0}]}},
            "clusters": [{"type": "base", "cores": F8_CPUS, "node": 0, "duty_cycle": BASE_DUTY}],
        },
        "scheduler": (
            f"chameleon[objects={' '.join(objects)}, nodes=on, notify={notify_s}, "
            "mechanism=proxy-apic]"
        ),
        "workload": {"programs": programs},
        "dynamic": {"mechanism": "proxy-apic", "fusion": fusion_levels()},
    }


def object_intervals(res: Any) -> list[dict[str, Any]]:
    """Fused objects of a traced run: owner program, CPUs, from, to. The owner
    is the thread running on the representative CPU when the fuse was asked."""
    runs = [e for e in res.trace if e.get("type") == "run"]
    task_prog = {int(t["task"]): str(t["program"]) for t in res.tasks.to_dict("records")}
    recs = res.reconfigs.to_dict("records")
    out: list[dict[str, Any]] = []
    for i, r in enumerate(recs):
        if r["op"] != "fuse":
            continue
        cpus = list(r["cpus"])
        t_ns = round(float(r["start_s"]) * 1e9)
        owner = next(
            (
                task_prog[int(e["task"])]
                for e in runs
                if e["cpu"] == cpus[0] and e["t_ns"] <= t_ns < e["end_ns"]
            ),
            "?",
        )
        end = next(
            (
                float(s["start_s"])
                for s in recs[i + 1 :]
                if s["op"] == "split" and s["cpus"][0] == cpus[0]
            ),
            math.inf,
        )
        out.append({"program": owner, "cpus": cpus, "from_s": float(r["start_s"]), "to_s": end})
    return out


def allocation_at(intervals: list[dict[str, Any]], t: float) -> dict[str, Any]:
    """Object sizes at time ``t``: astars as a sorted tuple, others as ints."""
    alloc: dict[str, Any] = {}
    astars: list[int] = []
    for iv in intervals:
        if iv["from_s"] <= t < iv["to_s"]:
            if iv["program"].startswith("astar"):
                astars.append(len(iv["cpus"]))
            else:
                alloc[iv["program"]] = len(iv["cpus"])
    if astars:
        alloc["astar"] = tuple(sorted(astars))
    return alloc


def plot_f8(data: dict[str, Any], path: Path) -> None:
    """Figure 8: CPU allocation to execution objects over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plot import save

    names = [n for n, _, _ in F8_PROGRAMS]
    colors = dict(zip(names, ("tab:blue", "tab:cyan", "tab:orange", "tab:red"), strict=True))
    fig, ax = plt.subplots(figsize=(9, 4))
    ends = [iv["to_s"] for iv in data["intervals"] if math.isfinite(iv["to_s"])]
    end = max(ends + [iv["from_s"] for iv in data["intervals"]], default=1.0) + 0.5
    for iv in data["intervals"]:
        to = min(iv["to_s"], end)
        for c in iv["cpus"]:
            ax.broken_barh(
                [(iv["from_s"], to - iv["from_s"])], (c - 0.4, 0.8), color=colors.get(iv["program"])
            )
    for label, t in data["events"]:
        ax.axvline(t, color="grey", lw=0.6, ls="--")
        ax.text(t, F8_CPUS - 0.3, label.split(" ")[0], fontsize=7)
    for n in names:
        ax.plot([], [], color=colors[n], lw=6, label=n)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("CPU")
    ax.set_yticks(range(F8_CPUS))
    ax.set_title("Chameleon Fig. 8 in simulation: CPUs of each execution object")
    ax.legend(loc="lower right", fontsize=8)
    save(fig, path)


@reproduction(
    "chameleon-f8",
    paper=PAPER,
    title="node manager: CPU allocation for astar, astar, lbm, sjeng on a 10-CPU node (Fig. 8)",
    plot=plot_f8,
)
def chameleon_f8(scale: str) -> Outcome:
    del scale  # one run of a few simulated seconds at every scale
    res = api.run(f8_scenario(), trace=True)
    intervals = object_intervals(res)
    done = {str(p["program"]): p for p in res.programs.to_dict("records")}
    starts = {n: s / 1e3 for n, _, s in F8_PROGRAMS}
    ends = {n: starts[n] + float(done[n]["completion_s"]) for n, _, _ in F8_PROGRAMS}
    times = [starts["astar-1"], starts["astar-2"], starts["lbm"], starts["sjeng"],
             ends["lbm"], ends["sjeng"]]  # fmt: skip
    rows = []
    events = []
    exit_order = sorted(ends, key=lambda n: ends[n])
    for (label, published), t in zip(F8_PUBLISHED, times, strict=True):
        got = allocation_at(intervals, t + F8_SETTLE_S)
        events.append((label, t))
        rows.append(
            Row(
                id="chameleon-f8",
                claim=f"{label}: object sizes",
                published=_fmt_alloc(published),
                simulated=_fmt_alloc(got),
                tolerance="exact",
                verdict=verdict_trend(got == published),
                note=(
                    f"read {F8_SETTLE_S * 1e3:.0f} ms after t = {t:.3f} s; exit order "
                    f"{', '.join(exit_order)} (set by the assumed work amounts)"
                ),
            )
        )
    return Outcome(rows=rows, data={"intervals": intervals, "events": events})


def _fmt_alloc(alloc: dict[str, Any]) -> str:
    parts = []
    for k in sorted(alloc):
        v = alloc[k]
        parts.append(f"{k} {'+'.join(str(x) for x in v) if isinstance(v, tuple) else v}")
    return ", ".join(parts)


# --------------------------------------------------------------- Figure 9

#: §5.5: one instance of each of six SPEC CPU 2006 programs of Table 3 on 4
#: physical cores (8 hyperthreads) of the real machine (no duty-cycle
#: emulation), Linux against Chameleon treating each core as an execution
#: object of its two hyperthreads.
F9_PROGRAMS = ("gcc", "astar", "dealii", "lbm", "sjeng", "h264ref")
F9_CORES = 4
#: Each program's speed while the other hyperthread of its core is busy,
#: relative to running alone on the core (assumption). The paper gives no
#: per-program numbers. Two busy hyperthreads typically get a few tens of
#: percent more throughput than one thread alone, i.e. each keeps a bit more
#: than half its speed, so the factors lie in 0.55-0.70. Which programs lose
#: most is taken from the paper's text (§5.5: astar and sjeng gain most from
#: a core of their own), so they get the lowest factors: that ordering is an
#: input here, not a prediction. The rows check what the schedulers do with
#: it.
F9_SMT_FACTOR = {
    "gcc": 0.66,
    "astar": 0.55,
    "dealii": 0.64,
    "lbm": 0.70,
    "sjeng": 0.58,
    "h264ref": 0.62,
}
#: Work of each program alone on a core, ms (assumption, as the other rows:
#: the paper gives no run times).
F9_WORK_MS = 4000.0
#: Chameleon runs the prioritised programs on non-shared cores: the share of
#: their run time alone is 1 in the paper; allowed off by this much (the
#: first min granularity, while grants settle).
F9_ALONE_ABS_TOL = 0.05


def f9_weights() -> dict[str, float]:
    """Each program's alone-on-core speedup, the weight its thread asks for
    its core with (the paper annotates the threads with their speedups)."""
    return {p: 1.0 / f for p, f in F9_SMT_FACTOR.items()}


def f9_scenario(scheduler: str) -> dict[str, Any]:
    """Figure 9's set-up under ``scheduler`` (``cfs`` or ``chameleon``)."""
    from .chameleon_programs import model_program

    programs = []
    for name in F9_PROGRAMS:
        p = model_program(name, work_ms=F9_WORK_MS)
        p["smt_factor"] = F9_SMT_FACTOR[name]
        programs.append(p)
    if scheduler == "chameleon":
        objects = " ".join(f"{p}:2:1:{w:.4g}" for p, w in f9_weights().items())
        scheduler = f"chameleon[smt=on, objects={objects}]"
    return {
        "name": "chameleon-f9",
        "duration_s": 60.0,
        "scheduler": scheduler,
        "machine": {
            "tick_hz": 250,
            "migration": {"enabled": False},
            "types": {
                "ht": {
                    "capacity": 1024,
                    "pstates": [{"mhz": 2000, "volt": 1.0}],
                    # For threads without their own factor (none here).
                    "smt_factor": 0.6,
                }
            },
            "clusters": [{"type": "ht", "cores": F9_CORES, "smt": 2, "node": 0}],
        },
        "workload": {"programs": programs},
        # Hyperthreads still take interrupts when idle: no proxies (§4.1).
        "dynamic": {
            "mechanism": "halt",
            "fusion_rule": "siblings",
            "fusion": [{"level": 2, "speedup": {"default": 1.0}}],
        },
    }


def alone_shares(res: Any, until_s: float) -> dict[str, float]:
    """Per program: the share of its run time before ``until_s`` during which
    the other hyperthread of its core ran nothing (cores are pairs of
    consecutive cpus, as clusters number them)."""
    runs = [e for e in res.trace if e.get("type") == "run"]
    end = round(until_s * 1e9)
    by_cpu: dict[int, list[tuple[int, int]]] = {}
    for e in runs:
        by_cpu.setdefault(int(e["cpu"]), []).append((int(e["t_ns"]), int(e["end_ns"])))
    task_prog = {int(t["task"]): str(t["program"]) for t in res.tasks.to_dict("records")}
    ran: dict[str, int] = {}
    alone: dict[str, int] = {}
    for e in runs:
        a, b = int(e["t_ns"]), min(int(e["end_ns"]), end)
        if b <= a:
            continue
        sib = int(e["cpu"]) ^ 1
        busy = sum(max(0, min(b, y) - max(a, x)) for x, y in by_cpu.get(sib, []))
        prog = task_prog[int(e["task"])]
        ran[prog] = ran.get(prog, 0) + (b - a)
        alone[prog] = alone.get(prog, 0) + (b - a - busy)
    return {p: alone.get(p, 0) / ran[p] for p in ran}


def plot_f9(data: dict[str, Any], path: Path) -> None:
    """Figure 9: each program's performance relative to running alone on a
    core, under Linux (cfs) and Chameleon."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plot import save

    fig, ax = plt.subplots(figsize=(8, 3.5))
    xs = range(len(F9_PROGRAMS))
    for i, (system, color) in enumerate((("cfs", "tab:grey"), ("chameleon", "tab:blue"))):
        vals = [data["perf"][system][p] for p in F9_PROGRAMS]
        ax.bar([x + (i - 0.5) * 0.38 for x in xs], vals, 0.38, label=system, color=color)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(F9_PROGRAMS)
    ax.set_ylabel("speed vs alone on a core")
    ax.set_ylim(0, 1.1)
    ax.set_title("Chameleon Fig. 9 in simulation: six programs on 4 cores / 8 hyperthreads")
    ax.legend(fontsize=8)
    save(fig, path)


@reproduction(
    "chameleon-f9",
    paper=PAPER,
    title="SMT: cores as execution objects for the programs that gain most alone (Fig. 9)",
    plot=plot_f9,
)
def chameleon_f9(scale: str) -> Outcome:
    del scale  # two runs of a few simulated seconds at every scale
    weights = f9_weights()
    top = sorted(weights, key=lambda p: (-weights[p], p))[:2]
    shares: dict[str, dict[str, float]] = {}
    perf: dict[str, dict[str, float]] = {}
    for system in ("cfs", "chameleon"):
        res = api.run(f9_scenario(system), trace=True)
        done = {
            str(p["program"]): float(p["completion_s"]) for p in res.programs.to_dict("records")
        }
        first = min(done.values())
        shares[system] = alone_shares(res, first)
        perf[system] = {p: F9_WORK_MS / 1e3 / done[p] for p in F9_PROGRAMS}
    rows: list[Row] = []
    for p in top:
        rows.append(
            within_row(
                "chameleon-f9",
                f"Chameleon runs {p} (alone-on-core speedup {weights[p]:.2f}, among the two "
                "highest) on an un-shared core: share of its run time alone while all six run",
                1.0,
                shares["chameleon"][p],
                digits=3,
                abs_tol=F9_ALONE_ABS_TOL,
                note="the ordering of the speedups is an input (assumed SMT factors, see "
                "F9_SMT_FACTOR); the grants are the policy's",
            )
        )
    cfs_top = [shares["cfs"][p] for p in top]
    cham_top = [shares["chameleon"][p] for p in top]
    others = sorted(p for p in F9_PROGRAMS if p not in top)
    cfs_alone = [p for p in F9_PROGRAMS if shares["cfs"][p] > 0.5]
    rows.append(
        Row(
            id="chameleon-f9",
            claim=f"Linux does not prioritise {' and '.join(top)}: their share of run time "
            "alone is below Chameleon's",
            published="lower under Linux",
            simulated=f"cfs {', '.join(f'{v:.2f}' for v in cfs_top)}; "
            f"chameleon {', '.join(f'{v:.2f}' for v in cham_top)}",
            tolerance="ordering",
            verdict=verdict_trend(all(c < h for c, h in zip(cfs_top, cham_top, strict=True))),
            note=(
                "programs alone more than half the time under cfs: "
                f"{', '.join(cfs_alone) or 'none'}. cfs spreads new threads over idle "
                "cores first (find_idlest_group, select_idle_core), so the first four take "
                "a core each and the last two share; which programs stay alone depends on "
                "the order they start in, not on what they gain"
            ),
        )
    )
    rows.append(
        Row(
            id="chameleon-f9",
            claim=f"{' and '.join(top)} run faster under Chameleon than under Linux "
            "(speed vs alone on a core)",
            published="faster",
            simulated="; ".join(
                f"{p} cfs {perf['cfs'][p]:.2f}, chameleon {perf['chameleon'][p]:.2f}" for p in top
            ),
            tolerance="ordering",
            verdict=verdict_trend(all(perf["chameleon"][p] > perf["cfs"][p] for p in top)),
            note=f"the others ({', '.join(others)}) share cores while these two run",
        )
    )
    return Outcome(rows=rows, data={"perf": perf, "alone": shares, "top": top})


# --------------------------------------------------------------- Table 2 platforms

#: Table 2's configurations: the machine of each, the scheduler the paper
#: runs on it (native Linux on the CMP and the ACMPs, Chameleon on the
#: dynamic processor).
CONFIGS = ("cmp", "acmp3", "acmp6", "dynamic")
FAST_CPUS = {"acmp3": 3, "acmp6": 6}
CONFIG_LABEL = {"cmp": "CMP", "acmp3": "ACMP-3", "acmp6": "ACMP-6", "dynamic": "Chameleon"}


def config_cpus(config: str) -> int:
    """Number of CPUs of a Table 2 configuration (ACMP: 12 slow + the fast ones)."""
    if config not in CONFIGS:
        raise ValueError(f"unknown configuration {config!r}; known: {', '.join(CONFIGS)}")
    return 12 + FAST_CPUS[config] if config in FAST_CPUS else NODES * CPUS_PER_NODE


def platform_scenario(
    config: str,
    programs: list[dict[str, Any]],
    *,
    name: str,
    objects: str = "",
    nodes: bool = False,
    notify: bool = True,
    object_cpus: str = "",
    duration_s: float = 1000.0,
) -> dict[str, Any]:
    """A scenario on one of Table 2's configurations (§5.1).

    ``cmp``: 24 baseline CPUs in two nodes of 12, Linux's CFS (``cfs``).
    ``acmp3`` / ``acmp6``: 12 baseline CPUs plus 3 fast ones at ACMP-3's duty
    cycles (75/87.5/100%) or 6 at ACMP-6's (62.5/75/75%); native Linux with
    no migration (``pinned``): threads stay where they are first placed, and
    a program's ``affinity`` pins it (the paper pins the sequential programs
    to the fast CPUs). ``dynamic``: the CMP's 24 CPUs with fusion levels 2
    and 4 at Table 2's duty cycles, scheduled by ``chameleon`` (proxy-APIC,
    the paper's mechanism) with the thread requests ``objects``, node managers
    when ``nodes`` (``notify`` on or off; ``object_cpus`` limits the CPUs
    they build objects from)."""
    if config not in CONFIGS:
        raise ValueError(f"unknown configuration {config!r}; known: {', '.join(CONFIGS)}")
    scn: dict[str, Any] = {"name": name, "seed": 1, "duration_s": duration_s}
    if config in FAST_CPUS:
        scn["scheduler"] = "pinned"
        scn["machine"] = machine(fast=FAST_CPUS[config], fast_config=config)
    elif config == "cmp":
        scn["scheduler"] = "cfs"
        scn["machine"] = machine()
    else:
        params = []
        if objects:
            params.append(f"objects={objects}")
        if nodes:
            params.append("nodes=on")
            params.append(f"notify={'on' if notify else 'off'}")
            if object_cpus:
                params.append(f"object_cpus={object_cpus}")
        params.append("mechanism=proxy-apic")
        scn["scheduler"] = f"chameleon[{', '.join(params)}]"
        scn["machine"] = machine()
    scn["workload"] = {"programs": programs}
    if config == "dynamic":
        scn["dynamic"] = {"mechanism": "proxy-apic", "fusion": fusion_levels()}
    return scn


#: Work of every thread, sequential or parallel, on a baseline CPU, ms: the
#: paper gives no sizes (assumption: a parallel thread does as much work as a
#: sequential program, so at a 2x speedup the N-Queens finish first and the
#: parallel program then has every CPU, as §5.4 describes).
MIX_WORK_MS = {"full": 4000.0, "quick": 1000.0}
#: The sequential kernel of §5.4 and the number of instances of Figure 7.
F7_NQUEENS = 3
F7_TAXES = (0.01, 1.0, 100.0)
F7_BINDINGS = ("mandelbrot-db", "mandelbrot-sb")


def mix_scenario(
    config: str,
    *,
    binding: str = "mandelbrot-db",
    nqueens: int = F7_NQUEENS,
    parallel_threads: int | None = None,
    tax: float = 1.0,
    notify: bool = True,
    scale: str = "full",
    over: bool = False,
) -> dict[str, Any]:
    """§5.4's mixed workloads: ``nqueens`` N-Queens (each asking for a 4-CPU
    ``sequential`` object with tax ``tax``, weight 1) started together with a
    Mandelbrot of ``binding`` (``mandelbrot-db`` dynamic, ``mandelbrot-sb``
    static).

    Under-provisioned (Figure 7, ``over=False``): the parallel program has one
    thread per CPU of the configuration (24; 15 on ACMP-3) and may run
    anywhere, except on an ACMP, where the N-Queens are pinned one per fast
    CPU and have them to themselves (the parallel threads run on the other
    CPUs: the paper reports the same sequential speedup on ACMP-3 as with
    Chameleon at a low tax, which needs unshared fast CPUs).
    Over-provisioned (Figure 6, ``over=True``): the parallel program has 16
    threads bound to CPUs 0-15 ("requiring 16 CPUs") and the node managers
    build objects from the other 8 ("eight available CPUs")."""
    from .chameleon_programs import model_program

    work = MIX_WORK_MS[scale]
    ncpu = config_cpus(config)
    programs = []
    for i in range(1, nqueens + 1):
        p = model_program("nqueen", program_name=f"nqueen-{i}", work_ms=work)
        if config in FAST_CPUS:
            if i > FAST_CPUS[config]:
                raise ValueError(
                    f"{config} has {FAST_CPUS[config]} fast CPUs for {nqueens} N-Queens"
                )
            p["affinity"] = [i - 1]
        programs.append(p)
    threads = parallel_threads or (16 if over else ncpu)
    affinity = None
    if over:
        affinity = list(range(16))
    elif config in FAST_CPUS:
        affinity = list(range(nqueens, ncpu))
    par = model_program(
        binding,
        program_name="parallel",
        threads=threads,
        work_ms=work * threads,
        cpus=len(affinity) if affinity else ncpu,
    )
    if affinity:
        par["affinity"] = affinity
    programs.append(par)
    objects = " ".join(f"nqueen-{i}:4:{tax:g}" for i in range(1, nqueens + 1))
    tag = (
        f"{binding}-{nqueens}q"
        + ("-over" if over else f"-tax{tax:g}")
        + ("" if notify else "-nonotify")
    )
    return platform_scenario(
        config,
        programs,
        name=f"chameleon-mix-{config}-{tag}",
        objects=objects if config == "dynamic" else "",
        nodes=config == "dynamic",
        notify=notify,
        object_cpus="16-23" if over and config == "dynamic" else "",
    )


def _completions(res: Any) -> dict[str, float]:
    return {str(p["program"]): float(p["completion_s"]) for p in res.programs.to_dict("records")}


def baseline_s(program: dict[str, Any]) -> float:
    """Completion time of ``program`` with every thread on one baseline CPU
    (CPU 0 of the CMP): the reference of §5.4's speedups."""
    from .chameleon_programs import openmp_barrier_spin_ms

    p = dict(program)
    p["affinity"] = [0]
    p.pop("start_ms", None)
    if "barrier_spin_ms" in p:
        # libgomp counts the CPUs of its affinity mask: one here.
        p["barrier_spin_ms"] = openmp_barrier_spin_ms(int(p["threads"]), 1)
    scn = platform_scenario("cmp", [p], name=f"chameleon-baseline-{p['name']}")
    return _completions(api.run(scn))[p["name"]]


def preset_scenario(config: str) -> dict[str, Any]:
    """The platform preset ``scenarios/chameleon-<config>.toml``: Figure 7's
    mix (three N-Queens and a Mandelbrot with dynamic binding, tax 1 on the
    dynamic processor) on one of Table 2's configurations."""
    scn = mix_scenario(config, binding="mandelbrot-db", tax=1.0, scale="full")
    scn["name"] = f"chameleon-{config}"
    return scn


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _toml_table(prefix: str, table: dict[str, Any], lines: list[str]) -> None:
    """``table`` under ``[prefix]`` (the top level when empty): scalars and
    flat tables inline, tables of tables as sub-tables (every table at the
    top level), lists of tables as arrays of tables."""

    def sub(v: Any) -> bool:
        return isinstance(v, dict) and (
            not prefix or (bool(v) and all(isinstance(x, dict) for x in v.values()))
        )

    def array(v: Any) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)

    simple = [(k, v) for k, v in table.items() if not sub(v) and not array(v)]
    if prefix and simple:
        lines += ["", f"[{prefix}]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in simple]
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else k
        if sub(v):
            if prefix:
                for name, subtable in v.items():
                    _toml_table(f"{key}.{name}", subtable, lines)
            else:
                _toml_table(key, v, lines)
        elif array(v):
            for item in v:
                lines += ["", f"[[{key}]]"]
                lines += [f"{ik} = {_toml_value(iv)}" for ik, iv in item.items()]


def preset_toml(config: str) -> str:
    """:func:`preset_scenario` as the text of its scenario file."""
    scn = preset_scenario(config)
    import textwrap

    label = CONFIG_LABEL[config] if config != "dynamic" else "Dynamic"
    what = {
        "cmp": "24 baseline CPUs (50% duty cycle) in two nodes of 12, Linux CFS.",
        "acmp3": "12 baseline CPUs + 3 fast ones at 75/87.5/100% duty (low/medium/high "
        "programs), native Linux without migration (pinned).",
        "acmp6": "12 baseline CPUs + 6 fast ones at 62.5/75/75% duty (low/medium/high "
        "programs), native Linux without migration (pinned).",
        "dynamic": "the CMP's 24 CPUs, fusing 2 (62.5/75/75% duty) or 4 (75/87.5/100%) "
        "CPUs, Chameleon's cluster scheduler with node managers (proxy-APIC).",
    }[config]
    text = (
        f"Chameleon (ASPLOS 2012) Table 2 platform, {label}: {what} Workload: Figure 7's "
        "mix, three N-Queens and a Mandelbrot with dynamic binding"
        + (", tax 1." if config == "dynamic" else ".")
        + f" Generated by hetsched.reproduce.chameleon.preset_toml({config!r}); see "
        "docs/dynamic.md."
    )
    head = ["# " + line for line in textwrap.wrap(text, 76)]
    head.append(f"# Run it:   hetsched run scenarios/chameleon-{config}.toml")
    lines = head[:]
    _toml_table("", {k: v for k, v in scn.items() if k != "workload"}, lines)
    for prog in scn["workload"]["programs"]:
        lines += ["", "[[workload.programs]]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in prog.items()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------- Figure 4

#: Work per thread of the parallel programs on a baseline CPU, ms (assumption,
#: as ``chameleon_programs``: the rows compare times between configurations).
F4_WORK_PER_THREAD_MS = {"full": 2000.0, "quick": 250.0}
F4_REL_TOL = 0.03
#: §5.3: on the ACMPs "the lost parallelism outweighs the powerful CPUs ...
#: except for Fibonacci and Mandelbrot with dynamic scheduling".
F4_ACMP_NOT_SLOWER = ("fibonacci", "mandelbrot-db")


def f4_scenario(config: str, program: str, scale: str = "full") -> dict[str, Any]:
    """A parallel model program alone on a Table 2 configuration, with one
    thread per CPU (24 on the CMP and the dynamic processor, 15 on ACMP-3, 18
    on ACMP-6): on an ACMP each thread is pinned where it is first placed,
    one per CPU, so the fast CPUs run one thread each (the paper: native Linux
    with threads pinned to the fast CPUs). The total work is the same on every
    configuration. On the dynamic processor the program asks for no object:
    Chameleon schedules it as native threads."""
    from .chameleon_programs import model_program

    total = F4_WORK_PER_THREAD_MS[scale] * NODES * CPUS_PER_NODE
    ncpu = config_cpus(config)
    p = model_program(program, threads=ncpu, work_ms=total, cpus=ncpu)
    return platform_scenario(config, [p], name=f"chameleon-f4-{config}-{program}")


def plot_f4(data: dict[str, dict[str, float]], path: Path) -> None:
    """Figure 4: execution time of each parallel program per configuration,
    relative to the CMP."""
    from ..plot import bars
    from .chameleon_programs import PARALLEL

    labels = [f"{prog} {CONFIG_LABEL[c]}" for prog in PARALLEL for c in CONFIGS]
    values = [data[prog][c] / data[prog]["cmp"] for prog in PARALLEL for c in CONFIGS]
    bars(
        labels,
        {"time relative to CMP": values},
        path,
        title="Chameleon Fig. 4 in simulation: parallel programs",
        reference={"time relative to CMP": 1.0},
    )


@reproduction(
    "chameleon-f4",
    paper=PAPER,
    title="parallel programs on CMP, ACMP-3, ACMP-6 and Chameleon (Fig. 4)",
    plot=plot_f4,
)
def chameleon_f4(scale: str) -> Outcome:
    from .chameleon_programs import PARALLEL

    times: dict[str, dict[str, float]] = {}
    for prog in PARALLEL:
        for cfg in CONFIGS:
            res = api.run(f4_scenario(cfg, prog, scale))
            times.setdefault(prog, {})[cfg] = float(res.programs["completion_s"].iloc[0])
    rows: list[Row] = []
    for prog in PARALLEL:
        t = times[prog]
        rows.append(
            within_row(
                "chameleon-f4",
                f"{prog}: Chameleon's time relative to the CMP's",
                1.0,
                t["dynamic"] / t["cmp"],
                digits=4,
                rel_tol=F4_REL_TOL,
                follows_from=(
                    "construction: the threads ask for no object, so Chameleon runs them "
                    "natively with the CMP's scheduler on the same 24 baseline CPUs"
                ),
            )
        )
    for prog in PARALLEL:
        t = times[prog]
        for cfg in ("acmp3", "acmp6"):
            rel = t[cfg] / t["cmp"]
            if prog in F4_ACMP_NOT_SLOWER:
                claim = f"{prog}: {CONFIG_LABEL[cfg]} not slower than the CMP"
                holds = rel <= 1.0 + F4_REL_TOL
                note = (
                    ""
                    if holds
                    else "the model's fast CPUs are a speedup on independent CPUs: "
                    f"{CONFIG_LABEL[cfg]} has {_capacity(cfg):g} baseline CPUs of capacity "
                    "for a high program against the CMP's 24, and a dynamically balanced "
                    "program's time follows capacity. The paper's CMP runs 24 hyperthreads "
                    "on 12 cores, so its 24 CPUs deliver less than 24 baseline CPUs; the "
                    "model does not share a core between hyperthreads"
                )
            else:
                claim = f"{prog}: {CONFIG_LABEL[cfg]} slower than the CMP"
                holds = rel > 1.0
                note = (
                    "static split: the threads on fast CPUs wait for those on slow ones"
                    if prog in ("blackscholes", "mandelbrot-sb")
                    else "fewer CPUs for the pool's processes"
                )
            rows.append(
                Row(
                    id="chameleon-f4",
                    claim=claim,
                    published="slower" if prog not in F4_ACMP_NOT_SLOWER else "not slower",
                    simulated=f"{rel:.3f}x the CMP's time",
                    tolerance="ordering" if prog not in F4_ACMP_NOT_SLOWER else "ordering (3%)",
                    verdict=verdict_trend(holds),
                    note=note,
                )
            )
    return Outcome(rows=rows, data=times)


def _capacity(config: str) -> float:
    """Capacity of a configuration for a high program, in baseline CPUs."""
    if config in FAST_CPUS:
        return 12 + FAST_CPUS[config] * speedups(config)["high"]
    return float(NODES * CPUS_PER_NODE)


# --------------------------------------------------------------- Figure 6

#: Figure 6's columns: (label, N-Queens, notification).
F6_COLUMNS = (("2", 2, True), ("3", 3, True), ("3*", 3, False), ("4", 4, True))
#: §5.4: "almost double" with two, "50% speedup" with four.
F6_PUBLISHED = {"2": 2.0, "4": 1.5}
F6_REL_TOL = 0.10
F6_BINDING = "mandelbrot-sb"


def f6_scenario(nqueens: int, notify: bool = True, scale: str = "full") -> dict[str, Any]:
    """Over-provisioned: a 16-thread Mandelbrot with static binding on CPUs
    0-15 and ``nqueens`` N-Queens asking for 4-CPU objects from the other 8
    CPUs (node managers on; ``notify`` off for "3*")."""
    scn = mix_scenario(
        "dynamic",
        binding=F6_BINDING,
        nqueens=nqueens,
        tax=1.0,
        notify=notify,
        scale=scale,
        over=True,
    )
    scn["name"] = f"chameleon-f6-{nqueens}" + ("" if notify else "-nonotify")
    return scn


def plot_f6(data: dict[str, Any], path: Path) -> None:
    """Figure 6: mean N-Queen speedup over the baseline per column."""
    from ..plot import bars

    labels = [c for c, _, _ in F6_COLUMNS]
    bars(
        labels,
        {
            "N-Queen speedup": [data[c]["nqueen"] for c in labels],
            "parallel speedup": [data[c]["parallel"] for c in labels],
        },
        path,
        title="Chameleon Fig. 6 in simulation: 16-thread Mandelbrot + N-Queens",
        xlabel="N-Queen instances (3*: no node-manager notification)",
    )


@reproduction(
    "chameleon-f6",
    paper=PAPER,
    title="over-provisioned: 16-thread Mandelbrot + 2, 3, 4 N-Queens, 3* unnotified (Fig. 6)",
    plot=plot_f6,
)
def chameleon_f6(scale: str) -> Outcome:
    from .chameleon_programs import model_program

    work = MIX_WORK_MS[scale]
    base_q = baseline_s(model_program("nqueen", work_ms=work))
    data: dict[str, Any] = {}
    for label, n, notify in F6_COLUMNS:
        scn = f6_scenario(n, notify, scale)
        par = next(p for p in scn["workload"]["programs"] if p["name"] == "parallel")
        base_p = baseline_s(par)
        res = api.run(scn, trace=True)
        done = _completions(res)
        q = [base_q / done[f"nqueen-{i}"] for i in range(1, n + 1)]
        data[label] = {
            "nqueen": sum(q) / len(q),
            "each": q,
            "parallel": base_p / done["parallel"],
            "intervals": object_intervals(res),
            "ends": sorted(done[f"nqueen-{i}"] for i in range(1, n + 1)),
        }
    rows: list[Row] = []
    for label in ("2", "4"):
        d = data[label]
        rows.append(
            within_row(
                "chameleon-f6",
                f"{label} N-Queens: mean speedup over a baseline CPU",
                F6_PUBLISHED[label],
                d["nqueen"],
                digits=3,
                rel_tol=F6_REL_TOL,
                note=(
                    f"each: {', '.join(f'{x:.3f}' for x in d['each'])}; objects of "
                    f"{_sizes_at(d['intervals'], 0.1)} CPUs; the 16-thread Mandelbrot: "
                    f"{d['parallel']:.2f}x"
                ),
            )
        )
    three = data["3"]
    first_end = three["ends"][0]
    start_sizes = _sizes_at(three["intervals"], 0.1)
    after_sizes = _sizes_at(three["intervals"], first_end + 0.1)
    rows.append(
        Row(
            id="chameleon-f6",
            claim="3 N-Queens: one 4-CPU and two 2-CPU objects",
            published="4+2+2",
            simulated="+".join(str(x) for x in start_sizes),
            tolerance="exact",
            verdict=verdict_trend(start_sizes == [4, 2, 2]),
            note="object sizes 0.1 s after the start, from the run's fuses",
        )
    )
    rows.append(
        Row(
            id="chameleon-f6",
            claim="3 N-Queens: when the first finishes, both others get 4-CPU objects",
            published="4+4",
            simulated="+".join(str(x) for x in after_sizes),
            tolerance="exact",
            verdict=verdict_trend(after_sizes == [4, 4]),
            note=f"0.1 s after the first exit at {first_end:.3f} s (node-manager notification)",
        )
    )
    star = data["3*"]
    star_after = _sizes_at(star["intervals"], star["ends"][0] + 0.1)
    rows.append(
        Row(
            id="chameleon-f6",
            claim='"3*" (no notification) slower than 3: mean N-Queen speedup',
            published="3* < 3",
            simulated=f"{star['nqueen']:.3f} < {three['nqueen']:.3f}",
            tolerance="ordering",
            verdict=verdict_trend(star["nqueen"] < three["nqueen"]),
            note=(
                "without notification the two 2-CPU objects stay at 2 CPUs after the "
                f"first exit ({'+'.join(str(x) for x in star_after)})"
            ),
        )
    )
    return Outcome(rows=rows, data=data)


def _sizes_at(intervals: list[dict[str, Any]], t: float) -> list[int]:
    """Sizes of the objects fused at time ``t``, largest first."""
    return sorted((len(iv["cpus"]) for iv in intervals if iv["from_s"] <= t < iv["to_s"]),
                  reverse=True)  # fmt: skip


# --------------------------------------------------------------- Figure 7

#: §5.4: N-Queen speedup per tax rate ("97% over baseline", "less than 50%",
#: "complete at baseline speedup") and the parallel program's speedup at tax
#: 0.01 and 100 per binding.
F7_NQUEEN = {0.01: 1.97, 100.0: 1.0}
F7_NQUEEN_TAX1_BELOW = 1.5
F7_PARALLEL = {"mandelbrot-db": (10.0, 11.4), "mandelbrot-sb": (8.8, 11.4)}
F7_REL_TOL = 0.10
BINDING_LABEL = {"mandelbrot-db": "dynamic binding", "mandelbrot-sb": "static binding"}


def f7_scenario(config: str, binding: str, tax: float = 1.0, scale: str = "full") -> dict[str, Any]:
    """Under-provisioned: three N-Queens and a Mandelbrot with one thread per
    CPU (24; ACMP-3: 15, on the slow CPUs, the N-Queens pinned to the fast
    ones), tax ``tax`` on the dynamic processor."""
    scn = mix_scenario(config, binding=binding, tax=tax, scale=scale)
    scn["name"] = f"chameleon-f7-{config}-{binding}" + (
        f"-tax{tax:g}" if config == "dynamic" else ""
    )
    return scn


def plot_f7(data: dict[str, Any], path: Path) -> None:
    """Figure 7: N-Queen and parallel speedups per binding and tax (and ACMP-3)."""
    from ..plot import bars

    cols = [f"tax {t:g}" for t in F7_TAXES] + ["ACMP-3"]
    labels = [f"{b.split('-')[1].upper()} {c}" for b in F7_BINDINGS for c in cols]
    bars(
        labels,
        {
            "N-Queen speedup": [data[b][c]["nqueen"] for b in F7_BINDINGS for c in cols],
            "parallel speedup": [data[b][c]["parallel"] for b in F7_BINDINGS for c in cols],
        },
        path,
        title="Chameleon Fig. 7 in simulation: 3 N-Queens + 24-thread Mandelbrot",
    )


@reproduction(
    "chameleon-f7",
    paper=PAPER,
    title="under-provisioned: 3 N-Queens + 24-thread Mandelbrot, tax 0.01/1/100, ACMP-3 (Fig. 7)",
    plot=plot_f7,
)
def chameleon_f7(scale: str) -> Outcome:
    from .chameleon_programs import model_program

    base_q = baseline_s(model_program("nqueen", work_ms=MIX_WORK_MS[scale]))
    data: dict[str, dict[str, dict[str, Any]]] = {}
    for binding in F7_BINDINGS:
        runs = [(f"tax {t:g}", f7_scenario("dynamic", binding, t, scale)) for t in F7_TAXES]
        runs.append(("ACMP-3", f7_scenario("acmp3", binding, scale=scale)))
        for col, scn in runs:
            par = next(p for p in scn["workload"]["programs"] if p["name"] == "parallel")
            done = _completions(api.run(scn))
            q = [base_q / done[f"nqueen-{i}"] for i in range(1, F7_NQUEENS + 1)]
            data.setdefault(binding, {})[col] = {
                "nqueen": sum(q) / len(q),
                "each": q,
                "parallel": baseline_s(par) / done["parallel"],
            }
    rows: list[Row] = []
    for binding in F7_BINDINGS:
        d = data[binding]
        bl = BINDING_LABEL[binding]
        for tax, pub in F7_NQUEEN.items():
            got = d[f"tax {tax:g}"]["nqueen"]
            rows.append(
                within_row(
                    "chameleon-f7",
                    f"tax {tax:g}, with {bl}: N-Queen speedup over a baseline CPU",
                    pub,
                    got,
                    digits=3,
                    rel_tol=F7_REL_TOL,
                    note=(
                        _f7_nqueen_note(binding, tax, d, scale)
                        + "; each: "
                        + ", ".join(f"{x:.3f}" for x in d[f"tax {tax:g}"]["each"])
                    ),
                )
            )
        one = d["tax 1"]["nqueen"]
        rows.append(
            Row(
                id="chameleon-f7",
                claim=f"tax 1, with {bl}: N-Queen speedup below 1.5",
                published=f"< {F7_NQUEEN_TAX1_BELOW:g}",
                simulated=round(one, 3),
                tolerance="bound",
                verdict=verdict_trend(one < F7_NQUEEN_TAX1_BELOW),
                note="the N-Queens borrow about half the time and share the borrowed CPUs",
            )
        )
    for binding in F7_BINDINGS:
        d = data[binding]
        bl = BINDING_LABEL[binding]
        lo, hi = (d[f"tax {t:g}"]["parallel"] for t in (0.01, 100.0))
        pub_lo, pub_hi = F7_PARALLEL[binding]
        for tax, pub, got in ((0.01, pub_lo, lo), (100.0, pub_hi, hi)):
            rows.append(
                within_row(
                    "chameleon-f7",
                    f"tax {tax:g}: parallel speedup, {bl}",
                    pub,
                    got,
                    digits=3,
                    rel_tol=F7_REL_TOL,
                    trend_ok=lo < hi,
                    note=_f7_parallel_note(binding)
                    if got > pub * (1.0 + F7_REL_TOL)
                    else "speedup over the same program with every thread on one baseline CPU",
                )
            )
        rows.append(
            within_row(
                "chameleon-f7",
                f"parallel speedup at tax 0.01 relative to tax 100, {bl}",
                round(pub_lo / pub_hi, 4),
                lo / hi,
                digits=4,
                rel_tol=F7_REL_TOL,
                trend_ok=lo < hi,
                note=(
                    "the ratio of the two published speedups: what the N-Queens' borrowing "
                    "costs the parallel program, independent of how many baseline CPUs the "
                    "machine's 24 CPUs amount to"
                ),
            )
        )
    db = data["mandelbrot-db"]
    rows.append(
        Row(
            id="chameleon-f7",
            claim="ACMP-3 gives the N-Queens the speedup Chameleon gives at tax 0.01",
            published="same",
            simulated=f"{db['ACMP-3']['nqueen']:.3f} vs {db['tax 0.01']['nqueen']:.3f}",
            tolerance="within 10%",
            verdict=verdict_trend(
                abs(db["ACMP-3"]["nqueen"] / db["tax 0.01"]["nqueen"] - 1.0) <= F7_REL_TOL
            ),
            note="dynamic binding; on ACMP-3 each N-Queen is pinned alone on a fast CPU",
        )
    )
    rows.append(
        Row(
            id="chameleon-f7",
            claim="higher taxes give the dynamic-binding program more than on ACMP-3",
            published="tax 1, 100 > ACMP-3",
            simulated=(
                f"{db['tax 1']['parallel']:.2f}, {db['tax 100']['parallel']:.2f} vs "
                f"{db['ACMP-3']['parallel']:.2f}"
            ),
            tolerance="ordering",
            verdict=verdict_trend(
                min(db["tax 1"]["parallel"], db["tax 100"]["parallel"]) > db["ACMP-3"]["parallel"]
            ),
        )
    )
    return Outcome(rows=rows, data=data)


def _f7_nqueen_note(binding: str, tax: float, d: dict[str, Any], scale: str) -> str:
    if tax < 1:
        return "each N-Queen borrows its 4-CPU object almost all the time"
    if binding == "mandelbrot-sb":
        got = d[f"tax {tax:g}"]["nqueen"]
        if got <= F7_NQUEEN[100.0] * (1.0 + F7_REL_TOL):
            return "the N-Queens borrow no busy CPU; the barrier spins keep the CPUs busy"
        return (
            "the static-binding program's threads wait at the barriers of its four rounds; "
            f"libgomp's spin ({_spin_note()}) keeps a waiting thread's CPU busy for "
            f"{_spin_wall_ms():.0f} ms, "
            "but the waits last longer, and once a thread sleeps its idle CPU is free to "
            "borrow even at tax 100 (an idle CPU with an empty queue always qualifies), so "
            f"the N-Queens run fused part of the time: {got:.3f} with the spin, "
            f"{_f7_nqueen_without_spin(tax, scale):.3f} without it"
        )
    return "the N-Queens never borrow a busy CPU; they run natively on their own CPU"


def _spin_note() -> str:
    from .chameleon_programs import LIBGOMP_SPIN_COUNT, SPIN_ITERATION_CYCLES, X5650_GHZ

    return (
        f"GCC 4.4's {LIBGOMP_SPIN_COUNT:,} iterations of about {SPIN_ITERATION_CYCLES} cycles "
        f"at {X5650_GHZ} GHz, at a 50% duty cycle"
    )


def _spin_wall_ms() -> float:
    """Wall time of a full libgomp spin on a baseline CPU, ms."""
    from .chameleon_programs import openmp_barrier_spin_ms

    return openmp_barrier_spin_ms(24, 24) / BASE_DUTY


def _f7_nqueen_without_spin(tax: float, scale: str) -> float:
    """Figure 7's static-binding N-Queen speedup with the barrier waits
    sleeping at once: the check behind the row's note."""
    from .chameleon_programs import model_program

    scn = f7_scenario("dynamic", "mandelbrot-sb", tax, scale)
    for p in scn["workload"]["programs"]:
        p.pop("barrier_spin_ms", None)
    done = _completions(api.run(scn))
    base = baseline_s(model_program("nqueen", work_ms=MIX_WORK_MS[scale]))
    q = [base / done[f"nqueen-{i}"] for i in range(1, F7_NQUEENS + 1)]
    return sum(q) / len(q)


def _f7_parallel_note(binding: str) -> str:
    """Why the simulated parallel speedup exceeds the published one (used only
    where it does)."""
    return (
        "speedup over the same program with every thread on one baseline CPU. The model's "
        "24 CPUs are independent, so 24 threads come near 24x; the paper's are 24 "
        "hyperthreads of 12 cores, and running on a single one ('the speedup from using "
        "more CPUs is less than linear') caps the published speedup near 11.4x. "
        + (
            "With static binding the slowest thread sets the time: the three CPUs that hold "
            "two of the 27 threads halve it, so the model's speedup is near 12x whatever the "
            "CPUs deliver"
            if binding == "mandelbrot-sb"
            else "No factor is fitted to the paper's 11.4x; the ratio row compares the effect "
            "of the tax"
        )
    )
