//! Bug detectors that watch an execution and need no ptrace: happens-before data race
//! detection with vector clocks ([`race`]).

pub mod race;
pub mod vclock;
