"""The cgroup v2 path of emulated asymmetry, checked on a real kernel.

A machine whose ``cpu`` and ``cpuset`` controllers are bound to cgroup v1
hierarchies cannot offer them in cgroup v2 (a controller lives in one
hierarchy at a time; every cgroup2 mount is the same unified hierarchy).
So the check runs where v2 is free: in the throwaway VM of ``hotplug-bench``.

:func:`record` drives :class:`~hetsched.linux.cgroups.Groups` (the v2 code
path, unchanged) against a scratch directory and records every directory it
makes and every value it writes, in order; :func:`run_vm` replays the
recording as a shell script on the VM's real cgroup2 mount, with two
spinners in the places the recording put two placeholder PIDs, and reads
each group's ``cpu.stat``. What it shows: the kernel accepts the writes in
that order (controllers enabled, no process in an inner group, cpusets and
quotas), a 50 % CPU delivers about half of a 100 % one, and a fused
representative of 2 × 50 % about twice a 50 % one.
"""

from __future__ import annotations

import contextlib
import gzip
import tempfile
import time
from pathlib import Path
from typing import Any

from . import LinuxError, cgroups, hotplug

#: Placeholder PIDs of the two spinners in the recording.
PID_A, PID_B = 999_001, 999_002
PHASE_S = 2


def record(profile: str = "cpu0=50%, cpu1=50%") -> dict[str, list[str]]:
    """Shell lines (paths relative to the cgroup2 mount) of: ``open`` (make
    the groups), ``place`` (spinner A on cpu0, B on cpu1), ``fuse`` (cpu0
    borrows cpu1), ``split`` and ``close``."""
    real_write, real_of = cgroups._write, cgroups._cgroup_of
    phases: dict[str, list[str]] = {}
    cur: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hetsched-v2rec-") as tmp:
        root = Path(tmp)
        (root / "cgroup.subtree_control").write_text("\n")

        def rel(p: Path) -> str:
            return str(p.relative_to(root))

        def write(path: Path, value: str) -> None:
            v = value.replace(str(PID_A), "$A").replace(str(PID_B), "$B")
            cur.append(f'echo "{v}" > {rel(path)} || echo "HSV2-FAIL write {v} > {rel(path)}"')
            real_write(path, value)

        real_mkdir = Path.mkdir

        try:
            cgroups._write = write
            cgroups._cgroup_of = lambda pid, ctrl: "/"  # type: ignore[assignment]
            g = cgroups.Groups(cgroups.parse_profile(profile, {0, 1}), "v2", {"": root}, True)
            g.name = "hetsched-vm"

            def mkdir(path: Path) -> None:
                cur.append(f"mkdir {rel(path)} || echo 'HSV2-FAIL mkdir {rel(path)}'")
                real_mkdir(path)

            def record_mkdir(ctrl: str, path: Path) -> None:
                mkdir(path)
                g.created.append((ctrl, path))

            g._mkdir = record_mkdir  # type: ignore[method-assign]
            g._make_parent()
            for cpu in g.profile.cpus:
                g.group_for([cpu])
            g.group_for(g.profile.cpus)
            phases["open"], cur = cur, []
            g.place(PID_A, [0])
            g.place(PID_B, [1])
            phases["place"], cur = cur, []
            g.fuse([0, 1])
            phases["fuse"], cur = cur, []
            g.split(0)
            phases["split"], cur = cur, []
            # Closing: the spinners are gone by then; remove the groups
            # innermost first, as Groups.close does, and give back the root
            # controllers it enabled.
            for _, path in reversed(g.created):
                cur.append(f"rmdir {rel(path)} || echo 'HSV2-FAIL rmdir {rel(path)}'")
            for c in reversed(g.enabled_root_controllers):
                cur.append(f'echo "-{c}" > cgroup.subtree_control')
            phases["close"] = cur
        finally:
            cgroups._write = real_write
            cgroups._cgroup_of = real_of
    return phases


def _script(phases: dict[str, list[str]]) -> str:
    usage = (
        'for g in cpu0 cpu1; do echo "HSV2 $1 $g $(/bin/busybox grep usage_usec '
        'hetsched-vm/$g/cpu.stat | /bin/busybox cut -d" " -f2)"; done'
    )
    return "\n".join(
        [
            "#!/bin/sh",
            "/bin/busybox mount -t proc proc /proc",
            "/bin/busybox mount -t sysfs sysfs /sys",
            "/bin/busybox mkdir -p /cg",
            "/bin/busybox mount -t cgroup2 none /cg || echo HSV2-FAIL mount",
            "cd /cg",
            'echo "HSBENCH-KERNEL $(/bin/busybox uname -r)"',
            'echo "HSV2-CONTROLLERS $(/bin/busybox cat cgroup.controllers)"',
            f"usage() {{ {usage}; }}",
            *phases["open"],
            "/bin/busybox sh -c 'while :; do :; done' & A=$!",
            "/bin/busybox sh -c 'while :; do :; done' & B=$!",
            *phases["place"],
            "/bin/busybox sleep 1; usage native0",
            f"/bin/busybox sleep {PHASE_S}; usage native1",
            *phases["fuse"],
            'echo "HSV2-BORROWED-PROCS $(/bin/busybox cat hetsched-vm/cpu1/cgroup.procs | '
            '/bin/busybox wc -l)"',
            "/bin/busybox sleep 1; usage fused0",
            f"/bin/busybox sleep {PHASE_S}; usage fused1",
            *phases["split"],
            "kill -9 $A $B; /bin/busybox sleep 1",
            *phases["close"],
            'echo "HSV2-LEFT $(/bin/busybox ls -d hetsched-vm 2>/dev/null | /bin/busybox wc -l)"',
            'echo "HSBENCH-DONE"',
            "echo o > /proc/sysrq-trigger",
            "/bin/busybox poweroff -f",
            "",
        ]
    )


def parse(text: str) -> dict[str, Any]:
    usage: dict[str, dict[str, int]] = {}
    out: dict[str, Any] = {"failures": [], "controllers": [], "kernel": ""}
    for line in text.splitlines():
        line = line.strip("\r")
        if line.startswith("HSV2-FAIL"):
            out["failures"].append(line[len("HSV2-FAIL ") :])
        elif line.startswith("HSV2-CONTROLLERS"):
            out["controllers"] = line.split()[1:]
        elif line.startswith("HSV2-BORROWED-PROCS"):
            out["borrowed_procs"] = int(line.split()[1])
        elif line.startswith("HSV2-LEFT"):
            out["left"] = int(line.split()[1])
        elif line.startswith("HSBENCH-KERNEL "):
            out["kernel"] = line.split(" ", 1)[1].strip()
        elif line.startswith("HSV2 "):
            _, phase, group, val = [*line.split(), "0"][:4]
            with contextlib.suppress(ValueError):
                usage.setdefault(phase, {})[group] = int(val)

    def rate(a: str, b: str, g: str) -> float | None:
        if g in usage.get(a, {}) and g in usage.get(b, {}):
            return (usage[b][g] - usage[a][g]) / 1e6 / PHASE_S
        return None

    out["native_share"] = {g: rate("native0", "native1", g) for g in ("cpu0", "cpu1")}
    out["fused_share"] = {g: rate("fused0", "fused1", g) for g in ("cpu0", "cpu1")}
    return out


def run_vm(timeout_s: float = 240.0, profile: str = "cpu0=50%, cpu1=50%") -> dict[str, Any]:
    """Replay the recorded v2 path in a 2-vCPU VM (TCG) and return what it
    measured: CPU time per second of each emulated CPU's group, natively and
    with cpu0 representing a fused object of both."""
    qemu, busybox = hotplug._need_tools()
    image = hotplug.kernel_image()
    script = _script(record(profile))
    entries = [*hotplug.busybox_root(busybox), ("init", hotplug.EXEC_MODE, script.encode(), 0)]
    with tempfile.TemporaryDirectory(prefix="hetsched-vm-") as tmp:
        initrd = Path(tmp) / "initrd.gz"
        initrd.write_bytes(gzip.compress(hotplug._cpio(entries), compresslevel=1))
        cmd = [
            qemu, "-machine", "q35,accel=tcg", "-smp", "2", "-m", "256",
            "-kernel", str(image), "-initrd", str(initrd),
            "-append", "console=ttyS0 panic=-1 quiet loglevel=3",
            "-display", "none", "-serial", "stdio", "-monitor", "none",
            "-no-reboot", "-nodefaults",
        ]  # fmt: skip
        started = time.monotonic()
        text, err, outcome = hotplug._boot(cmd, timeout_s, None)
        wall = time.monotonic() - started
    if outcome != "done":
        raise LinuxError(
            f"the cgroup v2 check's VM did not finish ({outcome}); qemu: "
            f"{err.strip()[-300:] or '-'}; console: {text[-400:]}"
        )
    out = parse(text)
    out.update({"profile": profile, "accel": "tcg", "wall_s": wall})
    return out
