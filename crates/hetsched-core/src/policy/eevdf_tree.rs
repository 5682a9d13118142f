//! The `eevdf` runqueue: queued entities ordered by `(deadline, queued
//! order, task)`, each node augmented with the smallest vruntime of its
//! subtree, so that the earliest-deadline entity whose vruntime passes an
//! eligibility test is found in O(log n) (the idea of the kernel's
//! `__pick_eevdf` over its augmented rbtree; this structure is our own, a
//! treap: a binary search tree on the key that is a heap on a per-node
//! priority, which keeps it balanced in expectation).
//!
//! Priorities are a fixed hash of the entry's queued order, so the shape —
//! and everything else — is deterministic. The order of the keys, and hence
//! every pick and every walk in order, is the same as a sorted list's.
//!
//! Fair-class runqueues are usually a few entities long, where a sorted
//! vector scanned from the front costs less than any tree (measured on
//! `bench/standard.toml`, docs/eevdf.md); so an [`EligTree`] is such a vector
//! up to [`SMALL_MAX`] entities (a pick then scans at most that many) and
//! the treap beyond, back to a vector below [`SMALL_BACK`]. Both hold the
//! same keys in the same order, so the choice never changes a pick.

use crate::os::TaskId;
use std::cell::Cell;

/// A queued entity's key: deadline, queued order (ties), task.
pub type Key = (i64, u64, TaskId);

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    key: Key,
    /// The entity's vruntime.
    v: i64,
    /// The smallest vruntime in this node's subtree.
    min_v: i64,
    prio: u64,
    l: u32,
    r: u32,
}

/// Longest sorted vector; one more entity turns it into a treap. Vectors
/// were measured cheaper than the treap up to 800 entities (docs/eevdf.md).
pub const SMALL_MAX: usize = 1024;
/// A treap smaller than this turns back into a vector.
pub const SMALL_BACK: usize = 512;

/// One entity of the short form: its key, packed, and its vruntime.
#[derive(Clone, Copy, Debug)]
pub struct Ent {
    /// `(deadline, queued order)` as one number of the same order: the
    /// deadline with its sign bit flipped in the high half, the queued order
    /// in the low half. Queued orders are unique within a queue (the caller
    /// numbers every insertion), so this decides the key order alone.
    k: u128,
    v: i64,
    t: TaskId,
}

/// The packed `(deadline, queued order)` of [`Ent::k`].
#[inline]
fn pack(d: i64, seq: u64) -> u128 {
    (((d as u64) ^ (1 << 63)) as u128) << 64 | seq as u128
}

impl Ent {
    #[inline]
    fn new(key: Key, v: i64) -> Ent {
        Ent {
            k: pack(key.0, key.1),
            v,
            t: key.2,
        }
    }

    #[inline]
    fn key(&self) -> Key {
        let d = (((self.k >> 64) as u64) ^ (1 << 63)) as i64;
        (d, self.k as u64, self.t)
    }
}

/// The short form: entities in ascending key order in `buf[head..]`. An
/// insertion or a removal shifts the shorter side of the entry: the part
/// before it (into the free room before `head`) or the part after it, so
/// that a queue whose picks leave from the front and whose arrivals join at
/// the back moves few entries.
#[derive(Clone, Debug, Default)]
pub struct Flat {
    buf: Vec<Ent>,
    head: usize,
    /// Where the last [`EligTree::first_eligible`] found its entity (a
    /// position of [`Flat::ents`]): the entity picked is removed next, and
    /// [`EligTree::remove`] tries this place before it searches.
    hint: Cell<usize>,
}

impl Flat {
    /// The entities, in order.
    #[inline]
    fn ents(&self) -> &[Ent] {
        &self.buf[self.head..]
    }

    #[inline]
    fn len(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Put `e` in its place, from the nearer end: an entry of the first
    /// half (with free room before the entries) moves the entries before it
    /// down one place, any other the entries after it up one place. The
    /// search and the move are one loop, one entry at a time: no binary
    /// search and no `memmove`, whose data-dependent branches cost more on
    /// these queues (about 23 entities, 8 or 9 moved) than the moves.
    #[inline]
    fn insert(&mut self, e: Ent) {
        let n = self.len();
        if self.head > 0 && n > 1 && e.k < self.buf[self.head + n / 2].k {
            // In the first half: the entries before it move down one place,
            // into the free room.
            self.head -= 1;
            let s = &mut self.buf[self.head..];
            let mut i = 0;
            while s[i + 1].k < e.k {
                s[i] = s[i + 1];
                i += 1;
            }
            s[i] = e;
            return;
        }
        self.buf.push(e);
        let s = &mut self.buf[self.head..];
        let mut i = s.len() - 1;
        while i > 0 && s[i - 1].k > e.k {
            s[i] = s[i - 1];
            i -= 1;
        }
        s[i] = e;
    }

    /// Take out the entry at position `at`: the shorter side moves, one
    /// entry at a time.
    #[inline]
    fn remove_at(&mut self, at: usize) {
        let n = self.len();
        let h = self.head;
        if at < n - 1 - at {
            // The `at` entries before it move one place towards the back.
            let s = &mut self.buf[h..=h + at];
            for i in (0..at).rev() {
                s[i + 1] = s[i];
            }
            self.head = h + 1;
        } else {
            let s = &mut self.buf[h + at..];
            for i in 1..s.len() {
                s[i - 1] = s[i];
            }
            self.buf.pop();
        }
        let n = n - 1;
        if n == 0 {
            self.buf.clear();
            self.head = 0;
        } else if self.head > n.max(SMALL_ROOM) {
            // More free room before the entries than entries: close it.
            self.buf.drain(..self.head);
            self.head = 0;
        }
    }
}

/// The position of the first entity whose vruntime passes `eligible`,
/// eight at a time: the eight tests of a group are made without a branch
/// and gathered into a mask, so that the only data-dependent branch is
/// whether a group holds one (usually the first group does), not where the
/// scan stops.
#[inline]
fn first_eligible_at(ents: &[Ent], eligible: &impl Fn(i64) -> bool) -> Option<usize> {
    let mut groups = ents.chunks_exact(8);
    let mut base = 0;
    for g in &mut groups {
        let mut m = 0u32;
        for (i, e) in g.iter().enumerate() {
            m |= (eligible(e.v) as u32) << i;
        }
        if m != 0 {
            return Some(base + m.trailing_zeros() as usize);
        }
        base += 8;
    }
    let mut m = 0u32;
    for (i, e) in groups.remainder().iter().enumerate() {
        m |= (eligible(e.v) as u32) << i;
    }
    (m != 0).then(|| base + m.trailing_zeros() as usize)
}

/// Free room before a [`Flat`]'s entries that is kept even when it exceeds
/// their number (closing it costs a move of them all).
const SMALL_ROOM: usize = 16;

/// Deadline-ordered entities: a sorted vector while short, a treap when long.
#[derive(Clone, Debug)]
pub enum EligTree {
    /// Ascending key order, with each entity's vruntime.
    Small(Flat),
    /// The augmented treap.
    Big(Treap),
}

impl Default for EligTree {
    fn default() -> Self {
        EligTree::Small(Flat::default())
    }
}

impl EligTree {
    /// Entities queued.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        match self {
            EligTree::Small(q) => q.len(),
            EligTree::Big(t) => t.len,
        }
    }

    /// Whether nothing is queued.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queue `key` with vruntime `v` (the key must not be queued).
    #[inline]
    pub fn insert(&mut self, key: Key, v: i64) {
        match self {
            EligTree::Small(q) => {
                debug_assert!(
                    q.ents().iter().all(|x| x.k as u64 != key.1),
                    "queued order {} twice",
                    key.1
                );
                q.insert(Ent::new(key, v));
                if q.len() > SMALL_MAX {
                    let mut t = Treap::default();
                    for e in q.ents() {
                        t.insert(e.key(), e.v);
                    }
                    *self = EligTree::Big(t);
                }
            }
            EligTree::Big(t) => t.insert(key, v),
        }
    }

    /// Remove `key`; whether it was queued.
    #[inline]
    pub fn remove(&mut self, key: &Key) -> bool {
        match self {
            EligTree::Small(q) => {
                // The place the last pick found, else a scan from the front:
                // the entities that leave (picked, or delayed ones becoming
                // eligible) are mostly near it.
                let k = pack(key.0, key.1);
                let hint = q.hint.get();
                let found = match q.ents().get(hint) {
                    Some(e) if e.k == k => Some(hint),
                    _ => q.ents().iter().position(|e| e.k == k),
                };
                match found {
                    Some(at) if q.ents()[at].t == key.2 => {
                        q.remove_at(at);
                        true
                    }
                    _ => false,
                }
            }
            EligTree::Big(t) => {
                let found = t.remove(key);
                if t.len < SMALL_BACK {
                    let buf: Vec<Ent> = t.entries().map(|(key, v)| Ent::new(key, v)).collect();
                    *self = EligTree::Small(Flat {
                        buf,
                        head: 0,
                        hint: Cell::new(0),
                    });
                }
                found
            }
        }
    }

    /// The smallest key.
    #[inline]
    pub fn first(&self) -> Option<Key> {
        match self {
            EligTree::Small(q) => q.ents().first().map(Ent::key),
            EligTree::Big(t) => t.first(),
        }
    }

    /// The smallest key whose vruntime passes `eligible` (monotone in the
    /// vruntime): a scan of at most [`SMALL_MAX`] entities, or the treap's
    /// O(log n) walk.
    #[inline]
    pub fn first_eligible(&self, eligible: impl Fn(i64) -> bool) -> Option<Key> {
        match self {
            EligTree::Small(q) => {
                let at = first_eligible_at(q.ents(), &eligible)?;
                q.hint.set(at);
                Some(q.ents()[at].key())
            }
            EligTree::Big(t) => t.first_eligible(eligible),
        }
    }

    /// The keys in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = Key> + '_ {
        let (small, big) = match self {
            EligTree::Small(q) => (Some(q.ents().iter().map(Ent::key)), None),
            EligTree::Big(t) => (None, Some(t.entries().map(|e| e.0))),
        };
        small.into_iter().flatten().chain(big.into_iter().flatten())
    }
}

/// Deadline-ordered entities with subtree-minimum vruntimes (a treap).
#[derive(Clone, Debug)]
pub struct Treap {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    len: usize,
}

impl Default for Treap {
    fn default() -> Self {
        Treap {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            len: 0,
        }
    }
}

/// splitmix64's finaliser: a fixed, well-mixed priority for a queued order.
#[inline]
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Treap {
    #[inline]
    fn pull(&mut self, n: u32) {
        let (l, r) = (self.nodes[n as usize].l, self.nodes[n as usize].r);
        let mut m = self.nodes[n as usize].v;
        if l != NIL {
            m = m.min(self.nodes[l as usize].min_v);
        }
        if r != NIL {
            m = m.min(self.nodes[r as usize].min_v);
        }
        self.nodes[n as usize].min_v = m;
    }

    /// Split `t` into keys `< key` and keys `≥ key` (`or_equal`: `≤` and `>`).
    fn split(&mut self, t: u32, key: &Key, or_equal: bool) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let k = self.nodes[t as usize].key;
        let left_side = if or_equal { k <= *key } else { k < *key };
        if left_side {
            let (a, b) = self.split(self.nodes[t as usize].r, key, or_equal);
            self.nodes[t as usize].r = a;
            self.pull(t);
            (t, b)
        } else {
            let (a, b) = self.split(self.nodes[t as usize].l, key, or_equal);
            self.nodes[t as usize].l = b;
            self.pull(t);
            (a, t)
        }
    }

    /// Join `a` and `b`, every key of `a` below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio >= self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].r, b);
            self.nodes[a as usize].r = r;
            self.pull(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].l);
            self.nodes[b as usize].l = l;
            self.pull(b);
            b
        }
    }

    /// Queue `key` with vruntime `v` (the key must not be queued).
    pub fn insert(&mut self, key: Key, v: i64) {
        let node = Node {
            key,
            v,
            min_v: v,
            prio: mix(key.1),
            l: NIL,
            r: NIL,
        };
        let n = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.root = self.insert_at(self.root, n);
        self.len += 1;
    }

    /// Put node `n` into subtree `t`; the subtree's new root. Down the
    /// search path to where `n`'s priority belongs, then one split of the
    /// subtree found there (rather than a split and two merges of the whole
    /// tree).
    fn insert_at(&mut self, t: u32, n: u32) -> u32 {
        if t == NIL {
            return n;
        }
        let key = self.nodes[n as usize].key;
        if self.nodes[n as usize].prio > self.nodes[t as usize].prio {
            let (a, b) = self.split(t, &key, false);
            self.nodes[n as usize].l = a;
            self.nodes[n as usize].r = b;
            self.pull(n);
            return n;
        }
        if key < self.nodes[t as usize].key {
            let l = self.insert_at(self.nodes[t as usize].l, n);
            self.nodes[t as usize].l = l;
        } else {
            let r = self.insert_at(self.nodes[t as usize].r, n);
            self.nodes[t as usize].r = r;
        }
        // Only `n`'s vruntime joined this subtree.
        let v = self.nodes[n as usize].v;
        let m = &mut self.nodes[t as usize].min_v;
        *m = (*m).min(v);
        t
    }

    /// Remove `key`; whether it was queued.
    pub fn remove(&mut self, key: &Key) -> bool {
        let (root, found) = self.remove_at(self.root, key);
        self.root = root;
        if found {
            self.len -= 1;
        }
        found
    }

    /// Take `key` out of subtree `t`: down the search path, then the node's
    /// two subtrees merged in its place. The subtree's new root, and whether
    /// the key was there.
    fn remove_at(&mut self, t: u32, key: &Key) -> (u32, bool) {
        if t == NIL {
            return (NIL, false);
        }
        let (l, r) = (self.nodes[t as usize].l, self.nodes[t as usize].r);
        let k = self.nodes[t as usize].key;
        if *key == k {
            self.free.push(t);
            return (self.merge(l, r), true);
        }
        let found = if *key < k {
            let (l, found) = self.remove_at(l, key);
            self.nodes[t as usize].l = l;
            found
        } else {
            let (r, found) = self.remove_at(r, key);
            self.nodes[t as usize].r = r;
            found
        };
        if found {
            self.pull(t);
        }
        (t, found)
    }

    /// The smallest key.
    pub fn first(&self) -> Option<Key> {
        let mut n = self.root;
        if n == NIL {
            return None;
        }
        while self.nodes[n as usize].l != NIL {
            n = self.nodes[n as usize].l;
        }
        Some(self.nodes[n as usize].key)
    }

    /// The smallest key whose vruntime passes `eligible` (a test monotone in
    /// the vruntime: if it passes `v`, it passes every smaller one), in
    /// O(depth): a left subtree whose minimum passes holds the answer;
    /// otherwise the node itself, otherwise the right subtree.
    pub fn first_eligible(&self, eligible: impl Fn(i64) -> bool) -> Option<Key> {
        let mut n = self.root;
        while n != NIL {
            let node = &self.nodes[n as usize];
            if node.l != NIL && eligible(self.nodes[node.l as usize].min_v) {
                n = node.l;
                continue;
            }
            if eligible(node.v) {
                return Some(node.key);
            }
            n = node.r;
        }
        None
    }

    /// The entries (key, vruntime) in ascending key order.
    pub fn entries(&self) -> Iter<'_> {
        let mut it = Iter {
            tree: self,
            stack: Vec::new(),
        };
        it.descend(self.root);
        it
    }
}

/// In-order walk of a [`Treap`].
pub struct Iter<'a> {
    tree: &'a Treap,
    stack: Vec<u32>,
}

impl Iter<'_> {
    fn descend(&mut self, mut n: u32) {
        while n != NIL {
            self.stack.push(n);
            n = self.tree.nodes[n as usize].l;
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = (Key, i64);

    fn next(&mut self) -> Option<(Key, i64)> {
        let n = self.stack.pop()?;
        let node = &self.tree.nodes[n as usize];
        self.descend(node.r);
        Some((node.key, node.v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for the randomised comparison.
    fn lcg(s: &mut u64) -> u64 {
        *s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        *s >> 33
    }

    #[test]
    fn finds_the_earliest_deadline_that_is_eligible() {
        let mut t = EligTree::Big(Treap::default());
        finds_in(&mut t);
        let mut t = EligTree::default();
        finds_in(&mut t);
    }

    fn finds_in(t: &mut EligTree) {
        // Deadlines 10, 20, 30, 40 with vruntimes 50, 5, 40, 1.
        t.insert((30, 2, 2), 40);
        t.insert((10, 0, 0), 50);
        t.insert((40, 3, 3), 1);
        t.insert((20, 1, 1), 5);
        assert_eq!(t.first(), Some((10, 0, 0)));
        // Eligible means v ≤ 10: tasks 1 (v 5) and 3 (v 1); 1 has the
        // earlier deadline.
        assert_eq!(t.first_eligible(|v| v <= 10), Some((20, 1, 1)));
        assert_eq!(t.first_eligible(|v| v <= 2), Some((40, 3, 3)));
        assert_eq!(t.first_eligible(|v| v <= 0), None);
        // Remove from the treap directly (a small treap would turn back
        // into a vector).
        match t {
            EligTree::Big(tr) => {
                assert!(tr.remove(&(20, 1, 1)));
                assert!(!tr.remove(&(20, 1, 1)));
            }
            EligTree::Small(_) => {
                assert!(t.remove(&(20, 1, 1)));
                assert!(!t.remove(&(20, 1, 1)));
            }
        }
        assert_eq!(t.first_eligible(|v| v <= 10), Some((40, 3, 3)));
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            vec![(10, 0, 0), (30, 2, 2), (40, 3, 3)]
        );
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn agrees_with_a_sorted_scan_under_random_operations() {
        let mut s = 12345u64;
        let mut t = EligTree::default();
        let mut list: Vec<(Key, i64)> = Vec::new();
        // Growing and shrinking phases of 4 × SMALL_MAX operations: the
        // length swings between 0 and about 1.3 × SMALL_MAX, through the
        // vector/treap turns both ways.
        let phase = 4 * SMALL_MAX as u64;
        let mut big = false;
        for seq in 0..10 * phase {
            let grow = (seq / phase).is_multiple_of(2);
            if list.is_empty() || lcg(&mut s).is_multiple_of(3) != grow {
                let key = ((lcg(&mut s) % 500) as i64, seq, (seq % 97) as usize);
                let v = (lcg(&mut s) % 1000) as i64 - 500;
                t.insert(key, v);
                let at = list.partition_point(|(k, _)| *k < key);
                list.insert(at, (key, v));
            } else {
                let i = (lcg(&mut s) as usize) % list.len();
                let (key, _) = list.remove(i);
                assert!(t.remove(&key));
            }
            let th = (lcg(&mut s) % 1000) as i64 - 500;
            let scan = list.iter().find(|(_, v)| *v <= th).map(|(k, _)| *k);
            assert_eq!(t.first_eligible(|v| v <= th), scan);
            assert_eq!(t.first(), list.first().map(|(k, _)| *k));
            assert_eq!(t.len(), list.len());
            big |= matches!(t, EligTree::Big(_));
            if seq % 50 == 0 {
                let keys: Vec<Key> = list.iter().map(|(k, _)| *k).collect();
                assert_eq!(t.iter().collect::<Vec<_>>(), keys);
            }
        }
        let keys: Vec<Key> = list.iter().map(|(k, _)| *k).collect();
        assert_eq!(t.iter().collect::<Vec<_>>(), keys);
        assert!(big, "the queue never grew into a treap");
    }
}
