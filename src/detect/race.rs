//! Happens-before data race detection over one execution, in the style of FastTrack
//! (Flanagan & Freund, PLDI'09): every thread carries a vector clock; synchronisation objects
//! carry the clock of their last releases; every byte of memory remembers its last write as
//! an epoch and its reads as one epoch or, when they are concurrent, one epoch per thread.
//! Two accesses race when at least one writes, at least one is not atomic, and neither
//! happens before the other. The common cases (same epoch, ordered reads) cost O(1).
//!
//! The detector is fed by the executor (`run/`) and never touches a process.

use std::collections::{BTreeMap, HashMap, HashSet};

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

#[derive(Debug, Clone, Default)]
struct Shadow {
    write: Option<Seen>,
    reads: Vec<Seen>,
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

/// The detector of one execution.
#[derive(Clone, Debug, Default)]
pub struct RaceDetector {
    threads: Vec<VectorClock>,
    finished: HashMap<ThreadId, VectorClock>,
    sync: HashMap<SyncKey, VectorClock>,
    shadow: HashMap<Addr, Shadow>,
    heap: BTreeMap<Addr, HeapBlock>,
    races: Vec<Race>,
    reported: HashSet<(u64, u64)>,
    racy_addresses: HashSet<Addr>,
}

impl RaceDetector {
    /// A detector for an execution whose main thread is thread 0.
    pub fn new() -> RaceDetector {
        let mut d = RaceDetector::default();
        d.clock_mut(0).tick(0);
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
            shadow: HashMap::new(),
            heap: self.heap.clone(),
            races: self.races.clone(),
            reported: self.reported.clone(),
            racy_addresses: self.racy_addresses.clone(),
        }
    }

    fn clock_mut(&mut self, t: ThreadId) -> &mut VectorClock {
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
    pub fn access(&mut self, a: Access) -> Option<Race> {
        self.clock_mut(a.thread);
        let now = &self.threads[a.thread];
        let me = Seen {
            epoch: now.epoch(a.thread),
            pc: a.pc,
            write: a.write,
            atomic: a.atomic,
            size: a.size,
        };
        let mut found: Option<Race> = None;
        for addr in a.addr..a.addr.saturating_add(a.size.max(1)) {
            let sh = self.shadow.entry(addr).or_default();
            let conflicts = |other: &Seen| {
                other.epoch.thread != a.thread
                    && !(other.atomic && a.atomic)
                    && (other.write || a.write)
                    && !other.epoch.le(now)
            };
            if found.is_none() {
                let earlier = sh.write.filter(|w| conflicts(w)).or_else(|| {
                    a.write
                        .then(|| sh.reads.iter().find(|r| conflicts(r)).copied())
                        .flatten()
                });
                if let Some(earlier) = earlier {
                    found = Some(Race {
                        addr,
                        earlier,
                        later: me,
                    });
                }
            }
            if a.write {
                sh.write = Some(me);
                sh.reads.clear();
            } else {
                // Keep one read per thread; reads ordered before this one are subsumed.
                sh.reads
                    .retain(|r| r.epoch.thread != a.thread && !r.epoch.le(now));
                sh.reads.push(me);
            }
        }
        let race = found?;
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
        if size as usize > self.shadow.len() {
            self.shadow.retain(|&a, _| a < start || a >= start + size);
        } else {
            for a in start..start + size {
                self.shadow.remove(&a);
            }
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: Addr = 0x1000;
    const M: SyncKey = (1, 0x2000);

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
}
