//! Looking at a tracee's descriptors from the tracer without disturbing them: a copy of the
//! descriptor is taken with `pidfd_getfd` (it shares the open file description, so it sees
//! the same pipe, socket or epoll set), asked what it is and whether it is ready with a
//! `poll` of timeout 0, and closed. Polling has no side effect on pipes, sockets, eventfds,
//! signalfds, timerfds and epoll sets (edge-triggered events are not consumed), so the
//! program finds its descriptors exactly as it left them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::unistd::Pid;

/// What kind of file a descriptor refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdKind {
    /// A regular file, directory or block device: I/O on it never waits for another thread.
    File,
    /// A pipe or FIFO.
    Pipe,
    /// A socket.
    Socket,
    /// A character device (terminal, /dev/null...).
    CharDevice,
    /// An anonymous inode: eventfd, epoll, signalfd, timerfd, pidfd...
    Anonymous,
}

/// What a look at one descriptor found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdState {
    /// Its kind.
    pub kind: FdKind,
    /// The poll events that are ready among those asked for (POLLHUP, POLLERR and POLLNVAL
    /// are always reported).
    pub revents: i16,
    /// O_NONBLOCK is set on its open file description.
    pub nonblocking: bool,
}

/// The descriptors of one traced process, seen through a pidfd.
#[derive(Debug)]
pub struct Descriptors {
    pidfd: OwnedFd,
}

impl Descriptors {
    /// Opens a pidfd on process `pid`.
    pub fn open(pid: Pid) -> io::Result<Descriptors> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
        if pidfd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pidfd is a new descriptor we own from here on.
        Ok(Descriptors {
            pidfd: unsafe { OwnedFd::from_raw_fd(pidfd as i32) },
        })
    }

    /// Looks at descriptor `fd` of the process and polls it for `events` without waiting.
    /// Err(EBADF) when the process has no such descriptor.
    pub fn look(&self, fd: i32, events: i16) -> io::Result<FdState> {
        let copy = self.copy(fd)?;
        let raw = copy.as_raw_fd();
        // SAFETY: `st` is a plain struct the kernel fills; `raw` is our open descriptor.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(raw, &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let kind = match st.st_mode & libc::S_IFMT {
            libc::S_IFREG | libc::S_IFDIR | libc::S_IFBLK => FdKind::File,
            libc::S_IFIFO => FdKind::Pipe,
            libc::S_IFSOCK => FdKind::Socket,
            libc::S_IFCHR => FdKind::CharDevice,
            _ => FdKind::Anonymous,
        };
        // SAFETY: F_GETFL takes no argument and reads the descriptor's status flags.
        let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
        let nonblocking = flags >= 0 && flags & libc::O_NONBLOCK != 0;
        let revents = if kind == FdKind::File {
            events
        } else {
            let mut p = libc::pollfd {
                fd: raw,
                events,
                revents: 0,
            };
            // SAFETY: one valid pollfd, timeout 0: the call never waits.
            let n = unsafe { libc::poll(&mut p, 1, 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            p.revents
        };
        Ok(FdState {
            kind,
            revents,
            nonblocking,
        })
    }

    /// Writes `data` to descriptor `fd` of the process (through a copy of it): how the
    /// tracer moves a program's large pipe write in as room appears. The caller makes sure
    /// the write cannot wait (a pipe with a free page and at most a page of data).
    pub fn write(&self, fd: i32, data: &[u8]) -> io::Result<usize> {
        let copy = self.copy(fd)?;
        // SAFETY: writes from a live slice of `data.len()` bytes to our descriptor.
        let n = unsafe { libc::write(copy.as_raw_fd(), data.as_ptr().cast(), data.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    fn copy(&self, fd: i32) -> io::Result<OwnedFd> {
        // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags and returns a new
        // descriptor or -1.
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.pidfd.as_raw_fd(), fd, 0) };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `got` is a new descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(got as i32) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_seen_empty_then_readable_and_its_data_stays() {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let d = Descriptors::open(Pid::this()).expect("pidfd");
        let r = d.look(fds[0], libc::POLLIN).expect("read end");
        assert_eq!((r.kind, r.revents, r.nonblocking), (FdKind::Pipe, 0, false));
        let w = d.look(fds[1], libc::POLLOUT).expect("write end");
        assert_eq!(w.revents, libc::POLLOUT);
        assert_eq!(d.write(fds[1], b"abc").expect("write through a copy"), 3);
        assert_eq!(d.look(fds[0], libc::POLLIN).unwrap().revents, libc::POLLIN);
        let mut buf = [0u8; 8];
        // SAFETY: reads into a live buffer of 8 bytes.
        assert_eq!(unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), 8) }, 3);
        assert!(d.look(999, libc::POLLIN).is_err(), "no such descriptor");
        // SAFETY: closes the two descriptors made above.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
