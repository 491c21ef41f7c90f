//! Bug detectors that watch an execution and need no ptrace: happens-before data race
//! detection with vector clocks ([`race`]) over shadow memory (`shadow`).

mod cell;
pub mod hash;
mod page;
pub mod race;
mod shadow;
mod sites;
pub mod vclock;
