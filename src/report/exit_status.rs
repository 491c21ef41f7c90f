//! mcheck's exit statuses, the same for every command.

/// Exit status: nothing found.
pub const EXIT_CLEAN: i32 = 0;
/// Exit status: findings.
pub const EXIT_FINDINGS: i32 = 1;
/// Exit status of a search (`mcheck -- PROGRAM`): nothing found, but no execution ran to
/// the program's end (each was cut at --max-steps, by the search's stop, or while a thread
/// waited on the kernel), so "nothing found" would claim more than was checked.
pub const EXIT_INCONCLUSIVE: i32 = 4;
/// Exit status: bad usage or bad input.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: internal failure.
pub const EXIT_INTERNAL: i32 = 3;
