//! The engine side of virtual machines: the guest level of two-level
//! scheduling.
//!
//! Every task is at one of three levels: a native thread, a vCPU (a host
//! task whose execution is its guest's current task), or a guest thread. The
//! guest scheduler is an ordinary [`Scheduler`] whose CPUs are the VM's
//! vCPUs; it gets the same callbacks, with the same protocol, as the host
//! scheduler, through a [`Ctx`] whose machine is the guest's view (identical
//! vCPUs) and whose `current` is the task current on each vCPU.
//!
//! A guest task current on vCPU v is `Running` in the guest's eyes whether
//! or not the host runs v; it progresses only while the host runs v on some
//! CPU p, at p's speed. Whenever either level changes who executes on p, p's
//! progress is synced and its completion re-planned (as for a frequency
//! change). Cache refill after a migration is charged when a guest task
//! starts executing on a physical CPU other than the one it last executed
//! on. A vCPU whose guest has nothing to run blocks in the host ("vcpu-idle")
//! and is woken when its guest gives it a task again.

use super::Res;
use super::{Engine, Src};
use super::{VmRow, VmSetup};
use crate::error::SimError;
use crate::hw::{CpuId, Machine};

use crate::os::VcpuInfo;
use crate::os::{CpuSet, TaskId, TaskState};
use crate::policy::{EnqFlags, Request, Scheduler};
use crate::time::SimTime;
use crate::trace::TraceEvent;
use crate::workload::Program;

/// The level of a task.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Native,
    Vcpu { vm: u32, v: u32 },
    Guest { vm: u32 },
}

/// Run-time state of one VM.
pub(crate) struct VmRt {
    name: String,
    /// The guest scheduler, and below what its context shows: the guest's
    /// machine, current tasks, online vCPUs, frequencies and ratings.
    pub(super) sched: Box<dyn Scheduler>,
    pub(super) machine: Machine,
    /// What its guest scheduler reads of the vCPUs: the guest task current
    /// on each, online vCPUs, frequencies and ratings (no cpusets, vCPUs or
    /// fusion levels of its own).
    pub(super) v: crate::policy::CpuView,
    vcpu_task: Vec<TaskId>,
    need_resched: Vec<bool>,
    tick_wanted: Vec<bool>,
    programs: Vec<usize>,
    priority: String,
    aware: bool,
    weight: u32,
    /// vCPUs not blocked in the host, and its history `(t_ns, count)`.
    active: u32,
    active_timeline: Vec<(u64, u32)>,
}

/// The engine's VM state: every VM's run-time state, the level of every
/// task, and the guest level's pending requests and reschedules. Empty (and
/// never consulted on the hot paths) when the scenario has no VMs.
pub(crate) struct VmState {
    pub(super) vms: Vec<VmRt>,
    /// Level of each task (empty without VMs).
    pub(super) level: Vec<Level>,
    /// Requests recorded by the guest scheduler being called.
    pub(super) reqs: Vec<Request>,
    /// Guest-level reschedules to serve, `(vm, vCPU)`.
    pub(super) resched: Vec<(usize, CpuId)>,
    /// The vCPU whose guest `pick_next`/`balance` is running.
    pub(super) picking: Option<(usize, CpuId)>,
    /// Per guest task: the host CPU it last executed on.
    pub(super) phys_last: Vec<Option<CpuId>>,
}

impl VmState {
    /// Build the VM state from the setup's VMs (`progs`: every program of
    /// the run, whose threads are the tasks), and per task what a host
    /// scheduler sees of a vCPU (empty without VMs).
    pub(super) fn new(
        setups: Vec<VmSetup>,
        progs: &[Program],
        ntasks: usize,
    ) -> (VmState, Vec<Option<VcpuInfo>>) {
        let mut st = VmState {
            vms: Vec::new(),
            level: Vec::new(),
            reqs: Vec::new(),
            resched: Vec::new(),
            picking: None,
            phys_last: Vec::new(),
        };
        if setups.is_empty() {
            return (st, Vec::new());
        }
        st.level = vec![Level::Native; ntasks];
        let mut vinfo = vec![None; ntasks];
        for (k, s) in setups.into_iter().enumerate() {
            let nv = s.vcpu_tasks.len();
            for (v, &t) in s.vcpu_tasks.iter().enumerate() {
                st.level[t] = Level::Vcpu {
                    vm: k as u32,
                    v: v as u32,
                };
                vinfo[t] = Some(s.info[v].clone());
            }
            let fmax = s.machine.types[s.machine.domains[0].ty].fmax();
            st.vms.push(VmRt {
                name: s.name,
                sched: s.scheduler,
                machine: s.machine,
                v: crate::policy::CpuView {
                    current: vec![None; nv],
                    online: vec![true; nv],
                    domain_mhz: vec![fmax],
                    ratings: vec![1.0; nv],
                    ..Default::default()
                },
                vcpu_task: s.vcpu_tasks,
                need_resched: vec![false; nv],
                tick_wanted: vec![false; nv],
                programs: s.programs,
                priority: s.priority,
                aware: s.aware,
                weight: s.info[0].weight,
                active: 0,
                active_timeline: vec![(0, 0)],
            });
        }
        // The guest threads: every thread of a VM's programs.
        for (k, vm) in st.vms.iter().enumerate() {
            for &p in &vm.programs {
                for &t in &progs[p].threads {
                    st.level[t] = Level::Guest { vm: k as u32 };
                }
            }
        }
        st.phys_last = vec![None; ntasks];
        (st, vinfo)
    }

    /// Whether the run has VMs.
    #[inline]
    pub(super) fn any(&self) -> bool {
        !self.level.is_empty()
    }

    /// Level of task `t`.
    #[inline]
    pub(super) fn level_of(&self, t: TaskId) -> Level {
        self.level.get(t).copied().unwrap_or(Level::Native)
    }

    /// Whether `t` is a vCPU.
    #[inline]
    pub(super) fn is_vcpu(&self, t: TaskId) -> bool {
        self.any() && matches!(self.level_of(t), Level::Vcpu { .. })
    }

    /// Whether `t` is a guest thread.
    #[inline]
    pub(super) fn is_guest(&self, t: TaskId) -> bool {
        self.any() && matches!(self.level_of(t), Level::Guest { .. })
    }

    /// The task executing when `t` is current on a host CPU: `t`, or for a
    /// vCPU its guest's current task.
    #[inline]
    pub(super) fn exec(&self, t: TaskId) -> Option<TaskId> {
        match self.level_of(t) {
            Level::Vcpu { vm, v } => self.vms[vm as usize].v.current[v as usize],
            _ => Some(t),
        }
    }

    /// Whether task `t`, current on a host CPU, is a vCPU whose guest wants
    /// ticks and has a task to tick.
    #[inline]
    pub(super) fn wants_tick(&self, t: TaskId) -> bool {
        if !self.any() {
            return false;
        }
        match self.level_of(t) {
            Level::Vcpu { vm, v } => {
                let vm = &self.vms[vm as usize];
                vm.tick_wanted[v as usize] && vm.v.current[v as usize].is_some()
            }
            _ => false,
        }
    }
}

impl Engine {
    /// Level of task `t`.
    #[inline]
    pub(crate) fn level_of(&self, t: TaskId) -> Level {
        self.vm.level_of(t)
    }

    /// Whether `t` is a vCPU.
    #[inline]
    pub fn is_vcpu(&self, t: TaskId) -> bool {
        self.vm.is_vcpu(t)
    }

    /// Whether `t` is a guest thread.
    #[inline]
    pub(crate) fn is_guest(&self, t: TaskId) -> bool {
        self.vm.is_guest(t)
    }

    /// Task `t`'s load tracking as the host scheduler keeps it
    /// ([`crate::policy::Scheduler::task_load`]); None for a guest thread
    /// (its scheduler is its VM's).
    pub(crate) fn task_load(&self, t: TaskId) -> Option<crate::policy::TaskLoad> {
        if self.is_guest(t) {
            return None;
        }
        self.sched.task_load(t)
    }

    /// `sync` for a CPU that may run a vCPU: account the vCPU's run time and
    /// return the task that executes.
    pub(crate) fn vm_sync(&mut self, cpu: CpuId, dt: u64) -> Option<TaskId> {
        let t = self.hv.current[cpu]?;
        if let Level::Vcpu { vm, v } = self.level_of(t) {
            let ty = self.m.cpus[cpu].ty;
            let task = &mut self.tasks[t];
            task.c.run_ns += dt;
            task.c.run_ns_by_type.add(ty, dt);
            task.c.scaled_run_ns += dt as f64 * self.hv.ratings[cpu];
            return self.vm.vms[vm as usize].v.current[v as usize];
        }
        Some(t)
    }

    /// Host CPU running vCPU `v` of VM `k`, if the host runs it.
    fn vcpu_pcpu(&self, k: usize, v: usize) -> Option<CpuId> {
        let vt = self.vm.vms[k].vcpu_task[v];
        (self.tasks[vt].state == TaskState::Running).then_some(self.tasks[vt].cpu)
    }

    /// Guest task `g` starts executing on host CPU `p` (call after `sync(p)`):
    /// charge the cache refill if it last executed elsewhere.
    pub(crate) fn vm_exec_begin(&mut self, p: CpuId, g: TaskId) {
        let mut stall = std::mem::take(&mut self.tasks[g].pending_stall);
        if let Some(prev) = self.vm.phys_last[g] {
            if prev != p {
                let task = &self.tasks[g];
                let ws = self.progs[task.program].params[task.param as usize].working_set_kb;
                stall += self.m.migration.cost(&self.m, prev, p, ws).0;
                self.tasks[g].c.migrations += 1;
            }
        }
        self.vm.phys_last[g] = Some(p);
        if stall > 0 {
            self.tasks[g].stall_until = self.now + SimTime(stall);
        }
    }

    /// Guest task `g` stops executing (call after `sync`): a refill cut short
    /// is owed at its next start.
    pub(crate) fn vm_exec_end(&mut self, g: TaskId) {
        let owed = self.tasks[g].stall_until.since(self.now).0;
        if owed > 0 {
            self.tasks[g].pending_stall += owed;
            self.tasks[g].stall_until = self.now;
        }
    }

    /// The host starts running task `t` on `cpu` (after `sync`): if it is a
    /// vCPU, its guest's current task starts executing there.
    #[inline]
    pub(crate) fn vm_vcpu_started(&mut self, cpu: CpuId, t: TaskId) {
        if !self.vm.is_vcpu(t) {
            return;
        }
        if let Some(g) = self.vm.exec(t) {
            self.vm_exec_begin(cpu, g);
        }
    }

    /// The host stops running task `t` (after `sync`): if it is a vCPU, its
    /// guest's current task stops executing.
    #[inline]
    pub(crate) fn vm_vcpu_stopping(&mut self, t: TaskId) {
        if !self.vm.is_vcpu(t) {
            return;
        }
        if let Some(g) = self.vm.exec(t) {
            self.vm_exec_end(g);
        }
    }

    fn vm_of(&self, t: TaskId) -> usize {
        match self.level_of(t) {
            Level::Guest { vm } | Level::Vcpu { vm, .. } => vm as usize,
            Level::Native => unreachable!("not a VM task"),
        }
    }

    fn guest_err(&self, k: usize, what: String) -> Box<SimError> {
        Box::new(SimError::Policy {
            policy: format!(
                "guest scheduler \"{}\" of VM \"{}\"",
                self.vm.vms[k].sched.name(),
                self.vm.vms[k].name
            ),
            time: self.now,
            message: what,
        })
    }

    fn g_flag(&mut self, k: usize, v: usize) {
        if !self.vm.vms[k].need_resched[v] {
            self.vm.vms[k].need_resched[v] = true;
            self.vm.resched.push((k, v));
        }
    }

    fn g_kick(&mut self, k: usize, v: usize) {
        if self.vm.vms[k].v.current[v].is_none() && self.vm.picking != Some((k, v)) {
            self.g_flag(k, v);
        }
    }

    /// Apply the requests a guest scheduler recorded.
    fn g_apply(&mut self, k: usize) -> Res<()> {
        let nv = self.vm.vms[k].v.current.len();
        while !self.vm.reqs.is_empty() {
            let batch = std::mem::take(&mut self.vm.reqs);
            for r in batch {
                let bad_v = |s: &Self, v: CpuId, what: &str| -> Res<()> {
                    if v >= nv {
                        Err(s.guest_err(
                            k,
                            format!("{what}: vCPU {v} does not exist (the VM has {nv} vCPUs)"),
                        ))
                    } else {
                        Ok(())
                    }
                };
                let bad_t = |s: &Self, t: TaskId, what: &str| -> Res<()> {
                    if t >= s.tasks.len() || s.level_of(t) != (Level::Guest { vm: k as u32 }) {
                        Err(s.guest_err(k, format!("{what}: task {t} is not a task of this VM")))
                    } else {
                        Ok(())
                    }
                };
                match r {
                    Request::Resched(v) => {
                        bad_v(self, v, "resched")?;
                        self.g_flag(k, v);
                    }
                    Request::Migrate { task, cpu: v } => {
                        let what = format!("migrate(task {task}, vCPU {v})");
                        bad_t(self, task, &what)?;
                        bad_v(self, v, &what)?;
                        if !self.tasks[task].affinity.contains(v) {
                            return Err(self.guest_err(
                                k,
                                format!("{what}: vCPU {v} is outside the task's affinity"),
                            ));
                        }
                        match self.tasks[task].state {
                            TaskState::Exited => {
                                return Err(
                                    self.guest_err(k, format!("{what}: the task has exited"))
                                )
                            }
                            TaskState::Running => {
                                let src = self.tasks[task].cpu;
                                if src != v {
                                    self.tasks[task].cpu = v;
                                    self.g_flag(k, src);
                                }
                            }
                            TaskState::Runnable => {
                                self.tasks[task].cpu = v;
                                self.g_kick(k, v);
                            }
                            _ => self.tasks[task].cpu = v,
                        }
                    }
                    Request::WantTick { cpu: v, on } => {
                        bad_v(self, v, "want_tick")?;
                        self.vm.vms[k].tick_wanted[v] = on;
                        if let Some(p) = self.vcpu_pcpu(k, v) {
                            if on
                                && self.vm.vms[k].v.current[v].is_some()
                                && !self.flags.ticks[p].armed
                            {
                                self.arm_tick(p);
                            }
                        }
                    }
                    Request::SetNice { task, nice } => {
                        let what = format!("set_nice(task {task}, {nice})");
                        bad_t(self, task, &what)?;
                        if !(-20..=19).contains(&nice) {
                            return Err(
                                self.guest_err(k, format!("{what}: nice must be within -20..19"))
                            );
                        }
                        let old = self.tasks[task].weight;
                        self.tasks[task].nice = nice;
                        self.tasks[task].weight = crate::os::nice_to_weight(nice);
                        if old != self.tasks[task].weight {
                            self.with_guest(k, |s, cx| s.reweight(cx, task, old));
                        }
                    }
                    Request::SetAffinity { task, cpus } => {
                        let what = format!("set_affinity(task {task}, {cpus:?})");
                        bad_t(self, task, &what)?;
                        if cpus.is_empty() {
                            return Err(self.guest_err(k, format!("{what}: empty vCPU list")));
                        }
                        for &v in &cpus {
                            bad_v(self, v, &what)?;
                        }
                        self.tasks[task].affinity = CpuSet::from_cpus(&cpus, nv);
                        let cur = self.tasks[task].cpu;
                        if !self.tasks[task].affinity.contains(cur) {
                            match self.tasks[task].state {
                                TaskState::Running => self.g_flag(k, cur),
                                TaskState::Runnable => {
                                    self.with_guest(k, |s, cx| s.dequeue(cx, task, cur));
                                    let dst =
                                        self.g_select(k, task, Some(cur), EnqFlags::Affinity)?;
                                    self.tasks[task].cpu = dst;
                                    self.g_enqueue(k, task, dst, EnqFlags::Affinity)?;
                                }
                                _ => {}
                            }
                        }
                    }
                    Request::Fail(msg) => return Err(self.guest_err(k, msg)),
                    other => {
                        return Err(self.guest_err(
                            k,
                            format!("{other:?} is not available to a guest scheduler"),
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    fn g_select(
        &mut self,
        k: usize,
        t: TaskId,
        prev: Option<CpuId>,
        flags: EnqFlags,
    ) -> Res<CpuId> {
        let v = self.with_guest(k, |s, cx| s.select_cpu(cx, t, prev, flags));
        self.g_apply(k)?;
        let nv = self.vm.vms[k].v.current.len();
        if v >= nv {
            return Err(self.guest_err(
                k,
                format!("select_cpu returned vCPU {v} for task {t}; the VM has {nv} vCPUs"),
            ));
        }
        if !self.tasks[t].affinity.contains(v) {
            return Err(self.guest_err(
                k,
                format!("select_cpu returned vCPU {v} for task {t}, outside its affinity"),
            ));
        }
        Ok(v)
    }

    fn g_enqueue(&mut self, k: usize, t: TaskId, v: CpuId, flags: EnqFlags) -> Res<()> {
        self.with_guest(k, |s, cx| s.enqueue(cx, t, v, flags));
        self.g_apply(k)?;
        self.g_kick(k, v);
        Ok(())
    }

    /// A guest task becomes runnable: the guest scheduler places it.
    pub(crate) fn g_wake(&mut self, t: TaskId, flags: EnqFlags) -> Res<()> {
        let k = self.vm_of(t);
        self.set_state(t, TaskState::Runnable);
        if self.tasks[t].start.is_none() {
            self.tasks[t].start = Some(self.now);
        }
        let prev = self.tasks[t].last_ran;
        let v = self.g_select(k, t, prev, flags)?;
        self.tasks[t].cpu = v;
        let t_ns = self.now.0;
        self.emit(3, t as u64, v as u64, 1, || TraceEvent::Wake {
            t_ns,
            task: t,
            cpu: v,
        });
        self.g_enqueue(k, t, v, flags)
    }

    /// A running guest task blocks, sleeps or exits: take it off its vCPU.
    pub(crate) fn g_unrun(&mut self, t: TaskId) -> Res<()> {
        let k = self.vm_of(t);
        let v = self.tasks[t].cpu;
        self.g_stop(k, v, false)?;
        self.g_flag(k, v);
        Ok(())
    }

    fn g_stop(&mut self, k: usize, v: usize, runnable: bool) -> Res<TaskId> {
        let t = self.vm.vms[k].v.current[v].expect("g_stop on an idle vCPU");
        let p = self.vcpu_pcpu(k, v);
        if let Some(p) = p {
            self.sync(p);
            self.vm_exec_end(t);
        }
        self.vm.vms[k].v.current[v] = None;
        if runnable {
            self.set_state(t, TaskState::Runnable);
        } else {
            self.tasks[t].c.csw_voluntary += 1;
        }
        self.with_guest(k, |s, cx| s.stopping(cx, t, v, runnable));
        self.g_apply(k)?;
        if let Some(p) = p {
            self.refresh(p);
        }
        Ok(t)
    }

    /// `running` `t` on vCPU `v`: if the host runs `v`, `t` executes now;
    /// if `v` was blocked in the host, wake it.
    fn g_start(&mut self, k: usize, v: usize, t: TaskId) -> Res<()> {
        let p = self.vcpu_pcpu(k, v);
        if let Some(p) = p {
            self.sync(p);
        }
        self.set_state(t, TaskState::Running);
        self.tasks[t].last_ran = Some(v);
        self.tasks[t].cpu = v;
        self.vm.vms[k].v.current[v] = Some(t);
        self.with_guest(k, |s, cx| s.running(cx, t, v));
        self.g_apply(k)?;
        if self.vm.vms[k].v.current[v] != Some(t) {
            return Ok(());
        }
        let vt = self.vm.vms[k].vcpu_task[v];
        match self.tasks[vt].state {
            TaskState::Running => {
                let p = self.tasks[vt].cpu;
                self.vm_exec_begin(p, t);
                self.refresh(p);
                if self.vm.vms[k].tick_wanted[v] && !self.flags.ticks[p].armed {
                    self.arm_tick(p);
                }
            }
            TaskState::NotStarted => {
                self.vm_active(k, 1);
                self.wake(vt, EnqFlags::New)?;
            }
            TaskState::Sleeping | TaskState::Blocked => {
                self.vm_active(k, 1);
                self.wake(vt, EnqFlags::Wakeup)?;
            }
            _ => {}
        }
        Ok(())
    }

    fn vm_active(&mut self, k: usize, delta: i32) {
        let vm = &mut self.vm.vms[k];
        vm.active = (vm.active as i32 + delta).max(0) as u32;
        let now = self.now.0;
        match vm.active_timeline.last_mut() {
            Some(last) if last.0 == now => last.1 = vm.active,
            _ => vm.active_timeline.push((now, vm.active)),
        }
    }

    /// vCPU `v` has nothing to run: it blocks in the host.
    fn vcpu_idle(&mut self, k: usize, v: usize) -> Res<()> {
        let vt = self.vm.vms[k].vcpu_task[v];
        match self.tasks[vt].state {
            TaskState::Running => {
                self.vm_active(k, -1);
                self.block(vt, TaskState::Sleeping, "vcpu-idle")?;
            }
            TaskState::Runnable => {
                self.vm_active(k, -1);
                let cpu = self.tasks[vt].cpu;
                self.src = Src::Sched;
                self.with_sched(|s, cx| s.dequeue(cx, vt, cpu));
                self.apply()?;
                self.set_state(vt, TaskState::Sleeping);
                let t_ns = self.now.0;
                self.emit(4, vt as u64, 0, 0, || TraceEvent::Block {
                    t_ns,
                    task: vt,
                    reason: "vcpu-idle",
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn g_pick(&mut self, k: usize, v: usize) -> Res<Option<TaskId>> {
        let next = self.with_guest(k, |s, cx| s.pick_next(cx, v));
        self.g_apply(k)?;
        if next.is_some() {
            return Ok(next);
        }
        self.with_guest(k, |s, cx| s.balance(cx, v));
        self.g_apply(k)?;
        let next = self.with_guest(k, |s, cx| s.pick_next(cx, v));
        self.g_apply(k)?;
        Ok(next)
    }

    /// Reschedule vCPU `v` of VM `k` at the guest level.
    fn g_resched(&mut self, k: usize, v: usize) -> Res<()> {
        self.vm.vms[k].need_resched[v] = false;
        let prev = self.vm.vms[k].v.current[v];
        if let Some(t) = prev {
            if self.tasks[t].state != TaskState::Running {
                return Ok(());
            }
            self.g_stop(k, v, true)?;
            let mut flags = EnqFlags::Preempted;
            let mut dst = self.tasks[t].cpu;
            if !self.tasks[t].affinity.contains(dst) {
                dst = self.g_select(k, t, Some(v), EnqFlags::Affinity)?;
                flags = EnqFlags::Affinity;
            } else if dst != v {
                flags = EnqFlags::Migrated;
            }
            self.tasks[t].cpu = dst;
            self.g_enqueue(k, t, dst, flags)?;
        }
        if self.vm.vms[k].v.current[v].is_some() {
            return Ok(());
        }
        self.vm.vms[k].need_resched[v] = false;
        self.vm.picking = Some((k, v));
        let next = self.g_pick(k, v);
        self.vm.picking = None;
        match next? {
            Some(n) => {
                if n >= self.tasks.len() || self.level_of(n) != (Level::Guest { vm: k as u32 }) {
                    return Err(self.guest_err(
                        k,
                        format!("pick_next on vCPU {v} returned task {n}, which is not a task of this VM"),
                    ));
                }
                if self.tasks[n].state != TaskState::Runnable {
                    return Err(self.guest_err(
                        k,
                        format!(
                            "pick_next on vCPU {v} returned task {n}, which is {} (not runnable)",
                            self.tasks[n].state.name()
                        ),
                    ));
                }
                if !self.tasks[n].affinity.contains(v) {
                    return Err(self.guest_err(
                        k,
                        format!(
                            "pick_next on vCPU {v} returned task {n}, whose affinity excludes it"
                        ),
                    ));
                }
                if let Some(p) = prev {
                    if p != n && self.tasks[p].state == TaskState::Runnable {
                        self.tasks[p].c.csw_involuntary += 1;
                    }
                }
                self.g_start(k, v, n)?;
            }
            None => {
                if let Some(p) = prev {
                    if self.tasks[p].state == TaskState::Runnable {
                        self.tasks[p].c.csw_involuntary += 1;
                    }
                }
                self.vcpu_idle(k, v)?;
            }
        }
        Ok(())
    }

    /// Serve the guest-level reschedule requests; `false` when there were
    /// none (they may block or wake vCPUs in the host, which then need
    /// reschedules of their own).
    pub(crate) fn vm_process_resched(&mut self) -> Res<bool> {
        if self.vm.resched.is_empty() {
            return Ok(false);
        }
        let mut i = 0;
        while i < self.vm.resched.len() {
            let (k, v) = self.vm.resched[i];
            i += 1;
            if self.vm.vms[k].need_resched[v] {
                self.g_resched(k, v)?;
            }
        }
        self.vm.resched.clear();
        Ok(true)
    }

    /// A guest task running on its vCPU got more work: re-plan the host CPU
    /// that executes it, if any.
    pub(crate) fn g_need_cpu_running(&mut self, t: TaskId) {
        let k = self.vm_of(t);
        let v = self.tasks[t].cpu;
        if let Some(p) = self.vcpu_pcpu(k, v) {
            if self.vm.vms[k].v.current[v] == Some(t) {
                self.refresh(p);
            }
        }
    }

    /// A host tick on `cpu`: deliver the guest's tick to the vCPU it runs.
    pub(crate) fn vm_guest_tick(&mut self, cpu: CpuId) -> Res<()> {
        let Some(Level::Vcpu { vm, v }) = self.hv.current[cpu].map(|t| self.level_of(t)) else {
            return Ok(());
        };
        let (k, v) = (vm as usize, v as usize);
        if !self.vm.vms[k].tick_wanted[v] {
            return Ok(());
        }
        let Some(g) = self.vm.vms[k].v.current[v] else {
            return Ok(());
        };
        self.with_guest(k, |s, cx| s.tick(cx, v, g));
        self.g_apply(k)
    }

    /// Initialise the guest schedulers.
    pub(crate) fn vm_init(&mut self) -> Res<()> {
        for k in 0..self.vm.vms.len() {
            self.with_guest(k, |s, cx| s.init(cx));
            self.g_apply(k)?;
        }
        Ok(())
    }

    /// Invariants of the two levels.
    pub(crate) fn vm_check(&self) -> Result<(), String> {
        for (k, vm) in self.vm.vms.iter().enumerate() {
            for (v, cur) in vm.v.current.iter().enumerate() {
                let vt = vm.vcpu_task[v];
                if let Some(g) = *cur {
                    if self.tasks[g].state != TaskState::Running || self.tasks[g].cpu != v {
                        return Err(format!(
                            "VM {k}: task {g} is current on vCPU {v} but is {} on vCPU {}",
                            self.tasks[g].state.name(),
                            self.tasks[g].cpu
                        ));
                    }
                } else if matches!(
                    self.tasks[vt].state,
                    TaskState::Runnable | TaskState::Running
                ) && !vm.need_resched[v]
                {
                    return Err(format!(
                        "VM {k}: vCPU {v} is {} in the host with nothing to run",
                        self.tasks[vt].state.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Per-VM results.
    pub fn vm_rows(&self) -> Vec<VmRow> {
        let fast_ty = (0..self.m.ncpus())
            .max_by(|&a, &b| {
                self.m
                    .perf(a, self.m.ty(a).fmax())
                    .total_cmp(&self.m.perf(b, self.m.ty(b).fmax()))
                    .then(b.cmp(&a))
            })
            .map(|c| self.m.cpus[c].ty);
        self.vm
            .vms
            .iter()
            .enumerate()
            .map(|(k, vm)| {
                let vts = &vm.vcpu_task;
                let run: u64 = vts.iter().map(|&t| self.tasks[t].c.run_ns).sum();
                let fast: u64 = match fast_ty {
                    Some(ty) => vts
                        .iter()
                        .map(|&t| self.tasks[t].c.run_ns_by_type.get(ty).unwrap_or(0))
                        .sum(),
                    None => 0,
                };
                VmRow {
                    vm: k,
                    name: vm.name.clone(),
                    vcpus: vts.len() as u32,
                    weight: vm.weight,
                    priority: vm.priority.clone(),
                    aware: vm.aware,
                    vcpu_tasks: vts.clone(),
                    programs: vm
                        .programs
                        .iter()
                        .map(|&p| self.progs[p].name.clone())
                        .collect(),
                    run_s: run as f64 * 1e-9,
                    fast_s: fast as f64 * 1e-9,
                    migrations: vts.iter().map(|&t| self.tasks[t].c.migrations).sum(),
                    active_vcpus: vm
                        .active_timeline
                        .iter()
                        .map(|&(t, n)| (t as f64 * 1e-9, n))
                        .collect(),
                }
            })
            .collect()
    }
}
