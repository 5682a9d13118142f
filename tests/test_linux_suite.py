"""The kernel-trace suite (``hetsched linux validate-sim --suite eevdf``): its
verdict logic, the one observation function shared by real and simulated
traces, and the comparison run from the traces recorded on our machine
(``data/linux-traces``), which needs no root."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from hetsched.cli import main
from hetsched.linux import suite

DATA = suite.DATA_DIR
RECORDED = (DATA / "manifest.json").exists()


def _metric(target: tuple[str, float, float]) -> suite.Metric:
    return suite.Metric("m", "ms", lambda obs, span: 0.0, target)


def _exp(target: tuple[str, float, float]) -> suite.Experiment:
    return suite.Experiment("e", "", [], [_metric(target)])


@pytest.mark.parametrize(
    ("real", "sim", "verdict"),
    [
        # Tolerance max(20 % of 1.0, 0.2) = 0.2; noise half the range.
        ([1.0, 1.02, 0.98], 1.15, "within"),  # noise 0.02, off by 0.15
        ([1.0, 1.02, 0.98], 1.25, "outside"),  # off by 0.25
        ([1.0, 1.5, 0.9], 1.0, "noise-limited"),  # noise 0.3 > 0.2
        ([0.1, 0.1, 0.1], 0.25, "within"),  # 20 % of 0.1 < 0.2 ms floor
        ([0.1, 0.1, 0.1], 0.31, "outside"),
    ],
)
def test_verdict_counts_noise_and_the_larger_of_the_two_targets(
    real: list[float], sim: float, verdict: str
) -> None:
    rows = suite.compare(_exp(suite.LATENCY), [{"m": v} for v in real], {"m": sim})
    assert rows[0]["verdict"] == verdict
    assert rows[0]["real"] == pytest.approx(sorted(real)[1])
    assert rows[0]["noise"] == pytest.approx((max(real) - min(real)) / 2)


def _p99(exp: str, real: float, noise: float, sim: float) -> dict[str, object]:
    return {
        "experiment": exp,
        "metric": "periodic wake-up latency p99",
        "real": real,
        "noise": noise,
        "sim": sim,
    }


@pytest.mark.parametrize(
    ("default", "short", "verdict"),
    [
        # (real, noise, sim) of the default- and the custom-slice p99, ms.
        # Both fall by more than the noise of the difference (0.1 + 0.02).
        ((0.74, 0.10, 0.94), (0.05, 0.02, 0.0), "within"),
        # Neither falls by more than it: the quiet machine's case.
        ((0.021, 0.002, 0.0), (0.022, 0.003, 0.0), "within"),
        # Only the simulator falls.
        ((0.021, 0.002, 0.5), (0.022, 0.003, 0.0), "outside"),
        # Only the real kernel falls: 0.3 ms, more than the noise 0.25.
        ((0.35, 0.2, 0.0), (0.05, 0.05, 0.0), "outside"),
        # A real fall inside the noise is no cut: 0.3 ms < 0.2 + 0.15.
        ((0.35, 0.2, 0.0), (0.05, 0.15, 0.0), "within"),
    ],
)
def test_custom_slice_row_counts_a_cut_only_beyond_the_real_noise(
    default: tuple[float, float, float], short: tuple[float, float, float], verdict: str
) -> None:
    row = suite.slice_cut_row([_p99("periodic", *default), _p99("periodic-slice", *short)])
    assert row["verdict"] == verdict, row
    assert row["tolerance"] == pytest.approx(default[1] + short[1])


def test_custom_slice_row_without_noise_has_no_verdict() -> None:
    rows = [_p99("periodic", 0.7, math.nan, 0.9), _p99("periodic-slice", 0.05, math.nan, 0.0)]
    assert suite.slice_cut_row(rows)["verdict"] == "no data"


def test_not_modelled_rows_say_so() -> None:
    rows = suite.compare(_exp(suite.SHARE), [{"m": 20.0}], None)
    assert rows[0]["verdict"] == "not modelled yet" and rows[0]["sim"] is None


def test_relative_and_absolute_tolerances() -> None:
    assert suite.tolerance(("rel", 0.05, 0.0), 2.0) == pytest.approx(0.1)
    assert suite.tolerance(("abs", 0.0, 2.0), 30.0) == 2.0
    assert suite.tolerance(("both", 0.2, 0.2), 3.0) == pytest.approx(0.6)
    assert suite.target_text(("abs", 0.0, 2.0), "%") == "±2 pp"


def test_observe_reads_roles_inside_the_window() -> None:
    ms = 1_000_000
    events = [
        {"type": "wake", "t_ns": 0, "task": 0, "cpu": 0},
        {"type": "run", "t_ns": 0, "end_ns": 10 * ms, "cpu": 0, "task": 0},
        {"type": "wake", "t_ns": 12 * ms, "task": 1, "cpu": 0},
        {"type": "run", "t_ns": 10 * ms, "end_ns": 15 * ms, "cpu": 0, "task": 0},
        {"type": "run", "t_ns": 15 * ms, "end_ns": 16 * ms, "cpu": 1, "task": 1},
        {"type": "migrate", "t_ns": 15 * ms, "task": 1, "from": 0, "to": 1},
        {"type": "block", "t_ns": 16 * ms, "task": 1, "reason": "sleep"},
    ]
    # Window [5, 20] ms: task 0 runs 5..15 = 10 ms (its two touching intervals
    # merged); task 1 wakes at 12, runs at 15 (3 ms), runs 1 ms, migrates once.
    obs = suite.observe(events, {"a": [0], "b": [1]}, (5 * ms, 20 * ms))
    assert obs["a"].cpu_s == pytest.approx(0.010)
    assert obs["b"].cpu_s == pytest.approx(0.001)
    assert list(obs["b"].latencies_ms) == [3.0]
    assert obs["b"].wakeups == 1 and obs["b"].migrations == 1
    assert obs["a"].wakeups == 0  # its wake-up at 0 is before the window
    # Task 0's merged interval [0, 15] ended by preemption but began before
    # the window: not a slice of it; task 1's ended by blocking.
    assert len(obs["a"].slices_ms) == 0 and len(obs["b"].slices_ms) == 0
    whole = suite.observe(events, {"a": [0]}, (0, 20 * ms))
    assert list(whole["a"].slices_ms) == [15.0]
    share = suite._share("b", ["a", "b"])(obs, 0.015)
    assert share == pytest.approx(100 / 11)


def test_trim_keeps_our_tasks_and_their_children() -> None:
    text = "\n".join(
        [
            "# tracer: nop",
            "  a-1 [000] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 "
            "prev_state=R ==> next_comm=x next_pid=9 next_prio=120",
            "  x-9 [000] d..2. 1.000100: sched_switch: prev_comm=x prev_pid=9 prev_prio=120 "
            "prev_state=S ==> next_comm=y next_pid=8 next_prio=120",
            "  a-1 [001] ..... 1.000200: sched_process_fork: comm=a pid=1 child_comm=a child_pid=5",
            "  y-8 [000] d..2. 1.000300: sched_wakeup_new: comm=a pid=5 prio=120 target_cpu=001",
            "CPU:1 [LOST 3 EVENTS]",
        ]
    )
    kept = suite.trim(text, {1}).splitlines()
    assert len(kept) == 5
    assert not any("next_pid=8" in line and "prev_pid=9" in line for line in kept)


def test_simulated_side_of_the_nice_pair_follows_the_weights() -> None:
    exp = next(e for e in suite.experiments() if e.name == "nice-pair")
    sim = suite.simulate(exp, slice_ok=False)
    assert sim is not None
    # Weights 1024 and 335: nice 5 gets 335 / 1359 = 24.65 %.
    assert sim["CPU share of nice 5"] == pytest.approx(24.65, abs=0.5)


def test_custom_slice_is_marked_not_modelled_until_programs_have_slice_ms() -> None:
    exp = next(e for e in suite.experiments() if e.name == "periodic-slice")
    if suite.slice_supported():
        pytest.skip("the simulator models the custom slice now")
    assert suite.simulate(exp) is None


@pytest.mark.skipif(not RECORDED, reason="no recorded traces in data/linux-traces")
def test_suite_from_recorded_traces(capsys: pytest.CaptureFixture[str]) -> None:
    # Every experiment but churn (its thousands of children take seconds to
    # read back; test_tracefs.py parses its traces too).
    names = {e.name for e in suite.experiments()} - {"churn"}
    argv = ["linux", "validate-sim", "--suite", "eevdf", "--recorded", str(DATA), "--json"]
    for n in sorted(names):
        argv += ["--only", n]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["experiment"] for r in rows} == names
    # Issue 16's bar: every row within its target or noise-limited, and at
    # least 80 % within.
    bad = [r for r in rows if r["verdict"] not in {"within", "noise-limited"}]
    assert not bad, bad
    within = sum(r["verdict"] == "within" for r in rows)
    assert within >= 0.8 * len(rows), (within, len(rows))
    by = {(r["experiment"], r["metric"]): r for r in rows}
    # What the kernel did on our machine, read back from its own trace.
    d = by[("periodic", "periodic wake-up latency p99")]
    c = by[("periodic-slice", "periodic wake-up latency p99")]
    # On the quiet machine nothing delays the periodic task's wake-ups, so
    # the custom slice has nothing to cut, in the kernel and in the model.
    assert abs(c["real"] - d["real"]) < 0.05
    cut = by[("periodic-slice", "custom slice cuts p99 latency")]
    assert cut["verdict"] == "within", cut
    for r in rows:
        if r["real_all"]:
            assert len(r["real_all"]) == 5
            assert r["noise"] == pytest.approx((max(r["real_all"]) - min(r["real_all"])) / 2)
    # EEVDF's base slice on 2 CPUs is 0.75 ms × (1 + log2 2) = 1.5 ms: the
    # kernel's spinners are preempted after about that long.
    assert 1.0 < by[("spin3", "median slice of the spinners")]["real"] < 2.0
    spins = [v for (e, m), v in by.items() if e == "spin3" and m.startswith("CPU time")]
    # Three spinners on two CPUs: together at most the two CPUs (other load
    # on the machine may take some), each a part of one.
    assert 0.5 < sum(r["real"] for r in spins) <= 2.02
    assert all(0.0 < r["real"] <= 1.01 for r in spins)


@pytest.mark.skipif(not RECORDED, reason="no recorded traces in data/linux-traces")
def test_recorded_traces_are_small() -> None:
    # About 300 kB for the 2 s experiments and 370 kB for spin3's five 30 s
    # runs (a context switch every 1.4 ms).
    total = sum(p.stat().st_size for p in DATA.iterdir())
    assert total < 800_000, total


def _can_run_live() -> str | None:
    if os.geteuid() != 0:
        return "the live suite records the kernel trace, which needs root"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs two CPUs"
    return None


@pytest.mark.skipif(_can_run_live() is not None, reason=str(_can_run_live()))
def test_live_periodic_experiment_runs_both_ways() -> None:
    exp = next(e for e in suite.experiments() if e.name == "periodic")
    run = suite.run_real(exp)
    real = suite.real_metrics(exp, run)
    for v in real.values():
        assert math.isfinite(v) and v >= 0.0
    rows = suite.compare(exp, [real], suite.simulate(exp))
    assert [r["metric"] for r in rows] == [m.name for m in exp.metrics]


def test_unknown_experiment_is_refused() -> None:
    with pytest.raises(suite.LinuxError, match="unknown experiment"):
        suite.run_suite(only=["nope"], recorded=Path("/nonexistent"))


def test_live_suite_refuses_without_root_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["linux", "validate-sim", "--suite", "eevdf", "--only", "nice-pair"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("hetsched: error: ") and "needs root" in last


def test_a_bad_recorded_trace_is_one_error_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.trace").write_text("# tracer: nop\nnot an event\n")
    manifest = {
        "experiments": {
            "nice-pair": [{"file": "bad.trace", "pids": {"nice0": 1, "nice5": 2}, "start_s": 1.0}]
        },
        "recorded_as": {"nice-pair": {"duration_s": 2.0, "shield": False}},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    argv = ["linux", "validate-sim", "--suite", "eevdf", "--only", "nice-pair"]
    assert main([*argv, "--recorded", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("hetsched: error: ") and "nice-pair#1:2: not a trace line" in err


def test_saving_one_experiment_keeps_the_others_and_says_how_long_its_runs_were(
    tmp_path: Path,
) -> None:
    def run(pid: int) -> suite.RealRun:
        return suite.RealRun("# tracer: nop\n", {"a": pid}, 1.0)

    exps = {e.name: e for e in suite.experiments()}
    suite.save({"nice-pair": [run(1)], "spin3": [run(2), run(3)]}, tmp_path, exps)
    assert sorted(p.name for p in tmp_path.glob("*.xz")) == [
        "nice-pair-1.trace.xz",
        "spin3-1.trace.xz",
        "spin3-2.trace.xz",
    ]
    # spin3 again, with one run: its old second trace goes, nice-pair stays.
    suite.save({"spin3": [run(4)]}, tmp_path, exps)
    assert sorted(p.name for p in tmp_path.glob("*.xz")) == [
        "nice-pair-1.trace.xz",
        "spin3-1.trace.xz",
    ]
    manifest, runs = suite.load_recorded(tmp_path)
    assert [r.pids for r in runs["nice-pair"]] == [{"a": 1}]
    assert [r.pids for r in runs["spin3"]] == [{"a": 4}]
    assert suite.recorded_duration(manifest, "spin3") == suite.SPIN3_DURATION_S
    assert suite.recorded_duration(manifest, "nice-pair") == suite.DURATION_S
    # Whether each ran in the shielding cgroup, as the experiment says.
    assert manifest["recorded_as"]["spin3"]["shield"] is exps["spin3"].shield is False
    assert manifest["recorded_as"]["nice-pair"]["shield"] is False
    # A manifest from before per-experiment entries: its one duration.
    assert suite.recorded_duration({"duration_s": 2}, "spin3") == 2.0


def test_spin3_measures_a_window_of_its_own_length() -> None:
    exp = next(e for e in suite.experiments() if e.name == "spin3")
    assert exp.duration_s == suite.SPIN3_DURATION_S
    assert exp.window_s == (0.3, suite.SPIN3_DURATION_S - 0.1)
    assert all(p.args == ["spin", str(suite.SPIN3_DURATION_S)] for p in exp.procs)
    assert suite._scenario(exp)["duration_s"] == float(suite.SPIN3_DURATION_S)
    # The others keep the 2 s runs and their 0.3-1.9 s window exactly.
    other = next(e for e in suite.experiments() if e.name == "nice-pair")
    assert other.window_s == suite.WINDOW_S


CHURN_COST = DATA / "churn-cost" / "result.json"


@pytest.mark.skipif(not CHURN_COST.exists(), reason="no churn-cost measurement in data/")
def test_churn_parent_cost_is_the_separate_measurement() -> None:
    res = json.loads(CHURN_COST.read_text())
    cost = suite.churn_cost_ms(res["rates_per_s"])
    assert cost == pytest.approx(res["parent_ms_per_child"], abs=1e-4)
    assert abs(suite.CHURN_PARENT_MS - cost) < 5e-4


def test_churn_cost_refuses_rates_that_are_not_positive() -> None:
    with pytest.raises(suite.LinuxError, match="churn-cost: rates must be positive"):
        suite.churn_cost_ms([4000.0, 0.0])
    with pytest.raises(suite.LinuxError, match="churn-cost"):
        suite.churn_cost_ms([])


def test_simulated_churn_pays_the_parent_cost_per_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def rate() -> float:
        exp = next(e for e in suite.experiments() if e.name == "churn")
        sim = suite.simulate(exp)
        assert sim is not None
        return sim["new tasks per second"]

    # Each child: the parent's cost, then 2 ms of work on a CPU of its own.
    assert rate() == pytest.approx(1000.0 / (2.0 + suite.CHURN_PARENT_MS), rel=0.01)
    monkeypatch.setattr(suite, "CHURN_PARENT_MS", 0.5)
    assert rate() == pytest.approx(1000.0 / 2.5, rel=0.01)


@pytest.mark.skipif(not RECORDED, reason="no recorded traces in data/linux-traces")
def test_outside_activity_is_read_from_the_spinners_preemptions() -> None:
    _, runs = suite.load_recorded(DATA)
    exp = next(e for e in suite.experiments() if e.name == "periodic")
    out = suite.outside_activity(exp, runs["periodic"])
    assert out is not None
    # Other tasks of the machine preempt the spinner a few times a second
    # (3.1/s on the quiet machine of the recording; tens of times a second
    # on a shared one), each for a fraction of a millisecond
    # (docs/real-linux.md).
    assert 1.0 < out.rate_per_s < 200.0
    assert 0.0 < out.run_ms < 1.0
    assert out.cpus == [0]
    # The nice pair (not shielded) is preempted by them too; the churn
    # experiment does not measure them.
    nice = next(e for e in suite.experiments() if e.name == "nice-pair")
    out = suite.outside_activity(nice, runs["nice-pair"])
    assert out is not None and out.cpus == [0]
    assert 0.5 < out.rate_per_s < 200.0 and 0.0 < out.run_ms < 1.0
    churn = next(e for e in suite.experiments() if e.name == "churn")
    assert suite.outside_activity(churn, runs["churn"]) is None


def test_outside_activity_gives_the_tail_a_custom_slice_cuts() -> None:
    exps = {e.name: e for e in suite.experiments()}
    out = suite.Outside(rate_per_s=40.0, run_ms=0.03, cpus=[0])
    key = "periodic wake-up latency p99"
    alone = suite.simulate(exps["periodic"])
    default = suite.simulate(exps["periodic"], outside=out)
    short = suite.simulate(exps["periodic-slice"], outside=out)
    assert alone is not None and default is not None and short is not None
    # The spinner, picked again after an outside task, is protected for the
    # rest of its slice (RUN_TO_PARITY): a wake-up inside that window waits
    # for it (without outside tasks nothing re-picks it, and the periodic
    # task runs at once). With a 0.1 ms slice the woken task is picked as if
    # the spinner were unprotected (PREEMPT_SHORT) and runs at once.
    assert alone[key] < 0.01
    assert default[key] > 0.1
    assert short[key] < 0.01


def test_churn_cost_without_the_suite_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["linux", "validate-sim", "--churn-cost"]) != 0
    err = capsys.readouterr().err
    assert "--churn-cost belongs to the suite: add --suite eevdf" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        # A manifest from before per-experiment entries: its one duration.
        (None, "'spin3' was recorded with runs of 2 s, but it now runs 30 s"),
        (
            {"duration_s": 30.0, "shield": True},
            "was recorded in the shielding cgroup, but it now runs outside",
        ),
        (
            {"duration_s": 30.0},
            "recorded before recordings said whether its processes ran in the shielding cgroup",
        ),
    ],
)
def test_recorded_runs_made_otherwise_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: dict[str, object] | None, says: str
) -> None:
    # Runs of another length, or made in (or out of) the shielding cgroup,
    # which changes how the kernel balances three spinners (5.6 against 7.7
    # moves a second), are not comparable.
    (tmp_path / "spin3-1.trace").write_text("# tracer: nop\n")
    manifest: dict[str, object] = {
        "duration_s": 2,
        "experiments": {
            "spin3": [{"file": "spin3-1.trace", "pids": {"a": 1, "b": 2, "c": 3}, "start_s": 1.0}]
        },
    }
    if entry is not None:
        manifest["recorded_as"] = {"spin3": entry}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    argv = ["linux", "validate-sim", "--suite", "eevdf", "--only", "spin3"]
    assert main([*argv, "--recorded", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("hetsched: error: ") and says in err, err
    assert "--only spin3 --save-traces" in err
