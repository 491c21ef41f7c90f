// A use after free in unsafe Rust: the current configuration is a raw pointer behind a
// mutex. The updater swaps in a new one and frees the old one at once (Box::from_raw);
// a reader that took the old pointer before the swap still reads it after the lock is
// released. (What Arc, or an RCU grace period, is for.)
use std::sync::Mutex;
use std::thread;

struct Config {
    name: String,
    workers: usize,
}

static CURRENT: Mutex<usize> = Mutex::new(0);

fn current() -> *const Config {
    *CURRENT.lock().unwrap() as *const Config
}

fn update(workers: usize) {
    let new = Box::into_raw(Box::new(Config {
        name: "updated".to_string(),
        workers,
    }));
    let old = std::mem::replace(&mut *CURRENT.lock().unwrap(), new as usize);
    // Bug: a reader may still hold `old`.
    drop(unsafe { Box::from_raw(old as *mut Config) });
}

fn main() {
    let first = Box::into_raw(Box::new(Config {
        name: "initial".to_string(),
        workers: 2,
    }));
    *CURRENT.lock().unwrap() = first as usize;
    let reader = thread::spawn(|| {
        let c = current();
        let workers = unsafe { (*c).workers }; // use after free when update ran in between
        println!("workers: {workers}");
    });
    let updater = thread::spawn(|| update(4));
    reader.join().unwrap();
    updater.join().unwrap();
    let last = *CURRENT.lock().unwrap() as *mut Config;
    let last = unsafe { Box::from_raw(last) };
    println!("{} {}", last.name, last.workers);
}
