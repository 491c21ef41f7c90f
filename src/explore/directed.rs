//! The directed schedule that confirms a lock-order cycle (DeadlockFuzzer's second phase,
//! Joshi, Park, Sen & Naik PLDI'09): replay the execution that showed the cycle up to the
//! decision at which one of its threads was about to take its second lock, then hold that
//! thread back while any other thread can run, so that the others walk into the locks it
//! holds. If the cycle is real, the execution deadlocks; if something orders the two
//! acquisitions (a flag handed over under a mutex), the others cannot get there and the
//! held thread is let go again.

use super::{Decision, Divergence, Point, Scheduler};
use crate::model::ThreadId;

/// How long the held thread is held while other threads can still run (they may be
/// waiting for it by polling): it is let go after either bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patience {
    /// Decisions of the others taken where the thread that ran last was about to yield
    /// (sched_yield, a sleep, a timed futex wait): a thread polling for the held one.
    pub yields: usize,
    /// Decisions of the others in all (a thread spinning without yielding, or a long run
    /// of work before the other end of the cycle).
    pub decisions: usize,
}

/// The patience of a confirmation: 1,000 polls, 100,000 decisions (`lock_order_deep`'s
/// other end of the cycle comes after about 12,000).
pub const HOLD_PATIENCE: Patience = Patience {
    yields: 1_000,
    decisions: 100_000,
};

/// Replays a prefix, then holds one thread back (see the module doc).
pub struct DirectedScheduler {
    prefix: Vec<Decision>,
    held: ThreadId,
    held_op: String,
    favoured: Vec<ThreadId>,
    patience: Patience,
    /// Decisions taken for other threads while `held` was held: all, and those where the
    /// thread that ran last was about to yield.
    waited: Patience,
    released: bool,
}

impl DirectedScheduler {
    /// Replays `prefix`, then holds `held` (about to perform `held_op`, its second
    /// acquisition) within `patience`, choosing `favoured` threads (the cycle's other
    /// threads) first.
    pub fn new(
        prefix: Vec<Decision>,
        held: ThreadId,
        held_op: String,
        favoured: Vec<ThreadId>,
        patience: Patience,
    ) -> Self {
        DirectedScheduler {
            prefix,
            held,
            held_op,
            favoured,
            patience,
            waited: Patience {
                yields: 0,
                decisions: 0,
            },
            released: false,
        }
    }

    /// Whether the held thread was let go before the execution ended.
    pub fn released(&self) -> bool {
        self.released
    }

    /// The replayed decision at `point.step`, checked like a replay.
    fn replay(&self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let d = &self.prefix[point.step];
        match point.enabled.iter().position(|&t| t == d.thread) {
            Some(i) if point.ops.get(i).is_some_and(|op| *op == d.op) => Ok(d.thread),
            _ => Err(Divergence {
                step: point.step,
                reason: format!(
                    "thread T{} should perform {} but is not enabled for it (enabled: {:?})",
                    d.thread, d.op, point.enabled
                ),
            }),
        }
    }

    /// At the first step after the prefix the held thread must be about to take its lock.
    fn check_hold(&self, point: &Point<'_>) -> Result<(), Divergence> {
        let pending = (point.enabled.iter().position(|&t| t == self.held))
            .and_then(|i| point.ops.get(i).copied());
        if pending == Some(self.held_op.as_str()) {
            return Ok(());
        }
        Err(Divergence {
            step: point.step,
            reason: format!(
                "thread T{} should be about to perform {} (enabled: {:?})",
                self.held, self.held_op, point.enabled
            ),
        })
    }

    /// The choice among `candidates` (the enabled threads but the held one, never empty):
    /// the current thread while it can go on without yielding, else a favoured thread,
    /// else the next one in id order; a timeout only when nothing else can run.
    fn pick(&self, point: &Point<'_>, candidates: &[ThreadId]) -> ThreadId {
        let runs: Vec<ThreadId> = (candidates.iter().copied())
            .filter(|t| !point.timeouts.contains(t))
            .collect();
        if runs.is_empty() {
            let earliest = point.timeouts.iter().find(|t| candidates.contains(t));
            return *earliest.unwrap_or(&candidates[0]);
        }
        if let Some(c) = point.current {
            if !point.current_yields && runs.contains(&c) {
                return c;
            }
        }
        let after = |t: &&ThreadId| point.current.is_none_or(|c| **t > c);
        let favoured: Vec<ThreadId> = (runs.iter().copied())
            .filter(|t| self.favoured.contains(t))
            .collect();
        let pool = if favoured.is_empty() {
            &runs
        } else {
            &favoured
        };
        *pool.iter().find(after).unwrap_or(&pool[0])
    }
}

impl Scheduler for DirectedScheduler {
    fn name(&self) -> &'static str {
        "lock-order confirmation"
    }

    fn begin_execution(&mut self, index: u64) -> Option<u64> {
        self.waited = Patience {
            yields: 0,
            decisions: 0,
        };
        self.released = false;
        (index == 0).then_some(0)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        if point.step < self.prefix.len() {
            return self.replay(point);
        }
        if point.step == self.prefix.len() {
            self.check_hold(point)?;
        }
        if !self.released {
            let others: Vec<ThreadId> = (point.enabled.iter().copied())
                .filter(|&t| t != self.held)
                .collect();
            let patient = self.waited.yields < self.patience.yields
                && self.waited.decisions < self.patience.decisions;
            if !others.is_empty() && patient {
                self.waited.decisions += 1;
                if point.current_yields && point.current != Some(self.held) {
                    self.waited.yields += 1;
                }
                return Ok(self.pick(point, &others));
            }
            self.released = true;
            if point.enabled.contains(&self.held) {
                return Ok(self.held);
            }
        }
        Ok(point.default_choice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::plain_point as point;

    fn decision(thread: ThreadId, op: &str) -> Decision {
        Decision {
            thread,
            op: op.into(),
        }
    }

    fn directed(yields: usize, decisions: usize) -> DirectedScheduler {
        let prefix = vec![decision(0, "create"), decision(1, "mutex_lock")];
        let patience = Patience { yields, decisions };
        let mut s = DirectedScheduler::new(prefix, 1, "mutex_lock".into(), vec![2], patience);
        assert_eq!(s.begin_execution(0), Some(0));
        s
    }

    #[test]
    fn replays_the_prefix_and_detects_divergence() {
        let mut s = directed(10, 100);
        let ops = ["create", "mutex_lock"];
        assert_eq!(s.choose(&point(0, &[0, 1], &ops, None)), Ok(0));
        assert_eq!(s.choose(&point(1, &[0, 1], &ops, Some(0))), Ok(1));
        let mut s = directed(10, 100);
        assert!(s.choose(&point(0, &[1], &["mutex_lock"], None)).is_err());
        let mut s = directed(10, 100);
        assert!(s.choose(&point(0, &[0], &["join"], None)).is_err());
        assert_eq!(s.begin_execution(1), None);
    }

    #[test]
    fn the_held_thread_must_be_about_to_take_its_lock() {
        let mut s = directed(10, 100);
        let ops = ["create", "mutex_lock"];
        s.choose(&point(0, &[0, 1], &ops, None)).unwrap();
        s.choose(&point(1, &[0, 1], &ops, Some(0))).unwrap();
        let err = s.choose(&point(
            2,
            &[0, 1, 2],
            &["join", "mutex_unlock", "mutex_lock"],
            None,
        ));
        assert!(err.is_err(), "T1 is about to unlock, not lock");
    }

    #[test]
    fn holds_the_thread_while_others_run_favouring_the_cycle() {
        let mut s = directed(10, 100);
        let ops = ["create", "mutex_lock"];
        s.choose(&point(0, &[0, 1], &ops, None)).unwrap();
        s.choose(&point(1, &[0, 1], &ops, Some(0))).unwrap();
        let three = ["join", "mutex_lock", "mutex_lock"];
        // T1 ran last, and could go on: T2 (the cycle's other thread) is chosen instead.
        assert_eq!(s.choose(&point(2, &[0, 1, 2], &three, Some(1))), Ok(2));
        // T2 goes on while it can.
        assert_eq!(s.choose(&point(3, &[0, 1, 2], &three, Some(2))), Ok(2));
        // T2 blocked: T0, not the held T1.
        assert_eq!(
            s.choose(&point(4, &[0, 1], &["join", "mutex_lock"], Some(2))),
            Ok(0)
        );
        assert!(!s.released());
        // Only T1 can run: it is let go.
        assert_eq!(s.choose(&point(5, &[1], &["mutex_lock"], Some(0))), Ok(1));
        assert!(s.released());
    }

    #[test]
    fn lets_the_thread_go_after_its_patience() {
        let mut s = directed(3, 100);
        let ops = ["create", "mutex_lock"];
        s.choose(&point(0, &[0, 1], &ops, None)).unwrap();
        s.choose(&point(1, &[0, 1], &ops, Some(0))).unwrap();
        let two = ["mutex_lock", "sched_yield"];
        let mut spinner = point(2, &[1, 2], &two, Some(2));
        spinner.current_yields = true;
        for step in 2..5 {
            spinner.step = step;
            assert_eq!(s.choose(&spinner), Ok(2), "held at step {step}");
        }
        spinner.step = 5;
        // Yielding T2 has had three decisions: T1 is let go.
        assert_eq!(s.choose(&spinner), Ok(1));
        assert!(s.released());
        // From then on, the usual fair choice.
        spinner.step = 6;
        assert_eq!(s.choose(&spinner), Ok(1), "T2 yields: the next thread");
        // Without yields, the bound on decisions.
        let mut s = directed(3, 5);
        s.choose(&point(0, &[0, 1], &ops, None)).unwrap();
        s.choose(&point(1, &[0, 1], &ops, Some(0))).unwrap();
        let two = ["mutex_lock", "mutex_lock"];
        for step in 2..7 {
            let worker = point(step, &[1, 2], &two, Some(2));
            assert_eq!(s.choose(&worker), Ok(2), "held at step {step}");
        }
        assert_eq!(s.choose(&point(7, &[1, 2], &two, Some(2))), Ok(1));
    }

    #[test]
    fn a_timeout_only_when_nothing_else_runs() {
        let mut s = directed(10, 100);
        let ops = ["create", "mutex_lock"];
        s.choose(&point(0, &[0, 1], &ops, None)).unwrap();
        s.choose(&point(1, &[0, 1], &ops, Some(0))).unwrap();
        let mut p = point(
            2,
            &[1, 2, 3],
            &["mutex_lock", "cond_timedwait", "futex_wait"],
            None,
        );
        p.timeouts = &[2];
        assert_eq!(s.choose(&p), Ok(3), "T3 runs, T2 would only time out");
        p.enabled = &[1, 2];
        p.ops = &["mutex_lock", "cond_timedwait"];
        p.step = 3;
        assert_eq!(s.choose(&p), Ok(2), "the held T1 waits even for a timeout");
    }
}
