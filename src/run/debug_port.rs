//! The port through which a debugger (`mcheck replay --gdb`) looks at an execution:
//! the executor reports a few moments (the program reached its entry, a scheduling decision,
//! a debugger breakpoint, a data race at its second access, the end) to a [`Debugger`],
//! which may inspect the stopped program through a [`ProgramView`] before it lets the
//! execution go on. Only one tracee thread ever runs, so at every such moment every thread
//! of the program sits in a ptrace stop and can be read.
//!
//! The view hides mcheck's own instrumentation: memory reads show the program's bytes under
//! mcheck's `int3`s, and a thread stopped on one of them is shown at the instruction, not
//! one byte past it.

use std::collections::HashSet;

use crate::model::ThreadId;
use crate::report::Finding;
use crate::tracee::debugregs::Watch;
use crate::tracee::regs::Regs;

/// A moment of the execution reported to the debugger.
#[derive(Debug)]
pub enum DebugEvent {
    /// The program reached its entry point: its libraries are mapped and instrumented.
    Started,
    /// Scheduling decision `step` (0-based: `step` decisions were taken before it) is about
    /// to run `thread`'s pending operation.
    Point {
        /// Decisions taken before this one.
        step: u64,
        /// The thread the schedule runs now.
        thread: ThreadId,
    },
    /// `thread` reached a breakpoint the debugger set at `addr`.
    Breakpoint {
        /// The thread that hit it.
        thread: ThreadId,
        /// The breakpoint's address.
        addr: u64,
    },
    /// `thread` is about to make the later access of a data race (`finding`).
    Race {
        /// The thread making the access.
        thread: ThreadId,
        /// The race.
        finding: Box<Finding>,
    },
    /// `thread` executed one instruction (gdb's stepi), or was refused it (`moved` false:
    /// it is not the thread the schedule runs, or its instruction is one that only the
    /// executor may execute: a system call, one of mcheck's hooks or scheduling points).
    Stepped {
        /// The thread asked to step.
        thread: ThreadId,
        /// Whether it executed an instruction.
        moved: bool,
        /// Refused because only the executor may execute the instruction, but the thread
        /// is the one it runs on from here: where the thread is back at an instruction of
        /// its own once the executor performed that one as the replay does (see
        /// [`Boundary`]). A debugger that lets the execution go on ([`Resume::Continue`])
        /// with a breakpoint at these addresses stops the thread one instruction further,
        /// as the user sees it. Empty when the step cannot be made at all.
        over: Vec<Boundary>,
    },
    /// The debugger asked to stop (gdb's Ctrl-C): `thread`, the running one, is stopped at
    /// one of mcheck's breakpoints.
    Interrupted {
        /// The running thread.
        thread: ThreadId,
    },
    /// A debugger watchpoint at `addr` fired in `thread` (which made the access).
    Watch {
        /// The thread that accessed the watched memory.
        thread: ThreadId,
        /// The watchpoint's address.
        addr: u64,
    },
    /// `thread` is about to end the process (its exit_group) with a status that is a
    /// finding: shown here, where its registers and stack can still be read.
    Exiting {
        /// The thread ending the process.
        thread: ThreadId,
        /// The exit status finding (or the panic the status reports).
        finding: Box<Finding>,
    },
    /// The execution is over: with its finding, or how the process ended. Threads still in
    /// the process can be inspected until the debugger lets go.
    End {
        /// The finding that ended it.
        finding: Option<Box<Finding>>,
        /// How the process ended, when it did.
        exit: Option<String>,
    },
}

/// An instruction boundary a thread reaches: its address, and the thread's stack pointer
/// there (which tells a return to this call apart from one of a recursive call, and the
/// thread from another running the same code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boundary {
    /// The instruction's address.
    pub addr: u64,
    /// The stack pointer there.
    pub sp: u64,
}

/// What the executor does after the debugger looked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Go on with the schedule.
    Continue,
    /// End the execution now (the program is killed).
    Kill,
    /// Execute one instruction of this thread, then report [`DebugEvent::Stepped`].
    Step(ThreadId),
}

/// Something that watches an execution at the moments of [`DebugEvent`].
pub trait Debugger {
    /// Called at `ev` with the stopped program; returns when the execution may go on.
    fn on_event(&mut self, view: &mut dyn ProgramView, ev: &DebugEvent) -> Resume;

    /// Tells the user something about the execution (why a step was refused).
    fn say(&mut self, text: String) {
        eprintln!("{text}");
    }

    /// Asked at each of mcheck's own breakpoints the running thread reaches: whether to
    /// stop there for the debugger ([`DebugEvent::Interrupted`]). The calls happen at the
    /// same moments in every execution of a schedule, so a debugger may count them.
    /// `thread` is the running thread, stopped at the breakpoint.
    fn poll_interrupt(&mut self, thread: ThreadId) -> bool {
        let _ = thread;
        false
    }
}

/// One thread of the program as the debugger sees it.
#[derive(Debug, Clone)]
pub struct ThreadInfo {
    /// mcheck's id (shown as `T<id>`).
    pub id: ThreadId,
    /// The kernel's thread id.
    pub tid: i32,
    /// The operation it waits to perform at its scheduling point, if it is at one.
    pub pending: Option<&'static str>,
}

/// The stopped program, as a debugger may see and change it.
pub trait ProgramView {
    /// The live threads, by mcheck id.
    fn threads(&self) -> Vec<ThreadInfo>;
    /// Thread `t`'s general registers (rip at the instruction of a breakpoint it stopped on).
    fn registers(&mut self, t: ThreadId) -> Option<Regs>;
    /// Changes thread `t`'s general registers.
    fn write_registers(&mut self, t: ThreadId, regs: Regs) -> bool;
    /// Thread `t`'s x87/SSE registers.
    fn fp_registers(&self, t: ThreadId) -> Option<libc::user_fpregs_struct>;
    /// Reads program memory as the program's own bytes (mcheck's breakpoints hidden);
    /// returns how many bytes could be read.
    fn read_memory(&self, addr: u64, buf: &mut [u8]) -> usize;
    /// Writes program memory, keeping mcheck's breakpoints in place.
    fn write_memory(&mut self, addr: u64, data: &[u8]) -> bool;
    /// Sets a debugger breakpoint at `addr`.
    fn set_breakpoint(&mut self, addr: u64) -> bool;
    /// Clears the debugger breakpoint at `addr`.
    fn clear_breakpoint(&mut self, addr: u64) -> bool;
    /// Sets a hardware watchpoint (false: no free slot, or a range the hardware cannot
    /// watch).
    fn set_watch(&mut self, w: Watch) -> bool;
    /// Clears a hardware watchpoint.
    fn clear_watch(&mut self, w: Watch) -> bool;
    /// The run-time address of function `name` in the program's executable.
    fn program_function(&self, name: &str) -> Option<u64>;
    /// Whether thread `t` is stopped at the start of a system call, which the executor
    /// performs for it (at a scheduling decision, it waits in the call).
    fn in_system_call(&self, t: ThreadId) -> bool;
    /// Scheduling decisions taken so far.
    fn steps(&self) -> u64;
    /// The auxiliary vector the kernel gave the program (`/proc/PID/auxv`).
    fn auxv(&self) -> Vec<u8>;
    /// At a scheduling decision ([`DebugEvent::Point`]) only: takes a fork snapshot of the
    /// whole program as it was just before the decision, which a later execution of the
    /// same schedule can start from ([`crate::run::debug_worker::DebugWorker`]). Returns
    /// the decisions of the snapshots kept now (older ones may have made room for it), or
    /// None when the program cannot be copied faithfully here. Take it with none of the
    /// debugger's breakpoints or watchpoints in the program: a copy starts without them.
    fn snapshot(&mut self) -> Option<Vec<u64>>;
}

/// The debugger of an execution and the breakpoints it set (kept by the worker).
pub struct DebugHook {
    /// The debugger.
    pub debugger: Box<dyn Debugger>,
    /// Addresses of the debugger's breakpoints.
    pub(in crate::run) breakpoints: HashSet<u64>,
    /// The debugger's watchpoints, in debug-register slot order.
    pub(in crate::run) watches: Vec<Watch>,
    /// Changes of `watches` so far; each thread's registers are brought up to date
    /// before it runs.
    pub(in crate::run) generation: u64,
    /// The generation each thread's debug registers hold, by tid.
    pub(in crate::run) armed: std::collections::HashMap<i32, u64>,
}

impl DebugHook {
    /// A hook with no breakpoints yet.
    pub fn new(debugger: Box<dyn Debugger>) -> Self {
        DebugHook {
            debugger,
            breakpoints: HashSet::new(),
            watches: Vec::new(),
            generation: 0,
            armed: Default::default(),
        }
    }
}
