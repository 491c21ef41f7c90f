//! Software breakpoints: an `int3` byte written over the first byte of an instruction, the
//! original byte kept to step over it.

use std::collections::HashMap;
use std::io;

use super::memory::Memory;

const INT3: u8 = 0xcc;

/// The breakpoints inserted in one process.
#[derive(Default)]
pub struct Breakpoints {
    original: HashMap<u64, u8>,
}

impl Breakpoints {
    /// Inserts a breakpoint at `addr` (no-op when present).
    pub fn insert(&mut self, mem: &Memory, addr: u64) -> io::Result<()> {
        if self.original.contains_key(&addr) {
            return Ok(());
        }
        let byte = mem.read_u8(addr)?;
        mem.write(addr, &[INT3])?;
        self.original.insert(addr, byte);
        Ok(())
    }

    /// Removes the breakpoint at `addr` for good, restoring the original byte.
    pub fn remove(&mut self, mem: &Memory, addr: u64) -> io::Result<()> {
        if let Some(byte) = self.original.remove(&addr) {
            mem.write(addr, &[byte])?;
        }
        Ok(())
    }

    /// Whether `addr` holds one of our breakpoints.
    pub fn contains(&self, addr: u64) -> bool {
        self.original.contains_key(&addr)
    }

    /// Temporarily restores the original byte (to single-step the instruction).
    pub fn lift(&self, mem: &Memory, addr: u64) -> io::Result<()> {
        match self.original.get(&addr) {
            Some(&b) => mem.write(addr, &[b]),
            None => Ok(()),
        }
    }

    /// Puts the `int3` back after [`Breakpoints::lift`].
    pub fn restore(&self, mem: &Memory, addr: u64) -> io::Result<()> {
        if self.original.contains_key(&addr) {
            mem.write(addr, &[INT3])
        } else {
            Ok(())
        }
    }

    /// Number of breakpoints inserted.
    pub fn len(&self) -> usize {
        self.original.len()
    }

    /// True when no breakpoint is inserted.
    pub fn is_empty(&self) -> bool {
        self.original.is_empty()
    }
}
