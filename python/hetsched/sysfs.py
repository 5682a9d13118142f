"""Machine descriptions from Linux's ``/sys/devices/system/cpu``.

``hetsched machine from-sysfs [ROOT]`` (or :func:`machine_from_sysfs`) reads,
for every online ``cpuN``:

==========================================  ====================================
``topology/core_id``                        physical core (SMT siblings share it)
``topology/physical_package_id``            socket → ``node``
``topology/thread_siblings_list``           SMT siblings (checked against core_id)
``cpu_capacity``                            Linux capacity (arm64, 1024 = fastest)
``acpi_cppc/highest_perf``                  CPPC performance (x86 hybrid, servers)
``cpufreq/cpuinfo_max_freq``, ``_min_freq`` frequency range, kHz
``cpufreq/scaling_available_frequencies``   P-states, kHz (acpi-cpufreq, arm)
``cpufreq/base_frequency``                  base (non-turbo) frequency (intel_pstate)
``cpufreq/related_cpus``                    frequency domain
``cache/index3/shared_cpu_list``            last-level cache domain
==========================================  ====================================

and writes a ``[machine]`` table of the scenario format (``types`` grouped by
capacity and P-states, then one ``[[machine.cpus]]`` per CPU). What a tree
lacks is assumed and reported, one warning per kind of missing file, naming
the file and the assumption. Voltages and power are not in sysfs: P-state
voltages are interpolated linearly from 0.7 V at the lowest frequency to
1.0 V at the highest, and power parameters keep the scenario defaults; the
TOML says so in its header.

Capacity comes from ``cpu_capacity`` when present; else from CPPC
``highest_perf`` scaled so the highest is 1024; else from the maximum
frequency (as a fraction of the highest), which treats all cores as equally
fast per clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _core

__all__ = ["SysfsError", "SysfsMachine", "machine_from_sysfs", "machine_toml"]


class SysfsError(_core.HetschedError):
    """A tree that cannot be read as a CPU description at all."""


@dataclass
class SysfsMachine:
    """The machine read from a sysfs tree: ``machine`` is the scenario's
    ``machine`` table as a dict, ``warnings`` what was assumed."""

    machine: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    source: str = ""

    def toml(self) -> str:
        return machine_toml(self)


@dataclass
class _Cpu:
    id: int
    core: int | None = None
    package: int | None = None
    siblings: list[int] | None = None
    capacity: int | None = None
    cppc: int | None = None
    max_khz: int | None = None
    min_khz: int | None = None
    base_khz: int | None = None
    freqs_khz: list[int] | None = None
    related: list[int] | None = None
    llc: list[int] | None = None


def cpu_dir(root: str | Path = "/") -> Path:
    """The ``devices/system/cpu`` folder under ``root`` (``/`` for this machine,
    or the root of a saved copy); ``root`` may also be that folder itself."""
    r = Path(root)
    for candidate in (
        r / "sys" / "devices" / "system" / "cpu",
        r / "devices" / "system" / "cpu",
        r,
    ):
        if (candidate / "cpu0").is_dir():
            return candidate
    raise SysfsError(
        f"{r}: no sys/devices/system/cpu/cpu0 under it; give / or the root of a saved copy "
        "of /sys (e.g. made with `cp -r --parents /sys/devices/system/cpu DEST`)"
    )


def machine_from_sysfs(root: str | Path = "/") -> SysfsMachine:
    """Read the CPUs under ``root`` (see the module doc)."""
    base = cpu_dir(root)
    missing: dict[str, list[int]] = {}

    def read(cpu: int, rel: str) -> str | None:
        try:
            return (base / f"cpu{cpu}" / rel).read_text(encoding="utf-8").strip()
        except OSError:
            missing.setdefault(rel, []).append(cpu)
            return None

    ids = _online(base)
    cpus: list[_Cpu] = []
    for i in ids:
        c = _Cpu(i)
        c.core = _int(read(i, "topology/core_id"))
        c.package = _int(read(i, "topology/physical_package_id"))
        sib = read(i, "topology/thread_siblings_list")
        c.siblings = _cpulist(sib) if sib is not None else None
        c.capacity = _int(read(i, "cpu_capacity"))
        c.cppc = _int(read(i, "acpi_cppc/highest_perf"))
        c.max_khz = _int(read(i, "cpufreq/cpuinfo_max_freq"))
        c.min_khz = _int(read(i, "cpufreq/cpuinfo_min_freq"))
        c.base_khz = _int(read(i, "cpufreq/base_frequency"))
        freqs = read(i, "cpufreq/scaling_available_frequencies")
        c.freqs_khz = sorted({int(x) for x in freqs.split() if x.isdigit()}) if freqs else None
        rel = read(i, "cpufreq/related_cpus")
        c.related = _cpulist(rel) if rel else None
        llc = read(i, "cache/index3/shared_cpu_list")
        c.llc = _cpulist(llc) if llc else None
        cpus.append(c)

    warnings: list[str] = []

    def note(rel: str, assumed: str, *, when: bool = True) -> None:
        which = missing.get(rel)
        if which and when:
            warnings.append(f"cpu{_ranges(which)}/{rel} missing: {assumed}")

    # Capacity: cpu_capacity, else CPPC highest_perf, else max frequency.
    if all(c.capacity is not None for c in cpus):
        caps = [int(c.capacity or 0) for c in cpus]
        how = "cpu_capacity"
    elif all(c.cppc is not None for c in cpus):
        top = max(int(c.cppc or 0) for c in cpus) or 1
        caps = [max(1, round(1024 * int(c.cppc or 0) / top)) for c in cpus]
        how = "acpi_cppc/highest_perf"
        note("cpu_capacity", "capacities from acpi_cppc/highest_perf (highest = 1024)")
    elif all(c.max_khz for c in cpus):
        top = max(int(c.max_khz or 0) for c in cpus)
        caps = [max(1, round(1024 * int(c.max_khz or 0) / top)) for c in cpus]
        how = "cpuinfo_max_freq"
        note(
            "cpu_capacity",
            "no acpi_cppc/highest_perf either; capacities in proportion to cpuinfo_max_freq "
            "(equal work per clock assumed)",
        )
    else:
        caps = [1024] * len(cpus)
        how = "none"
        note("cpu_capacity", "no CPPC or frequency data either; every CPU gets capacity 1024")
    caps = [min(1024, max(1, c)) for c in caps]

    # P-states.
    pstates: list[list[int]] = []
    for c in cpus:
        if c.freqs_khz:
            mhz = [round(k / 1000) for k in c.freqs_khz]
        else:
            mhz = [round(k / 1000) for k in (c.min_khz, c.base_khz, c.max_khz) if k]
        pstates.append(sorted(set(m for m in mhz if m > 0)) or [2000])
    note(
        "cpufreq/scaling_available_frequencies",
        "P-states are cpuinfo_min_freq, base_frequency (when present) and cpuinfo_max_freq",
        when="cpufreq/cpuinfo_max_freq" not in missing,
    )
    note("cpufreq/cpuinfo_max_freq", "no frequency data; one P-state of 2000 MHz")

    # Topology.
    for c in cpus:
        if c.package is None:
            c.package = 0
        if c.core is None:
            c.core = c.id + 100000  # its own core: no SMT siblings
    note("topology/physical_package_id", "package (node) 0")
    note("topology/core_id", "each such CPU is its own physical core (no SMT)")
    for c in cpus:
        if c.siblings is not None:
            by_core = sorted(
                d.id for d in cpus if (d.package, d.core) == (c.package, c.core) and d.id in ids
            )
            listed = sorted(s for s in c.siblings if s in ids)
            if by_core != listed:
                warnings.append(
                    f"cpu{c.id}/topology/thread_siblings_list ({_ranges(c.siblings)}) disagrees "
                    f"with core_id (CPUs {_ranges(by_core)} share core {c.core}); core_id used"
                )
    if any(c.related is None for c in cpus):
        note("cpufreq/related_cpus", "each such CPU has its own frequency domain")
    llc_missing = [c.id for c in cpus if c.llc is None]
    if llc_missing:
        note("cache/index3/shared_cpu_list", "one last-level cache per package")

    # Types: distinct (capacity, P-states), fastest first.
    keys = [(caps[k], tuple(pstates[k])) for k in range(len(cpus))]
    distinct = sorted(set(keys), key=lambda k: (-k[0], -max(k[1]), k[1]))
    names = _type_names(len(distinct))
    type_of = {k: names[i] for i, k in enumerate(distinct)}
    types: dict[str, Any] = {}
    for key in distinct:
        types[type_of[key]] = {"capacity": key[0], "pstates": _with_volts(list(key[1]))}

    # SMT siblings share their core's clock: merge their frequency domains.
    shared: dict[tuple[int, int], set[int]] = {}
    for c in cpus:
        shared.setdefault((int(c.package or 0), int(c.core or 0)), set()).update(
            c.related or [c.id]
        )
    llc_ids: dict[tuple[int, ...], int] = {}
    dom_ids: dict[str, int] = {}
    cpu_rows = []
    for k, c in enumerate(cpus):
        row: dict[str, Any] = {"type": type_of[keys[k]], "node": int(c.package or 0)}
        row["core"] = int(c.core if c.core is not None else c.id)
        llc_key = tuple(c.llc) if c.llc else (-1 - int(c.package or 0),)
        row["llc"] = llc_ids.setdefault(llc_key, len(llc_ids))
        mates = shared[(int(c.package or 0), int(c.core or 0))]
        dom_key = ",".join(map(str, sorted(mates)))
        row["freq_domain"] = dom_ids.setdefault(dom_key, len(dom_ids))
        cpu_rows.append(row)
    _check_domains(cpu_rows, warnings)

    machine: dict[str, Any] = {
        "description": _describe(types, cpu_rows, how),
        "types": types,
        "cpus": cpu_rows,
    }
    return SysfsMachine(machine, warnings, str(base))


def machine_toml(m: SysfsMachine) -> str:
    """The machine as a ``[machine]`` TOML table with a header of comments
    (where it came from, what was assumed). Append a ``[workload]`` (and the
    other top-level fields) to make a scenario."""
    mach = m.machine
    lines = [
        f"# Machine read from {m.source} by `hetsched machine from-sysfs`.",
        "# Voltages are interpolated (0.7 V at the lowest P-state to 1.0 V at the highest) and",
        "# power parameters are the scenario defaults: sysfs has neither.",
    ]
    for w in m.warnings:
        lines.append(f"# assumed: {w}")
    lines += ["[machine]", f"description = {json.dumps(mach['description'])}", "cpus = ["]
    for row in mach["cpus"]:
        fields = ", ".join(f"{k} = {json.dumps(v)}" for k, v in row.items())
        lines.append(f"  {{ {fields} }},")
    lines += ["]", ""]
    for name, ty in mach["types"].items():
        lines.append(f"[machine.types.{name}]")
        lines.append(f"capacity = {ty['capacity']}")
        ps = ", ".join(f"{{ mhz = {p['mhz']}, volt = {p['volt']} }}" for p in ty["pstates"])
        lines.append(f"pstates = [{ps}]")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------- helpers


def _online(base: Path) -> list[int]:
    ids = sorted(
        int(m.group(1))
        for p in base.iterdir()
        if (m := re.fullmatch(r"cpu(\d+)", p.name)) and p.is_dir()
    )
    online = []
    for i in ids:
        flag = base / f"cpu{i}" / "online"
        try:
            if flag.read_text().strip() == "0":
                continue
        except OSError:
            pass  # cpu0 often has no 'online' file: it cannot go offline
        online.append(i)
    if not online:
        raise SysfsError(f"{base}: no online cpuN folders")
    return online


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _cpulist(text: str) -> list[int]:
    """``"0-3,8"`` → ``[0, 1, 2, 3, 8]``."""
    out: list[int] = []
    for part in filter(None, text.replace(" ", ",").split(",")):
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        elif part.isdigit():
            out.append(int(part))
    return sorted(set(out))


def _ranges(ids: Iterable[int]) -> str:
    xs = sorted(set(ids))
    parts = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        parts.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    text = ",".join(parts)
    return text if len(xs) == 1 else "{" + text + "}"


def _with_volts(mhz: list[int]) -> list[dict[str, float]]:
    lo, hi = min(mhz), max(mhz)
    out = []
    for f in mhz:
        v = 1.0 if hi == lo else 0.7 + 0.3 * (f - lo) / (hi - lo)
        out.append({"mhz": f, "volt": round(v, 3)})
    return out


def _type_names(n: int) -> list[str]:
    if n == 1:
        return ["core"]
    if n == 2:
        return ["big", "little"]
    if n == 3:
        return ["prime", "big", "little"]
    return [f"t{i}" for i in range(n)]


def _check_domains(rows: list[dict[str, Any]], warnings: list[str]) -> None:
    by_dom: dict[int, set[str]] = {}
    for r in rows:
        by_dom.setdefault(r["freq_domain"], set()).add(r["type"])
    next_id = max(by_dom, default=-1) + 1
    for dom, kinds in by_dom.items():
        if len(kinds) > 1:
            # A frequency domain must be of one type: split it by type.
            split: dict[str, int] = {}
            for r in rows:
                if r["freq_domain"] == dom:
                    if r["type"] not in split:
                        split[r["type"]] = dom if not split else next_id
                        if len(split) > 1:
                            next_id += 1
                    r["freq_domain"] = split[r["type"]]
            warnings.append(
                f"cpufreq/related_cpus puts CPUs of different types ({', '.join(sorted(kinds))}) "
                "in one frequency domain; split by type"
            )


def _describe(types: dict[str, Any], rows: list[dict[str, Any]], how: str) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["type"]] = counts.get(r["type"], 0) + 1
    parts = [
        f"{counts.get(n, 0)} {n} (capacity {t['capacity']}, up to "
        f"{max(p['mhz'] for p in t['pstates'])} MHz)"
        for n, t in types.items()
    ]
    return f"{len(rows)} CPUs from sysfs: " + " + ".join(parts) + f"; capacity from {how}"
