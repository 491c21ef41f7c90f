//! Static knowledge about the checked program's binaries, with no ptrace involved.
//!
//! - [`input_check`]: validates the program the user asks to check.
//! - [`elf`]: parsed, cached ELF files: symbols, sections, segments, DWARF ranges.
//! - [`atomics`]: finds LOCK-prefixed and XCHG-with-memory instructions, and PAUSE.
//! - [`accesses`]: finds the instructions that access non-stack memory (race detection).
//! - [`code_under_test`]: the program's own code, without toolchain libraries (DWARF).
//! - [`atomic_vars`]: where atomic global/static variables live (DWARF types).
//! - [`allocators`]: malloc/free, operator new/delete and Rust allocator shims.
//! - [`source_atomics`]: source lines that mark a plain MOV atomic (`#pragma omp atomic`).
//! - [`symbolize`]: source locations (DWARF) and variable names for addresses.
//! - [`debug_files`]: separate debug information (`/usr/lib/debug`, by build-id and
//!   `.gnu_debuglink`) for stripped files.
//! - [`frame_cache`]: the source frames of system libraries' addresses, kept on disk.
//! - [`disk_cache`]: mcheck's cache directory (code scans, frames) and its budget.
//! - [`modules`]: the runtime module map parsed from `/proc/PID/maps`.
//! - [`unwind`]: stack unwinding with framehop.
//! - [`errno`]: where glibc keeps `errno` relative to the thread pointer.
//!
//! Addresses: an *svma* is an address as stated in the ELF file, an *avma* is the
//! runtime address in the traced process, and `bias = avma - svma`.

pub mod accesses;
pub mod allocators;
pub mod atomic_vars;
pub mod atomics;
pub mod code_under_test;
pub mod debug_files;
pub mod disk_cache;
pub mod elf;
mod elf_dwarf;
pub mod errno;
pub mod frame_cache;
pub mod input_check;
pub mod modules;
pub mod plt;
pub mod source_atomics;
mod sweep;
pub mod symbolize;
#[cfg(test)]
pub(crate) mod test_build;
pub mod unwind;
pub mod unwind_ranges;

pub use accesses::{memory_access_instructions, string_instructions, AccessKind, MemoryAccessInsn};
pub use allocators::{allocator_functions, AllocFn};
pub use atomic_vars::atomic_global_ranges;
pub use atomics::{
    atomic_instruction_addresses, keep_within, reads_time_stamp_counter, spin_instructions,
    SpinInstructions,
};
pub use code_under_test::code_under_test_ranges;
pub use elf::{ElfError, ElfFile};
pub use errno::{errno_tls_offset_source, ErrnoTls};
pub use input_check::{check_program, is_script, resolve_program, BadInput, ProgramKind};
pub use modules::{is_system_library, MappedModule, ModuleMap};
pub use plt::{got_calls, plt_entries};
pub use symbolize::{SourceFrame, Symbolizer};
pub use unwind::{lookup_address, StackUnwinder};
