//! rust_order_assert — verdict: assertion.
//!
//! Initialisation-order bug in Rust.  A reader thread (spawned first) locks
//! a Mutex<Option<u32>> and `assert!`s it has been filled; a writer thread
//! fills it under the same mutex.  When the reader's critical section runs
//! first, the assert! panics (a Rust panic: reported as an assertion).  The
//! panic unwinds the reader; main's join().unwrap() then panics too and the
//! process exits with status 101.  If the writer goes first, all is fine.
use std::sync::{Arc, Mutex};
use std::thread;

fn main() {
    let config: Arc<Mutex<Option<u32>>> = Arc::new(Mutex::new(None));

    let reader = {
        let config = Arc::clone(&config);
        thread::spawn(move || {
            let g = config.lock().unwrap();
            assert!(g.is_some(), "config read before it was written");
            g.unwrap()
        })
    };
    let writer = {
        let config = Arc::clone(&config);
        thread::spawn(move || {
            *config.lock().unwrap() = Some(42);
        })
    };
    writer.join().unwrap();
    let v = reader.join().unwrap();
    println!("config = {v}");
}
