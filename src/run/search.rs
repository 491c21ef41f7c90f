//! The search: executions repeated under a strategy within the budget (executions, time),
//! stopping at the first finding unless `--keep-going`. Distinct findings are deduplicated
//! by kind and source locations; for each, the witness with the fewest preemptions is kept
//! together with its schedule.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::execution::{run_execution, ExecutionConfig};
use super::stacks::Symbols;
use crate::explore::{Coverage, Decision, ExecutionSummary, Scheduler};
use crate::report::{Finding, FindingKind};
use crate::tracee::{cpu, watchdog::Watchdog};

/// Budget and behaviour of a search.
#[derive(Clone, Debug)]
pub struct SearchConfig {
    /// How to run the program.
    pub execution: ExecutionConfig,
    /// Most executions.
    pub max_executions: u64,
    /// Wall-clock budget.
    pub time_limit: Option<Duration>,
    /// Collect every distinct finding instead of stopping at the first.
    pub keep_going: bool,
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
}

/// Progress callback: executions done, findings so far.
pub type Progress<'a> = &'a mut dyn FnMut(u64, usize);

/// The identity of a finding for deduplication: kind and source locations, not addresses.
fn finding_key(f: &Finding) -> (FindingKind, Vec<String>) {
    let mut locs: Vec<String> = f
        .locations
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
    (f.kind, locs)
}

/// Runs exactly one execution under `sched` (replay), with the same setup as a search.
pub fn run_single(
    cfg: &ExecutionConfig,
    sched: &mut dyn Scheduler,
) -> Result<super::ExecutionOutcome> {
    cpu::pin_current_thread(None)?;
    let _tick = Watchdog::start(Duration::from_millis(100))?;
    let mut symbols = Symbols::default();
    sched.begin_execution(0);
    run_execution(cfg, sched, &mut symbols)
}

/// Runs the search.
pub fn search(
    cfg: &SearchConfig,
    sched: &mut dyn Scheduler,
    progress: Progress<'_>,
) -> Result<SearchResult> {
    cpu::pin_current_thread(None)?;
    let _tick = Watchdog::start(Duration::from_millis(100))?;
    let started = Instant::now();
    let mut symbols = Symbols::default();
    let mut result = SearchResult::default();
    let mut index_of: HashMap<(FindingKind, Vec<String>), usize> = HashMap::new();
    result.stopped_because = "execution budget spent".into();
    let mut index = 0;
    loop {
        if index >= cfg.max_executions {
            break;
        }
        if cfg.time_limit.is_some_and(|l| started.elapsed() >= l) {
            result.stopped_because = "time limit reached".into();
            break;
        }
        let Some(seed) = sched.begin_execution(index) else {
            result.complete = true;
            result.stopped_because = "search space exhausted".into();
            break;
        };
        let strategy = sched.describe_current();
        let outcome = run_execution(&cfg.execution, sched, &mut symbols)?;
        index += 1;
        result.executions += 1;
        result.steps += outcome.steps;
        sched.end_execution(&ExecutionSummary {
            steps: outcome.steps as usize,
            threads: outcome.threads,
            found_bug: outcome.finding.is_some(),
        });
        if let Some(d) = outcome.divergence {
            result.stopped_because = format!(
                "the program did not repeat its behaviour on a replayed schedule prefix ({d})"
            );
            break;
        }
        if outcome.step_limit_hit && outcome.finding.is_none() {
            result.cut_by_step_limit += 1;
        }
        if let Some(mut f) = outcome.finding {
            f.seed = seed;
            f.execution = index;
            let key = finding_key(&f);
            let witness = Witness {
                finding: f,
                decisions: outcome.decisions,
                strategy,
            };
            match index_of.get(&key) {
                Some(&i) => {
                    if witness.finding.preemptions < result.witnesses[i].finding.preemptions {
                        result.witnesses[i] = witness;
                    }
                }
                None => {
                    index_of.insert(key, result.witnesses.len());
                    result.witnesses.push(witness);
                }
            }
            if !cfg.keep_going {
                result.stopped_because = "stopped at the first finding".into();
                break;
            }
        }
        progress(result.executions, result.witnesses.len());
    }
    result.coverage = sched.coverage();
    result.complete |= result.coverage.exhausted;
    result.elapsed = started.elapsed();
    Ok(result)
}
