"""The real test programs shipped with hetsched (C sources in ``realprogs/``).

``make realprogs`` builds them into ``build/realprogs``; :func:`program_path`
also builds them on first use when ``gcc`` is there, so a fresh checkout
works without a separate step.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from . import LinuxError

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ROOT / "realprogs"
#: Programs and the extra compiler flags each needs.
PROGRAMS: dict[str, list[str]] = {"spin": [], "chase": [], "phases": [], "threads": ["-pthread"]}
CFLAGS = ["-O2", "-Wall", "-Wextra", "-std=gnu11"]


def build_dir() -> Path:
    """Where the built programs live (``$HETSCHED_REALPROGS`` overrides)."""
    env = os.environ.get("HETSCHED_REALPROGS")
    return Path(env) if env else ROOT / "build" / "realprogs"


def build(out: Path | None = None, force: bool = False) -> Path:
    """Compile every program into ``out`` (default :func:`build_dir`) with gcc;
    skip those that are newer than their sources unless ``force``."""
    out = out or build_dir()
    if not SOURCES.is_dir():
        raise LinuxError(f"{SOURCES}: the C sources of the real programs are missing")
    cc = shutil.which(os.environ.get("CC", "gcc"))
    if cc is None:
        raise LinuxError(
            "gcc not found: install it (apt-get install gcc) to build the real programs"
        )
    out.mkdir(parents=True, exist_ok=True)
    header = SOURCES / "common.h"
    for name, extra in PROGRAMS.items():
        src, exe = SOURCES / f"{name}.c", out / name
        newest = max(src.stat().st_mtime, header.stat().st_mtime)
        if not force and exe.exists() and exe.stat().st_mtime >= newest:
            continue
        cmd = [cc, *CFLAGS, "-o", str(exe), str(src), *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise LinuxError(f"building {name} failed: {' '.join(cmd)}\n{done.stderr.strip()}")
    return out


def program_path(name: str) -> Path:
    """The executable of real program ``name``, built if needed."""
    if name not in PROGRAMS:
        raise LinuxError(f"unknown real program {name!r}; known: {', '.join(PROGRAMS)}")
    exe = build_dir() / name
    src = SOURCES / f"{name}.c"
    if not exe.exists() or (src.exists() and src.stat().st_mtime > exe.stat().st_mtime):
        build()
    return exe


def resolve_command(argv: list[str]) -> list[str]:
    """``argv`` with a leading real-program name (``spin``, ``chase`` ...)
    replaced by its built executable; other commands are looked up in PATH."""
    if not argv:
        raise LinuxError("empty command")
    head = argv[0]
    if head in PROGRAMS:
        return [str(program_path(head)), *argv[1:]]
    if "/" in head:
        return list(argv)
    found = shutil.which(head)
    return [found or head, *argv[1:]]


def run_json(argv: list[str], timeout_s: float = 600.0) -> dict[str, Any]:
    """Run a real program to completion and return the JSON line it prints."""
    cmd = resolve_command(argv)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise LinuxError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    last = done.stdout.strip().splitlines()[-1]
    out: dict[str, Any] = json.loads(last)
    return out
