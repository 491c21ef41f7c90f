//! The program's world: what makes its executions deterministic (clocks, randomness,
//! auxv), its files (the file-system gate and the journal that undoes changes), and its
//! standard streams (stdin, stdout sinks, the captured stderr).

pub(super) mod capture;
pub(super) mod determinism;
pub(super) mod file_journal;
pub(super) mod fs_gate;
pub mod program_stdio;

/// The program and how it is started.
#[derive(Clone, Debug)]
pub struct ProgramSetup {
    /// The program (absolute path).
    pub path: std::path::PathBuf,
    /// Its arguments (argv[1..]).
    pub args: Vec<std::ffi::OsString>,
    /// Its environment (mcheck adds `GLIBC_TUNABLES=glibc.pthread.rseq=0`).
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// Hide the program's stdout and stderr.
    pub quiet: bool,
    /// The kinds of stdin and stdout the program gets (`program_stdio`; None: mcheck's
    /// own, or /dev/null for a hidden stdout).
    pub stdio: Option<program_stdio::StdioKinds>,
    /// The signals ignored and blocked when the program starts (`tracee/signals.rs`).
    pub signals: crate::tracee::signals::SignalSetup,
    /// Trap rdtsc/rdtscp (only needed when the program's own code reads the counter; the
    /// trap makes every ptrace stop dearer on VMs).
    pub trap_rdtsc: bool,
}
