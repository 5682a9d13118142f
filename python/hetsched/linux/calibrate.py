"""``hetsched linux calibrate``: how fast the real programs run on this machine,
expressed in the simulator's terms.

The simulator counts work in reference milliseconds: ``work_ms`` of a
program is the time it needs on a CPU of capacity 1024 at its reference
clock, memory stalls included, and ``mem`` is the fraction of that time
stalled on memory (``docs/model.md``). On a real machine one CPU of this
machine plays the reference CPU, so:

* ``ms_per_unit``: CPU time of one work unit of ``spin`` (CPU time, not wall
  time, so that other load on the machine does not inflate it);
* the pointer chase's ``ns_per_access`` at a working set that fits in the
  private caches (``ws_small_kb``) and at one far beyond the last-level cache
  (``ws_large_kb``); ``mem = 1 − small / large`` is the fraction of a large
  chase's time spent waiting for memory, and a chase of ``A`` accesses is
  ``A × ns_per_access(ws) / 10⁶`` reference ms.

The measurement is the median of ``repeats`` runs.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from . import progs


@dataclass
class Calibration:
    """What :func:`calibrate` measured (see the module doc)."""

    ms_per_unit: float
    units: int
    ns_per_access_small: float
    ns_per_access_large: float
    ws_small_kb: int
    ws_large_kb: int
    mem_large: float
    phases_cpu_share: float
    repeats: int

    def work_ms(self, units: float) -> float:
        """Reference ms of ``units`` work units."""
        return units * self.ms_per_unit

    def chase_ms(self, accesses: float, ws_kb: float) -> float:
        """Reference ms of a chase of ``accesses`` loads over ``ws_kb`` KiB
        (the small or the large rate, whichever working set is nearer on a log scale)."""
        import math

        near_small = abs(math.log(ws_kb / self.ws_small_kb)) < abs(
            math.log(ws_kb / self.ws_large_kb)
        )
        ns = self.ns_per_access_small if near_small else self.ns_per_access_large
        return accesses * ns / 1e6

    def chase_mem(self, ws_kb: float) -> float:
        """Memory intensity of a chase over ``ws_kb`` KiB (0 when it fits the caches)."""
        import math

        near_small = abs(math.log(ws_kb / self.ws_small_kb)) < abs(
            math.log(ws_kb / self.ws_large_kb)
        )
        return 0.0 if near_small else self.mem_large

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibrate(
    *,
    units: int = 40,
    ws_small_kb: int = 16,
    ws_large_kb: int = 65536,
    accesses_k: int = 2000,
    repeats: int = 3,
) -> Calibration:
    """Run the real programs and measure them (module doc)."""
    per_unit = []
    small, large = [], []
    for _ in range(repeats):
        r = progs.run_json(["spin", str(units)])
        per_unit.append(1000.0 * float(r["cpu_s"]) / units)
        s = progs.run_json(["chase", str(ws_small_kb), str(accesses_k)])
        small.append(1e9 * float(s["cpu_s"]) / float(s["accesses"]))
        g = progs.run_json(["chase", str(ws_large_kb), str(accesses_k)])
        large.append(1e9 * float(g["cpu_s"]) / float(g["accesses"]))
    # A compute/sleep program: its CPU time over its wall time, which a
    # scenario's phases program must reproduce.
    p = progs.run_json(["phases", "2", "20", "5"])
    ns_small, ns_large = statistics.median(small), statistics.median(large)
    return Calibration(
        ms_per_unit=statistics.median(per_unit),
        units=units,
        ns_per_access_small=ns_small,
        ns_per_access_large=ns_large,
        ws_small_kb=ws_small_kb,
        ws_large_kb=ws_large_kb,
        mem_large=max(0.0, min(0.99, 1.0 - ns_small / ns_large)) if ns_large > 0 else 0.0,
        phases_cpu_share=float(p["cpu_s"]) / float(p["wall_s"]) if p["wall_s"] else 0.0,
        repeats=repeats,
    )


def table_rows(c: Calibration) -> list[list[object]]:
    """Rows ``quantity, value, meaning`` for the plain-text output."""
    return [
        ["ms_per_unit", f"{c.ms_per_unit:.3f}", "CPU ms of one spin work unit (reference ms)"],
        [
            "ns_per_access_small",
            f"{c.ns_per_access_small:.2f}",
            f"chase over {c.ws_small_kb} KiB (in cache), CPU ns per load",
        ],
        [
            "ns_per_access_large",
            f"{c.ns_per_access_large:.2f}",
            f"chase over {c.ws_large_kb} KiB (memory), CPU ns per load",
        ],
        [
            "mem_large",
            f"{c.mem_large:.3f}",
            "memory intensity of the large chase (1 − small/large)",
        ],
        ["phases_cpu_share", f"{c.phases_cpu_share:.3f}", "CPU time / wall time of phases 2 20 5"],
    ]
