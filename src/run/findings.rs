//! Turning what went wrong in an execution into findings: deadlocks and misuse from the
//! model, fatal signals, runaway threads and exit statuses, each with the stacks of the
//! threads involved (livelocks: `livelock.rs`).

use anyhow::Result;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use std::path::Path;

use super::execution::{Execution, ProcessEnd};
use super::process::stacks::{primary_location, Symbols};
use super::process::{Process, StopPlace};
use crate::model::{ModelFinding, ObjectKind, ThreadId};
use crate::report::{Finding, FindingKind, ThreadReport};
use crate::tracee::{events, regs};

/// Stacks and reports of the threads of a stopped process.
pub(super) struct Reporter<'a> {
    /// The process.
    pub p: &'a Process,
    /// Symbolization.
    pub symbols: &'a mut Symbols,
    /// The program (thread names that differ from it are shown).
    pub program: &'a Path,
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
        self.symbols.stack(pc, r.rsp, r.rbp, &self.p.mem)
    }

    /// Thread `t` with its stack, in `state`.
    pub fn thread_report(&mut self, t: ThreadId, state: String) -> ThreadReport {
        let stack = self.thread_stack(t);
        let tid = self.p.threads[t].tid.as_raw();
        ThreadReport {
            id: t,
            tid,
            name: thread_name(self.program, tid),
            state,
            stack,
        }
    }
}

/// The thread's name (pthread_setname_np, Rust's thread names) when it has one of its own,
/// i.e. one that differs from `program`'s.
pub(super) fn thread_name(program: &Path, tid: i32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{tid}/comm")).ok()?;
    let comm = comm.trim();
    let program = program.file_name()?.to_string_lossy();
    let prefix: String = program.chars().take(15).collect();
    (!comm.is_empty() && comm != prefix).then(|| comm.to_string())
}

/// A finding of `kind` about `threads`, located at their innermost frames of the program.
pub(super) fn finding(kind: FindingKind, message: String, threads: Vec<ThreadReport>) -> Finding {
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
    }
}

impl Execution<'_> {
    /// Stacks and reports of this execution's threads.
    pub(super) fn reporter(&mut self) -> Reporter<'_> {
        Reporter {
            p: &self.p,
            symbols: &mut self.worker.symbols,
            program: &self.cfg.program.path,
        }
    }

    /// Thread `t` with its stack, in `state`.
    pub(super) fn thread_report(&mut self, t: ThreadId, state: String) -> ThreadReport {
        self.reporter().thread_report(t, state)
    }

    pub(super) fn object_desc(&mut self, kind: ObjectKind, addr: u64) -> String {
        match kind {
            ObjectKind::Thread => format!("thread T{addr}"),
            ObjectKind::Time => "a timer".to_string(),
            ObjectKind::Kernel => self
                .describe_kernel_wait(addr as ThreadId)
                .unwrap_or_else(|| "the kernel".to_string()),
            _ => {
                let name = (self.races).memory_name(&mut self.worker.symbols, addr, true);
                format!("{} {name}", kind.name())
            }
        }
    }

    pub(super) fn model_finding(&mut self, f: ModelFinding) -> Finding {
        match f {
            ModelFinding::Misuse {
                thread,
                object,
                message,
            } => {
                let what = object
                    .map(|o| format!(" ({})", self.object_desc(o.kind, o.addr)))
                    .unwrap_or_default();
                let state = format!("{message}{what}");
                let report = self.thread_report(thread, state.clone());
                finding(
                    FindingKind::ApiMisuse,
                    format!("thread T{thread} {state}"),
                    vec![report],
                )
            }
            ModelFinding::Deadlock { local, blocked } => {
                let mut threads = Vec::new();
                let mut details = Vec::new();
                for b in &blocked {
                    let obj = self.object_desc(b.object.kind, b.object.addr);
                    let mut state = if b.object.kind == ObjectKind::Kernel {
                        format!("is blocked in the kernel in {obj}")
                    } else {
                        format!("is blocked in {} on {obj}", b.op)
                    };
                    for h in &b.holders {
                        let held = if b.object.kind == ObjectKind::Thread {
                            if h.exited {
                                String::new()
                            } else {
                                ", which has not exited".to_string()
                            }
                        } else {
                            let at = if h.site != 0 {
                                format!(
                                    ", acquired at {}",
                                    self.worker.symbols.call_site(h.site).short()
                                )
                            } else {
                                String::new()
                            };
                            let exited = if h.exited { " (which has exited)" } else { "" };
                            format!(", held by T{}{exited}{at}", h.thread)
                        };
                        state.push_str(&held);
                    }
                    if b.site != 0 && b.object.kind != ObjectKind::Thread {
                        let at = self.worker.symbols.call_site(b.site).short();
                        details.push(format!("T{} waits at {at}", b.thread));
                    }
                    threads.push(self.thread_report(b.thread, state));
                }
                let message = describe_deadlock(local, &blocked);
                let mut f = finding(FindingKind::Deadlock, message, threads);
                f.details = details;
                f
            }
        }
    }

    pub(super) fn signal_finding(&mut self, t: ThreadId, sig: Signal) -> Option<Finding> {
        let fatal = matches!(
            sig,
            Signal::SIGSEGV | Signal::SIGBUS | Signal::SIGFPE | Signal::SIGILL | Signal::SIGABRT
        );
        if !fatal || signal_is_caught(self.p.threads[t].tid, sig) {
            return None;
        }
        let _ = self.p.load_regs(t);
        self.p.threads[t].place = StopPlace::Event;
        if sig == Signal::SIGABRT {
            let report = self.thread_report(t, "aborted (SIGABRT)".into());
            return Some(finding(
                FindingKind::Assertion,
                format!("the program aborted in thread T{t}"),
                vec![report],
            ));
        }
        let addr = events::fault_address(self.p.threads[t].tid).unwrap_or(0);
        let report = self.thread_report(t, format!("received {sig:?}"));
        let place = report
            .stack
            .first()
            .map(|f| format!(" in {}", f.short()))
            .unwrap_or_default();
        let what = match sig {
            Signal::SIGSEGV => format!("invalid memory access at address {addr:#x}"),
            Signal::SIGBUS => format!("bus error at address {addr:#x}"),
            Signal::SIGFPE => "arithmetic exception".to_string(),
            _ => "illegal instruction".to_string(),
        };
        Some(finding(
            FindingKind::Crash,
            format!("{sig:?}: {what} by thread T{t}{place}"),
            vec![report],
        ))
    }

    pub(super) fn timeout_finding(&mut self, t: ThreadId) -> Result<Finding> {
        self.p.load_regs(t)?;
        self.p.threads[t].place = StopPlace::Event;
        let secs = self.cfg.limits.execution_timeout.as_secs_f64();
        let report = self.thread_report(
            t,
            format!("ran {secs:.1} s without reaching a scheduling point"),
        );
        let place = report
            .stack
            .iter()
            .find(|f| f.user_code)
            .or(report.stack.first())
            .map(|f| format!(" in {}", f.short()))
            .unwrap_or_default();
        Ok(finding(
            FindingKind::Timeout,
            format!(
                "thread T{t} spins{place}: no scheduling point for {secs:.1} s (a busy wait on a plain variable?)"
            ),
            vec![report],
        ))
    }

    pub(super) fn exit_finding(&self, end: ProcessEnd) -> Option<Finding> {
        match end {
            ProcessEnd::Exited(code) if code == self.cfg.limits.expect_exit => None,
            ProcessEnd::Exited(101) | ProcessEnd::Killed(Signal::SIGABRT)
                if self.panic.is_some() =>
            {
                let report = self.panic.clone().expect("checked");
                let msg = format!("the program panicked in thread T{}", report.id);
                Some(finding(FindingKind::Assertion, msg, vec![report]))
            }
            ProcessEnd::Exited(code) => Some(finding(
                FindingKind::ExitStatus,
                format!(
                    "the program exited with status {code}, expected {}",
                    self.cfg.limits.expect_exit
                ),
                vec![],
            )),
            ProcessEnd::Killed(Signal::SIGABRT) => Some(finding(
                FindingKind::Assertion,
                "the program aborted (SIGABRT)".into(),
                vec![],
            )),
            ProcessEnd::Killed(sig) => Some(finding(
                FindingKind::ExitStatus,
                format!("the program was terminated by {sig:?}"),
                vec![],
            )),
            ProcessEnd::Vanished | ProcessEnd::Abandoned => None,
        }
    }
}

fn describe_deadlock(local: bool, blocked: &[crate::model::BlockedThread]) -> String {
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
pub(super) fn signal_is_caught(tid: Pid, sig: Signal) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (sig as i32 - 1)) != 0)
}
