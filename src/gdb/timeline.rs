//! The session's way back: the path of stops gdb has seen in the current execution, each
//! reached by one [`Segment`] (what gdb changed at the stop before, and how it resumed).
//! The replay is deterministic, so re-executing the program and applying the same segments
//! silently reaches exactly the same stop again; going back is such a re-execution
//! ([`Plan`]). `reverse-continue` first re-executes the whole path with gdb's current
//! breakpoints and watchpoints added (a scan), notes the last moment one of them was hit
//! before the present, and then re-executes up to that moment. Pure bookkeeping: no
//! ptrace here.

use std::collections::BTreeSet;

use super::arch::Regs;
use super::bridge::{Goal, WatchWhat};
use crate::model::ThreadId;

/// A watchpoint as gdb set it: address, length, kind.
pub type WatchSpec = (u64, u64, WatchWhat);

/// A change gdb made to the stopped program, applied again at the same stop on re-execution.
#[derive(Debug, Clone)]
pub enum Action {
    /// Bytes written at an address.
    Memory(u64, Vec<u8>),
    /// A thread's registers written.
    Registers(ThreadId, Box<Regs>),
}

/// How the replay went from one stop to the next.
#[derive(Debug, Clone)]
pub struct Segment {
    /// What gdb changed at the stop before resuming.
    pub actions: Vec<Action>,
    /// How it resumed.
    pub goal: Goal,
    /// gdb's breakpoints while it ran.
    pub bps: BTreeSet<u64>,
    /// gdb's watchpoints while it ran.
    pub watches: Vec<WatchSpec>,
    /// Stopping moments (breakpoint hits, watchpoint hits, goal points) passed before the one
    /// that ended it (non-zero only for a segment that ends at a moment found by a scan).
    pub skip: u32,
    /// The segment ended at gdb's interrupt (Ctrl-C), at this executor poll of the segment
    /// (1-based): interrupts are replayed at the same poll.
    pub interrupt_at: Option<u64>,
}

/// The stops of the current execution's path.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Where the path's first stop is: `main`, or scheduling decision N.
    pub until: Option<u64>,
    /// Segment i leads from stop i to stop i + 1.
    pub path: Vec<Segment>,
}

/// gdb's breakpoints and watchpoints to look for in a scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Breakpoint addresses.
    pub bps: BTreeSet<u64>,
    /// Watchpoints.
    pub watches: Vec<WatchSpec>,
}

/// What the scan does once the path is replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Then {
    /// Stop there and show gdb that stop.
    Stop,
    /// Show gdb the stop as the beginning of the history (nothing earlier to go to).
    Begin,
    /// The path was replayed with these added to find the last hit before its end.
    Scanned(Scan),
}

/// A re-execution: the first stop, the segments to apply silently, and what then.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The first stop.
    pub until: Option<u64>,
    /// Applied in order at stops 0, 1, ...
    pub segments: Vec<Segment>,
    /// What happens at the stop after the last segment.
    pub then: Then,
}

/// A moment found by a scan: in segment `segment`, the `nth` (1-based) stopping moment
/// under the segment's and the scan's breakpoints together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// The segment it lies in.
    pub segment: usize,
    /// Its rank among the stopping moments of that segment.
    pub nth: u32,
}

impl Timeline {
    /// Re-executes up to stop `stop` (0: the first stop) of the path.
    pub fn back_to(&self, stop: usize, then: Then) -> Plan {
        Plan {
            until: self.until,
            segments: self.path[..stop.min(self.path.len())].to_vec(),
            then,
        }
    }

    /// Re-executes the whole path with `scan`'s breakpoints and watchpoints added, to find
    /// the last of their hits before the present stop.
    pub fn scan(&self, scan: Scan) -> Plan {
        Plan {
            until: self.until,
            segments: self.path.clone(),
            then: Then::Scanned(scan),
        }
    }

    /// Where going back to a scan's result leads: to the moment `found` (a plan whose last
    /// segment runs with both sets of breakpoints and passes the moments before it), or,
    /// with nothing found, to the path's first stop as the beginning of the history.
    pub fn after_scan(&self, scan: &Scan, found: Option<Found>) -> Plan {
        let Some(f) = found.filter(|f| f.segment < self.path.len() && f.nth > 0) else {
            return self.back_to(0, Then::Begin);
        };
        let mut segments = self.path[..f.segment].to_vec();
        let mut last = with_scan(&self.path[f.segment], scan);
        last.skip = f.nth - 1;
        last.interrupt_at = None;
        segments.push(last);
        Plan {
            until: self.until,
            segments,
            then: Then::Stop,
        }
    }

    /// The stop one instruction back, when the present stop was reached by stepping one
    /// instruction (gdb's stepi) from the stop before.
    pub fn one_instruction_back(&self) -> Option<usize> {
        let last = self.path.last()?;
        matches!(last.goal, Goal::Instruction(_)).then(|| self.path.len() - 1)
    }
}

/// `seg` running with `scan`'s breakpoints and watchpoints too.
pub fn with_scan(seg: &Segment, scan: &Scan) -> Segment {
    let mut s = seg.clone();
    s.bps.extend(scan.bps.iter().copied());
    for w in &scan.watches {
        if !s.watches.contains(w) {
            s.watches.push(*w);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(goal: Goal, bps: &[u64]) -> Segment {
        Segment {
            actions: Vec::new(),
            goal,
            bps: bps.iter().copied().collect(),
            watches: Vec::new(),
            skip: 0,
            interrupt_at: None,
        }
    }

    fn timeline() -> Timeline {
        Timeline {
            until: None,
            path: vec![
                seg(Goal::Continue, &[0x10]),
                seg(Goal::Instruction(1), &[]),
                seg(Goal::Continue, &[0x20]),
            ],
        }
    }

    #[test]
    fn back_to_replays_the_segments_before_the_stop() {
        let p = timeline().back_to(2, Then::Stop);
        assert_eq!(p.segments.len(), 2);
        assert_eq!(p.segments[1].goal, Goal::Instruction(1));
        assert_eq!(timeline().back_to(9, Then::Stop).segments.len(), 3);
    }

    #[test]
    fn a_scan_result_runs_its_segment_with_both_sets_and_skips_the_earlier_moments() {
        let tl = timeline();
        let scan = Scan {
            bps: [0x30].into_iter().collect(),
            watches: vec![(0x100, 4, WatchWhat::Write)],
        };
        let p = tl.after_scan(&scan, Some(Found { segment: 2, nth: 3 }));
        assert_eq!(p.then, Then::Stop);
        assert_eq!(p.segments.len(), 3);
        let last = &p.segments[2];
        assert_eq!(last.skip, 2);
        assert_eq!(last.bps, [0x20, 0x30].into_iter().collect());
        assert_eq!(last.watches, scan.watches);
        // Nothing found: the beginning.
        let p = tl.after_scan(&scan, None);
        assert_eq!((p.segments.len(), p.then), (0, Then::Begin));
    }

    #[test]
    fn one_instruction_back_only_after_a_step() {
        let mut tl = timeline();
        assert_eq!(tl.one_instruction_back(), None);
        tl.path.push(seg(Goal::Instruction(1), &[]));
        assert_eq!(tl.one_instruction_back(), Some(3));
        assert_eq!(tl.back_to(3, Then::Stop).segments.len(), 3);
    }
}
