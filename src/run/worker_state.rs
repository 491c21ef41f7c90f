//! What a worker keeps from one execution to the next: symbols, the instrumentation plans of
//! the files it has seen, the addresses learnt to hold atomics, and the addresses found racy
//! (which `--preempt-on-races` turns into scheduling points), the fork snapshots and the
//! stderr pipe its executions share.

use std::collections::HashSet;

use super::capture::StderrCapture;
use super::cut::CutSignal;
use super::plan::PlanCache;
use super::snapshot::Snapshots;
use super::stacks::Symbols;

/// A worker's memory across executions.
#[derive(Default)]
pub struct WorkerState {
    /// Symbolization state.
    pub symbols: Symbols,
    /// Instrumentation plans by file.
    pub plans: PlanCache,
    /// Addresses accessed by atomic instructions in some execution.
    pub atomic_addresses: HashSet<u64>,
    /// Addresses found racy in some execution.
    pub racy_addresses: HashSet<u64>,
    /// The fork snapshots of the program (templates kept stopped).
    pub snapshots: Snapshots,
    /// The executions' stderr (one pipe for all, since templates keep it open).
    pub capture: Option<StderrCapture>,
    /// Raised when the search must stop now: the running execution is cut short.
    pub cut: CutSignal,
}
