"""Li et al. (HPCA 2010), performance asymmetry: faster-first + A-DWRR
against stock Linux (Figures 10 and 11).

Platform (Section 6.2): four big cores and four small ones whose frequency
goes from 2.33 GHz down to 1 GHz in 0.33 GHz steps; at 1 GHz the SPEC rating
ratio is 3.4:1, so a small core's speed is (f / 1 GHz) / 3.4 of a big core's
(capacity 301 × f in GHz). Timer tick 4 ms; A-DWRR's round slice unit 30 ms.

Model programs (Table 1 and Section 6.2; what each rests on):

* **SPEC OMP** (medium, 8 OpenMP threads): static data-parallel loops
  separated by barriers — `parallel`, 8 threads, 100 iterations. The
  slowest thread of each iteration sets its length.
* **kernbench** (parallel make of a kernel tree with 32 jobs): a process pool
  of 32 workers taking 1600 compile jobs of 40 ms each with 2 ms of I/O.
* **x264** (8 threads): frame-parallel encoding whose lookahead and
  frame-type decisions run on one thread — `fork_join`, 8 threads, 50
  iterations, 10% sequential (an assumption: the paper gives no split).
* **SPECjbb2005** (1-16 warehouses, one thread each, throughput = total
  transactions, spread = (max − min)/max of per-thread transactions):
  independent CPU-bound threads for a fixed time; a thread's work done is
  its transaction count.
"""

from __future__ import annotations

from typing import Any

from .. import api
from .framework import (
    TREND_FLOOR,
    Outcome,
    Row,
    reproduction,
    tolerance_text,
    trend_margin,
    verdict_trend,
    verdict_within,
)

PAPER = (
    "Li et al., Operating system support for overlapping-ISA heterogeneous"
    " multi-core architectures, HPCA 2010"
)
SMALL_GHZ = [2.33, 2.0, 1.67, 1.33, 1.0]
OURS = "faster-first"
STOCK = "cfs"
SCALE = {"full": 1.0, "quick": 0.25}
#: Seeds over which a speedup's run-to-run noise is estimated.
NOISE_SEEDS = (1, 2, 3)


def machine(small_ghz: float) -> dict[str, Any]:
    """4 big cores and 4 small ones at ``small_ghz`` (each cluster its own cache)."""
    return {
        "tick_hz": 250,
        "types": {
            "big": {"capacity": 1024, "pstates": [{"mhz": 2660, "volt": 1.2}]},
            "small": {
                "capacity": round(1024 / 3.4 * small_ghz),
                "pstates": [{"mhz": round(small_ghz * 1000), "volt": 1.0}],
            },
        },
        "clusters": [{"type": "big", "cores": 4}, {"type": "small", "cores": 4}],
    }


def benchmark(name: str, scale: float) -> dict[str, Any]:
    """A model program of Table 1 (see the module doc)."""
    if name == "SPEC OMP":
        return {"name": name, "kind": "parallel", "threads": 8, "iterations": 100,
                "work_ms": 8 * 100 * 20.0 * scale}  # fmt: skip
    if name == "kernbench":
        jobs = max(64, round(1600 * scale))
        return {"name": name, "kind": "pool", "threads": 32, "chunks": jobs,
                "work_ms": 40.0 * jobs, "io_ms": 2.0}  # fmt: skip
    if name == "x264":
        return {"name": name, "kind": "fork_join", "threads": 8, "iterations": 50,
                "seq_fraction": 0.1, "work_ms": 50 * 160.0 * scale}  # fmt: skip
    raise ValueError(f"unknown benchmark {name!r}")


def run_time(name: str, scheduler: str, small_ghz: float, scale: float, seed: int = 1) -> float:
    scn = {
        "name": f"li-f10-{name}",
        "seed": seed,
        "duration_s": 1000.0,
        "scheduler": scheduler,
        "machine": machine(small_ghz),
        "workload": {"programs": [benchmark(name, scale)]},
    }
    res = api.run(scn)
    return float(res.programs["completion_s"].iloc[0])


def jbb(threads: int, scheduler: str, small_ghz: float, duration_s: float) -> tuple[float, float]:
    """SPECjbb: (throughput in reference work-seconds per second, spread)."""
    scn = {
        "name": "li-specjbb",
        "duration_s": duration_s,
        "stop_when_done": False,
        "scheduler": scheduler,
        "machine": machine(small_ghz),
        "workload": {
            "programs": [
                {"name": "warehouse", "kind": "parallel", "threads": threads, "work_ms": 1e9}
            ]
        },
    }
    res = api.run(scn)
    work = [float(w) for w in res.tasks["work_ms"]]
    return sum(work) / 1e3 / duration_s, (max(work) - min(work)) / max(work)


def plot_f10(data: dict[str, dict[float, float]], path: Any) -> None:
    from ..plot import bars

    labels = [f"{name} {g} GHz" for name in data for g in SMALL_GHZ]
    bars(
        labels,
        {"speedup over stock Linux": [data[n][g] for n in data for g in SMALL_GHZ]},
        path,
        title="Li et al. Fig. 10 in simulation: faster-first + A-DWRR vs stock, "
        "small cores 2.33 → 1 GHz",
        reference={"speedup over stock Linux": 1.0},
    )


def plot_f11(data: dict[str, dict[int, float]], path: Any) -> None:
    from ..plot import bars

    labels = [str(n) for n in range(8, 17)]
    bars(
        labels,
        {f"spread, {s}": [data[s][n] for n in range(8, 17)] for s in data},
        path,
        title="Li et al. Fig. 11 in simulation: SPECjbb2005 thread spread "
        "(dashed: the published maximum)",
        xlabel="warehouses (threads)",
        reference={f"spread, {STOCK}": 0.61, f"spread, {OURS}": 0.06},
    )


@reproduction(
    "li-f10",
    paper=PAPER,
    title="faster-first + A-DWRR speedup over stock Linux as small cores slow (Fig. 10)",
    plot=plot_f10,
)
def li_f10(scale: str) -> Outcome:
    s = SCALE[scale]
    rows: list[Row] = []
    data: dict[str, dict[float, float]] = {}
    for name in ["SPEC OMP", "kernbench", "x264"]:
        per_seed = [
            {
                ghz: run_time(name, STOCK, ghz, s, seed) / run_time(name, OURS, ghz, s, seed)
                for ghz in SMALL_GHZ
            }
            for seed in NOISE_SEEDS
        ]
        speedup = {g: sum(p[g] for p in per_seed) / len(per_seed) for g in SMALL_GHZ}
        data[name] = speedup
        lo, hi = speedup[SMALL_GHZ[0]], speedup[SMALL_GHZ[-1]]
        # A trend must clear the seeds' spread, and at least TREND_FLOOR of the value.
        margin = max(
            trend_margin([p[g] for p in per_seed], floor=TREND_FLOOR * speedup[g])
            for g in SMALL_GHZ
        )
        grows = hi - lo > margin and hi - 1.0 > margin
        note = (
            f"from {lo:.4f} at {SMALL_GHZ[0]} GHz to {hi:.4f} at {SMALL_GHZ[-1]} GHz: "
            f"{'+' if hi >= lo else ''}{hi - lo:.4f} against a margin of {margin:.4f} "
            f"(seed spread over seeds {', '.join(map(str, NOISE_SEEDS))}, at least "
            f"{TREND_FLOOR:.0%} of the value)"
        )
        if not grows and name == "kernbench":
            note += (
                "; the model keeps all 8 cores busy for the whole build (32 jobs, 5% I/O), so "
                "where threads run changes little; a real kernel build also has sequential "
                "stages (directory recursion, final links) in which faster-first puts the one "
                "running job on a big core — the model lacks them"
            )
        rows.append(
            Row(
                id="li-f10",
                claim=f"{name}: speedup over stock Linux grows as small cores slow 2.33 → 1 GHz "
                "(by more than the margin, to above 1)",
                published="grows",
                simulated=" → ".join(f"{speedup[g]:.3f}" for g in SMALL_GHZ),
                tolerance="trend above noise",
                verdict=verdict_trend(grows),
                note=note,
            )
        )
    duration = 20.0 * s
    gains = {}
    for ghz in SMALL_GHZ:
        stock = sum(jbb(n, STOCK, ghz, duration)[0] for n in range(8, 17)) / 9
        ours = sum(jbb(n, OURS, ghz, duration)[0] for n in range(8, 17)) / 9
        gains[ghz] = ours / stock
    data["SPECjbb2005"] = gains
    worst = max(abs(g - 1.0) for g in gains.values())
    rows.append(
        Row(
            id="li-f10",
            claim="SPECjbb2005: throughput (average of 8-16 warehouses) does not gain",
            published=1.0,
            simulated=round(max(gains.values()), 4),
            tolerance=tolerance_text(abs_tol=0.03),
            verdict=verdict_within(1.0, 1.0 + worst, abs_tol=0.03),
            note="ratio to stock per small-core frequency: "
            + ", ".join(f"{g} GHz {v:.3f}" for g, v in gains.items()),
            follows_from=(
                "construction: 8-16 CPU-bound threads that never block keep all 8 cores busy "
                "under any work-conserving scheduler, so the work done per second is the "
                "machine's capacity whoever runs where"
            ),
        )
    )
    return Outcome(rows=rows, data=data)


@reproduction(
    "li-f11",
    paper=PAPER,
    title="SPECjbb2005 thread spread, 8 to 16 warehouses (Fig. 11)",
    plot=plot_f11,
)
def li_f11(scale: str) -> Outcome:
    duration = 20.0 * SCALE[scale]
    spreads = {
        sched: {n: jbb(n, sched, 1.0, duration)[1] for n in range(8, 17)} for sched in (STOCK, OURS)
    }
    stock_max = max(spreads[STOCK].values())
    ours_max = max(spreads[OURS].values())
    stock_note = ""
    # The explanation is for a spread larger than published (threads that stay
    # on one cluster); it is not offered for a smaller one.
    if stock_max > 0.61 + 0.05:
        ratio = 3.4
        worst = max(spreads[STOCK], key=lambda n: spreads[STOCK][n])
        stock_note = (
            f"largest at {worst} warehouses; CFS balances the big and the small cluster "
            "by load per CPU, not speed, and rotates threads within each, so a thread "
            f"that stays on small cores does about 1/{ratio} of the work of one on big "
            f"cores (1 - 1/{ratio} = {1 - 1 / ratio:.3f} with whole cores each); the "
            "paper's kernel moved threads across the clusters now and then (see li-f9's "
            "mixed threads)"
        )
    # "At most 6%" is a bound: any spread below it satisfies the claim.
    ours_verdict = (
        "match"
        if ours_max <= 0.06
        else verdict_within(0.06, ours_max, abs_tol=0.05, trend_ok=ours_max < stock_max)
    )
    rows = [
        Row(
            id="li-f11",
            claim="stock Linux: maximum SPECjbb thread spread, 8-16 warehouses",
            published=0.61,
            simulated=round(stock_max, 3),
            tolerance=tolerance_text(abs_tol=0.05),
            verdict=verdict_within(0.61, stock_max, abs_tol=0.05, trend_ok=stock_max > ours_max),
            note=stock_note,
        ),
        Row(
            id="li-f11",
            claim="faster-first + A-DWRR: maximum SPECjbb thread spread, 8-16 warehouses (at most)",
            published=0.06,
            simulated=round(ours_max, 3),
            tolerance="bound, " + tolerance_text(abs_tol=0.05),
            verdict=ours_verdict,
        ),
    ]
    return Outcome(rows=rows, data=spreads)
