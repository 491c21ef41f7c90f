//! One run of a target without mcheck, before its search (`mcheck test`): a test that fails
//! this way fails without any interleaving mcheck chose, so its failure is the test's own,
//! not a concurrency bug, and it is reported as such instead of being searched. The run
//! gets the target's environment, directory and time limit; its stdout and stderr go to a
//! log file, whose end the record keeps.

use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::manifest::Target;
use super::record::NativeRun;

/// Longest a run without mcheck may take when the target has no time limit.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(300);

/// Most bytes of the output kept in the record.
const KEPT_OUTPUT: usize = 4000;

/// Runs `target`'s command once without mcheck, its output into `log`, for at most `limit`
/// (default [`DEFAULT_LIMIT`]).
pub fn run(target: &Target, log: &Path, limit: Option<Duration>) -> NativeRun {
    let start = Instant::now();
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    let done = |passed: bool, status: String| NativeRun {
        passed,
        status,
        cut_short: false,
        elapsed_seconds: start.elapsed().as_secs_f64(),
        output: tail(log),
    };
    let (out, err) = match File::create(log).and_then(|f| Ok((f.try_clone()?, f))) {
        Ok(files) => files,
        Err(e) => return done(false, format!("cannot create {}: {e}", log.display())),
    };
    let Some((program, args)) = target.command.split_first() else {
        return done(false, "no command".into());
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(&target.env)
        .current_dir(&target.dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Its own process group, so that a timeout ends the processes it started too.
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return done(false, format!("cannot run {program}: {e}")),
    };
    let group = i32::try_from(child.id()).ok().map(Pid::from_raw);
    let kill = |child: &mut std::process::Child| {
        if let Some(g) = group {
            let _ = killpg(g, Signal::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                kill(&mut child);
                return done(false, format!("waiting for it failed: {e}"));
            }
        }
        if let Some(sig) = crate::tracee::interrupt::received() {
            kill(&mut child);
            return NativeRun {
                cut_short: true,
                ..done(false, format!("was interrupted by {sig:?}"))
            };
        }
        if start.elapsed() > limit {
            kill(&mut child);
            return NativeRun {
                cut_short: true,
                ..done(
                    false,
                    format!("did not end within {:.0} s", limit.as_secs_f64()),
                )
            };
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Children it left behind do not outlive it.
    if let Some(g) = group {
        let _ = killpg(g, Signal::SIGKILL);
    }
    match (status.code(), status.signal()) {
        (Some(code), _) if code == target.expect_exit => {
            done(true, format!("exited with status {code}"))
        }
        (Some(code), _) => done(false, format!("exited with status {code}")),
        (None, Some(sig)) => done(
            false,
            format!(
                "was killed by {}",
                Signal::try_from(sig)
                    .map_or_else(|_| format!("signal {sig}"), |s| format!("{s:?}"))
            ),
        ),
        (None, None) => done(false, format!("ended with {status}")),
    }
}

/// The last [`KEPT_OUTPUT`] bytes of `log`, from a line start.
fn tail(log: &Path) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    if text.len() <= KEPT_OUTPUT {
        return text.into_owned();
    }
    let mut cut = text.len() - KEPT_OUTPUT;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let rest = &text[cut..];
    rest.find('\n').map_or(rest, |i| &rest[i + 1..]).to_string()
}
