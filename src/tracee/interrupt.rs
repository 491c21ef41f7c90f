//! SIGINT, SIGTERM, SIGHUP and SIGQUIT end a search (or an audit) cleanly: the handler only
//! notes the signal, and the search, which looks every 100 ms, cuts the running executions
//! short, kills and reaps its tracees and reports what it explored. A second one exits at
//! once (status 128 + the signal), leaving the tracees to the kernel: every tracee has
//! PTRACE_O_EXITKILL, so none outlives mcheck. SIGHUP and SIGQUIT are left alone when mcheck
//! was started with them ignored (`nohup`, a background job of a non-interactive shell).
//!
//! A copy of the first signal from the same process within a second is the same request,
//! not a second one: GNU `timeout` (and other supervisors) send their signal to mcheck and
//! then to its process group, which mcheck is in too.
//!
//! The program normally runs in a process group of its own (see `spawn.rs`), so that what
//! is sent to mcheck's group reaches mcheck only. When mcheck runs in the foreground of its
//! terminal, though, the program stays in mcheck's group (it may read the terminal), and
//! Ctrl-C on the terminal sends SIGINT to the program too, as does `kill -TERM -PGID`. That
//! copy is the user's request to mcheck, not part of the program's behaviour:
//! [`meant_for_mcheck`] recognises it so that the executor swallows it instead of reporting
//! the program killed by SIGINT.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use nix::sys::ptrace;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

/// The first signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Signals that counted so far (copies of the first one not included).
static COUNT: AtomicU32 = AtomicU32::new(0);
/// The first counted signal and who sent it ([`origin`]; 0 until it is noted).
static FIRST_ORIGIN: AtomicU64 = AtomicU64::new(0);
/// When the first counted signal arrived (CLOCK_MONOTONIC nanoseconds; 0 until noted).
static FIRST_AT: AtomicU64 = AtomicU64::new(0);
/// The signals mcheck handles (bit n: signal n).
static HANDLED: AtomicU64 = AtomicU64::new(0);

/// si_code of a signal the kernel sent itself (the terminal driver's SIGINT, SIGQUIT).
const SI_KERNEL: i32 = 0x80;
/// A copy of the first signal from the same sender within this long is the same request.
const SAME_REQUEST_NS: u64 = 1_000_000_000;
/// The signals that ask mcheck to stop.
const STOP_SIGNALS: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Signal number and sender of a signal sent by a process (kill, sigqueue), as one word:
/// bit 63 set, the signal in bits 32..40, the sender's pid below. 0 for a signal the
/// kernel raised (the terminal's Ctrl-C), which is never taken for a copy.
fn origin(sig: libc::c_int, info: *const libc::siginfo_t) -> u64 {
    if info.is_null() {
        return 0;
    }
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler; si_pid is
    // meaningful for SI_USER and SI_QUEUE, which are checked first.
    let (code, pid) = unsafe { ((*info).si_code, (*info).si_pid()) };
    if code != libc::SI_USER && code != libc::SI_QUEUE {
        return 0;
    }
    1 << 63 | (sig as u64 & 0xff) << 32 | pid as u32 as u64
}

/// CLOCK_MONOTONIC in nanoseconds (async-signal-safe); never 0.
fn monotonic_ns() -> u64 {
    // SAFETY: an all-zero timespec is valid; clock_gettime only writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime is async-signal-safe and writes into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
        .max(1)
}

/// Whether a signal of `origin` arriving at `now` is a copy of the first one. While the
/// first is still being noted by another thread's handler (origin or time not stored yet),
/// the two arrived together: a copy too.
fn copy_of_first(origin: u64, now: u64) -> bool {
    let first = FIRST_ORIGIN.load(Ordering::SeqCst);
    let at = FIRST_AT.load(Ordering::SeqCst);
    origin != 0
        && (first == 0 || first == origin)
        && (at == 0 || now.saturating_sub(at) < SAME_REQUEST_NS)
}

/// After a terminal hangup (the ssh session or terminal window mcheck ran in is gone: the
/// kernel's SIGHUP) writes to the terminal fail with EIO, and Rust's printing macros panic
/// on that: the progress line or the summary would end mcheck before its report files are
/// written. Standard output and error on a hung-up terminal (its ioctls fail with EIO) are
/// pointed at /dev/null instead. Async-signal-safe.
fn leave_hung_up_terminal() {
    for fd in [1, 2] {
        // SAFETY: an all-zero termios is valid; TCGETS only writes it; errno is read right
        // after the failed call; open, dup2 and close are async-signal-safe.
        unsafe {
            let mut modes: libc::termios = std::mem::zeroed();
            if libc::ioctl(fd, libc::TCGETS, &mut modes) == 0
                || *libc::__errno_location() != libc::EIO
            {
                continue;
            }
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if null >= 0 {
                libc::dup2(null, fd);
                libc::close(null);
            }
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: __errno_location gives this thread's errno, valid for the thread's life.
    let errno = unsafe { *libc::__errno_location() };
    noted(sig, info);
    // SAFETY: as above; the interrupted code finds errno as it left it.
    unsafe { *libc::__errno_location() = errno };
}

/// The body of the handler: notes the first signal, ignores a copy of it, exits at once at
/// a second one.
fn noted(sig: libc::c_int, info: *const libc::siginfo_t) {
    let from = origin(sig, info);
    let now = monotonic_ns();
    if sig == libc::SIGHUP {
        leave_hung_up_terminal();
    }
    if COUNT.fetch_add(1, Ordering::SeqCst) == 0 {
        FIRST_ORIGIN.store(from, Ordering::SeqCst);
        FIRST_AT.store(now, Ordering::SeqCst);
        let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
        return;
    }
    if copy_of_first(from, now) {
        COUNT.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    const MSG: &[u8] = b"\nmcheck: interrupted again: exiting at once, without a report\n";
    // SAFETY: write and _exit are async-signal-safe; MSG is a static buffer.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        libc::_exit(128 + sig);
    }
}

/// Installs the handlers of SIGINT and SIGTERM, and of SIGHUP and SIGQUIT unless mcheck was
/// started with them ignored (for the rest of the process's life).
pub fn install() -> nix::Result<()> {
    let action = SigAction::new(
        SigHandler::SigAction(on_signal),
        SaFlags::SA_RESTART | SaFlags::SA_SIGINFO,
        SigSet::empty(),
    );
    let ignored = super::signals::at_start().ignored;
    for sig in STOP_SIGNALS {
        let optional = matches!(sig, Signal::SIGHUP | Signal::SIGQUIT);
        if optional && ignored.contains(&(sig as i32)) {
            continue;
        }
        // SAFETY: the handler only uses atomics, clock_gettime, write and _exit
        // (async-signal-safe).
        unsafe { sigaction(sig, &action) }?;
        HANDLED.fetch_or(1 << sig as u32, Ordering::SeqCst);
    }
    Ok(())
}

/// Whether mcheck stops at `sig` (its handler is installed).
pub fn handles(sig: Signal) -> bool {
    HANDLED.load(Ordering::SeqCst) & (1 << sig as u32) != 0
}

/// The signal that asked mcheck to stop, if one did.
pub fn received() -> Option<Signal> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        n => Signal::try_from(n).ok(),
    }
}

/// Notes a request to stop that reached a tracee instead (see [`meant_for_mcheck`]).
pub fn note(sig: Signal) {
    let _ = RECEIVED.compare_exchange(0, sig as i32, Ordering::SeqCst, Ordering::SeqCst);
}

/// Whether the signal-delivery stop `tid` is in holds a request to stop meant for mcheck
/// rather than part of the program's behaviour: the terminal's SIGINT, SIGQUIT or SIGHUP
/// (sent by the kernel to the whole foreground process group), or a stop signal sent to the
/// process group by a process outside the program (`is_program` tells the program's own
/// processes) that mcheck received too (waiting up to 100 ms for its own copy). Never for
/// a signal mcheck does not handle (SIGHUP under `nohup`): that one is the program's.
pub fn meant_for_mcheck(tid: Pid, sig: Signal, is_program: impl Fn(Pid) -> bool) -> bool {
    if !STOP_SIGNALS.contains(&sig) || !handles(sig) {
        return false;
    }
    let Ok(si) = ptrace::getsiginfo(tid) else {
        return false;
    };
    if si.si_code == SI_KERNEL {
        return sig != Signal::SIGTERM;
    }
    // SAFETY: for a signal sent with kill (SI_USER), si_pid is the sender's pid.
    let sender = Pid::from_raw(unsafe { si.si_pid() });
    if si.si_code != libc::SI_USER || is_program(sender) {
        return false;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(100);
    while received().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    received().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_signals_sent_by_a_process_have_an_origin() {
        // SAFETY: an all-zero siginfo_t is valid (si_code 0 is SI_USER, si_pid 0).
        let mut si: libc::siginfo_t = unsafe { std::mem::zeroed() };
        assert_eq!(origin(libc::SIGTERM, std::ptr::null()), 0);
        assert_ne!(origin(libc::SIGTERM, &si), 0);
        assert_ne!(origin(libc::SIGTERM, &si), origin(libc::SIGINT, &si));
        si.si_code = SI_KERNEL;
        assert_eq!(origin(libc::SIGINT, &si), 0);
    }
}
