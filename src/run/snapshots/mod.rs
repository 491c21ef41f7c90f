//! Fork snapshots: the worker's store of startup and branch snapshots and what they keep of
//! the tracer, saving and restoring an execution's state, the decisions made before a
//! snapshot, hashing the program state for the state cache, and the bound on mcheck's
//! memory.

pub mod memory_guard;
pub(super) mod point_log;
pub(super) mod snapshot;
pub(super) mod state;
pub(super) mod state_hash;

/// Fork snapshots and state hashing.
#[derive(Clone, Debug)]
pub struct SnapshotConfig {
    /// Start executions from a fork snapshot taken at the first thread creation.
    pub snapshots: bool,
    /// Most resident memory a worker's snapshots may hold.
    pub snapshot_memory: u64,
    /// States are hashed at points (`--state-cache`): fork copies of a program with much
    /// memory are write-tracked from their start (`state_hash`).
    pub state_cache: bool,
    /// Snapshots at branch points of a tree search too (else executions replay their
    /// prefix from the startup snapshot; `MCHECK_BRANCH_SNAPSHOTS=off`, to compare).
    pub branches: bool,
}

/// Whether branch snapshots are taken (`MCHECK_BRANCH_SNAPSHOTS=off` turns them off, so that
/// a search from them can be compared with the same search without them).
pub fn branch_snapshots_enabled() -> bool {
    std::env::var("MCHECK_BRANCH_SNAPSHOTS").map_or(true, |v| v != "off")
}
