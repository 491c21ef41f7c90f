//! Stateless depth-first search over scheduling choices (VeriSoft style): every execution
//! replays the choices of the path to the deepest node with an unexplored alternative, takes
//! that alternative, then follows default choices.
//!
//! With a preemption bound it is iterative preemption bounding (Musuvathi & Qadeer, PLDI'07):
//! alternatives that would exceed the current bound c are not explored but queued, and once
//! everything within c is done the queued prefixes are explored with bound c+1. Every
//! execution is therefore explored exactly once, all executions with ≤ c preemptions before
//! any with c+1. Switching away from a blocked, yielding or exited thread is free.
//!
//! Unbounded DFS can be reduced by dynamic partial-order reduction ([`super::dpor`]): a new
//! node then starts with the first step of the wakeup tree planned for it
//! ([`super::wakeup`]), else its default choice (or another thread that does not sleep),
//! and alternatives are added by the race analysis of each finished execution.
//!
//! Unbounded DFS can instead prune with a table of visited states ([`super::state_cache`],
//! `--state-cache`): at every point beyond the replayed prefix the executor shows the
//! strategy the state's hash; a state seen before at the same per-thread step counter ends
//! the execution there.
//!
//! An unreduced search can be one shard of a search split among machines
//! ([`super::shard`], `--shard I/N`): it then follows only the children of its range.

mod held_back;
mod reduction;

use self::reduction::Reduction;

use std::collections::{HashSet, VecDeque};

use super::bounded::{HeldIndex, Steps};
use super::dpor::{self, PorNode, Reversal, Step};
use super::pool::{Claims, PathHash};
use super::prefix::{PendingBranches, Prefix};
use super::shard::{ShardRange, TreeShard};
use super::state_cache::{counter_of, SharedStateTable, Visit};
use super::wakeup::{self, Branch, Event};
use super::{Coverage, Divergence, ExecutionSummary, Point, Scheduler, TreeHooks};
use crate::model::{Footprint, ObjectKind, ThreadId};

/// One scheduling point on the current path.
#[derive(Debug, Clone)]
struct Node {
    /// The choice taken here on the current path.
    chosen: ThreadId,
    /// Alternatives still to explore from here (within the current bound).
    todo: Vec<ThreadId>,
    /// Preemptions on the path before this node's choice.
    preemptions_before: u32,
    /// Whether `chosen` was a preemption here.
    chosen_preempts: bool,
    /// The enabled set seen here (checked on replay).
    enabled: Vec<ThreadId>,
    /// Partial-order reduction's view of the node (None without reduction: a node is then
    /// a few words, which matters on paths of a million steps).
    por: Option<Box<PorNode>>,
    /// The shards that share the subtree at this node (a split search).
    range: ShardRange,
    /// Bounded partial-order reduction: the alternatives held back here (see [`Held`]).
    held: Option<Box<Held>>,
}

/// The alternatives of a node of icb held back by bounded partial-order reduction: the
/// node chose the thread that ran last (it could go on, without yielding, so every other
/// choice is a preemption), and the other enabled threads are explored only once an
/// execution through this choice shows, after its step, a step or a pending operation of
/// another thread dependent with that step (see [`TreeSearch::with_por`]).
#[derive(Debug, Clone)]
struct Held {
    /// The thread chosen (the one that ran last).
    thread: ThreadId,
    /// Its step's footprint, once it ran.
    step: Option<Footprint>,
    /// The alternatives held back.
    threads: Vec<ThreadId>,
    /// The hash of the path to the node (its choices before it), so that releasing an
    /// alternative costs one step, not the path's length.
    path: PathHash,
}

/// What a node without reduction data reads as.
static NO_POR: std::sync::LazyLock<PorNode> = std::sync::LazyLock::new(PorNode::default);

impl Node {
    /// Partial-order reduction's view of the node.
    fn por(&self) -> &PorNode {
        self.por.as_deref().unwrap_or(&NO_POR)
    }

    /// The same, to change it.
    fn por_mut(&mut self) -> &mut PorNode {
        self.por.get_or_insert_with(Default::default)
    }

    /// The footprint of the step chosen here as far as it has run: its operation's, and
    /// `segment`, what the thread touched natively since.
    fn step_so_far(&self, segment: &Footprint) -> Footprint {
        let mut taken = self.por().pending_of(&self.enabled, self.chosen);
        taken.extend_plain(segment);
        taken
    }

    /// The sleep set alternative `alt` gets here when it is explored after the threads
    /// asleep here, those explored from here and this path's choice (whose step has run),
    /// as in a sequential search: for a subtree given to or asked of another worker.
    fn sleep_before(&self, alt: ThreadId) -> Vec<(ThreadId, Footprint)> {
        let por = self.por();
        por.sleep
            .iter()
            .chain(&por.done)
            .cloned()
            .chain(std::iter::once((self.chosen, por.step.clone())))
            .filter(|(u, _)| *u != alt)
            .collect()
    }
}

/// DFS (`bound: None`) or iterative preemption bounding (`bound: Some(max)`).
#[derive(Debug)]
pub struct TreeSearch {
    name: &'static str,
    /// Largest preemption bound to reach (None: unbounded DFS).
    max_bound: Option<u32>,
    /// Bound currently explored.
    bound: u32,
    /// The path of the current execution.
    stack: Vec<Node>,
    /// Nodes [0, fixed) belong to the work item's prefix and are never backtracked into.
    fixed: usize,
    /// Choices to replay at the start of the next execution.
    replay: Vec<ThreadId>,
    /// Prefixes waiting for the current bound.
    queue: VecDeque<Prefix>,
    /// Prefixes needing one more preemption than the current bound allows.
    deferred: VecDeque<Prefix>,
    /// Alternatives beyond the bound left on the current path, made into `deferred`
    /// prefixes (sharing one copy of the path) when the execution ends.
    pending: PendingBranches,
    started: bool,
    exhausted: bool,
    executions: u64,
    completed_bound: Option<u32>,
    /// Part of a parallel search: bounds and work items are managed by a [`super::TreePool`].
    managed: bool,
    /// Dynamic partial-order reduction is on (unbounded DFS only).
    por: bool,
    /// Sleep sets without race analysis: every enabled thread that does not sleep is an
    /// alternative (DFS with sleep sets, Godefroid). What partial-order reduction becomes
    /// with the state cache, whose table then keeps each state's sleep set.
    sleep_sets: bool,
    /// What the thread chosen last touched running natively (reported through `ran`).
    segment: Footprint,
    /// The node where every enabled thread was asleep in this execution, if any.
    sleep_blocked: Option<usize>,
    /// The current execution was ended by the search at a visited state (or a redundant
    /// one), not by the program.
    cut: bool,
    /// Executions that were sleep-set blocked (redundant).
    redundant: u64,
    /// The wakeup tree to follow from node `planned_at` on: the subtree of the alternative
    /// this execution explores (partial-order reduction).
    planned: Vec<Branch>,
    /// The node `planned` applies to.
    planned_at: usize,
    /// How races are reversed (optimal or source sets) and the wakeup trees' budget.
    reduction: Reduction,
    /// Alternatives the race analysis wants at nodes of the work item's prefix, as prefixes
    /// for the pool (another worker's part of the tree).
    outside: Vec<Split>,
    /// Every prefix put in `outside` so far.
    requested: HashSet<Vec<ThreadId>>,
    /// Alternatives claimed by the workers of a parallel reduced search.
    claims: Option<Claims>,
    /// An alternative needed more preemptions than the cap (`--preemption-bound`): the
    /// search leaves executions unexplored whatever the bound.
    beyond_cap: bool,
    /// The table of visited states (`--state-cache`), shared by the workers.
    cache: Option<SharedStateTable>,
    /// Executions ended at a state visited before.
    pruned: u64,
    /// This machine's part of a search split among machines.
    shard: Option<TreeShard>,
    /// The current execution stopped at a node with no child of this shard within the
    /// bound: it is not one of this shard's executions.
    left_share: bool,
    /// The work item's sleep set at its branch node (the last node of its prefix): the
    /// threads the worker that gave the item away explored, or had asleep, there
    /// ([`Split`]). Set as that node's explored alternatives, so that they sleep below it.
    branch_sleep: Vec<(ThreadId, Footprint)>,
    /// The explored alternatives of the nodes above the branch node ([`Split::above`]).
    branch_above: Vec<Vec<(ThreadId, Footprint)>>,
    /// Bounded partial-order reduction of icb (see [`TreeSearch::with_por`]).
    bounded_por: bool,
    /// The footprints of the current path's steps (bounded partial-order reduction).
    steps_seen: Steps,
    /// Bounded partial-order reduction: the held-back nodes of the current execution whose
    /// step finished, indexed for release.
    held_index: HeldIndex,
    /// Bounded partial-order reduction: hashes of the prefixes whose last choice was held
    /// back and then released, so that a node of a later work item's prefix asks for it once.
    released: HashSet<u128>,
    /// Bounded partial-order reduction: the hash of the current path's first `.0` choices.
    path_so_far: (usize, PathHash),
    /// The operations pending at the current execution's latest point (enabled and
    /// blocked threads, with their footprints, as `observe` saw them).
    pending_at_last: Vec<(ThreadId, Footprint)>,
}

/// What a work item leaves beyond its preemption bound ([`TreeSearch::take_deferred`]).
#[derive(Debug, Default)]
pub struct Deferred {
    /// Prefixes to explore at the next bound.
    pub prefixes: Vec<Prefix>,
    /// Some alternative needed more preemptions than the cap: it is never explored.
    pub beyond_cap: bool,
}

/// A subtree given away by [`TreeSearch::split`]: the prefix that leads to it, and the
/// threads that sleep at its branch node (see [`TreeSearch::with_branch_sleep`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// The choices leading to the subtree; the last is the alternative given away.
    pub prefix: Vec<ThreadId>,
    /// With partial-order reduction: the threads asleep at the branch node or explored
    /// from it by the giver (the choice of its current path included), with their steps'
    /// footprints.
    pub sleep: Vec<(ThreadId, Footprint)>,
    /// With partial-order reduction: for each node above the branch node, the threads the
    /// giver (or whoever gave it its own work item) explored from there, with their
    /// steps' footprints: they come before the prefix's choice there, so they sleep below
    /// it, and reversals they cover are not asked for again.
    pub above: Vec<Vec<(ThreadId, Footprint)>>,
}

impl TreeSearch {
    /// Exhaustive depth-first search.
    pub fn dfs() -> TreeSearch {
        TreeSearch::new("dfs", None)
    }

    /// Exhaustive depth-first search reduced by dynamic partial-order reduction.
    pub fn dpor() -> TreeSearch {
        TreeSearch::dfs().with_por(true)
    }

    /// Turns partial-order reduction on or off (not for a shard of a search split among
    /// machines). Unbounded DFS gets dynamic partial-order reduction. icb gets bounded
    /// partial-order reduction by trace keys: a new node whose prefix is equivalent (same
    /// Mazurkiewicz trace, [`super::trace_key`]) to that of a node met before, with the same
    /// thread last and no fewer preemptions, ends the execution there. Both nodes are in
    /// the same state, and the preemptions of what follows depend only on the state and
    /// the thread that ran last, so every execution within the bound below the second
    /// node has one with the same trace below the first.
    pub fn with_por(mut self, on: bool) -> TreeSearch {
        let on = on && self.shard.is_none();
        let unbounded = on && self.max_bound.is_none();
        self.por = unbounded && self.cache.is_none();
        self.sleep_sets = unbounded && self.cache.is_some();
        self.bounded_por = on && self.max_bound.is_some();
        self
    }

    /// Prunes with a table of visited states (unbounded DFS only). Partial-order reduction
    /// becomes sleep sets alone, kept with the states (see docs/architecture.md).
    pub fn with_state_cache(mut self, table: Option<SharedStateTable>) -> TreeSearch {
        if self.max_bound.is_none() && table.is_some() && self.shard.is_none() {
            self.cache = table;
            self.sleep_sets = self.por;
            self.por = false;
        }
        self
    }

    /// With `false`, partial-order reduction uses source sets from the start instead of
    /// wakeup trees (`MCHECK_DPOR=source`, for benchmarks that measure what wakeup trees
    /// save).
    pub fn with_wakeup_trees(mut self, on: bool) -> TreeSearch {
        self.reduction.optimal &= on;
        self
    }

    /// Whether nodes keep footprints and sleep sets (reduction, or sleep sets alone).
    fn keeps_sleep(&self) -> bool {
        self.por || self.sleep_sets
    }

    /// Executions ended early at a state visited before.
    pub fn pruned_executions(&self) -> u64 {
        self.pruned
    }

    /// Shares the registry of claimed alternatives of a parallel search: with reduction, an
    /// alternative another worker claimed is skipped here (it is explored there).
    pub fn with_claims(mut self, claims: Claims) -> TreeSearch {
        self.claims = Some(claims);
        self
    }

    /// Whether `alt` at node `i` is still to be explored here: always without reduction;
    /// with it, unless another worker of the search claimed it first.
    fn claim(&self, i: usize, alt: ThreadId) -> bool {
        match (&self.claims, self.por) {
            (Some(c), true) => {
                let mut prefix: Vec<ThreadId> = self.stack[..i].iter().map(|n| n.chosen).collect();
                prefix.push(alt);
                c.claim(&prefix)
            }
            _ => true,
        }
    }

    /// Whether partial-order reduction is on.
    pub fn reduces(&self) -> bool {
        self.por
    }

    /// Executions found redundant by sleep sets (run to their end without being explored
    /// further).
    pub fn redundant_executions(&self) -> u64 {
        self.redundant
    }

    /// Prefixes that partial-order reduction wants explored in the part of the tree above
    /// this work item (for the pool); each is given once.
    pub fn take_requests(&mut self) -> Vec<Split> {
        std::mem::take(&mut self.outside)
    }

    /// Iterative preemption bounding up to `max_bound` preemptions (None: no cap).
    pub fn icb(max_bound: Option<u32>) -> TreeSearch {
        TreeSearch::new("icb", Some(max_bound.unwrap_or(u32::MAX)))
    }

    fn new(name: &'static str, max_bound: Option<u32>) -> TreeSearch {
        TreeSearch {
            name,
            max_bound,
            bound: 0,
            stack: Vec::new(),
            fixed: 0,
            replay: Vec::new(),
            queue: VecDeque::new(),
            deferred: VecDeque::new(),
            pending: PendingBranches::default(),
            started: false,
            exhausted: false,
            executions: 0,
            completed_bound: None,
            managed: false,
            por: false,
            sleep_sets: false,
            segment: Footprint::default(),
            sleep_blocked: None,
            cut: false,
            redundant: 0,
            planned: Vec::new(),
            planned_at: 0,
            reduction: Reduction::default(),
            outside: Vec::new(),
            requested: HashSet::new(),
            claims: None,
            beyond_cap: false,
            cache: None,
            pruned: 0,
            shard: None,
            left_share: false,
            branch_sleep: Vec::new(),
            branch_above: Vec::new(),
            bounded_por: false,
            steps_seen: Steps::default(),
            held_index: HeldIndex::default(),
            released: HashSet::new(),
            path_so_far: (0, PathHash::default()),
            pending_at_last: Vec::new(),
        }
    }

    /// The sleep set a work item brings for its branch node (a [`Split`]'s `sleep`): the
    /// giver explores (or has explored, or had asleep) those threads at that node, so in
    /// this subtree they sleep as long as the steps taken are independent of theirs, as if
    /// one worker had explored them first. Reduced searches only; ignored otherwise.
    pub fn with_branch_sleep(mut self, sleep: Vec<(ThreadId, Footprint)>) -> TreeSearch {
        self.branch_sleep = sleep;
        self
    }

    /// The explored alternatives a work item brings for the nodes above its branch node (a
    /// [`Split`]'s `above`), set as those nodes' explored alternatives. Reduced searches
    /// only; ignored otherwise.
    pub fn with_branch_above(mut self, above: Vec<Vec<(ThreadId, Footprint)>>) -> TreeSearch {
        self.branch_above = above;
        self
    }

    /// What the nodes above node `i` of the current path had explored ([`Split::above`]).
    fn explored_above(&self, i: usize) -> Vec<Vec<(ThreadId, Footprint)>> {
        if !self.keeps_sleep() {
            return Vec::new();
        }
        self.stack[..i]
            .iter()
            .map(|n| n.por().done.clone())
            .collect()
    }

    /// Makes the search shard `shard` of a search split among machines (unreduced searches
    /// only: it turns partial-order reduction and the state cache off).
    pub fn with_shard(mut self, shard: Option<TreeShard>) -> TreeSearch {
        if shard.is_some() {
            self.por = false;
            self.sleep_sets = false;
            self.cache = None;
        }
        self.shard = shard;
        self
    }

    /// The shards that share the subtree at decision `k` of the current path.
    fn range_at(&self, k: usize) -> ShardRange {
        let Some(shard) = self.shard else {
            return ShardRange { lo: 0, hi: 1 };
        };
        match k.checked_sub(1).and_then(|p| self.stack.get(p)) {
            Some(parent) => parent.range.after(&parent.enabled, parent.chosen),
            None => shard.root(),
        }
    }

    /// Whether the execution that just ended belongs to another shard: it met too few
    /// choices to be split, and the first shard of its range counts it.
    fn ends_in_other_share(&self) -> bool {
        self.shard
            .is_some_and(|s| self.range_at(self.stack.len()).lo != s.index)
    }

    /// The subtree below `prefix`, explored at preemption bound `bound` (icb, when
    /// `max_bound` is Some) as one work item of a parallel search: alternatives beyond the
    /// bound are kept for [`TreeSearch::take_deferred`], and the search ends with the subtree.
    pub fn subtree(max_bound: Option<u32>, bound: u32, prefix: Vec<ThreadId>) -> TreeSearch {
        let name = if max_bound.is_some() { "icb" } else { "dfs" };
        let mut t = TreeSearch::new(name, max_bound);
        t.bound = bound;
        t.managed = true;
        t.started = true;
        // A subtree given away is explored without the sequences the giver's other
        // alternatives found for it: only source sets keep every trace there.
        t.reduction.optimal = prefix.is_empty();
        t.queue.push_back(Prefix::from_vec(&prefix));
        t
    }

    /// Gives away the shallowest unexplored alternative of the current path, as the prefix
    /// that leads to it, so that another worker explores that subtree. Call between
    /// executions (every step of the current path has run).
    ///
    /// With partial-order reduction the split carries the branch node's sleep set for the
    /// new subtree: the threads asleep there, those explored from there, and the choice of
    /// the current path, which this worker goes on exploring: an order in which the given
    /// alternative comes after them, as in a sequential search. This worker does not put the
    /// given alternative to sleep in its own later alternatives there (its step's footprint
    /// is not known here), which only costs reduction.
    pub fn split(&mut self) -> Option<Split> {
        loop {
            let i = (self.fixed..self.stack.len()).find(|&i| !self.stack[i].todo.is_empty())?;
            let alt = self.stack[i].todo.remove(0);
            // The receiver explores the subtree by source sets, without this wakeup tree.
            self.take_branch(i, alt);
            if !self.claim(i, alt) {
                continue;
            }
            let mut prefix: Vec<ThreadId> = self.stack[..i].iter().map(|n| n.chosen).collect();
            if let (Some(c), true) = (&self.claims, self.por) {
                // The path explored here is ours: nobody should be asked to explore it.
                let path: Vec<ThreadId> = self.stack.iter().map(|n| n.chosen).collect();
                c.claim_path(&path);
            }
            prefix.push(alt);
            let sleep = if self.keeps_sleep() && i + 1 < self.stack.len() {
                self.stack[i].sleep_before(alt)
            } else {
                Vec::new()
            };
            // The receiver's sequences for our later alternatives reach the pool, not our
            // wakeup trees: source sets from now on (see `Reduction::optimal`).
            self.reduction.optimal = false;
            // The given alternative does not sleep in our later ones there: it is not
            // explored yet, and with `Split::above` passing our explored alternatives on, a
            // receiver would take it for explored and skip reversals only its subtree makes
            // (traces lost on random programs of 6–7 operation groups).
            let above = self.explored_above(i);
            return Some(Split {
                prefix,
                sleep,
                above,
            });
        }
    }

    /// Prefixes that need one more preemption than this subtree's bound, and whether some
    /// alternative needed more preemptions than the cap.
    pub fn take_deferred(&mut self) -> Deferred {
        self.flush_pending();
        Deferred {
            prefixes: self.deferred.drain(..).collect(),
            beyond_cap: std::mem::take(&mut self.beyond_cap),
        }
    }

    /// Makes the alternatives left beyond the bound on the current path into deferred
    /// prefixes (before the path changes).
    fn flush_pending(&mut self) {
        if !self.pending.is_empty() {
            let more = self.pending.take(self.stack.iter().map(|n| n.chosen));
            self.deferred.extend(more);
        }
    }

    /// Schedule prefixes held for later (queued and deferred), and nodes on the current path.
    pub fn held(&self) -> (usize, usize) {
        (self.queue.len() + self.deferred.len(), self.stack.len())
    }

    /// Whether every schedule (within the maximum bound) has been explored.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    /// Preemption bound being explored now.
    pub fn current_bound(&self) -> u32 {
        self.bound
    }

    fn within_bound(&self, preemptions: u32) -> bool {
        match self.max_bound {
            None => true,
            Some(_) => preemptions <= self.bound,
        }
    }

    /// Moves to the next execution's path; false when nothing is left.
    fn advance(&mut self) -> bool {
        self.flush_pending();
        // Backtrack within the current work item.
        while self.stack.len() > self.fixed {
            let last = self.stack.len() - 1;
            while !self.stack[last].todo.is_empty() {
                let alt = self.stack[last].todo.remove(0);
                let branch = self.take_branch(last, alt);
                if !self.claim(last, alt) {
                    // Another worker explores it, without this tree's sequences.
                    self.reduction.optimal = false;
                    continue;
                }
                // The subtree left is explored: nobody should be asked to explore it again.
                self.claim(last, self.stack[last].chosen);
                // Keep the node (with its remaining alternatives); the path below it is new.
                let keeps_sleep = self.keeps_sleep();
                let node = &mut self.stack[last];
                if keeps_sleep {
                    let chosen = node.chosen;
                    let por = node.por_mut();
                    let step = std::mem::take(&mut por.step);
                    por.done.push((chosen, step));
                    por.created.clear();
                }
                node.chosen = alt;
                self.replay = self.stack.iter().map(|n| n.chosen).collect();
                self.planned = branch.map(|b| b.children).unwrap_or_default();
                self.planned_at = last + 1;
                return true;
            }
            self.stack.pop();
        }
        // Next work item at this bound, or the next bound.
        loop {
            if let Some(prefix) = self.queue.pop_front() {
                self.stack.clear();
                self.planned.clear();
                self.fixed = prefix.len();
                self.replay = prefix.to_vec();
                return true;
            }
            if self.managed {
                return false;
            }
            if self.deferred.is_empty() {
                self.completed_bound = self.max_bound.map(|_| self.bound);
                return false;
            }
            self.completed_bound = Some(self.bound);
            if self.max_bound.is_some_and(|m| self.bound >= m) {
                return false;
            }
            self.bound += 1;
            self.queue = std::mem::take(&mut self.deferred);
        }
    }
}

impl TreeSearch {
    /// The tree search's choice at `point` (see [`Scheduler::choose`]).
    fn choose_inner(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let k = point.step;
        if self.bounded_por {
            self.observe(point);
        }
        if self.keeps_sleep() && k > 0 && k <= self.stack.len() {
            self.finish_step(k - 1, Some(point));
        }
        let preemptions_before = self
            .stack
            .last()
            .map_or(0, |n| n.preemptions_before + n.chosen_preempts as u32);
        if k < self.replay.len() {
            let chosen = self.replay[k];
            if !point.enabled.contains(&chosen) {
                return Err(Divergence {
                    step: k,
                    reason: format!(
                        "thread T{chosen} is not enabled on replay (enabled: {:?}): the program is not deterministic under mcheck",
                        point.enabled
                    ),
                });
            }
            if k < self.stack.len() {
                // A node kept from the previous execution: its choice is the replayed one.
                self.stack[k].chosen_preempts = point.is_preemption(chosen);
                if self.stack[k].enabled != point.enabled {
                    return Err(Divergence {
                        step: k,
                        reason: format!(
                            "enabled threads {:?} differ from {:?} seen before",
                            point.enabled, self.stack[k].enabled
                        ),
                    });
                }
                if self.keeps_sleep() {
                    let fresh = self.por_node(point);
                    let node = self.stack[k].por_mut();
                    node.pending = fresh.pending;
                    node.blocked = fresh.blocked;
                }
            } else {
                // A node of the work item's prefix: its alternatives belong to others.
                let mut por = self.keeps_sleep().then(|| Box::new(self.por_node(point)));
                if let Some(node) = por.as_mut() {
                    if k + 1 == self.fixed {
                        // The branch node: what the giver explores there sleeps below it.
                        node.done = self.branch_sleep.clone();
                    } else if let Some(done) = self.branch_above.get(k) {
                        node.done = done.clone();
                    }
                }
                let range = self.range_at(k);
                // Its alternatives were explored, or held back, when it was new; held
                // back, they are asked for as prefixes when an execution below shows
                // they are needed (`release`).
                let held = self.holds(point, chosen).then(|| {
                    Box::new(Held {
                        thread: chosen,
                        step: None,
                        threads: (point.enabled.iter().copied())
                            .filter(|&u| u != chosen)
                            .collect(),
                        path: self.path_to(k),
                    })
                });
                self.stack.push(Node {
                    chosen,
                    todo: Vec::new(),
                    preemptions_before,
                    chosen_preempts: point.is_preemption(chosen),
                    enabled: point.enabled.to_vec(),
                    por,
                    range,
                    held,
                });
            }
            return Ok(chosen);
        }
        if self.por {
            return Ok(self.choose_reduced(point, preemptions_before));
        }
        let range = self.range_at(k);
        // A split search follows only the children of its own range.
        let mine = |u: ThreadId| {
            self.shard
                .is_none_or(|s| range.after(point.enabled, u).contains(s.index))
        };
        // With sleep sets, a thread asleep here is not explored from here.
        let por = self.sleep_sets.then(|| self.por_node(point));
        let blocked = self.sleep_blocked.is_some();
        let awake = |u: ThreadId| por.as_ref().is_none_or(|n| !n.asleep(u));
        let default = point.default_choice();
        let mut chosen = (mine(default) && awake(default)).then_some(default);
        let mut todo = Vec::new();
        // Bounded partial-order reduction: the other threads may be held back.
        let mut held = (chosen.is_some() && self.holds(point, default)).then(|| {
            Box::new(Held {
                thread: default,
                step: None,
                threads: Vec::new(),
                path: self.path_to(k),
            })
        });
        for &u in point.enabled {
            if Some(u) == chosen || !mine(u) || !awake(u) {
                continue;
            }
            if let Some(h) = held.as_mut() {
                h.threads.push(u);
                continue;
            }
            let cost = preemptions_before + point.is_preemption(u) as u32;
            if self.within_bound(cost) {
                if chosen.is_none() {
                    chosen = Some(u);
                } else {
                    todo.push(u);
                }
            } else if self.max_bound.is_some_and(|m| cost <= m) {
                self.pending.push(self.stack.len(), u);
            } else {
                self.beyond_cap = true;
            }
        }
        if self.sleep_sets && (blocked || chosen.is_none()) {
            // Every enabled thread sleeps (or did at an earlier node): whatever follows
            // was explored already.
            self.sleep_blocked.get_or_insert(k);
            todo.clear();
            chosen = Some(chosen.unwrap_or(default));
        }
        // No child of this shard within the bound: the execution ends here, as none of
        // this shard's (its children beyond the bound are deferred above).
        self.left_share = chosen.is_none();
        let chosen = chosen.unwrap_or(default);
        self.stack.push(Node {
            chosen,
            todo,
            preemptions_before,
            chosen_preempts: point.is_preemption(chosen),
            enabled: point.enabled.to_vec(),
            por: por.map(Box::new),
            range,
            held: held.filter(|h| !h.threads.is_empty()),
        });
        Ok(chosen)
    }
}

impl Scheduler for TreeSearch {
    fn name(&self) -> &'static str {
        self.name
    }

    fn begin_execution(&mut self, _index: u64) -> Option<u64> {
        self.sleep_blocked = None;
        self.cut = false;
        self.left_share = false;
        self.segment = Footprint::default();
        self.held_index.clear();
        self.path_so_far = (0, PathHash::default());
        if self.exhausted {
            return None;
        }
        if !self.started {
            self.started = true;
            self.replay.clear();
            return Some(0);
        }
        if !self.advance() {
            self.exhausted = true;
            return None;
        }
        Some(0)
    }

    fn choose(&mut self, point: &Point<'_>) -> Result<ThreadId, Divergence> {
        let chosen = self.choose_inner(point)?;
        if self.bounded_por {
            let footprint = match point.enabled.iter().position(|&t| t == chosen) {
                Some(i) if point.footprints.len() == point.enabled.len() => {
                    point.footprints[i].clone()
                }
                _ => Footprint::everything(),
            };
            self.steps_seen.chose(chosen, footprint);
            let k = point.step;
            let mut path = self.path_to(k);
            path.push(chosen);
            self.path_so_far = (k + 1, path);
        }
        Ok(chosen)
    }

    fn end_execution(&mut self, summary: &ExecutionSummary) {
        if !self.left_share && !self.ends_in_other_share() {
            self.executions += 1;
        }
        if self.bounded_por && !self.stack.is_empty() {
            // The last step: with threads left (or a failure), what its thread was to do
            // next is not known, and is taken as dependent with everything.
            // The other threads' operations pending at its point never ran: the process
            // ended under them, so each of them depends on that last step, and releases
            // what was held back there (a preemption before `exit` is how a thread left
            // running gets to fail).
            let last = self.stack.len() - 1;
            let chosen = self.stack[last].chosen;
            let others: Vec<(ThreadId, Footprint)> = (self.pending_at_last.iter())
                .filter(|(u, _)| *u != chosen)
                .cloned()
                .collect();
            let unknown = !others.is_empty() || summary.found_bug;
            if self.steps_seen.finish(unknown).is_some() {
                self.release_dependent(last, &others);
            }
        }
        self.flush_pending();
        if self.por && !self.stack.is_empty() {
            self.finish_step(self.stack.len() - 1, None);
            self.analyse();
        }
        if self.sleep_sets && !self.cut && !self.stack.is_empty() {
            // The process ended after the last step: see `finish_step`.
            self.finish_step(self.stack.len() - 1, None);
        }
        if self.sleep_blocked.is_some() {
            self.redundant += 1;
        }
    }

    fn coverage(&self) -> Coverage {
        Coverage {
            exhausted: self.exhausted,
            preemption_bound_completed: if self.exhausted {
                self.completed_bound
            } else {
                self.completed_bound.filter(|&b| b < self.bound)
            },
            systematic_executions: self.executions,
            synchronisation_exhausted: self.exhausted,
            beyond_preemption_bound: self.beyond_cap,
            ..Coverage::default()
        }
    }

    fn tree(&mut self) -> Option<&mut dyn TreeHooks> {
        Some(self)
    }
}

impl TreeHooks for TreeSearch {
    fn planned_prefix(&self) -> &[ThreadId] {
        &self.replay
    }

    fn may_backtrack_to(&self, step: usize) -> bool {
        // Nodes of the work item's prefix belong to others; a node kept from earlier
        // executions is only returned to while it has alternatives left; a new node may get
        // some.
        step >= self.fixed
            && (self.stack.get(step)).is_none_or(|n| !n.todo.is_empty() || n.held.is_some())
    }

    fn wants_state(&self, step: usize) -> bool {
        self.cache.is_some() && step >= self.replay.len() && step == self.stack.len()
    }

    fn visit_state(&mut self, step: usize, hash: u64) -> bool {
        let Some(table) = &self.cache else {
            return false;
        };
        if self.sleep_blocked.is_some() {
            // A redundant execution: end it here, and record nothing (nothing below this
            // point is explored from it).
            self.finish_cut_step(step);
            return true;
        }
        let counter = counter_of(self.stack[..step].iter().map(|n| n.chosen));
        let sleep = self.upcoming_sleep(step);
        let seen = table
            .lock()
            .expect("state table")
            .visit(&counter, hash, &sleep);
        if seen == Visit::Same {
            self.pruned += 1;
            self.finish_cut_step(step);
            return true;
        }
        false
    }

    fn leaves_share(&self) -> bool {
        self.left_share
    }

    fn ended_outside_share(&self) -> bool {
        self.left_share || self.ends_in_other_share()
    }

    fn ran(&mut self, touched: &Footprint) {
        if self.keeps_sleep() {
            self.segment.extend(touched);
        }
        if self.bounded_por {
            self.steps_seen.ran(touched);
        }
    }
}

#[cfg(test)]
mod tests;
