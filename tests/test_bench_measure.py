"""The benchmark's arithmetic, checked with made-up measurements (no timing
is asserted): median and spread, instructions per event by difference over
difference, events per CPU-second, the sweep speed-up summary and the
rewriting of docs/performance.md's generated sections."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import pytest

from hetsched import sweeps

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import measure
import run as bench_run
import sweep_speedup


def test_spread_is_median_extremes_and_quartiles() -> None:
    s = measure.spread([5.0, 1.0, 3.0, 2.0, 4.0])
    assert s == {"median": 3.0, "min": 1.0, "max": 5.0, "q1": 2.0, "q3": 4.0, "n": 5}
    even = measure.spread([1, 2, 3, 10])
    assert even["median"] == 2.5 and even["min"] == 1 and even["max"] == 10
    assert measure.spread([7.0]) == {
        "median": 7.0,
        "min": 7.0,
        "max": 7.0,
        "q1": 7.0,
        "q3": 7.0,
        "n": 1,
    }
    with pytest.raises(ValueError, match="no values"):
        measure.spread([])


def test_difference_over_difference_cancels_start_up() -> None:
    startup, per_event = 750_000_000, 1_577
    short = (startup + per_event * 80_000, 80_000)
    long = (startup + per_event * 240_000, 240_000)
    assert measure.difference_ratio(short, long) == pytest.approx(per_event)
    # One run alone would include the start-up: the ratio is not I/E.
    assert short[0] / short[1] > 5 * per_event
    with pytest.raises(ValueError, match="more events"):
        measure.difference_ratio(long, short)
    with pytest.raises(ValueError, match="fewer instructions"):
        measure.difference_ratio((10, 1), (5, 2))


def test_instructions_per_event_runs_two_lengths() -> None:
    seen: list[float] = []

    def fake_count(scn: dict[str, Any]) -> tuple[int, int]:
        seen.append(scn["duration_s"])
        events = int(scn["duration_s"] * 50_000)
        return 3_000_000 + 900 * events + 40 * 128, events

    out = measure.instructions_per_event({"name": "x", "duration_s": 60}, 1.0, 3.0, fake_count)
    assert seen == [1.0, 3.0]
    assert out["instructions_per_event"] == pytest.approx(900)
    assert out["short"]["events"] == 50_000 and out["long"]["events"] == 150_000
    with pytest.raises(ValueError, match="short < long"):
        measure.instructions_per_event({}, 3.0, 1.0, fake_count)


def test_events_per_cpu_second_from_samples_and_a_fake_clock() -> None:
    ticks = itertools.count(0.0, 0.5)  # each reading of the clock is 0.5 s later
    events, cpu = measure.cpu_timed(lambda: 1_000, clock=lambda: next(ticks))
    assert (events, cpu) == (1_000, 0.5)
    r = measure.events_per_cpu_sec([(1_000, 0.5), (1_000, 0.25), (1_000, 1.0)])
    assert r["median"] == 2_000 and r["min"] == 1_000 and r["max"] == 4_000
    assert r["events"] == 1_000 and r["cpu_s"] == [0.5, 0.25, 1.0]
    with pytest.raises(ValueError, match="CPU seconds"):
        measure.events_per_cpu_sec([(1_000, 0.0)])


def test_sweep_speedup_summary() -> None:
    def sample(workers: int, wall: float, cpu: float) -> dict[str, Any]:
        return {
            "workers": workers,
            "wall_s": wall,
            "cpu_s": cpu,
            "runs": 402,
            "load_before": 0.5,
            "load_after": 0.7,
        }

    s = sweep_speedup.summarize(
        [sample(1, 10.0, 9.0), sample(2, 6.0, 10.0), sample(1, 9.0, 8.8), sample(2, 5.0, 10.2)]
    )
    assert s["wall_s_1"] == 9.0 and s["wall_s_2"] == 5.0
    assert s["speedup"] == pytest.approx(1.8)
    assert s["cpu_bound_speedup"] == pytest.approx(8.8 / 5.0)
    assert s["runs"] == 402 and len(s["samples"]) == 4
    with pytest.raises(ValueError, match="1 and 2 workers"):
        sweep_speedup.summarize([sample(1, 1.0, 1.0)])


def test_sweep_folder_filesystem_is_the_longest_mount_above_it() -> None:
    mounts = (
        "/dev/vda / ext4 rw,relatime 0 0\n"
        "tmpfs /dev/shm tmpfs rw 0 0\n"
        "tmpfs /dev/shm2 tmpfs rw 0 0\n"
        "none /mnt/my\\040disk xfs rw 0 0\n"
    )
    fs = sweep_speedup.filesystem
    assert fs(Path("/dev/shm/hetsched-sweep-bench-x"), mounts) == "tmpfs"
    assert fs(Path("/dev/shm"), mounts) == "tmpfs"
    # A name that only starts like a mount point is not inside it.
    assert fs(Path("/dev/shmx/y"), mounts) == "ext4"
    assert fs(Path("/tmp/a"), mounts) == "ext4"
    assert fs(Path("/mnt/my disk/z"), mounts) == "xfs"
    assert fs(Path("/tmp/a"), "") == "unknown"


def test_sweep_bench_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a folder"):
        sweep_speedup.measure(repeats=1, startups=0, where=tmp_path / "missing")
    with pytest.raises(SystemExit):
        sweep_speedup.main(["--dir", str(tmp_path / "missing")])


def test_the_lengthened_demo_sweep_has_402_runs(tmp_path: Path) -> None:
    spec = sweeps.load_sweep(sweep_speedup.sweep_file(tmp_path))
    assert len(spec.points()) == 402
    assert spec.grid["seed"] == list(range(1, 68))


DOC = """# Performance

Text before.

<!-- bench:standard -->
old standard table
<!-- /bench:standard -->

## Growth (written by hand)

<!-- bench:scaling -->
old
scaling
<!-- /bench:scaling -->
Text after.
"""


def test_docs_sections_are_replaced_between_markers_only() -> None:
    out = bench_run.replace_sections(DOC, {"standard": "NEW A\n", "scaling": "NEW B"})
    assert "old" not in out
    assert "<!-- bench:standard -->\nNEW A\n<!-- /bench:standard -->" in out
    assert "<!-- bench:scaling -->\nNEW B\n<!-- /bench:scaling -->" in out
    for kept in ("Text before.", "## Growth (written by hand)", "Text after."):
        assert kept in out
    # Sections not asked for stay as they are.
    assert bench_run.replace_sections(DOC, {"standard": "X"}).count("old\nscaling") == 1
    with pytest.raises(ValueError, match="sweep"):
        bench_run.replace_sections(DOC, {"sweep": "X"})


def _rate(median: float) -> dict[str, Any]:
    return {
        "median": median,
        "min": median * 0.9,
        "max": median * 1.1,
        "q1": median,
        "q3": median,
        "n": 5,
        "events": 4_799_239,
        "cpu_s": [1.0] * 5,
    }


def test_doc_tables_show_each_measurement() -> None:
    results = {
        "date": "2026-11-25",
        "machine": {"cores": 2, "python": "3.11.7", "load_before": 1.0, "load_after": 2.0},
        "standard": {
            "scheduler": "cfs",
            "events_per_cpu_sec": _rate(5.0e6),
            "callgrind": {"instructions_per_event": 1577.4},
        },
        "standard_eevdf": {"scheduler": "eevdf", "events_per_cpu_sec": _rate(2.0e6)},
        "scaling": [
            {
                "policy": "cfs",
                "cpus": 8,
                "threads": 128,
                "sim_s": 52.1,
                "events_per_cpu_sec": _rate(3.3e6),
                "instructions_per_event": 2100.0,
            },
            {"policy": "eevdf", "cpus": 1024, "threads": 16384, "error": "MemoryError"},
        ],
    }
    sec = bench_run.doc_sections(results)
    assert (
        "| `bench/standard.toml` under `cfs` | 4 799 239 | 5.00 (4.50–5.50) | 1 577 |"
        in (sec["standard"])
    )
    assert "under `eevdf` | 4 799 239 | 2.00 (1.80–2.20) | — |" in sec["standard"]
    assert "| cfs | 8 | 128 | 52.1 | 3.30 (2.97–3.63) | 2 100 |" in sec["scaling"]
    assert "| eevdf | 1024 | 16384 | — | failed: MemoryError | — |" in sec["scaling"]
    assert sec["sweep"].startswith("Not measured")


def test_growth_is_called_when_its_module_exists_and_explained_when_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    monkeypatch.setattr(bench_run, "BENCH", tmp_path)
    assert bench_run.run_growth([]) == {
        "measured": False,
        "reason": "not asked for (--growth none)",
    }
    absent = bench_run.run_growth(["cfs"])
    assert absent == {"measured": False, "reason": "bench/growth.py is not in this tree"}

    (tmp_path / "growth.py").write_text("# stands for the real module\n")
    calls = []

    def fake_measure_growth(policies, small, large, progress=None):
        calls.append((list(policies), small, large))
        return {p: {"small": 1000.0, "large": 1500.0, "ratio": 1.5} for p in policies}

    fake = types.ModuleType("growth")
    fake.measure_growth = fake_measure_growth  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "growth", fake)
    monkeypatch.setattr(measure, "valgrind_missing", lambda: None)
    out = bench_run.run_growth(["cfs", "eevdf"])
    assert out["measured"] is True
    assert out["policies"]["eevdf"]["ratio"] == 1.5
    assert calls == [
        (
            ["cfs", "eevdf"],
            {"cpus": 8, "threads_per_cpu": 16},
            {"cpus": 1024, "threads_per_cpu": 16},
        )
    ]
    monkeypatch.setattr(measure, "valgrind_missing", lambda: "valgrind is not installed")
    assert bench_run.run_growth(["cfs"]) == {
        "measured": False,
        "reason": "valgrind is not installed",
    }


def test_a_child_runs_output_and_cpu_time_come_back_and_a_failure_says_so() -> None:
    out, cpu = measure.child_cpu_run([sys.executable, "-c", "print(sum(range(2_000_000)), 'done')"])
    assert out.split() == [str(sum(range(2_000_000))), "done"]
    assert cpu > 0
    with pytest.raises(RuntimeError, match="went wrong"):
        measure.child_cpu_run([sys.executable, "-c", "raise SystemExit('went wrong')"])
