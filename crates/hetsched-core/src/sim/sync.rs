//! rt-app's synchronisation and phase operations: the workload-wide objects
//! (mutexes, condition variables, counting semaphores,
//! shared barriers, periodic timers), their blocking and waking, wall-time
//! busy phases, yield, affinity changes and forks.
//!
//! Semantics (rt-app's `src/rt-app.c`, `run_event`, read for reference):
//! * an operation acts when its thread runs: a thread that reaches one while
//!   off a CPU (new, or just woken) first waits for a CPU, as the real call
//!   is made by the running thread;
//! * a thread that waits on an object is `Blocked` (counted as sleep); it is
//!   woken by running its program forward (`step`), so its wake-up latency
//!   is measured from that instant like any other wake-up;
//! * a mutex goes to its longest waiter on unlock (FIFO hand-off); locking a
//!   mutex one holds, or unlocking one one does not hold, is an error (rt-app
//!   leaves both undefined);
//! * `wait` queues the thread on the condition variable, then releases the
//!   mutex (atomically, as `pthread_cond_wait`: a signal sent by the next
//!   owner is not lost); a signalled waiter takes the mutex again before it
//!   goes on, queueing behind other lockers if it is held; `signal` and
//!   `broad` with nobody waiting are lost;
//! * `suspend`/`resume` are rt-app's, built of the above by the scenario
//!   layer: `lock x; wait x (mutex x); unlock x` and `lock x; broad x; unlock
//!   x` (rt-app names the condition variable and the mutex after the suspend
//!   point, so they are those of `wait`/`signal`/`lock` with that name): a
//!   resume wakes every thread suspended at that instant and is lost if none
//!   is;
//! * a semaphore keeps posts nobody pends for, so no wake-up is lost;
//! * a shared barrier opens when every live thread whose operations name it
//!   has arrived (threads that exited no longer count; threads of a forked
//!   program count while an instance of it runs);
//! * a timer ticks at t0 + k·p, t0 the first arrival of any thread at it;
//!   each thread waits for the tick after the last one it consumed (its
//!   first arrival: the first tick after now), and goes on at once when that
//!   tick is already past (rt-app's absolute timer catches up);
//! * `run_for` is busy until that much wall time has passed since it began,
//!   running or preempted (rt-app `runtime`);
//! * `yield` preempts the running thread and lets the scheduler pick again
//!   (it may pick the same thread);
//! * `cpus` sets the thread's affinity (a new instance starts with the
//!   program's own);
//! * `fork` starts the next instance of a program now if it is idle, else
//!   when its running instance ends (instances of one program never
//!   overlap).
//!
//! A deadlock (no thread runnable, running or sleeping on a timer, and no
//! program start to come) ends the run with an error naming every blocked
//! thread and what it waits for.

use super::queue::EventClass;
use super::Res;
use super::{Engine, Ev};
use crate::error::{at, SimError};
use crate::os::{CpuSet, Task, TaskId, TaskState};
use crate::time::SimTime;
use crate::workload::{Op, Program};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Reference work given to a `run_for` phase: far more than any run does,
/// so that only its wall-time end finishes it (at the end the unused part
/// is taken back from the work assigned).
const RUN_FOR_WORK: f64 = 1e15;

/// What a blocked thread waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    Mutex(usize),
    Cond(usize, usize),
    Sem(usize),
    Barrier(usize),
}

#[derive(Clone, Debug, Default)]
struct Mutex {
    owner: Option<TaskId>,
    waiters: VecDeque<TaskId>,
}

#[derive(Clone, Debug, Default)]
struct SharedBarrier {
    /// Threads whose operations name it.
    members: Vec<TaskId>,
    waiting: Vec<TaskId>,
    /// Members that count now (live or still to start), when known: it
    /// changes only as threads exit or programs start or are forked.
    count: Option<usize>,
}

#[derive(Clone, Debug, Default)]
struct Timer {
    t0: Option<SimTime>,
}

/// Fork bookkeeping of a program.
#[derive(Clone, Debug, Default)]
struct ProgSync {
    /// Counted in `programs_done` (nothing left to run, nothing queued).
    done: bool,
    /// Has started at least one instance.
    started_once: bool,
    /// A start event is queued.
    start_queued: bool,
    /// Forks waiting for the running instance to end.
    pending: u32,
}

/// One namespace of objects: names and their dense ids.
#[derive(Clone, Debug, Default)]
struct Names {
    ids: BTreeMap<Arc<str>, usize>,
    names: Vec<Arc<str>>,
}

impl Names {
    fn intern(&mut self, n: &Arc<str>) -> usize {
        if let Some(&i) = self.ids.get(n) {
            return i;
        }
        self.ids.insert(n.clone(), self.names.len());
        self.names.push(n.clone());
        self.names.len() - 1
    }
    fn id(&self, n: &str) -> usize {
        self.ids[n]
    }
}

/// The synchronisation state of a run.
#[derive(Clone, Debug, Default)]
pub(crate) struct SyncState {
    mutex_n: Names,
    cond_n: Names,
    sem_n: Names,
    bar_n: Names,
    timer_n: Names,
    mutexes: Vec<Mutex>,
    /// Waiters of each condition variable with the mutex they reacquire.
    conds: Vec<VecDeque<(TaskId, usize)>>,
    sems: Vec<(u64, VecDeque<TaskId>)>,
    barriers: Vec<SharedBarrier>,
    timers: Vec<Timer>,
    /// Per thread: the shared barriers it is a member of.
    member_of: Vec<Vec<usize>>,
    /// (thread, timer) → the index of the last tick it consumed.
    tick: BTreeMap<(TaskId, usize), u64>,
    /// Per thread: what it waits for while blocked here.
    waiting: Vec<Option<Wait>>,
    /// Threads with a `waiting` entry.
    nwaiting: usize,
    /// Per thread: in a `run_for` phase, and the generation of its end.
    run_for: Vec<bool>,
    run_gen: Vec<u32>,
    /// Per thread: its affinity before its first `cpus` phase.
    base_affinity: Vec<Option<CpuSet>>,
    /// Per program: fork state.
    prog: Vec<ProgSync>,
    /// Program index of each name (the first of that name).
    prog_by_name: BTreeMap<String, usize>,
    /// Where the last search for an active thread found one (the search
    /// starts there; its result does not depend on it).
    scan_from: usize,
}

impl SyncState {
    /// The objects that the threads' operations name.
    pub(crate) fn new(tasks: &[Task], progs: &[Program]) -> SyncState {
        let mut s = SyncState {
            member_of: vec![Vec::new(); tasks.len()],
            waiting: vec![None; tasks.len()],
            run_for: vec![false; tasks.len()],
            run_gen: vec![0; tasks.len()],
            base_affinity: vec![None; tasks.len()],
            prog: vec![ProgSync::default(); progs.len()],
            ..SyncState::default()
        };
        for (i, p) in progs.iter().enumerate() {
            s.prog_by_name.entry(p.name.clone()).or_insert(i);
        }
        for (t, task) in tasks.iter().enumerate() {
            for op in task.ops.iter() {
                match op {
                    Op::SharedBarrier { name } => {
                        let b = s.bar_n.intern(name);
                        if s.barriers.len() <= b {
                            s.barriers.push(SharedBarrier::default());
                        }
                        if !s.member_of[t].contains(&b) {
                            s.member_of[t].push(b);
                            s.barriers[b].members.push(t);
                        }
                    }
                    Op::Lock { mutex } | Op::Unlock { mutex } => {
                        s.mutex_n.intern(mutex);
                    }
                    Op::Wait { cond, mutex } | Op::SyncWait { cond, mutex } => {
                        s.cond_n.intern(cond);
                        s.mutex_n.intern(mutex);
                    }
                    Op::Signal { cond } | Op::Broad { cond } => {
                        s.cond_n.intern(cond);
                    }
                    Op::Post { sem } | Op::Pend { sem } => {
                        s.sem_n.intern(sem);
                    }
                    Op::Timer { name, .. } => {
                        s.timer_n.intern(name);
                    }
                    _ => {}
                }
            }
        }
        s.mutexes = vec![Mutex::default(); s.mutex_n.names.len()];
        s.conds = vec![VecDeque::new(); s.cond_n.names.len()];
        s.sems = vec![(0, VecDeque::new()); s.sem_n.names.len()];
        s.timers = vec![Timer::default(); s.timer_n.names.len()];
        s
    }
}

impl Engine {
    /// `program[thread]`, for messages.
    fn sync_who(&self, t: TaskId) -> String {
        let task = &self.tasks[t];
        format!("{}[{}]", self.progs[task.program].name, task.thread)
    }

    /// Run one of the operations of this module for `t` (its program
    /// counter already past it). Returns whether `t` stopped (blocked,
    /// sleeping or needing a CPU); otherwise its program goes on.
    pub(super) fn sync_op(&mut self, t: TaskId, op: Op) -> Res<bool> {
        match op {
            Op::RunFor { ns } => {
                let p = self.tasks[t].program;
                let ns = super::round_u64(self.jitter(p, ns as f64));
                if ns == 0 {
                    return Ok(false);
                }
                self.begin_compute(t, RUN_FOR_WORK, 0);
                self.sync.run_for[t] = true;
                let g = self.sync.run_gen[t].wrapping_add(1);
                self.sync.run_gen[t] = g;
                self.q.push(
                    self.now + SimTime(ns),
                    EventClass::Completion,
                    Ev::RunEnd {
                        task: t as u32,
                        gen: g,
                    },
                );
                self.need_cpu(t)?;
                Ok(true)
            }
            Op::SharedBarrier { name } => {
                let b = self.sync.bar_n.id(&name);
                self.sync.barriers[b].waiting.push(t);
                if self.barrier_open(b) {
                    self.release_barrier(b, Some(t))?;
                    return Ok(false);
                }
                self.sync_block(t, Wait::Barrier(b), "shared_barrier")
            }
            Op::Lock { mutex } => {
                let m = self.sync.mutex_n.id(&mutex);
                match self.sync.mutexes[m].owner {
                    None => {
                        self.sync.mutexes[m].owner = Some(t);
                        Ok(false)
                    }
                    Some(o) if o == t => Err(self.sync_misuse(
                        t,
                        format!("locks mutex \"{mutex}\", which it already holds (mutexes are not recursive)"),
                    )),
                    Some(_) => {
                        self.sync.mutexes[m].waiters.push_back(t);
                        self.sync_block(t, Wait::Mutex(m), "lock")
                    }
                }
            }
            Op::Unlock { mutex } => {
                let m = self.sync.mutex_n.id(&mutex);
                self.check_holds(t, m, "unlocks")?;
                self.release_mutex(m)?;
                Ok(false)
            }
            Op::Wait { cond, mutex } => self.cond_wait(t, &cond, &mutex),
            Op::SyncWait { cond, mutex } => {
                let c = self.sync.cond_n.id(&cond);
                self.cond_signal(c, false)?;
                self.cond_wait(t, &cond, &mutex)
            }
            Op::Signal { cond } => {
                let c = self.sync.cond_n.id(&cond);
                self.cond_signal(c, false)?;
                Ok(false)
            }
            Op::Broad { cond } => {
                let c = self.sync.cond_n.id(&cond);
                self.cond_signal(c, true)?;
                Ok(false)
            }
            Op::Post { sem } => {
                let s = self.sync.sem_n.id(&sem);
                match self.sync.sems[s].1.pop_front() {
                    Some(w) => self.sync_wake(w)?,
                    None => self.sync.sems[s].0 += 1,
                }
                Ok(false)
            }
            Op::Pend { sem } => {
                let s = self.sync.sem_n.id(&sem);
                if self.sync.sems[s].0 > 0 {
                    self.sync.sems[s].0 -= 1;
                    return Ok(false);
                }
                self.sync.sems[s].1.push_back(t);
                self.sync_block(t, Wait::Sem(s), "pend")
            }
            Op::Timer { name, period_ns } => {
                let k = self.sync.timer_n.id(&name);
                let now = self.now;
                let t0 = *self.sync.timers[k].t0.get_or_insert(now);
                let last = self
                    .sync
                    .tick
                    .get(&(t, k))
                    .copied()
                    .unwrap_or_else(|| now.since(t0).0 / period_ns);
                let next = last + 1;
                self.sync.tick.insert((t, k), next);
                let at = t0 + SimTime(next.saturating_mul(period_ns));
                if now < at {
                    self.sleep_for(t, at.since(now).0, "timer")?;
                    return Ok(true);
                }
                Ok(false)
            }
            Op::Yield => {
                let (state, cpu) = (self.tasks[t].state, self.tasks[t].cpu);
                if state == TaskState::Running && !self.vm.is_guest(t) {
                    self.flag_resched(cpu);
                }
                Ok(false)
            }
            Op::Cpus { cpus } => {
                let n = self.m.ncpus();
                let set = CpuSet::from_cpus(&cpus, n);
                if self.sync.base_affinity[t].is_none() {
                    self.sync.base_affinity[t] = Some(self.tasks[t].affinity.clone());
                }
                self.set_thread_affinity(t, set);
                Ok(false)
            }
            Op::Fork { program } => {
                let p = self.sync.prog_by_name[&*program];
                self.fork_program(p);
                Ok(false)
            }
            Op::Compute { .. } | Op::Sleep { .. } | Op::Barrier | Op::Pull | Op::WaitPeriod => {
                unreachable!("handled by step")
            }
        }
    }

    /// Set `t`'s affinity; a running thread now outside it is moved at the
    /// next reschedule.
    fn set_thread_affinity(&mut self, t: TaskId, set: CpuSet) {
        self.iw_affinity(t, true);
        self.tasks[t].affinity = set;
        self.iw_affinity(t, false);
        let cur = self.tasks[t].cpu;
        if self.tasks[t].state == TaskState::Running
            && !self.vm.is_guest(t)
            && !self.tasks[t].affinity.contains(cur)
        {
            self.flag_resched(cur);
        }
    }

    fn set_waiting(&mut self, t: TaskId, w: Option<Wait>) {
        let old = std::mem::replace(&mut self.sync.waiting[t], w);
        match (old.is_some(), w.is_some()) {
            (false, true) => self.sync.nwaiting += 1,
            (true, false) => self.sync.nwaiting -= 1,
            _ => {}
        }
    }

    /// Block `t` on `w`, then end the run if nothing can ever wake anyone.
    fn sync_block(&mut self, t: TaskId, w: Wait, reason: &'static str) -> Res<bool> {
        self.set_waiting(t, Some(w));
        self.block(t, TaskState::Blocked, reason)?;
        self.deadlock_check()?;
        Ok(true)
    }

    /// Wake `w`, blocked on one of this module's objects.
    fn sync_wake(&mut self, w: TaskId) -> Res<()> {
        self.set_waiting(w, None);
        if self.tasks[w].state == TaskState::Blocked {
            self.step(w)?;
        }
        Ok(())
    }

    fn sync_misuse(&self, t: TaskId, what: String) -> Box<SimError> {
        Box::new(at(
            "workload",
            format!(
                "at {:.9} s thread {} {what}",
                self.now.as_secs_f64(),
                self.sync_who(t)
            ),
        ))
    }

    fn check_holds(&self, t: TaskId, m: usize, verb: &str) -> Res<()> {
        let name = &self.sync.mutex_n.names[m];
        match self.sync.mutexes[m].owner {
            Some(o) if o == t => Ok(()),
            Some(o) => Err(self.sync_misuse(
                t,
                format!("{verb} mutex \"{name}\", which {} holds", self.sync_who(o)),
            )),
            None => {
                Err(self.sync_misuse(t, format!("{verb} mutex \"{name}\", which nobody holds")))
            }
        }
    }

    /// Release mutex `m`: its longest waiter takes it and goes on.
    fn release_mutex(&mut self, m: usize) -> Res<()> {
        match self.sync.mutexes[m].waiters.pop_front() {
            Some(w) => {
                self.sync.mutexes[m].owner = Some(w);
                self.sync_wake(w)
            }
            None => {
                self.sync.mutexes[m].owner = None;
                Ok(())
            }
        }
    }

    /// `t` waits on condition variable `cond`, releasing `mutex`.
    fn cond_wait(&mut self, t: TaskId, cond: &str, mutex: &str) -> Res<bool> {
        let c = self.sync.cond_n.id(cond);
        let m = self.sync.mutex_n.id(mutex);
        self.check_holds(t, m, &format!("waits on \"{cond}\" with"))?;
        self.sync.conds[c].push_back((t, m));
        self.set_waiting(t, Some(Wait::Cond(c, m)));
        self.block(t, TaskState::Blocked, "wait")?;
        self.release_mutex(m)?;
        self.deadlock_check()?;
        Ok(true)
    }

    /// Wake the longest waiter of `c` (all of them with `all`): each takes
    /// its mutex back, or queues for it.
    fn cond_signal(&mut self, c: usize, all: bool) -> Res<()> {
        loop {
            let Some((w, m)) = self.sync.conds[c].pop_front() else {
                return Ok(());
            };
            if self.sync.mutexes[m].owner.is_none() {
                self.sync.mutexes[m].owner = Some(w);
                self.sync_wake(w)?;
            } else {
                self.sync.mutexes[m].waiters.push_back(w);
                self.set_waiting(w, Some(Wait::Mutex(m)));
            }
            if !all {
                return Ok(());
            }
        }
    }

    /// Threads a shared barrier waits for now: its members that are live
    /// or still to start.
    fn barrier_open(&mut self, b: usize) -> bool {
        let count = match self.sync.barriers[b].count {
            Some(c) => c,
            None => {
                let bar = &self.sync.barriers[b];
                let c = bar
                    .members
                    .iter()
                    .filter(|&&m| self.thread_counts(m))
                    .count();
                self.sync.barriers[b].count = Some(c);
                c
            }
        };
        let bar = &self.sync.barriers[b];
        !bar.waiting.is_empty() && bar.waiting.len() >= count
    }

    /// The threads of program `p` start, exit or may start: the member
    /// counts of their shared barriers are to be counted again.
    fn recount_barriers(&mut self, p: usize) {
        for i in 0..self.progs[p].threads.len() {
            let t = self.progs[p].threads[i];
            for k in 0..self.sync.member_of[t].len() {
                let b = self.sync.member_of[t][k];
                self.sync.barriers[b].count = None;
            }
        }
    }

    /// Whether thread `m` is live or will start.
    fn thread_counts(&self, m: TaskId) -> bool {
        match self.tasks[m].state {
            TaskState::Exited => false,
            TaskState::NotStarted => !self.sync.prog[self.tasks[m].program].done,
            _ => true,
        }
    }

    /// Open shared barrier `b`: every waiter but `arriving` goes on.
    fn release_barrier(&mut self, b: usize, arriving: Option<TaskId>) -> Res<()> {
        let waiters = std::mem::take(&mut self.sync.barriers[b].waiting);
        for w in waiters {
            if Some(w) != arriving {
                self.sync_wake(w)?;
            }
        }
        Ok(())
    }

    /// `t` exited: the shared barriers it belonged to may open now; and
    /// nobody may be left to wake the blocked threads.
    pub(super) fn sync_exited(&mut self, t: TaskId) -> Res<()> {
        self.sync.run_for[t] = false;
        for i in 0..self.sync.member_of[t].len() {
            let b = self.sync.member_of[t][i];
            self.sync.barriers[b].count = None;
            if self.barrier_open(b) {
                self.release_barrier(b, None)?;
            }
        }
        if self.sync.nwaiting > 0 {
            self.deadlock_check()?;
        }
        Ok(())
    }

    /// A new instance of program `p` starts: its threads get the program's
    /// affinity back and re-synchronise with their timers.
    pub(super) fn sync_instance_start(&mut self, p: usize) {
        let ps = &mut self.sync.prog[p];
        ps.started_once = true;
        ps.start_queued = false;
        for i in 0..self.progs[p].threads.len() {
            let t = self.progs[p].threads[i];
            if let Some(a) = self.sync.base_affinity[t].take() {
                self.tasks[t].affinity = a;
            }
            self.sync.run_for[t] = false;
            self.set_waiting(t, None);
        }
        self.recount_barriers(p);
        if !self.sync.tick.is_empty() {
            let threads = &self.progs[p].threads;
            self.sync.tick.retain(|(t, _), _| !threads.contains(t));
        }
    }

    /// Forked programs do not start at their start time: they count as
    /// done until forked. Returns whether `p` is one.
    pub(super) fn sync_forked_only(&mut self, p: usize) -> bool {
        if self.progs[p].forked {
            self.sync.prog[p].done = true;
            self.programs_done += 1;
            self.recount_barriers(p);
            return true;
        }
        false
    }

    /// Program `p`'s last instance ended: start the next if a fork waits
    /// (returns true), else it is done.
    pub(super) fn sync_program_done(&mut self, p: usize) -> bool {
        let ps = &mut self.sync.prog[p];
        if ps.pending > 0 {
            ps.pending -= 1;
            ps.start_queued = true;
            self.progs[p].instance += 1;
            self.q.push(
                self.now,
                EventClass::Wake,
                Ev::ProgramStart { prog: p as u32 },
            );
            return true;
        }
        ps.done = true;
        self.recount_barriers(p);
        false
    }

    /// A fork of program `p`: its next instance starts now if it is idle,
    /// else when the running one ends.
    fn fork_program(&mut self, p: usize) {
        let ps = &mut self.sync.prog[p];
        if !ps.done {
            ps.pending += 1;
            return;
        }
        ps.done = false;
        ps.start_queued = true;
        if ps.started_once {
            self.progs[p].instance += 1;
        }
        self.programs_done -= 1;
        self.recount_barriers(p);
        self.q.push(
            self.now,
            EventClass::Wake,
            Ev::ProgramStart { prog: p as u32 },
        );
    }

    /// The wall-time end of `t`'s `run_for` phase. Returns false for a
    /// stale event.
    pub(super) fn run_for_end(&mut self, t: TaskId, gen: u32) -> Res<bool> {
        if self.sync.run_gen[t] != gen || !self.sync.run_for[t] {
            return Ok(false);
        }
        self.sync.run_for[t] = false;
        let state = self.tasks[t].state;
        let on_host = state == TaskState::Running && !self.vm.is_guest(t);
        if on_host {
            self.sync(self.tasks[t].cpu);
        }
        // The work not done is taken back: the phase did what it could in
        // its wall time.
        let left = std::mem::take(&mut self.tasks[t].remaining);
        self.tasks[t].c.work_assigned -= left;
        // A queued thread finishes the phase as soon as it runs again.
        if state == TaskState::Running {
            self.step(t)?;
        }
        Ok(true)
    }

    /// Whether some thread can still act: running, runnable, sleeping on a
    /// time, or in a program that will start.
    fn anyone_active(&mut self) -> bool {
        let n = self.tasks.len();
        let from = self.sync.scan_from.min(n);
        let active = |task: &Task| match task.state {
            TaskState::Runnable | TaskState::Running | TaskState::Sleeping => true,
            TaskState::NotStarted => !self.sync.prog[task.program].done,
            TaskState::Blocked | TaskState::Exited => false,
        };
        if let Some(i) = (from..n).chain(0..from).find(|&i| active(&self.tasks[i])) {
            self.sync.scan_from = i;
            return true;
        }
        self.progs.iter().enumerate().any(|(p, prog)| {
            let ps = &self.sync.prog[p];
            ps.start_queued || (!ps.done && prog.live == 0)
        })
    }

    /// End the run if every live thread is blocked and nothing is left to
    /// wake any of them.
    fn deadlock_check(&mut self) -> Res<()> {
        if self.anyone_active() {
            return Ok(());
        }
        let mut lines = Vec::new();
        for (t, task) in self.tasks.iter().enumerate() {
            if task.state != TaskState::Blocked {
                continue;
            }
            let who = self.sync_who(t);
            let s = &self.sync;
            let holder = |m: usize| match s.mutexes[m].owner {
                Some(o) => format!(" (held by {})", self.sync_who(o)),
                None => String::new(),
            };
            let what = match s.waiting[t] {
                Some(Wait::Mutex(m)) => {
                    format!("waits for mutex \"{}\"{}", s.mutex_n.names[m], holder(m))
                }
                Some(Wait::Cond(c, m)) => format!(
                    "waits on condition \"{}\" (mutex \"{}\")",
                    s.cond_n.names[c], s.mutex_n.names[m]
                ),
                Some(Wait::Sem(x)) => format!("pends on semaphore \"{}\"", s.sem_n.names[x]),
                Some(Wait::Barrier(b)) => {
                    format!("waits at shared barrier \"{}\"", s.bar_n.names[b])
                }
                None => "waits at its program's barrier".to_string(),
            };
            lines.push(format!("{who} {what}"));
        }
        Err(Box::new(at(
            "workload",
            format!(
                "deadlock at {:.9} s: every live thread is blocked and nothing can wake one: {}",
                self.now.as_secs_f64(),
                lines.join("; ")
            ),
        )))
    }
}
