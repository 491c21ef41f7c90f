//! PCT, probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte,
//! ASPLOS'10): threads get random distinct priorities above d; the highest-priority enabled
//! thread always runs; at d−1 random steps (change points) the running thread's priority
//! drops below all initial ones. A bug of depth d is found with probability at least
//! 1/(n·k^(d−1)) per execution for n threads and k steps. n and k are not known in advance:
//! k is the longest execution seen so far (at least 32). A thread whose step would be a
//! timeout competes with its priority only at a few drawn steps (`timeout_steps`).

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::{timeout_steps, Divergence, ExecutionSummary, Point, Scheduler};
use crate::model::ThreadId;

/// The PCT strategy with bug depth `depth`.
pub struct PctScheduler {
    depth: u32,
    seed: u64,
    rng: Pcg64Mcg,
    priorities: HashMap<ThreadId, i64>,
    change_points: Vec<usize>,
    /// Steps where an offered timeout is taken (`timeout_steps`).
    timeout_steps: Vec<usize>,
    max_steps_seen: usize,
}

impl PctScheduler {
    /// PCT with bug depth `depth` (≥ 1); execution i is seeded with `seed + i`.
    pub fn new(depth: u32, seed: u64) -> PctScheduler {
        PctScheduler {
            depth: depth.max(1),
            seed,
            rng: Pcg64Mcg::seed_from_u64(seed),
            priorities: HashMap::new(),
            change_points: Vec::new(),
            timeout_steps: Vec::new(),
            max_steps_seen: 32,
        }
    }

    /// The bug depth.
    pub fn depth(&self) -> u32 {
        self.depth
    }
}

impl Scheduler for PctScheduler {
    fn name(&self) -> &'static str {
        "pct"
    }

    fn begin_execution(&mut self, index: u64) -> Option<u64> {
        let seed = self.seed.wrapping_add(index);
        self.rng = Pcg64Mcg::seed_from_u64(seed);
        self.priorities.clear();
        let k = self.max_steps_seen;
        self.change_points = (1..self.depth)
            .map(|_| self.rng.random_range(1..=k))
            .collect();
        self.timeout_steps = timeout_steps::draw(seed, k);
        Some(seed)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let d = self.depth as i64;
        for &t in point.enabled {
            if !self.priorities.contains_key(&t) {
                // Initial priorities are all above d; ties are broken by the random bits.
                let p = d + 1 + self.rng.random::<u32>() as i64;
                self.priorities.insert(t, p);
            }
        }
        if let (Some(c), true) = (point.current, point.current_yields) {
            // A yield lets the others run: the yielding thread drops below every other
            // enabled thread, even below the change-point priorities, so that spinning with
            // sched_yield cannot starve the thread it waits for.
            let lowest_other = point
                .enabled
                .iter()
                .filter(|&&u| u != c)
                .map(|u| self.priorities[u])
                .min();
            if let Some(low) = lowest_other {
                if self.priorities.get(&c).is_some_and(|&p| p >= low) {
                    self.priorities.insert(c, low - 1);
                }
            }
        }
        // Timeouts only at the drawn steps, or when nothing else can run.
        let among = timeout_steps::candidates(point, &self.timeout_steps);
        let best = |prio: &HashMap<ThreadId, i64>| {
            *among
                .iter()
                .max_by_key(|t| (prio[t], std::cmp::Reverse(**t)))
                .expect("enabled is never empty")
        };
        let mut chosen = best(&self.priorities);
        for (i, &cp) in self.change_points.iter().enumerate() {
            if cp == point.step {
                // Change point i: the thread about to run drops to priority d-1-i (< d).
                self.priorities.insert(chosen, d - 1 - i as i64);
                chosen = best(&self.priorities);
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
    use crate::explore::testing::{plain_point, preemptions, Synthetic};

    #[test]
    fn depth_one_never_preempts() {
        let prog = Synthetic {
            steps: vec![4, 4, 4],
        };
        let mut s = PctScheduler::new(1, 3);
        for i in 0..50 {
            s.begin_execution(i);
            let sch = prog.run_once(&mut s);
            assert_eq!(preemptions(&sch, &prog.steps), 0, "{sch:?}");
        }
    }

    #[test]
    fn depth_d_preempts_at_most_d_minus_one_times() {
        let prog = Synthetic { steps: vec![6, 6] };
        let mut s = PctScheduler::new(3, 11);
        let mut max = 0;
        for i in 0..200 {
            s.begin_execution(i);
            let sch = prog.run_once(&mut s);
            let p = preemptions(&sch, &prog.steps);
            assert!(p <= 2, "{sch:?}");
            max = max.max(p);
        }
        assert_eq!(max, 2, "some execution should use both change points");
    }

    #[test]
    fn a_yielding_thread_lets_the_others_run() {
        let mut s = PctScheduler::new(1, 9);
        s.begin_execution(0);
        let enabled = [0, 1];
        let ops = ["yield", "atomic"];
        let first = s.choose(&plain_point(0, &enabled, &ops, None)).unwrap();
        let other = 1 - first;
        let next = s
            .choose(&Point {
                current_yields: true,
                ..plain_point(1, &enabled, &ops, Some(first))
            })
            .unwrap();
        assert_eq!(next, other, "after a yield the other thread runs");
    }

    #[test]
    fn reproducible_by_seed() {
        let prog = Synthetic {
            steps: vec![5, 5, 5],
        };
        let mut a = PctScheduler::new(3, 100);
        let mut b = PctScheduler::new(3, 100);
        a.begin_execution(4);
        b.begin_execution(4);
        assert_eq!(prog.run_once(&mut a), prog.run_once(&mut b));
    }
}
