//! Bounded partial-order reduction of icb: held-back preemptions (see
//! [`TreeSearch::with_por`] and docs/architecture.md): which nodes hold their alternatives
//! back, and which steps and pending operations release them.

use super::*;

/// Bounded partial-order reduction of icb (see [`TreeSearch::with_por`]).
impl TreeSearch {
    /// Whether a node at `point` choosing `chosen` holds its alternatives back: it chose
    /// the thread that ran last, which could go on without yielding, no timeout is on
    /// offer and no thread waits with a deadline (what a timeout costs depends on which
    /// threads can run). Decided from the point alone, so that a node replayed in another
    /// work item decides the same.
    pub(super) fn holds(&self, point: &Point<'_>, chosen: ThreadId) -> bool {
        self.bounded_por
            && point.current == Some(chosen)
            && !point.current_yields
            && point.timeouts.is_empty()
            && !(point.footprints.iter()).any(timed)
            && !(point.blocked.iter()).any(|(_, f)| timed(f))
    }

    /// The hash of the current path's first `k` choices: kept as the execution goes, made
    /// anew when it began at a later step (from a snapshot).
    pub(super) fn path_to(&self, k: usize) -> PathHash {
        match &self.path_so_far {
            (depth, h) if *depth == k => h.clone(),
            _ => {
                let mut h = PathHash::default();
                for n in &self.stack[..k] {
                    h.push(n.chosen);
                }
                h
            }
        }
    }

    /// Point `point` of the current execution: finishes the step before it, and releases
    /// the alternatives held back at the nodes above whose step a step since, or a pending
    /// operation here, of another thread depends on.
    pub(super) fn observe(&mut self, point: &Point<'_>) {
        let k = point.step;
        let present = (point.enabled.iter().copied())
            .chain(point.blocked.iter().map(|(u, _)| *u))
            .collect();
        self.steps_seen.at_point(k, present);
        let pending: Vec<(ThreadId, Footprint)> = match point.footprints.len() {
            n if n == point.enabled.len() => (point.enabled.iter().copied())
                .zip(point.footprints.iter().cloned())
                .collect(),
            _ => (point.enabled.iter())
                .map(|&u| (u, Footprint::everything()))
                .collect(),
        };
        // A wait with a deadline, or a timeout on offer, releases every node above (see
        // `holds`): its pending operation is taken as dependent with everything.
        let pending: Vec<(ThreadId, Footprint)> = (pending.into_iter())
            .chain(point.blocked.iter().cloned())
            .map(|(u, f)| {
                if timed(&f) || point.timeouts.contains(&u) {
                    (u, Footprint::everything())
                } else {
                    (u, f)
                }
            })
            .collect();
        if let Some(last) = k.checked_sub(1) {
            self.release_dependent(last, &pending);
        }
        self.pending_at_last = pending;
    }

    /// Step `last` has finished (at the end of an execution, `pending` holds the other
    /// threads' operations that the end left unrun): its node gets its footprint, and the nodes above whose step it, or one of
    /// `pending` (other threads' operations now), depends on release their alternatives:
    /// those of a thread whose steps since do not come after node i's step (its clock shows
    /// which), as only such a step or operation could have come before it.
    pub(super) fn release_dependent(&mut self, last: usize, pending: &[(ThreadId, Footprint)]) {
        let TreeSearch {
            stack,
            steps_seen: steps,
            held_index: index,
            ..
        } = self;
        let Some((thread, footprint)) = steps.step(last) else {
            return;
        };
        if let Some(h) = stack.get_mut(last).and_then(|n| n.held.as_mut()) {
            h.step.get_or_insert_with(|| footprint.clone());
        }
        if index.upto != last {
            // Not the next step (the execution began from a snapshot, or at an earlier
            // point than the last): index anew the nodes held back before it.
            index.clear();
            for i in 0..last.min(stack.len()) {
                offer_held(index, stack, steps, i);
            }
        }
        offer_held(index, stack, steps, last);
        index.upto = last + 1;
        let mut released = Vec::new();
        let seen = steps.seen_by(*thread, Some(last));
        index.release(*thread, footprint, seen, &mut released);
        for (u, f) in pending {
            index.release(*u, f, steps.seen_by(*u, None), &mut released);
        }
        released.sort_unstable();
        released.dedup();
        for i in released {
            self.release(i);
        }
    }

    /// Releases the alternatives held back at node `i`: as its alternatives within the
    /// bound (or beyond it, for the next bound) when it can be backtracked to, else as
    /// prefixes for this bound or the next one (once each).
    pub(super) fn release(&mut self, i: usize) {
        let Some(h) = self.stack[i].held.take() else {
            return;
        };
        let cost = self.stack[i].preemptions_before + 1;
        for u in h.threads {
            let path = h.path.with(u);
            // Once each (whoever explores it, in a parallel search).
            let fresh = match &self.claims {
                Some(c) => c.claim_hashed(&path),
                None => self.released.insert(path.wide_key()),
            };
            let beyond = !self.within_bound(cost);
            if self.max_bound.is_some_and(|m| cost > m) {
                self.beyond_cap = true;
            } else if i >= self.fixed {
                if !fresh {
                    // Another worker explores it.
                } else if beyond {
                    self.pending.push(i, u);
                } else {
                    self.stack[i].todo.push(u);
                }
            } else if fresh {
                // A node of the work item's prefix: asked for as a prefix (once per
                // work item and alternative, so the path's cost is paid rarely).
                let mut choices: Vec<ThreadId> = self.stack[..i].iter().map(|n| n.chosen).collect();
                choices.push(u);
                let prefix = Prefix::from_vec(&choices);
                if beyond {
                    self.deferred.push_back(prefix);
                } else {
                    self.queue.push_back(prefix);
                }
            }
        }
    }
}

/// Adds node `i` of `stack` to `index` when it holds alternatives back and its step (still
/// the one held back for) has finished.
pub(super) fn offer_held(index: &mut HeldIndex, stack: &[Node], steps: &Steps, i: usize) {
    let Some(node) = stack.get(i) else {
        return;
    };
    let Some(h) = node.held.as_ref() else {
        return;
    };
    let Some(step) = h.step.as_ref() else {
        return;
    };
    if node.chosen != h.thread || i >= steps.len() {
        return;
    }
    index.add(i, h.thread, steps.clock(i)[h.thread], step);
}

/// Whether a pending operation waits with a deadline (it touches virtual time).
pub(super) fn timed(f: &Footprint) -> bool {
    f.touches.iter().any(|t| t.object.kind == ObjectKind::Time)
}
