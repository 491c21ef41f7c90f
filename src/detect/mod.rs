//! Bug detectors that watch an execution and need no ptrace: happens-before data race
//! detection with vector clocks ([`race`]) over shadow memory (`shadow`), heap errors
//! over the blocks held in quarantine ([`heap`]), and the lock-order graph of potential
//! deadlocks ([`lock_order`]).

mod cell;
pub mod hash;
pub mod heap;
pub mod lock_order;
mod page;
pub mod race;
mod shadow;
mod sites;
pub mod vclock;
