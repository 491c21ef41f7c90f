//! The shadow of one 4 KiB page of program memory, in three levels of detail:
//!
//! - **uniform page**: every byte in one state (`fill`); a fresh page, or one a range
//!   access (memset, memcpy, a `read()` buffer) covered whole. No per-granule storage.
//! - **granules**: 1024 cells of 4 bytes, each with a byte mask; the cell's state is the
//!   state of the bytes in its mask, the other bytes were never accessed (or forgotten).
//!   Aligned 4- and 8-byte accesses (one or two cells) stay here. Granules are 4 bytes,
//!   not 8, because arrays of 4-byte values read and written at different pcs
//!   (`a[i] += 1`) would otherwise split every granule they touch, twice as slow.
//! - **split granule**: when the bytes of one granule are in different states (two
//!   threads writing different bytes of one word, two `char` fields written at different
//!   pcs), the granule's cell names a split: one cell per byte. It becomes one cell again
//!   as soon as its bytes agree.
//!
//! A page is cloned whole when a snapshot's copy first writes it (copy-on-write in
//! [`super::shadow`]), so everything it refers to (read lists, splits) lives inside it.

use super::cell::{Cell, Ctx, ReadLists, EMPTY};
use super::sites::{clock_of, is_tagged, tagged, NONE};
use crate::model::Addr;

/// log2 of the bytes of program memory one page covers.
pub const PAGE_SHIFT: u32 = 12;
/// Bytes of program memory one page covers.
pub const PAGE_BYTES: usize = 1 << PAGE_SHIFT;
/// Bytes per granule.
const GRANULE: usize = 4;
/// The mask of all bytes of a granule.
const FULL: u8 = ((1u16 << GRANULE) - 1) as u8;
/// Granules per page.
const GRANULES: usize = PAGE_BYTES / GRANULE;

/// The mask of bytes `lo..hi` (0 ≤ lo < hi ≤ GRANULE) of a granule.
fn byte_mask(lo: usize, hi: usize) -> u8 {
    (((1u16 << (hi - lo)) - 1) << lo) as u8
}

/// The granules `lo..hi` (byte offsets in the page) touch, each with its byte mask.
fn granules(lo: usize, hi: usize) -> impl Iterator<Item = (usize, u8)> {
    (lo / GRANULE..hi.div_ceil(GRANULE)).map(move |g| {
        let start = g * GRANULE;
        let a = lo.max(start) - start;
        let b = hi.min(start + GRANULE) - start;
        (g, byte_mask(a, b))
    })
}

/// The set bits of a byte mask, lowest first.
fn bits(mask: u8) -> impl Iterator<Item = usize> {
    (0..GRANULE).filter(move |b| mask & (1 << b) != 0)
}

/// The shadow of one page. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The state of every byte while `cells` is empty.
    fill: Cell,
    /// Per granule: its state (or a tagged `w` naming a split).
    cells: Vec<Cell>,
    /// Per granule: the bytes that are not `EMPTY`.
    masks: Vec<u8>,
    /// Byte cells of split granules.
    splits: Vec<[Cell; GRANULE]>,
    /// Unused entries of `splits`.
    free_splits: Vec<u32>,
    /// Read lists held by this page's cells.
    lists: ReadLists,
}

impl Page {
    /// Whether the bytes `lo..hi` have any history.
    pub fn has_state_in(&self, lo: usize, hi: usize) -> bool {
        if self.cells.is_empty() {
            return self.fill != EMPTY;
        }
        granules(lo, hi).any(|(g, bytes)| self.masks[g] & bytes != 0)
    }

    /// The access of bytes `lo..hi` (of this page, at `base`) when it changes nothing:
    /// checks it and returns true; false when it needs [`Page::access`]. Only for
    /// accesses of up to three granules (any 1–8 byte access) or pages in one state.
    #[inline]
    pub fn unchanged_access(&self, lo: usize, hi: usize, ctx: &mut Ctx, base: Addr) -> bool {
        if self.cells.is_empty() {
            let c = self.fill;
            if c == EMPTY || !ctx.unchanged(c) {
                return false;
            }
            if !ctx.write() {
                ctx.check(c, &self.lists, base + lo as Addr);
            }
            return true;
        }
        if (hi - 1) / GRANULE - lo / GRANULE > 2 {
            return false;
        }
        let unchanged = |(g, bytes): (usize, u8)| {
            let c = self.cells[g];
            self.masks[g] & bytes == bytes && !is_tagged(c.w) && ctx.unchanged(c)
        };
        if !granules(lo, hi).all(unchanged) {
            return false;
        }
        // A write that leaves its cells as they are wrote them last itself; a read checks
        // the writes.
        if !ctx.write() {
            for (g, _) in granules(lo, hi) {
                let at = base + lo.max(g * GRANULE) as Addr;
                ctx.check(self.cells[g], &self.lists, at);
            }
        }
        true
    }

    /// Applies the access of bytes `lo..hi` (of this page, at `base`): checks the bytes in
    /// order until the first race and updates them.
    pub fn access(&mut self, lo: usize, hi: usize, ctx: &mut Ctx, base: Addr) {
        let whole = lo == 0 && hi == PAGE_BYTES;
        if self.cells.is_empty() {
            if whole {
                ctx.check(self.fill, &self.lists, base);
                self.fill = ctx.apply(self.fill, &mut self.lists);
                return;
            }
            self.materialize();
        }
        if whole && ctx.write() {
            // Every byte ends up with this write and no reads: one state again.
            self.check_all(ctx, base);
            *self = Page {
                fill: ctx.fresh(),
                ..Page::default()
            };
            return;
        }
        for (g, bytes) in granules(lo, hi) {
            if bytes == FULL && self.masks[g] == FULL {
                if let Some(to) = ctx.repeat(self.cells[g]) {
                    self.cells[g] = to;
                    continue;
                }
            }
            self.access_granule(g, bytes, ctx, base + (g * GRANULE) as Addr);
        }
    }

    /// Forgets the history of bytes `lo..hi`.
    pub fn forget(&mut self, lo: usize, hi: usize) {
        if self.cells.is_empty() {
            if self.fill == EMPTY {
                return;
            }
            if lo == 0 && hi == PAGE_BYTES {
                *self = Page::default();
                return;
            }
            self.materialize();
        }
        for (g, bytes) in granules(lo, hi) {
            if self.masks[g] & bytes == 0 {
                continue;
            }
            let c = self.cells[g];
            if is_tagged(c.w) {
                let s = clock_of(c.w) as usize;
                for b in bits(bytes) {
                    self.lists.release(self.splits[s][b].r);
                    self.splits[s][b] = EMPTY;
                }
                self.masks[g] &= !bytes;
                self.compact(g);
            } else {
                self.masks[g] &= !bytes;
                if self.masks[g] == 0 {
                    self.lists.release(c.r);
                    self.cells[g] = EMPTY;
                }
            }
        }
    }

    /// Bytes of heap this page holds (not counting the `Page` itself).
    pub fn heap_bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Cell>()
            + self.masks.capacity()
            + self.splits.capacity() * std::mem::size_of::<[Cell; GRANULE]>()
            + self.free_splits.capacity() * 4
            + self.lists.heap_bytes()
    }

    /// Panics unless the page is consistent: masks against cells, splits used once and
    /// not compactable, read lists counted by their holders.
    #[cfg(test)]
    pub fn assert_consistent(&self) {
        let mut holders = Vec::new();
        let mut hold = |r: super::sites::Slot| {
            if is_tagged(r) {
                let i = clock_of(r) as usize;
                if holders.len() <= i {
                    holders.resize(i + 1, 0);
                }
                holders[i] += 1;
            }
        };
        assert!(!is_tagged(self.fill.w));
        if self.cells.is_empty() {
            assert!(self.masks.is_empty());
            assert_eq!(self.free_splits.len(), self.splits.len(), "splits in use");
            hold(self.fill.r);
        } else {
            assert_eq!(self.fill, EMPTY);
            assert_eq!((self.cells.len(), self.masks.len()), (GRANULES, GRANULES));
            let mut used = vec![false; self.splits.len()];
            for &s in &self.free_splits {
                assert!(!used[s as usize], "split {s} freed twice");
                used[s as usize] = true;
            }
            for (&c, &m) in self.cells.iter().zip(&self.masks) {
                if is_tagged(c.w) {
                    let s = clock_of(c.w) as usize;
                    assert!(!used[s], "split {s} used twice or freed");
                    used[s] = true;
                    assert_eq!(c.r, NONE);
                    let split = self.splits[s];
                    let nonempty = bits(FULL).filter(|&b| split[b] != EMPTY);
                    assert_eq!(nonempty.fold(0u8, |a, b| a | 1 << b), m);
                    let first = split[m.trailing_zeros() as usize];
                    assert!(bits(m).any(|b| split[b] != first), "compactable split");
                    for b in bits(m) {
                        assert!(!is_tagged(split[b].w));
                        hold(split[b].r);
                    }
                } else {
                    assert_eq!(m == 0, c == EMPTY, "mask {m:#x} of {c:?}");
                    hold(c.r);
                }
            }
            assert!(used.iter().all(|&u| u), "a split neither used nor free");
        }
        self.lists.assert_holders(&holders);
    }

    /// Gives every granule the state of `fill`.
    fn materialize(&mut self) {
        let fill = std::mem::take(&mut self.fill);
        self.cells = vec![fill; GRANULES];
        let mask = if fill == EMPTY { 0 } else { FULL };
        self.masks = vec![mask; GRANULES];
        self.lists.share(fill.r, GRANULES as u32 - 1);
    }

    /// Checks every byte of the page, in order, against the access.
    fn check_all(&self, ctx: &mut Ctx, base: Addr) {
        for g in 0..GRANULES {
            if ctx.found.is_some() {
                return;
            }
            let (c, m) = (self.cells[g], self.masks[g]);
            let at = base + (g * GRANULE) as Addr;
            if is_tagged(c.w) {
                let split = &self.splits[clock_of(c.w) as usize];
                for b in bits(m) {
                    ctx.check(split[b], &self.lists, at + b as Addr);
                }
            } else if m != 0 {
                ctx.check(c, &self.lists, at + m.trailing_zeros() as Addr);
            }
        }
    }

    /// The access of the bytes `bytes` of granule `g`, at `at`.
    fn access_granule(&mut self, g: usize, bytes: u8, ctx: &mut Ctx, at: Addr) {
        let (c, m) = (self.cells[g], self.masks[g]);
        if is_tagged(c.w) {
            self.access_split(g, bytes, ctx, at);
            return;
        }
        let hit = m & bytes;
        if hit != 0 {
            ctx.check(c, &self.lists, at + hit.trailing_zeros() as Addr);
        }
        let fresh = ctx.fresh();
        if m & !bytes == 0 {
            // Every byte with a history is accessed: they all become `to`, the others `fresh`.
            let to = ctx.apply(c, &mut self.lists);
            if m == bytes || m == 0 || to == fresh {
                self.cells[g] = to;
                self.masks[g] = bytes;
                return;
            }
            let mut split = [EMPTY; GRANULE];
            for b in bits(m) {
                split[b] = to;
            }
            self.lists.share(to.r, m.count_ones() - 1);
            for b in bits(bytes & !m) {
                split[b] = fresh;
            }
            self.store_split(g, split, m | bytes);
            return;
        }
        if ctx.unchanged(c) && (bytes & !m == 0 || c == fresh) {
            self.masks[g] |= bytes;
            return;
        }
        // Some bytes keep `c`, others change: one cell per byte.
        let mut split = [EMPTY; GRANULE];
        for b in bits(m) {
            split[b] = c;
        }
        self.lists.share(c.r, m.count_ones() - 1);
        self.store_split(g, split, m);
        self.access_split(g, bytes, ctx, at);
    }

    /// The access of the bytes `bytes` of the split granule `g`, at `at`.
    fn access_split(&mut self, g: usize, bytes: u8, ctx: &mut Ctx, at: Addr) {
        let s = clock_of(self.cells[g].w) as usize;
        for b in bits(bytes) {
            let c = self.splits[s][b];
            ctx.check(c, &self.lists, at + b as Addr);
            self.splits[s][b] = ctx.apply(c, &mut self.lists);
        }
        self.masks[g] |= bytes;
        self.compact(g);
    }

    /// Makes granule `g` split into the byte cells `split`, `mask` being its non-empty bytes.
    fn store_split(&mut self, g: usize, split: [Cell; GRANULE], mask: u8) {
        let s = match self.free_splits.pop() {
            Some(s) => {
                self.splits[s as usize] = split;
                s
            }
            None => {
                self.splits.push(split);
                (self.splits.len() - 1) as u32
            }
        };
        self.cells[g] = Cell {
            w: tagged(s),
            r: NONE,
        };
        self.masks[g] = mask;
    }

    /// Makes the split granule `g` one cell again when its non-empty bytes agree.
    fn compact(&mut self, g: usize) {
        let s = clock_of(self.cells[g].w);
        let split = self.splits[s as usize];
        let m = self.masks[g];
        let mut states = bits(m).map(|b| split[b]);
        let first = states.next().unwrap_or(EMPTY);
        if states.any(|c| c != first) {
            return;
        }
        for _ in 1..m.count_ones() {
            self.lists.release(first.r);
        }
        self.cells[g] = first;
        self.free_splits.push(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_masks_and_granule_walks() {
        assert_eq!(byte_mask(0, 4), FULL);
        assert_eq!(byte_mask(1, 3), 0b110);
        assert_eq!(byte_mask(3, 4), 0b1000);
        let g: Vec<_> = granules(2, 9).collect();
        assert_eq!(g, vec![(0, 0b1100), (1, FULL), (2, 0b0001)]);
        assert_eq!(granules(0, PAGE_BYTES).count(), GRANULES);
    }
}
