//! The session of one execution: a composition of the executor's parts (the process and
//! its code edits, the model, race recording, instrumentation, kernel waits, the world,
//! snapshots, the history of decisions, the step in progress), that takes one step at a
//! time, as rr's replay session does. A driver ([`drive`]: the search's, replay's and the
//! debugger's) asks [`Session::choices`] at each scheduling point, picks a thread with its
//! strategy, records the decision ([`Session::decide`]) and has it carried out
//! ([`Session::step`]): the thread's operation in the model, then the thread natively to
//! its next scheduling point, which returns a [`Stop`]. The session knows no strategy; a
//! debugger looks in through the port it is given (`debug_port.rs`, `debugging.rs`).
//!
//! Its methods live in three files: this one (composition, the driver's side, operations
//! carried out, outcomes and findings), `stops.rs` (running a thread to its next stop,
//! seccomp stops, thread creation) and `traps.rs` (breakpoint stops, the access log). Three
//! roles act on the whole session: `tree.rs` (the process tree: the current process, forks,
//! execs), `snapshotting.rs` (taking fork snapshots) and `debugging.rs` (the debugger's
//! door). `outcome.rs` holds what executions and steps come to. `launch.rs` chooses where
//! an execution starts (a snapshot copy or exec) and makes the session. Every exit path
//! kills and reaps the whole process tree.

mod debugging;
pub(super) mod drive;
pub(super) mod launch;
mod outcome;
mod snapshotting;
mod stops;
mod traps;
mod tree;

use std::collections::HashMap;

use anyhow::Result;
use nix::sys::signal::Signal;

use super::config::ExecutionConfig;
use super::history::{Decided, History, TraceStep};
use super::instrument::code::{BreakpointKind, CodeEdits};
use super::instrument::hooks::Hook;
use super::instrument::hooks::{Convention, HookContext};
use super::kernel::kernel_waits::KernelWaits;
use super::kernel::syscalls::TimeSource;
use super::kernel::timeouts;
use super::kernel::timeouts::Offer;
use super::locks::{LockCycle, LockRecording, NamedEdge};
use super::process::report::{describe_deadlock, finding, signal_is_caught, Reporter};
use super::process::stacks::primary_location;
use super::process::{Process, StopPlace};
use super::races::happens_before;
use super::races::{PendingReturn, RaceRecording, ReturnAction, Seen};
use super::snapshots::point_log::SavedPoint;
use super::snapshots::snapshot::Restored;
use super::snapshots::state::SnapshotState;
use super::snapshots::state_hash;
use super::step_state::StepState;
use super::worker_state::WorkerState;
use crate::explore::Divergence;
use crate::model::{
    address_of, in_space, Completion, Footprint, MemoryView, Model, ModelFinding, ObjectKind, Op,
    ThreadId,
};
use crate::report::{Finding, FindingKind, ThreadReport};
use crate::tracee::events;

pub(super) use outcome::{Choices, Executed, ProcessEnd, RunResult, Stop};
pub use outcome::{EarlyEnd, ExecutionMeasures, ExecutionOutcome};

/// The race recording part and what it reads of the execution ([`super::races::Env`]), as
/// two disjoint borrows of the execution `$s`.
macro_rules! race_env {
    ($s:expr) => {
        (
            &mut $s.races,
            $crate::run::races::Env {
                p: &$s.p,
                code: &$s.code,
                symbols: &mut $s.worker.symbols,
                atomics: &mut $s.worker.atomic_addresses,
                repeats: &mut $s.worker.repeats,
                atomic_ranges: $s.instr.atomic_ranges(),
                threads: $s.model.thread_count(),
                segment: &mut $s.step.segment,
                space: $s.p.space(),
                polls: $crate::run::races::timeout_polls::TimeoutPollView {
                    timed_out: &$s.step.timed_out,
                    signals: &mut $s.worker.timeout_signals,
                },
            },
        )
    };
}
pub(super) use race_env;

pub(super) struct Session<'a> {
    pub(super) cfg: &'a ExecutionConfig,
    pub(super) p: Process,
    /// What mcheck changed in the program's code (`instrument/code.rs`).
    pub(super) code: CodeEdits,
    pub(super) model: Model,
    pub(super) worker: &'a mut WorkerState,
    /// Race recording (`races.rs`).
    pub(super) races: RaceRecording,
    /// Return breakpoints waiting, by address.
    pub(super) returns: HashMap<u64, Vec<PendingReturn>>,
    /// The instrumentation of the program (`instrument/`).
    pub(super) instr: super::instrument::Instrumentation,
    /// The running thread's clock (`--execution-timeout`).
    pub(super) watchdog: super::progress::Watchdog,
    /// Where the running thread was blocked when the execution was abandoned.
    pub(super) abandoned: Option<String>,
    /// The busy wait the execution was stopped at, to be a yield point from the next
    /// execution on (`spin_to_learn`): the thread and the atomic load's instruction.
    pub(super) spin_learnt: Option<(ThreadId, u64)>,
    /// The first thread that started a Rust panic, with its stack.
    pub(super) panic: Option<ThreadReport>,
    /// What the execution keeps for snapshots (`snapshots/`).
    pub(super) snaps: SnapshotState,
    /// What the execution did, decision by decision (`history.rs`).
    pub(super) history: History,
    /// The program's world: determinism, its files (`world/`).
    pub(super) world: super::world::World,
    /// The step in progress (`step_state.rs`).
    pub(super) step: StepState,
    /// Threads waiting in the kernel and what they wait for (`run/kernel_waits.rs`).
    pub(super) kernel: KernelWaits,
    /// The processes of the tree that are not current (`tree.rs`).
    pub(super) tree: tree::Tree,
    /// The lock-order graph of the execution (`locks/`).
    pub(super) locks: LockRecording,
}

impl<'a> Session<'a> {
    /// The taking of snapshots of this execution.
    fn snapshotting(&mut self) -> snapshotting::Snapshotting<'_, 'a> {
        snapshotting::Snapshotting(self)
    }

    /// The process tree of this execution.
    fn processes(&mut self) -> tree::Processes<'_, 'a> {
        tree::Processes(self)
    }

    /// The debugger's door into this execution.
    fn debug(&mut self) -> debugging::Debugging<'_, 'a> {
        debugging::Debugging(self)
    }

    /// Begins an execution from exec: the auxiliary vector made deterministic, and a
    /// breakpoint at the program's entry (where the libraries are mapped).
    pub(super) fn begin(&mut self) -> Result<()> {
        self.processes().begin_image(0)
    }

    /// Whether the main thread must first be run to its first scheduling point: from exec,
    /// or in a copy of the startup snapshot (a branch copy is at a point already).
    pub(super) fn starts_with_main(&self, from_exec: bool) -> bool {
        from_exec || self.snaps.resumes_main()
    }

    /// Runs the main thread from where the execution begins to its first scheduling point.
    /// In a copy that skipped decisions (`skipped`), that finishes the step the snapshot
    /// interrupted: its footprint is returned, to be shown to the strategy; from exec it
    /// becomes part of the first step's.
    pub(super) fn run_main(&mut self, skipped: bool) -> Result<Stop> {
        let first = self.resume_and_run(0)?;
        let mut done = self.settle(0, first)?;
        if done.is_none() {
            done = self.start_new_threads()?;
        }
        let touched = skipped.then(|| self.end_of_step());
        Ok(match done {
            Some(out) => Stop::End(Box::new(out), touched),
            None => Stop::Point(touched),
        })
    }

    /// The choices at the next scheduling point, or the end of the execution (the program
    /// ended, deadlocked, or reached `--max-steps`; or the search cut it short).
    pub(super) fn choices(&mut self) -> Result<Choices> {
        loop {
            if self.worker.cut.raised() {
                return Ok(Choices::End(Box::new(self.cut_short())));
            }
            self.recheck_kernel_waits();
            let offer = timeouts::offer(
                &self.model,
                self.history.early_timeouts(),
                self.cfg.limits.max_timeouts,
                self.cfg.limits.early_timeout_horizon_ns,
            );
            if offer.choices.is_empty() {
                if let Some(end) = self.processes().root_ended() {
                    if self.kernel.waits_for_outside(&self.p, &self.model) {
                        // The program has ended; what it left running waits for the world
                        // outside, as it would after the shell returned: it is killed, and
                        // the summary says it was checked only in part.
                        self.p.killed_at_end();
                        return Ok(Choices::End(Box::new(self.ended(end))));
                    }
                }
                if self.model.all_finished() {
                    let end = self.wait_process_end()?;
                    return Ok(Choices::End(Box::new(self.ended(end))));
                }
                if self.kernel.waits_for_outside(&self.p, &self.model) {
                    if self.wait_for_outside()? {
                        continue;
                    }
                    let f = self.outside_finding();
                    return Ok(Choices::End(Box::new(self.outcome(Some(f)))));
                }
                let f = self.model_finding(self.model.global_deadlock());
                return Ok(Choices::End(Box::new(self.outcome(Some(f)))));
            }
            let steps = self.history.steps();
            if self.cfg.limits.max_steps.is_some_and(|m| steps >= m) {
                let finished = |t| self.model.is_finished(t);
                let mut rep = super::process::report::Reporter {
                    p: &self.p,
                    symbols: &mut self.worker.symbols,
                };
                let mut finding = self.history.livelock_finding(&mut rep, finished);
                if let Some(f) = &mut finding {
                    f.details.extend(self.blocked_details());
                }
                let mut out = self.outcome(finding);
                out.early_end.step_limit_hit = true;
                return Ok(Choices::End(Box::new(out)));
            }
            return Ok(Choices::At(offer));
        }
    }

    /// Decisions taken so far.
    pub(super) fn steps(&self) -> u64 {
        self.history.steps()
    }

    /// A hash of the program's state now (`--state-cache`).
    pub(super) fn state_hash(&mut self) -> Result<u64> {
        if self.p.forked() {
            // Only the current process's memory would be hashed: a state never seen before,
            // so that nothing is pruned.
            static UNIQUE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
            let n = UNIQUE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995);
        }
        let tracer_state = self.tracer_state();
        state_hash::state_hash(
            &self.p,
            tracer_state,
            self.snaps.hasher(),
            self.p.syscall_insn,
        )
    }

    /// The scheduling point offering `offer`, `current` having run last: the threads the
    /// fair filter lets the strategy choose, with their operations and footprints, the
    /// threads that cannot be chosen, and the timeouts on offer.
    pub(super) fn scheduling_point(
        &mut self,
        offer: &Offer,
        current: Option<ThreadId>,
    ) -> SavedPoint {
        let schedulable = self.history.schedulable(&offer.choices);
        let ops: Vec<&'static str> = schedulable
            .iter()
            .map(|&u| self.model.choice_name(u))
            .collect();
        let current_yields = current.is_some_and(|c| {
            matches!(self.model.pending(c), Some(Op::Yield | Op::Sleep { .. }))
                || offer.timeouts.contains(&c)
        });
        let footprints: Vec<Footprint> = schedulable
            .iter()
            .map(|&u| self.model.choice_footprint(u))
            .collect();
        // Threads that cannot be chosen here: blocked ones, timed waits whose timeout is
        // not offered, and enabled ones the fair filter holds back.
        let blocked: Vec<(ThreadId, Footprint)> = (0..self.model.thread_count())
            .filter(|u| !schedulable.contains(u) && self.model.pending(*u).is_some())
            .map(|u| (u, self.model.choice_footprint(u)))
            .collect();
        let timeouts: Vec<ThreadId> = (offer.timeouts.iter())
            .filter(|u| schedulable.contains(u))
            .copied()
            .collect();
        SavedPoint {
            enabled: schedulable,
            ops,
            footprints,
            blocked,
            timeouts,
            ran: None,
            current,
            current_yields,
            step: self.history.steps() as usize,
            chosen: 0,
        }
    }

    /// Shows the debugger (if any) decision `t` before it is carried out; true when the
    /// debugger ends the execution there.
    pub(super) fn debugger_at_decision(&mut self, t: ThreadId) -> Result<bool> {
        if !self.debugging() {
            return Ok(false);
        }
        let ev = super::debug_port::DebugEvent::Point {
            step: self.history.steps(),
            thread: t,
        };
        if self.debug().debug_event(ev) == super::debug_port::Resume::Kill {
            return Ok(true);
        }
        Ok(self.model.pending(t) == Some(&Op::ExitGroup)
            && self.debug().debug_exiting(t)? == super::debug_port::Resume::Kill)
    }

    /// Records the decision to run `point.chosen` at `point` (out of `offer`): the
    /// history, the points a snapshot keeps, the readable trace. True when the execution
    /// is to stop here (`--until`).
    pub(super) fn decide(&mut self, mut point: SavedPoint, offer: &Offer) -> bool {
        let t = point.chosen;
        let preemption = point.point().is_preemption(t);
        let op = point.ops[point.enabled.iter().position(|&u| u == t).unwrap_or(0)];
        let times_out = point.timeouts.contains(&t);
        // A timeout is a yield for fairness: a thread that keeps timing out without
        // progress lets the threads it starves run first; so is a trylock bound to fail.
        let yields = times_out
            || self.model.pending(t).is_some_and(Op::yields_for_fairness)
            || self.model.pending_try_fails(t);
        let site = self.model.pending_site(t);
        let choice = point.enabled.len() > 1;
        point.ran = None;
        self.snaps.note_point(point);
        if self.cfg.trace {
            let step = self.trace_step(t, op);
            self.history.trace(step);
        }
        self.history.record(Decided {
            thread: t,
            op,
            enabled: &offer.choices,
            choice,
            preemption,
            early_timeout: times_out && offer.runnable,
            yield_state: yields.then(|| yield_state(&self.model, site)),
            site: (site, self.p.threads[t].place == StopPlace::Breakpoint(site)),
        });
        self.cfg
            .limits
            .stop_after
            .is_some_and(|n| self.history.steps() >= n)
    }

    /// Carries out the decision to run `t`: its operation in the model, then the thread
    /// natively to its next scheduling point (with the threads it creates, to their first).
    pub(super) fn step(&mut self, t: ThreadId) -> Result<Stop> {
        self.processes().focus(t);
        let mut executed = match self.execute_op(t) {
            Ok(executed) => executed,
            Err(f) => {
                let f = self.model_finding(f);
                return Ok(Stop::End(Box::new(self.outcome(Some(f))), None));
            }
        };
        executed.completion = self.kernel.finish(&mut self.p, t, executed.completion)?;
        if executed.completion == Completion::Blocked {
            return Ok(Stop::Blocked);
        }
        if let Some(f) = self.complete(t, &executed)? {
            return Ok(Stop::End(Box::new(self.outcome(Some(f))), None));
        }
        let r = self.resume_and_run(t)?;
        let mut done = self.settle(t, r)?;
        if done.is_none() {
            // Threads the step created start within it: what they touch is its footprint.
            done = self.start_new_threads()?;
        }
        let touched = Some(self.end_of_step());
        Ok(match done {
            Some(out) => Stop::End(Box::new(out), touched),
            None => Stop::Point(touched),
        })
    }

    /// The step that ran ends: what it touched natively, noted with its point for a
    /// snapshot.
    fn end_of_step(&mut self) -> Footprint {
        let touched = std::mem::take(&mut self.step.segment);
        self.snaps.note_ran(&touched);
        touched
    }

    /// The outcome of an execution the strategy could not follow.
    pub(super) fn diverged(&mut self, d: Divergence) -> ExecutionOutcome {
        let mut out = self.outcome(None);
        out.divergence = Some(d);
        out
    }

    /// Whether a debugger watches this execution.
    pub(super) fn debugging(&self) -> bool {
        self.worker.debugger.hook.is_some()
    }

    /// Sites this execution needs a real stop at: racy sites under `--preempt-on-races`,
    /// timeout polls, the accesses whose stacks it is asked to capture, and those the
    /// configuration names (`stop_at_sites`). The logged calls whose stacks it wants need none: their threads
    /// stop at every logged access while in the epoch of one (`sync_log_mode`).
    pub(super) fn stop_sites(&self) -> std::collections::HashSet<u64> {
        let mut s: std::collections::HashSet<u64> = self.races.requested_pcs().collect();
        s.extend(self.cfg.instrument.stop_at_sites.iter().copied());
        if self.cfg.instrument.preempt_on_races {
            s.extend(self.worker.racy_sites.iter().copied());
        }
        s.extend(self.worker.poll_sites.iter().copied());
        s.extend(self.worker.spin_sites.iter().copied());
        s
    }

    pub(super) fn outcome(&mut self, finding: Option<Finding>) -> ExecutionOutcome {
        // Addresses found racy become scheduling points from the next execution on (never
        // within this one, so that its schedule replays with the same points).
        let fresh: Vec<u64> = (self.races.racy_addresses().into_iter())
            .filter(|a| !self.worker.racy_addresses.contains(a))
            .collect();
        self.worker.racy_addresses.extend(fresh.iter().copied());
        self.worker.racy_sites.extend(self.races.racy_pcs());
        // Every other instruction that accesses a racy global by its fixed address is a
        // racy site too: a race of its own may need a switch right before it (a read-back
        // after a racy write) and show only in that order.
        let companions = self.code.fixed_address_sites(&fresh);
        self.worker.racy_sites.extend(companions);
        // The other processes' races (a process tree): found in this execution as well.
        for (races, fresh, sites) in self.processes().other_race_recordings() {
            self.worker.racy_addresses.extend(fresh);
            self.worker.racy_sites.extend(sites);
            self.races.absorb(races);
        }
        // Reads of what a timeout set: points from the next round on, as racy sites.
        self.worker.poll_sites.extend(self.races.poll_pcs());
        // A busy wait's atomic load: a yield point from the next round on.
        self.worker
            .spin_sites
            .extend(self.spin_learnt.map(|(_, pc)| pc));
        let mut finding = finding;
        if let Some(f) = &mut finding {
            f.preemptions = self.history.preemptions();
            f.steps = self.history.steps();
            f.name_processes();
        }
        let lock_order = match &finding {
            Some(f) if f.kind == FindingKind::Deadlock => None,
            _ => self.lock_order_finding(),
        };
        let mut found = self.races.finish(self.worker.symbols.modules());
        found.findings.iter_mut().for_each(Finding::name_processes);
        let record = self.history.finish();
        ExecutionOutcome {
            finding,
            steps: self.history.steps(),
            preemptions: self.history.preemptions(),
            threads: self.model.thread_count(),
            races: found.findings,
            lock_order,
            decisions: record.decisions,
            choice_steps: record.choice_steps,
            divergence: None,
            trace: record.trace,
            race_origins: found.origins,
            captured_stacks: found.captured_stacks,
            exit: None,
            output_digest: None,
            stdout: None,
            written_files: Vec::new(),
            abandoned: None,
            spin_learnt: None,
            orphaned_wait: None,
            measures: ExecutionMeasures {
                traced_accesses: found.traced,
                hashed_pages: self.snaps.hashed_pages(),
                patch_stats: super::instrument::sites::PatchStats {
                    moved_out: self.instr.moved_out(),
                    breakpoint_accesses: found.breakpoint_accesses,
                    ..self.code.stats().clone()
                },
                library_sync: found.library_sync,
                unverified_races: found.unverified_races,
            },
            early_end: EarlyEnd::default(),
            changed_files: self.world.changed_files(),
            untraced: self.p.untraced(),
        }
    }

    /// The outcome of an execution whose process ended with `end`.
    pub(super) fn ended(&mut self, end: ProcessEnd) -> ExecutionOutcome {
        let orphaned = std::mem::take(&mut self.step.orphaned_at_exit);
        let mut out = self.outcome(self.exit_finding(end));
        if matches!(end, ProcessEnd::Exited(_)) && out.finding.is_none() {
            out.orphaned_wait = orphaned.first().and_then(|b| {
                let h = b.holders.first()?;
                let (thread, op, holder) = (b.thread, b.op, h.thread);
                let object = self.object_desc(b.object.kind, b.object.addr);
                Some(format!(
                    "the program ended while thread T{thread} waited forever in {op} for the {object}, which thread T{holder} still held when it exited"
                ))
            });
        }
        out.exit = match end {
            ProcessEnd::Exited(code) => Some(format!("exit status {code}")),
            ProcessEnd::Killed(sig) => Some(format!("killed by {sig:?}")),
            ProcessEnd::Vanished => None,
            ProcessEnd::Abandoned => {
                out.abandoned = self.abandoned.take();
                out.spin_learnt = self.spin_learnt.take().map(|(t, pc)| {
                    let site = self.worker.symbols.instruction_site(pc).short();
                    format!("thread T{t} waited for another thread in a busy loop on an atomic load ({site}) with no scheduling point")
                });
                None
            }
        };
        out
    }

    /// What the tracer holds of the program's state, hashed (for `--state-cache`): the
    /// model's synchronisation state, virtual time and pending operations, and the fair
    /// scheduler's state.
    fn tracer_state(&self) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        self.model.sync_fingerprint().hash(&mut h);
        self.model.now().hash(&mut h);
        self.history.early_timeouts().hash(&mut h);
        for t in 0..self.model.thread_count() {
            self.model.pending(t).map(Op::name).hash(&mut h);
            self.model.pending_site(t).hash(&mut h);
        }
        self.history.fair_fingerprint().hash(&mut h);
        h.finish()
    }

    /// Records one step of the readable trace (replay): thread, operation, object, line.
    fn trace_step(&mut self, t: ThreadId, op: &'static str) -> TraceStep {
        self.processes().focus(t);
        let object = self
            .model
            .pending(t)
            .and_then(Op::object)
            .filter(|o| o.kind != ObjectKind::Atomic || o.addr != 0)
            .map(|o| self.object_desc(o.kind, o.addr))
            .or_else(|| self.kernel.describe(self.p.pid_of(t), t));
        let site = self.model.pending_site(t);
        // A breakpoint's own address (an atomic, a pause, a traced access) is the
        // instruction; a system call is located by its stack (the word at the stack
        // pointer is a return address only in a wrapper without a frame); any other site
        // is the return address of a hooked call.
        let th = &self.p.threads[t];
        let location = match th.place {
            StopPlace::Breakpoint(at) if at == site => {
                Some(self.worker.symbols.instruction_site(site))
            }
            StopPlace::Syscall => {
                let r = th.regs;
                let stack = (self.worker.symbols).stack(r.rip, r.rsp, r.rbp, &self.p.mem);
                crate::run::process::stacks::primary_location(&stack)
            }
            _ => (site != 0).then(|| self.worker.symbols.call_site(site)),
        };
        TraceStep {
            step: self.history.steps() + 1,
            thread: t,
            op,
            object,
            location,
        }
    }

    /// Handles the result of running `t`; Some when the execution is over.
    pub(super) fn settle(&mut self, t: ThreadId, r: RunResult) -> Result<Option<ExecutionOutcome>> {
        match r {
            RunResult::Point => Ok(None),
            RunResult::ThreadExited => {
                self.thread_exited(t);
                Ok(None)
            }
            RunResult::ProcessEnded(end) => match self.processes().process_ended(end) {
                Some(end) => Ok(Some(self.ended(end))),
                // One process of the tree ended; the others go on.
                None => Ok(None),
            },
            RunResult::Found(f) => Ok(Some(self.outcome(Some(*f)))),
            RunResult::CutShort => Ok(Some(self.cut_short())),
        }
    }

    /// The outcome of an execution the search ended early (its program is killed after).
    pub(super) fn cut_short(&mut self) -> ExecutionOutcome {
        let mut out = self.outcome(None);
        out.early_end.cut_short = true;
        out
    }

    /// Thread `t` exited: the race detector keeps its clock (and hands its thread block
    /// on to the next thread created on it), the model its holdings.
    fn thread_exited(&mut self, t: ThreadId) {
        self.step.creation_stretch.remove(&t);
        self.sync_log_mode(t);
        let block = self.p.threads[t].handle;
        if let Some(d) = self.races.detector() {
            crate::run::races::happens_before::thread_block_released(d, t, block);
            d.thread_exited(t);
        }
        self.model.thread_exited(t)
    }

    /// Applies a completed operation's result to thread `t`'s registers. A fault while
    /// stepping over a native instruction becomes a finding.
    pub(super) fn complete(&mut self, t: ThreadId, done: &Executed) -> Result<Option<Finding>> {
        let c = done.completion;
        let place = self.p.threads[t].place;
        match place {
            StopPlace::Breakpoint(addr) => {
                let kind = self.code.kind(addr).cloned();
                let convention = match &kind {
                    Some(BreakpointKind::Hook(h)) => h.convention(),
                    _ => Convention::Native,
                };
                match &kind {
                    Some(BreakpointKind::Atomic { plan, index, bias }) => {
                        let insn = &plan.atomics[*index];
                        let ea = self.p.effective_address(t, insn, *bias);
                        let size = insn.memory_size().size() as u64;
                        let (races, mut env) = race_env!(self);
                        races.record_atomic(&mut env, t, ea, size, addr);
                    }
                    Some(BreakpointKind::Access(id)) => {
                        if let Some(site) = self.code.site(*id) {
                            let ea = self.p.effective_address(t, &site.insn, 0);
                            let (races, mut env) = race_env!(self);
                            races.record_access(&mut env, t, &site, ea, Seen::AtAccess);
                        }
                    }
                    Some(BreakpointKind::Hook(Hook::Once)) => {
                        let control = self.p.threads[t].regs.rdi;
                        let once = in_space(control, self.p.space());
                        if self.model.once_initialiser(once) == Some(t) {
                            self.on_return_of_call(t, ReturnAction::OnceDone { control })?;
                        }
                    }
                    _ => {}
                }
                match (convention, c) {
                    (Convention::Native, _) | (_, Completion::Native) => {
                        if let Some(ev) = self.pass_over(t)? {
                            return self.fault_during_step(t, ev);
                        }
                    }
                    (Convention::ErrorNumber, Completion::Return(v)) => {
                        self.p.return_from_call(t, v as u64)?
                    }
                    (Convention::ErrorNumber, Completion::Error(e)) => {
                        self.p.return_from_call(t, e as u64)?
                    }
                    (Convention::MinusOneErrno, Completion::Return(v)) => {
                        self.p.return_from_call(t, v as u64)?
                    }
                    (Convention::MinusOneErrno, Completion::Error(e)) => {
                        self.p.set_errno(t, e)?;
                        self.p.return_from_call(t, u64::MAX)?
                    }
                    (Convention::OmpTest, Completion::Return(_)) => {
                        self.p.return_from_call(t, 1)?
                    }
                    (Convention::OmpNestTest, Completion::Return(_)) => {
                        // The lock the trylock took: its owner's new nesting depth.
                        let lock = done.op.as_ref().and_then(Op::object);
                        let depth = lock.map_or(0, |l| self.model.mutex_depth(l.addr, t));
                        self.p.return_from_call(t, depth as u64)?
                    }
                    (Convention::OmpTest | Convention::OmpNestTest, Completion::Error(_)) => {
                        self.p.return_from_call(t, 0)?
                    }
                    (_, Completion::Blocked) => {}
                }
            }
            StopPlace::Syscall => match c {
                Completion::Return(v) => self.p.finish_syscall(t, v)?,
                Completion::Error(e) => self.p.finish_syscall(t, -(e as i64))?,
                Completion::Native | Completion::Blocked => {}
            },
            StopPlace::Event => {}
        }
        Ok(None)
    }

    /// Performs an operation glibc makes internally without a scheduling decision, and lets
    /// the thread run on; only an operation that cannot proceed becomes a scheduling point.
    pub(super) fn internal_call(
        &mut self,
        t: ThreadId,
        op: Op,
        site: u64,
    ) -> Result<Option<RunResult>> {
        let op = op.in_space(self.p.space());
        self.step.segment.extend(&op.footprint());
        if let Err(f) = self.model.set_pending(t, op.clone(), site) {
            return Ok(Some(RunResult::Found(Box::new(self.model_finding(f)))));
        }
        if !self.model.is_enabled(t) {
            return Ok(Some(RunResult::Point));
        }
        match self.execute_op(t) {
            Err(f) => Ok(Some(RunResult::Found(Box::new(self.model_finding(f))))),
            Ok(done) if done.completion == Completion::Blocked => Ok(Some(RunResult::Point)),
            Ok(done) => {
                if let Some(f) = self.complete(t, &done)? {
                    return Ok(Some(RunResult::Found(Box::new(f))));
                }
                events::resume(self.p.threads[t].tid, None)?;
                Ok(None)
            }
        }
    }

    /// Executes `t`'s pending operation in the model and feeds its happens-before edges to
    /// the race detector.
    pub(super) fn execute_op(
        &mut self,
        t: ThreadId,
    ) -> std::result::Result<Executed, ModelFinding> {
        self.processes().focus(t);
        let op = self.model.pending(t).cloned();
        if op == Some(Op::ExitGroup) {
            self.step.group_exiting = true;
            self.step.orphaned_at_exit = self.model.orphaned_waits();
        }
        let site = self.model.pending_site(t);
        if !self.model.is_enabled(t) && self.model.can_time_out(t) {
            // Its wait times out: what it now stores may be what the timeout sets
            // (`races::timeout_polls`).
            self.step.timed_out.insert(t);
        }
        let completion = {
            let mut view = MemView(&self.p);
            self.model.execute(t, &mut view)?
        };
        for (start, size) in self.races.take_freed() {
            self.locks.freed(in_space(start, self.p.space()), size);
        }
        if let Some(op) = &op {
            let mut reporter = Reporter {
                p: &self.p,
                symbols: &mut self.worker.symbols,
            };
            // The decision that chose `t` for this operation, when one did (the last one
            // taken, and it chose `t`); none inside a call glibc makes without a decision.
            let decisions = self.history.decisions();
            let step = (decisions.last())
                .filter(|d| d.thread == t)
                .map(|d| (decisions.len() - 1, d.op.as_ref()));
            (self.locks).record(t, (op, step), completion, site, &mut reporter);
        }
        if let (Some(d), Some(op)) = (self.races.detector(), &op) {
            // The detector is the process's own: its addresses are the process's.
            happens_before::record(d, t, &op.clone().in_space(0), completion);
        }
        // A join that returned: the joined thread's locks and accesses happen before.
        if let (
            Some(Op::Join {
                target: Some(u), ..
            }),
            Completion::Native,
        ) = (&op, completion)
        {
            self.locks.thread_joined(t, *u);
            if let Some(d) = self.races.detector() {
                d.thread_joined(t, *u);
            }
        }
        Ok(Executed { op, completion })
    }

    /// Records that `t` reached a scheduling point.
    pub(super) fn point(&mut self, t: ThreadId, op: Op, site: u64) -> Result<Option<RunResult>> {
        self.step.creation_stretch.remove(&t);
        if op.begins_wait() {
            // What it logged since its last timeout is recorded (drained at this stop).
            self.step.timed_out.remove(&t);
        }
        self.sync_log_mode(t);
        let op = op.in_space(self.p.space());
        if self.model.alone(t) && !matches!(op, Op::Continue | Op::Yield | Op::ExitGroup) {
            // No other thread can run before this one's next step: nothing to decide. Its
            // operation is applied at once, as glibc's internal calls are, and becomes a
            // point only if it waits (node makes hundreds of thousands of rwlock and atomic
            // operations before its first thread, each a decision with one choice).
            return self.internal_call(t, op, site);
        }
        match self.model.set_pending(t, op, site) {
            Ok(()) => Ok(Some(RunResult::Point)),
            Err(f) => Ok(Some(RunResult::Found(Box::new(self.model_finding(f))))),
        }
    }
}

/// The state a thread yields in, for the fair filter's notion of progress: the model's
/// synchronisation state and the yield's call site.
fn yield_state(model: &Model, site: u64) -> u64 {
    model.sync_fingerprint() ^ site.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

struct MemView<'a>(&'a Process);

/// The memory of the process whose thread executes an operation (the current one), for
/// the model: its addresses are tagged with the process's space.
impl MemoryView for MemView<'_> {
    fn read_u32(&mut self, addr: u64) -> Option<u32> {
        self.0.mem.read_u32(address_of(addr)).ok()
    }
    fn write_u32(&mut self, addr: u64, value: u32) -> bool {
        self.0.mem.write_u32(address_of(addr), value).is_ok()
    }
}

/// Offset of `__wrefs` in glibc 2.36's `pthread_cond_t`.
const COND_WREFS_OFFSET: u64 = 36;
/// `__PTHREAD_COND_CLOCK_MONOTONIC_MASK`: the condvar times its waits on CLOCK_MONOTONIC.
const COND_CLOCK_MONOTONIC_MASK: u32 = 2;

impl HookContext for Session<'_> {
    fn read_u32(&self, addr: u64) -> Option<u32> {
        self.p.mem.read_u32(addr).ok()
    }
    fn relative_timeout(&self, ts: u64, clock: libc::clockid_t) -> u64 {
        self.timespec_ns(ts)
            .map_or(0, |abs| abs.saturating_sub(self.clock_now_ns(clock)))
    }
    fn thread_of_handle(&self, handle: u64) -> Option<ThreadId> {
        if handle == 0 {
            return None;
        }
        // glibc reuses the stack and TCB (hence the pthread_t) of a finished thread for a
        // new one: the newest thread with this handle is the one meant (in this process).
        let current = self.p.current();
        (self.p.threads.iter()).rposition(|t| t.handle == handle && t.proc == current)
    }
    fn knows_mutex(&self, m: u64) -> bool {
        self.model.knows_mutex(in_space(m, self.p.space()))
    }
    fn spin_held(&self, s: u64) -> bool {
        self.model.spin_held(in_space(s, self.p.space()))
    }
    fn cond_clock(&self, c: u64) -> libc::clockid_t {
        // A condvar initialised natively (not seen by the model) keeps its clock in
        // glibc 2.36's `__wrefs` word (offset 36), bit 1.
        let monotonic = self.model.cond_monotonic(c).unwrap_or_else(|| {
            self.p
                .mem
                .read_u32(c + COND_WREFS_OFFSET)
                .is_ok_and(|w| w & COND_CLOCK_MONOTONIC_MASK != 0)
        });
        if monotonic {
            libc::CLOCK_MONOTONIC
        } else {
            libc::CLOCK_REALTIME
        }
    }
}

impl<'a> Session<'a> {
    /// An execution of a freshly launched process.
    pub(super) fn fresh(cfg: &'a ExecutionConfig, worker: &'a mut WorkerState, p: Process) -> Self {
        worker.switch_symbols(p.exe());
        Session {
            cfg,
            p,
            code: Default::default(),
            model: Model::new(),
            worker,
            races: RaceRecording::new(cfg.instrument.races, cfg.stack_requests.clone())
                .with_heap_checks(cfg.instrument.heap_checks, cfg.instrument.quarantine_blocks),
            returns: Default::default(),
            instr: Default::default(),
            watchdog: Default::default(),
            abandoned: None,
            spin_learnt: None,
            panic: None,
            history: History::new(cfg.fair),
            world: Default::default(),
            snaps: SnapshotState::fresh(),
            step: Default::default(),
            kernel: Default::default(),
            tree: Default::default(),
            locks: Default::default(),
        }
    }

    /// An execution continuing from a copy of a snapshot: the parts as the snapshot saved
    /// them.
    pub(super) fn restored(
        cfg: &'a ExecutionConfig,
        worker: &'a mut WorkerState,
        r: Restored,
    ) -> Self {
        let s = r.state;
        worker.switch_symbols(r.process.exe());
        Session {
            cfg,
            p: r.process,
            code: s.code,
            model: s.model,
            worker,
            races: RaceRecording::restored(s.races, cfg.stack_requests.clone()),
            returns: s.returns,
            instr: s.instr,
            watchdog: Default::default(),
            abandoned: None,
            spin_learnt: None,
            panic: s.panic,
            history: s.history,
            world: s.world,
            snaps: SnapshotState::restored(r.prefix, r.resume_main, r.memory),
            step: s.step,
            kernel: s.kernel,
            tree: tree::Tree::restored(s.retired_races),
            locks: s.locks,
        }
    }
}

/// Findings: what went wrong, with the stacks of the threads involved.
impl Session<'_> {
    /// The finding when every thread waited longer than the execution timeout and some
    /// wait for the world outside the program (a terminal, a socket, a child process).
    pub(in crate::run) fn outside_finding(&mut self) -> Finding {
        let secs = self.cfg.limits.execution_timeout.as_secs_f64();
        let waiting = self.kernel.waiting_threads(&self.model);
        let mut threads = Vec::new();
        let mut calls = Vec::new();
        for t in waiting {
            let what = (self.kernel.describe(self.p.pid_of(t), t)).unwrap_or_default();
            calls.push(format!("T{t} in {what}"));
            threads.push(self.thread_report(t, format!("waits in the kernel in {what}")));
        }
        finding(
            FindingKind::Timeout,
            format!(
                "no thread can run and nothing came from outside the program for {secs:.1} s: {}",
                calls.join(", ")
            ),
            threads,
        )
    }

    /// Stacks and reports of this execution's threads.
    pub(super) fn reporter(&mut self) -> Reporter<'_> {
        Reporter {
            p: &self.p,
            symbols: &mut self.worker.symbols,
        }
    }

    /// Thread `t` with its stack, in `state`.
    pub(super) fn thread_report(&mut self, t: ThreadId, state: String) -> ThreadReport {
        self.processes().focus(t);
        self.reporter().thread_report(t, state)
    }

    /// One line per waiting thread (what it waits on, who holds it, when it may time
    /// out): what a livelock report adds about the threads outside its cycle.
    fn blocked_details(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut waiting = self.model.blocked_threads();
        waiting.extend(self.model.timeout_threads());
        waiting.sort_unstable();
        for t in waiting {
            let Some(b) = self.model.describe_wait(t) else {
                continue;
            };
            let obj = self.object_desc(b.object.kind, b.object.addr);
            let mut line = format!("T{} is blocked in {} on {obj}", b.thread, b.op);
            for h in &b.holders {
                let exited = if h.exited { " (which has exited)" } else { "" };
                line.push_str(&format!(", held by T{}{exited}", h.thread));
            }
            if let Some(d) = self.model.deadline(t) {
                let left = d.saturating_sub(self.model.now()) as f64 / 1e9;
                line.push_str(&format!(", may time out in {left:.3} s of virtual time"));
            }
            lines.push(line);
        }
        lines
    }

    pub(super) fn object_desc(&mut self, kind: ObjectKind, addr: u64) -> String {
        match kind {
            ObjectKind::Thread => format!("thread T{addr}"),
            ObjectKind::Time => "a timer".to_string(),
            ObjectKind::Kernel => self
                .kernel
                .describe(self.p.pid_of(addr as ThreadId), addr as ThreadId)
                .unwrap_or_else(|| "the kernel".to_string()),
            _ => {
                let addr = self.processes().focus_address(addr);
                let name = (self.races).memory_name(&mut self.worker.symbols, addr, true);
                format!("{} {name}", kind.name())
            }
        }
    }

    /// The lock-order cycle of the execution that could deadlock, described as a
    /// `lock_order` finding with preemptions and steps of the schedule so far.
    fn lock_order_finding(&mut self) -> Option<LockCycle> {
        let (cycle, holds) = self.locks.potential_deadlock()?;
        let named: Vec<NamedEdge> = (cycle.into_iter())
            .map(|edge| NamedEdge {
                from: self.object_desc(edge.from_kind, edge.from.addr),
                to: self.object_desc(edge.to_kind, edge.to.addr),
                edge,
            })
            .collect();
        let mut reporter = Reporter {
            p: &self.p,
            symbols: &mut self.worker.symbols,
        };
        let mut f = self.locks.finding(&named, &mut reporter);
        f.preemptions = self.history.preemptions();
        f.steps = self.history.steps();
        f.name_processes();
        Some(LockCycle { finding: f, holds })
    }

    pub(super) fn model_finding(&mut self, f: ModelFinding) -> Finding {
        match f {
            ModelFinding::Misuse {
                thread,
                object,
                message,
            } => {
                let what = object
                    .map(|o| format!(" ({})", self.object_desc(o.kind, o.addr)))
                    .unwrap_or_default();
                let state = format!("{message}{what}");
                let report = self.thread_report(thread, state.clone());
                finding(
                    FindingKind::ApiMisuse,
                    format!("thread T{thread} {state}"),
                    vec![report],
                )
            }
            ModelFinding::Deadlock { local, blocked } => {
                let mut threads = Vec::new();
                let mut details = Vec::new();
                for b in &blocked {
                    let obj = self.object_desc(b.object.kind, b.object.addr);
                    let mut state = if b.object.kind == ObjectKind::Kernel {
                        format!("is blocked in the kernel in {obj}")
                    } else {
                        format!("is blocked in {} on {obj}", b.op)
                    };
                    for h in &b.holders {
                        let held = if b.object.kind == ObjectKind::Thread {
                            if h.exited {
                                String::new()
                            } else {
                                ", which has not exited".to_string()
                            }
                        } else {
                            let at = if h.site != 0 {
                                format!(
                                    ", acquired at {}",
                                    self.worker.symbols.call_site(h.site).short()
                                )
                            } else {
                                String::new()
                            };
                            let exited = if h.exited { " (which has exited)" } else { "" };
                            format!(", held by T{}{exited}{at}", h.thread)
                        };
                        state.push_str(&held);
                    }
                    let report = self.thread_report(b.thread, state);
                    if b.site != 0 && b.object.kind != ObjectKind::Thread {
                        let site = self.worker.symbols.call_site(b.site);
                        // A wait inside a library (Rust's futex under Mutex::lock) is told
                        // at the program's own line on the waiting thread's stack.
                        let at = match primary_location(&report.stack) {
                            Some(own) if !site.is_own_source() && own.is_own_source() => own,
                            _ => site,
                        };
                        details.push(format!("T{} waits at {}", b.thread, at.short()));
                    }
                    threads.push(report);
                }
                let message = describe_deadlock(local, &blocked);
                let mut f = finding(FindingKind::Deadlock, message, threads);
                f.details = details;
                f
            }
        }
    }

    pub(super) fn signal_finding(&mut self, t: ThreadId, sig: Signal) -> Option<Finding> {
        let fatal = matches!(
            sig,
            Signal::SIGSEGV | Signal::SIGBUS | Signal::SIGFPE | Signal::SIGILL | Signal::SIGABRT
        );
        if !fatal || signal_is_caught(self.p.threads[t].tid, sig) {
            return None;
        }
        let _ = self.p.load_regs(t);
        self.p.threads[t].place = StopPlace::Event;
        if sig == Signal::SIGABRT {
            let report = self.thread_report(t, "aborted (SIGABRT)".into());
            return Some(finding(
                FindingKind::Assertion,
                format!("the program aborted in thread T{t}"),
                vec![report],
            ));
        }
        let addr = events::fault_address(self.p.threads[t].tid).unwrap_or(0);
        let report = self.thread_report(t, format!("received {sig:?}"));
        let place = report
            .stack
            .first()
            .map(|f| format!(" in {}", f.short()))
            .unwrap_or_default();
        let what = match sig {
            Signal::SIGSEGV => format!("invalid memory access at address {addr:#x}"),
            Signal::SIGBUS => format!("bus error at address {addr:#x}"),
            Signal::SIGFPE => "arithmetic exception".to_string(),
            _ => "illegal instruction".to_string(),
        };
        Some(finding(
            FindingKind::Crash,
            format!("{sig:?}: {what} by thread T{t}{place}"),
            vec![report],
        ))
    }

    pub(super) fn timeout_finding(&mut self, t: ThreadId) -> Result<Finding> {
        self.p.load_regs(t)?;
        self.p.threads[t].place = StopPlace::Event;
        let secs = self.cfg.limits.execution_timeout.as_secs_f64();
        let report = self.thread_report(
            t,
            format!("ran {secs:.1} s without reaching a scheduling point"),
        );
        let place = report
            .stack
            .iter()
            .find(|f| f.user_code)
            .or(report.stack.first())
            .map(|f| format!(" in {}", f.short()))
            .unwrap_or_default();
        Ok(finding(
            FindingKind::Timeout,
            format!(
                "thread T{t} spins{place}: no scheduling point for {secs:.1} s (a busy wait on a plain variable?)"
            ),
            vec![report],
        ))
    }

    pub(super) fn exit_finding(&self, end: ProcessEnd) -> Option<Finding> {
        match end {
            ProcessEnd::Exited(code) if code == self.cfg.limits.expect_exit => None,
            ProcessEnd::Exited(101) | ProcessEnd::Killed(Signal::SIGABRT)
                if self.panic.is_some() =>
            {
                let report = self.panic.clone().expect("checked");
                let msg = format!("the program panicked in thread T{}", report.id);
                Some(finding(FindingKind::Assertion, msg, vec![report]))
            }
            ProcessEnd::Exited(code) => Some(finding(
                FindingKind::ExitStatus,
                format!(
                    "the program exited with status {code}, expected {}",
                    self.cfg.limits.expect_exit
                ),
                vec![],
            )),
            ProcessEnd::Killed(Signal::SIGABRT) => Some(finding(
                FindingKind::Assertion,
                "the program aborted (SIGABRT)".into(),
                vec![],
            )),
            ProcessEnd::Killed(sig) => Some(finding(
                FindingKind::ExitStatus,
                format!("the program was terminated by {sig:?}"),
                vec![],
            )),
            ProcessEnd::Vanished | ProcessEnd::Abandoned => None,
        }
    }
}

impl TimeSource for Session<'_> {
    fn timespec_ns(&self, addr: u64) -> Option<u64> {
        if addr == 0 {
            return None;
        }
        let sec = self.p.mem.read_u64(addr).ok()?;
        let nsec = self.p.mem.read_u64(addr + 8).ok()?;
        Some(sec.saturating_mul(1_000_000_000).saturating_add(nsec))
    }
    fn clock_now_ns(&self, clock: libc::clockid_t) -> u64 {
        self.world.peek_ns(clock, self.model.now())
    }
}
