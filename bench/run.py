"""Benchmarks of the engine (``make bench``), through the built extension.

Runs, in one invocation (see docs/performance.md for what each number means):

1. the **standard scenario** (``bench/standard.toml``: 64 CPUs, 2000 threads
   alternating compute and sleep under CFS, 60 simulated seconds) and the
   same scenario under ``eevdf``: events per CPU-second (user + system time
   of this process around each run, median of 5 with the spread), and
   instructions per event by callgrind when valgrind is installed (two run
   lengths, the difference over the difference: ``bench/measure.py``);
2. a policy series (one scenario each for the heterogeneous, dynamic,
   virtualised and agent-driven policies, and ``demo.toml`` under a
   Python-written policy) and the heterogeneous and virtual-machine series
   at several sizes (``series.py``);
3. the **scaling table**: policy × CPUs × threads, events per CPU-second and
   (``--callgrind-scaling``, implied by ``--update-docs``) instructions per
   event;
4. **growth** of the cost per event from 8 to 1024 CPUs per policy
   (``bench/growth.py``'s ``measure_growth`` when that module is there);
5. the local **sweep speed-up** with 2 workers against 1 (``sweep_speedup.py``);
6. the side-by-side comparison with SimSo (``compare_simso.py``);
7. with ``--baseline REV``, the engine's instructions per event at ``REV``
   and at this tree, measured in this run (``baseline.py``);
8. with ``--floors`` (implied by ``--update-docs`` when valgrind is there),
   the standard scenario's cost per event by part beside the floor of each
   part (``floors.py``; builds the engine's and the floor's benchmark
   binaries).

It writes ``bench/results.json``; ``--update-docs`` also rewrites the
generated tables of docs/performance.md (between ``<!-- bench:NAME -->``
markers; the rest of the page is left alone). No timing is asserted:
shared machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
STANDARD = BENCH / "standard.toml"
DOC = ROOT / "docs" / "performance.md"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import measure  # noqa: E402  (bench/measure.py)

#: Runs per CPU-timed point (the median and spread are over these).
RUNS = 5
#: Simulated lengths of the two callgrind runs of the standard scenario, s:
#: ~80 000 and ~240 000 events, so the difference holds ~160 000 events.
CALLGRIND_STANDARD_S = (1.0, 3.0)


def standard_scenario(scheduler: str | None = None) -> dict[str, Any]:
    """``bench/standard.toml`` as a dict (optionally under another scheduler)."""
    from hetsched._toml import toml_module

    doc = toml_module().loads(STANDARD.read_text(encoding="utf-8"))
    if scheduler is not None:
        doc["scheduler"] = scheduler
        doc["name"] = f"{doc['name']}-{scheduler}"
    return doc


def measure_standard(scheduler: str | None, runs: int, callgrind: bool) -> dict[str, Any]:
    """Events per CPU-second (and instructions per event) of the standard scenario."""
    scn = standard_scenario(scheduler)
    label = scn["scheduler"]
    print(f"standard scenario under {label}: {runs} CPU-timed runs ...", file=sys.stderr)
    out: dict[str, Any] = {
        "scheduler": label,
        "events_per_cpu_sec": measure.engine_rate(json.dumps(scn), runs),
    }
    if callgrind:
        print(f"standard scenario under {label}: callgrind ...", file=sys.stderr)
        out["callgrind"] = measure.instructions_per_event(scn, *CALLGRIND_STANDARD_S)
    return out


def run_python(scenario: Path) -> dict:
    """Run the scenario once through the Python API (load included)."""
    import hetsched

    t0 = time.perf_counter()
    c0 = time.process_time()
    res = hetsched.run(hetsched.load(scenario))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    s = res.summary
    return {
        "events": s["events"],
        "cpu_s": cpu,
        "total_wall_s": wall,
        "events_per_cpu_sec": s["events"] / cpu,
        "sim_s_per_cpu_s": s["sim_end_s"] / cpu,
    }


#: The scaling table: policies × (CPUs, threads) at 16 threads per CPU, the
#: standard scenario's thread shape on one cluster of identical cores.
SCALING_POLICIES = ("cfs", "eevdf")
SCALING_SIZES = [(8, 128), (64, 1024), (256, 4096), (1024, 16384)]
#: CPU-timed runs per scaling point aim at this many events (simulated time
#: = this / (threads × ~60 events per thread-second), within 0.2–20 s).
SCALING_EVENTS = 400_000
#: Callgrind windows of the scaling points: a warm-up, then about this many
#: thread-seconds (~60 events each), within 0.04–2 s.
CALLGRIND_WARMUP_S = 0.1
CALLGRIND_THREAD_S = 250.0


def scaling_scenario(policy: str, cpus: int, threads: int, dur: float) -> dict[str, Any]:
    from series import workers

    return {
        "name": f"scale-{policy}-{cpus}x{threads}",
        "seed": 1,
        "duration_s": dur,
        "stop_when_done": False,
        "scheduler": policy,
        "governor": "performance",
        "machine": {
            "types": {"core": {"capacity": 1024, "pstates": [{"mhz": 2000, "volt": 1.0}]}},
            "clusters": [{"type": "core", "cores": cpus}],
        },
        "workload": {"programs": [workers(threads)]},
    }


def run_scaling(callgrind: bool, runs: int = 3) -> list[dict[str, Any]]:
    """The scaling table (see :data:`SCALING_SIZES`)."""
    rows = []
    for policy in SCALING_POLICIES:
        for cpus, threads in SCALING_SIZES:
            dur = min(20.0, max(0.2, SCALING_EVENTS / (threads * 60)))
            print(f"scaling: {policy} {cpus} CPUs × {threads} threads ...", file=sys.stderr)
            row: dict[str, Any] = {"policy": policy, "cpus": cpus, "threads": threads}
            scn = scaling_scenario(policy, cpus, threads, dur)
            try:
                rate = measure.engine_rate(json.dumps(scn), runs)
                row.update(sim_s=dur, events=rate["events"], events_per_cpu_sec=rate)
                if callgrind:
                    win = min(2.0, max(0.04, CALLGRIND_THREAD_S / threads))
                    cg = measure.instructions_per_event(
                        scn, CALLGRIND_WARMUP_S, CALLGRIND_WARMUP_S + win
                    )
                    row["instructions_per_event"] = cg["instructions_per_event"]
                    row["callgrind"] = cg
            except Exception as e:  # one failed point does not lose the others
                row["error"] = f"{type(e).__name__}: {e}"[-500:]
            rows.append(row)
    return rows


#: The target point: 1024 CPUs, 100 000 threads, 10 virtual seconds.
BIG = (1024, 100_000, 10.0)

BIG_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[4])
import hetsched
from run import scaling_scenario
cpus, threads, dur = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
parsed = hetsched.loads(json.dumps(scaling_scenario("cfs", cpus, threads, dur)), fmt="json")
t0, c0 = time.perf_counter(), time.process_time()
res = hetsched.run(parsed)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
s = res.summary
print(json.dumps({
    "cpus": cpus, "threads": threads, "sim_s": dur, "events": s["events"],
    "cpu_s": cpu, "total_wall_s": wall, "events_per_cpu_sec": s["events"] / cpu,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def run_big() -> dict[str, Any]:
    """The 1024 × 100 000 × 10 s point in a child process (its own peak RSS)."""
    cpus, threads, dur = BIG
    print(f"big point: {cpus} CPUs, {threads} threads, {dur:g} s ...", file=sys.stderr)
    proc = subprocess.run(
        [sys.executable, "-c", BIG_CHILD, str(cpus), str(threads), str(dur), str(BENCH)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {"cpus": cpus, "threads": threads, "sim_s": dur, "error": proc.stderr[-500:]}
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["kib_per_task"] = row["peak_rss_mib"] * 1024 / threads
    return row


def run_growth(policies: list[str]) -> dict[str, Any]:
    """Per policy, instructions per event at 1024 CPUs over 8 CPUs (16
    threads per CPU) by ``bench/growth.py``; or why it was not measured."""
    if not policies:
        return {"measured": False, "reason": "not asked for (--growth none)"}
    if not (BENCH / "growth.py").exists():
        return {"measured": False, "reason": "bench/growth.py is not in this tree"}
    why = measure.valgrind_missing()
    if why:
        return {"measured": False, "reason": why}
    import growth

    small = {"cpus": 8, "threads_per_cpu": 16}
    large = {"cpus": 1024, "threads_per_cpu": 16}
    try:
        res = growth.measure_growth(
            policies,
            small,
            large,
            progress=lambda m: print(f"growth: {m} ...", file=sys.stderr),
        )
    except (RuntimeError, ValueError) as e:
        return {"measured": False, "reason": str(e)[-500:]}
    return {"measured": True, "small": small, "large": large, "policies": res}


#: Policy series: (label, scenario file, scheduler override or None). The
#: Python row runs the same scenario as the ``cfs`` row with a Python policy.
POLICY_SERIES = [
    ("cfs (demo)", "scenarios/demo.toml", None),
    ("Python round-robin (demo)", "scenarios/demo.toml", "python-rr"),
    ("a-dwrr", "scenarios/adwrr-spin.toml", None),
    ("chameleon (fusion via proxies)", "scenarios/chameleon-fuse.toml", None),
    ("aash (virtual machines)", "scenarios/aash-blast-eon.toml", None),
    ("patel-cpu agent + cpusets", "scenarios/patel-task2.toml", None),
]


def run_policy_series(runs: int) -> list[dict]:
    """Each scenario of :data:`POLICY_SERIES` through the Python API: the
    median events per CPU-second of ``runs`` runs."""
    import hetsched
    from hetsched.examples_policies import RoundRobin

    rows = []
    for label, path, override in POLICY_SERIES:
        print(f"policies: {label} ...", file=sys.stderr)
        scn = hetsched.load(ROOT / path)
        samples = []
        sim_end = 0.0
        for _ in range(runs):
            sched = RoundRobin() if override == "python-rr" else None
            c0 = time.process_time()
            res = hetsched.run(scn, scheduler=sched)
            samples.append((int(res.summary["events"]), time.process_time() - c0))
            sim_end = float(res.summary["sim_end_s"])
        rate = measure.events_per_cpu_sec(samples)
        rows.append(
            {
                "policy": label,
                "scenario": path,
                "events": rate["events"],
                "events_per_cpu_sec": rate,
                "sim_s_per_cpu_s": sim_end / statistics.median(rate["cpu_s"]),
            }
        )
    return rows


# ------------------------------------------------------------------ the docs

#: Generated sections of docs/performance.md: ``<!-- bench:NAME -->`` ...
#: ``<!-- /bench:NAME -->``.
MARKER = re.compile(r"(<!-- bench:(?P<name>[\w-]+) -->\n)(.*?)(<!-- /bench:(?P=name) -->)", re.S)


def replace_sections(text: str, sections: dict[str, str]) -> str:
    """``text`` with the body of each marked section named in ``sections``
    replaced; every name must have its markers in ``text``."""
    seen: set[str] = set()

    def sub(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in sections:
            return m[0]
        seen.add(name)
        return m[1] + sections[name].rstrip("\n") + "\n" + m[4]

    out = MARKER.sub(sub, text)
    missing = sorted(set(sections) - seen)
    if missing:
        raise ValueError(
            f"docs: no <!-- bench:NAME --> ... <!-- /bench:NAME --> markers for {missing}"
        )
    return out


def _m(x: float) -> str:
    return f"{x / 1e6:.2f}"


def _ipe(row: dict[str, Any]) -> str:
    v = row.get("instructions_per_event")
    return f"{v:,.0f}".replace(",", " ") if v is not None else "—"


def _spread_text(r: dict[str, Any]) -> str:
    return f"{_m(r['median'])} ({_m(r['min'])}–{_m(r['max'])})"


def doc_sections(results: dict[str, Any]) -> dict[str, str]:
    """The generated Markdown of docs/performance.md from a results dict."""
    m = results["machine"]
    lines = [
        f"Measured by `python bench/run.py --update-docs` on {results['date']} "
        f"({m['cores']} cores, load average {m['load_before']:.1f} before and "
        f"{m['load_after']:.1f} after; Python {m['python']}).",
        "",
        "| scenario | events | M events per CPU-second, median of "
        f"{results['standard']['events_per_cpu_sec']['n']} (min–max) | instructions/event |",
        "|---|---:|---:|---:|",
    ]
    for key in ("standard", "standard_eevdf"):
        st = results.get(key)
        if not st:
            continue
        r = st["events_per_cpu_sec"]
        cg = st.get("callgrind")
        ipe = _ipe(cg) if cg else "—"
        lines.append(
            f"| `bench/standard.toml` under `{st['scheduler']}` | {r['events']:,} | "
            f"{_spread_text(r)} | {ipe} |".replace(",", " ")
        )
    standard = "\n".join(lines) + "\n"

    rows = [
        "| policy | CPUs | threads | simulated s | M events per CPU-second (min–max) | "
        "instructions/event |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in results.get("scaling", []):
        if "error" in row:
            rows.append(
                f"| {row['policy']} | {row['cpus']} | {row['threads']} | — | failed: "
                f"{row['error'][:80]} | — |"
            )
            continue
        r = row["events_per_cpu_sec"]
        rows.append(
            f"| {row['policy']} | {row['cpus']} | {row['threads']} | {row['sim_s']:.3g} | "
            f"{_spread_text(r)} | {_ipe(row)} |"
        )
    scaling = "\n".join(rows) + "\n"

    sw = results.get("sweep")
    if sw and "error" not in sw:
        sweep = (
            f"| workers | wall s (best of {len(sw['samples']) // 2}) | CPU s "
            "(sweep and workers) |\n|---:|---:|---:|\n"
            f"| 1 | {sw['wall_s_1']:.2f} | {sw['cpu_s_1']:.2f} |\n"
            f"| 2 | {sw['wall_s_2']:.2f} | {sw['cpu_s_2']:.2f} |\n\n"
            f"{sw['runs']} runs: speed-up **{sw['speedup']:.2f}×** in wall time with 2 "
            f"workers; from CPU time, at most {sw['cpu_bound_speedup']:.2f}× on 2 idle "
            f"cores. Load average before each sweep: {sw['load_avg']}. The sweeps wrote "
            f"into `{sw.get('dir', '?')}` ({sw.get('filesystem', 'file system not recorded')}).\n"
        )
    else:
        sweep = f"Not measured: {sw.get('error') if sw else 'skipped (--no-sweep)'}.\n"
    sections = {"standard": standard, "scaling": scaling, "sweep": sweep}
    fl = results.get("floors")
    if fl and "error" not in fl:
        import floors

        sections["floors"] = (
            f"Measured by `python bench/run.py --update-docs` on {results['date']}.\n\n"
            + floors.table(fl)
            + "\n"
        )
    return sections


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs", type=int, default=RUNS, help="CPU-timed runs per point (median reported)"
    )
    ap.add_argument("--out", type=Path, default=BENCH / "results.json")
    ap.add_argument("--no-simso", action="store_true", help="skip the SimSo comparison")
    ap.add_argument("--no-scaling", action="store_true", help="skip the scaling table")
    ap.add_argument("--no-policies", action="store_true", help="skip the policy series")
    ap.add_argument("--no-sweep", action="store_true", help="skip the sweep speed-up")
    ap.add_argument(
        "--sweep-dir",
        type=Path,
        default=None,
        help="folder in which the sweep speed-up's sweeps write (default: the system's "
        "temporary folder; /dev/shm leaves the disk's file system out)",
    )
    ap.add_argument(
        "--no-series",
        action="store_true",
        help="skip the heterogeneous and virtual-machine series",
    )
    ap.add_argument(
        "--no-callgrind", action="store_true", help="count no instructions, even with valgrind"
    )
    ap.add_argument(
        "--callgrind-scaling",
        action="store_true",
        help="also count instructions per event at each scaling point (minutes)",
    )
    ap.add_argument(
        "--growth",
        default=None,
        metavar="POLICIES",
        help="policies whose growth 8 → 1024 CPUs to measure by bench/growth.py: a comma "
        "list, 'all', or 'none' (the default; 'all' with --update-docs); about two "
        "minutes of callgrind per policy",
    )
    ap.add_argument(
        "--big", action="store_true", help="also run the 1024-CPU, 100 000-thread, 10 s point"
    )
    ap.add_argument(
        "--update-docs",
        action="store_true",
        help="measure everything (callgrind scaling, growth of every policy unless --growth "
        "says otherwise) and rewrite the generated tables of docs/performance.md",
    )
    ap.add_argument(
        "--baseline",
        metavar="REV",
        help="also compare the engine's instructions per event with revision REV's, "
        "in this run (bench/baseline.py: builds REV's and this tree's engine "
        "benchmark; callgrind)",
    )
    ap.add_argument(
        "--floors",
        action="store_true",
        help="also measure the standard scenario's cost by part beside each part's floor "
        "(bench/floors.py: builds two benchmark binaries; callgrind; implied by "
        "--update-docs when valgrind is installed)",
    )
    ap.add_argument(
        "--docs-from",
        type=Path,
        metavar="RESULTS_JSON",
        help="measure nothing: rewrite docs/performance.md's tables from this results.json",
    )
    args = ap.parse_args(argv)
    if args.docs_from is not None:
        try:
            saved = json.loads(args.docs_from.read_text(encoding="utf-8"))
            text = replace_sections(DOC.read_text(encoding="utf-8"), doc_sections(saved))
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"--docs-from {args.docs_from}: {type(e).__name__}: {e}")
        DOC.write_text(text, encoding="utf-8")
        print(f"updated {DOC.relative_to(ROOT)} from {args.docs_from}")
        return 0
    if args.runs < 1:
        ap.error(f"--runs: a positive number of runs is allowed, got {args.runs}")
    if args.sweep_dir is not None and not args.sweep_dir.is_dir():
        ap.error(f"--sweep-dir: an existing folder is allowed, got {str(args.sweep_dir)!r}")

    import hetsched

    started = time.perf_counter()
    no_cg = measure.valgrind_missing() if not args.no_callgrind else "--no-callgrind"
    callgrind = no_cg is None
    growth_arg = args.growth or ("all" if args.update_docs else "none")
    if growth_arg == "all":
        try:
            import growth

            growth_policies = list(growth.POLICIES)
        except ImportError:
            growth_policies = ["cfs"]  # run_growth says why nothing was measured
    elif growth_arg == "none":
        growth_policies = []
    else:
        growth_policies = [p.strip() for p in growth_arg.split(",") if p.strip()]

    load_before = os.getloadavg()[0]
    std = measure_standard(None, args.runs, callgrind)
    std_eevdf = measure_standard("eevdf", args.runs, callgrind)
    print("standard scenario through the Python API ...", file=sys.stderr)
    py = run_python(STANDARD)
    results: dict[str, Any] = {
        "version": hetsched.__version__,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": {
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_before": load_before,
        },
        "events_per_cpu_sec": std["events_per_cpu_sec"]["median"],
        "events_per_cpu_sec_spread": {
            k: std["events_per_cpu_sec"][k] for k in ("min", "q1", "q3", "max", "n")
        },
        "instructions_per_event": (
            std["callgrind"]["instructions_per_event"] if callgrind else None
        ),
        "standard": std,
        "standard_eevdf": std_eevdf,
        "standard_python": py,
        "target_events_per_cpu_sec": 10_000_000,
    }
    if not callgrind:
        results["instructions_per_event_not_measured"] = no_cg
    if not args.no_policies:
        results["policies"] = run_policy_series(args.runs)
    if not args.no_series:
        from series import run_series

        results["series"] = run_series()
    if not args.no_scaling:
        results["scaling"] = run_scaling(callgrind and (args.callgrind_scaling or args.update_docs))
    if args.big:
        results["big"] = run_big()
    results["growth"] = run_growth(growth_policies)
    if not args.no_sweep:
        import sweep_speedup

        try:
            results["sweep"] = sweep_speedup.measure(
                repeats=2 if args.update_docs else 1, where=args.sweep_dir
            )
        except (RuntimeError, ValueError) as e:
            results["sweep"] = {"error": str(e)[-500:]}
    if not args.no_simso:
        from compare_simso import ROWS, compare

        try:
            results["simso"] = compare(ROWS)
        except (OSError, subprocess.CalledProcessError) as e:
            results["simso"] = {"error": f"SimSo could not be installed or run: {e}"}
    if args.floors or (args.update_docs and callgrind):
        import floors

        try:
            results["floors"] = floors.measure_all(cpu_time=args.runs)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            results["floors"] = {"error": str(e)[-800:]}
    if args.baseline:
        import baseline

        try:
            results["baseline"] = baseline.compare(args.baseline, list(baseline.SCHEDULERS))
        except (RuntimeError, subprocess.CalledProcessError) as e:
            results["baseline"] = {"error": str(e)[-800:]}
    results["machine"]["load_after"] = os.getloadavg()[0]
    results["bench_wall_s"] = time.perf_counter() - started
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    report(results)
    out = args.out.resolve()
    print(f"written {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if args.update_docs:
        DOC.write_text(replace_sections(DOC.read_text(encoding="utf-8"), doc_sections(results)))
        print(f"updated {DOC.relative_to(ROOT)}")
    return 0


def report(results: dict[str, Any]) -> None:
    """A few lines on the terminal."""
    for key in ("standard", "standard_eevdf"):
        st = results[key]
        r = st["events_per_cpu_sec"]
        cg = st.get("callgrind")
        ipe = f", {cg['instructions_per_event']:.0f} instructions/event" if cg else ""
        print(
            f"standard ({st['scheduler']}): {r['events']} events, "
            f"{_spread_text(r)} M events per CPU-second (median of {r['n']}, min–max){ipe}"
        )
    for row in results.get("policies", []):
        print(
            f"policy {row['policy']:32s} {row['events']:9d} events, "
            f"{row['events_per_cpu_sec']['median'] / 1e6:5.2f} M ev/CPU-s"
        )
    for row in results.get("series", []):
        if "error" in row:
            print(f"series {row['policy']} {row['cpus']} CPUs: failed: {row['error']}")
            continue
        print(
            f"series {row['policy']:22s} {row['cpus']:4d} CPUs {row['tasks']:6d} tasks: "
            f"{row['events']:8d} events, {row['events_per_cpu_sec'] / 1e6:5.2f} M ev/CPU-s, "
            f"{row['peak_rss_mib']:6.0f} MiB, {row['kib_per_task']:5.1f} KiB/task"
        )
    for row in results.get("scaling", []):
        if "error" in row:
            print(f"scaling {row['policy']} {row['cpus']}x{row['threads']}: {row['error']}")
            continue
        print(
            f"scaling {row['policy']:6s} {row['cpus']:5d} CPUs {row['threads']:6d} threads: "
            f"{_spread_text(row['events_per_cpu_sec'])} M ev/CPU-s, {_ipe(row)} instr/event"
        )
    g = results.get("growth", {})
    if g.get("measured"):
        for pol, r in g["policies"].items():
            print(
                f"growth {pol:14s} {r['small']:9.0f} → {r['large']:9.0f} instr/event, "
                f"{r['ratio']:.2f}×"
            )
    else:
        print(f"growth: not measured ({g.get('reason')})")
    sw = results.get("sweep")
    if sw and "error" not in sw:
        print(
            f"sweep {sw['runs']} runs: 1 worker {sw['wall_s_1']:.2f} s, 2 workers "
            f"{sw['wall_s_2']:.2f} s: {sw['speedup']:.2f}× "
            f"(CPU bound {sw['cpu_bound_speedup']:.2f}×)"
        )
    fl = results.get("floors")
    if fl and "error" not in fl:
        print(
            f"floors: the engine {fl['engine']['total']:.0f} instructions/event against "
            f"{fl['floor_wheel']['total']:.0f} for the floors of its parts "
            "(docs/performance.md, 'The floor of each part')"
        )
    elif fl:
        print(f"floors: not measured ({fl['error']})")
    base = results.get("baseline")
    if base and "error" not in base:
        import baseline

        print(baseline.table(base))
    elif base:
        print(f"baseline: not measured ({base['error']})")
    simso = results.get("simso")
    for row in simso if isinstance(simso, list) else []:
        print(
            f"simso N={row['n']} M={row['m']} T={row['t_s']:g}s: hetsched {row['speedup']:.0f}x "
            f"faster (Python policy {row['python_policy_speedup']:.0f}x), agree {row['agree']:.0%}"
        )
    print(f"bench took {results['bench_wall_s']:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
