"""The TOML reader: the standard library's ``tomllib`` (Python 3.11+), or the
``tomli`` package it came from on Python 3.10 (a declared dependency there)."""

from __future__ import annotations

import importlib
from types import ModuleType


def toml_module() -> ModuleType:
    """``tomllib`` or ``tomli`` (same API: ``loads``, ``load``,
    ``TOMLDecodeError``). Raises ImportError saying what to install."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(
        "reading TOML needs Python 3.11 or newer, or the 'tomli' package on 3.10 "
        "(pip install tomli)"
    )
