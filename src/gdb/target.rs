//! The gdb thread's side of a session: a gdbstub `Target` whose every operation is a
//! request to the executor's thread (which owns the traced program), plus the event loop
//! that waits for the replay's next stop. Thread `T<n>` is gdb thread `n + 1`.

use std::io::Write as _;
use std::net::TcpStream;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use gdbstub::common::{Signal, Tid};
use gdbstub::conn::ConnectionExt;
use gdbstub::stub::run_blocking::{self, BlockingEventLoop};
use gdbstub::stub::MultiThreadStopReason;
use gdbstub::target::ext::base::multithread::{
    MultiThreadBase, MultiThreadResume, MultiThreadResumeOps, MultiThreadSchedulerLocking,
    MultiThreadSchedulerLockingOps, MultiThreadSingleStep, MultiThreadSingleStepOps,
};
use gdbstub::target::ext::base::reverse_exec::{
    ReplayLogPosition, ReverseCont, ReverseContOps, ReverseStep, ReverseStepOps,
};

use gdbstub::target::ext::base::BaseOps;
use gdbstub::target::ext::breakpoints::{
    Breakpoints, BreakpointsOps, HwWatchpoint, HwWatchpointOps, SwBreakpoint, SwBreakpointOps,
    WatchKind,
};
use gdbstub::target::ext::monitor_cmd::MonitorCmdOps;
use gdbstub::target::ext::thread_extra_info::{ThreadExtraInfo, ThreadExtraInfoOps};
use gdbstub::target::{Target, TargetError, TargetResult};

use super::arch::{Regs, X86_64Linux};
use super::bridge::{Back, Goal, Reply, Request, Stop, StopKind, WatchWhat};
use crate::explore::Decision;
use crate::run::debug_port::ThreadInfo;

/// How often a long monitor command tells gdb it is still at work.
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(1);

/// What the replay target knows on the gdb thread.
pub struct ReplayTarget {
    requests: Sender<Request>,
    replies: Receiver<Reply>,
    stops: Receiver<Stop>,
    /// The recorded schedule.
    pub(super) schedule: Vec<Decision>,
    /// The last stop.
    pub(super) last: Option<Stop>,
    /// The finding's report, once the replay reached it.
    pub(super) finding: Option<String>,
    /// The threads at the last stop.
    threads: Vec<ThreadInfo>,
    /// Where the next resume stops besides breakpoints.
    pub(super) goal: Goal,
    /// The executor is gone (the replay ended).
    ended: bool,
    /// Messages for gdb's console not shown yet.
    pub(super) console: Vec<String>,
    /// Set on gdb's Ctrl-C; the executor stops at its next breakpoint.
    interrupt: Arc<AtomicBool>,
    /// The session's fork snapshots (`monitor snapshots`).
    pub(super) snapshots: Arc<std::sync::Mutex<super::checkpoints::SnapshotLog>>,
    /// The thread whose registers gdb read last: the one it shows.
    pub(super) selected: Option<usize>,
    /// Requests sent to the executor so far (see [`ReplayTarget::requests_sent`]).
    sent: std::cell::Cell<u64>,
}

/// The executor went away: the replay is over.
#[derive(Debug)]
pub struct Gone;

impl ReplayTarget {
    /// A target over the channels to the executor.
    pub fn new(
        requests: Sender<Request>,
        replies: Receiver<Reply>,
        stops: Receiver<Stop>,
        schedule: Vec<Decision>,
        interrupt: Arc<AtomicBool>,
        snapshots: Arc<std::sync::Mutex<super::checkpoints::SnapshotLog>>,
    ) -> Self {
        ReplayTarget {
            console: Vec::new(),
            interrupt,
            snapshots,
            requests,
            replies,
            stops,
            schedule,
            last: None,
            finding: None,
            threads: Vec::new(),
            goal: Goal::Continue,
            ended: false,
            selected: None,
            sent: std::cell::Cell::new(0),
        }
    }

    /// How many requests were sent to the executor so far. A gdb connection during which
    /// this did not change did not touch the replay: gdb's handshake (`qSupported`,
    /// `QStartNoAckMode`...) is answered by gdbstub alone, and the first request is gdb's
    /// first look at the program (its registers, once it knows why the program stopped).
    pub fn requests_sent(&self) -> u64 {
        self.sent.get()
    }

    /// Sends `req` to the executor.
    fn send(&self, req: Request) -> Result<(), Gone> {
        self.sent.set(self.sent.get() + 1);
        self.requests.send(req).map_err(|_| Gone)
    }

    /// Waits for the replay's first stop (at `main` or `--until`).
    pub fn wait_first_stop(&mut self) -> Result<(), Gone> {
        let stop = self.stops.recv().map_err(|_| Gone)?;
        self.note_stop(stop);
        if self.ended {
            return Err(Gone);
        }
        Ok(())
    }

    fn ask(&self, req: Request) -> Result<Reply, Gone> {
        if self.ended {
            return Err(Gone);
        }
        self.send(req)?;
        self.replies.recv().map_err(|_| Gone)
    }

    fn note_stop(&mut self, stop: Stop) {
        self.console.extend(stop.messages.iter().cloned());
        if let Some(r) = &stop.report {
            self.finding = Some(r.clone());
        }
        if matches!(stop.kind, StopKind::Exited(_) | StopKind::Killed(_)) {
            self.ended = true;
            self.threads.clear();
        } else if let Ok(Reply::Threads(t)) = self.ask(Request::Threads) {
            self.threads = t;
        }
        self.last = Some(stop);
    }

    /// Sends the executor on to the next stop and waits for it (monitor commands), calling
    /// `tick` every second meanwhile.
    /// After a monitor command moved the replay: when the thread gdb shows is not there
    /// (it exited, or going back went to before it was created), gdb cannot read its
    /// registers ("remote failure reply 'E79'"): says so, and which threads are.
    pub(super) fn selected_gone(&self) -> Option<String> {
        let t = self.selected?;
        if self.ended || self.threads.iter().any(|i| i.id == t) {
            return None;
        }
        let live: Vec<String> = (self.threads.iter())
            .map(|i| format!("T{} (Thread 1.{})", i.id, i.id + 1))
            .collect();
        Some(format!(
            "mcheck: T{t} (Thread 1.{}), the thread gdb shows, does not exist at this step: its registers cannot be read; `info threads` lists those that do ({}) and `thread N` selects one",
            t + 1,
            live.join(", ")
        ))
    }

    pub(super) fn run_to_next_stop(
        &mut self,
        goal: Goal,
        tick: &mut dyn FnMut(),
    ) -> Result<&Stop, Gone> {
        if self.ended {
            return Err(Gone);
        }
        self.send(Request::Resume(goal))?;
        let stop = self.wait_stop(tick)?;
        self.note_stop(stop);
        self.last.as_ref().ok_or(Gone)
    }

    /// Goes back (the program is executed again up to there) and waits for that stop,
    /// calling `tick` every second meanwhile.
    pub(super) fn go_back(&mut self, back: Back, tick: &mut dyn FnMut()) -> Result<&Stop, Gone> {
        self.send_back(back).map_err(|_| Gone)?;
        let stop = self.wait_stop(tick)?;
        self.note_stop(stop);
        self.last.as_ref().ok_or(Gone)
    }

    /// Waits for the executor's next stop, calling `tick` every second meanwhile: a monitor
    /// command sends gdb something then, since gdb gives up on a packet it waited
    /// `remotetimeout` for (2 s by default) and the session breaks.
    fn wait_stop(&mut self, tick: &mut dyn FnMut()) -> Result<Stop, Gone> {
        loop {
            match self.stops.recv_timeout(KEEPALIVE) {
                Ok(stop) => return Ok(stop),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => tick(),
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Err(Gone),
            }
        }
    }

    /// Asks the executor to go back; the stop comes later.
    fn send_back(&mut self, back: Back) -> Result<(), &'static str> {
        if self.ended {
            return Err("the replay ended");
        }
        self.send(Request::Back(back))
            .map_err(|_| "the replay ended")
    }

    /// Decisions taken at the last stop.
    pub(super) fn position(&self) -> u64 {
        self.last.as_ref().map_or(0, |s| s.step)
    }

    /// The stop reason gdb is given for `stop`.
    fn reason(stop: &Stop) -> MultiThreadStopReason<u64> {
        let tid = |t: usize| gdb_tid(t);
        match stop.kind {
            StopKind::Initial(t) | StopKind::Point(t) => MultiThreadStopReason::SignalWithThread {
                tid: tid(t),
                signal: Signal::SIGTRAP,
            },
            StopKind::Breakpoint(t) => MultiThreadStopReason::SwBreak(tid(t)),
            StopKind::Watch(t, addr, what) => MultiThreadStopReason::Watch {
                tid: tid(t),
                kind: match what {
                    WatchWhat::Write => WatchKind::Write,
                    WatchWhat::Read => WatchKind::Read,
                    WatchWhat::Access => WatchKind::ReadWrite,
                },
                addr,
            },
            // gdb takes a SIGTRAP naming the thread as the end of its step.
            StopKind::Stepped(t) => MultiThreadStopReason::SignalWithThread {
                tid: tid(t),
                signal: Signal::SIGTRAP,
            },
            StopKind::Finding(t, sig) => MultiThreadStopReason::SignalWithThread {
                tid: tid(t),
                signal: Signal(sig as u8),
            },
            StopKind::Interrupted(t) | StopKind::Refused(t) => {
                MultiThreadStopReason::SignalWithThread {
                    tid: tid(t),
                    signal: Signal::SIGINT,
                }
            }
            StopKind::Begin(t) => MultiThreadStopReason::ReplayLog {
                tid: Some(tid(t)),
                pos: ReplayLogPosition::Begin,
            },
            StopKind::Exited(code) => MultiThreadStopReason::Exited(code as u8),
            StopKind::Killed(sig) => MultiThreadStopReason::Terminated(Signal(sig as u8)),
        }
    }
}

/// gdb's thread id of mcheck's thread `t`.
pub fn gdb_tid(t: usize) -> Tid {
    NonZeroUsize::new(t + 1).unwrap_or(NonZeroUsize::MIN)
}

fn gone<T>(_: Gone) -> TargetError<T> {
    TargetError::NonFatal
}

impl Target for ReplayTarget {
    type Arch = X86_64Linux;
    type Error = &'static str;

    fn base_ops(&mut self) -> BaseOps<'_, Self::Arch, Self::Error> {
        BaseOps::MultiThread(self)
    }

    fn support_breakpoints(&mut self) -> Option<BreakpointsOps<'_, Self>> {
        Some(self)
    }

    fn support_monitor_cmd(&mut self) -> Option<MonitorCmdOps<'_, Self>> {
        Some(self)
    }

    fn support_auxv(&mut self) -> Option<gdbstub::target::ext::auxv::AuxvOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadBase for ReplayTarget {
    fn read_registers(&mut self, regs: &mut Regs, tid: Tid) -> TargetResult<(), Self> {
        self.selected = Some(tid.get() - 1);
        match self.ask(Request::Registers(tid.get() - 1)).map_err(gone)? {
            Reply::Registers(Some(r)) => {
                *regs = *r;
                Ok(())
            }
            _ => Err(TargetError::NonFatal),
        }
    }

    fn write_registers(&mut self, regs: &Regs, tid: Tid) -> TargetResult<(), Self> {
        let req = Request::WriteRegisters(tid.get() - 1, Box::new(regs.clone()));
        match self.ask(req).map_err(gone)? {
            Reply::Done(true) => Ok(()),
            _ => Err(TargetError::NonFatal),
        }
    }

    fn read_addrs(&mut self, start: u64, data: &mut [u8], _tid: Tid) -> TargetResult<usize, Self> {
        match self.ask(Request::Read(start, data.len())).map_err(gone)? {
            Reply::Bytes(b) if !b.is_empty() => {
                data[..b.len()].copy_from_slice(&b);
                Ok(b.len())
            }
            _ => Err(TargetError::NonFatal),
        }
    }

    fn write_addrs(&mut self, start: u64, data: &[u8], _tid: Tid) -> TargetResult<(), Self> {
        match self
            .ask(Request::Write(start, data.to_vec()))
            .map_err(gone)?
        {
            Reply::Done(true) => Ok(()),
            _ => Err(TargetError::NonFatal),
        }
    }

    fn list_active_threads(
        &mut self,
        thread_is_active: &mut dyn FnMut(Tid),
    ) -> Result<(), Self::Error> {
        for t in &self.threads {
            thread_is_active(gdb_tid(t.id));
        }
        Ok(())
    }

    fn support_resume(&mut self) -> Option<MultiThreadResumeOps<'_, Self>> {
        Some(self)
    }

    fn support_thread_extra_info(&mut self) -> Option<ThreadExtraInfoOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadResume for ReplayTarget {
    fn resume(&mut self) -> Result<(), Self::Error> {
        if self.ended {
            return Ok(());
        }
        let goal = std::mem::replace(&mut self.goal, Goal::Continue);
        self.send(Request::Resume(goal))
            .map_err(|_| "the replay ended")
    }

    fn clear_resume_actions(&mut self) -> Result<(), Self::Error> {
        self.goal = Goal::Continue;
        Ok(())
    }

    fn support_single_step(&mut self) -> Option<MultiThreadSingleStepOps<'_, Self>> {
        Some(self)
    }

    fn support_scheduler_locking(&mut self) -> Option<MultiThreadSchedulerLockingOps<'_, Self>> {
        Some(self)
    }

    fn support_reverse_cont(&mut self) -> Option<ReverseContOps<'_, Tid, Self>> {
        Some(self)
    }

    fn support_reverse_step(&mut self) -> Option<ReverseStepOps<'_, Tid, Self>> {
        Some(self)
    }

    fn set_resume_action_continue(
        &mut self,
        _tid: Tid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        // Signals are the replay's to deliver: the recorded execution decides.
        Ok(())
    }
}

impl ReverseCont<Tid> for ReplayTarget {
    fn reverse_cont(&mut self) -> Result<(), Self::Error> {
        self.goal = Goal::Continue;
        self.send_back(Back::Continue)
    }
}

impl ReverseStep<Tid> for ReplayTarget {
    fn reverse_step(&mut self, tid: Tid) -> Result<(), Self::Error> {
        self.goal = Goal::Continue;
        self.send_back(Back::Instruction(tid.get() - 1))
    }
}

impl MultiThreadSchedulerLocking for ReplayTarget {
    fn set_resume_action_scheduler_lock(&mut self) -> Result<(), Self::Error> {
        // Only one thread ever runs: the schedule's (or the stepped one).
        Ok(())
    }
}

impl MultiThreadSingleStep for ReplayTarget {
    fn set_resume_action_step(
        &mut self,
        tid: Tid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        self.goal = Goal::Instruction(tid.get() - 1);
        Ok(())
    }
}

impl ThreadExtraInfo for ReplayTarget {
    fn thread_extra_info(&self, tid: Tid, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let t = tid.get() - 1;
        let mut text = format!("T{t}");
        if let Some(op) = self
            .threads
            .iter()
            .find(|i| i.id == t)
            .and_then(|i| i.pending)
        {
            text.push_str(&format!(" at {op}"));
        }
        let n = text.len().min(buf.len());
        buf[..n].copy_from_slice(&text.as_bytes()[..n]);
        Ok(n)
    }
}

impl Breakpoints for ReplayTarget {
    fn support_sw_breakpoint(&mut self) -> Option<SwBreakpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_watchpoint(&mut self) -> Option<HwWatchpointOps<'_, Self>> {
        Some(self)
    }
}

impl HwWatchpoint for ReplayTarget {
    fn add_hw_watchpoint(
        &mut self,
        addr: u64,
        len: u64,
        kind: WatchKind,
    ) -> TargetResult<bool, Self> {
        match self
            .ask(Request::SetWatch(addr, len, what(kind)))
            .map_err(gone)?
        {
            Reply::Done(ok) => Ok(ok),
            _ => Ok(false),
        }
    }

    fn remove_hw_watchpoint(
        &mut self,
        addr: u64,
        len: u64,
        kind: WatchKind,
    ) -> TargetResult<bool, Self> {
        match self
            .ask(Request::ClearWatch(addr, len, what(kind)))
            .map_err(gone)?
        {
            Reply::Done(ok) => Ok(ok),
            _ => Ok(false),
        }
    }
}

fn what(kind: WatchKind) -> WatchWhat {
    match kind {
        WatchKind::Write => WatchWhat::Write,
        WatchKind::Read => WatchWhat::Read,
        WatchKind::ReadWrite => WatchWhat::Access,
    }
}

impl SwBreakpoint for ReplayTarget {
    fn add_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        match self.ask(Request::SetBreakpoint(addr)).map_err(gone)? {
            Reply::Done(ok) => Ok(ok),
            _ => Ok(false),
        }
    }

    fn remove_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        match self.ask(Request::ClearBreakpoint(addr)).map_err(gone)? {
            Reply::Done(ok) => Ok(ok),
            _ => Ok(false),
        }
    }
}

impl gdbstub::target::ext::auxv::Auxv for ReplayTarget {
    fn get_auxv(&self, offset: u64, length: usize, buf: &mut [u8]) -> TargetResult<usize, Self> {
        let Ok(Reply::Bytes(auxv)) = self.ask(Request::Auxv) else {
            return Err(TargetError::NonFatal);
        };
        let start = (offset as usize).min(auxv.len());
        let n = (auxv.len() - start).min(length).min(buf.len());
        buf[..n].copy_from_slice(&auxv[start..start + n]);
        Ok(n)
    }
}

/// gdbstub's blocking event loop over the replay.
pub enum ReplayLoop {}

impl BlockingEventLoop for ReplayLoop {
    type Target = ReplayTarget;
    type Connection = TcpStream;
    type StopReason = MultiThreadStopReason<u64>;

    fn wait_for_stop_reason(
        target: &mut ReplayTarget,
        conn: &mut TcpStream,
    ) -> Result<
        run_blocking::Event<Self::StopReason>,
        run_blocking::WaitForStopReasonError<&'static str, std::io::Error>,
    > {
        loop {
            match target.stops.recv_timeout(Duration::from_millis(20)) {
                Ok(stop) => {
                    let reason = ReplayTarget::reason(&stop);
                    target.note_stop(stop);
                    // gdb shows console output that arrives before the stop reply.
                    for text in std::mem::take(&mut target.console) {
                        console(conn, &text)
                            .map_err(run_blocking::WaitForStopReasonError::Connection)?;
                    }
                    return Ok(run_blocking::Event::TargetStopped(reason));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    target.ended = true;
                    return Ok(run_blocking::Event::TargetStopped(
                        MultiThreadStopReason::Terminated(Signal::SIGKILL),
                    ));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            // gdb's Ctrl-C (or a closed connection) while the replay runs.
            if conn
                .peek()
                .map_err(run_blocking::WaitForStopReasonError::Connection)?
                .is_some()
            {
                let byte = ConnectionExt::read(conn)
                    .map_err(run_blocking::WaitForStopReasonError::Connection)?;
                return Ok(run_blocking::Event::IncomingData(byte));
            }
        }
    }

    fn on_interrupt(target: &mut ReplayTarget) -> Result<Option<Self::StopReason>, &'static str> {
        // The executor stops at the running thread's next breakpoint of mcheck's (every
        // memory access, lock call and scheduling decision has one) and reports it.
        target.interrupt.store(true, Ordering::SeqCst);
        Ok(None)
    }
}

/// Sends `text` (a line) to gdb's console: an `O` packet, which gdb accepts while it waits
/// for a stop reply. gdbstub offers console output only to monitor commands; this is the
/// same packet, framed here ('$', the hex of the text, '#', the checksum).
fn console(conn: &mut TcpStream, text: &str) -> std::io::Result<()> {
    let mut body = String::from("O");
    for b in text.bytes().chain(std::iter::once(b'\n')) {
        body.push_str(&format!("{b:02x}"));
    }
    let sum = body.bytes().fold(0u8, |s, b| s.wrapping_add(b));
    conn.write_all(format!("${body}#{sum:02x}").as_bytes())?;
    conn.flush()
}
