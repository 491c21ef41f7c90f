//! Command-line interface: the options of a search and of `mcheck replay`, and exit codes.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::explore::{PctDepth, StrategyName};
pub use crate::report::exit_status::{
    EXIT_CLEAN, EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_INTERNAL, EXIT_USAGE,
};

/// When to show a search's progress on stderr (`--progress`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProgressMode {
    /// Never.
    Never,
    /// A bar on a terminal; elsewhere a plain line every 5 seconds.
    Auto,
    /// A plain line every 5 seconds, even on a terminal.
    Always,
}

/// mcheck: systematic concurrency checking of unmodified Linux x86-64 binaries.
///
/// Runs PROG under ptrace one thread at a time, explores thread interleavings at
/// synchronisation points, checks every execution for data races, and reports races,
/// deadlocks, assertion failures, crashes, API misuse, livelocks and threads that spin
/// without synchronising, each with a schedule file that `mcheck replay` re-runs exactly.
#[derive(Parser, Debug)]
#[command(
    name = "mcheck",
    version,
    override_usage = "mcheck [OPTIONS] -- PROG [ARGS...]\n       mcheck replay [OPTIONS] SCHEDULE\n       mcheck audit [OPTIONS] MANIFEST\n       mcheck test [OPTIONS] -- TEST_BINARY [FILTER...]\n       mcheck merge --out DIR SHARD_DIR...",
    after_help = "Exit status: 0 nothing found, 1 findings, 2 bad usage or input, 3 internal failure.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    args_override_self = true
)]
pub struct Cli {
    /// A subcommand (`replay`); without one, mcheck checks PROG.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of a search.
    #[command(flatten)]
    pub check: CheckArgs,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Re-run a schedule file exactly and print the interleaving it leads to.
    Replay(ReplayArgs),
    /// Check every target of a TOML manifest (a nightly audit); write audit.json,
    /// results.sarif (SARIF 2.1.0), junit.xml and a summary into --out.
    Audit(AuditArgs),
    /// Check each test of a test binary (Rust libtest, GoogleTest, or a plain program as one
    /// test) as its own search; write test.json, results.sarif, junit.xml and a summary
    /// into --out.
    #[command(override_usage = "mcheck test [OPTIONS] -- TEST_BINARY [FILTER...]")]
    Test(TestArgs),
    /// Combine the output directories of the shards of one audit (or of one `mcheck test`)
    /// into one.
    Merge(MergeArgs),
}

/// The test frameworks `mcheck test --framework` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FrameworkName {
    /// Recognise it from the binary.
    Auto,
    /// Rust's libtest (`#[test]`).
    Libtest,
    /// GoogleTest.
    Gtest,
    /// No framework: the binary is one test.
    Single,
}

/// `mcheck test` options (docs/test-suites.md).
#[derive(Args, Debug, Clone)]
pub struct TestArgs {
    /// Options of the test run (shared with `cargo mcheck`).
    #[command(flatten)]
    pub suite: SuiteArgs,
    /// The test binary, then filters: a test runs when its name contains one of them (all
    /// tests without filters).
    #[arg(required = true, trailing_var_arg = true, value_name = "TEST_BINARY")]
    pub command: Vec<OsString>,
}

/// Options of a test-suite run, shared by `mcheck test` and `cargo mcheck`.
#[derive(Args, Debug, Clone)]
pub struct SuiteArgs {
    /// Directory for test.json, results.sarif, junit.xml, summary.txt and each test's
    /// report and schedule files.
    #[arg(long, default_value = "mcheck-test", value_name = "DIR")]
    pub out: PathBuf,
    /// The binary's test framework.
    #[arg(long, value_enum, default_value = "auto")]
    pub framework: FrameworkName,
    /// Most executions of each test's search [default: 1000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_executions: Option<u64>,
    /// Wall-clock budget of each test (its run without mcheck and its search), in seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub time_limit: Option<f64>,
    /// Wall-clock budget of the whole run, in seconds: tests not started by then are
    /// skipped, a running test gets what is left.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub total_time_limit: Option<f64>,
    /// Tests checked at once (default: the number of CPUs); each search gets its share of
    /// the CPUs as workers.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    /// Check shard I of N (1-based): the selected tests k with k mod N = I-1. Combine the
    /// shards' outputs with `mcheck merge`.
    #[arg(long, value_name = "I/N", value_parser = clap::value_parser!(crate::audit::shard::Shard))]
    pub shard: Option<crate::audit::shard::Shard>,
    /// Also check ignored tests (`#[ignore]`, GoogleTest's DISABLED_).
    #[arg(long)]
    pub include_ignored: bool,
    /// Filters (and --skip) match whole test names only.
    #[arg(long)]
    pub exact: bool,
    /// Leave out tests whose names contain PATTERN (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub skip: Vec<String>,
    /// List the selected tests (one per line, ignored ones marked) and check nothing.
    #[arg(long)]
    pub list: bool,
    /// Scheduling strategy of each search.
    #[arg(long, value_enum, default_value = "portfolio")]
    pub strategy: StrategyName,
    /// Base seed of each search.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Search every test without running it once without mcheck first (by default a test
    /// that fails on its own is reported as failing without any interleaving, and not
    /// searched).
    #[arg(long)]
    pub no_native_run: bool,
    /// JUnit class name of the tests (default: the binary's file name without cargo's
    /// hash).
    #[arg(long, value_name = "NAME")]
    pub classname: Option<String>,
    /// A previous test.json: report only findings it does not have.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Another mcheck search option for every test, e.g. `--mcheck-arg=--keep-going` or
    /// `--mcheck-arg=--preemption-bound=2` (repeatable).
    #[arg(long = "mcheck-arg", value_name = "OPTION", allow_hyphen_values = true)]
    pub mcheck_args: Vec<String>,
}

/// `mcheck audit` options (docs/audits.md).
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The manifest (TOML): `[[target]]` tables with `name`, `command` and more.
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// Directory for audit.json, results.sarif, junit.xml, summary.txt and each target's
    /// report and schedule files.
    #[arg(long, default_value = "mcheck-audit", value_name = "DIR")]
    pub out: PathBuf,
    /// Targets checked at once (default: the manifest's `jobs`, else the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    /// Run shard I of N (1-based): every Nth target, and this shard's part of the search of
    /// each target marked `split` (disjoint subtrees for dfs/icb, disjoint seed ranges for
    /// random/pct). Combine the shards with `mcheck merge`.
    #[arg(long, value_name = "I/N", value_parser = clap::value_parser!(crate::audit::shard::Shard))]
    pub shard: Option<crate::audit::shard::Shard>,
    /// A previous audit.json: report only findings it does not have, and list the ones it
    /// has that were not found again as fixed.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Also write the SARIF log to FILE (it is always in --out as results.sarif).
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
}

/// `mcheck merge` options.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Directory for the merged audit.json, results.sarif, junit.xml and summary.txt.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The `--out` directories of the shards (each with an audit.json).
    #[arg(required = true, value_name = "SHARD_DIR")]
    pub shards: Vec<PathBuf>,
}

/// Output options shared by a search and a replay.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the machine-readable report to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Hide the program's own stdout and stderr.
    #[arg(long)]
    pub quiet_program: bool,
}

/// `mcheck replay` options.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The schedule file (written to mcheck-out/ by a search).
    #[arg(value_name = "SCHEDULE")]
    pub schedule: PathBuf,
    /// Stop after this many scheduling decisions.
    #[arg(long, value_name = "STEP")]
    pub until: Option<u64>,
    /// Serve the replay to gdb's remote protocol (on a free loopback port unless
    /// HOST:PORT is given); see docs/replay-with-gdb.md.
    #[arg(long, value_name = "HOST:PORT", num_args = 0..=1, require_equals = true,
          default_missing_value = crate::gdb::DEFAULT_ADDRESS)]
    pub gdb: Option<String>,
    /// Under --gdb: a fork snapshot of an execution every N scheduling decisions exactly,
    /// from which going back (reverse-continue, reverse-step, `monitor goto`) re-executes
    /// instead of from the program's start (0: no snapshots). By default one at most
    /// every 200 decisions, and only when snapshots have cost under a tenth of the run.
    #[arg(long, value_name = "N", requires = "gdb")]
    pub gdb_snapshot_every: Option<u64>,
    /// Output options.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Options of a search.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Scheduling strategy.
    #[arg(long, value_enum, default_value = "portfolio")]
    pub strategy: StrategyName,
    /// Base seed of the randomised strategies: execution i uses seed+i.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Largest number of preemptions icb (and the portfolio's icb member) explores.
    #[arg(long, value_name = "C")]
    pub preemption_bound: Option<u32>,
    /// Bug depth d of pct: d-1 priority change points per execution; `1..D` cycles through
    /// the depths 1 to D, execution by execution.
    #[arg(long, default_value = "3", value_name = "D")]
    pub pct_depth: PctDepth,
    /// Most executions to run [default: 1000]. Without this option the portfolio's reduced
    /// tree, when it is still going after the 1000, runs alone until it has had 1000
    /// executions itself, so that a correct program whose reduced tree holds up to 1000
    /// executions is proved correct (about 1500 executions in all, never more than 2000).
    #[arg(long, value_name = "N")]
    pub max_executions: Option<u64>,
    /// Run shard I of N (1-based) of a search split among N machines (docs/audits.md):
    /// dfs and icb (with --no-por) explore disjoint subtrees, each shard capped by the whole
    /// --max-executions; random and pct run the shard's range of the executions (and so of
    /// the seeds) of --max-executions; the portfolio does both. Together the shards run the
    /// unsharded search's executions, none twice.
    #[arg(long, value_name = "I/N", value_parser = clap::value_parser!(crate::audit::shard::Shard))]
    pub shard: Option<crate::audit::shard::Shard>,
    /// Worker threads, each a tracer on its own CPU (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    /// Wall-clock budget for the whole search, in seconds; the execution running when it
    /// runs out is cut short. Default: 300 (5 minutes) when --max-executions and --shard are
    /// not given either; with --max-executions, none.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub time_limit: Option<f64>,
    /// Most memory mcheck itself may hold, its fork snapshots included (suffixes K, M, G;
    /// default: half of the machine's memory). From three quarters of it branch snapshots
    /// and the state cache are dropped; at it the search stops and reports what it covered.
    #[arg(long, value_name = "BYTES", value_parser = parse_memory)]
    pub max_memory: Option<u64>,
    /// Progress on stderr: a bar on a terminal and a line every 5 s elsewhere (auto), a line
    /// every 5 s everywhere (always), or nothing (never).
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub progress: ProgressMode,
    /// Most scheduling decisions in one execution; an execution that reaches it under a fair
    /// schedule, with threads yielding, is reported as a livelock.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub max_steps: u64,
    /// Most timeouts in one execution that fire while another thread could still run. A
    /// timed wait (pthread_cond_timedwait, a futex wait or poll with a timeout, a sleep...)
    /// may time out at any scheduling point where its thread waits, as one more choice of
    /// the search; this bounds how many such early timeouts an execution takes (each also
    /// counts as a preemption). When no thread can run the earliest deadline always fires.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub max_timeouts: u32,
    /// Longest timeout, in seconds, that may fire early (while another thread could still
    /// run). A longer timed wait fires only when no thread can run, at its deadline: that
    /// it ends before the others get to run would need the machine to stall them for that
    /// long, which a report would not be believed for (a 49-day wait timing out). `inf`:
    /// any timeout may fire early.
    #[arg(long, default_value_t = 1.0, value_name = "SECS", value_parser = parse_horizon)]
    pub early_timeout_horizon: f64,
    /// Collect every distinct finding instead of stopping at the first.
    #[arg(long)]
    pub keep_going: bool,
    /// Do not detect data races (faster: memory accesses are not traced). This also turns
    /// off the partial-order reduction of dfs and icb.
    #[arg(long)]
    pub no_races: bool,
    /// Do not compare the program's stdout between executions. By default an execution
    /// run to its end whose output differs from the first one's (same exit status) is a
    /// `nondeterminism` finding; a program that prints timings, addresses or thread ids
    /// opts out with this.
    #[arg(long, overrides_with = "output_check")]
    pub no_output_check: bool,
    /// Compare the program's stdout between executions: the default, except under `mcheck
    /// test`, which passes --no-output-check (a test harness prints its timings); the last
    /// of the two options given wins.
    #[arg(long, overrides_with = "no_output_check")]
    pub output_check: bool,
    /// Do not check for heap errors (use_after_free, double_free, invalid_free). By default
    /// frees stop the program, and the blocks they free are held back from the allocator
    /// (a quarantine, see --quarantine-blocks) so that an access to one, or a second free,
    /// is caught before the memory is reused.
    #[arg(long)]
    pub no_heap_checks: bool,
    /// Most freed blocks held in quarantine at once; blocks over 64 KiB are never held, so
    /// at most N × 64 KiB of the program's memory is held back. 0 holds none (and so finds
    /// no use after free nor double free).
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub quarantine_blocks: usize,
    /// Do not schedule fairly. By default a thread that yields (sched_yield, the pause
    /// instruction, a sleep, a futex wait with a timeout) again without progress lets the
    /// threads it starved run first, so that searches end on spin loops and a program that
    /// reaches --max-steps that way is a livelock. Without it every schedule is explored,
    /// spin loops included, and such executions are cut short.
    #[arg(long)]
    pub no_fair: bool,
    /// Explore every interleaving, without partial-order reduction. By default dfs runs
    /// one execution per class of executions that differ only in the order of independent
    /// steps (dynamic partial-order reduction), and icb, alone or in the portfolio, holds
    /// back the preemptions that no execution shows to matter (bounded partial-order
    /// reduction): every execution with ≤ C preemptions is still covered, up to the order
    /// of independent steps. Reduction needs race tracing, so --no-races turns it off too;
    /// a split search (--shard) needs --no-por with dfs and icb, and runs the portfolio's
    /// trees unreduced.
    #[arg(long)]
    pub no_por: bool,
    /// Bounded partial-order reduction of icb: the default now (kept so that scripts
    /// written for it still run).
    #[arg(long, hide = true, conflicts_with_all = ["no_por", "no_races"])]
    pub bounded_por: bool,
    /// Prune dfs with a table of visited states (Holt's One Page Model Checker): at every
    /// new scheduling point the program state (registers, writable memory, the tracer's
    /// model) is hashed, and a state already seen after the same number of steps of each
    /// thread ends the execution there. Executions that take the same steps but end with
    /// another exit status or stderr output are reported as `nondeterminism`. dfs only;
    /// partial-order reduction becomes sleep sets kept with the states (`--no-por`: none).
    #[arg(long)]
    pub state_cache: bool,
    /// Make the accesses found racy in earlier executions scheduling points, to show what a
    /// race leads to: in randomised executions at once, in dfs/icb (and the portfolio's icb)
    /// by a refinement round, a new tree with the racy sites as points (the default with
    /// the portfolio, dfs and icb).
    #[arg(long, conflicts_with = "no_preempt_on_races")]
    pub preempt_on_races: bool,
    /// Do not make racy accesses scheduling points (a tree that runs out then covers the
    /// synchronisation order only, and says so).
    #[arg(long)]
    pub no_preempt_on_races: bool,
    /// Also trace memory accesses in libraries whose path contains PATTERN (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub trace_lib: Vec<String>,
    /// Do not trace libraries whose path contains PATTERN (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub no_trace_lib: Vec<String>,
    /// Start every execution from exec, not from a fork snapshot of the program taken at
    /// its first thread creation (for comparison, or as an escape hatch).
    #[arg(long)]
    pub no_snapshots: bool,
    /// Most resident memory the fork snapshots of one worker may hold (suffixes K, M, G).
    #[arg(long, default_value = "1G", value_name = "BYTES", value_parser = parse_bytes)]
    pub snapshot_memory: u64,
    /// Directory for schedule files.
    #[arg(long, default_value = "mcheck-out", value_name = "DIR")]
    pub out: PathBuf,
    /// Output options.
    #[command(flatten)]
    pub output: OutputArgs,
    /// The exit status the program is expected to end with.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub expect_exit: i32,
    /// Longest a thread may run without reaching a scheduling point, in seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECS", value_parser = parse_seconds)]
    pub execution_timeout: f64,
    /// The program to check, then its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROG")]
    pub command: Vec<OsString>,
}

/// Parses a positive, finite number of seconds.
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}

/// Parses a byte count with an optional K, M or G suffix (powers of 1024).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let scale: u64 = match unit
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return Err(format!("`{s}` is not a byte count (use e.g. 512M or 2G)")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{s}` is not a byte count (use e.g. 512M or 2G)"))
}

/// Parses a memory bound: a byte count of at least 16 MiB.
fn parse_memory(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    if n < 16 << 20 {
        return Err(format!(
            "`{s}` is too little memory for mcheck (at least 16M)"
        ));
    }
    Ok(n)
}

/// The execution budget without `--max-executions`.
pub const DEFAULT_MAX_EXECUTIONS: u64 = 1000;

/// The wall-clock budget of a search given neither `--time-limit` nor `--max-executions`
/// (nor `--shard`), in seconds: the default command ends within minutes whatever the
/// program costs per execution.
pub const DEFAULT_TIME_BUDGET_SECS: f64 = 300.0;

impl CheckArgs {
    /// The search's wall-clock budget in seconds: `--time-limit`, else the default budget
    /// when no execution budget or shard was given either, else none.
    pub fn time_budget(&self) -> Option<f64> {
        self.time_limit.or(self
            .time_budget_is_default()
            .then_some(DEFAULT_TIME_BUDGET_SECS))
    }

    /// Whether the search runs under [`DEFAULT_TIME_BUDGET_SECS`] (no budget was given).
    pub fn time_budget_is_default(&self) -> bool {
        self.time_limit.is_none() && self.max_executions.is_none() && self.shard.is_none()
    }

    /// The execution budget: `--max-executions`, else [`DEFAULT_MAX_EXECUTIONS`].
    pub fn max_executions(&self) -> u64 {
        self.max_executions.unwrap_or(DEFAULT_MAX_EXECUTIONS)
    }

    /// Whether racy accesses become scheduling points: on with the portfolio, dfs and icb
    /// unless `--no-preempt-on-races`, off with pct and random unless `--preempt-on-races`.
    pub fn preempt_on_races(&self) -> bool {
        !self.no_races
            && !self.no_preempt_on_races
            && (self.preempt_on_races
                || matches!(
                    self.strategy,
                    StrategyName::Portfolio | StrategyName::Dfs | StrategyName::Icb
                ))
    }
}

/// `--early-timeout-horizon`: seconds, not negative (`inf` allowed).
fn parse_horizon(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v >= 0.0 && !v.is_nan() => Ok(v),
        _ => Err(format!(
            "`{text}` is not a number of seconds (0 or more, or inf)"
        )),
    }
}

/// Whether `options` parse as the options of a search (`mcheck OPTIONS -- PROG`); Err
/// with the first line of the parser's error, without its `error: `.
pub fn parse_search_options(options: &[String]) -> Result<(), String> {
    let argv = std::iter::once("mcheck".to_string())
        .chain(options.iter().cloned())
        .chain(["--".to_string(), "prog".to_string()]);
    Cli::try_parse_from(argv).map(|_| ()).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or("");
        first.trim_start_matches("error: ").to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_program_and_args_after_double_dash() {
        let cli =
            Cli::try_parse_from(["mcheck", "--seed", "5", "--", "./a.out", "-x", "y"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.check.seed, 5);
        assert_eq!(cli.check.command, vec!["./a.out", "-x", "y"]);
        assert_eq!(cli.check.max_executions(), DEFAULT_MAX_EXECUTIONS);
        assert_eq!(cli.check.strategy, StrategyName::Portfolio);
    }

    #[test]
    fn the_default_command_has_a_time_budget_and_a_given_budget_replaces_it() {
        let parse = |args: &[&str]| {
            let mut all = vec!["mcheck"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--", "x"]);
            Cli::try_parse_from(all).unwrap().check
        };
        let default = parse(&[]);
        assert_eq!(default.time_budget(), Some(DEFAULT_TIME_BUDGET_SECS));
        assert!(default.time_budget_is_default());
        let counted = parse(&["--max-executions", "50"]);
        assert_eq!(counted.time_budget(), None);
        let timed = parse(&["--time-limit", "7.5"]);
        assert_eq!(timed.time_budget(), Some(7.5));
        assert!(!timed.time_budget_is_default());
        assert_eq!(parse(&["--shard", "1/2"]).time_budget(), None);
    }

    #[test]
    fn a_repeated_option_takes_its_last_value() {
        let cli = Cli::try_parse_from([
            "mcheck",
            "--max-executions",
            "5",
            "--max-executions",
            "7",
            "--",
            "x",
        ])
        .unwrap();
        assert_eq!(cli.check.max_executions(), 7);
    }

    #[test]
    fn replay_subcommand_and_a_program_named_replay() {
        let cli = Cli::try_parse_from(["mcheck", "replay", "--until", "3", "s.json"]).unwrap();
        match cli.command {
            Some(Command::Replay(r)) => {
                assert_eq!(r.until, Some(3));
                assert_eq!(r.schedule, PathBuf::from("s.json"));
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["mcheck", "--", "replay"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.check.command, vec!["replay"]);
    }

    #[test]
    fn missing_program_is_a_usage_error() {
        assert!(Cli::try_parse_from(["mcheck", "--"]).is_err());
        assert!(Cli::try_parse_from(["mcheck"]).is_err());
        assert!(Cli::try_parse_from(["mcheck", "replay"]).is_err());
    }

    #[test]
    fn seconds_must_be_positive() {
        assert!(Cli::try_parse_from(["mcheck", "--time-limit", "0", "--", "x"]).is_err());
        assert!(Cli::try_parse_from(["mcheck", "--execution-timeout", "nan", "--", "x"]).is_err());
        let cli = Cli::try_parse_from(["mcheck", "--time-limit", "1.5", "--", "x"]).unwrap();
        assert_eq!(cli.check.time_limit, Some(1.5));
    }

    #[test]
    fn memory_and_progress_options() {
        let cli = Cli::try_parse_from(["mcheck", "--max-memory", "2G", "--", "x"]).unwrap();
        assert_eq!(cli.check.max_memory, Some(2 << 30));
        assert_eq!(cli.check.progress, ProgressMode::Auto);
        assert!(Cli::try_parse_from(["mcheck", "--max-memory", "1M", "--", "x"]).is_err());
        assert!(Cli::try_parse_from(["mcheck", "--max-memory", "lots", "--", "x"]).is_err());
        let cli = Cli::try_parse_from(["mcheck", "--progress", "never", "--", "x"]).unwrap();
        assert_eq!(cli.check.progress, ProgressMode::Never);
        assert!(Cli::try_parse_from(["mcheck", "--progress", "sometimes", "--", "x"]).is_err());
    }

    #[test]
    fn test_subcommand_takes_a_binary_and_filters() {
        let cli = Cli::try_parse_from([
            "mcheck",
            "test",
            "--max-executions",
            "5",
            "--mcheck-arg=--keep-going",
            "--",
            "./t",
            "racy",
            "locks",
        ])
        .unwrap();
        match cli.command {
            Some(Command::Test(t)) => {
                assert_eq!(t.command, vec!["./t", "racy", "locks"]);
                assert_eq!(t.suite.max_executions, Some(5));
                assert_eq!(t.suite.mcheck_args, vec!["--keep-going"]);
                assert_eq!(t.suite.framework, FrameworkName::Auto);
            }
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["mcheck", "test"]).is_err());
        assert!(
            Cli::try_parse_from(["mcheck", "test", "--max-executions", "0", "--", "x"]).is_err()
        );
    }
}
