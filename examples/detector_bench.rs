//! Benchmark of the race detector alone (no tracee): nanoseconds per recorded access for
//! the shadow-memory detector (`mcheck::detect::race::RaceDetector`) and, side by side, the
//! per-byte detector it replaced (`src/detect/naive_model.rs`, kept as the reference of the
//! differential test). Run by `bench/run.sh` (`make bench`):
//!
//! ```text
//! cargo run --release --example detector_bench
//! ```
//!
//! `cargo run --release --example detector_bench -- one a2 100000000` runs one workload
//! of the new detector alone, for a profiler.
//!
//! Prints a markdown table. The old detector runs fewer accesses where it is slow or would
//! need gigabytes (its figures are per access or per MiB, so they compare); the workload
//! of each row says what was run.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hint::black_box;
use std::time::Instant;

use mcheck::detect::race::{Access, HeapBlock, Race, RaceDetector, Seen, SyncKey};
use mcheck::detect::vclock::VectorClock;
use mcheck::model::{Addr, ThreadId};

mod naive {
    use super::*;
    include!("../src/detect/naive_model.rs");
}
use naive::NaiveDetector;

/// What the benchmark needs of a detector.
trait Detector: Clone {
    fn fresh() -> Self;
    fn created(&mut self, parent: ThreadId, child: ThreadId);
    fn acquire(&mut self, t: ThreadId, key: SyncKey);
    fn release(&mut self, t: ThreadId, key: SyncKey);
    fn access(&mut self, a: Access) -> Option<Race>;
}

macro_rules! detector {
    ($t:ty) => {
        impl Detector for $t {
            fn fresh() -> Self {
                <$t>::new()
            }
            fn created(&mut self, parent: ThreadId, child: ThreadId) {
                self.thread_created(parent, child)
            }
            fn acquire(&mut self, t: ThreadId, key: SyncKey) {
                <$t>::acquire(self, t, key)
            }
            fn release(&mut self, t: ThreadId, key: SyncKey) {
                <$t>::release(self, t, key)
            }
            fn access(&mut self, a: Access) -> Option<Race> {
                <$t>::access(self, a)
            }
        }
    };
}
detector!(RaceDetector);
detector!(NaiveDetector);

const MIB: u64 = 1 << 20;
/// Bytes per array element in (a) and (b).
const ELEM: u64 = 4;
const BASE: Addr = 0x5555_0000_0000;
const LOCK: SyncKey = (1, 0x4000);

fn access(thread: ThreadId, addr: Addr, size: u64, write: bool, pc: u64) -> Access {
    Access {
        thread,
        addr,
        size,
        write,
        atomic: false,
        pc,
    }
}

/// A detector with threads 1 and 2 created by main.
fn two_threads<D: Detector>() -> D {
    let mut d = D::fresh();
    d.created(0, 1);
    d.created(0, 2);
    d
}

/// (a) One thread, `n` accesses of `elem` bytes walking a 1 MiB array over and over:
/// stores only (`a[i] = x`), or a load and a store per element (`a[i] += 1`).
fn one_thread<D: Detector>(d: &mut D, n: u64, load_too: bool, elem: u64) -> u64 {
    let per = if load_too { 2 } else { 1 };
    for i in 0..n / per {
        let addr = BASE + (i * elem) % MIB;
        if load_too {
            black_box(d.access(access(1, addr, elem, false, 0x10)));
        }
        black_box(d.access(access(1, addr, elem, true, 0x14)));
    }
    n / per * per
}

/// (b) Two threads taking turns under one mutex, `a[i] += 1` on a 64 KiB array each turn
/// (the accesses only: lock and unlock are counted in the time, not as accesses).
fn mutex_turns<D: Detector>(d: &mut D, n: u64) -> u64 {
    for i in 0..n / 2 {
        let t = 1 + (i % 2) as ThreadId;
        let addr = BASE + (i * ELEM) % (64 * 1024);
        d.acquire(t, LOCK);
        black_box(d.access(access(t, addr, 4, false, 0x20 + t as u64)));
        black_box(d.access(access(t, addr, 4, true, 0x30 + t as u64)));
        d.release(t, LOCK);
    }
    n / 2 * 2
}

/// (c) A memset of `total` bytes as accesses of up to 16 MiB by thread 1.
fn memset<D: Detector>(d: &mut D, t: ThreadId, total: u64, pc: u64) -> Option<Race> {
    let mut race = None;
    let mut at = 0;
    while at < total {
        let size = (total - at).min(16 * MIB);
        race = race.or(d.access(access(t, BASE + at, size, true, pc)));
        at += size;
    }
    race
}

/// Seconds `f` takes (the best of `reps` runs on fresh state made by `setup`).
fn time<S, R>(reps: usize, mut setup: impl FnMut() -> S, mut f: impl FnMut(&mut S) -> R) -> f64 {
    (0..reps)
        .map(|_| {
            let mut s = setup();
            let t0 = Instant::now();
            black_box(f(&mut s));
            t0.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

struct Row {
    what: &'static str,
    new_work: String,
    new_ns: f64,
    old_work: String,
    old_ns: f64,
    unit: &'static str,
}

fn main() {
    // `detector_bench one a|a2|a8|a28|b N`: only that workload, N accesses, new detector (for
    // profilers).
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [one, what, n] = &args[..] {
        assert_eq!(one, "one", "usage: detector_bench [one a|a2|a8|a28|b N]");
        let n: u64 = n.parse().expect("N: a number of accesses");
        let mut d = two_threads::<RaceDetector>();
        let t0 = Instant::now();
        match what.as_str() {
            "a" => one_thread(&mut d, n, false, ELEM),
            "a2" => one_thread(&mut d, n, true, ELEM),
            "a8" => one_thread(&mut d, n, false, 8),
            "a28" => one_thread(&mut d, n, true, 8),
            _ => mutex_turns(&mut d, n),
        };
        println!("{:.2} ns", t0.elapsed().as_secs_f64() * 1e9 / n as f64);
        return;
    }
    let mut rows = Vec::new();

    // (a) one thread, stores only, then load + store; 4-byte and 8-byte elements.
    for (load_too, elem, what) in [
        (false, 4, "(a) 1 thread, 4-byte stores over a 1 MiB array"),
        (
            true,
            4,
            "(a') 1 thread, 4-byte load + store (`a[i] += 1`) over a 1 MiB array",
        ),
        (false, 8, "(a8) 1 thread, 8-byte stores over a 1 MiB array"),
        (
            true,
            8,
            "(a8') 1 thread, 8-byte load + store over a 1 MiB array",
        ),
    ] {
        let (n_new, n_old) = (10_000_000, 1_000_000);
        let new = time(3, two_threads::<RaceDetector>, |d| {
            one_thread(d, n_new, load_too, elem)
        });
        let old = time(1, two_threads::<NaiveDetector>, |d| {
            one_thread(d, n_old, load_too, elem)
        });
        rows.push(Row {
            what,
            new_work: format!("{}M accesses", n_new / 1_000_000),
            new_ns: new * 1e9 / n_new as f64,
            old_work: format!("{}M accesses", n_old / 1_000_000),
            old_ns: old * 1e9 / n_old as f64,
            unit: "ns/access",
        });
    }

    // (b) two threads alternating under a mutex.
    let (n_new, n_old) = (10_000_000, 1_000_000);
    let new = time(3, two_threads::<RaceDetector>, |d| mutex_turns(d, n_new));
    let old = time(1, two_threads::<NaiveDetector>, |d| mutex_turns(d, n_old));
    rows.push(Row {
        what: "(b) 2 threads taking turns under a mutex, load + store per turn",
        new_work: format!("{}M accesses", n_new / 1_000_000),
        new_ns: new * 1e9 / n_new as f64,
        old_work: format!("{}M accesses", n_old / 1_000_000),
        old_ns: old * 1e9 / n_old as f64,
        unit: "ns/access (lock+unlock included)",
    });

    // (c) 64 MiB memset in 16 MiB accesses; the old detector on 4 MiB (64 MiB would
    // need ~4 GB of hash map).
    let new = time(3, two_threads::<RaceDetector>, |d| {
        memset(d, 1, 64 * MIB, 1)
    });
    let old = time(1, two_threads::<NaiveDetector>, |d| {
        memset(d, 1, 4 * MIB, 1)
    });
    rows.push(Row {
        what: "(c) memset of 64 MiB as 4 accesses of 16 MiB",
        new_work: "64 MiB".into(),
        new_ns: new * 1e3,
        old_work: "4 MiB (x16)".into(),
        old_ns: old * 16.0 * 1e3,
        unit: "ms per 64 MiB",
    });

    // (c') then a second thread's unsynchronised 64 MiB write, which must race.
    let racing = |d: &mut RaceDetector| {
        let race = memset(d, 2, 64 * MIB, 2);
        assert!(race.is_some(), "the second memset must race");
        race
    };
    let new = time(
        3,
        || {
            let mut d = two_threads::<RaceDetector>();
            memset(&mut d, 1, 64 * MIB, 1);
            d
        },
        racing,
    );
    let old = time(
        1,
        || {
            let mut d = two_threads::<NaiveDetector>();
            memset(&mut d, 1, 4 * MIB, 1);
            d
        },
        |d| {
            let race = memset(d, 2, 4 * MIB, 2);
            assert!(race.is_some(), "the second memset must race");
        },
    );
    rows.push(Row {
        what: "(c') then thread 2 writes the same 64 MiB unsynchronised (race reported)",
        new_work: "64 MiB".into(),
        new_ns: new * 1e3,
        old_work: "4 MiB (x16)".into(),
        old_ns: old * 16.0 * 1e3,
        unit: "ms per 64 MiB",
    });

    // (e) Ranges over memory with per-granule history: 64 MiB first written by 4-byte
    // stores of thread 1 (not timed), then read whole by thread 2 after a lock handover
    // (memcpy source: every granule checked and updated), or overwritten by thread 1.
    let granular = |n_bytes: u64| {
        move || {
            let mut d = two_threads::<RaceDetector>();
            for i in 0..n_bytes / 4 {
                d.access(access(1, BASE + i * 4, 4, true, 0x40));
            }
            d.release(1, LOCK);
            d.acquire(2, LOCK);
            d
        }
    };
    let new = time(2, granular(64 * MIB), |d| {
        let mut at = 0;
        while at < 64 * MIB {
            assert!(d.access(access(2, BASE + at, 16 * MIB, false, 3)).is_none());
            at += 16 * MIB;
        }
    });
    let old = time(
        1,
        || {
            let mut d = two_threads::<NaiveDetector>();
            for i in 0..MIB / 4 {
                d.access(access(1, BASE + i * 4, 4, true, 0x40));
            }
            d.release(1, LOCK);
            d.acquire(2, LOCK);
            d
        },
        |d| assert!(d.access(access(2, BASE, MIB, false, 3)).is_none()),
    );
    rows.push(Row {
        what: "(e) thread 2 reads 64 MiB (16 MiB ranges) that thread 1 wrote by 4-byte stores",
        new_work: "64 MiB".into(),
        new_ns: new * 1e3,
        old_work: "1 MiB (x64)".into(),
        old_ns: old * 64.0 * 1e3,
        unit: "ms per 64 MiB",
    });
    let new = time(2, granular(64 * MIB), |d| memset(d, 2, 64 * MIB, 4));
    rows.push(Row {
        what: "(e') thread 2 then overwrites those 64 MiB (16 MiB ranges)",
        new_work: "64 MiB".into(),
        new_ns: new * 1e3,
        old_work: "(as c)".into(),
        old_ns: rows
            .iter()
            .find(|r| r.what.starts_with("(c)"))
            .unwrap()
            .old_ns,
        unit: "ms per 64 MiB",
    });

    // (d) A snapshot: cloning the detector after (a') made a 1 MiB history.
    let mut new_d = two_threads::<RaceDetector>();
    one_thread(&mut new_d, 2 * MIB / 4, true, 4);
    let mut old_d = two_threads::<NaiveDetector>();
    one_thread(&mut old_d, 2 * MIB / 4, true, 4);
    let new = time(20, || (), |_| new_d.clone());
    let old = time(3, || (), |_| old_d.clone());
    rows.push(Row {
        what: "(d) clone (fork snapshot) of a detector holding a 1 MiB history",
        new_work: "1 clone".into(),
        new_ns: new * 1e6,
        old_work: "1 clone".into(),
        old_ns: old * 1e6,
        unit: "µs per clone",
    });

    // (f) What a clone pays later: its first write to each of the 256 shared pages.
    let new = time(
        5,
        || new_d.clone(),
        |c| {
            for page in 0..MIB / 4096 {
                c.access(access(2, BASE + page * 4096, 4, true, 0x50));
            }
        },
    );
    rows.push(Row {
        what: "(f) then the clone's first 4-byte write to each of those 256 pages (copy on write)",
        new_work: "256 writes".into(),
        new_ns: new * 1e6 / 256.0,
        old_work: "(copied in d)".into(),
        old_ns: f64::NAN,
        unit: "µs per page",
    });

    println!("## Race detector (cargo run --release --example detector_bench)\n");
    println!("| workload | unit | new: run | new | old (per byte): run | old | old / new |");
    println!("|---|---|---|---:|---|---:|---:|");
    for r in &rows {
        let (old, ratio) = if r.old_ns.is_nan() {
            ("–".to_string(), "–".to_string())
        } else {
            (
                format!("{:.2}", r.old_ns),
                format!("{:.0}×", r.old_ns / r.new_ns),
            )
        };
        println!(
            "| {} | {} | {} | {:.2} | {} | {old} | {ratio} |",
            r.what, r.unit, r.new_work, r.new_ns, r.old_work
        );
    }

    // Memory: shadow of the 1 MiB array (granules) and of the 64 MiB memset (pages).
    let (pages, bytes) = new_d.shadow_footprint();
    println!(
        "\nShadow memory of the new detector: 1 MiB array accessed by 4-byte loads and stores: \
         {pages} pages, {:.2} MiB ({:.2} bytes per accessed byte)",
        bytes as f64 / MIB as f64,
        bytes as f64 / MIB as f64
    );
    let mut d = two_threads::<RaceDetector>();
    memset(&mut d, 1, 64 * MIB, 1);
    let (pages, bytes) = d.shadow_footprint();
    println!(
        "64 MiB written by memset: {pages} pages, {:.2} MiB ({:.3} bytes per accessed byte)",
        bytes as f64 / MIB as f64,
        bytes as f64 / (64 * MIB) as f64
    );
}
