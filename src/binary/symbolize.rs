//! Source-level names for svmas: functions, files and lines (DWARF via addr2line, from the
//! file itself or from its separate debug file, see [`super::debug_files`]), falling back
//! to ELF symbols (the debug file's full symbol table, then the file's own `.symtab` and
//! `.dynsym`, then PLT stubs), and names of global variables.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use super::debug_files::{debug_dirs, debug_file_of};
use super::elf::ElfFile;
use super::frame_cache::FrameCache;

/// One source-level frame for an address; inlined calls give several frames.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SourceFrame {
    /// The demangled function name (C++ and Rust names are demangled).
    pub function: Option<String>,
    /// The source file, as recorded in DWARF (usually absolute).
    pub file: Option<String>,
    /// The 1-based source line.
    pub line: Option<u32>,
    /// When the function name comes from an ELF symbol rather than DWARF: the offset of the
    /// address from the symbol's start (`memcpy+0x23`).
    pub symbol_offset: Option<u64>,
}

/// An addr2line loader shared by every [`Symbolizer`] of the process.
type SharedLoader = Arc<Mutex<addr2line::Loader>>;

/// Where a file's DWARF is, shared by every [`Symbolizer`] of the process: its addr2line
/// loader, made on the first lookup that needs it, and for a separate debug file the frames
/// kept on disk ([`FrameCache`]), which most lookups in a system library find.
struct DwarfSource {
    /// The file the loader reads: the file itself, or its debug file.
    dwarf: PathBuf,
    /// The debug file's dwz supplementary file.
    supplementary: Option<PathBuf>,
    /// The loader, once made (`None`: it could not be).
    loader: OnceLock<Option<SharedLoader>>,
    /// The frames kept on disk, for a separate debug file.
    kept: Option<Mutex<FrameCache<SourceFrame>>>,
}

impl DwarfSource {
    /// The loader, made on first use.
    fn loader(&self) -> Option<SharedLoader> {
        self.loader
            .get_or_init(|| {
                let loader = match &self.supplementary {
                    Some(sup) => addr2line::Loader::new_with_sup(&self.dwarf, Some(sup)),
                    None => addr2line::Loader::new(&self.dwarf),
                };
                loader.ok().map(|l| Arc::new(Mutex::new(l)))
            })
            .clone()
    }
}

/// Symbolizes addresses of many files. The addr2line loader of a file is made on the first
/// lookup in that file that the frames kept on disk do not answer, and shared process-wide:
/// making the one of libc's debug file takes about 130 ms, once per process rather than
/// once per worker, and never unless a stack goes through libc somewhere new.
pub struct Symbolizer {
    /// This symbolizer's memo of the shared sources (`None`: the file has no DWARF).
    loaders: HashMap<PathBuf, Option<Arc<DwarfSource>>>,
    /// Where separate debug files are looked for.
    debug_dirs: Vec<PathBuf>,
}

impl Default for Symbolizer {
    fn default() -> Symbolizer {
        Symbolizer::with_debug_dirs(debug_dirs())
    }
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("files", &self.loaders.len())
            .finish()
    }
}

impl Symbolizer {
    /// An empty symbolizer that looks for separate debug files in the default debug
    /// directories ([`debug_dirs`]: `/usr/lib/debug` or `MCHECK_DEBUG_DIRS`).
    pub fn new() -> Symbolizer {
        Symbolizer::default()
    }

    /// An empty symbolizer that looks for separate debug files in `dirs` only (none: no
    /// separate debug information).
    pub fn with_debug_dirs(dirs: Vec<PathBuf>) -> Symbolizer {
        Symbolizer {
            loaders: HashMap::new(),
            debug_dirs: dirs,
        }
    }

    /// Where the DWARF of `path` is (see [`shared_source`]).
    fn source(&mut self, path: &Path) -> Option<Arc<DwarfSource>> {
        let dirs = &self.debug_dirs;
        self.loaders
            .entry(path.to_path_buf())
            .or_insert_with(|| shared_source(path, dirs))
            .clone()
    }

    /// The source frames for `svma` in the file `path`, innermost (most inlined) first.
    /// Without DWARF, a single frame naming the containing ELF symbol (no file/line) with
    /// the offset into it. Empty when nothing is known. For a return address, pass
    /// `return address - 1`.
    pub fn frames(&mut self, path: &Path, svma: u64) -> Vec<SourceFrame> {
        let mut frames = self.dwarf_frames(path, svma);
        match frames.last_mut() {
            Some(outer) if outer.function.is_none() => {
                if let Some((name, offset)) = symbol_name(path, svma, &self.debug_dirs) {
                    outer.function = Some(name);
                    outer.symbol_offset = Some(offset);
                }
            }
            Some(_) => {}
            None => {
                if let Some((name, offset)) = symbol_name(path, svma, &self.debug_dirs) {
                    frames.push(SourceFrame {
                        function: Some(name),
                        symbol_offset: Some(offset),
                        ..SourceFrame::default()
                    });
                }
            }
        }
        frames
    }

    /// The DWARF frames for `svma`, empty without DWARF or on error: kept ones first.
    fn dwarf_frames(&mut self, path: &Path, svma: u64) -> Vec<SourceFrame> {
        let Some(source) = self.source(path) else {
            return Vec::new();
        };
        let kept = source.kept.as_ref();
        let known = kept.and_then(|k| lock(k).get(svma).map(<[_]>::to_vec));
        if let Some(frames) = known {
            return frames;
        }
        let Some(loader) = source.loader() else {
            return Vec::new();
        };
        let frames = loader_frames(&loader, svma);
        if let Some(k) = kept {
            lock(k).insert(svma, frames.clone());
        }
        frames
    }

    /// The name of the global or static variable containing `svma`, formatted `name` or
    /// `name+OFF` (decimal offset), from the ELF symbol tables (the file's, else its
    /// separate debug file's); C++/Rust names demangled.
    pub fn variable_name(&mut self, path: &Path, svma: u64) -> Option<String> {
        let elf = ElfFile::load(path).ok()?;
        let debug = || {
            let debug = debug_file_of(path, &self.debug_dirs)?;
            ElfFile::load(&debug.path).ok()?.object_symbol(svma)
        };
        let (name, offset) = elf.object_symbol(svma).or_else(debug)?;
        let name = demangle(unversioned(&name));
        Some(if offset == 0 {
            name
        } else {
            format!("{name}+{offset}")
        })
    }
}

/// The frames kept for a file, whoever held the lock last.
fn lock(
    kept: &Mutex<FrameCache<SourceFrame>>,
) -> std::sync::MutexGuard<'_, FrameCache<SourceFrame>> {
    kept.lock().unwrap_or_else(|e| e.into_inner())
}

/// The DWARF frames addr2line's `loader` gives for `svma`, empty on error.
fn loader_frames(loader: &SharedLoader, svma: u64) -> Vec<SourceFrame> {
    let loader = loader.lock().unwrap_or_else(|e| e.into_inner());
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
            symbol_offset: None,
        });
    }
    if out.is_empty() {
        if let Ok(Some(loc)) = loader.find_location(svma) {
            out.push(SourceFrame {
                file: loc.file.map(str::to_string),
                line: loc.line,
                ..SourceFrame::default()
            });
        }
    }
    out
}

/// Where the DWARF of `path` is, process-wide: the file's own, else its separate debug file
/// in `dirs` (with its dwz supplementary file, and the frames kept on disk for it). Found
/// once per file, by the first thread that asks (others asking for the same file wait for
/// it); `None` when the file has no DWARF anywhere.
fn shared_source(path: &Path, dirs: &[PathBuf]) -> Option<Arc<DwarfSource>> {
    /// A file's source, found once; keyed by the file and the debug directories.
    type Slot = Arc<OnceLock<Option<Arc<DwarfSource>>>>;
    type Sources = Mutex<HashMap<(PathBuf, Vec<PathBuf>), Slot>>;
    static SOURCES: OnceLock<Sources> = OnceLock::new();
    let slot = SOURCES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry((path.to_path_buf(), dirs.to_vec()))
        .or_default()
        .clone();
    slot.get_or_init(|| {
        let elf = ElfFile::load(path).ok()?;
        let source = if elf.has_debug_info() {
            DwarfSource {
                dwarf: path.to_path_buf(),
                supplementary: None,
                loader: OnceLock::new(),
                kept: None,
            }
        } else {
            let debug = debug_file_of(path, dirs)?;
            DwarfSource {
                dwarf: debug.path.clone(),
                supplementary: debug.supplementary.clone(),
                loader: OnceLock::new(),
                kept: Some(Mutex::new(FrameCache::open(path, &debug.path))),
            }
        };
        Some(Arc::new(source))
    })
    .clone()
}

/// The ELF symbol containing `svma` in the file `path`, demangled, with the offset into
/// it: from the full symbol table of the file's separate debug file (which has the local
/// functions a stripped file lost, such as glibc's `start_thread`), else from the file's
/// own `.symtab` and `.dynsym` (a stripped file keeps `.dynsym`: the functions a library
/// exports), else a PLT stub named after the function it calls (`memcpy@plt`).
fn symbol_name(path: &Path, svma: u64, dirs: &[PathBuf]) -> Option<(String, u64)> {
    let elf = ElfFile::load(path).ok()?;
    let debug = || {
        let debug = debug_file_of(path, dirs)?;
        ElfFile::load(&debug.path).ok()?.symbolize(svma)
    };
    let plt = || {
        super::plt::plt_stub_at(&elf, svma).map(|(name, offset)| (format!("{name}@plt"), offset))
    };
    debug()
        .or_else(|| elf.symbolize(svma))
        .map(|(name, offset)| (demangle(unversioned(&name)), offset))
        .or_else(plt)
}

/// A symbol name without its version (`pthread_cond_wait@@GLIBC_2.3.2` in a full symbol
/// table).
fn unversioned(name: &str) -> &str {
    name.split_once('@').map_or(name, |(bare, _)| bare)
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

    const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

    #[test]
    fn falls_back_to_symbols() {
        let libc = Path::new(LIBC);
        let elf = ElfFile::load(libc).unwrap();
        let addr = elf.function_addresses("pthread_mutex_lock")[0];
        let mut sym = Symbolizer::with_debug_dirs(vec![]);
        let frames = sym.frames(libc, addr + 1);
        assert_eq!(frames.len(), 1);
        assert!(frames[0]
            .function
            .as_deref()
            .unwrap()
            .contains("pthread_mutex_lock"));
        assert_eq!(frames[0].symbol_offset, Some(1));
        assert_eq!(frames[0].line, None);
    }

    /// libc's separate debug file (libc6-dbg), or None when it is not installed.
    fn libc_debug_file() -> Option<PathBuf> {
        let libc = ElfFile::load(Path::new(LIBC)).unwrap();
        let dir = Path::new(super::super::debug_files::DEFAULT_DEBUG_DIR);
        let path = super::super::debug_files::build_id_path(dir, libc.build_id()?)?;
        path.is_file().then_some(path)
    }

    #[test]
    fn libc_through_its_debug_file() {
        let Some(debug) = libc_debug_file() else {
            eprintln!("libc6-dbg not installed; skipping");
            return;
        };
        let libc = Path::new(LIBC);
        let dirs = vec![PathBuf::from("/usr/lib/debug")];
        let mut sym = Symbolizer::with_debug_dirs(dirs.clone());
        let lock = ElfFile::load(libc)
            .unwrap()
            .function_addresses("pthread_mutex_lock")[0];
        let frames = sym.frames(libc, lock);
        let outer = frames.last().unwrap();
        assert!(outer
            .function
            .as_deref()
            .unwrap()
            .contains("pthread_mutex_lock"));
        assert!(outer
            .file
            .as_deref()
            .unwrap()
            .ends_with("pthread_mutex_lock.c"));
        assert!(outer.line.is_some());
        assert_eq!(outer.symbol_offset, None);

        // start_thread is local to libc: only the debug file knows it.
        let debug_elf = ElfFile::load(&debug).unwrap();
        let start = debug_elf.function_addresses("start_thread")[0];
        let frames = sym.frames(libc, start + 16);
        let outer = frames.last().unwrap();
        assert_eq!(outer.function.as_deref(), Some("start_thread"));
        assert!(outer.file.as_deref().unwrap().ends_with("pthread_create.c"));
        let mut without = Symbolizer::with_debug_dirs(vec![]);
        assert!(without.frames(libc, start + 16).is_empty());

        // A static variable of libc, named from the debug file's symbol table.
        let arena = debug_elf.object_addresses("main_arena")[0];
        assert_eq!(
            sym.variable_name(libc, arena).as_deref(),
            Some("main_arena")
        );
        assert_eq!(without.variable_name(libc, arena), None);
    }

    #[test]
    fn stripped_executable_through_its_dynamic_symbols() {
        let src = "__attribute__((noinline)) int exported(int x) { return x * 7 + 1; }\n\
                   static __attribute__((noinline)) int hidden(int x) { return x - 3; }\n\
                   int main(int c, char **v) { (void)v; return exported(c) + hidden(c); }\n";
        let args = ["-O1", "-rdynamic"];
        let Some(exe) = build("symbolize-dynsym", "gcc", &args, "d.c", src) else {
            eprintln!("gcc not available; skipping");
            return;
        };
        let stripped = exe.with_extension("stripped");
        std::fs::copy(&exe, &stripped).unwrap();
        let ok = std::process::Command::new("strip")
            .arg(&stripped)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("strip not available; skipping");
            return;
        }
        let full = ElfFile::load(&exe).unwrap();
        let exported = full.function_addresses("exported")[0];
        let hidden = full.function_addresses("hidden")[0];
        let elf = ElfFile::load(&stripped).unwrap();
        assert!(elf.function_addresses("hidden").is_empty(), "stripped");
        let mut sym = Symbolizer::with_debug_dirs(vec![]);
        let frames = sym.frames(&stripped, exported + 2);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].function.as_deref(), Some("exported"));
        assert_eq!(frames[0].symbol_offset, Some(2));
        assert_eq!(frames[0].file, None);
        assert!(sym.frames(&stripped, hidden).is_empty());
        let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    }

    #[test]
    fn demangles() {
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("s"), "s");
    }
}
