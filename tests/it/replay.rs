//! Schedule files and replay: a changed program, a corrupt file or an edited schedule is
//! refused with exit status 2 and no finding; `--until` stops early; a schedule replays
//! with the signal dispositions and the kind of stdout it was found with.  That every buggy
//! fixture's schedule replays to the same finding is checked by `fixture_verdicts.rs`, on
//! the very schedules its searches wrote (searching them again here took a fifth of the
//! suite's time).

use std::fs;
use std::time::Duration;

use crate::common::{
    args, fixture, mcheck, mcheck_with_piped_stdout, mcheck_with_stdout, temp_path,
};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// Finds the bug of `program` and returns the schedule path and the finding.
fn find(program: &str, prog_args: &[String], options: &[String], out: &str) -> (String, Value) {
    let mut a = args(&["--quiet-program", "--out", out]);
    a.extend(options.iter().cloned());
    a.push("--".into());
    a.push(program.to_string());
    a.extend(prog_args.iter().cloned());
    let r = mcheck(&a, true, LIMIT);
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    let f = r.json.unwrap()["findings"][0].clone();
    (
        f["schedule"].as_str().expect("schedule path").to_string(),
        f,
    )
}

#[test]
fn replay_prints_the_interleaving_and_until_stops_early() {
    let out = temp_path("until");
    let program = fixture("abba_O0").display().to_string();
    let (schedule, _) = find(&program, &[], &[], &out.display().to_string());
    let r = mcheck(
        &args(&["replay", "--quiet-program", &schedule]),
        false,
        LIMIT,
    );
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("mutex_lock"), "{}", r.stderr);
    assert!(
        r.stderr.contains("abba.c:"),
        "trace names source lines: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains("mutex `a`"),
        "trace names objects: {}",
        r.stderr
    );
    let r = mcheck(
        &args(&["replay", "--until", "2", "--quiet-program", &schedule]),
        true,
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("stopped after step 2"), "{}", r.stderr);
    assert_eq!(r.json.unwrap()["findings"].as_array().unwrap().len(), 0);
    let _ = fs::remove_dir_all(&out);
}

/// `startup_state_abba` takes one more lock when its stdout is a pipe, so a schedule replays
/// only if the program gets the kind of stdout it was found with, whatever mcheck's own
/// stdout is at the replay: /dev/null for a schedule found with `--quiet-program`, a pipe
/// (its output passed on, or dropped under `--quiet-program`), a regular file (a temporary
/// one, shown at the end).
#[test]
fn a_schedule_replays_with_the_kind_of_stdout_it_was_found_with() {
    let out = temp_path("stdout-kinds");
    let out_s = out.display().to_string();
    let program = fixture("startup_state_abba").display().to_string();
    let replay = |schedule: &str, quiet: bool, to_file: Option<&std::path::Path>| {
        let mut a = args(&["replay", schedule]);
        if quiet {
            a.push("--quiet-program".into());
        }
        let r = match to_file {
            Some(path) => mcheck_with_stdout(&a, true, LIMIT, path),
            None => mcheck_with_piped_stdout(&a, true, LIMIT),
        };
        let kind =
            (r.json.as_ref()).and_then(|j| j["findings"][0]["kind"].as_str().map(String::from));
        assert_eq!(
            kind.as_deref(),
            Some("deadlock"),
            "{}: {}",
            r.command,
            r.stderr
        );
        r
    };

    // Found with stdout on /dev/null (--quiet-program without the output check, which
    // would read a pipe instead), replayed with mcheck's stdout on a pipe.
    let (schedule, _) = find(&program, &[], &args(&["--no-output-check"]), &out_s);
    let r = replay(&schedule, false, None);
    assert!(
        r.stderr.contains("stdout goes to /dev/null"),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains("stdout is"), "{}", r.stdout);

    // Found with stdout on a pipe (shown), replayed with mcheck's on a file or hidden.
    let mut a = args(&["--out", &out_s, "--", &program]);
    a.insert(0, "--max-executions".into());
    a.insert(1, "100".into());
    let found = mcheck_with_piped_stdout(&a, true, LIMIT);
    assert!(
        found.stdout.contains("stdout is a pipe"),
        "{}",
        found.stdout
    );
    let schedule = found.json.as_ref().expect("a report")["findings"][0]["schedule"]
        .as_str()
        .expect("a schedule")
        .to_string();
    let file = out.join("replay-stdout.txt");
    replay(&schedule, false, Some(&file));
    let shown = fs::read_to_string(&file).unwrap_or_default();
    assert!(shown.contains("stdout is a pipe"), "{shown}");
    replay(&schedule, true, None);

    // Found with stdout on a file, replayed with mcheck's on a pipe: the program writes to
    // a temporary file, shown once it ended.
    let found = mcheck_with_stdout(&a, true, LIMIT, &file);
    let schedule = found.json.as_ref().expect("a report")["findings"][0]["schedule"]
        .as_str()
        .expect("a schedule")
        .to_string();
    let r = replay(&schedule, false, None);
    assert!(r.stdout.contains("stdout is not a pipe"), "{}", r.stdout);
    let _ = fs::remove_dir_all(&out);
}

/// Runs `mcheck ARGS` under `env SIGNAL_OPTION` (coreutils: `--ignore-signal=INT` or
/// `--default-signal=INT`), its stdout on a pipe; returns its exit code, stdout and stderr.
fn mcheck_with_signal(signal_option: &str, a: &[String]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new("timeout")
        .arg("120")
        .arg("env")
        .arg(signal_option)
        .arg(env!("CARGO_BIN_EXE_mcheck"))
        .args(a)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run mcheck under env");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `startup_state_abba` takes one more lock when SIGINT is ignored: a schedule found in the
/// foreground replays in a background job (whose shell ignores SIGINT) because the program
/// gets the dispositions recorded in the schedule, and the program starts with SIGPIPE's
/// default action as natively (the Rust runtime's SIG_IGN is not passed on).
#[test]
fn a_schedule_replays_with_the_signal_dispositions_it_was_found_with() {
    let out = temp_path("signals");
    let out_s = out.display().to_string();
    let program = fixture("startup_state_abba").display().to_string();
    let search = args(&["--max-executions", "100", "--out", &out_s, "--", &program]);
    let (code, stdout, err) = mcheck_with_signal("--default-signal=INT", &search);
    assert_eq!(code, Some(1), "{err}");
    assert!(stdout.contains("SIGPIPE is not ignored"), "{stdout}");
    let schedule = (fs::read_dir(&out).expect("schedules").flatten())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a schedule")
        .display()
        .to_string();
    let doc: Value = serde_json::from_str(&fs::read_to_string(&schedule).unwrap()).unwrap();
    let ignored = doc["options"]["ignored_signals"]
        .as_array()
        .expect("recorded");
    const SIGINT: i64 = 2;
    assert!(!ignored.contains(&Value::from(SIGINT)), "{ignored:?}");
    let (code, stdout, err) =
        mcheck_with_signal("--ignore-signal=INT", &args(&["replay", &schedule]));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("deadlock:"), "{err}");
    assert!(stdout.contains("SIGPIPE is not ignored"), "{stdout}");
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn changed_program_corrupt_file_and_divergence_are_refused() {
    let out = temp_path("refuse");
    fs::create_dir_all(&out).unwrap();
    let copy = out.join("abba_copy");
    fs::copy(fixture("abba_O0"), &copy).unwrap();
    let (schedule, _) = find(
        &copy.display().to_string(),
        &[],
        &[],
        &out.display().to_string(),
    );

    // A diverging schedule: the first decision names a thread that does not exist yet.
    let mut doc: Value = serde_json::from_str(&fs::read_to_string(&schedule).unwrap()).unwrap();
    doc["decisions"][1]["thread"] = Value::from(7);
    let edited = out.join("edited.json");
    fs::write(&edited, doc.to_string()).unwrap();
    let r = mcheck(
        &args(&["replay", "--quiet-program", &edited.display().to_string()]),
        true,
        LIMIT,
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("diverged"), "{}", r.stderr);
    assert!(r.json.is_none(), "no report of a false finding");

    // Corrupt files.
    let corrupt = out.join("corrupt.json");
    for text in ["", "{", "[1,2]", "{\"format\":\"other\"}"] {
        fs::write(&corrupt, text).unwrap();
        let r = mcheck(
            &args(&["replay", &corrupt.display().to_string()]),
            false,
            LIMIT,
        );
        assert_eq!(r.code, Some(2), "{text:?}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"));
        assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    }
    let r = mcheck(
        &args(&["replay", "/nonexistent/schedule.json"]),
        false,
        LIMIT,
    );
    assert_eq!(r.code, Some(2));

    // The program changed (a different binary at the recorded path).
    fs::copy(fixture("abba_O2"), &copy).unwrap();
    let r = mcheck(&args(&["replay", &schedule]), true, LIMIT);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("changed"), "{}", r.stderr);
    assert!(r.json.is_none());
    let _ = fs::remove_dir_all(&out);
}

/// The line of `tracee-fixtures/src/c/replay_locations.c` marked `/* LINE tag */`.
fn marked_line(tag: &str) -> String {
    let source = fixture("replay_locations")
        .parent()
        .and_then(|build| build.parent())
        .expect("tracee-fixtures")
        .join("src/c/replay_locations.c");
    let text = fs::read_to_string(&source).expect("fixture source");
    let n = text
        .lines()
        .position(|l| l.contains(&format!("/* LINE {tag} */")))
        .expect("marked line");
    format!("replay_locations.c:{}", n + 1)
}

#[test]
fn replay_steps_and_a_crash_in_a_passed_atomic_are_located_on_their_own_lines() {
    let out = temp_path("locations");
    let program = fixture("replay_locations").display().to_string();
    let (schedule, f) = find(&program, &[], &[], &out.display().to_string());
    // The fault happens in the out-of-line copy of main's atomic: it is said where the
    // program has the instruction.
    let crash = format!("in main at {}", marked_line("main"));
    assert_eq!(f["kind"], "crash", "{f}");
    assert!(f["message"].as_str().unwrap().ends_with(&crash), "{f}");
    let r = mcheck(
        &args(&["replay", "--quiet-program", &schedule]),
        false,
        LIMIT,
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let row = |operation: &str, place: &str| {
        r.stderr.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.get(2) == Some(&operation) && l.trim_end().ends_with(place)
        })
    };
    // An atomic that is its function's first instruction: bump's line, not the line of
    // the function before it (a location taken at pc - 1).
    let bump = format!("bump at {}", marked_line("bump"));
    assert!(row("atomic", &bump), "{bump}:\n{}", r.stderr);
    // A system call: where the program made it, found by unwinding out of libc.
    let sleep = format!("worker at {}", marked_line("sleep"));
    assert!(row("sleep", &sleep), "{sleep}:\n{}", r.stderr);
    assert!(!r.stderr.contains("??"), "{}", r.stderr);
    assert!(r.stderr.contains(&crash), "{}", r.stderr);
}
