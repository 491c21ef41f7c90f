//! A finding's witness execution, and the stacks of the earlier sides of its races, got by
//! running its schedule again.

use anyhow::Result;

use crate::explore::{Decision, ReplayScheduler, Scheduler};
use crate::report::Finding;
use crate::run::config::ExecutionConfig;
use crate::run::races::atomic_addresses::AtomicAddresses;
use crate::run::races::AccessKey;
use crate::run::session::launch::run_execution;
use crate::run::session::ExecutionOutcome;
use crate::run::worker_state::{RacyPoints, WorkerState};

/// A finding with the schedule that shows it.
#[derive(Debug, Clone)]
pub struct Witness {
    /// The finding.
    pub finding: Finding,
    /// The scheduling decisions of the witness execution.
    pub decisions: Vec<Decision>,
    /// The strategy (and member) that found it.
    pub strategy: String,
    /// What was made scheduling points in that execution (None: `--preempt-on-races` was
    /// off for it).
    pub racy: Option<RacyPoints>,
    /// Addresses known to hold atomics when it ran.
    pub atomic_addresses: Vec<u64>,
}

/// Runs the schedule of `outcome` once more to take the stack of the earlier access of each
/// race (only the later one is at hand when a race is found), and puts it in the report.
/// `atomics`: the addresses known to hold atomics when the races were found, when the
/// worker has learnt more since.
pub fn attach_earlier_stacks(
    cfg: &ExecutionConfig,
    outcome: &mut ExecutionOutcome,
    racy_before: &RacyPoints,
    atomics: Option<AtomicAddresses>,
    state: &mut WorkerState,
) -> Result<()> {
    let requests: Vec<_> = (outcome.race_origins.iter())
        .flat_map(|o| std::iter::once(o.earlier).chain(o.later))
        .collect();
    let cfg = ExecutionConfig {
        stack_requests: requests,
        ..cfg.clone()
    };
    // With the atomics the races were found knowing (`atomics`, when the worker has learnt
    // more since): what is learnt meanwhile is kept.
    let learnt = atomics.map(|a| std::mem::replace(&mut state.atomic_addresses, a));
    let again = rerun(&cfg, &outcome.decisions, racy_before, state);
    if let Some(learnt) = learnt {
        for &a in learnt.iter() {
            state.atomic_addresses.insert(a);
        }
    }
    let Some(again) = again? else {
        return Ok(());
    };
    let captured = |key: &AccessKey| {
        (again.captured_stacks.iter())
            .find(|(k, s)| k == key && !s.is_empty())
            .map(|(_, s)| s.clone())
    };
    for o in &outcome.race_origins {
        let Some(f) = outcome.races.get_mut(o.index) else {
            continue;
        };
        // The report lists the later access first, the earlier second.
        let sides = [(0, o.later), (1, Some(o.earlier))];
        for (slot, key) in sides {
            let (Some(key), Some(report)) = (key, f.threads.get_mut(slot)) else {
                continue;
            };
            if let Some(stack) = captured(&key) {
                report.stack = stack;
            }
        }
    }
    Ok(())
}

/// Runs the schedule `decisions` again with what the worker knows now, with the same racy
/// addresses as scheduling points as the first time. None when it no longer follows.
pub(super) fn rerun(
    cfg: &ExecutionConfig,
    decisions: &[Decision],
    racy_before: &RacyPoints,
    state: &mut WorkerState,
) -> Result<Option<ExecutionOutcome>> {
    let learnt = state.replace_racy_points(racy_before);
    let mut again = ReplayScheduler::new(decisions.to_vec());
    again.begin_execution(0);
    state.quiet_rerun = true;
    let outcome = run_execution(cfg, &mut again, state);
    state.quiet_rerun = false;
    state.add_racy_points(&learnt);
    let outcome = outcome?;
    Ok(outcome.divergence.is_none().then_some(outcome))
}
