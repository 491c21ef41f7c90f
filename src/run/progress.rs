//! How much of a running thread's CPU time is the program's own progress: the watchdog
//! (`--execution-timeout`) must not count what recording accesses in patched code costs
//! the thread, or tracing would look like a spin; nor may that discount hide a real spin.
//!
//! A thread that only reads a few bytes over and over, writing nothing, is spinning
//! whatever tracing costs: its time counts in full. Otherwise each logged access is taken
//! to cost at most `RECORD_COST`, each access recorded at a breakpoint (a trap into the
//! kernel and a stop, which the thread's own CPU time shows) `TRAP_COST`, and the discount
//! never exceeds `MAX_DISCOUNT` of the time used, so a spin that reads more widely still
//! reaches the limit.

use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::tracee::watchdog::user_cpu_time;

/// A thread stopped nowhere this many times `--execution-timeout` (wall clock) is taken
/// out: it is blocked in the kernel.
pub(super) const WALL_FACTOR: u32 = 10;

/// The running thread's clock, the executor's part that tells a spin from tracing cost:
/// when it was resumed, the program's CPU time then, what it logged since, and whether the
/// watchdog has interrupted it.
#[derive(Debug)]
pub(super) struct Watchdog {
    resumed_at: Instant,
    /// The program's CPU time at the first look since the thread was resumed (read at the
    /// watchdog's first tick, not at every resume: reading it costs a /proc read, and a
    /// resume happens at every scheduling decision).
    resumed_cpu: Option<Duration>,
    logged: LoggedSinceResume,
    interrupt_sent: bool,
    /// The interrupt was sent early, to learn a busy wait (`should_interrupt`).
    spin_interrupt: bool,
}

impl Default for Watchdog {
    fn default() -> Self {
        Watchdog {
            resumed_at: Instant::now(),
            resumed_cpu: None,
            logged: LoggedSinceResume::default(),
            interrupt_sent: false,
            spin_interrupt: false,
        }
    }
}

impl Watchdog {
    /// A thread is resumed now.
    pub fn resumed(&mut self) {
        self.resumed_at = Instant::now();
        self.resumed_cpu = None;
        self.logged = LoggedSinceResume::default();
        self.interrupt_sent = false;
        self.spin_interrupt = false;
    }

    /// The accesses the running thread logged since it was resumed.
    pub fn logged(&mut self) -> &mut LoggedSinceResume {
        &mut self.logged
    }

    /// The running thread's own progress since the first look after it was resumed (at
    /// most one watchdog tick after the resume): the user-mode CPU time process `pid`
    /// used, less what recording its accesses cost it (`pending`: accesses logged and not
    /// drained yet).
    pub fn progress(&mut self, pid: Pid, pending: u64) -> Duration {
        let now = user_cpu_time(pid).unwrap_or_default();
        let since = *self.resumed_cpu.get_or_insert(now);
        self.logged.progress(now.saturating_sub(since), pending)
    }

    /// At a watchdog tick: whether to interrupt thread `tid` of `pid`, which has used more
    /// than `limit` of its own CPU time since it was resumed (a spin), or has been stopped
    /// nowhere for `WALL_FACTOR` times that long in wall time (blocked in the kernel), or,
    /// when `learnable` (it made an atomic load that could be a busy wait's), has read only
    /// a few nearby addresses for [`SPIN_LEARN_AFTER`] (`interrupted_to_learn`). At most
    /// once per resume.
    pub fn should_interrupt(
        &mut self,
        pid: Pid,
        tid: Pid,
        limit: Duration,
        pending: u64,
        learnable: bool,
    ) -> bool {
        if self.interrupt_sent {
            return false;
        }
        let progress = self.progress(pid, pending);
        let spins = progress > limit;
        let blocked = self.resumed_at.elapsed() > limit * WALL_FACTOR && sleeps_in_kernel(pid, tid);
        self.spin_interrupt = !spins
            && !blocked
            && learnable
            && progress > SPIN_LEARN_AFTER.min(limit)
            && self.logged.looks_like_a_spin();
        self.interrupt_sent = spins || blocked || self.spin_interrupt;
        self.interrupt_sent
    }

    /// Whether the interrupt was sent early, because the thread looked like a busy wait on
    /// an atomic load (`should_interrupt`).
    pub fn interrupted_to_learn(&self) -> bool {
        self.spin_interrupt
    }

    /// Whether the watchdog interrupted the running thread since it was resumed.
    pub fn interrupted(&self) -> bool {
        self.interrupt_sent
    }

    /// Seconds since the running thread was resumed (wall clock).
    pub fn seconds_running(&self) -> f64 {
        self.resumed_at.elapsed().as_secs_f64()
    }
}

/// Whether thread `tid` of `pid` sleeps in the kernel (state S or D), rather than runs.
fn sleeps_in_kernel(pid: Pid, tid: Pid) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"));
    stat.ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with(['S', 'D']))
        })
        .unwrap_or(false)
}

/// An upper bound of what appending one record costs the thread in patched code.
const RECORD_COST: Duration = Duration::from_nanos(20);

/// What an access recorded at a breakpoint costs the thread itself: the trap, the stop,
/// the caches it comes back to (its own CPU time, not the tracer's).
const TRAP_COST: Duration = Duration::from_micros(5);

/// At most this share (n/16) of the CPU time used is taken as tracing cost.
const MAX_DISCOUNT_SIXTEENTHS: u32 = 15;

/// The program's own CPU time after which a thread that only reads a few nearby addresses,
/// one of them with an atomic load, is taken for a busy wait (`should_interrupt`).
const SPIN_LEARN_AFTER: Duration = Duration::from_secs(1);

/// Reads in a row, all of a few nearby addresses and with no write between them, after
/// which a thread is taken for a busy wait (`LoggedSinceResume::busy_wait`): when its
/// reads trap, its own CPU time grows too slowly to tell (each trap is paid in the kernel).
const SPIN_LEARN_READS: u64 = 20_000;

/// Reads within this many bytes of each other, with no write, are a spin's reads.
const SPIN_SPAN: u64 = 4096;

/// The accesses a thread logged since it was last resumed.
#[derive(Debug, Clone, Copy)]
pub struct LoggedSinceResume {
    count: u64,
    trapped: u64,
    wrote: bool,
    lowest: u64,
    highest: u64,
    /// Reads in a row within [`SPIN_SPAN`] of each other, with no write (`busy_wait`).
    tight_reads: u64,
    tight_low: u64,
    tight_high: u64,
}

impl Default for LoggedSinceResume {
    fn default() -> Self {
        LoggedSinceResume {
            count: 0,
            trapped: 0,
            wrote: false,
            lowest: u64::MAX,
            highest: 0,
            tight_reads: 0,
            tight_low: 0,
            tight_high: 0,
        }
    }
}

impl LoggedSinceResume {
    /// Notes one logged access.
    pub fn note(&mut self, addr: u64, write: bool) {
        self.count += 1;
        if write {
            self.wrote = true;
            self.tight_reads = 0;
        } else {
            self.lowest = self.lowest.min(addr);
            self.highest = self.highest.max(addr);
            let (low, high) = (self.tight_low.min(addr), self.tight_high.max(addr));
            if self.tight_reads > 0 && high - low < SPIN_SPAN {
                self.tight_reads += 1;
                (self.tight_low, self.tight_high) = (low, high);
            } else {
                (self.tight_reads, self.tight_low, self.tight_high) = (1, addr, addr);
            }
        }
    }

    /// Notes one access recorded at a breakpoint.
    pub fn note_trapped(&mut self, addr: u64, write: bool) {
        self.note(addr, write);
        self.trapped += 1;
    }

    /// Whether the thread has read a few nearby addresses so many times in a row, writing
    /// nothing, that it must be a busy wait.
    pub fn busy_wait(&self) -> bool {
        self.tight_reads >= SPIN_LEARN_READS
    }

    /// Whether the accesses look like a busy wait: reads only, all close together.
    fn looks_like_a_spin(&self) -> bool {
        !self.wrote && self.count > 0 && self.highest.saturating_sub(self.lowest) < SPIN_SPAN
    }

    /// The program's progress out of `used` CPU time, with `pending` more accesses logged
    /// and not yet drained.
    pub fn progress(&self, used: Duration, pending: u64) -> Duration {
        if self.looks_like_a_spin() {
            return used;
        }
        let logged = (self.count + pending).min(u32::MAX as u64) as u32;
        let trapped = self.trapped.min(u32::MAX as u64) as u32;
        let cap = used * MAX_DISCOUNT_SIXTEENTHS / 16;
        let cost = (RECORD_COST * logged).saturating_add(TRAP_COST * trapped);
        used.saturating_sub(cost.min(cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn a_busy_wait_on_one_flag_counts_in_full() {
        let mut l = LoggedSinceResume::default();
        for _ in 0..1_000_000 {
            l.note(0x5000, false);
        }
        assert_eq!(l.progress(SEC, 0), SEC);
    }

    #[test]
    fn work_that_writes_is_discounted_but_never_to_nothing() {
        let mut l = LoggedSinceResume::default();
        for i in 0..1000u64 {
            l.note(0x5000 + 8 * i, i % 2 == 0);
        }
        let p = l.progress(SEC, 40_000_000);
        assert!(p < SEC / 2, "{p:?}");
        let p = l.progress(SEC, 4_000_000_000);
        assert_eq!(p, SEC / 16);
    }

    #[test]
    fn a_wide_read_only_scan_is_discounted() {
        let mut l = LoggedSinceResume::default();
        for i in 0..1_000_000u64 {
            l.note(0x10_0000 + 8 * i, false);
        }
        assert!(l.progress(SEC, 0) < SEC);
    }

    #[test]
    fn accesses_at_breakpoints_are_discounted_more() {
        let (mut logged, mut trapped) =
            (LoggedSinceResume::default(), LoggedSinceResume::default());
        for i in 0..10_000u64 {
            logged.note(0x5000 + 8 * i, i % 2 == 0);
            trapped.note_trapped(0x5000 + 8 * i, i % 2 == 0);
        }
        assert!(trapped.progress(SEC, 0) < logged.progress(SEC, 0));
        assert!(trapped.progress(SEC, 0) >= SEC / 16);
        // A spin is a spin whichever way its reads are seen.
        let mut spin = LoggedSinceResume::default();
        for _ in 0..100_000 {
            spin.note_trapped(0x5000, false);
        }
        assert_eq!(spin.progress(SEC, 0), SEC);
    }

    #[test]
    fn a_busy_wait_is_many_nearby_reads_in_a_row_whatever_came_before() {
        let mut l = LoggedSinceResume::default();
        // What the thread did before it began to wait: far away, and a write.
        l.note(0x7fff_0000, false);
        l.note(0x1000, true);
        for i in 0..SPIN_LEARN_READS - 1 {
            l.note_trapped(0x5000 + 8 * (i % 4), false);
        }
        assert!(!l.busy_wait(), "one read short");
        l.note_trapped(0x5008, false);
        assert!(l.busy_wait());
        l.note(0x5000, true);
        assert!(!l.busy_wait(), "a write ends the run of reads");
        let mut scan = LoggedSinceResume::default();
        for i in 0..2 * SPIN_LEARN_READS {
            scan.note(0x10_0000 + 8 * i, false);
        }
        assert!(!scan.busy_wait(), "a wide read-only scan is no busy wait");
    }

    #[test]
    fn nothing_logged_means_all_progress() {
        assert_eq!(LoggedSinceResume::default().progress(SEC, 0), SEC);
    }
}
