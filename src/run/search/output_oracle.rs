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
use std::sync::{Arc, Mutex};

use crate::detect::output_diff::{first_difference, OutputSummary};
use crate::explore::Decision;
use crate::report::{Finding, FindingKind};
use crate::run::session::ExecutionOutcome;
use crate::run::worker_state::RacyPoints;

/// The execution the others are compared with.
struct Reference<T> {
    /// How it ended ("exit status 0").
    exit: String,
    /// What it wrote (to stdout, or to its files).
    output: T,
    /// Its schedule, and the racy points it ran with (to run it again).
    decisions: Vec<Decision>,
    racy: RacyPoints,
}

/// The files one execution left, by path.
type Files = Vec<(PathBuf, OutputSummary)>;

/// Where an output differed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Channel {
    Stdout,
    File(PathBuf),
}

/// An output that differs from the reference's: reported only once the reference's schedule,
/// run again, writes what it wrote the first time ([`OutputOracle::confirm`]). Else the
/// output depends on something besides the schedule (the time of day through a pipe's
/// timestamps, as pigz's header from stdin; a process id), and is not compared any more.
pub(super) struct Difference {
    /// The finding, when confirmed.
    pub finding: Finding,
    /// The reference's schedule and racy points, to run again.
    pub reference: Vec<Decision>,
    pub reference_racy: RacyPoints,
    /// The reference's exit, and what it wrote where this execution differed.
    exit: String,
    channel: Channel,
    expected: OutputSummary,
}

/// Attempts at confirming one channel that could not run the reference again (it
/// diverged, or was cut) before the channel is no longer compared.
const ATTEMPTS: u32 = 3;

/// The reference executions, once one ran to its end: the first that wrote a stdout mcheck
/// read, and the first that left files the program wrote; and the channels no longer
/// compared.
#[derive(Default)]
pub(super) struct OutputOracle {
    stdout: Mutex<Option<Arc<Reference<OutputSummary>>>>,
    files: Mutex<Option<Arc<Reference<Files>>>>,
    /// Channels not compared any more, and failed attempts per channel.
    dropped: Mutex<Dropped>,
    /// Channels whose difference was confirmed.
    confirmed: Mutex<Vec<Channel>>,
}

/// Channels not compared any more, and attempts at confirming a channel that failed.
type Dropped = (Vec<Channel>, Vec<(Channel, u32)>);

impl Difference {
    /// Whether a difference on the same channel was confirmed already: its output is a
    /// function of the schedule, so this one needs no rerun (a search that goes on after
    /// the first difference, following a race or with --keep-going, would run the
    /// reference again for every execution that differs).
    pub(super) fn channel_confirmed(&self, oracle: &OutputOracle) -> bool {
        (oracle.confirmed.lock().expect("confirmed")).contains(&self.channel)
    }
}

/// Whether `outcome` ran to the program's end (only such executions are compared).
fn ran_to_end(outcome: &ExecutionOutcome) -> bool {
    outcome.exit.is_some()
        && outcome.finding.is_none()
        && outcome.divergence.is_none()
        && !outcome.early_end.step_limit_hit
        && !outcome.early_end.cut_short
        && !outcome.early_end.stopped_early
        && !outcome.early_end.pruned
        && !outcome.early_end.outside_share
        && outcome.abandoned.is_none()
}

impl OutputOracle {
    /// A difference when `outcome` (run with the racy points `racy`) ran to the program's
    /// end with the reference's exit and another stdout, or with a file it wrote holding
    /// other bytes than the reference left in it; the first such execution becomes the
    /// reference.
    pub(super) fn check(
        &self,
        outcome: &ExecutionOutcome,
        racy: &RacyPoints,
    ) -> Option<Difference> {
        if !ran_to_end(outcome) {
            return None;
        }
        let exit = outcome.exit.as_ref()?;
        let compared = |c: &Channel| !self.dropped.lock().expect("dropped").0.contains(c);
        let stdout = (outcome.stdout.as_ref())
            .filter(|_| compared(&Channel::Stdout))
            .and_then(|stdout| {
                let r = compare(&self.stdout, exit, stdout, outcome, racy)?;
                (!r.output.same_as(stdout)).then(|| Difference {
                    finding: stdout_finding(stdout, &r, outcome),
                    reference: r.decisions.clone(),
                    reference_racy: r.racy.clone(),
                    exit: r.exit.clone(),
                    channel: Channel::Stdout,
                    expected: r.output.clone(),
                })
            });
        if stdout.is_some() || outcome.written_files.is_empty() {
            return stdout;
        }
        let r = compare(&self.files, exit, &outcome.written_files, outcome, racy)?;
        // A path only one of the two left is not compared: a name the program chose by
        // its pid or at random is no difference of the schedule's.
        outcome.written_files.iter().find_map(|(path, ours)| {
            let (_, theirs) = r.output.iter().find(|(p, _)| p == path)?;
            let channel = Channel::File(path.clone());
            (!ours.same_as(theirs) && compared(&channel)).then(|| Difference {
                finding: file_finding(path, ours, theirs, &r, outcome),
                reference: r.decisions.clone(),
                reference_racy: r.racy.clone(),
                exit: r.exit.clone(),
                channel,
                expected: theirs.clone(),
            })
        })
    }

    /// Whether `rerun`, the reference's schedule run again, wrote what the reference wrote
    /// where `d` differs: then `d` is a difference of the schedule's. When the rerun wrote
    /// something else, that output is not compared any more, and Err says so (once, for the
    /// user); when it could not show it (it diverged or was cut), after [`ATTEMPTS`] too.
    pub(super) fn confirm(
        &self,
        d: &Difference,
        rerun: &ExecutionOutcome,
    ) -> Result<(), Option<String>> {
        let what = match &d.channel {
            Channel::Stdout => "the program's stdout".to_string(),
            Channel::File(p) => format!("what the program writes to {}", shown_path(p).display()),
        };
        let wrote = match &d.channel {
            Channel::Stdout => rerun.stdout.as_ref(),
            Channel::File(p) => (rerun.written_files.iter())
                .find(|(q, _)| q == p)
                .map(|(_, s)| s),
        };
        let mut dropped = self.dropped.lock().expect("dropped");
        if dropped.0.contains(&d.channel) {
            // Dropped meanwhile by another worker's confirmation, which said so.
            return Err(None);
        }
        if !ran_to_end(rerun) || rerun.exit.as_deref() != Some(d.exit.as_str()) || wrote.is_none() {
            let tries = match dropped.1.iter_mut().find(|(c, _)| *c == d.channel) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    dropped.1.push((d.channel.clone(), 1));
                    1
                }
            };
            if tries < ATTEMPTS {
                return Err(None);
            }
            dropped.0.push(d.channel.clone());
            return Err(Some(format!(
                "{what} differed between executions, but the schedule of the first could not be run again to the same end to confirm it ({ATTEMPTS} tries): it is not compared any more"
            )));
        }
        if wrote.is_some_and(|w| w.same_as(&d.expected)) {
            let mut confirmed = self.confirmed.lock().expect("confirmed");
            if !confirmed.contains(&d.channel) {
                confirmed.push(d.channel.clone());
            }
            return Ok(());
        }
        dropped.0.push(d.channel.clone());
        Err(Some(format!(
            "{what} differs between two runs of the same schedule, so it depends on something besides the schedule (the time, through a pipe's timestamps or a clock mcheck does not control; a process id): it is not compared any more"
        )))
    }
}

/// The reference held in `slot`, when it ended with `exit` (another exit is not compared);
/// `output` of `outcome` becomes the reference when there is none yet. Shared, not copied:
/// every execution that runs to its end asks, and the reference holds a whole schedule.
fn compare<T: Clone>(
    slot: &Mutex<Option<Arc<Reference<T>>>>,
    exit: &str,
    output: &T,
    outcome: &ExecutionOutcome,
    racy: &RacyPoints,
) -> Option<Arc<Reference<T>>> {
    let mut slot = slot.lock().expect("output reference");
    let Some(r) = slot.as_ref() else {
        *slot = Some(Arc::new(Reference {
            exit: exit.to_string(),
            output: output.clone(),
            decisions: outcome.decisions.clone(),
            racy: racy.clone(),
        }));
        return None;
    };
    (r.exit == exit).then(|| Arc::clone(r))
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

    /// The finding of a difference, confirmation aside.
    fn check(o: &OutputOracle, out: &ExecutionOutcome) -> Option<Finding> {
        o.check(out, &RacyPoints::default()).map(|d| d.finding)
    }

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
        assert!(check(&oracle, &ended("total 3\n", "exit status 0", &[0, 1, 2])).is_none());
        assert!(check(&oracle, &ended("total 3\n", "exit status 0", &[0, 2, 1])).is_none());
        let f =
            check(&oracle, &ended("total 2\n", "exit status 0", &[0, 2, 1, 2])).expect("a finding");
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
        assert!(check(&oracle, &cut).is_none());
        // The cut execution did not become the reference.
        assert!(check(&oracle, &ended("full\n", "exit status 0", &[0])).is_none());
        assert!(check(&oracle, &ended("other\n", "exit status 1", &[1])).is_none());
        let mut failed = ended("other\n", "exit status 0", &[1]);
        failed.finding =
            Some(check(&oracle, &ended("x\n", "exit status 0", &[1])).expect("a finding"));
        assert!(check(&oracle, &failed).is_none());
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
        assert!(check(&oracle, &wrote(&[("/w/out", "total 30\n")], &[0, 1, 2])).is_none());
        let f = check(&oracle, &wrote(&[("/w/out", "total 10\n")], &[0, 2, 1])).expect("a finding");
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
        assert!(check(&oracle, &wrote(&[("/w/out", "a"), ("/tmp/x1", "1")], &[0])).is_none());
        assert!(check(&oracle, &wrote(&[("/w/out", "a"), ("/tmp/x2", "2")], &[1])).is_none());
        // The stdout's difference is the one told when both differ.
        let mut both = wrote(&[("/w/out", "b")], &[2]);
        both.stdout = ended("other\n", "exit status 0", &[2]).stdout;
        let f = check(&oracle, &both).expect("a finding");
        assert_eq!(f.output_file, None);
        assert!(
            f.message.starts_with("the program's output"),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_difference_is_confirmed_by_the_reference_run_again_or_dropped() {
        let oracle = OutputOracle::default();
        let none = RacyPoints::default();
        assert!(oracle
            .check(&ended("total 30\n", "exit status 0", &[0]), &none)
            .is_none());
        let d = (oracle.check(&ended("total 10\n", "exit status 0", &[1]), &none))
            .expect("a difference");
        assert!(!d.channel_confirmed(&oracle));
        // The reference's schedule writes the same again: a difference of the schedule's,
        // and later differences of that channel need no rerun.
        assert!(oracle
            .confirm(&d, &ended("total 30\n", "exit status 0", &[0]))
            .is_ok());
        assert!(d.channel_confirmed(&oracle));
        // A rerun that could not end as the reference did proves nothing, a few times.
        let mut cut = ended("total 30\n", "exit status 0", &[0]);
        cut.early_end.cut_short = true;
        assert_eq!(oracle.confirm(&d, &cut), Err(None));
        // It writes something else: the output is not the schedule's; no longer compared.
        let note = oracle.confirm(&d, &ended("total 31\n", "exit status 0", &[0]));
        assert!(note
            .unwrap_err()
            .unwrap()
            .contains("two runs of the same schedule"));
        assert!(oracle
            .check(&ended("total 20\n", "exit status 0", &[2]), &none)
            .is_none());
    }

    #[test]
    fn without_a_read_stdout_nothing_is_compared() {
        let oracle = OutputOracle::default();
        let mut unread = ended("a", "exit status 0", &[0]);
        unread.stdout = None;
        assert!(check(&oracle, &unread).is_none());
        assert!(check(&oracle, &ended("b", "exit status 0", &[0])).is_none());
    }
}
