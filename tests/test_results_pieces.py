"""Long result tables cross from the core in pieces, converted one by one so
that Ctrl-C is answered between them; the result is the same as converting
the whole document at once. The tasks and programs tables stay text until
they are first read."""

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
    # 9003 task rows: three pieces of at most 4096, each on a line of its own
    # (4 newlines); the short programs table is one piece on its own line (2).
    assert raw.count("\n") == 6
    whole = json.loads(raw)  # still one valid JSON document
    assert len(whole["tasks"]) == 9003
    doc = R._parse_results(raw)
    # The long tasks table is located, not parsed, until it is read.
    assert isinstance(doc["tasks"], R._Pieces) and len(doc["tasks"].spans) == 3
    assert isinstance(doc["programs"], R._Pieces) and len(doc["programs"].spans) == 1
    doc["tasks"] = doc["tasks"].rows()
    doc["programs"] = doc["programs"].rows()
    assert doc == whole
    res = hetsched.Results(raw)
    assert isinstance(res._records["tasks"], R._Pieces)
    assert len(res.tasks) == 9003 and res.summary == whole["summary"]
    assert res._records["tasks"] == whole["tasks"]


def test_the_core_hands_the_text_over_as_bytes_read_like_the_text(raw: str) -> None:
    # `hetsched.run` keeps the core's UTF-8 bytes; `raw_json` decodes them.
    res = hetsched.run(hetsched.loads(SCN))
    assert isinstance(res._raw, bytes)
    assert isinstance(res.raw_json, str) and res.raw_json == res._raw.decode("utf-8")
    # Bytes and text give the same document, long table in pieces included.
    from_bytes = R._parse_results(raw.encode("utf-8"))
    from_text = R._parse_results(raw)
    assert isinstance(from_bytes["tasks"], R._Pieces)
    assert from_bytes["tasks"].spans == from_text["tasks"].spans
    for name in R.LAZY_TABLES:
        from_bytes[name] = from_bytes[name].rows()
        from_text[name] = from_text[name].rows()
    assert from_bytes == from_text
    a, b = hetsched.Results(raw.encode("utf-8")), hetsched.Results(raw)
    assert a.summary == b.summary and a.raw_json == b.raw_json
    pd.testing.assert_frame_equal(a.tasks, b.tasks)
    pd.testing.assert_frame_equal(a.programs, b.programs)
    # A short document (no pieces) reads the same either way too.
    small = json.dumps({"summary": {"events": 3}, "tasks": []})
    assert hetsched.Results(small.encode()).summary == {"events": 3}


def test_frames_built_in_pieces_equal_one_conversion(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = json.loads(raw)["tasks"]
    # Rows of different kinds (finished, periodic, never woken) in each piece.
    mixed = rows[:5] + rows[-3:] + rows[5:700]
    once = pd.DataFrame.from_records(mixed)
    monkeypatch.setattr(R, "FRAME_ROWS", 4)
    pd.testing.assert_frame_equal(R._frame(mixed), once)


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    """Ctrl-C at the ``call``-th ``json.loads`` of the results module."""
    calls = []
    real = json.loads

    def interrupted(text: str, *a: object, **k: object) -> object:
        calls.append(len(text))
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(text, *a, **k)

    monkeypatch.setattr(R.json, "loads", interrupted)


def test_ctrl_c_between_trace_pieces_keeps_the_rest_marked_partial(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    traced = hetsched.run(hetsched.loads(SCN), trace=True).raw_json
    whole = json.loads(traced)
    assert len(whole["trace"]) > 2 * 4096
    _interrupt_at(monkeypatch, 3)  # the skeleton, the first trace piece, then Ctrl-C
    with pytest.raises(R.ConversionInterrupted) as info:
        R._parse_results(traced)
    doc = info.value.document
    monkeypatch.undo()
    assert doc["summary"]["partial"] is True
    assert doc["trace"] == [] and doc["omitted"] == {"trace": None}
    assert len(doc["cpus"]) == 8 and doc["scenario"]["duration_s"] == 0.02
    assert any("trace table(s) are left out" in w for w in doc["warnings"])
    # The tasks table, still text, is kept whole.
    res = R.Results._from_document(doc)
    assert res.summary["omitted"] == {"trace": None} and res.trace == []
    assert len(res.tasks) == 9003
    assert json.loads(res.raw_json)["tasks"] == whole["tasks"]


def test_ctrl_c_while_a_long_table_is_first_read_leaves_it_to_read_again(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = hetsched.Results(raw)
    _interrupt_at(monkeypatch, 2)  # the first piece, then Ctrl-C
    with pytest.raises(KeyboardInterrupt):
        _ = res.tasks
    monkeypatch.undo()
    assert isinstance(res._records["tasks"], R._Pieces)
    assert len(res.tasks) == 9003
