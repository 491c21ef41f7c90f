//! The code ranges of a file's `.eh_frame` FDEs: on x86-64 every function the compiler
//! emits has one (unwinding tables are on by default for C, C++ and Rust), so they bound
//! functions where a stripped file has no symbols.

use std::ops::Range;

use gimli::{BaseAddresses, CieOrFde, EhFrame, LittleEndian, UnwindSection};

use super::elf::ElfFile;

/// The svma ranges of the FDEs of `elf`'s `.eh_frame`, sorted by start; empty when the
/// file has none or they cannot be read.
pub fn unwind_function_ranges(elf: &ElfFile) -> Vec<Range<u64>> {
    let Some(eh) = elf.section(".eh_frame") else {
        return Vec::new();
    };
    let mut bases = BaseAddresses::default().set_eh_frame(eh.svma);
    if let Some(text) = elf.section(".text") {
        bases = bases.set_text(text.svma);
    }
    if let Some(got) = elf.section(".got") {
        bases = bases.set_got(got.svma);
    }
    let section = EhFrame::new(eh.data, LittleEndian);
    let mut entries = section.entries(&bases);
    let mut out = Vec::new();
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        if let Ok(fde) = partial.parse(EhFrame::cie_from_offset) {
            let start = fde.initial_address();
            if fde.len() > 0 {
                out.push(start..start.saturating_add(fde.len()));
            }
        }
    }
    out.sort_by_key(|r| (r.start, r.end));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_stripped_system_binary_has_its_functions_in_eh_frame() {
        let elf = ElfFile::load(Path::new("/bin/true")).unwrap();
        let ranges = unwind_function_ranges(&elf);
        assert!(ranges.len() > 10, "{}", ranges.len());
        let text: Vec<_> = elf.executable_sections();
        // Every range lies in executable code.
        for r in &ranges {
            assert!(
                text.iter()
                    .any(|(svma, b)| r.start >= *svma && r.end <= svma + b.len() as u64),
                "{r:x?}"
            );
        }
    }
}
