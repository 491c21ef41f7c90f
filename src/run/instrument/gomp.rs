//! libgomp's locks as locks of the model: which entry points of libgomp (the OpenMP
//! runtime of gcc) are hooked, and the lock each one takes. `omp critical`, `omp atomic`
//! forms that need a lock, and the OpenMP lock API (`omp_set_lock`...) are futex words and
//! atomic instructions inside libgomp; hooked at their entries they become mutex
//! operations of the model (emulated, never run: libgomp's own lock words stay untouched),
//! so their hand-overs order accesses and the search switches threads at them.

use super::hooks::Hook;
use crate::binary::ElfFile;
use crate::run::process::decode_at;

/// Whether the file at `path` is libgomp.
pub fn is_gomp(path: &std::path::Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("libgomp.so"))
}

/// The hooked libgomp functions whose lock is their argument (every versioned alias: the
/// OMP_1.0 and OMP_3.0 lock functions differ in layout only, which emulation never reads).
/// The Fortran entry points (`omp_set_lock_`...) are not hooked.
const ARGUMENT_LOCKS: &[(&str, Hook)] = &[
    ("GOMP_critical_name_start", Hook::OmpSetLock),
    ("GOMP_critical_name_end", Hook::OmpUnsetLock),
    ("omp_init_lock", Hook::OmpInitLock),
    ("omp_init_nest_lock", Hook::OmpInitNestLock),
    ("omp_set_lock", Hook::OmpSetLock),
    ("omp_set_nest_lock", Hook::OmpSetNestLock),
    ("omp_test_lock", Hook::OmpTestLock),
    ("omp_test_nest_lock", Hook::OmpTestNestLock),
    ("omp_unset_lock", Hook::OmpUnsetLock),
    ("omp_unset_nest_lock", Hook::OmpUnsetLock),
    ("omp_destroy_lock", Hook::OmpDestroyLock),
    ("omp_destroy_nest_lock", Hook::OmpDestroyLock),
];

/// The hooked libgomp functions without argument, each pair on one static lock of
/// libgomp's: (acquire, release). `GOMP_critical_start`/`_end` guard the unnamed `omp
/// critical` (libgomp's `default_lock`), `GOMP_atomic_start`/`_end` the `omp atomic` forms
/// gcc cannot make one instruction (`atomic_lock`).
const STATIC_LOCKS: &[(&str, &str)] = &[
    ("GOMP_critical_start", "GOMP_critical_end"),
    ("GOMP_atomic_start", "GOMP_atomic_end"),
];

/// The hooks of libgomp's lock entry points, in file addresses. A static lock is keyed by
/// its own address, read from the first rip-relative operand of its acquire function (the
/// `lock cmpxchg` on `default_lock`); when that cannot be decoded, by the address of the
/// acquire function itself, code that no lock of the program can share.
pub fn gomp_hooks(elf: &ElfFile) -> Vec<(u64, Hook)> {
    let mut hooks = Vec::new();
    for (name, hook) in ARGUMENT_LOCKS {
        for a in elf.function_addresses(name) {
            hooks.push((a, *hook));
        }
    }
    for (acquire, release) in STATIC_LOCKS {
        let starts = elf.function_addresses(acquire);
        let Some(&entry) = starts.first() else {
            continue;
        };
        let lock = static_lock_address(elf, entry).unwrap_or(entry);
        for a in starts {
            hooks.push((a, Hook::GompStaticLock { lock }));
        }
        for a in elf.function_addresses(release) {
            hooks.push((a, Hook::GompStaticUnlock { lock }));
        }
    }
    hooks
}

/// Most instructions looked at from a function's entry for its lock word's address.
const LOCK_OPERAND_SEARCH: usize = 8;

/// The target of the first rip-relative memory operand among the first instructions of the
/// function at `entry`, stopping at its first branch or return.
fn static_lock_address(elf: &ElfFile, entry: u64) -> Option<u64> {
    let mut ip = entry;
    for _ in 0..LOCK_OPERAND_SEARCH {
        let insn = decode_at(elf.instruction_bytes(ip)?, ip);
        if insn.is_invalid() || insn.len() == 0 {
            return None;
        }
        if insn.is_ip_rel_memory_operand() {
            return Some(insn.ip_rel_memory_address());
        }
        if insn.flow_control() != iced_x86::FlowControl::Next {
            return None;
        }
        ip += insn.len() as u64;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The system's libgomp (gcc's, which the OpenMP fixtures are built with).
    fn system_gomp() -> std::sync::Arc<ElfFile> {
        let out = std::process::Command::new("gcc")
            .arg("-print-file-name=libgomp.so.1")
            .output()
            .expect("gcc runs");
        let path = String::from_utf8(out.stdout).expect("a path");
        let path = std::fs::canonicalize(path.trim()).expect("gcc's libgomp is installed");
        assert!(is_gomp(&path), "{} is libgomp", path.display());
        ElfFile::load(&path).expect("libgomp loads")
    }

    #[test]
    fn the_unnamed_critical_is_keyed_by_a_data_address_of_libgomp() {
        let elf = system_gomp();
        let hooks = gomp_hooks(&elf);
        let start = elf.function_addresses("GOMP_critical_start")[0];
        let end = elf.function_addresses("GOMP_critical_end")[0];
        let lock_of = |at: u64| {
            hooks.iter().find(|(a, _)| *a == at).map(|(_, h)| match h {
                Hook::GompStaticLock { lock } | Hook::GompStaticUnlock { lock } => *lock,
                _ => 0,
            })
        };
        let key = lock_of(start).expect("GOMP_critical_start hooked");
        assert_eq!(lock_of(end), Some(key), "start and end share one lock");
        assert_ne!(key, start, "the lock word was decoded, not the fallback");
        let atomic = lock_of(elf.function_addresses("GOMP_atomic_start")[0]);
        assert!(
            atomic.is_some_and(|a| a != key),
            "atomic_lock is another lock"
        );
        for name in [
            "omp_set_lock",
            "omp_test_nest_lock",
            "GOMP_critical_name_start",
        ] {
            for a in elf.function_addresses(name) {
                assert!(hooks.iter().any(|(h, _)| *h == a), "{name} hooked");
            }
        }
    }
}
