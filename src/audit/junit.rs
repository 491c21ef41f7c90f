//! `junit.xml`: one test case per target (built with the `quick-junit` crate). A target
//! with a reported finding fails, with the finding as the failure text; a target that could
//! not be checked is an error; a target the budget left out is skipped. For `mcheck test`
//! a target is a test: its class is its binary's name, an ignored test is skipped, and a
//! test that fails without mcheck fails with type `fails_natively` and its output.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::record::{AuditRecord, RecordKind, TargetRecord, TargetStatus};
use crate::report::human;
use crate::report::shell_quote;

/// The JUnit report of an audit.
pub fn junit(record: &AuditRecord) -> Report {
    let mut suite = TestSuite::new(match record.kind {
        RecordKind::Audit => "mcheck audit",
        RecordKind::Test => "mcheck test",
    });
    suite.add_test_cases(record.targets.iter().map(test_case));
    suite.set_time(Duration::from_secs_f64(record.elapsed_seconds.max(0.0)));
    let mut report = Report::new("mcheck");
    report.add_test_suite(suite);
    report.set_time(Duration::from_secs_f64(record.elapsed_seconds.max(0.0)));
    report
}

fn test_case(t: &TargetRecord) -> TestCase {
    let status = match t.status {
        TargetStatus::Clean | TargetStatus::Known => TestCaseStatus::success(),
        TargetStatus::Skipped => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(t.error.clone().unwrap_or_default());
            s
        }
        TargetStatus::FailsNatively => {
            let native = t.native.as_ref();
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!(
                "fails without any interleaving: without mcheck it {}",
                native.map_or("failed", |n| n.status.as_str())
            ));
            s.set_type("fails_natively");
            s.set_description(format!(
                "The test failed when run once without mcheck, so its failure is not a concurrency bug found by mcheck; it was not searched.\nCommand: {}\nOutput (end):\n{}",
                t.command
                    .iter()
                    .map(|a| shell_quote(a))
                    .collect::<Vec<_>>()
                    .join(" "),
                native.map_or("", |n| n.output.as_str())
            ));
            s
        }
        TargetStatus::Error => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(t.error.clone().unwrap_or_default());
            s.set_type("target error");
            s
        }
        TargetStatus::Findings => {
            let reported: Vec<_> = t
                .marked_findings()
                .into_iter()
                .filter(|(_, m)| m.reported())
                .collect();
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            if let Some((f, _)) = reported.first() {
                s.set_message(format!("{}: {}", f.kind.name(), f.message));
                s.set_type(f.kind.name());
            }
            let text: String = reported
                .iter()
                .map(|(f, m)| {
                    let replay = f.schedule.as_deref().map_or_else(
                        || "(no schedule file)".to_string(),
                        |p| format!("mcheck replay {}", shell_quote(p)),
                    );
                    format!(
                        "fingerprint {}\n{}",
                        m.fingerprint,
                        human::format_finding(f, &replay)
                    )
                })
                .collect();
            s.set_description(text);
            s
        }
    };
    let mut case = TestCase::new(t.name.clone(), status);
    case.set_classname(t.classname.as_deref().unwrap_or("mcheck.audit"));
    case.set_time(Duration::from_secs_f64(t.elapsed_seconds.max(0.0)));
    let statement = t.coverage_statement();
    if !statement.is_empty() {
        case.set_system_out(format!(
            "{} execution(s): {statement}",
            t.report_u64("executions")
        ));
    }
    case
}

/// The JUnit XML of an audit. quick-junit puts a `skipped` total on the root `<testsuites>`,
/// which the JUnit schema of Jenkins' xunit plugin (tests/data/junit-10.xsd; the plugin
/// validates what it reads) does not allow there: the root is written again without it. The
/// count stays on `<testsuite>`, where the schema has it.
pub fn to_xml(record: &AuditRecord) -> anyhow::Result<String> {
    use anyhow::Context;
    use quick_xml::events::{BytesStart, Event};
    let text = junit(record)
        .to_string()
        .context("serialising the JUnit report")?;
    let mut reader = quick_xml::Reader::from_str(&text);
    let mut writer = quick_xml::Writer::new(Vec::new());
    loop {
        let event = match reader
            .read_event()
            .context("reading the JUnit report back")?
        {
            Event::Eof => break,
            Event::Start(root) if root.name().as_ref() == b"testsuites" => {
                let mut start = BytesStart::new("testsuites");
                let attributes = root.attributes().flatten();
                start.extend_attributes(attributes.filter(|a| a.key.as_ref() != b"skipped"));
                Event::Start(start)
            }
            other => other,
        };
        writer
            .write_event(event)
            .context("writing the JUnit report")?;
    }
    String::from_utf8(writer.into_inner()).context("the JUnit report is not UTF-8")
}

/// Writes the JUnit XML to `path`.
pub fn write(record: &AuditRecord, path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let text = to_xml(record)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
