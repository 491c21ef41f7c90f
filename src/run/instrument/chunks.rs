//! Trampoline chunks in the tracee: mapping one where the patch planner chose it (through
//! an injected `mmap` that must not replace anything), and unmapping it again.

use anyhow::{Context, Result};

use crate::model::ThreadId;
use crate::patch::space::CHUNK;
use crate::run::process::Process;
use crate::tracee::threads::inject;

/// Maps one trampoline chunk at `chunk` in the tracee (through `t`); false when another
/// mapping is there.
pub(super) fn map_chunk(p: &Process, t: ThreadId, chunk: u64) -> Result<bool> {
    let tid = p.threads[t].tid;
    const PROT: u64 = (libc::PROT_READ | libc::PROT_EXEC) as u64;
    const FLAGS: u64 =
        (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE) as u64 | 0x10_0000; // MAP_FIXED_NOREPLACE
    let args = [chunk, CHUNK, PROT, FLAGS, u64::MAX, 0];
    let (got, _) =
        inject(tid, p.syscall_insn, libc::SYS_mmap as u64, args).context("mapping trampolines")?;
    if got as u64 == chunk {
        return Ok(true);
    }
    if got >= 0 {
        unmap_chunk(p, t, got as u64)?;
    }
    Ok(false)
}

/// Unmaps the trampoline chunk at `chunk` in the tracee (through `t`).
pub(super) fn unmap_chunk(p: &Process, t: ThreadId, chunk: u64) -> Result<()> {
    let args = [chunk, CHUNK, 0, 0, 0, 0];
    inject(
        p.threads[t].tid,
        p.syscall_insn,
        libc::SYS_munmap as u64,
        args,
    )
    .context("unmapping trampolines")?;
    Ok(())
}
