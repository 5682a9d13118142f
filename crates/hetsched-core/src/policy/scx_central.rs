//! `scx-central`: the kernel's `tools/sched_ext/scx_central.bpf.c` (its
//! tickless form, with the periodic timer) on the DSQ model. One central
//! CPU makes every scheduling decision:
//! * `select_cpu` steers every wake-up to the central CPU (a task that may
//!   not run there gets the kernel's fallback: the lowest online CPU of its
//!   affinity);
//! * `enqueue` appends the task to one FIFO (`central_q`) and, unless the
//!   task is running, kicks the central CPU with preempt;
//! * `dispatch` on the central CPU gives the head of the FIFO to each CPU
//!   that asked for work (`dsq_local_on(cpu)`, then a kick that wakes it if
//!   idle), then takes a task for itself; a task that may not run on the CPU
//!   it is popped for goes to a fallback DSQ, which every CPU consumes first;
//! * `dispatch` on any other CPU consumes the fallback DSQ or records that
//!   the CPU wants a task and kicks the central CPU with preempt;
//! * tasks run with an infinite slice; a timer every 1 ms preempts each
//!   non-central CPU whose task ran `slice_ms` or more (or that is idle)
//!   when work is waiting (the fallback DSQ or its local DSQ is non-empty,
//!   or the FIFO still holds tasks not yet matched with a kicked CPU).
//!
//! `SCX_OPS_ENQ_LAST` is set: a CPU whose task is preempted with nothing else
//! to run sends that task through `enqueue` again, to be placed by the
//! central CPU.

use super::scx::{dsq_local_on, SLICE_INF};
use super::{About, Ctx, EnqFlags, ParamDef, Params, PolicySpec, Scheduler};
use crate::hw::{CpuId, Machine};
use crate::os::{TaskId, TaskState};
use crate::time::SimTime;
use std::collections::VecDeque;

/// The fallback DSQ's id (`FALLBACK_DSQ_ID` in scx_central.bpf.c).
pub const FALLBACK_DSQ: u64 = 0;
/// Period of the central timer, 1 ms (`TIMER_INTERVAL_NS`).
pub const TIMER_INTERVAL_NS: u64 = 1_000_000;
/// Inserts one `dispatch` call may make (`SCX_DSP_DFL_MAX_BATCH`, the size
/// of the kernel's per-CPU dispatch buffer; `scx_bpf_dispatch_nr_slots`
/// counts what is left of it).
pub const DISPATCH_SLOTS: u32 = 32;
/// The token of the central timer.
const TIMER: u64 = 0;

/// Registry entry.
pub fn info() -> About {
    About {
        name: "scx-central",
        doc: "sched_ext's scx_central: one central CPU dispatches a global FIFO to every CPU's local DSQ; infinite slices, a 1 ms timer preempts tasks past slice_ms. Keeps the kernel's FIFO, fallback DSQ, gimme flags, ENQ_LAST, dispatch slots and timer rotation; leaves out the per-CPU kthread fast path (no kthreads here), the FIFO's 4096-entry limit and its statistics counters",
        params: vec![
            ParamDef {
                name: "central_cpu",
                default: "0",
                doc: "the CPU that makes every scheduling decision (the kernel's -c)",
            },
            ParamDef {
                name: "slice_ms",
                default: "20",
                doc: "slice after which the timer preempts a task, ms (SCX_SLICE_DFL, the kernel's -s)",
            },
        ],
    }
}

/// The scx_central scheduler.
pub struct ScxCentral {
    name: String,
    central: CpuId,
    slice_ns: u64,
    /// `central_q`: runnable tasks waiting for the central CPU's decision.
    queue: VecDeque<TaskId>,
    /// `cpu_gimme_task`: the CPU ran out of tasks and asked for one (bit
    /// `c % 64` of word `c / 64`), so that the central dispatch visits the
    /// CPUs that asked, in CPU order, without testing every CPU's flag.
    gimme: Vec<u64>,
    /// `cpu_started_at`: when the CPU's task began running (`None`: idle).
    started_at: Vec<Option<SimTime>>,
    /// `nr_timers`: timer expiries so far (rotates the first CPU checked).
    nr_timers: u64,
    /// Inserts left to the current `dispatch` call.
    slots: u32,
}

impl ScxCentral {
    /// Build from a parsed spec.
    pub fn from_params(ps: &PolicySpec, m: &Machine) -> Result<ScxCentral, String> {
        let defs = info().params;
        let p = Params::new("scx-central", &ps.params, &defs)?;
        let n = m.ncpus();
        let c = p.f64("central_cpu", 0.0, (n - 1) as f64)?;
        if c.fract() != 0.0 {
            return Err(format!(
                "scx-central[central_cpu]: {c} is not a cpu id; allowed 0 to {}",
                n - 1
            ));
        }
        let slice_ms = p.f64("slice_ms", 0.001, 10_000.0)?;
        let central = c as CpuId;
        let name = if ps.params.is_empty() {
            "scx-central".to_string()
        } else {
            let given: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("scx-central[{}]", given.join(","))
        };
        Ok(ScxCentral {
            name,
            central,
            slice_ns: (slice_ms * 1e6).round() as u64,
            queue: VecDeque::new(),
            gimme: vec![0; n.div_ceil(64)],
            started_at: vec![None; n],
            nr_timers: 0,
            slots: DISPATCH_SLOTS,
        })
    }

    /// `scx_bpf_dsq_insert` counted against the dispatch buffer.
    fn insert(&mut self, cx: &mut Ctx, t: TaskId, dsq: u64) {
        cx.dsq_insert(t, dsq, SLICE_INF);
        self.slots = self.slots.saturating_sub(1);
    }

    /// `dispatch_to_cpu`: give the first task of the FIFO that may run on
    /// `cpu` to its local DSQ; the ones that may not go to the fallback DSQ.
    fn dispatch_to_cpu(&mut self, cx: &mut Ctx, cpu: CpuId) -> bool {
        while let Some(t) = self.queue.pop_front() {
            if !cx.task(t).affinity.contains(cpu) || !cx.online(cpu) {
                self.insert(cx, t, FALLBACK_DSQ);
                if self.slots == 0 {
                    break;
                }
                continue;
            }
            self.insert(cx, t, dsq_local_on(cpu));
            if cpu != self.central {
                // SCX_KICK_IDLE: wake the CPU only if it is idle.
                cx.kick_cpu(cpu, false);
            }
            return true;
        }
        false
    }
}

impl Scheduler for ScxCentral {
    fn name(&self) -> &str {
        &self.name
    }
    fn uses_dsqs(&self) -> bool {
        true
    }
    fn enq_last(&self) -> bool {
        true
    }
    fn init(&mut self, cx: &mut Ctx) {
        cx.create_dsq(FALLBACK_DSQ);
        let at = cx.now + SimTime(TIMER_INTERVAL_NS);
        cx.arm_timer(at, TIMER);
    }
    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        t: TaskId,
        prev: Option<CpuId>,
        _flags: EnqFlags,
    ) -> CpuId {
        let aff = &cx.task(t).affinity;
        if aff.contains(self.central) && cx.online(self.central) {
            return self.central;
        }
        // The kernel's select_fallback_rq on a one-node machine: the
        // lowest online CPU the task may use.
        (0..cx.ncpus())
            .find(|&c| aff.contains(c) && cx.online(c))
            .or(prev)
            .unwrap_or(cx.task(t).cpu)
    }
    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, _cpu: CpuId, _flags: EnqFlags) {
        if !cx.online(self.central) {
            // Nothing would ever dispatch the task: in the kernel the
            // sched_ext watchdog ends such a scheduler.
            cx.fail(format!(
                "the central cpu {} is offline, and only it dispatches tasks (choose another central_cpu)",
                self.central
            ));
            return;
        }
        self.queue.push_back(t);
        if cx.task(t).state != TaskState::Running {
            cx.kick_cpu(self.central, true);
        }
    }
    fn dequeue(&mut self, _cx: &mut Ctx, t: TaskId, _cpu: CpuId) {
        self.queue.retain(|&x| x != t);
    }
    fn pick_next(&mut self, _cx: &mut Ctx, _cpu: CpuId) -> Option<TaskId> {
        None
    }
    fn dispatch(&mut self, cx: &mut Ctx, cpu: CpuId, _prev: Option<TaskId>) {
        self.slots = DISPATCH_SLOTS;
        if cpu != self.central {
            if cx.dsq_move_to_local(FALLBACK_DSQ) {
                return;
            }
            self.gimme[cpu / 64] |= 1 << (cpu % 64);
            cx.kick_cpu(self.central, true);
            return;
        }
        // Dispatch for every other CPU first, in CPU order: the CPUs that
        // asked (the flags of the others would be skipped), until the slots
        // run out. Only the CPU served changes its own flag.
        'cpus: for w in 0..self.gimme.len() {
            let mut bits = self.gimme[w];
            while bits != 0 {
                let c = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.slots == 0 {
                    break 'cpus;
                }
                if self.dispatch_to_cpu(cx, c) {
                    self.gimme[w] &= !(1 << (c % 64));
                }
            }
        }
        if self.slots == 0 {
            // Out of dispatch slots: some CPUs may have been skipped; retry.
            cx.kick_cpu(self.central, true);
            return;
        }
        if cx.dsq_move_to_local(FALLBACK_DSQ) {
            return;
        }
        self.dispatch_to_cpu(cx, self.central);
    }
    fn running(&mut self, cx: &mut Ctx, _t: TaskId, cpu: CpuId) {
        self.started_at[cpu] = Some(cx.now);
    }
    fn stopping(&mut self, _cx: &mut Ctx, _t: TaskId, cpu: CpuId, _runnable: bool) {
        self.started_at[cpu] = None;
    }
    fn on_timer(&mut self, cx: &mut Ctx, token: u64) {
        if token != TIMER {
            return;
        }
        let n = cx.ncpus();
        let mut nr_to_kick = self.queue.len();
        for i in 0..n {
            let cpu = ((self.nr_timers + i as u64) % n as u64) as CpuId;
            if cpu == self.central {
                continue;
            }
            // Kick only if the task there has used its slice (or none runs)
            // ...
            if let Some(s) = self.started_at[cpu] {
                if cx.now < s + SimTime(self.slice_ns) {
                    continue;
                }
            }
            // ... and something is pending.
            let pending =
                cx.dsq_nr_queued(FALLBACK_DSQ) > 0 || cx.dsq_nr_queued(dsq_local_on(cpu)) > 0;
            if !pending {
                if nr_to_kick == 0 {
                    continue;
                }
                nr_to_kick -= 1;
            }
            cx.kick_cpu(cpu, true);
        }
        let at = cx.now + SimTime(TIMER_INTERVAL_NS);
        cx.arm_timer(at, TIMER);
        self.nr_timers += 1;
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::RunResults;
    use crate::scenario::{parse, Format};
    use crate::sim::RunOptions;
    use crate::trace::TraceEvent;

    fn run(scheduler: &str, body: &str) -> RunResults {
        let text = format!("scheduler = \"{scheduler}\"\n{body}");
        let s = parse(&text, "t.toml", Format::Toml, &[]).unwrap_or_else(|e| panic!("{e}"));
        crate::run(
            &s,
            RunOptions {
                trace: true,
                check: true,
            },
            None,
            vec![],
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `(start ms, end ms, cpu, task)` of every run interval.
    fn runs(r: &RunResults) -> Vec<(f64, f64, usize, usize)> {
        let mut v: Vec<_> = r
            .trace
            .iter()
            .filter_map(|e| match *e {
                TraceEvent::Run {
                    t_ns,
                    end_ns,
                    cpu,
                    task,
                } => Some((t_ns as f64 * 1e-6, end_ns as f64 * 1e-6, cpu, task)),
                _ => None,
            })
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
        v
    }

    fn machine(n: usize) -> String {
        let mut s = String::from(
            "[machine.migration]\nenabled = false\n[machine.types.c]\ncapacity = 1024\n",
        );
        for _ in 0..n {
            s.push_str("[[machine.cpus]]\ntype = \"c\"\n");
        }
        s
    }

    #[test]
    fn four_cpus_six_tasks_the_central_cpu_decides() {
        // Six CPU-bound threads wake at t=0 on 4 equal CPUs; CPU 0 is central.
        // Every wake-up goes to CPU 0 and into the FIFO [0..5]; CPU 0's
        // dispatch takes task 0. CPUs 1-3 have not asked for work (their
        // gimme flags start false, as in the kernel), so they stay idle
        // until the first timer, at 1 ms: it kicks each idle CPU while the
        // FIFO holds unmatched tasks (5 of them); each CPU's dispatch finds
        // the fallback DSQ empty, raises its gimme flag and kicks CPU 0
        // with preempt. CPU 0's dispatch then gives tasks 1, 2, 3 to CPUs
        // 1, 2, 3 (dsq_local_on + kick), takes task 4 itself, and task 0
        // goes to the FIFO's tail: FIFO [5, 0].
        // At 21 ms CPUs 1-3 have run 20 ms; the timer (its 21st expiry
        // starts at CPU 21 % 4 = 1) kicks CPUs 1 and 2 (two tasks wait),
        // not CPU 3. They ask CPU 0, whose dispatch gives 5 to CPU 1 and 0
        // to CPU 2 and takes task 1 for itself (the preempted tasks 1 and
        // 2 having joined the tail: FIFO [5, 0, 1, 2] → [2, 4]).
        // At 22 ms the timer (start CPU 2) finds CPU 3 past its slice:
        // CPU 3 gets task 2 and CPU 0 task 4; FIFO [3, 1].
        let body = format!(
            "duration_s = 0.030\nstop_when_done = false\n{}[[workload.programs]]\nkind = \"parallel\"\nthreads = 6\nwork_ms = 60000\n",
            machine(4)
        );
        let r = run("scx-central", &body);
        let want = vec![
            (0.0, 1.0, 0, 0),
            (1.0, 21.0, 0, 4),
            (1.0, 21.0, 1, 1),
            (1.0, 21.0, 2, 2),
            (1.0, 22.0, 3, 3),
            (21.0, 22.0, 0, 1),
            (21.0, 30.0, 1, 5),
            (21.0, 30.0, 2, 0),
            (22.0, 30.0, 0, 4),
            (22.0, 30.0, 3, 2),
        ];
        let got = runs(&r);
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g.0 - w.0).abs() < 1e-9 && (g.1 - w.1).abs() < 1e-9 && g.2 == w.2 && g.3 == w.3,
                "got {got:?}"
            );
        }
        // Three CPUs idle for the first millisecond while tasks waited.
        let iw = r.summary.idle_while_runnable_s;
        assert!((iw - 0.003).abs() < 1e-12, "idle while runnable {iw}");
    }

    #[test]
    fn a_task_pinned_away_from_the_central_cpu() {
        // Two CPUs, central CPU 0. Task 0 may run only on CPU 1, task 1
        // anywhere; both wake at t=0 and join the FIFO [0, 1]. Task 0
        // cannot go to the central CPU: select_cpu falls back to CPU 1, the
        // lowest CPU it may use, and its enqueue kicks CPU 0 (which
        // reschedules first, then CPU 1, woken by the placement). CPU 0's
        // dispatch pops task 0, which may not run there: it goes to the
        // fallback DSQ; then task 1, which CPU 0 takes. CPU 1's dispatch
        // takes task 0 from the fallback DSQ. Each then runs on alone: no
        // other task waits, so the timer never preempts them.
        let body = format!(
            "duration_s = 0.050\nstop_when_done = false\n{}[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 60000\naffinity = [1]\n[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 60000\n",
            machine(2)
        );
        let r = run("scx-central", &body);
        assert_eq!(runs(&r), vec![(0.0, 50.0, 0, 1), (0.0, 50.0, 1, 0)]);
        assert_eq!(r.summary.idle_while_runnable_s, 0.0);
    }

    #[test]
    fn a_mismatched_task_goes_through_the_fallback_dsq() {
        // Three CPUs, central CPU 0, 4 ms slices. Tasks 0-2 may run
        // anywhere, task 3 only on CPU 0. At t=0 the FIFO is [0, 1, 2, 3]
        // and CPU 0 takes task 0; at 1 ms the timer kicks CPUs 1 and 2,
        // which ask CPU 0: CPU 1 gets task 1, CPU 2 task 2, CPU 0 task 3
        // (task 0 to the FIFO). From then on each slice end at a
        // non-central CPU sends its task to the FIFO and asks for the head;
        // whenever the head is task 3 and the asking CPU is 1 or 2, task 3
        // is bounced to the fallback DSQ, which only CPU 0 may take it
        // from. Whatever the order, task 3 must run on CPU 0 only, and the
        // work is shared: every task progresses.
        let body = format!(
            "duration_s = 0.200\nstop_when_done = false\n{}[[workload.programs]]\nkind = \"parallel\"\nthreads = 3\nwork_ms = 60000\n[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 60000\naffinity = [0]\n",
            machine(3)
        );
        let r = run("scx-central[slice_ms=4]", &body);
        let got = runs(&r);
        assert!(got.iter().filter(|g| g.3 == 3).all(|g| g.2 == 0), "{got:?}");
        for t in &r.tasks {
            assert!(t.run_s > 0.02, "task {} ran {} s", t.task, t.run_s);
        }
        let total: f64 = r.tasks.iter().map(|t| t.run_s).sum();
        assert!(total > 0.6 - 0.002 - 1e-9, "total run {total}");
    }

    #[test]
    fn the_central_cpu_going_offline_is_an_error() {
        let body = format!(
            "duration_s = 0.1\n{}[[workload.programs]]\nkind = \"parallel\"\nthreads = 3\nwork_ms = 300\n[dynamic]\nmechanism = \"hotplug\"\n[[dynamic.events]]\nat_ms = 10\nop = \"offline\"\ncpus = [1]\n",
            machine(2)
        );
        let s = parse(
            &format!("scheduler = \"scx-central[central_cpu=1]\"\n{body}"),
            "t.toml",
            Format::Toml,
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = crate::run(&s, RunOptions::default(), None, vec![], None)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("scx-central[central_cpu=1]") && e.contains("the central cpu 1 is offline"),
            "{e}"
        );
    }

    #[test]
    fn bad_parameters_are_refused() {
        for (spec, want) in [
            (
                "central_cpu=4",
                "scx-central[central_cpu]: 4 is out of range; allowed 0 to 3",
            ),
            (
                "central_cpu=1.5",
                "scx-central[central_cpu]: 1.5 is not a cpu id; allowed 0 to 3",
            ),
            ("slice_ms=0", "scx-central[slice_ms]: 0 is out of range"),
        ] {
            let text = format!(
                "scheduler = \"scx-central[{spec}]\"\nduration_s = 1\nmachine.preset = \"smp-4\"\n[[workload.programs]]\nkind = \"sequential\"\nwork_ms = 1\n"
            );
            let e = match parse(&text, "t.toml", Format::Toml, &[]) {
                Ok(s) => crate::run(&s, RunOptions::default(), None, vec![], None)
                    .err()
                    .map(|e| e.to_string()),
                Err(e) => Some(e.to_string()),
            }
            .expect("refused");
            assert!(e.contains(want), "{spec}: {e}");
        }
    }
}
