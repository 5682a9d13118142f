"""A run's CSV files are written straight from the core's rows, without
pandas, byte for byte as pandas wrote them (``DataFrame.to_csv`` after
``_csv_ready``), so that a sweep worker need not import pandas."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import hetsched
from hetsched import results as R

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("tasks", "programs", "cpus", "vms", "reconfigs", "proxies")


def pandas_csv(path: Path, rows: list[dict[str, Any]], floats: tuple[str, ...] = ()) -> bytes:
    """What the pandas path writes for ``rows`` (as ``Results.tasks`` and ``save`` do)."""
    frame = R._frame(rows)
    for c in floats:
        if c in frame.columns:
            frame[c] = pd.to_numeric(frame[c], errors="coerce").astype(float)
    R._csv_ready(frame).to_csv(path, index=False)
    return path.read_bytes()


def fast_csv(path: Path, rows: list[dict[str, Any]], floats: tuple[str, ...] = ()) -> bytes:
    assert R._write_rows_csv(path, rows, floats), "the table was left to pandas"
    return path.read_bytes()


@pytest.mark.parametrize(
    "scenario",
    [
        "demo.toml",  # tasks with nested run_s_by_type, programs, CPUs
        "aash-aware-guest.toml",  # virtual machines: list cells, latencies all missing
        "hotplug-stop.toml",  # reconfiguration and proxy tables
        "chameleon-nodes.toml",  # reconfigurations, some still open (missing end_s)
        "conservative-bursty.toml",  # tasks, some unfinished (missing end_s)
    ],
)
def test_saved_csv_files_are_the_bytes_pandas_wrote(
    scenario: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = hetsched.run(hetsched.load(ROOT / "scenarios" / scenario), trace=True)
    by_pandas = hetsched.Results(res.raw_json)
    for name in TABLES:  # read as DataFrames: save writes those with pandas
        getattr(by_pandas, name)
    by_pandas.save(tmp_path / "pandas")

    def no_pandas(frame: object) -> object:
        raise AssertionError("a table of the core's rows went through pandas")

    monkeypatch.setattr(R, "_csv_ready", no_pandas)
    res.save(tmp_path / "rows")
    written = sorted(p.name for p in (tmp_path / "rows").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "pandas").iterdir())
    csvs = [n for n in written if n.endswith(".csv")]
    assert {"tasks.csv", "programs.csv", "cpus.csv"} <= set(csvs)
    for name in csvs:
        fast = (tmp_path / "rows" / name).read_bytes()
        assert fast == (tmp_path / "pandas" / name).read_bytes(), f"{scenario}: {name} differs"
    # The folder reads back as before.
    back = hetsched.Results.load(tmp_path / "rows")
    assert len(back.tasks) == len(by_pandas.tasks)


def test_scenarios_cover_vms_and_reconfigurations(tmp_path: Path) -> None:
    # The parametrized scenarios above hold the tables they are chosen for.
    vm = hetsched.run(hetsched.load(ROOT / "scenarios" / "aash-aware-guest.toml"))
    dyn = hetsched.run(hetsched.load(ROOT / "scenarios" / "chameleon-nodes.toml"))
    assert vm._records["vms"] and dyn._records["reconfigs"] and dyn._records["proxies"]
    assert any(r.get("end_s") is None for r in dyn._records["reconfigs"])


EDGE_ROWS: list[dict[str, Any]] = [
    {
        "i": 1, "f": 0.1 + 0.2, "big": 2**62, "b": True, "s": "plain", "d": {"z": 1, "a": [1]},
        "l": [1, 2], "none": None, "mixed": 1, "intnull": 5, "boolnull": False,
        "wakeup_latency_p50_ms": 3, "quote": 'say "hi", then\nleave', "flt": 1e16,
    },
    {
        "i": -7, "f": float("inf"), "big": -(2**63), "b": False, "s": "", "d": {},
        "l": [], "none": None, "mixed": "x", "intnull": None, "boolnull": None,
        "wakeup_latency_p50_ms": None, "quote": "a,b", "flt": 1e-5,
    },
    {
        "i": 0, "f": -0.0, "big": 0, "b": True, "s": "é ü", "d": {"k": None},
        "l": [[1], {"a": 2}], "none": None, "mixed": 2.5, "boolnull": True,
        "wakeup_latency_p50_ms": 0.25, "quote": "'", "flt": float("nan"), "late": 5e-324,
    },
]  # fmt: skip


def test_edge_values_are_written_as_pandas_writes_them(tmp_path: Path) -> None:
    floats = ("wakeup_latency_p50_ms",)
    fast = fast_csv(tmp_path / "a.csv", EDGE_ROWS, floats)
    assert fast == pandas_csv(tmp_path / "b.csv", EDGE_ROWS, floats)
    text = fast.decode()
    assert text.splitlines()[1].startswith("1,0.30000000000000004,4611686018427387904,True,plain")
    # An integer column with a missing cell is a float column; a missing cell is empty.
    assert ",5.0," in text and ",3.0," in text
    assert '"say ""hi"", then\nleave"' in text


def test_empty_tables_and_lone_empty_cells(tmp_path: Path) -> None:
    for rows in ([], [{"a": None}, {"a": None}], [{"x": ""}], [{"x": float("nan")}]):
        assert fast_csv(tmp_path / "a.csv", rows) == pandas_csv(tmp_path / "b.csv", rows)


def _random_table(rng: random.Random) -> list[dict[str, Any]]:
    def value(kind: str) -> Any:
        if rng.random() < 0.1:
            return None
        if kind == "int":
            return rng.randint(-(10**12), 10**12)
        if kind == "float":
            return rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "str":
            return "".join(rng.choice('ab ,"\n;é.') for _ in range(rng.randint(0, 4)))
        if kind == "dict":
            return {rng.choice("xyz"): value("float") for _ in range(rng.randint(0, 2))}
        return value(rng.choice(["int", "float", "bool", "str", "dict"]))

    kinds = {f"c{i}": rng.choice(["int", "float", "bool", "str", "dict", "mix"]) for i in range(5)}
    pure = rng.random() < 0.5  # many columns without a missing cell
    return [
        {k: (value(kind) if not pure else value(kind) or value(kind)) for k, kind in kinds.items()
         if rng.random() < 0.95}
        for _ in range(rng.choice([1, 2, 5, 12]))
    ]  # fmt: skip


def test_random_tables_are_written_as_pandas_writes_them(tmp_path: Path) -> None:
    rng = random.Random(20)
    checked = 0
    for _ in range(80):
        rows = _random_table(rng)
        floats = ("c1",) if rng.random() < 0.3 else ()
        a, b = tmp_path / "a.csv", tmp_path / "b.csv"
        if not R._write_rows_csv(a, rows, floats):
            continue
        checked += 1
        assert a.read_bytes() == pandas_csv(b, rows, floats), rows
    assert checked > 50


def test_long_tables_are_written_as_pandas_joins_their_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(R, "FRAME_ROWS", 4)
    same = [{"a": i, "b": i / 3, "c": None if i % 3 else 1.5, "s": str(i)} for i in range(11)]
    assert fast_csv(tmp_path / "a.csv", same) == pandas_csv(tmp_path / "b.csv", same)
    # A column whose pieces pandas would type differently (int64 in one,
    # float64 with a missing cell in another) is left to pandas.
    mixed = [{"a": i if i != 9 else None} for i in range(11)]
    assert not R._write_rows_csv(tmp_path / "c.csv", mixed, ())
    assert not (tmp_path / "c.csv").exists()


def test_values_the_writer_does_not_model_are_left_to_pandas(tmp_path: Path) -> None:
    import decimal

    for rows in (
        [{"a": 2**60}, {"a": None}],  # not exact as a float64
        [{"a": 2**64}],  # beyond int64
        [{"a": decimal.Decimal("1.5")}],  # not a JSON value
        [{}],  # rows without columns
        [{"a": 1}, [("a", 2)]],  # a row that is no dict
        [{"wakeup_latency_p50_ms": "3"}],  # pandas parses the text as a number
    ):
        assert not R._write_rows_csv(tmp_path / "a.csv", rows, R.WAKEUP_LATENCY_COLUMNS)
    # Results.save still writes such a table, through pandas.
    res = R.Results._from_document({"summary": {}, "tasks": [{"a": 2**60}, {"a": None}]})
    res.save(tmp_path / "run")
    assert (tmp_path / "run" / "tasks.csv").read_text() == 'a\n1.152921504606847e+18\n""\n'


def test_a_table_changed_through_its_dataframe_is_saved_as_changed(tmp_path: Path) -> None:
    res = hetsched.run(hetsched.load(ROOT / "scenarios" / "demo.toml"))
    res.tasks["note"] = "checked"
    res.save(tmp_path / "run")
    back = pd.read_csv(tmp_path / "run" / "tasks.csv")
    assert (back["note"] == "checked").all()
