//! Trapped syscalls that are scheduling points, decoded into model operations: futex
//! operations (as glibc and Rust std use them), sched_yield and the sleeps, and the calls
//! answered for determinism (clocks, randomness, the CPUs a thread may use).

use crate::model::Op;
use crate::tracee::seccomp::nr;

const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_REQUEUE: u64 = 3;
const FUTEX_CMP_REQUEUE: u64 = 4;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;
const TIMER_ABSTIME: u64 = 1;

/// Memory and clock access needed to decode timeouts.
pub trait TimeSource {
    /// The timespec at `addr` as nanoseconds (None on fault or a null pointer).
    fn timespec_ns(&self, addr: u64) -> Option<u64>;
    /// The tracer's reading of `clock`, in nanoseconds.
    fn clock_now_ns(&self, clock: libc::clockid_t) -> u64;
}

/// What a trapped syscall means to the executor.
#[derive(Debug, Clone, PartialEq)]
pub enum SyscallAction {
    /// A scheduling point performing this operation.
    Point(Op),
    /// Return this value at once without running the call (e.g. -ENOSYS for rseq).
    Emulate(i64),
    /// Let the call run natively.
    Native,
    /// clock_gettime/gettimeofday/time: answer from the virtual clock.
    Clock(ClockCall),
    /// getrandom(buf, len): fill with seeded bytes.
    Random {
        /// Buffer address.
        buf: u64,
        /// Bytes asked for.
        len: u64,
    },
    /// sched_getaffinity(pid, len, mask): show the CPUs mcheck was started on.
    Affinity {
        /// The thread asked about (0: the caller).
        pid: i32,
        /// The buffer's size in bytes.
        len: u64,
        /// Where the mask goes.
        out: u64,
    },
    /// sched_setaffinity(pid, len, mask): noted, not applied.
    SetAffinity {
        /// The thread to pin (0: the caller).
        pid: i32,
        /// The mask's size in bytes.
        len: u64,
        /// Where the mask is.
        mask: u64,
    },
}

/// A time query and where its answer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockCall {
    /// clock_gettime(clock, timespec*).
    Gettime {
        /// The clock.
        clock: libc::clockid_t,
        /// struct timespec * (0: none).
        out: u64,
    },
    /// gettimeofday(timeval*, tz).
    Gettimeofday {
        /// struct timeval * (0: none).
        out: u64,
    },
    /// time(time_t*).
    Time {
        /// time_t * (0: none).
        out: u64,
    },
}

/// Decodes syscall `nr` with arguments `a`.
pub fn decode(nr: i64, a: [u64; 6], time: &dyn TimeSource) -> SyscallAction {
    match nr {
        nr::FUTEX => decode_futex(a, time),
        nr::SCHED_YIELD => SyscallAction::Point(Op::Yield),
        nr::NANOSLEEP => SyscallAction::Point(Op::Sleep {
            ns: time.timespec_ns(a[0]).unwrap_or(0),
        }),
        nr::CLOCK_NANOSLEEP => {
            let req = time.timespec_ns(a[2]).unwrap_or(0);
            let ns = if a[1] & TIMER_ABSTIME != 0 {
                req.saturating_sub(time.clock_now_ns(a[0] as libc::clockid_t))
            } else {
                req
            };
            SyscallAction::Point(Op::Sleep { ns })
        }
        nr::RSEQ | nr::FUTEX_WAITV => SyscallAction::Emulate(-(libc::ENOSYS as i64)),
        nr::CLOCK_GETTIME => SyscallAction::Clock(ClockCall::Gettime {
            clock: a[0] as libc::clockid_t,
            out: a[1],
        }),
        nr::GETTIMEOFDAY => SyscallAction::Clock(ClockCall::Gettimeofday { out: a[0] }),
        nr::TIME => SyscallAction::Clock(ClockCall::Time { out: a[0] }),
        nr::GETRANDOM => SyscallAction::Random {
            buf: a[0],
            len: a[1],
        },
        nr::SCHED_GETAFFINITY => SyscallAction::Affinity {
            pid: a[0] as i32,
            len: a[1] as u32 as u64,
            out: a[2],
        },
        nr::SCHED_SETAFFINITY => SyscallAction::SetAffinity {
            pid: a[0] as i32,
            len: a[1] as u32 as u64,
            mask: a[2],
        },
        _ => SyscallAction::Native,
    }
}

fn decode_futex(a: [u64; 6], time: &dyn TimeSource) -> SyscallAction {
    let [addr, op, val, timeout, addr2, val3] = a;
    let cmd = op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
    let val = val as u32;
    let op = match cmd {
        FUTEX_WAIT => Op::FutexWait {
            addr,
            expected: val,
            bitset: u32::MAX,
            timeout: time.timespec_ns(timeout),
        },
        FUTEX_WAIT_BITSET => {
            let clock = if op & FUTEX_CLOCK_REALTIME != 0 {
                libc::CLOCK_REALTIME
            } else {
                libc::CLOCK_MONOTONIC
            };
            Op::FutexWait {
                addr,
                expected: val,
                bitset: val3 as u32,
                timeout: time
                    .timespec_ns(timeout)
                    .map(|abs| abs.saturating_sub(time.clock_now_ns(clock))),
            }
        }
        FUTEX_WAKE => Op::FutexWake {
            addr,
            count: val,
            bitset: u32::MAX,
        },
        FUTEX_WAKE_BITSET => Op::FutexWake {
            addr,
            count: val,
            bitset: val3 as u32,
        },
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => Op::FutexRequeue {
            addr,
            wake: val,
            requeue: timeout as u32,
            to: addr2,
            expected: (cmd == FUTEX_CMP_REQUEUE).then_some(val3 as u32),
        },
        // PI futexes, WAKE_OP and the rest are not modelled: the caller gets ENOSYS.
        _ => return SyscallAction::Emulate(-(libc::ENOSYS as i64)),
    };
    SyscallAction::Point(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Clock;
    impl TimeSource for Clock {
        fn timespec_ns(&self, addr: u64) -> Option<u64> {
            (addr != 0).then_some(1_000)
        }
        fn clock_now_ns(&self, _clock: libc::clockid_t) -> u64 {
            400
        }
    }

    #[test]
    fn futex_wait_bitset_timeouts_are_made_relative() {
        let a = [
            0x10,
            FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
            2,
            0x99,
            0,
            0xffff_ffff,
        ];
        assert_eq!(
            decode(nr::FUTEX, a, &Clock),
            SyscallAction::Point(Op::FutexWait {
                addr: 0x10,
                expected: 2,
                bitset: u32::MAX,
                timeout: Some(600)
            })
        );
    }

    #[test]
    fn private_wake_and_unknown_ops() {
        let wake = [0x10, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, 0, 0, 0];
        assert!(matches!(
            decode(nr::FUTEX, wake, &Clock),
            SyscallAction::Point(Op::FutexWake { count: 1, .. })
        ));
        let lock_pi = [0x10, 6, 0, 0, 0, 0];
        assert_eq!(
            decode(nr::FUTEX, lock_pi, &Clock),
            SyscallAction::Emulate(-38)
        );
        assert_eq!(
            decode(nr::RSEQ, [0; 6], &Clock),
            SyscallAction::Emulate(-38)
        );
    }

    #[test]
    fn affinity_calls_are_answered_not_run() {
        // The length is a 32-bit argument: its upper half is ignored, as the kernel does.
        assert_eq!(
            decode(
                nr::SCHED_GETAFFINITY,
                [0, 1 << 32 | 128, 0x70, 0, 0, 0],
                &Clock
            ),
            SyscallAction::Affinity {
                pid: 0,
                len: 128,
                out: 0x70
            }
        );
        assert_eq!(
            decode(nr::SCHED_SETAFFINITY, [42, 8, 0x70, 0, 0, 0], &Clock),
            SyscallAction::SetAffinity {
                pid: 42,
                len: 8,
                mask: 0x70
            }
        );
    }

    #[test]
    fn sleeps_are_points() {
        assert_eq!(
            decode(nr::NANOSLEEP, [0x5, 0, 0, 0, 0, 0], &Clock),
            SyscallAction::Point(Op::Sleep { ns: 1_000 })
        );
        assert_eq!(
            decode(
                nr::CLOCK_NANOSLEEP,
                [1, TIMER_ABSTIME, 0x5, 0, 0, 0],
                &Clock
            ),
            SyscallAction::Point(Op::Sleep { ns: 600 })
        );
    }
}
