//! Footprints: which objects a step may read or change, for the dependency relation of
//! partial-order reduction. Two steps of different threads are dependent when their
//! footprints touch a common object and at least one of them may change it, or when one of
//! them is global (dependent with everything).
//!
//! Memory words (atomics, futex words, racy addresses) are keyed by their aligned 8-byte
//! word, so that a futex wait and an atomic compare-and-swap on the same word, or two
//! overlapping atomics of different sizes, are dependent.

use super::ops::{Attempt, ObjectKind, ObjectRef, Op};
use super::{Addr, ThreadId};

/// One object a step touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Touch {
    /// The object (for memory words, kind [`ObjectKind::Memory`] and the aligned address).
    pub object: ObjectRef,
    /// The step may change it.
    pub write: bool,
    /// How the step's operation needs the object.
    pub role: Role,
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
    /// The objects touched (each object at most once; a write subsumes a read).
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
                write,
                role,
            }),
        }
    }

    /// Adds a memory word (an atomic location, a futex word) containing `addr`.
    pub fn touch_word(&mut self, addr: Addr, write: bool) {
        self.touch(ObjectKind::Memory, addr & !7, write);
    }

    /// Adds the exit of thread `t` (which a blocking join of it waits for).
    pub fn touch_exit(&mut self, t: ThreadId) {
        self.touch_as(ObjectKind::Thread, t as Addr, true, Role::Release);
    }

    /// Adds everything in `other`, keeping the roles.
    pub fn extend(&mut self, other: &Footprint) {
        self.global |= other.global;
        for t in &other.touches {
            self.touch_as(t.object.kind, t.object.addr, t.write, t.role);
        }
    }

    /// Adds everything in `other` as plain accesses (what a step did after its operation
    /// says nothing about when the step could start).
    pub fn extend_plain(&mut self, other: &Footprint) {
        self.global |= other.global;
        for t in &other.touches {
            self.touch(t.object.kind, t.object.addr, t.write);
        }
    }

    /// Whether two steps of different threads can never be enabled together: one waits for
    /// an object the other holds and releases.
    pub fn excludes(&self, other: &Footprint) -> bool {
        self.touches.iter().any(|a| {
            other.touches.iter().any(|b| {
                a.object == b.object
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
                a.object == b.object
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
        self.touches.iter().any(|a| {
            other
                .touches
                .iter()
                .any(|b| a.object == b.object && (a.write || b.write))
        })
    }
}

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
            Op::Atomic { addr } => {
                if addr == 0 {
                    // The address could not be computed: assume the worst.
                    f.global = true;
                } else {
                    f.touch_word(addr, true);
                }
            }
            Op::MemoryAccess { addr, write } => f.touch_word(addr, write),
            Op::FutexWait { addr, timeout, .. } => {
                f.touch_word(addr, true);
                if timeout.is_some() {
                    f.touch(K::Time, 0, true);
                }
            }
            Op::FutexWake { addr, .. } | Op::FutexResume { addr } => f.touch_word(addr, true),
            Op::FutexRequeue { addr, to, .. } => {
                f.touch_word(addr, true);
                f.touch_word(to, true);
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
        for op in [Op::Yield, Op::Start, lock(8), Op::Atomic { addr: 0x40 }] {
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
        assert!(wait
            .footprint()
            .conflicts(&Op::Atomic { addr: 0x1000 }.footprint()));
        assert!(!wait
            .footprint()
            .conflicts(&Op::Atomic { addr: 0x1008 }.footprint()));
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
        assert!(Op::Atomic { addr: 0 }.footprint().global);
        assert!(
            Op::Join {
                target: None,
                attempt: Attempt::Block
            }
            .footprint()
            .global
        );
    }
}
