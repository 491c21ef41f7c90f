//! The state of each kind of synchronisation object.

use std::collections::VecDeque;

use super::{MutexType, Site, ThreadId};

/// Lifecycle of an object that needs explicit initialisation or may be destroyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Life {
    /// Statically initialised or first seen in use.
    #[default]
    Implicit,
    /// Initialised by an init call.
    Initialised,
    /// Destroyed.
    Destroyed,
}

/// A mutex (also used for spin locks).
#[derive(Clone, Debug)]
pub struct MutexState {
    /// Its type.
    pub kind: MutexType,
    /// Current owner.
    pub owner: Option<ThreadId>,
    /// Recursion depth (1 when simply locked).
    pub count: u32,
    /// Where the owner acquired it.
    pub acquired_at: Site,
    /// Lifecycle.
    pub life: Life,
}

impl MutexState {
    /// A fresh unlocked mutex.
    pub fn new(kind: MutexType, life: Life) -> Self {
        MutexState {
            kind,
            owner: None,
            count: 0,
            acquired_at: 0,
            life,
        }
    }
}

/// A reader-writer lock.
#[derive(Clone, Debug, Default)]
pub struct RwLockState {
    /// Writer, if write-locked.
    pub writer: Option<(ThreadId, Site)>,
    /// Readers (a thread appears once per read lock it holds).
    pub readers: Vec<(ThreadId, Site)>,
    /// Lifecycle.
    pub life: Life,
}

/// A condition variable, with glibc's two groups of waiters (nptl/pthread_cond_wait.c):
/// a signal goes to the oldest group (G1, the first `g1_len` of `waiters`), and any waiter
/// of that group may take it, not only the first to arrive; waiters that came after the
/// group was formed (G2) get signals only once G1 has one for each of its waiters, when G2
/// becomes G1. Which G1 waiter takes a signal is thus a choice of the schedule.
#[derive(Clone, Debug, Default)]
pub struct CondState {
    /// Threads waiting for a signal that is not theirs yet, in arrival order (G1 first).
    pub waiters: VecDeque<ThreadId>,
    /// How many of `waiters`, from the front, form G1.
    pub g1_len: usize,
    /// Signals sent to G1 and not taken yet (fewer than `g1_len`).
    pub g1_signals: usize,
    /// Lifecycle.
    pub life: Life,
    /// Its timed waits' deadlines are on CLOCK_MONOTONIC (`pthread_condattr_setclock`),
    /// not CLOCK_REALTIME.
    pub monotonic: bool,
}

/// A semaphore.
#[derive(Clone, Debug)]
pub struct SemState {
    /// Current value.
    pub value: u32,
    /// Lifecycle (semaphores have no static initialiser: Implicit means never initialised).
    pub life: Life,
}

/// A barrier.
#[derive(Clone, Debug)]
pub struct BarrierState {
    /// Threads needed to complete a round.
    pub count: u32,
    /// Threads arrived in the current round.
    pub arrived: u32,
    /// Completed rounds.
    pub generation: u64,
    /// Lifecycle.
    pub life: Life,
}

/// One thread waiting in a futex queue.
#[derive(Clone, Copy, Debug)]
pub struct FutexWaiter {
    /// The waiting thread.
    pub thread: ThreadId,
    /// Its FUTEX_BITSET mask.
    pub bitset: u32,
}
