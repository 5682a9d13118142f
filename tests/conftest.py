"""Test setup: which ``hetsched._core`` the tests run against.

The compiled core is used whenever it can be imported (after ``make build``).
Only when it is missing is ``tests/fake_core.py`` put in its place, and the
test run says so in its header and at its end. Set ``HETSCHED_FAKE_CORE=1``
to force the fake. Tests that need the compiled core live in
``test_cli_real.py`` and skip themselves under the fake.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def _compiled_core_present() -> bool:
    """Whether the built extension module sits in the hetsched package (no import)."""
    spec = importlib.util.find_spec("hetsched")
    if spec is None or spec.submodule_search_locations is None:
        return False
    return any(
        (Path(folder) / f"_core{suffix}").is_file()
        for folder in spec.submodule_search_locations
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def _install_core() -> str:
    """Import hetsched with the compiled core, or with the fake one; say which."""
    if importlib.util.find_spec("hetsched") is None:
        sys.path.insert(0, str(ROOT / "python"))
    if os.environ.get("HETSCHED_FAKE_CORE") != "1" and _compiled_core_present():
        import hetsched._core as core

        return f"compiled ({core.__file__})"
    spec = importlib.util.spec_from_file_location("hetsched._core", TESTS / "fake_core.py")
    if spec is None or spec.loader is None:
        raise ImportError("tests/fake_core.py cannot be loaded")
    fake = importlib.util.module_from_spec(spec)
    sys.modules["hetsched._core"] = fake
    spec.loader.exec_module(fake)
    importlib.import_module("hetsched")
    return "FAKE (tests/fake_core.py): the compiled core is not built; run `make build`"


CORE = _install_core()
FAKE_CORE = CORE.startswith("FAKE")


def pytest_report_header(config: pytest.Config) -> str:
    return f"hetsched._core: {CORE}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FAKE_CORE:
        terminalreporter.write_line(f"note: hetsched._core was {CORE}", yellow=True)


@pytest.fixture
def fake_results_json() -> str:
    """The fixture results document of ``fake_core`` (no trace)."""
    import fake_core

    return fake_core.results_json()
