"""Write the saved /sys/devices/system/cpu trees the sysfs tests read.

Three machines, shaped after public descriptions of real parts (core
counts, SMT, cluster layout and frequencies from the vendors' product
pages); the CPPC and capacity numbers are plausible values for such parts,
not copies of a real machine's files:

- ``hybrid-laptop``: like an Intel Core i7-1260P: 4 P-cores with 2 threads
  (CPUs 0-7, up to 4.7 GHz, base 2.1 GHz) + 8 E-cores (CPUs 8-15, up to
  3.4 GHz, base 1.5 GHz); intel_pstate (no frequency table), one policy per
  CPU; CPPC highest_perf 60 on P-cores and 34 on E-cores; no cpu_capacity.
- ``phone``: like a Snapdragon 888: 4 Cortex-A55 (CPUs 0-3, 1.8 GHz), 3
  Cortex-A78 (4-6, 2.42 GHz), 1 Cortex-X1 (7, 2.84 GHz); cpu_capacity and
  frequency tables per cluster; no L3 entry in sysfs.
- ``server``: 2 sockets x 4 cores x 2 threads, Linux numbering (CPU n and
  n+8 are siblings), intel_pstate 0.8-3.4 GHz, base 2.3 GHz, one L3 per
  socket; no cpu_capacity and no CPPC.

Run ``python tests/data/sysfs/make_trees.py`` to write them again.
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write(root: Path, cpu: int, rel: str, value: object) -> None:
    path = root / "sys/devices/system/cpu" / f"cpu{cpu}" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


def cpulist(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids) if len(ids) < 3 else f"{ids[0]}-{ids[-1]}"


def laptop(root: Path) -> None:
    for cpu in range(16):
        p_core = cpu < 8
        core = (cpu // 2) * 4 if p_core else 16 + (cpu - 8)
        siblings = [cpu - cpu % 2, cpu - cpu % 2 + 1] if p_core else [cpu]
        write(root, cpu, "topology/core_id", core)
        write(root, cpu, "topology/physical_package_id", 0)
        write(root, cpu, "topology/thread_siblings_list", cpulist(siblings))
        write(root, cpu, "acpi_cppc/highest_perf", 60 if p_core else 34)
        write(root, cpu, "acpi_cppc/nominal_perf", 27 if p_core else 15)
        write(root, cpu, "cpufreq/cpuinfo_max_freq", 4700000 if p_core else 3400000)
        write(root, cpu, "cpufreq/cpuinfo_min_freq", 400000)
        write(root, cpu, "cpufreq/base_frequency", 2100000 if p_core else 1500000)
        write(root, cpu, "cpufreq/related_cpus", cpu)
        write(root, cpu, "cache/index3/shared_cpu_list", "0-15")
        if cpu:
            write(root, cpu, "online", 1)


A55 = [300000, 403200, 499200, 595200, 691200, 806400, 902400, 998400, 1094400, 1209600,
       1305600, 1401600, 1497600, 1612800, 1708800, 1804800]  # fmt: skip
A78 = [710400, 844800, 960000, 1075200, 1209600, 1324800, 1440000, 1555200, 1670400, 1766400,
       1881600, 1996800, 2112000, 2227200, 2342400, 2419200]  # fmt: skip
X1 = [844800, 960000, 1075200, 1190400, 1305600, 1420800, 1555200, 1670400, 1785600, 1900800,
      2035200, 2150400, 2265600, 2380800, 2496000, 2592000, 2688000, 2764800, 2841600]  # fmt: skip


def phone(root: Path) -> None:
    clusters = [(range(0, 4), 261, A55), (range(4, 7), 871, A78), (range(7, 8), 1024, X1)]
    for cpus, capacity, table in clusters:
        for cpu in cpus:
            write(root, cpu, "topology/core_id", cpu)
            write(root, cpu, "topology/physical_package_id", 0)
            write(root, cpu, "topology/thread_siblings_list", cpu)
            write(root, cpu, "cpu_capacity", capacity)
            write(root, cpu, "cpufreq/cpuinfo_max_freq", table[-1])
            write(root, cpu, "cpufreq/cpuinfo_min_freq", table[0])
            write(root, cpu, "cpufreq/scaling_available_frequencies", " ".join(map(str, table)))
            write(root, cpu, "cpufreq/related_cpus", cpulist(list(cpus)))
            if cpu:
                write(root, cpu, "online", 1)


def server(root: Path) -> None:
    for cpu in range(16):
        first = cpu % 8
        socket = first // 4
        write(root, cpu, "topology/core_id", first % 4)
        write(root, cpu, "topology/physical_package_id", socket)
        write(root, cpu, "topology/thread_siblings_list", f"{first},{first + 8}")
        write(root, cpu, "cpufreq/cpuinfo_max_freq", 3400000)
        write(root, cpu, "cpufreq/cpuinfo_min_freq", 800000)
        write(root, cpu, "cpufreq/base_frequency", 2300000)
        write(root, cpu, "cpufreq/related_cpus", cpu)
        mates = [c for c in range(16) if (c % 8) // 4 == socket]
        write(root, cpu, "cache/index3/shared_cpu_list", ",".join(map(str, mates)))
        if cpu:
            write(root, cpu, "online", 1)


def main() -> None:
    for name, make in (("hybrid-laptop", laptop), ("phone", phone), ("server", server)):
        root = HERE / name
        shutil.rmtree(root, ignore_errors=True)
        make(root)


if __name__ == "__main__":
    main()
