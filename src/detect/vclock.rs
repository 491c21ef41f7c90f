//! Vector clocks and epochs (Fidge/Mattern; epochs as in FastTrack, Flanagan & Freund,
//! PLDI'09): a thread's clock counts its own synchronisation releases; an epoch `c@t` is one
//! component, enough to represent a single last write or an ordered last read in O(1).

use crate::model::ThreadId;

/// A vector clock, indexed by thread id; missing components are 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VectorClock(Vec<u32>);

/// One component: the value `clock` of thread `thread`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    /// The thread.
    pub thread: ThreadId,
    /// Its clock value.
    pub clock: u32,
}

impl VectorClock {
    /// The zero clock.
    pub fn new() -> Self {
        VectorClock(Vec::new())
    }

    /// Component `t`.
    pub fn get(&self, t: ThreadId) -> u32 {
        self.0.get(t).copied().unwrap_or(0)
    }

    /// Sets component `t`.
    pub fn set(&mut self, t: ThreadId, v: u32) {
        if self.0.len() <= t {
            self.0.resize(t + 1, 0);
        }
        self.0[t] = v;
    }

    /// Increments component `t`.
    pub fn tick(&mut self, t: ThreadId) {
        let v = self.get(t) + 1;
        self.set(t, v);
    }

    /// Pointwise maximum with `other`.
    pub fn join(&mut self, other: &VectorClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Whether every component is ≤ the one of `other` (happens-before or equal).
    pub fn le(&self, other: &VectorClock) -> bool {
        self.0.iter().enumerate().all(|(t, &v)| v <= other.get(t))
    }

    /// The epoch of thread `t` in this clock.
    pub fn epoch(&self, t: ThreadId) -> Epoch {
        Epoch {
            thread: t,
            clock: self.get(t),
        }
    }
}

impl Epoch {
    /// Whether this epoch happens before (or is known to) the clock `vc`.
    pub fn le(&self, vc: &VectorClock) -> bool {
        self.clock <= vc.get(self.thread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_order() {
        let mut a = VectorClock::new();
        a.set(0, 2);
        let mut b = VectorClock::new();
        b.set(1, 3);
        assert!(!a.le(&b) && !b.le(&a), "concurrent");
        b.join(&a);
        assert!(a.le(&b));
        assert_eq!(b.get(0), 2);
        assert!(a.epoch(0).le(&b));
        assert!(!b.epoch(1).le(&a));
    }
}
