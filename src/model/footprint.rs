//! Footprints: which objects a step may read or change, for the dependency relation of
//! partial-order reduction. Two steps of different threads are dependent when their
//! footprints touch a common object and at least one of them may change it, or when one of
//! them is global (dependent with everything).
//!
//! Memory (atomics, futex words, racy addresses) is byte-exact: a memory touch names an
//! aligned 8-byte *cell* and the bytes of it the access covers ([`Touch::bytes`]); an access
//! spanning cells (a 16-byte compare-and-swap, a misaligned word) touches each. Two memory
//! touches are dependent only when their bytes overlap and one writes, so that a futex wait
//! and an atomic compare-and-swap on its word, or overlapping atomics of different sizes,
//! are dependent, while two 4-byte counters side by side in one 8-byte word are not.

use super::ops::{Attempt, ObjectKind, ObjectRef, Op};
use super::{Addr, ThreadId};

/// The size in bytes of a memory cell: memory touches are keyed by their aligned cell.
pub const CELL: u64 = 8;

/// Every byte of an object (what a touch of a non-memory object, or of a whole cell, covers).
pub const ALL_BYTES: u8 = 0xff;

/// Most bytes [`Footprint::touch_range`] keeps exact; a longer range is dependent with
/// everything (footprints hold steps' atomics and scheduling-point accesses, never this big).
const MAX_EXACT_RANGE: u64 = 1 << 16;

/// One object a step touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Touch {
    /// The object (for memory, kind [`ObjectKind::Memory`] and the aligned cell's address).
    pub object: ObjectRef,
    /// For memory, the bytes of the cell covered (bit i: byte `addr + i`); [`ALL_BYTES`]
    /// for every other object.
    pub bytes: u8,
    /// The step may change it.
    pub write: bool,
    /// How the step's operation needs the object.
    pub role: Role,
}

impl Touch {
    /// Whether this touch and `other` name common bytes of one object.
    pub fn overlaps(&self, other: &Touch) -> bool {
        self.object == other.object && self.bytes & other.bytes != 0
    }

    /// Whether a step with this touch and one with `other` are dependent through it.
    pub fn conflicts(&self, other: &Touch) -> bool {
        self.overlaps(other) && (self.write || other.write)
    }

    /// The byte-exact keys of what the touch covers, for per-object indexes (histories of
    /// accesses): one per byte for memory, the object itself otherwise. Two touches are
    /// [`Touch::overlaps`] exactly when they have a key in common.
    pub fn keys(&self) -> impl Iterator<Item = ObjectRef> + '_ {
        let memory = self.object.kind == ObjectKind::Memory;
        let (n, object) = (if memory { CELL } else { 1 }, self.object);
        (0..n)
            .filter(move |&i| !memory || self.bytes & (1 << i) != 0)
            .map(move |i| ObjectRef {
                kind: object.kind,
                addr: object.addr + i,
            })
    }
}

/// How an operation needs an object, for *co-enabledness*: an operation that waits until
/// the object is free ([`Role::Acquire`]: a blocking lock, a join of a running thread) is
/// never enabled while another thread could [`Role::Release`] it (an unlock, a thread's
/// exit), so the two can never be reordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// No such constraint.
    Plain,
    /// Enabled only while no other thread holds the object.
    Acquire,
    /// Performed only by the thread holding the object.
    Release,
}

/// What a step may read or change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The objects touched (each object at most once, except a memory cell: at most once
    /// read and once written, each with the union of its bytes; a write subsumes a read of
    /// the same bytes).
    pub touches: Vec<Touch>,
    /// Dependent with every step of every thread (the end of the process, virtual time,
    /// an operation on an unknown object).
    pub global: bool,
}

impl Footprint {
    /// The footprint dependent with everything.
    pub fn everything() -> Footprint {
        Footprint {
            touches: Vec::new(),
            global: true,
        }
    }

    /// Whether the step touches nothing (it is dependent only with its own thread's steps).
    pub fn is_empty(&self) -> bool {
        self.touches.is_empty() && !self.global
    }

    /// Adds an object; a write replaces a read of the same object.
    pub fn touch(&mut self, kind: ObjectKind, addr: Addr, write: bool) {
        self.touch_as(kind, addr, write, Role::Plain);
    }

    /// Adds an object the operation needs in `role`.
    pub fn touch_as(&mut self, kind: ObjectKind, addr: Addr, write: bool, role: Role) {
        if kind == ObjectKind::Memory {
            self.touch_bytes(addr & !(CELL - 1), ALL_BYTES, write);
            return;
        }
        let object = ObjectRef { kind, addr };
        match self.touches.iter_mut().find(|t| t.object == object) {
            Some(t) => {
                t.write |= write;
                if t.role == Role::Plain {
                    t.role = role;
                }
            }
            None => self.touches.push(Touch {
                object,
                bytes: ALL_BYTES,
                write,
                role,
            }),
        }
    }

    /// Adds bytes `bytes` of the memory cell at `cell` (aligned): to the cell's write touch
    /// when writing, else to its read touch unless its write touch covers them.
    fn touch_bytes(&mut self, cell: Addr, bytes: u8, write: bool) {
        let object = ObjectRef {
            kind: ObjectKind::Memory,
            addr: cell,
        };
        let mut bytes = bytes;
        if !write {
            if let Some(w) = self.touches.iter().find(|t| t.object == object && t.write) {
                bytes &= !w.bytes;
            }
            if bytes == 0 {
                return;
            }
        }
        match (self.touches.iter_mut()).find(|t| t.object == object && t.write == write) {
            Some(t) => t.bytes |= bytes,
            None => self.touches.push(Touch {
                object,
                bytes,
                write,
                role: Role::Plain,
            }),
        }
    }

    /// Adds the `size` bytes of memory from `addr` (an access of that size there): each
    /// cell it covers, with those of its bytes. Size 0 (not known) or a range too long to
    /// keep exact makes the footprint global.
    pub fn touch_range(&mut self, addr: Addr, size: u64, write: bool) {
        if size == 0 || size > MAX_EXACT_RANGE {
            self.global = true;
            return;
        }
        let end = addr.saturating_add(size);
        let mut cell = addr & !(CELL - 1);
        while cell < end {
            let from = addr.max(cell) - cell;
            let to = end.min(cell + CELL) - cell;
            let bytes = ((1u16 << to) - (1u16 << from)) as u8;
            self.touch_bytes(cell, bytes, write);
            cell += CELL;
        }
    }

    /// Adds the whole aligned 8-byte word containing `addr` (an access whose size is not
    /// known).
    pub fn touch_word(&mut self, addr: Addr, write: bool) {
        self.touch_bytes(addr & !(CELL - 1), ALL_BYTES, write);
    }

    /// Adds the exit of thread `t` (which a blocking join of it waits for).
    pub fn touch_exit(&mut self, t: ThreadId) {
        self.touch_as(ObjectKind::Thread, t as Addr, true, Role::Release);
    }

    /// Adds everything in `other`, keeping the roles.
    pub fn extend(&mut self, other: &Footprint) {
        self.global |= other.global;
        for t in &other.touches {
            self.add(t, t.role);
        }
    }

    /// Adds everything in `other` as plain accesses (what a step did after its operation
    /// says nothing about when the step could start).
    pub fn extend_plain(&mut self, other: &Footprint) {
        self.global |= other.global;
        for t in &other.touches {
            self.add(t, Role::Plain);
        }
    }

    /// Adds touch `t` in `role`.
    fn add(&mut self, t: &Touch, role: Role) {
        match t.object.kind {
            ObjectKind::Memory => self.touch_bytes(t.object.addr, t.bytes, t.write),
            kind => self.touch_as(kind, t.object.addr, t.write, role),
        }
    }

    /// Whether two steps of different threads can never be enabled together: one waits for
    /// an object the other holds and releases.
    pub fn excludes(&self, other: &Footprint) -> bool {
        self.touches.iter().any(|a| {
            other.touches.iter().any(|b| {
                a.overlaps(b)
                    && matches!(
                        (a.role, b.role),
                        (Role::Acquire, Role::Release) | (Role::Release, Role::Acquire)
                    )
            })
        })
    }

    /// [`Footprint::excludes`] through an object of kind `kind` only.
    pub fn excludes_on(&self, other: &Footprint, kind: ObjectKind) -> bool {
        self.touches.iter().any(|a| {
            other.touches.iter().any(|b| {
                a.overlaps(b)
                    && a.object.kind == kind
                    && matches!(
                        (a.role, b.role),
                        (Role::Acquire, Role::Release) | (Role::Release, Role::Acquire)
                    )
            })
        })
    }

    /// Whether a step with this footprint and one with `other`, made by different threads,
    /// are dependent.
    pub fn conflicts(&self, other: &Footprint) -> bool {
        if self.global || other.global {
            return true;
        }
        self.touches
            .iter()
            .any(|a| other.touches.iter().any(|b| a.conflicts(b)))
    }
}

/// The size of a futex word.
const FUTEX_WORD: u64 = 4;

impl Op {
    /// What performing this operation may read or change. Thread-local steps (start,
    /// continue, yield) touch nothing; anything with a deadline touches virtual time, because
    /// a timeout fires only once every other thread is blocked.
    pub fn footprint(&self) -> Footprint {
        use ObjectKind as K;
        let mut f = Footprint::default();
        match *self {
            Op::Start | Op::Continue | Op::Yield => {}
            // Ending the process ends every other thread's next step: dependent with all.
            Op::ExitGroup => f.global = true,
            Op::Sleep { .. } => f.touch(K::Time, 0, true),
            Op::Atomic { addr, size } => {
                if addr == 0 {
                    // The address could not be computed: assume the worst.
                    f.global = true;
                } else {
                    f.touch_range(addr, size.into(), true);
                }
            }
            Op::MemoryAccess { addr, size, write } => f.touch_range(addr, size.into(), write),
            // A futex word is 4 bytes: what overlaps it (the lock word's atomics, of any
            // size) depends on its waits and wakes.
            Op::FutexWait { addr, timeout, .. } => {
                f.touch_range(addr, FUTEX_WORD, true);
                if timeout.is_some() {
                    f.touch(K::Time, 0, true);
                }
            }
            Op::FutexWake { addr, .. } | Op::FutexResume { addr } => {
                f.touch_range(addr, FUTEX_WORD, true)
            }
            Op::FutexRequeue { addr, to, .. } => {
                f.touch_range(addr, FUTEX_WORD, true);
                f.touch_range(to, FUTEX_WORD, true);
            }
            Op::MutexLock {
                m,
                attempt: Attempt::Block,
                ..
            } => f.touch_as(K::Mutex, m, true, Role::Acquire),
            Op::SpinLock {
                s,
                attempt: Attempt::Block,
            } => f.touch_as(K::Spin, s, true, Role::Acquire),
            Op::RwWrite {
                l,
                attempt: Attempt::Block,
            } => f.touch_as(K::RwLock, l, true, Role::Acquire),
            Op::MutexUnlock { m } => f.touch_as(K::Mutex, m, true, Role::Release),
            Op::SpinUnlock { s } => f.touch_as(K::Spin, s, true, Role::Release),
            Op::RwUnlock { l } => f.touch_as(K::RwLock, l, true, Role::Release),
            Op::CondWait { c, m, timeout } => {
                f.touch(K::Cond, c, true);
                f.touch_as(K::Mutex, m, true, Role::Release);
                if timeout.is_some() {
                    f.touch(K::Time, 0, true);
                }
            }
            Op::CondResume { c, m, .. } => {
                f.touch(K::Cond, c, true);
                f.touch_as(K::Mutex, m, true, Role::Acquire);
            }
            // Readers do not exclude each other: two read locks commute.
            Op::RwRead { l, .. } => f.touch(K::RwLock, l, false),
            Op::SemGetValue { s, .. } => f.touch(K::Semaphore, s, false),
            Op::BarrierResume { b, .. } => f.touch(K::Barrier, b, false),
            Op::Join {
                target: Some(u),
                attempt: Attempt::Block,
            } => f.touch_as(K::Thread, u as Addr, true, Role::Acquire),
            Op::Join {
                target: Some(u), ..
            }
            | Op::Detach { target: Some(u) } => f.touch(K::Thread, u as Addr, true),
            Op::Join { target: None, .. } | Op::Detach { target: None } => f.global = true,
            Op::Kernel { timeout, .. } => {
                f.touch(K::Kernel, 0, true);
                if timeout.is_some() {
                    f.touch(K::Time, 0, true);
                }
            }
            // Every other operation acts on one object and may change it (a trylock too:
            // it takes the lock when it is free).
            _ => match self.object() {
                Some(o) => f.touch(o.kind, o.addr, true),
                None => f.global = true,
            },
        }
        if let Some(Attempt::Timed(_)) = self.attempt() {
            f.touch(K::Time, 0, true);
        }
        f
    }

    /// The attempt flavour of a possibly blocking acquire.
    fn attempt(&self) -> Option<Attempt> {
        match *self {
            Op::MutexLock { attempt, .. }
            | Op::RwRead { attempt, .. }
            | Op::RwWrite { attempt, .. }
            | Op::SemWait { attempt, .. }
            | Op::SpinLock { attempt, .. }
            | Op::Join { attempt, .. } => Some(attempt),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MutexType;

    fn lock(m: Addr) -> Op {
        Op::MutexLock {
            m,
            attempt: Attempt::Block,
            kind: MutexType::Normal,
        }
    }

    #[test]
    fn same_mutex_is_dependent_other_mutex_is_not() {
        assert!(lock(8)
            .footprint()
            .conflicts(&Op::MutexUnlock { m: 8 }.footprint()));
        assert!(!lock(8).footprint().conflicts(&lock(16).footprint()));
    }

    #[test]
    fn a_blocking_lock_is_never_enabled_with_an_unlock_a_trylock_is() {
        let unlock = Op::MutexUnlock { m: 8 }.footprint();
        assert!(lock(8).footprint().excludes(&unlock));
        assert!(!lock(8).footprint().excludes(&lock(8).footprint()));
        let trylock = Op::MutexLock {
            m: 8,
            attempt: Attempt::Try,
            kind: MutexType::Normal,
        };
        assert!(!trylock.footprint().excludes(&unlock));
    }

    #[test]
    fn thread_local_steps_touch_nothing() {
        for op in [Op::Start, Op::Continue, Op::Yield] {
            assert!(op.footprint().is_empty(), "{op:?}");
            assert!(!op.footprint().conflicts(&lock(8).footprint()));
        }
    }

    #[test]
    fn ending_the_process_depends_on_everything() {
        let exit = Op::ExitGroup.footprint();
        for op in [
            Op::Yield,
            Op::Start,
            lock(8),
            Op::Atomic {
                addr: 0x40,
                size: 8,
            },
        ] {
            assert!(exit.conflicts(&op.footprint()), "{op:?}");
        }
    }

    #[test]
    fn futex_and_atomic_on_one_word_are_dependent() {
        let wait = Op::FutexWait {
            addr: 0x1004,
            expected: 0,
            bitset: !0,
            timeout: None,
        };
        assert!(wait.footprint().conflicts(
            &Op::Atomic {
                addr: 0x1000,
                size: 8
            }
            .footprint()
        ));
        assert!(!wait.footprint().conflicts(
            &Op::Atomic {
                addr: 0x1008,
                size: 8
            }
            .footprint()
        ));
    }

    #[test]
    fn readers_commute_writers_do_not() {
        let rd = Op::RwRead {
            l: 8,
            attempt: Attempt::Block,
        };
        let wr = Op::RwWrite {
            l: 8,
            attempt: Attempt::Block,
        };
        assert!(!rd.footprint().conflicts(&rd.footprint()));
        assert!(rd.footprint().conflicts(&wr.footprint()));
    }

    #[test]
    fn condvar_wait_touches_both_objects_and_join_its_target() {
        let w = Op::CondWait {
            c: 8,
            m: 16,
            timeout: None,
        };
        assert!(w
            .footprint()
            .conflicts(&Op::MutexUnlock { m: 16 }.footprint()));
        assert!(w
            .footprint()
            .conflicts(&Op::CondSignal { c: 8 }.footprint()));
        let j = Op::Join {
            target: Some(3),
            attempt: Attempt::Block,
        };
        let mut exit = Footprint::default();
        exit.touch_exit(3);
        assert!(j.footprint().conflicts(&exit));
        assert!(j.footprint().excludes(&exit), "a join waits for the exit");
    }

    #[test]
    fn timed_operations_and_unknown_objects_are_conservative() {
        let timed = Op::MutexLock {
            m: 8,
            attempt: Attempt::Timed(5),
            kind: MutexType::Normal,
        };
        assert!(timed
            .footprint()
            .conflicts(&Op::Sleep { ns: 1 }.footprint()));
        assert!(Op::Atomic { addr: 0, size: 8 }.footprint().global);
        assert!(
            Op::Atomic { addr: 8, size: 0 }.footprint().global,
            "size not known"
        );
        assert!(
            Op::Join {
                target: None,
                attempt: Attempt::Block
            }
            .footprint()
            .global
        );
    }

    /// The footprint of one access of `size` bytes at `addr`.
    fn access(addr: Addr, size: u64, write: bool) -> Footprint {
        let mut f = Footprint::default();
        f.touch_range(addr, size, write);
        f
    }

    fn rmw(addr: Addr, size: u8) -> Footprint {
        Op::Atomic { addr, size }.footprint()
    }

    #[test]
    fn disjoint_bytes_of_one_word_are_independent() {
        // Three 4-byte counters side by side: x at 0x100c, y at 0x1010, g at 0x1014 (y and
        // g share the 8-byte word at 0x1010).
        let (x, y, g) = (rmw(0x100c, 4), rmw(0x1010, 4), rmw(0x1014, 4));
        assert!(!y.conflicts(&g) && !g.conflicts(&y));
        assert!(!x.conflicts(&y) && !x.conflicts(&g));
        assert!(g.conflicts(&rmw(0x1014, 4)));
        // Bytes of one word, one at a time.
        for i in 0..8 {
            for j in 0..8 {
                let (a, b) = (access(0x2000 + i, 1, true), access(0x2000 + j, 1, true));
                assert_eq!(a.conflicts(&b), i == j, "byte {i} and byte {j}");
            }
        }
    }

    #[test]
    fn partial_overlaps_of_any_sizes_are_dependent() {
        // (addr, size) pairs against an 4-byte write at 0x1002 (bytes 0x1002..0x1006).
        let w = access(0x1002, 4, true);
        for (addr, size, dependent) in [
            (0x1000, 2, false),
            (0x1000, 3, true),
            (0x1005, 1, true),
            (0x1006, 2, false),
            (0x1000, 8, true),
            (0x0ff8, 8, false),
            (0x0ffc, 8, true),
            (0x1004, 16, true),
            (0x1006, 16, false),
        ] {
            assert_eq!(
                access(addr, size, false).conflicts(&w),
                dependent,
                "read of {size} at {addr:#x}"
            );
            assert_eq!(w.conflicts(&access(addr, size, true)), dependent);
        }
    }

    #[test]
    fn reads_commute_whatever_their_overlap() {
        let a = access(0x1000, 8, false);
        assert!(!a.conflicts(&access(0x1004, 4, false)));
        assert!(a.conflicts(&access(0x1004, 4, true)));
    }

    #[test]
    fn read_modify_writes_of_every_size_depend_on_what_they_overlap() {
        for size in [1u8, 2, 4, 8, 16] {
            let base = 0x4000;
            let op = rmw(base, size);
            // Each byte it covers, read by another thread, depends on it; the bytes just
            // outside do not.
            for i in 0..u64::from(size) {
                assert!(
                    op.conflicts(&access(base + i, 1, false)),
                    "{size}: byte {i}"
                );
            }
            assert!(!op.conflicts(&access(base + u64::from(size), 1, true)));
            assert!(!op.conflicts(&access(base - 1, 1, true)));
            // Two read-modify-writes overlapping in their last and first bytes.
            assert!(op.conflicts(&rmw(base + u64::from(size) - 1, 1)));
        }
        // A 16-byte compare-and-swap spans two cells: it depends on both words.
        let wide = rmw(0x5000, 16);
        assert!(wide.conflicts(&rmw(0x5000, 8)) && wide.conflicts(&rmw(0x5008, 8)));
        assert!(wide.conflicts(&rmw(0x500c, 4)));
        assert!(!wide.conflicts(&rmw(0x5010, 8)));
    }

    #[test]
    fn a_misaligned_access_spans_the_cells_it_covers() {
        let m = access(0x1006, 4, true); // bytes 0x1006..0x100a: two cells
        assert_eq!(m.touches.len(), 2);
        assert!(m.conflicts(&access(0x1007, 1, false)));
        assert!(m.conflicts(&access(0x1008, 2, false)));
        assert!(m.conflicts(&access(0x1009, 1, false)));
        assert!(!m.conflicts(&access(0x100a, 4, false)));
        assert!(!m.conflicts(&access(0x1000, 6, false)));
    }

    #[test]
    fn a_futex_word_depends_on_the_lock_word_atomics_that_overlap_it() {
        let wait = Op::FutexWait {
            addr: 0x1000,
            expected: 1,
            bitset: !0,
            timeout: None,
        }
        .footprint();
        let wake = Op::FutexWake {
            addr: 0x1000,
            count: 1,
            bitset: !0,
        }
        .footprint();
        assert!(wait.conflicts(&wake));
        for (addr, size) in [
            (0x1000, 4),
            (0x1000, 1),
            (0x1003, 1),
            (0x1000, 8),
            (0x0ffc, 8),
        ] {
            assert!(wait.conflicts(&rmw(addr, size)), "{size} at {addr:#x}");
            assert!(wake.conflicts(&rmw(addr, size)), "{size} at {addr:#x}");
        }
        // The other half of its 8-byte word is another object.
        assert!(!wait.conflicts(&rmw(0x1004, 4)));
    }

    #[test]
    fn a_long_range_or_an_unknown_size_is_dependent_with_everything() {
        assert!(access(0x1000, 0, false).global);
        assert!(access(0x1000, MAX_EXACT_RANGE + 1, false).global);
        let copy = access(0x1000, 100, true);
        assert!(!copy.global);
        assert!(copy.conflicts(&access(0x1063, 1, false)));
        assert!(!copy.conflicts(&access(0x1064, 1, false)));
    }

    #[test]
    fn a_step_keeps_its_reads_and_writes_of_one_cell_apart() {
        // Reads bytes 0..4 of a cell and writes bytes 4..8: a read of bytes 0..4 by another
        // thread commutes with it, a write there does not.
        let mut step = access(0x1000, 4, false);
        step.extend_plain(&access(0x1004, 4, true));
        assert!(!step.conflicts(&access(0x1000, 4, false)));
        assert!(step.conflicts(&access(0x1000, 4, true)));
        assert!(step.conflicts(&access(0x1006, 1, false)));
        // A read of bytes it writes adds nothing.
        step.touch_range(0x1004, 2, false);
        assert_eq!(step.touches.len(), 2);
    }

    #[test]
    fn keys_name_each_byte_of_memory_and_the_object_otherwise() {
        let f = access(0x1006, 4, true);
        let keys: Vec<Addr> = (f.touches.iter())
            .flat_map(|t| t.keys().map(|k| k.addr))
            .collect();
        assert_eq!(keys, [0x1006, 0x1007, 0x1008, 0x1009]);
        let m = lock(8).footprint();
        let keys: Vec<ObjectRef> = m.touches[0].keys().collect();
        assert_eq!(keys, [m.touches[0].object]);
    }
}
