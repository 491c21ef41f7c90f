//! `mcheck test` and `cargo mcheck` on real test binaries: a Rust libtest binary and a
//! GoogleTest binary (tracee-fixtures/src/suites/), a plain program as one test, and a small
//! crate (tracee-fixtures/crates/cargo-demo) built offline by cargo. Each checks that
//! junit.xml (validated against the JUnit XSD, as the audit's is) has exactly the expected
//! failing test cases, that every failing case's replay command reproduces its finding, and
//! the exit status; plus selection (filters, --skip, --exact, --shard, ignored tests), shard
//! merging and bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::formats::{assert_valid_sarif, junit_testcases, JunitCase};
use crate::common::{fixture, fixtures, temp_path};

/// How a command ended.
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `program ARGS` in `cwd` with `env` added, killed after `limit`.
fn run_in(
    program: &Path,
    args: &[&str],
    cwd: &Path,
    env: &[(&str, &str)],
    limit: Duration,
) -> Ended {
    let out = temp_path("stdout");
    let err = temp_path("stderr");
    // The crates built here are a user's: not through the compiler wrapper (clippy) that
    // `make test` gives mcheck's own crates.
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).expect("temp file"))
        .stderr(fs::File::create(&err).expect("temp file"))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
    let start = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ended = Ended {
        code,
        stdout: fs::read_to_string(&out).unwrap_or_default(),
        stderr: fs::read_to_string(&err).unwrap_or_default(),
    };
    let _ = fs::remove_file(&out);
    let _ = fs::remove_file(&err);
    // mcheck's own panic starts a line; a test's is quoted, indented, in the summary.
    let panicked = ended
        .stderr
        .lines()
        .any(|l| l.starts_with("thread '") && l.contains("panicked"));
    assert!(
        !panicked && !ended.stderr.contains("internal error"),
        "{} {args:?}:\n{}",
        program.display(),
        ended.stderr
    );
    ended
}

/// The mcheck binary.
fn mcheck_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcheck"))
}

/// Runs `mcheck ARGS` in a fresh directory.
fn mcheck(args: &[&str], limit: Duration) -> Ended {
    let cwd = temp_dir("cwd");
    let ended = run_in(&mcheck_exe(), args, &cwd, &[], limit);
    let _ = fs::remove_dir_all(&cwd);
    ended
}

/// A fresh directory.
fn temp_dir(tag: &str) -> PathBuf {
    let d = temp_path(tag);
    fs::create_dir_all(&d).expect("temp dir");
    d
}

/// A path as a string argument.
fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The test.json of an output directory.
fn record(out: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(out.join("test.json")).expect("test.json"))
        .expect("test.json is JSON")
}

/// Test case (classname, name) → (outcome, failure type), from the validated junit.xml.
fn outcomes(out: &Path) -> BTreeMap<(String, String), (String, String)> {
    junit_testcases(&out.join("junit.xml"))
        .into_iter()
        .map(|c: JunitCase| ((c.classname, c.name), (c.outcome, c.kind)))
        .collect()
}

/// The expected outcomes, keyed like [`outcomes`].
fn expect(
    classname: &str,
    cases: &[(&str, &str, &str)],
) -> BTreeMap<(String, String), (String, String)> {
    cases
        .iter()
        .map(|(name, outcome, kind)| {
            (
                (classname.to_string(), name.to_string()),
                (outcome.to_string(), kind.to_string()),
            )
        })
        .collect()
}

/// Replays every finding of a test.json from another directory: each reproduces its kind.
/// Returns how many were replayed.
fn replay_every_finding(out: &Path) -> usize {
    let rec = record(out);
    let mut replayed = 0;
    for t in rec["targets"].as_array().unwrap() {
        let Some(findings) = t["report"]["findings"].as_array() else {
            continue;
        };
        for f in findings {
            let schedule = f["schedule"].as_str().expect("a schedule file");
            let json = temp_path("replay.json");
            let ended = mcheck(
                &["replay", "--quiet-program", "--json", s(&json), schedule],
                Duration::from_secs(120),
            );
            assert_eq!(
                ended.code,
                Some(1),
                "replay of {schedule}: {}",
                ended.stderr
            );
            let report: Value =
                serde_json::from_str(&fs::read_to_string(&json).expect("replay report")).unwrap();
            let kinds: Vec<&Value> = report["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| &g["kind"])
                .collect();
            assert!(
                kinds.contains(&&f["kind"]),
                "replay of {} ({}) gave {kinds:?}",
                t["name"],
                f["kind"]
            );
            let _ = fs::remove_file(&json);
            replayed += 1;
        }
    }
    replayed
}

/// The failure text of every failing case names its finding and the replay command.
fn failures_say_how_to_replay(out: &Path) {
    for c in junit_testcases(&out.join("junit.xml")) {
        if c.outcome == "failure" && c.kind != "fails_natively" {
            assert!(c.text.contains("mcheck replay "), "{c:?}");
            assert!(c.message.starts_with(&c.kind), "{c:?}");
        }
    }
}

#[test]
fn libtest_binary_each_test_is_its_own_search() {
    let out = temp_dir("libtest");
    let ended = mcheck(
        &[
            "test",
            "--out",
            s(&out),
            "--max-executions",
            "100",
            "--jobs",
            "2",
            "--",
            s(&fixture("rusttest_suite")),
        ],
        Duration::from_secs(600),
    );
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    assert_eq!(
        outcomes(&out),
        expect(
            "rusttest_suite",
            &[
                ("arith::wrong_sum", "failure", "fails_natively"),
                ("handoff::channel", "success", ""),
                ("handoff::mutex_condvar", "success", ""),
                ("locks::abba", "failure", "deadlock"),
                ("racy::lost_update", "failure", "data_race"),
                ("slow::ignored_race", "skipped", ""),
            ]
        ),
        "{}",
        ended.stderr
    );
    failures_say_how_to_replay(&out);
    let natively = junit_testcases(&out.join("junit.xml"))
        .into_iter()
        .find(|c| c.name == "arith::wrong_sum")
        .unwrap();
    assert!(
        natively.message.contains("fails without any interleaving"),
        "{natively:?}"
    );
    assert!(
        natively.text.contains("the expected sum is wrong"),
        "{natively:?}"
    );

    let rec = record(&out);
    assert_eq!(rec["kind"], "test");
    assert_eq!(rec["binaries"][0]["framework"], "libtest");
    assert_eq!(rec["binaries"][0]["listed"], 6);
    let status: BTreeMap<&str, &str> = rec["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    assert_eq!(status["arith::wrong_sum"], "fails_natively");
    assert_eq!(status["handoff::channel"], "clean");
    // The correct tests report nothing at all, inside libtest's own result channel
    // included.
    for t in rec["targets"].as_array().unwrap() {
        if t["name"].as_str().unwrap().starts_with("handoff::") {
            assert_eq!(t["report"]["findings"], Value::Array(vec![]), "{t}");
            assert!(t["native"]["passed"].as_bool().unwrap(), "{t}");
        }
    }
    let sarif = assert_valid_sarif(&out.join("results.sarif"));
    let results = sarif["runs"][0]["results"].as_array().unwrap().len();
    let summary = fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        summary.contains("Failing without any interleaving"),
        "{summary}"
    );
    assert!(ended.stderr.contains("[5/5]"), "{}", ended.stderr);
    assert_eq!(replay_every_finding(&out), results);
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn gtest_binary_disabled_tests_and_include_ignored() {
    let out = temp_dir("gtest");
    let gtest = fixture("gtest_suite");
    let ended = mcheck(
        &[
            "test",
            "--out",
            s(&out),
            "--max-executions",
            "60",
            "--",
            s(&gtest),
        ],
        Duration::from_secs(300),
    );
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    assert_eq!(
        outcomes(&out),
        expect(
            "gtest_suite",
            &[
                ("Counter.RacyIncrement", "failure", "data_race"),
                ("Counter.LockedIncrement", "success", ""),
                ("Counter.DISABLED_Slow", "skipped", ""),
                ("Queue.CondvarHandoff", "success", ""),
            ]
        ),
        "{}",
        ended.stderr
    );
    failures_say_how_to_replay(&out);
    assert_eq!(record(&out)["binaries"][0]["framework"], "gtest");
    assert!(replay_every_finding(&out) >= 1);

    // A disabled test runs when asked, and filters select it.
    let out2 = temp_dir("gtest-disabled");
    let ended = mcheck(
        &[
            "test",
            "--out",
            s(&out2),
            "--include-ignored",
            "--max-executions",
            "60",
            "--",
            s(&gtest),
            "DISABLED",
        ],
        Duration::from_secs(300),
    );
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    assert_eq!(
        outcomes(&out2),
        expect(
            "gtest_suite",
            &[("Counter.DISABLED_Slow", "failure", "data_race")]
        )
    );
    let _ = fs::remove_dir_all(&out);
    let _ = fs::remove_dir_all(&out2);
}

#[test]
fn a_plain_program_is_one_test() {
    let out = temp_dir("single");
    let ended = mcheck(
        &["test", "--out", s(&out), "--", s(&fixture("abba_O0"))],
        Duration::from_secs(300),
    );
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    assert_eq!(
        outcomes(&out),
        expect("abba_O0", &[("abba_O0", "failure", "deadlock")])
    );
    assert_eq!(record(&out)["binaries"][0]["framework"], "single");
    assert_eq!(replay_every_finding(&out), 1);

    // A correct program passes, exit 0.
    let out2 = temp_dir("single-ok");
    let ended = mcheck(
        &[
            "test",
            "--out",
            s(&out2),
            "--max-executions",
            "20",
            "--",
            s(&fixture("mutex_normal_ok")),
        ],
        Duration::from_secs(300),
    );
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    assert_eq!(
        outcomes(&out2),
        expect("mutex_normal_ok", &[("mutex_normal_ok", "success", "")])
    );
    let _ = fs::remove_dir_all(&out);
    let _ = fs::remove_dir_all(&out2);
}

/// A test slower without mcheck than its time limit has not failed: it is skipped (nothing
/// is left of its time to search it), with the reason, never called failing. (crossbeam's
/// `zero::drops` takes 50 s natively; with `--time-limit 15` it was called "fails without
/// any interleaving".)
#[test]
fn a_test_slower_than_its_time_limit_natively_is_skipped_not_failing() {
    let dir = temp_dir("slow");
    let source = dir.join("slow.c");
    fs::write(
        &source,
        "#include <unistd.h>\nint main(void) { sleep(5); return 0; }\n",
    )
    .expect("source");
    let program = dir.join("slow");
    let built = std::process::Command::new("gcc")
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .status()
        .expect("gcc (make deps installs it)");
    assert!(built.success());
    let out = dir.join("out");
    let ended = mcheck(
        &[
            "test",
            "--out",
            s(&out),
            "--time-limit",
            "1",
            "--",
            s(&program),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    assert_eq!(outcomes(&out), expect("slow", &[("slow", "skipped", "")]));
    let target = &record(&out)["targets"][0];
    assert_eq!(target["status"], "skipped", "{target}");
    let why = target["error"].as_str().unwrap_or("");
    assert!(
        why.contains("not searched: without mcheck it did not end within 1 s"),
        "{why}"
    );
    let summary = fs::read_to_string(out.join("summary.txt")).expect("summary");
    assert!(!summary.contains("failing without"), "{summary}");
    let _ = fs::remove_dir_all(&dir);
}

/// `mcheck test --list ARGS -- rusttest_suite FILTERS`: the selected names.
fn listed(options: &[&str], filters: &[&str]) -> Vec<String> {
    let bin = fixture("rusttest_suite");
    let mut args = vec!["test", "--list"];
    args.extend_from_slice(options);
    args.push("--");
    args.push(s(&bin));
    args.extend_from_slice(filters);
    let ended = mcheck(&args, Duration::from_secs(60));
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    ended.stdout.lines().map(str::to_string).collect()
}

#[test]
fn filters_skip_exact_and_shards_select_tests() {
    assert_eq!(
        listed(&[], &["handoff"]),
        ["handoff::channel", "handoff::mutex_condvar"]
    );
    assert_eq!(
        listed(&["--skip", "channel"], &["handoff", "locks"]),
        ["handoff::mutex_condvar", "locks::abba"]
    );
    assert!(listed(&["--exact"], &["handoff"]).is_empty());
    assert_eq!(listed(&["--exact"], &["locks::abba"]), ["locks::abba"]);
    assert_eq!(listed(&[], &["slow"]), ["slow::ignored_race (ignored)"]);
    let all: BTreeSet<String> = listed(&[], &[]).into_iter().collect();
    assert_eq!(all.len(), 6);
    let one = listed(&["--shard", "1/2"], &[]);
    let two = listed(&["--shard", "2/2"], &[]);
    assert_eq!(one.len(), 3);
    let union: BTreeSet<String> = one.iter().chain(&two).cloned().collect();
    assert_eq!(union, all, "{one:?} {two:?}");
}

#[test]
fn shards_of_a_test_run_merge_into_one() {
    let dir = temp_dir("test-shards");
    let gtest = fixture("gtest_suite");
    let mut shards = Vec::new();
    for i in 1..=2 {
        let out = dir.join(format!("shard-{i}"));
        let shard = format!("{i}/2");
        let ended = mcheck(
            &[
                "test",
                "--out",
                s(&out),
                "--shard",
                &shard,
                "--max-executions",
                "40",
                "--",
                s(&gtest),
            ],
            Duration::from_secs(300),
        );
        assert!(matches!(ended.code, Some(0 | 1)), "{}", ended.stderr);
        assert_eq!(record(&out)["targets"].as_array().unwrap().len(), 2);
        shards.push(out);
    }
    let merged = dir.join("merged");
    let ended = mcheck(
        &["merge", "--out", s(&merged), s(&shards[0]), s(&shards[1])],
        Duration::from_secs(60),
    );
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    let cases = outcomes(&merged);
    assert_eq!(cases.len(), 4, "{cases:?}");
    assert_eq!(
        cases[&(
            "gtest_suite".to_string(),
            "Counter.RacyIncrement".to_string()
        )]
            .0,
        "failure"
    );
    assert_eq!(record(&merged)["kind"], "test");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn bad_test_binaries_and_options_are_usage_errors() {
    let dir = temp_dir("bad-test");
    let text = dir.join("notes.txt");
    fs::write(&text, "not a program\n").unwrap();
    let script = dir.join("run.sh");
    fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let mut perms = fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(&script, perms).unwrap();
    let suite = fixture("rusttest_suite");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["test", "--", "/nonexistent/tests"], "no such file"),
        (vec!["test", "--", s(&text)], "not executable"),
        (vec!["test", "--", s(&dir)], "directory"),
        (vec!["test", "--", s(&script)], "script"),
        (vec!["test"], "TEST_BINARY"),
        (
            vec!["test", "--mcheck-arg=--json", "--", s(&suite)],
            "set by mcheck test",
        ),
        (
            vec!["test", "--mcheck-arg=--no-such-option", "--", s(&suite)],
            "bad --mcheck-arg",
        ),
        (
            vec!["test", "--framework", "gtest", "--", s(&suite)],
            "listing the tests",
        ),
    ];
    for (args, says) in cases {
        let ended = mcheck(&args, Duration::from_secs(60));
        assert_eq!(ended.code, Some(2), "{args:?}: {}", ended.stderr);
        assert!(ended.stderr.contains(says), "{args:?}: {}", ended.stderr);
        assert!(
            ended.stderr.lines().count() <= 6,
            "{args:?}: {}",
            ended.stderr
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// Copies a directory tree (files and directories only).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            if e.file_name() != "target" {
                copy_tree(&e.path(), &dest);
            }
        } else {
            fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn cargo_mcheck_checks_a_crates_tests() {
    let dir = temp_dir("cargo-mcheck");
    let krate = dir.join("cargo-demo");
    copy_tree(&fixtures().join("crates/cargo-demo"), &krate);
    let out = dir.join("out");
    let ended = run_in(
        Path::new(env!("CARGO_BIN_EXE_cargo-mcheck")),
        &[
            "mcheck",
            "--offline",
            "--target-dir",
            s(&dir.join("target")),
            "--out",
            s(&out),
            "--max-executions",
            "40",
        ],
        &krate,
        &[("MCHECK", env!("CARGO_BIN_EXE_mcheck"))],
        Duration::from_secs(600),
    );
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    let mut want = expect(
        "cargo-demo",
        &[
            ("tests::locked_counter", "success", ""),
            ("tests::unlocked_counter", "failure", "data_race"),
        ],
    );
    want.extend(expect(
        "cargo-demo::pipeline",
        &[("pipeline", "success", "")],
    ));
    assert_eq!(outcomes(&out), want, "{}", ended.stderr);
    failures_say_how_to_replay(&out);
    assert_valid_sarif(&out.join("results.sarif"));
    let rec = record(&out);
    assert_eq!(rec["binaries"].as_array().unwrap().len(), 2);
    assert!(out.join("binaries/cargo-demo/junit.xml").exists());
    assert!(replay_every_finding(&out) >= 1);
    // Nothing was written into the crate but cargo's lock file.
    let mut left: Vec<String> = fs::read_dir(&krate)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [".gitignore", "Cargo.lock", "Cargo.toml", "src", "tests"]
    );

    // Options it does not know are mcheck test's; a bad one is a usage error.
    let ended = run_in(
        Path::new(env!("CARGO_BIN_EXE_cargo-mcheck")),
        &[
            "mcheck",
            "--offline",
            "--target-dir",
            s(&dir.join("target")),
            "--max-executions",
        ],
        &krate,
        &[("MCHECK", env!("CARGO_BIN_EXE_mcheck"))],
        Duration::from_secs(60),
    );
    assert_eq!(ended.code, Some(2), "{}", ended.stderr);
    let _ = fs::remove_dir_all(&dir);
}
