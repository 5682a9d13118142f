//! Work conservation, measured for every policy: per CPU, the time it was
//! online and idle while at least one runnable task (queued, not running)
//! whose affinity allows that CPU waited.
//!
//! Kept incrementally at the events that change it (a task becomes or stops
//! being runnable, a CPU starts or stops running a task, goes on- or
//! offline, a waiting task's affinity changes), never by scanning every CPU
//! at every event:
//! * tasks whose affinity holds every CPU ("full") are counted; a clock `w`
//!   advances with time while the count is above zero, and a CPU that is
//!   idle and online accrues the advance of `w` since it became so, which
//!   is O(1) per change;
//! * tasks with a restricted affinity are counted per CPU they allow
//!   (O(CPUs in the affinity) per change), and a CPU idle with only such
//!   waiters accrues its own interval; only when the full count crosses
//!   zero are those intervals opened or closed on every CPU, and only while
//!   restricted waiters exist.
//!
//! Tasks inside virtual machines wait for vCPUs, not for host CPUs, and are
//! not counted.

use super::Engine;
use crate::hw::CpuId;
use crate::os::{CpuSet, TaskId, TaskState};
use crate::time::SimTime;

/// `PerCpu::idle_w` of a CPU that is busy or offline.
const BUSY: u64 = u64::MAX;

/// The counters of one CPU, together so that an event touching a CPU
/// checks one index.
#[derive(Clone, Debug)]
struct PerCpu {
    /// `w` when it became idle and online ([`BUSY`]: busy or offline).
    idle_w: u64,
    /// Accrued time, ns.
    acc: u64,
    /// Runnable restricted tasks that allow it.
    rc: u32,
    /// Start of an interval idle, online, with `full == 0` and `rc > 0`.
    r_since: Option<SimTime>,
}

/// The counters (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct IdleWait {
    /// Runnable tasks with a full affinity.
    full: u32,
    /// Runnable tasks with a restricted affinity.
    restricted: u32,
    /// Time with `full > 0`, ns, up to `last`.
    w: u64,
    last: SimTime,
    /// Per CPU.
    cpu: Vec<PerCpu>,
}

impl IdleWait {
    /// Every CPU idle and online, no task waiting.
    pub(crate) fn new(ncpus: usize) -> IdleWait {
        let c = PerCpu {
            idle_w: 0,
            acc: 0,
            rc: 0,
            r_since: None,
        };
        IdleWait {
            cpu: vec![c; ncpus],
            ..IdleWait::default()
        }
    }

    /// `w` as of `now`.
    #[inline]
    fn w_at(&self, now: SimTime) -> u64 {
        if self.full > 0 {
            self.w + now.0.saturating_sub(self.last.0)
        } else {
            self.w
        }
    }

    #[inline]
    fn advance(&mut self, now: SimTime) {
        self.w = self.w_at(now);
        self.last = now;
    }

    fn close_r(&mut self, c: CpuId, now: SimTime) {
        let pc = &mut self.cpu[c];
        if let Some(s) = pc.r_since.take() {
            pc.acc += now.0 - s.0;
        }
    }

    /// Time accrued by `cpu` up to `now` (no state change).
    pub(crate) fn total_ns(&self, cpu: CpuId, now: SimTime) -> u64 {
        let w = self.w_at(now);
        let pc = &self.cpu[cpu];
        let open_w = if pc.idle_w == BUSY { 0 } else { w - pc.idle_w };
        let open_r = pc.r_since.map_or(0, |s| now.0.saturating_sub(s.0));
        pc.acc + open_w + open_r
    }
}

/// One more (`add`) or one fewer waiting task.
#[inline]
fn count(n: &mut u32, add: bool) {
    if add {
        *n += 1;
    } else {
        *n -= 1;
    }
}

/// Whether a set holds every CPU of an `n`-CPU machine.
fn is_full(aff: &CpuSet, n: usize) -> bool {
    match aff {
        CpuSet::All => true,
        CpuSet::Mask(_) => (0..n).all(|c| aff.contains(c)),
    }
}

impl Engine {
    /// Task `t` starts (`+1`) or stops (`-1`) waiting with affinity `aff`.
    #[inline(never)]
    fn iw_task(&mut self, t: TaskId, add: bool) {
        if self.is_guest(t) {
            return;
        }
        let now = self.now;
        let n = self.m.ncpus();
        let iw = &mut self.iw;
        iw.advance(now);
        let aff = &self.tasks[t].affinity;
        if is_full(aff, n) {
            let was = iw.full;
            count(&mut iw.full, add);
            // Crossing zero hands idle CPUs with restricted waiters from
            // their own intervals to the shared clock, or back.
            if iw.restricted > 0 && (was == 0) != (iw.full == 0) {
                for c in 0..n {
                    if iw.full > 0 {
                        iw.close_r(c, now);
                    } else if iw.cpu[c].idle_w != BUSY && iw.cpu[c].rc > 0 {
                        iw.cpu[c].r_since = Some(now);
                    }
                }
            }
            return;
        }
        count(&mut iw.restricted, add);
        for c in (0..n).filter(|&c| aff.contains(c)) {
            let full = iw.full;
            let pc = &mut iw.cpu[c];
            if add {
                pc.rc += 1;
                if pc.rc == 1 && full == 0 && pc.idle_w != BUSY {
                    pc.r_since = Some(now);
                }
            } else {
                pc.rc -= 1;
                if pc.rc == 0 {
                    iw.close_r(c, now);
                }
            }
        }
    }

    /// A task's state changes from `old` to `new`. The common case (a host
    /// task that may run anywhere, and no waiting task with a restricted
    /// affinity, so no CPU has an interval of its own) is a counter and a
    /// clock updated in place.
    #[inline(always)]
    pub(super) fn iw_state(&mut self, t: TaskId, old: TaskState, new: TaskState) {
        let add = if old == new {
            return;
        } else if old == TaskState::Runnable {
            false
        } else if new == TaskState::Runnable {
            true
        } else {
            return;
        };
        if self.iw.restricted == 0
            && matches!(self.tasks[t].affinity, CpuSet::All)
            && !self.is_guest(t)
        {
            // The clock `w` only changes pace when `full` crosses zero; in
            // between, `w_at` reads it from `last`, so it is brought up to
            // date only at a crossing.
            let now = self.now;
            let iw = &mut self.iw;
            if add {
                if iw.full == 0 {
                    iw.last = now;
                }
                iw.full += 1;
            } else {
                if iw.full == 1 {
                    iw.w += now.0.saturating_sub(iw.last.0);
                    iw.last = now;
                }
                iw.full -= 1;
            }
            return;
        }
        self.iw_task(t, add);
    }

    /// A waiting task's affinity is about to change (`before`) or has
    /// changed.
    pub(super) fn iw_affinity(&mut self, t: TaskId, before: bool) {
        if self.tasks[t].state == TaskState::Runnable {
            self.iw_task(t, !before);
        }
    }

    /// `cpu`'s busy or online state may have changed.
    #[inline(always)]
    pub(super) fn iw_cpu(&mut self, cpu: CpuId) {
        let idle = self.hv.current[cpu].is_none() && self.hv.online[cpu];
        let now = self.now;
        let iw = &mut self.iw;
        let full = iw.full;
        let restricted = iw.restricted;
        let w = iw.w_at(now);
        let pc = &mut iw.cpu[cpu];
        let m = pc.idle_w;
        if idle == (m != BUSY) {
            return;
        }
        iw.w = w;
        iw.last = now;
        // Without restricted waiters no CPU has an interval of its own.
        if idle {
            pc.idle_w = w;
            if restricted > 0 && full == 0 && pc.rc > 0 {
                pc.r_since = Some(now);
            }
        } else {
            pc.idle_w = BUSY;
            pc.acc += w - m;
            if restricted > 0 {
                iw.close_r(cpu, now);
            }
        }
    }

    /// CPU-time `cpu` sat idle while a task that may run there waited, s.
    pub fn idle_while_runnable_s(&self, cpu: CpuId) -> f64 {
        self.iw.total_ns(cpu, self.now) as f64 * 1e-9
    }
}
