//! The FastTrack state of one granule (4 bytes) or one byte of shadow memory, and what an
//! access does to it: the race check and the update. A [`Cell`] is two [`Slot`]s, the last
//! write and the reads since it: no read, one read (an epoch, the common case), or a list
//! of reads by several threads that are not ordered with each other ([`ReadLists`], the
//! read vector clock of FastTrack, kept in arrival order so that a write racing with
//! several of them reports the oldest, as the per-byte detector always did).

use super::sites::{clock_of, is_tagged, tagged, Site, Sites, Slot, NONE};
use super::vclock::VectorClock;
use crate::model::{Addr, ThreadId};

/// The last write and the reads since it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cell {
    /// The last write; at granule level, a tagged slot instead names a split granule.
    pub w: Slot,
    /// `NONE`, the one read, or a tagged slot naming a read list.
    pub r: Slot,
}

/// Never accessed (or forgotten).
pub const EMPTY: Cell = Cell { w: NONE, r: NONE };

/// One list of concurrent reads, shared by the cells that hold it.
#[derive(Debug, Clone, Default)]
struct ReadList {
    refs: u32,
    reads: Vec<Slot>,
}

/// The read lists of one page, indexed by the tagged read slots of its cells and counted
/// by reference (a range access or a split copies one cell to many granules or bytes).
/// Freed lists keep their buffers for the next one: no allocation once warmed up.
#[derive(Debug, Clone, Default)]
pub struct ReadLists {
    items: Vec<ReadList>,
    free: Vec<u32>,
}

impl ReadLists {
    fn alloc(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => {
                let l = &mut self.items[i as usize];
                l.refs = 1;
                l.reads.clear();
                i
            }
            None => {
                self.items.push(ReadList {
                    refs: 1,
                    reads: Vec::new(),
                });
                (self.items.len() - 1) as u32
            }
        }
    }

    /// The reads of the list that the tagged slot `r` names.
    fn reads(&self, r: Slot) -> &[Slot] {
        &self.items[clock_of(r) as usize].reads
    }

    /// `n` more cells hold read slot `r`.
    pub fn share(&mut self, r: Slot, n: u32) {
        if is_tagged(r) {
            self.items[clock_of(r) as usize].refs += n;
        }
    }

    /// One cell holding read slot `r` lets go of it.
    pub fn release(&mut self, r: Slot) {
        if is_tagged(r) {
            let i = clock_of(r);
            let l = &mut self.items[i as usize];
            l.refs -= 1;
            if l.refs == 0 {
                self.free.push(i);
            }
        }
    }

    /// Panics unless `holders[i]` cells hold list `i` for every list, free lists are
    /// exactly those held by none, and every list held has at least two reads.
    #[cfg(test)]
    pub fn assert_holders(&self, holders: &[u32]) {
        let mut free = vec![false; self.items.len()];
        for &i in &self.free {
            assert!(!free[i as usize], "list {i} freed twice");
            free[i as usize] = true;
        }
        for (i, l) in self.items.iter().enumerate() {
            let held = holders.get(i).copied().unwrap_or(0);
            if free[i] {
                assert_eq!(held, 0, "free list {i} is held");
            } else {
                assert_eq!(l.refs, held, "list {i}: count against holders");
                assert!(l.reads.len() >= 2, "list {i} of {} reads", l.reads.len());
            }
        }
    }

    /// Bytes of heap held.
    pub fn heap_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<ReadList>()
            + self.free.capacity() * 4
            + self
                .items
                .iter()
                .map(|l| l.reads.capacity() * 8)
                .sum::<usize>()
    }
}

/// One access being applied to shadow memory, cell by cell, and the first race it makes.
pub struct Ctx<'a> {
    me: Slot,
    thread: ThreadId,
    write: bool,
    atomic: bool,
    now: &'a VectorClock,
    sites: &'a Sites,
    /// The first race found: the first conflicting byte and the earlier access there.
    pub found: Option<(Addr, Slot)>,
    /// The last cell found not to conflict (a range access meets the same cell again and
    /// again); valid within one page.
    checked: Option<Cell>,
    /// The last update made, input and output; valid within one page.
    memo: Option<(Cell, Cell)>,
}

impl<'a> Ctx<'a> {
    /// The access `site` makes as slot `me`, its thread's clock being `now`.
    pub fn new(me: Slot, site: &Site, now: &'a VectorClock, sites: &'a Sites) -> Ctx<'a> {
        Ctx {
            me,
            thread: site.thread,
            write: site.write,
            atomic: site.atomic,
            now,
            sites,
            found: None,
            checked: None,
            memo: None,
        }
    }

    /// Whether the access writes.
    pub fn write(&self) -> bool {
        self.write
    }

    /// Forgets what is only valid within one page (the read lists are the page's).
    pub fn reset_memo(&mut self) {
        self.checked = None;
        self.memo = None;
    }

    /// The state of a byte that this access is the first to touch.
    pub fn fresh(&self) -> Cell {
        if self.write {
            Cell {
                w: self.me,
                r: NONE,
            }
        } else {
            Cell {
                w: NONE,
                r: self.me,
            }
        }
    }

    /// Whether this access leaves `c` as it is: the thread already wrote (or read) it in
    /// this epoch, at this site, and nothing since. The fastest path.
    pub fn unchanged(&self, c: Cell) -> bool {
        if self.write {
            c.w == self.me && c.r == NONE
        } else {
            c.r == self.me || (c.r == NONE && self.covered_by_own_write(c.w))
        }
    }

    /// Whether a read may leave out of the history the write `w`, as the last write with
    /// no read since: `w` is this thread's, in this epoch, and at least as strong (plain,
    /// or this read is atomic too). Every later access that would race with the read
    /// races with `w`, which is checked first and so is the one reported either way.
    #[inline]
    fn covered_by_own_write(&self, w: Slot) -> bool {
        if w == NONE || is_tagged(w) || clock_of(w) != clock_of(self.me) {
            return false;
        }
        let site = self.sites.get(w);
        site.thread == self.thread && (self.atomic || !site.atomic)
    }

    /// Whether slot `s` happens before this access (or is the thread's own).
    fn ordered(now: &VectorClock, sites: &Sites, s: Slot) -> bool {
        clock_of(s) <= now.get(sites.get(s).thread)
    }

    /// Whether the access recorded in slot `s` races with this one.
    fn conflicts(&self, s: Slot) -> bool {
        let other = self.sites.get(s);
        other.thread != self.thread
            && !(other.atomic && self.atomic)
            && (other.write || self.write)
            && clock_of(s) > self.now.get(other.thread)
    }

    /// The earlier access of `c` that this one races with: the write, else (for a write)
    /// the oldest conflicting read.
    fn earlier(&self, c: Cell, lists: &ReadLists) -> Option<Slot> {
        if c.w != NONE && self.conflicts(c.w) {
            return Some(c.w);
        }
        if !self.write || c.r == NONE {
            return None;
        }
        if is_tagged(c.r) {
            lists
                .reads(c.r)
                .iter()
                .copied()
                .find(|&r| self.conflicts(r))
        } else {
            self.conflicts(c.r).then_some(c.r)
        }
    }

    /// The state after this access of a whole granule in state `c` when nothing needs
    /// doing to know it: the last update had `c` as input, `c` is checked (or a race
    /// already found), and no read list is involved. The inner loop of range accesses.
    #[inline]
    pub fn repeat(&self, c: Cell) -> Option<Cell> {
        let (from, to) = self.memo?;
        let checked = self.found.is_some() || self.checked == Some(c);
        (from == c && checked && !is_tagged(c.r) && !is_tagged(to.r)).then_some(to)
    }

    /// Checks the bytes in state `c`, the first of which is at `at`, unless a race was
    /// already found in this access.
    #[inline]
    pub fn check(&mut self, c: Cell, lists: &ReadLists, at: Addr) {
        if self.found.is_some() || c == EMPTY || self.checked == Some(c) {
            return;
        }
        match self.earlier(c, lists) {
            Some(e) => self.found = Some((at, e)),
            None => self.checked = Some(c),
        }
    }

    /// The state after this access of a byte (or of all the bytes of a granule) in state
    /// `c`; the cell's reference to a read list passes to the result.
    #[inline]
    pub fn apply(&mut self, c: Cell, lists: &mut ReadLists) -> Cell {
        if let Some((from, to)) = self.memo {
            if from == c {
                lists.release(c.r);
                lists.share(to.r, 1);
                return to;
            }
        }
        let to = self.update(c, lists);
        self.memo = Some((c, to));
        to
    }

    fn update(&self, c: Cell, lists: &mut ReadLists) -> Cell {
        if self.write {
            lists.release(c.r);
            return Cell {
                w: self.me,
                r: NONE,
            };
        }
        if c.r == NONE && self.covered_by_own_write(c.w) {
            return c;
        }
        let (now, sites, me) = (self.now, self.sites, self.me);
        let r = if c.r == NONE || (!is_tagged(c.r) && Self::ordered(now, sites, c.r)) {
            me
        } else if !is_tagged(c.r) {
            let i = lists.alloc();
            lists.items[i as usize].reads.extend([c.r, me]);
            tagged(i)
        } else {
            // Reads ordered before this one are subsumed by it (the thread's own included).
            let i = clock_of(c.r) as usize;
            let target = if lists.items[i].refs == 1 {
                lists.items[i]
                    .reads
                    .retain(|&x| !Self::ordered(now, sites, x));
                i
            } else {
                let j = lists.alloc() as usize;
                let mut kept = std::mem::take(&mut lists.items[j].reads);
                kept.extend(
                    lists.items[i]
                        .reads
                        .iter()
                        .copied()
                        .filter(|&x| !Self::ordered(now, sites, x)),
                );
                lists.items[j].reads = kept;
                lists.release(c.r);
                j
            };
            if lists.items[target].reads.is_empty() {
                lists.release(tagged(target as u32));
                me
            } else {
                lists.items[target].reads.push(me);
                tagged(target as u32)
            }
        };
        Cell { w: c.w, r }
    }
}
