//! sched_ext's dispatch queues: each call, its errors, idle claiming, and
//! work conservation against a scheduler that leaves CPUs idle.

mod common;

use common::scn;
use hetsched_core::hw::CpuId;
use hetsched_core::metrics::RunResults;
use hetsched_core::os::TaskId;
use hetsched_core::policy::scx::{dsq_local_on, DSQ_GLOBAL, DSQ_LOCAL, SLICE_DFL_NS};
use hetsched_core::policy::{Ctx, EnqFlags, Scheduler};
use hetsched_core::run;
use hetsched_core::sim::RunOptions;

/// A DSQ scheduler whose `enqueue` is a closure.
struct Dsq<F: FnMut(&mut Ctx, TaskId, CpuId)> {
    enq: F,
}

impl<F: FnMut(&mut Ctx, TaskId, CpuId)> Scheduler for Dsq<F> {
    fn name(&self) -> &str {
        "test-dsq"
    }
    fn uses_dsqs(&self) -> bool {
        true
    }
    fn init(&mut self, cx: &mut Ctx) {
        cx.create_dsq(5);
    }
    fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, _p: Option<CpuId>, _f: EnqFlags) -> CpuId {
        cx.task(t).cpu
    }
    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, _f: EnqFlags) {
        (self.enq)(cx, t, cpu)
    }
    fn dequeue(&mut self, _cx: &mut Ctx, _t: TaskId, _cpu: CpuId) {}
    fn pick_next(&mut self, _cx: &mut Ctx, _cpu: CpuId) -> Option<TaskId> {
        None
    }
    fn dispatch(&mut self, cx: &mut Ctx, _cpu: CpuId, _prev: Option<TaskId>) {
        cx.dsq_move_to_local(5);
    }
}

const FOUR: &str = r#"
duration_s = 1
[machine]
migration.enabled = false
[machine.types.c]
capacity = 1024
[[machine.clusters]]
type = "c"
cores = 4
[[workload.programs]]
kind = "parallel"
threads = 4
work_ms = 400
"#;

fn go(text: &str, s: impl Scheduler + 'static) -> Result<RunResults, String> {
    run(
        &scn(text),
        RunOptions {
            trace: false,
            check: true,
        },
        Some(Box::new(s)),
        vec![],
        None,
    )
    .map_err(|e| e.to_string())
}

#[test]
fn unknown_dsq_is_an_error_naming_the_policy_and_the_call() {
    let e = go(
        FOUR,
        Dsq {
            enq: |cx: &mut Ctx, t, _| cx.dsq_insert(t, 99, SLICE_DFL_NS),
        },
    )
    .unwrap_err();
    assert!(e.contains("test-dsq"), "{e}");
    assert!(
        e.contains("dsq_insert(task 0, DSQ 0x63): unknown DSQ"),
        "{e}"
    );
}

#[test]
fn inserting_a_task_twice_is_an_error() {
    let e = go(
        FOUR,
        Dsq {
            enq: |cx: &mut Ctx, t, _| {
                cx.dsq_insert(t, 5, SLICE_DFL_NS);
                cx.dsq_insert(t, DSQ_GLOBAL, SLICE_DFL_NS);
            },
        },
    )
    .unwrap_err();
    assert!(
        e.contains("dsq_insert(task 0, DSQ_GLOBAL): task 0 is already queued on a DSQ"),
        "{e}"
    );
}

#[test]
fn local_dsq_of_an_offline_cpu_is_an_error() {
    // CPU 3 goes offline (hotplug) at 10 ms; the threads compute 1 ms and
    // sleep 9 ms, so later wake-ups insert into its local DSQ.
    let text = r#"
duration_s = 0.5
[machine.types.c]
capacity = 1024
[[machine.clusters]]
type = "c"
cores = 4
[[workload.programs]]
kind = "phases"
threads = 2
loops = 40
phases = [{ compute_ms = 1 }, { sleep_ms = 9 }]
[dynamic]
mechanism = "hotplug"
[[dynamic.events]]
at_ms = 10
op = "offline"
cpus = [3]
"#;
    let e = go(
        text,
        Dsq {
            enq: |cx: &mut Ctx, t, _| {
                let d = if cx.now.0 >= 60_000_000 {
                    dsq_local_on(3)
                } else {
                    DSQ_GLOBAL
                };
                cx.dsq_insert(t, d, SLICE_DFL_NS)
            },
        },
    )
    .unwrap_err();
    assert!(e.contains("dsq_local_on(3)): cpu 3 is offline"), "{e}");
}

#[test]
fn vtime_on_a_builtin_dsq_and_mixing_are_errors() {
    let e = go(
        FOUR,
        Dsq {
            enq: |cx: &mut Ctx, t, _| cx.dsq_insert_vtime(t, DSQ_GLOBAL, 1, SLICE_DFL_NS),
        },
    )
    .unwrap_err();
    assert!(
        e.contains("vtime ordering is not allowed on built-in DSQs"),
        "{e}"
    );
    let e = go(
        FOUR,
        Dsq {
            enq: |cx: &mut Ctx, t, _| {
                if t == 0 {
                    cx.dsq_insert(t, 5, SLICE_DFL_NS)
                } else {
                    cx.dsq_insert_vtime(t, 5, 1, SLICE_DFL_NS)
                }
            },
        },
    )
    .unwrap_err();
    assert!(e.contains("holds FIFO-inserted tasks"), "{e}");
}

#[test]
fn everything_on_one_local_dsq_idles_the_other_cpus() {
    // 4 threads of 100 ms share CPU 0 round robin (400 ms); CPUs 1-3 idle
    // beside waiting threads until the last one runs alone. With 20 ms
    // slices the threads finish in the last round: 3 CPUs × (400 ms minus
    // at most the last slice) of idle time beside waiters.
    let r = go(
        FOUR,
        Dsq {
            enq: |cx: &mut Ctx, t, _| cx.dsq_insert(t, dsq_local_on(0), SLICE_DFL_NS),
        },
    )
    .unwrap();
    let end = r.summary.makespan_s.unwrap();
    assert!((end - 0.4).abs() < 1e-9, "{end}");
    let iwr = r.summary.idle_while_runnable_s;
    assert!(
        iwr > 3.0 * (0.4 - 0.02) - 1e-9 && iwr <= 1.2 + 1e-9,
        "{iwr}"
    );
    assert_eq!(r.cpus[0].idle_while_runnable_s, 0.0);
    assert!(r.warnings.iter().any(|w| w.contains("not work-conserving")));
}

#[test]
fn local_insert_from_select_cpu_skips_enqueue_and_claims_cpus() {
    // select_cpu_dfl claims a distinct idle CPU for each of the 4 threads
    // woken in the same instant; they go straight to those local DSQs, so
    // enqueue (which would fail the run) is never called.
    struct Direct;
    impl Scheduler for Direct {
        fn name(&self) -> &str {
            "direct"
        }
        fn uses_dsqs(&self) -> bool {
            true
        }
        fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, p: Option<CpuId>, _f: EnqFlags) -> CpuId {
            let (cpu, idle) = cx.select_cpu_dfl(t, p.unwrap_or(0));
            assert!(idle, "a CPU for every thread");
            cx.dsq_insert(t, DSQ_LOCAL, 0);
            cpu
        }
        fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, _cpu: CpuId, f: EnqFlags) {
            if f != EnqFlags::Preempted {
                cx.fail(format!("enqueue of task {t} ({f:?})"));
            }
            cx.dsq_insert(t, DSQ_LOCAL, 0);
        }
        fn dequeue(&mut self, _cx: &mut Ctx, _t: TaskId, _cpu: CpuId) {}
        fn pick_next(&mut self, _cx: &mut Ctx, _cpu: CpuId) -> Option<TaskId> {
            None
        }
    }
    let r = go(FOUR, Direct).unwrap();
    assert!((r.summary.makespan_s.unwrap() - 0.1).abs() < 1e-9);
    assert_eq!(r.summary.idle_while_runnable_s, 0.0);
    let cpus: Vec<f64> = r.cpus.iter().map(|c| c.busy_s).collect();
    assert!(cpus.iter().all(|&b| (b - 0.1).abs() < 1e-9), "{cpus:?}");
}

/// Run a scenario text with a registry scheduler; the error text.
fn refused(text: &str) -> String {
    run(&scn(text), RunOptions::default(), None, vec![], None)
        .map(|_| ())
        .expect_err("refused")
        .to_string()
}

#[test]
fn dsq_schedulers_are_refused_with_vms() {
    let vm = "[[vms]]\nname = \"web\"\nvcpus = 2\n[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 10\n";
    for s in ["scx-simple", "scx-central", "global-edf"] {
        let e = refused(&format!("scheduler = \"{s}\"\n{FOUR}{vm}"));
        assert!(
            e.contains(&format!("scheduler \"{s}\""))
                && e.contains("do not cover virtual machines")
                && e.contains("[[vm]] web"),
            "{e}"
        );
    }
    // A DSQ scheduler as the guest's scheduler, under a host CFS.
    let guest = vm.replace("vcpus = 2\n", "vcpus = 2\nscheduler = \"scx-simple\"\n");
    let e = refused(&format!("scheduler = \"cfs\"\n{FOUR}{guest}"));
    assert!(
        e.contains("scheduler \"scx-simple\"") && e.contains("guest scheduler of [[vm]] \"web\""),
        "{e}"
    );
    // The same policy object passed in (as the Python front end does).
    let e = run(
        &scn(&format!("{FOUR}{vm}")),
        RunOptions::default(),
        Some(Box::new(Dsq {
            enq: |cx: &mut Ctx, t, _| cx.dsq_insert(t, 5, SLICE_DFL_NS),
        })),
        vec![],
        None,
    )
    .map(|_| ())
    .expect_err("refused")
    .to_string();
    assert!(
        e.contains("scheduler \"test-dsq\"") && e.contains("virtual machines"),
        "{e}"
    );
}

#[test]
fn dsq_schedulers_are_refused_with_fusion() {
    let dynamic = "[dynamic]\nmechanism = \"proxy-apic\"\n[[dynamic.fusion]]\nlevel = 2\nspeedup = { default = 1.5 }\n";
    for s in ["scx-simple", "scx-central[central_cpu=1]", "global-edf"] {
        let e = refused(&format!("scheduler = \"{s}\"\n{FOUR}{dynamic}"));
        assert!(
            e.contains("uses sched_ext dispatch queues")
                && e.contains("dynamic processors that fuse CPUs")
                && e.contains("fusion levels 2"),
            "{s}: {e}"
        );
    }
    // Hotplug alone is covered.
    let hotplug = "[dynamic]\nmechanism = \"hotplug\"\n[[dynamic.events]]\nat_ms = 5\nop = \"offline\"\ncpus = [1]\n";
    let r = run(
        &scn(&format!("scheduler = \"scx-central\"\n{FOUR}{hotplug}")),
        RunOptions {
            trace: false,
            check: true,
        },
        None,
        vec![],
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.summary.programs_completed, 1);
}

/// A vtime-ordered DSQ scheduler that records `task_vtime` as the engine
/// keeps it.
struct Vt {
    seen: std::rc::Rc<std::cell::RefCell<Vec<(TaskId, u64)>>>,
}

impl Scheduler for Vt {
    fn name(&self) -> &str {
        "test-vtime"
    }
    fn uses_dsqs(&self) -> bool {
        true
    }
    fn init(&mut self, cx: &mut Ctx) {
        cx.create_dsq(1);
    }
    fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, _p: Option<CpuId>, f: EnqFlags) -> CpuId {
        if f == EnqFlags::New {
            // Starts at 0; written here, read back below.
            assert_eq!(cx.task_vtime(t), 0);
            cx.set_task_vtime(t, 1000 * t as u64);
        }
        0
    }
    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, _cpu: CpuId, _f: EnqFlags) {
        let vt = cx.task_vtime(t);
        // Inserting with a vtime sets the task's vtime (the kernel's
        // scx_bpf_dsq_insert_vtime).
        cx.dsq_insert_vtime(t, 1, vt + 7, SLICE_DFL_NS);
        self.seen.borrow_mut().push((t, cx.task_vtime(t)));
    }
    fn dequeue(&mut self, _cx: &mut Ctx, _t: TaskId, _cpu: CpuId) {}
    fn pick_next(&mut self, _cx: &mut Ctx, _cpu: CpuId) -> Option<TaskId> {
        None
    }
    fn dispatch(&mut self, cx: &mut Ctx, _cpu: CpuId, _prev: Option<TaskId>) {
        cx.dsq_move_to_local(1);
    }
}

#[test]
fn task_vtime_is_engine_state_the_scheduler_reads_and_writes() {
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    go(FOUR, Vt { seen: seen.clone() }).unwrap_or_else(|e| panic!("{e}"));
    let seen = seen.borrow();
    // The four threads wake in order, each set to 1000 × id, inserted at
    // +7; none was yet inserted twice when the first four were recorded.
    assert_eq!(
        &seen[..4],
        &[(0, 7), (1, 1007), (2, 2007), (3, 3007)],
        "{seen:?}"
    );
    // Every later insert adds 7 to the vtime the previous one left.
    for t in 0..4 {
        let mine: Vec<u64> = seen.iter().filter(|s| s.0 == t).map(|s| s.1).collect();
        for (i, v) in mine.iter().enumerate() {
            assert_eq!(
                *v,
                1000 * t as u64 + 7 * (i as u64 + 1),
                "task {t}: {mine:?}"
            );
        }
    }
}

#[test]
fn task_vtime_of_an_unknown_task_is_an_error() {
    let e = go(
        FOUR,
        Dsq {
            enq: |cx: &mut Ctx, t, _| {
                cx.set_task_vtime(9, 1);
                cx.dsq_insert(t, 5, SLICE_DFL_NS);
            },
        },
    )
    .unwrap_err();
    assert!(
        e.contains("test-dsq")
            && e.contains("set_task_vtime(task 9, 1): task 9 does not exist (4 tasks)"),
        "{e}"
    );
}
