"""Figures of runs and sweeps, HTML reports, and reading a run folder back."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import hetsched
from hetsched import cli, plot, report

SCENARIO = {
    "name": "figs",
    "duration_s": 2.0,
    "scheduler": "cfs",
    "governor": "ondemand",
    "machine": {"preset": "big-little-4+4"},
    "workload": {
        "programs": [
            {"name": "par", "kind": "parallel", "threads": 6, "work_ms": 200, "iterations": 2},
            {"name": "ui", "kind": "phases", "threads": 2, "loops": 10,
             "phases": [{"compute_ms": 3}, {"sleep_ms": 12}]},
        ]
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    hetsched.run(SCENARIO, trace=True).save(out)
    return out


def test_results_load_reads_back_what_save_wrote(run_dir: Path) -> None:
    res = hetsched.Results.load(run_dir)
    original = hetsched.run(SCENARIO, trace=True)
    assert res.summary["energy_j"] == original.summary["energy_j"]
    assert res.trace == original.trace
    assert res.tasks["run_s_by_type"].iloc[0] == original.tasks["run_s_by_type"].iloc[0]
    pd.testing.assert_frame_equal(res.cpus, original.cpus)


@pytest.mark.parametrize("kind", ["timeline", "utilization", "power", "fairness"])
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_every_run_figure_is_written(run_dir: Path, tmp_path: Path, kind, suffix) -> None:
    path = plot.plot(run_dir, kind, tmp_path / f"{kind}{suffix}")
    data = path.read_bytes()
    if suffix == ".png":
        assert data.startswith(b"\x89PNG")
    else:
        assert b"<svg" in data[:2000]


def test_utilisation_bins_add_up_to_each_cpus_busy_time(run_dir: Path) -> None:
    res = hetsched.Results.load(run_dir)
    end = res.summary["sim_end_s"]
    _, busy = plot._busy_per_bin(res.trace, len(res.cpus), end, 50)
    for cpu, row in res.cpus.iterrows():
        assert sum(busy[cpu]) == pytest.approx(row["busy_s"], rel=1e-6, abs=1e-9)


def test_energy_estimate_is_exact_for_compute_bound_work(run_dir: Path) -> None:
    # mem = 0, duty cycle 1, no SMT: the estimate prices each interval as the engine does.
    res = hetsched.Results.load(run_dir)
    _, energy = plot.energy_estimate(res, bins=64)
    assert sum(energy) == pytest.approx(res.summary["energy_j"], rel=1e-6)


def test_figures_that_need_a_trace_say_so(tmp_path: Path) -> None:
    hetsched.run(SCENARIO).save(tmp_path)
    with pytest.raises(plot.PlotError, match="run it with --trace"):
        plot.plot(tmp_path, "timeline", tmp_path / "t.png")
    assert plot.plot(tmp_path, "fairness").name == "fairness.png"


def test_timeline_marks_reconfiguration_events(run_dir: Path) -> None:
    res = hetsched.Results.load(run_dir)
    res.trace.append({"type": "cpu_offline", "t_ns": 10_000_000, "cpu": 3})
    fig = plot.timeline(res)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "reconfiguration" in labels
    assert any(label.startswith("migration") for label in labels) == (res.summary["migrations"] > 0)


def _sweep_frame() -> pd.DataFrame:
    rows = []
    for seed, (a, b) in enumerate([(10.0, 5.0), (10.0, 4.0), (12.0, 6.0)]):
        rows.append({"scheduler": "base", "seed": seed, "m": "x", "makespan_s": a})
        rows.append({"scheduler": "fast", "seed": seed, "m": "x", "makespan_s": b})
        rows.append({"scheduler": "base", "seed": seed, "m": "y", "makespan_s": a})
        rows.append({"scheduler": "fast", "seed": seed, "m": "y", "makespan_s": a})
    t = pd.DataFrame(rows)
    t["status"] = "ok"
    t.attrs["axes"] = ["scheduler", "seed", "m"]
    return t


def test_speedup_pairs_runs_by_seed_and_averages() -> None:
    st = plot.speedup_table(_sweep_frame()).set_index(["group", "scheduler"])
    fast_x = st.loc[("m=x", "fast")]
    assert fast_x["speedup"] == pytest.approx((2.0 + 2.5 + 2.0) / 3)
    assert fast_x["std"] == pytest.approx(pd.Series([2.0, 2.5, 2.0]).std())
    assert fast_x["n"] == 3
    assert st.loc[("m=y", "fast"), "speedup"] == pytest.approx(1.0)
    assert st.loc[("m=x", "base"), "speedup"] == pytest.approx(1.0)
    with pytest.raises(plot.PlotError, match="baseline 'nope'"):
        plot.speedup_table(_sweep_frame(), baseline="nope")
    with pytest.raises(plot.PlotError, match="no column 'joules'"):
        plot.speedup_table(_sweep_frame(), metric="joules")


def test_run_report_is_self_contained(run_dir: Path, tmp_path: Path) -> None:
    path = report.write_report(run_dir, tmp_path / "r.html")
    text = path.read_text()
    assert text.count("<svg") == 4  # fairness, timeline, utilisation, power
    assert "<h2>Programs</h2>" in text and "par" in text
    assert "src=" not in text and "<link" not in text


def test_sweep_report_and_speedup_figure(tmp_path: Path) -> None:
    base = {**SCENARIO, "governor": "performance"}
    hetsched.sweep(
        base,
        {"scheduler": ["cfs", "faster-first", "no-such"], "seed": [1, 2]},
        out=tmp_path,
        backend="serial",
    )
    assert plot.plot(tmp_path, "speedup").exists()
    text = report.render_report(tmp_path)
    assert "Failed runs" in text and "no-such" in text
    assert text.count("<svg") == 1
    assert "faster-first" in text


def test_plot_and_report_cli(run_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "t.svg"
    assert cli.main(["plot", str(run_dir), "--kind", "timeline", "--out", str(out)]) == 0
    assert out.exists()
    assert cli.main(["report", str(run_dir), "--out", str(tmp_path / "r.html")]) == 0
    assert cli.main(["plot", str(tmp_path / "nothing")]) == 2
    assert "no such results folder" in capsys.readouterr().err
    assert cli.main(["plot", str(run_dir), "--kind", "speedup"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hetsched: error:") and "sweep folder" in err and "\n" not in err
