//! Separate debug information: the files Debian's `-dbg` and `-dbgsym` packages install
//! under `/usr/lib/debug` for stripped executables and libraries (libc6-dbg for libc).
//!
//! A stripped file names its debug file two ways, tried in this order (as gdb does):
//! - by its GNU build-id: `DIR/.build-id/xx/rest.debug` for each debug directory `DIR`,
//!   `xx` being the first byte of the id in hex and `rest` the others;
//! - by its `.gnu_debuglink` (a file name and the CRC-32 of that file): next to the file,
//!   in a `.debug/` subdirectory next to it, and in `DIR/<the file's directory>/`; a
//!   candidate whose CRC differs is stale and skipped.
//!
//! A debug file made by dwz may keep part of its DWARF in a supplementary file shared by
//! several files, named by its `.gnu_debugaltlink` (a path and a build-id).
//!
//! The debug directories are `/usr/lib/debug`, or the colon-separated list in the
//! environment variable `MCHECK_DEBUG_DIRS` (empty: no separate debug information at all;
//! the tests use it to compare reports with and without debug files).
//!
//! Lookups are cached process-wide: each file's debug file is looked for once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::elf::ElfFile;

/// The environment variable that replaces the default debug directory list.
pub const DEBUG_DIRS_ENV: &str = "MCHECK_DEBUG_DIRS";

/// The debug directory searched when [`DEBUG_DIRS_ENV`] is not set.
pub const DEFAULT_DEBUG_DIR: &str = "/usr/lib/debug";

/// The separate debug information found for a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugFile {
    /// The debug file: the same sections and addresses as the stripped file, with DWARF
    /// and a full symbol table, and no code.
    pub path: PathBuf,
    /// The dwz supplementary file its DWARF refers to, when it has one and it was found.
    pub supplementary: Option<PathBuf>,
}

/// The debug directories: [`DEBUG_DIRS_ENV`] when set, else [`DEFAULT_DEBUG_DIR`].
pub fn debug_dirs() -> Vec<PathBuf> {
    match std::env::var_os(DEBUG_DIRS_ENV) {
        Some(list) => std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        None => vec![PathBuf::from(DEFAULT_DEBUG_DIR)],
    }
}

/// Where the debug file of the file with build-id `id` is in debug directory `dir`:
/// `dir/.build-id/xx/rest.debug`. None for an id too short to split.
pub fn build_id_path(dir: &Path, id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    Some(
        dir.join(".build-id")
            .join(format!("{first:02x}"))
            .join(format!("{rest}.debug")),
    )
}

/// The places a `.gnu_debuglink` name `link` of the file `path` is looked for, in order:
/// the file's directory, its `.debug/` subdirectory, and the file's directory under each
/// debug directory (`/usr/lib/debug/usr/bin/NAME` for `/usr/bin/prog`). The file itself
/// is never a candidate.
pub fn debuglink_candidates(path: &Path, link: &str, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let mut out = vec![dir.join(link), dir.join(".debug").join(link)];
    let relative = dir.strip_prefix("/").unwrap_or(dir);
    out.extend(dirs.iter().map(|d| d.join(relative).join(link)));
    out.retain(|c| c != path);
    out.dedup();
    out
}

/// The CRC-32 that `.gnu_debuglink` records (the zlib/IEEE polynomial) of a file's bytes.
pub fn debuglink_crc(path: &Path) -> Option<u32> {
    let bytes = std::fs::read(path).ok()?;
    Some(crc32fast::hash(&bytes))
}

/// The separate debug file of `elf` in `dirs`: by build-id first, then by debuglink
/// (checking its CRC). None when the file carries its own DWARF or nothing is found.
pub fn find_debug_file(elf: &ElfFile, dirs: &[PathBuf]) -> Option<DebugFile> {
    if elf.has_debug_info() {
        return None;
    }
    let by_build_id = || {
        let id = elf.build_id()?;
        dirs.iter()
            .filter_map(|d| build_id_path(d, id))
            .find(|p| p.is_file())
    };
    let by_debuglink = || {
        let (link, crc) = elf.debuglink()?;
        debuglink_candidates(elf.path(), link, dirs)
            .into_iter()
            .find(|c| c.is_file() && debuglink_crc(c) == Some(crc))
    };
    let path = by_build_id().or_else(by_debuglink)?;
    let debug = ElfFile::load(&path).ok()?;
    if !debug.has_debug_info() {
        return None;
    }
    let supplementary = debug
        .debugaltlink()
        .and_then(|(link, id)| find_supplementary(&path, link, id, dirs));
    Some(DebugFile {
        path,
        supplementary,
    })
}

/// The dwz supplementary file named by a `.gnu_debugaltlink` of the debug file `debug`:
/// the path it states (relative to the debug file's directory when not absolute), else
/// the build-id path of `id` in the debug directories.
fn find_supplementary(debug: &Path, link: &str, id: &[u8], dirs: &[PathBuf]) -> Option<PathBuf> {
    let stated = debug.parent().unwrap_or(Path::new("/")).join(link);
    if stated.is_file() {
        return Some(stated);
    }
    dirs.iter()
        .filter_map(|d| build_id_path(d, id))
        .find(|p| p.is_file())
}

/// The process-wide cache of lookups, keyed by the stripped file's path and the debug
/// directories searched.
type Cache = Mutex<HashMap<(PathBuf, Vec<PathBuf>), Option<Arc<DebugFile>>>>;

/// [`find_debug_file`] for the file at `path` in the debug directories `dirs`, cached
/// process-wide.
pub fn debug_file_of(path: &Path, dirs: &[PathBuf]) -> Option<Arc<DebugFile>> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (path.to_path_buf(), dirs.to_vec());
    let cache = CACHE.get_or_init(Default::default);
    if let Some(found) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return found.clone();
    }
    let found = ElfFile::load(path)
        .ok()
        .and_then(|elf| find_debug_file(&elf, &key.1))
        .map(Arc::new);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    cache.entry(key).or_insert(found).clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::test_build::build;
    use crate::binary::Symbolizer;
    use std::process::Command;

    #[test]
    fn build_id_paths() {
        let dir = Path::new("/usr/lib/debug");
        let id = [0x93, 0xac, 0x61, 0x0e];
        assert_eq!(
            build_id_path(dir, &id).unwrap(),
            Path::new("/usr/lib/debug/.build-id/93/ac610e.debug")
        );
        assert_eq!(build_id_path(dir, &[0x93]), None);
        assert_eq!(build_id_path(dir, &[]), None);
    }

    #[test]
    fn debuglink_search_order() {
        let dirs = [PathBuf::from("/usr/lib/debug"), PathBuf::from("/d2")];
        let got = debuglink_candidates(Path::new("/usr/bin/prog"), "prog.debug", &dirs);
        let want: Vec<PathBuf> = [
            "/usr/bin/prog.debug",
            "/usr/bin/.debug/prog.debug",
            "/usr/lib/debug/usr/bin/prog.debug",
            "/d2/usr/bin/prog.debug",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
        // A link naming the file itself never points back at it.
        let own = debuglink_candidates(Path::new("/opt/x/prog"), "prog", &dirs);
        assert!(!own.contains(&PathBuf::from("/opt/x/prog")), "{own:?}");
        assert_eq!(own[0], Path::new("/opt/x/.debug/prog"));
    }

    #[test]
    fn debuglink_crc_is_zlib_crc32() {
        let p = std::env::temp_dir().join(format!("mcheck-crc-{}", std::process::id()));
        std::fs::write(&p, b"123456789").unwrap();
        assert_eq!(debuglink_crc(&p), Some(0xcbf4_3926));
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn dwz_supplementary_file_by_path_then_by_build_id() {
        let root = std::env::temp_dir().join(format!("mcheck-dwz-{}", std::process::id()));
        let debug = root.join("lib/debug/.build-id/ab/cdef.debug");
        std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
        let id = [0x12, 0x34, 0x56];
        let by_id = build_id_path(&root.join("lib/debug"), &id).unwrap();
        std::fs::create_dir_all(by_id.parent().unwrap()).unwrap();
        std::fs::write(&by_id, b"dwz").unwrap();
        let dirs = [root.join("lib/debug")];
        // Relative to the debug file's directory, as dwz writes it.
        let relative = "../../.dwz/x86_64-linux-gnu/libfoo.debug";
        assert_eq!(
            find_supplementary(&debug, relative, &id, &dirs),
            Some(by_id.clone())
        );
        let stated = root.join("lib/debug/.dwz/x86_64-linux-gnu/libfoo.debug");
        std::fs::create_dir_all(stated.parent().unwrap()).unwrap();
        std::fs::write(&stated, b"dwz").unwrap();
        let found = find_supplementary(&debug, relative, &id, &dirs).unwrap();
        assert_eq!(
            found.canonicalize().unwrap(),
            stated.canonicalize().unwrap()
        );
        // Absolute, as Debian states it; missing, and no build-id file either.
        let absolute = stated.to_str().unwrap();
        assert_eq!(
            find_supplementary(&debug, absolute, &id, &dirs),
            Some(stated)
        );
        std::fs::remove_file(&by_id).unwrap();
        assert_eq!(
            find_supplementary(&debug, "/no/such.debug", &id, &dirs),
            None
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn libc_build_id_and_debuglink() {
        let libc = ElfFile::load(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
        let id = libc.build_id().expect("Debian's libc has a build-id");
        assert_eq!(id.len(), 20);
        let (link, _crc) = libc.debuglink().expect("Debian's libc has a debuglink");
        assert!(link.ends_with(".debug"), "{link}");
        // Debian names the debug file after the rest of the build-id.
        let rest: String = id[1..].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(link, format!("{rest}.debug"));
    }

    /// Splits the debug information of a gcc-built program into a separate file with
    /// objcopy, as Debian's packaging does; None when gcc or objcopy is missing.
    fn split_program(tag: &str) -> Option<(PathBuf, PathBuf)> {
        let src = "int work(int x) { return x * 3; }\nint main(void) { return work(0); }\n";
        let exe = build(tag, "gcc", &["-g", "-O0", "-Wl,--build-id"], "w.c", src)?;
        let debug = exe.with_extension("debug");
        let run = |args: &[&std::ffi::OsStr]| {
            Command::new("objcopy")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        let ok = run(&["--only-keep-debug".as_ref(), exe.as_ref(), debug.as_ref()])
            && run(&["--strip-debug".as_ref(), exe.as_ref()])
            && run(&["--add-gnu-debuglink".as_ref(), debug.as_ref(), exe.as_ref()]);
        ok.then_some((exe, debug))
    }

    #[test]
    fn finds_split_debug_info_by_build_id_and_by_debuglink() {
        let Some((exe, debug)) = split_program("debuglink") else {
            eprintln!("gcc or objcopy not available; skipping");
            return;
        };
        let dir = exe.parent().unwrap().to_path_buf();
        let elf = ElfFile::load(&exe).unwrap();
        assert!(!elf.has_debug_info());
        let (link, crc) = elf.debuglink().unwrap();
        assert_eq!(link, debug.file_name().unwrap().to_str().unwrap());
        assert_eq!(debuglink_crc(&debug), Some(crc));

        // Next to the file, through the debuglink.
        let nowhere = [dir.join("no-such-debug-dir")];
        let found = find_debug_file(&elf, &nowhere).unwrap();
        assert_eq!(found.path, debug);
        assert_eq!(found.supplementary, None);
        // Symbolized through it: a line of the source, which the stripped file lacks.
        let work = elf.function_addresses("work")[0];
        let mut sym = Symbolizer::with_debug_dirs(nowhere.to_vec());
        let frames = sym.frames(&exe, work);
        assert_eq!(frames[0].function.as_deref(), Some("work"));
        assert_eq!(frames[0].line, Some(1));
        assert!(frames[0].file.as_deref().unwrap().ends_with("w.c"));

        // Through the build-id, in a debug directory (moved out of the debuglink's reach).
        let debug_dir = dir.join("debug-root");
        let by_id = build_id_path(&debug_dir, elf.build_id().unwrap()).unwrap();
        std::fs::create_dir_all(by_id.parent().unwrap()).unwrap();
        std::fs::rename(&debug, &by_id).unwrap();
        assert_eq!(find_debug_file(&elf, &nowhere), None);
        assert_eq!(
            find_debug_file(&elf, std::slice::from_ref(&debug_dir)).map(|d| d.path),
            Some(by_id.clone())
        );

        // A debuglink candidate with another CRC is stale.
        std::fs::remove_file(&by_id).unwrap();
        std::fs::write(&debug, b"not the debug file").unwrap();
        assert_eq!(find_debug_file(&elf, &nowhere), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
