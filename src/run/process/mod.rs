//! The traced processes as the executor sees them: the threads of the whole process tree
//! (OS tid ↔ logical id, numbered across the tree), where each is stopped, the memory of
//! the current process (the others' wait in `tree.rs`), and the low-level moves on a stopped
//! thread (return from an emulated call, step over a breakpoint, finish an emulated syscall).

pub(super) mod cut;
pub(super) mod report;
pub(super) mod stacks;
pub(super) mod tree;

use std::collections::{HashMap, HashSet};
use std::io;

use iced_x86::{Decoder, DecoderOptions, Instruction, OpKind, Register};
use nix::unistd::Pid;

use self::tree::{executable, ParkedMemory, ProcessInfo};
use crate::model::{Space, ThreadId};
use crate::report::untraced::{KILLED_AT_END, SHARED_MEMORY};
use crate::report::{ProcessRef, UntracedProcess};
use crate::tracee::memory::Memory;
use crate::tracee::regs::{self, Regs};
use crate::tracee::{events, interrupt, Event, WaitOutcome};

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
    /// The process it belongs to (its number in the tree).
    pub proc: usize,
    /// The CPUs it set with sched_setaffinity, which mcheck emulates (it keeps running on
    /// its tracer's CPU); None: those shown to the program. Inherited by the threads and
    /// processes it creates, kept across exec.
    pub affinity: Option<Vec<usize>>,
}

impl TracedThread {
    /// A thread of the current process as first seen.
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
            proc: 0,
            affinity: None,
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

/// The traced process tree, with one process current: the one whose thread runs or is
/// being looked at. `pid`, `mem`, `errno_tp_offset` and `syscall_insn` are the current
/// process's; threads are the whole tree's.
pub struct Process {
    /// Thread-group id of the current process.
    pub pid: Pid,
    /// The current process's memory.
    pub mem: Memory,
    /// Threads by logical id, of every process of the tree.
    pub threads: Vec<TracedThread>,
    /// Logical id by tid.
    pub by_tid: HashMap<Pid, ThreadId>,
    /// Stops of tids not known yet (a new thread's first stop before its clone event).
    pub early_stops: HashSet<Pid>,
    /// Processes the program created that are followed but not controlled (a vfork child
    /// until it execs, a child sharing the memory of its parent without being a thread).
    pub foreign: HashSet<Pid>,
    /// TP offset of errno in the current process, once known.
    pub errno_tp_offset: Option<i64>,
    /// The process tree was killed (the execution is over).
    pub killed: bool,
    /// Address of a `syscall` instruction of the current process (for injected system
    /// calls), once seen (0 before).
    pub syscall_insn: u64,
    /// Every process of the tree, by number (0: the program as launched).
    pub procs: Vec<ProcessInfo>,
    /// The number of the current process.
    current: usize,
    /// The last address space given out (0: the program as launched).
    last_space: Space,
    /// The executables of the `foreign` processes, by pid.
    foreign_programs: HashMap<Pid, std::path::PathBuf>,
    /// Processes of this execution that ran unchecked, or were checked only in part.
    untraced: Vec<UntracedProcess>,
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
            threads: vec![TracedThread::new(pid, true, 0, 0)],
            by_tid,
            early_stops: HashSet::new(),
            foreign: HashSet::new(),
            errno_tp_offset: None,
            killed: false,
            syscall_insn: 0,
            procs: vec![ProcessInfo::new(pid, executable(pid), 0, None)],
            current: 0,
            last_space: 0,
            foreign_programs: HashMap::new(),
            untraced: Vec::new(),
        })
    }

    /// The tracer-side record of a fork copy of this process (the only one of its tree)
    /// whose threads were rebuilt with new tids (`tids`: logical id → tid; other threads are
    /// gone).
    pub fn copy_with(&self, copy: Pid, tids: &[(ThreadId, Pid)]) -> io::Result<Process> {
        let mut threads = self.threads.clone();
        let mut by_tid = HashMap::new();
        for &(t, tid) in tids {
            threads[t].tid = tid;
            threads[t].started = true;
            by_tid.insert(tid, t);
        }
        for th in &mut threads {
            th.proc = 0;
        }
        Ok(Process {
            pid: copy,
            mem: Memory::open(copy)?,
            threads,
            by_tid,
            early_stops: HashSet::new(),
            foreign: HashSet::new(),
            errno_tp_offset: self.errno_tp_offset,
            killed: false,
            syscall_insn: self.syscall_insn,
            procs: vec![self.procs[self.current].copied(copy)],
            current: 0,
            last_space: self.last_space,
            foreign_programs: HashMap::new(),
            untraced: Vec::new(),
        })
    }

    /// The number of the current process.
    pub fn current(&self) -> usize {
        self.current
    }

    /// The current process's address space.
    pub fn space(&self) -> Space {
        self.procs[self.current].space
    }

    /// The executable the current process runs.
    pub fn exe(&self) -> &std::path::Path {
        &self.procs[self.current].exe
    }

    /// The number of the process thread `t` belongs to.
    pub fn proc_of(&self, t: ThreadId) -> usize {
        self.threads[t].proc
    }

    /// The pid of the process thread `t` belongs to.
    pub fn pid_of(&self, t: ThreadId) -> Pid {
        self.procs[self.threads[t].proc].pid
    }

    /// The memory of the process thread `t` belongs to.
    pub fn mem_of(&self, t: ThreadId) -> &Memory {
        let i = self.threads[t].proc;
        match &self.procs[i].parked {
            Some(parked) if i != self.current => &parked.mem,
            _ => &self.mem,
        }
    }

    /// Whether the program ran as more than its launched image: it forked, or exec'd.
    pub fn grew(&self) -> bool {
        self.last_space != 0 || self.procs.len() > 1
    }

    /// Whether the program has created other processes than the one launched (followed
    /// ones; `foreign` are the others).
    pub fn forked(&self) -> bool {
        self.procs.len() > 1
    }

    /// The pids of the processes of the tree still running, and the foreign ones.
    pub fn live_pids(&self) -> HashSet<Pid> {
        (self.procs.iter())
            .filter(|p| p.live)
            .map(|p| p.pid)
            .chain(self.foreign.iter().copied())
            .collect()
    }

    /// How reports name thread `t`'s process, when the program ran as more than one
    /// process image.
    pub fn process_ref(&self, t: ThreadId) -> Option<ProcessRef> {
        let i = self.threads.get(t)?.proc;
        self.grew().then(|| self.procs[i].reference(i))
    }

    /// Makes process `i` the current one: its memory becomes `mem`, the current one's is
    /// parked.
    pub fn switch_to(&mut self, i: usize) {
        if i == self.current {
            return;
        }
        let Some(incoming) = self.procs[i].parked.take() else {
            return;
        };
        let outgoing = ParkedMemory {
            mem: std::mem::replace(&mut self.mem, incoming.mem),
            errno_tp_offset: std::mem::replace(&mut self.errno_tp_offset, incoming.errno_tp_offset),
            syscall_insn: std::mem::replace(&mut self.syscall_insn, incoming.syscall_insn),
        };
        let previous = self.current;
        if self.procs[previous].live {
            self.procs[previous].parked = Some(outgoing);
        }
        self.current = i;
        self.pid = self.procs[i].pid;
    }

    /// Registers process `pid`, created by the current process: a fork child (`copy`: a
    /// copy of its parent's image, libc's errno offset and syscall instruction included)
    /// or a vfork child that has just exec'd (a new image). Returns its number; it is not
    /// made current.
    pub fn add_process(&mut self, pid: Pid, copy: bool) -> io::Result<usize> {
        let mem = Memory::open(pid)?;
        let exe = if copy {
            self.exe().to_path_buf()
        } else {
            executable(pid)
        };
        self.last_space += 1;
        let mut info = ProcessInfo::new(pid, exe, self.last_space, Some(self.current));
        info.parked = Some(ParkedMemory {
            mem,
            errno_tp_offset: if copy { self.errno_tp_offset } else { None },
            syscall_insn: if copy { self.syscall_insn } else { 0 },
        });
        self.procs.push(info);
        Ok(self.procs.len() - 1)
    }

    /// The current process exec'd: its new image gets a new address space and its memory
    /// is opened again (exec replaced the address space).
    pub fn new_image(&mut self) -> io::Result<()> {
        self.mem = Memory::open(self.pid)?;
        self.errno_tp_offset = None;
        self.syscall_insn = 0;
        self.last_space += 1;
        let info = &mut self.procs[self.current];
        info.space = self.last_space;
        info.exe = executable(self.pid);
        Ok(())
    }

    /// Follows `pid`, which shares the memory of the process that created it without being
    /// one of its threads: it runs natively until it execs ([`Process::foreign_exec`]).
    pub fn add_foreign(&mut self, pid: Pid) {
        self.foreign.insert(pid);
        self.foreign_programs.insert(pid, executable(pid));
    }

    /// Foreign process `pid` exec'd: it is about to become a process of the tree.
    pub fn foreign_exec(&mut self, pid: Pid) {
        self.foreign.remove(&pid);
        self.foreign_programs.remove(&pid);
    }

    /// Foreign process `pid` ended without exec: it ran untraced.
    pub fn foreign_ended(&mut self, pid: Pid) {
        self.foreign.remove(&pid);
        let program = self.foreign_programs.remove(&pid).unwrap_or_default();
        self.note_untraced(program, SHARED_MEMORY);
    }

    /// The processes of the tree other than the program as launched still run at the
    /// program's end, and are about to be killed: checked only in part.
    pub fn killed_at_end(&mut self) {
        let live: Vec<std::path::PathBuf> = (self.procs.iter().skip(1))
            .filter(|q| q.live)
            .map(|q| q.exe.clone())
            .collect();
        for program in live {
            self.note_untraced(program, KILLED_AT_END);
        }
    }

    /// The processes of this execution that were not checked, or only in part: those
    /// noted, and the foreign processes still running.
    pub fn untraced(&self) -> Vec<UntracedProcess> {
        let mut all = self.untraced.clone();
        for program in self.foreign_programs.values() {
            let u = untraced(program, SHARED_MEMORY);
            if !all.contains(&u) {
                all.push(u);
            }
        }
        all
    }

    fn note_untraced(&mut self, program: std::path::PathBuf, why: &'static str) {
        let u = untraced(&program, why);
        if !self.untraced.contains(&u) {
            self.untraced.push(u);
        }
    }

    /// Process `i` has ended (its threads are gone).
    pub fn ended(&mut self, i: usize) {
        self.procs[i].live = false;
        self.procs[i].parked = None;
    }

    /// Whether the thread of tid `tid` is the leader of thread `u`'s process: its end is the
    /// end of the process.
    pub fn leads(&self, tid: Pid, u: ThreadId) -> bool {
        tid == self.pid_of(u)
    }

    /// Reads the registers of thread `t` into its record.
    pub fn load_regs(&mut self, t: ThreadId) -> nix::Result<Regs> {
        let r = regs::get(self.threads[t].tid)?;
        self.threads[t].regs = r;
        Ok(r)
    }

    /// Sets thread `t`'s registers (and its record of them).
    pub fn set_regs(&mut self, t: ThreadId, r: Regs) -> nix::Result<()> {
        regs::set(self.threads[t].tid, r)?;
        self.threads[t].regs = r;
        Ok(())
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

    /// Executes one instruction of thread `t` at `addr` (the caller lifted what mcheck had
    /// written there): a single-step. Returns an event that interrupted the step (a fault),
    /// if any. The thread is then at an event stop.
    pub fn step_instruction_at(&mut self, t: ThreadId, addr: u64) -> io::Result<Option<Event>> {
        let tid = self.threads[t].tid;
        let mut r = self.threads[t].regs;
        r.rip = addr;
        regs::set(tid, r).map_err(io::Error::from)?;
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

/// AT_ENTRY of the freshly exec'd process.
pub fn auxv_entry(pid: Pid) -> anyhow::Result<u64> {
    let bytes =
        anyhow::Context::context(std::fs::read(format!("/proc/{pid}/auxv")), "reading auxv")?;
    for pair in bytes.chunks_exact(16) {
        let key = u64::from_le_bytes(pair[..8].try_into().expect("8 bytes"));
        let val = u64::from_le_bytes(pair[8..].try_into().expect("8 bytes"));
        if key == libc::AT_ENTRY {
            return Ok(val);
        }
    }
    Err(anyhow::anyhow!("no AT_ENTRY in the auxiliary vector"))
}

fn untraced(program: &std::path::Path, why: &'static str) -> UntracedProcess {
    UntracedProcess {
        program: program.to_string_lossy().into_owned(),
        why,
    }
}
