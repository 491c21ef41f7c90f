//! Schedule prefixes kept for later (icb's alternatives beyond the current bound, the work
//! items of a parallel tree search), stored so that their memory grows with their number,
//! not with their length times their number.
//!
//! An execution of n steps can leave an alternative at each of its points; as plain vectors
//! those prefixes hold about n²/2 choices (a 92,000-step `rg` execution: 34 GB). Here the
//! path of the execution is run-length encoded once (threads run in stretches) and shared
//! by every prefix taken from it, each of which is a length and the alternative taken
//! there: 16 bytes.

use std::sync::Arc;

use crate::model::ThreadId;

/// A path of scheduling choices, run-length encoded: each run is (thread, end), `end`
/// being the number of choices up to and including the run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Path {
    runs: Vec<(u32, u32)>,
}

impl Path {
    /// Encodes `choices`.
    pub fn encode(choices: impl IntoIterator<Item = ThreadId>) -> Path {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        let mut n = 0u32;
        for t in choices {
            n += 1;
            let t = t as u32;
            match runs.last_mut() {
                Some((last, end)) if *last == t => *end = n,
                _ => runs.push((t, n)),
            }
        }
        runs.shrink_to_fit();
        Path { runs }
    }

    /// Number of choices.
    pub fn len(&self) -> usize {
        self.runs.last().map_or(0, |&(_, end)| end as usize)
    }

    /// Whether it has no choice.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The first `len` choices.
    pub fn decode(&self, len: usize) -> Vec<ThreadId> {
        let mut out = Vec::with_capacity(len);
        let mut start = 0usize;
        for &(t, end) in &self.runs {
            let end = (end as usize).min(len);
            out.extend(std::iter::repeat_n(
                t as ThreadId,
                end.saturating_sub(start),
            ));
            start = end;
            if start >= len {
                break;
            }
        }
        out
    }

    /// Bytes it holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<(u32, u32)>()
    }
}

/// No alternative: the prefix is the path's first `len` choices alone.
const NONE: u32 = u32::MAX;

/// A schedule prefix: the first `len` choices of a shared [`Path`], then (optionally) an
/// alternative choice.
#[derive(Debug, Clone)]
pub struct Prefix {
    path: Arc<Path>,
    len: u32,
    alt: u32,
}

impl Prefix {
    /// The first `len` choices of `path`, then `alt`.
    pub fn branch(path: Arc<Path>, len: usize, alt: ThreadId) -> Prefix {
        debug_assert!(len <= path.len());
        Prefix {
            path,
            len: len as u32,
            alt: alt as u32,
        }
    }

    /// A prefix given as a vector.
    pub fn from_vec(choices: &[ThreadId]) -> Prefix {
        Prefix {
            path: Arc::new(Path::encode(choices.iter().copied())),
            len: choices.len() as u32,
            alt: NONE,
        }
    }

    /// Number of choices.
    pub fn len(&self) -> usize {
        self.len as usize + usize::from(self.alt != NONE)
    }

    /// Whether it is the empty prefix (the root).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The choices.
    pub fn to_vec(&self) -> Vec<ThreadId> {
        let mut v = self.path.decode(self.len as usize);
        if self.alt != NONE {
            v.push(self.alt as ThreadId);
        }
        v
    }
}

/// Alternatives left at points of the running execution, made into [`Prefix`]es of its path
/// once it has ended (one encoding of the path for all of them).
#[derive(Debug, Default)]
pub struct PendingBranches {
    at: Vec<(u32, u32)>,
}

impl PendingBranches {
    /// Alternative `alt` at point `depth` (after `depth` choices) of the current path.
    pub fn push(&mut self, depth: usize, alt: ThreadId) {
        self.at.push((depth as u32, alt as u32));
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// The prefixes, given the path they were left on (its choices, in order).
    pub fn take(&mut self, path: impl IntoIterator<Item = ThreadId>) -> Vec<Prefix> {
        if self.at.is_empty() {
            return Vec::new();
        }
        let deepest = self.at.iter().map(|&(d, _)| d as usize).max().unwrap_or(0);
        let path = Arc::new(Path::encode(path.into_iter().take(deepest)));
        self.at
            .drain(..)
            .map(|(d, alt)| Prefix::branch(path.clone(), d as usize, alt as ThreadId))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_prefixes_round_trip() {
        let choices = vec![0, 0, 0, 1, 1, 2, 0, 0, 1];
        let path = Arc::new(Path::encode(choices.iter().copied()));
        assert_eq!(path.len(), 9);
        assert_eq!(path.runs.len(), 5);
        for len in 0..=9 {
            assert_eq!(path.decode(len), choices[..len]);
            let p = Prefix::branch(path.clone(), len, 7);
            let mut want = choices[..len].to_vec();
            want.push(7);
            assert_eq!(p.to_vec(), want);
            assert_eq!(p.len(), len + 1);
        }
        assert!(Prefix::from_vec(&[]).is_empty());
        assert_eq!(Prefix::from_vec(&[3, 3, 1]).to_vec(), vec![3, 3, 1]);
        assert_eq!(std::mem::size_of::<Prefix>(), 16);
    }

    #[test]
    fn pending_branches_share_one_path() {
        let mut p = PendingBranches::default();
        p.push(2, 1);
        p.push(4, 0);
        let prefixes = p.take([0, 0, 1, 1, 1, 1]);
        assert!(p.is_empty());
        assert_eq!(prefixes[0].to_vec(), vec![0, 0, 1]);
        assert_eq!(prefixes[1].to_vec(), vec![0, 0, 1, 1, 0]);
        assert!(Arc::ptr_eq(&prefixes[0].path, &prefixes[1].path));
    }
}
