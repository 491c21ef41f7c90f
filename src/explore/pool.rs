//! The shared work of a parallel tree search (`--jobs N` with dfs, icb or the portfolio's
//! icb member). Work items are schedule prefixes; a worker explores the whole subtree below
//! its item, and gives away its shallowest unexplored alternative when another worker waits
//! for work. For icb, prefixes beyond the current bound are collected, and the bound moves
//! to c+1 only once no worker holds an item at c: every execution with ≤ c preemptions runs
//! before any with c+1, and no schedule is explored twice.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::Hasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::prefix::Prefix;
use super::tree::{Deferred, Split};
use super::Coverage;
use crate::model::{Footprint, ThreadId};

/// A work item: explore below `prefix` at preemption bound `bound`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkItem {
    /// The choices leading to the subtree.
    pub prefix: Vec<ThreadId>,
    /// Preemption bound of the item.
    pub bound: u32,
    /// The sleep set of its branch node, when it was split off a reduced subtree
    /// ([`Split`]; `TreeSearch::with_branch_sleep`).
    pub sleep: Vec<(ThreadId, Footprint)>,
    /// The explored alternatives of the nodes above it ([`Split::above`];
    /// `TreeSearch::with_branch_above`).
    pub above: Vec<Vec<(ThreadId, Footprint)>>,
}

/// A queued prefix, with the sleep set of its branch node when it has one.
#[derive(Debug)]
struct Queued {
    prefix: Prefix,
    sleep: Vec<(ThreadId, Footprint)>,
    above: Vec<Vec<(ThreadId, Footprint)>>,
}

impl From<Prefix> for Queued {
    fn from(prefix: Prefix) -> Queued {
        Queued {
            prefix,
            sleep: Vec::new(),
            above: Vec::new(),
        }
    }
}

/// The subtrees (as the prefixes leading to them) that some worker of a reduced search
/// explores, has explored or has queued: with partial-order reduction the alternatives of a
/// node are found by the analysis of executions in any subtree, so several workers can want
/// the same one. Prefixes are kept as 64-bit SipHash keys (a collision, about n²/2⁶⁴ for n
/// prefixes, would skip one subtree).
#[derive(Debug, Clone, Default)]
pub struct Claims(Arc<Mutex<HashSet<u64>>>);

impl Claims {
    /// Claims `prefix`; false when someone did before (it is or will be explored).
    pub fn claim(&self, prefix: &[ThreadId]) -> bool {
        let mut h = PathHash::default();
        for &t in prefix {
            h.push(t);
        }
        self.claim_hashed(&h)
    }

    /// Claims the prefix hashed in `path` (as [`Self::claim`] does).
    pub fn claim_hashed(&self, path: &PathHash) -> bool {
        self.0.lock().expect("claims lock").insert(path.key())
    }

    /// Claims every prefix of `path` (the path a worker is exploring when it gives work
    /// away: nobody else needs to explore it).
    pub fn claim_path(&self, path: &[ThreadId]) {
        let mut h = PathHash::default();
        let mut set = self.0.lock().expect("claims lock");
        for &t in path {
            h.push(t);
            set.insert(h.key());
        }
    }
}

/// A path of choices hashed one choice at a time, so that the paths through a node cost
/// one step each: the 64-bit key [`Claims`] keeps, and a 128-bit one for a search's own
/// sets (a collision, about n²/2¹²⁸ for n paths, would skip one subtree).
#[derive(Debug, Clone)]
pub struct PathHash {
    /// SipHash of the choices: the claims' key.
    key: DefaultHasher,
    /// The same with a salt first: the other half of the 128-bit key.
    salted: DefaultHasher,
}

impl Default for PathHash {
    fn default() -> PathHash {
        let mut salted = DefaultHasher::new();
        salted.write_u64(0x7f4a_7c15);
        PathHash {
            key: DefaultHasher::new(),
            salted,
        }
    }
}

impl PathHash {
    /// Appends a choice.
    pub fn push(&mut self, t: ThreadId) {
        self.key.write_usize(t);
        self.salted.write_usize(t);
    }

    /// The path with `t` appended.
    pub fn with(&self, t: ThreadId) -> PathHash {
        let mut h = self.clone();
        h.push(t);
        h
    }

    /// The 64-bit key of the path.
    pub fn key(&self) -> u64 {
        self.key.finish()
    }

    /// The 128-bit key of the path.
    pub fn wide_key(&self) -> u128 {
        (self.key.finish() as u128) << 64 | self.salted.finish() as u128
    }
}

#[derive(Debug)]
struct PoolState {
    queue: VecDeque<Queued>,
    deferred: Vec<Prefix>,
    bound: u32,
    busy: usize,
    finished: bool,
    completed_bound: Option<u32>,
    executions: u64,
    /// Executions beyond the cap were left unexplored.
    beyond_cap: bool,
}

/// Shared work pool of one parallel tree search.
#[derive(Debug)]
pub struct TreePool {
    max_bound: Option<u32>,
    state: Mutex<PoolState>,
    changed: Condvar,
    hungry: AtomicUsize,
    claims: Claims,
}

impl TreePool {
    /// A pool holding the whole tree: unbounded dfs (`max_bound` None) or icb up to
    /// `max_bound` preemptions.
    pub fn new(max_bound: Option<u32>) -> TreePool {
        TreePool {
            max_bound,
            state: Mutex::new(PoolState {
                queue: VecDeque::from([Queued::from(Prefix::from_vec(&[]))]),
                deferred: Vec::new(),
                bound: 0,
                busy: 0,
                finished: false,
                completed_bound: None,
                executions: 0,
                beyond_cap: false,
            }),
            changed: Condvar::new(),
            hungry: AtomicUsize::new(0),
            claims: Claims::default(),
        }
    }

    /// The preemption cap (None: dfs).
    pub fn max_bound(&self) -> Option<u32> {
        self.max_bound
    }

    /// Takes a work item. With `wait`, blocks until one is available or the tree is done;
    /// without, returns None at once when none is queued. None after the tree is done.
    pub fn take(&self, wait: bool) -> Option<WorkItem> {
        let mut s = self.state.lock().expect("pool lock");
        loop {
            if s.finished {
                return None;
            }
            if let Some(q) = s.queue.pop_front() {
                s.busy += 1;
                return Some(WorkItem {
                    prefix: q.prefix.to_vec(),
                    bound: s.bound,
                    sleep: q.sleep,
                    above: q.above,
                });
            }
            if s.busy == 0 {
                // Nobody can produce more work at this bound.
                let more = !s.deferred.is_empty() && self.max_bound.is_some_and(|m| s.bound < m);
                if more {
                    s.completed_bound = Some(s.bound);
                    s.bound += 1;
                    let next = std::mem::take(&mut s.deferred);
                    s.queue.extend(next.into_iter().map(Queued::from));
                    continue;
                }
                s.finished = true;
                s.completed_bound = self.max_bound.map(|_| s.bound);
                self.changed.notify_all();
                return None;
            }
            if !wait {
                return None;
            }
            self.hungry.fetch_add(1, Ordering::SeqCst);
            s = self.changed.wait(s).expect("pool lock");
            self.hungry.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The registry of claimed alternatives shared by the workers' reduced tree searches.
    pub fn claims(&self) -> Claims {
        self.claims.clone()
    }

    /// Whether some worker waits for work (a busy worker should split its subtree).
    pub fn wants_work(&self) -> bool {
        self.hungry.load(Ordering::Relaxed) > 0
    }

    /// Hands a subtree split off a worker's to the pool.
    pub fn donate(&self, split: Split) {
        let mut s = self.state.lock().expect("pool lock");
        s.queue.push_back(Queued {
            prefix: Prefix::from_vec(&split.prefix),
            sleep: split.sleep,
            above: split.above,
        });
        self.changed.notify_one();
    }

    /// Partial-order reduction in one subtree wants `split.prefix` explored, in a part of the
    /// tree held by another worker (or already done): queued, with the sleep set its branch
    /// node would have in a sequential search, unless claimed before.
    pub fn request(&self, split: Split) {
        if !self.claims.claim(&split.prefix) {
            return;
        }
        let mut s = self.state.lock().expect("pool lock");
        if s.finished {
            return;
        }
        s.queue.push_back(Queued {
            prefix: Prefix::from_vec(&split.prefix),
            sleep: split.sleep,
            above: split.above,
        });
        self.changed.notify_one();
    }

    /// A worker finished its item; `deferred` is what it left beyond the bound.
    pub fn release(&self, deferred: Deferred, executions: u64) {
        let mut s = self.state.lock().expect("pool lock");
        s.busy -= 1;
        s.executions += executions;
        let cap = self.max_bound;
        let bound = s.bound;
        s.beyond_cap |= deferred.beyond_cap;
        if cap.is_some_and(|m| bound < m) {
            s.deferred.extend(deferred.prefixes);
        } else if !deferred.prefixes.is_empty() {
            // Beyond the cap: those executions are never explored.
            s.beyond_cap = true;
        }
        self.changed.notify_all();
    }

    /// Whether the whole tree (within the cap) is explored.
    pub fn is_finished(&self) -> bool {
        self.state.lock().expect("pool lock").finished
    }

    /// Stops the search: waiting workers get no more work.
    pub fn close(&self) {
        let mut s = self.state.lock().expect("pool lock");
        s.queue.clear();
        if !s.finished {
            s.finished = true;
            s.completed_bound = s.completed_bound.filter(|&b| b < s.bound);
            s.executions += 0;
        }
        self.changed.notify_all();
    }

    /// What has been covered.
    pub fn coverage(&self, closed_early: bool) -> Coverage {
        let s = self.state.lock().expect("pool lock");
        let exhausted = s.finished && !closed_early;
        Coverage {
            exhausted,
            preemption_bound_completed: if exhausted {
                s.completed_bound
            } else {
                s.completed_bound.filter(|&b| b < s.bound)
            },
            systematic_executions: s.executions,
            synchronisation_exhausted: exhausted,
            beyond_preemption_bound: s.beyond_cap,
            ..Coverage::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::{binomial, preemptions, Synthetic};
    use crate::explore::{Scheduler, TreeHooks, TreeSearch};
    use std::collections::HashSet;

    /// Simulates `workers` workers taking turns, each running one execution per turn and
    /// splitting when asked; returns every schedule explored.
    fn simulate(prog: &Synthetic, max_bound: Option<u32>, workers: usize) -> Vec<Vec<ThreadId>> {
        simulate_with(max_bound, false, workers, None, |t| prog.run_once(t))
    }

    /// `simulate` for any program model, with partial-order reduction on or off.
    fn simulate_with<T>(
        max_bound: Option<u32>,
        por: bool,
        workers: usize,
        shard: Option<crate::explore::shard::TreeShard>,
        mut run: impl FnMut(&mut TreeSearch) -> T,
    ) -> Vec<T> {
        let pool = TreePool::new(max_bound);
        let mut held: Vec<Option<(TreeSearch, u64)>> = (0..workers).map(|_| None).collect();
        let mut all = Vec::new();
        loop {
            let mut progressed = false;
            for slot in held.iter_mut() {
                if slot.is_none() {
                    if let Some(item) = pool.take(false) {
                        let tree = TreeSearch::subtree(max_bound, item.bound, item.prefix);
                        let tree = tree
                            .with_shard(shard)
                            .with_por(por)
                            .with_branch_sleep(item.sleep)
                            .with_branch_above(item.above);
                        *slot = Some((tree.with_claims(pool.claims()), 0));
                    }
                }
                let Some((tree, n)) = slot.as_mut() else {
                    continue;
                };
                progressed = true;
                if tree.begin_execution(0).is_none() {
                    let deferred = tree.take_deferred();
                    let n = *n;
                    *slot = None;
                    pool.release(deferred, n);
                    continue;
                }
                let schedule = run(tree);
                if !tree.ended_outside_share() {
                    all.push(schedule);
                    *n += 1;
                }
                for p in tree.take_requests() {
                    pool.request(p);
                }
                // Pretend another worker is always hungry: split whenever possible.
                if let Some(p) = tree.split() {
                    pool.donate(p);
                }
            }
            if !progressed
                && pool
                    .take(false)
                    .map(|i| {
                        pool.donate(Split {
                            prefix: i.prefix,
                            sleep: i.sleep,
                            above: i.above,
                        })
                    })
                    .is_none()
            {
                // Nothing held and nothing to take: the pool finished (or advanced a bound
                // and we put the item back above).
                if pool.is_finished() {
                    break;
                }
            }
        }
        all
    }

    #[test]
    fn parallel_dfs_explores_every_schedule_exactly_once() {
        let prog = Synthetic { steps: vec![3, 3] };
        for workers in [1, 2, 3] {
            let all = simulate(&prog, None, workers);
            let distinct: HashSet<_> = all.iter().cloned().collect();
            assert_eq!(
                all.len(),
                distinct.len(),
                "{workers} workers: a schedule twice"
            );
            assert_eq!(all.len() as u64, binomial(6, 3), "{workers} workers");
        }
    }

    #[test]
    fn parallel_dpor_loses_no_trace_on_random_programs() {
        use crate::explore::testing::Program;
        use rand::SeedableRng;
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(11);
        let (mut sequential, mut parallel) = (0, 0);
        for _ in 0..300 {
            let prog = Program::random(&mut rng, 5);
            let full: HashSet<_> = simulate_with(None, false, 1, None, |t| prog.run_once(t).1)
                .into_iter()
                .collect();
            sequential += simulate_with(None, true, 1, None, |t| prog.run_once(t).1).len();
            for workers in [2, 3] {
                let runs = simulate_with(None, true, workers, None, |t| prog.run_once(t).1);
                let seen: HashSet<_> = runs.iter().cloned().collect();
                assert_eq!(seen, full, "{workers} workers on {:?}", prog.threads);
                parallel += runs.len();
            }
        }
        eprintln!(
            "random programs: {sequential} executions split by 1 worker, {parallel} by 2 and 3"
        );
    }

    /// Larger programs (6 and 7 operation groups) split after every execution: a given-away
    /// alternative once slept in the giver's later alternatives, and with `Split::above`
    /// a receiver then took it for explored: traces were lost on every seed tried.
    #[test]
    fn parallel_dpor_loses_no_trace_on_larger_random_programs() {
        use crate::explore::testing::Program;
        use rand::SeedableRng;
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(302);
        for size in [6, 7] {
            for _ in 0..60 {
                let prog = Program::random(&mut rng, size);
                // Sequential DPOR's traces (those of full DFS, see the dpor tests).
                let (_, reference) = prog.run_all(&mut TreeSearch::dpor(), 1_000_000);
                for workers in [2, 3] {
                    let runs = simulate_with(None, true, workers, None, |t| prog.run_once(t).1);
                    let seen: HashSet<_> = runs.into_iter().collect();
                    assert_eq!(seen, reference, "{workers} workers on {:?}", prog.threads);
                }
            }
        }
    }

    /// Qadeer's example split after every execution: a work item brings what its giver
    /// explored at every node above it (`Split::above`), so no worker asks again for a
    /// reversal another one covered: one execution per trace, as with one worker.
    #[test]
    fn a_search_split_after_every_execution_runs_qadeers_example_once_per_trace() {
        let prog = crate::explore::testing::Program::qadeer();
        for workers in [1, 2, 3] {
            let runs = simulate_with(None, true, workers, None, |t| prog.run_once(t).1);
            let traces: HashSet<_> = runs.iter().cloned().collect();
            assert_eq!((runs.len(), traces.len()), (6, 6), "{workers} workers");
        }
    }

    #[test]
    fn parallel_dpor_loses_no_trace() {
        use crate::explore::testing::{Program, SynOp::*};
        // Qadeer's example plus a lock: 6 orders of the g writes × 2 lock orders.
        let prog = Program {
            threads: vec![
                vec![Write(0), Write(2), Lock(9), Write(0), Unlock(9), Write(2)],
                vec![Write(1), Write(2), Lock(9), Write(1), Unlock(9), Write(2)],
            ],
        };
        let unreduced = simulate_with(None, false, 1, None, |t| prog.run_once(t).1);
        let full: HashSet<_> = unreduced.iter().cloned().collect();
        for workers in [1, 2, 3] {
            let runs = simulate_with(None, true, workers, None, |t| prog.run_once(t).1);
            let seen: HashSet<_> = runs.iter().cloned().collect();
            assert_eq!(seen, full, "{workers} workers");
            eprintln!(
                "{workers} workers: {} runs, {} traces",
                runs.len(),
                full.len()
            );
            assert!(runs.len() * 4 < unreduced.len(), "{}", runs.len());
        }
    }

    #[test]
    fn parallel_workers_of_each_shard_cover_the_tree_once() {
        use crate::explore::shard::TreeShard;
        let prog = Synthetic {
            steps: vec![2, 2, 1],
        };
        for max_bound in [None, Some(10), Some(1)] {
            let whole = simulate(&prog, max_bound, 1);
            let expected: HashSet<_> = whole.iter().cloned().collect();
            for workers in [1, 2, 3] {
                let mut union = Vec::new();
                for index in 0..3 {
                    let shard = Some(TreeShard { index, count: 3 });
                    let part =
                        simulate_with(max_bound, false, workers, shard, |t| prog.run_once(t));
                    union.extend(part);
                }
                let seen: HashSet<_> = union.iter().cloned().collect();
                assert_eq!(union.len(), seen.len(), "{max_bound:?} {workers}: twice");
                assert_eq!(seen, expected, "{max_bound:?} {workers} workers");
            }
        }
    }

    #[test]
    fn parallel_icb_keeps_bounds_in_order() {
        let prog = Synthetic {
            steps: vec![2, 2, 2],
        };
        let all = simulate(&prog, Some(10), 2);
        let distinct: HashSet<_> = all.iter().cloned().collect();
        assert_eq!(all.len(), distinct.len());
        assert_eq!(all.len(), 90);
        let p: Vec<usize> = all.iter().map(|s| preemptions(s, &prog.steps)).collect();
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
    }

    #[test]
    fn a_path_hashed_a_choice_at_a_time_is_claimed_as_the_whole_path() {
        let claims = Claims::default();
        let mut h = PathHash::default();
        for t in [0, 2, 1, 1] {
            h.push(t);
        }
        assert!(claims.claim_hashed(&h));
        assert!(
            !claims.claim(&[0, 2, 1, 1]),
            "the same key as the whole path's"
        );
        assert!(claims.claim(&[0, 2, 1]));
        let other = PathHash::default().with(0).with(2).with(1);
        assert!(!claims.claim_hashed(&other));
        assert_ne!(other.wide_key(), h.wide_key());
        // claim_path claims every prefix of the path, with the same keys.
        claims.claim_path(&[3, 4]);
        assert!(!claims.claim_hashed(&PathHash::default().with(3)));
        assert!(!claims.claim_hashed(&PathHash::default().with(3).with(4)));
    }

    #[test]
    fn parallel_bounded_por_loses_no_trace_of_icb_on_random_programs() {
        use crate::explore::testing::Program;
        use rand::SeedableRng;
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(13);
        let (mut unreduced, mut reduced) = (0, 0);
        for _ in 0..60 {
            let prog = Program::random(&mut rng, 6);
            for bound in [0, 1, 2] {
                let runs = simulate_with(Some(bound), false, 1, None, |t| prog.run_once(t));
                let icb: HashSet<_> = runs.iter().map(|r| r.1.clone()).collect();
                unreduced += runs.len();
                for workers in [1, 2, 3] {
                    let runs =
                        simulate_with(Some(bound), true, workers, None, |t| prog.run_once(t));
                    let schedules: HashSet<_> = runs.iter().map(|r| r.0.clone()).collect();
                    assert_eq!(schedules.len(), runs.len(), "a schedule explored twice");
                    let seen: HashSet<_> = runs.iter().map(|r| r.1.clone()).collect();
                    assert!(
                        icb.is_subset(&seen),
                        "{workers} workers at bound {bound} on {:?}",
                        prog.threads
                    );
                    reduced += (workers == 1) as usize * runs.len();
                }
            }
        }
        assert!(reduced < unreduced, "{reduced} vs {unreduced}");
    }
}
