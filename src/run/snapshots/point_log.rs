//! The scheduling points of an execution ([`SavedPoint`]), kept for the snapshots it may
//! take: every snapshot keeps the points before it (to show the strategy again on restore),
//! and up to eight branch snapshots live on one path, so the log is made of shared,
//! immutable chunks plus a short tail of its own. Copying it for a snapshot copies the tail
//! and a list of chunk handles, and the points of one path are held once however many
//! snapshots (and the running execution) share them.

use std::sync::Arc;

use crate::explore::Point;
use crate::model::{Footprint, ThreadId};

/// Points per shared chunk: a snapshot copies at most this many points (branch snapshots
/// come every few dozen decisions, so a longer tail was copied whole each time).
const CHUNK: usize = 64;

/// A scheduling point of the snapshotted start, shown to the strategy again on restore.
#[derive(Clone, Debug)]
pub(in crate::run) struct SavedPoint {
    pub enabled: Vec<ThreadId>,
    pub ops: Vec<&'static str>,
    pub footprints: Vec<Footprint>,
    pub blocked: Vec<(ThreadId, Footprint)>,
    pub timeouts: Vec<ThreadId>,
    /// What the chosen thread then touched natively, as reported to the strategy.
    pub ran: Option<Footprint>,
    pub current: Option<ThreadId>,
    pub current_yields: bool,
    pub step: usize,
    pub chosen: ThreadId,
}

impl SavedPoint {
    /// The point as the strategy saw it.
    pub fn point(&self) -> Point<'_> {
        Point {
            enabled: &self.enabled,
            ops: &self.ops,
            footprints: &self.footprints,
            blocked: &self.blocked,
            timeouts: &self.timeouts,
            current: self.current,
            current_yields: self.current_yields,
            step: self.step,
        }
    }
}

/// An append-only log of points, cheap to clone.
#[derive(Clone, Default)]
pub(in crate::run) struct PointLog {
    chunks: Vec<Arc<[SavedPoint]>>,
    tail: Vec<SavedPoint>,
}

impl PointLog {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.chunks.len() * CHUNK + self.tail.len()
    }

    /// Whether it holds no point.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a point.
    pub fn push(&mut self, p: SavedPoint) {
        if self.tail.len() == CHUNK {
            let full = std::mem::replace(&mut self.tail, Vec::with_capacity(CHUNK));
            self.chunks.push(full.into());
        }
        self.tail.push(p);
    }

    /// The last point, to complete it (always in the tail: chunks are sealed only when a
    /// point follows them).
    pub fn last_mut(&mut self) -> Option<&mut SavedPoint> {
        self.tail.last_mut()
    }

    /// The points in order.
    pub fn iter(&self) -> impl Iterator<Item = &SavedPoint> {
        self.chunks.iter().flat_map(|c| c.iter()).chain(&self.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(step: usize) -> SavedPoint {
        SavedPoint {
            enabled: vec![0, 1],
            ops: vec!["yield", "yield"],
            footprints: Vec::new(),
            blocked: Vec::new(),
            ran: None,
            current: Some(0),
            current_yields: false,
            step,
            chosen: step % 2,
            timeouts: Vec::new(),
        }
    }

    #[test]
    fn clones_share_sealed_chunks_and_keep_their_own_tail() {
        let mut log = PointLog::default();
        for i in 0..CHUNK * 2 + 5 {
            log.push(point(i));
        }
        let mut copy = log.clone();
        assert!(Arc::ptr_eq(&log.chunks[0], &copy.chunks[0]));
        copy.last_mut().unwrap().chosen = 7;
        assert_eq!(log.iter().last().unwrap().chosen, (CHUNK * 2 + 4) % 2);
        assert_eq!(copy.iter().last().unwrap().chosen, 7);
        assert_eq!(log.len(), CHUNK * 2 + 5);
        let steps: Vec<usize> = log.iter().map(|p| p.step).collect();
        assert_eq!(steps, (0..CHUNK * 2 + 5).collect::<Vec<_>>());
    }
}
