//! What mcheck changed in the program's code: its breakpoints (`int3` bytes with what each
//! means) and the access sites patched to jump to trampolines (with the access log). The
//! two are kept consistent here: a breakpoint that needs bytes a patch's jump relies on
//! takes the patch out first. Also the moves that depend on the original code: stepping a
//! thread over a breakpoint, and reading through one (a jump's target, a call's slot).

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;

use iced_x86::OpKind;

use super::hooks::Hook;

use super::plan::{Alloc, MemFn, ModulePlan};
use super::sites::{fixed_operand, AccessSite, LoggedSite, PatchStats, Patching};
use crate::model::ThreadId;
use crate::patch::{PatchTable, SiteRequest};
use crate::run::process::{decode_at, Process, StopPlace};
use crate::tracee::breakpoints::Breakpoints;
use crate::tracee::memory::Memory;
use crate::tracee::Event;

/// What a breakpoint address means.
#[derive(Clone, Debug)]
pub(in crate::run) enum BreakpointKind {
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

/// The program's code as mcheck changed it (kept with snapshots: a copy has the same code).
#[derive(Clone, Default)]
pub(in crate::run) struct CodeEdits {
    /// Inserted breakpoints.
    pub(super) bps: Breakpoints,
    /// Meaning of each breakpoint.
    pub(super) kinds: HashMap<u64, BreakpointKind>,
    /// Access sites, patches and the access log.
    pub(super) patching: Patching,
}

impl CodeEdits {
    /// What the breakpoint at `addr` means, if mcheck has one there.
    pub fn kind(&self, addr: u64) -> Option<&BreakpointKind> {
        self.kinds.get(&addr)
    }

    /// Whether mcheck has a breakpoint of its own meaning at `addr`.
    pub fn has_kind(&self, addr: u64) -> bool {
        self.kinds.contains_key(&addr)
    }

    /// Whether an `int3` of mcheck's is at `addr` (with a meaning, or a return's).
    pub fn has_breakpoint(&self, addr: u64) -> bool {
        self.bps.contains(addr)
    }

    /// The program's own byte under the breakpoint at `addr`.
    pub fn original_byte(&self, addr: u64) -> Option<u8> {
        self.bps.original_byte(addr)
    }

    /// Changes the byte the breakpoint at `addr` restores (a debugger writing the program's
    /// code under it); false when there is none.
    pub fn replace_original(&mut self, addr: u64, byte: u8) -> bool {
        self.bps.replace_original(addr, byte)
    }

    /// Removes the breakpoint at `addr` and forgets its meaning (one-time breakpoints).
    pub fn forget_breakpoint(&mut self, mem: &Memory, addr: u64) -> io::Result<()> {
        self.remove_breakpoint(mem, addr)?;
        self.kinds.remove(&addr);
        Ok(())
    }

    /// Access site number `id`.
    pub fn site(&self, id: u32) -> Option<AccessSite> {
        self.patching.sites.get(id as usize).copied()
    }

    /// Every access site.
    pub fn sites(&self) -> &Arc<Vec<AccessSite>> {
        &self.patching.sites
    }

    /// Every access site as the log's drain reads it, by id.
    pub fn logged_sites(&self) -> &Arc<Vec<LoggedSite>> {
        &self.patching.logged
    }

    /// What is patched.
    pub fn table(&self) -> &PatchTable {
        &self.patching.table
    }

    /// The access log, once mapped (a handle to it).
    pub fn log_handle(&self) -> Option<Arc<crate::tracee::access_log::AccessLog>> {
        self.patching.log.clone()
    }

    /// Records logged and not drained yet.
    pub fn logged(&self) -> u64 {
        self.patching.log.as_ref().map_or(0, |l| l.len())
    }

    /// How the sites were instrumented.
    pub fn stats(&self) -> &PatchStats {
        &self.patching.stats
    }

    /// Inserts breakpoints at `addrs`, all with meaning produced by `kind`. An address that
    /// already has a breakpoint keeps its first meaning.
    pub fn add_breakpoints(
        &mut self,
        mem: &Memory,
        addrs: &[u64],
        mut kind: impl FnMut(u64) -> Option<BreakpointKind>,
    ) -> io::Result<()> {
        let mut new = Vec::with_capacity(addrs.len());
        for &a in addrs {
            if self.kinds.contains_key(&a) {
                continue;
            }
            let Some(k) = kind(a) else { continue };
            self.kinds.insert(a, k);
            new.push(a);
        }
        for &a in &new {
            self.unpatch_covering(mem, a..a + 1)?;
        }
        self.bps.insert_many(mem, &new)
    }

    /// Inserts one breakpoint at `addr` (no-op when present), taking out first the patches
    /// whose jumps rely on that byte.
    pub fn insert_breakpoint(&mut self, mem: &Memory, addr: u64) -> io::Result<()> {
        if !self.bps.contains(addr) {
            self.unpatch_covering(mem, addr..addr + 1)?;
        }
        self.bps.insert(mem, addr)
    }

    /// Removes the breakpoint at `addr` for good, taking out first the patches whose jumps
    /// rely on that byte.
    pub fn remove_breakpoint(&mut self, mem: &Memory, addr: u64) -> io::Result<()> {
        if self.bps.contains(addr) {
            self.unpatch_covering(mem, addr..addr + 1)?;
        }
        self.bps.remove(mem, addr)
    }

    /// Takes out every patch whose jump relies on bytes in `range` (and, in turn, those
    /// relying on the bytes that restores): each site gets its original bytes back and a
    /// breakpoint, so that its accesses are still recorded.
    pub fn unpatch_covering(
        &mut self,
        mem: &Memory,
        range: std::ops::Range<u64>,
    ) -> io::Result<()> {
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
            let wrapper = (table.get(at))
                .and_then(|s| table.trampoline_at(s.trampoline))
                .is_some_and(|m| matches!(m.kind, crate::patch::Kind::Wrapper { .. }));
            if let Some(site) = table.remove(at) {
                mem.write(at, site.original_bytes())?;
                // A thread may be inside the allocator an allocator's wrapper called: its
                // code stays where it is for as long as the process lives.
                if !wrapper {
                    table.space.release(site.trampoline);
                }
                if site.access {
                    removed.push((at, site.id, site.original_bytes().to_vec()));
                }
            }
        }
        for (at, id, bytes) in removed {
            self.kinds.insert(at, BreakpointKind::Access(id));
            self.bps.insert(mem, at)?;
            self.patching.stats.unpatched += 1;
            // A copy to run the instruction out of line, so that a hit costs one stop and
            // no single-step.
            let Some(site) = self.patching.sites.get(id as usize) else {
                continue;
            };
            if self.patching.table.out_of_line(at).is_some() || site.mem_fn.is_some() {
                continue;
            }
            let req = SiteRequest {
                id,
                insn: site.insn,
                bytes,
                needs_stop: true,
            };
            self.write_copies(mem, &[req])?;
        }
        Ok(())
    }

    /// Requests for out-of-line copies of the instructions under the atomic and pause
    /// breakpoints that `code` (the current bytes of a region, breakpoints included)
    /// holds and that have no copy yet: a thread passes such a breakpoint by jumping to the
    /// copy, which runs the instruction and jumps back, instead of being single-stepped
    /// (one stop instead of two at each atomic instruction a decision was taken at).
    pub fn passed_by_copy(&self, code: &crate::patch::Code) -> Vec<SiteRequest> {
        let mut requests = Vec::new();
        for (&at, kind) in &self.kinds {
            if !matches!(kind, BreakpointKind::Atomic { .. } | BreakpointKind::Pause)
                || self.patching.table.out_of_line(at).is_some()
            {
                continue;
            }
            let Some(original) = self.bps.original_byte(at) else {
                continue;
            };
            let Some(text) = (1..=15).rev().find_map(|n| code.get(at, n)) else {
                continue;
            };
            let mut text = text.to_vec();
            text[0] = original;
            let insn = decode_at(&text, at);
            if insn.is_invalid() {
                continue;
            }
            requests.push(SiteRequest {
                id: 0,
                bytes: text[..insn.len()].to_vec(),
                insn,
                needs_stop: true,
            });
        }
        requests.sort_by_key(|r| r.insn.ip());
        requests
    }

    /// Plans, writes and registers the out-of-line copies of `requests` that fit in
    /// trampoline space already mapped (nothing can be mapped from here); the others get
    /// none and are single-stepped.
    fn write_copies(&mut self, mem: &Memory, requests: &[SiteRequest]) -> io::Result<()> {
        if requests.is_empty() {
            return Ok(());
        }
        let table = Arc::make_mut(&mut self.patching.table);
        let copies = crate::patch::plan_out_of_line(requests, &mut table.space, true);
        for copy in copies {
            mem.write(copy.meta.at, &copy.bytes)?;
            table.insert_out_of_line(copy.meta);
        }
        Ok(())
    }

    /// The out-of-line copy of the instruction under the breakpoint at `addr`, if it has
    /// one (see [`Self::copy_out_of_line`]).
    pub fn copy_of(&self, addr: u64) -> Option<u64> {
        self.patching.table.out_of_line(addr)
    }

    /// Steps thread `t` of `p` over the breakpoint it is stopped at, executing the original
    /// instruction. Returns an event that interrupted the step (a fault), if any.
    pub fn step_over(&self, p: &mut Process, t: ThreadId) -> io::Result<Option<Event>> {
        let StopPlace::Breakpoint(addr) = p.threads[t].place else {
            return Ok(None);
        };
        self.bps.lift(&p.mem, addr)?;
        let result = p.step_instruction_at(t, addr);
        self.bps.restore(&p.mem, addr)?;
        result
    }

    /// Where an unconditional jump at `addr` (under a breakpoint) goes: the target of a
    /// direct `jmp`, or the pointer a `jmp [rip+x]` (a PLT stub) reads. None for any other
    /// instruction. Stepping over such a breakpoint is then a register write, not a
    /// single-step.
    pub fn jump_target(&self, mem: &Memory, addr: u64) -> Option<u64> {
        let mut code = [0u8; 16];
        mem.read(addr, &mut code).ok()?;
        code[0] = self.bps.original_byte(addr)?;
        let insn = decode_at(&code, addr);
        if insn.mnemonic() != iced_x86::Mnemonic::Jmp || insn.op_count() != 1 {
            return None;
        }
        match insn.op0_kind() {
            OpKind::NearBranch64 => Some(insn.near_branch_target()),
            OpKind::Memory if insn.is_ip_rel_memory_operand() => {
                mem.read_u64(insn.ip_rel_memory_address()).ok()
            }
            _ => None,
        }
    }

    /// For a breakpoint on `call *slot(%rip)` at `addr`: the called function (the slot's
    /// value) and the return address the call pushes.
    pub fn call_through_slot(&self, mem: &Memory, addr: u64) -> Option<(u64, u64)> {
        let mut code = [0u8; 16];
        mem.read(addr, &mut code).ok()?;
        code[0] = self.bps.original_byte(addr)?;
        let insn = decode_at(&code, addr);
        if insn.flow_control() != iced_x86::FlowControl::IndirectCall
            || !insn.is_ip_rel_memory_operand()
        {
            return None;
        }
        let target = mem.read_u64(insn.ip_rel_memory_address()).ok()?;
        Some((target, insn.next_ip()))
    }

    /// Sets the empty log up for the running thread: a thread that must stop at every
    /// logged access (`stretch`: in a creation stretch of a program with atomic globals,
    /// see `creation.rs`, so that an access to one becomes a scheduling point before it
    /// happens) gets the log armed; any other thread logs freely.
    pub fn sync_log_mode(&self, stretch: bool) {
        let Some(log) = &self.patching.log else {
            return;
        };
        if stretch && !log.is_armed() && log.is_empty() {
            log.arm_trap();
        } else if !stretch && log.is_armed() {
            log.reset();
        }
    }

    /// The access sites whose operand is a fixed address (RIP-relative or absolute) in the
    /// aligned 8-byte word of one of `addresses`: the other accesses of a racy global.
    pub fn fixed_address_sites(&self, addresses: &[u64]) -> Vec<u64> {
        if addresses.is_empty() {
            return Vec::new();
        }
        let words: HashSet<u64> = addresses.iter().map(|a| a & !7).collect();
        (self.patching.sites.iter())
            .filter(|s| !s.atomic_source && !s.rmw && !s.library_plain)
            .filter(|s| fixed_operand(&s.insn).is_some_and(|a| words.contains(&(a & !7))))
            .map(|s| s.insn.ip())
            .collect()
    }
}
