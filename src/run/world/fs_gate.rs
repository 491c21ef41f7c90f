//! One execution at a time changes the file system. Executions run side by side (`--jobs`)
//! run the same program with the same arguments: two copies of `pbzip2 -f FILE` would each
//! unlink and create `FILE.bz2`, and one would fail, or delete what the other wrote — a
//! failure of mcheck's making, reported as the program's, and damage to the user's files.
//!
//! The first system call of an execution that can change a file (an open for writing,
//! creat, truncate, unlink, rename, mkdir, link, chmod...) takes the gate's pass for its
//! worker, which keeps it while it runs (its fork snapshots may hold a file half-written)
//! and gives it back when it ends or waits for work: the other workers' executions wait at
//! their first such call, so a program that writes files is explored one execution at a
//! time. Reads go on freely. Executions one after another still rerun the program's changes: a program
//! that refuses to overwrite its own output of the previous execution still fails there
//! (see docs/architecture.md).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::run::process::cut::CutSignal;
use crate::tracee::seccomp::nr;

/// The gate shared by a search's workers.
#[derive(Clone, Debug, Default)]
pub struct FsGate(Arc<(Mutex<bool>, Condvar)>);

/// The right to change files, held by one worker; given back when dropped.
#[derive(Debug)]
pub struct FsPass(FsGate);

impl FsGate {
    /// Waits for the pass. None when the search is being cut short meanwhile.
    pub fn enter(&self, cut: &CutSignal) -> Option<FsPass> {
        let (taken, freed) = &*self.0;
        let mut busy = taken.lock().expect("file-system gate");
        while *busy {
            if cut.raised() {
                return None;
            }
            busy = freed
                .wait_timeout(busy, Duration::from_millis(50))
                .expect("file-system gate")
                .0;
        }
        *busy = true;
        Some(FsPass(self.clone()))
    }
}

impl Drop for FsPass {
    fn drop(&mut self) {
        let (taken, freed) = &*(self.0).0;
        *taken.lock().expect("file-system gate") = false;
        freed.notify_one();
    }
}

/// Whether system call `nr` with arguments `a` may change a file or a directory.
/// `open_how_flags` reads the flags of an `openat2` call's `struct open_how`.
pub fn changes_files(nr: i64, a: [u64; 6], open_how_flags: impl Fn(u64) -> u64) -> bool {
    let writes = |flags: u64| {
        let f = flags as i32;
        f & (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) != 0
    };
    match nr {
        nr::OPEN => writes(a[1]),
        nr::OPENAT => writes(a[2]),
        nr::OPENAT2 => writes(open_how_flags(a[2])),
        _ => nr::FILE_CHANGES.contains(&nr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_opens_for_writing_change_files() {
        let none = |_| 0;
        let read_only = [0, libc::O_RDONLY as u64, 0, 0, 0, 0];
        assert!(!changes_files(nr::OPEN, read_only, none));
        let create = [0, (libc::O_WRONLY | libc::O_CREAT) as u64, 0o644, 0, 0, 0];
        assert!(changes_files(nr::OPEN, create, none));
        let at = [libc::AT_FDCWD as u64, 0, libc::O_RDWR as u64, 0, 0, 0];
        assert!(changes_files(nr::OPENAT, at, none));
        assert!(changes_files(nr::OPENAT2, [0; 6], |_| libc::O_TRUNC as u64));
        assert!(!changes_files(nr::OPENAT2, [0; 6], |_| 0));
        assert!(changes_files(263, [0; 6], none));
        assert!(!changes_files(nr::READ, [0; 6], none));
    }

    #[test]
    fn the_pass_is_held_by_one_at_a_time_and_a_cut_ends_the_wait() {
        let gate = FsGate::default();
        let cut = CutSignal::default();
        let first = gate.enter(&cut).expect("free gate");
        let other = gate.clone();
        let waiter = std::thread::spawn({
            let cut = cut.clone();
            move || other.enter(&cut).is_some()
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !waiter.is_finished(),
            "a second pass while the first is held"
        );
        drop(first);
        assert!(waiter.join().unwrap(), "the pass given back is taken");
        let held = gate.enter(&cut).expect("free again");
        cut.raise();
        assert!(gate.enter(&cut).is_none(), "a cut ends the wait");
        drop(held);
    }
}
