//! What a search reports: its result, progress, and how findings are told apart.

use std::time::Duration;

use crate::explore::{CacheStats, Coverage};
use crate::report::{Finding, FindingKind};
use crate::run::instrument::sites::PatchStats;

use super::witness::Witness;

/// What a search found.
#[derive(Debug, Default)]
pub struct SearchResult {
    /// Distinct findings, in the order found, each with its best witness.
    pub witnesses: Vec<Witness>,
    /// Executions run.
    pub executions: u64,
    /// The strategy exhausted the space.
    pub complete: bool,
    /// What the strategy covered.
    pub coverage: Coverage,
    /// Why it stopped.
    pub stopped_because: String,
    /// Wall time.
    pub elapsed: Duration,
    /// Total scheduling decisions.
    pub steps: u64,
    /// Executions cut off by `--max-steps` without a livelock finding.
    pub cut_by_step_limit: u64,
    /// Executions cut short without a finding while a thread waited in the kernel for
    /// something mcheck does not control (nothing could wake it).
    pub abandoned: u64,
    /// What mcheck's instrumentation did and met, over all executions.
    pub instrumentation: InstrumentationSummary,
    /// Processes of the program that ran unchecked, or were checked only in part, in some
    /// execution: the space is not exhausted and no bug found is said of the others only.
    pub untraced: Vec<crate::report::UntracedProcess>,
    /// How the search used fork snapshots.
    pub snapshots: SnapshotUse,
    /// What the search saw of the program's state space.
    pub state_space: StateSpace,
    /// Executions the search had to end before their end (time limit, interrupt, memory
    /// limit); their partial schedules report nothing.
    pub cut_short: u64,
    /// What the search used of the machine.
    pub resources: Resources,
    /// Set when an execution met no scheduling choice: executions are deterministic, so
    /// that one execution is the whole search space, whatever the strategy.
    pub nothing_to_explore: Option<NothingToExplore>,
    /// What shards of one split search (`--shard`) add up.
    pub shard: ShardTally,
    /// The execution that found the data race the search went on after (without
    /// `--keep-going`) to find a failure it leads to, when it found none: the search then
    /// ran until its budget was spent or its tree ran out.
    pub followed_race: Option<u64>,
    /// Lock-order cycles seen whose confirmation did not deadlock (not findings).
    pub unconfirmed_cycles: Vec<super::UnconfirmedCycle>,
    /// Directed executions run to confirm lock-order cycles (not in `executions`).
    pub confirmation_executions: u64,
}

/// What mcheck's instrumentation did and met, over all executions.
#[derive(Debug, Default)]
pub struct InstrumentationSummary {
    /// Memory accesses traced for race detection, over all executions.
    pub traced_accesses: u64,
    /// How access sites were instrumented (the most instrumented execution), and how often
    /// threads had to be moved out of generated code.
    pub patch_stats: PatchStats,
    /// Atomic operations inside system libraries met while threads existed, over all
    /// executions, and one library they were in: synchronisation taken in the order it
    /// came, not explored, so the search cannot call the space exhausted.
    pub library_sync: (u64, Option<String>),
    /// Races between plain loads and stores in code without debug information (maybe
    /// relaxed atomics), not reported; and the first, described.
    pub unverified_races: (u64, Option<String>),
    /// Data races were looked for (not `--no-races`).
    pub races_checked: bool,
}

/// How the search used fork snapshots.
#[derive(Debug, Default)]
pub struct SnapshotUse {
    /// Executions started from a fork snapshot instead of exec.
    pub from_snapshots: u64,
    /// Of those, executions started from a snapshot at a branch point of a tree search.
    pub from_branch_snapshots: u64,
    /// Snapshots taken at branch points.
    pub branch_snapshots: u64,
    /// Why fork snapshots were turned off, if they were.
    pub snapshots_off: Option<String>,
}

/// What the search saw of the program's state space.
#[derive(Debug, Default)]
pub struct StateSpace {
    /// Transitions executed, not counting replayed prefixes (the steps of each execution
    /// after the point where it left the path of an earlier one).
    pub transitions: u64,
    /// Of those, the transitions chosen among more than one runnable thread: the states the
    /// search explored (a forced step continues the state before it; Holt's hook count).
    pub states: u64,
    /// What the state cache saw, when it was on.
    pub state_cache: Option<CacheStats>,
    /// Executions ended at a state visited before.
    pub pruned: u64,
}

/// What the search used of the machine.
#[derive(Debug, Default)]
pub struct Resources {
    /// The most memory mcheck held at once (tracer and snapshots, measured about once a
    /// second), in bytes.
    pub memory_peak: u64,
    /// Workers that ran executions: fewer than asked when the program changes files (one
    /// worker then) or when fewer CPUs were allowed.
    pub jobs_used: usize,
}

/// What shards of one split search (`--shard`) add up.
#[derive(Debug, Default)]
pub struct ShardTally {
    /// Runs of a split tree search (`--shard`) that were another shard's: prefixes ended
    /// where no choice was this shard's within the preemption bound, and schedules with too
    /// few choices to split, counted by the first shard that reaches them. Not executions.
    pub runs_outside_share: u64,
    /// Order-independent digest of the schedules of the executions run to their end
    /// ([`schedule_hash`] summed): shards of one search add up to the unsharded search's.
    pub schedule_digest: u64,
}

/// Why one execution covered the whole search space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NothingToExplore {
    /// The program created no thread.
    NoThread,
    /// Threads were created, but never two of them could be scheduled at one point.
    NoChoice,
}

impl NothingToExplore {
    /// The JSON value: `no_thread`, `no_choice`.
    pub fn key(self) -> &'static str {
        match self {
            NothingToExplore::NoThread => "no_thread",
            NothingToExplore::NoChoice => "no_choice",
        }
    }

    /// The reason in words.
    pub fn describe(self) -> &'static str {
        match self {
            NothingToExplore::NoThread => "the program created no thread",
            NothingToExplore::NoChoice => {
                "no scheduling choice arose (never two threads could run at one point)"
            }
        }
    }
}

/// How far a search has come, for a progress display.
#[derive(Debug, Clone, Copy)]
pub struct ProgressReport {
    /// Executions done.
    pub executions: u64,
    /// Distinct findings so far.
    pub findings: usize,
    /// Time since the search began.
    pub elapsed: Duration,
    /// Memory mcheck holds (tracer and snapshots), in bytes, as last measured.
    pub memory: u64,
}

/// Progress callback, called about ten times a second and once at the end.
pub type Progress<'a> = &'a mut dyn FnMut(&ProgressReport);

/// The identity of a finding for deduplication: kind and source locations, not addresses.
pub(super) fn finding_key(f: &Finding) -> (FindingKind, Vec<String>) {
    (f.kind, location_key(&f.locations))
}

/// Source locations as sorted, distinct `file:line` (or `module+offset`) strings.
pub fn location_key(locations: &[crate::report::Frame]) -> Vec<String> {
    let mut locs: Vec<String> = locations
        .iter()
        .map(|l| match (&l.file, l.line) {
            (Some(file), Some(line)) => format!("{file}:{line}"),
            _ => format!(
                "{}+{}",
                l.module.as_deref().unwrap_or("?"),
                l.offset.as_deref().unwrap_or(&l.address)
            ),
        })
        .collect();
    locs.sort();
    locs.dedup();
    locs
}
