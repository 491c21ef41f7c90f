//! Waiting for tracee stops and decoding them into [`Event`]s.

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// One thing that happened to one tracee thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A SIGTRAP stop: breakpoint or single-step.
    Trap,
    /// A seccomp stop before a trapped syscall.
    Seccomp,
    /// The thread created a thread (same process) or process with clone(): its tid.
    Clone(Pid),
    /// The thread forked a child process.
    Fork(Pid),
    /// The thread vforked a child process.
    Vfork(Pid),
    /// The vfork child released the parent.
    VforkDone,
    /// The thread exec'd.
    Exec,
    /// The thread is about to exit (PTRACE_EVENT_EXIT), with the raw wait status.
    Exiting(i32),
    /// A PTRACE_EVENT_STOP: the initial stop of a new thread, a group-stop or an interrupt.
    Stop(Signal),
    /// A signal is about to be delivered.
    Signal(Signal),
    /// The thread (or, for a leader, the process) exited with a status.
    Exited(i32),
    /// The thread (or process) was killed by a signal.
    Killed(Signal),
}

/// The result of one wait.
#[derive(Debug)]
pub enum WaitOutcome {
    /// A thread reported an event.
    Event(Pid, Event),
    /// The wait was interrupted by the watchdog tick.
    Interrupted,
    /// No traced child is left.
    NoChildren,
}

const FLAGS: WaitPidFlag = WaitPidFlag::__WALL.union(WaitPidFlag::__WNOTHREAD);

/// Waits for any tracee of the calling thread (`None`) or for one thread.
pub fn wait(who: Option<Pid>) -> nix::Result<WaitOutcome> {
    match waitpid(who, Some(FLAGS)) {
        Ok(status) => Ok(decode(status)),
        Err(Errno::EINTR) => Ok(WaitOutcome::Interrupted),
        Err(Errno::ECHILD) => Ok(WaitOutcome::NoChildren),
        Err(e) => Err(e),
    }
}

fn decode(status: WaitStatus) -> WaitOutcome {
    let ev = |pid, e| WaitOutcome::Event(pid, e);
    match status {
        WaitStatus::Exited(pid, code) => ev(pid, Event::Exited(code)),
        WaitStatus::Signaled(pid, sig, _) => ev(pid, Event::Killed(sig)),
        WaitStatus::Stopped(pid, Signal::SIGTRAP) => ev(pid, Event::Trap),
        WaitStatus::Stopped(pid, sig) => ev(pid, Event::Signal(sig)),
        WaitStatus::PtraceSyscall(pid) => ev(pid, Event::Trap),
        WaitStatus::PtraceEvent(pid, sig, code) => {
            let msg = || ptrace::getevent(pid).unwrap_or(0);
            let e = match code {
                libc::PTRACE_EVENT_SECCOMP => Event::Seccomp,
                libc::PTRACE_EVENT_CLONE => Event::Clone(Pid::from_raw(msg() as i32)),
                libc::PTRACE_EVENT_FORK => Event::Fork(Pid::from_raw(msg() as i32)),
                libc::PTRACE_EVENT_VFORK => Event::Vfork(Pid::from_raw(msg() as i32)),
                libc::PTRACE_EVENT_VFORK_DONE => Event::VforkDone,
                libc::PTRACE_EVENT_EXEC => Event::Exec,
                libc::PTRACE_EVENT_EXIT => Event::Exiting(msg() as i32),
                _ => Event::Stop(sig),
            };
            ev(pid, e)
        }
        WaitStatus::Continued(_) | WaitStatus::StillAlive => WaitOutcome::Interrupted,
    }
}

/// Resumes a stopped thread, delivering `sig` if given. A vanished thread is not an error.
pub fn resume(tid: Pid, sig: Option<Signal>) -> nix::Result<()> {
    ignore_gone(ptrace::cont(tid, sig))
}

/// Lets a thread stopped at a ptrace event inside a syscall (a clone event) finish the
/// syscall and stop at its exit, so that its registers hold the result and may be changed.
/// A signal reported meanwhile is returned, to be delivered later.
pub fn finish_syscall_in_event(tid: Pid) -> nix::Result<Option<Signal>> {
    let mut pending = None;
    ignore_gone(ptrace::syscall(tid, None))?;
    loop {
        match wait(Some(tid))? {
            WaitOutcome::Interrupted => continue,
            WaitOutcome::Event(_, Event::Trap) | WaitOutcome::NoChildren => return Ok(pending),
            WaitOutcome::Event(_, Event::Signal(sig)) => {
                pending = Some(sig);
                ignore_gone(ptrace::syscall(tid, None))?;
            }
            WaitOutcome::Event(_, Event::Exited(_) | Event::Killed(_)) => return Ok(pending),
            WaitOutcome::Event(_, _) => ignore_gone(ptrace::syscall(tid, None))?,
        }
    }
}

/// Reads the word at `addr` of stopped thread `tid` (PTRACE_PEEKTEXT), if readable.
pub fn peek_word(tid: Pid, addr: u64) -> Option<u64> {
    ptrace::read(tid, addr as ptrace::AddressType)
        .ok()
        .map(|w| w as u64)
}

/// Single-steps a stopped thread.
pub fn step(tid: Pid) -> nix::Result<()> {
    ignore_gone(ptrace::step(tid, None))
}

/// Asks a running seized thread to stop (PTRACE_INTERRUPT).
pub fn interrupt(tid: Pid) -> nix::Result<()> {
    ignore_gone(ptrace::interrupt(tid))
}

fn ignore_gone(r: nix::Result<()>) -> nix::Result<()> {
    match r {
        Err(Errno::ESRCH) => Ok(()),
        other => other,
    }
}

/// si_code of a signal the kernel sent itself: the terminal's SIGINT, SIGQUIT, SIGHUP,
/// SIGWINCH... but also SIGSEGV for a general-protection fault.
const SI_KERNEL: i32 = 0x80;

/// Whether the signal of the signal-delivery stop `tid` is in was sent (by a process: kill,
/// tgkill, sigqueue...; or by the kernel for the terminal: Ctrl-C, a resize, a hangup)
/// rather than raised by an instruction (a fault or trap).
pub fn signal_was_sent(tid: Pid) -> bool {
    ptrace::getsiginfo(tid).is_ok_and(|si| {
        let fault = [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGTRAP,
        ];
        si.si_code <= 0 || (si.si_code == SI_KERNEL && !fault.contains(&si.si_signo))
    })
}

/// The faulting address of the signal-delivery stop `tid` is in (si_addr).
pub fn fault_address(tid: Pid) -> Option<u64> {
    let si = ptrace::getsiginfo(tid).ok()?;
    // SAFETY: si_addr reads a field of the siginfo copied from the kernel; for the fault
    // signals it is the faulting address, for others a harmless number.
    Some(unsafe { si.si_addr() } as u64)
}
