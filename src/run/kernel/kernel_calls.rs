//! System calls that may wait for the kernel, decoded: what each waits for (descriptors
//! with poll events, signals, child processes), the signal mask in force while it waits,
//! its timeout, and what its caller sees when that timeout fires. Pure: the few words of
//! memory a call's arguments point to are read through a closure.

use crate::tracee::seccomp::nr;

/// What a waiting call waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Any of these descriptors becoming ready for its poll events.
    Fds(Vec<(i32, i16)>),
    /// One of the signals of this mask (bit n-1 for signal n) becoming pending.
    Signals(u64),
    /// A child process (`pid` as wait4 takes it: -1 any, > 0 that one) changing state.
    Child(i64),
    /// Nothing but a signal that interrupts it (pause, sigsuspend, poll of no descriptor).
    Interrupt,
    /// Nothing at all: a signal sent, made a scheduling point of its own (ready at once).
    Nothing,
}

/// How long a call may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// As long as it takes.
    Never,
    /// Not at all: the call only looks (timeout 0, WNOHANG, MSG_DONTWAIT).
    Zero,
    /// At most this many nanoseconds.
    After(u64),
}

/// What the caller finds when the call times out: the kernel's own result, side effects
/// included, so that a timeout decided by the search looks exactly like a real one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimedOut {
    /// Returns 0, and these `revents` fields (addresses of 16-bit words) read 0 (poll).
    Poll { revents: Vec<u64> },
    /// Returns 0, these fd sets (address, bytes) are cleared and the remaining time (a
    /// timeval or timespec at the address) reads 0 (select, pselect6).
    Select {
        sets: Vec<(u64, usize)>,
        remaining: u64,
    },
    /// Returns 0 (epoll_wait and its variants).
    Zero,
    /// Returns -EAGAIN (rt_sigtimedwait).
    Again,
}

/// A decoded system call that may wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelCall {
    /// The system call's name.
    pub name: &'static str,
    /// What it waits for.
    pub wait: Wait,
    /// The signal mask in force while it waits, when the call sets one (sigsuspend, ppoll,
    /// pselect6, epoll_pwait); None: the thread's own.
    pub mask: Option<u64>,
    /// How long it may wait.
    pub timeout: Timeout,
    /// What a timeout returns.
    pub timed_out: TimedOut,
    /// For a write: how many bytes it must place (a pipe write waits for room).
    pub write_len: Option<u64>,
    /// For `write`: the buffer, so that the tracer can move a large write into a pipe piece
    /// by piece as room appears, as the kernel would while the writer sleeps.
    pub write_buf: Option<u64>,
    /// Bytes of that write the tracer has already placed in the pipe.
    pub written: u64,
}

impl KernelCall {
    /// A call that waits for nothing (a signal sent), made a point of its own.
    pub fn immediate(name: &'static str) -> KernelCall {
        KernelCall {
            name,
            wait: Wait::Nothing,
            mask: None,
            timeout: Timeout::Never,
            timed_out: TimedOut::Zero,
            write_len: None,
            write_buf: None,
            written: 0,
        }
    }
}

/// What a trapped call that is not a wait is to the kernel model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelAction {
    /// A call that may wait.
    Wait(KernelCall),
    /// A signal sent to the process or one of its threads: it may wake a waiter.
    Signal,
}

/// Reads `len` bytes of the program's memory at an address; None on a fault.
pub type ReadMem<'a> = &'a dyn Fn(u64, usize) -> Option<Vec<u8>>;

const MSG_DONTWAIT: u64 = 0x40;
const WNOHANG: u64 = 1;
const P_PID: u64 = 1;

/// Decodes trapped syscall `nr` with arguments `a`; None when it is none of the calls the
/// kernel model knows.
pub fn decode(nr: i64, a: [u64; 6], mem: ReadMem<'_>) -> Option<KernelAction> {
    let call = |name, wait, timeout| KernelCall {
        name,
        wait,
        mask: None,
        timeout,
        timed_out: TimedOut::Zero,
        write_len: None,
        write_buf: None,
        written: 0,
    };
    let fd = a[0] as i32;
    let flags_wait = |flags: u64| {
        if flags & MSG_DONTWAIT != 0 {
            Timeout::Zero
        } else {
            Timeout::Never
        }
    };
    let kc = match nr {
        nr::READ | nr::READV => call(
            name_of(nr),
            Wait::Fds(vec![(fd, libc::POLLIN)]),
            Timeout::Never,
        ),
        nr::RECVFROM | nr::RECVMSG => {
            let flags = if nr == nr::RECVFROM { a[3] } else { a[2] };
            call(
                name_of(nr),
                Wait::Fds(vec![(fd, libc::POLLIN)]),
                flags_wait(flags),
            )
        }
        nr::RECVMMSG => call(
            "recvmmsg",
            Wait::Fds(vec![(fd, libc::POLLIN)]),
            flags_wait(a[3]),
        ),
        nr::ACCEPT | nr::ACCEPT4 => call(
            name_of(nr),
            Wait::Fds(vec![(fd, libc::POLLIN)]),
            Timeout::Never,
        ),
        nr::WRITE => KernelCall {
            write_len: Some(a[2]),
            write_buf: Some(a[1]),
            ..call(
                "write",
                Wait::Fds(vec![(fd, libc::POLLOUT)]),
                Timeout::Never,
            )
        },
        nr::WRITEV => {
            let len = iovec_len(mem, a[1], a[2]);
            KernelCall {
                write_len: len,
                ..call(
                    "writev",
                    Wait::Fds(vec![(fd, libc::POLLOUT)]),
                    Timeout::Never,
                )
            }
        }
        nr::SENDTO | nr::SENDMSG | nr::SENDMMSG => {
            let flags = if nr == nr::SENDTO { a[3] } else { a[2] };
            let flags = if nr == nr::SENDMMSG { a[3] } else { flags };
            call(
                name_of(nr),
                Wait::Fds(vec![(fd, libc::POLLOUT)]),
                flags_wait(flags),
            )
        }
        nr::POLL | nr::PPOLL => {
            let n = a[1].min(4096) as usize;
            let bytes = if n == 0 {
                Vec::new()
            } else {
                mem(a[0], n * 8)?
            };
            let mut fds = Vec::new();
            let mut revents = Vec::new();
            for i in 0..n {
                let e = &bytes[i * 8..i * 8 + 8];
                let pfd = i32::from_le_bytes(e[0..4].try_into().expect("4 bytes"));
                let events = i16::from_le_bytes(e[4..6].try_into().expect("2 bytes"));
                revents.push(a[0] + i as u64 * 8 + 6);
                if pfd >= 0 {
                    fds.push((pfd, events));
                }
            }
            let (timeout, mask) = if nr == nr::POLL {
                let ms = a[2] as i32;
                (millis(ms), None)
            } else {
                (timespec(mem, a[2])?, sigset(mem, a[3]))
            };
            let wait = if fds.is_empty() {
                Wait::Interrupt
            } else {
                Wait::Fds(fds)
            };
            KernelCall {
                mask,
                timed_out: TimedOut::Poll { revents },
                ..call(name_of(nr), wait, timeout)
            }
        }
        nr::SELECT | nr::PSELECT6 => {
            let n = (a[0] as usize).min(1024);
            let bytes = n.div_ceil(64) * 8;
            let mut fds = Vec::new();
            let mut sets = Vec::new();
            for (ptr, events) in [
                (a[1], libc::POLLIN),
                (a[2], libc::POLLOUT),
                (a[3], libc::POLLPRI),
            ] {
                if ptr == 0 || bytes == 0 {
                    continue;
                }
                let set = mem(ptr, bytes)?;
                sets.push((ptr, bytes));
                for f in 0..n {
                    if set[f / 8] & (1 << (f % 8)) != 0 {
                        fds.push((f as i32, events));
                    }
                }
            }
            let (timeout, mask) = if nr == nr::SELECT {
                (timeval(mem, a[4])?, None)
            } else {
                // The sixth argument points to { const sigset_t *ss; size_t len }.
                let mask = if a[5] == 0 {
                    None
                } else {
                    let p = mem(a[5], 8)?;
                    sigset(mem, u64::from_le_bytes(p[..8].try_into().expect("8 bytes")))
                };
                (timespec(mem, a[4])?, mask)
            };
            let wait = if fds.is_empty() {
                Wait::Interrupt
            } else {
                Wait::Fds(fds)
            };
            KernelCall {
                mask,
                timed_out: TimedOut::Select {
                    sets,
                    remaining: a[4],
                },
                ..call(name_of(nr), wait, timeout)
            }
        }
        nr::EPOLL_WAIT | nr::EPOLL_PWAIT | nr::EPOLL_PWAIT2 => {
            let timeout = if nr == nr::EPOLL_PWAIT2 {
                timespec(mem, a[3])?
            } else {
                millis(a[3] as i32)
            };
            let mask = if nr == nr::EPOLL_WAIT {
                None
            } else {
                sigset(mem, a[4])
            };
            KernelCall {
                mask,
                ..call(name_of(nr), Wait::Fds(vec![(fd, libc::POLLIN)]), timeout)
            }
        }
        nr::RT_SIGTIMEDWAIT => KernelCall {
            timed_out: TimedOut::Again,
            ..call(
                "rt_sigtimedwait",
                Wait::Signals(sigset(mem, a[0]).unwrap_or(0)),
                timespec(mem, a[2])?,
            )
        },
        nr::RT_SIGSUSPEND => KernelCall {
            mask: sigset(mem, a[0]),
            ..call("rt_sigsuspend", Wait::Interrupt, Timeout::Never)
        },
        nr::PAUSE => call("pause", Wait::Interrupt, Timeout::Never),
        nr::WAIT4 => {
            let timeout = if a[2] & WNOHANG != 0 {
                Timeout::Zero
            } else {
                Timeout::Never
            };
            call("wait4", Wait::Child(a[0] as i32 as i64), timeout)
        }
        nr::WAITID => {
            let timeout = if a[3] & WNOHANG != 0 {
                Timeout::Zero
            } else {
                Timeout::Never
            };
            let pid = if a[0] == P_PID { a[1] as i64 } else { -1 };
            call("waitid", Wait::Child(pid), timeout)
        }
        nr::KILL | nr::TKILL | nr::TGKILL | nr::RT_SIGQUEUEINFO | nr::RT_TGSIGQUEUEINFO => {
            return Some(KernelAction::Signal)
        }
        _ => return None,
    };
    Some(KernelAction::Wait(kc))
}

/// The name of a trapped kernel call, for reports.
pub fn name_of(nr: i64) -> &'static str {
    match nr {
        nr::READ => "read",
        nr::READV => "readv",
        nr::WRITE => "write",
        nr::WRITEV => "writev",
        nr::RECVFROM => "recvfrom",
        nr::RECVMSG => "recvmsg",
        nr::RECVMMSG => "recvmmsg",
        nr::SENDTO => "sendto",
        nr::SENDMSG => "sendmsg",
        nr::SENDMMSG => "sendmmsg",
        nr::ACCEPT => "accept",
        nr::ACCEPT4 => "accept4",
        nr::POLL => "poll",
        nr::PPOLL => "ppoll",
        nr::SELECT => "select",
        nr::PSELECT6 => "pselect6",
        nr::EPOLL_WAIT => "epoll_wait",
        nr::EPOLL_PWAIT => "epoll_pwait",
        nr::EPOLL_PWAIT2 => "epoll_pwait2",
        nr::KILL => "kill",
        nr::TKILL => "tkill",
        nr::TGKILL => "tgkill",
        nr::RT_SIGQUEUEINFO => "rt_sigqueueinfo",
        nr::RT_TGSIGQUEUEINFO => "rt_tgsigqueueinfo",
        _ => "syscall",
    }
}

fn millis(ms: i32) -> Timeout {
    match ms {
        ms if ms < 0 => Timeout::Never,
        0 => Timeout::Zero,
        ms => Timeout::After(ms as u64 * 1_000_000),
    }
}

fn nanos(ns: u64) -> Timeout {
    if ns == 0 {
        Timeout::Zero
    } else {
        Timeout::After(ns)
    }
}

/// A `struct timespec *` timeout (NULL: never); None on a fault.
fn timespec(mem: ReadMem<'_>, addr: u64) -> Option<Timeout> {
    if addr == 0 {
        return Some(Timeout::Never);
    }
    let b = mem(addr, 16)?;
    let sec = u64::from_le_bytes(b[0..8].try_into().ok()?);
    let nsec = u64::from_le_bytes(b[8..16].try_into().ok()?);
    Some(nanos(
        sec.saturating_mul(1_000_000_000).saturating_add(nsec),
    ))
}

/// A `struct timeval *` timeout (NULL: never); None on a fault.
fn timeval(mem: ReadMem<'_>, addr: u64) -> Option<Timeout> {
    if addr == 0 {
        return Some(Timeout::Never);
    }
    let b = mem(addr, 16)?;
    let sec = u64::from_le_bytes(b[0..8].try_into().ok()?);
    let usec = u64::from_le_bytes(b[8..16].try_into().ok()?);
    Some(nanos(
        sec.saturating_mul(1_000_000_000)
            .saturating_add(usec.saturating_mul(1_000)),
    ))
}

/// The 64-bit signal set at `addr` (None: NULL or a fault).
fn sigset(mem: ReadMem<'_>, addr: u64) -> Option<u64> {
    if addr == 0 {
        return None;
    }
    let b = mem(addr, 8)?;
    Some(u64::from_le_bytes(b[..8].try_into().ok()?))
}

/// The total length of `count` iovecs at `addr`.
fn iovec_len(mem: ReadMem<'_>, addr: u64, count: u64) -> Option<u64> {
    let count = count.min(1024) as usize;
    let b = mem(addr, count * 16)?;
    Some(
        (0..count)
            .map(|i| u64::from_le_bytes(b[i * 16 + 8..i * 16 + 16].try_into().expect("8 bytes")))
            .fold(0u64, u64::saturating_add),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn memory(words: &[(u64, Vec<u8>)]) -> impl Fn(u64, usize) -> Option<Vec<u8>> {
        let map: HashMap<u64, Vec<u8>> = words.iter().cloned().collect();
        move |addr, len| {
            map.iter().find_map(|(&a, v)| {
                (addr >= a && addr + len as u64 <= a + v.len() as u64)
                    .then(|| v[(addr - a) as usize..(addr - a) as usize + len].to_vec())
            })
        }
    }

    fn wait(nr: i64, a: [u64; 6], mem: ReadMem<'_>) -> KernelCall {
        match decode(nr, a, mem) {
            Some(KernelAction::Wait(k)) => k,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_wait_for_input_and_writes_for_room() {
        let none = memory(&[]);
        let r = wait(nr::READ, [3, 0, 10, 0, 0, 0], &none);
        assert_eq!(r.wait, Wait::Fds(vec![(3, libc::POLLIN)]));
        assert_eq!(r.timeout, Timeout::Never);
        let w = wait(nr::WRITE, [4, 0, 100, 0, 0, 0], &none);
        assert_eq!(w.write_len, Some(100));
        let dontwait = wait(nr::RECVFROM, [5, 0, 1, MSG_DONTWAIT, 0, 0], &none);
        assert_eq!(dontwait.timeout, Timeout::Zero);
        assert_eq!(
            decode(nr::TGKILL, [1, 2, 10, 0, 0, 0], &none),
            Some(KernelAction::Signal)
        );
        assert_eq!(decode(nr::FUTEX, [0; 6], &none), None);
    }

    #[test]
    fn poll_lists_its_descriptors_and_where_revents_go() {
        // Two pollfds: fd 7 for POLLIN, fd -1 (ignored).
        let mut fds = Vec::new();
        fds.extend_from_slice(&7i32.to_le_bytes());
        fds.extend_from_slice(&libc::POLLIN.to_le_bytes());
        fds.extend_from_slice(&0i16.to_le_bytes());
        fds.extend_from_slice(&(-1i32).to_le_bytes());
        fds.extend_from_slice(&libc::POLLIN.to_le_bytes());
        fds.extend_from_slice(&0i16.to_le_bytes());
        let mem = memory(&[(0x1000, fds)]);
        let p = wait(nr::POLL, [0x1000, 2, 5, 0, 0, 0], &mem);
        assert_eq!(p.wait, Wait::Fds(vec![(7, libc::POLLIN)]));
        assert_eq!(p.timeout, Timeout::After(5_000_000));
        assert_eq!(
            p.timed_out,
            TimedOut::Poll {
                revents: vec![0x1006, 0x100e]
            }
        );
        let forever = wait(nr::POLL, [0x1000, 2, u32::MAX as u64, 0, 0, 0], &mem);
        assert_eq!(forever.timeout, Timeout::Never);
    }

    #[test]
    fn select_reads_its_sets_and_timeval() {
        let mut set = vec![0u8; 8];
        set[0] = 0b1000_0100; // fds 2 and 7
        let mut tv = 1u64.to_le_bytes().to_vec();
        tv.extend_from_slice(&500u64.to_le_bytes());
        let mem = memory(&[(0x2000, set), (0x3000, tv)]);
        let s = wait(nr::SELECT, [8, 0x2000, 0, 0, 0x3000, 0], &mem);
        assert_eq!(
            s.wait,
            Wait::Fds(vec![(2, libc::POLLIN), (7, libc::POLLIN)])
        );
        assert_eq!(s.timeout, Timeout::After(1_000_500_000));
        assert_eq!(
            s.timed_out,
            TimedOut::Select {
                sets: vec![(0x2000, 8)],
                remaining: 0x3000
            }
        );
    }

    #[test]
    fn signal_waits_take_their_sets_and_masks() {
        let mem = memory(&[(0x4000, (1u64 << 9).to_le_bytes().to_vec())]);
        let w = wait(nr::RT_SIGTIMEDWAIT, [0x4000, 0, 0, 8, 0, 0], &mem);
        assert_eq!(w.wait, Wait::Signals(1 << 9));
        assert_eq!((w.timeout, w.timed_out), (Timeout::Never, TimedOut::Again));
        let s = wait(nr::RT_SIGSUSPEND, [0x4000, 8, 0, 0, 0, 0], &mem);
        assert_eq!((s.wait, s.mask), (Wait::Interrupt, Some(1 << 9)));
        let e = wait(nr::EPOLL_PWAIT, [3, 0, 8, 0, 0x4000, 8], &mem);
        assert_eq!((e.timeout, e.mask), (Timeout::Zero, Some(1 << 9)));
        let c = wait(nr::WAIT4, [(-1i64) as u64, 0, WNOHANG, 0, 0, 0], &mem);
        assert_eq!((c.wait, c.timeout), (Wait::Child(-1), Timeout::Zero));
    }
}
