//! Source-level names for svmas: functions, files and lines (DWARF via addr2line),
//! falling back to ELF symbols, and names of global variables.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::elf::ElfFile;

/// One source-level frame for an address; inlined calls give several frames.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceFrame {
    /// The demangled function name (C++ and Rust names are demangled).
    pub function: Option<String>,
    /// The source file, as recorded in DWARF (usually absolute).
    pub file: Option<String>,
    /// The 1-based source line.
    pub line: Option<u32>,
}

/// Symbolizes addresses of many files, caching one addr2line loader per file.
#[derive(Default)]
pub struct Symbolizer {
    loaders: HashMap<PathBuf, Option<addr2line::Loader>>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("files", &self.loaders.len())
            .finish()
    }
}

impl Symbolizer {
    /// An empty symbolizer.
    pub fn new() -> Symbolizer {
        Symbolizer::default()
    }

    /// The addr2line loader for `path`, or `None` when the file has no DWARF.
    fn loader(&mut self, path: &Path) -> Option<&addr2line::Loader> {
        self.loaders
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                let elf = ElfFile::load(path).ok()?;
                if !elf.has_debug_info() {
                    return None;
                }
                addr2line::Loader::new(path).ok()
            })
            .as_ref()
    }

    /// The source frames for `svma` in the file `path`, innermost (most inlined) first.
    /// Without DWARF, a single frame naming the containing ELF symbol (no file/line).
    /// Empty when nothing is known. For a return address, pass `return address - 1`.
    pub fn frames(&mut self, path: &Path, svma: u64) -> Vec<SourceFrame> {
        let mut frames = self.dwarf_frames(path, svma);
        // An ELF symbol, else a PLT stub named after the function it calls (`memcpy@plt`).
        let symbol_name = || {
            let elf = ElfFile::load(path).ok()?;
            elf.symbolize(svma)
                .map(|(name, _)| demangle(&name))
                .or_else(|| {
                    (super::plt_entries(&elf).into_iter())
                        .find(|&(_, stub)| (stub..stub + 16).contains(&svma))
                        .map(|(name, _)| format!("{name}@plt"))
                })
        };
        match frames.last_mut() {
            Some(outer) if outer.function.is_none() => outer.function = symbol_name(),
            Some(_) => {}
            None => {
                if let Some(name) = symbol_name() {
                    frames.push(SourceFrame {
                        function: Some(name),
                        file: None,
                        line: None,
                    });
                }
            }
        }
        frames
    }

    /// The DWARF frames for `svma`, empty without DWARF or on error.
    fn dwarf_frames(&mut self, path: &Path, svma: u64) -> Vec<SourceFrame> {
        let Some(loader) = self.loader(path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let Ok(mut iter) = loader.find_frames(svma) else {
            return out;
        };
        while let Ok(Some(frame)) = iter.next() {
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.demangle().ok())
                .map(Cow::into_owned);
            let (file, line) = frame
                .location
                .as_ref()
                .map_or((None, None), |l| (l.file.map(str::to_string), l.line));
            out.push(SourceFrame {
                function,
                file,
                line,
            });
        }
        if out.is_empty() {
            if let Ok(Some(loc)) = loader.find_location(svma) {
                out.push(SourceFrame {
                    function: None,
                    file: loc.file.map(str::to_string),
                    line: loc.line,
                });
            }
        }
        out
    }

    /// The name of the global or static variable containing `svma`, formatted `name` or
    /// `name+OFF` (decimal offset), from the ELF symbol tables; C++/Rust names demangled.
    pub fn variable_name(&mut self, path: &Path, svma: u64) -> Option<String> {
        let elf = ElfFile::load(path).ok()?;
        let (name, offset) = elf.object_symbol(svma)?;
        let name = demangle(&name);
        Some(if offset == 0 {
            name
        } else {
            format!("{name}+{offset}")
        })
    }
}

/// Best-effort demangling of a C++ (`_Z...`) or Rust (`_ZN...`, `_R...`) symbol name;
/// other names (plain C names such as `s`, which would demangle as the type `short`) are
/// returned unchanged.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z") || name.starts_with("_R") {
        addr2line::demangle_auto(Cow::Borrowed(name), None).into_owned()
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::test_build::build;

    const PROGRAM: &str = r#"
struct S { long a; long b; } s;
int m1;
static inline __attribute__((always_inline)) void inner(void) { s.b++; }
__attribute__((noinline)) void outer(void) {
    inner();
}
int main(void) { outer(); return m1; }
"#;

    #[test]
    fn dwarf_and_variables() {
        let args = ["-O1", "-g", "-fno-pie", "-no-pie"];
        let Some(exe) = build("symbolize", "gcc", &args, "v.c", PROGRAM) else {
            eprintln!("gcc not available; skipping");
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let mut sym = Symbolizer::new();
        let s_addr = elf.object_addresses("s")[0];
        assert_eq!(sym.variable_name(&exe, s_addr).as_deref(), Some("s"));
        assert_eq!(sym.variable_name(&exe, s_addr + 8).as_deref(), Some("s+8"));
        let m1 = elf.object_addresses("m1")[0];
        assert_eq!(sym.variable_name(&exe, m1).as_deref(), Some("m1"));

        let outer = elf.function_addresses("outer")[0];
        // Find an address in `outer` that maps to the inlined `inner`.
        let found = (0..16)
            .map(|i| sym.frames(&exe, outer + i))
            .find(|f| f.len() >= 2);
        let frames = found.expect("an inlined frame in outer");
        assert_eq!(frames[0].function.as_deref(), Some("inner"));
        assert_eq!(frames[1].function.as_deref(), Some("outer"));
        assert!(frames[0].file.as_deref().unwrap().ends_with("v.c"));
        assert_eq!(frames[0].line, Some(4));
        let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    }

    #[test]
    fn falls_back_to_symbols() {
        let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
        let elf = ElfFile::load(libc).unwrap();
        let addr = elf.function_addresses("pthread_mutex_lock")[0];
        let mut sym = Symbolizer::new();
        let frames = sym.frames(libc, addr + 1);
        assert_eq!(frames.len(), 1);
        assert!(frames[0]
            .function
            .as_deref()
            .unwrap()
            .contains("pthread_mutex_lock"));
        assert_eq!(frames[0].line, None);
    }

    #[test]
    fn demangles() {
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("s"), "s");
    }
}
