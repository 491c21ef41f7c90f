//! The seccomp-bpf filter installed in the tracee before exec: the syscalls the model must see
//! return `SECCOMP_RET_TRACE` (a ptrace stop before the call), everything else runs untouched.

/// Syscall numbers (x86-64) that stop at the tracer.
pub mod nr {
    /// sched_yield(2)
    pub const SCHED_YIELD: i64 = 24;
    /// nanosleep(2)
    pub const NANOSLEEP: i64 = 35;
    /// clone(2)
    pub const CLONE: i64 = 56;
    /// sigaltstack(2): noted, so that a thread recreated in a fork copy gets it back.
    pub const SIGALTSTACK: i64 = 131;
    /// exit(2)
    pub const EXIT: i64 = 60;
    /// futex(2)
    pub const FUTEX: i64 = 202;
    /// set_tid_address(2)
    pub const SET_TID_ADDRESS: i64 = 218;
    /// clock_nanosleep(2)
    pub const CLOCK_NANOSLEEP: i64 = 230;
    /// exit_group(2)
    pub const EXIT_GROUP: i64 = 231;
    /// rseq(2)
    pub const RSEQ: i64 = 334;
    /// clone3(2)
    pub const CLONE3: i64 = 435;
    /// futex_waitv(2)
    pub const FUTEX_WAITV: i64 = 449;
    /// gettimeofday(2)
    pub const GETTIMEOFDAY: i64 = 96;
    /// time(2)
    pub const TIME: i64 = 201;
    /// clock_gettime(2)
    pub const CLOCK_GETTIME: i64 = 228;
    /// getrandom(2)
    pub const GETRANDOM: i64 = 318;
    /// sched_getaffinity(2): answered with the CPUs mcheck was started on.
    pub const SCHED_GETAFFINITY: i64 = 204;
    /// sched_setaffinity(2): emulated, so that the tracee stays on its tracer's CPU.
    pub const SCHED_SETAFFINITY: i64 = 203;
    /// madvise(2): stops only with a [`super::FORK_ADVICE`], which changes what a fork
    /// copy gets of a mapping.
    pub const MADVISE: i64 = 28;
    // Calls that may wait for the kernel, and the signals that may wake a waiter
    // (`run/kernel_calls.rs`).
    /// read(2)
    pub const READ: i64 = 0;
    /// write(2)
    pub const WRITE: i64 = 1;
    /// poll(2)
    pub const POLL: i64 = 7;
    /// readv(2)
    pub const READV: i64 = 19;
    /// writev(2)
    pub const WRITEV: i64 = 20;
    /// select(2)
    pub const SELECT: i64 = 23;
    /// pause(2)
    pub const PAUSE: i64 = 34;
    /// accept(2)
    pub const ACCEPT: i64 = 43;
    /// sendto(2)
    pub const SENDTO: i64 = 44;
    /// recvfrom(2)
    pub const RECVFROM: i64 = 45;
    /// sendmsg(2)
    pub const SENDMSG: i64 = 46;
    /// recvmsg(2)
    pub const RECVMSG: i64 = 47;
    /// wait4(2)
    pub const WAIT4: i64 = 61;
    /// kill(2)
    pub const KILL: i64 = 62;
    /// rt_sigtimedwait(2): sigwait, sigwaitinfo, sigtimedwait
    pub const RT_SIGTIMEDWAIT: i64 = 128;
    /// rt_sigqueueinfo(2)
    pub const RT_SIGQUEUEINFO: i64 = 129;
    /// rt_sigsuspend(2)
    pub const RT_SIGSUSPEND: i64 = 130;
    /// tkill(2)
    pub const TKILL: i64 = 200;
    /// epoll_wait(2)
    pub const EPOLL_WAIT: i64 = 232;
    /// tgkill(2)
    pub const TGKILL: i64 = 234;
    /// waitid(2)
    pub const WAITID: i64 = 247;
    /// pselect6(2)
    pub const PSELECT6: i64 = 270;
    /// ppoll(2)
    pub const PPOLL: i64 = 271;
    /// epoll_pwait(2)
    pub const EPOLL_PWAIT: i64 = 281;
    /// accept4(2)
    pub const ACCEPT4: i64 = 288;
    /// rt_tgsigqueueinfo(2)
    pub const RT_TGSIGQUEUEINFO: i64 = 297;
    /// recvmmsg(2)
    pub const RECVMMSG: i64 = 299;
    /// sendmmsg(2)
    pub const SENDMMSG: i64 = 307;
    /// epoll_pwait2(2)
    pub const EPOLL_PWAIT2: i64 = 441;
    /// open(2): stops, so that an open for writing takes the file-system gate.
    pub const OPEN: i64 = 2;
    /// openat(2), likewise.
    pub const OPENAT: i64 = 257;
    /// openat2(2), likewise.
    pub const OPENAT2: i64 = 437;

    /// System calls that change a file or directory whatever their arguments (opens
    /// change files only when they open for writing: see `run::fs_gate`).
    pub const FILE_CHANGES: &[i64] = &[
        76,  // truncate
        77,  // ftruncate
        82,  // rename
        83,  // mkdir
        84,  // rmdir
        85,  // creat
        86,  // link
        87,  // unlink
        88,  // symlink
        90,  // chmod
        91,  // fchmod
        92,  // chown
        93,  // fchown
        94,  // lchown
        132, // utime
        133, // mknod
        235, // utimes
        258, // mkdirat
        259, // mknodat
        260, // fchownat
        261, // futimesat
        263, // unlinkat
        264, // renameat
        265, // linkat
        266, // symlinkat
        268, // fchmodat
        280, // utimensat
        316, // renameat2
        452, // fchmodat2
    ];
}

/// The syscalls the filter traps.
pub const TRAPPED: &[i64] = &[
    nr::SCHED_YIELD,
    nr::NANOSLEEP,
    nr::CLONE,
    nr::FUTEX,
    nr::SET_TID_ADDRESS,
    nr::CLOCK_NANOSLEEP,
    nr::EXIT_GROUP,
    nr::RSEQ,
    nr::CLONE3,
    nr::FUTEX_WAITV,
    nr::GETTIMEOFDAY,
    nr::TIME,
    nr::CLOCK_GETTIME,
    nr::GETRANDOM,
    nr::SCHED_GETAFFINITY,
    nr::SCHED_SETAFFINITY,
    nr::SIGALTSTACK,
];

/// The madvise advices that trap (MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK,
/// MADV_KEEPONFORK): they change a mapping's fork flags, which fork snapshots depend on
/// (`procfs::MappingVerdicts`); other advices run without a stop.
pub const FORK_ADVICE: &[u32] = &[10, 11, 18, 19];

/// Calls that may wait for the kernel (and the signal sends that may end such a wait),
/// trapped so that a thread waiting in one is blocked in the model instead of the kernel.
pub const TRAPPED_KERNEL: &[i64] = &[
    nr::READ,
    nr::WRITE,
    nr::POLL,
    nr::READV,
    nr::WRITEV,
    nr::SELECT,
    nr::PAUSE,
    nr::ACCEPT,
    nr::SENDTO,
    nr::RECVFROM,
    nr::SENDMSG,
    nr::RECVMSG,
    nr::WAIT4,
    nr::KILL,
    nr::RT_SIGTIMEDWAIT,
    nr::RT_SIGQUEUEINFO,
    nr::RT_SIGSUSPEND,
    nr::TKILL,
    nr::EPOLL_WAIT,
    nr::TGKILL,
    nr::WAITID,
    nr::PSELECT6,
    nr::PPOLL,
    nr::EPOLL_PWAIT,
    nr::ACCEPT4,
    nr::RT_TGSIGQUEUEINFO,
    nr::RECVMMSG,
    nr::SENDMMSG,
    nr::EPOLL_PWAIT2,
];

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// The low half of the third argument (`struct seccomp_data`: nr, arch, ip, args[6]).
const OFFSET_ARG2: u32 = 32;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Builds the BPF program: kill on a foreign arch, trace the [`TRAPPED`] and
/// [`TRAPPED_KERNEL`] calls and madvise with a [`FORK_ADVICE`], allow the rest.
pub fn filter_program() -> Vec<libc::sock_filter> {
    let mut prog = vec![
        stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFFSET_NR),
    ];
    // madvise: its advice decides. The block ends in a TRACE or an ALLOW of its own; any
    // other call skips it with the number still loaded.
    let advices = FORK_ADVICE.len();
    let block = 1 + advices + 2;
    prog.push(jump(BPF_JEQ_K, nr::MADVISE as u32, 0, block as u8));
    prog.push(stmt(BPF_LD_W_ABS, OFFSET_ARG2));
    for (i, &advice) in FORK_ADVICE.iter().enumerate() {
        prog.push(jump(BPF_JEQ_K, advice, (advices - i) as u8, 0));
    }
    prog.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    prog.push(stmt(BPF_RET_K, SECCOMP_RET_TRACE));
    let opens = [nr::OPEN, nr::OPENAT, nr::OPENAT2];
    let all: Vec<i64> = TRAPPED
        .iter()
        .chain(TRAPPED_KERNEL)
        .chain(&opens)
        .chain(nr::FILE_CHANGES)
        .copied()
        .collect();
    let n = all.len();
    for (i, &sys) in all.iter().enumerate() {
        // On a match jump to the TRACE return, which sits after the remaining compares and
        // the ALLOW return.
        let to_trace = (n - i - 1) as u8 + 1;
        prog.push(jump(BPF_JEQ_K, sys as u32, to_trace, 0));
    }
    prog.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    prog.push(stmt(BPF_RET_K, SECCOMP_RET_TRACE));
    prog
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interprets the tiny subset of BPF the filter uses, to check its jump arithmetic.
    fn run(prog: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
        run_with(prog, arch, nr, 0)
    }

    /// [`run`] with the third argument's low half.
    fn run_with(prog: &[libc::sock_filter], arch: u32, nr: u32, arg2: u32) -> u32 {
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let ins = prog[pc];
            match ins.code {
                BPF_LD_W_ABS => {
                    acc = match ins.k {
                        OFFSET_ARCH => arch,
                        OFFSET_NR => nr,
                        OFFSET_ARG2 => arg2,
                        k => panic!("load of offset {k}"),
                    }
                }
                BPF_JEQ_K => {
                    pc += if acc == ins.k { ins.jt } else { ins.jf } as usize;
                }
                BPF_RET_K => return ins.k,
                _ => panic!("unexpected opcode"),
            }
            pc += 1;
        }
    }

    #[test]
    fn traps_exactly_the_listed_syscalls() {
        let prog = filter_program();
        for call in 0..500u32 {
            let n = call as i64;
            let opens = [nr::OPEN, nr::OPENAT, nr::OPENAT2];
            let want = if TRAPPED.contains(&n)
                || TRAPPED_KERNEL.contains(&n)
                || opens.contains(&n)
                || nr::FILE_CHANGES.contains(&n)
            {
                SECCOMP_RET_TRACE
            } else {
                SECCOMP_RET_ALLOW
            };
            assert_eq!(run(&prog, AUDIT_ARCH_X86_64, call), want, "syscall {call}");
        }
        assert_eq!(run(&prog, 0x4000_0003, 202), SECCOMP_RET_KILL_PROCESS);
    }

    #[test]
    fn madvise_traps_only_with_a_fork_advice() {
        let prog = filter_program();
        let madvise = nr::MADVISE as u32;
        for advice in 0..100u32 {
            let want = if FORK_ADVICE.contains(&advice) {
                SECCOMP_RET_TRACE
            } else {
                SECCOMP_RET_ALLOW
            };
            let got = run_with(&prog, AUDIT_ARCH_X86_64, madvise, advice);
            assert_eq!(got, want, "madvise advice {advice}");
        }
        // The advice is only looked at for madvise (39: getpid, never trapped).
        assert_eq!(
            run_with(&prog, AUDIT_ARCH_X86_64, 39, 10),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run_with(&prog, AUDIT_ARCH_X86_64, nr::FUTEX as u32, 3),
            SECCOMP_RET_TRACE
        );
    }
}
