//! Which code of a binary is the program's own, as opposed to toolchain libraries linked
//! into it (Rust's std/core/alloc and their vendored dependencies, glibc and libgcc bits of
//! static binaries, assembly stubs), told apart by the DWARF compile units' attributes.

use std::ops::Range;

use gimli::{AttributeValue, EndianSlice, LittleEndian};

use super::elf::ElfFile;
use super::elf_dwarf::{load_dwarf, merge, Dwarf};

/// The svma ranges (sorted, merged) of the program's own code in `elf`.
///
/// These are the ranges of the DWARF compile units that do not belong to the toolchain
/// (see [`is_toolchain_unit`]). When every unit with code is a toolchain unit (a Rust
/// program built without `-g` still carries std's line tables), the executable sections
/// minus the toolchain units' ranges. `None` when the file has no (usable) DWARF: the
/// caller then falls back to the whole text.
pub fn code_under_test_ranges(elf: &ElfFile) -> Option<Vec<Range<u64>>> {
    let dwarf = load_dwarf(elf)?;
    let mut own = Vec::new();
    let mut toolchain = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let text = |v: Option<EndianSlice<'_, LittleEndian>>| {
            v.map(|s| String::from_utf8_lossy(s.slice()).into_owned())
                .unwrap_or_default()
        };
        let name = text(unit.name);
        let comp_dir = text(unit.comp_dir);
        let producer = text(producer(&dwarf, &unit));
        let Ok(mut iter) = dwarf.unit_ranges(&unit) else {
            continue;
        };
        let target = if is_toolchain_unit(&name, &comp_dir, &producer) {
            &mut toolchain
        } else {
            &mut own
        };
        while let Ok(Some(r)) = iter.next() {
            if r.begin < r.end && r.begin != 0 {
                target.push(r.begin..r.end);
            }
        }
    }
    if !own.is_empty() {
        return Some(merge(own));
    }
    if toolchain.is_empty() {
        return None;
    }
    let toolchain = merge(toolchain);
    let text = merge(
        elf.executable_sections()
            .into_iter()
            .map(|(svma, bytes)| svma..svma + bytes.len() as u64)
            .collect(),
    );
    Some(subtract(&text, &toolchain))
}

/// The `DW_AT_producer` string of a unit's root entry.
fn producer<'a>(
    dwarf: &Dwarf<'a>,
    unit: &gimli::Unit<EndianSlice<'a, LittleEndian>>,
) -> Option<EndianSlice<'a, LittleEndian>> {
    let mut entries = unit.entries();
    let (_, root) = entries.next_dfs().ok()??;
    let value: AttributeValue<_> = root.attr_value(gimli::DW_AT_producer).ok()??;
    dwarf.attr_string(unit, value).ok()
}

/// Directories of the glibc source tree, as compile unit names of a glibc build start
/// (`../sysdeps/...`, `../nptl/...`: glibc is built in a subdirectory of its tree).
const GLIBC_DIRS: &[&str] = &[
    "argp",
    "assert",
    "catgets",
    "csu",
    "ctype",
    "debug",
    "dirent",
    "dlfcn",
    "elf",
    "gmon",
    "grp",
    "gshadow",
    "iconv",
    "iconvdata",
    "inet",
    "intl",
    "io",
    "libio",
    "locale",
    "login",
    "malloc",
    "math",
    "misc",
    "nptl",
    "nss",
    "posix",
    "pwd",
    "resolv",
    "resource",
    "rt",
    "setjmp",
    "shadow",
    "signal",
    "socket",
    "stdio-common",
    "stdlib",
    "string",
    "sunrpc",
    "sysdeps",
    "sysvipc",
    "termios",
    "time",
    "wcsmbs",
    "wctype",
];

/// Source directories of GCC's runtime libraries, as they appear inside unit names.
const GCC_RUNTIME_DIRS: &[&str] = &[
    "/libgcc/",
    "/libstdc++-v3/",
    "/libatomic/",
    "/libgomp/",
    "/libitm/",
    "/libquadmath/",
    "/libsanitizer/",
    "/libbacktrace/",
];

/// True for compile units of toolchain libraries rather than of the program: Rust's
/// standard library (`DW_AT_comp_dir` or name under `/rustc/`) and its vendored crates
/// (`/rust/deps/`, older toolchains `/cargo/registry/src/`), sources under `/usr/`, glibc
/// (`../sysdeps/...`, `../nptl/...`), GCC runtime libraries (`.../libgcc/...`,
/// `.../libstdc++-v3/...`), and assembler-produced units (`DW_AT_producer` "GNU AS").
pub fn is_toolchain_unit(name: &str, comp_dir: &str, producer: &str) -> bool {
    const RUST_PREFIXES: [&str; 3] = ["/rustc/", "/rust/deps/", "/cargo/registry/src/"];
    if RUST_PREFIXES
        .iter()
        .any(|p| comp_dir.starts_with(p) || name.starts_with(p))
    {
        return true;
    }
    if name.starts_with("/usr/") || producer.contains("GNU AS") {
        return true;
    }
    if let Some(rest) = name.strip_prefix("../") {
        let dir = rest.split('/').next().unwrap_or_default();
        if rest.contains('/') && GLIBC_DIRS.contains(&dir) {
            return true;
        }
    }
    GCC_RUNTIME_DIRS.iter().any(|d| name.contains(d))
}

/// `ranges` minus `holes` (both sorted and merged).
fn subtract(ranges: &[Range<u64>], holes: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    for r in ranges {
        let mut start = r.start;
        for h in holes.iter().filter(|h| h.end > r.start && h.start < r.end) {
            if h.start > start {
                out.push(start..h.start);
            }
            start = start.max(h.end);
        }
        if start < r.end {
            out.push(start..r.end);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::symbolize::demangle;
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn classifies_units() {
        let rustc = "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860";
        let llvm = "clang LLVM (rustc version 1.95.0)";
        assert!(is_toolchain_unit(
            &format!("{rustc}/library/std/src/lib.rs/@/std.e2-cgu.0"),
            rustc,
            llvm
        ));
        assert!(is_toolchain_unit(
            "/rust/deps/memchr-2.7.6/src/lib.rs/@/memchr.96-cgu.0",
            "/rust/deps/memchr-2.7.6",
            llvm
        ));
        assert!(!is_toolchain_unit(
            "src/main.rs/@/x.4d-cgu.0",
            "/home/u/x",
            llvm
        ));
        assert!(is_toolchain_unit(
            "../sysdeps/x86_64/start.S",
            "/build/glibc/csu",
            "GNU AS 2.40"
        ));
        assert!(is_toolchain_unit(
            "../nptl/pthread_create.c",
            "/b/nptl",
            "GNU C11"
        ));
        assert!(is_toolchain_unit("/usr/src/x/y.c", "/", "GNU C11"));
        assert!(is_toolchain_unit(
            "../../../libgcc/libgcc2.c",
            "/b/gcc",
            "GNU C17"
        ));
        assert!(!is_toolchain_unit(
            "../src/main.c",
            "/home/u/p/build",
            "GNU C17"
        ));
        assert!(!is_toolchain_unit("abba.c", "/work", "GNU C17 12.2.0 -g"));
        assert!(is_toolchain_unit("x.s", "/work", "GNU AS 2.40"));
    }

    #[test]
    fn subtracts() {
        assert_eq!(
            subtract(&[0..10, 20..30], &[2..4, 8..22, 29..40]),
            vec![0..2, 4..8, 22..29]
        );
        let whole = 0..10;
        assert_eq!(subtract(std::slice::from_ref(&whole), &[]), vec![whole]);
    }

    /// Builds a small threaded Rust program with `rustc` (`None` when missing).
    fn build_rust(tag: &str, debug: bool) -> Option<std::path::PathBuf> {
        let dir = std::env::temp_dir().join(format!("mcheck-cut-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let src = dir.join("m.rs");
        std::fs::write(
            &src,
            "use std::sync::Mutex;\nstatic M: Mutex<u64> = Mutex::new(0);\n\
             #[inline(never)] fn work() { *M.lock().unwrap() += 1; }\n\
             fn main() { std::thread::spawn(work).join().unwrap(); work(); \
             println!(\"{}\", M.lock().unwrap()); }\n",
        )
        .ok()?;
        let exe = dir.join("m");
        let mut cmd = Command::new("rustc");
        cmd.args(["-C", "opt-level=1"]);
        if debug {
            cmd.arg("-g");
        }
        let ok = cmd
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(exe)
    }

    #[test]
    fn rust_program_excludes_std() {
        let Some(exe) = build_rust("g", true) else {
            eprintln!("rustc not available; skipping");
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let own = code_under_test_ranges(&elf).unwrap();
        let covered = |a: u64| own.iter().any(|r| r.contains(&a));
        let functions: Vec<(String, Range<u64>)> = elf
            .function_ranges()
            .into_iter()
            .map(|(n, r)| (demangle(&n), r))
            .collect();
        let start_of = |name: &str| {
            functions
                .iter()
                .find(|(n, _)| n == name || n.starts_with(&format!("{name}::h")))
                .map(|(_, r)| r.start)
        };
        assert!(covered(start_of("m::work").expect("m::work")), "{own:x?}");
        assert!(covered(start_of("m::main").expect("m::main")), "{own:x?}");
        // std's printing and runtime start are not the program's own code.
        for name in ["std::io::stdio::_print", "std::rt::lang_start_internal"] {
            let start = start_of(name).unwrap_or_else(|| panic!("{name}"));
            assert!(!covered(start), "{name} at {start:x}");
        }
        let all: u64 = elf
            .dwarf_code_ranges()
            .iter()
            .map(|r| r.end - r.start)
            .sum();
        let mine: u64 = own.iter().map(|r| r.end - r.start).sum();
        assert!(mine * 10 < all, "own {mine} of {all} bytes");

        // Without -g only std's units remain: the text minus std, still holding `work`.
        let exe2 = build_rust("nog", false).unwrap();
        let elf2 = ElfFile::load(&exe2).unwrap();
        if let Some(own2) = code_under_test_ranges(&elf2) {
            let (_, work2) = elf2
                .function_ranges()
                .into_iter()
                .find(|(n, _)| demangle(n).starts_with("m::work"))
                .unwrap();
            assert!(own2.iter().any(|r| r.contains(&work2.start)));
        }
        let _ = std::fs::remove_dir_all(exe.parent().unwrap());
        let _ = std::fs::remove_dir_all(exe2.parent().unwrap());
    }

    #[test]
    fn c_fixture_and_no_dwarf() {
        let abba = Path::new(env!("CARGO_MANIFEST_DIR")).join("tracee-fixtures/build/abba_O0");
        if abba.exists() {
            let elf = ElfFile::load(&abba).unwrap();
            let own = code_under_test_ranges(&elf).unwrap();
            assert_eq!(own, elf.dwarf_code_ranges());
            let main = elf.function_addresses("main")[0];
            assert!(own.iter().any(|r| r.contains(&main)));
        }
        let t = ElfFile::load(Path::new("/bin/true")).unwrap();
        assert_eq!(code_under_test_ranges(&t), None);
    }
}
