//! Stateless depth-first search over scheduling choices (VeriSoft style): every execution
//! replays the choices of the path to the deepest node with an unexplored alternative, takes
//! that alternative, then follows default choices.
//!
//! With a preemption bound it is iterative preemption bounding (Musuvathi & Qadeer, PLDI'07):
//! alternatives that would exceed the current bound c are not explored but queued, and once
//! everything within c is done the queued prefixes are explored with bound c+1. Every
//! execution is therefore explored exactly once, all executions with ≤ c preemptions before
//! any with c+1. Switching away from a blocked, yielding or exited thread is free.

use std::collections::VecDeque;

use super::{Coverage, Divergence, ExecutionSummary, Point, Scheduler};
use crate::model::ThreadId;

/// One scheduling point on the current path.
#[derive(Debug, Clone)]
struct Node {
    /// The choice taken here on the current path.
    chosen: ThreadId,
    /// Alternatives still to explore from here (within the current bound).
    todo: Vec<ThreadId>,
    /// Preemptions on the path before this node's choice.
    preemptions_before: u32,
    /// Whether `chosen` was a preemption here.
    chosen_preempts: bool,
    /// The enabled set seen here (checked on replay).
    enabled: Vec<ThreadId>,
}

/// DFS (`bound: None`) or iterative preemption bounding (`bound: Some(max)`).
#[derive(Debug)]
pub struct TreeSearch {
    name: &'static str,
    /// Largest preemption bound to reach (None: unbounded DFS).
    max_bound: Option<u32>,
    /// Bound currently explored.
    bound: u32,
    /// The path of the current execution.
    stack: Vec<Node>,
    /// Nodes [0, fixed) belong to the work item's prefix and are never backtracked into.
    fixed: usize,
    /// Choices to replay at the start of the next execution.
    replay: Vec<ThreadId>,
    /// Prefixes waiting for the current bound.
    queue: VecDeque<Vec<ThreadId>>,
    /// Prefixes needing one more preemption than the current bound allows.
    deferred: VecDeque<Vec<ThreadId>>,
    started: bool,
    exhausted: bool,
    executions: u64,
    completed_bound: Option<u32>,
    /// Part of a parallel search: bounds and work items are managed by a [`super::TreePool`].
    managed: bool,
}

impl TreeSearch {
    /// Exhaustive depth-first search.
    pub fn dfs() -> TreeSearch {
        TreeSearch::new("dfs", None)
    }

    /// Iterative preemption bounding up to `max_bound` preemptions (None: no cap).
    pub fn icb(max_bound: Option<u32>) -> TreeSearch {
        TreeSearch::new("icb", Some(max_bound.unwrap_or(u32::MAX)))
    }

    fn new(name: &'static str, max_bound: Option<u32>) -> TreeSearch {
        TreeSearch {
            name,
            max_bound,
            bound: 0,
            stack: Vec::new(),
            fixed: 0,
            replay: Vec::new(),
            queue: VecDeque::new(),
            deferred: VecDeque::new(),
            started: false,
            exhausted: false,
            executions: 0,
            completed_bound: None,
            managed: false,
        }
    }

    /// The subtree below `prefix`, explored at preemption bound `bound` (icb, when
    /// `max_bound` is Some) as one work item of a parallel search: alternatives beyond the
    /// bound are kept for [`TreeSearch::take_deferred`], and the search ends with the subtree.
    pub fn subtree(max_bound: Option<u32>, bound: u32, prefix: Vec<ThreadId>) -> TreeSearch {
        let name = if max_bound.is_some() { "icb" } else { "dfs" };
        let mut t = TreeSearch::new(name, max_bound);
        t.bound = bound;
        t.managed = true;
        t.started = true;
        t.queue.push_back(prefix);
        t
    }

    /// Gives away the shallowest unexplored alternative of the current path, as the prefix
    /// that leads to it, so that another worker explores that subtree.
    pub fn split(&mut self) -> Option<Vec<ThreadId>> {
        let i = (self.fixed..self.stack.len()).find(|&i| !self.stack[i].todo.is_empty())?;
        let alt = self.stack[i].todo.remove(0);
        let mut prefix: Vec<ThreadId> = self.stack[..i].iter().map(|n| n.chosen).collect();
        prefix.push(alt);
        Some(prefix)
    }

    /// Prefixes that need one more preemption than this subtree's bound.
    pub fn take_deferred(&mut self) -> Vec<Vec<ThreadId>> {
        self.deferred.drain(..).collect()
    }

    /// Whether every schedule (within the maximum bound) has been explored.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    /// Preemption bound being explored now.
    pub fn current_bound(&self) -> u32 {
        self.bound
    }

    fn within_bound(&self, preemptions: u32) -> bool {
        match self.max_bound {
            None => true,
            Some(_) => preemptions <= self.bound,
        }
    }

    /// Moves to the next execution's path; false when nothing is left.
    fn advance(&mut self) -> bool {
        // Backtrack within the current work item.
        while self.stack.len() > self.fixed {
            let last = self.stack.len() - 1;
            if let Some(alt) =
                (!self.stack[last].todo.is_empty()).then(|| self.stack[last].todo.remove(0))
            {
                // Keep the node (with its remaining alternatives); the path below it is new.
                self.stack[last].chosen = alt;
                self.replay = self.stack.iter().map(|n| n.chosen).collect();
                return true;
            }
            self.stack.pop();
        }
        // Next work item at this bound, or the next bound.
        loop {
            if let Some(prefix) = self.queue.pop_front() {
                self.stack.clear();
                self.fixed = prefix.len();
                self.replay = prefix;
                return true;
            }
            if self.managed {
                return false;
            }
            if self.deferred.is_empty() {
                self.completed_bound = self.max_bound.map(|_| self.bound);
                return false;
            }
            self.completed_bound = Some(self.bound);
            if self.max_bound.is_some_and(|m| self.bound >= m) {
                return false;
            }
            self.bound += 1;
            self.queue = std::mem::take(&mut self.deferred);
        }
    }
}

impl Scheduler for TreeSearch {
    fn name(&self) -> &'static str {
        self.name
    }

    fn planned_prefix(&self) -> Option<&[ThreadId]> {
        Some(&self.replay)
    }

    fn may_backtrack_to(&self, step: usize) -> bool {
        // Nodes of the work item's prefix belong to others; a node kept from earlier
        // executions is only returned to while it has alternatives left; a new node may get
        // some.
        step >= self.fixed && self.stack.get(step).is_none_or(|n| !n.todo.is_empty())
    }

    fn begin_execution(&mut self, _index: u64) -> Option<u64> {
        if self.exhausted {
            return None;
        }
        if !self.started {
            self.started = true;
            self.replay.clear();
            return Some(0);
        }
        if !self.advance() {
            self.exhausted = true;
            return None;
        }
        Some(0)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let k = point.step;
        let preemptions_before = self
            .stack
            .last()
            .map_or(0, |n| n.preemptions_before + n.chosen_preempts as u32);
        if k < self.replay.len() {
            let chosen = self.replay[k];
            if !point.enabled.contains(&chosen) {
                return Err(Divergence {
                    step: k,
                    reason: format!(
                        "thread T{chosen} is not enabled on replay (enabled: {:?}): the program is not deterministic under mcheck",
                        point.enabled
                    ),
                });
            }
            if k < self.stack.len() {
                // A node kept from the previous execution: its choice is the replayed one.
                self.stack[k].chosen_preempts = point.is_preemption(chosen);
                if self.stack[k].enabled != point.enabled {
                    return Err(Divergence {
                        step: k,
                        reason: format!(
                            "enabled threads {:?} differ from {:?} seen before",
                            point.enabled, self.stack[k].enabled
                        ),
                    });
                }
            } else {
                // A node of the work item's prefix: its alternatives belong to others.
                self.stack.push(Node {
                    chosen,
                    todo: Vec::new(),
                    preemptions_before,
                    chosen_preempts: point.is_preemption(chosen),
                    enabled: point.enabled.to_vec(),
                });
            }
            return Ok(chosen);
        }
        let chosen = point.default_choice();
        let mut todo = Vec::new();
        for &u in point.enabled {
            if u == chosen {
                continue;
            }
            let cost = preemptions_before + point.is_preemption(u) as u32;
            if self.within_bound(cost) {
                todo.push(u);
            } else if self.max_bound.is_some_and(|m| cost <= m) {
                let mut prefix: Vec<ThreadId> = self.stack.iter().map(|n| n.chosen).collect();
                prefix.push(u);
                self.deferred.push_back(prefix);
            }
        }
        self.stack.push(Node {
            chosen,
            todo,
            preemptions_before,
            chosen_preempts: point.is_preemption(chosen),
            enabled: point.enabled.to_vec(),
        });
        Ok(chosen)
    }

    fn end_execution(&mut self, _summary: &ExecutionSummary) {
        self.executions += 1;
    }

    fn coverage(&self) -> Coverage {
        Coverage {
            exhausted: self.exhausted,
            preemption_bound_completed: if self.exhausted {
                self.completed_bound
            } else {
                self.completed_bound.filter(|&b| b < self.bound)
            },
            systematic_executions: self.executions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::{binomial, preemptions, Synthetic};

    #[test]
    fn dfs_enumerates_every_interleaving_once() {
        for (a, b) in [(1, 1), (2, 2), (3, 2), (4, 4)] {
            let prog = Synthetic { steps: vec![a, b] };
            let mut s = TreeSearch::dfs();
            let (seen, n) = prog.run_all(&mut s, 100_000);
            let expected = binomial((a + b) as u64, a as u64);
            assert_eq!(n, expected, "{a}+{b} steps");
            assert_eq!(seen.len() as u64, expected, "no schedule twice");
            assert!(s.coverage().exhausted);
        }
    }

    #[test]
    fn dfs_three_threads_multinomial() {
        let prog = Synthetic {
            steps: vec![2, 2, 2],
        };
        let mut s = TreeSearch::dfs();
        let (_, n) = prog.run_all(&mut s, 100_000);
        assert_eq!(n, 90); // 6! / (2! 2! 2!)
    }

    #[test]
    fn icb_bound_zero_gives_exactly_the_non_preemptive_executions() {
        let prog = Synthetic {
            steps: vec![3, 3, 3],
        };
        let mut s = TreeSearch::icb(Some(0));
        let (seen, n) = prog.run_all(&mut s, 100_000);
        // Without preemptions each thread runs to completion: 3! orders.
        assert_eq!(n, 6);
        assert!(seen.iter().all(|sch| preemptions(sch, &prog.steps) == 0));
        assert_eq!(s.coverage().preemption_bound_completed, Some(0));
    }

    #[test]
    fn icb_explores_in_order_of_preemptions_and_covers_everything_once() {
        let prog = Synthetic { steps: vec![3, 2] };
        let mut s = TreeSearch::icb(None);
        let mut last = 0;
        let mut all = std::collections::HashSet::new();
        let mut n = 0;
        while s.begin_execution(n).is_some() {
            let sch = prog.run_once(&mut s);
            let p = preemptions(&sch, &prog.steps);
            assert!(p >= last, "preemptions must not decrease: {p} after {last}");
            last = p;
            assert!(all.insert(sch), "explored twice");
            n += 1;
        }
        assert_eq!(n, binomial(5, 2));
    }

    #[test]
    fn icb_cap_stops_at_the_bound() {
        let prog = Synthetic { steps: vec![3, 3] };
        let mut s = TreeSearch::icb(Some(1));
        let (seen, _) = prog.run_all(&mut s, 100_000);
        assert!(seen.iter().all(|sch| preemptions(sch, &prog.steps) <= 1));
        let all_le1 = {
            let mut d = TreeSearch::dfs();
            let (every, _) = prog.run_all(&mut d, 100_000);
            every
                .into_iter()
                .filter(|sch| preemptions(sch, &prog.steps) <= 1)
                .count()
        };
        assert_eq!(seen.len(), all_le1);
        assert!(s.coverage().exhausted);
        assert_eq!(s.coverage().preemption_bound_completed, Some(1));
    }
}
