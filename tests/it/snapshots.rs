//! Fork snapshots must not change what a search finds: every fixture of expected.json is
//! searched with `--strategy dfs --jobs 1` from snapshots and from exec, and the two runs
//! must agree on the exit status, the number of executions, exhaustion, and every finding's
//! kind, message, locations, execution index and step count. Snapshots must really be used
//! where they can be, and refused, with the reason said once, where a fork copy would share
//! state with its template.

use crate::common;

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{args, fixture, fixture_runs, mcheck, mcheck_with_env, FixtureRun, Run};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(240);
/// Enough executions to backtrack deep into every fixture's tree, few enough to stay quick.
const EXECUTIONS: &str = "12";
/// A fixture of the patched path's speed (16 MiB of accesses in each execution): its
/// snapshots are those of any two-thread program, and it alone took a tenth of this test.
const SPEED_FIXTURES: &[&str] = &["bench_slices"];
/// Executions of the deep searches: every case backtracks through branch snapshots many
/// times.
const DEEP_EXECUTIONS: &str = "80";

fn dfs_run(e: &FixtureRun, snapshots: bool) -> Run {
    let from = if snapshots {
        Start::Snapshots
    } else {
        Start::Exec
    };
    tree_run(e, "dfs", EXECUTIONS, from)
}

/// Where the executions of a run start.
#[derive(Clone, Copy, PartialEq)]
enum Start {
    /// From the startup snapshot, or a branch snapshot on their path (the default).
    Snapshots,
    /// From the startup snapshot only (`MCHECK_BRANCH_SNAPSHOTS=off`).
    Startup,
    /// From exec (`--no-snapshots`).
    Exec,
}

fn tree_run(e: &FixtureRun, strategy: &str, executions: &str, from: Start) -> Run {
    let binary = &e.binary;
    let out = common::temp_path("out");
    // The fixture's options first: the budget here wins over one of its own.
    let mut a = e.options.clone();
    a.extend(args(&[
        "--strategy",
        strategy,
        "--jobs",
        "1",
        "--seed",
        "1",
    ]));
    a.extend(args(&[
        "--max-executions",
        executions,
        "--quiet-program",
        "--out",
    ]));
    a.push(out.display().to_string());
    if from == Start::Exec {
        a.push("--no-snapshots".into());
    }
    a.push("--".into());
    a.push(binary.display().to_string());
    a.extend(e.args.iter().cloned());
    let branches = if from == Start::Startup { "off" } else { "on" };
    let run = mcheck_with_env(&a, &[("MCHECK_BRANCH_SNAPSHOTS", branches)], true, LIMIT);
    let _ = std::fs::remove_dir_all(&out);
    run
}

/// What must be equal between the two runs.
fn summary(run: &Run) -> Value {
    let Some(j) = &run.json else {
        return Value::String(format!("no report; stderr:\n{}", run.stderr));
    };
    let findings: Vec<Value> = j["findings"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .map(|f| {
                    // A spinning thread is interrupted wherever it happens to be in its
                    // loop: its instruction differs from run to run, its source line not.
                    let mut locations = f["locations"].clone();
                    if f["kind"] == "timeout" {
                        for l in locations.as_array_mut().into_iter().flatten() {
                            l.as_object_mut().map(|o| o.remove("address"));
                        }
                    }
                    serde_json::json!({
                        "kind": f["kind"],
                        "message": without_tids(f["message"].as_str().unwrap_or("")),
                        "locations": locations,
                        "execution": f["execution"], "steps": f["steps"],
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "code": run.code,
        "executions": j["executions"],
        "exhausted": j["coverage"]["exhausted"],
        "findings": findings,
    })
}

/// Rust panic messages quote the OS thread id, which differs from run to run anyway.
fn without_tids(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(i) = rest.find('(') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.find(')') {
            Some(j) if j > 0 && after[..j].bytes().all(|b| b.is_ascii_digit()) => {
                out.push_str("(tid)");
                rest = &after[j + 1..];
            }
            _ => {
                out.push('(');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn every_fixture_gives_the_same_results_with_and_without_snapshots() {
    let mut list = fixture_runs();
    list.retain(|e| !SPEED_FIXTURES.contains(&e.name.as_str()));
    let next = Mutex::new(0usize);
    let problems = Mutex::new(Vec::new());
    let used = Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(e) = list.get(i) else { break };
                let started = Instant::now();
                let with = dfs_run(e, true);
                let took_with = started.elapsed().as_secs_f64();
                let without = dfs_run(e, false);
                // Per fixture, to see where this test's time goes (`--nocapture`).
                eprintln!(
                    "snapshots: {} {took_with:.1}s from snapshots, {:.1}s from exec",
                    e.name,
                    started.elapsed().as_secs_f64() - took_with
                );
                let (a, b) = (summary(&with), summary(&without));
                if a != b {
                    problems.lock().unwrap().push(format!(
                        "{}: with snapshots {a}\n   without {b}\n   ({})",
                        e.name, with.command
                    ));
                }
                let restored = with.json.as_ref().map_or(0, |j| {
                    j["snapshots"]["executions_from_snapshot"]
                        .as_u64()
                        .unwrap_or(0)
                });
                if restored > 0 {
                    used.lock().unwrap().push(e.name.clone());
                }
            });
        }
    });
    let problems = problems.into_inner().unwrap();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let used = used.into_inner().unwrap();
    // Most fixtures create threads and share nothing: the comparison must have exercised
    // snapshots widely, not compared exec with exec.
    assert!(
        used.len() * 2 > list.len(),
        "only {} of {} fixtures ran from snapshots: {used:?}",
        used.len(),
        list.len()
    );
    for name in [
        "snapshot_threads_ok",
        "hundred_threads_ok",
        "rust_mutex_ok",
        "cpp_prodcons_ok",
    ] {
        assert!(
            used.contains(&name.to_string()),
            "{name} did not use snapshots"
        );
    }
}

/// Deep searches, where copies of the whole multi-threaded process are made at branch
/// points: dfs and icb give the same results from branch snapshots as from the startup
/// snapshot alone (which the test above compares with exec, on every fixture), and the
/// branch snapshots are really used. Compared with exec instead, the runs from exec took
/// two thirds of this test.
#[test]
fn branch_snapshots_give_the_same_deep_searches() {
    let cases = [
        ("snapshot_threads_ok", "dfs", false),
        ("snapshot_threads_ok", "dfs", true),
        ("snapshot_fidelity_ok", "dfs", true),
        ("snapshot_pending_signal_ok", "dfs", false),
        ("snapshot_saved_pid_ok", "dfs", false),
        // A fork advice after the threads started: no branch snapshot after it.
        ("snapshot_wipeonfork_ok", "dfs", false),
        ("hundred_threads_ok", "dfs", false),
        ("cpp_prodcons_ok", "dfs", false),
        ("rust_mpsc_ok", "dfs", false),
        ("race_rust_mutex_mpsc_ok", "dfs", false),
        ("cpp_prodcons_ok", "icb", false),
        ("snapshot_threads_ok", "icb", false),
    ];
    let mut problems = Vec::new();
    for (name, strategy, no_por) in cases {
        let e = FixtureRun {
            name: name.to_string(),
            binary: fixture(name),
            verdict: "none".into(),
            args: Vec::new(),
            options: if no_por {
                args(&["--no-por"])
            } else {
                Vec::new()
            },
        };
        let with = tree_run(&e, strategy, DEEP_EXECUTIONS, Start::Snapshots);
        let without = tree_run(&e, strategy, DEEP_EXECUTIONS, Start::Startup);
        let (a, b) = (summary(&with), summary(&without));
        if a != b {
            problems.push(format!(
                "{name} {strategy} (no_por {no_por}): with {a}\n   without {b}"
            ));
        }
        let started = |run: &Run, from: &str| {
            (run.json.as_ref()).map_or(0, |j| j["snapshots"][from].as_u64().unwrap_or(0))
        };
        let from_branch = started(&with, "executions_from_branch_snapshot");
        if from_branch == 0 && name != "snapshot_fidelity_ok" {
            problems.push(format!(
                "{name} {strategy}: no execution started from a branch snapshot"
            ));
        }
        // The run compared with: every execution after the first from the startup snapshot.
        let (startup, branch) = (
            started(&without, "executions_from_snapshot"),
            started(&without, "executions_from_branch_snapshot"),
        );
        let executions =
            (without.json.as_ref()).map_or(0, |j| j["executions"].as_u64().unwrap_or(0));
        if branch != 0 || startup + 1 < executions {
            problems.push(format!(
                "{name} {strategy}: the run without branch snapshots started {startup} execution(s) from snapshots, {branch} of them from branch snapshots"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A program that never creates a thread has one execution, whatever the strategy: its
/// first execution meets no scheduling choice, and executions are deterministic. The
/// search says so instead of running the same execution again (a randomised strategy ran
/// it `--max-executions` times, from a snapshot taken at `main`).
#[test]
fn a_program_without_threads_is_explored_once() {
    for strategy in ["random", "pct", "portfolio", "icb", "dfs"] {
        let out = common::temp_path("out");
        let mut a = args(&[
            "--strategy",
            strategy,
            "--jobs",
            "1",
            "--max-executions",
            "20",
        ]);
        a.extend(args(&["--quiet-program", "--out"]));
        a.push(out.display().to_string());
        a.push("--".into());
        a.push(fixture("bench_yield").display().to_string());
        a.push("50".into());
        let run = mcheck(&a, true, LIMIT);
        let _ = std::fs::remove_dir_all(&out);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let json = run.json.expect("report");
        assert_eq!(json["executions"], 1, "{strategy}: {json}");
        assert_eq!(json["complete"], true, "{strategy}: {json}");
        assert_eq!(
            json["coverage"]["nothing_to_explore"], "no_thread",
            "{strategy}"
        );
        assert!(
            run.stderr
                .contains("the program created no thread, so one execution covers it"),
            "{strategy}: {}",
            run.stderr
        );
    }
}

/// Threads that never run side by side leave nothing to choose either; threads that do
/// are searched as before.
#[test]
fn threads_that_never_meet_are_explored_once() {
    for (name, executions, nothing) in [
        ("sequential_threads_ok", 1, "no_choice"),
        ("snapshot_output_file_ok", 20, ""),
    ] {
        let out = common::temp_path("out");
        let mut a = args(&[
            "--strategy",
            "random",
            "--jobs",
            "1",
            "--max-executions",
            "20",
        ]);
        a.extend(args(&["--quiet-program", "--out"]));
        a.push(out.display().to_string());
        a.push("--".into());
        a.push(fixture(name).display().to_string());
        let run = mcheck(&a, true, LIMIT);
        let _ = std::fs::remove_dir_all(&out);
        assert_eq!(run.code, Some(0), "{name}: {}", run.stderr);
        let json = run.json.expect("report");
        assert_eq!(json["executions"], executions, "{name}: {json}");
        let why = json["coverage"]["nothing_to_explore"]
            .as_str()
            .unwrap_or("");
        assert_eq!(why, nothing, "{name}: {json}");
    }
}

fn default_search(name: &str) -> Run {
    let out = common::temp_path("out");
    let mut a = args(&["--quiet-program", "--max-executions", "30", "--out"]);
    a.push(out.display().to_string());
    a.push("--".into());
    a.push(fixture(name).display().to_string());
    let run = mcheck(&a, true, LIMIT);
    let _ = std::fs::remove_dir_all(&out);
    run
}

#[test]
fn state_a_fork_copy_would_share_turns_snapshots_off_and_says_why_once() {
    for (name, why) in [
        ("snapshot_shared_map_ok", "MAP_SHARED"),
        ("race_io_buffer", "pipe"),
    ] {
        let run = default_search(name);
        let j = run.json.as_ref().expect("report");
        let off = j["snapshots"]["off_because"].as_str().unwrap_or("");
        assert!(off.contains(why), "{name}: off_because {off:?}");
        assert_eq!(
            run.stderr.matches("fork snapshots are off").count(),
            1,
            "{name}: the reason must be said exactly once:\n{}",
            run.stderr
        );
        if name != "race_io_buffer" {
            assert_eq!(run.code, Some(0), "{name}: {}", run.stderr);
        }
    }
}

#[test]
fn a_file_read_across_the_snapshot_keeps_snapshots_on() {
    // Its offset is put back before every copy instead of turning snapshots off.
    let run = default_search("snapshot_file_offset_ok");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let j = run.json.expect("report");
    assert!(j["snapshots"]["off_because"].is_null(), "{j}");
    assert!(
        j["snapshots"]["executions_from_snapshot"].as_u64().unwrap() >= 2,
        "{j}"
    );
}

#[test]
fn no_snapshots_means_every_execution_starts_from_exec() {
    let out = common::temp_path("out");
    let mut a = args(&[
        "--strategy",
        "dfs",
        "--no-snapshots",
        "--quiet-program",
        "--out",
    ]);
    a.push(out.display().to_string());
    a.push("--".into());
    a.push(fixture("atomic_pair").display().to_string());
    let run = mcheck(&a, true, LIMIT);
    let _ = std::fs::remove_dir_all(&out);
    let j = run.json.expect("report");
    assert_eq!(j["snapshots"]["executions_from_snapshot"], 0);
    assert!(j["snapshots"]["off_because"].is_null());
    assert!(j["executions"].as_u64().unwrap() > 1);
}
