//! The access sites of a process and what instrumenting them keeps: each site by id
//! ([`AccessSite`]), the sites with their patch table and access log ([`Patching`], owned
//! by the code edits), the executor's state of access recording ([`Recording`]), and the
//! counts for the report ([`PatchStats`]). `patching.rs` fills them in.

use std::collections::BTreeMap;
use std::sync::Arc;

use iced_x86::Instruction;

use super::plan::{Alloc, MemFn, ModulePlan};
use crate::patch::PatchTable;
use crate::tracee::access_log::AccessLog;

/// One memory-access site of the code under test, by id (what its records carry).
#[derive(Debug, Clone, Copy)]
pub struct AccessSite {
    /// The instruction, decoded at its runtime address.
    pub insn: Instruction,
    /// Bytes accessed.
    pub size: u8,
    /// It writes (or reads and writes).
    pub write: bool,
    /// Its source says it is an atomic load or store (an inlined atomic accessor).
    pub atomic_source: bool,
    /// Atomic only by its source line (`#pragma omp atomic read`...), not as an access to
    /// an atomic object: its address is not learnt as an atomic location, so plain MOVs of
    /// the same variable elsewhere stay plain (and can race with it).
    pub atomic_by_line: bool,
    /// A plain MOV-family instruction (an atomic when its address holds one).
    pub plain_mov: bool,
    /// An atomic read-modify-write inside a system library: synchronisation mcheck does not
    /// model, recorded as an acquire and a release of its address.
    pub rmw: bool,
    /// A plain load or store inside a runtime library that synchronises through them
    /// (libgomp): a load acquires its address, a store releases it; never racy itself.
    pub library_plain: bool,
    /// Not an access but the hook of a modelled libc memory function (its entry, or a call
    /// through its GOT slot): its records are a call's arguments.
    pub mem_fn: Option<MemFn>,
    /// Not an access but the hook of an allocator (at a PLT stub or a call through its
    /// GOT slot), logging its calls (`Alloc::logged`).
    pub alloc: Option<Alloc>,
}

/// What the drain of the access log needs of a site, in 16 bytes: the full [`AccessSite`]
/// (the decoded instruction, ~60 bytes) of tens of thousands of sites does not stay in the
/// CPU caches, and the drain reads one for each of millions of records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedSite {
    /// The instruction's runtime address.
    pub pc: u64,
    /// Bytes accessed.
    pub size: u8,
    /// It writes (or reads and writes).
    pub write: bool,
    /// A plain MOV-family instruction (an atomic when its address holds one).
    pub plain_mov: bool,
    /// A plain access of the code under test: not a hook's call record, not a library's
    /// synchronisation, not an atomic by its source. The common case, with a fast path.
    pub plain: bool,
}

impl LoggedSite {
    /// The descriptor of `site`.
    pub fn of(site: &AccessSite) -> LoggedSite {
        LoggedSite {
            pc: site.insn.ip(),
            size: site.size,
            write: site.write,
            plain_mov: site.plain_mov,
            plain: site.mem_fn.is_none()
                && site.alloc.is_none()
                && !site.rmw
                && !site.library_plain
                && !site.atomic_source,
        }
    }
}

/// A call an allocator's wrapper made and had not logged when its thread was moved out of
/// it: the tracer records it (`site` is the hook's site id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnloggedCall {
    /// The hook's site id.
    pub site: u32,
    /// What the allocator returned.
    pub result: u64,
    /// Its first three arguments.
    pub args: [u64; 3],
    /// Its return address.
    pub caller: u64,
}

/// How many sites were patched and why the others were not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchStats {
    /// Sites that record without a stop.
    pub patched: u64,
    /// Sites left on the breakpoint path, by reason.
    pub fallback: BTreeMap<&'static str, u64>,
    /// Patches taken out later (a breakpoint needed the bytes), now breakpoints.
    pub unpatched: u64,
    /// Instructions next to short sites moved to trampolines of their own to make room
    /// for the sites' jumps.
    pub moved_neighbours: u64,
    /// Times a thread stopped inside generated code (a signal, an interrupt) was moved to
    /// where it would be without it.
    pub moved_out: u64,
    /// Accesses recorded at a breakpoint (two ptrace stops each) rather than from the log.
    pub breakpoint_accesses: u64,
    /// The program's calls of libc memory functions (memcpy, memcmp...) hooked to log
    /// their arguments without a stop: PLT stubs and calls through GOT slots.
    pub memory_calls_patched: u64,
}

impl PatchStats {
    /// Sites left on the breakpoint path.
    pub fn on_breakpoints(&self) -> u64 {
        self.fallback.values().sum::<u64>() + self.unpatched
    }

    /// Merges the figures of another execution: the site counts of the most instrumented
    /// one, the events of both.
    pub fn merge(&mut self, other: &PatchStats) {
        if other.patched + other.on_breakpoints() > self.patched + self.on_breakpoints() {
            self.patched = other.patched;
            self.memory_calls_patched = other.memory_calls_patched;
            self.fallback = other.fallback.clone();
            self.unpatched = other.unpatched;
            self.moved_neighbours = other.moved_neighbours;
        }
        self.moved_out += other.moved_out;
        self.breakpoint_accesses += other.breakpoint_accesses;
    }
}

/// A process's access sites, their patches and the access log.
#[derive(Clone, Default)]
pub struct Patching {
    /// Every access site by id.
    pub sites: Arc<Vec<AccessSite>>,
    /// The same sites as the log's drain reads them ([`LoggedSite`]), by id; extended
    /// with `sites` only, by [`Patching::add_sites`].
    pub logged: Arc<Vec<LoggedSite>>,
    /// What is patched.
    pub table: Arc<PatchTable>,
    /// The log patched sites append to (None until the first thread, or without patching).
    pub log: Option<Arc<AccessLog>>,
    /// Counts for the report.
    pub stats: PatchStats,
}

impl Patching {
    /// Adds `new` sites (their ids follow the ones there): both tables grow together.
    pub fn add_sites(&mut self, new: Vec<AccessSite>) {
        Arc::make_mut(&mut self.logged).extend(new.iter().map(LoggedSite::of));
        Arc::make_mut(&mut self.sites).extend(new);
    }
}

/// The executor's state of access recording (kept with snapshots).
#[derive(Clone, Default)]
pub struct Recording {
    /// Accesses are recorded (the program has created a thread).
    pub started: bool,
    /// Files whose sites wait for the first thread: (plan, load bias).
    pub pending: Vec<(Arc<ModulePlan>, u64)>,
}

/// The memory operand of `insn` when it is a fixed address (RIP-relative or absolute).
pub(super) fn fixed_operand(insn: &Instruction) -> Option<u64> {
    if insn.is_ip_rel_memory_operand() {
        Some(insn.ip_rel_memory_address())
    } else if insn.memory_base() == iced_x86::Register::None
        && insn.memory_index() == iced_x86::Register::None
    {
        Some(insn.memory_displacement64())
    } else {
        None
    }
}
