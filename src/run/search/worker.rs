//! A worker: a tracer thread pinned to a CPU, running executions until the search stops.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::explore::shard::schedule_hash;
use crate::explore::{
    Decision, ExecutionSummary, Mix, ReplayScheduler, Scheduler, Slot, TreePool, TreeSearch,
};
use crate::report::Finding;
use crate::run::config::ExecutionConfig;
use crate::run::locks::LockCycle;
use crate::run::session::launch::run_execution;
use crate::run::worker_state::{RacyPoints, ShownOutput, WorkerState};
use crate::tracee::{cpu, watchdog::Watchdog};

use super::confirm::{confirm, Confirmation};
use super::output_oracle::Difference;
use super::result::NothingToExplore;
use super::shared::Shared;
use super::witness::{attach_earlier_stacks, rerun};

/// A worker's subtree of a tree member: the search, its executions, the round it belongs to
/// and that round's tree.
pub(super) type HeldTree = (TreeSearch, u64, u32, Arc<TreePool>);

/// One worker. Workers after the first start once the first execution has ended: a
/// program that changed files in it (an output file, most often) is explored by one worker
/// only, since executions side by side would see each other's files (pbzip2 checks that its
/// output is absent, then creates it with O_EXCL). Said once in a note.
pub(super) fn worker(shared: &Shared<'_>, w: usize, cpu: usize) -> Result<()> {
    let (ended, cond) = &shared.first_ended;
    if w > 0 {
        let mut done = ended.lock().expect("lock");
        while !*done && !shared.stopping.cut_signal.raised() {
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
pub(super) fn first_execution_ended(shared: &Shared<'_>, changed_files: bool) {
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
pub(super) fn worker_loop(shared: &Shared<'_>, w: usize, cpu: usize) -> Result<()> {
    cpu::pin_current_thread(cpu)?;
    let _tick = Watchdog::start(Duration::from_millis(100))?;
    let mut state = WorkerState {
        cut: shared.stopping.cut_signal.clone(),
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
        if shared.stopping.stop.load(Ordering::SeqCst) {
            break Ok(());
        }
        if cfg
            .time_limit
            .is_some_and(|l| shared.started_at.elapsed() >= l)
        {
            shared.stop_now(super::TIME_LIMIT_REACHED.into());
            break Ok(());
        }
        if shared.stopping.shed.load(Ordering::Relaxed) && state.snapshots.branches_allowed() {
            state.snapshots.shed_branches();
        }
        // Past the budget, the default budget's proof extension: the reduced tree alone.
        let proving = shared.slots.reserved.fetch_add(1, Ordering::SeqCst) >= cfg.max_executions;
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
                    shared.slots.reserved.fetch_sub(1, Ordering::SeqCst);
                    if !proving {
                        slot_index -= 1;
                    }
                    continue;
                }
                if pool.is_finished() {
                    shared.stop_because("search space exhausted".into());
                    shared.slots.reserved.fetch_sub(1, Ordering::SeqCst);
                    break Ok(());
                }
                if proving {
                    // Another worker holds what is left of the proof: this one is done.
                    break Ok(());
                }
                if member == 1 {
                    // Owed to the reduced tree by the worker that holds its work.
                    shared.slots.reduced_owed.fetch_add(1, Ordering::SeqCst);
                }
                // The tree has no free work now: run a randomised execution instead.
                slot = Slot::Randomized(0);
            }
        }
        if slot == Slot::ReducedTree {
            shared.slots.reduced_runs.fetch_add(1, Ordering::SeqCst);
        }
        let (sched, name, seed): (&mut dyn Scheduler, String, u64) = match slot {
            Slot::Tree | Slot::ReducedTree => {
                let member = slot.tree_member().expect("a tree slot");
                let (t, _, _, _) = trees[member].as_mut().expect("tree slot has a subtree");
                let name = t.name().to_string();
                (t, name, 0)
            }
            Slot::Randomized(k) => {
                let idx = shared.slots.next_random.fetch_add(1, Ordering::SeqCst);
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
            state.racy_points().learnt_only()
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
        if outcome.early_end.cut_short {
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
            if outcome.early_end.outside_share
                || sched.tree().is_some_and(|t| t.ended_outside_share())
            {
                // Another shard's: neither counted nor reported, and no part of the budget.
                shared.slots.reserved.fetch_sub(1, Ordering::SeqCst);
                shared.tallies.outside_share.fetch_add(1, Ordering::Relaxed);
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
        // What was known of atomics in the run whose races are reported: a run for their
        // stacks must know exactly that, or its threads' epochs (atomics acquire and
        // release) are not those the races were seen in.
        let mut atomics_of_races = None;
        if !outcome.races.is_empty() && state.atomic_addresses.len() > atomics_before {
            // The execution learnt that some addresses hold atomics only after plain-looking
            // loads of them had run: run the same schedule again knowing it, so that those
            // loads count as atomic (and as acquires) from the start.
            let known = state.atomic_addresses.clone();
            match rerun(exec_cfg, &outcome.decisions, &racy_before, &mut state) {
                Ok(Some(again)) => {
                    outcome.races = again.races;
                    outcome.finding = again.finding;
                    outcome.race_origins = again.race_origins;
                    atomics_of_races = Some(known);
                }
                Ok(None) => {}
                Err(e) => break Err(e),
            }
        }
        shared
            .tallies
            .transitions
            .fetch_add(outcome.steps.saturating_sub(replayed), Ordering::Relaxed);
        let (hashed, reused) = outcome.measures.hashed_pages;
        shared
            .tallies
            .pages_hashed
            .fetch_add(hashed, Ordering::Relaxed);
        shared
            .tallies
            .pages_reused
            .fetch_add(reused, Ordering::Relaxed);
        let chosen = outcome
            .choice_steps
            .iter()
            .filter(|&&i| u64::from(i) >= replayed);
        shared
            .tallies
            .states
            .fetch_add(chosen.count() as u64, Ordering::Relaxed);
        if outcome.early_end.pruned {
            shared.tallies.pruned.fetch_add(1, Ordering::Relaxed);
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
        if shared.wants_any(&outcome.races, outcome.preemptions) {
            let stacks = attach_earlier_stacks(
                exec_cfg,
                &mut outcome,
                &racy_before,
                atomics_of_races,
                &mut state,
            );
            if let Err(e) = stacks {
                break Err(e);
            }
        }
        let atomics: Vec<u64> = if outcome.races.is_empty() && outcome.finding.is_none() {
            Vec::new()
        } else {
            state.atomic_addresses.iter().copied().collect()
        };
        let racy = (exec_cfg.instrument.preempt_on_races || racy_before.has_learnt())
            .then(|| racy_before.clone());
        // A lock-order cycle is confirmed (once per cycle) after the execution is recorded.
        let cycle = (outcome.lock_order.take()).map(|c| (c, outcome.decisions.clone()));
        // A whole execution without a single choice: every execution is this one.
        // Not when races found make racy accesses scheduling points of later executions
        // (`--preempt-on-races`), or timeout polls do: those have choices this one did not.
        let racy_points_ahead = (cfg.execution.instrument.preempt_on_races
            && !state.racy_addresses.is_empty())
            || !state.poll_sites.is_empty()
            || !state.spin_sites.is_empty();
        let single_path = outcome.choice_steps.is_empty()
            && outcome.divergence.is_none()
            && !outcome.early_end.step_limit_hit
            && !outcome.early_end.pruned
            && (outcome.threads <= 1 || !racy_points_ahead);
        let threads = outcome.threads;
        let schedule = schedule_hash(outcome.decisions.iter().map(|d| d.thread));
        shared.tallies.digest.fetch_add(schedule, Ordering::Relaxed);
        first_execution_ended(shared, outcome.changed_files);
        let different_output = match shared.observed.output.check(&outcome, &racy_before) {
            Some(d) => match confirm_output(shared, exec_cfg, d, &mut state) {
                Ok(f) => f,
                Err(e) => break Err(e),
            },
            None => None,
        };
        let recorded = shared.record(outcome, different_output, seed, name, racy.clone(), atomics);
        let cycle =
            cycle.filter(|(c, _)| recorded.is_some() && !shared.stopped() && shared.claim_cycle(c));
        if let (Some((cycle, decisions)), Some(index)) = (cycle, recorded) {
            let found = confirm_cycle(
                shared,
                exec_cfg,
                (&cycle, &decisions),
                &racy_before,
                &mut state,
            );
            match found {
                Ok(Confirmation::Deadlocked(out)) => {
                    // The atomics the directed execution knew, for its replay.
                    let atomics = state.atomic_addresses.iter().copied().collect();
                    shared.record_confirmed(*out, index, racy, atomics)
                }
                Ok(Confirmation::Unconfirmed(c)) => shared.cycle_unconfirmed(c, index),
                Ok(Confirmation::CutShort) => {}
                Err(e) => break Err(e),
            }
        }
        // Racy sites found may begin a refinement round of the tree.
        shared.note_races(&state);
        shared.name_learnt_points(&mut state);
        if single_path {
            let why = if threads <= 1 {
                NothingToExplore::NoThread
            } else {
                NothingToExplore::NoChoice
            };
            shared
                .observed
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
        .tallies
        .from_snapshots
        .fetch_add(state.snapshots.restored, Ordering::SeqCst);
    shared
        .tallies
        .from_branch
        .fetch_add(state.snapshots.restored_branch, Ordering::SeqCst);
    shared
        .tallies
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
            .observed
            .snapshots_off
            .lock()
            .expect("lock")
            .get_or_insert_with(|| why.to_string());
    }
    result
}

/// Runs the directed executions that confirm `cycle`, seen in the execution of schedule
/// `decisions`, counting them in the shared state.
fn confirm_cycle(
    shared: &Shared<'_>,
    cfg: &ExecutionConfig,
    (cycle, decisions): (&LockCycle, &[Decision]),
    racy_before: &RacyPoints,
    state: &mut WorkerState,
) -> Result<Confirmation> {
    let mut runs = 0;
    let found = confirm(cfg, decisions, cycle, racy_before, state, &mut runs);
    shared
        .tallies
        .confirmation_runs
        .fetch_add(runs, Ordering::SeqCst);
    found
}

/// Runs the schedule of the reference execution `d` was compared with again: `d`'s finding
/// when it wrote the same as the first time (the output is a function of the schedule),
/// else None, with a note the first time an output is dropped from the comparison.
fn confirm_output(
    shared: &Shared<'_>,
    cfg: &ExecutionConfig,
    d: Difference,
    state: &mut WorkerState,
) -> Result<Option<Finding>> {
    if d.channel_confirmed(&shared.observed.output) {
        return Ok(Some(d.finding));
    }
    if shared.stopped() {
        return Ok(None);
    }
    let mut sched = ReplayScheduler::new(d.reference.clone());
    let learnt = state.replace_racy_points(&d.reference_racy);
    // Not a quiet rerun: that would send a stdout without a capture (a file) to /dev/null.
    // A search shows only its first execution's output, so nothing is shown again.
    let rerun = run_execution(cfg, &mut sched, state);
    state.add_racy_points(&learnt);
    match shared.observed.output.confirm(&d, &rerun?) {
        Ok(()) => Ok(Some(d.finding)),
        Err(note) => {
            if let Some(note) = note {
                eprintln!("mcheck: note: {note}");
            }
            Ok(None)
        }
    }
}

/// Whether partial-order reduction uses wakeup trees (optimal DPOR); `MCHECK_DPOR=source`
/// makes it use source sets alone, for benchmarks that measure the difference.
pub(super) fn wakeup_trees() -> bool {
    std::env::var("MCHECK_DPOR").map_or(true, |v| v != "source")
}
