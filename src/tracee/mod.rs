//! The ptrace layer: everything that touches a traced process lives here, and only here may
//! `unsafe` appear. Spawning under seccomp, waiting for and decoding stops, registers, memory,
//! breakpoints, the access log shared with the tracee, fork snapshots, /proc inspection, CPU
//! pinning and the watchdog tick that lets the tracer notice a runaway thread.

pub mod access_log;
pub mod breakpoints;
pub mod cpu;
pub mod debugregs;
pub mod descriptors;
pub mod events;
pub mod fds;
pub mod file_paths;
pub mod files;
pub mod fork;
pub mod interrupt;
pub mod memory;
pub mod pagemap;
pub mod procfs;
pub mod regs;
pub mod seccomp;
pub mod signals;
pub mod spawn;
pub mod terminal;
pub mod threads;
pub mod watchdog;
pub mod write_tracking;

pub use events::{Event, WaitOutcome};
pub use nix::unistd::Pid;
