//! The `mcheck` command: parse options, dispatch to a search or a replay, map the outcome to
//! the exit status (0 clean, 1 findings, 2 bad usage or input, 3 internal failure).

use std::process::ExitCode;

use clap::Parser;

use mcheck::cli::{Cli, Command, EXIT_INTERNAL, EXIT_USAGE};
use mcheck::commands::{audit, check::check, replay::replay, test::test, Failure};

fn main() -> ExitCode {
    // Before mcheck installs handlers of its own: the programs start with what it was given.
    mcheck::tracee::signals::note_at_start();
    // Before any thread is pinned: the programs are shown the CPUs mcheck was given.
    mcheck::tracee::cpu::note_at_start();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE as u8 } else { 0 });
        }
    };
    let result = match &cli.command {
        Some(Command::Replay(args)) => replay(args),
        Some(Command::Audit(args)) => audit::audit(args),
        Some(Command::Merge(args)) => audit::merge(args),
        Some(Command::Test(args)) => test(args),
        None => check(&cli.check),
    };
    match result {
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
