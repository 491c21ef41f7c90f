//! Which pages of a tracee were written since the last look, for hashing its state
//! incrementally (`--state-cache`). This kernel has no soft-dirty bits, so the tracee's
//! private writable mappings are registered with a userfaultfd in asynchronous
//! write-protect mode (`UFFD_FEATURE_WP_ASYNC`, Linux 6.7): a write to a protected page is
//! resolved by the kernel itself, which only clears the page's protection, and
//! `PAGEMAP_SCAN` on the tracee's pagemap reports the written pages and protects them again
//! in one call.
//!
//! A userfaultfd belongs to the memory of the process that creates it, so the tracee is
//! made to create it (one injected syscall); the tracer takes it over with `pidfd_getfd`
//! and closes the tracee's descriptor (a second one), leaving the program's descriptor
//! table as it was. Everything else (the handshake, registering ranges, scanning) is done
//! from the tracer. A fork copy of the tracee starts unregistered.
//!
//! The kernel also reports as written what it changes itself: writes through
//! `/proc/PID/mem`, syscalls writing user memory, and pages emptied by
//! `madvise(MADV_DONTNEED)`. A range mapped anew where a registered one was is not
//! registered: scanning it fails (`PM_SCAN_CHECK_WPASYNC`), and the caller hashes it whole.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::files::take_descriptor;
use super::pagemap::{Region, PAGE};
use super::threads::inject;
use super::Pid;

/// userfaultfd(2) flag: handle faults from user mode only (allowed without privilege).
const UFFD_USER_MODE_ONLY: u64 = 1;
/// `UFFD_API`: the userfaultfd API version.
const UFFD_API: u64 = 0xaa;
/// Writes to protected pages are resolved by the kernel, leaving a written mark.
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `_IOWR(0xAA, 0x3F, struct uffdio_api)` (24 bytes).
const UFFDIO_API: u64 = 0xc018_aa3f;
/// `_IOWR(0xAA, 0x00, struct uffdio_register)` (32 bytes).
const UFFDIO_REGISTER: u64 = 0xc020_aa00;
/// Register for write-protection.
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
/// `_IOWR('f', 16, struct pm_scan_arg)` (96 bytes).
const PAGEMAP_SCAN: u64 = 0xc060_6610;
/// Protect the matched pages again.
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
/// Fail on a page not registered for asynchronous write-protection.
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
/// The page was written since it was last protected.
const PAGE_IS_WRITTEN: u64 = 1 << 1;
/// Ranges returned by one scan call.
const SCAN_BATCH: usize = 256;

/// `struct uffdio_api`.
#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct uffdio_register`.
#[repr(C)]
struct UffdioRegister {
    start: u64,
    len: u64,
    mode: u64,
    ioctls: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `struct pm_scan_arg`.
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// Write tracking of one process's memory.
pub struct WriteTracker {
    uffd: OwnedFd,
    pagemap: File,
    /// Ranges registered, sorted by start.
    registered: Vec<Region>,
}

impl WriteTracker {
    /// Sets up write tracking for process `pid`, through its stopped thread `tid` (stopped
    /// anywhere but at a seccomp stop), whose code has a `syscall` instruction at
    /// `syscall_insn`. Fails when the kernel lacks asynchronous write-protection.
    pub fn attach(pid: Pid, tid: Pid, syscall_insn: u64) -> io::Result<WriteTracker> {
        let flags = (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
        let create = |flags: u64| {
            inject(
                tid,
                syscall_insn,
                libc::SYS_userfaultfd as u64,
                [flags, 0, 0, 0, 0, 0],
            )
            .map(|(fd, _)| fd)
            .map_err(|e| io::Error::other(e.to_string()))
        };
        let mut fd = create(flags)?;
        if fd == -(libc::EPERM as i64) {
            // vm.unprivileged_userfaultfd = 0 and no CAP_SYS_PTRACE: a descriptor limited to
            // faults from user mode is still allowed, and asynchronous write-protection
            // resolves the kernel's own writes without it.
            fd = create(flags | UFFD_USER_MODE_ONLY)?;
        }
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd as i32));
        }
        let taken = take_descriptor(pid, fd as i32);
        let closed = inject(
            tid,
            syscall_insn,
            libc::SYS_close as u64,
            [fd as u64, 0, 0, 0, 0, 0],
        );
        let uffd = taken?;
        closed.map_err(|e| io::Error::other(e.to_string()))?;
        let mut api = UffdioApi {
            api: UFFD_API,
            // Not UFFD_FEATURE_WP_UNPOPULATED: it would fill never-touched pages with
            // markers that pagemap shows as swapped. A page touched for the first time
            // comes without protection, which reads as written.
            features: UFFD_FEATURE_WP_ASYNC,
            ioctls: 0,
        };
        ioctl(uffd.as_raw_fd(), UFFDIO_API, &mut api)?;
        Ok(WriteTracker {
            uffd,
            pagemap: File::open(format!("/proc/{pid}/pagemap"))?,
            registered: Vec::new(),
        })
    }

    /// Whether every page of `region` is registered.
    pub fn covers(&self, region: Region) -> bool {
        covers(&self.registered, region)
    }

    /// Registers `region` for asynchronous write-protection. Its pages count as written
    /// until the next [`take_written`](Self::take_written) protects them.
    pub fn register(&mut self, region: Region) -> io::Result<()> {
        let mut reg = UffdioRegister {
            start: region.start,
            len: region.end - region.start,
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        ioctl(self.uffd.as_raw_fd(), UFFDIO_REGISTER, &mut reg)?;
        self.forget(region);
        let at = self.registered.partition_point(|r| r.start < region.start);
        self.registered.insert(at, region);
        Ok(())
    }

    /// Forgets registrations overlapping `region` (it was mapped anew).
    pub fn forget(&mut self, region: Region) {
        self.registered
            .retain(|r| r.end <= region.start || region.end <= r.start);
    }

    /// Keeps only the registrations within `current` (the mappings that still exist).
    pub fn retain_within(&mut self, current: &[Region]) {
        self.registered
            .retain(|r| current.iter().any(|c| c.start <= r.start && r.end <= c.end));
    }

    /// The pages of `region` written since they were last protected, as sorted page
    /// ranges; they are protected again. Fails when part of `region` is not registered.
    pub fn take_written(&self, region: Region) -> io::Result<Vec<Region>> {
        let mut out = Vec::new();
        let mut vec = [PageRegion::default(); SCAN_BATCH];
        let mut start = region.start;
        while start < region.end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
                start,
                end: region.end,
                walk_end: 0,
                vec: vec.as_mut_ptr() as u64,
                vec_len: SCAN_BATCH as u64,
                max_pages: 0,
                category_inverted: 0,
                category_mask: PAGE_IS_WRITTEN,
                category_anyof_mask: 0,
                return_mask: PAGE_IS_WRITTEN,
            };
            let n = ioctl(self.pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg)?;
            out.extend(vec[..n as usize].iter().map(|r| Region {
                start: r.start,
                end: r.end,
            }));
            if arg.walk_end <= start || arg.walk_end % PAGE != 0 {
                break;
            }
            start = arg.walk_end;
        }
        Ok(out)
    }
}

/// Whether the sorted ranges `registered` cover `region` (adjacent ones join).
fn covers(registered: &[Region], region: Region) -> bool {
    let mut at = region.start;
    for r in registered {
        if r.start <= at && at < r.end {
            at = r.end;
        }
    }
    at >= region.end
}

/// `ioctl(fd, request, arg)`, its non-negative result or the error.
fn ioctl<T>(fd: i32, request: u64, arg: &mut T) -> io::Result<i64> {
    // SAFETY: `arg` is a live, exclusively borrowed struct laid out as the kernel expects
    // for `request` (#[repr(C)] twins of the uapi structs); the kernel reads and writes
    // only within it, and within the buffer a PAGEMAP_SCAN argument points to.
    let r = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_joins_adjacent_registrations() {
        let r = |start, end| Region { start, end };
        let registered = [r(0x1000, 0x3000), r(0x3000, 0x5000)];
        assert!(covers(&registered, r(0x2000, 0x4000)));
        assert!(covers(&registered, r(0x1000, 0x5000)));
        assert!(!covers(&registered, r(0x4000, 0x6000)));
        assert!(!covers(&registered, r(0x0, 0x2000)));
    }
}
