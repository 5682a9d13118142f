"""The engine's cost per event on the standard scenario, part by part, beside
the floor of each part: ``python bench/floors.py`` (needs valgrind).

The floor of a part is what the least code that still does that part's work
costs on the same workload: ``crates/hetsched-core/benches/floors.rs``
simulates ``bench/standard.toml`` (64 CPUs, 2 000 threads, CFS) with the
engine's own event queue, CFS's arithmetic and sorted timelines, the
engine's jitter draw and a CPU's accounting of work and energy, each part in
a function of its own. Both binaries run under ``valgrind --tool=callgrind``
at two simulated lengths (:data:`baseline.LENGTHS_S`); each part's
instructions are the difference of its functions' own counts over the
difference of the events, so start-up does not count. Instruction counts do
not depend on how busy the machine is.

The engine's functions are grouped into the parts of ``docs/performance.md``
("Where ``cfs``'s instructions per event go") by :data:`ENGINE_PARTS`; the
floor binary's by :data:`FLOOR_PARTS`. ``--json FILE`` writes the numbers;
the table goes to standard output.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import baseline  # noqa: E402  (bench/baseline.py)
import measure  # noqa: E402  (bench/measure.py)

#: Parts, in the order of the table, and the regular expressions (searched in
#: a function's name) that put the engine's functions into them; the first
#: that matches wins.
ENGINE_PARTS: list[tuple[str, str]] = [
    ("CPU accounting and state", r"Engine::(sync|refresh|start_running|stop_running|set_state)\b"),
    ("policy (`cfs`)", r"policy::|Scheduler>|FairQueues>"),
    ("event loop and dispatch", r"Engine::(run_events|handle)\b"),
    ("event queue", r"queue::"),
    ("thread programs", r"Engine::step\b"),
    (
        "scheduler calls, engine side",
        r"Engine::(sched_select|sched_enqueue|wake|block|need_cpu|wants_tick|arm_tick)\b",
    ),
]
#: The floor binary's functions, by the same parts.
FLOOR_PARTS: list[tuple[str, str]] = [
    ("CPU accounting and state", r"floors::acct_"),
    ("policy (`cfs`)", r"floors::(cfs_|sched_slice|update_min_vruntime|move_queued)"),
    ("event loop and dispatch", r"floors::(main|schedule|arm_tick|preempt)\b"),
    ("event queue", r"floors::q_(push|pop)\b|queue::|BinaryHeap|sift_"),
    ("thread programs", r"floors::program_next\b|Uniform|rand"),
]
OTHER = "allocator, memcpy, other"
PARTS = [name for name, _ in ENGINE_PARTS] + [OTHER]

_LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.*)$")


def build_floors() -> Path:
    """Build the floor benchmark (release profile) and return its path."""
    return baseline.build_bench(ROOT, ROOT / "target", "floors")


def functions(profile: Path) -> Counter[str]:
    """Each function's own instructions in a callgrind profile, summed over
    the source files its code came from."""
    annotate = shutil.which("callgrind_annotate")
    if annotate is None:
        raise RuntimeError("bench: callgrind_annotate (valgrind) is not installed")
    out = subprocess.run(
        [annotate, "--threshold=100", "--inclusive=no", "--auto=no", str(profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return parse_annotate(out)


def parse_annotate(out: str) -> Counter[str]:
    """Each function's own instructions from ``callgrind_annotate``'s
    listing (``--inclusive=no --auto=no``), summed over source files."""
    counts: Counter[str] = Counter()
    for line in out.splitlines():
        m = _LINE.match(line)
        if not m or "PROGRAM TOTALS" in m.group(2):
            continue
        where = m.group(2)
        # "file:function [object]": the file has no colon; "???" when unknown.
        name = where.split(":", 1)[1] if ":" in where else where
        name = re.sub(r" \[[^\]]*\]$", "", name)
        counts[name] += int(m.group(1).replace(",", ""))
    return counts


def grouped(counts: Counter[str], parts: list[tuple[str, str]]) -> Counter[str]:
    """Instructions by part: each function goes to the first part whose
    expression it matches, or to :data:`OTHER`."""
    out: Counter[str] = Counter()
    for name, n in counts.items():
        part = next((p for p, rx in parts if re.search(rx, name)), OTHER)
        out[part] += n
    return out


def _callgrind(cmd: list[str], profile: Path) -> str:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise RuntimeError("bench: valgrind is not installed")
    proc = subprocess.run(
        [valgrind, "--tool=callgrind", f"--callgrind-out-file={profile}", *cmd],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench: {' '.join(cmd)} failed under callgrind: {proc.stderr[-1000:]}")
    return proc.stdout


def per_part(runs: list[tuple[Counter[str], int]], parts: list[tuple[str, str]]) -> dict[str, Any]:
    """Instructions per event by part from a short and a long run."""
    (fa, ea), (fb, eb) = runs
    ga, gb = grouped(fa, parts), grouped(fb, parts)
    events = eb - ea
    by_part = {p: (gb[p] - ga[p]) / events for p in PARTS}
    return {"events": events, "per_event": by_part, "total": sum(by_part.values())}


def measure_engine(exe: Path, tmp: Path) -> dict[str, Any]:
    runs = []
    for i, length in enumerate(baseline.LENGTHS_S):
        prof = tmp / f"engine-{i}.callgrind"
        res = baseline.count(exe, baseline.scenario_text("cfs", length), prof)
        if "error" in res:
            raise RuntimeError(f"bench: the engine failed under callgrind: {res['error']}")
        runs.append((functions(prof), res["events"]))
    return per_part(runs, ENGINE_PARTS)


def measure_floor(exe: Path, queue: str, tmp: Path) -> dict[str, Any]:
    runs = []
    for i, length in enumerate(baseline.LENGTHS_S):
        prof = tmp / f"floor-{queue}-{i}.callgrind"
        out = _callgrind([str(exe), str(length), queue], prof)
        runs.append((functions(prof), int(json.loads(out.strip().splitlines()[-1])["events"])))
    return per_part(runs, FLOOR_PARTS)


#: The floor must simulate the same run as the engine: its event count may
#: differ from the engine's by at most this fraction (the jitter draws and
#: some ties differ, so the counts are close but not equal).
SAME_RUN = 0.01


def check_same_run(engine_events: int, floor_events: int) -> None:
    """Refuse a floor whose run is not the engine's (a floor measured on
    less work would not be a floor)."""
    if abs(floor_events - engine_events) > SAME_RUN * engine_events:
        raise RuntimeError(
            f"bench: the floor's run has {floor_events} events against the engine's "
            f"{engine_events}: more than {SAME_RUN:.0%} apart, so it is not the same run"
        )


def floor_cpu_run(exe: Path, seconds: float, queue: str) -> tuple[int, float]:
    """Run the floor once: ``(events, CPU seconds)`` (user + system)."""
    out, cpu = measure.child_cpu_run([str(exe), str(seconds), queue])
    return int(json.loads(out.strip().splitlines()[-1])["events"]), cpu


def cpu_rates(engine: Path, floor: Path, runs: int) -> dict[str, Any]:
    """Events per CPU-second of the engine and of the floor (wheel) on the
    whole standard scenario, ``runs`` each, alternated."""
    seconds = baseline._standard_duration()
    text = baseline.scenario_text("cfs", seconds)
    samples: dict[str, list[tuple[int, float]]] = {"engine": [], "floor": []}
    for name in baseline.alternate(list(samples), runs):
        if name == "engine":
            events, cpu, _ = baseline.cpu_run(engine, text)
        else:
            events, cpu = floor_cpu_run(floor, seconds, "wheel")
        samples[name].append((events, cpu))
    return {n: measure.events_per_cpu_sec(xs) for n, xs in samples.items()}


def table(res: dict[str, Any]) -> str:
    eng, wheel, heap = res["engine"], res["floor_wheel"], res["floor_heap"]
    lines = [
        "| part | engine | floor | floor, binary heap | engine − floor |",
        "|---|---:|---:|---:|---:|",
    ]
    for p in PARTS:
        e, w, h = eng["per_event"][p], wheel["per_event"][p], heap["per_event"][p]
        lines.append(f"| {p} | {e:.0f} | {w:.0f} | {h:.0f} | {e - w:.0f} |")
    lines.append(
        f"| **all** | **{eng['total']:.0f}** | **{wheel['total']:.0f}** | "
        f"**{heap['total']:.0f}** | **{eng['total'] - wheel['total']:.0f}** |"
    )
    if "cpu" in res:
        e, f = res["cpu"]["engine"], res["cpu"]["floor"]
        lines.append("")
        lines.append(
            f"Events per CPU-second, median of {len(e['cpu_s'])} alternated runs of the "
            f"whole scenario: engine {e['median'] / 1e6:.2f} M "
            f"({e['min'] / 1e6:.2f}–{e['max'] / 1e6:.2f}), floor {f['median'] / 1e6:.2f} M "
            f"({f['min'] / 1e6:.2f}–{f['max'] / 1e6:.2f})."
        )
    return "\n".join(lines)


def measure_all(cpu_time: int = 0) -> dict[str, Any]:
    """Build both binaries and measure the engine and the floor (wheel and
    heap) by callgrind; with ``cpu_time`` > 0 also time that many
    alternated runs of each. Raises ``RuntimeError`` on a failed build or
    run, or a floor that is not the engine's run."""
    floors = build_floors()
    engine = baseline.build_engine(ROOT, ROOT / "target")
    with tempfile.TemporaryDirectory(prefix="hetsched-floors-") as d:
        tmp = Path(d)
        print("floors: callgrind, the engine ...", file=sys.stderr)
        res: dict[str, Any] = {"engine": measure_engine(engine, tmp)}
        for queue in ("wheel", "heap"):
            print(f"floors: callgrind, the floor ({queue}) ...", file=sys.stderr)
            res[f"floor_{queue}"] = measure_floor(floors, queue, tmp)
            check_same_run(res["engine"]["events"], res[f"floor_{queue}"]["events"])
    if cpu_time > 0:
        print(f"floors: CPU time, {cpu_time} runs each ...", file=sys.stderr)
        res["cpu"] = cpu_rates(engine, floors, cpu_time)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    ap.add_argument(
        "--cpu-time",
        type=int,
        default=0,
        metavar="N",
        help="also time N alternated runs of the whole scenario, engine and floor",
    )
    args = ap.parse_args(argv)
    if args.cpu_time < 0:
        ap.error(f"--cpu-time: a number of runs (0 or more) is allowed, got {args.cpu_time}")
    try:
        res = measure_all(args.cpu_time)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"floors: {e}", file=sys.stderr)
        return 1
    print(table(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
