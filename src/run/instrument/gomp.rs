//! libgomp's locks as locks of the model: which entry points of libgomp (the OpenMP
//! runtime of gcc) are hooked, and the lock each one takes. `omp critical`, `omp atomic`
//! forms that need a lock, and the OpenMP lock API (`omp_set_lock`...) are futex words and
//! atomic instructions inside libgomp; hooked at their entries they become mutex
//! operations of the model (emulated, never run: libgomp's own lock words stay untouched),
//! so their hand-overs order accesses and the search switches threads at them. The entries
//! that hand out `sections` and chunks of dynamic loops are scheduling points too.

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
    hooks.extend(hand_out_hooks(elf));
    hooks.extend(task_hooks(elf));
    hooks
}

/// The loop schedules whose hand-outs depend on which thread asks first (a static
/// schedule's chunks follow from the thread's number).
const HANDED_OUT_SCHEDULES: &[&str] = &[
    "dynamic",
    "guided",
    "runtime",
    "nonmonotonic_dynamic",
    "nonmonotonic_guided",
    "nonmonotonic_runtime",
    "maybe_nonmonotonic_runtime",
    "ordered_dynamic",
    "ordered_guided",
    "ordered_runtime",
    "doacross_dynamic",
    "doacross_guided",
    "doacross_runtime",
];

/// The libgomp entries that hand out work to whichever thread calls first: `sections`
/// (`GOMP_sections_start` creates the work share and takes a section, `_next` takes the
/// next; `GOMP_parallel_sections` only creates it, its threads then call `_next`), and the
/// `_start`/`_next` of the loops of [`HANDED_OUT_SCHEDULES`] and of the generic starts
/// (whose schedule is an argument), for `long` and `unsigned long long` iterations.
fn hand_out_functions() -> Vec<String> {
    let mut names: Vec<String> = [
        "GOMP_sections_start",
        "GOMP_sections2_start",
        "GOMP_sections_next",
        "GOMP_loop_start",
        "GOMP_loop_ull_start",
        "GOMP_loop_ordered_start",
        "GOMP_loop_ull_ordered_start",
        "GOMP_loop_doacross_start",
        "GOMP_loop_ull_doacross_start",
    ]
    .iter()
    .map(|n| n.to_string())
    .collect();
    for family in ["GOMP_loop_", "GOMP_loop_ull_"] {
        for schedule in HANDED_OUT_SCHEDULES {
            for end in ["_start", "_next"] {
                names.push(format!("{family}{schedule}{end}"));
            }
        }
    }
    names
}

/// The hooks of libgomp's hand-out entries: each a scheduling point on one key, the entry
/// of `GOMP_sections_next` (code, which no data of the program can share).
fn hand_out_hooks(elf: &ElfFile) -> Vec<(u64, Hook)> {
    let Some(&key) = elf.function_addresses("GOMP_sections_next").first() else {
        return Vec::new();
    };
    hand_out_functions()
        .iter()
        .flat_map(|name| elf.function_addresses(name))
        .map(|a| (a, Hook::GompHandOut { key }))
        .collect()
}

/// The libgomp entries that create tasks, whose first argument is the task's function.
const TASK_CREATORS: &[&str] = &["GOMP_task", "GOMP_taskloop", "GOMP_taskloop_ull"];

/// The hooks of libgomp's task creators, keyed by the entry of `GOMP_task`: at each, the
/// session also puts a scheduling point at the task's function, so that which thread runs
/// which task, and two tasks running at once, are choices of the search (libgomp's task
/// queue is served under its own lock, whose atomics are not scheduling points).
fn task_hooks(elf: &ElfFile) -> Vec<(u64, Hook)> {
    let Some(&key) = elf.function_addresses("GOMP_task").first() else {
        return Vec::new();
    };
    TASK_CREATORS
        .iter()
        .flat_map(|name| elf.function_addresses(name))
        .map(|a| (a, Hook::GompTask { key }))
        .collect()
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
    fn sections_and_dynamic_loops_hand_out_work_at_hooked_entries_but_static_loops_do_not() {
        let elf = system_gomp();
        let hooks = gomp_hooks(&elf);
        let hooked = |name: &str| {
            let at = elf.function_addresses(name);
            !at.is_empty()
                && at.iter().all(|a| {
                    hooks
                        .iter()
                        .any(|(h, k)| h == a && matches!(k, Hook::GompHandOut { .. }))
                })
        };
        for name in [
            "GOMP_sections_start",
            "GOMP_sections_next",
            "GOMP_loop_dynamic_next",
            "GOMP_loop_guided_start",
            "GOMP_loop_nonmonotonic_dynamic_next",
            "GOMP_loop_ull_runtime_next",
            "GOMP_loop_start",
        ] {
            assert!(hooked(name), "{name} hooked");
        }
        assert!(!hooked("GOMP_loop_static_next"));
        assert!(!hooked("GOMP_parallel_sections"));
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
