//! CPU choice: mcheck pins its tracers (and so their tracees) to the least loaded CPUs among
//! those its affinity mask allows, so `taskset` is respected and parallel runs do not all
//! pile onto CPU 0; yet the program is shown the CPUs mcheck was started on, so that it sizes
//! its pools as it would without mcheck. Needs two CPUs (skipped otherwise).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{args, fixture};

/// A copy of `plain_spin_timeout` under a unique short name (its processes' comm).
fn private_copy(tag: &str) -> (PathBuf, String) {
    let name = format!("mcpu{}{tag}", std::process::id() % 100_000);
    let dir = std::env::temp_dir().join(format!("mcheck-cpus-{name}"));
    fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(&name);
    fs::copy(fixture("plain_spin_timeout"), &exe).unwrap();
    (exe, name)
}

/// The CPUs the running processes named `comm` may use (Cpus_allowed_list), once one runs.
fn cpus_of(comm: &str, limit: Duration) -> Option<String> {
    let start = Instant::now();
    while start.elapsed() < limit {
        for e in fs::read_dir("/proc").unwrap().flatten() {
            let dir = e.path();
            if fs::read_to_string(dir.join("comm")).is_ok_and(|c| c.trim() == comm) {
                let status = fs::read_to_string(dir.join("status")).unwrap_or_default();
                if let Some(l) = status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                {
                    return Some(l.trim().to_string());
                }
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// mcheck (under `taskset -c CPUS` when given) on the spinning program, long enough to look.
fn spawn(exe: &Path, taskset: Option<&str>, jobs: &str) -> Child {
    let mcheck = env!("CARGO_BIN_EXE_mcheck");
    let mut cmd = match taskset {
        Some(cpus) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpus, mcheck]);
            c
        }
        None => Command::new(mcheck),
    };
    cmd.args([
        "--quiet-program",
        "--progress",
        "never",
        "--no-races",
        "--jobs",
        jobs,
    ])
    .args(["--execution-timeout", "30", "--time-limit", "3", "--out"])
    .arg(exe.parent().unwrap().join("out"))
    .arg("--")
    .arg(exe)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("spawn mcheck")
}

/// The tests load CPUs themselves: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn two_cpus() -> bool {
    let ok = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    if !ok {
        eprintln!("note: fewer than two CPUs, nothing to test");
    }
    ok
}

#[test]
fn taskset_is_respected() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !two_cpus() {
        return;
    }
    let (exe, comm) = private_copy("t");
    let mut child = spawn(&exe, Some("1"), "2");
    let cpus = cpus_of(&comm, Duration::from_secs(10));
    let _ = child.wait();
    let _ = fs::remove_dir_all(exe.parent().unwrap());
    assert_eq!(cpus.as_deref(), Some("1"));
}

/// Threads runnable on CPU `cpu` now (state R, last on that CPU), this test's excepted.
fn runnable_on(cpu: usize) -> usize {
    let me = std::process::id().to_string();
    let mut n = 0;
    for p in fs::read_dir("/proc").unwrap().flatten() {
        if p.file_name().to_str() == Some(me.as_str()) {
            continue;
        }
        let Ok(tasks) = fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let stat = fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let Some(at) = stat.rfind(')') else { continue };
            let rest: Vec<&str> = stat[at + 1..].split_whitespace().collect();
            if rest.first() == Some(&"R") && rest.get(36) == Some(&cpu.to_string().as_str()) {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn a_busy_cpu_is_avoided() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !two_cpus() {
        return;
    }
    // Keep CPU 0 busy with four spinning threads; mcheck, allowed CPUs 0 and 1, must take
    // CPU 1 (unless others crowd CPU 1 as much: then the choice proves nothing).
    let queue = |cpu| (0..5).map(|_| runnable_on(cpu)).sum::<usize>() as f64 / 5.0;
    let (q0, q1) = (queue(0), queue(1));
    if q1 + 0.5 >= q0 + 4.0 {
        eprintln!("note: CPU 1 is as crowded by others ({q1} runnable against {q0}): not tested");
        return;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut set = nix::sched::CpuSet::new();
                set.set(0).unwrap();
                nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(200));
    let (exe, comm) = private_copy("b");
    let mut child = spawn(&exe, Some("0,1"), "1");
    // Other tests' processes may crowd CPU 1 just when mcheck chooses (checked again now,
    // with the spinners on CPU 0): CPU 0 is then no worse a choice.
    let (a0, a1) = (queue(0), queue(1));
    let cpus = cpus_of(&comm, Duration::from_secs(10));
    let _ = child.wait();
    let _ = fs::remove_dir_all(exe.parent().unwrap());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    if cpus.as_deref() == Some("0") && a1 + 0.5 >= a0 {
        eprintln!("note: CPU 1 was as crowded as CPU 0 when mcheck chose ({a1} runnable against {a0}): not tested");
        return;
    }
    assert_eq!(
        cpus.as_deref(),
        Some("1"),
        "the tracee was pinned to the busy CPU"
    );
}

/// `nproc` (sched_getaffinity) prints under mcheck what it prints without it, with and
/// without `taskset`, although the tracee itself runs pinned to one CPU.
#[test]
fn the_program_sees_the_cpus_mcheck_was_given() {
    if !two_cpus() {
        return;
    }
    let native = |taskset: &[&str]| {
        let out = Command::new("taskset")
            .args(taskset)
            .arg("nproc")
            .output()
            .expect("run nproc");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    for cpus in ["0-1", "1"] {
        let shown = native(&["-c", cpus]);
        let mut a = args(&["-c", cpus, env!("CARGO_BIN_EXE_mcheck")]);
        a.extend(args(&[
            "--max-executions",
            "1",
            "--progress",
            "never",
            "--",
            "nproc",
        ]));
        let mut cmd = Command::new("taskset");
        cmd.args(&a);
        let (code, stdout, stderr) = output_of(cmd);
        assert_eq!(code, Some(0), "taskset -c {cpus} mcheck -- nproc: {stderr}");
        assert_eq!(
            stdout.trim(),
            shown,
            "taskset -c {cpus}: nproc under mcheck"
        );
    }
    assert_eq!(native(&["-c", "1"]), "1");
    // The program's own sched_setaffinity (taskset run under mcheck) is what it reads back,
    // although mcheck keeps its thread on the tracer's CPU; a CPU it may not use is EINVAL.
    for (cpus, shown) in [("1", "1"), ("0,1", "2"), ("7-9", "")] {
        let a = args(&["--max-executions", "1", "--progress", "never", "--"]);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcheck"));
        cmd.args(a).args(["taskset", "-c", cpus, "nproc"]);
        let (_, stdout, stderr) = output_of(cmd);
        assert_eq!(stdout.trim(), shown, "taskset -c {cpus} nproc under mcheck");
        if shown.is_empty() {
            assert!(stderr.contains("Invalid argument"), "{stderr}");
        }
    }
}

/// The exit code, stdout and stderr of `cmd` (mcheck, or mcheck under a wrapper).
fn output_of(mut cmd: Command) -> (Option<i32>, String, String) {
    let out = cmd
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .output()
        .expect("spawn mcheck");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}
