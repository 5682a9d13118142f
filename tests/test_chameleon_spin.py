"""libgomp's spin-then-sleep barrier waits in Chameleon's Mandelbrot-SB,
worked by hand from the constants' sources (docs/reproducing.md)."""

from __future__ import annotations

import pytest

from hetsched.reproduce import chameleon
from hetsched.reproduce.chameleon_programs import model_program, openmp_barrier_spin_ms


def test_spin_is_gcc_4_4_default_count_of_pause_loops_at_the_x5650_clock() -> None:
    # 20 000 000 iterations x 10 cycles / 2.66 GHz = 75.19 ms at full clock.
    assert openmp_barrier_spin_ms(24, 24) == pytest.approx(2e8 / 2.66e6)
    assert openmp_barrier_spin_ms(24, 24) == pytest.approx(75.188, abs=1e-3)


def test_more_threads_than_cpus_spin_the_throttled_count() -> None:
    # 100 iterations x 10 cycles / 2.66 GHz = 0.376 µs.
    assert openmp_barrier_spin_ms(24, 1) == pytest.approx(1000 / 2.66e6)
    assert openmp_barrier_spin_ms(15, 12) == pytest.approx(1000 / 2.66e6)


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="threads and cpus must be at least 1"):
        openmp_barrier_spin_ms(0, 4)


def test_only_the_static_openmp_kernel_spins() -> None:
    assert model_program("mandelbrot-sb", threads=24)["barrier_spin_ms"] == pytest.approx(
        75.188, abs=1e-3
    )
    assert model_program("mandelbrot-sb", threads=24, cpus=12)["barrier_spin_ms"] < 1e-3
    for name in ("mandelbrot-db", "blackscholes", "fibonacci", "nqueen"):
        assert "barrier_spin_ms" not in model_program(name, threads=4)


def test_mixes_pass_the_cpus_libgomp_sees() -> None:
    def par(scn: dict) -> dict:
        return next(p for p in scn["workload"]["programs"] if p["name"] == "parallel")

    # Figure 7 on the dynamic processor: 24 threads, 24 CPUs: full spin.
    full = par(chameleon.mix_scenario("dynamic", binding="mandelbrot-sb", scale="quick"))
    assert full["barrier_spin_ms"] == pytest.approx(75.188, abs=1e-3)
    # ACMP-3: 15 threads bound to the 12 slow CPUs: throttled.
    acmp = par(chameleon.mix_scenario("acmp3", binding="mandelbrot-sb", scale="quick"))
    assert acmp["barrier_spin_ms"] < 1e-3
