//! Stops to events: resuming the running thread and waiting until it reaches its next
//! scheduling point, while serving the stops of every other tracee (threads that are not
//! running, their processes' ends, foreign processes, new threads' first stops), and the
//! end of an execution: waiting for the processes to end, killing and reaping the whole
//! tree.
//!
//! Also here: seccomp stops (the system calls the model needs: futex, clone, exit_group,
//! sleeps...; the clock and random-number calls answered for determinism; rdtsc
//! emulation), and thread creation: the clone event, and the start of new threads within
//! the step that created them (thread creation is not a scheduling point while races are
//! traced).

use std::path::PathBuf;

use super::ExecutionOutcome;
use crate::model::{ObjectKind, Op};
use crate::run::kernel::kernel_waits::KernelThen;
use crate::run::kernel::syscalls::{self, SyscallAction};
use crate::run::process::{StopPlace, TracedThread};
use crate::run::races::happens_before;
use crate::run::worker_state::WorkerState;
use crate::run::world::fs_gate::changes_files;
use crate::tracee::file_paths;
use crate::tracee::seccomp::nr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::{ProcessEnd, RunResult, Session};

use crate::model::ThreadId;
use crate::report::Finding;
use crate::tracee::memory::Memory;
use crate::tracee::{cpu, events, interrupt, regs, Event, WaitOutcome};

impl Session<'_> {
    /// Whether the signal `tid` stopped with is a request to stop meant for mcheck (the
    /// user's Ctrl-C, a kill of the process group), not the program's own business.
    fn meant_for_mcheck(&self, tid: Pid, sig: Signal) -> bool {
        interrupt::meant_for_mcheck(tid, sig, |p| {
            self.p.by_tid.contains_key(&p) || self.p.foreign.contains(&p)
        })
    }

    pub(super) fn fault_during_step(&mut self, t: ThreadId, ev: Event) -> Result<Option<Finding>> {
        match ev {
            Event::Signal(sig) => Ok(self.signal_finding(t, sig)),
            _ => Err(anyhow!(
                "unexpected event {ev:?} while stepping thread T{t}"
            )),
        }
    }

    /// Resumes thread `t` and runs it until it reaches a scheduling point or stops existing.
    pub(super) fn resume_and_run(&mut self, t: ThreadId) -> Result<RunResult> {
        self.processes().focus(t);
        self.ensure_started(t)?;
        if self.debugging() {
            self.debug().debug_arm(t)?;
            if let Some(r) = self.debug().debug_before_running(t)? {
                return Ok(r);
            }
        }
        if self.wants_call_stops(t) {
            // A second run of a schedule, in an epoch of `t` whose stack it wants: stop at
            // every logged access (the log is disarmed again once `t` is out of it).
            self.code.sync_log_mode(true);
        }
        let th = &mut self.p.threads[t];
        let sig = th.pending_signal.take();
        let tid = th.tid;
        self.watchdog.resumed();
        events::resume(tid, sig)?;
        loop {
            // Looked at after every stop too: a thread whose traced accesses stop it all the
            // time may leave the watchdog's tick no waitpid to interrupt for seconds.
            if self.worker.cut.raised() {
                return Ok(RunResult::CutShort);
            }
            // A second run of a schedule for the stacks of its races ends once it has them:
            // it ran the same schedule as the first, so it has nothing else to find (GNU
            // sort's ran 25 s more, stopping at a racy site in its merge loop).
            if self.races.asked_stacks_taken() {
                return Ok(RunResult::CutShort);
            }
            let (pid, ev) = match events::wait(None)? {
                WaitOutcome::Interrupted => {
                    self.check_timeout(t, tid)?;
                    continue;
                }
                WaitOutcome::NoChildren => {
                    return Ok(RunResult::ProcessEnded(ProcessEnd::Vanished))
                }
                WaitOutcome::Event(pid, ev) => (pid, ev),
            };
            if self.p.foreign.contains(&pid) {
                self.pass_through(pid, ev)?;
                continue;
            }
            let Some(&u) = self.p.by_tid.get(&pid) else {
                self.unknown_stop(pid, ev);
                continue;
            };
            // A thread that is not its process's leader execs under the leader's tid.
            let u = if ev == Event::Exec && self.p.proc_of(u) == self.p.proc_of(t) {
                t
            } else {
                u
            };
            if u != t {
                if let Some(end) = self.other_thread_event(u, ev)? {
                    return Ok(RunResult::ProcessEnded(end));
                }
                continue;
            }
            self.settle_running_stop(t, &ev)?;
            if let Some(r) = self.running_thread_event(t, ev)? {
                return Ok(r);
            }
        }
    }

    /// At a watchdog tick: interrupts the running thread when it spins or sleeps in the
    /// kernel too long (see `Watchdog::should_interrupt`).
    pub(super) fn check_timeout(&mut self, t: ThreadId, tid: Pid) -> Result<()> {
        let pending = self.code.logged();
        let limit = self.cfg.limits.execution_timeout;
        let learnable = self.spin_to_learn(t).is_some();
        if self
            .watchdog
            .should_interrupt(self.p.pid, tid, limit, pending, learnable)
        {
            events::interrupt(tid)?;
        }
        Ok(())
    }

    /// The atomic load thread `t` (running) may spin on, to become a yield point: the last
    /// one of the program's code it made (`RaceRecording::last_atomic_load`), when it is
    /// not one already and another thread could run (else nothing can end the wait). Not
    /// under a debugger, whose schedule must stay as it is.
    pub(super) fn spin_to_learn(&self, t: ThreadId) -> Option<u64> {
        let pc = self.races.last_atomic_load(t)?;
        let others = self.model.enabled_threads().iter().any(|&o| o != t);
        (others && !self.worker.spin_sites.contains(&pc) && !self.debugging()).then_some(pc)
    }

    /// Where thread `t`, taken out of the kernel by an interrupt, was blocked.
    fn blocked_description(&mut self, t: ThreadId) -> String {
        let tid = self.p.threads[t].tid;
        let call = std::fs::read_to_string(format!("/proc/{}/task/{tid}/syscall", self.p.pid))
            .ok()
            .and_then(|s| {
                s.split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<i64>().ok())
            })
            .filter(|&nr| nr >= 0)
            .map_or_else(String::new, |nr| format!(" in system call {nr}"));
        let secs = self.watchdog.seconds_running();
        format!(
            "thread T{t} waited{call} for {secs:.0} s while every other thread was held stopped"
        )
    }

    /// The running thread's own progress since it was resumed (`Watchdog::progress`).
    pub(super) fn progress_since_resume(&mut self) -> Duration {
        let pending = self.code.logged();
        self.watchdog.progress(self.p.pid, pending)
    }

    /// Consumes a new thread's first stop before it is resumed for the first time.
    pub(super) fn ensure_started(&mut self, t: ThreadId) -> Result<()> {
        if self.p.threads[t].started {
            return Ok(());
        }
        let tid = self.p.threads[t].tid;
        if self.p.early_stops.remove(&tid) {
            self.p.threads[t].started = true;
            return Ok(());
        }
        loop {
            match events::wait(Some(tid))? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => break,
                WaitOutcome::Event(_, Event::Stop(_)) | WaitOutcome::Event(_, Event::Signal(_)) => {
                    break
                }
                WaitOutcome::Event(_, _) => break,
            }
        }
        self.p.threads[t].started = true;
        Ok(())
    }

    /// Events of processes the program forked: they run free.
    pub(super) fn pass_through(&mut self, pid: Pid, ev: Event) -> Result<()> {
        match ev {
            Event::Exited(_) | Event::Killed(_) => self.p.foreign_ended(pid),
            Event::Fork(child) | Event::Vfork(child) | Event::Clone(child) => {
                self.adopt_foreign(child)?;
                events::resume(pid, None)?;
            }
            // A vfork child execs: from now on a process of the tree of its own.
            Event::Exec => self.processes().adopt_exec(pid)?,
            Event::Trap => self.foreign_trap(pid)?,
            Event::Signal(Signal::SIGSEGV)
                if self.world.emulate_rdtsc(pid, self.model.now())? =>
            {
                events::resume(pid, None)?
            }
            Event::Signal(sig) if self.meant_for_mcheck(pid, sig) => {
                interrupt::note(sig);
                events::resume(pid, None)?
            }
            Event::Signal(sig) => events::resume(pid, Some(sig))?,
            Event::Seccomp => {
                // A child changing files changes the user's files too: it takes the gate
                // and its changes are journaled like the program's own.
                let r = regs::get(pid).ok();
                if r.is_none_or(|r| r.orig_rax as i64 == nr::MADVISE) {
                    // A fork advice (or a call not read): a vfork child shares its
                    // parent's mappings.
                    self.worker.mapping_verdicts.fork_advice_seen();
                }
                if let (Some(r), Ok(mem)) = (r, Memory::open(pid)) {
                    let (nr, a) = (r.orig_rax as i64, regs::syscall_args(&r));
                    if let Some(changes) = note_file_change(self.worker, pid, pid, &mem, nr, a) {
                        self.world.note_file_changes(changes);
                    }
                }
                events::resume(pid, None)?
            }
            _ => events::resume(pid, None)?,
        }
        Ok(())
    }

    /// The vfork child `child` released its parent (it execs, or ends): its exec or its end
    /// is waited for before the parent goes on, so that it joins the tree (or is noted as
    /// untraced) within the parent's step, at the same point in every execution, never at a
    /// moment the kernel's timing picks.
    fn await_vfork_child(&mut self, child: Pid) -> Result<()> {
        while self.p.foreign.contains(&child) {
            if self.worker.cut.raised() {
                return Ok(());
            }
            match events::wait(Some(child))? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => {
                    self.p.foreign_ended(child);
                }
                WaitOutcome::Event(pid, ev) => self.pass_through(pid, ev)?,
            }
        }
        Ok(())
    }

    /// A foreign process stopped at an `int3`: one of mcheck's, in the memory it shares
    /// with its parent (a vfork child calls libc functions before it execs), is stepped
    /// over as the parent's thread would step over it: the program's byte put back for one
    /// instruction. The parent cannot run meanwhile (vfork suspends it; only one thread of
    /// the tree runs at a time). Any other trap is the program's own.
    fn foreign_trap(&mut self, pid: Pid) -> Result<()> {
        let mut r = regs::get(pid)?;
        let addr = r.rip.wrapping_sub(1);
        let shares = crate::tracee::procfs::parent_of(pid) == Some(self.p.pid);
        let original = self.code.original_byte(addr).filter(|_| shares);
        let Some(byte) = original else {
            return events::resume(pid, Some(Signal::SIGTRAP)).map_err(Into::into);
        };
        self.p.mem.write(addr, &[byte])?;
        r.rip = addr;
        regs::set(pid, r)?;
        events::step(pid)?;
        let mut pending = None;
        loop {
            match events::wait(Some(pid))? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::Event(_, Event::Signal(sig)) if pending.is_none() => {
                    // Arrived before the instruction ran: delivered after it.
                    pending = Some(sig);
                    events::step(pid)?;
                }
                _ => break,
            }
        }
        self.p.mem.write(addr, &[0xcc])?;
        events::resume(pid, pending)?;
        Ok(())
    }

    /// Follows a process that shares its creator's memory without being a thread of it (a
    /// vfork child until it execs, a clone with `CLONE_VM`), letting it run natively.
    pub(super) fn adopt_foreign(&mut self, child: Pid) -> Result<()> {
        self.p.add_foreign(child);
        if self.p.early_stops.remove(&child) {
            events::resume(child, None)?;
        }
        Ok(())
    }

    pub(super) fn unknown_stop(&mut self, pid: Pid, ev: Event) {
        if matches!(ev, Event::Stop(_) | Event::Signal(Signal::SIGSTOP)) {
            self.p.early_stops.insert(pid);
        }
    }

    /// An event of a thread that is not the running one (group exit, first stops).
    pub(super) fn other_thread_event(
        &mut self,
        u: ThreadId,
        ev: Event,
    ) -> Result<Option<ProcessEnd>> {
        let tid = self.p.threads[u].tid;
        match ev {
            Event::Stop(_) if !self.p.threads[u].started => self.p.threads[u].started = true,
            Event::Exiting(_) => {
                self.p.threads[u].gone = true;
                events::resume(tid, None)?;
            }
            Event::Exited(_) | Event::Killed(_) if self.p.leads(tid, u) => {
                let end = match ev {
                    Event::Exited(code) => ProcessEnd::Exited(code),
                    Event::Killed(sig) => ProcessEnd::Killed(sig),
                    _ => unreachable!("matched above"),
                };
                let i = self.p.proc_of(u);
                if i == self.p.current() {
                    return Ok(Some(end));
                }
                // Another process of the tree ended (killed while its threads were stopped).
                self.processes().close_process(i, end);
            }
            Event::Exited(_) | Event::Killed(_) => {
                self.p.threads[u].gone = true;
                if !self.model.is_finished(u) {
                    self.model.thread_exited(u);
                }
            }
            // The user's Ctrl-C, meant for mcheck: dropped (the thread resumes without it).
            Event::Signal(sig) if self.meant_for_mcheck(tid, sig) => interrupt::note(sig),
            Event::Signal(sig) => self.p.threads[u].pending_signal = Some(sig),
            _ => {
                if self.step.group_exiting {
                    events::resume(tid, None)?;
                }
            }
        }
        Ok(None)
    }

    /// An event of the running thread; Some when it stopped running.
    pub(super) fn running_thread_event(
        &mut self,
        t: ThreadId,
        ev: Event,
    ) -> Result<Option<RunResult>> {
        let tid = self.p.threads[t].tid;
        match ev {
            Event::Trap => self.on_trap(t),
            Event::Seccomp => self.on_seccomp(t),
            Event::Clone(child) => self.on_clone(t, child),
            Event::Fork(child) => self.processes().on_fork(t, child),
            Event::Vfork(child) => {
                self.adopt_foreign(child)?;
                self.step.vfork_child = Some(child);
                events::resume(tid, None)?;
                Ok(None)
            }
            Event::Exiting(status) => {
                self.p.threads[t].gone = true;
                if status & 0x7f != 0 {
                    // Death by a signal takes every thread with it.
                    self.step.group_exiting = true;
                }
                events::resume(tid, None)?;
                if self.step.group_exiting {
                    return Ok(None);
                }
                if tid != self.p.pid {
                    if let Some(end) = self.await_thread_gone(t)? {
                        return Ok(Some(RunResult::ProcessEnded(end)));
                    }
                    let ctid = self.p.threads[t].clear_tid;
                    if ctid != 0 {
                        let word = crate::model::in_space(ctid, self.p.space());
                        self.model.wake_futex(word, u32::MAX);
                    }
                }
                Ok(Some(RunResult::ThreadExited))
            }
            Event::Exited(code) if tid == self.p.pid => {
                Ok(Some(RunResult::ProcessEnded(ProcessEnd::Exited(code))))
            }
            Event::Killed(sig) if tid == self.p.pid => {
                Ok(Some(RunResult::ProcessEnded(ProcessEnd::Killed(sig))))
            }
            // During a group exit only the end of the whole process matters.
            Event::Exited(_) | Event::Killed(_) if self.step.group_exiting => Ok(None),
            Event::Exited(_) | Event::Killed(_) => {
                self.p.threads[t].gone = true;
                Ok(Some(RunResult::ThreadExited))
            }
            Event::Stop(_) => {
                if self.watchdog.interrupted() {
                    let progress = self.progress_since_resume();
                    let spun = self.watchdog.interrupted_to_learn()
                        || progress >= self.cfg.limits.execution_timeout;
                    if let Some(pc) = self.spin_to_learn(t).filter(|_| spun) {
                        // A busy wait on an atomic load, which another thread may end: not
                        // the program's fault. The load yields from the next execution on.
                        self.spin_learnt = Some((t, pc));
                        return Ok(Some(RunResult::ProcessEnded(ProcessEnd::Abandoned)));
                    }
                    if progress < self.cfg.limits.execution_timeout {
                        // Not a spin: blocked in the kernel, waiting for something no
                        // thread can do while mcheck holds them stopped. Not the program's
                        // fault as far as mcheck can tell: no finding.
                        self.abandoned = Some(self.blocked_description(t));
                        return Ok(Some(RunResult::ProcessEnded(ProcessEnd::Abandoned)));
                    }
                    return Ok(Some(RunResult::Found(Box::new(self.timeout_finding(t)?))));
                }
                events::resume(tid, None)?;
                Ok(None)
            }
            Event::Signal(Signal::SIGSEGV) if self.emulate_rdtsc(t)? => {
                events::resume(tid, None)?;
                Ok(None)
            }
            Event::Signal(sig) if self.meant_for_mcheck(tid, sig) => {
                // The user's Ctrl-C, meant for mcheck: the search stops, the program goes on.
                interrupt::note(sig);
                events::resume(tid, None)?;
                Ok(None)
            }
            Event::Signal(sig) => {
                if let Some(f) = self.signal_finding(t, sig) {
                    return Ok(Some(RunResult::Found(Box::new(f))));
                }
                events::resume(tid, Some(sig))?;
                Ok(None)
            }
            Event::Exec => self.processes().on_exec(t),
            Event::VforkDone => {
                if let Some(child) = self.step.vfork_child.take() {
                    self.await_vfork_child(child)?;
                }
                events::resume(tid, None)?;
                Ok(None)
            }
        }
    }

    /// Waits until exiting thread `t` is reaped, serving other events meanwhile.
    pub(super) fn await_thread_gone(&mut self, t: ThreadId) -> Result<Option<ProcessEnd>> {
        let tid = self.p.threads[t].tid;
        loop {
            let (pid, ev) = match events::wait(None)? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => return Ok(Some(ProcessEnd::Vanished)),
                WaitOutcome::Event(pid, ev) => (pid, ev),
            };
            if pid == tid && matches!(ev, Event::Exited(_) | Event::Killed(_)) {
                return Ok(None);
            }
            if self.p.foreign.contains(&pid) {
                self.pass_through(pid, ev)?;
            } else if let Some(&u) = self.p.by_tid.get(&pid) {
                if let Some(end) = self.other_thread_event(u, ev)? {
                    return Ok(Some(end));
                }
            } else {
                self.unknown_stop(pid, ev);
            }
        }
    }

    /// Kills the process tree and reaps it.
    pub(super) fn kill_all(&mut self) {
        if self.p.killed {
            return;
        }
        self.p.killed = true;
        let mut pids = self.p.live_pids();
        pids.insert(self.p.pid);
        for &p in &pids {
            let _ = kill(p, Signal::SIGKILL);
        }
        reap_all(&pids);
    }

    /// Every thread has finished: waits for the end of every process of the tree still
    /// there; how the program (P0) ended.
    pub(super) fn wait_process_end(&mut self) -> Result<ProcessEnd> {
        loop {
            if self.p.forked() && !self.p.procs.iter().any(|q| q.live) {
                return Ok(self
                    .processes()
                    .root_ended()
                    .unwrap_or(ProcessEnd::Vanished));
            }
            let (pid, ev) = match events::wait(None)? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => return Ok(ProcessEnd::Vanished),
                WaitOutcome::Event(pid, ev) => (pid, ev),
            };
            let live = (self.p.procs.iter()).position(|q| q.live && q.pid == pid);
            if let Some(i) = live {
                let end = match ev {
                    Event::Exited(c) => ProcessEnd::Exited(c),
                    Event::Killed(s) => ProcessEnd::Killed(s),
                    _ => {
                        events::resume(pid, None)?;
                        continue;
                    }
                };
                if !self.p.forked() {
                    return Ok(end);
                }
                self.processes().close_process(i, end);
                if !self.p.procs.iter().any(|q| q.live) {
                    return Ok(self.processes().root_ended().unwrap_or(end));
                }
            } else if self.p.foreign.contains(&pid) {
                self.pass_through(pid, ev)?;
            } else {
                events::resume(pid, None)?;
            }
        }
    }
}

/// Reaps the processes `pids` of this tracer thread (an execution's: the worker's snapshot
/// templates stay stopped), continuing exit stops until none is left.
pub(super) fn reap_all(pids: &std::collections::HashSet<Pid>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left: std::collections::HashSet<Pid> = pids.clone();
    loop {
        // A process reaped before (its end was seen during the execution) is gone for good;
        // a zombie still accepts signal 0 until it is reaped here.
        left.retain(|&p| kill(p, None).is_ok());
        if left.is_empty() {
            return;
        }
        match events::wait(None) {
            Ok(WaitOutcome::Event(pid, Event::Exited(_) | Event::Killed(_))) => {
                left.remove(&pid);
            }
            Ok(WaitOutcome::Event(pid, _)) => {
                let _ = kill(pid, Signal::SIGKILL);
                let _ = events::resume(pid, None);
            }
            Ok(WaitOutcome::Interrupted) => {}
            Ok(WaitOutcome::NoChildren) | Err(_) => return,
        }
        if Instant::now() > deadline {
            for &f in pids {
                let _ = kill(f, Signal::SIGKILL);
            }
            return;
        }
    }
}

/// Thread creation.
impl Session<'_> {
    pub(super) fn on_clone(&mut self, t: ThreadId, child: Pid) -> Result<Option<RunResult>> {
        let (flags, ctid, tls) = self
            .step
            .pending_clone
            .take()
            .unwrap_or((CLONE_THREAD, 0, 0));
        let parent_tid = self.p.threads[t].tid;
        if flags & CLONE_THREAD == 0 {
            if flags & CLONE_VM == 0 {
                // A process of its own (clone used as fork): followed as a fork child.
                self.step.pending_clone = Some((flags, ctid, tls));
                return self.processes().on_fork(t, child);
            }
            self.adopt_foreign(child)?;
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
        let mut th = TracedThread::new(child, started, clear_tid, handle);
        th.proc = self.p.current();
        th.affinity = self.p.threads[t].affinity.clone();
        self.p.threads.push(th);
        self.p.by_tid.insert(child, id);
        if let Some(d) = self.races.detector() {
            d.thread_created(t, id);
            crate::run::races::happens_before::thread_block_taken(d, id, handle);
        }
        self.locks.thread_created(t, id);
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
        self.step.creation_stretch.insert(t);
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
            let done = match self.execute_op(u) {
                Ok(done) => done,
                Err(f) => {
                    let f = self.model_finding(f);
                    return Ok(Some(self.outcome(Some(f))));
                }
            };
            if let Some(f) = self.complete(u, &done)? {
                return Ok(Some(self.outcome(Some(f))));
            }
            self.step.creation_stretch.insert(u);
            self.sync_log_mode(u);
            let r = self.resume_and_run(u)?;
            if let Some(done) = self.settle(u, r)? {
                return Ok(Some(done));
            }
            if self.model.is_finished(u) {
                // Gone within the step: a join of it depends on this step.
                self.step.segment.touch_exit(u);
            }
        }
        Ok(None)
    }

    /// Whether a thread of `t`'s process other than `t` has not finished.
    pub(super) fn others_live(&self, t: ThreadId) -> bool {
        let i = self.p.proc_of(t);
        (0..self.model.thread_count())
            .any(|u| u != t && self.p.proc_of(u) == i && !self.model.is_finished(u))
    }
}

/// Seccomp stops.
impl Session<'_> {
    pub(super) fn on_seccomp(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let r = self.p.load_regs(t)?;
        let tid = self.p.threads[t].tid;
        let nr = r.orig_rax as i64;
        let a = regs::syscall_args(&r);
        if self.p.syscall_insn == 0
            && self.p.mem.read_u16(r.rip.wrapping_sub(2)).ok() == Some(0x050f)
        {
            self.p.syscall_insn = r.rip - 2;
        }
        let clone_flags = match nr {
            nr::CLONE => a[0],
            nr::CLONE3 => self.p.mem.read_u64(a[0]).unwrap_or(0),
            _ => 0,
        };
        if clone_flags & CLONE_THREAD != 0 && self.races.on() && !self.instr.recording() {
            // The first thread: from here on accesses can race and are recorded. The
            // thread enters the clone again afterwards.
            let share = self.snaps.wants_startup() && !self.snaps.startup_at_main();
            self.instrumenting(|i, c| i.start_recording(c, t, &r, share))?;
            return Ok(None);
        }
        if let Some(key) = self.snaps.take_startup_key() {
            if clone_flags & CLONE_THREAD == 0 {
                self.snaps.keep_startup_key(key);
            } else if self.snapshotting().take_startup_snapshot(t, &r, key)? {
                return Ok(None);
            }
        }
        if let Some(stop) = self.before_file_change(t, nr, a)? {
            return Ok(stop);
        }
        self.p.threads[t].place = StopPlace::Syscall;
        match nr {
            nr::CLONE => self.step.pending_clone = Some((a[0], a[3], a[4])),
            nr::CLONE3 => {
                let flags = self.p.mem.read_u64(a[0]).unwrap_or(0);
                let ctid = self.p.mem.read_u64(a[0] + 16).unwrap_or(0);
                let tls = self.p.mem.read_u64(a[0] + 56).unwrap_or(0);
                self.step.pending_clone = Some((flags, ctid, tls));
            }
            nr::SET_TID_ADDRESS => self.p.threads[t].clear_tid = a[0],
            // Trapped only with a fork advice (the call then runs natively).
            nr::MADVISE => self.worker.mapping_verdicts.fork_advice_seen(),
            nr::SIGALTSTACK if a[0] != 0 => {
                let mut ss = [0u8; 24];
                if self.p.mem.read(a[0], &mut ss).is_ok() {
                    let flags = i32::from_le_bytes(ss[8..12].try_into().expect("4 bytes"));
                    self.p.threads[t].altstack = (flags & libc::SS_DISABLE == 0).then_some(ss);
                }
            }
            nr::EXIT_GROUP if self.others_live(t) => {
                // Other threads could still run first: ending the process is a decision.
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(r.rip);
                return self.point(t, Op::ExitGroup, site);
            }
            nr::EXIT_GROUP => {
                self.step.group_exiting = true;
                if self.debug().debug_exiting(t)? == crate::run::debug_port::Resume::Kill {
                    return Ok(Some(RunResult::CutShort));
                }
            }
            _ => {}
        }
        let site = || self.p.mem.read_u64(r.rsp).unwrap_or(r.rip);
        if let Some(stop) = self.on_kernel_call(t, nr, a, site())? {
            return Ok(stop);
        }
        match syscalls::decode(nr, a, self) {
            SyscallAction::Point(op) => {
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(r.rip);
                self.point(t, op, site)
            }
            SyscallAction::Emulate(v) => {
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Native => {
                self.p.threads[t].place = StopPlace::Event;
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Clock(call) => {
                // Reading the clock sees where timeouts have moved it.
                self.step.segment.touch(ObjectKind::Time, 0, false);
                let v = self.world.answer_clock(call, self.model.now(), &self.p.mem);
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
            call @ (SyscallAction::Affinity { .. } | SyscallAction::SetAffinity { .. }) => {
                match self.affinity_call(t, &call) {
                    Some(v) => self.p.finish_syscall(t, v)?,
                    None => self.p.threads[t].place = StopPlace::Event,
                }
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Random { buf, len } => {
                let len = len.min(1 << 20) as usize;
                let bytes = self.world.random_bytes(len);
                let v = match self.p.mem.write(buf, &bytes) {
                    Ok(()) => len as i64,
                    Err(_) => -(libc::EFAULT as i64),
                };
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
        }
    }

    /// sched_getaffinity or sched_setaffinity by thread `t`, answered from the CPUs shown
    /// to the program and those its threads set: the call's result, or None when the
    /// kernel answers (a thread of a process not traced, or a schedule recorded before the
    /// CPUs were shown).
    fn affinity_call(&mut self, t: ThreadId, call: &SyscallAction) -> Option<i64> {
        let shown = self.cfg.program.cpus.as_deref()?;
        let thread = |pid: i32| match pid {
            0 => Some(t),
            _ => self.p.by_tid.get(&Pid::from_raw(pid)).copied(),
        };
        let layout = cpu::mask_layout();
        let result = match *call {
            SyscallAction::Affinity { pid, len, out } => {
                let u = thread(pid)?;
                let cpus = self.p.threads[u].affinity.as_deref().unwrap_or(shown);
                cpu::affinity_answer(cpus, len, layout).and_then(|mask| {
                    (self.p.mem.write(out, &mask).map(|()| mask.len() as i64))
                        .map_err(|_| libc::EFAULT)
                })
            }
            SyscallAction::SetAffinity { pid, len, mask } => {
                let u = thread(pid)?;
                let mut bytes = vec![0u8; len.min(layout.copied) as usize];
                (self.p.mem.read(mask, &mut bytes).map_err(|_| libc::EFAULT))
                    .and_then(|()| cpu::affinity_set(shown, &bytes, layout))
                    .map(|set| {
                        self.p.threads[u].affinity = Some(set);
                        0
                    })
            }
            _ => return None,
        };
        Some(result.unwrap_or_else(|errno| -(errno as i64)))
    }

    /// A system call that may change files: the worker takes the file-system gate first
    /// (`fs_gate`), and the call runs natively. None when `nr` is no such call.
    fn before_file_change(
        &mut self,
        t: ThreadId,
        nr: i64,
        a: [u64; 6],
    ) -> Result<Option<Option<RunResult>>> {
        let opens = [nr::OPEN, nr::OPENAT, nr::OPENAT2];
        if !opens.contains(&nr) && !nr::FILE_CHANGES.contains(&nr) {
            return Ok(None);
        }
        let (pid, tid) = (self.p.pid, self.p.threads[t].tid);
        match note_file_change(self.worker, pid, tid, &self.p.mem, nr, a) {
            Some(changes) => self.world.note_file_changes(changes),
            None => return Ok(Some(Some(RunResult::CutShort))),
        }
        self.p.threads[t].place = StopPlace::Event;
        events::resume(self.p.threads[t].tid, None)?;
        Ok(Some(None))
    }

    /// Emulates rdtsc/rdtscp in thread `t`, which fault under PR_TSC_SIGSEGV; true when it
    /// was one.
    pub(super) fn emulate_rdtsc(&mut self, t: ThreadId) -> Result<bool> {
        let tid = self.p.threads[t].tid;
        let done = self.world.emulate_rdtsc(tid, self.model.now())?;
        if done {
            self.step.segment.touch(ObjectKind::Time, 0, false);
            self.p.load_regs(t)?;
        }
        Ok(done)
    }
}

/// The kernel as a source of blocking (`kernel/`).
impl Session<'_> {
    /// A trapped call at its seccomp stop in thread `t`: None when it is not a kernel call,
    /// else what the stop turns into (a scheduling point when it would wait).
    pub(super) fn on_kernel_call(
        &mut self,
        t: ThreadId,
        nr: i64,
        args: [u64; 6],
        site: u64,
    ) -> Result<Option<Option<RunResult>>> {
        let in_stretch = self.step.creation_stretch.contains(&t);
        let Some(stop) = self.kernel.classify(&mut self.p, t, nr, args, in_stretch)? else {
            return Ok(None);
        };
        if stop.communicated {
            self.communicated(t);
        }
        match stop.then {
            KernelThen::RunOn => self.run_on(t).map(Some),
            KernelThen::Return(v) => {
                self.p.load_regs(t)?;
                self.p.finish_syscall(t, v)?;
                events::resume(self.p.threads[t].tid, None)?;
                Ok(Some(None))
            }
            KernelThen::Wait(op) => self.point(t, op, site).map(Some),
        }
    }

    /// Looks again at every call the model has blocked in the kernel and tells the model
    /// which are ready (at every scheduling point: another thread may have written to the
    /// pipe, sent the signal, ended the child...).
    pub(super) fn recheck_kernel_waits(&mut self) {
        self.kernel.recheck(&self.p, &mut self.model);
    }

    /// Every thread waits in the kernel for the outside: waits until one of them is ready,
    /// serving the stops of the processes the program started, for at most the execution
    /// timeout. True when one became ready, or when the search is cut short meanwhile (the
    /// caller sees the cut next): a time limit or a signal must not wait for the outside.
    pub(in crate::run) fn wait_for_outside(&mut self) -> Result<bool> {
        let start = std::time::Instant::now();
        loop {
            if self.worker.cut.raised() {
                return Ok(true);
            }
            self.recheck_kernel_waits();
            if !self.model.enabled_threads().is_empty() {
                return Ok(true);
            }
            if start.elapsed() > self.cfg.limits.execution_timeout {
                return Ok(false);
            }
            match events::wait(None)? {
                crate::tracee::WaitOutcome::Event(pid, ev) if self.p.foreign.contains(&pid) => {
                    self.pass_through(pid, ev)?
                }
                crate::tracee::WaitOutcome::Event(pid, ev) => match self.p.by_tid.get(&pid) {
                    // A process of the tree ended meanwhile (killed from outside).
                    Some(&u) if matches!(ev, Event::Exited(_) | Event::Killed(_)) => {
                        let current = self.p.proc_of(u) == self.p.current();
                        let end = self.other_thread_event(u, ev)?.filter(|_| current);
                        // Nothing is left: the execution ends (`choices`).
                        if end.is_some_and(|end| self.processes().process_ended(end).is_some()) {
                            return Ok(true);
                        }
                    }
                    _ => self.unknown_stop(pid, ev),
                },
                crate::tracee::WaitOutcome::Interrupted => {}
                crate::tracee::WaitOutcome::NoChildren => return Ok(false),
            }
        }
    }

    /// Lets `t`, at a seccomp stop, run its call natively.
    fn run_on(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        self.p.threads[t].place = crate::run::process::StopPlace::Event;
        events::resume(self.p.threads[t].tid, None)?;
        Ok(None)
    }

    /// `t` passed something through the kernel: its step touches the kernel object, and
    /// the race detector sees an acquire and a release of it.
    fn communicated(&mut self, t: ThreadId) {
        self.step.segment.touch(ObjectKind::Kernel, 0, true);
        if let Some(d) = self.races.detector() {
            happens_before::kernel(d, t);
        }
    }
}

pub(super) const CLONE_THREAD: u64 = 0x0001_0000;
pub(super) const CLONE_VM: u64 = 0x0000_0100;
pub(super) const CLONE_CHILD_CLEARTID: u64 = 0x0020_0000;
pub(super) const CLONE_SETTLS: u64 = 0x0008_0000;

/// Before system call `nr` (arguments `a`) of thread `tid` of process `pid` (the
/// program, or a process it forked) runs: when it may change files, the worker takes the
/// file-system gate (`fs_gate`) and the journal saves the state of the paths it names
/// (`file_journal`). Whether it may change files; None when the search is being cut
/// short meanwhile.
pub(super) fn note_file_change(
    worker: &mut WorkerState,
    pid: Pid,
    tid: Pid,
    mem: &Memory,
    nr: i64,
    a: [u64; 6],
) -> Option<bool> {
    if !changes_files(nr, a, |how| mem.read_u64(how).unwrap_or(0)) {
        return Some(false);
    }
    if worker.fs_pass.is_none() {
        match worker.fs_gate.enter(&worker.cut) {
            Some(pass) => worker.fs_pass = Some(pass),
            None => return None,
        }
    }
    if let Some(journal) = &worker.journal {
        let paths = file_paths::changed_paths(pid, tid, mem, nr, a);
        let mut j = journal.lock().expect("file journal");
        j.note_change(paths.iter().map(PathBuf::as_path));
    }
    Some(true)
}
