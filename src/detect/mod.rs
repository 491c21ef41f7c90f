//! Bug detectors that watch an execution and need no ptrace: happens-before data race
//! detection with vector clocks ([`race`]) over shadow memory (`shadow`), and heap errors
//! over the blocks held in quarantine ([`heap`]).

mod cell;
pub mod hash;
pub mod heap;
mod page;
pub mod race;
mod shadow;
mod sites;
pub mod vclock;
