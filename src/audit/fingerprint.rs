//! Stable finding fingerprints: the kind plus the normalised source locations (function,
//! file name, line) of the accesses or lock sites, never addresses or thread ids, so that a
//! fingerprint survives a rebuild, ASLR and another seed.
//!
//! A frame in a system library counts by its module alone: its function, file and line
//! depend on whether separate debug information is installed (libc6-dbg turns
//! `pthread_mutex_lock (libc.so.6+0x8c370)` into `___pthread_mutex_lock at
//! pthread_mutex_lock.c:80`), and a fingerprint must not change when it is.

use sha2::{Digest, Sha256};

use crate::report::{Finding, Frame};

/// Version of the fingerprint recipe (part of the hashed text, and written in audit.json).
pub const FINGERPRINT_VERSION: u32 = 1;

/// The fingerprint of `f`: 16 hex digits.
pub fn fingerprint(f: &Finding) -> String {
    let mut parts: Vec<String> = f.locations.iter().map(normalise).collect();
    if parts.is_empty() {
        // No location (an exit status, a timeout): the innermost frame of each thread in
        // the program's own code, with a source line if one has.
        parts = f
            .threads
            .iter()
            .filter_map(|t| {
                let own = |fr: &&Frame| fr.user_code;
                (t.stack.iter().filter(own).find(|fr| fr.file.is_some()))
                    .or_else(|| t.stack.iter().find(own))
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
/// symbol hash, and, without a source line, the module offset. A frame outside the
/// program's own code (a system library) is `|module|`, whatever debug information named it.
pub fn normalise(fr: &Frame) -> String {
    if !fr.user_code {
        return format!(
            "|{}|",
            fr.module.as_deref().map(base_name).unwrap_or_default()
        );
    }
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
            user_code: true,
            ..Frame::default()
        }
    }

    /// A frame in libc, as symbolized with libc6-dbg installed (`debug`) or without.
    fn libc_frame(debug: bool) -> Frame {
        let base = Frame {
            address: "0x7ffff7e61370".into(),
            module: Some("libc.so.6".into()),
            ..Frame::default()
        };
        if debug {
            Frame {
                function: Some("___pthread_mutex_lock".into()),
                file: Some("./nptl/pthread_mutex_lock.c".into()),
                line: Some(80),
                ..base
            }
        } else {
            Frame {
                function: Some("pthread_mutex_lock".into()),
                function_offset: Some("0x0".into()),
                offset: Some("0x8c370".into()),
                ..base
            }
        }
    }

    /// A stack in a thread started by libc, as seen with or without libc6-dbg.
    fn stack(debug: bool) -> Vec<Frame> {
        let start_thread = Frame {
            address: "0x7ffff7e5efd4".into(),
            module: Some("libc.so.6".into()),
            function: debug.then(|| "start_thread".into()),
            file: debug.then(|| "./nptl/pthread_create.c".into()),
            line: debug.then_some(442),
            offset: (!debug).then(|| "0x89fd4".into()),
            ..Frame::default()
        };
        vec![
            libc_frame(debug),
            frame("t2", "/src/abba.c", 32, "0x555555555200"),
            start_thread,
        ]
    }

    /// The same finding read back from JSON, as `mcheck audit` sees it.
    fn read_back(f: &Finding) -> Finding {
        serde_json::from_str(&serde_json::to_string(f).unwrap()).unwrap()
    }

    #[test]
    fn libc_debug_information_changes_nothing() {
        // A location in libc itself (no frame of the program's own on that stack).
        let with = finding(FindingKind::Deadlock, vec![libc_frame(true)], 1);
        let without = finding(FindingKind::Deadlock, vec![libc_frame(false)], 2);
        assert_eq!(fingerprint(&with), fingerprint(&without));
        assert_eq!(fingerprint(&read_back(&with)), fingerprint(&without));
        assert_eq!(fingerprint(&read_back(&without)), fingerprint(&with));
        // Named and unnamed libc frames alike.
        let mut unnamed = libc_frame(false);
        unnamed.function = None;
        let unnamed = finding(FindingKind::Deadlock, vec![unnamed], 3);
        assert_eq!(fingerprint(&unnamed), fingerprint(&with));

        // No location: the thread stacks decide, and the program's own frame wins over
        // a libc frame that gained a source line from libc6-dbg.
        let mut with = finding(FindingKind::Timeout, vec![], 1);
        with.threads[0].stack = stack(true);
        let mut without = finding(FindingKind::Timeout, vec![], 2);
        without.threads[0].stack = stack(false);
        assert_eq!(fingerprint(&with), fingerprint(&without));
        assert_eq!(
            fingerprint(&read_back(&with)),
            fingerprint(&read_back(&without))
        );
        let own_only = {
            let mut f = finding(FindingKind::Timeout, vec![], 3);
            f.threads[0].stack = vec![frame("t2", "/src/abba.c", 32, "0x1")];
            f
        };
        assert_eq!(fingerprint(&with), fingerprint(&own_only));
    }

    #[test]
    fn frames_keep_their_side_through_json() {
        let f = finding(FindingKind::Deadlock, stack(true), 1);
        let json = serde_json::to_value(&f).unwrap();
        let marks: Vec<Option<bool>> = json["locations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|fr| fr.get("system").and_then(serde_json::Value::as_bool))
            .collect();
        assert_eq!(marks, [Some(true), None, Some(true)]);
        let back = read_back(&f);
        let own: Vec<bool> = back.locations.iter().map(|fr| fr.user_code).collect();
        assert_eq!(own, [false, true, false]);
        // A report of an earlier version has no `system`: every frame reads as own code.
        let old: Frame = serde_json::from_str(r#"{"address": "0x1", "module": "m"}"#).unwrap();
        assert!(old.user_code);
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
                process: None,
            }],
            preemptions: 0,
            seed: tid as u64,
            execution: 1,
            steps: 3,
            strategy: "dfs".into(),
            schedule: None,
            cycle: vec![],
            other_schedule: vec![],
            output_file: None,
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
