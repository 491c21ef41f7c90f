//! Open files and fork copies. A fork copy shares its template's open file descriptions:
//! the offset of every file the program had open at the snapshot, and the file itself,
//! carry what earlier copies did. [`FileStates`] records, at a snapshot, the offset and
//! size of every regular file and directory the program has open (standard streams
//! included) and puts them back before each copy runs: the offset exactly, and a writable
//! file is cut back to its size at the snapshot, so that what an abandoned execution
//! appended is not there twice (bytes it overwrote below that size stay overwritten).
//!
//! A regular file mcheck was started with and passes on (stdin from a file, stdout
//! redirected to one) gets a description of its own in every launched program
//! ([`user_files`]), opened at the offset where mcheck found it: each execution reads the
//! same input from the same place, and writes its output where a single run of the program
//! would, instead of after every earlier execution's (the search's file journal puts the
//! file back before each execution and leaves it as the first complete execution wrote it).
//! Copies can then be rewound without touching mcheck's own description. Only a file that
//! mcheck also writes its own messages to (stdout and stderr into one log) stays shared: it
//! is written like a terminal, by every execution, and never rewound.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use nix::unistd::Pid;

use super::descriptors::take_descriptor;

/// One file open in a snapshot, with where it stood.
#[derive(Debug)]
struct FileState {
    fd: i32,
    target: String,
    /// The tracer's duplicate of the program's open file description (pidfd_getfd).
    handle: OwnedFd,
    offset: u64,
    size: u64,
    writable: bool,
    /// The bytes of a writable file when the snapshot was taken, for a snapshot taken after
    /// the program may have written to it (a branch snapshot): put back in every copy.
    contents: Option<Vec<u8>>,
}

/// The open regular files and directories of a snapshot, as they stood when it was taken.
#[derive(Debug, Default)]
pub struct FileStates {
    files: Vec<FileState>,
}

impl FileStates {
    /// Records the regular files and directories open in `pid` whose descriptions mcheck
    /// does not share. Err says, for the user, which one cannot be put back in copies.
    pub fn capture(pid: Pid) -> Result<FileStates, String> {
        let mine = user_streams();
        let mut files = Vec::new();
        for (fd, target) in super::procfs::descriptors(pid) {
            if !target.starts_with('/') {
                continue; // pipes, sockets, anonymous inodes: fork_hazard's business
            }
            let cannot = |e: io::Error| {
                format!("the offset of file descriptor {fd} ({target}) cannot be put back in fork copies ({e})")
            };
            let handle = match take_descriptor(pid, fd) {
                Ok(h) => h,
                // Closed since it was listed (only a running process can do that).
                Err(e) if e.raw_os_error() == Some(libc::EBADF) => continue,
                Err(e) => return Err(cannot(e)),
            };
            let stat = fstat(handle.as_raw_fd()).map_err(cannot)?;
            let kind = stat.st_mode & libc::S_IFMT;
            if kind != libc::S_IFREG && kind != libc::S_IFDIR {
                continue; // devices: no offset a copy could move that matters
            }
            if mine.iter().any(|&m| same_description(pid, fd, m)) {
                continue; // a stream shared with mcheck's own messages, written like a terminal
            }
            let offset = seek(handle.as_raw_fd(), 0, libc::SEEK_CUR).map_err(cannot)?;
            // SAFETY: fcntl(F_GETFL) on a descriptor we own reads its flags only.
            let flags = unsafe { libc::fcntl(handle.as_raw_fd(), libc::F_GETFL) };
            if flags < 0 {
                return Err(cannot(io::Error::last_os_error()));
            }
            let writable = kind == libc::S_IFREG && flags & libc::O_ACCMODE != libc::O_RDONLY;
            files.push(FileState {
                fd,
                target,
                handle,
                offset,
                size: stat.st_size as u64,
                writable,
                contents: None,
            });
        }
        files.sort_by_key(|f| f.fd);
        Ok(FileStates { files })
    }

    /// [`FileStates::capture`], keeping the bytes of every writable file too, for a snapshot
    /// taken after the program may have written to them with no call mcheck sees (the
    /// file journal puts files back as they were at the startup snapshot, and a copy must
    /// find them as they were at this one). Err when they are more than `limit` bytes in
    /// all, or cannot be read.
    pub fn capture_with_contents(pid: Pid, limit: u64) -> Result<FileStates, String> {
        let mut states = FileStates::capture(pid)?;
        let total: u64 = states
            .files
            .iter()
            .filter(|f| f.writable)
            .map(|f| f.size)
            .sum();
        if total > limit {
            return Err(format!(
                "the files open for writing hold {} KiB, more than the {} KiB a snapshot keeps",
                total >> 10,
                limit >> 10
            ));
        }
        for f in states.files.iter_mut().filter(|f| f.writable) {
            // Through a description of its own: the program's may be open for writing only.
            let file = fs::File::open(format!("/proc/self/fd/{}", f.handle.as_raw_fd()))
                .map_err(|e| format!("{} could not be opened for reading ({e})", f.target))?;
            let mut bytes = vec![0u8; f.size as usize];
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes, 0)
                .map_err(|e| format!("{} could not be read ({e})", f.target))?;
            f.contents = Some(bytes);
        }
        Ok(states)
    }

    /// Puts every recorded file back where it stood (call before a copy runs): offsets
    /// exactly, writable files cut back to their recorded size (never extended), or, when
    /// their bytes were kept, rewritten with them. Err says which file could not be.
    pub fn restore(&self) -> Result<(), String> {
        for f in &self.files {
            let fd = f.handle.as_raw_fd();
            let failed = |e: io::Error| {
                format!(
                    "the file descriptor {} ({}) of a fork copy could not be put back ({e})",
                    f.fd, f.target
                )
            };
            if let Some(bytes) = &f.contents {
                let file = fs::File::from(f.handle.try_clone().map_err(failed)?);
                std::os::unix::fs::FileExt::write_all_at(&file, bytes, 0).map_err(failed)?;
                file.set_len(f.size).map_err(failed)?;
            } else if f.writable {
                let now = fstat(fd).map_err(failed)?.st_size as u64;
                if now > f.size {
                    // SAFETY: ftruncate on a descriptor we own; it touches no memory of ours.
                    if unsafe { libc::ftruncate(fd, f.size as libc::off_t) } != 0 {
                        return Err(failed(io::Error::last_os_error()));
                    }
                }
            }
            seek(fd, f.offset as i64, libc::SEEK_SET).map_err(failed)?;
        }
        Ok(())
    }

    /// The recorded files (fd, target), for messages and tests.
    pub fn described(&self) -> Vec<(i32, String)> {
        self.files
            .iter()
            .map(|f| (f.fd, f.target.clone()))
            .collect()
    }
}

/// A regular file mcheck was started with, to be opened anew in each launched program at
/// the same offset (see the module comment).
#[derive(Debug)]
pub struct UserFile {
    /// The descriptor number.
    pub fd: RawFd,
    /// `/proc/self/fd/N`, which the launched child opens (it inherited the descriptor).
    pub path: CString,
    /// Where mcheck found the offset.
    pub offset: i64,
    /// How the child opens it: the access mode and `O_APPEND` of mcheck's description.
    pub flags: libc::c_int,
    /// A lower descriptor of mcheck's that is the same description (`>out 3>&1`): the child
    /// makes this one a duplicate of that one's new description, as natively.
    pub dup_of: Option<RawFd>,
    /// Where the file is, for a writable one (the journal saves and restores it); None
    /// for a read-only one.
    pub output: Option<std::path::PathBuf>,
}

/// mcheck's regular files passed on to programs (stdin from a file, stdout to one), found
/// once. A writable file mcheck writes its own messages to (the same file as its stderr)
/// is left out, and so is one that has no path any more.
pub fn user_files() -> &'static [UserFile] {
    static FILES: OnceLock<Vec<UserFile>> = OnceLock::new();
    FILES.get_or_init(|| {
        let own_messages = fstat(2).ok().map(|st| (st.st_dev, st.st_ino));
        let mut found: Vec<UserFile> = Vec::new();
        let mut ids: Vec<(RawFd, (u64, u64))> = Vec::new();
        for &fd in user_streams() {
            let Ok(stat) = fstat(fd) else { continue };
            // SAFETY: fcntl(F_GETFL) reads the flags of one of our descriptors.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
            if stat.st_mode & libc::S_IFMT != libc::S_IFREG || flags < 0 {
                continue;
            }
            let id = (stat.st_dev, stat.st_ino);
            let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
            let output = if writable {
                if fd == 2 || Some(id) == own_messages {
                    continue;
                }
                match output_path(fd, id) {
                    Some(p) => Some(p),
                    None => continue,
                }
            } else {
                None
            };
            let dup_of = ids
                .iter()
                .find(|&&(other, other_id)| other_id == id && same_own_description(fd, other))
                .map(|&(other, _)| other);
            let Ok(path) = CString::new(format!("/proc/self/fd/{fd}")) else {
                continue;
            };
            let Ok(offset) = seek(fd, 0, libc::SEEK_CUR) else {
                continue;
            };
            ids.push((fd, id));
            found.push(UserFile {
                fd,
                path,
                offset: offset as i64,
                flags: flags & (libc::O_ACCMODE | libc::O_APPEND),
                dup_of,
                output,
            });
        }
        found
    })
}

/// The path of mcheck's writable descriptor `fd`, when it still names file `id`.
fn output_path(fd: RawFd, id: (u64, u64)) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let path = fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let meta = fs::metadata(&path).ok()?;
    (meta.is_file() && (meta.dev(), meta.ino()) == id).then_some(path)
}

/// At the end of a search: mcheck's descriptions of its output files ([`user_files`]) are
/// moved to the end of what the program left there, where a single run would have left
/// them, so that what the user's shell writes next comes after the program's output.
/// `stdout_silenced`: the program's stdout went to /dev/null, so mcheck's fd 1 stays.
pub fn advance_user_outputs(stdout_silenced: bool) {
    for f in user_files() {
        let written = f.output.is_some() && !(f.fd == 1 && stdout_silenced);
        if written && f.flags & libc::O_APPEND == 0 && f.dup_of.is_none() {
            let _ = seek(f.fd, 0, libc::SEEK_END);
        }
    }
}

/// Whether mcheck's descriptors `a` and `b` are one open file description (kcmp).
fn same_own_description(a: RawFd, b: RawFd) -> bool {
    // SAFETY: getpid has no preconditions.
    let me = Pid::from_raw(unsafe { libc::getpid() });
    same_description(me, a, b)
}

/// mcheck's descriptors without close-on-exec: what it was started with and every
/// launched program inherits (its own descriptors are all close-on-exec).
fn user_streams() -> &'static [RawFd] {
    static FDS: OnceLock<Vec<RawFd>> = OnceLock::new();
    FDS.get_or_init(|| {
        let Ok(dir) = fs::read_dir("/proc/self/fd") else {
            return vec![0, 1, 2];
        };
        let mut fds: Vec<RawFd> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&fd| {
                // SAFETY: F_GETFD reads a descriptor flag; a closed number returns -1.
                let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                flags >= 0 && flags & libc::FD_CLOEXEC == 0
            })
            .collect();
        fds.sort_unstable();
        fds
    })
}

/// Whether descriptor `fd` of `pid` is the same open file description as mcheck's `mine`
/// (kcmp); without kcmp, whether it is the same file.
fn same_description(pid: Pid, fd: i32, mine: RawFd) -> bool {
    const KCMP_FILE: libc::c_long = 0;
    // SAFETY: kcmp takes two pids, a type and two descriptor numbers; it reads no memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            pid.as_raw(),
            libc::getpid(),
            KCMP_FILE,
            fd as libc::c_long,
            mine as libc::c_long,
        )
    };
    match r {
        0 => true,
        r if r > 0 => false,
        _ => {
            let theirs = fs::metadata(format!("/proc/{pid}/fd/{fd}"));
            let ours = fs::metadata(format!("/proc/self/fd/{mine}"));
            match (theirs, ours) {
                (Ok(a), Ok(b)) => {
                    use std::os::unix::fs::MetadataExt;
                    a.dev() == b.dev() && a.ino() == b.ino()
                }
                _ => false,
            }
        }
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data; fstat fills it for a descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, exclusively borrowed stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn seek(fd: RawFd, offset: i64, whence: libc::c_int) -> io::Result<u64> {
    // SAFETY: lseek takes integers only.
    let r = unsafe { libc::lseek(fd, offset as libc::off_t, whence) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_is_put_back_where_it_stood() {
        let dir = std::env::temp_dir().join(format!("mcheck-files-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.txt");
        let mut f = fs::File::create(&path).unwrap();
        f.write_all(b"header\n").unwrap();
        let states = FileStates::capture(Pid::this()).unwrap();
        assert!(states
            .described()
            .iter()
            .any(|(_, t)| t.ends_with("out.txt")));
        f.write_all(b"body of an abandoned execution\n").unwrap();
        states.restore().unwrap();
        f.write_all(b"body\n").unwrap();
        drop(f);
        assert_eq!(fs::read(&path).unwrap(), b"header\nbody\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kept_bytes_come_back_even_after_the_file_was_emptied() {
        let dir = std::env::temp_dir().join(format!("mcheck-files-kept-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.gz");
        let mut f = fs::File::create(&path).unwrap();
        f.write_all(b"HEADER").unwrap();
        // (Other tests of this process may hold files open too: a limit well above them.)
        let states = FileStates::capture_with_contents(Pid::this(), 256 << 20).unwrap();
        // What the file journal does before a copy: the file as it was before the header.
        f.set_len(0).unwrap();
        states.restore().unwrap();
        f.write_all(b" total\n").unwrap();
        drop(f);
        assert_eq!(fs::read(&path).unwrap(), b"HEADER total\n");
        let big = fs::File::create(dir.join("big")).unwrap();
        big.set_len(4096).unwrap();
        assert!(FileStates::capture_with_contents(Pid::this(), 1024).is_err());
        drop(big);
        fs::remove_dir_all(&dir).unwrap();
    }
}
