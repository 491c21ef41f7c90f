//! How one execution runs: the program and how it is started, what is instrumented and
//! recorded, the limits of one execution, and snapshots; each group belongs to the part
//! that uses it.

use std::time::Duration;

pub use super::instrument::InstrumentConfig;
use super::races::AccessKey;
pub use super::snapshots::{branch_snapshots_enabled, SnapshotConfig};
pub use super::world::ProgramSetup;
use crate::binary::ElfFile;

/// How to run the program.
#[derive(Clone, Debug)]
pub struct ExecutionConfig {
    /// The program and how it is started.
    pub program: ProgramSetup,
    /// What is instrumented and recorded, and where the program must stop.
    pub instrument: InstrumentConfig,
    /// The limits of one execution.
    pub limits: Limits,
    /// Fork snapshots and state hashing.
    pub snapshots: SnapshotConfig,
    /// Accesses whose stacks to capture (a second run of a schedule that found races).
    pub stack_requests: Vec<AccessKey>,
    /// Filter the enabled threads through the fair scheduler's priority relation
    /// (`explore::fair`) before the strategy chooses.
    pub fair: bool,
    /// Record a readable trace of every step (replay).
    pub trace: bool,
}

/// The limits of one execution, and what ends it.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The exit status that is not a finding.
    pub expect_exit: i32,
    /// Longest a thread may run without reaching a scheduling point.
    pub execution_timeout: Duration,
    /// Most scheduling decisions in one execution (None: unbounded).
    pub max_steps: Option<u64>,
    /// Most timeouts in one execution that fire while another thread could run
    /// (`run/kernel/timeouts.rs`).
    pub max_timeouts: u32,
    /// Longest time left before a deadline (virtual ns) for which a timeout may fire early
    /// (u64::MAX: no limit).
    pub early_timeout_horizon_ns: u64,
    /// Stop after this many decisions (replay --until).
    pub stop_after: Option<u64>,
}

impl ExecutionConfig {
    /// Whether `program` reads the time-stamp counter itself, so that it must be trapped.
    pub fn program_reads_tsc(program: &std::path::Path) -> bool {
        ElfFile::load(program).is_ok_and(|e| crate::binary::reads_time_stamp_counter(&e))
    }

    /// The configuration a snapshot was made under: everything that can change the start.
    /// (Racy-address points only exist once threads do, so `preempt_on_races` cannot.)
    pub fn snapshot_key(&self) -> String {
        let mut plain = ExecutionConfig {
            stack_requests: Vec::new(),
            ..self.clone()
        };
        plain.instrument.preempt_on_races = false;
        format!("{plain:?}")
    }
}
