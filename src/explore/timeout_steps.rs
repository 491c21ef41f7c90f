//! When the randomised strategies take a timeout. A timeout is a rare event next to a
//! context switch (a 5 ms timer against microseconds of work), and an execution may take
//! only a few early ones (`--max-timeouts`): taken at the first points where a thread waits
//! with a deadline, they would all be spent before the program reaches the part that
//! matters. So random and PCT take timeouts only at a few steps drawn uniformly from the
//! length of the longest execution seen, like PCT's change points; everywhere else they
//! choose among the threads that can run, and a timeout is taken only when nothing else
//! can be.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::Point;
use crate::model::ThreadId;

/// Steps per execution at which a timeout is taken when one is offered.
pub(super) const TIMEOUT_STEPS: usize = 2;

/// `TIMEOUT_STEPS` steps drawn uniformly in [1, k] for the execution seeded with `seed`,
/// from a generator of their own, so that the strategy's other random choices (and what a
/// seed means for a program without timed waits) stay as they were.
pub(super) fn draw(seed: u64, k: usize) -> Vec<usize> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x7469_6d65_6f75_7473);
    (0..TIMEOUT_STEPS)
        .map(|_| rng.random_range(1..=k.max(1)))
        .collect()
}

/// The threads the strategy chooses among at `point`: the offered timeouts at one of the
/// drawn `steps` (when there are any), else the threads that can run without timing out
/// (all of `enabled` when none can).
pub(super) fn candidates(point: &Point<'_>, steps: &[usize]) -> Vec<ThreadId> {
    if steps.contains(&point.step) && !point.timeouts.is_empty() {
        return point.timeouts.to_vec();
    }
    let runnable: Vec<ThreadId> = point
        .enabled
        .iter()
        .copied()
        .filter(|t| !point.timeouts.contains(t))
        .collect();
    if runnable.is_empty() {
        point.enabled.to_vec()
    } else {
        runnable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point<'a>(enabled: &'a [ThreadId], timeouts: &'a [ThreadId], step: usize) -> Point<'a> {
        Point {
            enabled,
            ops: &[],
            footprints: &[],
            blocked: &[],
            timeouts,
            current: None,
            current_yields: false,
            step,
        }
    }

    #[test]
    fn timeouts_only_at_drawn_steps_or_when_nothing_else_runs() {
        assert_eq!(candidates(&point(&[0, 1, 2], &[2], 5), &[7]), vec![0, 1]);
        assert_eq!(candidates(&point(&[0, 1, 2], &[2], 7), &[7]), vec![2]);
        assert_eq!(candidates(&point(&[0, 1], &[], 7), &[7]), vec![0, 1]);
        assert_eq!(candidates(&point(&[3], &[3], 1), &[7]), vec![3]);
    }
}
