//! What an execution keeps for the snapshots it may take or came from: the startup
//! snapshot still to take, where branch snapshots may go, the scheduling points so far
//! (saved with a snapshot, shown to the strategy again on restore), and state hashing's
//! memory.

use super::point_log::PointLog;
use super::point_log::SavedPoint;
use super::snapshot;
use super::state_hash;
use crate::model::Footprint;

/// What an execution keeps for the snapshots it may take, or came from.
#[derive(Default)]
pub(in crate::run) struct SnapshotState {
    /// Set while this execution should fork the startup snapshot at its first thread
    /// creation (the key of its configuration).
    startup_key: Option<String>,
    /// Take the startup snapshot at `main` (an earlier execution created no thread).
    at_main: bool,
    /// The descriptors the program was started with (while a snapshot is wanted).
    inherited_fds: Vec<(i32, String)>,
    /// Set when this execution may take branch snapshots (a tree search): the
    /// configuration's key.
    branch_key: Option<String>,
    /// Decisions before the deepest branch snapshot on this execution's path.
    branch_depth: usize,
    /// Every point so far with its decision, saved with a snapshot (kept only while
    /// `record`: this execution may take one).
    points: PointLog,
    /// Points are kept.
    record: bool,
    /// More points than a snapshot keeps were made.
    overflowed: bool,
    /// A restored startup copy resumes its main thread first.
    resume_main: bool,
    /// What incremental state hashing keeps between points (`--state-cache`).
    hasher: state_hash::MemoryHasher,
}

impl SnapshotState {
    /// The state of an execution from exec.
    pub fn fresh() -> SnapshotState {
        SnapshotState {
            hasher: state_hash::MemoryHasher::new(None),
            ..SnapshotState::default()
        }
    }

    /// The state of an execution from a copy of a snapshot, which skipped `prefix`.
    pub fn restored(
        prefix: PointLog,
        resume_main: bool,
        memory: Option<state_hash::CopyTracking>,
    ) -> SnapshotState {
        SnapshotState {
            points: prefix,
            resume_main,
            hasher: state_hash::MemoryHasher::new(memory),
            ..SnapshotState::default()
        }
    }

    /// This execution takes the startup snapshot of configuration `key` at its first
    /// thread creation (or at `main`, when `at_main`), the program started with `fds`.
    pub fn take_startup(&mut self, key: String, fds: Vec<(i32, String)>, at_main: bool) {
        self.startup_key = Some(key);
        self.inherited_fds = fds;
        self.at_main = at_main;
    }

    /// Whether the startup snapshot is still to be taken.
    pub fn wants_startup(&self) -> bool {
        self.startup_key.is_some()
    }

    /// Whether the startup snapshot goes at `main`.
    pub fn startup_at_main(&self) -> bool {
        self.at_main && self.startup_key.is_some()
    }

    /// Takes the key of the startup snapshot to take now (given back when not taken).
    pub fn take_startup_key(&mut self) -> Option<String> {
        self.startup_key.take()
    }

    /// Gives the startup key back: the snapshot was not taken here.
    pub fn keep_startup_key(&mut self, key: String) {
        self.startup_key = Some(key);
    }

    /// This execution may take branch snapshots under `key` (`depth`: decisions before the
    /// deepest one on its path).
    pub fn may_branch(&mut self, key: Option<String>, depth: usize) {
        self.branch_key = key;
        self.branch_depth = depth;
    }

    /// Whether branch snapshots may be taken.
    pub fn branches(&self) -> bool {
        self.branch_key.is_some()
    }

    /// Keeps the points (when a snapshot may be taken).
    pub fn record_points(&mut self, on: bool) {
        self.record = on;
    }

    /// Whether a restored startup copy must first resume its main thread.
    pub fn resumes_main(&self) -> bool {
        self.resume_main
    }

    /// The points skipped by the copy this execution started from.
    pub fn skipped(&self) -> PointLog {
        self.points.clone()
    }

    /// Keeps `point` (with its decision), while points are kept.
    pub fn note_point(&mut self, point: SavedPoint) {
        if !self.record {
            return;
        }
        if self.points.len() < snapshot::MAX_PREFIX_POINTS {
            self.points.push(point);
        } else {
            self.overflowed = true;
        }
    }

    /// The step of the last kept point touched `touched` natively.
    pub fn note_ran(&mut self, touched: &Footprint) {
        if let Some(p) = self.points.last_mut().filter(|_| self.record) {
            p.ran = Some(touched.clone());
        }
    }

    /// Whether more points were made than a snapshot keeps.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Whether points are kept.
    pub fn recording(&self) -> bool {
        self.record
    }

    /// The points so far.
    pub fn points(&self) -> &PointLog {
        &self.points
    }

    /// The descriptors the program was started with.
    pub fn inherited_fds(&self) -> &[(i32, String)] {
        &self.inherited_fds
    }

    /// The key branch snapshots are taken under, when they may be.
    pub fn branch_key(&self) -> Option<&String> {
        self.branch_key.as_ref()
    }

    /// Decisions before the deepest branch snapshot on this execution's path.
    pub fn branch_depth(&self) -> usize {
        self.branch_depth
    }

    /// A branch snapshot was taken after `depth` decisions.
    pub fn branched_at(&mut self, depth: usize) {
        self.branch_depth = depth;
    }

    /// The state hashing's memory.
    pub fn hasher(&mut self) -> &mut state_hash::MemoryHasher {
        &mut self.hasher
    }

    /// Memory pages hashed anew and kept.
    pub fn hashed_pages(&self) -> (u64, u64) {
        (self.hasher.pages_hashed, self.hasher.pages_reused)
    }
}
