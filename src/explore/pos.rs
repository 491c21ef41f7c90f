//! POS, partial-order sampling (Yuan, Yang, Gu, CAV'18, "Partial Order Aware Concurrency
//! Sampling"): every pending step (a thread's next operation) gets a random priority when it
//! is first offered, and the highest-priority enabled step runs. After a step runs, the
//! steps it *races* with (dependent: a common object, one of them writes) draw new
//! priorities; the others keep theirs. A step that waits through a long run of independent
//! steps of other threads thus keeps its chance to run late, which uniform random choice
//! almost never gives it (the probability of a given order of dependent steps no longer
//! shrinks with the number of independent steps between them), while a step racing with
//! the one just taken is re-drawn, so that both orders of every race stay likely.
//!
//! Dependence comes from the footprints the executor reports for the pending operations
//! ([`Point::footprints`], and [`Point::blocked`] for threads that wait); without them
//! every step is taken as dependent, and POS becomes a fresh uniform choice per step.
//! Timeouts are taken only at a few drawn steps, as by random and PCT (`timeout_steps`). A
//! thread that yields (sched_yield, a sleep) goes below every other thread until it runs
//! again, as in PCT, so that a spin wait cannot keep the thread it waits for from running.

use std::collections::{HashMap, HashSet};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::{timeout_steps, Divergence, ExecutionSummary, Point, Scheduler};
use crate::model::{Footprint, ThreadId};

/// The POS strategy.
pub struct PosScheduler {
    seed: u64,
    rng: Pcg64Mcg,
    /// The priority of each thread's pending step (drawn when first offered).
    priorities: HashMap<ThreadId, u64>,
    /// Threads that yielded and have not run since: below every other thread.
    yielded: HashSet<ThreadId>,
    /// Steps of the current execution where an offered timeout is taken.
    timeout_steps: Vec<usize>,
    /// The longest execution seen (at least 32).
    max_steps_seen: usize,
}

impl PosScheduler {
    /// A POS scheduler whose execution `i` uses seed `seed + i`.
    pub fn new(seed: u64) -> PosScheduler {
        PosScheduler {
            seed,
            rng: Pcg64Mcg::seed_from_u64(seed),
            priorities: HashMap::new(),
            yielded: HashSet::new(),
            timeout_steps: Vec::new(),
            max_steps_seen: 32,
        }
    }

    /// The priority of `t`'s pending step, drawn now if it has none.
    fn priority(&mut self, t: ThreadId) -> u64 {
        let rng = &mut self.rng;
        *self.priorities.entry(t).or_insert_with(|| rng.random())
    }
}

/// The footprint of `t`'s pending step at `point`, if the executor reported one.
fn pending_footprint<'a>(point: &'a Point<'_>, t: ThreadId) -> Option<&'a Footprint> {
    if let Some(i) = point.enabled.iter().position(|&u| u == t) {
        return point.footprints.get(i);
    }
    point.blocked.iter().find(|(u, _)| *u == t).map(|(_, f)| f)
}

impl Scheduler for PosScheduler {
    fn name(&self) -> &'static str {
        "pos"
    }

    fn begin_execution(&mut self, index: u64) -> Option<u64> {
        let seed = self.seed.wrapping_add(index);
        self.rng = Pcg64Mcg::seed_from_u64(seed);
        self.priorities.clear();
        self.yielded.clear();
        self.timeout_steps = timeout_steps::draw(seed, self.max_steps_seen);
        Some(seed)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let among = timeout_steps::candidates(point, &self.timeout_steps);
        if let (Some(c), true) = (point.current, point.current_yields) {
            self.yielded.insert(c);
        }
        // Threads that yielded compete only when no other thread can run.
        let eager: Vec<ThreadId> = (among.iter().copied())
            .filter(|t| !self.yielded.contains(t))
            .collect();
        let among = if eager.is_empty() { among } else { eager };
        let mut chosen = among[0];
        let mut best = self.priority(chosen);
        for &t in &among[1..] {
            let p = self.priority(t);
            if p > best {
                (chosen, best) = (t, p);
            }
        }
        self.yielded.remove(&chosen);
        // The chosen step runs: its thread's next step is a new one, and the pending steps
        // it races with draw new priorities. Unknown footprints race with everything.
        self.priorities.remove(&chosen);
        let ran = pending_footprint(point, chosen);
        let others = (point.enabled.iter().copied())
            .chain(point.blocked.iter().map(|(u, _)| *u))
            .filter(|&u| u != chosen)
            .collect::<Vec<_>>();
        for u in others {
            let races = match (ran, pending_footprint(point, u)) {
                (Some(a), Some(b)) => a.conflicts(b),
                _ => true,
            };
            if races {
                self.priorities.remove(&u);
            }
        }
        Ok(chosen)
    }

    fn end_execution(&mut self, summary: &ExecutionSummary) {
        self.max_steps_seen = self.max_steps_seen.max(summary.steps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::{Failure, Program, SpinWait, SynOp, Synthetic};
    use crate::explore::RandomScheduler;

    /// Thread 0 does `work` independent steps, then writes word 0; thread 1 asserts first
    /// thing that word 0 holds what thread 0 writes: the failure needs thread 1 held back
    /// through all of thread 0's work.
    fn late_write(work: usize) -> Program {
        let mut a = vec![SynOp::Local; work];
        a.push(SynOp::Write(0));
        let written = (work + 1) as u64; // thread 0's value for its operation `work`
        Program {
            threads: vec![a, vec![SynOp::Assert(0, written), SynOp::Local]],
        }
    }

    fn failures(prog: &Program, s: &mut dyn Scheduler, runs: u64) -> usize {
        (0..runs)
            .filter(|&i| {
                s.begin_execution(i);
                matches!(prog.run(s).failure, Some(Failure::Assertion(1, 0)))
            })
            .count()
    }

    #[test]
    fn holds_a_step_back_through_independent_steps_where_random_does_not() {
        let prog = late_write(12);
        let pos = failures(&prog, &mut PosScheduler::new(1), 2000);
        let random = failures(&prog, &mut RandomScheduler::new(1), 2000);
        // POS: the assertion waits while each of thread 0's fresh priorities beats its own,
        // about 1 in 14; random: 2^-13.
        assert!(pos >= 60, "POS found the late order {pos} times in 2000");
        assert!(random <= 3, "random found it {random} times");
    }

    #[test]
    fn a_racing_step_draws_a_new_priority_and_an_independent_one_keeps_it() {
        let mut s = PosScheduler::new(5);
        s.begin_execution(0);
        let word = |n: u64, write: bool| {
            let mut f = Footprint::default();
            f.touch_word(n * 8, write);
            f
        };
        let enabled = [0, 1, 2];
        let footprints = [word(0, true), word(0, false), word(1, false)];
        let point = Point {
            enabled: &enabled,
            ops: &["op"; 3],
            footprints: &footprints,
            blocked: &[],
            timeouts: &[],
            current: None,
            current_yields: false,
            step: 0,
        };
        // Force thread 0 to win, then look at what the others keep.
        s.priorities.insert(0, u64::MAX);
        let p2 = s.priority(2);
        s.priority(1);
        assert_eq!(s.choose(&point).unwrap(), 0);
        assert!(
            !s.priorities.contains_key(&0),
            "thread 0's next step is new"
        );
        assert!(
            !s.priorities.contains_key(&1),
            "it reads what 0 wrote: re-drawn"
        );
        assert_eq!(s.priorities.get(&2), Some(&p2), "independent: kept");
    }

    #[test]
    fn a_spin_wait_lets_the_thread_it_waits_for_run() {
        // Once the spinner yields, the worker's 20 steps come next: 30 steps suffice.
        let spin = SpinWait {
            work: 20,
            max_steps: 30,
        };
        let (runs, cut) = spin.run_all(&mut PosScheduler::new(4), false, 200);
        assert_eq!(
            (runs, cut),
            (200, 0),
            "no execution spins to the step limit"
        );
    }

    #[test]
    fn reproducible_by_seed_and_index() {
        let prog = Synthetic {
            steps: vec![5, 5, 5],
        };
        let mut a = PosScheduler::new(3);
        let mut b = PosScheduler::new(5);
        assert_eq!(a.begin_execution(2), Some(5));
        assert_eq!(b.begin_execution(0), Some(5));
        assert_eq!(prog.run_once(&mut a), prog.run_once(&mut b));
    }

    #[test]
    fn without_footprints_every_schedule_stays_possible() {
        let prog = Synthetic { steps: vec![3, 3] };
        let (seen, _) = prog.run_all(&mut PosScheduler::new(2), 400);
        assert_eq!(seen.len(), 20, "all C(6,3) schedules of two threads");
    }
}
