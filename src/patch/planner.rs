//! Plans the patches of a batch of sites in one region of code: which get a jump, where
//! their trampolines go, and which stay on the breakpoint path and why.
//!
//! Sites are planned from the highest address down (as E9Patch does), on a copy of the
//! region's current bytes that each plan updates: a punned jump relies on the bytes after
//! its site, and those are then already final, whether they end up holding another site's
//! jump or a breakpoint (a site left on the breakpoint path gets its `int3` in the copy at
//! once, before the sites below it are planned).
//!
//! A short site is tried, in turn, with a punned jump, with its successor moved out of the
//! way ([`plan_evicting`]), and with a *hop* ([`plan_hop`], E9Patch's neighbour eviction):
//! a 2-byte `jmp rel8` to the spare bytes of a longer instruction within 128 bytes, whose
//! own jump (to its trampoline, if it is a site, or to one that just runs it) takes only
//! its first five bytes; the jump to the short site's trampoline goes in the rest.

use std::collections::HashMap;

use iced_x86::{Decoder, DecoderOptions, Instruction};

use super::jump::{
    bytes_read_past, is_last_prefix, jump_bytes, jump_bytes_with, window_with, windows,
    SEGMENT_PREFIXES,
};
use super::log_layout::LogLayout;
use super::space::CodeSpace;
use super::table::{Hop, PatchedSite};
use super::trampoline::{
    check_relocatable, generate, generate_entry, generate_plain, EntrySite, Trampoline, Unpatchable,
};
use super::wrapper::generate_wrapper;

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
    /// Whether each byte is read by a planned punned jump (it must not change).
    borrowed: Vec<bool>,
    /// The breakpoints of mcheck's in the region before planning (an `int3` in `bytes`),
    /// with the program's own byte under each: a hook's may be taken out again.
    breakpoints: Vec<(u64, u8)>,
    /// Whether each byte is such a breakpoint (no jump reads it as its displacement;
    /// the int3s of sites refused by the plan itself may be read, as they always were).
    unstable: Vec<bool>,
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
            borrowed: vec![false; n],
            breakpoints: Vec::new(),
            unstable: vec![false; n],
        }
    }

    /// Notes that the `int3` at `at` (inside the region) is a breakpoint of mcheck's over
    /// the program's byte `original`. No plan moves it, reads it as part of a jump, or
    /// decodes it as the program's instruction: a hop's neighbour decoded through the
    /// `int3` of an allocator's entry once started inside the next instruction, and its
    /// jump overwrote that instruction's displacement.
    pub fn reserve_breakpoint(&mut self, at: u64, original: u8) {
        let Some(off) = at.checked_sub(self.start).map(|o| o as usize) else {
            return;
        };
        if off < self.bytes.len() {
            self.breakpoints.push((at, original));
            self.written[off] = true;
            self.unstable[off] = true;
        }
    }

    /// The bytes at `at..at+len` when none of them is a breakpoint (bytes a jump may read
    /// as its displacement must stay as they are).
    fn stable(&self, at: u64, len: usize) -> Option<&[u8]> {
        let off = usize::try_from(at.checked_sub(self.start)?).ok()?;
        if self
            .unstable
            .get(off..off.checked_add(len)?)?
            .contains(&true)
        {
            return None;
        }
        self.get(at, len)
    }

    /// The region as the program has it: the bytes under mcheck's breakpoints put back
    /// (instruction boundaries are decoded from it).
    fn as_the_program_has_it(&self) -> Code {
        let mut code = self.clone();
        for &(at, original) in &self.breakpoints {
            code.bytes[(at - self.start) as usize] = original;
        }
        code
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

    /// Marks `at..at+len` (inside the region) as read by a planned punned jump.
    fn borrow(&mut self, at: u64, len: usize) {
        if let Some(off) = at.checked_sub(self.start).map(|o| o as usize) {
            let end = (off + len).min(self.borrowed.len());
            if off < end {
                self.borrowed[off..end].fill(true);
            }
        }
    }

    /// Whether any byte of `at..at+len` is read by a planned punned jump.
    fn borrowed(&self, at: u64, len: usize) -> bool {
        let Some(off) = at.checked_sub(self.start).map(|o| o as usize) else {
            return true;
        };
        self.borrowed
            .get(off..off + len)
            .is_none_or(|b| b.iter().any(|&x| x))
    }

    /// Notes the bytes the jumps of `plans` read past their sites (or past the spare bytes
    /// their hops land in).
    fn borrow_for<'a>(&mut self, plans: impl IntoIterator<Item = &'a Planned>) {
        for p in plans {
            match p.site.hop {
                None => self.borrow(p.at + p.site.len as u64, p.site.reads_past as usize),
                Some(h) => {
                    let end = h.relies_on.0 + h.relies_on.1 as u64;
                    self.borrow(h.at, (end - h.at) as usize);
                }
            }
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

/// The plan being made, with its patches indexed by address.
#[derive(Default)]
struct Planning {
    out: Plan,
    /// Address → index in `out.patched`.
    patched_at: HashMap<u64, usize>,
    /// Address → index in `out.evicted`.
    evicted_at: HashMap<u64, usize>,
}

impl Planning {
    fn push_patched(&mut self, p: Planned) {
        self.patched_at.insert(p.at, self.out.patched.len());
        self.out.patched.push(p);
    }

    fn push_evicted(&mut self, p: Planned) {
        self.evicted_at.insert(p.at, self.out.evicted.len());
        self.out.evicted.push(p);
    }

    /// The patch planned at `at` (a site's or an evicted instruction's).
    fn at(&self, at: u64) -> Option<&Planned> {
        (self.patched_at.get(&at).map(|&i| &self.out.patched[i]))
            .or_else(|| self.evicted_at.get(&at).map(|&i| &self.out.evicted[i]))
    }
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
    let mut pl = Planning::default();
    // Instruction boundaries are read from the bytes before any plan.
    let pristine = code.as_the_program_has_it();
    let addresses: Vec<u64> = sites.iter().map(|s| s.insn.ip()).collect();
    // Sites planned early, as the neighbour a hop goes through.
    let mut done: std::collections::HashSet<u64> = Default::default();
    for (i, s) in sites.iter().enumerate() {
        let at = s.insn.ip();
        let len = s.insn.len();
        if done.contains(&at) {
            continue;
        }
        let before = (pl.out.patched.len(), pl.out.evicted.len());
        let Some(current) = code.get(at, len) else {
            continue;
        };
        if current != &s.bytes[..len] {
            pl.out.refused.push((at, s.bytes[0], Refusal::NotOriginal));
            continue;
        }
        match plan_one(code, s, space, log) {
            Ok(p) => {
                code.set(at, &p.jump);
                pl.push_patched(p);
            }
            Err(Refusal::NoRoom) if len < 5 => {
                let successor = pl
                    .patched_at
                    .get(&(at + len as u64))
                    .map(|&i| &pl.out.patched[i]);
                match plan_evicting(code, s, successor, space, log) {
                    Some((site, neighbour)) => {
                        code.set(neighbour.at, &neighbour.jump);
                        code.set(at, &site.jump);
                        pl.push_patched(site);
                        // A neighbour that is a site of this batch is planned anew.
                        code.borrow_for([&neighbour]);
                        match pl.patched_at.get(&neighbour.at) {
                            Some(&i) => pl.out.patched[i] = neighbour,
                            None => pl.push_evicted(neighbour),
                        }
                    }
                    None => {
                        let ctx = HopContext {
                            pristine: &pristine,
                            pending: &addresses[i + 1..],
                            sites: &sites[i + 1..],
                        };
                        match plan_hop(code, s, &ctx, &mut pl, space, log) {
                            Some(neighbour) => {
                                if let Some(n) = neighbour {
                                    done.insert(n);
                                }
                            }
                            None => {
                                code.set(at, &[0xcc]);
                                pl.out.refused.push((at, s.bytes[0], Refusal::NoRoom));
                            }
                        }
                    }
                }
            }
            Err(why) => {
                code.set(at, &[0xcc]);
                pl.out.refused.push((at, s.bytes[0], why));
            }
        }
        // The bytes the new jumps read must stay as they are from now on.
        code.borrow_for(
            pl.out.patched[before.0..]
                .iter()
                .chain(&pl.out.evicted[before.1..]),
        );
    }
    pl.out
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
        code.stable(at + len as u64, 5 - len + 3)
            .or_else(|| code.stable(at + len as u64, 5 - len))
            .ok_or(Refusal::NoRoom)?
    } else {
        &[]
    };
    let mut ws = windows(at, len, next);
    // Jumps that need prefixes read more of the following bytes: they must be there.
    ws.retain(|w| code.stable(at, w.prefixes as usize + 5).is_some());
    while !ws.is_empty() {
        let (t_at, i) = space.allocate(&ws, size).ok_or(Refusal::NoRoom)?;
        let w = ws.remove(i);
        match generate(&s.insn, &s.bytes, s.id, t_at, log) {
            Ok(trampoline) if trampoline.bytes.len() as u64 == size => {
                let read = bytes_read_past(len, w.prefixes);
                let next = code.stable(at + len as u64, read).unwrap_or(&[]);
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
                        hop: None,
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
    earlier: Option<&Planned>,
    space: &mut CodeSpace,
    log: &LogLayout,
) -> Option<(Planned, Planned)> {
    let at = s.insn.ip();
    let len = s.insn.len();
    let n_at = at + len as u64;
    let n_orig: Vec<u8> = match earlier {
        Some(p) => p.site.original_bytes().to_vec(),
        None => {
            let left = (code.start + code.bytes.len() as u64).checked_sub(n_at)? as usize;
            code.get(n_at, left.min(15))?.to_vec()
        }
    };
    let n = Decoder::with_ip(64, &n_orig, n_at, DecoderOptions::NONE).decode();
    let n_len = n.len();
    if n.is_invalid()
        || code.borrowed(n_at, n_len)
        || (earlier.is_none() && (n_orig[0] == 0xcc || code.written(n_at, n_len)))
    {
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
        .stable(n_at + n_len as u64, 4)
        .or_else(|| code.stable(n_at + n_len as u64, 0))?;
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

/// What [`plan_hop`] needs to know of the batch: the region before any plan (instruction
/// boundaries), and the sites not planned yet (below the current one), by address.
struct HopContext<'a> {
    pristine: &'a Code,
    pending: &'a [u64],
    sites: &'a [SiteRequest],
}

/// Most bytes a short jump reaches back or forth.
const SHORT_REACH: i64 = 128;

/// Patches the short site `s` with a hop: `jmp rel8` to the spare bytes of a neighbour `N`
/// of at least six bytes, where the jump to the site's trampoline is written; `N`'s first
/// five bytes jump to its own trampoline. `N` is one of (in this order of preference): a
/// site of this batch already patched with a plain jump (its padding is spare), an
/// instruction not patched at all (moved to a trampoline that just runs it), or a site of
/// the batch below `s` not planned yet (planned now; its address is returned so that the
/// caller skips it). Writes the jumps in `code` and the plans in `out`. None when no
/// neighbour will do. Below `s`, only a neighbour whose spare bytes hold a whole jump is
/// used: the bytes after it are not final yet.
fn plan_hop(
    code: &mut Code,
    s: &SiteRequest,
    ctx: &HopContext<'_>,
    pl: &mut Planning,
    space: &mut CodeSpace,
    log: &LogLayout,
) -> Option<Option<u64>> {
    let at = s.insn.ip();
    let len = s.insn.len();
    if len < 2 {
        return None;
    }
    let size = generate(&s.insn, &s.bytes, s.id, at, log).ok()?.bytes.len() as u64;
    for n in neighbours(ctx.pristine, at, len, ctx.pending) {
        let (n_at, n_len) = (n.ip(), n.len());
        let q = n_at + 5;
        let spare = n_len - 5;
        if n_at < at && spare < 5 {
            continue;
        }
        // What N is now.
        let patched = pl.at(n_at).map(|p| (p.site.reads_past, p.site.len));
        let pending_index = ctx.pending.binary_search_by(|a| n_at.cmp(a)).ok();
        let pending = pending_index.is_some();
        // Bytes another jump reads must stay as they are.
        let usable = !code.borrowed(n_at, n_len)
            && match patched {
                Some((0, l)) => {
                    l as usize == n_len
                        && code
                            .get(q, spare)
                            .is_some_and(|b| b.iter().all(|&x| x == 0xcc))
                }
                Some(_) => false,
                None => !code.written(n_at, n_len) && (pending || check_relocatable(&n).is_ok()),
            };
        if !usable {
            continue;
        }
        let after = code
            .stable(n_at + n_len as u64, 8)
            .or_else(|| code.stable(n_at + n_len as u64, 4))
            .unwrap_or(&[]);
        let mut ws = windows(q, spare, after);
        ws.retain(|w| code.stable(q, w.prefixes as usize + 5).is_some() || spare >= 5);
        let Some((t_at, i)) = space.allocate(&ws, size) else {
            continue;
        };
        let w = ws[i];
        let trampoline = match generate(&s.insn, &s.bytes, s.id, t_at, log) {
            Ok(t) if t.bytes.len() as u64 == size => t,
            _ => {
                space.release(t_at);
                continue;
            }
        };
        let read = bytes_read_past(spare, w.prefixes);
        let Some(hop_jump) = jump_bytes(q, spare, w.prefixes, t_at, after) else {
            space.release(t_at);
            continue;
        };
        // N's own jump, unless it has one.
        let mut neighbour_plan = None;
        let mut planned_now = None;
        if patched.is_none() {
            let n_bytes = ctx.pristine.get(n_at, n_len)?.to_vec();
            let plan = if let Some(j) = pending_index {
                plan_one(code, &ctx.sites[j], space, log).ok()
            } else {
                plain_neighbour(&n, &n_bytes, space)
            };
            let Some(plan) = plan else {
                space.release(t_at);
                continue;
            };
            if plan.site.reads_past != 0 {
                space.release(plan.trampoline.meta.at);
                space.release(t_at);
                continue;
            }
            planned_now = pending.then_some(n_at);
            neighbour_plan = Some(plan);
        }
        let rel = q as i64 - (at as i64 + 2);
        let mut site_jump = vec![0xeb, rel as i8 as u8];
        site_jump.resize(len, 0xcc);
        if let Some(p) = &neighbour_plan {
            code.set(n_at, &p.jump);
        }
        code.set(q, &hop_jump);
        code.set(at, &site_jump);
        let mut site = patched_site(s.id, &s.bytes[..len], 0, t_at, true);
        site.hop = Some(Hop {
            at: q,
            relies_on: (n_at, (n_len + read) as u8),
        });
        pl.push_patched(Planned {
            at,
            site,
            trampoline,
            jump: site_jump,
        });
        match (neighbour_plan, planned_now) {
            (Some(p), Some(_)) => pl.push_patched(p),
            (Some(p), None) => pl.push_evicted(p),
            _ => {}
        }
        return Some(planned_now);
    }
    None
}

/// The instructions of at least six bytes whose sixth byte a `jmp rel8` at `at` (a site
/// of `len` bytes) reaches, decoded from `pristine` (below the site, from the nearest
/// pending site under the reach, a known instruction boundary; above it, from the site
/// itself), nearest first.
fn neighbours(pristine: &Code, at: u64, len: usize, pending: &[u64]) -> Vec<Instruction> {
    let from = at + 2;
    let reach = |q: u64| (q as i64 - from as i64).abs() < SHORT_REACH;
    let decode_from = |start: u64, end: u64| -> Vec<Instruction> {
        let left = (pristine.start + pristine.bytes.len() as u64).saturating_sub(start);
        let Some(bytes) = pristine.get(start, (end.saturating_sub(start)).min(left) as usize)
        else {
            return Vec::new();
        };
        Decoder::with_ip(64, bytes, start, DecoderOptions::NONE)
            .into_iter()
            .take_while(|i| !i.is_invalid())
            .collect()
    };
    let mut found: Vec<Instruction> = decode_from(at + len as u64, at + SHORT_REACH as u64 + 16)
        .into_iter()
        .collect();
    // Below: decode from a known boundary (a pending site), if one is near enough.
    let lowest = at.saturating_sub(SHORT_REACH as u64 + 8);
    if let Some(&anchor) = pending.iter().find(|&&a| a <= lowest && lowest - a < 4096) {
        found.extend(
            decode_from(anchor, at)
                .into_iter()
                .filter(|i| i.next_ip() <= at),
        );
    }
    found.retain(|i| i.len() >= 6 && reach(i.ip() + 5));
    found.sort_by_key(|i| (i.ip() as i64 - at as i64).abs());
    found
}

/// The plain trampoline and jump moving `n` (original `bytes`, at least five) out of the
/// way, in space of full reach.
fn plain_neighbour(n: &Instruction, bytes: &[u8], space: &mut CodeSpace) -> Option<Planned> {
    let at = n.ip();
    let size = generate_plain(n, bytes, at).ok()?.bytes.len() as u64;
    let (t_at, _) = space.allocate(&windows(at, n.len(), &[]), size)?;
    let trampoline = match generate_plain(n, bytes, t_at) {
        Ok(t) if t.bytes.len() as u64 == size => t,
        _ => {
            space.release(t_at);
            return None;
        }
    };
    let jump = jump_bytes(at, n.len(), 0, t_at, &[])?;
    Some(Planned {
        at,
        site: patched_site(u32::MAX, bytes, 0, t_at, false),
        trampoline,
        jump,
    })
}

/// Out-of-line copies of sites left on breakpoints: a trampoline that runs the relocated
/// instruction and jumps back, so that the tracer, stopped at a site's breakpoint, sends
/// the thread there instead of single-stepping the instruction in place (one stop per
/// access instead of two). Sites that cannot be relocated or placed get none.
pub fn plan_out_of_line<'a>(
    sites: impl IntoIterator<Item = &'a SiteRequest>,
    space: &mut CodeSpace,
    mapped_only: bool,
) -> Vec<Trampoline> {
    let mut out = Vec::new();
    for s in sites {
        let at = s.insn.ip();
        let Ok(probe) = generate_plain(&s.insn, &s.bytes, at) else {
            continue;
        };
        let size = probe.bytes.len() as u64;
        let ws = windows(at, 5, &[]);
        let placed = if mapped_only {
            space.allocate_mapped(&ws, size)
        } else {
            space.allocate(&ws, size)
        };
        let Some((t_at, _)) = placed else {
            continue;
        };
        match generate_plain(&s.insn, &s.bytes, t_at) {
            Ok(t) if t.bytes.len() as u64 == size => out.push(t),
            _ => space.release(t_at),
        }
    }
    out
}

/// The planned jumps that no longer reach their trampolines in the final `code`: a punned
/// jump whose borrowed bytes a later plan changed. Each one found is a planning bug; the
/// caller leaves such a site on the breakpoint path instead of jumping into the void.
pub fn broken_jumps<'a>(code: &Code, plans: impl IntoIterator<Item = &'a Planned>) -> Vec<u64> {
    plans
        .into_iter()
        .filter(|p| {
            let target = |at: u64, read: usize| -> Option<u64> {
                let bytes = code.get(at, read.max(5)).or_else(|| code.get(at, read))?;
                let jump = Decoder::with_ip(64, bytes, at, DecoderOptions::NONE).decode();
                (jump.mnemonic() == iced_x86::Mnemonic::Jmp).then(|| jump.near_branch_target())
            };
            let read = p.site.len as usize + p.site.reads_past as usize;
            match p.site.hop {
                None => target(p.at, read) != Some(p.trampoline.meta.at),
                Some(h) => {
                    let rest = (h.relies_on.0 + h.relies_on.1 as u64 - h.at) as usize;
                    target(p.at, 2) != Some(h.at)
                        || target(h.at, rest) != Some(p.trampoline.meta.at)
                }
            }
        })
        .map(|p| p.at)
        .collect()
}

/// A memory function's hook to plan: the id its records carry, and where it is.
#[derive(Debug, Clone, Copy)]
pub struct EntryRequest {
    /// Site id.
    pub id: u32,
    /// Where the hook goes.
    pub site: EntrySite,
    /// The hook calls the function and logs when it returns (an allocator's result,
    /// `wrapper.rs`), rather than logging at its entry.
    pub wrap: bool,
}

impl EntryRequest {
    /// The hook's code, placed at `at`.
    fn generate(&self, at: u64, log: &LogLayout) -> Trampoline {
        if self.wrap {
            generate_wrapper(&self.site, self.id, at, log)
        } else {
            generate_entry(&self.site, self.id, at, log)
        }
    }
}

/// Plans the hooks `entries` (each at least 5 bytes, so a plain jump) in `code`, placing
/// their trampolines in `space`; writes their jumps in `code`. An entry whose bytes an
/// earlier plan changed, or for which no room is found, is left out (it keeps its
/// breakpoint, or goes unhooked).
pub fn plan_entries(
    code: &mut Code,
    entries: &[EntryRequest],
    space: &mut CodeSpace,
    log: &LogLayout,
) -> Vec<Planned> {
    let mut out = Vec::new();
    for r in entries {
        let e = &r.site;
        let len = e.len as usize;
        if len < 5 || code.written(e.at, len) {
            continue;
        }
        let Some(original) = code.get(e.at, len).map(<[u8]>::to_vec) else {
            continue;
        };
        let size = r.generate(e.at, log).bytes.len() as u64;
        let Some((t_at, _)) = space.allocate(&windows(e.at, len, &[]), size) else {
            continue;
        };
        let Some(jump) = jump_bytes(e.at, len, 0, t_at, &[]) else {
            space.release(t_at);
            continue;
        };
        code.set(e.at, &jump);
        out.push(Planned {
            at: e.at,
            site: patched_site(r.id, &original, 0, t_at, true),
            trampoline: r.generate(t_at, log),
            jump,
        });
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
        hop: None,
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
    fn no_hop_goes_through_an_instruction_under_a_breakpoint_of_mcheck() {
        // mov eax,[rdi] ; ret ; then a hooked function's entry, mov qword [rip+0x10],1
        // (48 c7 05 10 00 00 00 01 00 00 00), under a breakpoint of mcheck's, and a ret.
        // Read with the int3 in place, the bytes after it decode as mov dword [rip+0x10],1,
        // ten bytes from the entry's second byte: a neighbour whose jumps would overwrite
        // the entry's displacement. Decoded as the program has it, the one long neighbour
        // is the entry itself, whose first byte is the breakpoint: no hop, the site stays
        // a breakpoint, and nothing of the entry changes.
        let entry = [0x48, 0xc7, 0x05, 0x10, 0, 0, 0, 0x01, 0, 0, 0];
        let mut body = vec![0x8b, 0x07, 0xc3, 0xcc];
        body.extend(&entry[1..]);
        body.extend([0xc3, 0x90, 0x90, 0x90, 0x90]);
        let (mut code, mut sites) = region(&body, &[0]);
        code.reserve_breakpoint(BASE + 3, entry[0]);
        let room = BASE + (512 << 20)..BASE + (1024 << 20);
        let mut sp = CodeSpace::new(std::iter::once(room).collect());
        let p = plan(&mut code, &mut sites, &mut sp, &log());
        assert!(p.patched.is_empty() && p.evicted.is_empty(), "{p:?}");
        assert_eq!(p.refused.len(), 1, "{:?}", p.refused);
        assert_eq!(code.get(BASE + 3, entry.len()), Some(&body[3..14]));
    }

    #[test]
    fn a_short_site_hops_through_the_spare_bytes_of_a_longer_neighbour() {
        // mov eax,[rdi] ; ret ; movabs rax, 0x77665544332211f0 ; ret. The site's windows
        // fall out of the free space, its successor (a ret) cannot be moved: it jumps two
        // bytes to the movabs's sixth byte, where a jump to its trampoline is; the movabs
        // itself is moved to a trampoline of its own.
        let mut body = vec![0x8b, 0x07, 0xc3, 0x48, 0xb8];
        body.extend(0x7766_5544_3322_11f0u64.to_le_bytes());
        body.extend([0xc3, 0x90, 0x90, 0x90, 0x90]);
        let (mut code, mut sites) = region(&body, &[0]);
        let room = BASE + (512 << 20)..BASE + (1024 << 20);
        let mut sp = CodeSpace::new(std::iter::once(room).collect());
        let p = plan(&mut code, &mut sites, &mut sp, &log());
        assert!(p.refused.is_empty(), "{:?}", p.refused);
        let site = &p.patched[0];
        let hop = site.site.hop.expect("a hop");
        assert_eq!(hop.at, BASE + 3 + 5);
        assert_eq!(code.get(BASE, 2), Some(&[0xeb, 0x06][..]));
        assert_eq!(jump_target(&code, BASE), hop.at);
        assert_eq!(jump_target(&code, hop.at), site.trampoline.meta.at);
        // The neighbour starts where it did, with a jump to a trampoline that runs it.
        let moved = &p.evicted[0];
        assert_eq!(moved.at, BASE + 3);
        assert_eq!(jump_target(&code, BASE + 3), moved.trampoline.meta.at);
        // The ret after the site is untouched, and every jump reaches its trampoline.
        assert_eq!(code.get(BASE + 2, 1), Some(&[0xc3][..]));
        assert!(broken_jumps(&code, p.patched.iter().chain(&p.evicted)).is_empty());
    }

    #[test]
    fn a_punned_jump_whose_borrowed_bytes_change_later_is_found_broken() {
        // Two short sites: the first one's jump reads the second one's first bytes.
        let body = [0x8b, 0x07, 0x89, 0x06, 0xc3, 0x90, 0x90, 0x90, 0x90, 0x90];
        let (mut code, mut sites) = region(&body, &[0, 2]);
        let p = plan(&mut code, &mut sites, &mut space(), &log());
        assert!(broken_jumps(&code, &p.patched).is_empty());
        // A later plan writes over the bytes the first jump borrowed.
        code.set(BASE + 2, &[0xcc, 0xcc]);
        let broken = broken_jumps(&code, &p.patched);
        assert!(broken.contains(&BASE), "{broken:x?}");
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
        let copies = plan_out_of_line(&sites, &mut space(), false);
        assert_eq!(copies.len(), 2);
        for (c, s) in copies.iter().zip(&sites) {
            assert!(!c.meta.kind.logs());
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
