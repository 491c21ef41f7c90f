//! Bug detectors that watch an execution and need no ptrace: happens-before data race
//! detection with vector clocks ([`race`]) over shadow memory (`shadow`), heap errors
//! over the blocks held in quarantine ([`heap`]), the lock-order graph of potential
//! deadlocks ([`lock_order`]), and where two executions' outputs differ ([`output_diff`]).

mod cell;
pub mod hash;
pub mod heap;
pub mod lock_order;
pub mod output_diff;
mod page;
pub mod race;
mod shadow;
mod sites;
pub mod vclock;
