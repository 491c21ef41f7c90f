//! The operations threads perform at scheduling points, and what executing one yields.

use super::{Addr, ThreadId};

/// The three flavours of a possibly blocking acquire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// Wait as long as it takes.
    Block,
    /// Fail at once with EBUSY/EAGAIN instead of waiting.
    Try,
    /// Wait at most this many (virtual) nanoseconds.
    Timed(u64),
}

/// pthread mutex types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MutexType {
    /// PTHREAD_MUTEX_NORMAL / DEFAULT: relocking deadlocks.
    Normal,
    /// PTHREAD_MUTEX_RECURSIVE: the owner may relock.
    Recursive,
    /// PTHREAD_MUTEX_ERRORCHECK: relock gives EDEADLK, foreign unlock EPERM.
    ErrorCheck,
}

/// An operation a thread is about to perform.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The first step of a new thread.
    Start,
    /// Go on after a point with no model effect (the program entry, after a clone without
    /// race detection).
    Continue,
    /// exit_group while other threads live: ends the process under them.
    ExitGroup,
    /// sched_yield or another pure yield.
    Yield,
    /// nanosleep/clock_nanosleep for this many virtual nanoseconds.
    Sleep { ns: u64 },
    /// An atomic read-modify-write instruction on the `size` bytes at `addr` (0: size not
    /// known, dependent with everything).
    Atomic { addr: Addr, size: u8 },
    /// A plain access of `size` bytes to an address found racy earlier
    /// (`--preempt-on-races`), or an atomic load or store at a scheduling point.
    MemoryAccess { addr: Addr, size: u8, write: bool },
    /// pthread_mutex_init.
    MutexInit { m: Addr, kind: MutexType },
    /// pthread_mutex_lock/trylock/timedlock; `kind` is the type read from a statically
    /// initialised mutex the model has not seen initialised.
    MutexLock {
        m: Addr,
        attempt: Attempt,
        kind: MutexType,
    },
    /// pthread_mutex_unlock.
    MutexUnlock { m: Addr },
    /// pthread_mutex_destroy.
    MutexDestroy { m: Addr },
    /// pthread_rwlock_init.
    RwInit { l: Addr },
    /// pthread_rwlock_{,try,timed}rdlock.
    RwRead { l: Addr, attempt: Attempt },
    /// pthread_rwlock_{,try,timed}wrlock.
    RwWrite { l: Addr, attempt: Attempt },
    /// pthread_rwlock_unlock.
    RwUnlock { l: Addr },
    /// pthread_rwlock_destroy.
    RwDestroy { l: Addr },
    /// pthread_cond_init; `monotonic` when its attribute chose CLOCK_MONOTONIC.
    CondInit { c: Addr, monotonic: bool },
    /// pthread_cond_wait/timedwait.
    CondWait {
        c: Addr,
        m: Addr,
        timeout: Option<u64>,
    },
    /// pthread_cond_signal.
    CondSignal { c: Addr },
    /// pthread_cond_broadcast.
    CondBroadcast { c: Addr },
    /// pthread_cond_destroy.
    CondDestroy { c: Addr },
    /// sem_init.
    SemInit { s: Addr, value: u32 },
    /// sem_wait/trywait/timedwait.
    SemWait { s: Addr, attempt: Attempt },
    /// sem_post.
    SemPost { s: Addr },
    /// sem_getvalue, writing the value to `out`.
    SemGetValue { s: Addr, out: Addr },
    /// sem_destroy.
    SemDestroy { s: Addr },
    /// pthread_barrier_init.
    BarrierInit { b: Addr, count: u32 },
    /// pthread_barrier_wait.
    BarrierWait { b: Addr },
    /// pthread_barrier_destroy.
    BarrierDestroy { b: Addr },
    /// pthread_spin_init.
    SpinInit { s: Addr },
    /// pthread_spin_lock/trylock.
    SpinLock { s: Addr, attempt: Attempt },
    /// pthread_spin_unlock.
    SpinUnlock { s: Addr },
    /// pthread_spin_destroy.
    SpinDestroy { s: Addr },
    /// pthread_join and its try/timed forms; `target` is None when the handle is unknown.
    Join {
        target: Option<ThreadId>,
        attempt: Attempt,
    },
    /// pthread_detach.
    Detach { target: Option<ThreadId> },
    /// pthread_once (runs natively).
    Once { o: Addr },
    /// FUTEX_WAIT/WAIT_BITSET.
    FutexWait {
        addr: Addr,
        expected: u32,
        bitset: u32,
        timeout: Option<u64>,
    },
    /// FUTEX_WAKE/WAKE_BITSET.
    FutexWake { addr: Addr, count: u32, bitset: u32 },
    /// FUTEX_REQUEUE/CMP_REQUEUE.
    FutexRequeue {
        addr: Addr,
        wake: u32,
        requeue: u32,
        to: Addr,
        expected: Option<u32>,
    },
    /// Internal continuation: waiting for a condvar signal, then for the mutex.
    CondResume { c: Addr, m: Addr, count: u32 },
    /// Internal continuation: waiting in a futex queue.
    FutexResume { addr: Addr },
    /// Internal continuation: waiting for a barrier to complete generation `generation`.
    BarrierResume { b: Addr, generation: u64 },
    /// A system call that waits for the kernel (`read` of an empty pipe, `epoll_wait`,
    /// `sigwait`...): enabled once the executor finds it ready
    /// ([`Model::set_kernel_ready`](super::Model::set_kernel_ready)), then run natively.
    Kernel {
        /// The system call's name.
        call: &'static str,
        /// Its timeout in virtual nanoseconds (None: it waits as long as it takes).
        timeout: Option<u64>,
    },
}

impl Op {
    /// A short name for traces and reports.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Continue => "continue",
            Op::ExitGroup => "exit_group",
            Op::Yield => "yield",
            Op::Sleep { .. } => "sleep",
            Op::Atomic { .. } => "atomic",
            Op::MemoryAccess { write: true, .. } => "write",
            Op::MemoryAccess { .. } => "read",
            Op::MutexInit { .. } => "mutex_init",
            Op::MutexLock {
                attempt: Attempt::Try,
                ..
            } => "mutex_trylock",
            Op::MutexLock {
                attempt: Attempt::Timed(_),
                ..
            } => "mutex_timedlock",
            Op::MutexLock { .. } => "mutex_lock",
            Op::MutexUnlock { .. } => "mutex_unlock",
            Op::MutexDestroy { .. } => "mutex_destroy",
            Op::RwInit { .. } => "rwlock_init",
            Op::RwRead { .. } => "rwlock_rdlock",
            Op::RwWrite { .. } => "rwlock_wrlock",
            Op::RwUnlock { .. } => "rwlock_unlock",
            Op::RwDestroy { .. } => "rwlock_destroy",
            Op::CondInit { .. } => "cond_init",
            Op::CondWait { timeout: None, .. } => "cond_wait",
            Op::CondWait { .. } => "cond_timedwait",
            Op::CondSignal { .. } => "cond_signal",
            Op::CondBroadcast { .. } => "cond_broadcast",
            Op::CondDestroy { .. } => "cond_destroy",
            Op::SemInit { .. } => "sem_init",
            Op::SemWait {
                attempt: Attempt::Try,
                ..
            } => "sem_trywait",
            Op::SemWait {
                attempt: Attempt::Timed(_),
                ..
            } => "sem_timedwait",
            Op::SemWait { .. } => "sem_wait",
            Op::SemPost { .. } => "sem_post",
            Op::SemGetValue { .. } => "sem_getvalue",
            Op::SemDestroy { .. } => "sem_destroy",
            Op::BarrierInit { .. } => "barrier_init",
            Op::BarrierWait { .. } => "barrier_wait",
            Op::BarrierDestroy { .. } => "barrier_destroy",
            Op::SpinInit { .. } => "spin_init",
            Op::SpinLock {
                attempt: Attempt::Try,
                ..
            } => "spin_trylock",
            Op::SpinLock { .. } => "spin_lock",
            Op::SpinUnlock { .. } => "spin_unlock",
            Op::SpinDestroy { .. } => "spin_destroy",
            Op::Join { .. } => "join",
            Op::Detach { .. } => "detach",
            Op::Once { .. } => "once",
            Op::FutexWait { .. } => "futex_wait",
            Op::FutexWake { .. } => "futex_wake",
            Op::FutexRequeue { .. } => "futex_requeue",
            Op::CondResume { .. } => "cond_wait(resume)",
            Op::FutexResume { .. } => "futex_wait(resume)",
            Op::BarrierResume { .. } => "barrier_wait(resume)",
            Op::Kernel { call, .. } => call,
        }
    }

    /// The name of the choice that makes this pending wait time out (see
    /// [`Model::can_time_out`](super::Model::can_time_out)), for schedules and traces.
    pub fn timeout_name(&self) -> &'static str {
        match self {
            Op::Sleep { .. } => "sleep",
            Op::CondResume { .. } => "cond_wait(timeout)",
            Op::FutexResume { .. } => "futex_wait(timeout)",
            Op::MutexLock { .. } => "mutex_timedlock(timeout)",
            Op::RwRead { .. } => "rwlock_timedrdlock(timeout)",
            Op::RwWrite { .. } => "rwlock_timedwrlock(timeout)",
            Op::SemWait { .. } => "sem_timedwait(timeout)",
            Op::SpinLock { .. } => "spin_lock(timeout)",
            Op::Join { .. } => "timedjoin(timeout)",
            Op::Kernel { call, .. } => match *call {
                "poll" => "poll(timeout)",
                "ppoll" => "ppoll(timeout)",
                "select" => "select(timeout)",
                "pselect6" => "pselect6(timeout)",
                "epoll_wait" => "epoll_wait(timeout)",
                "epoll_pwait" => "epoll_pwait(timeout)",
                "epoll_pwait2" => "epoll_pwait2(timeout)",
                "rt_sigtimedwait" => "rt_sigtimedwait(timeout)",
                _ => "syscall(timeout)",
            },
            _ => "timeout",
        }
    }

    /// Whether this operation begins a wait for another thread or for time: a condition
    /// variable, futex or semaphore wait, a sleep, a join, a barrier, a system call that
    /// waits for the kernel (trylocks and plain lock acquisitions are not waits of this
    /// kind: a lock is held for a short while, a wait lasts until someone acts).
    pub fn begins_wait(&self) -> bool {
        match self {
            Op::CondWait { .. }
            | Op::FutexWait { .. }
            | Op::Sleep { .. }
            | Op::BarrierWait { .. }
            | Op::Kernel { .. } => true,
            Op::SemWait { attempt, .. } | Op::Join { attempt, .. } => *attempt != Attempt::Try,
            _ => false,
        }
    }

    /// Whether the fair scheduler counts this operation as a yield (`explore::fair`):
    /// sched_yield and the pause instruction (`Yield`), sleeps, and futex waits with a
    /// timeout (a thread that polls with a timeout is waiting for someone else).
    pub fn yields_for_fairness(&self) -> bool {
        matches!(
            self,
            Op::Yield
                | Op::Sleep { .. }
                | Op::FutexWait {
                    timeout: Some(_),
                    ..
                }
        )
    }

    /// The synchronisation object this operation acts on, if any.
    pub fn object(&self) -> Option<ObjectRef> {
        use ObjectKind as K;
        let r = |kind, addr| Some(ObjectRef { kind, addr });
        match *self {
            Op::MutexInit { m, .. }
            | Op::MutexLock { m, .. }
            | Op::MutexUnlock { m }
            | Op::MutexDestroy { m } => r(K::Mutex, m),
            Op::RwInit { l }
            | Op::RwRead { l, .. }
            | Op::RwWrite { l, .. }
            | Op::RwUnlock { l }
            | Op::RwDestroy { l } => r(K::RwLock, l),
            Op::CondInit { c, .. }
            | Op::CondWait { c, .. }
            | Op::CondSignal { c }
            | Op::CondBroadcast { c }
            | Op::CondDestroy { c }
            | Op::CondResume { c, .. } => r(K::Cond, c),
            Op::SemInit { s, .. }
            | Op::SemWait { s, .. }
            | Op::SemPost { s }
            | Op::SemGetValue { s, .. }
            | Op::SemDestroy { s } => r(K::Semaphore, s),
            Op::BarrierInit { b, .. }
            | Op::BarrierWait { b }
            | Op::BarrierDestroy { b }
            | Op::BarrierResume { b, .. } => r(K::Barrier, b),
            Op::SpinInit { s }
            | Op::SpinLock { s, .. }
            | Op::SpinUnlock { s }
            | Op::SpinDestroy { s } => r(K::Spin, s),
            Op::FutexWait { addr, .. }
            | Op::FutexWake { addr, .. }
            | Op::FutexRequeue { addr, .. }
            | Op::FutexResume { addr } => r(K::Futex, addr),
            Op::Atomic { addr, .. } => r(K::Atomic, addr),
            Op::MemoryAccess { addr, .. } => r(K::Memory, addr),
            Op::Once { o } => r(K::Once, o),
            _ => None,
        }
    }
}

/// Kinds of synchronisation objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// pthread mutex.
    Mutex,
    /// pthread rwlock.
    RwLock,
    /// pthread condition variable.
    Cond,
    /// POSIX semaphore.
    Semaphore,
    /// pthread barrier.
    Barrier,
    /// pthread spin lock.
    Spin,
    /// A futex word (Rust std locks, glibc internals).
    Futex,
    /// An atomically accessed word.
    Atomic,
    /// Plain memory.
    Memory,
    /// A pthread_once control.
    Once,
    /// A thread (waited on by join).
    Thread,
    /// A sleep (waits on virtual time).
    Time,
    /// What the kernel holds for the program: pipes, sockets, eventfds, epoll sets, pending
    /// signals, child processes (one object for all of them).
    Kernel,
}

impl ObjectKind {
    /// Human name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Mutex => "mutex",
            ObjectKind::RwLock => "rwlock",
            ObjectKind::Cond => "condition variable",
            ObjectKind::Semaphore => "semaphore",
            ObjectKind::Barrier => "barrier",
            ObjectKind::Spin => "spin lock",
            ObjectKind::Futex => "futex word",
            ObjectKind::Atomic => "atomic",
            ObjectKind::Memory => "memory",
            ObjectKind::Once => "once control",
            ObjectKind::Thread => "thread",
            ObjectKind::Time => "timer",
            ObjectKind::Kernel => "kernel object",
        }
    }
}

/// A synchronisation object: its kind and address (for a thread, its logical id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// What it is.
    pub kind: ObjectKind,
    /// Where it is.
    pub addr: Addr,
}

/// The result of executing an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Finished with this value (0, a count, -1 for a barrier's serial thread...).
    Return(i64),
    /// Finished with this error number.
    Error(i32),
    /// The model is updated; the real code runs natively.
    Native,
    /// The thread now waits; its pending operation is a continuation.
    Blocked,
}
