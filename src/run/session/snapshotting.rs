//! The taking of fork snapshots of an execution (`snapshots/` keeps them): saving the
//! tracer's state of every part, forking the startup template at the first thread
//! creation, and taking branch snapshots of the whole multi-threaded process at scheduling
//! points of a tree search.

use anyhow::{Context, Result};

use super::Session;
use crate::model::ThreadId;
use crate::run::process::StopPlace;
use crate::run::snapshots::snapshot::{
    self, BranchSnapshot, CopiedThread, PendingSignals, SavedExecution, StartupSnapshot,
};
use crate::run::world::capture::OutputStarts;
use crate::tracee::files::FileStates;
use crate::tracee::fork::{fork_stopped, ForkFrom};
use crate::tracee::threads;
use crate::tracee::{events, procfs, regs};

/// The taking of snapshots of an execution: what it saves of every part, and when.
pub(in crate::run) struct Snapshotting<'e, 'a>(pub &'e mut Session<'a>);

/// Decisions between two branch snapshots on one path at least: restoring one costs about
/// as much as replaying this many scheduling points.
const BRANCH_GAP: usize = 48;

/// Most bytes of files open for writing a branch snapshot keeps (see `branch_snapshot`); a
/// point where the program holds more takes no branch snapshot (at most `MAX_BRANCHES` are
/// kept, so this bounds their memory).
const BRANCH_FILE_BYTES: u64 = 4 << 20;

impl Snapshotting<'_, '_> {
    /// The tracer-side state now, for a snapshot.
    pub(in crate::run) fn save_state(&self) -> SavedExecution {
        let kernel = self.0.kernel.saved(self.0.p.pid);
        SavedExecution {
            model: self.0.model.clone(),
            races: self.0.races.saved(true),
            returns: self.0.returns.clone(),
            code: self.0.code.clone(),
            instr: self.0.instr.saved(),
            panic: self.0.panic.clone(),
            history: self.0.history.clone(),
            world: self.0.world.saved(),
            step: self.0.step.saved(),
            kernel,
            retired_races: self.0.tree.saved(),
            locks: self.0.locks.clone(),
            output: OutputStarts::mark(
                self.0.worker.stderr_capture.as_ref(),
                self.0.worker.stdout_capture.as_ref(),
            ),
        }
    }

    /// At the first thread creation (`t` at the clone's seccomp stop with registers `r`):
    /// forks the template of the worker's startup snapshot. True when it was taken; the
    /// thread is then resumed at the `syscall`, to run the clone as if nothing happened.
    pub(in crate::run) fn take_startup_snapshot(
        &mut self,
        t: ThreadId,
        r: &regs::Regs,
        key: String,
    ) -> Result<bool> {
        if self.0.p.mem.read_u16(r.rip.wrapping_sub(2)).ok() != Some(0x050f) {
            let why = "the clone was not made by a syscall instruction".to_string();
            self.0.worker.snapshots.refuse(&key, why);
            return Ok(false);
        }
        let mut canonical = *r;
        canonical.rip = r.rip - 2;
        canonical.rax = r.orig_rax;
        canonical.orig_rax = u64::MAX;
        if !self.fork_startup_template(t, canonical, ForkFrom::SeccompStop, key)? {
            return Ok(false);
        }
        events::resume(self.0.p.threads[t].tid, None)?;
        Ok(true)
    }

    /// At `main` of a program whose first execution created no thread (the main thread at
    /// the removed breakpoint, registers `r` with rip at `main`): the startup snapshot is
    /// taken there instead. The thread is left stopped for the caller to resume.
    pub(in crate::run) fn take_main_snapshot(
        &mut self,
        t: ThreadId,
        r: &regs::Regs,
        key: String,
    ) -> Result<bool> {
        if self.0.p.syscall_insn == 0 {
            return Ok(false);
        }
        let mut canonical = *r;
        canonical.orig_rax = u64::MAX;
        let from = ForkFrom::Stop {
            syscall_insn: self.0.p.syscall_insn,
        };
        self.fork_startup_template(t, canonical, from, key)
    }

    /// Forks the startup template from main thread `t`, to resume with `canonical`; true
    /// when taken, false (with the reason said once) when a copy would not be faithful.
    /// The thread is left stopped, with `canonical`, for the caller to resume.
    fn fork_startup_template(
        &mut self,
        t: ThreadId,
        canonical: regs::Regs,
        from: ForkFrom,
        key: String,
    ) -> Result<bool> {
        let pid = self.0.p.pid;
        let r = &canonical;
        let refusal = if self.0.p.forked() {
            Some("the program started another process before its first thread (a copy of one process would not hold the others)".to_string())
        } else if self.0.p.threads.len() != 1 || t != 0 {
            Some("the first thread creation was not made by the main thread alone".to_string())
        } else if self.0.snaps.overflowed() {
            Some("the program makes too many scheduling decisions before its first thread".into())
        } else if !self.0.p.foreign.is_empty() {
            Some("the program started child processes before its first thread".into())
        } else if procfs::resident_bytes(pid) > self.0.cfg.snapshots.snapshot_memory {
            Some(format!(
                "the program's resident memory at its first thread ({} MiB) is above --snapshot-memory",
                procfs::resident_bytes(pid) >> 20
            ))
        } else {
            procfs::fork_hazard(
                pid,
                self.0.snaps.inherited_fds(),
                &mut self.0.worker.mapping_verdicts,
            )
        };
        let tid_addr = snapshot::cached_tid_address(&self.0.p.mem, r.fs_base, pid);
        let refusal = refusal.or_else(|| {
            tid_addr
                .is_none()
                .then(|| "the C library's cached thread id could not be found".to_string())
        });
        let files = match refusal {
            Some(why) => Err(why),
            None => FileStates::capture(pid),
        };
        let files = match files {
            Ok(files) => files,
            Err(why) => {
                self.0.worker.snapshots.refuse(&key, why);
                return Ok(false);
            }
        };
        let mut state = self.save_state();
        state.races = self.0.races.saved(false);
        // The program's files as the copies must find them (an output it opened already).
        if let Some(journal) = &self.0.worker.journal {
            let held = procfs::open_file_ids(pid);
            let checkpoint = journal.lock().expect("file journal").checkpoint(held);
            state.world.set_fs_state(checkpoint);
            self.0.world.set_fs_state(checkpoint);
        }
        let pending = PendingSignals::capture(pid, &[(0, self.0.p.threads[0].tid)]);
        let template =
            fork_stopped(pid, from, &canonical).context("forking the startup snapshot")?;
        let mut process = self.0.p.copy_with(template, &[(0, template)])?;
        process.threads[0].regs = canonical;
        process.threads[0].place = StopPlace::Event;
        self.0.worker.snapshots.store(
            &key,
            StartupSnapshot {
                template,
                regs: canonical,
                syscall_insn: self.0.p.syscall_insn,
                tid_addr: tid_addr.expect("checked"),
                process,
                state,
                robust: threads::robust_list(pid),
                prefix: self.0.snaps.points().clone(),
                files,
                terms: Default::default(),
                pending,
                inherited: self.0.snaps.inherited_fds().to_vec(),
            },
        );
        let th = &mut self.0.p.threads[t];
        th.regs = canonical;
        th.place = StopPlace::Event;
        Ok(true)
    }

    /// At a scheduling point of a tree search with several enabled threads: snapshots the
    /// whole process when the path has gone [`BRANCH_GAP`] decisions without one. Silently
    /// skipped when the process cannot be copied faithfully here.
    pub(in crate::run) fn maybe_branch_snapshot(&mut self) -> Result<()> {
        let Some(key) = self.0.snaps.branch_key().cloned() else {
            return Ok(());
        };
        if self.0.history.decisions().len() < self.0.snaps.branch_depth() + BRANCH_GAP
            || self.0.snaps.overflowed()
            || self.0.world.changed_files()
            || !self.0.worker.snapshots.branches_allowed()
            || !self.0.cfg.snapshots.branches
        {
            return Ok(());
        }
        let Some(tid_offset) = self.0.worker.snapshots.tid_offset(&key) else {
            return Ok(());
        };
        let taken = self.branch_snapshot(key, tid_offset)?;
        if !taken {
            // Tried again a gap later, not at every point: each try reads /proc and takes
            // the process's descriptors (pigz's output could not be read: 2,911 tries in
            // 60 executions, 2.5 times the search's time).
            let depth = self.0.history.decisions().len();
            self.0.snaps.branched_at(depth);
        }
        Ok(())
    }

    /// For the debugger (`mcheck replay --gdb`), at a scheduling point: a branch snapshot of
    /// the whole process here, whatever the gap to the last one. False when this execution
    /// cannot be copied faithfully here (or takes no snapshots).
    pub(in crate::run) fn debug_snapshot(&mut self) -> Result<bool> {
        if !self.0.worker.debugger.snapshots
            || !self.0.snaps.recording()
            || self.0.snaps.overflowed()
            || self.0.world.changed_files()
            || self.0.p.threads[0].gone
        {
            return Ok(false);
        }
        let key = self.0.cfg.snapshot_key();
        let leader = self.0.p.load_regs(0)?;
        let tid = self.0.p.threads[0].tid;
        let Some(addr) = snapshot::cached_tid_address(&self.0.p.mem, leader.fs_base, tid) else {
            return Ok(false);
        };
        self.branch_snapshot(key, addr - leader.fs_base)
    }

    /// Snapshots the whole process at this scheduling point under configuration `key`
    /// (`tid_offset`: where the C library caches a thread's id, from its thread pointer);
    /// true when it was kept.
    fn branch_snapshot(&mut self, key: String, tid_offset: u64) -> Result<bool> {
        // A copy of one process would not hold the others of a process tree.
        if self.0.p.syscall_insn == 0
            || self.0.p.forked()
            || !self.0.p.foreign.is_empty()
            || self.0.p.threads[0].gone
            || self.0.model.is_finished(0)
            || self.0.kernel.shares_descriptors()
        {
            return Ok(false);
        }
        let live: Vec<ThreadId> = (0..self.0.p.threads.len())
            .filter(|&u| !self.0.p.threads[u].gone && !self.0.model.is_finished(u))
            .collect();
        for &u in &live {
            self.0.ensure_started(u)?;
            let r = self.0.p.load_regs(u)?;
            let cached = self
                .0
                .p
                .mem
                .read_u32(r.fs_base.wrapping_add(tid_offset))
                .ok();
            if cached != Some(self.0.p.threads[u].tid.as_raw() as u32) {
                return Ok(false);
            }
        }
        let pid = self.0.p.pid;
        // What the program opened since the startup snapshot: a pipe or shared memory
        // would be shared by every copy; files are put back per copy.
        let inherited = if self.0.worker.debugger.snapshots {
            &self.0.worker.debugger.inherited
        } else {
            self.0.worker.snapshots.inherited(&key)
        };
        if procfs::fork_hazard(pid, inherited, &mut self.0.worker.mapping_verdicts).is_some() {
            return Ok(false);
        }
        // A file open for writing may have been written since the startup snapshot with no
        // trapped call to say so, and the journal puts the files back as they were there:
        // a copy would write at this snapshot's offset into the startup's contents (a hole
        // of zeros where pigz's header was). Their bytes are kept with the snapshot.
        let Ok(files) = FileStates::capture_with_contents(pid, BRANCH_FILE_BYTES) else {
            return Ok(false);
        };
        let canonical = |r: &regs::Regs, at_syscall: bool| {
            let mut c = *r;
            if at_syscall {
                c.rip = r.rip - 2;
                c.rax = r.orig_rax;
            }
            c.orig_rax = u64::MAX;
            c
        };
        let mut others = Vec::new();
        for &u in live.iter().filter(|&&u| u != 0) {
            let th = &self.0.p.threads[u];
            let at_syscall = th.place == StopPlace::Syscall;
            let image = threads::capture(
                pid,
                th.tid,
                canonical(&th.regs, at_syscall),
                th.altstack,
                th.clear_tid,
            )
            .context("capturing a thread for a branch snapshot")?;
            others.push(CopiedThread {
                id: u,
                image,
                at_syscall,
            });
        }
        let leader = self.0.p.threads[0].regs;
        let leader_at_syscall = self.0.p.threads[0].place == StopPlace::Syscall;
        let leader_regs = canonical(&leader, leader_at_syscall);
        let state = self.save_state();
        let live_tids: Vec<(ThreadId, crate::tracee::Pid)> = (live.iter())
            .map(|&u| (u, self.0.p.threads[u].tid))
            .collect();
        let pending = PendingSignals::capture(pid, &live_tids);
        let from = if leader_at_syscall {
            ForkFrom::SeccompStop
        } else {
            ForkFrom::Stop {
                syscall_insn: self.0.p.syscall_insn,
            }
        };
        let template =
            fork_stopped(pid, from, &leader_regs).context("forking a branch snapshot")?;
        // Put the main thread back exactly where it was.
        if leader_at_syscall {
            threads::enter_seccomp_stop(pid).context("re-entering the main thread's syscall")?;
        } else {
            regs::set(pid, leader)?;
        }
        let process = self.0.p.copy_with(template, &[(0, template)])?;
        let budget = self.0.cfg.snapshots.snapshot_memory;
        let choices: Vec<ThreadId> = self
            .0
            .history
            .decisions()
            .iter()
            .map(|d| d.thread)
            .collect();
        self.0.snaps.branched_at(choices.len());
        let atomics_known = self.0.worker.atomic_addresses.len();
        let racy_known = self
            .0
            .worker
            .racy_points_in_use(self.0.cfg.instrument.preempt_on_races);
        let kept = self.0.worker.snapshots.add_branch(
            BranchSnapshot {
                key,
                choices,
                template,
                syscall_insn: self.0.p.syscall_insn,
                tid_offset,
                leader_regs,
                leader_at_syscall,
                leader_robust: threads::robust_list(pid),
                others,
                process,
                state,
                prefix: self.0.snaps.points().clone(),
                atomics_known,
                racy_known,
                terms: Default::default(),
                pending,
                files: std::sync::Arc::new(files),
            },
            budget,
        );
        if kept && self.0.worker.debugger.snapshots {
            // What the worker knew then (a copy's race detection must find it so).
            let known = self.0.worker.atomic_addresses.clone();
            self.0
                .worker
                .debugger
                .atomics
                .insert(self.0.history.decisions().len(), known);
        }
        Ok(kept)
    }
}
