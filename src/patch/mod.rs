//! Binary patching of memory-access sites, so that accesses are recorded inside the tracee
//! without a ptrace stop (no ptrace here: this layer computes bytes and addresses; the
//! executor writes them).
//!
//! - [`log_layout`]: the in-tracee access log and its records.
//! - [`trampoline`]: the code a patched site jumps to (log, relocated instruction, back).
//! - [`wrapper`]: the code an allocator's hook jumps to: the call made, its result logged.
//! - [`jump`]: the jump written over a site, plain or punned, and the windows it reaches.
//! - [`space`]: address space for trampolines.
//! - [`planner`]: plans a batch of sites over a copy of the current code.
//! - [`table`]: what is patched in one process, and which patches a byte change breaks.

pub mod jump;
pub mod log_layout;
pub mod planner;
pub mod space;
pub mod table;
#[cfg(test)]
mod testing;
pub mod trampoline;
pub mod wrapper;

pub use log_layout::{LogLayout, Record};
pub use planner::{
    broken_jumps, plan, plan_entries, plan_out_of_line, Code, EntryRequest, Plan, Planned, Refusal,
    SiteRequest,
};
pub use space::{free_ranges, CodeSpace};
pub use table::{PatchTable, PatchedSite};
pub use trampoline::{EntrySite, Exit, Kind, Measure, TrampolineMeta};
