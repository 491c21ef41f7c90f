//! mcheck: a systematic concurrency checker for unmodified Linux x86-64 binaries.
//!
//! Layers, from the bottom up:
//! - [`binary`]: ELF, symbols, DWARF, instruction classes, unwinding (no ptrace).
//! - [`tracee`]: ptrace mechanics: spawning, threads, registers, memory, breakpoints.
//! - [`model`]: the pure semantic model of threads and synchronisation objects.
//! - [`detect`]: data race detection with vector clocks (no ptrace).
//! - [`patch`]: binary patching of access sites: trampolines, jumps, placement (no ptrace).
//! - [`explore`]: scheduling strategies behind one trait.
//! - [`run`]: the executor that drives a traced program through the model.
//! - [`report`]: findings, human text and JSON.
//! - [`audit`]: `mcheck audit`: manifests, batch runs, fingerprints, baselines, SARIF,
//!   JUnit, shards.

pub mod audit;
pub mod binary;
pub mod cli;
pub mod commands;
pub mod detect;
pub mod explore;
pub mod gdb;
pub mod model;
pub mod patch;
pub mod report;
pub mod run;
pub mod tracee;
