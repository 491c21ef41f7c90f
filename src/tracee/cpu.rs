//! CPU pinning: the tracer thread and its tracee share one CPU, so every ptrace stop is a
//! same-CPU wakeup (3–4× cheaper than a cross-CPU one, see design.md §2).

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// Pins the calling thread to one CPU it is allowed to run on, preferring `preferred`, and
/// returns that CPU. Children forked afterwards inherit the pinning.
pub fn pin_current_thread(preferred: Option<usize>) -> nix::Result<usize> {
    let allowed = sched_getaffinity(Pid::from_raw(0))?;
    let usable: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    let current = current_cpu();
    let cpu = preferred
        .filter(|c| usable.contains(c))
        .or(current.filter(|c| usable.contains(c)))
        .or(usable.first().copied())
        .unwrap_or(0);
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(0), &set)?;
    Ok(cpu)
}

/// The CPU the calling thread runs on now, if the kernel says.
fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions and only returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
