"""Inputs nobody here wrote, used in place from ../shared/realinputs (see its
README): rt-app's own example workloads and hwloc's saved /sys trees of real
machines. Each file has its exact expected outcome, so that a regression in
either direction (a file that used to run is refused, or a refusal turns into
a silent mistranslation) fails."""

from __future__ import annotations

import functools
import re
import shlex
import tarfile
from collections import Counter
from pathlib import Path

import pytest

import hetsched
from hetsched import cli, rtapp, sysfs
from rk3399_sys import write_rk3399_sys

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realinputs"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "linux.md"

pytestmark = pytest.mark.skipif(
    not REAL.is_dir(), reason=f"{REAL} (the real inputs) is not present in this checkout"
)

# ------------------------------------------------------------------ rt-app

RUNS = "runs"
#: Each file of realinputs/rtapp: RUNS (imports, and runs) or the exact set of
#: features it is refused for (the keys of rtapp.REFUSED).
RTAPP: dict[str, str | set[str]] = {
    "browser-long.json": RUNS,
    "browser-short.json": RUNS,
    # SCHED_FIFO tasks: the rt class.
    "cpufreq_governor_efficiency__calibration.json": RUNS,
    "cpufreq_governor_efficiency__dvfs.json": RUNS,
    # dl-runtime on its SCHED_OTHER task is the custom slice (slice_ms); its
    # other task is SCHED_DEADLINE (the deadline class).
    "custom-slice.json": RUNS,
    # merge/: fragments of one workload in rt-app's pre-1.0 grammar. A thread
    # file alone is read with the fragments beside it (its resources are
    # declared there, its partners signal it); global and resources alone
    # hold no task: the folder's only refusals.
    "merge__global.json": {"fragment"},
    "merge__resources.json": {"fragment"},
    "merge__thread0.json": RUNS,
    "merge__thread1.json": RUNS,
    "merge__thread2.json": RUNS,
    "merge__thread3.json": RUNS,
    "mp3-long.json": RUNS,
    "mp3-short.json": RUNS,
    "spreading-tasks.json": RUNS,
    "template.json": RUNS,
    "tutorial__example1.json": RUNS,
    # A task group around the workload's only fair thread: accepted.
    "tutorial__example10.json": RUNS,
    "tutorial__example11.json": RUNS,
    "tutorial__example2.json": RUNS,
    "tutorial__example3.json": RUNS,
    "tutorial__example4.json": RUNS,
    "tutorial__example5.json": RUNS,
    # mem and iorun: CPU work of bytes / the measured rates.
    "tutorial__example6.json": RUNS,
    "tutorial__example7.json": RUNS,
    "tutorial__example8.json": RUNS,
    "tutorial__example9.json": RUNS,
    "video-long.json": RUNS,
    "video-short.json": RUNS,
}

#: What the files that run become (programs: kind, threads, work per job or
#: the phases' work, period), read off the files: example1 runs 20 ms and
#: sleeps 80 ms; example2 and template run 10 ms every 100 ms (template's
#: "sleep": 0 does nothing).
RUN_SHAPES = {
    # One thread in a task group, run 20 ms, sleep 80 ms; example11 in three phases.
    "tutorial__example10.json": [("phases", 1, 20.0, None)],
    "tutorial__example11.json": [("phases", 1, 60.0, None)],
    "template.json": [("periodic", 1, 10.0, 100.0)],
    "tutorial__example1.json": [("phases", 1, 20.0, None)],
    "tutorial__example2.json": [("periodic", 1, 10.0, 100.0)],
}

_MP3 = ["AudioTick", "AudioOut", "AudioTrack", "mp3.decoder", "OMXCall"]
_BROWSER = [
    "BrowserMain", "BrowserSub1", "BrowserSub2", "BrowserDisplay", "Binder-dummy",
    "Binder-display", "Event-Browser", "Event-Display", "Display",
]  # fmt: skip
_VIDEO = [
    "surfaceflinger", "DispSync", "hwc_eventmon", "EventThread1", "EventThread2", "waker",
    "NuPlayerRenderer", "NuPlayerDriver1", "NuPlayerDriver2", "CodecLooper1", "CodecLooper2",
    "OMXCallbackDisp2", "CodecLooper3", "NPDecoder", "NPDecoder-CL", "gle.aac.decoder",
    "OMXCallbackDisp1",
]  # fmt: skip
_SYNC = {"lock", "unlock", "mutex", "suspend", "resume"}
_MERGE_TASKS = ["thread0", "thread1", "thread2", "thread3"]
#: The merge/ workload's tasks and phase keys (locks, condition variables, timers).
_MERGE_KEYS = {
    "lock", "unlock", "mutex", "wait", "signal", "broad", "compute_ms", "timer", "timer_ms",
}  # fmt: skip
#: The files built of rt-app's synchronisation events: their tasks (one
#: program each, one thread unless said) and the phase keys they use, read
#: off the files.
RUN_PHASES: dict[str, tuple[list[str], set[str]]] = {
    "browser-long.json": (_BROWSER, _SYNC | {"compute_ms", "sleep_ms", "wait", "signal", "sync"}),
    "browser-short.json": (_BROWSER, _SYNC | {"compute_ms", "sleep_ms", "wait", "signal", "sync"}),
    "mp3-long.json": (_MP3, _SYNC | {"compute_ms", "wait", "signal", "timer", "timer_ms"}),
    "mp3-short.json": (_MP3, _SYNC | {"compute_ms", "wait", "signal", "timer", "timer_ms"}),
    "video-long.json": (_VIDEO, _SYNC | {"compute_ms", "sleep_ms", "sync", "timer", "timer_ms"}),
    "video-short.json": (_VIDEO, _SYNC | {"compute_ms", "sleep_ms", "sync", "timer", "timer_ms"}),
    # Two tasks whose phases run then wait for a 10 ms timer of their own.
    "spreading-tasks.json": (["thread1", "thread2"], {"compute_ms", "timer", "timer_ms"}),
    # 12 instances of one task, each phase a run and a 30 ms timer.
    "tutorial__example3.json": (["thread0"], {"compute_ms", "timer", "timer_ms"}),
    # Two tasks waking each other in turn.
    "tutorial__example4.json": (["thread0", "thread1"], {"compute_ms", "resume", "suspend"}),
    "tutorial__example5.json": (
        ["thread0", "thread1"],
        _SYNC | {"compute_ms", "sleep_ms", "wait", "signal", "timer", "timer_ms"},
    ),
    # runtime events and barriers shared by the two tasks.
    "tutorial__example7.json": (["task0", "task1"], {"run_for_ms", "sleep_ms", "shared_barrier"}),
    # One SCHED_FIFO task (the rt class, rt-app's default priority 10).
    "cpufreq_governor_efficiency__calibration.json": (["thread"], {"compute_ms", "sleep_ms"}),
    "cpufreq_governor_efficiency__dvfs.json": (["thread"], {"compute_ms", "timer", "timer_ms"}),
    # A SCHED_OTHER task with a custom slice beside a SCHED_DEADLINE one.
    "custom-slice.json": (["thread0", "thread1"], {"compute_ms"}),
    # run 1 ms, mem 1000 bytes, sleep 5 ms, iorun 100000 bytes.
    "tutorial__example6.json": (["thread0"], {"compute_ms", "sleep_ms"}),
    # The merge/ workload: thread0 waits for thread1's signal and broadcasts to
    # thread2 and thread3, each under its mutex, every period.
    **{f"merge__thread{i}.json": (_MERGE_TASKS, _MERGE_KEYS) for i in range(4)},
    # Three phases on CPUs 0, 1 and (the task's) 2.
    "tutorial__example8.json": (["thread0"], {"compute_ms", "cpus"}),
    # thread3 forks thread1 (which also runs from the start: a forked copy)
    # and thread2 (instance 0: forked only).
    "tutorial__example9.json": (
        ["thread1", "thread1+fork", "thread2", "thread3"],
        {"compute_ms", "sleep_ms", "fork"},
    ),
}


def test_the_table_covers_every_rtapp_file() -> None:
    assert sorted(p.name for p in (REAL / "rtapp").glob("*.json")) == sorted(RTAPP)
    assert set(RUN_SHAPES) | set(RUN_PHASES) == {n for n, v in RTAPP.items() if v == RUNS}


@pytest.mark.parametrize("name", sorted(RTAPP))
def test_rtapp_file_runs_or_is_refused_for_its_documented_reason(name: str) -> None:
    expected = RTAPP[name]
    if expected == RUNS:
        wl = rtapp.load_rtapp(REAL / "rtapp" / name)
        if name in RUN_SHAPES:
            shapes = [
                (
                    p["kind"],
                    p["threads"],
                    p.get("wcet_ms", sum(ph.get("compute_ms", 0.0) for ph in p.get("phases", []))),
                    p.get("period_ms"),
                )
                for p in wl.programs
            ]
            assert shapes == RUN_SHAPES[name]
        else:
            tasks, keys = RUN_PHASES[name]
            assert [p["name"] for p in wl.programs] == tasks
            assert all(p["kind"] == "phases" for p in wl.programs)
            assert {k for p in wl.programs for ph in p["phases"] for k in ph} == keys
        # CPU0 of the preset is a big core (capacity 1024): run times are reference work.
        # The browser's main thread sleeps 400 ms before it starts anything.
        # dvfs's task waits for its 1.2 s timer before its first run.
        duration = 1.0 if name.startswith("browser") else 2.0 if "dvfs" in name else 0.25
        res = hetsched.run(wl.scenario(machine="big-little-4+4", duration_s=duration))
        # It runs to the end, unless every program completed before (the
        # calibration file's one loop; dvfs's pinned task on a little CPU).
        done = res.summary["programs_completed"] == len(wl.programs)
        assert done or res.summary["sim_end_s"] == pytest.approx(duration)
        assert res.tasks["work_ms"].sum() > 0
        return
    with pytest.raises(rtapp.RtAppError) as e:
        rtapp.load_rtapp(REAL / "rtapp" / name)
    assert {feature for _, feature in e.value.refused} == expected
    if expected != {"fragment"}:
        # Only refusals: nothing in these files is malformed, and each is said once.
        head, *problems = str(e.value).splitlines()
        assert head.endswith(": rt-app features hetsched cannot simulate:")
        assert len(problems) == len(e.value.refused) == len(set(e.value.refused))
    # Every refusal names the file and the task or phase that uses the feature.
    for where, feature in e.value.refused:
        assert where in str(e.value)
        if feature != "fragment":
            assert where.startswith("tasks.")


def test_scheduling_classes_of_the_real_files() -> None:
    def fields(name: str) -> list[dict[str, object]]:
        keys = ("policy", "priority", "slice_ms", "dl_runtime_ms", "dl_period_ms")
        wl = rtapp.load_rtapp(REAL / "rtapp" / name)
        return [{k: p[k] for k in keys if k in p} for p in wl.programs]

    fifo = [{"policy": "fifo", "priority": 10}]
    assert fields("cpufreq_governor_efficiency__calibration.json") == fifo
    assert fields("cpufreq_governor_efficiency__dvfs.json") == fifo
    # dl-runtime is in microseconds: a 100 ms custom slice (the kernel's
    # upper bound) and a 200 ms deadline budget whose period defaults to it.
    assert fields("custom-slice.json") == [
        {"slice_ms": 100.0},
        {"policy": "deadline", "dl_runtime_ms": 200.0, "dl_period_ms": 200.0},
    ]


def test_at_most_two_rtapp_files_are_refused() -> None:
    assert sum(v != RUNS for v in RTAPP.values()) <= 2


def test_merge_fragments_together_run_as_rtapp_0x_ran_them() -> None:
    parts = ["global", "resources", "thread0", "thread1", "thread2", "thread3"]
    wl = rtapp.load_rtapp(*(REAL / "rtapp" / f"merge__{p}.json" for p in parts))
    # The same workload as a thread file alone reads.
    assert wl.programs == rtapp.load_rtapp(REAL / "rtapp" / "merge__thread2.json").programs
    t0, t1, t2, _t3 = wl.programs
    # thread0: lock_order wait (under sync_mutex), m0 for 1 ms, broad (under
    # m1, to "wake"); then the rest of its 5 ms exec; a 5 ms period.
    assert t0["phases"] == [
        {"lock": "sync_mutex"}, {"wait": "wait", "mutex": "sync_mutex"}, {"unlock": "sync_mutex"},
        {"lock": "m0"}, {"compute_ms": 1.0}, {"unlock": "m0"},
        {"lock": "m1"}, {"broad": "wake"}, {"unlock": "m1"},
        {"compute_ms": 4.0}, {"timer": "thread0.unique.period", "timer_ms": 5.0},
    ]  # fmt: skip
    assert t1["phases"][3:5] == [{"lock": "sync_mutex"}, {"signal": "wait"}]
    assert t2["phases"][1] == {"wait": "wake", "mutex": "m1"}
    assert wl.duration_s == 5.0 and all(p["nice"] == 10 for p in wl.programs)
    res = hetsched.run(wl.scenario(machine="big-little-4+4", duration_s=0.5))
    work = res.tasks.groupby("program")["work_ms"].sum()
    # thread1 runs 1 ms every 10 ms; thread0 waits for its signal, so it runs
    # 5 ms every 10 ms (or less: a signal sent before it waits is lost), and
    # each of its broadcasts lets thread2 and thread3 run 1 ms.
    assert work["thread1"] == pytest.approx(50.0, abs=1.0)
    assert 0 < work["thread0"] <= 250.0 + 1e-6
    assert work["thread2"] == pytest.approx(work["thread0"] / 5, abs=1.0)


def test_every_refused_feature_is_documented_as_not_yet_supported() -> None:
    doc = DOCS.read_text(encoding="utf-8")
    section = doc[doc.index("### Not yet supported") :]
    features = {f for v in RTAPP.values() if isinstance(v, set) for f in v} | set(rtapp.REFUSED)
    for feature in features - {"fragment"}:
        assert f"`{feature}`" in section, feature


def test_example5_syntax_error_is_reported_where_it_is() -> None:
    text = (REAL / "rtapp" / "tutorial__example5.json").read_text()
    # Break the value after the seven-line comment: the error is on that line.
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if '"sleep" : 10000' in line)
    lines[at] = lines[at].replace("10000,", "10000 x")
    with pytest.raises(rtapp.RtAppError) as e:
        rtapp.parse_rtapp("\n".join(lines), source="ex5.json")
    col = lines[at].index("x") + 1
    assert str(e.value).startswith(f"ex5.json:{at + 1}:{col}: not valid JSON")


def test_calibration_cpu_of_the_real_file_is_honoured() -> None:
    # cpufreq_governor_efficiency/calibration.json calibrates on CPU0 (a FIFO task;
    # its SCHED_OTHER twin gives the same phases) on a little CPU0.
    text = (REAL / "rtapp" / "cpufreq_governor_efficiency__calibration.json").read_text()
    other = text.replace('"SCHED_FIFO"', '"SCHED_OTHER"')
    wl = rtapp.parse_rtapp(other)
    machine = {
        "types": {"little": {"capacity": 512}, "big": {"capacity": 1024}},
        "cpus": [{"type": "little"}, {"type": "big"}],
    }
    prog = wl.scenario(machine=machine)["workload"]["programs"][0]
    # run 2000 µs of CPU0's work = 1 reference ms on a CPU0 of capacity 512.
    assert prog["phases"] == [{"compute_ms": 1.0}, {"sleep_ms": 2.0}]


# ------------------------------------------------------------------ /sys trees


def _tree(name: str) -> Path:
    return REAL / "sysfs-hwloc" / f"{name}.tar.bz2"


@functools.cache
def _machine(name: str) -> sysfs.SysfsMachine:
    return sysfs.machine_from_sysfs(_tree(name))


def _topology(m: sysfs.SysfsMachine) -> dict[str, object]:
    rows = m.machine["cpus"]
    per_core = Counter(r["core"] for r in rows)
    types = Counter(r["type"] for r in rows)
    return {
        "cpus": len(rows),
        "cores": len(per_core),
        "smt_pairs": sum(1 for n in per_core.values() if n == 2),
        "types": sorted(
            (t["capacity"], max(p["mhz"] for p in t["pstates"]), types[n])
            for n, t in m.machine["types"].items()
        ),
        "nodes": len({r["node"] for r in rows}),
        "clusters": len(m.clusters),
        "llcs": sorted(len(x) for x in m.llcs),
        "freq_domains": len({r["freq_domain"] for r in rows}),
        "offline": m.offline,
    }


#: Per tree, the topology worked out from its files.
SYSFS = {
    # 2 CPUs, package 3, core_id 0 and 1, thread_siblings_list "0" / "1": 2 cores,
    # no SMT. Only cpu0 has cpufreq (400000 800000 kHz) and its related_cpus is
    # "0 1": cpu1 shares that policy, one domain. No cpu_capacity, no CPPC, equal
    # maximum frequencies: one type of capacity 1024. No cache folders: one LLC.
    "2arm-2c": {
        "cpus": 2, "cores": 2, "smt_pairs": 0, "types": [(1024, 800, 2)], "nodes": 1,
        "clusters": 1, "llcs": [2], "freq_domains": 1, "offline": [],
    },
    # GB10: cluster_cpus_list 0-9 and 10-19 (L3 shared_cpu_list the same), each
    # 5 Cortex-A725 (cpuinfo_max_freq 2808000) + 5 Cortex-X925 (3900000);
    # cpu_capacity 718 (cpus 0-4), 997 (5-9), 731 (10-14), 1017 (15-18), 1024 (19):
    # 1017 and 1024 lie within 10 in one cluster -> one type, mean 1018.4 -> 1018.
    # thread_siblings_list is each CPU alone; related_cpus each CPU alone.
    "nvidia-dgx-gb10": {
        "cpus": 20, "cores": 20, "smt_pairs": 0,
        "types": [(718, 2808, 5), (731, 2808, 5), (997, 3900, 5), (1018, 3900, 5)],
        "nodes": 1, "clusters": 2, "llcs": [10, 10], "freq_domains": 20, "offline": [],
    },
    # Intel 12th gen: CPUs 0-11 are 6 P-cores x 2 threads (thread_siblings_list
    # 0-1, 2-3 ...), CPPC highest_perf 67 on cpus 4,5,8,9 (5.2 GHz) and 64 on the
    # others (5.0 GHz) -> capacities 1024 and round(1024*64/67) = 978; CPUs 12-19
    # are E-cores (highest_perf 39 -> 596, 3.9 GHz) in two clusters of 4 sharing
    # an L2. cluster_id: one per P-core (6) + 2 E-clusters = 8. L3 0-19: one LLC.
    # related_cpus per CPU; hyper-threads share their core's clock: 6 + 8 domains.
    "20em64t-hybrid-1p6c2t+2ca4co1t": {
        "cpus": 20, "cores": 14, "smt_pairs": 6,
        "types": [(596, 3900, 8), (978, 5000, 8), (1024, 5200, 4)],
        "nodes": 1, "clusters": 8, "llcs": [20], "freq_domains": 14, "offline": [],
    },
    # 2 packages (physical_package_id 36, 8442) x 64 CPUs, thread_siblings_list
    # "N\n\0" (a NUL byte: dropped), cluster_cpus_list groups of 4 (32 clusters),
    # L3 shared_cpu_list 0-31, 32-63, 64-95, 96-127; cpu_capacity 1024 everywhere;
    # no cpufreq: one P-state, each CPU its own domain.
    "128arm-2pa2n8cluster4co": {
        "cpus": 128, "cores": 128, "smt_pairs": 0, "types": [(1024, 2000, 128)],
        "nodes": 2, "clusters": 32, "llcs": [32, 32, 32, 32], "freq_domains": 128,
        "offline": [],
    },
    # 16 CPUs, cpu2, 5, 13, 14 have online = 0. Old kernel: thread_siblings is a
    # hex mask (cpu0: 00000101 -> 0 and 8), no cluster, no cpufreq. Cores of the
    # 12 online CPUs: {0,8} {1,9} {3,11} {4,12} {7,15} and {6} {10} (their
    # siblings 14 and 2 are offline): 7 cores, 5 pairs. 4 packages; L3
    # shared_cpu_map per package (00001111 = 0,4,8,12): online members 4, 2, 2, 4.
    "16em64t-4s2c2t-offlines": {
        "cpus": 12, "cores": 7, "smt_pairs": 5, "types": [(1024, 2000, 12)], "nodes": 4,
        "clusters": 4, "llcs": [2, 2, 4, 4], "freq_domains": 7, "offline": [2, 5, 13, 14],
    },
    # online 4-20 (cpu0-3 and 21-23 have online = 0), packages 0 (even CPUs) and 1
    # (odd), one thread per core, L3 shared_cpu_list even / odd CPUs; no cpufreq.
    "offline-cpu0-node0": {
        "cpus": 17, "cores": 17, "smt_pairs": 0, "types": [(1024, 2000, 17)], "nodes": 2,
        "clusters": 2, "llcs": [8, 9], "freq_domains": 17,
        "offline": [0, 1, 2, 3, 21, 22, 23],
    },
}  # fmt: skip


def test_the_table_covers_every_tree() -> None:
    names = sorted(p.name.removesuffix(".tar.bz2") for p in (REAL / "sysfs-hwloc").iterdir())
    assert names == sorted(SYSFS)


@pytest.mark.parametrize("name", sorted(SYSFS))
def test_sysfs_tree_imports_with_its_topology(name: str) -> None:
    m = _machine(name)
    assert _topology(m) == SYSFS[name]
    # Each kind of problem is reported once, whatever the number of CPUs.
    assert len(m.warnings) <= 6, m.warnings
    assert len(m.warnings) == len(set(m.warnings))
    # The machine is one the core accepts and runs.
    scen = hetsched.loads(
        'name = "t"\nduration_s = 0.01\n' + m.toml() + "\n[[workload.programs]]\n"
        'name = "p"\nkind = "parallel"\nthreads = 2\nwork_ms = 1\n'
    )
    assert len(hetsched.run(scen).cpus) == SYSFS[name]["cpus"]


def test_unpacked_tree_reads_like_the_archive(tmp_path: Path) -> None:
    with tarfile.open(_tree("2arm-2c")) as tar:
        tar.extractall(tmp_path, filter="data")
    unpacked = sysfs.machine_from_sysfs(tmp_path / "2arm-2c")
    packed = _machine("2arm-2c")
    assert unpacked.machine == packed.machine and unpacked.warnings == packed.warnings


def test_arm_server_warnings_are_aggregated() -> None:
    m = _machine("128arm-2pa2n8cluster4co")
    nul = [w for w in m.warnings if "NUL" in w]
    assert nul == [
        "cpu{0-127}/topology/cluster_cpus_list had NUL bytes: dropped",
        "cpu{0-127}/topology/thread_siblings_list had NUL bytes: dropped",
    ]


def test_gb10_capacity_grouping_is_said_once() -> None:
    m = _machine("nvidia-dgx-gb10")
    (grouped,) = [w for w in m.warnings if "one type" in w]
    assert re.search(r"cpu\{15-19\} \(1017, 1024\) -> 1018", grouped)


# ------------------------------------------------------------------ docs/linux.md


def _sh_blocks(recipes_only: bool) -> list[str]:
    doc = DOCS.read_text(encoding="utf-8")
    marker = r"<!-- recipe -->\n" if recipes_only else ""
    return re.findall(marker + r"```sh\n(.*?)```", doc, re.DOTALL)


def test_docs_have_recipes() -> None:
    assert len(_sh_blocks(True)) == 3


@pytest.mark.parametrize("block", range(3))
def test_docs_recipe_runs_as_written(block: int, tmp_path: Path, monkeypatch, capsys) -> None:
    recipe = _sh_blocks(True)[block]
    (tmp_path / "realinputs").symlink_to(REAL.resolve())
    write_rk3399_sys(tmp_path / "rk3399-sys")
    monkeypatch.chdir(tmp_path)
    for line in filter(None, (raw.strip() for raw in recipe.splitlines())):
        argv = shlex.split(line)
        assert argv[0] == "hetsched", f"a recipe line the test cannot run: {line}"
        assert cli.main(argv[1:]) == 0, (line, capsys.readouterr().err)
        if "--out" in argv:
            assert Path(argv[argv.index("--out") + 1]).is_file()
    assert "hetsched: error" not in capsys.readouterr().err


def test_every_documented_command_line_parses() -> None:
    parser = cli._parser()
    lines = [ln.strip() for b in _sh_blocks(False) for ln in b.splitlines()]
    commands = [ln.split("#")[0].split(">")[0] for ln in lines if ln.startswith("hetsched ")]
    assert len(commands) >= 20
    for line in commands:
        args = parser.parse_args(shlex.split(line)[1:])
        assert hasattr(args, "handler"), line
