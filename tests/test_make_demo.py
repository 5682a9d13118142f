"""`make demo` shows a line per stage and builds with the quick profile
(issue 19, item 14), read from what make would run (``make -n``: nothing is
built or downloaded)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_announces_each_stage_and_builds_the_quick_profile() -> None:
    done = subprocess.run(
        ["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    lines = text.splitlines()
    # One printed line per stage, in order: `printf '\n==> %s\n' "[k/3] ..."`.
    said = [i for i, line in enumerate(lines) if line.startswith("printf") and "==>" in line]
    assert [lines[i].split('"')[1][:5] for i in said] == ["[1/3]", "[2/3]", "[3/3]"], text
    stages = [text.index(lines[i]) for i in said]
    build = next(line for line in text.splitlines() if "maturin develop" in line)
    # The quick profile: release without the whole-program (LTO) link.
    assert "--profile demo" in build and "CARGO_PROFILE_DEMO_LTO=false" in build
    assert "CARGO_PROFILE_DEMO_INHERITS=release" in build
    assert "--release" not in build
    assert "hetsched run scenarios/demo.toml --out out/demo" in text[stages[2] :]
