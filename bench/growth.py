"""Growth of the cost per event with the machine: instructions per event of
each scheduler at a small and a large size, counted by valgrind's callgrind
(instruction counts do not depend on how busy the machine is).

A point is the workload shape of ``bench/series.py`` (threads alternating
2 ms of compute and 30 ms of sleep, with jitter) built by its functions:
``a-dwrr``'s big.LITTLE machine for the native schedulers, its virtual
machines (4 vCPUs each, one vCPU per CPU, a quarter of the threads as guest
threads: 4 per vCPU as there) for ``xen-credit`` and ``aash``,
and its dynamic machine for ``chameleon``.

Start-up (interpreter, imports, parsing, creating the threads, their first
placement) is cancelled by running each point twice, to a warm-up time and
to the warm-up plus a window, and dividing the difference of instructions by
the difference of events: what remains is the steady-state cost of an event.

``measure_growth(policies, small, large)`` returns policy →
``{"small": ipe, "large": ipe, "ratio": large / small}``; run as a script it
prints a table (``--markdown`` for docs/performance.md).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import series  # noqa: E402  (bench/series.py: the scenario builders)

#: Every built-in scheduler (``hetsched list policies``), in that order.
POLICIES = (
    "cfs",
    "pinned",
    "global-edf",
    "dwrr",
    "a-dwrr",
    "faster-first",
    "capacity-aware",
    "eas",
    "eevdf",
    "linux",
    "xen-credit",
    "aash",
    "chameleon",
    "scx-simple",
    "scx-central",
)

#: Policies that schedule virtual CPUs of virtual machines.
VM_POLICIES = ("xen-credit", "aash")

#: vCPUs per virtual machine, as in bench/series.py's VM series.
VCPUS_PER_VM = 4

#: A VM point runs this fraction of a size's threads as guest threads:
#: series.py's VM series has 16 guest threads per 4-vCPU VM (4 per vCPU),
#: its native series 16 threads per CPU.
GUEST_SHARE = 4

#: The two standard comparisons of issue 20: machine size at 16 threads per
#: CPU, and thread count at 64 CPUs.
CPU_SMALL = {"cpus": 8, "threads_per_cpu": 16}
CPU_LARGE = {"cpus": 1024, "threads_per_cpu": 16}
THREAD_SMALL = {"cpus": 64, "threads": 1000}
THREAD_LARGE = {"cpus": 64, "threads": 100_000}

#: Default timing: simulated warm-up before the counted window, and the number
#: of thread-seconds the window should hold (window = this / threads, within
#: [MIN_WINDOW_S, MAX_WINDOW_S]). With ~60 events per thread and simulated
#: second this is ~15 000 events in the window, which keeps a 1024-CPU point
#: to about a minute under callgrind.
WARMUP_S = 0.1
WINDOW_THREAD_S = 250.0
MIN_WINDOW_S = 0.04
MAX_WINDOW_S = 2.0

CHILD = r"""
import json, sys
import hetsched
scn = json.loads(open(sys.argv[1]).read())
res = hetsched.run(hetsched.loads(json.dumps(scn), fmt="json"))
print(json.dumps({"events": res.summary["events"], "cpus": res.summary.get("cpus")}))
"""

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")

#: The simulator's event loop: with ``engine_only``, callgrind counts only
#: inside it (and what it calls).
ENGINE_LOOP = "hetsched_core::sim::Engine::run_events"


@dataclass(frozen=True)
class Size:
    """A point's size: CPUs and either threads per CPU or total threads."""

    cpus: int
    threads: int

    @staticmethod
    def parse(spec: Mapping[str, int] | Size) -> Size:
        if isinstance(spec, Size):
            return spec
        if not isinstance(spec, Mapping):
            raise ValueError(f"size: expected a mapping with 'cpus' and 'threads' or "
                             f"'threads_per_cpu', got {spec!r}")
        unknown = set(spec) - {"cpus", "threads", "threads_per_cpu"}
        if unknown:
            raise ValueError(f"size: unknown field(s) {sorted(unknown)}; allowed: cpus, "
                             f"threads, threads_per_cpu")
        cpus = spec.get("cpus")
        if not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < VCPUS_PER_VM:
            raise ValueError(f"size.cpus: an integer ≥ {VCPUS_PER_VM} is allowed, got {cpus!r}")
        if ("threads" in spec) == ("threads_per_cpu" in spec):
            raise ValueError("size: give exactly one of 'threads' or 'threads_per_cpu'")
        if "threads" in spec:
            threads = spec["threads"]
            field = "threads"
        else:
            per = spec["threads_per_cpu"]
            field = "threads_per_cpu"
            threads = per * cpus if isinstance(per, int) and not isinstance(per, bool) else per
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"size.{field}: a positive integer is allowed, got {spec[field]!r}")
        return Size(cpus, threads)

    def label(self) -> str:
        return f"{self.cpus} CPUs × {self.threads} threads"


def scenario(policy: str, size: Size, duration_s: float) -> dict:
    """The point of `policy` at `size`, simulated for `duration_s`."""
    if policy in VM_POLICIES:
        # series.py's VM shape: 4 guest threads per vCPU where the native
        # points have 16 per CPU, so that vCPUs sleep and wake (the host
        # scheduler's work) instead of staying busy.
        nvms = max(1, size.cpus // VCPUS_PER_VM)
        per_vm = max(1, size.threads // GUEST_SHARE // nvms)
        return series.vms(policy, size.cpus, nvms, VCPUS_PER_VM, per_vm, duration_s)
    if policy == "chameleon":
        return series.chameleon(size.cpus, size.threads, duration_s)
    scn = series.adwrr(size.cpus, size.threads, duration_s)
    scn["scheduler"] = policy
    scn["name"] = f"{policy}-{size.cpus}x{size.threads}"
    return scn


def window_s(size: Size) -> float:
    """The counted window for a size: about WINDOW_THREAD_S thread-seconds."""
    return min(MAX_WINDOW_S, max(MIN_WINDOW_S, WINDOW_THREAD_S / size.threads))


#: A run: scenario → (instructions, events).
Runner = Callable[[dict], tuple[int, int]]


def callgrind_run(scn: dict, engine_only: bool = False) -> tuple[int, int]:
    """Run `scn` in a child interpreter under callgrind: (instructions, events).
    With `engine_only`, only the instructions of the simulator's event loop
    (`ENGINE_LOOP`) are counted: the interpreter and the conversion of the
    results are left out. Their cost depends on the values of every
    thread's results (float formatting and parsing), so with many threads
    and a short window it does not cancel between the two runs of a point."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise RuntimeError("growth: valgrind is not installed (needed to count instructions)")
    env_path = str(ROOT / "python")
    with tempfile.TemporaryDirectory(prefix="hetsched-growth-") as tmp:
        spath = Path(tmp) / "scenario.json"
        spath.write_text(json.dumps(scn))
        proc = subprocess.run(
            [valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out",
             *([f"--toggle-collect={ENGINE_LOOP}"] if engine_only else []),
             sys.executable, "-c", CHILD, str(spath)],
            capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": env_path},
        )
    if proc.returncode != 0:
        raise RuntimeError(f"growth: {scn['name']} failed: {proc.stderr.strip()[-800:]}")
    found = _COLLECTED.findall(proc.stderr)
    if not found:
        raise RuntimeError(f"growth: no instruction count in callgrind's output for {scn['name']}")
    events = json.loads(proc.stdout.strip().splitlines()[-1])["events"]
    return int(found[-1]), int(events)


def instructions_per_event(
    policy: str, size: Size, run: Runner = callgrind_run,
    warmup_s: float = WARMUP_S, window: float | None = None,
) -> dict:
    """Steady-state instructions per event of `policy` at `size`: two runs,
    to `warmup_s` and to `warmup_s + window`, differenced."""
    win = window_s(size) if window is None else window
    if not warmup_s > 0 or not win > 0:
        raise ValueError(f"growth: warm-up and window must be > 0 s, got {warmup_s}, {win}")
    i1, e1 = run(scenario(policy, size, warmup_s))
    i2, e2 = run(scenario(policy, size, warmup_s + win))
    if e2 <= e1:
        raise RuntimeError(f"growth: {policy} at {size.label()}: no events in the window "
                           f"({e1} then {e2}); lengthen the window")
    return {"ipe": (i2 - i1) / (e2 - e1), "events": e2 - e1, "window_s": win}


def measure_growth(
    policies: Iterable[str],
    small: Mapping[str, int] | Size,
    large: Mapping[str, int] | Size,
    run: Runner = callgrind_run,
    warmup_s: float = WARMUP_S,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, float]]:
    """Policy → {"small": ipe, "large": ipe, "ratio": large / small}."""
    s, lg = Size.parse(small), Size.parse(large)
    out: dict[str, dict[str, float]] = {}
    for policy in policies:
        if policy not in POLICIES:
            raise ValueError(f"growth: unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")
        row: dict[str, float] = {}
        for key, size in (("small", s), ("large", lg)):
            if progress:
                progress(f"{policy} at {size.label()}")
            row[key] = instructions_per_event(policy, size, run, warmup_s)["ipe"]
        row["ratio"] = row["large"] / row["small"]
        out[policy] = row
    return out


def table(results: Mapping[str, Mapping[str, float]], small: Size, large: Size,
          markdown: bool = False) -> str:
    """The growth table as text (or a Markdown table)."""
    head = ("policy", f"instr/event {small.cpus}×{small.threads}",
            f"instr/event {large.cpus}×{large.threads}", "ratio")
    rows = [(p, f"{r['small']:,.0f}", f"{r['large']:,.0f}", f"{r['ratio']:.2f}")
            for p, r in results.items()]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * 3) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(4)]
    def line(r: tuple[str, ...]) -> str:
        cells = [r[0].ljust(widths[0])]
        cells += [x.rjust(w) for x, w in zip(r[1:], widths[1:], strict=True)]
        return "  ".join(cells)

    return "\n".join(line(r) for r in [head, *rows])


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("policies", nargs="*", default=list(POLICIES),
                    help="schedulers to measure (default: every built-in one)")
    ap.add_argument("--axis", choices=("cpus", "threads", "both"), default="cpus",
                    help="cpus: 8 vs 1024 CPUs at 16 threads/CPU; threads: 1 000 vs "
                         "100 000 threads at 64 CPUs")
    ap.add_argument("--small", metavar="CPUS:THREADS", help="override the small size")
    ap.add_argument("--large", metavar="CPUS:THREADS", help="override the large size")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--engine-only", action="store_true",
                    help="count only the simulator's event loop (not the interpreter and the "
                         "conversion of results, which do not cancel at 100 000 threads)")
    args = ap.parse_args(argv)

    def size_arg(text: str, opt: str) -> Size:
        m = re.fullmatch(r"(\d+):(\d+)", text)
        if not m:
            ap.error(f"{opt}: expected CPUS:THREADS (e.g. 64:1000), got {text!r}")
        return Size.parse({"cpus": int(m[1]), "threads": int(m[2])})

    axes = []
    if args.small or args.large:
        if not (args.small and args.large):
            ap.error("--small and --large go together")
        axes.append((size_arg(args.small, "--small"), size_arg(args.large, "--large")))
    else:
        if args.axis in ("cpus", "both"):
            axes.append((Size.parse(CPU_SMALL), Size.parse(CPU_LARGE)))
        if args.axis in ("threads", "both"):
            axes.append((Size.parse(THREAD_SMALL), Size.parse(THREAD_LARGE)))
    try:
        everything = {}
        for small, large in axes:
            res = {}
            for policy in args.policies:
                res.update(measure_growth([policy], small, large,
                                          run=functools.partial(callgrind_run,
                                                                engine_only=args.engine_only),
                                          progress=lambda m: print(f"growth: {m} ...",
                                                                   file=sys.stderr)))
                r = res[policy]
                print(f"growth: {policy}: {r['small']:.0f} -> {r['large']:.0f} instructions "
                      f"per event, ratio {r['ratio']:.2f}", file=sys.stderr, flush=True)
            everything[f"{small.cpus}x{small.threads}->{large.cpus}x{large.threads}"] = res
            if not args.json:
                print(table(res, small, large, args.markdown))
                print()
    except (RuntimeError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
