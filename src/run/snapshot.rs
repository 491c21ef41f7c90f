//! Fork snapshots at the program's first thread creation (Holt, "The One Page Model
//! Checker"): the first fresh execution of a worker forks a *template* of the process just
//! before its first `clone` of a thread, together with the tracer's state of that moment.
//! Every later execution forks a copy of the template instead of exec'ing the program again,
//! so the dynamic loader, the program's initialisation and the instrumentation are paid once.
//!
//! The single-threaded start is the same in every execution (there is nothing to schedule),
//! so starting from a copy gives the same execution as starting from exec:
//! - the copy's memory is the template's, breakpoints included; the tracer-side state (model,
//!   race detector, clocks, decisions so far) is cloned from the moment of the fork;
//! - the strategy is shown the decisions of the skipped start again (each had one choice);
//! - glibc's cached thread id (`struct pthread`'s `tid`, at a fixed offset from the thread
//!   pointer) is patched to the copy's pid. Patching was chosen over virtualising `gettid`
//!   (every tid-taking syscall would need translating) and over pid namespaces (copies of one
//!   template live in one namespace, so they cannot all get the template's pid).
//!
//! A copy shares with its template what fork shares: open file descriptions and MAP_SHARED
//! memory. When the program has something of that kind at the snapshot point (see
//! [`crate::tracee::procfs::fork_hazard`]), or moves the offset of a file opened before it,
//! snapshots are turned off for the search and the reason is said once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use nix::unistd::Pid;

use super::determinism::Determinism;
use super::execution::{ExecutionConfig, TraceStep};
use super::process::{Process, StopPlace};
use super::races::PendingReturn;
use crate::detect::race::RaceDetector;
use super::livelock::Window;
use crate::explore::{Decision, FairFilter, Point};
use crate::model::{Model, ThreadId};
use crate::report::ThreadReport;
use crate::tracee::fork::{discard, fork_stopped, ForkFrom};
use crate::tracee::memory::Memory;
use crate::tracee::procfs;
use crate::tracee::regs::Regs;

/// glibc 2.26+ on x86-64 keeps `struct pthread`'s `tid` here, relative to the thread pointer.
const GLIBC_TID_OFFSET: u64 = 0x2d0;
/// How far into the thread control block a cached tid is looked for (glibc's `struct
/// pthread` is about 0x900 bytes and ends the mapping it lives in).
const TCB_SCAN: usize = 0x800;
/// Single-threaded points kept for one snapshot at most (a longer start is not snapshotted).
const MAX_PREFIX_POINTS: usize = 100_000;

/// A scheduling point of the snapshotted start, shown to the strategy again on restore.
#[derive(Clone, Debug)]
pub(super) struct SavedPoint {
    pub enabled: Vec<ThreadId>,
    pub ops: Vec<&'static str>,
    pub current: Option<ThreadId>,
    pub current_yields: bool,
    pub step: usize,
    pub chosen: ThreadId,
}

impl SavedPoint {
    /// The point as the strategy saw it.
    pub fn point(&self) -> Point<'_> {
        Point {
            enabled: &self.enabled,
            ops: &self.ops,
            current: self.current,
            current_yields: self.current_yields,
            step: self.step,
        }
    }
}

/// Records the start's points while a snapshot is still wanted.
#[derive(Default)]
pub(super) struct PrefixRecorder {
    pub points: Vec<SavedPoint>,
    pub overflowed: bool,
}

impl PrefixRecorder {
    /// Notes one decision.
    pub fn record(&mut self, point: &Point<'_>, chosen: ThreadId) {
        if self.points.len() >= MAX_PREFIX_POINTS {
            self.overflowed = true;
            return;
        }
        self.points.push(SavedPoint {
            enabled: point.enabled.to_vec(),
            ops: point.ops.to_vec(),
            current: point.current,
            current_yields: point.current_yields,
            step: point.step,
            chosen,
        });
    }
}

/// The tracer-side state of an execution at the snapshot point.
#[derive(Clone)]
pub(super) struct SavedExecution {
    pub model: Model,
    pub races: Option<RaceDetector>,
    pub returns: HashMap<u64, Vec<PendingReturn>>,
    pub atomic_ranges: Vec<std::ops::Range<u64>>,
    pub recent_pcs: std::collections::VecDeque<u64>,
    pub traced_accesses: u64,
    pub instrumented: std::collections::HashSet<u64>,
    pub steps: u64,
    pub preemptions: u64,
    pub panic: Option<ThreadReport>,
    pub decisions: Vec<Decision>,
    pub trace: Vec<TraceStep>,
    pub window: Window,
    pub fair: Option<FairFilter>,
    pub det: Determinism,
}

/// What a restored execution starts from.
pub(super) struct Restored {
    /// The copy's record (main thread stopped with the snapshot registers).
    pub process: Process,
    /// The tracer-side state.
    pub state: SavedExecution,
    /// The points of the start, to show the strategy.
    pub prefix: Vec<SavedPoint>,
}

/// A template process stopped just before the program's first thread creation.
struct StartupSnapshot {
    template: Pid,
    /// Registers the main thread resumes with: at the `syscall` of the clone, to run it.
    regs: Regs,
    /// Where glibc caches the main thread's tid.
    tid_addr: u64,
    process: Process,
    state: SavedExecution,
    prefix: Vec<SavedPoint>,
    /// Offsets of files opened before the snapshot (shared with every copy).
    positions: Vec<(i32, u64)>,
}

impl Drop for StartupSnapshot {
    fn drop(&mut self) {
        discard(self.template);
    }
}

/// A worker's snapshots, by execution configuration.
#[derive(Default)]
pub struct Snapshots {
    startup: HashMap<String, StartupSnapshot>,
    refused: HashMap<String, String>,
    /// Executions started from a snapshot.
    pub restored: u64,
}

/// Said once per mcheck run.
static SAID: AtomicBool = AtomicBool::new(false);

/// The configuration a snapshot was made under: everything that can change the start.
/// (Racy-address points only exist once threads do, so `preempt_on_races` cannot.)
pub(super) fn key(cfg: &ExecutionConfig) -> String {
    let plain = ExecutionConfig {
        stack_requests: Vec::new(),
        preempt_on_races: false,
        ..cfg.clone()
    };
    format!("{plain:?}")
}

impl Snapshots {
    /// Whether the first thread creation of an execution under `key` should be snapshotted.
    pub(super) fn wanted(&self, key: &str) -> bool {
        !self.startup.contains_key(key) && !self.refused.contains_key(key)
    }

    /// Turns snapshots off for `key`, saying why once.
    pub(super) fn refuse(&mut self, key: &str, why: String) {
        self.startup.remove(key);
        if !SAID.swap(true, Ordering::SeqCst) {
            eprintln!("mcheck: note: fork snapshots are off for this program: {why}; every execution starts from exec");
        }
        self.refused.insert(key.to_string(), why);
    }

    /// A copy of the snapshot for `key`, ready to run, if there is one.
    pub(super) fn fork_startup(&mut self, key: &str) -> Result<Option<Restored>> {
        let Some(s) = self.startup.get(key) else {
            return Ok(None);
        };
        let copy = fork_stopped(
            s.template,
            ForkFrom::Stop {
                syscall_insn: s.regs.rip,
            },
            &s.regs,
        )
        .context("forking the snapshot template")?;
        let restored = (|| -> Result<Restored> {
            Memory::open(copy)?.write_u32(s.tid_addr, copy.as_raw() as u32)?;
            let mut process = s.process.copy_for(copy)?;
            process.threads[0].regs = s.regs;
            process.threads[0].place = StopPlace::Event;
            Ok(Restored {
                process,
                state: s.state.clone(),
                prefix: s.prefix.clone(),
            })
        })();
        match restored {
            Ok(r) => {
                self.restored += 1;
                Ok(Some(r))
            }
            Err(e) => {
                discard(copy);
                Err(e.context("preparing a copy of the snapshot"))
            }
        }
    }

    /// After an execution under `key`: a file opened before the snapshot whose offset moved
    /// would start the next copy elsewhere, so snapshots end there.
    pub(super) fn check_after_execution(&mut self, key: &str) {
        let Some(s) = self.startup.get(key) else {
            return;
        };
        if s.positions.is_empty() {
            return;
        }
        let now = procfs::file_positions(s.template);
        if let Some((fd, _)) = s.positions.iter().find(|p| !now.contains(p)) {
            let target = procfs::descriptor_target(s.template, *fd);
            let why = format!(
                "the program moves the offset of file descriptor {fd} ({target}), opened before its first thread and shared by fork copies"
            );
            self.refuse(key, why);
        }
    }

    /// Stores a new startup snapshot.
    pub(super) fn store(&mut self, key: &str, snapshot: NewSnapshot) {
        let NewSnapshot {
            template,
            regs,
            tid_addr,
            process,
            state,
            prefix,
        } = snapshot;
        let positions = procfs::file_positions(template);
        self.startup.insert(
            key.to_string(),
            StartupSnapshot {
                template,
                regs,
                tid_addr,
                process,
                state,
                prefix,
                positions,
            },
        );
    }

    /// Why snapshots were turned off for some configuration, if they were.
    pub fn refusal(&self) -> Option<&str> {
        self.refused.values().next().map(String::as_str)
    }

    /// Resident memory of the live templates, in bytes.
    pub fn resident_bytes(&self) -> u64 {
        self.startup
            .values()
            .map(|s| procfs::resident_bytes(s.template))
            .sum()
    }
}

/// A snapshot just taken, to be stored.
pub(super) struct NewSnapshot {
    pub template: Pid,
    pub regs: Regs,
    pub tid_addr: u64,
    pub process: Process,
    pub state: SavedExecution,
    pub prefix: Vec<SavedPoint>,
}

/// Where the C library caches thread `tid`'s id, given its thread pointer: glibc's offset
/// when it holds the tid, else the only word of the control block that does.
pub(super) fn cached_tid_address(mem: &Memory, fs_base: u64, tid: Pid) -> Option<u64> {
    if fs_base == 0 {
        return None;
    }
    let mut block = vec![0u8; TCB_SCAN];
    let mut len = TCB_SCAN;
    while mem.read(fs_base, &mut block[..len]).is_err() {
        len /= 2;
        if len < 0x40 {
            return None;
        }
    }
    block.truncate(len);
    let want = (tid.as_raw() as u32).to_le_bytes();
    let hits: Vec<u64> = (0..len - 3)
        .step_by(4)
        .filter(|&i| block[i..i + 4] == want)
        .map(|i| i as u64)
        .collect();
    if hits.contains(&GLIBC_TID_OFFSET) {
        return Some(fs_base + GLIBC_TID_OFFSET);
    }
    match hits.as_slice() {
        [only] => Some(fs_base + only),
        _ => None,
    }
}
