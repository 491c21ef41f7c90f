//! One traced process as the executor sees it: its threads (OS tid ↔ logical id), where each
//! is stopped, the breakpoints and what they mean, and the low-level moves on a stopped thread
//! (return from an emulated call, step over a breakpoint, finish an emulated syscall).

use std::collections::{HashMap, HashSet};
use std::io;

use iced_x86::{Decoder, DecoderOptions, Instruction, OpKind, Register};
use nix::unistd::Pid;

use std::sync::Arc;

use super::hooks::Hook;
use super::patching::Patching;
use super::plan::{Alloc, MemFn, ModulePlan};
use crate::model::ThreadId;
use crate::tracee::breakpoints::Breakpoints;
use crate::tracee::memory::Memory;
use crate::tracee::regs::{self, Regs};
use crate::tracee::{events, interrupt, Event, WaitOutcome};

/// What a breakpoint address means.
#[derive(Clone, Debug)]
pub enum BreakpointKind {
    /// The program's entry point: libraries are mapped, install the rest.
    Entry,
    /// The program's `main`, where a program that creates no thread is snapshotted.
    Main,
    /// Entry of an intercepted function.
    Hook(Hook),
    /// An atomic instruction: `plan.atomics[index]`, loaded with `bias`.
    Atomic {
        /// The file's plan.
        plan: Arc<ModulePlan>,
        /// Index in `plan.atomics`.
        index: usize,
        /// Load bias of the file.
        bias: u64,
    },
    /// A memory-access instruction of the code under test left on the breakpoint path:
    /// its id in the process's site table (`Patching::sites`).
    Access(u32),
    /// A PAUSE instruction of the code under test: a yield, then stepped over.
    Pause,
    /// An allocator entry.
    Alloc(Alloc),
    /// The PLT stub of a modelled libc memory function.
    MemFn(MemFn),
    /// Rust's panic entry (`rust_begin_unwind`): not a scheduling point, only noted.
    Panic,
    /// ld.so's `_dl_debug_state`: the set of loaded libraries changed.
    LinkMapChanged,
}

/// Where a thread is stopped, which decides how it is resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopPlace {
    /// At the int3 of a breakpoint at `addr` (rip = addr + 1).
    Breakpoint(u64),
    /// At a seccomp stop before a syscall.
    Syscall,
    /// At an event stop (clone, initial stop...): plain continue.
    Event,
}

/// Tracer-side state of one thread.
#[derive(Clone, Debug)]
pub struct TracedThread {
    /// OS thread id.
    pub tid: Pid,
    /// Where it is stopped.
    pub place: StopPlace,
    /// Its registers at that stop.
    pub regs: Regs,
    /// Its first stop after creation has been consumed.
    pub started: bool,
    /// clear_child_tid address (woken by the tracer when the thread exits).
    pub clear_tid: u64,
    /// Its pthread_t (the thread pointer, fs_base).
    pub handle: u64,
    /// A signal to deliver when it next resumes.
    pub pending_signal: Option<nix::sys::signal::Signal>,
    /// It is gone (reaped or exiting).
    pub gone: bool,
    /// Its alternate signal stack (`stack_t` bytes), as last set with sigaltstack.
    pub altstack: Option<[u8; 24]>,
}

impl TracedThread {
    /// A thread as first seen.
    pub fn new(tid: Pid, started: bool, clear_tid: u64, handle: u64) -> Self {
        TracedThread {
            tid,
            place: StopPlace::Event,
            // SAFETY-free zero: user_regs_struct is plain integers.
            regs: zero_regs(),
            started,
            clear_tid,
            handle,
            pending_signal: None,
            gone: false,
            altstack: None,
        }
    }
}

fn zero_regs() -> Regs {
    Regs {
        r15: 0,
        r14: 0,
        r13: 0,
        r12: 0,
        rbp: 0,
        rbx: 0,
        r11: 0,
        r10: 0,
        r9: 0,
        r8: 0,
        rax: 0,
        rcx: 0,
        rdx: 0,
        rsi: 0,
        rdi: 0,
        orig_rax: 0,
        rip: 0,
        cs: 0,
        eflags: 0,
        rsp: 0,
        ss: 0,
        fs_base: 0,
        gs_base: 0,
        ds: 0,
        es: 0,
        fs: 0,
        gs: 0,
    }
}

/// The traced process.
pub struct Process {
    /// Thread-group id.
    pub pid: Pid,
    /// Its memory.
    pub mem: Memory,
    /// Inserted breakpoints.
    pub bps: Breakpoints,
    /// Meaning of each breakpoint.
    pub bp_kinds: HashMap<u64, BreakpointKind>,
    /// Threads by logical id.
    pub threads: Vec<TracedThread>,
    /// Logical id by tid.
    pub by_tid: HashMap<Pid, ThreadId>,
    /// Stops of tids not known yet (a new thread's first stop before its clone event).
    pub early_stops: HashSet<Pid>,
    /// Other processes the program forked: followed but not controlled.
    pub foreign: HashSet<Pid>,
    /// TP offset of errno, once known.
    pub errno_tp_offset: Option<i64>,
    /// Access sites, patches and the access log.
    pub patching: Patching,
}

impl Process {
    /// A process just past exec, with its main thread.
    pub fn new(pid: Pid) -> io::Result<Process> {
        let mem = Memory::open(pid)?;
        let mut by_tid = HashMap::new();
        by_tid.insert(pid, 0);
        Ok(Process {
            pid,
            mem,
            bps: Breakpoints::default(),
            bp_kinds: HashMap::new(),
            threads: vec![TracedThread::new(pid, true, 0, 0)],
            by_tid,
            early_stops: HashSet::new(),
            foreign: HashSet::new(),
            errno_tp_offset: None,
            patching: Patching::default(),
        })
    }

    /// The tracer-side record of a fork copy of this process whose threads were rebuilt
    /// with new tids (`tids`: logical id → tid; other threads are gone).
    pub fn copy_with(&self, copy: Pid, tids: &[(ThreadId, Pid)]) -> io::Result<Process> {
        let mut threads = self.threads.clone();
        let mut by_tid = HashMap::new();
        for &(t, tid) in tids {
            threads[t].tid = tid;
            threads[t].started = true;
            by_tid.insert(tid, t);
        }
        Ok(Process {
            pid: copy,
            mem: Memory::open(copy)?,
            bps: self.bps.clone(),
            bp_kinds: self.bp_kinds.clone(),
            threads,
            by_tid,
            early_stops: HashSet::new(),
            foreign: HashSet::new(),
            errno_tp_offset: self.errno_tp_offset,
            patching: self.patching.clone(),
        })
    }

    /// Inserts breakpoints at `addrs`, all with meaning produced by `kind`. An address that
    /// already has a breakpoint keeps its first meaning.
    pub fn add_breakpoints(
        &mut self,
        addrs: &[u64],
        mut kind: impl FnMut(u64) -> Option<BreakpointKind>,
    ) -> io::Result<()> {
        let mut new = Vec::with_capacity(addrs.len());
        for &a in addrs {
            if self.bp_kinds.contains_key(&a) {
                continue;
            }
            let Some(k) = kind(a) else { continue };
            self.bp_kinds.insert(a, k);
            new.push(a);
        }
        for &a in &new {
            self.unpatch_covering(a..a + 1)?;
        }
        self.bps.insert_many(&self.mem, &new)
    }

    /// Inserts one breakpoint at `addr` (no-op when present), taking out first the patches
    /// whose jumps rely on that byte.
    pub fn insert_breakpoint(&mut self, addr: u64) -> io::Result<()> {
        if !self.bps.contains(addr) {
            self.unpatch_covering(addr..addr + 1)?;
        }
        self.bps.insert(&self.mem, addr)
    }

    /// Removes the breakpoint at `addr` for good, taking out first the patches whose jumps
    /// rely on that byte.
    pub fn remove_breakpoint(&mut self, addr: u64) -> io::Result<()> {
        if self.bps.contains(addr) {
            self.unpatch_covering(addr..addr + 1)?;
        }
        self.bps.remove(&self.mem, addr)
    }

    /// Takes out every patch whose jump relies on bytes in `range` (and, in turn, those
    /// relying on the bytes that restores): each site gets its original bytes back and a
    /// breakpoint, so that its accesses are still recorded.
    pub fn unpatch_covering(&mut self, range: std::ops::Range<u64>) -> io::Result<()> {
        if self.patching.table.is_empty() {
            return Ok(());
        }
        let sites = self.patching.table.dependents(range);
        if sites.is_empty() {
            return Ok(());
        }
        let table = Arc::make_mut(&mut self.patching.table);
        let mut removed = Vec::with_capacity(sites.len());
        for at in sites {
            if let Some(site) = table.remove(at) {
                self.mem.write(at, site.original_bytes())?;
                table.space.release(site.trampoline);
                if site.access {
                    removed.push((at, site.id, site.original_bytes().to_vec()));
                }
            }
        }
        for (at, id, bytes) in removed {
            self.bp_kinds.insert(at, BreakpointKind::Access(id));
            self.bps.insert(&self.mem, at)?;
            self.patching.stats.unpatched += 1;
            // A copy to run the instruction out of line, so that a hit costs one stop and
            // no single-step (in trampoline space already mapped: nothing can be mapped
            // from here).
            let table = Arc::make_mut(&mut self.patching.table);
            let Some(site) = self.patching.sites.get(id as usize) else {
                continue;
            };
            if table.out_of_line(at).is_some() || site.mem_fn.is_some() {
                continue;
            }
            let req = crate::patch::SiteRequest {
                id,
                insn: site.insn,
                bytes,
                needs_stop: true,
            };
            if let Some(copy) = crate::patch::plan_out_of_line([&req], &mut table.space, true).pop()
            {
                self.mem.write(copy.meta.at, &copy.bytes)?;
                table.insert_out_of_line(copy.meta);
            }
        }
        Ok(())
    }

    /// Reads the registers of thread `t` into its record.
    pub fn load_regs(&mut self, t: ThreadId) -> nix::Result<Regs> {
        let r = regs::get(self.threads[t].tid)?;
        self.threads[t].regs = r;
        Ok(r)
    }

    /// Makes thread `t`, stopped at a function-entry breakpoint, return `value` to its caller.
    pub fn return_from_call(&mut self, t: ThreadId, value: u64) -> io::Result<()> {
        let th = &mut self.threads[t];
        let mut r = th.regs;
        r.rax = value;
        r.rip = self.mem.read_u64(r.rsp)?;
        r.rsp += 8;
        regs::set(th.tid, r).map_err(io::Error::from)?;
        th.regs = r;
        th.place = StopPlace::Event;
        Ok(())
    }

    /// Makes thread `t`, at a seccomp stop, skip the syscall with result `value`.
    pub fn finish_syscall(&mut self, t: ThreadId, value: i64) -> io::Result<()> {
        let th = &mut self.threads[t];
        let mut r = th.regs;
        r.orig_rax = u64::MAX;
        r.rax = value as u64;
        regs::set(th.tid, r).map_err(io::Error::from)?;
        th.regs = r;
        th.place = StopPlace::Event;
        Ok(())
    }

    /// Writes errno of thread `t` (its fs_base plus libc's TLS offset).
    pub fn set_errno(&mut self, t: ThreadId, value: i32) -> io::Result<()> {
        if let Some(off) = self.errno_tp_offset {
            let addr = self.threads[t].regs.fs_base.wrapping_add(off as u64);
            self.mem.write_u32(addr, value as u32)?;
        }
        Ok(())
    }

    /// Steps thread `t` over the breakpoint it is stopped at, executing the original
    /// instruction. Returns an event that interrupted the step (a fault), if any.
    pub fn step_over_breakpoint(&mut self, t: ThreadId) -> io::Result<Option<Event>> {
        let StopPlace::Breakpoint(addr) = self.threads[t].place else {
            return Ok(None);
        };
        let tid = self.threads[t].tid;
        let mut r = self.threads[t].regs;
        r.rip = addr;
        regs::set(tid, r).map_err(io::Error::from)?;
        self.bps.lift(&self.mem, addr)?;
        events::step(tid).map_err(io::Error::from)?;
        let result = loop {
            match events::wait(Some(tid)).map_err(io::Error::from)? {
                WaitOutcome::Interrupted => continue,
                WaitOutcome::NoChildren => break None,
                WaitOutcome::Event(_, Event::Trap) => break None,
                WaitOutcome::Event(_, Event::Signal(sig)) if events::signal_was_sent(tid) => {
                    // A signal another thread sent while this one was stopped arrives before
                    // the instruction runs: keep it for the next resume (so its handler
                    // returns past the breakpoint, not onto it) and step again.
                    self.keep_signal(t, sig);
                    events::step(tid).map_err(io::Error::from)?;
                }
                // A job-control stop (SIGCONT sent to the program makes every thread report
                // one when next resumed) comes before the instruction too: step again.
                WaitOutcome::Event(_, Event::Stop(_)) => {
                    events::step(tid).map_err(io::Error::from)?
                }
                WaitOutcome::Event(_, ev) => break Some(ev),
            }
        };
        self.bps.restore(&self.mem, addr)?;
        self.threads[t].place = StopPlace::Event;
        Ok(result)
    }

    /// Keeps `sig`, which thread `t` is in the signal-delivery stop of, for its next resume;
    /// unless it is a request to stop meant for mcheck (the user's Ctrl-C reaching the whole
    /// process group), which is noted and dropped.
    pub fn keep_signal(&mut self, t: ThreadId, sig: nix::sys::signal::Signal) {
        let tid = self.threads[t].tid;
        let ours = |p: Pid| self.by_tid.contains_key(&p) || self.foreign.contains(&p);
        if interrupt::meant_for_mcheck(tid, sig, ours) {
            interrupt::note(sig);
        } else {
            self.threads[t].pending_signal = Some(sig);
        }
    }

    /// Where an unconditional jump at `addr` (under a breakpoint) goes: the target of a
    /// direct `jmp`, or the pointer a `jmp [rip+x]` (a PLT stub) reads. None for any other
    /// instruction. Stepping over such a breakpoint is then a register write, not a
    /// single-step.
    pub fn jump_target(&self, addr: u64) -> Option<u64> {
        let mut code = [0u8; 16];
        self.mem.read(addr, &mut code).ok()?;
        code[0] = self.bps.original_byte(addr)?;
        let insn = decode_at(&code, addr);
        if insn.mnemonic() != iced_x86::Mnemonic::Jmp || insn.op_count() != 1 {
            return None;
        }
        match insn.op0_kind() {
            OpKind::NearBranch64 => Some(insn.near_branch_target()),
            OpKind::Memory if insn.is_ip_rel_memory_operand() => {
                self.mem.read_u64(insn.ip_rel_memory_address()).ok()
            }
            _ => None,
        }
    }

    /// For a breakpoint on `call *slot(%rip)` at `addr`: the called function (the slot's
    /// value) and the return address the call pushes.
    pub fn call_through_slot(&self, addr: u64) -> Option<(u64, u64)> {
        let mut code = [0u8; 16];
        self.mem.read(addr, &mut code).ok()?;
        code[0] = self.bps.original_byte(addr)?;
        let insn = decode_at(&code, addr);
        if insn.flow_control() != iced_x86::FlowControl::IndirectCall
            || !insn.is_ip_rel_memory_operand()
        {
            return None;
        }
        let target = self.mem.read_u64(insn.ip_rel_memory_address()).ok()?;
        Some((target, insn.next_ip()))
    }

    /// Effective address of the memory operand of `insn` (decoded at its file address, in a
    /// file loaded with `bias`) with thread `t`'s registers.
    pub fn effective_address(&self, t: ThreadId, insn: &Instruction, bias: u64) -> u64 {
        if insn.is_ip_rel_memory_operand() {
            return insn.ip_rel_memory_address().wrapping_add(bias);
        }
        let r = &self.threads[t].regs;
        let operand = (0..insn.op_count()).find(|&i| insn.op_kind(i) == OpKind::Memory);
        let Some(operand) = operand else { return 0 };
        insn.virtual_address(operand, 0, |reg, _, _| Some(register_value(r, reg)))
            .unwrap_or(0)
    }
}

/// Decodes the instruction at `addr` from `bytes` (taken from the ELF file).
pub fn decode_at(bytes: &[u8], addr: u64) -> Instruction {
    let mut d = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE);
    d.decode()
}

fn register_value(r: &Regs, reg: Register) -> u64 {
    use Register::*;
    let full = reg.full_register();
    let v = match full {
        RAX => r.rax,
        RBX => r.rbx,
        RCX => r.rcx,
        RDX => r.rdx,
        RSI => r.rsi,
        RDI => r.rdi,
        RBP => r.rbp,
        RSP => r.rsp,
        R8 => r.r8,
        R9 => r.r9,
        R10 => r.r10,
        R11 => r.r11,
        R12 => r.r12,
        R13 => r.r13,
        R14 => r.r14,
        R15 => r.r15,
        RIP => r.rip,
        FS => r.fs_base,
        GS => r.gs_base,
        _ => 0,
    };
    match reg.size() {
        4 if reg != full => v & 0xffff_ffff,
        _ => v,
    }
}
