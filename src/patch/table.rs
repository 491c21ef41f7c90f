//! What is patched in one process: each patched site with its original bytes and the bytes
//! past it its jump relies on, and each trampoline, to find the one a stopped thread is in.
//!
//! A punned jump relies on bytes of the instructions after its site (see `jump.rs`). Before
//! any of those bytes change (a breakpoint inserted or removed, another site restored), the
//! jumps that read them must be taken out: [`PatchTable::dependents`] finds them, together
//! with the jumps those removals break in turn. A site that *hops* (a 2-byte jump to the
//! spare bytes of a nearby instruction moved out of the way, E9Patch's neighbour eviction)
//! relies on that instruction's bytes too: they are its [`Hop`].

use std::collections::BTreeMap;
use std::ops::Range;

use imbl::OrdMap;

use super::space::CodeSpace;
use super::trampoline::TrampolineMeta;

/// Longest an instruction is, plus the most bytes a jump reads past its site.
const MAX_REACH: u64 = 15 + 8;

/// One patched site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchedSite {
    /// Its id in the process's site table (what its records carry).
    pub id: u32,
    /// Its length.
    pub len: u8,
    /// Its bytes before it was patched.
    pub original: [u8; 16],
    /// Bytes past the site that its jump reads (a punned jump), 0 for a plain jump.
    pub reads_past: u8,
    /// Its trampoline's address.
    pub trampoline: u64,
    /// An access site (else an instruction moved out of the way of a neighbour's jump,
    /// which needs no breakpoint once restored).
    pub access: bool,
    /// Its jump is a short one to the spare bytes of another instruction, where the jump to
    /// its trampoline is.
    pub hop: Option<Hop>,
}

/// Where a hopping site's jump goes on, and the bytes it relies on there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// The address its short jump lands on (inside the other instruction), where the jump
    /// to its trampoline starts.
    pub at: u64,
    /// The bytes whose change breaks it: the other instruction's (its own jump and the
    /// spare bytes) and those the jump there reads past it.
    pub relies_on: (u64, u8),
}

impl PatchedSite {
    /// The original bytes.
    pub fn original_bytes(&self) -> &[u8] {
        &self.original[..self.len as usize]
    }

    /// The bytes whose change breaks this patch: its own and those its jump reads.
    fn span(&self, at: u64) -> Range<u64> {
        at..at + self.len as u64 + self.reads_past as u64
    }

    /// The bytes elsewhere that its hop relies on.
    fn hop_span(&self) -> Option<Range<u64>> {
        self.hop
            .map(|h| h.relies_on.0..h.relies_on.0 + h.relies_on.1 as u64)
    }
}

/// The patches of one process. The two maps with an entry per site are persistent: every
/// fork copy of a process starts from its template's table, and one that takes a few sites
/// out (those it stops at) shares the rest instead of cloning them.
#[derive(Debug, Clone, Default)]
pub struct PatchTable {
    sites: OrdMap<u64, PatchedSite>,
    trampolines: OrdMap<u64, TrampolineMeta>,
    /// Out-of-line copies of sites left on breakpoints: site → trampoline.
    out_of_line: BTreeMap<u64, u64>,
    /// Where hopping sites' short jumps land → the site.
    hops: BTreeMap<u64, u64>,
    /// Start of the bytes a hop relies on → the hopping sites.
    hop_spans: BTreeMap<u64, Vec<u64>>,
    /// Where trampolines go.
    pub space: CodeSpace,
}

impl PatchTable {
    /// An empty table over `space`.
    pub fn new(space: CodeSpace) -> PatchTable {
        PatchTable {
            space,
            ..Default::default()
        }
    }

    /// Records the patch of the site at `at` and its trampoline.
    pub fn insert(&mut self, at: u64, site: PatchedSite, meta: TrampolineMeta) {
        if let Some(h) = site.hop {
            self.hops.insert(h.at, at);
            self.hop_spans.entry(h.relies_on.0).or_default().push(at);
        }
        self.sites.insert(at, site);
        self.trampolines.insert(meta.at, meta);
    }

    /// The hopping site whose short jump lands at `rip` (a thread stopped there has done
    /// nothing of the site yet).
    pub fn hop_to(&self, rip: u64) -> Option<u64> {
        self.hops.get(&rip).copied()
    }

    /// Records the out-of-line copy of the site on a breakpoint at `meta.site`.
    pub fn insert_out_of_line(&mut self, meta: TrampolineMeta) {
        self.out_of_line.insert(meta.site, meta.at);
        self.trampolines.insert(meta.at, meta);
    }

    /// Where the out-of-line copy of the site at `at` is.
    pub fn out_of_line(&self, at: u64) -> Option<u64> {
        self.out_of_line.get(&at).copied()
    }

    /// Forgets the patch of the site at `at` (its trampoline too), returning it.
    pub fn remove(&mut self, at: u64) -> Option<PatchedSite> {
        let site = self.sites.remove(&at)?;
        self.trampolines.remove(&site.trampoline);
        if let Some(h) = site.hop {
            self.hops.remove(&h.at);
            if let Some(list) = self.hop_spans.get_mut(&h.relies_on.0) {
                list.retain(|&s| s != at);
                if list.is_empty() {
                    self.hop_spans.remove(&h.relies_on.0);
                }
            }
        }
        Some(site)
    }

    /// The patch of the site at `at`.
    pub fn get(&self, at: u64) -> Option<&PatchedSite> {
        self.sites.get(&at)
    }

    /// The trampoline `rip` lies in.
    pub fn trampoline_at(&self, rip: u64) -> Option<&TrampolineMeta> {
        self.trampolines
            .get_prev(&rip)
            .map(|(_, m)| m)
            .filter(|m| m.contains(rip))
    }

    /// Number of patched sites.
    pub fn len(&self) -> usize {
        self.sites.len()
    }

    /// True when nothing is patched.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// The patched sites (address, patch).
    pub fn sites(&self) -> impl Iterator<Item = (u64, &PatchedSite)> {
        self.sites.iter().map(|(&a, s)| (a, s))
    }

    /// The patched sites that overlap `range`, each with its original bytes: laid over
    /// the process's memory, they give the program's own code (a debugger reads that).
    pub fn originals_overlapping(&self, range: Range<u64>) -> impl Iterator<Item = (u64, &[u8])> {
        let from = range.start.saturating_sub(16);
        (self.sites.range(from..range.end))
            .filter(move |(&at, s)| at + s.len as u64 > range.start)
            .map(|(&at, s)| (at, s.original_bytes()))
    }

    /// The sites whose patches must be taken out before the bytes `range` change, in the
    /// order to take them out: each one's jump covers bytes in `range` or bytes that an
    /// earlier one's restoration changes.
    pub fn dependents(&self, range: Range<u64>) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        let mut work = vec![range];
        while let Some(r) = work.pop() {
            let from = r.start.saturating_sub(MAX_REACH);
            for (&at, site) in self.sites.range(from..r.end) {
                let span = site.span(at);
                if span.start < r.end && r.start < span.end && !out.contains(&at) {
                    out.push(at);
                    work.push(at..at + site.len as u64);
                }
            }
            // Sites hopping through these bytes.
            for (_, hoppers) in self.hop_spans.range(from..r.end) {
                for &at in hoppers {
                    let Some(span) = self.sites.get(&at).and_then(PatchedSite::hop_span) else {
                        continue;
                    };
                    if span.start < r.end && r.start < span.end && !out.contains(&at) {
                        out.push(at);
                        work.push(at..at + self.sites[&at].len as u64);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(id: u32, len: u8, reads_past: u8, trampoline: u64) -> PatchedSite {
        PatchedSite {
            id,
            len,
            original: [0x90; 16],
            reads_past,
            trampoline,
            access: true,
            hop: None,
        }
    }

    fn meta(at: u64, site: u64) -> TrampolineMeta {
        TrampolineMeta {
            site,
            site_len: 2,
            at,
            len: 80,
            resume: 20,
            committed: 40,
            insn: 56,
            back: 60,
            full: 65,
            kind: crate::patch::trampoline::Kind::Access,
        }
    }

    #[test]
    fn the_original_bytes_of_the_sites_a_range_overlaps_are_found() {
        let mut t = PatchTable::default();
        t.insert(0x1000, site(0, 2, 3, 0x9000), meta(0x9000, 0x1000));
        t.insert(0x1010, site(1, 7, 0, 0x9100), meta(0x9100, 0x1010));
        let at = |r: std::ops::Range<u64>| -> Vec<u64> {
            t.originals_overlapping(r).map(|(a, _)| a).collect()
        };
        assert_eq!(at(0x1001..0x1002), vec![0x1000]);
        assert_eq!(at(0x1002..0x1010), Vec::<u64>::new());
        assert_eq!(at(0x1000..0x1011), vec![0x1000, 0x1010]);
        assert_eq!(at(0x1016..0x1100), vec![0x1010]);
        assert_eq!(at(0x1017..0x1100), Vec::<u64>::new());
        let (_, bytes) = t.originals_overlapping(0x1010..0x1011).next().expect("one");
        assert_eq!(bytes.len(), 7);
    }

    #[test]
    fn a_stopped_thread_is_found_in_its_trampoline() {
        let mut t = PatchTable::default();
        t.insert(0x1000, site(0, 2, 3, 0x9000), meta(0x9000, 0x1000));
        t.insert(0x1010, site(1, 7, 0, 0x9100), meta(0x9100, 0x1010));
        assert_eq!(t.trampoline_at(0x9000).map(|m| m.site), Some(0x1000));
        assert_eq!(t.trampoline_at(0x904f).map(|m| m.site), Some(0x1000));
        assert_eq!(t.trampoline_at(0x9050), None);
        assert_eq!(t.trampoline_at(0x9120).map(|m| m.site), Some(0x1010));
        t.remove(0x1000);
        assert_eq!(t.trampoline_at(0x9000), None);
    }

    #[test]
    fn changing_a_byte_a_punned_jump_reads_takes_out_the_chain() {
        let mut t = PatchTable::default();
        // 0x1000: 2-byte site reading 3 bytes past it (0x1002..0x1005);
        // 0x1002: 2-byte site reading 0x1004..0x1007; 0x1004: a 5-byte plain jump.
        t.insert(0x1000, site(0, 2, 3, 0x9000), meta(0x9000, 0x1000));
        t.insert(0x1002, site(1, 2, 3, 0x9100), meta(0x9100, 0x1002));
        t.insert(0x1004, site(2, 5, 0, 0x9200), meta(0x9200, 0x1004));
        // A breakpoint at 0x1006 (inside the plain jump's own bytes): it goes, and the two
        // punned jumps reading its bytes with it.
        let mut d = t.dependents(0x1006..0x1007);
        d.sort();
        assert_eq!(d, vec![0x1000, 0x1002, 0x1004]);
        // A byte only the second reads: the second goes, and the first that reads it.
        let mut d = t.dependents(0x1003..0x1004);
        d.sort();
        assert_eq!(d, vec![0x1000, 0x1002]);
        // Past every span: nothing.
        assert!(t.dependents(0x1009..0x100a).is_empty());
    }

    #[test]
    fn a_hop_is_taken_out_with_the_instruction_it_goes_through() {
        let mut t = PatchTable::default();
        // A 10-byte neighbour at 0x1040 moved out of the way; a short site at 0x1000 hops to
        // its sixth byte.
        let mut n = site(u32::MAX, 10, 0, 0x9200);
        n.access = false;
        t.insert(0x1040, n, meta(0x9200, 0x1040));
        let mut hopper = site(3, 2, 0, 0x9300);
        hopper.hop = Some(Hop {
            at: 0x1045,
            relies_on: (0x1040, 10),
        });
        t.insert(0x1000, hopper, meta(0x9300, 0x1000));
        assert_eq!(t.hop_to(0x1045), Some(0x1000));
        // A breakpoint in the neighbour takes out both; one on the site only the site.
        let mut both = t.dependents(0x1048..0x1049);
        both.sort_unstable();
        assert_eq!(both, vec![0x1000, 0x1040]);
        assert_eq!(t.dependents(0x1000..0x1001), vec![0x1000]);
        t.remove(0x1000);
        assert_eq!(t.hop_to(0x1045), None);
        assert_eq!(t.dependents(0x1048..0x1049), vec![0x1040]);
    }
}
