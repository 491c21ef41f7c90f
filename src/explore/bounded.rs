//! The footprints of the steps of the current execution, for bounded partial-order
//! reduction of icb ([`super::tree`], see `TreeSearch::with_por`): a step's footprint is
//! the one dynamic partial-order reduction uses ([`super::dpor`]), its operation's, what
//! the thread touched natively up to its next stop, and the thread's exit when the step
//! ended it (so that a join of the thread depends on it).

use crate::model::{Footprint, ThreadId};

/// The finished steps of the current execution, and the one running.
#[derive(Debug, Default)]
pub(super) struct Steps {
    /// Thread and footprint of each finished step.
    done: Vec<(ThreadId, Footprint)>,
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
            self.present.clear();
            self.open = None;
        } else if let Some((thread, mut footprint)) = self.open.take() {
            self.done.truncate(step - 1);
            if !present.contains(&thread) {
                footprint.touch_exit(thread);
            }
            self.done.push((thread, footprint));
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
        self.done.push((thread, footprint));
        self.done.last()
    }
}
