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
                                     barrier per round)
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
) -> dict[str, Any]:
    """A program of the scenario schema for Chameleon's model program ``name``.

    ``threads`` is the parallel programs' thread count (pmake: its worker
    processes); ``work_ms`` the total work on one baseline CPU (default: 4 s
    for a sequential program, 2 s per thread for a parallel one);
    ``program_name`` the name in the scenario (default ``name``).
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
        prog.update(kind="parallel", threads=threads, work_ms=total, iterations=4)
    return prog
