//! Shared helpers of the integration tests: run the real `mcheck` binary with a time limit,
//! collect its exit status, stderr and JSON report, and find the fixtures.

#![allow(dead_code)]

pub mod formats;
pub mod processes;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The result of one mcheck run.
pub struct Run {
    /// Exit code (None: killed by a signal or by the time limit).
    pub code: Option<i32>,
    /// Its stderr.
    pub stderr: String,
    /// The `--json` report, when one was asked for and written.
    pub json: Option<Value>,
    /// The command line, for messages.
    pub command: String,
    /// Its stdout, when it went to a pipe ([`mcheck_with_piped_stdout`]); else empty.
    pub stdout: String,
}

/// Where an mcheck run's stdout goes.
enum StdoutTo<'a> {
    Null,
    File(&'a Path),
    Pipe,
}

/// The fixtures directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tracee-fixtures")
}

/// A fixture binary, which must have been built by `make fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    let p = fixtures().join("build").join(name);
    assert!(
        p.exists(),
        "{} is missing: run `make fixtures`",
        p.display()
    );
    p
}

/// A fresh temporary path (not created).
pub fn temp_path(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "mcheck-test-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ))
}

/// Runs mcheck with `args`, writing the JSON report to a temporary file when `json` is set.
/// Kills it after `limit`.
pub fn mcheck(args: &[String], json: bool, limit: Duration) -> Run {
    mcheck_with_env(args, &[], json, limit)
}

/// [`mcheck`] with extra environment variables for mcheck itself.
pub fn mcheck_with_env(args: &[String], env: &[(&str, &str)], json: bool, limit: Duration) -> Run {
    mcheck_to(args, env, json, limit, StdoutTo::Null, false)
}

/// [`mcheck`] with its stdout (the program's, passed through) written to `stdout`.
pub fn mcheck_with_stdout(args: &[String], json: bool, limit: Duration, stdout: &Path) -> Run {
    mcheck_to(args, &[], json, limit, StdoutTo::File(stdout), false)
}

/// [`mcheck`] with its stdout on a pipe, read into [`Run::stdout`].
pub fn mcheck_with_piped_stdout(args: &[String], json: bool, limit: Duration) -> Run {
    mcheck_to(args, &[], json, limit, StdoutTo::Pipe, false)
}

/// [`mcheck`] with its stdin on a pipe that stays open and empty while it runs: a program
/// reading it waits in the kernel for the outside (and spends no CPU) until mcheck ends it.
pub fn mcheck_with_stdin_held(args: &[String], json: bool, limit: Duration) -> Run {
    mcheck_to(args, &[], json, limit, StdoutTo::Null, true)
}

fn mcheck_to(
    args: &[String],
    env: &[(&str, &str)],
    json: bool,
    limit: Duration,
    stdout: StdoutTo<'_>,
    hold_stdin: bool,
) -> Run {
    let json_path = temp_path("report.json");
    let err_path = temp_path("stderr");
    let mut all: Vec<String> = Vec::new();
    if json {
        all.push("--json".into());
        all.push(json_path.display().to_string());
    }
    // Options go before the program (for a search) or anywhere (for replay).
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let (head, tail) = args.split_at(split);
    let mut ordered = Vec::new();
    if head.first().map(String::as_str) == Some("replay") {
        ordered.push("replay".to_string());
        ordered.extend(all.iter().cloned());
        ordered.extend(head[1..].iter().cloned());
    } else {
        ordered.extend(all.iter().cloned());
        if !head.iter().any(|a| a == "--progress") {
            // Test logs stay free of progress lines.
            ordered.extend(["--progress".to_string(), "never".to_string()]);
        }
        ordered.extend(head.iter().cloned());
    }
    ordered.extend(tail.iter().cloned());
    let command = format!("mcheck {}", ordered.join(" "));
    let err = File::create(&err_path).expect("temp file");
    // A fresh working directory: programs that write files (and mcheck's default `--out`)
    // write them there, never into the source tree nor into another run's files.
    let work = temp_path("cwd");
    fs::create_dir_all(&work).expect("working directory");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcheck"));
    // The environment's RUST_BACKTRACE=1 makes a panicking Rust fixture symbolise its
    // own backtrace (a hundred thousand allocations, each a stop): seconds per
    // execution that test nothing of mcheck.
    child.env_remove("RUST_BACKTRACE");
    let mut child = child
        .current_dir(&work)
        .args(&ordered)
        .envs(env.iter().copied())
        .stdin(if hold_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(match stdout {
            StdoutTo::File(path) => Stdio::from(File::create(path).expect("stdout file")),
            StdoutTo::Null => Stdio::null(),
            StdoutTo::Pipe => Stdio::piped(),
        })
        .stderr(err)
        .spawn()
        .expect("spawn mcheck");
    // Closed once mcheck has ended.
    let held_stdin = child.stdin.take();
    let reader = child.stdout.take().map(|mut out| {
        thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
            text
        })
    });
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    drop(held_stdin);
    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    let stdout = reader
        .map(|r| r.join().unwrap_or_default())
        .unwrap_or_default();
    assert!(
        !stderr.contains("mcheck: internal error"),
        "{command}: mcheck reported an internal error:\n{stderr}"
    );
    let json = fs::read_to_string(&json_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let _ = fs::remove_file(&json_path);
    let _ = fs::remove_file(&err_path);
    let _ = fs::remove_dir_all(&work);
    Run {
        code,
        stderr,
        json,
        command,
        stdout,
    }
}

/// Converts string slices to owned arguments.
pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// One run of expected.json: a fixture with its arguments, options and verdict.
pub struct FixtureRun {
    /// Its name in expected.json.
    pub name: String,
    /// The binary.
    pub binary: PathBuf,
    /// The expected finding kind, or `none`.
    pub verdict: String,
    /// Program arguments.
    pub args: Vec<String>,
    /// Extra mcheck options.
    pub options: Vec<String>,
}

/// A run whose expected verdict is a finding.
pub type BuggyFixture = FixtureRun;

/// The buggy fixtures of expected.json.
pub fn buggy_fixtures() -> Vec<BuggyFixture> {
    fixture_runs()
        .into_iter()
        .filter(|f| f.verdict != "none")
        .collect()
}

/// Every run of expected.json.
pub fn fixture_runs() -> Vec<FixtureRun> {
    let text = fs::read_to_string(fixtures().join("expected.json")).expect("expected.json");
    let v: Value = serde_json::from_str(&text).expect("valid JSON");
    let list = |e: &Value, f: &str| -> Vec<String> {
        e.get(f)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    v.as_array()
        .expect("array")
        .iter()
        .map(|e| FixtureRun {
            name: e["name"].as_str().unwrap().to_string(),
            binary: fixtures().join(e["binary"].as_str().unwrap()),
            verdict: e["verdict"].as_str().unwrap().to_string(),
            args: list(e, "args"),
            options: list(e, "options"),
        })
        .collect()
}

/// The JSON report of `mcheck --quiet-program --max-executions 100000 OPTIONS -- PROGRAM`,
/// which must end with exit status 0 within four minutes.
pub fn clean_search(options: &[&str], program: &[&str]) -> Value {
    let mut a = args(&["--quiet-program", "--max-executions", "100000"]);
    a.extend(args(options));
    a.push("--".into());
    a.push(fixture(program[0]).display().to_string());
    a.extend(args(&program[1..]));
    let r = mcheck(&a, true, Duration::from_secs(240));
    assert_eq!(r.code, Some(0), "{}: {}", r.command, r.stderr);
    r.json.expect("JSON report")
}
