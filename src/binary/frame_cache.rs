//! The source frames of addresses in files whose DWARF is a separate debug file (system
//! libraries: libc6-dbg's), kept on disk in mcheck's cache directory. Making addr2line's
//! loader for libc's debug file decompresses and indexes 4 MB of DWARF (about 100 ms, three
//! quarters of a short `mcheck replay`), and every report with a thread's stack pays it for
//! the same few addresses (`start_thread`, `clone3`, `__libc_start_main`). Keyed by the
//! library and its debug file (path, size, modification time of each), so that another
//! libc or debug package is another entry.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::disk_cache::{self, Budget};

/// Bumped whenever what an entry holds changes.
const FORMAT: u32 = 1;

/// The budget of frame entries in the cache directory.
const BUDGET: Budget = Budget {
    prefix: "frames-",
    bytes: 16 << 20,
    files: 256,
};

/// Most addresses kept per file (a stack rarely goes through more than a few dozen).
const MOST_ADDRESSES: usize = 1 << 14;

/// The frames `F` known for one file's addresses, and where they are kept (None: no cache
/// directory).
#[derive(Debug)]
pub struct FrameCache<F> {
    path: Option<PathBuf>,
    frames: HashMap<u64, Vec<F>>,
}

/// An entry on disk.
#[derive(Serialize, Deserialize)]
struct Entry<F> {
    frames: Vec<(u64, Vec<F>)>,
}

impl<F: Serialize + DeserializeOwned + Clone> FrameCache<F> {
    /// The frames kept for the file at `file` whose DWARF is the debug file `debug`.
    pub fn open(file: &Path, debug: &Path) -> FrameCache<F> {
        FrameCache::open_in(disk_cache::directory(), file, debug)
    }

    /// [`FrameCache::open`] with the cache in `dir` (None: no cache).
    fn open_in(dir: Option<PathBuf>, file: &Path, debug: &Path) -> FrameCache<F> {
        let path = dir.and_then(|d| Some(d.join(entry_name(file, debug)?)));
        let frames = (path.as_ref())
            .and_then(|p| {
                let bytes = std::fs::read(p).ok()?;
                disk_cache::touch(p);
                serde_json::from_slice::<Entry<F>>(&bytes).ok()
            })
            .map(|e| e.frames.into_iter().collect())
            .unwrap_or_default();
        FrameCache { path, frames }
    }

    /// The frames of `svma`, when known.
    pub fn get(&self, svma: u64) -> Option<&[F]> {
        self.frames.get(&svma).map(Vec::as_slice)
    }

    /// Keeps `frames` as those of `svma`, on disk too.
    pub fn insert(&mut self, svma: u64, frames: Vec<F>) {
        if self.frames.len() >= MOST_ADDRESSES {
            return;
        }
        self.frames.insert(svma, frames);
        let Some(path) = &self.path else { return };
        let mut list: Vec<(u64, Vec<F>)> =
            (self.frames.iter()).map(|(&a, f)| (a, f.clone())).collect();
        list.sort_by_key(|(a, _)| *a);
        if let Ok(bytes) = serde_json::to_vec(&Entry { frames: list }) {
            disk_cache::store(path, &bytes, BUDGET);
        }
    }
}

/// The entry's file name: a hash of both files' paths, sizes and modification times.
fn entry_name(file: &Path, debug: &Path) -> Option<String> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in [file, debug] {
        let meta = std::fs::metadata(p).ok()?;
        let modified = meta.modified().ok()?;
        (p, meta.len(), modified).hash(&mut h);
    }
    Some(format!("frames-v{FORMAT}-{:016x}.json", h.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::symbolize::SourceFrame;

    #[test]
    fn frames_are_kept_per_file_and_read_back() {
        let dir = std::env::temp_dir().join(format!("mcheck-frames-{}", std::process::id()));
        let open = |lib, debug| FrameCache::<SourceFrame>::open_in(Some(dir.clone()), lib, debug);
        let (lib, debug) = (Path::new("/bin/true"), Path::new("/bin/false"));
        let frame = SourceFrame {
            function: Some("start_thread".into()),
            file: Some("./nptl/pthread_create.c".into()),
            line: Some(442),
            symbol_offset: None,
        };
        let mut c = open(lib, debug);
        assert!(c.get(0x1000).is_none());
        c.insert(0x1000, vec![frame.clone()]);
        c.insert(0x2000, Vec::new());
        let again = open(lib, debug);
        assert_eq!(again.get(0x1000), Some(&[frame][..]));
        assert_eq!(again.get(0x2000), Some(&[][..]));
        // Another debug file is another entry.
        assert!(open(lib, lib).get(0x1000).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
