"""What the tests of ``hetsched linux`` need from the machine, checked once."""

from __future__ import annotations

import os
import sys

import pytest

from hetsched.linux import LinuxError, cgroups


def cgroups_unusable() -> str | None:
    """Why emulated CPUs (per-CPU cgroups) cannot be made here, or None."""
    if not sys.platform.startswith("linux"):
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (cgroups)"
    if len(cgroups.online_cpus()) < 2:
        return "needs two online CPUs"
    try:
        cgroups.detect()
    except LinuxError as e:
        return str(e)
    # Really create and remove one set of groups.
    try:
        g = cgroups.Groups.open(cgroups.parse_profile("cpu0=100%, cpu1=50%"))
    except LinuxError as e:
        return f"cgroups not usable here: {e}"
    problems = g.close()
    return "; ".join(problems) or None


SKIP = cgroups_unusable()
needs_cgroups = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
