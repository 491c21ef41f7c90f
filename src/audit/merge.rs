//! `mcheck merge`: combine the audit.json of every shard into one audit. Whole targets are
//! taken as they are; the shares of a split target are combined into one report
//! (executions, transitions, states and schedule digests summed, findings deduplicated by
//! fingerprint). A split search is complete (its whole space exhausted) only when every
//! shard ran its part and exhausted it. Fixed findings are those no shard found again.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::record::{AuditRecord, FindingMark, TargetRecord, TargetStatus};

/// Why shard outputs cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// No input.
    #[error("no shard outputs to merge")]
    Empty,
    /// Shards of different splits or manifests.
    #[error("the shard outputs do not belong together: {0}")]
    Mismatch(String),
    /// A shard is missing or given twice.
    #[error("{0}")]
    Shards(String),
}

/// Merges shard records.
pub fn merge(records: Vec<AuditRecord>) -> Result<AuditRecord, MergeError> {
    let first = records.first().ok_or(MergeError::Empty)?.clone();
    check_shards(&records)?;
    let mut by_name: BTreeMap<String, Vec<TargetRecord>> = BTreeMap::new();
    for r in &records {
        for t in &r.targets {
            by_name.entry(t.name.clone()).or_default().push(t.clone());
        }
    }
    let mut targets: Vec<TargetRecord> = by_name.into_values().map(combine).collect();
    targets.sort_by_key(|t| t.position);
    let found: BTreeSet<(String, String)> = targets
        .iter()
        .flat_map(|t| {
            t.findings
                .iter()
                .map(|m| (t.name.clone(), m.fingerprint.clone()))
        })
        .collect();
    let mut seen = BTreeSet::new();
    let fixed = records
        .iter()
        .flat_map(|r| r.fixed.iter().cloned())
        .filter(|f| {
            let key = (f.target.clone(), f.fingerprint.clone());
            !found.contains(&key) && seen.insert(key)
        })
        .collect();
    Ok(AuditRecord {
        shard: None,
        merged_shards: records.len() as u32,
        jobs: records.iter().map(|r| r.jobs).max().unwrap_or(1),
        elapsed_seconds: records
            .iter()
            .map(|r| r.elapsed_seconds)
            .fold(0.0, f64::max),
        stopped_because: records.iter().find_map(|r| r.stopped_because.clone()),
        targets,
        fixed,
        ..first
    })
}

/// All shards of one split, each once, from the same manifest.
fn check_shards(records: &[AuditRecord]) -> Result<(), MergeError> {
    let manifest = &records[0].manifest;
    if let Some(other) = records.iter().find(|r| &r.manifest != manifest) {
        return Err(MergeError::Mismatch(format!(
            "manifests {manifest} and {}",
            other.manifest
        )));
    }
    let count = match records[0].shard {
        Some(s) => s.count,
        None if records.len() == 1 => return Ok(()),
        None => {
            return Err(MergeError::Shards(
                "an unsharded audit cannot be merged with others".into(),
            ))
        }
    };
    let mut seen = BTreeSet::new();
    for r in records {
        match r.shard {
            Some(s) if s.count == count => {
                if !seen.insert(s.index) {
                    return Err(MergeError::Shards(format!("shard {s} is given twice")));
                }
            }
            Some(s) => {
                return Err(MergeError::Mismatch(format!(
                    "shard {s} is not one of {count} shards"
                )))
            }
            None => {
                return Err(MergeError::Shards(
                    "an unsharded audit cannot be merged with shards".into(),
                ))
            }
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !seen.contains(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Shards(format!(
            "missing shard output(s): {}",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// One target from its records (one per shard that ran part of it).
fn combine(mut parts: Vec<TargetRecord>) -> TargetRecord {
    if parts.len() == 1 {
        return parts.remove(0);
    }
    parts.sort_by_key(|t| {
        t.share.map_or((0, 0), |s| {
            (s.shard.map_or(0, |x| x.index), s.first_execution)
        })
    });
    let ran: Vec<&TargetRecord> = parts
        .iter()
        .filter(|t| t.status != TargetStatus::Skipped)
        .collect();
    let mut out = parts[0].clone();
    out.share = None;
    out.elapsed_seconds = parts.iter().map(|t| t.elapsed_seconds).fold(0.0, f64::max);
    let errors: Vec<String> = ran
        .iter()
        .filter_map(|t| {
            t.error
                .as_ref()
                .map(|e| match t.share.and_then(|s| s.shard) {
                    Some(shard) => format!("shard {shard}: {e}"),
                    None => format!(
                        "shard part from execution {}: {e}",
                        t.share.map_or(0, |s| s.first_execution)
                    ),
                })
        })
        .collect();
    let mut findings: Vec<Value> = Vec::new();
    let mut marks: Vec<FindingMark> = Vec::new();
    let mut fingerprints = BTreeSet::new();
    let (mut executions, mut transitions, mut states) = (0u64, 0u64, 0u64);
    let (mut digest, mut outside) = (0u64, 0u64);
    // Every part must have run and exhausted its share; a part left empty (a randomised
    // share of no executions) has nothing to cover.
    let mut complete = parts
        .iter()
        .all(|t| t.report.is_some() || t.share.is_some_and(|s| s.max_executions == 0));
    let mut reports = 0;
    for t in &ran {
        let Some(r) = &t.report else { continue };
        reports += 1;
        executions += t.report_u64("executions");
        transitions += t.report_u64("transitions");
        states += t.report_u64("states");
        let hex = r.get("schedule_digest").and_then(Value::as_str);
        digest = digest.wrapping_add(
            hex.and_then(|h| u64::from_str_radix(h, 16).ok())
                .unwrap_or(0),
        );
        outside += r
            .pointer("/shard/runs_outside_share")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        complete &= r.get("complete").and_then(Value::as_bool).unwrap_or(false);
        let list = r
            .get("findings")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (f, m) in list.into_iter().zip(&t.findings) {
            if fingerprints.insert(m.fingerprint.clone()) {
                findings.push(f);
                marks.push(m.clone());
            }
        }
    }
    let mut report = ran.iter().find_map(|t| t.report.clone());
    if let Some(Value::Object(r)) = &mut report {
        r.insert("executions".into(), executions.into());
        r.insert("transitions".into(), transitions.into());
        r.insert("states".into(), states.into());
        r.insert("complete".into(), complete.into());
        r.insert("schedule_digest".into(), format!("{digest:016x}").into());
        r.remove("shard");
        r.insert(
            "merged_shards".into(),
            serde_json::json!({ "parts": reports, "runs_outside_share": outside }),
        );
        r.insert("elapsed_seconds".into(), out.elapsed_seconds.into());
        r.insert("findings".into(), Value::Array(findings));
        let statement = format!(
            "{executions} execution(s) in {reports} shard part(s) of a split search{}, {} distinct finding(s)",
            if complete {
                ", search space exhausted (every shard exhausted its part)"
            } else {
                ""
            },
            marks.len()
        );
        if let Some(Value::Object(c)) = r.get_mut("coverage") {
            c.insert("statement".into(), statement.into());
            c.insert("exhausted".into(), complete.into());
        }
    }
    out.report = report;
    out.findings = marks;
    out.exit_code = ran.iter().filter_map(|t| t.exit_code).max();
    if !errors.is_empty() {
        out.status = TargetStatus::Error;
        out.error = Some(errors.join("; "));
    } else if ran.is_empty() {
        out.status = TargetStatus::Skipped;
    } else {
        out.error = None;
        out.status = out.status_from_marks();
    }
    out
}
