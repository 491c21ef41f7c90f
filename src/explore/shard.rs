//! One tree search split among N machines (`--shard I/N` with dfs or icb): which subtrees
//! are this machine's. Every node of the tree has a range of shards [lo, hi) that share the
//! subtree below it; the root's is every shard. At a node with m choices (its enabled
//! threads, in id order) and a range of r shards, the range is divided among the children:
//! when r ≥ m, child i gets the sub-range [lo + i·r/m, lo + (i+1)·r/m) (never empty); when
//! r < m, child i goes to the one shard lo + ⌊i·r/m⌋ (every shard of the range gets at
//! least one child). A node with one choice passes its range on whole. The ranges of a
//! node's children partition its range, so:
//!
//! - a shard follows only children whose range holds it; once a range is that shard alone
//!   the whole subtree is its own, explored as an unsharded search would;
//! - an execution belongs to the first shard of the range it ends in. It ends in a range of
//!   one shard unless it met too few choices to split; such a short schedule is run to its
//!   end by every shard of its range, and counted and reported by the first only;
//! - an icb search may have to stop an execution at a node where its children of this
//!   shard all cost more preemptions than the current bound (the default child being
//!   another shard's): that prefix run is not an execution of this shard either.
//!
//! The ranges depend on the enabled sets along the path only, which every shard sees
//! alike (executions are deterministic under mcheck), so the N shards' executions together
//! are exactly the executions of the unsharded search, none twice.
//!
//! Partial-order reduction and the state cache learn from executions in other subtrees
//! (race reversals, sleep sets, visited states), which another shard runs: they cannot be
//! split this way and are refused with `--shard`.

use crate::detect::hash::splitmix64_finish as mix;
use crate::model::ThreadId;

/// This machine's part of a split tree search: shard `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeShard {
    /// 0-based index of this shard.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
}

impl TreeShard {
    /// The range of the root: every shard.
    pub fn root(&self) -> ShardRange {
        ShardRange {
            lo: 0,
            hi: self.count.max(1),
        }
    }
}

/// The shards [lo, hi) that share a subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRange {
    /// First shard (0-based), the owner of a short schedule ending here.
    pub lo: u32,
    /// One past the last shard.
    pub hi: u32,
}

impl ShardRange {
    /// Whether shard `index` shares this subtree.
    pub fn contains(&self, index: u32) -> bool {
        (self.lo..self.hi).contains(&index)
    }

    /// The range of the subtree below choice `i` of the `m` choices of a node.
    pub fn child(&self, i: usize, m: usize) -> ShardRange {
        let r = u64::from(self.hi - self.lo);
        if m <= 1 || r <= 1 {
            return *self;
        }
        let (i, m) = (i as u64, m as u64);
        let at = |k: u64| self.lo + (k * r / m) as u32;
        if r >= m {
            ShardRange {
                lo: at(i),
                hi: at(i + 1),
            }
        } else {
            let lo = at(i);
            ShardRange { lo, hi: lo + 1 }
        }
    }

    /// The range below choosing `thread` at a node where `enabled` could run.
    pub fn after(&self, enabled: &[ThreadId], thread: ThreadId) -> ShardRange {
        let i = enabled.iter().position(|&t| t == thread).unwrap_or(0);
        self.child(i, enabled.len())
    }
}

/// An order-independent digest of a set of schedules: the wrapping sum of a 64-bit hash of
/// each schedule's sequence of chosen threads. The digests of disjoint searches add up to
/// the digest of their union, so N shards' digests summed equal the unsharded search's
/// exactly when they explored the same schedules (barring a 2⁻⁶⁴ coincidence), and, with
/// equal execution counts, none twice.
pub fn schedule_hash(threads: impl IntoIterator<Item = ThreadId>) -> u64 {
    // A fixed function (not the standard library's hasher, which may change between
    // releases): shards built from different compilers must agree.
    let mut h: u64 = 0x6d63_6865_636b_2121;
    let mut n: u64 = 0;
    for t in threads {
        h = mix(h ^ (t as u64).wrapping_add(0x9e37_79b9_7f4a_7c15));
        n += 1;
    }
    mix(h ^ n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every child range is non-empty, they are contiguous and cover the parent, and a
    /// shard gets at least one child.
    #[test]
    fn children_partition_the_range() {
        for count in 1..9u32 {
            for lo in 0..count {
                for hi in lo + 1..=count {
                    let r = ShardRange { lo, hi };
                    for m in 1..7usize {
                        let kids: Vec<ShardRange> = (0..m).map(|i| r.child(i, m)).collect();
                        for s in lo..hi {
                            let n = kids.iter().filter(|k| k.contains(s)).count();
                            assert!(n >= 1, "shard {s} of {r:?} gets no child of {m}");
                            if hi - lo >= m as u32 {
                                assert_eq!(n, 1, "{r:?} over {m}");
                            }
                        }
                        assert!(kids.iter().all(|k| k.lo < k.hi && k.lo >= lo && k.hi <= hi));
                        if m == 1 {
                            assert_eq!(kids[0], r);
                        }
                        if hi - lo >= m as u32 {
                            assert_eq!(kids[0].lo, lo);
                            assert_eq!(kids[m - 1].hi, hi);
                            assert!(kids.windows(2).all(|w| w[0].hi == w[1].lo));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn digests_of_disjoint_sets_add_up() {
        let a = schedule_hash([0, 1, 0]);
        let b = schedule_hash([0, 0, 1]);
        assert_ne!(a, b);
        assert_ne!(schedule_hash([0, 1]), schedule_hash([0, 1, 0]));
        assert_eq!(schedule_hash([1, 0]), schedule_hash(vec![1, 0]));
        assert_eq!(a.wrapping_add(b), b.wrapping_add(a));
    }
}
