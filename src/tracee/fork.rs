//! Fork snapshots of a stopped tracee: a `clone(CLONE_PARENT|SIGCHLD)` is made *by the
//! tracee itself*, driven through ptrace, so that the copy is an exact image of its memory.
//!
//! CLONE_PARENT makes mcheck the copy's parent (no zombie waits on a stopped template, no
//! SIGCHLD into it); the copy is auto-attached with the tracee's ptrace options (seccomp
//! filter and EXITKILL included) because the tracee was seized with TRACEFORK. Both the
//! tracee and the copy end stopped with the same caller-given registers, so each resumes
//! from exactly the same place.

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::events::{self, Event, WaitOutcome};
use super::regs::{self, Regs};
use super::threads;

const SYS_CLONE: u64 = 56;
const CLONE_PARENT: u64 = 0x0000_8000;
const SIGCHLD: u64 = 17;

/// Why a fork snapshot could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// A ptrace or wait call failed.
    #[error("ptrace failed while forking the tracee: {0}")]
    Ptrace(#[from] Errno),
    /// The tracee reported something other than the expected stop.
    #[error("unexpected stop while forking the tracee: {0}")]
    Unexpected(String),
}

impl ForkError {
    /// The same error, saying what was being done.
    pub fn doing(self, what: &str) -> ForkError {
        ForkError::Unexpected(format!("{what}: {self}"))
    }
}

/// Where the tracee is stopped when it is asked to fork.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkFrom {
    /// At a seccomp stop: the pending syscall is turned into the clone (the kernel re-checks
    /// the filter and lets it through without a second stop).
    SeccompStop,
    /// At any other stop: the clone is run by the `syscall` instruction at this address
    /// (which goes through one seccomp stop first, as clone is trapped).
    Stop {
        /// Address of a `syscall` instruction (0f 05) in the tracee.
        syscall_insn: u64,
    },
}

/// Makes stopped, single-threaded tracee `pid` fork. Afterwards the tracee and its copy are
/// both stopped (the tracee in a syscall-exit stop, the copy in its first stop) with
/// registers `restore`, and the copy's pid is returned.
pub fn fork_stopped(pid: Pid, from: ForkFrom, restore: &Regs) -> Result<Pid, ForkError> {
    // A signal sent to the program meanwhile stays pending instead of stopping the fork.
    let mask = threads::get_sigmask(pid)?;
    threads::set_sigmask(pid, !0)?;
    let forked = fork_blocked(pid, from, restore);
    let unmasked = threads::set_sigmask(pid, mask);
    let child = forked?;
    // The copy inherited the blocked mask.
    if let Err(e) = unmasked.and_then(|()| threads::set_sigmask(child, mask)) {
        discard(child);
        return Err(e);
    }
    Ok(child)
}

/// [`fork_stopped`] with every signal blocked in `pid`.
fn fork_blocked(pid: Pid, from: ForkFrom, restore: &Regs) -> Result<Pid, ForkError> {
    let mut r = *restore;
    r.rdi = CLONE_PARENT | SIGCHLD;
    r.rsi = 0; // same stack, copied
    r.rdx = 0;
    r.r10 = 0;
    r.r8 = 0;
    match from {
        ForkFrom::SeccompStop => {
            r.orig_rax = SYS_CLONE;
            regs::set(pid, r)?;
        }
        ForkFrom::Stop { syscall_insn } => {
            r.rip = syscall_insn;
            r.rax = SYS_CLONE;
            r.orig_rax = u64::MAX;
            regs::set(pid, r)?;
            go_expect(
                pid,
                Go::Cont,
                |e| matches!(e, Event::Seccomp),
                "the injected clone's seccomp stop",
            )?;
        }
    }
    let child = loop {
        match go_and_wait(pid, Go::Cont)? {
            Event::Fork(child) => break child,
            // A job-control stop pending in the tracee (a SIGCONT was sent to it) makes
            // clone fail with ERESTARTNOINTR: the clone is entered again after the stop.
            Event::Seccomp => continue,
            other => {
                return Err(ForkError::Unexpected(format!(
                    "{other:?} instead of the fork event"
                )))
            }
        }
    };
    let child_ready = settle_copy(child, restore);
    // Let the clone return, then put the tracee back as it was.
    go_expect(
        pid,
        Go::Syscall,
        |e| matches!(e, Event::Trap),
        "the clone's syscall-exit stop",
    )?;
    regs::set(pid, *restore)?;
    match child_ready {
        Ok(()) => Ok(child),
        Err(e) => {
            discard(child);
            Err(e)
        }
    }
}

/// Consumes the copy's first stop and gives it the registers to resume from.
fn settle_copy(child: Pid, restore: &Regs) -> Result<(), ForkError> {
    expect(
        child,
        |e| matches!(e, Event::Stop(_) | Event::Signal(Signal::SIGSTOP)),
        "the copy's first stop",
    )?;
    regs::set(child, *restore)?;
    Ok(())
}

/// Kills a stopped copy (or template) and reaps it.
pub fn discard(pid: Pid) {
    let _ = kill(pid, Signal::SIGKILL);
    for _ in 0..1000 {
        match events::wait(Some(pid)) {
            Ok(WaitOutcome::Event(_, Event::Exited(_) | Event::Killed(_)))
            | Ok(WaitOutcome::NoChildren)
            | Err(_) => return,
            Ok(WaitOutcome::Event(_, _)) => {
                let _ = ptrace::cont(pid, None);
            }
            Ok(WaitOutcome::Interrupted) => {}
        }
    }
}

/// The next event of `pid`, waiting again when the watchdog tick interrupts the wait.
pub fn wait_for(pid: Pid) -> Result<Event, ForkError> {
    loop {
        match events::wait(Some(pid))? {
            WaitOutcome::Interrupted => continue,
            WaitOutcome::NoChildren => {
                return Err(ForkError::Unexpected(format!("process {pid} vanished")))
            }
            WaitOutcome::Event(_, ev) => return Ok(ev),
        }
    }
}

/// Waits for the next event of `pid`, which must satisfy `ok` (`what` names it for the
/// error).
pub fn expect(pid: Pid, ok: impl Fn(&Event) -> bool, what: &str) -> Result<(), ForkError> {
    let ev = wait_for(pid)?;
    if ok(&ev) {
        Ok(())
    } else {
        Err(ForkError::Unexpected(format!("{ev:?} instead of {what}")))
    }
}

/// How a stopped tracee is let go before the next wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Go {
    /// PTRACE_CONT.
    Cont,
    /// PTRACE_SYSCALL: to the next syscall entry or exit.
    Syscall,
}

/// Lets stopped `pid` go `how` and returns its next event. A job-control stop on the way is
/// let go the same way again: a SIGCONT sent to the program (by pid, or by the program
/// itself) makes each of its threads report one when it is next resumed, before it does
/// what it was resumed for.
pub fn go_and_wait(pid: Pid, how: Go) -> Result<Event, ForkError> {
    loop {
        match how {
            Go::Cont => ptrace::cont(pid, None)?,
            Go::Syscall => ptrace::syscall(pid, None)?,
        }
        match wait_for(pid)? {
            Event::Stop(_) => continue,
            ev => return Ok(ev),
        }
    }
}

/// [`go_and_wait`], whose event must satisfy `ok` (`what` names it for the error).
pub fn go_expect(
    pid: Pid,
    how: Go,
    ok: impl Fn(&Event) -> bool,
    what: &str,
) -> Result<(), ForkError> {
    let ev = go_and_wait(pid, how)?;
    if ok(&ev) {
        Ok(())
    } else {
        Err(ForkError::Unexpected(format!("{ev:?} instead of {what}")))
    }
}
