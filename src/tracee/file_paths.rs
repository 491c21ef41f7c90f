//! Which paths a system call that changes files is about to change, read from its arguments
//! at its seccomp stop: the strings in the tracee's memory, relative paths resolved against
//! the thread's working directory or the directory descriptor (`/proc`), descriptors named
//! by what they are open on. The final component is resolved through a symbolic link only
//! when the call follows it (an open without `O_NOFOLLOW`), so that an unlink or rename
//! names the link itself. Paths under `/proc`, `/sys` and `/dev` are left out: they are not
//! files anyone keeps.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::unistd::Pid;

use super::memory::Memory;
use super::seccomp::nr;

/// `AT_FDCWD` as it arrives in a register.
const AT_FDCWD: i32 = -100;

/// Longest path read.
const PATH_MAX: usize = 4096;

/// The system call of thread `tid` of process `pid`, number `nr` with arguments `a`: the
/// paths it may change (absolute, normalised), in the order it names them.
pub fn changed_paths(pid: Pid, tid: Pid, mem: &Memory, nr: i64, a: [u64; 6]) -> Vec<PathBuf> {
    let at = |dirfd: u64, path: u64, follow: bool| -> Option<PathBuf> {
        let name = mem.read_c_string(path, PATH_MAX)?;
        let name = Path::new(OsStr::from_bytes(&name));
        let full = if name.is_absolute() {
            name.to_path_buf()
        } else {
            directory(pid, tid, dirfd as i32)?.join(name)
        };
        Some(normalise(&full, follow))
    };
    let cwd = AT_FDCWD as u64;
    let open_follows = |flags: u64| {
        let f = flags as i32;
        f & libc::O_NOFOLLOW == 0
            && f & (libc::O_CREAT | libc::O_EXCL) != (libc::O_CREAT | libc::O_EXCL)
    };
    let paths: Vec<Option<PathBuf>> = match nr {
        nr::OPEN => vec![at(cwd, a[0], open_follows(a[1]))],
        nr::OPENAT => vec![at(a[0], a[1], open_follows(a[2]))],
        nr::OPENAT2 => {
            let flags = mem.read_u64(a[2]).unwrap_or(0);
            vec![at(a[0], a[1], open_follows(flags))]
        }
        85 | 76 | 90 | 92 | 132 | 235 => vec![at(cwd, a[0], true)], // creat truncate chmod chown utime utimes
        83 | 84 | 87 | 94 | 133 => vec![at(cwd, a[0], false)], // mkdir rmdir unlink lchown mknod
        77 | 91 | 93 => vec![descriptor(pid, a[0] as i32)],    // ftruncate fchmod fchown
        82 => vec![at(cwd, a[0], false), at(cwd, a[1], false)], // rename
        86 => vec![at(cwd, a[0], true), at(cwd, a[1], false)], // link
        88 => vec![at(cwd, a[1], false)],                      // symlink
        258 | 259 => vec![at(a[0], a[1], false)],              // mkdirat mknodat
        263 => vec![at(a[0], a[1], false)],                    // unlinkat
        264 | 316 => vec![at(a[0], a[1], false), at(a[2], a[3], false)], // renameat(2)
        265 => {
            // linkat: the new name, and the old file, whose bytes the new name shares.
            let follow = a[4] as i32 & libc::AT_SYMLINK_FOLLOW != 0;
            vec![at(a[0], a[1], follow), at(a[2], a[3], false)]
        }
        266 => vec![at(a[1], a[2], false)], // symlinkat
        260 | 268 => {
            // fchownat, fchmodat
            let follow = a[if nr == 260 { 4 } else { 3 }] as i32 & libc::AT_SYMLINK_NOFOLLOW == 0;
            vec![at(a[0], a[1], follow)]
        }
        261 | 280 if a[1] == 0 => vec![descriptor(pid, a[0] as i32)], // futimesat, utimensat on a descriptor
        261 => vec![at(a[0], a[1], true)],
        280 => vec![at(a[0], a[1], a[3] as i32 & libc::AT_SYMLINK_NOFOLLOW == 0)],
        _ => Vec::new(),
    };
    paths
        .into_iter()
        .flatten()
        .filter(|p| !["/proc", "/sys", "/dev"].iter().any(|d| p.starts_with(d)))
        .collect()
}

/// The directory `dirfd` names for thread `tid` (its working directory for `AT_FDCWD`).
fn directory(pid: Pid, tid: Pid, dirfd: i32) -> Option<PathBuf> {
    let link = if dirfd == AT_FDCWD {
        format!("/proc/{tid}/cwd")
    } else {
        format!("/proc/{pid}/fd/{dirfd}")
    };
    fs::read_link(link).ok().filter(|p| p.is_absolute())
}

/// The file descriptor `fd` of `pid` is open on, when it is one with a name.
fn descriptor(pid: Pid, fd: i32) -> Option<PathBuf> {
    let p = fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let deleted = p.as_os_str().as_bytes().ends_with(b" (deleted)");
    (p.is_absolute() && !deleted).then_some(p)
}

/// `path` with its directory resolved (symbolic links, `.` and `..`), and its final
/// component too when `follow` and it exists.
fn normalise(path: &Path, follow: bool) -> PathBuf {
    if follow {
        if let Ok(p) = fs::canonicalize(path) {
            return p;
        }
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}
