//! The addresses learnt to hold atomics (touched by an atomic instruction, by a site whose
//! source says atomic, or raced on by two accesses that may be atomics), kept by a worker
//! across its executions. Every logged MOV of the code under test asks whether its address
//! is one, and almost none is: a 1 KiB bit filter in front of the set answers most of those
//! questions from one cache line, where the hashed set costs a probe of its control bytes
//! and a slot. The filter only ever has bits added with the set's addresses (the set never
//! forgets one), so a clear bit proves the address is not in the set.

use std::collections::HashSet;

use crate::detect::hash::FastHash;

/// Words of the filter: 8,192 bits.
const FILTER_WORDS: usize = 128;

/// The set of atomic addresses and its filter. See the module documentation.
#[derive(Debug, Clone)]
pub struct AtomicAddresses {
    set: HashSet<u64, FastHash>,
    filter: Box<[u64; FILTER_WORDS]>,
}

impl Default for AtomicAddresses {
    fn default() -> Self {
        AtomicAddresses {
            set: HashSet::default(),
            filter: Box::new([0; FILTER_WORDS]),
        }
    }
}

impl AtomicAddresses {
    /// The filter's word and bit for `addr`.
    #[inline]
    fn bit(addr: u64) -> (usize, u64) {
        let h = (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 51) as usize;
        (h / 64 % FILTER_WORDS, 1 << (h % 64))
    }

    /// Adds `addr`; true when it was not there.
    pub fn insert(&mut self, addr: u64) -> bool {
        let (w, b) = Self::bit(addr);
        self.filter[w] |= b;
        self.set.insert(addr)
    }

    /// Whether `addr` is one.
    #[inline]
    pub fn contains(&self, addr: u64) -> bool {
        let (w, b) = Self::bit(addr);
        self.filter[w] & b != 0 && self.set.contains(&addr)
    }

    /// How many addresses.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The addresses, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &u64> + '_ {
        self.set.iter()
    }
}

impl Extend<u64> for AtomicAddresses {
    fn extend<I: IntoIterator<Item = u64>>(&mut self, iter: I) {
        for a in iter {
            self.insert(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_never_hides_an_address_of_the_set() {
        let mut a = AtomicAddresses::default();
        // Far more addresses than the filter has bits: every bit set, nothing lost.
        let addrs: Vec<u64> = (0..20_000u64).map(|i| 0x5555_0000 + i * 8).collect();
        for &x in addrs.iter().step_by(3) {
            a.insert(x);
        }
        for (i, &x) in addrs.iter().enumerate() {
            assert_eq!(a.contains(x), i % 3 == 0, "{x:#x}");
        }
        let copy = a.clone();
        assert!(copy.contains(addrs[0]) && !copy.contains(addrs[1]));
        assert_eq!(a.len(), copy.len());
    }

    #[test]
    fn an_address_never_added_is_mostly_answered_by_the_filter() {
        let mut a = AtomicAddresses::default();
        a.extend((0..100u64).map(|i| 0x7000 + 64 * i));
        let clear = (0..10_000u64)
            .map(|i| 0x10_0000 + 8 * i)
            .filter(|&x| {
                let (w, b) = AtomicAddresses::bit(x);
                a.filter[w] & b == 0
            })
            .count();
        assert!(clear > 9_000, "{clear} of 10000 answered by the filter");
        assert!(!a.contains(0x10_0000));
    }
}
