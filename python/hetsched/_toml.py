"""The TOML reader: the standard library's ``tomllib`` (hetsched needs
Python 3.11 or newer, the first with it)."""

from __future__ import annotations

import tomllib
from types import ModuleType


def toml_module() -> ModuleType:
    """``tomllib`` (``loads``, ``load``, ``TOMLDecodeError``)."""
    return tomllib
