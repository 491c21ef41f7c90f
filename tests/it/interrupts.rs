//! Signals that end a search or an audit from outside, as supervisors send them: GNU
//! `timeout` (to mcheck, then to its whole process group, then SIGCONT to both), a CI
//! cancellation or a batch system (to the process group). Each time the report is written
//! whole (`stopped_because` names the signal), the exit status is the usual one and no
//! process of the program is left, neither alive nor a zombie (found by the name of a
//! private copy of the fixture, as tests/it/no_leftovers.rs does). A signal sent to the
//! program itself by pid is the program's business: it never makes an internal error.
//!
//! Needs the fixtures (`make fixtures`) and GNU `timeout` (coreutils).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::formats::assert_valid_sarif;
use crate::common::processes::{leftovers_after, processes_of, PrivateCopy};
use crate::common::{fixture, temp_path};
use serde_json::Value;

/// How long processes killed by mcheck may take to disappear after it exited.
const GRACE: Duration = Duration::from_secs(1);
/// Runs of each signal under `timeout`.
const RUNS: usize = 20;
/// When `timeout` signals a search, in run `i`: from a quarter of a second to nearly half of
/// one, so that the cuts land at different moments of the search (while the program
/// starts, while snapshots are taken, between and inside executions: about 20 of them
/// run in the first 0.4 s on an idle machine), each run short.
fn cut_after(i: usize) -> String {
    format!("{:.2}", 0.25 + 0.05 * (i % 5) as f64)
}

/// The long search every test cuts: 100 threads, about 500 scheduling points per
/// execution, never exhausted within the test.
const LONG: &str = "hundred_threads_ok";

/// mcheck's options for a long search of `copy` writing its report into `copy.dir`.
fn search_args(copy: &PrivateCopy) -> Vec<String> {
    [
        "--quiet-program",
        "--progress",
        "never",
        "--max-executions",
        "100000",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        report_path(copy).display().to_string(),
        "--out".into(),
        copy.dir.join("schedules").display().to_string(),
        "--".into(),
        copy.exe.display().to_string(),
    ])
    .collect()
}

fn report_path(copy: &PrivateCopy) -> PathBuf {
    copy.dir.join("report.json")
}

/// Runs `command` (with a time limit, killing it after) and returns its output.
fn run_limited(mut command: Command, limit: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() && start.elapsed() < limit {
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    child.wait_with_output().expect("output")
}

/// `timeout --preserve-status -s SIG AFTER mcheck ARGS`: mcheck runs in timeout's process
/// group, which timeout signals after mcheck itself (and sends SIGCONT to both).
fn under_timeout(sig: &str, after: &str, mcheck_args: &[String]) -> Output {
    let mut command = Command::new("timeout");
    command
        .args(["--preserve-status", "-s", sig, after])
        .arg(env!("CARGO_BIN_EXE_mcheck"))
        .args(mcheck_args);
    run_limited(command, Duration::from_secs(60))
}

/// Reads a JSON file written by mcheck.
fn read_json(path: &Path, context: &str) -> Value {
    let text = fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: no report ({e}); {context}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {text:?}; {context}", path.display()))
}

/// The checks of one interrupted search: exit 0, a whole report that says why it
/// stopped, the summary on stderr, no internal error, nothing of the program left.
fn assert_stopped_cleanly(copy: &PrivateCopy, out: &Output, signal: &str, run: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!("{run}: {} {stderr}", out.status);
    assert!(!stderr.contains("internal error"), "{context}");
    assert_eq!(out.status.code(), Some(0), "{context}");
    let report = read_json(&report_path(copy), &context);
    assert_eq!(
        report["stopped_because"],
        format!("interrupted by {signal}"),
        "{context}"
    );
    for key in ["findings", "executions", "coverage", "elapsed_seconds"] {
        assert!(!report[key].is_null(), "no {key} in the report; {context}");
    }
    assert!(
        report["findings"].as_array().unwrap().is_empty(),
        "{context}"
    );
    assert!(stderr.contains("execution(s)"), "no summary; {context}");
    let left = leftovers_after(copy, GRACE);
    assert!(
        left.is_empty(),
        "left behind:\n  {}\n{context}",
        left.join("\n  ")
    );
}

/// `timeout -s SIG` on a long search, RUNS times.
fn timeout_cuts_a_search(sig: &str, signal: &str) {
    let copy = PrivateCopy::new(&fixture(LONG));
    let args = search_args(&copy);
    let mut executions = Vec::new();
    for i in 0..RUNS {
        let _ = fs::remove_file(report_path(&copy));
        let out = under_timeout(sig, &cut_after(i), &args);
        assert_stopped_cleanly(&copy, &out, signal, &format!("run {i} of {RUNS}"));
        let report = read_json(&report_path(&copy), "");
        executions.push(report["executions"].as_u64().unwrap_or(0));
    }
    eprintln!(
        "{RUNS} of {RUNS} runs cut by {signal} wrote their report; executions: {executions:?}"
    );
}

#[test]
fn timeout_term_ends_the_search_with_its_report_every_time() {
    timeout_cuts_a_search("TERM", "SIGTERM");
}

#[test]
fn timeout_int_ends_the_search_with_its_report_every_time() {
    timeout_cuts_a_search("INT", "SIGINT");
}

/// Whether this process was started with `sig` ignored (`nohup`, a background job of a
/// non-interactive shell): mcheck then leaves it alone, on purpose.
fn ignored_here(sig: i32) -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    mask & (1 << (sig - 1)) != 0
}

/// SIGHUP and SIGQUIT to mcheck's process group (a closed terminal, a batch system).
#[test]
fn sighup_and_sigquit_to_the_group_end_the_search_with_its_report() {
    use std::os::unix::process::CommandExt;
    for (sig, name) in [
        (nix::sys::signal::Signal::SIGHUP, "SIGHUP"),
        (nix::sys::signal::Signal::SIGQUIT, "SIGQUIT"),
    ] {
        if ignored_here(sig as i32) {
            eprintln!("note: {name} is ignored here, so mcheck ignores it too: not tested");
            continue;
        }
        let copy = PrivateCopy::new(&fixture(LONG));
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcheck"));
        command.args(search_args(&copy)).process_group(0);
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcheck");
        wait_for_program(&copy);
        let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
        nix::sys::signal::kill(group, sig).expect("signal the group");
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(30) {
            thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        assert_stopped_cleanly(&copy, &out, name, name);
    }
}

/// Waits until the program runs under mcheck (up to 10 s), and a little more.
fn wait_for_program(copy: &PrivateCopy) {
    let start = Instant::now();
    while processes_of(copy).is_empty() && start.elapsed() < Duration::from_secs(10) {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(300));
}

/// SIGCONT sent to the program's processes by pid, over and over, while they are traced
/// (between stops, in a step over a breakpoint, while a snapshot is forked): the program's
/// business, never an internal error. The search then ends at a SIGTERM with its report.
#[test]
fn sigcont_sent_to_the_program_is_not_an_internal_error() {
    let copy = PrivateCopy::new(&fixture(LONG));
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcheck"))
        .args(search_args(&copy))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcheck");
    wait_for_program(&copy);
    let start = Instant::now();
    let mut sent = 0;
    while start.elapsed() < Duration::from_secs(3) && child.try_wait().unwrap().is_none() {
        for p in pids_of(&copy) {
            let pid = nix::unistd::Pid::from_raw(p);
            if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).is_ok() {
                sent += 1;
            }
        }
        thread::sleep(Duration::from_millis(2));
    }
    let me = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(me, nix::sys::signal::Signal::SIGTERM);
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(sent > 100, "only {sent} SIGCONT sent");
    assert_stopped_cleanly(&copy, &out, "SIGTERM", &format!("{sent} SIGCONT sent"));
}

/// mcheck with `args`, in the foreground of a pseudo-terminal of its own (`script`, which
/// makes it a session leader with the terminal as its controlling one): what it writes
/// there is dropped; what is written to `script`'s stdin is typed at the terminal.
fn in_terminal(args: &[String]) -> std::process::Child {
    in_terminal_after("", args)
}

/// [`in_terminal`], with the shell command `before` run first (`exec` runs mcheck).
fn in_terminal_after(before: &str, args: &[String]) -> std::process::Child {
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_mcheck").to_string())
        .chain(args.iter().cloned())
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    let command = format!("{before} exec {}", quoted.join(" "));
    Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("script (util-linux) runs mcheck in a pseudo-terminal")
}

/// Waits up to 30 s for `copy`'s report, then for its processes to be gone.
fn wait_for_report(copy: &PrivateCopy) -> Value {
    let start = Instant::now();
    let mut report = None;
    while report.is_none() && start.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(50));
        report = fs::read_to_string(report_path(copy))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
    }
    let left = leftovers_after(copy, Duration::from_secs(3));
    assert!(left.is_empty(), "left behind:\n  {}", left.join("\n  "));
    report.expect("the report")
}

/// Ctrl-C typed at the terminal mcheck runs in the foreground of: the search ends with its
/// report, and the copy of SIGINT the terminal sends the program (which shares mcheck's
/// process group there) is not reported as the program's death.
#[test]
fn ctrl_c_at_the_terminal_ends_the_search_with_its_report() {
    use std::io::Write;
    let copy = PrivateCopy::new(&fixture(LONG));
    let mut script = in_terminal(&search_args(&copy));
    wait_for_program(&copy);
    let mut keys = script.stdin.take().expect("the terminal's input");
    keys.write_all(b"\x03").expect("type Ctrl-C");
    keys.flush().expect("type Ctrl-C");
    let report = wait_for_report(&copy);
    drop(keys);
    let _ = script.kill();
    let _ = script.wait();
    assert_eq!(
        report["stopped_because"], "interrupted by SIGINT",
        "{report}"
    );
    assert!(
        report["findings"].as_array().unwrap().is_empty(),
        "{report}"
    );
}

/// The terminal goes away (its window closed, the ssh connection lost): the kernel's SIGHUP
/// ends the search, and the report is written although the summary can no longer be shown.
#[test]
fn a_terminal_hangup_ends_the_search_with_its_report() {
    let copy = PrivateCopy::new(&fixture(LONG));
    let mut script = in_terminal(&search_args(&copy));
    wait_for_program(&copy);
    // The terminal's master side closes with `script`.
    script.kill().expect("kill script");
    let _ = script.wait();
    let report = wait_for_report(&copy);
    assert_eq!(
        report["stopped_because"], "interrupted by SIGHUP",
        "{report}"
    );
}

/// The terminal mcheck runs in the foreground of is resized over and over: the kernel sends
/// SIGWINCH to the foreground process group, the program included, at any moment (in a
/// step over one of mcheck's breakpoints, too). It is the program's (ignored by default),
/// never a finding: the step used to end without executing the instruction, so that a
/// `pthread_join` was seen twice ("joins thread T7, which thread T0 already joined").
#[test]
fn resizing_the_terminal_is_not_a_finding() {
    let copy = PrivateCopy::new(&fixture(LONG));
    let mut args = search_args(&copy);
    let budget = args.iter().position(|a| a == "100000").expect("the budget");
    args[budget] = "150".into();
    // Ends when the terminal does (stty fails on a hung-up terminal).
    let resize = "sh -c 'while stty cols 80 && stty cols 81; do :; done' \
                  </dev/tty >/dev/null 2>&1 &";
    let mut script = in_terminal_after(resize, &args);
    let report = wait_for_report(&copy);
    let _ = script.kill();
    let _ = script.wait();
    assert_eq!(
        report["stopped_because"], "execution budget spent",
        "{report}"
    );
    assert!(
        report["findings"].as_array().unwrap().is_empty(),
        "{report}"
    );
}

/// The pids of the program's processes (live ones; zombies cannot be signalled anyway).
fn pids_of(copy: &PrivateCopy) -> Vec<i32> {
    processes_of(copy)
        .iter()
        .filter_map(|line| line.strip_prefix("pid ")?.split(' ').next()?.parse().ok())
        .collect()
}

/// A manifest of three targets run one after the other: a quick one with a deadlock, then
/// two long searches of `copy`.
fn audit_manifest(dir: &Path, copy: &PrivateCopy) -> PathBuf {
    let abba = fixture("abba_O0");
    let long = copy.exe.display();
    let text = format!(
        "jobs = 1\n\
         [[target]]\nname = \"quick\"\ncommand = [\"{}\"]\nmax_executions = 50\n\
         [[target]]\nname = \"long1\"\ncommand = [\"{long}\"]\nmax_executions = 100000\n\
         [[target]]\nname = \"long2\"\ncommand = [\"{long}\"]\nmax_executions = 100000\n",
        abba.display()
    );
    let path = dir.join("audit.toml");
    fs::write(&path, text).expect("write the manifest");
    path
}

/// Signals the process group of `child` (which leads it) as GNU `timeout` does: `sig` to
/// the process, then to its group, then SIGCONT to both.
fn signal_like_timeout(child: &std::process::Child, sig: nix::sys::signal::Signal) {
    use nix::sys::signal::{kill, Signal};
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
    for (to, s) in [
        (pid, sig),
        (group, sig),
        (pid, Signal::SIGCONT),
        (group, Signal::SIGCONT),
    ] {
        let _ = kill(to, s);
    }
}

/// An audit cut by SIGTERM (or SIGINT) sent as `timeout` sends it, in the middle of its
/// second target: the first target's finding, the second's report (stopped by the signal)
/// and the third marked not run are in audit.json, junit.xml and results.sarif; the exit
/// status is 1 (the finding); nothing of the program is left. (The signal is sent once the
/// second target runs, rather than by `timeout` after a fixed delay, which a loaded
/// machine could make land in the first target.)
#[test]
fn an_audit_cut_mid_way_writes_every_output() {
    use nix::sys::signal::Signal;
    use std::os::unix::process::CommandExt;
    let copy = PrivateCopy::new(&fixture(LONG));
    let manifest = audit_manifest(&copy.dir, &copy);
    for (i, (sig, signal)) in [(Signal::SIGTERM, "SIGTERM"), (Signal::SIGINT, "SIGINT")]
        .iter()
        .cycle()
        .take(6)
        .enumerate()
    {
        let out_dir = temp_path("interrupted-audit");
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcheck"))
            .arg("audit")
            .arg(&manifest)
            .arg("--out")
            .arg(&out_dir)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcheck audit");
        wait_for_program(&copy);
        signal_like_timeout(&child, *sig);
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(60) {
            thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let context = format!("run {i} ({signal}): {} {stderr}", out.status);
        assert_eq!(out.status.code(), Some(1), "{context}");
        let audit = read_json(&out_dir.join("audit.json"), &context);
        assert_eq!(
            audit["stopped_because"],
            format!("interrupted by {signal}"),
            "{context}"
        );
        let targets = audit["targets"].as_array().expect("targets");
        let status = |n: usize| targets[n]["status"].as_str().unwrap_or("").to_string();
        assert_eq!(status(0), "findings", "{context}");
        assert_eq!(status(1), "clean", "{context}");
        assert_eq!(
            targets[1]["report"]["stopped_because"],
            format!("interrupted by {signal}"),
            "{context}"
        );
        assert_eq!(status(2), "skipped", "{context}");
        assert_eq!(
            targets[2]["error"], "not run: the audit was interrupted",
            "{context}"
        );
        assert_junit(&out_dir.join("junit.xml"), &context);
        assert_sarif(&out_dir.join("results.sarif"), signal, &context);
        assert!(stderr.contains("The audit was interrupted by"), "{context}");
        let left = leftovers_after(&copy, GRACE);
        assert!(
            left.is_empty(),
            "left behind:\n  {}\n{context}",
            left.join("\n  ")
        );
        let _ = fs::remove_dir_all(&out_dir);
    }
}

/// SIGKILL of an audit whose target runs: the target's mcheck (in a process group of its
/// own) dies with it, and so does the program.
#[test]
fn sigkill_of_an_audit_leaves_nothing() {
    use std::os::unix::process::CommandExt;
    let copy = PrivateCopy::new(&fixture(LONG));
    let manifest = audit_manifest(&copy.dir, &copy);
    let out_dir = temp_path("killed-audit");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcheck"))
        .arg("audit")
        .arg(&manifest)
        .arg("--out")
        .arg(&out_dir)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mcheck audit");
    wait_for_program(&copy);
    assert!(!checkers_of(&copy).is_empty(), "no target runs");
    child.kill().expect("SIGKILL the audit");
    let _ = child.wait();
    let start = Instant::now();
    while !checkers_of(&copy).is_empty() && start.elapsed() < Duration::from_secs(3) {
        thread::sleep(Duration::from_millis(20));
    }
    let _ = fs::remove_dir_all(&out_dir);
    let survivors = checkers_of(&copy);
    for pid in &survivors {
        // Started by this test's audit: ended here so that a failure leaves nothing either.
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    assert!(
        survivors.is_empty(),
        "target mcheck outlives the audit: {survivors:?}"
    );
    let left = leftovers_after(&copy, Duration::from_secs(3));
    assert!(left.is_empty(), "left behind:\n  {}", left.join("\n  "));
}

/// The pids of mcheck processes checking `copy` (its path is on their command line).
fn checkers_of(copy: &PrivateCopy) -> Vec<String> {
    let exe = copy.exe.display().to_string();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let comm = fs::read_to_string(e.path().join("comm")).ok()?;
            let cmdline = fs::read(e.path().join("cmdline")).ok()?;
            let is_checker =
                comm.trim() == "mcheck" && String::from_utf8_lossy(&cmdline).contains(exe.as_str());
            is_checker.then(|| pid.to_string())
        })
        .collect()
}

/// junit.xml: the deadlock a failure, the cut target a success, the last one skipped.
fn assert_junit(path: &Path, context: &str) {
    let xml = fs::read_to_string(path).unwrap_or_else(|e| panic!("junit.xml: {e}; {context}"));
    assert!(xml.contains("<testcase name=\"quick\""), "{xml}");
    assert!(xml.contains("<failure"), "{xml}");
    let long2 = xml.split("<testcase name=\"long2\"").nth(1).unwrap_or("");
    assert!(
        long2.contains("<skipped message=\"not run: the audit was interrupted\""),
        "{xml}"
    );
}

/// results.sarif: valid SARIF 2.1.0, the deadlock a result, and an unsuccessful invocation
/// naming the target that was not run.
fn assert_sarif(path: &Path, signal: &str, context: &str) {
    assert!(path.exists(), "no results.sarif; {context}");
    let sarif = assert_valid_sarif(path);
    let run = &sarif["runs"][0];
    assert_eq!(run["results"].as_array().map(Vec::len), Some(1), "{sarif}");
    let invocation = &run["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false, "{sarif}");
    assert_eq!(
        invocation["exitCodeDescription"],
        format!("the audit was interrupted by {signal}"),
        "{sarif}"
    );
    let notes = invocation["toolExecutionNotifications"].to_string();
    assert!(
        notes.contains("[long2] not run: the audit was interrupted"),
        "{sarif}"
    );
}
