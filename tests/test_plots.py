"""Figures of runs and sweeps, HTML reports, and reading a run folder back."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import hetsched
from hetsched import cli, plot, report
from hetsched._text import seconds

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

    # Figures first, one summary, numbers for people.
    assert text.index("<figure") < text.index("<h2>Summary</h2>")
    assert text.index("<figure") < text.index("<table")
    assert text.count("<h2>Summary</h2>") == 1 and "<pre>hetsched run" not in text
    body = re.sub(r"<svg.*?</svg>", "", text, flags=re.S)  # figures' own coordinates aside
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", body)
    assert cells
    assert not [c for c in cells if re.fullmatch(r"-?[\d.]+e\+\d+", c)]  # 2.21519e+06
    # No float noise: at most 4 significant digits (0.7267171520000001).
    assert not [c for c in cells if re.fullmatch(r"-?[\d,]*\.\d+", c) and _significant(c) > 4]
    res = hetsched.Results.load(run_dir)
    assert f"makespan {seconds(res.summary['makespan_s'])};" in text  # the headline


def _significant(text: str) -> int:
    return len(text.lstrip("-").replace(",", "").replace(".", "").lstrip("0"))


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


# Figures a reader can use at any size.


def _traced(machine: dict, tmp_path: Path, name: str) -> Path:
    scenario = {
        "name": name,
        "duration_s": 0.2,
        "scheduler": "cfs",
        "governor": "schedutil",
        "machine": machine,
        "workload": {"programs": [{"name": "p", "kind": "parallel", "threads": 8, "work_ms": 20}]},
    }
    return hetsched.run(scenario, trace=True).save(tmp_path / name)


def _titles(fig) -> list[str]:
    return [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]


def test_utilisation_has_a_panel_pair_per_frequency_domain(run_dir: Path) -> None:
    fig = plot.utilization(run_dir)  # big.LITTLE 4+4: two domains
    titles = _titles(fig)
    assert titles == [
        "domain 0 (cpu0-3, big): utilisation",
        "domain 0 (cpu0-3, big): frequency",
        "domain 1 (cpu4-7, little): utilisation",
        "domain 1 (cpu4-7, little): frequency",
    ]
    freq_axes = [ax for ax in fig.axes if ax.get_title(loc="left").endswith("frequency")]
    # One frequency line per panel: none can hide another.
    assert [len(ax.get_lines()) for ax in freq_axes] == [1, 1]
    assert freq_axes[0].get_ylim() == freq_axes[1].get_ylim()  # comparable heights


def test_utilisation_beyond_16_cpus_is_one_heat_map(tmp_path: Path) -> None:
    machine = {
        "clusters": [
            {"type": "big", "cores": 16, "count": 2},
            {"type": "little", "cores": 16, "count": 2},
        ],
        "types": {"big": {"capacity": 1024}, "little": {"capacity": 512}},
    }
    fig = plot.utilization(_traced(machine, tmp_path, "wide"))
    heat = next(ax for ax in fig.axes if ax.get_title(loc="left") == "utilisation per CPU")
    assert heat.images[0].get_array().shape == (64, 100)  # every CPU, every bin
    labels = [t.get_text() for t in heat.get_yticklabels()]
    assert labels[0] == "domain 0 (cpu0-15, big)" and len(labels) == 4  # by domain
    assert _titles(fig)[1:] == [f"domain {d} ({r}): frequency" for d, r in
                                enumerate(["cpu0-15, big", "cpu16-31, big",
                                           "cpu32-47, little", "cpu48-63, little"])]  # fmt: skip


def test_utilisation_with_per_core_frequencies_draws_them_as_a_heat_map(tmp_path: Path) -> None:
    fig = plot.utilization(_traced({"preset": "patel-opteron-8"}, tmp_path, "percore"))
    assert _titles(fig) == ["utilisation per CPU", "frequency per domain"]
    freq = fig.axes[1]
    assert freq.images[0].get_array().shape[0] == 8  # one row per domain
    cpu_labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert cpu_labels == [f"cpu{i} opteron" for i in range(8)]


def test_timeline_rows_stay_readable_at_many_cpus(tmp_path: Path) -> None:
    machine = {"clusters": [{"type": "big", "cores": 32, "count": 4}],
               "types": {"big": {"capacity": 1024}}}  # fmt: skip
    fig = plot.timeline(_traced(machine, tmp_path, "many"))
    assert fig.get_size_inches()[1] <= 14.0
    assert len(fig.axes[0].get_yticklabels()) <= plot.TIMELINE_ROWS


@pytest.mark.parametrize("suffix", [".pdf", ".eps", ".jpg"])
def test_any_format_matplotlib_writes(run_dir: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"f{suffix}"
    assert cli.main(["plot", str(run_dir), "--kind", "fairness", "--out", str(out)]) == 0
    magic = {".pdf": b"%PDF", ".eps": b"%!PS", ".jpg": b"\xff\xd8"}[suffix]
    assert out.read_bytes().startswith(magic)


def test_an_unknown_figure_format_is_refused_naming_the_choices(
    run_dir: Path, tmp_path: Path, capsys
) -> None:
    assert cli.main(["plot", str(run_dir), "--out", str(tmp_path / "f.docx")]) == 2
    err = capsys.readouterr().err
    assert "cannot write a figure as .docx" in err and ".pdf" in err and ".png" in err
    assert not (tmp_path / "f.docx").exists()


def test_report_refuses_a_pdf_name(run_dir: Path, tmp_path: Path, capsys) -> None:
    assert cli.main(["report", str(run_dir), "--out", str(tmp_path / "r.pdf")]) == 2
    err = capsys.readouterr().err
    assert "the report is an HTML page" in err and "\n" not in err.strip()
    assert not (tmp_path / "r.pdf").exists()


def test_comparisons_in_one_unit_are_grouped_bars_on_one_axis(tmp_path: Path) -> None:
    captured = {}

    def keep(fig, path):  # the figure itself, not its file
        captured["fig"] = fig
        return Path(path)

    programs = ["render", "compile", "ui"]
    panels = {"cfs completion (s)": [2.0, 3.0, 9.0], "faster-first completion (s)": [1.5, 2.5, 9.0]}
    import unittest.mock

    with unittest.mock.patch.object(plot, "save", keep):
        plot.bars(programs, panels, tmp_path / "compare.png")
    (ax,) = captured["fig"].axes
    assert ax.get_ylabel() == "completion (s)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cfs", "faster-first"]
    assert len(ax.patches) == 6  # two bars per program, side by side
    assert ax.get_yscale() == "linear"
    # Over orders of magnitude: a log axis, so small values stay visible.
    with unittest.mock.patch.object(plot, "save", keep):
        plot.bars(["a", "b"], {"published (ms)": [300, 1.2], "simulated (ms)": [280, 1.1]},
                  tmp_path / "t3.png")  # fmt: skip
    assert captured["fig"].axes[0].get_yscale() == "log"
    # Different units stay separate panels.
    with unittest.mock.patch.object(plot, "save", keep):
        plot.bars(["a", "b"], {"time (s)": [1, 2], "energy (J)": [3, 4]}, tmp_path / "x.png")
    assert len(captured["fig"].axes) == 2


# The HTML report: figures first, readable numbers, one summary.


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2215190.0, "2,215,190"),
        (2215190, "2,215,190"),
        (0.7267171520000001, "0.7267"),
        (300.00000000000006, "300"),
        (12.3456, "12.35"),
        (1.5e-5, "1.500e-5"),
        (0.0, "0"),
        (float("nan"), ""),
        (None, ""),
        ("cfs", "cfs"),
    ],
)
def test_report_number_format(value, text) -> None:
    assert report.format_number(value) == text


# ----------------------------------------------------- reproduction figures


def test_published_panel_has_a_published_and_a_simulated_series() -> None:
    from hetsched.reproduce.framework import Row

    rows = [
        Row("x", "watts saved", 11.0, 0.2, "±15%", "differs"),
        Row("x", "overhead at T=8", 0.0, 0.002, "±0.02", "match"),
        Row("x", "completion order", "a < b", "a < b", "exact", "match"),  # text: left out
    ]
    fig = plot.published_panel(rows)
    ax = fig.axes[0]
    labels = [c.get_label() for c in ax.containers]
    assert labels == ["published", "simulated"]
    pub, sim = ax.containers
    # One bar per numeric row; values relative to the published magnitude
    # (a published 0 stays as the simulated value).
    assert [b.get_width() for b in pub] == [1.0, 0.0]
    assert [b.get_width() for b in sim] == pytest.approx([0.2 / 11.0, 0.002])
    assert plot.published_panel(rows[2:]) is None


def test_every_reproduction_figure_gets_the_published_values(tmp_path: Path) -> None:
    from PIL import Image

    from hetsched.reproduce import framework as fw

    def fake(scale: str) -> fw.Outcome:
        return fw.Outcome(rows=[fw.Row("fig-test", "a number", 2.0, 1.5, "±10%", "differs")],
                          data={"y": [1.0, 2.0]})  # fmt: skip

    def draw(data, path: Path) -> None:
        plot.bars(["a", "b"], {"simulated (s)": data["y"]}, path)

    fw.reproduction("fig-test", paper="p", title="t", plot=draw)(fake)
    try:
        fw.run_reproductions(["fig-test"], scale="quick", plots_dir=tmp_path)
    finally:
        del fw.registry["fig-test"]
    alone = tmp_path / "alone.png"
    draw({"y": [1.0, 2.0]}, alone)
    # The written figure is the reproduction's own with the panel below it.
    with Image.open(tmp_path / "fig-test.png") as both, Image.open(alone) as own:
        assert both.height > own.height
        assert both.width >= own.width
