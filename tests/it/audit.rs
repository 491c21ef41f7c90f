//! `mcheck audit` and `mcheck merge` on the real fixtures: verdicts of a manifest of buggy
//! and correct C, C++ and Rust programs, the SARIF output against the official SARIF 2.1.0
//! schema, the JUnit output read back by an XML parser, fingerprints across optimisation
//! levels and seeds, baselines, bad manifests, and shards merged into the unsharded audit.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::formats::{assert_valid_sarif, junit_cases};
use crate::common::{fixture, fixtures, temp_path};

/// Runs `mcheck ARGS` with a time limit; returns its exit code and stderr.
fn run(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let err = temp_path("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcheck"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&err).expect("temp file"))
        .spawn()
        .expect("spawn mcheck");
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
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = fs::read_to_string(&err).unwrap_or_default();
    let _ = fs::remove_file(&err);
    (code, stderr)
}

/// A fresh directory.
fn temp_dir(tag: &str) -> PathBuf {
    let d = temp_path(tag);
    fs::create_dir_all(&d).expect("temp dir");
    d
}

/// One `[[target]]` table.
fn target(name: &str, binary: &str, extra: &str) -> String {
    format!(
        "[[target]]\nname = \"{name}\"\ncommand = [\"{}\"]\n{extra}\n",
        fixture(binary).display()
    )
}

/// Writes a manifest into `dir`.
fn manifest(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("audit.toml");
    fs::write(&p, text).expect("write manifest");
    p
}

/// Runs an audit; returns exit code, stderr and audit.json.
fn audit(manifest: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, String, Value) {
    let mut args = vec![
        "audit",
        manifest.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, stderr) = run(&args, Duration::from_secs(120));
    let json = fs::read_to_string(out.join("audit.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (code, stderr, json)
}

/// Target name → its audit.json entry.
fn targets(audit: &Value) -> BTreeMap<String, Value> {
    audit["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t.clone()))
        .collect()
}

/// Fingerprints of a target's findings.
fn fingerprints(t: &Value) -> BTreeSet<String> {
    t["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["fingerprint"].as_str().unwrap().to_string())
        .collect()
}

/// The expected verdict of a fixture binary in expected.json.
fn expected_verdict(binary: &str) -> String {
    let list: Value =
        serde_json::from_str(&fs::read_to_string(fixtures().join("expected.json")).unwrap())
            .unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .find(|e| e["binary"] == format!("build/{binary}"))
        .unwrap_or_else(|| panic!("{binary} not in expected.json"))["verdict"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn audit_of_fixtures_verdicts_formats_and_baseline() {
    let dir = temp_dir("audit");
    let buggy = [
        ("c_race", "race_counter"),
        ("c_deadlock", "abba_O0"),
        ("cpp_deadlock", "cpp_abba"),
        ("rust_deadlock", "rust_abba"),
    ];
    let correct = [
        ("c_ok", "sem_ok"),
        ("cpp_ok", "cpp_prodcons_ok"),
        ("rust_ok", "rust_mutex_ok"),
    ];
    let mut text = format!("jobs = 2\nsource_root = \"{}\"\n", fixtures().display());
    // Buggy targets stop at their first finding; the portfolio finds rust_abba's deadlock
    // in about 45 executions.
    for (name, bin) in &buggy {
        text += &target(name, bin, "max_executions = 100");
    }
    for (name, bin) in &correct {
        text += &target(name, bin, "max_executions = 20");
    }
    text +=
        "[[target]]\nname = \"missing\"\ncommand = [\"/nonexistent/orders\"]\nmax_executions = 5\n";
    let m = manifest(&dir, &text);
    let out1 = dir.join("out1");
    let (code, stderr, json) = audit(&m, &out1, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let t = targets(&json);
    for (name, bin) in &buggy {
        let want = expected_verdict(bin);
        assert_eq!(t[*name]["status"], "findings", "{name}: {stderr}");
        let kinds: Vec<&str> = t[*name]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["kind"].as_str().unwrap())
            .collect();
        assert!(
            kinds.contains(&want.as_str()),
            "{name}: {kinds:?} != {want}"
        );
        assert_eq!(
            t[*name]["report"]["findings"].as_array().unwrap().len(),
            kinds.len()
        );
    }
    for (name, bin) in &correct {
        assert_eq!(expected_verdict(bin), "none");
        assert_eq!(t[*name]["status"], "clean", "{name}: {stderr}");
        assert!(t[*name]["report"]["executions"].as_u64().unwrap() >= 1);
    }
    assert_eq!(t["missing"]["status"], "error");
    assert!(
        t["missing"]["error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/orders"),
        "{}",
        t["missing"]
    );
    // The human summary names every target and the new findings.
    let summary = fs::read_to_string(out1.join("summary.txt")).unwrap();
    for name in t.keys() {
        assert!(summary.contains(name.as_str()), "{summary}");
    }
    assert!(stderr.contains("New findings:"), "{stderr}");

    // SARIF: valid against the official schema, one result per finding, fingerprints,
    // related locations and the replay command.
    let sarif = assert_valid_sarif(&out1.join("results.sarif"));
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let findings: usize = t
        .values()
        .map(|t| t["findings"].as_array().unwrap().len())
        .sum();
    assert_eq!(results.len(), findings);
    for r in results {
        assert!(r["partialFingerprints"]["mcheck/v1"].is_string(), "{r}");
        assert!(
            r["message"]["text"]
                .as_str()
                .unwrap()
                .contains("mcheck replay"),
            "{r}"
        );
    }
    let race = results
        .iter()
        .find(|r| r["ruleId"] == "data_race")
        .expect("a data race result");
    assert!(race["locations"][0]["physicalLocation"]["region"]["startLine"].is_u64());
    assert!(
        race["relatedLocations"].as_array().unwrap().len() >= 2,
        "{race}"
    );
    // Sources under `source_root` are relative to it, as code scanning wants.
    let artifact = &race["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(artifact["uri"], "src/race/race_counter.c", "{race}");
    assert_eq!(artifact["uriBaseId"], "SRCROOT");
    assert!(sarif["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"]
        .as_str()
        .unwrap()
        .ends_with("/tracee-fixtures/"));

    // JUnit: one test case per target.
    let cases = junit_cases(&out1.join("junit.xml"));
    assert_eq!(cases.len(), t.len(), "{cases:?}");
    for (name, _) in &buggy {
        assert_eq!(cases[*name], "failure");
    }
    for (name, _) in &correct {
        assert_eq!(cases[*name], "success");
    }
    assert_eq!(cases["missing"], "error");

    // Same build against its own baseline: nothing new, exit 0.
    let mut text2 = String::from("jobs = 2\n");
    for (name, bin) in &buggy {
        text2 += &target(name, bin, "max_executions = 100");
    }
    for (name, bin) in &correct {
        text2 += &target(name, bin, "max_executions = 20");
    }
    let m2 = manifest(&dir, &text2);
    let base = out1.join("audit.json");
    let out2 = dir.join("out2");
    let (code, stderr, json2) = audit(&m2, &out2, &["--baseline", base.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let t2 = targets(&json2);
    for (name, _) in &buggy {
        assert_eq!(t2[*name]["status"], "known", "{name}");
        assert_eq!(fingerprints(&t2[*name]), fingerprints(&t[*name]), "{name}");
    }
    assert!(json2["fixed"].as_array().unwrap().is_empty());
    let sarif2 = assert_valid_sarif(&out2.join("results.sarif"));
    assert!(sarif2["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["baselineState"] == "unchanged"));

    // One more buggy target is exactly what is new; a target whose bug went away lists
    // its finding as fixed.
    let text3 = text2.replace(
        &format!("command = [\"{}\"]", fixture("abba_O0").display()),
        &format!("command = [\"{}\"]", fixture("mutex_normal_ok").display()),
    ) + &target("new_bug", "three_lock_cycle", "max_executions = 20");
    let m3 = manifest(&dir, &text3);
    let (code, stderr, json3) = audit(
        &m3,
        &dir.join("out3"),
        &["--baseline", base.to_str().unwrap()],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let t3 = targets(&json3);
    let with_new: Vec<&String> = t3
        .iter()
        .filter(|(_, t)| t["status"] == "findings")
        .map(|(n, _)| n)
        .collect();
    assert_eq!(with_new, ["new_bug"], "{stderr}");
    let fixed = json3["fixed"].as_array().unwrap();
    assert_eq!(fixed.len(), 1, "{fixed:?}");
    assert_eq!(fixed[0]["target"], "c_deadlock");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn fingerprints_survive_optimisation_and_seed() {
    let dir = temp_dir("fingerprint");
    let text = target(
        "suppressed",
        "abba_O0",
        "max_executions = 50\n[[target.suppress]]\nkind = \"deadlock\"\nreason = \"known ABBA\"",
    ) + &target("o0", "abba_O0", "max_executions = 50")
        + &target("o2", "abba_O2", "max_executions = 50")
        + &target(
            "o0_seed",
            "abba_O0",
            "max_executions = 50\nstrategy = \"random\"\nseed = 12345",
        );
    let extra_sarif = dir.join("extra.sarif");
    let (code, stderr, json) = audit(
        &manifest(&dir, &text),
        &dir.join("out"),
        &["--jobs", "2", "--sarif", extra_sarif.to_str().unwrap()],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let t = targets(&json);
    let o0 = fingerprints(&t["o0"]);
    assert_eq!(o0.len(), 1, "{stderr}");
    assert_eq!(fingerprints(&t["o2"]), o0);
    assert_eq!(fingerprints(&t["o0_seed"]), o0);
    // Different addresses, same fingerprint.
    let addr = |n: &str| t[n]["report"]["findings"][0]["locations"][0]["address"].clone();
    assert_ne!(addr("o0"), addr("o2"));
    // A suppressed finding is kept, marked, and does not count as new.
    assert_eq!(t["suppressed"]["status"], "known");
    assert_eq!(t["suppressed"]["findings"][0]["suppressed"], "known ABBA");
    let sarif = assert_valid_sarif(&dir.join("out").join("results.sarif"));
    let justified = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["suppressions"][0]["justification"] == "known ABBA")
        .count();
    assert_eq!(justified, 1);
    assert_eq!(
        assert_valid_sarif(&extra_sarif),
        sarif,
        "--sarif FILE is the same log"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn bad_manifests_are_one_error_with_the_line() {
    let dir = temp_dir("bad");
    let prog = fixture("sem_ok");
    let cases = [
        (
            format!(
                "[[target]]\nname = \"a\"\ncommand = [\"{}\"]\nmax_executons = 3\n",
                prog.display()
            ),
            4,
            "max_executons",
        ),
        (
            format!(
                "[[target]]\nname = \"a\"\ncommand = [\"{}\"]\n\nmax_executions = -3\n",
                prog.display()
            ),
            5,
            "-3",
        ),
        (
            "[[target]]\nname = \"a\"\ncommand = []\n".to_string(),
            3,
            "command",
        ),
        ("\n[[target]]\nname = \"a\"\n".to_string(), 2, "command"),
        (
            format!(
                "[[target]]\nname = \"a\"\ncommand = [\"{}\"]\ntime_limit = -5\n",
                prog.display()
            ),
            4,
            "time_limit",
        ),
        ("[[target]\nname = \"a\"\n".to_string(), 1, ""),
        (
            // A reduced dfs cannot be split into subtrees.
            format!(
                "[[target]]\nname = \"a\"\ncommand = [\"{}\"]\nstrategy = \"dfs\"\nsplit = true\n",
                prog.display()
            ),
            5,
            "--no-por",
        ),
    ];
    for (text, line, word) in &cases {
        let m = manifest(&dir, text);
        let (code, stderr) = run(
            &[
                "audit",
                m.to_str().unwrap(),
                "--out",
                dir.join("out").to_str().unwrap(),
            ],
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(2), "{text}: {stderr}");
        assert!(
            stderr.contains(&format!("audit.toml:{line}:")),
            "{text}: {stderr}"
        );
        assert!(stderr.contains(word), "{text}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one error: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (code, stderr) = run(
        &["audit", "/nonexistent/audit.toml"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "{stderr}");
    let (code, stderr) = run(
        &[
            "audit",
            manifest(&dir, &cases[0].0).to_str().unwrap(),
            "--out",
            dir.join("audit.toml").to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "--out is a file: {stderr}");
    let (code, stderr) = run(
        &[
            "audit",
            "--shard",
            "5/4",
            manifest(&dir, &cases[0].0).to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "{stderr}");
    // The same refusal from `mcheck --shard` itself, for the reduced trees.
    for strategy in ["dfs", "icb"] {
        let (code, stderr) = run(
            &[
                "--strategy",
                strategy,
                "--shard",
                "2/4",
                "--",
                prog.to_str().unwrap(),
            ],
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(2), "{strategy}: {stderr}");
        assert!(stderr.contains("--no-por"), "{strategy}: {stderr}");
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn four_shards_merge_to_the_unsharded_audit() {
    let dir = temp_dir("shards");
    // dfs searches that exhaust (one worker each, so their executions are fixed), and a
    // random search split by seed ranges over the shards.
    let exhaustive = [
        "race_counter",
        "once_ok",
        "sem_ok",
        "lost_wakeup",
        "three_lock_cycle",
    ];
    let mut text = String::new();
    for bin in exhaustive {
        text += &target(
            bin,
            bin,
            "strategy = \"dfs\"\njobs = 1\noptions = [\"--keep-going\"]\nmax_executions = 500",
        );
    }
    // One dfs and one icb search split into disjoint subtrees over the shards (both
    // exhaust: 215 and 48 executions).
    let split_trees = ["split_dfs", "split_icb"];
    text += &target(
        "split_dfs",
        "sem_ok",
        "strategy = \"dfs\"\njobs = 1\nmax_executions = 500\nsplit = true\noptions = [\"--no-por\"]",
    );
    text += &target(
        "split_icb",
        "once_ok",
        "strategy = \"icb\"\njobs = 2\nmax_executions = 500\nsplit = true\noptions = [\"--no-por\"]",
    );
    text += &target(
        "split_random",
        "three_lock_cycle",
        "strategy = \"random\"\nseed = 3\njobs = 1\nmax_executions = 18\nsplit = true\noptions = [\"--keep-going\"]",
    );
    let m = manifest(&dir, &text);
    let (code, stderr, whole) = audit(&m, &dir.join("whole"), &["--jobs", "2"]);
    assert_eq!(code, Some(1), "{stderr}");
    let mut shard_dirs = Vec::new();
    let mut owners: BTreeMap<String, usize> = BTreeMap::new();
    let mut parts: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for i in 1..=4 {
        let d = dir.join(format!("shard{i}"));
        let (code, stderr, json) = audit(&m, &d, &["--jobs", "2", "--shard", &format!("{i}/4")]);
        assert!(matches!(code, Some(0 | 1)), "{stderr}");
        let t = targets(&json);
        for name in t.keys() {
            *owners.entry(name.clone()).or_default() += 1;
        }
        for name in split_trees {
            let r = &t[name]["report"];
            // Each shard exhausts its own part of the tree.
            assert_eq!(r["complete"], true, "{name} shard {i}: {r}");
            assert_eq!(r["shard"]["index"], i, "{name}: {r}");
            parts
                .entry(name)
                .or_default()
                .push(r["executions"].as_u64().unwrap());
        }
        shard_dirs.push(d);
    }
    for (name, p) in &parts {
        assert!(
            p.iter().filter(|&&n| n > 0).count() >= 2,
            "{name} is not split: {p:?}"
        );
    }
    // Every exhaustive dfs search ran in exactly one shard: no schedule ran twice.
    for bin in exhaustive {
        assert_eq!(owners[bin], 1, "{bin}: {owners:?}");
    }
    assert_eq!(owners["split_random"], 4);
    let merged_dir = dir.join("merged");
    let mut args = vec!["merge", "--out", merged_dir.to_str().unwrap()];
    args.extend(shard_dirs.iter().map(|d| d.to_str().unwrap()));
    let (code, stderr) = run(&args, Duration::from_secs(30));
    assert_eq!(code, Some(1), "{stderr}");
    let merged: Value =
        serde_json::from_str(&fs::read_to_string(merged_dir.join("audit.json")).unwrap()).unwrap();
    let (w, mg) = (targets(&whole), targets(&merged));
    assert_eq!(w.keys().collect::<Vec<_>>(), mg.keys().collect::<Vec<_>>());
    for (name, t) in &w {
        assert_eq!(fingerprints(t), fingerprints(&mg[name]), "{name}");
        assert_eq!(
            t["report"]["executions"], mg[name]["report"]["executions"],
            "{name}"
        );
    }
    let total = |a: &BTreeMap<String, Value>| -> u64 {
        a.values()
            .map(|t| t["report"]["executions"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(total(&w), total(&mg));
    assert_eq!(mg["split_random"]["report"]["executions"], 18);
    // The shards of a split tree search ran exactly the unsharded schedules, none twice: the
    // same number of executions, and schedule digests (sums of per-schedule hashes) that
    // add up to the unsharded one; the merged search is exhausted.
    for name in split_trees {
        let (a, b) = (&w[name]["report"], &mg[name]["report"]);
        assert_eq!(a["complete"], true, "{name}: {a}");
        assert_eq!(b["complete"], true, "{name}: {b}");
        assert_eq!(b["coverage"]["exhausted"], true, "{name}: {b}");
        assert_eq!(a["schedule_digest"], b["schedule_digest"], "{name}");
        assert_eq!(
            parts[name].iter().sum::<u64>(),
            a["executions"].as_u64().unwrap(),
            "{name}"
        );
    }
    assert_valid_sarif(&merged_dir.join("results.sarif"));
    assert_eq!(junit_cases(&merged_dir.join("junit.xml")).len(), w.len());
    // A missing shard is a usage error.
    let (code, stderr) = run(
        &[
            "merge",
            "--out",
            dir.join("bad").to_str().unwrap(),
            shard_dirs[0].to_str().unwrap(),
            shard_dirs[1].to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("missing shard"), "{stderr}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn demo_manifest_with_relative_paths() {
    // `make demo` runs this manifest; its paths are relative to its own directory.
    let out = temp_dir("demo");
    let m = fixtures().join("audit-demo.toml");
    let rel = m
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .expect("fixtures inside the repository");
    let (code, stderr, json) = audit(rel, &out, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let t = targets(&json);
    assert_eq!(t["abba"]["status"], "findings", "{stderr}");
    assert_eq!(t["race_counter"]["status"], "findings", "{stderr}");
    for ok in ["prodcons", "rust_mutex", "exit_status"] {
        assert_eq!(t[ok]["status"], "clean", "{ok}: {stderr}");
    }
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn global_budget_skips_and_target_errors_stay_local() {
    let dir = temp_dir("budget");
    fs::write(dir.join("present.txt"), "x").unwrap();
    let text = String::from("time_limit = 1.5\njobs = 1\n")
        + &target("no_input", "sem_ok", "inputs = [\"absent.txt\"]")
        + &target("no_dir", "sem_ok", "dir = \"absent\"")
        + &target(
            "with_input",
            "sem_ok",
            "inputs = [\"present.txt\"]\nmax_executions = 3",
        )
        + &target(
            "long",
            "cpp_prodcons_ok",
            "max_executions = 1000000\njobs = 1",
        )
        + &target("late", "sem_ok", "max_executions = 5");
    let m = manifest(&dir, &text);
    let (code, stderr, json) = audit(&m, &dir.join("out"), &[]);
    assert_eq!(code, Some(1), "target errors fail the audit: {stderr}");
    let t = targets(&json);
    // `long` runs until the budget is spent (or finds it spent, on a loaded machine), so
    // `late` after it never starts.
    assert!(
        t["long"]["status"] == "clean" || t["long"]["status"] == "skipped",
        "{stderr}"
    );
    assert_eq!(t["late"]["status"], "skipped", "{stderr}");
    assert_eq!(t["no_input"]["status"], "error");
    assert!(t["no_input"]["error"]
        .as_str()
        .unwrap()
        .contains("absent.txt"));
    assert_eq!(t["no_dir"]["status"], "error");
    assert_eq!(t["with_input"]["status"], "clean", "{stderr}");
    let cases = junit_cases(&dir.join("out").join("junit.xml"));
    assert_eq!(cases["late"], "skipped");
    assert_eq!(cases["no_input"], "error");
    let _ = fs::remove_dir_all(&dir);
}
