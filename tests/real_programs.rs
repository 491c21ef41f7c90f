//! Real programs whose threads wait in the kernel or hand work over through timed waits:
//! pbzip2 and lbzip2 (a signal-waiting thread, a sigsuspend-ing main thread) must run to the
//! end under mcheck and write the same output as natively, and CPython's GIL, which hands
//! over through 5 ms timed condition waits, must let mcheck find a lost update.
//!
//! The programs come from Debian packages (`make deps` installs them); a test whose program
//! is missing says so and passes.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{args, mcheck, temp_path};

fn installed(program: &str) -> bool {
    let there = Path::new(program).exists();
    if !there {
        eprintln!("{program} is not installed: skipped (make deps installs it)");
    }
    there
}

/// A directory of its own with `size` bytes of text that compresses into several blocks.
fn input_file(size: usize) -> (PathBuf, PathBuf, Vec<u8>) {
    let dir = temp_path("input");
    fs::create_dir_all(&dir).expect("temp dir");
    let mut data = Vec::with_capacity(size);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while data.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(format!("{x:016x} line {}\n", data.len()).as_bytes());
    }
    let file = dir.join("input.txt");
    fs::write(&file, &data).expect("input file");
    (dir, file, data)
}

/// Runs `mcheck OPTIONS --max-executions 5 -- PROGRAM ARGS FILE` and checks that no
/// finding is reported, that executions ran from fork snapshots, that mcheck stayed under
/// 1 GiB and that FILE.bz2 decompresses to FILE's contents.
fn compresses_like_natively(options: &[&str], program: &str, program_args: &[&str]) {
    if !installed(program) {
        return;
    }
    let (dir, file, data) = input_file(2_500_000);
    let mut a = args(options);
    a.extend(args(&[
        "--max-executions",
        "5",
        "--quiet-program",
        "--execution-timeout",
        "120",
        "--out",
    ]));
    a.push(dir.join("mcheck-out").display().to_string());
    a.extend(args(&["--", program]));
    a.extend(args(program_args));
    a.push(file.display().to_string());
    let run = mcheck(&a, true, Duration::from_secs(600));
    let report = run.json.as_ref().expect("a JSON report");
    assert_eq!(
        run.code,
        Some(0),
        "{}: expected no finding\n{}",
        run.command,
        run.stderr
    );
    assert_eq!(report["findings"].as_array().map(Vec::len), Some(0));
    // The executions after the first must have run as fork copies (lbzip2 kills the pid it
    // saved before its threads: a copy runs under another one), not from exec.
    assert!(
        report["snapshots"]["executions_from_snapshot"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{}: no execution started from a fork snapshot: {}",
        run.command,
        report["snapshots"]
    );
    let peak = report["memory_peak_bytes"].as_u64().unwrap_or(u64::MAX);
    assert!(
        peak < 1 << 30,
        "{}: mcheck peaked at {peak} bytes",
        run.command
    );
    let out = Command::new("bzip2")
        .args(["-dc"])
        .arg(file.with_extension("txt.bz2"))
        .output()
        .expect("bzip2 -dc");
    assert!(
        out.status.success(),
        "the compressed file does not decompress"
    );
    assert!(
        out.stdout == data,
        "decompressed output differs from the input"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn pbzip2_runs_to_the_end_with_its_signal_thread_blocked() {
    // The default command: race detection on, every CPU a worker (the first execution
    // writes the output file, so the others retire: fs_gate).
    compresses_like_natively(&[], "/usr/bin/pbzip2", &["-p4", "-k", "-f"]);
}

#[test]
fn lbzip2_runs_to_the_end_with_its_main_thread_in_sigsuspend() {
    // Race detection off: lbzip2's executions take about 10 s each with it.
    compresses_like_natively(
        &["--no-races", "--jobs", "1"],
        "/usr/bin/lbzip2",
        &["-n", "4", "-k", "-f"],
    );
}

const LOST_UPDATE: &str = r#"import sys
import threading

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50
counter = 0
calls = 0
calls_lock = threading.Lock()
start = threading.Barrier(4)

def f(x):
    global calls
    with calls_lock:
        calls += 1
    return x + 1

def work():
    global counter
    start.wait()
    for _ in range(N):
        counter = f(counter)

threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert counter == 4 * N, f"lost updates: counter is {counter}, expected {4 * N}"
"#;

/// Four Python threads do `counter = f(counter)`: natively (with enough iterations) the GIL
/// changes hands inside `f` when a waiting thread's 5 ms timed wait runs out, and updates
/// are lost. Only timeouts taken while the GIL holder can still run show it: the default
/// strategy must find the AssertionError, which exits python with status 1
/// (`exit_status`). The default command, race detection on: the races CPython's relaxed
/// atomics (`_Py_atomic_*_relaxed`, plain MOVs in a python3 without debug information) seem
/// to have are counted, not reported, so the lost update is the only finding.
#[test]
fn a_python_lost_update_behind_the_gil_is_found() {
    let python = "/usr/bin/python3";
    if !installed(python) {
        return;
    }
    let dir = temp_path("python");
    fs::create_dir_all(&dir).expect("temp dir");
    let script = dir.join("lost_update.py");
    fs::write(&script, LOST_UPDATE).expect("script");
    let mut a = args(&[
        "--quiet-program",
        "--seed",
        "1",
        // The wall-clock watchdog must not take a loaded machine for a spinning thread.
        "--execution-timeout",
        "120",
        "--time-limit",
        "100",
        "--out",
    ]);
    a.push(dir.join("mcheck-out").display().to_string());
    a.extend(args(&["--", python]));
    a.push(script.display().to_string());
    // Found in about twenty executions (two seconds) on an idle machine.
    let run = mcheck(&a, true, Duration::from_secs(180));
    let report = run.json.as_ref().expect("a JSON report");
    assert_eq!(
        run.code,
        Some(1),
        "{}: expected a finding\n{}",
        run.command,
        run.stderr
    );
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "exit_status", "{}", run.stderr);
    assert!(
        finding["message"]
            .as_str()
            .is_some_and(|m| m.contains("status 1")),
        "{finding}"
    );
    let _ = fs::remove_dir_all(&dir);
}
