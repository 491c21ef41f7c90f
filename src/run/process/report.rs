//! Turning what went wrong in an execution into findings: deadlocks and misuse from the
//! model, fatal signals, runaway threads and exit statuses, each with the stacks of the
//! threads involved (livelocks: `livelock.rs`).

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use std::path::Path;

use super::stacks::{primary_location, Symbols};
use super::{Process, StopPlace};
use crate::model::{ObjectKind, ThreadId};
use crate::report::{Finding, FindingKind, ThreadReport};
use crate::tracee::regs;

/// Stacks and reports of the threads of a stopped process (symbolized with the current
/// process's symbols).
pub(in crate::run) struct Reporter<'a> {
    /// The process tree.
    pub p: &'a Process,
    /// Symbolization.
    pub symbols: &'a mut Symbols,
}

impl Reporter<'_> {
    /// The symbolized stack of thread `t` (empty when it is gone).
    pub fn thread_stack(&mut self, t: ThreadId) -> Vec<crate::report::Frame> {
        let th = &self.p.threads[t];
        if th.gone {
            return vec![];
        }
        let r = regs::get(th.tid).unwrap_or(th.regs);
        let pc = match th.place {
            StopPlace::Breakpoint(a) => a,
            _ => r.rip,
        };
        self.symbols.stack(pc, r.rsp, r.rbp, self.p.mem_of(t))
    }

    /// Thread `t` with its stack, in `state`.
    pub fn thread_report(&mut self, t: ThreadId, state: String) -> ThreadReport {
        let stack = self.thread_stack(t);
        let tid = self.p.threads[t].tid.as_raw();
        let program = &self.p.procs[self.p.proc_of(t)].exe;
        ThreadReport {
            id: t,
            tid,
            name: thread_name(program, tid),
            state,
            stack,
            process: self.p.process_ref(t),
        }
    }
}

/// The thread's name (pthread_setname_np, Rust's thread names) when it has one of its own,
/// i.e. one that differs from `program`'s.
pub(in crate::run) fn thread_name(program: &Path, tid: i32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{tid}/comm")).ok()?;
    let comm = comm.trim();
    let program = program.file_name()?.to_string_lossy();
    let prefix: String = program.chars().take(15).collect();
    (!comm.is_empty() && comm != prefix).then(|| comm.to_string())
}

/// A finding of `kind` about `threads`, located at their innermost frames of the program.
pub(in crate::run) fn finding(
    kind: FindingKind,
    message: String,
    threads: Vec<ThreadReport>,
) -> Finding {
    let locations = threads
        .iter()
        .filter_map(|t| primary_location(&t.stack))
        .collect();
    Finding {
        kind,
        message,
        details: vec![],
        locations,
        threads,
        preemptions: 0,
        seed: 0,
        execution: 0,
        steps: 0,
        strategy: String::new(),
        schedule: None,
        cycle: Vec::new(),
        other_schedule: Vec::new(),
        output_file: None,
    }
}

pub(in crate::run) fn describe_deadlock(
    local: bool,
    blocked: &[crate::model::BlockedThread],
) -> String {
    let names: Vec<String> = blocked.iter().map(|b| format!("T{}", b.thread)).collect();
    let exited_holder = blocked
        .iter()
        .flat_map(|b| b.holders.iter().map(move |h| (b, h)))
        .find(|(b, h)| h.exited && b.object.kind != ObjectKind::Thread);
    if let Some((b, h)) = exited_holder {
        return format!(
            "thread T{} waits forever for a {} that thread T{} still held when it exited",
            b.thread,
            b.object.kind.name(),
            h.thread
        );
    }
    if local {
        if blocked.len() == 1 {
            return format!(
                "thread {} waits for a {} it holds itself",
                names[0],
                blocked[0].object.kind.name()
            );
        }
        return format!(
            "threads {} wait for each other in a cycle",
            names.join(", ")
        );
    }
    format!(
        "no thread can run: {} blocked forever ({})",
        names.join(", "),
        blocked.iter().map(|b| b.op).collect::<Vec<_>>().join(", ")
    )
}

/// Whether thread `tid` has a handler installed for `sig` (SigCgt in /proc).
pub(in crate::run) fn signal_is_caught(tid: Pid, sig: Signal) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (sig as i32 - 1)) != 0)
}
