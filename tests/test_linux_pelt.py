"""``hetsched linux validate-sim --suite pelt``: the model's load tracking
against the kernel's, from ``/proc/PID/sched`` as recorded on our 6.18
machine (``data/linux-pelt/pelt-6.18.json``)."""

from __future__ import annotations

import json

import pytest

from hetsched.cli import main
from hetsched.linux import LinuxError, pelt

RECORDED = pelt.DATA_FILE.exists()

SCHED_TEXT = """cat (24449, #threads: 1)
-------------------------------------------------------------------
se.exec_start                                :      37149777.988146
se.avg.util_sum                              :             11430912
se.avg.load_avg                              :                 1024
se.avg.runnable_avg                          :                  250
se.avg.util_avg                              :                  244
se.avg.last_update_time                      :       37149777987584
se.avg.util_est                              :                    0
policy                                       :                    0
"""


def test_parse_sched_reads_the_load_tracking_fields() -> None:
    assert pelt.parse_sched(SCHED_TEXT) == {
        "util_avg": 244,
        "runnable_avg": 250,
        "util_est": 0,
        "last_update_ns": 37149777987584,
    }
    with pytest.raises(LinuxError, match=r"se\.avg\.util_est"):
        pelt.parse_sched(SCHED_TEXT.replace("se.avg.util_est", "se.avg.other"))


def test_bursts_split_at_sleeps_and_find_the_ticks() -> None:
    # 20 ms every 100 ms: updates at the wake-up, ticks 1.8 ms and 5.8 ms
    # later, the dequeue at 20 ms; util_est seen last in each burst.
    samples = []
    for k in range(10):
        t0 = k * 100_000_000
        samples += [
            [t0, 76, 368, 76],
            [t0 + 1_800_000, 111, 368, 111],
            [t0 + 5_800_000, 183, 368, 183],
            [t0 + 20_000_000, 397 + k % 2, 360 + k, 397],
        ]
    rec = {"run_us": 20_000, "period_us": 100_000, "copies": 1, "samples": [samples]}
    b = pelt.bursts(rec)
    # The second half, without the last burst: bursts 5 to 8.
    assert b.util == [398, 397, 398, 397]
    assert b.est == [365, 366, 367, 368]
    assert b.runnable == [397] * 4
    # Releases: each dequeue (at 20 ms) less the 20 ms of CPU time.
    assert b.release_ns == [k * 100_000_000 for k in range(5, 9)]
    # The wake-up (at the dequeue less 20 ms) is not a tick.
    assert b.tick_ns == [
        t for k in range(5, 9) for t in (k * 10**8 + 1_800_000, k * 10**8 + 5_800_000)
    ]
    # Ticks 1.8 ms after the release: start the simulated task 2.2 ms
    # before a tick of its grid.
    assert pelt.start_offset_ms([b]) == pytest.approx(2.2)
    with pytest.raises(LinuxError, match="bursts sampled"):
        pelt.bursts({**rec, "samples": [samples[:12]]})


def test_simulated_task_reports_util_avg_and_util_est() -> None:
    # 20 ms every 100 ms, in steady state: the kernel's integer PELT gives
    # 396 at the dequeue (1024 · (1 − y^19.07) / (1 − y^95.37)); with the
    # 6.18 order util_est takes the last tick's value, 16 ms into the burst
    # when the ticks fall on the releases.
    [(u, e, r)] = pelt.simulate(20_000, 100_000)
    assert u == 396
    assert e == 351
    assert r == u  # alone on its CPU: runnable only while running
    # Two released together share the CPU: each waits, runnable > util.
    pair = pelt.simulate(20_000, 100_000, copies=2)
    assert len(pair) == 2
    assert all(r > u + 100 for u, _, r in pair), pair


@pytest.mark.skipif(not RECORDED, reason="no recording in data/linux-pelt")
def test_suite_from_the_recording(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["linux", "validate-sim", "--suite", "pelt", "--recorded", str(pelt.DATA_FILE)]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 * len(pelt.CASES)
    verdicts = [r["verdict"] for r in rows]
    assert verdicts.count("within") >= 11, rows
    # The kernel's numbers, read back: 20 ms every 100 ms leaves util_avg
    # at 397 (a 32 ms half-life in continuous time would give 407).
    first = next(r for r in rows if r["case"] == "20 ms every 100 ms")
    assert first["real"] == 397
    assert main(argv) == 0
    assert "within" in capsys.readouterr().out


def test_a_recording_without_a_case_is_an_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "rec.json"
    f.write_text(json.dumps({"cases": []}))
    with pytest.raises(LinuxError, match="no recording of case"):
        pelt.run_suite(recorded=f)
