//! The jump written over a patched site, and where it can go.
//!
//! A site of five bytes or more gets a plain `jmp rel32`, the rest of it filled with
//! `int3`. A shorter site gets a *punned* jump (E9Patch, Duck et al., PLDI'20): the
//! `jmp rel32` starts at the site but its displacement runs into the bytes of the
//! instructions that follow, which are left as they are. Only the displacement bytes inside
//! the site can be chosen, so the jump reaches a *window* of targets fixed by the following
//! bytes: 256 addresses for a 2-byte site, 64 KiB for 3 bytes, 16 MiB for 4. Redundant
//! prefixes before the opcode shift which following bytes are fixed, giving other windows
//! (each prefix costs one chosen byte). The following instructions still start where they
//! did and still decode as before, so nothing that jumps to them is affected; only their
//! bytes must never change while the site is patched (see `table.rs`).

use std::ops::Range;

/// The `jmp rel32` opcode.
const JMP: u8 = 0xe9;

/// A redundant prefix put before the opcode (REX.W: a near jump is 64-bit anyway).
const PREFIX: u8 = 0x48;

/// A segment-override prefix, ignored on a jump in 64-bit mode, for a second and third
/// prefix (only one REX may precede an opcode).
const SEGMENT_PREFIX: u8 = 0x26;

/// A range of jump targets one encoding reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Lowest target.
    pub lo: u64,
    /// Number of targets (all of lo..lo+span are reachable).
    pub span: u64,
    /// Redundant prefixes of this encoding.
    pub prefixes: u8,
    /// The address the jump is relative to (the end of the jump instruction).
    pub from: u64,
}

impl Window {
    /// The targets as a range.
    pub fn range(&self) -> Range<u64> {
        self.lo..self.lo.saturating_add(self.span)
    }

    /// Whether this is the ±2 GiB of a site with room for a whole jump.
    pub fn is_full_reach(&self) -> bool {
        self.span > 1 << 24
    }
}

/// The windows a jump written over the `len`-byte site at `site` can reach; `next` are
/// the (current) bytes that follow the site, at least `5 - len` of them when `len < 5`.
/// Sorted from the widest window to the narrowest.
pub fn windows(site: u64, len: usize, next: &[u8]) -> Vec<Window> {
    if len >= 5 {
        return window_with(site, len, 0, next).into_iter().collect();
    }
    (0..len)
        .filter_map(|k| window_with(site, len, k as u8, next))
        .collect()
}

/// The window of the encoding with `prefixes` prefixes: ±2 GiB when the whole jump fits in
/// the site, else the window its chosen displacement bytes reach (None when `next` is too
/// short, or the prefixes and opcode do not fit).
pub fn window_with(site: u64, len: usize, prefixes: u8, next: &[u8]) -> Option<Window> {
    let k = prefixes as usize;
    if k + 1 > len {
        return None;
    }
    let from = site + k as u64 + 5;
    // k prefixes and the opcode take k+1 of the site's bytes; c displacement bytes are
    // chosen, the other 4-c are the following bytes.
    let c = len - 1 - k;
    if c >= 4 {
        let lo = from.saturating_sub(1 << 31);
        return Some(Window {
            lo,
            span: from + (1 << 31) - lo,
            prefixes,
            from,
        });
    }
    let fixed = 4 - c;
    let mut high: u32 = 0;
    for (j, &b) in next.get(..fixed)?.iter().enumerate() {
        high |= (b as u32) << (8 * (c + j));
    }
    Some(Window {
        lo: from.wrapping_add(high as i32 as i64 as u64),
        span: 1 << (8 * c),
        prefixes,
        from,
    })
}

/// Redundant prefixes a jump may start with in any position but the last before the
/// opcode: the segment overrides, all ignored by a near jump in 64-bit mode.
pub const SEGMENT_PREFIXES: [u8; 6] = [0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65];

/// Whether `b` may be the prefix right before the opcode (a segment override or a REX).
pub fn is_last_prefix(b: u8) -> bool {
    SEGMENT_PREFIXES.contains(&b) || (0x40..=0x4f).contains(&b)
}

/// The bytes to write over the `len`-byte site at `site` for a jump with `prefixes`
/// prefixes to `target`: the whole site (a long site is padded with `int3`), of which a
/// punned jump owns only the first `len` bytes. None when `target` is out of reach or is
/// not in that encoding's window (the caller must pick it from [`windows`]).
pub fn jump_bytes(
    site: u64,
    len: usize,
    prefixes: u8,
    target: u64,
    next: &[u8],
) -> Option<Vec<u8>> {
    let k = prefixes as usize;
    let chosen: Vec<u8> = (0..k)
        .map(|i| if i + 1 == k { PREFIX } else { SEGMENT_PREFIX })
        .collect();
    jump_bytes_with(site, len, &chosen, target, next)
}

/// [`jump_bytes`] with the given prefix bytes (each a segment override, the last one may be
/// a REX; see [`is_last_prefix`]).
pub fn jump_bytes_with(
    site: u64,
    len: usize,
    prefix_bytes: &[u8],
    target: u64,
    next: &[u8],
) -> Option<Vec<u8>> {
    let k = prefix_bytes.len();
    if k + 1 > len {
        return None;
    }
    let from = site + k as u64 + 5;
    let rel = i32::try_from(target.wrapping_sub(from) as i64).ok()?;
    let rel = rel.to_le_bytes();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(prefix_bytes);
    out.push(JMP);
    let chosen = (len - k - 1).min(4);
    out.extend_from_slice(&rel[..chosen]);
    // The displacement bytes not chosen must be the following bytes as they are.
    if chosen < 4 && next.get(..4 - chosen) != Some(&rel[chosen..]) {
        return None;
    }
    out.resize(len, 0xcc);
    Some(out)
}

/// How many bytes past the site a jump with `prefixes` prefixes over a `len`-byte site
/// reads: the following bytes it relies on.
pub fn bytes_read_past(len: usize, prefixes: u8) -> usize {
    (prefixes as usize + 5).saturating_sub(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::testing::decode_one as decode;
    use iced_x86::Mnemonic;

    #[test]
    fn a_long_site_gets_a_plain_jump_padded_with_int3() {
        let w = windows(0x1000, 7, &[]);
        assert_eq!(w.len(), 1);
        assert!(w[0].is_full_reach());
        let b = jump_bytes(0x1000, 7, 0, 0x9000, &[]).unwrap();
        assert_eq!(b.len(), 7);
        assert_eq!(&b[5..], &[0xcc, 0xcc]);
        let j = decode(&b, 0x1000);
        assert_eq!(j.mnemonic(), Mnemonic::Jmp);
        assert_eq!(j.near_branch_target(), 0x9000);
    }

    #[test]
    fn short_sites_reach_windows_fixed_by_the_following_bytes() {
        // A 3-byte site followed by 48 8b 07 (mov rax, [rdi]).
        let next = [0x48, 0x8b, 0x07, 0x90];
        let site = 0x5555_5555_0000;
        let w = windows(site, 3, &next);
        assert_eq!(w.len(), 3);
        for win in &w {
            // Every target of every window is reachable, and the jump decodes to it.
            for target in [win.lo, win.lo + win.span - 1, win.lo + win.span / 2] {
                let b = jump_bytes(site, 3, win.prefixes, target, &next).unwrap();
                assert_eq!(b.len(), 3);
                let mut code = b.clone();
                code.extend_from_slice(&next);
                let j = decode(&code, site);
                assert_eq!(j.mnemonic(), Mnemonic::Jmp, "{code:x?}");
                assert_eq!(j.near_branch_target(), target);
                assert_eq!(j.len(), 5 + win.prefixes as usize);
            }
            // One past the window is not.
            assert!(jump_bytes(site, 3, win.prefixes, win.lo + win.span, &next).is_none());
        }
        assert_eq!(w[0].span, 1 << 16);
        assert_eq!(w[1].span, 1 << 8);
        assert_eq!(w[2].span, 1);
    }

    #[test]
    fn a_negative_high_byte_reaches_below_the_site() {
        let next = [0x8b, 0x45, 0x00, 0x00]; // mov eax, [rbp+0]
        let site = 0x7fff_f7c0_0000;
        let w = windows(site, 4, &next);
        assert!(w[0].lo < site);
        assert_eq!(w[0].span, 1 << 24);
    }

    #[test]
    fn the_bytes_read_past_the_site_are_counted() {
        assert_eq!(bytes_read_past(2, 0), 3);
        assert_eq!(bytes_read_past(2, 1), 4);
        assert_eq!(bytes_read_past(5, 0), 0);
        assert_eq!(bytes_read_past(8, 0), 0);
    }
}
