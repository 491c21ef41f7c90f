//! Fork snapshots: the worker's store of startup and branch snapshots and what they keep of
//! the tracer, saving and restoring an execution's state, the decisions made before a
//! snapshot, hashing the program state for the state cache, and the bound on mcheck's
//! memory.

pub mod memory_guard;
pub(super) mod point_log;
pub(super) mod snapshot;
pub(super) mod snapshotting;
pub(super) mod state_hash;
