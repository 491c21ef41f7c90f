//! The search: executions repeated within the budget (executions, time) by `jobs` worker
//! threads, each a tracer pinned to its own CPU with its own tracee processes. Tree
//! strategies (dfs, icb, the portfolio's icb member) share a [`TreePool`] of subtrees;
//! randomised strategies share an execution index, so no schedule is explored twice. The
//! search stops at the first finding unless `--keep-going`; a lock-order cycle an execution
//! shows is a finding only once a directed execution deadlocks on it (`confirm`); distinct
//! findings are
//! deduplicated by kind and source locations, keeping the witness with the fewest
//! preemptions together with its schedule.

mod confirm;
mod output_oracle;
mod plan;
mod result;
mod shared;
mod single;
mod witness;
mod worker;

pub use confirm::UnconfirmedCycle;
pub use output_oracle::{file_details, file_message, output_details};
pub use plan::{Plan, SearchConfig};
pub use result::{
    location_key, InstrumentationSummary, NothingToExplore, Progress, ProgressReport, Resources,
    SearchResult, ShardTally, SnapshotUse, StateSpace,
};
use shared::{Cycles, Findings, Racy, Round, Shared};
pub(super) use single::replay_worker;
pub use single::{race_sites, run_single};
pub use witness::{attach_earlier_stacks, Witness};
use worker::worker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::snapshots::memory_guard::MemoryGuard;
use super::worker_state::RacyPoints;
use super::world::fs_gate::FsGate;
use crate::explore::{CacheStats, EndTable, RacySites, Slot, StateTable, TreePool};
use crate::tracee::{self, cpu};

/// Why a search stopped when its `time_limit` ran out (`SearchResult::stopped_because`).
pub const TIME_LIMIT_REACHED: &str = "time limit reached";

/// Why a search stopped at a failure (`SearchResult::stopped_because`).
pub const FIRST_FINDING: &str = "stopped at the first finding";

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
        slots: Default::default(),
        tallies: Default::default(),
        observed: Default::default(),
        first_ended: Default::default(),
        changes_files: Default::default(),
        stopping: Default::default(),
        cycles: Mutex::new(Cycles::default()),
        findings: Mutex::new(Findings::default()),
        error: Mutex::new(None),
        cache: (cfg.execution.snapshots.state_cache && matches!(cfg.plan, Plan::Dfs { .. }))
            .then(|| Arc::new(Mutex::new(StateTable::default()))),
        ends: Mutex::new(EndTable::default()),
        fs_gate: FsGate::default(),
        journal: Default::default(),
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
    let unconfirmed_cycles = shared.cycles.into_inner().expect("lock").unconfirmed;
    let executions = shared.slots.done.load(Ordering::SeqCst);
    let snapshots_off = shared.observed.snapshots_off.lock().expect("lock").take();
    let patch_stats = std::mem::take(&mut *shared.observed.patch_stats.lock().expect("lock"));
    let library_sync = std::mem::take(&mut *shared.observed.library_sync.lock().expect("lock"));
    let unverified_races =
        std::mem::take(&mut *shared.observed.unverified_races.lock().expect("lock"));
    let nothing_to_explore = *shared.observed.nothing_to_explore.lock().expect("lock");
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
    // A process of the program ran unchecked: what it did was not explored.
    let untraced = std::mem::take(&mut *shared.observed.untraced.lock().expect("lock"));
    if !untraced.is_empty() {
        coverage.exhausted = false;
    }
    // Executions cut short at --max-steps (under an unfair schedule) were not explored to
    // their ends: the tree ran out only up to that depth.
    if shared.tallies.cut.load(Ordering::SeqCst) > 0 {
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
    // A race the search went on after without finding the failure it leads to.
    let followed_race = Some(shared.following_since.load(Ordering::SeqCst))
        .filter(|&n| n > 0 && stopped_because != FIRST_FINDING);
    progress(&ProgressReport {
        executions,
        findings: findings.witnesses.len(),
        elapsed: shared.started_at.elapsed(),
        memory: guard.peak,
    });
    // An output that depends on the schedule is reported after the findings that may
    // explain it (the race or failure behind it), whatever was found first.
    let mut witnesses = findings.witnesses;
    witnesses.sort_by_key(|w| w.finding.kind == crate::report::FindingKind::Nondeterminism);
    Ok(SearchResult {
        witnesses,
        executions,
        complete,
        coverage,
        stopped_because,
        elapsed: shared.started_at.elapsed(),
        steps: shared.tallies.steps.load(Ordering::SeqCst),
        cut_by_step_limit: shared.tallies.cut.load(Ordering::SeqCst),
        abandoned: shared.tallies.abandoned.load(Ordering::SeqCst),
        instrumentation: InstrumentationSummary {
            traced_accesses: shared.tallies.traced.load(Ordering::SeqCst),
            patch_stats,
            library_sync,
            unverified_races,
            races_checked,
        },
        untraced,
        snapshots: SnapshotUse {
            from_snapshots: shared.tallies.from_snapshots.load(Ordering::SeqCst),
            from_branch_snapshots: shared.tallies.from_branch.load(Ordering::SeqCst),
            branch_snapshots: shared.tallies.branches.load(Ordering::SeqCst),
            snapshots_off,
        },
        state_space: StateSpace {
            transitions: shared.tallies.transitions.load(Ordering::SeqCst),
            states: shared.tallies.states.load(Ordering::SeqCst),
            state_cache: shared.cache.as_ref().map(|c| CacheStats {
                pages_hashed: shared.tallies.pages_hashed.load(Ordering::SeqCst),
                pages_reused: shared.tallies.pages_reused.load(Ordering::SeqCst),
                ..c.lock().expect("state table").stats()
            }),
            pruned: shared.tallies.pruned.load(Ordering::SeqCst),
        },
        cut_short: shared.tallies.cut_short.load(Ordering::SeqCst),
        resources: Resources {
            memory_peak: guard.peak,
            jobs_used: if shared.changes_files.load(Ordering::SeqCst) {
                1
            } else {
                cpus.len()
            },
        },
        nothing_to_explore,
        shard: ShardTally {
            runs_outside_share: shared.tallies.outside_share.load(Ordering::SeqCst),
            schedule_digest: shared.tallies.digest.load(Ordering::SeqCst),
        },
        followed_race,
        unconfirmed_cycles,
        confirmation_executions: shared.tallies.confirmation_runs.load(Ordering::SeqCst),
    })
}
