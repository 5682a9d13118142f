"""A saved /sys of an RK3399 board (4 Cortex-A53 + 2 Cortex-A72) as a
vendor arm64 kernel without cluster_id writes it, for the tests of energy
models and the docs' recipes.

Values: core_id numbered from 0 in each cluster and package 0 for every CPU
(``drivers/base/arch_topology.c``); cpu_capacity 381 and 1024 (Linux's
capacity from capacity-dmips-mhz 485/1024 and the highest OPPs 1416/1800 MHz
of rk3399.dtsi); the OPP frequencies of rk3399-opp.dtsi; one cpufreq policy
per cluster; an L2 per cluster (512 KiB on the A53s, 1 MiB on the A72s) and
no L3.
"""

from __future__ import annotations

from pathlib import Path

LITTLE_KHZ = [408000, 600000, 816000, 1008000, 1200000, 1416000]
BIG_KHZ = [*LITTLE_KHZ, 1608000, 1800000]


def write_rk3399_sys(root: Path) -> Path:
    """Write the tree under ``root`` (``root/sys/devices/system/cpu``); return ``root``."""
    base = root / "sys" / "devices" / "system" / "cpu"
    for cpu in range(6):
        big = cpu >= 4
        d = base / f"cpu{cpu}"
        files = {
            "topology/core_id": cpu - 4 if big else cpu,
            "topology/physical_package_id": 0,
            "topology/thread_siblings_list": cpu,
            "topology/core_siblings_list": "4-5" if big else "0-3",
            "cpu_capacity": 1024 if big else 381,
            "cpufreq/scaling_available_frequencies": " ".join(
                map(str, BIG_KHZ if big else LITTLE_KHZ)
            )
            + " ",
            "cpufreq/cpuinfo_max_freq": (BIG_KHZ if big else LITTLE_KHZ)[-1],
            "cpufreq/cpuinfo_min_freq": 408000,
            "cpufreq/related_cpus": "4 5" if big else "0 1 2 3",
            "cache/index0/level": 1,
            "cache/index0/type": "Data",
            "cache/index0/shared_cpu_list": cpu,
            "cache/index1/level": 2,
            "cache/index1/type": "Unified",
            "cache/index1/shared_cpu_list": "4-5" if big else "0-3",
        }
        if cpu:
            files["online"] = 1
        for rel, value in files.items():
            path = d / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{value}\n")
    return root
