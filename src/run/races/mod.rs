//! The executor's race recording part: the race detector of an execution and what it
//! found, fed with the accesses the executor sees (breakpoint hits on memory-access
//! instructions, the access log, modelled libc memory functions, allocator calls), turning
//! races into findings that name both accesses and the object raced on, and taking the
//! stacks a second run of a schedule asks for. What it reads of the rest of the execution
//! comes through [`Env`].

pub(super) mod atomic_addresses;
pub(super) mod happens_before;
mod heap_findings;
pub(super) mod repeat_filter;
pub(super) mod timeout_polls;

use self::happens_before::ATOMIC;
use crate::detect::heap::{FreeAction, FreeCheck, HeapChecks, QuarantineLimits};
use crate::detect::race::{Access, HeapBlock, Race, RaceDetector};
use crate::model::{in_space, Footprint, Space, ThreadId};
use crate::report::{Finding, FindingKind, ThreadReport};
use crate::run::instrument::code::CodeEdits;
use crate::run::instrument::plan::{Alloc, MemFn};
use crate::run::instrument::sites::{AccessSite, LoggedSite};
use crate::run::process::report::{finding, thread_name, Reporter};
use crate::run::process::stacks::{primary_location, Symbols};
use crate::run::process::Process;
use std::collections::HashSet;

use self::atomic_addresses::AtomicAddresses;
use self::repeat_filter::RepeatFilter;
use self::timeout_polls::TimeoutPollView;
use crate::tracee::memory::Memory;

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

/// What an execution's race recording reports at its end.
#[derive(Debug, Default)]
pub(super) struct RaceResults {
    /// The race findings.
    pub findings: Vec<Finding>,
    /// The earlier access of each.
    pub origins: Vec<RaceOrigin>,
    /// Stacks captured for the requests.
    pub captured_stacks: Vec<(AccessKey, Vec<crate::report::Frame>)>,
    /// Accesses traced.
    pub traced: u64,
    /// Atomic operations inside system libraries, and the library of the first.
    pub library_sync: (u64, Option<String>),
    /// Unverified races, and the first described.
    pub unverified_races: (u64, Option<String>),
    /// Accesses recorded at breakpoints.
    pub breakpoint_accesses: u64,
}

/// An access identified across runs of one schedule: thread, instruction and the thread's
/// epoch (its clock only moves at releases, so the same loop iteration's stack is found).
pub type AccessKey = (ThreadId, u64, u32);

/// The race recording of one execution.
#[derive(Debug, Clone, Default)]
pub(super) struct RaceRecording {
    /// The race detector (None with --no-races).
    detector: Option<RaceDetector>,
    /// Data races found so far.
    findings: Vec<Finding>,
    /// The earlier access of each race finding, by index in `findings`.
    origins: Vec<RaceOrigin>,
    /// Memory accesses traced in this execution.
    traced: u64,
    /// Accesses whose stack to capture, as (thread, pc, epoch) (earlier sides of races
    /// found by a previous run of the same schedule).
    stack_requests: Vec<AccessKey>,
    /// Stacks captured for `stack_requests`.
    captured_stacks: Vec<(AccessKey, Vec<crate::report::Frame>)>,
    /// Where the modelled memory calls of this execution were made from (return addresses).
    call_sites: std::collections::HashSet<u64>,
    /// Atomic operations inside system libraries while threads existed: synchronisation
    /// the search orders as it comes instead of exploring.
    library_sync: u64,
    /// The first of them.
    library_sync_site: Option<u64>,
    /// Races left unreported because neither access can be told from an atomic.
    unverified_races: u64,
    /// The first of them, described.
    unverified_race: Option<String>,
    /// Accesses recorded at breakpoints in this execution.
    breakpoint_accesses: u64,
    /// Heap error checks and the quarantine (None with --no-heap-checks).
    heap: Option<HeapChecks>,
    /// Call sites of the frees recorded as writes of their blocks in this execution.
    free_sites: HashSet<u64>,
    /// Heap blocks freed since the lock-order part last took them (`take_freed`).
    freed_blocks: Vec<(u64, u64)>,
    /// Instructions that read what a timeout set, found in this execution
    /// (`timeout_polls`).
    poll_pcs: std::collections::BTreeSet<u64>,
    /// The last atomic load of the program's code each thread made, by instruction: what a
    /// thread that spins without a scheduling point is likely waiting on (`last_atomic_load`).
    /// By thread number; 0 when none.
    last_atomic_load: Vec<u64>,
}

/// What race recording reads and touches of the rest of the execution.
pub(super) struct Env<'a> {
    /// The traced process (memory, threads).
    pub p: &'a Process,
    /// The program's code as mcheck changed it (the access-site table).
    pub code: &'a CodeEdits,
    /// Symbolization (the worker's).
    pub symbols: &'a mut Symbols,
    /// Addresses accessed by atomic instructions in some execution (the worker's).
    pub atomics: &'a mut AtomicAddresses,
    /// Accesses repeated within the stretch being drained (the worker's).
    pub repeats: &'a mut RepeatFilter,
    /// Address ranges known to hold atomics (from DWARF).
    pub atomic_ranges: &'a [std::ops::Range<u64>],
    /// Threads created so far.
    pub threads: usize,
    /// What the running step touched beyond its operation (partial-order reduction).
    pub segment: &'a mut Footprint,
    /// The address space of the process (the footprint's words are the model's).
    pub space: Space,
    /// What timeouts set and who reads it (`timeout_polls`).
    pub polls: TimeoutPollView<'a>,
}

impl Env<'_> {
    /// Stacks and thread reports of the process.
    fn reporter(&mut self) -> Reporter<'_> {
        Reporter {
            p: self.p,
            symbols: self.symbols,
        }
    }

    fn is_atomic_location(&self, ea: u64) -> bool {
        self.atomics.contains(ea) || self.atomic_ranges.iter().any(|r| r.contains(&ea))
    }

    /// Whether the access at `pc` is a plain load or store (MOV) in code without source
    /// lines: a relaxed atomic load or store of the source compiles to exactly that, and
    /// without DWARF nothing tells them apart. A race between two such accesses (CPython's
    /// `_Py_atomic_*_relaxed` on its eval-breaker flags, in a Debian python3 without debug
    /// information) is counted, not reported: a false report is worse than a missed one.
    fn atomicity_unknown(&mut self, pc: u64) -> bool {
        let plain = (self.code.sites().iter())
            .any(|s| s.insn.ip() == pc && s.plain_mov && !s.atomic_source);
        plain
            && self
                .symbols
                .frame_at(pc, false)
                .iter()
                .all(|f| f.line.is_none())
    }
}

impl RaceRecording {
    /// The recording of a new execution: detection on with `races`, with the stacks a
    /// previous run of the schedule asked for.
    pub fn new(races: bool, stack_requests: Vec<AccessKey>) -> RaceRecording {
        RaceRecording {
            detector: races.then(RaceDetector::new),
            stack_requests,
            ..RaceRecording::default()
        }
    }

    /// The same recording checking heap errors, with a quarantine of at most `blocks`
    /// blocks (`on` false: no heap checks).
    pub fn with_heap_checks(self, on: bool, blocks: usize) -> RaceRecording {
        let limits = QuarantineLimits {
            max_blocks: blocks,
            ..QuarantineLimits::DEFAULT
        };
        RaceRecording {
            heap: on.then(|| HeapChecks::new(limits)),
            ..self
        }
    }

    /// The recording of the memory of a process that begins within the execution with
    /// thread `main` (a forked child, or the new image of a process that exec'd): its
    /// threads' accesses race only with each other's.
    pub fn for_process(
        races: bool,
        stack_requests: Vec<AccessKey>,
        main: ThreadId,
    ) -> RaceRecording {
        RaceRecording {
            detector: races.then(|| RaceDetector::starting_with(main)),
            stack_requests,
            ..RaceRecording::default()
        }
    }

    /// Takes in what the recording of another process found: its race findings (after this
    /// one's, with their origins), the stacks it captured and its counts.
    pub fn absorb(&mut self, other: RaceRecording) {
        let base = self.findings.len();
        self.origins
            .extend(other.origins.into_iter().map(|o| RaceOrigin {
                index: o.index + base,
                ..o
            }));
        self.findings.extend(other.findings);
        self.captured_stacks.extend(other.captured_stacks);
        self.call_sites.extend(other.call_sites);
        self.free_sites.extend(other.free_sites);
        self.traced += other.traced;
        self.library_sync += other.library_sync;
        self.library_sync_site = self.library_sync_site.or(other.library_sync_site);
        self.unverified_races += other.unverified_races;
        self.unverified_race = self.unverified_race.take().or(other.unverified_race);
        self.breakpoint_accesses += other.breakpoint_accesses;
        self.poll_pcs.extend(other.poll_pcs);
    }

    /// What a snapshot keeps: the detector (`history`: with the access history, as a branch
    /// snapshot needs, or without, at the startup snapshot), the races found and the
    /// accesses traced; the rest is per execution.
    pub fn saved(&self, history: bool) -> RaceRecording {
        RaceRecording {
            detector: match history {
                true => self.detector.clone(),
                false => self.detector.as_ref().map(|d| d.without_access_history()),
            },
            findings: self.findings.clone(),
            origins: self.origins.clone(),
            traced: self.traced,
            heap: self.heap.clone(),
            ..RaceRecording::default()
        }
    }

    /// A copy's recording from a snapshot's, with this execution's stack requests.
    pub fn restored(saved: RaceRecording, stack_requests: Vec<AccessKey>) -> RaceRecording {
        RaceRecording {
            stack_requests,
            ..saved
        }
    }

    /// Whether races are detected.
    pub fn on(&self) -> bool {
        self.detector.is_some()
    }

    /// The detector, for the happens-before edges of the model's operations.
    pub fn detector(&mut self) -> Option<&mut RaceDetector> {
        self.detector.as_mut()
    }

    /// Addresses found racy so far.
    pub fn racy_addresses(&self) -> Vec<u64> {
        self.detector
            .as_ref()
            .map(|d| d.racy_addresses().iter().copied().collect())
            .unwrap_or_default()
    }

    /// The instruction of the last atomic load of the program's code thread `t` made: when
    /// `t` then spins without a scheduling point, most likely the load of its busy wait.
    pub fn last_atomic_load(&self, t: ThreadId) -> Option<u64> {
        self.last_atomic_load.get(t).copied().filter(|&pc| pc != 0)
    }

    /// Instructions found reading what a timeout set (`timeout_polls`).
    pub fn poll_pcs(&self) -> impl Iterator<Item = u64> + '_ {
        self.poll_pcs.iter().copied()
    }

    /// Instructions found in a race so far.
    pub fn racy_pcs(&self) -> Vec<u64> {
        self.detector
            .as_ref()
            .map(|d| {
                (d.races().iter())
                    .flat_map(|r| [r.earlier.pc, r.later.pc])
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Races found so far.
    pub fn found(&self) -> usize {
        self.findings.len()
    }

    /// The race finding number `i`.
    pub fn finding(&self, i: usize) -> Option<&Finding> {
        self.findings.get(i)
    }

    /// Counts one more access traced (from the log).
    pub fn count_traced(&mut self) {
        self.traced += 1;
    }

    /// Counts an access recorded at a breakpoint.
    pub fn count_breakpoint_access(&mut self) {
        self.breakpoint_accesses += 1;
    }

    /// The instructions whose stacks a second run wants: access sites, which stop at a
    /// breakpoint, and the return addresses of logged calls (see [`Self::wants_stops`]).
    pub fn requested_pcs(&self) -> impl Iterator<Item = u64> + '_ {
        self.stack_requests.iter().map(|r| r.1)
    }

    /// Whether thread `t`, in the epoch it is in now, still makes a logged call whose stack
    /// a second run of the schedule asked for (a requested pc that `is_site` does not
    /// claim: a call's return address): while it does, it stops at every logged access (the
    /// log is armed), so that the stack is taken at the call itself. Other threads and
    /// epochs run at full speed: a stop at every call of a hooked `memcmp` in the whole
    /// execution cost GNU sort 2.7 million stops. Requested sites stop at breakpoints
    /// instead: an epoch can hold millions of accesses (`bench_slices_racy`).
    pub fn wants_stops(&self, t: ThreadId, is_site: impl Fn(u64) -> bool) -> bool {
        if self.stack_requests.is_empty() {
            return false;
        }
        let Some(epoch) = self.detector.as_ref().map(|d| d.epoch_of(t)) else {
            return false;
        };
        (self.stack_requests.iter())
            .filter(|k| k.0 == t && k.2 == epoch && !is_site(k.1))
            .any(|k| !self.stack_taken(k))
    }

    /// Whether this is a second run of a schedule for stacks (see
    /// [`Self::wants_stops`]) and every stack it asked for is taken: the rest of the
    /// execution has nothing more to give it.
    pub fn asked_stacks_taken(&self) -> bool {
        !self.stack_requests.is_empty() && (self.stack_requests.iter()).all(|k| self.stack_taken(k))
    }

    /// Whether the stack of access `key` has been taken in this run.
    fn stack_taken(&self, key: &AccessKey) -> bool {
        self.captured_stacks.iter().any(|(k, _)| k == key)
    }

    /// Ends the execution's recording: what the outcome reports.
    pub fn finish(&mut self, modules: &crate::binary::ModuleMap) -> RaceResults {
        RaceResults {
            findings: std::mem::take(&mut self.findings),
            origins: std::mem::take(&mut self.origins),
            captured_stacks: std::mem::take(&mut self.captured_stacks),
            traced: self.traced,
            library_sync: (
                self.library_sync,
                self.library_sync_site.and_then(|pc| {
                    let m = modules.find(pc)?;
                    Some(m.path.file_name()?.to_string_lossy().into_owned())
                }),
            ),
            unverified_races: (self.unverified_races, self.unverified_race.clone()),
            breakpoint_accesses: self.breakpoint_accesses,
        }
    }

    /// A read-like call returned having written `n` bytes at `buf` (called from `site`).
    pub fn filled_buffer(&mut self, env: &mut Env<'_>, t: ThreadId, buf: u64, n: u64, site: u64) {
        let access = Access {
            thread: t,
            addr: buf,
            size: n.min(1 << 24),
            write: true,
            atomic: false,
            pc: site,
        };
        if let Some(f) = self.detect(env, access, Seen::InModelledCall) {
            self.findings.push(f);
        }
    }

    /// An allocator returned `block`.
    pub fn allocated(&mut self, block: HeapBlock) {
        if let Some(d) = self.detector.as_mut() {
            d.allocated(block);
        }
        if let Some(h) = self.heap.as_mut() {
            h.allocated(block);
        }
    }

    /// A call of allocator `kind` by `t`, logged by its hook (or found unlogged when the
    /// thread was moved out of the hook): `result` what it returned, `args` its
    /// arguments, `caller` its return address. What a breakpoint at its entry and at its
    /// return would record, in one go.
    pub fn allocator_call(
        &mut self,
        mem: &Memory,
        t: ThreadId,
        kind: Alloc,
        result: u64,
        args: [u64; 3],
        caller: u64,
    ) {
        if kind.frees() && args[0] != 0 {
            self.freed(mem, args[0]);
            if let Some(h) = self.heap.as_mut() {
                h.released(args[0]);
            }
        }
        if kind != Alloc::Free && result != 0 {
            let (size, _) = kind.request(&args);
            self.allocated(HeapBlock {
                start: result,
                size,
                thread: t,
                site: caller,
            });
        }
    }

    /// The block at `ptr` was freed. When it was not seen allocated, glibc's chunk header
    /// (read from `mem`) says how many bytes it had.
    pub fn freed(&mut self, mem: &Memory, ptr: u64) {
        if let Some(d) = self.detector.as_mut() {
            let hint = if d.knows_block(ptr) {
                0
            } else {
                glibc_chunk_size(mem, ptr)
            };
            let size = d.freed(ptr, hint).map_or(hint, |b| b.size);
            self.freed_blocks.push((ptr, size));
        }
    }

    /// The blocks freed since the last call, as (start, size): the locks in them end.
    pub fn take_freed(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.freed_blocks)
    }

    /// The call of memory function `f` with arguments `a` made from `site` (its return
    /// address), by `t`, `seen` at its hook or from the log: the ranges it reads and writes
    /// are accessed. (Reads into buffers are recorded when they return.) A string
    /// function's bytes are `measured` at its entry, or measured here, from the thread
    /// stopped at the call.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_mem_call(
        &mut self,
        env: &mut Env<'_>,
        t: ThreadId,
        f: MemFn,
        a: [u64; 3],
        measured: Option<u64>,
        site: u64,
        seen: Seen,
    ) {
        env.repeats.forget();
        self.call_sites.insert(site);
        let mem = &env.p.mem;
        let strlen = |_: &Self, s: u64, cap: u64| string_length(mem, s, cap);
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
            if let Some(f) = self.detect(env, access, seen) {
                self.findings.push(f);
            }
        }
    }

    /// Records the access `site` made at `ea` in thread `t`: at its breakpoint
    /// (`Seen::AtAccess`) or from the log (`Seen::Logged`).
    pub(super) fn record_access(
        &mut self,
        env: &mut Env<'_>,
        t: ThreadId,
        site: &AccessSite,
        ea: u64,
        seen: Seen,
    ) {
        if ea == 0 {
            return;
        }
        self.traced += 1;
        let pc = site.insn.ip();
        if site.rmw {
            env.repeats.forget();
            // A library's own lock or reference count: it orders what comes before and
            // after it, and the step depends on whatever else touches the word.
            let size = site.insn.memory_size().size() as u64;
            env.segment.touch_range(in_space(ea, env.space), size, true);
            if env.threads > 1 {
                self.library_sync += 1;
                self.library_sync_site.get_or_insert(pc);
            }
            self.record_atomic(env, t, ea, site.size as u64, pc);
            return;
        }
        if site.library_plain {
            self.record_library_plain(env, t, ea, site.size.into(), site.write);
            return;
        }
        if site.atomic_source && !site.atomic_by_line {
            env.atomics.insert(ea);
        }
        let logged = LoggedSite::of(site);
        self.record_program_access(env, t, &logged, site.atomic_source, ea, seen);
    }

    /// Records the access a plain site (`LoggedSite::plain`) made at `ea` in thread `t`,
    /// read from the access log: what [`RaceRecording::record_access`] does for it,
    /// without the full site.
    #[inline]
    pub(super) fn record_logged_plain(
        &mut self,
        env: &mut Env<'_>,
        t: ThreadId,
        site: &LoggedSite,
        ea: u64,
    ) {
        if ea == 0 {
            return;
        }
        self.traced += 1;
        self.record_program_access(env, t, site, false, ea, Seen::Logged);
    }

    /// Records an access of the code under test that is not a library's synchronisation:
    /// atomic by its source (`atomic_source`) or, for a MOV, by its address.
    #[inline]
    fn record_program_access(
        &mut self,
        env: &mut Env<'_>,
        t: ThreadId,
        site: &LoggedSite,
        atomic_source: bool,
        ea: u64,
        seen: Seen,
    ) {
        let pc = site.pc;
        let atomic = atomic_source || (site.plain_mov && env.is_atomic_location(ea));
        let write = site.write;
        let access = Access {
            thread: t,
            addr: ea,
            size: site.size as u64,
            write,
            atomic,
            pc,
        };
        if write {
            // Atomic, or a plain MOV that may be a relaxed atomic (code without lines).
            if env.polls.after_timeout(t)
                && (atomic || (site.plain_mov && env.atomicity_unknown(pc)))
            {
                env.polls.note_signal(ea);
            }
        } else if env.polls.is_signal(ea) {
            self.poll_pcs.insert(pc);
        }
        if atomic {
            if !write {
                if self.last_atomic_load.len() <= t {
                    self.last_atomic_load.resize(t + 1, 0);
                }
                self.last_atomic_load[t] = pc;
            }
            env.repeats.forget();
            // Partial-order reduction: the step touched this atomic location.
            env.segment
                .touch_range(in_space(ea, env.space), site.size.into(), write);
            // x86: a MOV load of an atomic is an acquire, a MOV store a release.
            if let Some(d) = self.detector.as_mut() {
                if !write {
                    d.acquire(t, (ATOMIC, ea));
                }
            }
        }
        if let Some(f) = self.detect(env, access, seen) {
            self.findings.push(f);
        }
        if atomic && write {
            if let Some(d) = self.detector.as_mut() {
                d.release(t, (ATOMIC, ea));
            }
        }
    }

    /// Records a plain load (`write` false) or store of `size` bytes at `ea` by `t` inside a runtime library
    /// that synchronises through them (libgomp's barrier generation): on x86-64 an acquire
    /// load and a release store are such MOVs, so the load acquires the address and the
    /// store releases it, as the hardware orders them. Not checked for races: the library's
    /// own bookkeeping is not the program's.
    fn record_library_plain(
        &mut self,
        env: &mut Env<'_>,
        t: ThreadId,
        ea: u64,
        size: u64,
        write: bool,
    ) {
        env.repeats.forget();
        // Partial-order reduction: another order of these steps may give other edges.
        env.segment.touch_range(ea, size, write);
        let Some(d) = self.detector.as_mut() else {
            return;
        };
        match write {
            true => d.release(t, (ATOMIC, ea)),
            false => d.acquire(t, (ATOMIC, ea)),
        }
    }

    /// Records an atomic read-modify-write of `size` bytes at `ea` by `t` at `pc`.
    pub(super) fn record_atomic(
        &mut self,
        env: &mut Env<'_>,
        t: ThreadId,
        ea: u64,
        size: u64,
        pc: u64,
    ) {
        env.repeats.forget();
        self.capture_if_requested(env, t, pc);
        env.atomics.insert(ea);
        // A read-modify-write can set a flag after a timeout; it is a point of its own.
        if env.polls.after_timeout(t) {
            env.polls.note_signal(ea);
        }
        let access = Access {
            thread: t,
            addr: ea,
            size: size.max(1),
            write: true,
            atomic: true,
            pc,
        };
        self.check_use_after_free(env, &access, Seen::AtAccess);
        let Some(d) = self.detector.as_mut() else {
            return;
        };
        d.acquire(t, (ATOMIC, ea));
        let race = d.access(access);
        d.release(t, (ATOMIC, ea));
        if let Some(race) = race {
            self.note_origin(&race, Seen::AtAccess);
            let f = self.race_finding(env, &race, Seen::AtAccess);
            self.findings.push(f);
        }
    }

    /// Feeds an access to the detector; a new race becomes a finding.
    fn detect(&mut self, env: &mut Env<'_>, access: Access, seen: Seen) -> Option<Finding> {
        self.capture_if_requested(env, access.thread, access.pc);
        self.check_use_after_free(env, &access, seen);
        let race = self.detector.as_mut()?.access(access)?;
        if env.atomicity_unknown(race.earlier.pc) && env.atomicity_unknown(race.later.pc) {
            // If these are atomics, they may be a release store and an acquire load (plain
            // MOVs both, on x86-64) that order the program's other accesses: from now on
            // this location's loads acquire and its stores release, and an execution that
            // reported races is run again knowing it (see the search's worker loop).
            env.atomics.insert(race.addr);
            env.atomics.insert(access.addr);
            env.repeats.forget();
            self.unverified_races += 1;
            if self.unverified_race.is_none() {
                let object = match self.raced_object(env, race.addr) {
                    o if o.starts_with("at ") => o,
                    o => format!("on {o}"),
                };
                let module = env
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
        Some(self.race_finding(env, &race, seen))
    }

    /// An access to a block in quarantine (freed, never handed back to the allocator) is a
    /// use after free: a finding, once per pair of access and free.
    #[inline]
    fn check_use_after_free(&mut self, env: &mut Env<'_>, access: &Access, seen: Seen) {
        let Some(h) = self.heap.as_mut() else {
            return;
        };
        let Some(f) = h.freed_containing(access.addr, access.size).copied() else {
            return;
        };
        if !h.first_report(access.pc, f.free_site) {
            return;
        }
        let epoch = self
            .detector
            .as_ref()
            .map_or(0, |d| d.epoch_of(access.thread));
        self.origins.push(RaceOrigin {
            index: self.findings.len(),
            earlier: (f.freed_by, f.free_site, f.free_epoch),
            later: seen.run_on().then_some((access.thread, access.pc, epoch)),
        });
        let finding = heap_findings::use_after_free(env, access, &f, seen.run_on(), seen.in_call());
        self.findings.push(finding);
    }

    /// A free of `args[0]` by `t`, stopped at the entry of the deallocator `deallocator`
    /// called from `site` with `args`. A heap error becomes a finding and the call must be
    /// skipped; an ordinary free writes the whole block (it conflicts with every unordered
    /// access to it), makes the block's bytes forget their history and may hold the block
    /// in quarantine. Returns what to do with the call.
    pub(super) fn free_at_stop(
        &mut self,
        env: &mut Env<'_>,
        t: ThreadId,
        args: [u64; 3],
        site: u64,
        deallocator: u64,
    ) -> FreeAction {
        let ptr = args[0];
        env.repeats.forget();
        self.capture_if_requested(env, t, site);
        let Some(h) = self.heap.as_ref() else {
            self.freed(&env.p.mem, ptr);
            return FreeAction::PassThrough;
        };
        let refused = match h.check_free(ptr) {
            FreeCheck::Fine => None,
            FreeCheck::Double(f) => {
                self.origins.push(RaceOrigin {
                    index: self.findings.len(),
                    earlier: (f.freed_by, f.free_site, f.free_epoch),
                    later: None,
                });
                Some(heap_findings::double_free(env, t, &f))
            }
            FreeCheck::IntoFreed(f) => {
                self.origins.push(RaceOrigin {
                    index: self.findings.len(),
                    earlier: (f.freed_by, f.free_site, f.free_epoch),
                    later: None,
                });
                Some(heap_findings::invalid_free(env, t, ptr, &f.block, Some(&f)))
            }
            FreeCheck::IntoLive(b) => Some(heap_findings::invalid_free(env, t, ptr, &b, None)),
        };
        if let Some(f) = refused {
            self.findings.push(f);
            return FreeAction::Refuse;
        }
        let epoch = self.detector.as_ref().map_or(0, |d| d.epoch_of(t));
        let known = (self.detector.as_ref()).and_then(|d| d.block_containing(ptr));
        if let Some(b) = known.filter(|b| b.start == ptr) {
            // Freeing writes the whole block, as far as ordering goes.
            self.free_sites.insert(site);
            self.call_sites.insert(site);
            let access = Access {
                thread: t,
                addr: b.start,
                size: b.size.clamp(1, 1 << 24),
                write: true,
                atomic: false,
                pc: site,
            };
            if let Some(f) = self.detect(env, access, Seen::InModelledCall) {
                self.findings.push(f);
            }
        }
        let hint = match (self.heap.as_ref()).and_then(|h| h.live_block_containing(ptr)) {
            Some(b) if b.start == ptr => 0,
            _ => glibc_chunk_size(&env.p.mem, ptr),
        };
        self.freed(&env.p.mem, ptr);
        match self.heap.as_mut() {
            Some(h) => h.free(ptr, hint, t, site, epoch, deallocator, args),
            None => FreeAction::PassThrough,
        }
    }

    /// Notes which accesses of `race` (the next race finding) a second run of the schedule
    /// must take the stacks of: the earlier one always, the later one when it was read
    /// from the log (its thread has moved on since).
    fn note_origin(&mut self, race: &Race, seen: Seen) {
        let key = |s: &crate::detect::race::Seen| (s.epoch.thread, s.pc, s.epoch.clock);
        self.origins.push(RaceOrigin {
            index: self.findings.len(),
            earlier: key(&race.earlier),
            later: seen.run_on().then(|| key(&race.later)),
        });
    }

    /// When a previous run of this schedule asked for the stack of this access (the earlier
    /// side of a race), captures it while the thread is stopped at it.
    #[inline]
    fn capture_if_requested(&mut self, env: &mut Env<'_>, t: ThreadId, pc: u64) {
        if !self.stack_requests.is_empty() {
            self.capture_requested(env, t, pc);
        }
    }

    #[inline(never)]
    fn capture_requested(&mut self, env: &mut Env<'_>, t: ThreadId, pc: u64) {
        let Some(epoch) = self.detector.as_ref().map(|d| d.epoch_of(t)) else {
            return;
        };
        let key = (t, pc, epoch);
        if self.stack_requests.contains(&key) && !self.stack_taken(&key) {
            let stack = env.reporter().thread_report(t, String::new()).stack;
            self.captured_stacks.push((key, stack));
        }
    }

    /// The finding for `race`, made when its later access was `seen`.
    fn race_finding(&mut self, env: &mut Env<'_>, race: &Race, seen: Seen) -> Finding {
        let modelled_call = seen.in_call();
        // A plain MOV counts as atomic only because of its address (a LOCK instruction or a
        // race in code without debug information touched it): it may be one, or not.
        let presumed = |s: &crate::detect::race::Seen| {
            s.atomic
                && !env.atomic_ranges.iter().any(|r| r.contains(&race.addr))
                && (env.code.sites().iter())
                    .any(|x| x.insn.ip() == s.pc && x.plain_mov && !x.atomic_source)
        };
        let (earlier_presumed, later_presumed) = (presumed(&race.earlier), presumed(&race.later));
        let frees = &self.free_sites;
        let what = |s: &crate::detect::race::Seen, presumed: bool| {
            if s.write && frees.contains(&s.pc) {
                return format!("free of {} byte(s)", s.size);
            }
            let rw = if s.write { "write" } else { "read" };
            let at = match (s.atomic, presumed) {
                (true, true) => "possibly atomic ",
                (true, false) => "atomic ",
                _ => "",
            };
            format!("{at}{rw} of {} byte(s)", s.size)
        };
        let object = self.raced_object(env, race.addr);
        let later_t = race.later.epoch.thread;
        let earlier_t = race.earlier.epoch.thread;
        let mut later = env.reporter().thread_report(
            later_t,
            format!("{} (this access)", what(&race.later, later_presumed)),
        );
        if seen.run_on() {
            // Its thread has moved on since: the access's own frame, until a second run
            // of the schedule takes the whole stack.
            later.stack = env.symbols.frame_at(race.later.pc, modelled_call);
        }
        if modelled_call && !self.free_sites.contains(&race.later.pc) {
            later.state.push_str(" inside a libc memory function");
        }
        // Each side by its own kind: the earlier access was a modelled call when its pc is
        // one of this execution's call sites (a return address).
        let earlier_in_call = self.call_sites.contains(&race.earlier.pc);
        let earlier_stack = env.symbols.frame_at(race.earlier.pc, earlier_in_call);
        let earlier_tid = env.p.threads.get(earlier_t).map_or(0, |x| x.tid.as_raw());
        let earlier = ThreadReport {
            id: earlier_t,
            tid: earlier_tid,
            name: thread_name(env.p.exe(), earlier_tid),
            process: env.p.process_ref(earlier_t),
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
        let mut f = finding(FindingKind::DataRace, message, vec![later, earlier]);
        f.locations = locations;
        if earlier_presumed || later_presumed {
            f.details.push(
                "a possibly atomic access is a plain load or store (a MOV) at an address that an atomic instruction, or a race between plain accesses in code without debug information, touched: mcheck treats it as a relaxed atomic that may order other accesses. A plain access racing with it is a data race whether it is atomic or not".into(),
            );
        }
        if let Some(b) = self
            .detector
            .as_ref()
            .and_then(|d| d.block_containing(race.addr))
        {
            let site = env.symbols.call_site(b.site).short();
            f.details.push(format!(
                "heap block of {} bytes at {:#x}, allocated by thread T{} at {site}",
                b.size, b.start, b.thread
            ));
        }
        f
    }

    /// Names the memory at `addr`: a global variable, a heap block, or an address.
    fn raced_object(&self, env: &mut Env<'_>, addr: u64) -> String {
        let name = self.memory_name(env.symbols, addr, false);
        name.strip_prefix("in ").map(str::to_string).unwrap_or(name)
    }

    /// Names the memory at `addr`: a global variable, or a heap block (with its allocation
    /// site when `with_site`), or its address.
    pub(super) fn memory_name(&self, symbols: &mut Symbols, addr: u64, with_site: bool) -> String {
        if let Some(b) = self
            .detector
            .as_ref()
            .and_then(|d| d.block_containing(addr))
        {
            let site = if with_site {
                let s = symbols.call_site(b.site).short();
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
        symbols.object_name(addr)
    }
}

/// The usable size of the glibc malloc chunk at `ptr`, from its header (for blocks
/// allocated where mcheck did not look).
fn glibc_chunk_size(mem: &Memory, ptr: u64) -> u64 {
    const IS_MMAPPED: u64 = 2;
    let header = mem.read_u64(ptr.wrapping_sub(8)).unwrap_or(0);
    let chunk = header & !7;
    let overhead = if header & IS_MMAPPED != 0 { 16 } else { 8 };
    chunk.saturating_sub(overhead).min(1 << 30)
}

fn string_length(mem: &Memory, s: u64, cap: u64) -> u64 {
    let mut buf = [0u8; 256];
    let mut n = 0;
    while n < cap {
        if mem.read(s + n, &mut buf).is_err() {
            // Near the end of a mapping: read byte by byte.
            match mem.read_u8(s + n) {
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
