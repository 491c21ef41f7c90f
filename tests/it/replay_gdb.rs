//! `mcheck replay --gdb` driven by the real gdb in batch mode: threads with mcheck's names,
//! registers with fs_base, stacks with the fixture's source lines, globals, breakpoints and
//! continue to the same finding as plain `mcheck replay`, `next`/`stepi` under the schedule,
//! messages in gdb's console, monitor commands, reverse-continue and reverse-stepi,
//! Ctrl-C, extended-remote; a port probe before gdb connects; and no traced process left
//! behind when gdb is killed.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{args, fixture, mcheck, temp_path};

const LIMIT: Duration = Duration::from_secs(60);

/// Finds the bug of `program` and returns its schedule file. Twenty executions first: a
/// data race, which the search would follow for its whole budget, is found in the first
/// (bench_slices_racy's search took 8 s); then 200 for a failure that needs more (rust_abba's
/// deadlock comes in execution 21 with one job, so with two the first twenty find it about
/// half the time), where the search stops at once.
fn schedule_of(program: &Path, out: &Path) -> String {
    let search = |budget: &str| {
        let a = args(&[
            "--max-executions",
            budget,
            "--quiet-program",
            "--out",
            &out.display().to_string(),
            "--",
            &program.display().to_string(),
        ]);
        mcheck(&a, true, LIMIT)
    };
    let mut r = search("20");
    if r.code == Some(0) {
        r = search("200");
    }
    assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
    r.json.unwrap()["findings"][0]["schedule"]
        .as_str()
        .expect("schedule path")
        .to_string()
}

/// A running `mcheck replay --gdb` and the lines of its stderr.
struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    address: String,
}

impl Server {
    fn start(schedule: &str, how: &How) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcheck"));
        if how.every_access_stops {
            command.env("MCHECK_PATCH", "off");
        }
        command.args(["replay", "--quiet-program", "--gdb"]);
        if let Some(n) = how.snapshot_every {
            command.args(["--gdb-snapshot-every".to_string(), n.to_string()]);
        }
        let mut child = command
            .arg(schedule)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcheck");
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Server {
            child,
            lines,
            seen: Vec::new(),
            address: String::new(),
        };
        let start = Instant::now();
        while s.address.is_empty() && start.elapsed() < LIMIT {
            let Ok(line) = s.lines.recv_timeout(Duration::from_secs(1)) else {
                continue;
            };
            if let Some(rest) = line.split("target remote ").nth(1) {
                s.address = rest.split('\'').next().unwrap_or("").to_string();
            }
            s.seen.push(line);
        }
        assert!(!s.address.is_empty(), "no address: {:?}", s.seen);
        s
    }

    /// Waits for mcheck to exit; its exit code and whole stderr.
    fn finish(mut self) -> (Option<i32>, String) {
        let start = Instant::now();
        let code = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st.code();
            }
            if start.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            thread::sleep(Duration::from_millis(20));
        };
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(l);
        }
        (code, self.seen.join("\n"))
    }

    /// Waits for a line of mcheck's stderr containing `what`.
    fn wait_for(&mut self, what: &str) -> bool {
        let start = Instant::now();
        while start.elapsed() < LIMIT {
            if self.seen.iter().any(|l| l.contains(what)) {
                return true;
            }
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.seen.push(l);
            }
        }
        false
    }

    /// The processes mcheck traces now (its children).
    fn children(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let task = format!("/proc/{}/task", self.child.id());
        for t in fs::read_dir(task).into_iter().flatten().flatten() {
            let text = fs::read_to_string(t.path().join("children")).unwrap_or_default();
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
        out
    }
}

/// How gdb connects and is driven.
#[derive(Default, Clone, Copy)]
struct How {
    /// `target extended-remote` instead of `target remote`.
    extended: bool,
    /// Send gdb SIGINT (the user's Ctrl-C) this long after it started continuing.
    interrupt_after: Option<Duration>,
    /// Every access site on a breakpoint (`MCHECK_PATCH=off`), as in mcheck's slow mode.
    every_access_stops: bool,
    /// `--gdb-snapshot-every N` (the default when None).
    snapshot_every: Option<u64>,
}

/// Runs gdb in batch mode against `server` with `commands`; its whole output.
fn gdb(server: &Server, program: &Path, commands: &[&str], how: How) -> String {
    let target = if how.extended {
        "target extended-remote"
    } else {
        "target remote"
    };
    let mut a = vec![
        "-batch".to_string(),
        "-nx".into(),
        "-ex".into(),
        "set sysroot /".into(),
        // A loaded machine (the whole suite beside) may answer a packet in more than
        // gdb's default two seconds.
        "-ex".into(),
        "set remotetimeout 30".into(),
        "-ex".into(),
        format!("{target} {}", server.address),
    ];
    // gdb's output to a file is buffered, so "Continuing." is not seen in time: a file it
    // touches just before its first `continue` says when it continues.
    let continuing_mark = temp_path("gdb-continuing");
    let mut marked = how.interrupt_after.is_none();
    for c in commands {
        if !marked && *c == "continue" {
            marked = true;
            a.push("-ex".into());
            a.push(format!("shell touch {}", continuing_mark.display()));
        }
        a.push("-ex".into());
        a.push(c.to_string());
    }
    a.push(program.display().to_string());
    let out_path = temp_path("gdb-out");
    let out = fs::File::create(&out_path).unwrap();
    let mut child = Command::new("gdb")
        .args(&a)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("gdb is installed (make deps)");
    let start = Instant::now();
    let mut interrupt = how.interrupt_after;
    let mut continued_at = None;
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            break;
        }
        // Only once gdb is continuing: on a loaded machine the connection alone can take
        // longer than the delay, and a Ctrl-C before `continue` only quits gdb's wait.
        if continued_at.is_none() && continuing_mark.exists() {
            continued_at = Some(Instant::now());
        }
        let due = |d: Duration| continued_at.is_some_and(|at| at.elapsed() >= d);
        if interrupt.is_some_and(due) {
            interrupt = None;
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.wait();
    let _ = fs::remove_file(&continuing_mark);
    let text = fs::read_to_string(&out_path).unwrap_or_default();
    let _ = fs::remove_file(&out_path);
    text
}

/// One gdb session over a replayed schedule: gdb's output, mcheck's exit code and stderr.
struct Debugged {
    text: String,
    code: Option<i32>,
    err: String,
}

/// Replays `schedule` of `program` under gdb running `commands`.
fn debug_schedule(schedule: &str, program: &Path, commands: &[&str], how: How) -> Debugged {
    let server = Server::start(schedule, &how);
    let text = gdb(&server, program, commands, how);
    let (code, err) = server.finish();
    Debugged { text, code, err }
}

/// Finds the bug of fixture `name` and replays it under gdb running `commands`.
fn debug_fixture(name: &str, commands: &[&str], how: How) -> Debugged {
    let out = temp_path(&format!("gdb-{name}"));
    let program = fixture(name);
    let schedule = schedule_of(&program, &out);
    let d = debug_schedule(&schedule, &program, commands, how);
    let _ = fs::remove_dir_all(&out);
    d
}

/// [`debug_fixture`], and the headline plain `mcheck replay` gives the same schedule.
fn debug_fixture_and_headline(name: &str, commands: &[&str], how: How) -> (Debugged, String) {
    let out = temp_path(&format!("gdb-{name}"));
    let program = fixture(name);
    let schedule = schedule_of(&program, &out);
    let expected = plain_replay_headline(&schedule).unwrap_or_default();
    let d = debug_schedule(&schedule, &program, commands, how);
    let _ = fs::remove_dir_all(&out);
    (d, expected)
}

/// The headline of the finding plain `mcheck replay` reports for `schedule`.
fn plain_replay_headline(schedule: &str) -> Option<String> {
    let r = mcheck(
        &args(&["replay", "--quiet-program", schedule]),
        false,
        LIMIT,
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    headline(&r.stderr)
}

fn headline(text: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with("mcheck: ") && l.contains(": ") && !l.contains("replaying"))
        .filter(|l| l.contains("deadlock:") || l.contains("data_race:"))
        .map(str::to_string)
}

#[test]
fn deadlock_threads_stacks_registers_and_the_finding() {
    let (d, expected) = debug_fixture_and_headline(
        "abba_O0",
        &[
            "info threads",
            "p $fs_base != 0",
            "p shared",
            "x/4xb pthread_mutex_lock",
            "break t1",
            "continue",
            "next",
            "thread 1",
            "stepi",
            "continue",
            "info threads",
            "thread 2",
            "bt",
            "thread 3",
            "bt",
            "monitor finding",
            "monitor schedule",
            "kill",
        ],
        How::default(),
    );
    let Debugged { text, code, err } = d;
    // Stopped at main, with T0 named.
    assert!(
        text.contains("(T0)") && text.contains("main () at src/c/abba.c"),
        "{text}"
    );
    assert!(text.contains("$1 = 1"), "fs_base readable: {text}");
    assert!(text.contains("$2 = 0"), "global at main: {text}");
    // mcheck's int3 at the entry of pthread_mutex_lock is hidden from gdb.
    assert!(!text.contains("0xcc"), "gdb saw mcheck's int3: {text}");
    assert!(text.contains("Breakpoint 1, t1 ("), "{text}");
    // `next` over the first lock call (T2 runs in between, as the schedule says).
    assert!(text.contains("21\t    pthread_mutex_lock(&b);"), "{text}");
    // T0 waits at a scheduling point: stepping it is refused, with the reason, in gdb's
    // console (and on mcheck's stderr).
    assert!(text.contains("mcheck: T0 cannot step here"), "{text}");
    assert!(err.contains("T0 cannot step here"), "{err}");
    // The deadlock: both threads blocked at their lock calls, the lines of the fixture.
    assert!(
        text.contains("(T1 at mutex_lock)") && text.contains("(T2 at mutex_lock)"),
        "{text}"
    );
    assert!(
        text.contains("in t1 (arg=0x0) at src/c/abba.c:21"),
        "{text}"
    );
    assert!(
        text.contains("in t2 (arg=0x0) at src/c/abba.c:32"),
        "{text}"
    );
    assert!(
        text.contains("mcheck: stopped at the finding: deadlock"),
        "{text}"
    );
    assert!(
        !expected.is_empty() && text.contains(&expected),
        "monitor finding differs from plain replay: {text}"
    );
    assert!(
        text.contains("=>  (every recorded decision was taken)"),
        "{text}"
    );
    assert_eq!(code, Some(1), "{err}");
}

#[test]
fn race_stops_at_the_later_access_with_the_value_of_that_moment() {
    let (d, expected) = debug_fixture_and_headline(
        "race_counter",
        &[
            "break bump",
            "continue",
            "p counter",
            "delete",
            "continue",
            "bt 1",
            "p counter",
            "monitor finding",
            "kill",
        ],
        How::default(),
    );
    let Debugged { text, code, err } = d;
    assert_eq!(code, Some(1), "{err}");
    assert!(text.contains("hit Breakpoint 1, bump ("), "{text}");
    assert!(text.contains("$1 = 0"), "{text}");
    assert!(text.contains("received signal SIGTRAP"), "{text}");
    assert!(
        text.contains("bump (arg=0x0) at src/race/race_counter.c:29"),
        "{text}"
    );
    assert!(
        text.contains("$2 = 1"),
        "one increment before the racing one: {text}"
    );
    assert!(
        !expected.is_empty() && text.contains(&expected),
        "monitor finding differs from plain replay: {text}"
    );
    assert!(
        text.contains("mcheck: stopped at the later access of a data race"),
        "{text}"
    );
}

/// A use after free stops where the freed block is read, with the freeing thread's free
/// done and the block's bytes still there (the quarantine holds them back).
#[test]
fn use_after_free_stops_at_the_access_of_the_freed_block() {
    let d = debug_fixture(
        "heap_uaf_mutex",
        &[
            "continue",
            "bt 1",
            "p current->requests",
            "monitor finding",
            "kill",
        ],
        How::default(),
    );
    let Debugged { text, code, err } = d;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        text.contains("mcheck: stopped at the access of a use after free"),
        "{text}"
    );
    assert!(
        text.contains("reader (arg=0x0) at src/c/heap_uaf_mutex.c:30"),
        "{text}"
    );
    assert!(
        text.contains("$1 = 7"),
        "the freed block still holds its value: {text}"
    );
    assert!(text.contains("use_after_free"), "{text}");
}

/// Memory reads show the program's own code: the jumps of patched access sites (and
/// mcheck's breakpoints) are hidden, so gdb's bytes of `main`, whose load of `counter` is
/// patched by the time the replay stops at the race, are those of the file.
#[test]
fn code_reads_show_the_programs_own_bytes() {
    let Debugged { text, code, err } = debug_fixture(
        "race_counter",
        &["continue", "x/160xb main", "kill"],
        How::default(),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(text.contains("received signal SIGTRAP"), "{text}");
    let program = fixture("race_counter");
    let file = Command::new("gdb")
        .args(["-batch", "-nx", "-ex", "x/160xb main"])
        .arg(&program)
        .output()
        .expect("gdb on the file");
    let bytes = |text: &str| -> Vec<String> {
        (text.lines())
            .filter(|l| l.contains("<main"))
            .flat_map(|l| l.split(':').nth(1).unwrap_or("").split_whitespace())
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let live = bytes(&text);
    assert_eq!(live.len(), 160, "{text}");
    assert_eq!(
        live,
        bytes(&String::from_utf8_lossy(&file.stdout)),
        "{text}"
    );
}

#[test]
fn watchpoint_on_the_racy_variable_stops_at_both_accesses() {
    let Debugged { text, err, .. } = debug_fixture(
        "race_counter",
        &["watch counter", "continue", "continue", "continue", "kill"],
        How::default(),
    );
    // T1's increment, the race stop at T2's (before it runs), then T2's increment.
    assert!(
        text.contains(
            "Thread 2 hit Hardware watchpoint 1: counter\n\nOld value = 0\nNew value = 1"
        ),
        "{text}\n{err}"
    );
    assert!(
        text.contains(
            "Thread 3 hit Hardware watchpoint 1: counter\n\nOld value = 1\nNew value = 2"
        ),
        "{text}\n{err}"
    );
}

#[test]
fn reverse_continue_goes_back_breakpoint_by_breakpoint_with_the_earlier_values() {
    let Debugged { text, err, .. } = debug_fixture(
        "race_counter",
        &[
            "break bump",
            "continue",
            "continue",
            "continue",
            "p counter",
            "reverse-continue",
            "p counter",
            "reverse-continue",
            "p counter",
            "reverse-continue",
            "continue",
            "p counter",
            "kill",
        ],
        How::default(),
    );
    // Forward: T1 and T2 enter bump, then the race stop in T2 with counter 1.
    assert!(text.contains("received signal SIGTRAP"), "{text}\n{err}");
    assert!(text.contains("$1 = 1"), "{text}");
    // Back to T2's entry (T1 has incremented), then to T1's (nothing yet), then the
    // beginning of the history.
    let back = text.split("$1 = 1").nth(1).unwrap_or("");
    assert!(
        back.contains("Thread 3 hit Breakpoint 1, bump (") && back.contains("$2 = 1"),
        "{text}"
    );
    assert!(
        back.contains("Thread 2 hit Breakpoint 1, bump (") && back.contains("$3 = 0"),
        "{text}"
    );
    assert!(
        back.contains("No more reverse-execution history."),
        "{text}"
    );
    assert!(
        back.contains("mcheck: no hit of a breakpoint or watchpoint before this"),
        "{text}"
    );
    // And forward again from the beginning: the first hit once more.
    assert!(back.contains("$4 = 0"), "{text}");
}

#[test]
fn reverse_continue_finds_a_breakpoint_set_only_at_the_finding() {
    // rr's way of working: run to the failure, then set a breakpoint and go back to it.
    let Debugged { text, err, .. } = debug_fixture(
        "race_counter",
        &[
            "continue",
            "break bump",
            "reverse-continue",
            "p counter",
            "reverse-continue",
            "p counter",
            "reverse-continue",
            "kill",
        ],
        How::default(),
    );
    let back = text.split("Breakpoint 1 at").nth(1).unwrap_or("");
    // T2's entry (T1 has incremented), then T1's, then the beginning.
    let second = back.find("$1 = 1");
    let first = back.find("$2 = 0");
    assert!(second.is_some() && first > second, "{text}\n{err}");
    assert_eq!(
        back.matches("hit Breakpoint 1, bump (").count(),
        2,
        "{text}"
    );
    assert!(
        back.contains("No more reverse-execution history."),
        "{text}"
    );
}

#[test]
fn next_at_a_scheduling_point_ends_with_the_reason() {
    // gdb's `next` would ask again and again for a step the schedule refuses.
    let Debugged { text, err, .. } = debug_fixture(
        "abba_O0",
        &["continue", "thread 2", "next", "p $pc != 0", "kill"],
        How::default(),
    );
    assert!(text.contains("received signal SIGINT"), "{text}\n{err}");
    assert_eq!(
        text.matches("T1 cannot step here").count(),
        1,
        "{text}\n{err}"
    );
    assert!(text.contains("$1 = 1"), "{text}");
}

#[test]
fn reverse_stepi_undoes_steps_over_extended_remote() {
    let Debugged { text, err, .. } = debug_fixture(
        "abba_O0",
        &[
            "reverse-stepi",
            "break t1",
            "continue",
            "p/x $pc",
            "stepi",
            "stepi",
            "p/x $pc",
            "reverse-stepi",
            "reverse-stepi",
            "p/x $pc",
            "reverse-stepi",
            "p/x $pc",
            "kill",
        ],
        How {
            extended: true,
            ..How::default()
        },
    );
    let pcs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix('$').and_then(|l| l.split(" = ").nth(1)))
        .collect();
    assert_eq!(pcs.len(), 4, "{text}\n{err}");
    // Two steps forward, two back: at the breakpoint again. One more back is counted from
    // the thread's start in glibc, which makes system calls (mcheck's to run): the
    // instruction before the breakpoint, in t1's prologue.
    assert_ne!(pcs[0], pcs[1], "{text}");
    assert_eq!(pcs[0], pcs[2], "{text}");
    assert_ne!(pcs[0], pcs[3], "{text}");
    assert!(text.contains("\t18\t{"), "t1's opening line: {text}");
    assert!(!text.contains("T1 cannot go back"), "{text}");
    // Nothing is before the first stop.
    assert!(
        text.contains(
            "mcheck: T0 cannot go back one instruction from here: this is the first stop"
        ),
        "{text}"
    );
}

#[test]
fn reverse_stepi_and_reverse_next_go_back_from_a_deadlock() {
    let Debugged { text, err, .. } = debug_fixture(
        "abba_O0",
        &[
            "break t1",
            "continue",
            "delete",
            "continue",
            "p/x $pc",
            "reverse-stepi",
            "p/x $pc",
            "reverse-stepi",
            "p/x $pc",
            "reverse-next",
            "p/x $pc",
            "info line 21",
            "stepi",
            "p/x $pc",
            "kill",
        ],
        How::default(),
    );
    let pcs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix('$').and_then(|l| l.split(" = ").nth(1)))
        .collect();
    assert_eq!(pcs.len(), 5, "{text}\n{err}");
    // The deadlock stops T1 in its second lock call; one instruction back is the PLT
    // stub's jump, one more the call in t1 (line 21), and reverse-next goes back to the
    // start of line 21. Every stop is a different place.
    assert!(
        text.contains("in pthread_mutex_lock@plt ()"),
        "{text}\n{err}"
    );
    assert!(
        text.contains("in t1 (arg=0x0) at src/c/abba.c:21"),
        "{text}"
    );
    let line21 = text
        .split("Line 21 of \"src/c/abba.c\" starts at address ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or("");
    assert_eq!(pcs[3], line21, "{text}");
    for i in 1..4 {
        assert_ne!(pcs[i], pcs[i - 1], "{text}");
    }
    // Stepping forward again from there follows the same path.
    assert_ne!(pcs[4], pcs[3], "{text}");
    assert!(!text.contains("cannot go back"), "{text}");
}

/// `syscalls_abba`'s t1 makes three system calls of its own, each a `syscall`
/// instruction followed by a label: getuid (not trapped by mcheck), write (trapped and
/// run natively) and sched_yield (a scheduling decision). From just after each,
/// `reverse-stepi` lands on the `syscall` instruction with the call's number in rax, and
/// `stepi` performs the call again as the replay does, back to the same place and result.
#[test]
fn reverse_stepi_lands_on_the_system_call_before() {
    let mut commands = vec![
        "break *after_getuid",
        "break *after_write",
        "break *after_yield",
    ];
    for _ in 0..3 {
        commands.extend([
            "continue",
            "p/x $pc",
            "p $rax",
            "reverse-stepi",
            "x/i $pc",
            "p $rax",
            "stepi",
            "p/x $pc",
            "p $rax",
        ]);
    }
    commands.push("kill");
    let Debugged { text, err, .. } = debug_fixture("syscalls_abba", &commands, How::default());
    let values: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix('$').and_then(|l| l.split(" = ").nth(1)))
        .collect();
    assert_eq!(values.len(), 15, "{text}\n{err}");
    let insns: Vec<&str> = text.lines().filter(|l| l.starts_with("=> ")).collect();
    assert_eq!(insns.len(), 3, "{text}\n{err}");
    for (i, (nr, result)) in [("102", None), ("1", Some("3")), ("24", Some("0"))]
        .into_iter()
        .enumerate()
    {
        let v = &values[i * 5..i * 5 + 5];
        // pc, rax after the call; rax at the syscall instruction; pc, rax after it again.
        assert!(insns[i].ends_with("syscall"), "{}: {text}", insns[i]);
        assert_eq!(v[2], nr, "{text}");
        assert_eq!(v[3], v[0], "{text}");
        assert_eq!(v[4], v[1], "{text}");
        if let Some(r) = result {
            assert_eq!(v[1], r, "{text}");
        }
    }
    assert!(!text.contains("cannot go back"), "{text}\n{err}");
    assert!(
        !text.contains("No more reverse-execution history"),
        "{text}"
    );
}

/// From the deadlock, `reverse-next` walks t1 back line by line over calls that make system
/// calls (its own three, and libc's `write`, whose first call also goes through the
/// dynamic linker's lazy binding), and `next` walks forward again to the same deadlock.
#[test]
fn reverse_next_goes_back_over_calls_that_make_system_calls() {
    let Debugged { text, err, .. } = debug_fixture(
        "syscalls_abba",
        &[
            "continue",
            "thread 2",
            "reverse-finish",
            "reverse-next",
            "reverse-next",
            "reverse-next",
            "reverse-next",
            "reverse-next",
            "reverse-next",
            "p $pc",
            "info line 51",
            "reverse-step",
            "reverse-step",
            "bt 1",
            "next",
            "next",
            "next",
            "next",
            "next",
            "next",
            "next",
            "info threads",
            "kill",
        ],
        How::default(),
    );
    assert!(!text.contains("cannot go back"), "{text}\n{err}");
    // Going back: each of t1's lines from the lock call of line 55 to the write of line 51.
    let back = text
        .split("reverse-finish")
        .last()
        .unwrap_or(&text)
        .to_string();
    let mut at = 0;
    for line in [
        "55\t    pthread_mutex_lock(&b);",
        "54\t    seen += sys_yield();",
        "53\t    seen += sys_write(",
        "52\t    seen = sys_getuid();",
        "51\t    write(1, \"t1 has a\\n\", 9);",
    ] {
        let found = back[at..].find(line);
        assert!(found.is_some(), "{line} after {at}: {text}\n{err}");
        at += found.unwrap_or(0);
    }
    let pc = text
        .lines()
        .find_map(|l| l.strip_prefix("$1 = (void (*)()) "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("none");
    let line51 = text
        .split("Line 51 of \"src/c/syscalls_abba.c\" starts at address ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or("");
    assert_eq!(pc, line51, "{text}");
    // Two reverse-steps from there: into the lock call of line 50 (a scheduling decision),
    // then back to its call in t1.
    assert!(
        text.contains("t1 (arg=0x0) at src/c/syscalls_abba.c:50"),
        "{text}"
    );
    // Forward again, the same path to the same deadlock.
    assert!(
        text.matches("mcheck: stopped at the finding: deadlock")
            .count()
            >= 2,
        "{text}\n{err}"
    );
}

/// The racy slices sum long arrays in loops without a call: Ctrl-C stops such a loop at its
/// next memory access when every access site is a breakpoint (`MCHECK_PATCH=off`; with
/// patched sites, where the replay reaches the race in a moment, a loop is interrupted
/// only at its next scheduling point or hooked call). Under breakpoints the replay runs
/// for a minute before the race.
#[test]
fn ctrl_c_stops_a_running_replay() {
    let Debugged { text, err, .. } = debug_fixture(
        "bench_slices_racy",
        &["continue", "info threads", "p s", "kill"],
        How {
            interrupt_after: Some(Duration::from_millis(1500)),
            every_access_stops: true,
            ..How::default()
        },
    );
    assert!(
        text.contains("received signal SIGINT, Interrupt."),
        "{text}\n{err}"
    );
    assert!(text.contains("in sum (arg="), "{text}");
    // The running thread, whichever worker thread the schedule had running then.
    assert!(
        text.lines()
            .any(|l| l.starts_with("* ") && l.contains("(T") && l.contains("in sum")),
        "the running thread: {text}"
    );
}

#[test]
fn cpp_rust_static_and_stripped_programs_reach_their_deadlock() {
    for name in ["cpp_abba", "rust_abba", "abba_static", "abba_stripped"] {
        let Debugged { text, code, err } = debug_fixture(
            name,
            &["info threads", "continue", "info threads", "kill"],
            How::default(),
        );
        assert_eq!(code, Some(1), "{name}: {text}\n{err}");
        assert!(text.contains("Thread 1.1 (T0"), "{name}: {text}");
        assert!(
            text.contains("mcheck: stopped at the finding: deadlock")
                && text.contains("received signal SIGTRAP"),
            "{name}: {text}"
        );
        assert!(
            text.contains("(T1 at ") && text.contains("(T2 at "),
            "{name}: {text}"
        );
    }
}

/// A wrong exit status stops gdb at the exit_group that makes it, where the exiting thread
/// and its stack can still be read (after the exit nothing can); `continue` then shows the
/// program's exit with that status.
#[test]
fn a_wrong_exit_status_stops_at_the_exit_with_its_stack() {
    let Debugged { text, code, err } = debug_fixture(
        "exit_status_3",
        &["continue", "bt", "info threads", "continue"],
        How::default(),
    );
    assert_eq!(code, Some(1), "{text}\n{err}");
    assert!(
        text.contains("mcheck: stopped at the finding: exit_status"),
        "{text}"
    );
    assert!(text.contains("_exit (status=3)"), "{text}");
    assert!(
        text.contains("__libc_start_call_main"),
        "bt reads the stack: {text}"
    );
    assert!(!text.contains("Could not read registers"), "{text}");
    assert!(text.contains("exited with code 03"), "{text}");
}

#[test]
fn goto_back_and_forth_shows_the_same_state() {
    let flush = "maintenance flush register-cache";
    let Debugged { text, err, .. } = debug_fixture(
        "abba_O0",
        &[
            "monitor goto 2",
            flush,
            "info threads",
            "monitor goto 0",
            flush,
            "info threads",
            "monitor goto 2",
            flush,
            "info threads",
            "continue",
            "monitor goto 2",
            flush,
            "info threads",
            "kill",
        ],
        How::default(),
    );
    let at_2 = "(T2 at mutex_lock) ___pthread_mutex_lock (mutex=0x555555558060 <a>)";
    // Twice forward, once more back from the finding.
    assert_eq!(text.matches(at_2).count(), 3, "{text}\n{err}");
    assert!(
        text.contains("mcheck: replayed again up to step 0"),
        "{text}"
    );
    assert!(text.contains("(T0 at continue)"), "{text}");
}

/// After a forward `monitor goto`, the thread gdb shows may have exited: gdb can no longer
/// read its registers ("remote failure reply 'E79'"), and the goto's reply says so and
/// which threads there are.
#[test]
fn goto_says_when_the_thread_gdb_shows_has_exited() {
    let Debugged { text, err, .. } = debug_fixture(
        "double_join",
        &[
            "break worker",
            "continue",
            "delete",
            "monitor goto 3",
            "thread 1",
            "bt 1",
            "kill",
        ],
        How::default(),
    );
    assert!(
        text.contains("mcheck: T1 (Thread 1.2), the thread gdb shows, does not exist at this step: its registers cannot be read; `info threads` lists those that do (T0 (Thread 1.1))"),
        "{text}\n{err}"
    );
    assert!(text.contains("#0  ___pthread_join"), "{text}");
}

#[test]
fn a_bad_address_is_bad_usage() {
    let out = temp_path("gdb-bad");
    let program = fixture("abba_O0");
    let schedule = schedule_of(&program, &out);
    let r = mcheck(
        &args(&["replay", "--gdb=no-such-address", &schedule]),
        false,
        LIMIT,
    );
    let _ = fs::remove_dir_all(&out);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("--gdb: cannot listen on no-such-address"),
        "{}",
        r.stderr
    );
}

#[test]
fn breakpoint_and_continue_reach_the_same_finding_every_time() {
    let out = temp_path("gdb-again");
    let program = fixture("abba_O2");
    let schedule = schedule_of(&program, &out);
    let expected = plain_replay_headline(&schedule).expect("plain replay reports a finding");
    let runs = 20;
    for i in 0..runs {
        let d = debug_schedule(
            &schedule,
            &program,
            &[
                "break pthread_mutex_lock",
                "continue",
                "delete",
                "continue",
                "monitor finding",
                "kill",
            ],
            How::default(),
        );
        assert!(
            d.text.contains(&expected) && d.code == Some(1),
            "run {i}: exit {:?}\n{}\n{}",
            d.code,
            d.text,
            d.err
        );
    }
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn killing_gdb_leaves_no_traced_process() {
    let out = temp_path("gdb-kill");
    let program = fixture("abba_O0");
    let schedule = schedule_of(&program, &out);
    let mut server = Server::start(&schedule, &How::default());
    let mut gdb = Command::new("gdb")
        .args(["-nx", "-q", "-ex", "set sysroot /", "-ex"])
        .arg(format!("target remote {}", server.address))
        .arg(&program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("gdb");
    // The program waits at main under mcheck, gdb is connected and has shown where it is
    // (killed during its handshake, gdb would be a probe mcheck waits past).
    assert!(server.wait_for("gdb connected"), "{:?}", server.seen);
    let shown = gdb.stdout.take().map(BufReader::new).expect("gdb's stdout");
    let at_main = shown
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("main ("));
    assert!(at_main, "gdb did not show main: {:?}", server.seen);
    let traced = server.children();
    assert!(!traced.is_empty(), "mcheck runs no program");
    thread::sleep(Duration::from_millis(300));
    gdb.kill().unwrap();
    let _ = gdb.wait();
    let (code, err) = server.finish();
    let _ = fs::remove_dir_all(&out);
    assert!(
        code.is_some(),
        "mcheck did not end after gdb was killed: {err}"
    );
    for pid in traced {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} left behind: {err}"
        );
    }
}

/// A connection that opens and closes without a word (a port check, a readiness probe,
/// `nc -z`) does not end the replay: mcheck says so and serves the gdb that connects next,
/// which gets the whole session.
#[test]
fn a_probe_of_the_port_does_not_end_the_replay() {
    let out = temp_path("gdb-probe");
    let program = fixture("abba_O0");
    let schedule = schedule_of(&program, &out);
    let mut server = Server::start(&schedule, &How::default());
    drop(std::net::TcpStream::connect(&server.address).expect("connect to mcheck's port"));
    assert!(
        server.wait_for("ended before a gdb session began"),
        "{:?}",
        server.seen
    );
    let commands = ["info threads", "continue", "monitor finding", "kill"];
    let text = gdb(&server, &program, &commands, How::default());
    let (code, err) = server.finish();
    let _ = fs::remove_dir_all(&out);
    assert!(err.contains("waiting for gdb again on"), "{err}");
    assert!(
        text.contains("(T0)") && text.contains("main () at src/c/abba.c"),
        "{text}"
    );
    assert!(
        text.contains("mcheck: stopped at the finding: deadlock"),
        "{text}"
    );
    assert!(err.contains("gdb session ended (Kill)"), "{err}");
    assert_eq!(code, Some(1), "{err}");
}

/// What a gdb session showed of the program: values printed, breakpoint and watchpoint
/// stops, source lines, mcheck's console lines about steps (not addresses of the
/// connection or thread announcements, which differ between sessions).
fn shown(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            l.starts_with('$')
                || l.contains("hit Breakpoint")
                || l.contains("atchpoint")
                || l.contains("Old value")
                || l.contains("New value")
                || l.starts_with("mcheck: replayed again")
                || l.starts_with("mcheck: stopped after")
                || l.split('\t')
                    .next()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn going_back_from_fork_snapshots_shows_what_going_back_from_the_start_shows() {
    // About 250 decisions before the assertion: snapshots every 8 leave several on the way.
    let program = fixture("turns_last_assert");
    let out = temp_path("gdb-snapshots");
    let schedule = schedule_of(&program, &out);
    let flush = "maintenance flush register-cache";
    let commands = [
        "break record",
        "continue",
        "continue",
        "print taken",
        "delete",
        "continue",
        "print taken",
        "break record",
        "reverse-continue",
        "print taken",
        "print turns[taken - 1]",
        "reverse-continue",
        "print taken",
        "delete",
        "watch taken",
        "reverse-continue",
        "print taken",
        "delete",
        "monitor goto 100",
        flush,
        "print taken",
        // Going back to a decision keeps the history before it.
        "break record",
        "reverse-continue",
        "print taken",
        "delete",
        "monitor goto 40",
        flush,
        "print taken",
        "monitor goto 200",
        flush,
        "print taken",
        "monitor goto 120",
        flush,
        "print taken",
        "monitor snapshots",
        "kill",
    ];
    let run = |every: u64| {
        let how = How {
            snapshot_every: Some(every),
            ..How::default()
        };
        debug_schedule(&schedule, &program, &commands, how)
    };
    let from_start = run(0);
    let from_snapshots = run(8);
    let _ = fs::remove_dir_all(&out);
    let (a, b) = (&from_start.text, &from_snapshots.text);
    // Both went back, and saw the history as it was.
    assert!(a.contains("$3 = 119") && a.contains("$4 = 2"), "{a}");
    assert!(a.contains("$7 = 50") && a.contains("$8 = 49"), "{a}");
    assert!(
        a.contains("re-execution(s), each from the program's start"),
        "{a}"
    );
    assert_eq!(
        shown(a),
        shown(b),
        "\n--- from the start:\n{a}\n--- from snapshots:\n{b}"
    );
    // The second went back from snapshots (the goto to 40 and the first scan of each
    // reverse-continue may not; the others do).
    let used = b
        .lines()
        .find_map(|l| {
            l.split("; ")
                .nth(1)?
                .split(" of ")
                .next()?
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(0);
    assert!(used >= 4, "{b}\n{}", from_snapshots.err);
}
