"""The environment of a child Python process that runs hetsched from this
checkout, for the tests that start one (Ctrl-C, sweeps, agents)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_env(*more_paths: Path) -> dict[str, str]:
    """This process's environment with ``PYTHONPATH`` set to the checkout's
    ``python/`` folder, then ``more_paths`` in order."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(p) for p in (ROOT / "python", *more_paths)),
    }
