//! Systematic strategies on real programs: exhaustive dfs counts derived by hand, icb at
//! bound 0 giving exactly the non-preemptive executions, icb finding preemption bugs at
//! the smallest bound with that many preemptions reported, and fair scheduling: dfs ends on
//! spin waits, and a livelock is reported with the cycle it repeats.

use crate::common;

use std::time::Duration;

use crate::common::{args, fixture, mcheck};

const LIMIT: Duration = Duration::from_secs(240);

fn executions(strategy_args: &[&str], program: &[&str]) -> (u64, bool) {
    let json = common::clean_search(strategy_args, program);
    (
        json["executions"].as_u64().unwrap(),
        json["complete"].as_bool().unwrap(),
    )
}

/// Number of interleavings of `atomic_pair K`, derived by hand.
///
/// The scheduling points of the program are, in program order:
/// - main (T0): C0 = the program entry, J1 = pthread_join(T1), J2 = pthread_join(T2). Creating
///   a thread is not a point: main's first step runs from the entry through both clones to
///   J1, and each new thread starts within that step, up to its first increment.
/// - T1 and T2: their K atomic increments; the last one runs to the thread's exit. (glibc's
///   internal lock taken while creating a thread is part of the atomic libc call.)
///
/// C0 is always first (only T0 exists). J1 can run only after all of T1, J2 only after J1
/// and all of T2. Say b of T2's increments come before J1: they interleave with T1's K in
/// C(K+b, b) ways, and T2's other K−b then run alone before J2. So
///
///   count(K) = Σ_{b=0..K} C(K+b, b) = C(2K+1, K)
///
/// which gives 1, 3, 10, 35 for K = 0, 1, 2, 3.
fn atomic_pair_count(k: u64) -> u64 {
    let c = |n: u64, r: u64| -> u64 { (1..=r).fold(1, |acc, i| acc * (n - r + i) / i) };
    (0..=k).map(|b| c(k + b, b)).sum()
}

#[test]
fn derivation_matches_the_known_small_values() {
    assert_eq!(
        (0..4).map(atomic_pair_count).collect::<Vec<_>>(),
        vec![1, 3, 10, 35]
    );
}

/// The counting fixtures with `long` counters and their 4-byte twins (`int`, `atomic_int`,
/// `uint32_t`, side by side in 8-byte words): dependency is byte-exact, so both count alike.
const WITH_TWIN: [&str; 2] = ["", "_int"];

#[test]
fn dfs_explores_exactly_the_derived_number_of_executions() {
    for (k, twin) in (0..=3u64).flat_map(|k| WITH_TWIN.map(|t| (k, t))) {
        let ks = k.to_string();
        let program = format!("atomic_pair{twin}");
        let (n, complete) = executions(&["--strategy", "dfs", "--no-por"], &[&program, &ks]);
        assert!(complete, "dfs must exhaust {program} {k}");
        assert_eq!(n, atomic_pair_count(k), "{program} {k}");
    }
}

/// With partial-order reduction, dfs runs one execution per Mazurkiewicz trace of
/// `atomic_pair K`: main's points (entry, the joins) touch nothing shared, the threads exist
/// once the entry step has run, and a join comes after the joined thread's exit; the 2K
/// increments all write the one
/// counter, so only their interleaving matters: C(2K, K) = 1, 2, 6, 20 for K = 0..3.
#[test]
fn dpor_explores_one_execution_per_order_of_the_dependent_increments() {
    for ((k, expected), twin) in [(0, 1), (1, 2), (2, 6), (3, 20)]
        .into_iter()
        .flat_map(|c| WITH_TWIN.map(|t| (c, t)))
    {
        let ks = k.to_string();
        let program = format!("atomic_pair{twin}");
        let (n, complete) = executions(&["--strategy", "dfs", "--jobs", "1"], &[&program, &ks]);
        assert!(complete, "dfs must exhaust {program} {k}");
        assert_eq!(n, expected, "{program} {k}");
    }
}

/// Qadeer's example (`qadeer`): main runs x++ g++ x++ g++ after creating a thread that runs
/// y++ g++ y++ g++ (every increment a `lock add`, one scheduling point each).
///
/// Without reduction: main's points are C0 (the entry; its step creates the thread, which
/// starts within it up to its first increment, and goes on to main's first increment), its
/// four increments a1..a4 and J (the join); the thread's are its increments b1..b4. C0 comes
/// first; then a1..a4 and b1..b4 interleave freely (nothing blocks), and J comes last (it
/// waits for the thread's exit, which ends its b4 step). So C(8, 4) = 70 executions, Qadeer's
/// count.
///
/// With reduction: only the order of the four g++ matters, C(4,2) = 6 traces.
///
/// `qadeer_int` is the same with C11 `atomic_int` counters side by side, y and g in one
/// 8-byte word: 6 traces too (15 executions while dependency was computed on 8-byte words).
#[test]
fn dpor_runs_qadeers_example_once_per_order_of_the_shared_increments() {
    for program in ["qadeer", "qadeer_int"] {
        let (n, complete) = executions(&["--strategy", "dfs", "--no-por"], &[program]);
        assert!(complete);
        assert_eq!(n, 70, "{program}");
        let (n, complete) = executions(&["--strategy", "dfs", "--jobs", "1"], &[program]);
        assert!(complete);
        assert_eq!(n, 6, "{program}");
    }
    // Two workers share the tree: a work item brings what its giver explored at every node
    // above it (docs/architecture.md), so a reversal one worker covered is not asked of
    // another (9 executions before). The split depends on timing: allow a little slack.
    let (n, complete) = executions(&["--strategy", "dfs", "--jobs", "2"], &["qadeer"]);
    assert!(complete);
    assert!((6..=8).contains(&n), "{n}");
}

/// The three-thread variant (`qadeer3`): main creates T1 (x++ g++ x++ g++) and T2 (y++ g++
/// y++ g++), every increment a `lock add`, then joins T1 (J1) and T2 (J2).
///
/// Without reduction: main's first step C0 runs from the entry through both clones to J1,
/// and both threads start within it up to their first increment; then T1's a1..a4 and T2's
/// b1..b4 interleave, J1 can only come after a4 (T1's exit ends its a4 step) and J2 only
/// after J1 and b4, so J2 is last: the chain a1..a4·J1 (5 steps) interleaves with b1..b4
/// (4 steps) in C(9, 4) = 126 ways.
///
/// With reduction: x and y are private, J1 touches only T1, so the only dependent steps of
/// different threads are the four g++ (two of T1, two of T2): C(4, 2) = 6 traces, as in the
/// two-thread example, and the exit/join dependencies add none.
///
/// `qadeer3_int` (`uint32_t` counters side by side) counts the same.
#[test]
fn dpor_runs_the_three_thread_qadeer_example_once_per_trace() {
    for program in ["qadeer3", "qadeer3_int"] {
        let (n, complete) = executions(
            &["--strategy", "dfs", "--no-por", "--jobs", "1"],
            &[program],
        );
        assert!(complete);
        assert_eq!(n, 126, "{program}");
        let (n, complete) = executions(&["--strategy", "dfs", "--jobs", "1"], &[program]);
        assert!(complete);
        assert_eq!(n, 6, "{program}");
    }
}

/// `wakeup_locks`: main creates A (lock m, store x, unlock), B (lock m, store y, unlock) and
/// C (load x), then joins A (Ja), B (Jb) and C (Jc); the stores and the load are atomics.
///
/// Without reduction: main's first step runs through the three clones to Ja, and the
/// threads start within it up to their first operation. A's three steps and B's three
/// cannot interleave (the lock blocks), and the step after an unlock runs to the thread's
/// exit. With A's section first, Ja comes after A's unlock and before Jb (4 places among B's
/// steps), Jb after B's unlock; C's load goes anywhere before Jc (9 places among the 8
/// steps), and Jc is last: 4 · 9 = 36. With B's first, Ja and Jb both follow all six: C's
/// load has the same 9 places. 45 executions.
///
/// With reduction: the order of the critical sections (2) times whether the load comes
/// before or after the store of x (2): 4 traces. Source sets alone explore 5 here (one
/// execution is sleep-set blocked); the wakeup trees of optimal DPOR explore exactly 4.
///
/// `wakeup_locks_int` stores `int` x and y, side by side in one 8-byte word: the same 4
/// (6 while dependency was computed on 8-byte words).
#[test]
fn optimal_dpor_runs_one_execution_where_source_sets_run_a_redundant_one() {
    for program in ["wakeup_locks", "wakeup_locks_int"] {
        let (n, complete) = executions(
            &["--strategy", "dfs", "--no-por", "--jobs", "1"],
            &[program],
        );
        assert!(complete);
        assert_eq!(n, 45, "{program}");
        let (n, complete) = executions(&["--strategy", "dfs", "--jobs", "1"], &[program]);
        assert!(complete);
        assert_eq!(n, 4, "{program}");
    }
}

#[test]
fn icb_at_bound_zero_explores_exactly_the_non_preemptive_executions() {
    // Without preemptions main runs to its first join (C0, J1 blocked); then a
    // free switch picks T1 or T2, which runs to its end; then (T1 first) either main joins
    // T1 and blocks on J2 so T2 runs, or T2 runs first; (T2 first) T1 must run before main
    // can pass J1. Orders: T1·T0·T2, T1·T2·T0, T2·T1·T0: 3 executions, whatever K is.
    for k in ["1", "3"] {
        let (n, complete) = executions(
            &["--strategy", "icb", "--preemption-bound", "0"],
            &["atomic_pair", k],
        );
        assert!(complete);
        assert_eq!(n, 3, "atomic_pair {k}");
    }
}

#[test]
fn icb_explores_every_execution_once_when_unbounded() {
    let (n, complete) = executions(&["--strategy", "icb"], &["atomic_pair", "2"]);
    assert!(complete);
    assert_eq!(n, atomic_pair_count(2));
}

/// (fixture, smallest number of preemptions its bug needs)
const PREEMPTION_BUGS: &[(&str, u64)] = &[
    // T1 must be preempted between its two locks so that T2 takes the second one.
    ("abba_O0", 1),
    ("abba_O2", 1),
    ("cpp_abba", 1),
];

#[test]
fn icb_finds_preemption_bugs_at_the_smallest_bound() {
    for &(name, bound) in PREEMPTION_BUGS {
        let program = fixture(name).display().to_string();
        let mut a = args(&[
            "--quiet-program",
            "--strategy",
            "icb",
            "--max-executions",
            "100000",
        ]);
        a.extend(["--".to_string(), program.clone()]);
        let r = mcheck(&a, true, LIMIT);
        assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
        let f = &r.json.as_ref().unwrap()["findings"][0];
        assert_eq!(f["preemptions"].as_u64(), Some(bound), "{name}: {f}");
        // And with one preemption fewer the bounded search cannot reach the deadlock, but
        // the lock-order cycle its executions show is confirmed by a directed execution
        // (which ignores the preemption bound): the deadlock is found all the same, with
        // more preemptions than the bound, and named as the confirmation's.
        let mut a = args(&[
            "--quiet-program",
            "--strategy",
            "icb",
            "--max-executions",
            "100000",
            "--preemption-bound",
        ]);
        a.push((bound - 1).to_string());
        a.extend(["--".to_string(), program]);
        let r = mcheck(&a, true, LIMIT);
        assert_eq!(r.code, Some(1), "{}: {}", r.command, r.stderr);
        let json = r.json.unwrap();
        let findings = json["findings"].as_array().unwrap();
        let kinds: Vec<&str> = findings.iter().filter_map(|f| f["kind"].as_str()).collect();
        assert_eq!(kinds, ["deadlock"], "{name}: {}", r.stderr);
        let f = &findings[0];
        assert_eq!(f["strategy"], "lock-order confirmation", "{name}: {f}");
        assert!(f["preemptions"].as_u64() >= Some(bound), "{name}: {f}");
        assert!(json["lock_order_confirmation_executions"].as_u64() >= Some(1));
    }
}

/// A preemption cap that left executions with more preemptions unexplored is stated as
/// such, not as plain exhaustion: `wakeup_locks` has 45 executions, 39 of them with at most
/// one preemption and all with at most two (`make bench`, por section); reduced (the
/// default), 28 and 30.
#[test]
fn a_preemption_cap_that_leaves_executions_is_not_called_exhaustion() {
    for (flags, cap, executions, beyond) in [
        (&["--no-por"][..], "1", 39, true),
        (&["--no-por"], "2", 45, false),
        (&[], "1", 28, true),
        (&[], "2", 30, false),
    ] {
        let json = icb_report(cap, flags, "wakeup_locks");
        let cov = &json["coverage"];
        assert_eq!(
            json["executions"], executions,
            "cap {cap} {flags:?}: {json}"
        );
        assert_eq!(json["complete"], true, "cap {cap}: {json}");
        assert_eq!(cov["beyond_preemption_bound"], beyond, "cap {cap}: {json}");
        let statement = cov["statement"].as_str().unwrap();
        let expected = match (beyond, flags.is_empty()) {
            (true, false) => "search space exhausted up to the preemption bound: all executions with ≤ 1 preemption(s) explored (39 execution(s)), executions with more preemptions not explored; no bug found".to_string(),
            (true, true) => "search space exhausted up to the preemption bound: every execution with ≤ 1 preemption(s) explored, up to the order of independent steps (28 execution(s)), executions with more preemptions not explored; no bug found".to_string(),
            (false, _) => format!("search space exhausted: {executions} execution(s) explored, no bug found"),
        };
        assert_eq!(statement, expected, "cap {cap} {flags:?}");
    }
}

/// icb is reduced by bounded partial-order reduction by default: same bound, same verdict,
/// fewer executions, and the statement names the equivalence; `--no-por` explores every
/// execution within the bound.
#[test]
fn bounded_por_covers_icb_in_fewer_executions_and_says_up_to_what() {
    // The 4-byte twins count the same (wakeup_locks_int: 35 while dependency was computed
    // on 8-byte words).
    for (fixture, cap, plain, reduced) in [
        ("qadeer", "2", 17, 9),
        ("qadeer_int", "2", 17, 9),
        ("wakeup_locks", "1", 39, 28),
        ("wakeup_locks_int", "1", 39, 28),
    ] {
        let icb = icb_report(cap, &["--no-por"], fixture);
        let bpor = icb_report(cap, &[], fixture);
        assert_eq!(icb["executions"], plain, "{fixture}: {icb}");
        assert_eq!(bpor["executions"], reduced, "{fixture}: {bpor}");
        assert_eq!(icb["coverage"]["up_to_independent_steps"], false, "{icb}");
        assert_eq!(bpor["coverage"]["up_to_independent_steps"], true, "{bpor}");
        assert_eq!(bpor["strategy"], "icb", "{bpor}");
        assert_eq!(bpor["complete"], true, "{bpor}");
        let statement = bpor["coverage"]["statement"].as_str().unwrap();
        assert!(
            statement.contains(&format!(
                "every execution with ≤ {cap} preemption(s) explored, up to the order of independent steps ({reduced} execution(s))"
            )),
            "{statement}"
        );
        // The flag it had while it was opt-in is still accepted, and changes nothing.
        let flagged = icb_report(cap, &["--bounded-por"], fixture);
        assert_eq!(flagged["executions"], reduced, "{fixture}: {flagged}");
    }
}

/// The portfolio's icb member is reduced like icb alone, and says so; a split search (or
/// `--no-por`) explores it unreduced and says "all executions".
#[test]
fn the_portfolio_icb_member_is_reduced_except_in_a_split_search() {
    let base = ["--max-executions", "100", "--jobs", "1"];
    let whole = report(&base, "bench_lock_turns", 0);
    let statement = whole["coverage"]["statement"].as_str().unwrap();
    assert_eq!(
        whole["coverage"]["up_to_independent_steps"], true,
        "{whole}"
    );
    assert!(
        statement.contains(
            "every execution with ≤ 0 preemption(s) explored, up to the order of independent steps"
        ),
        "{statement}"
    );
    for extra in [&["--shard", "1/2"][..], &["--no-por"], &["--no-races"]] {
        let opts: Vec<&str> = base.iter().chain(extra).copied().collect();
        let json = report(&opts, "bench_lock_turns", 0);
        assert_eq!(
            json["coverage"]["up_to_independent_steps"], false,
            "{extra:?}: {json}"
        );
        let statement = json["coverage"]["statement"].as_str().unwrap();
        assert!(
            !statement.contains("independent steps"),
            "{extra:?}: {statement}"
        );
    }
}

#[test]
fn default_command_reports_coverage() {
    let a = args(&[
        "--quiet-program",
        "--",
        &fixture("atomic_pair").display().to_string(),
        "1",
    ]);
    let r = mcheck(&a, true, LIMIT);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let json = r.json.unwrap();
    assert_eq!(json["strategy"], "portfolio");
    assert_eq!(
        json["complete"], true,
        "portfolio ends when one of its trees is exhausted"
    );
    assert_eq!(json["coverage"]["exhausted"], true);
    assert!(r.stderr.contains("search space exhausted"), "{}", r.stderr);
}

/// The default portfolio proves a correct program by its reduced member: `qadeer3` has 126
/// executions unreduced and 6 traces (see above). In 200 executions the icb member gets a
/// quarter of the tree slots, far from its 126; the reduced dfs runs out after a few.
#[test]
fn the_default_portfolio_proves_a_program_by_its_reduced_tree() {
    let json = report(&["--max-executions", "200"], "qadeer3", 0);
    assert_eq!(json["strategy"], "portfolio");
    assert_eq!(json["complete"], true, "{json}");
    assert_eq!(json["stopped_because"], "search space exhausted");
    assert!(json["executions"].as_u64().unwrap() < 200, "{json}");
}

/// The default command (no `--max-executions`) proves a correct program whose reduced tree
/// holds up to 1,000 executions: `atomic_pair 6` has C(12, 6) = 924 traces (see
/// `dpor_explores_one_execution_per_order_of_the_dependent_increments`). The reduced tree
/// has about half of the 1,000 slots of the default budget, then goes on alone until it
/// has had 1,000 itself. A budget given on the command line stays a hard bound.
#[test]
fn the_default_command_proves_a_program_whose_reduced_tree_holds_924_traces() {
    let (n, complete) = executions(&["--strategy", "dfs", "--jobs", "1"], &["atomic_pair", "6"]);
    assert!(complete);
    assert_eq!(n, 924, "C(12, 6) traces");
    for jobs in ["1", "2"] {
        let json = report_args(&["--jobs", jobs], &["atomic_pair", "6"], 0);
        assert_eq!(json["complete"], true, "--jobs {jobs}: {json}");
        assert_eq!(json["coverage"]["exhausted"], true, "{json}");
        let n = json["executions"].as_u64().unwrap();
        assert!((924..=2000).contains(&n), "--jobs {jobs}: {n} executions");
    }
    let json = report_args(&["--max-executions", "1000"], &["atomic_pair", "6"], 0);
    assert_eq!(
        json["executions"], 1000,
        "an explicit budget is a hard bound: {json}"
    );
    assert_eq!(json["complete"], false, "{json}");
}

/// `--no-races` explores the order of synchronisation only: the orders of plain accesses
/// are not points, so a run that exhausts its tree must not say the search space is
/// exhausted. `race_reorder` has the assertion that only a switch between two plain stores
/// reaches.
#[test]
fn without_race_detection_exhaustion_covers_the_synchronisation_order_only() {
    let json = report_args(&["--no-races"], &["race_reorder"], 0);
    let cov = &json["coverage"];
    assert_eq!(cov["synchronisation_exhausted"], true, "{json}");
    assert_eq!(cov["exhausted"], false, "{json}");
    assert_eq!(json["complete"], false, "{json}");
    let statement = cov["statement"].as_str().unwrap();
    assert!(
        statement.contains("exhausted for synchronisation order only")
            && statement.contains("--no-races"),
        "{statement}"
    );
    // With races on, the default command follows the race to the assertion.
    let json = report_args(&[], &["race_reorder"], 1);
    let kinds: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"assertion"), "{kinds:?}");
}

/// Runs `mcheck <options> -- <fixture>` and returns its JSON report, checking the exit status.
/// The report of `--strategy icb --jobs 1 --preemption-bound CAP` and `extra` on fixture
/// `program`, which must find nothing.
fn icb_report(cap: &str, extra: &[&str], program: &str) -> serde_json::Value {
    let mut o = vec![
        "--strategy",
        "icb",
        "--jobs",
        "1",
        "--preemption-bound",
        cap,
    ];
    o.extend_from_slice(extra);
    report(&o, program, 0)
}

fn report(options: &[&str], program: &str, code: i32) -> serde_json::Value {
    report_args(options, &[program], code)
}

/// [`report`] with arguments: `program[0]` is the fixture, the rest its arguments.
fn report_args(options: &[&str], program: &[&str], code: i32) -> serde_json::Value {
    let mut a = args(&["--quiet-program"]);
    a.extend(args(options));
    a.push("--".into());
    a.push(fixture(program[0]).display().to_string());
    a.extend(args(&program[1..]));
    let r = mcheck(&a, true, LIMIT);
    assert_eq!(r.code, Some(code), "{}: {}", r.command, r.stderr);
    r.json.expect("JSON report")
}

#[test]
fn fair_dfs_exhausts_correct_spin_waits() {
    // The waiter yields (sched_yield, or PAUSE: a yield point) until the setter raises the
    // flag. Without fairness the tree of schedules is infinite; with it dfs ends.
    for name in ["yield_spin_ok", "pause_spin_ok"] {
        let json = report(
            &["--strategy", "dfs", "--max-executions", "100000"],
            name,
            0,
        );
        assert_eq!(json["coverage"]["exhausted"], true, "{name}: {json}");
        assert_eq!(json["complete"], true, "{name}");
        assert_eq!(json["findings"].as_array().map(Vec::len), Some(0), "{name}");
    }
}

#[test]
fn a_busy_wait_on_an_atomic_is_learnt_as_a_yield_point_not_a_timeout() {
    // No yield, no PAUSE, no system call in the loop: the previous binary spun into the
    // watchdog and reported a `timeout` on this correct program. One execution is spent
    // learning the loop's atomic load; dfs then exhausts the search with it as a yield point.
    for name in ["atomic_spin_ok", "omp_atomic_rw_ok"] {
        let json = report(
            &["--strategy", "dfs", "--max-executions", "100000"],
            name,
            0,
        );
        assert_eq!(
            json["findings"].as_array().map(Vec::len),
            Some(0),
            "{name}: {json}"
        );
        let learnt = json["coverage"]["busy_waits_included"].as_array();
        assert_eq!(learnt.map(Vec::len), Some(1), "{name}: {json}");
        if name == "atomic_spin_ok" {
            assert_eq!(json["coverage"]["exhausted"], true, "{name}: {json}");
        }
    }
}

#[test]
fn a_thread_left_waiting_on_an_orphaned_lock_is_a_note_not_a_deadlock() {
    // orphaned_lock_exit: a thread exits holding a mutex, another then waits on it forever,
    // and main exits: the program ends (as `java -version` does), so no deadlock; the note
    // says who waited on what.
    let a = args(&[
        "--quiet-program",
        "--",
        fixture("orphaned_lock_exit").to_str().unwrap(),
    ]);
    let r = mcheck(&a, true, LIMIT);
    assert_eq!(r.code, Some(0), "{}: {}", r.command, r.stderr);
    assert!(
        r.stderr.contains("note: the program ended while thread T2 waited forever in mutex_lock for the mutex `vm_lock`")
            && r.stderr.contains("which thread T1 still held when it exited"),
        "{}",
        r.stderr
    );
}

#[test]
fn without_fairness_dfs_spends_its_budget_on_a_spin_wait() {
    let json = report(
        &[
            "--strategy",
            "dfs",
            "--no-fair",
            "--max-executions",
            "300",
            "--max-steps",
            "200",
        ],
        "yield_spin_ok",
        0,
    );
    // The tree is cut at 200 steps; with partial-order reduction the yields are
    // independent and it can run out within the budget, but it was explored only up to the
    // step limit, and the search must not say it was exhausted: it counts the executions
    // cut there.
    assert!(json["executions"].as_u64().unwrap() <= 300, "{json}");
    assert_eq!(json["coverage"]["exhausted"], false, "{json}");
    assert_eq!(json["complete"], false, "{json}");
    assert_eq!(json["findings"].as_array().map(Vec::len), Some(0));
    let statement = json["coverage"]["statement"].as_str().unwrap();
    assert!(json["cut_at_max_steps"].as_u64().unwrap() > 0, "{json}");
    assert!(statement.contains("were cut at --max-steps 200"), "{json}");
    assert!(
        json["stopped_because"] == "execution budget spent"
            || statement
                .contains("not exhausted: the tree of schedules ran out only up to --max-steps"),
        "{json}"
    );
}

#[test]
fn a_livelock_is_reported_with_the_cycle_it_repeats() {
    let json = report(
        &["--strategy", "dfs", "--max-steps", "500"],
        "polite_livelock",
        1,
    );
    let f = &json["findings"][0];
    assert_eq!(f["kind"], "livelock", "{f}");
    let cycle = f["cycle"].as_array().expect("a cycle");
    let threads: std::collections::BTreeSet<u64> =
        cycle.iter().filter_map(|s| s["thread"].as_u64()).collect();
    assert_eq!(threads, [1, 2].into(), "both polite threads repeat: {f}");
    assert!(cycle.iter().any(|s| s["op"] == "yield"), "{f}");
    assert!(
        cycle.iter().all(|s| s["location"]["file"]
            .as_str()
            .is_some_and(|p| p.ends_with("polite_livelock.c"))),
        "every step is located in the program: {f}"
    );
}

/// A process that ends under threads still running (main returns without joining) is no
/// proof that they cannot fail: every systematic strategy, reduced or not, alone or in the
/// portfolio, reaches the assertion that needs main preempted before its exit, and none
/// claims exhaustion before it has. (Bounded POR claimed it after 1 execution.)
#[test]
fn no_strategy_claims_exhaustion_while_an_assertion_is_reachable() {
    for program in ["unjoined_account", "unjoined_token_ring"] {
        for options in [
            &["--strategy", "dfs"][..],
            &["--strategy", "dfs", "--no-por"],
            &["--strategy", "dfs", "--state-cache"],
            &["--strategy", "icb"],
            &["--strategy", "icb", "--no-por"],
            &["--strategy", "icb", "--preemption-bound", "1"],
            &[],
        ] {
            let mut o = vec!["--jobs", "1", "--keep-going", "--max-executions", "3000"];
            o.extend_from_slice(options);
            let json = report(&o, program, 1);
            let kinds: Vec<&str> = (json["findings"].as_array().unwrap().iter())
                .map(|f| f["kind"].as_str().unwrap())
                .collect();
            assert!(
                kinds.contains(&"assertion"),
                "{program} {options:?}: {}",
                json["coverage"]["statement"]
            );
        }
    }
}

/// The first finding's kind and execution of `mcheck --jobs 1 --seed 1 OPTS -- FIXTURE`.
fn first_finding(opts: &[&str], name: &str) -> Option<(String, u64)> {
    let mut a = args(&["--quiet-program", "--jobs", "1", "--seed", "1"]);
    a.extend(opts.iter().map(|s| s.to_string()));
    a.extend(["--".to_string(), fixture(name).display().to_string()]);
    let r = mcheck(&a, true, LIMIT);
    let json = r.json.expect("a JSON report");
    let f = json["findings"].as_array().unwrap().first()?.clone();
    Some((f["kind"].as_str()?.to_string(), f["execution"].as_u64()?))
}

#[test]
fn pos_holds_a_check_back_through_independent_steps_where_random_does_not() {
    // deep_order3: A1 < B1 < A2 < C1 with 12 independent steps of A before A1 and between
    // A1 and A2 (docs/performance.md, "Deep bugs": POS median 176, random none in 3000).
    let budget = ["--max-executions", "1000"];
    let pos = first_finding(
        &[&["--strategy", "pos"][..], &budget].concat(),
        "deep_order3",
    );
    assert!(
        matches!(&pos, Some((kind, _)) if kind == "assertion"),
        "pos: {pos:?}"
    );
    let random = first_finding(
        &[&["--strategy", "random"][..], &budget].concat(),
        "deep_order3",
    );
    assert_eq!(random, None, "random is not expected to find it in 1000");
}

#[test]
fn pct_cycling_depths_reaches_a_bug_pct_of_depth_three_misses() {
    // deep_safestack needs three preemptions: depth 4, which pct --pct-depth 3 never has.
    let budget = ["--max-executions", "1500"];
    let cycling = [&["--strategy", "pct", "--pct-depth", "1..5"][..], &budget].concat();
    let found = first_finding(&cycling, "deep_safestack");
    assert!(
        matches!(&found, Some((kind, _)) if kind == "assertion"),
        "pct 1..5: {found:?}"
    );
    let fixed = [&["--strategy", "pct", "--pct-depth", "3"][..], &budget].concat();
    assert_eq!(first_finding(&fixed, "deep_safestack"), None);
}
