//! Pseudo-terminals standing in for mcheck's own terminal: the program sees a terminal of
//! the same size and settings, and mcheck decides what of its output reaches the real one.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::pty::{openpty, Winsize};
use nix::sys::termios::tcgetattr;

/// The window size of terminal `fd`, if it is one.
fn window_size(fd: impl AsFd) -> Option<Winsize> {
    let mut size = Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` (which `Winsize` is) through the
    // pointer, which points at a live, writable value of that type; `fd` is borrowed open.
    let rc = unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), libc::TIOCGWINSZ, &mut size) };
    (rc == 0).then_some(size)
}

/// A new pseudo-terminal, both ends close-on-exec: (master, slave). It takes the size and
/// settings of `like` when that is a terminal.
pub fn open_like(like: impl AsFd) -> nix::Result<(OwnedFd, OwnedFd)> {
    let size = window_size(like.as_fd());
    let settings = tcgetattr(like.as_fd()).ok();
    let pty = openpty(size.as_ref(), settings.as_ref())?;
    for fd in [&pty.master, &pty.slave] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    Ok((pty.master, pty.slave))
}
