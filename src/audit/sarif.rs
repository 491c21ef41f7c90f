//! `results.sarif`: the audit as one SARIF 2.1.0 run (what GitHub code scanning and other
//! dashboards read), built on the object model of [`super::sarif_log`]. One result per finding: its source
//! locations, the other threads' innermost frames as related locations, the fingerprint in
//! `partialFingerprints`, the baseline state, suppressions, and the replay command in the
//! message. Targets that were not run or could not be checked are notifications of the
//! run's invocation, which is unsuccessful when the audit was interrupted.

use std::collections::BTreeMap;

use super::sarif_log::{
    ArtifactLocation, Invocation, Location, LogicalLocation, Message, MultiformatMessageString,
    Notification, PhysicalLocation, Region, ReportingDescriptor, Run, Sarif, SarifResult,
    Suppression, Tool, ToolComponent,
};

use super::record::{AuditRecord, BaselineState, FindingMark, TargetStatus};
use crate::report::shell_quote;
use crate::report::{Finding, FindingKind, Frame};

/// The key of mcheck's fingerprint in `partialFingerprints`.
pub const FINGERPRINT_KEY: &str = "mcheck/v1";

/// The base id of paths relative to the manifest's `source_root`.
pub const SOURCE_ROOT_ID: &str = "SRCROOT";

/// The URI of the official SARIF 2.1.0 schema.
pub const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

const KINDS: [FindingKind; 13] = [
    FindingKind::Deadlock,
    FindingKind::DataRace,
    FindingKind::Assertion,
    FindingKind::Crash,
    FindingKind::Livelock,
    FindingKind::Nondeterminism,
    FindingKind::ExitStatus,
    FindingKind::ApiMisuse,
    FindingKind::Timeout,
    FindingKind::UseAfterFree,
    FindingKind::DoubleFree,
    FindingKind::InvalidFree,
    FindingKind::LockOrder,
];

/// The SARIF log of an audit.
pub fn sarif(record: &AuditRecord) -> Sarif {
    let rules: Vec<ReportingDescriptor> = KINDS
        .iter()
        .map(|k| ReportingDescriptor {
            id: k.name().to_string(),
            name: k.name().to_string(),
            short_description: MultiformatMessageString {
                text: rule_text(*k).to_string(),
            },
        })
        .collect();
    let driver = ToolComponent {
        name: "mcheck".to_string(),
        version: record.mcheck_version.clone(),
        semantic_version: record.mcheck_version.clone(),
        rules,
    };
    let root = record.source_root.as_deref();
    let mut results = Vec::new();
    for t in &record.targets {
        for (f, mark) in t.marked_findings() {
            let name = record.display_name(t);
            results.push(result(&name, &f, &mark, record.baseline.is_some(), root));
        }
    }
    let original_uri_base_ids = root.map(|root| {
        let uri = format!("{}/", file_uri(root.trim_end_matches('/')));
        let base = ArtifactLocation {
            uri,
            uri_base_id: None,
        };
        BTreeMap::from([(SOURCE_ROOT_ID.to_string(), base)])
    });
    let run = Run {
        tool: Tool { driver },
        invocations: invocation(record).map(|i| vec![i]),
        original_uri_base_ids,
        results,
    };
    Sarif {
        schema: SCHEMA_URI.to_string(),
        version: "2.1.0".to_string(),
        runs: vec![run],
    }
}

/// The invocation, when there is something to say about it: the audit was interrupted
/// (then it is not successful), or targets were not run or could not be checked (one
/// notification each, naming the target).
fn invocation(record: &AuditRecord) -> Option<Invocation> {
    let notifications: Vec<Notification> = (record.targets.iter())
        .filter_map(|t| {
            let level = match t.status {
                TargetStatus::Skipped => "note",
                TargetStatus::Error => "error",
                _ => return None,
            };
            let why = t.error.as_deref().unwrap_or("not checked");
            Some(Notification {
                message: Message::text(format!("[{}] {why}", t.name)),
                level: level.to_string(),
            })
        })
        .collect();
    if notifications.is_empty() && record.stopped_because.is_none() {
        return None;
    }
    Some(Invocation {
        execution_successful: record.stopped_because.is_none(),
        exit_code_description: (record.stopped_because.as_ref())
            .map(|why| format!("the audit was {why}")),
        tool_execution_notifications: notifications,
    })
}

/// One finding as a SARIF result.
fn result(
    target: &str,
    f: &Finding,
    mark: &FindingMark,
    with_baseline: bool,
    root: Option<&str>,
) -> SarifResult {
    let rule_index = KINDS.iter().position(|k| *k == f.kind).unwrap_or(0);
    let replay = match &f.schedule {
        Some(p) => format!("Replay: mcheck replay {}", shell_quote(p)),
        None => "(no schedule file was written)".to_string(),
    };
    let text = format!("[{target}] {}\n{replay}", f.message);
    let locations: Vec<Location> = f
        .locations
        .iter()
        .map(|fr| location(fr, None, root))
        .collect();
    // The innermost source frame in the program's own code of every thread (a system
    // library's sources, from its debug file, are not the user's to annotate).
    let related_locations: Vec<Location> = f
        .threads
        .iter()
        .filter_map(|th| {
            let fr = th
                .stack
                .iter()
                .find(|fr| fr.user_code && fr.file.is_some())?;
            let text = format!("thread T{} ({}) at {}", th.id, th.state, fr.short());
            Some(location(fr, Some(text), root))
        })
        .enumerate()
        .map(|(i, mut l)| {
            l.id = Some(i);
            l
        })
        .collect();
    let partial_fingerprints =
        BTreeMap::from([(FINGERPRINT_KEY.to_string(), mark.fingerprint.clone())]);
    let mut properties = BTreeMap::new();
    properties.insert("target".to_string(), serde_json::Value::from(target));
    properties.insert(
        "preemptions".to_string(),
        serde_json::Value::from(f.preemptions),
    );
    if let Some(s) = &f.schedule {
        properties.insert("schedule".to_string(), serde_json::Value::from(s.as_str()));
    }
    let baseline_state = with_baseline.then(|| {
        match mark.baseline_state {
            BaselineState::New => "new",
            BaselineState::Unchanged => "unchanged",
        }
        .to_string()
    });
    let suppressions = (mark.suppressed.iter())
        .map(|reason| Suppression {
            kind: "external".to_string(),
            justification: reason.clone(),
        })
        .collect();
    SarifResult {
        rule_id: f.kind.name().to_string(),
        rule_index,
        level: "error".to_string(),
        message: Message::text(text),
        locations,
        related_locations,
        partial_fingerprints,
        baseline_state,
        suppressions,
        properties,
    }
}

/// A frame as a SARIF location: file and line when known and in the program's own code (a
/// system library's source path, `./nptl/pthread_mutex_lock.c` from libc6-dbg, would read
/// as a file of the repository), and the function as a logical location.
fn location(fr: &Frame, text: Option<String>, root: Option<&str>) -> Location {
    let physical_location = match (&fr.file, fr.line) {
        (Some(file), line) if fr.user_code => {
            let relative = root.and_then(|r| {
                std::path::Path::new(file)
                    .strip_prefix(r)
                    .ok()
                    .map(|p| p.to_string_lossy().into_owned())
            });
            let artifact_location = match relative {
                Some(rel) => ArtifactLocation {
                    uri: file_uri(&rel),
                    uri_base_id: Some(SOURCE_ROOT_ID.to_string()),
                },
                None => ArtifactLocation {
                    uri: file_uri(file),
                    uri_base_id: None,
                },
            };
            Some(PhysicalLocation {
                artifact_location,
                region: line
                    .filter(|l| *l > 0)
                    .map(|start_line| Region { start_line }),
            })
        }
        _ => None,
    };
    let name = fr
        .function
        .clone()
        .unwrap_or_else(|| match (&fr.module, &fr.offset) {
            (Some(m), Some(o)) => format!("{m}+{o}"),
            _ => fr.address.clone(),
        });
    Location {
        id: None,
        physical_location,
        logical_locations: vec![LogicalLocation {
            name,
            kind: "function".to_string(),
        }],
        message: text.map(Message::text),
    }
}

/// A path as a URI reference: absolute paths become `file://` URIs, relative ones stay
/// relative (to the repository root, as code scanning expects), with unsafe characters
/// percent-encoded.
fn file_uri(path: &str) -> String {
    let mut out = String::new();
    if path.starts_with('/') {
        out.push_str("file://");
    }
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~+".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn rule_text(k: FindingKind) -> &'static str {
    match k {
        FindingKind::Deadlock => "No thread can proceed, or threads wait for each other in a cycle",
        FindingKind::DataRace => "Two conflicting memory accesses not ordered by synchronisation",
        FindingKind::Assertion => "An assertion failed (SIGABRT) or a Rust panic",
        FindingKind::Crash => "A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL)",
        FindingKind::Livelock => "No progress under a fair schedule",
        FindingKind::Nondeterminism => "The same schedule ended differently",
        FindingKind::ExitStatus => "An exit status other than the expected one",
        FindingKind::ApiMisuse => "Wrong use of the threading API",
        FindingKind::Timeout => "A thread ran too long without reaching a scheduling point",
        FindingKind::UseAfterFree => "A heap block accessed after it was freed",
        FindingKind::DoubleFree => "A heap block freed twice",
        FindingKind::InvalidFree => {
            "A free of a pointer that is not the start of a live heap block"
        }
        FindingKind::LockOrder => {
            "Threads take locks in orders that can deadlock (a lock-order cycle no gate lock protects)"
        }
    }
}

/// Writes the SARIF log to `path`.
pub fn write(record: &AuditRecord, path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let text = serde_json::to_string_pretty(&sarif(record))?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finding whose location and stacks are as symbolized with libc6-dbg installed.
    fn deadlock_through_libc() -> Finding {
        let libc = Frame {
            address: "0x7ffff7e61370".into(),
            function: Some("___pthread_mutex_lock".into()),
            file: Some("./nptl/pthread_mutex_lock.c".into()),
            line: Some(80),
            module: Some("libc.so.6".into()),
            ..Frame::default()
        };
        let own = Frame {
            address: "0x555555555200".into(),
            function: Some("t2".into()),
            file: Some("/src/abba.c".into()),
            line: Some(32),
            module: Some("abba".into()),
            user_code: true,
            ..Frame::default()
        };
        let thread = crate::report::ThreadReport {
            id: 2,
            tid: 100,
            name: None,
            state: "blocked".into(),
            stack: vec![libc.clone(), own],
            process: None,
        };
        let lonely = crate::report::ThreadReport {
            id: 3,
            stack: vec![libc.clone()],
            ..thread.clone()
        };
        Finding {
            kind: FindingKind::Deadlock,
            message: "cycle".into(),
            details: vec![],
            locations: vec![libc],
            threads: vec![thread, lonely],
            preemptions: 0,
            seed: 0,
            execution: 1,
            steps: 1,
            strategy: "dfs".into(),
            schedule: None,
            cycle: vec![],
            other_schedule: vec![],
            output_file: None,
        }
    }

    #[test]
    fn system_library_sources_are_not_physical_locations() {
        let f = deadlock_through_libc();
        let mark = FindingMark {
            fingerprint: "0".into(),
            kind: f.kind,
            baseline_state: BaselineState::New,
            suppressed: None,
        };
        let r = serde_json::to_value(result("t", &f, &mark, false, None)).unwrap();
        // The libc location keeps its function, not libc's source path.
        let loc = &r["locations"][0];
        assert_eq!(loc.get("physicalLocation"), None, "{loc}");
        assert_eq!(loc["logicalLocations"][0]["name"], "___pthread_mutex_lock");
        // The thread with an own frame is related by it; the one without is not.
        let related = r["relatedLocations"].as_array().unwrap();
        assert_eq!(related.len(), 1, "{r}");
        let uri = &related[0]["physicalLocation"]["artifactLocation"]["uri"];
        assert_eq!(uri, "file:///src/abba.c");
    }

    #[test]
    fn uris() {
        assert_eq!(file_uri("/a b/c.c"), "file:///a%20b/c.c");
        assert_eq!(file_uri("src/x.c"), "src/x.c");
    }
}
