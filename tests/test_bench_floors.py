"""``bench/floors.py``: the per-part floors of the standard scenario.

The parsing and grouping are checked on made-up listings; the floor binary
itself is built and checked to simulate the same run as the engine (the
floor is only a floor if it does the engine's work)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import floors  # noqa: E402  (bench/floors.py)

LISTING = """\
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
1,000,000 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                   file:function
--------------------------------------------------------------------------------
400,000 (40.00%)  /src/sim/mod.rs:hetsched_core::sim::Engine::sync [/bin/engine]
100,000 (10.00%)  /rustc/abc/library/core/src/slice/mod.rs:hetsched_core::sim::Engine::sync
250,000 (25.00%)  /src/policy/cfs.rs:<hetsched_core::policy::cfs::Cfs as hetsched_core::policy::Scheduler>::enqueue [/bin/engine]
200,000 (20.00%)  /src/sim/queue.rs:hetsched_core::sim::queue::EventQueue<E>::open_bucket [/bin/engine]
 50,000 ( 5.00%)  ???:_int_malloc [/usr/lib/libc.so.6]
"""  # noqa: E501  (callgrind's lines are as long as they are)


def test_a_functions_count_is_summed_over_the_files_its_code_came_from() -> None:
    counts = floors.parse_annotate(LISTING)
    assert counts["hetsched_core::sim::Engine::sync"] == 500_000
    assert counts["_int_malloc"] == 50_000
    assert "PROGRAM TOTALS" not in " ".join(counts)
    assert sum(counts.values()) == 1_000_000


def test_functions_go_to_their_part_and_the_rest_to_other() -> None:
    parts = floors.grouped(floors.parse_annotate(LISTING), floors.ENGINE_PARTS)
    assert parts["CPU accounting and state"] == 500_000
    assert parts["policy (`cfs`)"] == 250_000
    assert parts["event queue"] == 200_000
    assert parts[floors.OTHER] == 50_000


def test_the_floors_functions_fall_into_the_same_parts() -> None:
    names = Counter(
        {
            "floors::acct_sync": 1,
            "floors::cfs_enqueue_wakeup": 2,
            "floors::main": 4,
            "floors::q_push": 8,
            "hetsched_core::sim::queue::EventQueue<E>::open_bucket": 16,
            "floors::program_next": 32,
            "__memcpy_avx_unaligned_erms": 64,
        }
    )
    parts = floors.grouped(names, floors.FLOOR_PARTS)
    assert parts == {
        "CPU accounting and state": 1,
        "policy (`cfs`)": 2,
        "event loop and dispatch": 4,
        "event queue": 24,
        "thread programs": 32,
        floors.OTHER: 64,
    }


def test_per_part_costs_are_differences_over_the_difference_of_events() -> None:
    short = Counter({"floors::acct_sync": 1_000, "floors::main": 5_000})
    long = Counter({"floors::acct_sync": 3_000, "floors::main": 9_000})
    res = floors.per_part([(short, 100), (long, 300)], floors.FLOOR_PARTS)
    assert res["events"] == 200
    assert res["per_event"]["CPU accounting and state"] == 10
    assert res["per_event"]["event loop and dispatch"] == 20
    assert res["total"] == 30


def test_a_floor_of_another_run_is_refused() -> None:
    floors.check_same_run(1_000_000, 1_009_000)
    with pytest.raises(RuntimeError, match="not the same run"):
        floors.check_same_run(1_000_000, 1_011_000)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the floor")
def test_the_floor_simulates_the_engines_run() -> None:
    """Same events, context switches and migrations as the engine on the
    standard scenario (3 simulated seconds), within a percent or so: the
    floor's jitter draws come in another order, so the runs are alike, not
    equal."""
    import hetsched

    exe = floors.build_floors()
    out = subprocess.run([str(exe), "3"], capture_output=True, text=True, check=True).stdout
    floor = json.loads(out.strip().splitlines()[-1])
    engine = hetsched.run(ROOT / "bench" / "standard.toml", overrides={"duration_s": 3}).summary
    floors.check_same_run(engine["events"], floor["events"])
    switches = floor["completions"] + floor["wake_preempts"] + floor["tick_preempts"]
    assert switches == pytest.approx(engine["context_switches"], rel=0.01)
    assert floor["moved"] == pytest.approx(engine["migrations"], rel=0.15)
    # Every CPU busy the whole run, as in the engine's scenario (twice the demand).
    assert floor["busy_s"] == pytest.approx(64 * 3, rel=1e-6)


def _part_costs(total: float) -> dict[str, Any]:
    per = {p: total / len(floors.PARTS) for p in floors.PARTS}
    return {"events": 160_000, "per_event": per, "total": total}


def test_the_floors_table_is_generated_into_the_page_only_when_measured() -> None:
    import run as bench_run

    results: dict[str, Any] = {
        "date": "2026-11-29",
        "machine": {"cores": 2, "python": "3.11.7", "load_before": 1.0, "load_after": 1.0},
        "standard": {
            "scheduler": "cfs",
            "events_per_cpu_sec": {
                "median": 9e6,
                "min": 8e6,
                "max": 1e7,
                "n": 5,
                "events": 4_799_239,
            },
        },
    }
    assert "floors" not in bench_run.doc_sections(results)
    results["floors"] = {"error": "valgrind is not installed"}
    assert "floors" not in bench_run.doc_sections(results)
    results["floors"] = {
        "engine": _part_costs(1610.0),
        "floor_wheel": _part_costs(560.0),
        "floor_heap": _part_costs(840.0),
    }
    sec = bench_run.doc_sections(results)["floors"]
    assert "| **all** | **1610** | **560** | **840** | **1050** |" in sec
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "| **all** | **1610** |" in bench_run.replace_sections(page, {"floors": sec})
