//! rusttest_suite — a Rust test binary (`rustc --test`) for `mcheck test`: each test is
//! checked as its own search (tests/it/test_suites.rs).
//!
//! - `racy::lost_update` — verdict: data_race.  Two threads bump a plain counter through
//!   a raw pointer without a lock (unsynchronised read-modify-write); natively the
//!   assertion almost always holds, as the threads rarely overlap.
//! - `locks::abba` — verdict: deadlock.  Two threads take two mutexes in opposite
//!   orders; natively the first thread is nearly always done before the second starts.
//! - `handoff::mutex_condvar` — verdict: none.  A producer hands three values to a
//!   consumer through a Mutex<Option<u32>> and a Condvar, waiting in loops; correct on
//!   every schedule, and nothing inside libtest (its result channel) may be reported.
//! - `handoff::channel` — verdict: none.  Values sent over std's channels of all three
//!   flavours: list (unbounded), array (bounded) and zero (rendezvous).
//! - `arith::wrong_sum` — fails natively, on every run: its assertion is simply false.
//! - `slow::ignored_race` — #[ignore]d: skipped unless --include-ignored (a racy test, so
//!   that running it shows).
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// A counter shared without synchronisation (the racy tests).
struct Shared(*mut u64);
unsafe impl Send for Shared {}

/// Two threads each add one to `*counter` with a plain load and store.
fn bump_twice_unsynchronised() -> u64 {
    let counter = Box::into_raw(Box::new(0u64));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let p = Shared(counter);
            thread::spawn(move || {
                let p = p;
                unsafe { *p.0 += 1 }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    unsafe { *Box::from_raw(counter) }
}

mod racy {
    #[test]
    fn lost_update() {
        assert!(super::bump_twice_unsynchronised() >= 1);
    }
}

mod locks {
    use std::sync::{Arc, Mutex};
    use std::thread;

    #[test]
    fn abba() {
        let a = Arc::new(Mutex::new(0u32));
        let b = Arc::new(Mutex::new(0u32));
        let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
        let t = thread::spawn(move || {
            let _x = a2.lock().unwrap();
            let _y = b2.lock().unwrap();
        });
        {
            let _y = b.lock().unwrap();
            let _x = a.lock().unwrap();
        }
        t.join().unwrap();
    }
}

mod handoff {
    use super::*;

    #[test]
    fn mutex_condvar() {
        let slot = Arc::new((Mutex::new(None::<u32>), Condvar::new()));
        let consumer = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || {
                let (m, cv) = &*slot;
                let mut sum = 0;
                for _ in 0..3 {
                    let mut g = m.lock().unwrap();
                    while g.is_none() {
                        g = cv.wait(g).unwrap();
                    }
                    sum += g.take().unwrap();
                    cv.notify_all();
                }
                sum
            })
        };
        let (m, cv) = &*slot;
        for v in 1..=3 {
            let mut g = m.lock().unwrap();
            while g.is_some() {
                g = cv.wait(g).unwrap();
            }
            *g = Some(v);
            cv.notify_all();
        }
        assert_eq!(consumer.join().unwrap(), 6);
    }

    #[test]
    fn channel() {
        // The three flavours of std's channels: list (unbounded), array (bounded) and
        // zero (rendezvous); messages larger than a few words are copied with memcpy.
        let (tx, rx) = std::sync::mpsc::channel::<[u64; 40]>();
        let (ack_tx, ack_rx) = std::sync::mpsc::sync_channel::<u64>(0);
        let (arr_tx, arr_rx) = std::sync::mpsc::sync_channel::<Vec<u64>>(2);
        let t = thread::spawn(move || {
            let mut total = 0;
            while let Ok(v) = rx.recv() {
                total += v.iter().sum::<u64>();
            }
            for v in arr_rx.iter() {
                total += v.iter().sum::<u64>();
            }
            ack_tx.send(total).unwrap();
        });
        for i in 0..2 {
            tx.send([i; 40]).unwrap();
            arr_tx.send(vec![i, i + 1]).unwrap();
        }
        drop(tx);
        drop(arr_tx);
        assert_eq!(ack_rx.recv().unwrap(), 40 + 4);
        t.join().unwrap();
    }
}

mod arith {
    #[test]
    fn wrong_sum() {
        let parts = [1, 2, 3];
        assert_eq!(parts.iter().sum::<i32>(), 7, "the expected sum is wrong");
    }
}

mod slow {
    #[test]
    #[ignore = "slow; run with --include-ignored"]
    fn ignored_race() {
        assert!(super::bump_twice_unsynchronised() >= 1);
    }
}
