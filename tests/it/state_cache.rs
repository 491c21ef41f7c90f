//! State caching (`--state-cache`, Holt's "One Page Model Checker") on real programs: the
//! `states` and `transitions` statistics of `holt_append K` exhaustively and with the cache,
//! both derived by hand; the same counts from fork snapshots and from fresh executions; a
//! schedule-dependent output reported as `nondeterminism`; sleep sets kept with the states
//! (fewer executions, the same bugs); the option refused outside dfs.

use crate::common;

use std::time::Duration;

use crate::common::{args, fixture, mcheck};

const LIMIT: Duration = Duration::from_secs(240);

/// What an exhaustive run reports.
#[derive(Debug, PartialEq)]
struct Counts {
    executions: u64,
    /// Transitions chosen among two runnable threads (beyond replayed prefixes).
    states: u64,
    /// All transitions (beyond replayed prefixes).
    transitions: u64,
    complete: bool,
}

fn run(options: &[&str], program: &[&str]) -> Counts {
    let mut all = vec!["--jobs", "1", "--strategy", "dfs"];
    all.extend_from_slice(options);
    let json = common::clean_search(&all, program);
    Counts {
        executions: json["executions"].as_u64().unwrap(),
        states: json["states"].as_u64().unwrap(),
        transitions: json["transitions"].as_u64().unwrap(),
        complete: json["complete"].as_bool().unwrap(),
    }
}

/// The steps of `holt_append K`, as a lattice. Main (T0) takes C0 (the entry, through the
/// clone of T1 (which starts within that step, up to its first append) to main's own first
/// append), its K appends a1..aK (aK runs to the join) and J (the join, then the exit):
/// K + 2 steps. T1 takes its K appends b1..bK (bK runs to its exit). T1 exists after C0; J
/// waits for T1's end. A state of the search is a point (m, t) of the lattice: steps taken
/// by each thread.
struct Lattice {
    k: u64,
}

/// (transitions, states): all edges, and the edges leaving points where both threads can
/// run (a step from a point with one runnable thread is forced, not a choice).
type Edges = (u64, u64);

impl Lattice {
    fn enabled(&self, (m, t): (u64, u64)) -> Vec<(u64, u64)> {
        let mut next = Vec::new();
        if m < self.k + 2 && !(m == self.k + 1 && t < self.k) {
            next.push((m + 1, t));
        }
        if m >= 1 && t < self.k {
            next.push((m, t + 1));
        }
        next
    }

    fn edges_from(&self, p: (u64, u64)) -> Edges {
        let n = self.enabled(p).len() as u64;
        (n, if n > 1 { n } else { 0 })
    }

    /// Without a cache dfs walks the tree of paths: every edge of it is a transition, so
    /// the count is the sum over the lattice's points of the paths that reach them.
    fn tree_edges(&self, p: (u64, u64)) -> Edges {
        let (mut all, mut chosen) = self.edges_from(p);
        for q in self.enabled(p) {
            let (a, c) = self.tree_edges(q);
            all += a;
            chosen += c;
        }
        (all, chosen)
    }

    /// With the cache, each point is expanded once: every edge of the lattice is one
    /// transition. Both threads can run exactly at the K×K points where each has appends
    /// left (m in 1..=K, t in 0..K), two choices each: 2K² states, Holt's pruned row. The
    /// forced edges are C0, main's K+1 steps once T1 is done and T1's K steps once main
    /// waits at J: 2K² + 2K + 2 transitions.
    fn lattice_edges(&self) -> Edges {
        let (mut all, mut chosen) = (0, 0);
        for m in 0..=self.k + 2 {
            for t in 0..=self.k {
                let reachable = m >= 1 || t == 0;
                if reachable && !(m == self.k + 2 && t < self.k) {
                    let (a, c) = self.edges_from((m, t));
                    all += a;
                    chosen += c;
                }
            }
        }
        (all, chosen)
    }
}

/// Holt's pruned row: calls of his hook with pruning, for K = 3..8.
const HOLT_PRUNED: [u64; 6] = [18, 32, 50, 72, 98, 128];

#[test]
fn derivations_agree() {
    for k in 1..=8 {
        let l = Lattice { k };
        assert_eq!(
            l.lattice_edges(),
            (2 * k * k + 2 * k + 2, 2 * k * k),
            "k = {k}"
        );
    }
    assert_eq!(Lattice { k: 3 }.tree_edges((0, 0)), (89, 38));
}

#[test]
fn exhaustive_dfs_executes_every_edge_of_the_tree() {
    for k in [3u64, 4] {
        let ks = k.to_string();
        let c = run(&["--no-por"], &["holt_append", &ks]);
        assert!(c.complete);
        let (transitions, states) = Lattice { k }.tree_edges((0, 0));
        assert_eq!(
            (c.transitions, c.states),
            (transitions, states),
            "holt_append {k}"
        );
        // Interleavings of the 2K appends: C(2K, K).
        assert_eq!(c.executions, [20, 70][k as usize - 3], "holt_append {k}");
    }
}

/// With the cache every point of the lattice is expanded once, so mcheck's `states` is
/// Holt's pruned row exactly.
#[test]
fn the_state_cache_expands_each_lattice_point_once() {
    for k in 3u64..=8 {
        let ks = k.to_string();
        let c = run(&["--state-cache"], &["holt_append", &ks]);
        assert!(c.complete, "holt_append {k}");
        let l = Lattice { k };
        assert_eq!(
            (c.transitions, c.states),
            l.lattice_edges(),
            "holt_append {k}"
        );
        assert!(c.states <= HOLT_PRUNED[(k - 3) as usize], "holt_append {k}");
    }
}

/// With `--state-cache`, dfs's partial-order reduction is sleep sets kept with the states:
/// every program is still exhausted, with fewer executions than the cache alone
/// (`--no-por`) where some steps are independent (counts measured, not derived: unit test
/// `sleep_sets_with_the_state_cache_reach_every_final_state` checks on random programs
/// that no final state is lost), and the bugs of the bug fixtures are still found.
#[test]
fn sleep_sets_kept_with_the_states_explore_less_and_find_the_same_bugs() {
    for program in [
        &["qadeer"][..],
        &["sem_ok"],
        &["race_barrier_phases_ok"],
        &["wakeup_locks"],
    ] {
        let sleepy = run(&["--state-cache"], program);
        let plain = run(&["--state-cache", "--no-por"], program);
        assert!(sleepy.complete && plain.complete, "{program:?}");
        assert!(
            sleepy.executions < plain.executions,
            "{program:?}: {sleepy:?} vs {plain:?}"
        );
    }
    for (program, kind) in [
        ("abba_O0", "deadlock"),
        ("sem_deadlock", "deadlock"),
        ("order_assert", "assertion"),
    ] {
        assert_eq!(first_finding(&[program])["kind"], kind, "{program}");
    }
}

/// The first finding of `dfs --state-cache --jobs 1` on `program` (fixture and arguments),
/// which must report one (exit status 1).
fn first_finding(program: &[&str]) -> serde_json::Value {
    cached_dfs(&[], &[], program, 1)["findings"][0].clone()
}

/// The JSON report of `dfs --state-cache --jobs 1` with `options` on `program` (fixture
/// and arguments), mcheck run with `env`, which must exit with `code`.
fn cached_dfs(
    options: &[&str],
    env: &[(&str, &str)],
    program: &[&str],
    code: i32,
) -> serde_json::Value {
    let r = cached_dfs_run(options, env, program);
    assert_eq!(r.code, Some(code), "{}: {}", r.command, r.stderr);
    r.json.expect("JSON report")
}

/// The run of `mcheck --jobs 1 --strategy dfs --state-cache OPTIONS -- PROGRAM` with `env`.
fn cached_dfs_run(options: &[&str], env: &[(&str, &str)], program: &[&str]) -> common::Run {
    let mut a = args(&[
        "--quiet-program",
        "--jobs",
        "1",
        "--strategy",
        "dfs",
        "--state-cache",
    ]);
    a.extend(args(options));
    a.push("--".into());
    a.push(fixture(program[0]).display().to_string());
    a.extend(args(&program[1..]));
    common::mcheck_with_env(&a, env, true, LIMIT)
}

#[test]
fn snapshots_and_fresh_executions_prune_alike() {
    for program in [
        &["holt_append", "4"][..],
        &["atomic_pair", "2"],
        &["qadeer"],
    ] {
        let with = run(&["--state-cache"], program);
        let without = run(&["--state-cache", "--no-snapshots"], program);
        assert_eq!(with, without, "{program:?}");
        assert!(with.complete);
    }
}

/// Incremental hashing (write tracking through userfaultfd) gives the hash a full read of
/// memory gives at every point: mcheck checks each one against a full hash when
/// MCHECK_VERIFY_STATE_HASH is set and stops with an error on a difference. `bench_resident
/// 4` has 4 MiB of heap, enough for write tracking to be set up, and most of it is not
/// written again, so most page hashes are kept; its executions start from the startup
/// snapshot. `state_hash_heap_ok` has 2 MiB and long executions, which start from branch
/// snapshots (80 of them, the search capped).
#[test]
fn incremental_hashing_agrees_with_full_hashing() {
    let search = |env: &[(&str, &str)], program: &[&str]| {
        let options = ["--no-races", "--max-executions", "80"];
        let json = cached_dfs(&options, env, program, 0);
        let cache = &json["state_cache"];
        let from_branches = &json["snapshots"]["executions_from_branch_snapshot"];
        (
            [
                &json["executions"],
                &json["states"],
                &cache["states"],
                &cache["hits"],
            ]
            .map(|v| v.as_u64().unwrap()),
            cache["pages_reused"].as_u64().unwrap(),
            from_branches.as_u64().unwrap(),
        )
    };
    let programs = [
        &["bench_resident", "4"][..],
        &["state_hash_heap_ok"],
        &["holt_append", "4"],
    ];
    for program in programs {
        let (checked, reused, branches) = search(&[("MCHECK_VERIFY_STATE_HASH", "1")], program);
        let (full, none, _) = search(&[("MCHECK_FULL_STATE_HASH", "1")], program);
        assert_eq!(checked, full, "{program:?}");
        assert_eq!(none, 0, "{program:?}");
        if program[0] != "holt_append" {
            // Most pages are never written again: their hashes are kept.
            assert!(
                reused > 10 * checked[0],
                "{program:?}: {reused} page hashes kept"
            );
        }
        if program[0] == "state_hash_heap_ok" {
            assert!(
                branches > 40,
                "{program:?}: {branches} from branch snapshots"
            );
        }
    }
}

/// Equal states must hash equally in every run, whatever the machine's load: the hashes of
/// one search, printed with their parts (`MCHECK_DEBUG_STATE_HASH`), are the same lines in
/// two runs. A new thread's cached tid was hashed raw until its first stop had been seen,
/// which comes sooner or later with the load: the count of distinct states of
/// `incremental_hashing_agrees_with_full_hashing` changed now and then (281 against 289,
/// 294, 304), and the hashes of any two runs differed from the first thread creation on.
#[test]
fn two_runs_of_a_search_hash_the_same_states() {
    let hashes = || {
        let r = cached_dfs_run(
            &["--no-races", "--max-executions", "30"],
            &[("MCHECK_DEBUG_STATE_HASH", "1")],
            &["state_hash_heap_ok"],
        );
        assert_eq!(r.code, Some(0), "{}: {}", r.command, r.stderr);
        let lines: Vec<String> = (r.stderr.lines())
            .filter(|l| l.starts_with("HASH "))
            .map(String::from)
            .collect();
        assert!(lines.len() > 50, "{}: {} hashes", r.command, lines.len());
        lines
    };
    let (first, second) = (hashes(), hashes());
    let differ = first.iter().zip(&second).position(|(a, b)| a != b);
    assert!(
        differ.is_none() && first.len() == second.len(),
        "the state hashes of two runs differ at {differ:?} of {} and {}: {:?}",
        first.len(),
        second.len(),
        differ.map(|i| (&first[i], &second[i]))
    );
}

#[test]
fn a_schedule_dependent_output_is_nondeterminism() {
    let f = first_finding(&["holt_append", "2", "distinct"]);
    assert_eq!(f["kind"], "nondeterminism");
    assert!(f["details"].to_string().contains("the earlier schedule"));
}

#[test]
fn the_state_cache_is_for_dfs_only() {
    let a = args(&[
        "--strategy",
        "icb",
        "--state-cache",
        "--",
        &fixture("holt_append").display().to_string(),
    ]);
    let r = mcheck(&a, false, LIMIT);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}
