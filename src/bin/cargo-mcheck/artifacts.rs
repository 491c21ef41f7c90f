//! The test executables of a cargo build: `cargo test --no-run --message-format=json`'s
//! `compiler-artifact` messages with a test profile and an executable, named the way
//! cargo-nextest names test binaries (`pkg` for the library's unit tests, `pkg::name` for an
//! integration test, `pkg::bin/name` for a binary's...), and the package each belongs to
//! from `cargo metadata`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use serde_json::Value;

/// One test executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestExecutable {
    /// nextest-style binary id (`demo`, `demo::threads`, `demo::bin/tool`).
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// Its package's directory (the tests run there, as under `cargo test`).
    pub package_dir: PathBuf,
    /// Its package's name and version.
    pub package: (String, String),
}

/// Workspace facts from `cargo metadata`.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// The target directory.
    pub target_directory: PathBuf,
    /// The workspace's root directory.
    pub workspace_root: PathBuf,
    /// Package id → (name, version).
    pub packages: BTreeMap<String, (String, String)>,
}

/// The cargo executable (`$CARGO` when cargo runs us, else `cargo`).
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Runs `cargo metadata --no-deps`.
pub fn metadata(manifest_path: Option<&str>, offline: bool) -> anyhow::Result<Metadata> {
    let mut cmd = Command::new(cargo());
    cmd.args(["metadata", "--no-deps", "--format-version", "1"]);
    if let Some(m) = manifest_path {
        cmd.arg(format!("--manifest-path={m}"));
    }
    if offline {
        cmd.arg("--offline");
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .context("running `cargo metadata`")?;
    if !out.status.success() {
        bail!("`cargo metadata` failed ({})", out.status);
    }
    let v: Value = serde_json::from_slice(&out.stdout).context("reading `cargo metadata`")?;
    let packages = v["packages"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((
                        p["id"].as_str()?.to_string(),
                        (
                            p["name"].as_str()?.to_string(),
                            p["version"].as_str().unwrap_or("").to_string(),
                        ),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Metadata {
        target_directory: PathBuf::from(v["target_directory"].as_str().unwrap_or("target")),
        workspace_root: PathBuf::from(v["workspace_root"].as_str().unwrap_or(".")),
        packages,
    })
}

/// Builds the test targets (`cargo test --no-run ARGS`, diagnostics on stderr) and returns
/// their executables in build order.
pub fn build(args: &[String], meta: &Metadata) -> anyhow::Result<Vec<TestExecutable>> {
    let out = Command::new(cargo())
        .args([
            "test",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running `cargo test --no-run`")?;
    if !out.status.success() {
        bail!("`cargo test --no-run` failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|m| executable(&m, meta))
        .collect())
}

/// The test executable of one JSON message, if it is one.
pub fn executable(m: &Value, meta: &Metadata) -> Option<TestExecutable> {
    if m["reason"] != "compiler-artifact" || m["profile"]["test"] != true {
        return None;
    }
    let path = PathBuf::from(m["executable"].as_str()?);
    let target = &m["target"];
    let name = target["name"].as_str()?;
    let kind = target["kind"]
        .as_array()
        .and_then(|k| k.first())
        .and_then(Value::as_str)
        .unwrap_or("lib");
    let package_id = m["package_id"].as_str().unwrap_or("");
    let package = meta
        .packages
        .get(package_id)
        .cloned()
        .unwrap_or_else(|| (name.to_string(), String::new()));
    let id = match kind {
        "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro" => package.0.clone(),
        "test" => format!("{}::{name}", package.0),
        other => format!("{}::{other}/{name}", package.0),
    };
    let package_dir = m["manifest_path"]
        .as_str()
        .map(PathBuf::from)
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    Some(TestExecutable {
        id,
        path,
        package_dir,
        package,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_artifacts_and_their_ids() {
        let mut meta = Metadata::default();
        meta.packages.insert(
            "path+file:///w/demo#0.1.0".into(),
            ("demo".into(), "0.1.0".into()),
        );
        let msg = |kind: &str, name: &str, test: bool, exe: Option<&str>| {
            serde_json::json!({
                "reason": "compiler-artifact",
                "package_id": "path+file:///w/demo#0.1.0",
                "manifest_path": "/w/demo/Cargo.toml",
                "target": {"kind": [kind], "name": name},
                "profile": {"test": test},
                "executable": exe,
            })
        };
        let lib = executable(&msg("lib", "demo", true, Some("/t/demo-1")), &meta).unwrap();
        assert_eq!(lib.id, "demo");
        assert_eq!(lib.package_dir, PathBuf::from("/w/demo"));
        let it = executable(&msg("test", "threads", true, Some("/t/threads-2")), &meta).unwrap();
        assert_eq!(it.id, "demo::threads");
        let bin = executable(&msg("bin", "tool", true, Some("/t/tool-3")), &meta).unwrap();
        assert_eq!(bin.id, "demo::bin/tool");
        assert!(executable(&msg("bin", "tool", false, Some("/t/tool")), &meta).is_none());
        assert!(executable(&msg("lib", "demo", true, None), &meta).is_none());
        assert!(executable(&serde_json::json!({"reason": "build-finished"}), &meta).is_none());
    }
}
