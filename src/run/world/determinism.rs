//! Making re-execution deterministic: the same schedule must give the same execution.
//!
//! - AT_RANDOM (the 16 bytes glibc seeds stack protectors and pointer guards from) is
//!   overwritten with fixed bytes at the exec stop.
//! - The vDSO is hidden (AT_SYSINFO_EHDR becomes AT_IGNORE in the auxiliary vector on the
//!   stack), so glibc makes real clock_gettime/gettimeofday/time syscalls, which are trapped
//!   and answered from a virtual clock: a fixed epoch plus the model's virtual time plus one
//!   microsecond per clock read (so that timing loops see time pass).
//! - rdtsc/rdtscp fault (PR_SET_TSC) and are answered from a virtual counter.
//! - getrandom returns bytes from a generator with a fixed seed.
//! - rseq is disabled (GLIBC_TUNABLES and ENOSYS), so nothing depends on the CPU number.

use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::tracee::memory::Memory;

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_RANDOM: u64 = 25;
const AT_SYSINFO_EHDR: u64 = 33;

/// Virtual CLOCK_REALTIME at the start of every execution: 2024-01-01T00:00:00Z.
const EPOCH_REALTIME_NS: u64 = 1_704_067_200_000_000_000;
/// Virtual CLOCK_MONOTONIC at the start: 1000 s of "uptime".
const EPOCH_MONOTONIC_NS: u64 = 1_000_000_000_000;
/// How much virtual time each clock read or rdtsc adds.
const READ_TICK_NS: u64 = 1_000;

/// Per-execution deterministic sources.
#[derive(Clone)]
pub struct Determinism {
    reads: u64,
    rng: Pcg64Mcg,
}

impl Default for Determinism {
    fn default() -> Self {
        Determinism {
            reads: 0,
            rng: Pcg64Mcg::seed_from_u64(0x6d63_6865_636b),
        }
    }
}

impl Determinism {
    /// Rewrites the auxiliary vector on the initial stack (`rsp` at the exec stop): fixed
    /// AT_RANDOM bytes, vDSO hidden.
    pub fn patch_auxv(&mut self, mem: &Memory, rsp: u64) -> std::io::Result<()> {
        let argc = mem.read_u64(rsp)?;
        let mut p = rsp + 8 * (argc + 2); // argc, argv[..], NULL
        while mem.read_u64(p)? != 0 {
            p += 8; // envp
        }
        p += 8;
        loop {
            let key = mem.read_u64(p)?;
            if key == AT_NULL {
                break;
            }
            match key {
                AT_RANDOM => {
                    let at = mem.read_u64(p + 8)?;
                    let mut bytes = [0u8; 16];
                    self.rng.fill_bytes(&mut bytes);
                    mem.write(at, &bytes)?;
                }
                AT_SYSINFO_EHDR => mem.write(p, &AT_IGNORE.to_le_bytes())?,
                _ => {}
            }
            p += 16;
        }
        Ok(())
    }

    /// The virtual reading of `clock`, given the model's virtual time; every read advances it.
    pub fn clock_ns(&mut self, clock: libc::clockid_t, virtual_now: u64) -> u64 {
        self.reads += 1;
        let elapsed = virtual_now + self.reads * READ_TICK_NS;
        match clock {
            libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_TAI => {
                EPOCH_REALTIME_NS + elapsed
            }
            _ => EPOCH_MONOTONIC_NS + elapsed,
        }
    }

    /// The virtual clock without advancing it (to convert absolute deadlines).
    pub fn peek_ns(&self, clock: libc::clockid_t, virtual_now: u64) -> u64 {
        let elapsed = virtual_now + self.reads * READ_TICK_NS;
        match clock {
            libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_TAI => {
                EPOCH_REALTIME_NS + elapsed
            }
            _ => EPOCH_MONOTONIC_NS + elapsed,
        }
    }

    /// A virtual time-stamp counter value (1 GHz).
    pub fn tsc(&mut self, virtual_now: u64) -> u64 {
        self.clock_ns(libc::CLOCK_MONOTONIC, virtual_now)
    }

    /// `len` seeded random bytes.
    pub fn random_bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.rng.fill_bytes(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_are_deterministic_and_advance() {
        let mut a = Determinism::default();
        let mut b = Determinism::default();
        let x = a.clock_ns(libc::CLOCK_MONOTONIC, 0);
        assert_eq!(x, b.clock_ns(libc::CLOCK_MONOTONIC, 0));
        assert!(a.clock_ns(libc::CLOCK_MONOTONIC, 0) > x);
        assert!(a.clock_ns(libc::CLOCK_REALTIME, 0) > EPOCH_REALTIME_NS);
        assert_eq!(a.random_bytes(8), b.random_bytes(8));
    }
}
