//! Runs `mcheck` on every fixture listed in `tracee-fixtures/expected.json` and
//! compares the outcome with the expected verdict.
//!
//! The fixtures are built by `make fixtures` (or `make -C tracee-fixtures`); this
//! test does not build them.  All fixtures run inside one `#[test]` on a small
//! pool of worker threads; every mismatch is collected and reported at the end.
//!
//! For each fixture the command is, in a fresh working directory,
//! `mcheck --quiet-program --json <tmp> --seed 1 <options> -- <binary> <args>`
//! and the expectations are:
//! - verdict `none`: exit status 0 and an empty `findings` array;
//! - any other verdict: exit status 1 and `findings[0].kind == verdict`;
//! - `also` (optional): finding kinds that must be among the findings too (a race and the
//!   failure it causes, found by refining the search with the racy sites).
//!
//! On the patched path, the schedule of a buggy fixture's first finding is then replayed
//! [`REPLAYS`] times (`mcheck replay`), and every replay must end with the same finding kind
//! (exit status 1): the search's finding is reproducible, not a one-off.  A replay that
//! diverges one time in two fails this 7 times in 8 (five replays, 31 in 32, took nearly
//! as long as all the searches of the patched path: 190 s against 232 s, one run at a time).
//!
//! A second test runs them all again on the breakpoint path (`MCHECK_PATCH=off`: every
//! access site stops instead of being patched), so that both ways of recording accesses
//! stay tested; a fixture may say `"on_breakpoints": {"args": [...]}` (a smaller size) or
//! `{"skip": "why"}` (a fixture of the patched code itself, or of its speed). There a
//! correct fixture (verdict `none`), or one whose only finding is a data race (verdict
//! `data_race` without `also`: the search follows the race for its whole budget, looking
//! for a failure it leads to), runs at most [`BREAKPOINT_BUDGET`] executions, or its own
//! budget when that is smaller: its budget is run on the patched path, and the breakpoint
//! path only has to show that the same recording, reached another way, gives the same
//! finding or none. Fifteen executions pass every mechanism a correct fixture has (its
//! threads' creation, their synchronisation, their accesses and exits) several times over;
//! 300, then 100, then 30, each kept the suite past CI's 10-minute aim. The two tests take turns,
//! each using the whole machine.
//!
//! Environment knobs (for local use):
//! - `MCHECK_FIXTURES=name1,name2` runs only those fixtures;
//! - `MCHECK_FIXTURE_JOBS=N` changes the number of parallel runs (default 2).

mod common;

use serde_json::Value;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

/// Any single mcheck run taking longer than this is killed and counts as a failure.
const RUN_LIMIT: Duration = Duration::from_secs(120);
const DEFAULT_JOBS: usize = 2;
/// Most executions of a correct fixture, or of one with only a data race, on the breakpoint
/// path (a smaller budget of its own stays).
const BREAKPOINT_BUDGET: u64 = 15;
/// Replays of each buggy fixture's schedule on the patched path.
const REPLAYS: usize = 3;

/// Finding kinds a fixture may expect (plus "none").
const KNOWN_VERDICTS: &[&str] = &[
    "none",
    "deadlock",
    "data_race",
    "assertion",
    "crash",
    "livelock",
    "nondeterminism",
    "exit_status",
    "api_misuse",
    "timeout",
    "use_after_free",
    "double_free",
    "invalid_free",
    "lock_order",
];

#[derive(Debug, Clone)]
struct Fixture {
    name: String,
    binary: PathBuf,
    verdict: String,
    also: Vec<String>,
    args: Vec<String>,
    options: Vec<String>,
    /// Arguments on the breakpoint path, when other than `args`.
    breakpoint_args: Option<Vec<String>>,
    /// Why it does not run on the breakpoint path.
    breakpoint_skip: Option<String>,
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tracee-fixtures")
}

fn string_list(v: &Value, field: &str, name: &str) -> Vec<String> {
    match v.get(field) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|x| {
                x.as_str()
                    .unwrap_or_else(|| panic!("expected.json: {name}.{field} must hold strings"))
                    .to_string()
            })
            .collect(),
        Some(_) => panic!("expected.json: {name}.{field} must be an array of strings"),
    }
}

fn load_fixtures() -> Vec<Fixture> {
    let dir = fixtures_dir();
    let path = dir.join("expected.json");
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let json: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()));
    let entries = json
        .as_array()
        .unwrap_or_else(|| panic!("{} must hold a JSON array", path.display()));
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for e in entries {
        let name = e
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("expected.json: entry without a string \"name\": {e}"))
            .to_string();
        assert!(
            seen.insert(name.clone()),
            "expected.json: duplicate fixture name {name}"
        );
        let binary = e
            .get("binary")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("expected.json: {name} has no \"binary\""));
        let verdict = e
            .get("verdict")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("expected.json: {name} has no \"verdict\""))
            .to_string();
        assert!(
            KNOWN_VERDICTS.contains(&verdict.as_str()),
            "expected.json: {name} has unknown verdict {verdict:?}"
        );
        let also = string_list(e, "also", &name);
        for kind in &also {
            assert!(
                KNOWN_VERDICTS.contains(&kind.as_str()) && kind != "none",
                "expected.json: {name} has unknown kind {kind:?} in \"also\""
            );
        }
        let on_breakpoints = e.get("on_breakpoints");
        out.push(Fixture {
            also,
            binary: dir.join(binary),
            args: string_list(e, "args", &name),
            options: string_list(e, "options", &name),
            breakpoint_args: on_breakpoints
                .filter(|o| o.get("args").is_some())
                .map(|o| string_list(o, "args", &name)),
            breakpoint_skip: on_breakpoints
                .and_then(|o| o.get("skip"))
                .and_then(Value::as_str)
                .map(str::to_string),
            name,
            verdict,
        });
    }
    out
}

fn unique_temp(tag: &str, ext: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "mcheck-verdicts-{}-{}-{tag}.{ext}",
        std::process::id(),
        n
    ))
}

/// The last `max` characters of a file, for failure messages.
fn tail_of(path: &Path, max: usize) -> String {
    let text = fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let text = text.trim_end();
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &text[start..])
}

enum RunEnd {
    Exited(ExitStatus),
    TimedOut,
    SpawnFailed(String),
}

/// The fixture's own `--max-executions`, if its options give one.
fn own_budget(fx: &Fixture) -> Option<u64> {
    let at = fx.options.iter().rposition(|o| o == "--max-executions")?;
    let value = fx.options.get(at + 1)?;
    Some(value.parse().unwrap_or_else(|_| {
        panic!(
            "expected.json: {}: --max-executions {value} is not a number",
            fx.name
        )
    }))
}

struct RunResult {
    end: RunEnd,
    elapsed: Duration,
    json: Result<Value, String>,
    stdout_tail: String,
    stderr_tail: String,
    /// mcheck said it met an internal error (never acceptable, whatever the verdict).
    internal_error: bool,
    command: String,
}

fn run_mcheck(fx: &Fixture, patching: bool) -> RunResult {
    let json_path = unique_temp(&fx.name, "json");
    let out_path = unique_temp(&fx.name, "stdout");
    let err_path = unique_temp(&fx.name, "stderr");
    let _ = fs::remove_file(&json_path);

    let mut args: Vec<String> = vec![
        "--quiet-program".into(),
        "--json".into(),
        json_path.display().to_string(),
        "--seed".into(),
        "1".into(),
        "--out".into(),
        std::env::temp_dir()
            .join(format!("mcheck-verdicts-{}-schedules", std::process::id()))
            .display()
            .to_string(),
    ];
    args.extend(fx.options.iter().cloned());
    let race_only = fx.verdict == "data_race" && fx.also.is_empty();
    if !patching
        && (fx.verdict == "none" || race_only)
        && own_budget(fx).is_none_or(|n| n > BREAKPOINT_BUDGET)
    {
        // After the fixture's options: the last `--max-executions` wins.
        args.extend(["--max-executions".into(), BREAKPOINT_BUDGET.to_string()]);
    }
    args.push("--".into());
    args.push(fx.binary.display().to_string());
    match (&fx.breakpoint_args, patching) {
        (Some(a), false) => args.extend(a.iter().cloned()),
        _ => args.extend(fx.args.iter().cloned()),
    }
    let command = format!(
        "{}mcheck {}",
        if patching { "" } else { "MCHECK_PATCH=off " },
        args.join(" ")
    );

    let start = Instant::now();
    // A fresh working directory: fixtures that write files write them there.
    let work = unique_temp(&fx.name, "cwd");
    // Output goes to files, not pipes: an unread pipe could block mcheck.
    let spawned = fs::create_dir_all(&work)
        .and(File::create(&out_path))
        .and_then(|out| {
            let err = File::create(&err_path)?;
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcheck"));
            // The environment's RUST_BACKTRACE=1 makes a panicking Rust fixture symbolise its
            // own backtrace (a hundred thousand allocations, each a stop): seconds per
            // execution that test nothing of mcheck.
            cmd.env_remove("RUST_BACKTRACE");
            if !patching {
                cmd.env("MCHECK_PATCH", "off");
            }
            cmd.current_dir(&work)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
        });
    let end = match spawned {
        Err(e) => RunEnd::SpawnFailed(e.to_string()),
        Ok(mut child) => loop {
            match child.try_wait() {
                Ok(Some(status)) => break RunEnd::Exited(status),
                Ok(None) => {}
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break RunEnd::SpawnFailed(format!("waiting for mcheck failed: {e}"));
                }
            }
            if start.elapsed() > RUN_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                break RunEnd::TimedOut;
            }
            thread::sleep(Duration::from_millis(20));
        },
    };
    let elapsed = start.elapsed();

    let json = match fs::read_to_string(&json_path) {
        Err(e) => Err(format!("no JSON report at {}: {e}", json_path.display())),
        Ok(text) => serde_json::from_str::<Value>(&text)
            .map_err(|e| format!("JSON report is not valid JSON: {e}")),
    };
    let result = RunResult {
        end,
        elapsed,
        json,
        stdout_tail: tail_of(&out_path, 1500),
        stderr_tail: tail_of(&err_path, 1500),
        internal_error: fs::read_to_string(&err_path)
            .is_ok_and(|e| e.contains("mcheck: internal error")),
        command,
    };
    let _ = fs::remove_file(&json_path);
    let _ = fs::remove_dir_all(&work);
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    result
}

/// `Ok(summary)` when the run matches the expectation, `Err(explanation)` otherwise.
fn judge(fx: &Fixture, r: &RunResult) -> Result<String, String> {
    if r.internal_error {
        return Err("mcheck reported an internal error".into());
    }
    let status = match &r.end {
        RunEnd::SpawnFailed(e) => return Err(format!("could not run mcheck: {e}")),
        RunEnd::TimedOut => {
            return Err(format!(
                "mcheck did not finish within {}s and was killed",
                RUN_LIMIT.as_secs()
            ))
        }
        RunEnd::Exited(s) => *s,
    };
    let code = match status.code() {
        Some(c) => c,
        None => return Err(format!("mcheck itself died: {status}")),
    };
    let report = r
        .json
        .as_ref()
        .map_err(|e| format!("exit status {code}; {e}"))?;
    let findings = report
        .get("findings")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("exit status {code}; JSON report has no \"findings\" array"))?;
    let kinds: Vec<String> = findings
        .iter()
        .map(|f| {
            f.get("kind")
                .and_then(Value::as_str)
                .unwrap_or("<no kind>")
                .to_string()
        })
        .collect();
    let executions = report.get("executions").and_then(Value::as_u64);
    let first_message = findings
        .first()
        .and_then(|f| f.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("");

    if fx.verdict == "none" {
        if code == 0 && findings.is_empty() {
            Ok(format!(
                "none after {} executions",
                executions.map_or("?".into(), |n| n.to_string())
            ))
        } else {
            Err(format!(
                "expected no finding, got exit status {code} and findings {kinds:?} (first: {first_message})"
            ))
        }
    } else if code != 1 {
        Err(format!(
            "expected exit status 1 with a {} finding, got exit status {code}, findings {kinds:?}",
            fx.verdict
        ))
    } else if kinds.first().map(String::as_str) != Some(fx.verdict.as_str()) {
        Err(format!(
            "expected first finding {}, got findings {kinds:?} (first: {first_message})",
            fx.verdict
        ))
    } else if let Some(missing) = fx.also.iter().find(|k| !kinds.contains(k)) {
        Err(format!(
            "expected a {missing} finding besides the {}, got findings {kinds:?}",
            fx.verdict
        ))
    } else {
        Ok(format!(
            "{} after {} executions",
            fx.verdict,
            executions.map_or("?".into(), |n| n.to_string())
        ))
    }
}

/// For a buggy fixture: replays the schedule of the run's first finding [`REPLAYS`] times
/// and checks that each replay ends with a finding of the expected kind.
fn replays_agree(fx: &Fixture, r: &RunResult) -> Result<(), String> {
    if fx.verdict == "none" {
        return Ok(());
    }
    let report = r.json.as_ref().map_err(String::clone)?;
    let schedule = report["findings"][0]["schedule"]
        .as_str()
        .ok_or("the first finding names no schedule file")?;
    for i in 0..REPLAYS {
        let run = common::mcheck(
            &common::args(&["replay", "--quiet-program", schedule]),
            true,
            RUN_LIMIT,
        );
        let kind = run
            .json
            .as_ref()
            .and_then(|j| j["findings"][0]["kind"].as_str().map(String::from));
        if run.code != Some(1) || kind.as_deref() != Some(fx.verdict.as_str()) {
            return Err(format!(
                "replay {i} of {schedule} gave exit status {:?} and finding {kind:?}: {}",
                run.code,
                run.stderr.lines().last().unwrap_or("")
            ));
        }
    }
    Ok(())
}

/// The two tests take turns: each runs `MCHECK_FIXTURE_JOBS` fixtures at a time, and
/// timing-sensitive fixtures (`--execution-timeout`) want the CPUs they were given.
static TURN: Mutex<()> = Mutex::new(());

#[test]
fn every_fixture_gets_its_expected_verdict() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    check_every_fixture(true);
}

#[test]
fn every_fixture_gets_its_expected_verdict_on_breakpoints() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    check_every_fixture(false);
}

/// Runs every fixture (with patched access sites, or on breakpoints) and panics with every
/// mismatch.
fn check_every_fixture(patching: bool) {
    let dir = fixtures_dir();
    let build = dir.join("build");
    assert!(
        build.is_dir(),
        "{} is missing: run `make fixtures` (or `make -C tracee-fixtures`) before `cargo test`",
        build.display()
    );

    let mut fixtures = load_fixtures();
    assert!(!fixtures.is_empty(), "expected.json lists no fixtures");
    if let Ok(filter) = std::env::var("MCHECK_FIXTURES") {
        let wanted: Vec<&str> = filter
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        for w in &wanted {
            assert!(
                fixtures.iter().any(|f| f.name == *w),
                "MCHECK_FIXTURES: no fixture named {w}"
            );
        }
        fixtures.retain(|f| wanted.contains(&f.name.as_str()));
    }

    let mut failures: Vec<String> = Vec::new();
    let missing: Vec<&Fixture> = fixtures.iter().filter(|f| !f.binary.is_file()).collect();
    for f in &missing {
        failures.push(format!(
            "{}: binary {} does not exist (run `make fixtures`; is expected.json in sync with the Makefile?)",
            f.name,
            f.binary.display()
        ));
    }
    let runnable: Vec<Fixture> = fixtures
        .iter()
        .filter(|f| f.binary.is_file())
        .filter(|f| patching || f.breakpoint_skip.is_none())
        .cloned()
        .collect();

    let jobs = std::env::var("MCHECK_FIXTURE_JOBS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_JOBS);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<String, String>)>> = Mutex::new(Vec::new());

    thread::scope(|s| {
        for _ in 0..jobs.min(runnable.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(fx) = runnable.get(i) else { break };
                let r = run_mcheck(fx, patching);
                let verdict = judge(fx, &r)
                    .and_then(|summary| {
                        if patching && fx.verdict != "none" {
                            let start = Instant::now();
                            replays_agree(fx, &r)?;
                            return Ok(format!(
                                "{summary}; {REPLAYS} replays {:.1}s",
                                start.elapsed().as_secs_f64()
                            ));
                        }
                        Ok(summary)
                    })
                    .map_err(|why| {
                        format!(
                            "{}: {why}\n    command: {}\n    stderr: {}\n    stdout: {}",
                            fx.name,
                            r.command,
                            if r.stderr_tail.is_empty() {
                                "<empty>"
                            } else {
                                r.stderr_tail.as_str()
                            },
                            if r.stdout_tail.is_empty() {
                                "<empty>"
                            } else {
                                r.stdout_tail.as_str()
                            },
                        )
                    });
                match &verdict {
                    Ok(summary) => eprintln!(
                        "ok   {:<26} {:>6.1}s  {summary}",
                        fx.name,
                        r.elapsed.as_secs_f64()
                    ),
                    Err(_) => eprintln!("FAIL {:<26} {:>6.1}s", fx.name, r.elapsed.as_secs_f64()),
                }
                results.lock().unwrap().push((i, verdict));
            });
        }
    });

    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    failures.extend(results.into_iter().filter_map(|(_, r)| r.err()));

    if !failures.is_empty() {
        panic!(
            "{} of {} fixtures did not get their expected verdict:\n\n{}\n",
            failures.len(),
            fixtures.len(),
            failures.join("\n\n")
        );
    }
}
