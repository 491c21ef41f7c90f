//! `cargo mcheck`: builds a crate's test targets with `cargo test --no-run`, runs
//! `mcheck test` on each test executable (every test its own search), and combines their
//! outputs into one test.json, junit.xml, results.sarif and summary.txt (docs/test-suites.md).
//! On PATH as `cargo-mcheck`, cargo runs it for `cargo mcheck`.

mod args;
mod artifacts;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::Context;

use artifacts::TestExecutable;
use mcheck::audit::record::{AuditRecord, TargetRecord, TargetStatus};
use mcheck::audit::runner::dir_name;
use mcheck::audit::suite::combine;
use mcheck::cli::{EXIT_CLEAN, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_USAGE};
use mcheck::commands::Failure;

fn main() -> ExitCode {
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    // `cargo mcheck ARGS` runs `cargo-mcheck mcheck ARGS`.
    if argv.first().map(String::as_str) == Some("mcheck") {
        argv.remove(0);
    }
    let code = match args::parse(&argv) {
        Err(e) => {
            eprintln!("cargo-mcheck: {e} (see `cargo mcheck --help`)");
            EXIT_USAGE
        }
        Ok(a) if a.help => {
            print!("{}", args::HELP);
            EXIT_CLEAN
        }
        Ok(a) if a.version => {
            println!("cargo-mcheck {}", env!("CARGO_PKG_VERSION"));
            EXIT_CLEAN
        }
        Ok(a) => match run(&a) {
            Ok(code) => code,
            Err(Failure::Usage(m)) => {
                eprintln!("cargo-mcheck: {m}");
                EXIT_USAGE
            }
            Err(Failure::Internal(e)) => {
                eprintln!("cargo-mcheck: internal error: {e:#}");
                EXIT_INTERNAL
            }
        },
    };
    ExitCode::from(code as u8)
}

/// The mcheck executable: `$MCHECK`, else the `mcheck` beside this program, else `mcheck`
/// on PATH.
fn mcheck_executable() -> PathBuf {
    if let Some(m) = std::env::var_os("MCHECK") {
        return PathBuf::from(m);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("mcheck")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("mcheck"))
}

/// Builds, checks every test executable, writes the combined outputs; the exit status.
fn run(args: &args::CargoMcheckArgs) -> Result<i32, Failure> {
    let start = Instant::now();
    let usage = |e: anyhow::Error| Failure::Usage(format!("{e:#}"));
    let offline = args
        .cargo
        .iter()
        .any(|a| a == "--offline" || a == "--frozen");
    let meta = artifacts::metadata(args.manifest_path.as_deref(), offline).map_err(usage)?;
    let executables = artifacts::build(&args.cargo, &meta).map_err(usage)?;
    if executables.is_empty() {
        eprintln!("cargo-mcheck: no test targets were built");
        return Ok(EXIT_CLEAN);
    }
    let mcheck = mcheck_executable();
    if args.list {
        for exe in &executables {
            println!("{}:", exe.id);
            let code = mcheck_test(&mcheck, args, exe, None)?;
            if code != EXIT_CLEAN {
                return Ok(code);
            }
        }
        return Ok(EXIT_CLEAN);
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let out = cwd.join(
        args.out
            .clone()
            .unwrap_or_else(|| meta.target_directory.join("mcheck")),
    );
    if out.exists() && !out.is_dir() {
        return Err(Failure::Usage(format!(
            "--out {}: exists and is not a directory",
            out.display()
        )));
    }
    mcheck::tracee::interrupt::install().context("installing the signal handlers")?;
    let mut records = Vec::new();
    let mut worst = EXIT_CLEAN;
    for exe in &executables {
        if mcheck::tracee::interrupt::received().is_some() {
            break;
        }
        let dir = out.join("binaries").join(dir_name(&exe.id));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the output directory {}", dir.display()))?;
        eprintln!("cargo-mcheck: checking {} ({})", exe.id, exe.path.display());
        let code = mcheck_test(&mcheck, args, exe, Some(&dir))?;
        match AuditRecord::read(&dir.join("test.json")) {
            Ok(r) if code == EXIT_CLEAN || code == EXIT_FINDINGS => {
                eprintln!("cargo-mcheck: {}: {}", exe.id, verdicts(&r));
                records.push(r);
            }
            _ => {
                let log = dir.join("mcheck-test.txt");
                let why = last_message(&log);
                eprintln!(
                    "cargo-mcheck: {}: not checked: {why} (see {})",
                    exe.id,
                    log.display()
                );
                records.push(error_record(exe, code, why));
                worst = worst.max(if code == EXIT_INTERNAL {
                    EXIT_INTERNAL
                } else {
                    EXIT_USAGE
                });
            }
        }
    }
    let manifest = args
        .manifest_path
        .clone()
        .unwrap_or_else(|| meta.workspace_root.join("Cargo.toml").display().to_string());
    let record = combine(manifest, records, start.elapsed());
    let text = mcheck::audit::write_outputs(&record, &out)?;
    eprint!("\n{text}");
    eprintln!(
        "cargo-mcheck: results written to {} (test.json, results.sarif, junit.xml, summary.txt; each binary's in binaries/)",
        out.display()
    );
    Ok(if worst != EXIT_CLEAN {
        worst
    } else if record.failed() {
        EXIT_FINDINGS
    } else {
        EXIT_CLEAN
    })
}

/// Runs `mcheck test` on one executable, its outputs into `dir` (None: `--list`, output on
/// the terminal); returns its exit status.
fn mcheck_test(
    mcheck: &Path,
    args: &args::CargoMcheckArgs,
    exe: &TestExecutable,
    dir: Option<&Path>,
) -> Result<i32, Failure> {
    let mut cmd = Command::new(mcheck);
    cmd.arg("test").args(&args.mcheck);
    if !args.classname {
        cmd.arg(format!("--classname={}", exe.id));
    }
    if let Some(dir) = dir {
        cmd.arg("--out").arg(dir);
        let log = dir.join("mcheck-test.txt");
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stderr(file);
    }
    // As under `cargo test`: in the package's directory, with its CARGO_* variables.
    cmd.arg("--")
        .arg(&exe.path)
        .args(&args.filters)
        .current_dir(&exe.package_dir)
        .env("CARGO_MANIFEST_DIR", &exe.package_dir)
        .env("CARGO_PKG_NAME", &exe.package.0)
        .env("CARGO_PKG_VERSION", &exe.package.1)
        .stdin(Stdio::null());
    let status = cmd.status().map_err(|e| {
        Failure::Usage(format!(
            "cannot run {}: {e} (put mcheck on PATH or set MCHECK)",
            mcheck.display()
        ))
    })?;
    Ok(status.code().unwrap_or(EXIT_INTERNAL))
}

/// One line of verdict counts of a binary's record.
fn verdicts(r: &AuditRecord) -> String {
    let count = |s: TargetStatus| r.targets.iter().filter(|t| t.status == s).count();
    format!(
        "{} test(s): {} clean, {} with findings, {} failing without mcheck, {} skipped, {} error(s)",
        r.targets.len(),
        count(TargetStatus::Clean) + count(TargetStatus::Known),
        count(TargetStatus::Findings),
        count(TargetStatus::FailsNatively),
        count(TargetStatus::Skipped),
        count(TargetStatus::Error)
    )
}

/// The last `mcheck:` line of a log (its error), else its last line.
fn last_message(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| l.starts_with("mcheck:"))
        .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
        .map_or_else(
            || "no message".to_string(),
            |l| l.trim_start_matches("mcheck: ").to_string(),
        )
}

/// A record of one error test case for an executable `mcheck test` could not check.
fn error_record(exe: &TestExecutable, code: i32, why: String) -> AuditRecord {
    let mut r = combine(String::new(), Vec::new(), std::time::Duration::ZERO);
    r.targets.push(TargetRecord {
        name: exe.id.clone(),
        classname: Some(exe.id.clone()),
        position: 0,
        command: vec![exe.path.display().to_string()],
        strategy: String::new(),
        share: None,
        status: TargetStatus::Error,
        error: Some(format!("mcheck test exited with status {code}: {why}")),
        exit_code: Some(code),
        elapsed_seconds: 0.0,
        report: None,
        findings: Vec::new(),
        native: None,
    });
    r
}
