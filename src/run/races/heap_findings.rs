//! The findings of heap errors (use after free, double free, invalid free): messages naming
//! the access or the free, the free that came before, and where the block was allocated.

use super::Env;
use crate::detect::heap::FreedBlock;
use crate::detect::race::{Access, HeapBlock};
use crate::model::ThreadId;
use crate::report::{Finding, FindingKind, ThreadReport};
use crate::run::process::report::{finding, thread_name};
use crate::run::process::stacks::primary_location;

/// The report of thread `t` at `pc` (a return address when `in_call`), its thread having run
/// on since: the one frame the pc gives, until a second run of the schedule takes its stack.
fn past_report(
    env: &mut Env<'_>,
    t: ThreadId,
    pc: u64,
    in_call: bool,
    state: String,
) -> ThreadReport {
    let tid = env.p.threads.get(t).map_or(0, |x| x.tid.as_raw());
    ThreadReport {
        id: t,
        tid,
        name: thread_name(env.p.exe(), tid),
        process: env.p.process_ref(t),
        state,
        stack: env.symbols.frame_at(pc, in_call),
    }
}

fn place(r: &ThreadReport) -> String {
    primary_location(&r.stack)
        .map(|f| f.short())
        .unwrap_or_else(|| "??".into())
}

/// Where the block was allocated, as a detail line.
fn allocation(env: &mut Env<'_>, b: &HeapBlock) -> String {
    match b.site {
        0 => format!(
            "heap block of {} bytes at {:#x}, allocated where mcheck did not see it",
            b.size, b.start
        ),
        site => format!(
            "heap block of {} bytes at {:#x}, allocated by thread T{} at {}",
            b.size,
            b.start,
            b.thread,
            env.symbols.call_site(site).short()
        ),
    }
}

/// The report of the free that put `f` in quarantine.
fn first_free(env: &mut Env<'_>, f: &FreedBlock) -> ThreadReport {
    past_report(
        env,
        f.freed_by,
        f.free_site,
        true,
        "freed the block (the earlier free)".into(),
    )
}

/// A use after free: `a` touched the freed block `f`; `run_on` when its thread has run on
/// since the access, `in_call` when the access is a modelled libc call (its pc a return
/// address).
pub(super) fn use_after_free(
    env: &mut Env<'_>,
    a: &Access,
    f: &FreedBlock,
    run_on: bool,
    in_call: bool,
) -> Finding {
    let rw = if a.write { "write" } else { "read" };
    let what = format!("{rw} of {} byte(s)", a.size);
    let mut later = env
        .reporter()
        .thread_report(a.thread, format!("{what} (this access)"));
    if run_on {
        later.stack = env.symbols.frame_at(a.pc, in_call);
    }
    if in_call {
        later.state.push_str(" inside a libc memory function");
    }
    let earlier = first_free(env, f);
    let offset = a.addr.saturating_sub(f.block.start);
    let message = format!(
        "use after free: {what} at offset {offset} of a freed heap block of {} bytes by thread T{} at {}; thread T{} freed it at {}",
        f.block.size,
        a.thread,
        place(&later),
        f.freed_by,
        place(&earlier)
    );
    let mut out = finding(FindingKind::UseAfterFree, message, vec![later, earlier]);
    out.details.push(allocation(env, &f.block));
    out
}

/// A second free of `f` by `t`, stopped at the free called from `site`.
pub(super) fn double_free(env: &mut Env<'_>, t: ThreadId, f: &FreedBlock) -> Finding {
    let later = env
        .reporter()
        .thread_report(t, "frees the block again (this free)".into());
    let earlier = first_free(env, f);
    let message = format!(
        "double free: thread T{t} at {} frees the heap block {:#x} ({} bytes) that thread T{} freed at {}",
        place(&later),
        f.block.start,
        f.block.size,
        f.freed_by,
        place(&earlier)
    );
    let mut out = finding(FindingKind::DoubleFree, message, vec![later, earlier]);
    out.details.push(allocation(env, &f.block));
    out.details.push(
        "mcheck skipped this free (the allocator would have aborted or corrupted its lists)".into(),
    );
    out
}

/// A free by `t` of `ptr`, inside the block `b` but not at its start; `freed` is the free
/// that put it in quarantine, when it is a freed block.
pub(super) fn invalid_free(
    env: &mut Env<'_>,
    t: ThreadId,
    ptr: u64,
    b: &HeapBlock,
    freed: Option<&FreedBlock>,
) -> Finding {
    let mut threads = vec![env
        .reporter()
        .thread_report(t, "frees a pointer into a block (this free)".into())];
    let state = match freed {
        Some(_) => "freed",
        None => "live",
    };
    let message = format!(
        "invalid free: thread T{t} at {} frees {ptr:#x}, {} byte(s) into the {state} heap block {:#x} ({} bytes), not a pointer the allocator returned",
        place(&threads[0]),
        ptr - b.start,
        b.start,
        b.size
    );
    if let Some(f) = freed {
        threads.push(first_free(env, f));
    }
    let mut out = finding(FindingKind::InvalidFree, message, threads);
    out.details.push(allocation(env, b));
    out.details
        .push("mcheck skipped this free (the allocator would have aborted)".into());
    out
}
