//! The executor: runs the traced program one thread at a time, turning ptrace stops into
//! model operations, asking the strategy which thread goes next, and turning what goes wrong
//! into findings. [`search`] repeats executions within the budget.

mod capture;
mod determinism;
mod execution;
mod findings;
mod happens_before;
mod hooks;
mod livelock;
mod plan;
mod process;
mod races;
pub mod search;
mod snapshot;
mod snapshotting;
mod stacks;
mod state_hash;
mod syscalls;
mod worker_state;

pub use execution::{ExecutionConfig, ExecutionOutcome, TraceStep};
pub use search::{SearchConfig, SearchResult, Witness};
pub use worker_state::WorkerState;
