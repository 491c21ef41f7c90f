//! The model proper: threads, objects, enabledness, execution of operations, virtual time.

use std::collections::{HashMap, VecDeque};

use super::errno::*;
use super::objects::*;
use super::ops::*;
use super::waits::{self, ModelFinding};
use super::{Addr, Footprint, Site, ThreadId};

/// Memory of the program as the model sees it: the few words it must read or write.
pub trait MemoryView {
    /// Reads a 32-bit word; None on a fault.
    fn read_u32(&mut self, addr: Addr) -> Option<u32>;
    /// Writes a 32-bit word; false on a fault.
    fn write_u32(&mut self, addr: Addr, value: u32) -> bool;
}

/// One thread as the model knows it.
#[derive(Clone, Debug, Default)]
pub(super) struct ThreadState {
    /// What it will do when next scheduled; None while it runs or after it finished.
    pub pending: Option<Op>,
    /// Where the pending operation was called from.
    pub site: Site,
    /// The thread has exited.
    pub finished: bool,
    /// Virtual deadline of the pending timed wait.
    pub deadline: Option<u64>,
    /// The pending kernel wait ([`Op::Kernel`]) would return at once (set by the executor).
    pub kernel_ready: bool,
    /// A wake (signal, futex wake) arrived for the pending continuation.
    pub woken: bool,
    /// Joined by this thread.
    pub joined_by: Option<ThreadId>,
    /// Detached.
    pub detached: bool,
}

/// The whole model of one execution.
#[derive(Clone, Debug)]
pub struct Model {
    pub(super) threads: Vec<ThreadState>,
    pub(super) mutexes: HashMap<Addr, MutexState>,
    pub(super) spins: HashMap<Addr, MutexState>,
    pub(super) rwlocks: HashMap<Addr, RwLockState>,
    pub(super) conds: HashMap<Addr, CondState>,
    pub(super) sems: HashMap<Addr, SemState>,
    pub(super) barriers: HashMap<Addr, BarrierState>,
    pub(super) futexes: HashMap<Addr, VecDeque<FutexWaiter>>,
    /// pthread_once controls: the initialising thread while it runs, or done.
    pub(super) onces: HashMap<Addr, Option<ThreadId>>,
    /// Virtual time in nanoseconds.
    pub(super) now: u64,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

type Outcome = Result<Completion, ModelFinding>;

impl Model {
    /// A model with only the main thread (id 0), running.
    pub fn new() -> Model {
        Model {
            threads: vec![ThreadState::default()],
            mutexes: HashMap::new(),
            spins: HashMap::new(),
            rwlocks: HashMap::new(),
            conds: HashMap::new(),
            sems: HashMap::new(),
            barriers: HashMap::new(),
            futexes: HashMap::new(),
            onces: HashMap::new(),
            now: 0,
        }
    }

    /// Registers a new thread; its pending operation is [`Op::Start`].
    pub fn add_thread(&mut self) -> ThreadId {
        self.threads.push(ThreadState {
            pending: Some(Op::Start),
            ..Default::default()
        });
        self.threads.len() - 1
    }

    /// Number of threads ever created.
    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    /// Virtual time now, in nanoseconds.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Whether condvar `c` was initialised (through the model) to time its waits on
    /// CLOCK_MONOTONIC; None when the model has not seen its initialisation.
    pub fn cond_monotonic(&self, c: Addr) -> Option<bool> {
        (self.conds.get(&c))
            .filter(|cv| cv.life == Life::Initialised)
            .map(|cv| cv.monotonic)
    }

    /// Whether the mutex at `m` has been seen (initialised or used) before.
    pub fn knows_mutex(&self, m: Addr) -> bool {
        self.mutexes.contains_key(&m)
    }

    /// The operation `t` will perform next.
    pub fn pending(&self, t: ThreadId) -> Option<&Op> {
        self.threads.get(t).and_then(|th| th.pending.as_ref())
    }

    /// When `t`'s timed wait times out (virtual time, ns), if it waits with a deadline.
    pub fn deadline(&self, t: ThreadId) -> Option<u64> {
        self.threads.get(t).and_then(|th| th.deadline)
    }

    /// Where `t`'s pending operation was called from.
    pub fn pending_site(&self, t: ThreadId) -> Site {
        self.threads[t].site
    }

    /// Whether `t` has exited.
    pub fn is_finished(&self, t: ThreadId) -> bool {
        self.threads[t].finished
    }

    /// Whether `t` is the only thread there has been so far (the main thread before its
    /// first thread creation): nothing another thread does can come between its steps, and
    /// nothing done before can be ordered against them.
    pub fn alone(&self, t: ThreadId) -> bool {
        self.threads.len() == 1 && t == 0
    }

    /// True when every thread has exited.
    pub fn all_finished(&self) -> bool {
        self.threads.iter().all(|t| t.finished)
    }

    /// `t` reached a scheduling point where it will perform `op`, called from `site`.
    /// Reports a deadlock when `op` can provably never be enabled.
    pub fn set_pending(&mut self, t: ThreadId, op: Op, site: Site) -> Result<(), ModelFinding> {
        let timeout = match op {
            Op::Sleep { ns } => Some(ns),
            Op::MutexLock {
                attempt: Attempt::Timed(ns),
                ..
            }
            | Op::RwRead {
                attempt: Attempt::Timed(ns),
                ..
            }
            | Op::RwWrite {
                attempt: Attempt::Timed(ns),
                ..
            }
            | Op::SemWait {
                attempt: Attempt::Timed(ns),
                ..
            }
            | Op::SpinLock {
                attempt: Attempt::Timed(ns),
                ..
            }
            | Op::Join {
                attempt: Attempt::Timed(ns),
                ..
            }
            | Op::Kernel {
                timeout: Some(ns), ..
            } => Some(ns),
            _ => None,
        };
        let th = &mut self.threads[t];
        th.pending = Some(op);
        th.site = site;
        th.deadline = timeout.map(|ns| self.now.saturating_add(ns));
        th.kernel_ready = false;
        th.woken = false;
        if !self.is_enabled(t) {
            if let Some(f) = waits::local_deadlock(self, t) {
                return Err(f);
            }
        }
        Ok(())
    }

    /// Whether `t` can perform its pending operation now without timing out.
    pub fn is_enabled(&self, t: ThreadId) -> bool {
        self.enabled_as(t, false)
    }

    /// Whether `t` waits with a deadline and could time out now: a timeout may fire at any
    /// point where its thread waits (CHESS), so this is a choice of its own, next to the
    /// enabled threads. A condvar wait times out only when its mutex is free, as it must
    /// take the mutex again.
    pub fn can_time_out(&self, t: ThreadId) -> bool {
        let th = &self.threads[t];
        th.deadline.is_some() && !th.woken && !self.is_enabled(t) && self.enabled_as(t, true)
    }

    /// Threads that can do nothing but time out, earliest deadline first.
    pub fn timeout_threads(&self) -> Vec<ThreadId> {
        let mut ts: Vec<(u64, ThreadId)> = (0..self.threads.len())
            .filter(|&t| self.can_time_out(t))
            .map(|t| (self.threads[t].deadline.unwrap_or(u64::MAX), t))
            .collect();
        ts.sort_unstable();
        ts.into_iter().map(|(_, t)| t).collect()
    }

    /// The name of the choice `t` offers: its pending operation, or its timeout.
    pub fn choice_name(&self, t: ThreadId) -> &'static str {
        match self.pending(t) {
            Some(op) if self.can_time_out(t) => op.timeout_name(),
            Some(op) => op.name(),
            None => "?",
        }
    }

    /// What choosing `t` touches: its pending operation's footprint, and virtual time when
    /// the choice is a timeout (it moves the clock to the deadline).
    pub fn choice_footprint(&self, t: ThreadId) -> Footprint {
        let Some(op) = self.pending(t) else {
            return Footprint::everything();
        };
        let mut f = op.footprint();
        if self.can_time_out(t) {
            f.touch(ObjectKind::Time, 0, true);
        }
        f
    }

    /// The executor found `t`'s pending kernel wait ready (or no longer ready).
    pub fn set_kernel_ready(&mut self, t: ThreadId, ready: bool) {
        self.threads[t].kernel_ready = ready;
    }

    /// Whether `t` could perform its pending operation if its wait had timed out
    /// (`timed_out`) or not.
    fn enabled_as(&self, t: ThreadId, timed_out: bool) -> bool {
        let th = &self.threads[t];
        let Some(op) = &th.pending else {
            return false;
        };
        match *op {
            Op::Sleep { .. } => timed_out,
            Op::Kernel { .. } => timed_out || th.kernel_ready,
            Op::MutexLock { m, attempt, .. } => {
                attempt == Attempt::Try || timed_out || self.mutex_acquirable(&self.mutexes, m, t)
            }
            Op::SpinLock { s, attempt } => {
                attempt == Attempt::Try || timed_out || self.mutex_acquirable(&self.spins, s, t)
            }
            Op::RwRead { l, attempt } => {
                attempt == Attempt::Try
                    || timed_out
                    || self
                        .rwlocks
                        .get(&l)
                        .is_none_or(|rw| rw.writer.is_none_or(|(w, _)| w == t))
            }
            Op::RwWrite { l, attempt } => {
                attempt == Attempt::Try
                    || timed_out
                    || self.rwlocks.get(&l).is_none_or(|rw| {
                        rw.writer.is_some_and(|(w, _)| w == t)
                            || (rw.writer.is_none() && rw.readers.is_empty())
                    })
            }
            Op::SemWait { s, attempt } => {
                attempt == Attempt::Try
                    || timed_out
                    || self
                        .sems
                        .get(&s)
                        .is_none_or(|sem| sem.value > 0 || sem.life != Life::Initialised)
            }
            Op::Join { target, attempt } => {
                attempt == Attempt::Try
                    || timed_out
                    || match target {
                        Some(u) => {
                            u == t
                                || self.threads[u].finished
                                || self.threads[u].joined_by.is_some()
                                || self.threads[u].detached
                        }
                        None => true,
                    }
            }
            Op::CondResume { m, .. } => {
                (th.woken || timed_out) && self.mutexes.get(&m).is_none_or(|mx| mx.owner.is_none())
            }
            Op::FutexResume { .. } => th.woken || timed_out,
            Op::Once { o } => !matches!(self.onces.get(&o), Some(Some(u)) if *u != t),
            Op::BarrierResume { b, generation } => self
                .barriers
                .get(&b)
                .is_none_or(|bar| bar.generation != generation),
            _ => true,
        }
    }

    /// Whether `t`'s pending operation is a trylock (of a mutex or spin lock) that will fail:
    /// it changes nothing, so for fairness it is a yield (a spin on `omp_test_lock` or
    /// `pthread_mutex_trylock` is a spin loop like one on `sched_yield`).
    pub fn pending_try_fails(&self, t: ThreadId) -> bool {
        match self.threads.get(t).and_then(|th| th.pending.as_ref()) {
            Some(&Op::MutexLock {
                m,
                attempt: Attempt::Try,
                ..
            }) => !self.mutex_acquirable(&self.mutexes, m, t),
            Some(&Op::SpinLock {
                s,
                attempt: Attempt::Try,
            }) => !self.mutex_acquirable(&self.spins, s, t),
            _ => false,
        }
    }

    fn mutex_acquirable(&self, table: &HashMap<Addr, MutexState>, m: Addr, t: ThreadId) -> bool {
        match table.get(&m) {
            None => true,
            Some(mx) => match mx.owner {
                None => true,
                Some(o) if o == t => mx.kind != MutexType::Normal,
                Some(_) => mx.life == Life::Destroyed,
            },
        }
    }

    /// All enabled threads, in id order.
    pub fn enabled_threads(&self) -> Vec<ThreadId> {
        (0..self.threads.len())
            .filter(|&t| self.is_enabled(t))
            .collect()
    }

    /// Threads that have a pending operation they can neither perform nor time out of.
    pub fn blocked_threads(&self) -> Vec<ThreadId> {
        (0..self.threads.len())
            .filter(|&t| {
                self.threads[t].pending.is_some() && !self.is_enabled(t) && !self.can_time_out(t)
            })
            .collect()
    }

    /// Thread `t` exited. Mutexes it still holds stay held: a thread waiting on one is
    /// reported only if the program can no longer end (see `waits`), as an exit creates no
    /// wait-for cycle.
    pub fn thread_exited(&mut self, t: ThreadId) {
        let th = &mut self.threads[t];
        th.finished = true;
        th.pending = None;
        th.deadline = None;
    }

    /// Performs `t`'s pending operation, which must be enabled or able to time out: in the
    /// second case the wait times out now, and virtual time moves to its deadline.
    pub fn execute(&mut self, t: ThreadId, mem: &mut dyn MemoryView) -> Outcome {
        let timed_out = !self.is_enabled(t) && self.can_time_out(t);
        if timed_out {
            let deadline = self.threads[t].deadline.unwrap_or(self.now);
            self.now = self.now.max(deadline);
        }
        let op = self.threads[t]
            .pending
            .take()
            .expect("execute: thread has no pending operation");
        let site = self.threads[t].site;
        let woken = self.threads[t].woken;
        let result = self.apply(t, &op, site, timed_out, woken, mem);
        match result {
            Ok(Completion::Blocked) => {}
            _ => {
                let th = &mut self.threads[t];
                th.deadline = None;
                th.kernel_ready = false;
                th.woken = false;
            }
        }
        result
    }

    /// Brings condvar `c`'s wake-ups in line with its G1 signals: while G1 has a signal,
    /// each of its waiters may take it (is woken); once it has one for each waiter, they
    /// are all woken for good and leave the groups.
    fn settle_cond(&mut self, c: Addr) {
        let Some(cv) = self.conds.get_mut(&c) else {
            return;
        };
        if cv.g1_len > 0 && cv.g1_signals >= cv.g1_len {
            let woken: Vec<ThreadId> = cv.waiters.drain(..cv.g1_len).collect();
            (cv.g1_len, cv.g1_signals) = (0, 0);
            for w in woken {
                self.threads[w].woken = true;
            }
            return;
        }
        let signalled = cv.g1_signals > 0;
        let g1: Vec<ThreadId> = cv.waiters.iter().take(cv.g1_len).copied().collect();
        for w in g1 {
            self.threads[w].woken = signalled;
        }
    }

    fn misuse(&self, t: ThreadId, op: &Op, message: String) -> Outcome {
        Err(ModelFinding::Misuse {
            thread: t,
            object: op.object(),
            message,
        })
    }

    fn block_with(&mut self, t: ThreadId, next: Op, timeout: Option<u64>) -> Outcome {
        let now = self.now;
        let th = &mut self.threads[t];
        th.pending = Some(next);
        th.deadline = timeout.map(|ns| now.saturating_add(ns));
        th.woken = false;
        Ok(Completion::Blocked)
    }

    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        t: ThreadId,
        op: &Op,
        site: Site,
        timed_out: bool,
        woken: bool,
        mem: &mut dyn MemoryView,
    ) -> Outcome {
        use Completion::*;
        match *op {
            Op::Start
            | Op::Continue
            | Op::ExitGroup
            | Op::Atomic { .. }
            | Op::MemoryAccess { .. } => Ok(Native),
            Op::Once { o } => {
                // The first caller runs the initialiser; the others wait until it is done.
                self.onces.entry(o).or_insert(Some(t));
                Ok(Native)
            }
            Op::Yield | Op::Sleep { .. } => Ok(Return(0)),
            Op::MutexInit { m, kind } => {
                if let Some(mx) = self.mutexes.get(&m) {
                    if mx.owner.is_some() && mx.life != Life::Destroyed {
                        return self.misuse(t, op, "re-initialises a locked mutex".into());
                    }
                }
                self.mutexes
                    .insert(m, MutexState::new(kind, Life::Initialised));
                Ok(Return(0))
            }
            Op::MutexLock { m, attempt, kind } => {
                let mx = self
                    .mutexes
                    .entry(m)
                    .or_insert_with(|| MutexState::new(kind, Life::Implicit));
                if mx.life == Life::Destroyed {
                    return self.misuse(t, op, "locks a destroyed mutex".into());
                }
                lock_mutex(mx, t, site, attempt, timed_out)
            }
            Op::MutexUnlock { m } => {
                let mx = self
                    .mutexes
                    .entry(m)
                    .or_insert_with(|| MutexState::new(MutexType::Normal, Life::Implicit));
                if mx.life == Life::Destroyed {
                    return self.misuse(t, op, "unlocks a destroyed mutex".into());
                }
                match mx.owner {
                    Some(o) if o == t => {
                        mx.count -= 1;
                        if mx.count == 0 {
                            mx.owner = None;
                        }
                        Ok(Return(0))
                    }
                    Some(o) => self.misuse(t, op, format!("unlocks a mutex held by thread T{o}")),
                    None => self.misuse(t, op, "unlocks a mutex that is not locked".into()),
                }
            }
            Op::MutexDestroy { m } => match self.mutexes.get_mut(&m) {
                Some(mx) if mx.owner.is_some() && mx.life != Life::Destroyed => {
                    let o = mx.owner.unwrap_or(t);
                    self.misuse(t, op, format!("destroys a mutex locked by thread T{o}"))
                }
                Some(mx) => {
                    mx.life = Life::Destroyed;
                    Ok(Return(0))
                }
                None => {
                    self.mutexes
                        .insert(m, MutexState::new(MutexType::Normal, Life::Destroyed));
                    Ok(Return(0))
                }
            },
            Op::SpinInit { s } => {
                self.spins
                    .insert(s, MutexState::new(MutexType::Normal, Life::Initialised));
                Ok(Return(0))
            }
            Op::SpinLock { s, attempt } => {
                let sp = self
                    .spins
                    .entry(s)
                    .or_insert_with(|| MutexState::new(MutexType::Normal, Life::Implicit));
                if sp.life == Life::Destroyed {
                    return self.misuse(t, op, "locks a destroyed spin lock".into());
                }
                lock_mutex(sp, t, site, attempt, timed_out)
            }
            Op::SpinUnlock { s } => match self.spins.get_mut(&s) {
                Some(sp) if sp.owner == Some(t) => {
                    sp.owner = None;
                    sp.count = 0;
                    Ok(Return(0))
                }
                _ => self.misuse(t, op, "unlocks a spin lock it does not hold".into()),
            },
            Op::SpinDestroy { s } => match self.spins.get_mut(&s) {
                Some(sp) if sp.owner.is_some() => {
                    self.misuse(t, op, "destroys a locked spin lock".into())
                }
                Some(sp) => {
                    sp.life = Life::Destroyed;
                    Ok(Return(0))
                }
                None => Ok(Return(0)),
            },
            Op::RwInit { l } => {
                self.rwlocks.insert(
                    l,
                    RwLockState {
                        life: Life::Initialised,
                        ..Default::default()
                    },
                );
                Ok(Return(0))
            }
            Op::RwRead { l, attempt } | Op::RwWrite { l, attempt } => {
                let write = matches!(op, Op::RwWrite { .. });
                let rw = self.rwlocks.entry(l).or_default();
                if rw.life == Life::Destroyed {
                    return self.misuse(t, op, "locks a destroyed rwlock".into());
                }
                if rw.writer.is_some_and(|(w, _)| w == t) {
                    return Ok(Error(EDEADLK));
                }
                let free = rw.writer.is_none() && (!write || rw.readers.is_empty());
                if free {
                    if write {
                        rw.writer = Some((t, site));
                    } else {
                        rw.readers.push((t, site));
                    }
                    Ok(Return(0))
                } else if attempt == Attempt::Try {
                    Ok(Error(EBUSY))
                } else {
                    Ok(Error(ETIMEDOUT))
                }
            }
            Op::RwUnlock { l } => {
                let rw = self.rwlocks.entry(l).or_default();
                if rw.writer.is_some_and(|(w, _)| w == t) {
                    rw.writer = None;
                    Ok(Return(0))
                } else if let Some(i) = rw.readers.iter().position(|&(r, _)| r == t) {
                    rw.readers.remove(i);
                    Ok(Return(0))
                } else {
                    self.misuse(t, op, "unlocks an rwlock it does not hold".into())
                }
            }
            Op::RwDestroy { l } => {
                let rw = self.rwlocks.entry(l).or_default();
                if rw.writer.is_some() || !rw.readers.is_empty() {
                    return self.misuse(t, op, "destroys a locked rwlock".into());
                }
                rw.life = Life::Destroyed;
                Ok(Return(0))
            }
            Op::CondInit { c, monotonic } => {
                self.conds.insert(
                    c,
                    CondState {
                        life: Life::Initialised,
                        monotonic,
                        ..Default::default()
                    },
                );
                Ok(Return(0))
            }
            Op::CondWait { c, m, timeout } => {
                if self
                    .conds
                    .get(&c)
                    .is_some_and(|cv| cv.life == Life::Destroyed)
                {
                    return self.misuse(t, op, "waits on a destroyed condition variable".into());
                }
                let count = match self.mutexes.get_mut(&m) {
                    Some(mx) if mx.owner == Some(t) => {
                        let count = mx.count;
                        mx.owner = None;
                        mx.count = 0;
                        count
                    }
                    _ => {
                        return self.misuse(
                            t,
                            op,
                            "waits on a condition variable without holding its mutex".into(),
                        )
                    }
                };
                self.conds.entry(c).or_default().waiters.push_back(t);
                self.block_with(t, Op::CondResume { c, m, count }, timeout)
            }
            Op::CondResume { c, m, count } => {
                if let Some(cv) = self.conds.get_mut(&c) {
                    if let Some(i) = cv.waiters.iter().position(|&w| w == t) {
                        cv.waiters.remove(i);
                        if i < cv.g1_len {
                            // It leaves G1, taking one of its signals if it was woken.
                            cv.g1_len -= 1;
                            if woken {
                                cv.g1_signals -= 1;
                            }
                        }
                    }
                    self.settle_cond(c);
                }
                let mx = self
                    .mutexes
                    .entry(m)
                    .or_insert_with(|| MutexState::new(MutexType::Normal, Life::Implicit));
                mx.owner = Some(t);
                mx.count = count.max(1);
                mx.acquired_at = site;
                Ok(if woken { Return(0) } else { Error(ETIMEDOUT) })
            }
            Op::CondSignal { c } | Op::CondBroadcast { c } => {
                let all = matches!(op, Op::CondBroadcast { .. });
                let cv = self.conds.entry(c).or_default();
                if cv.life == Life::Destroyed {
                    return self.misuse(t, op, "signals a destroyed condition variable".into());
                }
                if all {
                    let woken: Vec<ThreadId> = cv.waiters.drain(..).collect();
                    (cv.g1_len, cv.g1_signals) = (0, 0);
                    for w in woken {
                        self.threads[w].woken = true;
                    }
                } else if !cv.waiters.is_empty() {
                    if cv.g1_len == 0 {
                        // G1 has no waiter left without a signal: G2 becomes G1.
                        cv.g1_len = cv.waiters.len();
                    }
                    cv.g1_signals += 1;
                    self.settle_cond(c);
                }
                Ok(Return(0))
            }
            Op::CondDestroy { c } => {
                let threads = &self.threads;
                let cv = self.conds.entry(c).or_default();
                // A waiter signalled but not yet back holds no claim on it.
                if let Some(&w) = cv.waiters.iter().find(|&&w| !threads[w].woken) {
                    return self.misuse(
                        t,
                        op,
                        format!("destroys a condition variable that thread T{w} waits on"),
                    );
                }
                cv.life = Life::Destroyed;
                Ok(Return(0))
            }
            Op::SemInit { s, value } => {
                self.sems.insert(
                    s,
                    SemState {
                        value,
                        life: Life::Initialised,
                    },
                );
                Ok(Return(0))
            }
            Op::SemWait { s, attempt } => {
                let sem = self.live_sem(t, op, s)?;
                if sem.value > 0 {
                    sem.value -= 1;
                    Ok(Return(0))
                } else if attempt == Attempt::Try {
                    Ok(Error(EAGAIN))
                } else {
                    Ok(Error(ETIMEDOUT))
                }
            }
            Op::SemPost { s } => {
                let sem = self.live_sem(t, op, s)?;
                sem.value = sem.value.saturating_add(1);
                Ok(Return(0))
            }
            Op::SemGetValue { s, out } => {
                let value = self.live_sem(t, op, s)?.value;
                if mem.write_u32(out, value) {
                    Ok(Return(0))
                } else {
                    Ok(Error(EFAULT))
                }
            }
            Op::SemDestroy { s } => {
                self.live_sem(t, op, s)?.life = Life::Destroyed;
                Ok(Return(0))
            }
            Op::BarrierInit { b, count } => {
                if count == 0 {
                    return Ok(Error(EINVAL));
                }
                self.barriers.insert(
                    b,
                    BarrierState {
                        count,
                        arrived: 0,
                        generation: 0,
                        life: Life::Initialised,
                    },
                );
                Ok(Return(0))
            }
            Op::BarrierWait { b } => {
                let Some(bar) = self
                    .barriers
                    .get_mut(&b)
                    .filter(|x| x.life == Life::Initialised)
                else {
                    let what = if self.barriers.contains_key(&b) {
                        "waits on a destroyed barrier"
                    } else {
                        "waits on a barrier that was never initialised"
                    };
                    return self.misuse(t, op, what.into());
                };
                bar.arrived += 1;
                if bar.arrived >= bar.count {
                    bar.arrived = 0;
                    bar.generation += 1;
                    Ok(Return(-1))
                } else {
                    let generation = bar.generation;
                    self.block_with(t, Op::BarrierResume { b, generation }, None)
                }
            }
            Op::BarrierResume { .. } => Ok(Return(0)),
            // The executor runs the call natively, or makes it return as timed out.
            Op::Kernel { .. } => Ok(if timed_out { Error(ETIMEDOUT) } else { Native }),
            Op::BarrierDestroy { b } => match self.barriers.get_mut(&b) {
                Some(bar) if bar.arrived > 0 => {
                    let n = bar.arrived;
                    self.misuse(
                        t,
                        op,
                        format!("destroys a barrier that {n} thread(s) wait on"),
                    )
                }
                Some(bar) => {
                    bar.life = Life::Destroyed;
                    Ok(Return(0))
                }
                None => self.misuse(
                    t,
                    op,
                    "destroys a barrier that was never initialised".into(),
                ),
            },
            Op::Join { target, attempt } => {
                let Some(u) = target else { return Ok(Native) };
                if u == t {
                    return Ok(Error(EDEADLK));
                }
                if let Some(j) = self.threads[u].joined_by {
                    return self.misuse(
                        t,
                        op,
                        format!("joins thread T{u}, which thread T{j} already joined"),
                    );
                }
                if self.threads[u].detached {
                    return self.misuse(t, op, format!("joins thread T{u}, which is detached"));
                }
                if !self.threads[u].finished {
                    return Ok(Error(if attempt == Attempt::Try {
                        EBUSY
                    } else {
                        ETIMEDOUT
                    }));
                }
                self.threads[u].joined_by = Some(t);
                Ok(Native)
            }
            Op::Detach { target } => {
                if let Some(u) = target {
                    if self.threads[u].detached {
                        return self.misuse(t, op, format!("detaches thread T{u} twice"));
                    }
                    if self.threads[u].joined_by.is_some() {
                        return self.misuse(
                            t,
                            op,
                            format!("detaches thread T{u} after joining it"),
                        );
                    }
                    self.threads[u].detached = true;
                }
                Ok(Native)
            }
            Op::FutexWait {
                addr,
                expected,
                bitset,
                timeout,
            } => match mem.read_u32(addr) {
                None => Ok(Error(EFAULT)),
                Some(v) if v != expected => Ok(Error(EAGAIN)),
                Some(_) => {
                    self.futexes
                        .entry(addr)
                        .or_default()
                        .push_back(FutexWaiter { thread: t, bitset });
                    self.block_with(t, Op::FutexResume { addr }, timeout)
                }
            },
            Op::FutexResume { addr } => {
                if woken {
                    Ok(Return(0))
                } else {
                    if let Some(q) = self.futexes.get_mut(&addr) {
                        q.retain(|w| w.thread != t);
                    }
                    Ok(Error(ETIMEDOUT))
                }
            }
            Op::FutexWake {
                addr,
                count,
                bitset,
            } => Ok(Return(self.futex_wake(addr, count, bitset) as i64)),
            Op::FutexRequeue {
                addr,
                wake,
                requeue,
                to,
                expected,
            } => {
                if let Some(e) = expected {
                    match mem.read_u32(addr) {
                        None => return Ok(Error(EFAULT)),
                        Some(v) if v != e => return Ok(Error(EAGAIN)),
                        Some(_) => {}
                    }
                }
                let woke = self.futex_wake(addr, wake, u32::MAX);
                let moved = self.futex_requeue(addr, to, requeue);
                Ok(Return((woke + moved) as i64))
            }
        }
    }

    /// Whether spin lock `s` is held.
    pub fn spin_held(&self, s: Addr) -> bool {
        self.spins.get(&s).is_some_and(|x| x.owner.is_some())
    }

    /// The thread running the initialiser of once control `o`, while it runs.
    pub fn once_initialiser(&self, o: Addr) -> Option<ThreadId> {
        self.onces.get(&o).copied().flatten()
    }

    /// How many times thread `t` holds mutex `m` (its recursion depth; 0 when it does not
    /// own it).
    pub fn mutex_depth(&self, m: Addr, t: ThreadId) -> u32 {
        self.mutexes
            .get(&m)
            .filter(|mx| mx.owner == Some(t))
            .map_or(0, |mx| mx.count)
    }

    /// The initialiser's pthread_once(`o`) returned: the control is done.
    pub fn once_done(&mut self, o: Addr) {
        self.onces.insert(o, None);
    }

    /// Wakes up to `count` threads waiting on futex word `addr` (as the kernel does at thread
    /// exit for the clear_child_tid word); returns how many woke.
    pub fn wake_futex(&mut self, addr: Addr, count: u32) -> u32 {
        self.futex_wake(addr, count, u32::MAX)
    }

    fn live_sem(&mut self, t: ThreadId, op: &Op, s: Addr) -> Result<&mut SemState, ModelFinding> {
        let what = match self.sems.get(&s).map(|x| x.life) {
            Some(Life::Initialised) => None,
            Some(Life::Destroyed) => Some("uses a destroyed semaphore"),
            _ => Some("uses a semaphore that was never initialised"),
        };
        if let Some(what) = what {
            return Err(ModelFinding::Misuse {
                thread: t,
                object: op.object(),
                message: what.into(),
            });
        }
        Ok(self.sems.get_mut(&s).expect("checked above"))
    }

    fn futex_wake(&mut self, addr: Addr, count: u32, bitset: u32) -> u32 {
        let Some(q) = self.futexes.get_mut(&addr) else {
            return 0;
        };
        let mut woke = 0;
        let mut kept = VecDeque::new();
        while let Some(w) = q.pop_front() {
            if woke < count && w.bitset & bitset != 0 {
                self.threads[w.thread].woken = true;
                woke += 1;
            } else {
                kept.push_back(w);
            }
        }
        *q = kept;
        woke
    }

    fn futex_requeue(&mut self, from: Addr, to: Addr, count: u32) -> u32 {
        let moved: Vec<FutexWaiter> = match self.futexes.get_mut(&from) {
            Some(q) => {
                let n = (count as usize).min(q.len());
                q.drain(..n).collect()
            }
            None => return 0,
        };
        for w in &moved {
            self.threads[w.thread].pending = Some(Op::FutexResume { addr: to });
        }
        let n = moved.len() as u32;
        self.futexes.entry(to).or_default().extend(moved);
        n
    }
}

fn lock_mutex(
    mx: &mut MutexState,
    t: ThreadId,
    site: Site,
    attempt: Attempt,
    timed_out: bool,
) -> Outcome {
    use Completion::*;
    match mx.owner {
        None => {
            mx.owner = Some(t);
            mx.count = 1;
            mx.acquired_at = site;
            Ok(Return(0))
        }
        Some(o) if o == t => match mx.kind {
            MutexType::Recursive => {
                mx.count += 1;
                Ok(Return(0))
            }
            _ if attempt == Attempt::Try => Ok(Error(EBUSY)),
            MutexType::ErrorCheck => Ok(Error(EDEADLK)),
            MutexType::Normal => Ok(Error(ETIMEDOUT)),
        },
        Some(_) if attempt == Attempt::Try => Ok(Error(EBUSY)),
        Some(_) => {
            debug_assert!(timed_out, "lock of a held mutex executed without a timeout");
            Ok(Error(ETIMEDOUT))
        }
    }
}
