//! Happens-before edges from the model's operations: which synchronisation object each
//! completed operation acquires or releases, fed to the race detector.
//!
//! Mutexes, spin locks, rwlocks: lock = acquire, unlock = release (readers are treated like
//! writers, which can hide a race between two readers-under-lock that write). Condvars: the
//! wait releases the mutex; signal/broadcast release the condvar; the woken waiter acquires
//! the condvar and the mutex. Semaphores: post releases, a successful wait acquires.
//! Barriers: every arrival releases, every departure acquires. Futexes: a wake releases the
//! word, a woken waiter acquires it. Atomic read-modify-writes acquire and release their
//! address. Kernel calls that communicate acquire and release one kernel object. Thread
//! creation and join are handled by the executor directly; a thread's exit releases its
//! thread block, which a later thread created on the same block acquires.

use crate::detect::race::{RaceDetector, SyncKey};
use crate::model::{Completion, Op, ThreadId};

const MUTEX: u8 = 1;
const RWLOCK: u8 = 2;
const COND: u8 = 3;
const SEM: u8 = 4;
const BARRIER: u8 = 5;
const SPIN: u8 = 6;
const FUTEX: u8 = 7;
/// Sync key tag of atomically accessed addresses.
pub const ATOMIC: u8 = 8;
/// Sync key tag of pthread_once controls.
pub const ONCE: u8 = 9;
/// Sync key tag of the kernel (pipes, sockets, signals...: one object for all).
const KERNEL: u8 = 10;
/// Sync key tag of thread blocks (the thread pointer a clone sets: glibc's `struct
/// pthread`, at the top of the thread's stack mapping).
const THREAD_BLOCK: u8 = 11;

/// Thread `t`, whose thread pointer was `block`, exited. glibc keeps the stack of an
/// exited thread (its mapping, TLS and `struct pthread` at the same place) in a cache and
/// gives it whole to a later thread, which then reads and writes the very addresses the
/// dead one did; the hand-over is ordered in the program (the kernel clears the dead
/// thread's tid word, glibc's cache lock) but inside libc, which is not traced. The exit
/// releases the block; [`thread_block_taken`] acquires it.
pub fn thread_block_released(d: &mut RaceDetector, t: ThreadId, block: u64) {
    if block != 0 {
        d.release(t, (THREAD_BLOCK, block));
    }
}

/// Thread `t` was created with thread pointer `block`: if an exited thread had it, all
/// that thread did happens before `t` (see [`thread_block_released`]).
pub fn thread_block_taken(d: &mut RaceDetector, t: ThreadId, block: u64) {
    if block != 0 {
        d.acquire(t, (THREAD_BLOCK, block));
    }
}

/// `t` passed something through the kernel (a wait that returned, a write to a pipe, a
/// signal sent): it acquires and releases the kernel object, so that what one thread did
/// before writing a pipe happens before what another does after reading it.
pub fn kernel(d: &mut RaceDetector, t: ThreadId) {
    d.release(t, (KERNEL, 0));
    d.acquire(t, (KERNEL, 0));
}

/// Feeds the edges of `op`, just executed by `t` with result `c`, to the detector.
pub fn record(d: &mut RaceDetector, t: ThreadId, op: &Op, c: Completion) {
    let ok = matches!(c, Completion::Return(0) | Completion::Native);
    let key = |tag: u8, addr: u64| -> SyncKey { (tag, addr) };
    match *op {
        Op::MutexLock { m, .. } if ok => d.acquire(t, key(MUTEX, m)),
        Op::MutexUnlock { m } if ok => d.release(t, key(MUTEX, m)),
        Op::SpinLock { s, .. } if ok => d.acquire(t, key(SPIN, s)),
        Op::SpinUnlock { s } if ok => d.release(t, key(SPIN, s)),
        Op::RwRead { l, .. } | Op::RwWrite { l, .. } if ok => d.acquire(t, key(RWLOCK, l)),
        Op::RwUnlock { l } if ok => d.release(t, key(RWLOCK, l)),
        Op::CondWait { m, .. } if c == Completion::Blocked => d.release(t, key(MUTEX, m)),
        Op::CondSignal { c: cv } | Op::CondBroadcast { c: cv } => d.release(t, key(COND, cv)),
        Op::CondResume { c: cv, m, .. } => {
            if c == Completion::Return(0) {
                d.acquire(t, key(COND, cv));
            }
            d.acquire(t, key(MUTEX, m));
        }
        Op::SemPost { s } if ok => d.release(t, key(SEM, s)),
        Op::SemWait { s, .. } if ok => d.acquire(t, key(SEM, s)),
        Op::BarrierWait { b } => {
            d.release(t, key(BARRIER, b));
            if c == Completion::Return(-1) {
                d.acquire(t, key(BARRIER, b));
            }
        }
        Op::BarrierResume { b, .. } => d.acquire(t, key(BARRIER, b)),
        Op::FutexWake { addr, .. } => d.release(t, key(FUTEX, addr)),
        Op::FutexRequeue { addr, to, .. } => {
            d.release(t, key(FUTEX, addr));
            d.release(t, key(FUTEX, to));
        }
        Op::FutexResume { addr } if c == Completion::Return(0) => d.acquire(t, key(FUTEX, addr)),
        Op::Once { o } => d.acquire(t, key(ONCE, o)),
        Op::Kernel { .. } => kernel(d, t),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::race::Access;
    use crate::model::{Attempt, MutexType};

    fn write(t: ThreadId, pc: u64) -> Access {
        Access {
            thread: t,
            addr: 0x10,
            size: 4,
            write: true,
            atomic: false,
            pc,
        }
    }

    #[test]
    fn a_thread_block_handed_over_orders_the_dead_thread_before_the_new_one() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.access(write(1, 1));
        thread_block_released(&mut d, 1, 0x7000);
        d.thread_exited(1);
        // Created later on another block: unordered with thread 1.
        d.thread_created(0, 2);
        thread_block_taken(&mut d, 2, 0x9000);
        assert!(
            d.access(write(2, 2)).is_some(),
            "another block orders nothing"
        );
        // Created on thread 1's block: after everything thread 1 did.
        let mut d2 = RaceDetector::new();
        d2.thread_created(0, 1);
        d2.access(write(1, 1));
        thread_block_released(&mut d2, 1, 0x7000);
        d2.thread_exited(1);
        d2.thread_created(0, 2);
        thread_block_taken(&mut d2, 2, 0x7000);
        assert!(
            d2.access(write(2, 2)).is_none(),
            "the block's hand-over orders them"
        );
    }

    #[test]
    fn lock_and_unlock_order_accesses_but_a_failed_trylock_does_not() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        let lock = Op::MutexLock {
            m: 5,
            attempt: Attempt::Block,
            kind: MutexType::Normal,
        };
        record(&mut d, 1, &lock, Completion::Return(0));
        d.access(write(1, 1));
        record(&mut d, 1, &Op::MutexUnlock { m: 5 }, Completion::Return(0));
        let trylock = Op::MutexLock {
            m: 5,
            attempt: Attempt::Try,
            kind: MutexType::Normal,
        };
        record(&mut d, 2, &trylock, Completion::Error(16));
        assert!(
            d.access(write(2, 2)).is_some(),
            "a failed trylock orders nothing"
        );
    }

    #[test]
    fn semaphore_post_then_wait_orders_accesses() {
        let mut d = RaceDetector::new();
        d.thread_created(0, 1);
        d.thread_created(0, 2);
        d.access(write(1, 1));
        record(&mut d, 1, &Op::SemPost { s: 9 }, Completion::Return(0));
        record(
            &mut d,
            2,
            &Op::SemWait {
                s: 9,
                attempt: Attempt::Block,
            },
            Completion::Return(0),
        );
        assert!(d.access(write(2, 2)).is_none());
    }
}
