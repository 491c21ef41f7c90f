//! The scan of a file's code under test (every instruction decoded, DWARF read for
//! atomic accessors and atomic globals), kept on disk under the user's cache directory and
//! keyed by the file's SHA-256, so that only the first run of mcheck on a large binary
//! pays for it. Best effort: a cache that cannot be read or written is a scan, not an error.
//!
//! Where: mcheck's cache directory (`binary::disk_cache`). The most recently used scans are
//! kept up to [`KEEP_BYTES`] in all (and [`KEEP_FILES`] files); the least recently used go
//! first. (A count of 64 was cycled through by one run of the test suite's 200 fixtures,
//! and a big program's scan, the one worth keeping, went with the small ones.)

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::binary::disk_cache::{self, Budget};
use crate::binary::{ElfFile, MemoryAccessInsn};

/// Bytes of scans kept in the cache directory.
const KEEP_BYTES: u64 = 256 << 20;
/// Scans kept in the cache directory.
const KEEP_FILES: usize = 4096;

/// The budget of scans in the cache directory.
const BUDGET: Budget = Budget {
    prefix: "scan-",
    bytes: KEEP_BYTES,
    files: KEEP_FILES,
};

/// Bumped whenever what a scan holds or how it is made changes.
const FORMAT: u32 = 5;

/// What the source says of a MOV's atomicity (`plan::scan_code_under_test`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum SourceAtomic {
    /// Nothing: atomic only if its address is.
    #[default]
    No,
    /// Inlined from an atomic accessor (`std::atomic<T>::load`, `core::sync::atomic`): the
    /// variable is an atomic object, whose every access is atomic.
    Accessor,
    /// Its source line says so (`#pragma omp atomic read`, `__atomic_load_n`): the access
    /// is atomic, the variable may be a plain one accessed plainly elsewhere.
    Line,
}

impl SourceAtomic {
    /// Whether the access is atomic by its source.
    pub fn any(self) -> bool {
        self != SourceAtomic::No
    }
}

/// What the scan of one file's code under test found (file addresses).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CodeScan {
    /// Atomic instructions.
    pub atomics: Vec<u64>,
    /// PAUSE instructions.
    pub pauses: Vec<u64>,
    /// Memory-access sites, with what their source says of their atomicity.
    #[serde(with = "compact_accesses")]
    pub accesses: Vec<(MemoryAccessInsn, SourceAtomic)>,
    /// Address ranges of atomic globals (DWARF).
    pub atomic_globals: Vec<(u64, u64)>,
}

/// Access sites on disk as `[svma, kind, size, flags]` rows (a large binary has a hundred
/// thousand of them).
mod compact_accesses {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::SourceAtomic;
    use crate::binary::{AccessKind, MemoryAccessInsn};

    type Row = (u64, u8, u8, u8);

    pub fn serialize<S: Serializer>(
        v: &[(MemoryAccessInsn, SourceAtomic)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let rows: Vec<Row> = v
            .iter()
            .map(|(m, source)| {
                let kind = match m.kind {
                    AccessKind::Read => 0,
                    AccessKind::Write => 1,
                    AccessKind::ReadWrite => 2,
                };
                let flags = m.atomic as u8
                    | (m.plain_mov as u8) << 1
                    | ((*source == SourceAtomic::Accessor) as u8) << 2
                    | (m.frame as u8) << 3
                    | ((*source == SourceAtomic::Line) as u8) << 4;
                (m.svma, kind, m.size, flags)
            })
            .collect();
        rows.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(MemoryAccessInsn, SourceAtomic)>, D::Error> {
        let rows = Vec::<Row>::deserialize(d)?;
        Ok(rows
            .into_iter()
            .map(|(svma, kind, size, flags)| {
                let kind = match kind {
                    0 => AccessKind::Read,
                    1 => AccessKind::Write,
                    _ => AccessKind::ReadWrite,
                };
                let m = MemoryAccessInsn {
                    svma,
                    kind,
                    size,
                    atomic: flags & 1 != 0,
                    plain_mov: flags & 2 != 0,
                    frame: flags & 8 != 0,
                };
                let source = if flags & 4 != 0 {
                    SourceAtomic::Accessor
                } else if flags & 16 != 0 {
                    SourceAtomic::Line
                } else {
                    SourceAtomic::No
                };
                (m, source)
            })
            .collect())
    }
}

/// The scan of `elf` named `what` (what was looked for): from the cache, else made by
/// `scan` and stored.
pub fn load_or_scan(elf: &ElfFile, what: &str, scan: impl FnOnce() -> CodeScan) -> CodeScan {
    load_or_scan_in(disk_cache::directory(), elf, what, scan)
}

/// [`load_or_scan`] with the cache in `dir` (None: no cache).
fn load_or_scan_in(
    dir: Option<PathBuf>,
    elf: &ElfFile,
    what: &str,
    scan: impl FnOnce() -> CodeScan,
) -> CodeScan {
    let Some(path) = dir.and_then(|d| entry(&d, elf, what)) else {
        return scan();
    };
    if let Some(found) = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<CodeScan>(&b).ok())
    {
        disk_cache::touch(&path);
        return found;
    }
    let made = scan();
    if let Ok(text) = serde_json::to_vec(&made) {
        disk_cache::store(&path, &text, BUDGET);
    }
    made
}

/// The cache file of `elf`'s scan, when there is a cache.
fn entry(dir: &std::path::Path, elf: &ElfFile, what: &str) -> Option<PathBuf> {
    let sha = crate::report::schedule::file_sha256(elf.path()).ok()?;
    let name = format!("scan-v{FORMAT}-{what}-{sha}.json");
    Some(dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::AccessKind;

    #[test]
    fn a_scan_is_made_once_then_read_back() {
        let dir = std::env::temp_dir().join(format!("mcheck-scan-cache-{}", std::process::id()));
        let elf = ElfFile::load(std::path::Path::new("/bin/true")).unwrap();
        let made = || CodeScan {
            atomics: vec![1, 2],
            pauses: vec![3],
            accesses: vec![(
                MemoryAccessInsn {
                    svma: 0x1000,
                    kind: AccessKind::ReadWrite,
                    size: 8,
                    atomic: false,
                    plain_mov: true,
                    frame: true,
                },
                SourceAtomic::Line,
            )],
            atomic_globals: vec![(0x2000, 0x2008)],
        };
        let first = load_or_scan_in(Some(dir.clone()), &elf, "races", made);
        let again = load_or_scan_in(Some(dir.clone()), &elf, "races", || panic!("scanned twice"));
        assert_eq!(again.accesses, first.accesses);
        assert_eq!(again.atomics, vec![1, 2]);
        assert_eq!(again.atomic_globals, vec![(0x2000, 0x2008)]);
        // Another configuration is another entry.
        let other = load_or_scan_in(Some(dir.clone()), &elf, "sync", CodeScan::default);
        assert!(other.accesses.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
