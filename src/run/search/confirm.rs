//! The confirmation of a lock-order cycle: for each of its edges, earliest first, one
//! directed execution that replays the execution that showed the cycle up to the decision
//! at which the edge's thread was about to take its second lock, then holds that thread
//! back while the others run, and each thread of a later edge too as it reaches its second
//! lock ([`DirectedScheduler`]). A deadlock reached that way is the finding; a cycle none
//! of whose directed executions deadlocks is not reported.

use anyhow::Result;
use serde::Serialize;

use crate::explore::{Decision, DirectedScheduler, Hold, Scheduler, HOLD_PATIENCE};
use crate::report::FindingKind;
use crate::run::config::ExecutionConfig;
use crate::run::locks::{CycleHold, LockCycle};
use crate::run::session::launch::run_execution;
use crate::run::session::ExecutionOutcome;
use crate::run::worker_state::{RacyPoints, WorkerState};

/// What the confirmation of one cycle came to.
pub(super) enum Confirmation {
    /// A directed execution deadlocked: its outcome, the deadlock its only finding.
    Deadlocked(Box<ExecutionOutcome>),
    /// Not confirmed: why (every directed execution ended without a deadlock, or none
    /// could run).
    Unconfirmed(UnconfirmedCycle),
    /// The search stopped while a directed execution ran.
    CutShort,
}

/// A lock-order cycle that was seen and not confirmed (not reported as a finding).
#[derive(Debug, Clone, Serialize)]
pub struct UnconfirmedCycle {
    /// The cycle, described ("lock-order inversion (potential deadlock): T1 took ...").
    pub message: String,
    /// Its source locations (`file:line`).
    pub locations: Vec<String>,
    /// The execution that showed it.
    pub execution: u64,
    /// Directed executions run to confirm it.
    pub confirmation_executions: u64,
    /// Why it is not reported.
    pub why: String,
}

/// Confirms `cycle`, seen in the execution with schedule `decisions` run with `cfg` and the
/// racy points `racy_before`. `runs` counts the directed executions run.
pub(super) fn confirm(
    cfg: &ExecutionConfig,
    decisions: &[Decision],
    cycle: &LockCycle,
    racy_before: &RacyPoints,
    state: &mut WorkerState,
    runs: &mut u64,
) -> Result<Confirmation> {
    let threads: Vec<_> = cycle.holds.iter().map(|h| h.thread).collect();
    let mut ran = 0u64;
    let mut diverged = 0u64;
    // Earliest first: the execution for an edge also holds the threads of the edges taken
    // later (a cycle of three or four threads needs all but one of them held at once).
    let mut holds: Vec<&CycleHold> = cycle.holds.iter().collect();
    holds.sort_by_key(|h| h.step);
    for (j, hold) in holds.iter().enumerate() {
        if hold.step >= decisions.len() {
            continue;
        }
        let others = (threads.iter().copied()).filter(|&t| t != hold.thread);
        let plan = (holds[j..].iter())
            .filter(|h| h.step < decisions.len())
            .map(|h| Hold {
                thread: h.thread,
                op: decisions[h.step].op.to_string(),
                nth: h.nth,
                lock: Some(h.lock),
            });
        let mut sched = DirectedScheduler::new(
            decisions[..hold.step].to_vec(),
            plan.collect(),
            others.collect(),
            HOLD_PATIENCE,
        );
        sched.begin_execution(0);
        let learnt = state.replace_racy_points(racy_before);
        state.quiet_rerun = true;
        let outcome = run_execution(cfg, &mut sched, state);
        state.quiet_rerun = false;
        state.add_racy_points(&learnt);
        let mut outcome = outcome?;
        *runs += 1;
        if outcome.early_end.cut_short {
            return Ok(Confirmation::CutShort);
        }
        if outcome.divergence.is_some() {
            diverged += 1;
            continue;
        }
        ran += 1;
        // Only a deadlock counts: holding a thread back is unfair, so a livelock or a
        // step limit met here is mcheck's doing; races are the search's to find.
        if (outcome.finding.as_ref()).is_some_and(|f| f.kind == FindingKind::Deadlock) {
            outcome.races.clear();
            outcome.race_origins.clear();
            outcome.lock_order = None;
            return Ok(Confirmation::Deadlocked(Box::new(outcome)));
        }
    }
    let why = if ran > 0 {
        format!(
            "holding each of its threads just before its second lock while the others ran did not deadlock it ({ran} directed execution(s))"
        )
    } else if diverged > 0 {
        "the program did not repeat the execution that showed it, so it could not be steered into the deadlock".to_string()
    } else {
        "its acquisitions were made without a scheduling decision, so it could not be steered into the deadlock".to_string()
    };
    Ok(Confirmation::Unconfirmed(UnconfirmedCycle {
        message: cycle.finding.message.clone(),
        locations: super::result::location_key(&cycle.finding.locations),
        execution: 0,
        confirmation_executions: ran + diverged,
        why,
    }))
}
