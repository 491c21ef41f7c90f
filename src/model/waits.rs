//! Who waits for what: the wait-for relation between blocked threads and the holders of the
//! objects they wait on, local deadlock detection (a wait-for cycle), the waits on objects
//! left held by exited threads, and the description of every blocked thread for deadlock
//! reports.
//!
//! A thread waiting for a lock whose owner exited is not a deadlock by itself: the program
//! may still end (HotSpot's VM thread exits holding `Threads_lock` on purpose, and the
//! launcher calls `exit`). It becomes one when no thread can run any more (the global
//! deadlock), which includes a program whose exit waits for that thread.

use super::ops::{Attempt, ObjectKind, ObjectRef, Op};
use super::state::Model;
use super::{Site, ThreadId};

/// A thread that holds what another waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The holding thread.
    pub thread: ThreadId,
    /// Where it acquired the object (0 when unknown).
    pub site: Site,
    /// The holder has exited without releasing it.
    pub exited: bool,
}

/// A blocked thread and what it waits on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedThread {
    /// The waiting thread.
    pub thread: ThreadId,
    /// The operation it is blocked in.
    pub op: &'static str,
    /// The object it waits on.
    pub object: ObjectRef,
    /// Who holds that object (empty for condvars, semaphores, futexes...).
    pub holders: Vec<Holder>,
    /// Where it called the blocking operation.
    pub site: Site,
}

/// A finding the model itself can establish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelFinding {
    /// Threads that can never proceed: a wait-for cycle, or no thread able to run;
    /// `blocked` describes every blocked thread.
    Deadlock {
        /// A local deadlock (a wait-for cycle) rather than "no thread can run".
        local: bool,
        /// Every blocked thread, the ones in the cycle first.
        blocked: Vec<BlockedThread>,
    },
    /// Wrong use of the threading API.
    Misuse {
        /// The offending thread.
        thread: ThreadId,
        /// The object misused.
        object: Option<ObjectRef>,
        /// What it did, as a phrase with the thread as subject ("unlocks a mutex ...").
        message: String,
    },
}

impl Model {
    /// What blocked thread `t` waits on and who holds it.
    pub fn describe_wait(&self, t: ThreadId) -> Option<BlockedThread> {
        let op = self.threads[t].pending.as_ref()?;
        if self.is_enabled(t) {
            return None;
        }
        let site = self.threads[t].site;
        let holder = |thread: ThreadId, site: Site| Holder {
            thread,
            site,
            exited: self.threads[thread].finished,
        };
        let (object, holders) = match *op {
            Op::Join {
                target: Some(u), ..
            } => (
                ObjectRef {
                    kind: ObjectKind::Thread,
                    addr: u as u64,
                },
                vec![holder(u, 0)],
            ),
            Op::Sleep { .. } => (
                ObjectRef {
                    kind: ObjectKind::Time,
                    addr: 0,
                },
                vec![],
            ),
            // The executor knows what the call waits for: the object names the thread.
            Op::Kernel { .. } => (
                ObjectRef {
                    kind: ObjectKind::Kernel,
                    addr: t as u64,
                },
                vec![],
            ),
            Op::MutexLock { m, .. } | Op::CondResume { m, .. } if self.mutex_owner(m).is_some() => {
                let (o, s) = self.mutex_owner(m).expect("checked");
                let object = if matches!(op, Op::CondResume { .. }) {
                    ObjectRef {
                        kind: ObjectKind::Mutex,
                        addr: m,
                    }
                } else {
                    op.object()?
                };
                (object, vec![holder(o, s)])
            }
            Op::Once { o } => {
                let holders = self
                    .once_initialiser(o)
                    .map(|u| holder(u, 0))
                    .into_iter()
                    .collect();
                (op.object()?, holders)
            }
            Op::SpinLock { s, .. } => {
                let holders = self
                    .spins
                    .get(&s)
                    .and_then(|x| x.owner.map(|o| holder(o, x.acquired_at)))
                    .into_iter()
                    .collect();
                (op.object()?, holders)
            }
            Op::RwRead { l, .. } | Op::RwWrite { l, .. } => {
                let mut holders = vec![];
                if let Some(rw) = self.rwlocks.get(&l) {
                    if let Some((w, s)) = rw.writer {
                        holders.push(holder(w, s));
                    }
                    if matches!(op, Op::RwWrite { .. }) {
                        for &(r, s) in &rw.readers {
                            if !holders.iter().any(|h| h.thread == r) {
                                holders.push(holder(r, s));
                            }
                        }
                    }
                }
                (op.object()?, holders)
            }
            _ => (op.object()?, vec![]),
        };
        Some(BlockedThread {
            thread: t,
            op: op.name(),
            object,
            holders,
            site,
        })
    }

    fn mutex_owner(&self, m: u64) -> Option<(ThreadId, Site)> {
        self.mutexes
            .get(&m)
            .and_then(|mx| mx.owner.map(|o| (o, mx.acquired_at)))
    }

    /// Whether `t` waits with no timeout (only such waits can deadlock).
    fn waits_forever(&self, t: ThreadId) -> bool {
        let th = &self.threads[t];
        let timed = th.deadline.is_some()
            || matches!(
                th.pending,
                Some(
                    Op::MutexLock {
                        attempt: Attempt::Timed(_),
                        ..
                    } | Op::RwRead {
                        attempt: Attempt::Timed(_),
                        ..
                    } | Op::RwWrite {
                        attempt: Attempt::Timed(_),
                        ..
                    }
                )
            );
        th.pending.is_some() && !timed && !self.is_enabled(t)
    }

    /// The blocked threads that wait forever on an object every holder of which has exited
    /// (a lock left held): they can never proceed, but the program may still end.
    pub fn orphaned_waits(&self) -> Vec<BlockedThread> {
        (self.blocked_threads().into_iter())
            .filter(|&t| self.waits_forever(t))
            .filter_map(|t| self.describe_wait(t))
            .filter(|b| {
                b.object.kind != ObjectKind::Thread
                    && !b.holders.is_empty()
                    && b.holders.iter().all(|h| h.exited)
            })
            .collect()
    }

    /// The finding for "no thread can run": every blocked thread described.
    pub fn global_deadlock(&self) -> ModelFinding {
        ModelFinding::Deadlock {
            local: false,
            blocked: self
                .blocked_threads()
                .into_iter()
                .filter_map(|t| self.describe_wait(t))
                .collect(),
        }
    }
}

/// Checks whether blocked thread `t` can never proceed because the holders it waits for
/// (transitively) wait for it. A holder that has exited ends the chain without a finding:
/// whether that wait matters depends on whether the program can still end.
pub(super) fn local_deadlock(model: &Model, t: ThreadId) -> Option<ModelFinding> {
    if !model.waits_forever(t) {
        return None;
    }
    let mut chain = vec![t];
    let mut seen = vec![false; model.thread_count()];
    if dead_chain(model, t, t, &mut chain, &mut seen) {
        let mut blocked: Vec<BlockedThread> = chain
            .iter()
            .filter_map(|&u| model.describe_wait(u))
            .collect();
        blocked.dedup_by_key(|b| b.thread);
        Some(ModelFinding::Deadlock {
            local: true,
            blocked,
        })
    } else {
        None
    }
}

/// Depth-first search along wait-for edges from `u`: true when it reaches `origin` again;
/// `chain` then holds the path.
fn dead_chain(
    model: &Model,
    origin: ThreadId,
    u: ThreadId,
    chain: &mut Vec<ThreadId>,
    seen: &mut [bool],
) -> bool {
    seen[u] = true;
    let Some(wait) = model.describe_wait(u) else {
        return false;
    };
    for h in &wait.holders {
        if h.thread == origin {
            return true;
        }
        if !seen[h.thread] && model.waits_forever(h.thread) {
            chain.push(h.thread);
            if dead_chain(model, origin, h.thread, chain, seen) {
                return true;
            }
            chain.pop();
        }
    }
    false
}
