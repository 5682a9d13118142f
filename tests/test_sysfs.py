"""Machines from saved /sys trees (tests/data/sysfs, written by make_trees.py)
and the presets of real heterogeneous CPUs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import hetsched
from hetsched import cli, sysfs

TREES = Path(__file__).resolve().parent / "data" / "sysfs"

WORKLOAD = '\n[[workload.programs]]\nname = "p"\nkind = "parallel"\nthreads = 8\nwork_ms = 20\n'


def _scenario(machine_toml: str) -> hetsched.Scenario:
    return hetsched.loads('name = "imported"\nduration_s = 1.0\n' + machine_toml + WORKLOAD)


def _cpus(tree: str):
    m = sysfs.machine_from_sysfs(TREES / tree)
    res = hetsched.run(_scenario(m.toml()))
    return m, res.cpus


def test_hybrid_laptop_capacities_come_from_cppc() -> None:
    m, cpus = _cpus("hybrid-laptop")
    assert len(cpus) == 16
    types = m.machine["types"]
    assert types["big"]["capacity"] == 1024
    assert types["little"]["capacity"] == round(1024 * 34 / 60)
    assert [p["mhz"] for p in types["big"]["pstates"]] == [400, 2100, 4700]
    assert list(cpus["type"]) == ["big"] * 8 + ["little"] * 8
    # P-core threads pair up on 4 cores; each E-core is a core of its own.
    assert cpus["core"].nunique() == 4 + 8
    # Hyper-threads share their core's clock.
    assert cpus.groupby("core")["freq_domain"].nunique().max() == 1
    assert any("cpu{0-15}/cpu_capacity missing" in w and "acpi_cppc" in w for w in m.warnings)


def test_phone_has_three_clusters_with_their_own_clocks() -> None:
    m, cpus = _cpus("phone")
    types = m.machine["types"]
    assert list(types) == ["prime", "big", "little"]
    assert [types[t]["capacity"] for t in types] == [1024, 871, 261]
    assert list(cpus["type"]) == ["little"] * 4 + ["big"] * 3 + ["prime"]
    assert cpus.groupby("type")["freq_domain"].nunique().to_dict() == {
        "little": 1, "big": 1, "prime": 1
    }  # fmt: skip
    assert cpus["freq_domain"].nunique() == 3
    assert len(types["prime"]["pstates"]) == 19
    assert max(p["mhz"] for p in types["little"]["pstates"]) == 1805
    assert any("cache/index*/shared_cpu_list missing" in w for w in m.warnings)


def test_server_with_linux_sibling_numbering() -> None:
    m, cpus = _cpus("server")
    assert len(cpus) == 16 and list(m.machine["types"]) == ["core"]
    assert cpus["node"].tolist() == [0] * 4 + [1] * 4 + [0] * 4 + [1] * 4
    # CPU n and n+8 are siblings: same core, same clock.
    assert cpus["core"].nunique() == 8
    for n in range(8):
        assert cpus.loc[n, "core"] == cpus.loc[n + 8, "core"]
        assert cpus.loc[n, "freq_domain"] == cpus.loc[n + 8, "freq_domain"]
    assert cpus["llc"].nunique() == 2
    assert any("in proportion to cpuinfo_max_freq" in w for w in m.warnings)


def test_missing_files_are_named_with_what_was_assumed(tmp_path: Path) -> None:
    root = tmp_path / "phone"
    shutil.copytree(TREES / "phone", root)
    cpu = root / "sys/devices/system/cpu"
    (cpu / "cpu5/cpu_capacity").unlink()
    (cpu / "cpu2/topology/core_id").unlink()
    (cpu / "cpu2/topology/thread_siblings_list").unlink()
    m = sysfs.machine_from_sysfs(root)
    text = "\n".join(m.warnings)
    assert "cpu5/cpu_capacity missing" in text and "cpuinfo_max_freq" in text
    assert (
        "cpu2/topology/thread_siblings_list missing: CPUs with the same package, cluster and "
        "core_id are SMT siblings; cpu2 without core_id each its own core"
    ) in text
    # The assumptions are in the TOML too, and it still describes a valid machine.
    toml = m.toml()
    assert "# assumed: cpu5/cpu_capacity missing" in toml
    _scenario(toml)


def test_offline_cpus_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "server"
    shutil.copytree(TREES / "server", root)
    (root / "sys/devices/system/cpu/cpu15/online").write_text("0\n")
    m = sysfs.machine_from_sysfs(root)
    assert len(m.machine["cpus"]) == 15


def test_from_sysfs_cli(tmp_path: Path, capsys) -> None:
    out = tmp_path / "m.toml"
    assert cli.main(["machine", "from-sysfs", str(TREES / "phone"), "--out", str(out)]) == 0
    assert "warning: cpu{0-7}/cache/index*/shared_cpu_list missing" in capsys.readouterr().err
    assert out.read_text().startswith("# Machine read from")
    assert cli.main(["machine", "from-sysfs", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no sys/devices/system/cpu/cpu0 under it" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("preset", "ncpus", "types"),
    [
        ("desktop-hybrid-8p+16e", 32, {"pcore": 16, "ecore": 16}),
        ("phone-1+3+4", 8, {"little": 4, "big": 3, "prime": 1}),
        ("server-40c-turbo", 80, {"core": 80}),
    ],
)
def test_real_cpu_presets_run(preset: str, ncpus: int, types: dict[str, int]) -> None:
    res = hetsched.run(
        {
            "name": preset,
            "duration_s": 1.0,
            "machine": {"preset": preset},
            "workload": {
                "programs": [{"name": "p", "kind": "parallel", "threads": 4, "work_ms": 5}]
            },
        }
    )
    assert len(res.cpus) == ncpus
    assert res.cpus["type"].value_counts().to_dict() == types
    assert res.summary["programs_completed"] == 1


def test_hybrid_preset_smt_siblings_share_a_core_and_e_cores_share_clocks() -> None:
    res = hetsched.run(
        {
            "name": "h",
            "duration_s": 0.1,
            "machine": {"preset": "desktop-hybrid-8p+16e"},
            "workload": {"programs": [{"name": "p", "kind": "sequential", "work_ms": 1}]},
        }
    )
    p = res.cpus[res.cpus["type"] == "pcore"]
    e = res.cpus[res.cpus["type"] == "ecore"]
    assert p["core"].nunique() == 8 and p["freq_domain"].nunique() == 8
    assert e["core"].nunique() == 16 and e["freq_domain"].nunique() == 4
