//! PLT entries: the stubs through which the program calls functions of shared libraries.
//! A breakpoint on `memcpy@plt` sees exactly the program's own calls to memcpy (not libc's
//! internal ones), whatever implementation glibc's IFUNC resolver picked. Code built
//! without a PLT (Rust's default, C with `-fno-plt`) calls through the GOT slot itself:
//! [`got_calls`] finds those call sites.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic, OpKind, Register};

use super::elf::ElfFile;

/// The PLT stub of `elf` whose 16 bytes hold `svma`, as (imported function name, offset
/// into the stub). Each file's stubs are found once per process: naming the sites of a
/// binary without symbols asks for thousands of addresses, and finding the stubs parses
/// the whole file.
pub fn plt_stub_at(elf: &ElfFile, svma: u64) -> Option<(String, u64)> {
    type Stubs = Mutex<HashMap<PathBuf, Arc<Vec<(String, u64)>>>>;
    static STUBS: OnceLock<Stubs> = OnceLock::new();
    let cache = STUBS.get_or_init(Default::default);
    let known = (cache.lock().unwrap_or_else(|e| e.into_inner()))
        .get(elf.path())
        .cloned();
    let stubs = known.unwrap_or_else(|| {
        let found = Arc::new(plt_entries(elf));
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(elf.path().to_path_buf())
            .or_insert(found)
            .clone()
    });
    // Sorted by address, 16 bytes apart: only the last stub at or below `svma` can hold it.
    let below = stubs.partition_point(|&(_, stub)| stub <= svma);
    let (name, stub) = stubs.get(below.checked_sub(1)?)?;
    (svma < stub + 16).then(|| (name.clone(), svma - stub))
}

/// The PLT stubs of `elf` as (imported function name, svma of the stub's first byte),
/// sorted by address.
pub fn plt_entries(elf: &ElfFile) -> Vec<(String, u64)> {
    let Ok(parsed) = goblin::elf::Elf::parse(elf.data()) else {
        return Vec::new();
    };
    // GOT slot address → imported name, from the PLT relocations.
    let mut slot_names = std::collections::HashMap::new();
    for r in parsed.pltrelocs.iter() {
        if let Some(sym) = parsed.dynsyms.get(r.r_sym) {
            if let Some(name) = parsed.dynstrtab.get_at(sym.st_name) {
                slot_names.insert(r.r_offset, name.to_string());
            }
        }
    }
    let mut out = Vec::new();
    for section in [".plt.sec", ".plt"] {
        let Some(sec) = elf.section(section) else {
            continue;
        };
        let mut d = Decoder::with_ip(64, sec.data, sec.svma, DecoderOptions::NONE);
        for insn in &mut d {
            let indirect_jump = insn.mnemonic() == Mnemonic::Jmp
                && insn.op_count() == 1
                && insn.op0_kind() == OpKind::Memory
                && insn.memory_base() == Register::RIP;
            if !indirect_jump {
                continue;
            }
            if let Some(name) = slot_names.get(&insn.ip_rel_memory_address()) {
                out.push((name.clone(), insn.ip() & !0xf));
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    out.sort_by_key(|(_, a)| *a);
    out.dedup_by_key(|(_, a)| *a);
    out
}

/// A call or jump through a RIP-relative slot (`call *malloc@GOTPCREL(%rip)`, Rust's way
/// to call shared libraries). The slot is written by the dynamic loader, never raced on.
pub(crate) fn is_call_through_slot(insn: &iced_x86::Instruction) -> bool {
    matches!(
        insn.flow_control(),
        FlowControl::IndirectCall | FlowControl::IndirectBranch
    ) && insn.is_ip_rel_memory_operand()
}

/// The instructions of `elf`'s executable sections outside its PLT that call or jump
/// through the GOT slot of an imported function, as (function name, svma). Only functions
/// `wanted` reports true for are looked for. (A hook tells a call from a tail jump by
/// decoding it: only a call needs its return address pushed.)
pub fn got_calls(elf: &ElfFile, wanted: impl Fn(&str) -> bool) -> Vec<(String, u64)> {
    let Ok(parsed) = goblin::elf::Elf::parse(elf.data()) else {
        return Vec::new();
    };
    let mut slot_names = std::collections::HashMap::new();
    for r in parsed.dynrelas.iter().chain(parsed.pltrelocs.iter()) {
        let Some(sym) = parsed.dynsyms.get(r.r_sym) else {
            continue;
        };
        match parsed.dynstrtab.get_at(sym.st_name) {
            Some(name) if sym.st_value == 0 && wanted(name) => {
                slot_names.insert(r.r_offset, name.to_string());
            }
            _ => {}
        }
    }
    if slot_names.is_empty() {
        return Vec::new();
    }
    let plt: Vec<std::ops::Range<u64>> = [".plt", ".plt.sec", ".plt.got"]
        .into_iter()
        .filter_map(|n| elf.section(n))
        .map(|s| s.svma..s.svma + s.data.len() as u64)
        .collect();
    let mut out = Vec::new();
    for (svma, bytes) in elf.executable_sections() {
        if plt.iter().any(|r| r.contains(&svma)) {
            continue;
        }
        let mut d = Decoder::with_ip(64, bytes, svma, DecoderOptions::NONE);
        for insn in &mut d {
            if !is_call_through_slot(&insn) {
                continue;
            }
            if let Some(name) = slot_names.get(&insn.ip_rel_memory_address()) {
                out.push((name.clone(), insn.ip()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn finds_the_stubs_of_imported_functions() {
        let elf = ElfFile::load(Path::new("/bin/ls")).unwrap();
        let entries = plt_entries(&elf);
        assert!(!entries.is_empty());
        assert!(
            entries
                .iter()
                .any(|(n, _)| n == "malloc" || n == "memcpy" || n == "free"),
            "{entries:?}"
        );
        for (_, a) in &entries {
            assert_eq!(a % 16, 0);
        }
        // Every byte of a stub names it; the byte after the last stub names nothing.
        let (name, last) = entries.last().unwrap().clone();
        assert_eq!(plt_stub_at(&elf, last + 15), Some((name.clone(), 15)));
        assert_eq!(plt_stub_at(&elf, last), Some((name, 0)));
        assert_eq!(plt_stub_at(&elf, last + 16), None);
        let (first_name, first) = entries[0].clone();
        assert_eq!(plt_stub_at(&elf, first + 3), Some((first_name, 3)));
        assert_eq!(plt_stub_at(&elf, first - 1), None);
    }
}
