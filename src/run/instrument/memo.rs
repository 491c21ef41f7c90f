//! Instrumenting the first thread creation again the way it was done last time. An execution
//! from exec reaches its first thread creation in the state the one before it did (the
//! program ran alone up to there, deterministically: same mappings, same code, same
//! breakpoints), and planning the patches of every access site once more cost most of a
//! short execution (seven tenths of the tracer's time in an OpenMP program's executions from
//! exec, where libgomp's thousands of sites are patched). So the first such execution
//! journals what instrumenting did to the process (the chunks it mapped for trampolines,
//! every write with the bytes it replaced) and keeps the code edits that came of it; a later
//! one whose state matches (a key over the mappings, the breakpoints and their meanings, the
//! configuration and the files waiting; then the bytes each write will replace, compared)
//! maps the same chunks, makes the same writes and takes the same edits. Anything else is
//! instrumented as usual. The code not written to is not compared: reading all of it (a
//! fault per page of libc never run) cost more than planning a small program's patches, and
//! up to the first thread the program ran alone, deterministically, from the same files.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;

use anyhow::Result;

use super::chunks::{map_chunk, unmap_chunk};
use super::code::{BreakpointKind, CodeEdits};
use super::plan::ModulePlan;
use super::{Ctx, Instrumentation};
use crate::model::ThreadId;
use crate::patch::space::CHUNK;
use crate::run::process::Process;
use crate::tracee::memory::{Journal, Memory};
use crate::tracee::procfs::Mapping;

/// Instrumentations kept per worker: one per configuration in use, rarely more than one.
const KEPT: usize = 2;

/// The instrumentations a worker may do again. See the module documentation.
#[derive(Default)]
pub(in crate::run) struct RecordingMemos {
    memos: Vec<Memo>,
}

/// What instrumenting the first thread creation did to one process.
struct Memo {
    /// The state it started from (see [`state_key`]).
    key: u64,
    /// Trampoline chunks it mapped.
    chunks: Vec<u64>,
    /// Its writes, in order.
    writes: Journal,
    /// The code edits after (without the access log, which is the process's own).
    after: CodeEdits,
    /// The plans whose addresses are in the key, kept alive so that no other plan can
    /// take an address.
    _plans: Vec<Arc<ModulePlan>>,
}

/// The state of a process about to be instrumented: its key, and the chunks it has.
pub(in crate::run) struct Before {
    key: u64,
    chunks: Vec<u64>,
}

impl RecordingMemos {
    /// The state of the process before instrumenting its first thread creation; None under
    /// `MCHECK_REUSE_INSTRUMENTATION=off` (to measure what this saves).
    pub(in crate::run) fn before(
        instr: &Instrumentation,
        ctx: &Ctx<'_>,
        maps: &[Mapping],
    ) -> Option<Before> {
        if std::env::var("MCHECK_REUSE_INSTRUMENTATION").is_ok_and(|v| v == "off") {
            return None;
        }
        Some(Before {
            key: state_key(instr, ctx, maps),
            chunks: ctx.code.patching.table.space.chunks().collect(),
        })
    }

    /// Does again, through thread `t`, what instrumenting did last time from the state
    /// `before`; false when there is nothing to do again (nothing kept for that state, a
    /// write would replace other bytes than it did, or a chunk could not be mapped where it
    /// was), and the caller instruments as usual.
    pub(in crate::run) fn replay(
        &mut self,
        before: &Before,
        p: &Process,
        code: &mut CodeEdits,
        t: ThreadId,
    ) -> Result<bool> {
        let Some(memo) = self.memos.iter().find(|m| m.key == before.key) else {
            return Ok(false);
        };
        if !memo.replaces_the_same(&p.mem) {
            return Ok(false);
        }
        let mut mapped = Vec::new();
        for &chunk in &memo.chunks {
            if !map_chunk(p, t, chunk)? {
                for &c in &mapped {
                    unmap_chunk(p, t, c)?;
                }
                return Ok(false);
            }
            mapped.push(chunk);
        }
        for w in &memo.writes {
            p.mem.write(w.addr, &w.bytes)?;
        }
        let log = code.patching.log.take();
        *code = memo.after.clone();
        code.patching.log = log;
        Ok(true)
    }

    /// Keeps what instrumenting the files of `plans` from `before` did: the chunks mapped
    /// since, `writes`, and the code edits it came to, `code`.
    pub(in crate::run) fn keep(
        &mut self,
        before: Before,
        writes: Journal,
        plans: Vec<Arc<ModulePlan>>,
        code: &CodeEdits,
    ) {
        let chunks: Vec<u64> = (code.patching.table.space.chunks())
            .filter(|c| !before.chunks.contains(c))
            .collect();
        // A chunk is mapped fresh each time: what its writes replaced is never compared.
        let mut writes = writes;
        for w in writes.iter_mut().filter(|w| in_chunks(&chunks, w.addr)) {
            w.before = None;
        }
        let mut after = code.clone();
        after.patching.log = None;
        self.memos.retain(|m| m.key != before.key);
        if self.memos.len() >= KEPT {
            self.memos.remove(0);
        }
        self.memos.push(Memo {
            key: before.key,
            chunks,
            writes,
            after,
            _plans: plans,
        });
    }
}

/// A key over everything instrumenting reads besides the code bytes: the mappings, the
/// breakpoints and what they mean, the site table so far, the configuration, the sites
/// that must stop, the files waiting and the ranges known to hold atomics.
fn state_key(instr: &Instrumentation, ctx: &Ctx<'_>, maps: &[Mapping]) -> u64 {
    let mut h = DefaultHasher::new();
    for m in maps {
        (m.start, m.end, &m.perms, &m.name).hash(&mut h);
    }
    let mut originals: Vec<(u64, u8)> = ctx.code.bps.originals().collect();
    originals.sort_unstable();
    originals.hash(&mut h);
    let mut kinds: Vec<(u64, u64)> = (ctx.code.kinds.iter())
        .map(|(&a, k)| (a, kind_key(k)))
        .collect();
    kinds.sort_unstable();
    kinds.hash(&mut h);
    let patching = &ctx.code.patching;
    (patching.sites.len(), patching.table.len()).hash(&mut h);
    format!("{:?}", patching.stats).hash(&mut h);
    (patching.log.as_ref())
        .map(|l| (l.layout().base, l.layout().capacity))
        .hash(&mut h);
    format!("{:?}", ctx.cfg).hash(&mut h);
    ctx.program.hash(&mut h);
    let mut stops: Vec<u64> = ctx.stop_sites.iter().copied().collect();
    stops.sort_unstable();
    stops.hash(&mut h);
    for (plan, bias) in &instr.rec.pending {
        (Arc::as_ptr(plan) as usize, bias).hash(&mut h);
    }
    for r in &instr.atomic_ranges {
        (r.start, r.end).hash(&mut h);
    }
    h.finish()
}

/// What a breakpoint means, as a number (a plan by its address).
fn kind_key(kind: &BreakpointKind) -> u64 {
    let mut h = DefaultHasher::new();
    std::mem::discriminant(kind).hash(&mut h);
    match kind {
        BreakpointKind::Hook(hook) => hook.hash(&mut h),
        BreakpointKind::Atomic { plan, index, bias } => {
            (Arc::as_ptr(plan) as usize, index, bias).hash(&mut h)
        }
        BreakpointKind::Access(id) => id.hash(&mut h),
        BreakpointKind::Alloc(a) => a.hash(&mut h),
        BreakpointKind::MemFn(f) => f.hash(&mut h),
        BreakpointKind::Entry
        | BreakpointKind::Main
        | BreakpointKind::Pause
        | BreakpointKind::Panic
        | BreakpointKind::LinkMapChanged => {}
    }
    h.finish()
}

impl Memo {
    /// Whether each write outside the chunks it maps would replace the bytes it replaced
    /// then (a write over bytes an earlier one wrote is the earlier one's to check).
    fn replaces_the_same(&self, mem: &Memory) -> bool {
        let mut written = Written::default();
        for w in &self.writes {
            let range = w.addr..w.addr + w.bytes.len() as u64;
            if !in_chunks(&self.chunks, w.addr) && !written.overlaps(&range) {
                let Some(before) = &w.before else {
                    return false;
                };
                let mut now = vec![0u8; before.len()];
                if mem.read(w.addr, &mut now).is_err() || &now != before {
                    return false;
                }
            }
            written.add(range);
        }
        true
    }
}

/// Whether `addr` lies in one of the trampoline `chunks`.
fn in_chunks(chunks: &[u64], addr: u64) -> bool {
    chunks.iter().any(|&c| (c..c + CHUNK).contains(&addr))
}

/// Byte ranges written so far, merged: start → end.
#[derive(Default)]
struct Written(BTreeMap<u64, u64>);

impl Written {
    /// Whether `r` overlaps a range written.
    fn overlaps(&self, r: &Range<u64>) -> bool {
        (self.0.range(..r.end).next_back()).is_some_and(|(_, &end)| end > r.start)
    }

    /// Adds `r`, merged with the ranges it overlaps or touches.
    fn add(&mut self, r: Range<u64>) {
        let (mut start, mut end) = (r.start, r.end);
        let touching: Vec<u64> = (self.0.range(..=end))
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&s, _)| s)
            .collect();
        for s in touching {
            let e = self.0.remove(&s).unwrap_or(s);
            start = start.min(s);
            end = end.max(e);
        }
        self.0.insert(start, end);
    }
}

#[cfg(test)]
mod tests {
    use super::Written;

    #[test]
    fn written_ranges_merge_and_answer_overlaps() {
        let mut w = Written::default();
        w.add(10..20);
        w.add(30..40);
        assert!(!w.overlaps(&(20..30)));
        assert!(w.overlaps(&(19..21)));
        assert!(w.overlaps(&(35..36)));
        w.add(20..30);
        assert_eq!(w.0.len(), 1, "touching ranges merge");
        assert!(w.overlaps(&(25..26)));
        assert!(!w.overlaps(&(40..50)));
        w.add(0..100);
        assert_eq!(w.0.into_iter().collect::<Vec<_>>(), vec![(0, 100)]);
    }
}
