//! Seccomp stops: the system calls the model needs (futex, clone, exit_group, sleeps...),
//! the clock and random-number calls answered for determinism, and rdtsc emulation.

use std::path::PathBuf;

use anyhow::Result;
use nix::unistd::Pid;

use super::creation::CLONE_THREAD;
use super::execution::{Execution, RunResult};
use super::kernel::syscalls::{self, SyscallAction, TimeSource};
use super::process::StopPlace;
use super::worker_state::WorkerState;
use super::world::fs_gate::changes_files;
use crate::model::{ObjectKind, Op, ThreadId};
use crate::tracee::memory::Memory;
use crate::tracee::seccomp::nr;
use crate::tracee::{events, file_paths, regs};

impl Execution<'_> {
    pub(super) fn on_seccomp(&mut self, t: ThreadId) -> Result<Option<RunResult>> {
        let r = self.p.load_regs(t)?;
        let tid = self.p.threads[t].tid;
        let nr = r.orig_rax as i64;
        let a = regs::syscall_args(&r);
        if self.p.syscall_insn == 0
            && self.p.mem.read_u16(r.rip.wrapping_sub(2)).ok() == Some(0x050f)
        {
            self.p.syscall_insn = r.rip - 2;
        }
        let clone_flags = match nr {
            nr::CLONE => a[0],
            nr::CLONE3 => self.p.mem.read_u64(a[0]).unwrap_or(0),
            _ => 0,
        };
        if clone_flags & CLONE_THREAD != 0 && self.races.on() && !self.instr.recording() {
            // The first thread: from here on accesses can race and are recorded. The
            // thread enters the clone again afterwards.
            self.instrumenting(|i, c| i.start_recording(c, t, &r))?;
            return Ok(None);
        }
        if let Some(key) = self.snapshot_key.take() {
            if clone_flags & CLONE_THREAD == 0 {
                self.snapshot_key = Some(key);
            } else if self.take_startup_snapshot(t, &r, key)? {
                return Ok(None);
            }
        }
        if let Some(stop) = self.before_file_change(t, nr, a)? {
            return Ok(stop);
        }
        self.p.threads[t].place = StopPlace::Syscall;
        match nr {
            nr::CLONE => self.pending_clone = Some((a[0], a[3], a[4])),
            nr::CLONE3 => {
                let flags = self.p.mem.read_u64(a[0]).unwrap_or(0);
                let ctid = self.p.mem.read_u64(a[0] + 16).unwrap_or(0);
                let tls = self.p.mem.read_u64(a[0] + 56).unwrap_or(0);
                self.pending_clone = Some((flags, ctid, tls));
            }
            nr::SET_TID_ADDRESS => self.p.threads[t].clear_tid = a[0],
            nr::SIGALTSTACK if a[0] != 0 => {
                let mut ss = [0u8; 24];
                if self.p.mem.read(a[0], &mut ss).is_ok() {
                    let flags = i32::from_le_bytes(ss[8..12].try_into().expect("4 bytes"));
                    self.p.threads[t].altstack = (flags & libc::SS_DISABLE == 0).then_some(ss);
                }
            }
            nr::EXIT_GROUP if self.others_live(t) => {
                // Other threads could still run first: ending the process is a decision.
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(r.rip);
                return self.point(t, Op::ExitGroup, site);
            }
            nr::EXIT_GROUP => {
                self.group_exiting = true;
                if self.debug_exiting(t)? == super::debugger::Resume::Kill {
                    return Ok(Some(RunResult::CutShort));
                }
            }
            _ => {}
        }
        let site = || self.p.mem.read_u64(r.rsp).unwrap_or(r.rip);
        if let Some(stop) = self.on_kernel_call(t, nr, a, site())? {
            return Ok(stop);
        }
        match syscalls::decode(nr, a, self) {
            SyscallAction::Point(op) => {
                let site = self.p.mem.read_u64(r.rsp).unwrap_or(r.rip);
                self.point(t, op, site)
            }
            SyscallAction::Emulate(v) => {
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Native => {
                self.p.threads[t].place = StopPlace::Event;
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Clock(call) => {
                // Reading the clock sees where timeouts have moved it.
                self.segment.touch(ObjectKind::Time, 0, false);
                let v = self.world.answer_clock(call, self.model.now(), &self.p.mem);
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
            SyscallAction::Random { buf, len } => {
                let len = len.min(1 << 20) as usize;
                let bytes = self.world.random_bytes(len);
                let v = match self.p.mem.write(buf, &bytes) {
                    Ok(()) => len as i64,
                    Err(_) => -(libc::EFAULT as i64),
                };
                self.p.finish_syscall(t, v)?;
                events::resume(tid, None)?;
                Ok(None)
            }
        }
    }

    /// A system call that may change files: the worker takes the file-system gate first
    /// (`fs_gate`), and the call runs natively. None when `nr` is no such call.
    fn before_file_change(
        &mut self,
        t: ThreadId,
        nr: i64,
        a: [u64; 6],
    ) -> Result<Option<Option<RunResult>>> {
        let opens = [nr::OPEN, nr::OPENAT, nr::OPENAT2];
        if !opens.contains(&nr) && !nr::FILE_CHANGES.contains(&nr) {
            return Ok(None);
        }
        let (pid, tid) = (self.p.pid, self.p.threads[t].tid);
        match note_file_change(self.worker, pid, tid, &self.p.mem, nr, a) {
            Some(changes) => self.world.note_file_changes(changes),
            None => return Ok(Some(Some(RunResult::CutShort))),
        }
        self.p.threads[t].place = StopPlace::Event;
        events::resume(self.p.threads[t].tid, None)?;
        Ok(Some(None))
    }

    /// Emulates rdtsc/rdtscp in thread `t`, which fault under PR_TSC_SIGSEGV; true when it
    /// was one.
    pub(super) fn emulate_rdtsc(&mut self, t: ThreadId) -> Result<bool> {
        let tid = self.p.threads[t].tid;
        let done = self.world.emulate_rdtsc(tid, self.model.now())?;
        if done {
            self.segment.touch(ObjectKind::Time, 0, false);
            self.p.load_regs(t)?;
        }
        Ok(done)
    }
}

impl TimeSource for Execution<'_> {
    fn timespec_ns(&self, addr: u64) -> Option<u64> {
        if addr == 0 {
            return None;
        }
        let sec = self.p.mem.read_u64(addr).ok()?;
        let nsec = self.p.mem.read_u64(addr + 8).ok()?;
        Some(sec.saturating_mul(1_000_000_000).saturating_add(nsec))
    }
    fn clock_now_ns(&self, clock: libc::clockid_t) -> u64 {
        self.world.peek_ns(clock, self.model.now())
    }
}

/// Before system call `nr` (arguments `a`) of thread `tid` of process `pid` (the
/// program, or a process it forked) runs: when it may change files, the worker takes the
/// file-system gate (`fs_gate`) and the journal saves the state of the paths it names
/// (`file_journal`). Whether it may change files; None when the search is being cut
/// short meanwhile.
pub(super) fn note_file_change(
    worker: &mut WorkerState,
    pid: Pid,
    tid: Pid,
    mem: &Memory,
    nr: i64,
    a: [u64; 6],
) -> Option<bool> {
    if !changes_files(nr, a, |how| mem.read_u64(how).unwrap_or(0)) {
        return Some(false);
    }
    if worker.fs_pass.is_none() {
        match worker.fs_gate.enter(&worker.cut) {
            Some(pass) => worker.fs_pass = Some(pass),
            None => return None,
        }
    }
    if let Some(journal) = &worker.journal {
        let paths = file_paths::changed_paths(pid, tid, mem, nr, a);
        let mut j = journal.lock().expect("file journal");
        j.note_change(paths.iter().map(PathBuf::as_path));
    }
    Some(true)
}
