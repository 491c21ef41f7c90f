//! Reading and writing tracee memory through `/proc/PID/mem`. One file per process: the fd
//! holds the address space, so it stays valid after the thread-group leader exits. Writes
//! may be journaled with the bytes they replaced, for the caller to make the same writes
//! in another process later.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use nix::unistd::Pid;

/// One write made while journaling.
#[derive(Clone, Debug)]
pub struct JournaledWrite {
    /// Where.
    pub addr: u64,
    /// The bytes there before (None: they could not be read).
    pub before: Option<Vec<u8>>,
    /// The bytes written.
    pub bytes: Vec<u8>,
}

/// Writes made while journaling, in order.
pub type Journal = Vec<JournaledWrite>;

/// Access to one traced process's memory.
pub struct Memory {
    file: File,
    /// The writes made since [`Memory::start_journal`], when journaling.
    journal: Mutex<Option<Journal>>,
}

impl Memory {
    /// Opens the memory of `pid` (call after exec: exec replaces the address space).
    pub fn open(pid: Pid) -> io::Result<Memory> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))?;
        Ok(Memory {
            file,
            journal: Mutex::new(None),
        })
    }

    /// Keeps every write from now on, until [`Memory::take_journal`].
    pub fn start_journal(&self) {
        *self.journal.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    }

    /// The writes made since [`Memory::start_journal`] (empty when not journaling); stops
    /// journaling.
    pub fn take_journal(&self) -> Journal {
        (self
            .journal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take())
        .unwrap_or_default()
    }

    /// Reads `buf.len()` bytes at `addr`.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, addr)
    }

    /// Writes `data` at `addr` (works on read-only text too, as ptrace pokes do).
    pub fn write(&self, addr: u64, data: &[u8]) -> io::Result<()> {
        let mut journal = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        let Some(j) = journal.as_mut() else {
            return self.file.write_all_at(data, addr);
        };
        let mut before = vec![0u8; data.len()];
        let before = self.read(addr, &mut before).ok().map(|()| before);
        self.file.write_all_at(data, addr)?;
        j.push(JournaledWrite {
            addr,
            before,
            bytes: data.to_vec(),
        });
        Ok(())
    }

    /// Reads a little-endian u64.
    pub fn read_u64(&self, addr: u64) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Reads a little-endian u32.
    pub fn read_u32(&self, addr: u64) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a little-endian u32.
    pub fn write_u32(&self, addr: u64, v: u32) -> io::Result<()> {
        self.write(addr, &v.to_le_bytes())
    }

    /// Reads a little-endian u16.
    pub fn read_u16(&self, addr: u64) -> io::Result<u16> {
        let mut b = [0u8; 2];
        self.read(addr, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    /// Reads one byte.
    pub fn read_u8(&self, addr: u64) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.read(addr, &mut b)?;
        Ok(b[0])
    }

    /// Reads the NUL-terminated string at `addr`, at most `max` bytes (without the NUL);
    /// None when unreadable or longer.
    pub fn read_c_string(&self, addr: u64, max: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() <= max {
            // Up to the end of the page, so that a string near unmapped memory is read.
            let chunk = (4096 - (at % 4096)) as usize;
            let mut buf = vec![0u8; chunk.min(max + 1 - out.len()).max(1)];
            self.read(at, &mut buf).ok()?;
            if let Some(n) = buf.iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..n]);
                return Some(out);
            }
            out.extend_from_slice(&buf);
            at += buf.len() as u64;
        }
        None
    }
}
