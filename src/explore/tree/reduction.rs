//! Partial-order reduction's part of the tree search: optimal DPOR with wakeup trees (or
//! source sets), sleep sets, the race analysis of each finished execution and what it adds
//! at each node.

use super::*;

/// Partial-order reduction's part of the tree search.
impl TreeSearch {
    /// The reduction's view of a new node at `point`: footprints, and the sleep set
    /// inherited from the node above.
    pub(super) fn por_node(&self, point: &Point<'_>) -> PorNode {
        let pending = if point.footprints.len() == point.enabled.len() {
            point.footprints.to_vec()
        } else {
            vec![Footprint::everything(); point.enabled.len()]
        };
        let sleep = match self.stack.get(point.step.wrapping_sub(1)) {
            Some(parent) if self.sleep_blocked.is_none() => parent.por().child_sleep(parent.chosen),
            _ => Vec::new(),
        };
        PorNode {
            pending,
            blocked: point.blocked.to_vec(),
            sleep,
            ..PorNode::default()
        }
    }

    /// A node beyond the replayed prefix: the first branch of the wakeup tree planned for
    /// it whose thread can run and does not sleep (the others become its alternatives);
    /// without one, its default choice unless that thread sleeps, else another thread that
    /// does not. Further alternatives come from the race analysis.
    pub(super) fn choose_reduced(
        &mut self,
        point: &Point<'_>,
        preemptions_before: u32,
    ) -> ThreadId {
        let mut node = self.por_node(point);
        let planned = if self.planned_at == point.step {
            std::mem::take(&mut self.planned)
        } else {
            Vec::new()
        };
        self.planned.clear();
        // A planned step that cannot run here (a dependency the footprints did not show)
        // is dropped; the race analysis of this execution reverses what it had to.
        let planned_len = planned.len();
        let mut usable = planned
            .into_iter()
            .filter(|b| point.enabled.contains(&b.event.thread) && !node.asleep(b.event.thread))
            .peekable();
        if planned_len > 0 && (usable.peek().is_none() || self.sleep_blocked.is_some()) {
            self.reduction.optimal = false;
        }
        let followed = if self.sleep_blocked.is_none() {
            usable.next()
        } else {
            None
        };
        node.wakeup = usable.collect();
        let default = point.default_choice();
        let chosen = if let Some(b) = followed {
            self.planned = b.children;
            self.planned_at = point.step + 1;
            b.event.thread
        } else if self.sleep_blocked.is_some() || !node.asleep(default) {
            default
        } else if let Some(&t) = point.enabled.iter().find(|&&t| !node.asleep(t)) {
            t
        } else {
            // Every enabled thread sleeps: whatever follows was explored already.
            self.sleep_blocked = Some(point.step);
            default
        };
        self.stack.push(Node {
            chosen,
            todo: node.wakeup.iter().map(|b| b.event.thread).collect(),
            preemptions_before,
            chosen_preempts: point.is_preemption(chosen),
            enabled: point.enabled.to_vec(),
            por: Some(Box::new(node)),
            range: self.range_at(point.step),
            held: None,
        });
        chosen
    }

    /// The threads that will sleep at node `step`, the next one (with sleep sets: those
    /// asleep or explored at the node before whose steps are independent of the step taken
    /// there, which has run up to this point).
    pub(super) fn upcoming_sleep(&self, step: usize) -> Vec<ThreadId> {
        let Some(parent) = step.checked_sub(1).and_then(|p| self.stack.get(p)) else {
            return Vec::new();
        };
        if !self.sleep_sets {
            return Vec::new();
        }
        let taken = parent.step_so_far(&self.segment);
        let mut sleep: Vec<ThreadId> = (parent.por())
            .sleep_after(parent.chosen, &taken)
            .map(|(u, _)| *u)
            .collect();
        sleep.sort_unstable();
        sleep.dedup();
        sleep
    }

    /// The execution ends at point `step`, before the process does: with sleep sets, the
    /// step before it gets its footprint as far as it ran (no later point shows whether it
    /// created or ended a thread, which matters only to threads that cannot be enabled
    /// before it ran), so that it sleeps below the node's other alternatives.
    pub(super) fn finish_cut_step(&mut self, step: usize) {
        self.cut = true;
        if !self.sleep_sets {
            return;
        }
        let segment = std::mem::take(&mut self.segment);
        if let Some(node) = step.checked_sub(1).and_then(|p| self.stack.get_mut(p)) {
            let taken = node.step_so_far(&segment);
            node.por_mut().step = taken;
        }
    }

    /// Removes alternative `alt`'s branch from node `i`'s wakeup tree (its to-do entry is
    /// removed by the caller) and returns it.
    pub(super) fn take_branch(&mut self, i: usize, alt: ThreadId) -> Option<Branch> {
        let por = self.stack[i].por.as_deref_mut()?;
        let at = por.wakeup.iter().position(|b| b.event.thread == alt)?;
        Some(por.wakeup.remove(at))
    }

    /// The step chosen at node `i` has run: its footprint is its operation's, what it
    /// touched natively, and its thread when it exited; `next` is the point after it (None
    /// when the execution ended there, which is global when other threads were left).
    pub(super) fn finish_step(&mut self, i: usize, next: Option<&Point<'_>>) {
        let node = &mut self.stack[i];
        let mut step = node.step_so_far(&std::mem::take(&mut self.segment));
        match next {
            Some(p) => {
                let present =
                    |t: ThreadId| p.enabled.contains(&t) || p.blocked.iter().any(|(u, _)| *u == t);
                if !present(node.chosen) {
                    step.touch_exit(node.chosen);
                }
                let known = |t: ThreadId| {
                    node.enabled.contains(&t) || node.por().blocked.iter().any(|(u, _)| *u == t)
                };
                let created = p
                    .enabled
                    .iter()
                    .copied()
                    .chain(p.blocked.iter().map(|(u, _)| *u))
                    .filter(|&t| !known(t))
                    .collect();
                node.por_mut().created = created;
            }
            None => {
                let others = node.enabled.iter().any(|&t| t != node.chosen)
                    || !node.por().blocked.is_empty();
                if others {
                    step.global = true;
                }
                node.por_mut().created.clear();
            }
        }
        node.por_mut().step = step;
    }

    /// Finds the races of the execution just ended and schedules their reversals.
    pub(super) fn analyse(&mut self) {
        // A sleep-set blocked execution is analysed up to the node where it blocked, with
        // the pending operations there (the blocked threads' too) coming last.
        let (limit, last) = match self.sleep_blocked {
            Some(k) => (k, k),
            None => (self.stack.len(), self.stack.len() - 1),
        };
        let at_end = &self.stack[last];
        let ran_last = self.sleep_blocked.is_none().then_some(at_end.chosen);
        // The process ended under threads still running (exit, crash, deadlock): a thread
        // may be killed before its step, see `wakeup::weak_initial`.
        let ended_under_others = self.sleep_blocked.is_none()
            && (at_end.enabled.iter().any(|&t| t != at_end.chosen)
                || !at_end.por().blocked.is_empty());
        let pending: Vec<(ThreadId, Footprint)> = at_end
            .enabled
            .iter()
            .zip(&at_end.por().pending)
            .filter(|(&t, _)| Some(t) != ran_last)
            .map(|(&t, f)| (t, f.clone()))
            .chain(at_end.por().blocked.iter().cloned())
            .collect();
        // The wakeup trees change while the steps (borrowed from the path) are read.
        let mut trees: Vec<(Vec<ThreadId>, Vec<Branch>)> = Vec::with_capacity(limit);
        for n in &mut self.stack[..limit] {
            let todo = std::mem::take(&mut n.todo);
            trees.push((todo, std::mem::take(&mut n.por_mut().wakeup)));
        }
        let steps: Vec<Step<'_>> = self.stack[..limit]
            .iter()
            .map(|n| Step {
                thread: n.chosen,
                enabled: &n.enabled,
                footprint: &n.por().step,
                created: &n.por().created,
            })
            .collect();
        let mut above = Vec::new();
        dpor::reversals(&steps, &pending, |r| {
            let i = r.race.node;
            let (todo, tree) = &mut trees[i];
            if i >= self.fixed {
                reverse_at(
                    &self.stack[i],
                    (todo, tree),
                    &r,
                    (&steps, &pending),
                    !ended_under_others,
                    &mut self.reduction,
                );
            } else {
                let add = additions_at(&self.stack[i], todo, &r.race.initials);
                above.extend(add.into_iter().map(|q| (i, q)));
            }
        });
        drop(steps);
        for (n, (todo, tree)) in self.stack.iter_mut().zip(trees) {
            n.todo = todo;
            n.por_mut().wakeup = tree;
        }
        for (i, q) in above {
            self.request_above(i, q);
        }
    }

    /// Asks the pool to explore `q` at node `i`, which belongs to the work item's prefix.
    pub(super) fn request_above(&mut self, i: usize, q: ThreadId) {
        let mut prefix: Vec<ThreadId> = self.stack[..i].iter().map(|n| n.chosen).collect();
        prefix.push(q);
        if self.requested.insert(prefix.clone()) {
            // As a sequential search would explore q at node i: after the threads
            // asleep or explored there and after the choice of this path, whose
            // subtree is explored (it holds this work item).
            let sleep = self.stack[i].sleep_before(q);
            let above = self.explored_above(i);
            self.outside.push(Split {
                prefix,
                sleep,
                above,
            });
        }
    }
}

/// The longest reversing sequence put in a wakeup tree; a longer one is cut there.
pub(super) const MAX_FOLLOWED: usize = 1_000;

/// The most the wakeup trees of one search hold in all, in steps plus the objects they touch
/// (then sequences are cut to their first step): some tens of MB at most, whatever the
/// length of the executions.
pub(super) const WAKEUP_BUDGET: usize = 1_000_000;

/// How the reduced search reverses races, and what it may still put in wakeup trees.
#[derive(Debug)]
pub(super) struct Reduction {
    /// Whether a reversing sequence is skipped when a thread asleep or explored at its node
    /// is a *weak* initial of it (optimal DPOR: exactly one execution per trace). That rule
    /// relies on every sequence being followed in full, and on the later alternatives of a
    /// node getting the sequences found while exploring the earlier ones; it goes off for
    /// the rest of the search as soon as a sequence is cut or a planned step cannot run,
    /// and is never on for a search split among workers. Off, a sequence is skipped only
    /// when one of its initials is scheduled or asleep there (source sets, which keep every
    /// trace whatever is followed, at the cost of some redundant executions).
    pub(super) optimal: bool,
    /// What the wakeup trees may still take ([`WAKEUP_BUDGET`], [`wakeup::size_of`]).
    pub(super) budget: usize,
}

impl Default for Reduction {
    fn default() -> Self {
        Reduction {
            optimal: true,
            budget: WAKEUP_BUDGET,
        }
    }
}

impl Reduction {
    /// How many steps of a sequence of `len` may be added (each weighs at least one);
    /// cutting it ends optimality.
    pub(super) fn allow(&mut self, len: usize) -> usize {
        let n = len.min(MAX_FOLLOWED).min(self.budget);
        if n < len {
            self.optimal = false;
        }
        n
    }
}

/// The source-set rule at `node` for a race whose reversal starts with one of `initials`:
/// the threads to add to its alternatives (`todo`), see [`dpor::additions`].
pub(super) fn additions_at(node: &Node, todo: &[ThreadId], initials: &[ThreadId]) -> Vec<ThreadId> {
    let mut scheduled = vec![node.chosen];
    scheduled.extend(todo);
    scheduled.extend(node.por().done.iter().map(|(t, _)| *t));
    dpor::additions(initials, &node.enabled, &scheduled, node.por())
}

/// Adds what reverses race `r` at `node` of the work item to its alternatives (`todo`) and
/// wakeup tree (`tree`). Nothing when the exploration of a thread asleep, explored or
/// chosen there covers the reversing sequence (see [`Reduction::optimal`] for which).
/// Else the sequence, starting with an initial that can run there: inserted in the tree
/// ([`wakeup::insert`]) by the optimal rule, or as a new alternative by source sets. When
/// no initial can run there (a dependency the footprints do not show), every enabled thread
/// not yet scheduled. `absent_counts`: whether a thread with no step in the sequence may
/// cover it ([`wakeup::weak_initial`]).
pub(super) fn reverse_at(
    node: &Node,
    (todo, tree): (&mut Vec<ThreadId>, &mut Vec<Branch>),
    r: &Reversal,
    (steps, pending): (&[Step<'_>], &[(ThreadId, Footprint)]),
    absent_counts: bool,
    reduction: &mut Reduction,
) {
    let mut v: Vec<Step<'_>> = r
        .sequence
        .iter()
        .map(|&j| match steps.get(j) {
            Some(s) => *s,
            None => {
                let (thread, footprint) = &pending[j - steps.len()];
                Step {
                    thread: *thread,
                    enabled: &[],
                    footprint,
                    created: &[],
                }
            }
        })
        .collect();
    let por = node.por();
    let covered = if reduction.optimal {
        let chosen = Step {
            thread: node.chosen,
            enabled: &[],
            footprint: &por.step,
            created: &por.created,
        };
        std::iter::once(chosen)
            .chain(
                por.sleep
                    .iter()
                    .chain(&por.done)
                    .map(|(thread, footprint)| Step {
                        thread: *thread,
                        enabled: &[],
                        footprint,
                        created: &[],
                    }),
            )
            .any(|s| wakeup::weak_initial(&s, &v, absent_counts).is_some())
    } else {
        additions_at(node, todo, &r.race.initials).is_empty()
    };
    if covered {
        return;
    }
    let runnable = wakeup::initials(&v)
        .into_iter()
        .find(|&j| node.enabled.contains(&v[j].thread));
    let Some(j) = runnable else {
        reduction.optimal = false;
        for q in additions_at(node, todo, &r.race.initials) {
            todo.push(q);
            tree.push(Branch::leaf(Event::unknown(q)));
        }
        return;
    };
    let first = v.remove(j);
    v.insert(0, first);
    let max_new = reduction.allow(v.len());
    if reduction.optimal {
        let (how, added) = wakeup::insert(tree, &v, max_new, absent_counts);
        reduction.budget = reduction.budget.saturating_sub(added);
        if let wakeup::Inserted::Root(q) = how {
            todo.push(q);
        }
    } else {
        reduction.budget = reduction
            .budget
            .saturating_sub(wakeup::append(tree, &v, max_new));
        todo.push(v[0].thread);
    }
}
