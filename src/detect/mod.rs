//! Bug detectors that watch an execution and need no ptrace: happens-before data race
//! detection with vector clocks ([`race`]) over shadow memory (`shadow`), and the lock-order
//! graph of potential deadlocks ([`lock_order`]).

mod cell;
pub mod hash;
pub mod lock_order;
mod page;
pub mod race;
mod shadow;
mod sites;
pub mod vclock;
