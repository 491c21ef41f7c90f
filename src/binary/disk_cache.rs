//! mcheck's cache directory, shared by what is kept between runs (code scans, the source
//! frames of system libraries): where it is, and writing an entry so that no reader ever
//! sees half of it, within a budget per kind of entry (the least recently used go first).
//! Best effort: a cache that cannot be read or written is work done again, not an error.
//!
//! Where: `$MCHECK_CACHE_DIR` (`off` turns the cache off), else `$XDG_CACHE_HOME/mcheck`,
//! else `~/.cache/mcheck`.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The cache directory (made if missing), or None when there is none.
pub fn directory() -> Option<PathBuf> {
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

/// How many entries of one kind (their file names start with `prefix`) the directory
/// keeps, and how many bytes of them.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// File name prefix of the kind.
    pub prefix: &'static str,
    /// Most bytes of that kind.
    pub bytes: u64,
    /// Most files of that kind.
    pub files: usize,
}

/// Writes `bytes` to `path` (through a temporary file, so that a reader never sees half of
/// it), then keeps the entries of its kind within `budget`.
pub fn store(path: &Path, bytes: &[u8], budget: Budget) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_err() || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return;
    }
    if let Some(dir) = path.parent() {
        keep_within(dir, path, budget);
    }
}

/// Marks the entry at `path` used now (the least recently used go first).
pub fn touch(path: &Path) {
    let _ = std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(SystemTime::now()));
}

/// Removes the least recently used entries of `budget`'s kind in `dir` beyond its bytes or
/// files; `kept` (the entry just written) stays whatever its size.
fn keep_within(dir: &Path, kept: &Path, budget: Budget) {
    let Ok(list) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(SystemTime, u64, PathBuf)> = list
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(budget.prefix))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    entries.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut bytes = 0u64;
    for (i, (_, len, p)) in entries.iter().enumerate() {
        bytes = bytes.saturating_add(*len);
        if p != kept && (i >= budget.files || bytes > budget.bytes) {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_entries_go_beyond_the_byte_budget() {
        let dir = std::env::temp_dir().join(format!("mcheck-cache-keep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old = SystemTime::now() - std::time::Duration::from_secs(100);
        for (i, name) in ["scan-a", "scan-b", "scan-c", "scan-d"].iter().enumerate() {
            let p = dir.join(name);
            std::fs::write(&p, vec![0u8; 100]).unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(old + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
        std::fs::write(dir.join("other"), b"not a scan").unwrap();
        let budget = |bytes| Budget {
            prefix: "scan-",
            bytes,
            files: 10,
        };
        // 250 bytes: the two newest (d, c) fit, b and a go.
        keep_within(&dir, &dir.join("scan-d"), budget(250));
        let left = |n: &str| dir.join(n).exists();
        assert!(left("scan-d") && left("scan-c") && left("other"));
        assert!(!left("scan-b") && !left("scan-a"));
        // The entry just written stays even when it alone is over the budget.
        keep_within(&dir, &dir.join("scan-c"), budget(50));
        assert!(left("scan-c") && !left("scan-d"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
