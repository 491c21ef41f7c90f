//! Synthetic program models for strategy tests: [`Synthetic`], threads that each perform a
//! fixed number of steps, all always enabled, with no blocking; [`SpinWait`], a thread that
//! yields until another has done its work. Running a strategy over them counts the
//! executions and collects the schedules it produced.

use std::collections::HashSet;

use super::{ExecutionSummary, FairFilter, Point, Scheduler};
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

/// A synthetic spin wait: thread 0 yields until thread 1 has taken `work` steps, then takes
/// one last step (it sees the flag and returns); thread 1 takes `work` steps. The spinner
/// yields in the same state every time (thread 1's steps are plain atomics, invisible to the
/// synchronisation fingerprint). Executions are cut after `max_steps` decisions.
pub struct SpinWait {
    pub work: usize,
    pub max_steps: usize,
}

impl SpinWait {
    /// Runs one execution under `s`, through a [`FairFilter`] when `fair`; returns the
    /// schedule and whether the execution was cut at `max_steps`.
    pub fn run_once(&self, s: &mut dyn Scheduler, fair: bool) -> (Vec<ThreadId>, bool) {
        let mut filter = FairFilter::new();
        let (mut done, mut spinner_done) = (0, false);
        let mut current = None;
        let mut trace = Vec::new();
        let cut = loop {
            let mut enabled = Vec::new();
            if !spinner_done {
                enabled.push(0);
            }
            if done < self.work {
                enabled.push(1);
            }
            if enabled.is_empty() {
                break false;
            }
            if trace.len() >= self.max_steps {
                break true;
            }
            let spinning = done < self.work;
            let schedulable = if fair {
                filter.schedulable(&enabled)
            } else {
                enabled.clone()
            };
            let ops: Vec<&'static str> = schedulable
                .iter()
                .map(|&t| {
                    if t == 0 && spinning {
                        "yield"
                    } else {
                        "atomic"
                    }
                })
                .collect();
            let t = s
                .choose(&Point {
                    enabled: &schedulable,
                    ops: &ops,
                    current,
                    current_yields: current == Some(0) && spinning && !spinner_done,
                    step: trace.len(),
                })
                .expect("no divergence in synthetic runs");
            assert!(schedulable.contains(&t), "strategy chose a filtered thread");
            filter.chose(t, &enabled, (t == 0 && spinning).then_some(0));
            if t == 0 {
                spinner_done = !spinning;
            } else {
                done += 1;
            }
            trace.push(t);
            current = Some(t);
        };
        s.end_execution(&ExecutionSummary {
            steps: trace.len(),
            threads: 2,
            found_bug: false,
        });
        (trace, cut)
    }

    /// Runs `s` until it is exhausted or `limit` executions; returns the number of
    /// executions and how many of them were cut at `max_steps`.
    pub fn run_all(&self, s: &mut dyn Scheduler, fair: bool, limit: u64) -> (u64, u64) {
        let (mut n, mut cut) = (0, 0);
        while n < limit && s.begin_execution(n).is_some() {
            cut += self.run_once(s, fair).1 as u64;
            n += 1;
        }
        (n, cut)
    }
}
