//! mcheck's exit statuses, the same for every command.

/// Exit status: nothing found.
pub const EXIT_CLEAN: i32 = 0;
/// Exit status: findings.
pub const EXIT_FINDINGS: i32 = 1;
/// Exit status: bad usage or bad input.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: internal failure.
pub const EXIT_INTERNAL: i32 = 3;
