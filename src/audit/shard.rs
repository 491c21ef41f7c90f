//! `--shard I/N`: which targets, and which part of a split target's search, one of N
//! machines runs. Whole targets go round-robin in manifest order (target k to shard
//! k mod N + 1); a target with `split = true` runs on every shard as `mcheck --shard I/N`:
//! a random or pct search runs a disjoint range of executions (and so of seeds: execution
//! i uses seed base+i), the ranges together being the unsharded budget; a dfs or icb search
//! explores disjoint subtrees (`explore/shard.rs`), each shard capped by the whole budget;
//! the portfolio does both.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One shard of N (1-based index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1..=count.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
}

impl Shard {
    /// The whole audit as one shard.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Whether the target at manifest position `position` is run whole by this shard.
    pub fn owns(&self, position: usize) -> bool {
        position % self.count as usize == (self.index - 1) as usize
    }

    /// This shard's part of a split search of `max_executions` from seed `seed`: a tree
    /// search (dfs, icb) keeps the whole budget as its cap, other strategies take
    /// [`Shard::seed_range`].
    pub fn part(&self, tree: bool, seed: u64, max_executions: u64) -> Share {
        let mut share = if tree {
            Share {
                seed,
                first_execution: 0,
                max_executions,
                shard: None,
            }
        } else {
            self.seed_range(seed, max_executions)
        };
        share.shard = Some(*self);
        share
    }

    /// This shard's range of the executions of a randomised search of `max_executions`
    /// from seed `seed`: the first execution's seed offset and the number of executions
    /// (possibly zero).
    pub fn seed_range(&self, seed: u64, max_executions: u64) -> Share {
        let n = u128::from(self.count);
        let k = u128::from(self.index - 1);
        let m = u128::from(max_executions);
        let start = (k * m / n) as u64;
        let end = ((k + 1) * m / n) as u64;
        Share {
            seed: seed.wrapping_add(start),
            first_execution: start,
            max_executions: end - start,
            shard: Some(*self),
        }
    }
}

/// The part of a split target's search one shard runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// Base seed of this part.
    pub seed: u64,
    /// Index (0-based) of its first execution in the unsharded search.
    pub first_execution: u64,
    /// Executions in this part (its cap, for a tree search).
    pub max_executions: u64,
    /// The shard that runs it (absent in audits written before tree searches were split).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}` is not a shard: use I/N with 1 ≤ I ≤ N, e.g. 2/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, count: 4 }));
        assert!("0/4".parse::<Shard>().is_err());
        assert!("5/4".parse::<Shard>().is_err());
        assert!("1/0".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
    }

    #[test]
    fn targets_and_seeds_are_partitioned() {
        for n in 1..6u32 {
            let shards: Vec<Shard> = (1..=n).map(|index| Shard { index, count: n }).collect();
            for pos in 0..20 {
                assert_eq!(shards.iter().filter(|s| s.owns(pos)).count(), 1);
            }
            for m in [1u64, 7, 300] {
                let mut next = 10;
                let mut total = 0;
                for s in &shards {
                    let share = s.seed_range(10, m);
                    assert_eq!(share.seed, next);
                    next += share.max_executions;
                    total += share.max_executions;
                }
                assert_eq!(total, m);
            }
        }
    }
}
