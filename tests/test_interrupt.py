"""Ctrl-C stops every run promptly, even when simulated time barely moves,
and a run stuck at one instant stops with an error naming its program."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import hetsched
from childenv import child_env

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


#: Printed by the child once its imports are done, so that the signal lands
#: in the run and not in a slow import on a loaded machine.
READY = "ready"


def _start(args: list[str]) -> subprocess.Popen[str]:
    """Start ``args`` with its stderr piped (text) and its stdout dropped."""
    return subprocess.Popen(
        args,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # SIGINT handled normally even when the test runner ignores it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _interrupt(args: list[str], delay_s: float = 1.0) -> tuple[int, float, str]:
    """Start ``args``, wait for it to print ``READY`` on stderr, send SIGINT
    ``delay_s`` later; return (exit code, seconds from the signal to the
    exit, stderr after ``READY``)."""
    proc = _start(args)
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


# -- Ctrl-C in every stage of a large run: building, converting, writing ------

#: A run of many threads whose simulated time is short: its cost is in
#: building the threads and in converting and writing their rows.
MANY = """
duration_s = 0.001
machine.preset = "big-little-4+4"
[[workload.programs]]
name = "many"
kind = "parallel"
threads = {threads}
work_ms = 1000
"""


def _cpu_s(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far, s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupt_at_line(args: list[str], line: str) -> tuple[int, float, float, str]:
    """Start ``args``, send SIGINT as soon as a stderr line contains ``line``
    (the process is then in the stage that line announces); return (exit
    code, wall seconds and CPU seconds of the process from the signal to its
    exit, all of stderr). The CPU time is what the process did after the
    signal whatever else loads the machine; the wall time grows with the load."""
    proc = _start(args)
    assert proc.stderr is not None
    seen: list[str] = []
    for text in proc.stderr:
        seen.append(text)
        if line in text:
            break
    else:
        proc.wait()
        pytest.fail(f"no stderr line with {line!r}: {''.join(seen)}")
    cpu_at = _cpu_s(proc.pid)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    watchdog = threading.Timer(30, proc.kill)
    watchdog.start()
    try:
        rest = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        watchdog.cancel()
        proc.stderr.close()
    wall = time.monotonic() - sent
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    assert code != -signal.SIGKILL, "the run ignored SIGINT for 30 s"
    cpu = usage.ru_utime + usage.ru_stime - cpu_at
    return code, wall, cpu, "".join(seen) + rest


def _run_many(tmp_path: Path, threads: int) -> tuple[list[str], Path]:
    scn = tmp_path / "many.toml"
    scn.write_text(MANY.format(threads=threads))
    out = tmp_path / "out"
    return _cli(["run", str(scn), "--out", str(out)]), out


#: CPU seconds a run may spend between Ctrl-C and its exit: the promise is
#: one second of wall time on a machine that is not overloaded.
PROMPT_CPU_S = 1.0
#: Wall seconds the tests accept, for a test machine shared by many jobs.
PROMPT_WALL_S = 10.0


def test_sigint_while_building_a_million_threads(tmp_path: Path) -> None:
    args, out = _run_many(tmp_path, 1_000_000)
    code, wall, cpu, err = _interrupt_at_line(args, "building 1,000,000 threads")
    assert code == 130, err
    assert cpu < PROMPT_CPU_S and wall < PROMPT_WALL_S, (cpu, wall, err)
    # Stopped before the simulation started: nothing to write, and it says so.
    assert "before the simulation started" in err and "nothing written" in err
    assert not out.exists()


def test_sigint_while_loading_two_million_threads() -> None:
    # Loading validates the scenario by building its threads (about 0.6
    # CPU-seconds per million here): the build checks for signals every few
    # thousand threads, so the KeyboardInterrupt comes from inside loads.
    prog = (
        "import sys, hetsched\n"
        f"text = {MANY.format(threads=2_000_000)!r}\n"
        "try:\n"
        "    print('loading', file=sys.stderr, flush=True)\n"
        "    hetsched.loads(text)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted while loading', file=sys.stderr)\n"
        "    sys.exit(130)\n"
        "print('loaded', file=sys.stderr)\n"
    )
    code, wall, cpu, err = _interrupt_at_line([sys.executable, "-c", prog], "loading")
    assert code == 130 and "interrupted while loading" in err, err
    assert cpu < PROMPT_CPU_S and wall < PROMPT_WALL_S, (cpu, wall, err)


def test_sigint_while_converting_the_results(tmp_path: Path) -> None:
    args, out = _run_many(tmp_path, 60_000)
    code, wall, cpu, err = _interrupt_at_line(args, "converting the results")
    assert code == 130, err
    assert cpu < PROMPT_CPU_S and wall < PROMPT_WALL_S, (cpu, wall, err)
    assert "interrupted while the results were converted" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"] is True and summary["interrupted_at_s"] is None
    assert "tasks" in summary["omitted"] and not (out / "tasks.csv").exists()
    # The run itself was complete: its summary is the whole run's.
    assert summary["sim_end_s"] == pytest.approx(0.001)
    assert hetsched.Results.load(out).summary["partial"] is True


def test_sigint_while_writing_the_results(tmp_path: Path) -> None:
    args, out = _run_many(tmp_path, 60_000)
    # Announced once summary.json is written: the signal lands in the save.
    code, wall, cpu, err = _interrupt_at_line(args, "tasks.csv")
    assert code == 130, err
    assert cpu < PROMPT_CPU_S and wall < PROMPT_WALL_S, (cpu, wall, err)
    assert "interrupted while the results were written" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"] is True
    note = [w for w in summary["warnings"] if "interrupted while the results were written" in w]
    assert note and "tasks.csv" in note[0]
    # What was written is consistent: the manifest vouches for each file.
    manifest = hetsched.results.verify_run_folder(out)
    assert manifest is not None and "summary.json" in manifest["files"]
    assert "tasks.csv" not in manifest["files"] and not (out / "tasks.csv").exists()


# -- KeyboardInterrupt raised inside a Python policy: a Ctrl-C, not an error --

POLICY_MODULE = '''
from hetsched.examples_policies import RoundRobin


class StopsAfter(RoundRobin):
    """Round robin, with a Ctrl-C landing in select_cpu's ``calls``-th call."""

    def __init__(self, calls=50):
        super().__init__()
        self.calls = int(calls)

    def select_cpu(self, cx, task, prev_cpu, flags):
        self.calls -= 1
        if self.calls == 0:
            raise KeyboardInterrupt
        return super().select_cpu(cx, task, prev_cpu, flags)
'''

POLICY_SCN = """
duration_s = 60.0
machine.preset = "big-little-4+4"
scheduler = "python:ki_policy:StopsAfter"
[[workload.programs]]
name = "tick"
kind = "periodic"
threads = 8
period_ms = 1.0
wcet_ms = 0.2
"""


def test_keyboard_interrupt_in_a_policy_callback_keeps_partial_results(tmp_path: Path) -> None:
    (tmp_path / "ki_policy.py").write_text(POLICY_MODULE)
    sys.path.insert(0, str(tmp_path))
    try:
        from ki_policy import StopsAfter  # type: ignore[import-not-found]

        with pytest.raises(KeyboardInterrupt) as info:
            hetsched.run(hetsched.loads(POLICY_SCN), scheduler=StopsAfter())
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ki_policy", None)
    res = info.value.results  # type: ignore[attr-defined]
    assert res is not None and res.summary["partial"] is True
    at = res.summary["interrupted_at_s"]
    assert at is not None and 0.0 < at < 60.0
    assert len(res.tasks) == 8
    assert any("interrupted" in w and "partial" in w for w in res.warnings)


def test_cli_exits_130_when_a_policy_callback_raises_keyboard_interrupt(tmp_path: Path) -> None:
    (tmp_path / "ki_policy.py").write_text(POLICY_MODULE)
    scn = tmp_path / "ki.toml"
    scn.write_text(POLICY_SCN)
    out = tmp_path / "out"
    env = child_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "hetsched", "run", str(scn), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130, done.stderr
    assert "partial results written" in done.stderr
    assert "PolicyError" not in done.stderr and "Traceback" not in done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"] is True


def test_sigint_in_a_python_policy_run_keeps_partial_results(tmp_path: Path) -> None:
    # A Python policy spends most of the run in Python: the signal lands in
    # a callback and is raised there.
    (tmp_path / "ki_policy.py").write_text(POLICY_MODULE)
    scn = tmp_path / "slow.toml"
    scn.write_text(
        POLICY_SCN.replace("60.0", "100000.0").replace("StopsAfter", "StopsAfter[calls=1e12]")
    )
    out = tmp_path / "out"
    prog = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "import pandas, hetsched.cli\n"
        f"print({READY!r}, file=sys.stderr, flush=True)\n"
        f"sys.exit(hetsched.cli.main({['run', str(scn), '--out', str(out)]!r}))\n"
    )
    code, after, err = _interrupt([sys.executable, "-c", prog])
    assert code == 130, err
    assert after < 3.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"] is True and 0.0 < summary["interrupted_at_s"] < 100000.0
