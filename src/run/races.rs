//! The executor's side of data race detection: turning breakpoint hits on memory-access
//! instructions, modelled libc memory functions and allocator calls into detector events,
//! following allocator calls to their return (return breakpoints), and turning races into
//! findings that name both accesses and the object raced on.

use anyhow::Result;

use super::execution::{AccessKey, Execution, RunResult};
use super::happens_before::{ATOMIC, ONCE};
use super::patching::AccessSite;
use super::plan::{Alloc, MemFn};
use super::process::StopPlace;
use super::stacks::primary_location;
use crate::detect::race::{Access, HeapBlock, Race};
use crate::model::{Op, ThreadId};
use crate::report::{Finding, FindingKind, ThreadReport};
use crate::tracee::events;

use crate::tracee::regs::{self, Regs};

/// Something to do when a thread returns from a call (its return address is hit with the
/// stack pointer back where it was before the call).
#[derive(Debug, Clone, Copy)]
pub enum ReturnAction {
    /// An allocator returned: register the block.
    Allocated {
        /// Which allocator.
        kind: Alloc,
        /// Bytes asked for.
        size: u64,
        /// posix_memalign's out-pointer.
        out: u64,
        /// The call site.
        site: u64,
    },
    /// A read-like call returned: it wrote `unit` × its result bytes at `buf`.
    FilledBuffer {
        /// The buffer.
        buf: u64,
        /// Bytes per counted item (1 for read, the item size for fread).
        unit: u64,
        /// The call site.
        site: u64,
    },
    /// The initialiser's pthread_once returned: the control is done, and everything the
    /// initialiser did is released to the other callers.
    OnceDone {
        /// The once control.
        control: u64,
    },
}

/// Where the tracer was when an access reached the detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Its thread is stopped at the access (a breakpoint).
    AtAccess,
    /// Its thread is stopped at a modelled libc call (memcpy, read...).
    InModelledCall,
    /// It was read from the access log: its thread has run on since.
    Logged,
    /// A modelled libc call read from the access log: its pc is the call's return address,
    /// and its thread has run on since.
    LoggedCall,
}

impl Seen {
    /// Its thread has run on since the access (its stack is taken by a second run).
    fn run_on(self) -> bool {
        matches!(self, Seen::Logged | Seen::LoggedCall)
    }

    /// Its pc is a call's return address (a modelled libc call).
    fn in_call(self) -> bool {
        matches!(self, Seen::InModelledCall | Seen::LoggedCall)
    }
}

/// A race finding's accesses, to be found again by a second run of the same schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaceOrigin {
    /// Index of the finding in the execution's race findings.
    pub index: usize,
    /// The earlier access.
    pub earlier: AccessKey,
    /// The later access, when its stack was not at hand.
    pub later: Option<AccessKey>,
    /// One of the two is a call of a modelled memory function.
    pub in_call: bool,
}

/// A return breakpoint waiting for one thread.
#[derive(Debug, Clone, Copy)]
pub struct PendingReturn {
    /// The thread.
    pub thread: ThreadId,
    /// Its stack pointer after the return.
    pub rsp: u64,
    /// What to do.
    pub action: ReturnAction,
}

/// Longest string the modelled string functions read.
const MAX_STRING: u64 = 1 << 16;

impl Execution<'_> {
    /// Arms a return breakpoint for `t`, stopped at the entry of a function.
    pub(super) fn on_return_of_call(&mut self, t: ThreadId, action: ReturnAction) -> Result<()> {
        let r = self.p.threads[t].regs;
        let ret = self.p.mem.read_u64(r.rsp)?;
        self.p.insert_breakpoint(ret)?;
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
            if self.p.bp_kinds.contains_key(&addr) {
                return Ok(None);
            }
            // Someone else's return address: step over it.
            self.p.threads[t].place = StopPlace::Breakpoint(addr);
            return Ok(Some(self.step_and_resume(t)?));
        };
        let empty = self.take_return(t, addr, r)? == Some(true);
        if self.p.bp_kinds.contains_key(&addr) {
            return Ok(None);
        }
        if empty {
            self.p.remove_breakpoint(addr)?;
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
        if let ReturnAction::OnceDone { control } = action {
            self.model.once_done(control);
        }
        if let ReturnAction::FilledBuffer { buf, unit, site } = action {
            let n = (r.rax as i64).max(0) as u64 * unit;
            if n > 0 {
                let access = Access {
                    thread: t,
                    addr: buf,
                    size: n.min(1 << 24),
                    write: true,
                    atomic: false,
                    pc: site,
                };
                if let Some(f) = self.detect(access, Seen::InModelledCall) {
                    self.race_findings.push(f);
                }
            }
            return Ok(());
        }
        let Some(d) = self.races.as_mut() else {
            return Ok(());
        };
        match action {
            ReturnAction::OnceDone { control } => d.release(t, (ONCE, control)),
            ReturnAction::FilledBuffer { .. } => {}
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
                    d.allocated(HeapBlock {
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
            if let Some(target) = self.p.jump_target(addr) {
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
        if let Some(crate::tracee::Event::Signal(sig)) = self.p.step_over_breakpoint(t)? {
            if let Some(f) = self.signal_finding(t, sig) {
                return Ok(Some(RunResult::Found(Box::new(f))));
            }
            self.p.threads[t].pending_signal = Some(sig);
        }
        if self.debugging() && self.debug_watch(t)? == super::debugger::Resume::Kill {
            return Ok(Some(RunResult::CutShort));
        }
        let sig = self.p.threads[t].pending_signal.take();
        events::resume(self.p.threads[t].tid, sig)?;
        Ok(None)
    }

    /// Resumes `t`, stopped at a breakpoint, at `rip` (the out-of-line copy of its
    /// instruction) instead of stepping over the breakpoint.
    fn resume_at(&mut self, t: ThreadId, rip: u64) -> Result<Option<RunResult>> {
        let mut r = self.p.threads[t].regs;
        r.rip = rip;
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
        let Some((target, ret)) = self.p.call_through_slot(addr) else {
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
        let (size, out) = match kind {
            Alloc::Malloc => (a[0], 0),
            Alloc::Calloc => (a[0].saturating_mul(a[1]), 0),
            Alloc::Realloc => (a[1], 0),
            Alloc::ReallocArray => (a[1].saturating_mul(a[2]), 0),
            Alloc::Free => (0, 0),
            Alloc::PosixMemalign => (a[2], a[0]),
            Alloc::Aligned => (a[1], 0),
            Alloc::RustRealloc => (a[3], 0),
        };
        let frees = matches!(
            kind,
            Alloc::Free | Alloc::Realloc | Alloc::ReallocArray | Alloc::RustRealloc
        );
        if frees && a[0] != 0 {
            let hint = self.glibc_chunk_size(a[0]);
            if let Some(d) = self.races.as_mut() {
                d.freed(a[0], hint);
            }
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
            self.record_mem_call(t, f, [a[0], a[1], a[2]], None, site, Seen::InModelledCall);
        }
        self.step_and_resume(t)
    }

    /// The call of memory function `f` with arguments `a` made from `site` (its return
    /// address), by `t`, `seen` at its hook or from the log: the ranges it reads and writes
    /// are accessed. (Reads into buffers are recorded when they return.) A string
    /// function's bytes are `measured` at its entry, or measured here, from the thread
    /// stopped at the call.
    pub(super) fn record_mem_call(
        &mut self,
        t: ThreadId,
        f: MemFn,
        a: [u64; 3],
        measured: Option<u64>,
        site: u64,
        seen: Seen,
    ) {
        self.worker.repeats.forget();
        self.call_sites.insert(site);
        let strlen = |x: &Self, s: u64, cap: u64| x.string_length(s, cap);
        let mut accesses: Vec<(u64, u64, bool)> = Vec::new();
        match f {
            MemFn::Copy => accesses.extend([(a[1], a[2], false), (a[0], a[2], true)]),
            MemFn::Set => accesses.push((a[0], a[2], true)),
            MemFn::Zero => accesses.push((a[0], a[1], true)),
            MemFn::StrCopy => {
                let n = measured.unwrap_or_else(|| strlen(self, a[1], MAX_STRING) + 1);
                accesses.extend([(a[1], n, false), (a[0], n, true)]);
            }
            MemFn::StrNCopy => {
                let n = measured.unwrap_or_else(|| (strlen(self, a[1], a[2]) + 1).min(a[2]));
                accesses.extend([(a[1], n, false), (a[0], a[2], true)]);
            }
            MemFn::Compare => accesses.extend([(a[0], a[2], false), (a[1], a[2], false)]),
            MemFn::StrLen => {
                let n = measured.unwrap_or_else(|| strlen(self, a[0], MAX_STRING) + 1);
                accesses.push((a[0], n, false));
            }
            MemFn::WriteFrom => accesses.push((a[1], a[2], false)),
            MemFn::StreamWrite => accesses.push((a[0], a[1].saturating_mul(a[2]), false)),
            MemFn::ReadInto | MemFn::StreamRead => {}
        }
        for (addr, size, write) in accesses {
            if size == 0 || addr == 0 {
                continue;
            }
            let access = Access {
                thread: t,
                addr,
                size: size.min(1 << 24),
                write,
                atomic: false,
                pc: site,
            };
            if let Some(f) = self.detect(access, seen) {
                self.race_findings.push(f);
            }
        }
    }

    /// The usable size of the glibc malloc chunk at `ptr`, from its header (for blocks
    /// allocated where mcheck did not look).
    fn glibc_chunk_size(&self, ptr: u64) -> u64 {
        const IS_MMAPPED: u64 = 2;
        let header = self.p.mem.read_u64(ptr.wrapping_sub(8)).unwrap_or(0);
        let chunk = header & !7;
        let overhead = if header & IS_MMAPPED != 0 { 16 } else { 8 };
        chunk.saturating_sub(overhead).min(1 << 30)
    }

    fn string_length(&self, s: u64, cap: u64) -> u64 {
        let mut buf = [0u8; 256];
        let mut n = 0;
        while n < cap {
            if self.p.mem.read(s + n, &mut buf).is_err() {
                // Near the end of a mapping: read byte by byte.
                match self.p.mem.read_u8(s + n) {
                    Ok(0) | Err(_) => return n,
                    Ok(_) => {
                        n += 1;
                        continue;
                    }
                }
            }
            if let Some(i) = buf.iter().position(|&b| b == 0) {
                return (n + i as u64).min(cap);
            }
            n += buf.len() as u64;
        }
        cap
    }

    /// A memory-access site left on the breakpoint path (`id` in the site table). Returns
    /// a scheduling point when it must be one; else records the access and runs on.
    pub(super) fn on_access(
        &mut self,
        t: ThreadId,
        addr: u64,
        id: u32,
    ) -> Result<Option<RunResult>> {
        let Some(site) = self.p.patching.sites.get(id as usize).copied() else {
            return self.step_and_resume(t);
        };
        if let Some(f) = site.mem_fn {
            // A memory function's hook, on a breakpoint again (its patch was taken out).
            self.enter_called_function(t, addr)?;
            return self.on_mem_fn(t, f);
        }
        let ea = self.p.effective_address(t, &site.insn, 0);
        let statically_atomic =
            site.atomic_source || self.atomic_ranges.iter().any(|r| r.contains(&ea));
        if statically_atomic && self.creation_stretch.contains(&t) {
            // An atomic access can be ordered against another thread's without a data race:
            // the stretch around a thread creation ends here, as a scheduling point (see
            // `on_clone`). Plain accesses need not: a conflict with one is a data race, which
            // the detector reports whatever the order. Only what the binary says is atomic
            // counts, so that every execution of a tree search has the same points.
            self.p.threads[t].place = StopPlace::Breakpoint(addr);
            return self.point(
                t,
                Op::MemoryAccess {
                    addr: ea,
                    write: site.write,
                },
                addr,
            );
        }
        // Racy addresses are points only once threads exist: the single-threaded start must
        // stay the same in every execution (it is what a fork snapshot skips). Only at the
        // sites found racing (all of them on breakpoints): a site left on a breakpoint by a
        // snapshot template must not become a point, or the executions of one tree would
        // differ by where they started (a schedule of a file without sites: every site).
        if self.cfg.preempt_on_races
            && self.model.thread_count() > 1
            && self.worker.racy_addresses.contains(&ea)
            && (self.worker.racy_sites.is_empty() || self.worker.racy_sites.contains(&addr))
        {
            self.p.threads[t].place = StopPlace::Breakpoint(addr);
            return self.point(
                t,
                Op::MemoryAccess {
                    addr: ea,
                    write: site.write,
                },
                addr,
            );
        }
        self.breakpoint_accesses += 1;
        self.logged_since_resume.note_trapped(ea, site.write);
        let races_before = self.race_findings.len();
        self.record_access(t, &site, ea, Seen::AtAccess);
        if self.debugging() {
            if let Some(f) = self.race_findings.get(races_before).cloned() {
                self.p.threads[t].place = StopPlace::Breakpoint(addr);
                let ev = super::debugger::DebugEvent::Race {
                    thread: t,
                    finding: Box::new(f),
                };
                if self.debug_event(ev) == super::debugger::Resume::Kill {
                    return Ok(Some(RunResult::CutShort));
                }
            }
        }
        match self.p.patching.table.out_of_line(addr) {
            Some(copy) => self.resume_at(t, copy),
            None => self.step_and_resume(t),
        }
    }

    /// Records the access `site` made at `ea` in thread `t`: at its breakpoint
    /// (`Seen::AtAccess`) or from the log (`Seen::Logged`).
    pub(super) fn record_access(&mut self, t: ThreadId, site: &AccessSite, ea: u64, seen: Seen) {
        if ea == 0 {
            return;
        }
        self.traced_accesses += 1;
        let pc = site.insn.ip();
        if site.rmw {
            self.worker.repeats.forget();
            // A library's own lock or reference count: it orders what comes before and
            // after it, and the step depends on whatever else touches the word.
            self.segment.touch_word(ea, true);
            if self.model.thread_count() > 1 {
                self.library_sync += 1;
                self.library_sync_site.get_or_insert(pc);
            }
            self.record_atomic(t, ea, site.size as u64, pc);
            return;
        }
        let atomic = site.atomic_source || (site.plain_mov && self.is_atomic_location(ea));
        if site.atomic_source {
            self.worker.atomic_addresses.insert(ea);
        }
        let write = site.write;
        let access = Access {
            thread: t,
            addr: ea,
            size: site.size as u64,
            write,
            atomic,
            pc,
        };
        if atomic {
            self.worker.repeats.forget();
            // Partial-order reduction: the step touched this atomic location.
            self.segment.touch_word(ea, write);
            // x86: a MOV load of an atomic is an acquire, a MOV store a release.
            if let Some(d) = self.races.as_mut() {
                if !write {
                    d.acquire(t, (ATOMIC, ea));
                }
            }
        }
        if let Some(f) = self.detect(access, seen) {
            self.race_findings.push(f);
        }
        if atomic && write {
            if let Some(d) = self.races.as_mut() {
                d.release(t, (ATOMIC, ea));
            }
        }
    }

    /// Records an atomic read-modify-write of `size` bytes at `ea` by `t` at `pc`.
    pub(super) fn record_atomic(&mut self, t: ThreadId, ea: u64, size: u64, pc: u64) {
        self.worker.repeats.forget();
        self.capture_if_requested(t, pc);
        self.worker.atomic_addresses.insert(ea);
        let Some(d) = self.races.as_mut() else { return };
        d.acquire(t, (ATOMIC, ea));
        let access = Access {
            thread: t,
            addr: ea,
            size: size.max(1),
            write: true,
            atomic: true,
            pc,
        };
        let race = d.access(access);
        d.release(t, (ATOMIC, ea));
        if let Some(race) = race {
            self.note_origin(&race, Seen::AtAccess);
            let f = self.race_finding(&race, Seen::AtAccess);
            self.race_findings.push(f);
        }
    }

    fn is_atomic_location(&self, ea: u64) -> bool {
        self.worker.atomic_addresses.contains(&ea)
            || self.atomic_ranges.iter().any(|r| r.contains(&ea))
    }

    /// Feeds an access to the detector; a new race becomes a finding.
    fn detect(&mut self, access: Access, seen: Seen) -> Option<Finding> {
        self.capture_if_requested(access.thread, access.pc);
        let race = self.races.as_mut()?.access(access)?;
        if self.atomicity_unknown(race.earlier.pc) && self.atomicity_unknown(race.later.pc) {
            // If these are atomics, they may be a release store and an acquire load (plain
            // MOVs both, on x86-64) that order the program's other accesses: from now on
            // this location's loads acquire and its stores release, and an execution that
            // reported races is run again knowing it (see the search's worker loop).
            self.worker.atomic_addresses.insert(race.addr);
            self.worker.atomic_addresses.insert(access.addr);
            self.worker.repeats.forget();
            self.unverified_races += 1;
            if self.unverified_race.is_none() {
                let object = match self.raced_object(race.addr) {
                    o if o.starts_with("at ") => o,
                    o => format!("on {o}"),
                };
                let module = self
                    .worker
                    .symbols
                    .modules()
                    .find(race.later.pc)
                    .and_then(|m| Some(m.path.file_name()?.to_string_lossy().into_owned()))
                    .unwrap_or_else(|| "?".into());
                self.unverified_race = Some(format!("{object} in {module}"));
            }
            return None;
        }
        self.note_origin(&race, seen);
        Some(self.race_finding(&race, seen))
    }

    /// Whether the access at `pc` is a plain load or store (MOV) in code without source
    /// lines: a relaxed atomic load or store of the source compiles to exactly that, and
    /// without DWARF nothing tells them apart. A race between two such accesses (CPython's
    /// `_Py_atomic_*_relaxed` on its eval-breaker flags, in a Debian python3 without debug
    /// information) is counted, not reported: a false report is worse than a missed one.
    fn atomicity_unknown(&mut self, pc: u64) -> bool {
        let plain = self
            .p
            .patching
            .sites
            .iter()
            .any(|s| s.insn.ip() == pc && s.plain_mov && !s.atomic_source);
        plain
            && self
                .worker
                .symbols
                .frame_at(pc, false)
                .iter()
                .all(|f| f.line.is_none())
    }

    /// Notes which accesses of `race` (the next race finding) a second run of the schedule
    /// must take the stacks of: the earlier one always, the later one when it was read
    /// from the log (its thread has moved on since).
    fn note_origin(&mut self, race: &Race, seen: Seen) {
        let key = |s: &crate::detect::race::Seen| (s.epoch.thread, s.pc, s.epoch.clock);
        let in_call = seen.in_call() || self.call_sites.contains(&race.earlier.pc);
        self.race_origins.push(RaceOrigin {
            index: self.race_findings.len(),
            earlier: key(&race.earlier),
            later: seen.run_on().then(|| key(&race.later)),
            in_call,
        });
    }

    /// When a previous run of this schedule asked for the stack of this access (the earlier
    /// side of a race), captures it while the thread is stopped at it.
    fn capture_if_requested(&mut self, t: ThreadId, pc: u64) {
        if self.stack_requests.is_empty() {
            return;
        }
        let Some(epoch) = self.races.as_ref().map(|d| d.epoch_of(t)) else {
            return;
        };
        let key = (t, pc, epoch);
        if self.stack_requests.contains(&key)
            && !self.captured_stacks.iter().any(|(k, _)| *k == key)
        {
            let stack = self.thread_report(t, String::new()).stack;
            self.captured_stacks.push((key, stack));
        }
    }

    /// The finding for `race`, made when its later access was `seen`.
    fn race_finding(&mut self, race: &Race, seen: Seen) -> Finding {
        let modelled_call = seen.in_call();
        // A plain MOV counts as atomic only because of its address (a LOCK instruction or a
        // race in code without debug information touched it): it may be one, or not.
        let presumed = |s: &crate::detect::race::Seen| {
            s.atomic
                && !self.atomic_ranges.iter().any(|r| r.contains(&race.addr))
                && (self.p.patching.sites.iter())
                    .any(|x| x.insn.ip() == s.pc && x.plain_mov && !x.atomic_source)
        };
        let (earlier_presumed, later_presumed) = (presumed(&race.earlier), presumed(&race.later));
        let what = |s: &crate::detect::race::Seen, presumed: bool| {
            let rw = if s.write { "write" } else { "read" };
            let at = match (s.atomic, presumed) {
                (true, true) => "possibly atomic ",
                (true, false) => "atomic ",
                _ => "",
            };
            format!("{at}{rw} of {} byte(s)", s.size)
        };
        let object = self.raced_object(race.addr);
        let later_t = race.later.epoch.thread;
        let earlier_t = race.earlier.epoch.thread;
        let mut later = self.thread_report(
            later_t,
            format!("{} (this access)", what(&race.later, later_presumed)),
        );
        if seen.run_on() {
            // Its thread has moved on since: the access's own frame, until a second run
            // of the schedule takes the whole stack.
            later.stack = self.worker.symbols.frame_at(race.later.pc, modelled_call);
        }
        if modelled_call {
            later.state.push_str(" inside a libc memory function");
        }
        // Each side by its own kind: the earlier access was a modelled call when its pc is
        // one of this execution's call sites (a return address).
        let earlier_in_call = self.call_sites.contains(&race.earlier.pc);
        let earlier_stack = self
            .worker
            .symbols
            .frame_at(race.earlier.pc, earlier_in_call);
        let earlier_tid = self.p.threads.get(earlier_t).map_or(0, |x| x.tid.as_raw());
        let earlier = ThreadReport {
            id: earlier_t,
            tid: earlier_tid,
            name: self.thread_name(earlier_tid),
            state: format!(
                "{} (the earlier access)",
                what(&race.earlier, earlier_presumed)
            ),
            stack: earlier_stack,
        };
        let loc = |r: &ThreadReport| {
            primary_location(&r.stack)
                .map(|f| f.short())
                .unwrap_or_else(|| "??".into())
        };
        // A named object reads "on `x`"; an unnamed address "at 0x...".
        let on = if object.starts_with("at ") {
            object.clone()
        } else {
            format!("on {object}")
        };
        let message = format!(
            "data race {on}: {} by thread T{later_t} at {} and {} by thread T{earlier_t} at {} are not ordered by any synchronisation",
            what(&race.later, later_presumed),
            loc(&later),
            what(&race.earlier, earlier_presumed),
            loc(&earlier)
        );
        let mut locations: Vec<_> = [&later, &earlier]
            .iter()
            .filter_map(|r| primary_location(&r.stack))
            .collect();
        // One source line once, whichever instruction of it each side names.
        locations.dedup_by(|a, b| a.file.is_some() && (&a.file, a.line) == (&b.file, b.line));
        let mut f = self.finding(FindingKind::DataRace, message, vec![later, earlier]);
        f.locations = locations;
        if earlier_presumed || later_presumed {
            f.details.push(
                "a possibly atomic access is a plain load or store (a MOV) at an address that an atomic instruction, or a race between plain accesses in code without debug information, touched: mcheck treats it as a relaxed atomic that may order other accesses. A plain access racing with it is a data race whether it is atomic or not".into(),
            );
        }
        if let Some(b) = self
            .races
            .as_ref()
            .and_then(|d| d.block_containing(race.addr))
        {
            let site = self.worker.symbols.call_site(b.site).short();
            f.details.push(format!(
                "heap block of {} bytes at {:#x}, allocated by thread T{} at {site}",
                b.size, b.start, b.thread
            ));
        }
        f
    }

    /// Names the memory at `addr`: a global variable, a heap block, or an address.
    fn raced_object(&mut self, addr: u64) -> String {
        let name = self.memory_name(addr, false);
        name.strip_prefix("in ").map(str::to_string).unwrap_or(name)
    }

    /// Names the memory at `addr`: a global variable, or a heap block (with its allocation
    /// site when `with_site`), or its address.
    pub(super) fn memory_name(&mut self, addr: u64, with_site: bool) -> String {
        if let Some(b) = self.races.as_ref().and_then(|d| d.block_containing(addr)) {
            let site = if with_site {
                let s = self.worker.symbols.call_site(b.site).short();
                format!(", allocated by T{} at {s}", b.thread)
            } else {
                String::new()
            };
            return format!(
                "in heap block {:#x}+{} ({} bytes{site})",
                b.start,
                addr - b.start,
                b.size
            );
        }
        self.worker.symbols.object_name(addr)
    }
}
