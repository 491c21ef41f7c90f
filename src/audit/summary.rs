//! The human summary of an audit: one line per target (verdict, coverage, executions,
//! time, findings), then each reported finding with its fingerprint and replay command, and
//! the baseline findings that were fixed.

use std::fmt::Write;

use super::record::{AuditRecord, BaselineState, TargetStatus};
use crate::cli::shell_quote;

/// The summary text.
pub fn summary(record: &AuditRecord) -> String {
    let mut s = String::new();
    let width = record
        .targets
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        s,
        "{:<width$}  {:<8}  {:>10}  {:>8}  findings",
        "target", "verdict", "executions", "time"
    );
    for t in &record.targets {
        let (mut new, mut known, mut suppressed) = (0, 0, 0);
        for m in &t.findings {
            if m.suppressed.is_some() {
                suppressed += 1;
            } else if m.baseline_state == BaselineState::Unchanged {
                known += 1;
            } else {
                new += 1;
            }
        }
        let findings = match t.status {
            TargetStatus::Error | TargetStatus::Skipped => t.error.clone().unwrap_or_default(),
            _ => {
                let mut parts = vec![format!("{new} new")];
                if known > 0 {
                    parts.push(format!("{known} in baseline"));
                }
                if suppressed > 0 {
                    parts.push(format!("{suppressed} suppressed"));
                }
                parts.join(", ")
            }
        };
        let _ = writeln!(
            s,
            "{:<width$}  {:<8}  {:>10}  {:>7.1}s  {findings}",
            t.name,
            t.status.name(),
            t.report_u64("executions"),
            t.elapsed_seconds
        );
        let statement = t.coverage_statement();
        if !statement.is_empty() {
            let _ = writeln!(s, "{:<width$}  coverage: {statement}", "");
        }
    }
    let reported: Vec<_> = record
        .targets
        .iter()
        .flat_map(|t| {
            t.marked_findings()
                .into_iter()
                .filter(|(_, m)| m.reported())
                .map(move |(f, m)| (t.name.clone(), f, m))
        })
        .collect();
    if !reported.is_empty() {
        let _ = writeln!(s, "\nNew findings:");
        for (target, f, m) in &reported {
            let at = f.locations.first().map(|l| l.short()).unwrap_or_default();
            let _ = writeln!(
                s,
                "  [{target}] {} {} at {at}",
                m.fingerprint,
                f.kind.name()
            );
            let _ = writeln!(s, "      {}", f.message);
            if let Some(p) = &f.schedule {
                let _ = writeln!(s, "      replay: mcheck replay {}", shell_quote(p));
            }
        }
    }
    if !record.fixed.is_empty() {
        let _ = writeln!(s, "\nFixed since the baseline:");
        for f in &record.fixed {
            let _ = writeln!(
                s,
                "  [{}] {} {}: {}",
                f.target,
                f.fingerprint,
                f.kind.name(),
                f.message
            );
        }
    }
    let count = |st: TargetStatus| record.targets.iter().filter(|t| t.status == st).count();
    let executions: u64 = record
        .targets
        .iter()
        .map(|t| t.report_u64("executions"))
        .sum();
    let _ = writeln!(
        s,
        "\n{} target(s): {} clean, {} with new findings, {} known only, {} error(s), {} skipped; {} new finding(s), {} fixed; {executions} execution(s) in {:.1} s",
        record.targets.len(),
        count(TargetStatus::Clean),
        count(TargetStatus::Findings),
        count(TargetStatus::Known),
        count(TargetStatus::Error),
        count(TargetStatus::Skipped),
        reported.len(),
        record.fixed.len(),
        record.elapsed_seconds
    );
    if let Some(why) = &record.stopped_because {
        let _ = writeln!(
            s,
            "The audit was {why}: the targets running then ended their searches early (their coverage says how far they came), the others were not run."
        );
    }
    s
}
