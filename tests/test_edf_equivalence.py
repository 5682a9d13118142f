"""``global-edf`` keeps its schedule across its rewrite on sched_ext's
dispatch queues: on the SimSo comparison task sets (bench/compare_simso.py,
its four rows, with periods in microseconds and in whole milliseconds, seed
1) every task completes the same jobs, misses the same deadlines and has the
same maximum response time as the implementation with its private
``reserved[]`` array, whose results tests/data/edf/simso_sets_before_dsq.json
holds (recorded with that implementation: per task ``[jobs, misses,
max_response_ms]`` in program order)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import hetsched

ROOT = Path(__file__).resolve().parents[1]
BEFORE = json.loads((ROOT / "tests" / "data" / "edf" / "simso_sets_before_dsq.json").read_text())

sys.path.insert(0, str(ROOT / "bench"))
from compare_simso import ROWS, scenario, task_set  # noqa: E402


@pytest.mark.parametrize("integer", [False, True], ids=["us-periods", "ms-periods"])
@pytest.mark.parametrize("row", ROWS, ids=[f"{n}x{m}" for n, m, _ in ROWS])
def test_global_edf_schedule_unchanged(row: tuple[int, int, float], integer: bool) -> None:
    n, m, t_s = row
    key = f"{n}x{m}x{t_s}" + ("-integer" if integer else "")
    scn = scenario(task_set(n, m, 1, integer), m, t_s)
    res = hetsched.run(hetsched.loads(json.dumps(scn), fmt="json"), check=True)
    df = res.tasks.sort_values("program_id")
    got = [[int(r.jobs), int(r.deadline_misses), float(r.max_response_ms)] for r in df.itertuples()]
    want = BEFORE[key]
    assert len(got) == len(want) == n
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g[:2] == w[:2], f"{key} task {i}: jobs/misses {g[:2]} != {w[:2]}"
        assert g[2] == pytest.approx(w[2], abs=1e-6), f"{key} task {i}: max response"
    assert res.summary["idle_while_runnable_s"] == pytest.approx(0.0, abs=1e-9)
