//! Address ranges of DWARF compile units (gimli), for [`ElfFile::dwarf_code_ranges`].

use std::ops::Range;

use gimli::{EndianSlice, LittleEndian};

use super::elf::ElfFile;

/// The DWARF sections of an ELF file, borrowed from its bytes.
pub(crate) type Dwarf<'a> = gimli::Dwarf<EndianSlice<'a, LittleEndian>>;

/// The file's DWARF (sections missing from the file are empty), or `None` when the file
/// has no `.debug_info` or it is compressed (not supported).
pub(crate) fn load_dwarf(elf: &ElfFile) -> Option<Dwarf<'_>> {
    if !elf.has_debug_info() || elf.is_section_compressed(".debug_info") {
        return None;
    }
    let load = |id: gimli::SectionId| -> Result<EndianSlice<'_, LittleEndian>, gimli::Error> {
        let data = elf.section(id.name()).map_or(&[][..], |s| s.data);
        Ok(EndianSlice::new(data, LittleEndian))
    };
    gimli::Dwarf::load(load).ok()
}

/// The sorted, merged svma ranges of all compile units; empty on any DWARF error.
pub(crate) fn unit_ranges(elf: &ElfFile) -> Vec<Range<u64>> {
    let Some(dwarf) = load_dwarf(elf) else {
        return Vec::new();
    };
    let mut ranges = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let Ok(mut iter) = dwarf.unit_ranges(&unit) else {
            continue;
        };
        while let Ok(Some(r)) = iter.next() {
            if r.begin < r.end && r.begin != 0 {
                ranges.push(r.begin..r.end);
            }
        }
    }
    merge(ranges)
}

/// Sorts ranges and merges overlapping or touching ones.
pub(crate) fn merge(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_ranges() {
        assert_eq!(merge(vec![5..8, 1..3, 3..4, 7..10]), vec![1..4, 5..10]);
    }
}
