//! The lock-order graph of one execution: an edge "thread T held L1 while it acquired L2"
//! for every blocking acquisition, and the search for a cycle of edges that could really
//! deadlock (a potential deadlock, as TSan's "lock-order-inversion" and helgrind report,
//! without their false alarms).
//!
//! A cycle `L1 → L2 → … → L1` is a potential deadlock only when all of these hold:
//! - its edges are taken by pairwise different threads;
//! - each edge's second acquisition could block: a successful trylock adds no edge, and
//!   neither does a successful timed lock (it gives up after its timeout, so it cannot
//!   close a deadlock that lasts);
//! - at each lock of the cycle, the thread that holds it and the thread that wants it
//!   conflict: not both as readers of an rwlock;
//! - no gate: no lock is held by every edge's thread since before its first lock, with at
//!   least one of them holding it exclusively (then the threads cannot be inside their
//!   first locks at once);
//! - the edges are pairwise concurrent under the happens-before order of the edges no
//!   other schedule can reverse: thread creation and join, and the hand-overs fed through
//!   [`LockOrder::released`]/[`LockOrder::acquired`] (semaphores, condition variables,
//!   barriers, futex wakes). Lock release→acquire edges are never used: in an ABBA
//!   execution that did not deadlock they always order the two orders.
//!
//! A lock is its address and its lifetime: initialising an address seen before, destroying
//! a lock or freeing its memory starts a new lock at the same address.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::vclock::VectorClock;
use crate::model::{Addr, ObjectKind, Site, ThreadId};

/// How a lock is held or wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A mutex, a spin lock, a write-locked rwlock.
    Exclusive,
    /// A read-locked rwlock.
    Shared,
}

impl Mode {
    /// Whether a holder in `self` mode blocks an acquisition in `other` mode.
    fn conflicts(self, other: Mode) -> bool {
        !(self == Mode::Shared && other == Mode::Shared)
    }
}

/// One lifetime of a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockId {
    /// Its address (with the model's address-space tag).
    pub addr: Addr,
    /// How many lifetimes at this address ended before this one.
    pub life: u32,
}

/// A lock a thread holds.
#[derive(Clone, Debug)]
struct Held {
    lock: LockId,
    kind: ObjectKind,
    mode: Mode,
    site: Site,
    count: u32,
}

/// "`thread` held `from` while it acquired `to`".
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    /// The acquiring thread.
    pub thread: ThreadId,
    /// The lock held.
    pub from: LockId,
    /// Its kind (mutex, rwlock, spin lock).
    pub from_kind: ObjectKind,
    /// How it is held.
    pub from_mode: Mode,
    /// Where it was acquired (return address of the call).
    pub from_site: Site,
    /// The lock acquired.
    pub to: LockId,
    /// Its kind.
    pub to_kind: ObjectKind,
    /// How it was acquired.
    pub to_mode: Mode,
    /// Where it was acquired.
    pub to_site: Site,
    /// Locks the thread held since before `from` and still held, with their modes.
    pub gates: Vec<(LockId, Mode)>,
    /// The thread's happens-before clock at the acquisition.
    clock: VectorClock,
}

impl Edge {
    /// Whether neither edge happens before the other.
    fn concurrent(&self, other: &Edge) -> bool {
        let (a, b) = (self.thread, other.thread);
        self.clock.get(a) > other.clock.get(a) && other.clock.get(b) > self.clock.get(b)
    }
}

/// An edge identified up to its clock's own component (the first of each is kept: it is
/// the one ordered after the fewest others).
type EdgeKey = (
    ThreadId,
    LockId,
    Mode,
    Site,
    LockId,
    Mode,
    Site,
    Vec<(LockId, Mode)>,
    u32,
);

/// Edges kept per execution at most: beyond, new edges are dropped (fewer reports, never a
/// false one).
pub const MAX_EDGES: usize = 20_000;
/// Locks in a reported cycle at most.
pub const MAX_CYCLE: usize = 4;
/// Extensions of a partial cycle tried by one search at most.
const SEARCH_BUDGET: u64 = 1_000_000;

/// The lock-order graph of one execution and what it needs to build it.
#[derive(Clone, Debug, Default)]
pub struct LockOrder {
    /// Happens-before clock of each thread (create, join and hand-overs only).
    clocks: Vec<VectorClock>,
    /// The locks each thread holds, in acquisition order.
    held: Vec<Vec<Held>>,
    /// Lifetimes ended at each address seen.
    lives: BTreeMap<Addr, u32>,
    /// Clocks released into each hand-over object.
    syncs: HashMap<(u8, Addr), VectorClock>,
    /// The edges, in the order they were first taken.
    edges: Vec<Edge>,
    seen: HashSet<EdgeKey>,
    /// Edges dropped at `MAX_EDGES`.
    dropped: u64,
}

impl LockOrder {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    fn clock(&mut self, t: ThreadId) -> &mut VectorClock {
        if self.clocks.len() <= t {
            self.clocks.resize(t + 1, VectorClock::new());
        }
        let c = &mut self.clocks[t];
        if c.get(t) == 0 {
            c.set(t, 1);
        }
        c
    }

    fn held_by(&mut self, t: ThreadId) -> &mut Vec<Held> {
        if self.held.len() <= t {
            self.held.resize(t + 1, Vec::new());
        }
        &mut self.held[t]
    }

    fn id(&self, addr: Addr) -> LockId {
        LockId {
            addr,
            life: self.lives.get(&addr).copied().unwrap_or(0),
        }
    }

    /// `parent` created `child`: everything `parent` did before happens before `child`.
    pub fn thread_created(&mut self, parent: ThreadId, child: ThreadId) {
        let from = self.clock(parent).clone();
        self.clock(child).join(&from);
        self.clock(parent).tick(parent);
    }

    /// `joiner` joined `joined`: everything `joined` did happens before what follows.
    pub fn thread_joined(&mut self, joiner: ThreadId, joined: ThreadId) {
        let from = self.clock(joined).clone();
        self.clock(joiner).join(&from);
    }

    /// `t` handed over through object `key` (a semaphore post, a condvar signal, a
    /// barrier arrival, a futex wake).
    pub fn released(&mut self, t: ThreadId, key: (u8, Addr)) {
        let c = self.clock(t).clone();
        self.syncs.entry(key).or_default().join(&c);
        self.clock(t).tick(t);
    }

    /// `t` took over through object `key` (a semaphore wait, a woken condvar waiter, a
    /// barrier departure, a woken futex waiter).
    pub fn acquired(&mut self, t: ThreadId, key: (u8, Addr)) {
        if let Some(c) = self.syncs.get(&key).cloned() {
            self.clock(t).join(&c);
        }
    }

    /// A lock was initialised at `addr`: if the address held a lock before, this is a new
    /// one.
    pub fn initialised(&mut self, addr: Addr) {
        if let Some(n) = self.lives.get_mut(&addr) {
            *n += 1;
        }
    }

    /// The lock at `addr` was destroyed.
    pub fn destroyed(&mut self, addr: Addr) {
        *self.lives.entry(addr).or_default() += 1;
    }

    /// The memory `[start, start + size)` was freed: the locks in it end.
    pub fn freed(&mut self, start: Addr, size: u64) {
        for (_, n) in self
            .lives
            .range_mut(start..start.saturating_add(size.max(1)))
        {
            *n += 1;
        }
    }

    /// `t` acquired the lock at `addr` (`kind`, in `mode`, from `site`); `blocking` when
    /// the acquisition could have waited (not a trylock or a timed lock). Returns the
    /// indexes of the edges it added.
    pub fn locked(
        &mut self,
        t: ThreadId,
        addr: Addr,
        kind: ObjectKind,
        mode: Mode,
        site: Site,
        blocking: bool,
    ) -> Vec<usize> {
        let lock = self.id(addr);
        self.lives.entry(addr).or_default();
        if let Some(h) = self.held_by(t).iter_mut().find(|h| h.lock == lock) {
            // A recursive relock or a second read lock: no new order.
            h.count += 1;
            return Vec::new();
        }
        let mut added = Vec::new();
        if blocking && !self.held_by(t).is_empty() {
            let clock = self.clock(t).clone();
            let held = self.held_by(t).clone();
            for (i, h) in held.iter().enumerate() {
                let gates: Vec<(LockId, Mode)> =
                    held[..i].iter().map(|g| (g.lock, g.mode)).collect();
                let key = (
                    t,
                    h.lock,
                    h.mode,
                    h.site,
                    lock,
                    mode,
                    site,
                    gates.clone(),
                    clock.get(t),
                );
                if self.seen.contains(&key) {
                    continue;
                }
                if self.edges.len() >= MAX_EDGES {
                    self.dropped += 1;
                    continue;
                }
                self.seen.insert(key);
                added.push(self.edges.len());
                self.edges.push(Edge {
                    thread: t,
                    from: h.lock,
                    from_kind: h.kind,
                    from_mode: h.mode,
                    from_site: h.site,
                    to: lock,
                    to_kind: kind,
                    to_mode: mode,
                    to_site: site,
                    gates,
                    clock: clock.clone(),
                });
            }
        }
        self.held_by(t).push(Held {
            lock,
            kind,
            mode,
            site,
            count: 1,
        });
        added
    }

    /// `t` released the lock at `addr` (once). A lock released by another thread than the
    /// one that took it (a spin lock used as a flag) is no longer held by that one.
    pub fn unlocked(&mut self, t: ThreadId, addr: Addr) {
        self.held_by(t);
        let owner = std::iter::once(t)
            .chain(0..self.held.len())
            .find(|&u| self.held[u].iter().any(|h| h.lock.addr == addr));
        let Some(u) = owner else { return };
        let held = &mut self.held[u];
        if let Some(i) = held.iter().rposition(|h| h.lock.addr == addr) {
            held[i].count -= 1;
            if held[i].count == 0 {
                held.remove(i);
            }
        }
    }

    /// The edges so far.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// Edges left out because the graph was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// A cycle of edges that could deadlock (indexes into [`Self::edges`], each edge's
    /// `to` the next one's `from`), if there is one of at most [`MAX_CYCLE`] locks.
    pub fn potential_deadlock(&self) -> Option<Vec<usize>> {
        let mut by_from: HashMap<LockId, Vec<usize>> = HashMap::new();
        for (i, e) in self.edges.iter().enumerate() {
            by_from.entry(e.from).or_default().push(i);
        }
        let mut budget = SEARCH_BUDGET;
        for start in 0..self.edges.len() {
            let mut chain = vec![start];
            if self.extend(&by_from, &mut chain, &mut budget) {
                return Some(chain);
            }
            if budget == 0 {
                return None;
            }
        }
        None
    }

    /// Extends `chain` (valid so far) to a deadlocking cycle whose smallest lock is its
    /// first edge's `from`.
    fn extend(
        &self,
        by_from: &HashMap<LockId, Vec<usize>>,
        chain: &mut Vec<usize>,
        budget: &mut u64,
    ) -> bool {
        let first = &self.edges[chain[0]];
        let last = &self.edges[*chain.last().expect("chain")];
        if last.to == first.from {
            return chain.len() > 1
                && last.to_mode.conflicts(first.from_mode)
                && !self.gated(chain);
        }
        if chain.len() >= MAX_CYCLE || last.to < first.from {
            return false;
        }
        let Some(next) = by_from.get(&last.to) else {
            return false;
        };
        for &n in next {
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            let e = &self.edges[n];
            let fits = e.from_mode.conflicts(last.to_mode)
                && chain.iter().enumerate().all(|(k, &c)| {
                    let c = &self.edges[c];
                    // Each lock once: only the first one closes the cycle.
                    let distinct = k == 0 || c.from != e.to;
                    c.thread != e.thread && distinct && c.concurrent(e)
                })
                && e.to >= first.from;
            if !fits {
                continue;
            }
            chain.push(n);
            if self.extend(by_from, chain, budget) {
                return true;
            }
            chain.pop();
        }
        false
    }

    /// Whether a gate lock keeps the threads of `cycle` from being inside their first
    /// locks at once: held by all of them, exclusively by one at least.
    fn gated(&self, cycle: &[usize]) -> bool {
        let first = &self.edges[cycle[0]];
        first.gates.iter().any(|&(g, _)| {
            let modes: Option<Vec<Mode>> = (cycle.iter())
                .map(|&i| {
                    let gates = &self.edges[i].gates;
                    gates.iter().find(|(l, _)| *l == g).map(|&(_, m)| m)
                })
                .collect();
            modes.is_some_and(|m| m.contains(&Mode::Exclusive))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Addr = 0xa0;
    const B: Addr = 0xb0;
    const C: Addr = 0xc0;
    const G: Addr = 0x60;
    const MUTEX: ObjectKind = ObjectKind::Mutex;

    fn lock(g: &mut LockOrder, t: ThreadId, addr: Addr) {
        g.locked(t, addr, MUTEX, Mode::Exclusive, addr + 1, true);
    }

    fn take(g: &mut LockOrder, t: ThreadId, order: &[Addr]) {
        for &l in order {
            lock(g, t, l);
        }
        for &l in order.iter().rev() {
            g.unlocked(t, l);
        }
    }

    /// Main creates threads 1 and 2 before either runs.
    fn two_threads() -> LockOrder {
        let mut g = LockOrder::new();
        g.thread_created(0, 1);
        g.thread_created(0, 2);
        g
    }

    #[test]
    fn abba_between_concurrent_threads_is_a_potential_deadlock() {
        let mut g = two_threads();
        take(&mut g, 1, &[A, B]);
        take(&mut g, 2, &[B, A]);
        let cycle = g.potential_deadlock().expect("cycle");
        assert_eq!(cycle.len(), 2);
        let threads: Vec<_> = cycle.iter().map(|&i| g.edges()[i].thread).collect();
        assert!(threads.contains(&1) && threads.contains(&2));
    }

    #[test]
    fn consistent_order_is_no_cycle() {
        let mut g = two_threads();
        take(&mut g, 1, &[A, B]);
        take(&mut g, 2, &[A, B]);
        assert_eq!(g.potential_deadlock(), None);
    }

    #[test]
    fn a_three_lock_cycle_is_found() {
        let mut g = two_threads();
        g.thread_created(0, 3);
        take(&mut g, 1, &[A, B]);
        take(&mut g, 2, &[B, C]);
        assert_eq!(g.potential_deadlock(), None);
        take(&mut g, 3, &[C, A]);
        assert_eq!(g.potential_deadlock().map(|c| c.len()), Some(3));
    }

    #[test]
    fn a_common_gate_lock_prevents_the_deadlock() {
        let mut g = two_threads();
        take(&mut g, 1, &[G, A, B]);
        take(&mut g, 2, &[G, B, A]);
        assert_eq!(g.potential_deadlock(), None);
    }

    #[test]
    fn a_gate_taken_after_the_first_lock_is_no_gate() {
        let mut g = two_threads();
        take(&mut g, 1, &[A, G, B]);
        take(&mut g, 2, &[B, G, A]);
        assert!(g.potential_deadlock().is_some());
    }

    #[test]
    fn a_gate_held_by_one_side_only_is_no_gate() {
        let mut g = two_threads();
        take(&mut g, 1, &[G, A, B]);
        take(&mut g, 2, &[B, A]);
        assert!(g.potential_deadlock().is_some());
    }

    #[test]
    fn a_gate_both_sides_only_read_is_no_gate() {
        let mut g = two_threads();
        for (t, order) in [(1, [A, B]), (2, [B, A])] {
            g.locked(t, G, ObjectKind::RwLock, Mode::Shared, 1, true);
            take(&mut g, t, &order);
            g.unlocked(t, G);
        }
        assert!(g.potential_deadlock().is_some());
    }

    #[test]
    fn a_trylock_or_timed_lock_closes_no_cycle() {
        let mut g = two_threads();
        take(&mut g, 1, &[A, B]);
        lock(&mut g, 2, B);
        g.locked(2, A, MUTEX, Mode::Exclusive, 7, false);
        assert_eq!(g.potential_deadlock(), None);
    }

    #[test]
    fn one_thread_taking_both_orders_cannot_deadlock_with_itself() {
        let mut g = two_threads();
        take(&mut g, 1, &[A, B]);
        take(&mut g, 1, &[B, A]);
        take(&mut g, 2, &[A]);
        assert_eq!(g.potential_deadlock(), None);
    }

    #[test]
    fn orders_separated_by_a_join_are_not_concurrent() {
        let mut g = LockOrder::new();
        g.thread_created(0, 1);
        take(&mut g, 1, &[A, B]);
        g.thread_joined(0, 1);
        g.thread_created(0, 2);
        take(&mut g, 2, &[B, A]);
        assert_eq!(g.potential_deadlock(), None);
    }

    #[test]
    fn a_thread_created_later_by_the_first_is_ordered_after_it() {
        let mut g = LockOrder::new();
        g.thread_created(0, 1);
        take(&mut g, 1, &[A, B]);
        g.thread_created(1, 2);
        take(&mut g, 2, &[B, A]);
        assert_eq!(g.potential_deadlock(), None);
    }

    #[test]
    fn a_thread_created_while_the_first_lock_is_held_is_concurrent() {
        // T2 holds B and creates T1, which takes A then B; T2 then takes A: T1 may take A
        // first and wait for B while T2 waits for A.
        let mut g = LockOrder::new();
        g.thread_created(0, 2);
        lock(&mut g, 2, B);
        g.thread_created(2, 1);
        lock(&mut g, 2, A);
        g.unlocked(2, A);
        g.unlocked(2, B);
        take(&mut g, 1, &[A, B]);
        assert!(g.potential_deadlock().is_some());
    }

    #[test]
    fn a_semaphore_hand_over_orders_the_two_orders() {
        let mut g = two_threads();
        take(&mut g, 1, &[A, B]);
        g.released(1, (4, 0x50));
        g.acquired(2, (4, 0x50));
        take(&mut g, 2, &[B, A]);
        assert_eq!(g.potential_deadlock(), None);
    }

    #[test]
    fn a_hand_over_before_the_first_order_orders_nothing() {
        let mut g = two_threads();
        g.released(1, (4, 0x50));
        take(&mut g, 1, &[A, B]);
        g.acquired(2, (4, 0x50));
        take(&mut g, 2, &[B, A]);
        assert!(g.potential_deadlock().is_some());
    }

    #[test]
    fn readers_do_not_block_readers() {
        let mut g = two_threads();
        // T1: read A, then B; T2: B, then read A: both want A only to read.
        g.locked(1, A, ObjectKind::RwLock, Mode::Shared, 1, true);
        lock(&mut g, 1, B);
        g.unlocked(1, B);
        g.unlocked(1, A);
        lock(&mut g, 2, B);
        g.locked(2, A, ObjectKind::RwLock, Mode::Shared, 2, true);
        assert_eq!(g.potential_deadlock(), None);
        // A writer of A in the second order does deadlock with the reader.
        g.unlocked(2, A);
        g.unlocked(2, B);
        lock(&mut g, 2, B);
        g.locked(2, A, ObjectKind::RwLock, Mode::Exclusive, 3, true);
        assert!(g.potential_deadlock().is_some());
    }

    #[test]
    fn a_destroyed_lock_and_its_successor_at_the_same_address_differ() {
        let mut g = two_threads();
        take(&mut g, 1, &[A, B]);
        g.destroyed(A);
        g.initialised(A);
        take(&mut g, 2, &[B, A]);
        assert_eq!(g.potential_deadlock(), None);
    }

    #[test]
    fn freed_memory_ends_the_locks_in_it() {
        let mut g = two_threads();
        take(&mut g, 1, &[A, B]);
        g.freed(A - 0x10, 0x20);
        take(&mut g, 2, &[B, A]);
        assert_eq!(g.potential_deadlock(), None);
        // Without the free, the same sequence is a cycle.
        let mut h = two_threads();
        take(&mut h, 1, &[A, B]);
        h.initialised(A + 0x100);
        take(&mut h, 2, &[B, A]);
        assert!(h.potential_deadlock().is_some());
    }

    #[test]
    fn a_recursive_relock_adds_no_self_edge() {
        let mut g = two_threads();
        lock(&mut g, 1, A);
        lock(&mut g, 1, A);
        g.unlocked(1, A);
        lock(&mut g, 1, B);
        assert_eq!(g.edges().len(), 1, "A→B only");
        assert_eq!(g.edges()[0].from.addr, A);
    }

    #[test]
    fn a_lock_released_by_another_thread_is_no_longer_held() {
        let mut g = two_threads();
        g.locked(1, A, ObjectKind::Spin, Mode::Exclusive, 1, true);
        g.unlocked(2, A);
        take(&mut g, 1, &[B]);
        assert!(g.edges().is_empty(), "A is not held when B is taken");
    }

    #[test]
    fn repeated_orders_are_kept_once_per_clock() {
        let mut g = two_threads();
        for _ in 0..1000 {
            take(&mut g, 1, &[A, B]);
        }
        assert_eq!(g.edges().len(), 1);
    }
}
