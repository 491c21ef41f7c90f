//! The process tree: a program run by a shell (`sh -c 'exec PROG'`, `sh -c 'PROG; true'`),
//! a script given directly and a runner that forks one process per test are checked whole;
//! findings name the process they are in, their schedules replay, no process is left
//! behind; a process mcheck cannot check is said to have run untraced, and the search then
//! claims neither "exhausted" nor a plain "no bug found".
//!
//! Needs the fixtures: run `make fixtures` first.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::common::processes::{leftovers_after, PrivateCopy};
use crate::common::{args, fixture, mcheck, mcheck_with_piped_stdout, temp_path, Run};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs a search on `command` (schedules written under `out`), with a JSON report.
fn search(command: &[String], out: &str) -> Run {
    let mut a = args(&["--quiet-program", "--seed", "1", "--out", out, "--"]);
    a.extend(command.iter().cloned());
    mcheck(&a, true, LIMIT)
}

/// The first finding of a run that must have found one.
fn first_finding(r: &Run) -> Value {
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    let json = r.json.as_ref().expect("a JSON report");
    json["findings"][0].clone()
}

/// The processes the finding's threads are in: (number, program) of each thread's.
fn processes_of_threads(f: &Value) -> Vec<(u64, String)> {
    (f["threads"].as_array().expect("threads").iter())
        .filter_map(|t| {
            let p = t.get("process")?;
            Some((p["number"].as_u64()?, p["program"].as_str()?.to_string()))
        })
        .collect()
}

/// The schedule of `f` replays to a finding of the same kind.
fn replays(f: &Value) {
    let schedule = f["schedule"].as_str().expect("schedule path");
    let r = mcheck(&args(&["replay", schedule]), true, LIMIT);
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    let again = &r.json.expect("replay JSON")["findings"][0];
    assert_eq!(again["kind"], f["kind"], "{}", r.stderr);
}

#[test]
fn sh_c_exec_checks_the_program_after_exec() {
    let out = temp_path("schedules");
    let prog = fixture("race_counter").display().to_string();
    let r = search(
        &args(&["/bin/sh", "-c", &format!("exec {prog}")]),
        &out.display().to_string(),
    );
    let f = first_finding(&r);
    assert_eq!(f["kind"], "data_race", "{}", r.stderr);
    // The threads are race_counter's, in the image that replaced the shell (P0 exec'd).
    let procs = processes_of_threads(&f);
    assert!(!procs.is_empty(), "threads name their process: {f}");
    assert!(
        procs
            .iter()
            .all(|(n, p)| *n == 0 && p.ends_with("race_counter")),
        "{procs:?}"
    );
    replays(&f);
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn sh_c_runs_a_child_whose_deadlock_is_found() {
    let out = temp_path("schedules");
    let prog = fixture("abba_O0").display().to_string();
    let r = search(
        &args(&["/bin/sh", "-c", &format!("{prog}; true")]),
        &out.display().to_string(),
    );
    let f = first_finding(&r);
    assert_eq!(f["kind"], "deadlock", "{}", r.stderr);
    // In the child the shell forked (P1), named in the report.
    let procs = processes_of_threads(&f);
    assert!(
        procs.iter().all(|(n, p)| *n == 1 && p.ends_with("abba_O0")),
        "{procs:?}"
    );
    assert!(
        r.stderr.contains("(tid ") && r.stderr.contains(", process P1)"),
        "the human report names the process: {}",
        r.stderr
    );
    replays(&f);
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn a_static_child_of_a_shell_is_explored_by_dfs_and_icb_alone() {
    // Stop 44 saw `sh -c 'abba_static; true'` diverge on replayed prefixes under dfs and
    // icb with races on ("did not repeat its behaviour"), missing the deadlock. Both
    // systematic strategies must find it, follow every schedule and end the tree.
    let prog = fixture("abba_static").display().to_string();
    for strategy in ["dfs", "icb"] {
        let out = temp_path("schedules");
        let mut a = args(&["--quiet-program", "--keep-going", "--strategy", strategy]);
        a.extend(args(&[
            "--max-executions",
            "500",
            "--out",
            &out.display().to_string(),
        ]));
        a.extend(args(&["--", "/bin/sh", "-c", &format!("{prog}; true")]));
        let r = mcheck(&a, true, LIMIT);
        let f = first_finding(&r);
        assert_eq!(f["kind"], "deadlock", "{strategy}: {}", r.stderr);
        assert!(
            !r.stderr.contains("did not repeat"),
            "{strategy}: {}",
            r.stderr
        );
        let json = r.json.as_ref().expect("a JSON report");
        assert_eq!(json["coverage"]["exhausted"], true, "{strategy}: {json}");
        let _ = fs::remove_dir_all(&out);
    }
}

#[test]
fn a_script_given_directly_is_run_and_checked() {
    let dir = temp_path("script");
    fs::create_dir_all(&dir).unwrap();
    let script = dir.join("run.sh");
    let prog = fixture("race_counter").display().to_string();
    fs::write(&script, format!("#!/bin/sh\n'{prog}'\necho done\n")).unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.join("schedules").display().to_string();
    let r = search(&[script.display().to_string()], &out);
    let f = first_finding(&r);
    assert_eq!(f["kind"], "data_race", "{}", r.stderr);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_test_runner_is_checked_in_every_test_process() {
    let out = temp_path("schedules");
    let runner = fixture("fork_test_runner").display().to_string();
    let r = search(std::slice::from_ref(&runner), &out.display().to_string());
    let f = first_finding(&r);
    assert_eq!(f["kind"], "data_race", "{}", r.stderr);
    // The racy test is the third the runner forks: P3, not the runner (P0).
    let procs = processes_of_threads(&f);
    assert!(procs.iter().all(|(n, _)| *n == 3), "{procs:?}");
    replays(&f);
    // Without the racy test, every test process is checked and nothing is found.
    let r = search(
        &[runner, "--correct-only".into()],
        &out.display().to_string(),
    );
    assert_eq!(r.code, Some(0), "{}: {}", r.command, r.stderr);
    let json = r.json.expect("JSON report");
    assert_eq!(json["findings"].as_array().map(Vec::len), Some(0));
    assert!(json.get("untraced_processes").is_none(), "{json}");
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn a_process_sharing_memory_is_said_to_run_untraced() {
    let out = temp_path("schedules");
    let prog = fixture("clone_vm_helper").display().to_string();
    let r = search(std::slice::from_ref(&prog), &out.display().to_string());
    assert_eq!(r.code, Some(0), "{}: {}", r.command, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("mcheck: note: process {prog} ran untraced")),
        "{}",
        r.stderr
    );
    let summary = (r.stderr.lines())
        .find(|l| l.contains("execution(s)"))
        .unwrap_or_default();
    assert!(
        !summary.contains("search space exhausted")
            && summary.contains("search space not exhausted")
            && summary.contains("no bug found in the processes checked"),
        "no claim of exhaustion or of a clean program: {summary}"
    );
    let json = r.json.expect("JSON report");
    assert_eq!(json["complete"], false);
    assert_eq!(json["untraced_processes"][0]["program"], prog.as_str());
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn no_process_of_a_shell_run_is_left_behind() {
    let copy = PrivateCopy::new(&fixture("abba_O0"));
    let out = temp_path("schedules");
    let exe = copy.exe.display().to_string();
    // The shell forks the program twice; the first execution deadlocks and is killed.
    let r = search(
        &args(&["/bin/sh", "-c", &format!("{exe}; {exe}; true")]),
        &out.display().to_string(),
    );
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    // A child killed with the shell that forked it is reparented to init once the tracer has
    // reaped it: init reaps its zombie (as after `kill -9` of mcheck, see no_leftovers.rs).
    let left = leftovers_after(&copy, Duration::from_secs(3));
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn a_vfork_child_joins_the_tree_at_the_same_point_every_time() {
    // With a job in the background, dash starts its last command with vfork: the child
    // must join the tree when it execs, within its parent's step, or replayed prefixes
    // diverge; it is checked, not noted as untraced.
    let out = temp_path("schedules");
    let prog = fixture("race_counter").display().to_string();
    let r = search(
        &args(&["/bin/sh", "-c", &format!("sleep 100 & {prog}")]),
        &out.display().to_string(),
    );
    let f = first_finding(&r);
    assert_eq!(f["kind"], "data_race", "{}", r.stderr);
    assert!(!r.stderr.contains("ran untraced"), "{}", r.stderr);
    assert!(!r.stderr.contains("did not repeat"), "{}", r.stderr);
    replays(&f);
    let _ = fs::remove_dir_all(&out);
}

/// `sh -c 'pipe_writer_ok | wc -c'`: the writer's stdout is a pipe to another process of the
/// tree, which runs only when mcheck lets it. A full pipe is a wait like any other: every
/// execution runs to its end (none is cut after the watchdog's wait, as all were when writes
/// to stdout were let go as if the user drained them), and `wc` counts all 256 KiB.
#[test]
fn a_pipe_to_another_process_of_the_tree_is_drained_by_it() {
    let writer = fixture("pipe_writer_ok").display().to_string();
    let mut a = args(&[
        "--seed",
        "1",
        "--max-executions",
        "20",
        // A cut would take 10 s (ten times this), not 100.
        "--execution-timeout",
        "1",
        "--",
        "/bin/sh",
        "-c",
    ]);
    a.push(format!("{writer} | wc -c"));
    let r = mcheck_with_piped_stdout(&a, true, LIMIT);
    assert_eq!(r.code, Some(0), "{}: {}", r.command, r.stderr);
    let json = r.json.as_ref().expect("a JSON report");
    assert_eq!(json["cut_waiting_on_kernel"], 0, "{}", r.stderr);
    assert_eq!(json["ran_to_end"], json["executions"], "{}", r.stderr);
    assert_eq!(json["executions"], 20, "{}", r.stderr);
    // The first execution's output is shown, as natively: `wc -c` counts all of it.
    assert_eq!(r.stdout.trim(), "262144", "{}", r.stderr);
}
