//! What an execution and its steps come to: the outcome of a whole execution
//! ([`ExecutionOutcome`], for the search and replay), and, inside the session, what a step,
//! an operation and a run to the next stop produced, and how a process ended.

use nix::sys::signal::Signal;

use crate::explore::Divergence;
use crate::model::{Completion, Footprint, Op};
use crate::report::{Finding, UntracedProcess};
use crate::run::history::TraceStep;
use crate::run::kernel::timeouts::Offer;
use crate::run::locks::LockCycle;
use crate::run::races::AccessKey;

/// How one execution ended.
#[derive(Debug, Default)]
pub struct ExecutionOutcome {
    /// The finding that ended the execution, if any (seed and execution index not yet set).
    pub finding: Option<Finding>,
    /// Data races found in the execution (each pair of instructions once).
    pub races: Vec<Finding>,
    /// A lock-order cycle of the execution that could deadlock, when the execution did not
    /// end in a deadlock: a candidate for confirmation, not a finding.
    pub lock_order: Option<LockCycle>,
    /// Scheduling decisions taken.
    pub steps: u64,
    /// Preemptive switches among them.
    pub preemptions: u64,
    /// Why mcheck stopped the execution before the program ended, if it did.
    pub early_end: EarlyEnd,
    /// Threads created (including main).
    pub threads: usize,
    /// Every scheduling decision, in order (the schedule).
    pub decisions: Vec<crate::explore::Decision>,
    /// Indexes (in `decisions`) of the decisions taken among more than one thread.
    pub choice_steps: Vec<u32>,
    /// The strategy could not follow its plan (replay): the execution was abandoned.
    pub divergence: Option<Divergence>,
    /// The readable trace, when asked for.
    pub trace: Vec<TraceStep>,
    /// What the execution measured of the program and of mcheck's instrumentation.
    pub measures: ExecutionMeasures,
    /// The earlier access of each race in `races`, by index.
    pub race_origins: Vec<crate::run::races::RaceOrigin>,
    /// Stacks captured for `ExecutionConfig::stack_requests`.
    pub captured_stacks: Vec<(AccessKey, Vec<crate::report::Frame>)>,
    /// How the process ended, when it did ("exit status 0", "killed by SIGSEGV").
    pub exit: Option<String>,
    /// A hash of what the program wrote to stderr in this execution, when the capture
    /// could tell.
    pub output_digest: Option<u64>,
    /// What the program wrote to stdout in this execution, when it was read (the output
    /// oracle, `ProgramSetup::read_stdout`) and the capture could tell.
    pub stdout: Option<crate::detect::output_diff::OutputSummary>,
    /// The regular files the program changed, as this execution left them: summarised for
    /// an execution run to its end when files are compared (`ProgramSetup::compare_files`).
    pub written_files: Vec<(
        std::path::PathBuf,
        crate::detect::output_diff::OutputSummary,
    )>,
    /// Why mcheck cut the execution short without a finding (a thread blocked in the
    /// kernel), if it did.
    pub abandoned: Option<String>,
    /// The execution stopped at a busy wait without a scheduling point, whose atomic load
    /// is a yield point from the next execution on: what it was (the execution proves
    /// nothing and reports nothing).
    pub spin_learnt: Option<String>,
    /// The program ended normally while a thread waited forever on a lock whose owner had
    /// exited holding it (no deadlock: the program could end; a note): who and on what.
    pub orphaned_wait: Option<String>,
    /// The execution changed a file or directory (`fs_gate`).
    pub changed_files: bool,
    /// Processes of the program that ran unchecked, or were checked only in part.
    pub untraced: Vec<UntracedProcess>,
}

/// What the execution measured of the program and of mcheck's instrumentation.
#[derive(Debug, Default)]
pub struct ExecutionMeasures {
    /// Memory accesses traced (race detection).
    pub traced_accesses: u64,
    /// Memory pages hashed anew and pages whose hash was kept, at hashed points.
    pub hashed_pages: (u64, u64),
    /// How the access sites of the program were instrumented.
    pub patch_stats: crate::run::instrument::sites::PatchStats,
    /// Atomic operations inside system libraries while threads existed, and the library
    /// of the first (counted by race recording, `races/`).
    pub library_sync: (u64, Option<String>),
    /// Races between plain loads and stores in code without debug information, which may
    /// be relaxed atomics (not reported), and a description of the first.
    pub unverified_races: (u64, Option<String>),
}

/// Why mcheck stopped the execution before the program ended, if it did (none of these
/// is a finding).
#[derive(Debug, Default)]
pub struct EarlyEnd {
    /// The execution hit `max_steps` without ending.
    pub step_limit_hit: bool,
    /// Stopped at `stop_after` decisions (replay --until).
    pub stopped_early: bool,
    /// Ended at a state visited before (`--state-cache`): its subtree was pruned.
    pub pruned: bool,
    /// Ended where it left this machine's share of a split search (`--shard`): a prefix
    /// run, not an execution.
    pub outside_share: bool,
    /// Ended before its end because the search had to stop (time limit, interrupt, memory
    /// limit): the program was killed where it was.
    pub cut_short: bool,
}

/// What a step of the execution came to.
pub(in crate::run) enum Stop {
    /// The chosen thread blocked at once (its operation waits): no step ran.
    Blocked,
    /// The thread ran to its next scheduling point; what it touched natively (None: the
    /// start from exec, which is part of the first step).
    Point(Option<Footprint>),
    /// The execution is over, after the thread touched what it did (None: it ended before
    /// the thread ran).
    End(Box<ExecutionOutcome>, Option<Footprint>),
}

/// What the next scheduling point offers.
pub(in crate::run) enum Choices {
    /// The threads that may be chosen.
    At(Offer),
    /// None: the execution is over.
    End(Box<ExecutionOutcome>),
}

/// An operation the model executed for a thread, and how it completed.
pub(in crate::run) struct Executed {
    /// The operation (None: the thread had none pending).
    pub(super) op: Option<Op>,
    /// Its result, for the thread's registers.
    pub(super) completion: Completion,
}

/// What running a thread to its next stop produced.
pub(in crate::run) enum RunResult {
    /// The thread is at a new scheduling point.
    Point,
    /// The thread exited.
    ThreadExited,
    /// The whole process ended.
    ProcessEnded(ProcessEnd),
    /// A finding (boxed: findings are large).
    Found(Box<Finding>),
    /// The search asked for the execution to end now.
    CutShort,
}

/// How a process of the program (or the whole program) ended.
#[derive(Debug, Clone, Copy)]
pub(in crate::run) enum ProcessEnd {
    Exited(i32),
    Killed(Signal),
    Vanished,
    /// Cut short by mcheck: the running thread sat blocked in the kernel (`abandoned`
    /// says where), which no other thread can change while mcheck holds them stopped.
    Abandoned,
}
