//! SIGINT and SIGTERM end a search cleanly: the handler only notes the signal, and the
//! search, which looks every 100 ms, cuts the running executions short, kills and reaps its
//! tracees and reports what it explored. A second one exits at once (status 128 + the
//! signal), leaving the tracees to the kernel: every tracee has PTRACE_O_EXITKILL, so none
//! outlives mcheck.
//!
//! Ctrl-C on a terminal sends SIGINT to the whole foreground process group, the traced
//! program included, and `kill -TERM -PGID` does the same. That copy is the user's request
//! to mcheck, not part of the program's behaviour: [`meant_for_mcheck`] recognises it so
//! that the executor swallows it instead of reporting the program killed by SIGINT.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use nix::sys::ptrace;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

/// The first signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Signals received so far.
static COUNT: AtomicU32 = AtomicU32::new(0);

/// si_code of a signal the kernel sent itself (the terminal driver's SIGINT, SIGQUIT).
const SI_KERNEL: i32 = 0x80;

extern "C" fn on_signal(sig: libc::c_int) {
    let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    if COUNT.fetch_add(1, Ordering::SeqCst) >= 1 {
        const MSG: &[u8] = b"\nmcheck: interrupted again: exiting at once, without a report\n";
        // SAFETY: write and _exit are async-signal-safe; MSG is a static buffer.
        unsafe {
            libc::write(2, MSG.as_ptr().cast(), MSG.len());
            libc::_exit(128 + sig);
        }
    }
}

/// Installs the handlers of SIGINT and SIGTERM (for the rest of the process's life).
pub fn install() -> nix::Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only uses atomics, write and _exit (async-signal-safe).
        unsafe { sigaction(sig, &action) }?;
    }
    Ok(())
}

/// The signal that asked mcheck to stop, if one did.
pub fn received() -> Option<Signal> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        n => Signal::try_from(n).ok(),
    }
}

/// Notes a request to stop that reached a tracee instead (see [`from_terminal`]).
pub fn note(sig: Signal) {
    let _ = RECEIVED.compare_exchange(0, sig as i32, Ordering::SeqCst, Ordering::SeqCst);
}

/// Whether the signal-delivery stop `tid` is in holds a request to stop meant for mcheck
/// rather than part of the program's behaviour: the terminal's SIGINT or SIGQUIT (sent by
/// the kernel to the whole foreground process group), or a SIGINT or SIGTERM sent to the
/// process group by a process outside the program (`is_program` tells the program's own
/// processes) that mcheck received too (waiting up to 100 ms for its own copy).
pub fn meant_for_mcheck(tid: Pid, sig: Signal, is_program: impl Fn(Pid) -> bool) -> bool {
    if !matches!(sig, Signal::SIGINT | Signal::SIGTERM | Signal::SIGQUIT) {
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
    if si.si_code != libc::SI_USER || sig == Signal::SIGQUIT || is_program(sender) {
        return false;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(100);
    while received().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    received().is_some()
}
