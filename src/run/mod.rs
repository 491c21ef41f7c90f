//! The executor: runs the traced program one thread at a time, turning ptrace stops into
//! model operations, asking the strategy which thread goes next, and turning what goes wrong
//! into findings. [`search`] repeats executions within the budget.
//!
//! The executor is made of parts, each a folder that owns its state:
//! - [`process`]: the traced process and its stops (threads, memory, waiting, killing),
//!   and the symbolized stacks of its threads;
//! - [`instrument`]: what mcheck changes in the program's code (hooks, atomic and PAUSE
//!   points, patched access sites and the access log) and the per-file plans;
//! - [`races`]: race recording (the detector, happens-before edges, the races found);
//! - [`kernel`]: system calls that wait for the kernel, and timeouts as choices;
//! - [`world`]: the program's world: determinism, its files, its stdio;
//! - [`snapshots`]: fork snapshots and what they keep, state hashing, the memory bound.
//!
//! The execution itself (`execution.rs`, with `stops.rs` and `traps.rs`) composes them.

mod config;
pub mod debug_port;
pub mod debug_worker;
mod history;
mod instrument;
mod kernel;
mod locks;
mod process;
mod progress;
mod races;
pub mod search;
mod session;
mod snapshots;
mod step_state;
mod worker_state;
mod world;

pub use config::{
    branch_snapshots_enabled, ExecutionConfig, InstrumentConfig, Limits, ProgramSetup,
    SnapshotConfig,
};
pub use history::TraceStep;
pub use instrument::patching::patching_enabled;
pub use instrument::sites::PatchStats;
pub use process::cut::CutSignal;
pub use search::{SearchConfig, SearchResult, Witness};
pub use session::launch::run_execution;
pub use session::ExecutionOutcome;
pub use snapshots::memory_guard;
pub use worker_state::{RacyPoints, WorkerState};
pub use world::program_stdio;
pub use world::written_files;
