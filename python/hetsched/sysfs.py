"""Machine descriptions from Linux's ``/sys/devices/system/cpu``.

``hetsched machine from-sysfs [ROOT]`` (or :func:`machine_from_sysfs`) reads,
for every online ``cpuN``:

==========================================  ====================================
``online``                                  ``0``: the CPU is left out (reported)
``topology/thread_siblings_list``           SMT siblings (trusted over core_id);
(or the ``thread_siblings`` mask)           old kernels: the hex mask
``topology/physical_package_id``,           a core's identity when there is no
``topology/cluster_id``, ``core_id``        siblings list; package → ``node``
``topology/cluster_cpus_list``              the cluster (capacities grouped in it)
``cpu_capacity``                            Linux capacity (arm64, 1024 = fastest)
``acpi_cppc/highest_perf``                  CPPC performance (x86 hybrid, servers)
``cpufreq/cpuinfo_max_freq``, ``_min_freq`` frequency range, kHz
``cpufreq/scaling_available_frequencies``   P-states, kHz (acpi-cpufreq, arm)
``cpufreq/base_frequency``                  base (non-turbo) frequency (intel_pstate)
``cpufreq/related_cpus``                    frequency domain (a CPU without its own
                                            cpufreq folder takes the data of the
                                            CPU whose related_cpus lists it)
``cache/index*/``: highest ``level``,       last-level cache domain
``shared_cpu_list`` (or ``shared_cpu_map``)
==========================================  ====================================

and writes a ``[machine]`` table of the scenario format (``types`` grouped by
capacity and P-states, then one ``[[machine.cpus]]`` per CPU). NUL bytes
that some firmware leaves in these files are dropped. What a tree lacks is
assumed and reported once per kind of problem, naming the CPUs and the
file. Voltages and power are not in sysfs: P-state voltages are interpolated
linearly from 0.7 V at the lowest frequency to 1.0 V at the highest, and
power parameters keep the scenario defaults, unless an energy model is given
(``--energy-model``, see :mod:`hetsched.energymodel`).

Cores: Linux on arm64 numbers ``core_id`` from 0 in each cluster and may give
every CPU package 0 (``drivers/base/arch_topology.c``), so ``core_id`` alone
does not identify a core. CPUs are SMT siblings when ``thread_siblings_list``
says so; only when a tree has no siblings list are CPUs with the same
(package, cluster, core_id) taken as siblings.

Capacity comes from ``cpu_capacity`` when present; else from CPPC
``highest_perf`` scaled so the highest is 1024; else from the maximum
frequency (as a fraction of the highest), which treats all cores as equally
fast per clock. The kernel derives capacities per core (from per-core CPPC
values on NVIDIA GB10), so cores of one design may differ by a few units:
inside one cluster, CPUs with the same P-states whose capacities lie within
:data:`CAPACITY_TOLERANCE` of each other become one type with their mean
capacity (reported once).
"""

from __future__ import annotations

import json
import posixpath
import re
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import _core

__all__ = ["CAPACITY_TOLERANCE", "SysfsError", "SysfsMachine", "machine_from_sysfs", "machine_toml"]


class EnergyModelSource(Protocol):
    """An energy model the import can take P-states and power from
    (:class:`hetsched.energymodel.EnergyModel` is the one the CLI builds from a
    device tree or a LISA platform file)."""

    def keys_for(self, cpus: Sequence[int], where: str) -> list[Any]:
        """The model's entry for each of the CPUs (an error naming those it
        does not cover)."""
        ...

    def type_fields(
        self, key: Any, sysfs_mhz: list[int], capacity: int, warnings: list[str]
    ) -> dict[str, Any]:
        """P-states and power of a CPU type whose CPUs have entry ``key``."""
        ...

    def header(self) -> list[str]:
        """Comment lines saying where the power numbers come from."""
        ...


#: Capacities (out of 1024) within this many units of each other, inside one
#: cluster and with the same P-states, are one CPU type. 10 units (1 %) covers
#: the per-core spread the kernel reports for one core design (GB10's X925
#: cores: 1017 and 1024 from CPPC highest_perf 153 and 154) and stays below
#: the gap between different designs or frequency bins (GB10 clusters: 997 vs
#: 1017; Intel hybrid P-cores at 5.0 vs 5.2 GHz: 978 vs 1024).
CAPACITY_TOLERANCE = 10


class SysfsError(_core.HetschedError):
    """A tree that cannot be read as a CPU description at all."""


@dataclass
class SysfsMachine:
    """The machine read from a sysfs tree (or an energy-model file):
    ``machine`` is the scenario's ``machine`` table as a dict, ``warnings``
    what was assumed; ``clusters`` and ``llcs`` the CPU groups found,
    ``offline`` the CPUs left out."""

    machine: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    source: str = ""
    clusters: list[list[int]] = field(default_factory=list)
    llcs: list[list[int]] = field(default_factory=list)
    offline: list[int] = field(default_factory=list)
    #: Comment lines for the TOML header (default: what sysfs cannot give).
    header: list[str] = field(default_factory=list)

    def toml(self) -> str:
        return machine_toml(self)


@dataclass
class _Cpu:
    id: int
    core: int | None = None
    package: int | None = None
    cluster: int | None = None
    siblings: list[int] | None = None
    cluster_cpus: list[int] | None = None
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
        "of /sys (e.g. made with `cp -r --parents /sys/devices/system/cpu DEST`), or a .tar "
        "archive of one"
    )


#: The files of an archive that are read (the others are not kept in memory).
_WANTED = re.compile(
    r"(^|/)(online|cpu_capacity|highest_perf|core_id|physical_package_id|cluster_id|"
    r"thread_siblings(_list)?|cluster_cpus_list|cpuinfo_m(ax|in)_freq|base_frequency|"
    r"scaling_available_frequencies|related_cpus|level|type|shared_cpu_(list|map))$"
)


class _Tree:
    """Read access to a ``devices/system/cpu`` folder, on disk or in a tar
    archive (as hwloc keeps its saved trees: ``NAME.tar.bz2``)."""

    def __init__(self, root: str | Path) -> None:
        p = Path(root)
        self.files: dict[str, bytes] | None = None
        self.dirs: set[str] = set()
        self.links: dict[str, str] = {}
        if p.is_file() and tarfile.is_tarfile(p):
            self._load_tar(p)
        else:
            self.base = cpu_dir(p)
            self.name = str(self.base)

    def _load_tar(self, p: Path) -> None:
        marker = "sys/devices/system/cpu/"
        files: dict[str, bytes] = {}
        prefix: str | None = None
        with tarfile.open(p) as tar:
            for m in tar:
                at = m.name.find(marker)
                if at < 0 or (prefix is not None and not m.name.startswith(prefix)):
                    continue
                if prefix is None:
                    prefix = m.name[: at + len(marker)]
                rel = m.name[len(prefix) :]
                if m.isdir():
                    self.dirs.add(rel)
                elif m.issym():
                    target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), m.linkname))
                    self.links[rel] = target
                elif m.isfile() and _WANTED.search(rel):
                    f = tar.extractfile(m)
                    if f is not None:
                        files[rel] = f.read()
        for rel in files:
            parts = rel.split("/")
            for k in range(1, len(parts)):
                self.dirs.add("/".join(parts[:k]))
        if "cpu0" not in self.dirs:
            raise SysfsError(f"{p}: no sys/devices/system/cpu/cpu0 in this archive")
        self.files = files
        self.base = Path(str(p))
        self.name = f"{p}:{prefix}"

    def _resolve(self, rel: str) -> str:
        """``rel`` with the archive's symbolic links followed (``cpuN/cpufreq``
        links to ``cpufreq/policyM``)."""
        parts = rel.split("/")
        for _ in range(40):
            for k in range(1, len(parts) + 1):
                head = "/".join(parts[:k])
                if head in self.links:
                    parts = self.links[head].split("/") + parts[k:]
                    break
            else:
                return "/".join(parts)
        return "/".join(parts)

    def read(self, rel: str) -> bytes | None:
        if self.files is not None:
            return self.files.get(self._resolve(rel))
        try:
            return (self.base / rel).read_bytes()
        except OSError:
            return None

    def listdir(self, rel: str) -> list[str]:
        if self.files is not None:
            rel = self._resolve(rel) if rel else rel
            pre = rel.rstrip("/") + "/" if rel else ""
            entries = self.dirs | set(self.files) | set(self.links)
            names = {d[len(pre) :].split("/")[0] for d in entries
                     if d.startswith(pre) and len(d) > len(pre)}  # fmt: skip
            return sorted(names)
        try:
            return sorted(x.name for x in (self.base / rel).iterdir())
        except OSError:
            return []

    def isdir(self, rel: str) -> bool:
        if self.files is not None:
            return self._resolve(rel) in self.dirs
        return (self.base / rel).is_dir()


_FREQ_FILES = (
    "cpufreq/cpuinfo_max_freq",
    "cpufreq/cpuinfo_min_freq",
    "cpufreq/base_frequency",
    "cpufreq/scaling_available_frequencies",
    "cpufreq/related_cpus",
)


def machine_from_sysfs(
    root: str | Path = "/", *, energy_model: EnergyModelSource | None = None
) -> SysfsMachine:
    """Read the CPUs under ``root`` (see the module doc); with
    ``energy_model``, the types take its P-states and power."""
    tree = _Tree(root)
    missing: dict[str, list[int]] = {}
    nul: dict[str, list[int]] = {}

    def read(cpu: int, rel: str, *, quiet: bool = False) -> str | None:
        raw = tree.read(f"cpu{cpu}/{rel}")
        if raw is None:
            if not quiet:
                missing.setdefault(rel, []).append(cpu)
            return None
        if b"\x00" in raw:
            nul.setdefault(rel, []).append(cpu)
            raw = raw.replace(b"\x00", b"")
        return raw.decode("utf-8", "replace").strip()

    ids, offline = _online(tree)
    cpus: list[_Cpu] = []
    for i in ids:
        c = _Cpu(i)
        c.core = _int(read(i, "topology/core_id"))
        c.package = _int(read(i, "topology/physical_package_id"))
        c.cluster = _int(read(i, "topology/cluster_id", quiet=True))
        sib = read(i, "topology/thread_siblings_list", quiet=True)
        if sib is None and (mask := read(i, "topology/thread_siblings", quiet=True)) is not None:
            sib = ",".join(map(str, _cpumask(mask)))
        if sib is None:
            missing.setdefault("topology/thread_siblings_list", []).append(i)
        c.siblings = _cpulist(sib) if sib else None
        ccl = read(i, "topology/cluster_cpus_list", quiet=True)
        c.cluster_cpus = _cpulist(ccl) if ccl else None
        c.capacity = _int(read(i, "cpu_capacity"))
        c.cppc = _int(read(i, "acpi_cppc/highest_perf"))
        c.max_khz = _int(read(i, "cpufreq/cpuinfo_max_freq"))
        c.min_khz = _int(read(i, "cpufreq/cpuinfo_min_freq"))
        c.base_khz = _int(read(i, "cpufreq/base_frequency"))
        freqs = read(i, "cpufreq/scaling_available_frequencies")
        c.freqs_khz = sorted({int(x) for x in freqs.split() if x.isdigit()}) if freqs else None
        rel = read(i, "cpufreq/related_cpus")
        c.related = _cpulist(rel) if rel else None
        c.llc = _llc(tree, f"cpu{i}/cache")
        cpus.append(c)

    warnings: list[str] = []
    if offline:
        warnings.append(f"cpu{_ranges(offline)} offline: left out")
    for rel, which in sorted(nul.items()):
        warnings.append(f"cpu{_ranges(which)}/{rel} had NUL bytes: dropped")
    _share_cpufreq(cpus, missing, warnings)

    def note(rel: str, assumed: str, *, when: bool = True) -> None:
        which = missing.get(rel)
        if which and when:
            warnings.append(f"cpu{_ranges(which)}/{rel} missing: {assumed}")

    caps, how = _capacities(cpus, note)

    # P-states.
    pstates: list[tuple[int, ...]] = []
    for c in cpus:
        if c.freqs_khz:
            mhz = [round(k / 1000) for k in c.freqs_khz]
        else:
            mhz = [round(k / 1000) for k in (c.min_khz, c.base_khz, c.max_khz) if k]
        pstates.append(tuple(sorted(set(m for m in mhz if m > 0)) or [2000]))
    note(
        "cpufreq/scaling_available_frequencies",
        "P-states are cpuinfo_min_freq, base_frequency (when present) and cpuinfo_max_freq",
        when="cpufreq/cpuinfo_max_freq" not in missing,
    )
    note("cpufreq/cpuinfo_max_freq", "no frequency data; one P-state of 2000 MHz")

    # Topology: packages, clusters, physical cores.
    for c in cpus:
        if c.package is None:
            c.package = 0
    note("topology/physical_package_id", "package (node) 0")
    cores = _cores(cpus, missing, warnings)
    clusters = _clusters(cpus)

    # Capacities within a few units inside one cluster: one type.
    caps = _group_capacities(cpus, caps, pstates, clusters, warnings)

    # Frequency domains: related_cpus; SMT siblings share their core's clock.
    dom_of = _domains(cpus, cores)
    if any(c.related is None for c in cpus):
        note("cpufreq/related_cpus", "each such CPU (with its SMT siblings) its own domain")

    # LLCs: the highest cache level, else one per package.
    llc_missing = [c.id for c in cpus if c.llc is None]
    if llc_missing:
        warnings.append(
            f"cpu{_ranges(llc_missing)}/cache/index*/shared_cpu_list missing: "
            "one last-level cache per package"
        )

    # Types: distinct (capacity, P-states, energy-model entry), fastest first.
    em_keys: list[Any] = [None] * len(cpus)
    if energy_model is not None:
        em_keys = energy_model.keys_for([c.id for c in cpus], tree.name)
    keys = [(caps[k], pstates[k], em_keys[k]) for k in range(len(cpus))]
    distinct = sorted(set(keys), key=lambda k: (-k[0], -max(k[1]), k[1], str(k[2])))
    names = _type_names(len(distinct))
    type_of = {k: names[i] for i, k in enumerate(distinct)}
    types: dict[str, Any] = {}
    for key in distinct:
        ty: dict[str, Any] = {"capacity": key[0], "pstates": _with_volts(list(key[1]))}
        if energy_model is not None:
            ty.update(energy_model.type_fields(key[2], list(key[1]), key[0], warnings))
        types[type_of[key]] = ty

    llc_ids: dict[tuple[int, ...], int] = {}
    dom_ids: dict[tuple[int, ...], int] = {}
    core_ids: dict[tuple[int, ...], int] = {}
    cpu_rows = []
    node_ids: dict[int, int] = {}  # packages numbered 0, 1, ... in CPU order
    for k, c in enumerate(cpus):
        node = node_ids.setdefault(int(c.package or 0), len(node_ids))
        row: dict[str, Any] = {"type": type_of[keys[k]], "node": node}
        row["core"] = core_ids.setdefault(cores[c.id], len(core_ids))
        llc_key = tuple(c.llc) if c.llc else (-1 - int(c.package or 0),)
        row["llc"] = llc_ids.setdefault(llc_key, len(llc_ids))
        row["freq_domain"] = dom_ids.setdefault(dom_of[c.id], len(dom_ids))
        cpu_rows.append(row)
    _check_domains(cpu_rows, warnings)

    llcs: dict[int, list[int]] = {}
    for c, row in zip(cpus, cpu_rows, strict=True):
        llcs.setdefault(row["llc"], []).append(c.id)
    machine: dict[str, Any] = {
        "description": _describe(types, cpu_rows, how),
        "types": types,
        "cpus": cpu_rows,
    }
    header = [
        f"Machine read from {tree.name} by `hetsched machine from-sysfs`.",
    ]
    if energy_model is None:
        header += [
            "Voltages are interpolated (0.7 V at the lowest P-state to 1.0 V at the highest) and",
            "power parameters are the scenario defaults: sysfs has neither.",
        ]
    else:
        header += energy_model.header()
    return SysfsMachine(
        machine,
        list(dict.fromkeys(warnings)),
        tree.name,
        clusters=sorted(clusters.values()),
        llcs=sorted(llcs.values()),
        offline=offline,
        header=header,
    )


def machine_toml(m: SysfsMachine) -> str:
    """The machine as a ``[machine]`` TOML table with a header of comments
    (where it came from, what was assumed). Append a ``[workload]`` (and the
    other top-level fields) to make a scenario, or pass the file to
    ``hetsched workload from-rt-app --machine``."""
    mach = m.machine
    lines = [f"# {h}" for h in m.header] or [f"# Machine read from {m.source}."]
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
        ps = ", ".join(f"{{ mhz = {p['mhz']}, volt = {p['volt']!r} }}" for p in ty["pstates"])
        lines.append(f"pstates = [{ps}]")
        if "power" in ty:
            pw = ", ".join(f"{k} = {v!r}" for k, v in ty["power"].items())
            lines.append(f"power = {{ {pw} }}")
        if "freq_transition_us" in ty:
            lines.append(f"freq_transition_us = {ty['freq_transition_us']!r}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------- helpers


def _online(tree: _Tree) -> tuple[list[int], list[int]]:
    ids = sorted(
        int(m.group(1))
        for name in tree.listdir("")
        if (m := re.fullmatch(r"cpu(\d+)", name)) and tree.isdir(name)
    )
    online, offline = [], []
    for i in ids:
        flag = tree.read(f"cpu{i}/online")
        # cpu0 often has no 'online' file: it cannot go offline
        if flag is not None and flag.replace(b"\x00", b"").strip() == b"0":
            offline.append(i)
            continue
        online.append(i)
    if not online:
        raise SysfsError(f"{tree.name}: no online cpuN folders")
    return online, offline


def _share_cpufreq(cpus: list[_Cpu], missing: dict[str, list[int]], warnings: list[str]) -> None:
    """A CPU without cpufreq files that another CPU's related_cpus lists
    shares that CPU's policy (in a live /sys its cpufreq is a link to it)."""
    by_id = {c.id: c for c in cpus}
    took = []
    for c in cpus:
        if c.max_khz is not None or c.related is not None:
            continue
        owner = next((d for d in cpus if d.related and c.id in d.related and d is not c), None)
        if owner is None:
            continue
        for name in ("max_khz", "min_khz", "base_khz", "freqs_khz", "related"):
            setattr(c, name, getattr(owner, name))
        took.append(c.id)
    if took:
        for rel in _FREQ_FILES:
            if rel in missing:
                missing[rel] = [i for i in missing[rel] if i not in took]
                if not missing[rel]:
                    del missing[rel]
        owners = sorted({min(by_id[i].related or [i]) for i in took})
        warnings.append(
            f"cpu{_ranges(took)}/cpufreq missing: shared from the policy of "
            f"cpu{_ranges(owners)}, whose related_cpus list them"
        )


def _capacities(cpus: list[_Cpu], note: Any) -> tuple[list[int], str]:
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
    return [min(1024, max(1, c)) for c in caps], how


def _cores(
    cpus: list[_Cpu], missing: dict[str, list[int]], warnings: list[str]
) -> dict[int, tuple[int, ...]]:
    """Each CPU's physical core, as the sorted CPU ids of its SMT siblings."""
    online = {c.id for c in cpus}
    core_of: dict[int, tuple[int, ...]] = {}
    # Trust thread_siblings_list: union of the listed groups.
    for c in cpus:
        if c.siblings is not None:
            group = {s for s in c.siblings if s in online} | {c.id}
            for s in list(group):
                group |= set(core_of.get(s, ()))
            t = tuple(sorted(group))
            for s in t:
                core_of[s] = t
    # No siblings list: CPUs with the same (package, cluster, core_id) share a core.
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for c in cpus:
        if c.id in core_of:
            continue
        if c.core is None:
            core_of[c.id] = (c.id,)
            continue
        by_key.setdefault((c.package, c.cluster, c.core), []).append(c.id)
    for members in by_key.values():
        for i in members:
            core_of[i] = tuple(members)
    no_list = missing.get("topology/thread_siblings_list", [])
    if no_list:
        no_core = [i for i in missing.get("topology/core_id", []) if i in no_list]
        how = "CPUs with the same package, cluster and core_id are SMT siblings"
        warnings.append(
            f"cpu{_ranges(no_list)}/topology/thread_siblings_list missing: {how}"
            + (f"; cpu{_ranges(no_core)} without core_id each its own core" if no_core else "")
        )
    missing.pop("topology/core_id", None)  # reported above, or the siblings lists say it all
    # core_id shared by CPUs the siblings lists keep apart (arm64 numbers
    # core_id per cluster): report once.
    clash: dict[tuple[Any, ...], set[tuple[int, ...]]] = {}
    for c in cpus:
        if c.core is not None and c.siblings is not None:
            clash.setdefault((c.package, c.cluster, c.core), set()).add(core_of[c.id])
    apart = sorted(i for groups in clash.values() if len(groups) > 1 for g in groups for i in g)
    if apart:
        warnings.append(
            f"cpu{_ranges(apart)}/topology/core_id: the same core_id in one package for CPUs "
            "that thread_siblings_list keeps apart (Linux on arm64 numbers core_id per "
            "cluster); thread_siblings_list used"
        )
    return core_of


def _clusters(cpus: list[_Cpu]) -> dict[Any, list[int]]:
    """CPU groups of one cluster: cluster_cpus_list, else cluster_id, else
    the frequency domain, else the package."""
    out: dict[Any, list[int]] = {}
    online = {c.id for c in cpus}
    for c in cpus:
        if c.cluster_cpus is not None:
            key: Any = ("list", tuple(x for x in c.cluster_cpus if x in online))
        elif c.cluster is not None and c.cluster >= 0:
            key = ("id", c.package, c.cluster)
        elif c.related is not None:
            key = ("freq", tuple(x for x in c.related if x in online))
        else:
            key = ("package", c.package)
        out.setdefault(key, []).append(c.id)
    return out


def _group_capacities(
    cpus: list[_Cpu],
    caps: list[int],
    pstates: list[tuple[int, ...]],
    clusters: dict[Any, list[int]],
    warnings: list[str],
) -> list[int]:
    index = {c.id: k for k, c in enumerate(cpus)}
    caps = list(caps)
    merged: list[str] = []
    for members in clusters.values():
        by_ps: dict[tuple[int, ...], list[int]] = {}
        for i in members:
            by_ps.setdefault(pstates[index[i]], []).append(i)
        for group in by_ps.values():
            group.sort(key=lambda i: caps[index[i]])
            runs: list[list[int]] = [[group[0]]]
            for i in group[1:]:
                if caps[index[i]] - caps[index[runs[-1][-1]]] <= CAPACITY_TOLERANCE:
                    runs[-1].append(i)
                else:
                    runs.append([i])
            for run in runs:
                values = sorted({caps[index[i]] for i in run})
                if len(values) > 1:
                    mean = round(sum(caps[index[i]] for i in run) / len(run))
                    for i in run:
                        caps[index[i]] = mean
                    merged.append(f"cpu{_ranges(run)} ({', '.join(map(str, values))}) -> {mean}")
    if merged:
        warnings.append(
            f"capacities within {CAPACITY_TOLERANCE} of each other inside one cluster are one "
            f"type with their mean capacity: {'; '.join(sorted(merged))}"
        )
    return caps


def _domains(cpus: list[_Cpu], cores: dict[int, tuple[int, ...]]) -> dict[int, tuple[int, ...]]:
    """Each CPU's frequency domain (sorted CPU ids): its related_cpus, merged
    with its SMT siblings' (siblings share their core's clock)."""
    online = {c.id for c in cpus}
    parent = {c.id: c.id for c in cpus}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for c in cpus:
        for r in c.related or []:
            if r in online:
                union(c.id, r)
        for s in cores[c.id]:
            union(c.id, s)
    groups: dict[int, list[int]] = {}
    for c in cpus:
        groups.setdefault(find(c.id), []).append(c.id)
    return {c.id: tuple(sorted(groups[find(c.id)])) for c in cpus}


def _llc(tree: _Tree, cache: str) -> list[int] | None:
    """The CPUs sharing the highest-level data or unified cache."""
    best: tuple[int, list[int]] | None = None
    for idx in tree.listdir(cache):
        if not idx.startswith("index"):
            continue
        level_b = tree.read(f"{cache}/{idx}/level")
        kind_b = tree.read(f"{cache}/{idx}/type")
        try:
            level = int((level_b or b"").replace(b"\0", b"").strip())
        except ValueError:
            continue
        if (kind_b or b"").strip() == b"Instruction":
            continue
        raw = tree.read(f"{cache}/{idx}/shared_cpu_list")
        if raw is not None:
            shared = _cpulist(raw.replace(b"\0", b"").decode("ascii", "replace"))
        elif (raw := tree.read(f"{cache}/{idx}/shared_cpu_map")) is not None:
            shared = _cpumask(raw.decode("ascii", "replace"))
        else:
            continue
        if shared and (best is None or level > best[0]):
            best = (level, shared)
    return best[1] if best else None


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
    for part in filter(None, re.split(r"[\s,]+", text.strip())):
        if "-" in part:
            a, b = part.split("-", 1)
            if a.isdigit() and b.isdigit():
                out.extend(range(int(a), int(b) + 1))
        elif part.isdigit():
            out.append(int(part))
    return sorted(set(out))


def _cpumask(text: str) -> list[int]:
    """A hex CPU mask (``"00000000,00000101"``: 32-bit words, most significant
    first) → ``[0, 8]``."""
    digits = re.sub(r"[^0-9a-fA-F]", "", text.replace("\0", ""))
    if not digits:
        return []
    value = int(digits, 16)
    return [i for i in range(value.bit_length()) if value >> i & 1]


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


def _with_volts(mhz: Sequence[int]) -> list[dict[str, float]]:
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
