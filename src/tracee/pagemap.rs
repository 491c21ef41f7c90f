//! The writable memory of a tracee, page by page, for hashing its state: the private
//! writable mappings (`/proc/PID/maps`) and which of their pages are present
//! (`/proc/PID/pagemap`). Pages never touched are not present and read as zeros, so they
//! need not be read at all.
//!
//! Which pages changed since the last look comes from `write_tracking` (this kernel has no
//! soft-dirty bits).

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;

use nix::unistd::Pid;

/// The page size of x86-64 Linux.
pub const PAGE: u64 = 4096;

const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
/// The swap type (low 5 bits of a swapped entry) the kernel uses for PTE markers: an empty
/// page that keeps its userfaultfd write-protection (`tracee::write_tracking`) after
/// `madvise(MADV_DONTNEED)`. Such a page holds nothing.
const PTE_MARKER_SWAP_TYPE: u64 = 31;
const SWAP_TYPE_MASK: u64 = 0x1f;
/// The page is file-backed: the page cache's own page (not a private copy).
const FILE_PAGE: u64 = 1 << 61;

/// One private writable mapping: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
}

/// The private writable mappings of `pid` (program data, heap, stacks, anonymous memory),
/// without the kernel's `[vvar]`/`[vsyscall]` pages.
pub fn writable_regions(pid: Pid) -> io::Result<Vec<Region>> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(maps.lines().filter_map(parse_writable).collect())
}

fn parse_writable(line: &str) -> Option<Region> {
    let mut parts = line.split_whitespace();
    let (a, b) = parts.next()?.split_once('-')?;
    let perms = parts.next()?.as_bytes();
    if perms.len() < 4 || perms[1] != b'w' || perms[3] != b'p' {
        return None;
    }
    let name = parts.nth(3).unwrap_or("");
    if name == "[vvar]" || name == "[vsyscall]" || name == "[vvar_vclock]" {
        return None;
    }
    Some(Region {
        start: u64::from_str_radix(a, 16).ok()?,
        end: u64::from_str_radix(b, 16).ok()?,
    })
}

/// The pagemap of one process, open for repeated lookups.
pub struct Pagemap {
    file: File,
}

impl Pagemap {
    /// Opens `/proc/PID/pagemap`.
    pub fn open(pid: Pid) -> io::Result<Pagemap> {
        Ok(Pagemap {
            file: File::open(format!("/proc/{pid}/pagemap"))?,
        })
    }

    /// For every page of `region`, whether it holds data (present in memory or swapped).
    pub fn present(&self, region: Region) -> io::Result<Vec<bool>> {
        Ok(self.present_and_file(region)?.0)
    }

    /// For every page of `region`, whether it holds data, and whether it is present and
    /// still the page cache's page of a file (a private file mapping not written yet): such
    /// a page shows what the file holds, which can change without any write through it.
    pub fn present_and_file(&self, region: Region) -> io::Result<(Vec<bool>, Vec<bool>)> {
        let entries = self.entries(region)?;
        let present = entries
            .iter()
            .map(|&e| {
                e & PRESENT != 0 || (e & SWAPPED != 0 && e & SWAP_TYPE_MASK != PTE_MARKER_SWAP_TYPE)
            })
            .collect();
        let file = entries
            .iter()
            .map(|&e| e & PRESENT != 0 && e & FILE_PAGE != 0)
            .collect();
        Ok((present, file))
    }

    fn entries(&self, region: Region) -> io::Result<Vec<u64>> {
        let pages = ((region.end - region.start) / PAGE) as usize;
        let mut raw = vec![0u8; pages * 8];
        self.file.read_exact_at(&mut raw, region.start / PAGE * 8)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_private_mappings_are_kept() {
        let r = parse_writable("7ffff7e00000-7ffff7e02000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(r.end - r.start, 2 * PAGE);
        assert!(parse_writable("555555554000-555555555000 r-xp 00000000 08:01 1 /bin/x").is_none());
        assert!(
            parse_writable("7f0000000000-7f0000001000 rw-s 00000000 00:01 42 /dev/zero").is_none()
        );
        assert!(parse_writable("7ffff7fc1000-7ffff7fc5000 rw-p 00000000 00:00 0 [vvar]").is_none());
    }

    #[test]
    fn our_own_touched_pages_are_present() {
        let v = vec![1u8; 3 * PAGE as usize];
        let start = (v.as_ptr() as u64).div_ceil(PAGE) * PAGE;
        let map = Pagemap::open(Pid::this()).unwrap();
        let p = map
            .present(Region {
                start,
                end: start + PAGE,
            })
            .unwrap();
        assert_eq!(p, vec![true]);
        assert!(writable_regions(Pid::this())
            .unwrap()
            .iter()
            .any(|r| r.start <= start && start < r.end));
    }
}
