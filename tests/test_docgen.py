"""The generated reference pages cover every field, policy and command."""

from __future__ import annotations

import json
from pathlib import Path

from hetsched import _core, docgen


def test_scenario_reference_has_every_field_of_every_table() -> None:
    schema = json.loads(_core.schema())
    text = docgen.scenario_reference(schema)
    for table in [schema, *schema["definitions"].values()]:
        for field in table.get("properties") or {}:
            assert f"| `{field}` |" in text, field
    assert "## `workload.programs[i]`: `ProgramSpec`" in text
    assert "## `machine.types.<name>`: `CpuTypeSpec`" in text


def test_policy_reference_has_every_policy_and_parameter() -> None:
    text = docgen.policy_reference()
    for p in _core.list_policies():
        assert f"### `{p['name']}`" in text
        for q in p.get("params") or []:
            assert f"| `{q['name']}` |" in text


def test_cli_reference_has_every_command(tmp_path: Path) -> None:
    text = docgen.cli_reference()
    for command in ("run", "sweep", "plot", "report", "machine from-sysfs", "workload from-rt-app"):
        assert f"## `hetsched {command}`" in text
    assert docgen.main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cli-reference.md",
        "policy-reference.md",
        "scenario-reference.md",
    ]


def test_committed_reference_pages_are_up_to_date(tmp_path: Path) -> None:
    """The pages in docs/ are what the generator writes today: a new field,
    policy, parameter or command must come with regenerated pages
    (``python -m hetsched.docgen docs``)."""
    docs = Path(__file__).resolve().parent.parent / "docs"
    assert docgen.main([str(tmp_path)]) == 0
    stale = [
        p.name
        for p in sorted(tmp_path.iterdir())
        if (docs / p.name).read_text(encoding="utf-8") != p.read_text(encoding="utf-8")
    ]
    assert not stale, f"regenerate with `python -m hetsched.docgen docs`: {stale} are stale"
