//! The scan of a file's code under test (every instruction decoded, DWARF read for
//! atomic accessors and atomic globals), kept on disk under the user's cache directory and
//! keyed by the file's SHA-256, so that only the first run of mcheck on a large binary
//! pays for it. Best effort: a cache that cannot be read or written is a scan, not an error.
//!
//! Where: `$MCHECK_CACHE_DIR` (`off` turns the cache off), else `$XDG_CACHE_HOME/mcheck`,
//! else `~/.cache/mcheck`. The most recently used scans are kept up to [`KEEP_BYTES`] in
//! all (and [`KEEP_FILES`] files); the least recently used go first. (A count of 64 was
//! cycled through by one run of the test suite's 200 fixtures, and a big program's scan,
//! the one worth keeping, went with the small ones.)

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::binary::{ElfFile, MemoryAccessInsn};

/// Bytes of scans kept in the cache directory.
const KEEP_BYTES: u64 = 256 << 20;
/// Scans kept in the cache directory.
const KEEP_FILES: usize = 4096;

/// Bumped whenever what a scan holds or how it is made changes.
const FORMAT: u32 = 3;

/// What the scan of one file's code under test found (file addresses).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CodeScan {
    /// Atomic instructions.
    pub atomics: Vec<u64>,
    /// PAUSE instructions.
    pub pauses: Vec<u64>,
    /// Memory-access sites, with whether their source says they are atomic.
    #[serde(with = "compact_accesses")]
    pub accesses: Vec<(MemoryAccessInsn, bool)>,
    /// Address ranges of atomic globals (DWARF).
    pub atomic_globals: Vec<(u64, u64)>,
}

/// Access sites on disk as `[svma, kind, size, flags]` rows (a large binary has a hundred
/// thousand of them).
mod compact_accesses {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::binary::{AccessKind, MemoryAccessInsn};

    type Row = (u64, u8, u8, u8);

    pub fn serialize<S: Serializer>(
        v: &[(MemoryAccessInsn, bool)],
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
                    | (*source as u8) << 2
                    | (m.frame as u8) << 3;
                (m.svma, kind, m.size, flags)
            })
            .collect();
        rows.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(MemoryAccessInsn, bool)>, D::Error> {
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
                (m, flags & 4 != 0)
            })
            .collect())
    }
}

/// The scan of `elf` named `what` (what was looked for): from the cache, else made by
/// `scan` and stored.
pub fn load_or_scan(elf: &ElfFile, what: &str, scan: impl FnOnce() -> CodeScan) -> CodeScan {
    load_or_scan_in(directory(), elf, what, scan)
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
        // Touch it: the least recently used entries go first.
        let _ = std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        return found;
    }
    let made = scan();
    store(&path, &made);
    made
}

/// The cache file of `elf`'s scan, when there is a cache.
fn entry(dir: &std::path::Path, elf: &ElfFile, what: &str) -> Option<PathBuf> {
    let sha = crate::report::schedule::file_sha256(elf.path()).ok()?;
    let name = format!("scan-v{FORMAT}-{what}-{sha}.json");
    Some(dir.join(name))
}

fn directory() -> Option<PathBuf> {
    let dir = match std::env::var_os("MCHECK_CACHE_DIR") {
        Some(d) if d == "off" => return None,
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(x) if !x.is_empty() => PathBuf::from(x).join("mcheck"),
            _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache/mcheck"),
        },
    };
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Writes `scan` to `path` (through a temporary file, so that a reader never sees half of
/// it), then keeps the directory within [`KEEP_BYTES`] and [`KEEP_FILES`].
fn store(path: &std::path::Path, scan: &CodeScan) {
    let Ok(text) = serde_json::to_vec(scan) else {
        return;
    };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, text).is_err() || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return;
    }
    if let Some(dir) = path.parent() {
        keep_within(dir, path, KEEP_BYTES, KEEP_FILES);
    }
}

/// Removes the least recently used scans of `dir` beyond `max_bytes` in all or `max_files`
/// files; `kept` (the scan just written) stays whatever its size.
fn keep_within(dir: &std::path::Path, kept: &std::path::Path, max_bytes: u64, max_files: usize) {
    let Ok(list) = std::fs::read_dir(dir) else {
        return;
    };
    let mut scans: Vec<(std::time::SystemTime, u64, PathBuf)> = list
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("scan-"))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    scans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut bytes = 0u64;
    for (i, (_, len, p)) in scans.iter().enumerate() {
        bytes = bytes.saturating_add(*len);
        if p != kept && (i >= max_files || bytes > max_bytes) {
            let _ = std::fs::remove_file(p);
        }
    }
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
                true,
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

    #[test]
    fn the_least_recently_used_scans_go_beyond_the_byte_budget() {
        let dir = std::env::temp_dir().join(format!("mcheck-scan-keep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        for (i, name) in ["scan-a", "scan-b", "scan-c", "scan-d"].iter().enumerate() {
            let p = dir.join(name);
            std::fs::write(&p, vec![0u8; 100]).unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(old + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
        std::fs::write(dir.join("other"), b"not a scan").unwrap();
        // 250 bytes: the two newest (d, c) fit, b and a go.
        keep_within(&dir, &dir.join("scan-d"), 250, 10);
        let left = |n: &str| dir.join(n).exists();
        assert!(left("scan-d") && left("scan-c") && left("other"));
        assert!(!left("scan-b") && !left("scan-a"));
        // The scan just written stays even when it alone is over the budget.
        keep_within(&dir, &dir.join("scan-c"), 50, 10);
        assert!(left("scan-c") && !left("scan-d"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
