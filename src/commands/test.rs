//! `mcheck test [OPTIONS] -- TEST_BINARY [FILTER...]`: check each test of a test binary as
//! its own search (docs/test-suites.md). A missing or unusable binary, a listing that fails
//! or a bad option is a usage error (exit status 2); otherwise the outputs are written and
//! the exit status is 1 when a test has a new finding, fails without mcheck or could not be
//! checked, 0 when not.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;

use super::Failure;
use crate::audit::framework::Framework;
use crate::audit::manifest::{check_search_options, OptionsError, Target, DEFAULT_MAX_EXECUTIONS};
use crate::audit::runner::Outcome;
use crate::audit::shard::Shard;
use crate::audit::suite::{self, Selection, SuitePlan};
use crate::binary::{check_program, is_script, resolve_program};
use crate::cli::{FrameworkName, SuiteArgs, TestArgs, EXIT_CLEAN};

/// Runs `mcheck test`; returns the exit status.
pub fn test(args: &TestArgs) -> Result<i32, Failure> {
    let (binary, filters) = args
        .command
        .split_first()
        .ok_or_else(|| Failure::Usage("no test binary given".into()))?;
    let program = resolve_program(binary).map_err(|e| Failure::Usage(e.to_string()))?;
    check_program(&program).map_err(|e| Failure::Usage(e.to_string()))?;
    if is_script(&program) {
        return Err(Failure::Usage(format!(
            "{}: a script, not a test binary: mcheck test lists and runs the tests of a compiled Rust or GoogleTest binary (`mcheck -- SCRIPT` checks a script and what it runs)",
            program.display()
        )));
    }
    let program = program.canonicalize().unwrap_or(program);
    let filters = filters
        .iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    let plan = plan(&args.suite, program, filters)?;
    let selection = suite::select(&plan).map_err(|e| Failure::Usage(format!("{e:#}")))?;
    if args.suite.list {
        print_list(&selection);
        return Ok(EXIT_CLEAN);
    }
    // SIGINT and SIGTERM end the run cleanly, with its outputs.
    crate::tracee::interrupt::install().context("installing the signal handlers")?;
    let total = selection
        .tests
        .iter()
        .filter(|(_, t)| !t.ignored || plan.include_ignored)
        .count();
    let finished = AtomicUsize::new(0);
    let record = suite::run(&plan, &selection, &|name, outcome| {
        let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
        eprintln!(
            "mcheck: [{n}/{total}] {name}: {} ({:.1} s)",
            verdict(outcome),
            outcome.elapsed.as_secs_f64()
        );
    })?;
    if selection.tests.is_empty() {
        eprintln!(
            "mcheck: no test of {} matches the filters ({} listed)",
            plan.binary.display(),
            selection.listed
        );
    }
    super::audit::finish(&record, &plan.out)
}

/// The plan of a run of `binary`'s tests selected by `filters`.
pub fn plan(args: &SuiteArgs, binary: PathBuf, filters: Vec<String>) -> Result<SuitePlan, Failure> {
    if args.out.exists() && !args.out.is_dir() {
        return Err(Failure::Usage(format!(
            "--out {}: exists and is not a directory",
            args.out.display()
        )));
    }
    check_search_options(&args.mcheck_args, &crate::cli::parse_search_options).map_err(|e| {
        Failure::Usage(match e {
            OptionsError::Reserved(flag) => format!(
                "--mcheck-arg {flag}: set by mcheck test itself; use its own option instead"
            ),
            OptionsError::DoubleDash => "--mcheck-arg may not be `--`".into(),
            OptionsError::Bad(first) => format!("bad --mcheck-arg: {first}"),
        })
    })?;
    let baseline = args
        .baseline
        .as_deref()
        .map(super::audit::read_baseline)
        .transpose()?;
    let dir = std::env::current_dir().context("reading the current directory")?;
    let template = Target {
        name: String::new(),
        command: Vec::new(),
        env: Default::default(),
        dir,
        inputs: Vec::new(),
        max_executions: args.max_executions.unwrap_or(DEFAULT_MAX_EXECUTIONS),
        time_limit: args.time_limit,
        strategy: args.strategy,
        seed: args.seed,
        jobs: None,
        options: suite_options(&args.mcheck_args),
        expect_exit: 0,
        split: false,
        suppress: Vec::new(),
    };
    Ok(SuitePlan {
        binary,
        framework: match args.framework {
            FrameworkName::Auto => None,
            FrameworkName::Libtest => Some(Framework::Libtest),
            FrameworkName::Gtest => Some(Framework::GoogleTest),
            FrameworkName::Single => Some(Framework::Single),
        },
        classname: args.classname.clone(),
        filters,
        skip: args.skip.clone(),
        exact: args.exact,
        include_ignored: args.include_ignored,
        template,
        out: args.out.clone(),
        jobs: args.jobs,
        shard: args.shard.unwrap_or(Shard::WHOLE),
        total_time_limit: args.total_time_limit,
        baseline,
        mcheck: std::env::current_exe().context("finding the mcheck executable")?,
        native_first: !args.no_native_run,
    })
}

/// The options of each test's search: `--no-output-check` first (a test passes or fails;
/// its harness prints the time it took, which differs between schedules where a timed
/// wait times out and those where it is woken), then the user's, where `--output-check`
/// turns the comparison back on.
fn suite_options(mcheck_args: &[String]) -> Vec<String> {
    let mut options = vec!["--no-output-check".to_string()];
    options.extend(mcheck_args.iter().cloned());
    options
}

/// A test's outcome in a few words, for the line printed as it ends.
fn verdict(o: &Outcome) -> String {
    if let Some(n) = o.native.as_ref().filter(|n| !n.passed) {
        return format!(
            "fails without any interleaving (without mcheck it {})",
            n.status
        );
    }
    if o.skipped || o.error.is_some() {
        let what = if o.skipped { "skipped" } else { "error" };
        return format!("{what}: {}", o.error.as_deref().unwrap_or(""));
    }
    let findings = o
        .report
        .as_ref()
        .and_then(|r| r.get("findings"))
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len);
    if findings == 0 {
        "clean".to_string()
    } else {
        format!("{findings} finding(s)")
    }
}

/// `--list`: the selected tests on stdout, one per line.
fn print_list(selection: &Selection) {
    for (_, t) in &selection.tests {
        if t.ignored {
            println!("{} (ignored)", t.name);
        } else {
            println!("{}", t.name);
        }
    }
    eprintln!(
        "mcheck: {} framework, {} of {} test(s) selected",
        selection.framework.name(),
        selection.tests.len(),
        selection.listed
    );
}
