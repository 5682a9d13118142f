//! Two-level scheduling: VMs whose vCPUs are host tasks, guest schedulers,
//! Xen Credit and AASH.

mod common;
use common::{err, go, scn};
use hetsched_core::hw::CpuId;
use hetsched_core::os::TaskId;
use hetsched_core::policy::credit::Credit;
use hetsched_core::policy::{Ctx, EnqFlags, Scheduler};
use hetsched_core::sim::RunOptions;
use std::cell::RefCell;
use std::rc::Rc;

/// 1 fast core (2 GHz) + `slow` slow cores (1 GHz, half the speed), in LLCs
/// of four cores as on the paper's two quad-core Opterons.
fn amp(slow: usize) -> String {
    let mut s = String::from(
        "[machine.types.fast]\ncapacity = 1024\npstates = [{ mhz = 2000, volt = 1.0 }]\n\
         [machine.types.slow]\ncapacity = 512\npstates = [{ mhz = 1000, volt = 0.8 }]\n",
    );
    for c in 0..=slow {
        let ty = if c == 0 { "fast" } else { "slow" };
        s += &format!("[[machine.cpus]]\ntype = \"{ty}\"\nllc = {}\n", c / 4);
    }
    s
}

#[test]
fn a_vm_runs_its_programs_on_its_vcpus() {
    let text = format!(
        "duration_s = 10.0\nscheduler = \"cfs\"\n{}\n\
         [[vms]]\nvcpus = 2\n\
         [[vms.programs]]\nkind = \"parallel\"\nthreads = 4\nwork_ms = 400\niterations = 4\n\
         [[workload.programs]]\nkind = \"sequential\"\nwork_ms = 100\n",
        amp(3)
    );
    let r = go(&text);
    assert_eq!(r.summary.programs_completed, 2);
    assert_eq!(r.vms.len(), 1);
    let vm = &r.vms[0];
    // Four threads of 100 ms on two vCPUs: at least 200 ms of vCPU time at
    // full speed, and the guest's work is all done.
    assert!(vm.run_s >= 0.2 - 1e-9, "{vm:?}");
    let guest_work: f64 = r
        .tasks
        .iter()
        .filter(|t| t.program.starts_with("vm0/"))
        .map(|t| t.work_ms)
        .sum();
    assert!((guest_work - 400.0).abs() < 1e-6, "{guest_work}");
    // vCPUs are not in the task table.
    assert_eq!(r.tasks.len(), 5);
}

fn four_vms(sched: &str, work_ms: f64, seed: u64) -> String {
    let mut s = format!(
        "duration_s = 60.0\nseed = {seed}\nscheduler = \"{sched}\"\n{}\n",
        amp(3)
    );
    for k in 0..4 {
        s += &format!(
            "[[vms]]\nname = \"vm{k}\"\nvcpus = 1\n[[vms.programs]]\nname = \"app{k}\"\nkind = \"sequential\"\nwork_ms = {work_ms}\n"
        );
    }
    s
}

/// Which task ran on `cpu` at time `t_ns`, from the trace.
fn on_cpu(r: &hetsched_core::metrics::RunResults, cpu: usize, t_ns: u64) -> Option<usize> {
    r.trace.iter().find_map(|e| match e {
        hetsched_core::trace::TraceEvent::Run {
            t_ns: a,
            end_ns: b,
            cpu: c,
            task,
        } if *c == cpu && *a <= t_ns && t_ns < *b => Some(*task),
        _ => None,
    })
}

/// AASH's credit distribution and queue rotation, worked by hand: 1 fast +
/// 3 slow cores, four single-vCPU VMs always busy. Every VM has one active
/// vCPU, so all four sit in the fast queue (one active vCPU = a sequential
/// phase with one fast core) in the order they started: vm0 wakes first and
/// gets the idle fast core with the rest of the first period's fast
/// credits, going to the queue's tail; each accounting period (3 ticks of
/// 10 ms) hands the fast credits to the queue head, which moves to the fast
/// core while the former holder moves to the slow core it leaves. So the
/// fast core is held by vm0, vm1, vm2, vm3, vm0, ... in periods 0, 1, 2, ...
#[test]
fn aash_rotates_the_fast_core_through_the_queue() {
    let r = go(&four_vms("aash", 2000.0, 1));
    let vcpus: Vec<usize> = r.vms.iter().map(|v| v.vcpu_tasks[0]).collect();
    for k in 0..40u64 {
        // Mid-period, once the period's migrations (and cache refills) are
        // done.
        let t = on_cpu(&r, 0, k * 30_000_000 + 15_000_000).expect("the fast core never idles");
        let vm = vcpus.iter().position(|&v| v == t).unwrap();
        assert_eq!(vm as u64, k % 4, "period {k}");
    }
    // Equal shares: the four finish within one period of each other, at
    // the speed of a quarter of the fast core plus three quarters of a slow
    // one: 2000 ms / (0.25 × 1 + 0.75 × 0.5) = 3.2 s.
    let ends: Vec<f64> = r.programs.iter().map(|p| p.end_s).collect();
    for e in &ends {
        assert!((e - 3.2).abs() < 0.04, "{ends:?}");
    }
}

#[test]
fn credit_leaves_the_fast_core_to_one_vm() {
    let r = go(&four_vms("xen-credit", 2000.0, 1));
    let mut ends: Vec<f64> = r.programs.iter().map(|p| p.end_s).collect();
    ends.sort_by(f64::total_cmp);
    // Each vCPU stays where it started: one VM runs at 2 GHz throughout.
    assert!((ends[0] - 2.0).abs() < 1e-3, "{ends:?}");
    assert!((ends[3] - 4.0).abs() < 1e-3, "{ends:?}");
    assert!(r.vms.iter().all(|v| v.migrations == 0));
}

#[test]
fn a_sleeping_guest_blocks_its_vcpu_and_a_wakeup_wakes_it() {
    let text = format!(
        "duration_s = 5.0\nscheduler = \"xen-credit\"\n{}\n\
         [[vms]]\nvcpus = 2\n[[vms.programs]]\nkind = \"phases\"\nthreads = 1\nloops = 3\n\
         phases = [{{ compute_ms = 20 }}, {{ sleep_ms = 50 }}]\n",
        amp(3)
    );
    let r = go(&text);
    let vm = &r.vms[0];
    // One thread: one vCPU active at a time, idle during the sleeps.
    let counts: Vec<u32> = vm.active_vcpus.iter().map(|x| x.1).collect();
    assert_eq!(
        counts.iter().copied().max(),
        Some(1),
        "{:?}",
        vm.active_vcpus
    );
    let wakes = vm.active_vcpus.iter().filter(|w| w.1 == 1).count();
    assert_eq!(wakes, 3, "{:?}", vm.active_vcpus);
    assert_eq!(vm.active_vcpus.last().unwrap().1, 0);
    // Three 20 ms computations at 1 GHz (slow) or 2 GHz (fast) at most.
    assert!(
        vm.run_s <= 0.120 + 1e-6 && vm.run_s >= 0.060 - 1e-6,
        "{}",
        vm.run_s
    );
}

#[test]
fn vm_runs_are_deterministic() {
    let text = format!(
        "duration_s = 10.0\nseed = 7\nscheduler = \"aash\"\n{}\n\
         [[vms]]\nvcpus = 4\n[[vms.programs]]\nkind = \"fork_join\"\nthreads = 4\nwork_ms = 600\niterations = 3\nseq_fraction = 0.4\njitter = 0.2\n\
         [[vms]]\nvcpus = 1\n[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 300\n\
         [[workload.programs]]\nkind = \"parallel\"\nthreads = 2\nwork_ms = 200\n",
        amp(7)
    );
    let a = go(&text);
    let b = go(&text);
    assert_eq!(a.summary.trace_hash, b.summary.trace_hash);
    assert_eq!(a.summary.programs_completed, 3);
}

/// Only an aware guest's first `fast_vcpus` vCPUs run on fast cores (§2.2).
#[test]
fn aash_maps_an_aware_guests_fast_vcpus_to_fast_cores() {
    let mut text = String::from(
        "duration_s = 20.0\nscheduler = \"aash\"\n\
         [machine.types.fast]\ncapacity = 1024\npstates = [{ mhz = 2000, volt = 1.0 }]\n\
         [machine.types.slow]\ncapacity = 512\npstates = [{ mhz = 1000, volt = 0.8 }]\n\
         [[machine.cpus]]\ntype = \"fast\"\n[[machine.cpus]]\ntype = \"fast\"\n\
         [[machine.cpus]]\ntype = \"slow\"\n[[machine.cpus]]\ntype = \"slow\"\n\
         [[vms]]\nvcpus = 4\naware = true\n",
    );
    for v in 0..4 {
        text +=
            &format!("[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 1000\naffinity = [{v}]\n");
    }
    let r = go(&text);
    let vm = &r.vms[0];
    assert_eq!(vm.vcpus, 4);
    // The programs bound to vCPUs 0-1 run at full speed on the fast cores,
    // those on 2-3 at half speed on the slow ones.
    let ends: Vec<f64> = r.programs.iter().map(|p| p.end_s).collect();
    assert!(
        (ends[0] - 1.0).abs() < 1e-3 && (ends[1] - 1.0).abs() < 1e-3,
        "{ends:?}"
    );
    assert!(
        (ends[2] - 2.0).abs() < 1e-3 && (ends[3] - 2.0).abs() < 1e-3,
        "{ends:?}"
    );
    assert_eq!(vm.migrations, 0);
}

/// A high-priority VM's vCPUs hold the fast core; the low one gets it when
/// the high one is done (§2.4).
#[test]
fn aash_serves_the_high_priority_vm_first() {
    let mut text = format!("duration_s = 60.0\nscheduler = \"aash\"\n{}\n", amp(7));
    for (k, pr) in ["low", "high"].iter().enumerate() {
        text += &format!(
            "[[vms]]\nname = \"{pr}\"\nvcpus = 4\npriority = \"{pr}\"\n[[vms.programs]]\nname = \"p{k}\"\nkind = \"parallel\"\nthreads = 4\nwork_ms = 2000\niterations = 10\n"
        );
    }
    let r = go(&text);
    let (low, high) = (&r.vms[0], &r.vms[1]);
    assert!(
        high.fast_s > 5.0 * low.fast_s,
        "high {} low {}",
        high.fast_s,
        low.fast_s
    );
    let ends: Vec<f64> = r.programs.iter().map(|p| p.end_s).collect();
    assert!(ends[1] < ends[0], "{ends:?}");
}

/// Delegates to a shared Credit so that a test can read its log afterwards.
struct Shared(Rc<RefCell<Credit>>, String);
impl Scheduler for Shared {
    fn name(&self) -> &str {
        &self.1
    }
    fn init(&mut self, cx: &mut Ctx) {
        self.0.borrow_mut().init(cx)
    }
    fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, prev: Option<CpuId>, f: EnqFlags) -> CpuId {
        self.0.borrow_mut().select_cpu(cx, t, prev, f)
    }
    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, f: EnqFlags) {
        self.0.borrow_mut().enqueue(cx, t, cpu, f)
    }
    fn dequeue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        self.0.borrow_mut().dequeue(cx, t, cpu)
    }
    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        self.0.borrow_mut().pick_next(cx, cpu)
    }
    fn balance(&mut self, cx: &mut Ctx, cpu: CpuId) {
        self.0.borrow_mut().balance(cx, cpu)
    }
    fn running(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        self.0.borrow_mut().running(cx, t, cpu)
    }
    fn stopping(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, r: bool) {
        self.0.borrow_mut().stopping(cx, t, cpu, r)
    }
    fn on_timer(&mut self, cx: &mut Ctx, token: u64) {
        self.0.borrow_mut().on_timer(cx, token)
    }
}

/// Run `text` under a Credit whose priority log is kept; the results and
/// the log.
fn credit_logged(
    text: &str,
) -> (
    hetsched_core::metrics::RunResults,
    Vec<(
        hetsched_core::time::SimTime,
        TaskId,
        &'static str,
        &'static str,
    )>,
) {
    let s = scn(text);
    let setup_m = s.build(None, vec![]).unwrap().machine;
    let spec = hetsched_core::policy::parse_spec("xen-credit").unwrap();
    let mut c = Credit::from_params(&spec, &setup_m).unwrap();
    c.log = Some(Vec::new());
    let shared = Rc::new(RefCell::new(c));
    let r = hetsched_core::run(
        &s,
        RunOptions {
            trace: true,
            check: true,
        },
        Some(Box::new(Shared(shared.clone(), "xen-credit".into()))),
        vec![],
        None,
    )
    .unwrap();
    let log = shared.borrow().log.clone().unwrap();
    (r, log)
}

/// Two CPU-bound 1-vCPU VMs on one CPU, worked by hand in Xen's units (300
/// credits per 30 ms period for the CPU; 10 ms of running burns 100). The
/// model serves a tick's slice check before that tick's accounting.
/// * 0-30 ms the first (x) runs (both start BOOSTed; x drops the boost and
///   joins the active list at the 10 ms tick); at 30 ms only x is active
///   and gets all 300: −300 + 300 = 0, UNDER; its slice is over and the
///   second (y), still BOOSTed, runs (joining the list at 40 ms);
/// * 60 ms: y's slice is over, x (UNDER) takes the CPU; accounting gives
///   150 each: x 150, y −300 + 150 = −150, OVER;
/// * 90 ms: x's slice is over, but y is OVER: x runs on; then x 150 − 300 +
///   150 = 0 and y −150 + 150 = 0, both UNDER;
/// * 120 ms: x's slice is over and y (UNDER) takes the CPU; x 0 − 300 + 150
///   = −150, OVER, y 150; and so on: each runs 60 ms turns, turning OVER at
///   the end of its turn and UNDER 30 ms later (`csched_acct`): y at 60,
///   180, 300 ms ... (UNDER at 90, 210, 330), x at 120, 240, 360 ms ...
#[test]
fn credit_turns_a_vcpu_over_its_share_over_at_accounting() {
    let text = "duration_s = 2.0\nstop_when_done = false\nscheduler = \"xen-credit\"\n\
        [machine.types.c]\ncapacity = 1024\npstates = [{ mhz = 1000, volt = 1.0 }]\n\
        [[machine.cpus]]\ntype = \"c\"\n\
        [[vms]]\nname = \"a\"\nvcpus = 1\n[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 5000\n\
        [[vms]]\nname = \"b\"\nvcpus = 1\n[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 5000\n";
    let (r, log) = credit_logged(text);
    let first = r.trace.iter().find_map(|e| match e {
        hetsched_core::trace::TraceEvent::Run { task, .. } => Some(*task),
        _ => None,
    });
    let (a, b) = (r.vms[0].vcpu_tasks[0], r.vms[1].vcpu_tasks[0]);
    let (x, y) = if first == Some(a) { (a, b) } else { (b, a) };
    let at = |t: TaskId, from: &str, to: &str| -> Vec<u64> {
        log.iter()
            .filter(|e| e.1 == t && e.2 == from && e.3 == to)
            .map(|e| e.0 .0 / common::MS)
            .collect()
    };
    for (t, over, under) in [
        (y, [60, 180, 300], [90, 210, 330]),
        (x, [120, 240, 360], [150, 270, 390]),
    ] {
        let (o, u) = (at(t, "under", "over"), at(t, "over", "under"));
        assert_eq!(&o[..3], &over, "{log:?}");
        assert_eq!(&u[..3], &under, "{log:?}");
        // About one turn every 120 ms over the 2 s.
        assert!(o.len() >= 15, "{log:?}");
    }
}

/// Credit's BOOST, on one CPU shared by a CPU hog and an interactive VM
/// (5 ms of work every 40 ms): the interactive vCPU is BOOSTed at each
/// wake-up, preempts the hog at once, and loses the boost after a tick when
/// it runs that long, or at accounting.
#[test]
fn credit_boost_under_over_transitions() {
    let text = "duration_s = 2.0\nstop_when_done = false\nscheduler = \"xen-credit\"\n\
        [machine.types.c]\ncapacity = 1024\npstates = [{ mhz = 1000, volt = 1.0 }]\n\
        [[machine.cpus]]\ntype = \"c\"\n\
        [[vms]]\nname = \"hog\"\nvcpus = 1\n[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 5000\n\
        [[vms]]\nname = \"io\"\nvcpus = 1\n[[vms.programs]]\nkind = \"phases\"\nloops = 40\n\
        phases = [{ compute_ms = 5 }, { sleep_ms = 33 }, { compute_ms = 15 }, { sleep_ms = 27 }]\n";
    let (r, log) = credit_logged(text);
    let io = r.vms[1].vcpu_tasks[0];
    let has = |t: TaskId, from: &str, to: &str| {
        log.iter()
            .filter(|e| e.1 == t && e.2 == from && e.3 == to)
            .count()
    };
    assert!(has(io, "under", "boost") >= 20, "{log:?}");
    assert!(has(io, "boost", "under") >= 10, "{log:?}");
    // A boosted wake-up preempts the hog at once: the interactive vCPU never
    // waits for a CPU.
    let mut waits = Vec::new();
    for e in &r.trace {
        if let hetsched_core::trace::TraceEvent::Wake { t_ns, task, .. } = e {
            if *task == io {
                let start = r.trace.iter().find_map(|x| match x {
                    hetsched_core::trace::TraceEvent::Run {
                        t_ns: a, task: t2, ..
                    } if *t2 == io && *a >= *t_ns => Some(*a),
                    _ => None,
                });
                waits.push(start.unwrap() - t_ns);
            }
        }
    }
    // (The first start, at time 0, queues behind the hog's equal boost.)
    assert!(waits.len() >= 40);
    assert!(waits[1..].iter().all(|&w| w == 0), "{waits:?}");
    // The hog gets the rest of the CPU.
    let busy = r.vms[0].run_s + r.vms[1].run_s;
    assert!((busy - 2.0).abs() < 1e-6, "{busy}");
}

#[test]
fn bad_vms_are_named_by_path() {
    let base = format!("duration_s = 1.0\n{}\n", amp(3));
    let prog = "[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 10\n";
    let cases = [
        ("[[vms]]\nvcpus = 0\n", "vms[0].vcpus: 0 is not allowed"),
        (
            "[[vms]]\nvcpus = 2\nweight = 0\n",
            "vms[0].weight: 0 is not allowed",
        ),
        (
            "[[vms]]\nvcpus = 2\nweight = -3\n",
            "vms[0].weight: -3 is not allowed",
        ),
        (
            "[[vms]]\nvcpus = 2\npriority = \"medium\"\n",
            "vms[0].priority: \"medium\" is not a priority class; allowed: high, low",
        ),
        (
            "[[vms]]\nvcpus = 2\naware = true\nfast_vcpus = 3\n",
            "vms[0].fast_vcpus: 3 is not allowed; the VM has 2 vCPUs",
        ),
        (
            "[[vms]]\nvcpus = 2\nfast_vcpus = 1\n",
            "vms[0].fast_vcpus: only an asymmetry-aware guest",
        ),
        (
            "[[vms]]\nvcpus = 2\nscheduler = \"nope\"\n",
            "vms[0].scheduler: unknown scheduler \"nope\"",
        ),
    ];
    for (vm, want) in cases {
        let e = err(&format!("{base}{vm}{prog}"));
        assert!(e.contains(want), "{e}\nwanted: {want}");
    }
    let e = err(&format!(
        "{base}[[vms]]\nvcpus = 2\n[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 10\naffinity = [0, 2]\n"
    ));
    assert!(
        e.contains(
            "vms[0].programs[0].affinity[1]: vCPU 2 does not exist (the VM has 2 vCPUs: 0-1)"
        ),
        "{e}"
    );
    let e = err(&format!("{base}[[vms]]\nvcpus = 2\n"));
    assert!(
        e.contains("vms[0].programs: a VM runs at least one program"),
        "{e}"
    );
    let e = err(&format!(
        "{base}[[vms]]\nvcpus = 2\n[[vms.programs]]\nkind = \"sequential\"\n"
    ));
    assert!(e.contains("vms[0].programs[0].work_ms: required"), "{e}");
    let e = err(&format!("scheduler = \"aash[fast_cpus=9]\"\n{base}"));
    assert!(e.contains("scheduler: aash[fast_cpus]"), "{e}");
}

/// Random mixes of VMs, guest programs, native programs and host
/// schedulers run under the invariant checker (both levels), finish, and
/// conserve work.
#[test]
fn random_vm_mixes_keep_the_invariants() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let hosts = [
        "cfs",
        "xen-credit",
        "aash",
        "aash[phase=false]",
        "dwrr",
        "pinned",
    ];
    for case in 0..200 {
        let host = hosts[next(hosts.len() as u64) as usize];
        let slow = [3, 7][next(2) as usize];
        let mut text = format!(
            "duration_s = 30.0\nseed = {case}\nscheduler = \"{host}\"\n{}\n",
            amp(slow)
        );
        let nvms = 1 + next(3);
        for k in 0..nvms {
            let vcpus = 1 + next(4);
            let prio = ["low", "high"][next(2) as usize];
            let aware = next(3) == 0;
            text += &format!(
                "[[vms]]\nname = \"v{k}\"\nvcpus = {vcpus}\npriority = \"{prio}\"\naware = {aware}\n"
            );
            if aware {
                text += "fast_vcpus = 1\n";
            }
            let guest = ["cfs", "pinned"][next(2) as usize];
            text += &format!("scheduler = \"{guest}\"\n");
            for _ in 0..1 + next(2) {
                let threads = 1 + next(5);
                text += &match next(4) {
                    0 => format!(
                        "[[vms.programs]]\nkind = \"parallel\"\nthreads = {threads}\nwork_ms = {}\niterations = 3\nmem = 0.3\n",
                        50 + next(200)
                    ),
                    1 => format!(
                        "[[vms.programs]]\nkind = \"fork_join\"\nthreads = {threads}\nwork_ms = {}\niterations = 3\nseq_fraction = 0.3\n",
                        50 + next(200)
                    ),
                    2 => format!(
                        "[[vms.programs]]\nkind = \"phases\"\nthreads = {threads}\nloops = 4\njitter = 0.3\nphases = [{{ compute_ms = {} }}, {{ sleep_ms = {} }}]\n",
                        1 + next(20),
                        1 + next(20)
                    ),
                    _ => format!(
                        "[[vms.programs]]\nkind = \"sequential\"\nwork_ms = {}\naffinity = [{}]\n",
                        10 + next(100),
                        next(vcpus)
                    ),
                };
            }
        }
        if next(2) == 0 {
            text += "[[workload.programs]]\nkind = \"parallel\"\nthreads = 3\nwork_ms = 90\n";
        }
        let r = go(&text);
        assert_eq!(
            r.summary.programs_completed, r.summary.programs,
            "case {case} ({host}):\n{text}"
        );
    }
}

/// §2.2: an aware guest's fast credits go only to its first vCPU, and the VM
/// still gets them in proportion to its vCPU count. 1 fast + 3 slow cores, an
/// aware 2-vCPU VM and a legacy 2-vCPU VM, all four vCPUs always busy: the
/// normal queue rotates through four vCPUs, so each VM gets every other
/// period's fast credits; the aware VM's all go to its vCPU 0 (its vCPU 1,
/// reaching the head, is swapped with vCPU 0), the legacy VM's alternate.
#[test]
fn aash_gives_an_aware_guest_its_share_on_its_fast_vcpu() {
    let mut text = format!(
        "duration_s = 1.2\nstop_when_done = false\nscheduler = \"aash\"\n{}\n",
        amp(3)
    );
    for (name, aware) in [("aware", true), ("legacy", false)] {
        text += &format!("[[vms]]\nname = \"{name}\"\nvcpus = 2\naware = {aware}\n");
        for v in 0..2 {
            text += &format!(
                "[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 5000\naffinity = [{v}]\n"
            );
        }
    }
    let s = scn(&text);
    let m = s.build(None, vec![]).unwrap().machine;
    let spec = hetsched_core::policy::parse_spec("aash").unwrap();
    let shared = Rc::new(RefCell::new(Credit::from_params(&spec, &m).unwrap()));
    let r = hetsched_core::run(
        &s,
        RunOptions {
            trace: false,
            check: true,
        },
        Some(Box::new(Shared(shared.clone(), "aash".into()))),
        vec![],
        None,
    )
    .unwrap();
    let grants: Vec<usize> = shared.borrow().grants().iter().map(|g| g.1).collect();
    let (aware, legacy) = (&r.vms[0].vcpu_tasks, &r.vms[1].vcpu_tasks);
    let to_aware: Vec<usize> = grants
        .iter()
        .copied()
        .filter(|t| aware.contains(t))
        .collect();
    let to_legacy: Vec<usize> = grants
        .iter()
        .copied()
        .filter(|t| legacy.contains(t))
        .collect();
    assert!(grants.len() >= 38, "{grants:?}");
    // Every fast grant of the aware VM goes to its vCPU 0 ...
    assert!(to_aware.iter().all(|&t| t == aware[0]), "{grants:?}");
    // ... and the two VMs get equal numbers of periods (±1).
    assert!(
        (to_aware.len() as i64 - to_legacy.len() as i64).abs() <= 1,
        "{grants:?}"
    );
    // The legacy VM's fast credits alternate between its two vCPUs.
    let l0 = to_legacy.iter().filter(|&&t| t == legacy[0]).count() as i64;
    assert!((2 * l0 - to_legacy.len() as i64).abs() <= 1, "{grants:?}");
    // So vCPU 0 of the aware VM gets twice the fast time of a legacy vCPU.
    assert!(r.vms[0].fast_s > 0.9 * r.vms[1].fast_s, "{:?}", r.vms);
}

/// §2.3: a VM with one active vCPU (a sequential program, or a parallel one
/// in a sequential phase) is served first on the fast core; without phase
/// awareness it gets only its turn in the rotation (1 of 7 vCPUs).
#[test]
fn aash_serves_a_sequential_vm_first() {
    let text = |phase: bool| {
        format!(
            "duration_s = 60.0\nscheduler = \"aash[phase={phase}]\"\n{}\n\
             [[vms]]\nname = \"par\"\nvcpus = 6\n[[vms.programs]]\nkind = \"fork_join\"\nthreads = 6\n\
             work_ms = 6000\niterations = 10\nseq_fraction = 0.12\n\
             [[vms]]\nname = \"seq\"\nvcpus = 1\n[[vms.programs]]\nkind = \"sequential\"\nwork_ms = 1500\n",
            amp(7)
        )
    };
    let on = go(&text(true));
    let off = go(&text(false));
    let share = |r: &hetsched_core::metrics::RunResults| r.vms[1].fast_s / r.vms[1].run_s;
    assert!(share(&on) > 0.6, "{}", share(&on));
    assert!(share(&off) < 0.35, "{}", share(&off));
    assert!(on.programs[1].completion_s < off.programs[1].completion_s);
}

/// Xen 3.4's Credit on a wake-up and on a tick, hand-worked on 3 CPUs with
/// two native threads (each a single-vCPU domain), both pinned to CPU 0 for
/// their first millisecond:
/// * t = 0: the hog starts on CPU 0; `io` queues behind it, both BOOSTed
///   (no preemption between equals, and no idler may take `io`);
/// * t = 10 ms: the hog drops its BOOST, but a tick preempts nothing
///   (`csched_tick` only accounts): `io` waits for the end of the hog's
///   30 ms slice, and runs at t = 30 ms;
/// * `io` computes 1 ms, may then use any CPU, and sleeps 50 ms; the hog
///   takes CPU 0 back from its own queue at 31 ms;
/// * t = 81 ms: `io` wakes on its own processor, CPU 0 (`csched_vcpu_wake`
///   picks no CPU), is BOOSTed and preempts the hog; the idle CPUs are
///   tickled (`__runq_tickle`) and one of them steals the preempted hog
///   from CPU 0's queue (`csched_load_balance`) at that instant. Which idler
///   wins is Xen's race, random per seed.
#[test]
fn credit_wakes_on_its_cpu_and_idlers_steal_the_preempted_vcpu() {
    let mut won = std::collections::BTreeSet::new();
    for seed in 1..=8 {
        let text = format!(
            "duration_s = 1.0\nseed = {seed}\nscheduler = \"xen-credit\"\n{}\
             [[workload.programs]]\nname = \"hog\"\nkind = \"phases\"\naffinity = [0]\n\
             phases = [{{ compute_ms = 1 }}, {{ cpus = [0, 1, 2] }}, {{ compute_ms = 300 }}]\n\
             [[workload.programs]]\nname = \"io\"\nkind = \"phases\"\naffinity = [0]\n\
             phases = [{{ compute_ms = 1 }}, {{ cpus = [0, 1, 2] }}, {{ sleep_ms = 50 }}, \
             {{ compute_ms = 2 }}]\n",
            common::cpus(3)
        );
        let r = go(&text);
        let id = |name: &str| r.tasks.iter().position(|t| t.program == name).unwrap();
        let (hog, io) = (id("hog"), id("io"));
        let hog_runs = common::run_intervals(&r, hog);
        let io_runs = common::run_intervals(&r, io);
        assert_eq!(
            hog_runs[0],
            (0, 0, 30 * common::MS),
            "seed {seed}: {hog_runs:?}"
        );
        assert_eq!(
            io_runs[0],
            (0, 30 * common::MS, 31 * common::MS),
            "{io_runs:?}"
        );
        assert_eq!(
            hog_runs[1],
            (0, 31 * common::MS, 81 * common::MS),
            "{hog_runs:?}"
        );
        assert_eq!(
            io_runs[1],
            (0, 81 * common::MS, 83 * common::MS),
            "{io_runs:?}"
        );
        let (cpu, start, _) = hog_runs[2];
        assert_eq!(start, 81 * common::MS, "seed {seed}: {hog_runs:?}");
        assert_ne!(cpu, 0, "seed {seed}: {hog_runs:?}");
        won.insert(cpu);
    }
    assert_eq!(won.into_iter().collect::<Vec<_>>(), vec![1, 2]);
}

/// Xen 3.4's Credit steals only when a CPU schedules: an idle CPU is told
/// to when a vCPU wakes elsewhere (`__runq_tickle`); its tick
/// (`csched_tick`) only accounts for a running vCPU. Two vCPUs that start
/// on CPU 0 (each pinned there for its first millisecond, then free to
/// use CPU 1 too) and never block take turns on CPU 0 in 30 ms slices: the
/// one put back at the end of a slice is queued without a tickle, so idle
/// CPU 1 never looks, and the running one stays (`csched_vcpu_acct` moves
/// a vCPU only to another cache domain with more idle CPUs, and there is
/// one).
#[test]
fn credit_idle_cpus_do_not_steal_at_their_ticks() {
    for seed in 1..=4 {
        let text = format!(
            "duration_s = 0.2\nstop_when_done = false\nseed = {seed}\n\
             scheduler = \"xen-credit\"\n{}\
             [[workload.programs]]\nname = \"a\"\nkind = \"phases\"\naffinity = [0]\n\
             phases = [{{ compute_ms = 1 }}, {{ cpus = [0, 1] }}, {{ compute_ms = 1000 }}]\n\
             [[workload.programs]]\nname = \"b\"\nkind = \"phases\"\naffinity = [0]\n\
             phases = [{{ compute_ms = 1 }}, {{ cpus = [0, 1] }}, {{ compute_ms = 1000 }}]\n",
            common::cpus(2)
        );
        let r = go(&text);
        let runs: Vec<_> = (0..2).flat_map(|t| common::run_intervals(&r, t)).collect();
        assert!(
            runs.iter().all(|&(cpu, _, _)| cpu == 0),
            "seed {seed}: {runs:?}"
        );
        // Turns of a whole slice each (the first one's start aside).
        let mut ends: Vec<u64> = runs.iter().map(|&(_, _, e)| e).collect();
        ends.sort_unstable();
        assert_eq!(
            &ends[..6],
            &[30, 60, 90, 120, 150, 180].map(|m| m * common::MS),
            "seed {seed}: {runs:?}"
        );
    }
}

/// AASH hands a fast core that would go idle to the next task in its queue
/// order, and at each accounting period the fast credits to the first ones:
/// a native thread pinned to a slow core is passed over (it keeps its place)
/// instead of being moved outside its affinity, which the engine refuses.
#[test]
fn aash_passes_over_threads_pinned_to_slow_cores() {
    for seed in 1..=4 {
        let text = format!(
            "duration_s = 1.0\nstop_when_done = false\nseed = {seed}\nscheduler = \"aash\"\n{}\n\
             [[vms]]\nvcpus = 1\n\
             [[vms.programs]]\nkind = \"sequential\"\nwork_ms = 50\n\
             [[workload.programs]]\nname = \"pinned\"\nkind = \"periodic\"\n\
             period_ms = 10\nwcet_ms = 2\njobs = 90\naffinity = [1]\n\
             [[workload.programs]]\nname = \"pinned2\"\nkind = \"periodic\"\n\
             period_ms = 10\nwcet_ms = 2\njobs = 90\naffinity = [2]\n",
            amp(2)
        );
        let r = go(&text);
        for name in ["pinned", "pinned2"] {
            let t = r.tasks.iter().position(|x| x.program == name).unwrap();
            let cpu = if name == "pinned" { 1 } else { 2 };
            let runs = common::run_intervals(&r, t);
            assert!(
                runs.len() >= 80,
                "seed {seed}: {name} ran {} times",
                runs.len()
            );
            assert!(
                runs.iter().all(|&(c, _, _)| c == cpu),
                "seed {seed}: {runs:?}"
            );
        }
    }
}
