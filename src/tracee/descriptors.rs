//! Descriptors of another process, taken over by the tracer (`pidfd_getfd`): objects a
//! tracee must create itself (a userfaultfd, a memfd it maps) and mcheck then uses too.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::Pid;

/// A copy of descriptor `fd` of process `pid` (`pidfd_getfd`).
pub fn take_descriptor(pid: Pid, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pidfd is a descriptor we own from here on.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags and returns a new
    // descriptor or -1.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `got` is a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(got as i32) })
}
