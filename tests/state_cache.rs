//! State caching (`--state-cache`, Holt's "One Page Model Checker") on real programs: the
//! `states` statistic (transitions executed beyond replayed prefixes) of `holt_append K`
//! exhaustively and with the cache, both derived by hand; the same counts from fork
//! snapshots and from fresh executions; a schedule-dependent output reported as
//! `nondeterminism`; the option refused outside dfs.

mod common;

use std::time::Duration;

use common::{args, fixture, mcheck};

const LIMIT: Duration = Duration::from_secs(240);

/// (executions, states, complete) of an exhaustive run.
fn run(options: &[&str], program: &[&str]) -> (u64, u64, bool) {
    let mut all = vec!["--jobs", "1", "--strategy", "dfs"];
    all.extend_from_slice(options);
    let json = common::clean_search(&all, program);
    (
        json["executions"].as_u64().unwrap(),
        json["states"].as_u64().unwrap(),
        json["complete"].as_bool().unwrap(),
    )
}

/// The steps of `holt_append K`, as a lattice. Main (T0) takes C0 (the entry, up to the
/// clone of T1), C1 (from the clone to its first append), its K appends a1..aK (aK runs to
/// the join) and J (the join, then the exit): K + 3 steps. T1 takes S (its start, up to its
/// first append) and its K appends: K + 1 steps. T1 exists after C0; J waits for T1's end.
/// A state of the search is a point (m, t) of the lattice: steps taken by each thread.
struct Lattice {
    k: u64,
}

impl Lattice {
    fn enabled(&self, (m, t): (u64, u64)) -> Vec<(u64, u64)> {
        let mut next = Vec::new();
        if m < self.k + 3 && !(m == self.k + 2 && t < self.k + 1) {
            next.push((m + 1, t));
        }
        if m >= 1 && t < self.k + 1 {
            next.push((m, t + 1));
        }
        next
    }

    /// Without a cache dfs walks the tree of paths: every edge of it is a transition, so
    /// the count is the sum over the lattice's points of the paths that reach them.
    fn tree_edges(&self, p: (u64, u64)) -> u64 {
        self.enabled(p)
            .into_iter()
            .map(|q| 1 + self.tree_edges(q))
            .sum()
    }

    /// With the cache, each point is expanded once: every edge of the lattice is one
    /// transition. The lattice of the K×K appends has 2K(K+1) edges; main's C1 and J and
    /// T1's S add a row and columns around it: 2K² + 6K + 6 in all.
    fn lattice_edges(&self) -> u64 {
        let mut edges = 0;
        for m in 0..=self.k + 3 {
            for t in 0..=self.k + 1 {
                let reachable = m >= 1 || t == 0;
                if reachable && !(m == self.k + 3 && t < self.k + 1) {
                    edges += self.enabled((m, t)).len() as u64;
                }
            }
        }
        edges
    }
}

/// Holt's pruned row: calls of his hook with pruning, for K = 3..8.
const HOLT_PRUNED: [u64; 6] = [18, 32, 50, 72, 98, 128];

#[test]
fn derivations_agree() {
    for k in 1..=8 {
        let l = Lattice { k };
        assert_eq!(l.lattice_edges(), 2 * k * k + 6 * k + 6, "k = {k}");
    }
    assert_eq!(Lattice { k: 3 }.tree_edges((0, 0)), 321);
}

#[test]
fn exhaustive_dfs_executes_every_edge_of_the_tree() {
    for k in [3u64, 4] {
        let ks = k.to_string();
        let (_, states, complete) = run(&["--no-por"], &["holt_append", &ks]);
        assert!(complete);
        assert_eq!(states, Lattice { k }.tree_edges((0, 0)), "holt_append {k}");
    }
}

/// With the cache every point of the lattice is expanded once. Holt's pruned row (2K²)
/// counts the K×K points where both threads still have appends left; mcheck's count also
/// has the boundary (one thread done) and the thread start, main's step after the clone
/// and the join: 2K² + 6K + 6, which stays within Holt's row plus the rows and columns
/// those extra steps add.
#[test]
fn the_state_cache_expands_each_lattice_point_once() {
    for k in 3u64..=8 {
        let ks = k.to_string();
        let (_, states, complete) = run(&["--state-cache"], &["holt_append", &ks]);
        assert!(complete, "holt_append {k}");
        let l = Lattice { k };
        assert_eq!(states, l.lattice_edges(), "holt_append {k}");
        let holt = HOLT_PRUNED[(k - 3) as usize];
        assert_eq!(states - holt, 6 * k + 6, "holt_append {k}");
    }
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
        assert!(with.2);
    }
}

#[test]
fn a_schedule_dependent_output_is_nondeterminism() {
    let a = args(&[
        "--quiet-program",
        "--jobs",
        "1",
        "--strategy",
        "dfs",
        "--state-cache",
        "--",
        &fixture("holt_append").display().to_string(),
        "2",
        "distinct",
    ]);
    let r = mcheck(&a, true, LIMIT);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let json = r.json.expect("JSON report");
    let f = &json["findings"][0];
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
