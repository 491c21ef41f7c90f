//! race_rust_mutex_mpsc_ok — verdict: none.
//!
//! Safe Rust sharing: an `Arc<Mutex<Vec<u64>>>` that two workers push to
//! (three pushes each, one lock per push, `yield_now` in between), and an
//! `mpsc` channel over which each worker sends two owned `Vec<u64>`s that it
//! built on its own (heap) and never touches again; main receives them,
//! reads and mutates them, and after joining locks the shared vector and
//! checks its contents.
//!
//! Every access to the shared Vec (its length, capacity, buffer — which may
//! be reallocated by a push) is inside the Mutex; each sent Vec's buffer is
//! written before `send` and read after `recv`, which the channel orders.
//! Safe Rust without `unsafe` cannot race, so the verdict is none on every
//! schedule (the std internals use atomics for their own synchronisation).
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

fn main() {
    let shared = Arc::new(Mutex::new(Vec::<u64>::new()));
    let (tx, rx) = mpsc::channel::<Vec<u64>>();

    let mut workers = Vec::new();
    for id in 0..2u64 {
        let shared = Arc::clone(&shared);
        let tx = tx.clone();
        workers.push(thread::spawn(move || {
            for i in 0..3u64 {
                shared.lock().unwrap().push(id * 10 + i);
                thread::yield_now();
            }
            for batch in 0..2u64 {
                let owned: Vec<u64> = (0..4).map(|k| id * 100 + batch * 10 + k).collect();
                tx.send(owned).unwrap();
            }
        }));
    }
    drop(tx);

    let mut received = 0u64;
    let mut batches = 0;
    while let Ok(mut v) = rx.recv() {
        received += v.iter().sum::<u64>();
        v.push(0); // main owns the buffer now (may reallocate it)
        v.clear();
        batches += 1;
    }
    for w in workers {
        w.join().unwrap();
    }

    let mut all = shared.lock().unwrap().clone();
    all.sort_unstable();
    assert_eq!(all, vec![0, 1, 2, 10, 11, 12]);
    assert_eq!(batches, 4);
    // worker 0: (0+1+2+3) + (10+11+12+13) = 52; worker 1: 52 + 8*100 = 852
    assert_eq!(received, 52 + 852);
    println!("shared = {all:?}, received sum = {received}");
}
