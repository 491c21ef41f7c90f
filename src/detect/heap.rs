//! Heap errors of one execution (use after free, double free, invalid free): the blocks the
//! program allocated and the ones it freed that mcheck holds back from the allocator (the
//! **quarantine**), and what a free or an access of them is.
//!
//! A block in quarantine was freed by the program but never handed to the allocator: no
//! allocation, seen or unseen (libc's own, an untraced library's), can get its memory back.
//! So an access to it, or a second free of it, is certain to be the program's error, whatever
//! mcheck did not see. Blocks freed without being held (too large, a full quarantine, a
//! realloc) are not tracked as freed at all: reporting an access to them could be wrong.
//!
//! Pure bookkeeping: the executor (`run/`) asks and carries out what it is told.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use super::hash::FastHash;
use super::race::HeapBlock;
use crate::model::{Addr, ThreadId};

/// How much freed memory the quarantine may hold back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuarantineLimits {
    /// Most blocks held at once (0: no quarantine).
    pub max_blocks: usize,
    /// Largest block held; larger ones go to the allocator at once.
    pub max_block_bytes: u64,
}

impl QuarantineLimits {
    /// The default: 1,024 blocks of at most 64 KiB each, so at most 64 MiB of the program's
    /// memory (usually far less) is held back.
    pub const DEFAULT: QuarantineLimits = QuarantineLimits {
        max_blocks: 1024,
        max_block_bytes: 64 << 10,
    };
}

impl Default for QuarantineLimits {
    fn default() -> Self {
        QuarantineLimits::DEFAULT
    }
}

/// A freed block held in quarantine, and how to free it for real later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreedBlock {
    /// The block as it was allocated (or as its free described it, when unseen).
    pub block: HeapBlock,
    /// The thread that freed it.
    pub freed_by: ThreadId,
    /// The free's call site (return address).
    pub free_site: u64,
    /// The freeing thread's epoch at the free (to find its stack again in a second run).
    pub free_epoch: u32,
    /// The deallocator's entry (hook address) the free went through: the release goes
    /// through the same one.
    pub deallocator: u64,
    /// The arguments of the free (pointer, size, alignment for sized deallocators).
    pub args: [u64; 3],
}

/// What a free of a pointer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreeCheck {
    /// An ordinary free (of a live block, or of memory mcheck knows nothing certain of).
    Fine,
    /// The block was freed already and is still in quarantine.
    Double(FreedBlock),
    /// The pointer is inside a freed block, not at its start.
    IntoFreed(FreedBlock),
    /// The pointer is inside a live block, not at its start, and misaligned: no allocator
    /// returns such a pointer, so no allocation mcheck missed can explain it.
    IntoLive(HeapBlock),
}

/// What to do with the free call the program is making.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreeAction {
    /// Let it free the block (not held).
    PassThrough,
    /// Skip the call: the block is held in quarantine.
    Hold,
    /// Make the call free this older block instead (same deallocator, its arguments): the
    /// new one is held in its place.
    Release([u64; 3]),
    /// Skip the call: it is a heap error (reported), the allocator must not see it.
    Refuse,
}

/// The heap of one execution as the allocator hooks saw it.
#[derive(Debug, Clone, Default)]
pub struct HeapChecks {
    limits: QuarantineLimits,
    /// Live blocks seen allocated, by start.
    live: BTreeMap<Addr, HeapBlock>,
    /// Blocks in quarantine, by start.
    freed: BTreeMap<Addr, FreedBlock>,
    /// Their starts, oldest first.
    order: VecDeque<Addr>,
    /// Pages that hold a part of a block in quarantine, with how many blocks.
    pages: HashMap<u64, u32, FastHash>,
    /// The same counts summed by the page number's low bits: the cheap test every access
    /// makes before `pages` is looked at.
    filter: PageFilter,
    /// (access pc, free site) pairs reported.
    reported: HashSet<(u64, u64)>,
}

const PAGE_SHIFT: u32 = 12;

/// Buckets of [`PageFilter`] (a power of two): 8 KiB of counts, which stay in the L1 cache.
const FILTER_BUCKETS: usize = 2048;

/// Per bucket of page numbers (by their low bits), how many (block, page) pairs of the
/// quarantine fall in it. A zero bucket proves that no block in quarantine touches any
/// page of the bucket; a nonzero one says nothing (the exact table decides). Neighbouring
/// pages fall in different buckets, so an access near, not in, a freed block stays cheap.
#[derive(Debug, Clone)]
struct PageFilter(Box<[u32]>);

impl Default for PageFilter {
    fn default() -> Self {
        PageFilter(vec![0; FILTER_BUCKETS].into_boxed_slice())
    }
}

impl PageFilter {
    #[inline]
    fn bucket(page: u64) -> usize {
        page as usize & (FILTER_BUCKETS - 1)
    }

    /// Whether no block in quarantine may touch `page`.
    #[inline]
    fn clear(&self, page: u64) -> bool {
        self.0[Self::bucket(page)] == 0
    }

    fn add(&mut self, page: u64) {
        self.0[Self::bucket(page)] += 1;
    }

    fn remove(&mut self, page: u64) {
        self.0[Self::bucket(page)] -= 1;
    }
}

fn pages_of(start: Addr, size: u64) -> std::ops::RangeInclusive<u64> {
    (start >> PAGE_SHIFT)..=((start + size.max(1) - 1) >> PAGE_SHIFT)
}

impl HeapChecks {
    /// Heap checks with a quarantine of `limits`.
    pub fn new(limits: QuarantineLimits) -> HeapChecks {
        HeapChecks {
            limits,
            ..HeapChecks::default()
        }
    }

    /// An allocation returned `block`.
    pub fn allocated(&mut self, block: HeapBlock) {
        // Memory in quarantine is never handed out; if it is, the block was released some
        // way mcheck did not see (an mmap'd chunk unmapped...): it is no longer watched.
        let overlapping: Vec<Addr> = (self.freed.range(..block.start + block.size.max(1)))
            .rev()
            .take_while(|(_, f)| f.block.start + f.block.size.max(1) > block.start)
            .map(|(&a, _)| a)
            .collect();
        for a in overlapping {
            self.unhold(a);
        }
        self.live.insert(block.start, block);
    }

    /// The block at `ptr` was freed without being held (a realloc that moved it, a free
    /// not checked): it is neither live nor watched.
    pub fn released(&mut self, ptr: Addr) {
        self.live.remove(&ptr);
    }

    /// The live block containing `addr`, if seen allocated.
    pub fn live_block_containing(&self, addr: Addr) -> Option<HeapBlock> {
        (self.live.range(..=addr).next_back())
            .map(|(_, b)| *b)
            .filter(|b| addr < b.start + b.size.max(1))
    }

    /// The block in quarantine containing any byte of `[addr, addr + size)`.
    #[inline]
    pub fn freed_containing(&self, addr: Addr, size: u64) -> Option<&FreedBlock> {
        if self.pages.is_empty() {
            return None;
        }
        let last = addr.saturating_add(size.max(1) - 1);
        let (first_page, last_page) = (addr >> PAGE_SHIFT, last >> PAGE_SHIFT);
        if self.filter.clear(first_page) && self.filter.clear(last_page) {
            return None;
        }
        if !self.pages.contains_key(&first_page)
            && (last_page == first_page || !self.pages.contains_key(&last_page))
        {
            return None;
        }
        (self.freed.range(..=last).next_back())
            .map(|(_, f)| f)
            .filter(|f| addr < f.block.start + f.block.size.max(1))
    }

    /// What a free of `ptr` is.
    pub fn check_free(&self, ptr: Addr) -> FreeCheck {
        if let Some(f) = self.freed_containing(ptr, 1) {
            return match f.block.start == ptr {
                true => FreeCheck::Double(*f),
                false => FreeCheck::IntoFreed(*f),
            };
        }
        match self.live_block_containing(ptr) {
            Some(b) if b.start != ptr && ptr % 16 != 0 => FreeCheck::IntoLive(b),
            _ => FreeCheck::Fine,
        }
    }

    /// The program frees `ptr` (checked [`FreeCheck::Fine`]) through `deallocator` with
    /// `args`; `size_hint` is the block's size when it was not seen allocated. Returns what
    /// to do with the call, and keeps the block in quarantine when it is held.
    #[allow(clippy::too_many_arguments)]
    pub fn free(
        &mut self,
        ptr: Addr,
        size_hint: u64,
        thread: ThreadId,
        site: u64,
        epoch: u32,
        deallocator: u64,
        args: [u64; 3],
    ) -> FreeAction {
        let block = self.live.remove(&ptr).unwrap_or(HeapBlock {
            start: ptr,
            size: size_hint,
            thread,
            site: 0,
        });
        if self.limits.max_blocks == 0 || block.size > self.limits.max_block_bytes {
            return FreeAction::PassThrough;
        }
        let entry = FreedBlock {
            block,
            freed_by: thread,
            free_site: site,
            free_epoch: epoch,
            deallocator,
            args,
        };
        if self.freed.len() < self.limits.max_blocks {
            self.hold(entry);
            return FreeAction::Hold;
        }
        // Full: the oldest block freed through the same deallocator goes to it instead.
        let Some(i) = (self.order.iter()).position(|a| self.freed[a].deallocator == deallocator)
        else {
            return FreeAction::PassThrough;
        };
        let old = self.order[i];
        let released = self.unhold(old).map(|f| f.args).unwrap_or(args);
        self.hold(entry);
        FreeAction::Release(released)
    }

    fn hold(&mut self, f: FreedBlock) {
        // A block starting where a held one does replaces it (callers check a free first,
        // so this is a double free gone unreported): its pages must not count twice.
        self.unhold(f.block.start);
        for p in pages_of(f.block.start, f.block.size) {
            *self.pages.entry(p).or_default() += 1;
            self.filter.add(p);
        }
        self.order.push_back(f.block.start);
        self.freed.insert(f.block.start, f);
    }

    fn unhold(&mut self, start: Addr) -> Option<FreedBlock> {
        let f = self.freed.remove(&start)?;
        if let Some(i) = self.order.iter().position(|&a| a == start) {
            self.order.remove(i);
        }
        for p in pages_of(f.block.start, f.block.size) {
            if let Some(n) = self.pages.get_mut(&p) {
                self.filter.remove(p);
                *n -= 1;
                if *n == 0 {
                    self.pages.remove(&p);
                }
            }
        }
        Some(f)
    }

    /// Whether the pair (access at `pc`, free at `free_site`) is reported for the first
    /// time (each pair once per execution).
    pub fn first_report(&mut self, pc: u64, free_site: u64) -> bool {
        self.reported.insert((pc, free_site))
    }

    /// Blocks and bytes in quarantine.
    pub fn held(&self) -> (usize, u64) {
        let bytes = self.freed.values().map(|f| f.block.size).sum();
        (self.freed.len(), bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(start: Addr, size: u64) -> HeapBlock {
        HeapBlock {
            start,
            size,
            thread: 0,
            site: 0x400100,
        }
    }

    const FREE: u64 = 0x401000;

    fn free(h: &mut HeapChecks, ptr: Addr) -> FreeAction {
        h.free(ptr, 0, 1, 0x400200, 3, FREE, [ptr, 0, 0])
    }

    /// What `freed_containing` finds without the filter: the exact page table, then the
    /// blocks by start.
    fn unfiltered(h: &HeapChecks, addr: Addr, size: u64) -> Option<Addr> {
        let last = addr.saturating_add(size.max(1) - 1);
        if !h.pages.contains_key(&(addr >> PAGE_SHIFT))
            && !h.pages.contains_key(&(last >> PAGE_SHIFT))
        {
            return None;
        }
        (h.freed.range(..=last).next_back())
            .filter(|(_, f)| addr < f.block.start + f.block.size.max(1))
            .map(|(&a, _)| a)
    }

    #[test]
    fn the_page_filter_never_hides_a_block_in_quarantine() {
        use rand::{Rng, SeedableRng};
        // Blocks on pages whose numbers share their low bits (the filter's buckets), held,
        // released and handed out again: every lookup agrees with the exact table, and the filter
        // counts what the exact table counts.
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(28);
        let limits = QuarantineLimits {
            max_blocks: 6,
            max_block_bytes: 3 * 4096,
        };
        let mut h = HeapChecks::new(limits);
        let mut hits = 0;
        let bases: Vec<Addr> = (0..4)
            .map(|k| 0x10_0000 + k * (FILTER_BUCKETS as u64) * 4096)
            .collect();
        for step in 0..4000 {
            let base = bases[rng.random_range(0..bases.len())];
            let start = (base + rng.random_range(0..3 * 4096)) & !15;
            let size = rng.random_range(1..=2 * 4096);
            match rng.random_range(0..3) {
                0 => h.allocated(block(start, size)),
                1 => {
                    // As the executor does: only a free checked fine reaches `free`.
                    if h.check_free(start) == FreeCheck::Fine {
                        let dealloc = [FREE, 0x999][rng.random_range(0..2)];
                        h.free(start, size, 1, 0x400200, 3, dealloc, [start, 0, 0]);
                    }
                }
                _ => {
                    let addr = base + rng.random_range(0..4 * 4096);
                    let size = rng.random_range(1..=64);
                    let found = h.freed_containing(addr, size).map(|f| f.block.start);
                    assert_eq!(found, unfiltered(&h, addr, size), "step {step}");
                    hits += usize::from(found.is_some());
                }
            }
            let mut buckets = vec![0u32; FILTER_BUCKETS];
            for (&p, &n) in &h.pages {
                buckets[PageFilter::bucket(p)] += n;
            }
            assert_eq!(&buckets[..], &h.filter.0[..], "step {step}: filter counts");
        }
        assert!(hits > 100, "the test reaches blocks in quarantine ({hits})");
    }

    #[test]
    fn an_access_after_a_free_hits_the_held_block_and_nothing_else() {
        let mut h = HeapChecks::new(QuarantineLimits::DEFAULT);
        h.allocated(block(0x5000, 32));
        h.allocated(block(0x5020, 32));
        assert_eq!(h.freed_containing(0x5000, 8), None);
        assert_eq!(free(&mut h, 0x5000), FreeAction::Hold);
        let f = h.freed_containing(0x5008, 8).expect("freed");
        assert_eq!((f.block.size, f.freed_by, f.free_site), (32, 1, 0x400200));
        assert!(h.freed_containing(0x501c, 8).is_some(), "straddles the end");
        assert_eq!(
            h.freed_containing(0x5020, 8),
            None,
            "the next block is live"
        );
        assert_eq!(h.freed_containing(0x4ff0, 16), None, "just before");
        assert_eq!(h.held(), (1, 32));
    }

    #[test]
    fn frees_are_classified() {
        let mut h = HeapChecks::new(QuarantineLimits::DEFAULT);
        h.allocated(block(0x5000, 64));
        assert_eq!(h.check_free(0x5000), FreeCheck::Fine);
        assert_eq!(
            h.check_free(0x5010),
            FreeCheck::Fine,
            "aligned: unseen block?"
        );
        assert_eq!(h.check_free(0x5003), FreeCheck::IntoLive(block(0x5000, 64)));
        assert_eq!(
            h.check_free(0x9000),
            FreeCheck::Fine,
            "never seen: not ours"
        );
        free(&mut h, 0x5000);
        assert!(matches!(h.check_free(0x5000), FreeCheck::Double(f) if f.block.start == 0x5000));
        assert!(matches!(h.check_free(0x5010), FreeCheck::IntoFreed(_)));
    }

    #[test]
    fn a_full_quarantine_releases_the_oldest_block_of_the_same_deallocator() {
        let limits = QuarantineLimits {
            max_blocks: 2,
            max_block_bytes: 100,
        };
        let mut h = HeapChecks::new(limits);
        for a in [0x1000, 0x2000, 0x3000, 0x4000] {
            h.allocated(block(a, 16));
        }
        assert_eq!(free(&mut h, 0x1000), FreeAction::Hold);
        assert_eq!(
            h.free(0x2000, 0, 1, 0, 0, 0x999, [0x2000, 16, 8]),
            FreeAction::Hold
        );
        // Full: 0x3000 goes through `FREE`, whose oldest is 0x1000.
        assert_eq!(free(&mut h, 0x3000), FreeAction::Release([0x1000, 0, 0]));
        assert_eq!(
            h.freed_containing(0x1000, 1),
            None,
            "released: no longer watched"
        );
        assert!(h.freed_containing(0x3000, 1).is_some());
        // Through the other deallocator: its own block, with its own arguments.
        assert_eq!(
            h.free(0x4000, 0, 1, 0, 0, 0x999, [0x4000, 16, 8]),
            FreeAction::Release([0x2000, 16, 8])
        );
        // A deallocator with nothing held: passes through.
        h.allocated(block(0x6000, 16));
        assert_eq!(
            h.free(0x6000, 0, 1, 0, 0, 0x777, [0x6000, 0, 0]),
            FreeAction::PassThrough
        );
        assert_eq!(h.held(), (2, 32));
    }

    #[test]
    fn large_blocks_and_a_disabled_quarantine_pass_through() {
        let mut h = HeapChecks::new(QuarantineLimits::DEFAULT);
        h.allocated(block(0x10000, 1 << 20));
        assert_eq!(free(&mut h, 0x10000), FreeAction::PassThrough);
        assert_eq!(h.freed_containing(0x10000, 1), None);
        let mut off = HeapChecks::new(QuarantineLimits {
            max_blocks: 0,
            max_block_bytes: 0,
        });
        off.allocated(block(0x5000, 8));
        assert_eq!(free(&mut off, 0x5000), FreeAction::PassThrough);
        assert_eq!(off.check_free(0x5000), FreeCheck::Fine, "not known freed");
    }

    #[test]
    fn an_unseen_block_is_held_with_the_size_its_header_gives() {
        let mut h = HeapChecks::new(QuarantineLimits::DEFAULT);
        assert_eq!(
            h.free(0x7000, 24, 2, 0x400300, 1, FREE, [0x7000, 0, 0]),
            FreeAction::Hold
        );
        assert!(h.freed_containing(0x7010, 8).is_some());
        assert_eq!(h.freed_containing(0x7018, 8), None);
    }

    #[test]
    fn an_allocation_over_a_held_block_ends_its_watch() {
        let mut h = HeapChecks::new(QuarantineLimits::DEFAULT);
        h.allocated(block(0x5000, 4096 + 16));
        free(&mut h, 0x5000);
        h.allocated(block(0x5ff0, 32));
        assert_eq!(h.freed_containing(0x5000, 1), None);
        assert_eq!(h.held(), (0, 0));
        assert!(h.pages.is_empty(), "page counts go back to nothing");
    }

    #[test]
    fn each_pair_is_reported_once() {
        let mut h = HeapChecks::new(QuarantineLimits::DEFAULT);
        assert!(h.first_report(1, 2));
        assert!(!h.first_report(1, 2));
        assert!(h.first_report(1, 3));
    }

    #[test]
    fn freeing_the_same_start_twice_keeps_one_block_and_its_pages_once() {
        let mut h = HeapChecks::new(QuarantineLimits::DEFAULT);
        h.allocated(block(0x5000, 32));
        assert_eq!(free(&mut h, 0x5000), FreeAction::Hold);
        h.allocated(block(0x5000, 32));
        assert_eq!(free(&mut h, 0x5000), FreeAction::Hold);
        assert_eq!(h.freed.len(), 1);
        assert_eq!(h.order.len(), 1);
        h.unhold(0x5000);
        assert!(h.pages.is_empty(), "no page left counted: {:?}", h.pages);
        assert_eq!(h.freed_containing(0x5000, 8), None);
    }
}
