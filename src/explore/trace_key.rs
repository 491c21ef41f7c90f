//! Keys of Mazurkiewicz traces of execution prefixes, for bounded partial-order reduction of
//! icb ([`super::tree`]): two prefixes get the same key when they order every pair of
//! dependent steps alike (up to hash collisions), whatever the order of their independent
//! steps. The program is then in the same state after both, so that the executions that
//! follow are the same.
//!
//! A step's footprint is the one partial-order reduction uses ([`super::dpor`]): its
//! operation's, what it touched natively, and its thread's exit when it ended there. Its
//! vector clock joins those of the earlier steps of its thread, of the step that created its
//! thread and of the earlier dependent steps of other threads; the key of a prefix is the sum
//! of a 128-bit hash of (thread, index in the thread, clock) over its steps.

use std::hash::{Hash, Hasher};

use crate::model::{Footprint, ThreadId};

/// One finished step of the current path.
#[derive(Debug, Clone)]
struct KeyedStep {
    thread: ThreadId,
    footprint: Footprint,
    clock: Vec<u32>,
    /// Threads that appeared right after this step (it created them).
    created: Vec<ThreadId>,
}

/// The trace keys of the prefixes of the current execution.
#[derive(Debug, Default)]
pub(super) struct TraceKeys {
    steps: Vec<KeyedStep>,
    /// `keys[j]`: the key of the prefix of the first j steps.
    keys: Vec<u128>,
    /// The threads present (enabled or blocked) at each point, parallel to `steps` + 1.
    present: Vec<Vec<ThreadId>>,
    /// The step chosen last, still running: its thread and footprint so far.
    open: Option<(ThreadId, Footprint)>,
}

/// A 128-bit hash of one step of a trace.
fn step_hash(thread: ThreadId, index: u32, clock: &[u32]) -> u128 {
    let half = |salt: u64| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut h);
        (thread, index, clock).hash(&mut h);
        h.finish()
    };
    (half(0x9e37_79b9) as u128) << 64 | half(0x7f4a_7c15) as u128
}

impl TraceKeys {
    /// Point `step` of an execution with `present` threads (enabled or blocked): finishes
    /// the step before it (begun at the previous point), and returns the key of the prefix
    /// of `step` steps.
    pub fn at_point(&mut self, step: usize, present: Vec<ThreadId>) -> u128 {
        if step == 0 {
            self.steps.clear();
            self.keys.clear();
            self.keys.push(0);
            self.present.clear();
            self.open = None;
        } else if let Some((thread, mut footprint)) = self.open.take() {
            self.steps.truncate(step - 1);
            self.keys.truncate(step);
            self.present.truncate(step);
            let before = &self.present[step - 1];
            if !present.contains(&thread) {
                footprint.touch_exit(thread);
            }
            let created: Vec<ThreadId> = (present.iter())
                .filter(|t| !before.contains(t))
                .copied()
                .collect();
            self.push(thread, footprint, created);
        }
        self.present.truncate(step);
        self.present.push(present);
        self.keys[step.min(self.keys.len() - 1)]
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

    /// Appends a finished step, computing its clock and the key of the longer prefix.
    fn push(&mut self, thread: ThreadId, footprint: Footprint, created: Vec<ThreadId>) {
        let mut clock: Vec<u32> = Vec::new();
        let join = |into: &mut Vec<u32>, other: &[u32]| {
            if into.len() < other.len() {
                into.resize(other.len(), 0);
            }
            for (a, b) in into.iter_mut().zip(other) {
                *a = (*a).max(*b);
            }
        };
        let mut index = 0;
        let mut first = true;
        for s in &self.steps {
            if s.thread == thread {
                index += 1;
                first = false;
                join(&mut clock, &s.clock);
            } else if s.footprint.conflicts(&footprint) {
                join(&mut clock, &s.clock);
            }
        }
        if first {
            if let Some(c) = self.steps.iter().find(|s| s.created.contains(&thread)) {
                join(&mut clock, &c.clock.clone());
            }
        }
        if clock.len() <= thread {
            clock.resize(thread + 1, 0);
        }
        clock[thread] = index + 1;
        let key = self.keys.last().copied().unwrap_or(0);
        let key = key.wrapping_add(step_hash(thread, index, &clock));
        self.steps.push(KeyedStep {
            thread,
            footprint,
            clock,
            created,
        });
        self.keys.push(key);
    }
}
