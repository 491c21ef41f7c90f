//! Executions cut at `--max-steps` are said, never hidden behind "no bug found": the
//! summary and the JSON report count them, and a search none of whose executions ran to
//! the program's end exits with status 4 (inconclusive), not 0.

use crate::common;

use std::time::Duration;

use crate::common::{args, fixture, mcheck};

const LIMIT: Duration = Duration::from_secs(120);

/// `mcheck --quiet-program OPTIONS -- step_limit_cut` with a JSON report.
fn search(options: &[&str]) -> common::Run {
    let mut a = args(&["--quiet-program", "--max-executions", "5"]);
    a.extend(args(options));
    a.push("--".into());
    a.push(fixture("step_limit_cut").display().to_string());
    mcheck(&a, true, LIMIT)
}

#[test]
fn executions_cut_at_the_step_limit_are_counted_and_the_search_is_inconclusive() {
    // About 90 decisions per execution: every execution is cut at 10.
    let run = search(&["--max-steps", "10"]);
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    let j = run.json.expect("a JSON report");
    assert!(j["findings"].as_array().unwrap().is_empty(), "{j}");
    let executions = j["executions"].as_u64().unwrap();
    assert!(executions >= 1, "{j}");
    assert_eq!(j["max_steps"], 10, "{j}");
    assert_eq!(j["cut_at_max_steps"].as_u64(), Some(executions), "{j}");
    assert_eq!(j["ran_to_end"], 0, "{j}");
    assert_eq!(j["complete"], false, "{j}");
    assert_eq!(j["coverage"]["exhausted"], false, "{j}");
    let statement = j["coverage"]["statement"].as_str().unwrap();
    let verb = if executions == 1 { "was" } else { "were" };
    assert!(
        statement.contains(&format!(
            "no bug found in {executions} execution(s); {executions} of them {verb} cut at --max-steps 10 before the program ended (raise --max-steps)"
        )),
        "{statement}"
    );
    assert!(!statement.contains("exhausted:"), "{statement}");
    assert!(!statement.ends_with("no bug found"), "{statement}");
    assert!(run.stderr.contains(statement), "{}", run.stderr);
    assert!(
        run.stderr.contains("no execution ran to the program's end"),
        "{}",
        run.stderr
    );
}

#[test]
fn with_room_to_end_the_same_program_is_clean() {
    // The control: the default step limit lets every execution end.
    let run = search(&[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let j = run.json.expect("a JSON report");
    assert_eq!(j["cut_at_max_steps"], 0, "{j}");
    assert_eq!(j["ran_to_end"], j["executions"], "{j}");
    let statement = j["coverage"]["statement"].as_str().unwrap();
    assert!(!statement.contains("--max-steps"), "{statement}");
}
