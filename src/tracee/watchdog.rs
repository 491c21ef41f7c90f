//! The watchdog tick: a periodic SIGALRM aimed at the tracer thread alone, with a no-op
//! handler installed without SA_RESTART, so that a blocking `waitpid` returns EINTR and the
//! tracer can check whether the running tracee thread has overstayed `--execution-timeout`,
//! measured in the CPU time the program itself used ([`user_cpu_time`]).

use std::time::Duration;

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

extern "C" fn on_tick(_: libc::c_int) {}

/// User-mode CPU time process `pid` has used (all its threads), or None when it is gone.
/// Only one tracee thread runs at a time, so between two stops this is the running
/// thread's own progress: time the tracer spends, time the thread sits stopped, and the
/// kernel's work for each ptrace stop (system time) do not count.
pub fn user_cpu_time(pid: nix::unistd::Pid) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos(
        ticks.saturating_mul(1_000_000_000 / per_second),
    ))
}

/// A periodic timer delivering SIGALRM to the thread that created it.
pub struct Watchdog {
    timer: libc::timer_t,
}

impl Watchdog {
    /// Starts ticking every `period` on the calling thread.
    pub fn start(period: Duration) -> nix::Result<Watchdog> {
        let action = SigAction::new(
            SigHandler::Handler(on_tick),
            SaFlags::empty(),
            SigSet::empty(),
        );
        // SAFETY: the handler does nothing, so it is async-signal-safe.
        unsafe { sigaction(Signal::SIGALRM, &action) }?;
        // SAFETY: sigevent is plain data; zeroed is a valid starting value.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = libc::SIGALRM;
        sev.sigev_notify_thread_id = nix::unistd::gettid().as_raw();
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid pointers to initialised locals.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut timer) } != 0 {
            return Err(nix::errno::Errno::last());
        }
        let ts = libc::timespec {
            tv_sec: period.as_secs() as libc::time_t,
            tv_nsec: period.subsec_nanos() as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: ts,
            it_value: ts,
        };
        // SAFETY: `timer` was created above; spec is initialised.
        if unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(nix::errno::Errno::last());
        }
        Ok(Watchdog { timer })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // SAFETY: the timer was created by `start` and is deleted once.
        unsafe {
            libc::timer_delete(self.timer);
        }
    }
}
