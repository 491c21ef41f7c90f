//! `audit.json` (and `test.json`, the same record of `mcheck test`): the JSON report of every
//! target (exactly as `mcheck --json` writes it), with each finding's fingerprint, baseline
//! state and suppression beside it, and the findings of the baseline that were not found
//! again. For `mcheck test` every target is one test of a test binary.

use serde::{Deserialize, Serialize};

use super::shard::{Shard, Share};
use crate::report::{Finding, FindingKind};

/// Version of the audit.json format.
pub const AUDIT_VERSION: u32 = 1;

/// The whole audit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Format version ([`AUDIT_VERSION`]).
    pub audit_version: u32,
    /// Version of the fingerprint recipe.
    pub fingerprint_version: u32,
    /// mcheck's version.
    pub mcheck_version: String,
    /// What was checked: an audit's manifest, or the test binaries of `mcheck test`.
    #[serde(default)]
    pub kind: RecordKind,
    /// The manifest, as given (`mcheck test`: the test binary; `cargo mcheck`: the
    /// package's Cargo.toml).
    pub manifest: String,
    /// `mcheck test`: the test binaries and their frameworks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binaries: Vec<TestBinary>,
    /// Which shard this is (absent for an unsharded or merged audit).
    pub shard: Option<Shard>,
    /// Shard outputs merged into this one (0 when not merged).
    #[serde(default)]
    pub merged_shards: u32,
    /// Targets run at once.
    pub jobs: u32,
    /// Wall time of the audit in seconds (of the slowest shard when merged).
    pub elapsed_seconds: f64,
    /// The baseline compared with, if any.
    pub baseline: Option<String>,
    /// The manifest's `source_root` (SARIF locations are relative to it).
    #[serde(default)]
    pub source_root: Option<String>,
    /// Why the audit ended before running every target (`interrupted by SIGTERM`), or
    /// null when it ran them all (added without a version change).
    #[serde(default)]
    pub stopped_because: Option<String>,
    /// The targets, in manifest order.
    pub targets: Vec<TargetRecord>,
    /// Baseline findings not found this time.
    pub fixed: Vec<FixedFinding>,
}

/// What a record is the outcome of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// `mcheck audit MANIFEST`: one target per manifest entry.
    #[default]
    Audit,
    /// `mcheck test` / `cargo mcheck`: one target per test of test binaries.
    Test,
}

impl RecordKind {
    /// What one target is called in summaries.
    pub fn noun(self) -> &'static str {
        match self {
            RecordKind::Audit => "target",
            RecordKind::Test => "test",
        }
    }

    /// The file name of the JSON record in the output directory.
    pub fn json_name(self) -> &'static str {
        match self {
            RecordKind::Audit => "audit.json",
            RecordKind::Test => "test.json",
        }
    }
}

/// A test binary of `mcheck test`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestBinary {
    /// Its path.
    pub path: String,
    /// Its test framework (`libtest`, `gtest`, `single`).
    pub framework: String,
    /// The JUnit class name of its tests.
    pub classname: String,
    /// Tests it lists (before filters and shards).
    pub listed: usize,
}

/// One target's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetRecord {
    /// Its name in the manifest (`mcheck test`: the test's full name).
    pub name: String,
    /// JUnit class name (`mcheck test`: the test binary's name; absent for an audit's
    /// targets, which are of class `mcheck.audit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classname: Option<String>,
    /// Its position (0-based) in the manifest.
    pub position: usize,
    /// Program and arguments.
    pub command: Vec<String>,
    /// The strategy.
    pub strategy: String,
    /// This shard's part of a split search (absent when the target ran whole).
    pub share: Option<Share>,
    /// Outcome.
    pub status: TargetStatus,
    /// Why the target could not be checked.
    pub error: Option<String>,
    /// mcheck's exit status for the target.
    pub exit_code: Option<i32>,
    /// Wall time in seconds.
    pub elapsed_seconds: f64,
    /// The JSON report (docs/report-format.md), absent when the target could not be checked.
    pub report: Option<serde_json::Value>,
    /// For each finding of the report, in the same order: fingerprint and state.
    pub findings: Vec<FindingMark>,
    /// The run without mcheck that came first (`mcheck test`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeRun>,
}

/// A run of a target without mcheck, before its search: a test that fails so fails without
/// any interleaving, and is not searched.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NativeRun {
    /// It ended as expected (exit status 0).
    pub passed: bool,
    /// How it ended, in words (`exited with status 101`, `did not end within 60 s`).
    pub status: String,
    /// It was stopped before its end (by the time limit or an interrupt): that is no
    /// failure of the test, and the target is skipped, not called failing.
    #[serde(default)]
    pub cut_short: bool,
    /// Wall time in seconds.
    pub elapsed_seconds: f64,
    /// The end of its output (stdout and stderr together).
    pub output: String,
}

/// How a target's check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetStatus {
    /// Checked; nothing reportable found.
    Clean,
    /// Checked; at least one finding that is neither suppressed nor in the baseline.
    Findings,
    /// Checked; only findings already in the baseline or suppressed.
    Known,
    /// Could not be checked (did not start, mcheck failed, input missing).
    Error,
    /// Not run: the audit's time budget was spent, an ignored test, or the audit was
    /// interrupted.
    Skipped,
    /// A test that failed when run without mcheck, without any interleaving: not a
    /// concurrency bug, and not searched.
    FailsNatively,
}

impl TargetStatus {
    /// The stable name.
    pub fn name(self) -> &'static str {
        match self {
            TargetStatus::Clean => "clean",
            TargetStatus::Findings => "findings",
            TargetStatus::Known => "known",
            TargetStatus::Error => "error",
            TargetStatus::Skipped => "skipped",
            TargetStatus::FailsNatively => "fails_natively",
        }
    }
}

/// What the audit says about one finding.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FindingMark {
    /// Stable fingerprint (see fingerprint.rs).
    pub fingerprint: String,
    /// Its kind.
    pub kind: FindingKind,
    /// `new`, or `unchanged` when the baseline has it.
    pub baseline_state: BaselineState,
    /// The reason of the suppression that matched it.
    pub suppressed: Option<String>,
}

impl FindingMark {
    /// Whether the finding is reported (new and not suppressed).
    pub fn reported(&self) -> bool {
        self.baseline_state == BaselineState::New && self.suppressed.is_none()
    }
}

/// A finding compared with the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineState {
    /// Not in the baseline (or no baseline).
    New,
    /// Also in the baseline.
    Unchanged,
}

/// A baseline finding that was not found again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FixedFinding {
    /// Target name.
    pub target: String,
    /// Fingerprint.
    pub fingerprint: String,
    /// Kind.
    pub kind: FindingKind,
    /// The baseline's message.
    pub message: String,
}

impl TargetRecord {
    /// The findings of the report.
    pub fn report_findings(&self) -> Vec<Finding> {
        self.report
            .as_ref()
            .and_then(|r| r.get("findings"))
            .and_then(|f| serde_json::from_value(f.clone()).ok())
            .unwrap_or_default()
    }

    /// Each finding with its mark.
    pub fn marked_findings(&self) -> Vec<(Finding, FindingMark)> {
        self.report_findings()
            .into_iter()
            .zip(self.findings.iter().cloned())
            .collect()
    }

    /// A number from the report (`executions`, `elapsed_seconds`...).
    pub fn report_u64(&self, key: &str) -> u64 {
        self.report
            .as_ref()
            .and_then(|r| r.get(key))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    }

    /// The report's coverage statement.
    pub fn coverage_statement(&self) -> String {
        self.report
            .as_ref()
            .and_then(|r| r.pointer("/coverage/statement"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    /// The status that the marks give a checked target.
    pub fn status_from_marks(&self) -> TargetStatus {
        if self.findings.iter().any(FindingMark::reported) {
            TargetStatus::Findings
        } else if self.findings.is_empty() {
            TargetStatus::Clean
        } else {
            TargetStatus::Known
        }
    }
}

impl AuditRecord {
    /// Whether anything needs a human: a reported finding, a target that could not be
    /// checked, or a test that fails without mcheck.
    pub fn failed(&self) -> bool {
        self.targets.iter().any(|t| {
            matches!(
                t.status,
                TargetStatus::Findings | TargetStatus::Error | TargetStatus::FailsNatively
            )
        })
    }

    /// How a target is named in summaries and SARIF messages: its name, preceded by its
    /// JUnit class when tests of several binaries are together (`cargo mcheck`), as
    /// cargo-nextest shows them (`demo::pipeline pipeline`).
    pub fn display_name(&self, t: &TargetRecord) -> String {
        match &t.classname {
            Some(class) if self.binaries.len() > 1 => format!("{class} {}", t.name),
            _ => t.name.clone(),
        }
    }

    /// Reads an audit.json.
    pub fn read(path: &std::path::Path) -> anyhow::Result<AuditRecord> {
        use anyhow::Context;
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not an audit.json of mcheck audit (or a test.json of mcheck test)",
                path.display()
            )
        })
    }

    /// Writes it as pretty JSON.
    pub fn write(&self, path: &std::path::Path) -> anyhow::Result<()> {
        use anyhow::Context;
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }
}
