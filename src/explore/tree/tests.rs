//! Tests of the tree search: counts of dfs and icb, shards, the state cache, bounded
//! partial-order reduction on synthetic programs.

use super::*;
use crate::explore::testing::{binomial, preemptions, Program, SynOp, Synthetic};

#[test]
fn dfs_enumerates_every_interleaving_once() {
    for (a, b) in [(1, 1), (2, 2), (3, 2), (4, 4)] {
        let prog = Synthetic { steps: vec![a, b] };
        let mut s = TreeSearch::dfs();
        let (seen, n) = prog.run_all(&mut s, 100_000);
        let expected = binomial((a + b) as u64, a as u64);
        assert_eq!(n, expected, "{a}+{b} steps");
        assert_eq!(seen.len() as u64, expected, "no schedule twice");
        assert!(s.coverage().exhausted);
    }
}

#[test]
fn dfs_three_threads_multinomial() {
    let prog = Synthetic {
        steps: vec![2, 2, 2],
    };
    let mut s = TreeSearch::dfs();
    let (_, n) = prog.run_all(&mut s, 100_000);
    assert_eq!(n, 90); // 6! / (2! 2! 2!)
}

#[test]
fn icb_bound_zero_gives_exactly_the_non_preemptive_executions() {
    let prog = Synthetic {
        steps: vec![3, 3, 3],
    };
    let mut s = TreeSearch::icb(Some(0));
    let (seen, n) = prog.run_all(&mut s, 100_000);
    // Without preemptions each thread runs to completion: 3! orders.
    assert_eq!(n, 6);
    assert!(seen.iter().all(|sch| preemptions(sch, &prog.steps) == 0));
    assert_eq!(s.coverage().preemption_bound_completed, Some(0));
}

#[test]
fn icb_explores_in_order_of_preemptions_and_covers_everything_once() {
    let prog = Synthetic { steps: vec![3, 2] };
    let mut s = TreeSearch::icb(None);
    let mut last = 0;
    let mut all = std::collections::HashSet::new();
    let mut n = 0;
    while s.begin_execution(n).is_some() {
        let sch = prog.run_once(&mut s);
        let p = preemptions(&sch, &prog.steps);
        assert!(p >= last, "preemptions must not decrease: {p} after {last}");
        last = p;
        assert!(all.insert(sch), "explored twice");
        n += 1;
    }
    assert_eq!(n, binomial(5, 2));
}

#[test]
fn icb_cap_stops_at_the_bound() {
    let prog = Synthetic { steps: vec![3, 3] };
    let mut s = TreeSearch::icb(Some(1));
    let (seen, _) = prog.run_all(&mut s, 100_000);
    assert!(seen.iter().all(|sch| preemptions(sch, &prog.steps) <= 1));
    let all_le1 = {
        let mut d = TreeSearch::dfs();
        let (every, _) = prog.run_all(&mut d, 100_000);
        every
            .into_iter()
            .filter(|sch| preemptions(sch, &prog.steps) <= 1)
            .count()
    };
    assert_eq!(seen.len(), all_le1);
    assert!(s.coverage().exhausted);
    assert_eq!(s.coverage().preemption_bound_completed, Some(1));
}

/// The schedules shard `index` of `count` counts as its own, in order, and its prefix
/// runs (executions it ended or left to another shard).
fn shard_schedules(
    prog: &Synthetic,
    make: impl Fn() -> TreeSearch,
    index: u32,
    count: u32,
) -> (Vec<Vec<ThreadId>>, u64) {
    let mut s = make().with_shard(Some(TreeShard { index, count }));
    let (mut own, mut outside) = (Vec::new(), 0);
    while s.begin_execution(0).is_some() {
        let sch = prog.run_once(&mut s);
        if s.ended_outside_share() {
            outside += 1;
        } else {
            own.push(sch);
        }
    }
    assert!(s.coverage().exhausted);
    assert_eq!(s.coverage().systematic_executions, own.len() as u64);
    (own, outside)
}

#[test]
fn shards_explore_the_unsharded_schedules_once_each() {
    type Make = fn() -> TreeSearch;
    let searches: [(&str, Make); 4] = [
        ("dfs", TreeSearch::dfs),
        ("icb", || TreeSearch::icb(None)),
        ("icb ≤ 1", || TreeSearch::icb(Some(1))),
        ("icb ≤ 0", || TreeSearch::icb(Some(0))),
    ];
    for steps in [
        vec![1, 1],
        vec![2, 2],
        vec![3, 2],
        vec![2, 2, 1],
        vec![1, 1, 1, 1],
    ] {
        let prog = Synthetic {
            steps: steps.clone(),
        };
        for (name, make) in searches {
            let mut whole = make();
            let mut unsharded = Vec::new();
            while whole.begin_execution(0).is_some() {
                unsharded.push(prog.run_once(&mut whole));
            }
            let mut expected = unsharded.clone();
            expected.sort();
            for count in 1..=6u32 {
                let mut union = Vec::new();
                let mut parts = Vec::new();
                for index in 0..count {
                    let (own, _) = shard_schedules(&prog, make, index, count);
                    parts.push(own.len());
                    union.extend(own);
                }
                union.sort();
                assert_eq!(union, expected, "{name} on {steps:?} in {count} shards");
                if count == 2 {
                    // The first choice alone splits the tree in two.
                    assert!(parts.iter().all(|&n| n > 0), "{name} {steps:?}: {parts:?}");
                }
            }
        }
    }
}

#[test]
fn a_short_schedule_is_run_by_its_range_and_counted_by_its_first_shard() {
    // One choice, two schedules: shards 0 and 1 share the first child's subtree.
    let prog = Synthetic { steps: vec![1, 1] };
    let (own0, outside0) = shard_schedules(&prog, TreeSearch::dfs, 0, 4);
    let (own1, outside1) = shard_schedules(&prog, TreeSearch::dfs, 1, 4);
    let (own2, _) = shard_schedules(&prog, TreeSearch::dfs, 2, 4);
    assert_eq!((own0, outside0), (vec![vec![0, 1]], 0));
    assert_eq!((own1.len(), outside1), (0, 1));
    assert_eq!(own2, vec![vec![1, 0]]);
}

#[test]
fn an_icb_shard_stops_where_its_children_exceed_the_bound() {
    // Three shards: T1 first is shards 1 and 2's; after it, switching back to T0 (a
    // preemption) is shard 1's, T1 going on shard 2's. At bound 0 shard 1's run stops
    // there; it explores that child at bound 1.
    let prog = Synthetic { steps: vec![2, 2] };
    let (own, outside) = shard_schedules(&prog, || TreeSearch::icb(Some(1)), 1, 3);
    assert!(outside > 0);
    assert!(own.iter().all(|sch| preemptions(sch, &prog.steps) <= 1));
}

#[test]
fn state_cache_expands_each_lattice_point_once() {
    use crate::explore::StateTable;
    use std::sync::{Arc, Mutex};
    for k in 1..6usize {
        let prog = Synthetic { steps: vec![k, k] };
        let table = Arc::new(Mutex::new(StateTable::default()));
        let mut s = TreeSearch::dfs().with_state_cache(Some(table.clone()));
        // The state is a function of the counter (both threads append the same thing).
        let (_, transitions) =
            prog.run_all_stateful(&mut s, |left| (left[0] * 100 + left[1]) as u64);
        assert!(s.coverage().exhausted);
        assert_eq!(transitions, (2 * k * (k + 1)) as u64, "k = {k}");
        // Every point but the end, where no thread is left to choose.
        assert_eq!(
            table.lock().unwrap().stats().states,
            ((k + 1) * (k + 1) - 1) as u64
        );
        // Without the table: every edge of the tree of interleavings.
        let mut d = TreeSearch::dfs();
        let (n, t) = prog.run_all_stateful(&mut d, |_| 0);
        assert_eq!(n, binomial(2 * k as u64, k as u64));
        assert_eq!(t, binomial(2 * k as u64 + 2, k as u64 + 1) - 2);
    }
}

#[test]
fn sleep_sets_with_the_state_cache_reach_every_final_state() {
    use crate::explore::testing::Program;
    use crate::explore::StateTable;
    use rand::SeedableRng;
    use std::sync::{Arc, Mutex};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(5);
    let (mut cached, mut with_sleep) = (0, 0);
    for size in [4, 5, 6] {
        for _ in 0..80 {
            let prog = Program::random(&mut rng, size);
            let (_, all) = prog.run_all_stateful(&mut TreeSearch::dfs(), 1_000_000);
            let table = || Some(Arc::new(Mutex::new(StateTable::default())));
            let mut plain = TreeSearch::dfs().with_state_cache(table());
            let (n_plain, seen) = prog.run_all_stateful(&mut plain, 1_000_000);
            assert_eq!(seen, all, "{:?}: the cache alone", prog.threads);
            let mut sleepy = TreeSearch::dfs().with_por(true).with_state_cache(table());
            assert!(sleepy.sleep_sets && !sleepy.por);
            let (n_sleep, seen) = prog.run_all_stateful(&mut sleepy, 1_000_000);
            assert!(sleepy.coverage().exhausted);
            assert_eq!(seen, all, "{:?}: the cache with sleep sets", prog.threads);
            cached += n_plain;
            with_sleep += n_sleep;
        }
    }
    eprintln!(
        "random programs: {cached} executions with the cache, {with_sleep} with sleep sets too"
    );
    assert!(with_sleep * 4 < cached * 3, "{with_sleep} vs {cached}");
}

#[test]
fn distinct_states_at_one_counter_are_all_explored() {
    use crate::explore::StateTable;
    use std::sync::{Arc, Mutex};
    let prog = Synthetic { steps: vec![2, 2] };
    let table = Arc::new(Mutex::new(StateTable::default()));
    let mut s = TreeSearch::dfs().with_state_cache(Some(table));
    // Every state distinct (hash of a counter of calls): nothing is pruned.
    let calls = std::cell::Cell::new(0u64);
    let (n, _) = prog.run_all_stateful(&mut s, |_| {
        calls.set(calls.get() + 1);
        calls.get()
    });
    assert_eq!(n, 6);
    assert_eq!(s.pruned_executions(), 0);
}
#[test]
fn bounded_por_without_a_cap_ends_with_every_trace() {
    use rand::SeedableRng;
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
    for _ in 0..40 {
        let prog = Program::random(&mut rng, 5);
        let (_, all) = prog.run_all(&mut TreeSearch::dpor(), 1_000_000);
        let mut s = TreeSearch::icb(None).with_por(true);
        let (_, bpor) = prog.run_all(&mut s, 1_000_000);
        assert!(s.is_exhausted());
        assert_eq!(bpor, all, "{:?}", prog.threads);
    }
}

#[test]
fn bounded_por_never_preempts_independent_threads() {
    // Threads on words of their own: nothing ever depends on the step of the thread
    // that ran last, so no preemption is released; only the free choices between
    // threads that finished (3! orders) are explored, as at bound 0.
    use SynOp::Write;
    let prog = Program {
        threads: vec![vec![Write(0); 4], vec![Write(1); 4], vec![Write(2); 4]],
    };
    let (unreduced, _) = prog.run_all(&mut TreeSearch::icb(Some(3)), 100_000);
    let mut s = TreeSearch::icb(Some(3)).with_por(true);
    let (n, traces) = prog.run_all(&mut s, 100_000);
    assert_eq!((n, traces.len()), (6, 1));
    assert!(unreduced > 1_000, "{unreduced}");
}
