//! What a finding is: its kind, a one-line message, the threads involved with their stacks,
//! and how to reproduce it.

use serde::Serialize;

/// The kinds of findings (stable names, used in JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// No thread can proceed (or a wait-for cycle / a lock held by an exited thread).
    Deadlock,
    /// Two unsynchronised conflicting accesses.
    DataRace,
    /// SIGABRT (assert) or a Rust panic.
    Assertion,
    /// SIGSEGV, SIGBUS, SIGFPE or SIGILL.
    Crash,
    /// No progress under fair scheduling.
    Livelock,
    /// Same schedule, different results.
    Nondeterminism,
    /// An exit status other than the expected one, or death by another signal.
    ExitStatus,
    /// Wrong use of the threading API.
    ApiMisuse,
    /// A thread ran too long without reaching a scheduling point.
    Timeout,
    /// An access to a heap block after it was freed.
    UseAfterFree,
    /// A free of a block already freed.
    DoubleFree,
    /// A free of a pointer that is not the start of a live block.
    InvalidFree,
    /// Threads take locks in orders that can deadlock (a lock-order cycle that no gate lock,
    /// trylock or happens-before order protects), though no explored schedule deadlocked.
    LockOrder,
}

impl FindingKind {
    /// The stable name (`deadlock`, `api_misuse`...).
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Deadlock => "deadlock",
            FindingKind::DataRace => "data_race",
            FindingKind::Assertion => "assertion",
            FindingKind::Crash => "crash",
            FindingKind::Livelock => "livelock",
            FindingKind::Nondeterminism => "nondeterminism",
            FindingKind::ExitStatus => "exit_status",
            FindingKind::ApiMisuse => "api_misuse",
            FindingKind::Timeout => "timeout",
            FindingKind::UseAfterFree => "use_after_free",
            FindingKind::DoubleFree => "double_free",
            FindingKind::InvalidFree => "invalid_free",
            FindingKind::LockOrder => "lock_order",
        }
    }
}

/// One stack frame or source location.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct Frame {
    /// Runtime address, hex.
    pub address: String,
    /// Function name (demangled), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Source file, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Source line, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The module (executable or library file name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Offset in the module when there is no source location.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<String>,
    /// Offset into the function, hex, when its name comes from an ELF symbol rather than
    /// from DWARF (`memcpy+0x23`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_offset: Option<String>,
    /// This frame was inlined into the next one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
    /// The frame is in the program's own code (not a system library). Written to JSON
    /// inverted, as `"system": true` on the other frames, so that a report read back (by
    /// `mcheck audit`, for fingerprints) still tells them apart; a frame without the field,
    /// as in reports of earlier mcheck versions, reads as the program's own.
    #[serde(
        rename = "system",
        default = "own_code",
        skip_serializing_if = "is_own_code",
        serialize_with = "serialize_system",
        deserialize_with = "deserialize_system"
    )]
    pub user_code: bool,
}

/// Serde default of [`Frame::user_code`]: a frame not marked `system` is the program's.
fn own_code() -> bool {
    true
}

/// Serde's test for leaving `system` out: the program's own frames.
fn is_own_code(user_code: &bool) -> bool {
    *user_code
}

/// Writes [`Frame::user_code`] as `system`.
fn serialize_system<S: serde::Serializer>(user_code: &bool, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bool(!*user_code)
}

/// Reads `system` into [`Frame::user_code`].
fn deserialize_system<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    <bool as serde::Deserialize>::deserialize(d).map(|system| !system)
}

impl Frame {
    /// Whether the frame has a source file of the program's own, not of a toolchain library
    /// (Rust's std/core/alloc sources or vendored crates, C/C++ system headers) inlined into
    /// it.
    pub fn is_own_source(&self) -> bool {
        self.file.as_deref().is_some_and(|p| {
            !(p.starts_with("/rustc/")
                || p.starts_with("/usr/include/")
                || p.contains("/rust/deps/"))
        })
    }

    /// `function at file:line` or `function+offset (module+offset)`, for one-line mentions.
    pub fn short(&self) -> String {
        let func = self.function.as_deref().unwrap_or("??");
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{func} at {}:{l}", short_path(f)),
            _ => {
                let func = match &self.function_offset {
                    Some(o) if self.function.is_some() && o != "0x0" => format!("{func}+{o}"),
                    _ => func.to_string(),
                };
                match (&self.module, &self.offset) {
                    (Some(m), Some(o)) => format!("{func} ({m}+{o})"),
                    _ => format!("{func} ({})", self.address),
                }
            }
        }
    }
}

fn short_path(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// One thread involved in a finding.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct ThreadReport {
    /// Logical thread id (0 = main).
    pub id: usize,
    /// OS thread id in the execution that found it.
    pub tid: i32,
    /// The thread's own name, if it set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the thread was doing, in words.
    pub state: String,
    /// Its stack, innermost first.
    pub stack: Vec<Frame>,
    /// The process it belongs to, when the program ran as more than one process image
    /// (it forked, or exec'd another program).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessRef>,
}

/// A process of the traced tree, as reports name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ProcessRef {
    /// Its number in the tree, in creation order: 0 is the program as launched.
    pub number: usize,
    /// Its pid in the execution that found it.
    pub pid: i32,
    /// The executable it ran.
    pub program: String,
    /// The number of the process that started it (none for P0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<usize>,
}

impl ProcessRef {
    /// "P1 (abba_O2, pid 1234, started by P0)".
    pub fn short(&self) -> String {
        let parent = self
            .parent
            .map(|p| format!(", started by P{p}"))
            .unwrap_or_default();
        format!(
            "P{} ({}, pid {}{parent})",
            self.number,
            short_path(&self.program),
            self.pid
        )
    }
}

/// A bug found in one execution (read back from a JSON report by `mcheck audit`).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Finding {
    /// What kind of bug.
    pub kind: FindingKind,
    /// One line saying what happened.
    pub message: String,
    /// Further explanation lines for the human report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// Source locations that identify the bug (the innermost user frame of each thread).
    pub locations: Vec<Frame>,
    /// Threads involved.
    pub threads: Vec<ThreadReport>,
    /// Preemptive context switches in the witness schedule.
    pub preemptions: u64,
    /// Seed that reproduces the witness execution.
    pub seed: u64,
    /// Index of the execution that found it (1-based).
    pub execution: u64,
    /// Scheduling decisions in the witness execution.
    pub steps: u64,
    /// The strategy that found it.
    pub strategy: String,
    /// The schedule file that replays it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// For a livelock: the operations the execution keeps repeating, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<CycleStep>,
    /// For a nondeterminism finding: the earlier schedule, which took the same steps and
    /// ended differently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_schedule: Vec<crate::explore::Decision>,
    /// For a nondeterminism finding about a file the program writes: that file (the two
    /// schedules leave other bytes in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
}

impl Finding {
    /// Names the processes of the threads involved, in a detail line, when the program ran
    /// as more than one process image (threads are numbered across the process tree).
    pub fn name_processes(&mut self) {
        let mut seen: Vec<&ProcessRef> = Vec::new();
        for p in self.threads.iter().filter_map(|t| t.process.as_ref()) {
            if !seen.iter().any(|q| q.number == p.number) {
                seen.push(p);
            }
        }
        if seen.is_empty() {
            return;
        }
        let names: Vec<String> = (seen.iter())
            .map(|p| format!("{}: {}", p.short(), p.program))
            .collect();
        let line = format!("in process {}", names.join("; "));
        if !self.details.contains(&line) {
            self.details.push(line);
        }
    }
}

/// One operation of a livelock's repeating cycle.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct CycleStep {
    /// The thread that performs it.
    pub thread: usize,
    /// The operation (`yield`, `atomic`, `mutex_lock`...).
    pub op: String,
    /// Where it is called from, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Frame>,
}
