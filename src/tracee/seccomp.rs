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
    nr::SIGALTSTACK,
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

/// Builds the BPF program: kill on a foreign arch, trace the [`TRAPPED`] calls, allow the rest.
pub fn filter_program() -> Vec<libc::sock_filter> {
    let mut prog = vec![
        stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFFSET_NR),
    ];
    let n = TRAPPED.len();
    for (i, &sys) in TRAPPED.iter().enumerate() {
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
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let ins = prog[pc];
            match ins.code {
                BPF_LD_W_ABS => acc = if ins.k == OFFSET_ARCH { arch } else { nr },
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
        for nr in 0..500u32 {
            let want = if TRAPPED.contains(&(nr as i64)) {
                SECCOMP_RET_TRACE
            } else {
                SECCOMP_RET_ALLOW
            };
            assert_eq!(run(&prog, AUDIT_ARCH_X86_64, nr), want, "syscall {nr}");
        }
        assert_eq!(run(&prog, 0x4000_0003, 202), SECCOMP_RET_KILL_PROCESS);
    }
}
