//! The threads a directed execution holds back ([`DirectedScheduler`](super::DirectedScheduler)),
//! each at one acquisition of a lock-order cycle. An execution scheduled differently from
//! the one that showed the cycle reaches that acquisition at another decision, so it is
//! recognised by what the thread does: its pending operation, the lock it takes, and how
//! many decisions of that operation on that lock the thread took before.

use super::Point;
use crate::model::{Addr, ObjectKind, ThreadId};

/// Where to hold one thread: just before its `nth` (from 0) decision of `op` on `lock`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The thread.
    pub thread: ThreadId,
    /// Its pending operation there (as named in schedules: `mutex_lock`).
    pub op: String,
    /// How many decisions of `op` on `lock` it took before.
    pub nth: usize,
    /// The lock it acquires there (None: any; then `nth` counts every decision of `op`).
    pub lock: Option<Addr>,
}

/// The holds of one directed execution, and which of them were reached.
pub(super) struct Holds {
    holds: Vec<Hold>,
    /// Per hold: the decisions its thread took that count towards `nth`.
    taken: Vec<usize>,
    /// Per hold: whether its thread is held (it reached the hold while the execution held
    /// threads back).
    held: Vec<bool>,
}

impl Holds {
    /// The holds, in the order they are let go.
    pub fn new(holds: Vec<Hold>) -> Self {
        let n = holds.len();
        Holds {
            holds,
            taken: vec![0; n],
            held: vec![false; n],
        }
    }

    /// The first hold.
    pub fn first(&self) -> Option<&Hold> {
        self.holds.first()
    }

    /// Whether the thread of hold `i` is enabled at `point` for exactly that acquisition.
    pub fn at_hold(&self, i: usize, point: &Point<'_>) -> bool {
        let h = &self.holds[i];
        let Some(k) = point.enabled.iter().position(|&t| t == h.thread) else {
            return false;
        };
        point.ops.get(k).is_some_and(|op| *op == h.op)
            && self.taken[i] == h.nth
            && touches(point, k, h.lock)
    }

    /// Marks the holds whose threads are at them at `point` as held; true when one was
    /// newly held.
    pub fn reach(&mut self, point: &Point<'_>) -> bool {
        let mut new = false;
        for i in 0..self.holds.len() {
            if !self.held[i] && self.at_hold(i, point) {
                self.held[i] = true;
                new = true;
            }
        }
        new
    }

    /// Whether `t` is held.
    pub fn is_held(&self, t: ThreadId) -> bool {
        (self.holds.iter().zip(&self.held)).any(|(h, &held)| held && h.thread == t)
    }

    /// The held threads, in the order of the holds.
    pub fn held(&self) -> impl Iterator<Item = ThreadId> + '_ {
        (self.holds.iter().zip(&self.held))
            .filter(|(_, &held)| held)
            .map(|(h, _)| h.thread)
    }

    /// `t` was chosen at `point`: counts the decision towards the holds it concerns.
    pub fn chose(&mut self, point: &Point<'_>, t: ThreadId) {
        let Some(k) = point.enabled.iter().position(|&u| u == t) else {
            return;
        };
        for (i, h) in self.holds.iter().enumerate() {
            if h.thread == t
                && point.ops.get(k).is_some_and(|op| *op == h.op)
                && touches(point, k, h.lock)
            {
                self.taken[i] += 1;
            }
        }
    }
}

/// Whether the pending operation of `point.enabled[k]` takes `lock` (always, for no lock or
/// when the point has no footprints).
fn touches(point: &Point<'_>, k: usize, lock: Option<Addr>) -> bool {
    let (Some(lock), Some(f)) = (lock, point.footprints.get(k)) else {
        return true;
    };
    (f.touches.iter()).any(|t| {
        t.object.addr == lock
            && matches!(
                t.object.kind,
                ObjectKind::Mutex | ObjectKind::Spin | ObjectKind::RwLock
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::testing::plain_point as point;
    use crate::model::{Footprint, Role};

    /// A footprint taking mutex `m`.
    fn lock(m: Addr) -> Footprint {
        let mut f = Footprint::default();
        f.touch_as(ObjectKind::Mutex, m, true, Role::Acquire);
        f
    }

    fn holds() -> Holds {
        Holds::new(vec![Hold {
            thread: 1,
            op: "mutex_lock".into(),
            nth: 1,
            lock: Some(0xb),
        }])
    }

    /// T1 and T2 both about to take a lock, with footprints `fps`.
    fn both<'a>(fps: &'a [Footprint]) -> Point<'a> {
        Point {
            footprints: fps,
            ..point(0, &[1, 2], &["mutex_lock", "mutex_lock"], None)
        }
    }

    #[test]
    fn counts_only_the_same_operation_on_the_same_lock() {
        let mut h = holds();
        let other_lock = [lock(0xa), lock(0xb)];
        let this_lock = [lock(0xb), lock(0xb)];
        // T1 takes another lock, and T2 this one: neither counts.
        h.chose(&both(&other_lock), 1);
        h.chose(&both(&this_lock), 2);
        assert!(!h.at_hold(0, &both(&this_lock)), "T1 took b no time before");
        // An unlock of b does not count either.
        h.chose(&point(0, &[1], &["mutex_unlock"], None), 1);
        assert!(!h.at_hold(0, &both(&this_lock)));
        h.chose(&both(&this_lock), 1);
        assert!(
            h.at_hold(0, &both(&this_lock)),
            "the second mutex_lock of b"
        );
        assert!(!h.at_hold(0, &both(&other_lock)), "T1 is about to take a");
        assert!(
            !h.at_hold(0, &point(0, &[2], &["mutex_lock"], None)),
            "T1 not enabled"
        );
        let unlock = ["mutex_unlock", "mutex_lock"];
        assert!(
            !h.at_hold(0, &point(0, &[1, 2], &unlock, None)),
            "another op"
        );
        h.chose(&both(&this_lock), 1);
        assert!(!h.at_hold(0, &both(&this_lock)), "past it");
    }

    #[test]
    fn without_footprints_any_lock_matches() {
        let mut h = holds();
        let p = point(0, &[1], &["mutex_lock"], None);
        assert!(!h.at_hold(0, &p));
        h.chose(&p, 1);
        assert!(h.at_hold(0, &p));
        assert!(!h.is_held(1));
        assert!(h.reach(&p), "newly held");
        assert!(h.is_held(1));
        assert!(!h.reach(&p), "already held");
        assert_eq!(h.held().collect::<Vec<_>>(), vec![1]);
    }
}
