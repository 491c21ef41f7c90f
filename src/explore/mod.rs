//! Scheduling strategies, kept apart from the executor behind the [`Scheduler`] trait: the
//! executor runs a thread to its next scheduling point, the strategy only says which enabled
//! thread goes next.

mod random;

pub use random::RandomScheduler;

use crate::model::ThreadId;

/// What a strategy sees at a scheduling point.
#[derive(Debug, Clone, Copy)]
pub struct Point<'a> {
    /// Enabled threads, in id order (never empty).
    pub enabled: &'a [ThreadId],
    /// The thread that ran up to this point (None at the start).
    pub current: Option<ThreadId>,
    /// Scheduling decisions taken so far in this execution.
    pub step: usize,
}

/// A scheduling strategy.
pub trait Scheduler {
    /// Short name (`random`, ...).
    fn name(&self) -> &'static str;
    /// Prepares execution number `index` (0-based); returns its seed, or None when the
    /// strategy has nothing left to explore.
    fn begin_execution(&mut self, index: u64) -> Option<u64>;
    /// Picks one of `point.enabled`.
    fn choose(&mut self, point: &Point<'_>) -> ThreadId;
    /// Whether the whole space was explored (random search never is).
    fn exhausted(&self) -> bool {
        false
    }
}
