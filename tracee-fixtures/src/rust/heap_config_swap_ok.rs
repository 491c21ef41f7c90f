// The correct twin of heap_config_swap: the configuration is an Arc behind the mutex; a
// reader clones it, so the old one lives until its last reader drops it.
use std::sync::{Arc, Mutex};
use std::thread;

struct Config {
    name: String,
    workers: usize,
}

static CURRENT: Mutex<Option<Arc<Config>>> = Mutex::new(None);

fn current() -> Arc<Config> {
    CURRENT.lock().unwrap().clone().expect("configured")
}

fn update(workers: usize) {
    let new = Arc::new(Config {
        name: "updated".to_string(),
        workers,
    });
    let old = CURRENT.lock().unwrap().replace(new);
    drop(old);
}

fn main() {
    *CURRENT.lock().unwrap() = Some(Arc::new(Config {
        name: "initial".to_string(),
        workers: 2,
    }));
    let reader = thread::spawn(|| {
        let c = current();
        println!("workers: {}", c.workers);
    });
    let updater = thread::spawn(|| update(4));
    reader.join().unwrap();
    updater.join().unwrap();
    let last = current();
    println!("{} {}", last.name, last.workers);
}
