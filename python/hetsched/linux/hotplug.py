"""``hetsched linux hotplug-bench``: CPU hotplug latency on real Linux.

VM mode (the default) boots a throwaway Linux VM under QEMU with ``K + 2``
vCPUs: CPU 0 runs the benchmark, CPUs 1..K are taken offline and online, CPU
``K + 1`` runs a spinner that measures the disturbance. The kernel is a
Debian kernel image fetched with ``apt-get download`` and unpacked; the root
file system is an initramfs the tool builds: busybox (``busybox-static``),
an ``/init`` script and the static benchmark ``realprogs/hotplug_bench.c``.
KVM is used when ``/dev/kvm`` can create a VM, else QEMU's software
emulation (TCG), which inflates absolute times: compare ratios then.

Inside, besides the latencies, the ``cpuhp`` tracepoints (``cpuhp_enter``,
``cpuhp_multi_enter``, ``cpuhp_exit``) time every hotplug state of one
offline and one online of CPU 1: today's equivalent of the workshop paper's
callback analysis.

Host mode (``--host --yes``, root only) runs the same benchmark on this
machine's CPUs: never CPU 0, every CPU's initial online state recorded and
restored on exit, error or signal.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import io
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import LinuxError, progs
from .cgroups import online_cpus

SYS_CPU = Path("/sys/devices/system/cpu")
#: The workshop paper's Table 3 (Linux 2.6.31, native hotplug, 4 cores): total
#: ms to take k CPUs offline / online one after another.
PAPER_TABLE3 = {
    ("offline", 1): 25.0,
    ("offline", 2): 60.0,
    ("offline", 3): 137.0,
    ("online", 1): 106.0,
    ("online", 2): 214.0,
    ("online", 3): 331.0,
}
#: "all other processors in the system are halted for 2.6 ms when offlining"
PAPER_HALT_MS = 2.6
DEFAULT_FLAVOUR = "cloud-amd64"


def cache_dir() -> Path:
    env = os.environ.get("HETSCHED_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "hetsched" / "vm" if not env else base


# -- what the VM needs ------------------------------------------------------------


def _need_tools() -> tuple[str, str]:
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        raise LinuxError(
            "qemu-system-x86_64 not found: install it with "
            "apt-get install --no-install-recommends qemu-system-x86 (or run make linux-deps)"
        )
    busybox = None
    for cand in ("/bin/busybox", "/usr/bin/busybox"):
        if Path(cand).exists() and _is_static(Path(cand)):
            busybox = cand
            break
    if busybox is None:
        raise LinuxError(
            "a static busybox is needed for the VM's initramfs: install it with "
            "apt-get install busybox-static (or run make linux-deps)"
        )
    return qemu, busybox


def _is_static(path: Path) -> bool:
    """An ELF file without a program interpreter (PT_INTERP) is static."""
    try:
        data = path.read_bytes()[:4096]
    except OSError:
        return False
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return False
    import struct

    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 4 > len(data):
            break
        if struct.unpack_from("<I", data, off)[0] == 3:  # PT_INTERP
            return False
    return True


def kernel_image(flavour: str = DEFAULT_FLAVOUR, kernel: Path | None = None) -> Path:
    """A kernel to boot: ``kernel`` if given, else the Debian image of
    ``flavour`` fetched with ``apt-get download`` into the cache and unpacked."""
    if kernel is not None:
        if not kernel.is_file():
            raise LinuxError(f"--kernel {kernel}: no such file")
        return kernel
    out = cache_dir()
    have = sorted(out.glob(f"vmlinuz-*-{flavour}"))
    if have:
        return have[-1]
    if shutil.which("apt-get") is None:
        raise LinuxError(
            "no kernel image: apt-get is not available to download one; "
            "give a bzImage with --kernel PATH"
        )
    meta = f"linux-image-{flavour}"
    dep = subprocess.run(
        ["apt-cache", "depends", meta], capture_output=True, text=True, check=False
    )
    if dep.returncode != 0 and os.geteuid() == 0:
        # A fresh machine may not have fetched the package lists yet.
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
        dep = subprocess.run(
            ["apt-cache", "depends", meta], capture_output=True, text=True, check=False
        )
    m = re.search(r"Depends:\s*(linux-image-\S+)", dep.stdout)
    if dep.returncode != 0 or m is None:
        raise LinuxError(
            f"no kernel image: apt-cache does not know {meta} "
            "(run apt-get update, or give a bzImage with --kernel PATH)"
        )
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        # apt's sandbox user may not write here; the download is a plain .deb.
        got = subprocess.run(
            ["apt-get", "download", "-o", "APT::Sandbox::User=root", m.group(1)],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
        debs = list(Path(tmp).glob("*.deb"))
        if got.returncode != 0 or not debs:
            raise LinuxError(
                f"no kernel image: apt-get download {m.group(1)} failed: "
                f"{got.stderr.strip().splitlines()[-1] if got.stderr.strip() else got.returncode}"
                " (give a bzImage with --kernel PATH)"
            )
        tar = subprocess.run(
            ["dpkg-deb", "--fsys-tarfile", str(debs[0])], capture_output=True, check=False
        )
        if tar.returncode != 0:
            raise LinuxError(f"cannot unpack {debs[0].name}: {tar.stderr.decode().strip()}")
        import tarfile

        with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as tf:
            for member in tf.getmembers():
                name = Path(member.name).name
                if member.isfile() and name.startswith("vmlinuz-"):
                    src = tf.extractfile(member)
                    assert src is not None
                    (out / name).write_bytes(src.read())
                    return out / name
    raise LinuxError(f"no vmlinuz in {m.group(1)}")


def _cpio(entries: list[tuple[str, int, bytes, int]]) -> bytes:
    """A ``newc`` cpio archive of ``(name, mode, data, rdev)`` entries."""
    buf = io.BytesIO()

    def pad(n: int) -> None:
        buf.write(b"\0" * ((4 - n % 4) % 4))

    for ino, (name, mode, data, rdev) in enumerate([*entries, ("TRAILER!!!", 0, b"", 0)], 1):
        nm = name.encode() + b"\0"
        hdr = "070701" + "".join(
            f"{v:08x}"
            for v in (ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev >> 8, rdev & 0xFF, len(nm), 0)
        )
        buf.write(hdr.encode())
        buf.write(nm)
        pad(110 + len(nm))
        buf.write(data)
        pad(len(data))
    return buf.getvalue()


INIT = """#!/bin/sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
echo "HSBENCH-BOOTED $(/bin/busybox cat /proc/uptime)"
echo "HSBENCH-KERNEL $(/bin/busybox uname -r)"
echo "HSBENCH-CPUS $(/bin/busybox cat /sys/devices/system/cpu/online)"
T=/sys/kernel/tracing
STATES=0
if [ -d $T/events/cpuhp ]; then
  echo 0 > $T/tracing_on
  echo 4096 > $T/buffer_size_kb
  echo > $T/trace
  echo 1 > $T/events/cpuhp/enable
  echo 1 > $T/tracing_on
  echo 0 > /sys/devices/system/cpu/cpu1/online
  echo 1 > /sys/devices/system/cpu/cpu1/online
  echo 0 > $T/tracing_on
  echo "HSBENCH-TRACE-BEGIN"
  /bin/busybox cat $T/trace
  echo "HSBENCH-TRACE-END"
  echo 0 > $T/events/cpuhp/enable
fi
if [ -r /sys/devices/system/cpu/hotplug/states ]; then
  echo "HSBENCH-STATES-BEGIN"
  /bin/busybox cat /sys/devices/system/cpu/hotplug/states
  echo "HSBENCH-STATES-END"
fi
/hotplug_bench @K@ @REPEATS@
echo "HSBENCH-DONE"
echo o > /proc/sysrq-trigger
/bin/busybox poweroff -f
"""


#: Mode of an executable file in the VM's initramfs.
EXEC_MODE = 0o100755


def busybox_root(busybox: str) -> list[tuple[str, int, bytes, int]]:
    """The initramfs entries every VM of ours needs: the top directories, a
    console and /dev/null, and a static busybox as /bin/sh."""
    entries: list[tuple[str, int, bytes, int]] = [
        (name, 0o040755, b"", 0) for name in ("bin", "dev", "proc", "sys", "tmp")
    ]
    entries += [
        ("dev/console", 0o020600, b"", (5 << 8) | 1),
        ("dev/null", 0o020666, b"", (1 << 8) | 3),
        ("bin/busybox", EXEC_MODE, Path(busybox).read_bytes(), 0),
        ("bin/sh", 0o120777, b"busybox", 0),
    ]
    return entries


def build_initramfs(busybox: str, bench: Path, k: int, repeats: int) -> bytes:
    """The VM's initramfs (gzip'd newc cpio): busybox, /init, the benchmark."""
    init = INIT.replace("@K@", str(k)).replace("@REPEATS@", str(repeats))
    entries = [
        *busybox_root(busybox),
        ("hotplug_bench", EXEC_MODE, bench.read_bytes(), 0),
        ("init", EXEC_MODE, init.encode(), 0),
    ]
    return gzip.compress(_cpio(entries), compresslevel=1)


def bench_binary() -> Path:
    """The static benchmark program (built on first use)."""
    out = progs.build_dir()
    exe = out / "hotplug_bench"
    src = progs.SOURCES / "hotplug_bench.c"
    if exe.exists() and exe.stat().st_mtime >= src.stat().st_mtime:
        return exe
    cc = shutil.which(os.environ.get("CC", "gcc"))
    if cc is None:
        raise LinuxError("gcc not found: install it (apt-get install gcc) to build hotplug_bench")
    out.mkdir(parents=True, exist_ok=True)
    cmd = [cc, *progs.CFLAGS, "-static", "-pthread", "-o", str(exe), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LinuxError(
            f"building hotplug_bench failed (a static build needs libc6-dev): {done.stderr.strip()}"
        )
    return exe


def kvm_usable() -> tuple[bool, str]:
    """Whether ``/dev/kvm`` can create a VM here, and why not."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return False, f"/dev/kvm: {e.strerror}"
    try:
        if fcntl.ioctl(fd, 0xAE00) != 12:  # KVM_GET_API_VERSION
            return False, "/dev/kvm: unexpected API version"
        vm = fcntl.ioctl(fd, 0xAE01, 0)  # KVM_CREATE_VM
        os.close(vm)
        return True, ""
    except OSError as e:
        return False, f"/dev/kvm cannot create a VM: {e.strerror}"
    finally:
        os.close(fd)


# -- parsing -----------------------------------------------------------------


@dataclass
class BenchOutput:
    rows: list[dict[str, Any]]
    singles: list[dict[str, Any]]
    states: list[dict[str, Any]]
    kernel: str
    boot_s: float | None
    log: str


def parse_console(text: str) -> BenchOutput:
    rows: list[dict[str, Any]] = []
    singles: list[dict[str, Any]] = []
    kernel, boot = "", None
    for line in text.splitlines():
        line = line.strip("\r")
        if line.startswith("HSBENCH {"):
            obj = json.loads(line[len("HSBENCH ") :])
            (singles if obj.get("mode") == "single" else rows).append(obj)
        elif line.startswith("HSBENCH-KERNEL "):
            kernel = line.split(" ", 1)[1].strip()
        elif line.startswith("HSBENCH-BOOTED "):
            with contextlib.suppress(ValueError, IndexError):
                boot = float(line.split()[1])
    trace = _between(text, "HSBENCH-TRACE-BEGIN", "HSBENCH-TRACE-END")
    return BenchOutput(rows, singles, cpuhp_states(trace), kernel, boot, text)


def _between(text: str, a: str, b: str) -> str:
    i, j = text.find(a), text.find(b)
    return text[i + len(a) : j] if 0 <= i < j else ""


_ENTER = re.compile(
    r"\s(?P<ts>\d+\.\d+):\s+cpuhp_(?:multi_)?enter:\s+cpu:\s*(?P<cpu>\d+)\s+"
    r"target:\s*(?P<target>\d+)\s+step:\s*(?P<step>\d+)\s+\((?P<fn>[^)]*)\)"
)
_EXIT = re.compile(
    r"\s(?P<ts>\d+\.\d+):\s+cpuhp_exit:\s+cpu:\s*(?P<cpu>\d+)\s+"
    r"state:\s*(?P<state>\d+)\s+step:\s*(?P<step>\d+)\s+ret:\s*(?P<ret>-?\d+)"
)


def cpuhp_states(trace: str) -> list[dict[str, Any]]:
    """Time per hotplug step from a ``cpuhp`` trace: rows ``direction, step,
    callback, ms``. An enter (``cpu: N target: T step: S (callback)``) is
    matched with the next exit of the same CPU and step; the direction is
    ``offline`` when the target is below the step. Steps that wait for
    others (``cpuhp_kick_ap_work``, ``takedown_cpu``, ``bringup_cpu``)
    include the time of the steps the CPU itself runs meanwhile."""
    pending: dict[tuple[int, int], tuple[float, str, str]] = {}
    out: list[dict[str, Any]] = []
    for line in trace.splitlines():
        m = _ENTER.search(line)
        if m:
            direction = "offline" if int(m["target"]) < int(m["step"]) else "online"
            pending[(int(m["cpu"]), int(m["step"]))] = (float(m["ts"]), m["fn"], direction)
            continue
        m = _EXIT.search(line)
        if m:
            start = pending.pop((int(m["cpu"]), int(m["step"])), None)
            if start is not None:
                out.append(
                    {
                        "direction": start[2],
                        "step": int(m["step"]),
                        "callback": start[1],
                        "ms": (float(m["ts"]) - start[0]) * 1e3,
                        "ret": int(m["ret"]),
                    }
                )
    return out


# -- running ----------------------------------------------------------------


def run_vm(
    k: int = 2,
    repeats: int = 3,
    *,
    accel: str = "auto",
    kernel: Path | None = None,
    flavour: str = DEFAULT_FLAVOUR,
    memory_mb: int = 256,
    timeout_s: float = 300.0,
    kvm_probe_s: float = 20.0,
) -> dict[str, Any]:
    """Boot the VM, run the benchmark, return the document (see :func:`summarise`)."""
    if not 1 <= k <= 16:
        raise LinuxError(f"--cpus: {k} is outside 1 to 16")
    if repeats < 1:
        raise LinuxError(f"--repeats: {repeats} must be ≥ 1")
    qemu, busybox = _need_tools()
    notes: list[str] = []
    tries = [accel]
    if accel == "auto":
        ok, why = kvm_usable()
        tries = ["kvm", "tcg"] if ok else ["tcg"]
        if not ok:
            notes.append(f"KVM not usable ({why})")
    image = kernel_image(flavour, kernel)
    bench = bench_binary()
    text = err = ""
    wall = 0.0
    used = tries[0]
    with tempfile.TemporaryDirectory(prefix="hetsched-vm-") as tmp:
        initrd = Path(tmp) / "initrd.gz"
        initrd.write_bytes(build_initramfs(busybox, bench, k, repeats))
        for n, acc in enumerate(tries):
            used = acc
            cmd = [
                qemu,
                "-machine",
                f"q35,accel={acc}",
                "-smp",
                str(k + 2),
                "-m",
                str(memory_mb),
                "-kernel",
                str(image),
                "-initrd",
                str(initrd),
                "-append",
                "console=ttyS0 panic=-1 quiet loglevel=3",
                "-display",
                "none",
                "-serial",
                "stdio",
                "-monitor",
                "none",
                "-no-reboot",
                "-nodefaults",
            ]
            # With a fallback left, KVM must show a booted guest soon: nested
            # virtualisation can offer /dev/kvm and still not run a guest.
            probe = kvm_probe_s if n + 1 < len(tries) else None
            started = time.monotonic()
            text, err, outcome = _boot(cmd, timeout_s, probe)
            wall = time.monotonic() - started
            if outcome == "done" or n + 1 == len(tries):
                break
            reason = (
                f"the guest did not boot within {kvm_probe_s:g} s"
                if outcome == "no-boot"
                else f"qemu failed: {err.strip().splitlines()[-1] if err.strip() else outcome}"
            )
            notes.append(f"KVM offered but unusable ({reason})")
    if used == "tcg":
        notes.append("software emulation (TCG): absolute times are inflated, compare ratios")
    note = "; ".join(notes)
    if "HSBENCH-DONE" not in text:
        raise LinuxError(
            f"the VM ({used}) did not run the benchmark; qemu: "
            f"{err.strip()[-300:] or '-'}; console: {text[-400:]}"
        )
    parsed = parse_console(text)
    return summarise(parsed, mode="vm", accel=used, k=k, note=note, wall_s=wall, image=image)


def _boot(cmd: list[str], timeout_s: float, probe_s: float | None) -> tuple[str, str, str]:
    """Run QEMU until it exits; return (console, stderr, outcome) with outcome
    ``done``, ``no-boot`` (no boot marker within ``probe_s``), ``timeout`` or
    ``exit N``. The VM is always killed before returning."""
    import selectors

    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    start = time.monotonic()
    outcome = "timeout"
    try:
        open_streams = 2
        while open_streams:
            now = time.monotonic() - start
            if now > timeout_s:
                break
            if probe_s is not None and now > probe_s and b"HSBENCH-BOOTED" not in out:
                outcome = "no-boot"
                break
            for key, _ in sel.select(timeout=0.5):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                else:
                    key.data.extend(chunk)
        else:
            rc = proc.wait()
            outcome = "done" if b"HSBENCH-DONE" in out else f"exit {rc}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    return out.decode(errors="replace"), err.decode(errors="replace"), outcome


def summarise(
    parsed: BenchOutput,
    *,
    mode: str,
    accel: str,
    k: int,
    note: str = "",
    wall_s: float | None = None,
    image: Path | None = None,
    online_cpus: int | None = None,
) -> dict[str, Any]:
    """Median rows over the repeats, the comparison with the paper's Table 3
    and a fitted cost model."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in parsed.rows:
        groups.setdefault((r["op"], r["cpus"], r["mode"]), []).append(r)
    rows = []
    for (op, cpus, m), rs in sorted(groups.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        rows.append(
            {
                "op": op,
                "cpus": cpus,
                "mode": m,
                "latency_ms": statistics.median(r["latency_ms"] for r in rs),
                "accel": accel,
                "disturbance_ms": statistics.median(r.get("disturbance_ms", 0.0) for r in rs),
                "repeats": len(rs),
                "paper_ms": PAPER_TABLE3.get((op, cpus)) if m == "serial" else None,
                "failed": any(r.get("rc") for r in rs),
            }
        )
    per_cpu = {
        op: statistics.median([s["latency_ms"] for s in parsed.singles if s["op"] == op] or [0.0])
        for op in ("offline", "online")
    }
    states: dict[tuple[str, int, str], list[float]] = {}
    for s in parsed.states:
        states.setdefault((s["direction"], s["step"], s["callback"]), []).append(s["ms"])
    totals = sorted(states.items(), key=lambda kv: -sum(kv[1]))
    state_rows = [
        {"direction": d, "step": st, "callback": cb, "ms": sum(v)} for (d, st, cb), v in totals
    ]
    doc: dict[str, Any] = {
        "mode": mode,
        "accel": accel,
        "kernel": parsed.kernel or (image.name if image else ""),
        "cpus": k,
        "note": note,
        "boot_s": parsed.boot_s,
        "wall_s": wall_s,
        "rows": rows,
        "per_cpu_ms": per_cpu,
        "fit": fit(rows),
        "cpuhp_states": state_rows,
        "paper": {"table3_ms": {f"{o}-{c}": v for (o, c), v in PAPER_TABLE3.items()}},
    }
    if online_cpus is not None:
        doc["online_cpus"] = online_cpus
    try:
        doc["reconfig_costs"] = reconfig_costs(doc)
    except LinuxError as e:
        doc["reconfig_costs"] = {"error": str(e)}
    return doc


def fit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A cost model fitted to the serial rows: ``latency(k) = k × per_cpu_ms``
    (least squares through the origin) per operation, the median disturbance
    as the stop-machine halt, and whether concurrent requests overlap
    (``concurrency_speedup`` = serial / concurrent time at the largest k)."""
    out: dict[str, Any] = {}
    for op in ("offline", "online"):
        serial = [r for r in rows if r["op"] == op and r["mode"] == "serial"]
        num = sum(r["cpus"] * r["latency_ms"] for r in serial)
        den = sum(r["cpus"] ** 2 for r in serial)
        out[f"{op}_ms_per_cpu"] = num / den if den else None
        conc = [r for r in rows if r["op"] == op and r["mode"] == "concurrent"]
        if conc:
            top = max(conc, key=lambda r: r["cpus"])
            ser = next((r for r in serial if r["cpus"] == top["cpus"]), None)
            out[f"{op}_concurrency_speedup"] = (
                ser["latency_ms"] / top["latency_ms"] if ser and top["latency_ms"] > 0 else None
            )
    halts = [
        r["disturbance_ms"]
        for r in rows
        if r["op"] == "offline" and r["mode"] == "serial" and r["cpus"] == 1
    ]
    out["offline_halt_ms"] = statistics.median(halts) if halts else None
    return out


# -- the simulator's step costs from a measurement ---------------------------------

#: Steps of ``hw/reconfig.rs`` that the benchmark cannot see; they keep the
#: simulator's defaults (µs): an uncontended lock, the checks, the migration
#: of interrupts and timers, the teardown of processor state.
UNMEASURED_STEPS_US = {"lock_us": 1.0, "check_us": 1.0, "migrate_us": 10.0, "teardown_us": 5.0}


def reconfig_costs(doc: dict[str, Any]) -> dict[str, Any]:
    """The simulator's ``ReconfigCosts`` (``crates/hetsched-core/src/hw/reconfig.rs``)
    fitted to a ``hotplug-bench`` document, with the same step structure:

    - ``stop-machine`` (``stop_machine_per_cpu_us`` × n, halting every other
      CPU) ← the halt the spinner saw during one offline (``offline_halt_ms``,
      the median disturbance of the 1-CPU serial offline): the part of
      ``takedown_cpu`` that runs under stop-machine;
    - the notifier rounds (``notify-down-prepare`` + ``notify-dead``,
      ``callbacks`` × ``callback_per_cpu_us`` × n each) ← the rest of the
      1-CPU offline: every other traced offline state (``cpuhp_kick_ap_work``
      with the CPU's own teardown states such as ``sched_cpu_deactivate``,
      the rest of ``takedown_cpu``, the dead callbacks). ``callbacks`` is the
      number of distinct offline callbacks in the trace;
    - ``hardware-start`` ← ``bringup_cpu`` (starts the CPU and waits for it);
      ``arch-init`` ← what remains of the 1-CPU online after the notifier
      rounds and ``hardware-start``. If the notifier rounds (fitted on the
      offline) leave less than ``bringup_cpu``, ``hardware-start`` is cut to
      what remains and ``arch-init`` is 0 (the model has one notifier cost for
      both directions; on Linux 6.1 the offline notifications are far dearer
      than the online ones, see ``docs/real-linux.md``).

    Calibrated: the serial 1-CPU offline and online rows (n = K + 2 CPUs
    online, the VM's size) and the halt; every other row is a prediction.
    """
    rows = doc["rows"]

    def row(op: str, k: int) -> dict[str, Any]:
        for r in rows:
            if r["op"] == op and r["cpus"] == k and r["mode"] == "serial":
                return r
        raise LinuxError(f"hotplug document: no serial {op} row for {k} CPU")

    n = int(doc.get("online_cpus") or int(doc["cpus"]) + 2)
    if n < 2:
        raise LinuxError("hotplug document: the number of online CPUs is unknown")
    off1 = float(row("offline", 1)["latency_ms"]) * 1e3
    on1 = float(row("online", 1)["latency_ms"]) * 1e3
    halt = float(row("offline", 1)["disturbance_ms"]) * 1e3
    states = doc.get("cpuhp_states") or []
    off_cbs = {s["callback"] for s in states if s["direction"] == "offline"}
    bringup = sum(s["ms"] for s in states if s["callback"] == "bringup_cpu") * 1e3
    u = UNMEASURED_STEPS_US
    callbacks = max(len(off_cbs), 1)
    fixed_off = 2 * u["lock_us"] + u["check_us"] + u["migrate_us"] + u["teardown_us"]
    notify_total = off1 - fixed_off - halt
    if notify_total <= 0:
        raise LinuxError(
            f"hotplug document: the halt ({halt / 1e3:.1f} ms) is not below the 1-CPU "
            f"offline ({off1 / 1e3:.1f} ms); no step costs fit"
        )
    per_cb = notify_total / (2 * callbacks * n)
    fixed_on = 2 * u["lock_us"] + u["check_us"]
    local_on = on1 - fixed_on - notify_total
    if local_on < 0:
        raise LinuxError(
            f"hotplug document: the 1-CPU online ({on1 / 1e3:.1f} ms) is shorter than the "
            f"notifier rounds fitted on the offline ({notify_total / 1e3:.1f} ms); no step "
            "costs fit"
        )
    hw = min(bringup, local_on)
    return {
        **u,
        "callbacks": callbacks,
        "callback_per_cpu_us": per_cb,
        "stop_machine_per_cpu_us": halt / n,
        "hw_start_us": hw,
        "arch_init_us": local_on - hw,
        "online_cpus": n,
        "calibrated_on": {
            "offline_1_ms": off1 / 1e3,
            "online_1_ms": on1 / 1e3,
            "halt_ms": halt / 1e3,
        },
    }


def rust_costs(costs: dict[str, Any]) -> str:
    """The fields of ``costs`` as Rust struct fields (for ``hw/reconfig.rs``)."""
    keys = [
        "lock_us", "check_us", "callbacks", "callback_per_cpu_us", "migrate_us",
        "stop_machine_per_cpu_us", "teardown_us", "hw_start_us", "arch_init_us",
    ]  # fmt: skip
    out = []
    for k in keys:
        v = costs[k]
        out.append(f"{k}: {v}," if isinstance(v, int) else f"{k}: {float(v)!r},")
    return "\n".join(out)


def predict(doc: dict[str, Any], costs: str = "linux-6.1-tcg") -> list[dict[str, Any]]:
    """What the simulator with the cost set ``costs`` predicts for every row
    of a ``hotplug-bench`` document: the engine runs the same operations on
    a machine of as many CPUs (CPUs 1..k offline at t = 0, back online at
    t = 5 s; ``hotplug``, one CPU after another, which is also what Linux
    does with concurrent requests). Rows: ``op``, ``cpus``, ``mode``,
    ``measured_ms``, ``predicted_ms``, ``error`` (relative, measured against
    predicted), ``role`` (``calibration`` for the rows the cost set was
    fitted on, else ``prediction``); plus ``halt`` rows: the longest halt
    of the other CPUs (the spinner's disturbance) against the model's
    longest stop-machine step."""
    from .. import api
    from ..reproduce.hotplug import machine

    n = int(doc.get("online_cpus") or int(doc["cpus"]) + 2)
    cache: dict[int, dict[str, dict[str, Any]]] = {}

    def sim(k: int) -> dict[str, dict[str, Any]]:
        if k not in cache:
            cpus = list(range(1, k + 1))
            rec = api.run(
                {
                    "name": f"hotplug-{costs}-{k}",
                    "duration_s": 10.0,
                    "stop_when_done": False,
                    "machine": machine(n),
                    "dynamic": {
                        "mechanism": "hotplug",
                        "costs": costs,
                        "events": [
                            {"at_ms": 0.0, "op": "offline", "cpus": cpus},
                            {"at_ms": 5000.0, "op": "online", "cpus": cpus},
                        ],
                    },
                }
            ).reconfigs
            cache[k] = {str(r["op"]): r for r in rec.to_dict("records")}
        return cache[k]

    def longest_stop_ms(rec: dict[str, Any]) -> float:
        stops = [
            float(part.rsplit(":", 1)[1])
            for part in str(rec["steps"]).split()
            if part.startswith("stop-machine:")
        ]
        return max(stops, default=0.0) / 1e3

    out = []
    for r in doc["rows"]:
        rec = sim(int(r["cpus"]))[r["op"]]
        pred = float(rec["latency_us"]) / 1e3
        meas = float(r["latency_ms"])
        calib = r["mode"] == "serial" and r["cpus"] == 1
        out.append(
            {
                "op": r["op"],
                "cpus": r["cpus"],
                "mode": r["mode"],
                "measured_ms": meas,
                "predicted_ms": pred,
                "error": (meas - pred) / pred if pred else None,
                "role": "calibration" if calib else "prediction",
            }
        )
        if r["op"] == "offline" and r["mode"] == "serial":
            halt = longest_stop_ms(rec)
            out.append(
                {
                    "op": "halt",
                    "cpus": r["cpus"],
                    "mode": r["mode"],
                    "measured_ms": float(r["disturbance_ms"]),
                    "predicted_ms": halt,
                    "error": (float(r["disturbance_ms"]) - halt) / halt if halt else None,
                    "role": "calibration" if calib else "prediction",
                }
            )
    return out


# -- host mode ----------------------------------------------------------------


def run_host(k: int, repeats: int, yes: bool) -> dict[str, Any]:
    """The benchmark on this machine's CPUs (see the module doc)."""
    if not yes:
        raise LinuxError(
            "host mode takes this machine's CPUs offline: confirm with --host --yes "
            "(VM mode, the default, needs no confirmation)"
        )
    if os.geteuid() != 0:
        raise LinuxError(
            "host mode needs root: writing /sys/devices/system/cpu/cpuN/online needs CAP_SYS_ADMIN"
        )
    present = sorted(int(p.name[3:]) for p in SYS_CPU.glob("cpu[0-9]*") if (p / "online").exists())
    candidates = [c for c in present if c != 0]
    if len(candidates) < k + 1:
        raise LinuxError(
            f"host mode with --cpus {k} needs {k + 1} hot-pluggable CPUs besides cpu0 "
            f"(one keeps a spinner); this machine has {len(candidates)}"
        )
    for c in candidates[: k + 1]:
        if not os.access(SYS_CPU / f"cpu{c}" / "online", os.W_OK):
            raise LinuxError(f"{SYS_CPU}/cpu{c}/online is not writable (read-only sysfs?)")
    initial = {c: (SYS_CPU / f"cpu{c}" / "online").read_text().strip() for c in present}
    use, spin = candidates[:k], candidates[k]
    bench = bench_binary()

    def restore() -> None:
        for c, state in initial.items():
            path = SYS_CPU / f"cpu{c}" / "online"
            with contextlib.suppress(OSError):
                if path.read_text().strip() != state:
                    path.write_text(state)

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}

    def on_signal(signum: int, _f: Any) -> None:
        raise LinuxError(f"stopped by {signal.Signals(signum).name}; CPUs restored")

    for s in old:
        signal.signal(s, on_signal)
    try:
        for c in [*use, spin]:
            if initial[c] != "1":
                (SYS_CPU / f"cpu{c}" / "online").write_text("1")
        done = subprocess.run(
            [str(bench), str(k), str(repeats), str(spin), *map(str, use)],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        restore()
        for s, h in old.items():
            signal.signal(s, h)
    if done.returncode != 0 and "HSBENCH-END" not in done.stdout:
        raise LinuxError(f"hotplug_bench failed: {done.stderr.strip()}")
    text = done.stdout + "\nHSBENCH-KERNEL " + os.uname().release + "\n"
    return summarise(
        parse_console(text), mode="host", accel="host", k=k, online_cpus=len(online_cpus())
    )


# -- command line ------------------------------------------------------------------


def register(lsub: Any, guard: Any) -> None:
    h = lsub.add_parser("hotplug-bench", help="CPU hotplug latency: in a QEMU VM, or on this host")
    h.add_argument("--cpus", type=int, default=2, help="K: take 1..K CPUs offline (default 2)")
    h.add_argument("--repeats", type=int, default=3, help="repetitions, median reported")
    h.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto")
    h.add_argument("--kernel", type=Path, help="boot this bzImage instead of a Debian kernel")
    h.add_argument("--flavour", default=DEFAULT_FLAVOUR, help="Debian kernel flavour to download")
    h.add_argument("--timeout", type=float, default=300.0, help="give up on the VM after this long")
    h.add_argument("--host", action="store_true", help="run on this machine instead (root)")
    h.add_argument("--yes", action="store_true", help="confirm host mode")
    h.add_argument("--out", type=Path, help="also write the document as JSON here")
    h.add_argument(
        "--predict",
        type=Path,
        metavar="FILE",
        help="run no benchmark: compare the document FILE (from --out) with the simulator's "
        "prediction under --costs",
    )
    h.add_argument(
        "--costs",
        default="linux-6.1-tcg",
        help="the simulator's [dynamic] costs for --predict (default linux-6.1-tcg)",
    )
    h.add_argument("--json", action="store_true", help="print the rows as JSON")
    h.set_defaults(handler=guard(_cmd))


def _cmd_predict(args: Any) -> int:
    from .._text import table

    try:
        doc = json.loads(args.predict.read_text())
        rows = predict(doc, args.costs)
    except OSError as e:
        raise LinuxError(f"--predict {args.predict}: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise LinuxError(
            f"--predict {args.predict}: not a hotplug-bench document (--out): {e}"
        ) from None
    except Exception as e:  # the simulator refuses a cost set
        raise LinuxError(f"--costs {args.costs}: {e}") from None
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{doc.get('kernel', '?')} ({doc.get('accel', '?')}) against costs = {args.costs!r}")
    print(
        table(
            ["op", "cpus", "mode", "measured", "predicted", "error", "role"],
            [
                [
                    r["op"],
                    r["cpus"],
                    r["mode"],
                    f"{r['measured_ms']:.1f} ms",
                    f"{r['predicted_ms']:.1f} ms",
                    f"{100 * r['error']:+.1f} %" if r["error"] is not None else "-",
                    r["role"],
                ]
                for r in rows
            ],
        )
    )
    return 0


def _cmd(args: Any) -> int:
    from .._text import table

    if args.yes and not args.host:
        raise LinuxError("--yes only confirms --host")
    if args.predict is not None:
        return _cmd_predict(args)
    if args.host:
        doc = run_host(args.cpus, args.repeats, args.yes)
    else:
        doc = run_vm(
            args.cpus,
            args.repeats,
            accel=args.accel,
            kernel=args.kernel,
            flavour=args.flavour,
            timeout_s=args.timeout,
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    if args.json:
        print(json.dumps(doc["rows"], indent=2))
        return 0
    print(f"{doc['mode']} mode, {doc['accel']}, kernel {doc['kernel']}, {doc['cpus']} CPUs")
    if doc["note"]:
        print(f"note: {doc['note']}")
    print(
        table(
            ["op", "cpus", "mode", "latency", "paper (2.6.31)", "disturbance"],
            [
                [
                    r["op"],
                    r["cpus"],
                    r["mode"],
                    f"{r['latency_ms']:.2f} ms",
                    f"{r['paper_ms']:g} ms" if r["paper_ms"] is not None else "-",
                    f"{r['disturbance_ms']:.3f} ms",
                ]
                for r in doc["rows"]
            ],
        )
    )
    if doc["cpuhp_states"]:
        print("\nslowest hotplug states (one offline + one online of cpu1)")
        print(
            table(
                ["direction", "step", "callback", "ms"],
                [
                    [s["direction"], s["step"], s["callback"], f"{s['ms']:.3f}"]
                    for s in doc["cpuhp_states"][:12]
                ],
            )
        )
    print(
        "\nfit: "
        + ", ".join(
            f"{k} = {v:.3f}" if isinstance(v, float) else f"{k} = {v}"
            for k, v in doc["fit"].items()
        )
    )
    return 0
