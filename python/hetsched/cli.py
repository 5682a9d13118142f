"""The ``hetsched`` command line.

::

    hetsched run scenarios/demo.toml --set duration_s=5 --out out/demo
    hetsched validate scenarios/demo.toml
    hetsched list policies            # also: presets, reproductions
    hetsched schema > scenario.schema.json
    hetsched reproduce li-f9 --scale quick
    hetsched reproduce all --scorecard docs/validation.md
    hetsched sweep scenarios/sweep-demo.toml --out out/sweep-demo [--dask HOST:PORT]
    hetsched plot out/demo --kind timeline         # also utilization, power, fairness, speedup
    hetsched report out/demo                       # self-contained HTML
    hetsched machine from-sysfs > machine.toml     # this machine's CPUs
    hetsched workload from-rt-app tasks.json --out rtapp.toml
    hetsched trace import trace.txt --out out/trace   # the kernel's scheduler trace

Errors in scenarios, policies and files are printed as one line,
``hetsched: error: <message>``. Exit status: 0 done; 2 for a command line or
scenario that cannot be used, and for a missing input file in every command;
1 when a run, a reproduction or a sweep fails; 130 on Ctrl-C.
Listings wrap to the terminal's width (80 columns into a pipe or file).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import _core, api
from ._text import fit_width, table

__all__ = ["main"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
#: Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A command line that cannot be carried out (exit status 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["--version"], ["-V"]):  # answered before anything else is imported
        print(f"hetsched {_core.__version__}")
        return EXIT_OK
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from .results import MixedRunError

    try:
        _check_inputs(args)
        status: int = args.handler(args)
        return status
    except _core.ScenarioError as e:
        return _fail(_core.ScenarioError(_with_suggestion(str(e))), EXIT_USAGE)
    except (UsageError, FileNotFoundError, MixedRunError) as e:
        return _fail(e, EXIT_USAGE)
    except BrokenPipeError:  # the reader went away (``hetsched list policies | head``)
        _silence_stdout()
        return EXIT_FAILURE
    except (_core.HetschedError, OSError) as e:
        return _fail(e, EXIT_FAILURE)
    except KeyboardInterrupt:
        print("hetsched: interrupted", file=sys.stderr)
        return 130


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _check_inputs(args: argparse.Namespace) -> None:
    """A missing input file or folder is a usage error (exit 2) in every command."""
    for attr, what in (("file", "file"), ("dir", "results folder"), ("root", "folder")):
        path = getattr(args, attr, None)
        if isinstance(path, Path) and not path.exists():
            raise UsageError(f"{path}: no such {what}")


def _with_suggestion(message: str) -> str:
    """Add "did you mean" to the core's ``unknown ... "NAME"; known: a, b`` errors."""
    m = re.search(r'"(?P<name>[^"]+)"; known: (?P<known>[^;]+)$', message)
    if m is None or "did you mean" in message:
        return message
    known = [k.strip() for k in m["known"].split(",") if k.strip()]
    close = difflib.get_close_matches(m["name"], known, n=1, cutoff=0.6)
    if not close:
        close = [k for k in known if k.lower() == m["name"].lower()]
    return f'{message}; did you mean "{close[0]}"?' if close else message


def _fail(e: BaseException, status: int) -> int:
    message = str(e) if not isinstance(e, OSError) or not e.filename else _os_message(e)
    print(f"hetsched: error: {message}", file=sys.stderr)
    return status


def _os_message(e: OSError) -> str:
    return f"{e.filename}: {e.strerror or e}"


def _override(text: str) -> tuple[str, str]:
    try:
        return api.parse_override(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="overrides",
        metavar="PATH=VALUE",
        action="append",
        type=_override,
        default=[],
        help="override a scenario field, e.g. --set workload.programs[0].threads=8 (repeatable)",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hetsched",
        description="Simulate OS scheduling on heterogeneous multicore processors.",
    )
    p.add_argument("-V", "--version", action="version", version=f"hetsched {_core.__version__}")
    sub = p.add_subparsers(title="commands", metavar="COMMAND")

    r = sub.add_parser("run", help="simulate a scenario and write its results")
    r.add_argument("file", type=Path, help="scenario file (.toml or .json)")
    _add_set(r)
    r.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where to write results (default: results/<scenario name>)",
    )
    r.add_argument(
        "--trace",
        action="store_true",
        help="record every event; also writes trace.json (Perfetto) and trace.jsonl",
    )
    r.add_argument(
        "--check",
        action="store_true",
        help="check the engine's invariants after every event (slower)",
    )
    r.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    r.set_defaults(handler=_cmd_run)

    v = sub.add_parser("validate", help="check a scenario file without running it")
    v.add_argument("file", type=Path)
    _add_set(v)
    v.set_defaults(handler=_cmd_validate)

    ls = sub.add_parser("list", help="list policies, machine presets or reproductions")
    ls.add_argument("what", choices=["policies", "presets", "reproductions"])
    ls.set_defaults(handler=_cmd_list)

    sc = sub.add_parser("schema", help="print the JSON Schema of scenario files")
    sc.set_defaults(handler=_cmd_schema)

    rp = sub.add_parser("reproduce", help="reproduce the papers' published results")
    rp.add_argument("ids", nargs="+", metavar="ID", help="reproduction ids, or 'all'")
    rp.add_argument(
        "--scale",
        choices=["full", "quick"],
        default="full",
        help="full: the papers' durations; quick: shorter runs (default: full)",
    )
    rp.add_argument("--json", action="store_true", help="print the rows as a JSON array")
    rp.add_argument("--plots", type=Path, metavar="DIR", help="write one PNG per reproduction")
    rp.add_argument(
        "--scorecard",
        type=Path,
        metavar="FILE",
        help="also write the rows as a Markdown scorecard (docs/validation.md)",
    )
    rp.set_defaults(handler=_cmd_reproduce)

    sw = sub.add_parser(
        "sweep",
        help="run a parameter sweep (a base scenario and a grid) into one results folder",
    )
    sw.add_argument("file", type=Path, help="sweep file (.toml; see docs/sweeps.md)")
    sw.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="results folder (default: results/<sweep name>); re-running resumes it",
    )
    sw.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="send the runs to the Dask scheduler at ADDRESS (host:port or tcp://host:port)",
    )
    sw.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="local worker processes (default: one per core)",
    )
    sw.add_argument("--trace", action="store_true", help="record each run's trace")
    sw.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    sw.set_defaults(handler=_cmd_sweep)

    from .plot import KINDS

    pl = sub.add_parser("plot", help="draw a figure of a run folder or a sweep folder")
    pl.add_argument("dir", type=Path, help="results folder (hetsched run/sweep --out DIR)")
    pl.add_argument(
        "--kind",
        choices=list(KINDS),
        default="timeline",
        help="; ".join(f"{k}: {v}" for k, v in KINDS.items()),
    )
    pl.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="any format matplotlib writes, by suffix: .png .svg .pdf .eps ... "
        "(default: DIR/plots/KIND.png)",
    )
    pl.add_argument(
        "--format",
        choices=["png", "svg", "pdf"],
        default="png",
        help="format when --out is not given",
    )
    pl.add_argument("--metric", default="makespan_s", help="speedup: the table column compared")
    pl.add_argument("--by", help="speedup: the swept axis whose values are compared")
    pl.add_argument("--baseline", help="speedup: the value of --by the others are compared to")
    pl.set_defaults(handler=_cmd_plot)

    rep = sub.add_parser("report", help="write a self-contained HTML report of a results folder")
    rep.add_argument("dir", type=Path, help="results folder (hetsched run/sweep --out DIR)")
    rep.add_argument(
        "--out", type=Path, metavar="FILE", help="an .html file (default: DIR/report.html)"
    )
    rep.set_defaults(handler=_cmd_report)

    mc = sub.add_parser("machine", help="machine descriptions from the Linux world")
    msub = mc.add_subparsers(title="machine commands", metavar="WHAT")
    fs = msub.add_parser(
        "from-sysfs", help="write a machine TOML from /sys/devices/system/cpu (or a saved copy)"
    )
    fs.add_argument(
        "root",
        nargs="?",
        default="/",
        type=Path,
        help="/ (this machine, the default), the root of a saved copy of /sys, or a .tar "
        "archive of one",
    )
    fs.add_argument(
        "--energy-model",
        action="append",
        type=Path,
        metavar="FILE",
        help="take P-states and power from a LISA platform .json or device-tree sources "
        "(repeat for several .dts/.dtsi files)",
    )
    fs.add_argument("--out", type=Path, metavar="FILE", help="write here instead of stdout")
    fs.set_defaults(handler=_cmd_from_sysfs)
    dt = msub.add_parser(
        "from-devicetree",
        help="write a machine TOML with its energy model from device-tree sources (.dts/.dtsi)",
    )
    dt.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".dts/.dtsi files")
    dt.add_argument("--out", type=Path, metavar="FILE", help="write here instead of stdout")
    dt.set_defaults(handler=_cmd_from_energy_model, em_kind="devicetree")
    li = msub.add_parser(
        "from-lisa", help="write a machine TOML from a LISA platform description (.json)"
    )
    li.add_argument("files", nargs=1, type=Path, metavar="FILE", help="LISA platform .json")
    li.add_argument("--out", type=Path, metavar="FILE", help="write here instead of stdout")
    li.set_defaults(handler=_cmd_from_energy_model, em_kind="lisa")
    mc.set_defaults(handler=lambda args: _usage(mc))

    wl = sub.add_parser("workload", help="workloads from the Linux world")
    wsub = wl.add_subparsers(title="workload commands", metavar="WHAT")
    ra = wsub.add_parser("from-rt-app", help="translate an rt-app JSON file into a scenario")
    ra.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="rt-app JSON file, or the fragments of rt-app's merge/ format",
    )
    ra.add_argument(
        "--machine",
        default="big-little-4+4",
        help="machine preset, or a machine file (.toml/.json with a [machine] table, e.g. "
        "from `hetsched machine from-sysfs`) (default: big-little-4+4)",
    )
    ra.add_argument("--scheduler", default="cfs", help="scheduler (default: cfs)")
    ra.add_argument(
        "--duration", type=float, metavar="S", help="run length in s (default: the file's)"
    )
    ra.add_argument(
        "--out", type=Path, metavar="FILE", help="a .toml or .json scenario (default: stdout, TOML)"
    )
    for op, what in (("mem", "memset"), ("io", "write() to global.io_device")):
        ra.add_argument(
            f"--{op}-bytes-per-s",
            type=float,
            metavar="B",
            help=f"rate of rt-app's {'mem' if op == 'mem' else 'iorun'} ({what}) in bytes/s "
            "(default: measured, see docs/linux.md)",
        )
    ra.set_defaults(handler=_cmd_from_rtapp)
    ft = wsub.add_parser(
        "from-trace",
        help="replay a kernel scheduler trace (tracefs or trace-cmd report text) as a scenario",
    )
    ft.add_argument(
        "file", type=Path, metavar="TRACE", help="tracefs 'trace' text or 'trace-cmd report' output"
    )
    ft.add_argument(
        "--machine",
        help="the machine the scenario runs on: a machine file (.toml/.json with a [machine] "
        "table) or a preset (default: this machine, from /sys)",
    )
    ft.add_argument(
        "--traced-on",
        metavar="MACHINE",
        help="the machine the trace was recorded on, which converts run time to work: a machine "
        "file or a preset (default: --machine's)",
    )
    who = ft.add_mutually_exclusive_group()
    who.add_argument(
        "--pids", type=int, nargs="+", metavar="PID", help="replay these tasks and their children"
    )
    who.add_argument(
        "--comm", metavar="REGEX", help="replay the tasks whose name matches, and their children"
    )
    ft.add_argument("--scheduler", default="eevdf", help="scheduler (default: eevdf)")
    ft.add_argument("--out", type=Path, metavar="FILE", help="a .toml scenario (default: stdout)")
    ft.set_defaults(handler=_cmd_from_trace)
    wl.set_defaults(handler=lambda args: _usage(wl))

    from .tracefs import register as register_trace  # hetsched trace import ...

    register_trace(sub)
    from .linux.cli import register as register_linux  # hetsched linux ...

    register_linux(sub)
    return p


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _cmd_run(args: argparse.Namespace) -> int:
    scenario = api.load(args.file, args.overrides)
    show_progress = not args.quiet and sys.stderr.isatty()
    out = args.out if args.out is not None else Path("results") / _safe_name(scenario.name)
    # A run of many threads takes a while to build, convert and write: one
    # line per stage says what it is doing.
    threads = _count_threads(scenario)
    stages = not args.quiet and threads >= STAGE_LINES_THREADS

    def stage(text: str) -> None:
        if stages:
            print(f"hetsched: {text}", file=sys.stderr, flush=True)

    def simulated(now_s: float, end_s: float) -> None:
        if bar is not None:
            bar(now_s, end_s)
        if now_s >= end_s:
            stage("simulated; converting the results")

    bar = api._ProgressBar(scenario.name) if show_progress else None
    try:
        stage(f"building {threads:,} threads")
        res = api.run(
            scenario,
            trace=args.trace,
            check=args.check,
            progress=simulated if bar is not None or stages else False,
        )
    except KeyboardInterrupt as e:
        partial = getattr(e, "results", None)
        if partial is None:
            # Nothing was simulated yet (the scenario was being built).
            print(
                "hetsched: interrupted before the simulation started; nothing written",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        at = partial.summary.get("interrupted_at_s")
        when = (
            f"at {at:.6g} s of {scenario.duration_s:g} s simulated"
            if at is not None
            else "while the results were converted"
        )
        try:
            partial.save(out)
        finally:
            print(
                f"hetsched: interrupted {when}; "
                f'partial results written to {out}/ (summary.json has "partial": true)',
                file=sys.stderr,
            )
        return EXIT_INTERRUPTED
    finally:
        if bar is not None:
            bar.close()
    try:
        res.save(out, announce=lambda name: stage(f"writing {out / name}"))
    except KeyboardInterrupt:
        print(
            f"hetsched: interrupted while the results were written; what was written is in "
            f'{out}/ (summary.json has "partial": true)',
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps({**res.summary, "warnings": res.warnings}, indent=2, sort_keys=True))
    elif not args.quiet:
        print(res.summary_table())
    if not args.quiet:
        print(f"results written to {out}/", file=sys.stderr)
    return EXIT_OK


#: Threads from which ``hetsched run`` prints a line per stage (building,
#: converting, writing): about a second of each on a laptop.
STAGE_LINES_THREADS = 20000


def _count_threads(scenario: Any) -> int:
    """Threads the scenario's programs start (instances and VMs' guests aside)."""
    doc = json.loads(scenario.to_json())
    programs = (doc.get("workload") or {}).get("programs") or []
    return sum(int(p.get("threads") or 1) for p in programs if isinstance(p, dict))


def _cmd_validate(args: argparse.Namespace) -> int:
    scenario = api.load(args.file, args.overrides)
    if scenario.scheduler.startswith(api.PYTHON_POLICY_PREFIX):
        api.resolve_python_policy(scenario.scheduler)
    resolved = json.loads(scenario.to_json())
    cpus = _count_cpus(resolved.get("machine") or {})
    programs = len((resolved.get("workload") or {}).get("programs") or [])
    print(f"ok: {scenario.name} ({cpus} cpus, {programs} programs)")
    for w in scenario.warnings:
        print(f"warning: {w}")
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    if args.what == "policies":
        text = _policies_text(_core.list_policies())
    elif args.what == "presets":
        presets = _core.list_presets()
        text = table(
            ["preset", "description"], [[p["name"], _first_line(p["doc"])] for p in presets]
        )
    else:
        from . import reproduce

        rows = [[r.id, r.title, r.paper] for r in reproduce.registry.values()]
        text = table(["id", "title", "paper"], rows)
    print(fit_width(text, _terminal_width()))
    return EXIT_OK


def _terminal_width() -> int:
    """Columns of the terminal on stdout; 80 into a pipe or a file."""
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def _cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(json.loads(_core.schema()), indent=2))
    return EXIT_OK


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from . import reproduce

    try:
        ids = reproduce.resolve_ids(args.ids)
    except reproduce.UnknownReproductionError as e:
        raise UsageError(str(e)) from None
    started = time.monotonic()

    def progress(repro: reproduce.Reproduction, rows: list[reproduce.Row]) -> None:
        verdicts = ", ".join(r.verdict for r in rows)
        print(f"{repro.id}: {verdicts} ({time.monotonic() - started:.1f} s)", file=sys.stderr)

    rows = reproduce.run_reproductions(
        ids, scale=args.scale, plots_dir=args.plots, on_done=progress
    )
    tally = _tally(rows)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2, default=str))
        print(tally, file=sys.stderr)
    else:
        print(fit_width(reproduce.rows_table(rows), _terminal_width()))
        print(f"\n{tally}")
    if args.scorecard is not None:
        args.scorecard.parent.mkdir(parents=True, exist_ok=True)
        args.scorecard.write_text(reproduce.scorecard_markdown(rows), encoding="utf-8")
    return EXIT_FAILURE if any(r.verdict == "error" for r in rows) else EXIT_OK


def _tally(rows: Sequence[Any]) -> str:
    """``24 claims: 12 match, 6 trend, 5 differs, 1 error`` (verdicts in their usual order)."""
    counts: dict[str, int] = {}
    for verdict in ("match", "trend", "differs", "error"):
        counts[verdict] = 0
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    parts = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    return f"{len(rows)} claim{'s' if len(rows) != 1 else ''}: {parts or 'none'}"


def _cmd_sweep(args: argparse.Namespace) -> int:
    from . import sweeps

    spec = sweeps.load_sweep(args.file)
    if args.trace:
        spec.trace = True
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    out = args.out if args.out is not None else Path("results") / _safe_name(spec.name)
    total = len(spec.points())
    finished = 0

    def count(row: dict[str, Any]) -> None:
        nonlocal finished
        finished += 1

    backend = f"dask://{args.dask}" if args.dask else "local"
    if not args.quiet:
        where = f"the Dask cluster at {args.dask}" if args.dask else "this machine"
        print(f"sweep {spec.name}: {total} runs on {where} into {out}/", file=sys.stderr)
    try:
        table = sweeps.sweep(
            spec,
            backend=backend,
            out=out,
            workers=args.workers,
            progress=not args.quiet and sys.stderr.isatty(),
            on_result=count,
        )
    except KeyboardInterrupt:
        print(
            f"hetsched: interrupted; {finished} more run(s) finished and are kept in {out}/; "
            "run the same command again to finish the sweep",
            file=sys.stderr,
        )
        return 130
    failed = table[table["status"] != "ok"]
    if not args.quiet:
        skipped = table.attrs.get("skipped", 0)
        print(
            f"{len(table) - len(failed)} of {len(table)} runs ok"
            + (f" ({skipped} already done)" if skipped else "")
            + f"; table in {out}/{sweeps.tables_written(table)}",
            file=sys.stderr,
        )
    for row in failed.head(5).to_dict("records"):
        values = ", ".join(f"{a}={row.get(a)}" for a in spec.axes())
        print(f"failed: {values}: {row.get('error')}", file=sys.stderr)
    if len(failed) > 5:
        print(f"... and {len(failed) - 5} more failed runs (see the table)", file=sys.stderr)
    return EXIT_FAILURE if len(failed) else EXIT_OK


def _cmd_plot(args: argparse.Namespace) -> int:
    from . import plot

    if not args.dir.is_dir():
        raise UsageError(f"{args.dir}: no such results folder")
    out = args.out or args.dir / "plots" / f"{args.kind}.{args.format}"
    try:
        path = plot.plot(
            args.dir, args.kind, out, metric=args.metric, by=args.by, baseline=args.baseline
        )
    except plot.PlotError as e:
        raise UsageError(str(e)) from None
    print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    from . import report

    try:
        path = report.write_report(args.dir, args.out)
    except report.ReportError as e:
        raise UsageError(str(e)) from None
    print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def _cmd_from_sysfs(args: argparse.Namespace) -> int:
    from . import energymodel, sysfs

    em = energymodel.load_energy_model(args.energy_model) if args.energy_model else None
    _write_machine(sysfs.machine_from_sysfs(args.root, energy_model=em), args.out)
    return EXIT_OK


def _cmd_from_energy_model(args: argparse.Namespace) -> int:
    from . import energymodel

    if args.em_kind == "lisa":
        em = energymodel.load_lisa(args.files[0])
    else:
        em = energymodel.load_devicetree(args.files)
    _write_machine(em.machine(), args.out)
    return EXIT_OK


def _write_machine(m: Any, out: Path | None) -> None:
    text = m.toml()
    # The TOML must be a machine the core accepts: check it with a small workload.
    api.loads(
        'name = "check"\nduration_s = 1.0\n'
        + text
        + '\n[[workload.programs]]\nname = "check"\nkind = "sequential"\nwork_ms = 1\n',
        source=f"machine from {m.source}",
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    for w in m.warnings:
        print(f"warning: {w}", file=sys.stderr)


def _cmd_from_rtapp(args: argparse.Namespace) -> int:
    from . import rtapp

    wl = rtapp.load_rtapp(
        *args.files, mem_bytes_per_s=args.mem_bytes_per_s, io_bytes_per_s=args.io_bytes_per_s
    )
    machine: str | dict[str, Any] = args.machine
    if Path(args.machine).suffix.lower() in (".toml", ".json") or Path(args.machine).is_file():
        machine = rtapp.load_machine_file(args.machine)
    if args.duration is not None and not args.duration > 0:
        raise UsageError(f"--duration must be > 0 s, got {args.duration}")
    try:
        scenario = wl.scenario(machine=machine, scheduler=args.scheduler, duration_s=args.duration)
    except rtapp.RtAppError:
        raise
    except _core.ScenarioError as e:
        raise _core.ScenarioError(f"--machine {args.machine}: {e}") from None
    as_json = args.out is not None and args.out.suffix.lower() == ".json"
    text = json.dumps(scenario, indent=2) + "\n" if as_json else rtapp.scenario_toml(scenario)
    source = f"translation of {' '.join(map(str, args.files))}"
    api.loads(text, fmt="json" if as_json else "toml", source=source)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    for note in wl.notes:
        print(f"note: {note}", file=sys.stderr)
    return EXIT_OK


def _cmd_from_trace(args: argparse.Namespace) -> int:
    from . import replay

    return replay.command(args)


def _policies_text(policies: list[dict[str, Any]]) -> str:
    blocks = []
    kinds = {
        "scheduler": "schedulers",
        "governor": "governors",
        "agent": "agents",
        "class": "scheduling classes above the fair scheduler (program policy, [os] table)",
    }
    for kind, title in kinds.items():
        these = [p for p in policies if p.get("kind") == kind]
        if not these:
            continue
        rows: list[list[object]] = []
        for p in these:
            rows.append([p["name"], "", _first_line(p.get("doc", ""))])
            for param in p.get("params") or []:
                rows.append(
                    [
                        "",
                        f"{param['name']} = {param.get('default')}",
                        _first_line(param.get("doc", "")),
                    ]
                )
        blocks.append(
            f"{title}\n" + table(["name", "parameter = default", "description"], rows, "  ")
        )
    return "\n\n".join(blocks)


def _count_cpus(machine: dict[str, Any]) -> int | str:
    cpus = machine.get("cpus")
    if cpus:
        return len(cpus)
    clusters = machine.get("clusters") or []
    if clusters:
        return sum(
            int(c.get("count", 1)) * int(c.get("cores", 1)) * int(c.get("smt", 1)) for c in clusters
        )
    return "?"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text and text.strip() else ""


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "scenario"


if __name__ == "__main__":
    sys.exit(main())
