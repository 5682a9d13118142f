"""The real programs and ``hetsched linux calibrate`` (needs Linux and gcc)."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from hetsched import cli
from hetsched.linux import LinuxError, progs
from hetsched.linux.calibrate import calibrate

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("gcc") is None,
    reason="real programs need Linux and gcc",
)


def test_spin_reports_its_work_and_cpu_time() -> None:
    r = progs.run_json(["spin", "3"])
    assert r["program"] == "spin" and r["units"] == 3
    assert r["cpu_s"] > 0 and r["wall_s"] >= r["cpu_s"] * 0.5


def test_threads_queue_hands_out_every_item_once() -> None:
    r = progs.run_json(["threads", "queue", "2", "8", "8"])
    assert r["mode"] == "queue" and len(r["items"]) == 2 and sum(r["items"]) == 8
    b = progs.run_json(["threads", "barrier", "2", "4", "2"])
    assert b["items"] == [2, 2]


def test_phases_sleeps_between_computations() -> None:
    r = progs.run_json(["phases", "1", "30", "3"])
    # Three 30 ms sleeps: the program lasts at least 90 ms while using far
    # less CPU time than that.
    assert r["wall_s"] >= 0.09 and r["loops"] == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["spin", "-3"], "UNITS must be a whole number"),
        (["chase", "0", "10"], "WS_KB must be a whole number"),
        (["threads", "queue", "2", "4", "9"], "CHUNKS must be a whole number from 1 to 4"),
    ],
)
def test_programs_reject_bad_arguments(argv: list[str], message: str) -> None:
    with pytest.raises(LinuxError, match=message):
        progs.run_json(argv)


def test_unknown_program_is_named() -> None:
    with pytest.raises(LinuxError, match="unknown real program 'nope'"):
        progs.program_path("nope")


def test_calibration_separates_cache_from_memory() -> None:
    c = calibrate(units=4, ws_small_kb=16, ws_large_kb=32768, accesses_k=300, repeats=1)
    assert c.ms_per_unit > 0
    # A chase far beyond the caches waits on memory for most of its time.
    assert c.ns_per_access_large > 3 * c.ns_per_access_small
    assert 0.5 < c.mem_large < 1.0
    assert c.work_ms(10) == pytest.approx(10 * c.ms_per_unit)
    assert c.chase_mem(32768) == c.mem_large and c.chase_mem(16) == 0.0


def test_calibrate_command_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["linux", "calibrate", "--repeats", "1", "--units", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"ms_per_unit", "mem_large", "ns_per_access_large"} <= set(out)


def test_calibrate_rejects_zero_repeats(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["linux", "calibrate", "--repeats", "0"]) == 1
    assert "--repeats and --units must be ≥ 1" in capsys.readouterr().err
