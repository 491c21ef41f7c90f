//! mcheck's bound on its own memory (`--max-memory`): the tracer's resident set plus the
//! proportional share (PSS) of its snapshot templates, whose pages are mostly shared with
//! the copies forked from them. The traced program's own memory is not counted: it is the
//! program's. The search looks about once a second; from three quarters of the bound it
//! sheds what it can rebuild or do without (branch snapshots, the state cache), and at the
//! bound it stops with a full report, as for any budget.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::tracee::procfs;

/// Snapshot templates alive in this process (any worker).
static TEMPLATES: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// How often the memory is measured.
const PERIOD: Duration = Duration::from_secs(1);

/// Counts `pid` as a snapshot template of this mcheck from now on.
pub(in crate::run) fn register_template(pid: Pid) {
    TEMPLATES.lock().expect("templates").insert(pid.as_raw());
}

/// Stops counting `pid` (its template was discarded).
pub(in crate::run) fn forget_template(pid: Pid) {
    TEMPLATES.lock().expect("templates").remove(&pid.as_raw());
}

/// Memory mcheck holds, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// The tracer's own resident set (its search tree, caches, every worker's state).
    pub tracer: u64,
    /// The snapshot templates' proportional share of their resident pages.
    pub snapshots: u64,
}

impl Usage {
    /// Measures it now.
    pub fn now() -> Usage {
        let templates: Vec<i32> = TEMPLATES
            .lock()
            .expect("templates")
            .iter()
            .copied()
            .collect();
        Usage {
            tracer: procfs::resident_bytes(Pid::this()),
            snapshots: templates
                .into_iter()
                .map(|p| procfs::proportional_bytes(Pid::from_raw(p)))
                .sum(),
        }
    }

    /// Both together.
    pub fn total(&self) -> u64 {
        self.tracer + self.snapshots
    }

    /// For messages: "1234 MiB (200 MiB of it in snapshots)".
    pub fn describe(&self) -> String {
        format!(
            "{} MiB ({} MiB of it in fork snapshots)",
            self.total() >> 20,
            self.snapshots >> 20
        )
    }
}

/// What the search should do about its memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pressure {
    /// Nothing.
    None,
    /// Drop what can be rebuilt or done without (said once).
    Shed(Usage),
    /// Stop the search.
    Stop(Usage),
}

/// Watches the memory against a limit.
#[derive(Debug)]
pub struct MemoryGuard {
    limit: u64,
    shed: bool,
    next: Instant,
    /// The most seen.
    pub peak: u64,
    /// The last measured.
    pub last: u64,
}

impl MemoryGuard {
    /// A guard for `limit` bytes.
    pub fn new(limit: u64) -> MemoryGuard {
        MemoryGuard {
            limit,
            shed: false,
            next: Instant::now(),
            peak: 0,
            last: 0,
        }
    }

    /// Measures (at most once per second) and says what to do.
    pub fn check(&mut self) -> Pressure {
        if Instant::now() < self.next {
            return Pressure::None;
        }
        self.next = Instant::now() + PERIOD;
        self.judge(Usage::now())
    }

    /// What to do at `usage`.
    fn judge(&mut self, usage: Usage) -> Pressure {
        let total = usage.total();
        self.peak = self.peak.max(total);
        self.last = total;
        if total >= self.limit {
            Pressure::Stop(usage)
        } else if !self.shed && total >= self.limit / 4 * 3 {
            self.shed = true;
            Pressure::Shed(usage)
        } else {
            Pressure::None
        }
    }
}

/// The default `--max-memory`: half of the machine's memory (4 GiB when unknown).
pub fn default_limit() -> u64 {
    crate::tracee::procfs::kib_field("/proc/meminfo", "MemTotal:").map_or(4 << 30, |t| t / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sheds_once_then_stops_at_the_limit() {
        let mut g = MemoryGuard::new(1000);
        let at = |tracer, snapshots| Usage { tracer, snapshots };
        assert_eq!(g.judge(at(100, 100)), Pressure::None);
        assert_eq!(g.judge(at(600, 200)), Pressure::Shed(at(600, 200)));
        assert_eq!(g.judge(at(700, 200)), Pressure::None);
        assert_eq!(g.judge(at(900, 100)), Pressure::Stop(at(900, 100)));
        assert_eq!(g.peak, 1000);
    }

    #[test]
    fn the_tracer_counts_itself() {
        let u = Usage::now();
        assert!(u.tracer > 1 << 20, "{u:?}");
        assert!(default_limit() > 1 << 20);
    }
}
