//! Ending the running executions early. The search raises the signal (time limit reached,
//! SIGINT or SIGTERM, memory limit) and every worker's executor sees it at its next
//! scheduling point or at its next watchdog tick (at most 100 ms later) while a thread runs
//! natively: it then kills its program and reports the execution as cut short.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A request to cut the running executions short, shared by the search and its workers.
#[derive(Clone, Debug, Default)]
pub struct CutSignal(Arc<AtomicBool>);

impl CutSignal {
    /// Asks every execution to end now.
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the running execution should end now.
    pub fn raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
