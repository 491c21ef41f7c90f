//! Test frameworks of a test binary: which one it is (Rust's libtest, GoogleTest, or none:
//! the binary is one test), how its own listing flag names its tests, and the arguments that
//! run one test alone and in the foreground.
//!
//! Recognition reads the ELF file: libtest's and GoogleTest's entry symbols, or, in a
//! stripped binary, their option names in `.rodata`. Listing runs the binary natively with
//! the framework's flag (libtest: `--list --format terse`, and `--ignored` for the ignored
//! ones; GoogleTest: `--gtest_list_tests`) and parses what it prints.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::binary::elf::ElfFile;

/// Longest a listing run may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// A test framework.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    /// Rust's libtest (`#[test]`, `rustc --test`, `cargo test`).
    Libtest,
    /// GoogleTest.
    GoogleTest,
    /// No framework recognised: the binary is one test.
    Single,
}

impl Framework {
    /// Its stable name (`libtest`, `gtest`, `single`).
    pub fn name(self) -> &'static str {
        match self {
            Framework::Libtest => "libtest",
            Framework::GoogleTest => "gtest",
            Framework::Single => "single",
        }
    }

    /// The framework of a stable name.
    pub fn from_name(name: &str) -> Option<Framework> {
        [Framework::Libtest, Framework::GoogleTest, Framework::Single]
            .into_iter()
            .find(|f| f.name() == name)
    }

    /// The arguments that run test `name` alone and in the foreground; `ignored` runs it
    /// although the framework skips it by default.
    pub fn run_args(self, name: &str, ignored: bool) -> Vec<String> {
        match self {
            Framework::Libtest => {
                let mut a = vec![
                    "--exact".to_string(),
                    name.to_string(),
                    "--test-threads=1".to_string(),
                ];
                if ignored {
                    a.push("--include-ignored".to_string());
                }
                a
            }
            Framework::GoogleTest => {
                let mut a = vec![format!("--gtest_filter={name}")];
                if ignored {
                    a.push("--gtest_also_run_disabled_tests".to_string());
                }
                a
            }
            Framework::Single => Vec::new(),
        }
    }
}

/// One test as the framework lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCase {
    /// Full name (`module::test`, `Suite.Test`), what the framework's filter takes.
    pub name: String,
    /// Skipped by the framework unless asked (`#[ignore]`, GoogleTest's `DISABLED_`).
    pub ignored: bool,
}

/// Recognises the framework of the ELF file at `path`.
pub fn detect(path: &Path) -> anyhow::Result<Framework> {
    let elf = ElfFile::load(path)?;
    let symbols = elf.function_symbols();
    let has_symbol = |part: &str| symbols.iter().any(|(n, _)| n.contains(part));
    if has_symbol("test_main_static") {
        return Ok(Framework::Libtest);
    }
    if has_symbol("7testing14InitGoogleTest") {
        return Ok(Framework::GoogleTest);
    }
    let rodata = elf.section(".rodata").map(|s| s.data).unwrap_or_default();
    if contains(rodata, b"RUST_TEST_THREADS") && contains(rodata, b"test-threads") {
        return Ok(Framework::Libtest);
    }
    if contains(rodata, b"gtest_list_tests") {
        return Ok(Framework::GoogleTest);
    }
    Ok(Framework::Single)
}

/// Whether `needle` occurs in `hay`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The tests of `binary`, in the framework's order; a [`Framework::Single`] binary is one
/// test named `single_name`.
pub fn list(
    binary: &Path,
    framework: Framework,
    single_name: &str,
) -> anyhow::Result<Vec<TestCase>> {
    match framework {
        Framework::Libtest => {
            let all = run_listing(binary, &["--list", "--format", "terse"])?;
            let ignored = run_listing(binary, &["--list", "--format", "terse", "--ignored"])?;
            let ignored: Vec<String> = parse_libtest(&ignored);
            Ok(parse_libtest(&all)
                .into_iter()
                .map(|name| TestCase {
                    ignored: ignored.contains(&name),
                    name,
                })
                .collect())
        }
        Framework::GoogleTest => Ok(parse_gtest(&run_listing(binary, &["--gtest_list_tests"])?)),
        Framework::Single => Ok(vec![TestCase {
            name: single_name.to_string(),
            ignored: false,
        }]),
    }
}

/// Runs `binary ARGS` natively and returns its stdout; a failure is an error with its
/// stderr.
fn run_listing(binary: &Path, args: &[&str]) -> anyhow::Result<String> {
    let shown = format!("{} {}", binary.display(), args.join(" "));
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running `{shown}` to list the tests"))?;
    // Read both pipes on their own threads: a listing larger than a pipe's buffer would
    // otherwise block the binary.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().context("waiting for the listing")? {
            break s;
        }
        if start.elapsed() > LIST_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{shown}` did not end within {} s", LIST_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    if !status.success() {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        bail!("`{shown}` failed ({status}) listing the tests: {last}");
    }
    Ok(out)
}

/// Test names from libtest's `--list --format terse` (`NAME: test` lines; benchmarks are
/// left out).
pub fn parse_libtest(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

/// Tests from GoogleTest's `--gtest_list_tests`: `Suite.` lines, each followed by indented
/// test names; comments (`# GetParam() = ...`, `# TypeParam = ...`) are dropped, and a
/// suite or test named `DISABLED_...` is ignored. Lines before the first suite
/// (`Running main() from gtest_main.cc`) are not tests.
pub fn parse_gtest(text: &str) -> Vec<TestCase> {
    let mut suite: Option<String> = None;
    let mut tests = Vec::new();
    for line in text.lines() {
        let body = line.split('#').next().unwrap_or("").trim_end();
        if body.is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            suite = body
                .strip_suffix('.')
                .filter(|s| !s.is_empty() && !s.contains(' '))
                .map(str::to_string);
        } else if let Some(s) = &suite {
            let test = body.trim();
            if test.contains(' ') {
                continue;
            }
            tests.push(TestCase {
                name: format!("{s}.{test}"),
                ignored: s.starts_with("DISABLED_")
                    || s.contains("/DISABLED_")
                    || test.starts_with("DISABLED_"),
            });
        }
    }
    tests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_listing() {
        let text = "a::b: test\nbench_x: benchmark\nc: test\n";
        assert_eq!(parse_libtest(text), vec!["a::b", "c"]);
    }

    #[test]
    fn gtest_listing() {
        let text = "Running main() from ./googletest/src/gtest_main.cc\nCounter.\n  Racy\n  DISABLED_Slow\nInst/Param.  # TypeParam = int\n  Get/0  # GetParam() = 1\nDISABLED_Suite.\n  T\n";
        let names: Vec<(String, bool)> = parse_gtest(text)
            .into_iter()
            .map(|t| (t.name, t.ignored))
            .collect();
        assert_eq!(
            names,
            vec![
                ("Counter.Racy".to_string(), false),
                ("Counter.DISABLED_Slow".to_string(), true),
                ("Inst/Param.Get/0".to_string(), false),
                ("DISABLED_Suite.T".to_string(), true),
            ]
        );
    }

    #[test]
    fn run_arguments() {
        assert_eq!(
            Framework::Libtest.run_args("m::t", false),
            vec!["--exact", "m::t", "--test-threads=1"]
        );
        assert_eq!(
            Framework::GoogleTest.run_args("S.T", true),
            vec!["--gtest_filter=S.T", "--gtest_also_run_disabled_tests"]
        );
        assert!(Framework::Single.run_args("x", false).is_empty());
    }
}
