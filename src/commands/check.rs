//! `mcheck [OPTIONS] -- PROG ARGS`: validate the program, run the search with the chosen
//! strategy, write a schedule file per finding, print the reports and the coverage
//! statement, and write the JSON report.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use super::progress::ProgressDisplay;
use super::{current_env, lossy, Failure};
use crate::binary::{check_program, resolve_program};
use crate::cli::{CheckArgs, EXIT_CLEAN, EXIT_FINDINGS, EXIT_INCONCLUSIVE};
use crate::explore::shard::TreeShard;
use crate::explore::Coverage;
use crate::explore::StrategyName;
use crate::report::schedule::{file_sha256, ExecutionOptions, ScheduleFile};
use crate::report::shell_quote;
use crate::report::{human, json, Finding};
use crate::run::search::{search, Plan, TIME_LIMIT_REACHED};
use crate::run::{
    branch_snapshots_enabled, patching_enabled, ExecutionConfig, InstrumentConfig, Limits,
    ProgramSetup, SearchConfig, SearchResult, SnapshotConfig,
};

/// Runs a search as the options say; returns the exit status.
pub fn check(args: &CheckArgs) -> Result<i32, Failure> {
    // SIGINT, SIGTERM, SIGHUP and SIGQUIT end the search cleanly, with its report; from the
    // start, so that one that comes while the program is being read does too.
    crate::tracee::interrupt::install().context("installing the signal handlers")?;
    let program = resolve_program(&args.command[0]).map_err(|e| Failure::Usage(e.to_string()))?;
    check_program(&program).map_err(|e| Failure::Usage(e.to_string()))?;
    if args.bounded_por && !matches!(args.strategy, StrategyName::Icb | StrategyName::Portfolio) {
        return Err(Failure::Usage(
            "--bounded-por reduces icb (--strategy icb or the portfolio's icb, where it is the default)".into(),
        ));
    }
    if args.state_cache && !matches!(args.strategy, StrategyName::Dfs) {
        return Err(Failure::Usage(
            "--state-cache needs --strategy dfs (a pruned subtree is only sound for an exhaustive search)".into(),
        ));
    }
    let share = shard_of(args)?;
    let env = current_env();
    let stdio =
        crate::run::program_stdio::search_kinds(args.output.quiet_program, !args.no_output_check);
    // The output oracle reads every execution's stdout, which needs a stream of mcheck's
    // making: said in the summary when it cannot.
    let output_check_off = (!args.no_output_check)
        .then(|| crate::run::program_stdio::unreadable_stdout(stdio.stdout))
        .flatten();
    let cfg = SearchConfig {
        execution: ExecutionConfig {
            program: ProgramSetup {
                path: program.clone(),
                args: args.command[1..].to_vec(),
                env: env.clone(),
                quiet: args.output.quiet_program,
                stdio: Some(stdio),
                read_stdout: !args.no_output_check && output_check_off.is_none(),
                compare_files: !args.no_output_check,
                signals: crate::tracee::signals::at_start(),
                cpus: Some(crate::tracee::cpu::at_start()),
                // The dynamic loader reads the time-stamp counter at startup and keeps the
                // values in its data: a state cache must see the same values in every
                // execution.
                trap_rdtsc: args.state_cache || ExecutionConfig::program_reads_tsc(&program),
            },
            instrument: InstrumentConfig {
                races: !args.no_races,
                preempt_on_races: args.preempt_on_races(),
                trace_lib: args.trace_lib.clone(),
                no_trace_lib: args.no_trace_lib.clone(),
                stop_at_sites: Vec::new(),
                patch: patching_enabled(),
                heap_checks: !args.no_heap_checks,
                quarantine_blocks: args.quarantine_blocks,
            },
            limits: Limits {
                expect_exit: args.expect_exit,
                execution_timeout: Duration::from_secs_f64(args.execution_timeout),
                max_steps: Some(args.max_steps),
                max_timeouts: args.max_timeouts,
                early_timeout_horizon_ns: crate::report::schedule::horizon_ns(
                    args.early_timeout_horizon,
                ),
                stop_after: None,
            },
            snapshots: SnapshotConfig {
                snapshots: !args.no_snapshots,
                snapshot_memory: args.snapshot_memory,
                state_cache: args.state_cache,
                branches: branch_snapshots_enabled(),
            },
            stack_requests: Vec::new(),
            fair: !args.no_fair,
            trace: false,
        },
        plan: plan(args, share.seed),
        jobs: args
            .jobs
            .map_or_else(crate::tracee::cpu::available_cpus, |j| j as usize),
        max_executions: share.max_executions,
        // The default budget lets the reduced tree finish a proof of up to that many
        // executions of its own; a budget the user set, or a shard's part, is a hard bound.
        proof_budget: (args.max_executions.is_none() && share.tree.is_none())
            .then_some(share.max_executions),
        time_limit: args.time_budget().map(Duration::from_secs_f64),
        max_memory: args
            .max_memory
            .unwrap_or_else(crate::run::memory_guard::default_limit),
        keep_going: args.keep_going,
        state_cache: args.state_cache,
        shard: share.tree,
    };
    let strategy = cfg.plan.name();
    let json_file = args.output.json.as_deref();
    let claimed = super::claimed_outputs::claim(Some(&args.out), json_file.as_slice());
    let mut display = ProgressDisplay::new(args.progress, share.max_executions, cfg.time_limit);
    let mut result = search(&cfg, &mut |r| display.update(r)).context("running the search")?;
    display.finish();
    let default_budget_spent =
        args.time_budget_is_default() && result.stopped_because == TIME_LIMIT_REACHED;
    if default_budget_spent {
        result.stopped_because = format!(
            "the default time budget of {} min was spent",
            crate::cli::DEFAULT_TIME_BUDGET_SECS / 60.0
        );
    }
    let findings = write_schedules(args, &program, &env, &mut result)?;
    claimed.release();
    for f in &findings {
        let replay = match &f.schedule {
            Some(p) => format!("mcheck replay {}", shell_quote(p)),
            None => "(no schedule file could be written)".into(),
        };
        eprint!("{}", human::format_finding(f, &replay));
    }
    let mut statement = coverage_statement(
        &result,
        strategy,
        findings.is_empty(),
        &findings,
        args.max_steps,
    );
    if let Some(s) = args.shard.filter(|s| s.count > 1) {
        statement = format!("shard {s} of a split search (its part only): {statement}");
    }
    if cfg.proof_budget.is_some() && result.executions > cfg.max_executions {
        // The default budget's proof extension: say why the count passes the budget.
        let outcome = if result.complete {
            "which finished it"
        } else {
            "trying to finish its proof"
        };
        statement = format!(
            "{statement} (the last {} execution(s), past the budget of {}, were the reduced search's, {outcome})",
            result.executions - cfg.max_executions,
            cfg.max_executions
        );
    }
    let cache = match &result.state_space.state_cache {
        Some(c) => format!(
            ", state cache: {} state(s), {} pruned, {} revisit(s) with another state, {}{} page(s) hashed, {} kept",
            c.states,
            c.hits,
            c.different,
            if c.reexplored > 0 {
                format!("{} explored again (a thread asleep before was awake), ", c.reexplored)
            } else {
                String::new()
            },
            c.pages_hashed,
            c.pages_reused
        ),
        None => String::new(),
    };
    eprintln!(
        "mcheck: {statement} [{strategy} strategy, seed {}, {} job(s), {} transition(s), {} state(s){cache}, {:.1} s; {}]",
        share.seed,
        result.resources.jobs_used,
        result.state_space.transitions,
        result.state_space.states,
        result.elapsed.as_secs_f64(),
        result.stopped_because
    );
    if default_budget_spent {
        eprintln!(
            "mcheck: note: without a budget the search stops after {} minutes: --time-limit SECS or --max-executions N sets another",
            crate::cli::DEFAULT_TIME_BUDGET_SECS / 60.0
        );
    }
    if let Some(n) = result.followed_race {
        eprintln!(
            "mcheck: note: after the data race found in execution {n} the search went on to find a failure it leads to (an assertion, crash, deadlock...) and found none before it stopped ({}); --keep-going collects every finding, --max-executions N or --time-limit SECS sets the budget",
            result.stopped_because
        );
    }
    if let Some(note) = unconfirmed_cycles_note(&result.unconfirmed_cycles) {
        eprintln!("mcheck: note: {note}");
    }
    if let Some(note) = shown_output_note(
        cfg.execution.program.stdio,
        args.output.quiet_program,
        result.executions,
    ) {
        eprintln!("mcheck: note: {note}");
    }
    // A stdout redirected to a file the program alone writes is compared as a file it
    // writes (the journal holds it).
    let stdout_file_compared = crate::tracee::files::user_files()
        .iter()
        .any(|f| f.fd == 1 && f.output.is_some());
    if let Some(why) = output_check_off.as_ref().filter(|_| !stdout_file_compared) {
        eprintln!(
            "mcheck: note: the executions' outputs were not compared ({why}); a pipe, a terminal or --quiet-program lets mcheck read them"
        );
    }
    for u in &result.untraced {
        eprintln!("mcheck: note: {u}");
    }
    if result.cut_short > 0 {
        eprintln!(
            "mcheck: note: {} execution(s) were cut short when the search stopped ({}); they report nothing",
            result.cut_short, result.stopped_because
        );
    }
    let inconclusive = findings.is_empty() && nothing_ran_to_the_end(&result);
    if inconclusive {
        eprintln!(
            "mcheck: note: no execution ran to the program's end, so nothing was checked to the end (exit status {EXIT_INCONCLUSIVE})"
        );
    }
    if let (count @ 1.., first) = &result.instrumentation.unverified_races {
        eprintln!(
            "mcheck: note: {count} race(s) between plain loads and stores in code without debug information were not reported (the first {}): a relaxed atomic compiles to the same instructions, and without DWARF mcheck cannot tell them apart",
            first.as_deref().unwrap_or("?")
        );
    }
    if let Some(path) = &args.output.json {
        let report = json::JsonReport {
            version: json::REPORT_VERSION,
            mcheck_version: env!("CARGO_PKG_VERSION"),
            program: program.to_string_lossy().into_owned(),
            args: lossy(&args.command[1..]),
            strategy,
            seed: share.seed,
            executions: result.executions,
            decisions: result.steps,
            transitions: result.state_space.transitions,
            states: result.state_space.states,
            state_cache: result.state_space.state_cache,
            complete: result.complete,
            coverage: json::JsonCoverage {
                nothing_to_explore: result.nothing_to_explore.map(|n| n.key()),
                ..json::JsonCoverage::new(&result.coverage, statement.clone(), &findings)
            },
            stopped_because: &result.stopped_because,
            elapsed_seconds: result.elapsed.as_secs_f64(),
            cut_short: result.cut_short,
            max_steps: args.max_steps,
            cut_at_max_steps: result.cut_by_step_limit,
            cut_waiting_on_kernel: result.abandoned,
            ran_to_end: result
                .executions
                .saturating_sub(result.cut_by_step_limit + result.cut_short + result.abandoned),
            memory_peak_bytes: result.resources.memory_peak,
            snapshots: json::JsonSnapshots {
                executions_from_snapshot: result.snapshots.from_snapshots,
                executions_from_branch_snapshot: result.snapshots.from_branch_snapshots,
                branch_snapshots: result.snapshots.branch_snapshots,
                off_because: result.snapshots.snapshots_off.clone(),
            },
            access_recording: json::JsonAccessRecording {
                accesses: result.instrumentation.traced_accesses,
                accesses_at_breakpoints: result.instrumentation.patch_stats.breakpoint_accesses,
                sites_patched: result.instrumentation.patch_stats.patched,
                sites_on_breakpoints: result.instrumentation.patch_stats.on_breakpoints(),
                neighbours_moved: result.instrumentation.patch_stats.moved_neighbours,
                memory_calls_patched: result.instrumentation.patch_stats.memory_calls_patched,
                breakpoint_reasons: {
                    let mut r = result.instrumentation.patch_stats.fallback.clone();
                    if result.instrumentation.patch_stats.unpatched > 0 {
                        r.insert(
                            "unpatched later",
                            result.instrumentation.patch_stats.unpatched,
                        );
                    }
                    r
                },
                moved_out_of_generated_code: result.instrumentation.patch_stats.moved_out,
                unverified_races: result.instrumentation.unverified_races.0,
                first_unverified_race: result.instrumentation.unverified_races.1.clone(),
            },
            findings: &findings,
            lock_order_cycles_not_confirmed: &result.unconfirmed_cycles,
            lock_order_confirmation_executions: result.confirmation_executions,
            untraced_processes: &result.untraced,
            shard: args.shard.filter(|s| s.count > 1).map(|s| json::JsonShard {
                index: s.index,
                count: s.count,
                first_execution: share.first_execution,
                runs_outside_share: result.shard.runs_outside_share,
            }),
            schedule_digest: format!("{:016x}", result.shard.schedule_digest),
        };
        json::write(path, &report)
            .with_context(|| format!("writing the JSON report to {}", path.display()))?;
    }
    Ok(if !findings.is_empty() {
        EXIT_FINDINGS
    } else if inconclusive {
        EXIT_INCONCLUSIVE
    } else {
        EXIT_CLEAN
    })
}

/// This machine's part of a split search (`--shard`): the tree shard, and the base seed,
/// first execution index and budget of the randomised part.
struct ShareOfSearch {
    tree: Option<TreeShard>,
    seed: u64,
    first_execution: u64,
    max_executions: u64,
}

/// The part of the search `--shard I/N` asks for (the whole search without it).
fn shard_of(args: &CheckArgs) -> Result<ShareOfSearch, Failure> {
    let whole = ShareOfSearch {
        tree: None,
        seed: args.seed,
        first_execution: 0,
        max_executions: args.max_executions(),
    };
    let Some(shard) = args.shard.filter(|s| s.count > 1) else {
        return Ok(whole);
    };
    // The portfolio's trees are explored unreduced in a split search; dfs and icb alone
    // are refused, so that the shards add up to the unsharded search.
    let reduced = matches!(args.strategy, StrategyName::Dfs | StrategyName::Icb)
        && !args.no_por
        && !args.no_races;
    if reduced || args.state_cache {
        let (what, fix) = if args.state_cache {
            ("--state-cache", "drop --state-cache")
        } else if args.strategy == StrategyName::Icb {
            ("icb's bounded partial-order reduction", "add --no-por")
        } else {
            ("dfs's partial-order reduction", "add --no-por")
        };
        return Err(Failure::Usage(format!(
            "--shard splits the unreduced tree of a search, but {what} learns from executions in other subtrees (another shard's): {fix}"
        )));
    }
    let tree_only = matches!(args.strategy, StrategyName::Dfs | StrategyName::Icb);
    let part = shard.part(tree_only, args.seed, args.max_executions());
    let has_tree = tree_only || args.strategy == StrategyName::Portfolio;
    Ok(ShareOfSearch {
        tree: has_tree.then_some(TreeShard {
            index: shard.index - 1,
            count: shard.count,
        }),
        seed: part.seed,
        first_execution: part.first_execution,
        max_executions: part.max_executions,
    })
}

fn plan(args: &CheckArgs, seed: u64) -> Plan {
    match args.strategy {
        // Its icb member is reduced by bounded partial-order reduction, unreduced in a
        // split search (a held-back alternative is released by another subtree).
        StrategyName::Portfolio => Plan::Portfolio {
            seed,
            preemption_bound: args.preemption_bound,
            por: !args.no_por && !args.no_races,
        },
        // Without race tracing the executor cannot see the atomic accesses made between
        // scheduling points, so steps could look independent when they are not.
        StrategyName::Dfs => Plan::Dfs {
            por: !args.no_por && !args.no_races,
        },
        // Bounded partial-order reduction (docs/architecture.md), as in the portfolio.
        StrategyName::Icb => Plan::Icb {
            preemption_bound: args.preemption_bound,
            por: !args.no_por && !args.no_races,
        },
        StrategyName::Pct => Plan::Pct {
            depth: args.pct_depth,
            seed,
        },
        StrategyName::Pos => Plan::Pos { seed },
        StrategyName::Random => Plan::Random { seed },
    }
}

/// Writes one schedule file per distinct finding into `--out`; returns the findings with
/// their schedule paths and strategies filled in.
fn write_schedules(
    args: &CheckArgs,
    program: &Path,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    result: &mut SearchResult,
) -> Result<Vec<Finding>, Failure> {
    if result.witnesses.is_empty() {
        return Ok(vec![]);
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating the output directory {}", args.out.display()))?;
    let sha = file_sha256(program).context("hashing the program")?;
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut out = Vec::new();
    for (i, w) in result.witnesses.iter().enumerate() {
        let mut f = w.finding.clone();
        f.strategy = w.strategy.clone();
        let schedule = ScheduleFile::new(
            program,
            sha.clone(),
            lossy(&args.command[1..]),
            env.clone(),
            ExecutionOptions {
                expect_exit: args.expect_exit,
                execution_timeout: args.execution_timeout,
                max_steps: args.max_steps,
                max_timeouts: args.max_timeouts,
                early_timeout_horizon: args.early_timeout_horizon,
                races: !args.no_races,
                heap_checks: !args.no_heap_checks,
                quarantine_blocks: args.quarantine_blocks,
                fair: !args.no_fair,
                preempt_on_races: w.racy.is_some() && args.preempt_on_races(),
                trace_lib: args.trace_lib.clone(),
                no_trace_lib: args.no_trace_lib.clone(),
                racy_addresses: w
                    .racy
                    .as_ref()
                    .map_or_else(Vec::new, |r| r.addresses.clone()),
                racy_sites: w.racy.as_ref().map(|r| r.sites.clone()),
                timeout_poll_sites: (w.racy.as_ref())
                    .map_or_else(Vec::new, |r| r.poll_sites.clone()),
                busy_wait_sites: (w.racy.as_ref()).map_or_else(Vec::new, |r| r.spin_sites.clone()),
                atomic_addresses: w.atomic_addresses.clone(),
                stdio: Some(crate::run::program_stdio::search_kinds(
                    args.output.quiet_program,
                    !args.no_output_check,
                )),
                ignored_signals: Some(crate::tracee::signals::at_start().ignored),
                blocked_signals: Some(crate::tracee::signals::at_start().blocked),
                cpus: Some(crate::tracee::cpu::at_start()),
            },
            w.strategy.clone(),
            &f,
            w.decisions.clone(),
        );
        let name = format!(
            "{}-{}-{stamp}-{}.schedule.json",
            program
                .file_name()
                .map_or("program".into(), |n| n.to_string_lossy()),
            f.kind.name(),
            i + 1
        );
        let path = args.out.join(name);
        schedule
            .write(&path)
            .with_context(|| format!("writing the schedule file {}", path.display()))?;
        f.schedule = Some(path.to_string_lossy().into_owned());
        out.push(f);
    }
    Ok(out)
}

/// Names racy access sites (instruction addresses) by the source locations the race
/// findings give them: `function at file:line`, else the address.
fn name_sites(sites: &[u64], findings: &[Finding], site_names: &[(u64, String)]) -> String {
    let mut names: Vec<String> = (json::JsonSite::list(sites, findings, site_names).into_iter())
        .map(|s| s.location.unwrap_or(s.address))
        .collect();
    names.dedup();
    names.join(", ")
}

/// The executions that did not run to the program's end (nor to a finding), as a clause
/// ("M of them were cut at --max-steps ..."), or None when every execution did.
pub fn unchecked_executions(result: &SearchResult, max_steps: u64) -> Option<String> {
    let mut parts = Vec::new();
    if result.cut_by_step_limit > 0 {
        parts.push(format!(
            "{} of them {} cut at --max-steps {max_steps} before the program ended (raise --max-steps)",
            result.cut_by_step_limit,
            was_or_were(result.cut_by_step_limit)
        ));
    }
    if result.abandoned > 0 {
        parts.push(format!(
            "{} {} cut short while a thread waited in the kernel for something mcheck does not control",
            result.abandoned,
            was_or_were(result.abandoned)
        ));
    }
    if result.cut_short > 0 {
        parts.push(format!(
            "{} {} cut short when the search stopped ({})",
            result.cut_short,
            was_or_were(result.cut_short),
            result.stopped_because
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The verb for a count of executions: "1 was", "2 were".
fn was_or_were(n: u64) -> &'static str {
    if n == 1 {
        "was"
    } else {
        "were"
    }
}

/// Whether executions were cut at --max-steps and none ran to the program's end or to a
/// finding (the others were cut by the search's stop or while waiting on the kernel):
/// nothing was checked to the end, and "nothing found" would claim too much (exit status
/// 4). A search only stopped by the user's limits or signals keeps status 0: it says so.
pub fn nothing_ran_to_the_end(result: &SearchResult) -> bool {
    result.cut_by_step_limit > 0
        && result.cut_by_step_limit + result.cut_short + result.abandoned >= result.executions
}

/// What was covered, in one sentence; racy sites are named after the locations `findings`
/// give them, executions cut before the program's end are counted (`max_steps` names the
/// limit).
pub fn coverage_statement(
    result: &SearchResult,
    strategy: &str,
    clean: bool,
    findings: &[Finding],
    max_steps: u64,
) -> String {
    let n = result.executions;
    let unchecked = unchecked_executions(result, max_steps);
    // Processes that ran untraced (the process tree) were not checked at all.
    let clean_words = if result.untraced.is_empty() {
        "no bug found"
    } else {
        "no bug found in the processes checked"
    };
    let verdict = match (clean, &unchecked) {
        (true, None) => clean_words.to_string(),
        (true, Some(what)) => format!("{clean_words} in {n} execution(s); {what}"),
        (false, None) => format!("{} distinct finding(s)", result.witnesses.len()),
        (false, Some(what)) => format!(
            "{} distinct finding(s) in {n} execution(s); {what}",
            result.witnesses.len()
        ),
    };
    if result.cut_by_step_limit > 0 {
        // An execution cut at the step limit is a schedule not followed to its end: whatever
        // the tree says, nothing was exhausted.
        let tree = if result.coverage.synchronisation_exhausted {
            ": the tree of schedules ran out only up to --max-steps"
        } else {
            ""
        };
        return format!("{n} execution(s) explored, search space not exhausted{tree}; {verdict}");
    }
    let Coverage {
        exhausted,
        synchronisation_exhausted,
        preemption_bound_completed,
        beyond_preemption_bound,
        systematic_executions,
        ref racy_sites_included,
        ref racy_sites_not_explored,
        ref poll_sites_included,
        ref poll_sites_not_explored,
        ref spin_sites_included,
        ref site_names,
        refinement_rounds,
        up_to_independent_steps,
    } = result.coverage;
    // Which racy sites and timeout polls the tree held as scheduling points.
    let mut included = if racy_sites_included.is_empty() {
        String::new()
    } else {
        format!(
            " (racy access sites explored as scheduling points after {refinement_rounds} refinement round(s): {})",
            name_sites(racy_sites_included, findings, site_names)
        )
    };
    if !poll_sites_included.is_empty() {
        included.push_str(&format!(
            " ({} read(s) of what a timed-out wait sets were scheduling points, with a waiting thread's timeout explored right before each: {})",
            poll_sites_included.len(),
            name_sites(poll_sites_included, findings, site_names)
        ));
    }
    if !spin_sites_included.is_empty() {
        included.push_str(&format!(
            " ({} atomic load(s) of busy waits were yield points: {})",
            spin_sites_included.len(),
            name_sites(spin_sites_included, findings, site_names)
        ));
    }
    // Exhausted for synchronisation order only: racy sites found were not points.
    let sync_only = |what: String| {
        format!(
            "{what}, search space exhausted for synchronisation order only; {} racy site(s) not explored ({}){included}; {verdict}",
            racy_sites_not_explored.len(),
            name_sites(racy_sites_not_explored, findings, site_names)
        )
    };
    if !result.untraced.is_empty() {
        return format!(
            "{n} execution(s) explored, search space not exhausted: {} process(es) of the program ran untraced (see the note(s) below){included}; {verdict}",
            result.untraced.len()
        );
    }
    if let Some(why) = result.nothing_to_explore {
        if !racy_sites_not_explored.is_empty() {
            return sync_only(format!(
                "{}, so one execution covers every order of synchronisation ({n} execution(s) run)",
                why.describe()
            ));
        }
        return format!(
            "search space exhausted: {}, so one execution covers it ({n} execution(s) run), {verdict}",
            why.describe()
        );
    }
    // What icb covered up to bound c (reduced icb: up to the order of independent steps).
    let up_to = |c: u32| {
        if up_to_independent_steps {
            format!("every execution with ≤ {c} preemption(s) explored, up to the order of independent steps")
        } else {
            format!("all executions with ≤ {c} preemption(s) explored")
        }
    };
    if exhausted && result.complete {
        if let (true, Some(c)) = (beyond_preemption_bound, preemption_bound_completed) {
            return format!(
                "search space exhausted up to the preemption bound: {} ({n} execution(s)), executions with more preemptions not explored{included}; {verdict}",
                up_to(c)
            );
        }
        return format!("search space exhausted: {n} execution(s) explored{included}, {verdict}");
    }
    if let (count @ 1.., library) = &result.instrumentation.library_sync {
        let lib = library.as_deref().unwrap_or("a system library");
        return format!(
            "{n} execution(s) explored, search space not exhausted: {count} atomic operation(s) inside system libraries (first in {lib}) were taken in the order they came, not explored; {verdict}"
        );
    }
    if synchronisation_exhausted && !racy_sites_not_explored.is_empty() {
        return sync_only(format!("{n} execution(s) explored"));
    }
    if synchronisation_exhausted && !poll_sites_not_explored.is_empty() {
        return format!(
            "{n} execution(s) explored, search space not exhausted: {} read(s) of what a timed-out wait sets ({}) were found too late to become scheduling points, so no timeout was explored right before them{included}; {verdict}",
            poll_sites_not_explored.len(),
            name_sites(poll_sites_not_explored, findings, site_names)
        );
    }
    if synchronisation_exhausted && !result.instrumentation.races_checked {
        return format!(
            "{n} execution(s) explored, search space exhausted for synchronisation order only: data races were not checked (--no-races), so the orders of plain loads and stores were not explored{included}; {verdict}"
        );
    }
    if let (true, count @ 1.., first) = (
        synchronisation_exhausted,
        result.instrumentation.unverified_races.0,
        &result.instrumentation.unverified_races.1,
    ) {
        return format!(
            "{n} execution(s) explored, search space exhausted for synchronisation order only: {count} race(s) between plain accesses without debug information (the first {}) were taken for relaxed atomics, their orders not explored{included}; {verdict}",
            first.as_deref().unwrap_or("?")
        );
    }
    match (strategy, preemption_bound_completed) {
        ("icb", Some(c)) => format!(
            "{} ({n} execution(s)){included}, {verdict}",
            up_to(c)
        ),
        ("portfolio", Some(c)) => format!(
            "{n} execution(s), of which {systematic_executions} systematic: {}{included}; {verdict}",
            up_to(c)
        ),
        ("dfs", _) | ("icb", None) | ("portfolio", None) => format!(
            "{n} execution(s) explored, search space not exhausted{included}, {verdict}"
        ),
        _ => format!("{n} randomised execution(s) ({strategy}), no coverage guarantee; {verdict}"),
    }
}

/// Which execution's output the user saw, when the search ran more than one: the first
/// one's stdout and stderr, except that a stdout redirected to a file holds, as after one
/// native run, the output of the first execution that ran to its end (`file_journal`).
fn shown_output_note(
    stdio: Option<crate::run::program_stdio::StdioKinds>,
    quiet_program: bool,
    executions: u64,
) -> Option<String> {
    use crate::run::program_stdio::StreamKind;
    if quiet_program || executions < 2 {
        return None;
    }
    let others = executions - 1;
    Some(match stdio.map(|k| k.stdout) {
        Some(StreamKind::File) => format!(
            "the program's stderr above is its first execution's, not repeated for the other {others}; its stdout file holds the output of the first execution that ran to its end"
        ),
        // A device mcheck cannot make another of: every execution writes to it.
        Some(StreamKind::Other) => format!(
            "the program's stderr above is its first execution's, not repeated for the other {others}; its stdout is written by every execution"
        ),
        _ => format!(
            "the program's output above is its first execution's, not repeated for the other {others} (`mcheck replay` shows a finding's)"
        ),
    })
}

/// The note about lock-order cycles the search saw and did not report because no directed
/// execution deadlocked on them.
fn unconfirmed_cycles_note(cycles: &[crate::run::search::UnconfirmedCycle]) -> Option<String> {
    let first = cycles.first()?;
    let (count, verb) = match cycles.len() {
        1 => ("1 lock-order cycle was".to_string(), "it is"),
        n => (format!("{n} lock-order cycles were"), "they are"),
    };
    Some(format!(
        "{count} seen (the first in execution {}: {}); {}: {verb} not reported",
        first.execution,
        first.locations.join(", "),
        first.why
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::search::UnconfirmedCycle;

    fn cycle(execution: u64) -> UnconfirmedCycle {
        UnconfirmedCycle {
            message: "lock-order inversion (potential deadlock)".into(),
            locations: vec!["flag.c:25".into(), "flag.c:47".into()],
            execution,
            confirmation_executions: 2,
            why: "holding each of its threads just before its second lock while the others ran did not deadlock it (2 directed execution(s))".into(),
        }
    }

    #[test]
    fn the_note_says_how_many_cycles_were_not_reported_and_why() {
        assert_eq!(unconfirmed_cycles_note(&[]), None);
        let one = unconfirmed_cycles_note(&[cycle(3)]).unwrap();
        assert!(
            one.starts_with("1 lock-order cycle was seen (the first in execution 3: flag.c:25, flag.c:47); holding"),
            "{one}"
        );
        assert!(one.ends_with(": it is not reported"), "{one}");
        let two = unconfirmed_cycles_note(&[cycle(3), cycle(9)]).unwrap();
        assert!(
            two.starts_with("2 lock-order cycles were seen (the first in execution 3"),
            "{two}"
        );
        assert!(two.ends_with(": they are not reported"), "{two}");
    }
}
