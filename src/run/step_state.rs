//! The step in progress: what the running thread touched since its step began, the
//! threads running a stretch that is not a decision of their own, the clone being made,
//! the vfork child being waited for, whether the process is ending (and who then waited on
//! an orphaned lock), and the threads whose wait timed out.

use std::collections::BTreeSet;

use crate::model::{Footprint, ThreadId};

/// The state of the step in progress (its footprint so far is kept with snapshots).
#[derive(Clone, Debug, Default)]
pub(super) struct StepState {
    /// What the running thread touched since its step began, beyond its operation (atomic
    /// locations accessed with plain instructions, libc-internal lock operations).
    pub segment: Footprint,
    /// Threads running a stretch that is not a decision of its own (`on_clone`): a parent
    /// from its clone to its next point, a new thread from its start to its first one.
    /// Empty at every scheduling point.
    pub creation_stretch: BTreeSet<ThreadId>,
    /// (flags, child_tid, tls) of the clone the running thread is making.
    pub pending_clone: Option<(u64, u64, u64)>,
    /// The process is ending (exit_group, a fatal signal): only its end matters now.
    pub group_exiting: bool,
    /// The threads that waited forever on a lock whose owner had exited, when the process
    /// began to exit (exit_group): a note, not a deadlock, since the program ends.
    pub orphaned_at_exit: Vec<crate::model::BlockedThread>,
    /// The vfork child of the running thread, until it execs or ends.
    pub vfork_child: Option<nix::unistd::Pid>,
    /// Threads whose last wait timed out and which have not begun another wait since: what
    /// they write to atomics is what their timeout sets (`races::timeout_polls`).
    pub timed_out: BTreeSet<ThreadId>,
}

impl StepState {
    /// What a snapshot keeps: the footprint of the step so far and the threads after a
    /// timeout (the rest is empty at the points where snapshots are taken).
    pub fn saved(&self) -> StepState {
        StepState {
            segment: self.segment.clone(),
            timed_out: self.timed_out.clone(),
            ..StepState::default()
        }
    }
}
