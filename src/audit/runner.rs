//! Running targets: each target is one `mcheck --json ... -- PROG` child process (so a
//! target that crashes, hangs or cannot start fails alone), at most `jobs` at a time, inside
//! the audit's global time budget. Every target writes into its own directory under
//! `OUT/targets/NAME/`: `report.json`, `stderr.txt` (mcheck's human report) and its
//! schedule files. SIGINT, SIGTERM, SIGHUP or SIGQUIT is passed on to the running targets
//! (each in a process group of its own, so that it gets the signal once), which end their
//! searches with a report; targets not started yet are skipped. A job may first run its
//! program once without mcheck (`mcheck test`): if that fails, the target is not searched.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::Digest;

use super::manifest::Target;
use super::native;
use super::record::NativeRun;
use super::shard::Share;

/// Extra time a target gets past its own time limit before it is killed (mcheck ends the
/// running execution and writes its report within that).
const GRACE: Duration = Duration::from_secs(30);

/// One target to run, with the part of its search this shard runs.
#[derive(Debug, Clone)]
pub struct Job {
    /// The target.
    pub target: Target,
    /// Seed and executions of a split target's share (None: the whole target).
    pub share: Option<Share>,
    /// Run the program once without mcheck first, and search it only if that passes.
    pub native_first: bool,
    /// Not to be run at all: why (an ignored test).
    pub skip: Option<String>,
}

impl Job {
    /// A whole target, run as it is.
    pub fn whole(target: Target) -> Job {
        Job {
            target,
            share: None,
            native_first: false,
            skip: None,
        }
    }
}

/// How one target's run ended.
#[derive(Debug)]
pub struct Outcome {
    /// mcheck's exit status (None: killed or not started).
    pub exit_code: Option<i32>,
    /// The JSON report, when mcheck wrote one.
    pub report: Option<serde_json::Value>,
    /// Why the target could not be checked.
    pub error: Option<String>,
    /// Not run at all: the audit's budget was spent.
    pub skipped: bool,
    /// Wall time.
    pub elapsed: Duration,
    /// The run without mcheck, when the job asked for one.
    pub native: Option<NativeRun>,
}

/// Settings of a batch.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The mcheck executable to run targets with.
    pub mcheck: PathBuf,
    /// Output directory (targets go in `targets/NAME/`).
    pub out: PathBuf,
    /// Targets run at once.
    pub jobs: usize,
    /// Search workers per target when the target does not say.
    pub workers: usize,
    /// End of the audit's time budget.
    pub deadline: Option<Instant>,
}

impl Batch {
    /// A batch of `count` jobs, `jobs` of them at once (default: one per CPU), each search
    /// with its share of the CPUs as workers.
    pub fn sized(
        mcheck: PathBuf,
        out: PathBuf,
        jobs: Option<u32>,
        count: usize,
        deadline: Option<Instant>,
    ) -> Batch {
        let cpus = crate::tracee::cpu::available_cpus().max(1);
        let jobs = jobs.map_or(cpus, |j| j as usize).max(1);
        let running = jobs.min(count).max(1);
        Batch {
            mcheck,
            out,
            jobs,
            workers: (cpus / running).max(1),
            deadline,
        }
    }
}

/// The directory of target `name`'s outputs. A name that is not safe as a file name (a
/// test's `module::name`, `Suite/Param.Test/0`) is spelt with `.` for `::` and `_` for
/// other characters, and a hash of the name keeps it apart from names spelt alike.
pub fn target_dir(out: &Path, name: &str) -> PathBuf {
    out.join("targets").join(dir_name(name))
}

/// A file name for target `name` (see [`target_dir`]).
pub fn dir_name(name: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    if !name.is_empty() && name.chars().all(safe) && !name.starts_with('.') {
        return name.to_string();
    }
    let spelt: String = name
        .replace("::", ".")
        .chars()
        .map(|c| if safe(c) { c } else { '_' })
        .take(80)
        .collect();
    let hash = sha2::Sha256::digest(name.as_bytes());
    format!(
        "{}-{:02x}{:02x}{:02x}{:02x}",
        spelt.trim_start_matches('.'),
        hash[0],
        hash[1],
        hash[2],
        hash[3]
    )
}

/// Runs `jobs` in parallel; outcomes in the same order.
pub fn run_all(batch: &Batch, jobs: &[Job]) -> Vec<Outcome> {
    run_all_reporting(batch, jobs, &|_, _| {})
}

/// [`run_all`], calling `done` with each job's index and outcome as it ends.
pub fn run_all_reporting(
    batch: &Batch,
    jobs: &[Job],
    done: &(dyn Fn(usize, &Outcome) + Sync),
) -> Vec<Outcome> {
    let queue: Mutex<VecDeque<usize>> = Mutex::new((0..jobs.len()).collect());
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..batch.jobs.clamp(1, jobs.len().max(1)) {
            s.spawn(|| loop {
                let next = queue.lock().expect("queue lock").pop_front();
                let Some(i) = next else { break };
                let outcome = run_one(batch, &jobs[i]);
                done(i, &outcome);
                results.lock().expect("results lock")[i] = Some(outcome);
            });
        }
    });
    results
        .into_inner()
        .expect("results lock")
        .into_iter()
        .map(|o| o.expect("every job ran"))
        .collect()
}

/// Runs one target.
pub fn run_one(batch: &Batch, job: &Job) -> Outcome {
    let start = Instant::now();
    let t = &job.target;
    let fail = |error: String| Outcome {
        exit_code: None,
        report: None,
        error: Some(error),
        skipped: false,
        elapsed: start.elapsed(),
        native: None,
    };
    if let Some(why) = &job.skip {
        return Outcome {
            skipped: true,
            ..fail(why.clone())
        };
    }
    let remaining = batch
        .deadline
        .map(|d| d.saturating_duration_since(Instant::now()));
    if crate::tracee::interrupt::received().is_some() {
        return Outcome {
            skipped: true,
            ..fail("not run: the audit was interrupted".into())
        };
    }
    if remaining.is_some_and(|r| r < Duration::from_millis(100)) {
        return Outcome {
            skipped: true,
            ..fail("not run: the audit's time budget was spent".into())
        };
    }
    let max_executions = job.share.map_or(t.max_executions, |s| s.max_executions);
    if max_executions == 0 {
        return Outcome {
            skipped: true,
            ..fail("not run: this shard's share of the split search is empty".into())
        };
    }
    if !t.dir.is_dir() {
        return fail(format!(
            "working directory {} does not exist",
            t.dir.display()
        ));
    }
    if let Some(missing) = t.inputs.iter().find(|p| !p.exists()) {
        return fail(format!("input file {} does not exist", missing.display()));
    }
    let dir = target_dir(&batch.out, &t.name);
    // Outputs of an earlier audit into the same directory would mix with this one's.
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return fail(format!("cannot create {}: {e}", dir.display()));
    }
    let dir = dir.canonicalize().unwrap_or(dir);
    let report_path = dir.join("report.json");
    let _ = std::fs::remove_file(&report_path);
    let stderr_path = dir.join("stderr.txt");
    let stderr = match File::create(&stderr_path) {
        Ok(f) => f,
        Err(e) => return fail(format!("cannot create {}: {e}", stderr_path.display())),
    };
    let mut time_limit = match (t.time_limit.map(Duration::from_secs_f64), remaining) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let native = if job.native_first {
        let run = native::run(t, &dir.join("native.txt"), time_limit);
        if run.cut_short {
            // A test slower than its time limit has not failed: nothing is left to search.
            let hint = if crate::tracee::interrupt::received().is_some() {
                ""
            } else {
                ", its time limit: raise --time-limit"
            };
            return Outcome {
                skipped: true,
                ..fail(format!(
                    "not searched: without mcheck it {}{hint}",
                    run.status
                ))
            };
        }
        if !run.passed {
            return Outcome {
                error: None,
                native: Some(run),
                ..fail(String::new())
            };
        }
        // The search gets what the run without mcheck left of the time limit.
        let spent = Duration::from_secs_f64(run.elapsed_seconds);
        time_limit = time_limit.map(|l| l.saturating_sub(spent).max(Duration::from_millis(1)));
        Some(run)
    } else {
        None
    };
    // A split target runs as `mcheck --shard I/N` with the target's own seed and budget:
    // mcheck takes its part of them (the same part as `job.share`).
    let (seed, max_executions) = match job.share {
        Some(Share { shard: Some(_), .. }) => (t.seed, t.max_executions),
        Some(s) => (s.seed, s.max_executions),
        None => (t.seed, t.max_executions),
    };
    let mut cmd = Command::new(&batch.mcheck);
    if let Some(shard) = job.share.and_then(|s| s.shard) {
        cmd.arg("--shard").arg(shard.to_string());
    }
    cmd.arg("--progress")
        .arg("never")
        .arg("--quiet-program")
        .arg("--json")
        .arg(&report_path)
        .arg("--out")
        .arg(dir.join("schedules"))
        .arg("--strategy")
        .arg(t.strategy_name())
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--max-executions")
        .arg(max_executions.to_string())
        .arg("--jobs")
        .arg(t.jobs.map_or(batch.workers, |j| j as usize).to_string())
        .arg(format!("--expect-exit={}", t.expect_exit));
    if let Some(limit) = time_limit {
        cmd.arg("--time-limit")
            .arg(format!("{:.3}", limit.as_secs_f64().max(0.001)));
    }
    cmd.args(&t.options)
        .arg("--")
        .args(&t.command)
        .envs(&t.env)
        .current_dir(&t.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        // A group of its own: a signal to the audit's process group (Ctrl-C, `timeout`,
        // a CI cancellation) reaches the audit only, which passes it on once; a second
        // copy would make the target exit at once, without its report.
        .process_group(0);
    // Nor does a SIGKILL of the audit's group then reach it: it dies with the audit.
    crate::tracee::spawn::die_with_parent(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot run {}: {e}", batch.mcheck.display())),
    };
    let kill_at = time_limit.map(|l| start + l + GRACE);
    let mut forwarded = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => return fail(format!("waiting for mcheck: {e}")),
        }
        // SIGINT/SIGTERM/SIGHUP/SIGQUIT to the audit: each running target ends its search
        // and writes its report, then the audit writes its outputs.
        if let (Some(sig), false) = (crate::tracee::interrupt::received(), forwarded) {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
            }
            forwarded = true;
        }
        if kill_at.is_some_and(|k| Instant::now() > k) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let exit_code = status.and_then(|s| s.code());
    let report = std::fs::read_to_string(&report_path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let error = match (exit_code, &report) {
        (Some(0 | 1), Some(_)) => None,
        (None, _) if status.is_none() => Some(format!(
            "killed: still running {} s past its time limit",
            GRACE.as_secs()
        )),
        (code, _) => Some(format!(
            "mcheck {}: {}",
            code.map_or_else(
                || "was killed by a signal".to_string(),
                |c| format!("exited with status {c}")
            ),
            last_message(&stderr_path)
        )),
    };
    Outcome {
        exit_code,
        report: if error.is_none() { report } else { None },
        error,
        skipped: false,
        elapsed,
        native,
    }
}

/// The last `mcheck:` line of a target's stderr (its error message).
fn last_message(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| l.starts_with("mcheck:"))
        .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
        .map_or_else(
            || "no message".to_string(),
            |l| l.trim_start_matches("mcheck: ").to_string(),
        )
}

#[cfg(test)]
mod tests {
    use super::dir_name;

    #[test]
    fn directory_names_of_tests() {
        assert_eq!(dir_name("orders"), "orders");
        let a = dir_name("racy::lost_update");
        assert!(a.starts_with("racy.lost_update-"), "{a}");
        assert_eq!(a.len(), "racy.lost_update-".len() + 8);
        assert_ne!(dir_name("Inst/Param.Get/0"), dir_name("Inst_Param.Get_0"));
        assert!(!dir_name("..").contains('/'));
        assert!(!dir_name("..").starts_with('.'));
    }
}
