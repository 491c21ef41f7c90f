//! The access log one tracee shares with mcheck: a memfd that the tracee maps at a fixed
//! address below 2 GiB (where patched code appends its records, see `patch::log_layout`)
//! and that the tracer maps too, so that draining it is a read of mcheck's own memory, not
//! a system call.
//!
//! The tracee is made to create, size and map the memfd (injected syscalls in a stopped
//! thread); the tracer takes the descriptor over with `pidfd_getfd` and the tracee's is
//! closed, so the program's descriptor table is as it was. Fork copies of the tracee (fork
//! snapshots) share the mapping: only one process of a worker runs at a time, so they use
//! the same log, reset at each start.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use super::descriptors::take_descriptor;
use super::memory::Memory;
use super::threads::inject;
use super::Pid;
use crate::patch::log_layout::{LogLayout, Record, RECORD_BYTES};

const MFD_CLOEXEC: u64 = 1;
const PROT_READ_WRITE: u64 = (libc::PROT_READ | libc::PROT_WRITE) as u64;
const MAP_SHARED: u64 = libc::MAP_SHARED as u64;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;

/// The tracer's side of one access log.
pub struct AccessLog {
    layout: LogLayout,
    view: NonNull<u8>,
    _memfd: OwnedFd,
    /// The cursor was set to stop at the next access ([`AccessLog::arm_trap`]).
    armed: AtomicBool,
}

// SAFETY: the mapping is owned by this value and only read or written through `&self`
// methods while the tracee writing it is stopped; a worker thread owns its processes, and
// the log is never touched by two threads at once.
unsafe impl Send for AccessLog {}
// SAFETY: as above: no method is called concurrently (one worker thread at a time).
unsafe impl Sync for AccessLog {}

impl AccessLog {
    /// Creates the log `layout` in process `pid` through its thread `tid`, stopped
    /// anywhere but at a seccomp stop, whose code has a `syscall` instruction at
    /// `syscall_insn`; `mem` is the process's memory (the memfd's name is written below
    /// the thread's red zone).
    pub fn create(
        pid: Pid,
        tid: Pid,
        mem: &Memory,
        rsp: u64,
        syscall_insn: u64,
        layout: LogLayout,
    ) -> io::Result<AccessLog> {
        let call = |nr: i64, args: [u64; 6]| -> io::Result<i64> {
            inject(tid, syscall_insn, nr as u64, args)
                .map(|(r, _)| r)
                .map_err(|e| io::Error::other(e.to_string()))
        };
        let name_at = (rsp - 4096) & !15;
        mem.write(name_at, b"mcheck-access-log\0")?;
        let fd = call(libc::SYS_memfd_create, [name_at, MFD_CLOEXEC, 0, 0, 0, 0])?;
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd as i32));
        }
        let made = (|| {
            let r = call(libc::SYS_ftruncate, [fd as u64, layout.size(), 0, 0, 0, 0])?;
            if r < 0 {
                return Err(io::Error::from_raw_os_error(-r as i32));
            }
            let flags = MAP_SHARED | MAP_FIXED_NOREPLACE;
            let args = [
                layout.base,
                layout.size(),
                PROT_READ_WRITE,
                flags,
                fd as u64,
                0,
            ];
            let at = call(libc::SYS_mmap, args)?;
            if at as u64 != layout.base {
                let why = if at < 0 { -at as i32 } else { libc::EEXIST };
                if at >= 0 {
                    call(libc::SYS_munmap, [at as u64, layout.size(), 0, 0, 0, 0])?;
                }
                return Err(io::Error::from_raw_os_error(why));
            }
            take_descriptor(pid, fd as i32)
        })();
        call(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0])?;
        let memfd = made?;
        // SAFETY: a fresh shared mapping of the whole memfd (sized above), owned by the
        // returned value and unmapped in Drop; no Rust reference into it is ever made.
        let view = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size() as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                memfd.as_raw_fd(),
                0,
            )
        };
        if view == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let log = AccessLog {
            layout,
            view: NonNull::new(view.cast()).ok_or_else(|| io::Error::other("null mapping"))?,
            _memfd: memfd,
            armed: AtomicBool::new(false),
        };
        log.reset();
        Ok(log)
    }

    /// Where the log is in the tracee.
    pub fn layout(&self) -> &LogLayout {
        &self.layout
    }

    fn word(&self, addr: u64) -> *mut u64 {
        let off = addr - self.layout.base;
        debug_assert!(off + 8 <= self.layout.size());
        // SAFETY: `off` is inside the mapping (every caller passes a layout address).
        unsafe { self.view.as_ptr().add(off as usize).cast() }
    }

    fn read(&self, addr: u64) -> u64 {
        // SAFETY: an aligned word inside our mapping; volatile because the tracee writes it.
        unsafe { self.word(addr).read_volatile() }
    }

    fn write(&self, addr: u64, v: u64) {
        // SAFETY: as in `read`.
        unsafe { self.word(addr).write_volatile(v) }
    }

    /// The cursor: minus the bytes left before the log is full.
    pub fn cursor(&self) -> i64 {
        self.read(self.layout.cursor()) as i64
    }

    /// Empties the log (and disarms it).
    pub fn reset(&self) {
        self.armed.store(false, Ordering::Relaxed);
        self.write(self.layout.cursor(), self.layout.empty_cursor() as u64);
    }

    /// Makes every logged access stop into the tracer, as if the log were full (the log
    /// must be empty), until [`AccessLog::reset`]: how a thread that must not run far
    /// unseen is watched. The tracer records each such access itself.
    pub fn arm_trap(&self) {
        self.armed.store(true, Ordering::Relaxed);
        self.write(self.layout.cursor(), 0);
    }

    /// Whether the log stops at every access.
    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// The values generated code saved of `rax` and `rcx`.
    pub fn scratch(&self) -> (u64, u64) {
        (
            self.read(self.layout.scratch_rax()),
            self.read(self.layout.scratch_rcx()),
        )
    }

    /// The target an emulated indirect call keeps in the log header.
    pub fn call_target(&self) -> u64 {
        self.read(self.layout.scratch_target())
    }

    /// Takes back the last `n` records (their accesses have not happened after all).
    pub fn drop_last(&self, n: u64) {
        let c = self.cursor();
        let back = (n * RECORD_BYTES) as i64;
        if !self.is_armed() && c - back >= self.layout.empty_cursor() {
            self.write(self.layout.cursor(), (c - back) as u64);
        }
    }

    /// Number of records held.
    pub fn len(&self) -> u64 {
        if self.is_armed() {
            return 0;
        }
        self.layout.records_held(self.cursor())
    }

    /// True when no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records held, oldest first, read in place (no copy: a drain reads each record
    /// once, and copying millions of them first cost as much as a tenth of the drain).
    /// Only while every process sharing the log is stopped, as between two stops of the
    /// running thread: nothing writes the records while the slice lives. Empty the log with
    /// [`AccessLog::reset`] once they are read.
    pub fn held(&self) -> &[Record] {
        let n = self.len();
        if n == 0 {
            return &[];
        }
        let first = self.layout.records() - self.layout.base;
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: `n` records from the first one lie inside the mapping, which lives as
        // long as `self` (`len` is clamped to the capacity); `Record` is two u64 words,
        // `repr(C)`, like a record, and the mapping is page-aligned; the tracee is stopped,
        // so nothing writes them while the slice is borrowed (see above).
        unsafe {
            let src = self.view.as_ptr().add(first as usize).cast::<Record>();
            std::slice::from_raw_parts(src, n as usize)
        }
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `create`, unmapped once.
        unsafe {
            libc::munmap(self.view.as_ptr().cast(), self.layout.size() as usize);
        }
    }
}
