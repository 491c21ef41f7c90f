//! The user's limits hold: `--time-limit` to the second even inside a long execution,
//! `--max-memory` stops the search with a full report, and the progress display follows
//! `--progress`.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{args, fixture, mcheck, mcheck_with_stdin_held, temp_path};

const LIMIT: Duration = Duration::from_secs(120);

/// `mcheck OPTIONS -- FIXTURE` with a JSON report and schedules in a temporary directory.
fn search(options: &[&str], name: &str) -> (common::Run, Duration) {
    search_program(options, &fixture(name), false)
}

/// A program that waits in the kernel for the outside, spending no CPU, as long as its
/// stdin stays open and empty ([`search_waiting`]): a program nobody here wrote.
const CAT: &str = "/bin/cat";

/// `mcheck OPTIONS -- cat`, cat's stdin an empty pipe held open until mcheck ends: its
/// one execution waits for the outside until a limit ends it.
fn search_waiting(options: &[&str]) -> (common::Run, Duration) {
    search_program(options, std::path::Path::new(CAT), true)
}

fn search_program(
    options: &[&str],
    program: &std::path::Path,
    hold_stdin: bool,
) -> (common::Run, Duration) {
    let out = temp_path("out");
    let mut a = args(&["--quiet-program", "--out", out.to_str().unwrap()]);
    a.extend(args(options));
    a.push("--".into());
    a.push(program.display().to_string());
    let start = Instant::now();
    let run = if hold_stdin {
        mcheck_with_stdin_held(&a, true, LIMIT)
    } else {
        mcheck(&a, true, LIMIT)
    };
    let took = start.elapsed();
    let _ = std::fs::remove_dir_all(&out);
    (run, took)
}

#[test]
fn the_time_limit_holds_inside_an_execution() {
    let options = [
        "--jobs",
        "1",
        "--execution-timeout",
        "60",
        "--time-limit",
        "2",
    ];
    // A thread spins for a minute without a scheduling point: the limit runs out during
    // the first execution, which is cut short instead of waiting for the timeout. The
    // same for a program waiting in the kernel for the outside (cat reading an open, empty
    // pipe): the limit used to wait for the execution timeout there.
    for (what, (run, took)) in [
        ("a spinning thread", search(&options, "plain_spin_timeout")),
        ("cat waiting for its input", search_waiting(&options)),
    ] {
        assert!(
            took < Duration::from_secs(8),
            "{what}: took {took:?}: {}",
            run.stderr
        );
        assert_eq!(run.code, Some(0), "{what}: {}", run.stderr);
        let j = run.json.expect("report");
        assert_eq!(j["stopped_because"], "time limit reached", "{what}: {j}");
        assert_eq!(j["cut_short"], 1, "{what}: {j}");
        assert!(j["findings"].as_array().unwrap().is_empty(), "{what}: {j}");
        assert!(run.stderr.contains("cut short"), "{what}: {}", run.stderr);
    }
}

#[test]
fn the_memory_limit_stops_the_search_with_a_report() {
    let (run, _) = search(
        &["--max-memory", "16M", "--max-executions", "100000"],
        "hundred_threads_ok",
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let j = run.json.expect("report");
    assert_eq!(j["stopped_because"], "memory limit reached", "{j}");
    assert!(j["memory_peak_bytes"].as_u64().unwrap() >= 16 << 20, "{j}");
    assert!(
        run.stderr.contains("reached --max-memory 16 MiB"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_generous_memory_limit_changes_nothing() {
    let (run, _) = search(
        &["--max-memory", "4G", "--max-executions", "30"],
        "hundred_threads_ok",
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let j = run.json.expect("report");
    assert_eq!(j["stopped_because"], "execution budget spent", "{j}");
    assert_eq!(j["executions"], 30);
    assert!(j["memory_peak_bytes"].as_u64().unwrap() > 1 << 20, "{j}");
}

#[test]
fn progress_lines_off_a_terminal_follow_the_option() {
    // Six seconds of a program waiting for its input, not of a spinning one: the three runs
    // at once, costing the suite no CPU.
    let wait = |progress: &str| {
        search_waiting(&[
            "--jobs",
            "1",
            "--execution-timeout",
            "60",
            "--time-limit",
            "6",
            "--progress",
            progress,
        ])
        .0
    };
    let [auto, always, never] = std::thread::scope(|s| {
        ["auto", "always", "never"]
            .map(|mode| s.spawn(move || wait(mode)))
            .map(|h| h.join().expect("a run"))
    });
    // stderr is a file here, so `auto` prints plain lines, every 5 seconds.
    for (mode, run) in [("auto", auto), ("always", always)] {
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with("mcheck: progress: "))
            .unwrap_or_else(|| panic!("--progress {mode}: no progress line: {}", run.stderr));
        assert!(
            line.starts_with("mcheck: progress: 0/1000 execution(s), 0 finding(s), ")
                && line.contains(" s of 6 s, "),
            "--progress {mode}: {line}"
        );
    }
    assert!(!never.stderr.contains("progress"), "{}", never.stderr);
}
