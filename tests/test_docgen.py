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
