"""The sweep benchmark's worker start-up measurement and its environments
(``bench/sweep_speedup.py``; the sweeps themselves are too long for a test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import sweep_speedup  # noqa: E402


def test_workers_started_as_a_sweep_starts_them_report_their_cpu(tmp_path: Path) -> None:
    env = sweep_speedup.bench_env("env", tmp_path)
    assert env["PYTHONPATH"] == str(ROOT / "python")
    assert not (tmp_path / "pycache").exists()
    starts = sweep_speedup.startup_cpu(env, 2)
    assert len(starts) == 2 and all(0 < s < 5 for s in starts)


def test_cached_bytecode_is_filled_before_anything_is_measured(tmp_path: Path) -> None:
    env = sweep_speedup.bench_env("cached", tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pycache")
    assert any((tmp_path / "pycache").rglob("results*.pyc"))


def test_a_bad_bytecode_choice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'cached' or 'env' is allowed, got 'warm'"):
        sweep_speedup.bench_env("warm", tmp_path)
