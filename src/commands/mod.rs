//! The things a user asks mcheck to do: check a program ([`check`]), re-run a schedule
//! file ([`replay`]), audit many programs ([`audit`]), check each test of a test binary
//! ([`test`]) and merge audit shards ([`audit`]).
//! Each returns the process exit status or a [`Failure`].

pub mod audit;
pub mod check;
pub mod claimed_outputs;
pub mod progress;
pub mod replay;
pub mod test;

use std::ffi::OsString;

/// Why a command could not do its job.
#[derive(Debug)]
pub enum Failure {
    /// Bad usage or bad input (exit status 2), with a one-line explanation.
    Usage(String),
    /// Something went wrong inside mcheck (exit status 3).
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Internal(e)
    }
}

/// mcheck's own environment, as the program's.
pub fn current_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os().collect()
}

/// Lossy UTF-8 strings for reports and schedule files.
pub fn lossy(items: &[OsString]) -> Vec<String> {
    items
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}
