//! The program's output as an oracle: `output_lost_update`, whose bug shows only in the
//! total it prints, is a `nondeterminism` finding by default (its stdout on /dev/null's
//! stand-in under `--quiet-program`, on a pipe, with two workers), the same with the same
//! seed, and its schedule replays to the same finding; `--no-output-check` finds nothing;
//! a stdout redirected to a file is compared as a file the program writes. The same for
//! `file_lost_update`, whose bug shows only in a file it writes.

use std::time::Duration;

use crate::common::{
    args, fixture, mcheck, mcheck_with_piped_stdout, mcheck_with_stdout, temp_path, Run,
};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

fn search(options: &[&str]) -> Vec<String> {
    let mut a = args(&["--seed", "1"]);
    a.extend(args(options));
    a.push("--".into());
    a.push(fixture("output_lost_update").display().to_string());
    a
}

fn first_finding(json: &Option<Value>) -> Value {
    json.as_ref().expect("a report")["findings"][0].clone()
}

/// Replays the schedule of finding `f` (stdout on a pipe): the replay must report it again,
/// with the same message. Returns the replay's run.
fn replays_to_the_same_finding(f: &Value) -> Run {
    let schedule = f["schedule"].as_str().expect("a schedule file");
    let replay = mcheck_with_piped_stdout(&args(&["replay", schedule]), true, LIMIT);
    assert_eq!(
        replay.code,
        Some(1),
        "{}: {}",
        replay.command,
        replay.stderr
    );
    let rf = first_finding(&replay.json);
    assert_eq!(rf["kind"], "nondeterminism");
    assert_eq!(rf["message"], f["message"], "{}", replay.stderr);
    replay
}

#[test]
fn an_output_that_depends_on_the_schedule_is_found_and_replays() {
    let out = temp_path("oracle-out");
    let out = out.display().to_string();
    let r = mcheck(&search(&["--quiet-program", "--out", &out]), true, LIMIT);
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    let f = first_finding(&r.json);
    assert_eq!(f["kind"], "nondeterminism", "{}", r.stderr);
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with("the program's output depends on the schedule: line 2 is `total "),
        "{message}"
    );
    assert!(
        !f["other_schedule"]
            .as_array()
            .expect("both schedules")
            .is_empty(),
        "{f}"
    );
    // The same seed finds the same difference; with one worker, in the same execution
    // (with two, executions are numbered as they end, which timing decides).
    let again = mcheck(&search(&["--quiet-program", "--out", &out]), true, LIMIT);
    assert_eq!(first_finding(&again.json)["message"], f["message"]);
    let one_worker = || {
        let r = mcheck(
            &search(&["--quiet-program", "--jobs", "1", "--out", &out]),
            true,
            LIMIT,
        );
        let g = first_finding(&r.json);
        (g["message"].clone(), g["execution"].clone())
    };
    let first = one_worker();
    assert_eq!(first.0, f["message"]);
    assert_eq!(one_worker(), first);

    let replay = replays_to_the_same_finding(&f);
    // The replay shows the finding's own output, not the other execution's.
    assert_eq!(
        replay.stdout.matches("total").count(),
        1,
        "{}",
        replay.stdout
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_output_is_compared_on_a_pipe_with_two_workers() {
    let r = mcheck_with_piped_stdout(&search(&["--jobs", "2"]), true, LIMIT);
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    assert_eq!(first_finding(&r.json)["kind"], "nondeterminism");
    // Only the first execution's output is shown.
    assert_eq!(r.stdout, "workers done\ntotal 30\n");
}

#[test]
fn no_output_check_compares_nothing() {
    let r = mcheck(
        &search(&["--quiet-program", "--no-output-check"]),
        true,
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{}: {}", r.command, r.stderr);
    assert_eq!(first_finding(&r.json), Value::Null);
}

#[test]
fn a_stdout_in_a_file_is_compared_as_a_file_the_program_writes() {
    let file = temp_path("oracle-stdout");
    let r = mcheck_with_stdout(&search(&[]), true, LIMIT, &file);
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    let f = first_finding(&r.json);
    assert_eq!(f["kind"], "nondeterminism", "{}", r.stderr);
    assert_eq!(f["output_file"], file.display().to_string());
    assert!(
        !r.stderr
            .contains("the executions' outputs were not compared"),
        "{}",
        r.stderr
    );
    // The file holds one run's output: the first execution that ran to its end.
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written, "workers done\ntotal 30\n");
    let _ = std::fs::remove_file(&file);
}

/// `file_lost_update`, whose bug shows only in the file it writes (its stdout is the same
/// in every schedule), searched with its output file at `path`.
fn file_search(path: &str, options: &[&str]) -> Vec<String> {
    let mut a = args(&["--seed", "1", "--quiet-program"]);
    a.extend(args(options));
    a.push("--".into());
    a.push(fixture("file_lost_update").display().to_string());
    a.push(path.into());
    a
}

#[test]
fn a_file_that_depends_on_the_schedule_is_found_and_replays() {
    let out = temp_path("oracle-file-out");
    let out = out.display().to_string();
    let file = temp_path("oracle-file-total");
    let path = file.display().to_string();
    let r = mcheck(&file_search(&path, &["--out", &out]), true, LIMIT);
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    let f = first_finding(&r.json);
    assert_eq!(f["kind"], "nondeterminism", "{}", r.stderr);
    assert_eq!(f["output_file"], path.as_str());
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "what the program writes to {path} depends on the schedule: line 2 is `total "
        )),
        "{message}"
    );
    // After the search the file is as one run leaves it: the first complete execution.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "workers done\ntotal 30\n"
    );

    replays_to_the_same_finding(&f);
    // The replay leaves the file as the finding's own schedule writes it.
    let left = std::fs::read_to_string(&file).unwrap();
    assert!(
        left == "workers done\ntotal 10\n" || left == "workers done\ntotal 20\n",
        "{left}"
    );

    let off = mcheck(&file_search(&path, &["--no-output-check"]), true, LIMIT);
    assert_eq!(off.code, Some(0), "{}: {}", off.command, off.stderr);
    assert_eq!(first_finding(&off.json), Value::Null);
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&out);
}
