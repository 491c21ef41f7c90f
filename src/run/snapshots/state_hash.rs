//! A 64-bit hash of the program state at a scheduling point, for state caching
//! (`--state-cache`, `explore::state_cache`): every live thread's registers and the
//! process's writable memory, plus what the tracer holds for the program (the model's
//! synchronisation state, virtual time, pending operations, the fair scheduler's state),
//! which the caller passes as `tracer_state`.
//!
//! Equal states must hash equally whatever path led to them and whether the execution
//! started fresh or from a fork snapshot, so a few things that differ between equal states
//! are normalised:
//!
//! - kernel thread ids (a fresh process gets new ones): glibc's cached tid of each thread
//!   (`struct pthread`'s `tid`, at the thread pointer + 0x2d0, when it holds the tid) is
//!   replaced by the thread's logical id. Only those memory words, and no register:
//!   replacing every word that happens to equal a tid would also rewrite ordinary data
//!   (pids are small numbers, like sizes, counters and the flags), differently in every
//!   execution (`threads_hash`);
//! - dead stack: the bytes of each thread's stack mapping below its stack pointer (minus the
//!   128-byte red zone) are read as zeros;
//! - pages never touched (not present) and pages of zeros contribute nothing, so a page
//!   faulted in and left zero hashes like one never touched;
//! - the flags register keeps only its arithmetic and direction flags (the trap and resume
//!   flags change with single-stepping).
//!
//! The memory hash is a sum of one term per page, so it is computed incrementally
//! ([`MemoryHasher`]): the terms of the pages not written since the last hashed point are
//! kept, and only written pages are read again. Which pages were written comes from
//! `tracee::write_tracking` (userfaultfd write-protection; this kernel has no soft-dirty
//! bits). Stacks of live threads, whose dead part moves with the stack pointer, and pages
//! holding a cached tid are hashed whole at every point. Without write tracking (a kernel
//! before 6.7) every point hashes all memory.

use crate::detect::hash::splitmix64_finish as mix;
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use crate::run::process::{Process, StopPlace, TracedThread};
use crate::tracee::memory::Memory;
use crate::tracee::pagemap::{writable_regions, Pagemap, Region, PAGE};
use crate::tracee::write_tracking::WriteTracker;
use crate::tracee::Pid;

/// glibc 2.26+ (x86-64): `struct pthread`'s `tid`, relative to the thread pointer.
const GLIBC_TID_OFFSET: u64 = 0x2d0;

/// The red zone below the stack pointer that leaf functions may use (System V x86-64).
const RED_ZONE: u64 = 128;
/// Most pages read with one `pread`.
const RUN: usize = 64;
/// Arithmetic flags and DF: CF PF AF ZF SF OF DF.
const FLAGS: u64 = 0x0cd5;

/// Set to compare every incremental memory hash with a full one (a self-check for tests).
pub const VERIFY_ENV: &str = "MCHECK_VERIFY_STATE_HASH";
/// Set to hash all memory at every point (to measure what incremental hashing saves).
pub const FULL_ENV: &str = "MCHECK_FULL_STATE_HASH";
/// Set to print every state hash on stderr with its parts (tracer state, memory, each
/// thread's place and registers): two runs of one search must print the same lines.
pub const DEBUG_ENV: &str = "MCHECK_DEBUG_STATE_HASH";
/// Resident pages from which write tracking is worth setting up: below, reading and
/// hashing everything (a few dozen microseconds) costs less than the two injected syscalls
/// and the registrations.
const TRACK_FROM_PAGES: usize = 256;

/// What one execution keeps between hashed points to hash memory incrementally.
#[derive(Default)]
pub(in crate::run) struct MemoryHasher {
    tracker: Option<WriteTracker>,
    /// Write tracking could not be set up: every point hashes all memory.
    off: bool,
    /// Each tracked region's pages: whether present, and their terms.
    terms: PageTerms,
    /// Pages that hold or held a cached tid: hashed at every point.
    slot_pages: HashSet<u64>,
    /// Check every incremental hash against a full one ([`VERIFY_ENV`]).
    verify: bool,
    /// Never track writes ([`FULL_ENV`]).
    full_only: bool,
    /// Pages read and hashed anew, for the statistics.
    pub pages_hashed: u64,
    /// Present pages whose term was kept.
    pub pages_reused: u64,
}

/// Pages of a process's writable mappings, by (start, end): whether each is present, and
/// its hash term.
pub(in crate::run) type PageTerms = HashMap<(u64, u64), (Vec<bool>, Vec<u64>)>;

/// What a fork copy's hasher starts from: write tracking set up before anything wrote to
/// the copy, and the page terms of its template, which hold for every page not reported
/// written since.
pub(in crate::run) struct CopyTracking {
    tracker: WriteTracker,
    terms: Arc<PageTerms>,
}

/// A snapshot template's page terms, computed by its first copy: None when the program is
/// too small for write tracking to pay, or it could not be set up.
pub(in crate::run) type TemplateTerms = OnceCell<Option<Arc<PageTerms>>>;

/// Sets up write tracking in a fresh fork copy `copy` of a template, through its stopped
/// main thread (outside any syscall; `syscall_insn` is a `syscall` of the program), before
/// anything writes to it: every writable mapping is registered and protected. The
/// template's terms come from `template`, filled by reading this copy the first time.
/// None when tracking is off ([`FULL_ENV`]), does not pay or fails: the copy's hasher
/// then starts from nothing.
pub(in crate::run) fn track_copy(
    copy: Pid,
    syscall_insn: u64,
    template: &TemplateTerms,
) -> Option<CopyTracking> {
    if std::env::var_os(FULL_ENV).is_some() || matches!(template.get(), Some(None)) {
        return None;
    }
    let tracked = (|| -> Result<(WriteTracker, Vec<Region>)> {
        let regions = writable_regions(copy)?;
        let mut tracker = WriteTracker::attach(copy, copy, syscall_insn)?;
        for &r in &regions {
            if tracker.register(r).is_ok() {
                tracker.take_written(r)?;
            }
        }
        Ok((tracker, regions))
    })();
    let Ok((tracker, regions)) = tracked else {
        let _ = template.set(None);
        return None;
    };
    let terms = template.get_or_init(|| template_terms(copy, &regions).ok().flatten());
    terms.as_ref().map(|terms| CopyTracking {
        tracker,
        terms: terms.clone(),
    })
}

/// The page terms of process `pid`'s `regions` (no dead stack, no cached tids: a hasher
/// hashes live stacks and tid pages anew at every point); None below the size from which
/// tracking pays.
fn template_terms(pid: Pid, regions: &[Region]) -> Result<Option<Arc<PageTerms>>> {
    let map = Pagemap::open(pid)?;
    let mem = Memory::open(pid)?;
    let present: Vec<Vec<bool>> = (regions.iter())
        .map(|&r| map.present(r))
        .collect::<std::io::Result<_>>()?;
    if present.iter().flatten().filter(|&&x| x).count() < TRACK_FROM_PAGES {
        return Ok(None);
    }
    let mut terms = PageTerms::new();
    for (&region, present) in regions.iter().zip(present) {
        let mut t = vec![0u64; present.len()];
        hash_pages(&mem, region, &present, &[], &[], &mut t);
        terms.insert((region.start, region.end), (present, t));
    }
    Ok(Some(Arc::new(terms)))
}

impl MemoryHasher {
    /// A hasher for a new execution: from nothing, or from a fork copy's tracking.
    pub fn new(copy: Option<CopyTracking>) -> MemoryHasher {
        let (tracker, terms) = match copy {
            Some(c) => (Some(c.tracker), (*c.terms).clone()),
            None => (None, PageTerms::new()),
        };
        MemoryHasher {
            tracker,
            terms,
            verify: std::env::var_os(VERIFY_ENV).is_some(),
            full_only: std::env::var_os(FULL_ENV).is_some(),
            ..MemoryHasher::default()
        }
    }

    /// Sets up write tracking through a thread stopped at a breakpoint (injecting needs a
    /// thread outside any syscall); tried again at the next point when there is none.
    fn attach(&mut self, p: &Process, syscall_insn: u64) {
        if self.tracker.is_some() || self.off || syscall_insn == 0 {
            return;
        }
        let Some(th) = p
            .threads
            .iter()
            .find(|th| !th.gone && matches!(th.place, StopPlace::Breakpoint(_)))
        else {
            return;
        };
        match WriteTracker::attach(p.pid, th.tid, syscall_insn) {
            Ok(t) => self.tracker = Some(t),
            Err(_) => self.off = true,
        }
    }

    /// The memory hash of `p` (see [`memory_hash`]), reading only what changed.
    fn hash(&mut self, p: &Process, slots: &[(u64, u64)], syscall_insn: u64) -> Result<u64> {
        let regions = writable_regions(p.pid)?;
        let map = Pagemap::open(p.pid)?;
        let pages: Vec<(Vec<bool>, Vec<bool>)> = (regions.iter())
            .map(|&r| map.present_and_file(r))
            .collect::<std::io::Result<_>>()?;
        let resident: usize = pages.iter().flat_map(|(p, _)| p).filter(|&&x| x).count();
        if resident >= TRACK_FROM_PAGES && !self.full_only {
            self.attach(p, syscall_insn);
        }
        let dead = dead_stacks(p, &regions);
        self.slot_pages
            .extend(slots.iter().map(|&(a, _)| a / PAGE * PAGE));
        if let Some(t) = self.tracker.as_mut() {
            t.retain_within(&regions);
        }
        let mut terms = HashMap::new();
        let mut sum = 0u64;
        for (region, (present, file)) in regions.into_iter().zip(pages) {
            let pages = present.len();
            let stack = dead.iter().any(|&(lo, _)| lo == region.start);
            // None: the region is hashed whole (a live stack, not registrable, or remapped).
            let written = match self.tracker.as_mut() {
                Some(t) if !stack => (t.covers(region) || t.register(region).is_ok())
                    .then(|| t.take_written(region).map_err(|_| t.forget(region)).ok())
                    .flatten(),
                _ => None,
            };
            let old = self.terms.remove(&(region.start, region.end));
            let mut stale = vec![true; pages];
            let mut region_terms = vec![0u64; pages];
            if let (Some(written), Some((was_present, old))) = (&written, &old) {
                region_terms.copy_from_slice(old);
                // A page faulted in by a read (a file page) is not written, but it no longer
                // counts as zeros.
                for i in 0..pages {
                    stale[i] = present[i] != was_present[i];
                }
                for w in written {
                    let a = (w.start.max(region.start) - region.start) / PAGE;
                    let b = (w.end.min(region.end) - region.start) / PAGE;
                    stale[a as usize..b as usize].fill(true);
                }
                // A page of a file's page cache changes with the file (pwrite, a shared
                // mapping of it) or comes back after MADV_DONTNEED, all without a write
                // through this mapping: hashed at every point.
                for (stale, &f) in stale.iter_mut().zip(&file) {
                    *stale |= f;
                }
                for &sp in &self.slot_pages {
                    if (region.start..region.end).contains(&sp) {
                        stale[((sp - region.start) / PAGE) as usize] = true;
                    }
                }
            }
            for i in 0..pages {
                if !present[i] {
                    region_terms[i] = 0;
                    stale[i] = false;
                }
            }
            let hashed = stale.iter().filter(|&&s| s).count() as u64;
            let present_pages = present.iter().filter(|&&x| x).count() as u64;
            self.pages_hashed += hashed;
            self.pages_reused += present_pages - hashed;
            hash_pages(&p.mem, region, &stale, &dead, slots, &mut region_terms);
            sum = region_terms.iter().fold(sum, |s, &t| s.wrapping_add(t));
            if written.is_some() {
                terms.insert((region.start, region.end), (present, region_terms));
            }
        }
        self.terms = terms;
        if self.verify {
            let full = memory_hash(p, slots)?;
            if full != sum {
                bail!(
                    "the incremental memory hash ({sum:#x}) differs from the full one ({full:#x})"
                );
            }
        }
        Ok(sum)
    }
}

/// The hash of the state of `p` combined with `tracer_state`; memory through `hasher`.
pub(in crate::run) fn state_hash(
    p: &Process,
    tracer_state: u64,
    hasher: &mut MemoryHasher,
    syscall_insn: u64,
) -> Result<u64> {
    let h = threads_hash(mix(tracer_state), &p.threads);
    // glibc's cached tid of each live thread, by address. A thread created since the last
    // point may not have stopped yet, so its registers are not known: its thread pointer
    // is the one its clone was given. (The kernel wrote its tid there at the clone; taking
    // it from the registers alone left that tid raw in the hash until the new thread's
    // first stop was seen, which comes sooner or later with the machine's load, and the
    // count of distinct states changed from run to run.)
    let slots: Vec<(u64, u64)> = p
        .threads
        .iter()
        .enumerate()
        .filter(|(_, th)| !th.gone)
        .filter_map(|(t, th)| {
            let pointer = if th.regs.fs_base != 0 {
                th.regs.fs_base
            } else {
                th.handle
            };
            if pointer == 0 {
                return None;
            }
            let a = pointer.wrapping_add(GLIBC_TID_OFFSET);
            (p.mem.read_u32(a).ok()? == th.tid.as_raw() as u32)
                .then_some((a, 0x7ffe_0000 + t as u64))
        })
        .collect();
    let memory = hasher
        .hash(p, &slots, syscall_insn)
        .context("hashing the program's memory")?;
    if std::env::var_os(DEBUG_ENV).is_some() {
        let threads: Vec<String> = (p.threads.iter())
            .map(|th| {
                format!(
                    "{:?}/{:x}/{:x}/{:x}/{:x}/{}",
                    th.place, th.regs.rip, th.regs.rsp, th.regs.rax, th.regs.orig_rax, th.gone
                )
            })
            .collect();
        eprintln!(
            "HASH tracer={tracer_state:x} memory={memory:x} threads={}",
            threads.join(" ")
        );
    }
    Ok(mix(h ^ mix(memory)))
}

/// `h` folded with the registers of every live thread in `threads`, as they are: no value
/// is taken for a thread id. A register equal to a tid was once replaced by the thread's
/// logical id, but tids are small numbers (under 32,768 here, from 300 up after they wrap)
/// and registers hold small numbers all the time: r11 holds the flags, 0x246, after every
/// system call, and whenever a thread's tid was 582 that became its id in that execution
/// only. The counts of distinct states then changed from run to run under load. Without
/// the replacement the state-cache searches of nine fixtures count the same states.
fn threads_hash(mut h: u64, threads: &[TracedThread]) -> u64 {
    for (t, th) in threads.iter().enumerate() {
        if th.gone {
            continue;
        }
        let r = &th.regs;
        let place = match th.place {
            StopPlace::Breakpoint(a) => a,
            StopPlace::Syscall => 1 ^ r.orig_rax.wrapping_shl(8),
            StopPlace::Event => 2,
        };
        let words = [
            t as u64,
            place,
            r.rip,
            r.rsp,
            r.rbp,
            r.rax,
            r.rbx,
            r.rcx,
            r.rdx,
            r.rsi,
            r.rdi,
            r.r8,
            r.r9,
            r.r10,
            r.r11,
            r.r12,
            r.r13,
            r.r14,
            r.r15,
            r.fs_base,
            r.eflags & FLAGS,
        ];
        for w in words {
            h = fold(h, w);
        }
    }
    h
}

/// The sum over the present writable pages of a hash of (address, contents); `slots` are
/// (address, logical id) of the cached tids. Reads all of it.
fn memory_hash(p: &Process, slots: &[(u64, u64)]) -> Result<u64> {
    let regions = writable_regions(p.pid)?;
    let map = Pagemap::open(p.pid)?;
    let dead = dead_stacks(p, &regions);
    let mut sum = 0u64;
    for region in regions {
        let present = map.present(region)?;
        let mut terms = vec![0u64; present.len()];
        hash_pages(&p.mem, region, &present, &dead, slots, &mut terms);
        sum = terms.iter().fold(sum, |s, &t| s.wrapping_add(t));
    }
    Ok(sum)
}

/// Dead stack: [mapping start, rsp - red zone) of each live thread.
fn dead_stacks(p: &Process, regions: &[Region]) -> Vec<(u64, u64)> {
    p.threads
        .iter()
        .filter(|th| !th.gone && th.regs.rsp != 0)
        .filter_map(|th| {
            let sp = th.regs.rsp.saturating_sub(RED_ZONE);
            regions
                .iter()
                .find(|r| r.start <= th.regs.rsp && th.regs.rsp < r.end)
                .map(|r| (r.start, sp))
        })
        .collect()
}

/// Hashes the pages `i` of `region` with `which[i]` into `terms[i]`, reading runs of
/// consecutive pages at once.
fn hash_pages(
    mem: &Memory,
    region: Region,
    which: &[bool],
    dead: &[(u64, u64)],
    slots: &[(u64, u64)],
    terms: &mut [u64],
) {
    let mut buf = vec![0u8; RUN * PAGE as usize];
    let mut i = 0;
    while i < which.len() {
        if !which[i] {
            i += 1;
            continue;
        }
        let mut n = 1;
        while i + n < which.len() && which[i + n] && n < RUN {
            n += 1;
        }
        let start = region.start + i as u64 * PAGE;
        let bytes = &mut buf[..n * PAGE as usize];
        if mem.read(start, bytes).is_err() {
            // A page that cannot be read (a guard page made present) counts as zeros.
            bytes.fill(0);
        }
        for (j, page) in bytes.chunks_exact_mut(PAGE as usize).enumerate() {
            let addr = start + j as u64 * PAGE;
            terms[i + j] = page_hash(addr, page, dead, slots);
        }
        i += n;
    }
}

/// The hash of one page at `addr`, dead stack zeroed and the cached tids at `slots`
/// (address, logical id) replaced; 0 for a page of zeros.
fn page_hash(addr: u64, page: &mut [u8], dead: &[(u64, u64)], slots: &[(u64, u64)]) -> u64 {
    for &(lo, hi) in dead {
        let (a, b) = (lo.max(addr), hi.min(addr + PAGE));
        if a < b {
            page[(a - addr) as usize..(b - addr) as usize].fill(0);
        }
    }
    for &(slot, logical) in slots {
        if (addr..addr + PAGE - 3).contains(&slot) {
            let off = (slot - addr) as usize;
            page[off..off + 4].copy_from_slice(&(logical as u32).to_le_bytes());
        }
    }
    if page.iter().all(|&b| b == 0) {
        return 0;
    }
    let mut h = 0u64;
    for word in page.chunks_exact(8) {
        h = fold(h, u64::from_le_bytes(word.try_into().expect("8 bytes")));
    }
    mix(h ^ mix(addr))
}

/// One step of a fast multiplicative hash over 64-bit words.
fn fold(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_that_equal_a_tid_are_hashed_as_they_are() {
        let thread = |tid: i32, r11: u64| {
            let mut th = TracedThread::new(Pid::from_raw(tid), true, 0, 0);
            th.regs.r11 = r11;
            th
        };
        // The flags after a system call, in two executions where the thread's tid was 582
        // (0x246) and 9000: the same state.
        let (a, b) = (thread(582, 0x246), thread(9000, 0x246));
        assert_eq!(
            threads_hash(1, std::slice::from_ref(&a)),
            threads_hash(1, std::slice::from_ref(&b))
        );
        // A register that differs still counts.
        let c = thread(582, 0x202);
        assert_ne!(
            threads_hash(1, std::slice::from_ref(&a)),
            threads_hash(1, std::slice::from_ref(&c))
        );
    }

    #[test]
    fn zero_pages_dead_stack_and_tids_do_not_count() {
        let mut zero = vec![0u8; PAGE as usize];
        assert_eq!(page_hash(0x1000, &mut zero, &[], &[]), 0);
        // Garbage below the stack pointer is ignored.
        let mut garbage = vec![0u8; PAGE as usize];
        garbage[..16].fill(0xaa);
        assert_eq!(page_hash(0x1000, &mut garbage, &[(0x1000, 0x1010)], &[]), 0);
        // A cached tid is replaced by the logical id: two processes with different tids
        // agree; the same number elsewhere in the page is data and stays.
        let mut a = vec![0u8; PAGE as usize];
        a[8..12].copy_from_slice(&1234u32.to_le_bytes());
        a[64..68].copy_from_slice(&1234u32.to_le_bytes());
        let mut b = vec![0u8; PAGE as usize];
        b[8..12].copy_from_slice(&5678u32.to_le_bytes());
        b[64..68].copy_from_slice(&1234u32.to_le_bytes());
        assert_eq!(
            page_hash(0x1000, &mut a, &[], &[(0x1008, 0x7ffe_0001)]),
            page_hash(0x1000, &mut b, &[], &[(0x1008, 0x7ffe_0001)])
        );
        // Contents and place matter.
        let mut c = vec![0u8; PAGE as usize];
        c[0] = 1;
        let mut d = c.clone();
        assert_ne!(
            page_hash(0x1000, &mut c, &[], &[]),
            page_hash(0x2000, &mut d, &[], &[])
        );
    }
}
