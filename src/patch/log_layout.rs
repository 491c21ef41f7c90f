//! Where the in-tracee access log lives and what one record holds.
//!
//! The log is one mapping below 2 GiB (so that generated code reaches every word of it with
//! a sign-extended 32-bit absolute address, whatever its own address): a header page with
//! the cursor and the two scratch slots the generated code saves `rax` and `rcx` in, then
//! the records. Only one tracee thread runs at a time and a signal is never delivered
//! inside generated code (the tracer moves the thread back to its original site first), so
//! one log and one pair of scratch slots serve every thread.
//!
//! The cursor is the *negative* offset of the next free record from the end of the log:
//! the generated code tests it with `jrcxz`, which does not touch the flags, and stops
//! into the tracer when it reaches zero (the log is full).

/// Bytes of one record: the effective address, then the site id (sign-extended u32).
pub const RECORD_BYTES: u64 = 16;

/// Bytes of the header page.
pub const HEADER_BYTES: u64 = 4096;

/// The highest address (exclusive) the log may reach: generated code addresses its words
/// with a sign-extended disp32, and `end + 8` (the site id's displacement) must stay
/// positive.
pub const ADDRESS_LIMIT: u64 = 0x8000_0000 - 4096;

/// The geometry of one process's access log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLayout {
    /// First byte of the mapping (page-aligned).
    pub base: u64,
    /// Capacity in records.
    pub capacity: u64,
}

impl LogLayout {
    /// A log of `capacity` records mapped at `base`. None when it would not fit below
    /// [`ADDRESS_LIMIT`] or `base` is not page-aligned.
    pub fn new(base: u64, capacity: u64) -> Option<LogLayout> {
        let l = LogLayout { base, capacity };
        (base % 4096 == 0 && capacity > 0 && base.checked_add(l.size())? <= ADDRESS_LIMIT)
            .then_some(l)
    }

    /// Bytes of the whole mapping.
    pub fn size(&self) -> u64 {
        HEADER_BYTES + self.capacity * RECORD_BYTES
    }

    /// Address of the cursor (an i64: minus the bytes left before the log is full).
    pub fn cursor(&self) -> u64 {
        self.base
    }

    /// Address of the slot where generated code saves `rax`.
    pub fn scratch_rax(&self) -> u64 {
        self.base + 8
    }

    /// Address of the slot where generated code saves `rcx`.
    pub fn scratch_rcx(&self) -> u64 {
        self.base + 16
    }

    /// Address of the slot where the code emulating an indirect call keeps its target.
    pub fn scratch_target(&self) -> u64 {
        self.base + 24
    }

    /// Address of the first record.
    pub fn records(&self) -> u64 {
        self.base + HEADER_BYTES
    }

    /// Address one past the last record: record address = end + cursor.
    pub fn end(&self) -> u64 {
        self.records() + self.capacity * RECORD_BYTES
    }

    /// The cursor value of an empty log.
    pub fn empty_cursor(&self) -> i64 {
        -((self.capacity * RECORD_BYTES) as i64)
    }

    /// How many records a log with cursor value `cursor` holds (clamped to the capacity,
    /// whatever the program may have scribbled there).
    pub fn records_held(&self, cursor: i64) -> u64 {
        let used = cursor.saturating_sub(self.empty_cursor()).max(0) as u64 / RECORD_BYTES;
        used.min(self.capacity)
    }
}

/// One record: two words. An access record holds the effective address and the site id; a
/// call of a modelled memory function takes [`CALL_RECORDS`] records (see `trampoline.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Record {
    /// The effective address the instruction accessed (or a call's first argument).
    pub addr: u64,
    /// The site id in its low 32 bits (or a call's further argument).
    pub word: u64,
}

impl Record {
    /// The id of the site (an index into the process's site table).
    pub fn site(&self) -> u32 {
        self.word as u32
    }

    /// Decodes a record from its 16 bytes.
    pub fn from_bytes(b: &[u8; 16]) -> Record {
        let addr = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let word = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
        Record { addr, word }
    }
}

/// Records one call of a modelled memory function takes: (rdi, site id), (rsi, rdx),
/// (return address, rcx).
pub const CALL_RECORDS: u64 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_must_fit_below_two_gib() {
        assert!(LogLayout::new(0x7000_0000, 1 << 16).is_some());
        assert!(LogLayout::new(0x7fff_0000, 1 << 16).is_none());
        // The end itself, as a displacement, must stay positive.
        let top = ADDRESS_LIMIT - 4096 - (1 << 16) * RECORD_BYTES;
        let l = LogLayout::new(top, 1 << 16).unwrap();
        assert!(l.end() + 8 < 0x8000_0000);
        assert!(LogLayout::new(0x7000_0010, 16).is_none());
    }

    #[test]
    fn the_cursor_counts_up_to_zero() {
        let l = LogLayout::new(0x7000_0000, 4).unwrap();
        assert_eq!(l.empty_cursor(), -64);
        assert_eq!(l.records_held(l.empty_cursor()), 0);
        assert_eq!(l.records_held(-32), 2);
        assert_eq!(l.records_held(0), 4);
        assert_eq!(l.records_held(1000), 4);
        assert_eq!(l.records_held(-1000), 0);
        assert_eq!((l.end() as i64 + l.empty_cursor()) as u64, l.records());
    }
}
