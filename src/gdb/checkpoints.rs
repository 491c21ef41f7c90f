//! Where a re-execution may start instead of the program's start: the fork snapshots the
//! session takes at scheduling decisions (rr's checkpoints), each with the bridge's state at
//! its moment. A snapshot serves a [`Plan`] when the plan reaches its moment the same way:
//! the same first stop, the same segments before the running one, and a running segment
//! that executes alike up to there and ends after it. Then the re-execution starts from a
//! copy of the snapshot with the bridge's counters of that moment, and going back costs
//! one copy plus the run from the snapshot to the earlier stop. Pure bookkeeping: no ptrace
//! here.

use std::collections::BTreeSet;

#[cfg(doc)]
use super::timeline::Window;
use super::timeline::{with_scan, Plan, Scan, Segment, Then, WatchSpec};

/// The bridge's state at a snapshot: just before it handled scheduling decision `depth`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Decisions taken before it.
    pub depth: u64,
    /// The first stop of the execution that took it.
    pub until: Option<u64>,
    /// Whether that first stop was made; None: the snapshot lies before it.
    pub running: Option<Running>,
}

/// Where a snapshot taken after the first stop lies in its execution's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    /// The segments up to the running one (its last), as the execution was given them
    /// (a live session's path, or a re-execution's plan).
    pub segments: Vec<Segment>,
    /// The scan the execution ran with, if it was one.
    pub scan: Option<Scan>,
    /// Stopping moments the running segment passed because of its `skip`.
    pub ends_passed: u32,
    /// Stopping moments counted in the running segment (its own and the scan's), from
    /// its start or from decision `count_from`.
    pub moments: u32,
    /// See `moments`.
    pub count_from: Option<u64>,
    /// Interrupt polls of the running segment.
    pub polls: u64,
}

/// How a re-execution starts from a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// Decisions taken before it (the snapshot to copy).
    pub depth: u64,
    /// None: the first stop is still to come (a fresh bridge); else the bridge runs
    /// segment `stop_index - 1` of the plan.
    pub running: Option<ResumedSegment>,
}

/// A re-execution resumed inside one of its plan's segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumedSegment {
    /// Stops made before (the running segment is the plan's `stop_index - 1`).
    pub stop_index: usize,
    /// The running segment, its `skip` reduced by the moments it already passed.
    pub seg: Segment,
    /// Moments passed because of `skip`, counted as the plan counts them.
    pub ends_passed: u32,
    /// Moments counted so far in the segment (none: counting starts at the snapshot).
    pub moments: u32,
    /// Moments count from this decision (the snapshot's).
    pub count_from: Option<u64>,
    /// Interrupt polls so far in the segment.
    pub polls: u64,
    /// gdb's breakpoints and watchpoints the segment runs with (a copy has none yet).
    pub bps: BTreeSet<u64>,
    /// See `bps`.
    pub watches: Vec<WatchSpec>,
}

impl Checkpoint {
    /// Whether nothing gdb changed in the program (memory, registers) happened before it:
    /// the program is then as any execution of the schedule has it at that decision.
    pub fn clean(&self) -> bool {
        self.running
            .as_ref()
            .is_none_or(|r| r.segments.iter().all(|s| s.actions.is_empty()))
    }

    /// How `plan` can start from this checkpoint, if it can. A scan starting here looks
    /// at the execution from here on only (its window starts here: see [`Window`]).
    pub fn resume(&self, plan: &Plan) -> Option<Resumed> {
        let window = match &plan.then {
            Then::Scanned(_, w) => Some(*w),
            _ => None,
        };
        if window.is_some_and(|w| w.before.is_some_and(|b| b <= self.depth)) {
            return None;
        }
        // A plan whose first stop is a decision at or after the checkpoint, from a program
        // gdb did not change: a fresh bridge, as in an execution from the start.
        let fresh = plan.until.is_some_and(|n| n >= self.depth)
            && (plan.until != self.until || self.running.is_none())
            && self.clean();
        if fresh {
            return Some(Resumed {
                depth: self.depth,
                running: None,
            });
        }
        if plan.until != self.until {
            return None;
        }
        let r = self.running.as_ref()?;
        let j = r.segments.len().checked_sub(1)?;
        // The plan must run through segment j and stop after it, the same way before it:
        // the same stops, the same changes made by gdb at them.
        let p = plan.segments.get(j)?;
        if plan.segments[..j] != r.segments[..j] {
            return None;
        }
        // Going back one instruction notes its anchors in the last segment from its start.
        if matches!(plan.then, Then::FindAnchors(_)) && j + 1 == plan.segments.len() {
            return None;
        }
        let e = &r.segments[j];
        if p.actions != e.actions || p.goal != e.goal {
            return None;
        }
        if p.interrupt_at.is_some_and(|q| q <= r.polls) {
            return None;
        }
        // The moments the plan's segment passed before the checkpoint: none when it
        // counts only from here on; those the checkpoint's passed when both have the same
        // sets of their own; every moment the checkpoint counted when the plan's own sets
        // are the checkpoint's with its scan's (a stop that scan found).
        let own = |s: &Segment| (s.bps.clone(), s.watches.clone(), s.skip_from);
        let passed = if p.skip_from.is_some_and(|x| x >= self.depth) {
            0
        } else if own(p) == own(e) {
            r.ends_passed
        } else if r.scan.is_some()
            && p.skip_from == r.count_from
            && (p.bps.clone(), p.watches.clone()) == effective(e, r.scan.as_ref())
        {
            r.moments
        } else {
            return None;
        };
        if p.skip < passed {
            return None;
        }
        let mut seg = p.clone();
        seg.skip = p.skip - passed;
        let scan = match &plan.then {
            Then::Scanned(s, _) => Some(s),
            _ => None,
        };
        let (bps, watches) = effective(p, scan);
        Some(Resumed {
            depth: self.depth,
            running: Some(ResumedSegment {
                stop_index: j + 1,
                seg,
                ends_passed: passed,
                moments: 0,
                count_from: Some(self.depth),
                polls: r.polls,
                bps,
                watches,
            }),
        })
    }
}

/// The breakpoints and watchpoints `seg` runs with, its own and `scan`'s.
fn effective(seg: &Segment, scan: Option<&Scan>) -> (BTreeSet<u64>, Vec<WatchSpec>) {
    match scan {
        Some(s) => {
            let m = with_scan(seg, s);
            (m.bps, m.watches)
        }
        None => (seg.bps.clone(), seg.watches.clone()),
    }
}

/// When an execution under gdb takes its fork snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Decisions between two snapshots of one execution, at least (0: none are taken).
    pub every: u64,
    /// Also no sooner than ten times the last snapshot's cost after it, so that taking
    /// them costs the execution a tenth of its time at most.
    pub paced: bool,
}

impl Default for Pacing {
    /// The default: paced, every 200 decisions at most.
    fn default() -> Self {
        Pacing {
            every: 200,
            paced: true,
        }
    }
}

impl Pacing {
    /// What `--gdb-snapshot-every` asks: exactly every N decisions, or the default.
    pub fn from_option(every: Option<u64>) -> Pacing {
        match every {
            Some(every) => Pacing {
                every,
                paced: false,
            },
            None => Pacing::default(),
        }
    }
}

/// What `monitor snapshots` tells: the snapshots kept and where re-executions started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotLog {
    /// When snapshots are taken.
    pub pacing: Pacing,
    /// The decisions the kept snapshots were taken at.
    pub kept: Vec<u64>,
    /// Re-executions (going back) so far.
    pub reexecutions: u64,
    /// Of those, the ones that started from a snapshot, and the decision of the last.
    pub from_snapshot: u64,
    /// See `from_snapshot`.
    pub last_from: Option<u64>,
}

impl SnapshotLog {
    /// Notes a re-execution starting from the snapshot at decision `from` (None: from the
    /// program's start).
    pub fn reexecuted(&mut self, from: Option<u64>) {
        self.reexecutions += 1;
        if from.is_some() {
            self.from_snapshot += 1;
            self.last_from = from;
        }
    }

    /// The report, one paragraph.
    pub fn describe(&self) -> String {
        if self.pacing.every == 0 {
            return format!(
                "mcheck: fork snapshots are off (--gdb-snapshot-every 0): {} re-execution(s), each from the program's start",
                self.reexecutions
            );
        }
        let kept = match self.kept.as_slice() {
            [] => "none kept yet".to_string(),
            k => format!(
                "{} kept, at decision(s) {}",
                k.len(),
                k.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
            ),
        };
        let last = self
            .last_from
            .map_or(String::new(), |d| format!(" (the last from decision {d})"));
        let pace = if self.pacing.paced {
            format!(
                "at most every {} decision(s), and under a tenth of the run's time",
                self.pacing.every
            )
        } else {
            format!("every {} decision(s)", self.pacing.every)
        };
        format!(
            "mcheck: fork snapshots {pace}: {kept}; {} of {} re-execution(s) started from one{last}, the others from the program's start",
            self.from_snapshot, self.reexecutions
        )
    }
}

/// The deepest of `checkpoints` (kept at depths `alive`) that `plan` can start from.
pub fn best<'a>(
    checkpoints: impl Iterator<Item = &'a Checkpoint>,
    alive: &[usize],
    plan: &Plan,
) -> Option<Resumed> {
    checkpoints
        .filter(|c| alive.contains(&(c.depth as usize)))
        .filter_map(|c| c.resume(plan))
        .max_by_key(|r| r.depth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gdb::bridge::{Goal, WatchWhat};
    use crate::gdb::timeline::tests::seg;
    use crate::gdb::timeline::{Action, Found, Timeline, Window};

    fn path() -> Vec<Segment> {
        vec![
            seg(Goal::Continue, &[0x10]),
            seg(Goal::Continue, &[0x10, 0x20]),
            seg(Goal::Continue, &[0x20]),
        ]
    }

    /// A checkpoint of a live session in its segment `j` of `path()`.
    fn live(depth: u64, j: usize) -> Checkpoint {
        Checkpoint {
            depth,
            until: None,
            running: Some(Running {
                segments: path()[..=j].to_vec(),
                scan: None,
                ends_passed: 0,
                moments: 0,
                count_from: None,
                polls: 7,
            }),
        }
    }

    fn plan(segments: Vec<Segment>, then: Then) -> Plan {
        Plan {
            until: None,
            segments,
            then,
        }
    }

    #[test]
    fn a_stop_after_the_checkpoint_on_the_same_path_resumes_in_its_segment() {
        let r = live(40, 1).resume(&plan(path(), Then::Stop)).unwrap();
        let s = r.running.unwrap();
        assert_eq!((r.depth, s.stop_index, s.polls), (40, 2, 7));
        assert_eq!(s.seg, path()[1]);
        // Going back to the stop the checkpoint's segment ends at.
        assert!(live(40, 1)
            .resume(&plan(path()[..2].to_vec(), Then::Stop))
            .is_some());
        // Not to a stop before it: the checkpoint's segment is not run by the plan.
        assert!(live(40, 1)
            .resume(&plan(path()[..1].to_vec(), Then::Stop))
            .is_none());
    }

    #[test]
    fn another_path_or_another_first_stop_does_not_resume() {
        let mut other = path();
        other[0].bps.insert(0x30);
        assert!(live(40, 1).resume(&plan(other, Then::Stop)).is_none());
        let mut moved = path();
        moved[1].goal = Goal::Step(9);
        assert!(live(40, 1).resume(&plan(moved, Then::Stop)).is_none());
        let mut p = plan(path(), Then::Stop);
        p.until = Some(3);
        // Before it: not from a checkpoint at decision 40...
        assert!(live(40, 1).resume(&p).is_none());
        // ...but a first stop at a later decision starts fresh from it, when gdb changed
        // nothing before it.
        p.until = Some(50);
        assert_eq!(live(40, 1).resume(&p).unwrap().running, None);
        let mut dirty = live(40, 1);
        dirty.running.as_mut().unwrap().segments[0].actions = vec![Action::Memory(0x1000, vec![1])];
        assert!(!dirty.clean());
        assert!(dirty.resume(&p).is_none());
    }

    #[test]
    fn an_interrupt_or_a_skipped_moment_before_the_checkpoint_does_not_resume() {
        let mut p = path();
        p[1].interrupt_at = Some(7);
        assert!(live(40, 1).resume(&plan(p.clone(), Then::Stop)).is_none());
        p[1].interrupt_at = Some(8);
        assert!(live(40, 1).resume(&plan(p, Then::Stop)).is_some());
    }

    #[test]
    fn a_scan_starting_at_a_checkpoint_counts_from_there_and_its_hit_resumes_there() {
        let scan = Scan {
            bps: [0x30].into_iter().collect(),
            watches: vec![(0x100, 4, WatchWhat::Write)],
        };
        let tl = Timeline {
            until: None,
            path: path(),
        };
        // A scan from a live checkpoint: its window starts there, counting from there.
        let first = tl.scan(scan.clone());
        let s = live(90, 2).resume(&first).unwrap().running.unwrap();
        assert_eq!((s.moments, s.count_from), (0, Some(90)));
        assert!(s.bps.contains(&0x30) && s.watches.len() == 1);
        // The window before it ends at 90: not from a checkpoint at 90 or later.
        let earlier = tl.after_window(
            &scan,
            Window {
                after: Some(90),
                before: None,
            },
            None,
        );
        assert_eq!(
            earlier.then,
            Then::Scanned(
                scan.clone(),
                Window {
                    after: None,
                    before: Some(90)
                }
            )
        );
        assert!(live(90, 2).resume(&earlier).is_none());
        assert_eq!(live(40, 1).resume(&earlier).unwrap().depth, 40);
        // Its 2nd hit after decision 90: a stop that counts from 90 on, which resumes
        // there with nothing passed, whatever the checkpoint's own sets.
        let found = Found {
            segment: 2,
            nth: 2,
            from: Some(90),
        };
        let go = tl.after_window(&scan, Window::default(), Some(found));
        assert_eq!(
            (go.segments[2].skip, go.segments[2].skip_from),
            (1, Some(90))
        );
        let s = live(90, 2).resume(&go).unwrap().running.unwrap();
        assert_eq!((s.seg.skip, s.ends_passed), (1, 0));
        // A checkpoint the scan itself took later (one moment counted from 90 on).
        let c = Checkpoint {
            depth: 120,
            until: None,
            running: Some(Running {
                segments: path(),
                scan: Some(scan.clone()),
                ends_passed: 0,
                moments: 1,
                count_from: Some(90),
                polls: 2,
            }),
        };
        let s = c.resume(&go).unwrap().running.unwrap();
        assert_eq!((s.seg.skip, s.ends_passed), (0, 1));
        // One it found before that checkpoint cannot start there.
        let early = tl.after_window(&scan, Window::default(), Some(Found { nth: 1, ..found }));
        assert!(c.resume(&early).is_none());
        assert!(live(90, 2).resume(&early).is_some());
    }

    #[test]
    fn the_log_says_where_re_executions_started() {
        let mut log = SnapshotLog {
            pacing: Pacing::from_option(Some(16)),
            kept: vec![32, 224],
            ..Default::default()
        };
        log.reexecuted(None);
        log.reexecuted(Some(224));
        assert_eq!(
            log.describe(),
            "mcheck: fork snapshots every 16 decision(s): 2 kept, at decision(s) 32 224; 1 of 2 re-execution(s) started from one (the last from decision 224), the others from the program's start"
        );
        let off = SnapshotLog {
            pacing: Pacing::from_option(Some(0)),
            ..Default::default()
        };
        let paced = SnapshotLog::default().describe();
        assert!(
            paced.contains("at most every 200 decision(s), and under a tenth"),
            "{paced}"
        );
        assert!(off
            .describe()
            .contains("off (--gdb-snapshot-every 0): 0 re-execution(s)"));
    }

    #[test]
    fn the_deepest_live_checkpoint_that_fits_is_chosen() {
        let cps = [live(10, 0), live(40, 1), live(70, 2)];
        let p = plan(path()[..2].to_vec(), Then::Stop);
        assert_eq!(best(cps.iter(), &[10, 40, 70], &p).unwrap().depth, 40);
        // One no longer kept is not.
        assert_eq!(best(cps.iter(), &[10, 70], &p).unwrap().depth, 10);
        assert!(best(cps.iter(), &[], &p).is_none());
    }
}
