//! The reduction oracle: on random synthetic programs ([`Program`]), every reduced tree
//! search must reach what the unreduced one reaches. Two checks:
//!
//! - **Whole searches** ([`whole_oracle`]): with thread creation, joins, atomic increments,
//!   assertions and exits that end the process under running threads
//!   ([`Program::random_with_exits`]), optimal DPOR, DPOR by source sets, sleep sets with the
//!   state cache, and icb with bounded partial-order reduction (no cap) must each find every
//!   failure (assertion, deadlock) and every final state of a normal end that unreduced dfs
//!   finds, and claim exhaustion only then.
//! - **Bound by bound** ([`bounded_oracle`]): icb with bounded partial-order reduction must,
//!   at each preemption bound, cover every trace, final state and failure that unreduced icb
//!   covers with at most that many preemptions.
//!
//! Small sizes run in `make test`; `bounded_por_oracle_large` and `whole_oracle_large`
//! (ignored, `MCHECK_ORACLE`) take larger ones for `make bench`.

use std::collections::HashSet;

use rand::SeedableRng;

use super::state_cache::StateTable;
use super::testing::{Failure, Outcome, Program, Trace};
use super::tree::TreeSearch;
use super::Scheduler;

/// What a search reached on one program: its failures, the final states of the executions
/// that ended normally (not pruned), and its number of executions.
#[derive(Debug, Default)]
struct Reached {
    failures: HashSet<Failure>,
    states: HashSet<Outcome>,
    executions: u64,
}

/// Runs `s` on `prog` until it claims exhaustion, or `limit` executions (None then).
fn reach(prog: &Program, s: &mut TreeSearch, limit: u64) -> Option<Reached> {
    let mut r = Reached::default();
    let op_footprints = prog.op_footprints();
    while s.begin_execution(r.executions).is_some() {
        if r.executions == limit {
            return None;
        }
        let run = prog.run_with(s, &op_footprints);
        // A failure ends the process under the other threads: what they did before it is
        // not a final state of the program (a reduction may cut them at another point).
        match run.failure {
            Some(f) => {
                r.failures.insert(f);
            }
            None => r.states.extend(run.outcome),
        }
        r.executions += 1;
    }
    assert!(s.is_exhausted());
    Some(r)
}

/// A reduced search of the whole oracle: its name, and how to make a fresh one.
type Reduced = (&'static str, Box<dyn Fn() -> TreeSearch>);

/// The reduced searches the whole oracle checks.
fn reduced_searches() -> Vec<Reduced> {
    vec![
        ("optimal dpor", Box::new(TreeSearch::dpor)),
        (
            "dpor by source sets",
            Box::new(|| TreeSearch::dpor().with_wakeup_trees(false)),
        ),
        (
            "sleep sets with the state cache",
            Box::new(|| {
                let table = std::sync::Arc::new(std::sync::Mutex::new(StateTable::default()));
                TreeSearch::dfs()
                    .with_por(true)
                    .with_state_cache(Some(table))
            }),
        ),
        (
            "icb with bounded por",
            Box::new(|| TreeSearch::icb(None).with_por(true)),
        ),
    ]
}

/// What the whole oracle found: programs checked (the unreduced search ended within its
/// limit), programs skipped, and each loss with its program.
#[derive(Debug, Default)]
struct WholeOracle {
    checked: u64,
    skipped: u64,
    /// Programs with at least one failure, and with an `Exit` under running threads.
    failing: u64,
    losses: Vec<String>,
    /// Executions of unreduced dfs, and of each reduced search, over the checked programs.
    unreduced: u64,
    reduced: Vec<u64>,
}

/// Compares every reduced search with unreduced dfs on `programs` random programs of each
/// size of `sizes`, for each seed.
fn whole_oracle(seeds: &[u64], sizes: &[usize], programs: usize, verbose: bool) -> WholeOracle {
    let searches = reduced_searches();
    let mut o = WholeOracle {
        reduced: vec![0; searches.len()],
        ..WholeOracle::default()
    };
    for &seed in seeds {
        for &size in sizes {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            for _ in 0..programs {
                let prog = Program::random_with_exits(&mut rng, size);
                let Some(all) = reach(&prog, &mut TreeSearch::dfs(), 20_000) else {
                    o.skipped += 1;
                    continue;
                };
                o.checked += 1;
                o.unreduced += all.executions;
                o.failing += !all.failures.is_empty() as u64;
                for (k, (name, make)) in searches.iter().enumerate() {
                    let r = reach(&prog, &mut make(), 1_000_000).expect("a reduced search ends");
                    o.reduced[k] += r.executions;
                    let lost_failures: Vec<_> = all.failures.difference(&r.failures).collect();
                    let lost_states = all.states.difference(&r.states).count();
                    if !lost_failures.is_empty() || lost_states > 0 {
                        o.losses.push(format!(
                            "{name}: lost failures {lost_failures:?} and {lost_states} final \
                             state(s) of {:?}",
                            prog.threads
                        ));
                    }
                }
            }
            if verbose {
                eprintln!("seed {seed} size {size}: {o:?}");
            }
        }
    }
    o
}

#[test]
fn reduced_searches_reach_every_failure_and_final_state_of_unreduced_dfs() {
    let o = whole_oracle(&[1, 2], &[1, 2, 3], 40, false);
    assert!(o.losses.is_empty(), "{}", o.losses.join("\n"));
    // The programs are real tests: most are checked, many fail somewhere.
    assert!(o.checked >= 200, "{o:?}");
    assert!(o.failing * 4 >= o.checked, "{o:?}");
    // And the reductions reduce.
    for (k, n) in o.reduced.iter().enumerate() {
        assert!(*n < o.unreduced, "search {k}: {o:?}");
    }
}

/// The larger whole oracle (`MCHECK_ORACLE="seeds;sizes;programs"`, by default seeds 11-14,
/// sizes 2-4, 150 programs each): a few minutes in release mode.
#[test]
#[ignore]
fn whole_oracle_large() {
    let spec = std::env::var("MCHECK_ORACLE").unwrap_or("11,12,13,14;2,3,4;150".into());
    let parts: Vec<&str> = spec.split(';').collect();
    let o = whole_oracle(
        &list(parts[0]),
        &sizes(parts[1]),
        parts[2].parse().unwrap(),
        true,
    );
    assert!(o.losses.is_empty(), "{}", o.losses.join("\n"));
}

/// A comma-separated list of numbers.
fn list(s: &str) -> Vec<u64> {
    s.split(',').map(|x| x.parse().unwrap()).collect()
}

/// A comma-separated list of sizes.
fn sizes(s: &str) -> Vec<usize> {
    list(s).into_iter().map(|n| n as usize).collect()
}

/// What the bounded-reduction oracle found, per bound 0..=max (cumulative over bounds).
#[derive(Debug, Default)]
struct Oracle {
    /// Traces of unreduced icb the reduced search did not explore.
    lost_traces: Vec<u64>,
    /// Final states of unreduced icb the reduced search did not reach.
    lost_states: Vec<u64>,
    /// Failures of unreduced icb the reduced search did not reach.
    lost_failures: Vec<u64>,
    /// Executions of unreduced icb, and of the reduced search.
    icb: Vec<u64>,
    reduced: Vec<u64>,
    /// Reduced executions with more preemptions than their bound.
    over: u64,
    /// A program that lost something, for the message.
    example: Option<String>,
}

impl Oracle {
    fn new(bounds: usize) -> Oracle {
        Oracle {
            lost_traces: vec![0; bounds],
            lost_states: vec![0; bounds],
            lost_failures: vec![0; bounds],
            icb: vec![0; bounds],
            reduced: vec![0; bounds],
            ..Oracle::default()
        }
    }

    fn add(&mut self, o: Oracle) {
        for k in 0..self.icb.len() {
            self.lost_traces[k] += o.lost_traces[k];
            self.lost_states[k] += o.lost_states[k];
            self.lost_failures[k] += o.lost_failures[k];
            self.icb[k] += o.icb[k];
            self.reduced[k] += o.reduced[k];
        }
        self.over += o.over;
        self.example = self.example.take().or(o.example);
    }
}

/// What one search covered at each bound 0..=max.
struct Covered {
    traces: Vec<HashSet<Trace>>,
    states: Vec<HashSet<Outcome>>,
    failures: Vec<HashSet<Failure>>,
}

/// Runs unreduced and reduced icb up to bound `max` on `programs` random programs (made by
/// `generate`) of each size of `sizes`, for each seed of `seeds`, and compares, bound by
/// bound, the traces, final states and failures of the executions each explored with at
/// most that many preemptions (unreduced: every such execution; reduced: those of its
/// rounds up to that bound). Prints a line per seed and size when `verbose`.
fn bounded_oracle(
    generate: fn(&mut rand_pcg::Pcg64Mcg, usize) -> Program,
    seeds: &[u64],
    sizes: &[usize],
    programs: usize,
    max: u32,
    verbose: bool,
) -> Oracle {
    let b = max as usize + 1;
    let mut all = Oracle::new(b);
    for &seed in seeds {
        for &size in sizes {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let mut o = Oracle::new(b);
            for _ in 0..programs {
                let prog = generate(&mut rng, size);
                let op_footprints = prog.op_footprints();
                let mut seen = |s: &mut TreeSearch, reduced: bool| {
                    let mut c = Covered {
                        traces: vec![HashSet::new(); b],
                        states: vec![HashSet::new(); b],
                        failures: vec![HashSet::new(); b],
                    };
                    let mut n = 0;
                    while s.begin_execution(n).is_some() {
                        let round = s.current_bound() as usize;
                        let run = prog.run_with(s, &op_footprints);
                        // Unreduced icb explores each execution once, at its cost.
                        let from = if reduced { round } else { run.preemptions };
                        o.over += (reduced && run.preemptions > round) as u64;
                        for k in from..b {
                            c.traces[k].insert(run.trace.clone());
                            c.states[k].extend(run.outcome.clone());
                            c.failures[k].extend(run.failure);
                            if reduced {
                                o.reduced[k] += 1;
                            } else {
                                o.icb[k] += 1;
                            }
                        }
                        n += 1;
                    }
                    assert!(s.is_exhausted());
                    c
                };
                let icb = seen(&mut TreeSearch::icb(Some(max)), false);
                let red = seen(&mut TreeSearch::icb(Some(max)).with_por(true), true);
                for k in 0..b {
                    let lt = icb.traces[k].difference(&red.traces[k]).count() as u64;
                    let ls = icb.states[k].difference(&red.states[k]).count() as u64;
                    let lf = icb.failures[k].difference(&red.failures[k]).count() as u64;
                    o.lost_traces[k] += lt;
                    o.lost_states[k] += ls;
                    o.lost_failures[k] += lf;
                    if lt + ls + lf > 0 && o.example.is_none() {
                        o.example = Some(format!("bound {k}: {:?}", prog.threads));
                    }
                }
            }
            if verbose {
                eprintln!(
                    "seed {seed} size {size}: lost traces {:?}, lost states {:?}, lost failures \
                     {:?}; executions icb {:?}, reduced {:?}; over the bound {}",
                    o.lost_traces, o.lost_states, o.lost_failures, o.icb, o.reduced, o.over
                );
            }
            all.add(o);
        }
    }
    all
}

/// Asserts the oracle's soundness findings, and that the reduction is real.
fn assert_sound(o: &Oracle) {
    assert!(
        o.lost_traces.iter().all(|&n| n == 0),
        "traces lost per bound {:?} (final states {:?}, failures {:?}), e.g. {:?}",
        o.lost_traces,
        o.lost_states,
        o.lost_failures,
        o.example
    );
    assert!(o.lost_states.iter().all(|&n| n == 0), "{o:?}");
    assert!(o.lost_failures.iter().all(|&n| n == 0), "{o:?}");
    assert_eq!(o.over, 0, "executions beyond their bound");
    let last = o.icb.len() - 1;
    assert!(
        o.reduced[last] < o.icb[last],
        "{:?} vs {:?}",
        o.reduced,
        o.icb
    );
}

fn locks_only(rng: &mut rand_pcg::Pcg64Mcg, size: usize) -> Program {
    Program::random(rng, size)
}

fn with_exits(rng: &mut rand_pcg::Pcg64Mcg, size: usize) -> Program {
    Program::random_with_exits(rng, size)
}

#[test]
fn bounded_por_covers_every_trace_icb_covers_at_each_bound() {
    let o = bounded_oracle(locks_only, &[15, 21], &[4, 5, 6, 7], 25, 2, false);
    assert_sound(&o);
    eprintln!(
        "bounds 0-2: icb {:?} executions, bounded POR {:?}",
        o.icb, o.reduced
    );
    // A third of the executions or fewer at bound 2.
    assert!(
        o.reduced[2] * 3 <= o.icb[2],
        "{:?} vs {:?}",
        o.reduced,
        o.icb
    );
}

#[test]
fn bounded_por_covers_what_icb_covers_with_exits_joins_and_assertions() {
    let o = bounded_oracle(with_exits, &[3, 4], &[1, 2], 40, 2, false);
    assert_sound(&o);
}

/// The large oracle (`MCHECK_ORACLE="seeds;sizes;programs;max_bound"`, by default seeds
/// 21-25, sizes 5-8, 300 programs each, bounds 0-3; with `MCHECK_ORACLE_PROGRAMS=exits`, the
/// programs with exits, joins and assertions, seeds 21-23, sizes 2-3, 150 programs each):
/// minutes in release mode.
#[test]
#[ignore]
fn bounded_por_oracle_large() {
    let exits = std::env::var("MCHECK_ORACLE_PROGRAMS").is_ok_and(|v| v == "exits");
    let default = if exits {
        "21,22,23;2,3;150;3"
    } else {
        "21,22,23,24,25;5,6,7,8;300;3"
    };
    let spec = std::env::var("MCHECK_ORACLE").unwrap_or(default.into());
    let parts: Vec<&str> = spec.split(';').collect();
    let o = bounded_oracle(
        if exits { with_exits } else { locks_only },
        &list(parts[0]),
        &sizes(parts[1]),
        parts[2].parse().unwrap(),
        parts[3].parse().unwrap(),
        true,
    );
    eprintln!("total: {o:?}");
    assert_sound(&o);
}
