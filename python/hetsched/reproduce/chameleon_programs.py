"""The model programs of Chameleon's evaluation (ASPLOS 2012, Table 3, §5.2).

The paper ran real programs on an emulated dynamic processor; it gives their
style of parallelism and, for the sequential ones, their class (how much a
faster context speeds them up: low, medium or high CPU). It gives no run
times or sizes, so the amounts of work here are assumptions (stated per
program) chosen to make runs of a few simulated seconds; the rows compare
relative times, allocations and orders, never absolute run times.

Each program is built from the engine's existing workload kinds
(``docs/model.md``):

==================  ===============  ==========================================
program             kind             paper fact it models
==================  ===============  ==========================================
``fibonacci``       ``dynamic``      task-parallel threads on Intel TBB: work
                                     stealing is modelled as many small chunks
                                     taken from a shared queue, so a faster
                                     context simply takes more chunks
``pmake``           ``pool``         task-parallel processes: a pool of
                                     compiler processes, each job computes and
                                     then waits for I/O (§2.2's IPI/RCU rates
                                     are measured under it)
``blackscholes``    ``parallel``     data-parallel threads: a static split of
                                     the data, one barrier at the end — the
                                     slowest thread sets the time
``mandelbrot-sb``   ``parallel``     OpenMP kernel, static binding of rows to
                                     threads (rounds of equal shares and a
                                     barrier per round, where libgomp's
                                     threads spin before they sleep)
``mandelbrot-db``   ``dynamic``      OpenMP kernel, dynamic binding: threads
                                     take rows from a queue, so a faster
                                     context executes more of them
``nqueen``          ``sequential``   high-CPU single thread (§5.2: used as the
                                     sequential kernel, behaves like SPEC)
``gcc``, ``astar``  ``sequential``   low-CPU single threads (SPEC CPU 2006)
``dealii``, ``lbm`` ``sequential``   medium-CPU single threads (``lbn`` in the
                                     paper's text is ``lbm``)
``sjeng``,          ``sequential``   high-CPU single threads
``h264ref``
==================  ===============  ==========================================

The parallel programs are CPU-bound (class ``high`` by default: the paper
picks CPU-bound programs, §5.2, and does not class them); pass ``cls`` to
change it.

Mandelbrot-SB's barrier waits spin before they sleep, as libgomp's do
(``barrier_spin_ms``, :func:`openmp_barrier_spin_ms`): a waiting thread keeps
its CPU busy for ``GOMP_SPINCOUNT`` iterations of its spin loop. The testbed's
Linux 2.6.31 points to a GCC 4.4 distribution, whose libgomp spins 20 million
iterations when neither ``OMP_WAIT_POLICY`` nor ``GOMP_SPINCOUNT`` is set
(GCC r167371, December 2010, lowered that default to 300 000 for GCC 4.6)
and 100 when the program has more OpenMP threads than CPUs in its affinity
mask (the throttled count, GCC r133351, the libgomp of GCC 4.4; today's
libgomp manual, ``GOMP_SPINCOUNT``, documents both rules). One iteration is a
load, a compare and a ``pause``, whose latency is about 10 cycles before
Skylake (Intel 64 and IA-32 Architectures Optimization Reference Manual,
Skylake's "Pause Latency" section); at the X5650's 2.66 GHz (Turbo Boost
off, §5.1) 20 million iterations are 2·10⁸ cycles, 75.2 ms at full clock:
150 ms on a baseline CPU at a 50% duty cycle. Mandelbrot-DB (``dynamic``) and
the other programs have no barrier between rounds in the model and do not
spin.
"""

from __future__ import annotations

from typing import Any

#: Class of each sequential program (Table 3).
SEQUENTIAL_CLASS = {
    "gcc": "low",
    "astar": "low",
    "dealii": "medium",
    "lbm": "medium",
    "sjeng": "high",
    "nqueen": "high",
    "h264ref": "high",
}

#: Work of one sequential program alone on a baseline CPU, ms (assumption).
SEQUENTIAL_WORK_MS = 4000.0

#: libgomp's spin count before a barrier wait sleeps, GCC 4.4 with neither
#: OMP_WAIT_POLICY nor GOMP_SPINCOUNT set (GCC r167371 changed it to 300 000
#: from GCC 4.6 on), and its throttled count when a program has more OpenMP
#: threads than available CPUs (GCC r133351).
LIBGOMP_SPIN_COUNT = 20_000_000
LIBGOMP_THROTTLED_SPIN_COUNT = 100
#: Cycles per iteration of the spin loop: the latency of ``pause`` before
#: Skylake, about 10 cycles (Intel Optimization Reference Manual).
SPIN_ITERATION_CYCLES = 10
#: The X5650's clock with Turbo Boost off (§5.1), GHz: one reference ms of
#: work is a ms at this clock with the full duty cycle.
X5650_GHZ = 2.66


def openmp_barrier_spin_ms(threads: int, cpus: int) -> float:
    """Reference ms a libgomp thread spins at a barrier before it sleeps, for
    a program of ``threads`` OpenMP threads whose affinity mask holds
    ``cpus`` CPUs (the throttled count when ``threads > cpus``)."""
    if threads < 1 or cpus < 1:
        raise ValueError(f"threads and cpus must be at least 1, got {threads} and {cpus}")
    spins = LIBGOMP_THROTTLED_SPIN_COUNT if threads > cpus else LIBGOMP_SPIN_COUNT
    return spins * SPIN_ITERATION_CYCLES / (X5650_GHZ * 1e6)


PARALLEL = ("fibonacci", "pmake", "blackscholes", "mandelbrot-sb", "mandelbrot-db")
NAMES = PARALLEL + tuple(SEQUENTIAL_CLASS)


def model_program(
    name: str,
    *,
    threads: int = 16,
    work_ms: float | None = None,
    cls: str | None = None,
    program_name: str | None = None,
    start_ms: float = 0.0,
    cpus: int | None = None,
) -> dict[str, Any]:
    """A program of the scenario schema for Chameleon's model program ``name``.

    ``threads`` is the parallel programs' thread count (pmake: its worker
    processes); ``work_ms`` the total work on one baseline CPU (default: 4 s
    for a sequential program, 2 s per thread for a parallel one);
    ``program_name`` the name in the scenario (default ``name``); ``cpus``
    the CPUs the OpenMP runtime finds in its affinity mask (default: one per
    thread), which sets Mandelbrot-SB's barrier spin.
    Raises ``ValueError`` for an unknown program or bad numbers.
    """
    if name not in NAMES:
        raise ValueError(f"unknown Chameleon model program {name!r}; known: {', '.join(NAMES)}")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    if work_ms is not None and not work_ms > 0:
        raise ValueError(f"work_ms must be > 0, got {work_ms}")
    prog: dict[str, Any] = {"name": program_name or name}
    if start_ms:
        prog["start_ms"] = start_ms
    if name in SEQUENTIAL_CLASS:
        prog.update(
            kind="sequential",
            **{"class": cls or SEQUENTIAL_CLASS[name]},
            work_ms=work_ms or SEQUENTIAL_WORK_MS,
        )
        return prog
    total = work_ms or 2000.0 * threads
    prog["class"] = cls or "high"
    if name == "fibonacci":
        # TBB: recursive tasks, far more of them than threads.
        prog.update(kind="dynamic", threads=threads, work_ms=total, chunks=64 * threads)
    elif name == "mandelbrot-db":
        # Dynamic binding: rows from a shared queue (a few per thread).
        prog.update(kind="dynamic", threads=threads, work_ms=total, chunks=8 * threads)
    elif name == "pmake":
        # A pool of compiler processes; each job computes then writes (I/O).
        jobs = 8 * threads
        prog.update(kind="pool", threads=threads, chunks=jobs, work_ms=total, io_ms=5.0)
    elif name == "blackscholes":
        prog.update(kind="parallel", threads=threads, work_ms=total)
    elif name == "mandelbrot-sb":
        prog.update(
            kind="parallel",
            threads=threads,
            work_ms=total,
            iterations=4,
            barrier_spin_ms=openmp_barrier_spin_ms(threads, cpus or threads),
        )
    return prog
