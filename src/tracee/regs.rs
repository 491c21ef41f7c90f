//! Registers of a stopped thread: the general-purpose set through PTRACE_GETREGS/SETREGS.

use nix::sys::ptrace;
use nix::unistd::Pid;

/// The x86-64 general-purpose register file as the kernel exposes it.
pub type Regs = libc::user_regs_struct;

/// Reads the registers of a stopped thread.
pub fn get(tid: Pid) -> nix::Result<Regs> {
    ptrace::getregs(tid)
}

/// Writes the registers of a stopped thread.
pub fn set(tid: Pid, regs: Regs) -> nix::Result<()> {
    ptrace::setregs(tid, regs)
}

/// Reads the x87/SSE registers of a stopped thread (PTRACE_GETFPREGS).
pub fn get_fp(tid: Pid) -> nix::Result<libc::user_fpregs_struct> {
    ptrace::getregset::<ptrace::regset::NT_PRFPREG>(tid)
}

/// The first six integer arguments of a function call (System V ABI), at function entry.
pub fn call_args(r: &Regs) -> [u64; 6] {
    [r.rdi, r.rsi, r.rdx, r.rcx, r.r8, r.r9]
}

/// The six arguments of a syscall at a seccomp stop.
pub fn syscall_args(r: &Regs) -> [u64; 6] {
    [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9]
}
