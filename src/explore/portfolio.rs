//! The portfolio strategy: several strategies interleaved execution by execution, as Coyote
//! does, so that one search gets the systematic coverage of iterative preemption bounding
//! and the bug-finding power of randomised strategies. When the systematic member exhausts
//! the schedule space, the whole search is complete.

use super::{Coverage, Divergence, ExecutionSummary, PctScheduler, Point, RandomScheduler};
use super::{Scheduler, TreeSearch};
use crate::model::ThreadId;

/// Round-robin over member strategies; member 0 is the systematic one.
pub struct Portfolio {
    systematic: TreeSearch,
    others: Vec<Box<dyn Scheduler>>,
    /// The cycle of members: None = the systematic member, Some(i) = others[i].
    cycle: Vec<Option<usize>>,
    active: Option<usize>,
    systematic_done: bool,
}

impl Portfolio {
    /// The default mix (see docs/performance.md for the measurements behind it): in every
    /// cycle of four executions, one ICB execution, two PCT executions (depth 3 and 2) and
    /// one random execution.
    pub fn default_mix(seed: u64, preemption_bound: Option<u32>) -> Portfolio {
        Portfolio {
            systematic: TreeSearch::icb(preemption_bound),
            others: vec![
                Box::new(PctScheduler::new(3, seed)),
                Box::new(RandomScheduler::new(seed)),
                Box::new(PctScheduler::new(2, seed ^ 0x9e37_79b9)),
            ],
            cycle: vec![Some(0), None, Some(1), Some(2)],
            active: None,
            systematic_done: false,
        }
    }

    /// The member that runs the current execution, as a name with parameters.
    pub fn active_member(&self) -> String {
        match self.active {
            None => "icb".into(),
            Some(0) => "pct(depth 3)".into(),
            Some(2) => "pct(depth 2)".into(),
            Some(i) => self.others[i].name().into(),
        }
    }

    fn member(&mut self) -> &mut dyn Scheduler {
        match self.active {
            None => &mut self.systematic,
            Some(i) => self.others[i].as_mut(),
        }
    }
}

impl Scheduler for Portfolio {
    fn name(&self) -> &'static str {
        "portfolio"
    }

    fn begin_execution(&mut self, index: u64) -> Option<u64> {
        let slot = self.cycle[(index as usize) % self.cycle.len()];
        if slot.is_none() && !self.systematic_done {
            self.active = None;
            match self.systematic.begin_execution(index) {
                Some(seed) => return Some(seed),
                None => {
                    self.systematic_done = true;
                    // Everything is explored: nothing a random member could add.
                    return None;
                }
            }
        }
        let i = slot.unwrap_or(0);
        self.active = Some(i);
        self.others[i].begin_execution(index)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        self.member().choose(point)
    }

    fn end_execution(&mut self, summary: &ExecutionSummary) {
        self.member().end_execution(summary);
        // Every member learns how long executions are (PCT needs k).
        if self.active.is_none() {
            for o in &mut self.others {
                o.end_execution(&ExecutionSummary {
                    found_bug: false,
                    ..*summary
                });
            }
        }
    }

    fn coverage(&self) -> Coverage {
        self.systematic.coverage()
    }

    fn describe_current(&self) -> String {
        self.active_member()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::{binomial, Synthetic};

    #[test]
    fn completes_when_the_systematic_member_is_exhausted() {
        let prog = Synthetic { steps: vec![2, 2] };
        let mut p = Portfolio::default_mix(1, None);
        let (seen, n) = prog.run_all(&mut p, 10_000);
        assert_eq!(seen.len() as u64, binomial(4, 2));
        // Six ICB executions, each in a cycle of four.
        assert!(n <= 6 * 4 + 1, "{n}");
        assert!(p.coverage().exhausted);
    }
}
