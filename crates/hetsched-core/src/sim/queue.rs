//! The event queue: a timing wheel beside a binary min-heap, with a total
//! order.
//!
//! Events are ordered by `(time, class, sequence)`. The class breaks ties
//! between different kinds of events at the same instant in a documented way
//! (see [`EventClass`]); the sequence number, assigned at insertion, makes
//! events of the same time and class come out first-in first-out. The order is
//! therefore total and independent of the queue's internals, which is what
//! makes runs reproducible.
//!
//! Cancellation is lazy: an event carries the generation counter of the object
//! it concerns (a CPU's completion plan, a task's wake-up, a timer token), and
//! the engine drops an event whose generation is stale when it is popped,
//! instead of searching the queue.
//!
//! Most events of a run are due a little later than now: completions and
//! ticks within milliseconds, wake-ups within tens of milliseconds. Those go
//! into a **timing wheel** of [`SLOTS`] buckets of [`SLOT_NS`] each (about
//! 268 ms in all): a push links the event into the list of the bucket of
//! its time, unsorted (the lists share one pool of nodes); a bucket is
//! sorted once, when the earliest events are taken from it (one or two
//! events each in a busy run). Events in the bucket of the current time (the
//! bucket being emptied) and events beyond the wheel's span go into a
//! **binary heap**. The earliest event is the smaller of the two minima, so
//! the order is exactly the heap's alone.
//!
//! Costs: `push` O(1) into the wheel, O(log n) into the heap; `pop` O(1)
//! amortised from the wheel (plus sorting each bucket once, O(k log k) for
//! its k events, and a scan of the occupancy bitmap for the next bucket:
//! at most five words), O(log n) from the heap; `peek_time` O(k) for the
//! next bucket's k events; `len` O(1).

use crate::time::SimTime;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Tie-breaking class of an event. At the same instant, lower classes are
/// handled first:
/// 1. hardware state changes (frequency transitions, reconfigurations) so that
///    everything else at that instant sees the new state;
/// 2. phase completions, so a task that finishes exactly at a tick is not
///    charged for it;
/// 3. wake-ups (sleep ends, program starts, periodic releases);
/// 4. policy timers;
/// 5. scheduler ticks;
/// 6. periodic samplers (governors, agents);
/// 7. the end of the run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum EventClass {
    /// 1. Hardware state changes.
    Hardware = 0,
    /// 2. Phase completions.
    Completion = 1,
    /// 3. Wake-ups.
    Wake = 2,
    /// 4. Policy timers.
    Timer = 3,
    /// 5. Scheduler ticks.
    Tick = 4,
    /// 6. Periodic samplers.
    Sample = 5,
    /// 7. The end of the run.
    End = 6,
}

impl EventClass {
    /// The class with this index (indices past the last map to `End`).
    #[inline]
    pub fn from_index(i: u8) -> EventClass {
        match i {
            0 => EventClass::Hardware,
            1 => EventClass::Completion,
            2 => EventClass::Wake,
            3 => EventClass::Timer,
            4 => EventClass::Tick,
            5 => EventClass::Sample,
            _ => EventClass::End,
        }
    }
}

/// log2 of a wheel bucket's width in ns.
const SLOT_SHIFT: u32 = 14;
/// Width of a wheel bucket: 16.384 µs, a small fraction of a scheduler tick
/// (1 to 10 ms) and of a typical run slice, so that a busy bucket holds one
/// or two events (the standard benchmark: about 1.3; with 65.5 µs buckets,
/// about 5, sorting them cost 38 instructions per event) and sorting it is
/// nearly free.
pub const SLOT_NS: u64 = 1 << SLOT_SHIFT;
/// Buckets in the wheel: 16384 × 16.384 µs ≈ 268 ms ahead of now, longer
/// than the sleeps of interactive and periodic threads; later events go to
/// the heap. 16384 = 64 × 256: the occupancy bitmap has 256 words and a
/// summary of 4.
pub const SLOTS: usize = 16384;
const MASK: u64 = SLOTS as u64 - 1;
const WORDS: usize = SLOTS / 64;
const SUMMARY: usize = WORDS / 64;

#[derive(Clone, Copy)]
struct Entry<E> {
    /// The whole order in one integer, compared in one step: the event time
    /// in the high 64 bits, then the class (8 bits) and the insertion
    /// sequence (56 bits).
    key: u128,
    payload: E,
}

impl<E> Entry<E> {
    #[inline]
    fn key(&self) -> u128 {
        self.key
    }
    #[inline]
    fn unpack(self) -> (SimTime, EventClass, E) {
        (
            SimTime((self.key >> 64) as u64),
            EventClass::from_index((self.key >> 56) as u8),
            self.payload,
        )
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // BinaryHeap is a max-heap: reverse so the smallest key is on top.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// Sort a bucket by decreasing key (its earliest event last). Buckets hold
/// one or two events in a busy run: an insertion sort in place costs a
/// compare or two there, where the library's sort pays its set-up (about 70
/// instructions a bucket). A large bucket is usually nearly sorted too (the
/// ticks of every CPU at one instant, in the order they were pushed or in
/// the reverse): the insertion sort goes on while it has moved
/// entries fewer than [`SORT_MOVES`] times their number, and hands what is
/// left to the library's sort past that (a burst of events in any order
/// within 16 µs). Keys are unique, so either way the order is the same.
#[inline(always)]
fn sort_bucket<E>(b: &mut [Entry<E>]) {
    if b.len() > 16 {
        return sort_large_bucket(b);
    }
    for j in 1..b.len() {
        let mut k = j;
        while k > 0 && b[k - 1].key < b[k].key {
            b.swap(k - 1, k);
            k -= 1;
        }
    }
}

/// [`sort_bucket`] of more than 16 events.
#[inline(never)]
fn sort_large_bucket<E>(b: &mut [Entry<E>]) {
    let n = b.len();
    // Reverse when most neighbours are in ascending order, then fix what is
    // out of place. (The two ends alone mislead when a later event in the
    // bucket was pushed before the ticks of the bucket's first instant: the
    // ticks then went to the library's sort.)
    let ascending = b.windows(2).filter(|w| w[0].key < w[1].key).count();
    if 2 * ascending > n - 1 {
        b.reverse();
    }
    let budget = SORT_MOVES * n;
    let mut moves = 0;
    for j in 1..n {
        let mut k = j;
        while k > 0 && b[k - 1].key < b[k].key {
            b.swap(k - 1, k);
            k -= 1;
        }
        moves += j - k;
        if moves > budget {
            b.sort_unstable_by_key(|y| std::cmp::Reverse(y.key));
            return;
        }
    }
}

/// Moves per entry an insertion sort of a bucket may make before the rest
/// goes to the library's sort (see [`sort_bucket`]).
const SORT_MOVES: usize = 4;

/// No node: the end of a bucket's list or of the free list.
const NIL: u32 = u32::MAX;

/// A wheel entry in the pool, alone on its half of a cache line (an entry
/// of the engine's events is 32 bytes: its key and its payload), so that
/// writing or reading one touches one line.
#[derive(Clone, Copy)]
#[repr(align(32))]
struct Slot<E>(Entry<E>);

/// A min-priority queue of events of payload type `E` (see the module doc).
///
/// Invariants: every event in the wheel lies in a bucket `s` (absolute
/// bucket number, `time / SLOT_NS`) with `cur <= s < cur + SLOTS`; bucket
/// `cur` is `open`, sorted by decreasing key (its earliest event last), and
/// receives no pushes; every other bucket is a list of nodes of `pool`,
/// headed at `heads[s % SLOTS]`, in no order; a bucket's bit in `occupied`
/// is set exactly when its list is not empty. A node is a slot of `pool`
/// (its entry) and the same index of `next` (its link).
///
/// The buckets' entries share one pool, whose unused nodes are reused last
/// freed first: the wheel's memory is about as large as the most events it
/// ever held at once, and the nodes in use stay few and close together. (A
/// vector per bucket kept each bucket's largest size for good: 16 384
/// buffers spread over tens of megabytes, and a cache miss for most pushes
/// and pops, which made a run slower than the heap alone although it took
/// fewer instructions.)
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    /// The entries of the buckets' lists, and unused slots.
    pool: Vec<Slot<E>>,
    /// Per slot of `pool`: the next node of its bucket's list, or of the
    /// free list. Apart from the entries and dense (4 bytes a node), so that
    /// a bucket's list is walked without waiting for each entry's line: the
    /// walk that opens a bucket first follows the links, prefetching the
    /// entries, then copies them.
    next: Vec<u32>,
    /// First unused node of `pool` (`NIL`: none).
    free: u32,
    /// First node of each bucket's list (`NIL`: empty), by `s % SLOTS`.
    heads: Box<[u32]>,
    /// Bucket `cur`, sorted by decreasing key.
    open: Vec<Entry<E>>,
    occupied: [u64; WORDS],
    /// Bit `w % 64` of word `w / 64`: `occupied[w] != 0`.
    summary: [u64; SUMMARY],
    /// Absolute number of the bucket being emptied.
    cur: u64,
    /// Events in the wheel (`open` and the lists).
    in_wheel: usize,
    next_seq: u64,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            pool: Vec::new(),
            next: Vec::new(),
            free: NIL,
            heads: vec![NIL; SLOTS].into_boxed_slice(),
            open: Vec::new(),
            occupied: [0; WORDS],
            summary: [0; SUMMARY],
            cur: 0,
            in_wheel: 0,
            next_seq: 0,
        }
    }

    /// Insert an event. O(1) into the wheel, O(log n) into the heap.
    #[inline]
    pub fn push(&mut self, time: SimTime, class: EventClass, payload: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        debug_assert!(seq < 1 << 56, "sequence overflow");
        let e = Entry {
            key: (time.0 as u128) << 64 | ((class as u128) << 56) | seq as u128,
            payload,
        };
        let s = time.0 >> SLOT_SHIFT;
        if s > self.cur && s - self.cur < SLOTS as u64 {
            let i = (s & MASK) as usize;
            let head = self.heads[i];
            let n = if self.free != NIL {
                let n = self.free;
                self.free = self.next[n as usize];
                self.pool[n as usize] = Slot(e);
                self.next[n as usize] = head;
                n
            } else {
                let n = self.pool.len();
                assert!(
                    n < NIL as usize,
                    "more events in the timing wheel than it can index"
                );
                self.pool.push(Slot(e));
                self.next.push(head);
                n as u32
            };
            self.heads[i] = n;
            self.occupied[i / 64] |= 1 << (i % 64);
            self.summary[i / 4096] |= 1 << ((i / 64) % 64);
            self.in_wheel += 1;
        } else {
            self.heap.push(e);
        }
    }

    /// The first occupied bucket index at or after `i` (no wrap-around).
    #[inline]
    fn occupied_from(&self, i: usize) -> Option<usize> {
        let w = i / 64;
        let bits = self.occupied[w] & (!0u64 << (i % 64));
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        // The summary's words from the one holding word `w + 1` on.
        let from = w + 1;
        if from >= WORDS {
            return None;
        }
        let mut sw = from / 64;
        let mut bits = self.summary[sw] & (!0u64 << (from % 64));
        while bits == 0 {
            sw += 1;
            if sw >= SUMMARY {
                return None;
            }
            bits = self.summary[sw];
        }
        let w2 = sw * 64 + bits.trailing_zeros() as usize;
        Some(w2 * 64 + self.occupied[w2 % WORDS].trailing_zeros() as usize)
    }

    /// Absolute number of the first occupied bucket after `cur` (the wheel
    /// must hold an event outside bucket `cur`).
    #[inline]
    fn next_bucket(&self) -> u64 {
        let start = ((self.cur + 1) & MASK) as usize;
        let i = self
            .occupied_from(start)
            .or_else(|| self.occupied_from(0))
            .expect("the wheel holds an event");
        self.cur + 1 + ((i as u64).wrapping_sub(start as u64) & MASK)
    }

    /// Whether the wheel holds the earliest event, given the heap's earliest
    /// key. Moves `cur` to the wheel's first occupied bucket (sorting it)
    /// only when that bucket is not later than the heap's earliest event, so
    /// that `cur` never passes the time of the event popped next.
    #[inline(always)]
    fn wheel_first(&mut self, heap_min: Option<u128>) -> bool {
        if self.in_wheel == 0 {
            return false;
        }
        if let Some(e) = self.open.last() {
            return heap_min.is_none_or(|h| e.key < h);
        }
        let s = self.next_bucket();
        if let Some(h) = heap_min {
            if ((h >> 64) as u64 >> SLOT_SHIFT) < s {
                return false;
            }
        }
        self.cur = s;
        self.open_bucket(s);
        sort_bucket(&mut self.open);
        let first = self.open.last().expect("an occupied bucket").key;
        heap_min.is_none_or(|h| first < h)
    }

    /// Move bucket `s`'s list into `open` (newest first: events of one
    /// instant and class come out in decreasing order already), freeing its
    /// nodes.
    #[inline]
    fn open_bucket(&mut self, s: u64) {
        let i = (s & MASK) as usize;
        let head = std::mem::replace(&mut self.heads[i], NIL);
        // The links first (dense, mostly cached), asking for each entry's
        // line as it is found: the entries' misses overlap instead of
        // following one another.
        let mut n = head;
        while n != NIL {
            crate::prefetch::lines(&self.pool[n as usize], 1);
            n = self.next[n as usize];
        }
        let mut n = head;
        while n != NIL {
            self.open.push(self.pool[n as usize].0);
            let next = self.next[n as usize];
            self.next[n as usize] = self.free;
            self.free = n;
            n = next;
        }
        self.occupied[i / 64] &= !(1 << (i % 64));
        if self.occupied[i / 64] == 0 {
            self.summary[i / 4096] &= !(1 << ((i / 64) % 64));
        }
    }

    /// Remove and return the earliest event. O(1) amortised from the wheel,
    /// O(log n) from the heap.
    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, EventClass, E)> {
        let heap_min = self.heap.peek().map(|e| e.key);
        if !self.wheel_first(heap_min) {
            return self.heap.pop().map(Entry::unpack);
        }
        let e = self.open.pop().expect("the wheel's earliest bucket");
        self.in_wheel -= 1;
        Some(e.unpack())
    }

    /// The earliest event of the wheel's open bucket, if any: what
    /// [`EventQueue::pop`] returns next unless the heap holds an earlier
    /// one or an earlier event is pushed first. A hint for reading ahead;
    /// it changes nothing.
    #[inline]
    pub fn next_in_bucket(&self) -> Option<&E> {
        self.open.last().map(|e| &e.payload)
    }

    /// Time of the earliest event, if any. O(k) for the k events of the
    /// wheel's next bucket, O(1) otherwise.
    pub fn peek_time(&self) -> Option<SimTime> {
        let h = self.heap.peek().map(|e| e.key);
        let w = if self.in_wheel == 0 {
            None
        } else {
            match self.open.last() {
                Some(e) => Some(e.key),
                None => {
                    let s = self.next_bucket();
                    let mut n = self.heads[(s & MASK) as usize];
                    let mut min = None;
                    while n != NIL {
                        let key = self.pool[n as usize].0.key;
                        min = Some(min.map_or(key, |m: u128| m.min(key)));
                        n = self.next[n as usize];
                    }
                    min
                }
            }
        };
        let k = match (w, h) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        k.map(|k| SimTime((k >> 64) as u64))
    }

    /// Number of queued events (stale ones included). O(1).
    #[inline]
    pub fn len(&self) -> usize {
        self.heap.len() + self.in_wheel
    }

    /// Whether the queue is empty. O(1).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total number of events ever pushed. O(1).
    #[inline]
    pub fn pushed(&self) -> u64 {
        self.next_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn class_of(c: u8) -> EventClass {
        EventClass::from_index(c % 7)
    }

    #[test]
    fn ties_break_by_class_then_fifo() {
        let mut q = EventQueue::new();
        q.push(SimTime(5), EventClass::Tick, "tick");
        q.push(SimTime(5), EventClass::Completion, "done-a");
        q.push(SimTime(5), EventClass::Completion, "done-b");
        q.push(SimTime(4), EventClass::End, "early");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|e| e.2)).collect();
        assert_eq!(order, vec!["early", "done-a", "done-b", "tick"]);
    }

    /// A long run shaped like the engine's (a few thousand pending events,
    /// pops and pushes alternating, sleeps of 15 to 45 ms, slices of 0.1 to
    /// 4 ms, some events at the current instant and some far ahead): the same
    /// order as an ordered map, over many turns of the wheel.
    #[test]
    fn long_engine_like_run_matches_an_ordered_map() {
        let mut q = EventQueue::new();
        let mut model: BTreeMap<(SimTime, EventClass, u64), u64> = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut seq = 0u64;
        let mut push = |q: &mut EventQueue<u64>, m: &mut BTreeMap<_, _>, at: u64, c: u8| {
            let cls = class_of(c);
            q.push(SimTime(at), cls, seq);
            m.insert((SimTime(at), cls, seq), seq);
            seq += 1;
        };
        for _ in 0..3000 {
            let r = rnd();
            push(&mut q, &mut model, 15_000_000 + r % 30_000_000, 2);
        }
        let (mut hinted, mut later) = (0, 0);
        for _ in 0..200_000 {
            let hint = q.next_in_bucket().copied();
            let got = q.pop();
            let want = model.pop_first().map(|((t, c, _), p)| (t, c, p));
            assert_eq!(got, want);
            let (t, c, p) = got.expect("never empty");
            // The read-ahead hint is the event popped, or one still pending
            // after it (an earlier one came from the heap).
            if let Some(h) = hint {
                if h == p {
                    hinted += 1;
                } else {
                    let k = model.iter().find(|(_, &v)| v == h).map(|(k, _)| *k);
                    assert!(k.is_some_and(|k| (k.0, k.1) >= (t, c)), "hint {h} at {t:?}");
                    later += 1;
                }
            }
            let now = t.0;
            let r = rnd();
            let (at, c) = match r % 16 {
                0 => (now, (r >> 8) as u8),
                1 => (now + 1_000_000_000 + (r >> 8) % 1_000_000_000, 6),
                2..=7 => (now + 100_000 + (r >> 8) % 3_900_000, 1),
                8..=9 => (now + 1_000_000, 4),
                _ => (now + 15_000_000 + (r >> 8) % 30_000_000, 2),
            };
            push(&mut q, &mut model, at, c);
        }
        assert_eq!(q.len(), model.len());
        assert_eq!(q.peek_time(), model.keys().next().map(|k| k.0));
        // (No hint when the next bucket is not open yet.)
        assert!(
            hinted > 10 * later,
            "hint right {hinted} times, later {later}"
        );
    }

    /// The model test of the queue: random pushes (at `now + offset`, or at
    /// an arbitrary time when `anywhere`) and pops against an ordered map.
    fn check_against_model(ops: Vec<(bool, u64, u8)>, anywhere: bool) -> Result<(), TestCaseError> {
        let mut q = EventQueue::new();
        let mut model: BTreeMap<(SimTime, EventClass, u64), u32> = BTreeMap::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        for (i, (is_push, t, c)) in ops.into_iter().enumerate() {
            if is_push {
                let cls = class_of(c);
                let at = if anywhere { t } else { now + t };
                q.push(SimTime(at), cls, i as u32);
                model.insert((SimTime(at), cls, seq), i as u32);
                seq += 1;
            } else {
                let got = q.pop();
                let want = model.pop_first();
                if let Some(((t, _, _), _)) = want {
                    now = now.max(t.0);
                }
                prop_assert_eq!(got, want.map(|((t, c, _), p)| (t, c, p)));
            }
            prop_assert_eq!(q.len(), model.len());
            prop_assert_eq!(q.peek_time(), model.keys().next().map(|k| k.0));
        }
        Ok(())
    }

    proptest! {
        /// Event times as the engine makes them: never before the last
        /// popped event (same instant allowed, in any class), spread from
        /// nanoseconds to seconds ahead.
        #[test]
        fn matches_btreemap_model_forward(ops in proptest::collection::vec((any::<bool>(), prop_oneof![0u64..3, 0u64..5_000, 0u64..50_000_000_000], any::<u8>()), 1..600)) {
            check_against_model(ops, false)?;
        }

        /// Times spread over the timing wheel's span and a little beyond it
        /// (to the bucket edges, the current bucket, wrap-around), with
        /// pushes into the past now and then.
        #[test]
        fn matches_btreemap_model_across_the_wheel(ops in proptest::collection::vec((prop_oneof![3 => Just(true), 2 => Just(false)], prop_oneof![0u64..3, 0u64..3 * SLOT_NS, 0u64..SLOTS as u64 * SLOT_NS + 2 * SLOT_NS, (0u64..SLOTS as u64 + 2).prop_map(|k| k * SLOT_NS)], any::<u8>()), 1..800)) {
            check_against_model(ops, false)?;
        }

        /// A bucket comes out in decreasing key order whatever its size and
        /// however sorted it was: nearly ascending (a tick burst), nearly
        /// descending, or shuffled past the insertion sort's budget.
        #[test]
        fn sort_bucket_sorts_any_bucket(
            n in 0usize..300,
            shape in 0u8..3,
            swaps in proptest::collection::vec((0usize..300, 0usize..300), 0..400),
        ) {
            let mut keys: Vec<u128> = (0..n as u128).map(|k| k * 7 + 3).collect();
            if shape == 1 {
                keys.reverse();
            }
            let nswaps = if shape == 2 { swaps.len() } else { swaps.len().min(3) };
            for &(a, b) in &swaps[..nswaps] {
                if n > 0 {
                    keys.swap(a % n, b % n);
                }
            }
            let mut b: Vec<Entry<()>> = keys.iter().map(|&key| Entry { key, payload: () }).collect();
            sort_bucket(&mut b);
            let got: Vec<u128> = b.iter().map(|e| e.key).collect();
            let mut want = keys.clone();
            want.sort_unstable_by(|x, y| y.cmp(x));
            prop_assert_eq!(got, want);
        }

        /// Differential test: the heap behaves exactly like an ordered map
        /// keyed by (time, class, sequence) under random pushes and pops.
        #[test]
        fn matches_btreemap_model(ops in proptest::collection::vec((any::<bool>(), 0u64..50, any::<u8>()), 1..400)) {
            let mut q = EventQueue::new();
            let mut model: BTreeMap<(SimTime, EventClass, u64), u32> = BTreeMap::new();
            let mut seq = 0u64;
            for (i, (is_push, t, c)) in ops.into_iter().enumerate() {
                if is_push {
                    let cls = class_of(c);
                    q.push(SimTime(t), cls, i as u32);
                    model.insert((SimTime(t), cls, seq), i as u32);
                    seq += 1;
                } else {
                    let got = q.pop();
                    let want = model.pop_first();
                    prop_assert_eq!(got, want.map(|((t, c, _), p)| (t, c, p)));
                }
                prop_assert_eq!(q.len(), model.len());
                prop_assert_eq!(q.peek_time(), model.keys().next().map(|k| k.0));
            }
        }
    }
}
