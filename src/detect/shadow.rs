//! Shadow memory: the access history of every byte the program touched, as a hashed table
//! from page number to copy-on-write [`Page`]s (`Rc<Page>`, written through
//! `Rc::make_mut`: a detector never leaves its worker thread, so the counts need no
//! atomics), allocated on first touch and dropped when a free covers them whole.
//!
//! Cost of one access: one table lookup per page it touches, unless the page is in a small
//! direct-mapped cache of recent pages (a program that works on a few buffers at once, a
//! compressor's input, window and tables, alternates between pages: a cache of the last
//! page alone missed half the time on pzstd and lbzip2),
//! then per granule a few array operations; an access that changes nothing (the thread
//! already made it in this epoch) writes nothing and never copies a shared page. A range
//! access touches its pages and, where a page is covered whole, only the page's one state.
//!
//! Memory per accessed byte, for a page of 4 KiB with any granule-level history: 16 bytes
//! of cell and 1 byte of mask per 4-byte granule (4.25 bytes per byte, 17 KiB per page,
//! about what ThreadSanitizer spends), plus 64 bytes per split granule and 8 bytes per
//! read in a list of concurrent reads. A page covered whole by range accesses (and
//! nothing smaller since) costs only its `Page` header (~150 bytes) and its table entry:
//! a 64 MiB memset costs ~3.5 MiB. Cloning costs one reference count per page; a clone
//! copies a page (~17 KiB) only when it first changes it.

use std::collections::HashMap;
use std::rc::Rc;

use super::cell::Ctx;
use super::hash::FastHash;
use super::page::{Page, PAGE_BYTES, PAGE_SHIFT};
use crate::model::Addr;

/// The shadow memory of one execution. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct ShadowMemory {
    /// Pages and their page numbers, in no order.
    pages: Vec<(u64, Rc<Page>)>,
    /// Page number → index in `pages`.
    index: HashMap<u64, u32, FastHash>,
    /// Pages looked up recently.
    recent: RecentPages,
}

/// Entries of [`RecentPages`] (a power of two).
const RECENT: usize = 64;

/// A direct-mapped cache of page numbers and their indices in `pages`, by the page
/// number's low bits (neighbouring pages never evict each other). An entry is only a
/// hint: it is used when `pages` still holds that page number at that index, so removing
/// or moving a page needs no invalidation and a stale entry is never believed.
#[derive(Debug, Clone)]
struct RecentPages([(u64, u32); RECENT]);

impl Default for RecentPages {
    fn default() -> Self {
        // No page number is u64::MAX (page numbers are addresses shifted right).
        RecentPages([(u64::MAX, 0); RECENT])
    }
}

impl RecentPages {
    #[inline]
    fn slot(pn: u64) -> usize {
        pn as usize & (RECENT - 1)
    }
}

/// Page `pn`'s share of `start..end`: byte offsets `lo..hi` in the page.
fn span(pn: u64, start: Addr, end: Addr) -> (usize, usize) {
    let base = pn << PAGE_SHIFT;
    let lo = start.saturating_sub(base) as usize;
    let hi = (end - base).min(PAGE_BYTES as u64) as usize;
    (lo, hi)
}

impl ShadowMemory {
    #[inline]
    fn find(&mut self, pn: u64) -> Option<usize> {
        let slot = RecentPages::slot(pn);
        let (p, i) = self.recent.0[slot];
        if p == pn && self.pages.get(i as usize).is_some_and(|(q, _)| *q == pn) {
            return Some(i as usize);
        }
        let i = *self.index.get(&pn)?;
        self.recent.0[slot] = (pn, i);
        Some(i as usize)
    }

    /// Applies the access `ctx` of `size` bytes at `addr` (at least one byte, and none
    /// from `u64::MAX` on); the first race, if any, is left in `ctx.found`.
    #[inline]
    pub fn access(&mut self, addr: Addr, size: u64, ctx: &mut Ctx) {
        let size = size.max(1);
        let offset = addr as usize & (PAGE_BYTES - 1);
        if size <= (PAGE_BYTES - offset) as u64 && addr.checked_add(size).is_some() {
            // Within one page: the common case, without the walk.
            self.access_page(addr >> PAGE_SHIFT, offset, offset + size as usize, ctx);
            return;
        }
        // The last byte of the address space is never covered (the end is exclusive).
        let end = addr.saturating_add(size);
        if end <= addr {
            return;
        }
        for pn in addr >> PAGE_SHIFT..=(end - 1) >> PAGE_SHIFT {
            let (lo, hi) = span(pn, addr, end);
            ctx.reset_memo();
            self.access_page(pn, lo, hi, ctx);
        }
    }

    /// The access of bytes `lo..hi` of page `pn`.
    #[inline]
    fn access_page(&mut self, pn: u64, lo: usize, hi: usize, ctx: &mut Ctx) {
        let base = pn << PAGE_SHIFT;
        match self.find(pn) {
            Some(i) => {
                let page = &mut self.pages[i].1;
                if !page.unchanged_access(lo, hi, ctx, base) {
                    Rc::make_mut(page).access(lo, hi, ctx, base);
                }
            }
            None => {
                let mut page = Page::default();
                page.access(lo, hi, ctx, base);
                let i = self.pages.len() as u32;
                self.index.insert(pn, i);
                self.recent.0[RecentPages::slot(pn)] = (pn, i);
                self.pages.push((pn, Rc::new(page)));
            }
        }
    }

    /// Forgets the history of `size` bytes at `start` (a block freed or allocated).
    pub fn forget(&mut self, start: Addr, size: u64) {
        let end = start.saturating_add(size);
        if end <= start || self.pages.is_empty() {
            return;
        }
        let (first, last) = (start >> PAGE_SHIFT, (end - 1) >> PAGE_SHIFT);
        if last - first >= self.pages.len() as u64 {
            // A block larger than all shadow memory: visit the pages, not the range.
            let mut inside: Vec<u64> = self
                .pages
                .iter()
                .map(|(pn, _)| *pn)
                .filter(|pn| (first..=last).contains(pn))
                .collect();
            inside.sort_unstable();
            for pn in inside {
                self.forget_in(pn, start, end);
            }
        } else {
            for pn in first..=last {
                self.forget_in(pn, start, end);
            }
        }
    }

    fn forget_in(&mut self, pn: u64, start: Addr, end: Addr) {
        let Some(i) = self.find(pn) else { return };
        let (lo, hi) = span(pn, start, end);
        if lo == 0 && hi == PAGE_BYTES {
            self.remove(i);
        } else if self.pages[i].1.has_state_in(lo, hi) {
            Rc::make_mut(&mut self.pages[i].1).forget(lo, hi);
        }
    }

    fn remove(&mut self, i: usize) {
        let (pn, _) = self.pages.swap_remove(i);
        self.index.remove(&pn);
        if let Some((moved, _)) = self.pages.get(i) {
            self.index.insert(*moved, i as u32);
        }
    }

    /// Panics unless the table and every page are consistent.
    #[cfg(test)]
    pub fn assert_consistent(&self) {
        assert_eq!(self.index.len(), self.pages.len());
        for (i, (pn, page)) in self.pages.iter().enumerate() {
            assert_eq!(self.index.get(pn), Some(&(i as u32)));
            page.assert_consistent();
        }
    }

    /// Pages allocated.
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// Bytes of heap held, pages shared with clones counted in full.
    pub fn heap_bytes(&self) -> usize {
        self.pages.capacity() * std::mem::size_of::<(u64, Rc<Page>)>()
            + self.index.capacity() * 16
            + self
                .pages
                .iter()
                .map(|(_, p)| std::mem::size_of::<Page>() + 16 + p.heap_bytes())
                .sum::<usize>()
    }
}
