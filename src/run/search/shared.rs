//! The state the search's workers share: budget, findings, tree pools, refinement rounds,
//! and the decision to stop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::explore::{
    counter_of, Coverage, Decision, EndTable, RacySites, SharedStateTable, TreePool,
};
use crate::report::{Finding, FindingKind};
use crate::run::instrument::sites::PatchStats;
use crate::run::process::cut::CutSignal;
use crate::run::session::ExecutionOutcome;
use crate::run::snapshots::memory_guard::{MemoryGuard, Pressure};
use crate::run::worker_state::{RacyPoints, WorkerState};
use crate::run::world::file_journal::FileJournal;
use crate::run::world::fs_gate::FsGate;
use crate::tracee::interrupt;

use crate::run::locks::LockCycle;

use super::confirm::UnconfirmedCycle;
use super::output_oracle::OutputOracle;
use super::plan::Plan;
use super::plan::SearchConfig;
use super::result::{finding_key, location_key, NothingToExplore, ProgressReport};
use super::witness::Witness;

#[derive(Default)]
pub(super) struct Findings {
    pub(super) witnesses: Vec<Witness>,
    pub(super) index_of: HashMap<(FindingKind, Vec<String>), usize>,
    pub(super) stopped_because: Option<String>,
}

impl Findings {
    /// Keeps `witness`: a new finding, or a better witness (fewer preemptions) of one
    /// found before.
    fn keep(&mut self, witness: Witness) {
        let key = finding_key(&witness.finding);
        match self.index_of.get(&key) {
            Some(&i) => {
                if self.better(i, witness.finding.preemptions) {
                    self.witnesses[i] = witness;
                }
            }
            None => {
                self.index_of.insert(key, self.witnesses.len());
                self.witnesses.push(witness);
            }
        }
    }

    /// Whether a witness with `preemptions` preemptions would replace witness `i`.
    fn better(&self, i: usize, preemptions: u64) -> bool {
        preemptions < self.witnesses[i].finding.preemptions
    }

    /// Whether [`Findings::keep`] would keep `finding`, seen in an execution with
    /// `preemptions` preemptions: new, or a better witness of one found before.
    fn would_keep(&self, finding: &Finding, preemptions: u64) -> bool {
        (self.index_of.get(&finding_key(finding))).is_none_or(|&i| self.better(i, preemptions))
    }
}

/// The lock-order cycles seen by the search: which were confirmed or refuted already (by
/// source locations, each once), and those not reported.
#[derive(Default)]
pub(super) struct Cycles {
    tried: std::collections::HashSet<Vec<String>>,
    pub(super) unconfirmed: Vec<UnconfirmedCycle>,
}

/// The strategy named in the witness of a deadlock reached by confirming a lock-order
/// cycle.
pub const CONFIRMATION: &str = "lock-order confirmation";

/// The tree of the systematic member and the racy sites that shaped it: a new tree (a new
/// pool) per refinement round (see [`RacySites`]).
pub(super) struct Round {
    /// 0 for the first tree, then one more per refinement round.
    pub(super) number: u32,
    /// The tree of this round.
    pub(super) pool: Arc<TreePool>,
    /// The portfolio's reduced tree (dfs with partial-order reduction) of this round.
    pub(super) reduced: Option<Arc<TreePool>>,
    /// What this round's tree schedules at besides synchronisation: the racy sites
    /// included in it, at the addresses found racy when it began.
    pub(super) points: RacyPoints,
    /// Executions of the trees of earlier rounds.
    pub(super) earlier_executions: u64,
}

/// The racy sites and addresses found by the search (every plan), and the sites included
/// in the tree.
pub(super) struct Racy {
    pub(super) sites: RacySites,
    pub(super) addresses: std::collections::BTreeSet<u64>,
}

/// What the executions did, summed over the workers, for the result.
#[derive(Default)]
pub(super) struct Tallies {
    /// Scheduling decisions taken.
    pub(super) steps: AtomicU64,
    /// Executions cut at `--max-steps`.
    pub(super) cut: AtomicU64,
    /// Executions cut short while a thread waited in the kernel (see `abandoned`).
    pub(super) abandoned: AtomicU64,
    /// Memory accesses traced (race detection).
    pub(super) traced: AtomicU64,
    /// Executions started from a copy of the startup snapshot.
    pub(super) from_snapshots: AtomicU64,
    /// Executions started from a branch snapshot.
    pub(super) from_branch: AtomicU64,
    /// Branch snapshots taken.
    pub(super) branches: AtomicU64,
    /// Directed executions run to confirm lock-order cycles (not counted in `done`).
    pub(super) confirmation_runs: AtomicU64,
    /// Transitions taken beyond replayed prefixes (`--state-cache`).
    pub(super) transitions: AtomicU64,
    /// Distinct states visited (`--state-cache`).
    pub(super) states: AtomicU64,
    /// Memory pages hashed anew at hashed points.
    pub(super) pages_hashed: AtomicU64,
    /// Memory pages whose hash was kept at hashed points.
    pub(super) pages_reused: AtomicU64,
    /// Executions ended at a state visited before (`--state-cache`).
    pub(super) pruned: AtomicU64,
    /// Executions cut short.
    pub(super) cut_short: AtomicU64,
    /// Runs that were another shard's.
    pub(super) outside_share: AtomicU64,
    /// Sum of the schedule hashes of the executions run to their end.
    pub(super) digest: AtomicU64,
}

/// What some execution observed that the result reports once, or gathered.
#[derive(Default)]
pub(super) struct Observed {
    /// The note about an abandoned execution was printed.
    pub(super) said_abandoned: std::sync::atomic::AtomicBool,
    /// The note about a thread left waiting on an orphaned lock was printed.
    pub(super) said_orphaned: std::sync::atomic::AtomicBool,
    /// The learnt points (racy sites, timeout polls, busy waits) named so far, by address.
    pub(super) site_names: Mutex<std::collections::BTreeMap<u64, String>>,
    /// The busy waits learnt, as told to the user (each is told once).
    pub(super) said_spins: Mutex<std::collections::HashSet<String>>,
    /// How the access sites of the program were instrumented.
    pub(super) patch_stats: std::sync::Mutex<PatchStats>,
    /// Atomic operations inside system libraries, and the library of the first.
    pub(super) library_sync: std::sync::Mutex<(u64, Option<String>)>,
    /// Races that may be relaxed atomics (not reported), and the first, described.
    pub(super) unverified_races: std::sync::Mutex<(u64, Option<String>)>,
    /// Processes of the program that some execution did not check (each once).
    pub(super) untraced: Mutex<Vec<crate::report::UntracedProcess>>,
    /// Why snapshots were turned off for the search, once they were.
    pub(super) snapshots_off: Mutex<Option<String>>,
    /// An execution met no scheduling choice.
    pub(super) nothing_to_explore: Mutex<Option<NothingToExplore>>,
    /// The reference output executions are compared with (`output_oracle`).
    pub(super) output: OutputOracle,
}

/// How the budget's executions are handed out to the workers.
#[derive(Default)]
pub(super) struct Slots {
    /// Executions reserved by workers (started or about to).
    pub(super) reserved: AtomicU64,
    /// Executions done, counted against the budget.
    pub(super) done: AtomicU64,
    /// The index of the next randomised execution.
    pub(super) next_random: AtomicU64,
    /// Executions of the portfolio's reduced tree so far (all rounds).
    pub(super) reduced_runs: AtomicU64,
    /// Reduced-tree slots that found no free work (another worker held it), to be given
    /// back to the reduced tree by the worker that holds it.
    pub(super) reduced_owed: AtomicU64,
}

/// The search's stopping: asked for, how, and what it tells the running executions.
#[derive(Default)]
pub(super) struct Stopping {
    /// The search stops: no worker starts another execution.
    pub(super) stop: AtomicBool,
    /// The tree was closed before it was exhausted (the search stopped).
    pub(super) closed_early: AtomicBool,
    /// Raised to end the running executions at once.
    pub(super) cut_signal: CutSignal,
    /// Workers should drop their branch snapshots (memory pressure).
    pub(super) shed: AtomicBool,
}

/// State shared by the workers.
pub(super) struct Shared<'a> {
    pub(super) cfg: &'a SearchConfig,
    /// The systematic member's tree (tree plans only).
    pub(super) tree: Option<Mutex<Round>>,
    /// The preemption cap of the tree (tree plans only).
    pub(super) tree_cap: Option<Option<u32>>,
    /// Racy sites found become scheduling points of the tree (refinement rounds).
    pub(super) refine: bool,
    /// Racy sites and addresses found.
    pub(super) racy: Mutex<Racy>,
    /// The execution that found the first data race a search without `--keep-going` goes
    /// on after, to find the failure it leads to (0: none).
    pub(super) following_since: AtomicU64,
    /// When the search started.
    pub(super) started_at: Instant,
    /// How the budget's executions are handed out to the workers.
    pub(super) slots: Slots,
    /// What the executions did, summed over the workers, for the result.
    pub(super) tallies: Tallies,
    /// What some execution observed that the result reports once, or gathered.
    pub(super) observed: Observed,
    /// Whether the first execution has ended (the other workers wait for it).
    pub(super) first_ended: (Mutex<bool>, std::sync::Condvar),
    /// The first execution changed files: the search runs on one worker.
    pub(super) changes_files: std::sync::atomic::AtomicBool,
    /// The search's stopping: asked for, how, and what it tells the running executions.
    pub(super) stopping: Stopping,
    /// Lock-order cycles seen, confirmed or not.
    pub(super) cycles: Mutex<Cycles>,
    pub(super) findings: Mutex<Findings>,
    pub(super) error: Mutex<Option<anyhow::Error>>,
    /// The table of visited states (`--state-cache`).
    pub(super) cache: Option<SharedStateTable>,
    /// The first result at each final counter (`--state-cache`).
    pub(super) ends: Mutex<EndTable<Vec<Decision>>>,
    /// One execution at a time changes files.
    pub(super) fs_gate: FsGate,
    /// The program's file changes, undone between executions (`file_journal`).
    pub(super) journal: Arc<Mutex<FileJournal>>,
}

impl Shared<'_> {
    /// The current round: its number, the tree of `member` (0: dfs/icb, 1: the portfolio's
    /// reduced tree) and its racy points.
    pub(super) fn round(&self, member: usize) -> Option<(u32, Arc<TreePool>, RacyPoints)> {
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
    pub(super) fn note_races(&self, state: &WorkerState) {
        let mut racy = self.racy.lock().expect("racy");
        racy.addresses.extend(state.racy_addresses.iter().copied());
        let racy_sites_new = racy.sites.note(state.racy_sites.iter().copied());
        let polls_new = racy.sites.note_polls(state.poll_sites.iter().copied());
        let spins_new = racy.sites.note_spins(state.spin_sites.iter().copied());
        if !racy_sites_new && !polls_new && !spins_new {
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
            poll_sites: racy.sites.polls_included(),
            spin_sites: racy.sites.spins_included(),
        };
        if self.stopping.stop.load(Ordering::SeqCst) {
            // The search has stopped: the new trees get no work.
            r.pool.close();
            if let Some(p) = &r.reduced {
                p.close();
            }
            return;
        }
        let mut what = Vec::new();
        let only_sites = r.points.poll_sites.is_empty() && r.points.spin_sites.is_empty();
        if !r.points.sites.is_empty() || only_sites {
            what.push(format!("{} racy access site(s)", r.points.sites.len()));
        }
        if !r.points.poll_sites.is_empty() {
            what.push(format!(
                "{} read(s) of what a timed-out wait sets (a waiting thread may time out right before each)",
                r.points.poll_sites.len()
            ));
        }
        if !r.points.spin_sites.is_empty() {
            what.push(format!(
                "{} atomic load(s) of busy waits (yield points)",
                r.points.spin_sites.len()
            ));
        }
        eprintln!(
            "mcheck: note: refinement round {}: {} become scheduling points of the systematic search",
            r.number,
            what.join(" and ")
        );
    }

    /// The coverage of the systematic member, qualified by the racy sites found.
    pub(super) fn coverage(&self) -> Coverage {
        let racy = self.racy.lock().expect("racy");
        let Some(tree) = &self.tree else {
            return racy.sites.qualify(Coverage::default());
        };
        let r = tree.lock().expect("round");
        let closed_early = self.stopping.closed_early.load(Ordering::SeqCst);
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
        c.site_names = self.site_names();
        c
    }

    /// The learnt points named so far (`Observed::site_names`).
    fn site_names(&self) -> Vec<(u64, String)> {
        let names = self.observed.site_names.lock().expect("names");
        names.iter().map(|(&pc, n)| (pc, n.clone())).collect()
    }

    /// Names the learnt points of `state` not named yet (`function at file:line`), so that
    /// the coverage sentence need not show bare addresses.
    pub(super) fn name_learnt_points(&self, state: &mut WorkerState) {
        let learnt = {
            let names = self.observed.site_names.lock().expect("names");
            (state.racy_sites.iter())
                .chain(&state.poll_sites)
                .chain(&state.spin_sites)
                .copied()
                .filter(|pc| !names.contains_key(pc))
                .collect::<Vec<u64>>()
        };
        // Symbolised without the lock: the first lookup in a file loads its DWARF.
        let named: Vec<(u64, String)> = (learnt.into_iter())
            .map(|pc| {
                let frame = state.symbols.instruction_site(pc);
                let name = if frame.function.is_some() {
                    frame.short()
                } else {
                    String::new()
                };
                (pc, name)
            })
            .collect();
        self.observed
            .site_names
            .lock()
            .expect("names")
            .extend(named);
    }

    /// How far the search has come.
    pub(super) fn report(&self, guard: &MemoryGuard) -> ProgressReport {
        ProgressReport {
            executions: self.slots.done.load(Ordering::Relaxed),
            findings: self.findings.lock().expect("lock").witnesses.len(),
            elapsed: self.started_at.elapsed(),
            memory: guard.last,
        }
    }

    /// Stops the search now: the running executions are cut short too.
    pub(super) fn stop_now(&self, why: String) {
        self.stop_because(why);
        self.stopping.cut_signal.raise();
    }

    /// Counts an execution that was cut short (it reports nothing: its schedule is partial).
    pub(super) fn record_cut(&self, outcome: &ExecutionOutcome) {
        self.tallies
            .steps
            .fetch_add(outcome.steps, Ordering::Relaxed);
        self.tallies
            .traced
            .fetch_add(outcome.measures.traced_accesses, Ordering::Relaxed);
        self.tallies.cut_short.fetch_add(1, Ordering::Relaxed);
        self.slots.done.fetch_add(1, Ordering::SeqCst);
    }

    /// Looks at the clock, the signals and the memory (from the main thread, ten times a
    /// second): stops the search, or sheds caches, when it must.
    pub(super) fn watch(&self, guard: &mut MemoryGuard) {
        if let Some(sig) = interrupt::received() {
            self.stop_now(format!("interrupted by {sig}"));
        }
        if (self.cfg.time_limit).is_some_and(|l| self.started_at.elapsed() >= l) {
            self.stop_now(super::TIME_LIMIT_REACHED.into());
        }
        match guard.check() {
            Pressure::None => {}
            Pressure::Shed(usage) => {
                eprintln!(
                    "mcheck: note: memory use {} is past three quarters of --max-memory {} MiB: branch snapshots and the state cache are dropped",
                    usage.describe(),
                    self.cfg.max_memory >> 20
                );
                self.stopping.shed.store(true, Ordering::SeqCst);
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
    pub(super) fn stopped(&self) -> bool {
        self.stopping.stop.load(Ordering::SeqCst)
    }

    /// Takes one slot owed to the reduced tree, if any.
    pub(super) fn repay_reduced(&self) -> bool {
        self.slots
            .reduced_owed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Whether the portfolio's reduced tree may run past the execution budget: with the
    /// default budget (`proof_budget`), while it has had fewer executions than that and is
    /// not finished, so that the default command proves a program whose reduced tree fits.
    pub(super) fn proof_may_go_on(&self) -> bool {
        let Some(budget) = self.cfg.proof_budget else {
            return false;
        };
        // Never past two budgets in all (the reduced tree has about half of the first).
        let most = budget.saturating_mul(2);
        if self.stopped()
            || self.slots.reduced_runs.load(Ordering::SeqCst) >= budget
            || self.slots.reserved.load(Ordering::SeqCst) > most
        {
            return false;
        }
        self.round(1)
            .is_some_and(|(_, pool, _)| !pool.is_finished())
    }

    pub(super) fn stop_because(&self, why: String) {
        let mut f = self.findings.lock().expect("lock");
        f.stopped_because.get_or_insert(why);
        self.stopping.stop.store(true, Ordering::SeqCst);
        if let Some(tree) = &self.tree {
            let r = tree.lock().expect("round");
            let finished =
                r.pool.is_finished() || r.reduced.as_ref().is_some_and(|p| p.is_finished());
            if !finished {
                self.stopping.closed_early.store(true, Ordering::SeqCst);
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
    pub(super) fn different_end(&self, outcome: &ExecutionOutcome) -> Option<Finding> {
        self.cache.as_ref()?;
        let exit = outcome.exit.as_ref()?;
        // An execution whose stderr could not be told is not compared.
        let digest = outcome.output_digest?;
        let counter = counter_of(outcome.decisions.iter().map(|d| d.thread));
        let result = format!("{exit}, stderr output #{digest:016x}");
        let mut ends = self.ends.lock().expect("lock");
        let (earlier, schedule) =
            ends.record(&counter, result.clone(), outcome.decisions.clone())?;
        let threads = |d: &[Decision]| {
            d.iter()
                .map(|d| format!("T{}", d.thread))
                .collect::<Vec<_>>()
                .join(" ")
        };
        Some(super::output_oracle::nondeterminism(
            format!(
                "the program's result depends on the schedule: the same steps in two orders end with {earlier} and with {result}"
            ),
            vec![
                format!(
                    "every thread took the same number of steps in both executions (per-thread step counter {counter:?})"
                ),
                format!("this schedule: {}", threads(&outcome.decisions)),
                format!("the earlier schedule: {}", threads(&schedule)),
            ],
            outcome,
            schedule,
        ))
    }

    /// Whether any of `races`, found in an execution with `preemptions` preemptions, would
    /// be kept as a finding's witness. Those that would not are already reported from
    /// another execution: the stacks of their earlier sides are not worth running the
    /// execution again for (a search following a race sees it in most executions).
    pub(super) fn wants_any(&self, races: &[Finding], preemptions: u64) -> bool {
        let all = self.findings.lock().expect("lock");
        races.iter().any(|f| all.would_keep(f, preemptions))
    }

    /// Counts an execution run to its end and keeps its findings (with `different_output`,
    /// the output oracle's confirmed finding): its index, or None when it diverged from its
    /// planned prefix (the search stops).
    pub(super) fn record(
        &self,
        outcome: ExecutionOutcome,
        different_output: Option<Finding>,
        seed: u64,
        strategy: String,
        racy: Option<RacyPoints>,
        atomic_addresses: Vec<u64>,
    ) -> Option<u64> {
        self.tallies
            .steps
            .fetch_add(outcome.steps, Ordering::Relaxed);
        self.tallies
            .traced
            .fetch_add(outcome.measures.traced_accesses, Ordering::Relaxed);
        self.observed
            .patch_stats
            .lock()
            .expect("lock")
            .merge(&outcome.measures.patch_stats);
        if outcome.measures.unverified_races.0 > 0 {
            let mut u = self.observed.unverified_races.lock().expect("lock");
            u.0 += outcome.measures.unverified_races.0;
            if u.1.is_none() {
                u.1.clone_from(&outcome.measures.unverified_races.1);
            }
        }
        if outcome.measures.library_sync.0 > 0 {
            let mut l = self.observed.library_sync.lock().expect("lock");
            l.0 += outcome.measures.library_sync.0;
            if l.1.is_none() {
                l.1.clone_from(&outcome.measures.library_sync.1);
            }
        }
        if !outcome.untraced.is_empty() {
            let mut all = self.observed.untraced.lock().expect("lock");
            for u in &outcome.untraced {
                if !all.contains(u) {
                    all.push(u.clone());
                }
            }
        }
        if let Some(why) = &outcome.abandoned {
            self.tallies.abandoned.fetch_add(1, Ordering::Relaxed);
            if !self.observed.said_abandoned.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "mcheck: note: an execution was cut short without a finding: {why}; mcheck does not know what would have woken it"
                );
            }
        }
        let said_spin = |what: &String| {
            let mut said = self.observed.said_spins.lock().expect("said");
            !said.insert(what.clone())
        };
        if let Some(what) = outcome.spin_learnt.as_ref().filter(|w| !said_spin(w)) {
            eprintln!(
                "mcheck: note: {what}: a real scheduler would run the other threads meanwhile, so that load is a yield point from now on (that execution reports nothing)"
            );
        }
        if let Some(what) = &outcome.orphaned_wait {
            if !self.observed.said_orphaned.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "mcheck: note: {what}; not a deadlock, since the program still ends, but that thread never ran again (a lock that is never unlocked?)"
                );
            }
        }
        if outcome.early_end.step_limit_hit && outcome.finding.is_none() {
            self.tallies.cut.fetch_add(1, Ordering::Relaxed);
        }
        let index = self.slots.done.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(d) = outcome.divergence {
            self.stop_because(format!(
                "the program did not repeat its behaviour on a replayed schedule prefix ({d})"
            ));
            return None;
        }
        let different_end = self.different_end(&outcome);
        let output_differs = different_output.is_some();
        // The failure that ended the execution first, then the races (which may explain it).
        let found: Vec<Finding> = (outcome.finding.into_iter())
            .chain(outcome.races)
            .chain(different_end)
            .chain(different_output)
            .collect();
        if found.is_empty() {
            return Some(index);
        }
        // Only data races: without --keep-going, a search that refines its tree by races goes
        // on to find the failure they cause, for the rest of its budget. An output that
        // differs is a symptom too (of a race not found yet, often): it does not stop such a
        // search either, but is no race to note as followed.
        let races = found
            .iter()
            .filter(|f| f.kind == FindingKind::DataRace)
            .count();
        let only_races = races + usize::from(output_differs) == found.len();
        let mut all = self.findings.lock().expect("lock");
        for mut f in found {
            f.seed = seed;
            f.execution = index;
            f.preemptions = outcome.preemptions;
            f.steps = outcome.steps;
            all.keep(Witness {
                finding: f,
                decisions: outcome.decisions.clone(),
                strategy: strategy.clone(),
                racy: racy.clone(),
                atomic_addresses: atomic_addresses.clone(),
            });
        }
        drop(all);
        if self.cfg.keep_going {
            return Some(index);
        }
        if only_races && self.refine {
            if races == 0 {
                return Some(index);
            }
            let _ = (self.following_since).compare_exchange(
                0,
                index,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        } else {
            self.stop_because(super::FIRST_FINDING.into());
        }
        Some(index)
    }

    /// Whether the lock-order cycle `cycle` is to be confirmed: the first time a cycle at
    /// its source locations is seen.
    pub(super) fn claim_cycle(&self, cycle: &LockCycle) -> bool {
        let key = location_key(&cycle.finding.locations);
        self.cycles.lock().expect("lock").tried.insert(key)
    }

    /// Notes a cycle seen in execution `execution` and not confirmed.
    pub(super) fn cycle_unconfirmed(&self, mut cycle: UnconfirmedCycle, execution: u64) {
        cycle.execution = execution;
        self.cycles.lock().expect("lock").unconfirmed.push(cycle);
    }

    /// Records the deadlock a directed execution reached, confirming a lock-order cycle
    /// seen in execution `execution`: a finding like any other (the search stops at it
    /// without `--keep-going`), with the directed execution's schedule.
    pub(super) fn record_confirmed(
        &self,
        outcome: ExecutionOutcome,
        execution: u64,
        racy: Option<RacyPoints>,
        atomic_addresses: Vec<u64>,
    ) {
        self.tallies
            .steps
            .fetch_add(outcome.steps, Ordering::Relaxed);
        let Some(mut f) = outcome.finding else { return };
        f.seed = 0;
        f.execution = execution;
        f.preemptions = outcome.preemptions;
        f.steps = outcome.steps;
        let strategy = CONFIRMATION.to_string();
        self.findings.lock().expect("lock").keep(Witness {
            finding: f,
            decisions: outcome.decisions,
            strategy,
            racy,
            atomic_addresses,
        });
        if !self.cfg.keep_going {
            self.stop_because(super::FIRST_FINDING.into());
        }
    }
}
