//! Finds atomic read-modify-write instructions and spin-loop hints by linear-sweep decoding
//! (iced-x86).
//!
//! An instruction is atomic when it has a LOCK prefix and a memory operand, or when it is
//! an `XCHG` with a memory operand (implicitly locked). These are the fallback scheduling
//! points for programs that bypass pthread. `PAUSE` (`F3 90`: `_mm_pause`,
//! `__builtin_ia32_pause`, Rust's `std::hint::spin_loop`) marks an iteration of a spin loop:
//! it becomes a yield point, so that the fair scheduler sees the spinner wait.

use std::ops::Range;

use iced_x86::{Instruction, Mnemonic, OpKind};

use super::elf::ElfFile;
use super::sweep::for_each_instruction;

/// The svmas of all atomic instructions in the executable sections of `elf`, sorted.
/// When `only_in` is given, only instructions whose address lies in one of those ranges
/// are returned (e.g. the program's own DWARF code ranges, to leave libc out).
/// Undecodable bytes are skipped one at a time.
pub fn atomic_instruction_addresses(elf: &ElfFile, only_in: Option<&[Range<u64>]>) -> Vec<u64> {
    let mut out = spin_instructions(elf).atomics;
    keep_within(&mut out, only_in);
    out
}

/// The synchronisation instructions of a file, in svmas, sorted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SpinInstructions {
    /// LOCK-prefixed instructions with memory and XCHG with memory.
    pub atomics: Vec<u64>,
    /// PAUSE instructions.
    pub pauses: Vec<u64>,
}

/// The atomic and PAUSE instructions of `elf`'s executable sections, found in one sweep.
pub fn spin_instructions(elf: &ElfFile) -> SpinInstructions {
    let mut found = SpinInstructions::default();
    for (svma, bytes) in elf.executable_sections() {
        for_each_instruction(svma, bytes, |insn| {
            if is_atomic(insn) {
                found.atomics.push(insn.ip());
            } else if insn.mnemonic() == Mnemonic::Pause {
                found.pauses.push(insn.ip());
            }
        });
    }
    for v in [&mut found.atomics, &mut found.pauses] {
        v.sort_unstable();
        v.dedup();
    }
    found
}

/// Keeps the addresses that lie in one of `ranges` (all of them when None).
pub fn keep_within(addrs: &mut Vec<u64>, ranges: Option<&[Range<u64>]>) {
    if let Some(ranges) = ranges {
        addrs.retain(|a| ranges.iter().any(|r| r.contains(a)));
    }
}

/// Whether `elf`'s code reads the time-stamp counter (rdtsc/rdtscp) anywhere: only then
/// does the tracer need to trap it, which makes every ptrace stop dearer on VMs.
pub fn reads_time_stamp_counter(elf: &ElfFile) -> bool {
    let mut out = Vec::new();
    for (svma, bytes) in elf.executable_sections() {
        sweep(
            svma,
            bytes,
            |i| matches!(i.mnemonic(), Mnemonic::Rdtsc | Mnemonic::Rdtscp),
            &mut out,
        );
    }
    !out.is_empty()
}

/// Decodes `bytes` (mapped at `svma`) and pushes the addresses of the instructions `wanted`
/// selects.
fn sweep(svma: u64, bytes: &[u8], wanted: impl Fn(&Instruction) -> bool, out: &mut Vec<u64>) {
    for_each_instruction(svma, bytes, |insn| {
        if wanted(insn) {
            out.push(insn.ip());
        }
    });
}

/// True for LOCK-prefixed instructions with a memory operand and XCHG with memory.
pub fn is_atomic(insn: &Instruction) -> bool {
    let has_memory = (0..insn.op_count()).any(|i| insn.op_kind(i) == OpKind::Memory);
    has_memory && (insn.has_lock_prefix() || insn.mnemonic() == Mnemonic::Xchg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::test_build::build;
    use std::path::{Path, PathBuf};

    const PROGRAM: &str = r#"
#include <stdio.h>
long counter;
int flag;
long other;
__attribute__((noinline)) void work(void) {
    __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&counter, 2, __ATOMIC_SEQ_CST);
    while (__sync_lock_test_and_set(&flag, 1)) {}
    __sync_lock_release(&flag);
    __atomic_exchange_n(&other, 5, __ATOMIC_SEQ_CST);
    long expected = 0;
    __atomic_compare_exchange_n(&other, &expected, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
int main(void) { work(); printf("%ld\n", counter); return 0; }
"#;

    /// Compiles `PROGRAM` with gcc into a temp dir; `None` when gcc is missing.
    fn compile(extra: &[&str]) -> Option<PathBuf> {
        let mut args = vec!["-O2", "-g"];
        args.extend_from_slice(extra);
        build(
            &format!("atomics{}", extra.len()),
            "gcc",
            &args,
            "a.c",
            PROGRAM,
        )
    }

    #[test]
    fn finds_atomics_in_compiled_program() {
        let Some(exe) = compile(&[]) else {
            eprintln!("gcc not available; skipping");
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let all = atomic_instruction_addresses(&elf, None);
        // 2 x lock xadd/add, 1 xchg (test-and-set), 1 xchg (exchange), 1 lock cmpxchg.
        assert!(all.len() >= 5, "{all:x?}");
        let ranges = elf.dwarf_code_ranges();
        assert!(!ranges.is_empty());
        let own = atomic_instruction_addresses(&elf, Some(&ranges));
        assert!(own.len() >= 5, "{own:x?}");
        for a in &own {
            let (name, _) = elf.symbolize(*a).unwrap();
            assert_eq!(name, "work");
        }
        std::fs::remove_dir_all(exe.parent().unwrap()).unwrap();
    }

    #[test]
    fn finds_pause_in_a_spin_loop() {
        let source = "int flag;\nint main(void){while(!__atomic_load_n(&flag, __ATOMIC_ACQUIRE)) __builtin_ia32_pause(); return 0;}\n";
        let Some(exe) = build("pause", "gcc", &["-O1", "-g"], "p.c", source) else {
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let found = spin_instructions(&elf);
        let mut own = found.pauses.clone();
        keep_within(&mut own, Some(&elf.dwarf_code_ranges()));
        assert_eq!(own.len(), 1, "{found:x?}");
        assert_eq!(elf.symbolize(own[0]).unwrap().0, "main");
        assert!(found.atomics.is_empty() || !found.atomics.contains(&own[0]));
    }

    #[test]
    fn classifies_pause() {
        // pause ; nop
        let bytes = [0xf3, 0x90, 0x90];
        let mut out = Vec::new();
        sweep(
            0x1000,
            &bytes,
            |i| i.mnemonic() == Mnemonic::Pause,
            &mut out,
        );
        assert_eq!(out, vec![0x1000]);
    }

    #[test]
    fn true_has_few_atomics() {
        let elf = ElfFile::load(Path::new("/bin/true")).unwrap();
        let all = atomic_instruction_addresses(&elf, None);
        assert!(all.len() < 50, "{}", all.len());
    }

    #[test]
    fn classifies_encodings() {
        // lock add [rax], ecx ; xchg [rax], ecx ; xchg eax, ecx ; add [rax], ecx
        let bytes = [0xf0, 0x01, 0x08, 0x87, 0x08, 0x91, 0x01, 0x08];
        let mut out = Vec::new();
        sweep(0x1000, &bytes, is_atomic, &mut out);
        assert_eq!(out, vec![0x1000, 0x1003]);
    }

    #[test]
    fn time_stamp_counter_reads_are_found() {
        let source = "#include <x86intrin.h>\nint main(void){return (int)__rdtsc();}\n";
        if let Some(exe) = build("tsc", "gcc", &["-O1"], "t.c", source) {
            assert!(reads_time_stamp_counter(&ElfFile::load(&exe).unwrap()));
        }
        assert!(!reads_time_stamp_counter(
            &ElfFile::load(Path::new("/bin/true")).unwrap()
        ));
    }
}
