//! The processes of the traced tree: the program as launched (P0) and every process it
//! forks or vforks, numbered in creation order, each with its executable and its address
//! space number (a new one at every `exec`, see `model::spaces`). The tracer holds the
//! memory of one process at a time as [`super::Process::mem`]; the others' wait here.

use std::path::PathBuf;

use nix::unistd::Pid;

use crate::model::Space;
use crate::report::ProcessRef;
use crate::tracee::memory::Memory;

/// One process of the tree.
pub struct ProcessInfo {
    /// Its pid.
    pub pid: Pid,
    /// The executable it runs (`/proc/PID/exe` when it was launched, forked or exec'd).
    pub exe: PathBuf,
    /// The address space of its image (tags the model's addresses).
    pub space: Space,
    /// The process that created it (None for P0).
    pub parent: Option<usize>,
    /// It has not ended.
    pub live: bool,
    /// Its memory, errno offset and `syscall` instruction while another process is current.
    pub(super) parked: Option<ParkedMemory>,
}

/// What the tracer holds of a process that is not the current one.
pub(super) struct ParkedMemory {
    pub mem: Memory,
    pub errno_tp_offset: Option<i64>,
    pub syscall_insn: u64,
}

impl ProcessInfo {
    /// The process `pid` running `exe` in `space`, created by `parent`.
    pub fn new(pid: Pid, exe: PathBuf, space: Space, parent: Option<usize>) -> ProcessInfo {
        ProcessInfo {
            pid,
            exe,
            space,
            parent,
            live: true,
            parked: None,
        }
    }

    /// A copy of this record for a fork copy `copy` of a snapshot (memory not parked).
    pub fn copied(&self, copy: Pid) -> ProcessInfo {
        ProcessInfo::new(copy, self.exe.clone(), self.space, None)
    }

    /// How reports name the process number `number`.
    pub fn reference(&self, number: usize) -> ProcessRef {
        ProcessRef {
            number,
            pid: self.pid.as_raw(),
            program: self.exe.to_string_lossy().into_owned(),
            parent: self.parent,
        }
    }
}

/// The executable `pid` runs now.
pub fn executable(pid: Pid) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default()
}
