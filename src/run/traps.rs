//! Breakpoint stops: what an `int3` of mcheck's means (a hooked function's entry, an atomic
//! or memory-access instruction, an allocator, the entry point, a return address...) and
//! the scheduling point or native continuation it turns into.

use anyhow::Result;
use nix::sys::signal::Signal;

use super::execution::{Execution, RunResult};
use super::process::{BreakpointKind, StopPlace};
use crate::model::{Op, ThreadId};
use crate::tracee::{events, regs};

impl Execution<'_> {
    pub(super) fn on_trap(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let r = self.p.load_regs(t)?;
        let addr = r.rip.wrapping_sub(1);
        if self.debugging() {
            if let Some(watched) = self.watch_hit(t)? {
                // A hardware watchpoint of the debugger fired after the instruction (in a
                // trampoline: shown past its site, where the program goes on from).
                self.leave_trampoline(t)?;
                self.p.load_regs(t)?;
                self.p.threads[t].place = StopPlace::Event;
                let ev = super::debugger::DebugEvent::Watch {
                    thread: t,
                    addr: watched,
                };
                if let Some(done) = self.debug_stop_stepping(t, ev)? {
                    return Ok(Some(done));
                }
                let sig = self.p.threads[t].pending_signal.take();
                events::resume(self.p.threads[t].tid, sig)?;
                return Ok(None);
            }
            if let Some(done) = self.debugger_trap(t, addr)? {
                return Ok(done);
            }
        }
        if self.returns.contains_key(&addr) {
            if let Some(ran) = self.handle_return(t, addr, &r)? {
                return Ok(ran);
            }
        }
        let Some(kind) = self.p.bp_kinds.get(&addr).cloned() else {
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
                self.p.remove_breakpoint(addr)?;
                self.p.bp_kinds.remove(&addr);
                let mut r = r;
                r.rip = addr;
                regs::set(self.p.threads[t].tid, r)?;
                self.p.threads[t].regs = r;
                self.p.threads[t].place = StopPlace::Event;
                self.p.threads[t].handle = r.fs_base;
                self.install_hooks(t)?;
                if self.debug_event(super::debugger::DebugEvent::Started)
                    == super::debugger::Resume::Kill
                {
                    return Ok(Some(RunResult::CutShort));
                }
                (Op::Continue, 0)
            }
            BreakpointKind::Main => {
                self.p.remove_breakpoint(addr)?;
                self.p.bp_kinds.remove(&addr);
                let mut r = r;
                r.rip = addr;
                let tid = self.p.threads[t].tid;
                regs::set(tid, r)?;
                self.p.threads[t].regs = r;
                self.p.threads[t].place = StopPlace::Event;
                if let Some(key) = self.snapshot_key.take() {
                    self.take_main_snapshot(t, &r, key)?;
                }
                events::resume(tid, None)?;
                return Ok(None);
            }
            BreakpointKind::Hook(h) => {
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(0);
                let op = h.op(regs::call_args(&r), self);
                if self.is_glibc_internal(site) {
                    // glibc's own locking (ld.so's TLS lock at thread creation...) is part of
                    // an atomic libc call: apply it at once unless it has to wait.
                    return self.internal_call(t, op, site);
                }
                (op, site)
            }
            BreakpointKind::Atomic { plan, index, bias } => {
                let ea = self.p.effective_address(t, &plan.atomics[index], bias);
                (Op::Atomic { addr: ea }, addr)
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
