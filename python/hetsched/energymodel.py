"""Energy models from device trees and LISA platform files.

``hetsched machine from-devicetree FILE...`` reads the ``cpus`` node of a
device tree source (``.dts``/``.dtsi``; several files are merged, ``&label``
overlays included):

=====================================  ==========================================
``cpus/cpu@N`` (in file order)         the CPUs, numbered 0, 1, ... as Linux
                                       numbers them (file order)
``cpu-map`` ``clusterN/coreM[/threadK]``  clusters (one LLC each), cores (the
                                       threads of a core are SMT siblings)
``capacity-dmips-mhz``                 capacity, as Linux computes it
                                       (``drivers/base/arch_topology.c``):
                                       dmips × max kHz, scaled so the highest
                                       is 1024 (integer division)
``operating-points-v2`` → OPP table    P-states: ``opp-hz`` and the target
                                       (first) ``opp-microvolt``; an
                                       ``opp-shared`` table is one frequency
                                       domain, else one domain per CPU
``dynamic-power-coefficient``          power per OPP as Linux's energy model
                                       (``drivers/opp/of.c``, ``_get_power``):
                                       P[µW] = C · mV² · MHz / 10⁶, C in
                                       µW/MHz/V²
``clock-latency-ns`` of the OPPs       ``freq_transition_us``
=====================================  ==========================================

hetsched's busy power is ``static_w_per_v·V + dyn_w_per_v2ghz·V²·f_GHz``
at full activity, so the kernel's figure is ``dyn_w_per_v2ghz = C / 1000``
(W per V²·GHz) with no static term: the energy model has dynamic power only,
so static and idle power are 0 here (the kernel truncates to whole µW; the
model's value differs by less than 1 µW).

``hetsched machine from-lisa FILE`` reads a LISA platform description
(``nrg_model``: per cluster ``cpu.cap_max``, ``cpu.nrg_max``,
``cluster.nrg_max``; ``clusters`` with each cluster's CPUs, or ``board.cores``
with ``big_core``). LISA gives one operating point per cluster, the highest:
each type gets one P-state (1000 MHz at 1.0 V, a nominal point: speed is the
capacity at the highest P-state and power is fitted to ``cpu.nrg_max`` there,
so neither depends on it) with ``dyn_w_per_v2ghz`` such that a busy CPU draws
``nrg_max`` mW (the files state no unit; LISA's energy models came from
milliwatt measurements). ``cluster.nrg_max`` (power of a cluster while any of
its CPUs runs) has no counterpart in hetsched's per-CPU power model and is
left out, with a warning.

``hetsched machine from-sysfs --energy-model FILE`` takes the topology and
capacities from ``/sys`` and P-states and power from either file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from . import _core
from .sysfs import SysfsMachine, _ranges

__all__ = [
    "EnergyModel",
    "EnergyModelError",
    "kernel_power_uw",
    "load_devicetree",
    "load_energy_model",
    "load_lisa",
]


class EnergyModelError(_core.ScenarioError):
    """A device tree or LISA file that cannot be read as an energy model."""


def kernel_power_uw(coefficient: int, mhz: int, microvolt: int) -> int:
    """Power of one OPP as Linux's ``_get_power`` (``drivers/opp/of.c``)
    computes it: µW = C · mV · mV · MHz / 10⁶, in integer arithmetic."""
    mv = microvolt // 1000
    return coefficient * mv * mv * mhz // 1_000_000


@dataclass
class Opp:
    hz: int
    microvolt: int
    latency_ns: int | None = None

    @property
    def mhz(self) -> int:
        return self.hz // 1_000_000


@dataclass
class Group:
    """CPUs with one energy-model entry (a cluster, or the CPUs sharing an
    OPP table, coefficient and capacity)."""

    name: str
    cpus: list[int]
    opps: list[Opp] | None = None  # device tree: the OPP table
    coefficient: int | None = None  # device tree: µW/MHz/V²
    dmips_mhz: int | None = None  # device tree: capacity-dmips-mhz
    capacity: int | None = None  # as Linux computes it (DT) or cap_max (LISA)
    max_power_mw: float | None = None  # LISA: cpu.nrg_max
    cluster_power_mw: float | None = None  # LISA: cluster.nrg_max
    shared_domain: bool = True

    def pstates(self) -> list[dict[str, Any]]:
        if self.opps is not None:
            return [{"mhz": o.mhz, "volt": o.microvolt / 1e6} for o in self.opps]
        return [{"mhz": 1000, "volt": 1.0}]

    def power(self, pstates: Sequence[dict[str, Any]]) -> dict[str, float] | None:
        """Power parameters of the type; ``pstates`` are the type's."""
        if self.coefficient is not None:
            dyn = self.coefficient / 1000.0
        elif self.max_power_mw is not None:
            top = max(pstates, key=lambda p: p["mhz"])
            dyn = self.max_power_mw / 1000.0 / (top["volt"] ** 2 * top["mhz"] / 1000.0)
        else:
            return None
        return {"dyn_w_per_v2ghz": float(f"{dyn:.9g}"), "static_w_per_v": 0.0, "idle_w": 0.0}


@dataclass
class EnergyModel:
    """An energy model: groups of CPUs with their P-states and power, and
    (from a device tree) the core and cluster layout."""

    source: str
    kind: str  # "devicetree" or "lisa"
    groups: list[Group]
    #: CPU id -> physical core (device tree ``cpu-map`` cores; else its own).
    cores: dict[int, int] = field(default_factory=dict)
    #: CPU id -> cluster index.
    clusters: dict[int, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def group_of(self, cpu: int) -> Group | None:
        return next((g for g in self.groups if cpu in g.cpus), None)

    # --- as a machine of its own

    def machine(self) -> SysfsMachine:
        """The machine the model describes (``hetsched machine from-devicetree``
        / ``from-lisa``)."""
        names = _group_names(self.groups)
        types: dict[str, Any] = {}
        rows: dict[int, dict[str, Any]] = {}
        for g, name in zip(self.groups, names, strict=True):
            ps = g.pstates()
            ty: dict[str, Any] = {"capacity": int(g.capacity or 1024), "pstates": ps}
            power = g.power(ps)
            if power is not None:
                ty["power"] = power
            lat = [o.latency_ns for o in g.opps or [] if o.latency_ns is not None]
            if lat:
                ty["freq_transition_us"] = max(lat) / 1000.0
            types[name] = ty
            for cpu in g.cpus:
                rows[cpu] = {
                    "type": name,
                    "node": 0,
                    "core": self.cores.get(cpu, cpu),
                    "llc": self.clusters.get(cpu, 0),
                    "freq_domain": (name,) if g.shared_domain else (name, cpu),
                }
        ids = sorted(rows)
        if ids != list(range(len(ids))):
            raise EnergyModelError(
                f"{self.source}: the CPUs are {_ranges(ids)}; a machine needs CPUs 0-{len(ids) - 1}"
            )
        doms: dict[tuple[Any, ...], int] = {}
        for cpu in ids:
            rows[cpu]["freq_domain"] = doms.setdefault(rows[cpu]["freq_domain"], len(doms))
        cpus = [rows[cpu] for cpu in ids]
        desc = " + ".join(
            f"{len(g.cpus)} {n} (capacity {types[n]['capacity']}, up to "
            f"{max(p['mhz'] for p in types[n]['pstates'])} MHz)"
            for g, n in zip(self.groups, names, strict=True)
        )
        machine = {"description": f"{len(cpus)} CPUs from {self.kind}: {desc}", "types": types,
                   "cpus": cpus}  # fmt: skip
        clusters: dict[int, list[int]] = {}
        for cpu in ids:
            clusters.setdefault(rows[cpu]["llc"], []).append(cpu)
        return SysfsMachine(
            machine,
            list(self.warnings),
            self.source,
            clusters=sorted(clusters.values()),
            llcs=sorted(clusters.values()),
            header=[
                f"Machine read from {self.source} by `hetsched machine from-{self.kind}`.",
                *self.header(),
            ],
        )

    def header(self) -> list[str]:
        if self.kind == "devicetree":
            lines = [
                "Power per OPP as Linux's energy model computes it from",
                "dynamic-power-coefficient (drivers/opp/of.c): P[uW] = C * mV^2 * MHz / 1e6,",
                "i.e. dyn_w_per_v2ghz = C / 1000;",
                "static and idle power 0 (the energy model has dynamic power only).",
            ]
            for g in self.groups:
                if g.coefficient is None or not g.opps:
                    continue
                table = ", ".join(
                    f"{o.mhz} MHz {o.microvolt // 1000} mV "
                    f"{kernel_power_uw(g.coefficient, o.mhz, o.microvolt)} uW"
                    for o in g.opps
                )
                lines.append(f"cpu{_ranges(g.cpus)} (C = {g.coefficient}): {table}")
            return lines
        return [
            "Power from LISA's nrg_model: a busy CPU at its highest P-state draws cpu.nrg_max",
            "(read as mW); static and idle power 0; cluster.nrg_max is not modelled.",
        ]

    # --- onto a machine read from sysfs

    def keys_for(self, cpus: Sequence[int], where: str) -> list[Any]:
        """The energy-model entry of each sysfs CPU (an error naming the CPUs
        the model does not cover)."""
        keys = []
        uncovered = []
        for cpu in cpus:
            g = self.group_of(cpu)
            if g is None:
                uncovered.append(cpu)
            keys.append(None if g is None else self.groups.index(g))
        if uncovered:
            covered = sorted(c for g in self.groups for c in g.cpus)
            raise EnergyModelError(
                f"{self.source}: the energy model covers cpu{_ranges(covered)} but {where} "
                f"also has cpu{_ranges(uncovered)}"
            )
        return keys

    def type_fields(
        self, key: Any, sysfs_mhz: list[int], capacity: int, warnings: list[str]
    ) -> dict[str, Any]:
        """P-states and power of a sysfs type whose CPUs have entry ``key``."""
        g = self.groups[int(key)]
        out: dict[str, Any] = {}
        if g.opps is not None:
            ps = g.pstates()
            em_mhz = [p["mhz"] for p in ps]
            if em_mhz != sysfs_mhz:
                warnings.append(
                    f"cpu{_ranges(g.cpus)}: P-states from the energy model ({em_mhz} MHz) "
                    f"instead of sysfs's ({sysfs_mhz} MHz)"
                )
            out["pstates"] = ps
            lat = [o.latency_ns for o in g.opps if o.latency_ns is not None]
            if lat:
                out["freq_transition_us"] = max(lat) / 1000.0
        else:
            from .sysfs import _with_volts

            ps = _with_volts(sysfs_mhz)
        if g.capacity is not None and abs(g.capacity - capacity) > 10:
            warnings.append(
                f"cpu{_ranges(g.cpus)}: capacity {capacity} from sysfs kept; the energy model "
                f"gives {g.capacity}"
            )
        power = g.power(ps)
        if power is not None:
            out["power"] = power
        return out


def _group_names(groups: Sequence[Group]) -> list[str]:
    names = [re.sub(r"[^A-Za-z0-9_-]+", "_", g.name) or f"g{i}" for i, g in enumerate(groups)]
    if len(set(names)) != len(names):
        names = [f"{n}_{i}" for i, n in enumerate(names)]
    return names


def load_energy_model(paths: Sequence[str | Path]) -> EnergyModel:
    """A LISA file (``.json``) or device-tree sources (anything else)."""
    if len(paths) == 1 and Path(paths[0]).suffix.lower() == ".json":
        return load_lisa(paths[0])
    if any(Path(p).suffix.lower() == ".json" for p in paths):
        raise EnergyModelError("give either one LISA .json file or device-tree sources, not both")
    return load_devicetree(paths)


# ---------------------------------------------------------------- LISA


def load_lisa(path: str | Path) -> EnergyModel:
    from .rtapp import _to_strict_json  # LISA's files carry // comments, as rt-app's do

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EnergyModelError(f"{p}: no such LISA platform file") from None
    try:
        doc = json.loads(_to_strict_json(text))
    except json.JSONDecodeError as e:
        raise EnergyModelError(f"{p}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    nrg = doc.get("nrg_model") if isinstance(doc, dict) else None
    if not isinstance(nrg, dict) or not nrg:
        raise EnergyModelError(f'{p}: no "nrg_model" object (per cluster cpu.cap_max, nrg_max)')
    clusters = doc.get("clusters")
    if clusters is None:
        clusters = _lisa_clusters_from_board(doc, nrg, p)
    if not isinstance(clusters, dict):
        raise EnergyModelError(f'{p}: "clusters" must map cluster names to CPU lists')
    groups = []
    warnings = []
    for name, model in nrg.items():
        where = f"{p}: nrg_model.{name}"
        cpus = clusters.get(name)
        if not isinstance(cpus, list) or not all(isinstance(c, int) for c in cpus) or not cpus:
            raise EnergyModelError(f'{where}: no CPU list for this cluster in "clusters"')
        cpu = model.get("cpu") if isinstance(model, dict) else None
        if not isinstance(cpu, dict):
            raise EnergyModelError(f"{where}.cpu: expected an object with cap_max and nrg_max")
        cap, power = cpu.get("cap_max"), cpu.get("nrg_max")
        if not _num(cap) or not 0 < cap <= 1024:
            raise EnergyModelError(f"{where}.cpu.cap_max: expected 1..1024, got {cap!r}")
        if not _num(power) or power <= 0:
            raise EnergyModelError(f"{where}.cpu.nrg_max: expected a power > 0, got {power!r}")
        cl = model.get("cluster", {}).get("nrg_max") if isinstance(model, dict) else None
        groups.append(
            Group(name, sorted(cpus), capacity=round(cap), max_power_mw=float(power),
                  cluster_power_mw=float(cl) if _num(cl) else None)
        )  # fmt: skip
        if _num(cl):
            warnings.append(
                f"nrg_model.{name}.cluster.nrg_max ({cl}) left out: hetsched's power model "
                "has no per-cluster power"
            )
    count = doc.get("cpus_count")
    allc = sorted(c for g in groups for c in g.cpus)
    if len(set(allc)) != len(allc):
        raise EnergyModelError(f"{p}: a CPU is in two clusters ({allc})")
    if isinstance(count, int) and count != len(allc):
        raise EnergyModelError(f"{p}: cpus_count is {count} but the clusters list {len(allc)}")
    groups.sort(key=lambda g: -int(g.capacity or 0))
    cluster_of = {c: i for i, g in enumerate(sorted(groups, key=lambda g: min(g.cpus)))
                  for c in g.cpus}  # fmt: skip
    return EnergyModel(str(p), "lisa", groups, clusters=cluster_of, warnings=warnings)


def _lisa_clusters_from_board(doc: dict[str, Any], nrg: dict[str, Any], p: Path) -> Any:
    board = doc.get("board")
    cores = board.get("cores") if isinstance(board, dict) else None
    big = board.get("big_core") if isinstance(board, dict) else None
    if not isinstance(cores, list) or not isinstance(big, str) or set(nrg) != {"big", "little"}:
        raise EnergyModelError(
            f'{p}: no "clusters" (cluster name -> CPUs), and no board.cores with big_core '
            "to tell them"
        )
    return {
        "big": [i for i, c in enumerate(cores) if c == big],
        "little": [i for i, c in enumerate(cores) if c != big],
    }


def _num(v: object) -> TypeGuard[float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


# ---------------------------------------------------------------- device tree


@dataclass
class _Node:
    name: str
    labels: list[str] = field(default_factory=list)
    props: dict[str, list[Any]] = field(default_factory=dict)
    children: list[_Node] = field(default_factory=list)
    where: str = ""

    def child(self, name: str) -> _Node | None:
        return next((c for c in self.children if c.name == name), None)

    def merge(self, other: _Node) -> None:
        self.labels += [lb for lb in other.labels if lb not in self.labels]
        self.props.update(other.props)
        for oc in other.children:
            mine = self.child(oc.name)
            if mine is None:
                self.children.append(oc)
            else:
                mine.merge(oc)


@dataclass(frozen=True)
class _Ref:
    label: str


@dataclass(frozen=True)
class _Sym:
    text: str


_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<comment>/\*(?:[^*]|\*(?!/))*\*/|//[^\n]*)
      | (?P<directive>\#(?:include|define|undef|if|ifdef|ifndef|else|elif|endif)\b[^\n]*
                      |/(?:dts-v1|plugin|memreserve|include|delete-node|delete-property|
                                  omit-if-no-ref)/)
      | (?P<bits>/bits/)
      | (?P<string>"(?:\\.|[^"\\])*")
      | (?P<cells><[^>]*>)
      | (?P<bytes>\[[^\]]*\])
      | (?P<ref>&\{[^}]*\}|&[A-Za-z_][\w]*)
      | (?P<root>/)
      | (?P<label>[A-Za-z_][\w]*:)
      | (?P<name>[A-Za-z0-9,._+#?@-]+)
      | (?P<punct>[{};=,])
    """,
    re.VERBOSE,
)


def _tokens(text: str, source: str) -> list[tuple[str, str, str]]:
    out = []
    pos = 0
    line = 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise EnergyModelError(f"{source}:{line}: cannot read {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        value = m.group(0)
        if kind not in ("ws", "comment"):
            out.append((kind, value, f"{source}:{line}"))
        line += value.count("\n")
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str, str]], source: str) -> None:
        self.t = tokens
        self.i = 0
        self.source = source
        self.includes: list[str] = []

    def peek(self) -> tuple[str, str, str]:
        return self.t[self.i] if self.i < len(self.t) else ("eof", "", f"{self.source}:end")

    def take(self, value: str | None = None) -> tuple[str, str, str]:
        tok = self.peek()
        if tok[0] == "eof" and value is not None:
            raise EnergyModelError(f"{tok[2]}: the file ends inside a node ('{{' never closed)")
        if value is not None and tok[1] != value:
            raise EnergyModelError(f"{tok[2]}: expected {value!r}, found {tok[1] or 'the end'!r}")
        self.i += 1
        return tok

    def top(self) -> tuple[_Node, list[tuple[str, _Node]]]:
        root = _Node("/")
        overlays: list[tuple[str, _Node]] = []
        while self.peek()[0] != "eof":
            kind, value, where = self.peek()
            if kind == "directive":
                self.take()
                if value.startswith("#include") or value == "/include/":
                    self.includes.append(where)
                if value.startswith("/delete-"):
                    raise EnergyModelError(f"{where}: {value} is not supported")
                if value in ("/memreserve/", "/include/"):
                    while self.take()[1] != ";":
                        pass
                elif value.endswith("/") and self.peek()[1] == ";":
                    self.take()
                continue
            if kind == "ref":
                self.take()
                node = self.node_body(_Node(value[1:], where=where))
                overlays.append((value[1:], node))
                continue
            if kind == "root":
                self.take()
                root.merge(self.node_body(_Node("/", where=where)))
                continue
            root.merge(_wrap(self.node()))
        return root, overlays

    def node(self) -> _Node:
        labels = []
        while self.peek()[0] == "label":
            labels.append(self.take()[1][:-1])
        kind, name, where = self.take()
        if kind == "eof":
            raise EnergyModelError(f"{where}: a node is never closed")
        if kind not in ("name",):
            raise EnergyModelError(f"{where}: expected a node name, found {name!r}")
        return self.node_body(_Node(name, labels, where=where))

    def node_body(self, node: _Node) -> _Node:
        self.take("{")
        while self.peek()[1] != "}":
            kind, value, where = self.peek()
            if kind == "eof":
                raise EnergyModelError(f"{where}: '{{' of {node.name} is never closed")
            if kind == "directive":
                raise EnergyModelError(f"{where}: {value} inside a node is not supported")
            # A property (name ; or name = ...;) or a child node (labels name {).
            nxt = self.t[self.i + 1][1] if self.i + 1 < len(self.t) else ""
            if kind == "name" and nxt in ("=", ";"):
                self.take()
                if self.take()[1] == ";":
                    node.props[value] = []
                else:
                    node.props[value] = self.values()
                continue
            node.children.append(self.node())
        self.take("}")
        self.take(";")
        return node

    def values(self) -> list[Any]:
        out: list[Any] = []
        while True:
            kind, value, where = self.take()
            if kind == "bits":
                self.take()  # the width: cells are read as integers whatever it is
                kind, value, where = self.take()
            if kind == "cells":
                for cell in value[1:-1].split():
                    if cell.startswith("&"):
                        out.append(_Ref(cell[1:]))
                    else:
                        try:
                            out.append(int(cell, 0))
                        except ValueError:
                            # A macro of an #include (ARMCLKL, GIC_PPI) or part of an
                            # expression: kept as text; properties read here need numbers.
                            out.append(_Sym(cell))
            elif kind == "string":
                out.append(json.loads(value))
            elif kind == "bytes":
                out.append(bytes.fromhex(value[1:-1].replace(" ", "")))
            elif kind == "ref":
                out.append(_Ref(value[1:]))
            else:
                raise EnergyModelError(f"{where}: unexpected {value!r} in a property value")
            sep = self.take()[1]
            if sep == ";":
                return out
            if sep != ",":
                raise EnergyModelError(f"{where}: expected ',' or ';' after a property value")


def _wrap(node: _Node) -> _Node:
    """A node given at the top level of a trimmed file (``cpus { ... };``):
    a child of the root."""
    root = _Node("/")
    root.children.append(node)
    return root


def _labels(node: _Node, into: dict[str, _Node]) -> None:
    for lb in node.labels:
        into[lb] = node
    for c in node.children:
        _labels(c, into)


def load_devicetree(paths: Sequence[str | Path]) -> EnergyModel:
    """The CPUs' energy model of device-tree sources (see the module doc)."""
    if not paths:
        raise EnergyModelError("no device-tree file given")
    root = _Node("/")
    overlays: list[tuple[str, _Node]] = []
    includes: list[str] = []
    for path in paths:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise EnergyModelError(f"{p}: no such device-tree file") from None
        parser = _Parser(_tokens(text, str(p)), str(p))
        r, ov = parser.top()
        root.merge(r)
        overlays += ov
        includes += parser.includes
    labels: dict[str, _Node] = {}
    _labels(root, labels)
    for label, node in overlays:
        target = labels.get(label)
        if target is None:
            raise EnergyModelError(f"{node.where}: &{label}: no node has this label")
        target.merge(node)
        _labels(target, labels)
    source = " + ".join(str(p) for p in paths)
    model = _cpus_model(root, labels, source)
    if includes:
        model.warnings.append(
            f"includes not followed ({', '.join(includes)}): give the included files too "
            "if they hold CPU or OPP nodes"
        )
    return model


def _cpus_model(root: _Node, labels: dict[str, _Node], source: str) -> EnergyModel:
    cpus_node = root.child("cpus")
    if cpus_node is None:
        raise EnergyModelError(f"{source}: no /cpus node")
    cpu_nodes = [
        c
        for c in cpus_node.children
        if c.name.split("@")[0] == "cpu" or c.props.get("device_type") == ["cpu"]
    ]
    if not cpu_nodes:
        raise EnergyModelError(f"{source}: /cpus has no cpu@N nodes")
    index = {id(n): i for i, n in enumerate(cpu_nodes)}
    warnings: list[str] = []

    # cpu-map: clusters and cores.
    cores: dict[int, int] = {}
    clusters: dict[int, int] = {}
    cmap = cpus_node.child("cpu-map")
    if cmap is not None:
        n_cluster = 0
        n_core = 0

        def walk(node: _Node, cluster: int | None) -> None:
            nonlocal n_cluster, n_core
            for ch in node.children:
                kind = re.sub(r"\d+$", "", ch.name)
                if kind in ("socket", "cluster"):
                    has_cores = any(re.sub(r"\d+$", "", g.name) == "core" for g in ch.children)
                    if has_cores:
                        walk(ch, n_cluster)
                        n_cluster += 1
                    else:
                        walk(ch, cluster)
                elif kind == "core":
                    cpus_here = _map_cpus(ch, labels, source)
                    for cpu_node in cpus_here:
                        if id(cpu_node) not in index:
                            raise EnergyModelError(f"{ch.where}: cpu-map names a non-CPU node")
                        cores[index[id(cpu_node)]] = n_core
                        clusters[index[id(cpu_node)]] = cluster if cluster is not None else 0
                    n_core += 1

        walk(cmap, None)
    else:
        warnings.append("no cpu-map: each CPU its own core, all in one cluster")
    for i in range(len(cpu_nodes)):
        cores.setdefault(i, i)
        clusters.setdefault(i, 0)

    # Per CPU: OPP table, coefficient, capacity-dmips-mhz.
    per_cpu = []
    for n in cpu_nodes:
        where = f"{source}: cpus/{n.name}"
        ref = n.props.get("operating-points-v2")
        if not ref or not isinstance(ref[0], _Ref):
            raise EnergyModelError(f"{where}: no operating-points-v2 (the CPU's OPP table)")
        table = labels.get(ref[0].label)
        if table is None:
            raise EnergyModelError(f"{where}: operating-points-v2 = &{ref[0].label}: no such node")
        coeff = _one_int(n, "dynamic-power-coefficient", where)
        dmips = _one_int(n, "capacity-dmips-mhz", where)
        per_cpu.append((table, coeff, dmips))
    if any(d is None for _, _, d in per_cpu):
        warnings.append(
            "capacity-dmips-mhz missing on some CPUs: every CPU gets capacity 1024 "
            "(as Linux does when any CPU lacks it)"
        )
    no_coeff = [i for i, (_, c, _) in enumerate(per_cpu) if c is None]
    if no_coeff:
        warnings.append(
            f"cpu{_ranges(no_coeff)}: no dynamic-power-coefficient: power parameters are the "
            "scenario defaults"
        )
    tables = {id(t): _opp_table(t, source) for t, _, _ in per_cpu}

    # Capacity as drivers/base/arch_topology.c: dmips x max frequency (kHz), scaled.
    raw = []
    for t, _, dmips in per_cpu:
        max_khz = max(o.hz for o in tables[id(t)][0]) // 1000
        raw.append((dmips or 0) * max_khz)
    scale = max(raw)
    caps = [
        (r << 10) // scale if scale and all(d is not None for _, _, d in per_cpu) else 1024
        for r in raw
    ]

    groups: dict[tuple[Any, ...], Group] = {}
    for i, (t, coeff, dmips) in enumerate(per_cpu):
        opps, shared = tables[id(t)]
        key = (id(t), coeff, dmips, caps[i])
        if key not in groups:
            name = (t.labels[0] if t.labels else t.name).replace("_opp", "").replace("-", "_")
            groups[key] = Group(name, [], opps=opps, coefficient=coeff, dmips_mhz=dmips,
                                capacity=caps[i], shared_domain=shared)  # fmt: skip
        groups[key].cpus.append(i)
    ordered = sorted(groups.values(), key=lambda g: (-int(g.capacity or 0), min(g.cpus)))
    return EnergyModel(source, "devicetree", ordered, cores, clusters, warnings)


def _map_cpus(core: _Node, labels: dict[str, _Node], source: str) -> list[_Node]:
    out = []
    targets = [core] + [t for t in core.children if re.sub(r"\d+$", "", t.name) == "thread"]
    for t in targets:
        ref = t.props.get("cpu")
        if ref and isinstance(ref[0], _Ref):
            node = labels.get(ref[0].label)
            if node is None:
                raise EnergyModelError(f"{t.where}: cpu = <&{ref[0].label}>: no such node")
            out.append(node)
    return out


def _one_int(node: _Node, prop: str, where: str) -> int | None:
    v = node.props.get(prop)
    if v is None:
        return None
    if len(v) != 1 or not isinstance(v[0], int):
        raise EnergyModelError(f"{where}: {prop}: expected one number, got {v!r}")
    return int(v[0])


def _opp_table(table: _Node, source: str) -> tuple[list[Opp], bool]:
    where = f"{source}: {table.name}"
    if "operating-points-v2" not in (table.props.get("compatible") or []):
        raise EnergyModelError(f'{where}: not an OPP table (compatible = "operating-points-v2")')
    opps = []
    for o in table.children:
        hz = o.props.get("opp-hz")
        uv = o.props.get("opp-microvolt")
        if not hz or not isinstance(hz[0], int):
            raise EnergyModelError(f"{where}/{o.name}: no opp-hz")
        if not uv or not isinstance(uv[0], int):
            raise EnergyModelError(
                f"{where}/{o.name}: no opp-microvolt: the energy model needs the voltage"
            )
        lat = o.props.get("clock-latency-ns")
        latency = int(lat[0]) if lat and isinstance(lat[0], int) else None
        opps.append(Opp(int(hz[0]), int(uv[0]), latency))
    if not opps:
        raise EnergyModelError(f"{where}: no OPPs")
    opps.sort(key=lambda o: o.hz)
    return opps, "opp-shared" in table.props
