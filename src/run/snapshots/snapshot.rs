//! Fork snapshots at the program's first thread creation (Holt, "The One Page Model
//! Checker"): the first fresh execution of a worker forks a *template* of the process just
//! before its first `clone` of a thread, together with the tracer's state of that moment.
//! Every later execution forks a copy of the template instead of exec'ing the program again,
//! so the dynamic loader, the program's initialisation and the instrumentation are paid once.
//!
//! The single-threaded start is the same in every execution (there is nothing to schedule),
//! so starting from a copy gives the same execution as starting from exec:
//! - the copy's memory is the template's, breakpoints included; the tracer-side state (model,
//!   race detector, clocks, decisions so far) is cloned from the moment of the fork;
//! - the strategy is shown the decisions of the skipped start again (each had one choice);
//! - glibc's cached thread id (`struct pthread`'s `tid`, at a fixed offset from the thread
//!   pointer) is patched to the copy's pid. Patching was chosen over virtualising `gettid`
//!   (every tid-taking syscall would need translating) and over pid namespaces (copies of one
//!   template live in one namespace, so they cannot all get the template's pid).
//!
//! A copy shares with its template what fork shares: open file descriptions and MAP_SHARED
//! memory. The offsets (and ends) of the files open at the snapshot are put back before
//! every copy runs ([`FileStates`]); when the program has something that cannot be put back
//! (a pipe, a socket, shared memory: see [`crate::tracee::procfs::fork_hazard`]), snapshots
//! are turned off for the search and the reason is said once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use nix::unistd::Pid;

use super::memory_guard;
use super::point_log::PointLog;
use super::state_hash;
use crate::model::{Model, ThreadId};
use crate::report::ThreadReport;
use crate::run::process::{Process, StopPlace};
use crate::run::races::PendingReturn;
use crate::tracee::files::FileStates;
use crate::tracee::fork::{discard, fork_stopped, ForkFrom};
use crate::tracee::memory::Memory;
use crate::tracee::procfs;
use crate::tracee::regs::Regs;
use crate::tracee::threads::{self, ThreadImage};

/// glibc 2.26+ on x86-64 keeps `struct pthread`'s `tid` here, relative to the thread pointer.
const GLIBC_TID_OFFSET: u64 = 0x2d0;
/// How far into the thread control block a cached tid is looked for (glibc's `struct
/// pthread` is about 0x900 bytes and ends the mapping it lives in).
const TCB_SCAN: usize = 0x800;
/// Points kept for snapshots at most (a longer prefix is not snapshotted).
pub(in crate::run) const MAX_PREFIX_POINTS: usize = 100_000;
/// Branch snapshots kept alive at most per worker.
const MAX_BRANCHES: usize = 8;

/// The tracer-side state of an execution at the snapshot point.
#[derive(Clone)]
pub(in crate::run) struct SavedExecution {
    pub model: Model,
    pub races: crate::run::races::RaceRecording,
    pub returns: HashMap<u64, Vec<PendingReturn>>,
    pub code: crate::run::instrument::code::CodeEdits,
    pub instr: crate::run::instrument::Instrumentation,
    pub panic: Option<ThreadReport>,
    pub history: crate::run::history::History,
    pub world: crate::run::world::World,
    /// The step in progress (what the running thread has touched so far).
    pub step: crate::run::step_state::StepState,
    pub kernel: crate::run::kernel::kernel_waits::KernelWaits,
    /// The race recordings of the images the process replaced by exec before the snapshot.
    pub retired_races: Vec<crate::run::races::RaceRecording>,
    /// The lock-order graph so far.
    pub locks: crate::run::locks::LockRecording,
    /// The program's output so far, where a copy's output starts.
    pub output: crate::run::world::capture::OutputStarts,
}

/// What a restored execution starts from.
pub(in crate::run) struct Restored {
    /// The copy's record (its threads stopped as the snapshot's were).
    pub process: Process,
    /// A startup copy: the main thread must first be resumed to its clone (a branch copy
    /// is at a scheduling point, ready for the next choice).
    pub resume_main: bool,
    /// The tracer-side state.
    pub state: SavedExecution,
    /// The points of the start, to show the strategy.
    pub prefix: PointLog,
    /// Write tracking set up in the copy (`--state-cache`), with its template's page terms.
    pub memory: Option<state_hash::CopyTracking>,
    /// A branch copy's open files, whose kept bytes must be put back again once the file
    /// journal has put the program's files back as at the startup snapshot.
    pub files: Option<std::sync::Arc<FileStates>>,
}

/// A template process stopped just before the program's first thread creation.
pub(in crate::run) struct StartupSnapshot {
    pub template: Pid,
    /// Registers the main thread resumes with: at the `syscall` of the clone, to run it, or
    /// at `main`.
    pub regs: Regs,
    /// A `syscall` instruction of the program (injections into copies).
    pub syscall_insn: u64,
    /// Where glibc caches the main thread's tid.
    pub tid_addr: u64,
    pub process: Process,
    pub state: SavedExecution,
    /// The main thread's robust futex list (fork does not copy it).
    pub robust: Option<(u64, u64)>,
    pub prefix: PointLog,
    /// The files open at the snapshot (shared with every copy), put back before each copy.
    pub files: FileStates,
    /// The template's page terms for incremental hashing, from its first tracked copy.
    pub terms: state_hash::TemplateTerms,
    /// Signals pending in the kernel when it was taken (fork drops them).
    pub pending: PendingSignals,
    /// The descriptors the program was started with (the user's, not hazards).
    pub inherited: Vec<(i32, String)>,
}

/// Signals pending in the kernel, which a fork copy does not inherit: per thread, and for
/// the whole process.
#[derive(Debug, Clone, Default)]
pub(in crate::run) struct PendingSignals {
    pub threads: Vec<(ThreadId, u64)>,
    pub process: u64,
}

impl PendingSignals {
    /// The pending signals of the live threads `threads` (logical id, tid) of `pid`.
    pub fn capture(pid: Pid, threads: &[(ThreadId, Pid)]) -> PendingSignals {
        let mut p = PendingSignals::default();
        for &(t, tid) in threads {
            let (own, shared) = procfs::pending_signals(pid, tid);
            p.process |= shared;
            if own != 0 {
                p.threads.push((t, own));
            }
        }
        p
    }

    /// Sends them again in a copy whose threads are `tids` (logical id, tid).
    pub fn resend(&self, copy: Pid, tids: &[(ThreadId, Pid)]) {
        for &(t, mask) in &self.threads {
            if let Some(&(_, tid)) = tids.iter().find(|(u, _)| *u == t) {
                procfs::send_signals(copy, Some(tid), mask);
            }
        }
        if self.process != 0 {
            procfs::send_signals(copy, None, self.process);
        }
    }
}

impl Drop for StartupSnapshot {
    fn drop(&mut self) {
        memory_guard::forget_template(self.template);
        discard(self.template);
    }
}

/// A worker's snapshots, by execution configuration.
#[derive(Default)]
pub struct Snapshots {
    startup: HashMap<String, StartupSnapshot>,
    /// Snapshots at branch points of the current tree path, shallowest first.
    branches: Vec<BranchSnapshot>,
    refused: HashMap<String, String>,
    /// Configurations whose program created no thread in an execution.
    threadless: std::collections::HashSet<String>,
    /// Executions started from a snapshot.
    pub restored: u64,
    /// Of those, executions started from a branch snapshot.
    pub restored_branch: u64,
    /// Branch snapshots taken.
    pub branches_taken: u64,
    /// Why copies of branch snapshots could not be rebuilt (each execution then started
    /// from the startup snapshot).
    pub branch_failures: Vec<String>,
    /// No more branch snapshots (dropped under memory pressure).
    branches_off: bool,
}

/// Said once per mcheck run.
static SAID: AtomicBool = AtomicBool::new(false);

impl Snapshots {
    /// Whether the first thread creation of an execution under `key` should be snapshotted.
    pub(in crate::run) fn wanted(&self, key: &str) -> bool {
        !self.startup.contains_key(key) && !self.refused.contains_key(key)
    }

    /// Whether an execution under `key` created no thread (its snapshot then goes at main).
    pub(in crate::run) fn threadless(&self, key: &str) -> bool {
        self.threadless.contains(key)
    }

    /// Notes that an execution under `key` created no thread.
    pub(in crate::run) fn mark_threadless(&mut self, key: &str) {
        self.threadless.insert(key.to_string());
    }

    /// Turns snapshots off for `key`, saying why once.
    pub(in crate::run) fn refuse(&mut self, key: &str, why: String) {
        self.startup.remove(key);
        if !SAID.swap(true, Ordering::SeqCst) {
            eprintln!("mcheck: note: fork snapshots are off for this program: {why}; every execution starts from exec");
        }
        self.refused.insert(key.to_string(), why);
    }

    /// A copy of the snapshot for `key`, ready to run, if there is one.
    /// With `track`, the copy's writes are tracked from its start (`--state-cache`).
    pub(in crate::run) fn fork_startup(
        &mut self,
        key: &str,
        track: bool,
    ) -> Result<Option<Restored>> {
        let Some(s) = self.startup.get(key) else {
            return Ok(None);
        };
        if let Err(why) = s.files.restore() {
            self.refuse(key, why);
            return Ok(None);
        }
        let copy = fork_stopped(
            s.template,
            ForkFrom::Stop {
                syscall_insn: s.syscall_insn,
            },
            &s.regs,
        )
        .context("forking the snapshot template")?;
        let restored = (|| -> Result<Restored> {
            let memory = track
                .then(|| state_hash::track_copy(copy, s.syscall_insn, &s.terms))
                .flatten();
            let mut process = s.process.copy_with(copy, &[(0, copy)])?;
            process.mem.write_u32(s.tid_addr, copy.as_raw() as u32)?;
            if let Some((head, len)) = s.robust {
                // The copy's main thread holds `s.regs`, at the syscall instruction.
                threads::inject_at(
                    copy,
                    &s.regs,
                    s.syscall_insn,
                    SYS_SET_ROBUST_LIST,
                    [head, len, 0, 0, 0, 0],
                )?;
            }
            process.threads[0].regs = s.regs;
            process.threads[0].place = StopPlace::Event;
            s.pending.resend(copy, &[(0, copy)]);
            Ok(Restored {
                process,
                resume_main: true,
                state: s.state.clone(),
                prefix: s.prefix.clone(),
                memory,
                files: None,
            })
        })();
        match restored {
            Ok(r) => {
                self.restored += 1;
                Ok(Some(r))
            }
            Err(e) => {
                discard(copy);
                Err(e.context("preparing a copy of the snapshot"))
            }
        }
    }

    /// Stores a new startup snapshot.
    pub(in crate::run) fn store(&mut self, key: &str, snapshot: StartupSnapshot) {
        memory_guard::register_template(snapshot.template);
        self.startup.insert(key.to_string(), snapshot);
    }

    /// Whether branch snapshots may be taken (not after [`Snapshots::shed_branches`]).
    pub(in crate::run) fn branches_allowed(&self) -> bool {
        !self.branches_off
    }

    /// Drops every branch snapshot and takes no more (under memory pressure; executions
    /// then replay their prefix from the startup snapshot).
    pub fn shed_branches(&mut self) {
        self.branches_off = true;
        self.branches.clear();
    }

    /// Why snapshots were turned off for some configuration, if they were.
    pub fn refusal(&self) -> Option<&str> {
        self.refused.values().next().map(String::as_str)
    }

    /// Resident memory of the live templates, in bytes.
    pub fn resident_bytes(&self) -> u64 {
        self.startup
            .values()
            .map(|s| s.template)
            .chain(self.branches.iter().map(|b| b.template))
            .map(procfs::resident_bytes)
            .sum()
    }

    /// The descriptors the program of `key`'s startup snapshot was started with.
    pub(in crate::run) fn inherited(&self, key: &str) -> &[(i32, String)] {
        self.startup.get(key).map_or(&[], |s| &s.inherited)
    }

    /// The cached-tid offset from the thread pointer, known from the startup snapshot.
    pub(in crate::run) fn tid_offset(&self, key: &str) -> Option<u64> {
        let s = self.startup.get(key)?;
        Some(s.tid_addr - s.regs.fs_base)
    }

    /// Drops the branch snapshots a tree search will not come back to: those not on the
    /// path of the execution about to run (`planned`, its replayed choices), or made before
    /// more atomics were known, or with other racy points (another refinement round of the
    /// tree: its decisions mean other steps).
    pub(in crate::run) fn prune_branches(
        &mut self,
        key: &str,
        planned: &[ThreadId],
        atomics: usize,
        racy: usize,
    ) {
        self.branches.retain(|b| {
            b.key == key
                && planned.starts_with(&b.choices)
                && b.atomics_known == atomics
                && b.racy_known == racy
        });
    }

    /// Depth (decisions) of the deepest branch snapshot on the path `choices`.
    pub(in crate::run) fn deepest_branch_on(&self, key: &str, choices: &[ThreadId]) -> usize {
        self.deepest_on(key, choices).map_or(0, |b| b.choices.len())
    }

    /// The deepest branch snapshot of configuration `key` on the path `choices`.
    fn deepest_on(&self, key: &str, choices: &[ThreadId]) -> Option<&BranchSnapshot> {
        self.branches
            .iter()
            .filter(|b| b.key == key && choices.starts_with(&b.choices))
            .max_by_key(|b| b.choices.len())
    }

    /// A running copy of the deepest branch snapshot on `planned`, if any.
    pub(in crate::run) fn fork_branch(
        &mut self,
        key: &str,
        planned: &[ThreadId],
        track: bool,
    ) -> Result<Option<Restored>> {
        let Some(b) = self.deepest_on(key, planned) else {
            return Ok(None);
        };
        let (forked, depth) = (b.fork(track), b.choices.len());
        match forked {
            Ok(r) => {
                self.restored += 1;
                self.restored_branch += 1;
                Ok(Some(r))
            }
            Err(e) => {
                // The copy is gone; the execution starts from the startup snapshot instead
                // (same result, more replay). The template may be what failed: drop it.
                self.branch_failures.push(format!("{e:#}"));
                self.branches.retain(|b| b.choices.len() != depth);
                Ok(None)
            }
        }
    }

    /// Keeps a new branch snapshot (in place of one at the same point); evicts others to
    /// stay within `budget` bytes and [`MAX_BRANCHES`], keeping the deepest and spacing the
    /// rest out (the one whose neighbours are closest goes first). True when it is kept.
    pub(in crate::run) fn add_branch(&mut self, b: BranchSnapshot, budget: u64) -> bool {
        if self.branches_off {
            return false;
        }
        memory_guard::register_template(b.template);
        self.branches
            .retain(|old| old.key != b.key || old.choices != b.choices);
        let (key, choices) = (b.key.clone(), b.choices.clone());
        self.branches.push(b);
        self.branches_taken += 1;
        self.branches.sort_by_key(|b| b.choices.len());
        loop {
            let over_count = self.branches.len() > MAX_BRANCHES;
            let over_memory = self.branches.len() > 1 && self.resident_bytes() > budget;
            if !over_count && !over_memory {
                break;
            }
            let depths: Vec<usize> = self.branches.iter().map(|b| b.choices.len()).collect();
            self.branches.remove(eviction_victim(&depths));
        }
        self.branches
            .iter()
            .any(|b| b.key == key && b.choices == choices)
    }

    /// The depths (decisions before them) of the branch snapshots of configuration `key`.
    pub fn branch_depths(&self, key: &str) -> Vec<usize> {
        (self.branches.iter())
            .filter(|b| b.key == key)
            .map(|b| b.choices.len())
            .collect()
    }

    /// A running copy of the branch snapshot of `key` taken after exactly `depth`
    /// decisions (a debugger's way back), if there is one.
    pub(in crate::run) fn fork_branch_at(
        &mut self,
        key: &str,
        depth: usize,
    ) -> Result<Option<Restored>> {
        let Some(b) = (self.branches.iter()).find(|b| b.key == key && b.choices.len() == depth)
        else {
            return Ok(None);
        };
        let r = b.fork(false)?;
        self.restored += 1;
        self.restored_branch += 1;
        Ok(Some(r))
    }
}

/// Where the C library caches thread `tid`'s id, given its thread pointer: glibc's offset
/// when it holds the tid, else the only word of the control block that does.
pub(in crate::run) fn cached_tid_address(mem: &Memory, fs_base: u64, tid: Pid) -> Option<u64> {
    if fs_base == 0 {
        return None;
    }
    let mut block = vec![0u8; TCB_SCAN];
    let mut len = TCB_SCAN;
    while mem.read(fs_base, &mut block[..len]).is_err() {
        len /= 2;
        if len < 0x40 {
            return None;
        }
    }
    block.truncate(len);
    let want = (tid.as_raw() as u32).to_le_bytes();
    let hits: Vec<u64> = (0..len - 3)
        .step_by(4)
        .filter(|&i| block[i..i + 4] == want)
        .map(|i| i as u64)
        .collect();
    if hits.contains(&GLIBC_TID_OFFSET) {
        return Some(fs_base + GLIBC_TID_OFFSET);
    }
    match hits.as_slice() {
        [only] => Some(fs_base + only),
        _ => None,
    }
}

/// Which of the snapshots at `depths` (sorted, at least two) to evict: never the deepest
/// (the next executions start there); else the one whose neighbours are closest, so that
/// the survivors stay spread out along the path, denser near its end, as with rr's
/// exponentially spaced checkpoints.
fn eviction_victim(depths: &[usize]) -> usize {
    (0..depths.len() - 1)
        .min_by_key(|&i| {
            let before = if i == 0 { 0 } else { depths[i - 1] };
            depths[i + 1] - before
        })
        .unwrap_or(0)
}

/// What a recreated thread needs besides its image.
#[derive(Clone)]
pub(in crate::run) struct CopiedThread {
    /// Logical id.
    pub id: ThreadId,
    /// Registers, extended state, mask... (registers set to re-run the syscall when
    /// `at_syscall`).
    pub image: ThreadImage,
    /// Stopped at a seccomp stop: re-entered in the copy.
    pub at_syscall: bool,
}

/// A template of the whole process at a scheduling point of a tree search: its main
/// thread was forked, the others are kept as images and recreated in every copy.
pub(in crate::run) struct BranchSnapshot {
    pub key: String,
    /// The decisions before the point.
    pub choices: Vec<ThreadId>,
    pub template: Pid,
    pub syscall_insn: u64,
    pub tid_offset: u64,
    /// The main thread: registers the template holds, whether it re-enters a seccomp stop,
    /// its robust list and thread pointer.
    pub leader_regs: Regs,
    pub leader_at_syscall: bool,
    pub leader_robust: Option<(u64, u64)>,
    pub others: Vec<CopiedThread>,
    /// The tracer's record of the threads as they were stopped (tids to be replaced).
    pub process: Process,
    pub state: SavedExecution,
    pub prefix: PointLog,
    /// Atomic addresses known when it was taken (more make the race state stale).
    pub atomics_known: usize,
    /// Racy points in use when it was made ([`super::WorkerState::racy_points_in_use`]).
    pub racy_known: usize,
    /// The template's page terms for incremental hashing, from its first tracked copy.
    pub terms: state_hash::TemplateTerms,
    /// Signals pending in the kernel when it was taken (fork drops them).
    pub pending: PendingSignals,
    /// The files open when it was taken, put back before each copy (with the bytes of
    /// those open for writing, put back again after the file journal's restore).
    pub files: std::sync::Arc<FileStates>,
}

impl Drop for BranchSnapshot {
    fn drop(&mut self) {
        memory_guard::forget_template(self.template);
        discard(self.template);
    }
}

impl BranchSnapshot {
    /// Forks a copy and rebuilds every thread in it; with `track`, its writes are tracked
    /// from its start.
    fn fork(&self, track: bool) -> Result<Restored> {
        self.files.restore().map_err(anyhow::Error::msg)?;
        let insn = self.syscall_insn;
        let copy = fork_stopped(
            self.template,
            ForkFrom::Stop { syscall_insn: insn },
            &self.leader_regs,
        )
        .context("forking a branch snapshot")?;
        let memory = track
            .then(|| state_hash::track_copy(copy, insn, &self.terms))
            .flatten();
        match self.rebuild(copy, memory) {
            Ok(r) => Ok(r),
            Err(e) => {
                discard_group(copy);
                Err(e.context("rebuilding the threads of a branch snapshot copy"))
            }
        }
    }

    fn rebuild(&self, copy: Pid, memory: Option<state_hash::CopyTracking>) -> Result<Restored> {
        let insn = self.syscall_insn;
        if let Some((head, len)) = self.leader_robust {
            threads::inject(copy, insn, SYS_SET_ROBUST_LIST, [head, len, 0, 0, 0, 0])
                .context("restoring the main thread's robust list")?;
        }
        let mut tids = vec![(0, copy)];
        for t in &self.others {
            let tid = threads::recreate(copy, insn, &t.image)
                .with_context(|| format!("recreating thread T{}", t.id))?;
            tids.push((t.id, tid));
        }
        let mem = Memory::open(copy)?;
        mem.write_u32(
            self.leader_regs.fs_base + self.tid_offset,
            copy.as_raw() as u32,
        )?;
        for (t, &(_, tid)) in self.others.iter().zip(&tids[1..]) {
            mem.write_u32(t.image.regs.fs_base + self.tid_offset, tid.as_raw() as u32)?;
            if t.at_syscall {
                threads::enter_seccomp_stop(tid)
                    .with_context(|| format!("putting T{} back into its syscall", t.id))?;
            }
        }
        if self.leader_at_syscall {
            threads::enter_seccomp_stop(copy).context("putting T0 back into its syscall")?;
        }
        let process = self.process.copy_with(copy, &tids)?;
        self.pending.resend(copy, &tids);
        Ok(Restored {
            process,
            resume_main: false,
            state: self.state.clone(),
            prefix: self.prefix.clone(),
            memory,
            files: Some(self.files.clone()),
        })
    }
}

const SYS_SET_ROBUST_LIST: u64 = 273;

/// Throws away a copy that will not run (its files could not be made what it expects).
pub(in crate::run) fn discard_copy(r: Restored) {
    discard_group(r.process.pid);
}

/// Kills a copy with several threads and reaps them all (no execution is running).
fn discard_group(pid: Pid) {
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    for _ in 0..10_000 {
        if nix::sys::signal::kill(pid, None).is_err() {
            return;
        }
        match crate::tracee::events::wait(None) {
            Ok(crate::tracee::WaitOutcome::Event(p, _)) => {
                let _ = crate::tracee::events::resume(p, None);
            }
            Ok(crate::tracee::WaitOutcome::NoChildren) | Err(_) => return,
            Ok(crate::tracee::WaitOutcome::Interrupted) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::eviction_victim;

    #[test]
    fn eviction_keeps_the_deepest_and_spreads_the_rest() {
        // Evenly spaced: the first one whose removal leaves the smallest gap goes.
        assert_eq!(eviction_victim(&[48, 96, 144, 192]), 0);
        // A snapshot crowded by its neighbours goes first.
        assert_eq!(eviction_victim(&[48, 400, 410, 420, 900]), 2);
        // With two, the shallower one goes; the deepest always stays.
        assert_eq!(eviction_victim(&[100, 5000]), 0);
        // Repeated eviction from a dense path keeps the end and a spread of the rest.
        let mut depths: Vec<usize> = (1..=32).map(|i| i * 48).collect();
        while depths.len() > 6 {
            depths.remove(eviction_victim(&depths));
        }
        assert_eq!(*depths.last().unwrap(), 32 * 48);
        let gaps: Vec<usize> = depths.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g >= 48 * 4), "{depths:?}");
    }
}
