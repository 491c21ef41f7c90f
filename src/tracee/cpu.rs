//! CPU pinning: the tracer thread and its tracee share one CPU, so every ptrace stop is a
//! same-CPU wakeup (3–4× cheaper than a cross-CPU one, see design.md §2). Which CPUs: the
//! least loaded of those mcheck may run on (its affinity mask, so `taskset` is respected),
//! so that parallel runs of mcheck spread over the machine instead of piling onto CPU 0.
//! The load of a CPU is the share of a short sample it was busy (`/proc/stat`) plus the
//! threads runnable on it at both ends of the sample (state R in `/proc/*/task/*/stat`):
//! on a saturated machine every CPU is busy all the time, and the queue tells them apart.
//! On an idle machine (no other runnable thread, a load average well below the CPUs) the
//! sample is skipped: any CPU will do, and every run of mcheck would otherwise wait for it.

use std::sync::OnceLock;
use std::time::Duration;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// How long the load of the CPUs is sampled (a few scheduler ticks).
const SAMPLE: Duration = Duration::from_millis(12);

/// Pins the calling thread to `cpu`. Children forked afterwards inherit the pinning.
pub fn pin_current_thread(cpu: usize) -> nix::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(0), &set)
}

/// The CPUs the calling thread may run on (its affinity mask), in number order.
pub fn allowed_cpus() -> Vec<usize> {
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => vec![0],
    }
}

/// `n` CPUs for `n` tracer threads, from the CPUs the caller may run on, least loaded first
/// (measured over [`SAMPLE`]); when there are fewer CPUs than `n`, they are reused in the
/// same order.
pub fn idlest_cpus(n: usize) -> Vec<usize> {
    let allowed = allowed_cpus();
    let ranked = if allowed.len() <= 1 {
        allowed
    } else {
        let before = cpu_times();
        let mut queued = runnable_threads();
        if queued.is_empty() && load_average() < 0.25 * allowed.len() as f64 {
            // Idle: no CPU is better than another.
            allowed
        } else {
            std::thread::sleep(SAMPLE);
            let after = cpu_times();
            queued.extend(runnable_threads());
            rank_by_load(&allowed, &before, &after, &queued)
        }
    };
    if ranked.is_empty() {
        return vec![0; n.max(1)];
    }
    (0..n.max(1)).map(|i| ranked[i % ranked.len()]).collect()
}

/// The one-minute load average (`/proc/loadavg`), or a large number when unknown.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::MAX)
}

/// Per-CPU (cpu, busy, total) jiffies from `/proc/stat`.
fn cpu_times() -> Vec<(usize, u64, u64)> {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return Vec::new();
    };
    parse_stat(&stat)
}

/// Parses the `cpuN` lines of `/proc/stat`: busy is everything but idle and iowait.
fn parse_stat(stat: &str) -> Vec<(usize, u64, u64)> {
    stat.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cpu")?;
            let (num, fields) = rest.split_once(' ')?;
            let cpu: usize = num.parse().ok()?;
            let v: Vec<u64> = fields
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal (guest is in user already).
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            Some((cpu, total.saturating_sub(idle), total))
        })
        .collect()
}

/// The CPU of every runnable thread of the machine but ours (state R), now.
fn runnable_threads() -> Vec<usize> {
    let me = std::process::id().to_string();
    let mut cpus = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return cpus;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Some(cpu) = std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|s| runnable_on(&s))
            {
                cpus.push(cpu);
            }
        }
    }
    cpus
}

/// The CPU a thread is runnable on, from its `stat` line (None when it is not runnable).
fn runnable_on(stat: &str) -> Option<usize> {
    let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state); field 39 is the CPU it last ran on.
    (rest.first() == Some(&"R")).then_some(())?;
    rest.get(36)?.parse().ok()
}

/// `allowed` ordered by load, least first: the share of time each was busy between the two
/// samples plus half the runnable threads counted on it over both (`queued`); ties (and
/// CPUs without figures) keep their number order.
fn rank_by_load(
    allowed: &[usize],
    before: &[(usize, u64, u64)],
    after: &[(usize, u64, u64)],
    queued: &[usize],
) -> Vec<usize> {
    let load = |cpu: usize| -> f64 {
        let find = |s: &[(usize, u64, u64)]| s.iter().find(|e| e.0 == cpu).copied();
        let busy = match (find(before), find(after)) {
            (Some((_, b0, t0)), Some((_, b1, t1))) if t1 > t0 => {
                b1.saturating_sub(b0) as f64 / (t1 - t0) as f64
            }
            _ => 0.0,
        };
        busy + queued.iter().filter(|&&c| c == cpu).count() as f64 / 2.0
    };
    let mut ranked: Vec<(usize, f64)> = allowed.iter().map(|&c| (c, load(c))).collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    ranked.into_iter().map(|(c, _)| c).collect()
}

/// The CPUs mcheck was started on, noted before any pinning.
static AT_START: OnceLock<Vec<usize>> = OnceLock::new();

/// Notes the CPUs mcheck may run on, before it pins any thread: what the programs are shown.
pub fn note_at_start() {
    let _ = AT_START.get_or_init(allowed_cpus);
}

/// The CPUs mcheck was started on (noted now if [`note_at_start`] was not called). Pinning
/// makes the tracee run where its tracer runs, but the program is shown these
/// (sched_getaffinity is answered with them): a program that sizes its pool of threads by
/// the CPUs it may use creates as many threads as it would without mcheck.
pub fn at_start() -> Vec<usize> {
    AT_START.get_or_init(allowed_cpus).clone()
}

/// How the kernel lays out CPU masks in sched_getaffinity(2): the shortest buffer it
/// accepts and the bytes it copies out of a long enough one (both multiples of 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskLayout {
    /// Shorter buffers get EINVAL (they cannot hold CPU `nr_cpu_ids - 1`).
    pub min_len: u64,
    /// The kernel's cpumask size: bytes written when the buffer is at least that long.
    pub copied: u64,
}

/// This kernel's layout, probed once with sched_getaffinity on mcheck itself.
pub fn mask_layout() -> MaskLayout {
    static LAYOUT: OnceLock<MaskLayout> = OnceLock::new();
    *LAYOUT.get_or_init(|| {
        let mut buf = vec![0u8; 8192];
        let call = |buf: &mut [u8], len: usize| {
            // SAFETY: the kernel writes at most `len` bytes into `buf`, which holds `len`.
            unsafe { libc::syscall(libc::SYS_sched_getaffinity, 0, len, buf.as_mut_ptr()) }
        };
        let copied = call(&mut buf, 8192).max(8) as u64;
        let min_len = (8..=copied)
            .step_by(8)
            .find(|&len| call(&mut buf, len as usize) > 0)
            .unwrap_or(copied);
        MaskLayout { min_len, copied }
    })
}

/// What sched_getaffinity(2) with a buffer of `len` bytes returns for a thread allowed on
/// `cpus`: the bytes to copy out (their number is the call's result), or an errno, as the
/// kernel does it.
pub fn affinity_answer(cpus: &[usize], len: u64, layout: MaskLayout) -> Result<Vec<u8>, i32> {
    if len < layout.min_len || len % 8 != 0 {
        return Err(libc::EINVAL);
    }
    let mut mask = vec![0u8; len.min(layout.copied) as usize];
    for &cpu in cpus {
        if let Some(byte) = mask.get_mut(cpu / 8) {
            *byte |= 1 << (cpu % 8);
        }
    }
    Ok(mask)
}

/// The CPUs a thread may use after sched_setaffinity(2) with the `mask` it passed, when it
/// was allowed on `allowed`: the kernel reads at most its mask size and keeps the CPUs the
/// thread may use at all; none of them is EINVAL.
pub fn affinity_set(allowed: &[usize], mask: &[u8], layout: MaskLayout) -> Result<Vec<usize>, i32> {
    let bytes = &mask[..mask.len().min(layout.copied as usize)];
    let kept: Vec<usize> = (allowed.iter().copied())
        .filter(|&c| bytes.get(c / 8).is_some_and(|b| b & (1 << (c % 8)) != 0))
        .collect();
    if kept.is_empty() {
        return Err(libc::EINVAL);
    }
    Ok(kept)
}

/// Number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_busy_allowed_cpus_come_first() {
        let before = parse_stat(
            "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 100 0 0 100 0 0 0 0 0 0\ncpu1 0 0 0 200 0 0 0 0 0 0\ncpu2 50 0 0 150 0 0 0 0 0 0\ncpu3 0 0 0 200 0 0 0 0 0 0\nintr 5\n",
        );
        // Over the sample: cpu0 fully busy, cpu1 idle, cpu2 half busy, cpu3 idle.
        let after = parse_stat(
            "cpu0 200 0 0 100 0 0 0 0 0 0\ncpu1 0 0 0 300 0 0 0 0 0 0\ncpu2 100 0 0 200 0 0 0 0 0 0\ncpu3 0 0 0 300 0 0 0 0 0 0\n",
        );
        assert_eq!(before.len(), 4, "the aggregate line is not a CPU");
        assert_eq!(
            rank_by_load(&[0, 1, 2, 3], &before, &after, &[]),
            vec![1, 3, 2, 0]
        );
        // Only the allowed ones (taskset), still by load.
        assert_eq!(rank_by_load(&[0, 2], &before, &after, &[]), vec![2, 0]);
        // Saturated CPUs are told apart by their queues.
        let full = parse_stat("cpu0 100 0 0 0 0 0 0 0\ncpu1 100 0 0 0 0 0 0 0\n");
        let fuller = parse_stat("cpu0 200 0 0 0 0 0 0 0\ncpu1 200 0 0 0 0 0 0 0\n");
        assert_eq!(
            rank_by_load(&[0, 1], &full, &fuller, &[0, 0, 1, 0]),
            vec![1, 0]
        );
    }

    #[test]
    fn runnable_threads_are_read_from_stat() {
        let stat = "42 (a b) R 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 1000 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(runnable_on(stat), Some(1));
        assert_eq!(runnable_on(&stat.replace(") R ", ") S ")), None);
        let _ = runnable_threads();
    }

    #[test]
    fn affinity_answers_follow_the_kernel() {
        let layout = MaskLayout {
            min_len: 8,
            copied: 16,
        };
        assert_eq!(
            affinity_answer(&[0, 1, 9], 8, layout),
            Ok(vec![0b11, 0b10, 0, 0, 0, 0, 0, 0])
        );
        // A longer buffer gets the kernel's mask size; a short or odd one EINVAL.
        assert_eq!(affinity_answer(&[3], 128, layout).map(|m| m.len()), Ok(16));
        assert_eq!(affinity_answer(&[3], 4, layout), Err(libc::EINVAL));
        assert_eq!(affinity_answer(&[3], 12, layout), Err(libc::EINVAL));
        // The probed layout agrees with nix's view of this process.
        let real = mask_layout();
        assert!(real.min_len >= 8 && real.min_len <= real.copied, "{real:?}");
        let mask = affinity_answer(&allowed_cpus(), real.copied, real).unwrap();
        let set: Vec<usize> = (0..mask.len() * 8)
            .filter(|c| mask[c / 8] & (1 << (c % 8)) != 0)
            .collect();
        assert_eq!(set, allowed_cpus());
    }

    #[test]
    fn affinity_set_keeps_the_allowed_cpus_asked_for() {
        let layout = MaskLayout {
            min_len: 8,
            copied: 8,
        };
        assert_eq!(
            affinity_set(&[0, 1, 2, 3], &[0b0110], layout),
            Ok(vec![1, 2])
        );
        // CPUs it may not use are dropped; none left is EINVAL; bytes past the kernel's
        // mask size are not read.
        assert_eq!(affinity_set(&[0, 1], &[0b0110], layout), Ok(vec![1]));
        assert_eq!(affinity_set(&[0], &[0b0110], layout), Err(libc::EINVAL));
        let mut long = vec![0u8; 16];
        long[9] = 1;
        assert_eq!(affinity_set(&[72], &long, layout), Err(libc::EINVAL));
    }

    #[test]
    fn workers_get_allowed_cpus() {
        let allowed = allowed_cpus();
        let chosen = idlest_cpus(3);
        assert_eq!(chosen.len(), 3);
        assert!(chosen.iter().all(|c| allowed.contains(c)), "{chosen:?}");
    }
}
