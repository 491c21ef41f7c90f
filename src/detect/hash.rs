//! A fast hasher for the detector's small integer keys (page numbers, interned access
//! sites, synchronisation keys): one rotate, xor and multiply per word, as rustc's FxHash.
//! The keys come from one traced program, not from an adversary, so the DoS resistance of
//! std's SipHash buys nothing here and costs most of a shadow lookup.

use std::hash::{BuildHasherDefault, Hasher};

/// Multiplier of FxHash (an odd constant with well-spread bits).
const K: u64 = 0x517c_c1b7_2722_0a95;

/// The hasher state.
#[derive(Clone, Copy, Debug, Default)]
pub struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// `BuildHasher` for `HashMap<K, V, FastHash>`.
pub type FastHash = BuildHasherDefault<FastHasher>;

/// The 64-bit finaliser of SplitMix64: a bijection that spreads every input bit over the
/// output (state hashes and schedule digests).
pub fn splitmix64_finish(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
