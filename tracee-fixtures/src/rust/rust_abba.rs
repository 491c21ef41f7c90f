//! rust_abba — verdict: deadlock.
//!
//! Lock-order inversion with std::sync::Mutex.  Thread 1 locks `a` then `b`,
//! thread 2 locks `b` then `a`.  Deadlock when both take their first lock
//! before either takes its second (a switch at the atomic compare-exchange
//! of the second lock); then both sleep in FUTEX_WAIT and main in join.
//! Otherwise both finish.
use std::sync::{Arc, Mutex};
use std::thread;

fn main() {
    let a = Arc::new(Mutex::new(0u32));
    let b = Arc::new(Mutex::new(0u32));

    let t1 = {
        let (a, b) = (Arc::clone(&a), Arc::clone(&b));
        thread::spawn(move || {
            let mut ga = a.lock().unwrap();
            let mut gb = b.lock().unwrap();
            *ga += 1;
            *gb += 1;
        })
    };
    let t2 = {
        let (a, b) = (Arc::clone(&a), Arc::clone(&b));
        thread::spawn(move || {
            let mut gb = b.lock().unwrap();
            let mut ga = a.lock().unwrap();
            *ga += 1;
            *gb += 1;
        })
    };
    t1.join().unwrap();
    t2.join().unwrap();
    println!("a={} b={}", a.lock().unwrap(), b.lock().unwrap());
}
