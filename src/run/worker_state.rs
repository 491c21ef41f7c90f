//! What a worker keeps from one execution to the next: symbols, the instrumentation plans of
//! the files it has seen, the addresses learnt to hold atomics, and the addresses found racy
//! (which `--preempt-on-races` turns into scheduling points).

use std::collections::HashSet;

use super::plan::PlanCache;
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
}
