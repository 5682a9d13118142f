"""Ctrl-C stops every run promptly, even when simulated time barely moves,
and a run stuck at one instant stops with an error naming its program."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hetsched

ROOT = Path(__file__).resolve().parents[1]

# 64 threads of a 10 µs periodic job for ten million simulated seconds: the
# run takes hours, and 1 % of its simulated time is far more than a second.
PERIODIC = """
duration_s = 10000000.0
machine.preset = "big-little-4+4"
[[workload.programs]]
name = "tick"
kind = "periodic"
threads = 64
period_ms = 0.01
wcet_ms = 0.001
"""

BARRIER_LOOP = """
duration_s = 1.0
machine.preset = "big-little-4+4"
[[workload.programs]]
name = "spin"
kind = "phases"
threads = 2
loops = 1000000000
phases = [{ barrier = true }]
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python")
    return env


#: Printed by the child once its imports are done, so that the signal lands
#: in the run and not in a slow import on a loaded machine.
READY = "ready"


def _interrupt(args: list[str], delay_s: float = 1.0) -> tuple[int, float, str]:
    """Start ``args``, wait for it to print ``READY`` on stderr, send SIGINT
    ``delay_s`` later; return (exit code, seconds from the signal to the
    exit, stderr after ``READY``)."""
    proc = subprocess.Popen(
        args,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # SIGINT handled normally even when the test runner ignores it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert first.strip() == READY, first + proc.stderr.read()
    time.sleep(delay_s)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the run ignored SIGINT for 10 s")
    return proc.returncode, time.monotonic() - sent, err


def _cli(argv: list[str]) -> list[str]:
    """A Python command line that imports the CLI and what a run needs,
    says ``READY`` and runs ``hetsched ARGV``."""
    prog = (
        "import sys, pandas, hetsched.cli\n"
        f"print({READY!r}, file=sys.stderr, flush=True)\n"
        f"sys.exit(hetsched.cli.main({argv!r}))\n"
    )
    return [sys.executable, "-c", prog]


def test_cli_run_stops_on_sigint_within_a_second_and_writes_partial_results(
    tmp_path: Path,
) -> None:
    scn = tmp_path / "periodic.toml"
    scn.write_text(PERIODIC)
    out = tmp_path / "out"
    code, after, err = _interrupt(_cli(["run", str(scn), "--out", str(out)]))
    assert code == 130, err
    assert after < 3.0
    assert "interrupted" in err and "partial results written" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"] is True
    at = summary["interrupted_at_s"]
    assert 0.0 < at < 1e7
    assert summary["sim_end_s"] == at
    assert summary["events"] > 0
    assert any("interrupted" in w and "partial" in w for w in summary["warnings"])
    # The other files of a run are there too, and belong to this run.
    assert (out / "tasks.csv").exists() and (out / "manifest.json").exists()


def test_python_run_raises_keyboard_interrupt_with_the_partial_results(tmp_path: Path) -> None:
    scn = tmp_path / "periodic.toml"
    scn.write_text(PERIODIC)
    prog = (
        "import json, sys, pandas, hetsched\n"
        f"print({READY!r}, file=sys.stderr, flush=True)\n"
        "try:\n"
        f"    hetsched.run({str(scn)!r})\n"
        "except KeyboardInterrupt as e:\n"
        "    print('message:', e, file=sys.stderr)\n"
        "    s = e.results.summary\n"
        "    print(json.dumps([s['partial'], s['interrupted_at_s'], s['sim_end_s'],\n"
        "                      len(e.results.tasks)]), file=sys.stderr)\n"
        "    sys.exit(130)\n"
    )
    code, after, err = _interrupt([sys.executable, "-c", prog])
    assert code == 130, err
    assert after < 3.0
    assert "partial" in err and "simulated" in err
    partial, at, end, ntasks = json.loads(err.strip().splitlines()[-1])
    assert partial is True
    assert 0.0 < at == end < 1e7
    assert ntasks == 64


def test_a_progress_callback_that_raises_stops_the_run_with_an_error() -> None:
    def boom(now_s: float, end_s: float) -> None:
        raise ValueError("no more")

    with pytest.raises(hetsched.HetschedError, match=r"progress callback raised.*no more"):
        hetsched.run(hetsched.loads(PERIODIC.replace("10000000.0", "1.0")), progress=boom)


def test_barrier_only_loop_stops_with_an_error_naming_the_program() -> None:
    start = time.monotonic()
    with pytest.raises(hetsched.SimulationError, match=r'stopped advancing.*"spin"'):
        hetsched.run(hetsched.loads(BARRIER_LOOP))
    assert time.monotonic() - start < 5.0
