//! Single executions outside a search: a replay, and the race sites of a schedule.

use std::time::Duration;

use anyhow::Result;

use crate::explore::Scheduler;
use crate::run::config::ExecutionConfig;
use crate::run::session::launch::run_execution;
use crate::run::session::ExecutionOutcome;
use crate::run::worker_state::{RacyPoints, WorkerState};
use crate::tracee::{cpu, watchdog::Watchdog};

use super::witness::attach_earlier_stacks;

/// Runs exactly one execution under `sched` (replay), with the same setup as a search.
/// `racy` is what was made scheduling points (`--preempt-on-races`)
/// and `atomic_addresses` those known to hold atomics when the schedule was recorded.
pub fn run_single(
    cfg: &ExecutionConfig,
    sched: &mut dyn Scheduler,
    racy: &RacyPoints,
    atomic_addresses: &[u64],
) -> Result<ExecutionOutcome> {
    let (mut worker, _tick) = replay_worker(racy, atomic_addresses)?;
    // What the races will be found knowing: the run for their stacks must know the same.
    let known = worker.atomic_addresses.clone();
    sched.begin_execution(0);
    let mut outcome = run_execution(cfg, sched, &mut worker)?;
    if !outcome.races.is_empty() && outcome.divergence.is_none() && !outcome.early_end.stopped_early
    {
        let no_trace = ExecutionConfig {
            trace: false,
            ..cfg.clone()
        };
        attach_earlier_stacks(&no_trace, &mut outcome, racy, Some(known), &mut worker)?;
    }
    Ok(outcome)
}

/// The worker of a single replayed execution, on the idlest CPU with its watchdog ticking
/// (keep the watchdog alive for the execution): it knows the racy points and atomic
/// addresses the schedule was recorded with.
pub(crate) fn replay_worker(
    racy: &RacyPoints,
    atomic_addresses: &[u64],
) -> Result<(WorkerState, Watchdog)> {
    cpu::pin_current_thread(cpu::idlest_cpus(1)[0])?;
    let tick = Watchdog::start(Duration::from_millis(100))?;
    let mut worker = WorkerState::default();
    worker.add_racy_points(racy);
    worker
        .atomic_addresses
        .extend(atomic_addresses.iter().copied());
    Ok((worker, tick))
}

/// The instructions at which the execution of `sched` finds its data races (their later
/// accesses), or None when it does not follow the schedule: a replay under gdb keeps them
/// on breakpoints so that it stops at them.
pub fn race_sites(
    cfg: &ExecutionConfig,
    sched: &mut dyn Scheduler,
    racy: &RacyPoints,
    atomic_addresses: &[u64],
) -> Result<Option<Vec<u64>>> {
    let (mut worker, _tick) = replay_worker(racy, atomic_addresses)?;
    sched.begin_execution(0);
    let outcome = run_execution(cfg, sched, &mut worker)?;
    if outcome.divergence.is_some() || outcome.early_end.stopped_early {
        return Ok(None);
    }
    let mut sites: Vec<u64> = (outcome.race_origins.iter())
        .filter_map(|o| o.later.map(|key| key.1))
        .collect();
    sites.sort_unstable();
    sites.dedup();
    Ok(Some(sites))
}
