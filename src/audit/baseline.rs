//! Marking findings: suppressions from the manifest, and comparison with a baseline (a
//! previous audit.json) by fingerprint: new and unchanged findings, and fixed ones.

use std::collections::{BTreeMap, BTreeSet};

use super::fingerprint::{fingerprint, normalise_function};
use super::manifest::{Matcher, Suppression};
use super::record::{AuditRecord, BaselineState, FindingMark, FixedFinding, TargetStatus};
use crate::report::{Finding, FindingKind};

/// The findings of a previous audit, by target and fingerprint.
#[derive(Debug, Default)]
pub struct Baseline {
    known: BTreeMap<(String, String), (FindingKind, String)>,
}

impl Baseline {
    /// Every finding of `record` (suppressed or not).
    pub fn from_record(record: &AuditRecord) -> Baseline {
        let mut known = BTreeMap::new();
        for t in &record.targets {
            for (f, m) in t.marked_findings() {
                known.insert((t.name.clone(), m.fingerprint), (f.kind, f.message));
            }
        }
        Baseline { known }
    }

    /// Whether the baseline has this finding.
    pub fn has(&self, target: &str, fingerprint: &str) -> bool {
        self.known
            .contains_key(&(target.to_string(), fingerprint.to_string()))
    }

    /// Baseline findings of the targets `record` checked that it did not find again.
    pub fn fixed(&self, record: &AuditRecord) -> Vec<FixedFinding> {
        let mut found: BTreeSet<(String, String)> = BTreeSet::new();
        let mut checked: BTreeSet<&str> = BTreeSet::new();
        for t in &record.targets {
            if !matches!(t.status, TargetStatus::Error | TargetStatus::Skipped) {
                checked.insert(&t.name);
            }
            for m in &t.findings {
                found.insert((t.name.clone(), m.fingerprint.clone()));
            }
        }
        self.known
            .iter()
            .filter(|(key, _)| checked.contains(key.0.as_str()) && !found.contains(*key))
            .map(|((target, fp), (kind, message))| FixedFinding {
                target: target.clone(),
                fingerprint: fp.clone(),
                kind: *kind,
                message: message.clone(),
            })
            .collect()
    }
}

/// Marks each finding of target `target`.
pub fn mark(
    target: &str,
    findings: &[Finding],
    suppress: &[Suppression],
    baseline: Option<&Baseline>,
) -> Vec<FindingMark> {
    findings
        .iter()
        .map(|f| {
            let fp = fingerprint(f);
            let baseline_state = match baseline {
                Some(b) if b.has(target, &fp) => BaselineState::Unchanged,
                _ => BaselineState::New,
            };
            let suppressed = suppress
                .iter()
                .find(|s| matches(&s.matcher, f, &fp))
                .map(|s| s.reason.clone());
            FindingMark {
                fingerprint: fp,
                kind: f.kind,
                baseline_state,
                suppressed,
            }
        })
        .collect()
}

/// Whether a suppression matches a finding.
fn matches(m: &Matcher, f: &Finding, fp: &str) -> bool {
    match m {
        Matcher::Fingerprint(want) => want == fp,
        Matcher::Kind(k) => *k == f.kind,
        Matcher::Location(loc) => f.locations.iter().any(|fr| {
            let func = fr.function.as_deref().map(normalise_function);
            if func.as_deref() == Some(loc.as_str()) {
                return true;
            }
            match (&fr.file, fr.line) {
                (Some(file), Some(line)) => match loc.rsplit_once(':') {
                    Some((want_file, want_line)) => {
                        want_line == line.to_string()
                            && (file == want_file || file.ends_with(&format!("/{want_file}")))
                    }
                    None => false,
                },
                _ => false,
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Frame;

    fn race(line: u32) -> Finding {
        Finding {
            kind: FindingKind::DataRace,
            message: "race".into(),
            details: vec![],
            locations: vec![Frame {
                address: "0x1".into(),
                function: Some("bump".into()),
                file: Some("/src/race/counter.c".into()),
                line: Some(line),
                user_code: true,
                ..Frame::default()
            }],
            threads: vec![],
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
    fn suppressions_match_by_kind_location_and_fingerprint() {
        let f = race(29);
        let fp = fingerprint(&f);
        let s = |m: Matcher| {
            mark(
                "t",
                std::slice::from_ref(&f),
                &[Suppression {
                    matcher: m,
                    reason: "ok".into(),
                }],
                None,
            )[0]
            .suppressed
            .is_some()
        };
        assert!(s(Matcher::Kind(FindingKind::DataRace)));
        assert!(!s(Matcher::Kind(FindingKind::Deadlock)));
        assert!(s(Matcher::Location("counter.c:29".into())));
        assert!(s(Matcher::Location("race/counter.c:29".into())));
        assert!(!s(Matcher::Location("counter.c:30".into())));
        assert!(!s(Matcher::Location("ounter.c:29".into())));
        assert!(s(Matcher::Location("bump".into())));
        assert!(s(Matcher::Fingerprint(fp)));
        assert!(!s(Matcher::Fingerprint("0".into())));
    }
}
