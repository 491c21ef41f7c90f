//! Stops to events: resuming the running thread and waiting until it reaches its next
//! scheduling point, while serving the stops of every other tracee (threads that are not
//! running, processes the program forked, new threads' first stops), and the end of an
//! execution: waiting for the process to end, killing and reaping the whole tree.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::execution::{Execution, ProcessEnd, RunResult};
use super::syscall_stops::note_file_change;

use crate::model::ThreadId;
use crate::report::Finding;
use crate::tracee::memory::Memory;
use crate::tracee::{events, interrupt, regs, Event, WaitOutcome};

impl Execution<'_> {
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
        self.ensure_started(t)?;
        if self.debugging() {
            self.debug_arm(t)?;
            if let Some(r) = self.debug_before_running(t)? {
                return Ok(r);
            }
        }
        let th = &mut self.p.threads[t];
        let sig = th.pending_signal.take();
        let tid = th.tid;
        self.watchdog.resumed(self.p.pid);
        events::resume(tid, sig)?;
        loop {
            // Looked at after every stop too: a thread whose traced accesses stop it all the
            // time may leave the watchdog's tick no waitpid to interrupt for seconds.
            if self.worker.cut.raised() {
                return Ok(RunResult::CutShort);
            }
            let (pid, ev) = match events::wait(None)? {
                WaitOutcome::Interrupted => {
                    self.check_timeout(tid)?;
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
    pub(super) fn check_timeout(&mut self, tid: Pid) -> Result<()> {
        let pending = self.code.logged();
        let limit = self.cfg.limits.execution_timeout;
        if self
            .watchdog
            .should_interrupt(self.p.pid, tid, limit, pending)
        {
            events::interrupt(tid)?;
        }
        Ok(())
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
    pub(super) fn progress_since_resume(&self) -> Duration {
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
            Event::Exited(_) | Event::Killed(_) => {
                self.p.foreign.remove(&pid);
            }
            Event::Fork(child) | Event::Vfork(child) | Event::Clone(child) => {
                // A child of a child: its code was cleaned already.
                self.adopt_foreign(child, false)?;
                events::resume(pid, None)?;
            }
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
                if let (Ok(r), Ok(mem)) = (regs::get(pid), Memory::open(pid)) {
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

    /// Follows a process the program created, letting it run natively; `clean` when it has
    /// a memory of its own (not a vfork child), whose code gets mcheck's changes undone.
    pub(super) fn adopt_foreign(&mut self, child: Pid, clean: bool) -> Result<()> {
        self.p.foreign.insert(child);
        if clean {
            self.code.clean_forked_child(child)?;
        }
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
            Event::Exited(code) if tid == self.p.pid => return Ok(Some(ProcessEnd::Exited(code))),
            Event::Killed(sig) if tid == self.p.pid => return Ok(Some(ProcessEnd::Killed(sig))),
            Event::Exited(_) | Event::Killed(_) => {
                self.p.threads[u].gone = true;
                if !self.model.is_finished(u) {
                    let _ = self.model.thread_exited(u);
                }
            }
            // The user's Ctrl-C, meant for mcheck: dropped (the thread resumes without it).
            Event::Signal(sig) if self.meant_for_mcheck(tid, sig) => interrupt::note(sig),
            Event::Signal(sig) => self.p.threads[u].pending_signal = Some(sig),
            _ => {
                if self.group_exiting {
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
            Event::Fork(child) | Event::Vfork(child) => {
                self.adopt_foreign(child, matches!(ev, Event::Fork(_)))?;
                events::resume(tid, None)?;
                Ok(None)
            }
            Event::Exiting(status) => {
                self.p.threads[t].gone = true;
                if status & 0x7f != 0 {
                    // Death by a signal takes every thread with it.
                    self.group_exiting = true;
                }
                events::resume(tid, None)?;
                if self.group_exiting {
                    return Ok(None);
                }
                if tid != self.p.pid {
                    if let Some(end) = self.await_thread_gone(t)? {
                        return Ok(Some(RunResult::ProcessEnded(end)));
                    }
                    let ctid = self.p.threads[t].clear_tid;
                    if ctid != 0 {
                        self.model.wake_futex(ctid, u32::MAX);
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
            Event::Exited(_) | Event::Killed(_) if self.group_exiting => Ok(None),
            Event::Exited(_) | Event::Killed(_) => {
                self.p.threads[t].gone = true;
                Ok(Some(RunResult::ThreadExited))
            }
            Event::Stop(_) => {
                if self.watchdog.interrupted() {
                    if self.progress_since_resume() < self.cfg.limits.execution_timeout {
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
            Event::Exec => Ok(Some(RunResult::ProcessEnded(ProcessEnd::Vanished))),
            Event::VforkDone => {
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
        if self.killed {
            return;
        }
        self.killed = true;
        let _ = kill(self.p.pid, Signal::SIGKILL);
        for &f in &self.p.foreign {
            let _ = kill(f, Signal::SIGKILL);
        }
        reap_all(self.p.pid, &self.p.foreign);
    }

    pub(super) fn wait_process_end(&mut self) -> Result<ProcessEnd> {
        loop {
            let (pid, ev) = match events::wait(None)? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => return Ok(ProcessEnd::Vanished),
                WaitOutcome::Event(pid, ev) => (pid, ev),
            };
            if pid == self.p.pid {
                match ev {
                    Event::Exited(c) => return Ok(ProcessEnd::Exited(c)),
                    Event::Killed(s) => return Ok(ProcessEnd::Killed(s)),
                    _ => events::resume(pid, None)?,
                }
            } else if self.p.foreign.contains(&pid) {
                self.pass_through(pid, ev)?;
            } else {
                events::resume(pid, None)?;
            }
        }
    }
}

/// Reaps every child of this tracer thread, continuing exit stops until none is left.
pub(super) fn reap_all(pid: Pid, foreign: &std::collections::HashSet<Pid>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    // Only this execution's processes: the worker's snapshot templates stay stopped.
    let mut left: std::collections::HashSet<Pid> = foreign.clone();
    left.insert(pid);
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
            for &f in foreign {
                let _ = kill(f, Signal::SIGKILL);
            }
            return;
        }
    }
}
