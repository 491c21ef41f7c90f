//! Process hygiene: whatever happens to the checked program (crashes, exit_group
//! from a thread, self-kill, signals, fork+exec, deadlocks, timeouts) and even when
//! mcheck itself is SIGKILLed, no process of the checked program may survive mcheck
//! — neither alive nor as a zombie.
//!
//! Every test runs its own private copy of a fixture binary, placed in a fresh
//! temporary directory under a short unique file name.  A leftover is then any
//! process whose `/proc/PID/exe` is that copy, or whose `comm` (the first 15 bytes
//! of the file name, kept even by zombies whose exe link is gone) equals the unique
//! name.  Tests running in parallel, or other mcheck runs on the same fixtures,
//! therefore never see each other's processes.
//!
//! Needs the fixtures: run `make fixtures` first.

use crate::common::processes::{leftovers_after, processes_of, PrivateCopy};
use serde_json::Value;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const RUN_LIMIT: Duration = Duration::from_secs(120);
/// After mcheck has exited on its own, the kernel may still be tearing down
/// processes it killed; allow this long for them to disappear.
const GRACE_NORMAL: Duration = Duration::from_secs(1);
/// After mcheck was SIGKILLed, its tracees die through PTRACE_O_EXITKILL (or
/// whatever mechanism mcheck uses); allow this long.
const GRACE_AFTER_KILL: Duration = Duration::from_secs(3);
/// Executions per run: enough to exercise the machinery, short enough to be quick.
const EXECUTIONS: &str = "20";

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tracee-fixtures")
}

struct Fixture {
    binary: PathBuf,
    args: Vec<String>,
    options: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Looks a fixture up in expected.json, so that binary, args and options stay in sync.
fn fixture(name: &str) -> Fixture {
    let dir = fixtures_dir();
    assert!(
        dir.join("build").is_dir(),
        "{} is missing: run `make fixtures` (or `make -C tracee-fixtures`) before `cargo test`",
        dir.join("build").display()
    );
    let text =
        fs::read_to_string(dir.join("expected.json")).expect("read tracee-fixtures/expected.json");
    let json: Value = serde_json::from_str(&text).expect("expected.json is valid JSON");
    let e = json
        .as_array()
        .expect("expected.json is an array")
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
        .unwrap_or_else(|| panic!("expected.json has no fixture named {name}"));
    let binary = dir.join(
        e.get("binary")
            .and_then(Value::as_str)
            .expect("fixture binary"),
    );
    assert!(
        binary.is_file(),
        "{} does not exist: run `make fixtures`",
        binary.display()
    );
    Fixture {
        binary,
        args: strings(e.get("args")),
        options: strings(e.get("options")),
    }
}

fn spawn_mcheck(copy: &PrivateCopy, fx: &Fixture, executions: &str) -> Child {
    // The fixture's options first: the budget here wins over one of its own.
    let mut args = fx.options.clone();
    args.extend([
        "--quiet-program".into(),
        "--seed".into(),
        "1".into(),
        "--max-executions".into(),
        executions.into(),
    ]);
    args.push("--".into());
    args.push(copy.exe.display().to_string());
    args.extend(fx.args.iter().cloned());
    let log = copy.dir.join("mcheck.log");
    let log_file = File::create(&log).expect("create log");
    Command::new(env!("CARGO_BIN_EXE_mcheck"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .expect("spawn mcheck")
}

fn wait_limited(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait for mcheck") {
            return Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Runs mcheck to completion on a private copy of fixture `name` and checks that
/// nothing of the program is left afterwards.
fn check_clean_after_run(name: &str) {
    let fx = fixture(name);
    let copy = PrivateCopy::new(&fx.binary);
    let mut child = spawn_mcheck(&copy, &fx, EXECUTIONS);
    let status = wait_limited(&mut child, RUN_LIMIT);
    let log = fs::read_to_string(copy.dir.join("mcheck.log")).unwrap_or_default();
    let left = leftovers_after(&copy, GRACE_NORMAL);
    assert!(
        left.is_empty(),
        "{name}: processes of the checked program survive mcheck (mcheck {}):\n  {}\nmcheck output:\n{}",
        status.map_or("was killed after the time limit".to_string(), |s| format!("exited with {s}")),
        left.join("\n  "),
        log
    );
    assert!(
        status.is_some(),
        "{name}: mcheck did not finish within {}s\nmcheck output:\n{log}",
        RUN_LIMIT.as_secs()
    );
    eprintln!("{name}: mcheck {}, no leftovers", status.unwrap());
}

#[test]
fn thread_segv_leaves_nothing() {
    check_clean_after_run("thread_segv");
}

#[test]
fn exit_group_during_join_leaves_nothing() {
    check_clean_after_run("exit_group_thread_join");
}

#[test]
fn exit_group_during_cond_wait_leaves_nothing() {
    check_clean_after_run("exit_group_thread_cond");
}

#[test]
fn raise_sigkill_leaves_nothing() {
    check_clean_after_run("self_kill_sigkill");
}

#[test]
fn raise_sigterm_leaves_nothing() {
    check_clean_after_run("self_kill_sigterm");
}

#[test]
fn sigusr1_handler_leaves_nothing() {
    check_clean_after_run("sigusr1_handler");
}

#[test]
fn fork_exec_leaves_nothing() {
    check_clean_after_run("fork_exec_true");
}

#[test]
fn deadlock_leaves_nothing() {
    check_clean_after_run("abba_O0");
}

#[test]
fn spinning_thread_timeout_leaves_nothing() {
    check_clean_after_run("plain_spin_timeout");
}

/// SIGKILL mcheck in the middle of a long exploration: its tracees (and any
/// snapshot processes) must die with it.
#[test]
fn sigkill_of_mcheck_leaves_nothing() {
    let fx = fixture("hundred_threads_ok");
    let copy = PrivateCopy::new(&fx.binary);
    let mut child = spawn_mcheck(&copy, &fx, "100000");
    // Wait until a fork-snapshot template and an execution copied from it exist side by
    // side (two processes of the program), so that the kill hits both.
    let mut running_before = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(3000) {
        running_before = processes_of(&copy);
        if running_before.len() >= 2 && start.elapsed() > Duration::from_millis(500) {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "before the kill: {} process(es) of the program:\n  {}",
        running_before.len(),
        running_before.join("\n  ")
    );
    let exited_early = child.try_wait().expect("wait for mcheck");
    if let Some(s) = exited_early {
        let log = fs::read_to_string(copy.dir.join("mcheck.log")).unwrap_or_default();
        eprintln!(
            "note: mcheck exited on its own ({s}) before it could be killed; \
             the SIGKILL part of this test was not exercised\nmcheck output:\n{log}"
        );
    } else {
        child.kill().expect("SIGKILL mcheck");
        let _ = child.wait();
        if running_before.is_empty() {
            eprintln!("note: no process of the checked program was seen before the SIGKILL");
        }
    }
    let left = leftovers_after(&copy, GRACE_AFTER_KILL);
    assert!(
        left.is_empty(),
        "processes of the checked program survive a SIGKILL of mcheck (after {}s):\n  {}",
        GRACE_AFTER_KILL.as_secs(),
        left.join("\n  ")
    );
}

/// Stopped orphans left by an mcheck that died between forking a tracee and seizing it:
/// processes adopted by init, stopped, still named after an mcheck worker thread (they have
/// not exec'd yet).
fn stopped_unseized_orphans() -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if comm.starts_with("mcheck-worker")
            && rest.first() == Some(&"T")
            && rest.get(1) == Some(&"1")
        {
            found.push(format!("{pid} {comm}"));
        }
    }
    found
}

#[test]
fn killing_mcheck_while_it_launches_leaves_no_stopped_child() {
    let fx = fixture("abba_O0");
    let copy = PrivateCopy::new(&fx.binary);
    for i in 0..40u64 {
        let mut child = spawn_mcheck(&copy, &fx, "100000");
        // Kill at many moments of the first launches (fork, stop, seize, exec).
        thread::sleep(Duration::from_micros(i * 250));
        let _ = child.kill();
        let _ = child.wait();
    }
    thread::sleep(Duration::from_millis(300));
    let left = stopped_unseized_orphans();
    assert!(
        left.is_empty(),
        "stopped children of a killed mcheck were left behind: {left:?}"
    );
}

/// Spawns mcheck on a long search of a private copy of `hundred_threads_ok` with a JSON
/// report, in a process group of its own when `own_group`, and waits until the program runs.
fn interruptible_search(copy: &PrivateCopy, own_group: bool) -> Child {
    use std::os::unix::process::CommandExt;
    let log = File::create(copy.dir.join("mcheck.log")).expect("create log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcheck"));
    cmd.args([
        "--quiet-program",
        "--progress",
        "never",
        "--max-executions",
        "100000",
    ])
    .arg("--json")
    .arg(copy.dir.join("report.json"))
    .arg("--out")
    .arg(copy.dir.join("schedules"))
    .arg("--")
    .arg(&copy.exe)
    .stdin(Stdio::null())
    .stdout(log.try_clone().unwrap())
    .stderr(log);
    if own_group {
        cmd.process_group(0);
    }
    let child = cmd.spawn().expect("spawn mcheck");
    let start = Instant::now();
    while processes_of(copy).is_empty() && start.elapsed() < Duration::from_secs(10) {
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(300));
    child
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).expect("send a signal");
}

/// SIGINT (or SIGTERM) ends the search cleanly: the summary and the JSON report are
/// written, the exit status is the usual one, and no process of the program is left.
#[test]
fn sigint_and_sigterm_end_the_search_with_a_report() {
    use nix::sys::signal::Signal;
    for (sig, group) in [
        (Signal::SIGINT, false),
        (Signal::SIGTERM, false),
        // Ctrl-C reaches the whole process group, the traced program included: that copy
        // is not the program's business (no exit_status finding).
        (Signal::SIGINT, true),
    ] {
        let copy = PrivateCopy::new(&fixture("hundred_threads_ok").binary);
        let mut child = interruptible_search(&copy, group);
        let target = child.id() as i32;
        signal(if group { -target } else { target }, sig);
        let status = wait_limited(&mut child, Duration::from_secs(20));
        let log = fs::read_to_string(copy.dir.join("mcheck.log")).unwrap_or_default();
        let left = leftovers_after(&copy, GRACE_NORMAL);
        assert!(
            left.is_empty(),
            "{sig:?}: left behind:\n  {}",
            left.join("\n  ")
        );
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{sig:?} (group {group}): {log}"
        );
        let report: Value = serde_json::from_str(
            &fs::read_to_string(copy.dir.join("report.json")).expect("the JSON report"),
        )
        .expect("valid JSON");
        assert_eq!(
            report["stopped_because"],
            format!("interrupted by {sig:?}"),
            "{log}"
        );
        assert!(report["findings"].as_array().unwrap().is_empty(), "{log}");
        assert!(log.contains("execution(s)"), "no summary: {log}");
    }
}

/// A second SIGINT exits at once, without a report, yet leaves no traced process. (It
/// comes from another process: a copy of the first from the same sender within a second is
/// the same request, as `timeout` sends one to mcheck and one to its process group.)
#[test]
fn a_second_sigint_exits_at_once_and_leaves_nothing() {
    use nix::sys::signal::Signal;
    let copy = PrivateCopy::new(&fixture("hundred_threads_ok").binary);
    let mut child = interruptible_search(&copy, false);
    signal(child.id() as i32, Signal::SIGINT);
    thread::sleep(Duration::from_millis(5));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = wait_limited(&mut child, Duration::from_secs(20));
    let log = fs::read_to_string(copy.dir.join("mcheck.log")).unwrap_or_default();
    let left = leftovers_after(&copy, GRACE_AFTER_KILL);
    assert!(
        left.is_empty(),
        "left behind:\n  {}\n{log}",
        left.join("\n  ")
    );
    match status.and_then(|s| s.code()) {
        Some(130) => assert!(log.contains("interrupted again"), "{log}"),
        // The first one had already ended the search.
        Some(0) => eprintln!("note: the search ended before the second SIGINT"),
        other => panic!("exit {other:?}: {log}"),
    }
}
