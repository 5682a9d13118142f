"""The ``hetsched linux`` command group (see ``docs/real-linux.md``)::

hetsched linux build                      # compile the real programs
hetsched linux calibrate [--json]
hetsched linux agent WORKLOAD.toml --agent faster-first --profile "cpu0=100%, cpu1=50%"
hetsched linux agent --pid 1234 --pid 5678 --agent equal-share --duration 10
hetsched linux validate-sim [--json]
hetsched linux validate-sim --suite eevdf [--recorded data/linux-traces]
hetsched linux validate-sim --suite eevdf --churn-cost [--recorded data/linux-traces/churn-cost]
hetsched linux validate-sim --suite pelt [--recorded data/linux-pelt/pelt-6.18.json]
hetsched linux cleanup                    # undo what a killed agent left: programs, cgroups ...
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import LinuxError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Print a :class:`LinuxError` as one line (exit status 1)."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except LinuxError as e:
            print(f"hetsched: error: {e}", file=sys.stderr)
            return EXIT_FAILURE
        except PermissionError as e:
            print(
                f"hetsched: error: {e.filename or ''}: permission denied "
                "(this needs root: CAP_SYS_ADMIN for cgroups, CAP_SYS_NICE for nice values)",
                file=sys.stderr,
            )
            return EXIT_FAILURE

    return run


def register(sub: Any) -> None:
    """Add ``linux`` and its subcommands to the top-level subparsers ``sub``."""
    lx = sub.add_parser(
        "linux", help="run programs and agents on real Linux, compare with the simulator"
    )
    lsub = lx.add_subparsers(title="linux commands", metavar="COMMAND")
    lx.set_defaults(handler=lambda a: (lx.print_help(sys.stderr), EXIT_USAGE)[1])

    b = lsub.add_parser("build", help="compile the real programs (realprogs/*.c) with gcc")
    b.add_argument("--force", action="store_true", help="rebuild even if up to date")
    b.set_defaults(handler=_cmd_build)

    c = lsub.add_parser("calibrate", help="measure the real programs in hetsched's work units")
    c.add_argument("--repeats", type=int, default=3, help="runs per measurement (median)")
    c.add_argument("--units", type=int, default=40, help="spin work units per run")
    c.add_argument("--json", action="store_true", help="print the calibration as JSON")
    c.set_defaults(handler=_cmd_calibrate)

    a = lsub.add_parser("agent", help="run an agent policy on real processes")
    a.add_argument("workload", nargs="?", type=Path, help="workload TOML (see docs/real-linux.md)")
    a.add_argument(
        "--pid", type=int, action="append", default=[], help="also manage this process (repeatable)"
    )
    a.add_argument(
        "--agent",
        default="none",
        help="faster-first, equal-share, patel-cpu (and Patel's other three, with "
        "[param=value]), python:module:Class[...], or none (plain CFS; default)",
    )
    a.add_argument(
        "--profile", help="emulated asymmetry, e.g. 'cpu0=100%%, cpu1=50%%' (needs root)"
    )
    a.add_argument("--period-ms", type=float, help="agent sampling period (default: the agent's)")
    a.add_argument("--duration", type=float, help="stop after this many seconds")
    a.add_argument("--cgroup", choices=["auto", "v1", "v2"], default="auto", help="cgroup version")
    a.add_argument(
        "--high-weight",
        action="store_true",
        help="give the emulated CPUs' groups the highest CPU weight, so that other load "
        "on a shared machine does not distort them",
    )
    a.add_argument(
        "--out", type=Path, metavar="DIR", help="results folder (default results/<name>-linux)"
    )
    a.add_argument("--json", action="store_true", help="print the summary as JSON")
    a.add_argument("--quiet", "-q", action="store_true")
    a.add_argument(
        "--kernel-trace",
        action="store_true",
        help="record the kernel's scheduler trace meanwhile (root; into DIR/kernel-trace*)",
    )
    a.set_defaults(handler=_cmd_agent)

    v = lsub.add_parser("validate-sim", help="run small scenarios for real and in the simulator")
    v.add_argument("--scale", choices=["quick", "full"], default="quick")
    v.add_argument("--only", action="append", default=[], help="run only this case (repeatable)")
    v.add_argument(
        "--nice", type=int, default=0, help="nice value of the real programs (root may use < 0)"
    )
    v.add_argument(
        "--repeats", type=int, help="real runs per case, median taken (default 3; full: 5)"
    )
    v.add_argument("--json", action="store_true", help="print the rows as JSON")
    v.add_argument(
        "--suite",
        choices=["eevdf", "pelt"],
        help="eevdf: distributions from the kernel's own scheduler trace; "
        "pelt: load tracking (util_avg, util_est) from /proc/PID/sched",
    )
    v.add_argument(
        "--recorded",
        type=Path,
        metavar="PATH",
        help="suite: real side from recorded traces (eevdf: a folder; pelt: a file)",
    )
    v.add_argument(
        "--save-traces",
        type=Path,
        metavar="PATH",
        help="suite: keep the real traces (eevdf: a folder; pelt: a file)",
    )
    v.add_argument(
        "--kernel-trace", type=Path, metavar="DIR", help="record each real run's kernel trace"
    )
    v.add_argument(
        "--churn-cost",
        action="store_true",
        help="suite: measure the churn parent's cost per child instead (1 µs children; "
        "root, or from --recorded traces)",
    )
    v.set_defaults(handler=_cmd_validate)

    cl = lsub.add_parser(
        "cleanup", help="undo what a killed agent left: its programs, affinities, cgroups"
    )
    cl.set_defaults(handler=_cmd_cleanup)

    from . import hotplug

    hotplug.register(lsub, _guard)


@_guard
def _cmd_build(args: argparse.Namespace) -> int:
    from . import progs

    out = progs.build(force=args.force)
    print(f"built {', '.join(progs.PROGRAMS)} in {out}/")
    return EXIT_OK


@_guard
def _cmd_calibrate(args: argparse.Namespace) -> int:
    from .._text import table
    from .calibrate import calibrate, table_rows

    if args.repeats < 1 or args.units < 1:
        raise LinuxError("--repeats and --units must be ≥ 1")
    c = calibrate(units=args.units, repeats=args.repeats)
    if args.json:
        print(json.dumps(c.to_dict(), indent=2, sort_keys=True))
    else:
        print(table(["quantity", "value", "meaning"], table_rows(c)))
    return EXIT_OK


def resolve_agent(spec: str) -> Any:
    """An agent instance from ``--agent``."""
    from .agents import AGENTS

    spec = spec.strip()
    if spec in ("none", "cfs", ""):
        return None
    if spec.startswith("python:"):
        from .. import _core, api

        try:
            return api.resolve_python_policy(spec)
        except _core.PolicyError as e:
            raise LinuxError(f"--agent: {e}") from None
    m = re.fullmatch(r"([\w-]+)\s*(?:\[(.*)\])?", spec)
    name = m.group(1) if m else spec
    if name.startswith("patel-"):
        from .. import _core
        from .agents import PatelAgent

        try:
            return PatelAgent(spec)
        except _core.PolicyError as e:
            raise LinuxError(f"--agent: {e}") from None
    if m is None or name not in AGENTS:
        raise LinuxError(
            f"--agent {spec!r}: unknown agent; allowed: none, {', '.join(AGENTS)}, "
            "patel-cpu, patel-priority, patel-cachemiss, patel-ctxswitch, python:module:Class[...]"
        )
    kwargs: dict[str, Any] = {}
    for item in (m.group(2) or "").split(","):
        if not item.strip():
            continue
        k, eq, val = item.partition("=")
        if not eq or k.strip() != "period_ms":
            raise LinuxError(
                f"--agent {spec!r}: {item.strip()!r}; the only parameter is period_ms=N"
            )
        try:
            kwargs["period_ms"] = float(val)
        except ValueError:
            raise LinuxError(
                f"--agent {spec!r}: period_ms={val.strip()!r} is not a number"
            ) from None
        if not kwargs["period_ms"] > 0:
            raise LinuxError(f"--agent {spec!r}: period_ms must be > 0")
    return AGENTS[name](**kwargs)


@_guard
def _cmd_agent(args: argparse.Namespace) -> int:
    from ..results import Results
    from .cgroups import parse_profile
    from .runner import Runner
    from .workload import load

    if args.workload is None and not args.pid:
        raise LinuxError("give a workload file or at least one --pid")
    wl = load(args.workload) if args.workload is not None else None
    agent = resolve_agent(args.agent)
    profile_text = args.profile or (wl.profile if wl else None)
    profile = parse_profile(profile_text) if profile_text else None
    if args.duration is not None and not args.duration > 0:
        raise LinuxError(f"--duration: {args.duration} must be > 0")
    runner = Runner(
        wl,
        agent,
        pids=args.pid,
        profile=profile,
        period_ms=args.period_ms,
        duration_s=args.duration,
        cgroup_version=args.cgroup,
        high_weight=args.high_weight,
        log=None if not args.quiet else (lambda m: None),
    )
    from .. import tracefs

    try:
        with tracefs.KernelTrace() if args.kernel_trace else contextlib.nullcontext() as kt:
            doc = _clean(runner.run())
    except tracefs.TraceError as e:
        raise LinuxError(str(e)) from None
    res = Results(json.dumps(doc, default=_json_default))
    name = wl.name if wl else "attached"
    out = args.out if args.out is not None else Path("results") / f"{_safe(name)}-linux"
    res.save(out)
    if kt is not None:
        (out / "kernel-trace.txt").write_text(kt.text, encoding="utf-8")
        tracefs.import_trace(out / "kernel-trace.txt", out / "kernel-trace")
    if args.json:
        print(
            json.dumps(
                {**res.summary, "warnings": res.warnings},
                indent=2,
                sort_keys=True,
                default=_json_default,
            )
        )
    elif not args.quiet:
        print(res.summary_table())
    if not args.quiet:
        print(f"results written to {out}/", file=sys.stderr)
    failed = doc["summary"].get("failed") or doc["summary"].get("stopped_by")
    return EXIT_FAILURE if failed else EXIT_OK


@_guard
def _cmd_validate(args: argparse.Namespace) -> int:
    from .._text import table
    from .validate import run_validation

    if args.churn_cost and args.suite != "eevdf":
        raise LinuxError("--churn-cost belongs to the suite: add --suite eevdf")
    if args.suite == "pelt":
        from . import pelt

        prows = pelt.run_suite(
            recorded=args.recorded,
            save_to=args.save_traces,
            log=lambda m: print(f"hetsched: {m}", file=sys.stderr),
        )
        if args.json:
            print(json.dumps([vars(r) for r in prows], indent=2))
        else:
            print(pelt.table_text(prows))
        return EXIT_OK
    if args.suite:
        from . import suite

        if args.churn_cost:
            log = lambda m: print(f"hetsched: {m}", file=sys.stderr)  # noqa: E731
            if args.recorded is not None:
                cost = suite.recorded_churn_cost(args.recorded)
            else:
                cost = suite.measure_churn_cost(args.repeats or 5, args.save_traces, log)
            if args.json:
                print(json.dumps(cost, indent=2))
            else:
                rates = ", ".join(f"{r:.1f}" for r in cost["rates_per_s"])
                print(f"churn with 1 µs children: {rates} children/s")
                print(f"parent cost per child: {cost['parent_ms_per_child']:.4f} ms")
            return EXIT_OK
        srows = suite.run_suite(
            repeats=args.repeats or 3,
            only=args.only,
            recorded=args.recorded,
            save_to=args.save_traces,
            log=lambda m: print(f"hetsched: {m}", file=sys.stderr),
        )
        print(json.dumps(_clean(srows), indent=2) if args.json else suite.table_text(srows))
        return EXIT_OK
    rows = run_validation(
        scale=args.scale,
        only=args.only,
        nice=args.nice,
        repeats=args.repeats,
        kernel_trace=args.kernel_trace,
    )
    if args.json:
        print(json.dumps(_clean(rows), indent=2, default=_json_default))
    else:
        head = ["case", "program", "kind", "predicted", "measured", "error", "target"]
        body = [
            [
                r["case"],
                r["program"],
                r["kind"],
                _s(r["predicted_s"]),
                _s(r["measured_s"]),
                f"{100 * r['error']:+.1f} %" if r["error"] is not None else "-",
                f"±{100 * r['target']:.0f} % {r['verdict']}",
            ]
            for r in rows
        ]
        print(
            table(
                [*head, "cpu time sim / real"],
                [
                    [*b, f"{_s(r['predicted_cpu_s'])} / {_s(r['measured_cpu_s'])}"]
                    for b, r in zip(body, rows, strict=True)
                ],
            )
        )
    return EXIT_OK


@_guard
def _cmd_cleanup(args: argparse.Namespace) -> int:
    from .cgroups import leftover_groups, remove_tree
    from .state import cleanup, state_dir

    # First what killed agents recorded (programs, affinities, frequencies,
    # their groups), then any hetsched-PID group of a dead agent that no
    # state file names.
    done, problems = cleanup()
    for line in done:
        print(line)
    left = leftover_groups()
    for p in left:
        try:
            remove_tree(p)
        except OSError as e:
            problems.append(f"cannot remove cgroup {p}: {e.strerror or e}")
            continue
        print(f"removed cgroup {p}")
    for line in problems:
        print(f"hetsched: error: {line}", file=sys.stderr)
    if not done and not left and not problems:
        print(
            f"nothing to clean up (no state of a stopped agent in {state_dir()}/, "
            "no leftover hetsched cgroups)"
        )
    return EXIT_FAILURE if problems else EXIT_OK


def _clean(v: Any) -> Any:
    """NaN and infinities become None (JSON null), recursively."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def _s(v: Any) -> str:
    return f"{v:.3f} s" if isinstance(v, int | float) and math.isfinite(v) else "-"


def _json_default(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Path):
        return str(v)
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"
