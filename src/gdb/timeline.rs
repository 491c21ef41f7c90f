//! The session's way back: the path of stops gdb has seen in the current execution, each
//! reached by one [`Segment`] (what gdb changed at the stop before, and how it resumed).
//! The replay is deterministic, so re-executing the program and applying the same segments
//! silently reaches exactly the same stop again; going back is such a re-execution
//! ([`Plan`]). `reverse-continue` first re-executes the whole path with gdb's current
//! breakpoints and watchpoints added (a scan), notes the last moment one of them was hit
//! before the present, and then re-executes up to that moment. `reverse-stepi` from a stop
//! not reached by a stepi takes three re-executions ([`StepBack`]): one notes where the
//! thread last passed one of mcheck's breakpoints (an *anchor*: a moment the replay can stop
//! the thread and step it), one stops there and single-steps the thread until its
//! registers are those of the present stop, counting, and one stops one instruction short
//! of that. Pure bookkeeping: no ptrace here.

use std::collections::BTreeSet;

use super::arch::Regs;
use super::bridge::{Goal, WatchWhat};
use crate::model::ThreadId;

/// A watchpoint as gdb set it: address, length, kind.
pub type WatchSpec = (u64, u64, WatchWhat);

/// A change gdb made to the stopped program, applied again at the same stop on re-execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Bytes written at an address.
    Memory(u64, Vec<u8>),
    /// A thread's registers written.
    Registers(ThreadId, Box<Regs>),
}

/// How the replay went from one stop to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Only the moments after scheduling decision N (from when the executor reached it)
    /// count and can end the segment: a moment found by a scan that started from the
    /// snapshot at decision N, which counted from there.
    pub skip_from: Option<u64>,
    /// The segment ended at gdb's interrupt (Ctrl-C), at this executor poll of the segment
    /// (1-based): interrupts are replayed at the same poll.
    pub interrupt_at: Option<u64>,
    /// Scheduling decisions taken at the stop it starts from ([`UNKNOWN_STEP`] when not
    /// known: a step back's stepped instructions).
    pub from_step: u64,
}

/// A segment's [`Segment::from_step`] when it is not known.
pub const UNKNOWN_STEP: u64 = u64::MAX;

/// The stops of the current execution's path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// The path was replayed with these added to find the last hit before its end, in
    /// the window of the execution the scan looks at.
    Scanned(Scan, Window),
    /// The path was replayed to note the anchors of a step back in its last segment.
    FindAnchors(StepBack),
    /// The replay stopped at the step back's last anchor: step the thread to the
    /// present stop, counting.
    CountFrom(StepBack),
    /// Show the stop as the end of a step back (a stepped instruction).
    SteppedBack,
    /// Show the stop (the present one again) with this reason for refusing to go back.
    Refused(String),
}

/// The part of an execution a scan looks at: scans go back from the present in windows,
/// each starting at a fork snapshot and ending where the one after it started, so that a
/// hit near the present costs the run from the last snapshot only (rr's way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// It starts at the snapshot at this decision (None: at the program's start).
    pub after: Option<u64>,
    /// It ends when the execution reaches this decision (None: at the present stop).
    pub before: Option<u64>,
}

/// The registers that tell two moments of one thread apart: rax..r15, rip, and the
/// arithmetic flags (the trap and resume flags differ between stepping and running).
pub type RegsKey = [u64; 18];

/// The key of ptrace's registers `r`.
pub fn regs_key(r: &libc::user_regs_struct) -> RegsKey {
    /// CF, PF, AF, ZF, SF, DF, OF.
    const FLAGS: u64 = 0x0cd5;
    [
        r.rax,
        r.rbx,
        r.rcx,
        r.rdx,
        r.rsi,
        r.rdi,
        r.rbp,
        r.rsp,
        r.r8,
        r.r9,
        r.r10,
        r.r11,
        r.r12,
        r.r13,
        r.r14,
        r.r15,
        r.rip,
        r.eflags & FLAGS,
    ]
}

/// Going back one instruction of `thread` from the present stop of `present` when it was
/// not reached by a stepi.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepBack {
    /// The thread going back.
    pub thread: ThreadId,
    /// Its registers at the present stop.
    pub target: RegsKey,
    /// The path up to the present stop.
    pub present: Timeline,
    /// Where `thread` could be stopped and stepped in the last segment with no scheduling
    /// decision between there and the present stop, in order: 0 for the stop the segment
    /// starts from, N for its N-th interrupt poll (one of mcheck's breakpoints, or the
    /// thread about to run after a decision).
    pub anchors: Vec<u64>,
    /// The scheduling decision of the last segment (its number) that ran `thread` before
    /// the anchors: the moment before the first anchor, when mcheck executed the
    /// decision's operation (a lock call, say) for the thread.
    pub point: Option<u64>,
}

impl StepBack {
    /// Re-executes the present path, noting the anchors (None: there is no segment, the
    /// present stop is the first).
    pub fn find_anchors(self) -> Option<Plan> {
        (!self.present.path.is_empty()).then(|| Plan {
            until: self.present.until,
            segments: self.present.path.clone(),
            then: Then::FindAnchors(self),
        })
    }

    /// Re-executes the present path up to the last anchor, to count the steps from there
    /// (None: no anchor left).
    pub fn count_from_last_anchor(self) -> Option<Plan> {
        let segments = self.to_last_anchor()?;
        Some(Plan {
            until: self.present.until,
            segments,
            then: Then::CountFrom(self),
        })
    }

    /// The segments that reach the last anchor: anchor 0 is the stop the last segment
    /// starts from, anchor N the N-th interrupt poll of that segment.
    fn to_last_anchor(&self) -> Option<Vec<Segment>> {
        let anchor = *self.anchors.last()?;
        let mut segments = self.present.path.clone();
        if anchor == 0 {
            segments.pop()?;
        } else {
            segments.last_mut()?.interrupt_at = Some(anchor);
        }
        Some(segments)
    }

    /// The step back found: the present path up to the last anchor, then `steps` stepped
    /// instructions of the thread.
    pub fn stepped_back(&self, steps: u64) -> Plan {
        let (Some(mut segments), Some(last)) = (self.to_last_anchor(), self.present.path.last())
        else {
            return self.refused(String::new());
        };
        let step = Segment {
            actions: Vec::new(),
            goal: Goal::Instruction(self.thread),
            bps: last.bps.clone(),
            watches: last.watches.clone(),
            skip: 0,
            skip_from: None,
            interrupt_at: None,
            from_step: UNKNOWN_STEP,
        };
        segments.extend(std::iter::repeat_n(step, steps as usize));
        Plan {
            until: self.present.until,
            segments,
            then: Then::SteppedBack,
        }
    }

    /// Going back one instruction from the stop before the present one, when the thread
    /// did not move since (None: that is the first stop).
    pub fn back_from_stop_before(&self) -> Option<Plan> {
        let mut before = self.present.clone();
        before.path.pop()?;
        if let Some(i) = before.one_instruction_back() {
            return Some(before.back_to(i, Then::SteppedBack));
        }
        StepBack {
            present: before,
            anchors: Vec::new(),
            point: None,
            ..self.clone()
        }
        .find_anchors()
    }

    /// The present path, its last segment stopping at scheduling decision `n` instead.
    pub fn at_point(&self, n: u64) -> Plan {
        let mut segments = self.present.path.clone();
        if let Some(last) = segments.last_mut() {
            last.goal = Goal::Step(n);
            last.interrupt_at = None;
        }
        Plan {
            until: self.present.until,
            segments,
            then: Then::SteppedBack,
        }
    }

    /// Back to the present stop, saying `why` going back is refused.
    pub fn refused(&self, why: String) -> Plan {
        Plan {
            until: self.present.until,
            segments: self.present.path.clone(),
            then: Then::Refused(why),
        }
    }
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
/// under the segment's and the scan's breakpoints together, counted from the segment's
/// start or from scheduling decision `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// The segment it lies in.
    pub segment: usize,
    /// Its rank among the stopping moments of that segment counted.
    pub nth: u32,
    /// Counted from this decision on (the snapshot the scan started from) rather than
    /// from the segment's start.
    pub from: Option<u64>,
}

impl Timeline {
    /// Goes back to scheduling decision `n` keeping the history before it: the path up to
    /// its last stop before decision `n`, then a segment that runs to decision `n` passing
    /// breakpoints, watchpoints and races on the way (a later `reverse-continue` can go back
    /// before `n`). With no such stop, a new path whose first stop is decision `n`.
    pub fn goto_back(&self, n: u64) -> Plan {
        let before = (self.path.iter()).rposition(|s| s.from_step < n);
        let Some(i) = before else {
            return Plan {
                until: Some(n),
                segments: Vec::new(),
                then: Then::Stop,
            };
        };
        let mut segments = self.path[..i].to_vec();
        segments.push(Segment {
            actions: self.path[i].actions.clone(),
            goal: Goal::At(n),
            bps: BTreeSet::new(),
            watches: Vec::new(),
            skip: 0,
            skip_from: None,
            interrupt_at: None,
            from_step: self.path[i].from_step,
        });
        Plan {
            until: self.until,
            segments,
            then: Then::Stop,
        }
    }

    /// Re-executes up to stop `stop` (0: the first stop) of the path.
    pub fn back_to(&self, stop: usize, then: Then) -> Plan {
        Plan {
            until: self.until,
            segments: self.path[..stop.min(self.path.len())].to_vec(),
            then,
        }
    }

    /// Re-executes the whole path with `scan`'s breakpoints and watchpoints added, to find
    /// the last of their hits before the present stop (in the window from the latest fork
    /// snapshot on, to begin with: see [`Window`]).
    pub fn scan(&self, scan: Scan) -> Plan {
        self.scan_before(scan, None)
    }

    /// The same, looking at the execution up to decision `before` only (None: up to the
    /// present stop).
    pub fn scan_before(&self, scan: Scan, before: Option<u64>) -> Plan {
        Plan {
            until: self.until,
            segments: self.path.clone(),
            then: Then::Scanned(
                scan,
                Window {
                    after: None,
                    before,
                },
            ),
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
        last.skip_from = f.from;
        last.interrupt_at = None;
        segments.push(last);
        Plan {
            until: self.until,
            segments,
            then: Then::Stop,
        }
    }

    /// Where a scan of `window` that found `found` leads: to that moment; with nothing
    /// found, to a scan of the window before (when this one started at a snapshot), or to
    /// the first stop as the beginning of the history.
    pub fn after_window(&self, scan: &Scan, window: Window, found: Option<Found>) -> Plan {
        match (found, window.after) {
            (None, Some(d)) => self.scan_before(scan.clone(), Some(d)),
            _ => self.after_scan(scan, found),
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
pub(crate) mod tests {
    use super::*;

    /// A segment with `goal` and breakpoints `bps`, nothing else (also for checkpoints.rs).
    pub(crate) fn seg(goal: Goal, bps: &[u64]) -> Segment {
        Segment {
            actions: Vec::new(),
            goal,
            bps: bps.iter().copied().collect(),
            watches: Vec::new(),
            skip: 0,
            skip_from: None,
            interrupt_at: None,
            from_step: UNKNOWN_STEP,
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
        let found = Found {
            segment: 2,
            nth: 3,
            from: Some(40),
        };
        let p = tl.after_scan(&scan, Some(found));
        assert_eq!(p.then, Then::Stop);
        assert_eq!(p.segments.len(), 3);
        let last = &p.segments[2];
        assert_eq!((last.skip, last.skip_from), (2, Some(40)));
        assert_eq!(last.bps, [0x20, 0x30].into_iter().collect());
        assert_eq!(last.watches, scan.watches);
        // Nothing found: the beginning.
        let p = tl.after_scan(&scan, None);
        assert_eq!((p.segments.len(), p.then), (0, Then::Begin));
    }

    fn step_back(path: Vec<Segment>, anchors: &[u64]) -> StepBack {
        StepBack {
            thread: 1,
            target: [7; 18],
            present: Timeline { until: None, path },
            anchors: anchors.to_vec(),
            point: None,
        }
    }

    #[test]
    fn a_step_back_counts_from_its_last_anchor_and_stops_one_step_short() {
        // Anchor N: the last segment runs to its N-th poll.
        let p = step_back(timeline().path, &[0, 4])
            .count_from_last_anchor()
            .unwrap();
        assert!(matches!(p.then, Then::CountFrom(_)));
        assert_eq!(p.segments.len(), 3);
        assert_eq!(p.segments[2].interrupt_at, Some(4));
        // Anchor 0: the stop the last segment starts from.
        let back = step_back(timeline().path, &[0]);
        let p = back.clone().count_from_last_anchor().unwrap();
        assert_eq!(p.segments.len(), 2);
        // Found 3 steps from the anchor: stop after 2 of them, shown as a step.
        let p = back.stepped_back(2);
        assert_eq!(p.then, Then::SteppedBack);
        assert_eq!(p.segments.len(), 4);
        assert!(p.segments[2..]
            .iter()
            .all(|s| s.goal == Goal::Instruction(1) && s.actions.is_empty()));
        // No anchor: nothing to count from.
        assert!(step_back(timeline().path, &[])
            .count_from_last_anchor()
            .is_none());
        assert!(step_back(Vec::new(), &[]).find_anchors().is_none());
    }

    #[test]
    fn a_thread_that_did_not_move_goes_back_from_the_stop_before() {
        // The stop before was reached by a stepi: undo it.
        let mut path = timeline().path;
        path.insert(2, seg(Goal::Instruction(1), &[]));
        let p = step_back(path, &[0]).back_from_stop_before().unwrap();
        assert_eq!((p.segments.len(), p.then), (2, Then::SteppedBack));
        // Otherwise its anchors are looked for in the segment before.
        let path = vec![seg(Goal::Continue, &[]); 3];
        let p = step_back(path, &[0]).back_from_stop_before().unwrap();
        assert_eq!(p.segments.len(), 2);
        let Then::FindAnchors(b) = p.then else {
            panic!("{:?}", p.then)
        };
        assert_eq!((b.present.path.len(), b.anchors.len()), (2, 0));
        assert!(step_back(vec![seg(Goal::Continue, &[])], &[0])
            .back_from_stop_before()
            .is_none());
    }

    #[test]
    fn going_back_to_a_decision_keeps_the_history_before_it() {
        let mut tl = timeline();
        for (s, from) in tl.path.iter_mut().zip([0, 5, 5]) {
            s.from_step = from;
        }
        tl.path[1].actions = vec![Action::Memory(0x10, vec![1])];
        // Decision 5: from the first stop, the only one before it.
        let p = tl.goto_back(5);
        assert_eq!((p.segments.len(), p.until, &p.then), (1, None, &Then::Stop));
        assert_eq!(p.segments[0].goal, Goal::At(5));
        assert!(p.segments[0].bps.is_empty());
        // Decision 9: from the last stop before it, gdb's writes there kept.
        let p = tl.goto_back(9);
        assert_eq!(p.segments.len(), 3);
        assert_eq!(p.segments[2].goal, Goal::At(9));
        assert_eq!(p.segments[..2], tl.path[..2]);
        // Decision 0: nothing before it, a new path.
        let p = tl.goto_back(0);
        assert_eq!((p.segments.len(), p.until), (0, Some(0)));
        // A stepped instruction's stop is not known: never a start.
        tl.path[2].from_step = UNKNOWN_STEP;
        assert_eq!(tl.goto_back(9).segments.len(), 2);
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
