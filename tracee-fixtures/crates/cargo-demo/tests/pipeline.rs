//! An integration test of cargo-demo: a two-stage pipeline over std channels.
//!
//! - `pipeline` — verdict: none.  Values pass through a bounded channel to a worker that
//!   bumps a `LockedCounter` and reports over an unbounded channel.

use std::sync::mpsc;
use std::thread;

use cargo_demo::LockedCounter;

#[test]
fn pipeline() {
    let counter = LockedCounter::default();
    let (work_tx, work_rx) = mpsc::sync_channel::<u64>(1);
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    thread::scope(|s| {
        s.spawn(|| {
            for v in work_rx {
                counter.bump();
                done_tx.send(v * 2).unwrap();
            }
        });
        for v in 1..=2 {
            work_tx.send(v).unwrap();
        }
        drop(work_tx);
        let sum: u64 = (0..2).map(|_| done_rx.recv().unwrap()).sum();
        assert_eq!(sum, 6);
    });
    assert_eq!(counter.get(), 2);
}
