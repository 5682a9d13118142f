"""Measure the two machine constants of rt-app's ``mem`` and ``iorun`` events.

rt-app's ``mem`` event memsets its thread's buffer of ``mem_buffer_size``
bytes (``global.mem_buffer_size``, default 4 MiB) in chunks of that size
until it has written the event's number of bytes; ``iorun`` write()s the
same buffer to ``global.io_device`` (default ``/dev/null``) the same way
(``memload`` and ``ioload`` in rt-app's src/rt-app.c). hetsched models each
as CPU work of bytes / rate. This script measures both rates on the machine
it runs on, the way rt-app does them, and prints them (bytes per second):

    python tools/rtapp_rates.py [--buffer BYTES] [--seconds S] [--device PATH]

It takes the best of several rounds (the least disturbed by other work on
the machine). docs/linux.md records the numbers of the machine the defaults
in ``hetsched.rtapp`` (``MEM_BYTES_PER_S``, ``IO_BYTES_PER_S``) come from.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import time

DEFAULT_BUFFER = 4 * 1024 * 1024  # rt-app's mem_buffer_size default (doc/tutorial.txt)


def _best_rate(step, chunk: int, seconds: float, rounds: int = 5) -> tuple[float, int]:
    """Best bytes/s over ``rounds`` rounds of about ``seconds`` / ``rounds`` each."""
    best = 0.0
    calls = 0
    for _ in range(rounds):
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds / rounds
        while True:
            step()
            n += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, n * chunk / (now - t0))
        calls += n
    return best, calls


def measure(buffer: int, seconds: float, device: str) -> dict[str, object]:
    buf = ctypes.create_string_buffer(buffer)
    addr = ctypes.addressof(buf)
    mem, mem_calls = _best_rate(lambda: ctypes.memset(addr, 0, buffer), buffer, seconds)
    view = memoryview(buf).cast("B")
    fd = os.open(device, os.O_WRONLY)
    try:
        io, io_calls = _best_rate(lambda: os.write(fd, view), buffer, seconds)
    finally:
        os.close(fd)
    return {
        "machine": f"{platform.node()} {platform.machine()} {platform.processor()}".strip(),
        "cpu": _cpu_model(),
        "buffer_bytes": buffer,
        "io_device": device,
        "mem_bytes_per_s": float(f"{mem:.3g}"),
        "io_bytes_per_s": float(f"{io:.3g}"),
        "memsets": mem_calls,
        "writes": io_calls,
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--buffer", type=int, default=DEFAULT_BUFFER, help="bytes per memset/write")
    ap.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    ap.add_argument("--device", default="/dev/null", help="file or device iorun writes to")
    args = ap.parse_args()
    if args.buffer <= 0 or args.seconds <= 0:
        ap.error("--buffer and --seconds must be > 0")
    print(json.dumps(measure(args.buffer, args.seconds, args.device), indent=2))


if __name__ == "__main__":
    main()
