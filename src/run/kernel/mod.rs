//! The kernel as a source of blocking: system calls decoded (what each waits for), the
//! threads waiting in the kernel and when they may go on, the system calls the model
//! needs, and timeouts as choices.

pub(super) mod kernel_calls;
pub(super) mod kernel_waits;
pub(super) mod syscalls;
pub(super) mod timeouts;
