//! The floor of each part of the engine's work on the standard scenario:
//! `cargo bench -p hetsched-core --bench floors -- [SECONDS] [wheel|heap]`.
//!
//! `bench/standard.toml` (64 CPUs, 2 000 threads computing 2 ms and
//! sleeping 30 ms, each ±50 %, under CFS) is simulated here by the least
//! code that still does each part's work: the same event queue type as the
//! engine's ([`EventQueue`]; `heap` swaps in a plain binary heap of the same
//! keys), CFS's vruntime arithmetic, sorted per-CPU timelines, wake-up
//! preemption, tick preemption (`check_preempt_tick`), wake-up placement
//! (previous CPU if idle, else the first idle CPU of its LLC, else the
//! previous), periodic balancing on the busy CPUs' ticks (the `smp-64`
//! preset's domains of 8, 32 and 64 CPUs, each every span-in-ms × 16 ms, as
//! `cfs` sets them: the least loaded CPU of the span gets one queued thread
//! when the two differ by two or more), a thread's program as phases with
//! the engine's jitter draw, and each CPU's accounting (remaining work, busy
//! time, energy).
//!
//! Left out, on purpose: everything a run reports (per-task counters,
//! wake-up latencies, idle-while-runnable time, the trace hash: measured
//! apart in `docs/performance.md`), the policy interface (contexts, dynamic
//! calls, request lists, the engine's checks on the policy's answers),
//! heterogeneous speeds, DVFS and SMT, nice values (every weight is
//! NICE_0's), and the balancing's finer rules (groups of CPUs compared by
//! load, cache-hot tasks, failed-balance counts, idle CPUs pulled for).
//!
//! Each part is a function of its own that is never inlined (but the queue's
//! pop, which the engine inlines into its loop as well), so that
//! `valgrind --tool=callgrind` gives each part's instructions (a function's
//! own count is the part's cost; `bench/floors.py` groups and divides them).
//! Prints one JSON object: events, their kinds, and a checksum of the run
//! (so that the work cannot be optimised away and two builds can be compared).

use hetsched_core::sim::queue::{EventClass, EventQueue};
use hetsched_core::SimTime;
use rand::distributions::{Distribution, Uniform};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const NCPU: usize = 64;
const NTHREADS: usize = 2000;
const COMPUTE_NS: f64 = 2e6;
const SLEEP_NS: f64 = 30e6;
const JITTER: f64 = 0.5;
/// HZ = 250, as the engine's default.
const TICK_NS: u64 = 4_000_000;
/// CFS's tunables at 64 CPUs: 6 ms, 0.75 ms and 1 ms × (1 + log2(8)).
const LATENCY: u64 = 24_000_000;
const MIN_GRAN: u64 = 3_000_000;
const WAKEUP_GRAN: u64 = 4_000_000;
/// Watts of a busy and an idle CPU (any values: the floor is the arithmetic).
const P_BUSY: f64 = 2.0;
const P_IDLE: f64 = 0.2;
/// The `smp-64` preset: LLCs of 8 CPUs, nodes of 32.
const LLC: usize = 8;
/// The balancing domains' spans, and `cfs`'s default `busy_factor`.
const SPANS: [usize; 3] = [8, 32, 64];
const BUSY_FACTOR: u64 = 16;

#[derive(Copy, Clone)]
enum Ev {
    Wake(u32),
    Complete(u32, u32),
    Tick(u32, u32),
}

/// The event queue under test: the engine's timing wheel, or a binary heap
/// of the same `(time, class, sequence)` keys. The wheel is held inline, as
/// the engine holds it: boxing it would add an indirection the engine does
/// not pay.
#[allow(clippy::large_enum_variant)]
enum Queue {
    Wheel(EventQueue<Ev>),
    Heap(BinaryHeap<Reverse<(u128, u32, u32, u8)>>, u64),
}

#[inline(never)]
fn q_push(q: &mut Queue, time: u64, class: EventClass, ev: Ev) {
    match q {
        Queue::Wheel(w) => w.push(SimTime(time), class, ev),
        Queue::Heap(h, seq) => {
            let key = (time as u128) << 64 | (class as u128) << 56 | *seq as u128;
            *seq += 1;
            let (a, b, k) = match ev {
                Ev::Wake(t) => (t, 0, 0),
                Ev::Complete(c, g) => (c, g, 1),
                Ev::Tick(c, g) => (c, g, 2),
            };
            h.push(Reverse((key, a, b, k)));
        }
    }
}

#[inline(always)]
fn q_pop(q: &mut Queue) -> Option<(u64, Ev)> {
    match q {
        Queue::Wheel(w) => w.pop().map(|(t, _, e)| (t.0, e)),
        Queue::Heap(h, _) => h.pop().map(|Reverse((key, a, b, k))| {
            let ev = match k {
                0 => Ev::Wake(a),
                1 => Ev::Complete(a, b),
                _ => Ev::Tick(a, b),
            };
            ((key >> 64) as u64, ev)
        }),
    }
}

#[derive(Clone, Copy, Default)]
struct Thread {
    vruntime: u64,
    exec_start: u64,
    sum_exec: u64,
    prev_sum_exec: u64,
    /// Work left in the current compute phase, ns at speed 1.
    remaining: u64,
    /// The CPU whose min_vruntime the vruntime is relative to.
    cpu: u32,
}

#[derive(Default)]
struct Cpu {
    curr: Option<u32>,
    /// Descending by (vruntime, thread): the leftmost is the last.
    timeline: Vec<(u64, u32)>,
    min_vruntime: u64,
    /// Tasks counted on this CPU: queued and running.
    nr: u32,
    since: u64,
    completion_gen: u32,
    tick_gen: u32,
    tick_armed: bool,
    next_balance: [u64; 3],
    busy_ns: u64,
    energy: f64,
}

struct Sim {
    q: Queue,
    th: Vec<Thread>,
    cpus: Vec<Cpu>,
    idle: u64,
    rng: Pcg64Mcg,
    jitter: Uniform<f64>,
    now: u64,
    /// Idle CPUs that balancing gave a thread: they pick at once.
    kicked: Vec<usize>,
    /// Threads moved by balancing (periodic and on going idle).
    moved: u64,
}

// ------------------------------------------------------------ thread programs

/// The next phase's length: the engine's jitter draw, `x (1 + U[-j, j])`.
#[inline(never)]
fn program_next(s: &mut Sim, base: f64) -> u64 {
    let x = base * (1.0 + s.jitter.sample(&mut s.rng));
    x as u64
}

// ------------------------------------------------------------ CPU accounting

/// Bring the running thread's work and the CPU's energy up to `now`.
#[inline(never)]
fn acct_sync(s: &mut Sim, cpu: usize) {
    let now = s.now;
    let c = &mut s.cpus[cpu];
    let dt = now - c.since;
    c.since = now;
    if let Some(t) = c.curr {
        let th = &mut s.th[t as usize];
        th.remaining = th.remaining.saturating_sub(dt);
        c.busy_ns += dt;
        c.energy += dt as f64 * P_BUSY;
    } else {
        c.energy += dt as f64 * P_IDLE;
    }
}

/// Plan the running thread's completion: the time its work ends.
#[inline(never)]
fn acct_plan(s: &mut Sim, cpu: usize) -> (u64, u32) {
    let c = &mut s.cpus[cpu];
    c.completion_gen = c.completion_gen.wrapping_add(1);
    let t = c.curr.expect("planned CPU runs a thread");
    (s.now + s.th[t as usize].remaining, c.completion_gen)
}

// ------------------------------------------------------------ CFS

#[inline(always)]
fn update_min_vruntime(c: &mut Cpu, th: &[Thread]) {
    let curr = c.curr.map_or(u64::MAX, |t| th[t as usize].vruntime);
    let left = c.timeline.last().map_or(u64::MAX, |e| e.0);
    let v = curr.min(left);
    if v != u64::MAX && v > c.min_vruntime {
        c.min_vruntime = v;
    }
}

#[inline(never)]
fn cfs_update_curr(s: &mut Sim, cpu: usize) {
    let c = &mut s.cpus[cpu];
    let Some(t) = c.curr else { return };
    let th = &mut s.th[t as usize];
    let delta = s.now - th.exec_start;
    if delta == 0 {
        return;
    }
    th.exec_start = s.now;
    th.sum_exec += delta;
    th.vruntime += delta; // nice 0: NICE_0_LOAD / weight = 1
    update_min_vruntime(c, &s.th);
}

/// `sched_slice()` with every task at nice 0.
#[inline(always)]
fn sched_slice(nr: u64) -> u64 {
    let nr_latency = LATENCY / MIN_GRAN;
    let period = if nr > nr_latency {
        nr * MIN_GRAN
    } else {
        LATENCY
    };
    period / nr.max(1)
}

#[inline(never)]
fn cfs_select(s: &Sim, t: u32) -> usize {
    let prev = s.th[t as usize].cpu as usize;
    if s.idle & (1 << prev) != 0 || s.idle == 0 {
        return prev;
    }
    // select_idle_sibling: the first idle CPU of prev's LLC after prev,
    // cyclically, else prev.
    let base = prev / LLC * LLC;
    let llc = (s.idle >> base) & ((1 << LLC) - 1);
    if llc == 0 {
        return prev;
    }
    let above = llc & !((2u64 << (prev - base)) - 1);
    let pick = if above != 0 { above } else { llc };
    base + pick.trailing_zeros() as usize
}

/// Enqueue a waking thread; true if it preempts the running one.
#[inline(never)]
fn cfs_enqueue_wakeup(s: &mut Sim, t: u32, cpu: usize) -> bool {
    cfs_update_curr(s, cpu);
    // Migration: the vruntime moves into this CPU's frame.
    let from = s.th[t as usize].cpu as usize;
    if from != cpu {
        let (old_min, new_min) = (s.cpus[from].min_vruntime, s.cpus[cpu].min_vruntime);
        let th = &mut s.th[t as usize];
        th.vruntime = th.vruntime.saturating_sub(old_min) + new_min;
        th.cpu = cpu as u32;
    }
    let c = &mut s.cpus[cpu];
    let th = &mut s.th[t as usize];
    // GENTLE_FAIR_SLEEPERS: credit at most half a latency.
    th.vruntime = th.vruntime.max(c.min_vruntime.saturating_sub(LATENCY / 2));
    let key = (th.vruntime, t);
    let at = c.timeline.partition_point(|e| *e > key);
    c.timeline.insert(at, key);
    c.nr += 1;
    match c.curr {
        Some(curr) => {
            let cv = s.th[curr as usize].vruntime;
            cv > key.0 && cv - key.0 > WAKEUP_GRAN
        }
        None => false,
    }
}

/// Put the running thread back in the queue (preempted), or let it go.
#[inline(never)]
fn cfs_stopping(s: &mut Sim, cpu: usize, runnable: bool) {
    cfs_update_curr(s, cpu);
    let c = &mut s.cpus[cpu];
    let t = c.curr.take().expect("a running thread");
    let th = &s.th[t as usize];
    if runnable {
        let key = (th.vruntime, t);
        let at = c.timeline.partition_point(|e| *e > key);
        c.timeline.insert(at, key);
    } else {
        c.nr -= 1;
    }
    update_min_vruntime(c, &s.th);
}

#[inline(never)]
fn cfs_pick(s: &mut Sim, cpu: usize) -> Option<u32> {
    let c = &mut s.cpus[cpu];
    let (_, t) = c.timeline.pop()?;
    c.curr = Some(t);
    let th = &mut s.th[t as usize];
    th.exec_start = s.now;
    th.prev_sum_exec = th.sum_exec;
    update_min_vruntime(c, &s.th);
    Some(t)
}

/// `check_preempt_tick`: true if the running thread has had its slice.
#[inline(never)]
fn cfs_tick(s: &mut Sim, cpu: usize) -> bool {
    cfs_update_curr(s, cpu);
    let c = &s.cpus[cpu];
    let Some(t) = c.curr else { return false };
    if c.nr < 2 {
        return false;
    }
    let ideal = sched_slice(c.nr as u64);
    let th = &s.th[t as usize];
    let delta_exec = th.sum_exec - th.prev_sum_exec;
    if delta_exec > ideal {
        return true;
    }
    if delta_exec >= MIN_GRAN {
        if let Some(&(lv, _)) = c.timeline.last() {
            return th.vruntime > lv && th.vruntime - lv > ideal;
        }
    }
    false
}

/// An idle CPU pulls the first queued thread of the busiest CPU.
#[inline(never)]
fn cfs_newidle(s: &mut Sim, cpu: usize) -> bool {
    let (mut best, mut most) = (usize::MAX, 1);
    for (i, c) in s.cpus.iter().enumerate() {
        if c.nr as usize > most && !c.timeline.is_empty() {
            (best, most) = (i, c.nr as usize);
        }
    }
    if best == usize::MAX {
        return false;
    }
    move_queued(s, best, cpu);
    true
}

/// Move `src`'s least urgent queued thread (its largest vruntime) to `dst`,
/// its vruntime moved into `dst`'s frame.
fn move_queued(s: &mut Sim, src: usize, dst: usize) {
    let (v, t) = s.cpus[src].timeline.remove(0);
    s.cpus[src].nr -= 1;
    let src_min = s.cpus[src].min_vruntime;
    let d = &mut s.cpus[dst];
    let v = v.saturating_sub(src_min) + d.min_vruntime;
    s.th[t as usize].vruntime = v;
    s.th[t as usize].cpu = dst as u32;
    let at = d.timeline.partition_point(|e| *e > (v, t));
    d.timeline.insert(at, (v, t));
    d.nr += 1;
    s.moved += 1;
}

/// Periodic balancing on `cpu`'s tick: in each domain whose interval has
/// passed, the least loaded CPU of the span gets `cpu`'s least urgent queued
/// thread if the two differ by two threads or more.
#[inline(never)]
fn cfs_balance(s: &mut Sim, cpu: usize) {
    for (li, &span) in SPANS.iter().enumerate() {
        if s.now < s.cpus[cpu].next_balance[li] {
            continue;
        }
        s.cpus[cpu].next_balance[li] = s.now + span as u64 * 1_000_000 * BUSY_FACTOR;
        let base = cpu / span * span;
        let (mut dst, mut least) = (cpu, s.cpus[cpu].nr);
        for (i, c) in s.cpus[base..base + span].iter().enumerate() {
            if c.nr < least {
                (dst, least) = (base + i, c.nr);
            }
        }
        if s.cpus[cpu].nr < least + 2 || s.cpus[cpu].timeline.is_empty() {
            continue;
        }
        move_queued(s, cpu, dst);
        if s.cpus[dst].curr.is_none() {
            s.kicked.push(dst);
        }
        return;
    }
}

// ------------------------------------------------------------ the loop

/// Run the next thread on `cpu`, or leave it idle.
fn schedule(s: &mut Sim, cpu: usize) {
    let mut next = cfs_pick(s, cpu);
    if next.is_none() && cfs_newidle(s, cpu) {
        next = cfs_pick(s, cpu);
    }
    match next {
        Some(_) => {
            s.idle &= !(1 << cpu);
            let (at, gen) = acct_plan(s, cpu);
            q_push(
                &mut s.q,
                at,
                EventClass::Completion,
                Ev::Complete(cpu as u32, gen),
            );
            arm_tick(s, cpu);
        }
        None => s.idle |= 1 << cpu,
    }
}

fn arm_tick(s: &mut Sim, cpu: usize) {
    let c = &mut s.cpus[cpu];
    if c.nr >= 2 && !c.tick_armed {
        c.tick_armed = true;
        c.tick_gen = c.tick_gen.wrapping_add(1);
        let at = (s.now / TICK_NS + 1) * TICK_NS;
        let g = c.tick_gen;
        q_push(&mut s.q, at, EventClass::Tick, Ev::Tick(cpu as u32, g));
    }
}

fn preempt(s: &mut Sim, cpu: usize) {
    acct_sync(s, cpu);
    cfs_stopping(s, cpu, true);
    schedule(s, cpu);
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let seconds: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let heap = args.get(1).is_some_and(|a| a == "heap");
    let end = (seconds * 1e9) as u64;
    let mut s = Sim {
        q: if heap {
            Queue::Heap(BinaryHeap::new(), 0)
        } else {
            Queue::Wheel(EventQueue::new())
        },
        th: vec![Thread::default(); NTHREADS],
        cpus: (0..NCPU).map(|_| Cpu::default()).collect(),
        idle: u64::MAX,
        rng: Pcg64Mcg::seed_from_u64(1),
        jitter: Uniform::new_inclusive(-JITTER, JITTER),
        now: 0,
        kicked: Vec::new(),
        moved: 0,
    };
    // Start: every thread runnable at 0, spread over the CPUs.
    for t in 0..NTHREADS {
        s.th[t].cpu = (t % NCPU) as u32;
        s.th[t].remaining = program_next(&mut s, COMPUTE_NS);
        q_push(&mut s.q, 0, EventClass::Wake, Ev::Wake(t as u32));
    }
    let (mut wakes, mut completions, mut ticks, mut stale) = (0u64, 0u64, 0u64, 0u64);
    let (mut wake_preempts, mut tick_preempts) = (0u64, 0u64);
    while let Some((at, ev)) = q_pop(&mut s.q) {
        if at > end {
            break;
        }
        s.now = at;
        match ev {
            Ev::Wake(t) => {
                wakes += 1;
                let cpu = cfs_select(&s, t);
                acct_sync(&mut s, cpu);
                let preempts = cfs_enqueue_wakeup(&mut s, t, cpu);
                if s.cpus[cpu].curr.is_none() {
                    schedule(&mut s, cpu);
                } else if preempts {
                    wake_preempts += 1;
                    preempt(&mut s, cpu);
                } else {
                    arm_tick(&mut s, cpu);
                }
            }
            Ev::Complete(cpu, gen) => {
                let cpu = cpu as usize;
                if s.cpus[cpu].completion_gen != gen || s.cpus[cpu].curr.is_none() {
                    stale += 1;
                    continue;
                }
                completions += 1;
                acct_sync(&mut s, cpu);
                let t = s.cpus[cpu].curr.expect("checked") as usize;
                cfs_stopping(&mut s, cpu, false);
                let sleep = program_next(&mut s, SLEEP_NS);
                s.th[t].remaining = program_next(&mut s, COMPUTE_NS);
                q_push(&mut s.q, at + sleep, EventClass::Wake, Ev::Wake(t as u32));
                schedule(&mut s, cpu);
            }
            Ev::Tick(cpu, gen) => {
                let cpu = cpu as usize;
                if s.cpus[cpu].tick_gen != gen || !s.cpus[cpu].tick_armed {
                    stale += 1;
                    continue;
                }
                ticks += 1;
                s.cpus[cpu].tick_armed = false;
                acct_sync(&mut s, cpu);
                let resched = cfs_tick(&mut s, cpu);
                if s.cpus[cpu].nr >= 2 {
                    cfs_balance(&mut s, cpu);
                    while let Some(k) = s.kicked.pop() {
                        acct_sync(&mut s, k);
                        schedule(&mut s, k);
                    }
                }
                if resched {
                    tick_preempts += 1;
                    preempt(&mut s, cpu);
                } else {
                    arm_tick(&mut s, cpu);
                }
            }
        }
    }
    let busy: u64 = s.cpus.iter().map(|c| c.busy_ns).sum();
    let energy: f64 = s.cpus.iter().map(|c| c.energy).sum();
    let events = wakes + completions + ticks + stale;
    println!(
        "{{\"events\": {events}, \"wakes\": {wakes}, \"completions\": {completions}, \
         \"ticks\": {ticks}, \"stale\": {stale}, \"wake_preempts\": {wake_preempts}, \"tick_preempts\": {tick_preempts}, \"moved\": {}, \"busy_s\": {:.6}, \"energy_j\": {:.6}, \
         \"queue\": \"{}\"}}",
        s.moved,
        busy as f64 / 1e9,
        energy / 1e9,
        if heap { "heap" } else { "wheel" }
    );
}
