//! `mcheck replay --gdb`: the replay of a schedule as a gdb remote target. The executor
//! replays the schedule on this thread (the tracer) and stops at the moments gdb should see
//! (`main`, gdb's breakpoints, the later access of a data race, the finding); a second
//! thread speaks gdb's remote protocol (the `gdbstub` crate) and turns each of gdb's
//! requests into a message to the executor, which answers it from the stopped program.
//! The schedule is enforced throughout: gdb's `continue` runs the threads in the recorded
//! order, never in another.

mod arch;
mod bridge;
pub mod checkpoints;
mod monitor;
mod target;
mod timeline;

use std::net::{TcpListener, TcpStream};

use anyhow::Context;

use crate::commands::Failure;
use crate::explore::ReplayScheduler;
use crate::report::schedule::ScheduleFile;
use crate::run::debug_port::DebugHook;
use crate::run::debug_worker::DebugWorker;
use crate::run::{ExecutionConfig, RacyPoints};
use bridge::{Bridge, Session, Stop, StopKind};
use target::{ReplayLoop, ReplayTarget};

/// Where to listen when `--gdb` names no address: a free port on the loopback interface.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:0";

/// Replays `schedule` as a gdb remote target listening on `address`; returns the exit
/// status (1 when the replay reached a finding, 0 otherwise). Executions are fork-
/// snapshotted at decisions as `pacing` says, so that going back re-executes from the
/// nearest snapshot before the earlier stop rather than from the program's start.
pub fn serve(
    address: &str,
    schedule: &ScheduleFile,
    schedule_path: &str,
    cfg: &ExecutionConfig,
    racy: &RacyPoints,
    until: Option<u64>,
    pacing: checkpoints::Pacing,
) -> Result<i32, Failure> {
    let listener = TcpListener::bind(address)
        .map_err(|e| Failure::Usage(format!("--gdb: cannot listen on {address}: {e}")))?;
    let local = listener
        .local_addr()
        .context("the address gdb is to connect to")?;
    // Said once the replay waits at its first stop: gdb gives up on a target that does
    // not answer within two seconds.
    let attach = format!(
        "mcheck: replaying {schedule_path} for gdb on {local}; attach with:\n  gdb -ex 'set sysroot /' -ex 'target remote {local}' {}",
        crate::report::shell_quote(&schedule.program.to_string_lossy())
    );
    let (req_tx, req_rx) = crossbeam_channel::unbounded();
    let (rep_tx, rep_rx) = crossbeam_channel::unbounded();
    let (stop_tx, stop_rx) = crossbeam_channel::unbounded();
    let interrupt = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let log = std::sync::Arc::new(std::sync::Mutex::new(checkpoints::SnapshotLog {
        pacing,
        ..Default::default()
    }));
    let mut target = ReplayTarget::new(
        req_tx,
        rep_rx,
        stop_rx,
        schedule.decisions.clone(),
        interrupt.clone(),
        log.clone(),
    );
    let server = std::thread::Builder::new()
        .name("gdb".into())
        .spawn(move || serve_gdb(listener, &mut target, &attach))
        .context("starting the gdb thread")?;
    let again = format!(
        "mcheck replay {}",
        crate::report::shell_quote(schedule_path)
    );
    let session = std::sync::Arc::new(std::sync::Mutex::new(Session::default()));
    if let Ok(mut s) = session.lock() {
        s.timeline.until = until;
        s.log = log.clone();
    }
    let atomics = &schedule.options.atomic_addresses;
    let mut worker = DebugWorker::new(racy, atomics, pacing.every > 0)
        .context("setting up the replay's worker")?;
    let mut plan = None;
    let outcome = loop {
        // Going back: from the deepest snapshot the re-execution passes, if any.
        let reexecution = plan.is_some();
        let resumed = plan.as_ref().and_then(|p| {
            let alive = worker.snapshot_depths(cfg);
            let s = session.lock().ok()?;
            checkpoints::best(s.checkpoints.values(), &alive, p)
        });
        let mut bridge = Bridge::new(
            req_rx.clone(),
            rep_tx.clone(),
            stop_tx.clone(),
            session.clone(),
            plan.take(),
            interrupt.clone(),
            again.clone(),
        );
        let from = resumed.as_ref().map(|r| r.depth as usize);
        let mut sched = ReplayScheduler::new(schedule.decisions.clone());
        let outcome = worker.run(cfg, &mut sched, from, |copied| {
            let resumed = resumed.filter(|_| copied);
            if let (true, Ok(mut l)) = (reexecution, log.lock()) {
                l.reexecuted(resumed.as_ref().map(|r| r.depth));
            }
            if let Some(r) = resumed {
                bridge.resume_from(r);
            }
            DebugHook::new(Box::new(bridge))
        });
        // Going back: the replay is deterministic, so a new execution that applies gdb's
        // commands again reaches the earlier stop with the program as it was there.
        let back = session.lock().ok().and_then(|mut s| s.restart.take());
        match (back, &outcome) {
            // (Also from the finding, where the execution was over anyway.)
            (Some(p), Ok(_)) => plan = Some(p),
            _ => break outcome,
        }
    };
    // Tell gdb how the replay ended (it waits for that after its last `continue`).
    let end = match &outcome {
        Ok(out) if !out.early_end.cut_short => {
            let kind = match out.exit.as_deref().and_then(parse_exit) {
                Some(k) => k,
                None => StopKind::Killed(libc::SIGKILL),
            };
            Some(Stop {
                kind,
                step: out.steps,
                report: None,
                messages: Vec::new(),
            })
        }
        _ => None,
    };
    match end {
        Some(stop) => {
            let _ = stop_tx.send(stop);
        }
        None => drop(stop_tx),
    }
    let _ = server.join();
    let outcome = outcome.context("replaying the schedule under gdb")?;
    if let Some(d) = outcome.divergence {
        return Err(Failure::Usage(format!(
            "{schedule_path}: {d}; no finding is reported"
        )));
    }
    let found = outcome.finding.is_some() || !outcome.races.is_empty();
    Ok(if found {
        crate::report::exit_status::EXIT_FINDINGS
    } else {
        crate::report::exit_status::EXIT_CLEAN
    })
}

/// "exit status 3" / "killed by SIGSEGV" as a stop.
fn parse_exit(s: &str) -> Option<StopKind> {
    if let Some(code) = s.strip_prefix("exit status ") {
        return code.trim().parse().ok().map(StopKind::Exited);
    }
    let name = s.strip_prefix("killed by ")?;
    let sig: nix::sys::signal::Signal = name.trim().parse().ok()?;
    Some(StopKind::Killed(sig as i32))
}

/// The gdb thread: accepts connections and serves them until a gdb session ends (gdb goes
/// away or the replay ends). A connection that ends before gdb looked at the program (a
/// port probe, a readiness check, `nc -z`, a gdb killed during its handshake) left the
/// replay as it was: it is logged and the next connection is served, as gdbserver does.
/// Dropping the target closes the channels, which ends the replay if it still runs.
fn serve_gdb(listener: TcpListener, target: &mut ReplayTarget, attach: &str) {
    if target.wait_first_stop().is_err() {
        eprintln!("mcheck: the replay ended before reaching its first stop");
        return;
    }
    eprintln!("{attach}");
    loop {
        let (conn, peer): (TcpStream, _) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("mcheck: --gdb: accepting gdb's connection: {e}");
                return;
            }
        };
        eprintln!("mcheck: gdb connected from {peer}");
        let before = target.requests_sent();
        let result = gdbstub::stub::GdbStub::new(conn).run_blocking::<ReplayLoop>(target);
        match result {
            Err(e) if target.requests_sent() == before => {
                eprintln!(
                    "mcheck: the connection from {peer} ended before a gdb session began ({e}); waiting for gdb again on {}",
                    listener.local_addr().map_or_else(|_| "the same address".into(), |a| a.to_string())
                );
            }
            Ok(reason) => return eprintln!("mcheck: gdb session ended ({reason:?})"),
            Err(e) => return eprintln!("mcheck: gdb session failed: {e}"),
        }
    }
}
