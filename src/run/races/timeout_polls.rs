//! Timeout polls. A runtime that switches threads when a timed wait expires (CPython's
//! GIL, a JVM safepoint request, a pool's keep-alive timer) does it through memory: the
//! waiter whose wait timed out writes an atomic flag ("drop the lock"), and the running
//! thread reads the flag between its steps, then acts on it. Where the running thread reads
//! the flag is where such a timeout changes what it does next, so those reads become
//! scheduling points at which a waiting thread may time out (`session::traps`), as
//! deliberately explored as a preemption.
//!
//! This part learns them, from the accesses the race recording sees: a *signal* is a
//! location a thread wrote after its wait timed out and before it began another wait
//! (atomic or plain: in a program without DWARF a relaxed atomic store is a plain MOV, and
//! the window is short, since such a waiter usually waits again at once); a *poll* is a
//! read of a signal, named by its instruction. Signals are the worker's
//! (learnt in one execution, known in the next); polls found in an execution become points
//! from the next refinement round on, as racy sites do.

use std::collections::{BTreeSet, HashSet};

use crate::model::ThreadId;

/// What the race recording reads and updates of the timeout polls while it records.
pub(in crate::run) struct TimeoutPollView<'a> {
    /// Threads whose last wait timed out and which have not begun another since.
    pub timed_out: &'a BTreeSet<ThreadId>,
    /// Signals learnt so far (the worker's).
    pub signals: &'a mut HashSet<u64>,
}

impl TimeoutPollView<'_> {
    /// Notes an access of `t` at `ea`: a write after a timeout makes `ea` a signal.
    /// True when the access is a poll (a read of a signal).
    #[inline]
    pub fn is_poll(&mut self, t: ThreadId, ea: u64, write: bool) -> bool {
        if write {
            if !self.timed_out.is_empty() && self.timed_out.contains(&t) {
                self.signals.insert(ea);
            }
            false
        } else {
            !self.signals.is_empty() && self.signals.contains(&ea)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_after_a_timeout_is_a_signal_and_its_reads_are_polls() {
        let timed_out: BTreeSet<ThreadId> = [2].into();
        let mut signals = HashSet::new();
        let mut view = TimeoutPollView {
            timed_out: &timed_out,
            signals: &mut signals,
        };
        assert!(!view.is_poll(1, 0x100, true), "T1 did not time out");
        assert!(!view.is_poll(1, 0x100, false), "not a signal");
        assert!(!view.is_poll(2, 0x100, true), "a write is never a poll");
        assert!(view.is_poll(1, 0x100, false));
        assert!(view.is_poll(2, 0x100, false));
        assert!(!view.is_poll(1, 0x104, false), "the address only");
        assert_eq!(signals, [0x100].into());
    }
}
