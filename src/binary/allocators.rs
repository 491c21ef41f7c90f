//! Heap allocation and deallocation functions defined in an ELF file: the C allocator
//! (libc or a replacement such as jemalloc), C++ `operator new`/`delete`, and Rust's
//! global-allocator shims. The race detector hooks them to learn heap object lifetimes
//! (a freed and reallocated block is a new object, not a racy reuse).
//!
//! All argument registers below follow the System V x86-64 calling convention: arguments
//! in rdi, rsi, rdx, rcx; the result in rax.

use super::elf::ElfFile;
use super::symbolize::demangle;

/// An allocation or deallocation function, with where its arguments and result are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AllocFn {
    /// `malloc(size)`: size in rdi; the new block (or NULL) in rax.
    Malloc,
    /// `calloc(n, size)`: element count in rdi, element size in rsi; the zeroed block of
    /// `n * size` bytes (or NULL) in rax.
    Calloc,
    /// `realloc(ptr, size)`: old block (may be NULL) in rdi, new size in rsi; the new block
    /// (or NULL, the old block then stays valid) in rax. Size 0 with non-NULL ptr frees.
    Realloc,
    /// `free(ptr)`: block (may be NULL) in rdi.
    Free,
    /// `posix_memalign(memptr, align, size)`: `void **memptr` in rdi, alignment in rsi,
    /// size in rdx; 0 (success) or an error number in eax; on success the block is written
    /// to `*memptr`.
    PosixMemalign,
    /// `aligned_alloc(align, size)`: alignment in rdi, size in rsi; the block in rax.
    AlignedAlloc,
    /// `memalign(align, size)`: alignment in rdi, size in rsi; the block in rax.
    Memalign,
    /// `valloc(size)` and `pvalloc(size)`: size in rdi (page-aligned block; `pvalloc`
    /// rounds the size up to whole pages); the block in rax.
    Valloc,
    /// `operator new(size_t ...)` (`_Znwm`, and the `nothrow_t` and `align_val_t`
    /// variants): size in rdi (alignment in rsi for the aligned ones); the object in rax.
    New,
    /// `operator new[](size_t ...)` (`_Znam` and its variants): size in rdi; the array in
    /// rax.
    NewArray,
    /// `operator delete(void*)` (`_ZdlPv`, and the `nothrow_t` and `align_val_t`
    /// variants): pointer (may be null) in rdi.
    Delete,
    /// `operator delete[](void* ...)` (`_ZdaPv`, `_ZdaPvm` and the other variants): pointer
    /// in rdi (size in rsi for the sized ones).
    DeleteArray,
    /// Sized `operator delete(void*, size_t ...)` (`_ZdlPvm`, `_ZdlPvmSt11align_val_t`):
    /// pointer in rdi, size in rsi.
    DeleteSized,
    /// Rust `__rust_alloc(size, align)`: size in rdi, alignment in rsi; the block (or
    /// null) in rax.
    RustAlloc,
    /// Rust `__rust_alloc_zeroed(size, align)`: size in rdi, alignment in rsi; the zeroed
    /// block (or null) in rax.
    RustAllocZeroed,
    /// Rust `__rust_realloc(ptr, old_size, align, new_size)`: block in rdi, old size in
    /// rsi, alignment in rdx, new size in rcx; the new block (or null, the old one then
    /// stays valid) in rax.
    RustRealloc,
    /// Rust `__rust_dealloc(ptr, size, align)`: block in rdi, size in rsi, alignment in
    /// rdx.
    RustDealloc,
}

impl AllocFn {
    /// The allocator function a symbol name (as in the symbol table, unversioned) denotes.
    /// Rust shims are recognised with or without mangling (`__rust_alloc`,
    /// `_RNvCs..._7___rustc12___rust_alloc`, legacy `_ZN...12__rust_alloc17h...E`).
    pub fn for_symbol(name: &str) -> Option<AllocFn> {
        use AllocFn::*;
        let c_or_cpp = match name {
            "malloc" => Malloc,
            "calloc" => Calloc,
            "realloc" => Realloc,
            "free" => Free,
            "posix_memalign" => PosixMemalign,
            "aligned_alloc" => AlignedAlloc,
            "memalign" => Memalign,
            "valloc" | "pvalloc" => Valloc,
            "_Znwm"
            | "_ZnwmRKSt9nothrow_t"
            | "_ZnwmSt11align_val_t"
            | "_ZnwmSt11align_val_tRKSt9nothrow_t" => New,
            "_Znam"
            | "_ZnamRKSt9nothrow_t"
            | "_ZnamSt11align_val_t"
            | "_ZnamSt11align_val_tRKSt9nothrow_t" => NewArray,
            "_ZdlPv"
            | "_ZdlPvRKSt9nothrow_t"
            | "_ZdlPvSt11align_val_t"
            | "_ZdlPvSt11align_val_tRKSt9nothrow_t" => Delete,
            "_ZdlPvm" | "_ZdlPvmSt11align_val_t" => DeleteSized,
            "_ZdaPv"
            | "_ZdaPvRKSt9nothrow_t"
            | "_ZdaPvSt11align_val_t"
            | "_ZdaPvSt11align_val_tRKSt9nothrow_t"
            | "_ZdaPvm"
            | "_ZdaPvmSt11align_val_t" => DeleteArray,
            _ => return rust_shim(name),
        };
        Some(c_or_cpp)
    }
}

/// The Rust allocator shim `name` denotes, mangled or not.
fn rust_shim(name: &str) -> Option<AllocFn> {
    if !name.contains("__rust_") {
        return None;
    }
    let demangled;
    let last = if name.starts_with("_R") || name.starts_with("_ZN") {
        demangled = demangle(name);
        // Legacy names end in a `::h<16 hex digits>` hash segment.
        let mut segments = demangled.rsplit("::");
        let mut last = segments.next()?;
        if is_legacy_hash(last) {
            last = segments.next()?;
        }
        last
    } else {
        name
    };
    match last {
        "__rust_alloc" => Some(AllocFn::RustAlloc),
        "__rust_alloc_zeroed" => Some(AllocFn::RustAllocZeroed),
        "__rust_realloc" => Some(AllocFn::RustRealloc),
        "__rust_dealloc" => Some(AllocFn::RustDealloc),
        _ => None,
    }
}

/// True for the `h0123456789abcdef` hash segment of legacy Rust symbol names.
fn is_legacy_hash(segment: &str) -> bool {
    segment.len() == 17
        && segment.starts_with('h')
        && segment[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// The allocator functions defined in `elf` (`STT_FUNC` symbols with a non-zero value),
/// as (function, svma), sorted by svma then function. Aliases at one address with
/// different meanings (glibc's `memalign` and `aligned_alloc`) give one entry each.
pub fn allocator_functions(elf: &ElfFile) -> Vec<(AllocFn, u64)> {
    let mut out: Vec<(AllocFn, u64)> = elf
        .function_symbols()
        .into_iter()
        .filter(|&(_, svma)| svma != 0)
        .filter_map(|(name, svma)| Some((AllocFn::for_symbol(name)?, svma)))
        .collect();
    out.sort_unstable_by_key(|&(f, svma)| (svma, f));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::test_build::build;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    #[test]
    fn recognises_names() {
        assert_eq!(AllocFn::for_symbol("malloc"), Some(AllocFn::Malloc));
        assert_eq!(AllocFn::for_symbol("pvalloc"), Some(AllocFn::Valloc));
        assert_eq!(AllocFn::for_symbol("_ZdlPvm"), Some(AllocFn::DeleteSized));
        assert_eq!(AllocFn::for_symbol("_ZdaPvm"), Some(AllocFn::DeleteArray));
        assert_eq!(
            AllocFn::for_symbol("_ZnwmSt11align_val_t"),
            Some(AllocFn::New)
        );
        assert_eq!(
            AllocFn::for_symbol("__rust_alloc"),
            Some(AllocFn::RustAlloc)
        );
        assert_eq!(
            AllocFn::for_symbol("_RNvCsfLfy6EI15iL_7___rustc12___rust_alloc"),
            Some(AllocFn::RustAlloc)
        );
        assert_eq!(
            AllocFn::for_symbol("_RNvCsfLfy6EI15iL_7___rustc19___rust_alloc_zeroed"),
            Some(AllocFn::RustAllocZeroed)
        );
        assert_eq!(
            AllocFn::for_symbol("_ZN5alloc5alloc14__rust_dealloc17h0123456789abcdefE"),
            Some(AllocFn::RustDealloc)
        );
        for other in [
            "_RNvCsfLfy6EI15iL_7___rustc11___rdl_alloc",
            "_RNvCsfLfy6EI15iL_7___rustc26___rust_alloc_error_handler",
            "mallocx",
            "__libc_malloc",
        ] {
            assert_eq!(AllocFn::for_symbol(other), None, "{other}");
        }
    }

    #[test]
    fn libc_malloc_family() {
        let libc = ElfFile::load(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
        let found = allocator_functions(&libc);
        for f in [
            AllocFn::Malloc,
            AllocFn::Calloc,
            AllocFn::Realloc,
            AllocFn::Free,
            AllocFn::PosixMemalign,
            AllocFn::AlignedAlloc,
            AllocFn::Memalign,
            AllocFn::Valloc,
        ] {
            assert!(found.iter().any(|(g, _)| *g == f), "{f:?}: {found:?}");
        }
        let malloc = libc.function_addresses("malloc");
        assert!(found.contains(&(AllocFn::Malloc, malloc[0])));
        assert!(!found.iter().any(|(f, _)| *f == AllocFn::New));
    }

    /// libstdc++'s path, from g++ or the Debian default.
    fn libstdcxx() -> Option<PathBuf> {
        let from_gxx = Command::new("g++")
            .arg("-print-file-name=libstdc++.so.6")
            .output()
            .ok()
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
            .filter(|p| p.is_absolute() && p.exists());
        from_gxx.or_else(|| {
            Some(PathBuf::from("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")).filter(|p| p.exists())
        })
    }

    #[test]
    fn libstdcxx_operators() {
        let Some(path) = libstdcxx() else {
            eprintln!("libstdc++ not found; skipping");
            return;
        };
        let lib = ElfFile::load(&path).unwrap();
        let found = allocator_functions(&lib);
        for f in [
            AllocFn::New,
            AllocFn::NewArray,
            AllocFn::Delete,
            AllocFn::DeleteArray,
            AllocFn::DeleteSized,
        ] {
            assert!(found.iter().any(|(g, _)| *g == f), "{f:?}: {found:?}");
        }
        let new = lib.function_addresses("_Znwm");
        assert!(found.contains(&(AllocFn::New, new[0])));
        assert!(!found.iter().any(|(f, _)| *f == AllocFn::Malloc));
    }

    #[test]
    fn rust_shims() {
        let source = "fn main() { let mut v = vec![1u8; 10]; v.resize(100, 0); \
             let z = vec![0u64; 50]; println!(\"{} {}\", v.len(), z.len()); }\n";
        let Some(exe) = build(
            "allocators",
            "rustc",
            &["-C", "opt-level=1"],
            "r.rs",
            source,
        ) else {
            eprintln!("rustc not available; skipping");
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let found = allocator_functions(&elf);
        for f in [
            AllocFn::RustAlloc,
            AllocFn::RustAllocZeroed,
            AllocFn::RustRealloc,
            AllocFn::RustDealloc,
        ] {
            assert_eq!(
                found.iter().filter(|(g, _)| *g == f).count(),
                1,
                "{f:?}: {found:?}"
            );
        }
        // A dynamic Rust program takes malloc from libc.so.6, not from itself.
        assert!(!found.iter().any(|(f, _)| *f == AllocFn::Malloc));
        let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    }
}
