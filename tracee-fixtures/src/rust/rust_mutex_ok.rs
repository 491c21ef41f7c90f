//! rust_mutex_ok — verdict: none.
//!
//! Correct use of std::sync::Mutex shared through Arc: three threads each
//! lock and increment three times (with lock() and try_lock() falling back
//! to lock()).  Rust's std Mutex is a futex-based lock whose fast path is a
//! LOCK CMPXCHG in the program's own code (std is linked in statically), so
//! mcheck sees it through atomic instructions and futex syscalls, not
//! through pthread functions.  main checks the total is 9.
use std::sync::{Arc, Mutex, TryLockError};
use std::thread;

fn main() {
    let counter = Arc::new(Mutex::new(0u32));
    let mut handles = Vec::new();
    for _ in 0..3 {
        let c = Arc::clone(&counter);
        handles.push(thread::spawn(move || {
            for i in 0..3 {
                if i == 1 {
                    match c.try_lock() {
                        Ok(mut g) => *g += 1,
                        Err(TryLockError::WouldBlock) => *c.lock().unwrap() += 1,
                        Err(TryLockError::Poisoned(e)) => panic!("poisoned: {e}"),
                    }
                } else {
                    *c.lock().unwrap() += 1;
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let total = *counter.lock().unwrap();
    assert_eq!(total, 9);
    println!("total = {total}");
}
