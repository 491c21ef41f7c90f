//! Wakeup trees (Abdulla, Aronis, Jonsson, Sagonas, POPL'14 / JACM'17, "optimal DPOR"):
//! what the reduced tree search still has to explore from one node, as an ordered tree of
//! step sequences rather than a set of threads.
//!
//! A race found in an execution is reversed at its earlier step's node by the sequence
//! `v = notdep(i).k` ([`super::dpor::Reversal`]). Exploring only an initial of `v` there
//! (source sets) can lead into executions where every enabled thread sleeps; following `v`
//! itself cannot. A node's tree holds such sequences: its roots are the alternatives still
//! to explore there, and exploring a root follows the root's subtree below it.
//!
//! Insertion (`insert[E](v, B)` of the paper, in the usual descending form): at each level,
//! the first branch whose step is a *weak initial* of `v` covers it: a leaf covers all of
//! `v`; an inner branch takes the rest of `v` (its own step removed) one level down. When no
//! branch does, `v` becomes a new rightmost branch. A thread `q` whose next step is `s` is a
//! weak initial of `v` when its first step in `v` has no predecessor in `v` (different
//! threads, dependent steps or creation), or when it has no step in `v` and `s` is
//! independent of every step of `v`.

use super::dpor::Step;
use crate::model::{Footprint, ThreadId};

/// One step of a wakeup sequence: a thread's next step with what it touches and creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    /// The thread that makes the step.
    pub thread: ThreadId,
    /// What the step touches (everything when unknown).
    pub footprint: Footprint,
    /// The threads it creates.
    pub created: Vec<ThreadId>,
    /// Whether the footprint is the whole step's, as it ran in an execution (not only a
    /// pending operation's, whose native part is unknown).
    pub complete: bool,
}

impl Event {
    /// The step of `thread` whose footprint is not known: dependent with every other.
    pub fn unknown(thread: ThreadId) -> Event {
        Event {
            thread,
            footprint: Footprint::everything(),
            created: Vec::new(),
            complete: false,
        }
    }

    /// The event of `s`: a step of an execution carries the enabled set of its node, a
    /// pending operation analysed after the last step an empty one (see
    /// [`super::tree`]'s analysis), which tells whether its footprint is complete.
    fn of(s: &Step<'_>) -> Event {
        Event {
            thread: s.thread,
            footprint: s.footprint.clone(),
            created: s.created.to_vec(),
            complete: !s.enabled.is_empty(),
        }
    }

    fn as_step(&self) -> Step<'_> {
        Step {
            thread: self.thread,
            enabled: &[],
            footprint: &self.footprint,
            created: &self.created,
        }
    }
}

/// A branch of a wakeup tree: a step, then what to explore after it (leftmost first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Branch {
    /// The step taken first.
    pub event: Event,
    /// The branches below it; none for a leaf (after it, anything).
    pub children: Vec<Branch>,
}

impl Branch {
    /// A leaf: `event`, then whatever the search chooses.
    pub fn leaf(event: Event) -> Branch {
        Branch {
            event,
            children: Vec::new(),
        }
    }

    /// The chain of `events`, one below the other.
    fn chain(events: &[Step<'_>]) -> Option<Branch> {
        events.iter().rev().fold(None, |below, s| {
            Some(Branch {
                event: Event::of(s),
                children: below.into_iter().collect(),
            })
        })
    }
}

/// Whether two steps of a sequence are ordered: same thread, conflicting footprints, or one
/// creates the other's thread.
fn dependent(a: &Step<'_>, b: &Step<'_>) -> bool {
    a.thread == b.thread
        || a.footprint.conflicts(b.footprint)
        || a.created.contains(&b.thread)
        || b.created.contains(&a.thread)
}

/// Whether `step` (a thread's next step) is a weak initial of `v`: `Some(Some(j))` when its
/// thread's first step in `v` is `v[j]` and no earlier step of `v` precedes it,
/// `Some(None)` when the thread has no step in `v`, `step` is independent of all of it and
/// `absent_counts`, `None` otherwise.
///
/// A thread absent from `v` counts only if every continuation of `v` still lets it make its
/// step, so that running it first gives an equivalent execution. That fails when the
/// process can end under it: an `exit` while it runs, a crash, a deadlock that leaves it
/// waiting. The analysis of an execution that ended so passes `absent_counts = false`.
pub(super) fn weak_initial(
    step: &Step<'_>,
    v: &[Step<'_>],
    absent_counts: bool,
) -> Option<Option<usize>> {
    match v.iter().position(|e| e.thread == step.thread) {
        Some(j) => (!v[..j].iter().any(|e| dependent(e, &v[j]))).then_some(Some(j)),
        None => (absent_counts && !v.iter().any(|e| dependent(e, step))).then_some(None),
    }
}

/// The threads whose first step in `v` has no predecessor in `v` (the initials), in the
/// order of those steps.
pub(super) fn initials(v: &[Step<'_>]) -> Vec<usize> {
    (0..v.len())
        .filter(|&j| {
            !v[..j].iter().any(|e| e.thread == v[j].thread)
                && !v[..j].iter().any(|e| dependent(e, &v[j]))
        })
        .collect()
}

/// What [`insert`] did with a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Inserted {
    /// A branch already covers it: nothing added.
    Covered,
    /// Added below an existing branch.
    Below,
    /// Added as a new branch at the top: a new alternative of the node, by this thread.
    Root(ThreadId),
}

/// Inserts the sequence `v` into the tree whose branches are `tree`, adding at most
/// `max_new` steps (the rest of `v` is cut); returns what it did and the size of what it
/// added ([`size_of`]). `absent_counts`: see [`weak_initial`].
pub(super) fn insert(
    tree: &mut Vec<Branch>,
    v: &[Step<'_>],
    max_new: usize,
    absent_counts: bool,
) -> (Inserted, usize) {
    let mut v = v.to_vec();
    let mut level = tree;
    let mut top = true;
    loop {
        if v.is_empty() {
            return (Inserted::Covered, 0);
        }
        let Some((b, at)) = level.iter().enumerate().find_map(|(b, br)| {
            weak_initial(&br.event.as_step(), &v, absent_counts).map(|at| (b, at))
        }) else {
            let added = append(level, &v, max_new);
            let how = match (top, level.last()) {
                (true, Some(b)) => Inserted::Root(b.event.thread),
                _ => Inserted::Below,
            };
            return (how, added);
        };
        if level[b].children.is_empty() {
            return (Inserted::Covered, 0); // a leaf: anything may follow it, v included
        }
        if let Some(j) = at {
            v.remove(j);
        }
        level = &mut level[b].children;
        top = false;
    }
}

/// Adds `v` (at most `max_new` of its steps, at least its first) as the last branch of
/// `level`; returns the size of what it added ([`size_of`]).
pub(super) fn append(level: &mut Vec<Branch>, v: &[Step<'_>], max_new: usize) -> usize {
    let n = v.len().min(max_new.max(1));
    level.extend(Branch::chain(&v[..n]));
    size_of(&v[..n])
}

/// What the steps `v` weigh in a tree, for its memory bound: one per step and one per
/// object each touches (a step's native part can touch many).
pub(super) fn size_of(v: &[Step<'_>]) -> usize {
    v.iter().map(|s| 1 + s.footprint.touches.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::explore::testing::mutex_footprint as fp;

    fn step(thread: ThreadId, f: &Footprint) -> Step<'_> {
        Step {
            thread,
            enabled: &[],
            footprint: f,
            created: &[],
        }
    }

    #[test]
    fn a_thread_absent_from_v_is_a_weak_initial_only_when_independent_of_it() {
        let (wa, wb) = (fp(&[(1, true)]), fp(&[(2, true)]));
        let v = [step(1, &wa)];
        assert_eq!(weak_initial(&step(0, &wb), &v, true), Some(None));
        assert_eq!(weak_initial(&step(0, &wa), &v, true), None);
        assert_eq!(weak_initial(&step(1, &wa), &v, true), Some(Some(0)));
        // T2's step comes after T1's dependent one: not initial.
        let v = [step(1, &wa), step(2, &wa)];
        assert_eq!(weak_initial(&step(2, &wa), &v, true), None);
        assert_eq!(initials(&v), vec![0]);
    }

    #[test]
    fn an_absent_thread_covers_nothing_where_the_process_can_end_under_it() {
        // T0 writes b, independent of T1's write of a; but where the process can end before
        // T0's step, running T0 first is not the same as running T1's sequence.
        let (wa, wb) = (fp(&[(1, true)]), fp(&[(2, true)]));
        let v = [step(1, &wa)];
        assert_eq!(weak_initial(&step(0, &wb), &v, false), None);
        assert_eq!(weak_initial(&step(1, &wa), &v, false), Some(Some(0)));
        let mut tree = vec![Branch::leaf(Event::of(&step(0, &wb)))];
        assert_eq!(insert(&mut tree, &v, 9, true), (Inserted::Covered, 0));
        assert_eq!(insert(&mut tree, &v, 9, false), (Inserted::Root(1), 2));
    }

    #[test]
    fn a_leaf_covers_what_it_starts_and_an_inner_branch_takes_the_rest_below() {
        let (wa, wb, wc) = (fp(&[(1, true)]), fp(&[(2, true)]), fp(&[(3, true)]));
        let mut tree = Vec::new();
        // v1 = T1:a T2:b
        assert_eq!(
            insert(&mut tree, &[step(1, &wa), step(2, &wb)], 9, true),
            (Inserted::Root(1), 4)
        );
        // v2 = T2:b T1:a is the same trace: covered.
        assert_eq!(
            insert(&mut tree, &[step(2, &wb), step(1, &wa)], 9, true),
            (Inserted::Covered, 0)
        );
        assert_eq!(tree.len(), 1);
        assert_eq!(tree[0].children.len(), 1);
        // v3 = T1:a T3:c: T2's b is independent of it, so T1:a T2:b covers it.
        assert_eq!(
            insert(&mut tree, &[step(1, &wa), step(3, &wc)], 9, true),
            (Inserted::Covered, 0)
        );
        // v4 = T1:a T3:b conflicts with T2's b: below T1 as a second child.
        assert_eq!(
            insert(&mut tree, &[step(1, &wa), step(3, &wb)], 9, true),
            (Inserted::Below, 2)
        );
        assert_eq!(tree[0].children.len(), 2);
        // v5 = T3:a conflicts with T1's a: a new root.
        assert_eq!(
            insert(&mut tree, &[step(3, &wa)], 9, true),
            (Inserted::Root(3), 2)
        );
        assert_eq!(tree.len(), 2);
    }

    #[test]
    fn long_sequences_are_cut() {
        let w = fp(&[(1, true)]);
        let v: Vec<Step<'_>> = (0..200).map(|_| step(1, &w)).collect();
        let mut tree = Vec::new();
        // Each step weighs 2: itself and the object it touches.
        assert_eq!(insert(&mut tree, &v, 64, true), (Inserted::Root(1), 128));
        let mut depth = 0;
        let mut level = &tree;
        while let Some(b) = level.first() {
            depth += 1;
            level = &b.children;
        }
        assert_eq!(depth, 64);
    }
}
