//! rust_mpsc_ok — verdict: none.
//!
//! Correct use of std::sync::mpsc: two producers send on an unbounded
//! channel (cloned Sender), and a rendezvous-ish sync_channel(1) carries
//! the acknowledgement back.  The receiver loops until every Sender is
//! dropped (recv() returns Err), so it terminates on every schedule.
use std::sync::mpsc;
use std::thread;

fn main() {
    let (tx, rx) = mpsc::channel::<u32>();
    let (ack_tx, ack_rx) = mpsc::sync_channel::<u32>(1);

    let mut producers = Vec::new();
    for base in [10u32, 20] {
        let tx = tx.clone();
        producers.push(thread::spawn(move || {
            for i in 0..2 {
                tx.send(base + i).unwrap();
            }
        }));
    }
    drop(tx);

    let consumer = thread::spawn(move || {
        let mut sum = 0;
        while let Ok(v) = rx.recv() {
            sum += v;
        }
        ack_tx.send(sum).unwrap();
    });

    for p in producers {
        p.join().unwrap();
    }
    let sum = ack_rx.recv().unwrap();
    consumer.join().unwrap();
    assert_eq!(sum, 10 + 11 + 20 + 21);
    println!("sum = {sum}");
}
