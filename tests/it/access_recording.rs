//! Memory accesses recorded inside the tracee: patched sites and the breakpoint path give
//! the same race reports, threads stopped inside generated code are put back at their
//! original instruction, and tracing cost never becomes a `timeout`.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::{args, fixture, mcheck_with_env, temp_path};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

/// Runs the default command with `extra` options on `program`, with `MCHECK_PATCH` set to
/// `patch`; returns the exit status and the JSON report.
fn check(program: &str, prog_args: &[&str], extra: &[&str], patch: &str) -> (Option<i32>, Value) {
    let out = temp_path("access-out");
    let mut a = args(&[
        "--quiet-program",
        "--jobs",
        "1",
        "--out",
        &out.display().to_string(),
    ]);
    a.extend(args(extra));
    a.push("--".into());
    a.push(fixture(program).display().to_string());
    a.extend(args(prog_args));
    let r = mcheck_with_env(&a, &[("MCHECK_PATCH", patch)], true, LIMIT);
    let _ = std::fs::remove_dir_all(&out);
    let json = r
        .json
        .unwrap_or_else(|| panic!("{}: no report: {}", r.command, r.stderr));
    (r.code, json)
}

/// The findings of a report as (kind, sorted file:line locations).
fn verdicts(report: &Value) -> BTreeSet<(String, Vec<String>)> {
    let list = report["findings"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|f| {
            let mut locs: Vec<String> = f["locations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| format!("{}:{}", l["file"], l["line"]))
                .collect();
            locs.sort();
            (f["kind"].as_str().unwrap_or("").to_string(), locs)
        })
        .collect()
}

#[test]
fn patched_sites_and_breakpoints_report_the_same_races() {
    let programs = [
        "race_counter",
        "race_heap_int",
        "race_unlocked_publish",
        "race_size_peek",
        "race_mutex_handoff_ok",
        "race_cpp_atomic_publish_ok",
        "race_rust_mutex_mpsc_ok",
        "race_fn_pointer",
        "race_virtual_throw_ok",
        "race_memcpy",
        "race_strlen",
    ];
    let opts = [
        "--strategy",
        "dfs",
        "--keep-going",
        "--max-executions",
        "40",
    ];
    for p in programs {
        let (code_on, on) = check(p, &[], &opts, "on");
        let (code_off, off) = check(p, &[], &opts, "off");
        let rec_on = &on["access_recording"];
        let rec_off = &off["access_recording"];
        assert!(
            rec_on["sites_patched"].as_u64().unwrap() > 0,
            "{p}: {rec_on}"
        );
        assert_eq!(rec_off["sites_patched"], 0, "{p}: {rec_off}");
        assert!(
            rec_off["sites_on_breakpoints"].as_u64().unwrap() > 0,
            "{p}: {rec_off}"
        );
        assert_eq!(code_on, code_off, "{p}");
        assert_eq!(verdicts(&on), verdicts(&off), "{p}");
        assert_eq!(on["executions"], off["executions"], "{p}");
    }
}

#[test]
fn signals_in_generated_code_are_delivered_at_the_original_instruction() {
    for p in ["patch_fault_skip_ok", "patch_signal_storm_ok"] {
        let (code, report) = check(p, &[], &["--max-executions", "2"], "on");
        assert_eq!(code, Some(0), "{p}: {report}");
        let moved = report["access_recording"]["moved_out_of_generated_code"]
            .as_u64()
            .unwrap();
        assert!(
            moved > 0,
            "{p}: no signal landed in generated code: {report}"
        );
    }
}

#[test]
fn tracing_cost_is_not_a_timeout() {
    // On breakpoints every access costs two ptrace stops: 82,000 accesses take seconds of
    // wall time (3 s on an idle machine) while the program itself runs for milliseconds.
    let (code, report) = check(
        "slow_under_tracing_ok",
        &["2"],
        &["--execution-timeout", "1", "--max-executions", "1"],
        "off",
    );
    assert_eq!(code, Some(0), "{report}");
    assert!(report["access_recording"]["accesses"].as_u64().unwrap() > 80_000);
    // A real spin is still one.
    let (code, report) = check(
        "plain_spin_timeout",
        &[],
        &["--execution-timeout", "1"],
        "on",
    );
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["findings"][0]["kind"], "timeout");
}
