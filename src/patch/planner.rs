//! Plans the patches of a batch of sites in one region of code: which get a jump, where
//! their trampolines go, and which stay on the breakpoint path and why.
//!
//! Sites are planned from the highest address down (as E9Patch does), on a copy of the
//! region's current bytes that each plan updates: a punned jump relies on the bytes after
//! its site, and those are then already final, whether they end up holding another site's
//! jump or a breakpoint (a site left on the breakpoint path gets its `int3` in the copy at
//! once, before the sites below it are planned).

use iced_x86::Instruction;

use super::jump::{bytes_read_past, jump_bytes, windows};
use super::log_layout::LogLayout;
use super::space::CodeSpace;
use super::table::PatchedSite;
use super::trampoline::{generate, Trampoline, Unpatchable};

/// The current bytes of one region of code, changed as sites are planned.
#[derive(Debug, Clone)]
pub struct Code {
    /// Address of the first byte.
    pub start: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Whether each 4 KiB page (from `start` rounded down) was changed.
    changed: Vec<bool>,
}

impl Code {
    /// The region at `start` holding `bytes`.
    pub fn new(start: u64, bytes: Vec<u8>) -> Code {
        let pages = ((start % 4096 + bytes.len() as u64).div_ceil(4096)) as usize;
        Code {
            start,
            bytes,
            changed: vec![false; pages],
        }
    }

    /// The bytes at `at..at+len`, when inside the region.
    pub fn get(&self, at: u64, len: usize) -> Option<&[u8]> {
        let off = usize::try_from(at.checked_sub(self.start)?).ok()?;
        self.bytes.get(off..off.checked_add(len)?)
    }

    /// Overwrites bytes at `at` (inside the region).
    pub fn set(&mut self, at: u64, data: &[u8]) {
        let off = (at - self.start) as usize;
        self.bytes[off..off + data.len()].copy_from_slice(data);
        let first = ((self.start % 4096 + off as u64) / 4096) as usize;
        let last = ((self.start % 4096 + (off + data.len()) as u64 - 1) / 4096) as usize;
        for p in first..=last {
            self.changed[p] = true;
        }
    }

    /// The changed parts, as (address, bytes) page by page (clipped to the region).
    pub fn changed_pages(&self) -> Vec<(u64, &[u8])> {
        let base = self.start / 4096 * 4096;
        let end = self.start + self.bytes.len() as u64;
        (0..self.changed.len())
            .filter(|&p| self.changed[p])
            .map(|p| {
                let lo = (base + p as u64 * 4096).max(self.start);
                let hi = (base + (p as u64 + 1) * 4096).min(end);
                let off = (lo - self.start) as usize;
                (lo, &self.bytes[off..off + (hi - lo) as usize])
            })
            .collect()
    }
}

/// A site to plan: its id, and the instruction decoded at its runtime address from its
/// original bytes.
#[derive(Debug, Clone)]
pub struct SiteRequest {
    /// Id its records will carry.
    pub id: u32,
    /// The instruction.
    pub insn: Instruction,
    /// Its original bytes.
    pub bytes: Vec<u8>,
    /// It must stay a breakpoint (the search needs a stop there).
    pub needs_stop: bool,
}

/// Why a site stays on the breakpoint path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The search needs a real stop at it.
    NeedsStop,
    /// The instruction cannot be moved.
    Unpatchable(Unpatchable),
    /// Its bytes are not what the file says (a breakpoint of mcheck's is there).
    NotOriginal,
    /// No trampoline could be placed in reach of its jump.
    NoRoom,
}

impl Refusal {
    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Refusal::NeedsStop => "needs a stop",
            Refusal::Unpatchable(Unpatchable::Branch) => "branch",
            Refusal::Unpatchable(Unpatchable::NoMemoryOperand) => "no memory operand",
            Refusal::Unpatchable(Unpatchable::Vsib) => "vector-indexed",
            Refusal::Unpatchable(Unpatchable::GsSegment) => "gs-relative",
            Refusal::Unpatchable(Unpatchable::OutOfReach) => "operand out of reach",
            Refusal::Unpatchable(Unpatchable::Encode(_)) => "not encodable",
            Refusal::NotOriginal => "breakpoint there",
            Refusal::NoRoom => "no room in reach",
        }
    }
}

/// A planned patch.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The site's address.
    pub at: u64,
    /// What the table records.
    pub site: PatchedSite,
    /// The trampoline.
    pub trampoline: Trampoline,
    /// The bytes written over the site.
    pub jump: Vec<u8>,
}

/// The outcome of planning a batch.
#[derive(Debug, Default)]
pub struct Plan {
    /// Sites patched (their jumps are written in the `Code`).
    pub patched: Vec<Planned>,
    /// Sites left as breakpoints, with their original first byte (an `int3` is written in
    /// the `Code` in its place) and why.
    pub refused: Vec<(u64, u8, Refusal)>,
}

/// Plans `sites` (any order) inside `code`, placing trampolines in `space`, logging into
/// `log`. Updates `code` with every jump and every breakpoint of a refused site.
pub fn plan(
    code: &mut Code,
    sites: &mut [SiteRequest],
    space: &mut CodeSpace,
    log: &LogLayout,
) -> Plan {
    sites.sort_by_key(|s| std::cmp::Reverse(s.insn.ip()));
    let mut out = Plan::default();
    for s in sites.iter() {
        let at = s.insn.ip();
        let len = s.insn.len();
        let Some(current) = code.get(at, len) else {
            continue;
        };
        if current != &s.bytes[..len] {
            out.refused.push((at, s.bytes[0], Refusal::NotOriginal));
            continue;
        }
        match plan_one(code, s, space, log) {
            Ok(p) => {
                code.set(at, &p.jump);
                out.patched.push(p);
            }
            Err(why) => {
                code.set(at, &[0xcc]);
                out.refused.push((at, s.bytes[0], why));
            }
        }
    }
    out
}

fn plan_one(
    code: &Code,
    s: &SiteRequest,
    space: &mut CodeSpace,
    log: &LogLayout,
) -> Result<Planned, Refusal> {
    if s.needs_stop {
        return Err(Refusal::NeedsStop);
    }
    let at = s.insn.ip();
    let len = s.insn.len();
    // The size it will take (the same wherever it goes).
    let size = generate(&s.insn, &s.bytes, s.id, at, log)
        .map_err(Refusal::Unpatchable)?
        .bytes
        .len() as u64;
    let next = if len < 5 {
        code.get(at + len as u64, 5 - len + 3)
            .or_else(|| code.get(at + len as u64, 5 - len))
            .ok_or(Refusal::NoRoom)?
    } else {
        &[]
    };
    let mut ws = windows(at, len, next);
    // Jumps that need prefixes read more of the following bytes: they must be there.
    ws.retain(|w| code.get(at, w.prefixes as usize + 5).is_some());
    while !ws.is_empty() {
        let (t_at, i) = space.allocate(&ws, size).ok_or(Refusal::NoRoom)?;
        let w = ws.remove(i);
        match generate(&s.insn, &s.bytes, s.id, t_at, log) {
            Ok(trampoline) if trampoline.bytes.len() as u64 == size => {
                let read = bytes_read_past(len, w.prefixes);
                let next = code.get(at + len as u64, read).unwrap_or(&[]);
                let jump = jump_bytes(at, len, w.prefixes, t_at, next).ok_or(Refusal::NoRoom)?;
                let mut original = [0u8; 16];
                original[..len].copy_from_slice(&s.bytes[..len]);
                return Ok(Planned {
                    at,
                    site: PatchedSite {
                        id: s.id,
                        len: len as u8,
                        original,
                        reads_past: read as u8,
                        trampoline: t_at,
                    },
                    trampoline,
                    jump,
                });
            }
            // Out of reach from there (a RIP-relative operand): try the other windows.
            _ => space.release(t_at),
        }
    }
    Err(Refusal::NoRoom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::trampoline::Exit;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    const BASE: u64 = 0x5555_5555_5000;

    fn log() -> LogLayout {
        LogLayout::new(0x7000_0000, 256).unwrap()
    }

    /// A code region of `body`, and site requests for the instructions at `offsets`.
    fn region(body: &[u8], offsets: &[u64]) -> (Code, Vec<SiteRequest>) {
        let code = Code::new(BASE, body.to_vec());
        let sites = offsets
            .iter()
            .enumerate()
            .map(|(i, &o)| {
                let bytes = body[o as usize..].to_vec();
                let insn = Decoder::with_ip(64, &bytes, BASE + o, DecoderOptions::NONE).decode();
                SiteRequest {
                    id: i as u32,
                    insn,
                    bytes: bytes[..insn.len()].to_vec(),
                    needs_stop: false,
                }
            })
            .collect();
        (code, sites)
    }

    fn space() -> CodeSpace {
        // Free space within ±2 GiB below and above the code.
        CodeSpace::new(vec![
            BASE - (3 << 30)..BASE - (1 << 20),
            BASE + (64 << 20)..BASE + (3 << 30),
        ])
    }

    /// Follows the jump at `at` in `code`, returning its target.
    fn jump_target(code: &Code, at: u64) -> u64 {
        let left = (code.start + code.bytes.len() as u64 - at) as usize;
        let bytes = code.get(at, left.min(15)).unwrap();
        let j = Decoder::with_ip(64, bytes, at, DecoderOptions::NONE).decode();
        assert_eq!(j.mnemonic(), Mnemonic::Jmp);
        j.near_branch_target()
    }

    #[test]
    fn consecutive_short_sites_all_reach_their_trampolines() {
        // mov eax,[rdi] ; mov [rsi],eax ; mov ecx,[rdi+4] ; mov [rsi+4],ecx ; ret ; nops
        let body = [
            0x8b, 0x07, 0x89, 0x06, 0x8b, 0x4f, 0x04, 0x89, 0x4e, 0x04, 0xc3, 0x90, 0x90, 0x90,
            0x90, 0x90,
        ];
        let (mut code, mut sites) = region(&body, &[0, 2, 4, 7]);
        let mut sp = space();
        let p = plan(&mut code, &mut sites, &mut sp, &log());
        assert!(p.refused.is_empty(), "{:?}", p.refused);
        assert_eq!(p.patched.len(), 4);
        for planned in &p.patched {
            // Decoding the final bytes at the site gives a jump to its trampoline, which
            // returns right after the site.
            assert_eq!(jump_target(&code, planned.at), planned.trampoline.meta.at);
            let m = planned.trampoline.meta;
            assert_eq!(m.site, planned.at);
            assert_eq!(m.exit_at(m.at + m.back as u64), Exit::AfterInsn);
        }
        // Instructions that were not sites start where they did: the ret is untouched.
        assert_eq!(code.get(BASE + 10, 1), Some(&[0xc3][..]));
    }

    #[test]
    fn a_site_that_needs_a_stop_gets_a_breakpoint_and_the_site_before_reads_it() {
        let body = [0x8b, 0x07, 0x89, 0x06, 0xc3, 0x90, 0x90, 0x90, 0x90, 0x90];
        let (mut code, mut sites) = region(&body, &[0, 2]);
        sites[1].needs_stop = true;
        let p = plan(&mut code, &mut sites, &mut space(), &log());
        assert_eq!(p.refused, vec![(BASE + 2, 0x89, Refusal::NeedsStop)]);
        assert_eq!(code.get(BASE + 2, 1), Some(&[0xcc][..]));
        assert_eq!(p.patched.len(), 1);
        assert_eq!(jump_target(&code, BASE), p.patched[0].trampoline.meta.at);
    }

    #[test]
    fn changed_pages_cover_every_written_byte() {
        let mut c = Code::new(0x1ff0, vec![0; 0x30]);
        c.set(0x1ff8, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let pages = c.changed_pages();
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[0].0, 0x1ff0);
        assert_eq!(pages[0].1.len(), 0x10);
        assert_eq!(pages[1].0, 0x2000);
        assert_eq!(pages[1].1.len(), 0x20);
        assert_eq!(pages[1].1[..2], [9, 10]);
    }
}
