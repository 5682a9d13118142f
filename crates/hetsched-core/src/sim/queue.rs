//! The event queue: a binary min-heap with a total order.
//!
//! Events are ordered by `(time, class, sequence)`. The class breaks ties
//! between different kinds of events at the same instant in a documented way
//! (see [`EventClass`]); the sequence number, assigned at insertion, makes
//! events of the same time and class come out first-in first-out. The order is
//! therefore total and independent of heap internals, which is what makes runs
//! reproducible.
//!
//! Cancellation is lazy: an event carries the generation counter of the object
//! it concerns (a CPU's completion plan, a task's wake-up, a timer token), and
//! the engine drops an event whose generation is stale when it is popped,
//! instead of searching the heap.
//!
//! Costs: `push` O(log n), `pop` O(log n), `peek_time` O(1), `len` O(1).

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
#[allow(missing_docs)]
pub enum EventClass {
    Hardware = 0,
    Completion = 1,
    Wake = 2,
    Timer = 3,
    Tick = 4,
    Sample = 5,
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
    fn time(&self) -> u64 {
        (self.key >> 64) as u64
    }
    #[inline]
    fn class(&self) -> EventClass {
        EventClass::from_index((self.key >> 56) as u8)
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

/// A min-priority queue of events of payload type `E`.
///
/// Two binary heaps: wake-ups (`EventClass::Wake`: one per sleeping thread,
/// usually the bulk of the queue and far ahead) and everything else (a few
/// events per CPU, mostly due soon). The earliest event is the smaller of the
/// two tops, so the order is the same as with one heap, but most pops work on
/// a much shallower heap.
pub struct EventQueue<E> {
    wakes: BinaryHeap<Entry<E>>,
    rest: BinaryHeap<Entry<E>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            wakes: BinaryHeap::new(),
            rest: BinaryHeap::new(),
            next_seq: 0,
        }
    }

    /// Insert an event. O(log n).
    #[inline]
    pub fn push(&mut self, time: SimTime, class: EventClass, payload: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        debug_assert!(seq < 1 << 56, "sequence overflow");
        let e = Entry {
            key: (time.0 as u128) << 64 | ((class as u128) << 56) | seq as u128,
            payload,
        };
        if class == EventClass::Wake {
            self.wakes.push(e);
        } else {
            self.rest.push(e);
        }
    }

    /// Remove and return the earliest event. O(log n).
    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, EventClass, E)> {
        let from_wakes = match (self.wakes.peek(), self.rest.peek()) {
            (Some(w), Some(r)) => w.key < r.key,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let heap = if from_wakes {
            &mut self.wakes
        } else {
            &mut self.rest
        };
        heap.pop()
            .map(|e| (SimTime(e.time()), e.class(), e.payload))
    }

    /// Time of the earliest event, if any. O(1).
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        let w = self.wakes.peek().map(|e| e.key);
        let r = self.rest.peek().map(|e| e.key);
        let k = match (w, r) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        k.map(|k| SimTime((k >> 64) as u64))
    }

    /// Number of queued events (stale ones included). O(1).
    #[inline]
    pub fn len(&self) -> usize {
        self.wakes.len() + self.rest.len()
    }

    /// Whether the queue is empty. O(1).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.wakes.is_empty() && self.rest.is_empty()
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
