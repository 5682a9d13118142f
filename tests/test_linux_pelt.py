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
se.avg.util_avg                              :                  244
se.avg.last_update_time                      :       37149777987584
se.avg.util_est                              :                    0
policy                                       :                    0
"""


def test_parse_sched_reads_the_load_tracking_fields() -> None:
    assert pelt.parse_sched(SCHED_TEXT) == {
        "util_avg": 244,
        "util_est": 0,
        "last_update_ns": 37149777987584,
    }
    with pytest.raises(LinuxError, match=r"se\.avg\.util_est"):
        pelt.parse_sched(SCHED_TEXT.replace("se.avg.util_est", "se.avg.other"))


def test_bursts_split_at_sleeps_and_find_the_first_tick() -> None:
    # 20 ms every 100 ms: updates at the wake-up, ticks 1.8 ms and 5.8 ms
    # later, the dequeue at 20 ms; util_est seen last in each burst.
    samples = []
    for k in range(10):
        t0 = k * 100_000_000
        samples += [
            [t0, 76, 368],
            [t0 + 1_800_000, 111, 368],
            [t0 + 5_800_000, 183, 368],
            [t0 + 20_000_000, 397 + k % 2, 360 + k],
        ]
    b = pelt.bursts({"run_us": 20_000, "period_us": 100_000, "samples": samples})
    # The second half, without the last burst: bursts 5 to 8.
    assert b.util == [398, 397, 398, 397]
    assert b.est == [365, 366, 367, 368]
    assert b.tick_after_wake_ns == [1_800_000] * 4
    with pytest.raises(LinuxError, match="bursts sampled"):
        pelt.bursts({"run_us": 20_000, "period_us": 100_000, "samples": samples[:12]})


def test_simulated_task_reports_util_avg_and_util_est() -> None:
    # 20 ms every 100 ms, in steady state: the kernel's integer PELT gives
    # 396 at the dequeue (1024 · (1 − y^19.07) / (1 − y^95.37)); with the
    # 6.18 order util_est takes the last tick's value, 16 ms into the burst
    # when the ticks fall on the releases.
    u, e = pelt.simulate(20_000, 100_000)
    assert u == 396
    assert e == 351


@pytest.mark.skipif(not RECORDED, reason="no recording in data/linux-pelt")
def test_suite_from_the_recording(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["linux", "validate-sim", "--suite", "pelt", "--recorded", str(pelt.DATA_FILE)]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 * len(pelt.CASES)
    verdicts = [r["verdict"] for r in rows]
    assert set(verdicts) <= {"within", "noise-limited"}, rows
    assert verdicts.count("within") >= 9, rows
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
