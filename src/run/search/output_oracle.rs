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

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::detect::output_diff::{first_difference, OutputSummary};
use crate::explore::Decision;
use crate::report::{Finding, FindingKind};
use crate::run::session::ExecutionOutcome;

/// The execution the others are compared with.
struct Reference<T> {
    /// How it ended ("exit status 0").
    exit: String,
    /// What it wrote (to stdout, or to its files).
    output: T,
    /// Its schedule.
    decisions: Vec<Decision>,
}

/// The files one execution left, by path.
type Files = Vec<(PathBuf, OutputSummary)>;

/// The reference executions, once one ran to its end: the first that wrote a stdout mcheck
/// read, and the first that left files the program wrote.
#[derive(Default)]
pub(super) struct OutputOracle {
    stdout: Mutex<Option<Reference<OutputSummary>>>,
    files: Mutex<Option<Reference<Files>>>,
}

impl OutputOracle {
    /// A `nondeterminism` finding when `outcome` ran to the program's end with the
    /// reference's exit and another stdout, or with a file it wrote holding other bytes
    /// than the reference left in it; the first such execution becomes the reference.
    pub(super) fn check(&self, outcome: &ExecutionOutcome) -> Option<Finding> {
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
        let stdout = outcome.stdout.as_ref().and_then(|stdout| {
            let r = compare(&self.stdout, exit, stdout, outcome)?;
            (!r.output.same_as(stdout)).then(|| stdout_finding(stdout, &r, outcome))
        });
        if stdout.is_some() || outcome.written_files.is_empty() {
            return stdout;
        }
        let r = compare(&self.files, exit, &outcome.written_files, outcome)?;
        // A path only one of the two left is not compared: a name the program chose by
        // its pid or at random is no difference of the schedule's.
        outcome.written_files.iter().find_map(|(path, ours)| {
            let (_, theirs) = r.output.iter().find(|(p, _)| p == path)?;
            (!ours.same_as(theirs)).then(|| file_finding(path, ours, theirs, &r, outcome))
        })
    }
}

/// The reference held in `slot`, when it ended with `exit` (another exit is not compared);
/// `output` of `outcome` becomes the reference when there is none yet.
fn compare<T: Clone>(
    slot: &Mutex<Option<Reference<T>>>,
    exit: &str,
    output: &T,
    outcome: &ExecutionOutcome,
) -> Option<Reference<T>> {
    let mut slot = slot.lock().expect("output reference");
    let Some(r) = slot.as_ref() else {
        *slot = Some(Reference {
            exit: exit.to_string(),
            output: output.clone(),
            decisions: outcome.decisions.clone(),
        });
        return None;
    };
    (r.exit == exit).then(|| Reference {
        exit: r.exit.clone(),
        output: r.output.clone(),
        decisions: r.decisions.clone(),
    })
}

/// The finding for an execution whose output `stdout` differs from the reference's.
fn stdout_finding(
    stdout: &OutputSummary,
    r: &Reference<OutputSummary>,
    outcome: &ExecutionOutcome,
) -> Finding {
    let difference = first_difference(stdout, &r.output);
    nondeterminism(
        format!(
            "the program's output depends on the schedule: {}",
            difference.describe()
        ),
        output_details(stdout, &r.output, &r.exit),
        outcome,
        r.decisions.clone(),
    )
}

/// The finding for an execution that left other bytes in the file at `path` (`ours`) than
/// the reference did (`theirs`).
fn file_finding(
    path: &Path,
    ours: &OutputSummary,
    theirs: &OutputSummary,
    r: &Reference<Files>,
    outcome: &ExecutionOutcome,
) -> Finding {
    let mut f = nondeterminism(
        file_message(path, ours, theirs),
        file_details(ours, theirs, &r.exit),
        outcome,
        r.decisions.clone(),
    );
    // Relative to the working directory when inside it: a replay run elsewhere finds
    // the file where the program, given the same arguments, writes it.
    f.output_file = Some(shown_path(path).to_string_lossy().into_owned());
    f
}

/// The message of a finding about the file at `path`.
pub fn file_message(path: &Path, ours: &OutputSummary, theirs: &OutputSummary) -> String {
    format!(
        "what the program writes to {} depends on the schedule: {}",
        shown_path(path).display(),
        first_difference(ours, theirs).describe()
    )
}

/// `path` relative to the working directory when it is inside it.
fn shown_path(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    path.strip_prefix(&cwd)
        .map_or_else(|_| path.to_path_buf(), Path::to_path_buf)
}

/// What a finding says about the two versions of a file besides their first difference.
pub fn file_details(ours: &OutputSummary, theirs: &OutputSummary, exit: &str) -> Vec<String> {
    vec![
        format!(
            "both executions ran to the program's end ({exit}); this one left {} byte(s) in the file, the other (the finding's other schedule) {}",
            ours.len, theirs.len
        ),
        "a program whose files legitimately depend on the schedule (timings, addresses, thread order) is checked with --no-output-check".into(),
    ]
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
        output_file: None,
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

    fn wrote(files: &[(&str, &str)], threads: &[usize]) -> ExecutionOutcome {
        let mut out = ended("same\n", "exit status 0", threads);
        out.written_files = files
            .iter()
            .map(|(p, text)| {
                let summary = OutputSummary::read_all(text.as_bytes()).unwrap();
                (PathBuf::from(p), summary)
            })
            .collect();
        out
    }

    #[test]
    fn a_file_left_with_other_bytes_is_reported_and_names_the_file() {
        let oracle = OutputOracle::default();
        assert!(oracle
            .check(&wrote(&[("/w/out", "total 30\n")], &[0, 1, 2]))
            .is_none());
        let f = oracle
            .check(&wrote(&[("/w/out", "total 10\n")], &[0, 2, 1]))
            .expect("a finding");
        assert_eq!(f.kind, FindingKind::Nondeterminism);
        assert_eq!(f.output_file.as_deref(), Some("/w/out"));
        assert!(
            f.message
                .ends_with("line 1 is `total 10` in this execution and `total 30` in the other"),
            "{}",
            f.message
        );
        let other: Vec<usize> = f.other_schedule.iter().map(|d| d.thread).collect();
        assert_eq!(other, vec![0, 1, 2]);
    }

    #[test]
    fn a_file_only_one_execution_left_is_not_compared() {
        let oracle = OutputOracle::default();
        assert!(oracle
            .check(&wrote(&[("/w/out", "a"), ("/tmp/x1", "1")], &[0]))
            .is_none());
        assert!(oracle
            .check(&wrote(&[("/w/out", "a"), ("/tmp/x2", "2")], &[1]))
            .is_none());
        // The stdout's difference is the one told when both differ.
        let mut both = wrote(&[("/w/out", "b")], &[2]);
        both.stdout = ended("other\n", "exit status 0", &[2]).stdout;
        let f = oracle.check(&both).expect("a finding");
        assert_eq!(f.output_file, None);
        assert!(
            f.message.starts_with("the program's output"),
            "{}",
            f.message
        );
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
