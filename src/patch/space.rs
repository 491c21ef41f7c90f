//! Where trampolines go: address space the tracee does not use, handed out in chunks that
//! the tracer maps into the tracee, and inside chunks in exact byte ranges.
//!
//! A punned jump reaches a narrow window (see `jump.rs`), so trampolines land wherever the
//! windows of the sites fall. Chunks are large (16 MiB of address space, mapped without
//! reserving memory) so that few mappings serve many windows; only the pages trampolines
//! are written to take memory, and placing a trampoline right after an earlier one (in a
//! page already written) is preferred.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use super::jump::Window;

/// Bytes of address space per chunk (and their alignment).
pub const CHUNK: u64 = 16 << 20;

/// Address space left to the program's heap above where `brk` starts. Beyond it `brk`
/// fails and glibc's malloc takes memory with mmap instead; the space is worth more to
/// the windows of punned jumps in a program loaded low (not position-independent).
const HEAP_ROOM: u64 = 64 << 20;

/// Address space left below the main thread's stack (its growth, 8 MiB by default, and the
/// kernel's guard gap).
const STACK_ROOM: u64 = 64 << 20;

/// Bytes per page of the tracee.
const PAGE: u64 = 4096;

/// Lowest address used (below it is the null guard area).
const LOWEST: u64 = 1 << 20;

/// Highest user-space address (exclusive) on x86-64 with 4-level page tables.
const USER_END: u64 = 0x7fff_ffff_f000;

/// The address ranges free for trampolines, given the ranges mapped now, where the heap
/// starts (`brk`) and where the main thread's stack is: the gaps between mappings, minus
/// room for the heap to grow, for the stack, and the lowest megabyte.
pub fn free_ranges(
    mapped: &[Range<u64>],
    heap: Option<u64>,
    stack: Option<u64>,
) -> Vec<Range<u64>> {
    let mut taken: Vec<Range<u64>> = mapped.to_vec();
    taken.push(0..LOWEST);
    if let Some(h) = heap {
        taken.push(h..h.saturating_add(HEAP_ROOM));
    }
    let top = stack.map_or(USER_END, |s| s.saturating_sub(STACK_ROOM));
    taken.push(top..u64::MAX);
    taken.sort_by_key(|r| r.start);
    let mut free = Vec::new();
    let mut at = 0u64;
    for r in taken {
        if r.start > at {
            free.push(at..r.start);
        }
        at = at.max(r.end);
    }
    free
}

/// How many free positions inside one window are tried before a new chunk is considered.
const TRIES: usize = 16;

/// Address space for trampolines.
#[derive(Debug, Clone, Default)]
pub struct CodeSpace {
    /// Address ranges the tracee does not use and that may hold chunks.
    free: Vec<Range<u64>>,
    /// Chunks mapped (or to be mapped), by start.
    chunks: BTreeMap<u64, ()>,
    /// Chunks chosen since the last [`CodeSpace::take_new_chunks`].
    new_chunks: Vec<u64>,
    /// Byte ranges handed out, start → end (one per trampoline: persistent, so that a fork
    /// copy's table shares it with its template's).
    used: imbl::OrdMap<u64, u64>,
    /// The chunk trampolines of full-reach jumps go to, per 4 GiB neighbourhood.
    bump: BTreeMap<u64, u64>,
    /// Starts of the chunks sealed by [`CodeSpace::seal`]: no byte of them is handed out
    /// again.
    sealed: BTreeSet<u64>,
}

impl CodeSpace {
    /// Space made of `free`, the ranges the tracee leaves free (sorted or not).
    pub fn new(mut free: Vec<Range<u64>>) -> CodeSpace {
        free.retain(|r| r.start < r.end);
        free.sort_by_key(|r| r.start);
        CodeSpace {
            free,
            ..Default::default()
        }
    }

    /// Replaces the free ranges (the tracee's mappings changed since).
    pub fn set_free(&mut self, mut free: Vec<Range<u64>>) {
        free.retain(|r| r.start < r.end);
        free.sort_by_key(|r| r.start);
        self.free = free;
    }

    /// Chunks chosen since the last call, for the caller to map (each `CHUNK` bytes).
    pub fn take_new_chunks(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.new_chunks)
    }

    /// Forgets chunks the caller could not map (another mapping took the place).
    pub fn chunk_failed(&mut self, chunk: u64) {
        self.chunks.remove(&chunk);
        let end = chunk + CHUNK;
        let mut free = Vec::with_capacity(self.free.len() + 1);
        for r in self.free.drain(..) {
            if r.end <= chunk || r.start >= end {
                free.push(r);
                continue;
            }
            if r.start < chunk {
                free.push(r.start..chunk);
            }
            if r.end > end {
                free.push(end..r.end);
            }
        }
        self.free = free;
        let dead: Vec<u64> = self
            .used
            .range(chunk..chunk + CHUNK)
            .map(|(&s, _)| s)
            .collect();
        for s in dead {
            self.used.remove(&s);
        }
        self.bump.retain(|_, &mut c| c != chunk);
    }

    /// Hands out `size` bytes starting inside one of `windows` (tried in order), in mapped
    /// chunks or new ones. Returns the address and the index of the window used.
    pub fn allocate(&mut self, windows: &[Window], size: u64) -> Option<(u64, usize)> {
        // A place in a chunk already there, in a page already written, first.
        for (i, w) in windows.iter().enumerate() {
            if !w.is_full_reach() {
                if let Some(a) = self.in_mapped_chunks(w.range(), size) {
                    return Some((self.take(a, size), i));
                }
            }
        }
        for (i, w) in windows.iter().enumerate() {
            let found = if w.is_full_reach() {
                self.full_reach(w, size)
            } else {
                self.in_new_chunk(w.range(), size)
            };
            if let Some(a) = found {
                return Some((self.take(a, size), i));
            }
        }
        None
    }

    /// [`CodeSpace::allocate`], but only in chunks already mapped (none is added): for a
    /// caller that cannot map one now.
    pub fn allocate_mapped(&mut self, windows: &[Window], size: u64) -> Option<(u64, usize)> {
        let before = self.new_chunks.len();
        let found = self.allocate(windows, size)?;
        if self.new_chunks.len() == before {
            return Some(found);
        }
        for chunk in self.new_chunks.drain(before..) {
            self.chunks.remove(&chunk);
            self.bump.retain(|_, &mut c| c != chunk);
        }
        self.used.remove(&found.0);
        None
    }

    /// Seals every chunk that holds trampolines now and returns them. No byte in them is
    /// handed out again: the caller shares them with fork copies of the process, which
    /// must never see them change. Whole chunks, not just their written pages: a chunk
    /// left partly private keeps page tables that every fork copies.
    pub fn seal(&mut self) -> Vec<Range<u64>> {
        let spans: Vec<Range<u64>> = (self.chunks.keys())
            .filter(|&&c| self.used.range(c..c + CHUNK).next().is_some())
            .map(|&c| c..c + CHUNK)
            .collect();
        self.sealed.extend(spans.iter().map(|r| r.start));
        spans
    }

    /// Whether `a..a + size` overlaps a sealed chunk.
    fn overlaps_sealed(&self, a: u64, size: u64) -> bool {
        let first = a / CHUNK * CHUNK;
        self.sealed.range(first..a + size).next().is_some()
    }

    /// Gives back the range handed out at `a`.
    pub fn release(&mut self, a: u64) {
        self.used.remove(&a);
    }

    /// Hands out `size` bytes at `a` again (after [`CodeSpace::release`]).
    pub fn take(&mut self, a: u64, size: u64) -> u64 {
        self.used.insert(a, a + size);
        a
    }

    /// A free position for `size` bytes starting in `targets`, inside mapped chunks.
    fn in_mapped_chunks(&self, targets: Range<u64>, size: u64) -> Option<u64> {
        // Candidates: the window's start, and the ends of ranges handed out inside it.
        let mut candidates = vec![targets.start];
        if let Some((_, &end)) = self.used.range(..targets.start).next_back() {
            if end > targets.start {
                candidates[0] = end;
            }
        }
        let mut inside = self.used.range(targets.start..targets.end);
        candidates.extend(inside.clone().map(|(_, &e)| e).take(TRIES));
        // Trampolines are packed one after the other: the end of the last one is free.
        candidates.extend(inside.next_back().map(|(_, &e)| e));
        // So is the first byte after a sealed chunk.
        let sealed_ends = self.sealed.range(..targets.end).map(|&c| c + CHUNK);
        candidates.extend(sealed_ends.filter(|e| targets.contains(e)));
        // Prefer the ends of earlier trampolines (written pages), then the window start.
        candidates.rotate_left(1);
        candidates
            .into_iter()
            .filter(|&a| targets.contains(&a))
            .find(|&a| self.is_mapped(a, size) && self.is_unused(a, size))
    }

    /// A position in a chunk not mapped yet, inside free space.
    fn in_new_chunk(&mut self, targets: Range<u64>, size: u64) -> Option<u64> {
        let first = targets.start / CHUNK * CHUNK;
        let mut chunk = first;
        while chunk < targets.end {
            if !self.chunks.contains_key(&chunk) && self.chunk_is_free(chunk) {
                let a = targets.start.max(chunk);
                if a + size <= chunk + CHUNK {
                    self.add_chunk(chunk);
                    return Some(a);
                }
            }
            chunk = chunk.checked_add(CHUNK)?;
        }
        None
    }

    /// A position for a jump that reaches ±2 GiB: the current chunk of that neighbourhood
    /// while it has room and is in reach, else the end of another mapped chunk in reach,
    /// else the free chunk nearest the jump.
    fn full_reach(&mut self, w: &Window, size: u64) -> Option<u64> {
        let targets = w.range();
        let middle = w.from;
        let key = middle >> 32;
        let fits = |a: u64| targets.contains(&a) && targets.contains(&(a + size));
        if let Some(&chunk) = self.bump.get(&key) {
            if let Some(a) = self.next_in_chunk(chunk, size).filter(|&a| fits(a)) {
                return Some(a);
            }
        }
        let first = targets.start.div_ceil(CHUNK) * CHUNK;
        let mapped: Vec<u64> = self
            .chunks
            .range(first..targets.end.saturating_sub(CHUNK))
            .map(|(&c, _)| c)
            .collect();
        let mut by_distance = mapped;
        by_distance.sort_by_key(|c| c.abs_diff(middle));
        for chunk in by_distance {
            if let Some(a) = self.next_in_chunk(chunk, size).filter(|&a| fits(a)) {
                self.bump.insert(key, chunk);
                return Some(a);
            }
        }
        let chunk = self.nearest_free_chunk(middle, &targets)?;
        self.add_chunk(chunk);
        self.bump.insert(key, chunk);
        Some(chunk)
    }

    /// The first free position after the last range handed out in `chunk`.
    fn next_in_chunk(&self, chunk: u64, size: u64) -> Option<u64> {
        if self.sealed.contains(&chunk) {
            return None;
        }
        let a = (self.used.range(chunk..chunk + CHUNK).next_back()).map_or(chunk, |(_, &e)| e);
        (a + size <= chunk + CHUNK).then_some(a)
    }

    /// The unmapped free chunk nearest `middle` with all of it inside `targets`.
    fn nearest_free_chunk(&self, middle: u64, targets: &Range<u64>) -> Option<u64> {
        let mut best: Option<(u64, u64)> = None;
        for r in &self.free {
            let lo = r.start.max(targets.start).div_ceil(CHUNK) * CHUNK;
            let hi = r.end.min(targets.end);
            if lo.checked_add(CHUNK)? > hi {
                continue;
            }
            let last = (hi - CHUNK) / CHUNK * CHUNK;
            let pick = (middle / CHUNK * CHUNK).clamp(lo, last);
            // Outwards from the chunk nearest the middle, past those already taken.
            let mut down = Some(pick);
            let mut up = pick.checked_add(CHUNK);
            for _ in 0..4096 {
                let found = [down, up]
                    .into_iter()
                    .flatten()
                    .filter(|&c| c >= lo && c <= last)
                    .find(|c| !self.chunks.contains_key(c));
                if let Some(c) = found {
                    let d = c.abs_diff(middle);
                    if best.is_none_or(|(bd, _)| d < bd) {
                        best = Some((d, c));
                    }
                    break;
                }
                down = down.and_then(|c| c.checked_sub(CHUNK)).filter(|&c| c >= lo);
                up = up.and_then(|c| c.checked_add(CHUNK)).filter(|&c| c <= last);
                if down.is_none() && up.is_none() {
                    break;
                }
            }
        }
        best.map(|(_, c)| c)
    }

    fn add_chunk(&mut self, chunk: u64) {
        self.chunks.insert(chunk, ());
        self.new_chunks.push(chunk);
    }

    fn chunk_is_free(&self, chunk: u64) -> bool {
        let end = chunk + CHUNK;
        let i = self.free.partition_point(|r| r.end <= chunk);
        self.free
            .get(i)
            .is_some_and(|r| r.start <= chunk && end <= r.end)
    }

    fn is_mapped(&self, a: u64, size: u64) -> bool {
        let chunk = a / CHUNK * CHUNK;
        self.chunks.contains_key(&chunk) && a + size <= chunk + CHUNK
    }

    fn is_unused(&self, a: u64, size: u64) -> bool {
        if self.overlaps_sealed(a, size) {
            return false;
        }
        let before = self.used.range(..=a).next_back();
        if before.is_some_and(|(_, &e)| e > a) {
            return false;
        }
        self.used.range(a..a + size).next().is_none()
    }

    /// Number of chunks.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The chunks' start addresses, in order.
    pub fn chunks(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks.keys().copied()
    }

    /// Distinct pages holding trampolines (the memory they cost in the tracee).
    pub fn pages_used(&self) -> usize {
        self.used_pages().len()
    }

    /// The addresses of the pages holding trampolines, in order.
    pub fn used_pages(&self) -> Vec<u64> {
        let mut pages: Vec<u64> = (self.used.iter())
            .flat_map(|(&s, &e)| (s / PAGE)..=((e - 1) / PAGE))
            .map(|p| p * PAGE)
            .collect();
        pages.dedup();
        pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: Range<u64> = 0x1000_0000..0x2000_0000;

    fn window(lo: u64, span: u64) -> Window {
        Window {
            lo,
            span,
            prefixes: 0,
            from: lo,
        }
    }

    #[test]
    fn free_ranges_leave_room_for_heap_and_stack() {
        let mapped = [
            0x5555_5555_4000..0x5555_5556_0000,
            0x7fff_f7c0_0000..0x7fff_f800_0000,
        ];
        let heap = Some(0x5555_5556_0000);
        let stack = Some(0x7fff_fffd_e000);
        let free = free_ranges(&mapped, heap, stack);
        assert_eq!(free[0], LOWEST..0x5555_5555_4000);
        assert_eq!(free[1].start, 0x5555_5556_0000 + HEAP_ROOM);
        assert_eq!(free[1].end, 0x7fff_f7c0_0000);
        assert_eq!(free[2], 0x7fff_f800_0000..0x7fff_fffd_e000 - STACK_ROOM);
        assert_eq!(free.len(), 3);
    }

    #[test]
    fn trampolines_in_one_window_share_a_chunk_and_do_not_overlap() {
        let mut s = CodeSpace::new(vec![FREE]);
        let w = [window(0x1100_0000, 1 << 16)];
        let (a, _) = s.allocate(&w, 100).unwrap();
        let (b, _) = s.allocate(&w, 100).unwrap();
        assert_eq!(a, 0x1100_0000);
        assert_eq!(
            b,
            a + 100,
            "right after the first, in a page already written"
        );
        assert_eq!(s.take_new_chunks(), vec![0x1100_0000]);
        assert!(s.take_new_chunks().is_empty());
        assert_eq!(s.pages_used(), 1);
    }

    #[test]
    fn a_window_outside_free_space_is_refused() {
        let mut s = CodeSpace::new(vec![FREE]);
        assert!(s.allocate(&[window(0x3000_0000, 256)], 100).is_none());
        // A later window is used when the first cannot be.
        let w = [window(0x3000_0000, 256), window(0x1200_0000, 256)];
        assert_eq!(s.allocate(&w, 100), Some((0x1200_0000, 1)));
    }

    #[test]
    fn a_single_target_must_be_exactly_free() {
        let mut s = CodeSpace::new(vec![FREE]);
        let w = [window(0x1100_0000, 1)];
        assert!(s.allocate(&w, 100).is_some());
        assert!(s.allocate(&w, 100).is_none(), "taken");
        assert!(s.allocate(&[window(0x1100_0000 + 50, 1)], 10).is_none());
        assert!(s.allocate(&[window(0x1100_0000 + 100, 1)], 10).is_some());
    }

    #[test]
    fn full_reach_jumps_fill_the_nearest_chunk() {
        let mut s = CodeSpace::new(vec![FREE, 0x5000_0000..0x6000_0000]);
        let site = 0x5800_0000u64;
        let w = crate::patch::jump::windows(site, 5, &[]);
        let (a, _) = s.allocate(&w, 100).unwrap();
        let (b, _) = s.allocate(&w, 100).unwrap();
        assert!((0x5000_0000..0x6000_0000).contains(&a));
        assert!(a.abs_diff(site) <= CHUNK);
        assert_eq!(b, a + 100);
        assert_eq!(s.chunk_count(), 1);
    }

    #[test]
    fn a_failed_chunk_is_never_used_again() {
        let mut s = CodeSpace::new(vec![FREE]);
        let w = [window(0x1100_0000, 1 << 16)];
        s.allocate(&w, 100).unwrap();
        let chunk = s.take_new_chunks()[0];
        s.chunk_failed(chunk);
        assert!(s.allocate(&w, 100).is_none());
    }

    #[test]
    fn sealed_chunks_are_never_handed_out_again() {
        let mut s = CodeSpace::new(vec![FREE, 0x5000_0000..0x6000_0000]);
        let w = [window(0x1100_0000, 1 << 16)];
        let (a, _) = s.allocate(&w, 100).unwrap();
        let (b, _) = s.allocate(&w, 100).unwrap();
        // A full-reach jump fills the chunk already mapped in its reach.
        let far = crate::patch::jump::windows(0x5800_0000, 5, &[]);
        let (c, _) = s.allocate(&far, 100).unwrap();
        assert_eq!(c, b + 100);
        s.release(b);
        assert_eq!(s.seal(), vec![0x1100_0000..0x1100_0000 + CHUNK]);
        assert_eq!(s.take_new_chunks(), vec![0x1100_0000]);
        // Neither the released range nor the rest of the sealed chunk is given out again: a
        // window inside it has no room, a full-reach jump gets a chunk of its own.
        assert!(s.allocate(&w, 100).is_none());
        assert!(s.allocate(&[window(a, 50)], 10).is_none());
        let (e, _) = s.allocate(&far, 100).unwrap();
        assert!(!(0x1100_0000..0x1100_0000 + CHUNK).contains(&e), "{e:#x}");
        assert_eq!(s.take_new_chunks().len(), 1);
    }
}
