//! The search: executions repeated within the budget (executions, time) by `jobs` worker
//! threads, each a tracer pinned to its own CPU with its own tracee processes. Tree
//! strategies (dfs, icb, the portfolio's icb member) share a [`TreePool`] of subtrees;
//! randomised strategies share an execution index, so no schedule is explored twice. The
//! search stops at the first finding unless `--keep-going`; distinct findings are
//! deduplicated by kind and source locations, keeping the witness with the fewest
//! preemptions together with its schedule.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::config::ExecutionConfig;
use super::instrument::patching::PatchStats;
use super::process::cut::CutSignal;
use super::races::AccessKey;
use super::session::launch::run_execution;
use super::session::ExecutionOutcome;
use super::snapshots::memory_guard::{MemoryGuard, Pressure};
use super::worker_state::{RacyPoints, ShownOutput, WorkerState};
use super::world::file_journal::FileJournal;
use super::world::fs_gate::FsGate;
use crate::explore::shard::{schedule_hash, TreeShard};
use crate::explore::{
    counter_of, default_mix, CacheStats, Coverage, Decision, EndTable, ExecutionSummary, Mix,
    PctScheduler, RacySites, RandomScheduler, ReplayScheduler, Scheduler, SharedStateTable, Slot,
    StateTable, TreePool, TreeSearch,
};
use crate::report::{Finding, FindingKind};
use crate::tracee::{self, cpu, interrupt, watchdog::Watchdog};

/// Which strategy to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// random ×2 + icb + pct(3) interleaved with a reduced dfs; complete when icb or the
    /// reduced dfs is exhausted.
    Portfolio {
        /// Base seed of the randomised members.
        seed: u64,
        /// Preemption cap of the icb member.
        preemption_bound: Option<u32>,
        /// The icb member is reduced by bounded partial-order reduction.
        por: bool,
    },
    /// Exhaustive depth-first search.
    Dfs {
        /// Reduced by dynamic partial-order reduction.
        por: bool,
    },
    /// Iterative preemption bounding.
    Icb {
        /// Preemption cap.
        preemption_bound: Option<u32>,
        /// Reduced by bounded partial-order reduction.
        por: bool,
    },
    /// PCT with bug depth `depth`.
    Pct {
        /// Bug depth.
        depth: u32,
        /// Base seed.
        seed: u64,
    },
    /// Random choices.
    Random {
        /// Base seed.
        seed: u64,
    },
}

impl Plan {
    /// The strategy's name.
    pub fn name(&self) -> &'static str {
        match self {
            Plan::Portfolio { .. } => "portfolio",
            Plan::Dfs { .. } => "dfs",
            Plan::Icb { .. } => "icb",
            Plan::Pct { .. } => "pct",
            Plan::Random { .. } => "random",
        }
    }

    fn tree_cap(&self) -> Option<Option<u32>> {
        match *self {
            Plan::Portfolio {
                preemption_bound, ..
            } => Some(Some(preemption_bound.unwrap_or(u32::MAX))),
            Plan::Icb {
                preemption_bound, ..
            } => Some(Some(preemption_bound.unwrap_or(u32::MAX))),
            Plan::Dfs { .. } => Some(None),
            _ => None,
        }
    }

    /// Whether the tree search is reduced by partial-order reduction (dfs, or icb alone or
    /// in the portfolio by bounded partial-order reduction).
    fn por(&self) -> bool {
        matches!(
            self,
            Plan::Dfs { por: true }
                | Plan::Icb { por: true, .. }
                | Plan::Portfolio { por: true, .. }
        )
    }

    /// The randomised members and the cycle of slots of one worker.
    fn mix(&self) -> Mix {
        match *self {
            Plan::Portfolio { seed, .. } => default_mix(seed),
            Plan::Dfs { .. } | Plan::Icb { .. } => Mix {
                members: vec![],
                cycle: vec![Slot::Tree],
            },
            Plan::Pct { depth, seed } => Mix {
                members: vec![(
                    Box::new(PctScheduler::new(depth, seed)),
                    format!("pct(depth {depth})"),
                )],
                cycle: vec![Slot::Randomized(0)],
            },
            Plan::Random { seed } => Mix {
                members: vec![(Box::new(RandomScheduler::new(seed)), "random".into())],
                cycle: vec![Slot::Randomized(0)],
            },
        }
    }
}

/// Budget and behaviour of a search.
#[derive(Clone, Debug)]
pub struct SearchConfig {
    /// How to run the program.
    pub execution: ExecutionConfig,
    /// The strategy.
    pub plan: Plan,
    /// Worker threads.
    pub jobs: usize,
    /// Most executions.
    pub max_executions: u64,
    /// When set, the portfolio's reduced tree may go on alone past `max_executions` until
    /// it has run this many executions itself (the default budget: see `--max-executions`).
    pub proof_budget: Option<u64>,
    /// Wall-clock budget.
    pub time_limit: Option<Duration>,
    /// Most memory mcheck may hold (its own and its snapshots'), in bytes.
    pub max_memory: u64,
    /// Collect every distinct finding instead of stopping at the first.
    pub keep_going: bool,
    /// Prune dfs with a table of visited states (`--state-cache`).
    pub state_cache: bool,
    /// This machine's part of a tree search split among machines (`--shard`; unreduced
    /// dfs and icb, and the portfolio's icb member).
    pub shard: Option<TreeShard>,
}

/// A finding with the schedule that shows it.
#[derive(Debug, Clone)]
pub struct Witness {
    /// The finding.
    pub finding: Finding,
    /// The scheduling decisions of the witness execution.
    pub decisions: Vec<Decision>,
    /// The strategy (and member) that found it.
    pub strategy: String,
    /// What was made scheduling points in that execution (None: `--preempt-on-races` was
    /// off for it).
    pub racy: Option<RacyPoints>,
    /// Addresses known to hold atomics when it ran.
    pub atomic_addresses: Vec<u64>,
}

/// Runs the schedule of `outcome` once more to take the stack of the earlier access of each
/// race (only the later one is at hand when a race is found), and puts it in the report.
pub fn attach_earlier_stacks(
    cfg: &ExecutionConfig,
    outcome: &mut ExecutionOutcome,
    racy_before: &RacyPoints,
    state: &mut WorkerState,
) -> Result<()> {
    let requests: Vec<_> = (outcome.race_origins.iter())
        .flat_map(|o| std::iter::once(o.earlier).chain(o.later))
        .collect();
    let mut cfg = ExecutionConfig {
        stack_requests: requests,
        ..cfg.clone()
    };
    cfg.instrument.stacks_in_calls = outcome.race_origins.iter().any(|o| o.in_call);
    let Some(again) = rerun(&cfg, &outcome.decisions, racy_before, state)? else {
        return Ok(());
    };
    let captured = |key: &AccessKey| {
        (again.captured_stacks.iter())
            .find(|(k, s)| k == key && !s.is_empty())
            .map(|(_, s)| s.clone())
    };
    for o in &outcome.race_origins {
        let Some(f) = outcome.races.get_mut(o.index) else {
            continue;
        };
        // The report lists the later access first, the earlier second.
        let sides = [(0, o.later), (1, Some(o.earlier))];
        for (slot, key) in sides {
            let (Some(key), Some(report)) = (key, f.threads.get_mut(slot)) else {
                continue;
            };
            if let Some(stack) = captured(&key) {
                report.stack = stack;
            }
        }
    }
    Ok(())
}

/// Runs the schedule `decisions` again with what the worker knows now, with the same racy
/// addresses as scheduling points as the first time. None when it no longer follows.
fn rerun(
    cfg: &ExecutionConfig,
    decisions: &[Decision],
    racy_before: &RacyPoints,
    state: &mut WorkerState,
) -> Result<Option<ExecutionOutcome>> {
    let learnt = state.replace_racy_points(racy_before);
    let mut again = ReplayScheduler::new(decisions.to_vec());
    again.begin_execution(0);
    state.quiet_rerun = true;
    let outcome = run_execution(cfg, &mut again, state);
    state.quiet_rerun = false;
    state.add_racy_points(&learnt);
    let outcome = outcome?;
    Ok(outcome.divergence.is_none().then_some(outcome))
}

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
    /// Executions started from a fork snapshot instead of exec.
    pub from_snapshots: u64,
    /// Of those, executions started from a snapshot at a branch point of a tree search.
    pub from_branch_snapshots: u64,
    /// Snapshots taken at branch points.
    pub branch_snapshots: u64,
    /// Why fork snapshots were turned off, if they were.
    pub snapshots_off: Option<String>,
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
    /// Executions the search had to end before their end (time limit, interrupt, memory
    /// limit); their partial schedules report nothing.
    pub cut_short: u64,
    /// The most memory mcheck held at once (tracer and snapshots, measured about once a
    /// second), in bytes.
    pub memory_peak: u64,
    /// Set when an execution met no scheduling choice: executions are deterministic, so
    /// that one execution is the whole search space, whatever the strategy.
    pub nothing_to_explore: Option<NothingToExplore>,
    /// Workers that ran executions: fewer than asked when the program changes files (one
    /// worker then) or when fewer CPUs were allowed.
    pub jobs_used: usize,
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
fn finding_key(f: &Finding) -> (FindingKind, Vec<String>) {
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

/// Runs exactly one execution under `sched` (replay), with the same setup as a search.
/// `racy` is what was made scheduling points (`--preempt-on-races`)
/// and `atomic_addresses` those known to hold atomics when the schedule was recorded.
pub fn run_single(
    cfg: &ExecutionConfig,
    sched: &mut dyn Scheduler,
    racy: &RacyPoints,
    atomic_addresses: &[u64],
) -> Result<ExecutionOutcome> {
    let (mut worker, _tick) = replay_worker(racy, atomic_addresses)?;
    sched.begin_execution(0);
    let mut outcome = run_execution(cfg, sched, &mut worker)?;
    if !outcome.races.is_empty() && outcome.divergence.is_none() && !outcome.stopped_early {
        let no_trace = ExecutionConfig {
            trace: false,
            ..cfg.clone()
        };
        attach_earlier_stacks(&no_trace, &mut outcome, racy, &mut worker)?;
    }
    Ok(outcome)
}

/// The worker of a single replayed execution, on the idlest CPU with its watchdog ticking
/// (keep the watchdog alive for the execution): it knows the racy points and atomic
/// addresses the schedule was recorded with.
pub(super) fn replay_worker(
    racy: &RacyPoints,
    atomic_addresses: &[u64],
) -> Result<(WorkerState, Watchdog)> {
    cpu::pin_current_thread(cpu::idlest_cpus(1)[0])?;
    let tick = Watchdog::start(Duration::from_millis(100))?;
    let mut worker = WorkerState::default();
    worker.add_racy_points(racy);
    worker
        .atomic_addresses
        .extend(atomic_addresses.iter().copied());
    Ok((worker, tick))
}

/// The instructions at which the execution of `sched` finds its data races (their later
/// accesses), or None when it does not follow the schedule: a replay under gdb keeps them
/// on breakpoints so that it stops at them.
pub fn race_sites(
    cfg: &ExecutionConfig,
    sched: &mut dyn Scheduler,
    racy: &RacyPoints,
    atomic_addresses: &[u64],
) -> Result<Option<Vec<u64>>> {
    let (mut worker, _tick) = replay_worker(racy, atomic_addresses)?;
    sched.begin_execution(0);
    let outcome = run_execution(cfg, sched, &mut worker)?;
    if outcome.divergence.is_some() || outcome.stopped_early {
        return Ok(None);
    }
    let mut sites: Vec<u64> = (outcome.race_origins.iter())
        .filter_map(|o| o.later.map(|key| key.1))
        .collect();
    sites.sort_unstable();
    sites.dedup();
    Ok(Some(sites))
}

#[derive(Default)]
struct Findings {
    witnesses: Vec<Witness>,
    index_of: HashMap<(FindingKind, Vec<String>), usize>,
    stopped_because: Option<String>,
}

/// Executions a search without `--keep-going` goes on for after a data race, looking for the
/// failure the race causes in the refined tree (counted from the race, and again from each
/// refinement round it starts), before it stops at the race.
pub const RACE_FOLLOW_UP: u64 = 100;

/// The tree of the systematic member and the racy sites that shaped it: a new tree (a new
/// pool) per refinement round (see [`RacySites`]).
struct Round {
    /// 0 for the first tree, then one more per refinement round.
    number: u32,
    /// The tree of this round.
    pool: Arc<TreePool>,
    /// The portfolio's reduced tree (dfs with partial-order reduction) of this round.
    reduced: Option<Arc<TreePool>>,
    /// What this round's tree schedules at besides synchronisation: the racy sites
    /// included in it, at the addresses found racy when it began.
    points: RacyPoints,
    /// Executions of the trees of earlier rounds.
    earlier_executions: u64,
}

/// The racy sites and addresses found by the search (every plan), and the sites included
/// in the tree.
struct Racy {
    sites: RacySites,
    addresses: std::collections::BTreeSet<u64>,
}

/// State shared by the workers.
struct Shared<'a> {
    cfg: &'a SearchConfig,
    /// The systematic member's tree (tree plans only).
    tree: Option<Mutex<Round>>,
    /// The preemption cap of the tree (tree plans only).
    tree_cap: Option<Option<u32>>,
    /// Racy sites found become scheduling points of the tree (refinement rounds).
    refine: bool,
    /// Racy sites and addresses found.
    racy: Mutex<Racy>,
    /// Executions done when the search began following a race without `--keep-going`
    /// (0: not following).
    following_since: AtomicU64,
    started_at: Instant,
    reserved: AtomicU64,
    done: AtomicU64,
    steps: AtomicU64,
    cut: AtomicU64,
    /// The note about an abandoned execution was printed.
    said_abandoned: std::sync::atomic::AtomicBool,
    /// Whether the first execution has ended (the other workers wait for it).
    first_ended: (Mutex<bool>, std::sync::Condvar),
    /// The first execution changed files: the search runs on one worker.
    changes_files: std::sync::atomic::AtomicBool,
    traced: AtomicU64,
    patch_stats: std::sync::Mutex<PatchStats>,
    library_sync: std::sync::Mutex<(u64, Option<String>)>,
    unverified_races: std::sync::Mutex<(u64, Option<String>)>,
    from_snapshots: AtomicU64,
    from_branch: AtomicU64,
    branches: AtomicU64,
    snapshots_off: Mutex<Option<String>>,
    next_random: AtomicU64,
    stop: AtomicBool,
    closed_early: AtomicBool,
    findings: Mutex<Findings>,
    error: Mutex<Option<anyhow::Error>>,
    transitions: AtomicU64,
    states: AtomicU64,
    pages_hashed: AtomicU64,
    pages_reused: AtomicU64,
    pruned: AtomicU64,
    /// The table of visited states (`--state-cache`).
    cache: Option<SharedStateTable>,
    /// The first result at each final counter (`--state-cache`).
    ends: Mutex<EndTable<Vec<Decision>>>,
    /// Raised to end the running executions at once.
    cut_signal: CutSignal,
    /// One execution at a time changes files.
    fs_gate: FsGate,
    /// The program's file changes, undone between executions (`file_journal`).
    journal: Arc<Mutex<FileJournal>>,
    /// Executions cut short.
    cut_short: AtomicU64,
    /// Workers should drop their branch snapshots (memory pressure).
    shed: AtomicBool,
    /// An execution met no scheduling choice.
    nothing_to_explore: Mutex<Option<NothingToExplore>>,
    /// Runs that were another shard's.
    outside_share: AtomicU64,
    /// Sum of the schedule hashes of the executions run to their end.
    digest: AtomicU64,
    /// Executions of the portfolio's reduced tree so far (all rounds).
    reduced_runs: AtomicU64,
    /// Reduced-tree slots that found no free work (another worker held it), to be given
    /// back to the reduced tree by the worker that holds it.
    reduced_owed: AtomicU64,
}

impl Shared<'_> {
    /// The current round: its number, the tree of `member` (0: dfs/icb, 1: the portfolio's
    /// reduced tree) and its racy points.
    fn round(&self, member: usize) -> Option<(u32, Arc<TreePool>, RacyPoints)> {
        let r = self.tree.as_ref()?.lock().expect("round");
        let pool = if member == 0 {
            r.pool.clone()
        } else {
            r.reduced.clone()?
        };
        Some((r.number, pool, r.points.clone()))
    }

    /// Notes the racy sites and addresses a worker knows; begins a refinement round when
    /// some site is not a scheduling point of the current tree (with refinement on).
    fn note_races(&self, state: &WorkerState) {
        let mut racy = self.racy.lock().expect("racy");
        racy.addresses.extend(state.racy_addresses.iter().copied());
        if !racy.sites.note(state.racy_sites.iter().copied()) {
            return;
        }
        let Some(tree) = &self.tree else { return };
        let sites = racy.sites.begin_round();
        let mut r = tree.lock().expect("round");
        let pool = Arc::new(TreePool::new(self.tree_cap.expect("tree plans have a cap")));
        let old = std::mem::replace(&mut r.pool, pool);
        r.earlier_executions += old.coverage(false).systematic_executions;
        old.close();
        if let Some(old) = r.reduced.replace(Arc::new(TreePool::new(None))) {
            r.earlier_executions += old.coverage(false).systematic_executions;
            old.close();
        } else {
            r.reduced = None;
        }
        r.number += 1;
        r.points = RacyPoints {
            addresses: racy.addresses.iter().copied().collect(),
            sites,
        };
        if self.stop.load(Ordering::SeqCst) {
            // The search has stopped: the new trees get no work.
            r.pool.close();
            if let Some(p) = &r.reduced {
                p.close();
            }
            return;
        }
        eprintln!(
            "mcheck: note: refinement round {}: {} racy access site(s) become scheduling points of the systematic search",
            r.number,
            r.points.sites.len()
        );
        let following = self.following_since.load(Ordering::SeqCst);
        if following > 0 {
            // A new round: the race follow-up starts over.
            self.following_since
                .store(self.done.load(Ordering::SeqCst).max(1), Ordering::SeqCst);
        }
    }

    /// The coverage of the systematic member, qualified by the racy sites found.
    fn coverage(&self) -> Coverage {
        let racy = self.racy.lock().expect("racy");
        let Some(tree) = &self.tree else {
            return racy.sites.qualify(Coverage::default());
        };
        let r = tree.lock().expect("round");
        let closed_early = self.closed_early.load(Ordering::SeqCst);
        let mut tree_coverage = r.pool.coverage(closed_early);
        // icb (alone or in the portfolio) reduced by bounded partial-order reduction,
        // which a split search does without.
        tree_coverage.up_to_independent_steps = self.cfg.plan.por()
            && self.cfg.shard.is_none()
            && !matches!(self.cfg.plan, Plan::Dfs { .. });
        if let Some(reduced) = &r.reduced {
            // Either tree running out covers every schedule.
            let d = reduced.coverage(closed_early);
            tree_coverage.exhausted |= d.exhausted;
            // The reduced tree has no preemption bound.
            tree_coverage.beyond_preemption_bound &= !d.exhausted;
            tree_coverage.synchronisation_exhausted |= d.synchronisation_exhausted;
            tree_coverage.systematic_executions += d.systematic_executions;
        }
        let mut c = (racy.sites).qualify(tree_coverage);
        c.systematic_executions += r.earlier_executions;
        c
    }

    /// How far the search has come.
    fn report(&self, guard: &MemoryGuard) -> ProgressReport {
        ProgressReport {
            executions: self.done.load(Ordering::Relaxed),
            findings: self.findings.lock().expect("lock").witnesses.len(),
            elapsed: self.started_at.elapsed(),
            memory: guard.last,
        }
    }

    /// Stops the search now: the running executions are cut short too.
    fn stop_now(&self, why: String) {
        self.stop_because(why);
        self.cut_signal.raise();
    }

    /// Counts an execution that was cut short (it reports nothing: its schedule is partial).
    fn record_cut(&self, outcome: &ExecutionOutcome) {
        self.steps.fetch_add(outcome.steps, Ordering::Relaxed);
        self.traced
            .fetch_add(outcome.traced_accesses, Ordering::Relaxed);
        self.cut_short.fetch_add(1, Ordering::Relaxed);
        self.done.fetch_add(1, Ordering::SeqCst);
    }

    /// Looks at the clock, the signals and the memory (from the main thread, ten times a
    /// second): stops the search, or sheds caches, when it must.
    fn watch(&self, guard: &mut MemoryGuard) {
        if let Some(sig) = interrupt::received() {
            self.stop_now(format!("interrupted by {sig}"));
        }
        if (self.cfg.time_limit).is_some_and(|l| self.started_at.elapsed() >= l) {
            self.stop_now("time limit reached".into());
        }
        match guard.check() {
            Pressure::None => {}
            Pressure::Shed(usage) => {
                eprintln!(
                    "mcheck: note: memory use {} is past three quarters of --max-memory {} MiB: branch snapshots and the state cache are dropped",
                    usage.describe(),
                    self.cfg.max_memory >> 20
                );
                self.shed.store(true, Ordering::SeqCst);
                if let Some(c) = &self.cache {
                    c.lock().expect("state table").forget();
                }
                self.ends.lock().expect("lock").forget();
            }
            Pressure::Stop(usage) => {
                eprintln!(
                    "mcheck: note: memory use {} reached --max-memory {} MiB: the search stops here",
                    usage.describe(),
                    self.cfg.max_memory >> 20
                );
                self.stop_now("memory limit reached".into());
            }
        }
    }

    /// Whether the search has stopped.
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Takes one slot owed to the reduced tree, if any.
    fn repay_reduced(&self) -> bool {
        self.reduced_owed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Whether the portfolio's reduced tree may run past the execution budget: with the
    /// default budget (`proof_budget`), while it has had fewer executions than that and is
    /// not finished, so that the default command proves a program whose reduced tree fits.
    fn proof_may_go_on(&self) -> bool {
        let Some(budget) = self.cfg.proof_budget else {
            return false;
        };
        // Never past two budgets in all (the reduced tree has about half of the first).
        let most = budget.saturating_mul(2);
        if self.stopped()
            || self.reduced_runs.load(Ordering::SeqCst) >= budget
            || self.reserved.load(Ordering::SeqCst) > most
        {
            return false;
        }
        self.round(1)
            .is_some_and(|(_, pool, _)| !pool.is_finished())
    }

    fn stop_because(&self, why: String) {
        let mut f = self.findings.lock().expect("lock");
        f.stopped_because.get_or_insert(why);
        self.stop.store(true, Ordering::SeqCst);
        if let Some(tree) = &self.tree {
            let r = tree.lock().expect("round");
            let finished =
                r.pool.is_finished() || r.reduced.as_ref().is_some_and(|p| p.is_finished());
            if !finished {
                self.closed_early.store(true, Ordering::SeqCst);
            }
            r.pool.close();
            if let Some(p) = &r.reduced {
                p.close();
            }
        }
    }

    /// With the state cache: a `nondeterminism` finding when an execution that took the
    /// same steps as an earlier one (the same final per-thread step counter) ended with
    /// another exit status or stderr output.
    fn different_end(&self, outcome: &ExecutionOutcome) -> Option<Finding> {
        self.cache.as_ref()?;
        let exit = outcome.exit.as_ref()?;
        let counter = counter_of(outcome.decisions.iter().map(|d| d.thread));
        let result = format!("{exit}, stderr output #{:016x}", outcome.output_digest);
        let mut ends = self.ends.lock().expect("lock");
        let (earlier, schedule) =
            ends.record(&counter, result.clone(), outcome.decisions.clone())?;
        let threads = |d: &[Decision]| {
            d.iter()
                .map(|d| format!("T{}", d.thread))
                .collect::<Vec<_>>()
                .join(" ")
        };
        Some(Finding {
            kind: FindingKind::Nondeterminism,
            message: format!(
                "the program's result depends on the schedule: the same steps in two orders end with {earlier} and with {result}"
            ),
            details: vec![
                format!(
                    "every thread took the same number of steps in both executions (per-thread step counter {counter:?})"
                ),
                format!("this schedule: {}", threads(&outcome.decisions)),
                format!("the earlier schedule: {}", threads(&schedule)),
            ],
            locations: Vec::new(),
            threads: Vec::new(),
            preemptions: outcome.preemptions,
            seed: 0,
            execution: 0,
            steps: outcome.steps,
            strategy: String::new(),
            schedule: None,
            cycle: Vec::new(),
            other_schedule: schedule,
        })
    }

    fn record(
        &self,
        outcome: ExecutionOutcome,
        seed: u64,
        strategy: String,
        racy: Option<RacyPoints>,
        atomic_addresses: Vec<u64>,
    ) {
        self.steps.fetch_add(outcome.steps, Ordering::Relaxed);
        self.traced
            .fetch_add(outcome.traced_accesses, Ordering::Relaxed);
        self.patch_stats
            .lock()
            .expect("lock")
            .merge(&outcome.patch_stats);
        if outcome.unverified_races.0 > 0 {
            let mut u = self.unverified_races.lock().expect("lock");
            u.0 += outcome.unverified_races.0;
            if u.1.is_none() {
                u.1.clone_from(&outcome.unverified_races.1);
            }
        }
        if outcome.library_sync.0 > 0 {
            let mut l = self.library_sync.lock().expect("lock");
            l.0 += outcome.library_sync.0;
            if l.1.is_none() {
                l.1.clone_from(&outcome.library_sync.1);
            }
        }
        if let Some(why) = &outcome.abandoned {
            if !self.said_abandoned.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "mcheck: note: an execution was cut short without a finding: {why}; mcheck does not know what would have woken it"
                );
            }
        }
        if outcome.step_limit_hit && outcome.finding.is_none() {
            self.cut.fetch_add(1, Ordering::Relaxed);
        }
        let index = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(d) = outcome.divergence {
            self.stop_because(format!(
                "the program did not repeat its behaviour on a replayed schedule prefix ({d})"
            ));
            return;
        }
        let different_end = self.different_end(&outcome);
        // The failure that ended the execution first, then the races (which may explain it).
        let found: Vec<Finding> = (outcome.finding.into_iter())
            .chain(outcome.races)
            .chain(different_end)
            .collect();
        if found.is_empty() {
            return;
        }
        // Only data races: without --keep-going, a search that refines its tree by races goes
        // on to find the failure they cause (within RACE_FOLLOW_UP executions).
        let only_races = found.iter().all(|f| f.kind == FindingKind::DataRace);
        let mut all = self.findings.lock().expect("lock");
        for mut f in found {
            f.seed = seed;
            f.execution = index;
            f.preemptions = outcome.preemptions;
            f.steps = outcome.steps;
            let key = finding_key(&f);
            let witness = Witness {
                finding: f,
                decisions: outcome.decisions.clone(),
                strategy: strategy.clone(),
                racy: racy.clone(),
                atomic_addresses: atomic_addresses.clone(),
            };
            match all.index_of.get(&key) {
                Some(&i) => {
                    if witness.finding.preemptions < all.witnesses[i].finding.preemptions {
                        all.witnesses[i] = witness;
                    }
                }
                None => {
                    let n = all.witnesses.len();
                    all.index_of.insert(key, n);
                    all.witnesses.push(witness);
                }
            }
        }
        drop(all);
        if self.cfg.keep_going {
            return;
        }
        if only_races && self.refine {
            let _ = (self.following_since).compare_exchange(
                0,
                index,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        } else {
            self.stop_because("stopped at the first finding".into());
        }
    }

    /// Stops a search that has followed its races for [`RACE_FOLLOW_UP`] executions
    /// without finding a failure.
    fn follow_up_spent(&self) -> bool {
        let since = self.following_since.load(Ordering::SeqCst);
        if since == 0 || self.done.load(Ordering::SeqCst) < since + RACE_FOLLOW_UP {
            return false;
        }
        self.stop_because("race follow-up budget spent".into());
        true
    }
}

/// Runs the search.
pub fn search(cfg: &SearchConfig, progress: Progress<'_>) -> Result<SearchResult> {
    // Racy sites become scheduling points of the tree search (a new tree per round) when
    // races are detected and `--preempt-on-races` is on.
    let refine = cfg.plan.tree_cap().is_some()
        && cfg.execution.instrument.races
        && cfg.execution.instrument.preempt_on_races;
    // The portfolio's reduced member (partial-order reduction needs race tracing).
    let reduced_member =
        cfg.execution.instrument.races && cfg.plan.mix().cycle.contains(&Slot::ReducedTree);
    let shared = Shared {
        cfg,
        tree: cfg.plan.tree_cap().map(|cap| {
            Mutex::new(Round {
                number: 0,
                pool: Arc::new(TreePool::new(cap)),
                reduced: reduced_member.then(|| Arc::new(TreePool::new(None))),
                points: RacyPoints::default(),
                earlier_executions: 0,
            })
        }),
        racy: Mutex::new(Racy {
            sites: RacySites::new(refine),
            addresses: Default::default(),
        }),
        tree_cap: cfg.plan.tree_cap(),
        refine,
        following_since: AtomicU64::new(0),
        started_at: Instant::now(),
        reserved: AtomicU64::new(0),
        done: AtomicU64::new(0),
        steps: AtomicU64::new(0),
        cut: AtomicU64::new(0),
        said_abandoned: Default::default(),
        first_ended: Default::default(),
        changes_files: Default::default(),
        traced: AtomicU64::new(0),
        patch_stats: Default::default(),
        library_sync: Default::default(),
        unverified_races: Default::default(),
        from_snapshots: AtomicU64::new(0),
        from_branch: AtomicU64::new(0),
        branches: AtomicU64::new(0),
        snapshots_off: Mutex::new(None),
        next_random: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        closed_early: AtomicBool::new(false),
        findings: Mutex::new(Findings::default()),
        error: Mutex::new(None),
        transitions: AtomicU64::new(0),
        states: AtomicU64::new(0),
        pages_hashed: AtomicU64::new(0),
        pages_reused: AtomicU64::new(0),
        pruned: AtomicU64::new(0),
        cache: (cfg.execution.snapshots.state_cache && matches!(cfg.plan, Plan::Dfs { .. }))
            .then(|| Arc::new(Mutex::new(StateTable::default()))),
        ends: Mutex::new(EndTable::default()),
        cut_signal: CutSignal::default(),
        fs_gate: FsGate::default(),
        journal: Default::default(),
        cut_short: AtomicU64::new(0),
        shed: AtomicBool::new(false),
        nothing_to_explore: Mutex::new(None),
        outside_share: AtomicU64::new(0),
        digest: AtomicU64::new(0),
        reduced_runs: AtomicU64::new(0),
        reduced_owed: AtomicU64::new(0),
    };
    // Files the program writes through descriptors it was started with (stdout redirected
    // to a file) are the program's output: each execution writes them from where a single
    // run would, and the search leaves them as the first complete execution did.
    let outputs = tracee::files::user_files()
        .iter()
        .filter(|f| !(f.fd == 1 && cfg.execution.program.quiet))
        .filter_map(|f| f.output.as_deref());
    let writes_output = {
        let mut journal = shared.journal.lock().expect("file journal");
        journal.note_outputs(outputs);
        journal.has_outputs()
    };
    // Every execution writes the output file: one at a time (see `worker`).
    shared
        .changes_files
        .fetch_or(writes_output, Ordering::SeqCst);
    let mut guard = MemoryGuard::new(cfg.max_memory);
    // The least loaded CPUs mcheck may use, one per worker (reused when fewer).
    let cpus = cpu::idlest_cpus(cfg.jobs.max(1));
    let (alive, finished) = crossbeam_channel::bounded::<()>(0);
    std::thread::scope(|s| {
        for (w, &cpu) in cpus.iter().enumerate() {
            let shared = &shared;
            let alive = alive.clone();
            std::thread::Builder::new()
                .name(format!("mcheck-worker-{w}"))
                .spawn_scoped(s, move || {
                    if let Err(e) = worker(shared, w, cpu) {
                        shared.error.lock().expect("lock").get_or_insert(e);
                        shared.stop_because("internal error".into());
                    }
                    // Dropping the sender tells the main thread this worker is done.
                    drop(alive);
                })
                .expect("spawn worker thread");
        }
        drop(alive);
        // Wake up every 100 ms (limits, signals, memory, progress), and at once when the
        // last worker ends.
        while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
            finished.recv_timeout(Duration::from_millis(100))
        {
            shared.watch(&mut guard);
            progress(&shared.report(&guard));
        }
    });
    // The files as the first execution that ran to its end left them (also after an error).
    shared.journal.lock().expect("file journal").finish();
    tracee::files::advance_user_outputs(cfg.execution.program.quiet);
    if let Some(e) = shared.error.lock().expect("lock").take() {
        return Err(e);
    }
    let coverage = shared.coverage();
    let findings = shared.findings.into_inner().expect("lock");
    let executions = shared.done.load(Ordering::SeqCst);
    let snapshots_off = shared.snapshots_off.lock().expect("lock").take();
    let patch_stats = std::mem::take(&mut *shared.patch_stats.lock().expect("lock"));
    let library_sync = std::mem::take(&mut *shared.library_sync.lock().expect("lock"));
    let unverified_races = std::mem::take(&mut *shared.unverified_races.lock().expect("lock"));
    let nothing_to_explore = *shared.nothing_to_explore.lock().expect("lock");
    let mut coverage = coverage;
    if nothing_to_explore.is_some() {
        // One execution covers every order of synchronisation; the orders of racy
        // accesses found in it are not explored (without --preempt-on-races).
        coverage.synchronisation_exhausted = true;
        coverage.exhausted = coverage.racy_sites_not_explored.is_empty();
    }
    // Synchronisation inside system libraries was not explored: no claim of exhaustion.
    if library_sync.0 > 0 {
        coverage.exhausted = false;
    }
    // A tree of synchronisation points covers every behaviour only when the program's
    // plain accesses do not race (CHESS): without race detection nobody knows, and races
    // taken for relaxed atomics (plain accesses without debug information) were not
    // explored as racy sites. One execution that had nothing to explore covers every order.
    let races_checked = cfg.execution.instrument.races;
    if nothing_to_explore.is_none() && (!races_checked || unverified_races.0 > 0) {
        coverage.exhausted = false;
    }
    // Executions cut short at --max-steps (under an unfair schedule) were not explored to
    // their ends: the tree ran out only up to that depth.
    if shared.cut.load(Ordering::SeqCst) > 0 {
        coverage.exhausted = false;
    }
    let complete = coverage.exhausted;
    let stopped_because = (findings.stopped_because)
        .map(|why| {
            // The tree ran out, but it did not hold the orders of library atomics or of
            // racy accesses.
            if !complete && why == "search space exhausted" {
                "no schedule left to explore".to_string()
            } else {
                why
            }
        })
        .unwrap_or_else(|| {
            if complete {
                "search space exhausted".into()
            } else {
                "execution budget spent".into()
            }
        });
    progress(&ProgressReport {
        executions,
        findings: findings.witnesses.len(),
        elapsed: shared.started_at.elapsed(),
        memory: guard.peak,
    });
    Ok(SearchResult {
        witnesses: findings.witnesses,
        executions,
        complete,
        coverage,
        stopped_because,
        elapsed: shared.started_at.elapsed(),
        steps: shared.steps.load(Ordering::SeqCst),
        cut_by_step_limit: shared.cut.load(Ordering::SeqCst),
        traced_accesses: shared.traced.load(Ordering::SeqCst),
        patch_stats,
        library_sync,
        unverified_races,
        races_checked,
        from_snapshots: shared.from_snapshots.load(Ordering::SeqCst),
        from_branch_snapshots: shared.from_branch.load(Ordering::SeqCst),
        branch_snapshots: shared.branches.load(Ordering::SeqCst),
        snapshots_off,
        transitions: shared.transitions.load(Ordering::SeqCst),
        states: shared.states.load(Ordering::SeqCst),
        state_cache: shared.cache.as_ref().map(|c| CacheStats {
            pages_hashed: shared.pages_hashed.load(Ordering::SeqCst),
            pages_reused: shared.pages_reused.load(Ordering::SeqCst),
            ..c.lock().expect("state table").stats()
        }),
        pruned: shared.pruned.load(Ordering::SeqCst),
        cut_short: shared.cut_short.load(Ordering::SeqCst),
        memory_peak: guard.peak,
        nothing_to_explore,
        jobs_used: if shared.changes_files.load(Ordering::SeqCst) {
            1
        } else {
            cpus.len()
        },
        runs_outside_share: shared.outside_share.load(Ordering::SeqCst),
        schedule_digest: shared.digest.load(Ordering::SeqCst),
    })
}

/// A worker's subtree of a tree member: the search, its executions, the round it belongs to
/// and that round's tree.
type HeldTree = (TreeSearch, u64, u32, Arc<TreePool>);

/// One worker. Workers after the first start once the first execution has ended: a
/// program that changed files in it (an output file, most often) is explored by one worker
/// only, since executions side by side would see each other's files (pbzip2 checks that its
/// output is absent, then creates it with O_EXCL). Said once in a note.
fn worker(shared: &Shared<'_>, w: usize, cpu: usize) -> Result<()> {
    let (ended, cond) = &shared.first_ended;
    if w > 0 {
        let mut done = ended.lock().expect("lock");
        while !*done && !shared.cut_signal.raised() {
            done = cond
                .wait_timeout(done, Duration::from_millis(50))
                .expect("lock")
                .0;
        }
        drop(done);
        if shared.changes_files.load(Ordering::SeqCst) {
            if w == 1 {
                let why = if shared.journal.lock().expect("file journal").has_outputs() {
                    "the program writes a file it was given open (stdout redirected to a file; --quiet-program sends it to /dev/null)"
                } else {
                    "the program changes files (its first execution did)"
                };
                eprintln!("mcheck: note: {why}: executions run one at a time, on one worker");
            }
            return Ok(());
        }
        return worker_loop(shared, w, cpu);
    }
    let result = worker_loop(shared, w, cpu);
    *ended.lock().expect("lock") = true;
    cond.notify_all();
    result
}

/// Marks the first execution ended, noting whether it changed files.
fn first_execution_ended(shared: &Shared<'_>, changed_files: bool) {
    let (ended, cond) = &shared.first_ended;
    let mut done = ended.lock().expect("lock");
    if !*done {
        shared
            .changes_files
            .fetch_or(changed_files, Ordering::SeqCst);
        *done = true;
        cond.notify_all();
    }
}

/// A worker's loop: a tracer thread pinned to `cpu` running executions until the search
/// stops.
fn worker_loop(shared: &Shared<'_>, w: usize, cpu: usize) -> Result<()> {
    cpu::pin_current_thread(cpu)?;
    let _tick = Watchdog::start(Duration::from_millis(100))?;
    let mut state = WorkerState {
        cut: shared.cut_signal.clone(),
        fs_gate: shared.fs_gate.clone(),
        journal: Some(shared.journal.clone()),
        // The program's output is shown once, for the first execution (the other workers
        // start once it has ended).
        shown_output: if w == 0 {
            ShownOutput::Next
        } else {
            ShownOutput::Hidden
        },
        ..WorkerState::default()
    };
    // Tree searches need the same scheduling points in every execution: racy accesses
    // become points of a tree only at a refinement round, the same for all its executions.
    let mut tree_cfg = shared.cfg.execution.clone();
    tree_cfg.instrument.preempt_on_races = shared.refine;
    let Mix {
        members: mut randoms,
        cycle,
    } = shared.cfg.plan.mix();
    let tree_only = randoms.is_empty();
    // The worker's subtree of each tree member (0: dfs/icb, 1: the portfolio's reduced
    // tree), its executions, and the round and tree it belongs to.
    let mut trees: [Option<HeldTree>; 2] = [None, None];
    // The racy points of the round of the tree execution about to run.
    let mut round_points = RacyPoints::default();
    let mut slot_index = w;
    let cfg = shared.cfg;
    let result = loop {
        if shared.stop.load(Ordering::SeqCst) {
            break Ok(());
        }
        if cfg
            .time_limit
            .is_some_and(|l| shared.started_at.elapsed() >= l)
        {
            shared.stop_now("time limit reached".into());
            break Ok(());
        }
        if shared.shed.load(Ordering::Relaxed) && state.snapshots.branches_allowed() {
            state.snapshots.shed_branches();
        }
        if shared.follow_up_spent() {
            break Ok(());
        }
        // Past the budget, the default budget's proof extension: the reduced tree alone.
        let proving = shared.reserved.fetch_add(1, Ordering::SeqCst) >= cfg.max_executions;
        if proving && !shared.proof_may_go_on() {
            break Ok(());
        }
        let mut slot = if proving {
            Slot::ReducedTree
        } else {
            slot_index += 1;
            cycle[(slot_index - 1) % cycle.len()]
        };
        if slot == Slot::ReducedTree && (!cfg.execution.instrument.races || cfg.shard.is_some()) {
            // Without race tracing steps cannot be reduced, and a reduced tree cannot be
            // split over shards (it learns from other shards' subtrees): the slot goes to
            // the tree.
            slot = Slot::Tree;
        }
        if matches!(slot, Slot::Randomized(_)) && trees[1].is_some() && shared.repay_reduced() {
            // Another worker's reduced slot found no free work (this worker holds it): the
            // reduced tree gets the slot back here, so it keeps its share of the budget.
            slot = Slot::ReducedTree;
        }
        if let Some(member) = slot.tree_member() {
            let tree = &mut trees[member];
            let (round, pool, points) = shared.round(member).expect("tree plans have a tree");
            round_points = points;
            if tree.as_ref().is_some_and(|held| held.2 != round) {
                // A refinement round began: the subtree of the old tree is dropped.
                let (mut t, n, _, old) = tree.take().expect("held");
                old.release(t.take_deferred(), n);
            }
            // Get a subtree with an execution left in it.
            let seed = loop {
                if tree.is_none() {
                    if tree_only {
                        // About to wait for work that another worker may be waiting to
                        // give: it may also be waiting for the file-system gate.
                        state.fs_pass = None;
                    }
                    match pool.take(tree_only) {
                        Some(item) => {
                            *tree = Some((
                                TreeSearch::subtree(pool.max_bound(), item.bound, item.prefix)
                                    .with_shard(cfg.shard)
                                    .with_por(cfg.plan.por() || member == 1)
                                    .with_branch_sleep(item.sleep)
                                    .with_branch_above(item.above)
                                    .with_state_cache(shared.cache.clone())
                                    .with_wakeup_trees(wakeup_trees())
                                    .with_claims(pool.claims()),
                                0,
                                round,
                                pool.clone(),
                            ))
                        }
                        None => break None,
                    }
                }
                let (t, n, _, _) = tree.as_mut().expect("just set");
                match t.begin_execution(0) {
                    Some(seed) => break Some(seed),
                    None => {
                        let deferred = t.take_deferred();
                        let n = *n;
                        *tree = None;
                        pool.release(deferred, n);
                    }
                }
            };
            if seed.is_none() {
                if shared.round(member).is_some_and(|r| r.0 != round) && !shared.stopped() {
                    // The tree was replaced by a refinement round while this worker
                    // looked for work in it: the slot goes to the new tree.
                    shared.reserved.fetch_sub(1, Ordering::SeqCst);
                    if !proving {
                        slot_index -= 1;
                    }
                    continue;
                }
                if pool.is_finished() {
                    shared.stop_because("search space exhausted".into());
                    shared.reserved.fetch_sub(1, Ordering::SeqCst);
                    break Ok(());
                }
                if proving {
                    // Another worker holds what is left of the proof: this one is done.
                    break Ok(());
                }
                if member == 1 {
                    // Owed to the reduced tree by the worker that holds its work.
                    shared.reduced_owed.fetch_add(1, Ordering::SeqCst);
                }
                // The tree has no free work now: run a randomised execution instead.
                slot = Slot::Randomized(0);
            }
        }
        if slot == Slot::ReducedTree {
            shared.reduced_runs.fetch_add(1, Ordering::SeqCst);
        }
        let (sched, name, seed): (&mut dyn Scheduler, String, u64) = match slot {
            Slot::Tree | Slot::ReducedTree => {
                let member = slot.tree_member().expect("a tree slot");
                let (t, _, _, _) = trees[member].as_mut().expect("tree slot has a subtree");
                let name = t.name().to_string();
                (t, name, 0)
            }
            Slot::Randomized(k) => {
                let idx = shared.next_random.fetch_add(1, Ordering::SeqCst);
                let (s, name) = &mut randoms[k];
                let seed = s.begin_execution(idx).unwrap_or(idx);
                (s.as_mut(), name.clone(), seed)
            }
        };
        let exec_cfg = if slot.tree_member().is_some() {
            &tree_cfg
        } else {
            &cfg.execution
        };
        let racy_before = if slot.tree_member().is_some() {
            // The round's points, the same in every execution of its tree.
            round_points.clone()
        } else if exec_cfg.instrument.preempt_on_races {
            state.racy_points()
        } else {
            RacyPoints::default()
        };
        // What the worker knew, put back after a tree execution ran with its round's points.
        let known = (slot.tree_member().is_some()).then(|| state.replace_racy_points(&racy_before));
        let atomics_before = state.atomic_addresses.len();
        // The last choice of a planned prefix is the new alternative, not a replayed step.
        let replayed =
            (sched.tree()).map_or(0, |t| t.planned_prefix().len().saturating_sub(1)) as u64;
        let outcome = run_execution(exec_cfg, sched, &mut state);
        if let Some(known) = &known {
            state.add_racy_points(known);
        }
        let mut outcome = match outcome {
            Ok(o) => o,
            Err(e) => break Err(e),
        };
        if outcome.cut_short {
            shared.record_cut(&outcome);
            continue;
        }
        // A split tree search (unreduced: nothing below depends on what follows) learns at
        // the end whether the execution was its own.
        let ended = slot.tree_member().is_some() && cfg.shard.is_some();
        if ended {
            sched.end_execution(&ExecutionSummary {
                steps: outcome.steps as usize,
                threads: outcome.threads,
                found_bug: outcome.finding.is_some(),
            });
            if outcome.outside_share || sched.tree().is_some_and(|t| t.ended_outside_share()) {
                // Another shard's: neither counted nor reported, and no part of the budget.
                shared.reserved.fetch_sub(1, Ordering::SeqCst);
                shared.outside_share.fetch_add(1, Ordering::Relaxed);
                first_execution_ended(shared, outcome.changed_files);
                let member = slot.tree_member().expect("a tree slot");
                let (t, _, _, pool) = trees[member].as_mut().expect("tree");
                if pool.wants_work() {
                    if let Some(p) = t.split() {
                        pool.donate(p);
                    }
                }
                continue;
            }
        }
        if !outcome.races.is_empty() && state.atomic_addresses.len() > atomics_before {
            // The execution learnt that some addresses hold atomics only after plain-looking
            // loads of them had run: run the same schedule again knowing it, so that those
            // loads count as atomic (and as acquires) from the start.
            match rerun(exec_cfg, &outcome.decisions, &racy_before, &mut state) {
                Ok(Some(again)) => {
                    outcome.races = again.races;
                    outcome.finding = again.finding;
                }
                Ok(None) => {}
                Err(e) => break Err(e),
            }
        }
        shared
            .transitions
            .fetch_add(outcome.steps.saturating_sub(replayed), Ordering::Relaxed);
        let (hashed, reused) = outcome.hashed_pages;
        shared.pages_hashed.fetch_add(hashed, Ordering::Relaxed);
        shared.pages_reused.fetch_add(reused, Ordering::Relaxed);
        let chosen = outcome
            .choice_steps
            .iter()
            .filter(|&&i| u64::from(i) >= replayed);
        shared
            .states
            .fetch_add(chosen.count() as u64, Ordering::Relaxed);
        if outcome.pruned {
            shared.pruned.fetch_add(1, Ordering::Relaxed);
        }
        let summary = ExecutionSummary {
            steps: outcome.steps as usize,
            threads: outcome.threads,
            found_bug: outcome.finding.is_some(),
        };
        if !ended {
            sched.end_execution(&summary);
        }
        if let Some(member) = slot.tree_member() {
            let (t, n, _, pool) = trees[member].as_mut().expect("tree");
            *n += 1;
            // Reversals partial-order reduction wants above this work item: another
            // worker's part of the tree, so they go to the pool (once each).
            for prefix in t.take_requests() {
                pool.request(prefix);
            }
            if pool.wants_work() {
                if let Some(p) = t.split() {
                    pool.donate(p);
                }
            }
        } else {
            // The randomised members learn how long executions are (PCT needs k).
            for (s, _) in randoms.iter_mut() {
                s.end_execution(&summary);
            }
        }
        if !outcome.races.is_empty() {
            if let Err(e) = attach_earlier_stacks(exec_cfg, &mut outcome, &racy_before, &mut state)
            {
                break Err(e);
            }
        }
        let atomics: Vec<u64> = if outcome.races.is_empty() && outcome.finding.is_none() {
            Vec::new()
        } else {
            state.atomic_addresses.iter().copied().collect()
        };
        let racy = exec_cfg.instrument.preempt_on_races.then_some(racy_before);
        // A whole execution without a single choice: every execution is this one.
        // Not when races found make racy accesses scheduling points of later executions
        // (`--preempt-on-races`): those have choices this one did not.
        let racy_points_ahead =
            cfg.execution.instrument.preempt_on_races && !state.racy_addresses.is_empty();
        let single_path = outcome.choice_steps.is_empty()
            && outcome.divergence.is_none()
            && !outcome.step_limit_hit
            && !outcome.pruned
            && (outcome.threads <= 1 || !racy_points_ahead);
        let threads = outcome.threads;
        let schedule = schedule_hash(outcome.decisions.iter().map(|d| d.thread));
        shared.digest.fetch_add(schedule, Ordering::Relaxed);
        first_execution_ended(shared, outcome.changed_files);
        shared.record(outcome, seed, name, racy, atomics);
        // Racy sites found may begin a refinement round of the tree.
        shared.note_races(&state);
        if single_path {
            let why = if threads <= 1 {
                NothingToExplore::NoThread
            } else {
                NothingToExplore::NoChoice
            };
            shared
                .nothing_to_explore
                .lock()
                .expect("lock")
                .get_or_insert(why);
            shared.stop_because("search space exhausted".into());
        }
    };
    for (mut t, n, _, pool) in trees.into_iter().flatten() {
        pool.release(t.take_deferred(), n);
    }
    shared
        .from_snapshots
        .fetch_add(state.snapshots.restored, Ordering::SeqCst);
    shared
        .from_branch
        .fetch_add(state.snapshots.restored_branch, Ordering::SeqCst);
    shared
        .branches
        .fetch_add(state.snapshots.branches_taken, Ordering::SeqCst);
    if let Some(first) = state.snapshots.branch_failures.first() {
        eprintln!(
            "mcheck: note: {} cop(ies) of branch snapshots could not be rebuilt and started from the first-thread snapshot instead (first: {first})",
            state.snapshots.branch_failures.len()
        );
    }
    if let Some(why) = state.snapshots.refusal() {
        shared
            .snapshots_off
            .lock()
            .expect("lock")
            .get_or_insert_with(|| why.to_string());
    }
    result
}

/// Whether partial-order reduction uses wakeup trees (optimal DPOR); `MCHECK_DPOR=source`
/// makes it use source sets alone, for benchmarks that measure the difference.
fn wakeup_trees() -> bool {
    std::env::var("MCHECK_DPOR").map_or(true, |v| v != "source")
}
