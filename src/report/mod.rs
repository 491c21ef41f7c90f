//! Findings and how they are written: the human report on stderr and the JSON file.

pub mod exit_status;
mod finding;
pub mod human;
pub mod json;
pub mod schedule;
pub mod shell;

pub use finding::{CycleStep, Finding, FindingKind, Frame, ThreadReport};
pub use shell::shell_quote;
