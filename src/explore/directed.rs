//! The directed schedule that confirms a lock-order cycle (DeadlockFuzzer's second phase,
//! Joshi, Park, Sen & Naik PLDI'09): replay the execution that showed the cycle up to the
//! decision at which one of its threads was about to take its second lock, then hold that
//! thread back while any other thread can run, so that the others walk into the locks it
//! holds. The cycle's threads that took their second lock later in that execution are held
//! too, each as it reaches that acquisition ([`Hold`]): a cycle of three or four threads
//! deadlocks only when all but the last of them wait between their two locks at once. If
//! the cycle is real, the execution deadlocks; if something orders the acquisitions (a flag
//! handed over under a mutex), the others cannot get there and the held threads are let
//! go again.

use super::holds::{Hold, Holds};
use super::{Decision, Divergence, Point, Scheduler};
use crate::model::ThreadId;

/// How long the held threads are held while other threads can still run (they may be
/// waiting for them by polling): they are let go after either bound, counted from the
/// last time a thread was newly held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patience {
    /// Decisions of the others taken where the thread that ran last was about to yield
    /// (sched_yield, a sleep, a timed futex wait): a thread polling for a held one.
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

/// Replays a prefix, then holds threads back (see the module doc).
pub struct DirectedScheduler {
    prefix: Vec<Decision>,
    /// The first hold is reached at the end of the prefix; the others when their threads
    /// get there.
    holds: Holds,
    favoured: Vec<ThreadId>,
    patience: Patience,
    /// Decisions taken for other threads since a thread was last newly held: all, and
    /// those where the thread that ran last was about to yield.
    waited: Patience,
    released: bool,
}

impl DirectedScheduler {
    /// Replays `prefix`, then holds the thread of `holds[0]` (which must be at it there)
    /// and each other hold's thread once it reaches it, within `patience`, choosing
    /// `favoured` threads (the cycle's other threads) first.
    pub fn new(
        prefix: Vec<Decision>,
        holds: Vec<Hold>,
        favoured: Vec<ThreadId>,
        patience: Patience,
    ) -> Self {
        DirectedScheduler {
            prefix,
            holds: Holds::new(holds),
            favoured,
            patience,
            waited: Patience {
                yields: 0,
                decisions: 0,
            },
            released: false,
        }
    }

    /// Whether the held threads were let go before the execution ended.
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

    /// At the first step after the prefix the first hold's thread must be about to take
    /// its lock.
    fn check_hold(&self, point: &Point<'_>) -> Result<(), Divergence> {
        let Some(first) = self.holds.first() else {
            return Ok(());
        };
        if self.holds.at_hold(0, point) {
            return Ok(());
        }
        Err(Divergence {
            step: point.step,
            reason: format!(
                "thread T{} should be about to perform {} (enabled: {:?})",
                first.thread, first.op, point.enabled
            ),
        })
    }

    /// The choice after the prefix: a thread that is not held while one can run and the
    /// patience lasts; then every held thread is let go, the first held first.
    fn hold(&mut self, point: &Point<'_>) -> ThreadId {
        if self.released {
            return point.default_choice();
        }
        if self.holds.reach(point) {
            self.waited = Patience {
                yields: 0,
                decisions: 0,
            };
        }
        let others: Vec<ThreadId> = (point.enabled.iter().copied())
            .filter(|&t| !self.holds.is_held(t))
            .collect();
        let patient = self.waited.yields < self.patience.yields
            && self.waited.decisions < self.patience.decisions;
        if !others.is_empty() && patient {
            self.waited.decisions += 1;
            if point.current_yields && !point.current.is_some_and(|c| self.holds.is_held(c)) {
                self.waited.yields += 1;
            }
            return self.pick(point, &others);
        }
        self.released = true;
        let first = (self.holds.held()).find(|t| point.enabled.contains(t));
        first.unwrap_or_else(|| point.default_choice())
    }

    /// The choice among `candidates` (the enabled threads but the held ones, never empty):
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
        (index == 0).then_some(0)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let t = if point.step < self.prefix.len() {
            self.replay(point)?
        } else {
            if point.step == self.prefix.len() {
                self.check_hold(point)?;
            }
            self.hold(point)
        };
        self.holds.chose(point, t);
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::plain_point as point;
    use crate::model::{Footprint, ObjectKind, Role};

    fn decision(thread: ThreadId, op: &'static str) -> Decision {
        Decision {
            thread,
            op: op.into(),
        }
    }

    /// Hold `thread` before its `nth` `mutex_lock` (of any lock).
    fn hold(thread: ThreadId, nth: usize) -> Hold {
        Hold {
            thread,
            op: "mutex_lock".into(),
            nth,
            lock: None,
        }
    }

    fn directed(yields: usize, decisions: usize) -> DirectedScheduler {
        let prefix = vec![decision(0, "create"), decision(1, "mutex_lock")];
        let patience = Patience { yields, decisions };
        // T1 took its first lock in the prefix: it is held before its second.
        let mut s = DirectedScheduler::new(prefix, vec![hold(1, 1)], vec![2], patience);
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
    /// A footprint taking mutex `m` (none for 0).
    fn takes(m: u64) -> Footprint {
        let mut f = Footprint::default();
        if m != 0 {
            f.touch_as(ObjectKind::Mutex, m, true, Role::Acquire);
        }
        f
    }

    /// A point at `step` where `enabled` are about to perform `ops` on the mutexes `locks`
    /// (0: none), `current` having run last.
    fn at<'a>(
        step: usize,
        (enabled, ops): (&'a [ThreadId], &'a [&'static str]),
        fps: &'a [Footprint],
        current: ThreadId,
    ) -> Point<'a> {
        Point {
            footprints: fps,
            ..point(step, enabled, ops, Some(current))
        }
    }

    /// A ring of three: T1 takes a then b, T2 b then c, T3 c then a (a = 0xa...). The
    /// prefix ends with T1 about to take b; T2 and T3 are held at their second locks.
    fn ring(yields: usize) -> DirectedScheduler {
        let prefix = vec![decision(0, "create"), decision(1, "mutex_lock")];
        let second = |thread, lock| Hold {
            thread,
            op: "mutex_lock".into(),
            nth: 0,
            lock: Some(lock),
        };
        let holds = vec![second(1, 0xb), second(2, 0xc), second(3, 0xa)];
        let patience = Patience {
            yields,
            decisions: 100,
        };
        let mut s = DirectedScheduler::new(prefix, holds, vec![2, 3], patience);
        s.begin_execution(0);
        let ops = ["create", "mutex_lock"];
        let fps = [takes(0), takes(0xa)];
        assert_eq!(s.choose(&at(0, (&[0, 1], &ops), &fps, 0)), Ok(0));
        assert_eq!(s.choose(&at(1, (&[0, 1], &ops), &fps, 0)), Ok(1));
        s
    }

    #[test]
    fn holds_each_later_thread_when_it_reaches_its_second_lock() {
        let mut s = ring(10);
        let four = ["join", "mutex_lock", "mutex_lock", "mutex_lock"];
        // T1 is held before b; T2 (the next of the cycle) takes b.
        let fps = [takes(0), takes(0xb), takes(0xb), takes(0xc)];
        assert_eq!(s.choose(&at(2, (&[0, 1, 2, 3], &four), &fps, 1)), Ok(2));
        // T1 now waits for b. T2 is about to take c: held too, T3 runs and takes c.
        let three = ["join", "mutex_lock", "mutex_lock"];
        let fps = [takes(0), takes(0xc), takes(0xc)];
        assert_eq!(s.choose(&at(3, (&[0, 2, 3], &three), &fps, 2)), Ok(3));
        // T3 is held before a, which T1 holds anyway; T0 runs.
        let fps = [takes(0), takes(0xc), takes(0xa)];
        assert_eq!(s.choose(&at(4, (&[0, 2, 3], &three), &fps, 3)), Ok(0));
        assert!(!s.released());
        // Only held threads can run: all are let go, the first held first.
        let fps = [takes(0xc), takes(0xa)];
        let two = ["mutex_lock", "mutex_lock"];
        assert_eq!(s.choose(&at(5, (&[2, 3], &two), &fps, 0)), Ok(2));
        assert!(s.released());
    }

    #[test]
    fn a_thread_past_its_hold_is_not_held() {
        // T2 took c in the prefix, before T1 took a.
        let prefix = ["create", "mutex_lock", "mutex_lock"];
        let threads = [0, 2, 1];
        let decisions = (threads.iter().zip(prefix)).map(|(&t, op)| decision(t, op));
        let second = |thread, lock| Hold {
            thread,
            op: "mutex_lock".into(),
            nth: 0,
            lock: Some(lock),
        };
        let holds = vec![second(1, 0xb), second(2, 0xc)];
        let mut s = DirectedScheduler::new(decisions.collect(), holds, vec![2], HOLD_PATIENCE);
        s.begin_execution(0);
        let fps = [takes(0), takes(0xa), takes(0xc)];
        for (step, &t) in threads.iter().enumerate() {
            let ops = ["create", "mutex_lock", "mutex_lock"];
            assert_eq!(s.choose(&at(step, (&[0, 1, 2], &ops), &fps, 0)), Ok(t));
        }
        // T1 is held; T2, about to take c a second time, is past its hold: it runs.
        let two = ["mutex_lock", "mutex_lock"];
        let fps = [takes(0xb), takes(0xc)];
        assert_eq!(s.choose(&at(3, (&[1, 2], &two), &fps, 1)), Ok(2));
        assert_eq!(s.choose(&at(4, (&[1, 2], &two), &fps, 2)), Ok(2));
        assert!(!s.released());
    }

    #[test]
    fn patience_restarts_when_a_thread_is_newly_held() {
        let mut s = ring(3);
        // T3 polls (yields) while T1 is held.
        let polls = ["mutex_lock", "sched_yield"];
        let fps = [takes(0xb), takes(0)];
        for step in 2..4 {
            let mut p = at(step, (&[1, 3], &polls), &fps, 3);
            p.current_yields = true;
            assert_eq!(s.choose(&p), Ok(3), "step {step}");
        }
        // T2 reaches its hold: the count of polls starts again.
        let three = ["mutex_lock", "mutex_lock", "sched_yield"];
        let fps = [takes(0xb), takes(0xc), takes(0)];
        for step in 4..7 {
            let mut p = at(step, (&[1, 2, 3], &three), &fps, 3);
            p.current_yields = true;
            assert_eq!(s.choose(&p), Ok(3), "step {step}");
        }
        assert!(!s.released());
        // Three polls since T2 was held: both are let go, T1 first.
        let mut p = at(7, (&[1, 2, 3], &three), &fps, 3);
        p.current_yields = true;
        assert_eq!(s.choose(&p), Ok(1));
        assert!(s.released());
    }
}
