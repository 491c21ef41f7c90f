//! Starting an execution: from a copy of a fork snapshot, or by launching the program under
//! ptrace; the executor's state for either, and the program's environment.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use anyhow::{Context, Result};
use nix::sys::signal::{kill, Signal};

use super::stops::reap_all;
use super::{ExecutionOutcome, Session};
use crate::explore::Scheduler;
use crate::model::ThreadId;
use crate::report::FindingKind;
use crate::run::config::ExecutionConfig;
use crate::run::process::Process;
use crate::run::snapshots::snapshot::{self, Restored};
use crate::run::worker_state::{ShownOutput, WorkerState};
use crate::run::world::capture::{failure_message, Echo, OutputCapture, OutputStarts};
use crate::run::world::file_journal::{NotFaithful, ORIGIN};
use crate::run::world::program_stdio::{self, StreamKind};
use crate::tracee::spawn::{spawn_traced, StdioSetup};
use crate::tracee::{procfs, threads};

/// Runs one execution of the program under `sched`: from a copy of the worker's fork
/// snapshot when there is one for this configuration, else from exec.
pub fn run_execution(
    cfg: &ExecutionConfig,
    sched: &mut dyn Scheduler,
    worker: &mut WorkerState,
) -> Result<ExecutionOutcome> {
    start_captures(cfg, worker)?;
    let shown = worker.shows_output();
    let key = cfg.snapshot_key();
    // A tree search replays a known prefix: start from the deepest branch snapshot on it,
    // else from the startup snapshot, else from exec.
    let planned: Option<Vec<ThreadId>> = sched.tree().map(|t| t.planned_prefix().to_vec());
    let mut restored = None;
    if let Some(copy) = worker.debugger.start.take() {
        // A debugger going back: from a copy of its snapshot.
        restored = Some(copy);
    } else if cfg.snapshots.snapshots {
        if let Some(planned) = &planned {
            let atomics = worker.atomic_addresses.len();
            let racy = worker.racy_points_in_use(cfg.instrument.preempt_on_races);
            worker
                .snapshots
                .prune_branches(&key, planned, atomics, racy);
            restored = worker
                .snapshots
                .fork_branch(&key, planned, cfg.snapshots.state_cache)?;
        }
        if restored.is_none() {
            restored = worker
                .snapshots
                .fork_startup(&key, cfg.snapshots.state_cache)?;
        }
    }
    let restored = put_files_back(worker, restored, &key);
    // A copy starts its output from what the program had written at the snapshot.
    let starts = restored
        .as_ref()
        .map_or_else(OutputStarts::default, |r| r.state.output.clone());
    if let Some(c) = &worker.stderr_capture {
        c.begin_execution(shown, starts.stderr);
    }
    if let Some(c) = &worker.stdout_capture {
        c.begin_execution(shown, starts.stdout);
    }
    let branch_key = (cfg.snapshots.snapshots && planned.is_some()).then(|| key.clone());
    // The deepest branch snapshot on this execution's path (the one it starts from, if any).
    let branch_depth = planned
        .as_ref()
        .map_or(0, |p| worker.snapshots.deepest_branch_on(&key, p));
    let result = match restored {
        Some(r) => {
            let mut exec = Session::restored(cfg, worker, r);
            let record = branch_key.is_some() || exec.worker.debugger.snapshots;
            exec.snaps.may_branch(branch_key, branch_depth);
            exec.snaps.record_points(record);
            let prefix = exec.snaps.skipped();
            if exec.worker.quiet_rerun && exec.worker.stdout_capture.is_none() {
                silence_stdout(&exec);
            }
            let result = match exec.instrumenting(|i, c| i.prepare_copy(c)) {
                Ok(()) => super::drive::drive(&mut exec, sched, Some(prefix)),
                Err(e) => Err(e),
            };
            if let Ok(out) = &result {
                exec.debug().debug_end(out);
            }
            exec.kill_all();
            result
        }
        None => {
            let process = launch(cfg, worker)?;
            let mut exec = Session::fresh(cfg, worker, process);
            exec.snaps.may_branch(branch_key, branch_depth);
            if cfg.snapshots.snapshots && exec.worker.snapshots.wanted(&key) {
                let fds = procfs::descriptors(exec.p.pid);
                let at_main = exec.worker.snapshots.threadless(&key);
                exec.snaps.take_startup(key.clone(), fds, at_main);
            }
            if exec.worker.debugger.snapshots {
                exec.worker.debugger.inherited = procfs::descriptors(exec.p.pid);
            }
            // Points are kept only for a snapshot this execution may take.
            let record = exec.snaps.branches()
                || exec.snaps.wants_startup()
                || exec.worker.debugger.snapshots;
            exec.snaps.record_points(record);
            let result = super::drive::drive(&mut exec, sched, None);
            if let Ok(out) = &result {
                exec.debug().debug_end(out);
            }
            if exec.snaps.wants_startup() && exec.model.thread_count() == 1 {
                // No thread was created, so no snapshot taken: the next execution takes it
                // at main.
                exec.worker.snapshots.mark_threadless(&key);
            }
            exec.kill_all();
            result
        }
    };
    let stderr = worker
        .stderr_capture
        .as_ref()
        .and_then(OutputCapture::finish_execution);
    let stdout = worker
        .stdout_capture
        .as_ref()
        .and_then(OutputCapture::finish_execution);
    worker.outputs.finish_execution();
    if shown && worker.shown_output == ShownOutput::Next {
        worker.shown_output = ShownOutput::Hidden;
    }
    let mut outcome = result?;
    let ran_to_end = outcome.exit.is_some()
        && outcome.divergence.is_none()
        && !outcome.early_end.cut_short
        && !outcome.early_end.stopped_early;
    if let (Some(journal), Some(_)) = (&worker.journal, &worker.fs_pass) {
        if ran_to_end {
            let mut journal = journal.lock().expect("file journal");
            journal.keep_final();
            if cfg.program.compare_files {
                outcome.written_files =
                    crate::run::world::written_files::summarize(journal.paths());
            }
        }
    }
    outcome.output_digest = stderr.as_ref().map(|s| s.summary.digest);
    if cfg.program.read_stdout {
        outcome.stdout = stdout.map(|s| s.summary);
    }
    let stderr = stderr.map(|s| s.tail).unwrap_or_default();
    if let Some(f) = &mut outcome.finding {
        if f.kind == FindingKind::Assertion {
            if let Some(msg) = failure_message(&stderr) {
                if f.message.starts_with("the program") {
                    let cause = std::mem::replace(&mut f.message, msg);
                    f.details.insert(0, format!("({cause})"));
                } else {
                    f.details.insert(0, format!("the program printed: {msg}"));
                }
            }
        }
        // Why the program exited with another status, in its own words (a Python
        // traceback ends with the exception).
        if f.kind == FindingKind::ExitStatus {
            let last = crate::run::world::capture::last_lines(&stderr, 3);
            if !last.is_empty() {
                f.details.push(format!(
                    "the program's last lines on stderr: {}",
                    last.join(" | ")
                ));
            }
        }
    }
    Ok(outcome)
}

/// Starts the worker's captures of the program's stderr, and of its stdout when only some
/// executions show it and it must be a pipe, terminal or socket: the template processes of
/// fork snapshots keep them, so they are made once per worker.
fn start_captures(cfg: &ExecutionConfig, worker: &mut WorkerState) -> Result<()> {
    if worker.stderr_capture.is_none() {
        let echo = if cfg.program.quiet {
            Echo::Nowhere
        } else {
            Echo::Stderr
        };
        let capture = OutputCapture::start(StreamKind::Pipe, echo)
            .context("a pipe for the program's stderr")?;
        worker.stderr_capture = Some(capture);
    }
    let stdout_kind = cfg.program.stdio.map(|k| k.stdout);
    // The output oracle reads every execution's stdout; otherwise it is captured only
    // when some executions show it and others do not.
    let wanted = cfg.program.read_stdout || worker.shown_output != ShownOutput::Every;
    if worker.stdout_capture.is_none() && wanted {
        if let Some(kind @ (StreamKind::Pipe | StreamKind::Terminal | StreamKind::Socket)) =
            stdout_kind
        {
            let echo = if cfg.program.quiet {
                Echo::Nowhere
            } else {
                Echo::Stdout
            };
            let capture = OutputCapture::start(kind, echo)
                .with_context(|| format!("{} for the program's stdout", kind.describe()))?;
            worker.stdout_capture = Some(capture);
        }
    }
    Ok(())
}

/// Points the stdout of a fork copy run again only to learn something at /dev/null: the
/// program's output is shown once per execution. If that fails the output is shown again,
/// which is all it costs.
fn silence_stdout(exec: &Session<'_>) {
    let _ = threads::point_at_dev_null(exec.p.pid, exec.p.syscall_insn, 1);
}

/// Puts the program's files back as an execution starting from `restored` (a copy of a
/// snapshot, or exec when None) expects them, after earlier executions changed them
/// (`file_journal`). When a copy cannot find them so (a file its snapshot holds open was
/// replaced), the copy is thrown away, snapshots are turned off, and the execution starts
/// from exec with the files at their origin.
fn put_files_back(
    worker: &mut WorkerState,
    restored: Option<Restored>,
    key: &str,
) -> Option<Restored> {
    let Some(journal) = worker.journal.clone() else {
        return restored;
    };
    let to = restored
        .as_ref()
        .map_or(ORIGIN, |r| r.state.world.fs_state());
    if !journal.lock().expect("file journal").needs_restore(to) {
        return restored;
    }
    // Putting files back changes them: one worker at a time, as for the program's changes.
    if worker.fs_pass.is_none() {
        match worker.fs_gate.enter(&worker.cut) {
            Some(pass) => worker.fs_pass = Some(pass),
            // The search is being cut short: the execution ends at once.
            None => return restored,
        }
    }
    let faithful = journal.lock().expect("file journal").restore(to);
    // A branch copy's files open for writing, as they were at its snapshot (the journal
    // just put them back as they were at the startup snapshot).
    let faithful = faithful.and_then(
        |()| match restored.as_ref().and_then(|r| r.files.as_ref()) {
            Some(files) => files.restore().map_err(NotFaithful),
            None => Ok(()),
        },
    );
    match (faithful, restored) {
        (Ok(()), restored) => restored,
        (Err(NotFaithful(why)), Some(copy)) => {
            snapshot::discard_copy(copy);
            worker.snapshots.refuse(key, why);
            None
        }
        (Err(_), None) => None,
    }
}

/// Starts the program under ptrace, stopped at its exec.
fn launch(cfg: &ExecutionConfig, worker: &mut WorkerState) -> Result<Process> {
    let stderr_fd = match &worker.stderr_capture {
        Some(c) => Some(c.writer()?),
        None => None,
    };
    let shown = !(cfg.program.quiet || worker.quiet_rerun);
    let stdout = match (&worker.stdout_capture, cfg.program.stdio) {
        (Some(c), _) => Some(c.writer()?),
        (None, Some(kinds)) => worker.outputs.stdout(kinds.stdout, shown)?,
        (None, None) if shown => None,
        (None, None) => Some(program_stdio::dev_null()?),
    };
    let stdin = program_stdio::stdin(cfg.program.stdio)?;
    let path = CString::new(cfg.program.path.as_os_str().as_bytes())?;
    let mut argv = vec![path.clone()];
    for a in &cfg.program.args {
        argv.push(CString::new(a.as_bytes())?);
    }
    let envp = environment(&cfg.program.env)?;
    let pid = spawn_traced(
        &path,
        &argv,
        &envp,
        StdioSetup {
            trap_rdtsc: cfg.program.trap_rdtsc,
            signals: cfg.program.signals.clone(),
            stdin,
            stdout,
            stderr: stderr_fd,
        },
    )
    .context("launching the program under ptrace")?;
    match Process::new(pid) {
        Ok(p) => Ok(p),
        Err(e) => {
            let _ = kill(pid, Signal::SIGKILL);
            reap_all(&[pid].into_iter().collect());
            Err(e).context("opening the program's memory")
        }
    }
}

/// The program's environment: the configured one, with rseq disabled for determinism and,
/// unless the program's environment sets it, libgomp's spinning turned off
/// (`GOMP_SPINCOUNT=0`). A waiting OpenMP thread spins on a word no other thread can change
/// while it runs (the threads run one at a time and the spin has no scheduling point), so
/// the spin always ends in the futex wait it would reach at once: up to 300,000 loads per
/// wait when libgomp sees enough CPUs, mcheck's cost and none of the program's behaviour.
fn environment(vars: &[(OsString, OsString)]) -> Result<Vec<CString>> {
    let mut env: Vec<CString> = Vec::new();
    let mut tunables = String::from("glibc.pthread.rseq=0");
    if !vars.iter().any(|(k, _)| k == "GOMP_SPINCOUNT") {
        env.push(CString::new("GOMP_SPINCOUNT=0")?);
    }
    for (k, v) in vars {
        if k == "GLIBC_TUNABLES" {
            tunables = format!("{}:{tunables}", v.to_string_lossy());
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        if let Ok(c) = CString::new(kv) {
            env.push(c);
        }
    }
    env.push(CString::new(format!("GLIBC_TUNABLES={tunables}"))?);
    Ok(env)
}
