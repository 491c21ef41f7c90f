//! The portfolio: several strategies interleaved execution by execution, as Coyote does, so
//! that one search gets the systematic coverage of iterative preemption bounding and the
//! bug-finding power of randomised strategies. The tree member is shared by all workers
//! through a [`super::TreePool`]; when it is exhausted, the whole search is complete.
//!
//! The mix (two random executions, one icb and one POS per cycle of four) comes from the
//! measurements in docs/performance.md; a reduced tree (dfs with partial-order reduction)
//! takes every other slot, so that a correct program whose reduced tree is small is proved
//! correct by the default command (which also lets the reduced tree run on alone past the
//! budget until it has had a whole budget itself: see the search's `proof_budget`). The icb
//! member is reduced too, by bounded partial-order reduction (`TreeSearch::with_por`),
//! except in a split search.

use super::{PosScheduler, RandomScheduler, Scheduler};

/// What a slot of the cycle runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The next execution of the shared tree search (icb).
    Tree,
    /// The next execution of the portfolio's reduced tree search (dfs with partial-order
    /// reduction), which proves a correct program whose reduced tree is small.
    ReducedTree,
    /// The next execution of randomised member `i`.
    Randomized(usize),
}

impl Slot {
    /// Which tree member the slot runs (0: the tree, 1: the reduced tree), if any.
    pub fn tree_member(self) -> Option<usize> {
        match self {
            Slot::Tree => Some(0),
            Slot::ReducedTree => Some(1),
            Slot::Randomized(_) => None,
        }
    }
}

/// A strategy mix: randomised members (with display names) and the cycle of slots.
pub struct Mix {
    /// Randomised members, each with its name and parameters.
    pub members: Vec<(Box<dyn Scheduler>, String)>,
    /// The order in which slots run, repeated.
    pub cycle: Vec<Slot>,
}

/// The default portfolio: random, icb, POS, random, repeated, with a reduced dfs execution
/// after each (see the module comment). Random schedules find the shallow fixture bugs
/// fastest, icb adds coverage and minimal witnesses, and POS takes the slot PCT(3) had: it
/// found the deep-order fixture in 176 executions (median) where PCT(3) needed 477, the ABA
/// stack in 117 where PCT(3) never did in 3000, and matched or beat PCT(3) on the other
/// fixture bugs except the two unjoined ones, which the portfolio's trees find first anyway
/// (docs/performance.md, "Deep bugs").
pub fn default_mix(seed: u64) -> Mix {
    Mix {
        members: vec![
            (Box::new(RandomScheduler::new(seed)), "random".into()),
            (Box::new(PosScheduler::new(seed)), "pos".into()),
        ],
        cycle: vec![
            Slot::Randomized(0),
            Slot::ReducedTree,
            Slot::Tree,
            Slot::ReducedTree,
            Slot::Randomized(1),
            Slot::ReducedTree,
            Slot::Randomized(0),
            Slot::ReducedTree,
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::{binomial, Synthetic};
    use crate::explore::{TreePool, TreeSearch};
    use std::collections::HashSet;

    #[test]
    fn portfolio_covers_the_tree_and_interleaves_randomised_members() {
        let prog = Synthetic { steps: vec![2, 2] };
        let mut mix = default_mix(5);
        let pool = TreePool::new(Some(u32::MAX));
        let mut tree: Option<TreeSearch> = None;
        let mut tree_schedules = HashSet::new();
        let (mut tree_runs, mut random_runs) = (0, 0);
        for i in 0..1000usize {
            match mix.cycle[i % mix.cycle.len()] {
                Slot::Tree => {
                    let sched = loop {
                        if tree.is_none() {
                            match pool.take(false) {
                                Some(item) => {
                                    tree = Some(TreeSearch::subtree(
                                        Some(u32::MAX),
                                        item.bound,
                                        item.prefix,
                                    ))
                                }
                                None => break None,
                            }
                        }
                        let t = tree.as_mut().unwrap();
                        if t.begin_execution(0).is_some() {
                            break Some(());
                        }
                        let d = t.take_deferred();
                        tree = None;
                        pool.release(d, 0);
                    };
                    if sched.is_none() {
                        break;
                    }
                    tree_schedules.insert(prog.run_once(tree.as_mut().unwrap()));
                    tree_runs += 1;
                }
                // The reduced tree is run by the search like the tree (another pool).
                Slot::ReducedTree => {}
                Slot::Randomized(k) => {
                    let (s, _) = &mut mix.members[k];
                    s.begin_execution(i as u64);
                    prog.run_once(s.as_mut());
                    random_runs += 1;
                }
            }
        }
        assert!(pool.is_finished(), "the tree member must be exhausted");
        assert_eq!(tree_schedules.len() as u64, binomial(4, 2));
        assert_eq!(tree_runs, 6);
        assert!(
            random_runs >= 3 * tree_runs,
            "{random_runs} randomised runs"
        );
        let reduced = mix
            .cycle
            .iter()
            .filter(|&&s| s == Slot::ReducedTree)
            .count();
        assert_eq!(
            reduced * 2,
            mix.cycle.len(),
            "half the executions go to the reduced tree, so that it proves small programs"
        );
    }
}
