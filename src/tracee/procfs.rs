//! What `/proc` tells about a tracee that a fork copy would share with it or lose: shared
//! writable mappings, memory that is wiped or not copied on fork, pipes and sockets (open
//! files are put back per copy by [`super::files`]).

use std::fs;

use nix::unistd::Pid;

/// The first thing found in `pid` that makes a fork copy differ from a fresh execution at
/// the same point, described for the user; None when a copy is faithful. Descriptors in
/// `inherited` (what the program was started with, as [`descriptors`] gave them) are left
/// to the user, like the standard streams. The mappings are judged through `mappings`.
pub fn fork_hazard(
    pid: Pid,
    inherited: &[(i32, String)],
    mappings: &mut MappingVerdicts,
) -> Option<String> {
    if let Some(h) = descriptor_hazard(pid, inherited) {
        return Some(h);
    }
    mappings.hazard(pid)
}

/// The last verdict on a process's mappings, kept while they stay the same. A mapping's
/// fork flags (wiped, not copied) are read from `/proc/PID/smaps`, which walks every page
/// table (four times the cost of `maps`, and a tenth of a search that takes branch
/// snapshots often); they change without a change to `/proc/PID/maps` only by madvise of
/// whole mappings, which the seccomp filter traps (`seccomp::FORK_ADVICE`) and the tracer
/// reports here ([`MappingVerdicts::fork_advice_seen`]). Otherwise equal `maps` texts have
/// equal verdicts, in any process of the worker: fork copies inherit the flags.
#[derive(Debug, Default)]
pub struct MappingVerdicts {
    /// Fork-flag madvise calls seen so far: a verdict from before one is stale.
    epoch: u64,
    /// (epoch, `maps` text, verdict) of the last smaps read.
    last: Option<(u64, String, Option<String>)>,
}

impl MappingVerdicts {
    /// A traced thread called madvise with a fork flag: no verdict so far holds.
    pub fn fork_advice_seen(&mut self) {
        self.epoch += 1;
    }

    /// What in `pid`'s mappings a fork copy would share or lose, as [`mapping_hazard`].
    pub fn hazard(&mut self, pid: Pid) -> Option<String> {
        let maps = fs::read_to_string(format!("/proc/{pid}/maps")).ok();
        if let (Some(text), Some((epoch, last, verdict))) = (&maps, &self.last) {
            if *epoch == self.epoch && text == last {
                return verdict.clone();
            }
        }
        let verdict = mapping_hazard(pid);
        self.last = maps.map(|text| (self.epoch, text, verdict.clone()));
        verdict
    }
}

/// What descriptor `fd` of `pid` refers to (for messages), `?` when unknown.
pub fn descriptor_target(pid: Pid, fd: i32) -> String {
    fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "?".into())
}

/// The regular files `pid` has open, as (device, inode).
pub fn open_file_ids(pid: Pid) -> std::collections::HashSet<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Default::default();
    };
    dir.filter_map(|e| fs::metadata(e.ok()?.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// The open descriptors of `pid` with what they refer to.
pub fn descriptors(pid: Pid) -> Vec<(i32, String)> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let fd: i32 = e.file_name().to_str()?.parse().ok()?;
        let target = fs::read_link(e.path()).ok()?;
        Some((fd, target.to_string_lossy().into_owned()))
    })
    .collect()
}

fn descriptor_hazard(pid: Pid, inherited: &[(i32, String)]) -> Option<String> {
    let mut fds = descriptors(pid);
    fds.sort();
    // The standard streams as the program was started are the user's; one it replaced with
    // a pipe of its own is shared like any other.
    fds.into_iter()
        .filter(|d| !inherited.contains(d))
        .find(|(_, target)| !target.starts_with('/'))
        .map(|(fd, target)| {
            format!(
                "file descriptor {fd} ({target}), opened before the first thread, would be shared by every fork copy"
            )
        })
}

fn mapping_hazard(pid: Pid) -> Option<String> {
    let smaps = fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut header = "";
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            let flags: Vec<&str> = flags.split_whitespace().collect();
            let what = if flags.contains(&"wf") {
                Some("is wiped on fork (MADV_WIPEONFORK)")
            } else if flags.contains(&"dc") {
                Some("is not copied on fork (MADV_DONTFORK)")
            } else {
                None
            };
            if let Some(what) = what {
                return Some(format!("the mapping {} {what}", describe_mapping(header)));
            }
        } else if is_mapping_header(line) {
            header = line;
            let perms = line.split_whitespace().nth(1).unwrap_or("");
            let writable_shared =
                perms.as_bytes().get(1) == Some(&b'w') && perms.as_bytes().get(3) == Some(&b's');
            // mcheck's own access log is shared on purpose: copies reset and reuse it.
            if writable_shared && !line.contains(ACCESS_LOG_NAME) {
                return Some(format!(
                    "the writable MAP_SHARED mapping {} would be shared by every fork copy",
                    describe_mapping(line)
                ));
            }
        }
    }
    None
}

/// A smaps mapping header starts with an address range (`start-end perms ...`).
fn is_mapping_header(line: &str) -> bool {
    line.split_whitespace()
        .next()
        .and_then(|range| range.split_once('-'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && a.bytes().all(|c| c.is_ascii_hexdigit())
                && b.bytes().all(|c| c.is_ascii_hexdigit())
        })
}

fn describe_mapping(header: &str) -> String {
    let mut parts = header.split_whitespace();
    let range = parts.next().unwrap_or("?");
    let name = parts.nth(4).unwrap_or("");
    if name.is_empty() {
        format!("at {range}")
    } else {
        format!("{name} at {range}")
    }
}

/// The name mcheck's access log shows in the maps of a tracee (a memfd).
pub const ACCESS_LOG_NAME: &str = "/memfd:mcheck-access-log";

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// `rwxp`-style permissions.
    pub perms: String,
    /// The file or pseudo-name (`[heap]`, `[stack]`...), empty for anonymous memory.
    pub name: String,
}

impl Mapping {
    /// Whether the mapping is executable.
    pub fn executable(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }
}

/// The mappings of `pid`, in address order.
pub fn mappings(pid: Pid) -> std::io::Result<Vec<Mapping>> {
    let text = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(text.lines().filter_map(parse_mapping).collect())
}

fn parse_mapping(line: &str) -> Option<Mapping> {
    let mut parts = line.splitn(6, char::is_whitespace);
    let (a, b) = parts.next()?.split_once('-')?;
    let perms = parts.next()?.to_string();
    let name = parts.nth(3).unwrap_or("").trim().to_string();
    Some(Mapping {
        start: u64::from_str_radix(a, 16).ok()?,
        end: u64::from_str_radix(b, 16).ok()?,
        perms,
        name,
    })
}

/// Resident memory of `pid` in bytes (VmRSS), 0 when unknown.
pub fn resident_bytes(pid: Pid) -> u64 {
    // statm's second field is the sum status calls VmRSS, without the rest of status
    // (signal masks, CPU lists) that the kernel formats on every read.
    fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * super::pagemap::PAGE)
}

/// The value in bytes of a "Key:  N kB" line of a /proc file (status, meminfo,
/// smaps_rollup), None when the file or the line is missing.
pub fn kib_field(path: &str, key: &str) -> Option<u64> {
    fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// Proportional resident memory of `pid` in bytes (Pss of smaps_rollup: shared pages count
/// divided among the processes sharing them), 0 when unknown.
pub fn proportional_bytes(pid: Pid) -> u64 {
    kib_field(&format!("/proc/{pid}/smaps_rollup"), "Pss:").unwrap_or(0)
}

/// Signals pending in the kernel for thread `tid` of `pid` (not yet delivered: blocked, or
/// the thread is stopped): (directed at the thread, directed at the process), as masks with
/// bit n-1 for signal n. A fork copy does not inherit them.
pub fn pending_signals(pid: Pid, tid: Pid) -> (u64, u64) {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")) else {
        return (0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (field("SigPnd:"), field("ShdPnd:"))
}

/// The signal state of thread `tid` of `pid`: signals pending for the thread, pending for
/// the process, and blocked by the thread (masks, bit n-1 for signal n).
pub fn signal_state(pid: Pid, tid: Pid) -> (u64, u64, u64) {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")) else {
        return (0, 0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (field("SigPnd:"), field("ShdPnd:"), field("SigBlk:"))
}

/// The parent of process `pid` (the real one, not its tracer), if it is there.
pub fn parent_of(pid: Pid) -> Option<Pid> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (in parentheses): state, ppid...
    let rest = stat.rsplit_once(')')?.1;
    let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some(Pid::from_raw(ppid))
}

/// The child processes of every thread of `pid`, each with whether it has ended (a zombie
/// its parent can wait for).
pub fn children(pid: Pid) -> Vec<(Pid, bool)> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let Ok(list) = fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        for child in list
            .split_whitespace()
            .filter_map(|c| c.parse::<i32>().ok())
        {
            let stat = fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // The state follows the command name, which is in parentheses.
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            let ended = state.is_none_or(|s| s.starts_with('Z') || s.starts_with('X'));
            out.push((Pid::from_raw(child), ended));
        }
    }
    out
}

/// The open-file flags of descriptor `fd` of `pid` (O_WRONLY, O_NONBLOCK...), from fdinfo.
pub fn descriptor_flags(pid: Pid, fd: i32) -> Option<i32> {
    let info = fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
    i32::from_str_radix(flags.trim(), 8).ok()
}

/// The descriptors an epoll descriptor `fd` of `pid` watches (its fdinfo `tfd:` lines).
pub fn epoll_targets(pid: Pid, fd: i32) -> Vec<i32> {
    let info = fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
    info.lines()
        .filter_map(|l| l.trim_start().strip_prefix("tfd:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Sends the signals of `mask` (bit n-1 for signal n) to thread `tid` of `pid`, or to the
/// whole process when `tid` is None. Queued real-time signals arrive once each.
pub fn send_signals(pid: Pid, tid: Option<Pid>, mask: u64) {
    for n in 1..=64 {
        if mask & (1 << (n - 1)) == 0 {
            continue;
        }
        match tid {
            // SAFETY: tgkill takes three integers and touches no memory of ours.
            Some(t) => unsafe {
                libc::syscall(libc::SYS_tgkill, pid.as_raw(), t.as_raw(), n);
            },
            // SAFETY: kill takes two integers and touches no memory of ours.
            None => unsafe {
                libc::kill(pid.as_raw(), n);
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_bytes_agree_with_the_status_files_vm_rss() {
        // A process whose memory does not move while it is read: a sleeping one.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        std::thread::sleep(std::time::Duration::from_millis(100));
        let status = kib_field(&format!("/proc/{pid}/status"), "VmRSS:");
        let statm = resident_bytes(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert!(statm > 0);
        assert_eq!(Some(statm), status);
    }

    #[test]
    fn mapping_headers_are_told_from_smaps_fields() {
        assert!(is_mapping_header(
            "7f0000000000-7f0000001000 rw-s 00000000 00:01 42 /dev/zero (deleted)"
        ));
        assert!(!is_mapping_header("Rss:                   4 kB"));
        assert!(!is_mapping_header("VmFlags: rd wr mr mw me ac sd"));
    }

    #[test]
    fn wipe_on_fork_memory_is_a_hazard() {
        // SAFETY: a fresh private anonymous mapping of one page, advised and unmapped here;
        // no Rust object lives in it.
        unsafe {
            let page = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(page, libc::MAP_FAILED);
            assert_eq!(libc::madvise(page, 4096, libc::MADV_WIPEONFORK), 0);
            let h = mapping_hazard(Pid::this());
            libc::munmap(page, 4096);
            assert!(h.is_some_and(|h| h.contains("WIPEONFORK")));
        }
    }
}
