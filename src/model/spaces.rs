//! Address spaces: the threads of every process of a process tree share one model, but two
//! processes (a forked child and its parent, two test processes of one runner, an image
//! replaced by `exec`) may use the same address for different objects. Every address an
//! operation names is therefore tagged with its *space* (a number per process image) in the
//! bits above the user address range, so that the objects of two spaces never meet. Space 0
//! is the program as launched: its addresses are left as they are.

use super::ops::Op;
use super::Addr;

/// Bits of an x86-64 user-space address (user addresses are below 2^47).
const ADDRESS_BITS: u32 = 48;
/// The address part of a tagged address.
const ADDRESS_MASK: Addr = (1 << ADDRESS_BITS) - 1;

/// The number of a process image's address space (0: the program as launched).
pub type Space = u16;

/// `addr` of space `space` as the model keys it (the null address stays null).
pub fn in_space(addr: Addr, space: Space) -> Addr {
    if addr == 0 {
        return 0;
    }
    (addr & ADDRESS_MASK) | (Addr::from(space) << ADDRESS_BITS)
}

/// The address in its process of a tagged address.
pub fn address_of(addr: Addr) -> Addr {
    addr & ADDRESS_MASK
}

/// The space a tagged address belongs to.
pub fn space_of(addr: Addr) -> Space {
    (addr >> ADDRESS_BITS) as Space
}

impl Op {
    /// The operation with every address it names moved to space `space` (space 0 takes
    /// the tag off).
    pub fn in_space(self, space: Space) -> Op {
        let s = |a: Addr| in_space(a, space);
        match self {
            Op::Atomic { addr, size } => Op::Atomic {
                addr: s(addr),
                size,
            },
            Op::MemoryAccess { addr, size, write } => Op::MemoryAccess {
                addr: s(addr),
                size,
                write,
            },
            Op::MutexInit { m, kind } => Op::MutexInit { m: s(m), kind },
            Op::MutexLock { m, attempt, kind } => Op::MutexLock {
                m: s(m),
                attempt,
                kind,
            },
            Op::MutexUnlock { m } => Op::MutexUnlock { m: s(m) },
            Op::MutexDestroy { m } => Op::MutexDestroy { m: s(m) },
            Op::RwInit { l } => Op::RwInit { l: s(l) },
            Op::RwRead { l, attempt } => Op::RwRead { l: s(l), attempt },
            Op::RwWrite { l, attempt } => Op::RwWrite { l: s(l), attempt },
            Op::RwUnlock { l } => Op::RwUnlock { l: s(l) },
            Op::RwDestroy { l } => Op::RwDestroy { l: s(l) },
            Op::CondInit { c, monotonic } => Op::CondInit { c: s(c), monotonic },
            Op::CondWait { c, m, timeout } => Op::CondWait {
                c: s(c),
                m: s(m),
                timeout,
            },
            Op::CondSignal { c } => Op::CondSignal { c: s(c) },
            Op::CondBroadcast { c } => Op::CondBroadcast { c: s(c) },
            Op::CondDestroy { c } => Op::CondDestroy { c: s(c) },
            Op::SemInit { s: sem, value } => Op::SemInit { s: s(sem), value },
            Op::SemWait { s: sem, attempt } => Op::SemWait { s: s(sem), attempt },
            Op::SemPost { s: sem } => Op::SemPost { s: s(sem) },
            Op::SemGetValue { s: sem, out } => Op::SemGetValue {
                s: s(sem),
                out: s(out),
            },
            Op::SemDestroy { s: sem } => Op::SemDestroy { s: s(sem) },
            Op::BarrierInit { b, count } => Op::BarrierInit { b: s(b), count },
            Op::BarrierWait { b } => Op::BarrierWait { b: s(b) },
            Op::BarrierDestroy { b } => Op::BarrierDestroy { b: s(b) },
            Op::SpinInit { s: spin } => Op::SpinInit { s: s(spin) },
            Op::SpinLock { s: spin, attempt } => Op::SpinLock {
                s: s(spin),
                attempt,
            },
            Op::SpinUnlock { s: spin } => Op::SpinUnlock { s: s(spin) },
            Op::SpinDestroy { s: spin } => Op::SpinDestroy { s: s(spin) },
            Op::Once { o } => Op::Once { o: s(o) },
            Op::FutexWait {
                addr,
                expected,
                bitset,
                timeout,
            } => Op::FutexWait {
                addr: s(addr),
                expected,
                bitset,
                timeout,
            },
            Op::FutexWake {
                addr,
                count,
                bitset,
            } => Op::FutexWake {
                addr: s(addr),
                count,
                bitset,
            },
            Op::FutexRequeue {
                addr,
                wake,
                requeue,
                to,
                expected,
            } => Op::FutexRequeue {
                addr: s(addr),
                wake,
                requeue,
                to: s(to),
                expected,
            },
            Op::CondResume { c, m, count } => Op::CondResume {
                c: s(c),
                m: s(m),
                count,
            },
            Op::FutexResume { addr } => Op::FutexResume { addr: s(addr) },
            Op::BarrierResume { b, generation } => Op::BarrierResume {
                b: s(b),
                generation,
            },
            op @ (Op::Start
            | Op::Continue
            | Op::ExitGroup
            | Op::Yield
            | Op::Sleep { .. }
            | Op::Join { .. }
            | Op::Detach { .. }
            | Op::Kernel { .. }) => op,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_zero_leaves_addresses_as_they_are() {
        assert_eq!(in_space(0x5555_5555_8040, 0), 0x5555_5555_8040);
        assert_eq!(in_space(0, 3), 0);
        let tagged = in_space(0x7fff_f7e5_f370, 5);
        assert_ne!(tagged, 0x7fff_f7e5_f370);
        assert_eq!(address_of(tagged), 0x7fff_f7e5_f370);
        assert_eq!(space_of(tagged), 5);
        // Moving a tagged address to space 0 takes the tag off.
        assert_eq!(in_space(tagged, 0), 0x7fff_f7e5_f370);
    }

    #[test]
    fn every_address_of_an_operation_moves() {
        let op = Op::FutexRequeue {
            addr: 0x1000,
            wake: 1,
            requeue: 2,
            to: 0x2000,
            expected: Some(0),
        };
        let Op::FutexRequeue { addr, to, .. } = op.clone().in_space(2) else {
            panic!("same operation")
        };
        assert_eq!((space_of(addr), space_of(to)), (2, 2));
        assert_eq!(op.clone().in_space(2).in_space(0), op);
        let wait = Op::CondWait {
            c: 0x10,
            m: 0x20,
            timeout: None,
        };
        assert_eq!(wait.in_space(1).object().map(|o| space_of(o.addr)), Some(1));
    }
}
