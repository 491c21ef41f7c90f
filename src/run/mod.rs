//! The executor: runs the traced program one thread at a time, turning ptrace stops into
//! model operations, asking the strategy which thread goes next, and turning what goes wrong
//! into findings. [`search`] repeats executions within the budget.

mod capture;
mod creation;
mod cut;
pub mod debug_worker;
pub mod debugger;
mod determinism;
mod execution;
mod file_journal;
mod findings;
mod fs_gate;
mod happens_before;
mod hooks;
mod instrument;
mod kernel_calls;
mod kernel_waits;
mod launch;
mod livelock;
pub mod memory_guard;
mod patching;
mod plan;
mod point_log;
mod process;
pub mod program_stdio;
mod progress;
mod races;
mod repeat_filter;
mod scan_cache;
pub mod search;
mod snapshot;
mod snapshotting;
mod stacks;
mod state_hash;
mod stops;
mod syscall_stops;
mod syscalls;
mod timeouts;
mod traps;
mod worker_state;

pub use cut::CutSignal;
pub use execution::{ExecutionConfig, ExecutionOutcome, TraceStep};
pub use launch::run_execution;
pub use patching::{patching_enabled, PatchStats};
pub use search::{SearchConfig, SearchResult, Witness};
pub use worker_state::{RacyPoints, WorkerState};
