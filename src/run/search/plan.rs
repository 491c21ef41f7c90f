//! What to run: the strategy plan and the search's configuration.

use std::time::Duration;

use crate::explore::shard::TreeShard;
use crate::explore::{default_mix, Mix, PctDepth, PosScheduler, RandomScheduler, Slot};
use crate::run::config::ExecutionConfig;

/// Which strategy to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// random ×2 + icb + pos interleaved with a reduced dfs; complete when icb or the
    /// reduced dfs is exhausted.
    Portfolio {
        /// Base seed of the randomised members.
        seed: u64,
        /// Preemption cap of the icb member.
        preemption_bound: Option<u32>,
        /// The icb member is reduced by bounded partial-order reduction.
        por: bool,
    },
    /// Exhaustive depth-first search.
    Dfs {
        /// Reduced by dynamic partial-order reduction.
        por: bool,
    },
    /// Iterative preemption bounding.
    Icb {
        /// Preemption cap.
        preemption_bound: Option<u32>,
        /// Reduced by bounded partial-order reduction.
        por: bool,
    },
    /// PCT with bug depth `depth`.
    Pct {
        /// Bug depth (fixed, or cycling).
        depth: PctDepth,
        /// Base seed.
        seed: u64,
    },
    /// Partial-order sampling.
    Pos {
        /// Base seed.
        seed: u64,
    },
    /// Random choices.
    Random {
        /// Base seed.
        seed: u64,
    },
}

impl Plan {
    /// The strategy's name.
    pub fn name(&self) -> &'static str {
        match self {
            Plan::Portfolio { .. } => "portfolio",
            Plan::Dfs { .. } => "dfs",
            Plan::Icb { .. } => "icb",
            Plan::Pct { .. } => "pct",
            Plan::Pos { .. } => "pos",
            Plan::Random { .. } => "random",
        }
    }

    pub(super) fn tree_cap(&self) -> Option<Option<u32>> {
        match *self {
            Plan::Portfolio {
                preemption_bound, ..
            } => Some(Some(preemption_bound.unwrap_or(u32::MAX))),
            Plan::Icb {
                preemption_bound, ..
            } => Some(Some(preemption_bound.unwrap_or(u32::MAX))),
            Plan::Dfs { .. } => Some(None),
            _ => None,
        }
    }

    /// Whether the tree search is reduced by partial-order reduction (dfs, or icb alone or
    /// in the portfolio by bounded partial-order reduction).
    pub(super) fn por(&self) -> bool {
        matches!(
            self,
            Plan::Dfs { por: true }
                | Plan::Icb { por: true, .. }
                | Plan::Portfolio { por: true, .. }
        )
    }

    /// The randomised members and the cycle of slots of one worker.
    pub(super) fn mix(&self) -> Mix {
        match *self {
            Plan::Portfolio { seed, .. } => default_mix(seed),
            Plan::Dfs { .. } | Plan::Icb { .. } => Mix {
                members: vec![],
                cycle: vec![Slot::Tree],
            },
            Plan::Pct { depth, seed } => Mix {
                members: vec![(Box::new(depth.scheduler(seed)), depth.label())],
                cycle: vec![Slot::Randomized(0)],
            },
            Plan::Pos { seed } => Mix {
                members: vec![(Box::new(PosScheduler::new(seed)), "pos".into())],
                cycle: vec![Slot::Randomized(0)],
            },
            Plan::Random { seed } => Mix {
                members: vec![(Box::new(RandomScheduler::new(seed)), "random".into())],
                cycle: vec![Slot::Randomized(0)],
            },
        }
    }
}

/// Budget and behaviour of a search.
#[derive(Clone, Debug)]
pub struct SearchConfig {
    /// How to run the program.
    pub execution: ExecutionConfig,
    /// The strategy.
    pub plan: Plan,
    /// Worker threads.
    pub jobs: usize,
    /// Most executions.
    pub max_executions: u64,
    /// When set, the portfolio's reduced tree may go on alone past `max_executions` until
    /// it has run this many executions itself (the default budget: see `--max-executions`).
    pub proof_budget: Option<u64>,
    /// Wall-clock budget.
    pub time_limit: Option<Duration>,
    /// Most memory mcheck may hold (its own and its snapshots'), in bytes.
    pub max_memory: u64,
    /// Collect every distinct finding instead of stopping at the first.
    pub keep_going: bool,
    /// Prune dfs with a table of visited states (`--state-cache`).
    pub state_cache: bool,
    /// This machine's part of a tree search split among machines (`--shard`; unreduced
    /// dfs and icb, and the portfolio's icb member).
    pub shard: Option<TreeShard>,
}
