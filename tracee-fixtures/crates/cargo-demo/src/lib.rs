//! cargo-demo: a counter shared between threads, in two versions.
//!
//! - `tests::locked_counter` — verdict: none.  Every increment holds the mutex.
//! - `tests::unlocked_counter` — verdict: data_race.  `UnlockedCounter` reads and writes its
//!   value without synchronisation (an `unsafe impl Sync` that is wrong).

use std::cell::UnsafeCell;
use std::sync::Mutex;

/// A counter behind a mutex.
#[derive(Default)]
pub struct LockedCounter(Mutex<u64>);

impl LockedCounter {
    /// Adds one.
    pub fn bump(&self) {
        *self.0.lock().unwrap() += 1;
    }

    /// The value.
    pub fn get(&self) -> u64 {
        *self.0.lock().unwrap()
    }
}

/// A counter without synchronisation: its `Sync` is a lie.
#[derive(Default)]
pub struct UnlockedCounter(UnsafeCell<u64>);

unsafe impl Sync for UnlockedCounter {}

impl UnlockedCounter {
    /// Adds one (racy).
    pub fn bump(&self) {
        unsafe { *self.0.get() += 1 }
    }

    /// The value.
    pub fn get(&self) -> u64 {
        unsafe { *self.0.get() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn locked_counter() {
        let c = LockedCounter::default();
        thread::scope(|s| {
            s.spawn(|| c.bump());
            s.spawn(|| c.bump());
        });
        assert_eq!(c.get(), 2);
    }

    #[test]
    fn unlocked_counter() {
        let c = UnlockedCounter::default();
        thread::scope(|s| {
            s.spawn(|| c.bump());
            s.spawn(|| c.bump());
        });
        assert!(c.get() >= 1);
    }
}
