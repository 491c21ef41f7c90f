//! Recreating a multi-threaded process in a fork copy (design.md §2). fork copies only the
//! calling thread, so every other thread of the original is captured as a [`ThreadImage`]
//! and made again in the copy by a `clone(CLONE_VM|…|CLONE_THREAD)` the copy's main thread
//! is made to run, with the original's stack and thread pointer; the new thread then gets
//! the original's registers, extended (FPU/SSE/AVX) state, signal mask, robust futex list,
//! alternate signal stack and name.
//!
//! Syscalls are injected into a stopped thread by pointing it at a `syscall` instruction
//! and single-stepping it across (through the seccomp stop, when the call is trapped).

use std::fs;

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::unistd::Pid;

use super::events::Event;
use super::fork::{expect, go_expect, wait_for, ForkError, Go};
use super::regs::{self, Regs};

const NT_X86_XSTATE: libc::c_int = 0x202;
const PTRACE_GETSIGMASK: libc::c_uint = 0x420a;
const PTRACE_SETSIGMASK: libc::c_uint = 0x420b;
/// Big enough for the x86 extended state with AVX-512 (about 2.7 KiB) and AMX tiles.
const XSTATE_MAX: usize = 16 * 1024;

const SYS_CLONE: u64 = 56;
const SYS_SIGALTSTACK: u64 = 131;
const SYS_SET_ROBUST_LIST: u64 = 273;
const SYS_PRCTL: u64 = 157;
const PR_SET_NAME: u64 = 15;
const THREAD_FLAGS: u64 = libc::CLONE_VM as u64
    | libc::CLONE_FS as u64
    | libc::CLONE_FILES as u64
    | libc::CLONE_SIGHAND as u64
    | libc::CLONE_THREAD as u64
    | libc::CLONE_SYSVSEM as u64
    | libc::CLONE_SETTLS as u64
    | libc::CLONE_CHILD_CLEARTID as u64;

/// Everything of one thread a fork copy must be given back.
#[derive(Clone, Debug)]
pub struct ThreadImage {
    /// General-purpose registers (fs_base included).
    pub regs: Regs,
    /// The XSAVE area (NT_X86_XSTATE).
    pub xstate: Vec<u8>,
    /// Blocked signals.
    pub sigmask: u64,
    /// The robust futex list (head, length), when one is registered.
    pub robust: Option<(u64, u64)>,
    /// The alternate signal stack (`stack_t` bytes), when one is set.
    pub altstack: Option<[u8; 24]>,
    /// The thread's name (comm).
    pub name: Option<String>,
    /// clear_child_tid (the word the kernel clears and wakes at exit).
    pub clear_tid: u64,
}

/// Captures stopped thread `tid` of process `pid`, whose registers are `regs`.
pub fn capture(
    pid: Pid,
    tid: Pid,
    regs: Regs,
    altstack: Option<[u8; 24]>,
    clear_tid: u64,
) -> Result<ThreadImage, ForkError> {
    Ok(ThreadImage {
        regs,
        xstate: get_xstate(tid)?,
        sigmask: get_sigmask(tid)?,
        robust: robust_list(tid),
        altstack,
        name: fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
            .ok()
            .map(|s| s.trim_end().to_string()),
        clear_tid,
    })
}

/// The robust futex list of `tid` (get_robust_list works on a thread we trace).
pub fn robust_list(tid: Pid) -> Option<(u64, u64)> {
    let mut head: u64 = 0;
    let mut len: libc::size_t = 0;
    // SAFETY: get_robust_list writes one pointer and one size into the two locals.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_robust_list,
            tid.as_raw(),
            &mut head as *mut u64,
            &mut len as *mut libc::size_t,
        )
    };
    (r == 0 && head != 0).then_some((head, len as u64))
}

/// Makes a thread from `image` in the copy whose main thread `leader` is stopped (not in a
/// seccomp stop), using the `syscall` instruction at `syscall_insn`. The new thread is left
/// stopped with the image's state; its tid is returned.
pub fn recreate(leader: Pid, syscall_insn: u64, image: &ThreadImage) -> Result<Pid, ForkError> {
    let args = [
        THREAD_FLAGS,
        image.regs.rsp,
        0,
        image.clear_tid,
        image.regs.fs_base,
        0,
    ];
    let (_, child) =
        inject(leader, syscall_insn, SYS_CLONE, args).map_err(|e| e.doing("the clone"))?;
    let tid =
        child.ok_or_else(|| ForkError::Unexpected("the injected clone made no thread".into()))?;
    expect(
        tid,
        |e| matches!(e, Event::Stop(_) | Event::Signal(_)),
        "a recreated thread's first stop",
    )?;
    restore_extras(tid, syscall_insn, image).map_err(|e| e.doing("restoring its state"))?;
    regs::set(tid, image.regs).map_err(|e| ForkError::from(e).doing("setting its registers"))?;
    Ok(tid)
}

/// Gives a thread of the copy the per-thread state fork and clone do not carry over.
pub fn restore_extras(tid: Pid, syscall_insn: u64, image: &ThreadImage) -> Result<(), ForkError> {
    set_xstate(tid, &image.xstate).map_err(|e| e.doing("xstate"))?;
    set_sigmask(tid, image.sigmask).map_err(|e| e.doing("sigmask"))?;
    if let Some((head, len)) = image.robust {
        inject(
            tid,
            syscall_insn,
            SYS_SET_ROBUST_LIST,
            [head, len, 0, 0, 0, 0],
        )?;
    }
    if let Some(ss) = image.altstack {
        // The stack_t goes below the red zone of the thread's own stack.
        let scratch = (image.regs.rsp - 512) & !15;
        scratch_memory(tid)?
            .write(scratch, &ss)
            .map_err(|e| ForkError::Unexpected(format!("writing a stack_t: {e}")))?;
        inject(tid, syscall_insn, SYS_SIGALTSTACK, [scratch, 0, 0, 0, 0, 0])?;
    }
    if let Some(name) = &image.name {
        // comm can only be written from inside the thread group: the thread names itself.
        let mut bytes = [0u8; 16];
        let n = name.len().min(15);
        bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
        let scratch = (image.regs.rsp - 512) & !15;
        scratch_memory(tid)?
            .write(scratch, &bytes)
            .map_err(|e| ForkError::Unexpected(format!("writing a thread name: {e}")))?;
        inject(
            tid,
            syscall_insn,
            SYS_PRCTL,
            [PR_SET_NAME, scratch, 0, 0, 0, 0],
        )?;
    }
    Ok(())
}

/// Points descriptor `fd` of the stopped thread `tid`'s process at /dev/null (open, dup3,
/// close, injected), if it is open: a copy run again only to learn something prints
/// nothing. The program's descriptor table is otherwise as it was.
pub fn point_at_dev_null(tid: Pid, syscall_insn: u64, fd: u64) -> Result<(), ForkError> {
    // A descriptor the program closed stays closed.
    let (open, _) = inject(
        tid,
        syscall_insn,
        libc::SYS_fcntl as u64,
        [fd, 1, 0, 0, 0, 0],
    )?;
    if open < 0 {
        return Ok(());
    }
    let rsp = regs::get(tid)?.rsp;
    let scratch = (rsp - 512) & !15;
    scratch_memory(tid)?
        .write(scratch, b"/dev/null\0")
        .map_err(|e| ForkError::Unexpected(format!("writing a path: {e}")))?;
    let flags = (libc::O_WRONLY | libc::O_CLOEXEC) as u64;
    let at_fdcwd = libc::AT_FDCWD as i64 as u64;
    let args = [at_fdcwd, scratch, flags, 0, 0, 0];
    let (opened, _) = inject(tid, syscall_insn, libc::SYS_openat as u64, args)?;
    if opened < 0 {
        return Err(ForkError::Unexpected(format!(
            "opening /dev/null: errno {}",
            -opened
        )));
    }
    let opened = opened as u64;
    let dup = inject(
        tid,
        syscall_insn,
        libc::SYS_dup3 as u64,
        [opened, fd, 0, 0, 0, 0],
    );
    inject(
        tid,
        syscall_insn,
        libc::SYS_close as u64,
        [opened, 0, 0, 0, 0, 0],
    )?;
    match dup?.0 {
        e if e < 0 => Err(ForkError::Unexpected(format!("dup3 to {fd}: errno {}", -e))),
        _ => Ok(()),
    }
}

fn scratch_memory(tid: Pid) -> Result<super::memory::Memory, ForkError> {
    super::memory::Memory::open(tid)
        .map_err(|e| ForkError::Unexpected(format!("opening the recreated thread's memory: {e}")))
}

/// Runs syscall `nr` in stopped thread `tid` (not at a seccomp stop), then puts its
/// registers back. Returns the result and the thread or process a clone/fork made.
pub fn inject(
    tid: Pid,
    syscall_insn: u64,
    nr: u64,
    args: [u64; 6],
) -> Result<(i64, Option<Pid>), ForkError> {
    let saved = regs::get(tid)?;
    inject_at(tid, &saved, syscall_insn, nr, args)
}

/// [`inject`] for a thread whose registers are known to be `saved` (one ptrace call less).
/// Signals are blocked in the thread meanwhile, so that one sent to it stays pending for
/// the program instead of stopping the injection; its registers and mask are put back
/// whatever happens.
pub fn inject_at(
    tid: Pid,
    saved: &Regs,
    syscall_insn: u64,
    nr: u64,
    args: [u64; 6],
) -> Result<(i64, Option<Pid>), ForkError> {
    let mask = get_sigmask(tid)?;
    set_sigmask(tid, !0)?;
    let result = run_injected(tid, saved, syscall_insn, nr, args);
    let restored = regs::set(tid, *saved).map_err(ForkError::from);
    let unmasked = set_sigmask(tid, mask);
    let out = result?;
    restored?;
    unmasked?;
    Ok(out)
}

/// Points `tid` at `syscall_insn` with syscall `nr` and `args`, and single-steps it.
fn run_injected(
    tid: Pid,
    saved: &Regs,
    syscall_insn: u64,
    nr: u64,
    args: [u64; 6],
) -> Result<(i64, Option<Pid>), ForkError> {
    let mut r = *saved;
    r.rip = syscall_insn;
    r.rax = nr;
    r.orig_rax = u64::MAX;
    [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9] = args;
    regs::set(tid, r)?;
    let mut child = None;
    loop {
        ptrace::step(tid, None)?;
        // wait_for waits again when the watchdog interrupts: the step is still under way.
        match wait_for(tid)? {
            // A seccomp stop of the injected syscall, or a PTRACE_INTERRUPT asked for
            // before: the step goes on.
            Event::Seccomp | Event::Stop(_) => continue,
            Event::Clone(c) | Event::Fork(c) => child = Some(c),
            Event::Trap => break,
            ev => {
                return Err(ForkError::Unexpected(format!(
                    "{ev:?} while injecting syscall {nr}"
                )))
            }
        }
    }
    Ok((regs::get(tid)?.rax as i64, child))
}

/// Takes thread `tid` out of the seccomp stop it is in (registers `saved`) without running
/// its syscall: the syscall is replaced by a harmless one, and the thread is left at a plain
/// stop on its `syscall` instruction, with the registers to enter the same syscall again.
/// Returns those registers. Injected syscalls can then be run in it.
pub fn leave_seccomp_stop(tid: Pid, saved: &Regs) -> Result<Regs, ForkError> {
    let mut r = *saved;
    r.orig_rax = libc::SYS_getpid as u64;
    regs::set(tid, r)?;
    go_expect(
        tid,
        Go::Syscall,
        |e| matches!(e, Event::Trap),
        "the replaced syscall's exit stop",
    )?;
    let mut again = *saved;
    again.rip = saved.rip - 2;
    again.rax = saved.orig_rax;
    again.orig_rax = u64::MAX;
    regs::set(tid, again)?;
    Ok(again)
}

/// Resumes thread `tid`, whose registers point at a trapped syscall, until its seccomp stop:
/// the thread is then exactly as it was when it first stopped there.
pub fn enter_seccomp_stop(tid: Pid) -> Result<(), ForkError> {
    go_expect(
        tid,
        Go::Cont,
        |e| matches!(e, Event::Seccomp),
        "re-entering a seccomp stop",
    )
}

fn get_xstate(tid: Pid) -> Result<Vec<u8>, ForkError> {
    let mut buf = vec![0u8; XSTATE_MAX];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: PTRACE_GETREGSET writes at most iov_len bytes into buf and shrinks iov_len
    // to what it wrote; both live across the call.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            tid.as_raw(),
            NT_X86_XSTATE as usize,
            &mut iov as *mut libc::iovec,
        )
    };
    Errno::result(r)?;
    buf.truncate(iov.iov_len);
    Ok(buf)
}

fn set_xstate(tid: Pid, xstate: &[u8]) -> Result<(), ForkError> {
    let mut copy = xstate.to_vec();
    let mut iov = libc::iovec {
        iov_base: copy.as_mut_ptr().cast(),
        iov_len: copy.len(),
    };
    // SAFETY: PTRACE_SETREGSET reads iov_len bytes from `copy`, which outlives the call.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_SETREGSET,
            tid.as_raw(),
            NT_X86_XSTATE as usize,
            &mut iov as *mut libc::iovec,
        )
    };
    Errno::result(r)?;
    Ok(())
}

/// The blocked-signal mask of stopped thread `tid`.
pub fn get_sigmask(tid: Pid) -> Result<u64, ForkError> {
    let mut mask: u64 = 0;
    // SAFETY: PTRACE_GETSIGMASK writes 8 bytes (the size passed) into `mask`.
    let r = unsafe {
        libc::ptrace(
            PTRACE_GETSIGMASK,
            tid.as_raw(),
            8usize,
            &mut mask as *mut u64,
        )
    };
    Errno::result(r)?;
    Ok(mask)
}

/// Sets the blocked-signal mask of stopped thread `tid` (SIGKILL and SIGSTOP stay open).
pub fn set_sigmask(tid: Pid, mask: u64) -> Result<(), ForkError> {
    // SAFETY: PTRACE_SETSIGMASK reads 8 bytes (the size passed) from `mask`.
    let r = unsafe { libc::ptrace(PTRACE_SETSIGMASK, tid.as_raw(), 8usize, &mask as *const u64) };
    Errno::result(r)?;
    Ok(())
}
