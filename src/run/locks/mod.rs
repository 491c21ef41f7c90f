//! The executor's lock-order part: feeds the model's completed lock operations, thread
//! creations and joins, hand-overs (semaphores, condvars, barriers, futex wakes) and frees
//! to the lock-order graph of the execution (`detect::lock_order`), captures the stack of
//! each new edge's acquisition while its thread is stopped there with the scheduling
//! decision that chose it, and turns a potential deadlock into a [`LockCycle`] when the
//! execution ends: a candidate the search confirms by steering the program into it
//! (`run/search/confirm.rs`), never a finding by itself.

use std::collections::HashMap;

use crate::detect::lock_order::{Edge, LockOrder, Mode};
use crate::model::{Addr, Attempt, Completion, ObjectKind, Op, Site, ThreadId};
use crate::report::{Finding, FindingKind, Frame, ThreadReport};
use crate::run::process::report::{finding, Reporter};

/// Tags of hand-over objects (their own key space; not the race detector's).
const SEM: u8 = 1;
const COND: u8 = 2;
const BARRIER: u8 = 3;
const FUTEX: u8 = 4;

/// The stacks of one edge's acquisitions: where the second lock was taken (the thread's
/// stack) and where the first was (its call site).
#[derive(Clone, Debug)]
struct EdgeStacks {
    second: Vec<Frame>,
    first: Frame,
}

/// The lock-order recording of one execution (kept in snapshots with the rest).
#[derive(Clone, Debug, Default)]
pub(in crate::run) struct LockRecording {
    graph: LockOrder,
    /// Stacks by (thread, lock-taking site, held lock's site): captured once per pair.
    stacks: HashMap<(ThreadId, Site, Site), EdgeStacks>,
    /// Where each edge's second acquisition was chosen, by edge index: the decision's
    /// index in the schedule and how many decisions of the same operation on the same lock
    /// its thread took before.
    steps: HashMap<usize, (usize, usize)>,
    /// Decided acquisitions so far, by (thread, decided operation, lock address).
    acquisitions: HashMap<(ThreadId, &'static str, Addr), usize>,
}

/// Where the confirmation of a cycle holds one of its threads: the decision at which it
/// was about to take its second lock (while holding the first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleHold {
    /// The thread.
    pub thread: ThreadId,
    /// The index of the decision that chose it for that acquisition.
    pub step: usize,
    /// How many decisions of the same operation on the same lock the thread took before
    /// it: what recognises the acquisition in an execution that is scheduled differently.
    pub nth: usize,
    /// The lock it acquires (its address).
    pub lock: Addr,
}

/// A lock-order cycle of one execution that could deadlock: the description of a
/// `lock_order` finding, and where each of its threads took its second lock.
#[derive(Clone, Debug)]
pub struct LockCycle {
    /// The cycle described (kind `lock_order`), for notes and old schedule files.
    pub finding: Finding,
    /// One per edge of the cycle, when its decision is known.
    pub holds: Vec<CycleHold>,
}

/// One edge of a reported cycle, with the names of its locks.
pub(in crate::run) struct NamedEdge {
    /// The edge.
    pub edge: Edge,
    /// The held lock, named (`` mutex `a` ``).
    pub from: String,
    /// The acquired lock, named.
    pub to: String,
}

/// The lock an acquisition takes (the second lock of the edges it adds).
fn acquired_lock(op: &Op) -> Option<Addr> {
    match *op {
        Op::MutexLock { m, .. } | Op::CondResume { m, .. } => Some(m),
        Op::SpinLock { s, .. } => Some(s),
        Op::RwRead { l, .. } | Op::RwWrite { l, .. } => Some(l),
        _ => None,
    }
}

impl LockRecording {
    /// `parent` created thread `child`.
    pub fn thread_created(&mut self, parent: ThreadId, child: ThreadId) {
        self.graph.thread_created(parent, child);
    }

    /// `joiner` joined `joined`.
    pub fn thread_joined(&mut self, joiner: ThreadId, joined: ThreadId) {
        self.graph.thread_joined(joiner, joined);
    }

    /// The heap block `[start, start + size)` was freed.
    pub fn freed(&mut self, start: u64, size: u64) {
        self.graph.freed(start, size);
    }

    /// `op`, called by `t` from `site` as chosen by decision `step` named `choice` (None:
    /// taken inside a call, without a decision), completed with `c`: its locks and
    /// hand-overs. `reporter` unwinds `t` (stopped at the operation) when a new edge needs
    /// a stack.
    pub fn record(
        &mut self,
        t: ThreadId,
        (op, step): (&Op, Option<(usize, &str)>),
        c: Completion,
        site: Site,
        reporter: &mut Reporter<'_>,
    ) {
        let decided = step.and_then(|(step, choice)| {
            let lock = acquired_lock(op)?;
            let name = [op.name(), op.timeout_name()]
                .into_iter()
                .find(|n| *n == choice)?;
            let count = self.acquisitions.entry((t, name, lock)).or_default();
            *count += 1;
            Some((step, *count - 1))
        });
        let ok = matches!(c, Completion::Return(0) | Completion::Native);
        let g = &mut self.graph;
        let blocking = |a: Attempt| a == Attempt::Block;
        let added = match *op {
            Op::MutexLock { m, attempt, .. } if ok => g.locked(
                t,
                m,
                ObjectKind::Mutex,
                Mode::Exclusive,
                site,
                blocking(attempt),
            ),
            Op::SpinLock { s, attempt } if ok => g.locked(
                t,
                s,
                ObjectKind::Spin,
                Mode::Exclusive,
                site,
                blocking(attempt),
            ),
            Op::RwRead { l, attempt } if ok => g.locked(
                t,
                l,
                ObjectKind::RwLock,
                Mode::Shared,
                site,
                blocking(attempt),
            ),
            Op::RwWrite { l, attempt } if ok => g.locked(
                t,
                l,
                ObjectKind::RwLock,
                Mode::Exclusive,
                site,
                blocking(attempt),
            ),
            // The woken waiter takes the mutex back (also after a timeout).
            Op::CondResume { c: cv, m, .. } if c != Completion::Blocked => {
                if c == Completion::Return(0) {
                    g.acquired(t, (COND, cv));
                }
                g.locked(t, m, ObjectKind::Mutex, Mode::Exclusive, site, true)
            }
            _ => {
                self.other(t, op, c, ok);
                Vec::new()
            }
        };
        for i in added {
            if let Some(at) = decided {
                self.steps.insert(i, at);
            }
            let e = &self.graph.edges()[i];
            let key = (t, e.to_site, e.from_site);
            let from_site = e.from_site;
            self.stacks.entry(key).or_insert_with(|| EdgeStacks {
                second: reporter.thread_stack(t),
                first: reporter.symbols.call_site(from_site),
            });
        }
    }

    /// Releases, lifetimes and hand-overs.
    fn other(&mut self, t: ThreadId, op: &Op, c: Completion, ok: bool) {
        let g = &mut self.graph;
        match *op {
            Op::MutexUnlock { m } if ok => g.unlocked(t, m),
            Op::SpinUnlock { s } if ok => g.unlocked(t, s),
            Op::RwUnlock { l } if ok => g.unlocked(t, l),
            Op::CondWait { m, .. } if c == Completion::Blocked => g.unlocked(t, m),
            Op::MutexInit { m, .. } if ok => g.initialised(m),
            Op::RwInit { l } if ok => g.initialised(l),
            Op::SpinInit { s } if ok => g.initialised(s),
            Op::MutexDestroy { m } if ok => g.destroyed(m),
            Op::RwDestroy { l } if ok => g.destroyed(l),
            Op::SpinDestroy { s } if ok => g.destroyed(s),
            Op::SemPost { s } if ok => g.released(t, (SEM, s)),
            Op::SemWait { s, .. } if ok => g.acquired(t, (SEM, s)),
            Op::CondSignal { c: cv } | Op::CondBroadcast { c: cv } => g.released(t, (COND, cv)),
            Op::BarrierWait { b } => {
                g.released(t, (BARRIER, b));
                if c == Completion::Return(-1) {
                    g.acquired(t, (BARRIER, b));
                }
            }
            Op::BarrierResume { b, .. } => g.acquired(t, (BARRIER, b)),
            Op::FutexWake { addr, .. } => g.released(t, (FUTEX, addr)),
            Op::FutexRequeue { addr, to, .. } => {
                g.released(t, (FUTEX, addr));
                g.released(t, (FUTEX, to));
            }
            Op::FutexResume { addr } if c == Completion::Return(0) => g.acquired(t, (FUTEX, addr)),
            _ => {}
        }
    }

    /// The edges of a cycle that could deadlock, if the execution has one, with where to
    /// hold each edge's thread to confirm it.
    pub fn potential_deadlock(&self) -> Option<(Vec<Edge>, Vec<CycleHold>)> {
        let cycle = self.graph.potential_deadlock()?;
        let edges = (cycle.iter()).map(|&i| self.graph.edges()[i].clone());
        let holds = (cycle.iter()).filter_map(|&i| {
            let (step, nth) = *self.steps.get(&i)?;
            let e = &self.graph.edges()[i];
            Some(CycleHold {
                thread: e.thread,
                step,
                nth,
                lock: e.to.addr,
            })
        });
        Some((edges.collect(), holds.collect()))
    }

    /// The `lock_order` finding of a cycle whose locks `named` gives names, with the
    /// stacks captured when its edges were taken.
    pub fn finding(&self, named: &[NamedEdge], reporter: &mut Reporter<'_>) -> Finding {
        let mut threads = Vec::new();
        let mut details = Vec::new();
        let mut clauses = Vec::new();
        for n in named {
            let e = &n.edge;
            let stacks = self.stacks.get(&(e.thread, e.to_site, e.from_site));
            let second = stacks.map(|s| s.second.clone()).unwrap_or_default();
            let first = stacks.map(|s| s.first.short()).unwrap_or_default();
            clauses.push(format!(
                "T{} took {} while holding {}",
                e.thread, n.to, n.from
            ));
            let taken = second
                .iter()
                .find(|f| f.user_code)
                .or(second.first())
                .map(Frame::short)
                .unwrap_or_default();
            details.push(format!(
                "T{} took {} at {first}, then {} at {taken}",
                e.thread, n.from, n.to
            ));
            let th = &reporter.p.threads[e.thread];
            threads.push(ThreadReport {
                id: e.thread,
                tid: th.tid.as_raw(),
                name: None,
                state: format!(
                    "acquired {} while holding {} (taken at {first})",
                    n.to, n.from
                ),
                stack: second,
                process: reporter.p.process_ref(e.thread),
            });
        }
        details.push(
            "the threads take these locks in opposite orders, with no common lock held around \
             both, and no thread creation, join or hand-over orders them: a schedule in which \
             each thread holds its first lock when the next one asks for it could deadlock"
                .to_string(),
        );
        let mut f = finding(
            FindingKind::LockOrder,
            format!(
                "lock-order inversion (potential deadlock): {}",
                clauses.join("; ")
            ),
            threads,
        );
        f.details = details;
        f
    }
}
