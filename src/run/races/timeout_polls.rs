//! Timeout polls. A runtime that switches threads when a timed wait expires (CPython's
//! GIL, a JVM safepoint request, a pool's keep-alive timer) does it through memory: the
//! waiter whose wait timed out writes an atomic flag ("drop the lock"), and the running
//! thread reads the flag between its steps, then acts on it. Where the running thread reads
//! the flag is where such a timeout changes what it does next, so those reads become
//! scheduling points at which a waiting thread may time out (`session::traps`), as
//! deliberately explored as a preemption.
//!
//! This part learns them, from the accesses the race recording sees: a *signal* is a
//! location a thread stored to after its wait timed out and before it began another wait,
//! atomically (by the source or the address), or with a plain MOV in code without line
//! information, where a relaxed atomic store looks the same (Debian's python3); a plain
//! store with source lines is the program's data, not a signal. A *poll* is a read of a
//! signal, named by its instruction. Signals are the worker's
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
    /// Whether `t`'s last wait timed out and it has not begun another since: what it
    /// stores now may be what the timeout sets.
    #[inline]
    pub fn after_timeout(&self, t: ThreadId) -> bool {
        !self.timed_out.is_empty() && self.timed_out.contains(&t)
    }

    /// Makes `ea` a signal (a store after a timeout, `after_timeout`).
    pub fn note_signal(&mut self, ea: u64) {
        self.signals.insert(ea);
    }

    /// Whether a read of `ea` is a poll (`ea` is a signal).
    #[inline]
    pub fn is_signal(&self, ea: u64) -> bool {
        !self.signals.is_empty() && self.signals.contains(&ea)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_after_a_timeout_is_a_signal_and_its_reads_are_polls() {
        let timed_out: BTreeSet<ThreadId> = [2].into();
        let mut signals = HashSet::new();
        let mut view = TimeoutPollView {
            timed_out: &timed_out,
            signals: &mut signals,
        };
        assert!(!view.after_timeout(1) && view.after_timeout(2));
        assert!(!view.is_signal(0x100));
        view.note_signal(0x100);
        assert!(view.is_signal(0x100));
        assert!(!view.is_signal(0x104), "the address only");
        let nobody = BTreeSet::new();
        let none = TimeoutPollView {
            timed_out: &nobody,
            signals: &mut HashSet::new(),
        };
        assert!(!none.after_timeout(2) && !none.is_signal(0x100));
    }
}
