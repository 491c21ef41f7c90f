//! The machine-readable report written by `--json FILE` (schema in docs/report-format.md).

use serde::Serialize;

use super::Finding;
use crate::explore::Coverage;

/// A racy access site: its instruction and where it is in the source.
#[derive(Serialize)]
pub struct JsonSite {
    /// The instruction's address, hex.
    pub address: String,
    /// `function at file:line` when a race finding names it, else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

impl JsonSite {
    /// Sites named after the stacks of the race findings, else as `names` (the search's
    /// names of its learnt points) says.
    pub fn list(sites: &[u64], findings: &[Finding], names: &[(u64, String)]) -> Vec<JsonSite> {
        (sites.iter())
            .map(|&pc| {
                let address = format!("{pc:#x}");
                let named = || {
                    let (_, name) = names.iter().find(|(at, _)| *at == pc)?;
                    (!name.is_empty()).then(|| name.clone())
                };
                let location = (findings.iter())
                    .flat_map(|f| f.threads.iter())
                    .filter_map(|t| t.stack.first())
                    .find(|frame| frame.address == address)
                    .map(super::Frame::short)
                    .or_else(named);
                JsonSite { address, location }
            })
            .collect()
    }
}

/// What the search covered.
#[derive(Serialize)]
pub struct JsonCoverage {
    /// Every schedule was explored, with the orders of every racy access site found.
    pub exhausted: bool,
    /// The tree of schedules ran out (synchronisation order and the racy sites included).
    pub synchronisation_exhausted: bool,
    /// Racy access sites that were scheduling points of the tree.
    pub racy_sites_included: Vec<JsonSite>,
    /// Racy access sites found whose orders were not explored.
    pub racy_sites_not_explored: Vec<JsonSite>,
    /// Reads of what a timed-out wait sets that were scheduling points of the tree (a
    /// waiting thread's timeout explored right before each); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeout_polls_included: Vec<JsonSite>,
    /// Such reads found that the tree did not hold as points; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeout_polls_not_explored: Vec<JsonSite>,
    /// Atomic loads of busy waits that were yield points of the tree (a thread spun there
    /// with no scheduling point while another could run); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub busy_waits_included: Vec<JsonSite>,
    /// Refinement rounds of the tree (new trees with more racy sites as points).
    pub refinement_rounds: u32,
    /// Every execution with at most this many preemptions was explored.
    pub preemption_bound_completed: Option<u32>,
    /// icb was reduced by bounded partial-order reduction: `preemption_bound_completed`
    /// holds up to the order of independent steps.
    pub up_to_independent_steps: bool,
    /// The preemption cap left executions with more preemptions unexplored (`exhausted`
    /// then holds up to the cap).
    pub beyond_preemption_bound: bool,
    /// Executions run by the systematic strategy (dfs/icb, or the portfolio's icb member).
    pub systematic_executions: u64,
    /// Why one execution covered everything, when it did: `no_thread` (the program created
    /// no thread), `no_choice` (never two threads could run at one point).
    pub nothing_to_explore: Option<&'static str>,
    /// The same facts in one sentence.
    pub statement: String,
}

impl JsonCoverage {
    /// From the strategy's coverage and the sentence printed for it; racy sites are named
    /// after the stacks of `findings`.
    pub fn new(c: &Coverage, statement: String, findings: &[Finding]) -> Self {
        JsonCoverage {
            exhausted: c.exhausted,
            synchronisation_exhausted: c.synchronisation_exhausted,
            racy_sites_included: JsonSite::list(&c.racy_sites_included, findings, &c.site_names),
            racy_sites_not_explored: JsonSite::list(
                &c.racy_sites_not_explored,
                findings,
                &c.site_names,
            ),
            timeout_polls_included: JsonSite::list(&c.poll_sites_included, findings, &c.site_names),
            timeout_polls_not_explored: JsonSite::list(
                &c.poll_sites_not_explored,
                findings,
                &c.site_names,
            ),
            busy_waits_included: JsonSite::list(&c.spin_sites_included, findings, &c.site_names),
            refinement_rounds: c.refinement_rounds,
            preemption_bound_completed: c.preemption_bound_completed,
            up_to_independent_steps: c.up_to_independent_steps,
            beyond_preemption_bound: c.beyond_preemption_bound,
            systematic_executions: c.systematic_executions,
            nothing_to_explore: None,
            statement,
        }
    }
}

/// This machine's part of a split search (`--shard I/N`).
#[derive(Debug, Clone, Serialize)]
pub struct JsonShard {
    /// 1-based shard index.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
    /// Index of the shard's first execution in the unsharded search (randomised strategies;
    /// its seed is the report's `seed`).
    pub first_execution: u64,
    /// Runs that were another shard's (not executions): prefixes stopped where no choice was
    /// this shard's within the preemption bound, and schedules with too few choices to
    /// split, which the first shard of their range counts.
    pub runs_outside_share: u64,
}

/// Version of the JSON report format.
pub const REPORT_VERSION: u32 = 3;

/// The top-level JSON object.
#[derive(Serialize)]
pub struct JsonReport<'a> {
    /// Format version.
    pub version: u32,
    /// mcheck's own version.
    pub mcheck_version: &'static str,
    /// The program checked, as given.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The strategy used.
    pub strategy: &'static str,
    /// The search's base seed.
    pub seed: u64,
    /// Executions run.
    pub executions: u64,
    /// Scheduling decisions taken, over all executions (replayed prefixes included).
    pub decisions: u64,
    /// Transitions executed, not counting replayed prefixes (the steps each execution took
    /// after leaving the path of an earlier one).
    pub transitions: u64,
    /// Of those, the ones chosen among more than one runnable thread: the states explored
    /// (a forced step only continues the state before it).
    pub states: u64,
    /// What the state cache saw (`--state-cache`; absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_cache: Option<crate::explore::CacheStats>,
    /// Whether the search space was exhausted.
    pub complete: bool,
    /// What was covered.
    pub coverage: JsonCoverage,
    /// Why the search stopped.
    pub stopped_because: &'a str,
    /// Wall time in seconds.
    pub elapsed_seconds: f64,
    /// Executions ended early when the search stopped (time limit, interrupt, memory
    /// limit); counted in `executions`, they report nothing.
    pub cut_short: u64,
    /// The step limit of one execution (`--max-steps`).
    pub max_steps: u64,
    /// Executions cut at `--max-steps` before the program ended (no livelock finding).
    pub cut_at_max_steps: u64,
    /// Executions cut short while a thread waited in the kernel for something mcheck does
    /// not control.
    pub cut_waiting_on_kernel: u64,
    /// Executions that ran to the program's end or to a finding.
    pub ran_to_end: u64,
    /// The most memory mcheck held at once (tracer and snapshots), in bytes.
    pub memory_peak_bytes: u64,
    /// How executions were started.
    pub snapshots: JsonSnapshots,
    /// How memory accesses were recorded (race detection).
    pub access_recording: JsonAccessRecording,
    /// The findings, in the order found.
    pub findings: &'a [Finding],
    /// Lock-order cycles executions showed that were not confirmed, so not reported: the
    /// directed executions that held each thread before its second lock did not deadlock.
    pub lock_order_cycles_not_confirmed: &'a [crate::run::search::UnconfirmedCycle],
    /// Directed executions run to confirm lock-order cycles (not counted in `executions`).
    pub lock_order_confirmation_executions: u64,
    /// Processes of the program that ran unchecked, or were checked only in part (absent
    /// when every process was checked).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub untraced_processes: &'a [crate::report::UntracedProcess],
    /// This machine's part of a split search (`--shard I/N`); absent for a whole search.
    /// `complete` then means that this part was exhausted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<JsonShard>,
    /// Order-independent digest (16 hex digits) of the schedules of the executions run to
    /// their end: the wrapping sum of a 64-bit hash of each. The shards of one search add up
    /// to the unsharded search's digest when together they ran the same schedules.
    pub schedule_digest: String,
}

/// How memory accesses were recorded for race detection.
#[derive(Serialize, Default)]
pub struct JsonAccessRecording {
    /// Accesses recorded over all executions.
    pub accesses: u64,
    /// Of those, accesses recorded at a breakpoint (two ptrace stops each).
    pub accesses_at_breakpoints: u64,
    /// Access sites patched to record without a stop (in the most instrumented execution).
    pub sites_patched: u64,
    /// Access sites left on breakpoints (two ptrace stops per access).
    pub sites_on_breakpoints: u64,
    /// Instructions next to short sites that were moved to make room for their jumps.
    pub neighbours_moved: u64,
    /// The program's calls of libc memory functions (memcpy, memcmp, memset, write...)
    /// hooked to record their ranges without a stop: PLT stubs and calls through GOT slots.
    pub memory_calls_patched: u64,
    /// Why sites were left on breakpoints, with how many each.
    pub breakpoint_reasons: std::collections::BTreeMap<&'static str, u64>,
    /// Times a thread was stopped inside generated code (a signal, an interrupt) and moved
    /// back to its original instruction, over all executions.
    pub moved_out_of_generated_code: u64,
    /// Races between plain loads and stores in code without debug information (possibly
    /// relaxed atomics of the source), counted and not reported as findings.
    pub unverified_races: u64,
    /// The first of them: the memory and the module.
    pub first_unverified_race: Option<String>,
}

/// Use of fork snapshots in the search.
#[derive(Serialize)]
pub struct JsonSnapshots {
    /// Executions started from a fork snapshot instead of exec.
    pub executions_from_snapshot: u64,
    /// Of those, executions started from a snapshot at a branch point of dfs/icb.
    pub executions_from_branch_snapshot: u64,
    /// Snapshots taken at branch points of dfs/icb.
    pub branch_snapshots: u64,
    /// Why snapshots were turned off, if they were (null otherwise, or with
    /// `--no-snapshots`).
    pub off_because: Option<String>,
}

/// Writes the report to `path`.
pub fn write(path: &std::path::Path, report: &JsonReport<'_>) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}
