//! stack_scope_race — verdict: data_race.
//!
//! std::thread::scope lends a local of main's frame to a scoped thread; the
//! local is an UnsafeCell behind an `unsafe impl Sync` wrapper, and both the
//! scoped thread and main increment it with plain (non-atomic) code, so the
//! two read-modify-writes race: undefined behaviour that the program really
//! has (TSan reports it). main's increment is an access to its own frame.

use std::cell::UnsafeCell;

struct Shared(UnsafeCell<u64>);

// SAFETY: deliberately wrong: the fixture's bug is exactly this unsynchronised sharing.
unsafe impl Sync for Shared {}

#[inline(never)]
fn bump(counter: &Shared) {
    // SAFETY: see above; racy on purpose.
    unsafe { *counter.0.get() += 1 };
}

fn main() {
    let counter = Shared(UnsafeCell::new(0));
    std::thread::scope(|s| {
        s.spawn(|| bump(&counter));
        // SAFETY: see above; racy on purpose.
        unsafe { *counter.0.get() += 1 };
    });
    println!("done");
}
