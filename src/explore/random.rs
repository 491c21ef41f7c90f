//! Random scheduling: at every point a fresh uniform choice among the enabled threads, from a
//! generator seeded per execution with `seed + index`, so that execution i of a search with
//! seed S replays as the first execution of a search with seed S+i.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::{Point, Scheduler};
use crate::model::ThreadId;

/// The random strategy.
pub struct RandomScheduler {
    seed: u64,
    rng: Pcg64Mcg,
}

impl RandomScheduler {
    /// A random scheduler whose execution `i` uses seed `seed + i`.
    pub fn new(seed: u64) -> Self {
        RandomScheduler {
            seed,
            rng: Pcg64Mcg::seed_from_u64(seed),
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
        Some(seed)
    }

    fn choose(&mut self, point: &Point<'_>) -> ThreadId {
        point.enabled[self.rng.random_range(0..point.enabled.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick_sequence(s: &mut RandomScheduler, n: usize) -> Vec<ThreadId> {
        let enabled = [0, 1, 2];
        (0..n)
            .map(|step| {
                s.choose(&Point {
                    enabled: &enabled,
                    current: None,
                    step,
                })
            })
            .collect()
    }

    #[test]
    fn same_seed_same_choices_and_index_shifts_seed() {
        let mut a = RandomScheduler::new(7);
        let mut b = RandomScheduler::new(10);
        assert_eq!(a.begin_execution(3), Some(10));
        assert_eq!(b.begin_execution(0), Some(10));
        assert_eq!(pick_sequence(&mut a, 50), pick_sequence(&mut b, 50));
    }

    #[test]
    fn picks_only_enabled_threads_and_all_of_them() {
        let mut s = RandomScheduler::new(1);
        s.begin_execution(0);
        let seen = pick_sequence(&mut s, 200);
        for t in 0..3 {
            assert!(seen.contains(&t));
        }
        assert!(seen.iter().all(|t| *t < 3));
    }
}
