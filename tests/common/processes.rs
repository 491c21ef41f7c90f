//! Processes of a checked program, found by name: each test runs its own private copy of a
//! fixture binary, placed in a fresh temporary directory under a short unique file name. A
//! process of the program is then any process whose `/proc/PID/exe` is that copy, or whose
//! `comm` (the first 15 bytes of the file name, kept even by zombies whose exe link is gone)
//! equals the unique name. Tests running in parallel, or other mcheck runs on the same
//! fixtures, therefore never see each other's processes.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// A private copy of a fixture binary with a unique short name; the directory is
/// removed on drop.
pub struct PrivateCopy {
    /// The temporary directory (removed on drop).
    pub dir: PathBuf,
    /// The copy of the binary.
    pub exe: PathBuf,
    /// Its name, which is also its processes' comm.
    pub comm: String,
}

impl PrivateCopy {
    /// Copies `original` into a fresh directory.
    pub fn new(original: &Path) -> PrivateCopy {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("mcheck-leftovers-{pid}-{n}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create temp dir");
        // At most 15 bytes, so that it equals the kernel's comm for the process.
        let mut name = format!("mcl{pid:x}n{n}");
        name.truncate(15);
        let exe = dir.join(&name);
        fs::copy(original, &exe).expect("copy fixture binary");
        PrivateCopy {
            dir,
            exe,
            comm: name,
        }
    }
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Processes belonging to `copy`: `(pid, state, comm, exe)` for each.
pub fn processes_of(copy: &PrivateCopy) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let fname = entry.file_name();
        let Some(pid) = fname
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let proc_dir = entry.path();
        let exe = fs::read_link(proc_dir.join("exe")).ok();
        let exe_matches = exe.as_ref().is_some_and(|e| {
            // A deleted file shows as "<path> (deleted)".
            e == &copy.exe || e.to_string_lossy().strip_suffix(" (deleted)") == copy.exe.to_str()
        });
        let stat = fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
        let (comm, state, ppid) = match (stat.find('('), stat.rfind(')')) {
            (Some(a), Some(b)) if b > a => {
                let rest: Vec<&str> = stat[b + 1..].split_whitespace().collect();
                (
                    stat[a + 1..b].to_string(),
                    rest.first().copied().unwrap_or("?").to_string(),
                    rest.get(1).copied().unwrap_or("?").to_string(),
                )
            }
            _ => (String::new(), "?".to_string(), "?".to_string()),
        };
        if exe_matches || comm == copy.comm {
            found.push(format!(
                "pid {pid} state {state} ppid {ppid} comm {comm:?} exe {}",
                exe.map_or("<unreadable>".to_string(), |e| e.display().to_string())
            ));
        }
    }
    found
}

/// Polls until no process of `copy` exists, or `grace` has passed.
pub fn leftovers_after(copy: &PrivateCopy, grace: Duration) -> Vec<String> {
    let start = Instant::now();
    loop {
        let found = processes_of(copy);
        if found.is_empty() || start.elapsed() >= grace {
            return found;
        }
        thread::sleep(Duration::from_millis(50));
    }
}
