//! The executor's side of a gdb session: a [`Debugger`] that decides at which moments of
//! the replay gdb gets control, tells the gdb thread the program stopped, and then answers
//! its requests (registers, memory, breakpoints) from the stopped program until gdb lets
//! the replay go on. Every ptrace call stays on the executor's thread.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};

use super::arch::Regs;
use crate::model::ThreadId;
use crate::report::{human, Finding, FindingKind};
use crate::run::debugger::{DebugEvent, Debugger, ProgramView, Resume, ThreadInfo};
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
    /// Replay again from the start up to scheduling decision `n` (going back).
    Restart(u64),
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
}

/// The executor-side end of the channels to the gdb thread.
pub struct Bridge {
    requests: Receiver<Request>,
    replies: Sender<Reply>,
    stops: Sender<Stop>,
    /// Stop first at this decision instead of `main`.
    until: Option<u64>,
    /// The initial stop was made.
    started: bool,
    /// mcheck's temporary breakpoint at `main`.
    main_bp: Option<u64>,
    /// The breakpoints gdb set.
    gdb_bps: HashSet<u64>,
    /// The watchpoints gdb set, by address.
    watches: Vec<(u64, WatchWhat)>,
    goal: Goal,
    /// How to replay the schedule again (for the finding's report).
    again: String,
    /// Set when gdb asked to go back to a decision: the execution ends and a new one
    /// replays up to it.
    restart: Arc<Mutex<Option<u64>>>,
}

impl Bridge {
    /// A bridge over these channels; the first stop is at `main`, or at decision `until`.
    pub fn new(
        requests: Receiver<Request>,
        replies: Sender<Reply>,
        stops: Sender<Stop>,
        until: Option<u64>,
        again: String,
        restart: Arc<Mutex<Option<u64>>>,
    ) -> Self {
        Bridge {
            requests,
            replies,
            stops,
            until,
            started: false,
            main_bp: None,
            gdb_bps: HashSet::new(),
            watches: Vec::new(),
            goal: Goal::Continue,
            again,
            restart,
        }
    }

    /// Tells gdb about `stop`, then serves its requests until it resumes the replay.
    fn stop(
        &mut self,
        view: &mut dyn ProgramView,
        kind: StopKind,
        report: Option<String>,
    ) -> Resume {
        self.started = true;
        self.goal = Goal::Continue;
        let stop = Stop {
            kind,
            step: view.steps(),
            report,
        };
        if self.stops.send(stop).is_err() {
            return Resume::Kill;
        }
        loop {
            let Ok(req) = self.requests.recv() else {
                return Resume::Kill;
            };
            let reply = match req {
                Request::Resume(Goal::Instruction(t)) => return Resume::Step(t),
                Request::Restart(n) => {
                    if let Ok(mut r) = self.restart.lock() {
                        *r = Some(n);
                    }
                    return Resume::Kill;
                }
                Request::Resume(goal) => {
                    self.goal = goal;
                    return Resume::Continue;
                }
                Request::Threads => Reply::Threads(view.threads()),
                Request::Registers(t) => Reply::Registers(
                    view.registers(t)
                        .map(|r| Box::new(Regs::from_ptrace(&r, view.fp_registers(t).as_ref()))),
                ),
                Request::WriteRegisters(t, regs) => {
                    Reply::Done(view.registers(t).is_some_and(|mut r| {
                        regs.to_ptrace(&mut r);
                        view.write_registers(t, r)
                    }))
                }
                Request::Read(addr, len) => {
                    let mut buf = vec![0; len];
                    let n = view.read_memory(addr, &mut buf);
                    buf.truncate(n);
                    Reply::Bytes(buf)
                }
                Request::Auxv => Reply::Bytes(view.auxv()),
                Request::SetWatch(addr, len, what) => {
                    let ok = view.set_watch(what.hardware(addr, len));
                    if ok {
                        self.watches.push((addr, what));
                    }
                    Reply::Done(ok)
                }
                Request::ClearWatch(addr, len, what) => {
                    self.watches.retain(|w| *w != (addr, what));
                    Reply::Done(view.clear_watch(what.hardware(addr, len)))
                }
                Request::Write(addr, data) => Reply::Done(view.write_memory(addr, &data)),
                Request::SetBreakpoint(addr) => {
                    self.gdb_bps.insert(addr);
                    Reply::Done(view.set_breakpoint(addr))
                }
                Request::ClearBreakpoint(addr) => {
                    self.gdb_bps.remove(&addr);
                    Reply::Done(self.main_bp == Some(addr) || view.clear_breakpoint(addr))
                }
            };
            if self.replies.send(reply).is_err() {
                return Resume::Kill;
            }
        }
    }

    /// The report of `f`, as plain `mcheck replay` prints it.
    fn report(&self, f: &Finding) -> String {
        human::format_finding(f, &self.again)
    }
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
                    if !self.gdb_bps.contains(addr) {
                        view.clear_breakpoint(*addr);
                    }
                    return self.stop(view, StopKind::Initial(*thread), None);
                }
                if self.gdb_bps.contains(addr) {
                    return self.stop(view, StopKind::Breakpoint(*thread), None);
                }
                Resume::Continue
            }
            DebugEvent::Point { step, thread } => {
                let initial = !self.started
                    && match self.until {
                        Some(n) => *step >= n,
                        // No main to stop at (a stripped program): the first decision.
                        None => self.main_bp.is_none(),
                    };
                if initial {
                    return self.stop(view, StopKind::Initial(*thread), None);
                }
                let wanted = match self.goal {
                    Goal::Continue | Goal::Instruction(_) => false,
                    Goal::Step(n) => *step >= n,
                    Goal::NextPoint => true,
                };
                if wanted {
                    return self.stop(view, StopKind::Point(*thread), None);
                }
                Resume::Continue
            }
            DebugEvent::Race { thread, finding } => {
                let report = self.report(finding);
                eprintln!("mcheck: stopped at the later access of a data race (monitor finding)");
                self.stop(
                    view,
                    StopKind::Finding(*thread, libc::SIGTRAP),
                    Some(report),
                )
            }
            DebugEvent::Watch { thread, addr } => {
                let what = (self.watches.iter())
                    .find(|w| w.0 == *addr)
                    .map_or(WatchWhat::Write, |w| w.1);
                self.stop(view, StopKind::Watch(*thread, *addr, what), None)
            }
            DebugEvent::Stepped { thread, .. } => self.stop(view, StopKind::Stepped(*thread), None),
            DebugEvent::End { finding, exit } => match finding {
                Some(f) => {
                    let thread = f.threads.first().map_or(0, |t| t.id);
                    let report = self.report(f);
                    eprintln!(
                        "mcheck: stopped at the finding: {} (monitor finding)",
                        f.kind.name()
                    );
                    self.stop(
                        view,
                        StopKind::Finding(thread, finding_signal(f)),
                        Some(report),
                    )
                }
                None => {
                    let _ = exit;
                    Resume::Continue
                }
            },
        }
    }
}
