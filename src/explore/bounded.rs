//! The footprints of the steps of the current execution, for bounded partial-order
//! reduction of icb ([`super::tree`], see `TreeSearch::with_por`): a step's footprint is
//! the one dynamic partial-order reduction uses ([`super::dpor`]), its operation's, what
//! the thread touched natively up to its next stop, and the thread's exit when the step
//! ended it (so that a join of the thread depends on it). Happens-before over them is
//! kept with vector clocks: a step's clock joins those of its thread's previous step and of
//! the earlier dependent steps of other threads.

use crate::model::{Footprint, ThreadId};

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
    /// The threads present (enabled or blocked) at the point before each step, and at the
    /// current point.
    present: Vec<Vec<ThreadId>>,
    /// The step chosen last, still running: its thread and footprint so far.
    open: Option<(ThreadId, Footprint)>,
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
            self.present.clear();
            self.open = None;
        } else if let Some((thread, mut footprint)) = self.open.take() {
            if self.done.len() >= step {
                // Not the next point: forget the steps after it.
                self.done.truncate(step - 1);
                self.clocks.truncate(step - 1);
                self.previous.truncate(step - 1);
                self.last_of.clear();
                for (j, (u, _)) in self.done.iter().enumerate() {
                    if self.last_of.len() <= *u {
                        self.last_of.resize(u + 1, None);
                    }
                    self.last_of[*u] = Some(j);
                }
            }
            if !present.contains(&thread) {
                footprint.touch_exit(thread);
            }
            self.push(thread, footprint);
        }
        self.present.truncate(step);
        self.present.push(present);
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

    /// Appends a finished step with its clock.
    fn push(&mut self, thread: ThreadId, footprint: Footprint) {
        let mut clock = vec![0; thread + 1];
        for ((u, f), c) in self.done.iter().zip(&self.clocks) {
            if *u == thread || f.conflicts(&footprint) {
                if clock.len() < c.len() {
                    clock.resize(c.len(), 0);
                }
                for (a, b) in clock.iter_mut().zip(c) {
                    *a = (*a).max(*b);
                }
            }
        }
        clock[thread] += 1;
        if self.last_of.len() <= thread {
            self.last_of.resize(thread + 1, None);
        }
        let previous = self.last_of[thread].replace(self.done.len());
        self.done.push((thread, footprint));
        self.clocks.push(clock);
        self.previous.push(previous);
    }

    /// Whether finished step `i` happens before the step or the pending operation of
    /// `thread` that follows its finished steps before step `before` (the last finished
    /// step, or the end of those): false when none of those steps comes after `i` in
    /// happens-before.
    pub fn ordered_after(&self, i: usize, thread: ThreadId, before: usize) -> bool {
        let Some(&(a, _)) = self.done.get(i) else {
            return false;
        };
        let nth = self.clocks[i][a];
        let previous = if before >= self.done.len() {
            self.last_of.get(thread).copied().flatten()
        } else if self.done[before].0 == thread {
            self.previous[before]
        } else {
            (0..before).rev().find(|&k| self.done[k].0 == thread)
        };
        previous.is_some_and(|j| self.clocks[j].get(a).is_some_and(|&n| n >= nth))
    }
}
