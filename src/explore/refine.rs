//! Race-directed refinement of the systematic search, and what it lets the search claim.
//!
//! A tree search schedules at synchronisation only; that is complete for executions without
//! data races (Musuvathi & Qadeer, PLDI'07), not once races are found: the program's
//! behaviour then depends on the order of the racy accesses too. [`RacySites`] keeps the
//! access sites found racy (instruction addresses) and those the current tree holds as
//! scheduling points. When races name a site the tree does not hold, a refinement round
//! begins: a new tree in which every racy site found so far is a scheduling point. Sites
//! are finite, so rounds end. The tree's coverage is *qualified* by the sites: "exhausted"
//! only when every racy site found was a scheduling point of the tree that ran out;
//! otherwise the tree covered the synchronisation order only.
//!
//! Timeout polls (reads of what a timed-out wait sets, `run::races::timeout_polls`) refine
//! the tree the same way, whatever `refine` says: a tree without them never lets a timeout
//! fire where the running thread would notice it at once, so it cannot claim to be
//! exhausted once one is known.

use std::collections::BTreeSet;

use super::Coverage;

/// The racy sites of a search and the refinement rounds they caused.
#[derive(Debug, Clone, Default)]
pub struct RacySites {
    refine: bool,
    found: BTreeSet<u64>,
    included: BTreeSet<u64>,
    polls_found: BTreeSet<u64>,
    polls_included: BTreeSet<u64>,
    spins_found: BTreeSet<u64>,
    spins_included: BTreeSet<u64>,
    rounds: u32,
}

impl RacySites {
    /// With `refine`, sites found racy start new rounds; without, they are only counted
    /// against the coverage claim.
    pub fn new(refine: bool) -> RacySites {
        RacySites {
            refine,
            ..RacySites::default()
        }
    }

    /// Notes sites found racy; true when the tree should be refined (a new round begun)
    /// because some of them are not scheduling points of the current tree.
    pub fn note(&mut self, sites: impl IntoIterator<Item = u64>) -> bool {
        self.found.extend(sites);
        self.refine && !self.found.is_subset(&self.included)
    }

    /// Notes timeout polls found; true when the tree should be refined because some of
    /// them are not scheduling points of the current tree.
    pub fn note_polls(&mut self, polls: impl IntoIterator<Item = u64>) -> bool {
        self.polls_found.extend(polls);
        !self.polls_found.is_subset(&self.polls_included)
    }

    /// Notes busy waits' atomic loads found; true when the tree should be refined because
    /// some of them are not yield points of the current tree.
    pub fn note_spins(&mut self, spins: impl IntoIterator<Item = u64>) -> bool {
        self.spins_found.extend(spins);
        !self.spins_found.is_subset(&self.spins_included)
    }

    /// Begins a refinement round: every site found so far (racy ones only with `refine`),
    /// every timeout poll and every busy wait becomes a scheduling point of the new tree.
    /// Returns the racy sites.
    pub fn begin_round(&mut self) -> Vec<u64> {
        if self.refine {
            self.included.clone_from(&self.found);
        }
        self.polls_included.clone_from(&self.polls_found);
        self.spins_included.clone_from(&self.spins_found);
        self.rounds += 1;
        self.included.iter().copied().collect()
    }

    /// The timeout polls of the current tree.
    pub fn polls_included(&self) -> Vec<u64> {
        self.polls_included.iter().copied().collect()
    }

    /// The busy waits' atomic loads that yield in the current tree.
    pub fn spins_included(&self) -> Vec<u64> {
        self.spins_included.iter().copied().collect()
    }

    /// The sites of the current tree.
    pub fn included(&self) -> Vec<u64> {
        self.included.iter().copied().collect()
    }

    /// Refinement rounds begun (0: the first tree, of synchronisation only, is still the
    /// tree).
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// Racy sites found that the current tree does not hold as scheduling points.
    pub fn not_explored(&self) -> Vec<u64> {
        self.found.difference(&self.included).copied().collect()
    }

    /// The tree's coverage with what the racy sites allow it to claim: `exhausted` stays
    /// true only when no racy site or timeout poll found was left out of the tree that ran
    /// out;
    /// `synchronisation_exhausted` says the tree itself ran out.
    pub fn qualify(&self, tree: Coverage) -> Coverage {
        let not_explored = self.not_explored();
        let polls_not_explored: Vec<u64> = (self.polls_found.difference(&self.polls_included))
            .copied()
            .collect();
        let spins_left_out = !self.spins_found.is_subset(&self.spins_included);
        Coverage {
            exhausted: tree.exhausted
                && not_explored.is_empty()
                && polls_not_explored.is_empty()
                && !spins_left_out,
            synchronisation_exhausted: tree.exhausted,
            racy_sites_included: self.included(),
            racy_sites_not_explored: not_explored,
            poll_sites_included: self.polls_included(),
            poll_sites_not_explored: polls_not_explored,
            spin_sites_included: self.spins_included(),
            refinement_rounds: self.rounds,
            ..tree
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::{RacyProgram, Shared::*};
    use crate::explore::{Scheduler, TreeSearch};

    /// The `reorder` shape: thread 0 sets `a` then `b` (sites 10, 11) without a lock,
    /// thread 1 reads `a` then `b` (sites 20, 21) and fails when it saw `b` set and `a`
    /// not, or `a` set and `b` not. Both threads first take one synchronisation step.
    fn reorder() -> RacyProgram {
        RacyProgram {
            threads: vec![
                vec![Sync, Plain(10, 0, true), Plain(11, 1, true)],
                vec![Sync, Plain(20, 0, false), Plain(21, 1, false)],
            ],
            fails: |reads| reads.get(&20) != reads.get(&21),
        }
    }

    /// Runs rounds of a tree search (`make` builds each round's tree) as the search does;
    /// returns the final coverage, whether a failing execution was found, and executions.
    fn search(
        prog: &RacyProgram,
        refine: bool,
        make: impl Fn() -> TreeSearch,
    ) -> (Coverage, bool, u64) {
        let mut sites = RacySites::new(refine);
        let (mut failed, mut executions) = (false, 0);
        let mut tree = make();
        loop {
            if tree.begin_execution(0).is_none() {
                break;
            }
            let (fails, racy) = prog.run_once(&mut tree, &sites.included());
            executions += 1;
            failed |= fails;
            if sites.note(racy) {
                sites.begin_round();
                tree = make();
            }
        }
        (sites.qualify(tree.coverage()), failed, executions)
    }

    #[test]
    fn a_tree_of_synchronisation_only_is_not_called_exhausted_when_races_were_found() {
        for make in [TreeSearch::dfs, TreeSearch::dpor, || TreeSearch::icb(None)] {
            let (cov, failed, _) = search(&reorder(), false, make);
            assert!(
                !failed,
                "without racy points the failing order is never run"
            );
            assert!(cov.synchronisation_exhausted, "the tree itself ran out");
            assert!(!cov.exhausted, "races were found and not explored: {cov:?}");
            assert_eq!(cov.racy_sites_not_explored, vec![10, 11, 20, 21]);
            assert!(cov.racy_sites_included.is_empty());
        }
    }

    #[test]
    fn refinement_reaches_the_failure_the_races_cause_and_then_may_claim_exhaustion() {
        for make in [TreeSearch::dfs, TreeSearch::dpor, || TreeSearch::icb(None)] {
            let (cov, failed, executions) = search(&reorder(), true, make);
            assert!(
                failed,
                "the refined tree runs a read between the two writes"
            );
            assert!(cov.exhausted, "{cov:?}");
            assert_eq!(cov.racy_sites_included, vec![10, 11, 20, 21]);
            assert!(cov.racy_sites_not_explored.is_empty());
            assert_eq!(cov.refinement_rounds, 1, "one round: no new site after it");
            assert!(executions < 30, "{executions}");
        }
    }

    #[test]
    fn timeout_polls_begin_rounds_and_bar_exhaustion_until_included_even_without_refine() {
        let mut sites = RacySites::new(false);
        assert!(!sites.note([10]), "racy sites do not refine without refine");
        assert!(
            sites.note_polls([30]),
            "a poll refines whatever refine says"
        );
        let done = Coverage {
            exhausted: true,
            ..Coverage::default()
        };
        let before = sites.qualify(done.clone());
        assert!(
            !before.exhausted,
            "a poll found is not a point of this tree"
        );
        assert_eq!(before.poll_sites_not_explored, vec![30]);
        assert!(sites.begin_round().is_empty(), "racy sites stay out");
        assert!(!sites.note_polls([30]), "nothing new");
        let after = sites.qualify(done);
        assert_eq!(after.poll_sites_included, vec![30]);
        assert!(after.poll_sites_not_explored.is_empty());
        assert!(!after.exhausted, "the racy site still was not explored");
        assert_eq!(after.racy_sites_not_explored, vec![10]);
    }

    #[test]
    fn busy_waits_begin_rounds_and_bar_exhaustion_until_included() {
        let mut sites = RacySites::new(false);
        assert!(
            sites.note_spins([40]),
            "a busy wait refines whatever refine says"
        );
        let done = Coverage {
            exhausted: true,
            ..Coverage::default()
        };
        assert!(
            !sites.qualify(done.clone()).exhausted,
            "not a point of this tree"
        );
        sites.begin_round();
        assert!(!sites.note_spins([40]), "nothing new");
        let after = sites.qualify(done);
        assert!(after.exhausted);
        assert_eq!(after.spin_sites_included, vec![40]);
    }

    #[test]
    fn a_race_free_program_is_exhausted_without_rounds() {
        let prog = RacyProgram {
            threads: vec![
                vec![Sync, Plain(10, 0, true)],
                vec![Sync, Plain(20, 1, true)],
            ],
            fails: |_| false,
        };
        let (cov, failed, executions) = search(&prog, true, TreeSearch::dfs);
        assert!(!failed && cov.exhausted && cov.refinement_rounds == 0);
        assert_eq!(executions, 2);
    }
}
