//! The worker of a debugger's session (`mcheck replay --gdb`): every execution of the
//! session runs on it, so what one execution learns (instrumentation plans, symbols) and
//! the fork snapshots the debugger takes at scheduling decisions serve the next ones. An
//! execution may start from one of those snapshots instead of exec: the debugger's way
//! back to an earlier moment of the same schedule (rr's checkpoints).

use anyhow::Result;

use super::config::ExecutionConfig;
use super::debug_port::DebugHook;
use super::search::replay_worker;
use super::session::launch::run_execution;
use super::session::ExecutionOutcome;
use super::worker_state::{RacyPoints, WorkerState};
use crate::explore::Scheduler;
use crate::tracee::watchdog::Watchdog;

/// One debugging session's worker and its snapshots.
pub struct DebugWorker {
    worker: WorkerState,
    /// The atomic addresses the schedule was recorded with: every execution from exec
    /// starts knowing exactly these, as the first did.
    atomics: super::races::atomic_addresses::AtomicAddresses,
    /// The racy points the schedule was recorded with (an execution adds those it finds
    /// to the worker's; the next must not see them, or it schedules differently).
    racy: RacyPoints,
    _tick: Watchdog,
}

impl DebugWorker {
    /// A worker knowing the racy points and atomic addresses the schedule was recorded
    /// with; with `snapshots`, its debugger may take fork snapshots
    /// ([`super::debug_port::ProgramView::snapshot`]).
    pub fn new(racy: &RacyPoints, atomic_addresses: &[u64], snapshots: bool) -> Result<Self> {
        let (mut worker, tick) = replay_worker(racy, atomic_addresses)?;
        worker.debugger.snapshots = snapshots;
        Ok(DebugWorker {
            atomics: worker.atomic_addresses.clone(),
            racy: racy.clone(),
            worker,
            _tick: tick,
        })
    }

    /// Runs one execution of `cfg` under `sched`, watched by the debugger `debugger` makes:
    /// from exec, or with `from`, from a copy of the snapshot taken after that many
    /// decisions (the scheduler is shown the decisions before it again). `debugger` is
    /// told whether the execution starts from the snapshot: when the snapshot is gone or
    /// cannot be copied, it starts from exec.
    pub fn run(
        &mut self,
        cfg: &ExecutionConfig,
        sched: &mut dyn Scheduler,
        from: Option<usize>,
        debugger: impl FnOnce(bool) -> DebugHook,
    ) -> Result<ExecutionOutcome> {
        let key = cfg.snapshot_key();
        let copy = from.and_then(|d| {
            let copy = self
                .worker
                .snapshots
                .fork_branch_at(&key, d)
                .ok()
                .flatten()?;
            Some((d, copy))
        });
        self.worker.replace_racy_points(&self.racy);
        // What the worker knew at the snapshot, or at the start.
        self.worker.atomic_addresses = copy
            .as_ref()
            .and_then(|(d, _)| self.worker.debugger.atomics.get(d).cloned())
            .unwrap_or_else(|| self.atomics.clone());
        self.worker.debugger.hook = Some(debugger(copy.is_some()));
        self.worker.debugger.start = copy.map(|(_, c)| c);
        sched.begin_execution(0);
        run_execution(cfg, sched, &mut self.worker)
    }

    /// The depths (decisions before them) of the snapshots kept for `cfg`'s executions.
    pub fn snapshot_depths(&self, cfg: &ExecutionConfig) -> Vec<usize> {
        let mut d = self.worker.snapshots.branch_depths(&cfg.snapshot_key());
        d.sort_unstable();
        d
    }

    /// Executions started from a snapshot so far.
    pub fn restored(&self) -> u64 {
        self.worker.snapshots.restored
    }
}
