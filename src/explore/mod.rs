//! Scheduling strategies, kept apart from the executor behind the [`Scheduler`] trait: the
//! executor runs a thread to its next scheduling point, the strategy only says which enabled
//! thread goes next.
//!
//! - [`RandomScheduler`]: a fresh seeded random choice at every point.
//! - [`TreeSearch`]: stateless depth-first search over the choices, unbounded (`dfs`) or by
//!   iterative preemption bounding (`icb`, Musuvathi & Qadeer PLDI'07).
//! - [`PctScheduler`]: probabilistic concurrency testing (Burckhardt et al., ASPLOS'10),
//!   with a fixed bug depth or cycling through depths.
//! - [`PosScheduler`]: partial-order sampling (Yuan et al., CAV'18): random priorities per
//!   pending step, re-drawn for the steps that race with the one taken.
//! - [`portfolio`](default_mix): several of the above interleaved execution by execution.
//! - [`ReplayScheduler`]: follows a recorded schedule and detects divergence.
//! - [`DirectedScheduler`]: replays a prefix, then holds threads back, each at its
//!   [`Hold`] (the confirmation of a lock-order cycle).
//! - [`TreePool`]: the shared work of a parallel tree search (`--jobs`).
//! - [`FairFilter`]: the fair scheduler's priority relation (Musuvathi & Qadeer PLDI'08),
//!   applied by the executor to the enabled threads before any strategy sees them.
//!
//! `dfs` is reduced by dynamic partial-order reduction (`dpor`): source sets and sleep sets
//! over the footprints the executor reports; or, with `--state-cache`, pruned by a table of
//! visited states ([`StateTable`], `state_cache`).
//!
//! [`RacySites`] (`refine`): race-directed refinement of the tree searches (racy access
//! sites become scheduling points of a new tree per round) and the coverage claims it
//! allows ("exhausted" only when every racy site found was a scheduling point).

mod bounded;
mod directed;
mod dpor;
mod fair;
mod holds;
mod pct;
mod pool;
mod portfolio;
mod pos;
mod prefix;
mod random;
mod refine;
mod replay;
pub mod shard;
mod state_cache;
mod strategy_name;
mod timeout_steps;
mod tree;
mod wakeup;

pub use directed::{DirectedScheduler, HOLD_PATIENCE};
pub use fair::FairFilter;
pub use holds::Hold;
pub use pct::{PctDepth, PctScheduler};
pub use pool::{Claims, TreePool, WorkItem};
pub use portfolio::{default_mix, Mix, Slot};
pub use pos::PosScheduler;
pub use prefix::{Path, Prefix};
pub use random::RandomScheduler;
pub use refine::RacySites;
pub use replay::{Decision, ReplayScheduler};
pub use state_cache::{counter_of, CacheStats, EndTable, SharedStateTable, StateTable, Visit};
pub use strategy_name::StrategyName;
pub use tree::{Deferred, Split, TreeSearch};

use crate::model::{Footprint, ThreadId};

/// What a strategy sees at a scheduling point.
#[derive(Debug, Clone, Copy)]
pub struct Point<'a> {
    /// Enabled threads, in id order (never empty).
    pub enabled: &'a [ThreadId],
    /// The operation each enabled thread will perform (parallel to `enabled`).
    pub ops: &'a [&'static str],
    /// What each enabled thread's pending operation touches (parallel to `enabled`), for
    /// partial-order reduction; empty when unknown (every step is then assumed dependent).
    pub footprints: &'a [Footprint],
    /// Threads waiting for an operation they cannot perform yet, with its footprint.
    pub blocked: &'a [(ThreadId, Footprint)],
    /// The threads of `enabled` whose step would be a timeout (a timed wait that may time
    /// out here although nothing woke it), earliest deadline first.
    pub timeouts: &'a [ThreadId],
    /// The thread that ran up to this point (None at the start).
    pub current: Option<ThreadId>,
    /// The current thread's pending operation yields (sched_yield, sleep): switching away
    /// from it is not a preemption.
    pub current_yields: bool,
    /// Scheduling decisions taken so far in this execution.
    pub step: usize,
}

impl Point<'_> {
    /// Whether choosing `t` here is a preemption: the current thread could go on and is not
    /// yielding, yet another thread is picked; or `t`'s timeout fires while some thread
    /// could run (an early timeout counts like a preemption, so that a preemption bound
    /// bounds timeouts too).
    pub fn is_preemption(&self, t: ThreadId) -> bool {
        if self.timeouts.contains(&t) {
            return self.enabled.iter().any(|u| !self.timeouts.contains(u));
        }
        match self.current {
            Some(c) => c != t && !self.current_yields && self.enabled.contains(&c),
            None => false,
        }
    }

    /// The choice that costs no preemption and keeps things fair: the current thread if it
    /// can go on and does not yield, else the next enabled thread after it in id order;
    /// timeouts only when no thread can run, the earliest deadline first (virtual time).
    pub fn default_choice(&self) -> ThreadId {
        let runs = |t: &&ThreadId| !self.timeouts.contains(t);
        let next = match self.current {
            Some(c) if !self.current_yields && self.enabled.contains(&c) && runs(&&c) => return c,
            Some(c) => self.enabled.iter().filter(runs).find(|&&t| t > c),
            None => None,
        };
        *next
            .or_else(|| self.enabled.iter().find(runs))
            .or_else(|| self.timeouts.first())
            .unwrap_or(&self.enabled[0])
    }
}

/// A strategy could not follow its plan (a replayed schedule no longer matches the program).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the execution diverged from the schedule at step {step}: {reason}")]
pub struct Divergence {
    /// The step where it happened.
    pub step: usize,
    /// What differed.
    pub reason: String,
}

/// What the search tells the strategy about a finished execution.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExecutionSummary {
    /// Scheduling decisions taken.
    pub steps: usize,
    /// Threads created (including main).
    pub threads: usize,
    /// The execution showed a bug.
    pub found_bug: bool,
}

/// What a systematic strategy has covered so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Coverage {
    /// Every schedule was explored: the tree ran out and it held every racy access site
    /// and timeout poll found as a scheduling point (see [`RacySites::qualify`]).
    pub exhausted: bool,
    /// The tree of schedules ran out (synchronisation order, and the orders of the racy
    /// sites it included).
    pub synchronisation_exhausted: bool,
    /// Racy access sites (instruction addresses) that were scheduling points of the tree.
    pub racy_sites_included: Vec<u64>,
    /// Racy access sites found whose orders the tree did not explore.
    pub racy_sites_not_explored: Vec<u64>,
    /// Reads of what a timeout sets (timeout polls) that were scheduling points of the
    /// tree: a waiting thread's timeout was explored right before each.
    pub poll_sites_included: Vec<u64>,
    /// Timeout polls found that the tree did not hold as scheduling points.
    pub poll_sites_not_explored: Vec<u64>,
    /// Atomic loads of busy waits that were yield points of the tree (a thread spun there
    /// with no scheduling point while another could run).
    pub spin_sites_included: Vec<u64>,
    /// Where the learnt points above are in the source (`function at file:line`), for those
    /// the search could name: the reports name the others from their findings' stacks.
    pub site_names: Vec<(u64, String)>,
    /// Refinement rounds: trees begun anew with more racy sites as scheduling points.
    pub refinement_rounds: u32,
    /// Every execution with at most this many preemptions was explored (ICB).
    pub preemption_bound_completed: Option<u32>,
    /// icb was reduced by bounded partial-order reduction: `preemption_bound_completed`
    /// holds up to the order of independent steps (an execution with more preemptions may
    /// stand for one with fewer that differs from it only in that order).
    pub up_to_independent_steps: bool,
    /// The cap of icb (`--preemption-bound`) left executions with more preemptions
    /// unexplored: `exhausted` then holds up to that bound only.
    pub beyond_preemption_bound: bool,
    /// Executions explored by the systematic part of the strategy.
    pub systematic_executions: u64,
}

/// A scheduling strategy: it answers "which thread next" at each point of an execution,
/// and learns how the execution ended. A tree search has hooks of its own besides
/// ([`TreeHooks`], through [`Scheduler::tree`]).
pub trait Scheduler: Send {
    /// Short name (`random`, `dfs`, ...).
    fn name(&self) -> &'static str;
    /// Prepares execution number `index` (0-based); returns its seed (0 for deterministic
    /// strategies), or None when the strategy has nothing left to explore.
    fn begin_execution(&mut self, index: u64) -> Option<u64>;
    /// Picks one of `point.enabled`.
    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence>;
    /// The execution begun last has ended.
    fn end_execution(&mut self, _summary: &ExecutionSummary) {}
    /// What has been covered.
    fn coverage(&self) -> Coverage {
        Coverage::default()
    }
    /// The strategy that runs the current execution, with its parameters (a portfolio names
    /// its member).
    fn describe_current(&self) -> String {
        self.name().to_string()
    }
    /// The hooks of a tree search (None for any other strategy).
    fn tree(&mut self) -> Option<&mut dyn TreeHooks> {
        None
    }
}

/// What a tree search (dfs, icb) needs from the executor besides choices: the footprint of
/// every step, where the execution replays a known prefix and may be branched off again
/// (fork snapshots), the states it may prune (`--state-cache`), and the share of a search
/// split among machines.
pub trait TreeHooks {
    /// The thread chosen last has run natively to its next stop (or its end) and touched
    /// `touched` on the way: atomic locations accessed with plain instructions, locks taken
    /// inside libc. Called after each step, before the next `choose`.
    fn ran(&mut self, touched: &Footprint);
    /// The choices the current execution will replay before choosing anew, so that the
    /// executor can start from a snapshot taken on that path.
    fn planned_prefix(&self) -> &[ThreadId];
    /// Whether a later execution may branch off at decision `step` of the current one (a
    /// snapshot taken there could be used again).
    fn may_backtrack_to(&self, step: usize) -> bool;
    /// Whether the executor should hash the program state at decision `step` and show it to
    /// [`TreeHooks::visit_state`] (with state caching, at a point beyond the replayed
    /// prefix).
    fn wants_state(&self, step: usize) -> bool;
    /// The program state at decision `step` hashes to `hash`: true when that state was
    /// explored before, so that the execution ends here (its subtree is pruned).
    fn visit_state(&mut self, step: usize, hash: u64) -> bool;
    /// Whether the running execution has left this machine's share of a search split among
    /// machines (`--shard`): asked after each choice, true ends the execution at once (a
    /// prefix run, not an execution of this shard).
    fn leaves_share(&self) -> bool;
    /// Whether the execution that just ended (after [`Scheduler::end_execution`]) belongs
    /// to another shard's share: it is then neither counted nor reported here.
    fn ended_outside_share(&self) -> bool;
}

#[cfg(test)]
mod oracle;
#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_never_the_default_while_a_thread_can_run_and_costs_a_preemption() {
        let p = Point {
            enabled: &[0, 1, 2],
            ops: &[],
            footprints: &[],
            blocked: &[],
            timeouts: &[1],
            current: Some(0),
            current_yields: true,
            step: 3,
        };
        assert_eq!(
            p.default_choice(),
            2,
            "the next thread that can run, not T1's timeout"
        );
        assert!(
            p.is_preemption(1),
            "an early timeout counts as a preemption"
        );
        assert!(!p.is_preemption(2));
        let only = Point {
            enabled: &[1, 2],
            timeouts: &[2, 1],
            ..p
        };
        assert_eq!(only.default_choice(), 2, "earliest deadline first");
        assert!(!only.is_preemption(2), "nothing else could run");
    }
}
