//! rust_condvar_ok — verdict: none.
//!
//! Correct use of std::sync::Condvar: a one-slot mailbox (Mutex<Option<u32>>)
//! passes 3 values from a producer to a consumer, using Condvar::wait_while
//! (predicate loop built in) in both directions, notify_one for the slot and
//! notify_all for the final "closed" state.  A notification sent before the
//! other side waits is never lost because the state is checked first.
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

struct Mailbox {
    slot: Option<u32>,
    closed: bool,
}

fn main() {
    let shared = Arc::new((
        Mutex::new(Mailbox { slot: None, closed: false }),
        Condvar::new(),
    ));

    let producer = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || {
            let (m, cv) = &*shared;
            for v in 1..=3 {
                let mut g = cv.wait_while(m.lock().unwrap(), |mb| mb.slot.is_some()).unwrap();
                g.slot = Some(v);
                drop(g);
                cv.notify_all();
            }
            let mut g = cv.wait_while(m.lock().unwrap(), |mb| mb.slot.is_some()).unwrap();
            g.closed = true;
            drop(g);
            cv.notify_all();
        })
    };

    let consumer = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || {
            let (m, cv) = &*shared;
            let mut sum = 0;
            loop {
                let mut g = cv
                    .wait_while(m.lock().unwrap(), |mb| mb.slot.is_none() && !mb.closed)
                    .unwrap();
                match g.slot.take() {
                    Some(v) => sum += v,
                    None => break, // closed and empty
                }
                drop(g);
                cv.notify_one();
            }
            sum
        })
    };

    producer.join().unwrap();
    let sum = consumer.join().unwrap();
    assert_eq!(sum, 6);
    println!("sum = {sum}");
}
