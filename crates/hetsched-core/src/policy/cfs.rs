//! Linux CFS (the Completely Fair Scheduler), faithful in the parts that the
//! seed papers depend on, and the `pinned` variant (the papers' ACMP
//! baseline: each task stays where it was first placed).
//!
//! Follows kernel/sched/fair.c of the 2.6.3x–5.x era:
//! * per-CPU runqueues ordered by virtual runtime (keyed by `(vruntime,
//!   task)`, ties by task id for determinism: a sorted vector while short, a
//!   B-tree when long, see [`Timeline`]); the running task is not in the
//!   queue, as in the kernel;
//! * the nice-to-weight table; `vruntime += delta × 1024 / weight`;
//! * `sched_latency`, `min_granularity`, `wakeup_granularity`, scaled by
//!   `1 + log2(min(ncpus, 8))` as the kernel's default `SCHED_TUNABLESCALING_LOG`
//!   does (values given explicitly as parameters are used as they are);
//! * `sched_slice()`: the period (latency, or `nr × min_granularity` when more
//!   than `latency / min_granularity` tasks run) shared by weight;
//! * tick preemption (`check_preempt_tick`) and wake-up preemption
//!   (`check_preempt_wakeup`, with the waking task's weighted granularity);
//! * `place_entity`: new tasks start at `min_vruntime + vslice` (START_DEBIT),
//!   waking tasks at `max(vruntime, min_vruntime − latency/2)`
//!   (GENTLE_FAIR_SLEEPERS); vruntime is renormalised on migration;
//! * wake-up placement: the previous CPU if idle, else an idle CPU sharing its
//!   LLC (`select_idle_sibling`), else the previous CPU; new tasks go to the
//!   least loaded allowed CPU (`find_idlest_cpu`);
//! * load balancing by load (sum of queued weights) over the scheduling
//!   domains SMT → LLC → node → system: newidle balancing when a CPU is about
//!   to go idle, nohz idle balancing (a busy CPU with waiting tasks hands one
//!   to an idle CPU on its tick), and periodic balancing at
//!   `span_weight` ms × `busy_factor` intervals, which compares a domain's
//!   groups (its child domains) by load per CPU, moves `calculate_imbalance`'s
//!   amount and, after fruitless tries, heavier tasks (`nr_balance_failed`),
//!   so a one-task imbalance rotates. The simulator is tickless, so periodic
//!   balancing runs on the ticks of the CPUs that have waiting tasks — the
//!   only CPUs from which a pull can take anything — on behalf of the least
//!   loaded CPU of the least loaded group; migration always respects affinity.
//!
//! Per-CPU counts, wake-up placement and the three kinds of balancing are
//! shared with `eevdf` (`fair.rs`): the same code serves both.
//!
//! Simplifications, stated: load is the instantaneous sum of weights, not a
//! PELT average; cache-hot and NUMA-fault heuristics are not modelled; no
//! group scheduling (every task is a top-level entity).

use super::fair::cap::{CapAware, Since};
use super::fair::{self, calc_delta_fair, mul_div, Balancer, FairQueues, Timeline};
use super::fam::FaultMigrate;
use super::{About, Ctx, EnqFlags, ParamDef, Params, PolicySpec, Scheduler};
use crate::hw::{CpuId, Machine};
use crate::os::TaskId;
use crate::time::SimTime;

fn params() -> Vec<ParamDef> {
    let mut v = vec![
        ParamDef {
            name: "latency_ms",
            default: "auto",
            doc: "sched_latency; auto = 6 ms × (1 + log2(min(ncpus, 8)))",
        },
        ParamDef {
            name: "min_granularity_ms",
            default: "auto",
            doc: "sched_min_granularity; auto = 0.75 ms × (1 + log2(min(ncpus, 8)))",
        },
        ParamDef {
            name: "wakeup_granularity_ms",
            default: "auto",
            doc: "sched_wakeup_granularity; auto = 1 ms × (1 + log2(min(ncpus, 8)))",
        },
        ParamDef {
            name: "balance",
            default: "true",
            doc: "load balancing between CPUs (false: no balancing; wake-up placement still chooses CPUs)",
        },
        ParamDef {
            name: "busy_factor",
            default: "16",
            doc: "periodic-balance interval multiplier on busy CPUs",
        },
    ];
    v.push(ParamDef {
        name: "capacity_aware",
        default: "false",
        doc: "capacity-aware wake-up placement and misfit migration (Linux sched-capacity)",
    });
    v.push(ParamDef {
        name: "eas",
        default: "false",
        doc: "Energy Aware Scheduling of wake-ups (Linux sched-energy; implies capacity_aware); on only with an energy model, asymmetric capacities and the schedutil governor, else off with a warning",
    });
    v.push(ParamDef {
        name: "util_est",
        default: "false",
        doc: "util_est (Linux 4.17+): tasks and runqueues count as max(util_avg, EWMA of the utilisation at each sleep) for placement, misfit, EAS and schedutil; off by default here to keep the pre-6.6 results",
    });
    v.push(ParamDef {
        name: "fits_at_fmax",
        default: "false",
        doc: "fit, misfit and over-utilisation compare with a CPU's capacity at its highest P-state, as the kernel's capacity_of (false: at its present P-state, the model of the earlier results)",
    });
    v.extend(super::fam::params());
    v
}

/// Registry entry of `capacity-aware`.
pub fn capacity_aware_info() -> About {
    let params = super::switched_on(params(), &["capacity_aware"]);
    About {
        name: "capacity-aware",
        doc: "CFS with Linux's capacity awareness: wake-up placement on an idle CPU where the task fits (util × 1.25 < capacity), misfit detection and migration to a bigger CPU",
        params,
    }
}

/// Registry entry of `eas`.
pub fn eas_info() -> About {
    let params = super::switched_on(params(), &["capacity_aware", "eas"]);
    About {
        name: "eas",
        doc: "Energy Aware Scheduling on capacity-aware CFS: wake-up placement minimising the estimated energy of the performance domains (at the P-state schedutil would pick), off while any CPU is over-utilised (> 80%)",
        params,
    }
}

/// Registry entry of `cfs`.
pub fn info() -> About {
    About {
        name: "cfs",
        doc: "Linux CFS: vruntime-ordered per-CPU runqueues, nice weights, latency/granularity, wake-up preemption, load balancing over SMT/LLC/node domains",
        params: params(),
    }
}

/// Registry entry of `pinned`.
pub fn pinned_info() -> About {
    About {
        name: "pinned",
        doc: "CFS per CPU with no migration: each task runs where its affinity pins it (the least loaded allowed CPU at its first placement); the papers' ACMP baseline",
        params: params().into_iter().filter(|p| p.name != "balance" && p.name != "busy_factor").collect(),
    }
}

/// Per-task scheduling entity.
#[derive(Clone, Debug, Default)]
struct Se {
    vruntime: u64,
    exec_start: SimTime,
    sum_exec: u64,
    prev_sum_exec: u64,
    last_run: SimTime,
    /// The runqueue whose `min_vruntime` frame `vruntime` is expressed in.
    frame: CpuId,
    weight: u64,
    queued: bool,
    seen: bool,
}

/// Per-CPU runqueue.
#[derive(Clone, Debug, Default)]
struct Rq {
    timeline: Timeline<(u64, TaskId)>,
    curr: Option<TaskId>,
    min_vruntime: u64,
}

/// The CFS scheduler (and, with `pinned`, its no-migration variant).
pub struct Cfs {
    name: String,
    pinned: bool,
    latency: u64,
    min_gran: u64,
    wakeup_gran: u64,
    rqs: Vec<Rq>,
    se: Vec<Se>,
    /// Per-CPU counts, placement and balancing, shared with `eevdf`.
    bal: Balancer,
    fam: FaultMigrate,
    /// Load tracking, capacity awareness and EAS, shared with `eevdf`.
    cap: CapAware,
}

impl Cfs {
    /// Build from a parsed spec.
    pub fn from_params(ps: &PolicySpec, m: &Machine, pinned: bool) -> Result<Cfs, String> {
        let cap_name = ps.name == "capacity-aware";
        let eas_name = ps.name == "eas";
        let defs = if pinned {
            pinned_info().params
        } else if cap_name {
            capacity_aware_info().params
        } else if eas_name {
            eas_info().params
        } else {
            params()
        };
        let name = if pinned {
            "pinned"
        } else if cap_name {
            "capacity-aware"
        } else if eas_name {
            "eas"
        } else {
            "cfs"
        };
        let p = Params::new(name, &ps.params, &defs)?;
        let factor = fair::tunable_scale(m);
        let ms = |key: &str, base_us: u64| -> Result<u64, String> {
            if p.given(key) {
                Ok((p.f64(key, 0.001, 10_000.0)? * 1e6).round() as u64)
            } else {
                Ok(base_us * 1000 * factor)
            }
        };
        let latency = ms("latency_ms", 6000)?;
        let min_gran = ms("min_granularity_ms", 750)?;
        let wakeup_gran = ms("wakeup_granularity_ms", 1000)?;
        let balance = if pinned { false } else { p.bool("balance")? };
        let busy_factor = if pinned {
            16
        } else {
            p.f64("busy_factor", 1.0, 1024.0)? as u64
        };
        let fam = super::fam::from_params(&p)?;
        let mut full = String::from(name);
        if !ps.params.is_empty() {
            let parts: Vec<String> = ps.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            full = format!("{name}[{}]", parts.join(","));
        }
        let n = m.ncpus();
        Ok(Cfs {
            name: full,
            pinned,
            latency,
            min_gran,
            wakeup_gran,
            rqs: vec![Rq::default(); n],
            se: Vec::new(),
            bal: Balancer::new(m, balance, busy_factor),
            fam,
            cap: CapAware::new(
                n,
                !pinned && p.bool("capacity_aware")?,
                !pinned && p.bool("eas")?,
                !pinned && p.bool("util_est")?,
                p.bool("fits_at_fmax")?,
            ),
        })
    }

    /// The latency, min granularity and wake-up granularity in use (ns).
    pub fn tunables(&self) -> (u64, u64, u64) {
        (self.latency, self.min_gran, self.wakeup_gran)
    }

    fn se_mut(&mut self, t: TaskId) -> &mut Se {
        if t >= self.se.len() {
            self.se.resize(t + 1, Se::default());
        }
        &mut self.se[t]
    }

    fn is_idle(&self, cx: &Ctx, cpu: CpuId) -> bool {
        self.bal.is_idle(cx, cpu)
    }

    /// `update_min_vruntime()`: the runqueue's `min_vruntime` follows the
    /// smaller of the running and the leftmost queued task's vruntime, and
    /// never goes back. Inlined into its callers, which have the runqueue at
    /// hand (it runs at every charge: about two calls an event).
    #[inline]
    fn update_min_vruntime(&mut self, cpu: CpuId) {
        let rq = &mut self.rqs[cpu];
        // `u64::MAX` stands for "none": a vruntime never reaches it.
        let curr = rq.curr.map_or(u64::MAX, |t| self.se[t].vruntime);
        let left = rq.timeline.first().map_or(u64::MAX, |(v, _)| v);
        let v = curr.min(left);
        if v != u64::MAX && v > rq.min_vruntime {
            rq.min_vruntime = v;
        }
    }

    /// Charge the running task for the time since its last update.
    fn update_curr(&mut self, cpu: CpuId, now: SimTime) {
        let Some(t) = self.rqs[cpu].curr else { return };
        let se = &mut self.se[t];
        let delta = now.since(se.exec_start).0;
        if delta == 0 {
            return;
        }
        se.exec_start = now;
        se.sum_exec += delta;
        se.vruntime += calc_delta_fair(delta, se.weight);
        self.update_min_vruntime(cpu);
    }

    /// `sched_slice()`: wall-clock slice of `t` on `cpu`'s runqueue.
    fn sched_slice(&self, cpu: CpuId, t: TaskId) -> u64 {
        let rq = &self.rqs[cpu];
        let se = &self.se[t];
        let (mut nr, mut load) = (self.bal.nr[cpu] as u64, self.bal.load[cpu]);
        if !se.queued && rq.curr != Some(t) {
            nr += 1;
            load += se.weight;
        }
        let nr_latency = (self.latency / self.min_gran.max(1)).max(1);
        let period = if nr > nr_latency {
            nr * self.min_gran
        } else {
            self.latency
        };
        mul_div(period, se.weight, load.max(1))
    }

    /// Move `t`'s vruntime into `cpu`'s frame (migration renormalisation).
    fn renormalise(&mut self, t: TaskId, cpu: CpuId) {
        let from = self.se[t].frame;
        if from != cpu {
            let (old_min, new_min) = (self.rqs[from].min_vruntime, self.rqs[cpu].min_vruntime);
            let se = &mut self.se[t];
            se.vruntime = se.vruntime.saturating_sub(old_min) + new_min;
            se.frame = cpu;
        }
    }

    fn insert(&mut self, t: TaskId, cpu: CpuId) {
        let se = &mut self.se[t];
        se.queued = true;
        let key = (se.vruntime, t);
        let w = se.weight;
        self.rqs[cpu].timeline.insert(key);
        self.bal.add(cpu, w);
    }

    fn remove(&mut self, t: TaskId, cpu: CpuId) {
        let se = &mut self.se[t];
        se.queued = false;
        let key = (se.vruntime, t);
        let w = se.weight;
        let removed = self.rqs[cpu].timeline.remove(&key);
        debug_assert!(removed, "task {t} not queued on cpu {cpu}");
        self.bal.sub(cpu, w);
    }

    #[inline(always)]
    fn sync_tick(&self, cx: &mut Ctx, cpu: CpuId) {
        let rq = &self.rqs[cpu];
        let away = rq.curr.is_some_and(|t| self.fam.is_away(t));
        // Capacity awareness checks for misfits on every busy CPU's tick, as
        // the kernel's NO_HZ_IDLE ticks every busy CPU.
        let misfit_watch = self.cap.capacity_aware && rq.curr.is_some();
        cx.want_tick(cpu, self.bal.nr[cpu] >= 2 || away || misfit_watch);
    }

    fn idlest(&mut self, cx: &Ctx, t: TaskId) -> CpuId {
        self.bal.idlest(cx, t)
    }
}

impl FairQueues for Cfs {
    fn bal(&self) -> &Balancer {
        &self.bal
    }

    fn bal_mut(&mut self) -> &mut Balancer {
        &mut self.bal
    }

    fn for_each_movable(&self, cpu: CpuId, mut f: impl FnMut(TaskId)) {
        for (_, t) in self.rqs[cpu].timeline.iter() {
            f(t);
        }
    }

    fn weight(&self, t: TaskId) -> u64 {
        self.se[t].weight
    }

    fn last_run(&self, t: TaskId) -> SimTime {
        self.se[t].last_run
    }

    /// Move queued task `t` from `src` to `dst`.
    fn move_queued(&mut self, cx: &mut Ctx, t: TaskId, src: CpuId, dst: CpuId) {
        self.remove(t, src);
        self.renormalise(t, dst);
        self.insert(t, dst);
        self.cap.est_enqueue(cx, t, dst);
        cx.migrate(t, dst);
        self.sync_tick(cx, src);
        self.sync_tick(cx, dst);
    }
}

impl Scheduler for Cfs {
    fn name(&self) -> &str {
        &self.name
    }

    fn init(&mut self, cx: &mut Ctx) {
        let who = self.name.clone();
        self.cap.start(cx, &who, false);
    }

    fn select_cpu(
        &mut self,
        cx: &mut Ctx,
        t: TaskId,
        prev: Option<CpuId>,
        flags: EnqFlags,
    ) -> CpuId {
        let aff = cx.task(t).affinity.clone();
        let prev_ok = prev.filter(|&p| aff.contains(p) && cx.online(p));
        if self.pinned {
            return prev_ok.unwrap_or_else(|| self.idlest(cx, t));
        }
        if self.cap.eas && flags == EnqFlags::Wakeup {
            if let Some(c) = self.cap.find_energy_efficient_cpu(cx, t, prev_ok) {
                return c;
            }
        }
        if self.cap.capacity_aware && matches!(flags, EnqFlags::New | EnqFlags::Wakeup) {
            let start = prev_ok.unwrap_or(0);
            if let Some(c) = self
                .cap
                .select_idle_capacity(cx, t, start, &self.bal.idle, |c| self.is_idle(cx, c))
            {
                return c;
            }
        }
        self.bal.place(cx, t, prev_ok, flags)
    }

    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, flags: EnqFlags) {
        let now = cx.now;
        let weight = cx.task(t).weight as u64;
        self.update_curr(cpu, now);
        let first = {
            let se = self.se_mut(t);
            se.weight = weight;
            let first = !se.seen;
            if first {
                se.seen = true;
                se.frame = cpu;
            }
            first
        };
        if self.cap.track {
            // Untracked, the load record is never read: not touched either.
            self.cap.first_seen(cx, t, cpu);
        }
        self.renormalise(t, cpu);
        if self.cap.track && !first {
            self.cap.update(cx, t, cpu, Since::at_enqueue(flags));
        }
        self.cap.est_enqueue(cx, t, cpu);
        let min_vr = self.rqs[cpu].min_vruntime;
        match flags {
            EnqFlags::New => {
                // START_DEBIT: a new task starts one virtual slice behind.
                let vslice = calc_delta_fair(self.sched_slice(cpu, t), weight);
                let se = &mut self.se[t];
                se.vruntime = if first {
                    min_vr + vslice
                } else {
                    se.vruntime.max(min_vr + vslice)
                };
            }
            EnqFlags::Wakeup => {
                // GENTLE_FAIR_SLEEPERS: credit at most half a latency.
                let floor = min_vr.saturating_sub(self.latency / 2);
                let se = &mut self.se[t];
                se.vruntime = se.vruntime.max(floor);
            }
            _ => {}
        }
        self.insert(t, cpu);
        if matches!(flags, EnqFlags::New | EnqFlags::Wakeup) {
            if let Some(curr) = self.rqs[cpu].curr {
                let rule = crate::os::SchedPolicy::fair_wakeup_rule(
                    cx.task(t).sched.policy,
                    cx.task(curr).sched.policy,
                );
                // check_preempt_wakeup with the waking task's weighted granularity.
                let gran = calc_delta_fair(self.wakeup_gran, weight);
                let (cv, pv) = (self.se[curr].vruntime, self.se[t].vruntime);
                if rule.unwrap_or(cv > pv && cv - pv > gran) {
                    cx.resched(cpu);
                }
            }
        }
        self.sync_tick(cx, cpu);
    }

    fn dequeue(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId) {
        if self.se.get(t).is_some_and(|s| s.queued) {
            self.remove(t, cpu);
        }
        self.sync_tick(cx, cpu);
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: CpuId) -> Option<TaskId> {
        let Some((_, t)) = self.rqs[cpu].timeline.pop_first() else {
            self.cap.cpu_idle(cx, cpu);
            return None;
        };
        let now = cx.now;
        {
            let se = &mut self.se[t];
            se.queued = false;
            se.exec_start = now;
            se.prev_sum_exec = se.sum_exec;
        }
        self.rqs[cpu].curr = Some(t);
        self.update_min_vruntime(cpu);
        if self.cap.track {
            self.cap.update(cx, t, cpu, Since::Waited); // it waited, runnable, until now
        }
        self.sync_tick(cx, cpu);
        Some(t)
    }

    fn balance(&mut self, cx: &mut Ctx, cpu: CpuId) {
        fair::newidle_balance(self, cx, cpu);
    }

    fn read_ahead(&self, t: Option<TaskId>, cpu: Option<CpuId>) -> Option<TaskId> {
        // The event's task, and the queue's leftmost: the likely next pick.
        let next = cpu.and_then(|c| {
            self.rqs
                .get(c)
                .and_then(|rq| rq.timeline.first())
                .map(|(_, t)| t)
        });
        for t in [t, next].into_iter().flatten() {
            if let Some(se) = self.se.get(t) {
                crate::prefetch::lines(se, std::mem::size_of::<Se>());
            }
        }
        next
    }

    fn task_load(&self, t: TaskId) -> Option<super::TaskLoad> {
        self.cap.task_load(t)
    }

    fn running(&mut self, cx: &mut Ctx, _t: TaskId, cpu: CpuId) {
        self.bal.touch(cpu); // busy now: `idlest` re-keys it
        self.cap.cpu_run(cx, cpu);
    }

    fn stopping(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, runnable: bool) {
        self.bal.touch(cpu);
        let now = cx.now;
        self.update_curr(cpu, now);
        if runnable {
            if self.cap.track {
                self.cap.update(cx, t, cpu, Since::Ran);
            }
        } else {
            self.cap.sleep(cx, t, cpu);
        }
        let w = self.se[t].weight;
        let rq = &mut self.rqs[cpu];
        debug_assert_eq!(rq.curr, Some(t));
        rq.curr = None;
        self.bal.sub(cpu, w);
        self.se[t].last_run = now;
        self.update_min_vruntime(cpu);
        self.sync_tick(cx, cpu);
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: CpuId, t: TaskId) {
        self.update_curr(cpu, cx.now);
        if self.rqs[cpu].curr != Some(t) {
            return;
        }
        if self.cap.track {
            self.cap.update(cx, t, cpu, Since::Ran);
        }
        if self.cap.capacity_aware {
            // Misfit: the task no longer fits this CPU.
            if let Some(dst) = self
                .cap
                .misfit_target(cx, t, cpu, &self.bal.idle, |c| self.is_idle(cx, c))
            {
                cx.migrate(t, dst);
                return;
            }
        }
        if self.bal.nr[cpu] >= 2 {
            // check_preempt_tick
            let ideal = self.sched_slice(cpu, t);
            let se = &self.se[t];
            let delta_exec = se.sum_exec - se.prev_sum_exec;
            if delta_exec > ideal {
                cx.resched(cpu);
            } else if delta_exec >= self.min_gran {
                if let Some((lv, _)) = self.rqs[cpu].timeline.first() {
                    if se.vruntime > lv && se.vruntime - lv > ideal {
                        cx.resched(cpu);
                    }
                }
            }
        }
        if self.fam.is_away(t) {
            if let Some((original, home)) = self.fam.tick(cx, t, cpu) {
                // Migrate back (policy 1 or 2): restore the affinity and move
                // to the least loaded CPU of the original type.
                cx.set_affinity(t, original);
                let dst = home.iter().copied().min_by_key(|&c| (self.bal.load[c], c));
                if let Some(dst) = dst {
                    cx.migrate(t, dst);
                }
                self.sync_tick(cx, cpu);
                return;
            }
        }
        if self.bal.balance {
            fair::tick_balance(self, cx, cpu);
        }
    }

    fn on_fault(&mut self, cx: &mut Ctx, t: TaskId, cpu: CpuId, feature: usize) -> bool {
        let handled = self.fam.on_fault(cx, t, cpu, feature);
        if handled {
            self.sync_tick(cx, cpu);
        }
        handled
    }

    /// An exited task's utilisation leaves its runqueue's average.
    fn task_dead(&mut self, cx: &mut Ctx, t: TaskId) {
        self.cap.task_dead(cx, t);
    }

    fn reweight(&mut self, cx: &mut Ctx, t: TaskId, _old: u32) {
        // The new weight is read at the next enqueue; adjust a queued or
        // running task's contribution now.
        if t >= self.se.len() {
            return;
        }
        let new_w = cx.task(t).weight as u64;
        let se = &self.se[t];
        let cpu = cx.task(t).cpu;
        let counted = se.queued || self.rqs[cpu].curr == Some(t);
        if counted {
            let old_w = se.weight;
            self.bal.reweight(cpu, old_w, new_w);
        }
        self.se[t].weight = new_w;
    }
}
