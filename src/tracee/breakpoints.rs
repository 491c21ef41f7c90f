//! Software breakpoints: an `int3` byte written over the first byte of an instruction, the
//! original byte kept to step over it.

use std::collections::HashMap;
use std::io;

use super::memory::Memory;

const INT3: u8 = 0xcc;

/// The breakpoints inserted in one process.
#[derive(Clone, Default)]
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

    /// Inserts breakpoints at many addresses with few system calls: runs of addresses less
    /// than a page apart are read, patched and written back as one block.
    pub fn insert_many(&mut self, mem: &Memory, addrs: &[u64]) -> io::Result<()> {
        let mut sorted: Vec<u64> = addrs
            .iter()
            .copied()
            .filter(|a| !self.original.contains_key(a))
            .collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut i = 0;
        while i < sorted.len() {
            let mut j = i;
            while j + 1 < sorted.len() && sorted[j + 1] - sorted[j] < 4096 {
                j += 1;
            }
            let start = sorted[i];
            let mut block = vec![0u8; (sorted[j] - start + 1) as usize];
            mem.read(start, &mut block)?;
            for &a in &sorted[i..=j] {
                let off = (a - start) as usize;
                self.original.insert(a, block[off]);
                block[off] = INT3;
            }
            mem.write(start, &block)?;
            i = j + 1;
        }
        Ok(())
    }

    /// Records a breakpoint at `addr` whose `int3` the caller writes itself (with a batch
    /// of other code changes); `original` is the byte under it.
    pub fn adopt(&mut self, addr: u64, original: u8) {
        self.original.entry(addr).or_insert(original);
    }

    /// Changes the byte kept under the breakpoint at `addr` (a debugger writing memory
    /// there), leaving the `int3` in place; false when there is no breakpoint at `addr`.
    pub fn replace_original(&mut self, addr: u64, byte: u8) -> bool {
        match self.original.get_mut(&addr) {
            Some(b) => {
                *b = byte;
                true
            }
            None => false,
        }
    }

    /// Removes the breakpoint at `addr` for good, restoring the original byte.
    pub fn remove(&mut self, mem: &Memory, addr: u64) -> io::Result<()> {
        if let Some(byte) = self.original.remove(&addr) {
            mem.write(addr, &[byte])?;
        }
        Ok(())
    }

    /// The original byte under the breakpoint at `addr`.
    pub fn original_byte(&self, addr: u64) -> Option<u8> {
        self.original.get(&addr).copied()
    }

    /// Every breakpoint with the byte under it.
    pub fn originals(&self) -> impl Iterator<Item = (u64, u8)> + '_ {
        self.original.iter().map(|(&a, &b)| (a, b))
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
