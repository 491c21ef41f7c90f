//! Findings and how they are written: the human report on stderr and the JSON file.

mod finding;
pub mod human;
pub mod json;
pub mod schedule;

pub use finding::{CycleStep, Finding, FindingKind, Frame, ProcessRef, ThreadReport};
