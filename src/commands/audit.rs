//! `mcheck audit MANIFEST` and `mcheck merge --out DIR SHARD_DIR...`: load the manifest (a
//! bad one is a usage error naming its line), run this shard's targets, write the four
//! outputs and print the summary. Exit status 1 when a new, unsuppressed finding was made or
//! a target could not be checked, 0 otherwise, 2 for bad usage or input.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::Failure;
use crate::audit::fingerprint::FINGERPRINT_VERSION;
use crate::audit::manifest::Manifest;
use crate::audit::record::{AuditRecord, RecordKind};
use crate::audit::shard::Shard;
use crate::audit::{self as batch, AuditPlan};
use crate::cli::{AuditArgs, MergeArgs, EXIT_CLEAN, EXIT_FINDINGS};

/// `--out` must be a directory or not exist yet.
fn check_out(out: &std::path::Path) -> Result<(), Failure> {
    if out.exists() && !out.is_dir() {
        return Err(Failure::Usage(format!(
            "--out {}: exists and is not a directory",
            out.display()
        )));
    }
    Ok(())
}

/// Runs an audit; returns the exit status.
pub fn audit(args: &AuditArgs) -> Result<i32, Failure> {
    // SIGINT, SIGTERM, SIGHUP and SIGQUIT end the audit cleanly, with its outputs.
    crate::tracee::interrupt::install().context("installing the signal handlers")?;
    check_out(&args.out)?;
    let manifest = Manifest::load(&args.manifest, &crate::cli::parse_search_options)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let baseline = args.baseline.as_deref().map(read_baseline).transpose()?;
    let plan = AuditPlan {
        manifest,
        out: args.out.clone(),
        jobs: args.jobs,
        shard: args.shard.unwrap_or(Shard::WHOLE),
        baseline,
        mcheck: std::env::current_exe().context("finding the mcheck executable")?,
    };
    let record = batch::run(&plan)?;
    let status = finish(&record, &args.out)?;
    if let Some(path) = &args.sarif {
        crate::audit::sarif::write(&record, path)?;
    }
    Ok(status)
}

/// Reads a `--baseline` record (an audit.json, or a test.json of `mcheck test`) made with
/// this mcheck's fingerprint recipe.
pub(super) fn read_baseline(path: &Path) -> Result<(PathBuf, AuditRecord), Failure> {
    let r =
        AuditRecord::read(path).map_err(|e| Failure::Usage(format!("bad --baseline: {e:#}")))?;
    if r.fingerprint_version != FINGERPRINT_VERSION {
        return Err(Failure::Usage(format!(
            "bad --baseline: {} has fingerprints of version {}, this mcheck makes version {FINGERPRINT_VERSION}: run once without --baseline to make a new one",
            path.display(),
            r.fingerprint_version
        )));
    }
    Ok((path.to_path_buf(), r))
}

/// Merges shard outputs; returns the exit status.
pub fn merge(args: &MergeArgs) -> Result<i32, Failure> {
    check_out(&args.out)?;
    let mut records = Vec::new();
    for dir in &args.shards {
        // The shards of an audit, or of `mcheck test`.
        let path = [dir.join("audit.json"), dir.join("test.json")]
            .into_iter()
            .find(|p| p.exists())
            .unwrap_or_else(|| dir.join("audit.json"));
        records.push(AuditRecord::read(&path).map_err(|e| Failure::Usage(format!("{e:#}")))?);
    }
    let record = batch::merge::merge(records).map_err(|e| Failure::Usage(e.to_string()))?;
    finish(&record, &args.out)
}

/// Writes the outputs, prints the summary, gives the exit status.
pub(super) fn finish(record: &AuditRecord, out: &std::path::Path) -> Result<i32, Failure> {
    let text = batch::write_outputs(record, out)?;
    eprint!("{text}");
    eprintln!(
        "mcheck: {} written to {} ({}, results.sarif, junit.xml, summary.txt)",
        match record.kind {
            RecordKind::Audit => "audit",
            RecordKind::Test => "test results",
        },
        out.display(),
        record.kind.json_name()
    );
    Ok(if record.failed() {
        EXIT_FINDINGS
    } else {
        EXIT_CLEAN
    })
}
