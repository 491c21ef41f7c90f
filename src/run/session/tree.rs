//! The process tree: every process the program forks is followed and checked like the
//! program itself, and so is every program a process execs (rr records whole process trees
//! the same way). Threads are numbered across the tree and scheduled together, one at a
//! time: a process's threads are threads of the one model, whose addresses are tagged with
//! the process image's address space (`model::spaces`).
//!
//! The session's per-process parts (code edits, instrumentation, race recording, return
//! breakpoints, and the worker's symbols) are those of the *current* process, the one whose
//! thread runs or is looked at; the other processes' wait here, parked, and
//! [`Processes::focus`] swaps them in. A program that never forks nor execs never swaps:
//! single-process executions pay one comparison per step.
//!
//! A fork child (fork, or clone without `CLONE_VM`) starts as a copy of its parent: the
//! same code edits (its memory is a copy, breakpoints and patched sites included; the
//! access log is a shared mapping, drained at every stop like the parent's), a race
//! detector of its own (its memory is its own), a new address space, and one thread whose
//! first step starts right after its parent's step, as a new thread's does. A vfork child
//! shares its parent's memory until it execs, and runs natively until then (`foreign`).
//! An image that a process execs starts afresh: new address space, no code edits, its
//! auxiliary vector made deterministic and a breakpoint at its entry, where it is
//! instrumented as the program is. The end of a process ends its threads; the execution
//! ends when every process has ended, and its exit status is the program's (P0's).

use std::collections::HashMap;

use anyhow::{Context, Result};
use nix::unistd::Pid;

use super::stops::{CLONE_CHILD_CLEARTID, CLONE_THREAD, CLONE_VM};
use super::{ProcessEnd, RunResult, Session};
use crate::model::{address_of, space_of, Op, ThreadId};
use crate::run::instrument::code::{BreakpointKind, CodeEdits};
use crate::run::instrument::Instrumentation;
use crate::run::process::{auxv_entry, StopPlace, TracedThread};
use crate::run::races::{PendingReturn, RaceRecording};
use crate::tracee::events;

/// The parts of a process that are not current.
struct ProcessParts {
    code: CodeEdits,
    instr: Instrumentation,
    races: RaceRecording,
    returns: HashMap<u64, Vec<PendingReturn>>,
}

/// What the session keeps of the processes that are not current.
#[derive(Default)]
pub(in crate::run) struct Tree {
    /// The parts of each process by number (None: the current one, or one that ended).
    parked: Vec<Option<ProcessParts>>,
    /// The parts of process images that are gone (ended, or replaced by exec): their race
    /// findings are the execution's.
    retired: Vec<ProcessParts>,
    /// How the program as launched (P0) ended, while processes it started still run.
    root_end: Option<ProcessEnd>,
}

impl Tree {
    /// What a snapshot keeps (snapshots are taken of a single process only: the race
    /// recordings of the images it replaced by exec).
    pub(super) fn saved(&self) -> Vec<RaceRecording> {
        self.retired.iter().map(|p| p.races.saved(false)).collect()
    }

    /// A copy's tree, from what its snapshot kept.
    pub(super) fn restored(retired: Vec<RaceRecording>) -> Tree {
        Tree {
            retired: (retired.into_iter())
                .map(|races| ProcessParts {
                    code: CodeEdits::default(),
                    instr: Instrumentation::default(),
                    races,
                    returns: HashMap::new(),
                })
                .collect(),
            ..Tree::default()
        }
    }

    fn park(&mut self, i: usize, parts: ProcessParts) {
        if self.parked.len() <= i {
            self.parked.resize_with(i + 1, || None);
        }
        self.parked[i] = Some(parts);
    }
}

/// The process tree's side of an execution: which process is current, and the
/// processes the program forks and execs, from their first stop to their end.
pub(super) struct Processes<'e, 'a>(pub &'e mut Session<'a>);

impl Processes<'_, '_> {
    /// Makes the process of thread `t` the current one.
    pub(super) fn focus(&mut self, t: ThreadId) {
        let i = self.0.p.proc_of(t);
        self.focus_process(i);
    }

    /// Makes process `i` the current one (when it is still there): its parts come in, the
    /// current one's are parked.
    pub(super) fn focus_process(&mut self, i: usize) {
        let current = self.0.p.current();
        if i == current {
            return;
        }
        let Some(incoming) = self.0.tree.parked.get_mut(i).and_then(Option::take) else {
            return;
        };
        let outgoing = self.swap_parts(incoming);
        if self.0.p.procs[current].live {
            self.0.tree.park(current, outgoing);
        } else {
            self.0.tree.retired.push(outgoing);
        }
        self.0.p.switch_to(i);
        let exe = self.0.p.exe().to_path_buf();
        self.0.worker.switch_symbols(&exe);
    }

    /// Puts `parts` in place of the current process's, returning those.
    fn swap_parts(&mut self, parts: ProcessParts) -> ProcessParts {
        ProcessParts {
            code: std::mem::replace(&mut self.0.code, parts.code),
            instr: std::mem::replace(&mut self.0.instr, parts.instr),
            races: std::mem::replace(&mut self.0.races, parts.races),
            returns: std::mem::replace(&mut self.0.returns, parts.returns),
        }
    }

    /// Makes the process whose address space tags `addr` current, when it is still there;
    /// returns the address in that process.
    pub(super) fn focus_address(&mut self, addr: u64) -> u64 {
        let space = space_of(addr);
        if let Some(i) = (self.0.p.procs.iter()).position(|p| p.live && p.space == space) {
            self.focus_process(i);
        }
        address_of(addr)
    }

    /// The image of the current process begins (at exec, thread `t` at its exec stop): its
    /// auxiliary vector made deterministic and a breakpoint at its entry, where the
    /// libraries are mapped and it is instrumented.
    pub(super) fn begin_image(&mut self, t: ThreadId) -> Result<()> {
        let rsp = self.0.p.load_regs(t)?.rsp;
        self.0
            .world
            .patch_auxv(&self.0.p.mem, rsp)
            .context("making the execution deterministic (auxv)")?;
        let entry = auxv_entry(self.0.p.pid)?;
        self.0
            .code
            .add_breakpoints(&self.0.p.mem, &[entry], |_| Some(BreakpointKind::Entry))?;
        Ok(())
    }

    /// Running thread `t` forked `child` (fork, or a clone without `CLONE_VM`): the child
    /// is a process of the tree, a copy of `t`'s, with one thread that starts after this
    /// step as a new thread does (see `on_clone`).
    pub(super) fn on_fork(&mut self, t: ThreadId, child: Pid) -> Result<Option<RunResult>> {
        let (flags, ctid, _) = self.0.step.pending_clone.take().unwrap_or((0, 0, 0));
        debug_assert_eq!(flags & CLONE_THREAD, 0);
        if flags & CLONE_VM != 0 {
            // clone(CLONE_VM | SIGCHLD) is reported as a fork, but the child shares its
            // parent's memory: it is not a copy, and runs natively (the summary says so).
            self.0.adopt_foreign(child)?;
            events::resume(self.0.p.threads[t].tid, None)?;
            return Ok(None);
        }
        let j = match self.0.p.add_process(child, true) {
            Ok(j) => j,
            // Gone already (killed): nothing to follow.
            Err(_) => return self.continue_parent(t),
        };
        let u = self.0.model.add_thread();
        let started = self.0.p.early_stops.remove(&child);
        let clear_tid = if flags & CLONE_CHILD_CLEARTID != 0 {
            ctid
        } else {
            0
        };
        // Its thread runs on from the fork as `t` would: the same thread pointer, stack
        // and alternate stack.
        let mut th = TracedThread::new(child, started, clear_tid, self.0.p.threads[t].handle);
        th.proc = j;
        th.altstack = self.0.p.threads[t].altstack;
        th.affinity = self.0.p.threads[t].affinity.clone();
        self.0.p.threads.push(th);
        self.0.p.by_tid.insert(child, u);
        debug_assert_eq!(self.0.p.threads.len(), u + 1);
        // Returns `t` was waiting for happen in the child as well (the same call returns
        // in both); the others' breakpoints are in the copied code and are stepped over.
        let returns = (self.0.returns.iter())
            .map(|(&addr, list)| {
                let list = (list.iter())
                    .map(|r| PendingReturn {
                        thread: if r.thread == t { u } else { r.thread },
                        ..*r
                    })
                    .collect();
                (addr, list)
            })
            .collect();
        let parts = ProcessParts {
            code: self.0.code.clone(),
            instr: self.0.instr.saved(),
            races: self.fresh_races(u),
            returns,
        };
        self.0.tree.park(j, parts);
        self.continue_parent(t)
    }

    /// A race recording for a new process image whose first thread is `t`, as the
    /// execution's configuration asks.
    fn fresh_races(&self, t: ThreadId) -> RaceRecording {
        let cfg = self.0.cfg;
        RaceRecording::for_process(self.0.races.on(), cfg.stack_requests.clone(), t)
            .with_heap_checks(cfg.instrument.heap_checks, cfg.instrument.quarantine_blocks)
    }

    /// After `t` created a process, `t` runs on: like after a thread creation, to its next
    /// operation within this step (or, without race detection, as a decision of its own).
    fn continue_parent(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let tid = self.0.p.threads[t].tid;
        if !self.0.eager_starts() {
            if let Some(sig) = events::finish_syscall_in_event(tid)? {
                self.0.p.threads[t].pending_signal = Some(sig);
            }
            self.0.p.threads[t].place = StopPlace::Event;
            return self.0.point(t, Op::Continue, 0);
        }
        self.0.step.creation_stretch.insert(t);
        self.0.sync_log_mode(t);
        events::resume(tid, None)?;
        Ok(None)
    }

    /// A vfork child (followed natively until now, sharing its parent's memory) exec'd: it
    /// becomes a process of the tree with a new image, and one thread that starts after
    /// the step in progress. It stays stopped at its exec stop until then.
    pub(super) fn adopt_exec(&mut self, pid: Pid) -> Result<()> {
        self.0.p.foreign_exec(pid);
        let Ok(j) = self.0.p.add_process(pid, false) else {
            return events::resume(pid, None).map_err(Into::into);
        };
        let u = self.0.model.add_thread();
        let mut th = TracedThread::new(pid, true, 0, 0);
        th.proc = j;
        self.0.p.threads.push(th);
        self.0.p.by_tid.insert(pid, u);
        let parts = ProcessParts {
            code: CodeEdits::default(),
            instr: Instrumentation::default(),
            races: self.fresh_races(u),
            returns: HashMap::new(),
        };
        self.0.tree.park(j, parts);
        let back = self.0.p.current();
        self.focus_process(j);
        let begun = self.begin_image(u);
        self.focus_process(back);
        begun
    }

    /// Running thread `t` exec'd (its process is the current one): the process runs a new
    /// image, which begins as the program does at launch; its other threads are gone.
    pub(super) fn on_exec(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let i = self.0.p.current();
        let pid = self.0.p.pid;
        for u in 0..self.0.p.threads.len() {
            if u == t || self.0.p.threads[u].proc != i || self.0.p.threads[u].gone {
                continue;
            }
            self.0.p.threads[u].gone = true;
            if !self.0.model.is_finished(u) {
                // Killed by the exec: a wait on what they held is found when it happens.
                self.0.model.thread_exited(u);
            }
            self.0.step.creation_stretch.remove(&u);
        }
        // A thread other than the leader that execs takes the leader's tid.
        let old_tid = self.0.p.threads[t].tid;
        if old_tid != pid {
            self.0.p.by_tid.remove(&old_tid);
            self.0.p.threads[t].tid = pid;
            self.0.p.by_tid.insert(pid, t);
        }
        self.0.kernel.forget_process(pid);
        self.0
            .p
            .new_image()
            .context("opening the memory of an exec'd image")?;
        let races = self.fresh_races(t);
        let old = self.swap_parts(ProcessParts {
            code: CodeEdits::default(),
            instr: Instrumentation::default(),
            races,
            returns: HashMap::new(),
        });
        self.0.tree.retired.push(old);
        let exe = self.0.p.exe().to_path_buf();
        self.0.worker.switch_symbols(&exe);
        let th = &mut self.0.p.threads[t];
        // exec resets the thread's alternate stack; the new libc sets its tid address and
        // thread pointer anew.
        (th.clear_tid, th.handle, th.altstack) = (0, 0, None);
        th.place = StopPlace::Event;
        self.0.step.group_exiting = false;
        self.begin_image(t)?;
        events::resume(pid, None)?;
        Ok(None)
    }

    /// The current process ended with `end`. Some(how the program ended) when the
    /// execution is over: the program was a single process, or every process has ended.
    pub(super) fn process_ended(&mut self, end: ProcessEnd) -> Option<ProcessEnd> {
        if !self.0.p.forked() || matches!(end, ProcessEnd::Vanished | ProcessEnd::Abandoned) {
            return Some(end);
        }
        let i = self.0.p.current();
        self.close_process(i, end);
        self.0.step.group_exiting = false;
        if self.0.p.procs.iter().any(|p| p.live) {
            return None;
        }
        Some(self.0.tree.root_end.unwrap_or(end))
    }

    /// Process `i` ended with `end`: its threads are gone (none of them runs: it is not the
    /// current process, or the step that ended it is over).
    pub(super) fn close_process(&mut self, i: usize, end: ProcessEnd) {
        if !self.0.p.procs[i].live {
            return;
        }
        for u in 0..self.0.p.threads.len() {
            if self.0.p.threads[u].proc != i {
                continue;
            }
            self.0.p.threads[u].gone = true;
            self.0.step.creation_stretch.remove(&u);
            if !self.0.model.is_finished(u) {
                // A wait on what they held is found when it happens.
                self.0.model.thread_exited(u);
            }
        }
        if i == 0 {
            self.0.tree.root_end = Some(end);
        }
        self.0.kernel.forget_process(self.0.p.procs[i].pid);
        if let Some(parts) = self.0.tree.parked.get_mut(i).and_then(Option::take) {
            self.0.tree.retired.push(parts);
        }
        self.0.p.ended(i);
    }

    /// Whether the program as launched has ended while processes it started still run.
    pub(super) fn root_ended(&self) -> Option<ProcessEnd> {
        self.0.tree.root_end
    }

    /// Every race recording of the execution but the current process's, taken out (at its
    /// end), with the racy accesses each found and the instructions accessing them by fixed
    /// address (`CodeEdits::fixed_address_sites`).
    pub(super) fn other_race_recordings(&mut self) -> Vec<(RaceRecording, Vec<u64>, Vec<u64>)> {
        let parked = std::mem::take(&mut self.0.tree.parked);
        let retired = std::mem::take(&mut self.0.tree.retired);
        (retired.into_iter())
            .chain(parked.into_iter().flatten())
            .map(|parts| {
                let fresh: Vec<u64> = (parts.races.racy_addresses().into_iter())
                    .filter(|a| !self.0.worker.racy_addresses.contains(a))
                    .collect();
                let mut sites = parts.races.racy_pcs();
                sites.extend(parts.code.fixed_address_sites(&fresh));
                (parts.races, fresh, sites)
            })
            .collect()
    }
}
