//! Systematic strategies on real programs: exhaustive dfs counts derived by hand, icb at
//! bound 0 giving exactly the non-preemptive executions, icb finding preemption bugs at
//! the smallest bound with that many preemptions reported, and fair scheduling: dfs ends on
//! spin waits, and a livelock is reported with the cycle it repeats.

mod common;

use std::time::Duration;

use common::{args, fixture, mcheck};

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
/// - main (T0): C0 = the program entry, C1 = right after creating T1 (the clone event),
///   C2 = right after creating T2, J1 = pthread_join(T1), J2 = pthread_join(T2);
/// - T1 and T2: S = the thread's first step, then K atomic increments: n = K + 1 points each.
///   (Thread exit is not an operation of its own; glibc's internal lock taken while
///   creating a thread is part of the atomic libc call.)
///
/// C0 is always first (only T0 exists). T1 exists once C0 has run, T2 once C1 has run.
/// J1 can run only after all of T1, J2 only after all of T2. Cut the schedule at T0's
/// points C1, C2, J1, J2 into segments s0 (before C1) … s3 (between J1 and J2): T1's n
/// points fall into s0, s1, s2 (a0 + a1 + a2 = n) and T2's into s1, s2, s3 (b1 + b2 + b3 =
/// n), since T2 starts after C1 and must end before J2. Inside s1 and s2 the two threads'
/// points interleave freely, in C(a1+b1, a1) and C(a2+b2, a2) ways; s0 and s3 hold one
/// thread only. So
///
///   count(n) = Σ_{a0+a1+a2=n} Σ_{b1+b2+b3=n} C(a1+b1, a1) · C(a2+b2, a2)
///
/// which gives 11, 71, 379, 1849 for K = 0, 1, 2, 3.
fn atomic_pair_count(k: u64) -> u64 {
    let n = k + 1;
    let c = |a: u64, b: u64| -> u64 { (1..=b).fold(1, |acc, i| acc * (a - b + i) / i) };
    let mut total = 0;
    for a0 in 0..=n {
        for a1 in 0..=n - a0 {
            let a2 = n - a0 - a1;
            for b1 in 0..=n {
                for b2 in 0..=n - b1 {
                    total += c(a1 + b1, a1) * c(a2 + b2, a2);
                }
            }
        }
    }
    total
}

#[test]
fn derivation_matches_the_known_small_values() {
    assert_eq!(
        (0..4).map(atomic_pair_count).collect::<Vec<_>>(),
        vec![11, 71, 379, 1849]
    );
}

#[test]
fn dfs_explores_exactly_the_derived_number_of_executions() {
    for k in 0..=2u64 {
        let ks = k.to_string();
        let (n, complete) = executions(&["--strategy", "dfs", "--no-por"], &["atomic_pair", &ks]);
        assert!(complete, "dfs must exhaust atomic_pair {k}");
        assert_eq!(n, atomic_pair_count(k), "atomic_pair {k}");
    }
}

/// With partial-order reduction, dfs runs one execution per Mazurkiewicz trace of
/// `atomic_pair K`: main's points (entry, after each clone, the joins) and the threads'
/// first steps touch nothing shared, a thread's first step comes after the clone that made
/// it and a join after the joined thread's exit; the 2K increments all write the one
/// counter, so only their interleaving matters: C(2K, K) = 1, 2, 6, 20 for K = 0..3.
#[test]
fn dpor_explores_one_execution_per_order_of_the_dependent_increments() {
    for (k, expected) in [(0, 1), (1, 2), (2, 6), (3, 20)] {
        let ks = k.to_string();
        let (n, complete) =
            executions(&["--strategy", "dfs", "--jobs", "1"], &["atomic_pair", &ks]);
        assert!(complete, "dfs must exhaust atomic_pair {k}");
        assert_eq!(n, expected, "atomic_pair {k}");
    }
}

/// Qadeer's example (`qadeer`): main runs x++ g++ x++ g++ after creating a thread that runs
/// y++ g++ y++ g++ (every increment a `lock add`, one scheduling point each).
///
/// Without reduction: main's points are C0 (the entry; running it creates the thread), C1
/// (after the clone), its four increments a1..a4 and J (the join); the thread's are S (its
/// first step) and b1..b4. C0 comes first; then main's five points C1 a1 a2 a3 a4 and the
/// thread's five points S b1 b2 b3 b4 interleave freely (nothing blocks), and J comes last
/// (it waits for the thread's exit, which ends its b4 step). So C(10, 5) = 252 executions:
/// C(8,4) = 70 orders of the eight increments, multiplied by where C1 and S fall.
///
/// With reduction: only the order of the four g++ matters, C(4,2) = 6 traces.
#[test]
fn dpor_runs_qadeers_example_once_per_order_of_the_shared_increments() {
    let (n, complete) = executions(&["--strategy", "dfs", "--no-por"], &["qadeer"]);
    assert!(complete);
    assert_eq!(n, 252);
    let (n, complete) = executions(&["--strategy", "dfs", "--jobs", "1"], &["qadeer"]);
    assert!(complete);
    assert_eq!(n, 6);
    // Two workers share the tree; sleep sets do not cross work items, so a few equivalent
    // executions may run twice, never fewer than one per trace.
    let (n, complete) = executions(&["--strategy", "dfs", "--jobs", "2"], &["qadeer"]);
    assert!(complete);
    assert!((6..=40).contains(&n), "{n}");
}

#[test]
fn icb_at_bound_zero_explores_exactly_the_non_preemptive_executions() {
    // Without preemptions main runs to its first join (C0, C1, C2, J1 blocked); then a
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
    let (n, complete) = executions(&["--strategy", "icb"], &["atomic_pair", "1"]);
    assert!(complete);
    assert_eq!(n, atomic_pair_count(1));
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
        // And nothing is found with one preemption fewer, over the whole bounded space.
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
        assert_eq!(r.code, Some(0), "{}: {}", r.command, r.stderr);
        assert_eq!(r.json.unwrap()["complete"], true, "{name}");
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
        "portfolio ends when icb is exhausted"
    );
    assert_eq!(json["coverage"]["exhausted"], true);
    assert!(r.stderr.contains("search space exhausted"), "{}", r.stderr);
}

/// Runs `mcheck <options> -- <fixture>` and returns its JSON report, checking the exit status.
fn report(options: &[&str], program: &str, code: i32) -> serde_json::Value {
    let mut a = args(&["--quiet-program"]);
    a.extend(args(options));
    a.push("--".into());
    a.push(fixture(program).display().to_string());
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
    assert_eq!(json["executions"], 300);
    assert_eq!(json["coverage"]["exhausted"], false);
    assert_eq!(json["findings"].as_array().map(Vec::len), Some(0));
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
