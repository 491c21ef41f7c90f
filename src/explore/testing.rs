//! A synthetic program model for strategy tests: threads that each perform a fixed number of
//! steps, all always enabled, with no blocking. Running a strategy over it counts the
//! executions and collects the schedules it produced.

use std::collections::HashSet;

use super::{ExecutionSummary, Point, Scheduler};
use crate::model::ThreadId;

/// `steps[t]` scheduling points for thread t. Thread 0 starts current.
pub struct Synthetic {
    pub steps: Vec<usize>,
}

impl Synthetic {
    /// Runs one execution under `s`; returns the sequence of chosen threads.
    pub fn run_once(&self, s: &mut dyn Scheduler) -> Vec<ThreadId> {
        let mut left = self.steps.clone();
        let mut current = None;
        let mut trace = Vec::new();
        loop {
            let enabled: Vec<ThreadId> = (0..left.len()).filter(|&t| left[t] > 0).collect();
            if enabled.is_empty() {
                break;
            }
            let ops = vec!["atomic"; enabled.len()];
            let t = s
                .choose(&Point {
                    enabled: &enabled,
                    ops: &ops,
                    current,
                    current_yields: false,
                    step: trace.len(),
                })
                .expect("no divergence in synthetic runs");
            assert!(enabled.contains(&t), "strategy chose a disabled thread");
            left[t] -= 1;
            trace.push(t);
            current = Some(t);
        }
        s.end_execution(&ExecutionSummary {
            steps: trace.len(),
            threads: self.steps.len(),
            found_bug: false,
        });
        trace
    }

    /// Runs `s` until it is exhausted or `limit` executions; returns the distinct schedules
    /// and the number of executions.
    pub fn run_all(&self, s: &mut dyn Scheduler, limit: u64) -> (HashSet<Vec<ThreadId>>, u64) {
        let mut seen = HashSet::new();
        let mut n = 0;
        while n < limit {
            if s.begin_execution(n).is_none() {
                break;
            }
            seen.insert(self.run_once(s));
            n += 1;
        }
        (seen, n)
    }
}

/// Preemptions in a schedule (a switch away from a thread that still had steps left).
pub fn preemptions(schedule: &[ThreadId], steps: &[usize]) -> usize {
    let mut left = steps.to_vec();
    let mut count = 0;
    for w in 0..schedule.len() {
        let t = schedule[w];
        if w > 0 {
            let prev = schedule[w - 1];
            if prev != t && left[prev] > 0 {
                count += 1;
            }
        }
        left[t] -= 1;
    }
    count
}

/// n choose k.
pub fn binomial(n: u64, k: u64) -> u64 {
    (1..=k).fold(1, |acc, i| acc * (n - k + i) / i)
}
