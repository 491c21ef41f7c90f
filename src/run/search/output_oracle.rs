//! The program's output as an oracle: the first execution that runs to the program's end
//! is the reference (its exit, a summary of its stdout and its schedule); a later one that
//! ends with the same exit but wrote another stdout is a `nondeterminism` finding, with
//! the reference's schedule as the other schedule. Shared by the workers, so executions
//! are compared across them; with several workers the first execution runs alone, so the
//! reference does not depend on timing.
//!
//! Only executions run to their end count: an execution cut short (step or time limit,
//! interrupt), ended by a finding (its output is that finding's business), pruned, outside
//! this machine's share, or that diverged, is not compared. Neither is one whose exit
//! differs from the reference's (another exit status or a fatal signal): that the output
//! differs then tells nothing more than the exit itself, which `--expect-exit` and the
//! crash findings judge.

use std::sync::Mutex;

use crate::detect::output_diff::{first_difference, OutputSummary};
use crate::explore::Decision;
use crate::report::{Finding, FindingKind};
use crate::run::session::ExecutionOutcome;

/// The execution the others are compared with.
struct Reference {
    /// How it ended ("exit status 0").
    exit: String,
    /// What it wrote to stdout.
    stdout: OutputSummary,
    /// Its schedule.
    decisions: Vec<Decision>,
}

/// The reference execution, once one ran to its end.
#[derive(Default)]
pub(super) struct OutputOracle {
    reference: Mutex<Option<Reference>>,
}

impl OutputOracle {
    /// A `nondeterminism` finding when `outcome` ran to the program's end with the
    /// reference's exit and another stdout; the first such execution becomes the reference.
    pub(super) fn check(&self, outcome: &ExecutionOutcome) -> Option<Finding> {
        let stdout = outcome.stdout.as_ref()?;
        let exit = outcome.exit.as_ref()?;
        let ran_to_end = outcome.finding.is_none()
            && outcome.divergence.is_none()
            && !outcome.early_end.step_limit_hit
            && !outcome.early_end.cut_short
            && !outcome.early_end.stopped_early
            && !outcome.early_end.pruned
            && !outcome.early_end.outside_share
            && outcome.abandoned.is_none();
        if !ran_to_end {
            return None;
        }
        let mut reference = self.reference.lock().expect("output reference");
        let Some(r) = reference.as_ref() else {
            *reference = Some(Reference {
                exit: exit.clone(),
                stdout: stdout.clone(),
                decisions: outcome.decisions.clone(),
            });
            return None;
        };
        if r.exit != *exit || r.stdout.same_as(stdout) {
            return None;
        }
        Some(finding(stdout, r, outcome))
    }
}

/// The finding for an execution whose output `stdout` differs from the reference's.
fn finding(stdout: &OutputSummary, r: &Reference, outcome: &ExecutionOutcome) -> Finding {
    let difference = first_difference(stdout, &r.stdout);
    nondeterminism(
        format!(
            "the program's output depends on the schedule: {}",
            difference.describe()
        ),
        output_details(stdout, &r.stdout, &r.exit),
        outcome,
        r.decisions.clone(),
    )
}

/// A `nondeterminism` finding of `outcome` (this execution's schedule is the finding's),
/// told apart from the execution that ran `other_schedule`.
pub(super) fn nondeterminism(
    message: String,
    details: Vec<String>,
    outcome: &ExecutionOutcome,
    other_schedule: Vec<Decision>,
) -> Finding {
    Finding {
        kind: FindingKind::Nondeterminism,
        message,
        details,
        locations: Vec::new(),
        threads: Vec::new(),
        preemptions: outcome.preemptions,
        seed: 0,
        execution: 0,
        steps: outcome.steps,
        strategy: String::new(),
        schedule: None,
        cycle: Vec::new(),
        other_schedule,
    }
}

/// What a finding says about the two outputs besides their first difference.
pub fn output_details(ours: &OutputSummary, theirs: &OutputSummary, exit: &str) -> Vec<String> {
    vec![
        format!(
            "both executions ran to the program's end ({exit}); this one wrote {} byte(s) to stdout, the other (the finding's other schedule) {}",
            ours.len, theirs.len
        ),
        "a program whose output legitimately depends on the schedule (timings, addresses, thread order) is checked with --no-output-check".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(text: &str, exit: &str, threads: &[usize]) -> ExecutionOutcome {
        ExecutionOutcome {
            exit: Some(exit.into()),
            stdout: Some(OutputSummary {
                digest: text.bytes().map(u64::from).sum::<u64>() ^ text.len() as u64,
                len: text.len() as u64,
                head: text.as_bytes().to_vec(),
            }),
            decisions: threads
                .iter()
                .map(|&t| Decision {
                    thread: t,
                    op: "".into(),
                })
                .collect(),
            ..ExecutionOutcome::default()
        }
    }

    #[test]
    fn the_first_execution_is_the_reference_and_a_different_output_is_reported() {
        let oracle = OutputOracle::default();
        assert!(oracle
            .check(&ended("total 3\n", "exit status 0", &[0, 1, 2]))
            .is_none());
        assert!(oracle
            .check(&ended("total 3\n", "exit status 0", &[0, 2, 1]))
            .is_none());
        let f = oracle
            .check(&ended("total 2\n", "exit status 0", &[0, 2, 1, 2]))
            .expect("a finding");
        assert_eq!(f.kind, FindingKind::Nondeterminism);
        assert_eq!(
            f.message,
            "the program's output depends on the schedule: line 1 is `total 2` in this execution and `total 3` in the other"
        );
        let other: Vec<usize> = f.other_schedule.iter().map(|d| d.thread).collect();
        assert_eq!(other, vec![0, 1, 2]);
    }

    #[test]
    fn another_exit_or_an_execution_not_run_to_its_end_is_not_compared() {
        let oracle = OutputOracle::default();
        let mut cut = ended("partial", "exit status 0", &[0]);
        cut.early_end.step_limit_hit = true;
        assert!(oracle.check(&cut).is_none());
        // The cut execution did not become the reference.
        assert!(oracle
            .check(&ended("full\n", "exit status 0", &[0]))
            .is_none());
        assert!(oracle
            .check(&ended("other\n", "exit status 1", &[1]))
            .is_none());
        let mut failed = ended("other\n", "exit status 0", &[1]);
        failed.finding = Some(
            oracle
                .check(&ended("x\n", "exit status 0", &[1]))
                .expect("a finding"),
        );
        assert!(oracle.check(&failed).is_none());
    }

    #[test]
    fn without_a_read_stdout_nothing_is_compared() {
        let oracle = OutputOracle::default();
        let mut unread = ended("a", "exit status 0", &[0]);
        unread.stdout = None;
        assert!(oracle.check(&unread).is_none());
        assert!(oracle.check(&ended("b", "exit status 0", &[0])).is_none());
    }
}
