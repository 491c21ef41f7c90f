//! Access recording inside the tracee, the executor's side of `patch/`: from the first
//! thread creation on, every memory-access site of the code under test either jumps to a
//! trampoline that appends (address, site) to the shared access log, or (where that is not
//! possible, or a stop is needed there) keeps a breakpoint. The log holds only the running
//! thread's accesses (one thread runs at a time), so it is drained into the race detector
//! at every stop of that thread, in program order with everything else it did.
//!
//! Also here: moving a thread stopped inside a trampoline back to its site (signals,
//! interrupts), the stop of a full log, the sites the search needs stops at, and cleaning
//! the code of forked children, which run natively.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use anyhow::{Context, Result};
use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};

use super::chunks::{map_chunk, share_chunks};
use super::code::{BreakpointKind, CodeEdits};
use super::memo::RecordingMemos;
use super::plan::{Alloc, LoggedAlloc, MemFn, ModulePlan};
use super::scan_cache::SourceAtomic;
use super::sites::{fixed_operand, AccessSite, Patching, UnloggedCall};
use super::{Ctx, Instrumentation};
use crate::binary::accesses::AccessKind;
use crate::model::ThreadId;
use crate::patch::{
    self, free_ranges, Code, CodeSpace, EntryRequest, EntrySite, Exit, LogLayout, Refusal,
    SiteRequest,
};
use crate::run::process::Process;
use crate::tracee::access_log::AccessLog;
use crate::tracee::memory::Memory;
use crate::tracee::threads::leave_seccomp_stop;
use crate::tracee::{events, procfs, regs};

/// Records the log holds before it must be drained (16 bytes each).
const LOG_RECORDS: u64 = 1 << 19;

/// Whether the trampolines written at the first thread creation are shared with the fork
/// copies of a startup snapshot (`MCHECK_SHARED_TRAMPOLINES=off` keeps them private, to
/// compare).
fn sharing_enabled() -> bool {
    std::env::var("MCHECK_SHARED_TRAMPOLINES").map_or(true, |v| v != "off")
}

/// Whether sites are patched (`MCHECK_PATCH=off` keeps every site on the breakpoint path,
/// to compare or to rule patching out).
pub fn patching_enabled() -> bool {
    std::env::var("MCHECK_PATCH").map_or(true, |v| v != "off")
}

impl Instrumentation {
    /// The access sites and libc memory calls of a file, traced from the first thread
    /// creation on (before it, nothing can race: creating a thread orders everything before
    /// it with everything the thread does). Allocators are followed from the start, so that
    /// a block allocated before the first thread is named in reports.
    pub(super) fn add_access_module(
        &mut self,
        ctx: &mut Ctx<'_>,
        t: ThreadId,
        plan: Arc<ModulePlan>,
        bias: u64,
    ) -> Result<()> {
        if self.rec.started {
            self.instrument_accesses(ctx, t, &plan, bias)
        } else {
            self.rec.pending.push((plan, bias));
            Ok(())
        }
    }

    /// At the first thread creation (`t` at the clone's seccomp stop, registers `r`): maps
    /// the access log and instruments every file seen so far, then lets `t` enter the
    /// clone again (its seccomp stop comes back, and is handled as usual). With `share`
    /// (the startup snapshot is taken at that clone) the trampolines written are sealed
    /// and shared with the snapshot's fork copies.
    pub fn start_recording(
        &mut self,
        ctx: &mut Ctx<'_>,
        t: ThreadId,
        r: &regs::Regs,
        share: bool,
    ) -> Result<()> {
        self.rec.started = true;
        let tid = ctx.p.threads[t].tid;
        let canonical = leave_seccomp_stop(tid, r).context("stepping out of the clone")?;
        ctx.p.threads[t].regs = canonical;
        if ctx.p.syscall_insn == 0 {
            ctx.p.syscall_insn = canonical.rip;
        }
        if ctx.cfg.patch {
            self.create_access_log(ctx, t, &canonical)?;
        }
        self.instrument_waiting_files(ctx, t)?;
        if share && sharing_enabled() && ctx.code.patching.table.space.chunk_count() > 0 {
            // Sealed first: should sharing fail half-way, no trampoline goes there again.
            let space = &mut Arc::make_mut(&mut ctx.code.patching.table).space;
            let pages = space.used_pages();
            let spans = space.seal();
            share_chunks(ctx.p, t, canonical.rsp, &spans, &pages)?;
        }
        regs::set(tid, canonical)?;
        events::resume(tid, None)?;
        Ok(())
    }

    /// Instruments the files waiting for the first thread as the last execution that
    /// reached the same state did (`memo.rs`), else as usual, keeping what was done.
    fn instrument_waiting_files(&mut self, ctx: &mut Ctx<'_>, t: ThreadId) -> Result<()> {
        let maps = procfs::mappings(ctx.p.pid)?;
        let before = RecordingMemos::before(self, ctx, &maps);
        if let Some(b) = &before {
            if ctx.memos.replay(b, ctx.p, ctx.code, t)? {
                self.rec.pending.clear();
                return Ok(());
            }
        }
        let pending = std::mem::take(&mut self.rec.pending);
        ctx.p.mem.start_journal();
        let done = (pending.iter())
            .try_for_each(|(plan, bias)| self.instrument_accesses(ctx, t, plan, *bias));
        let writes = ctx.p.mem.take_journal();
        done?;
        if let Some(b) = before {
            let plans = pending.into_iter().map(|(plan, _)| plan).collect();
            ctx.memos.keep(b, writes, plans, ctx.code);
        }
        Ok(())
    }

    /// Maps the access log below 2 GiB; without room there, sites stay breakpoints.
    fn create_access_log(&mut self, ctx: &mut Ctx<'_>, t: ThreadId, r: &regs::Regs) -> Result<()> {
        let maps = procfs::mappings(ctx.p.pid)?;
        let size = LogLayout::new(0, LOG_RECORDS).map_or(0, |l| l.size());
        let free = free_space(ctx.program, &maps);
        let base = free.iter().rev().find_map(|f| {
            let top = f.end.min(patch::log_layout::ADDRESS_LIMIT);
            let base = top.checked_sub(size)? & !0xfff;
            (base >= f.start).then_some(base)
        });
        let Some(layout) = base.and_then(|b| LogLayout::new(b, LOG_RECORDS)) else {
            return Ok(());
        };
        let tid = ctx.p.threads[t].tid;
        let log = AccessLog::create(
            ctx.p.pid,
            tid,
            &ctx.p.mem,
            r.rsp,
            ctx.p.syscall_insn,
            layout,
        )
        .context("mapping the access log")?;
        ctx.code.patching.log = Some(Arc::new(log));
        Ok(())
    }

    /// Instruments the access sites and libc memory calls of one file.
    fn instrument_accesses(
        &mut self,
        ctx: &mut Ctx<'_>,
        t: ThreadId,
        plan: &Arc<ModulePlan>,
        bias: u64,
    ) -> Result<()> {
        let patch_on = ctx.code.patching.log.is_some();
        // Calls of memory functions whose ranges follow from their arguments are logged at
        // their hooks when patching is on; the others, and any hook that cannot be
        // patched, stop at a breakpoint (at PLT stubs; calls through the GOT are then not
        // hooked at all: a stop at each of Rust's memcpys costs too much).
        // A second run that takes the stacks of races stops at the logged calls of the
        // threads and epochs it wants, by arming the log (`RaceRecording::wants_stops`).
        let logged = |f: MemFn| patch_on && f.logged_at_entry();
        let mem_fns: HashMap<u64, MemFn> = (plan.mem_fns.iter())
            .map(|&(a, f)| (a + bias, f))
            .filter(|&(_, f)| !logged(f))
            .collect();
        let addrs: Vec<u64> = mem_fns.keys().copied().collect();
        ctx.code.add_breakpoints(&ctx.p.mem, &addrs, |a| {
            mem_fns.get(&a).map(|&f| BreakpointKind::MemFn(f))
        })?;
        let hooks: Vec<(u64, MemFn, bool)> = (plan.mem_fns.iter())
            .filter(|&&(_, f)| logged(f))
            .map(|&(a, f)| (a + bias, f, true))
            .chain(
                (plan.mem_fn_calls.iter())
                    .filter(|&&(_, f)| logged(f))
                    .map(|&(a, f)| (a + bias, f, false)),
            )
            .collect();
        // Allocators hooked at a PLT stub or a call through the GOT log their calls too
        // (frees at their entry, the others by a wrapper that sees the result): their
        // breakpoints, there since the start, come out first, and come back if the hook
        // cannot be patched.
        let allocators: Vec<(u64, Alloc)> = if patch_on {
            (plan.allocators.iter())
                .filter(|&&(a, k)| {
                    // With heap checks a free stops: the quarantine may skip it.
                    let stops = k == Alloc::Free && ctx.cfg.heap_checks;
                    k.logged().is_some() && !stops && plan.allocator_slots.binary_search(&a).is_ok()
                })
                .map(|&(a, k)| (a + bias, k))
                .filter(
                    |&(a, k)| matches!(ctx.code.kind(a), Some(BreakpointKind::Alloc(b)) if *b == k),
                )
                .collect()
        } else {
            Vec::new()
        };
        for &(a, _) in &allocators {
            ctx.code.forget_breakpoint(&ctx.p.mem, a)?;
        }
        let hooked_allocators: HashSet<u64> = allocators.iter().map(|&(a, _)| a).collect();
        // Every site: access instructions of the code under test, and the atomic
        // instructions of a system library (recorded as acquire and release).
        let mut candidates: Vec<(&Instruction, AccessSite)> = (plan.accesses.iter())
            .map(|(insn, info, atomic_source)| {
                let site = AccessSite {
                    insn: *insn,
                    size: info.size.max(1),
                    write: info.kind != AccessKind::Read,
                    atomic_source: atomic_source.any(),
                    atomic_by_line: *atomic_source == SourceAtomic::Line,
                    plain_mov: info.plain_mov,
                    rmw: false,
                    library_plain: false,
                    mem_fn: None,
                    alloc: None,
                };
                (insn, site)
            })
            .collect();
        candidates.extend(plan.library_atomics.iter().map(|insn| {
            let size = insn.memory_size().size().clamp(1, 64) as u8;
            let site = AccessSite {
                insn: *insn,
                size,
                write: true,
                atomic_source: false,
                atomic_by_line: false,
                plain_mov: false,
                rmw: true,
                library_plain: false,
                mem_fn: None,
                alloc: None,
            };
            (insn, site)
        }));
        candidates.extend(plan.library_plain.iter().map(|(insn, write)| {
            let size = insn.memory_size().size().clamp(1, 64) as u8;
            let site = AccessSite {
                insn: *insn,
                size,
                write: *write,
                atomic_source: false,
                atomic_by_line: false,
                plain_mov: true,
                rmw: false,
                library_plain: true,
                mem_fn: None,
                alloc: None,
            };
            (insn, site)
        }));
        candidates.retain(|(insn, _)| !hooked_allocators.contains(&(insn.ip() + bias)));
        if candidates.is_empty() && hooks.is_empty() && allocators.is_empty() {
            return Ok(());
        }
        candidates.sort_by_key(|(i, _)| i.ip());
        let maps = procfs::mappings(ctx.p.pid)?;
        let mut regions: Vec<Region> = Vec::new();
        for m in maps.iter().filter(|m| m.executable()) {
            let first = candidates.partition_point(|(i, _)| i.ip() + bias < m.start);
            let has_sites = candidates
                .get(first)
                .is_some_and(|(i, _)| i.ip() + bias < m.end);
            let has_hooks = hooks.iter().any(|&(a, _, _)| (m.start..m.end).contains(&a))
                || allocators
                    .iter()
                    .any(|&(a, _)| (m.start..m.end).contains(&a));
            if has_sites || has_hooks {
                let mut bytes = vec![0u8; (m.end - m.start) as usize];
                ctx.p
                    .mem
                    .read(m.start, &mut bytes)
                    .context("reading code to patch")?;
                let mut code = Code::new(m.start, bytes);
                for (at, original) in ctx.code.bps.originals() {
                    if (m.start..m.end).contains(&at) {
                        code.reserve_breakpoint(at, original);
                    }
                }
                regions.push(Region {
                    code,
                    requests: Vec::new(),
                    entries: Vec::new(),
                });
            }
        }
        let stops = ctx.stop_sites;
        let mut new_sites = Vec::new();
        let first_id = ctx.code.patching.sites.len();
        for (insn, template) in &candidates {
            let pc = insn.ip() + bias;
            let Some(Region { code, requests, .. }) =
                regions.iter_mut().find(|r| r.code.get(pc, 1).is_some())
            else {
                continue;
            };
            let Some(bytes) = code.get(pc, insn.len()).map(<[u8]>::to_vec) else {
                continue;
            };
            if ctx.code.has_breakpoint(pc) {
                // Another breakpoint of mcheck's is there (an allocator's entry): its
                // meaning wins, as it always has.
                continue;
            }
            let rt = Decoder::with_ip(64, &bytes, pc, DecoderOptions::NONE).decode();
            if rt.len() != insn.len() || rt.code() != insn.code() {
                continue;
            }
            let id = (first_id + new_sites.len()) as u32;
            new_sites.push(AccessSite {
                insn: rt,
                ..*template
            });
            let needs_stop = !patch_on
                || template.atomic_source
                || (!template.rmw && !template.library_plain && self.statically_atomic(&rt))
                || stops.contains(&pc);
            requests.push(SiteRequest {
                id,
                insn: rt,
                bytes,
                needs_stop,
            });
        }
        let all_hooks = (hooks.iter())
            .map(|&(pc, f, stub)| (pc, Hooked::MemFn(f), stub))
            .chain(
                allocators
                    .iter()
                    .map(|&(pc, k)| (pc, Hooked::Alloc(k), true)),
            );
        for (pc, hooked, stub) in all_hooks {
            let Some(region) = regions.iter_mut().find(|r| r.code.get(pc, 1).is_some()) else {
                hooked.fall_back(ctx.code, &ctx.p.mem, pc)?;
                continue;
            };
            if ctx.code.has_breakpoint(pc) {
                continue;
            }
            let measure = match hooked {
                Hooked::MemFn(f) => f.measure(),
                Hooked::Alloc(_) => None,
            };
            let Some(site) = entry_site(&region.code, pc, stub, measure) else {
                hooked.fall_back_in(ctx.code, &mut region.code, pc);
                continue;
            };
            let id = (first_id + new_sites.len()) as u32;
            let insn = Decoder::with_ip(
                64,
                region.code.get(pc, 15).unwrap_or(&[]),
                pc,
                DecoderOptions::NONE,
            )
            .decode();
            let (mem_fn, alloc) = match hooked {
                Hooked::MemFn(f) => (Some(f), None),
                Hooked::Alloc(k) => (None, Some(k)),
            };
            new_sites.push(AccessSite {
                insn,
                size: 0,
                write: false,
                atomic_source: false,
                atomic_by_line: false,
                plain_mov: false,
                rmw: false,
                library_plain: false,
                mem_fn,
                alloc,
            });
            let wrap = alloc.and_then(Alloc::logged) == Some(LoggedAlloc::Wrapped);
            region
                .entries
                .push((EntryRequest { id, site, wrap }, hooked, stub));
        }
        ctx.code.patching.add_sites(new_sites);
        let free = free_space(ctx.program, &maps);
        for mut region in regions {
            if region.requests.is_empty() && region.entries.is_empty() {
                continue;
            }
            self.patch_region(ctx, t, &mut region, &free, patch_on)?;
        }
        Ok(())
    }

    /// Plans and writes the patches of one region of code.
    fn patch_region(
        &mut self,
        ctx: &mut Ctx<'_>,
        t: ThreadId,
        region: &mut Region,
        free: &[std::ops::Range<u64>],
        patch_on: bool,
    ) -> Result<()> {
        let Region {
            code,
            requests,
            entries,
        } = region;
        let layout = ctx.code.patching.log.as_ref().map_or(
            LogLayout {
                base: 0,
                capacity: 1,
            },
            |l| *l.layout(),
        );
        let pristine = code.clone();
        let table = Arc::make_mut(&mut ctx.code.patching.table);
        if table.space.chunk_count() == 0 {
            table.space = CodeSpace::new(free.to_vec());
        } else {
            table.space.set_free(free.to_vec());
        }
        // Hooks first: a punned jump of an access site may read the bytes of a call through
        // the GOT right after it, which must then already be the hook's jump.
        let entry_requests: Vec<EntryRequest> = entries.iter().map(|e| e.0).collect();
        let mut hooked = if patch_on {
            patch::plan_entries(code, &entry_requests, &mut table.space, &layout)
        } else {
            Vec::new()
        };
        let mut planned = patch::plan(code, requests, &mut table.space, &layout);
        let by_address: HashMap<u64, &SiteRequest> =
            requests.iter().map(|r| (r.insn.ip(), r)).collect();
        // Copies to run out of line: of the sites left on breakpoints, and of the atomic
        // instructions and pauses under mcheck's breakpoints (passed without a single-step).
        let passed = ctx.code.passed_by_copy(&pristine);
        let table = Arc::make_mut(&mut ctx.code.patching.table);
        let mut out_of_line = if patch_on {
            let left: Vec<&SiteRequest> = (planned.refused.iter())
                .filter(|(_, _, why)| *why != Refusal::NotOriginal)
                .filter_map(|(at, _, _)| by_address.get(at).copied())
                .chain(&passed)
                .collect();
            patch::plan_out_of_line(left, &mut table.space, false)
        } else {
            Vec::new()
        };
        let chunks = table.space.take_new_chunks();
        if !map_chunks(ctx.p, &mut ctx.code.patching, t, &chunks)? {
            // A chunk could not be mapped after all: this region stays on breakpoints.
            *code = pristine;
            for r in requests.iter_mut() {
                r.needs_stop = true;
            }
            let table = Arc::make_mut(&mut ctx.code.patching.table);
            planned = patch::plan(code, requests, &mut table.space, &layout);
            out_of_line.clear();
            hooked.clear();
        }
        // A PLT stub whose hook was not patched stops at a breakpoint instead; a call
        // through the GOT is then left alone, unless it calls an allocator.
        let hooked_at: HashSet<u64> = hooked.iter().map(|p| p.at).collect();
        for (e, what, stub) in entries.iter() {
            let at = e.site.at;
            let kind = match *what {
                Hooked::MemFn(f) if *stub => BreakpointKind::MemFn(f),
                Hooked::MemFn(_) => continue,
                Hooked::Alloc(k) => BreakpointKind::Alloc(k),
            };
            if !hooked_at.contains(&at) {
                if let Some(&[original]) = code.get(at, 1) {
                    code.set(at, &[0xcc]);
                    ctx.code.bps.adopt(at, original);
                    ctx.code.kinds.insert(at, kind);
                }
            }
        }
        // Every jump must reach its trampoline in the final bytes (see `broken_jumps`).
        let broken = patch::broken_jumps(
            code,
            planned
                .patched
                .iter()
                .chain(&planned.evicted)
                .chain(&hooked),
        );
        debug_assert!(broken.is_empty(), "jumps planned wrong at {broken:x?}");
        if !broken.is_empty() {
            eprintln!(
                "mcheck: internal error: {} patched site(s) would jump astray ({:#x?}); they stay on breakpoints",
                broken.len(),
                broken
            );
            drop_broken_jumps(code, &mut planned, &mut hooked, &broken);
        }
        let ids: HashMap<u64, u32> = requests.iter().map(|r| (r.insn.ip(), r.id)).collect();
        // Trampolines first, then breakpoints of the sites left out, then the jumps.
        let mut pieces: Vec<(u64, &[u8])> = (planned.patched.iter())
            .chain(&planned.evicted)
            .chain(&hooked)
            .map(|p| &p.trampoline)
            .chain(&out_of_line)
            .map(|t| (t.meta.at, t.bytes.as_slice()))
            .collect();
        pieces.sort_by_key(|p| p.0);
        write_coalesced(&ctx.p.mem, &pieces).context("writing trampolines")?;
        let stats = &mut ctx.code.patching.stats;
        for (at, original, why) in &planned.refused {
            let reason = if !patch_on {
                "patching off"
            } else {
                why.name()
            };
            *stats.fallback.entry(reason).or_default() += 1;
            if *why == Refusal::NotOriginal {
                continue;
            }
            let id = ids.get(at).copied().unwrap_or(0);
            ctx.code.bps.adopt(*at, *original);
            ctx.code.kinds.insert(*at, BreakpointKind::Access(id));
        }
        for (at, bytes) in code.changed_pages() {
            ctx.p.mem.write(at, bytes).context("writing patched code")?;
        }
        stats.patched += planned.patched.len() as u64;
        stats.moved_neighbours += planned.evicted.len() as u64;
        stats.memory_calls_patched += hooked.len() as u64;
        let table = Arc::make_mut(&mut ctx.code.patching.table);
        for p in (planned.patched.into_iter())
            .chain(planned.evicted)
            .chain(hooked)
        {
            table.insert(p.at, p.site, p.trampoline.meta);
        }
        for t in out_of_line {
            table.insert_out_of_line(t.meta);
        }
        Ok(())
    }

    /// Whether the operand of `insn` is a fixed address known to hold an atomic (DWARF).
    fn statically_atomic(&self, insn: &Instruction) -> bool {
        fixed_operand(insn)
            .is_some_and(|fixed| self.atomic_ranges.iter().any(|r| r.contains(&fixed)))
    }

    /// At the start of an execution from a snapshot copy: the log is emptied, and sites
    /// this execution needs stops at get their breakpoints back.
    pub fn prepare_copy(&mut self, ctx: &mut Ctx<'_>) -> Result<()> {
        if let Some(log) = &ctx.code.patching.log {
            log.reset();
        }
        for &pc in ctx.stop_sites {
            if ctx.code.patching.table.get(pc).is_some() {
                ctx.code.unpatch_covering(&ctx.p.mem, pc..pc + 1)?;
            }
        }
        Ok(())
    }

    /// Moves `t`, stopped inside a trampoline, to its site (or past it). A thread that
    /// leaves an allocator's wrapper after the call, before the wrapper logged it, leaves
    /// the call for the tracer to record.
    pub fn leave_trampoline(
        &mut self,
        p: &mut Process,
        code: &CodeEdits,
        t: ThreadId,
    ) -> Result<Option<UnloggedCall>> {
        let mut unlogged = None;
        let tid = p.threads[t].tid;
        let mut r = regs::get(tid)?;
        if let Some(site) = code.patching.table.hop_to(r.rip) {
            // Between a site's short jump and the jump it lands on: nothing done yet.
            r.rip = site;
            self.move_out(p, t, r)?;
            return Ok(None);
        }
        let Some(meta) = code.patching.table.trampoline_at(r.rip).copied() else {
            return Ok(None);
        };
        // An out-of-line copy of a breakpoint's instruction (a fault in it) needs no log,
        // and there is none when no access site is patched.
        let exit = meta.exit_at(r.rip);
        let plain = Exit::BeforeInsn {
            restore_rax: false,
            restore_rcx: false,
            uncommit: false,
        };
        let log = match code.patching.log.clone() {
            Some(log) => log,
            None if exit == plain => {
                r.rip = meta.site;
                self.move_out(p, t, r)?;
                return Ok(None);
            }
            None => return Ok(None),
        };
        match exit {
            Exit::AfterInsn => r.rip = meta.site + meta.site_len as u64,
            Exit::BeforeInsn {
                restore_rax,
                restore_rcx,
                uncommit,
            } => {
                let (rax, rcx) = log.scratch();
                if restore_rax {
                    r.rax = rax;
                }
                if restore_rcx {
                    r.rcx = rcx;
                }
                if uncommit {
                    log.drop_last(1);
                }
                r.rip = meta.site;
            }
            Exit::AfterCall => r.rip = log.call_target(),
            Exit::BeforeEntry {
                restore_rax,
                uncommit,
                unpush,
            } => {
                if restore_rax {
                    r.rax = log.scratch().0;
                }
                log.drop_last(uncommit as u64);
                if unpush {
                    r.rsp += 8;
                }
                r.rip = meta.site;
            }
            Exit::BeforeWrappedCall { unpush } => {
                r.rsp += 8 * unpush as u64;
                r.rip = meta.site;
            }
            Exit::AfterWrappedCall {
                logged,
                args_popped,
            } => {
                if args_popped {
                    r.rip = p.mem.read_u64(r.rsp)?;
                    r.rsp += 8;
                } else {
                    // Stacked: the third, second and first arguments, then the caller.
                    let word = |k: u64| p.mem.read_u64(r.rsp + 8 * k);
                    let (a2, a1, a0, caller) = (word(0)?, word(1)?, word(2)?, word(3)?);
                    if !logged {
                        unlogged = code.patching.table.get(meta.site).map(|s| UnloggedCall {
                            site: s.id,
                            result: r.rax,
                            args: [a0, a1, a2],
                            caller,
                        });
                    }
                    r.rip = caller;
                    r.rsp += 32;
                }
            }
        }
        self.move_out(p, t, r)?;
        Ok(unlogged)
    }

    /// Gives `t`, moved out of a trampoline, its registers `r`, and counts the move.
    fn move_out(&mut self, p: &mut Process, t: ThreadId, r: regs::Regs) -> Result<()> {
        regs::set(p.threads[t].tid, r)?;
        p.threads[t].regs = r;
        self.moved_out += 1;
        Ok(())
    }
}

/// One executable mapping being instrumented: its code, the access sites to plan in it, and
/// the memory-function hooks (with the function, and whether the hook is at a PLT stub).
struct Region {
    code: Code,
    requests: Vec<SiteRequest>,
    entries: Vec<(EntryRequest, Hooked, bool)>,
}

/// What a hook at a function's entry records.
#[derive(Clone, Copy)]
enum Hooked {
    /// A modelled memory function's call.
    MemFn(MemFn),
    /// An allocator's call.
    Alloc(Alloc),
}

impl Hooked {
    /// A hook that will not be patched, outside the regions being patched: an
    /// allocator's goes back to its breakpoint (a memory function's was never taken out).
    fn fall_back(self, code: &mut CodeEdits, mem: &Memory, pc: u64) -> Result<()> {
        if let Hooked::Alloc(k) = self {
            code.add_breakpoints(mem, &[pc], |_| Some(BreakpointKind::Alloc(k)))?;
        }
        Ok(())
    }

    /// Likewise inside `region`, the copy of the code about to be written back (a
    /// breakpoint written to memory now would be overwritten by it).
    fn fall_back_in(self, code: &mut CodeEdits, region: &mut Code, pc: u64) {
        if let Hooked::Alloc(k) = self {
            if let Some(&[original]) = region.get(pc, 1) {
                region.set(pc, &[0xcc]);
                code.bps.adopt(pc, original);
                code.kinds.insert(pc, BreakpointKind::Alloc(k));
            }
        }
    }
}

/// Where the hook of a memory function at `pc` goes: at a PLT stub (`stub`), its
/// instructions up to its jump through the GOT slot (an `endbr64` first, in `.plt.sec`);
/// elsewhere, a `call` or `jmp` through the slot; `measure` for a string function. None
/// when the code there is not that.
fn entry_site(
    code: &Code,
    pc: u64,
    stub: bool,
    measure: Option<patch::Measure>,
) -> Option<EntrySite> {
    let left = (code.start + code.bytes.len() as u64).checked_sub(pc)?;
    let bytes = code.get(pc, left.min(16) as usize)?;
    let mut d = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE);
    let mut len = 0;
    for _ in 0..2 {
        let insn = d.decode();
        if insn.is_invalid() {
            return None;
        }
        len += insn.len();
        let through_slot = matches!(insn.mnemonic(), Mnemonic::Jmp | Mnemonic::Call)
            && insn.op_count() == 1
            && insn.op0_kind() == OpKind::Memory
            && insn.memory_base() == Register::RIP;
        if through_slot {
            return (len >= 5).then(|| EntrySite {
                at: pc,
                len: len as u8,
                got: insn.ip_rel_memory_address(),
                ret: (insn.mnemonic() == Mnemonic::Call).then(|| insn.next_ip()),
                measure,
            });
        }
        if !stub || insn.mnemonic() != Mnemonic::Endbr64 {
            return None;
        }
    }
    None
}

/// Writes `pieces` (sorted by address), merging pieces that touch into one write.
fn write_coalesced(mem: &Memory, pieces: &[(u64, &[u8])]) -> std::io::Result<()> {
    let mut i = 0;
    while i < pieces.len() {
        let start = pieces[i].0;
        let mut buf = pieces[i].1.to_vec();
        let mut j = i + 1;
        while j < pieces.len() && pieces[j].0 == start + buf.len() as u64 {
            buf.extend_from_slice(pieces[j].1);
            j += 1;
        }
        mem.write(start, &buf)?;
        i = j;
    }
    Ok(())
}

/// The address space free for trampolines now.
fn free_space(program: &std::path::Path, maps: &[procfs::Mapping]) -> Vec<std::ops::Range<u64>> {
    let mapped: Vec<_> = maps.iter().map(|m| m.start..m.end).collect();
    let heap = maps
        .iter()
        .find(|m| m.name == "[heap]")
        .map(|m| m.start)
        .or_else(|| {
            // No heap yet: it will start after the program's last mapping.
            let program = program.to_string_lossy();
            maps.iter()
                .filter(|m| m.name == program)
                .map(|m| m.end)
                .max()
        });
    let stack = maps.iter().find(|m| m.name == "[stack]").map(|m| m.start);
    free_ranges(&mapped, heap, stack)
}

/// Takes the plans at `broken` out of `planned` and `hooked`: each site gets its original
/// bytes back with a breakpoint on its first byte (an access site records from there, a
/// memory function's hook stops; an evicted neighbour just runs in place).
fn drop_broken_jumps(
    code: &mut Code,
    planned: &mut patch::Plan,
    hooked: &mut Vec<patch::Planned>,
    broken: &[u64],
) {
    let mut out = Vec::new();
    for list in [&mut planned.patched, &mut planned.evicted, hooked] {
        let (bad, good): (Vec<_>, Vec<_>) = list.drain(..).partition(|p| broken.contains(&p.at));
        *list = good;
        out.extend(bad);
    }
    for p in out {
        let original = p.site.original_bytes().to_vec();
        code.set(p.at, &original);
        if p.site.access {
            code.set(p.at, &[0xcc]);
            planned.refused.push((p.at, original[0], Refusal::NoRoom));
        }
    }
}

/// Maps trampoline chunks in the tracee (through `t`); false when one could not be.
fn map_chunks(p: &Process, patching: &mut Patching, t: ThreadId, chunks: &[u64]) -> Result<bool> {
    let mut ok = true;
    for &chunk in chunks {
        if !map_chunk(p, t, chunk)? {
            Arc::make_mut(&mut patching.table).space.chunk_failed(chunk);
            ok = false;
        }
    }
    Ok(ok)
}
