//! PCT, probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte,
//! ASPLOS'10): threads get random distinct priorities above d; the highest-priority enabled
//! thread always runs; at d−1 random steps (change points) the running thread's priority
//! drops below all initial ones. A bug of depth d is found with probability at least
//! 1/(n·k^(d−1)) per execution for n threads and k steps. n and k are not known in advance:
//! k is the longest execution seen so far (at least 32). A thread whose step would be a
//! timeout competes with its priority only at a few drawn steps (`timeout_steps`).
//!
//! The bug depth is rarely known in advance: [`PctScheduler::cycling`] runs execution i with
//! depth 1 + i mod D, so that one search tries every depth up to D in turn.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::{timeout_steps, Divergence, ExecutionSummary, Point, Scheduler};
use crate::model::ThreadId;

/// The bug depth `--pct-depth` asks for: one depth, or every depth from 1 up to a most,
/// execution by execution (`1..D`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PctDepth {
    /// Every execution with this depth (at least 1).
    Fixed(u32),
    /// Execution i with depth 1 + i mod this (at least 1).
    UpTo(u32),
}

impl PctDepth {
    /// The scheduler for this depth.
    pub fn scheduler(self, seed: u64) -> PctScheduler {
        match self {
            PctDepth::Fixed(d) => PctScheduler::new(d, seed),
            PctDepth::UpTo(d) => PctScheduler::cycling(d, seed),
        }
    }

    /// How a portfolio or report names it: `pct(depth 3)`, `pct(depth 1..5)`.
    pub fn label(self) -> String {
        match self {
            PctDepth::Fixed(d) => format!("pct(depth {d})"),
            PctDepth::UpTo(d) => format!("pct(depth 1..{d})"),
        }
    }
}

impl std::str::FromStr for PctDepth {
    type Err = String;

    /// `D` (a depth of 1 or more) or `1..D` (every depth from 1 to D in turn).
    fn from_str(text: &str) -> Result<PctDepth, String> {
        let number = |t: &str| {
            match t.trim().parse::<u32>() {
            Ok(d) if d >= 1 => Ok(d),
            _ => Err(format!(
                "`{text}` is not a bug depth: a whole number of 1 or more, or 1..D to cycle through the depths 1 to D"
            )),
        }
        };
        match text.split_once("..") {
            Some((low, high)) if low.trim() == "1" => Ok(PctDepth::UpTo(number(high)?)),
            Some(_) => Err(format!("`{text}`: a range of depths starts at 1 (1..D)")),
            None => Ok(PctDepth::Fixed(number(text)?)),
        }
    }
}

/// The PCT strategy with bug depth `depth`.
pub struct PctScheduler {
    depth: u32,
    /// When set, execution i runs with depth 1 + i mod this (see [`PctScheduler::cycling`]).
    cycle_up_to: Option<u32>,
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
            cycle_up_to: None,
            seed,
            rng: Pcg64Mcg::seed_from_u64(seed),
            priorities: HashMap::new(),
            change_points: Vec::new(),
            timeout_steps: Vec::new(),
            max_steps_seen: 32,
        }
    }

    /// PCT whose execution i has depth 1 + i mod `max_depth`: every depth up to
    /// `max_depth` in turn, for programs whose bug depth is unknown.
    pub fn cycling(max_depth: u32, seed: u64) -> PctScheduler {
        PctScheduler {
            cycle_up_to: Some(max_depth.max(1)),
            ..PctScheduler::new(1, seed)
        }
    }

    /// The bug depth (of the execution begun last, when cycling).
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
        if let Some(max) = self.cycle_up_to {
            self.depth = 1 + (index % u64::from(max)) as u32;
        }
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
    fn depth_text_is_a_number_or_a_range_from_one() {
        assert_eq!("3".parse(), Ok(PctDepth::Fixed(3)));
        assert_eq!("1..5".parse(), Ok(PctDepth::UpTo(5)));
        assert!("0".parse::<PctDepth>().is_err());
        assert!("2..5".parse::<PctDepth>().is_err());
        assert!("1..".parse::<PctDepth>().is_err());
        assert!("deep".parse::<PctDepth>().is_err());
    }

    #[test]
    fn cycling_tries_every_depth_in_turn() {
        let prog = Synthetic { steps: vec![6, 6] };
        let mut s = PctScheduler::cycling(3, 11);
        let mut most = [0; 3];
        for i in 0..300u64 {
            s.begin_execution(i);
            assert_eq!(s.depth() as u64, 1 + i % 3);
            let p = preemptions(&prog.run_once(&mut s), &prog.steps);
            let d = (i % 3) as usize;
            assert!(p < d + 1, "depth {} preempted {p} times", d + 1);
            most[d] = most[d].max(p);
        }
        assert_eq!(most, [0, 1, 2], "each depth uses its change points");
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
