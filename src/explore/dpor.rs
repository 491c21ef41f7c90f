//! Dynamic partial-order reduction for the tree search: the race analysis of optimal DPOR
//! (Abdulla, Aronis, Jonsson, Sagonas, POPL'14 / JACM'17), run over the steps of each
//! finished execution; what a race adds at its node is decided in [`super::tree`] with the
//! wakeup trees of [`super::wakeup`] (or by source sets, [`additions`]).
//!
//! A *step* is what one scheduling decision makes happen: the chosen thread's pending
//! operation, then everything the thread does natively up to its next stop. Its footprint is
//! the operation's ([`Op::footprint`](crate::model::Op::footprint)) plus what the executor saw
//! it touch on the way ([`Scheduler::ran`](super::Scheduler::ran)), plus its own thread as an
//! object when the step ended with the thread's exit (so that a join of it depends on it).
//! Steps of one thread are always dependent; a thread's first step comes after the step that
//! created it.
//!
//! After an execution, happens-before is computed with vector clocks over its steps. For
//! every step `k` of thread p, the *races* are the earlier dependent steps `i` of other
//! threads that do not happen before p's previous step and are not ordered before `k` through
//! another such step (the last write of an object, or the reads since it). A step `i` that
//! *enabled* p (p was blocked at `i` and enabled right after it: the unlock before a lock,
//! the exit before a join) is not a race, as `k` cannot come first; the search looks past it
//! to the step that made p wait (the earlier lock). For each race the reversing sequence
//! `v = notdep(i).k` and its *initials* — the threads whose first step in v has no
//! happens-before predecessor in v — are computed ([`Reversal`]). By source sets, if none of
//! the initials is already explored, to be explored or asleep at node `i`, one enabled
//! initial is added there; when no initial is enabled at `i` (it waits for something our
//! relation does not see), every enabled thread is added, the conservative rule of Flanagan
//! & Godefroid (POPL'05). Threads still pending when the execution ended are analysed as
//! steps after the last one, which is global when it ended the process under them.
//!
//! Sleep sets: a thread explored from a node, with its step's footprint, stays asleep in the
//! next nodes as long as the steps taken are independent of it; a sleeping thread is never
//! chosen. When every enabled thread sleeps the execution is redundant (sleep-set blocked):
//! it is run to its end by default choices and neither explored further nor analysed. With
//! wakeup trees this does not happen.

use std::collections::HashMap;

use super::wakeup::Branch;
use crate::model::{Footprint, ObjectKind, ObjectRef, ThreadId};

/// What partial-order reduction keeps about one node of the current path.
#[derive(Debug, Clone, Default)]
pub(super) struct PorNode {
    /// Footprints of the enabled threads' pending operations (parallel to the node's enabled).
    pub pending: Vec<Footprint>,
    /// Blocked threads with the footprints of their pending operations.
    pub blocked: Vec<(ThreadId, Footprint)>,
    /// The chosen step's whole footprint (operation, native part, exit), once it has run.
    pub step: Footprint,
    /// Threads the chosen step created.
    pub created: Vec<ThreadId>,
    /// Sleep set on arrival: threads not to run here, with their steps' footprints.
    pub sleep: Vec<(ThreadId, Footprint)>,
    /// Alternatives explored from here, with their steps' footprints.
    pub done: Vec<(ThreadId, Footprint)>,
    /// The wakeup tree of the alternatives still to explore here: one branch per thread of
    /// the node's to-do list, in the same order ([`super::wakeup`]).
    pub wakeup: Vec<Branch>,
}

impl PorNode {
    /// The footprint of `t`'s pending operation here (global when unknown).
    pub fn pending_of(&self, enabled: &[ThreadId], t: ThreadId) -> Footprint {
        enabled
            .iter()
            .position(|&u| u == t)
            .and_then(|i| self.pending.get(i).cloned())
            .or_else(|| {
                self.blocked
                    .iter()
                    .find(|(u, _)| *u == t)
                    .map(|(_, f)| f.clone())
            })
            .unwrap_or_else(Footprint::everything)
    }

    /// Whether `t` sleeps here.
    pub fn asleep(&self, t: ThreadId) -> bool {
        self.sleep.iter().any(|(u, _)| *u == t)
    }

    /// The sleep set of the node reached by taking `chosen`, whose step has run (`step`):
    /// the threads asleep or already explored here whose steps are independent of it.
    pub fn child_sleep(&self, chosen: ThreadId) -> Vec<(ThreadId, Footprint)> {
        self.sleep_after(chosen, &self.step)
            .map(|(u, f)| (*u, f.clone()))
            .collect()
    }

    /// The threads asleep or already explored here, other than `chosen`, whose steps are
    /// independent of `taken` (the step of `chosen`, as far as it is known).
    pub fn sleep_after<'a>(
        &'a self,
        chosen: ThreadId,
        taken: &'a Footprint,
    ) -> impl Iterator<Item = &'a (ThreadId, Footprint)> + 'a {
        self.sleep
            .iter()
            .chain(&self.done)
            .filter(move |(u, f)| *u != chosen && !f.conflicts(taken))
    }
}

/// One executed step, as the analysis sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step<'a> {
    /// The thread that made it.
    pub thread: ThreadId,
    /// The threads enabled at the node where it was chosen.
    pub enabled: &'a [ThreadId],
    /// Its footprint.
    pub footprint: &'a Footprint,
    /// The threads it created.
    pub created: &'a [ThreadId],
}

/// A race found in an execution: at node `node`, running one of `initials` first reverses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Race {
    /// The node (index of the earlier step).
    pub node: usize,
    /// The threads that can start the reversed order there.
    pub initials: Vec<ThreadId>,
}

/// A race with the sequence that reverses it, `notdep(i).k`: indices of the execution's
/// steps, an index past the last step naming a pending operation (`steps.len() + j` for
/// the `j`-th one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reversal {
    /// The race.
    pub race: Race,
    /// The steps after the race's node that do not happen after it, then the later step.
    pub sequence: Vec<usize>,
}

type Clock = Vec<u32>;

fn join(into: &mut Clock, other: &Clock) {
    if into.len() < other.len() {
        into.resize(other.len(), 0);
    }
    for (a, &b) in into.iter_mut().zip(other) {
        *a = (*a).max(b);
    }
}

fn at(c: &Clock, t: ThreadId) -> u32 {
    c.get(t).copied().unwrap_or(0)
}

/// Accesses of one object, for happens-before and for finding races.
#[derive(Default)]
struct ObjectHistory {
    last_write: Option<usize>,
    reads_since: Vec<usize>,
    /// Every step touching it: (step, writes).
    steps: Vec<(usize, bool)>,
}

/// Happens-before over the steps of one execution.
struct Analysis<'s, 'a> {
    steps: &'s [Step<'a>],
    clocks: Vec<Clock>,
    last_of: HashMap<ThreadId, usize>,
    creator: HashMap<ThreadId, usize>,
    /// Per object (per byte for memory, [`crate::model::Touch::keys`]): its accesses.
    objects: HashMap<ObjectRef, ObjectHistory>,
    globals: Vec<usize>,
    all: Clock,
}

impl<'s, 'a> Analysis<'s, 'a> {
    fn new(steps: &'s [Step<'a>]) -> Self {
        let mut creator = HashMap::new();
        for (i, s) in steps.iter().enumerate() {
            for &c in s.created {
                creator.entry(c).or_insert(i);
            }
        }
        Analysis {
            steps,
            clocks: Vec::with_capacity(steps.len()),
            last_of: HashMap::new(),
            creator,
            objects: HashMap::new(),
            globals: Vec::new(),
            all: Vec::new(),
        }
    }

    /// The clock of thread `p` before its next step.
    fn before(&self, p: ThreadId) -> Clock {
        match self.last_of.get(&p).or_else(|| self.creator.get(&p)) {
            Some(&i) => self.clocks[i].clone(),
            None => Vec::new(),
        }
    }

    /// Whether step `i` happens before a point whose clock is `c`.
    fn hb(&self, i: usize, c: &Clock) -> bool {
        let t = self.steps[i].thread;
        at(c, t) >= at(&self.clocks[i], t)
    }

    /// The clock of a step of `p` with footprint `f` made now (not recorded).
    fn clock_of(&self, p: ThreadId, f: &Footprint) -> Clock {
        let mut c = self.before(p);
        if f.global {
            c = {
                let mut a = self.all.clone();
                join(&mut a, &c);
                a
            };
        } else {
            if let Some(&g) = self.globals.last() {
                join(&mut c, &self.clocks[g]);
            }
            for t in &f.touches {
                for key in t.keys() {
                    let Some(h) = self.objects.get(&key) else {
                        continue;
                    };
                    if let Some(w) = h.last_write {
                        join(&mut c, &self.clocks[w]);
                    }
                    if t.write {
                        for &r in &h.reads_since {
                            join(&mut c, &self.clocks[r]);
                        }
                    }
                }
            }
        }
        if c.len() <= p {
            c.resize(p + 1, 0);
        }
        c[p] += 1;
        c
    }

    /// Whether step `i` enabled thread `p` (p blocked or absent before it, enabled after).
    fn enabled_by(&self, i: usize, p: ThreadId) -> bool {
        !self.steps[i].enabled.contains(&p)
            && self
                .steps
                .get(i + 1)
                .is_some_and(|s| s.enabled.contains(&p))
    }

    /// The earlier steps in a race with a step of `p` with footprint `f` made now.
    fn races_with(&self, p: ThreadId, f: &Footprint) -> Vec<usize> {
        let before = self.before(p);
        // Exits the new step waits for (a join): it can never come before them, so a step
        // ordered before one of them is no race either. (A lock waiting for an unlock is
        // different: the earlier lock can be reordered.)
        let blockers = std::cell::RefCell::new(Vec::new());
        let candidate = |i: usize| {
            if self.steps[i].thread == p || self.hb(i, &before) {
                return false;
            }
            let theirs = self.steps[i].footprint;
            if theirs.excludes_on(f, ObjectKind::Thread) {
                blockers.borrow_mut().push(i);
            }
            !self.enabled_by(i, p) && !theirs.excludes(f)
        };
        let mut found: Vec<usize> = Vec::new();
        if f.global {
            found.extend((0..self.clocks.len()).filter(|&i| candidate(i)));
        } else {
            for (t, key) in f.touches.iter().flat_map(|t| t.keys().map(move |k| (t, k))) {
                let Some(h) = self.objects.get(&key) else {
                    continue;
                };
                for &(i, w) in h.steps.iter().rev() {
                    if !(t.write || w) {
                        continue;
                    }
                    if self.hb(i, &before) {
                        if w {
                            break;
                        }
                        continue;
                    }
                    if !candidate(i) {
                        continue;
                    }
                    found.push(i);
                    if w {
                        break;
                    }
                }
            }
            for &g in self.globals.iter().rev() {
                if self.hb(g, &before) {
                    break;
                }
                if candidate(g) {
                    found.push(g);
                    break;
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        // Only direct races: drop a step ordered before another racing step where `p` could
        // have run instead (else that race cannot be reversed there: a condvar signal made
        // while the waiter's mutex is held, the waiter timing out before the lock that
        // preceded it can), or before a step the new one must follow.
        let blockers = blockers.into_inner();
        let direct: Vec<usize> = found
            .iter()
            .copied()
            .filter(|&i| {
                let later_race = found.iter().any(|&j| {
                    j != i && self.steps[j].enabled.contains(&p) && self.hb(i, &self.clocks[j])
                });
                let later_blocker = blockers
                    .iter()
                    .any(|&j| j != i && self.hb(i, &self.clocks[j]));
                !later_race && !later_blocker
            })
            .collect();
        direct
    }

    /// The initials of `notdep(i).k`, where `k` is a step of `p` with clock `mine` made now
    /// (its index `k`), and the sequence itself.
    fn reversal(&self, i: usize, p: ThreadId, mine: &Clock, k: usize) -> Reversal {
        let ci = &self.clocks[i];
        let ti = self.steps[i].thread;
        // For each thread seen in v, the clock value of its first step there.
        let mut first: Vec<(ThreadId, u32)> = Vec::new();
        let mut initials = Vec::new();
        let mut sequence = Vec::new();
        let mut consider = |t: ThreadId, c: &Clock, first: &mut Vec<(ThreadId, u32)>| {
            if first.iter().any(|&(u, _)| u == t) {
                return;
            }
            if !first.iter().any(|&(u, v)| at(c, u) >= v) {
                initials.push(t);
            }
            first.push((t, at(c, t)));
        };
        for j in i + 1..self.clocks.len() {
            let cj = &self.clocks[j];
            if at(cj, ti) >= at(ci, ti) {
                continue; // happens after i
            }
            consider(self.steps[j].thread, cj, &mut first);
            sequence.push(j);
        }
        consider(p, mine, &mut first);
        sequence.push(k);
        Reversal {
            race: Race { node: i, initials },
            sequence,
        }
    }

    /// Records step `k` (the next one).
    fn record(&mut self, k: usize, clock: Clock) {
        let s = self.steps[k];
        join(&mut self.all, &clock);
        self.clocks.push(clock);
        self.last_of.insert(s.thread, k);
        if s.footprint.global {
            self.globals.push(k);
        }
        for t in &s.footprint.touches {
            for key in t.keys() {
                let h = self.objects.entry(key).or_default();
                if t.write {
                    h.last_write = Some(k);
                    h.reads_since.clear();
                } else {
                    h.reads_since.push(k);
                }
                h.steps.push((k, t.write));
            }
        }
    }
}

/// The races of an execution made of `steps`, followed by the pending operations of the
/// threads that never ran again (`pending`, analysed as if they came last).
#[cfg(test)]
pub(super) fn races(steps: &[Step<'_>], pending: &[(ThreadId, Footprint)]) -> Vec<Race> {
    let mut out = Vec::new();
    reversals(steps, pending, |r| out.push(r.race));
    out
}

/// The races of an execution as [`races`] finds them, each with the sequence that
/// reverses it, given one at a time to `found` (a sequence can be as long as the execution).
pub(super) fn reversals(
    steps: &[Step<'_>],
    pending: &[(ThreadId, Footprint)],
    mut found: impl FnMut(Reversal),
) {
    let mut a = Analysis::new(steps);
    for (k, s) in steps.iter().enumerate() {
        let mine = a.clock_of(s.thread, s.footprint);
        for i in a.races_with(s.thread, s.footprint) {
            found(a.reversal(i, s.thread, &mine, k));
        }
        a.record(k, mine);
    }
    for (j, (p, f)) in pending.iter().enumerate() {
        let mine = a.clock_of(*p, f);
        for i in a.races_with(*p, f) {
            found(a.reversal(i, *p, &mine, steps.len() + j));
        }
    }
}

/// What to add at a node for a race: nothing when one of `initials` is already explored,
/// to be explored (`scheduled`) or asleep there; else one enabled initial; else (no initial
/// can run there) every enabled thread not yet scheduled nor asleep.
pub(super) fn additions(
    initials: &[ThreadId],
    enabled: &[ThreadId],
    scheduled: &[ThreadId],
    node: &PorNode,
) -> Vec<ThreadId> {
    if initials
        .iter()
        .any(|q| scheduled.contains(q) || node.asleep(*q))
    {
        return Vec::new();
    }
    if let Some(&q) = initials.iter().find(|q| enabled.contains(q)) {
        return vec![q];
    }
    enabled
        .iter()
        .copied()
        .filter(|q| !scheduled.contains(q) && !node.asleep(*q))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::explore::testing::mutex_footprint as fp;

    #[test]
    fn two_writes_race_and_reading_twice_does_not() {
        let w = fp(&[(1, true)]);
        let r = fp(&[(1, false)]);
        let en = [0, 1];
        let steps = [
            Step {
                thread: 0,
                enabled: &en,
                footprint: &w,
                created: &[],
            },
            Step {
                thread: 1,
                enabled: &en,
                footprint: &w,
                created: &[],
            },
        ];
        assert_eq!(
            races(&steps, &[]),
            vec![Race {
                node: 0,
                initials: vec![1]
            }]
        );
        let steps = [
            Step {
                footprint: &r,
                ..steps[0]
            },
            Step {
                footprint: &r,
                ..steps[1]
            },
        ];
        assert!(races(&steps, &[]).is_empty());
    }

    /// The footprint of one access of `size` bytes at `addr`.
    fn bytes(addr: u64, size: u64, write: bool) -> Footprint {
        let mut f = Footprint::default();
        f.touch_range(addr, size, write);
        f
    }

    #[test]
    fn dependency_is_byte_exact() {
        // T0 writes bytes 0..4 of a word, T1 bytes 4..8: no race. T2 then reads the whole
        // word: it races with the last write of each half.
        let (lo, hi, all) = (
            bytes(0x1000, 4, true),
            bytes(0x1004, 4, true),
            bytes(0x1000, 8, false),
        );
        let en = [0, 1, 2];
        let step = |thread, footprint| Step {
            thread,
            enabled: &en,
            footprint,
            created: &[],
        };
        assert!(races(&[step(0, &lo), step(1, &hi)], &[]).is_empty());
        let nodes: Vec<usize> = races(&[step(0, &lo), step(1, &hi), step(2, &all)], &[])
            .iter()
            .map(|r| r.node)
            .collect();
        assert_eq!(nodes, [0, 1]);
        // A misaligned write over both halves (bytes 3..5) races with each.
        let mid = bytes(0x1003, 2, true);
        let nodes: Vec<usize> = races(&[step(0, &lo), step(1, &hi), step(2, &mid)], &[])
            .iter()
            .map(|r| r.node)
            .collect();
        assert_eq!(nodes, [0, 1]);
        // A 1-byte write just past the low half races with the high half only.
        let b4 = bytes(0x1004, 1, true);
        let nodes: Vec<usize> = races(&[step(0, &lo), step(1, &hi), step(2, &b4)], &[])
            .iter()
            .map(|r| r.node)
            .collect();
        assert_eq!(nodes, [1]);
    }

    #[test]
    fn a_sleeping_thread_stays_asleep_past_disjoint_bytes_of_its_word() {
        let node = PorNode {
            sleep: vec![(1, bytes(0x1000, 4, true))],
            ..PorNode::default()
        };
        let disjoint = bytes(0x1004, 4, true);
        assert_eq!(node.sleep_after(0, &disjoint).count(), 1);
        let overlapping = bytes(0x1002, 4, false);
        assert_eq!(node.sleep_after(0, &overlapping).count(), 0);
    }

    #[test]
    fn only_the_last_write_races_directly() {
        let w = fp(&[(1, true)]);
        let en = [0, 1, 2];
        let step = |thread| Step {
            thread,
            enabled: &en,
            footprint: &w,
            created: &[],
        };
        let steps = [step(0), step(1), step(2)];
        let r = races(&steps, &[]);
        assert_eq!(
            r,
            vec![
                Race {
                    node: 0,
                    initials: vec![1]
                },
                Race {
                    node: 1,
                    initials: vec![2]
                }
            ]
        );
    }

    #[test]
    fn a_later_race_the_waiter_could_not_run_at_does_not_hide_an_earlier_one() {
        // T1 locks m (T0's timeout could come first: T0 enabled), then signals c holding m
        // (T0 cannot run there); T0's pending resume touches c and m. Reversing the signal
        // is impossible, so the race with the lock must be kept.
        let lock = fp(&[(1, true)]);
        let signal = fp(&[(2, true)]);
        let both = [0, 1];
        let only1 = [1];
        let steps = [
            Step {
                thread: 1,
                enabled: &both,
                footprint: &lock,
                created: &[],
            },
            Step {
                thread: 1,
                enabled: &only1,
                footprint: &signal,
                created: &[],
            },
        ];
        let r = races(&steps, &[(0, fp(&[(1, true), (2, true)]))]);
        assert!(
            r.iter().any(|x| x.node == 0 && x.initials == vec![0]),
            "{r:?}"
        );
    }

    #[test]
    fn initials_skip_steps_ordered_after_the_race() {
        // T0 writes a, T1 writes b then a: to reverse the race on a, T1 must start at node 0
        // (its write of b is independent of T0's step).
        let wa = fp(&[(1, true)]);
        let wb = fp(&[(2, true)]);
        let en = [0, 1];
        let steps = [
            Step {
                thread: 0,
                enabled: &en,
                footprint: &wa,
                created: &[],
            },
            Step {
                thread: 1,
                enabled: &en,
                footprint: &wb,
                created: &[],
            },
            Step {
                thread: 1,
                enabled: &en,
                footprint: &wa,
                created: &[],
            },
        ];
        assert_eq!(
            races(&steps, &[]),
            vec![Race {
                node: 0,
                initials: vec![1]
            }]
        );
    }

    #[test]
    fn an_enabling_step_is_no_race_the_acquire_before_it_is() {
        // T0 locks, T1 blocks on the lock, T0 unlocks, T1 locks.
        let m = fp(&[(1, true)]);
        let both = [0, 1];
        let only0 = [0];
        let only1 = [1];
        let steps = [
            Step {
                thread: 0,
                enabled: &both,
                footprint: &m,
                created: &[],
            },
            Step {
                thread: 0,
                enabled: &only0,
                footprint: &m,
                created: &[],
            },
            Step {
                thread: 1,
                enabled: &only1,
                footprint: &m,
                created: &[],
            },
        ];
        assert_eq!(
            races(&steps, &[]),
            vec![Race {
                node: 0,
                initials: vec![1]
            }]
        );
    }

    use crate::explore::testing::{binomial, Program, SynOp};
    use crate::explore::{Scheduler, TreeSearch};
    use rand::SeedableRng;
    use SynOp::*;

    /// Runs `prog` exhaustively with and without reduction: the reduced search must see every
    /// Mazurkiewicz trace the full one sees. Returns (full executions, reduced executions,
    /// traces, redundant reduced executions).
    fn compare(prog: &Program) -> (u64, u64, usize, u64) {
        let mut full = TreeSearch::dfs();
        let (n_full, all) = prog.run_all(&mut full, 1_000_000);
        let mut red = TreeSearch::dpor();
        let (n_red, seen) = prog.run_all(&mut red, 1_000_000);
        assert!(red.coverage().exhausted);
        let missed: Vec<_> = all.difference(&seen).collect();
        assert!(
            missed.is_empty(),
            "{:?}: reduction missed {} of {} traces, e.g. {:?}",
            prog.threads,
            missed.len(),
            all.len(),
            missed[0]
        );
        (n_full, n_red, all.len(), red.redundant_executions())
    }

    #[test]
    fn qadeers_example_needs_one_execution_per_order_of_the_shared_increments() {
        let prog = Program::qadeer();
        let (full, reduced, traces, redundant) = compare(&prog);
        assert_eq!(full, binomial(8, 4));
        assert_eq!(traces, 6, "C(4,2) orders of the four g++");
        assert_eq!(reduced, 6);
        assert_eq!(redundant, 0);
    }

    #[test]
    fn independent_threads_need_one_execution() {
        let prog = Program {
            threads: vec![
                vec![Write(0), Read(3), Write(0)],
                vec![Write(1), Read(3), Local],
                vec![Write(2), Write(2)],
            ],
        };
        let (full, reduced, traces, _) = compare(&prog);
        assert_eq!(full, 560); // 8! / (3! 3! 2!)
        assert_eq!((reduced, traces), (1, 1));
    }

    #[test]
    fn fully_dependent_threads_need_every_interleaving() {
        for (a, b) in [(1, 1), (2, 2), (3, 2)] {
            let prog = Program {
                threads: vec![vec![Write(0); a], vec![Write(0); b]],
            };
            let (full, reduced, traces, _) = compare(&prog);
            assert_eq!(full, binomial((a + b) as u64, a as u64));
            assert_eq!(reduced, full);
            assert_eq!(traces as u64, full);
        }
    }

    #[test]
    fn locks_are_explored_in_both_orders_even_when_the_holder_blocks_the_other() {
        // Critical sections on m: who enters first are two traces; the write of 1 outside
        // the lock is independent of everything.
        let prog = Program {
            threads: vec![
                vec![Lock(9), Write(0), Unlock(9)],
                vec![Write(1), Lock(9), Read(0), Unlock(9)],
            ],
        };
        let (_, reduced, traces, _) = compare(&prog);
        assert_eq!(traces, 2);
        assert_eq!(reduced, 2);
    }

    #[test]
    fn a_thread_blocked_where_every_other_sleeps_still_has_its_races_reversed() {
        // Found by the random test: with T1 first at node 1, T2 blocks on 10 and T0 sleeps,
        // so the execution is sleep-set blocked; T2's pending lock must still race with
        // T1's, or T2 never writes 0 before T0 does.
        let prog = Program {
            threads: vec![
                vec![Lock(11), Write(0), Unlock(11)],
                vec![Read(1), Lock(10), Lock(11), Unlock(11), Unlock(10)],
                vec![Lock(10), Write(0), Unlock(10)],
            ],
        };
        let (_, reduced, traces, redundant) = compare(&prog);
        assert_eq!(traces, 6);
        assert_eq!((reduced, redundant), (6, 0));
    }

    #[test]
    fn lock_order_deadlocks_are_reached() {
        let prog = Program {
            threads: vec![
                vec![Lock(1), Lock(2), Unlock(2), Unlock(1)],
                vec![Lock(2), Lock(1), Unlock(1), Unlock(2)],
            ],
        };
        let mut red = TreeSearch::dpor();
        let mut deadlocked = false;
        let mut n = 0;
        while red.begin_execution(n).is_some() {
            let (_, (_, ends)) = prog.run_once(&mut red);
            deadlocked |= ends != vec![4, 4];
            n += 1;
        }
        assert!(deadlocked, "the ABBA deadlock must be explored");
    }

    #[test]
    fn random_small_programs_get_one_execution_per_trace() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let (mut full_total, mut reduced_total) = (0, 0);
        // The unreduced search of a size-6 program costs most: fewer of them.
        for (size, programs) in [(4, 200), (5, 150), (6, 40)] {
            for _ in 0..programs {
                let prog = Program::random(&mut rng, size);
                let (full, reduced, traces, redundant) = compare(&prog);
                assert_eq!(
                    (reduced, redundant),
                    (traces as u64, 0),
                    "{:?}: wakeup trees make the reduction optimal",
                    prog.threads
                );
                full_total += full;
                reduced_total += reduced;
            }
        }
        eprintln!("random programs: {full_total} executions unreduced, {reduced_total} reduced");
        assert!(
            reduced_total * 2 < full_total,
            "{reduced_total} vs {full_total}"
        );
    }

    #[test]
    fn additions_prefer_an_enabled_initial_and_fall_back_to_all() {
        let node = PorNode::default();
        assert_eq!(additions(&[2], &[0, 2], &[0], &node), vec![2]);
        assert_eq!(
            additions(&[2], &[0, 2], &[0, 2], &node),
            Vec::<usize>::new()
        );
        assert_eq!(additions(&[3], &[0, 1, 2], &[0], &node), vec![1, 2]);
    }
}
