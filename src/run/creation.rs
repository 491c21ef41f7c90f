//! Thread creation: the clone event, and the start of new threads within the step that
//! created them (thread creation is not a scheduling point while races are traced).

use anyhow::Result;
use nix::unistd::Pid;

use super::execution::{Execution, ExecutionOutcome, RunResult};
use super::process::{StopPlace, TracedThread};
use crate::model::{Op, ThreadId};
use crate::tracee::events;

pub(super) const CLONE_THREAD: u64 = 0x0001_0000;
const CLONE_VM: u64 = 0x0000_0100;
pub(super) const CLONE_CHILD_CLEARTID: u64 = 0x0020_0000;
pub(super) const CLONE_SETTLS: u64 = 0x0008_0000;

impl Execution<'_> {
    pub(super) fn on_clone(&mut self, t: ThreadId, child: Pid) -> Result<Option<RunResult>> {
        let (flags, ctid, tls) = self.pending_clone.take().unwrap_or((CLONE_THREAD, 0, 0));
        let parent_tid = self.p.threads[t].tid;
        if flags & CLONE_THREAD == 0 {
            self.adopt_foreign(child, flags & CLONE_VM == 0)?;
            events::resume(parent_tid, None)?;
            return Ok(None);
        }
        let id = self.model.add_thread();
        let started = self.p.early_stops.remove(&child);
        let clear_tid = if flags & CLONE_CHILD_CLEARTID != 0 {
            ctid
        } else {
            0
        };
        let handle = if flags & CLONE_SETTLS != 0 { tls } else { 0 };
        self.p
            .threads
            .push(TracedThread::new(child, started, clear_tid, handle));
        self.p.by_tid.insert(child, id);
        if let Some(d) = self.races.detector() {
            d.thread_created(t, id);
        }
        debug_assert_eq!(self.p.threads.len(), id + 1);
        if !self.eager_starts() {
            // Without race detection nothing tells what the parent and the new thread do
            // before their next operations: the parent's step after the clone and the new
            // thread's start are decisions of their own. Out of the clone event, to the
            // syscall's exit, so that the parent can be copied into a snapshot.
            if let Some(sig) = events::finish_syscall_in_event(parent_tid)? {
                self.p.threads[t].pending_signal = Some(sig);
            }
            self.p.threads[t].place = StopPlace::Event;
            return self.point(t, Op::Continue, 0);
        }
        // Creating a thread is not a scheduling point: the parent runs on to its next
        // operation, and the new thread starts right after (`start_new_threads`). Until
        // then, what either does that another thread could order itself against without a
        // data race (an access the binary says is atomic; exit_group, a point anyway while
        // other threads live) becomes a scheduling point. What is left commutes with every
        // other thread's steps up to data races, which the detector reports whatever the
        // order; glibc-internal locking stays part of its libc call, as in every step.
        self.creation_stretch.insert(t);
        self.sync_log_mode(t);
        events::resume(parent_tid, None)?;
        Ok(None)
    }

    /// Whether thread creation runs the parent on and starts the new thread within the
    /// creating step: only with race detection, which traces the accesses that end such a
    /// stretch.
    pub(super) fn eager_starts(&self) -> bool {
        self.races.on()
    }

    /// Runs every thread that has not started yet up to its first operation, in creation
    /// order, as part of the step that created it (no scheduling decision: see `on_clone`).
    /// Threads those create in turn start by a decision of their own, so that a chain of
    /// thread creations still counts against `--max-steps`. Some when the execution ended
    /// on the way.
    pub(super) fn start_new_threads(&mut self) -> Result<Option<ExecutionOutcome>> {
        if !self.eager_starts() {
            return Ok(None);
        }
        let new: Vec<ThreadId> = (0..self.model.thread_count())
            .filter(|&u| matches!(self.model.pending(u), Some(Op::Start)))
            .collect();
        for u in new {
            let completion = match self.execute_op(u) {
                Ok(c) => c,
                Err(f) => {
                    let f = self.model_finding(f);
                    return Ok(Some(self.outcome(Some(f))));
                }
            };
            if let Some(f) = self.complete(u, completion)? {
                return Ok(Some(self.outcome(Some(f))));
            }
            self.creation_stretch.insert(u);
            self.sync_log_mode(u);
            let r = self.resume_and_run(u)?;
            if let Some(done) = self.settle(u, r)? {
                return Ok(Some(done));
            }
            if self.model.is_finished(u) {
                // Gone within the step: a join of it depends on this step.
                self.segment.touch_exit(u);
            }
        }
        Ok(None)
    }

    /// Whether a thread other than `t` has not finished.
    pub(super) fn others_live(&self, t: ThreadId) -> bool {
        (0..self.model.thread_count()).any(|u| u != t && !self.model.is_finished(u))
    }
}
