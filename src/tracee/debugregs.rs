//! Hardware watchpoints through the x86 debug registers (DR0–DR3 addresses, DR6 status,
//! DR7 control), written in a stopped thread's user area with PTRACE_POKEUSER. Debug
//! registers are per thread: the caller sets them on every thread it wants watched.

use nix::sys::ptrace;
use nix::unistd::Pid;

/// Offset of `u_debugreg` in x86-64's `struct user`.
const DEBUGREG_OFFSET: usize = 848;

/// How many watchpoints the hardware has.
pub const SLOTS: usize = 4;

/// What a watchpoint fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchOn {
    /// Writes.
    Write,
    /// Reads and writes (x86 has no read-only watchpoint).
    Access,
}

/// One watchpoint: an aligned range of 1, 2, 4 or 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Watch {
    /// First byte.
    pub addr: u64,
    /// Length: 1, 2, 4 or 8, with `addr` aligned to it.
    pub len: u64,
    /// Write or any access.
    pub on: WatchOn,
}

impl Watch {
    /// Whether the hardware can watch this range.
    pub fn is_valid(&self) -> bool {
        matches!(self.len, 1 | 2 | 4 | 8) && self.addr % self.len == 0
    }
}

fn debugreg(i: usize) -> ptrace::AddressType {
    (DEBUGREG_OFFSET + i * 8) as ptrace::AddressType
}

/// The DR7 value enabling `watches` (at most [`SLOTS`], in slot order).
pub fn control_word(watches: &[Watch]) -> u64 {
    let mut dr7 = 0u64;
    for (i, w) in watches.iter().take(SLOTS).enumerate() {
        let rw = match w.on {
            WatchOn::Write => 0b01,
            WatchOn::Access => 0b11,
        };
        let len = match w.len {
            1 => 0b00,
            2 => 0b01,
            8 => 0b10,
            _ => 0b11,
        };
        dr7 |= 1 << (2 * i);
        dr7 |= (rw | (len << 2)) << (16 + 4 * i);
    }
    dr7
}

/// Programs thread `tid`'s debug registers with `watches` (none: all off).
pub fn set(tid: Pid, watches: &[Watch]) -> nix::Result<()> {
    // Disable first, so that no half-written combination is ever armed.
    ptrace::write_user(tid, debugreg(7), 0)?;
    for (i, w) in watches.iter().take(SLOTS).enumerate() {
        ptrace::write_user(tid, debugreg(i), w.addr as libc::c_long)?;
    }
    ptrace::write_user(tid, debugreg(7), control_word(watches) as libc::c_long)
}

/// The watchpoint slots that fired in thread `tid` since the last call (DR6's B0–B3),
/// clearing them.
pub fn take_hits(tid: Pid) -> nix::Result<u8> {
    let dr6 = ptrace::read_user(tid, debugreg(6))? as u64;
    let hits = (dr6 & 0xf) as u8;
    if hits != 0 {
        ptrace::write_user(tid, debugreg(6), 0)?;
    }
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_word_enables_each_slot_with_its_kind_and_length() {
        let w = |addr, len, on| Watch { addr, len, on };
        let dr7 = control_word(&[w(0x1000, 8, WatchOn::Write), w(0x2000, 4, WatchOn::Access)]);
        assert_eq!(dr7 & 0xff, 0b0101);
        assert_eq!((dr7 >> 16) & 0xf, 0b1001); // write, 8 bytes
        assert_eq!((dr7 >> 20) & 0xf, 0b1111); // access, 4 bytes
        assert!(!w(0x1001, 4, WatchOn::Write).is_valid());
        assert!(w(0x1004, 4, WatchOn::Write).is_valid());
    }
}
