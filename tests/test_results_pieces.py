"""Long result tables cross from the core in pieces, converted one by one so
that Ctrl-C is answered between them; the result is the same as converting
the whole document at once."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import hetsched
from hetsched import results as R

SCN = """
duration_s = 0.02
machine.preset = "big-little-4+4"
[[workload.programs]]
name = "many"
kind = "parallel"
threads = 9000
work_ms = 1
[[workload.programs]]
name = "ticks"
kind = "periodic"
threads = 3
period_ms = 1.0
wcet_ms = 0.3
"""


@pytest.fixture(scope="module")
def raw() -> str:
    return hetsched.run(hetsched.loads(SCN)).raw_json


def test_long_tables_come_in_pieces_that_read_as_one_document(raw: str) -> None:
    # 9003 task rows: three pieces of at most 4096, each on a line of its own.
    assert raw.count("\n") == 4
    whole = json.loads(raw)  # still one valid JSON document
    assert len(whole["tasks"]) == 9003
    assert R._parse_results(raw) == whole
    res = hetsched.Results(raw)
    assert len(res.tasks) == 9003 and res.summary == whole["summary"]


def test_frames_built_in_pieces_equal_one_conversion(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = json.loads(raw)["tasks"]
    # Rows of different kinds (finished, periodic, never woken) in each piece.
    mixed = rows[:5] + rows[-3:] + rows[5:700]
    once = pd.DataFrame.from_records(mixed)
    monkeypatch.setattr(R, "FRAME_ROWS", 4)
    pd.testing.assert_frame_equal(R._frame(mixed), once)


def test_ctrl_c_between_pieces_keeps_the_small_part_marked_partial(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = json.loads

    def interrupted_on_the_second_piece(text: str, *a: object, **k: object) -> object:
        calls.append(len(text))
        if len(calls) == 3:  # the skeleton, the first piece, then Ctrl-C
            raise KeyboardInterrupt
        return real(text, *a, **k)

    monkeypatch.setattr(R.json, "loads", interrupted_on_the_second_piece)
    with pytest.raises(R.ConversionInterrupted) as info:
        R._parse_results(raw)
    doc = info.value.document
    monkeypatch.setattr(R.json, "loads", real)
    assert doc["summary"]["partial"] is True
    assert doc["tasks"] == [] and doc["omitted"] == {"tasks": None}
    assert len(doc["cpus"]) == 8 and doc["scenario"]["duration_s"] == 0.02
    assert any("tasks table(s) are left out" in w for w in doc["warnings"])
    res = R.Results._from_document(doc)
    assert res.summary["omitted"] == {"tasks": None} and res.tasks.empty
