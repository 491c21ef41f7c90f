//! Processes of the program that mcheck did not check, or not to their end, as the summary
//! names them: a search that met one may not call its space exhausted nor the program clean.

/// A process of the program that mcheck did not check, or not to its end: the search may
/// not call a space exhausted nor a program clean while one ran (pid-free, so that the
/// executions of a search agree on it).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct UntracedProcess {
    /// The executable it ran.
    pub program: String,
    /// Why it was not checked.
    pub why: &'static str,
}

/// Why a process that shares its creator's memory was not checked.
pub const SHARED_MEMORY: &str = "it shared its creator's memory without being one of its threads (vfork, or clone with CLONE_VM), or was created by such a process, and it never exec'd: it ran natively";

/// Why a process killed at the program's end was checked only in part.
pub const KILLED_AT_END: &str = "it still waited for something from outside the program when the program ended, and was killed there: the rest of its run was not checked";

impl std::fmt::Display for UntracedProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "process {} ran untraced: {}", self.program, self.why)
    }
}
