//! Accesses a thread repeats within one drained stretch of the access log: the same
//! instruction at the same address again, with no synchronisation in between (a loop over
//! one counter, a field read on every iteration). Only that thread ran in the stretch and
//! its epoch has not moved, so the detector would find the access's cells as the first one
//! left them and change nothing (its fast path), at the cost of the whole lookup. The
//! filter answers that in a few instructions.
//!
//! It is emptied (in O(1), by a generation counter) at every drain, and whenever something
//! in the stretch may change what a repeat means: an atomic access or library RMW (its
//! thread's epoch moves at a release), a modelled libc call (a range access that may leave
//! a read where the repeat would write), an address learnt to hold an atomic. Within those
//! bounds a repeat found here is exactly one the detector would leave unchanged, but for
//! which of two same-epoch accesses of the thread a later race names (the first one, not
//! the latest).

/// Entries of the direct-mapped table.
const ENTRIES: usize = 4096;

#[derive(Clone, Copy, Default)]
struct Entry {
    addr: u64,
    site: u32,
    generation: u32,
}

/// The filter. See the module documentation.
pub struct RepeatFilter {
    entries: Box<[Entry]>,
    generation: u32,
}

impl Default for RepeatFilter {
    fn default() -> Self {
        RepeatFilter {
            entries: vec![Entry::default(); ENTRIES].into_boxed_slice(),
            generation: 1,
        }
    }
}

impl RepeatFilter {
    /// Forgets everything seen (a new stretch, or something that changes what a repeat is).
    #[inline]
    pub fn forget(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: old entries could match again.
            self.entries.fill(Entry::default());
            self.generation = 1;
        }
    }

    /// Whether site `site` accessed `addr` since the last [`RepeatFilter::forget`]; notes
    /// that it did.
    #[inline]
    pub fn repeated(&mut self, addr: u64, site: u32) -> bool {
        let h = (addr ^ (site as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .wrapping_mul(0xff51_afd7_ed55_8ccd);
        let e = &mut self.entries[(h >> 52) as usize & (ENTRIES - 1)];
        if e.generation == self.generation && e.addr == addr && e.site == site {
            return true;
        }
        *e = Entry {
            addr,
            site,
            generation: self.generation,
        };
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_found_until_the_filter_forgets() {
        let mut f = RepeatFilter::default();
        assert!(!f.repeated(0x1000, 1));
        assert!(f.repeated(0x1000, 1));
        // Another site or another address is not a repeat.
        assert!(!f.repeated(0x1000, 2));
        assert!(!f.repeated(0x1008, 1));
        assert!(f.repeated(0x1000, 2));
        f.forget();
        assert!(!f.repeated(0x1000, 1));
    }

    #[test]
    fn a_colliding_entry_is_replaced_not_confused() {
        let mut f = RepeatFilter::default();
        // Fill the table far beyond its size: a miss is always possible, a false hit never.
        for i in 0..(ENTRIES as u64 * 4) {
            assert!(!f.repeated(0x10_0000 + i * 8, 7));
        }
        let hits = (0..(ENTRIES as u64 * 4))
            .filter(|i| f.repeated(0x10_0000 + i * 8, 7))
            .count();
        assert!(hits < ENTRIES * 4);
        assert!(!f.repeated(0xdead_0000, 7));
    }

    #[test]
    fn forgetting_survives_the_generation_wrapping() {
        let mut f = RepeatFilter::default();
        assert!(!f.repeated(0x40, 3));
        f.generation = u32::MAX;
        f.entries.iter_mut().for_each(|e| e.generation = u32::MAX);
        f.forget();
        assert!(
            !f.repeated(0x40, 3),
            "no stale entry matches after the wrap"
        );
    }
}
