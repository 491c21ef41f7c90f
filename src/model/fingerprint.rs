//! A fingerprint of the synchronisation state, for the fair scheduler's notion of progress
//! (see `explore::fair`): a thread that yields twice in the same state has made no progress
//! that any other thread could observe through the model.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::objects::Life;
use super::state::Model;
use super::{Addr, ThreadId};

impl Model {
    /// A hash of what threads can wait for: lock owners and recursion counts, readers and
    /// writers, condvar and futex queues, semaphore values, barrier rounds, once controls,
    /// which threads exist and which have exited. Virtual time, call sites and the pending
    /// operations are left out: a spin loop that sleeps or yields at different points of the
    /// same state has not changed it. Plain and atomic memory is not seen either.
    pub fn sync_fingerprint(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.threads.len().hash(&mut h);
        for th in &self.threads {
            th.finished.hash(&mut h);
        }
        let mutex = |m: &super::objects::MutexState, h: &mut DefaultHasher| {
            m.owner.hash(h);
            m.count.hash(h);
            life(m.life).hash(h);
        };
        unordered(&self.mutexes, &mut h, mutex);
        unordered(&self.spins, &mut h, mutex);
        unordered(&self.rwlocks, &mut h, |l, h| {
            l.writer.map(|(t, _)| t).hash(h);
            let mut readers: Vec<ThreadId> = l.readers.iter().map(|&(t, _)| t).collect();
            readers.sort_unstable();
            readers.hash(h);
        });
        unordered(&self.conds, &mut h, |c, h| {
            c.waiters.hash(h);
            (c.g1_len, c.g1_signals).hash(h);
        });
        unordered(&self.sems, &mut h, |s, h| s.value.hash(h));
        unordered(&self.barriers, &mut h, |b, h| {
            b.arrived.hash(h);
            b.generation.hash(h);
        });
        unordered(&self.futexes, &mut h, |q, h| {
            for w in q {
                w.thread.hash(h);
            }
        });
        unordered(&self.onces, &mut h, |o, h| o.hash(h));
        h.finish()
    }
}

fn life(l: Life) -> u8 {
    match l {
        Life::Implicit => 0,
        Life::Initialised => 1,
        Life::Destroyed => 2,
    }
}

/// Feeds the entries of `map` into `h` independently of the map's iteration order.
fn unordered<V>(
    map: &HashMap<Addr, V>,
    h: &mut DefaultHasher,
    value: impl Fn(&V, &mut DefaultHasher),
) {
    let mut sum = 0u64;
    for (addr, v) in map {
        let mut e = DefaultHasher::new();
        addr.hash(&mut e);
        value(v, &mut e);
        sum = sum.wrapping_add(e.finish());
    }
    map.len().hash(h);
    sum.hash(h);
}

#[cfg(test)]
mod tests {
    use crate::model::{Attempt, Model, MutexType, Op};

    struct NoMemory;
    impl crate::model::MemoryView for NoMemory {
        fn read_u32(&mut self, _: u64) -> Option<u32> {
            Some(0)
        }
        fn write_u32(&mut self, _: u64, _: u32) -> bool {
            true
        }
    }

    fn run(m: &mut Model, t: usize, op: Op) {
        m.set_pending(t, op, 0).unwrap();
        m.execute(t, &mut NoMemory).unwrap();
    }

    #[test]
    fn lock_and_unlock_come_back_to_the_same_fingerprint() {
        let mut m = Model::new();
        let lock = Op::MutexLock {
            m: 0x100,
            attempt: Attempt::Block,
            kind: MutexType::Normal,
        };
        run(&mut m, 0, lock.clone());
        let held = m.sync_fingerprint();
        run(&mut m, 0, Op::MutexUnlock { m: 0x100 });
        let free = m.sync_fingerprint();
        assert_ne!(held, free);
        run(&mut m, 0, Op::Yield);
        assert_eq!(m.sync_fingerprint(), free, "a yield changes nothing");
        run(&mut m, 0, lock);
        assert_eq!(m.sync_fingerprint(), held);
    }

    #[test]
    fn a_new_thread_or_a_sleep() {
        let mut m = Model::new();
        let before = m.sync_fingerprint();
        m.add_thread();
        let two = m.sync_fingerprint();
        assert_ne!(before, two);
        m.set_pending(1, Op::Sleep { ns: 5 }, 0).unwrap();
        assert!(m.can_time_out(1));
        m.execute(1, &mut NoMemory).unwrap();
        assert_eq!(m.sync_fingerprint(), two, "virtual time is left out");
    }
}
