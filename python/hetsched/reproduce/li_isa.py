"""Li et al. (HPCA 2010), instruction-based asymmetry: fault-and-migrate
(Figures 7 and 8) and the cache-refill cost of a migration (Section 6.1).

Platform (Section 6.1): four big and four small cores; only the small cores
implement SSE4.1; the small cores run at 2 GHz, which gives them a 32% lower
SPEC rating (capacity 0.68 × 1024 = 696); the timer tick is 4 ms. Big and
small cores sit in separate caches (the migrations the paper measures cross
them). In Figure 8 the small cores are reconfigured to the big cores' speed,
leaving only the instruction asymmetry.

Model programs (facts from Section 6.1; parameters and what they rest on):

* **Conv3D** and **Mandelbrot**: SSE4.1 kernels that use the extension all
  the time ("on a fault it migrates to a small core; after a tick it migrates
  back to a big core and faults immediately again"), and "stream through
  memory and thus thread migrations have less impact": one compute phase that
  needs SSE4.1, with a small reused working set (64 KiB). The speedup of the
  SSE4.1 build over the plain build on the same core, ``k``, is calibrated
  from the published T = 1 speedups (1.2 and 2.1, which are ``0.68 × k``
  since the thread lives on the small cores); the other T values, the fault
  rates and all of Figure 8 are then predictions.
* **FFmpeg**: uses SSE4.1 rarely: its "fault rate stays nearly constant as T
  increases", so its SSE4.1 uses are much further apart than the largest T
  (8 ticks = 32 ms): one short SSE4.1 phase per 100 ms of plain work, at
  irregular intervals (±30% jitter). "So few SSE4.1 instructions" means short
  bursts (shorter than a tick, or T = 1 would thrash inside one), so each
  burst must replace much slower plain code to give the published 6% gain:
  we assume the SSE4.1 kernel is 8× its plain version (a motion-search loop
  of the kind `mpsadbw` replaces; an assumption, not a paper figure), and
  calibrate the burst length so that the SSE4.1 build on an ideal big core
  with SSE4.1 gains 6% (0.86 ms per 100 ms). It is "more sensitive to
  migrations" because of its cache access pattern: a working set that fills
  the 4 MiB cache.

The cache-refill model (``machine.migration``) is calibrated on the paper's
two 4 MB measurements only; ``li-mig`` checks the 512 KB ones.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from .. import api
from ..policy import Agent
from .framework import (
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

SMALL_RATING = 0.68  # 32% lower SPEC rating (Section 6.1)
TS = [1, 2, 4, 8]  # T values of Figures 7 and 8, in ticks of 4 ms
FEATURE = "sse4.1"
#: Published T = 1 speedups over the plain build on a big core (Figure 7 text).
PUBLISHED_SPEEDUP = {"Conv3D": 1.2, "Mandelbrot": 2.1}
FFMPEG_GAIN = 0.06  # "SSE4.1 brings at most a 6% speedup"
FFMPEG_SSE_SPEEDUP = 8.0  # assumed: its SSE4.1 bursts replace 8× slower plain code
FFMPEG_PLAIN_MS = 100.0
WORK_MS = {"full": 4000.0, "quick": 800.0}  # plain-build work on a big core
TICK_HZ = 250
#: Seeds over which FFmpeg's run-to-run noise (its irregular SSE4.1 uses) is
#: estimated; an ordering in T must clear that noise.
NOISE_SEEDS = (1, 2, 3)
#: Figure 8's text: overhead at T = 8 ("zero" for Conv3D and Mandelbrot).
LI_F8_PUBLISHED_T8 = {"Conv3D": 0.0, "Mandelbrot": 0.0, "FFmpeg": 0.053}
#: "Nearly constant" fault rate: the T = 8 rate within this of the T = 1 rate.
FFMPEG_RATE_REL_TOL = 0.15


def machine(small_rating: float, refill: bool = True) -> dict[str, Any]:
    """4 big cores without SSE4.1 and 4 small ones with it, separate caches;
    ``refill=False`` switches the cache-refill cost of migrations off (used
    only to check a diagnosis)."""
    m: dict[str, Any] = {
        "tick_hz": TICK_HZ,
        "types": {
            "big": {"capacity": 1024, "pstates": [{"mhz": 2930, "volt": 1.2}]},
            "small": {
                "capacity": round(1024 * small_rating),
                "pstates": [{"mhz": 2000, "volt": 1.0}],
                "features": [FEATURE],
            },
        },
        "clusters": [{"type": "big", "cores": 4}, {"type": "small", "cores": 4}],
    }
    if not refill:
        m["migration"] = {"enabled": False}
    return m


def sse_factor(name: str) -> float:
    """k: speedup of the SSE4.1 kernel over the plain one on the same core,
    calibrated from the T = 1 speedup (the thread lives on small cores)."""
    return PUBLISHED_SPEEDUP[name] / SMALL_RATING


def ffmpeg_sse_ms() -> float:
    """Length of FFmpeg's SSE4.1 phase per 10 ms of plain work, chosen so
    that the SSE4.1 build gains 6% on an ideal core: (100 + 8s) / (100 + s) = 1.06."""
    return FFMPEG_GAIN * FFMPEG_PLAIN_MS / (FFMPEG_SSE_SPEEDUP - 1 - FFMPEG_GAIN)


def program(name: str, sse: bool, work_ms: float) -> dict[str, Any]:
    """A model program; ``sse`` selects the SSE4.1 build."""
    if name in PUBLISHED_SPEEDUP:
        prog: dict[str, Any] = {
            "name": name,
            "kind": "sequential",
            "work_ms": work_ms / sse_factor(name) if sse else work_ms,
            "working_set_kb": 64,
        }
        if sse:
            prog["feature"] = FEATURE
        return prog
    s = ffmpeg_sse_ms()
    loops = max(1, round(work_ms / (FFMPEG_PLAIN_MS + FFMPEG_SSE_SPEEDUP * s)))
    sse_phase: dict[str, Any] = {"compute_ms": s if sse else FFMPEG_SSE_SPEEDUP * s}
    if sse:
        sse_phase["feature"] = FEATURE
    return {
        "name": name,
        "kind": "phases",
        "loops": loops,
        "working_set_kb": 4096,
        "jitter": 0.3,
        "phases": [{"compute_ms": FFMPEG_PLAIN_MS}, sse_phase],
    }


def run_one(name: str, sse: bool, small_rating: float, scheduler: str, work_ms: float,
            affinity: list[int] | None = None, seed: int = 1,
            refill: bool = True) -> dict[str, float]:  # fmt: skip
    prog = program(name, sse, work_ms)
    if affinity is not None:
        prog["affinity"] = affinity
    scn = {
        "name": f"li-{name}",
        "seed": seed,
        "duration_s": 1000.0,
        "scheduler": scheduler,
        "machine": machine(small_rating, refill),
        "workload": {"programs": [prog]},
    }
    res = api.run(scn)
    task = res.tasks.iloc[0]
    if task["killed"]:
        raise RuntimeError(f"{name}: {task['killed']}")
    return {
        "time_s": float(res.programs["completion_s"].iloc[0]),
        "faults_per_s": float(task["faults"]) / float(res.programs["completion_s"].iloc[0]),
    }


def fam_series(
    name: str, small_rating: float, work_ms: float, seed: int = 1
) -> dict[int, dict[str, float]]:
    """The SSE4.1 build under fault-and-migrate for each T, with the paper's
    scheduler: faster-first + A-DWRR (a lone thread starts on a big core)."""
    return {
        t: run_one(
            name, True, small_rating, f"faster-first[fam=true, fam_ticks={t}]", work_ms, seed=seed
        )
        for t in TS
    }


def falls_beyond_noise(per_seed: list[dict[int, float]]) -> tuple[bool, dict[int, float], float]:
    """Whether a quantity falls with T by more than its run-to-run noise at every
    step: (holds, mean per T, noise). The noise is the largest spread over seeds
    of any T's value (:func:`trend_margin`)."""
    mean = {t: sum(s[t] for s in per_seed) / len(per_seed) for t in TS}
    noise = max(trend_margin([s[t] for s in per_seed]) for t in TS)
    holds = all(mean[a] - mean[b] > noise for a, b in itertools.pairwise(TS))
    return holds, mean, noise


def _seeded(name: str) -> bool:
    """Whether the model program has random parts (FFmpeg's irregular SSE4.1
    uses); the others are deterministic and one seed is their noise."""
    return name not in PUBLISHED_SPEEDUP


def plot_f7(data: dict[str, Any], path: Any) -> None:
    from ..plot import bars

    labels = [f"{name} T={t}" for name in data for t in TS]
    bars(
        labels,
        {
            "speedup over plain build": [data[n]["speedup"][t] for n in data for t in TS],
            "published speedup": [PUBLISHED_SPEEDUP.get(n, float("nan")) for n in data for t in TS],
            "faults per second": [data[n]["faults_per_s"][t] for n in data for t in TS],
            "published faults per second": [
                TICK_HZ / t if n in PUBLISHED_SPEEDUP else float("nan") for n in data for t in TS
            ],
        },
        path,
        title="Li et al. Fig. 7: simulated and published (text) values, T = 1, 2, 4, 8",
    )


def plot_f8(data: dict[str, Any], path: Any) -> None:
    from ..plot import bars

    labels = [f"{name} T={t}" for name in data for t in TS]
    bars(
        labels,
        {
            "slowdown over pinned (%)": [100 * data[n][t] for n in data for t in TS],
            "published at T=8 (%)": [
                100 * LI_F8_PUBLISHED_T8[n] if t == 8 else float("nan") for n in data for t in TS
            ],
        },
        path,
        title="Li et al. Fig. 8 in simulation: fault-and-migrate overhead, "
        "no performance asymmetry",
    )


@reproduction(
    "li-f7",
    paper=PAPER,
    title="fault-and-migrate performance for T = 1, 2, 4, 8 ticks (Fig. 7)",
    plot=plot_f7,
)
def li_f7(scale: str) -> Outcome:
    work = WORK_MS[scale]
    rows: list[Row] = []
    data: dict[str, Any] = {}
    for name in ["Conv3D", "Mandelbrot", "FFmpeg"]:
        base = run_one(name, False, SMALL_RATING, "cfs", work, affinity=[0])["time_s"]
        series = fam_series(name, SMALL_RATING, work)
        speedup = {t: base / r["time_s"] for t, r in series.items()}
        data[name] = {
            "speedup": speedup,
            "faults_per_s": {t: r["faults_per_s"] for t, r in series.items()},
        }
        rates = {t: series[t]["faults_per_s"] for t in TS}
        if name in PUBLISHED_SPEEDUP:
            pub = PUBLISHED_SPEEDUP[name]
            for t in TS[1:]:
                rows.append(
                    Row(
                        id="li-f7",
                        claim=f"{name}: speedup over the plain build on a big core, T={t}",
                        published=pub,
                        simulated=round(speedup[t], 3),
                        tolerance=tolerance_text(rel_tol=0.10),
                        verdict=verdict_within(pub, speedup[t], rel_tol=0.10),
                        note=f"T=1: {speedup[1]:.3f}",
                        calibrated_by=(
                            f"k, the SSE4.1 kernel's speedup ({sse_factor(name):.3f})",
                            f"fitted to the published T=1 speedup {pub:g}; the thread lives on "
                            "the small cores at every T (it faults as soon as it returns), so "
                            "the same number comes back for T>1",
                        ),
                    )
                )
            for t in TS:
                expected = TICK_HZ / t
                rows.append(
                    Row(
                        id="li-f7",
                        claim=f"{name}: fault rate at T={t} (once per T ticks of 4 ms), /s",
                        published=expected,
                        simulated=round(rates[t], 1),
                        tolerance=tolerance_text(rel_tol=0.10),
                        verdict=verdict_within(expected, rates[t], rel_tol=0.10),
                        follows_from=(
                            f"the {TICK_HZ} Hz tick and T: the paper's own account is one fault "
                            "per T ticks (the thread faults again as soon as it is back), and "
                            "the model program uses SSE4.1 all the time"
                        ),
                    )
                )
        else:
            ideal = run_one(name, True, 1.0, "cfs", work, affinity=[4])["time_s"]
            per_seed = [speedup]
            rate_seeds = [rates]
            for seed in NOISE_SEEDS[1:]:
                other = fam_series(name, SMALL_RATING, work, seed)
                b = run_one(name, False, SMALL_RATING, "cfs", work, affinity=[0], seed=seed)
                per_seed.append({t: b["time_s"] / r["time_s"] for t, r in other.items()})
                rate_seeds.append({t: r["faults_per_s"] for t, r in other.items()})
            ordered, mean_sp, noise = falls_beyond_noise(per_seed)
            why = ""
            if not ordered and rates[1] > 1.5 * rates[2]:
                why = _ffmpeg_t1_diagnosis(rates, work)
            rows.append(
                Row(
                    id="li-f7",
                    claim="FFmpeg: gets slower as T grows (speedup falls with T by more than "
                    "the run-to-run noise)",
                    published="falls",
                    simulated=" > ".join(f"{mean_sp[t]:.3f}" for t in TS),
                    tolerance=f"trend, steps > noise {noise:.3f}",
                    verdict=verdict_trend(ordered),
                    note=f"mean of seeds {', '.join(map(str, NOISE_SEEDS))}; SSE4.1 gain on an "
                    f"ideal core {base / ideal - 1:+.1%} (calibrated to 6%)" + why,
                )
            )
            mean_rate = {t: sum(r[t] for r in rate_seeds) / len(rate_seeds) for t in TS}
            ratio = mean_rate[8] / mean_rate[1]
            rows.append(
                Row(
                    id="li-f7",
                    claim="FFmpeg: fault rate nearly constant in T, rate at T=8 / rate at T=1",
                    published=1.0,
                    simulated=round(ratio, 3),
                    tolerance=tolerance_text(rel_tol=FFMPEG_RATE_REL_TOL),
                    verdict=verdict_within(1.0, ratio, rel_tol=FFMPEG_RATE_REL_TOL),
                    note="mean fault rate per T (/s): "
                    + ", ".join(f"T={t} {mean_rate[t]:.1f}" for t in TS)
                    + why,
                    calibrated_by=(
                        f"FFmpeg's SSE4.1 spacing ({FFMPEG_PLAIN_MS:g} ms of plain work "
                        "between uses)",
                        "chosen much longer than the largest T (32 ms) because the paper "
                        "reports this nearly constant rate",
                    ),
                )
            )
    return Outcome(rows=rows, data=data)


def _ffmpeg_t1_diagnosis(rates: dict[int, float], work_ms: float) -> str:
    """Why FFmpeg faults more often at T = 1, checked by running T = 1 again
    with the cache-refill cost of migrations switched off."""
    bare = run_one(
        "FFmpeg", True, SMALL_RATING, "faster-first[fam=true, fam_ticks=1]", work_ms,
        refill=False,
    )["faults_per_s"]  # fmt: skip
    return (
        f"; at T=1 the fault rate is {rates[1]:.0f}/s against {rates[2]:.0f}/s at T=2, and "
        f"{bare:.0f}/s at T=1 with the refill cost off. T counts the ticks taken on the small "
        "core, as the paper's one fault per tick for Conv3D requires, so a fault between ticks "
        "comes back at the next tick, often before its SSE4.1 burst ends: that accounts for "
        f"the rise from {rates[2]:.0f} to {bare:.0f}/s. The rest comes from the engine's refill "
        "model: each move stalls the thread for a whole 4 MiB refill (1.8 ms) before its "
        "burst makes progress, a refill charged on the big core where it only re-executes "
        "the faulting instruction is still owed at its next start, and going back to the "
        "small core it left microseconds before refills it again"
    )


@reproduction(
    "li-f8",
    paper=PAPER,
    title="fault-and-migrate overhead without performance asymmetry (Fig. 8)",
    plot=plot_f8,
)
def li_f8(scale: str) -> Outcome:
    work = WORK_MS[scale]
    rows: list[Row] = []
    data: dict[str, Any] = {}
    for name, pub in LI_F8_PUBLISHED_T8.items():
        per_seed = []
        for seed in NOISE_SEEDS if _seeded(name) else NOISE_SEEDS[:1]:
            # Every core as fast as a big core; only the small ones have SSE4.1.
            pinned = run_one(name, True, 1.0, "cfs", work, affinity=[4], seed=seed)["time_s"]
            series = fam_series(name, 1.0, work, seed)
            per_seed.append({t: r["time_s"] / pinned - 1 for t, r in series.items()})
        falls, overhead, noise = falls_beyond_noise(per_seed)
        data[name] = overhead
        seeds_note = f" (mean of {len(per_seed)} seeds)" if len(per_seed) > 1 else ""
        rows.append(
            Row(
                id="li-f8",
                claim=f"{name}: overhead at T=8 over pinning on a core with SSE4.1",
                published=pub,
                simulated=round(overhead[8], 4),
                tolerance=tolerance_text(abs_tol=0.02),
                verdict=verdict_within(pub, overhead[8], abs_tol=0.02, trend_ok=falls),
                note="overheads T=1,2,4,8: "
                + ", ".join(f"{overhead[t]:.2%}" for t in TS)
                + seeds_note,
            )
        )
        rows.append(
            Row(
                id="li-f8",
                claim=f"{name}: overhead falls as T grows (each step by more than the "
                "run-to-run noise)",
                published="falls",
                simulated=" > ".join(f"{overhead[t]:.2%}" for t in TS),
                tolerance=f"trend, steps > noise {noise:.2%}",
                verdict=verdict_trend(falls),
                note=(
                    ""
                    if falls
                    else "the paper: the number of migrations decreases slightly, but still "
                    "enough to lower the overhead at every T; here it does not fall at every step"
                )
                + seeds_note,
            )
        )
    return Outcome(rows=rows, data=data)


class _MigrateOnce(Agent):
    """Moves every task to CPU ``to`` at its first sample."""

    name = "migrate-once"

    def __init__(self, at_ms: float, to: int) -> None:
        self.period_ms = at_ms
        self.to = to
        self.done = False

    def sample(self, cx: Any) -> None:
        if not self.done:
            for p in cx.processes():
                cx.set_affinity(p["task"], [self.to])
            self.done = True


def refill_cost_us(ws_kb: float, shared_llc: bool) -> float:
    """The cache-refill microbenchmark in simulation: one thread with working
    set ``ws_kb`` is moved once to another CPU; the cost is the growth of its
    completion time."""
    clusters = (
        [{"type": "c", "cores": 2}] if shared_llc else [{"type": "c", "cores": 1, "count": 2}]
    )
    scn = {
        "duration_s": 10.0,
        "scheduler": "cfs",
        "machine": {"types": {"c": {}}, "clusters": clusters},
        "workload": {
            "programs": [
                {"kind": "sequential", "work_ms": 50, "working_set_kb": ws_kb, "affinity": [0, 1]}
            ]
        },
    }
    alone = api.run(copy.deepcopy(scn)).programs["completion_s"].iloc[0]
    moved = api.run(scn, agents=[_MigrateOnce(10.0, 1)])
    if int(moved.tasks["migrations"].iloc[0]) != 1:
        raise RuntimeError("the microbenchmark thread did not migrate exactly once")
    return (moved.programs["completion_s"].iloc[0] - alone) * 1e6


@reproduction("li-mig", paper=PAPER, title="cache-refill cost of a migration (Section 6.1)")
def li_mig(scale: str) -> list[Row]:
    rows = []
    cases = [
        ("512 KB working set, separate caches", 512, False, 498.0),
        ("512 KB working set, shared L2", 512, True, 3.7),
    ]
    for claim, ws, shared, pub in cases:
        sim = refill_cost_us(ws, shared)
        verdict = verdict_within(pub, sim, rel_tol=0.15, trend_ok=False)
        note = "the model is calibrated on the 4 MB measurements (1.8 ms and 4.1 µs)"
        calibrated_by = None
        if shared:
            note = ""
            calibrated_by = (
                "llc_line_ns (8.0 ns per line)",
                "fitted to the 4 MB shared-L2 cost (4.1 µs); within a shared L2 only the "
                "32 KiB L1 is refilled whatever the working set above 32 KiB, so the 512 KB "
                "row returns the 4 MB value",
            )
        if verdict == "differs" and not shared and sim < pub:
            note += (
                "; a lines × latency model scales the 4 MB cost linearly (1.8 ms × 1/8 = 225 µs), "
                "while the measured 512 KB cost is 2.2× that: the real cost has a large part "
                "that does not scale with the working set (TLB refills, prefetcher warm-up), "
                "which the model lacks"
            )
        rows.append(
            Row(
                id="li-mig",
                claim=f"migration cost, {claim} (µs)",
                published=pub,
                simulated=round(sim, 2),
                tolerance=tolerance_text(rel_tol=0.15),
                verdict=verdict,
                note=note,
                calibrated_by=calibrated_by,
            )
        )
    return rows
