//! Launching the program under ptrace: fork, disable ASLR, stop, get seized by the tracer,
//! install the seccomp filter, exec. Returns once the tracee sits at its exec stop.
//!
//! The program runs in a process group of its own, so that a signal sent to mcheck's
//! process group (GNU `timeout`, CI cancellation, Kubernetes, Slurm, `kill -TERM -PGID`)
//! reaches mcheck only, which ends its search with a report, and not the program in the
//! middle of an execution. The exception is an mcheck in the foreground of its terminal:
//! there the program stays in mcheck's group, the terminal's foreground one, so that it can
//! read the terminal and change its modes as it would without mcheck (in a background group
//! it would be stopped by SIGTTIN or SIGTTOU); the terminal's Ctrl-C then reaches it too,
//! and the executor recognises that copy (`interrupt::meant_for_mcheck`).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::seccomp::filter_program;

/// What the child's standard streams are connected to, and how it is set up.
pub struct StdioSetup {
    /// Make rdtsc/rdtscp fault (PR_SET_TSC) so the tracer can answer them.
    pub trap_rdtsc: bool,
    /// The signals ignored and blocked when the program starts.
    pub signals: super::signals::SignalSetup,
    /// fd to install as the child's stdin (None: inherit).
    pub stdin: Option<OwnedFd>,
    /// fd to install as the child's stdout (None: inherit).
    pub stdout: Option<OwnedFd>,
    /// fd to install as the child's stderr (None: inherit).
    pub stderr: Option<OwnedFd>,
}

/// The ptrace options every tracee gets.
pub fn trace_options() -> Options {
    Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        | Options::PTRACE_O_TRACEVFORKDONE
        | Options::PTRACE_O_TRACEEXEC
        | Options::PTRACE_O_TRACEEXIT
        | Options::PTRACE_O_EXITKILL
        | Options::PTRACE_O_TRACESYSGOOD
        | Options::PTRACE_O_TRACESECCOMP
}

/// Errors while launching.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// An argument or environment string contained a NUL byte.
    #[error("argument contains a NUL byte")]
    Nul,
    /// A system call in the tracer failed.
    #[error("{what}: {errno}")]
    Sys {
        /// What was being done.
        what: &'static str,
        /// The error.
        errno: Errno,
    },
    /// exec failed in the child.
    #[error("the program could not be executed (exit status {0} before exec)")]
    ExecFailed(i32),
}

fn sys<T>(what: &'static str, r: nix::Result<T>) -> Result<T, SpawnError> {
    r.map_err(|errno| SpawnError::Sys { what, errno })
}

/// Makes the process `command` starts die (SIGKILL) when the thread that started it ends:
/// one in a process group of its own is not reached by a SIGKILL to its parent's group,
/// and must not outlive a parent killed that way (`mcheck audit` and its targets' mcheck).
pub fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl and
    // getppid, which are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != parent {
                // The parent died before the death signal was set.
                return Err(std::io::Error::from(std::io::ErrorKind::Interrupted));
            }
            Ok(())
        });
    }
}

/// Whether mcheck runs in the foreground process group of its controlling terminal (an
/// interactive run, where the program keeps mcheck's process group).
pub fn in_terminal_foreground() -> bool {
    let Ok(tty) = nix::fcntl::open(
        "/dev/tty",
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_NOCTTY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) else {
        // No controlling terminal: a CI job, a service, a batch system.
        return false;
    };
    nix::unistd::tcgetpgrp(&tty).is_ok_and(|fg| fg == nix::unistd::getpgrp())
}

/// Spawns `path` with `argv` and `envp` under ptrace and seccomp; returns the pid once the
/// tracee is stopped right after its successful exec.
pub fn spawn_traced(
    path: &CString,
    argv: &[CString],
    envp: &[CString],
    stdio: StdioSetup,
) -> Result<Pid, SpawnError> {
    let filter = filter_program();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    let trap_rdtsc = stdio.trap_rdtsc;
    let signals = super::signals::PreparedSignals::new(&stdio.signals);
    let in_fd = stdio.stdin.as_ref().map(|f| f.as_raw_fd());
    let out_fd = stdio.stdout.as_ref().map(|f| f.as_raw_fd());
    // SAFETY: getpid has no preconditions.
    let tracer_pid = unsafe { libc::getpid() };
    let err_fd = stdio.stderr.as_ref().map(|f| f.as_raw_fd());
    // Regular files mcheck was given (stdin from a file, stdout to one) get a description of
    // their own.
    let files = super::files::user_files();
    let own_group = !in_terminal_foreground();

    // SAFETY: fork in a possibly multi-threaded process: the child only calls
    // async-signal-safe functions (sigaction, sigprocmask, open, lseek, dup2, close,
    // setpgid, personality, kill, prctl, execve, _exit) on data prepared before the fork, then
    // execs or exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(SpawnError::Sys {
            what: "fork",
            errno: Errno::last(),
        });
    }
    if pid == 0 {
        // SAFETY: child side of fork, async-signal-safe calls only (see above).
        unsafe {
            signals.apply();
            for file in files {
                // Each execution reads and writes from where mcheck found the offset,
                // whatever other executions did; on failure the shared description stays.
                if let Some(first) = file.dup_of {
                    libc::dup2(first, file.fd);
                    continue;
                }
                let own = libc::open(file.path.as_ptr(), file.flags);
                if own >= 0 {
                    if libc::lseek(own, file.offset, libc::SEEK_SET) >= 0 {
                        libc::dup2(own, file.fd);
                    }
                    libc::close(own);
                }
            }
            if let Some(fd) = in_fd {
                libc::dup2(fd, 0);
            }
            if let Some(fd) = out_fd {
                libc::dup2(fd, 1);
            }
            if let Some(fd) = err_fd {
                libc::dup2(fd, 2);
            }
            // Until the tracer seizes it (and PTRACE_O_EXITKILL takes over), a child whose
            // tracer dies would stay stopped forever: make it die with its parent thread.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != tracer_pid {
                libc::_exit(126);
            }
            if own_group {
                // Signals to mcheck's process group are for mcheck (see the module's doc).
                libc::setpgid(0, 0);
            }
            libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
            if trap_rdtsc {
                // rdtsc/rdtscp fault with SIGSEGV, so the tracer can return a virtual counter.
                libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_SIGSEGV, 0, 0, 0);
            }
            libc::kill(libc::getpid(), libc::SIGSTOP);
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                libc::_exit(126);
            }
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog as libc::c_ulong,
                0,
                0,
            ) != 0
            {
                libc::_exit(125);
            }
            libc::execve(path.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    drop(stdio);
    let pid = Pid::from_raw(pid);
    // The child stops itself; seize it so that PTRACE_INTERRUPT works, then let it go on.
    let first = loop {
        match waitpid(pid, Some(WaitPidFlag::WSTOPPED)) {
            Err(Errno::EINTR) => continue,
            r => break sys("waitpid", r)?,
        }
    };
    match first {
        WaitStatus::Stopped(_, Signal::SIGSTOP) => {}
        other => {
            return Err(SpawnError::Sys {
                what: match other {
                    WaitStatus::Exited(..) => "child exited before exec",
                    _ => "unexpected first stop",
                },
                errno: Errno::ECHILD,
            })
        }
    }
    sys("PTRACE_SEIZE", ptrace::seize(pid, trace_options()))?;
    sys("kill(SIGCONT)", kill(pid, Signal::SIGCONT))?;
    let flags = Some(WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD);
    loop {
        let status = match waitpid(pid, flags) {
            Err(Errno::EINTR) => continue,
            r => sys("waitpid", r)?,
        };
        match status {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXEC) => return Ok(pid),
            WaitStatus::Exited(_, code) => return Err(SpawnError::ExecFailed(code)),
            WaitStatus::Signaled(_, sig, _) => {
                return Err(SpawnError::ExecFailed(128 + sig as i32))
            }
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXIT) => {
                sys("PTRACE_CONT", ptrace::cont(pid, None))?;
            }
            // Group-stop notifications, the SIGCONT we sent, seccomp stops before exec: go on.
            WaitStatus::PtraceEvent(..) | WaitStatus::Stopped(_, Signal::SIGCONT) => {
                sys("PTRACE_CONT", ptrace::cont(pid, None))?;
            }
            WaitStatus::Stopped(_, Signal::SIGSTOP) => {
                sys("PTRACE_CONT", ptrace::cont(pid, None))?;
            }
            WaitStatus::Stopped(_, sig) => {
                sys("PTRACE_CONT", ptrace::cont(pid, Some(sig)))?;
            }
            _ => {
                sys("PTRACE_CONT", ptrace::cont(pid, None))?;
            }
        }
    }
}
