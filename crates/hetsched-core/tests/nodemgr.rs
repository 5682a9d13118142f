//! Chameleon's node managers, worked by hand: which CPUs each execution
//! object gets as threads arrive, change their requests and exit.

use hetsched_core::hw::dynamic::FusionRule;
use hetsched_core::policy::chameleon::nodemgr::{EventKind, NodeManager, Outcome};

fn node(n: usize, notify: bool) -> NodeManager {
    NodeManager::new(
        (0..n).collect(),
        &[2, 4],
        FusionRule::Contiguous,
        notify,
        &["sequential"],
    )
    .expect("valid node")
}

fn sizes(nm: &NodeManager, threads: &[usize]) -> Vec<usize> {
    threads.iter().map(|&t| nm.object_of(t).len()).collect()
}

fn ask(nm: &mut NodeManager, t: usize, level: usize, weight: f64) -> Outcome {
    nm.request(t, "sequential", level, weight)
        .expect("valid request")
}

/// Every object is a contiguous block, and no CPU is in two objects.
fn check_disjoint(nm: &NodeManager) {
    let mut seen = std::collections::BTreeSet::new();
    for (_, cpus) in nm.allocation() {
        assert!(
            cpus.windows(2).all(|w| w[1] == w[0] + 1),
            "{cpus:?} not contiguous"
        );
        for c in cpus {
            assert!(seen.insert(c), "cpu {c} in two objects");
        }
    }
}

// Figure 8's sequence on a 10-CPU node, weights = speedups on a 4-CPU
// object (Table 2: low 1.5, medium 1.75, high 2.0). Threads: 0, 1 astar;
// 2 lbm; 3 sjeng.
#[test]
fn figure8_allocation_sequence() {
    let mut nm = node(10, true);
    ask(&mut nm, 0, 4, 1.5);
    ask(&mut nm, 1, 4, 1.5);
    assert_eq!(nm.object_of(0), vec![0, 1, 2, 3]);
    assert_eq!(nm.object_of(1), vec![4, 5, 6, 7]);
    assert_eq!(nm.free_cpus(), 2);
    // (a) lbm: 2 free; reclaim 2 from the first astar (lower weight): 4.
    let out = ask(&mut nm, 2, 4, 1.75);
    assert_eq!(sizes(&nm, &[0, 1, 2]), vec![2, 4, 4]);
    assert!(out
        .events
        .iter()
        .any(|e| e.thread == 0 && e.kind == EventKind::Shrink && e.reason == "reclaim"));
    // The reclaimed astar would keep CPUs 0-1, leaving 2-3 and 8-9 free: not
    // a block. The cheapest block to free is 0-3 (move 2 CPUs): the astar
    // moves to 8-9 and lbm gets 0-3.
    assert_eq!(nm.object_of(0), vec![8, 9]);
    assert_eq!(nm.object_of(2), vec![0, 1, 2, 3]);
    check_disjoint(&nm);
    // (b) sjeng: reclaim from the other astar (1.5), then from lbm (1.75).
    let out = ask(&mut nm, 3, 4, 2.0);
    assert_eq!(sizes(&nm, &[0, 1, 2, 3]), vec![2, 2, 2, 4]);
    let shrunk: Vec<usize> = out
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Shrink)
        .map(|e| e.thread)
        .collect();
    assert_eq!(shrunk, vec![1, 2]);
    // astar 4-5, lbm 0-1 then moved to 6-7 so that sjeng gets 0-3.
    assert_eq!(nm.object_of(1), vec![4, 5]);
    assert_eq!(nm.object_of(2), vec![6, 7]);
    assert_eq!(nm.object_of(3), vec![0, 1, 2, 3]);
    check_disjoint(&nm);
    // (c) lbm exits: its 2 CPUs go to the first astar (equal weights: the
    // earlier request).
    let out = nm.release(2);
    assert_eq!(sizes(&nm, &[0, 1, 3]), vec![4, 2, 4]);
    assert_eq!(nm.object_of(0), vec![6, 7, 8, 9]);
    assert!(out
        .events
        .iter()
        .any(|e| e.thread == 0 && e.kind == EventKind::Grow && e.reason == "redistribute"));
    check_disjoint(&nm);
    // (d) sjeng exits: the second astar gets 4.
    nm.release(3);
    assert_eq!(sizes(&nm, &[0, 1]), vec![4, 4]);
    // 4-7 is taken: the astar grows into the block sjeng left.
    assert_eq!(nm.object_of(1), vec![0, 1, 2, 3]);
    assert_eq!(nm.free_cpus(), 2);
    check_disjoint(&nm);
}

// Figure 6: eight CPUs left to N-Queen threads of equal weight.
#[test]
fn equal_weights_split_the_largest_object_in_half() {
    for (k, expect) in [(2, vec![4, 4]), (3, vec![2, 4, 2]), (4, vec![2, 2, 2, 2])] {
        let mut nm = node(8, true);
        for t in 0..k {
            ask(&mut nm, t, 4, 2.0);
        }
        let ts: Vec<usize> = (0..k).collect();
        assert_eq!(sizes(&nm, &ts), expect, "{k} threads");
        check_disjoint(&nm);
    }
    // The third thread got half of the first (the largest, earliest) object.
    let mut nm = node(8, true);
    ask(&mut nm, 0, 4, 2.0);
    ask(&mut nm, 1, 4, 2.0);
    let out = ask(&mut nm, 2, 4, 2.0);
    let split = out
        .events
        .iter()
        .find(|e| e.kind == EventKind::Shrink)
        .expect("a split");
    assert_eq!((split.thread, split.reason), (0, "split-largest"));
    assert_eq!(split.before, vec![0, 1, 2, 3]);
    assert_eq!(split.after, vec![0, 1]);
    assert_eq!(nm.object_of(2), vec![2, 3]);
}

// Figure 6's "3*": when the thread on the 4-CPU object exits, notification
// gives both others 4 CPUs (one of them migrated to make a block); without
// it the freed CPUs stay idle.
#[test]
fn notification_on_exit_and_its_switch() {
    let mut nm = node(8, true);
    for t in 0..3 {
        ask(&mut nm, t, 4, 2.0);
    }
    assert_eq!(nm.object_of(1), vec![4, 5, 6, 7]);
    let out = nm.release(1);
    assert_eq!(sizes(&nm, &[0, 2]), vec![4, 4]);
    check_disjoint(&nm);
    // Thread 0 (CPUs 0-1) grows in place to 0-3 after thread 2 (2-3) moves
    // to the freed block; thread 2 then grows there.
    assert_eq!(nm.object_of(0), vec![0, 1, 2, 3]);
    assert_eq!(nm.object_of(2), vec![4, 5, 6, 7]);
    assert!(out
        .events
        .iter()
        .any(|e| e.thread == 2 && e.before == vec![2, 3]));

    let mut nm = node(8, false);
    for t in 0..3 {
        ask(&mut nm, t, 4, 2.0);
    }
    let out = nm.release(1);
    assert_eq!(out.events.len(), 1);
    assert_eq!(out.events[0].kind, EventKind::Release);
    assert_eq!(sizes(&nm, &[0, 2]), vec![2, 2]);
    assert_eq!(nm.free_cpus(), 4);
    // The next request does invoke the manager: it is served, and the CPUs
    // left over go to the others.
    ask(&mut nm, 3, 2, 1.0);
    assert_eq!(sizes(&nm, &[0, 2, 3]), vec![4, 2, 2]);
}

// Reclaim takes from lower weights only; a heavier request that finds no
// lower-weight thread splits the largest object.
#[test]
fn reclaim_prefers_the_lowest_weight() {
    let mut nm = node(8, true);
    ask(&mut nm, 0, 4, 1.75);
    ask(&mut nm, 1, 4, 1.25);
    // A lighter thread than both: nothing to reclaim, the largest (earliest)
    // is split.
    ask(&mut nm, 2, 4, 1.0);
    assert_eq!(sizes(&nm, &[0, 1, 2]), vec![2, 4, 2]);
    // A heavier one: reclaims from thread 1 (weight 1.25, 4 CPUs) first.
    ask(&mut nm, 3, 4, 2.0);
    assert_eq!(sizes(&nm, &[0, 1, 2, 3]), vec![2, 2, 2, 2]);
    check_disjoint(&nm);
}

// Defragmentation: enough CPUs are free, but not contiguous.
#[test]
fn defragmentation_migrates_the_cheapest_block() {
    let mut nm = node(8, true);
    for t in 0..4 {
        ask(&mut nm, t, 2, 1.0);
    }
    // Free CPUs 2-3 and 6-7.
    nm.release(1);
    nm.release(3);
    assert_eq!(nm.free_cpus(), 4);
    let out = ask(&mut nm, 4, 4, 1.0);
    assert_eq!(nm.object_of(4).len(), 4);
    let moves: Vec<_> = out
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Move)
        .collect();
    assert_eq!(moves.len(), 1, "{:?}", out.events);
    assert_eq!(moves[0].reason, "defragment");
    check_disjoint(&nm);
}

// A request change releases the old object first.
#[test]
fn request_change_reallocates() {
    let mut nm = node(8, true);
    ask(&mut nm, 0, 4, 1.0);
    ask(&mut nm, 1, 4, 1.0);
    ask(&mut nm, 0, 2, 1.0);
    assert_eq!(sizes(&nm, &[0, 1]), vec![2, 4]);
    check_disjoint(&nm);
}

#[test]
fn optional_properties_warn_and_run_natively() {
    let mut nm = node(8, true);
    let out = nm.request(0, "vector", 4, 1.0).expect("allowed");
    assert!(nm.object_of(0).is_empty());
    assert_eq!(out.events[0].kind, EventKind::Native);
    assert!(
        out.warnings[0].contains("\"vector\" is offered by no execution object"),
        "{:?}",
        out.warnings
    );
    let out = ask(&mut nm, 1, 8, 1.0);
    assert_eq!(nm.object_of(1).len(), 4);
    assert!(
        out.warnings[0].contains("no execution object of 8 cpus"),
        "{:?}",
        out.warnings
    );
}

#[test]
fn bad_input_is_refused() {
    let mut nm = node(8, true);
    for w in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = nm.request(0, "sequential", 2, w).unwrap_err();
        assert!(e.contains("must be a number > 0"), "{e}");
    }
    let e =
        NodeManager::new((0..4).collect(), &[2, 8], FusionRule::Contiguous, true, &[]).unwrap_err();
    assert!(e.contains("larger than the node"), "{e}");
    let e =
        NodeManager::new((0..4).collect(), &[1], FusionRule::Contiguous, true, &[]).unwrap_err();
    assert!(e.contains("at least 2 cpus"), "{e}");
    let e = NodeManager::new(vec![], &[2], FusionRule::Contiguous, true, &[]).unwrap_err();
    assert!(e.contains("at least one cpu"), "{e}");
}

// Aligned rule: objects start at a multiple of their size.
#[test]
fn aligned_rule_places_aligned_blocks() {
    let mut nm = NodeManager::new(
        (12..24).collect(),
        &[2, 4],
        FusionRule::Aligned,
        true,
        &["sequential"],
    )
    .expect("node");
    ask(&mut nm, 0, 2, 1.0);
    ask(&mut nm, 1, 4, 1.0);
    ask(&mut nm, 2, 4, 1.0);
    for (_, cpus) in nm.allocation() {
        assert_eq!(cpus[0] % cpus.len(), 0, "{cpus:?}");
    }
    check_disjoint(&nm);
}

// A grow that no move can make room for keeps the old object.
#[test]
fn a_grow_without_room_keeps_the_old_object() {
    let mut nm = node(12, true);
    ask(&mut nm, 0, 4, 1.5); // 0-3
    ask(&mut nm, 1, 4, 2.0); // 4-7
    ask(&mut nm, 2, 4, 2.0); // 8-11
                             // Equal-or-higher weights: the largest earliest object (0) is split.
    ask(&mut nm, 3, 4, 2.0);
    assert_eq!(nm.object_of(0), vec![0, 1]);
    assert_eq!(nm.object_of(3), vec![2, 3]);
    // Thread 1 exits: thread 3 (weight 2.0) grows first; 2-5 holds it in
    // place. Thread 0 (0-1) then has 2 free CPUs (6-7) but every 4-block
    // holds part of another object: it keeps 0-1.
    nm.release(1);
    assert_eq!(nm.object_of(3), vec![2, 3, 4, 5]);
    assert_eq!(nm.object_of(0), vec![0, 1]);
    assert_eq!(nm.free_cpus(), 2);
    check_disjoint(&nm);
}
