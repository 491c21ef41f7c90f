//! The footprints of the steps of the current execution, for bounded partial-order
//! reduction of icb ([`super::tree`], see `TreeSearch::with_por`): a step's footprint is
//! the one dynamic partial-order reduction uses ([`super::dpor`]), its operation's, what
//! the thread touched natively up to its next stop, and the thread's exit when the step
//! ended it (so that a join of the thread depends on it). Happens-before over them is
//! kept with vector clocks: a step's clock joins those of its thread's previous step and of
//! the earlier dependent steps of other threads, found through per-object clocks (the last
//! write of each object and the reads since), so that finishing a step costs its footprint,
//! not the length of the execution. [`HeldIndex`] finds the held-back nodes a step or a
//! pending operation releases the same way.

use std::collections::HashMap;

use crate::model::{Footprint, ObjectRef, ThreadId};

/// The finished steps of the current execution, and the one running.
#[derive(Debug, Default)]
pub(super) struct Steps {
    /// Thread and footprint of each finished step.
    done: Vec<(ThreadId, Footprint)>,
    /// The vector clock of each finished step (parallel to `done`): for each thread, how
    /// many of its steps happen before it or are it.
    clocks: Vec<Vec<u32>>,
    /// The previous finished step of each finished step's thread (parallel to `done`).
    previous: Vec<Option<usize>>,
    /// The last finished step of each thread.
    last_of: Vec<Option<usize>>,
    /// Per object touched (per byte for memory, [`crate::model::Touch::keys`]): the clock of
    /// its last write and the join of its reads since.
    objects: HashMap<ObjectRef, ObjectClocks>,
    /// The join of every finished step's clock (what a global step comes after).
    all: Vec<u32>,
    /// The join of the clocks of the global steps (what every later step comes after).
    globals: Vec<u32>,
    /// The threads present (enabled or blocked) at the point before each step, and at the
    /// current point.
    present: Vec<Vec<ThreadId>>,
    /// The step chosen last, still running: its thread and footprint so far.
    open: Option<(ThreadId, Footprint)>,
}

/// The clocks of one object's accesses that a later access may depend on.
#[derive(Debug, Default)]
struct ObjectClocks {
    /// The clock of the last step that wrote it.
    write: Vec<u32>,
    /// The join of the clocks of the steps that read it since.
    reads: Vec<u32>,
}

/// `into` becomes the pointwise maximum of itself and `other`.
fn join(into: &mut Vec<u32>, other: &[u32]) {
    if into.len() < other.len() {
        into.resize(other.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(other) {
        *a = (*a).max(*b);
    }
}

impl Steps {
    /// Point `step` of an execution, with `present` threads (enabled or blocked): finishes
    /// the step before it, begun at the previous point.
    pub fn at_point(&mut self, step: usize, present: Vec<ThreadId>) {
        if step == 0 {
            self.done.clear();
            self.clocks.clear();
            self.previous.clear();
            self.last_of.clear();
            self.clear_objects();
            self.present.clear();
            self.open = None;
        } else if let Some((thread, mut footprint)) = self.open.take() {
            if self.done.len() >= step {
                // Not the next point: forget the steps after it.
                self.truncate(step - 1);
            }
            if !present.contains(&thread) {
                footprint.touch_exit(thread);
            }
            self.push(thread, footprint);
        }
        self.present.truncate(step);
        self.present.push(present);
    }

    /// Keeps the first `n` finished steps, and rebuilds what is derived from them.
    fn truncate(&mut self, n: usize) {
        self.done.truncate(n);
        self.clocks.truncate(n);
        self.previous.truncate(n);
        self.last_of.clear();
        self.clear_objects();
        for j in 0..n {
            let u = self.done[j].0;
            if self.last_of.len() <= u {
                self.last_of.resize(u + 1, None);
            }
            self.last_of[u] = Some(j);
            let (footprint, clock) = (&self.done[j].1, &self.clocks[j]);
            record(
                &mut self.objects,
                &mut self.all,
                &mut self.globals,
                footprint,
                clock,
            );
        }
    }

    /// Forgets the per-object clocks.
    fn clear_objects(&mut self) {
        self.objects.clear();
        self.all.clear();
        self.globals.clear();
    }

    /// The step of `thread` begins at the current point, with its operation's footprint.
    pub fn chose(&mut self, thread: ThreadId, footprint: Footprint) {
        self.open = Some((thread, footprint));
    }

    /// The step running touched `touched` natively.
    pub fn ran(&mut self, touched: &Footprint) {
        if let Some((_, f)) = self.open.as_mut() {
            f.extend_plain(touched);
        }
    }

    /// Finished step `j`: its thread and footprint.
    pub fn step(&self, j: usize) -> Option<&(ThreadId, Footprint)> {
        self.done.get(j)
    }

    /// The number of finished steps.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// The vector clock of finished step `j`.
    pub fn clock(&self, j: usize) -> &[u32] {
        &self.clocks[j]
    }

    /// The clock of `thread`'s last finished step before finished step `j` (of that
    /// thread), or of its last finished step when `j` is None: what a step or operation
    /// of `thread` after it comes after (empty when it has none).
    pub fn seen_by(&self, thread: ThreadId, j: Option<usize>) -> &[u32] {
        let previous = match j {
            Some(j) => self.previous[j],
            None => self.last_of.get(thread).copied().flatten(),
        };
        previous.map_or(&[], |p| &self.clocks[p])
    }

    /// The execution ended after the running step: it is finished as dependent with
    /// everything when `unknown` (threads were left, or the execution failed: what the
    /// thread was to do next is not known), else as ending its thread.
    pub fn finish(&mut self, unknown: bool) -> Option<&(ThreadId, Footprint)> {
        let (thread, mut footprint) = self.open.take()?;
        if unknown {
            footprint.global = true;
        } else {
            footprint.touch_exit(thread);
        }
        self.push(thread, footprint);
        self.done.last()
    }

    /// Appends a finished step with its clock: the join of its thread's previous step's,
    /// of the global steps', and of the last write (and, for a write, the reads since) of
    /// each object it touches; for a global step, of every step's.
    fn push(&mut self, thread: ThreadId, footprint: Footprint) {
        if self.last_of.len() <= thread {
            self.last_of.resize(thread + 1, None);
        }
        let previous = self.last_of[thread];
        let mut clock = previous.map_or_else(Vec::new, |p| self.clocks[p].clone());
        if footprint.global {
            join(&mut clock, &self.all);
        } else {
            join(&mut clock, &self.globals);
            for t in &footprint.touches {
                for key in t.keys() {
                    if let Some(o) = self.objects.get(&key) {
                        join(&mut clock, &o.write);
                        if t.write {
                            join(&mut clock, &o.reads);
                        }
                    }
                }
            }
        }
        if clock.len() <= thread {
            clock.resize(thread + 1, 0);
        }
        clock[thread] += 1;
        record(
            &mut self.objects,
            &mut self.all,
            &mut self.globals,
            &footprint,
            &clock,
        );
        self.last_of[thread] = Some(self.done.len());
        self.done.push((thread, footprint));
        self.clocks.push(clock);
        self.previous.push(previous);
    }
}

/// Records a finished step's accesses in the per-object clocks.
fn record(
    objects: &mut HashMap<ObjectRef, ObjectClocks>,
    all: &mut Vec<u32>,
    globals: &mut Vec<u32>,
    footprint: &Footprint,
    clock: &[u32],
) {
    join(all, clock);
    if footprint.global {
        join(globals, clock);
    }
    for t in &footprint.touches {
        for key in t.keys() {
            let o = objects.entry(key).or_default();
            if t.write {
                o.write.clear();
                o.write.extend_from_slice(clock);
                o.reads.clear();
            } else {
                join(&mut o.reads, clock);
            }
        }
    }
}

/// One held-back node in a [`HeldIndex`] list: its index on the path and how many steps
/// of its thread its step's clock counts (its thread's steps are numbered in path order).
type Entry = (usize, u32);

/// The held-back nodes of one thread whose step touches one object.
#[derive(Debug)]
struct ObjectHeld {
    /// The thread.
    thread: ThreadId,
    /// Its nodes whose step reads the object (and does not write it).
    reads: Vec<Entry>,
    /// Its nodes whose step writes the object.
    writes: Vec<Entry>,
}

/// The held-back nodes of the current execution whose step has finished, indexed so that
/// a step or pending operation finds the ones it releases without looking at the others:
/// per thread, in path order, all of them, those whose step is global, and per object
/// those that read it and those that write it. A node of thread `a` is released by an
/// operation of another thread `u` dependent with its step unless `u`'s steps so far come
/// after it (`u`'s clock counts at least as many of `a`'s steps); so in each list the
/// nodes `u` releases are a suffix, and are taken off it.
#[derive(Debug, Default)]
pub(super) struct HeldIndex {
    /// The number of steps whose nodes were offered to the index (see [`Self::offer`]).
    pub upto: usize,
    /// Every node, per thread.
    all: HashMap<ThreadId, Vec<Entry>>,
    /// The nodes whose step is global, per thread.
    global: HashMap<ThreadId, Vec<Entry>>,
    /// Per object (per byte for memory), per thread: the nodes whose step reads it, and
    /// those that write it.
    objects: HashMap<ObjectRef, Vec<ObjectHeld>>,
}

impl HeldIndex {
    /// Forgets every node.
    pub fn clear(&mut self) {
        self.upto = 0;
        self.all.clear();
        self.global.clear();
        self.objects.clear();
    }

    /// Adds node `i`, held back, whose step by `thread` with `footprint` counts `nth` steps
    /// of its thread.
    pub fn add(&mut self, i: usize, thread: ThreadId, nth: u32, footprint: &Footprint) {
        let e = (i, nth);
        self.all.entry(thread).or_default().push(e);
        if footprint.global {
            self.global.entry(thread).or_default().push(e);
        }
        for (t, key) in (footprint.touches.iter()).flat_map(|t| t.keys().map(move |k| (t, k))) {
            let per_thread = self.objects.entry(key).or_default();
            let k = match per_thread.iter().position(|h| h.thread == thread) {
                Some(k) => k,
                None => {
                    per_thread.push(ObjectHeld {
                        thread,
                        reads: Vec::new(),
                        writes: Vec::new(),
                    });
                    per_thread.len() - 1
                }
            };
            let h = &mut per_thread[k];
            if t.write { &mut h.writes } else { &mut h.reads }.push(e);
        }
    }

    /// Takes off, into `out`, the nodes an operation of `thread` with `footprint` releases,
    /// `seen` being the clock of `thread`'s last step before it.
    pub fn release(
        &mut self,
        thread: ThreadId,
        footprint: &Footprint,
        seen: &[u32],
        out: &mut Vec<usize>,
    ) {
        let seen_of = |a: ThreadId| seen.get(a).copied().unwrap_or(0);
        let mut take = |list: &mut Vec<Entry>, a: ThreadId| {
            while let Some(&(i, nth)) = list.last() {
                if nth <= seen_of(a) {
                    break;
                }
                out.push(i);
                list.pop();
            }
        };
        if footprint.global {
            for (&a, list) in self.all.iter_mut() {
                if a != thread {
                    take(list, a);
                }
            }
            return;
        }
        for (&a, list) in self.global.iter_mut() {
            if a != thread {
                take(list, a);
            }
        }
        for (t, key) in (footprint.touches.iter()).flat_map(|t| t.keys().map(move |k| (t, k))) {
            let Some(per_thread) = self.objects.get_mut(&key) else {
                continue;
            };
            for h in per_thread.iter_mut().filter(|h| h.thread != thread) {
                take(&mut h.writes, h.thread);
                if t.write {
                    take(&mut h.reads, h.thread);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ObjectKind;
    use rand::{Rng, SeedableRng};

    /// A random step: thread, footprint over a few words, whole or byte ranges of 1 to 16
    /// bytes, aligned or not (sometimes global or empty).
    fn random_step(rng: &mut impl Rng, threads: usize) -> (ThreadId, Footprint) {
        let mut f = Footprint::default();
        if rng.random_ratio(1, 25) {
            f.global = true;
        } else {
            for _ in 0..rng.random_range(0..3) {
                if rng.random() {
                    f.touch(
                        ObjectKind::Memory,
                        rng.random_range(0..4u64) * 8,
                        rng.random(),
                    );
                } else {
                    let size = [1, 2, 4, 8, 16][rng.random_range(0..5)];
                    f.touch_range(rng.random_range(0..28u64), size, rng.random());
                }
            }
        }
        (rng.random_range(0..threads), f)
    }

    /// Fewer than `most` random steps (at least one) of `threads` threads.
    fn random_steps(rng: &mut impl Rng, threads: usize, most: usize) -> Vec<(ThreadId, Footprint)> {
        (0..rng.random_range(1..most))
            .map(|_| random_step(rng, threads))
            .collect()
    }

    /// Clocks by the definition: each step joins every earlier step of its thread or
    /// dependent with it.
    fn pairwise_clocks(steps: &[(ThreadId, Footprint)]) -> Vec<Vec<u32>> {
        let mut clocks: Vec<Vec<u32>> = Vec::new();
        for (k, (t, f)) in steps.iter().enumerate() {
            let mut c = vec![0; t + 1];
            for (j, (u, g)) in steps[..k].iter().enumerate() {
                if u == t || g.conflicts(f) {
                    join(&mut c, &clocks[j]);
                }
            }
            c[*t] += 1;
            clocks.push(c);
        }
        clocks
    }

    /// The clocks trimmed of trailing zeros, to compare vectors of different lengths.
    fn trimmed(c: &[u32]) -> Vec<u32> {
        let n = c.iter().rposition(|&x| x > 0).map_or(0, |i| i + 1);
        c[..n].to_vec()
    }

    #[test]
    fn per_object_clocks_equal_the_pairwise_definition() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        for _ in 0..300 {
            let threads = rng.random_range(1..5);
            let steps = random_steps(&mut rng, threads, 30);
            let mut s = Steps::default();
            for (k, (t, f)) in steps.iter().enumerate() {
                s.at_point(k, (0..threads).collect());
                s.chose(*t, f.clone());
            }
            s.at_point(steps.len(), (0..threads).collect());
            let want = pairwise_clocks(&steps);
            for (j, w) in want.iter().enumerate() {
                assert_eq!(trimmed(s.clock(j)), trimmed(w), "step {j} of {steps:?}");
            }
            // Going back to an earlier point rebuilds the per-object clocks: the steps
            // after it, taken again, get the same clocks.
            let cut = rng.random_range(1..=steps.len());
            s.chose(steps[cut - 1].0, steps[cut - 1].1.clone());
            s.at_point(cut, (0..threads).collect());
            for (k, (t, f)) in steps.iter().enumerate().skip(cut) {
                s.chose(*t, f.clone());
                s.at_point(k + 1, (0..threads).collect());
            }
            for (j, w) in want.iter().enumerate() {
                assert_eq!(trimmed(s.clock(j)), trimmed(w), "after the cut at {cut}");
            }
        }
    }

    #[test]
    fn the_index_releases_what_checking_every_held_node_releases() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(9);
        for _ in 0..300 {
            let threads = rng.random_range(2..5);
            let steps = random_steps(&mut rng, threads, 40);
            let clocks = pairwise_clocks(&steps);
            // Each step's node is held back with probability 1/2.
            let held: Vec<bool> = steps.iter().map(|_| rng.random()).collect();
            let mut released = vec![false; steps.len()];
            let mut index = HeldIndex::default();
            for (k, (u, f)) in steps.iter().enumerate() {
                if held[k] {
                    index.add(k, *u, clocks[k][*u], f);
                }
                // By definition: a held node i < k of another thread whose step the
                // step k depends on, and that u's previous step does not come after.
                let previous = (0..k).rev().find(|&j| steps[j].0 == *u);
                let mut want = Vec::new();
                for i in 0..k {
                    let a = steps[i].0;
                    let after = previous
                        .is_some_and(|p| clocks[p].get(a).copied().unwrap_or(0) >= clocks[i][a]);
                    if held[i] && !released[i] && a != *u && steps[i].1.conflicts(f) && !after {
                        want.push(i);
                    }
                }
                let seen = previous.map_or(&[][..], |p| &clocks[p][..]);
                let mut got = Vec::new();
                index.release(*u, f, seen, &mut got);
                got.retain(|&i| !released[i]);
                got.sort_unstable();
                got.dedup();
                assert_eq!(got, want, "step {k} of {steps:?}, held {held:?}");
                for i in got {
                    released[i] = true;
                }
            }
        }
    }
}
