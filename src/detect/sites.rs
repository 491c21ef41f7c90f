//! Who made an access, in eight bytes. Every distinct (thread, pc, size, write, atomic) is
//! interned once as a site id; a shadow [`Slot`] packs a site id with the clock value of
//! its thread at the access, which is all a race report needs to name that access again
//! ([`Sites::seen`]). Site id 0 is reserved, so the slot 0 means "no access", and the
//! largest id tags slots whose low half is an index (a split granule, a list of reads).

use std::collections::HashMap;

use super::hash::FastHash;
use super::race::Seen;
use super::vclock::Epoch;
use crate::model::ThreadId;

/// A site id and a clock value: `(site << 32) | clock`; 0 is no access.
pub type Slot = u64;

/// The empty slot.
pub const NONE: Slot = 0;

/// The site id of tagged slots: their low half is an index into a table of the page.
const TAG: u64 = u32::MAX as u64;

/// The slot of site `site` at clock `clock`.
pub fn slot(site: u32, clock: u32) -> Slot {
    (u64::from(site) << 32) | u64::from(clock)
}

/// The site id of a slot.
pub fn site_of(s: Slot) -> u32 {
    (s >> 32) as u32
}

/// The clock value of a slot.
pub fn clock_of(s: Slot) -> u32 {
    s as u32
}

/// A tagged slot holding `index`.
pub fn tagged(index: u32) -> Slot {
    (TAG << 32) | u64::from(index)
}

/// Whether `s` is a tagged slot (then `clock_of` is its index).
pub fn is_tagged(s: Slot) -> bool {
    s >> 32 == TAG
}

/// One interned access site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Site {
    /// The accessing thread.
    pub thread: ThreadId,
    /// The instruction (or call site).
    pub pc: u64,
    /// Bytes accessed, as given (0 stays 0).
    pub size: u64,
    /// It wrote.
    pub write: bool,
    /// It was atomic.
    pub atomic: bool,
}

/// Entries of a [`SiteCache`] (a power of two).
const CACHED: usize = 64;

/// A direct-mapped cache of recently used sites and their ids: a loop body's few access
/// sites each keep their entry, so looking one up is a compare instead of a hash lookup.
#[derive(Debug, Clone)]
pub struct SiteCache(Box<[(Site, u32); CACHED]>);

impl Default for SiteCache {
    fn default() -> Self {
        let empty = Site {
            thread: usize::MAX,
            pc: 0,
            size: 0,
            write: false,
            atomic: false,
        };
        SiteCache(Box::new([(empty, 0); CACHED]))
    }
}

impl SiteCache {
    #[inline]
    fn entry(site: &Site) -> usize {
        let key = site.pc ^ (site.thread as u64) << 40 ^ u64::from(site.write) << 63;
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % CACHED
    }

    /// The id of `site`, interning it in `sites` when new.
    #[inline]
    pub fn id(&mut self, site: Site, sites: &mut std::sync::Arc<Sites>) -> u32 {
        let e = &self.0[Self::entry(&site)];
        if e.1 != 0 && e.0 == site {
            return e.1;
        }
        self.miss(site, sites)
    }

    #[inline(never)]
    fn miss(&mut self, site: Site, sites: &mut std::sync::Arc<Sites>) -> u32 {
        let e = &mut self.0[Self::entry(&site)];
        let id = match sites.id(&site) {
            Some(id) => id,
            None => std::sync::Arc::make_mut(sites).intern(site),
        };
        *e = (site, id);
        id
    }
}

/// The interned sites of one execution (and of every clone of it: ids only grow, so a
/// clone shares its template's table until it interns a site of its own).
#[derive(Debug, Clone)]
pub struct Sites {
    list: Vec<Site>,
    ids: HashMap<Site, u32, FastHash>,
}

impl Default for Sites {
    fn default() -> Self {
        let reserved = Site {
            thread: usize::MAX,
            pc: 0,
            size: 0,
            write: false,
            atomic: false,
        };
        Sites {
            list: vec![reserved],
            ids: HashMap::default(),
        }
    }
}

impl Sites {
    /// The id of `site`, if interned.
    pub fn id(&self, site: &Site) -> Option<u32> {
        self.ids.get(site).copied()
    }

    /// Interns `site` and returns its id.
    pub fn intern(&mut self, site: Site) -> u32 {
        if let Some(id) = self.id(&site) {
            return id;
        }
        let id = u32::try_from(self.list.len())
            .ok()
            .filter(|&id| u64::from(id) < TAG)
            .expect("more than 2^32 - 1 distinct access sites in one execution");
        self.list.push(site);
        self.ids.insert(site, id);
        id
    }

    /// The site of slot `s` (not empty, not tagged).
    pub fn get(&self, s: Slot) -> &Site {
        &self.list[site_of(s) as usize]
    }

    /// The access that slot `s` records, as a race report names it.
    pub fn seen(&self, s: Slot) -> Seen {
        let site = self.get(s);
        Seen {
            epoch: Epoch {
                thread: site.thread,
                clock: clock_of(s),
            },
            pc: site.pc,
            write: site.write,
            atomic: site.atomic,
            size: site.size,
        }
    }
}
