//! Schedule files: everything needed to re-run one witness execution exactly — the program
//! (path and SHA-256 of its contents), its arguments and environment, the options that shape
//! an execution, and every scheduling decision as a thread plus the kind of operation it
//! performs there, so that replay can tell when the program no longer follows the schedule.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Finding, FindingKind, Frame};
use crate::explore::Decision;

/// The `format` field of every schedule file.
pub const SCHEDULE_FORMAT: &str = "mcheck-schedule";
/// The current schedule file version.
pub const SCHEDULE_VERSION: u32 = 2;

/// Environment variables whose names contain one of these are not written to schedule files.
const SECRET_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "API_KEY",
    "PRIVATE",
];

/// Options that shape an execution and must be the same on replay.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutionOptions {
    /// `--expect-exit`.
    pub expect_exit: i32,
    /// `--execution-timeout`, seconds.
    pub execution_timeout: f64,
    /// `--max-steps`.
    pub max_steps: u64,
    /// `--max-timeouts` (absent in files written before timeouts were choices, which
    /// never chose one early: any bound replays them).
    #[serde(default = "default_max_timeouts")]
    pub max_timeouts: u32,
    /// `--early-timeout-horizon`, seconds (absent in files written before it existed,
    /// which had no horizon: infinity replays them; written as null when infinite).
    #[serde(default = "no_horizon", with = "horizon_seconds")]
    pub early_timeout_horizon: f64,
    /// Data race detection was on.
    #[serde(default = "yes")]
    pub races: bool,
    /// Heap checks were on (absent in files written before them: off), frees held in a
    /// quarantine of `quarantine_blocks` blocks (addresses depend on it).
    #[serde(default)]
    pub heap_checks: bool,
    /// Most freed blocks held in quarantine.
    #[serde(default)]
    pub quarantine_blocks: usize,
    /// The fair filter chose among the enabled threads (absent in files written before it
    /// existed, which were recorded without it).
    #[serde(default)]
    pub fair: bool,
    /// Racy accesses were scheduling points.
    #[serde(default)]
    pub preempt_on_races: bool,
    /// `--trace-lib` patterns.
    #[serde(default)]
    pub trace_lib: Vec<String>,
    /// `--no-trace-lib` patterns.
    #[serde(default)]
    pub no_trace_lib: Vec<String>,
    /// Addresses whose accesses were scheduling points (`--preempt-on-races`).
    #[serde(default)]
    pub racy_addresses: Vec<u64>,
    /// The instructions those accesses could stop at (absent in files written before
    /// accesses were recorded without stops: such a file is replayed with every access
    /// site on a breakpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub racy_sites: Option<Vec<u64>>,
    /// Reads of what a timed-out wait sets that were scheduling points while a wait could
    /// time out early (timeout polls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeout_poll_sites: Vec<u64>,
    /// Atomic loads of busy waits that were yield points once threads existed (a thread
    /// spun there with no scheduling point while another could run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy_wait_sites: Vec<u64>,
    /// Addresses known to hold atomics (plain loads and stores of them are atomic).
    #[serde(default)]
    pub atomic_addresses: Vec<u64>,
    /// What the program's stdin and stdout were (absent in files written before they were
    /// recorded: the replay passes on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdio: Option<StdioKinds>,
    /// The signals ignored when the program started (absent in files written before they
    /// were recorded: the replay gives what mcheck was given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored_signals: Option<Vec<i32>>,
    /// The signals blocked when the program started (as `ignored_signals`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_signals: Option<Vec<i32>>,
    /// The CPUs sched_getaffinity showed the program (absent in files written before they
    /// were shown: the program saw the one CPU it was pinned to, and so it does on replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<usize>>,
}

/// The kind of file a standard stream is: programs take other paths on each (a terminal
/// is line-buffered, a pipe cannot seek...), so a replay gives the program the same kinds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StreamKind {
    /// /dev/null.
    Null,
    /// A terminal.
    Terminal,
    /// A pipe or FIFO.
    Pipe,
    /// A regular file.
    File,
    /// A socket.
    Socket,
    /// Another kind of file.
    Other,
    /// Not open.
    Closed,
}

impl StreamKind {
    /// How a user calls it.
    pub fn describe(self) -> &'static str {
        match self {
            StreamKind::Null => "/dev/null",
            StreamKind::Terminal => "a terminal",
            StreamKind::Pipe => "a pipe",
            StreamKind::File => "a regular file",
            StreamKind::Socket => "a socket",
            StreamKind::Other => "a device",
            StreamKind::Closed => "closed",
        }
    }
}

/// The kinds of the program's stdin and stdout (its stderr is always mcheck's pipe).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct StdioKinds {
    /// Its stdin.
    pub stdin: StreamKind,
    /// Its stdout.
    pub stdout: StreamKind,
}

fn yes() -> bool {
    true
}

fn default_max_timeouts() -> u32 {
    2
}

fn no_horizon() -> f64 {
    f64::INFINITY
}

/// JSON has no infinity: an infinite horizon is written as null.
mod horizon_seconds {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
    }
}

/// Seconds of `--early-timeout-horizon` as virtual nanoseconds (u64::MAX: no limit).
pub fn horizon_ns(seconds: f64) -> u64 {
    if seconds.is_finite() {
        (seconds * 1e9).min(u64::MAX as f64) as u64
    } else {
        u64::MAX
    }
}

/// What the schedule shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedFinding {
    /// Finding kind.
    pub kind: FindingKind,
    /// Its message when recorded.
    pub message: String,
    /// Its source locations when recorded.
    pub locations: Vec<Frame>,
    /// For a nondeterminism finding: the other schedule, which took the same steps and
    /// ended differently (replay runs both).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_decisions: Vec<Decision>,
    /// For a nondeterminism finding about a file the program writes: that file (replay
    /// compares what each schedule leaves in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
}

/// A schedule file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScheduleFile {
    /// Always [`SCHEDULE_FORMAT`].
    pub format: String,
    /// [`SCHEDULE_VERSION`].
    pub version: u32,
    /// mcheck version that wrote it.
    pub mcheck_version: String,
    /// Absolute path of the program.
    pub program: PathBuf,
    /// SHA-256 of the program file, hex.
    pub program_sha256: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The environment it ran with (minus names that look like secrets).
    pub env: Vec<(String, String)>,
    /// Execution options.
    pub options: ExecutionOptions,
    /// Strategy that found it (a portfolio names its member).
    pub strategy: String,
    /// Seed of the witness execution.
    pub seed: u64,
    /// Index of the witness execution in its search.
    pub execution: u64,
    /// Preemptions in the schedule.
    pub preemptions: u64,
    /// The finding the schedule leads to.
    pub finding: RecordedFinding,
    /// Every scheduling decision.
    pub decisions: Vec<Decision>,
}

/// Problems with a schedule file.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// Unreadable file.
    #[error("{path}: cannot read the schedule file: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not JSON of the right shape.
    #[error("{path}: not a valid mcheck schedule file: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The program file differs from the one recorded.
    #[error("{program}: the program changed since the schedule was recorded (SHA-256 {actual}, recorded {recorded}); rebuild the old binary or find the bug again with a new search")]
    ProgramChanged {
        /// The program.
        program: PathBuf,
        /// Hash now.
        actual: String,
        /// Hash recorded.
        recorded: String,
    },
}

/// SHA-256 of a file, hex.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The environment to record: everything but names that look like secrets.
pub fn recordable_env(env: &[(String, String)]) -> Vec<(String, String)> {
    env.iter()
        .filter(|(k, _)| {
            let up = k.to_ascii_uppercase();
            !SECRET_MARKERS.iter().any(|m| up.contains(m))
        })
        .cloned()
        .collect()
}

impl ScheduleFile {
    /// A schedule for `finding` shown by `decisions`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        program: &Path,
        program_sha256: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        options: ExecutionOptions,
        strategy: String,
        finding: &Finding,
        decisions: Vec<Decision>,
    ) -> ScheduleFile {
        ScheduleFile {
            format: SCHEDULE_FORMAT.into(),
            version: SCHEDULE_VERSION,
            mcheck_version: env!("CARGO_PKG_VERSION").into(),
            program: program.to_path_buf(),
            program_sha256,
            args,
            env: recordable_env(&env),
            options,
            strategy,
            seed: finding.seed,
            execution: finding.execution,
            preemptions: finding.preemptions,
            finding: RecordedFinding {
                kind: finding.kind,
                message: finding.message.clone(),
                locations: finding.locations.clone(),
                other_decisions: finding.other_schedule.clone(),
                output_file: finding.output_file.clone(),
            },
            decisions,
        }
    }

    /// Writes it as pretty JSON.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }

    /// Reads and validates a schedule file.
    pub fn read(path: &Path) -> Result<ScheduleFile, ScheduleError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScheduleError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let corrupt = |reason: String| ScheduleError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let s: ScheduleFile = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if s.format != SCHEDULE_FORMAT {
            return Err(corrupt(format!("format is `{}`", s.format)));
        }
        if s.version != SCHEDULE_VERSION {
            return Err(corrupt(format!(
                "version {} (this mcheck reads version {SCHEDULE_VERSION})",
                s.version
            )));
        }
        if s.decisions.is_empty() {
            return Err(corrupt("it holds no scheduling decisions".into()));
        }
        Ok(s)
    }

    /// Checks that the program file is the one recorded.
    pub fn check_program(&self) -> Result<(), ScheduleError> {
        let actual = file_sha256(&self.program).map_err(|source| ScheduleError::Io {
            path: self.program.clone(),
            source,
        })?;
        if actual != self.program_sha256 {
            return Err(ScheduleError::ProgramChanged {
                program: self.program.clone(),
                actual,
                recorded: self.program_sha256.clone(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_not_recorded() {
        let env = vec![
            ("PATH".to_string(), "/bin".to_string()),
            ("GITHUB_TOKEN".to_string(), "x".to_string()),
            ("db_password".to_string(), "y".to_string()),
        ];
        assert_eq!(
            recordable_env(&env),
            vec![("PATH".to_string(), "/bin".to_string())]
        );
    }

    #[test]
    fn corrupt_files_are_rejected_with_a_reason() {
        let dir = std::env::temp_dir().join(format!("mcheck-sched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.json");
        std::fs::write(&p, "{\"format\": \"mcheck-schedule\", \"version\": 1}").unwrap();
        let e = ScheduleFile::read(&p).unwrap_err();
        assert!(matches!(e, ScheduleError::Corrupt { .. }), "{e}");
        std::fs::write(&p, "not json").unwrap();
        assert!(matches!(
            ScheduleFile::read(&p),
            Err(ScheduleError::Corrupt { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
