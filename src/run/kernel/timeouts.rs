//! Timeouts are choices (CHESS): at every scheduling point, a thread in a timed wait that
//! nothing has woken may time out, as one more alternative next to the threads that can
//! run. The search decides, records and replays it like any other choice.
//!
//! Bounds, so that searches end: a timeout taken while some thread could run (an *early*
//! timeout) counts as a preemption for preemption bounding, is a yield for the fair
//! scheduler, and at most `--max-timeouts` of them happen in one execution; after that, and
//! whenever no thread can run, only the wait with the earliest deadline is offered, which
//! is virtual time running out, as before timeouts were choices. A wait whose deadline is
//! further than `--early-timeout-horizon` (1 s by default) in virtual time never fires
//! early: that it ends before the threads that could run get to run would need them
//! stalled that long (a wait of 49 days timing out while its notifier is ready to run is
//! no report anyone should believe).

use crate::model::{Model, ThreadId};

/// The choices offered at one scheduling point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::run) struct Offer {
    /// Every thread that may be chosen, in id order: the enabled ones and the timeouts.
    pub choices: Vec<ThreadId>,
    /// The threads of `choices` whose step is a timeout, earliest deadline first.
    pub timeouts: Vec<ThreadId>,
    /// Some thread can run without timing out (a timeout taken here is early).
    pub runnable: bool,
}

/// What may be chosen in `model`'s state when `early` early timeouts were taken in this
/// execution, `max_early` are allowed, and only deadlines at most `horizon_ns` of virtual
/// time away may fire early.
pub(in crate::run) fn offer(model: &Model, early: u32, max_early: u32, horizon_ns: u64) -> Offer {
    let enabled = model.enabled_threads();
    let mut timeouts = model.timeout_threads();
    let runnable = !enabled.is_empty();
    if !runnable {
        // Nothing can run: virtual time moves to the earliest deadline.
        timeouts.truncate(1);
    } else if early >= max_early {
        timeouts.clear();
    } else {
        let now = model.now();
        timeouts.retain(|&t| {
            model
                .deadline(t)
                .is_some_and(|d| d.saturating_sub(now) <= horizon_ns)
        });
    }
    let mut choices = enabled;
    choices.extend(&timeouts);
    choices.sort_unstable();
    Offer {
        choices,
        timeouts,
        runnable,
    }
}

/// Whether a scheduling point taken now by the running thread (which has no pending
/// operation in `model`) would offer another choice than going on: another thread can run,
/// or a waiting one could time out early (`offer` with the running thread enabled: its
/// deadline within `horizon_ns`, fewer than `max_early` early timeouts taken). A place where
/// the running thread reads what a timeout sets (`timeout_polls`) is then worth a point: a
/// thread that can run may get to its timed wait there (in a real run it would, on another
/// CPU, while this one computes), and a waiting one may time out.
pub(in crate::run) fn another_choice_possible(
    model: &Model,
    early: u32,
    max_early: u32,
    horizon_ns: u64,
) -> bool {
    if !model.enabled_threads().is_empty() {
        return true;
    }
    let now = model.now();
    early < max_early
        && model.timeout_threads().into_iter().any(|t| {
            model
                .deadline(t)
                .is_some_and(|d| d.saturating_sub(now) <= horizon_ns)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Op;

    fn model_with_sleepers() -> Model {
        let mut m = Model::new();
        let t1 = m.add_thread();
        let t2 = m.add_thread();
        m.set_pending(t1, Op::Sleep { ns: 50 }, 0).unwrap();
        m.set_pending(t2, Op::Sleep { ns: 10 }, 0).unwrap();
        m
    }

    #[test]
    fn timeouts_are_offered_next_to_runnable_threads_until_the_bound() {
        let mut m = model_with_sleepers();
        m.set_pending(0, Op::Yield, 0).unwrap();
        let o = offer(&m, 0, 2, u64::MAX);
        assert_eq!(o.choices, vec![0, 1, 2]);
        assert_eq!(o.timeouts, vec![2, 1], "earliest deadline first");
        assert!(o.runnable);
        let spent = offer(&m, 2, 2, u64::MAX);
        assert_eq!((spent.choices, spent.timeouts), (vec![0], vec![]));
    }

    #[test]
    fn when_nothing_runs_the_earliest_deadline_fires_whatever_the_bound() {
        let m = model_with_sleepers();
        for early in [0, 5] {
            let o = offer(&m, early, 2, 0);
            assert_eq!((o.choices, o.timeouts), (vec![2], vec![2]));
            assert!(!o.runnable);
        }
    }

    #[test]
    fn another_choice_is_a_thread_that_can_run_or_an_early_timeout_within_bounds() {
        let mut m = model_with_sleepers();
        assert!(another_choice_possible(&m, 0, 2, u64::MAX));
        assert!(another_choice_possible(&m, 0, 2, 10), "the 10 ns sleep");
        assert!(
            !another_choice_possible(&m, 0, 2, 5),
            "both past the horizon"
        );
        assert!(
            !another_choice_possible(&m, 2, 2, u64::MAX),
            "the bound is spent"
        );
        let mut one = Model::new();
        assert!(
            !another_choice_possible(&one, 0, 2, u64::MAX),
            "the runner alone"
        );
        one.add_thread();
        one.set_pending(1, Op::Yield, 0).unwrap();
        assert!(another_choice_possible(&one, 0, 0, 0), "T1 can run");
        m.set_pending(0, Op::Yield, 0).unwrap();
        assert!(another_choice_possible(&m, 2, 2, 0), "T0 can run");
    }

    #[test]
    fn a_deadline_beyond_the_horizon_fires_only_when_nothing_runs() {
        let mut m = model_with_sleepers();
        m.set_pending(0, Op::Yield, 0).unwrap();
        let o = offer(&m, 0, 2, 20);
        assert_eq!(
            o.choices,
            vec![0, 2],
            "the 50 ns sleep is past a 20 ns horizon"
        );
        assert_eq!(o.timeouts, vec![2]);
        let none = offer(&m, 0, 2, 5);
        assert_eq!((none.choices, none.timeouts), (vec![0], vec![]));
    }
}
