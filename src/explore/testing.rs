//! Synthetic program models for strategy tests. [`Synthetic`]: threads that each perform a
//! fixed number of steps, all always enabled, with no blocking. [`Program`]: threads running
//! operations on shared words and mutexes (locks block), with footprints, for partial-order
//! reduction. Running a strategy over them counts the executions and collects the schedules
//! (or Mazurkiewicz traces) it produced. [`SpinWait`]: a thread that yields until another has
//! done its work (fair scheduling).

use std::collections::{HashMap, HashSet};

use super::{ExecutionSummary, FairFilter, Point, Scheduler};
use crate::model::{Footprint, ObjectKind, Role, ThreadId};

/// A scheduling point at `step` offering `enabled` (whose operations are `ops`), with
/// `current` the thread that ran last: no footprints, nothing blocked, no timeouts, no
/// yield.
pub fn plain_point<'a>(
    step: usize,
    enabled: &'a [ThreadId],
    ops: &'a [&'static str],
    current: Option<ThreadId>,
) -> Point<'a> {
    Point {
        enabled,
        ops,
        footprints: &[],
        blocked: &[],
        timeouts: &[],
        current,
        current_yields: false,
        step,
    }
}

/// `steps[t]` scheduling points for thread t. Thread 0 starts current.
pub struct Synthetic {
    pub steps: Vec<usize>,
}

impl Synthetic {
    /// Runs one execution under `s`; returns the sequence of chosen threads.
    pub fn run_once(&self, s: &mut dyn Scheduler) -> Vec<ThreadId> {
        let mut left = self.steps.clone();
        let mut current = None;
        let mut trace = Vec::new();
        loop {
            let enabled: Vec<ThreadId> = (0..left.len()).filter(|&t| left[t] > 0).collect();
            if enabled.is_empty() {
                break;
            }
            let ops = vec!["atomic"; enabled.len()];
            let t = s
                .choose(&plain_point(trace.len(), &enabled, &ops, current))
                .expect("no divergence in synthetic runs");
            assert!(enabled.contains(&t), "strategy chose a disabled thread");
            if s.tree().is_some_and(|t| t.leaves_share()) {
                // Another machine's part of a split search: the execution ends here.
                break;
            }
            left[t] -= 1;
            trace.push(t);
            current = Some(t);
        }
        s.end_execution(&ExecutionSummary {
            steps: trace.len(),
            threads: self.steps.len(),
            found_bug: false,
        });
        trace
    }

    /// Runs `s` until it is exhausted or `limit` executions; returns the distinct schedules
    /// and the number of executions.
    pub fn run_all(&self, s: &mut dyn Scheduler, limit: u64) -> (HashSet<Vec<ThreadId>>, u64) {
        let mut seen = HashSet::new();
        let mut n = 0;
        while n < limit {
            if s.begin_execution(n).is_none() {
                break;
            }
            seen.insert(self.run_once(s));
            n += 1;
        }
        (seen, n)
    }
}

impl Synthetic {
    /// Runs `s` to exhaustion showing it, at every point it asks for, the hash `state(left)`
    /// of the steps each thread has left; returns the executions and the transitions taken
    /// beyond each execution's replayed prefix.
    pub fn run_all_stateful(
        &self,
        s: &mut dyn Scheduler,
        state: impl Fn(&[usize]) -> u64,
    ) -> (u64, u64) {
        let (mut executions, mut transitions) = (0, 0);
        while s.begin_execution(executions).is_some() {
            // The last choice of the planned prefix is the new alternative.
            let prefix = (s.tree()).map_or(0, |t| t.planned_prefix().len().saturating_sub(1));
            let mut left = self.steps.clone();
            let (mut current, mut step) = (None, 0);
            loop {
                let enabled: Vec<ThreadId> = (0..left.len()).filter(|&t| left[t] > 0).collect();
                let mut visited = || {
                    let tree = s.tree()?;
                    Some(tree.wants_state(step) && tree.visit_state(step, state(&left)))
                };
                if enabled.is_empty() || visited() == Some(true) {
                    break;
                }
                let ops = vec!["atomic"; enabled.len()];
                let t = s
                    .choose(&plain_point(step, &enabled, &ops, current))
                    .expect("no divergence in synthetic runs");
                left[t] -= 1;
                step += 1;
                current = Some(t);
            }
            transitions += (step - prefix.min(step)) as u64;
            s.end_execution(&ExecutionSummary {
                steps: step,
                threads: self.steps.len(),
                found_bug: false,
            });
            executions += 1;
        }
        (executions, transitions)
    }
}

/// Preemptions in a schedule (a switch away from a thread that still had steps left).
pub fn preemptions(schedule: &[ThreadId], steps: &[usize]) -> usize {
    let mut left = steps.to_vec();
    let mut count = 0;
    for w in 0..schedule.len() {
        let t = schedule[w];
        if w > 0 {
            let prev = schedule[w - 1];
            if prev != t && left[prev] > 0 {
                count += 1;
            }
        }
        left[t] -= 1;
    }
    count
}

/// n choose k.
pub fn binomial(n: u64, k: u64) -> u64 {
    (1..=k).fold(1, |acc, i| acc * (n - k + i) / i)
}

/// A synthetic spin wait: thread 0 yields until thread 1 has taken `work` steps, then takes
/// one last step (it sees the flag and returns); thread 1 takes `work` steps. The spinner
/// yields in the same state every time (thread 1's steps are plain atomics, invisible to the
/// synchronisation fingerprint). Executions are cut after `max_steps` decisions.
pub struct SpinWait {
    pub work: usize,
    pub max_steps: usize,
}

impl SpinWait {
    /// Runs one execution under `s`, through a [`FairFilter`] when `fair`; returns the
    /// schedule and whether the execution was cut at `max_steps`.
    pub fn run_once(&self, s: &mut dyn Scheduler, fair: bool) -> (Vec<ThreadId>, bool) {
        let mut filter = FairFilter::new();
        let (mut done, mut spinner_done) = (0, false);
        let mut current = None;
        let mut trace = Vec::new();
        let cut = loop {
            let mut enabled = Vec::new();
            if !spinner_done {
                enabled.push(0);
            }
            if done < self.work {
                enabled.push(1);
            }
            if enabled.is_empty() {
                break false;
            }
            if trace.len() >= self.max_steps {
                break true;
            }
            let spinning = done < self.work;
            let schedulable = if fair {
                filter.schedulable(&enabled)
            } else {
                enabled.clone()
            };
            let ops: Vec<&'static str> = schedulable
                .iter()
                .map(|&t| {
                    if t == 0 && spinning {
                        "yield"
                    } else {
                        "atomic"
                    }
                })
                .collect();
            let t = s
                .choose(&Point {
                    enabled: &schedulable,
                    ops: &ops,
                    footprints: &[],
                    blocked: &[],
                    timeouts: &[],
                    current,
                    current_yields: current == Some(0) && spinning && !spinner_done,
                    step: trace.len(),
                })
                .expect("no divergence in synthetic runs");
            assert!(schedulable.contains(&t), "strategy chose a filtered thread");
            filter.chose(t, &enabled, (t == 0 && spinning).then_some(0));
            if t == 0 {
                spinner_done = !spinning;
            } else {
                done += 1;
            }
            trace.push(t);
            current = Some(t);
        };
        s.end_execution(&ExecutionSummary {
            steps: trace.len(),
            threads: 2,
            found_bug: false,
        });
        (trace, cut)
    }

    /// Runs `s` until it is exhausted or `limit` executions; returns the number of
    /// executions and how many of them were cut at `max_steps`.
    pub fn run_all(&self, s: &mut dyn Scheduler, fair: bool, limit: u64) -> (u64, u64) {
        let (mut n, mut cut) = (0, 0);
        while n < limit && s.begin_execution(n).is_some() {
            cut += self.run_once(s, fair).1 as u64;
            n += 1;
        }
        (n, cut)
    }
}

/// An operation of a thread of a synthetic [`Program`], on numbered objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynOp {
    /// Changes memory word `n`.
    Write(u64),
    /// Reads memory word `n`.
    Read(u64),
    /// Takes mutex `n`, waiting while another thread holds it.
    Lock(u64),
    /// Releases mutex `n`.
    Unlock(u64),
    /// Touches nothing shared.
    Local,
    /// Reads and changes memory word `n` in one atomic step (a fetch-and-add).
    Fetch(u64),
    /// Creates thread `n`, which is not present before (a thread no operation creates is
    /// present from the start).
    Spawn(ThreadId),
    /// Waits until thread `n` has performed all its operations.
    Join(ThreadId),
    /// The program's assertion: reads memory word `n` and fails, ending the process, when
    /// it holds `v`.
    Assert(u64, u64),
    /// Ends the process under every other thread (`exit`, or a return from `main` with
    /// threads still running).
    Exit,
}

impl Program {
    /// A small random program: 2 or 3 threads, each with up to `size` − threads operation
    /// groups (a read, a local step, a write, a write under one of two locks, or the two
    /// locks nested).
    pub fn random(rng: &mut impl rand::Rng, size: usize) -> Program {
        let threads = rng.random_range(2..=3);
        Program {
            threads: (0..threads)
                .map(|_| {
                    let mut ops = Vec::new();
                    for _ in 0..rng.random_range(1..=size.saturating_sub(threads).max(1)) {
                        let obj = rng.random_range(0..3);
                        match rng.random_range(0..5) {
                            0 => ops.push(SynOp::Read(obj)),
                            1 => ops.push(SynOp::Local),
                            2 => {
                                let m = 10 + rng.random_range(0..2);
                                ops.extend([SynOp::Lock(m), SynOp::Write(obj), SynOp::Unlock(m)]);
                            }
                            3 => {
                                let (m, n) = (10, 11);
                                ops.extend([
                                    SynOp::Lock(m),
                                    SynOp::Lock(n),
                                    SynOp::Unlock(n),
                                    SynOp::Unlock(m),
                                ]);
                            }
                            _ => ops.push(SynOp::Write(obj)),
                        }
                    }
                    ops
                })
                .collect(),
        }
    }
}

impl Program {
    /// A random program of 2 to 4 threads for the reduction oracle: thread 0 (main)
    /// creates the others between its own operations, may join some of them, and then
    /// usually returns, ending the process under the threads still running; every thread
    /// runs 1 to `size` groups of a read, a write, an atomic increment, a write under one
    /// of two locks, the two locks nested, or an assertion on a word's value (one that
    /// another thread writes, or the initial 0); a thread other than main now and then
    /// ends the process itself.
    pub fn random_with_exits(rng: &mut impl rand::Rng, size: usize) -> Program {
        let n = rng.random_range(2..=4);
        let mut threads: Vec<Vec<SynOp>> = (0..n)
            .map(|_| {
                let mut ops = Vec::new();
                for _ in 0..rng.random_range(1..=size.max(1)) {
                    let obj = rng.random_range(0..3);
                    match rng.random_range(0..6) {
                        0 => ops.push(SynOp::Read(obj)),
                        1 => ops.push(SynOp::Fetch(obj)),
                        2 => {
                            let m = 10 + rng.random_range(0..2);
                            ops.extend([SynOp::Lock(m), SynOp::Write(obj), SynOp::Unlock(m)]);
                        }
                        3 => ops.extend([
                            SynOp::Lock(10),
                            SynOp::Lock(11),
                            SynOp::Unlock(11),
                            SynOp::Unlock(10),
                        ]),
                        4 => ops.push(SynOp::Assert(obj, u64::MAX)),
                        _ => ops.push(SynOp::Write(obj)),
                    }
                }
                ops
            })
            .collect();
        for t in 1..n {
            let at = rng.random_range(0..=threads[0].len());
            threads[0].insert(at, SynOp::Spawn(t));
            if rng.random_bool(0.1) {
                threads[t].push(SynOp::Exit);
            }
        }
        for t in 1..n {
            if rng.random_bool(0.4) {
                threads[0].push(SynOp::Join(t));
            }
        }
        if rng.random_bool(0.75) {
            threads[0].push(SynOp::Exit);
        }
        // Each assertion fails on a value another thread writes to its word, if any.
        for t in 0..n {
            for i in 0..threads[t].len() {
                if let SynOp::Assert(obj, _) = threads[t][i] {
                    let written: Vec<u64> = (0..n)
                        .filter(|&u| u != t)
                        .flat_map(|u| {
                            (threads[u].iter().enumerate())
                                .filter(move |(_, op)| **op == SynOp::Write(obj))
                                .map(move |(j, _)| (u * 100 + j + 1) as u64)
                        })
                        .collect();
                    let v = match written.len() {
                        0 => 0,
                        k => written[rng.random_range(0..k)],
                    };
                    threads[t][i] = SynOp::Assert(obj, v);
                }
            }
        }
        Program { threads }
    }
}

impl SynOp {
    fn footprint(self) -> Footprint {
        let mut f = Footprint::default();
        match self {
            SynOp::Write(n) => f.touch_word(n * 8, true),
            SynOp::Read(n) => f.touch_word(n * 8, false),
            SynOp::Lock(n) => f.touch_as(ObjectKind::Mutex, n, true, Role::Acquire),
            SynOp::Unlock(n) => f.touch_as(ObjectKind::Mutex, n, true, Role::Release),
            SynOp::Fetch(n) => f.touch_word(n * 8, true),
            SynOp::Assert(n, _) => f.touch_word(n * 8, false),
            SynOp::Join(u) => f.touch_as(ObjectKind::Thread, u as u64, true, Role::Acquire),
            SynOp::Exit => f.global = true,
            SynOp::Local | SynOp::Spawn(_) => {}
        }
        f
    }
}

/// Threads (all present from the start) running fixed sequences of operations; a lock
/// blocks while another thread holds the mutex. Thread 0 starts current.
pub struct Program {
    pub threads: Vec<Vec<SynOp>>,
}

/// A footprint touching the mutexes `objects` (address, written?), for analysis tests.
pub fn mutex_footprint(objects: &[(u64, bool)]) -> Footprint {
    let mut f = Footprint::default();
    for &(a, w) in objects {
        f.touch(ObjectKind::Mutex, a, w);
    }
    f
}

/// What a [`Program`] execution ends with: memory (word, value written), the values each
/// thread read, and how many operations each thread performed.
pub type Outcome = (Vec<(u64, u64)>, Vec<Vec<u64>>, Vec<usize>);

/// A 64-bit hash of a synthetic program's state.
pub fn hash_of(state: &impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    state.hash(&mut h);
    h.finish()
}

/// A Mazurkiewicz trace in canonical form: for every pair of dependent operations of
/// different threads, which came first, as ((thread, index), (thread, index)) pairs, sorted;
/// then how many operations each thread performed (a deadlock leaves some undone).
pub type Trace = (Vec<((ThreadId, usize), (ThreadId, usize))>, Vec<usize>);

/// How a [`Program`] execution failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// Thread `.0`'s operation `.1`, an assertion, failed.
    Assertion(ThreadId, usize),
    /// No thread could go on while some had operations left.
    Deadlock,
}

/// One execution of a [`Program`] under a strategy.
#[derive(Debug)]
pub struct Run {
    /// The chosen threads.
    pub schedule: Vec<ThreadId>,
    /// Its Mazurkiewicz trace.
    pub trace: Trace,
    /// The final state, unless the strategy pruned the execution at a visited state.
    pub outcome: Option<Outcome>,
    /// How it failed, unless it ended normally or was pruned.
    pub failure: Option<Failure>,
    /// Its preemptions: switches away from a thread that could have gone on.
    pub preemptions: usize,
}

impl Program {
    /// The threads some operation creates (the others are present from the start).
    fn spawned(&self) -> Vec<bool> {
        let mut spawned = vec![false; self.threads.len()];
        for op in self.threads.iter().flatten() {
            if let SynOp::Spawn(u) = *op {
                spawned[u] = true;
            }
        }
        spawned
    }

    fn enabled(&self, next: &[usize], held: &HashMap<u64, ThreadId>, t: ThreadId) -> bool {
        match self.threads[t].get(next[t]) {
            None => false,
            Some(SynOp::Lock(m)) => !held.contains_key(m),
            Some(&SynOp::Join(u)) => next[u] == self.threads[u].len(),
            Some(_) => true,
        }
    }

    /// Runs one execution under `s`; returns the chosen threads and the execution's trace.
    pub fn run_once(&self, s: &mut dyn Scheduler) -> (Vec<ThreadId>, Trace) {
        let run = self.run(s);
        (run.schedule, run.trace)
    }

    /// Runs one execution under `s`, showing it the hash of the program state wherever it
    /// asks. The execution ends when no thread can go on, at an `Exit`, or at a failed
    /// assertion.
    pub fn run(&self, s: &mut dyn Scheduler) -> Run {
        self.run_with(s, &self.op_footprints())
    }

    /// Every operation's footprint, by thread and index: computed once per program rather
    /// than at every step and for every pair of events (the tests' own cost).
    pub fn op_footprints(&self) -> Vec<Vec<Footprint>> {
        self.threads
            .iter()
            .map(|ops| ops.iter().map(|op| op.footprint()).collect())
            .collect()
    }

    /// [`Program::run`] with the operations' footprints already computed.
    pub fn run_with(&self, s: &mut dyn Scheduler, op_footprints: &[Vec<Footprint>]) -> Run {
        let n = self.threads.len();
        let mut present: Vec<bool> = self.spawned().iter().map(|c| !c).collect();
        let mut next = vec![0; n];
        let mut held: HashMap<u64, ThreadId> = HashMap::new();
        let mut memory: std::collections::BTreeMap<u64, u64> = Default::default();
        let mut reads: Vec<Vec<u64>> = vec![Vec::new(); n];
        let mut current = None;
        let mut schedule = Vec::new();
        let mut events: Vec<(ThreadId, usize)> = Vec::new();
        let (mut pruned, mut ended, mut failure) = (false, false, None);
        let mut preemptions = 0;
        let (mut enabled, mut blocked, mut footprints) = (Vec::new(), Vec::new(), Vec::new());
        let ops = vec!["op"; n];
        loop {
            enabled.clear();
            blocked.clear();
            footprints.clear();
            let mut live = false;
            for t in (0..n).filter(|&t| present[t] && next[t] < self.threads[t].len()) {
                live = true;
                let footprint = op_footprints[t][next[t]].clone();
                if self.enabled(&next, &held, t) {
                    enabled.push(t);
                    footprints.push(footprint);
                } else {
                    blocked.push((t, footprint));
                }
            }
            if ended {
                break;
            }
            if enabled.is_empty() {
                if live {
                    failure = Some(Failure::Deadlock);
                }
                break;
            }
            if s.tree().is_some_and(|t| t.wants_state(schedule.len())) {
                let mut held_sorted: Vec<_> = held.iter().collect();
                held_sorted.sort_unstable();
                let hash = hash_of(&(&next, &present, held_sorted, &memory, &reads));
                if s.tree()
                    .is_some_and(|t| t.visit_state(schedule.len(), hash))
                {
                    pruned = true;
                    break;
                }
            }
            let t = s
                .choose(&Point {
                    enabled: &enabled,
                    ops: &ops[..enabled.len()],
                    footprints: &footprints,
                    blocked: &blocked,
                    timeouts: &[],
                    current,
                    current_yields: false,
                    step: schedule.len(),
                })
                .expect("no divergence in synthetic runs");
            assert!(enabled.contains(&t), "strategy chose a disabled thread");
            if current.is_some_and(|c| c != t && enabled.contains(&c)) {
                preemptions += 1;
            }
            let value = (t * 100 + next[t] + 1) as u64;
            match self.threads[t][next[t]] {
                SynOp::Lock(m) => {
                    held.insert(m, t);
                }
                SynOp::Unlock(m) => {
                    held.remove(&m);
                }
                SynOp::Write(n) => {
                    memory.insert(n, value);
                }
                SynOp::Read(n) => reads[t].push(memory.get(&n).copied().unwrap_or(0)),
                SynOp::Fetch(n) => {
                    let old = memory.get(&n).copied().unwrap_or(0);
                    reads[t].push(old);
                    memory.insert(n, old + 1000);
                }
                SynOp::Assert(n, v) => {
                    let seen = memory.get(&n).copied().unwrap_or(0);
                    reads[t].push(seen);
                    if seen == v {
                        failure = Some(Failure::Assertion(t, next[t]));
                        ended = true;
                    }
                }
                SynOp::Spawn(u) => present[u] = true,
                SynOp::Exit => ended = true,
                SynOp::Local | SynOp::Join(_) => {}
            }
            events.push((t, next[t]));
            next[t] += 1;
            if let Some(t) = s.tree() {
                t.ran(&Footprint::default());
            }
            schedule.push(t);
            current = Some(t);
        }
        // A deadlock or a failed assertion is the program's failure.
        s.end_execution(&ExecutionSummary {
            steps: schedule.len(),
            threads: n,
            found_bug: failure.is_some() && !pruned,
        });
        let mut trace = Vec::new();
        for (i, &a) in events.iter().enumerate() {
            for &b in &events[i + 1..] {
                if a.0 != b.0 && op_footprints[a.0][a.1].conflicts(&op_footprints[b.0][b.1]) {
                    trace.push((a, b));
                }
            }
        }
        trace.sort_unstable();
        let outcome = (!pruned).then(|| (memory.into_iter().collect(), reads, next.clone()));
        Run {
            schedule,
            trace: (trace, next),
            outcome,
            failure: failure.filter(|_| !pruned),
            preemptions,
        }
    }

    /// Runs `s` (which may prune at visited states) until it is exhausted or `limit`
    /// executions; returns the number of executions and the distinct final states seen.
    pub fn run_all_stateful(&self, s: &mut dyn Scheduler, limit: u64) -> (u64, HashSet<Outcome>) {
        let (n, _, outcomes) = self.run_all_observed(s, limit);
        (n, outcomes)
    }

    /// Runs `s` until it is exhausted or `limit` executions; returns the number of
    /// executions and the distinct traces seen.
    pub fn run_all(&self, s: &mut dyn Scheduler, limit: u64) -> (u64, HashSet<Trace>) {
        let (n, traces, _) = self.run_all_observed(s, limit);
        (n, traces)
    }

    /// Runs `s` until it is exhausted or `limit` executions; returns the number of
    /// executions, the distinct traces and the distinct final states (of the executions
    /// not pruned) seen.
    fn run_all_observed(
        &self,
        s: &mut dyn Scheduler,
        limit: u64,
    ) -> (u64, HashSet<Trace>, HashSet<Outcome>) {
        let (mut traces, mut outcomes) = (HashSet::new(), HashSet::new());
        let mut n = 0;
        let op_footprints = self.op_footprints();
        while n < limit && s.begin_execution(n).is_some() {
            let run = self.run_with(s, &op_footprints);
            traces.insert(run.trace);
            outcomes.extend(run.outcome);
            n += 1;
        }
        (n, traces, outcomes)
    }

    /// Qadeer's example: x and y private to threads 0 and 1, g (word 2) shared:
    /// x++ g++ x++ g++ ‖ y++ g++ y++ g++ (6 orders of the four g++).
    pub fn qadeer() -> Program {
        use SynOp::Write;
        Program {
            threads: vec![
                vec![Write(0), Write(2), Write(0), Write(2)],
                vec![Write(1), Write(2), Write(1), Write(2)],
            ],
        }
    }
}

/// An operation of a [`RacyProgram`] thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shared {
    /// A scheduling point that touches nothing shared (a thread's start).
    Sync,
    /// A plain access `(site, word, write)`: a scheduling point only when its site is one
    /// of the racy sites made points; otherwise it runs within the thread's step before it.
    Plain(u64, u64, bool),
}

/// Threads (all present from the start, each beginning with [`Shared::Sync`]) of plain
/// accesses without locks, so that any two conflicting accesses of different threads race:
/// the model of a program whose behaviour depends on the order of racy accesses, for the
/// coverage claims of race-directed refinement. Writes store 1; `fails` looks at the value
/// each read site saw.
pub struct RacyProgram {
    pub threads: Vec<Vec<Shared>>,
    pub fails: fn(&HashMap<u64, u64>) -> bool,
}

impl RacyProgram {
    /// Runs one execution under `s` with the plain accesses of `points` (sites) as
    /// scheduling points; returns whether it failed and the sites found racy.
    pub fn run_once(&self, s: &mut dyn Scheduler, points: &[u64]) -> (bool, Vec<u64>) {
        let is_point = |op: Shared| match op {
            Shared::Sync => true,
            Shared::Plain(site, _, _) => points.contains(&site),
        };
        let mut next = vec![0; self.threads.len()];
        let mut memory: HashMap<u64, u64> = HashMap::new();
        let mut reads: HashMap<u64, u64> = HashMap::new();
        let mut accesses: Vec<(ThreadId, u64, u64, bool)> = Vec::new();
        let (mut current, mut step) = (None, 0);
        loop {
            let enabled: Vec<ThreadId> = (0..self.threads.len())
                .filter(|&t| next[t] < self.threads[t].len())
                .collect();
            if enabled.is_empty() {
                break;
            }
            let footprints: Vec<Footprint> = (enabled.iter())
                .map(|&t| {
                    let mut f = Footprint::default();
                    if let Shared::Plain(_, word, write) = self.threads[t][next[t]] {
                        f.touch_word(word * 8, write);
                    }
                    f
                })
                .collect();
            let ops = vec!["op"; enabled.len()];
            let t = s
                .choose(&Point {
                    enabled: &enabled,
                    ops: &ops,
                    footprints: &footprints,
                    blocked: &[],
                    timeouts: &[],
                    current,
                    current_yields: false,
                    step,
                })
                .expect("no divergence in synthetic runs");
            // The point's operation, then what runs natively up to the next point.
            loop {
                if let Shared::Plain(site, word, write) = self.threads[t][next[t]] {
                    accesses.push((t, site, word, write));
                    if write {
                        memory.insert(word, 1);
                    } else {
                        reads.insert(site, memory.get(&word).copied().unwrap_or(0));
                    }
                }
                next[t] += 1;
                match self.threads[t].get(next[t]) {
                    Some(&op) if !is_point(op) => {}
                    _ => break,
                }
            }
            if let Some(t) = s.tree() {
                t.ran(&Footprint::default());
            }
            current = Some(t);
            step += 1;
        }
        s.end_execution(&ExecutionSummary {
            steps: step,
            threads: self.threads.len(),
            found_bug: false,
        });
        let mut racy = Vec::new();
        for (i, a) in accesses.iter().enumerate() {
            for b in &accesses[i + 1..] {
                if a.0 != b.0 && a.2 == b.2 && (a.3 || b.3) {
                    racy.extend([a.1, b.1]);
                }
            }
        }
        ((self.fails)(&reads), racy)
    }
}
