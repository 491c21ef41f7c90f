//! `mcheck test`: every test of a test binary as an audit target of its own. The binary's
//! framework ([`super::framework`]) names its tests; filters, `--skip` and `--shard` select
//! some; each selected test becomes a target whose command runs that test alone (libtest:
//! `--exact NAME --test-threads=1`), run once without mcheck and then searched by the
//! audit's runner, and the outcome is an [`AuditRecord`] of kind `test` that the audit's
//! writers turn into test.json, junit.xml, results.sarif and summary.txt.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::baseline::Baseline;
use super::fingerprint::FINGERPRINT_VERSION;
use super::framework::{self, Framework, TestCase};
use super::manifest::Target;
use super::record::{AuditRecord, RecordKind, TestBinary, AUDIT_VERSION};
use super::runner::{self, Batch, Job};
use super::shard::Shard;

/// Everything a `mcheck test` run needs.
#[derive(Debug, Clone)]
pub struct SuitePlan {
    /// The test binary (resolved, checked to be an x86-64 executable).
    pub binary: PathBuf,
    /// The framework, when the user names it (else recognised from the binary).
    pub framework: Option<Framework>,
    /// JUnit class name of the tests (default: [`default_classname`]).
    pub classname: Option<String>,
    /// Tests whose names contain one of these (all tests when empty).
    pub filters: Vec<String>,
    /// Tests whose names contain one of these are left out.
    pub skip: Vec<String>,
    /// Filters and skips match whole names only.
    pub exact: bool,
    /// Run ignored/disabled tests too.
    pub include_ignored: bool,
    /// Every test's target is this one with its name and command filled in: budget,
    /// strategy, seed, options, environment and directory.
    pub template: Target,
    /// Output directory.
    pub out: PathBuf,
    /// Tests checked at once (default: the number of CPUs).
    pub jobs: Option<u32>,
    /// This machine's shard of the tests.
    pub shard: Shard,
    /// Budget of the whole run, in seconds.
    pub total_time_limit: Option<f64>,
    /// A previous test.json to compare with.
    pub baseline: Option<(PathBuf, AuditRecord)>,
    /// The mcheck executable that checks each test.
    pub mcheck: PathBuf,
    /// Run each test once without mcheck first.
    pub native_first: bool,
}

/// The tests a run will check.
#[derive(Debug, Clone)]
pub struct Selection {
    /// The binary's framework.
    pub framework: Framework,
    /// Class name of its tests.
    pub classname: String,
    /// Tests the binary lists.
    pub listed: usize,
    /// The selected tests of this shard, with their positions among the selected tests.
    pub tests: Vec<(usize, TestCase)>,
}

/// The JUnit class name of a binary's tests: its file name without the hash that cargo
/// appends (`foo-0123456789abcdef` is `foo`).
pub fn default_classname(binary: &Path) -> String {
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| binary.display().to_string());
    match name.rsplit_once('-') {
        Some((stem, hash))
            if !stem.is_empty()
                && hash.len() == 16
                && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            stem.to_string()
        }
        _ => name,
    }
}

/// Recognises the framework, lists the tests and selects this shard's share of those the
/// filters keep.
pub fn select(plan: &SuitePlan) -> anyhow::Result<Selection> {
    let framework = match plan.framework {
        Some(f) => f,
        None => framework::detect(&plan.binary)?,
    };
    let classname = plan
        .classname
        .clone()
        .unwrap_or_else(|| default_classname(&plan.binary));
    let all = framework::list(&plan.binary, framework, &classname)?;
    let listed = all.len();
    let matches = |name: &str, pattern: &str| {
        if plan.exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    };
    let tests = all
        .into_iter()
        .filter(|t| plan.filters.is_empty() || plan.filters.iter().any(|f| matches(&t.name, f)))
        .filter(|t| !plan.skip.iter().any(|s| matches(&t.name, s)))
        .enumerate()
        .filter(|(pos, _)| plan.shard.owns(*pos))
        .collect();
    Ok(Selection {
        framework,
        classname,
        listed,
        tests,
    })
}

/// The job of one test.
fn job(plan: &SuitePlan, framework: Framework, test: &TestCase) -> Job {
    let mut target = plan.template.clone();
    target.name = test.name.clone();
    target.command = std::iter::once(plan.binary.to_string_lossy().into_owned())
        .chain(framework.run_args(&test.name, test.ignored && plan.include_ignored))
        .collect();
    let skip = (test.ignored && !plan.include_ignored).then(|| {
        let what = match framework {
            Framework::GoogleTest => "disabled",
            _ => "ignored",
        };
        format!("{what} by the test framework (--include-ignored runs it)")
    });
    Job {
        native_first: plan.native_first,
        skip,
        ..Job::whole(target)
    }
}

/// Checks the selected tests, calling `done` with each test's name and outcome as it ends;
/// returns the record (not yet written).
pub fn run(
    plan: &SuitePlan,
    selection: &Selection,
    done: &(dyn Fn(&str, &runner::Outcome) + Sync),
) -> anyhow::Result<AuditRecord> {
    let start = Instant::now();
    std::fs::create_dir_all(&plan.out)
        .with_context(|| format!("creating the output directory {}", plan.out.display()))?;
    let jobs: Vec<Job> = selection
        .tests
        .iter()
        .map(|(_, t)| job(plan, selection.framework, t))
        .collect();
    let runnable = jobs.iter().filter(|j| j.skip.is_none()).count();
    let batch = Batch::sized(
        plan.mcheck.clone(),
        plan.out.clone(),
        plan.jobs,
        runnable,
        plan.total_time_limit
            .map(|t| start + Duration::from_secs_f64(t)),
    );
    let outcomes = runner::run_all_reporting(&batch, &jobs, &|i, o| {
        if jobs[i].skip.is_none() {
            done(&jobs[i].target.name, o);
        }
    });
    let baseline = plan
        .baseline
        .as_ref()
        .map(|(_, r)| Baseline::from_record(r));
    let targets = selection
        .tests
        .iter()
        .zip(jobs.iter().zip(outcomes))
        .map(|((position, _), (job, o))| {
            let mut rec = super::target_record(*position, job, o, baseline.as_ref());
            rec.classname = Some(selection.classname.clone());
            rec
        })
        .collect();
    let mut record = AuditRecord {
        audit_version: AUDIT_VERSION,
        fingerprint_version: FINGERPRINT_VERSION,
        mcheck_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: RecordKind::Test,
        manifest: plan.binary.to_string_lossy().into_owned(),
        binaries: vec![TestBinary {
            path: plan.binary.to_string_lossy().into_owned(),
            framework: selection.framework.name().to_string(),
            classname: selection.classname.clone(),
            listed: selection.listed,
        }],
        shard: (plan.shard.count > 1).then_some(plan.shard),
        merged_shards: 0,
        jobs: batch.jobs as u32,
        elapsed_seconds: start.elapsed().as_secs_f64(),
        baseline: plan
            .baseline
            .as_ref()
            .map(|(p, _)| p.to_string_lossy().into_owned()),
        source_root: None,
        stopped_because: crate::tracee::interrupt::received()
            .map(|s| format!("interrupted by {s}")),
        targets,
        fixed: Vec::new(),
    };
    if let Some(b) = &baseline {
        record.fixed = b.fixed(&record);
    }
    Ok(record)
}

/// The records of several test binaries (`cargo mcheck`) as one record: their tests one
/// after the other, positions renumbered; `manifest` names what they were built from.
pub fn combine(manifest: String, records: Vec<AuditRecord>, elapsed: Duration) -> AuditRecord {
    let mut out = AuditRecord {
        audit_version: AUDIT_VERSION,
        fingerprint_version: FINGERPRINT_VERSION,
        mcheck_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: RecordKind::Test,
        manifest,
        binaries: Vec::new(),
        shard: None,
        merged_shards: 0,
        jobs: records.iter().map(|r| r.jobs).max().unwrap_or(1),
        elapsed_seconds: elapsed.as_secs_f64(),
        baseline: records.iter().find_map(|r| r.baseline.clone()),
        source_root: None,
        stopped_because: records.iter().find_map(|r| r.stopped_because.clone()),
        targets: Vec::new(),
        fixed: Vec::new(),
    };
    for r in records {
        out.shard = out.shard.or(r.shard);
        out.binaries.extend(r.binaries);
        out.fixed.extend(r.fixed);
        for mut t in r.targets {
            t.position = out.targets.len();
            out.targets.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_drop_cargo_hashes() {
        assert_eq!(
            default_classname(Path::new("/t/debug/deps/foo_bar-0123456789abcdef")),
            "foo_bar"
        );
        assert_eq!(default_classname(Path::new("gtest_suite")), "gtest_suite");
        assert_eq!(default_classname(Path::new("a-b-short")), "a-b-short");
    }
}
