//! The `mcheck` command: parse options, validate the program, run the search, report.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;

use mcheck::binary::{check_program, resolve_program};
use mcheck::cli::{
    shell_quote, Cli, StrategyName, EXIT_CLEAN, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_USAGE,
};
use mcheck::explore::{RandomScheduler, Scheduler};
use mcheck::report::{human, json, Finding};
use mcheck::run::search::search;
use mcheck::run::{ExecutionConfig, SearchConfig};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE as u8 } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(Failure::Usage(msg)) => {
            eprintln!("mcheck: {msg}");
            ExitCode::from(EXIT_USAGE as u8)
        }
        Err(Failure::Internal(e)) => {
            eprintln!("mcheck: internal error: {e:#}");
            ExitCode::from(EXIT_INTERNAL as u8)
        }
    }
}

enum Failure {
    Usage(String),
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Internal(e)
    }
}

fn run(cli: Cli) -> Result<i32, Failure> {
    let program = resolve_program(&cli.command[0]).map_err(|e| Failure::Usage(e.to_string()))?;
    check_program(&program).map_err(|e| Failure::Usage(e.to_string()))?;
    let cfg = SearchConfig {
        execution: ExecutionConfig {
            program: program.clone(),
            args: cli.command[1..].to_vec(),
            quiet_program: cli.quiet_program,
            expect_exit: cli.expect_exit,
            execution_timeout: Duration::from_secs_f64(cli.execution_timeout),
            max_steps: Some(cli.max_steps),
        },
        max_executions: cli.max_executions,
        time_limit: cli.time_limit.map(Duration::from_secs_f64),
        keep_going: cli.keep_going,
    };
    let mut sched: Box<dyn Scheduler> = match cli.strategy {
        StrategyName::Random => Box::new(RandomScheduler::new(cli.seed)),
    };
    let bar = progress_bar(cli.max_executions);
    let mut on_progress = |done: u64, found: usize| {
        if let Some(b) = &bar {
            b.set_position(done);
            b.set_message(format!("{found} finding(s)"));
        }
    };
    let result = search(&cfg, sched.as_mut(), &mut on_progress).context("running the search")?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    for f in &result.findings {
        eprint!("{}", human::format_finding(f, &reproduce_command(&cli, f)));
    }
    let program_text = cli.command[0].to_string_lossy().into_owned();
    let verdict = if result.findings.is_empty() {
        "no bug found".to_string()
    } else {
        format!("{} distinct finding(s)", result.findings.len())
    };
    eprintln!(
        "mcheck: {verdict} in {} execution(s) of {program_text} ({} strategy, seed {}, {:.1} s; {}).",
        result.executions,
        sched.name(),
        cli.seed,
        result.elapsed.as_secs_f64(),
        result.stopped_because
    );
    if let Some(path) = &cli.json {
        let report = json::JsonReport {
            version: json::REPORT_VERSION,
            mcheck_version: env!("CARGO_PKG_VERSION"),
            program: program.to_string_lossy().into_owned(),
            args: cli.command[1..]
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            strategy: sched.name(),
            seed: cli.seed,
            executions: result.executions,
            complete: result.complete,
            stopped_because: &result.stopped_because,
            elapsed_seconds: result.elapsed.as_secs_f64(),
            findings: &result.findings,
        };
        json::write(path, &report)
            .with_context(|| format!("writing the JSON report to {}", path.display()))?;
    }
    Ok(if result.findings.is_empty() {
        EXIT_CLEAN
    } else {
        EXIT_FINDINGS
    })
}

/// The command line that replays finding `f` as the first execution.
fn reproduce_command(cli: &Cli, f: &Finding) -> String {
    let mut parts = vec![
        "mcheck".to_string(),
        "--strategy".into(),
        "random".into(),
        "--seed".into(),
        f.seed.to_string(),
        "--max-executions".into(),
        "1".into(),
    ];
    if cli.expect_exit != 0 {
        parts.push(format!("--expect-exit={}", cli.expect_exit));
    }
    if cli.execution_timeout != 10.0 {
        parts.push(format!("--execution-timeout={}", cli.execution_timeout));
    }
    parts.push("--".into());
    parts.extend(
        cli.command
            .iter()
            .map(|a| shell_quote(&a.to_string_lossy())),
    );
    parts.join(" ")
}

fn progress_bar(total: u64) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "mcheck {bar:30} {pos}/{len} executions, {msg} [{elapsed}]",
    ) {
        bar.set_style(style);
    }
    Some(bar)
}
