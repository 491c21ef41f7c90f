//! The program's world: what makes its executions deterministic (clocks, randomness,
//! auxv), its files (the file-system gate and the journal that undoes changes), and its
//! standard streams (stdin, stdout sinks, the captured stderr).

pub(super) mod capture;
pub(super) mod determinism;
pub(super) mod file_journal;
pub(super) mod fs_gate;
pub mod program_stdio;
