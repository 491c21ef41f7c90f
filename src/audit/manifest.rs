//! The audit manifest (TOML): global settings and a list of targets, each with its command,
//! environment, working directory, input files, budget, strategy, options, expected exit
//! status and suppressions. Parsing rejects unknown keys and bad values with the line they
//! are on.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde::Deserialize;
use toml::Spanned;

use crate::explore::StrategyName;
use crate::report::FindingKind;

/// Executions a target gets when the manifest gives it no budget (mcheck's own default).
pub const DEFAULT_MAX_EXECUTIONS: u64 = 1000;

/// Options a target may not pass in `options`, because the audit sets them itself.
const RESERVED_OPTIONS: &[&str] = &[
    "--json",
    "--out",
    "--seed",
    "--strategy",
    "--max-executions",
    "--time-limit",
    "--jobs",
    "--expect-exit",
    "--progress",
];

/// A manifest that cannot be used: where and why.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", path.display(), line.map_or(String::new(), |l| format!(":{l}")))]
pub struct ManifestError {
    /// The manifest file.
    pub path: PathBuf,
    /// 1-based line of the offending key or value, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// A whole audit: what to check and with which global limits.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The manifest file.
    pub path: PathBuf,
    /// Its directory: relative paths in the manifest are relative to it.
    pub dir: PathBuf,
    /// Targets run at once (overridden by `--jobs`).
    pub jobs: Option<u32>,
    /// Budget of the whole audit, in seconds.
    pub time_limit: Option<f64>,
    /// The source tree's root: source files under it appear in SARIF relative to it (as
    /// code-scanning dashboards expect), with base id `SRCROOT`.
    pub source_root: Option<PathBuf>,
    /// The targets, in manifest order.
    pub targets: Vec<Target>,
}

/// One program to check.
#[derive(Debug, Clone)]
pub struct Target {
    /// Unique name (test case name in JUnit, directory name in the output).
    pub name: String,
    /// Program (resolved against the manifest's directory when relative with a `/`) and
    /// its arguments.
    pub command: Vec<String>,
    /// Environment variables added to mcheck's own.
    pub env: BTreeMap<String, String>,
    /// Working directory of the program.
    pub dir: PathBuf,
    /// Files that must exist before the target runs (resolved like `dir`).
    pub inputs: Vec<PathBuf>,
    /// Most executions.
    pub max_executions: u64,
    /// Most seconds.
    pub time_limit: Option<f64>,
    /// Scheduling strategy.
    pub strategy: StrategyName,
    /// Base seed.
    pub seed: u64,
    /// Worker threads of this target's search (default: the audit's share of CPUs).
    pub jobs: Option<u32>,
    /// Further mcheck options (`--keep-going`, `--no-races`...).
    pub options: Vec<String>,
    /// Exit status the program should end with.
    pub expect_exit: i32,
    /// Split this target's search over all shards (see [`super::shard`]).
    pub split: bool,
    /// Findings that are known and not to be reported.
    pub suppress: Vec<Suppression>,
}

/// A finding that is accepted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppression {
    /// What it matches.
    pub matcher: Matcher,
    /// Why it is accepted.
    pub reason: String,
}

/// What a suppression matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// A finding fingerprint.
    Fingerprint(String),
    /// Every finding of a kind.
    Kind(FindingKind),
    /// Findings with a location whose `file:line` (file name or path suffix) or function
    /// name equals this.
    Location(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    jobs: Option<Spanned<u32>>,
    time_limit: Option<Spanned<f64>>,
    source_root: Option<String>,
    #[serde(default, rename = "target")]
    targets: Vec<Spanned<RawTarget>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    name: Spanned<String>,
    command: Spanned<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    dir: Option<String>,
    #[serde(default)]
    inputs: Vec<Spanned<String>>,
    max_executions: Option<Spanned<u64>>,
    time_limit: Option<Spanned<f64>>,
    strategy: Option<Spanned<String>>,
    seed: Option<u64>,
    jobs: Option<Spanned<u32>>,
    options: Option<Spanned<Vec<String>>>,
    expect_exit: Option<i32>,
    #[serde(default)]
    split: Option<Spanned<bool>>,
    output_check: Option<bool>,
    #[serde(default)]
    suppress: Vec<Spanned<RawSuppression>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuppression {
    fingerprint: Option<String>,
    kind: Option<String>,
    location: Option<String>,
    reason: Option<String>,
}

impl Manifest {
    /// Reads and validates the manifest at `path`; targets' `options` are checked with
    /// `parser`.
    pub fn load(path: &Path, parser: OptionsParser) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot read the manifest: {e}"),
        })?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // Targets run in their own working directory: anchor paths absolutely.
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        Self::parse(&text, path, &dir, parser)
    }

    /// Parses manifest text; `path` names it in errors, `dir` anchors relative paths,
    /// `parser` checks targets' `options`.
    pub fn parse(
        text: &str,
        path: &Path,
        dir: &Path,
        parser: OptionsParser,
    ) -> Result<Manifest, ManifestError> {
        let err = |span: Option<Range<usize>>, message: String| ManifestError {
            path: path.to_path_buf(),
            line: span.map(|s| line_of(text, s.start)),
            message,
        };
        let raw: RawManifest =
            toml::from_str(text).map_err(|e| err(e.span(), e.message().trim().to_string()))?;
        if let Some(j) = &raw.jobs {
            if *j.get_ref() == 0 {
                return Err(err(Some(j.span()), "`jobs` must be at least 1".into()));
            }
        }
        let time_limit = raw
            .time_limit
            .as_ref()
            .map(|t| positive_seconds(t, "time_limit").map_err(|m| err(Some(t.span()), m)))
            .transpose()?;
        if raw.targets.is_empty() {
            return Err(err(
                None,
                "the manifest has no targets (add a `[[target]]` table with `name` and `command`)"
                    .into(),
            ));
        }
        let mut targets: Vec<Target> = Vec::new();
        for t in raw.targets {
            let span = t.span();
            let t = t.into_inner();
            let target = Target::from_raw(t, dir, parser).map_err(|(s, m)| err(Some(s), m))?;
            if targets.iter().any(|o| o.name == target.name) {
                return Err(err(
                    Some(span),
                    format!("two targets are named `{}`", target.name),
                ));
            }
            targets.push(target);
        }
        Ok(Manifest {
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
            jobs: raw.jobs.map(Spanned::into_inner),
            time_limit,
            source_root: raw.source_root.as_deref().map(|r| anchor(dir, r)),
            targets,
        })
    }
}

type SpanError = (Range<usize>, String);

impl Target {
    fn from_raw(t: RawTarget, dir: &Path, parser: OptionsParser) -> Result<Target, SpanError> {
        let name = t.name.get_ref().trim().to_string();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            || name.starts_with('.')
        {
            return Err((
                t.name.span(),
                format!(
                    "target name `{}` must be non-empty and made of letters, digits, `-`, `_` and `.`",
                    t.name.get_ref()
                ),
            ));
        }
        let command = t.command.get_ref().clone();
        if command.is_empty() || command[0].is_empty() {
            return Err((
                t.command.span(),
                format!("target `{name}`: `command` must name the program to check"),
            ));
        }
        let mut command = command;
        if command[0].contains('/') {
            command[0] = anchor(dir, &command[0]).to_string_lossy().into_owned();
        }
        let max_executions = match &t.max_executions {
            Some(m) if *m.get_ref() == 0 => {
                return Err((
                    m.span(),
                    format!("target `{name}`: `max_executions` must be at least 1"),
                ))
            }
            Some(m) => *m.get_ref(),
            None => DEFAULT_MAX_EXECUTIONS,
        };
        let time_limit = t
            .time_limit
            .as_ref()
            .map(|s| {
                positive_seconds(s, "time_limit")
                    .map_err(|m| (s.span(), format!("target `{name}`: {m}")))
            })
            .transpose()?;
        let strategy = match &t.strategy {
            Some(s) => StrategyName::from_str(s.get_ref(), false).map_err(|_| {
                (
                    s.span(),
                    format!(
                        "target `{name}`: unknown strategy `{}` (portfolio, dfs, icb, pct, pos or random)",
                        s.get_ref()
                    ),
                )
            })?,
            None => StrategyName::Portfolio,
        };
        if let Some(j) = &t.jobs {
            if *j.get_ref() == 0 || *j.get_ref() > 256 {
                return Err((
                    j.span(),
                    format!("target `{name}`: `jobs` must be 1 to 256"),
                ));
            }
        }
        let mut options = match &t.options {
            Some(o) => {
                check_options(o.get_ref(), parser)
                    .map_err(|m| (o.span(), format!("target `{name}`: {m}")))?;
                o.get_ref().clone()
            }
            None => Vec::new(),
        };
        // `output_check = false`: the program's output legitimately depends on the
        // schedule; `true` (the default) is said explicitly, after options that turned it
        // off.
        let flag = match t.output_check {
            Some(true) => Some("--output-check"),
            Some(false) => Some("--no-output-check"),
            None => None,
        };
        if let Some(flag) = flag.filter(|f| !options.iter().any(|o| o == f)) {
            options.push(flag.into());
        }
        let split = t.split.as_ref().is_some_and(|s| *s.get_ref());
        let has = |flag: &str| options.iter().any(|o| o == flag);
        let reduced = matches!(strategy, StrategyName::Dfs | StrategyName::Icb)
            && !has("--no-por")
            && !has("--no-races");
        if split && (reduced || has("--state-cache")) {
            let span = t.split.as_ref().map(Spanned::span).unwrap_or_default();
            return Err((
                span,
                format!(
                    "target `{name}`: `split` divides the unreduced tree among the shards: a dfs or icb target needs options = [\"--no-por\"] and no \"--state-cache\" (or use the portfolio, whose trees are unreduced when split)"
                ),
            ));
        }
        let mut suppress = Vec::new();
        for s in &t.suppress {
            suppress.push(
                Suppression::from_raw(s.get_ref())
                    .map_err(|m| (s.span(), format!("target `{name}`: {m}")))?,
            );
        }
        let target_dir = t
            .dir
            .as_deref()
            .map_or_else(|| dir.to_path_buf(), |d| anchor(dir, d));
        let inputs = t
            .inputs
            .iter()
            .map(|i| anchor(&target_dir, i.get_ref()))
            .collect();
        Ok(Target {
            name,
            command,
            env: t.env,
            dir: target_dir,
            inputs,
            max_executions,
            time_limit,
            strategy,
            seed: t.seed.unwrap_or(0),
            jobs: t.jobs.map(Spanned::into_inner),
            options,
            expect_exit: t.expect_exit.unwrap_or(0),
            split,
            suppress,
        })
    }

    /// The strategy's name as mcheck's `--strategy` spells it.
    pub fn strategy_name(&self) -> String {
        self.strategy
            .to_possible_value()
            .map_or_else(|| "portfolio".into(), |v| v.get_name().to_string())
    }
}

impl Suppression {
    fn from_raw(s: &RawSuppression) -> Result<Suppression, String> {
        let reason = match &s.reason {
            Some(r) if !r.trim().is_empty() => r.trim().to_string(),
            _ => return Err("a suppression needs a `reason`".into()),
        };
        let matcher = match (&s.fingerprint, &s.kind, &s.location) {
            (Some(f), None, None) => Matcher::Fingerprint(f.trim().to_string()),
            (None, Some(k), None) => Matcher::Kind(
                serde_json::from_value(serde_json::Value::String(k.clone()))
                    .map_err(|_| format!("unknown finding kind `{k}` in a suppression"))?,
            ),
            (None, None, Some(l)) => Matcher::Location(l.trim().to_string()),
            _ => {
                return Err(
                    "a suppression needs exactly one of `fingerprint`, `kind` or `location`".into(),
                )
            }
        };
        Ok(Suppression { matcher, reason })
    }
}

/// `p` relative to `dir` unless absolute.
fn anchor(dir: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

fn positive_seconds(s: &Spanned<f64>, key: &str) -> Result<f64, String> {
    let v = *s.get_ref();
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!(
            "`{key}` must be a positive number of seconds, not {v}"
        ))
    }
}

/// Why extra mcheck options of a target cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionsError {
    /// An option the batch run sets itself (`--json`, `--out`...).
    Reserved(String),
    /// A `--` (the program comes from elsewhere).
    DoubleDash,
    /// Not an mcheck search option, or a bad value: the first line of the parser's error.
    Bad(String),
}

/// mcheck's own parser of search options (the CLI's, which stands above the audit): Err
/// with the first line of its error when `options` are not options of a search.
pub type OptionsParser<'p> = &'p dyn Fn(&[String]) -> Result<(), String>;

/// Checks that `options` are mcheck search options (by `parser`) the audit (or `mcheck
/// test`) does not set itself.
pub fn check_search_options(options: &[String], parser: OptionsParser) -> Result<(), OptionsError> {
    for o in options {
        let flag = o.split('=').next().unwrap_or(o);
        if RESERVED_OPTIONS.contains(&flag) {
            return Err(OptionsError::Reserved(flag.to_string()));
        }
        if o == "--" {
            return Err(OptionsError::DoubleDash);
        }
    }
    parser(options).map_err(OptionsError::Bad)
}

/// Checks that `options` are mcheck search options the audit does not set itself.
fn check_options(options: &[String], parser: OptionsParser) -> Result<(), String> {
    check_search_options(options, parser).map_err(|e| match e {
        OptionsError::Reserved(flag) => {
            format!("option `{flag}` is set by the audit; use the target's own key instead")
        }
        OptionsError::DoubleDash => {
            "`options` may not contain `--`; the program goes in `command`".into()
        }
        OptionsError::Bad(first) => format!("bad `options`: {first}"),
    })
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let parser = crate::cli::parse_search_options;
        Manifest::parse(text, Path::new("audit.toml"), Path::new("/m"), &parser)
    }

    #[test]
    fn smallest_manifest() {
        let m = parse(
            "[[target]]\nname = \"orders\"\ncommand = [\"/opt/app/bin/orders\", \"--threads\", \"4\"]\nmax_executions = 300\n",
        )
        .unwrap();
        let t = &m.targets[0];
        assert_eq!(t.name, "orders");
        assert_eq!(t.command, ["/opt/app/bin/orders", "--threads", "4"]);
        assert_eq!(t.max_executions, 300);
        assert_eq!(t.strategy, StrategyName::Portfolio);
        assert_eq!(t.dir, Path::new("/m"));
    }

    #[test]
    fn full_key_set() {
        let m = parse(
            r#"
jobs = 2
time_limit = 600
source_root = "src"
[[target]]
name = "a"
command = ["bin/a", "x"]
env = { K = "v" }
dir = "work"
inputs = ["data.txt"]
max_executions = 10
time_limit = 5.5
strategy = "random"
seed = 7
jobs = 1
options = ["--keep-going", "--no-fair"]
expect_exit = 3
split = true
output_check = false
[[target.suppress]]
kind = "data_race"
reason = "benign flag"
[[target.suppress]]
fingerprint = "abc"
reason = "known"
[[target.suppress]]
location = "a.c:3"
reason = "third party"
"#,
        )
        .unwrap();
        assert_eq!(m.jobs, Some(2));
        assert_eq!(m.time_limit, Some(600.0));
        assert_eq!(m.source_root, Some(PathBuf::from("/m/src")));
        let t = &m.targets[0];
        assert_eq!(t.command[0], "/m/bin/a");
        assert_eq!(t.dir, Path::new("/m/work"));
        assert_eq!(t.inputs, [PathBuf::from("/m/work/data.txt")]);
        assert_eq!(t.env["K"], "v");
        assert_eq!(t.strategy_name(), "random");
        assert!(t.split);
        assert_eq!(
            t.options,
            ["--keep-going", "--no-fair", "--no-output-check"]
        );
        assert_eq!(t.suppress.len(), 3);
        assert_eq!(t.suppress[0].matcher, Matcher::Kind(FindingKind::DataRace));
    }

    #[test]
    fn errors_name_the_line() {
        let e =
            parse("[[target]]\nname = \"a\"\ncommand = [\"x\"]\nmax_executons = 3\n").unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.to_string().contains("max_executons"), "{e}");
        let e = parse("[[target]]\nname = \"a\"\ncommand = [\"x\"]\nmax_executions = -3\n")
            .unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        let e = parse("[[target]]\nname = \"a\"\n\ncommand = []\n").unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        let e = parse("[[target]]\nname = \"a\"\n").unwrap_err();
        assert!(e.to_string().contains("command"), "{e}");
        let e =
            parse("[[target]]\nname = \"a\"\ncommand = [\"x\"]\ntime_limit = -1\n").unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        let e =
            parse("[[target]]\nname = \"a\"\ncommand = [\"x\"]\noptions = [\"--seed\", \"3\"]\n")
                .unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        let e = parse("[[target]]\nname = \"a\"\ncommand = [\"x\"]\noptions = [\"--bogus\"]\n")
            .unwrap_err();
        assert!(e.to_string().contains("--bogus"), "{e}");
        let e = parse(
            "[[target]]\nname = \"a\"\ncommand = [\"x\"]\n[[target]]\nname = \"a\"\ncommand = [\"y\"]\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("two targets"), "{e}");
        assert!(parse("").is_err());
        // A reduced dfs or icb cannot be split; the portfolio can (its trees are
        // unreduced when sharded).
        for strategy in ["dfs", "icb"] {
            let e = parse(&format!(
                "[[target]]\nname = \"a\"\ncommand = [\"x\"]\nstrategy = \"{strategy}\"\nsplit = true\n"
            ))
            .unwrap_err();
            assert!(e.to_string().contains("split"), "{e}");
        }
        assert!(parse("[[target]]\nname = \"a\"\ncommand = [\"x\"]\nsplit = true\n").is_ok());
    }
}
