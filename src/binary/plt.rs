//! PLT entries: the stubs through which the program calls functions of shared libraries.
//! A breakpoint on `memcpy@plt` sees exactly the program's own calls to memcpy (not libc's
//! internal ones), whatever implementation glibc's IFUNC resolver picked.

use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};

use super::elf::ElfFile;

/// The PLT stubs of `elf` as (imported function name, svma of the stub's first byte).
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
    }
}
