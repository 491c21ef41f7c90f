//! Breakpoint stops: what an `int3` of mcheck's means (a hooked function's entry, an atomic
//! or memory-access instruction, an allocator, the entry point, a return address...) and
//! the scheduling point or native continuation it turns into.

use anyhow::Result;
use nix::sys::signal::Signal;

use super::{race_env, ProcessEnd, RunResult, Session};
use crate::detect::heap::FreeAction;
use crate::detect::race::HeapBlock;
use crate::model::{Op, ThreadId};
use crate::patch::{Kind, Record};
use crate::run::instrument::code::BreakpointKind;
use crate::run::instrument::hooks::Hook;
use crate::run::instrument::plan::{Alloc, MemFn};
use crate::run::instrument::sites::UnloggedCall;
use crate::run::instrument::Instrumentation;
use crate::run::kernel::timeouts;
use crate::run::process::StopPlace;
use crate::run::races::happens_before::ONCE;
use crate::run::races::{PendingReturn, ReturnAction, Seen};
use crate::tracee::regs::Regs;
use crate::tracee::{events, regs};

impl Session<'_> {
    pub(super) fn on_trap(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let r = self.p.load_regs(t)?;
        let addr = r.rip.wrapping_sub(1);
        if self.debugging() {
            if let Some(watched) = self.debug().watch_hit(t)? {
                // A hardware watchpoint of the debugger fired after the instruction (in a
                // trampoline: shown past its site, where the program goes on from).
                let unlogged = self.instr.leave_trampoline(&mut self.p, &self.code, t)?;
                self.drain_log(t);
                self.record_unlogged(t, unlogged);
                self.p.load_regs(t)?;
                self.p.threads[t].place = StopPlace::Event;
                let ev = crate::run::debug_port::DebugEvent::Watch {
                    thread: t,
                    addr: watched,
                };
                if let Some(done) = self.debug().debug_stop_stepping(t, ev)? {
                    return Ok(Some(done));
                }
                let sig = self.p.threads[t].pending_signal.take();
                events::resume(self.p.threads[t].tid, sig)?;
                return Ok(None);
            }
            if let Some(done) = self.debug().debugger_trap(t, addr)? {
                return Ok(done);
            }
        }
        if self.returns.contains_key(&addr) {
            if let Some(ran) = self.handle_return(t, addr, &r)? {
                return Ok(ran);
            }
        }
        let Some(kind) = self.code.kind(addr).cloned() else {
            if let Some(done) = self.on_log_full(t, addr)? {
                return Ok(done);
            }
            // Not ours: a SIGTRAP of the program's own.
            events::resume(self.p.threads[t].tid, Some(Signal::SIGTRAP))?;
            return Ok(None);
        };
        self.p.threads[t].place = StopPlace::Breakpoint(addr);
        let (op, site) = match kind {
            BreakpointKind::Entry => {
                self.code.forget_breakpoint(&self.p.mem, addr)?;
                let mut r = r;
                r.rip = addr;
                regs::set(self.p.threads[t].tid, r)?;
                self.p.threads[t].regs = r;
                self.p.threads[t].place = StopPlace::Event;
                self.p.threads[t].handle = r.fs_base;
                self.install_hooks(t)?;
                // The debugger is told of the program's start, not of the images it execs.
                let first = self.p.current() == 0 && !self.p.grew();
                if first
                    && self
                        .debug()
                        .debug_event(crate::run::debug_port::DebugEvent::Started)
                        == crate::run::debug_port::Resume::Kill
                {
                    return Ok(Some(RunResult::CutShort));
                }
                (Op::Continue, 0)
            }
            BreakpointKind::Main => {
                self.code.forget_breakpoint(&self.p.mem, addr)?;
                let mut r = r;
                r.rip = addr;
                let tid = self.p.threads[t].tid;
                regs::set(tid, r)?;
                self.p.threads[t].regs = r;
                self.p.threads[t].place = StopPlace::Event;
                if let Some(key) = self.snaps.take_startup_key() {
                    self.snapshotting().take_main_snapshot(t, &r, key)?;
                }
                events::resume(tid, None)?;
                return Ok(None);
            }
            BreakpointKind::Hook(h) => {
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(0);
                if let Hook::GompTask { key } = h {
                    // The task's function: a scheduling point wherever the task runs.
                    let body = regs::call_args(&r)[0];
                    if body != 0 {
                        let kind = BreakpointKind::Hook(Hook::GompTaskBody { key });
                        self.code
                            .add_breakpoints(&self.p.mem, &[body], |_| Some(kind.clone()))?;
                    }
                }
                let op = h.op(regs::call_args(&r), self);
                if self.is_glibc_internal(site) {
                    // glibc's own locking (ld.so's TLS lock at thread creation...) is part of
                    // an atomic libc call: apply it at once unless it has to wait.
                    return self.internal_call(t, op, site);
                }
                (op, site)
            }
            BreakpointKind::Atomic { plan, index, bias } => {
                let insn = &plan.atomics[index];
                let ea = self.p.effective_address(t, insn, bias);
                (
                    Op::Atomic {
                        addr: ea,
                        size: point_size(insn, insn.memory_size().size()),
                    },
                    addr,
                )
            }
            BreakpointKind::Access(id) => return self.on_access(t, addr, id),
            BreakpointKind::Pause => (Op::Yield, addr),
            BreakpointKind::Alloc(kind) => {
                self.enter_called_function(t, addr)?;
                return self.on_allocator(t, kind);
            }
            BreakpointKind::MemFn(f) => return self.on_mem_fn(t, f),
            BreakpointKind::LinkMapChanged => {
                self.install_hooks(t)?;
                return self.step_and_resume(t);
            }
            BreakpointKind::Panic => {
                if self.panic.is_none() {
                    self.panic = Some(self.thread_report(t, "panicked".into()));
                }
                return self.step_and_resume(t);
            }
        };
        self.point(t, op, site)
    }

    /// Whether a hooked function was called from inside glibc (libc.so or ld.so).
    pub(super) fn is_glibc_internal(&self, site: u64) -> bool {
        self.worker.symbols.modules().find(site).is_some_and(|m| {
            let name = m.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libc.so") || name.starts_with("ld-linux")
        })
    }
}

/// Calls and returns, access sites and allocators: the breakpoint stops race recording
/// and the model need.
impl Session<'_> {
    /// Arms a return breakpoint for `t`, stopped at the entry of a function.
    pub(super) fn on_return_of_call(&mut self, t: ThreadId, action: ReturnAction) -> Result<()> {
        let r = self.p.threads[t].regs;
        let ret = self.p.mem.read_u64(r.rsp)?;
        self.code.insert_breakpoint(&self.p.mem, ret)?;
        self.returns.entry(ret).or_default().push(PendingReturn {
            thread: t,
            rsp: r.rsp + 8,
            action,
        });
        Ok(())
    }

    /// If `t` stopped at a return breakpoint meant for it, performs the action. Returns
    /// Some when the stop was only that (with what running on produced), None when the
    /// address also has a permanent breakpoint to handle.
    pub(super) fn handle_return(
        &mut self,
        t: ThreadId,
        addr: u64,
        r: &Regs,
    ) -> Result<Option<Option<RunResult>>> {
        let Some(list) = self.returns.get(&addr) else {
            return Ok(None);
        };
        if !list.iter().any(|p| p.thread == t && p.rsp == r.rsp) {
            if self.code.has_kind(addr) {
                return Ok(None);
            }
            // Someone else's return address: step over it.
            self.p.threads[t].place = StopPlace::Breakpoint(addr);
            return Ok(Some(self.step_and_resume(t)?));
        };
        let empty = self.take_return(t, addr, r)? == Some(true);
        if self.code.has_kind(addr) {
            return Ok(None);
        }
        if empty {
            self.code.remove_breakpoint(&self.p.mem, addr)?;
            let mut regs = *r;
            regs.rip = addr;
            regs::set(self.p.threads[t].tid, regs)?;
            self.p.threads[t].regs = regs;
            events::resume(self.p.threads[t].tid, None)?;
            Ok(Some(None))
        } else {
            self.p.threads[t].place = StopPlace::Breakpoint(addr);
            Ok(Some(self.step_and_resume(t)?))
        }
    }

    /// When `t` (registers `r`) is at a return breakpoint at `addr` meant for it, performs
    /// the return's action and forgets it; the breakpoint stays. None when there was none;
    /// else whether no other return waits at `addr`.
    pub(super) fn take_return(&mut self, t: ThreadId, addr: u64, r: &Regs) -> Result<Option<bool>> {
        let Some(list) = self.returns.get_mut(&addr) else {
            return Ok(None);
        };
        let Some(i) = list.iter().position(|p| p.thread == t && p.rsp == r.rsp) else {
            return Ok(None);
        };
        let pending = list.remove(i);
        let empty = list.is_empty();
        if empty {
            self.returns.remove(&addr);
        }
        self.returned(t, pending.action, r)?;
        Ok(Some(empty))
    }

    fn returned(&mut self, t: ThreadId, action: ReturnAction, r: &Regs) -> Result<()> {
        match action {
            ReturnAction::OnceDone { control } => {
                self.model
                    .once_done(crate::model::in_space(control, self.p.space()));
                if let Some(d) = self.races.detector() {
                    d.release(t, (ONCE, control));
                }
            }
            ReturnAction::FilledBuffer { buf, unit, site } => {
                let n = (r.rax as i64).max(0) as u64 * unit;
                if n > 0 {
                    let (races, mut env) = race_env!(self);
                    races.filled_buffer(&mut env, t, buf, n, site);
                }
            }
            ReturnAction::Allocated {
                kind,
                size,
                out,
                site,
            } => {
                let ptr = match kind {
                    Alloc::PosixMemalign if r.rax == 0 => self.p.mem.read_u64(out).unwrap_or(0),
                    Alloc::PosixMemalign => 0,
                    _ => r.rax,
                };
                if ptr != 0 {
                    self.races.allocated(HeapBlock {
                        start: ptr,
                        size,
                        thread: t,
                        site,
                    });
                }
            }
        }
        Ok(())
    }

    /// Steps `t` over the breakpoint it is stopped at and lets it run on. A fault of the
    /// stepped instruction (a NULL dereference in an instrumented access) is a finding, or,
    /// when the program handles that signal, delivered to it.
    pub(super) fn step_and_resume(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        if let StopPlace::Breakpoint(addr) = self.p.threads[t].place {
            if let Some(target) = self.code.jump_target(&self.p.mem, addr) {
                // A PLT stub or a tail-call shim: jump for it, no single-step needed.
                let mut r = self.p.threads[t].regs;
                r.rip = target;
                regs::set(self.p.threads[t].tid, r)?;
                self.p.threads[t].regs = r;
                self.p.threads[t].place = StopPlace::Event;
                let sig = self.p.threads[t].pending_signal.take();
                events::resume(self.p.threads[t].tid, sig)?;
                return Ok(None);
            }
        }
        if let Some(crate::tracee::Event::Signal(sig)) = self.code.step_over(&mut self.p, t)? {
            if let Some(f) = self.signal_finding(t, sig) {
                return Ok(Some(RunResult::Found(Box::new(f))));
            }
            self.p.threads[t].pending_signal = Some(sig);
        }
        if self.debugging() && self.debug().debug_watch(t)? == crate::run::debug_port::Resume::Kill
        {
            return Ok(Some(RunResult::CutShort));
        }
        let sig = self.p.threads[t].pending_signal.take();
        events::resume(self.p.threads[t].tid, sig)?;
        Ok(None)
    }

    /// Moves `t`, stopped at a breakpoint whose instruction is to run natively, past it: to
    /// the out-of-line copy of the instruction when there is one (the copy runs once `t`
    /// is resumed, and jumps back), else by single-stepping it in place. Returns an event
    /// that interrupted the step (a fault). A thread with a signal to deliver, or under a
    /// debugger (which sees every instruction where the program has it), is stepped.
    pub(super) fn pass_over(&mut self, t: ThreadId) -> Result<Option<crate::tracee::Event>> {
        if let StopPlace::Breakpoint(addr) = self.p.threads[t].place {
            let copy = self.code.copy_of(addr);
            if let Some(copy) = copy.filter(|_| self.p.threads[t].pending_signal.is_none()) {
                if !self.debugging() {
                    let mut r = self.p.threads[t].regs;
                    r.rip = copy;
                    regs::set(self.p.threads[t].tid, r)?;
                    self.p.threads[t].regs = r;
                    self.p.threads[t].place = StopPlace::Event;
                    return Ok(None);
                }
            }
        }
        Ok(self.code.step_over(&mut self.p, t)?)
    }

    /// Resumes `t`, stopped at a breakpoint, at `rip` (the out-of-line copy of its
    /// instruction) instead of stepping over the breakpoint.
    fn resume_at(&mut self, t: ThreadId, rip: u64) -> Result<Option<RunResult>> {
        let mut r = self.p.threads[t].regs;
        r.rip = rip;
        self.resume_with(t, r)
    }

    /// Returns `t`, stopped at the entry of a function it called, to its caller without
    /// running the function (a free that the quarantine holds, or refuses).
    fn return_from_call(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let mut r = self.p.threads[t].regs;
        r.rip = self.p.mem.read_u64(r.rsp)?;
        r.rsp += 8;
        r.rax = 0;
        self.resume_with(t, r)
    }

    /// Resumes `t` with registers `r` (and its pending signal, if any).
    fn resume_with(&mut self, t: ThreadId, r: Regs) -> Result<Option<RunResult>> {
        regs::set(self.p.threads[t].tid, r)?;
        self.p.threads[t].regs = r;
        self.p.threads[t].place = StopPlace::Event;
        let sig = self.p.threads[t].pending_signal.take();
        events::resume(self.p.threads[t].tid, sig)?;
        Ok(None)
    }

    /// At a hook on a call through the GOT (code without a PLT), makes the call: the
    /// return address pushed, `t` at the called function's entry, as at a PLT stub's
    /// hook. A hook on a PLT stub or a tail jump is left as it is.
    pub(super) fn enter_called_function(&mut self, t: ThreadId, addr: u64) -> Result<()> {
        let Some((target, ret)) = self.code.call_through_slot(&self.p.mem, addr) else {
            return Ok(());
        };
        let mut r = self.p.threads[t].regs;
        r.rsp -= 8;
        self.p.mem.write(r.rsp, &ret.to_le_bytes())?;
        r.rip = target;
        regs::set(self.p.threads[t].tid, r)?;
        self.p.threads[t].regs = r;
        self.p.threads[t].place = StopPlace::Event;
        Ok(())
    }

    /// An allocator entry: frees forget their block, allocations arm a return breakpoint.
    pub(super) fn on_allocator(&mut self, t: ThreadId, kind: Alloc) -> Result<Option<RunResult>> {
        let r = self.p.threads[t].regs;
        let a = regs::call_args(&r);
        let site = self.p.mem.read_u64(r.rsp).unwrap_or(0);
        let (size, out) = kind.request(&a);
        if kind == Alloc::Free && a[0] != 0 && self.cfg.instrument.heap_checks {
            let found_before = self.races.found();
            let (races, mut env) = race_env!(self);
            let action = races.free_at_stop(&mut env, t, [a[0], a[1], a[2]], site, r.rip);
            if action == FreeAction::Refuse && self.debugging() {
                // Under gdb: stop at the bad free, before it is skipped.
                if let Some(f) = self.races.finding(found_before).cloned() {
                    let ev = crate::run::debug_port::DebugEvent::Race {
                        thread: t,
                        finding: Box::new(f),
                    };
                    if self.debug().debug_event(ev) == crate::run::debug_port::Resume::Kill {
                        return Ok(Some(RunResult::CutShort));
                    }
                }
            }
            return match action {
                FreeAction::PassThrough => self.step_and_resume(t),
                FreeAction::Hold | FreeAction::Refuse => self.return_from_call(t),
                FreeAction::Release(args) => {
                    // The call frees an older block of the quarantine instead.
                    let mut r = r;
                    (r.rdi, r.rsi, r.rdx) = (args[0], args[1], args[2]);
                    regs::set(self.p.threads[t].tid, r)?;
                    self.p.threads[t].regs = r;
                    self.step_and_resume(t)
                }
            };
        }
        if kind.frees() && a[0] != 0 {
            self.races.freed(&self.p.mem, a[0]);
        }
        if kind != Alloc::Free {
            self.on_return_of_call(
                t,
                ReturnAction::Allocated {
                    kind,
                    size,
                    out,
                    site,
                },
            )?;
        }
        self.step_and_resume(t)
    }

    /// A modelled libc memory function called by the program, stopped at its entry: its
    /// ranges are accessed.
    pub(super) fn on_mem_fn(&mut self, t: ThreadId, f: MemFn) -> Result<Option<RunResult>> {
        let r = self.p.threads[t].regs;
        let a = regs::call_args(&r);
        let site = self.p.mem.read_u64(r.rsp).unwrap_or(0);
        if let MemFn::ReadInto | MemFn::StreamRead = f {
            let (buf, unit) = if f == MemFn::ReadInto {
                (a[1], 1)
            } else {
                (a[0], a[1])
            };
            self.on_return_of_call(t, ReturnAction::FilledBuffer { buf, unit, site })?;
        } else {
            let (races, mut env) = race_env!(self);
            races.record_mem_call(
                &mut env,
                t,
                f,
                [a[0], a[1], a[2]],
                None,
                site,
                Seen::InModelledCall,
            );
        }
        self.step_and_resume(t)
    }

    /// Whether the access of `size` bytes at `ea` by the instruction at `pc` is a racy
    /// scheduling point (`--preempt-on-races`, threads exist, the address was found racy
    /// and `pc` among the instructions found racing, or no instruction is known).
    pub(super) fn racy_access_is_point(&self, pc: u64, ea: u64, size: u64) -> bool {
        self.cfg.instrument.preempt_on_races
            && self.model.thread_count() > 1
            && self.worker.covers_racy_address(ea, size)
            && (self.worker.racy_sites.is_empty() || self.worker.racy_sites.contains(&pc))
    }

    /// Whether the access at the timeout poll `pc` (`races::timeout_polls`) is a scheduling
    /// point now: threads exist, and another can run or time out early there.
    pub(super) fn poll_is_point(&self, pc: u64) -> bool {
        self.worker.poll_sites.contains(&pc)
            && self.model.thread_count() > 1
            && timeouts::another_choice_possible(
                &self.model,
                self.history.early_timeouts(),
                self.cfg.limits.max_timeouts,
                self.cfg.limits.early_timeout_horizon_ns,
            )
    }

    /// Whether the access at `pc` is a busy wait's atomic load learnt earlier
    /// (`spin_to_learn`) and threads exist: a yield point, as a PAUSE is.
    pub(super) fn spin_is_point(&self, pc: u64) -> bool {
        self.worker.spin_sites.contains(&pc) && self.model.thread_count() > 1
    }

    /// A memory-access site left on the breakpoint path (`id` in the site table). Returns
    /// a scheduling point when it must be one; else records the access and runs on.
    pub(super) fn on_access(
        &mut self,
        t: ThreadId,
        addr: u64,
        id: u32,
    ) -> Result<Option<RunResult>> {
        let Some(site) = self.code.site(id) else {
            return self.step_and_resume(t);
        };
        if let Some(f) = site.mem_fn {
            // A memory function's hook, on a breakpoint again (its patch was taken out).
            self.enter_called_function(t, addr)?;
            return self.on_mem_fn(t, f);
        }
        if let Some(kind) = site.alloc {
            // An allocator's hook, likewise.
            self.enter_called_function(t, addr)?;
            return self.on_allocator(t, kind);
        }
        if self.spin_is_point(addr) {
            // The access is recorded when the thread is resumed past the point.
            self.p.threads[t].place = StopPlace::Breakpoint(addr);
            return self.point(t, Op::Yield, addr);
        }
        let ea = self.p.effective_address(t, &site.insn, 0);
        let statically_atomic =
            site.atomic_source || self.instr.atomic_ranges().iter().any(|r| r.contains(&ea));
        // An atomic access can be ordered against another thread's without a data race:
        // the stretch around a thread creation ends here, as a scheduling point (see
        // `on_clone`). Plain accesses need not: a conflict with one is a data race, which
        // the detector reports whatever the order. Only what the binary says is atomic
        // counts, so that every execution of a tree search has the same points.
        let creation_stretch_ends = statically_atomic && self.step.creation_stretch.contains(&t);
        // Racy addresses are points only once threads exist: the single-threaded start must
        // stay the same in every execution (it is what a fork snapshot skips). Only at the
        // sites found racing (all of them on breakpoints): a site left on a breakpoint by a
        // snapshot template must not become a point, or the executions of one tree would
        // differ by where they started (a schedule of a file without sites: every site).
        let racy = self.racy_access_is_point(addr, ea, site.size.into());
        // A read of what a timed-out wait sets, while another thread could run or time
        // out: the timeout may come right before it.
        if creation_stretch_ends || racy || self.poll_is_point(addr) {
            self.p.threads[t].place = StopPlace::Breakpoint(addr);
            return self.point(
                t,
                Op::MemoryAccess {
                    addr: ea,
                    size: point_size(&site.insn, site.size.into()),
                    write: site.write,
                },
                addr,
            );
        }
        self.races.count_breakpoint_access();
        self.watchdog.logged().note_trapped(ea, site.write);
        let races_before = self.races.found();
        let (races, mut env) = race_env!(self);
        races.record_access(&mut env, t, &site, ea, Seen::AtAccess);
        if self.watchdog.logged().busy_wait() {
            if let Some(pc) = self.spin_to_learn(t) {
                // Spinning on an atomic load at a breakpoint: learnt as the watchdog would
                // (`running_thread_event`), which the traps' cost keeps from firing.
                self.spin_learnt = Some((t, pc));
                return Ok(Some(RunResult::ProcessEnded(ProcessEnd::Abandoned)));
            }
        }
        if self.debugging() {
            if let Some(f) = self.races.finding(races_before).cloned() {
                self.p.threads[t].place = StopPlace::Breakpoint(addr);
                let ev = crate::run::debug_port::DebugEvent::Race {
                    thread: t,
                    finding: Box::new(f),
                };
                if self.debug().debug_event(ev) == crate::run::debug_port::Resume::Kill {
                    return Ok(Some(RunResult::CutShort));
                }
            }
        }
        match self.code.table().out_of_line(addr) {
            Some(copy) => self.resume_at(t, copy),
            None => self.step_and_resume(t),
        }
    }
}

/// The access log: drained at every stop of the running thread, and the stop of a full
/// log.
impl Session<'_> {
    /// Before an event of the running thread `t` is handled: a thread stopped inside a
    /// trampoline (a signal, an interrupt) is put back where it would be without it, and
    /// what it logged is recorded.
    pub(super) fn settle_running_stop(&mut self, t: ThreadId, ev: &events::Event) -> Result<()> {
        let unlogged = if matches!(ev, events::Event::Signal(_) | events::Event::Stop(_)) {
            self.instr.leave_trampoline(&mut self.p, &self.code, t)?
        } else {
            None
        };
        self.drain_log(t);
        self.record_unlogged(t, unlogged);
        Ok(())
    }

    /// Records the allocator call a thread moved out of its wrapper had not logged yet
    /// (after what it logged before: the log is drained first).
    pub(super) fn record_unlogged(&mut self, t: ThreadId, call: Option<UnloggedCall>) {
        let Some(c) = call else { return };
        if let Some(kind) = self.code.site(c.site).and_then(|s| s.alloc) {
            (self.races).allocator_call(&self.p.mem, t, kind, c.result, c.args, c.caller);
        }
    }

    /// Feeds what the running thread `t` logged to the race detector: accesses, and the
    /// calls of memory functions (a call's records hold its arguments and its caller).
    pub(super) fn drain_log(&mut self, t: ThreadId) {
        let Some(log) = self.code.log_handle() else {
            return;
        };
        if log.is_empty() {
            return;
        }
        let records = log.held();
        let sites = self.code.sites().clone();
        let logged = self.code.logged_sites().clone();
        let (races, mut env) = race_env!(self);
        env.repeats.forget();
        let mut i = 0;
        while let Some(rec) = records.get(i) {
            i += 1;
            let Some(hot) = logged.get(rec.site() as usize) else {
                continue;
            };
            if hot.plain {
                // The common case, from the compact table only.
                if env.repeats.repeated(rec.addr, rec.site()) {
                    // The same plain access again in this stretch: nothing for the detector.
                    races.count_traced();
                } else {
                    races.record_logged_plain(&mut env, t, hot, rec.addr);
                }
                self.watchdog.logged().note(rec.addr, hot.write);
                continue;
            }
            let Some(site) = sites.get(rec.site() as usize) else {
                continue;
            };
            if let Some(kind) = site.alloc {
                let (Some(&Record { addr: a1, word: a2 }), Some(&caller)) =
                    (records.get(i), records.get(i + 1))
                else {
                    break;
                };
                i += 2;
                // A free logs at its entry: (ptr, site) (rsi, rdx) (caller, rcx). A
                // wrapper logs at the return: (result, site) (arg0, arg1) (caller, arg2).
                let (result, args) = if kind == Alloc::Free {
                    (0, [rec.addr, a1, a2])
                } else {
                    (rec.addr, [a1, a2, caller.word])
                };
                races.allocator_call(&self.p.mem, t, kind, result, args, caller.addr);
                // A block freed or handed out anew: an access to it is new again.
                env.repeats.forget();
                continue;
            }
            if let Some(f) = site.mem_fn {
                let (Some(&Record { addr: a1, word: a2 }), Some(caller)) =
                    (records.get(i), records.get(i + 1))
                else {
                    break;
                };
                i += 2;
                // A string function's third record holds the length measured at its entry.
                let measured = f.measure().map(|_| caller.word);
                races.record_mem_call(
                    &mut env,
                    t,
                    f,
                    [rec.addr, a1, a2],
                    measured,
                    caller.addr,
                    Seen::LoggedCall,
                );
                continue;
            }
            self.watchdog.logged().note(rec.addr, site.write);
            races.record_access(&mut env, t, site, rec.addr, Seen::Logged);
        }
        log.reset();
        self.sync_log_mode(t);
    }

    /// The `int3` at `addr` ends a full log's trampoline: the log was drained with the
    /// stop, so `t` resumes where the record is written, with an empty log. A thread in a
    /// creation stretch stops here at every access (`sync_log_mode`): the access is
    /// recorded by the tracer, or, when the binary says it is atomic, becomes a scheduling
    /// point before it happens. None when `addr` is not such a place.
    pub(super) fn on_log_full(
        &mut self,
        t: ThreadId,
        addr: u64,
    ) -> Result<Option<Option<RunResult>>> {
        let Some(meta) = self.code.table().trampoline_at(addr).copied() else {
            return Ok(None);
        };
        let Some(log) = self.code.log_handle() else {
            return Ok(None);
        };
        if addr != meta.full_address() {
            return Ok(None);
        }
        let tid = self.p.threads[t].tid;
        let mut r = self.p.threads[t].regs;
        if let Kind::Entry { pushes, .. } = meta.kind {
            // No room for a call's records (or the log is armed): what was logged goes
            // first, then the tracer records the call from the registers, and the thread
            // goes on past the records (the code restores rax itself).
            self.drain_log(t);
            let id = self.code.table().get(meta.site).map(|s| s.id);
            let site = id.and_then(|id| self.code.site(id));
            let caller = if pushes {
                meta.site + meta.site_len as u64
            } else {
                self.p.mem.read_u64(r.rsp).unwrap_or(0)
            };
            let args = [r.rdi, r.rsi, r.rdx];
            if let Some(f) = site.and_then(|s| s.mem_fn) {
                // At the call, inside generated code: a second run takes its stack here, as
                // if the thread were at a breakpoint on the hook (the trampoline has moved
                // neither rsp nor rbp, nor pushed a return address).
                let place = std::mem::replace(
                    &mut self.p.threads[t].place,
                    crate::run::process::StopPlace::Breakpoint(meta.site),
                );
                let (races, mut env) = race_env!(self);
                races.record_mem_call(&mut env, t, f, args, None, caller, Seen::LoggedCall);
                self.p.threads[t].place = place;
            }
            if let Some(kind) = site.and_then(|s| s.alloc) {
                (self.races).allocator_call(&self.p.mem, t, kind, 0, args, caller);
            }
            r.rip = meta.at + meta.committed as u64;
            regs::set(tid, r)?;
            self.p.threads[t].regs = r;
            events::resume(tid, None)?;
            return Ok(Some(None));
        }
        if let Kind::Wrapper { .. } = meta.kind {
            // The allocator returned and the log has no room for its call (or is armed):
            // the tracer records it from the result and the stacked arguments, and the
            // thread goes on past the records.
            self.drain_log(t);
            let word = |k: u64| self.p.mem.read_u64(r.rsp + 8 * k).unwrap_or(0);
            let (a2, a1, a0, caller) = (word(0), word(1), word(2), word(3));
            let id = self.code.table().get(meta.site).map(|s| s.id);
            if let Some(kind) = id.and_then(|id| self.code.site(id)?.alloc) {
                (self.races).allocator_call(&self.p.mem, t, kind, r.rax, [a0, a1, a2], caller);
            }
            r.rip = meta.at + meta.committed as u64;
            regs::set(tid, r)?;
            self.p.threads[t].regs = r;
            events::resume(tid, None)?;
            return Ok(Some(None));
        }
        if log.is_armed() {
            let id = self.code.table().get(meta.site).map(|s| s.id);
            let site = id.and_then(|id| self.code.site(id));
            if let Some(site) = site {
                let ea = r.rax;
                let atomic = site.atomic_source
                    || self.instr.atomic_ranges().iter().any(|x| x.contains(&ea));
                if atomic && self.step.creation_stretch.contains(&t) {
                    // Back to the site, which runs again (logging) once the thread is chosen.
                    let (rax, rcx) = log.scratch();
                    (r.rax, r.rcx, r.rip) = (rax, rcx, meta.site);
                    regs::set(tid, r)?;
                    self.p.threads[t].regs = r;
                    self.p.threads[t].place = crate::run::process::StopPlace::Event;
                    let op = crate::model::Op::MemoryAccess {
                        addr: ea,
                        size: point_size(&site.insn, site.size.into()),
                        write: site.write,
                    };
                    let point = self.point(t, op, meta.site)?;
                    self.sync_log_mode(t);
                    return Ok(Some(point));
                }
                let (races, mut env) = race_env!(self);
                races.record_access(&mut env, t, &site, ea, Seen::Logged);
                // What it recorded may have moved `t` out of an epoch whose call's stack a
                // second run wants.
                self.sync_log_mode(t);
            }
            // Past the record (the log stays armed, unless `t` no longer needs it).
            r.rip = meta.at + meta.committed as u64;
        } else {
            self.drain_log(t);
            r.rcx = log.layout().empty_cursor() as u64;
            r.rip = meta.resume_address();
        }
        regs::set(tid, r)?;
        self.p.threads[t].regs = r;
        events::resume(tid, None)?;
        Ok(Some(None))
    }

    /// Sets the empty log up for the running thread `t` (`CodeEdits::sync_log_mode`): a
    /// thread stops at every logged access only in a creation stretch of a program with
    /// atomic globals (sites whose source or fixed address says atomic keep breakpoints),
    /// or, in a second run of a schedule, while in an epoch in which it makes a logged call
    /// whose stack was asked for (`RaceRecording::wants_stops`).
    pub(super) fn sync_log_mode(&self, t: ThreadId) {
        let stretch =
            self.step.creation_stretch.contains(&t) && !self.instr.atomic_ranges().is_empty();
        self.code.sync_log_mode(stretch || self.wants_call_stops(t));
    }

    /// Whether `t` is in an epoch holding a logged call whose stack this run must take
    /// (`RaceRecording::wants_stops`). A requested pc that is an instrumented site (patched,
    /// or on a breakpoint) stops at its breakpoint instead.
    pub(super) fn wants_call_stops(&self, t: ThreadId) -> bool {
        let code = &self.code;
        (self.races).wants_stops(t, |pc| {
            code.has_breakpoint(pc) || code.table().get(pc).is_some()
        })
    }

    /// Instruments the files mapped now (at the entry point, and after each change of the
    /// link map), through thread `t`.
    pub(super) fn install_hooks(&mut self, t: ThreadId) -> Result<()> {
        let main_snapshot = self.snaps.startup_at_main();
        self.instrumenting(|i, c| i.install(c, t, main_snapshot))
    }

    /// Runs `f` on the instrumentation part with what it reads of the execution.
    pub(super) fn instrumenting<R>(
        &mut self,
        f: impl FnOnce(&mut Instrumentation, &mut crate::run::instrument::Ctx<'_>) -> R,
    ) -> R {
        let stop_sites = self.stop_sites();
        let program = self.p.exe().to_path_buf();
        let mut ctx = crate::run::instrument::Ctx {
            p: &mut self.p,
            code: &mut self.code,
            cfg: &self.cfg.instrument,
            program: &program,
            plans: &mut self.worker.plans,
            memos: &mut self.worker.recording_memos,
            symbols: &mut self.worker.symbols,
            stop_sites: &stop_sites,
        };
        f(&mut self.instr, &mut ctx)
    }
}

/// The bytes a scheduling point's access covers, for its footprint: the operand's size, or
/// 0 (unknown: dependent with everything) for a repeated string instruction, whose operand
/// size is one element of a run of any length.
fn point_size(insn: &iced_x86::Instruction, operand: usize) -> u8 {
    if insn.has_rep_prefix() || insn.has_repe_prefix() || insn.has_repne_prefix() {
        return 0;
    }
    u8::try_from(operand).unwrap_or(0)
}
