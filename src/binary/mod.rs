//! Static knowledge about the checked program's binaries, with no ptrace involved.
//!
//! - [`input_check`]: validates the program the user asks to check.
//! - [`elf`]: parsed, cached ELF files: symbols, sections, segments, DWARF ranges.
//! - [`atomics`]: finds LOCK-prefixed and XCHG-with-memory instructions.
//! - [`symbolize`]: source locations (DWARF) and variable names for addresses.
//! - [`modules`]: the runtime module map parsed from `/proc/PID/maps`.
//! - [`unwind`]: stack unwinding with framehop.
//! - [`errno`]: where glibc keeps `errno` relative to the thread pointer.
//!
//! Addresses: an *svma* is an address as stated in the ELF file, an *avma* is the
//! runtime address in the traced process, and `bias = avma - svma`.

pub mod atomics;
pub mod elf;
mod elf_dwarf;
pub mod errno;
pub mod input_check;
pub mod modules;
pub mod symbolize;
pub mod unwind;

pub use atomics::{atomic_instruction_addresses, reads_time_stamp_counter};
pub use elf::{ElfError, ElfFile};
pub use errno::{errno_tls_offset_source, ErrnoTls};
pub use input_check::{check_program, resolve_program, BadInput, ProgramKind};
pub use modules::{is_system_library, MappedModule, ModuleMap};
pub use symbolize::{SourceFrame, Symbolizer};
pub use unwind::{lookup_address, StackUnwinder};
