//! `scx-simple`: the kernel's `tools/sched_ext/scx_simple.bpf.c` on the
//! DSQ model. `select_cpu` takes the kernel's default choice and, if it
//! found an idle CPU (claimed, so no other wake-up of the same instant gets
//! it), inserts the task straight into that CPU's local DSQ; `enqueue`
//! inserts into one shared user DSQ, FIFO by default or ordered by a
//! weighted vtime with `vtime=true`; `dispatch` moves the head of the
//! shared DSQ to the CPU's local DSQ. Slices are `SCX_SLICE_DFL` (20 ms).
//!
//! The vtime of a task is the engine's `p->scx.dsq_vtime`
//! ([`Ctx::task_vtime`]): a new task starts at the newest vtime seen running
//! (`vtime_now`, the kernel's `simple_enable`); it advances by the slice
//! used × 100 / the task's sched_ext weight (100 at nice 0: the CFS weight ×
//! 100 / 1024, rounded, as the kernel's `sched_weight_to_cgroup`); a task
//! that slept long enough is inserted one slice behind `vtime_now`, so it
//! cannot bank more than one slice of budget, and, as in the kernel, the
//! insert sets its vtime to that value.

use super::scx::{DSQ_LOCAL, SLICE_DFL_NS};
use super::{About, Ctx, EnqFlags, ParamDef, Params, PolicySpec, Scheduler};
use crate::hw::{CpuId, Machine};
use crate::os::TaskId;

/// The shared DSQ's id (`SHARED_DSQ` in scx_simple.bpf.c).
pub const SHARED_DSQ: u64 = 0;

/// Registry entry.
pub fn info() -> About {
    About {
        name: "scx-simple",
        doc: "sched_ext's scx_simple: idle CPU via select_cpu_dfl, else one shared DSQ (global FIFO, or weighted vtime); 20 ms slices",
        params: vec![ParamDef {
            name: "vtime",
            default: "false",
            doc: "order the shared DSQ by weighted vtime instead of FIFO",
        }],
    }
}

/// The scx_simple scheduler.
pub struct ScxSimple {
    vtime: bool,
    name: String,
    vtime_now: u64,
}

impl ScxSimple {
    /// Build from a parsed spec.
    pub fn from_params(ps: &PolicySpec, _m: &Machine) -> Result<ScxSimple, String> {
        let defs = info().params;
        let p = Params::new("scx-simple", &ps.params, &defs)?;
        let vtime = p.bool("vtime")?;
        Ok(ScxSimple {
            vtime,
            name: if vtime {
                "scx-simple[vtime=true]".into()
            } else {
                "scx-simple".into()
            },
            vtime_now: 0,
        })
    }
}

/// A CFS load weight (1024 at nice 0) as a sched_ext weight (100 at nice 0).
pub fn scx_weight(w: u32) -> u64 {
    ((w as u64 * 100 + 512) / 1024).max(1)
}

impl Scheduler for ScxSimple {
    fn name(&self) -> &str {
        &self.name
    }
    fn uses_dsqs(&self) -> bool {
        true
    }
    fn init(&mut self, cx: &mut Ctx) {
        cx.create_dsq(SHARED_DSQ);
    }
    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        t: TaskId,
        prev: Option<CpuId>,
        flags: EnqFlags,
    ) -> CpuId {
        if self.vtime && flags == EnqFlags::New {
            // simple_enable: a task starts with the current vtime.
            cx.set_task_vtime(t, self.vtime_now);
        }
        let prev = prev.unwrap_or(cx.task(t).cpu);
        let (cpu, is_idle) = cx.select_cpu_dfl(t, prev);
        if is_idle {
            cx.dsq_insert(t, DSQ_LOCAL, SLICE_DFL_NS);
        }
        cpu
    }
    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, _cpu: CpuId, _flags: EnqFlags) {
        if !self.vtime {
            cx.dsq_insert(t, SHARED_DSQ, SLICE_DFL_NS);
            return;
        }
        let floor = self.vtime_now.saturating_sub(SLICE_DFL_NS);
        let vt = cx.task_vtime(t).max(floor);
        cx.dsq_insert_vtime(t, SHARED_DSQ, vt, SLICE_DFL_NS);
    }
    fn dequeue(&mut self, _cx: &mut Ctx, _t: TaskId, _cpu: CpuId) {}
    fn pick_next(&mut self, _cx: &mut Ctx, _cpu: CpuId) -> Option<TaskId> {
        None
    }
    fn dispatch(&mut self, cx: &mut Ctx, _cpu: CpuId, _prev: Option<TaskId>) {
        cx.dsq_move_to_local(SHARED_DSQ);
    }
    fn running(&mut self, cx: &mut Ctx, t: TaskId, _cpu: CpuId) {
        if self.vtime {
            self.vtime_now = self.vtime_now.max(cx.task_vtime(t));
        }
    }
    fn stopping(&mut self, cx: &mut Ctx, t: TaskId, _cpu: CpuId, _runnable: bool) {
        if self.vtime {
            let used = SLICE_DFL_NS.saturating_sub(cx.task_slice_ns(t));
            let w = scx_weight(cx.task(t).weight);
            let vt = cx.task_vtime(t);
            cx.set_task_vtime(t, vt + used * 100 / w);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::{parse, Format};
    use crate::sim::RunOptions;

    fn run(scheduler: &str, body: &str) -> crate::metrics::RunResults {
        let text = format!("scheduler = \"{scheduler}\"\n{body}");
        let s = parse(&text, "t.toml", Format::Toml, &[]).unwrap_or_else(|e| panic!("{e}"));
        crate::run(
            &s,
            RunOptions {
                trace: false,
                check: true,
            },
            None,
            vec![],
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    const TWO_CPUS: &str = r#"
duration_s = 10
[machine.migration]
enabled = false
[machine.types.c]
capacity = 1024
[[machine.cpus]]
type = "c"
[[machine.cpus]]
type = "c"
"#;

    #[test]
    fn fifo_three_tasks_on_two_cpus() {
        // Three threads of 100 ms each (300 ms of work split) wake at t=0 on two equal CPUs. Tasks 0 and 1
        // claim CPUs 0 and 1 (select_cpu_dfl: prev, then the lowest idle);
        // task 2 finds none idle and waits in the shared DSQ. Slices are
        // 20 ms, and at each slice end the CPU takes the head of the shared
        // DSQ and the task stopped goes to its tail: 15 slices of work
        // (3 × 100 ms / 20 ms) on 2 CPUs take 8 rounds, so the makespan is
        // 160 ms (the last round has one slice: one CPU idles with nothing
        // waiting), and no CPU ever idles while a task waits. Migration
        // costs are off, so slices are exact.
        let r = run(
            "scx-simple",
            &format!(
                "{TWO_CPUS}[[workload.programs]]\nkind = \"parallel\"\nthreads = 3\nwork_ms = 300\n"
            ),
        );
        let makespan = r.summary.makespan_s.expect("done");
        assert!((makespan - 0.160).abs() < 1e-9, "makespan {makespan}");
        assert!(r.summary.idle_while_runnable_s.abs() < 1e-12);
        let total: f64 = r.tasks.iter().map(|t| t.run_s).sum();
        assert!((total - 0.3).abs() < 1e-9, "run time {total}");
    }

    #[test]
    fn vtime_weights_the_share() {
        // One CPU, two nice-0 tasks (CFS weight 1024 → scx weight 100) and a
        // nice-5 task (335 → 33), always runnable for 2 s. A full slice adds
        // 20 ms × 100 / w to the vtime: 20 ms for a nice-0 task, 60.6 ms for
        // the nice-5 one, and the DSQ runs the lowest vtime, so in steady
        // state each nice-0 task runs 60.6 / 20 = 3.03 slices per slice of
        // the nice-5 task: shares 100/233 and 33/233 of the CPU (0.858 s
        // and 0.283 s of 2 s), within two slices (40 ms: shares move in
        // whole slices, and the first slices go in wake-up order). With
        // two tasks only, the one stopped is never in the DSQ when the
        // next is chosen (the kernel's order: pick, then put_prev), so
        // they would simply alternate.
        let body = r#"
duration_s = 2
stop_when_done = false
[machine.types.c]
capacity = 1024
[[machine.cpus]]
type = "c"
[[workload.programs]]
kind = "sequential"
work_ms = 100000
[[workload.programs]]
kind = "sequential"
work_ms = 100000
[[workload.programs]]
kind = "sequential"
work_ms = 100000
nice = 5
"#;
        let r = run("scx-simple[vtime=true]", body);
        let (a, b, c) = (r.tasks[0].run_s, r.tasks[1].run_s, r.tasks[2].run_s);
        assert!((a + b + c - 2.0).abs() < 1e-9, "{a} + {b} + {c}");
        for x in [a, b] {
            assert!((x - 2.0 * 100.0 / 233.0).abs() < 0.041, "nice 0 got {x}");
        }
        assert!((c - 2.0 * 33.0 / 233.0).abs() < 0.041, "nice 5 got {c}");
    }
}
