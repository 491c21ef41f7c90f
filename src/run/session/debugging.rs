//! The debugger's door into an execution: what the executor does at the moments it
//! reports to the debugger ([`crate::run::super::debug_port`]), the stepping of the running
//! thread under the debugger, and the view of the stopped program the debugger is given.
//!
//! The view hides mcheck's own instrumentation: memory reads show the program's bytes under
//! mcheck's `int3`s, and a thread stopped on one of them is shown at the instruction, not
//! one byte past it.

use std::collections::HashSet;

use super::Session;
use crate::binary::ElfFile;
use crate::model::ThreadId;
use crate::run::debug_port::{Boundary, DebugEvent, ProgramView, Resume, ThreadInfo};
use crate::run::process::StopPlace;
use crate::tracee::debugregs::{self, Watch};
use crate::tracee::regs::Regs;
use crate::tracee::Event;

/// The debugger's door into an execution: what the executor does at the moments it
/// reports, and the stepping of the running thread under the debugger.
pub(super) struct Debugging<'e, 'a>(pub &'e mut Session<'a>);

impl Debugging<'_, '_> {
    /// Reports `ev` to the debugger, if there is one. A request to step a thread other
    /// than `stepper` (the one stopped where it may execute an instruction) is refused and
    /// reported as a step that did not move: with the boundaries the thread reaches once
    /// the executor performed its instruction when it is `runner` (the thread that runs
    /// on from here), else with a message saying why.
    pub(super) fn debug_event_stepping(
        &mut self,
        mut ev: DebugEvent,
        stepper: Option<ThreadId>,
        runner: Option<ThreadId>,
    ) -> Resume {
        let Some(mut hook) = self.0.worker.debugger.hook.take() else {
            return Resume::Continue;
        };
        let resume = loop {
            let mut view = View {
                exec: &mut *self.0,
                bps: &mut hook.breakpoints,
                watches: &mut hook.watches,
                generation: &mut hook.generation,
            };
            match hook.debugger.on_event(&mut view, &ev) {
                Resume::Step(u) if Some(u) != stepper => {
                    let over = match ev {
                        // Asked again after a refusal: nothing new to offer.
                        DebugEvent::Stepped { moved: false, .. } => Vec::new(),
                        _ if runner == Some(u) => self.boundaries_after(u),
                        _ => Vec::new(),
                    };
                    if over.is_empty() {
                        hook.debugger.say(self.why_not_stepping(u, &ev));
                    }
                    ev = DebugEvent::Stepped {
                        thread: u,
                        moved: false,
                        over,
                    };
                }
                r => break r,
            }
        };
        self.0.worker.debugger.hook = Some(hook);
        // Watchpoints set or cleared now apply to every thread before it runs again.
        for u in 0..self.0.p.threads.len() {
            let th = &self.0.p.threads[u];
            if th.started && !th.gone {
                let _ = self.debug_arm(u);
            }
        }
        resume
    }

    /// Reports `ev` to the debugger, where no thread may step (at a scheduling decision,
    /// the chosen thread may be run over its operation).
    pub(super) fn debug_event(&mut self, ev: DebugEvent) -> Resume {
        let runner = match ev {
            DebugEvent::Point { thread, .. } => Some(thread),
            _ => None,
        };
        self.debug_event_stepping(ev, None, runner)
    }

    /// Why thread `u` cannot execute an instruction at `ev`.
    fn why_not_stepping(&self, u: ThreadId, ev: &DebugEvent) -> String {
        let next = match ev {
            DebugEvent::Point { thread, .. } => Some(*thread),
            _ => None,
        };
        match next {
            Some(t) if t != u => format!(
                "mcheck: T{u} cannot move now: the schedule runs T{t} next ({}); `continue` follows the schedule, `monitor next-point` runs T{t} to its next scheduling point",
                self.0.model.pending(t).map_or("its operation", |op| op.name())
            ),
            _ => format!(
                "mcheck: T{u} cannot step here: it waits at one of mcheck's scheduling points, which only `continue` or `monitor next-point` passes (the schedule decides when it runs)"
            ),
        }
    }

    /// Shows the debugger the end of the execution, before its processes are killed.
    pub(super) fn debug_end(&mut self, out: &super::ExecutionOutcome) {
        if !self.0.debugging() || out.early_end.cut_short || out.divergence.is_some() {
            return;
        }
        let ev = DebugEvent::End {
            finding: out.finding.clone().map(Box::new),
            exit: out.exit.clone(),
        };
        self.debug_event(ev);
    }

    /// Thread `t` is at its exit_group: when the status is a finding, the debugger is shown
    /// it there (once the process is gone, nothing of it can be read).
    pub(super) fn debug_exiting(&mut self, t: ThreadId) -> anyhow::Result<Resume> {
        if !self.0.debugging() {
            return Ok(Resume::Continue);
        }
        let code = (self.0.p.load_regs(t)?.rdi & 0xff) as i32;
        let Some(finding) = self.0.exit_finding(super::ProcessEnd::Exited(code)) else {
            return Ok(Resume::Continue);
        };
        self.0.p.threads[t].place = StopPlace::Syscall;
        Ok(self.debug_event(DebugEvent::Exiting {
            thread: t,
            finding: Box::new(finding),
        }))
    }

    /// A trap at `addr` in `t`: when the debugger has a breakpoint there, it looks first.
    /// Returns Some when the trap is dealt with (`Some(None)`: the thread runs on), None
    /// when it is mcheck's own breakpoint to handle as usual.
    pub(super) fn debugger_trap(
        &mut self,
        t: ThreadId,
        addr: u64,
    ) -> anyhow::Result<Option<Option<super::RunResult>>> {
        let mcheck_bp = self.0.code.has_kind(addr);
        let Some(hook) = self.0.worker.debugger.hook.as_mut() else {
            return Ok(None);
        };
        let gdb_bp = hook.breakpoints.contains(&addr);
        // Polled at every breakpoint of mcheck's, whatever gdb set: the same count in
        // every execution.
        let interrupt = mcheck_bp && hook.debugger.poll_interrupt(t);
        if !gdb_bp && !interrupt {
            return Ok(None);
        }
        self.0.p.threads[t].place = StopPlace::Breakpoint(addr);
        if gdb_bp {
            // A return mcheck waits for here is noted now: the debugger may step on from
            // here, or take its breakpoint out.
            let r = self.0.p.threads[t].regs;
            self.0.take_return(t, addr, &r)?;
        }
        let mut ev = if gdb_bp {
            DebugEvent::Breakpoint { thread: t, addr }
        } else {
            DebugEvent::Interrupted { thread: t }
        };
        loop {
            let stepper = self.steppable(t).then_some(t);
            match self.debug_event_stepping(ev, stepper, Some(t)) {
                Resume::Kill => return Ok(Some(Some(super::RunResult::CutShort))),
                Resume::Continue => break,
                Resume::Step(_) => {
                    if let Some(done) = self.debug_step(t)? {
                        return Ok(Some(Some(done)));
                    }
                    ev = match self.watch_hit(t)? {
                        Some(watched) => DebugEvent::Watch {
                            thread: t,
                            addr: watched,
                        },
                        None => DebugEvent::Stepped {
                            thread: t,
                            moved: true,
                            over: Vec::new(),
                        },
                    };
                }
            }
        }
        if self.0.p.threads[t].place != StopPlace::Breakpoint(addr) {
            // Stepped away: run on from where the thread is.
            let tid = self.0.p.threads[t].tid;
            let sig = self.0.p.threads[t].pending_signal.take();
            crate::tracee::events::resume(tid, sig)?;
            return Ok(Some(None));
        }
        if self.0.code.has_kind(addr) {
            return Ok(None);
        }
        if self.0.code.has_breakpoint(addr) {
            return Ok(Some(self.0.step_and_resume(t)?));
        }
        // The debugger took its breakpoint out while stopped on it: run the instruction.
        let tid = self.0.p.threads[t].tid;
        let mut r = self.0.p.threads[t].regs;
        r.rip = addr;
        crate::tracee::regs::set(tid, r)?;
        self.0.p.threads[t].regs = r;
        self.0.p.threads[t].place = StopPlace::Event;
        let sig = self.0.p.threads[t].pending_signal.take();
        crate::tracee::events::resume(tid, sig)?;
        Ok(Some(None))
    }
}

impl Debugging<'_, '_> {
    /// Before thread `t` runs natively after a scheduling decision (or at its start): the
    /// debugger is polled as at mcheck's breakpoints, and may stop the thread there and
    /// step it (gdb's Ctrl-C, a step back's anchor). Some when that ended the execution.
    pub(super) fn debug_before_running(
        &mut self,
        t: ThreadId,
    ) -> anyhow::Result<Option<super::RunResult>> {
        // A thread at a system call's stop resumes into the call: nothing to step there.
        if self.0.p.threads[t].place == StopPlace::Syscall {
            return Ok(None);
        }
        let Some(hook) = self.0.worker.debugger.hook.as_mut() else {
            return Ok(None);
        };
        if !hook.debugger.poll_interrupt(t) {
            return Ok(None);
        }
        self.debug_stop_stepping(t, DebugEvent::Interrupted { thread: t })
    }

    /// Shows the debugger `ev` of `t`, the running thread, stopped where it can be
    /// stepped, and steps it for as long as the debugger asks. Some when that ended the
    /// execution; None when the thread is to run on from where it is.
    pub(super) fn debug_stop_stepping(
        &mut self,
        t: ThreadId,
        mut ev: DebugEvent,
    ) -> anyhow::Result<Option<super::RunResult>> {
        loop {
            let stepper = self.steppable(t).then_some(t);
            match self.debug_event_stepping(ev, stepper, Some(t)) {
                Resume::Kill => return Ok(Some(super::RunResult::CutShort)),
                Resume::Continue => return Ok(None),
                Resume::Step(_) => {
                    if let Some(done) = self.debug_step(t)? {
                        return Ok(Some(done));
                    }
                    ev = match self.watch_hit(t)? {
                        Some(watched) => DebugEvent::Watch {
                            thread: t,
                            addr: watched,
                        },
                        None => DebugEvent::Stepped {
                            thread: t,
                            moved: true,
                            over: Vec::new(),
                        },
                    };
                }
            }
        }
    }

    /// The instruction thread `t` (the running one, stopped for the debugger) is at. Read
    /// from the thread, not from the registers cached for it: a thread stopped for the
    /// first time (a new thread before it ever ran) has none cached yet.
    fn debug_pc(&self, t: ThreadId) -> u64 {
        let th = &self.0.p.threads[t];
        match th.place {
            StopPlace::Breakpoint(addr) => addr,
            _ => crate::tracee::regs::get(th.tid).map_or(th.regs.rip, |r| r.rip),
        }
    }

    /// Whether `t` may execute its next instruction natively under the debugger: not when
    /// the instruction is one of mcheck's breakpoints other than an access site (a
    /// scheduling point, a hook: only the executor may pass it) or a system call (which
    /// the executor traps).
    fn steppable(&mut self, t: ThreadId) -> bool {
        let pc = self.debug_pc(t);
        match self.0.code.kind(pc).cloned() {
            Some(crate::run::instrument::code::BreakpointKind::Access(id))
                if self.access_is_point(t, pc, id) =>
            {
                return false
            }
            Some(crate::run::instrument::code::BreakpointKind::Access(_)) => {}
            Some(_) => return false,
            None => {}
        }
        !self.is_syscall_insn(pc)
    }

    /// Where `t`, stopped at an instruction only the executor may execute, is back at an
    /// instruction of its own once the executor has performed that one as the replay does:
    /// after a system call, the instruction that follows it; after a hooked function the
    /// executor emulates, its return address (or, when the model lets the function run
    /// natively, the instruction after its first); after any other breakpoint of mcheck's
    /// (an atomic instruction, an allocator's entry...), the instruction the original one
    /// leads to. Empty when that cannot be told (a branch under a breakpoint).
    fn boundaries_after(&mut self, t: ThreadId) -> Vec<Boundary> {
        let Ok(r) = crate::tracee::regs::get(self.0.p.threads[t].tid) else {
            return Vec::new();
        };
        if self.0.p.threads[t].place == StopPlace::Syscall {
            // At the call's seccomp stop: it returns past the instruction.
            return vec![Boundary {
                addr: r.rip,
                sp: r.rsp,
            }];
        }
        let pc = self.debug_pc(t);
        match self.0.code.kind(pc) {
            Some(crate::run::instrument::code::BreakpointKind::Hook(_)) => {
                let mut to: Vec<Boundary> = (self.0.p.mem.read_u64(r.rsp).ok())
                    .map(|ret| Boundary {
                        addr: ret,
                        sp: r.rsp + 8,
                    })
                    .into_iter()
                    .collect();
                to.extend(self.after_native(pc, r.rsp));
                to
            }
            Some(
                crate::run::instrument::code::BreakpointKind::Entry
                | crate::run::instrument::code::BreakpointKind::Main,
            ) => Vec::new(),
            Some(_) => self.after_native(pc, r.rsp).into_iter().collect(),
            None if self.is_syscall_insn(pc) => vec![Boundary {
                addr: pc + 2,
                sp: r.rsp,
            }],
            None => Vec::new(),
        }
    }

    /// Where the program's own instruction under mcheck's breakpoint at `pc` leads when it
    /// is executed with stack pointer `sp`: a call through a slot to the called function, a
    /// jump to its target, any instruction that does not branch to the next one.
    fn after_native(&self, pc: u64, sp: u64) -> Option<Boundary> {
        if let Some((target, _)) = self.0.code.call_through_slot(&self.0.p.mem, pc) {
            return Some(Boundary {
                addr: target,
                sp: sp - 8,
            });
        }
        if let Some(target) = self.0.code.jump_target(&self.0.p.mem, pc) {
            return Some(Boundary { addr: target, sp });
        }
        let mut code = [0u8; 16];
        self.0.p.mem.read(pc, &mut code).ok()?;
        for (i, b) in code.iter_mut().enumerate() {
            if let Some(orig) = self.0.code.original_byte(pc + i as u64) {
                *b = orig;
            }
        }
        let insn = crate::run::process::decode_at(&code, pc);
        (insn.flow_control() == iced_x86::FlowControl::Next).then_some(Boundary {
            addr: insn.next_ip(),
            sp,
        })
    }

    /// Whether the program's own bytes at `pc` are a `syscall` instruction.
    fn is_syscall_insn(&self, pc: u64) -> bool {
        let byte = |a: u64| {
            (self.0.code.original_byte(a)).unwrap_or_else(|| self.0.p.mem.read_u8(a).unwrap_or(0))
        };
        [byte(pc), byte(pc + 1)] == [0x0f, 0x05]
    }

    /// Whether the access of site `id` at `pc`, which `t` is about to make, is one of the
    /// schedule's scheduling points (an access to an address found racing, when the
    /// schedule preempts there, or a timeout poll while a wait may time out): only the
    /// executor may pass it.
    fn access_is_point(&mut self, t: ThreadId, pc: u64, id: u32) -> bool {
        if self.0.poll_is_point(pc) || self.0.spin_is_point(pc) {
            return true;
        }
        if !self.0.cfg.instrument.preempt_on_races {
            return false;
        }
        let Some(site) = self.0.code.site(id) else {
            return true;
        };
        let Ok(mut regs) = crate::tracee::regs::get(self.0.p.threads[t].tid) else {
            return true;
        };
        regs.rip = pc;
        let cached = std::mem::replace(&mut self.0.p.threads[t].regs, regs);
        let ea = self.0.p.effective_address(t, &site.insn, 0);
        self.0.p.threads[t].regs = cached;
        self.0.racy_access_is_point(pc, ea, site.size.into())
    }

    /// Executes one instruction of `t` (an access site's access is recorded first); Some
    /// when that ended the execution (a fault that is a finding).
    fn debug_step(&mut self, t: ThreadId) -> anyhow::Result<Option<super::RunResult>> {
        let pc = self.debug_pc(t);
        let tid = self.0.p.threads[t].tid;
        // An empty log: a trampoline stepped through below cannot find it full.
        self.0.drain_log(t);
        let r = crate::tracee::regs::get(tid)?;
        self.0.p.threads[t].regs = r;
        if self.0.returns.contains_key(&pc) {
            // A return mcheck waits for: noted as running on would, before stepping on.
            let mut at = r;
            at.rip = pc;
            let debugger_bp =
                (self.0.worker.debugger.hook.as_ref()).is_some_and(|h| h.breakpoints.contains(&pc));
            if self.0.take_return(t, pc, &at)? == Some(true)
                && !self.0.code.has_kind(pc)
                && !debugger_bp
            {
                self.0.code.remove_breakpoint(&self.0.p.mem, pc)?;
            }
        }
        if let Some(crate::run::instrument::code::BreakpointKind::Access(id)) =
            self.0.code.kind(pc).cloned()
        {
            if let Some(site) = self.0.code.site(id) {
                let mut regs = r;
                regs.rip = pc;
                self.0.p.threads[t].regs = regs;
                let ea = self.0.p.effective_address(t, &site.insn, 0);
                let (races, mut env) = super::race_env!(self.0);
                races.record_access(&mut env, t, &site, ea, crate::run::races::Seen::AtAccess);
            }
        }
        let event = if self.0.code.has_breakpoint(pc) {
            self.0.p.threads[t].place = StopPlace::Breakpoint(pc);
            self.0.code.step_over(&mut self.0.p, t)?
        } else {
            let mut regs = r;
            regs.rip = pc;
            crate::tracee::regs::set(tid, regs)?;
            crate::tracee::events::step(tid)?;
            self.0.p.threads[t].place = StopPlace::Event;
            step_done(tid)?
        };
        let event = match event {
            None => self.step_out_of_patches(t)?,
            ev => ev,
        };
        self.0.p.load_regs(t)?;
        if let Some(crate::tracee::Event::Signal(sig)) = event {
            if let Some(f) = self.0.signal_finding(t, sig) {
                return Ok(Some(super::RunResult::Found(Box::new(f))));
            }
            self.0.p.threads[t].pending_signal = Some(sig);
        }
        Ok(None)
    }
}

impl Debugging<'_, '_> {
    /// After a step into patched code (a site's jump towards its trampoline): steps on
    /// until the thread is back in the program's own code, so that a step is one of the
    /// program's instructions. The event that ended the steps, when not a step's trap.
    fn step_out_of_patches(&mut self, t: ThreadId) -> anyhow::Result<Option<Event>> {
        let tid = self.0.p.threads[t].tid;
        for _ in 0..MAX_PATCH_STEPS {
            let rip = crate::tracee::regs::get(tid)?.rip;
            let table = &self.0.code.table();
            if table.trampoline_at(rip).is_none() && table.hop_to(rip).is_none() {
                break;
            }
            crate::tracee::events::step(tid)?;
            if let Some(ev) = step_done(tid)? {
                return Ok(Some(ev));
            }
        }
        Ok(None)
    }

    /// Brings thread `t`'s debug registers up to the debugger's watchpoints before it runs.
    pub(super) fn debug_arm(&mut self, t: ThreadId) -> anyhow::Result<()> {
        let tid = self.0.p.threads[t].tid;
        let Some(hook) = self.0.worker.debugger.hook.as_mut() else {
            return Ok(());
        };
        let held = hook.armed.get(&tid.as_raw()).copied().unwrap_or(0);
        if held != hook.generation {
            debugregs::set(tid, &hook.watches)?;
            hook.armed.insert(tid.as_raw(), hook.generation);
        }
        Ok(())
    }

    /// The address of the debugger's watchpoint that fired in `t` since it was resumed.
    pub(super) fn watch_hit(&mut self, t: ThreadId) -> anyhow::Result<Option<u64>> {
        let Some(hook) = self
            .0
            .worker
            .debugger
            .hook
            .as_ref()
            .filter(|h| !h.watches.is_empty())
        else {
            return Ok(None);
        };
        let hits = debugregs::take_hits(self.0.p.threads[t].tid)?;
        Ok((0..hook.watches.len())
            .find(|&i| hits & (1 << i) != 0)
            .map(|i| hook.watches[i].addr))
    }

    /// Shows the debugger the watchpoint at `addr` that fired in `t` (already taken from
    /// DR6).
    pub(super) fn debug_watch_hit(&mut self, t: ThreadId, addr: u64) -> anyhow::Result<Resume> {
        self.0.p.load_regs(t)?;
        self.0.p.threads[t].place = StopPlace::Event;
        Ok(self.debug_event(DebugEvent::Watch { thread: t, addr }))
    }

    /// After `t` executed an instruction for mcheck (a step over a breakpoint): a
    /// watchpoint that fired on it is shown to the debugger.
    pub(super) fn debug_watch(&mut self, t: ThreadId) -> anyhow::Result<Resume> {
        match self.watch_hit(t)? {
            Some(addr) => self.debug_watch_hit(t, addr),
            None => Ok(Resume::Continue),
        }
    }
}

/// Most instructions a step runs through one site's patched code (a trampoline is at most
/// 192 bytes of straight-line code).
const MAX_PATCH_STEPS: usize = 256;

/// Waits for the end of a single step of `tid`: None for its trap, else the event.
fn step_done(tid: crate::tracee::Pid) -> anyhow::Result<Option<Event>> {
    loop {
        match crate::tracee::events::wait(Some(tid))? {
            crate::tracee::WaitOutcome::Interrupted => continue,
            crate::tracee::WaitOutcome::Event(_, Event::Trap) => return Ok(None),
            crate::tracee::WaitOutcome::Event(_, ev) => return Ok(Some(ev)),
            crate::tracee::WaitOutcome::NoChildren => return Ok(None),
        }
    }
}

struct View<'e, 'a> {
    exec: &'e mut Session<'a>,
    bps: &'e mut HashSet<u64>,
    watches: &'e mut Vec<Watch>,
    generation: &'e mut u64,
}

impl ProgramView for View<'_, '_> {
    fn threads(&self) -> Vec<ThreadInfo> {
        let p = &self.exec.p;
        (p.threads.iter().enumerate())
            .filter(|(_, th)| !th.gone && th.started)
            .map(|(id, th)| ThreadInfo {
                id,
                tid: th.tid.as_raw(),
                pending: self.exec.model.pending(id).map(|op| op.name()),
            })
            .collect()
    }

    fn registers(&mut self, t: ThreadId) -> Option<Regs> {
        let th = self.exec.p.threads.get(t).filter(|th| !th.gone)?;
        let mut r = crate::tracee::regs::get(th.tid).ok()?;
        if let StopPlace::Breakpoint(addr) = th.place {
            if r.rip == addr + 1 {
                r.rip = addr;
            }
        }
        Some(r)
    }

    fn write_registers(&mut self, t: ThreadId, mut regs: Regs) -> bool {
        let Some(th) = self.exec.p.threads.get_mut(t).filter(|th| !th.gone) else {
            return false;
        };
        if let StopPlace::Breakpoint(addr) = th.place {
            // The thread is shown at the instruction; it is really one byte past it.
            if regs.rip == addr {
                regs.rip = addr + 1;
            }
        }
        if crate::tracee::regs::set(th.tid, regs).is_err() {
            return false;
        }
        th.regs = regs;
        true
    }

    fn fp_registers(&self, t: ThreadId) -> Option<libc::user_fpregs_struct> {
        let th = self.exec.p.threads.get(t).filter(|th| !th.gone)?;
        crate::tracee::regs::get_fp(th.tid).ok()
    }

    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> usize {
        let mem = &self.exec.p.mem;
        let n = if mem.read(addr, buf).is_ok() {
            buf.len()
        } else {
            // Up to the end of the readable part.
            let mut n = 0;
            while n < buf.len() {
                match mem.read_u8(addr + n as u64) {
                    Ok(b) => buf[n] = b,
                    Err(_) => break,
                }
                n += 1;
            }
            n
        };
        for (i, b) in buf[..n].iter_mut().enumerate() {
            if let Some(orig) = self.exec.code.original_byte(addr + i as u64) {
                *b = orig;
            }
        }
        // Patched sites show the instructions they replaced.
        let end = addr + n as u64;
        for (at, original) in self.exec.code.table().originals_overlapping(addr..end) {
            for (j, &byte) in original.iter().enumerate() {
                let a = at + j as u64;
                if (addr..end).contains(&a) {
                    buf[(a - addr) as usize] = byte;
                }
            }
        }
        n
    }

    fn write_memory(&mut self, addr: u64, data: &[u8]) -> bool {
        let (code, mem) = (&mut self.exec.code, &self.exec.p.mem);
        for (i, &b) in data.iter().enumerate() {
            let a = addr + i as u64;
            let ok = if code.has_breakpoint(a) {
                code.replace_original(a, b)
            } else {
                mem.write(a, &[b]).is_ok()
            };
            if !ok {
                return false;
            }
        }
        true
    }

    fn set_breakpoint(&mut self, addr: u64) -> bool {
        if !self.bps.insert(addr) || self.exec.code.has_breakpoint(addr) {
            return true;
        }
        self.exec
            .code
            .insert_breakpoint(&self.exec.p.mem, addr)
            .is_ok()
    }

    fn clear_breakpoint(&mut self, addr: u64) -> bool {
        // mcheck's own, or a return it waits for, keep theirs.
        if !self.bps.remove(&addr)
            || self.exec.code.has_kind(addr)
            || self.exec.returns.contains_key(&addr)
        {
            return true;
        }
        self.exec
            .code
            .remove_breakpoint(&self.exec.p.mem, addr)
            .is_ok()
    }

    fn set_watch(&mut self, w: Watch) -> bool {
        if !w.is_valid() || self.watches.len() >= debugregs::SLOTS {
            return false;
        }
        if !self.watches.contains(&w) {
            self.watches.push(w);
            *self.generation += 1;
        }
        true
    }

    fn clear_watch(&mut self, w: Watch) -> bool {
        let before = self.watches.len();
        self.watches.retain(|x| *x != w);
        if self.watches.len() != before {
            *self.generation += 1;
        }
        true
    }

    fn program_function(&self, name: &str) -> Option<u64> {
        let program = &self.exec.cfg.program.path;
        let modules = self.exec.worker.symbols.modules();
        let m = modules.modules().iter().find(|m| {
            m.path == *program
                || std::fs::canonicalize(&m.path).ok() == std::fs::canonicalize(program).ok()
        })?;
        let elf = ElfFile::load(&m.path).ok()?;
        let a = elf.function_addresses(name).into_iter().next()?;
        Some(a + m.bias)
    }

    fn in_system_call(&self, t: ThreadId) -> bool {
        (self.exec.p.threads.get(t)).is_some_and(|th| !th.gone && th.place == StopPlace::Syscall)
    }

    fn steps(&self) -> u64 {
        self.exec.steps()
    }

    fn auxv(&self) -> Vec<u8> {
        std::fs::read(format!("/proc/{}/auxv", self.exec.p.pid)).unwrap_or_default()
    }

    fn snapshot(&mut self) -> Option<Vec<u64>> {
        if !self.exec.snapshotting().debug_snapshot().unwrap_or(false) {
            return None;
        }
        let key = self.exec.cfg.snapshot_key();
        let depths = self.exec.worker.snapshots.branch_depths(&key);
        Some(depths.into_iter().map(|d| d as u64).collect())
    }
}
