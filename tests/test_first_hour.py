"""The first hour of a new user, as the docs write it: README's quick start,
then getting-started.md's run, figures, report, sweep, sweep figures and
sweep report, every command as printed (a smaller grid aside). The Python
sweep of getting-started.md saved as a plain script is run by
``test_sweep_robust.test_the_getting_started_sweep_runs_as_a_plain_script``."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from hetsched import cli

ROOT = Path(__file__).resolve().parents[1]


def _commands(doc: Path) -> list[list[str]]:
    """The ``hetsched`` command lines of the ``sh`` blocks of ``doc``, in order."""
    text = doc.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith("hetsched "):
                out.append(shlex.split(line)[1:])
    return out


def _sweep_file(doc: Path) -> str:
    text = doc.read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.DOTALL)
    block = next(b for b in blocks if "[grid]" in b)
    # One seed instead of ten: 10 runs, the same axes.
    small = block.replace("seed = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", "seed = [1]")
    assert small.count("seed = [1]") == 1
    return small


def test_readme_and_getting_started_commands_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    # The commands name scenarios/... relative to the repository root.
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    readme = [c for c in _commands(ROOT / "README.md") if c[0] != "reproduce"]
    guide = _commands(ROOT / "docs" / "getting-started.md")
    assert [c[0] for c in readme] == ["run", "run", "validate", "list"]
    assert {"run", "plot", "report", "sweep"} <= {c[0] for c in guide}
    (tmp_path / "my-sweep.toml").write_text(_sweep_file(ROOT / "docs" / "getting-started.md"))
    for argv in readme + guide:
        assert cli.main(argv) == 0, (argv, capsys.readouterr().err)
    capsys.readouterr()
    # What the guide says each step leaves behind.
    assert (tmp_path / "results" / "demo" / "trace.json").exists()
    demo = tmp_path / "out" / "demo"
    for kind in ("timeline", "utilization", "power", "fairness"):
        assert (demo / "plots" / f"{kind}.png").stat().st_size > 10_000
    report = (demo / "report.html").read_text()
    assert "<img" in report or "<svg" in report
    assert json.loads((tmp_path / "out" / "ff" / "summary.json").read_text())["scheduler"]
    sweep = tmp_path / "out" / "sweep"
    table = (sweep / "results.csv").read_text().splitlines()
    assert len(table) == 1 + 10
    assert (sweep / "sweep.json").exists() and (sweep / "plots" / "speedup.png").exists()
    assert (sweep / "report.html").stat().st_size > 10_000
