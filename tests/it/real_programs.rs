//! Real programs from Debian under the default command, each with a budget that fits CI:
//! compressors (pbzip2 with a signal-waiting thread, lbzip2 with a sigsuspend-ing main
//! thread, pigz, xz, zstd), ripgrep and a python3 script with a lock must report nothing,
//! stay under 1 GiB and give the native output byte for byte; GNU sort must report only the
//! real races of its merge tree and leave its output as natively; CPython's GIL, which
//! hands over through 5 ms timed condition waits, must let mcheck find a lost update.
//!
//! The programs come from Debian packages (`make deps` installs them); a test whose program
//! is missing says so and passes.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{args, mcheck, mcheck_with_stdout, temp_path};

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

/// What one real-program run must show besides "no finding, same output, under 1 GiB".
struct Expect {
    /// Executions to run (the budget that fits CI).
    executions: u32,
    /// Executions after the first must start from fork snapshots.
    from_snapshots: bool,
}

/// Checks that `run` reported no finding, ran `executions` executions and stayed under
/// 1 GiB; returns its JSON report.
fn clean_run(run: &common::Run, executions: u32) -> &serde_json::Value {
    let report = run.json.as_ref().expect("a JSON report");
    assert_eq!(
        run.code,
        Some(0),
        "{}: expected no finding\n{}",
        run.command,
        run.stderr
    );
    assert_eq!(report["findings"].as_array().map(Vec::len), Some(0));
    assert_eq!(report["executions"], executions, "{}", run.stderr);
    let peak = report["memory_peak_bytes"].as_u64().unwrap_or(u64::MAX);
    assert!(
        peak < 1 << 30,
        "{}: mcheck peaked at {peak} bytes",
        run.command
    );
    report
}

/// Runs `PROGRAM ARGS FILE` natively on a 2.5 MB input, then `mcheck OPTIONS
/// --max-executions N -- PROGRAM ARGS FILE`, and checks that mcheck reports no
/// finding, stayed under 1 GiB, and left an `output` file byte-identical to the native one
/// (every execution writes it again).
fn writes_like_natively(
    options: &[&str],
    program: &str,
    program_args: &[&str],
    output: &str,
    expect: Expect,
) {
    if !installed(program) {
        return;
    }
    let (dir, file, _) = input_file(2_500_000);
    // Natively first, on the same file (gzip headers hold its name and time), its output
    // then moved aside.
    let native = Command::new(program)
        .args(program_args)
        .arg(&file)
        .status()
        .expect("run natively");
    assert!(native.success(), "{program} failed natively");
    let native_output = dir.join("native-output");
    fs::rename(dir.join(output), &native_output).expect("native output");
    let mut a = args(options);
    a.extend(args(&[
        "--max-executions",
        &expect.executions.to_string(),
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
    let report = clean_run(&run, expect.executions);
    if expect.from_snapshots {
        assert!(
            report["snapshots"]["executions_from_snapshot"]
                .as_u64()
                .unwrap_or(0)
                > 0,
            "{}: no execution started from a fork snapshot: {}",
            run.command,
            report["snapshots"]
        );
    }
    let ours = fs::read(dir.join(output)).expect("mcheck's run left no output file");
    let theirs = fs::read(&native_output).expect("native output");
    assert!(
        ours == theirs,
        "{}: {output} differs from the native run's ({} bytes against {})",
        run.command,
        ours.len(),
        theirs.len()
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn pbzip2_runs_to_the_end_with_its_signal_thread_blocked() {
    // The default command: race detection on, every CPU a worker (the first execution
    // writes the output file, so the others retire: fs_gate).
    let expect = Expect {
        executions: 5,
        from_snapshots: true,
    };
    writes_like_natively(
        &[],
        "/usr/bin/pbzip2",
        &["-p4", "-k", "-f"],
        "input.txt.bz2",
        expect,
    );
}

#[test]
fn lbzip2_runs_to_the_end_with_its_main_thread_in_sigsuspend() {
    // Race detection off: lbzip2's executions take about 10 s each with it. lbzip2 kills
    // the pid it saved before its threads: a fork copy runs under another one.
    let expect = Expect {
        executions: 5,
        from_snapshots: true,
    };
    writes_like_natively(
        &["--no-races", "--jobs", "1"],
        "/usr/bin/lbzip2",
        &["-n", "4", "-k", "-f"],
        "input.txt.bz2",
        expect,
    );
}

#[test]
fn pigz_compresses_like_natively() {
    let expect = Expect {
        executions: 5,
        from_snapshots: false,
    };
    writes_like_natively(
        &[],
        "/usr/bin/pigz",
        &["-p4", "-k", "-f"],
        "input.txt.gz",
        expect,
    );
}

#[test]
fn xz_compresses_like_natively() {
    // Small blocks, so that its four threads each get several.
    let expect = Expect {
        executions: 5,
        from_snapshots: false,
    };
    writes_like_natively(
        &[],
        "/usr/bin/xz",
        &["-T4", "-0", "--block-size=200000", "-k", "-f"],
        "input.txt.xz",
        expect,
    );
}

#[test]
fn zstd_compresses_like_natively() {
    // 512 KiB jobs (zstd's smallest) over two workers. About 3 s per execution with race
    // detection: zstd's match tables are megabytes of memory written over and over.
    let expect = Expect {
        executions: 2,
        from_snapshots: false,
    };
    writes_like_natively(
        &[],
        "/usr/bin/zstd",
        &["-T2", "-B512K", "-q", "-k", "-f"],
        "input.txt.zst",
        expect,
    );
}

/// `rg -j4 -c -i license DIRS`, three executions: the output of each is the native one, in
/// some order of files (rg's threads print as they finish).
#[test]
fn ripgrep_searches_like_natively() {
    let rg = "/usr/bin/rg";
    if !installed(rg) {
        return;
    }
    let search = [
        "-j4",
        "-c",
        "-i",
        "license",
        "/usr/share/doc/libc6",
        "/usr/share/doc/coreutils",
    ];
    let native = Command::new(rg).args(search).output().expect("rg natively");
    assert!(native.status.success(), "rg failed natively");
    let dir = temp_path("rg");
    fs::create_dir_all(&dir).expect("temp dir");
    let stdout = dir.join("stdout");
    // One worker: then its third execution is the one where, with allocations made through
    // the GOT unseen, memory freed by one thread and reused by another looked like a race.
    let mut a = args(&[
        "--jobs",
        "1",
        "--max-executions",
        "3",
        "--execution-timeout",
        "120",
        "--out",
    ]);
    a.push(dir.join("mcheck-out").display().to_string());
    a.extend(args(&["--", rg]));
    a.extend(args(&search));
    let run = mcheck_with_stdout(&a, true, Duration::from_secs(300), &stdout);
    clean_run(&run, 3);
    let lines = |text: &str| {
        let mut v: Vec<String> = text.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    // stdout is a file: it holds one run's output, as natively, not one per execution (the
    // order of ripgrep's lines depends on its threads).
    let expected = lines(&String::from_utf8_lossy(&native.stdout));
    let got = lines(&fs::read_to_string(&stdout).expect("stdout"));
    assert!(
        !expected.is_empty() && got == expected,
        "{}: three executions left in the stdout file\n{got:?}\nnatively:\n{expected:?}",
        run.command
    );
    let _ = fs::remove_dir_all(&dir);
}

const LOST_UPDATE: &str = include_str!("../data/lost_update.py");

/// The default command with `--seed 1` and `--time-limit secs` on a Python script (`text`)
/// written to a fresh directory as `name`, with Debian's python3: the directory and the
/// run, or None when python3 is not installed.
fn search_python_script(name: &str, text: &str, secs: u32) -> Option<(PathBuf, common::Run)> {
    let python = "/usr/bin/python3";
    if !installed(python) {
        return None;
    }
    let dir = temp_path(name);
    fs::create_dir_all(&dir).expect("temp dir");
    let script = dir.join(name);
    fs::write(&script, text).expect("script");
    let mut a = args(&[
        "--quiet-program",
        "--seed",
        "1",
        // The wall-clock watchdog must not take a loaded machine for a spinning thread.
        "--execution-timeout",
        "120",
        "--time-limit",
        &secs.to_string(),
        "--out",
    ]);
    a.push(dir.join("mcheck-out").display().to_string());
    a.extend(args(&["--", python]));
    a.push(script.display().to_string());
    let run = mcheck(&a, true, Duration::from_secs(u64::from(secs) + 90));
    Some((dir, run))
}

/// Replays `schedule`, which must end python with status 1 again (`exit_status`).
fn replays_to_exit_status(schedule: &str) {
    let again = mcheck(
        &args(&["replay", "--quiet-program", schedule]),
        true,
        Duration::from_secs(120),
    );
    assert_eq!(again.code, Some(1), "{}\n{}", again.command, again.stderr);
    let replayed = &again.json.as_ref().expect("a replay report")["findings"][0];
    assert_eq!(replayed["kind"], "exit_status", "{}", again.stderr);
}

/// Four Python threads do `counter = f(counter)`: natively (with enough iterations) the GIL
/// changes hands inside `f` when a waiting thread's 5 ms timed wait runs out, and updates
/// are lost. Only timeouts taken while the GIL holder can still run show it: the default
/// strategy must find the AssertionError, which exits python with status 1
/// (`exit_status`). The default command, race detection on: the races CPython's relaxed
/// atomics (`_Py_atomic_*_relaxed`, plain MOVs in a python3 without debug information) seem
/// to have are counted, not reported, so the lost update is the only finding.
#[test]
fn a_python_lost_update_behind_the_gil_is_found() {
    // Found in about twenty executions (two seconds) on an idle machine.
    let Some((dir, run)) = search_python_script("lost_update.py", LOST_UPDATE, 100) else {
        return;
    };
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
    // The report says why, in the program's words: the traceback's last line.
    assert!(
        (finding["details"].as_array()).is_some_and(|d| d.iter().any(|l| l
            .as_str()
            .is_some_and(|l| l.contains("AssertionError: lost updates")))),
        "{finding}"
    );
    // The schedule replays to the same failure. Python lists the script's directory, which
    // holds the schedules directory: it must have been there in the search too (it used to
    // appear only at the end, and the replay diverged around step 6,400).
    replays_to_exit_status(finding["schedule"].as_str().expect("a schedule file"));
    let _ = fs::remove_dir_all(&dir);
}

const LOST_UPDATE_LOCK_FREE: &str = include_str!("../data/lost_update_lock_free.py");

/// The lost update with no lock in the loop (issue 31): the holder of the GIL makes no
/// synchronisation call between its read and its write, so a waiter's timeout is noticed
/// there only through `eval_breaker`, which the holder reads on entering `f`. The search
/// learns those reads (plain MOVs in Debian's python3, which has no DWARF) as timeout
/// polls and lets the timeout fire right before one: the default command finds the
/// AssertionError, and its schedule replays to it.
#[test]
fn a_lock_free_python_lost_update_is_found_through_the_gils_timeout_polls() {
    // Found in about six executions (16 s) on an idle machine.
    let name = "lost_update_lock_free.py";
    let Some((dir, run)) = search_python_script(name, LOST_UPDATE_LOCK_FREE, 150) else {
        return;
    };
    let report = run.json.as_ref().expect("a JSON report");
    let finding = (report["findings"].as_array())
        .and_then(|f| f.iter().find(|f| f["kind"] == "exit_status"))
        .unwrap_or_else(|| panic!("{}: no exit_status finding\n{}", run.command, run.stderr));
    let schedule = finding["schedule"].as_str().expect("a schedule file");
    let file: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(schedule).expect("schedule")).expect("json");
    assert!(
        (file["options"]["timeout_poll_sites"].as_array()).is_some_and(|p| !p.is_empty()),
        "the execution that failed had timeout polls as points: {}",
        file["options"]
    );
    replays_to_exit_status(schedule);
    let _ = fs::remove_dir_all(&dir);
}

/// GNU sort merges with threads (136,000 lines: above its 128 Ki-line threshold, where
/// the cost of one execution grows with the lines), writing `-o FILE`. Its merge
/// tree has real data races (a node writes its parent's `end_lo`/`end_hi` under its own lock
/// while the parent reads them under the parent's; helgrind and DRD report them too), so
/// the default command reports data races in sort's own code and nothing else: no timeout,
/// no crash, no exit status. The output file must be byte-identical to the native one,
/// although the rerun that takes the races' stacks is cut short after it truncated it.
#[test]
fn sort_merges_like_natively_and_reports_only_its_merge_tree_races() {
    let sort = "/usr/bin/sort";
    if !installed(sort) {
        return;
    }
    let (dir, file, _) = input_file(4_050_000);
    let native_out = dir.join("native.txt");
    let native = Command::new(sort)
        .args(["--parallel=4", "-o"])
        .arg(&native_out)
        .arg(&file)
        .status()
        .expect("sort natively");
    assert!(native.success(), "sort failed natively");
    let out = dir.join("out.txt");
    // One execution (and the runs of its schedule that take the races' stacks): the
    // refinement round that would follow makes each of the racy reads in sort's merge loop,
    // ~185,000 of them, a scheduling point.
    let mut a = args(&[
        "--max-executions",
        "1",
        "--quiet-program",
        "--execution-timeout",
        "120",
        "--out",
    ]);
    a.push(dir.join("mcheck-out").display().to_string());
    a.extend(args(&["--", sort, "--parallel=4", "-o"]));
    a.push(out.display().to_string());
    a.push(file.display().to_string());
    let run = mcheck(&a, true, Duration::from_secs(600));
    let report = run.json.as_ref().expect("a JSON report");
    assert_eq!(run.code, Some(1), "{}: {}", run.command, run.stderr);
    let findings = report["findings"].as_array().expect("findings");
    assert!(!findings.is_empty());
    for f in findings {
        assert_eq!(f["kind"], "data_race", "{}: {f}", run.command);
        for t in f["threads"].as_array().expect("threads") {
            let top = &t["stack"][0];
            assert_eq!(top["module"], "sort", "a race outside sort's own code: {f}");
            // Both sides' stacks, from the run of the schedule that takes them: it must
            // know the atomics the race was found knowing, or no epoch matches and only
            // the pc is left.
            let frames = t["stack"].as_array().map_or(0, Vec::len);
            assert!(frames > 1, "a side of a race without its stack: {f}");
        }
    }
    let peak = report["memory_peak_bytes"].as_u64().unwrap_or(u64::MAX);
    assert!(
        peak < 1 << 30,
        "{}: mcheck peaked at {peak} bytes",
        run.command
    );
    let ours = fs::read(&out).expect("mcheck's run left no output file");
    let theirs = fs::read(&native_out).expect("native output");
    assert!(
        ours == theirs,
        "{}: the output differs from the native run's ({} bytes against {})",
        run.command,
        ours.len(),
        theirs.len()
    );
    let _ = fs::remove_dir_all(&dir);
}

const LOCKED_COUNTER: &str = r#"import threading
counter = 0
lock = threading.Lock()
def work():
    global counter
    for _ in range(500):
        with lock:
            counter += 1
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert counter == 2000, counter
"#;

/// Four Python threads add to a counter under a `threading.Lock`: the default command
/// reports nothing (CPython's interpreter, its GIL and its atomics are all in code without
/// debug information).
#[test]
fn python_threads_with_a_lock_report_nothing() {
    let python = "/usr/bin/python3";
    if !installed(python) {
        return;
    }
    let dir = temp_path("python-ok");
    fs::create_dir_all(&dir).expect("temp dir");
    let script = dir.join("locked.py");
    fs::write(&script, LOCKED_COUNTER).expect("script");
    let mut a = args(&[
        "--jobs",
        "1",
        "--max-executions",
        "3",
        "--quiet-program",
        "--execution-timeout",
        "120",
        "--out",
    ]);
    a.push(dir.join("mcheck-out").display().to_string());
    a.extend(args(&["--", python]));
    a.push(script.display().to_string());
    let run = mcheck(&a, true, Duration::from_secs(300));
    clean_run(&run, 3);
    let _ = fs::remove_dir_all(&dir);
}
