//! The search's driver of one execution: the loop that asks the strategy which thread
//! goes next at each scheduling point the execution offers, and tells it what each step
//! touched. The session ([`Session`]) carries decisions out and knows no strategy.

use anyhow::Result;

use super::{Choices, ExecutionOutcome, Session, Stop};
use crate::explore::{Divergence, Scheduler};
use crate::model::ThreadId;
use crate::run::snapshots::point_log::PointLog;

/// Runs `exec` to its end under `sched`: from exec, or from a snapshot copy whose skipped
/// decisions (`restored`) are first shown to the strategy again.
pub(super) fn drive(
    exec: &mut Session<'_>,
    sched: &mut dyn Scheduler,
    restored: Option<PointLog>,
) -> Result<ExecutionOutcome> {
    let mut current: Option<ThreadId> = None;
    match &restored {
        None => exec.begin()?,
        Some(prefix) => {
            for saved in prefix.iter() {
                match sched.choose(&saved.point()) {
                    Ok(t) if t == saved.chosen => {
                        current = Some(t);
                        if let (Some(touched), Some(tree)) = (&saved.ran, sched.tree()) {
                            tree.ran(touched);
                        }
                    }
                    Ok(t) => {
                        return Ok(exec.diverged(Divergence {
                            step: saved.step,
                            reason: format!(
                                "the strategy chose T{t} where only T{} could run",
                                saved.chosen
                            ),
                        }))
                    }
                    Err(d) => return Ok(exec.diverged(d)),
                }
            }
        }
    }
    if exec.starts_with_main(restored.is_none()) {
        let skipped = restored.as_ref().is_some_and(|p| !p.is_empty());
        if let Some(out) = ran(sched, exec.run_main(skipped)?) {
            return Ok(out);
        }
    }
    loop {
        let offer = match exec.choices()? {
            Choices::At(offer) => offer,
            Choices::End(out) => return Ok(*out),
        };
        let step = exec.steps() as usize;
        if sched.tree().is_some_and(|t| t.wants_state(step)) {
            let h = exec.state_hash()?;
            if sched.tree().is_some_and(|t| t.visit_state(step, h)) {
                let mut out = exec.outcome(None);
                out.early_end.pruned = true;
                return Ok(out);
            }
        }
        if offer.choices.len() > 1 && sched.tree().is_some_and(|t| t.may_backtrack_to(step)) {
            exec.snapshotting().maybe_branch_snapshot()?;
        }
        let mut point = exec.scheduling_point(&offer, current);
        let t = match sched.choose(&point.point()) {
            Ok(t) => t,
            Err(d) => return Ok(exec.diverged(d)),
        };
        if sched.tree().is_some_and(|t| t.leaves_share()) {
            let mut out = exec.outcome(None);
            out.early_end.outside_share = true;
            return Ok(out);
        }
        if exec.debugger_at_decision(t)? {
            return Ok(exec.cut_short());
        }
        point.chosen = t;
        current = Some(t);
        if exec.decide(point, &offer) {
            let mut out = exec.outcome(None);
            out.early_end.stopped_early = true;
            return Ok(out);
        }
        if let Some(out) = ran(sched, exec.step(t)?) {
            return Ok(out);
        }
    }
}

/// Shows the strategy what the step that came to `stop` touched; the outcome when the
/// execution is over.
fn ran(sched: &mut dyn Scheduler, stop: Stop) -> Option<ExecutionOutcome> {
    match stop {
        Stop::Blocked | Stop::Point(None) => None,
        Stop::Point(Some(touched)) => {
            if let Some(tree) = sched.tree() {
                tree.ran(&touched);
            }
            None
        }
        Stop::End(out, touched) => {
            if let (Some(touched), Some(tree)) = (touched, sched.tree()) {
                tree.ran(&touched);
            }
            Some(*out)
        }
    }
}
