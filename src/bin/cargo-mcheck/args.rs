//! The command line of `cargo mcheck`: cargo's options that choose and build the test
//! targets (passed to `cargo test --no-run`), the options of `mcheck test` (passed to it for
//! each test binary), `--out`, which `cargo mcheck` divides among the binaries, and the
//! filters after `--`.

use std::path::PathBuf;

/// Cargo options without a value that select or build test targets.
const CARGO_FLAGS: &[&str] = &[
    "--release",
    "--workspace",
    "--all",
    "--lib",
    "--bins",
    "--tests",
    "--examples",
    "--benches",
    "--all-targets",
    "--all-features",
    "--no-default-features",
    "--offline",
    "--frozen",
    "--locked",
    "-q",
    "--quiet",
    "-v",
    "--verbose",
];

/// Cargo options with a value (`--opt VALUE` or `--opt=VALUE`).
const CARGO_VALUES: &[&str] = &[
    "-p",
    "--package",
    "--exclude",
    "--manifest-path",
    "--bin",
    "--test",
    "--example",
    "--bench",
    "-F",
    "--features",
    "--profile",
    "--target-dir",
    "--config",
    "-Z",
];

/// Options of `mcheck test` that take a value: the next argument belongs to them.
const MCHECK_VALUES: &[&str] = &[
    "--framework",
    "--max-executions",
    "--time-limit",
    "--total-time-limit",
    "--jobs",
    "--shard",
    "--skip",
    "--strategy",
    "--seed",
    "--classname",
    "--baseline",
    "--mcheck-arg",
];

/// What `cargo mcheck` was asked to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CargoMcheckArgs {
    /// Arguments for `cargo test --no-run`.
    pub cargo: Vec<String>,
    /// Arguments for each `mcheck test`, before its `--`.
    pub mcheck: Vec<String>,
    /// `--out DIR` (default: `TARGET_DIR/mcheck`).
    pub out: Option<PathBuf>,
    /// `--manifest-path` (also passed to cargo), for `cargo metadata`.
    pub manifest_path: Option<String>,
    /// `--list`: list the tests, check nothing.
    pub list: bool,
    /// The user gave `--classname` (each binary then does not get its own).
    pub classname: bool,
    /// Test name filters (after `--`).
    pub filters: Vec<String>,
    /// `--help`.
    pub help: bool,
    /// `--version`.
    pub version: bool,
}

/// Sorts the arguments (without the program name and cargo's `mcheck`).
pub fn parse(args: &[String]) -> Result<CargoMcheckArgs, String> {
    let mut out = CargoMcheckArgs::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        // The value of an option: inline, or the next argument.
        let value = |i: &mut usize| -> Result<String, String> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            *i += 1;
            args.get(*i)
                .cloned()
                .ok_or_else(|| format!("option `{name}` needs a value"))
        };
        match name {
            "--" => {
                out.filters.extend_from_slice(&args[i + 1..]);
                break;
            }
            "-h" | "--help" => out.help = true,
            "-V" | "--version" => out.version = true,
            "--out" => out.out = Some(PathBuf::from(value(&mut i)?)),
            "--list" => {
                out.list = true;
                out.mcheck.push(a.clone());
            }
            "--manifest-path" => {
                let v = value(&mut i)?;
                out.cargo.push(format!("--manifest-path={v}"));
                out.manifest_path = Some(v);
            }
            n if CARGO_FLAGS.contains(&n) => out.cargo.push(a.clone()),
            n if CARGO_VALUES.contains(&n) => {
                let v = value(&mut i)?;
                out.cargo.push(name.to_string());
                out.cargo.push(v);
            }
            n if MCHECK_VALUES.contains(&n) => {
                if n == "--classname" {
                    out.classname = true;
                }
                let v = value(&mut i)?;
                out.mcheck.push(format!("{name}={v}"));
            }
            n if n.starts_with('-') => out.mcheck.push(a.clone()),
            _ => out.filters.push(a.clone()),
        }
        i += 1;
    }
    Ok(out)
}

/// The help text.
pub const HELP: &str = "\
cargo mcheck: check each test of a crate's test targets with mcheck, each test as its own search

Usage: cargo mcheck [CARGO OPTIONS] [MCHECK TEST OPTIONS] [FILTER...] [-- FILTER...]

Builds the test targets with `cargo test --no-run`, then runs `mcheck test` on every test
executable and writes one combined test.json, junit.xml, results.sarif and summary.txt
into --out (each binary's own outputs go into a directory of its own below it).

Cargo options (passed to `cargo test --no-run`):
  --release, --profile NAME, -p/--package SPEC, --workspace, --exclude SPEC,
  --manifest-path PATH, --lib, --bins, --bin NAME, --tests, --test NAME, --examples,
  --example NAME, --benches, --bench NAME, --all-targets, -F/--features F,
  --all-features, --no-default-features, --target-dir DIR, --offline, --frozen, --locked

mcheck test options (see `mcheck test --help`):
  --out DIR                 output directory [default: TARGET_DIR/mcheck]
  --max-executions N        executions of each test's search [default: 1000]
  --time-limit SECS         budget of each test
  --total-time-limit SECS   budget of each test binary's run
  --jobs N                  tests checked at once
  --shard I/N               check shard I of N of each binary's tests
  --include-ignored         check ignored tests too
  --exact, --skip PATTERN   whole-name filters; leave tests out
  --list                    list the tests, check nothing
  --strategy S, --seed N, --no-native-run, --baseline FILE, --mcheck-arg OPTION

Exit status: 0 nothing found, 1 a test has a finding or fails without mcheck,
2 bad usage or the build failed, 3 internal failure.
";

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sorts_cargo_and_mcheck_options() {
        let a = parse(&strings(&[
            "--release",
            "-p",
            "demo",
            "--max-executions",
            "50",
            "--out=o",
            "--include-ignored",
            "--manifest-path",
            "x/Cargo.toml",
            "threads",
            "--",
            "--weird",
        ]))
        .unwrap();
        assert_eq!(
            a.cargo,
            strings(&["--release", "-p", "demo", "--manifest-path=x/Cargo.toml"])
        );
        assert_eq!(
            a.mcheck,
            strings(&["--max-executions=50", "--include-ignored"])
        );
        assert_eq!(a.out, Some(PathBuf::from("o")));
        assert_eq!(a.manifest_path.as_deref(), Some("x/Cargo.toml"));
        assert_eq!(a.filters, strings(&["threads", "--weird"]));
    }

    #[test]
    fn a_missing_value_is_an_error() {
        assert!(parse(&strings(&["--out"])).is_err());
        assert!(parse(&strings(&["-p"])).is_err());
    }
}
