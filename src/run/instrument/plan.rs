//! What to instrument in one mapped ELF file: hooked functions, atomic and PAUSE
//! instructions, memory access instructions of the code under test, allocator entries, the
//! PLT stubs of the libc memory functions the program calls, Rust's panic entry, glibc's
//! errno slot, and the addresses known to hold atomics. Computed once per file (decoding is
//! the expensive part) and shared by every execution of a worker.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use iced_x86::Instruction;

use super::gomp::{gomp_hooks, is_gomp};
use super::hooks::{Hook, HOOKED_FUNCTIONS};
use super::scan_cache::{self, CodeScan, SourceAtomic};
use crate::binary::accesses::{memory_access_instructions, AccessKind, MemoryAccessInsn};
use crate::binary::atomic_vars::atomic_global_ranges;
use crate::binary::code_under_test::code_under_test_ranges;
use crate::binary::source_atomics::SourceAtomics;
use crate::binary::symbolize::{SourceFrame, Symbolizer};
use crate::binary::{
    allocator_functions, errno_tls_offset_source, got_calls, is_system_library, keep_within,
    plt_entries, spin_instructions, AllocFn, ElfFile, ErrnoTls,
};
use crate::run::process::decode_at;

/// libc functions whose effect on user memory is modelled as accesses of their ranges
/// (including I/O into and out of user buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemFn {
    /// memcpy/memmove/mempcpy(dst, src, n): writes dst[n], reads src[n].
    Copy,
    /// memset(dst, c, n): writes dst[n].
    Set,
    /// bzero(dst, n): writes dst[n].
    Zero,
    /// strcpy/stpcpy(dst, src): reads src up to its NUL, writes as much to dst.
    StrCopy,
    /// strncpy(dst, src, n): reads src up to its NUL or n, writes dst[n].
    StrNCopy,
    /// memcmp(a, b, n): reads a[n] and b[n].
    Compare,
    /// strlen(s): reads s up to its NUL.
    StrLen,
    /// write/pwrite64/send/sendto(fd, buf, n, ...): reads buf[n].
    WriteFrom,
    /// read/pread64/recv/recvfrom(fd, buf, n, ...): writes buf[returned count].
    ReadInto,
    /// fwrite(ptr, size, n, stream): reads ptr[size*n].
    StreamWrite,
    /// fread(ptr, size, n, stream): writes ptr[size*returned count].
    StreamRead,
}

impl MemFn {
    /// Whether a call can be recorded from a log entry made at its entry: the ranges it
    /// accesses follow from its arguments, or from the length of a string, which the code
    /// at the entry measures (not from the value it returns).
    pub fn logged_at_entry(self) -> bool {
        !matches!(self, MemFn::ReadInto | MemFn::StreamRead)
    }

    /// The string the code at its entry must measure, for a string function.
    pub fn measure(self) -> Option<crate::patch::Measure> {
        use crate::patch::Measure;
        match self {
            MemFn::StrLen => Some(Measure {
                second: false,
                bounded: false,
            }),
            MemFn::StrCopy => Some(Measure {
                second: true,
                bounded: false,
            }),
            MemFn::StrNCopy => Some(Measure {
                second: true,
                bounded: true,
            }),
            _ => None,
        }
    }
}

const MEM_FUNCTIONS: &[(&str, MemFn)] = &[
    ("memcpy", MemFn::Copy),
    ("memmove", MemFn::Copy),
    ("mempcpy", MemFn::Copy),
    ("__memcpy_chk", MemFn::Copy),
    ("__memmove_chk", MemFn::Copy),
    ("memset", MemFn::Set),
    ("__memset_chk", MemFn::Set),
    ("bzero", MemFn::Zero),
    ("strcpy", MemFn::StrCopy),
    ("stpcpy", MemFn::StrCopy),
    ("__strcpy_chk", MemFn::StrCopy),
    ("strncpy", MemFn::StrNCopy),
    ("memcmp", MemFn::Compare),
    ("bcmp", MemFn::Compare),
    ("strlen", MemFn::StrLen),
    ("write", MemFn::WriteFrom),
    ("pwrite64", MemFn::WriteFrom),
    ("send", MemFn::WriteFrom),
    ("sendto", MemFn::WriteFrom),
    ("read", MemFn::ReadInto),
    ("pread64", MemFn::ReadInto),
    ("recv", MemFn::ReadInto),
    ("recvfrom", MemFn::ReadInto),
    ("fwrite", MemFn::StreamWrite),
    ("fwrite_unlocked", MemFn::StreamWrite),
    ("fread", MemFn::StreamRead),
    ("fread_unlocked", MemFn::StreamRead),
];

/// Allocator entry points: libc's malloc family (Rust's allocator calls them) and C++'s
/// operator new/delete, hooked at the program's PLT stubs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alloc {
    /// malloc(size) → ptr.
    Malloc,
    /// calloc(n, size) → ptr.
    Calloc,
    /// realloc(ptr, size) → ptr.
    Realloc,
    /// reallocarray(ptr, n, size) → ptr.
    ReallocArray,
    /// free(ptr).
    Free,
    /// posix_memalign(&ptr, align, size) → 0.
    PosixMemalign,
    /// aligned_alloc/memalign(align, size) → ptr.
    Aligned,
    /// Rust's __rust_realloc(ptr, old_size, align, new_size) → ptr.
    RustRealloc,
    /// C++'s operator new(size) → ptr, which may throw.
    New,
}

/// How the hook of an allocator records a call without stopping the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoggedAlloc {
    /// At its entry, as a memory function's: a free needs only its argument.
    AtEntry,
    /// By a wrapper that makes the call and logs its result (`patch::wrapper`).
    Wrapped,
}

impl Alloc {
    /// The size a call with arguments `a` asks for, and where posix_memalign stores the
    /// pointer (else 0).
    pub fn request(self, a: &[u64]) -> (u64, u64) {
        let arg = |i: usize| a.get(i).copied().unwrap_or(0);
        match self {
            Alloc::Malloc | Alloc::New => (arg(0), 0),
            Alloc::Calloc => (arg(0).saturating_mul(arg(1)), 0),
            Alloc::Realloc => (arg(1), 0),
            Alloc::ReallocArray => (arg(1).saturating_mul(arg(2)), 0),
            Alloc::Free => (0, 0),
            Alloc::PosixMemalign => (arg(2), arg(0)),
            Alloc::Aligned => (arg(1), 0),
            Alloc::RustRealloc => (arg(3), 0),
        }
    }

    /// Whether a call frees the block its first argument points to.
    pub fn frees(self) -> bool {
        matches!(
            self,
            Alloc::Free | Alloc::Realloc | Alloc::ReallocArray | Alloc::RustRealloc
        )
    }

    /// How its hook may record a call without a stop: None when only a breakpoint will
    /// do (operator new may throw through its caller, posix_memalign's result is in
    /// memory, Rust's realloc takes a fourth argument).
    pub fn logged(self) -> Option<LoggedAlloc> {
        match self {
            Alloc::Free => Some(LoggedAlloc::AtEntry),
            Alloc::Malloc | Alloc::Calloc | Alloc::Realloc | Alloc::ReallocArray => {
                Some(LoggedAlloc::Wrapped)
            }
            Alloc::Aligned => Some(LoggedAlloc::Wrapped),
            Alloc::PosixMemalign | Alloc::RustRealloc | Alloc::New => None,
        }
    }
}

const ALLOCATORS: &[(&str, Alloc)] = &[
    ("malloc", Alloc::Malloc),
    ("calloc", Alloc::Calloc),
    ("realloc", Alloc::Realloc),
    ("reallocarray", Alloc::ReallocArray),
    ("free", Alloc::Free),
    ("cfree", Alloc::Free),
    ("posix_memalign", Alloc::PosixMemalign),
    ("aligned_alloc", Alloc::Aligned),
    ("memalign", Alloc::Aligned),
    // C++ operator new/delete (size or pointer in the first argument, like malloc/free).
    ("_Znwm", Alloc::New),
    ("_Znam", Alloc::New),
    ("_ZnwmRKSt9nothrow_t", Alloc::New),
    ("_ZnamRKSt9nothrow_t", Alloc::New),
    ("_ZnwmSt11align_val_t", Alloc::New),
    ("_ZnamSt11align_val_t", Alloc::New),
    ("_ZdlPv", Alloc::Free),
    ("_ZdaPv", Alloc::Free),
    ("_ZdlPvm", Alloc::Free),
    ("_ZdaPvm", Alloc::Free),
    ("_ZdlPvSt11align_val_t", Alloc::Free),
    ("_ZdaPvSt11align_val_t", Alloc::Free),
    ("_ZdlPvmSt11align_val_t", Alloc::Free),
    ("_ZdaPvmSt11align_val_t", Alloc::Free),
];

/// The role a mapped file plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// glibc's libc.so.
    Libc,
    /// The program itself.
    Program,
    /// A library the user's code lives in (outside the system directories, or asked for
    /// with --trace-lib).
    UnderTest,
    /// A system library (not instrumented apart from libc).
    System,
}

/// The instrumentation of one file, in file addresses (svma).
#[derive(Debug, Default)]
pub struct ModulePlan {
    /// Entries of hooked threading functions (libc's, a static program's, libgomp's).
    pub hooks: Vec<(u64, Hook)>,
    /// Atomic instructions, decoded at their svma.
    pub atomics: Vec<Instruction>,
    /// PAUSE instructions of the code under test (yield points).
    pub pauses: Vec<u64>,
    /// Memory-access instructions of the code under test, decoded at their svma, with
    /// whether their source says they are atomic loads or stores.
    pub accesses: Vec<(Instruction, MemoryAccessInsn, SourceAtomic)>,
    /// Allocator entries.
    pub allocators: Vec<(u64, Alloc)>,
    /// Those of `allocators` that are PLT stubs or calls through a GOT slot (not a
    /// function's own entry), sorted: their hooks can log calls without a stop.
    pub allocator_slots: Vec<u64>,
    /// PLT stubs of modelled libc memory functions.
    pub mem_fns: Vec<(u64, MemFn)>,
    /// Calls and jumps through the GOT slots of modelled libc memory functions (code
    /// without a PLT: Rust, `-fno-plt`): hooked only where their arguments can be logged
    /// without a stop.
    pub mem_fn_calls: Vec<(u64, MemFn)>,
    /// Rust's panic entry.
    pub panics: Vec<u64>,
    /// Where errno lives (libc).
    pub errno: Option<ErrnoTls>,
    /// Atomic instructions of a system library (race detection): not scheduling points,
    /// but recorded as acquire and release of their address.
    pub library_atomics: Vec<Instruction>,
    /// Plain (not LOCKed) loads and stores of a runtime library that synchronises through
    /// them ([`SYNC_RUNTIMES`]), each with whether it writes: not scheduling points, never
    /// racy themselves, but a load acquires its address and a store releases it.
    pub library_plain: Vec<(Instruction, bool)>,
    /// Address ranges known to hold atomics: DWARF atomic globals and the rip-relative
    /// operands of atomic instructions.
    pub atomic_ranges: Vec<Range<u64>>,
}

/// System libraries whose synchronisation is built on plain loads and stores as well as
/// atomic instructions (file name prefixes). libgomp's barriers publish a new generation
/// with a release store (a plain MOV on x86-64) and a waiter that finds it changed, by a
/// relaxed load in its spin or by a futex wait that returns at once, goes on with an
/// acquire load (another MOV): without those two, what threads did before an `omp barrier`
/// would look unordered with what the others do after it.
pub const SYNC_RUNTIMES: &[&str] = &["libgomp.so"];

/// Whether the file at `path` is one of the [`SYNC_RUNTIMES`].
pub fn is_sync_runtime(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| SYNC_RUNTIMES.iter().any(|p| n.starts_with(p)))
}

/// Cache of plans by file.
#[derive(Default)]
pub struct PlanCache {
    plans: HashMap<(PathBuf, bool), Arc<ModulePlan>>,
}

impl PlanCache {
    /// The plan for `path` in `role` (computed on first use).
    pub fn get(&mut self, path: &Path, role: Role, races: bool) -> Option<Arc<ModulePlan>> {
        let key = (path.to_path_buf(), races);
        if let Some(p) = self.plans.get(&key) {
            return Some(p.clone());
        }
        let elf = ElfFile::load(path).ok()?;
        let plan = Arc::new(make_plan(&elf, role, races));
        self.plans.insert(key, plan.clone());
        Some(plan)
    }
}

/// Whether the file at `path` is glibc's libc.
pub fn is_libc(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("libc.so") || n.starts_with("libc-"))
}

/// The role of a mapped file, given the program path and --trace-lib / --no-trace-lib.
pub fn role_of(path: &Path, program: &Path, trace: &[String], no_trace: &[String]) -> Role {
    let text = path.to_string_lossy();
    if path == program {
        return Role::Program;
    }
    if is_libc(path) {
        return Role::Libc;
    }
    if no_trace.iter().any(|p| text.contains(p.as_str())) {
        return Role::System;
    }
    if trace.iter().any(|p| text.contains(p.as_str())) || !is_system_library(path) {
        return Role::UnderTest;
    }
    Role::System
}

/// Whether a (demangled) function name is an atomic load/store accessor of Rust's core or of
/// C++'s std::atomic, which compile to plain MOVs on x86: an instruction inlined from one of
/// them is an atomic access whatever the address.
fn is_atomic_accessor(name: &str) -> bool {
    name.contains("core::sync::atomic::")
        || name.contains("std::__atomic_base<")
        || name.contains("std::atomic<")
        || name.contains("std::__atomic_impl")
        || name.contains("std::atomic_flag")
        || name.contains("std::__atomic_flag_base")
        || name.contains("std::atomic_ref<")
}

/// Whether the source line of `frame` (the innermost frame of a MOV) marks an access of
/// `kind` atomic: `#pragma omp atomic read`/`write`, `__atomic_load_n`... (see
/// [`SourceAtomics`]).
fn source_marks_atomic(
    sources: &mut SourceAtomics,
    frame: Option<&SourceFrame>,
    kind: AccessKind,
) -> bool {
    let Some((file, line)) = frame.and_then(|f| Some((f.file.as_deref()?, f.line?))) else {
        return false;
    };
    let marks = sources.marks(file, line);
    match kind {
        AccessKind::Read => marks.loads,
        AccessKind::Write => marks.stores,
        AccessKind::ReadWrite => false,
    }
}

fn make_plan(elf: &ElfFile, role: Role, races: bool) -> ModulePlan {
    let mut plan = ModulePlan::default();
    let static_program = role == Role::Program && elf.is_static();
    if role == Role::Libc || static_program {
        for (name, hook) in HOOKED_FUNCTIONS {
            for a in elf.function_addresses(name) {
                plan.hooks.push((a, *hook));
            }
        }
        plan.errno = errno_tls_offset_source(elf);
        if races && static_program {
            // No PLT to hook: the allocator functions themselves (libc's own calls included).
            for (name, kind) in ALLOCATORS {
                for a in elf.function_addresses(name) {
                    plan.allocators.push((a, *kind));
                }
            }
        }
    }
    if role == Role::Program && races {
        // Rust calls libc's allocator through the GOT (no PLT): hook its own entry points.
        for (f, a) in allocator_functions(elf) {
            let kind = match f {
                AllocFn::RustAlloc | AllocFn::RustAllocZeroed => Alloc::Malloc,
                AllocFn::RustRealloc => Alloc::RustRealloc,
                AllocFn::RustDealloc => Alloc::Free,
                _ => continue,
            };
            plan.allocators.push((a, kind));
        }
    }
    if role == Role::Program {
        plan.panics = elf
            .function_ranges()
            .into_iter()
            .filter(|(name, _)| name.ends_with("rust_begin_unwind"))
            .map(|(_, r)| r.start)
            .collect();
    }
    if role == Role::System && is_gomp(elf.path()) {
        // libgomp's critical sections and OpenMP locks: mutexes of the model.
        plan.hooks = gomp_hooks(elf);
    }
    if role == Role::System && races {
        // Synchronisation built on atomic instructions inside a system library (GLib,
        // libuv, libstdc++...): each one is recorded as an acquire and a release.
        let sync_runtime = is_sync_runtime(elf.path());
        let what = match sync_runtime {
            true => "library-sync-all-plain",
            false => "library-atomics",
        };
        let scan = scan_cache::load_or_scan(elf, what, || CodeScan {
            atomics: spin_instructions(elf).atomics,
            // Every plain access, not only MOVs: libgomp counts finished tasks with a
            // `sub` on `task_count` under its task lock and the barrier's last thread
            // reads it with a `cmp` (omp_task_each_ok).
            accesses: match sync_runtime {
                true => memory_access_instructions(elf, None)
                    .into_iter()
                    .filter(|m| !m.atomic && !m.frame)
                    .map(|m| (m, SourceAtomic::No))
                    .collect(),
                false => Vec::new(),
            },
            ..Default::default()
        });
        for s in scan.atomics {
            if let Some(bytes) = elf.instruction_bytes(s) {
                plan.library_atomics.push(decode_at(bytes, s));
            }
        }
        for (m, _) in scan.accesses {
            if let Some(bytes) = elf.instruction_bytes(m.svma) {
                let write = m.kind != AccessKind::Read;
                plan.library_plain.push((decode_at(bytes, m.svma), write));
            }
        }
    }
    if role == Role::Program || role == Role::UnderTest {
        let what = if races { "races" } else { "sync" };
        let scan = scan_cache::load_or_scan(elf, what, || scan_code_under_test(elf, races));
        plan.pauses = scan.pauses;
        for s in scan.atomics {
            if let Some(bytes) = elf.instruction_bytes(s) {
                let insn = decode_at(bytes, s);
                if insn.is_ip_rel_memory_operand() {
                    let ea = insn.ip_rel_memory_address();
                    plan.atomic_ranges.push(ea..ea + 8);
                }
                plan.atomics.push(insn);
            }
        }
        for (m, atomic_source) in scan.accesses {
            if let Some(bytes) = elf.instruction_bytes(m.svma) {
                plan.accesses
                    .push((decode_at(bytes, m.svma), m, atomic_source));
            }
        }
        plan.atomic_ranges
            .extend(scan.atomic_globals.into_iter().map(|(a, b)| a..b));
        if races && !(elf.is_static() && code_under_test_ranges(elf).is_none()) {
            // The program's own calls to libc memory functions and allocators, through its
            // PLT: glibc's internal calls never stop the program.
            // Calls through the GOT (no PLT: Rust, `-fno-plt`) to the allocator are hooked
            // too, unless Rust's allocator shims are (they call malloc and free); those to
            // the memory functions are listed apart (`mem_fn_calls`).
            let shims = !plan.allocators.is_empty();
            let wanted = |name: &str| {
                (!shims && ALLOCATORS.iter().any(|(n, _)| *n == name))
                    || MEM_FUNCTIONS.iter().any(|(n, _)| *n == name)
            };
            let mut got = got_calls(elf, wanted);
            // Toolchain code compiled in (Rust std, libtest) is not traced, its atomic loads
            // included: its calls of the memory functions are left out too, or a copy it
            // orders with those loads (std's channels) looks like a race.
            if let Some(own) = code_under_test_ranges(elf) {
                got.retain(|(name, at)| {
                    !MEM_FUNCTIONS.iter().any(|(n, _)| n == name)
                        || own.iter().any(|r| r.contains(at))
                });
            }
            let plt = plt_entries(elf);
            let stubs = plt.len();
            for (i, (name, addr)) in plt.into_iter().chain(got).enumerate() {
                if let Some((_, f)) = MEM_FUNCTIONS.iter().find(|(n, _)| *n == name) {
                    if i < stubs {
                        plan.mem_fns.push((addr, *f));
                    } else {
                        plan.mem_fn_calls.push((addr, *f));
                    }
                }
                if let Some((_, k)) = ALLOCATORS.iter().find(|(n, _)| *n == name) {
                    if !shims || plan.allocators.iter().all(|&(a, _)| a != addr) {
                        plan.allocators.push((addr, *k));
                        plan.allocator_slots.push(addr);
                    }
                }
            }
        }
    }
    plan.allocator_slots.sort_unstable();
    plan
}

/// Scans the code under test of `elf` (the costly part of its plan: decoding every
/// instruction, reading DWARF): atomic and PAUSE instructions, and with race detection the
/// memory-access sites and the atomic globals.
fn scan_code_under_test(elf: &ElfFile, races: bool) -> CodeScan {
    let mut scan = CodeScan::default();
    // The program's own code: DWARF compile units of the user's sources when there is
    // DWARF; else the whole text of a dynamic object (a static one would include libc).
    let own = code_under_test_ranges(elf);
    let dwarf = elf.dwarf_code_ranges();
    let atomic_scope = if elf.is_static() {
        Some(dwarf.as_slice())
    } else {
        None
    };
    if !(elf.is_static() && dwarf.is_empty()) {
        let mut found = spin_instructions(elf);
        keep_within(&mut found.atomics, atomic_scope);
        // PAUSE only in the user's own code: toolchain spin loops (Rust std's mutex
        // spins a hundred pauses before it waits) stay native, like libc's.
        let pause_scope = own.as_deref().or(atomic_scope);
        keep_within(&mut found.pauses, pause_scope);
        scan.pauses = found.pauses;
        scan.atomics = found.atomics;
    }
    if races && !(elf.is_static() && own.is_none()) {
        let mut symbolizer = Symbolizer::new();
        let mut sources = SourceAtomics::new();
        for m in memory_access_instructions(elf, own.as_deref()) {
            if m.atomic {
                continue;
            }
            let atomic_source = if m.plain_mov {
                let frames = symbolizer.frames(elf.path(), m.svma);
                let accessor = (frames.iter())
                    .filter_map(|f| f.function.as_deref())
                    .any(is_atomic_accessor);
                if accessor {
                    SourceAtomic::Accessor
                } else if source_marks_atomic(&mut sources, frames.first(), m.kind) {
                    SourceAtomic::Line
                } else {
                    SourceAtomic::No
                }
            } else {
                SourceAtomic::No
            };
            scan.accesses.push((m, atomic_source));
        }
        scan.atomic_globals = atomic_global_ranges(elf)
            .into_iter()
            .map(|r| (r.start, r.end))
            .collect();
    }
    scan
}
