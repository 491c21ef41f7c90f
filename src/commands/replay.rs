//! `mcheck replay SCHEDULE`: check that the program is the one recorded, re-run the schedule
//! exactly, print the interleaving step by step and the finding it leads to. A changed
//! program, a corrupt file or a divergence is bad input (exit 2): no false finding is
//! reported.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context;

use super::Failure;
use crate::cli::{ReplayArgs, EXIT_CLEAN, EXIT_FINDINGS};
use crate::detect::output_diff::first_difference;
use crate::explore::ReplayScheduler;
use crate::report::schedule::ScheduleFile;
use crate::report::shell_quote;
use crate::report::{human, json};
use crate::run::search::run_single;
use crate::run::{
    patching_enabled, ExecutionConfig, InstrumentConfig, Limits, ProgramSetup, RacyPoints,
    SnapshotConfig, TraceStep,
};
use crate::tracee::signals::SignalSetup;

/// Replays a schedule file; returns the exit status.
pub fn replay(args: &ReplayArgs) -> Result<i32, Failure> {
    let schedule = ScheduleFile::read(&args.schedule).map_err(|e| Failure::Usage(e.to_string()))?;
    schedule
        .check_program()
        .map_err(|e| Failure::Usage(e.to_string()))?;
    crate::binary::check_program(&schedule.program).map_err(|e| Failure::Usage(e.to_string()))?;
    let cfg = ExecutionConfig {
        program: ProgramSetup {
            path: schedule.program.clone(),
            args: schedule.args.iter().map(OsString::from).collect(),
            env: schedule
                .env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            quiet: args.output.quiet_program,
            stdio: schedule.options.stdio,
            // A nondeterminism finding may be about the output: both executions' stdout is
            // read, when it was a stream mcheck can read again.
            read_stdout: schedule.finding.kind == crate::report::FindingKind::Nondeterminism
                && schedule.options.stdio.is_some_and(|k| {
                    crate::run::program_stdio::unreadable_stdout(k.stdout).is_none()
                }),
            // A file the finding names is read by the replay itself (`replay_both`).
            compare_files: false,
            signals: recorded_signals(&schedule),
            cpus: schedule.options.cpus.clone(),
            trap_rdtsc: ExecutionConfig::program_reads_tsc(&schedule.program),
        },
        instrument: InstrumentConfig {
            races: schedule.options.races,
            preempt_on_races: schedule.options.preempt_on_races,
            trace_lib: schedule.options.trace_lib.clone(),
            no_trace_lib: schedule.options.no_trace_lib.clone(),
            stop_at_sites: Vec::new(),
            // A schedule that made racy accesses points without saying at which
            // instructions was recorded with every access site on a breakpoint.
            patch: patching_enabled()
                && (schedule.options.racy_sites.is_some()
                    || schedule.options.racy_addresses.is_empty()),
            heap_checks: schedule.options.heap_checks,
            quarantine_blocks: schedule.options.quarantine_blocks,
        },
        limits: Limits {
            expect_exit: schedule.options.expect_exit,
            execution_timeout: Duration::from_secs_f64(
                schedule.options.execution_timeout.max(0.001),
            ),
            max_steps: Some(schedule.options.max_steps),
            max_timeouts: schedule.options.max_timeouts,
            early_timeout_horizon_ns: crate::report::schedule::horizon_ns(
                schedule.options.early_timeout_horizon,
            ),
            stop_after: args.until,
        },
        // One execution: nothing to gain from a snapshot.
        snapshots: SnapshotConfig {
            snapshots: false,
            snapshot_memory: 0,
            state_cache: false,
            branches: false,
        },
        stack_requests: Vec::new(),
        fair: schedule.options.fair,
        trace: true,
    };
    let racy = racy_points(&schedule);
    if let Some(recorded) = schedule.options.stdio {
        for note in crate::run::program_stdio::replay_notes(recorded, args.output.quiet_program) {
            eprintln!("mcheck: note: {note}");
        }
    }
    // A report file that appeared only afterwards would be one more name in the program's
    // directory (see `claimed_outputs`).
    super::claimed_outputs::claim(None, args.output.json.as_deref().as_slice());
    if let Some(address) = &args.gdb {
        let cfg = gdb_config(cfg, &schedule, &racy);
        let path = args.schedule.to_string_lossy();
        let pacing = crate::gdb::checkpoints::Pacing::from_option(args.gdb_snapshot_every);
        return crate::gdb::serve(address, &schedule, &path, &cfg, &racy, args.until, pacing);
    }
    if schedule.finding.kind == crate::report::FindingKind::Nondeterminism {
        return replay_both(args, &schedule, &cfg);
    }
    let mut sched = ReplayScheduler::new(schedule.decisions.clone());
    let outcome = run_single(&cfg, &mut sched, &racy, &schedule.options.atomic_addresses)
        .context("replaying the schedule")?;
    // The program wrote its stdout file through a description of its own: what the shell
    // writes next goes after it.
    crate::tracee::files::advance_user_outputs(cfg.program.quiet);

    eprint!("{}", format_trace(&outcome.trace));
    for u in &outcome.untraced {
        eprintln!("mcheck: note: {u}");
    }
    if let Some(d) = outcome.divergence {
        return Err(Failure::Usage(format!(
            "{}: {d}; no finding is reported (a program also depends on its input files, the directories it lists and its environment: did they change since the search?)",
            args.schedule.display()
        )));
    }
    if outcome.early_end.stopped_early {
        eprintln!(
            "mcheck: replay stopped after step {} (--until); the schedule has {} steps",
            outcome.steps,
            schedule.decisions.len()
        );
        write_json(args, &schedule, &[], true)?;
        return Ok(EXIT_CLEAN);
    }
    // The recorded finding: the execution's failure, its lock-order cycle (schedule files
    // written before lock-order cycles were confirmed) or one of its data races (the one at
    // the recorded source locations when there are several).
    let same_place = |f: &crate::report::Finding| {
        crate::run::search::location_key(&f.locations)
            == crate::run::search::location_key(&schedule.finding.locations)
    };
    let candidates: Vec<_> = outcome
        .finding
        .into_iter()
        .chain(outcome.lock_order.map(|c| c.finding))
        .chain(outcome.races)
        .filter(|f| f.kind == schedule.finding.kind)
        .collect();
    let best = candidates.iter().position(same_place).unwrap_or(0);
    let Some(mut finding) = candidates.into_iter().nth(best) else {
        return Err(Failure::Usage(format!(
            "{}: the recorded {} did not reproduce (the program did not behave as when it was recorded); no finding is reported",
            args.schedule.display(),
            schedule.finding.kind.name()
        )));
    };
    finding.seed = schedule.seed;
    finding.execution = schedule.execution;
    finding.strategy = schedule.strategy.clone();
    finding.schedule = Some(args.schedule.to_string_lossy().into_owned());
    let again = format!(
        "mcheck replay {}",
        shell_quote(&args.schedule.to_string_lossy())
    );
    eprint!("{}", human::format_finding(&finding, &again));
    write_json(args, &schedule, std::slice::from_ref(&finding), true)?;
    Ok(EXIT_FINDINGS)
}

/// What the recorded execution made scheduling points of (`--preempt-on-races`).
/// The configuration of the executions gdb watches. Accesses are recorded inside the
/// program (patched sites) as in a search, which keeps a real program as fast under gdb
/// as in a plain replay (every access on a breakpoint made python3 twelve times slower);
/// the later access of each data race the execution finds stays a breakpoint, so that gdb
/// stops there: a first run of the schedule without gdb finds them. When that run does
/// not follow the schedule, every access site keeps a breakpoint.
fn gdb_config(cfg: ExecutionConfig, schedule: &ScheduleFile, racy: &RacyPoints) -> ExecutionConfig {
    let mut cfg = ExecutionConfig {
        trace: false,
        ..cfg
    };
    // The session's snapshots (`--gdb-snapshot-every`): a search's default budget.
    cfg.snapshots.snapshot_memory = 1 << 30;
    if !cfg.instrument.patch {
        return cfg;
    }
    let mut quiet = cfg.clone();
    quiet.program.quiet = true;
    let mut sched = ReplayScheduler::new(schedule.decisions.clone());
    let atomics = &schedule.options.atomic_addresses;
    match crate::run::search::race_sites(&quiet, &mut sched, racy, atomics) {
        Ok(Some(sites)) => cfg.instrument.stop_at_sites = sites,
        _ => cfg.instrument.patch = false,
    }
    cfg
}

/// The signals the program started with in the search (what mcheck was given, for a file
/// that does not say).
fn recorded_signals(schedule: &ScheduleFile) -> SignalSetup {
    let now = crate::tracee::signals::at_start();
    SignalSetup {
        ignored: schedule
            .options
            .ignored_signals
            .clone()
            .unwrap_or(now.ignored),
        blocked: schedule
            .options
            .blocked_signals
            .clone()
            .unwrap_or(now.blocked),
    }
}

fn racy_points(schedule: &ScheduleFile) -> RacyPoints {
    RacyPoints {
        addresses: schedule.options.racy_addresses.clone(),
        sites: schedule.options.racy_sites.clone().unwrap_or_default(),
        poll_sites: schedule.options.timeout_poll_sites.clone(),
        spin_sites: schedule.options.busy_wait_sites.clone(),
    }
}

/// A nondeterminism finding compares two executions that took the same steps: both
/// schedules are replayed, and the finding reproduces when they still end differently.
fn replay_both(
    args: &ReplayArgs,
    schedule: &ScheduleFile,
    cfg: &ExecutionConfig,
) -> Result<i32, Failure> {
    let other = &schedule.finding.other_decisions;
    if other.is_empty() {
        return Err(Failure::Usage(format!(
            "{}: the nondeterminism finding has no second schedule to compare with",
            args.schedule.display()
        )));
    }
    let mut ends = Vec::new();
    let mut outputs = Vec::new();
    let mut files = Vec::new();
    // The finding's own execution shows its output; the other one runs quietly. For a
    // finding about a file the other one runs first, so that the file is left as the
    // finding's schedule leaves it.
    let quiet = ExecutionConfig {
        program: crate::run::ProgramSetup {
            quiet: true,
            ..cfg.program.clone()
        },
        ..cfg.clone()
    };
    let file = schedule
        .finding
        .output_file
        .as_deref()
        .map(std::path::Path::new);
    let mut runs = [(&schedule.decisions, cfg), (other, &quiet)];
    if file.is_some() {
        runs.reverse();
    }
    for (decisions, cfg) in runs {
        let mut sched = ReplayScheduler::new(decisions.clone());
        let outcome = run_single(
            cfg,
            &mut sched,
            &racy_points(schedule),
            &schedule.options.atomic_addresses,
        )
        .context("replaying the schedule")?;
        if let Some(d) = outcome.divergence {
            return Err(Failure::Usage(format!(
                "{}: {d}; no finding is reported",
                args.schedule.display()
            )));
        }
        let exit = outcome.exit.unwrap_or_else(|| "no end".into());
        // An end whose stderr could not be read is no proof of a difference.
        let end = outcome
            .output_digest
            .map(|digest| format!("{exit}, stderr output #{digest:016x}"));
        ends.push(end);
        files.push(file.and_then(crate::run::written_files::summarize_one));
        outputs.push((exit, outcome.stdout));
    }
    if file.is_some() {
        // Back in the order of the finding's own schedule, then the other.
        ends.reverse();
        outputs.reverse();
        files.reverse();
    }
    let output_differs = match (&outputs[0], &outputs[1]) {
        ((exit, Some(ours)), (other_exit, Some(theirs))) if exit == other_exit => {
            (!ours.same_as(theirs)).then(|| (exit.clone(), ours.clone(), theirs.clone()))
        }
        _ => None,
    };
    let file_differs = match (file, &files[0], &files[1]) {
        (Some(path), Some(ours), Some(theirs)) if outputs[0].0 == outputs[1].0 => (!ours
            .same_as(theirs))
        .then(|| (path, outputs[0].0.clone(), ours.clone(), theirs.clone())),
        _ => None,
    };
    let ends_differ = matches!(&ends[..], [Some(a), Some(b)] if a != b);
    let [ours_end, other_end] = [0, 1].map(|i| {
        ends[i]
            .clone()
            .unwrap_or_else(|| "stderr output not read".into())
    });
    if !ends_differ && output_differs.is_none() && file_differs.is_none() {
        let same_file = match file {
            Some(path) => format!(" and the same bytes in {}", path.display()),
            None => String::new(),
        };
        return Err(Failure::Usage(format!(
            "{}: the recorded nondeterminism did not reproduce (both schedules end with {}{}{}); no finding is reported",
            args.schedule.display(),
            ours_end,
            if outputs[0].1.is_some() { " and the same output" } else { "" },
            same_file
        )));
    }
    let (message, mut details) = match (&output_differs, &file_differs) {
        (Some((exit, ours, theirs)), _) => (
            format!(
                "the program's output depends on the schedule: {}",
                first_difference(ours, theirs).describe()
            ),
            crate::run::search::output_details(ours, theirs, exit),
        ),
        (None, Some((path, exit, ours, theirs))) => (
            crate::run::search::file_message(path, ours, theirs),
            crate::run::search::file_details(ours, theirs, exit),
        ),
        (None, None) => (
            format!(
                "the program's result depends on the schedule: the same steps in two orders end with {} and with {}",
                other_end, ours_end
            ),
            Vec::new(),
        ),
    };
    details.insert(
        0,
        if file.is_some() {
            "both schedules were replayed (the recorded other one, then this one, whose file is left)"
        } else {
            "both schedules were replayed (this one, then the recorded other one)"
        }
        .into(),
    );
    let finding = crate::report::Finding {
        kind: schedule.finding.kind,
        message,
        details,
        locations: Vec::new(),
        threads: Vec::new(),
        preemptions: schedule.preemptions,
        seed: schedule.seed,
        execution: schedule.execution,
        steps: schedule.decisions.len() as u64,
        strategy: schedule.strategy.clone(),
        schedule: Some(args.schedule.to_string_lossy().into_owned()),
        cycle: Vec::new(),
        other_schedule: other.clone(),
        output_file: schedule.finding.output_file.clone(),
    };
    let again = format!(
        "mcheck replay {}",
        shell_quote(&args.schedule.to_string_lossy())
    );
    eprint!("{}", human::format_finding(&finding, &again));
    write_json(args, schedule, std::slice::from_ref(&finding), true)?;
    Ok(EXIT_FINDINGS)
}

fn write_json(
    args: &ReplayArgs,
    schedule: &ScheduleFile,
    findings: &[crate::report::Finding],
    _replayed: bool,
) -> Result<(), Failure> {
    let Some(path) = &args.output.json else {
        return Ok(());
    };
    let report = json::JsonReport {
        version: json::REPORT_VERSION,
        mcheck_version: env!("CARGO_PKG_VERSION"),
        program: schedule.program.to_string_lossy().into_owned(),
        args: schedule.args.clone(),
        strategy: "replay",
        seed: schedule.seed,
        executions: 1,
        // A replay explores nothing: every step is counted, as it was recorded.
        decisions: schedule.decisions.len() as u64,
        transitions: schedule.decisions.len() as u64,
        states: schedule.decisions.len() as u64,
        state_cache: None,
        complete: false,
        coverage: json::JsonCoverage::new(
            &Default::default(),
            "replay of one schedule".into(),
            &[],
        ),
        stopped_because: "replayed the schedule",
        elapsed_seconds: 0.0,
        cut_short: 0,
        max_steps: schedule.options.max_steps,
        cut_at_max_steps: 0,
        cut_waiting_on_kernel: 0,
        ran_to_end: 1,
        memory_peak_bytes: crate::run::memory_guard::Usage::now().total(),
        snapshots: json::JsonSnapshots {
            executions_from_snapshot: 0,
            executions_from_branch_snapshot: 0,
            branch_snapshots: 0,
            off_because: None,
        },
        access_recording: Default::default(),
        findings,
        lock_order_cycles_not_confirmed: &[],
        lock_order_confirmation_executions: 0,
        untraced_processes: &[],
        shard: None,
        schedule_digest: format!(
            "{:016x}",
            crate::explore::shard::schedule_hash(schedule.decisions.iter().map(|d| d.thread))
        ),
    };
    json::write(path, &report)
        .with_context(|| format!("writing the JSON report to {}", path.display()))?;
    Ok(())
}

/// The interleaving as a table: step, thread, operation, object, source line.
fn format_trace(trace: &[TraceStep]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>6}  {:<6} {:<20} {:<36} location",
        "step", "thread", "operation", "object"
    );
    for t in trace {
        let object = t.object.as_deref().unwrap_or("");
        let location = t.location.as_ref().map(|f| f.short()).unwrap_or_default();
        let _ = writeln!(
            s,
            "{:>6}  {:<6} {:<20} {:<36} {location}",
            t.step,
            format!("T{}", t.thread),
            t.op,
            object
        );
    }
    s
}
