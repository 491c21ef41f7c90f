//! The strategies a user names: `--strategy` on the command line, a target's `strategy` in
//! an audit manifest. Below both the CLI and the audit, so that neither imports the other
//! for it.

use clap::ValueEnum;

/// Scheduling strategies selectable with `--strategy` (or a manifest's `strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StrategyName {
    /// ICB, POS and random interleaved with a reduced dfs; complete when a tree is exhausted.
    Portfolio,
    /// Exhaustive depth-first search over the scheduling choices.
    Dfs,
    /// Iterative preemption bounding: all executions with ≤ c preemptions before c+1.
    Icb,
    /// PCT (probabilistic concurrency testing) with `--pct-depth`.
    Pct,
    /// POS (partial-order sampling): random priorities, re-drawn for racing steps.
    Pos,
    /// A fresh seeded random choice at every scheduling point.
    Random,
}
