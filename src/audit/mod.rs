//! `mcheck audit MANIFEST`: check many programs in one run (a nightly audit), each as its
//! own mcheck search, and write the outcome in the formats CI systems read: `audit.json`
//! (every target's JSON report), `results.sarif` (SARIF 2.1.0), `junit.xml` and a human
//! summary. Findings get stable fingerprints, so a baseline (a previous audit.json) and
//! suppressions in the manifest leave only what is new. `--shard I/N` runs one machine's
//! share and [`merge`] combines the shards' outputs into one audit.
//!
//! `mcheck test` ([`suite`]) runs each test of a test binary as such a target, recognised
//! and listed through its framework ([`framework`]), after one run without mcheck
//! ([`native`]), and writes the same outputs (`test.json` for `audit.json`).

pub mod baseline;
pub mod fingerprint;
pub mod framework;
pub mod junit;
pub mod manifest;
pub mod merge;
pub mod native;
pub mod record;
pub mod runner;
pub mod sarif;
pub mod sarif_log;
pub mod shard;
pub mod suite;
pub mod summary;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::explore::StrategyName;
use baseline::{mark, Baseline};
use manifest::Manifest;
use record::{AuditRecord, RecordKind, TargetRecord, TargetStatus, AUDIT_VERSION};
use runner::{Batch, Job};
use shard::Shard;

/// Everything an audit run needs.
#[derive(Debug)]
pub struct AuditPlan {
    /// The manifest.
    pub manifest: Manifest,
    /// Output directory.
    pub out: PathBuf,
    /// Targets run at once (default: the manifest's `jobs`, else the number of CPUs).
    pub jobs: Option<u32>,
    /// This machine's shard.
    pub shard: Shard,
    /// The previous audit to compare with.
    pub baseline: Option<(PathBuf, AuditRecord)>,
    /// The mcheck executable that checks each target.
    pub mcheck: PathBuf,
}

/// The jobs of this shard: whole targets it owns, and its share of every split target.
pub fn jobs_of(manifest: &Manifest, shard: Shard) -> Vec<(usize, Job)> {
    manifest
        .targets
        .iter()
        .enumerate()
        .filter_map(|(pos, t)| {
            if t.split && shard.count > 1 {
                let tree = matches!(t.strategy, StrategyName::Dfs | StrategyName::Icb);
                let share = shard.part(tree, t.seed, t.max_executions);
                Some((
                    pos,
                    Job {
                        share: Some(share),
                        ..Job::whole(t.clone())
                    },
                ))
            } else if shard.owns(pos) {
                Some((pos, Job::whole(t.clone())))
            } else {
                None
            }
        })
        .collect()
}

/// Runs the audit's share of targets; returns its record (not yet written).
pub fn run(plan: &AuditPlan) -> anyhow::Result<AuditRecord> {
    let start = Instant::now();
    std::fs::create_dir_all(&plan.out)
        .with_context(|| format!("creating the output directory {}", plan.out.display()))?;
    let jobs = jobs_of(&plan.manifest, plan.shard);
    let batch = Batch::sized(
        plan.mcheck.clone(),
        plan.out.clone(),
        plan.jobs.or(plan.manifest.jobs),
        jobs.len(),
        plan.manifest
            .time_limit
            .map(|t| start + Duration::from_secs_f64(t)),
    );
    let list: Vec<Job> = jobs.iter().map(|(_, j)| j.clone()).collect();
    let outcomes = runner::run_all(&batch, &list);
    let baseline = plan
        .baseline
        .as_ref()
        .map(|(_, r)| Baseline::from_record(r));
    let targets = jobs
        .into_iter()
        .zip(outcomes)
        .map(|((position, job), o)| target_record(position, &job, o, baseline.as_ref()))
        .collect();
    let mut record = AuditRecord {
        audit_version: AUDIT_VERSION,
        fingerprint_version: fingerprint::FINGERPRINT_VERSION,
        mcheck_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: RecordKind::Audit,
        manifest: plan.manifest.path.to_string_lossy().into_owned(),
        binaries: Vec::new(),
        shard: (plan.shard.count > 1).then_some(plan.shard),
        merged_shards: 0,
        jobs: batch.jobs as u32,
        elapsed_seconds: start.elapsed().as_secs_f64(),
        baseline: plan
            .baseline
            .as_ref()
            .map(|(p, _)| p.to_string_lossy().into_owned()),
        source_root: plan
            .manifest
            .source_root
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
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

/// The record of one job's outcome: its findings marked against the suppressions and the
/// baseline, and its status.
pub fn target_record(
    position: usize,
    job: &Job,
    o: runner::Outcome,
    baseline: Option<&Baseline>,
) -> TargetRecord {
    let t = &job.target;
    let mut rec = TargetRecord {
        name: t.name.clone(),
        classname: None,
        position,
        command: t.command.clone(),
        strategy: t.strategy_name(),
        share: job.share,
        status: TargetStatus::Error,
        error: o.error,
        exit_code: o.exit_code,
        elapsed_seconds: o.elapsed.as_secs_f64(),
        report: o.report,
        findings: Vec::new(),
        native: o.native,
    };
    if o.skipped {
        rec.status = TargetStatus::Skipped;
    } else if rec.native.as_ref().is_some_and(|n| !n.passed) {
        rec.status = TargetStatus::FailsNatively;
    } else if rec.error.is_none() {
        rec.findings = mark(&t.name, &rec.report_findings(), &t.suppress, baseline);
        rec.status = rec.status_from_marks();
    }
    rec
}

/// Writes audit.json (test.json for `mcheck test`), results.sarif, junit.xml and
/// summary.txt into `out`; returns the summary text.
pub fn write_outputs(record: &AuditRecord, out: &Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("creating the output directory {}", out.display()))?;
    record.write(&out.join(record.kind.json_name()))?;
    sarif::write(record, &out.join("results.sarif"))?;
    junit::write(record, &out.join("junit.xml"))?;
    let text = summary::summary(record);
    std::fs::write(out.join("summary.txt"), &text)
        .with_context(|| format!("writing {}", out.join("summary.txt").display()))?;
    Ok(text)
}
