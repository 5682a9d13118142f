"""Real workloads: the TOML file that ``hetsched linux agent`` launches.

::

    name = "two-spinners"
    duration_s = 30          # optional: stop (SIGTERM, then SIGKILL) after this long

    [[programs]]
    name = "fast"            # required, unique
    command = ["spin", "400"]   # or a string, split like a shell would
    start_s = 0.0            # when to start it (default 0)
    nice = 0                 # -20..19 (default 0)
    repeat = 1               # instances run one after another (default 1)
    cpus = [0]               # optional: where it starts (its affinity, and its
                             # emulated CPU's cgroup with --profile); default all
    kind = "cpu"             # optional label: cpu, memory, sleep, parallel, other

A command whose first word is one of hetsched's real programs (``spin``,
``chase``, ``phases``, ``threads``) runs the program built from
``realprogs/``; anything else is looked up in ``PATH``.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._toml import toml_module
from . import LinuxError

_PROGRAM_KEYS = {"name", "command", "start_s", "nice", "repeat", "kind", "cpus"}
_TOP_KEYS = {"name", "duration_s", "programs", "profile", "description"}


@dataclass
class RealProgram:
    name: str
    command: list[str]
    start_s: float = 0.0
    nice: int = 0
    repeat: int = 1
    kind: str = "cpu"
    cpus: list[int] | None = None


@dataclass
class RealWorkload:
    name: str
    programs: list[RealProgram] = field(default_factory=list)
    duration_s: float | None = None
    profile: str | None = None


def load(path: Path) -> RealWorkload:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LinuxError(f"{path}: no such workload file") from None
    try:
        tomllib = toml_module()
    except ImportError as e:
        raise LinuxError(str(e)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise LinuxError(f"{path}: not valid TOML: {e}") from None
    return from_dict(data, default_name=path.stem)


def from_dict(data: dict[str, Any], default_name: str = "workload") -> RealWorkload:
    """Validate a parsed workload; errors name the field path."""
    for k in data:
        if k not in _TOP_KEYS:
            raise LinuxError(f"{k}: unknown field; allowed: {', '.join(sorted(_TOP_KEYS))}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise LinuxError("name: must be a non-empty string")
    duration = data.get("duration_s")
    if duration is not None and (
        isinstance(duration, bool)
        or not isinstance(duration, int | float)
        or not math.isfinite(duration)
        or duration <= 0
    ):
        raise LinuxError(f"duration_s: {duration!r} must be a finite number > 0")
    profile = data.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise LinuxError("profile: must be a string such as 'cpu0=100%, cpu1=50%'")
    progs = data.get("programs")
    if not isinstance(progs, list) or not progs:
        raise LinuxError("programs: give at least one [[programs]] table")
    out: list[RealProgram] = []
    for i, p in enumerate(progs):
        at = f"programs[{i}]"
        if not isinstance(p, dict):
            raise LinuxError(f"{at}: must be a table")
        for k in p:
            if k not in _PROGRAM_KEYS:
                raise LinuxError(
                    f"{at}.{k}: unknown field; allowed: {', '.join(sorted(_PROGRAM_KEYS))}"
                )
        pname = p.get("name")
        if not isinstance(pname, str) or not pname:
            raise LinuxError(f"{at}.name: required, a non-empty string")
        if any(q.name == pname for q in out):
            raise LinuxError(f"{at}.name: {pname!r} is used by another program")
        cmd = p.get("command")
        if isinstance(cmd, str):
            cmd = shlex.split(cmd)
        if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) for c in cmd):
            raise LinuxError(f"{at}.command: required, a string or a non-empty list of strings")
        start = p.get("start_s", 0.0)
        if (
            isinstance(start, bool)
            or not isinstance(start, int | float)
            or not math.isfinite(start)
            or start < 0
        ):
            raise LinuxError(f"{at}.start_s: {start!r} must be a finite number ≥ 0")
        nice = p.get("nice", 0)
        if isinstance(nice, bool) or not isinstance(nice, int) or not -20 <= nice <= 19:
            raise LinuxError(f"{at}.nice: {nice!r} is out of range; allowed -20 to 19")
        repeat = p.get("repeat", 1)
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise LinuxError(f"{at}.repeat: {repeat!r} must be a whole number ≥ 1")
        kind = p.get("kind", "cpu")
        if kind not in ("cpu", "memory", "sleep", "parallel", "other"):
            raise LinuxError(f"{at}.kind: {kind!r}; allowed: cpu, memory, sleep, parallel, other")
        cpus = p.get("cpus")
        if cpus is not None and (
            not isinstance(cpus, list)
            or not cpus
            or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus)
        ):
            raise LinuxError(f"{at}.cpus: {cpus!r} must be a non-empty list of CPU ids")
        out.append(RealProgram(pname, list(cmd), float(start), nice, repeat, kind, cpus))
    return RealWorkload(name, out, float(duration) if duration else None, profile)
