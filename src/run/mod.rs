//! The executor: runs the traced program one thread at a time, turning ptrace stops into
//! model operations, asking the strategy which thread goes next, and turning what goes wrong
//! into findings. [`search`] repeats executions within the budget.

mod capture;
mod determinism;
mod execution;
mod hooks;
mod process;
pub mod search;
mod stacks;
mod syscalls;

pub use execution::{ExecutionConfig, ExecutionOutcome, TraceStep};
pub use search::{SearchConfig, SearchResult, Witness};
