//! The executor's side of a gdb session: a [`Debugger`] that decides at which moments of
//! the replay gdb gets control, tells the gdb thread the program stopped, and then answers
//! its requests (registers, memory, breakpoints) from the stopped program until gdb lets
//! the replay go on. Every ptrace call stays on the executor's thread.

mod stepping;
mod stop;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};

use super::arch::Regs;
use super::checkpoints::{Checkpoint, Resumed, Running, SnapshotLog};
use super::timeline::{
    self, regs_key, Action, Found, Plan, Scan, Segment, StepBack, Then, Timeline, WatchSpec,
};
use crate::model::ThreadId;
use crate::report::{human, Finding, FindingKind};
use crate::run::debug_port::{Boundary, DebugEvent, Debugger, ProgramView, Resume, ThreadInfo};
use crate::tracee::debugregs::{Watch, WatchOn};

/// What the gdb thread asks of the stopped program.
#[derive(Debug)]
pub enum Request {
    /// The live threads.
    Threads,
    /// A thread's registers.
    Registers(ThreadId),
    /// Change a thread's general registers.
    WriteRegisters(ThreadId, Box<Regs>),
    /// Up to `len` bytes at `addr`.
    Read(u64, usize),
    /// Write bytes at `addr`.
    Write(u64, Vec<u8>),
    /// Set a breakpoint.
    SetBreakpoint(u64),
    /// Clear a breakpoint.
    ClearBreakpoint(u64),
    /// The auxiliary vector the kernel gave the program.
    Auxv,
    /// Set a hardware watchpoint: address, length, what it fires on.
    SetWatch(u64, u64, WatchWhat),
    /// Clear a hardware watchpoint.
    ClearWatch(u64, u64, WatchWhat),
    /// Go back: the program is executed again up to the earlier moment.
    Back(Back),
    /// Let the replay go on until `Goal`. (gdb killing the program or going away closes
    /// the channels, which ends the replay.)
    Resume(Goal),
}

/// The answer to a [`Request`] (none for `Resume`).
#[derive(Debug)]
pub enum Reply {
    /// Live threads.
    Threads(Vec<ThreadInfo>),
    /// Registers, when the thread is there.
    Registers(Option<Box<Regs>>),
    /// Bytes read.
    Bytes(Vec<u8>),
    /// Whether it worked.
    Done(bool),
}

/// Where a resumed replay stops next (besides breakpoints and the finding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// Only at breakpoints, a race, the finding or the end.
    Continue,
    /// Also at the scheduling decision with this number (decisions taken before it).
    Step(u64),
    /// Also at the next scheduling decision.
    NextPoint,
    /// Execute one instruction of this thread (gdb's stepi, and gdb stepping over its
    /// breakpoints), when the schedule lets it move.
    Instruction(ThreadId),
    /// Only at the scheduling decision with this number: breakpoints, watchpoints and races
    /// on the way pass (going back to a decision, [`Timeline::goto_back`]).
    At(u64),
}

/// What a watchpoint fires on, as gdb asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchWhat {
    /// Writes (`watch`).
    Write,
    /// Reads (`rwatch`: the hardware fires on writes too).
    Read,
    /// Reads and writes (`awatch`).
    Access,
}

impl WatchWhat {
    fn hardware(self, addr: u64, len: u64) -> Watch {
        Watch {
            addr,
            len,
            on: match self {
                WatchWhat::Write => WatchOn::Write,
                _ => WatchOn::Access,
            },
        }
    }
}

/// Why the program stopped, as gdb is told.
#[derive(Debug, Clone)]
pub enum StopKind {
    /// The first stop: at `main` or at `--until`.
    Initial(ThreadId),
    /// A gdb breakpoint.
    Breakpoint(ThreadId),
    /// A scheduling decision the goal asked for.
    Point(ThreadId),
    /// A watchpoint fired: thread, watched address, kind.
    Watch(ThreadId, u64, WatchWhat),
    /// A stepped instruction (or a step the schedule refused).
    Stepped(ThreadId),
    /// A finding: the thread and the signal gdb shows it with.
    Finding(ThreadId, i32),
    /// The replay is over: the process exited with this status.
    Exited(i32),
    /// The replay is over: the process was killed by this signal.
    Killed(i32),
    /// gdb's interrupt (Ctrl-C) stopped this thread.
    Interrupted(ThreadId),
    /// A step of this thread was refused (the reason is in gdb's console): shown as an
    /// interrupt, so that gdb's `step` and `next` end instead of asking again.
    Refused(ThreadId),
    /// Going back found nothing earlier: the first stop, as the beginning of the history.
    Begin(ThreadId),
}

impl StopKind {
    /// The thread the stop is in, if any.
    pub fn thread(&self) -> Option<ThreadId> {
        match *self {
            StopKind::Initial(t)
            | StopKind::Breakpoint(t)
            | StopKind::Point(t)
            | StopKind::Watch(t, _, _)
            | StopKind::Stepped(t)
            | StopKind::Finding(t, _)
            | StopKind::Interrupted(t)
            | StopKind::Refused(t)
            | StopKind::Begin(t) => Some(t),
            StopKind::Exited(_) | StopKind::Killed(_) => None,
        }
    }
}

/// One stop of the replay.
#[derive(Debug, Clone)]
pub struct Stop {
    /// Why.
    pub kind: StopKind,
    /// Scheduling decisions taken so far.
    pub step: u64,
    /// The finding's report, when the stop is one.
    pub report: Option<String>,
    /// Messages for gdb's console (refused steps, where the replay stopped and why).
    pub messages: Vec<String>,
}

/// Going back, as gdb asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Back {
    /// To scheduling decision N (`monitor goto N` backwards): a new path starts there.
    Step(u64),
    /// To the last hit of gdb's breakpoints or watchpoints before now (`reverse-continue`).
    Continue,
    /// One instruction of this thread back (`reverse-stepi`).
    Instruction(ThreadId),
}

/// What outlives one execution of a gdb session: the path of stops, gdb's breakpoints,
/// and the re-execution asked for.
#[derive(Debug, Default)]
pub struct Session {
    /// The current execution's stops.
    pub timeline: Timeline,
    /// A re-execution to start once the current one is over.
    pub restart: Option<Plan>,
    /// The breakpoints gdb set (gdb believes them inserted until it removes them).
    pub gdb_bps: BTreeSet<u64>,
    /// The watchpoints gdb set.
    pub gdb_watches: Vec<WatchSpec>,
    /// The bridge's state at each fork snapshot kept, by decision (a snapshot taken again
    /// at the same decision replaces the one before).
    pub checkpoints: std::collections::BTreeMap<u64, Checkpoint>,
    /// What `monitor snapshots` says (shared with the gdb thread); its `every` says how
    /// many decisions apart one execution's snapshots are (0: none are taken).
    pub log: Arc<Mutex<SnapshotLog>>,
}

/// The executor-side end of the channels to the gdb thread.
pub struct Bridge {
    requests: Receiver<Request>,
    replies: Sender<Reply>,
    stops: Sender<Stop>,
    /// Shared with the other executions of the session.
    session: Arc<Mutex<Session>>,
    /// Stop first at this decision instead of `main`.
    until: Option<u64>,
    /// The initial stop was made.
    started: bool,
    /// mcheck's temporary breakpoint at `main`.
    main_bp: Option<u64>,
    /// The breakpoints installed in the program for gdb now.
    active_bps: BTreeSet<u64>,
    /// The watchpoints installed in the program for gdb now.
    active_watches: Vec<WatchSpec>,
    /// The re-execution this execution is (None: gdb drives it live).
    plan: Option<Plan>,
    /// Stops made so far in this execution.
    stop_index: usize,
    /// The segment running now.
    seg: Option<Segment>,
    /// What gdb changed at the present stop.
    actions: Vec<Action>,
    /// Stopping moments seen in the running segment.
    moments: u32,
    /// Of those, the segment's own passed because of its `skip`.
    ends_passed: u32,
    /// `moments` counts from this decision on (a scan started from a snapshot there), not
    /// from the segment's start.
    count_from: Option<u64>,
    /// The running segment reached its `skip_from` decision: its moments count.
    past_skip_from: bool,
    /// The decision of this execution's last snapshot (or the one it started from).
    last_snapshot: u64,
    /// When this execution's last snapshot was taken, and what it cost.
    last_snapshot_at: Option<(std::time::Instant, std::time::Duration)>,
    /// gdb's sets to put into a copy of a snapshot at its first event.
    pending_install: Option<(BTreeSet<u64>, Vec<WatchSpec>)>,
    /// Interrupt polls in the running segment.
    polls: u64,
    /// The last hit of the scan's breakpoints before the present stop.
    found: Option<Found>,
    /// Anchors of a step back noted so far in the last segment ([`Then::FindAnchors`]).
    anchors: Vec<u64>,
    /// The anchors before the last scheduling decision of the last segment, when the
    /// step back's thread was there in its present state (the present stop is at that
    /// decision's operation, which it has not yet run).
    anchors_before_point: Vec<u64>,
    /// The last scheduling decision of the last segment that ran the step back's thread
    /// away from its present state ([`StepBack::point`]).
    anchor_point: Option<u64>,
    /// A step back counting its steps from its anchor ([`Then::CountFrom`]).
    counting: Option<(StepBack, u64)>,
    /// A step the executor makes by running on: the thread's instruction is one only the
    /// executor executes (a system call, a hook), and the step ends where it is back.
    over: Option<Over>,
    /// Set by the gdb thread on Ctrl-C.
    interrupt: Arc<AtomicBool>,
    /// Messages for gdb's console, sent with the next stop.
    said: Vec<String>,
    /// How to replay the schedule again (for the finding's report).
    again: String,
    /// The finding was shown at the exit_group that makes it ([`DebugEvent::Exiting`]).
    exit_shown: bool,
}

/// A step of `thread` over an instruction that only the executor executes: the replay runs
/// on as it would (other threads too, when the instruction is a scheduling decision) until
/// the thread is back at one of `to`, where breakpoints (`inserted`: those gdb did not set
/// too) stop it. Done the same way in every execution, so a stepi made this way is replayed
/// as it was.
#[derive(Debug)]
struct Over {
    thread: ThreadId,
    to: Vec<Boundary>,
    inserted: Vec<u64>,
}

impl Bridge {
    /// A bridge over these channels; the first stop is at `main`, or at decision `until`;
    /// with `plan`, a re-execution that reaches the plan's stop silently first.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        requests: Receiver<Request>,
        replies: Sender<Reply>,
        stops: Sender<Stop>,
        session: Arc<Mutex<Session>>,
        plan: Option<Plan>,
        interrupt: Arc<AtomicBool>,
        again: String,
    ) -> Self {
        let until = match &plan {
            Some(p) => p.until,
            None => lock(&session).timeline.until,
        };
        Bridge {
            requests,
            replies,
            stops,
            session,
            until,
            started: false,
            main_bp: None,
            active_bps: BTreeSet::new(),
            active_watches: Vec::new(),
            plan,
            stop_index: 0,
            seg: None,
            actions: Vec::new(),
            moments: 0,
            ends_passed: 0,
            count_from: None,
            past_skip_from: false,
            last_snapshot: 0,
            last_snapshot_at: None,
            pending_install: None,
            polls: 0,
            found: None,
            anchors: Vec::new(),
            anchors_before_point: Vec::new(),
            anchor_point: None,
            counting: None,
            over: None,
            interrupt,
            said: Vec::new(),
            again,
            exit_shown: false,
        }
    }

    /// Makes this bridge that of a re-execution starting from a copy of the snapshot of
    /// `r` (the copy stops first at the decision it was taken at).
    pub fn resume_from(&mut self, r: Resumed) {
        self.last_snapshot = r.depth;
        let Some(s) = r.running else {
            return;
        };
        // A scan from here looks at the execution from here on (its window).
        if let Some(Plan {
            then: Then::Scanned(_, w),
            ..
        }) = &mut self.plan
        {
            w.after = Some(r.depth);
        }
        self.started = true;
        self.stop_index = s.stop_index;
        self.moments = s.moments;
        self.ends_passed = s.ends_passed;
        self.count_from = s.count_from;
        self.past_skip_from = s.seg.skip_from.is_some_and(|x| x < r.depth);
        self.polls = s.polls;
        self.seg = Some(s.seg);
        self.pending_install = Some((s.bps, s.watches));
    }

    /// At scheduling decision `step`, before it is handled: a fork snapshot of the program
    /// with the bridge's state, when the last one of this execution is far enough back.
    fn maybe_snapshot(&mut self, view: &mut dyn ProgramView, step: u64) {
        let log = lock(&self.session).log.clone();
        let Ok(pacing) = log.lock().map(|l| l.pacing) else {
            return;
        };
        // Not in the middle of a step: a copy would not know where it ends.
        let stepping = self.counting.is_some() || self.over.is_some();
        if pacing.every == 0 || step < self.last_snapshot + pacing.every || stepping {
            return;
        }
        // Paced: ten times the last one's cost since it, at least.
        let early =
            |(at, cost): (std::time::Instant, std::time::Duration)| at.elapsed() < cost * 10;
        if pacing.paced && self.last_snapshot_at.is_some_and(early) {
            return;
        }
        // Before `main`, gdb's breakpoint at it would be in the copy; after the first stop,
        // the moment needs its segment.
        let running = match (self.started, &self.seg) {
            (false, _) if self.until.is_none() => return,
            (false, _) => None,
            (true, None) => return,
            (true, Some(_)) => {
                let segments = match &self.plan {
                    Some(plan) => {
                        plan.segments[..self.stop_index.min(plan.segments.len())].to_vec()
                    }
                    None => lock(&self.session).timeline.path.clone(),
                };
                if segments.len() != self.stop_index {
                    return;
                }
                Some(Running {
                    segments,
                    scan: self.scan().cloned(),
                    ends_passed: self.ends_passed,
                    moments: self.moments,
                    count_from: self.count_from,
                    polls: self.polls,
                })
            }
        };
        self.last_snapshot = step;
        // A copy starts with none of gdb's breakpoints and watchpoints in it.
        let (bps, watches) = (self.active_bps.clone(), self.active_watches.clone());
        self.install(view, &BTreeSet::new(), &[]);
        let began = std::time::Instant::now();
        let kept = view.snapshot();
        self.install(view, &bps, &watches);
        self.last_snapshot_at = Some((std::time::Instant::now(), began.elapsed()));
        if let Some(kept) = kept {
            let cp = Checkpoint {
                depth: step,
                until: self.until,
                running,
            };
            let mut session = lock(&self.session);
            session.checkpoints.insert(step, cp);
            session.checkpoints.retain(|d, _| kept.contains(d));
            let depths: Vec<u64> = session.checkpoints.keys().copied().collect();
            let log = session.log.clone();
            drop(session);
            if let Ok(mut l) = log.lock() {
                l.kept = depths;
            };
        }
    }

    /// At scheduling decision `step`: when this execution is a scan whose window ends
    /// there, the scan is over; going back goes on with what it found (see
    /// [`Timeline::after_window`]).
    fn scan_window_ends(&mut self, step: u64) -> bool {
        let Some(Plan {
            until,
            segments,
            then: Then::Scanned(scan, window),
        }) = &self.plan
        else {
            return false;
        };
        if window.before != Some(step) {
            return false;
        }
        let path = Timeline {
            until: *until,
            path: segments.clone(),
        };
        let next = path.after_window(scan, *window, self.found);
        lock(&self.session).restart = Some(next);
        true
    }

    /// Makes the program's breakpoints and watchpoints for gdb these.
    fn install(&mut self, view: &mut dyn ProgramView, bps: &BTreeSet<u64>, watches: &[WatchSpec]) {
        for &a in self.active_bps.difference(bps) {
            if self.main_bp != Some(a) || self.started {
                view.clear_breakpoint(a);
            }
        }
        for &a in bps.difference(&self.active_bps) {
            view.set_breakpoint(a);
        }
        self.active_bps = bps.clone();
        for w in &self.active_watches {
            if !watches.contains(w) {
                view.clear_watch(w.2.hardware(w.0, w.1));
            }
        }
        for w in watches {
            if !self.active_watches.contains(w) {
                view.set_watch(w.2.hardware(w.0, w.1));
            }
        }
        self.active_watches = watches.to_vec();
    }

    /// Starts `seg` from the present stop (gdb's changes applied first).
    fn run_segment(&mut self, view: &mut dyn ProgramView, seg: Segment) -> Resume {
        for a in &seg.actions {
            match a {
                Action::Memory(addr, data) => {
                    view.write_memory(*addr, data);
                }
                Action::Registers(t, regs) => {
                    write_registers(view, *t, regs);
                }
            }
        }
        // A scan's breakpoints trap too, but only the segment's own end it.
        let (bps, watches) = match self.scan() {
            Some(scan) => {
                let merged = timeline::with_scan(&seg, scan);
                (merged.bps, merged.watches)
            }
            None => (seg.bps.clone(), seg.watches.clone()),
        };
        self.install(view, &bps, &watches);
        self.moments = 0;
        self.ends_passed = 0;
        self.count_from = None;
        self.past_skip_from = false;
        self.polls = 0;
        let resume = match seg.goal {
            Goal::Instruction(t) => Resume::Step(t),
            _ => Resume::Continue,
        };
        self.seg = Some(seg);
        resume
    }

    /// A stopping moment of the running segment: under gdb it stops; in a re-execution
    /// it stops only where the segment ended (`ends`: the moment is one the segment stops
    /// at), and a scan notes the moments that hit its breakpoints (`scan_hit`).
    fn moment(
        &mut self,
        view: &mut dyn ProgramView,
        kind: StopKind,
        report: Option<String>,
        ends: bool,
        scan_hit: bool,
    ) -> Resume {
        if let (Some(plan), Some(seg)) = (&self.plan, self.seg.as_mut()) {
            // Counted as the segment, run with the scan's sets too, would stop at them
            // (what a plan going to a scan's hit passes with `skip`).
            if ends || scan_hit {
                self.moments += 1;
            }
            // Before its `skip_from` decision, nothing ends the segment.
            let counts = seg.skip_from.is_none() || self.past_skip_from;
            let ends = ends
                && counts
                && if seg.skip > 0 {
                    seg.skip -= 1;
                    self.ends_passed += 1;
                    false
                } else {
                    true
                };
            let segment = self.stop_index.saturating_sub(1);
            let present = ends && segment + 1 == plan.segments.len();
            if scan_hit && !present && matches!(plan.then, Then::Scanned(..)) {
                self.found = Some(Found {
                    segment,
                    nth: self.moments,
                    from: self.count_from,
                });
            }
            if !ends {
                return Resume::Continue;
            }
        } else if !ends {
            return Resume::Continue;
        }
        self.stop(view, kind, report)
    }

    /// Whether the running segment (gdb's sets in it) stops at a hit of breakpoint `addr`,
    /// and whether a scan looks for it.
    fn bp_hit(&self, addr: u64) -> (bool, bool) {
        let ends = self.seg.as_ref().is_some_and(|s| s.bps.contains(&addr));
        (ends, self.scan().is_some_and(|s| s.bps.contains(&addr)))
    }

    /// The same for a watchpoint at `addr`.
    fn watch_hit(&self, addr: u64) -> (bool, bool, WatchWhat) {
        let seg = self.seg.as_ref();
        let stepping = seg.is_some_and(|s| matches!(s.goal, Goal::Instruction(_)));
        let mine = seg.and_then(|s| s.watches.iter().find(|w| w.0 == addr));
        let scan = self
            .scan()
            .and_then(|s| s.watches.iter().find(|w| w.0 == addr));
        let what = mine.or(scan).map_or(WatchWhat::Write, |w| w.2);
        (stepping || mine.is_some(), scan.is_some(), what)
    }

    fn scan(&self) -> Option<&Scan> {
        match &self.plan {
            Some(Plan {
                then: Then::Scanned(s, _),
                ..
            }) => Some(s),
            _ => None,
        }
    }

    /// Whether the running segment's goal stops at a scheduling decision `step`.
    fn goal_stops_at(&self, step: u64) -> bool {
        match self.seg.as_ref().map(|s| s.goal) {
            Some(Goal::Step(n) | Goal::At(n)) => step >= n,
            Some(Goal::NextPoint) => true,
            _ => false,
        }
    }
}

/// Why thread `t` cannot go back one instruction, as gdb's console shows it.
fn cannot_go_back(t: ThreadId, why: &str) -> String {
    format!(
        "mcheck: T{t} cannot go back one instruction from here: {why}; `reverse-continue` goes back to a breakpoint, `monitor goto STEP` to a scheduling decision"
    )
}

/// Instructions a step back single-steps at most to find the present stop again.
const MAX_STEPS_BACK: u64 = 1_000_000;

fn lock(s: &Mutex<Session>) -> std::sync::MutexGuard<'_, Session> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes gdb's registers of thread `t`.
fn write_registers(view: &mut dyn ProgramView, t: ThreadId, regs: &Regs) -> bool {
    view.registers(t).is_some_and(|mut r| {
        regs.to_ptrace(&mut r);
        view.write_registers(t, r)
    })
}

/// The signal gdb shows a finding with.
fn finding_signal(f: &Finding) -> i32 {
    match f.kind {
        FindingKind::Assertion => libc::SIGABRT,
        FindingKind::Crash => {
            let m = &f.message;
            [
                ("SIGBUS", libc::SIGBUS),
                ("SIGFPE", libc::SIGFPE),
                ("SIGILL", libc::SIGILL),
            ]
            .iter()
            .find(|(name, _)| m.contains(name))
            .map_or(libc::SIGSEGV, |&(_, s)| s)
        }
        _ => libc::SIGTRAP,
    }
}

impl Debugger for Bridge {
    fn on_event(&mut self, view: &mut dyn ProgramView, ev: &DebugEvent) -> Resume {
        if let Some((bps, watches)) = self.pending_install.take() {
            self.install(view, &bps, &watches);
        }
        // The end of a step over is the step's end.
        let reached;
        let ev = if self.over_reached(view, ev) {
            let thread = self.over.as_ref().map_or(0, |o| o.thread);
            self.end_over(view);
            reached = DebugEvent::Stepped {
                thread,
                moved: true,
                over: Vec::new(),
            };
            &reached
        } else {
            ev
        };
        if self.counting.is_some() {
            return self.counted(view, ev);
        }
        match ev {
            DebugEvent::Started => {
                if self.until.is_none() {
                    self.main_bp = view.program_function("main");
                    if let Some(a) = self.main_bp {
                        view.set_breakpoint(a);
                    }
                }
                Resume::Continue
            }
            DebugEvent::Breakpoint { thread, addr } => {
                if self.main_bp == Some(*addr) && !self.started {
                    self.main_bp = None;
                    view.clear_breakpoint(*addr);
                    return self.stop(view, StopKind::Initial(*thread), None);
                }
                let (ends, scan) = self.bp_hit(*addr);
                self.moment(view, StopKind::Breakpoint(*thread), None, ends, scan)
            }
            DebugEvent::Point { step, thread } => {
                if self.scan_window_ends(*step) {
                    return Resume::Kill;
                }
                self.maybe_snapshot(view, *step);
                if self
                    .seg
                    .as_ref()
                    .is_some_and(|s| s.skip_from == Some(*step))
                {
                    self.past_skip_from = true;
                }
                let initial = !self.started
                    && match self.until {
                        Some(n) => *step >= n,
                        // No main to stop at (a stripped program): the first decision.
                        None => self.main_bp.is_none(),
                    };
                if initial {
                    return self.stop(view, StopKind::Initial(*thread), None);
                }
                if self.poll(None) {
                    return self.stop(view, StopKind::Interrupted(*thread), None);
                }
                let wanted = self.goal_stops_at(*step);
                if !wanted {
                    self.anchors_at_point(view, *step, *thread);
                }
                self.moment(view, StopKind::Point(*thread), None, wanted, false)
            }
            DebugEvent::Race { thread, finding } => {
                let report = self.report(finding);
                if self.plan.is_none() {
                    use crate::report::FindingKind;
                    let what = match finding.kind {
                        FindingKind::UseAfterFree => "the access of a use after free",
                        FindingKind::DoubleFree => "the second free of a double free",
                        FindingKind::InvalidFree => "an invalid free",
                        _ => "the later access of a data race",
                    };
                    self.tell(format!("mcheck: stopped at {what} (monitor finding)"));
                }
                let kind = StopKind::Finding(*thread, libc::SIGTRAP);
                // Going back to a decision passes the races on the way.
                let ends = !matches!(self.seg.as_ref().map(|s| s.goal), Some(Goal::At(_)));
                self.moment(view, kind, Some(report), ends, false)
            }
            DebugEvent::Watch { thread, addr } => {
                let (ends, scan, what) = self.watch_hit(*addr);
                self.moment(
                    view,
                    StopKind::Watch(*thread, *addr, what),
                    None,
                    ends,
                    scan,
                )
            }
            DebugEvent::Stepped {
                thread,
                moved: false,
                over,
            } if !over.is_empty()
                && self.over.is_none()
                && (self.seg.as_ref()).is_some_and(|s| s.goal == Goal::Instruction(*thread)) =>
            {
                self.start_over(view, *thread, over)
            }
            DebugEvent::Stepped { thread, moved, .. } => {
                // A step onto one of a scan's breakpoints is a hit of it (stepping runs
                // over breakpoints without trapping).
                let scan_hit = *moved
                    && self.scan().is_some_and(|s| {
                        (view.registers(*thread)).is_some_and(|r| s.bps.contains(&r.rip))
                    });
                // A refused step is shown as an interrupt: gdb's `step`/`next` would
                // otherwise ask again and again for a step that cannot happen.
                let kind = if *moved {
                    StopKind::Stepped(*thread)
                } else {
                    StopKind::Refused(*thread)
                };
                self.moment(view, kind, None, true, scan_hit)
            }
            DebugEvent::Interrupted { thread } => {
                self.stop(view, StopKind::Interrupted(*thread), None)
            }
            DebugEvent::Exiting { thread, finding } => {
                self.exit_shown = true;
                self.finding_stop(view, *thread, finding)
            }
            // Shown at the exit_group already, where the thread could still be read.
            DebugEvent::End { .. } if self.exit_shown => Resume::Continue,
            DebugEvent::End { finding, .. } => match finding {
                Some(f) => {
                    let thread = f.threads.first().map_or(0, |t| t.id);
                    self.finding_stop(view, thread, f)
                }
                None => Resume::Continue,
            },
        }
    }

    fn say(&mut self, text: String) {
        if self.plan.is_none() && self.counting.is_none() {
            self.tell(text);
        }
    }

    fn poll_interrupt(&mut self, thread: ThreadId) -> bool {
        self.poll(Some(thread))
    }
}
