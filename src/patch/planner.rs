//! Plans the patches of a batch of sites in one region of code: which get a jump, where
//! their trampolines go, and which stay on the breakpoint path and why.
//!
//! Sites are planned from the highest address down (as E9Patch does), on a copy of the
//! region's current bytes that each plan updates: a punned jump relies on the bytes after
//! its site, and those are then already final, whether they end up holding another site's
//! jump or a breakpoint (a site left on the breakpoint path gets its `int3` in the copy at
//! once, before the sites below it are planned).

use iced_x86::{Decoder, DecoderOptions, Instruction};

use super::jump::{
    bytes_read_past, is_last_prefix, jump_bytes, jump_bytes_with, window_with, windows,
    SEGMENT_PREFIXES,
};
use super::log_layout::LogLayout;
use super::space::CodeSpace;
use super::table::PatchedSite;
use super::trampoline::{generate, generate_plain, Trampoline, Unpatchable};

/// The current bytes of one region of code, changed as sites are planned.
#[derive(Debug, Clone)]
pub struct Code {
    /// Address of the first byte.
    pub start: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Whether each 4 KiB page (from `start` rounded down) was changed.
    changed: Vec<bool>,
    /// Whether each byte was written by a plan.
    written: Vec<bool>,
}

impl Code {
    /// The region at `start` holding `bytes`.
    pub fn new(start: u64, bytes: Vec<u8>) -> Code {
        let pages = ((start % 4096 + bytes.len() as u64).div_ceil(4096)) as usize;
        let n = bytes.len();
        Code {
            start,
            bytes,
            changed: vec![false; pages],
            written: vec![false; n],
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
        self.written[off..off + data.len()].fill(true);
        let first = ((self.start % 4096 + off as u64) / 4096) as usize;
        let last = ((self.start % 4096 + (off + data.len()) as u64 - 1) / 4096) as usize;
        for p in first..=last {
            self.changed[p] = true;
        }
    }

    /// Whether any byte of `at..at+len` was written by a plan (or lies outside the region).
    pub fn written(&self, at: u64, len: usize) -> bool {
        let Some(off) = at.checked_sub(self.start).map(|o| o as usize) else {
            return true;
        };
        self.written
            .get(off..off + len)
            .is_none_or(|w| w.iter().any(|&b| b))
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
    /// Instructions after short sites, moved to trampolines of their own so that the jump
    /// at their place gives the site's jump a reachable window (E9Patch's successor
    /// eviction).
    pub evicted: Vec<Planned>,
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
            Err(Refusal::NoRoom) if len < 5 => {
                match plan_evicting(code, s, &out.patched, space, log) {
                    Some((site, neighbour)) => {
                        code.set(neighbour.at, &neighbour.jump);
                        code.set(at, &site.jump);
                        out.patched.push(site);
                        // A neighbour that is a site of this batch is planned anew.
                        match out.patched.iter().position(|p| p.at == neighbour.at) {
                            Some(i) => out.patched[i] = neighbour,
                            None => out.evicted.push(neighbour),
                        }
                    }
                    None => {
                        code.set(at, &[0xcc]);
                        out.refused.push((at, s.bytes[0], Refusal::NoRoom));
                    }
                }
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
                        access: true,
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

/// Patches the short site `s`, none of whose windows has room, by giving the instruction
/// after it a jump of its own that starts with redundant prefixes: the site's jump reads
/// them as the high bytes of its displacement, so their values place the site's window
/// where there is room (E9Patch's successor eviction). The neighbour is either an
/// instruction left alone so far, which is moved to a trampoline that just runs it, or a
/// site of this batch (in `patched`), whose jump is planned anew. Anything that jumps to
/// the neighbour lands on its jump, which still starts where the instruction did. Returns
/// the site's plan and the neighbour's.
fn plan_evicting(
    code: &Code,
    s: &SiteRequest,
    patched: &[Planned],
    space: &mut CodeSpace,
    log: &LogLayout,
) -> Option<(Planned, Planned)> {
    let at = s.insn.ip();
    let len = s.insn.len();
    let n_at = at + len as u64;
    let earlier = patched.iter().find(|p| p.at == n_at);
    let n_orig: Vec<u8> = match earlier {
        Some(p) => p.site.original_bytes().to_vec(),
        None => {
            let left = (code.start + code.bytes.len() as u64).checked_sub(n_at)? as usize;
            code.get(n_at, left.min(15))?.to_vec()
        }
    };
    let n = Decoder::with_ip(64, &n_orig, n_at, DecoderOptions::NONE).decode();
    let n_len = n.len();
    if n.is_invalid() || (earlier.is_none() && (n_orig[0] == 0xcc || code.written(n_at, n_len))) {
        return None;
    }
    let n_orig = n_orig[..n_len].to_vec();
    let n_code = |t_at: u64| match earlier {
        Some(p) => generate(&n, &n_orig, p.site.id, t_at, log),
        None => generate_plain(&n, &n_orig, t_at),
    };
    let n_size = n_code(n_at).ok()?.bytes.len() as u64;
    let size = generate(&s.insn, &s.bytes, s.id, at, log).ok()?.bytes.len() as u64;
    let after_n = code
        .get(n_at + n_len as u64, 4)
        .or_else(|| code.get(n_at + n_len as u64, 0))?;
    // The neighbour's present trampoline is given back while other places are tried.
    if let Some(p) = earlier {
        space.release(p.trampoline.meta.at);
    }
    let found = evict_with(
        (at, len, size, s, n_at, n_len, n_size, after_n),
        &n_code,
        space,
        log,
        earlier.map(|p| p.site.id),
        &n_orig,
    );
    if found.is_none() {
        if let Some(p) = earlier {
            space.take(p.trampoline.meta.at, p.trampoline.bytes.len() as u64);
        }
    }
    found
}

/// The search of [`plan_evicting`]: prefix counts of both jumps and the value of the last
/// prefix the site's jump reads.
#[allow(clippy::type_complexity)]
fn evict_with(
    (at, len, size, s, n_at, n_len, n_size, after_n): (
        u64,
        usize,
        u64,
        &SiteRequest,
        u64,
        usize,
        u64,
        &[u8],
    ),
    n_code: &dyn Fn(u64) -> Result<Trampoline, Unpatchable>,
    space: &mut CodeSpace,
    log: &LogLayout,
    n_id: Option<u32>,
    n_orig: &[u8],
) -> Option<(Planned, Planned)> {
    for k in 0..len {
        // The site's jump reads m bytes of the neighbour's: all of them its prefixes.
        let m = 5 + k - len;
        for j in m..=4.min(n_len.saturating_sub(1)) {
            let last_choices: Vec<u8> = if m == j {
                (0x40..=0x4f).chain(SEGMENT_PREFIXES).collect()
            } else {
                SEGMENT_PREFIXES.to_vec()
            };
            for h in last_choices {
                let mut prefixes = vec![SEGMENT_PREFIXES[0]; j];
                prefixes[m - 1] = h;
                if !is_last_prefix(prefixes[j - 1]) {
                    continue;
                }
                let Some(w) = window_with(at, len, k as u8, &prefixes[..m]) else {
                    continue;
                };
                let Some((ts, _)) = space.allocate(&[w], size) else {
                    continue;
                };
                let n_window = window_with(n_at, n_len, j as u8, after_n);
                let Some((tn, _)) = n_window.and_then(|nw| space.allocate(&[nw], n_size)) else {
                    space.release(ts);
                    continue;
                };
                let planned = (|| {
                    let t_site = generate(&s.insn, &s.bytes, s.id, ts, log).ok()?;
                    let t_n = n_code(tn).ok()?;
                    if t_site.bytes.len() as u64 != size || t_n.bytes.len() as u64 != n_size {
                        return None;
                    }
                    let n_jump = jump_bytes_with(n_at, n_len, &prefixes, tn, after_n)?;
                    let site_jump = jump_bytes(at, len, k as u8, ts, &n_jump[..m])?;
                    let site = Planned {
                        at,
                        site: patched_site(s.id, &s.bytes[..len], m, ts, true),
                        trampoline: t_site,
                        jump: site_jump,
                    };
                    let read = (j + 5).saturating_sub(n_len);
                    let neighbour = Planned {
                        at: n_at,
                        site: patched_site(
                            n_id.unwrap_or(u32::MAX),
                            n_orig,
                            read,
                            tn,
                            n_id.is_some(),
                        ),
                        trampoline: t_n,
                        jump: n_jump,
                    };
                    Some((site, neighbour))
                })();
                if planned.is_some() {
                    return planned;
                }
                space.release(ts);
                space.release(tn);
            }
        }
    }
    None
}

/// Out-of-line copies of sites left on breakpoints: a trampoline that runs the relocated
/// instruction and jumps back, so that the tracer, stopped at a site's breakpoint, sends
/// the thread there instead of single-stepping the instruction in place (one stop per
/// access instead of two). Sites that cannot be relocated or placed get none.
pub fn plan_out_of_line<'a>(
    sites: impl IntoIterator<Item = &'a SiteRequest>,
    space: &mut CodeSpace,
) -> Vec<Trampoline> {
    let mut out = Vec::new();
    for s in sites {
        let at = s.insn.ip();
        let Ok(probe) = generate_plain(&s.insn, &s.bytes, at) else {
            continue;
        };
        let size = probe.bytes.len() as u64;
        let Some((t_at, _)) = space.allocate(&windows(at, 5, &[]), size) else {
            continue;
        };
        match generate_plain(&s.insn, &s.bytes, t_at) {
            Ok(t) if t.bytes.len() as u64 == size => out.push(t),
            _ => space.release(t_at),
        }
    }
    out
}

/// The table's record of a patch.
fn patched_site(
    id: u32,
    original: &[u8],
    reads_past: usize,
    trampoline: u64,
    access: bool,
) -> PatchedSite {
    let mut bytes = [0u8; 16];
    bytes[..original.len()].copy_from_slice(original);
    PatchedSite {
        id,
        len: original.len() as u8,
        original: bytes,
        reads_past: reads_past as u8,
        trampoline,
        access,
    }
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
    fn a_short_site_without_room_moves_its_neighbour_out_of_the_way() {
        // mov eax,[rdi] ; mov rax,[rdi+0x100] ; then a byte 0x30 and padding. The site's own
        // windows fall below the code or 9 MiB above it, where nothing is free.
        let mut body = vec![0x8b, 0x07, 0x48, 0x8b, 0x87, 0x00, 0x01, 0x00, 0x00, 0x30];
        body.extend([0x90; 8]);
        let (mut code, mut sites) = region(&body, &[0]);
        let room = BASE + (512 << 20)..BASE + (1800 << 20);
        let mut sp = CodeSpace::new(std::iter::once(room).collect());
        let p = plan(&mut code, &mut sites, &mut sp, &log());
        assert!(p.refused.is_empty(), "{:?}", p.refused);
        assert_eq!(p.patched.len(), 1);
        assert_eq!(p.evicted.len(), 1);
        let (site, moved) = (&p.patched[0], &p.evicted[0]);
        assert_eq!(jump_target(&code, BASE), site.trampoline.meta.at);
        assert_eq!(moved.at, BASE + 2);
        assert!(!moved.site.access);
        // The neighbour's jump, decoded where it was, reaches its trampoline, which runs it
        // and comes back after it.
        assert_eq!(jump_target(&code, BASE + 2), moved.trampoline.meta.at);
        let t = &moved.trampoline;
        let back = Decoder::with_ip(64, &t.bytes, t.meta.at, DecoderOptions::NONE)
            .iter()
            .collect::<Vec<_>>();
        assert_eq!(back[0].mnemonic(), Mnemonic::Mov);
        assert_eq!(back[0].memory_displacement64(), 0x100);
        assert_eq!(back[1].near_branch_target(), BASE + 9);
        // Restoring the neighbour breaks the site's jump, which reads its bytes.
        let mut table = crate::patch::PatchTable::default();
        table.insert(site.at, site.site, site.trampoline.meta);
        table.insert(moved.at, moved.site, moved.trampoline.meta);
        let mut d = table.dependents(BASE + 2..BASE + 3);
        d.sort();
        assert_eq!(d, vec![BASE, BASE + 2]);
    }

    #[test]
    fn sites_left_on_breakpoints_get_out_of_line_copies() {
        let body = [0x8b, 0x07, 0x89, 0x06, 0xc3, 0x90, 0x90, 0x90, 0x90, 0x90];
        let (_, sites) = region(&body, &[0, 2]);
        let copies = plan_out_of_line(&sites, &mut space());
        assert_eq!(copies.len(), 2);
        for (c, s) in copies.iter().zip(&sites) {
            assert!(!c.meta.logs);
            assert_eq!(&c.bytes[..s.insn.len()], &s.bytes[..]);
            let jmp = Decoder::with_ip(
                64,
                &c.bytes[s.insn.len()..],
                c.meta.at + s.insn.len() as u64,
                DecoderOptions::NONE,
            )
            .decode();
            assert_eq!(jmp.near_branch_target(), s.insn.next_ip());
        }
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
