//! Random scheduling: at every point a fresh uniform choice among the enabled threads, from a
//! generator seeded per execution with `seed + index`, so that execution i of a search with
//! seed S replays as the first execution of a search with seed S+i. Timeouts are taken only
//! at a few drawn steps (`timeout_steps`).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::{timeout_steps, Divergence, ExecutionSummary, Point, Scheduler};
use crate::model::ThreadId;

/// The random strategy.
pub struct RandomScheduler {
    seed: u64,
    rng: Pcg64Mcg,
    /// Steps of the current execution where an offered timeout is taken
    /// (`timeout_steps`).
    timeout_steps: Vec<usize>,
    /// The longest execution seen (at least 32).
    max_steps_seen: usize,
}

impl RandomScheduler {
    /// A random scheduler whose execution `i` uses seed `seed + i`.
    pub fn new(seed: u64) -> Self {
        RandomScheduler {
            seed,
            rng: Pcg64Mcg::seed_from_u64(seed),
            timeout_steps: Vec::new(),
            max_steps_seen: 32,
        }
    }
}

impl Scheduler for RandomScheduler {
    fn name(&self) -> &'static str {
        "random"
    }

    fn begin_execution(&mut self, index: u64) -> Option<u64> {
        let seed = self.seed.wrapping_add(index);
        self.rng = Pcg64Mcg::seed_from_u64(seed);
        self.timeout_steps = timeout_steps::draw(seed, self.max_steps_seen);
        Some(seed)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let among = timeout_steps::candidates(point, &self.timeout_steps);
        Ok(among[self.rng.random_range(0..among.len())])
    }

    fn end_execution(&mut self, summary: &ExecutionSummary) {
        self.max_steps_seen = self.max_steps_seen.max(summary.steps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::Synthetic;

    #[test]
    fn same_seed_same_choices_and_index_shifts_seed() {
        let prog = Synthetic {
            steps: vec![5, 5, 5],
        };
        let mut a = RandomScheduler::new(7);
        let mut b = RandomScheduler::new(10);
        assert_eq!(a.begin_execution(3), Some(10));
        assert_eq!(b.begin_execution(0), Some(10));
        assert_eq!(prog.run_once(&mut a), prog.run_once(&mut b));
    }

    #[test]
    fn explores_many_different_schedules() {
        let prog = Synthetic { steps: vec![3, 3] };
        let mut s = RandomScheduler::new(1);
        let (seen, _) = prog.run_all(&mut s, 200);
        assert!(seen.len() >= 15, "only {} of 20 schedules", seen.len());
    }
}
