//! Happens-before data race detection over one execution, in the style of FastTrack
//! (Flanagan & Freund, PLDI'09): every thread carries a vector clock; synchronisation objects
//! carry the clock of their last releases; every byte of memory remembers its last write as
//! an epoch and its reads as one epoch or, when they are concurrent, one epoch per thread
//! (`shadow` keeps that history per 4-byte granule, per byte only where the bytes
//! of a granule differ, per page where a range access covered it whole). Two accesses race
//! when at least one writes, at least one is not atomic, and neither happens before the
//! other. The common cases (same epoch, ordered reads) cost O(1) and allocate nothing.
//!
//! The detector is fed by the executor (`run/`) and never touches a process.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::cell::Ctx;
use super::hash::FastHash;
use super::shadow::ShadowMemory;
use super::sites::{slot, Site, SiteCache, Sites};
use super::vclock::{Epoch, VectorClock};
use crate::model::{Addr, ThreadId};

/// One memory access as the executor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The accessing thread.
    pub thread: ThreadId,
    /// First byte.
    pub addr: Addr,
    /// Bytes accessed.
    pub size: u64,
    /// It writes (a read-modify-write counts as a write).
    pub write: bool,
    /// It is atomic (LOCK-prefixed, XCHG, or a MOV to an atomic location).
    pub atomic: bool,
    /// The instruction (or call site, for modelled libc calls).
    pub pc: u64,
}

/// What a byte remembers of an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// When (thread and its clock).
    pub epoch: Epoch,
    /// Where.
    pub pc: u64,
    /// Whether it wrote.
    pub write: bool,
    /// Whether it was atomic.
    pub atomic: bool,
    /// Its size.
    pub size: u64,
}

/// A data race: the access just made and an earlier one it is not ordered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Race {
    /// The address where they overlap (first conflicting byte).
    pub addr: Addr,
    /// The earlier access.
    pub earlier: Seen,
    /// The later access.
    pub later: Seen,
}

/// A heap block as the allocator interception saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapBlock {
    /// First byte.
    pub start: Addr,
    /// Size in bytes.
    pub size: u64,
    /// The thread that allocated it.
    pub thread: ThreadId,
    /// The allocation's call site (return address of the allocator call).
    pub site: u64,
}

/// Keys of synchronisation clocks: a kind tag and an address (or a thread id).
pub type SyncKey = (u8, Addr);

/// The detector of one execution. Cloning it (a snapshot) costs O(pages of shadow memory):
/// the shadow pages and the interned sites are shared until a clone changes them.
#[derive(Clone, Debug, Default)]
pub struct RaceDetector {
    threads: Vec<VectorClock>,
    finished: HashMap<ThreadId, VectorClock>,
    sync: HashMap<SyncKey, VectorClock, FastHash>,
    shadow: ShadowMemory,
    sites: Arc<Sites>,
    /// Ids of recent sites (loops repeat a few).
    site_cache: SiteCache,
    heap: BTreeMap<Addr, HeapBlock>,
    races: Vec<Race>,
    reported: HashSet<(u64, u64)>,
    racy_addresses: HashSet<Addr>,
    /// The last access recorded, with its thread's epoch: the same access again in the
    /// same epoch (a loop reading one variable) changes nothing and finds nothing new.
    last: Option<LastAccess>,
}

/// An access as `RaceDetector::record` saw it: thread, address, size, pc, kind, epoch.
type LastAccess = (ThreadId, Addr, u64, u64, u8, u32);

impl RaceDetector {
    /// A detector for an execution whose main thread is thread 0.
    pub fn new() -> RaceDetector {
        RaceDetector::starting_with(0)
    }

    /// A detector for memory whose first thread is `t` (a process started by another: its
    /// accesses race only with its own threads').
    pub fn starting_with(t: ThreadId) -> RaceDetector {
        let mut d = RaceDetector::default();
        d.clock_mut(t).tick(t);
        d
    }

    /// A copy without the per-address access history, for a snapshot taken while only the
    /// main thread has existed: its accesses happen before everything any later thread
    /// does (thread creation orders them), so none of them can be half of a race and
    /// forgetting them changes no verdict. Copying a large history (a program that filled
    /// megabytes before its first thread) would otherwise dominate every restored execution.
    pub fn without_access_history(&self) -> RaceDetector {
        RaceDetector {
            threads: self.threads.clone(),
            finished: self.finished.clone(),
            sync: self.sync.clone(),
            shadow: ShadowMemory::default(),
            sites: Arc::clone(&self.sites),
            site_cache: self.site_cache.clone(),
            heap: self.heap.clone(),
            races: self.races.clone(),
            reported: self.reported.clone(),
            racy_addresses: self.racy_addresses.clone(),
            last: None,
        }
    }

    /// Thread `t`'s clock, to change: what a repeated access finds may change with it.
    fn clock_mut(&mut self, t: ThreadId) -> &mut VectorClock {
        self.last = None;
        if self.threads.len() <= t {
            self.threads.resize_with(t + 1, VectorClock::new);
        }
        &mut self.threads[t]
    }

    /// Thread `t`'s own clock component now (its epoch).
    pub fn epoch_of(&self, t: ThreadId) -> u32 {
        self.threads.get(t).map_or(0, |c| c.get(t))
    }

    fn clock(&self, t: ThreadId) -> VectorClock {
        self.threads.get(t).cloned().unwrap_or_default()
    }

    /// `parent` created `child`: everything the parent did so far happens before the child.
    pub fn thread_created(&mut self, parent: ThreadId, child: ThreadId) {
        let mut c = self.clock(parent);
        c.tick(child);
        *self.clock_mut(child) = c;
        self.clock_mut(parent).tick(parent);
    }

    /// `t` exited: its final clock is kept for joiners.
    pub fn thread_exited(&mut self, t: ThreadId) {
        let c = self.clock(t);
        self.finished.insert(t, c);
    }

    /// `joiner` joined `target`: everything the target did happens before what follows.
    pub fn thread_joined(&mut self, joiner: ThreadId, target: ThreadId) {
        if let Some(c) = self.finished.get(&target).cloned() {
            self.clock_mut(joiner).join(&c);
        }
    }

    /// `t` acquires the synchronisation object `key` (lock, wake, atomic load...).
    pub fn acquire(&mut self, t: ThreadId, key: SyncKey) {
        self.clock_mut(t);
        if let Some(c) = self.sync.get(&key) {
            self.threads[t].join(c);
        }
    }

    /// `t` releases `key` (unlock, post, wake, atomic store...): later acquirers see
    /// everything `t` did so far.
    pub fn release(&mut self, t: ThreadId, key: SyncKey) {
        self.clock_mut(t);
        self.sync.entry(key).or_default().join(&self.threads[t]);
        self.threads[t].tick(t);
    }

    /// Records a memory access; returns the race it makes with an earlier access when that
    /// pair of instructions has not been reported yet.
    #[inline]
    pub fn access(&mut self, a: Access) -> Option<Race> {
        // Passed on as scalars: a caller that wrote `a` to memory a byte per flag would
        // otherwise stall the wider load the compiler makes of the flags.
        let kind = u8::from(a.write) | u8::from(a.atomic) << 1;
        self.record(a.thread, a.addr, a.size, a.pc, kind)
    }

    #[inline(never)]
    fn record(&mut self, t: ThreadId, addr: Addr, size: u64, pc: u64, kind: u8) -> Option<Race> {
        if self.threads.len() <= t {
            self.clock_mut(t);
        }
        let clock = self.threads[t].get(t);
        let this = (t, addr, size, pc, kind, clock);
        if self.last == Some(this) {
            return None;
        }
        self.last = Some(this);
        let site = Site {
            thread: t,
            pc,
            size,
            write: kind & 1 != 0,
            atomic: kind & 2 != 0,
        };
        let id = self.site_cache.id(site, &mut self.sites);
        let me = slot(id, clock);
        let mut ctx = Ctx::new(me, &site, &self.threads[t], &self.sites);
        self.shadow.access(addr, size, &mut ctx);
        let (addr, earlier) = ctx.found?;
        let race = Race {
            addr,
            earlier: self.sites.seen(earlier),
            later: self.sites.seen(me),
        };
        self.racy_addresses.insert(race.addr);
        let key = (
            race.earlier.pc.min(race.later.pc),
            race.earlier.pc.max(race.later.pc),
        );
        if self.reported.insert(key) {
            self.races.push(race.clone());
            Some(race)
        } else {
            None
        }
    }

    /// A heap block was allocated.
    pub fn allocated(&mut self, block: HeapBlock) {
        self.forget(block.start, block.size);
        self.heap.insert(block.start, block);
    }

    /// The heap block at `start` was freed: its bytes forget their history. `size_hint`
    /// is used when the block was not seen allocated (allocated inside libc).
    pub fn freed(&mut self, start: Addr, size_hint: u64) -> Option<HeapBlock> {
        match self.heap.remove(&start) {
            Some(block) => {
                self.forget(block.start, block.size);
                Some(block)
            }
            None => {
                self.forget(start, size_hint);
                None
            }
        }
    }

    fn forget(&mut self, start: Addr, size: u64) {
        self.last = None;
        self.shadow.forget(start, size);
    }

    /// Whether a live heap block starts at `start` (seen allocated).
    pub fn knows_block(&self, start: Addr) -> bool {
        self.heap.contains_key(&start)
    }

    /// The live heap block containing `addr`.
    pub fn block_containing(&self, addr: Addr) -> Option<HeapBlock> {
        self.heap
            .range(..=addr)
            .next_back()
            .map(|(_, b)| *b)
            .filter(|b| addr < b.start + b.size.max(1))
    }

    /// The races found so far, each pair of instructions once.
    pub fn races(&self) -> &[Race] {
        &self.races
    }

    /// Addresses found racy in this execution.
    pub fn racy_addresses(&self) -> &HashSet<Addr> {
        &self.racy_addresses
    }

    /// Panics unless the shadow memory is consistent.
    #[cfg(test)]
    fn assert_consistent(&self) {
        self.shadow.assert_consistent();
    }

    /// Shadow pages allocated and the bytes of heap they hold (pages shared with clones
    /// counted in full), for benchmarks and memory bounds.
    pub fn shadow_footprint(&self) -> (usize, usize) {
        (self.shadow.pages(), self.shadow.heap_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: Addr = 0x1000;
    const M: SyncKey = (1, 0x2000);

    impl Access {
        fn with_addr(self, addr: Addr) -> Access {
            Access { addr, ..self }
        }
    }

    fn acc(thread: ThreadId, write: bool, pc: u64) -> Access {
        Access {
            thread,
            addr: X,
            size: 4,
            write,
            atomic: false,
            pc,
        }
    }

    #[test]
    fn unsynchronised_writes_race() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        assert!(d.access(acc(1, true, 10)).is_none());
        assert!(d.access(acc(2, true, 20)).is_some());
        assert_eq!(d.races().len(), 1);
        assert_eq!(d.races()[0].earlier.pc, 10);
        assert_eq!(d.races()[0].later.epoch.thread, 2);
    }

    #[test]
    fn a_repeated_access_is_skipped_without_hiding_a_race() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        assert!(d.access(acc(1, true, 10)).is_none());
        // Thread 2 spins reading X: the first read races, the repeats change nothing.
        assert!(d.access(acc(2, false, 20)).is_some());
        for _ in 0..3 {
            assert!(d.access(acc(2, false, 20)).is_none());
        }
        assert_eq!(d.races().len(), 1);
        // Thread 1 writes again: that races with the read; the read repeated after it
        // is checked again (the pair is known by now, so nothing new is reported).
        assert!(d.access(acc(1, true, 11)).is_some());
        assert!(d.access(acc(2, false, 20)).is_none());
        assert_eq!(d.races().len(), 2);
        // After an acquire, a repeated access is checked again.
        d.acquire(2, M);
        assert_eq!(d.last, None);
        // A freed and reallocated block forgets, and its first access is checked again.
        d.freed(X, 4);
        assert!(d.access(acc(1, true, 12)).is_none());
    }

    #[test]
    fn a_mutex_orders_the_accesses() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        d.acquire(1, M);
        d.access(acc(1, true, 10));
        d.release(1, M);
        d.acquire(2, M);
        assert!(d.access(acc(2, true, 20)).is_none());
        assert!(d.access(acc(2, false, 21)).is_none());
        assert!(d.races().is_empty());
    }

    #[test]
    fn dropping_the_single_threaded_history_changes_no_verdict() {
        // Main writes before any thread exists; a snapshot then forgets that history.
        let mut full = RaceDetector::new();
        full.access(acc(0, true, 1));
        let mut forgot = full.without_access_history();
        for d in [&mut full, &mut forgot] {
            d.thread_created(0, 1);
            d.thread_created(0, 2);
            // Reading main's early write races with nothing.
            assert!(d.access(acc(1, false, 10)).is_none());
            // Two later unsynchronised writes still race.
            assert!(d.access(acc(1, true, 11)).is_none());
            assert!(d.access(acc(2, true, 20)).is_some());
        }
        assert_eq!(full.races().len(), forgot.races().len());
    }

    #[test]
    fn create_and_join_order_the_accesses() {
        let mut d = RaceDetector::new();
        d.access(acc(0, true, 1));
        d.thread_created(0, 1);
        assert!(d.access(acc(1, false, 2)).is_none());
        assert!(d.access(acc(1, true, 3)).is_none());
        d.thread_exited(1);
        d.thread_joined(0, 1);
        assert!(d.access(acc(0, false, 4)).is_none());
    }

    #[test]
    fn concurrent_reads_do_not_race_but_a_later_write_races_with_both() {
        let mut d = RaceDetector::new();
        d.access(acc(0, true, 1));
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        assert!(d.access(acc(1, false, 10)).is_none());
        assert!(d.access(acc(2, false, 20)).is_none());
        assert!(
            d.access(acc(0, true, 30)).is_some(),
            "main writes while the readers may still read"
        );
    }

    #[test]
    fn atomics_never_race_with_each_other_but_plain_accesses_do() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        let atomic = |t, pc| Access {
            atomic: true,
            ..acc(t, true, pc)
        };
        assert!(d.access(atomic(1, 10)).is_none());
        assert!(d.access(atomic(2, 20)).is_none());
        assert!(d.access(acc(1, false, 30)).is_some() || d.access(acc(2, true, 40)).is_some());
    }

    #[test]
    fn freeing_forgets_history_so_reuse_does_not_race() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        let block = HeapBlock {
            start: X,
            size: 16,
            thread: 1,
            site: 5,
        };
        d.allocated(block);
        d.access(acc(1, true, 10));
        assert_eq!(d.freed(X, 0), Some(block));
        d.allocated(HeapBlock { thread: 2, ..block });
        assert!(d.access(acc(2, true, 20)).is_none());
        assert_eq!(d.block_containing(X + 3).map(|b| b.thread), Some(2));
        assert_eq!(d.block_containing(X + 16), None);
    }

    #[test]
    fn disjoint_bytes_of_one_word_do_not_race() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        let byte = |t, addr, pc| Access {
            thread: t,
            addr,
            size: 1,
            write: true,
            atomic: false,
            pc,
        };
        assert!(d.access(byte(1, X, 1)).is_none());
        assert!(d.access(byte(2, X + 1, 2)).is_none());
    }

    #[test]
    fn each_pair_of_instructions_is_reported_once() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        for _ in 0..3 {
            d.access(acc(1, true, 10));
            d.access(acc(2, true, 20));
        }
        assert_eq!(d.races().len(), 1);
    }

    fn range(thread: ThreadId, addr: Addr, size: u64, write: bool, pc: u64) -> Access {
        Access {
            thread,
            addr,
            size,
            write,
            atomic: false,
            pc,
        }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_range_access_races_with_a_later_small_access_in_its_middle() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        let base = 0x7f00_0000_0000;
        assert!(d.access(range(1, base, MIB, true, 100)).is_none());
        let middle = base + MIB / 2 + 3;
        let race = d.access(acc(2, false, 200).with_addr(middle)).unwrap();
        assert_eq!(race.addr, middle);
        assert_eq!(race.earlier.pc, 100);
        assert_eq!(race.earlier.size, MIB);
        assert!(race.earlier.write && !race.later.write);
        assert_eq!(
            race.earlier.epoch,
            Epoch {
                thread: 1,
                clock: 1
            }
        );
        assert_eq!(race.later.size, 4);
        // The thread's own later small accesses inside its range never race with it.
        assert!(d.access(acc(1, false, 101).with_addr(base + 8)).is_none());
        assert!(d.access(acc(1, true, 102).with_addr(base + 12)).is_none());
    }

    #[test]
    fn a_second_thread_writing_64_mib_unsynchronised_races() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        let base = 0x10_0000_0000;
        for i in 0..4 {
            assert!(d
                .access(range(1, base + i * 16 * MIB, 16 * MIB, true, 1))
                .is_none());
        }
        let race = d.access(range(2, base, 16 * MIB, true, 2)).unwrap();
        assert_eq!((race.addr, race.earlier.pc, race.later.pc), (base, 1, 2));
        // A covering range costs its pages, not their granules: 64 MiB is 16384 page headers.
        let (pages, bytes) = d.shadow_footprint();
        assert_eq!(pages, 16384);
        assert!(bytes < 16384 * 512, "{bytes} bytes of shadow for 64 MiB");
    }

    #[test]
    fn freeing_a_range_then_reusing_it_does_not_race() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        // Unaligned at both ends: pages covered whole, pages in part, granules in part.
        let block = HeapBlock {
            start: 0x50_0003,
            size: 3 * 4096 + 10,
            thread: 1,
            site: 5,
        };
        d.allocated(block);
        assert!(d
            .access(range(1, block.start, block.size, true, 10))
            .is_none());
        // Its neighbours, written by thread 1 too, keep their history.
        assert!(d.access(range(1, block.start - 3, 3, true, 11)).is_none());
        assert!(d
            .access(range(1, block.start + block.size, 6, true, 12))
            .is_none());
        assert_eq!(d.freed(block.start, 0), Some(block));
        d.allocated(HeapBlock { thread: 2, ..block });
        assert!(d
            .access(range(2, block.start, block.size, true, 20))
            .is_none());
        assert!(d
            .access(range(2, block.start + 4096, 1, false, 21))
            .is_none());
        assert!(d.access(range(2, block.start - 1, 1, true, 22)).is_some());
        assert!(d
            .access(range(2, block.start + block.size + 5, 1, true, 23))
            .is_some());
    }

    #[test]
    fn concurrent_reads_are_both_kept_and_a_write_races_with_each() {
        let mut d = RaceDetector::new();
        d.access(acc(0, true, 1));
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        d.thread_created(0, 3);
        assert!(d.access(acc(1, false, 10)).is_none());
        assert!(d.access(acc(2, false, 20)).is_none());
        // Thread 1's read is ordered before thread 3's write in one copy, not in the other.
        let mut ordered = d.clone();
        let race = d.access(acc(3, true, 30)).unwrap();
        assert_eq!(
            race.earlier.pc, 10,
            "the oldest concurrent read is reported"
        );
        ordered.release(1, M);
        ordered.acquire(3, M);
        let race = ordered.access(acc(3, true, 30)).unwrap();
        assert_eq!(race.earlier.pc, 20, "the other read was kept too");
        assert_eq!(race.earlier.epoch.thread, 2);
    }

    #[test]
    fn a_clone_changes_independently_of_its_original() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        d.access(acc(1, true, 10));
        d.access(range(1, 0x9000, 8192, false, 11));
        let mut c = d.clone();
        // The clone: a race, a forgotten range, a new site, a whole-page write.
        assert!(c.access(acc(2, true, 20)).is_some());
        c.allocated(HeapBlock {
            start: 0x9000,
            size: 8192,
            thread: 2,
            site: 1,
        });
        assert!(c.access(range(2, 0x9000, 4096, true, 21)).is_none());
        c.release(2, M);
        // The original saw none of it.
        assert!(d.races().is_empty() && d.racy_addresses().is_empty());
        assert_eq!(d.block_containing(0x9000), None);
        let race = d.access(range(2, 0x9000, 4, true, 30)).unwrap();
        assert_eq!(
            race.earlier.pc, 11,
            "the original still remembers the range read"
        );
        d.acquire(2, M);
        assert!(
            d.access(acc(2, true, 31)).is_some(),
            "the clone's release is not the original's"
        );
        // And the clone keeps its own history.
        assert!(c.access(range(1, 0x9000 + 8, 4, false, 12)).is_some());
        assert_eq!(c.races().len(), 2);
        assert_eq!(d.races().len(), 2);
    }

    #[test]
    fn atomic_and_plain_accesses_race_unless_ordered() {
        let atomic = |t, write, pc| Access {
            atomic: true,
            ..acc(t, write, pc)
        };
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        // Atomic write, plain read: a race, either way round.
        assert!(d.access(atomic(1, true, 10)).is_none());
        let race = d.access(acc(2, false, 20)).unwrap();
        assert!(race.earlier.atomic && !race.later.atomic);
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        assert!(d.access(acc(1, true, 10)).is_none());
        let race = d.access(atomic(2, false, 20)).unwrap();
        assert!(!race.earlier.atomic && race.later.atomic && !race.later.write);
        // Atomic reads and writes of the same location never race with each other.
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        assert!(d.access(atomic(1, true, 10)).is_none());
        assert!(d.access(atomic(2, false, 20)).is_none());
        assert!(d.access(atomic(2, true, 21)).is_none());
        assert!(d.access(atomic(1, false, 11)).is_none());
        // A plain write racing with an atomic read, and an atomic write ordered by a lock.
        assert!(d.access(acc(1, true, 12)).is_some());
        d.release(1, M);
        d.acquire(2, M);
        assert!(d.access(atomic(2, true, 22)).is_none());
    }

    #[test]
    fn a_read_of_new_bytes_does_not_inherit_the_write_of_its_neighbours() {
        // Thread 1 writes and reads bytes 0..4 of a granule, then reads 2..6 with the same
        // instruction: bytes 4 and 5 have its read but no write.
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        assert!(d.access(range(1, X, 4, true, 10)).is_none());
        assert!(d.access(range(1, X, 4, false, 11)).is_none());
        assert!(d.access(range(1, X + 2, 4, false, 11)).is_none());
        let race = d.access(range(2, X + 4, 1, true, 20)).unwrap();
        assert_eq!((race.addr, race.earlier.pc), (X + 4, 11));
        let race = d.access(range(2, X, 1, true, 21)).unwrap();
        assert_eq!((race.addr, race.earlier.pc), (X, 10));
    }

    #[test]
    fn a_repeated_read_rechecks_every_word_it_covers() {
        // Thread 2 writes two words, releasing a lock between them. Thread 1 reads both
        // (one 8-byte read): the race with the first write is reported. It then acquires
        // the lock, which orders the first write but not the second, without starting a
        // new epoch, and reads the same way again: now the second write races.
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        assert!(d.access(range(2, X, 4, true, 20)).is_none());
        d.release(2, M);
        assert!(d.access(range(2, X + 4, 4, true, 21)).is_none());
        let race = d.access(range(1, X, 8, false, 10)).unwrap();
        assert_eq!((race.addr, race.earlier.pc), (X, 20));
        d.acquire(1, M);
        let race = d.access(range(1, X, 8, false, 10)).unwrap();
        assert_eq!((race.addr, race.earlier.pc), (X + 4, 21));
    }

    mod naive {
        use crate::detect::race::{Access, HeapBlock, Race, Seen, SyncKey};
        use crate::detect::vclock::VectorClock;
        use crate::model::{Addr, ThreadId};
        use std::collections::{BTreeMap, HashMap, HashSet};

        include!("naive_model.rs");
    }

    /// Where random accesses go: a 64-byte hot spot across a page boundary inside a
    /// 4-page area that range accesses cover in part or whole.
    const HOT: Addr = 0x4_0000 - 24;
    const AREA: Addr = 0x4_0000 - 5000;
    const AREA_BYTES: u64 = 4 * 4096 + 300;

    /// How one random history draws its operations (varied per seed, so that rare
    /// combinations, such as one site reading overlapping bytes in one epoch, come up).
    struct Profile {
        /// Bytes of the hot spot used.
        hot: u64,
        /// Sizes of small accesses.
        sizes: &'static [u64],
        /// Distinct pcs per thread.
        pcs: u64,
        /// Percent of operations that are releases (each one starts a new epoch).
        releases: u32,
        /// Percent of accesses that are ranges over the area.
        ranges: u32,
        /// Probability that an access repeats the thread's last one, nearby.
        repeat: f64,
        /// Probability of changing threads before an operation.
        switch: f64,
    }

    impl Profile {
        fn random(rng: &mut impl rand::Rng) -> Profile {
            const SIZES: [&[u64]; 4] = [&[1, 2, 4, 8], &[4], &[1, 8], &[2, 4, 8, 16]];
            Profile {
                hot: [16, 24, 64][rng.random_range(0..3)],
                sizes: SIZES[rng.random_range(0..SIZES.len())],
                pcs: rng.random_range(1..=6),
                releases: rng.random_range(1..=10),
                ranges: rng.random_range(0..=12),
                repeat: [0.0, 0.3, 0.7][rng.random_range(0..3)],
                switch: [1.0, 0.5, 0.2][rng.random_range(0..3)],
            }
        }
    }

    fn random_span(rng: &mut impl rand::Rng, p: &Profile) -> (Addr, u64) {
        let at = HOT + 32 - p.hot / 2 + rng.random_range(0..p.hot);
        match rng.random_range(0..100) {
            x if x >= p.ranges => {
                if rng.random_bool(0.8) {
                    (at, p.sizes[rng.random_range(0..p.sizes.len())])
                } else {
                    (at, rng.random_range(0..=40))
                }
            }
            x if x >= p.ranges / 2 => {
                let addr = AREA + rng.random_range(0..AREA_BYTES);
                (addr, rng.random_range(1..=600))
            }
            x if x >= p.ranges / 4 => {
                let addr = AREA + rng.random_range(0..AREA_BYTES);
                (addr, rng.random_range(1..=AREA + AREA_BYTES - addr))
            }
            _ => {
                // Whole pages, and sometimes one of the area's bytes around them.
                let first = (AREA >> 12) + 1 + rng.random_range(0..3);
                let pages = rng.random_range(1..=(AREA + AREA_BYTES) / 4096 - first);
                let slack = rng.random_range(0..2);
                ((first << 12) - slack, (pages << 12) + slack)
            }
        }
    }

    /// One random history applied to the detector and the per-byte model side by side,
    /// with snapshots (clones) taken and restored on the way.
    fn differential_run(seed: u64, steps: usize) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let p = Profile::random(&mut rng);
        let mut d = RaceDetector::new();
        let mut n = naive::NaiveDetector::new();
        let threads = rng.random_range(2..=4);
        let mut alive: Vec<ThreadId> = vec![0];
        for t in 1..threads {
            d.thread_created(0, t);
            n.thread_created(0, t);
            alive.push(t);
        }
        let mut saved = Vec::new();
        let mut blocks: Vec<Addr> = Vec::new();
        let mut last: Option<Access> = None;
        let mut t = 0;
        for step in 0..steps {
            if !alive.contains(&t) || rng.random_bool(p.switch) {
                t = alive[rng.random_range(0..alive.len())];
            }
            let key = (1, rng.random_range(0..2));
            let at = || format!("seed {seed}, step {step}");
            // 0..30: the rarer operations; 30 + releases..100: accesses.
            let op = rng.random_range(0..100);
            match op {
                _ if op >= 30 + p.releases => {
                    let a = match last {
                        // Loops: the thread's last access again, nearby or flipped in kind.
                        Some(l) if l.thread == t && rng.random_bool(p.repeat) => {
                            let shift = rng.random_range(-4i64..=4);
                            let write = l.write ^ rng.random_bool(0.2);
                            Access {
                                addr: l.addr.wrapping_add_signed(shift),
                                write,
                                pc: l.pc % 100 + 100 * u64::from(write),
                                ..l
                            }
                        }
                        _ => {
                            let (addr, size) = random_span(&mut rng, &p);
                            let write = rng.random_bool(0.5);
                            Access {
                                thread: t,
                                addr,
                                size,
                                write,
                                atomic: rng.random_bool(0.2),
                                pc: rng.random_range(1..=p.pcs)
                                    + 10 * t as u64
                                    + 100 * u64::from(write),
                            }
                        }
                    };
                    last = Some(a);
                    assert_eq!(d.access(a), n.access(a), "{}: {a:?}", at());
                }
                30.. => {
                    d.release(t, key);
                    n.release(t, key);
                }
                20..30 => {
                    d.acquire(t, key);
                    n.acquire(t, key);
                }
                16..20 => {
                    let (start, size) = random_span(&mut rng, &p);
                    let block = HeapBlock {
                        start,
                        size,
                        thread: t,
                        site: 7,
                    };
                    d.allocated(block);
                    n.allocated(block);
                    blocks.push(start);
                }
                13..16 => {
                    let start = match blocks.pop() {
                        Some(b) if rng.random_bool(0.7) => b,
                        _ => random_span(&mut rng, &p).0,
                    };
                    let hint = rng.random_range(0..100);
                    assert_eq!(d.freed(start, hint), n.freed(start, hint), "{}", at());
                }
                10..13 => saved.push((d.clone(), n.clone())),
                8..10 => {
                    if let Some((sd, sn)) = saved.pop() {
                        (d, n) = (sd, sn);
                    }
                }
                7 if alive.len() > 1 && t != 0 => {
                    d.thread_exited(t);
                    n.thread_exited(t);
                    d.thread_joined(0, t);
                    n.thread_joined(0, t);
                    alive.retain(|&x| x != t);
                }
                _ => {
                    if rng.random_bool(0.1) {
                        d = d.without_access_history();
                        n = n.without_access_history();
                    }
                }
            }
            d.assert_consistent();
        }
        assert_eq!(d.races(), n.races(), "seed {seed}");
        assert_eq!(d.racy_addresses(), n.racy_addresses(), "seed {seed}");
        for a in (HOT..HOT + 64).step_by(7) {
            assert_eq!(d.block_containing(a), n.block_containing(a), "seed {seed}");
        }
        for (sd, sn) in saved {
            assert_eq!(sd.races(), sn.races(), "seed {seed}: a snapshot");
        }
    }

    #[test]
    fn agrees_with_the_per_byte_model_at_the_ends_of_the_address_space() {
        let mut d = RaceDetector::new();
        let mut n = naive::NaiveDetector::new();
        for t in 1..3 {
            d.thread_created(0, t);
            n.thread_created(0, t);
        }
        for (i, (addr, size)) in [
            (u64::MAX, 1),
            (u64::MAX - 1, 4),
            (u64::MAX - 4096, 5000),
            (0, 0),
            (0, 4097),
        ]
        .into_iter()
        .enumerate()
        {
            for t in 1..3 {
                let a = range(t, addr, size, true, 10 * t as u64 + i as u64);
                assert_eq!(d.access(a), n.access(a), "{a:?}");
            }
        }
        assert_eq!(d.racy_addresses(), n.racy_addresses());
        d.freed(u64::MAX - 4096, 4096);
        n.freed(u64::MAX - 4096, 4096);
        let a = range(1, u64::MAX - 4096, 4096, true, 99);
        assert_eq!(d.access(a), n.access(a));
        d.assert_consistent();
    }

    #[test]
    fn pages_that_share_a_cache_entry_keep_their_own_history() {
        use rand::{Rng, SeedableRng};
        // Pages 64 apart share an entry of the shadow's recent-page cache; whole-page
        // frees remove pages (moving the last page into the hole) and reallocations bring
        // them back at other indices. No stale entry may lead an access to another page's
        // history: the detector agrees with the per-byte model throughout.
        let pages: Vec<Addr> = (0..5).map(|k| 0x7000_0000 + k * 64 * 4096).collect();
        for seed in 0..200 {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let mut d = RaceDetector::new();
            let mut n = naive::NaiveDetector::new();
            for t in 1..3 {
                d.thread_created(0, t);
                n.thread_created(0, t);
            }
            for step in 0..300 {
                let page = pages[rng.random_range(0..pages.len())];
                let t = rng.random_range(1..3);
                match rng.random_range(0..10) {
                    0 => {
                        assert_eq!(d.freed(page, 4096), n.freed(page, 4096));
                    }
                    1 => {
                        d.release(t, M);
                        n.release(t, M);
                    }
                    2 => {
                        d.acquire(t, M);
                        n.acquire(t, M);
                    }
                    _ => {
                        let write = rng.random_bool(0.5);
                        let a = Access {
                            thread: t,
                            addr: page + 8 * rng.random_range(0..4),
                            size: 8,
                            write,
                            atomic: false,
                            pc: 10 * t as u64 + u64::from(write),
                        };
                        assert_eq!(d.access(a), n.access(a), "seed {seed}, step {step}");
                    }
                }
                d.assert_consistent();
            }
            assert_eq!(d.races(), n.races(), "seed {seed}");
        }
    }

    /// Seeds of random histories: 3,000 (300 in a debug build), in two tests that the
    /// harness runs side by side.
    fn random_history_seeds(half: u64) -> std::ops::Range<u64> {
        let runs = if cfg!(debug_assertions) { 300 } else { 3000 };
        half * runs / 2..(half + 1) * runs / 2
    }

    #[test]
    fn agrees_with_the_per_byte_model_on_random_histories() {
        for seed in random_history_seeds(0) {
            differential_run(seed, 120);
        }
    }

    #[test]
    fn agrees_with_the_per_byte_model_on_more_random_histories() {
        for seed in random_history_seeds(1) {
            differential_run(seed, 120);
        }
    }
}
