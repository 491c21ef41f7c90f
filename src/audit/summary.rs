//! The human summary of an audit (or of `mcheck test`): one line per target or test
//! (verdict, coverage, executions, time, findings), then each reported finding with its
//! fingerprint and replay command, each test that fails without mcheck, and the baseline
//! findings that were fixed.

use std::fmt::Write;

use super::record::{AuditRecord, BaselineState, TargetStatus};
use crate::report::shell_quote;

/// The summary text.
pub fn summary(record: &AuditRecord) -> String {
    let mut s = String::new();
    let noun = record.kind.noun();
    let width = record
        .targets
        .iter()
        .map(|t| record.display_name(t).len())
        .max()
        .unwrap_or(6)
        .max(6);
    let verdict_width = record
        .targets
        .iter()
        .map(|t| t.status.name().len())
        .max()
        .unwrap_or(8)
        .max(8);
    let _ = writeln!(
        s,
        "{noun:<width$}  {:<verdict_width$}  {:>10}  {:>8}  findings",
        "verdict", "executions", "time"
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
            TargetStatus::FailsNatively => format!(
                "fails without any interleaving: without mcheck it {}",
                t.native.as_ref().map_or("failed", |n| n.status.as_str())
            ),
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
            "{:<width$}  {:<verdict_width$}  {:>10}  {:>7.1}s  {findings}",
            record.display_name(t),
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
                .map(move |(f, m)| (record.display_name(t), f, m))
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
    let failing: Vec<_> = record
        .targets
        .iter()
        .filter(|t| t.status == TargetStatus::FailsNatively)
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(
            s,
            "\nFailing without any interleaving (not searched; run without mcheck):"
        );
        for t in &failing {
            let command: Vec<String> = t.command.iter().map(|a| shell_quote(a)).collect();
            let _ = writeln!(s, "  [{}] {}", record.display_name(t), command.join(" "));
            if let Some(line) = t.native.as_ref().and_then(|n| failure_line(&n.output)) {
                let _ = writeln!(s, "      {line}");
            }
        }
    }
    let count = |st: TargetStatus| record.targets.iter().filter(|t| t.status == st).count();
    let executions: u64 = record
        .targets
        .iter()
        .map(|t| t.report_u64("executions"))
        .sum();
    let native = if failing.is_empty() {
        String::new()
    } else {
        format!(", {} failing without mcheck", failing.len())
    };
    let _ = writeln!(
        s,
        "\n{} {noun}(s): {} clean, {} with new findings, {} known only, {} error(s), {} skipped{native}; {} new finding(s), {} fixed; {executions} execution(s) in {:.1} s",
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

/// The lines of a test's output that say why it failed: a Rust panic's location and
/// message, a GoogleTest failure, else its last non-empty line.
fn failure_line(output: &str) -> Option<String> {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    if let Some(i) = lines.iter().position(|l| l.contains("panicked at")) {
        let message = lines.get(i + 1).filter(|l| !l.is_empty());
        return Some(match message {
            Some(m) => format!("{} {m}", lines[i]),
            None => lines[i].to_string(),
        });
    }
    lines
        .iter()
        .find(|l| l.contains(": Failure"))
        .or_else(|| lines.iter().rev().find(|l| !l.is_empty()))
        .map(|l| l.to_string())
}

#[cfg(test)]
mod tests {
    use super::failure_line;

    #[test]
    fn failure_lines() {
        let rust = "running 1 test\nthread 'a::b' (9) panicked at src/x.rs:3:9:\nassertion failed: x\nnote: run with\n";
        assert_eq!(
            failure_line(rust).unwrap(),
            "thread 'a::b' (9) panicked at src/x.rs:3:9: assertion failed: x"
        );
        let gtest =
            "[ RUN      ] S.T\nx.cpp:5: Failure\nExpected equality\n[  FAILED  ] S.T (0 ms)\n";
        assert_eq!(failure_line(gtest).unwrap(), "x.cpp:5: Failure");
        assert_eq!(failure_line("").as_deref(), None);
    }
}
