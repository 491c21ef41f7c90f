//! Files stay right: a program's output file after a search is byte-identical to the one a
//! native run leaves, however many executions ran from fork copies that share the
//! program's open file descriptions (`sort -o` moves its output file onto stdout with dup2
//! before its threads start), and every execution reads all of a stdin given as a file.
//! Through a pipe, the program's output is its first execution's, once.

use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{fixture, temp_path};

const LIMIT: Duration = Duration::from_secs(120);

/// Bytes of input given on stdin.
const INPUT: &[u8] = b"some input that every execution must read whole\n";

/// Runs `program ARGS` with stdin from `input`: natively when `mcheck` is empty, else under
/// `mcheck MCHECK -- program ARGS`. Returns the exit status and stderr.
fn run(mcheck: &[&str], program: &Path, args: &[&str], input: &Path) -> (Option<i32>, String) {
    run_to(mcheck, program, args, input, Stdio::null())
}

/// [`run`] with stdout to `stdout`.
fn run_to(
    mcheck: &[&str],
    program: &Path,
    args: &[&str],
    input: &Path,
    stdout: Stdio,
) -> (Option<i32>, String) {
    let err = temp_path("stderr");
    let mut cmd = if mcheck.is_empty() {
        Command::new(program)
    } else {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mcheck"));
        c.args(mcheck).arg("--").arg(program);
        c
    };
    let mut child = cmd
        .args(args)
        .stdin(File::open(input).expect("input"))
        .stdout(stdout)
        .stderr(File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = fs::read_to_string(&err).unwrap_or_default();
    let _ = fs::remove_file(&err);
    (code, stderr)
}

/// The output file of `snapshot_output_file_ok MODE`, natively and under mcheck with
/// `options` (starting from `initial` contents each time).
fn outputs(mode: &str, options: &[&str], initial: &[u8]) -> (Vec<u8>, Vec<u8>, String) {
    let program = fixture("snapshot_output_file_ok");
    let input = temp_path("input");
    fs::write(&input, INPUT).unwrap();
    let out = temp_path("out.txt");
    let schedules = temp_path("schedules");
    let out_arg = out.display().to_string();
    fs::write(&out, initial).unwrap();
    let (code, stderr) = run(&[], &program, &[&out_arg, mode], &input);
    assert_eq!(code, Some(0), "native run: {stderr}");
    let native = fs::read(&out).unwrap();
    fs::write(&out, initial).unwrap();
    let mut m: Vec<&str> = vec!["--out", schedules.to_str().unwrap()];
    m.extend(options);
    let (code, stderr) = run(&m, &program, &[&out_arg, mode], &input);
    let checked = fs::read(&out).unwrap();
    let _ = fs::remove_file(&out);
    let _ = fs::remove_file(&input);
    let _ = fs::remove_dir_all(&schedules);
    assert_eq!(code, Some(0), "mcheck {options:?} on mode {mode}: {stderr}");
    (native, checked, stderr)
}

fn assert_same(mode: &str, options: &[&str], initial: &[u8]) {
    let (native, checked, stderr) = outputs(mode, options, initial);
    assert!(
        String::from_utf8_lossy(&native).contains(&format!("{} byte(s) of input", INPUT.len())),
        "the native run read its input"
    );
    assert!(
        native == checked,
        "mode {mode}, mcheck {options:?}: the output file has {} byte(s) instead of the native run's {}\n{stderr}",
        checked.len(),
        native.len()
    );
}

#[test]
fn an_output_file_moved_onto_stdout_ends_as_a_native_run_leaves_it() {
    // The default command (one worker per CPU, the portfolio), as a user runs it.
    for mode in ["keep", "trunc"] {
        assert_same(mode, &["--max-executions", "12"], b"");
    }
    // An existing longer file that the program rewrites in place without truncating it.
    assert_same("keep", &["--max-executions", "12"], &[b'x'; 20_000]);
}

#[test]
fn branch_snapshot_copies_put_files_back_too() {
    for mode in ["keep", "trunc", "append"] {
        assert_same(
            mode,
            &["--jobs", "1", "--strategy", "dfs", "--max-executions", "12"],
            b"earlier contents\n",
        );
    }
}

/// `snapshot_output_file_ok - MODE` with stdout redirected to a file holding `initial`
/// (appended to when `append`, as `>>` does, else written from its start as `>` does after
/// truncating), natively and under `mcheck OPTIONS`; after each run the test writes one more
/// line through its own description of the file, as a shell's next command would. Returns
/// the two files and mcheck's stderr.
fn stdout_file_after(
    mode: &str,
    append: bool,
    options: &[&str],
    initial: &[u8],
) -> (Vec<u8>, Vec<u8>, String) {
    use std::io::Write;
    let program = fixture("snapshot_output_file_ok");
    let input = temp_path("input");
    fs::write(&input, INPUT).unwrap();
    let out = temp_path("stdout.txt");
    let schedules = temp_path("schedules");
    let once = |mcheck: &[&str]| {
        fs::write(&out, initial).unwrap();
        let mut file = fs::OpenOptions::new()
            .append(append)
            .write(true)
            .open(&out)
            .unwrap();
        let (code, stderr) = run_to(
            mcheck,
            &program,
            &["-", mode],
            &input,
            Stdio::from(file.try_clone().unwrap()),
        );
        assert_eq!(code, Some(0), "{mcheck:?} on mode {mode}: {stderr}");
        file.write_all(b"the shell's next line\n").unwrap();
        (fs::read(&out).unwrap(), stderr)
    };
    let (native, _) = once(&[]);
    let mut m: Vec<&str> = vec!["--out", schedules.to_str().unwrap()];
    m.extend(options);
    let (checked, stderr) = once(&m);
    let _ = fs::remove_file(&out);
    let _ = fs::remove_file(&input);
    let _ = fs::remove_dir_all(&schedules);
    (native, checked, stderr)
}

#[test]
fn stdout_redirected_to_a_file_holds_one_run_of_output_not_one_per_execution() {
    let cases: &[(&str, bool, &[&str])] = &[
        // The default command, two workers.
        ("trunc", false, &["--max-executions", "12"]),
        ("trunc", true, &["--max-executions", "12"]),
        ("keep", false, &["--max-executions", "12"]),
        // Branch snapshots.
        (
            "trunc",
            false,
            &["--jobs", "1", "--strategy", "dfs", "--max-executions", "12"],
        ),
    ];
    for &(mode, append, options) in cases {
        let (native, checked, stderr) =
            stdout_file_after(mode, append, options, b"earlier contents\n");
        assert!(
            String::from_utf8_lossy(&native).contains("byte(s) of input"),
            "the native run wrote its report"
        );
        assert!(
            native == checked,
            "mode {mode}, append {append}, mcheck {options:?}: the file has {} byte(s) instead of the native run's {}\n{stderr}",
            checked.len(),
            native.len()
        );
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if !options.contains(&"--jobs") && cpus > 1 {
            assert!(
                stderr.contains("writes a file it was given open")
                    && stderr.contains("on one worker"),
                "the second worker stands down, and says why: {stderr}"
            );
        }
    }
}

/// `program - MODE` with stdout into a pipe, natively when `mcheck` is empty: what came
/// through the pipe, and stderr.
fn piped_stdout(mcheck: &[&str], program: &Path, mode: &str, input: &Path) -> (Vec<u8>, String) {
    use std::io::Read;
    let err = temp_path("stderr");
    let mut cmd = if mcheck.is_empty() {
        Command::new(program)
    } else {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mcheck"));
        c.args(mcheck).arg("--").arg(program);
        c
    };
    let mut child = cmd
        .args(["-", mode])
        .stdin(File::open(input).expect("input"))
        .stdout(Stdio::piped())
        .stderr(File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn");
    let mut pipe = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    });
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        assert!(start.elapsed() < LIMIT, "{mcheck:?} took too long");
        std::thread::sleep(Duration::from_millis(10));
    }
    let bytes = reader.join().expect("reader");
    let stderr = fs::read_to_string(&err).unwrap_or_default();
    let _ = fs::remove_file(&err);
    (bytes, stderr)
}

#[test]
fn output_through_a_pipe_is_shown_once_not_once_per_execution() {
    let program = fixture("snapshot_output_file_ok");
    let input = temp_path("input");
    fs::write(&input, INPUT).unwrap();
    let (native, _) = piped_stdout(&[], &program, "trunc", &input);
    assert!(
        String::from_utf8_lossy(&native).contains("byte(s) of input"),
        "the native run wrote its report"
    );
    let schedules = temp_path("schedules");
    let out = schedules.to_str().unwrap();
    for options in [
        // The default command, two workers.
        &["--max-executions", "5"][..],
        // Branch snapshots, each execution a copy of one.
        &["--jobs", "1", "--strategy", "dfs", "--max-executions", "5"],
        // Without snapshots, every execution launched anew.
        &["--no-snapshots", "--max-executions", "5"],
    ] {
        let mut m = vec!["--out", out];
        m.extend(options);
        let (checked, stderr) = piped_stdout(&m, &program, "trunc", &input);
        assert!(
            checked == native,
            "mcheck {options:?}: {} byte(s) came through the pipe instead of the native run's {}\n{stderr}",
            checked.len(),
            native.len()
        );
        assert!(
            stderr.contains(
                "the program's output above is its first execution's, not repeated for the other 4"
            ),
            "mcheck {options:?} says which execution's output it showed: {stderr}"
        );
    }
    let _ = fs::remove_file(&input);
    let _ = fs::remove_dir_all(&schedules);
}

#[test]
fn every_copy_finds_the_file_as_its_template_left_it() {
    // With one worker nothing else writes the file, so the program can check that the file
    // holds exactly what it wrote in this execution (it aborts otherwise).
    for strategy in ["portfolio", "dfs"] {
        for mode in ["keep", "trunc", "append"] {
            let program = fixture("snapshot_output_file_ok");
            let out = temp_path("out.txt");
            let input = temp_path("input");
            let schedules = temp_path("schedules");
            fs::write(&input, INPUT).unwrap();
            let json = temp_path("report.json");
            let (code, stderr) = run(
                &[
                    "--jobs",
                    "1",
                    "--strategy",
                    strategy,
                    "--max-executions",
                    "10",
                    "--json",
                    json.to_str().unwrap(),
                    "--out",
                    schedules.to_str().unwrap(),
                ],
                &program,
                &[out.to_str().unwrap(), mode, "check"],
                &input,
            );
            let report: serde_json::Value =
                serde_json::from_str(&fs::read_to_string(&json).unwrap_or_default())
                    .unwrap_or_default();
            for p in [&out, &input, &json] {
                let _ = fs::remove_file(p);
            }
            let _ = fs::remove_dir_all(&schedules);
            assert_eq!(code, Some(0), "{strategy} {mode}: {stderr}");
            let copies = report["snapshots"]["executions_from_snapshot"]
                .as_u64()
                .unwrap_or(0);
            assert!(copies >= 5, "{strategy} {mode}: {copies} copies: {report}");
            assert!(report["snapshots"]["off_because"].is_null(), "{report}");
        }
    }
}

/// `program OUT` natively, then under `mcheck OPTIONS -- program OUT` with OUT holding
/// `initial` before each: the file after the native run, after mcheck, and mcheck's exit
/// status and stderr.
fn file_after(
    program: &str,
    options: &[&str],
    initial: Option<&[u8]>,
) -> (Vec<u8>, Option<Vec<u8>>, Option<i32>, String) {
    let program = fixture(program);
    let input = temp_path("input");
    fs::write(&input, INPUT).unwrap();
    let dir = temp_path("work");
    fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let out_arg = out.display().to_string();
    let reset = || match initial {
        Some(bytes) => fs::write(&out, bytes).unwrap(),
        None => {
            let _ = fs::remove_file(&out);
        }
    };
    reset();
    let (code, stderr) = run(&[], &program, &[&out_arg], &input);
    assert_eq!(code, Some(0), "native run: {stderr}");
    let native = fs::read(&out).unwrap();
    reset();
    let schedules = dir.join("schedules");
    let mut m: Vec<&str> = vec!["--quiet-program", "--out", schedules.to_str().unwrap()];
    m.extend(options);
    let (code, stderr) = run(&m, &program, &[&out_arg], &input);
    let checked = fs::read(&out).ok();
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_file(&input);
    (native, checked, code, stderr)
}

#[test]
fn a_program_that_will_not_overwrite_its_output_finds_it_gone_in_every_execution() {
    // O_EXCL after the threads: each execution, from exec or from a fork copy, creates the
    // output anew, which only works when the previous execution's output was taken away.
    for options in [
        &["--jobs", "1"][..],
        &["--jobs", "1", "--no-snapshots"],
        &[],
    ] {
        let mut m = vec!["--max-executions", "20"];
        m.extend(options);
        let (native, checked, code, stderr) = file_after("files_exclusive_output_ok", &m, None);
        assert_eq!(code, Some(0), "mcheck {m:?}: {stderr}");
        assert_eq!(
            checked.as_deref(),
            Some(native.as_slice()),
            "mcheck {m:?}: {stderr}"
        );
    }
}

#[test]
fn an_execution_killed_at_a_deadlock_does_not_leave_its_half_written_output() {
    // icb runs the schedule without preemption first: it runs to the end and writes the
    // whole file; the deadlock comes later, in an execution that is killed after "begin".
    // The file must end as the complete run left it.
    let (native, checked, code, stderr) = file_after(
        "files_deadlock_output",
        &["--jobs", "1", "--strategy", "icb"],
        None,
    );
    assert_eq!(code, Some(1), "the deadlock is found: {stderr}");
    assert_eq!(native, b"begin\nend\n");
    assert_eq!(checked.as_deref(), Some(native.as_slice()), "{stderr}");
    // With the default command the very first execution may deadlock: then no execution
    // ran to its end, and the file is as it was before mcheck ran (here: the user's own
    // earlier contents), never the killed execution's "begin".
    let earlier = b"the user's earlier file\n";
    let (native, checked, code, stderr) = file_after("files_deadlock_output", &[], Some(earlier));
    assert_eq!(code, Some(1), "the deadlock is found: {stderr}");
    let checked = checked.expect("the file is still there");
    assert!(
        checked == native || checked == earlier,
        "the output file holds {:?}\n{stderr}",
        String::from_utf8_lossy(&checked)
    );
}
