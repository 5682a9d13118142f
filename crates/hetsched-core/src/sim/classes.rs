//! The scheduling classes above fair, stacked as Linux stacks them
//! (`pick_next_task`, kernel/sched/core.c): deadline, then rt, then the
//! scenario's scheduler as the fair class. The deadline class is global EDF
//! with CBS over one root domain (`os/dl.rs`); the rt class keeps per-CPU
//! priority arrays (`os/rt.rs`) with push and pull; each CPU has the
//! 6.12+ fair server, a deferred deadline server that gives the fair class
//! its runtime every period when rt or deadline tasks would starve it.
//!
//! The engine calls in here only when the scenario has rt or deadline
//! tasks (`Engine::cls` is `None` otherwise). The fair scheduler sees only
//! fair tasks: an rt or deadline task taking its CPU preempts the fair
//! task through the fair scheduler's `stopping(runnable = true)` and
//! `enqueue(Preempted)`, and `pick_next` is asked only when no rt or
//! deadline task is runnable on the CPU (or the fair server runs).
//! docs/classes.md describes the model and its sources.

use super::queue::EventClass;
use super::Res;
use super::{Engine, Ev};
use crate::error::SimError;
use crate::hw::CpuId;
use crate::os::dl::{DlEntity, EdfQueue, WakeRule};
use crate::os::rt::RtQueues;
use crate::os::{ClassConfig, SchedPolicy, Task, TaskId, TaskState};
use crate::policy::EnqFlags;
use crate::time::SimTime;
use crate::trace::TraceEvent;

/// Class events: the running task's budget or timeslice ends (per CPU).
pub(super) const K_ENFORCE: u8 = 0;
/// A throttled deadline task is replenished (per task).
pub(super) const K_REPLENISH: u8 = 1;
/// The fair server's zero-laxity time: it may run now (per CPU).
pub(super) const K_FS_DEFER: u8 = 2;
/// The fair server's period ends (per CPU).
pub(super) const K_FS_END: u8 = 3;

/// Priority level of a deadline entity (above every rt priority), as
/// cpupri's `CPUPRI_HIGHER` places a CPU running one.
const DL_LEVEL: u8 = 100;

/// One CPU's fair server (`rq->fair_server`).
#[derive(Clone, Debug, Default)]
struct FairServer {
    /// End of the current period (its deadline); `None`: not started.
    period_end: Option<SimTime>,
    /// Runtime left in the period, ns.
    runtime: u64,
    /// Running as a deadline entity (after its zero-laxity time).
    active: bool,
    gen: u32,
}

/// State of the classes above fair.
pub(super) struct Classes {
    cfg: ClassConfig,
    rt: RtQueues,
    dl: Vec<DlEntity>,
    edf: EdfQueue,
    fs: Vec<FairServer>,
    /// Start of the current accounting interval of each CPU's task.
    since: Vec<SimTime>,
    /// Deadline runtime charged per ns on each CPU (capacity and frequency
    /// scaling of `update_curr_dl_se`), for the current interval.
    scale: Vec<f64>,
    enf_gen: Vec<u32>,
    repl_gen: Vec<u32>,
    /// A CPU whose rt or deadline task stopped: pull rt work at its pick.
    pull: Vec<bool>,
    /// An RR task whose timeslice ended: requeue at the tail.
    rr_tail: Vec<bool>,
    /// Since when a task is throttled (deadline) or held off by the fair
    /// server (rt).
    throttled_at: Vec<Option<SimTime>>,
    /// Whether CPU capacities differ (capacity fitness applies).
    asym: bool,
}

impl Classes {
    /// The class state of a run, or `None` when no task is rt or deadline.
    pub(super) fn build(
        cfg: crate::os::ClassConfig,
        tasks: &[Task],
        m: &crate::hw::Machine,
    ) -> Option<Box<Classes>> {
        if !tasks.iter().any(|t| t.sched.policy.above_fair()) {
            return None;
        }
        let n = m.ncpus();
        let nt = tasks.len();
        let cap0 = m.ty(0).capacity;
        Some(Box::new(Classes {
            rt: RtQueues::new(n, nt, cfg.rr_timeslice),
            cfg,
            dl: vec![DlEntity::default(); nt],
            edf: EdfQueue::default(),
            fs: vec![FairServer::default(); n],
            since: vec![SimTime::ZERO; n],
            scale: vec![1.0; n],
            enf_gen: vec![0; n],
            repl_gen: vec![0; nt],
            pull: vec![false; n],
            rr_tail: vec![false; nt],
            throttled_at: vec![None; nt],
            asym: (0..n).any(|c| m.ty(c).capacity != cap0),
        }))
    }
}

impl Engine {
    fn cls(&mut self) -> &mut Classes {
        self.cls.as_deref_mut().expect("class state")
    }

    /// Whether `t` runs in a class above fair (only asked with classes on).
    #[inline]
    pub(super) fn is_class_task(&self, t: TaskId) -> bool {
        self.cls.is_some() && self.tasks[t].sched.policy.above_fair()
    }

    /// Level of what runs on `cpu`: 0 idle or fair, the rt priority, or
    /// [`DL_LEVEL`] for a deadline task or the active fair server.
    fn run_level(&self, cpu: CpuId) -> u8 {
        let cls = self.cls.as_deref().expect("class state");
        match self.hv.current[cpu] {
            None => 0,
            Some(t) => {
                let a = &self.tasks[t].sched;
                match a.policy {
                    SchedPolicy::Fifo | SchedPolicy::Rr => a.rt_prio,
                    SchedPolicy::Deadline => DL_LEVEL,
                    _ if cls.fs[cpu].active => DL_LEVEL,
                    _ => 0,
                }
            }
        }
    }

    /// cpupri's view of `cpu`: what runs there or its highest queued rt
    /// task, whichever is higher.
    fn cpu_level(&self, cpu: CpuId) -> u8 {
        let q = self
            .cls
            .as_deref()
            .and_then(|c| c.rt.highest(cpu))
            .map_or(0, |(p, _)| p);
        self.run_level(cpu).max(q)
    }

    /// The deadline of what runs on `cpu`, if a deadline entity runs there.
    fn run_deadline(&self, cpu: CpuId) -> Option<SimTime> {
        let cls = self.cls.as_deref().expect("class state");
        let t = self.hv.current[cpu]?;
        if self.tasks[t].sched.policy == SchedPolicy::Deadline {
            Some(cls.dl[t].deadline)
        } else if cls.fs[cpu].active {
            cls.fs[cpu].period_end
        } else {
            None
        }
    }

    /// Whether a deadline entity with deadline `d` preempts what runs on
    /// `cpu` (`dl_entity_preempt`, or any lower class).
    fn dl_preempts(&self, cpu: CpuId, d: SimTime) -> bool {
        self.run_deadline(cpu).is_none_or(|r| d < r)
    }

    /// rt capacity fitness (`rt_task_fits_capacity`): on a machine with
    /// CPUs of different capacities an rt task fits only where the capacity
    /// reaches its `uclamp_min`, 1024 by default for rt tasks
    /// (`sysctl_sched_uclamp_util_min_rt_default`).
    fn rt_fits(&self, cpu: CpuId) -> bool {
        !self.cls.as_deref().is_some_and(|c| c.asym) || self.m.ty(cpu).capacity >= 1024
    }

    /// Deadline capacity fitness (`dl_task_fits_capacity`): runtime <=
    /// deadline × capacity / 1024.
    fn dl_fits(&self, t: TaskId, cpu: CpuId) -> bool {
        let a = &self.tasks[t].sched;
        !self.cls.as_deref().is_some_and(|c| c.asym)
            || a.dl_deadline as u128 * self.m.ty(cpu).capacity as u128
                >= a.dl_runtime as u128 * 1024
    }

    fn allowed(&self, t: TaskId, cpu: CpuId) -> bool {
        self.hv.online[cpu] && self.tasks[t].affinity.contains(cpu)
    }

    /// The task's previous CPU if it may still run there, else its first
    /// allowed CPU.
    fn prev_cpu(&self, t: TaskId) -> CpuId {
        match self.tasks[t].last_ran {
            Some(c) if self.allowed(t, c) => c,
            _ => (0..self.m.ncpus())
                .find(|&c| self.allowed(t, c))
                .unwrap_or(0),
        }
    }

    /// `find_lowest_rq`: an allowed CPU, other than `except`, whose level is
    /// below `prio`: the lowest level among fitting CPUs (any CPU if none
    /// fits), then the task's previous CPU, then the lowest id.
    fn rt_find_lowest(&self, t: TaskId, prio: u8, except: Option<CpuId>) -> Option<CpuId> {
        let prev = self.tasks[t].last_ran;
        (0..self.m.ncpus())
            .filter(|&c| Some(c) != except && self.picking != Some(c) && self.allowed(t, c))
            .filter(|&c| self.cpu_level(c) < prio)
            .min_by_key(|&c| (!self.rt_fits(c), self.cpu_level(c), Some(c) != prev, c))
    }

    /// `select_task_rq_rt`: the previous CPU, unless what runs there cannot
    /// be preempted by `t` (an rt task of equal or higher priority, or a
    /// deadline task) or it does not fit: then the lowest CPU if `t` would
    /// run there.
    fn rt_select(&self, t: TaskId) -> CpuId {
        let prio = self.tasks[t].sched.rt_prio;
        if self.tasks[t].last_ran.is_none() {
            // A new task: placed as a fork is, on the lowest CPU.
            if let Some(c) = self.rt_find_lowest(t, u8::MAX, None) {
                return c;
            }
        }
        let prev = self.prev_cpu(t);
        let test = self.run_level(prev) >= prio
            && self.hv.current[prev].is_some_and(|c| self.is_class_task(c));
        if test || !self.rt_fits(prev) {
            if let Some(target) = self.rt_find_lowest(t, prio, None) {
                if (test || self.rt_fits(target)) && prio > self.cpu_level(target) {
                    return target;
                }
            }
        }
        prev
    }

    /// `find_later_rq`: a CPU running no deadline entity (fitting first,
    /// then the previous CPU, then the lowest id), else the one running the
    /// latest deadline if it is later than `t`'s.
    fn dl_find_later(&self, t: TaskId) -> Option<CpuId> {
        let prev = self.tasks[t].last_ran;
        let cands = (0..self.m.ncpus()).filter(|&c| self.allowed(t, c));
        let free = cands
            .clone()
            .filter(|&c| self.run_deadline(c).is_none())
            .min_by_key(|&c| {
                let fits = self.dl_fits(t, c);
                let cap = if fits {
                    0
                } else {
                    u32::MAX - self.m.ty(c).capacity
                };
                (!fits, cap, Some(c) != prev, c)
            });
        if free.is_some() {
            return free;
        }
        let d = self.cls.as_deref().expect("class state").dl[t].deadline;
        cands
            .filter_map(|c| self.run_deadline(c).map(|r| (r, c)))
            .filter(|&(r, _)| d < r)
            .max_by_key(|&(r, c)| (r, std::cmp::Reverse(c)))
            .map(|(_, c)| c)
    }

    /// `select_task_rq_dl`: the previous CPU unless `t` cannot preempt the
    /// deadline entity running there or does not fit it.
    fn dl_select(&self, t: TaskId) -> CpuId {
        let prev = self.prev_cpu(t);
        let d = self.cls.as_deref().expect("class state").dl[t].deadline;
        if self.tasks[t].last_ran.is_none() || !self.dl_preempts(prev, d) || !self.dl_fits(t, prev)
        {
            if let Some(c) = self.dl_find_later(t) {
                if self.dl_preempts(c, d) {
                    return c;
                }
            }
        }
        prev
    }

    /// Reschedule `cpu` unless it is the CPU picking right now.
    fn class_kick(&mut self, cpu: CpuId) {
        if self.picking != Some(cpu) {
            self.flag_resched(cpu);
        }
    }

    // ------------------------------------------------------------ hooks

    /// `t` (rt or deadline), just made runnable, is placed and queued.
    pub(super) fn class_wake(&mut self, t: TaskId, flags: EnqFlags) -> Res<()> {
        let a = self.tasks[t].sched;
        let now = self.now;
        let cpu = if a.policy.is_rt() {
            let cpu = self.rt_select(t);
            self.tasks[t].cpu = cpu;
            self.cls().rt.enqueue(cpu, t, a.rt_prio, false);
            if self.run_level(cpu) < a.rt_prio {
                self.class_kick(cpu);
            } else {
                self.rt_push(cpu);
            }
            cpu
        } else {
            let cls = self.cls();
            let e = &mut cls.dl[t];
            if flags == EnqFlags::New {
                *e = DlEntity::new_at(&a, now);
            } else if e.throttled {
                cls.throttled_at[t] = Some(now);
            } else {
                let rule = e.wake_rule(&a, now);
                if rule == WakeRule::WaitPeriod {
                    let at = e.next_period(&a);
                    self.dl_throttle(t, at);
                } else {
                    e.apply_wake(rule, &a, now);
                }
            }
            let cpu = self.dl_select(t);
            self.tasks[t].cpu = cpu;
            let e = self.cls().dl[t];
            if !e.throttled {
                self.cls().edf.insert(e.deadline, t);
                if self.dl_preempts(cpu, e.deadline) {
                    self.class_kick(cpu);
                } else {
                    self.dl_push();
                }
            }
            cpu
        };
        let t_ns = now.0;
        self.emit(3, t as u64, cpu as u64, 0, || TraceEvent::Wake {
            t_ns,
            task: t,
            cpu,
        });
        Ok(())
    }

    /// Throttle deadline task `t` until `at` (its replenishment).
    fn dl_throttle(&mut self, t: TaskId, at: SimTime) {
        let now = self.now;
        let runnable = self.tasks[t].state == TaskState::Runnable;
        let cls = self.cls();
        cls.dl[t].throttled = true;
        // Throttled time counts while the task is runnable: one that blocked
        // or exited with its budget spent starts counting if it wakes first.
        if runnable {
            cls.throttled_at[t] = Some(now);
        }
        cls.repl_gen[t] = cls.repl_gen[t].wrapping_add(1);
        let gen = cls.repl_gen[t];
        self.q.push(
            at.max(now),
            EventClass::Timer,
            Ev::Class {
                kind: K_REPLENISH,
                id: t as u32,
                gen,
            },
        );
    }

    /// Count a deadline miss of `t` if its deadline passed before it got
    /// its runtime (`exhausted`: the budget ran out just now).
    fn dl_check_miss(&mut self, t: TaskId, exhausted: bool) {
        let now = self.now;
        let e = &mut self.cls.as_deref_mut().expect("class state").dl[t];
        if now > e.deadline && (e.runtime > 0 || exhausted) && e.missed != Some(e.deadline) {
            e.missed = Some(e.deadline);
            self.tasks[t].c.dl_misses += 1;
        }
    }

    /// Charge the time since the last accounting on `cpu` to what runs
    /// there: an RR timeslice, a deadline budget, the fair server.
    fn class_account(&mut self, cpu: CpuId) {
        self.class_charge(cpu, self.hv.current[cpu]);
    }

    /// Charge the time since the last accounting on `cpu` to `cur`, the
    /// task that ran there (given explicitly when it has just stopped: the
    /// engine has already cleared the CPU's current task).
    fn class_charge(&mut self, cpu: CpuId, cur: Option<TaskId>) {
        let now = self.now;
        let cls = self.cls.as_deref_mut().expect("class state");
        let dt = now.since(cls.since[cpu]).0;
        cls.since[cpu] = now;
        if dt == 0 {
            return;
        }
        let Some(t) = cur else { return };
        match self.tasks[t].sched.policy {
            SchedPolicy::Rr => cls.rt.slice_left[t] = cls.rt.slice_left[t].saturating_sub(dt),
            SchedPolicy::Fifo => {}
            SchedPolicy::Deadline => {
                cls.dl[t].runtime -= (dt as f64 * cls.scale[cpu]).round() as i64;
            }
            _ => {
                let fs = &mut cls.fs[cpu];
                if fs.period_end.is_some() {
                    fs.runtime = fs.runtime.saturating_sub(dt);
                }
            }
        }
    }

    /// Arm `cpu`'s enforcement event for what runs there now.
    fn class_arm(&mut self, cpu: CpuId) {
        let now = self.now;
        let cls = self.cls.as_deref_mut().expect("class state");
        cls.enf_gen[cpu] = cls.enf_gen[cpu].wrapping_add(1);
        let gen = cls.enf_gen[cpu];
        let Some(t) = self.hv.current[cpu] else {
            return;
        };
        let left = match self.tasks[t].sched.policy {
            SchedPolicy::Rr => Some(cls.rt.slice_left[t]),
            SchedPolicy::Fifo => None,
            SchedPolicy::Deadline => {
                let r = cls.dl[t].runtime.max(0) as f64 / cls.scale[cpu];
                Some(super::ceil_u64(r))
            }
            _ if cls.fs[cpu].active => Some(cls.fs[cpu].runtime),
            _ => None,
        };
        if let Some(ns) = left {
            self.q.push(
                now + SimTime(ns),
                EventClass::Timer,
                Ev::Class {
                    kind: K_ENFORCE,
                    id: cpu as u32,
                    gen,
                },
            );
        }
    }

    /// Start a fair-server period on `cpu` now.
    fn fs_open(&mut self, cpu: CpuId) {
        let now = self.now;
        let cls = self.cls();
        let (r, p) = (cls.cfg.fs_runtime, cls.cfg.fs_period);
        let fs = &mut cls.fs[cpu];
        fs.gen = fs.gen.wrapping_add(1);
        fs.period_end = Some(now + SimTime(p));
        fs.runtime = r;
        fs.active = false;
        let gen = fs.gen;
        for (kind, at) in [
            (K_FS_DEFER, now + SimTime(p - r)),
            (K_FS_END, now + SimTime(p)),
        ] {
            self.q.push(
                at,
                EventClass::Timer,
                Ev::Class {
                    kind,
                    id: cpu as u32,
                    gen,
                },
            );
        }
    }

    /// `t` starts running on `cpu`. Returns whether it is an rt or deadline
    /// task (the fair scheduler's `running` is then not called).
    pub(super) fn class_started(&mut self, cpu: CpuId, t: TaskId) -> bool {
        let now = self.now;
        let a = self.tasks[t].sched;
        let mhz = self.cpu_mhz(cpu);
        let scale = if a.policy == SchedPolicy::Deadline {
            let ty = self.m.ty(cpu);
            ty.capacity as f64 / 1024.0 * mhz as f64 / ty.fmax() as f64
        } else {
            1.0
        };
        let cls = self.cls();
        cls.since[cpu] = now;
        cls.scale[cpu] = scale;
        if !a.policy.above_fair() {
            self.class_arm(cpu);
            return false;
        }
        if let Some(at) = cls.throttled_at[t].take() {
            self.tasks[t].c.throttled_ns += now.since(at).0;
        }
        let cls = self.cls();
        if cls.cfg.fair_server && cls.fs[cpu].period_end.is_none() {
            self.fs_open(cpu);
        }
        if a.policy == SchedPolicy::Deadline {
            self.dl_check_miss(t, false);
        }
        self.class_arm(cpu);
        if a.policy.is_rt() && self.cls().rt.highest(cpu).is_some() {
            self.rt_push(cpu);
        }
        true
    }

    /// `t` stops running on `cpu`. Returns whether it is an rt or deadline
    /// task (the fair scheduler's `stopping` is then not called).
    pub(super) fn class_stopped(&mut self, cpu: CpuId, t: TaskId) -> bool {
        self.class_charge(cpu, Some(t));
        let a = self.tasks[t].sched;
        let cls = self.cls();
        cls.enf_gen[cpu] = cls.enf_gen[cpu].wrapping_add(1);
        if !a.policy.above_fair() {
            return false;
        }
        cls.pull[cpu] = true;
        if a.policy == SchedPolicy::Deadline {
            let e = cls.dl[t];
            let exhausted = e.runtime <= 0;
            self.dl_check_miss(t, exhausted);
            if exhausted {
                let at = e.next_period(&a);
                if at > self.now {
                    self.dl_throttle(t, at);
                } else {
                    // The replenishment time already passed: replenished now.
                    let now = self.now;
                    self.cls().dl[t].replenish(&a, now);
                }
            }
        }
        true
    }

    /// A preempted task `t`, just stopped on `cpu`, goes back to its class's
    /// queue. Returns false for a fair task (the fair scheduler requeues it).
    pub(super) fn class_requeue(&mut self, t: TaskId, cpu: CpuId) -> bool {
        let a = self.tasks[t].sched;
        if !a.policy.above_fair() {
            return false;
        }
        let now = self.now;
        if a.policy.is_rt() {
            let dst = if self.allowed(t, cpu) {
                cpu
            } else {
                self.rt_select(t)
            };
            self.tasks[t].cpu = dst;
            let cls = self.cls();
            let head = !std::mem::take(&mut cls.rr_tail[t]);
            if cls.fs[cpu].active {
                cls.throttled_at[t] = Some(now);
            }
            cls.rt.enqueue(dst, t, a.rt_prio, head);
            if dst != cpu {
                self.class_kick(dst);
            }
        } else {
            let e = self.cls().dl[t];
            if !e.throttled {
                self.cls().edf.insert(e.deadline, t);
            }
        }
        true
    }

    /// The next task of `cpu` over the class stack: the earliest deadline
    /// (the fair server competing as a deadline entity), then the highest rt
    /// priority (pulling first when the CPU's priority dropped), then the
    /// fair scheduler.
    pub(super) fn class_pick(&mut self, cpu: CpuId) -> Res<Option<TaskId>> {
        loop {
            let cls = self.cls();
            let server = cls.fs[cpu]
                .active
                .then_some(cls.fs[cpu].period_end)
                .flatten();
            if let Some((d, t)) = cls.edf.first() {
                if server.is_none_or(|s| d < s) {
                    cls.edf.remove(d, t);
                    self.tasks[t].cpu = cpu;
                    self.dl_push();
                    return Ok(Some(t));
                }
            }
            if server.is_none() {
                break;
            }
            // The fair server runs the fair class's next task; with none,
            // it stops.
            self.src = super::Src::Sched;
            let next = self.with_sched(|s, cx| s.pick_next(cx, cpu));
            self.apply()?;
            if next.is_some() {
                return Ok(next);
            }
            self.cls().fs[cpu].active = false;
        }
        if std::mem::take(&mut self.cls().pull[cpu]) {
            self.rt_pull(cpu);
        }
        if let Some((_, t)) = self.cls().rt.highest(cpu) {
            self.cls().rt.dequeue(t);
            return Ok(Some(t));
        }
        self.fair_pick(cpu)
    }

    /// `push_rt_tasks`: move `cpu`'s highest queued rt task, while it cannot
    /// run there, to the lowest CPU below its priority.
    fn rt_push(&mut self, cpu: CpuId) {
        for _ in 0..self.m.ncpus() {
            let Some((p, t)) = self.cls().rt.highest(cpu) else {
                return;
            };
            if self.run_level(cpu) < p && self.picking != Some(cpu) {
                return; // it runs here next
            }
            let Some(dst) = self.rt_find_lowest(t, p, Some(cpu)) else {
                return;
            };
            let cls = self.cls();
            cls.rt.dequeue(t);
            cls.rt.enqueue(dst, t, p, false);
            self.tasks[t].cpu = dst;
            self.class_kick(dst);
        }
    }

    /// `pull_rt_task`: take the highest-priority rt task queued behind a
    /// running task of at least its priority on another CPU, if it is above
    /// everything queued on `cpu` and may run there.
    fn rt_pull(&mut self, cpu: CpuId) {
        let cls = self.cls.as_deref().expect("class state");
        let local = cls.rt.highest(cpu).map_or(0, |(p, _)| p);
        let mut best: Option<(u8, TaskId)> = None;
        for src in (0..self.m.ncpus()).filter(|&s| s != cpu) {
            let run = self.run_level(src);
            let cand = cls
                .rt
                .queued(src)
                .take_while(|&(p, _)| p > local)
                .find(|&(_, t)| self.allowed(t, cpu));
            if let Some((p, t)) = cand {
                if run >= p && best.is_none_or(|(bp, _)| p > bp) {
                    best = Some((p, t));
                }
            }
        }
        if let Some((p, t)) = best {
            let cls = self.cls();
            cls.rt.dequeue(t);
            cls.rt.enqueue(cpu, t, p, false);
            self.tasks[t].cpu = cpu;
        }
    }

    /// `push_dl_tasks`: queued deadline tasks that no CPU is about to pick
    /// preempt the CPUs running lower classes or later deadlines.
    fn dl_push(&mut self) {
        let n = self.m.ncpus();
        let mut pending = (0..n)
            .filter(|&c| self.flags.need_resched[c] || self.picking == Some(c))
            .count();
        let queued: Vec<(SimTime, TaskId)> = self
            .cls
            .as_deref()
            .expect("class state")
            .edf
            .iter()
            .take(n)
            .collect();
        let mut claimed = vec![false; n];
        for (d, t) in queued {
            if pending > 0 {
                pending -= 1;
                continue;
            }
            let target = (0..n)
                .filter(|&c| {
                    !claimed[c]
                        && !self.flags.need_resched[c]
                        && self.picking != Some(c)
                        && self.allowed(t, c)
                        && self.dl_preempts(c, d)
                })
                .min_by_key(|&c| {
                    let r = self.run_deadline(c);
                    (r.is_some(), std::cmp::Reverse(r), c)
                });
            let Some(c) = target else { return };
            claimed[c] = true;
            self.flag_resched(c);
        }
    }

    /// A class event (see the `K_*` kinds). Returns false if stale.
    pub(super) fn class_event(&mut self, kind: u8, id: u32, gen: u32) -> Res<bool> {
        let now = self.now;
        match kind {
            K_ENFORCE => {
                let cpu = id as usize;
                if self.cls().enf_gen[cpu] != gen {
                    return Ok(false);
                }
                self.class_account(cpu);
                let Some(t) = self.hv.current[cpu] else {
                    return Ok(false);
                };
                let a = self.tasks[t].sched;
                let cls = self.cls();
                match a.policy {
                    SchedPolicy::Rr => {
                        if cls.rt.slice_left[t] == 0 {
                            // task_tick_rt: a fresh timeslice; to the tail if
                            // others of its priority wait.
                            cls.rt.slice_left[t] = cls.cfg.rr_timeslice;
                            if cls.rt.has_prio(cpu, a.rt_prio) {
                                cls.rr_tail[t] = true;
                                self.flag_resched(cpu);
                                return Ok(true);
                            }
                        }
                    }
                    SchedPolicy::Deadline => {
                        if cls.dl[t].runtime <= 0 {
                            // Out of budget: stopped, then throttled.
                            self.flag_resched(cpu);
                            return Ok(true);
                        }
                    }
                    _ => {
                        if cls.fs[cpu].active && cls.fs[cpu].runtime == 0 {
                            cls.fs[cpu].active = false;
                            self.flag_resched(cpu);
                            return Ok(true);
                        }
                    }
                }
                self.class_arm(cpu);
            }
            K_REPLENISH => {
                let t = id as usize;
                if self.cls().repl_gen[t] != gen || !self.cls().dl[t].throttled {
                    return Ok(false);
                }
                let a = self.tasks[t].sched;
                let cls = self.cls();
                cls.dl[t].replenish(&a, now);
                if let Some(at) = cls.throttled_at[t].take() {
                    self.tasks[t].c.throttled_ns += now.since(at).0;
                }
                if self.tasks[t].state == TaskState::Runnable {
                    let d = self.cls().dl[t].deadline;
                    self.cls().edf.insert(d, t);
                    let cpu = self.dl_select(t);
                    self.tasks[t].cpu = cpu;
                    if self.dl_preempts(cpu, d) {
                        self.class_kick(cpu);
                    } else {
                        self.dl_push();
                    }
                }
            }
            K_FS_DEFER | K_FS_END => {
                let cpu = id as usize;
                if self.cls().fs[cpu].gen != gen {
                    return Ok(false);
                }
                self.class_account(cpu);
                let cur = self.hv.current[cpu];
                let class_cur = cur.is_some_and(|t| self.tasks[t].sched.policy.above_fair());
                if kind == K_FS_DEFER {
                    let fs = &mut self.cls().fs[cpu];
                    if fs.runtime == 0 || cur.is_none() {
                        return Ok(true);
                    }
                    // Zero-laxity time: the server runs as a deadline entity.
                    fs.active = true;
                    if class_cur {
                        self.flag_resched(cpu);
                    } else {
                        self.class_arm(cpu);
                    }
                } else {
                    let fs = &mut self.cls().fs[cpu];
                    let was_active = std::mem::take(&mut fs.active);
                    fs.period_end = None;
                    if class_cur || was_active {
                        self.fs_open(cpu);
                    }
                    if was_active {
                        self.flag_resched(cpu);
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Engine {
    /// The error for a scheduler request about an rt or deadline task,
    /// which the fair scheduler does not schedule.
    pub(super) fn class_refusal(&self, t: TaskId, what: &str) -> Box<SimError> {
        self.policy_err(format!(
            "{what}: task {t} is SCHED_{}, which runs in a class above the fair scheduler; \
             the scheduler may act only on fair tasks",
            self.tasks[t].sched.policy.name().to_uppercase()
        ))
    }

    /// `set_affinity` on an rt task (an agent's `sched_setaffinity`): a
    /// queued task is placed again; a deadline task is refused as Linux
    /// refuses it (EPERM: its bandwidth is admitted over the root domain).
    pub(super) fn class_set_affinity(&mut self, t: TaskId, cpus: &[CpuId], what: &str) -> Res<()> {
        let n = self.m.ncpus();
        if self.tasks[t].sched.policy == SchedPolicy::Deadline {
            return Err(self.policy_err(format!(
                "{what}: task {t} is SCHED_DEADLINE, whose affinity cannot be restricted \
                 (Linux refuses it with EPERM)"
            )));
        }
        if let Some(&c) = cpus.iter().find(|&&c| c >= n) {
            return Err(self.policy_err(format!(
                "{what}: cpu {c} does not exist (machine has {n} cpus)"
            )));
        }
        self.iw_affinity(t, true);
        self.tasks[t].affinity = crate::os::CpuSet::from_cpus(cpus, n);
        self.iw_affinity(t, false);
        let cur = self.tasks[t].cpu;
        if self.tasks[t].affinity.contains(cur) {
            return Ok(());
        }
        let queued = self.cls().rt.is_queued(t);
        match self.tasks[t].state {
            TaskState::Running => self.flag_resched(cur),
            TaskState::Runnable if queued => {
                self.cls().rt.dequeue(t);
                let dst = self.rt_select(t);
                self.tasks[t].cpu = dst;
                let p = self.tasks[t].sched.rt_prio;
                self.cls().rt.enqueue(dst, t, p, false);
                if self.run_level(dst) < p {
                    self.class_kick(dst);
                }
            }
            _ => {}
        }
        Ok(())
    }
}
