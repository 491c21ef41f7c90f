//! The intercepted threading API: which function names get an entry breakpoint, how their
//! arguments become a model [`Op`], and how a result is handed back (the calling convention).

use crate::model::{Attempt, MutexType, Op, ThreadId};

/// How an emulated function reports its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Convention {
    /// pthread style: returns 0 or an error number.
    ErrorNumber,
    /// POSIX semaphore style: returns 0, or -1 with errno set.
    MinusOneErrno,
    /// The function runs natively after the model has seen it.
    Native,
    /// omp_test_lock: 1 when the lock was taken, 0 when it is busy.
    OmpTest,
    /// omp_test_nest_lock: the lock's nesting count once taken, 0 when it is busy.
    OmpNestTest,
}

/// One intercepted function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    MutexInit,
    MutexLock,
    MutexTryLock,
    MutexTimedLock,
    MutexClockLock,
    MutexUnlock,
    MutexDestroy,
    RwInit,
    RwRead,
    RwTryRead,
    RwTimedRead,
    RwClockRead,
    RwWrite,
    RwTryWrite,
    RwTimedWrite,
    RwClockWrite,
    RwUnlock,
    RwDestroy,
    CondInit,
    CondWait,
    CondTimedWait,
    CondClockWait,
    CondSignal,
    CondBroadcast,
    CondDestroy,
    SemInit,
    SemWait,
    SemTryWait,
    SemTimedWait,
    SemClockWait,
    SemPost,
    SemGetValue,
    SemDestroy,
    BarrierInit,
    BarrierWait,
    BarrierDestroy,
    SpinInit,
    SpinLock,
    SpinTryLock,
    SpinUnlock,
    /// glibc gives pthread_spin_init and pthread_spin_unlock one address: an unlock when
    /// the lock is held, an init otherwise.
    SpinInitOrUnlock,
    SpinDestroy,
    Join,
    TryJoin,
    TimedJoin,
    ClockJoin,
    Detach,
    Once,
    /// omp_init_lock (libgomp): a mutex's init.
    OmpInitLock,
    /// omp_init_nest_lock: a recursive mutex's init.
    OmpInitNestLock,
    /// omp_set_lock, GOMP_critical_name_start (its `void **` is the lock).
    OmpSetLock,
    /// omp_set_nest_lock: a recursive mutex's lock.
    OmpSetNestLock,
    /// omp_test_lock: a trylock returning nonzero on success.
    OmpTestLock,
    /// omp_test_nest_lock: a recursive trylock returning the new nesting count.
    OmpTestNestLock,
    /// omp_unset_lock, omp_unset_nest_lock, GOMP_critical_name_end.
    OmpUnsetLock,
    /// omp_destroy_lock, omp_destroy_nest_lock.
    OmpDestroyLock,
    /// GOMP_critical_start / GOMP_atomic_start: a lock of libgomp's own at `lock`.
    GompStaticLock {
        lock: u64,
    },
    /// GOMP_critical_end / GOMP_atomic_end.
    GompStaticUnlock {
        lock: u64,
    },
    /// A libgomp entry that hands out work (a section, a chunk of a dynamic, guided or
    /// runtime loop): a scheduling point on `key` before it runs natively, so the search
    /// chooses which thread asks first.
    GompHandOut {
        key: u64,
    },
    /// GOMP_task / GOMP_taskloop: a scheduling point on `key`, then run natively; the
    /// session puts a [`Hook::GompTaskBody`] at the task's function (the first argument).
    GompTask {
        key: u64,
    },
    /// The entry of a task's function, called by whichever thread runs the task: a
    /// scheduling point on `key`, so another thread can take the next task before this
    /// one's body runs (two tasks run at once).
    GompTaskBody {
        key: u64,
    },
}

/// Every intercepted symbol name with its hook.
pub const HOOKED_FUNCTIONS: &[(&str, Hook)] = &[
    ("pthread_mutex_init", Hook::MutexInit),
    ("pthread_mutex_lock", Hook::MutexLock),
    ("pthread_mutex_trylock", Hook::MutexTryLock),
    ("pthread_mutex_timedlock", Hook::MutexTimedLock),
    ("pthread_mutex_clocklock", Hook::MutexClockLock),
    ("pthread_mutex_unlock", Hook::MutexUnlock),
    ("pthread_mutex_destroy", Hook::MutexDestroy),
    ("pthread_rwlock_init", Hook::RwInit),
    ("pthread_rwlock_rdlock", Hook::RwRead),
    ("pthread_rwlock_tryrdlock", Hook::RwTryRead),
    ("pthread_rwlock_timedrdlock", Hook::RwTimedRead),
    ("pthread_rwlock_clockrdlock", Hook::RwClockRead),
    ("pthread_rwlock_wrlock", Hook::RwWrite),
    ("pthread_rwlock_trywrlock", Hook::RwTryWrite),
    ("pthread_rwlock_timedwrlock", Hook::RwTimedWrite),
    ("pthread_rwlock_clockwrlock", Hook::RwClockWrite),
    ("pthread_rwlock_unlock", Hook::RwUnlock),
    ("pthread_rwlock_destroy", Hook::RwDestroy),
    ("pthread_cond_init", Hook::CondInit),
    ("pthread_cond_wait", Hook::CondWait),
    ("pthread_cond_timedwait", Hook::CondTimedWait),
    ("pthread_cond_clockwait", Hook::CondClockWait),
    ("pthread_cond_signal", Hook::CondSignal),
    ("pthread_cond_broadcast", Hook::CondBroadcast),
    ("pthread_cond_destroy", Hook::CondDestroy),
    ("sem_init", Hook::SemInit),
    ("sem_wait", Hook::SemWait),
    ("sem_trywait", Hook::SemTryWait),
    ("sem_timedwait", Hook::SemTimedWait),
    ("sem_clockwait", Hook::SemClockWait),
    ("sem_post", Hook::SemPost),
    ("sem_getvalue", Hook::SemGetValue),
    ("sem_destroy", Hook::SemDestroy),
    ("pthread_barrier_init", Hook::BarrierInit),
    ("pthread_barrier_wait", Hook::BarrierWait),
    ("pthread_barrier_destroy", Hook::BarrierDestroy),
    ("pthread_spin_init", Hook::SpinInit),
    ("pthread_spin_lock", Hook::SpinLock),
    ("pthread_spin_trylock", Hook::SpinTryLock),
    ("pthread_spin_unlock", Hook::SpinUnlock),
    ("pthread_spin_destroy", Hook::SpinDestroy),
    ("pthread_join", Hook::Join),
    ("pthread_tryjoin_np", Hook::TryJoin),
    ("pthread_timedjoin_np", Hook::TimedJoin),
    ("pthread_clockjoin_np", Hook::ClockJoin),
    ("pthread_detach", Hook::Detach),
    ("pthread_once", Hook::Once),
];

/// What the hook needs from the stopped process to build its operation.
pub trait HookContext {
    /// Reads a u32 (None on fault).
    fn read_u32(&self, addr: u64) -> Option<u32>;
    /// Converts an absolute timespec at `ts` on clock `clock` to a relative timeout in ns.
    fn relative_timeout(&self, ts: u64, clock: libc::clockid_t) -> u64;
    /// Maps a pthread_t to a logical thread.
    fn thread_of_handle(&self, handle: u64) -> Option<ThreadId>;
    /// Whether the model has seen mutex `m` before.
    fn knows_mutex(&self, m: u64) -> bool;
    /// Whether spin lock `s` is held.
    fn spin_held(&self, s: u64) -> bool;
    /// The clock condvar `c`'s timed waits count on (CLOCK_REALTIME unless its attribute
    /// chose CLOCK_MONOTONIC).
    fn cond_clock(&self, c: u64) -> libc::clockid_t;
}

/// glibc 2.36's `pthread_condattr_t`: bit 1 of its value is the clock (1: CLOCK_MONOTONIC).
const CONDATTR_CLOCK_BIT: u32 = 1 << 1;

/// Merges the hooks of functions that share one address.
pub fn merge_aliases(a: Hook, b: Hook) -> Hook {
    match (a, b) {
        (Hook::SpinInit, Hook::SpinUnlock) | (Hook::SpinUnlock, Hook::SpinInit) => {
            Hook::SpinInitOrUnlock
        }
        (first, _) => first,
    }
}

/// glibc's `__kind` field of pthread_mutex_t (offset 16) gives the type of a statically
/// initialised mutex (PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP and friends).
const MUTEX_KIND_OFFSET: u64 = 16;

fn mutex_type_from_bits(bits: u32) -> MutexType {
    match bits & 3 {
        1 => MutexType::Recursive,
        2 => MutexType::ErrorCheck,
        _ => MutexType::Normal,
    }
}

impl Hook {
    /// How this hook returns.
    pub fn convention(self) -> Convention {
        use Hook::*;
        match self {
            SemInit | SemWait | SemTryWait | SemTimedWait | SemClockWait | SemPost
            | SemGetValue | SemDestroy => Convention::MinusOneErrno,
            Join
            | TryJoin
            | TimedJoin
            | ClockJoin
            | Detach
            | Once
            | GompHandOut { .. }
            | GompTask { .. }
            | GompTaskBody { .. } => Convention::Native,
            OmpTestLock => Convention::OmpTest,
            OmpTestNestLock => Convention::OmpNestTest,
            _ => Convention::ErrorNumber,
        }
    }

    /// The hook at run time, for a file loaded `bias` bytes above its file addresses (the
    /// static locks of libgomp are addresses in its file).
    pub fn rebased(self, bias: u64) -> Hook {
        match self {
            Hook::GompStaticLock { lock } => Hook::GompStaticLock { lock: lock + bias },
            Hook::GompStaticUnlock { lock } => Hook::GompStaticUnlock { lock: lock + bias },
            Hook::GompHandOut { key } => Hook::GompHandOut { key: key + bias },
            Hook::GompTask { key } => Hook::GompTask { key: key + bias },
            h => h,
        }
    }

    /// Builds the operation from the call's arguments.
    pub fn op(self, a: [u64; 6], cx: &dyn HookContext) -> Op {
        use Hook::*;
        let rt = CLOCK_REALTIME;
        let timed = |ts: u64, clock| Attempt::Timed(cx.relative_timeout(ts, clock));
        let lock = |attempt| {
            let m = a[0];
            let kind = if cx.knows_mutex(m) {
                MutexType::Normal
            } else {
                mutex_type_from_bits(cx.read_u32(m + MUTEX_KIND_OFFSET).unwrap_or(0))
            };
            Op::MutexLock { m, attempt, kind }
        };
        match self {
            MutexInit => Op::MutexInit {
                m: a[0],
                kind: if a[1] == 0 {
                    MutexType::Normal
                } else {
                    mutex_type_from_bits(cx.read_u32(a[1]).unwrap_or(0))
                },
            },
            MutexLock => lock(Attempt::Block),
            MutexTryLock => lock(Attempt::Try),
            MutexTimedLock => lock(timed(a[1], rt)),
            MutexClockLock => lock(timed(a[2], a[1] as i32)),
            MutexUnlock => Op::MutexUnlock { m: a[0] },
            MutexDestroy => Op::MutexDestroy { m: a[0] },
            RwInit => Op::RwInit { l: a[0] },
            RwRead => Op::RwRead {
                l: a[0],
                attempt: Attempt::Block,
            },
            RwTryRead => Op::RwRead {
                l: a[0],
                attempt: Attempt::Try,
            },
            RwTimedRead => Op::RwRead {
                l: a[0],
                attempt: timed(a[1], rt),
            },
            RwClockRead => Op::RwRead {
                l: a[0],
                attempt: timed(a[2], a[1] as i32),
            },
            RwWrite => Op::RwWrite {
                l: a[0],
                attempt: Attempt::Block,
            },
            RwTryWrite => Op::RwWrite {
                l: a[0],
                attempt: Attempt::Try,
            },
            RwTimedWrite => Op::RwWrite {
                l: a[0],
                attempt: timed(a[1], rt),
            },
            RwClockWrite => Op::RwWrite {
                l: a[0],
                attempt: timed(a[2], a[1] as i32),
            },
            RwUnlock => Op::RwUnlock { l: a[0] },
            RwDestroy => Op::RwDestroy { l: a[0] },
            CondInit => Op::CondInit {
                c: a[0],
                monotonic: a[1] != 0
                    && cx
                        .read_u32(a[1])
                        .is_some_and(|v| v & CONDATTR_CLOCK_BIT != 0),
            },
            CondWait => Op::CondWait {
                c: a[0],
                m: a[1],
                timeout: None,
            },
            CondTimedWait => Op::CondWait {
                c: a[0],
                m: a[1],
                timeout: Some(cx.relative_timeout(a[2], cx.cond_clock(a[0]))),
            },
            CondClockWait => Op::CondWait {
                c: a[0],
                m: a[1],
                timeout: Some(cx.relative_timeout(a[3], a[2] as i32)),
            },
            CondSignal => Op::CondSignal { c: a[0] },
            CondBroadcast => Op::CondBroadcast { c: a[0] },
            CondDestroy => Op::CondDestroy { c: a[0] },
            SemInit => Op::SemInit {
                s: a[0],
                value: a[2] as u32,
            },
            SemWait => Op::SemWait {
                s: a[0],
                attempt: Attempt::Block,
            },
            SemTryWait => Op::SemWait {
                s: a[0],
                attempt: Attempt::Try,
            },
            SemTimedWait => Op::SemWait {
                s: a[0],
                attempt: timed(a[1], rt),
            },
            SemClockWait => Op::SemWait {
                s: a[0],
                attempt: timed(a[2], a[1] as i32),
            },
            SemPost => Op::SemPost { s: a[0] },
            SemGetValue => Op::SemGetValue { s: a[0], out: a[1] },
            SemDestroy => Op::SemDestroy { s: a[0] },
            BarrierInit => Op::BarrierInit {
                b: a[0],
                count: a[2] as u32,
            },
            BarrierWait => Op::BarrierWait { b: a[0] },
            BarrierDestroy => Op::BarrierDestroy { b: a[0] },
            SpinInit => Op::SpinInit { s: a[0] },
            SpinLock => Op::SpinLock {
                s: a[0],
                attempt: Attempt::Block,
            },
            SpinTryLock => Op::SpinLock {
                s: a[0],
                attempt: Attempt::Try,
            },
            SpinUnlock => Op::SpinUnlock { s: a[0] },
            SpinInitOrUnlock if cx.spin_held(a[0]) => Op::SpinUnlock { s: a[0] },
            SpinInitOrUnlock => Op::SpinInit { s: a[0] },
            SpinDestroy => Op::SpinDestroy { s: a[0] },
            Join => Op::Join {
                target: cx.thread_of_handle(a[0]),
                attempt: Attempt::Block,
            },
            TryJoin => Op::Join {
                target: cx.thread_of_handle(a[0]),
                attempt: Attempt::Try,
            },
            TimedJoin => Op::Join {
                target: cx.thread_of_handle(a[0]),
                attempt: timed(a[2], rt),
            },
            ClockJoin => Op::Join {
                target: cx.thread_of_handle(a[0]),
                attempt: timed(a[3], a[2] as i32),
            },
            Detach => Op::Detach {
                target: cx.thread_of_handle(a[0]),
            },
            Once => Op::Once { o: a[0] },
            OmpInitLock => Op::MutexInit {
                m: a[0],
                kind: MutexType::Normal,
            },
            OmpInitNestLock => Op::MutexInit {
                m: a[0],
                kind: MutexType::Recursive,
            },
            OmpSetLock => omp_lock(a[0], Attempt::Block, MutexType::Normal),
            OmpSetNestLock => omp_lock(a[0], Attempt::Block, MutexType::Recursive),
            OmpTestLock => omp_lock(a[0], Attempt::Try, MutexType::Normal),
            OmpTestNestLock => omp_lock(a[0], Attempt::Try, MutexType::Recursive),
            OmpUnsetLock => Op::MutexUnlock { m: a[0] },
            OmpDestroyLock => Op::MutexDestroy { m: a[0] },
            GompStaticLock { lock } => omp_lock(lock, Attempt::Block, MutexType::Normal),
            GompStaticUnlock { lock } => Op::MutexUnlock { m: lock },
            // One byte of libgomp's code stands for every work share: all hand-outs are
            // dependent with each other, and the step after one carries libgomp's atomics
            // on the work share into its footprint.
            GompHandOut { key } | GompTask { key } | GompTaskBody { key } => {
                Op::Atomic { addr: key, size: 1 }
            }
        }
    }
}

const CLOCK_REALTIME: libc::clockid_t = libc::CLOCK_REALTIME;

/// An OpenMP lock operation: a mutex lock whose type does not come from glibc's layout.
fn omp_lock(m: u64, attempt: Attempt, kind: MutexType) -> Op {
    Op::MutexLock { m, attempt, kind }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Cx;
    impl HookContext for Cx {
        fn read_u32(&self, addr: u64) -> Option<u32> {
            Some(if addr == 0x1010 { 1 } else { 0 })
        }
        fn relative_timeout(&self, _ts: u64, _clock: libc::clockid_t) -> u64 {
            5
        }
        fn thread_of_handle(&self, h: u64) -> Option<ThreadId> {
            (h == 0xabc).then_some(3)
        }
        fn knows_mutex(&self, _m: u64) -> bool {
            false
        }
        fn spin_held(&self, s: u64) -> bool {
            s == 0x77
        }
        fn cond_clock(&self, _c: u64) -> libc::clockid_t {
            CLOCK_REALTIME
        }
    }

    #[test]
    fn spin_init_and_unlock_aliases_are_told_apart_by_the_lock_state() {
        let h = merge_aliases(Hook::SpinInit, Hook::SpinUnlock);
        assert_eq!(h, Hook::SpinInitOrUnlock);
        assert_eq!(h.op([0x77, 0, 0, 0, 0, 0], &Cx), Op::SpinUnlock { s: 0x77 });
        assert_eq!(h.op([0x78, 0, 0, 0, 0, 0], &Cx), Op::SpinInit { s: 0x78 });
    }

    #[test]
    fn static_recursive_initialiser_is_recognised() {
        let op = Hook::MutexLock.op([0x1000, 0, 0, 0, 0, 0], &Cx);
        assert_eq!(
            op,
            Op::MutexLock {
                m: 0x1000,
                attempt: Attempt::Block,
                kind: MutexType::Recursive
            }
        );
    }

    #[test]
    fn join_resolves_handles_and_timed_ops_carry_timeouts() {
        assert_eq!(
            Hook::Join.op([0xabc, 0, 0, 0, 0, 0], &Cx),
            Op::Join {
                target: Some(3),
                attempt: Attempt::Block
            }
        );
        assert_eq!(
            Hook::CondTimedWait.op([1, 2, 3, 0, 0, 0], &Cx),
            Op::CondWait {
                c: 1,
                m: 2,
                timeout: Some(5)
            }
        );
    }

    #[test]
    fn openmp_locks_are_mutexes_with_their_own_return_conventions() {
        let a = [0x5000, 0, 0, 0, 0, 0];
        let op = |h: Hook| h.op(a, &Cx);
        assert_eq!(
            op(Hook::OmpTestNestLock),
            Op::MutexLock {
                m: 0x5000,
                attempt: Attempt::Try,
                kind: MutexType::Recursive
            }
        );
        assert_eq!(
            op(Hook::OmpSetLock),
            Op::MutexLock {
                m: 0x5000,
                attempt: Attempt::Block,
                kind: MutexType::Normal
            }
        );
        assert_eq!(
            op(Hook::OmpInitNestLock),
            Op::MutexInit {
                m: 0x5000,
                kind: MutexType::Recursive
            }
        );
        assert_eq!(op(Hook::OmpUnsetLock), Op::MutexUnlock { m: 0x5000 });
        assert_eq!(Hook::OmpTestLock.convention(), Convention::OmpTest);
        assert_eq!(Hook::OmpTestNestLock.convention(), Convention::OmpNestTest);
        assert_eq!(Hook::OmpSetLock.convention(), Convention::ErrorNumber);
    }

    #[test]
    fn libgomps_static_locks_ignore_arguments_and_move_with_the_library() {
        let start = Hook::GompStaticLock { lock: 0x47648 }.rebased(0x7000_0000);
        assert_eq!(
            start.op([1, 2, 3, 4, 5, 6], &Cx),
            Op::MutexLock {
                m: 0x7004_7648,
                attempt: Attempt::Block,
                kind: MutexType::Normal
            }
        );
        let end = Hook::GompStaticUnlock { lock: 0x47648 }.rebased(0x7000_0000);
        assert_eq!(end.op([9; 6], &Cx), Op::MutexUnlock { m: 0x7004_7648 });
        assert_eq!(Hook::OmpSetLock.rebased(0x1000), Hook::OmpSetLock);
    }

    #[test]
    fn a_work_share_hand_out_is_an_atomic_point_on_one_key_and_then_runs_natively() {
        let h = Hook::GompHandOut { key: 0x2_0000 }.rebased(0x7000_0000);
        assert_eq!(
            h.op([1, 2, 3, 4, 5, 6], &Cx),
            Op::Atomic {
                addr: 0x7002_0000,
                size: 1
            }
        );
        assert_eq!(h.convention(), Convention::Native);
    }

    #[test]
    fn semaphores_use_errno_and_join_runs_natively() {
        assert_eq!(Hook::SemWait.convention(), Convention::MinusOneErrno);
        assert_eq!(Hook::Join.convention(), Convention::Native);
        assert_eq!(Hook::MutexLock.convention(), Convention::ErrorNumber);
    }
}
