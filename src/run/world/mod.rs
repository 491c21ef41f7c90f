//! The program's world: what makes its executions deterministic (clocks, randomness,
//! auxv), its files (the file-system gate and the journal that undoes changes), and its
//! standard streams (stdin, stdout sinks, the captured stderr).

use nix::unistd::Pid;

use self::determinism::Determinism;
use self::file_journal::StateId;
use crate::run::kernel::syscalls::ClockCall;
use crate::tracee::events;
use crate::tracee::memory::Memory;
use crate::tracee::regs;

pub(super) mod capture;
pub(super) mod determinism;
pub(super) mod file_journal;
pub(super) mod fs_gate;
pub mod program_stdio;
pub mod written_files;

/// The program and how it is started.
#[derive(Clone, Debug)]
pub struct ProgramSetup {
    /// The program (absolute path).
    pub path: std::path::PathBuf,
    /// Its arguments (argv[1..]).
    pub args: Vec<std::ffi::OsString>,
    /// Its environment (mcheck adds `GLIBC_TUNABLES=glibc.pthread.rseq=0`, and
    /// `GOMP_SPINCOUNT=0` when it is not set: `session/launch.rs`).
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// Hide the program's stdout and stderr.
    pub quiet: bool,
    /// The kinds of stdin and stdout the program gets (`program_stdio`; None: mcheck's
    /// own, or /dev/null for a hidden stdout).
    pub stdio: Option<program_stdio::StdioKinds>,
    /// Read the program's stdout in every execution, to compare executions' outputs (the
    /// output oracle): it goes through a capture (`capture.rs`) of its kind, which must be
    /// a pipe, terminal or socket.
    pub read_stdout: bool,
    /// Summarise the files the program changed at the end of every execution run to its
    /// end, for the output oracle (`written_files`; a search's journal names them).
    pub compare_files: bool,
    /// The signals ignored and blocked when the program starts (`tracee/signals.rs`).
    pub signals: crate::tracee::signals::SignalSetup,
    /// The CPUs sched_getaffinity shows the program (the ones mcheck was started on, or
    /// those of the search a replay follows); None: the kernel answers (the one CPU the
    /// tracee is pinned to), as in schedules recorded before the CPUs were shown.
    pub cpus: Option<Vec<usize>>,
    /// Trap rdtsc/rdtscp (only needed when the program's own code reads the counter; the
    /// trap makes every ptrace stop dearer on VMs).
    pub trap_rdtsc: bool,
}

/// The program's world in one execution: the determinism of what it reads of the machine,
/// and what it changed of its files (kept with snapshots, but the change flag).
#[derive(Clone, Default)]
pub(in crate::run) struct World {
    det: Determinism,
    /// The execution changed a file or directory: the file system is not part of a fork
    /// snapshot, so no branch snapshot is taken after that (a copy would find the files
    /// of a later point: pbzip2's unlink, then its O_EXCL create of the same name).
    changed_files: bool,
    /// The state of the program's files this execution started from (`file_journal`).
    fs_state: StateId,
}

impl World {
    /// What a snapshot keeps: all but whether files changed since the execution began.
    pub fn saved(&self) -> World {
        World {
            changed_files: false,
            ..self.clone()
        }
    }

    /// Makes the start deterministic: the auxiliary vector on the stack at `rsp`.
    pub fn patch_auxv(&mut self, mem: &Memory, rsp: u64) -> std::io::Result<()> {
        self.det.patch_auxv(mem, rsp)
    }

    /// `len` bytes of seeded randomness (getrandom).
    pub fn random_bytes(&mut self, len: usize) -> Vec<u8> {
        self.det.random_bytes(len)
    }

    /// What clock `clock` reads at virtual time `now`, without moving it.
    pub fn peek_ns(&self, clock: libc::clockid_t, now: u64) -> u64 {
        self.det.peek_ns(clock, now)
    }

    /// Notes that a system call may have changed files.
    pub fn note_file_changes(&mut self, changed: bool) {
        self.changed_files |= changed;
    }

    /// Whether the execution changed files.
    pub fn changed_files(&self) -> bool {
        self.changed_files
    }

    /// The state of the program's files the execution is at (`file_journal`).
    pub fn fs_state(&self) -> StateId {
        self.fs_state
    }

    /// The program's files are now at `state` (a snapshot's checkpoint).
    pub fn set_fs_state(&mut self, state: StateId) {
        self.fs_state = state;
    }

    /// Answers a time query from the virtual clock, writing the result where asked.
    pub fn answer_clock(&mut self, call: ClockCall, now: u64, mem: &Memory) -> i64 {
        let write = |mem: &crate::tracee::memory::Memory, out: u64, a: u64, b: u64| {
            if out == 0 {
                return true;
            }
            let mut bytes = a.to_le_bytes().to_vec();
            bytes.extend_from_slice(&b.to_le_bytes());
            mem.write(out, &bytes).is_ok()
        };
        let ok = |fine: bool, v: i64| if fine { v } else { -(libc::EFAULT as i64) };
        match call {
            ClockCall::Gettime { clock, out } => {
                let ns = self.det.clock_ns(clock, now);
                ok(write(mem, out, ns / 1_000_000_000, ns % 1_000_000_000), 0)
            }
            ClockCall::Gettimeofday { out } => {
                let ns = self.det.clock_ns(libc::CLOCK_REALTIME, now);
                ok(
                    write(mem, out, ns / 1_000_000_000, ns % 1_000_000_000 / 1_000),
                    0,
                )
            }
            ClockCall::Time { out } => {
                let secs = self.det.clock_ns(libc::CLOCK_REALTIME, now) / 1_000_000_000;
                let fine = out == 0 || mem.write(out, &secs.to_le_bytes()).is_ok();
                ok(fine, secs as i64)
            }
        }
    }

    /// Emulates rdtsc/rdtscp for any stopped tracee (forked children inherit the trap).
    pub fn emulate_rdtsc(&mut self, tid: Pid, now: u64) -> anyhow::Result<bool> {
        let mut r = regs::get(tid)?;
        let Some(word) = events::peek_word(tid, r.rip) else {
            return Ok(false);
        };
        let b = word.to_le_bytes();
        let len = match [b[0], b[1], b[2]] {
            [0x0f, 0x31, _] => 2,
            [0x0f, 0x01, 0xf9] => 3,
            _ => return Ok(false),
        };
        let tsc = self.det.tsc(now);
        r.rax = tsc & 0xffff_ffff;
        r.rdx = tsc >> 32;
        if len == 3 {
            r.rcx = 0;
        }
        r.rip += len;
        regs::set(tid, r)?;
        Ok(true)
    }
}
