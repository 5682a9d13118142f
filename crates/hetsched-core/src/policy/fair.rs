//! What Linux's fair-class models share: the per-CPU counts that placement
//! and balancing read, wake-up placement (`select_idle_sibling`,
//! `find_idlest_cpu`), and load balancing (newidle, nohz idle and periodic
//! balancing over the scheduling domains SMT → LLC → node → system).
//!
//! `cfs` (the pre-6.6 fair class) and `eevdf` (6.6 and later) differ in how
//! they order and pick the tasks of one runqueue, not in how the kernel moves
//! tasks between runqueues: both use this module. A scheduler keeps its own
//! runqueues and tells the [`Balancer`] when a task starts or stops counting
//! on a CPU ([`Balancer::add`], [`Balancer::sub`]); balancing asks it, through
//! [`FairQueues`], which queued tasks may move and moves them.
//!
//! The balancing rules are documented in `cfs.rs` (module doc) and in
//! `docs/policies.md`. What the rules compute does not depend on how: the
//! busiest overloaded CPU of a span, the idle CPUs of a span and the least
//! loaded CPU come from indexes kept with the counts (`BusiestTree`, the
//! idle mask, `IdlestIndex`) so that their cost does not grow with the
//! machine, and debug builds check each against the scan it replaces.
//! Load tracking (PELT, util_est), capacity awareness, misfit migration and
//! EAS, also shared, are in [`cap`].

use super::{Ctx, EnqFlags};
use crate::hw::{CpuId, Machine};

pub(in crate::policy) mod cap;
pub(in crate::policy) mod pelt;
use crate::os::TaskId;
use crate::time::SimTime;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Weight of a nice-0 task.
pub(super) const NICE_0_LOAD: u64 = 1024;

/// `a × b / c` without overflow, in 64-bit arithmetic when the product fits
/// (always, in practice) and 128-bit otherwise; the same result either way.
#[inline]
pub(super) fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    match a.checked_mul(b) {
        Some(p) => p / c,
        None => ((a as u128 * b as u128) / c as u128) as u64,
    }
}

/// `delta × 1024 / weight`, the kernel's `calc_delta_fair`.
#[inline]
pub(super) fn calc_delta_fair(delta: u64, weight: u64) -> u64 {
    if weight == NICE_0_LOAD {
        delta
    } else {
        mul_div(delta, NICE_0_LOAD, weight.max(1))
    }
}

/// The kernel's `SCHED_TUNABLESCALING_LOG` factor, `1 + ilog2(min(ncpus, 8))`.
pub(super) fn tunable_scale(m: &Machine) -> u64 {
    1 + (m.ncpus().clamp(1, 8) as u64).ilog2() as u64
}

/// A set of CPUs as a bit mask with its size, for the idle and overloaded
/// sets: O(1) insert, remove, membership and size; iteration in ascending
/// order.
#[derive(Clone, Debug)]
pub(super) struct CpuBits {
    words: Vec<u64>,
    len: usize,
}

impl CpuBits {
    pub(super) fn new(n: usize) -> CpuBits {
        CpuBits {
            words: vec![0; n.div_ceil(64).max(1)],
            len: 0,
        }
    }

    pub(super) fn full(n: usize) -> CpuBits {
        let mut s = CpuBits::new(n);
        for c in 0..n {
            s.insert(c);
        }
        s
    }

    #[cfg(test)]
    pub(super) fn contains(&self, c: CpuId) -> bool {
        self.words[c / 64] & (1u64 << (c % 64)) != 0
    }

    #[inline]
    pub(super) fn insert(&mut self, c: CpuId) {
        let w = &mut self.words[c / 64];
        let bit = 1u64 << (c % 64);
        if *w & bit == 0 {
            *w |= bit;
            self.len += 1;
        }
    }

    #[inline]
    pub(super) fn remove(&mut self, c: CpuId) {
        let w = &mut self.words[c / 64];
        let bit = 1u64 << (c % 64);
        if *w & bit != 0 {
            *w &= !bit;
            self.len -= 1;
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The members in ascending order.
    pub(super) fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        crate::os::set_bits(&self.words)
    }
}

/// A runqueue's timeline: the queued tasks in key order (`cfs`: `(vruntime,
/// task)`; `eevdf`: `(deadline, queued order, task)`).
///
/// Fair-class runqueues are usually short (a few tasks per CPU), where a sorted
/// vector beats any tree: the leftmost task is its last element (the vector
/// is kept in descending order), so picking it is a `pop`, and inserting or
/// removing moves a few entries. Past [`Timeline::SMALL_MAX`] entries it
/// turns into a B-tree (O(log n) whatever the length) and back below
/// [`Timeline::SMALL_BACK`]. Both hold the same set in the same order, so
/// the choice never changes a decision.
#[derive(Clone, Debug)]
pub(super) enum Timeline<K> {
    /// Descending order: the leftmost (smallest) key is last.
    Small(Vec<K>),
    Big(BTreeSet<K>),
}

impl<K> Default for Timeline<K> {
    fn default() -> Self {
        Timeline::Small(Vec::new())
    }
}

impl<K: Ord + Copy> Timeline<K> {
    /// Longest sorted vector; one more entry turns it into a tree (the
    /// vector measured cheaper at 100 and 200 entries, the tree at 800:
    /// docs/eevdf.md).
    const SMALL_MAX: usize = 256;
    /// A tree shorter than this turns back into a vector.
    const SMALL_BACK: usize = 128;

    #[inline]
    pub(super) fn insert(&mut self, key: K) {
        match self {
            Timeline::Small(v) => {
                let at = v.partition_point(|e| *e > key);
                debug_assert!(v.get(at) != Some(&key), "duplicate timeline key");
                v.insert(at, key);
                if v.len() > Self::SMALL_MAX {
                    *self = Timeline::Big(v.iter().copied().collect());
                }
            }
            Timeline::Big(b) => {
                b.insert(key);
            }
        }
    }

    /// Remove `key`; whether it was there.
    #[inline]
    pub(super) fn remove(&mut self, key: &K) -> bool {
        match self {
            Timeline::Small(v) => match v.binary_search_by(|e| key.cmp(e)) {
                Ok(i) => {
                    v.remove(i);
                    true
                }
                Err(_) => false,
            },
            Timeline::Big(b) => {
                let found = b.remove(key);
                self.maybe_shrink();
                found
            }
        }
    }

    /// Remove and return the leftmost key.
    #[inline]
    pub(super) fn pop_first(&mut self) -> Option<K> {
        match self {
            Timeline::Small(v) => v.pop(),
            Timeline::Big(b) => {
                let first = b.pop_first();
                self.maybe_shrink();
                first
            }
        }
    }

    fn maybe_shrink(&mut self) {
        if let Timeline::Big(b) = self {
            if b.len() < Self::SMALL_BACK {
                *self = Timeline::Small(b.iter().rev().copied().collect());
            }
        }
    }

    /// The leftmost key.
    #[inline]
    pub(super) fn first(&self) -> Option<K> {
        match self {
            Timeline::Small(v) => v.last().copied(),
            Timeline::Big(b) => b.first().copied(),
        }
    }

    /// The keys in ascending order.
    pub(super) fn iter(&self) -> impl Iterator<Item = K> + '_ {
        let (small, big) = match self {
            Timeline::Small(v) => (Some(v.iter().rev().copied()), None),
            Timeline::Big(b) => (None, Some(b.iter().copied())),
        };
        small.into_iter().flatten().chain(big.into_iter().flatten())
    }
}

/// One scheduling-domain level of a CPU.
#[derive(Clone, Debug)]
pub(super) struct Level {
    pub(super) span: Arc<[CpuId]>,
    pub(super) interval: SimTime,
    /// The span as a bit mask, to intersect with the idle set word by word.
    mask: SpanMask,
    /// The span's positions in [`Balancer::order`]'s order, `lo..hi` (the
    /// span is contiguous there; unused when the order is not kept).
    range: (u32, u32),
}

/// A span's CPUs as a bit mask over the whole machine; only words
/// `lo..hi` can be non-zero.
#[derive(Clone, Debug)]
struct SpanMask {
    words: Arc<[u64]>,
    lo: usize,
    hi: usize,
}

impl SpanMask {
    fn new(n: usize, span: &[CpuId]) -> SpanMask {
        let mut words = vec![0u64; n.div_ceil(64).max(1)];
        for &c in span {
            words[c / 64] |= 1 << (c % 64);
        }
        let lo = span.first().map_or(0, |&c| c / 64);
        let hi = span.last().map_or(0, |&c| c / 64 + 1);
        SpanMask {
            words: words.into(),
            lo,
            hi,
        }
    }

    /// The first CPU in `from..to`, ascending, that is in both the span and
    /// `set` and for which `f` returns true.
    fn find_in(
        &self,
        set: &CpuBits,
        from: CpuId,
        to: CpuId,
        f: &mut impl FnMut(CpuId) -> bool,
    ) -> Option<CpuId> {
        if from >= to {
            return None;
        }
        let (w0, w1) = (self.lo.max(from / 64), self.hi.min(to.div_ceil(64)));
        for w in w0..w1 {
            let mut bits = self.words[w] & set.words[w];
            if w == from / 64 {
                bits &= u64::MAX << (from % 64);
            }
            if w == to / 64 {
                bits &= (1u64 << (to % 64)) - 1;
            }
            while bits != 0 {
                let c = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if f(c) {
                    return Some(c);
                }
            }
        }
        None
    }
}

/// A max-tree over the CPUs in [`Balancer::order`]'s positions: each leaf
/// holds an overloaded CPU's `(load + 1) << 32 | (u32::MAX − cpu)` (0 for
/// any other CPU), so the maximum over a span's positions is its busiest
/// overloaded CPU, the lowest-numbered among equals, in O(log n).
///
/// Kept lazily: every enqueue and dequeue sets a leaf, but only newidle
/// balancing reads the tree, so a set only records the leaf's new value and
/// marks it; the marked leaves' paths to the root are brought up to date by
/// the next [`BusiestTree::max`] (same answers, as it sees every set).
#[derive(Clone, Debug)]
struct BusiestTree {
    size: usize,
    /// The leaves' latest values (by position).
    leaf: Vec<u128>,
    /// The tree and the positions set since it was last brought up to date
    /// (interior mutability: a reader updates it).
    lazy: std::cell::RefCell<LazyTree>,
}

#[derive(Clone, Debug)]
struct LazyTree {
    t: Vec<u128>,
    marked: Vec<bool>,
    pending: Vec<u32>,
}

impl BusiestTree {
    fn new(n: usize) -> BusiestTree {
        let size = n.next_power_of_two().max(1);
        BusiestTree {
            size,
            leaf: vec![0; size],
            lazy: std::cell::RefCell::new(LazyTree {
                t: vec![0; 2 * size],
                marked: vec![false; size],
                pending: Vec::new(),
            }),
        }
    }

    fn key(load: u64, cpu: CpuId) -> u128 {
        ((load as u128 + 1) << 32) | (u32::MAX - cpu as u32) as u128
    }

    fn cpu_of(key: u128) -> CpuId {
        (u32::MAX - key as u32) as CpuId
    }

    /// Position `pos` now holds `v` (recorded; the tree catches up at the
    /// next [`BusiestTree::max`]).
    #[inline]
    fn set(&mut self, pos: usize, v: u128) {
        if self.leaf[pos] == v {
            return;
        }
        self.leaf[pos] = v;
        let lz = self.lazy.get_mut();
        if !lz.marked[pos] {
            lz.marked[pos] = true;
            lz.pending.push(pos as u32);
        }
    }

    /// The maximum over positions `lo..hi` (0: none).
    fn max(&self, lo: usize, hi: usize) -> u128 {
        let mut lz = self.lazy.borrow_mut();
        let lz = &mut *lz;
        for &p in &lz.pending {
            let p = p as usize;
            lz.marked[p] = false;
            let mut i = p + self.size;
            lz.t[i] = self.leaf[p];
            while i > 1 {
                i /= 2;
                let m = lz.t[2 * i].max(lz.t[2 * i + 1]);
                if lz.t[i] == m {
                    break;
                }
                lz.t[i] = m;
            }
        }
        lz.pending.clear();
        let t = &lz.t;
        let (mut l, mut r) = (lo + self.size, hi + self.size);
        let mut best = 0;
        while l < r {
            if l & 1 == 1 {
                best = best.max(t[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.max(t[r]);
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

/// `find_idlest_cpu`'s candidates ordered by its key, kept lazily: CPUs
/// whose counts or running task changed are only marked, and re-keyed at
/// the next search. A burst of new threads (a program starting) costs one
/// pass over the CPUs for the first and a few re-keyed CPUs for each of the
/// others.
#[derive(Clone, Debug)]
struct IdlestIndex {
    /// (load, busy SMT siblings, tasks, CPU) in the order `idlest` compares.
    set: BTreeSet<(u64, u32, u32, CpuId)>,
    key: Vec<Option<(u64, u32, u32, CpuId)>>,
    /// The CPUs to re-key (each marked [`STALE_IDLEST`] in
    /// [`Balancer::stale`]).
    dirty_list: Vec<CpuId>,
}

/// [`Balancer::stale`]: the CPU waits in [`IdlestIndex::dirty_list`].
const STALE_IDLEST: u8 = 1;
/// [`Balancer::stale`]: the CPU waits in [`Balancer::busiest_stale`].
const STALE_BUSIEST: u8 = 2;
/// Both.
const STALE_ALL: u8 = STALE_IDLEST | STALE_BUSIEST;

/// Scheduling domains of every CPU: SMT siblings, LLC, node, system (each span
/// in ascending CPU order, which the balancing code relies on); levels
/// with the same span as the one below (or a single CPU) are dropped, as the
/// kernel degenerates them.
/// With the CPUs' positions in an order where each span is contiguous
/// (`pos`), or `None` when the domains do not nest.
fn build_levels(m: &Machine) -> (Vec<Vec<Level>>, Option<Vec<u32>>) {
    use std::collections::BTreeMap;
    let n = m.ncpus();
    // Group the CPUs once per level (one pass each, not one per span).
    let mut groups: [BTreeMap<u64, Vec<CpuId>>; 4] = Default::default();
    for c in &m.cpus {
        groups[0].entry(c.core as u64).or_default().push(c.id);
        groups[1].entry(c.llc as u64).or_default().push(c.id);
        groups[2].entry(c.node as u64).or_default().push(c.id);
        groups[3].entry(0).or_default().push(c.id);
    }
    // Nested domains (SMT ⊂ LLC ⊂ node) are contiguous in (node, LLC,
    // core, id) order; checked below for every span.
    let mut order: Vec<CpuId> = (0..n).collect();
    order.sort_by_key(|&c| {
        let x = &m.cpus[c];
        (x.node, x.llc, x.core, c)
    });
    let mut pos = vec![0u32; n];
    for (i, &c) in order.iter().enumerate() {
        pos[c] = i as u32;
    }
    let mut nested = true;
    // (level, key) → (span, its mask, its range of positions)
    type Span = (Arc<[CpuId]>, SpanMask, (u32, u32));
    let mut cache: BTreeMap<(u8, u64), Span> = BTreeMap::new();
    for (lvl, g) in groups.iter_mut().enumerate() {
        for (&key, cpus) in g.iter_mut() {
            cpus.sort_unstable();
            let lo = cpus.iter().map(|&c| pos[c]).min().unwrap_or(0);
            let hi = cpus.iter().map(|&c| pos[c]).max().map_or(0, |p| p + 1);
            nested &= (hi - lo) as usize == cpus.len();
            let mask = SpanMask::new(n, cpus);
            cache.insert((lvl as u8, key), (cpus.clone().into(), mask, (lo, hi)));
        }
    }
    let mut out = Vec::with_capacity(n);
    for c in &m.cpus {
        let keys = [c.core as u64, c.llc as u64, c.node as u64, 0];
        let mut levels: Vec<Level> = Vec::new();
        for (lvl, key) in keys.into_iter().enumerate() {
            let (s, mask, range) = &cache[&(lvl as u8, key)];
            if s.len() <= 1 || levels.last().is_some_and(|l| l.span.len() == s.len()) {
                continue;
            }
            let interval = SimTime::ms(s.len() as u64).max(m.tick);
            levels.push(Level {
                span: s.clone(),
                interval,
                mask: mask.clone(),
                range: *range,
            });
        }
        out.push(levels);
    }
    (out, nested.then_some(pos))
}

/// Per-CPU counts, scheduling domains and balancing state of a fair-class
/// scheduler.
#[derive(Clone, Debug)]
pub(super) struct Balancer {
    /// Load balancing between CPUs at all (`balance` parameter).
    pub(super) balance: bool,
    /// Periodic-balance interval multiplier on busy CPUs.
    busy_factor: u64,
    /// Per CPU: sum of the weights of its queued tasks and the current one.
    pub(super) load: Vec<u64>,
    /// Per CPU: its queued tasks plus the current one.
    pub(super) nr: Vec<u32>,
    pub(super) levels: Vec<Vec<Level>>,
    next_balance: Vec<Vec<SimTime>>,
    /// Per CPU and level: periodic balances in a row that found an imbalance
    /// but no task light enough to move (the kernel's `nr_balance_failed`).
    balance_failed: Vec<Vec<u32>>,
    /// Per CPU: when periodic balancing last moved a task to it. Among equally
    /// loaded CPUs the one that pulled longest ago pulls next, as each CPU
    /// balancing on its own tick would.
    last_pull: Vec<SimTime>,
    /// CPUs with no task counted.
    pub(super) idle: CpuBits,
    /// CPUs with two or more tasks (the kernel's "overloaded"): the only
    /// ones newidle balancing can pull from.
    overloaded: CpuBits,
    /// Per CPU, the widest domain span inside its LLC (`select_idle_sibling`'s
    /// scan), computed once since the topology does not change.
    llc_span: Vec<Option<SpanMask>>,
    /// Per CPU, its position in an order where every domain span is
    /// contiguous (`None` when the domains do not nest: then newidle
    /// balancing looks at the overloaded CPUs one by one).
    pos: Option<Vec<u32>>,
    /// The overloaded CPUs by load, for newidle balancing (kept only with
    /// `pos`).
    busiest: BusiestTree,
    /// Per CPU, its SMT siblings (their `idlest` keys depend on it).
    siblings: Vec<Vec<CpuId>>,
    idlest: IdlestIndex,
    /// Per CPU: which indexes have not seen its latest counts
    /// ([`STALE_IDLEST`], [`STALE_BUSIEST`]). An enqueue or dequeue only
    /// marks its CPU (one byte compared when it is marked already); an
    /// index catches up when it is read: `idlest` at a placement,
    /// [`Balancer::sync_busiest`] before newidle balancing.
    stale: Vec<u8>,
    /// The CPUs marked [`STALE_BUSIEST`], whose [`BusiestTree`] leaves are
    /// out of date.
    busiest_stale: Vec<CpuId>,
    /// `find_imbalance`'s per-group sums (kept between calls, all zero).
    groups: std::cell::RefCell<GroupScratch>,
}

/// `find_imbalance`'s scratch: per group key (a CPU), the load, online CPUs
/// and latest pull summed over the group; and the keys in use.
#[derive(Clone, Debug)]
struct GroupScratch {
    acc: Vec<(u64, u64, SimTime)>,
    keys: Vec<CpuId>,
}

impl Balancer {
    pub(super) fn new(m: &Machine, balance: bool, busy_factor: u64) -> Balancer {
        let n = m.ncpus();
        let (levels, pos) = build_levels(m);
        let llc_span = (0..n)
            .map(|p| {
                let llc = m.cpus[p].llc;
                levels[p]
                    .iter()
                    .rev()
                    .find(|l| l.span.iter().all(|&c| m.cpus[c].llc == llc))
                    .map(|l| l.mask.clone())
            })
            .collect();
        let next_balance = levels
            .iter()
            .map(|l| vec![SimTime::ZERO; l.len()])
            .collect();
        let balance_failed = levels.iter().map(|l| vec![0; l.len()]).collect();
        Balancer {
            balance,
            busy_factor,
            load: vec![0; n],
            nr: vec![0; n],
            levels,
            next_balance,
            balance_failed,
            last_pull: vec![SimTime::ZERO; n],
            idle: CpuBits::full(n),
            overloaded: CpuBits::new(n),
            llc_span,
            pos,
            busiest: BusiestTree::new(n),
            siblings: m.cpus.iter().map(|c| c.siblings.clone()).collect(),
            idlest: IdlestIndex {
                set: BTreeSet::new(),
                key: vec![None; n],
                dirty_list: (0..n).collect(),
            },
            // Every CPU starts in `idlest`'s list; the busiest tree starts
            // up to date (no CPU is overloaded).
            stale: vec![STALE_IDLEST; n],
            busiest_stale: Vec::new(),
            groups: std::cell::RefCell::new(GroupScratch {
                acc: vec![(0, 0, SimTime::ZERO); n],
                keys: Vec::with_capacity(n),
            }),
        }
    }

    /// A task of weight `w` starts counting on `cpu`.
    #[inline]
    pub(super) fn add(&mut self, cpu: CpuId, w: u64) {
        self.load[cpu] += w;
        self.set_nr(cpu, 1);
    }

    /// A task of weight `w` stops counting on `cpu`.
    #[inline]
    pub(super) fn sub(&mut self, cpu: CpuId, w: u64) {
        self.load[cpu] -= w;
        self.set_nr(cpu, -1);
    }

    /// A counted task's weight changed from `old` to `new`.
    pub(super) fn reweight(&mut self, cpu: CpuId, old: u64, new: u64) {
        self.load[cpu] = self.load[cpu] - old + new;
        self.index(cpu);
    }

    /// `cpu` starts or stops running a task (the engine calls `running` and
    /// `stopping` as it sets and clears it): `idlest` re-keys it.
    #[inline]
    pub(super) fn touch(&mut self, cpu: CpuId) {
        let s = &mut self.stale[cpu];
        if *s & STALE_IDLEST == 0 {
            *s |= STALE_IDLEST;
            self.idlest.dirty_list.push(cpu);
        }
    }

    /// `cpu`'s counts changed: mark it for the indexes that read them.
    #[inline(always)]
    fn index(&mut self, cpu: CpuId) {
        if self.stale[cpu] != STALE_ALL {
            self.mark_stale(cpu);
        }
    }

    #[inline(never)]
    fn mark_stale(&mut self, cpu: CpuId) {
        let s = self.stale[cpu];
        if s & STALE_IDLEST == 0 {
            self.idlest.dirty_list.push(cpu);
        }
        if s & STALE_BUSIEST == 0 {
            self.busiest_stale.push(cpu);
        }
        self.stale[cpu] = STALE_ALL;
    }

    /// Bring the busiest-CPU tree up to date with the counts of the CPUs
    /// marked since its last read (newidle balancing calls it before
    /// reading the tree; without `pos` there is no tree).
    pub(super) fn sync_busiest(&mut self) {
        for i in 0..self.busiest_stale.len() {
            let cpu = self.busiest_stale[i];
            self.stale[cpu] &= !STALE_BUSIEST;
            if let Some(pos) = &self.pos {
                let v = if self.nr[cpu] >= 2 {
                    BusiestTree::key(self.load[cpu], cpu)
                } else {
                    0
                };
                self.busiest.set(pos[cpu] as usize, v);
            }
        }
        self.busiest_stale.clear();
    }

    #[inline(always)]
    fn set_nr(&mut self, cpu: CpuId, delta: i32) {
        let before = self.nr[cpu];
        let after = (before as i64 + delta as i64) as u32;
        self.nr[cpu] = after;
        if before == 0 && after > 0 {
            self.idle.remove(cpu);
        } else if before > 0 && after == 0 {
            self.idle.insert(cpu);
        }
        if before < 2 && after >= 2 {
            self.overloaded.insert(cpu);
        } else if before >= 2 && after < 2 {
            self.overloaded.remove(cpu);
        }
        self.index(cpu);
    }

    pub(super) fn is_idle(&self, cx: &Ctx, cpu: CpuId) -> bool {
        self.nr[cpu] == 0 && cx.current(cpu).is_none() && cx.online(cpu)
    }

    /// SMT siblings of `cpu` that are running or have queued work (0 without
    /// SMT).
    pub(super) fn busy_siblings(&self, cx: &Ctx, cpu: CpuId) -> u32 {
        cx.machine.cpus[cpu]
            .siblings
            .iter()
            .filter(|&&s| cx.current(s).is_some() || self.nr[s] > 0)
            .count() as u32
    }

    /// `find_idlest_cpu`'s key of `c`: at equal load a CPU whose core has
    /// more idle hyperthreads wins (`find_idlest_group`: a fully idle core
    /// before a shared one), then fewer tasks, then the lowest id.
    fn idlest_key(&self, cx: &Ctx, c: CpuId) -> (u64, u32, u32, CpuId) {
        let busy = cx.current(c).is_some() as u64;
        (
            self.load[c].max(busy * NICE_0_LOAD),
            self.busy_siblings(cx, c),
            self.nr[c],
            c,
        )
    }

    /// Least loaded allowed online CPU (`find_idlest_cpu`; ties: lowest id).
    ///
    /// The CPUs wait in [`IdlestIndex`] ordered by key; the ones marked
    /// since the last search (and their SMT siblings) are re-keyed first,
    /// then the first allowed online CPU in key order is the answer.
    pub(super) fn idlest(&mut self, cx: &Ctx, t: TaskId) -> CpuId {
        let mut list = std::mem::take(&mut self.idlest.dirty_list);
        for &c in &list {
            self.stale[c] &= !STALE_IDLEST;
        }
        for &c in &list {
            // A sibling's key counts this CPU among its busy siblings.
            self.rekey(cx, c);
            for i in 0..self.siblings[c].len() {
                self.rekey(cx, self.siblings[c][i]);
            }
        }
        list.clear();
        self.idlest.dirty_list = list;
        let aff = &cx.task(t).affinity;
        let found = self
            .idlest
            .set
            .iter()
            .find(|k| aff.contains(k.3) && cx.online(k.3))
            .map(|k| k.3);
        #[cfg(debug_assertions)]
        {
            let scan = (0..cx.ncpus())
                .filter(|&c| aff.contains(c) && cx.online(c))
                .min_by_key(|&c| self.idlest_key(cx, c))
                .map(|c| self.idlest_key(cx, c));
            debug_assert_eq!(
                found.map(|c| self.idlest_key(cx, c)),
                scan,
                "idlest index out of date"
            );
        }
        found.unwrap_or(cx.task(t).cpu)
    }

    fn rekey(&mut self, cx: &Ctx, c: CpuId) {
        let k = self.idlest_key(cx, c);
        let ix = &mut self.idlest;
        if ix.key[c] != Some(k) {
            if let Some(old) = ix.key[c] {
                ix.set.remove(&old);
            }
            ix.set.insert(k);
            ix.key[c] = Some(k);
        }
    }

    /// Wake-up and fork placement without capacity awareness: a waking task
    /// goes to its previous CPU if idle, else to an idle CPU sharing its LLC
    /// (`select_idle_sibling`; with SMT a fully idle core first), else to its
    /// previous CPU; anything else goes to the least loaded allowed CPU.
    /// `prev_ok` is the previous CPU when it is allowed and online.
    pub(super) fn place(
        &mut self,
        cx: &Ctx,
        t: TaskId,
        prev_ok: Option<CpuId>,
        flags: EnqFlags,
    ) -> CpuId {
        match (flags, prev_ok) {
            (EnqFlags::Wakeup, Some(p)) => {
                if self.is_idle(cx, p) {
                    return p;
                }
                if self.idle.is_empty() {
                    return p; // nothing idle anywhere: no need to scan the LLC
                }
                // select_idle_sibling: scan the LLC, starting after prev;
                // with SMT, a CPU of a fully idle core first
                // (select_idle_core), then any idle CPU. Only CPUs with no
                // task counted can be idle: the scan visits those of the
                // LLC, in the same cyclic order.
                if let Some(span) = &self.llc_span[p] {
                    let aff = &cx.task(t).affinity;
                    let smt = !cx.machine.cpus[p].siblings.is_empty();
                    let mut idle_cpu = None;
                    let mut take = |c: CpuId| {
                        if aff.contains(c) && self.is_idle(cx, c) {
                            if !smt || self.busy_siblings(cx, c) == 0 {
                                return true;
                            }
                            idle_cpu.get_or_insert(c);
                        }
                        false
                    };
                    let n = cx.ncpus();
                    let found = span
                        .find_in(&self.idle, p + 1, n, &mut take)
                        .or_else(|| span.find_in(&self.idle, 0, p, &mut take));
                    if let Some(c) = found.or(idle_cpu) {
                        return c;
                    }
                }
                p
            }
            _ => self.idlest(cx, t),
        }
    }

    /// The group `c` belongs to in a domain spanning `size` CPUs: the lowest
    /// CPU of its widest smaller domain (itself at the lowest level).
    fn group_key(&self, c: CpuId, size: usize) -> CpuId {
        self.levels[c]
            .iter()
            .rev()
            .find(|l| l.span.len() < size)
            .map_or(c, |l| l.span[0])
    }

    /// Periodic balancing of one domain from busy `cpu`'s side: the domain's
    /// groups are its child domains (single CPUs at the lowest level), each
    /// with its average load per CPU, as in the kernel's
    /// `find_busiest_group`. If `cpu`'s group is above the domain's average
    /// and another group below it, return the least loaded CPU of the least
    /// loaded group and the load to move, `min((src − avg)·n_src,
    /// (avg − dst)·n_dst)` (`calculate_imbalance`). Ties between groups and
    /// between CPUs go to the one that pulled longest ago, then the lowest id.
    fn find_imbalance(&self, cx: &Ctx, cpu: CpuId, span: &[CpuId]) -> Option<(CpuId, u64)> {
        let size = span.len();
        // Per group key: (load, online CPUs, latest pull into the group),
        // summed in a scratch table indexed by the key (no allocation, no
        // sort: nothing below depends on the order of the groups).
        let mut scratch = self.groups.borrow_mut();
        let GroupScratch { acc, keys } = &mut *scratch;
        let mut mine = None;
        for &c in span {
            if !cx.online(c) {
                continue;
            }
            let key = self.group_key(c, size);
            if c == cpu {
                mine = Some(key);
            }
            let a = &mut acc[key];
            if a.1 == 0 {
                keys.push(key);
            }
            a.0 += self.load[c];
            a.1 += 1;
            a.2 = a.2.max(self.last_pull[c]);
        }
        let found = 'found: {
            let Some(mine) = mine else {
                break 'found None;
            };
            let avg = |k: CpuId| acc[k].0 * NICE_0_LOAD / acc[k].1;
            let (load, n) = keys
                .iter()
                .fold((0, 0), |(l, n), &k| (l + acc[k].0, n + acc[k].1));
            let all = load * NICE_0_LOAD / n.max(1);
            let Some(dst) = keys
                .iter()
                .copied()
                .filter(|&k| k != mine)
                .min_by_key(|&k| (avg(k), acc[k].2, k))
            else {
                break 'found None;
            };
            let (a_src, a_dst) = (avg(mine), avg(dst));
            if a_src <= all || a_dst >= all {
                break 'found None;
            }
            let imbalance =
                ((a_src - all) * acc[mine].1).min((all - a_dst) * acc[dst].1) / NICE_0_LOAD;
            Some((dst, imbalance))
        };
        for &k in keys.iter() {
            acc[k] = (0, 0, SimTime::ZERO);
        }
        keys.clear();
        drop(scratch);
        let (dst_key, imbalance) = found?;
        // The least loaded CPU of that group takes the task(s).
        let target = span
            .iter()
            .copied()
            .filter(|&c| c != cpu && cx.online(c) && self.group_key(c, size) == dst_key)
            .min_by_key(|&c| (self.load[c], self.last_pull[c], c))?;
        (imbalance > 0).then_some((target, imbalance))
    }
}

/// A fair-class scheduler's side of balancing: its runqueues as the
/// [`Balancer`] sees them.
pub(super) trait FairQueues {
    fn bal(&self) -> &Balancer;
    fn bal_mut(&mut self) -> &mut Balancer;
    /// Call `f` with every task queued on `cpu` that balancing may move (not
    /// the running one); the order does not matter.
    fn for_each_movable(&self, cpu: CpuId, f: impl FnMut(TaskId));
    /// A task's load weight.
    fn weight(&self, t: TaskId) -> u64;
    /// When the task last stopped running.
    fn last_run(&self, t: TaskId) -> SimTime;
    /// Move queued task `t` from `src` to `dst` (detach, attach, tell the
    /// engine with `cx.migrate`).
    fn move_queued(&mut self, cx: &mut Ctx, t: TaskId, src: CpuId, dst: CpuId);
    /// The state of Linux 6.x's periodic balancing ([`Lb6`]) for a
    /// scheduler that balances as 6.x does (`eevdf`); `None`: the 2.6-era
    /// rules of `tick_balance` (`cfs`).
    fn lb6(&mut self) -> Option<&mut Option<Box<Lb6>>> {
        None
    }
    /// A CPU's utilisation (`cpu_util_cfs`), for [`Lb6`]'s group types.
    fn lb_cpu_util(&self, _cx: &Ctx, _cpu: CpuId) -> f64 {
        0.0
    }
    /// A task's utilisation (`task_util_est`), for [`Lb6`]'s `migrate_util`.
    fn lb_task_util(&self, _cx: &Ctx, _t: TaskId) -> f64 {
        0.0
    }
}

/// The coldest queued task on `src` that may run on `dst` and weighs at most
/// `max_weight` (ties: the lowest task id).
pub(super) fn pick_migratable<Q: FairQueues>(
    q: &Q,
    cx: &Ctx,
    src: CpuId,
    dst: CpuId,
    max_weight: u64,
) -> Option<TaskId> {
    let mut best: Option<(SimTime, TaskId)> = None;
    q.for_each_movable(src, |t| {
        if q.weight(t) > max_weight || !cx.task(t).affinity.contains(dst) {
            return;
        }
        let key = (q.last_run(t), t);
        if best.is_none_or(|b| key < b) {
            best = Some(key);
        }
    });
    best.map(|b| b.1)
}

/// Newidle balancing: `cpu` is about to go idle; pull one task from the
/// busiest CPU of the nearest domain that has one to give (ties: the
/// lowest-numbered).
pub(super) fn newidle_balance<Q: FairQueues>(q: &mut Q, cx: &mut Ctx, cpu: CpuId) {
    let b = q.bal();
    if !b.balance {
        return;
    }
    // Only overloaded CPUs can give one.
    if b.overloaded.is_empty() {
        return;
    }
    q.bal_mut().sync_busiest();
    for li in 0..q.bal().levels[cpu].len() {
        let b = q.bal();
        let busiest = match &b.pos {
            // The busiest overloaded CPU of the span other than `cpu`: the
            // tree's maximum on either side of `cpu`'s position.
            Some(pos) => {
                let (lo, hi) = b.levels[cpu][li].range;
                let p = pos[cpu] as usize;
                let best = b
                    .busiest
                    .max(lo as usize, p)
                    .max(b.busiest.max(p + 1, hi as usize));
                (best != 0).then(|| BusiestTree::cpu_of(best))
            }
            None => busiest_by_scan(b, cpu, &b.levels[cpu][li].span),
        };
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            busiest,
            busiest_by_scan(b, cpu, &b.levels[cpu][li].span),
            "busiest-CPU index out of date"
        );
        if let Some(src) = busiest {
            if let Some(t) = pick_migratable(q, cx, src, cpu, u64::MAX) {
                q.move_queued(cx, t, src, cpu);
                return;
            }
        }
    }
}

/// The most loaded CPU of `span` other than `cpu` with two or more tasks
/// (ties: the lowest-numbered), by looking at each.
fn busiest_by_scan(b: &Balancer, cpu: CpuId, span: &[CpuId]) -> Option<CpuId> {
    let mut busiest: Option<(u64, CpuId)> = None;
    let mut consider = |c: CpuId| {
        if c == cpu || b.nr[c] < 2 {
            return;
        }
        let key = (b.load[c], c);
        if busiest.is_none_or(|x| key.0 > x.0) {
            busiest = Some(key);
        }
    };
    // When the overloaded CPUs are few, look at them rather than at the
    // whole span (same answer, as both go in ascending order).
    if b.overloaded.len() < span.len() {
        for c in b.overloaded.iter() {
            if span.binary_search(&c).is_ok() {
                consider(c);
            }
        }
    } else {
        for &c in span.iter() {
            consider(c);
        }
    }
    busiest.map(|x| x.1)
}

/// On the tick of a CPU with waiting tasks: hand one to an idle CPU (nohz
/// idle balance), then periodic balancing of its domains.
pub(super) fn tick_balance<Q: FairQueues>(q: &mut Q, cx: &mut Ctx, cpu: CpuId) {
    if q.bal().nr[cpu] < 2 {
        // Linux 6.x: a CPU balances on its own tick, pulling (`Lb6`).
        rebalance6(q, cx, cpu);
        return;
    }
    // nohz idle balance: nearest idle CPU by domain level.
    if !q.bal().idle.is_empty() {
        let mut target = None;
        let b = q.bal();
        // Only CPUs with no task counted can be idle: visit those of each
        // span, in ascending order.
        let n = cx.ncpus();
        for lvl in &b.levels[cpu] {
            let mut take = |c: CpuId| {
                if c != cpu && b.is_idle(cx, c) {
                    if let Some(t) = pick_migratable(q, cx, cpu, c, u64::MAX) {
                        target = Some((t, c));
                        return true;
                    }
                }
                false
            };
            if lvl.mask.find_in(&b.idle, 0, n, &mut take).is_some() {
                break;
            }
        }
        if let Some((t, c)) = target {
            q.move_queued(cx, t, cpu, c);
            return;
        }
    }
    if q.lb6().is_some() {
        rebalance6(q, cx, cpu);
        return;
    }
    let now = cx.now;
    for li in 0..q.bal().levels[cpu].len() {
        let b = q.bal_mut();
        if now < b.next_balance[cpu][li] {
            continue;
        }
        let lvl = b.levels[cpu][li].clone();
        b.next_balance[cpu][li] = now + SimTime(lvl.interval.0 * b.busy_factor);
        let Some((dst, mut imbalance)) = q.bal().find_imbalance(cx, cpu, &lvl.span) else {
            continue;
        };
        let mut moved = false;
        // After `failed` fruitless balances a task counts with its load
        // halved that many times (`detach_tasks`' shr_bound(load,
        // nr_balance_failed) > imbalance test): a one-task imbalance is
        // moved on the second try, and threads keep rotating.
        let failed = q.bal().balance_failed[cpu][li].min(16);
        while imbalance > 0 && q.bal().nr[cpu] >= 2 {
            let allowed = imbalance.saturating_mul(1 << failed).min(u64::MAX >> 1);
            let Some(t) = pick_migratable(q, cx, cpu, dst, allowed) else {
                break;
            };
            imbalance -= q.weight(t).min(imbalance);
            q.move_queued(cx, t, cpu, dst);
            moved = true;
        }
        let b = q.bal_mut();
        if moved {
            b.balance_failed[cpu][li] = 0;
            b.last_pull[dst] = now;
            break;
        }
        if imbalance > 0 && b.nr[cpu] >= 2 {
            b.balance_failed[cpu][li] += 1;
        }
    }
}

/// `sysctl_sched_migration_cost`: a task that ran less than this long ago is
/// cache hot (`task_hot`), ns.
const MIGRATION_COST_NS: u64 = 500_000;
/// `sysctl_sched_nr_migrate`: the most tasks one balance looks at
/// (`loop_max`).
const NR_MIGRATE: usize = 32;

/// Linux 6.x's periodic load balancing (`sched_balance_rq` of 6.18's
/// kernel/sched/fair.c), as `eevdf` balances; `cfs` keeps the 2.6-era rules
/// of [`tick_balance`]. Per CPU and domain level it keeps the kernel's
/// `sd->balance_interval`, `sd->nr_balance_failed` and `sd->last_balance`.
///
/// Each busy CPU balances on its own tick, when its interval has passed,
/// by pulling (`rebalance_domains`): the interval is `balance_interval`
/// (from the span's size in ms up to twice that) × `busy_factor` in ticks,
/// one tick less (`get_sd_balance_interval`). The domain's groups are
/// classified (`group_classify`): *overloaded* with more tasks than CPUs and
/// utilisation or runnable load above capacity / `imbalance_pct`, *has
/// spare* with fewer tasks than CPUs or utilisation below capacity /
/// `imbalance_pct`, else *fully busy*. A busy CPU pulls only from an
/// overloaded group and only when its own group is not less busy
/// (`find_busiest_group`): an overloaded or fully busy group pulls load
/// (`migrate_load`: the least of what takes the busiest above and the local
/// below the domain's average load); a group with spare capacity pulls
/// utilisation across LLCs (`migrate_util`) or, within one, the difference
/// of idle CPUs halved (`migrate_task`; nothing when the groups are single
/// CPUs: `sibling_imbalance` is 0 for a busy CPU). `detach_tasks` walks the
/// busiest CPU's tasks from the least recently run, at most
/// `min(sysctl_sched_nr_migrate, nr_running)`, skipping the running one, a
/// cache-hot one (ran under 0.5 ms ago) while `nr_balance_failed ≤
/// cache_nice_tries`, and one whose load shifted right by
/// `nr_balance_failed` exceeds what is left of the imbalance. A balance that
/// finds an imbalance resets the interval and, if it moved nothing, counts
/// a failure; one that finds none clears the failures and doubles the
/// interval. Loads are the tasks' weights (not PELT averages); utilisation
/// is PELT's.
#[derive(Clone, Debug)]
pub(super) struct Lb6 {
    interval_ms: Vec<Vec<u64>>,
    failed: Vec<Vec<u32>>,
    last: Vec<Vec<SimTime>>,
    /// Per CPU, when its first level is due again (ns; 0: not known yet):
    /// a tick before it has nothing to do.
    next: Vec<u64>,
}

impl Lb6 {
    pub(super) fn new(b: &Balancer) -> Lb6 {
        Lb6 {
            interval_ms: b
                .levels
                .iter()
                .map(|l| l.iter().map(|x| x.span.len() as u64).collect())
                .collect(),
            failed: b.levels.iter().map(|l| vec![0; l.len()]).collect(),
            last: b
                .levels
                .iter()
                .map(|l| vec![SimTime::ZERO; l.len()])
                .collect(),
            next: vec![0; b.levels.len()],
        }
    }
}

/// One group of a domain as `update_sg_lb_stats` sums it.
#[derive(Clone, Copy, Debug, Default)]
struct Group6 {
    key: CpuId,
    nr: u64,
    load: u64,
    util: f64,
    /// Whether `util` was summed (see `balance6`).
    util_summed: bool,
    cap: u64,
    cpus: u64,
    idle: u64,
    /// 0 has spare, 1 fully busy, 2 overloaded.
    kind: u8,
}

impl Group6 {
    fn avg_load(&self) -> u64 {
        self.load * NICE_0_LOAD / self.cap.max(1)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Migrate6 {
    Load,
    Util,
    Task,
}

/// `rebalance_domains` on `cpu`'s tick (module doc of [`Lb6`]).
fn rebalance6<Q: FairQueues>(q: &mut Q, cx: &mut Ctx, cpu: CpuId) {
    let now = cx.now;
    let Some(slot) = q.lb6() else { return };
    match slot {
        // No level due: the loop below would pass over every one.
        Some(lb) if now.0 < lb.next[cpu] => return,
        Some(_) => {}
        None => return,
    }
    let Some(mut lb) = slot.take() else { return };
    let tick = cx.machine.tick.0.max(1);
    let max_jiffies = (1_000_000_000 / tick * cx.ncpus() as u64 / 10).max(1);
    let busy_factor = q.bal().busy_factor;
    let due = |lb: &Lb6, li: usize| {
        let ms = lb.interval_ms[cpu][li] * busy_factor;
        let jiffies = ((ms * 1_000_000).div_ceil(tick) - 1).clamp(1, max_jiffies);
        lb.last[cpu][li].0 + jiffies * tick
    };
    let levels = q.bal().levels[cpu].len();
    for li in 0..levels {
        // Only a busy CPU balances here (idle ones get work from nohz idle
        // balancing, `tick_balance`).
        if cx.current(cpu).is_none() {
            break;
        }
        if now.0 < due(&lb, li) {
            continue;
        }
        balance6(q, cx, cpu, li, &mut lb);
        lb.last[cpu][li] = now;
    }
    lb.next[cpu] = (0..levels).map(|li| due(&lb, li)).min().unwrap_or(u64::MAX);
    if let Some(slot) = q.lb6() {
        *slot = Some(lb);
    }
}

/// One `sched_balance_rq` of `cpu`'s level `li`; whether it moved a task.
fn balance6<Q: FairQueues>(q: &mut Q, cx: &mut Ctx, cpu: CpuId, li: usize, lb: &mut Lb6) -> bool {
    let b = q.bal();
    let span = b.levels[cpu][li].span.clone();
    let size = span.len();
    let m = cx.machine;
    let first = &m.cpus[span[0]];
    let smt = span.iter().all(|&c| m.cpus[c].core == first.core);
    let numa = span.iter().any(|&c| m.cpus[c].node != first.node);
    let llc = span.iter().all(|&c| m.cpus[c].llc == first.llc);
    // sd_init: SMT 110 and no cache_nice_tries; NUMA 2 tries; else 1.
    let pct: u64 = if smt { 110 } else { 117 };
    let nice_tries: u32 = if smt {
        0
    } else if numa {
        2
    } else {
        1
    };
    let mut groups: Vec<Group6> = Vec::new();
    for &c in span.iter() {
        if !cx.online(c) {
            continue;
        }
        let key = b.group_key(c, size);
        let i = match groups.iter().position(|g| g.key == key) {
            Some(i) => i,
            None => {
                groups.push(Group6 {
                    key,
                    ..Group6::default()
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[i];
        g.nr += b.nr[c] as u64;
        g.load += b.load[c];
        g.cap += cap::CapAware::cap_orig(cx, c) as u64;
        g.cpus += 1;
        g.idle += b.is_idle(cx, c) as u64;
    }
    // A group's utilisation is summed only where the classification or
    // the imbalance reads it (a CPU's costs a PELT decay per task); summed
    // over the same CPUs in the same order, it is the same number.
    let group_util = |key: CpuId| -> f64 {
        let mut u = 0.0;
        for &c in span.iter() {
            if cx.online(c) && b.group_key(c, size) == key {
                u += q.lb_cpu_util(cx, c);
            }
        }
        u
    };
    for g in groups.iter_mut() {
        // group_runnable: each task runnable all the time.
        let runnable = g.nr * g.cap / g.cpus.max(1);
        let run_over = g.cap * pct < runnable * 100;
        // `group_is_overloaded` and `group_has_capacity`, the runnable test
        // first: it decides without the utilisation where it holds.
        let need_util = g.nr >= g.cpus && !run_over;
        let util = if need_util {
            g.util = group_util(g.key);
            g.util_summed = true;
            g.util.round() as u64
        } else {
            0
        };
        let over_util = run_over || (need_util && g.cap * 100 < util * pct);
        g.kind = if g.nr > g.cpus && over_util {
            2
        } else if g.nr < g.cpus || (!run_over && g.cap * 100 > util * pct) {
            0
        } else {
            1
        };
    }
    let mine = b.group_key(cpu, size);
    let Some(local) = groups.iter().copied().find(|g| g.key == mine) else {
        return false;
    };
    let busiest = groups
        .iter()
        .copied()
        .filter(|g| g.key != mine && g.nr > 0)
        .max_by_key(|g| (g.kind, g.avg_load(), g.nr, std::cmp::Reverse(g.key)));
    let (tot_load, tot_cap) = groups
        .iter()
        .fold((0, 0), |(l, c), g| (l + g.load, c + g.cap));
    let avg = tot_load * NICE_0_LOAD / tot_cap.max(1);
    // find_busiest_group and calculate_imbalance for a busy CPU.
    let found: Option<(Group6, Migrate6, u64)> = busiest.and_then(|bz| {
        if local.kind > bz.kind || bz.kind != 2 {
            return None;
        }
        if local.kind == 0 {
            if !llc {
                let lu = if local.util_summed {
                    local.util
                } else {
                    group_util(local.key)
                };
                let u = lu.round() as u64;
                return Some((bz, Migrate6::Util, local.cap.max(u) - u));
            }
            if bz.cpus == 1 {
                return None;
            }
            let n = local.idle.saturating_sub(bz.idle) >> 1;
            return (n > 0).then_some((bz, Migrate6::Task, n));
        }
        let la = local.avg_load();
        if la >= bz.avg_load() || la >= avg {
            return None;
        }
        if local.kind == 2 && 100 * bz.avg_load() <= pct * la {
            return None;
        }
        let imb = ((bz.avg_load() - avg) * bz.cap).min((avg - la) * local.cap) / NICE_0_LOAD;
        (imb > 0).then_some((bz, Migrate6::Load, imb))
    });
    let Some((bz, kind, mut imbalance)) = found else {
        // out_balanced
        lb.failed[cpu][li] = 0;
        if lb.interval_ms[cpu][li] < 2 * size as u64 {
            lb.interval_ms[cpu][li] *= 2;
        }
        return false;
    };
    // find_busiest_queue: the busiest CPU of that group with tasks to give.
    let src = span
        .iter()
        .copied()
        .filter(|&c| c != cpu && cx.online(c) && b.group_key(c, size) == bz.key && b.nr[c] >= 2)
        .max_by_key(|&c| match kind {
            Migrate6::Load => (b.load[c], std::cmp::Reverse(c)),
            Migrate6::Util => ((q.lb_cpu_util(cx, c) * 1024.0) as u64, std::cmp::Reverse(c)),
            Migrate6::Task => (b.nr[c] as u64, std::cmp::Reverse(c)),
        });
    let Some(src) = src else {
        lb.failed[cpu][li] = 0;
        if lb.interval_ms[cpu][li] < 2 * size as u64 {
            lb.interval_ms[cpu][li] *= 2;
        }
        return false;
    };
    let failed = lb.failed[cpu][li];
    let now = cx.now;
    // detach_tasks: the least recently run first, at most loop_max of the
    // CPU's tasks (the running one, the most recent, is looked at last and
    // never moved).
    let loop_max = NR_MIGRATE.min(b.nr[src] as usize);
    let mut cands: Vec<(SimTime, TaskId)> = Vec::new();
    q.for_each_movable(src, |t| cands.push((q.last_run(t), t)));
    if cands.len() > loop_max {
        cands.select_nth_unstable(loop_max);
        cands.truncate(loop_max);
    }
    cands.sort_unstable();
    let mut moved = false;
    for (last, t) in cands {
        if !cx.task(t).affinity.contains(cpu) {
            continue;
        }
        let hot = now.0.saturating_sub(last.0) < MIGRATION_COST_NS;
        if hot && failed <= nice_tries {
            continue;
        }
        let amount = match kind {
            Migrate6::Load => q.weight(t),
            Migrate6::Util => q.lb_task_util(cx, t).round() as u64,
            Migrate6::Task => 1,
        };
        if kind != Migrate6::Task && (amount >> failed.min(63)) > imbalance {
            continue;
        }
        q.move_queued(cx, t, src, cpu);
        moved = true;
        imbalance = imbalance.saturating_sub(amount.max(1));
        if imbalance == 0 {
            break;
        }
    }
    lb.failed[cpu][li] = if moved { 0 } else { failed + 1 };
    lb.interval_ms[cpu][li] = size as u64;
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::TaskId;
    use proptest::prelude::*;

    #[test]
    fn calc_delta_fair_uses_the_weight_ratio() {
        // nice 0: wall time; nice 5 (weight 335): 1024/335 faster.
        assert_eq!(calc_delta_fair(1_000_000, 1024), 1_000_000);
        assert_eq!(calc_delta_fair(335, 335), 1024);
    }

    #[test]
    fn timeline_grows_into_a_tree_and_back_in_order() {
        // Keys in a scrambled order, past the vector's longest and back
        // below the tree's shortest: the same order as a B-tree set all along.
        let n = 3 * Timeline::<(u64, TaskId)>::SMALL_MAX as u64;
        let mut tl = Timeline::default();
        let mut model: BTreeSet<(u64, TaskId)> = BTreeSet::new();
        for i in 0..n {
            let key = ((i * 7919) % n, i as TaskId);
            tl.insert(key);
            model.insert(key);
        }
        assert!(matches!(tl, Timeline::Big(_)));
        assert!(tl.iter().eq(model.iter().copied()));
        for i in (0..n).step_by(3) {
            let key = ((i * 7919) % n, i as TaskId);
            assert_eq!(tl.remove(&key), model.remove(&key));
        }
        while model.len() >= Timeline::<(u64, TaskId)>::SMALL_BACK {
            assert_eq!(tl.pop_first(), model.pop_first());
        }
        assert!(matches!(tl, Timeline::Small(_)));
        assert!(tl.iter().eq(model.iter().copied()));
        assert_eq!(tl.first(), model.first().copied());
    }

    proptest! {
        /// The timeline holds exactly what a B-tree set would, in the same
        /// order, through growing into a tree and shrinking back.
        #[test]
        fn timeline_matches_btreeset(ops in proptest::collection::vec((0u8..5, 0u64..40, 0usize..80), 1..600)) {
            let mut tl = Timeline::default();
            let mut model: BTreeSet<(u64, TaskId)> = BTreeSet::new();
            for (op, v, t) in ops {
                let key = (v, t);
                match op {
                    0 | 1 => {
                        if model.insert(key) {
                            tl.insert(key);
                        }
                    }
                    2 => prop_assert_eq!(tl.remove(&key), model.remove(&key)),
                    _ => prop_assert_eq!(tl.pop_first(), model.pop_first()),
                }
                prop_assert_eq!(tl.first(), model.first().copied());
                let got: Vec<_> = tl.iter().collect();
                let want: Vec<_> = model.iter().copied().collect();
                prop_assert_eq!(got, want);
            }
            // Drain it: the tree turns back into a vector on the way.
            while !model.is_empty() {
                prop_assert_eq!(tl.pop_first(), model.pop_first());
                prop_assert_eq!(tl.first(), model.first().copied());
            }
            prop_assert_eq!(tl.pop_first(), None);
        }

        /// A span mask finds, among the members of a set, the first CPU of
        /// the span in a range that a predicate accepts, as a scan does.
        #[test]
        fn span_mask_finds_what_a_scan_finds(
            n in 1usize..200,
            span_bits in proptest::collection::vec(any::<bool>(), 200),
            set_bits in proptest::collection::vec(any::<bool>(), 200),
            from in 0usize..210,
            to in 0usize..210,
            reject in 0usize..7,
        ) {
            let span: Vec<CpuId> = (0..n).filter(|&c| span_bits[c]).collect();
            let mask = SpanMask::new(n, &span);
            let mut set = CpuBits::new(n);
            for c in (0..n).filter(|&c| set_bits[c]) {
                set.insert(c);
            }
            let (from, to) = (from.min(n), to.min(n));
            let ok = |c: CpuId| c % 7 != reject;
            let got = mask.find_in(&set, from, to, &mut |c| ok(c));
            let want = span.iter().copied().find(|&c| c >= from && c < to && set.contains(c) && ok(c));
            prop_assert_eq!(got, want);
        }

        /// The busiest-CPU tree's maximum over any range of positions is the
        /// most loaded overloaded CPU there, the lowest-numbered among equals,
        /// also when reads come between sets (the tree catches up lazily).
        #[test]
        fn busiest_tree_matches_a_scan(
            ops in proptest::collection::vec(
                (0usize..40, 0u64..6, any::<bool>(), proptest::option::of((0usize..40, 0usize..40))),
                1..200,
            ),
            lo in 0usize..40,
            len in 0usize..40,
        ) {
            let n = 40;
            let mut tree = BusiestTree::new(n);
            // Position p holds CPU 39 − p: positions and ids in opposite orders.
            let mut state: Vec<Option<u64>> = vec![None; n];
            let scan = |state: &[Option<u64>], lo: usize, hi: usize| {
                (lo..hi)
                    .filter_map(|p| state[p].map(|l| (l, n - 1 - p)))
                    .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
                    .map(|w| w.1)
            };
            for (p, load, over, read) in ops {
                let cpu = n - 1 - p;
                state[p] = over.then_some(load);
                tree.set(p, if over { BusiestTree::key(load, cpu) } else { 0 });
                if let Some((rlo, rlen)) = read {
                    let rhi = (rlo + rlen).min(n);
                    let got = tree.max(rlo, rhi);
                    prop_assert_eq!((got != 0).then(|| BusiestTree::cpu_of(got)), scan(&state, rlo, rhi));
                }
            }
            let hi = (lo + len).min(n);
            let got = tree.max(lo, hi);
            prop_assert_eq!((got != 0).then(|| BusiestTree::cpu_of(got)), scan(&state, lo, hi));
        }

        /// The CPU bit set agrees with a B-tree set on membership, size and
        /// ascending iteration.
        #[test]
        fn cpubits_matches_btreeset(ops in proptest::collection::vec((any::<bool>(), 0usize..200), 1..400)) {
            let mut bits = CpuBits::new(200);
            let mut model: BTreeSet<CpuId> = BTreeSet::new();
            for (ins, c) in ops {
                if ins {
                    bits.insert(c);
                    model.insert(c);
                } else {
                    bits.remove(c);
                    model.remove(&c);
                }
                prop_assert_eq!(bits.len(), model.len());
                prop_assert_eq!(bits.is_empty(), model.is_empty());
                prop_assert_eq!(bits.contains(c), model.contains(&c));
                let got: Vec<_> = bits.iter().collect();
                let want: Vec<_> = model.iter().copied().collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
