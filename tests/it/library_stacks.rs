//! Stacks through system libraries: libc's frames named by function, file and line from
//! Debian's separate debug information (libc6-dbg, found by build-id under /usr/lib/debug),
//! by ELF symbols without it (`MCHECK_DEBUG_DIRS=` turns the debug directories off), and
//! finding fingerprints that are the same either way.

use std::path::Path;
use std::time::Duration;

use crate::common::{args, fixture, mcheck_with_env, temp_path};
use mcheck::audit::fingerprint::fingerprint;
use mcheck::binary::debug_files::{build_id_path, DEBUG_DIRS_ENV, DEFAULT_DEBUG_DIR};
use mcheck::binary::ElfFile;
use mcheck::report::Finding;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// Fails unless libc6-dbg is installed (`make deps` installs it).
fn require_libc_debug_file() {
    let libc = ElfFile::load(Path::new(LIBC)).expect("libc");
    let id = libc.build_id().expect("Debian's libc has a build-id");
    let path = build_id_path(Path::new(DEFAULT_DEBUG_DIR), id).unwrap();
    assert!(
        path.is_file(),
        "{} is missing: libc6-dbg is not installed (run `make deps`)",
        path.display()
    );
}

/// One search of `program`, with the debug directories turned off when `debug` is false:
/// its findings (JSON) and stderr.
fn check(program: &str, debug: bool) -> (Vec<Value>, String) {
    let out = temp_path("libstacks-out");
    let mut a = args(&["--quiet-program", "--out", &out.display().to_string()]);
    a.push("--".into());
    a.push(fixture(program).display().to_string());
    let env: &[(&str, &str)] = if debug { &[] } else { &[(DEBUG_DIRS_ENV, "")] };
    let r = mcheck_with_env(&a, env, true, LIMIT);
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    let findings = (r.json.as_ref())
        .and_then(|j| j["findings"].as_array().cloned())
        .unwrap_or_default();
    assert!(!findings.is_empty(), "{}", r.stderr);
    (findings, r.stderr)
}

/// Every frame of every thread of a finding.
fn frames(f: &Value) -> Vec<&Value> {
    (f["threads"].as_array().unwrap().iter())
        .flat_map(|t| t["stack"].as_array().unwrap())
        .collect()
}

/// The first frame whose function name contains `name`.
fn frame<'a>(f: &'a Value, name: &str) -> Option<&'a Value> {
    frames(f)
        .into_iter()
        .find(|fr| fr["function"].as_str().is_some_and(|n| n.contains(name)))
}

/// Asserts that `fr` is a libc frame with a source line in a file named `file`.
fn assert_libc_source(fr: &Value, file: &str) {
    assert_eq!(fr["module"], "libc.so.6", "{fr}");
    assert_eq!(fr["system"], true, "{fr}");
    let path = fr["file"]
        .as_str()
        .unwrap_or_else(|| panic!("no file: {fr}"));
    assert!(path.ends_with(file), "{fr}");
    assert!(fr["line"].as_u64().is_some_and(|l| l > 0), "{fr}");
}

#[test]
fn deadlock_stacks_name_libc_frames_from_libc6_dbg() {
    require_libc_debug_file();
    let (findings, stderr) = check("abba_O0", true);
    let f = &findings[0];
    assert_eq!(f["kind"], "deadlock");
    let lock = frame(f, "pthread_mutex_lock").expect("the blocked lock call");
    assert_libc_source(lock, "pthread_mutex_lock.c");
    let start = frame(f, "start_thread").expect("start_thread, local to libc");
    assert_libc_source(start, "pthread_create.c");
    // The program's own frames are not marked.
    let own = frame(f, "t1").expect("t1");
    assert_eq!(own.get("system"), None, "{own}");
    assert!(
        stderr.contains("start_thread at pthread_create.c:"),
        "{stderr}"
    );
}

#[test]
fn assertion_stack_goes_through_assert_fail_and_abort() {
    require_libc_debug_file();
    let (findings, stderr) = check("order_assert", true);
    let f = &findings[0];
    assert_eq!(f["kind"], "assertion");
    assert_libc_source(
        frame(f, "__assert_fail").expect("__assert_fail"),
        "assert.c",
    );
    assert_libc_source(frame(f, "abort").expect("abort"), "abort.c");
    assert!(stderr.contains("abort at abort.c:"), "{stderr}");
}

#[test]
fn stripped_program_gets_libc_names_with_and_without_debug_files() {
    require_libc_debug_file();
    // With libc6-dbg: libc's frames have sources, the stripped program's have offsets.
    let (findings, stderr) = check("abba_stripped", true);
    let f = &findings[0];
    assert_libc_source(
        frame(f, "start_thread").expect("start_thread"),
        "pthread_create.c",
    );
    let own: Vec<&Value> = (frames(f).into_iter())
        .filter(|fr| fr["module"] == "abba_stripped")
        .collect();
    assert!(!own.is_empty(), "{stderr}");
    for fr in own {
        assert_eq!(fr.get("file"), None, "{fr}");
        assert!(fr["offset"].as_str().is_some(), "{fr}");
    }

    // Without: libc's exported functions are named from its dynamic symbols, with the
    // offset into them; its local functions (start_thread) are not named at all.
    let (findings, stderr) = check("abba_stripped", false);
    let f = &findings[0];
    let lock = frame(f, "pthread_mutex_lock").expect("pthread_mutex_lock from .dynsym");
    assert_eq!(lock["module"], "libc.so.6", "{lock}");
    assert_eq!(lock.get("file"), None, "{lock}");
    assert_eq!(lock["function_offset"], "0x0", "{lock}");
    assert!(lock["offset"].as_str().is_some(), "{lock}");
    assert!(frame(f, "start_thread").is_none(), "{f}");
    assert!(
        stderr.contains("pthread_mutex_lock (libc.so.6+0x"),
        "{stderr}"
    );
}

/// A finding read back from its JSON, as `mcheck audit` reads it.
fn finding(v: &Value) -> Finding {
    serde_json::from_value(v.clone()).expect("a finding")
}

/// The finding as if no frame of the program's own had been found on its stacks: each
/// location becomes the innermost frame of a thread (as `locations` are then chosen), or,
/// with `no_locations`, locations are left out (the fingerprint then picks from stacks).
fn in_libc_only(v: &Value, no_locations: bool) -> Finding {
    let mut f = finding(v);
    for t in &mut f.threads {
        t.stack.retain(|fr| !fr.user_code);
    }
    f.locations = if no_locations {
        Vec::new()
    } else {
        (f.threads.iter())
            .filter_map(|t| t.stack.first().cloned())
            .collect()
    };
    f
}

#[test]
fn fingerprints_do_not_depend_on_debug_files() {
    require_libc_debug_file();
    for program in ["abba_O0", "order_assert"] {
        let (with, _) = check(program, true);
        let (without, _) = check(program, false);
        let (with, without) = (&with[0], &without[0]);
        // The debug files did change what the stacks say...
        let sourced = |f: &Value| {
            (frames(f).into_iter())
                .filter(|fr| fr["system"] == true && fr.get("line").is_some())
                .count()
        };
        assert!(sourced(with) > 0, "{with}");
        assert_eq!(sourced(without), 0, "{without}");
        // ...and not the fingerprint: as found, and were libc frames all the stacks had.
        assert_eq!(
            fingerprint(&finding(with)),
            fingerprint(&finding(without)),
            "{program}"
        );
        for no_locations in [false, true] {
            let (a, b) = (
                in_libc_only(with, no_locations),
                in_libc_only(without, no_locations),
            );
            assert!(!a.threads[0].stack.is_empty(), "{program}: {with}");
            assert_eq!(fingerprint(&a), fingerprint(&b), "{program}");
        }
    }
}
