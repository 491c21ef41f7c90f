//! What a worker keeps from one execution to the next: symbols, the instrumentation plans of
//! the files it has seen, the addresses learnt to hold atomics, and the addresses found racy
//! (which `--preempt-on-races` turns into scheduling points) and the reads of what timeouts
//! set (timeout polls, points too), the fork snapshots and the
//! stderr pipe its executions share, and the search's file gate and journal.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::instrument::plan::PlanCache;
use super::process::cut::CutSignal;
use super::process::stacks::Symbols;
use super::snapshots::snapshot::Snapshots;
use super::world::capture::OutputCapture;
use super::world::file_journal::FileJournal;
use super::world::fs_gate::{FsGate, FsPass};

/// What `--preempt-on-races` makes scheduling points of in an execution: accesses to the
/// addresses found racy, at the instructions found racing (whose sites therefore keep a
/// breakpoint instead of recording without a stop).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RacyPoints {
    /// Addresses found racy.
    pub addresses: Vec<u64>,
    /// Instructions found in a race.
    pub sites: Vec<u64>,
    /// Instructions found reading what a timeout sets (`races::timeout_polls`): points
    /// while some wait may time out early, whatever `--preempt-on-races` says.
    pub poll_sites: Vec<u64>,
    /// Atomic loads found to be a busy wait's (a thread spun there with no scheduling
    /// point while another could run): yield points once threads exist.
    pub spin_sites: Vec<u64>,
}

impl RacyPoints {
    /// Only the points learnt whatever `--preempt-on-races` says: timeout polls and busy
    /// waits.
    pub fn learnt_only(self) -> RacyPoints {
        RacyPoints {
            poll_sites: self.poll_sites,
            spin_sites: self.spin_sites,
            ..RacyPoints::default()
        }
    }

    /// Whether it holds points learnt whatever `--preempt-on-races` says.
    pub fn has_learnt(&self) -> bool {
        !self.poll_sites.is_empty() || !self.spin_sites.is_empty()
    }
}

/// A worker's memory across executions.
#[derive(Default)]
pub struct WorkerState {
    /// Symbolization state of the program image being looked at (`symbols_image`).
    pub symbols: Symbols,
    /// The executable `symbols` belongs to (empty before the first execution).
    pub symbols_image: std::path::PathBuf,
    /// Symbolization states of the other program images the process tree ran.
    pub image_symbols: std::collections::HashMap<std::path::PathBuf, Symbols>,
    /// Instrumentation plans by file.
    pub plans: PlanCache,
    /// Instrumentations of a first thread creation, done again by later executions that
    /// reach it in the same state.
    pub(in crate::run) recording_memos: super::instrument::memo::RecordingMemos,
    /// Addresses accessed by atomic instructions in some execution.
    pub atomic_addresses: super::races::atomic_addresses::AtomicAddresses,
    /// Addresses found racy in some execution.
    pub racy_addresses: HashSet<u64>,
    /// Instructions found in a race in some execution (their sites stay breakpoints under
    /// `--preempt-on-races`, so that an access can become a scheduling point).
    pub racy_sites: HashSet<u64>,
    /// Atomic locations a thread wrote after its wait timed out (`races::timeout_polls`).
    pub timeout_signals: HashSet<u64>,
    /// Instructions found reading them (their sites stay breakpoints, so that a timeout
    /// can fire right before one).
    pub poll_sites: HashSet<u64>,
    /// Atomic loads found to be a busy wait's (their sites stay breakpoints and yield).
    pub spin_sites: HashSet<u64>,
    /// The fork snapshots of the program (templates kept stopped).
    pub snapshots: Snapshots,
    /// The last verdict on the mappings of a process about to be copied by fork.
    pub mapping_verdicts: crate::tracee::procfs::MappingVerdicts,
    /// The executions' stderr (one pipe for all, since templates keep it open).
    pub stderr_capture: Option<OutputCapture>,
    /// The executions' stdout, when a search shows it once and it is a pipe, terminal or
    /// socket (one for all, as stderr's); None when it goes where `outputs` says.
    pub stdout_capture: Option<OutputCapture>,
    /// Which of the worker's executions show the program's output.
    pub shown_output: ShownOutput,
    /// The next executions run a schedule again to learn something (stacks, atomics):
    /// their stdout and stderr are not shown.
    pub quiet_rerun: bool,
    /// Raised when the search must stop now: the running execution is cut short.
    pub cut: CutSignal,
    /// Shared by the search's workers: one worker at a time changes files.
    pub fs_gate: FsGate,
    /// The right to change files, once an execution of this worker needed it. Kept while
    /// the worker runs: its fork snapshots may hold files it changed half-way.
    pub fs_pass: Option<FsPass>,
    /// Shared by the search's workers: the program's file changes, undone between
    /// executions (None for a single replay, which changes files as the program does).
    pub journal: Option<Arc<Mutex<FileJournal>>>,
    /// Accesses repeated within the stretch being drained (`repeat_filter`).
    pub repeats: super::races::repeat_filter::RepeatFilter,
    /// Where the program's stdout goes when it is not mcheck's own (`program_stdio`).
    pub outputs: super::world::program_stdio::OutputSinks,
    /// What the worker keeps for a debugger watching its executions.
    pub debugger: DebuggerState,
}

/// What a worker keeps for a debugger watching its executions (`mcheck replay --gdb`).
#[derive(Default)]
pub struct DebuggerState {
    /// The debugger, if any.
    pub hook: Option<super::debug_port::DebugHook>,
    /// The debugger may take fork snapshots of its executions at scheduling points.
    pub snapshots: bool,
    /// The next execution starts from this copy of one of the debugger's snapshots.
    pub(super) start: Option<super::snapshots::snapshot::Restored>,
    /// The descriptors the debugger's program was started with (left to the user, as the
    /// standard streams: not a reason against a snapshot).
    pub inherited: Vec<(i32, String)>,
    /// The atomic addresses known when each of the debugger's snapshots was taken, by depth.
    pub atomics: std::collections::HashMap<usize, super::races::atomic_addresses::AtomicAddresses>,
}

/// Which executions show the program's stdout and stderr. Executions run again only to
/// learn something (`quiet_rerun`) never do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShownOutput {
    /// Every execution (a replay).
    #[default]
    Every,
    /// The next execution, and then none: a search shows its first execution's output.
    Next,
    /// None.
    Hidden,
}

impl WorkerState {
    /// Makes `symbols` those of the program image `exe` (a process tree runs several:
    /// the program, the programs it execs).
    pub fn switch_symbols(&mut self, exe: &std::path::Path) {
        if self.symbols_image == exe {
            return;
        }
        let incoming = self.image_symbols.remove(exe).unwrap_or_default();
        let outgoing = std::mem::replace(&mut self.symbols, incoming);
        let previous = std::mem::replace(&mut self.symbols_image, exe.to_path_buf());
        if !previous.as_os_str().is_empty() {
            self.image_symbols.insert(previous, outgoing);
        }
    }

    /// Whether the next execution's output is shown.
    pub fn shows_output(&self) -> bool {
        !self.quiet_rerun && self.shown_output != ShownOutput::Hidden
    }

    /// The racy points known now.
    pub fn racy_points(&self) -> RacyPoints {
        let mut p = RacyPoints {
            addresses: self.racy_addresses.iter().copied().collect(),
            sites: self.racy_sites.iter().copied().collect(),
            poll_sites: self.poll_sites.iter().copied().collect(),
            spin_sites: self.spin_sites.iter().copied().collect(),
        };
        p.addresses.sort_unstable();
        p.sites.sort_unstable();
        p.poll_sites.sort_unstable();
        p.spin_sites.sort_unstable();
        p
    }

    /// Makes `points` the racy points, returning those known before.
    pub fn replace_racy_points(&mut self, points: &RacyPoints) -> RacyPoints {
        let before = self.racy_points();
        self.racy_addresses = points.addresses.iter().copied().collect();
        self.racy_sites = points.sites.iter().copied().collect();
        self.poll_sites = points.poll_sites.iter().copied().collect();
        self.spin_sites = points.spin_sites.iter().copied().collect();
        before
    }

    /// How many learnt points (racy sites and addresses with `preempt_on_races`, timeout
    /// polls always) an execution uses: they only grow, so the count names the set a
    /// branch snapshot was made with.
    pub fn racy_points_in_use(&self, preempt_on_races: bool) -> usize {
        let polls = self.poll_sites.len() + self.spin_sites.len();
        if preempt_on_races {
            self.racy_sites.len() + self.racy_addresses.len() + polls
        } else {
            polls
        }
    }

    /// Whether an access of `size` bytes at `ea` covers an address found racy: byte-exact,
    /// as dependency is, so that both accesses of a race become points even when the
    /// race's address is not where one of them starts (a word read at X racing with a
    /// write of its upper half is reported at X + 4).
    pub fn covers_racy_address(&self, ea: u64, size: u64) -> bool {
        (0..size.max(1)).any(|i| self.racy_addresses.contains(&ea.wrapping_add(i)))
    }

    /// Adds `points` to the racy points.
    pub fn add_racy_points(&mut self, points: &RacyPoints) {
        self.racy_addresses.extend(points.addresses.iter().copied());
        self.racy_sites.extend(points.sites.iter().copied());
        self.poll_sites.extend(points.poll_sites.iter().copied());
        self.spin_sites.extend(points.spin_sites.iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_covering_a_racy_address_is_a_point_wherever_it_starts() {
        let mut w = WorkerState::default();
        w.racy_addresses.insert(0x1004);
        assert!(w.covers_racy_address(0x1004, 4));
        assert!(
            w.covers_racy_address(0x1000, 8),
            "a word read over the racy half"
        );
        assert!(
            w.covers_racy_address(0x1003, 2),
            "a misaligned access over it"
        );
        assert!(
            !w.covers_racy_address(0x1000, 4),
            "the other half of the word"
        );
        assert!(!w.covers_racy_address(0x1005, 1));
        assert!(
            w.covers_racy_address(0x1004, 0),
            "an access of unknown size at it"
        );
    }
}
