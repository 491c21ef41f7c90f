//! Trampoline chunks in the tracee: mapping one where the patch planner chose it (through
//! an injected `mmap` that must not replace anything), unmapping it again, and sharing the
//! pages written so far with every fork copy of the process.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;

use anyhow::{bail, Context, Result};

use crate::model::ThreadId;
use crate::patch::space::CHUNK;
use crate::run::process::Process;
use crate::tracee::descriptors::take_descriptor;
use crate::tracee::pagemap::PAGE;
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

/// Moves the trampoline chunks `spans` (sealed in the planner's space: never written again)
/// into a memfd mapped over them, shared and read-only, through thread `t` (stopped out of
/// any system call, stack pointer `rsp`; the memfd's name goes below its red zone). Only
/// `pages` (sorted) hold trampolines; the rest of the spans stays holes of the file. A fork
/// then shares them instead of copying their page tables: trampolines lie scattered over
/// hundreds of 2 MiB stretches (where the windows of punned jumps fall), and each fork copy
/// of an OpenMP program (libgomp's and libc's thousands of sites) copied 1.5 MiB of page
/// tables for them, two fifths of its system time.
pub(super) fn share_chunks(
    p: &Process,
    t: ThreadId,
    rsp: u64,
    spans: &[Range<u64>],
    pages: &[u64],
) -> Result<()> {
    let total: u64 = spans.iter().map(|r| r.end - r.start).sum();
    if total == 0 {
        return Ok(());
    }
    let tid = p.threads[t].tid;
    let call = |nr: i64, args: [u64; 6], what: &str| -> Result<u64> {
        let (got, _) =
            inject(tid, p.syscall_insn, nr as u64, args).context("sharing trampolines")?;
        if got < 0 {
            let e = std::io::Error::from_raw_os_error(-got as i32);
            bail!("sharing trampolines: {what} failed: {e}");
        }
        Ok(got as u64)
    };
    let name_at = (rsp - PAGE) & !15;
    p.mem
        .write(name_at, b"mcheck-trampolines\0")
        .context("naming the trampolines' memfd")?;
    let fd = call(
        libc::SYS_memfd_create,
        [name_at, libc::MFD_CLOEXEC as u64, 0, 0, 0, 0],
        "memfd_create",
    )?;
    let shared = (|| -> Result<()> {
        call(libc::SYS_ftruncate, [fd, total, 0, 0, 0, 0], "ftruncate")?;
        let file =
            File::from(take_descriptor(p.pid, fd as i32).context("taking the trampolines' memfd")?);
        let mut offset = 0;
        let mut buf = Vec::new();
        for r in spans {
            // Runs of consecutive pages, each read and written at once.
            let inside = &pages
                [pages.partition_point(|&a| a < r.start)..pages.partition_point(|&a| a < r.end)];
            let mut i = 0;
            while i < inside.len() {
                let mut j = i + 1;
                while j < inside.len() && inside[j] == inside[j - 1] + PAGE {
                    j += 1;
                }
                buf.resize(((j - i) as u64 * PAGE) as usize, 0);
                p.mem
                    .read(inside[i], &mut buf)
                    .context("reading trampolines")?;
                file.write_all_at(&buf, offset + inside[i] - r.start)
                    .context("copying trampolines")?;
                i = j;
            }
            offset += r.end - r.start;
        }
        const PROT: u64 = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        const FLAGS: u64 = (libc::MAP_SHARED | libc::MAP_FIXED) as u64;
        let mut offset = 0;
        for r in spans {
            let len = r.end - r.start;
            let at = call(
                libc::SYS_mmap,
                [r.start, len, PROT, FLAGS, fd, offset],
                "mmap",
            )?;
            if at != r.start {
                bail!(
                    "sharing trampolines: mmap put them at {at:#x}, not {:#x}",
                    r.start
                );
            }
            offset += len;
        }
        Ok(())
    })();
    call(libc::SYS_close, [fd, 0, 0, 0, 0, 0], "close")?;
    shared
}
