//! Stable finding fingerprints: the kind plus the normalised source locations (function,
//! file name, line) of the accesses or lock sites, never addresses or thread ids, so that a
//! fingerprint survives a rebuild, ASLR and another seed.

use sha2::{Digest, Sha256};

use crate::report::{Finding, Frame};

/// Version of the fingerprint recipe (part of the hashed text, and written in audit.json).
pub const FINGERPRINT_VERSION: u32 = 1;

/// The fingerprint of `f`: 16 hex digits.
pub fn fingerprint(f: &Finding) -> String {
    let mut parts: Vec<String> = f.locations.iter().map(normalise).collect();
    if parts.is_empty() {
        // No location (an exit status, a timeout): the innermost frame of each thread.
        parts = f
            .threads
            .iter()
            .filter_map(|t| {
                t.stack
                    .iter()
                    .find(|fr| fr.file.is_some())
                    .or(t.stack.first())
            })
            .map(normalise)
            .collect();
    }
    // The same sites in another thread order are the same bug.
    parts.sort();
    parts.dedup();
    let text = format!(
        "mcheck-fingerprint-v{FINGERPRINT_VERSION}\n{}\n{}",
        f.kind.name(),
        parts.join("\n")
    );
    let digest = Sha256::digest(text.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// `function|file|line` of a frame, without what a rebuild changes: the directory of the
/// file, compiler clone suffixes (`.constprop.0`, `.isra.0`, `.part.0`, `.cold`), Rust's
/// symbol hash, and, without a source line, the module offset.
pub fn normalise(fr: &Frame) -> String {
    let function = fr
        .function
        .as_deref()
        .map(normalise_function)
        .unwrap_or_default();
    match (&fr.file, fr.line) {
        (Some(file), Some(line)) => format!("{function}|{}|{line}", base_name(file)),
        _ => format!(
            "{function}|{}|",
            fr.module.as_deref().map(base_name).unwrap_or_default()
        ),
    }
}

fn base_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// A function name without compiler clone suffixes and Rust's `::h<16 hex>` hash.
pub fn normalise_function(name: &str) -> String {
    let mut s = name;
    if let Some(i) = s.rfind("::h") {
        let hash = &s[i + 3..];
        if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) {
            s = &s[..i];
        }
    }
    // gcc clones: foo.constprop.0, foo.isra.0, foo.part.0, foo.cold, foo.lto_priv.0.
    let s = match s.find('.') {
        Some(i)
            if [
                ".constprop",
                ".isra",
                ".part",
                ".cold",
                ".lto_priv",
                ".clone",
            ]
            .iter()
            .any(|suffix| s[i..].starts_with(suffix)) =>
        {
            &s[..i]
        }
        _ => s,
    };
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FindingKind, ThreadReport};

    fn frame(func: &str, file: &str, line: u32, addr: &str) -> Frame {
        Frame {
            address: addr.into(),
            function: Some(func.into()),
            file: Some(file.into()),
            line: Some(line),
            ..Frame::default()
        }
    }

    fn finding(kind: FindingKind, locations: Vec<Frame>, tid: i32) -> Finding {
        Finding {
            kind,
            message: format!("race at 0x{tid:x}"),
            details: vec![],
            locations,
            threads: vec![ThreadReport {
                id: 1,
                tid,
                name: None,
                state: "running".into(),
                stack: vec![],
            }],
            preemptions: 0,
            seed: tid as u64,
            execution: 1,
            steps: 3,
            strategy: "dfs".into(),
            schedule: None,
            cycle: vec![],
            other_schedule: vec![],
        }
    }

    #[test]
    fn ignores_addresses_tids_order_and_directories() {
        let a = finding(
            FindingKind::DataRace,
            vec![
                frame("bump", "/build/a/race.c", 29, "0x1000"),
                frame("read", "/build/a/race.c", 40, "0x1100"),
            ],
            100,
        );
        let b = finding(
            FindingKind::DataRace,
            vec![
                frame("read.constprop.0", "/other/race.c", 40, "0x2100"),
                frame("bump", "/other/race.c", 29, "0x2000"),
            ],
            200,
        );
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(fingerprint(&a).len(), 16);
    }

    #[test]
    fn kind_and_line_matter() {
        let a = finding(FindingKind::DataRace, vec![frame("f", "x.c", 1, "0x1")], 1);
        let b = finding(FindingKind::Deadlock, vec![frame("f", "x.c", 1, "0x1")], 1);
        let c = finding(FindingKind::DataRace, vec![frame("f", "x.c", 2, "0x1")], 1);
        assert_ne!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }

    #[test]
    fn rust_hashes_are_dropped() {
        assert_eq!(
            normalise_function("app::worker::h0123456789abcdef"),
            "app::worker"
        );
        assert_eq!(normalise_function("app::hash"), "app::hash");
    }
}
