//! The search: executions repeated under a strategy within the budget (executions, time),
//! stopping at the first finding unless `--keep-going`, with distinct findings deduplicated
//! by kind and source locations.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::execution::{run_execution, ExecutionConfig};
use super::stacks::Symbols;
use crate::explore::Scheduler;
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

/// What a search found.
#[derive(Debug, Default)]
pub struct SearchResult {
    /// Distinct findings, in the order found.
    pub findings: Vec<Finding>,
    /// Executions run.
    pub executions: u64,
    /// The strategy exhausted the space.
    pub complete: bool,
    /// Why it stopped.
    pub stopped_because: String,
    /// Wall time.
    pub elapsed: Duration,
    /// Total scheduling decisions.
    pub steps: u64,
}

/// Progress callback: executions done, findings so far.
pub type Progress<'a> = &'a mut dyn FnMut(u64, usize);

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
    let mut seen: HashSet<(FindingKind, Vec<String>)> = HashSet::new();
    result.stopped_because = "execution budget spent".into();
    for index in 0..cfg.max_executions {
        if cfg.time_limit.is_some_and(|l| started.elapsed() >= l) {
            result.stopped_because = "time limit reached".into();
            break;
        }
        let Some(seed) = sched.begin_execution(index) else {
            result.complete = true;
            result.stopped_because = "search space exhausted".into();
            break;
        };
        let outcome = run_execution(&cfg.execution, sched, &mut symbols)?;
        result.executions += 1;
        result.steps += outcome.steps;
        if let Some(mut f) = outcome.finding {
            f.seed = seed;
            f.execution = index + 1;
            let key = (
                f.kind,
                f.locations
                    .iter()
                    .map(|l| format!("{:?}:{:?}:{:?}", l.function, l.file, l.line))
                    .collect(),
            );
            if seen.insert(key) {
                result.findings.push(f);
            }
            if !cfg.keep_going {
                result.stopped_because = "stopped at the first finding".into();
                break;
            }
        }
        progress(result.executions, result.findings.len());
    }
    if sched.exhausted() {
        result.complete = true;
    }
    result.elapsed = started.elapsed();
    Ok(result)
}
