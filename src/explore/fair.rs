//! Fair scheduling of spin loops: the priority relation of Musuvathi & Qadeer, "Fair
//! stateless model checking" (PLDI'08), as a filter on the enabled threads that the executor
//! applies before any strategy sees them.
//!
//! A stateless search of a program with a spin loop (`while (!flag) sched_yield();`) never
//! ends: at every yield the spinner can be picked again, so the tree of schedules is
//! infinite. The paper's remedy is a scheduler that is fair to threads that yield. For every
//! thread `t` it keeps, since `t`'s last yield:
//!
//! - `E(t)`: the threads enabled at every scheduling point (continuously enabled);
//! - `D(t)`: the threads that a step of `t` disabled;
//! - `S(t)`: the threads that were scheduled;
//!
//! and `P(t)`, the threads with priority over `t`. When `t` yields without progress, every
//! thread of `(E(t) ∪ D(t)) \ S(t)` — enabled all along (or kept off by `t`) and starved —
//! gets priority over `t`; then the three sets start afresh. An edge `u → t` goes when `u`
//! is scheduled. A thread is *schedulable* when no thread with priority over it is enabled.
//! Edges into `t` are only added when `t` has just run, after all of `t`'s own edges were
//! removed, so the relation stays acyclic and some enabled thread is always schedulable.
//!
//! *Progress.* A yield makes progress when the state it is made in is new for that thread:
//! the caller passes a fingerprint of what the thread could be waiting for (the
//! synchronisation state of the model and the yield's call site) and a fingerprint that
//! thread has not yielded in before counts as progress and adds no edges. A spin loop yields
//! in the same state again and again, so from its second iteration on it adds edges; a
//! courtesy `sched_yield` between pieces of real work (a new state each time) restricts
//! nothing. Since a finite-state program has finitely many fingerprints, every infinite
//! schedule ends up yielding without progress, which keeps the paper's guarantee that a
//! program whose spin loops yield has only finite fair schedules: DFS over it terminates.

use std::collections::HashSet;

use crate::model::ThreadId;

/// A set of thread ids (a bit set; threads are numbered densely from 0).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ThreadSet(Vec<u64>);

impl ThreadSet {
    fn from_slice(ts: &[ThreadId]) -> ThreadSet {
        let mut s = ThreadSet::default();
        for &t in ts {
            s.insert(t);
        }
        s
    }

    fn insert(&mut self, t: ThreadId) {
        let (w, b) = (t / 64, t % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << b;
    }

    fn remove(&mut self, t: ThreadId) {
        if let Some(w) = self.0.get_mut(t / 64) {
            *w &= !(1 << (t % 64));
        }
    }

    #[cfg(test)]
    fn contains(&self, t: ThreadId) -> bool {
        self.0.get(t / 64).is_some_and(|w| w & (1 << (t % 64)) != 0)
    }

    fn intersect_with(&mut self, other: &ThreadSet) {
        for (i, w) in self.0.iter_mut().enumerate() {
            *w &= other.0.get(i).copied().unwrap_or(0);
        }
    }

    fn union_with(&mut self, other: &ThreadSet) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (i, w) in other.0.iter().enumerate() {
            self.0[i] |= w;
        }
    }

    fn subtract(&mut self, other: &ThreadSet) {
        for (i, w) in self.0.iter_mut().enumerate() {
            *w &= !other.0.get(i).copied().unwrap_or(0);
        }
    }

    fn intersects(&self, other: &ThreadSet) -> bool {
        self.0.iter().zip(&other.0).any(|(a, b)| a & b != 0)
    }

    fn clear(&mut self) {
        self.0.clear();
    }

    fn iter(&self) -> impl Iterator<Item = ThreadId> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            (0..64)
                .filter(move |b| w & (1u64 << b) != 0)
                .map(move |b| i * 64 + b)
        })
    }
}

/// What the filter knows about one thread.
#[derive(Clone, Debug, Default)]
struct FairThread {
    /// P(t): threads with priority over this one.
    above: ThreadSet,
    /// E(t): threads enabled at every point since this thread's last yield.
    enabled_since: ThreadSet,
    /// D(t): threads this thread disabled since its last yield.
    disabled_by: ThreadSet,
    /// S(t): threads scheduled since this thread's last yield.
    scheduled_since: ThreadSet,
    /// Fingerprints of the states this thread has yielded in.
    yielded_in: HashSet<u64>,
}

/// The decision taken last, completed once the enabled set after it is known.
#[derive(Clone, Debug)]
struct Step {
    thread: ThreadId,
    enabled_before: ThreadSet,
    yield_state: Option<u64>,
}

/// The fair scheduler's priority relation over one execution (see the module doc).
///
/// Per scheduling point the executor calls [`FairFilter::schedulable`] with the enabled
/// threads and hands the result to the strategy, then [`FairFilter::chose`] with the thread
/// picked. The filter is deterministic in the sequence of calls, so a replayed prefix sees
/// the same schedulable sets.
#[derive(Clone, Debug, Default)]
pub struct FairFilter {
    threads: Vec<FairThread>,
    last: Option<Step>,
    edges_added: u64,
}

impl FairFilter {
    /// A filter for a new execution: no thread has priority over another.
    pub fn new() -> FairFilter {
        FairFilter::default()
    }

    /// A hash of the part of the filter's state that can still change what it lets run
    /// (for state caching): the priority edges, and the history of the threads that have
    /// yielded (a thread's first yield is always progress, so the history of a thread that
    /// never yielded cannot add edges). 0 while nothing of it matters.
    pub fn state_fingerprint(&self) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let set = |s: &ThreadSet| s.iter().collect::<Vec<ThreadId>>();
        let mut h = DefaultHasher::new();
        let mut any = false;
        for (t, th) in self.threads.iter().enumerate() {
            let above = set(&th.above);
            if !above.is_empty() {
                (t, above).hash(&mut h);
                any = true;
            }
            if !th.yielded_in.is_empty() {
                let mut states: Vec<u64> = th.yielded_in.iter().copied().collect();
                states.sort_unstable();
                let sets = [&th.enabled_since, &th.disabled_by, &th.scheduled_since];
                (t, states, sets.map(set)).hash(&mut h);
                any = true;
            }
        }
        if let Some(l) = &self.last {
            if any || l.yield_state.is_some() {
                (l.thread, set(&l.enabled_before), l.yield_state).hash(&mut h);
                any = true;
            }
        }
        if any {
            h.finish()
        } else {
            0
        }
    }

    /// The threads of `enabled` (in id order) that no enabled thread has priority over.
    /// Never empty when `enabled` is not; also completes the bookkeeping of the previous
    /// decision with `enabled` as the set that followed it.
    pub fn schedulable(&mut self, enabled: &[ThreadId]) -> Vec<ThreadId> {
        let now = ThreadSet::from_slice(enabled);
        self.complete_last(&now);
        let ok: Vec<ThreadId> = enabled
            .iter()
            .copied()
            .filter(|&t| !self.threads[t].above.intersects(&now))
            .collect();
        debug_assert!(
            ok.len() == enabled.len() || !ok.is_empty(),
            "the priority relation must stay acyclic"
        );
        if ok.is_empty() {
            enabled.to_vec()
        } else {
            ok
        }
    }

    /// Thread `t` was picked at a point where `enabled` (the full set, before filtering)
    /// could run. `yield_state` is Some when its operation yields (sched_yield, pause, sleep,
    /// a futex wait with a timeout), with the fingerprint of the state it yields in.
    pub fn chose(&mut self, t: ThreadId, enabled: &[ThreadId], yield_state: Option<u64>) {
        self.last = Some(Step {
            thread: t,
            enabled_before: ThreadSet::from_slice(enabled),
            yield_state,
        });
    }

    /// Threads with priority over `t` now (for reports and tests).
    pub fn priority_over(&self, t: ThreadId) -> Vec<ThreadId> {
        self.threads
            .get(t)
            .map_or(vec![], |th| th.above.iter().collect())
    }

    /// Priority edges added so far in this execution.
    pub fn edges_added(&self) -> u64 {
        self.edges_added
    }

    /// Makes sure every thread in `now` has its entry; a thread seen for the first time
    /// starts as if it had just yielded.
    fn know(&mut self, now: &ThreadSet) {
        let top = now.iter().max().map_or(0, |m| m + 1);
        while self.threads.len() < top {
            self.threads.push(FairThread {
                enabled_since: now.clone(),
                ..FairThread::default()
            });
        }
    }

    /// Applies the decision taken last, now that `after` is the enabled set that followed.
    fn complete_last(&mut self, after: &ThreadSet) {
        let Some(step) = self.last.take() else {
            self.know(after);
            return;
        };
        self.know(&step.enabled_before);
        self.know(after);
        let t = step.thread;
        for th in &mut self.threads {
            th.above.remove(t);
            th.scheduled_since.insert(t);
            th.enabled_since.intersect_with(after);
        }
        let mut disabled = step.enabled_before.clone();
        disabled.subtract(after);
        disabled.remove(t);
        let me = &mut self.threads[t];
        me.disabled_by.union_with(&disabled);
        let Some(state) = step.yield_state else {
            return;
        };
        let progress = me.yielded_in.insert(state);
        if !progress {
            let mut starved = me.enabled_since.clone();
            starved.union_with(&me.disabled_by);
            starved.subtract(&me.scheduled_since);
            starved.remove(t);
            self.edges_added += starved.iter().count() as u64;
            me.above.union_with(&starved);
        }
        me.enabled_since = after.clone();
        me.disabled_by.clear();
        me.scheduled_since.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `steps` (thread, enabled set, yield fingerprint) through a filter and returns the
    /// schedulable set seen at each point and after the last.
    fn drive(steps: &[(ThreadId, &[ThreadId], Option<u64>)], end: &[ThreadId]) -> FairFilter {
        let mut f = FairFilter::new();
        for &(t, enabled, y) in steps {
            let ok = f.schedulable(enabled);
            assert!(ok.contains(&t), "T{t} not schedulable among {ok:?}");
            f.chose(t, enabled, y);
        }
        f.schedulable(end);
        f
    }

    #[test]
    fn a_repeated_yield_gives_the_starved_thread_priority() {
        // T0 spins with yields while T1 (enabled all along) never runs.
        let f = drive(&[(0, &[0, 1], Some(7)), (0, &[0, 1], Some(7))], &[0, 1]);
        assert_eq!(f.priority_over(0), vec![1]);
        let mut f = f;
        assert_eq!(f.schedulable(&[0, 1]), vec![1]);
    }

    #[test]
    fn the_first_yield_in_a_state_is_progress() {
        let mut f = drive(&[(0, &[0, 1], Some(7)), (0, &[0, 1], Some(8))], &[0, 1]);
        assert!(f.priority_over(0).is_empty());
        assert_eq!(f.schedulable(&[0, 1]), vec![0, 1]);
    }

    #[test]
    fn running_the_starved_thread_removes_the_edge() {
        let mut f = drive(
            &[
                (0, &[0, 1], Some(7)),
                (0, &[0, 1], Some(7)),
                (1, &[0, 1], None),
            ],
            &[0, 1],
        );
        assert!(f.priority_over(0).is_empty());
        assert_eq!(f.schedulable(&[0, 1]), vec![0, 1]);
    }

    #[test]
    fn a_thread_that_ran_since_the_last_yield_gets_no_priority() {
        // T0 yields, T1 runs, T0 yields again: T1 was not starved.
        let f = drive(
            &[
                (0, &[0, 1], Some(7)),
                (1, &[0, 1], None),
                (0, &[0, 1], Some(7)),
            ],
            &[0, 1],
        );
        assert!(f.priority_over(0).is_empty());
    }

    #[test]
    fn a_thread_disabled_for_a_while_is_not_continuously_enabled() {
        // T1 is blocked at T0's first yield and enabled by the time of the second.
        let f = drive(&[(0, &[0], Some(7)), (0, &[0], Some(7))], &[0, 1]);
        assert!(f.priority_over(0).is_empty());
    }

    #[test]
    fn threads_the_yielder_disabled_get_priority() {
        // T0 takes a lock T1 wants (T1 disabled), releases it (T1 enabled again), yields,
        // and repeats: T1 never got to run, it was kept off by T0.
        let f = drive(
            &[
                (0, &[0, 1], Some(7)),
                (0, &[0, 1], None), // lock: disables T1
                (0, &[0], None),    // unlock: enables T1
                (0, &[0, 1], Some(7)),
            ],
            &[0, 1],
        );
        assert_eq!(f.priority_over(0), vec![1]);
    }

    #[test]
    fn never_filters_to_nothing() {
        let mut f = drive(&[(0, &[0, 1], Some(7)), (0, &[0, 1], Some(7))], &[0]);
        // T1 has priority over T0 but is not enabled: T0 may run.
        assert_eq!(f.schedulable(&[0]), vec![0]);
    }

    #[test]
    fn mutual_yielders_alternate() {
        // Two spinners: after a few yields the filter forces strict alternation.
        let mut f = FairFilter::new();
        let both = [0, 1];
        let mut trace = Vec::new();
        let mut current = 0;
        for _ in 0..20 {
            let ok = f.schedulable(&both);
            let t = if ok.contains(&current) {
                current
            } else {
                ok[0]
            };
            f.chose(t, &both, Some(1));
            trace.push(t);
            current = t;
        }
        // Never more than two yields in a row by the same thread.
        assert!(
            trace.windows(3).all(|w| !(w[0] == w[1] && w[1] == w[2])),
            "{trace:?}"
        );
    }

    #[test]
    fn dfs_terminates_on_a_spin_wait_only_with_the_filter() {
        use crate::explore::testing::SpinWait;
        use crate::explore::{Scheduler, TreeSearch};
        let prog = SpinWait {
            work: 3,
            max_steps: 60,
        };
        let mut fair = TreeSearch::dfs();
        let (n, cut) = prog.run_all(&mut fair, true, 100_000);
        assert!(
            fair.coverage().exhausted,
            "fair dfs must exhaust ({n} executions)"
        );
        assert_eq!(cut, 0, "no fair execution reaches the step bound");
        assert!(n > 1);
        // Without fairness the spinner may yield any number of times: every execution
        // that keeps picking it runs into the bound, and dfs never gets through them.
        let mut unfair = TreeSearch::dfs();
        let (m, cut) = prog.run_all(&mut unfair, false, 20_000);
        assert_eq!(m, 20_000);
        assert!(!unfair.coverage().exhausted);
        assert!(cut > 0);
    }

    #[test]
    fn icb_and_random_also_end_spin_waits_under_the_filter() {
        use crate::explore::testing::SpinWait;
        use crate::explore::{RandomScheduler, Scheduler, TreeSearch};
        let prog = SpinWait {
            work: 4,
            max_steps: 80,
        };
        let mut icb = TreeSearch::icb(None);
        let (_, cut) = prog.run_all(&mut icb, true, 100_000);
        assert!(icb.coverage().exhausted);
        assert_eq!(cut, 0);
        let mut random = RandomScheduler::new(3);
        let (_, cut) = prog.run_all(&mut random, true, 500);
        assert_eq!(cut, 0, "no fair random execution spins to the bound");
    }

    #[test]
    fn thread_sets() {
        let mut a = ThreadSet::from_slice(&[1, 70, 3]);
        assert!(a.contains(70) && a.contains(1) && !a.contains(2));
        let b = ThreadSet::from_slice(&[3, 4]);
        assert!(a.intersects(&b));
        a.subtract(&b);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![1, 70]);
        a.union_with(&b);
        a.intersect_with(&ThreadSet::from_slice(&[4, 70]));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![4, 70]);
        a.remove(70);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![4]);
    }
}
