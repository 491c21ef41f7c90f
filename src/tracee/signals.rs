//! The signal dispositions and mask a program starts with.
//!
//! A program started from a shell inherits which signals are ignored (a background job of a
//! non-interactive shell ignores SIGINT and SIGQUIT, `nohup` ignores SIGHUP) and which are
//! blocked, and programs look at them: CPython installs its SIGINT handler only when SIGINT
//! is not ignored, which is a different path with other scheduling points, so a schedule
//! found in the foreground diverged when replayed as a background job. mcheck notes what it
//! was started with ([`note_at_start`], before it installs handlers of its own); programs
//! start with that in a search, and a schedule records it so that its replay gives the
//! program the same wherever it is started.
//!
//! SIGPIPE is the exception: the Rust runtime ignores it before mcheck's `main` runs, so what
//! mcheck was given is unknown; programs get the default, as `std::process::Command` gives
//! its children.

use std::sync::OnceLock;

/// Which signals are ignored and which blocked when the program starts (signal numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignalSetup {
    /// Signals whose disposition is SIG_IGN.
    pub ignored: Vec<i32>,
    /// Signals in the signal mask.
    pub blocked: Vec<i32>,
}

/// The highest signal number on Linux x86-64.
const MAX_SIGNAL: i32 = 64;

static AT_START: OnceLock<SignalSetup> = OnceLock::new();

/// Notes the signals mcheck was started with; call first thing in `main`.
pub fn note_at_start() {
    let _ = AT_START.get_or_init(current);
}

/// The signals mcheck was started with (noted now if [`note_at_start`] was not called).
pub fn at_start() -> SignalSetup {
    AT_START.get_or_init(current).clone()
}

/// The dispositions and mask of the calling thread now.
fn current() -> SignalSetup {
    let mut setup = SignalSetup::default();
    for sig in 1..=MAX_SIGNAL {
        if sig == libc::SIGPIPE {
            continue;
        }
        // SAFETY: a query (no new action); `old` is a valid, writable sigaction.
        let ignored = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
        };
        if ignored {
            setup.ignored.push(sig);
        }
    }
    // SAFETY: a query of the mask into a valid, writable sigset_t.
    let mask = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) != 0 {
            return setup;
        }
        set
    };
    for sig in 1..=MAX_SIGNAL {
        // SAFETY: `mask` is an initialised sigset_t.
        if unsafe { libc::sigismember(&mask, sig) } == 1 {
            setup.blocked.push(sig);
        }
    }
    setup
}

/// What a new process applies before exec, prepared before fork (the child may only make
/// async-signal-safe calls).
pub(super) struct PreparedSignals {
    actions: Vec<(i32, libc::sigaction)>,
    mask: libc::sigset_t,
}

impl PreparedSignals {
    /// Prepares `setup`: every signal not ignored gets the default action.
    pub(super) fn new(setup: &SignalSetup) -> PreparedSignals {
        let mut actions = Vec::new();
        for sig in 1..=MAX_SIGNAL {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            // SAFETY: an all-zero sigaction is valid (empty mask, no flags).
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = if setup.ignored.contains(&sig) {
                libc::SIG_IGN
            } else {
                libc::SIG_DFL
            };
            actions.push((sig, action));
        }
        // SAFETY: sigemptyset initialises the set; sigaddset only adds valid numbers to it.
        let mask = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &sig in &setup.blocked {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::sigaddset(&mut set, sig);
                }
            }
            set
        };
        PreparedSignals { actions, mask }
    }

    /// Applies them to the calling process (the child between fork and exec).
    ///
    /// # Safety
    /// Only sigaction and sigprocmask are called (async-signal-safe); failures (glibc
    /// refuses its reserved real-time signals) are ignored.
    pub(super) unsafe fn apply(&self) {
        for (sig, action) in &self.actions {
            // SAFETY: valid sigaction prepared before fork.
            unsafe { libc::sigaction(*sig, action, std::ptr::null_mut()) };
        }
        // SAFETY: a valid, initialised mask.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigpipe_is_never_noted_and_kill_and_stop_are_never_set() {
        let setup = at_start();
        assert!(!setup.ignored.contains(&libc::SIGPIPE));
        let prepared = PreparedSignals::new(&SignalSetup {
            ignored: vec![libc::SIGINT, libc::SIGKILL],
            blocked: vec![libc::SIGUSR1],
        });
        assert!(prepared.actions.iter().all(|(s, _)| *s != libc::SIGKILL));
        let int = prepared.actions.iter().find(|(s, _)| *s == libc::SIGINT);
        assert_eq!(int.map(|(_, a)| a.sa_sigaction), Some(libc::SIG_IGN));
        let pipe = prepared.actions.iter().find(|(s, _)| *s == libc::SIGPIPE);
        assert_eq!(pipe.map(|(_, a)| a.sa_sigaction), Some(libc::SIG_DFL));
        // SAFETY: an initialised set.
        assert_eq!(
            unsafe { libc::sigismember(&prepared.mask, libc::SIGUSR1) },
            1
        );
    }
}
