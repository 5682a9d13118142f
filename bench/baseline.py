"""Instructions per event of the engine at another revision and at this tree,
in one run: ``python bench/baseline.py REV`` (or ``bench/run.py --baseline
REV``).

Both engines are measured the same way, in the same session: the Rust
benchmark binary (``crates/hetsched-core/benches/engine.rs``, the engine
alone, no Python) of each tree runs the standard scenario
(``bench/standard.toml``) under ``valgrind --tool=callgrind`` to two
simulated lengths, and the difference of the instruction counts over the
difference of the event counts is the steady-state cost of an event
(:func:`measure.difference_ratio`). Instruction counts do not depend on how
busy the machine is, so the two columns compare on a shared machine.
``--also REV2`` (repeatable) measures more revisions in the same run, each
a column between ``REV``'s and this tree's (``python bench/baseline.py
e5f4704 --also 397a708``); the change is against ``REV``.

Instruction counts miss what memory costs (cache misses, page faults): a
change can take fewer instructions and still run slower. ``--cpu-time N``
therefore also runs every engine on the whole standard scenario N times
each, alternating the engines from run to run (one process per run, its
user + system CPU time), and reports the median events per CPU-second of
each with their spread (:func:`cpu_rates`); on a shared machine compare
engines within one such invocation only.

``REV`` is checked out into a git worktree (``--worktree``, default
``target/baseline-REV``, kept between runs) and built there with its own
target directory, so that neither build invalidates the other
(``--shared-target``: in this tree's target directory instead, where the
compiled dependencies are reused; each tree's crate is still its own build,
as cargo tells path dependencies apart by their path). Schedulers
that do not exist at ``REV`` get no baseline number. Where a scheduler
exists in both, the trace hashes of the two engines are compared too: a
change of cost that changes a decision shows up as a different hash.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
STANDARD = BENCH / "standard.toml"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import measure  # noqa: E402  (bench/measure.py)

#: Simulated lengths of the two callgrind runs, s (the standard scenario
#: makes ~80 000 events per simulated second).
LENGTHS_S = (1.0, 3.0)
#: Schedulers measured by default: the two fair schedulers and a
#: dispatch-queue (sched_ext) one.
SCHEDULERS = ("cfs", "eevdf", "scx-simple")

_DURATION = re.compile(r"^duration_s\s*=.*$", re.M)
_SCHEDULER = re.compile(r"^scheduler\s*=.*$", re.M)


def scenario_text(scheduler: str, duration_s: float) -> str:
    """``bench/standard.toml`` under ``scheduler``, ``duration_s`` long."""
    text = STANDARD.read_text(encoding="utf-8")
    if not _DURATION.search(text) or not _SCHEDULER.search(text):
        raise RuntimeError(f"{STANDARD}: no top-level duration_s or scheduler line to replace")
    text = _DURATION.sub(f"duration_s = {duration_s}", text, count=1)
    return _SCHEDULER.sub(f'scheduler = "{scheduler}"', text, count=1)


def build_engine(tree: Path, target_dir: Path) -> Path:
    """Build the benchmark binary of ``tree`` (release profile) and return its path."""
    return build_bench(tree, target_dir, "engine")


def build_bench(tree: Path, target_dir: Path, name: str) -> Path:
    """Build the core's benchmark ``name`` (``crates/hetsched-core/benches/NAME.rs``)
    of ``tree`` in the release profile and return its path."""
    cmd = [
        "cargo",
        "build",
        "--release",
        "-p",
        "hetsched-core",
        "--bench",
        name,
        "--message-format=json",
    ]
    print(f"building the {name} benchmark in {tree} ...", file=sys.stderr)
    proc = subprocess.run(
        cmd,
        cwd=tree,
        env={**_env(), "CARGO_TARGET_DIR": str(target_dir)},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench: building {tree} failed:\n{proc.stderr[-2000:]}")
    exe = None
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        target = msg.get("target", {}).get("name")
        if msg.get("reason") == "compiler-artifact" and target == name:
            exe = msg.get("executable") or exe
    if exe is None:
        raise RuntimeError(f"bench: cargo built no {name} benchmark in {tree}")
    return Path(exe)


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    cargo_bin = Path.home() / ".cargo" / "bin"
    env["PATH"] = f"{cargo_bin}:{env.get('PATH', '')}"
    return env


def count(exe: Path, scenario: str, keep: Path | None = None) -> dict[str, Any]:
    """Run ``exe`` once on the scenario text under callgrind: instructions,
    events and the trace hash (``keep``: where to leave callgrind's profile)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise RuntimeError("bench: valgrind is not installed")
    with tempfile.TemporaryDirectory(prefix="hetsched-baseline-") as tmp:
        scn = Path(tmp) / "scenario.toml"
        scn.write_text(scenario, encoding="utf-8")
        out = keep if keep is not None else Path(tmp) / "callgrind.out"
        proc = subprocess.run(
            [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", str(exe), str(scn), "1"],
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    found = re.findall(r"Collected\s*:\s*(\d+)", proc.stderr)
    if not found:
        raise RuntimeError(f"bench: no instruction count in callgrind's output for {exe}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"instructions": int(found[-1]), "events": int(res["events"]), "hash": res["trace_hash"]}


def per_event(exe: Path, scheduler: str, keep: Path | None = None) -> dict[str, Any]:
    """Instructions per event of ``scheduler`` on the standard scenario."""
    short, long = LENGTHS_S
    a = count(exe, scenario_text(scheduler, short))
    if "error" in a:
        return {"scheduler": scheduler, "error": a["error"]}
    b = count(exe, scenario_text(scheduler, long), keep)
    if "error" in b:
        return {"scheduler": scheduler, "error": b["error"]}
    ipe = measure.difference_ratio(
        (a["instructions"], a["events"]), (b["instructions"], b["events"])
    )
    return {
        "scheduler": scheduler,
        "instructions_per_event": ipe,
        "events": [a["events"], b["events"]],
        "hash": b["hash"],
    }


def alternate(names: list[str], runs: int) -> list[str]:
    """The order of ``runs`` rounds over ``names``: forwards in even rounds,
    backwards in odd ones, so that no engine always runs first or last
    (the machine's load drifts within a round)."""
    order: list[str] = []
    for r in range(runs):
        order.extend(names if r % 2 == 0 else names[::-1])
    return order


def runnable(measured: Iterable[tuple[str, Path, dict[str, Any]]]) -> dict[str, Path]:
    """The engines (name → binary) whose callgrind measurement of a
    scheduler succeeded, from ``(name, binary, result)``: an engine of a
    revision that did not have the scheduler gives an error there and is
    left out of the CPU-time runs."""
    return {name: exe for name, exe, res in measured if "error" not in res}


def cpu_run(exe: Path, scenario: str) -> tuple[int, float, str]:
    """Run ``exe`` once on the scenario text: ``(events, CPU seconds, trace
    hash)``, the CPU time being the child's user + system time."""
    with tempfile.TemporaryDirectory(prefix="hetsched-baseline-") as tmp:
        scn = Path(tmp) / "scenario.toml"
        scn.write_text(scenario, encoding="utf-8")
        out, cpu = measure.child_cpu_run([str(exe), str(scn), "1"])
    res = json.loads(out.strip().splitlines()[-1])
    return int(res["events"]), cpu, str(res["trace_hash"])


def cpu_rates(
    exes: dict[str, Path],
    scheduler: str,
    runs: int,
    run: Any = cpu_run,
) -> dict[str, dict[str, Any]]:
    """Events per CPU-second of each engine (name → binary) on the whole
    standard scenario under ``scheduler``: ``runs`` runs each, alternated
    (:func:`alternate`); per engine the spread of the rates
    (:func:`measure.events_per_cpu_sec`) and the trace hash. ``run`` is
    :func:`cpu_run` (a stand-in in tests)."""
    text = scenario_text(scheduler, _standard_duration())
    samples: dict[str, list[tuple[int, float]]] = {n: [] for n in exes}
    hashes: dict[str, str] = {}
    for name in alternate(list(exes), runs):
        events, cpu, h = run(exes[name], text)
        samples[name].append((events, cpu))
        hashes[name] = h
    out: dict[str, dict[str, Any]] = {}
    for name, xs in samples.items():
        if len({e for e, _ in xs}) != 1:
            raise RuntimeError(f"bench: {name} gave different event counts over its runs")
        out[name] = {**measure.events_per_cpu_sec(xs), "hash": hashes[name]}
    return out


def _standard_duration() -> float:
    """``duration_s`` of ``bench/standard.toml``."""
    import tomllib

    return float(tomllib.loads(STANDARD.read_text(encoding="utf-8"))["duration_s"])


def ensure_worktree(rev: str, path: Path) -> Path:
    """A worktree of ``rev`` at ``path`` (created, or moved to ``rev``)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if sha.returncode != 0:
        raise RuntimeError(f"--baseline: {rev!r} is not a commit of this repository")
    commit = sha.stdout.strip()
    if not (path / ".git").exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), commit],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    else:
        subprocess.run(
            ["git", "checkout", "--detach", "-q", commit], cwd=path, check=True, capture_output=True
        )
    return path


def _rev_engine(rev: str, worktree: Path | None, shared_target: bool) -> Path:
    """The benchmark binary of revision ``rev`` (checked out and built)."""
    short_rev = rev.replace("/", "-")
    # Absolute: cargo reads a relative CARGO_TARGET_DIR from the tree it builds.
    wt = ensure_worktree(rev, (worktree or ROOT / "target" / f"baseline-{short_rev}").resolve())
    return build_engine(wt, ROOT / "target" if shared_target else wt / "target")


def compare(
    rev: str,
    schedulers: list[str],
    worktree: Path | None = None,
    also: list[tuple[str, Path | None]] | None = None,
    shared_target: bool = False,
    cpu_time: int = 0,
) -> dict[str, Any]:
    """The engines' instructions per event, per scheduler, at ``rev``, at
    each of ``also`` (revision, worktree) and at this tree (see the module
    doc)."""
    if (why := measure.valgrind_missing()) is not None:
        raise RuntimeError(f"--baseline needs callgrind: {why}")
    also = also or []
    base_exe = _rev_engine(rev, worktree, shared_target)
    also_exes = [_rev_engine(r, w, shared_target) for r, w in also]
    this_exe = build_engine(ROOT, ROOT / "target")
    rows = []
    for s in schedulers:
        names = " and at ".join([rev, *(r for r, _ in also)])
        print(f"callgrind: {s} at {names} and at this tree ...", file=sys.stderr)
        before = per_event(base_exe, s)
        between = [per_event(exe, s) for exe in also_exes]
        after = per_event(this_exe, s)
        row: dict[str, Any] = {"scheduler": s, "baseline": before, "this": after}
        if also:
            row["also"] = between
        hashes = [r.get("hash") for r in (before, *between, after)]
        if all(h is not None for h in hashes):
            row["same_trace"] = len(set(hashes)) == 1
        if cpu_time > 0:
            print(f"CPU time: {s}, {cpu_time} alternated runs of each engine ...", file=sys.stderr)
            # An engine that cannot run the scheduler (it did not exist at
            # that revision) is left out of the CPU-time runs.
            names = [rev, *(r for r, _ in also), "this tree"]
            exes = [base_exe, *also_exes, this_exe]
            runs = zip(names, exes, [before, *between, after], strict=True)
            row["cpu"] = cpu_rates(runnable(runs), s, cpu_time)
        rows.append(row)
    res: dict[str, Any] = {"baseline_rev": rev, "lengths_s": list(LENGTHS_S), "rows": rows}
    if also:
        res["also_revs"] = [r for r, _ in also]
    return res


def table(res: dict[str, Any]) -> str:
    """A Markdown table of :func:`compare`'s result."""

    def cell(r: dict[str, Any]) -> str:
        if "instructions_per_event" in r:
            return f"{r['instructions_per_event']:.0f}"
        return "—"

    also = res.get("also_revs", [])
    heads = "".join(f" at {r} |" for r in also)
    lines = [
        f"| scheduler | at {res['baseline_rev']} |{heads} this tree | change | same trace |",
        "|---|---:|" + "---:|" * len(also) + "---:|---:|---|",
    ]
    for row in res["rows"]:
        b, t = row["baseline"], row["this"]
        change = "—"
        if "instructions_per_event" in b and "instructions_per_event" in t:
            change = f"{t['instructions_per_event'] / b['instructions_per_event'] - 1:+.1%}"
        same = {True: "yes", False: "**no**"}.get(row.get("same_trace"), "—")
        mid = "".join(f" {cell(r)} |" for r in row.get("also", []))
        lines.append(f"| {row['scheduler']} | {cell(b)} |{mid} {cell(t)} | {change} | {same} |")
    rates = [(row["scheduler"], row["cpu"]) for row in res["rows"] if "cpu" in row]
    if rates:
        lines += [
            "",
            "| scheduler | engine | M events per CPU-second, median (min–max) "
            "| against the baseline |",
            "|---|---|---:|---:|",
        ]
        for sched, cpu in rates:
            base = cpu.get(res["baseline_rev"], {}).get("median")
            for name, r in cpu.items():
                ratio = f"{r['median'] / base:.3f}×" if base else "—"
                lines.append(
                    f"| {sched} | {name} | {r['median'] / 1e6:.2f} ({r['min'] / 1e6:.2f}–"
                    f"{r['max'] / 1e6:.2f}) | {ratio} |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the revision to compare with (a commit, branch or tag)")
    ap.add_argument(
        "--schedulers",
        default=",".join(SCHEDULERS),
        help=f"comma-separated schedulers (default {','.join(SCHEDULERS)})",
    )
    ap.add_argument("--worktree", type=Path, help="where to check out REV")
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="REV2",
        help="another revision to measure in the same run (repeatable)",
    )
    ap.add_argument(
        "--also-worktree",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="where to check out each --also revision, in their order",
    )
    ap.add_argument(
        "--shared-target",
        action="store_true",
        help="build the revisions in this tree's target directory (reuses its dependencies)",
    )
    ap.add_argument(
        "--cpu-time",
        type=int,
        default=0,
        metavar="N",
        help="also run each engine N times on the whole standard scenario, alternated, "
        "and compare events per CPU-second",
    )
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args(argv)
    if args.cpu_time < 0:
        print("error: --cpu-time: a number of runs, 0 (off) or more", file=sys.stderr)
        return 2
    if len(args.also_worktree) > len(args.also):
        print("error: --also-worktree: more worktrees than --also revisions", file=sys.stderr)
        return 2
    also = [
        (r, args.also_worktree[i] if i < len(args.also_worktree) else None)
        for i, r in enumerate(args.also)
    ]
    try:
        res = compare(
            args.rev,
            [s for s in args.schedulers.split(",") if s],
            args.worktree,
            also,
            args.shared_target,
            args.cpu_time,
        )
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
