//! Chameleon's node managers (ASPLOS 2012 §3.2, §4.2, §4.3.4, §4.3.5).
//!
//! A node is a group of CPUs managed together (a socket in Chameleon). Its
//! manager decides which native CPUs form which execution object; the cluster
//! scheduler then decides when an object is active. This module is the
//! manager's allocation logic, kept free of the engine so that its decisions
//! can be checked step by step.
//!
//! * **Requests.** A thread asks for a property (`sequential`) with a level
//!   (number of CPUs) and a weight (how much it gains, e.g. its speedup).
//!   Properties are optional: a property no object of the node offers, or a
//!   level larger than any the node can build, is allowed — the thread gets
//!   a smaller object or runs natively, and the outcome carries a warning.
//! * **Creation.** The manager builds the object from unallocated CPUs that
//!   fit the fusion rule (a contiguous block of ids in Chameleon's emulation).
//!   A CPU belongs to at most one object. The object lives until its thread
//!   exits or asks for something else.
//! * **Reclaim.** When too few CPUs are free, the manager takes CPUs back
//!   from threads of lower weight, the lowest weight first, halving their
//!   objects (a 4-CPU object becomes a 2-CPU one, its representative keeps
//!   the lower half), until the request fits or no such thread is left.
//! * **Split.** If fewer CPUs than the smallest level are still free, the
//!   largest object (any weight) is split in half and the new thread gets the
//!   freed half, so that CPUs are not reserved for one thread while others
//!   wait (§4.3.5).
//! * **Redistribution.** CPUs left free after a request — and, when
//!   notification is on, CPUs freed by an exiting thread — go to objects that
//!   got fewer CPUs than they asked for, highest weight first (ties: earliest
//!   request), one level at a time. With notification off (the "3*" column of
//!   Figure 6) freed CPUs stay idle until the next request.
//! * **Defragmentation.** When enough CPUs are free but the fusion rule
//!   keeps them from forming the block an object needs, the manager migrates
//!   threads: it picks the block whose occupants, moved into free CPUs
//!   elsewhere, free it at the least cost (CPUs moved), and records each move.
//!
//! Every change is recorded as an [`Event`]; the scheduler applies them
//! (split, migrate, fuse again) and the reproductions read them as the CPU
//! allocation timeline (Figure 8).

use crate::hw::dynamic::FusionRule;
use crate::hw::CpuId;
use std::collections::BTreeMap;

/// A thread as the manager knows it (the caller's id).
pub type ThreadKey = usize;

/// What happened to a thread's object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A new object was built.
    Create,
    /// The object grew (freed CPUs were given to it).
    Grow,
    /// CPUs were reclaimed from the object, or it was split in half.
    Shrink,
    /// The object was moved to other CPUs (defragmentation).
    Move,
    /// The thread exited or dropped its request: its CPUs are free.
    Release,
    /// The thread runs natively (no object could be built for it).
    Native,
}

impl EventKind {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Create => "create",
            EventKind::Grow => "grow",
            EventKind::Shrink => "shrink",
            EventKind::Move => "move",
            EventKind::Release => "release",
            EventKind::Native => "native",
        }
    }
}

/// One change of the allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// To whose object.
    pub thread: ThreadKey,
    /// Its CPUs before (empty: none).
    pub before: Vec<CpuId>,
    /// Its CPUs after (empty: none).
    pub after: Vec<CpuId>,
    /// Why (`request`, `reclaim`, `split-largest`, `redistribute`, `defragment`, `exit`).
    pub reason: &'static str,
}

/// What a request or a release produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The changes, in the order they were made.
    pub events: Vec<Event>,
    /// Warnings for the run (a property or level no object offers).
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug)]
struct Entry {
    want: usize,
    weight: f64,
    arrival: u64,
    /// Offset of the object's first CPU in the node, and its size (0: native).
    start: usize,
    size: usize,
}

/// The manager of one node.
#[derive(Clone, Debug)]
pub struct NodeManager {
    cpus: Vec<CpuId>,
    levels: Vec<usize>,
    rule: FusionRule,
    notify: bool,
    properties: Vec<String>,
    threads: BTreeMap<ThreadKey, Entry>,
    arrivals: u64,
}

impl NodeManager {
    /// A manager for the CPUs `cpus` (sorted ascending on return), building
    /// objects of `levels` CPUs under `rule`, offering `properties`;
    /// `notify` says whether a thread's exit triggers redistribution.
    pub fn new(
        mut cpus: Vec<CpuId>,
        levels: &[usize],
        rule: FusionRule,
        notify: bool,
        properties: &[&str],
    ) -> Result<NodeManager, String> {
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.is_empty() {
            return Err("a node needs at least one cpu".into());
        }
        let mut lv: Vec<usize> = levels.to_vec();
        lv.sort_unstable();
        lv.dedup();
        for &l in &lv {
            if l < 2 {
                return Err(format!(
                    "level {l} is not allowed; an execution object has at least 2 cpus"
                ));
            }
            if l > cpus.len() {
                return Err(format!(
                    "level {l} is larger than the node ({} cpus)",
                    cpus.len()
                ));
            }
        }
        Ok(NodeManager {
            cpus,
            levels: lv,
            rule,
            notify,
            properties: properties.iter().map(|s| s.to_string()).collect(),
            threads: BTreeMap::new(),
            arrivals: 0,
        })
    }

    /// The node's CPUs.
    pub fn cpus(&self) -> &[CpuId] {
        &self.cpus
    }

    /// Whether exits trigger redistribution.
    pub fn notify(&self) -> bool {
        self.notify
    }

    /// The CPUs of `t`'s object (empty: none, it runs natively or is unknown).
    pub fn object_of(&self, t: ThreadKey) -> Vec<CpuId> {
        self.threads
            .get(&t)
            .map(|e| self.block(e.start, e.size))
            .unwrap_or_default()
    }

    /// Every thread's object, by thread.
    pub fn allocation(&self) -> Vec<(ThreadKey, Vec<CpuId>)> {
        self.threads
            .iter()
            .map(|(&t, e)| (t, self.block(e.start, e.size)))
            .collect()
    }

    /// CPUs of the node in no object.
    pub fn free_cpus(&self) -> usize {
        self.cpus.len() - self.threads.values().map(|e| e.size).sum::<usize>()
    }

    fn block(&self, start: usize, size: usize) -> Vec<CpuId> {
        self.cpus[start..start + size].to_vec()
    }

    fn min_level(&self) -> usize {
        self.levels.first().copied().unwrap_or(usize::MAX)
    }

    /// Thread `t` asks for `property` with `level` CPUs and `weight`. A
    /// thread that already has a request changes it (its old object is
    /// released first).
    pub fn request(
        &mut self,
        t: ThreadKey,
        property: &str,
        level: usize,
        weight: f64,
    ) -> Result<Outcome, String> {
        if !weight.is_finite() || weight <= 0.0 {
            return Err(format!("weight {weight} must be a number > 0"));
        }
        let mut out = Outcome::default();
        if self.threads.contains_key(&t) {
            self.release_inner(t, "request-change", &mut out);
        }
        let offered = self.properties.iter().any(|p| p == property);
        let want = if !offered {
            out.warnings.push(format!(
                "property \"{property}\" is offered by no execution object of this node (offered: {}); the thread runs natively",
                if self.properties.is_empty() { "none".to_string() } else { self.properties.join(", ") }
            ));
            0
        } else {
            let l = self
                .levels
                .iter()
                .copied()
                .filter(|&l| l <= level)
                .max()
                .unwrap_or(0);
            if l != level {
                let have: Vec<String> = self.levels.iter().map(|l| l.to_string()).collect();
                out.warnings.push(format!(
                    "no execution object of {level} cpus is offered (levels: {}); {}",
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    },
                    if l == 0 {
                        "the thread runs natively".to_string()
                    } else {
                        format!("the thread asks for {l}")
                    }
                ));
            }
            l
        };
        self.arrivals += 1;
        self.threads.insert(
            t,
            Entry {
                want,
                weight,
                arrival: self.arrivals,
                start: 0,
                size: 0,
            },
        );
        if want == 0 {
            out.events.push(Event {
                kind: EventKind::Native,
                thread: t,
                before: vec![],
                after: vec![],
                reason: "request",
            });
            return Ok(out);
        }
        let before = self.snapshot();
        let mut reasons: BTreeMap<ThreadKey, &'static str> = BTreeMap::new();
        let mut sizes: BTreeMap<ThreadKey, usize> =
            self.threads.iter().map(|(&k, e)| (k, e.size)).collect();
        let total = self.cpus.len();
        let free = |s: &BTreeMap<ThreadKey, usize>| total - s.values().sum::<usize>();
        // Reclaim from lower-weight threads, lowest weight first.
        while free(&sizes) < want {
            let victim = self
                .threads
                .iter()
                .filter(|(&k, e)| {
                    k != t && e.weight < weight && self.lower_level(sizes[&k]).is_some()
                })
                .min_by(|(ka, a), (kb, b)| {
                    a.weight
                        .total_cmp(&b.weight)
                        .then(sizes[kb].cmp(&sizes[ka]))
                        .then(a.arrival.cmp(&b.arrival))
                })
                .map(|(&k, _)| k);
            let Some(v) = victim else { break };
            let smaller = self.lower_level(sizes[&v]).unwrap_or(0);
            sizes.insert(v, smaller);
            reasons.insert(v, "reclaim");
        }
        // Split the largest object in half when not even the smallest level fits.
        if free(&sizes) < self.min_level() {
            let largest = self
                .threads
                .iter()
                .filter(|(&k, _)| {
                    k != t && self.levels.contains(&(sizes[&k] / 2)) && sizes[&k].is_multiple_of(2)
                })
                .max_by(|(ka, a), (kb, b)| {
                    sizes[ka].cmp(&sizes[kb]).then(b.arrival.cmp(&a.arrival))
                })
                .map(|(&k, _)| k);
            if let Some(v) = largest {
                let half = sizes[&v] / 2;
                sizes.insert(v, half);
                reasons.insert(v, "split-largest");
            }
        }
        let f = free(&sizes);
        let got = self
            .levels
            .iter()
            .copied()
            .filter(|&l| l <= want.min(f))
            .max()
            .unwrap_or(0);
        sizes.insert(t, got);
        reasons.insert(t, "request");
        self.redistribute(&mut sizes, &mut reasons);
        self.apply(sizes, &before, &reasons, &mut out);
        Ok(out)
    }

    /// Thread `t` exits (or drops its request): its CPUs are freed and, with
    /// notification on, given to objects that got fewer than they asked for.
    pub fn release(&mut self, t: ThreadKey) -> Outcome {
        let mut out = Outcome::default();
        self.release_inner(t, "exit", &mut out);
        out
    }

    fn release_inner(&mut self, t: ThreadKey, reason: &'static str, out: &mut Outcome) {
        let Some(e) = self.threads.remove(&t) else {
            return;
        };
        out.events.push(Event {
            kind: EventKind::Release,
            thread: t,
            before: self.block(e.start, e.size),
            after: vec![],
            reason,
        });
        if self.notify && e.size > 0 {
            let before = self.snapshot();
            let mut sizes: BTreeMap<ThreadKey, usize> =
                self.threads.iter().map(|(&k, e)| (k, e.size)).collect();
            let mut reasons = BTreeMap::new();
            self.redistribute(&mut sizes, &mut reasons);
            self.apply(sizes, &before, &reasons, out);
        }
    }

    /// The next configured level below `size` (for `size` itself a level).
    fn lower_level(&self, size: usize) -> Option<usize> {
        if size == 0 {
            return None;
        }
        self.levels.iter().copied().filter(|&l| l < size).max()
    }

    /// Give free CPUs to under-served objects, highest weight first.
    fn redistribute(
        &self,
        sizes: &mut BTreeMap<ThreadKey, usize>,
        reasons: &mut BTreeMap<ThreadKey, &'static str>,
    ) {
        let total = self.cpus.len();
        loop {
            let free = total - sizes.values().sum::<usize>();
            let mut order: Vec<(&ThreadKey, &Entry)> = self.threads.iter().collect();
            order.sort_by(|(_, a), (_, b)| {
                b.weight
                    .total_cmp(&a.weight)
                    .then(a.arrival.cmp(&b.arrival))
            });
            let mut grew = false;
            for (&k, e) in order {
                let s = sizes[&k];
                if s >= e.want {
                    continue;
                }
                let next = self.levels.iter().copied().find(|&l| l > s && l <= e.want);
                if let Some(n) = next {
                    if n - s <= free {
                        sizes.insert(k, n);
                        reasons.entry(k).or_insert("redistribute");
                        grew = true;
                        break;
                    }
                }
            }
            if !grew {
                return;
            }
        }
    }

    fn snapshot(&self) -> BTreeMap<ThreadKey, (usize, usize)> {
        self.threads
            .iter()
            .map(|(&k, e)| (k, (e.start, e.size)))
            .collect()
    }

    fn rule_ok(&self, start: usize, size: usize) -> bool {
        if size == 0 {
            return true;
        }
        if start + size > self.cpus.len() {
            return false;
        }
        let b = &self.cpus[start..start + size];
        let contiguous = b.windows(2).all(|w| w[1] == w[0] + 1);
        match self.rule {
            FusionRule::Any => true,
            FusionRule::Contiguous => contiguous,
            FusionRule::Aligned => contiguous && b[0].is_multiple_of(size),
            // The manager knows ids, not cores: clusters number a core's
            // hyperthreads consecutively from a multiple of the SMT width,
            // so a core is an aligned block.
            FusionRule::Siblings => contiguous && b[0].is_multiple_of(size),
        }
    }

    /// Lay out the new sizes: shrunk objects keep their lower part, grown
    /// ones extend in place when they can, the others take the first free
    /// block the rule allows, and when none fits the manager migrates
    /// threads to make one.
    fn apply(
        &mut self,
        sizes: BTreeMap<ThreadKey, usize>,
        before: &BTreeMap<ThreadKey, (usize, usize)>,
        reasons: &BTreeMap<ThreadKey, &'static str>,
        out: &mut Outcome,
    ) {
        let n = self.cpus.len();
        // owner[i]: thread on CPU offset i.
        let mut owner: Vec<Option<ThreadKey>> = vec![None; n];
        let mut place: BTreeMap<ThreadKey, (usize, usize)> = BTreeMap::new();
        // Keep (the lower part of) objects that did not grow.
        for (&k, &s) in &sizes {
            if let Some(&(st, old)) = before.get(&k) {
                if s <= old && s > 0 {
                    for o in owner.iter_mut().skip(st).take(s) {
                        *o = Some(k);
                    }
                    place.insert(k, (st, s));
                }
            }
        }
        // Then grown and new objects, highest weight first.
        let mut rest: Vec<ThreadKey> = sizes
            .iter()
            .filter(|(k, &s)| s > 0 && !place.contains_key(k))
            .map(|(&k, _)| k)
            .collect();
        rest.sort_by(|a, b| {
            let (ea, eb) = (&self.threads[a], &self.threads[b]);
            eb.weight
                .total_cmp(&ea.weight)
                .then(ea.arrival.cmp(&eb.arrival))
        });
        let mut moved: BTreeMap<ThreadKey, (usize, usize)> = BTreeMap::new();
        for k in rest {
            let s = sizes[&k];
            let old = before.get(&k).copied().filter(|&(_, os)| os > 0);
            let free_at = |owner: &[Option<ThreadKey>], st: usize| {
                st + s <= n
                    && owner[st..st + s]
                        .iter()
                        .all(|o| o.is_none() || *o == Some(k))
            };
            // Own CPUs are free for the thread itself while it grows.
            if let Some((st, os)) = old {
                for o in owner.iter_mut().skip(st).take(os) {
                    if o.is_none() {
                        *o = Some(k);
                    }
                }
            }
            let mut starts: Vec<usize> = (0..n).filter(|&st| self.rule_ok(st, s)).collect();
            // Prefer extending in place, then the lowest block.
            if let Some((st, _)) = old {
                starts.sort_by_key(|&x| (x != st, x));
            }
            let chosen = starts.iter().copied().find(|&st| free_at(&owner, st));
            let st = match chosen {
                Some(st) => st,
                None => match self.defragment(&mut owner, &mut place, k, s, &starts) {
                    Some((st, migrated)) => {
                        for (m, from) in migrated {
                            moved.entry(m).or_insert(from);
                        }
                        st
                    }
                    None => {
                        // No block can be freed (objects straddle every
                        // candidate): keep the old object if its CPUs are
                        // still free, else the largest smaller level that
                        // fits anywhere, else run natively.
                        for o in owner.iter_mut() {
                            if *o == Some(k) {
                                *o = None;
                            }
                        }
                        let mut fallback = old.filter(|&(ost, os)| {
                            os <= s && owner[ost..ost + os].iter().all(|o| o.is_none())
                        });
                        if fallback.is_none() {
                            for &l in self.levels.iter().rev().filter(|&&l| l < s) {
                                let st = (0..n).find(|&st| {
                                    self.rule_ok(st, l)
                                        && owner[st..st + l].iter().all(|o| o.is_none())
                                });
                                if let Some(st) = st {
                                    fallback = Some((st, l));
                                    break;
                                }
                            }
                        }
                        if let Some((st, l)) = fallback {
                            for o in owner.iter_mut().skip(st).take(l) {
                                *o = Some(k);
                            }
                            place.insert(k, (st, l));
                        }
                        continue;
                    }
                },
            };
            for o in owner.iter_mut() {
                if *o == Some(k) {
                    *o = None;
                }
            }
            for o in owner.iter_mut().skip(st).take(s) {
                *o = Some(k);
            }
            place.insert(k, (st, s));
        }
        // Commit and record.
        let keys: Vec<ThreadKey> = self.threads.keys().copied().collect();
        for k in keys {
            let (st, s) = place.get(&k).copied().unwrap_or((0, 0));
            let (ost, os) = before.get(&k).copied().unwrap_or((0, 0));
            let e = self.threads.get_mut(&k).expect("known thread");
            e.start = st;
            e.size = s;
            let new_thread = !before.contains_key(&k);
            let b = if os > 0 {
                self.cpus[ost..ost + os].to_vec()
            } else {
                vec![]
            };
            let a = if s > 0 {
                self.cpus[st..st + s].to_vec()
            } else {
                vec![]
            };
            if new_thread {
                out.events.push(Event {
                    kind: if s > 0 {
                        EventKind::Create
                    } else {
                        EventKind::Native
                    },
                    thread: k,
                    before: vec![],
                    after: a,
                    reason: "request",
                });
                continue;
            }
            if b == a {
                continue;
            }
            let kind = if s > os {
                EventKind::Grow
            } else if s < os {
                EventKind::Shrink
            } else {
                EventKind::Move
            };
            let reason = if kind == EventKind::Move || (moved.contains_key(&k) && s == os) {
                "defragment"
            } else {
                reasons.get(&k).copied().unwrap_or("redistribute")
            };
            out.events.push(Event {
                kind,
                thread: k,
                before: b,
                after: a,
                reason,
            });
        }
    }

    /// Find the block for `k` (size `s`) whose occupants can move to free
    /// CPUs elsewhere at the least cost; move them. Returns the block's
    /// start and the threads moved with their old placement.
    #[allow(clippy::type_complexity)]
    fn defragment(
        &self,
        owner: &mut [Option<ThreadKey>],
        place: &mut BTreeMap<ThreadKey, (usize, usize)>,
        k: ThreadKey,
        s: usize,
        starts: &[usize],
    ) -> Option<(usize, Vec<(ThreadKey, (usize, usize))>)> {
        let mut best: Option<(
            usize,
            usize,
            Vec<Option<ThreadKey>>,
            Vec<(ThreadKey, (usize, usize))>,
        )> = None;
        for &st in starts {
            let mut trial: Vec<Option<ThreadKey>> = owner.to_vec();
            for o in trial.iter_mut() {
                if *o == Some(k) {
                    *o = None;
                }
            }
            let mut occupants: Vec<ThreadKey> =
                trial[st..st + s].iter().flatten().copied().collect();
            occupants.dedup();
            // Occupants must lie wholly inside the block.
            if occupants.iter().any(|o| {
                let (ost, os) = place[o];
                ost < st || ost + os > st + s
            }) {
                continue;
            }
            for o in trial.iter_mut().skip(st).take(s) {
                *o = Some(k);
            }
            let mut ok = true;
            let mut cost = 0;
            let mut moves = Vec::new();
            for &m in &occupants {
                let (ost, os) = place[&m];
                let dest = (0..owner.len())
                    .filter(|&d| self.rule_ok(d, os))
                    .find(|&d| {
                        d + os <= trial.len() && trial[d..d + os].iter().all(|o| o.is_none())
                    });
                match dest {
                    Some(d) => {
                        for o in trial.iter_mut().skip(d).take(os) {
                            *o = Some(m);
                        }
                        cost += os;
                        moves.push((m, (ost, os), d));
                    }
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            if !ok {
                continue;
            }
            if best.as_ref().is_none_or(|(c, _, _, _)| cost < *c) {
                let mv = moves.iter().map(|&(m, from, _)| (m, from)).collect();
                best = Some((cost, st, trial, mv));
            }
        }
        let (_, st, trial, mv) = best?;
        owner.copy_from_slice(&trial);
        // Update placements of moved threads from the new owner map.
        for (m, _) in &mv {
            let first = owner
                .iter()
                .position(|o| *o == Some(*m))
                .expect("moved thread placed");
            let os = place[m].1;
            place.insert(*m, (first, os));
        }
        Some((st, mv))
    }
}
