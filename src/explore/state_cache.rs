//! State caching for the tree search, after Holt's "One Page Model Checker": a table keyed
//! by the combined per-thread step counter (how many steps each thread has taken, which
//! names a point of the lattice of interleavings) holding the hashes of the program states
//! seen there. Only hashes are kept, not states (hash compaction, Stern & Dill): two states
//! are taken as equal when their 64-bit hashes are.
//!
//! - A new point (a counter not seen, or a hash not seen at that counter) is recorded and
//!   explored.
//! - A revisit with an equal hash is the same state: everything below it was (or is being)
//!   explored from its first visit, so the search prunes there.
//! - A revisit with a different hash is recorded (it counts as `different`): the state at
//!   that lattice point depends on the order of the steps.
//! - With sleep sets (Godefroid, Holzmann & Pirottin, "State-space caching revisited",
//!   CAV'92), each state keeps the threads that slept at its first visit: they were not
//!   explored from it. A revisit prunes only when every one of them sleeps again; otherwise
//!   the state is explored again (`reexplored`) and keeps only the threads asleep both times.
//!
//! [`EndTable`] keeps, per final counter, the result of the first execution that ended
//! there, so that executions of the same steps in another order that end with a different
//! exit status or output are reported (`nondeterminism`).
//!
//! Pure: the executor computes the hashes (`run/state_hash.rs`), the tree search computes
//! the counters from its path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::model::ThreadId;

/// The combined per-thread step counter: entry `t` is the number of steps thread `t` took.
pub type Counter = Vec<u32>;

/// The counter of a path: how many times each thread was chosen.
pub fn counter_of(path: impl IntoIterator<Item = ThreadId>) -> Counter {
    let mut c: Counter = Vec::new();
    for t in path {
        if c.len() <= t {
            c.resize(t + 1, 0);
        }
        c[t] += 1;
    }
    c
}

/// What a visit of a (counter, hash) pair found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// The counter was not seen before.
    New,
    /// The counter was seen, with other hashes only: recorded.
    Different,
    /// The same state was seen before: prune.
    Same,
    /// The same state was seen before, but with a thread asleep that is awake now: explore
    /// it again.
    Again,
}

/// Counts of what the table saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    /// Distinct (counter, hash) states recorded.
    pub states: u64,
    /// Revisits of a recorded state (each pruned a subtree).
    pub hits: u64,
    /// Visits of a known counter with a hash not seen there before.
    pub different: u64,
    /// Revisits of a recorded state explored again, because a thread asleep at an earlier
    /// visit is awake now (with sleep sets).
    pub reexplored: u64,
    /// Memory pages read and hashed at hashed points.
    pub pages_hashed: u64,
    /// Present pages whose hash was kept from the execution's previous point (not written
    /// since: incremental hashing).
    pub pages_reused: u64,
}

/// The table of visited states.
#[derive(Debug, Default)]
pub struct StateTable {
    /// Per counter, the hashes seen there, each with the threads that slept at it (sorted;
    /// empty without sleep sets).
    seen: HashMap<Counter, Vec<(u64, Vec<ThreadId>)>>,
    stats: CacheStats,
}

impl StateTable {
    /// Looks up `(counter, hash)` reached with the threads `sleep` asleep (sorted), and
    /// records it when new.
    pub fn visit(&mut self, counter: &[u32], hash: u64, sleep: &[ThreadId]) -> Visit {
        let key = trimmed(counter);
        let Some(states) = self.seen.get_mut(key) else {
            self.seen.insert(key.to_vec(), vec![(hash, sleep.to_vec())]);
            self.stats.states += 1;
            return Visit::New;
        };
        match states.iter_mut().find(|(h, _)| *h == hash) {
            Some((_, slept)) if slept.iter().all(|t| sleep.contains(t)) => {
                self.stats.hits += 1;
                Visit::Same
            }
            Some((_, slept)) => {
                slept.retain(|t| sleep.contains(t));
                self.stats.reexplored += 1;
                Visit::Again
            }
            None => {
                states.push((hash, sleep.to_vec()));
                self.stats.states += 1;
                self.stats.different += 1;
                Visit::Different
            }
        }
    }

    /// What the table saw so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Forgets every state (under memory pressure): a state seen before is then explored
    /// again instead of pruned, which costs time, never soundness.
    pub fn forget(&mut self) {
        self.seen = HashMap::new();
    }
}

/// Trailing zeros do not change a counter (a thread not created yet has taken no step).
fn trimmed(c: &[u32]) -> &[u32] {
    let n = c.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    &c[..n]
}

/// A table shared by the workers of one search.
pub type SharedStateTable = Arc<Mutex<StateTable>>;

/// The result of the first execution that ended at each final counter.
#[derive(Debug, Default)]
pub struct EndTable<S> {
    first: HashMap<Counter, (String, S)>,
}

impl<S: Clone> EndTable<S> {
    /// Records that an execution whose steps add up to `counter` ended with `result`
    /// (exit status and output, described); `schedule` identifies it. Returns the earlier
    /// execution's result and schedule when it ended there differently.
    pub fn record(&mut self, counter: &[u32], result: String, schedule: S) -> Option<(String, S)> {
        let key = trimmed(counter).to_vec();
        match self.first.get(&key) {
            Some((r, s)) if *r != result => Some((r.clone(), s.clone())),
            Some(_) => None,
            None => {
                self.first.insert(key, (result, schedule));
                None
            }
        }
    }

    /// Forgets every result (under memory pressure): differences with them go unseen.
    pub fn forget(&mut self) {
        self.first = HashMap::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_count_steps_per_thread() {
        assert_eq!(counter_of([0, 1, 0, 2]), vec![2, 1, 1]);
        assert_eq!(counter_of([]), Vec::<u32>::new());
    }

    #[test]
    fn same_state_prunes_different_state_is_recorded() {
        let mut t = StateTable::default();
        assert_eq!(t.visit(&[1, 1], 7, &[]), Visit::New);
        assert_eq!(t.visit(&[1, 1], 7, &[]), Visit::Same);
        assert_eq!(t.visit(&[1, 1], 8, &[]), Visit::Different);
        assert_eq!(t.visit(&[1, 1], 8, &[]), Visit::Same);
        // The same hash at another counter is another state.
        assert_eq!(t.visit(&[2, 0], 7, &[]), Visit::New);
        // A trailing zero is the same counter.
        assert_eq!(t.visit(&[2, 0, 0], 7, &[]), Visit::Same);
        assert_eq!(
            t.stats(),
            CacheStats {
                states: 3,
                hits: 3,
                different: 1,
                ..CacheStats::default()
            }
        );
    }

    #[test]
    fn a_state_first_seen_with_more_threads_asleep_is_explored_again() {
        let mut t = StateTable::default();
        assert_eq!(t.visit(&[1, 1], 7, &[1, 2]), Visit::New);
        // T1 and T2 asleep again (and T0 too): nothing new below.
        assert_eq!(t.visit(&[1, 1], 7, &[0, 1, 2]), Visit::Same);
        // T2 awake now: its steps were never explored from this state.
        assert_eq!(t.visit(&[1, 1], 7, &[1]), Visit::Again);
        // Explored with only T1 asleep from now on.
        assert_eq!(t.visit(&[1, 1], 7, &[1]), Visit::Same);
        assert_eq!(t.visit(&[1, 1], 7, &[]), Visit::Again);
        assert_eq!(t.visit(&[1, 1], 7, &[2]), Visit::Same);
        assert_eq!(t.stats().reexplored, 2);
    }

    /// The interleavings of two threads of `k` steps each whose states depend only on the
    /// counter (both append the same character): with the table, every lattice point is
    /// expanded once, so the transitions taken are the lattice's edges, 2k(k+1), instead of
    /// the tree's.
    #[test]
    fn a_lattice_is_explored_once_per_point() {
        fn explore(k: u32, c: (u32, u32), t: &mut StateTable, edges: &mut u64) {
            let hash = 0; // the state is a function of the counter
            if t.visit(&[c.0, c.1], hash, &[]) == Visit::Same {
                return;
            }
            if c.0 < k {
                *edges += 1;
                explore(k, (c.0 + 1, c.1), t, edges);
            }
            if c.1 < k {
                *edges += 1;
                explore(k, (c.0, c.1 + 1), t, edges);
            }
        }
        for k in 1..8u32 {
            let (mut t, mut edges) = (StateTable::default(), 0);
            explore(k, (0, 0), &mut t, &mut edges);
            assert_eq!(edges, u64::from(2 * k * (k + 1)));
            assert_eq!(t.stats().states, u64::from((k + 1) * (k + 1)));
        }
    }

    #[test]
    fn ends_differing_at_one_counter_are_reported_once_per_pair() {
        let mut e: EndTable<u32> = EndTable::default();
        assert_eq!(e.record(&[3, 2], "exit 0".into(), 1), None);
        assert_eq!(e.record(&[3, 2], "exit 0".into(), 2), None);
        assert_eq!(e.record(&[3, 3], "exit 1".into(), 3), None);
        assert_eq!(
            e.record(&[3, 2, 0], "exit 1".into(), 4),
            Some(("exit 0".into(), 1))
        );
    }
}
