"""Test setup: the tests always run against the compiled ``hetsched._core``.

``tests/fake_core.py`` only provides a fixed results document for the tests
of the pure-Python layers (DataFrames, file output); it never replaces the
core.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def _install_core() -> str:
    """Import hetsched with its compiled core; fail loudly if it is not built."""
    if importlib.util.find_spec("hetsched") is None:
        sys.path.insert(0, str(ROOT / "python"))
    try:
        import hetsched._core as core
    except ImportError as e:  # pragma: no cover - a setup error, not a test
        raise pytest.UsageError(
            f"the compiled core hetsched._core cannot be imported ({e}); run `make build` first"
        ) from e
    return f"compiled ({core.__file__})"


CORE = _install_core()


def pytest_report_header(config: pytest.Config) -> str:
    return f"hetsched._core: {CORE}"


@pytest.fixture
def fake_results_json() -> str:
    """The fixture results document of ``fake_core`` (no trace)."""
    import fake_core

    return fake_core.results_json()
